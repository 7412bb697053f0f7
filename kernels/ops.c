/* ops.c - the fp32 CPU reference ops the DiT block is built from, forward
 * and backward, in the style of llm.c. Inputs hold bf16 values; outputs are
 * fp32 (the model rounds them). Every reduction is one fp32 accumulator
 * over a fixed order (noted as "in order"), so a row's result never depends
 * on how many rows are processed. The arithmetic of each value (its
 * multiply-adds, the transcendental functions, whole rows of LayerNorm and
 * attention) comes from arith.h, which the CUDA kernels compile too, so the
 * two give the same bits. Compiled with -ffp-contract=off: a * b + c is two
 * roundings, as written.
 */
#include <math.h>
#include <string.h>

#include "kernels_internal.h"

/* ---- linear ---------------------------------------------------------------------- */

/* out (M, OC) = inp (M, IC) . w (OC, IC)^T + b (OC), through ppv_matmul_f32. */
void ppvk_linear_forward(float *out, const float *inp, const float *w, const float *b, int M,
                         int IC, int OC) {
    ppv_matmul_f32(out, inp, w, M, OC, IC, 1); /* reduced over IC in order */
    if (!b) return;
    for (int t = 0; t < M; t++)
        for (int o = 0; o < OC; o++)
            out[(size_t)t * OC + o] += b[o];
}

/* dinp (M, IC) = dout (M, OC) . w (OC, IC), each value reduced over o in order. */
void ppvk_linear_backward_input(float *dinp, const float *dout, const float *w, int M, int IC,
                                int OC) {
    for (int t = 0; t < M; t++) {
        float *d = dinp + (size_t)t * IC;
        for (int i = 0; i < IC; i++)
            d[i] = 0.0f;
        for (int o = 0; o < OC; o++) { /* in order of o */
            float g = dout[(size_t)t * OC + o];
            const float *wo = w + (size_t)o * IC;
            for (int i = 0; i < IC; i++)
                d[i] = ppvk_madd(d[i], g, wo[i]);
        }
    }
}

/* dw (OC, IC) = dout^T . inp, db (OC) = column sums of dout (M, OC); over t in order. */
void ppvk_linear_backward_weight(float *dw, float *db, const float *dout, const float *inp, int M,
                                 int IC, int OC) {
    for (int o = 0; o < OC; o++) {
        float *dwo = dw + (size_t)o * IC, sb = 0.0f;
        for (int i = 0; i < IC; i++)
            dwo[i] = 0.0f;
        for (int t = 0; t < M; t++) { /* in order of t */
            float g = dout[(size_t)t * OC + o];
            const float *x = inp + (size_t)t * IC;
            sb += g;
            for (int i = 0; i < IC; i++)
                dwo[i] = ppvk_madd(dwo[i], g, x[i]);
        }
        if (db) db[o] = sb;
    }
}

/* ---- layernorm (no affine) --------------------------------------------------------- */

/* out (M, C) = (inp - mean) * rstd per row; keeps mean, rstd (M). */
void ppvk_layernorm_forward(float *out, float *mean, float *rstd, const float *inp, int M, int C) {
    for (int t = 0; t < M; t++)
        ppvk_layernorm_row(out + (size_t)t * C, mean + t, rstd + t, inp + (size_t)t * C, C);
}

/* dinp (M, C) from dout (M, C), the input and the kept mean and rstd. */
void ppvk_layernorm_backward(float *dinp, const float *dout, const float *inp, const float *mean,
                             const float *rstd, int M, int C) {
    for (int t = 0; t < M; t++)
        ppvk_layernorm_backward_row(dinp + (size_t)t * C, dout + (size_t)t * C, inp + (size_t)t * C,
                                    mean[t], rstd[t], C);
}

/* ---- adaLN modulation and residuals -------------------------------------------------- */

/* out (M, C) = inp * (1 + scale) + shift; shift, scale (C). */
void ppvk_modulate_forward(float *out, const float *inp, const float *shift, const float *scale,
                           int M, int C) {
    for (int t = 0; t < M; t++)
        for (int c = 0; c < C; c++)
            out[(size_t)t * C + c] = ppvk_modulate(inp[(size_t)t * C + c], shift[c], scale[c]);
}

/* dinp (M, C); dshift, dscale (C) summed over rows in order. */
void ppvk_modulate_backward(float *dinp, float *dshift, float *dscale, const float *dout,
                            const float *inp, const float *scale, int M, int C) {
    for (int c = 0; c < C; c++)
        dshift[c] = dscale[c] = 0.0f;
    for (int t = 0; t < M; t++) /* in order of t */
        for (int c = 0; c < C; c++) {
            float d = dout[(size_t)t * C + c];
            dinp[(size_t)t * C + c] = d * (1.0f + scale[c]);
            dshift[c] += d;
            dscale[c] = ppvk_madd(dscale[c], d, inp[(size_t)t * C + c]);
        }
}

/* out (M, C) = x + gate * y; gate (C), NULL for 1. */
void ppvk_residual_forward(float *out, const float *x, const float *gate, const float *y, int M,
                           int C) {
    for (int t = 0; t < M; t++)
        for (int c = 0; c < C; c++) {
            size_t i = (size_t)t * C + c;
            out[i] = x[i] + (gate ? gate[c] * y[i] : y[i]);
        }
}

/* dy (M, C) = dout * gate; dgate (C) = sum over rows of dout * y. */
void ppvk_residual_backward(float *dy, float *dgate, const float *dout, const float *gate,
                            const float *y, int M, int C) {
    if (gate)
        for (int c = 0; c < C; c++)
            dgate[c] = 0.0f;
    for (int t = 0; t < M; t++) /* in order of t */
        for (int c = 0; c < C; c++) {
            size_t i = (size_t)t * C + c;
            dy[i] = gate ? dout[i] * gate[c] : dout[i];
            if (gate) dgate[c] = ppvk_madd(dgate[c], dout[i], y[i]);
        }
}

/* ---- pointwise ------------------------------------------------------------------------ */

/* out (n) = gelu(inp), tanh approximation, in double per value. */
void ppvk_gelu_forward(float *out, const float *inp, size_t n) {
    for (size_t i = 0; i < n; i++)
        out[i] = ppvk_gelu(inp[i]);
}

/* dinp (n) = dout * gelu'(inp), in double per value. */
void ppvk_gelu_backward(float *dinp, const float *dout, const float *inp, size_t n) {
    for (size_t i = 0; i < n; i++)
        dinp[i] = ppvk_gelu_grad(dout[i], inp[i]);
}

/* out (n) = x / (1 + e^-x), in double per value. */
void ppvk_silu_forward(float *out, const float *inp, size_t n) {
    for (size_t i = 0; i < n; i++)
        out[i] = ppvk_silu(inp[i]);
}

/* out (C): cos and sin of 1000 t 10000^(-i/(C/2)), angles reduced in turns. */
void ppvk_timestep_embedding(float *out, float t, int C) {
    int half = C / 2;
    for (int i = 0; i < half; i++)
        ppvk_timestep_pair(t, i, half, &out[i], &out[half + i]);
    if (C % 2) out[C - 1] = 0.0f;
}

/* ---- attention -------------------------------------------------------------------------- */

/* out (T, C) = softmax(q k^T / sqrt(hd)) v per head; stats (H, T, 2) keeps each
 * row's max and sum so the backward rebuilds the same probabilities. */
void ppvk_attention_forward(float *out, float *stats, const float *q, int ldq, const float *k,
                            const float *v, int ldkv, int T, int Tk, int C, int H, float *scratch) {
    int hd = C / H;
    float scale = ppvk_attention_scale(hd), *e = scratch;
    for (int h = 0; h < H; h++)
        for (int t = 0; t < T; t++) {
            float mx, sum;
            ppvk_attention_row(e, &mx, &sum, q + (size_t)t * ldq + h * hd, k + h * hd, (size_t)ldkv,
                               Tk, hd, scale);
            float *o = out + (size_t)t * C + h * hd;
            for (int d = 0; d < hd; d++)
                o[d] = 0.0f;
            for (int u = 0; u < Tk; u++) { /* in order of u */
                float p = e[u] / sum;
                const float *vu = v + (size_t)u * ldkv + h * hd;
                for (int d = 0; d < hd; d++)
                    o[d] = ppvk_madd(o[d], p, vu[d]);
            }
            stats[((size_t)h * T + t) * 2] = mx;
            stats[((size_t)h * T + t) * 2 + 1] = sum;
        }
}

/* dq (T rows), dk, dv (Tk rows) from dout (T, C), with the strides of q, k, v. */
void ppvk_attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *q,
                             int ldq, const float *k, const float *v, int ldkv, const float *stats,
                             int T, int Tk, int C, int H, float *scratch) {
    int hd = C / H;
    float scale = ppvk_attention_scale(hd), *p = scratch, *ds = scratch + Tk;
    for (int u = 0; u < Tk; u++)
        for (int c = 0; c < C; c++)
            dk[(size_t)u * ldkv + c] = dv[(size_t)u * ldkv + c] = 0.0f;
    for (int h = 0; h < H; h++)
        for (int t = 0; t < T; t++) { /* dk, dv accumulate in order of t */
            const float *qt = q + (size_t)t * ldq + h * hd, *dot = dout + (size_t)t * C + h * hd;
            ppvk_attention_grad_row(p, ds, qt, dot, k + h * hd, v + h * hd, (size_t)ldkv, Tk, hd,
                                    scale, stats[((size_t)h * T + t) * 2],
                                    stats[((size_t)h * T + t) * 2 + 1]);
            float *dqt = dq + (size_t)t * ldq + h * hd;
            for (int d = 0; d < hd; d++)
                dqt[d] = 0.0f;
            for (int u = 0; u < Tk; u++) {
                const float *ku = k + (size_t)u * ldkv + h * hd;
                float *dku = dk + (size_t)u * ldkv + h * hd, *dvu = dv + (size_t)u * ldkv + h * hd;
                for (int d = 0; d < hd; d++) {
                    dqt[d] = ppvk_madd(dqt[d], ds[u], ku[d]);
                    dku[d] = ppvk_madd(dku[d], ds[u], qt[d]);
                    dvu[d] = ppvk_madd(dvu[d], p[u], dot[d]);
                }
            }
        }
}

/* The generator's attention: two key segments, the first with a bias. */
void ppvk_kv_attention_forward(float *out, const float *q, const float *k0, const float *v0, int n0,
                               float bias0, const float *k1, const float *v1, int n1, int M, int nh,
                               int hd, float *scratch) {
    size_t ld = (size_t)nh * hd;
    int n = n0 + n1;
    float scale = ppvk_attention_scale(hd), *e = scratch;
    for (int h = 0; h < nh; h++)
        for (int t = 0; t < M; t++) {
            float mx, sum;
            size_t hc = (size_t)h * hd;
            ppvk_attention_row2(e, &mx, &sum, q + (size_t)t * ld + hc, n0 ? k0 + hc : NULL, n0,
                                bias0, n1 ? k1 + hc : NULL, n1, ld, hd, scale);
            float *o = out + (size_t)t * ld + hc;
            for (int c = 0; c < hd; c++)
                o[c] = 0.0f;
            for (int u = 0; u < n; u++) { /* in order of u */
                float p = e[u] / sum;
                const float *vu = (u < n0 ? v0 + (size_t)u * ld : v1 + (size_t)(u - n0) * ld) + hc;
                for (int c = 0; c < hd; c++)
                    o[c] = ppvk_madd(o[c], p, vu[c]);
            }
        }
}

/* out (M, N) = a . w^T over K, strided rows, no bias. */
void ppvk_block_partial(float *out, const float *a, size_t lda, const float *w, size_t ldw, int M,
                        int N, int K) {
    for (int t = 0; t < M; t++)
        for (int o = 0; o < N; o++)
            out[(size_t)t * N + o] = ppvk_dot(a + (size_t)t * lda, 1, w + (size_t)o * ldw, 1, K);
}

/* ---- the CPU device ---------------------------------------------------------------------- */

/* The CPU ops cannot fail. */
static int cpu_status(char *err, size_t errlen) {
    (void)err, (void)errlen;
    return 0;
}

const ppvk_ops ppvk_cpu_ops = {
    .name = "cpu",
    .linear_forward = ppvk_linear_forward,
    .linear_backward_input = ppvk_linear_backward_input,
    .linear_backward_weight = ppvk_linear_backward_weight,
    .layernorm_forward = ppvk_layernorm_forward,
    .layernorm_backward = ppvk_layernorm_backward,
    .modulate_forward = ppvk_modulate_forward,
    .modulate_backward = ppvk_modulate_backward,
    .residual_forward = ppvk_residual_forward,
    .residual_backward = ppvk_residual_backward,
    .gelu_forward = ppvk_gelu_forward,
    .gelu_backward = ppvk_gelu_backward,
    .silu_forward = ppvk_silu_forward,
    .timestep_embedding = ppvk_timestep_embedding,
    .attention_forward = ppvk_attention_forward,
    .attention_backward = ppvk_attention_backward,
    .kv_attention_forward = ppvk_kv_attention_forward,
    .block_partial = ppvk_block_partial,
    .round_bf16 = ppvk_round_bf16,
    .status = cpu_status,
};
