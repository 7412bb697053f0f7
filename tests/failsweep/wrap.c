/* wrap.c - allocation failure injection linked into a test build of the
 * ppv command (cmake -DPPV_FAILINJECT=ON: the linker's --wrap sends ppv's
 * own calls to malloc, calloc, realloc, aligned_alloc and strdup here).
 * Libraries' allocations are left alone: what is swept is ppv's handling
 * of a failure, and with AddressSanitizer in the same build its leak
 * checker follows every block.
 *
 *   PPV_FAIL_ALLOC=N   the N-th allocation returns NULL (once)
 *   PPV_FAIL_COUNTS=F  at exit, each process appends its count to F
 *   PPV_FAIL_TRACE=1   the failing call's stack goes to standard error
 */
#define _GNU_SOURCE
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t a, size_t b);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t a, size_t n);
char *__real_strdup(const char *s);

static long fail_at = -1, count;
static int ready;
static const char *counts_path;

static void report(void) {
    if (!counts_path) return;
    int fd = open(counts_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) return;
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%ld\n", count);
    if (n > 0 && write(fd, buf, (size_t)n) < 0) n = 0;
    close(fd);
}

static int fails(void) {
    if (!ready) {
        ready = 1;
        const char *a = getenv("PPV_FAIL_ALLOC");
        fail_at = a ? atol(a) : -1;
        counts_path = getenv("PPV_FAIL_COUNTS");
        if (counts_path) atexit(report);
    }
    if (++count == fail_at) {
        if (getenv("PPV_FAIL_TRACE")) {
            void *frames[32];
            backtrace_symbols_fd(frames, backtrace(frames, 32), 2);
        }
        errno = ENOMEM;
        return 1;
    }
    return 0;
}

void *__wrap_malloc(size_t n) {
    return fails() ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t a, size_t b) {
    return fails() ? NULL : __real_calloc(a, b);
}

void *__wrap_realloc(void *p, size_t n) {
    return fails() ? NULL : __real_realloc(p, n);
}

void *__wrap_aligned_alloc(size_t a, size_t n) {
    return fails() ? NULL : __real_aligned_alloc(a, n);
}

char *__wrap_strdup(const char *s) {
    return fails() ? NULL : __real_strdup(s);
}
