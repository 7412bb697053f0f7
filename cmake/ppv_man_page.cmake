# ppv_man_page.cmake - writes one man page at build time from the binary
# just built (tools/CMakeLists.txt):
#   cmake -DPPV=path/to/ppv [-DPPV_CMD=check] -DOUT=ppv-check.1 -P ppv_man_page.cmake
# runs `ppv man [PPV_CMD]` and keeps its output as OUT. OUT is written
# through a temporary file, so a failed run leaves no page behind.
foreach(var PPV OUT)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "ppv_man_page.cmake: -D${var}=... is required")
  endif()
endforeach()
set(args man)
if(PPV_CMD)
  list(APPEND args ${PPV_CMD})
endif()
string(REPLACE ";" " " shown "ppv ${args}")

execute_process(COMMAND ${PPV} ${args} OUTPUT_FILE ${OUT}.tmp ERROR_VARIABLE err
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  file(REMOVE ${OUT}.tmp)
  message(FATAL_ERROR "${OUT}: `${shown}` exited with ${rc}, not 0: ${err}"
                      "The man pages come from `ppv man [COMMAND]` (tools/help.c).")
endif()
file(READ ${OUT}.tmp page)
if(NOT page MATCHES "(^|\n)\\.TH ")
  file(REMOVE ${OUT}.tmp)
  message(FATAL_ERROR "${OUT}: `${shown}` printed no roff page (no .TH line)")
endif()
file(RENAME ${OUT}.tmp ${OUT})
