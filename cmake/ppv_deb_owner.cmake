# ppv_deb_owner.cmake - which Debian package holds a library (the .deb's
# Depends and Recommends, cmake/ppv_deb.cmake; the MPI transport's hint).

# ppv_deb_owner(VAR LIBRARY): "package (>= version)" for the Debian package
# that holds LIBRARY's real file (its upstream version here: what this
# build was linked against), or "" where dpkg does not know it.
function(ppv_deb_owner var library)
  set(${var} "" PARENT_SCOPE)
  find_program(PPV_DPKG_QUERY dpkg-query)
  if(NOT PPV_DPKG_QUERY OR NOT library OR NOT EXISTS "${library}")
    return()
  endif()
  file(REAL_PATH "${library}" real)
  # (dpkg knows some files of a merged /usr by their /lib path: libc6's)
  string(REGEX REPLACE "^/usr/" "/" unmerged "${real}")
  foreach(path IN ITEMS "${real}" "${unmerged}")
    execute_process(COMMAND ${PPV_DPKG_QUERY} -S "${path}" OUTPUT_VARIABLE owner
                    RESULT_VARIABLE rc ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(rc EQUAL 0)
      break()
    endif()
  endforeach()
  if(NOT rc EQUAL 0 OR NOT owner MATCHES "^([^:, ]+)")
    return()
  endif()
  set(package ${CMAKE_MATCH_1})
  execute_process(COMMAND ${PPV_DPKG_QUERY} -W -f=\${Version} ${package} OUTPUT_VARIABLE version
                  RESULT_VARIABLE rc ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
  # the upstream version: this build's, without Debian's revision
  if(rc EQUAL 0 AND version MATCHES "^([0-9]+:)?[0-9][0-9.]*[0-9]")
    set(${var} "${package} (>= ${CMAKE_MATCH_0})" PARENT_SCOPE)
  else()
    set(${var} "${package}" PARENT_SCOPE)
  endif()
endfunction()
