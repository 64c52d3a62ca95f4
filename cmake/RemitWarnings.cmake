# Warnings and sanitizers live on one private interface target that every Remit target links, so
# consumers of the libraries never inherit our flags.
add_library(remit_warnings INTERFACE)
target_compile_options(remit_warnings INTERFACE -Wall -Wextra -Wpedantic
                       $<$<CXX_COMPILER_ID:GNU>:-Wshadow=local>
                       $<$<BOOL:${REMIT_WERROR}>:-Werror>)
if(REMIT_SANITIZE)
  target_compile_options(remit_warnings INTERFACE -fsanitize=address,undefined
                         -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
  target_link_options(remit_warnings INTERFACE -fsanitize=address,undefined)
endif()
if(REMIT_FUZZ)
  # Every library is instrumented for coverage; only the harnesses link the fuzzer main.
  target_compile_options(remit_warnings INTERFACE -fsanitize=fuzzer-no-link,address,undefined)
  target_link_options(remit_warnings INTERFACE -fsanitize=address,undefined)
endif()
