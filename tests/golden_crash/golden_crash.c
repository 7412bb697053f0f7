/* golden_crash.c - a stand-in for the golden-file module (libppv_golden.so)
 * whose reading of a file crashes, as a corrupted file can crash the HDF5
 * library itself. ppv reads files in a child process for that reason; the
 * tests point $PPV_GOLDEN_MODULE here to see that the parent says so:
 * exit 2, the file named, and under --json an object with the reason. */
#include <signal.h>

#include "ppv_golden.h"

int64_t ppv_golden_bad_heap(const char *path) {
    (void)path;
    return -1; /* nothing for the CPU bound to catch: the crash is a signal */
}

int ppv_conform(const char *path, const ppv_conform_options *o, ppv_conform_report *out, char *err,
                size_t errlen) {
    (void)path, (void)o, (void)out, (void)err, (void)errlen;
    raise(SIGILL); /* not SIGSEGV: ASan would take that one and exit 1 */
    return -1;
}
