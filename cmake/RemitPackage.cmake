# The installable embedding library libremit (target remit_library, exported as Remit::remit) and the install rules: headers,
# library, CMake package, pkg-config file, and the tools when they are built (docs/embedding.md).
#
# REMIT_SHARED_LIBRARY=ON (default) builds libremit.so exporting only the embedding API (a linker
# version script hides everything else, including the fmt and xxHash it carries; OpenSSL's
# libcrypto is loaded with dlopen when a signature is first checked, as in the tools);
# OFF builds libremit.a, one archive holding every layer and those dependencies, so a C or C++
# host links it with -lpthread -ldl only.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

option(REMIT_SHARED_LIBRARY "Build the embedding library as a shared library" ON)

set(REMIT_LIBRARY_LAYERS remit_session remit_broker remit_vm remit_compiler remit_bytecode remit_runtime)
if(REMIT_SHARED_LIBRARY)
  add_library(remit_library SHARED ${PROJECT_SOURCE_DIR}/cmake/package/library.cpp)
  target_link_libraries(remit_library PRIVATE -Wl,--whole-archive remit_session -Wl,--no-whole-archive ${REMIT_LIBRARY_LAYERS})
  # The C++ runtime stays the system's shared one: the API passes std::string across.
  target_link_options(remit_library PRIVATE "-Wl,--version-script=${PROJECT_SOURCE_DIR}/cmake/package/exports.map")
  set_target_properties(remit_library PROPERTIES LINK_DEPENDS ${PROJECT_SOURCE_DIR}/cmake/package/exports.map
                        VERSION ${PROJECT_VERSION} SOVERSION ${PROJECT_VERSION_MAJOR})
else()
  add_library(remit_library STATIC ${PROJECT_SOURCE_DIR}/cmake/package/library.cpp)
  # One archive: every layer's objects and the static dependencies, merged after the build.
  set(parts "")
  foreach(layer IN LISTS REMIT_LIBRARY_LAYERS)
    list(APPEND parts "$<TARGET_FILE:${layer}>")
  endforeach()
  if(REMIT_STATIC_DEPS)
    list(APPEND parts "$<TARGET_FILE:remit_fmt_impl>" "${REMIT_XXHASH_ARCHIVE}")
  endif()
  add_custom_command(TARGET remit_library POST_BUILD
                     COMMAND ${CMAKE_COMMAND} -DAR=${CMAKE_AR} -DOUT=$<TARGET_FILE:remit_library> "-DPARTS=${parts}"
                             -P ${PROJECT_SOURCE_DIR}/cmake/package/merge_archives.cmake
                     VERBATIM)
  add_dependencies(remit_library ${REMIT_LIBRARY_LAYERS})
endif()
target_include_directories(remit_library INTERFACE $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}/include>
                           $<INSTALL_INTERFACE:${CMAKE_INSTALL_INCLUDEDIR}>)
if(NOT REMIT_SHARED_LIBRARY)
  # What the merged archive's objects need from the system.
  target_link_libraries(remit_library INTERFACE $<INSTALL_INTERFACE:Threads::Threads> $<INSTALL_INTERFACE:${CMAKE_DL_LIBS}>)
endif()
# The library is libremit.{so,a} and Remit::remit; the target has another name because `remit`
# is the prototype-compatible front end's executable.
set_target_properties(remit_library PROPERTIES OUTPUT_NAME remit EXPORT_NAME remit)

install(TARGETS remit_library EXPORT RemitTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR} ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(FILES include/remit/remit.hpp include/remit/remit.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/remit)
install(EXPORT RemitTargets NAMESPACE Remit:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Remit)
configure_package_config_file(cmake/package/RemitConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/RemitConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Remit)
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/RemitConfigVersion.cmake
                                 COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/RemitConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/RemitConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/Remit)
configure_file(cmake/package/remit.pc.in ${CMAKE_CURRENT_BINARY_DIR}/remit.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/remit.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
if(REMIT_BUILD_CLI)
  install(TARGETS remitc remitvm remit RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
endif()
