# ppv_deb.cmake - the Debian package: `cpack -G DEB` in a build folder makes
# ppv_VERSION_ARCH.deb of what `cmake --install` installs, under /usr
# (included by the top-level CMakeLists.txt, last). Depends names the
# Debian packages that own the libraries ppv and its Python modules link
# (HDF5, json-c, libpython, libc), found with dpkg at configure time;
# what is loaded only on demand is Recommends (MPI for --transport mpi,
# numpy and h5py for the Python package) or Suggests (GLPK for gen
# optimal). NCCL and CUDA come with NVIDIA's toolkit, not Debian: the
# description says so. tests/install/test_deb.sh builds and checks it.

include(${CMAKE_CURRENT_LIST_DIR}/ppv_deb_owner.cmake)

# the first file of a library list that exists
function(ppv_first_file var)
  set(${var} "" PARENT_SCOPE)
  foreach(f IN LISTS ARGN)
    if(IS_ABSOLUTE "${f}" AND EXISTS "${f}" AND NOT IS_DIRECTORY "${f}")
      set(${var} "${f}" PARENT_SCOPE)
      return()
    endif()
  endforeach()
endfunction()

execute_process(COMMAND ${CMAKE_C_COMPILER} -print-file-name=libc.so.6 OUTPUT_VARIABLE ppv_libc
                OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
ppv_first_file(ppv_libjsonc ${JSONC_LINK_LIBRARIES})
ppv_first_file(ppv_libhdf5 ${ppv_hdf5_LINK_LIBRARIES})
set(ppv_deb_depends "")
foreach(lib IN ITEMS ppv_libc ppv_libjsonc ppv_libhdf5)
  ppv_deb_owner(owner "${${lib}}")
  if(owner)
    list(APPEND ppv_deb_depends "${owner}")
  endif()
endforeach()
if(PPV_HAVE_PYGEN OR PPV_HAVE_PYRANK)
  find_package(Python3 COMPONENTS Interpreter Development QUIET)
  ppv_first_file(ppv_libpython ${Python3_LIBRARIES})
  ppv_deb_owner(owner "${ppv_libpython}")
  if(owner)
    list(APPEND ppv_deb_depends "${owner}")
  endif()
endif()
list(APPEND ppv_deb_depends python3)
set(ppv_deb_recommends python3-numpy python3-h5py)
if(PPV_HAVE_MPI AND PPV_MPI_PACKAGE)
  list(PREPEND ppv_deb_recommends ${PPV_MPI_PACKAGE})
endif()
list(JOIN ppv_deb_depends ", " CPACK_DEBIAN_PACKAGE_DEPENDS)
list(JOIN ppv_deb_recommends ", " CPACK_DEBIAN_PACKAGE_RECOMMENDS)
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "libglpk40, python3-pytest, python3-torch")

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME ppv)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "ppv developers <ppv@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "deterministic test-and-verification framework for pipeline-parallel models")
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
"ppv replays recorded pipeline-parallel runs against golden HDF5 files, checks
schedules for deadlocks under every send semantics, explores real engine
and torch.distributed code under many deterministic interleavings, and
checks PP inference recordings against their contract (ppv conform).
.
Holds the ppv program, libppv with its headers, CMake package and
pkg-config file, the man pages, the shipped golden files, the Python
package ppv (with its pytest plugin) and the modules this build made:
MPI and NCCL transports, the CUDA ops, the Python bridges. The NCCL and
CUDA modules need NVIDIA's CUDA toolkit and driver, which Debian does not
ship; each is loaded only when asked for.")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT) # ppv_VERSION_ARCH.deb
set(CPACK_DEBIAN_PACKAGE_SECTION devel)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
# the bytecode that importing the package writes goes with it
configure_file(${PROJECT_SOURCE_DIR}/cmake/deb-prerm.in ${PROJECT_BINARY_DIR}/deb/prerm @ONLY)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${PROJECT_BINARY_DIR}/deb/prerm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)
# an install from another folder than this build's would not be this build
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR})
include(CPack)
