/* arith.h - the arithmetic the CPU ops (ops.c, matmul.c, bf16.c, rng.c) and the
 * CUDA kernels (cuda/ops.cu) share, written once so that both give the same
 * bits by construction: each function here is compiled for the host by the
 * C compiler (-ffp-contract=off) and for the device by nvcc (--fmad=false),
 * and every fp32 multiply-add that feeds a reduction goes through
 * ppvk_madd, which on the device is an explicit __fmul_rn then __fadd_rn.
 *
 * Private to kernels/. Valid C11 and CUDA C++: no C-only syntax, no file-scope
 * data (device code cannot read host variables), explicit casts.
 */
#ifndef PPV_KERNELS_ARITH_H
#define PPV_KERNELS_ARITH_H

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__)
#define PPVK_HD static inline __host__ __device__
#else
#define PPVK_HD static inline
#endif

/* acc + a * b with two roundings, never a fused multiply-add. */
PPVK_HD float ppvk_madd(float acc, float a, float b) {
#if defined(__CUDA_ARCH__)
    return __fadd_rn(acc, __fmul_rn(a, b));
#else
    return acc + a * b;
#endif
}

/* sum over i < n of a[i*sa] * b[i*sb], one fp32 accumulator from 0, in order of i. */
PPVK_HD float ppvk_dot(const float *a, size_t sa, const float *b, size_t sb, int n) {
    float s = 0.0f;
    for (int i = 0; i < n; i++)
        s = ppvk_madd(s, a[(size_t)i * sa], b[(size_t)i * sb]);
    return s;
}

/* ---- bf16 (the top 16 bits of an fp32), round to nearest even ---------------- */

PPVK_HD uint32_t ppvk_f32_bits(float x) {
#if defined(__CUDA_ARCH__)
    return __float_as_uint(x);
#else
    uint32_t u;
    memcpy(&u, &x, sizeof u);
    return u;
#endif
}

PPVK_HD float ppvk_bits_f32(uint32_t u) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float x;
    memcpy(&x, &u, sizeof x);
    return x;
#endif
}

/* NaN stays a quiet NaN (the rounding carry could turn a NaN whose payload
 * sits in the low bits into inf); inf stays inf; values past the largest
 * bf16 round to inf as IEEE rounding says. */
PPVK_HD uint16_t ppvk_bf16_bits(float x) {
    uint32_t u = ppvk_f32_bits(x);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
    uint32_t lsb = (u >> 16) & 1u;
    u += 0x7fffu + lsb; /* ties go to the even neighbour; the carry may reach the exponent */
    return (uint16_t)(u >> 16);
}

PPVK_HD float ppvk_bf16_value(uint16_t h) {
    return ppvk_bits_f32((uint32_t)h << 16);
}

/* ---- exp, log, cos, tanh from IEEE + - * / only -------------------------------
 * libm (and CUDA's math library) differ between implementations in the last
 * bit; these give the same bits on every IEEE-754 machine. floor, frexp and
 * ldexp are exact operations. Accurate to a few double ulps; callers round
 * the result to fp32. */

/* e^x: x = k ln2 + r with |r| <= ln2/2, then Taylor to degree 13
 * (truncation below 1e-17 relative). ln 2 is split so that k * ln2_hi is
 * exact for |k| < 2^11 (fdlibm). */
PPVK_HD double ppvk_exp(double x) {
    const double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;
    const double log2e = 1.44269504088896338700e+00;
    if (x != x) return x;
    if (x > 709.78) return INFINITY;
    if (x < -745.2) return 0.0;
    double kf = floor(x * log2e + 0.5);
    double r = (x - kf * ln2_hi) - kf * ln2_lo;
    double p = 1.0;
    for (int n = 13; n >= 1; n--)
        p = 1.0 + p * r / n; /* Horner on 1 + r(1 + r/2(1 + r/3 ...)) */
    return ldexp(p, (int)kf);
}

/* ln x for x > 0: x = 2^e m with m in [sqrt(1/2), sqrt(2)), then
 * ln m = 2 atanh(f), f = (m-1)/(m+1), |f| < 0.172, series to f^23. */
PPVK_HD double ppvk_log(double x) {
    const double ln2_hi = 6.93147180369123816490e-01, ln2_lo = 1.90821492927058770002e-10;
    if (x != x || x < 0.0) return NAN;
    if (x == 0.0) return -INFINITY;
    if (x == INFINITY) return x;
    int e;
    double m = frexp(x, &e);
    if (m < 0.70710678118654752440) {
        m *= 2.0;
        e -= 1;
    }
    double f = (m - 1.0) / (m + 1.0), f2 = f * f, s = 0.0;
    for (int i = 23; i >= 1; i -= 2)
        s = s * f2 + 1.0 / i;
    return e * ln2_hi + (e * ln2_lo + 2.0 * f * s);
}

/* Taylor series of cos and sin on |x| <= pi/4 (truncation below 1e-20). */
PPVK_HD double ppvk_cos_poly(double x) {
    double x2 = x * x, p = 1.0;
    for (int n = 20; n >= 2; n -= 2)
        p = 1.0 - p * x2 / (n * (n - 1));
    return p;
}

PPVK_HD double ppvk_sin_poly(double x) {
    double x2 = x * x, p = 1.0;
    for (int n = 21; n >= 3; n -= 2)
        p = 1.0 - p * x2 / (n * (n - 1));
    return x * p;
}

/* cos(2 pi u), reduced exactly in turns: the fractional part and the
 * reflections below are exact in IEEE arithmetic. */
PPVK_HD double ppvk_cos_turns(double u) {
    const double two_pi = 6.28318530717958647693e+00;
    double t = u - floor(u);  /* [0, 1) */
    if (t > 0.5) t = 1.0 - t; /* cos is even: [0, 0.5] */
    double sign = 1.0;
    if (t > 0.25) {
        t = 0.5 - t; /* cos(pi - a) = -cos a: [0, 0.25] */
        sign = -1.0;
    }
    if (t > 0.125) return sign * ppvk_sin_poly(two_pi * (0.25 - t));
    return sign * ppvk_cos_poly(two_pi * t);
}

/* tanh x: an odd series near 0 (where 1 - 2/(e^2x + 1) cancels), the
 * exp form elsewhere, and +-1 past |x| = 22. */
PPVK_HD double ppvk_tanh(double x) {
    double a = fabs(x), r;
    if (a < 0.0625) {
        double a2 = a * a;
        r = a *
            (1.0 + a2 * (-1.0 / 3 +
                         a2 * (2.0 / 15 +
                               a2 * (-17.0 / 315 + a2 * (62.0 / 2835 + a2 * (-1382.0 / 155925))))));
    } else if (a < 22.0) {
        double e = ppvk_exp(2.0 * a);
        r = (e - 1.0) / (e + 1.0);
    } else {
        r = 1.0;
    }
    return x < 0 ? -r : r;
}

/* ---- pointwise ops, one value ----------------------------------------------------- */

/* GELU, tanh approximation, in double: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
PPVK_HD float ppvk_gelu(float xf) {
    const double k = 0.7978845608028654, c = 0.044715; /* sqrt(2/pi) */
    double x = xf;
    return (float)(0.5 * x * (1.0 + ppvk_tanh(k * (x + c * x * x * x))));
}

/* dout * gelu'(x), in double. */
PPVK_HD float ppvk_gelu_grad(float dout, float xf) {
    const double k = 0.7978845608028654, c = 0.044715;
    double x = xf, th = ppvk_tanh(k * (x + c * x * x * x));
    double dg = 0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * k * (1.0 + 3.0 * c * x * x);
    return (float)(dout * dg);
}

/* x / (1 + e^-x), in double. */
PPVK_HD float ppvk_silu(float xf) {
    double x = xf;
    return (float)(x / (1.0 + ppvk_exp(-x)));
}

/* Channel i < half of the sinusoidal timestep embedding: cos (*c) and sin
 * (*s) of 1000 t 10000^(-i/half), the angle reduced in turns. */
PPVK_HD void ppvk_timestep_pair(float t, int i, int half, float *c, float *s) {
    double freq = ppvk_exp(-9.210340371976184 * i / half); /* 10000^(-i/half) */
    double turns = 1000.0 * t * freq / 6.283185307179586;  /* angle / 2 pi */
    *c = (float)ppvk_cos_turns(turns);
    *s = (float)ppvk_cos_turns(turns - 0.25);
}

/* adaLN: x (1 + scale) + shift. */
PPVK_HD float ppvk_modulate(float x, float shift, float scale) {
    return x * (1.0f + scale) + shift;
}

/* ---- rows ---------------------------------------------------------------------------- */

/* One row of LayerNorm without affine, eps 1e-5: o = (x - mean) * rstd. */
PPVK_HD void ppvk_layernorm_row(float *o, float *mean, float *rstd, const float *x, int C) {
    float m = 0.0f, v = 0.0f;
    for (int i = 0; i < C; i++)
        m += x[i];
    m = m / (float)C;
    for (int i = 0; i < C; i++) {
        float d = x[i] - m;
        v = ppvk_madd(v, d, d);
    }
    v = v / (float)C;
    float s = 1.0f / sqrtf(v + 1e-5f);
    for (int i = 0; i < C; i++)
        o[i] = (x[i] - m) * s;
    *mean = m;
    *rstd = s;
}

/* One row of its backward: dx from d (dout), x and the kept m, s. */
PPVK_HD void ppvk_layernorm_backward_row(float *dx, const float *d, const float *x, float m,
                                         float s, int C) {
    float dmean = 0.0f, dxhat_mean = 0.0f;
    for (int i = 0; i < C; i++) {
        dmean += d[i];
        dxhat_mean = ppvk_madd(dxhat_mean, d[i], (x[i] - m) * s);
    }
    dmean = dmean / (float)C;
    dxhat_mean = dxhat_mean / (float)C;
    for (int i = 0; i < C; i++)
        dx[i] = (d[i] - dmean - ((x[i] - m) * s) * dxhat_mean) * s;
}

/* 1 / sqrt(head dim): attention's score scale. */
PPVK_HD float ppvk_attention_scale(int hd) {
    return 1.0f / sqrtf((float)hd);
}

/* One query row of one head against n0 keys k0 then n1 keys k1 (row
 * stride ldk): e[u] = exp(score_u - max) with score = q . k * scale
 * (reduced over the head dim in order), plus bias0 on the first n0 unless
 * it is 0; the max, and the sum of e in order of u. */
PPVK_HD void ppvk_attention_row2(float *e, float *mx_out, float *sum_out, const float *qt,
                                 const float *k0, int n0, float bias0, const float *k1, int n1,
                                 size_t ldk, int hd, float scale) {
    float mx = -INFINITY, sum = 0.0f;
    int n = n0 + n1;
    for (int u = 0; u < n; u++) {
        const float *ku = u < n0 ? k0 + (size_t)u * ldk : k1 + (size_t)(u - n0) * ldk;
        e[u] = ppvk_dot(qt, 1, ku, 1, hd) * scale;
        if (u < n0 && bias0 != 0.0f) e[u] += bias0;
        mx = e[u] > mx ? e[u] : mx;
    }
    for (int u = 0; u < n; u++) { /* in order of u */
        e[u] = (float)ppvk_exp((double)(e[u] - mx));
        sum += e[u];
    }
    *mx_out = mx;
    *sum_out = sum;
}

/* The same over one segment of Tk keys. */
PPVK_HD void ppvk_attention_row(float *e, float *mx_out, float *sum_out, const float *qt,
                                const float *k, size_t ldkv, int Tk, int hd, float scale) {
    ppvk_attention_row2(e, mx_out, sum_out, qt, k, Tk, 0.0f, k, 0, ldkv, hd, scale);
}

/* The backward's view of one query row: the probabilities p (rebuilt from
 * the kept max and sum exactly as the forward made them) and ds, the
 * gradient of the scaled scores, from the row of dout (dot). */
PPVK_HD void ppvk_attention_grad_row(float *p, float *ds, const float *qt, const float *dot,
                                     const float *k, const float *v, size_t ldkv, int Tk, int hd,
                                     float scale, float mx, float sum) {
    float pdp = 0.0f;
    for (int u = 0; u < Tk; u++) {
        p[u] =
            (float)ppvk_exp((double)(ppvk_dot(qt, 1, k + (size_t)u * ldkv, 1, hd) * scale - mx)) /
            sum;
        ds[u] = ppvk_dot(dot, 1, v + (size_t)u * ldkv, 1, hd); /* dp */
        pdp = ppvk_madd(pdp, p[u], ds[u]);
    }
    for (int u = 0; u < Tk; u++)
        ds[u] = p[u] * (ds[u] - pdp) * scale;
}

#endif
