/* ops.c - the fp32 CPU reference ops the DiT block is built from, forward
 * and backward, in the style of llm.c. Inputs hold bf16 values; outputs are
 * fp32 (the model rounds them). Every reduction is one fp32 accumulator
 * over a fixed order (noted as "in order"), so a row's result never depends
 * on how many rows are processed, and transcendental functions come from
 * pmath.c so they give the same bits everywhere. Compiled with
 * -ffp-contract=off: a * b + c is two roundings, as written.
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
                d[i] += g * wo[i];
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
                dwo[i] += g * x[i];
        }
        if (db) db[o] = sb;
    }
}

/* ---- layernorm (no affine) --------------------------------------------------------- */

/* out (M, C) = (inp - mean) * rstd per row; keeps mean, rstd (M). */
void ppvk_layernorm_forward(float *out, float *mean, float *rstd, const float *inp, int M, int C) {
    for (int t = 0; t < M; t++) {
        const float *x = inp + (size_t)t * C;
        float *o = out + (size_t)t * C;
        float m = 0.0f, v = 0.0f;
        for (int i = 0; i < C; i++)
            m += x[i];
        m = m / (float)C;
        for (int i = 0; i < C; i++) {
            float d = x[i] - m;
            v += d * d;
        }
        v = v / (float)C;
        float s = 1.0f / sqrtf(v + 1e-5f);
        for (int i = 0; i < C; i++)
            o[i] = (x[i] - m) * s;
        mean[t] = m;
        rstd[t] = s;
    }
}

/* dinp (M, C) from dout (M, C), the input and the kept mean and rstd. */
void ppvk_layernorm_backward(float *dinp, const float *dout, const float *inp, const float *mean,
                             const float *rstd, int M, int C) {
    for (int t = 0; t < M; t++) {
        const float *x = inp + (size_t)t * C, *d = dout + (size_t)t * C;
        float *dx = dinp + (size_t)t * C, m = mean[t], s = rstd[t];
        float dmean = 0.0f, dxhat_mean = 0.0f;
        for (int i = 0; i < C; i++) {
            dmean += d[i];
            dxhat_mean += d[i] * ((x[i] - m) * s);
        }
        dmean = dmean / (float)C;
        dxhat_mean = dxhat_mean / (float)C;
        for (int i = 0; i < C; i++)
            dx[i] = (d[i] - dmean - ((x[i] - m) * s) * dxhat_mean) * s;
    }
}

/* ---- adaLN modulation and residuals -------------------------------------------------- */

/* out (M, C) = inp * (1 + scale) + shift; shift, scale (C). */
void ppvk_modulate_forward(float *out, const float *inp, const float *shift, const float *scale,
                           int M, int C) {
    for (int t = 0; t < M; t++)
        for (int c = 0; c < C; c++)
            out[(size_t)t * C + c] = inp[(size_t)t * C + c] * (1.0f + scale[c]) + shift[c];
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
            dscale[c] += d * inp[(size_t)t * C + c];
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
            if (gate) dgate[c] += dout[i] * y[i];
        }
}

/* ---- pointwise ------------------------------------------------------------------------ */

static const double GELU_K = 0.7978845608028654; /* sqrt(2/pi) */
static const double GELU_C = 0.044715;

/* out (n) = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), in double per value. */
void ppvk_gelu_forward(float *out, const float *inp, size_t n) {
    for (size_t i = 0; i < n; i++) {
        double x = inp[i];
        out[i] = (float)(0.5 * x * (1.0 + ppvk_tanh(GELU_K * (x + GELU_C * x * x * x))));
    }
}

/* dinp (n) = dout * gelu'(inp), in double per value. */
void ppvk_gelu_backward(float *dinp, const float *dout, const float *inp, size_t n) {
    for (size_t i = 0; i < n; i++) {
        double x = inp[i], th = ppvk_tanh(GELU_K * (x + GELU_C * x * x * x));
        double dg =
            0.5 * (1.0 + th) + 0.5 * x * (1.0 - th * th) * GELU_K * (1.0 + 3.0 * GELU_C * x * x);
        dinp[i] = (float)(dout[i] * dg);
    }
}

/* out (n) = x / (1 + e^-x), in double per value. */
void ppvk_silu_forward(float *out, const float *inp, size_t n) {
    for (size_t i = 0; i < n; i++) {
        double x = inp[i];
        out[i] = (float)(x / (1.0 + ppvk_exp(-x)));
    }
}

/* out (C): cos and sin of 1000 t 10000^(-i/(C/2)), angles reduced in turns. */
void ppvk_timestep_embedding(float *out, float t, int C) {
    int half = C / 2;
    for (int i = 0; i < half; i++) {
        double freq = ppvk_exp(-9.210340371976184 * i / half); /* 10000^(-i/half) */
        double turns = 1000.0 * t * freq / 6.283185307179586;  /* angle / 2 pi */
        out[i] = (float)ppvk_cos_turns(turns);
        out[half + i] = (float)ppvk_cos_turns(turns - 0.25); /* sin */
    }
    if (C % 2) out[C - 1] = 0.0f;
}

/* ---- attention -------------------------------------------------------------------------- */

/* Scaled scores of one query against Tk keys of one head. */
static void attn_scores(float *s, const float *qt, const float *k, int ldkv, int Tk, int hd,
                        float scale) {
    for (int u = 0; u < Tk; u++) {
        const float *ku = k + (size_t)u * ldkv;
        float acc = 0.0f;
        for (int d = 0; d < hd; d++)
            acc += qt[d] * ku[d]; /* in order of d */
        s[u] = acc * scale;
    }
}

/* out (T, C) = softmax(q k^T / sqrt(hd)) v per head; stats (H, T, 2) keeps each
 * row's max and sum so the backward rebuilds the same probabilities. */
void ppvk_attention_forward(float *out, float *stats, const float *q, int ldq, const float *k,
                            const float *v, int ldkv, int T, int Tk, int C, int H, float *scratch) {
    int hd = C / H;
    float scale = 1.0f / sqrtf((float)hd), *e = scratch;
    for (int h = 0; h < H; h++)
        for (int t = 0; t < T; t++) {
            attn_scores(e, q + (size_t)t * ldq + h * hd, k + h * hd, ldkv, Tk, hd, scale);
            float mx = -INFINITY, sum = 0.0f;
            for (int u = 0; u < Tk; u++)
                mx = e[u] > mx ? e[u] : mx;
            for (int u = 0; u < Tk; u++) { /* in order of u */
                e[u] = (float)ppvk_exp((double)(e[u] - mx));
                sum += e[u];
            }
            float *o = out + (size_t)t * C + h * hd;
            for (int d = 0; d < hd; d++)
                o[d] = 0.0f;
            for (int u = 0; u < Tk; u++) { /* in order of u */
                float p = e[u] / sum;
                const float *vu = v + (size_t)u * ldkv + h * hd;
                for (int d = 0; d < hd; d++)
                    o[d] += p * vu[d];
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
    float scale = 1.0f / sqrtf((float)hd), *p = scratch, *ds = scratch + Tk;
    for (int u = 0; u < Tk; u++)
        for (int c = 0; c < C; c++)
            dk[(size_t)u * ldkv + c] = dv[(size_t)u * ldkv + c] = 0.0f;
    for (int h = 0; h < H; h++)
        for (int t = 0; t < T; t++) { /* dk, dv accumulate in order of t */
            const float *qt = q + (size_t)t * ldq + h * hd, *dot = dout + (size_t)t * C + h * hd;
            float mx = stats[((size_t)h * T + t) * 2], sum = stats[((size_t)h * T + t) * 2 + 1];
            attn_scores(p, qt, k + h * hd, ldkv, Tk, hd, scale);
            for (int u = 0; u < Tk; u++)
                p[u] = (float)ppvk_exp((double)(p[u] - mx)) / sum; /* as forward */
            float pdp = 0.0f;
            for (int u = 0; u < Tk; u++) {
                const float *vu = v + (size_t)u * ldkv + h * hd;
                float acc = 0.0f;
                for (int d = 0; d < hd; d++)
                    acc += dot[d] * vu[d];
                ds[u] = acc; /* dp */
                pdp += p[u] * acc;
            }
            for (int u = 0; u < Tk; u++)
                ds[u] = p[u] * (ds[u] - pdp) * scale;
            float *dqt = dq + (size_t)t * ldq + h * hd;
            for (int d = 0; d < hd; d++)
                dqt[d] = 0.0f;
            for (int u = 0; u < Tk; u++) {
                const float *ku = k + (size_t)u * ldkv + h * hd;
                float *dku = dk + (size_t)u * ldkv + h * hd, *dvu = dv + (size_t)u * ldkv + h * hd;
                for (int d = 0; d < hd; d++) {
                    dqt[d] += ds[u] * ku[d];
                    dku[d] += ds[u] * qt[d];
                    dvu[d] += p[u] * dot[d];
                }
            }
        }
}
