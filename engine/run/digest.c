/* digest.c - the digests a run reports and a trace or recording compares,
 * as spec/digests.md defines them: ppv-fnv64 over bytes (FNV-1a's step
 * from ppv's own basis, not FNV's), and ppv-words64x4, four lanes over
 * 8-byte words for large tensors. Both are the same on every host
 * (little-endian words); python/ppv/digest.py is the reference.
 */
#include <stdint.h>
#include <string.h>

#include "../engine_internal.h"
#include "ppv_run.h"

uint64_t ppv_digest(const void *data, size_t n) {
    const unsigned char *p = data;
    uint64_t h = 1469598103934665603ULL;
    for (size_t k = 0; k < n; k++) {
        h ^= p[k];
        h *= 1099511628211ULL;
    }
    return h;
}

/* The 8 bytes at p as a little-endian word, on any host. */
static inline uint64_t le64(const unsigned char *p) {
    uint64_t w;
    memcpy(&w, p, 8);
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__
    w = __builtin_bswap64(w);
#endif
    return w;
}

uint64_t ppv_digest_words(const void *data, size_t n) {
    static const uint64_t prime = 1099511628211ULL;
    const unsigned char *p = data;
    /* four lanes, each FNV-1a's step over every fourth 8-byte word: the lanes'
     * chains run side by side; each step is a bijection of its lane, so a
     * change to any one word always changes the digest */
    uint64_t a = 1469598103934665603ULL, b = 0x9e3779b97f4a7c15ULL, c = 0xc2b2ae3d27d4eb4fULL,
             d = 0x165667b19e3779f9ULL;
    size_t k = 0;
    for (; k + 32 <= n; k += 32) {
        a = (a ^ le64(p + k)) * prime;
        b = (b ^ le64(p + k + 8)) * prime;
        c = (c ^ le64(p + k + 16)) * prime;
        d = (d ^ le64(p + k + 24)) * prime;
    }
    unsigned char tail[32] = {0};
    if (n > k) memcpy(tail, p + k, n - k); /* (p may be NULL when n is 0) */
    a = (a ^ le64(tail)) * prime;
    b = (b ^ le64(tail + 8)) * prime;
    c = (c ^ le64(tail + 16)) * prime;
    d = (d ^ le64(tail + 24)) * prime;
    uint64_t h = (uint64_t)n * prime;
    h = (h ^ a) * prime;
    h = (h ^ b) * prime;
    h = (h ^ c) * prime;
    h = (h ^ d) * prime;
    return h ^ h >> 29;
}
