/* pages.c - blocks for the arrays that grow with a schedule (a million
 * actions: tens of MiB), on the kernel's transparent huge pages where it
 * offers them.
 *
 * A block touched for the first time costs a page fault for every 4 KiB;
 * on a 2 MiB huge page, one for every 2 MiB. For `ppv check` on a 9 MB
 * file those faults were a third of the command's time. A block of 2 MiB
 * or more is a mapping of its own, aligned to 2 MiB, whose whole 2 MiB
 * ranges are advised onto huge pages (so the resident size grows by no
 * more than the bytes used); freeing it unmaps it at once, as glibc does
 * for its own large blocks until a free makes it keep them on its heap.
 * A smaller block comes from malloc. Where the kernel has no huge pages,
 * or has them off, the advice changes nothing.
 */
#define _DEFAULT_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "internal.h"

#define HUGE_PAGE ((size_t)2 << 20)

/* In front of every block: the mapping it lies in (len 0: a malloc block,
 * which base is). 64 bytes, so the block stays aligned for any type. */
typedef struct {
    void *base;
    size_t len;
    char pad[64 - sizeof(void *) - sizeof(size_t)];
} head;

void *ppv_alloc_big(size_t n) {
    if (n > SIZE_MAX - 2 * HUGE_PAGE) return NULL;
    if (n < HUGE_PAGE) {
        head *h = malloc(sizeof *h + n);
        if (!h) return NULL;
        h->base = h, h->len = 0;
        return h + 1;
    }
    size_t len = n + HUGE_PAGE + sizeof(head);
    char *base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) return NULL;
    uintptr_t at = ((uintptr_t)base + sizeof(head) + HUGE_PAGE - 1) & ~(uintptr_t)(HUGE_PAGE - 1);
    char *p = (char *)at;
#ifdef MADV_HUGEPAGE
    (void)madvise(p, n & ~(HUGE_PAGE - 1), MADV_HUGEPAGE); /* advice: refused, it changes nothing */
#endif
    head *h = (head *)p - 1;
    h->base = base, h->len = len;
    return p;
}

void *ppv_calloc_big(size_t n, size_t size) {
    if (size && n > SIZE_MAX / size) return NULL;
    void *p = ppv_alloc_big(n * size);
    /* a new mapping is zeroed by the kernel already */
    if (p && n * size < HUGE_PAGE) memset(p, 0, n * size);
    return p;
}

void ppv_free_big(void *p) {
    if (!p) return;
    head *h = (head *)p - 1;
    if (h->len)
        munmap(h->base, h->len);
    else
        free(h->base);
}
