# Merges static archives into one (cmake -DAR=... -DOUT=... -DPARTS=a.a;b.a -P merge_archives.cmake),
# with an MRI script so members of the same name in different archives are all kept.
set(script "CREATE ${OUT}.merging\n")
foreach(part IN LISTS PARTS)
  string(APPEND script "ADDLIB ${part}\n")
endforeach()
string(APPEND script "SAVE\nEND\n")
file(WRITE "${OUT}.mri" "${script}")
execute_process(COMMAND ${AR} -M INPUT_FILE "${OUT}.mri" RESULT_VARIABLE result)
if(NOT result EQUAL 0)
  message(FATAL_ERROR "merging archives into ${OUT} failed")
endif()
file(RENAME "${OUT}.merging" "${OUT}")
