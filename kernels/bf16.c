/* bf16.c - fp32 <-> bf16 (the top 16 bits of an fp32), round to nearest
 * even. NaN stays a quiet NaN (the rounding carry could otherwise turn a
 * NaN whose payload sits in the low bits into inf); inf stays inf; values
 * past the largest bf16 round to inf as IEEE rounding says.
 */
#include "kernels_internal.h"

/* fp32 -> bf16, round to nearest even, NaN kept quiet (arith.h, shared with CUDA). */
ppv_bf16 ppv_bf16_from_f32(float x) {
    return ppvk_bf16_bits(x);
}

/* ULPs between two floats of one width, given as bits. */
uint64_t ppv_ulp_distance(uint64_t a_bits, uint64_t b_bits, int width) {
    uint64_t sign = 1ull << (width - 1);
    uint64_t a = a_bits & sign ? sign - (a_bits & (sign - 1)) : sign + (a_bits & (sign - 1));
    uint64_t b = b_bits & sign ? sign - (b_bits & (sign - 1)) : sign + (b_bits & (sign - 1));
    return a > b ? a - b : b - a;
}

/* bf16 -> fp32, exact. */
float ppv_bf16_to_f32(ppv_bf16 h) {
    return ppvk_bf16_value(h);
}

/* Widens n bf16 values to fp32 (exact). */
void ppvk_bf16_to_f32(float *out, const ppv_bf16 *in, size_t n) {
    for (size_t i = 0; i < n; i++)
        out[i] = ppv_bf16_to_f32(in[i]);
}

/* Rounds n fp32 values to bf16. */
void ppvk_f32_to_bf16(ppv_bf16 *out, const float *in, size_t n) {
    for (size_t i = 0; i < n; i++)
        out[i] = ppv_bf16_from_f32(in[i]);
}

/* Rounds n fp32 values to bf16 precision, in place. */
void ppvk_round_bf16(float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        x[i] = ppv_bf16_to_f32(ppv_bf16_from_f32(x[i]));
}
