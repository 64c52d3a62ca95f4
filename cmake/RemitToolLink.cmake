# How the tools (remitc, remitvm, remit) are linked in a Release build with REMIT_STATIC_DEPS.
#
# A tool is one 12 MiB executable, yet a small run executes about a thousand of its functions.
# Linked in the default order those are scattered over 8 MiB of text, and the kernel maps whole
# page-cache folios around each page touched, so a tiny run was resident at 6.9 MiB (Lua 5.4: 2.5).
# So, when an LLVM linker of version 15 or later is installed (Debian 12: lld-16, which
# scripts/install-deps installs):
#   - every function and object goes in a section of its own (-ffunction-sections -fdata-sections),
#   - the linker drops the sections nothing reaches (--gc-sections),
#   - and lays out first the functions that cmake/tools.order lists: those that runs of the
#     benchmark programs and of the compiler execute, the smallest run's first (scripts/symbol-order
#     writes the file from callgrind runs; a name the build no longer has is skipped, and the
#     ctest `layout: …` fails once more than a tenth of the names are gone, or the layout or the
#     packed relocations are not what this promises: tests/layout/check_tool_layout.py).
# Relative relocations stay packed (DT_RELR, with the GLIBC_ABI_DT_RELR version glibc requires,
# which lld 14 does not add). Without such a linker the tools link with the default linker and
# DT_RELR where it has it, as before. docs/performance.md ("The tools' executed functions first") has the measurements.
#
# remit_tool_link_options(TARGET) applies the choice to one tool.

include(CheckCXXSourceCompiles)
include(CheckLinkerFlag)

option(REMIT_ORDER_TOOLS "Link the tools with lld, their executed functions first, when lld 15+ is installed" ON)
set(REMIT_SYMBOL_ORDER "${PROJECT_SOURCE_DIR}/cmake/tools.order")
set(REMIT_ORDERED_LINK OFF)
if(REMIT_ORDER_TOOLS AND REMIT_STATIC_DEPS AND CMAKE_BUILD_TYPE STREQUAL "Release" AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
  # Only versioned LLVM directories: the plain `ld.lld` on PATH may be lld 14.
  find_program(REMIT_LLD NAMES ld.lld NO_DEFAULT_PATH
               PATHS /usr/lib/llvm-20/bin /usr/lib/llvm-19/bin /usr/lib/llvm-18/bin /usr/lib/llvm-17/bin
                     /usr/lib/llvm-16/bin /usr/lib/llvm-15/bin)
  if(REMIT_LLD)
    get_filename_component(REMIT_LLD_DIR "${REMIT_LLD}" DIRECTORY)
    # -B makes GCC's -fuse-ld=lld find that directory's ld.lld; --fatal-warnings turns an
    # unknown -z value (how an older lld answers pack-relative-relocs) into a failed check.
    # (check_linker_flag would replace CMAKE_REQUIRED_LINK_OPTIONS with its one flag.)
    set(CMAKE_REQUIRED_LINK_OPTIONS -B${REMIT_LLD_DIR} -fuse-ld=lld -Wl,--fatal-warnings -Wl,-z,pack-relative-relocs
        -Wl,--symbol-ordering-file=${REMIT_SYMBOL_ORDER} -Wl,--no-warn-symbol-ordering)
    check_cxx_source_compiles("int main() { return 0; }" REMIT_LLD_ORDERS_SYMBOLS)
    unset(CMAKE_REQUIRED_LINK_OPTIONS)
    if(REMIT_LLD_ORDERS_SYMBOLS)
      set(REMIT_ORDERED_LINK ON)
    endif()
  endif()
endif()

if(REMIT_ORDERED_LINK)
  add_compile_options(-ffunction-sections -fdata-sections)
else()
  check_linker_flag(CXX "-Wl,-z,pack-relative-relocs" REMIT_LINKER_PACKS_RELOCS)
endif()

function(remit_tool_link_options tool)
  if(NOT REMIT_STATIC_DEPS)
    return()
  endif()
  # The tools carry their C++ runtime (see REMIT_STATIC_DEPS in the top-level CMakeLists.txt).
  target_link_options(${tool} PRIVATE -static-libstdc++ -static-libgcc)
  if(REMIT_ORDERED_LINK)
    # Names the order file lists and the build lacks are expected after any change, and are
    # skipped without a word.
    target_link_options(${tool} PRIVATE -B${REMIT_LLD_DIR} -fuse-ld=lld -Wl,-z,pack-relative-relocs
                        -Wl,--gc-sections -Wl,--symbol-ordering-file=${REMIT_SYMBOL_ORDER}
                        -Wl,--no-warn-symbol-ordering)
    set_property(TARGET ${tool} APPEND PROPERTY LINK_DEPENDS "${REMIT_SYMBOL_ORDER}")
  elseif(REMIT_LINKER_PACKS_RELOCS)
    # 24,000 relative relocations (vtables and tables of pointers in a PIE) in the packed form:
    # 7 KiB instead of 560 KiB that the loader reads at every start.
    target_link_options(${tool} PRIVATE -Wl,-z,pack-relative-relocs)
  endif()
endfunction()
