/* failwrite.c - a preloaded library (LD_PRELOAD) that makes one write
 * fail with ENOSPC, for the I/O half of the failure sweep (sweep.sh). It
 * defines write, pwrite, pwrite64 and writev, so it reaches the HDF5
 * library's writes and the C library's buffered ones alike; standard
 * error is never failed (it carries the message).
 *
 *   PPV_FAIL_WRITE=N   the N-th write fails (once)
 *   PPV_FAIL_WRITE_COUNTS=F  at exit, each process appends its count to F
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/uio.h>
#include <unistd.h>

static long fail_at = -1, writes;
static const char *counts_path;
static ssize_t (*real_write)(int, const void *, size_t);
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);
static ssize_t (*real_pwrite64)(int, const void *, size_t, off_t);
static ssize_t (*real_writev)(int, const struct iovec *, int);

static void report(void) {
    int fd = open(counts_path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) return;
    char buf[32];
    int n = snprintf(buf, sizeof buf, "%ld\n", writes);
    if (n > 0) real_write(fd, buf, (size_t)n);
    close(fd);
}

__attribute__((constructor)) static void init(void) {
    const char *w = getenv("PPV_FAIL_WRITE");
    fail_at = w ? atol(w) : -1;
    real_write = (ssize_t(*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
    real_pwrite = (ssize_t(*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite");
    real_pwrite64 = (ssize_t(*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite64");
    real_writev = (ssize_t(*)(int, const struct iovec *, int))dlsym(RTLD_NEXT, "writev");
    counts_path = getenv("PPV_FAIL_WRITE_COUNTS");
    if (counts_path) atexit(report);
}

static int fails(int fd) {
    if (fd == 2) return 0;
    if (++writes == fail_at) {
        errno = ENOSPC;
        return 1;
    }
    return 0;
}

ssize_t write(int fd, const void *buf, size_t n) {
    return fails(fd) ? -1 : real_write(fd, buf, n);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off) {
    return fails(fd) ? -1 : real_pwrite(fd, buf, n, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off) {
    return fails(fd) ? -1 : real_pwrite64(fd, buf, n, off);
}

ssize_t writev(int fd, const struct iovec *iov, int n) {
    return fails(fd) ? -1 : real_writev(fd, iov, n);
}
