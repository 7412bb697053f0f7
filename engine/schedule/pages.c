/* pages.c - blocks for the arrays that grow with a schedule (a million
 * actions: tens of MiB), on the kernel's transparent huge pages where it
 * offers them.
 *
 * A block touched for the first time costs a page fault for every 4 KiB;
 * on a 2 MiB huge page, one for every 2 MiB. For `ppv check` on a 9 MB
 * file those faults were a third of the command's time. A block of 256 KiB
 * or more is a mapping of its own, aligned to 2 MiB, whose whole 2 MiB
 * ranges are advised onto huge pages (so the resident size grows by no
 * more than the bytes asked for), and whose pages are then made by the
 * kernel at once (MADV_POPULATE_WRITE, Linux 5.14; a big block's ranges
 * side by side) instead of a fault each: every caller uses the whole of
 * its block. Freeing it unmaps it at once, as glibc does for its own
 * large blocks until a free makes it keep them on its heap. A smaller
 * block comes from malloc. Where the kernel has no huge pages, or has
 * them off, or cannot populate, the advice changes nothing.
 */
#define _DEFAULT_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "schedule_internal.h"

#define HUGE_PAGE ((size_t)2 << 20)
#define OWN_MAPPING ((size_t)256 << 10) /* blocks this big or bigger are mappings */

/* In front of a mapping's block, in its first page: the mapping. 64
 * bytes, so that the block stays aligned for any type. */
typedef struct {
    void *base;
    size_t len;
    char pad[64 - sizeof(void *) - sizeof(size_t)];
} head;

/* Whether p is a mapping's block: those start on a 2 MiB boundary, and a
 * malloc block never does (ppv_alloc_big sees to it). */
static int is_mapping(uintptr_t p) {
    return (p & (HUGE_PAGE - 1)) == 0;
}

#ifdef MADV_POPULATE_WRITE
typedef struct populate_job {
    char *p;
    size_t n;
} populate_job;

/* Populates the 2 MiB ranges [from, to) of j's block. */
static void populate_run(void *arg, int32_t run, int32_t from, int32_t to) {
    (void)run;
    populate_job *j = arg;
    size_t lo = (size_t)from * HUGE_PAGE, hi = (size_t)to * HUGE_PAGE;
    if (hi > j->n) hi = j->n;
    if (hi > lo) (void)madvise(j->p + lo, hi - lo, MADV_POPULATE_WRITE); /* advice, as above */
}

/* The pages of p's n bytes made at once: a block of 8 MiB or more in
 * runs side by side, 2 MiB ranges each (the kernel zeroes every page it
 * makes; a 12 MB block took a millisecond of one processor). */
static void populate(char *p, size_t n) {
    enum { MOST = 512 }; /* 1 GiB of ranges cut in runs; a bigger block in one call */
    int32_t ranges = (int32_t)((n + HUGE_PAGE - 1) / HUGE_PAGE);
    int32_t runs = ranges <= MOST ? ppv_run_count((int64_t)n, (int64_t)4 << 20, ranges) : 1;
    if (runs < 2) {
        if (n) (void)madvise(p, n, MADV_POPULATE_WRITE);
        return;
    }
    int64_t ends[MOST + 1];
    for (int32_t k = 0; k <= ranges; k++) ends[k] = k;
    populate_job j = {p, n};
    ppv_runs(runs, ends, ranges, populate_run, &j);
}
#endif

/* n bytes in a mapping of their own, from a 2 MiB boundary. */
static void *map_block(size_t n) {
    size_t len = n + HUGE_PAGE + sizeof(head);
    char *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) return NULL;
    uintptr_t at = ((uintptr_t)base + sizeof(head) + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
    char *p = (char *)at;
#ifdef MADV_HUGEPAGE
    (void)madvise(p, n & ~(HUGE_PAGE - 1), MADV_HUGEPAGE); /* advice: refused, it changes nothing */
#endif
#ifdef MADV_POPULATE_WRITE
    populate(p, n);
#endif
    head *h = (head *)p - 1;
    h->base = base, h->len = len;
    return p;
}

void *ppv_alloc_big(size_t n) {
    if (n > SIZE_MAX - 2 * HUGE_PAGE) return NULL;
    if (n >= OWN_MAPPING) return map_block(n);
    /* a plain malloc block (its own start, as valgrind and AddressSanitizer
     * follow it), unless it happens to start on a 2 MiB boundary, where it
     * would read as a mapping: then a small mapping instead */
    void *p = malloc(n ? n : 1);
    if (!p || !is_mapping((uintptr_t)p)) return p;
    free(p);
    return map_block(n);
}

void *ppv_calloc_big(size_t n, size_t size) {
    if (size && n > SIZE_MAX / size) return NULL;
    void *p = ppv_alloc_big(n * size);
    if (p && !is_mapping((uintptr_t)p)) memset(p, 0, n * size); /* a new mapping is zeroed already */
    return p;
}

void ppv_free_big(void *p) {
    if (!p) return;
    if (!is_mapping((uintptr_t)p)) {
        free(p);
        return;
    }
    head *h = (head *)p - 1;
    munmap(h->base, h->len);
}
