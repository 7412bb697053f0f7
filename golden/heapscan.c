/* A screen for the global heap collections that HDF5 1.10 cannot load.
 *
 * A global heap collection ("GCOL", where variable-length strings live)
 * carries no checksum, and HDF5 1.10.8 trusts its object sizes: a free
 * object of size 0 makes its loader loop forever, a size past the
 * collection makes it read out of bounds (H5HG__cache_heap_deserialize).
 * This walks every byte run that starts like a collection (signature and
 * version 1) the way that loader does and reports the first one it could
 * not finish. Data bytes can spell such a header by chance (odds of about
 * 2^-40 a byte), so the caller treats a hit as a reason to bound the
 * reading, not as proof of corruption. */
#define _DEFAULT_SOURCE /* madvise */
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ppv_golden.h"

static uint64_t le64(const uint8_t *p) {
    uint64_t v = 0;
    for (int k = 7; k >= 0; k--) v = v << 8 | p[k];
    return v;
}

/* 1 if the collection at d (n bytes to the end of the file) loads: each
 * object header is 16 bytes (index, references, reserved, size) and is
 * followed by its size rounded up to 8; index 0 is free space, whose size
 * counts its header. A tail shorter than a header is free space too. */
static int collection_loads(const uint8_t *d, size_t n) {
    uint64_t size = le64(d + 8);
    if (size < 16 || size > n) return 0;
    size_t p = 16, end = (size_t)size;
    while (end - p >= 16) {
        uint64_t osize = le64(d + p + 8);
        int free_space = d[p] == 0 && d[p + 1] == 0;
        uint64_t need = free_space ? osize : 16 + ((osize + 7) & ~(uint64_t)7);
        if (need == 0 || osize > end - p || need > end - p) return 0;
        p += (size_t)need;
    }
    return 1;
}

/* The first bad collection whose signature starts in [from, to) of the n
 * bytes at data (a collection may reach past to), or -1. */
static int64_t scan_range(const uint8_t *data, size_t n, size_t from, size_t to) {
    static const uint8_t sig[5] = {'G', 'C', 'O', 'L', 1};
    if (n < 16) return -1;
    if (to > n - 15) to = n - 15;
    for (size_t o = from; o < to; o++) {
        const uint8_t *hit = memchr(data + o, 'G', to - o);
        if (!hit) break;
        o = (size_t)(hit - data);
        if (memcmp(hit, sig, sizeof sig) == 0 && !collection_loads(hit, n - o)) return (int64_t)o;
    }
    return -1;
}

int64_t ppv_golden_bad_heap_mem(const uint8_t *data, size_t n) {
    return scan_range(data, n, 0, n);
}

/* The file is mapped whole and scanned in windows; the pages of a window
 * the scan has passed are given back, so that scanning a file of any size
 * takes a window's memory, not the file's (a check reads forward from a
 * signature, never behind it). */
enum { SCAN_WINDOW = 32 << 20 };

int64_t ppv_golden_bad_heap(const char *path) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    struct stat st;
    int64_t at = -1;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size >= 16) {
        size_t n = (size_t)st.st_size;
        void *m = mmap(NULL, n, PROT_READ, MAP_PRIVATE, fd, 0);
        if (m != MAP_FAILED) {
            for (size_t from = 0; from < n && at < 0; from += SCAN_WINDOW) {
                at = scan_range(m, n, from, from + SCAN_WINDOW < n ? from + SCAN_WINDOW : n);
                madvise(m, from + SCAN_WINDOW < n ? from + SCAN_WINDOW : n, MADV_DONTNEED);
            }
            munmap(m, n);
        }
    }
    close(fd);
    return at;
}
