# The folders are the pipeline, and the build enforces it (docs/architecture.md): a library may
# link only libraries of lower layers, so an include that would make a lower layer depend on a
# higher one cannot link, and a link that would is refused here, at configure time.
#
#   runtime → bytecode → compiler | vm → broker → session → cli
#
# compiler and vm share a layer and may not link each other: the compiler never runs code, and the
# VM never sees source. remit_mcp (session/mcp_tools.h) sits in the session folder above the session
# library it uses and below the transports of cli/; it is kept out of the embedding library.
# remit_lsp (session/lsp_server.h, the language server) is at the same layer for the same reason:
# a protocol engine that cli/ starts, kept out of the embedding library (it links only the compiler).
# remit_check_layers() runs after every library is defined.
set(REMIT_LAYERS
  "remit_runtime:0"
  "remit_bytecode:1"
  "remit_compiler:2"
  "remit_vm:2"
  "remit_broker:3"
  "remit_session:4"
  "remit_mcp:5"
  "remit_lsp:5"
  "remit_cli:6")

# -DREMIT_FORBIDDEN_LINK=FROM:TO adds one forbidden link before the check, so a test can prove
# the check fails (tests/CMakeLists.txt, "layers: a forbidden link fails the configure step").
set(REMIT_FORBIDDEN_LINK "" CACHE STRING "For the layer check's own test: FROM:TO, a link to add")

function(remit_layer_of target out)
  set(${out} "" PARENT_SCOPE)
  foreach(entry IN LISTS REMIT_LAYERS)
    string(REPLACE ":" ";" pair "${entry}")
    list(GET pair 0 name)
    list(GET pair 1 rank)
    if(name STREQUAL target)
      set(${out} ${rank} PARENT_SCOPE)
    endif()
  endforeach()
endfunction()

function(remit_check_layers)
  if(REMIT_FORBIDDEN_LINK)
    string(REPLACE ":" ";" pair "${REMIT_FORBIDDEN_LINK}")
    list(GET pair 0 from)
    list(GET pair 1 to)
    target_link_libraries(${from} PUBLIC ${to})
  endif()
  set(problems "")
  foreach(entry IN LISTS REMIT_LAYERS)
    string(REPLACE ":" ";" pair "${entry}")
    list(GET pair 0 target)
    list(GET pair 1 rank)
    if(NOT TARGET ${target})
      continue()  # remit_cli and remit_mcp without REMIT_BUILD_CLI
    endif()
    get_target_property(linked ${target} LINK_LIBRARIES)
    get_target_property(exported ${target} INTERFACE_LINK_LIBRARIES)
    foreach(dep IN LISTS linked exported)
      if(NOT dep OR dep MATCHES "NOTFOUND$")
        continue()
      endif()
      remit_layer_of(${dep} depRank)
      if(NOT depRank STREQUAL "" AND NOT depRank LESS rank)
        list(APPEND problems "${target} (layer ${rank}) links ${dep} (layer ${depRank})")
      endif()
    endforeach()
  endforeach()
  if(problems)
    list(REMOVE_DUPLICATES problems)
    string(REPLACE ";" "\n  " text "${problems}")
    message(FATAL_ERROR "layer check: a library links one of its own or a higher layer:\n  ${text}\n"
                        "The layers are runtime → bytecode → compiler | vm → broker → session → cli "
                        "(cmake/RemitLayers.cmake); move the code to the layer that may use both.")
  endif()
endfunction()
