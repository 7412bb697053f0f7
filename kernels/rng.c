/* rng.c - counter-based RNG: a stateless hash of (seed, tensor, index),
 * so any value can be drawn on its own, in any order, on any machine or
 * GPU thread, and always give the same bits.
 *
 * bits: three rounds of the splitmix64 finaliser (a bijection), keyed in
 * turn by seed, tensor and index; for a fixed (seed, tensor) distinct
 * indices give distinct bits. uniform: the top 24 bits / 2^24, exact in
 * fp32, in [0, 1). normal: Box-Muller on two 24-bit draws from the same
 * 64 bits, computed with the portable math in arith.h.
 */
#include <math.h>

#include "kernels_internal.h"

static const uint64_t GOLDEN = 0x9E3779B97F4A7C15ull;

/* splitmix64's output function: a bijection with full avalanche. */
static uint64_t mix64(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* 64 bits that depend only on (seed, tensor, index). */
uint64_t ppv_rng_bits(uint64_t seed, uint64_t tensor, uint64_t index) {
    uint64_t z = mix64(seed + GOLDEN);
    z = mix64(z ^ mix64(tensor + 2 * GOLDEN));
    return mix64(z ^ mix64(index + 3 * GOLDEN));
}

/* The top 24 bits / 2^24: [0, 1), exact in fp32. */
float ppv_rng_uniform(uint64_t seed, uint64_t tensor, uint64_t index) {
    return (float)(ppv_rng_bits(seed, tensor, index) >> 40) * 0x1p-24f;
}

/* Standard normal by Box-Muller on two 24-bit draws of one hash. */
float ppv_rng_normal(uint64_t seed, uint64_t tensor, uint64_t index) {
    uint64_t b = ppv_rng_bits(seed, tensor, index);
    double u1 = (double)((b >> 40) + 1) * 0x1p-24;         /* (0, 1]: log is finite */
    double u2 = (double)((b >> 16) & 0xFFFFFFu) * 0x1p-24; /* [0, 1) */
    return (float)(sqrt(-2.0 * ppvk_log(u1)) * ppvk_cos_turns(u2));
}
