# ppv_package.cmake - the installed library and how outside programs find it
# (included by the top-level CMakeLists.txt after the layers).
#
# libppv holds the spec, kernels, engine, golden and fuzz layers. It is linked from
# the layers' own objects, so nothing is compiled twice and each file keeps
# its layer's flags (kernels and golden: -O3 -ffp-contract=off); the in-tree
# targets (ppv_kernels, ppv_engine, ppv_golden) stay as they are for the
# tool, the tests and the benchmarks. Static by default, shared with
# -DBUILD_SHARED_LIBS=ON. Outside programs get it two ways:
#   find_package(ppv) -> ppv::ppv            lib/cmake/ppv/
#   pkg-config ppv                           lib/pkgconfig/ppv.pc
# and include the public headers as <ppv/ppv_engine.h> and so on.
include(CMakePackageConfigHelpers)
find_package(Threads REQUIRED)
# Its own name for HDF5, because the exported target names it and
# ppvConfig.cmake must make the same target in the outside project.
pkg_check_modules(ppv_hdf5 REQUIRED QUIET IMPORTED_TARGET hdf5)

set(ppv_layers ppv_kernels ppv_engine ppv_golden ppv_fuzz)
if(BUILD_SHARED_LIBS)
  set_target_properties(${ppv_layers} PROPERTIES POSITION_INDEPENDENT_CODE ON)
endif()
add_library(ppv_library $<TARGET_OBJECTS:ppv_kernels> $<TARGET_OBJECTS:ppv_engine>
                        $<TARGET_OBJECTS:ppv_golden> $<TARGET_OBJECTS:ppv_fuzz>)
add_dependencies(ppv_library ${ppv_layers})
set_target_properties(ppv_library PROPERTIES
  OUTPUT_NAME ppv
  EXPORT_NAME ppv
  LINKER_LANGUAGE C
  VERSION ${PROJECT_VERSION}
  SOVERSION ${PROJECT_VERSION_MAJOR})
target_link_libraries(ppv_library PRIVATE PkgConfig::ppv_hdf5 Threads::Threads m)
get_target_property(ppv_library_type ppv_library TYPE)

install(TARGETS ppv_library EXPORT ppvTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
# A stripped install (cmake --install --strip, and the .deb) strips the
# debug sections of the static library too, which name this build's
# folders; install's own strip leaves an archive as it is.
if(ppv_library_type STREQUAL "STATIC_LIBRARY" AND CMAKE_STRIP)
  install(CODE "if(CMAKE_INSTALL_DO_STRIP)
  execute_process(COMMAND \"${CMAKE_STRIP}\" --strip-debug
    \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/$<TARGET_FILE_NAME:ppv_library>\")
endif()")
endif()

# The CMake package, relocatable: paths are relative to where it lies.
set(ppv_cmakedir ${CMAKE_INSTALL_LIBDIR}/cmake/ppv)
if(ppv_library_type STREQUAL "STATIC_LIBRARY")
  set(PPV_STATIC_LIBRARY ON) # the outside link needs HDF5, m and threads too
else()
  set(PPV_STATIC_LIBRARY OFF)
endif()
install(EXPORT ppvTargets NAMESPACE ppv:: DESTINATION ${ppv_cmakedir})
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/ppvConfig.cmake.in
  ${PROJECT_BINARY_DIR}/ppvConfig.cmake INSTALL_DESTINATION ${ppv_cmakedir})
# 0.x: a minor release may change the API.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/ppvConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/ppvConfig.cmake ${PROJECT_BINARY_DIR}/ppvConfigVersion.cmake
  DESTINATION ${ppv_cmakedir})

# ppv.pc, relocatable too: its prefix is found from ${pcfiledir}, so
# `cmake --install --prefix DIR` gives a file that works in DIR. A static
# libppv needs HDF5, m and threads on every link, so they are public there;
# a shared one carries them itself, so they are private.
set(ppv_pcdir ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
file(RELATIVE_PATH PPV_PC_PREFIX ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
string(REGEX REPLACE "/$" "" PPV_PC_PREFIX "${PPV_PC_PREFIX}")
file(RELATIVE_PATH PPV_PC_LIBDIR ${CMAKE_INSTALL_PREFIX} ${CMAKE_INSTALL_FULL_LIBDIR})
file(RELATIVE_PATH PPV_PC_BINDIR ${CMAKE_INSTALL_PREFIX} ${CMAKE_INSTALL_FULL_BINDIR}) # ppv itself (python/ppv/cli.py)
file(RELATIVE_PATH PPV_PC_INCLUDEDIR ${CMAKE_INSTALL_PREFIX} ${CMAKE_INSTALL_FULL_INCLUDEDIR})
set(ppv_pc_libs "-L\${libdir} -lppv")
set(ppv_pc_deps "-lm -pthread")
if(PPV_STATIC_LIBRARY)
  set(PPV_PC_LINK "Requires: hdf5\nLibs: ${ppv_pc_libs} ${ppv_pc_deps}")
else()
  set(PPV_PC_LINK "Requires.private: hdf5\nLibs: ${ppv_pc_libs}\nLibs.private: ${ppv_pc_deps}")
endif()
configure_file(${PROJECT_SOURCE_DIR}/cmake/ppv.pc.in ${PROJECT_BINARY_DIR}/ppv.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/ppv.pc DESTINATION ${ppv_pcdir})
