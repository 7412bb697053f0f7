/* ref64.c - the float64 reference of the training model (see ref64.h):
 * every op a plain double loop with its forward and backward (the one
 * float64 reference of the ops every test uses), the block built from
 * them, the loss and a whole training step. Test code: it reads
 * weights and inputs through the public kernels API and shares no code
 * with kernels/; libm's double functions stand in for kernels/arith.h's.
 */
#include "ref64.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- the rounding-error model ------------------------------------------------------- */

/* splitmix64: the next 64 random bits of *s. */
static uint64_t next_bits(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Adds to each of the n values of an op output what rounding it to bf16
 * (8 significant bits, to nearest) can add: xi times half its ulp, xi
 * uniform in [-1, 1]; or, under nz->round_bf16, rounds them as ppv stores
 * them (through fp32); nothing when nz is NULL. */
static void perturb(ref64_noise *nz, double *v, size_t n) {
    if (!nz) return;
    if (nz->round_bf16) {
        for (size_t i = 0; i < n; i++)
            v[i] = ppv_bf16_to_f32(ppv_bf16_from_f32((float)v[i]));
        return;
    }
    for (size_t i = 0; i < n; i++) {
        double xi = (double)(next_bits(&nz->state) >> 11) * 0x1p-52 - 1.0;
        int e;
        frexp(v[i], &e); /* |v| in [2^(e-1), 2^e): half an ulp is 2^(e-9) */
        if (v[i] != 0) v[i] += xi * ldexp(1.0, e - 9);
    }
}

/* ---- ops ------------------------------------------------------------------------------ */

/* out (M, OC) = in (M, IC) . w (OC, IC)^T + b (OC). */
void ref64_linear_forward(double *out, const double *in, const double *w, const double *b, int M,
                          int IC, int OC) {
    for (int t = 0; t < M; t++)
        for (int o = 0; o < OC; o++) {
            double s = b[o];
            for (int i = 0; i < IC; i++)
                s += in[(size_t)t * IC + i] * w[(size_t)o * IC + i];
            out[(size_t)t * OC + o] = s;
        }
}

/* din (M, IC) = dout . w (din may be NULL: the input has no gradient);
 * dw (OC, IC) = dout^T . in; db (OC) = column sums of dout (M, OC). */
void ref64_linear_backward(double *din, double *dw, double *db, const double *dout,
                           const double *in, const double *w, int M, int IC, int OC) {
    for (int t = 0; din && t < M; t++)
        for (int i = 0; i < IC; i++) {
            double s = 0;
            for (int o = 0; o < OC; o++)
                s += dout[(size_t)t * OC + o] * w[(size_t)o * IC + i];
            din[(size_t)t * IC + i] = s;
        }
    for (int o = 0; o < OC; o++) {
        double sb = 0;
        for (int t = 0; t < M; t++)
            sb += dout[(size_t)t * OC + o];
        db[o] = sb;
        for (int i = 0; i < IC; i++) {
            double s = 0;
            for (int t = 0; t < M; t++)
                s += dout[(size_t)t * OC + o] * in[(size_t)t * IC + i];
            dw[(size_t)o * IC + i] = s;
        }
    }
}

/* Mean and 1/sqrt(variance + 1e-5) of one row of C values. */
static void row_stats(const double *x, int C, double *mean, double *rstd) {
    double m = 0, v = 0;
    for (int i = 0; i < C; i++)
        m += x[i];
    m /= C;
    for (int i = 0; i < C; i++)
        v += (x[i] - m) * (x[i] - m);
    *mean = m;
    *rstd = 1.0 / sqrt(v / C + 1e-5);
}

/* out (M, C) = (in - mean) / sqrt(var + 1e-5), per row, no affine. */
void ref64_layernorm_forward(double *out, const double *in, int M, int C) {
    for (int t = 0; t < M; t++) {
        const double *x = in + (size_t)t * C;
        double m, s;
        row_stats(x, C, &m, &s);
        for (int i = 0; i < C; i++)
            out[(size_t)t * C + i] = (x[i] - m) * s;
    }
}

/* din (M, C) = rstd (dout - mean(dout) - n mean(dout n)), n the normalised in. */
void ref64_layernorm_backward(double *din, const double *dout, const double *in, int M, int C) {
    for (int t = 0; t < M; t++) {
        const double *x = in + (size_t)t * C, *d = dout + (size_t)t * C;
        double m, s, md = 0, mdn = 0;
        row_stats(x, C, &m, &s);
        for (int i = 0; i < C; i++)
            md += d[i], mdn += d[i] * (x[i] - m) * s;
        md /= C, mdn /= C;
        for (int i = 0; i < C; i++)
            din[(size_t)t * C + i] = s * (d[i] - md - (x[i] - m) * s * mdn);
    }
}

/* out (M, C) = in (1 + scale) + shift; shift, scale (C). */
void ref64_modulate_forward(double *out, const double *in, const double *shift, const double *scale,
                            int M, int C) {
    for (int t = 0; t < M; t++)
        for (int c = 0; c < C; c++)
            out[(size_t)t * C + c] = in[(size_t)t * C + c] * (1 + scale[c]) + shift[c];
}

/* din (M, C); dshift, dscale (C) summed over rows. */
void ref64_modulate_backward(double *din, double *dshift, double *dscale, const double *dout,
                             const double *in, const double *scale, int M, int C) {
    for (int c = 0; c < C; c++) {
        double ds = 0, dsc = 0;
        for (int t = 0; t < M; t++) {
            double d = dout[(size_t)t * C + c];
            din[(size_t)t * C + c] = d * (1 + scale[c]);
            ds += d, dsc += d * in[(size_t)t * C + c];
        }
        dshift[c] = ds, dscale[c] = dsc;
    }
}

/* out (M, C) = x + gate y; gate (C), NULL for 1. */
void ref64_residual_forward(double *out, const double *x, const double *gate, const double *y,
                            int M, int C) {
    for (int t = 0; t < M; t++)
        for (int c = 0; c < C; c++) {
            size_t i = (size_t)t * C + c;
            out[i] = x[i] + (gate ? gate[c] : 1.0) * y[i];
        }
}

/* dy (M, C) = dout gate; dgate (C) = sum over rows of dout y (gate not NULL). */
void ref64_residual_backward(double *dy, double *dgate, const double *dout, const double *gate,
                             const double *y, int M, int C) {
    for (int c = 0; c < C; c++) {
        double dg = 0;
        for (int t = 0; t < M; t++) {
            size_t i = (size_t)t * C + c;
            dy[i] = dout[i] * (gate ? gate[c] : 1.0);
            dg += dout[i] * y[i];
        }
        if (gate) dgate[c] = dg;
    }
}

static const double SQRT_2_OVER_PI = 0.79788456080286535588;

/* out (n) = x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
void ref64_gelu_forward(double *out, const double *in, size_t n) {
    for (size_t i = 0; i < n; i++) {
        double x = in[i];
        out[i] = 0.5 * x * (1 + tanh(SQRT_2_OVER_PI * (x + 0.044715 * x * x * x)));
    }
}

/* din (n) = dout gelu'(in). */
void ref64_gelu_backward(double *din, const double *dout, const double *in, size_t n) {
    for (size_t i = 0; i < n; i++) {
        double x = in[i], th = tanh(SQRT_2_OVER_PI * (x + 0.044715 * x * x * x));
        double dth = (1 - th * th) * SQRT_2_OVER_PI * (1 + 3 * 0.044715 * x * x);
        din[i] = dout[i] * (0.5 * (1 + th) + 0.5 * x * dth);
    }
}

/* out (n) = x sigmoid(x), in place allowed. */
void ref64_silu_forward(double *out, const double *in, size_t n) {
    for (size_t i = 0; i < n; i++)
        out[i] = in[i] / (1 + exp(-in[i]));
}

/* out (C): cos, then sin, of 1000 t 10000^(-i / (C/2)) for i < C/2; an odd
 * last channel 0. */
void ref64_timestep_embedding(double *out, double t, int C) {
    int half = C / 2;
    for (int i = 0; i < half; i++) {
        double angle = 1000.0 * t * pow(10000.0, -(double)i / half);
        out[i] = cos(angle);
        out[half + i] = sin(angle);
    }
    if (C % 2) out[C - 1] = 0;
}

/* Softmax probabilities p (Tk) of query row qt (hd) of one head against
 * keys k (row stride ldkv), scale 1/sqrt(hd). */
static void attention_probs(double *p, const double *qt, const double *k, int ldkv, int Tk,
                            int hd) {
    double mx = -INFINITY, sum = 0;
    for (int u = 0; u < Tk; u++) {
        double s = 0;
        for (int d = 0; d < hd; d++)
            s += qt[d] * k[(size_t)u * ldkv + d];
        p[u] = s / sqrt((double)hd);
        mx = p[u] > mx ? p[u] : mx;
    }
    for (int u = 0; u < Tk; u++)
        sum += p[u] = exp(p[u] - mx);
    for (int u = 0; u < Tk; u++)
        p[u] /= sum;
}

/* out (T, C) = softmax(q k^T / sqrt(C/H)) v per head, over all Tk keys; q
 * rows have stride ldq, k and v rows ldkv; head h owns channels
 * [h C/H, (h+1) C/H). p: Tk scratch. */
void ref64_attention_forward(double *out, const double *q, int ldq, const double *k,
                             const double *v, int ldkv, int T, int Tk, int C, int H, double *p) {
    int hd = C / H;
    for (int h = 0; h < H; h++)
        for (int t = 0; t < T; t++) {
            attention_probs(p, q + (size_t)t * ldq + h * hd, k + h * hd, ldkv, Tk, hd);
            for (int d = 0; d < hd; d++) {
                double s = 0;
                for (int u = 0; u < Tk; u++)
                    s += p[u] * v[(size_t)u * ldkv + h * hd + d];
                out[(size_t)t * C + h * hd + d] = s;
            }
        }
}

/* dq, dk, dv (strides of q, k, v; dk and dv fully written) from dout (T, C).
 * p, dp: Tk scratch each. */
void ref64_attention_backward(double *dq, double *dk, double *dv, const double *dout,
                              const double *q, int ldq, const double *k, const double *v, int ldkv,
                              int T, int Tk, int C, int H, double *p, double *dp) {
    int hd = C / H;
    double scale = 1.0 / sqrt((double)hd);
    for (int u = 0; u < Tk; u++)
        for (int c = 0; c < C; c++)
            dk[(size_t)u * ldkv + c] = dv[(size_t)u * ldkv + c] = 0;
    for (int h = 0; h < H; h++)
        for (int t = 0; t < T; t++) {
            const double *qt = q + (size_t)t * ldq + h * hd, *g = dout + (size_t)t * C + h * hd;
            attention_probs(p, qt, k + h * hd, ldkv, Tk, hd);
            double pdp = 0;
            for (int u = 0; u < Tk; u++) {
                double s = 0;
                for (int d = 0; d < hd; d++)
                    s += g[d] * v[(size_t)u * ldkv + h * hd + d];
                dp[u] = s, pdp += p[u] * s;
            }
            for (int d = 0; d < hd; d++)
                dq[(size_t)t * ldq + h * hd + d] = 0;
            for (int u = 0; u < Tk; u++) {
                double ds = p[u] * (dp[u] - pdp) * scale; /* d score */
                for (int d = 0; d < hd; d++) {
                    dq[(size_t)t * ldq + h * hd + d] += ds * k[(size_t)u * ldkv + h * hd + d];
                    dk[(size_t)u * ldkv + h * hd + d] += ds * qt[d];
                    dv[(size_t)u * ldkv + h * hd + d] += p[u] * g[d];
                }
            }
        }
}

/* ---- the model and its inputs --------------------------------------------------------- */

/* Tensor i's documented name, "?" out of range. */
const char *ref64_tensor_name(int i) {
    static const char *const names[REF64_TENSORS] = {
        "ada_w", "ada_b", "qkv_w",  "qkv_b",  "attn_out_w", "attn_out_b", "xq_w",  "xq_b",
        "xkv_w", "xkv_b", "xout_w", "xout_b", "fc1_w",      "fc1_b",      "fc2_w", "fc2_b"};
    return i >= 0 && i < REF64_TENSORS ? names[i] : "?";
}

/* Reads m's weights after checking its table against the documented one;
 * 0 or -1. */
int ref64_model_init(ref64_model *r, const ppv_model_config *cfg, const ppv_model *m) {
    memset(r, 0, sizeof *r);
    size_t C = (size_t)cfg->d_model, F = (size_t)cfg->d_ff;
    /* (rows, cols) as ppv_kernels.h documents them */
    const size_t shape[REF64_TENSORS][2] = {
        {6 * C, C}, {6 * C, 1}, {3 * C, C}, {3 * C, 1}, {C, C}, {C, 1}, {C, C}, {C, 1},
        {2 * C, C}, {2 * C, 1}, {C, C},     {C, 1},     {F, C}, {F, 1}, {C, F}, {C, 1}};
    for (int i = 0; i < REF64_TENSORS; i++) {
        ppv_param_tensor t;
        if (ppv_model_param_tensor(m, i, &t) != 0 || strcmp(t.name, ref64_tensor_name(i)) != 0 ||
            (size_t)t.rows != shape[i][0] || (size_t)t.cols != shape[i][1] || t.offset != r->P)
            return -1;
        r->rows[i] = shape[i][0], r->cols[i] = shape[i][1], r->off[i] = r->P;
        r->P += shape[i][0] * shape[i][1];
    }
    r->L = cfg->layers, r->T = cfg->seq_len, r->C = cfg->d_model, r->H = cfg->n_heads;
    r->F = cfg->d_ff, r->Tc = cfg->cond_len;
    r->w = malloc(sizeof(double) * r->P * (size_t)r->L);
    if (!r->w) return -1;
    for (int l = 0; l < r->L; l++) {
        const ppv_bf16 *p = ppv_model_layer_params(m, l);
        if (!p) {
            ref64_model_free(r);
            return -1;
        }
        for (size_t i = 0; i < r->P; i++)
            r->w[(size_t)l * r->P + i] = ppv_bf16_to_f32(p[i]);
    }
    return 0;
}

/* Frees r's weights (r may be empty). */
void ref64_model_free(ref64_model *r) {
    free(r->w);
    r->w = NULL;
}

/* Widens n bf16 values into a new array; NULL when out of memory. */
static double *widen_bf16(const ppv_bf16 *in, size_t n) {
    double *out = malloc(sizeof(double) * (n ? n : 1));
    for (size_t i = 0; out && i < n; i++)
        out[i] = ppv_bf16_to_f32(in[i]);
    return out;
}

/* Widens x, cond and target; 0, or -1 with nothing left allocated. */
int ref64_inputs_init(ref64_inputs *ri, const ref64_model *r, const ppv_mb_inputs *in) {
    size_t TC = (size_t)r->T * r->C;
    ri->x = widen_bf16(in->x, TC);
    ri->cond = widen_bf16(in->cond, (size_t)r->Tc * r->C);
    ri->target = widen_bf16(in->target, TC);
    ri->t = in->timestep;
    if (ri->x && ri->cond && ri->target) return 0;
    ref64_inputs_free(ri);
    return -1;
}

/* Frees the widened inputs. */
void ref64_inputs_free(ref64_inputs *ri) {
    free(ri->x), free(ri->cond), free(ri->target);
    ri->x = ri->cond = ri->target = NULL;
}

/* ---- one block -------------------------------------------------------------------------- */

/* clang-format off */
/* (name, values): a layer's activations (forward) and gradients (backward). */
#define ACTS(X) \
    X(temb, C) X(x, TC) X(mod, 6 * C) X(n1, TC) X(m1, TC) X(qkv, 3 * TC) X(att, TC) X(ao, TC) \
    X(x1, TC) X(n2, TC) X(qc, TC) X(kvc, 2 * TcC) X(ca, TC) X(co, TC) X(x2, TC) X(n3, TC) \
    X(m3, TC) X(h, TF) X(g, TF) X(mo, TC) \
    X(dmod, 6 * C) X(dmo, TC) X(dg, TF) X(dh, TF) X(dm3, TC) X(dn3, TC) X(dln, TC) X(dx2, TC) \
    X(dca, TC) X(dqc, TC) X(dkvc, 2 * TcC) X(dn2, TC) X(dx1, TC) X(dao, TC) X(datt, TC) \
    X(dqkv, 3 * TC) X(dm1, TC) X(dn1, TC) X(p, TK) X(dp, TK)
/* clang-format on */
#define AS_FIELD(name, n) double *name;
#define AS_COUNT(name, n) +(n)
#define AS_PLACE(name, n) a->name = p, p += (n);

struct ref64_acts {
    ACTS(AS_FIELD)
    const double *cond; /* the forward's (Tc, C) */
    double *base;
};

/* One block of zeroed activation and gradient buffers; NULL when out of
 * memory. */
ref64_acts *ref64_acts_new(const ref64_model *r) {
    size_t C = (size_t)r->C, TC = (size_t)r->T * C, TcC = (size_t)r->Tc * C;
    size_t TF = (size_t)r->T * r->F, TK = (size_t)(r->T > r->Tc ? r->T : r->Tc);
    ref64_acts *a = calloc(1, sizeof *a);
    if (!a) return NULL;
    double *p = a->base = calloc(0 ACTS(AS_COUNT), sizeof(double));
    if (!p) {
        free(a);
        return NULL;
    }
    ACTS(AS_PLACE)
    return a;
}

/* Frees a (NULL is fine). */
void ref64_acts_free(ref64_acts *a) {
    if (!a) return;
    free(a->base);
    free(a);
}

/* silu(temb(t)) (C), each op perturbed. */
static void timestep_features(double *out, double t, int C, ref64_noise *nz) {
    ref64_timestep_embedding(out, t, C);
    perturb(nz, out, (size_t)C);
    ref64_silu_forward(out, out, (size_t)C);
    perturb(nz, out, (size_t)C);
}

/* Layer l's parameter tensor i. */
static const double *weight(const ref64_model *r, int l, int i) {
    return r->w + (size_t)l * r->P + r->off[i];
}

/* Parameter tensor i of layer l (r and l are the caller's). */
#define WT(i) weight(r, l, REF64_##i)

/* The block forward with a given silu(temb(t)) (C), kept in a. */
static void layer_forward(const ref64_model *r, int l, const double *temb, const double *cond,
                          const double *x, double *y, ref64_acts *a, ref64_noise *nz) {
    int T = r->T, C = r->C, H = r->H, F = r->F, Tc = r->Tc;
    size_t TC = (size_t)T * C, TF = (size_t)T * F;
    const double *shift_a = a->mod, *scale_a = a->mod + C, *gate_a = a->mod + 2 * C;
    const double *shift_m = a->mod + 3 * C, *scale_m = a->mod + 4 * C, *gate_m = a->mod + 5 * C;
    memmove(a->temb, temb, sizeof(double) * (size_t)C); /* temb may be a->temb */
    memcpy(a->x, x, sizeof(double) * TC);
    a->cond = cond;
    ref64_linear_forward(a->mod, a->temb, WT(ADA_W), WT(ADA_B), 1, C, 6 * C);
    perturb(nz, a->mod, 6 * (size_t)C);
    /* self-attention */
    ref64_layernorm_forward(a->n1, a->x, T, C);
    perturb(nz, a->n1, TC);
    ref64_modulate_forward(a->m1, a->n1, shift_a, scale_a, T, C);
    perturb(nz, a->m1, TC);
    ref64_linear_forward(a->qkv, a->m1, WT(QKV_W), WT(QKV_B), T, C, 3 * C);
    perturb(nz, a->qkv, 3 * TC);
    ref64_attention_forward(a->att, a->qkv, 3 * C, a->qkv + C, a->qkv + 2 * C, 3 * C, T, T, C, H,
                            a->p);
    perturb(nz, a->att, TC);
    ref64_linear_forward(a->ao, a->att, WT(ATTN_OUT_W), WT(ATTN_OUT_B), T, C, C);
    perturb(nz, a->ao, TC);
    ref64_residual_forward(a->x1, a->x, gate_a, a->ao, T, C);
    perturb(nz, a->x1, TC);
    /* cross-attention */
    ref64_layernorm_forward(a->n2, a->x1, T, C);
    perturb(nz, a->n2, TC);
    ref64_linear_forward(a->qc, a->n2, WT(XQ_W), WT(XQ_B), T, C, C);
    perturb(nz, a->qc, TC);
    ref64_linear_forward(a->kvc, cond, WT(XKV_W), WT(XKV_B), Tc, C, 2 * C);
    perturb(nz, a->kvc, 2 * (size_t)Tc * C);
    ref64_attention_forward(a->ca, a->qc, C, a->kvc, a->kvc + C, 2 * C, T, Tc, C, H, a->p);
    perturb(nz, a->ca, TC);
    ref64_linear_forward(a->co, a->ca, WT(XOUT_W), WT(XOUT_B), T, C, C);
    perturb(nz, a->co, TC);
    ref64_residual_forward(a->x2, a->x1, NULL, a->co, T, C);
    perturb(nz, a->x2, TC);
    /* MLP */
    ref64_layernorm_forward(a->n3, a->x2, T, C);
    perturb(nz, a->n3, TC);
    ref64_modulate_forward(a->m3, a->n3, shift_m, scale_m, T, C);
    perturb(nz, a->m3, TC);
    ref64_linear_forward(a->h, a->m3, WT(FC1_W), WT(FC1_B), T, C, F);
    perturb(nz, a->h, TF);
    ref64_gelu_forward(a->g, a->h, TF);
    perturb(nz, a->g, TF);
    ref64_linear_forward(a->mo, a->g, WT(FC2_W), WT(FC2_B), T, F, C);
    perturb(nz, a->mo, TC);
    ref64_residual_forward(y, a->x2, gate_m, a->mo, T, C);
    perturb(nz, y, TC);
}

/* silu(temb(t)), then the block forward. */
void ref64_layer_forward(const ref64_model *r, int l, const ref64_inputs *in, const double *x,
                         double *y, ref64_acts *a, ref64_noise *nz) {
    timestep_features(a->temb, in->t, r->C, nz);
    layer_forward(r, l, a->temb, in->cond, x, y, a, nz);
}

/* out (n) = a + b, perturbed: the two gradients reaching a residual stream. */
static void add(double *out, const double *a, const double *b, size_t n, ref64_noise *nz) {
    for (size_t i = 0; i < n; i++)
        out[i] = a[i] + b[i];
    perturb(nz, out, n);
}

/* The block backward, last op first; dparams written, not accumulated. */
void ref64_layer_backward(const ref64_model *r, int l, ref64_acts *a, const double *dy, double *dx,
                          double *dparams, ref64_noise *nz) {
    int T = r->T, C = r->C, H = r->H, F = r->F, Tc = r->Tc;
    size_t TC = (size_t)T * C, TF = (size_t)T * F;
    const double *scale_a = a->mod + C, *gate_a = a->mod + 2 * C;
    const double *scale_m = a->mod + 4 * C, *gate_m = a->mod + 5 * C;
    double *dmod = a->dmod;
#define DW(i) (dparams + r->off[REF64_##i])
    /* y = x2 + gate_m * mo */
    ref64_residual_backward(a->dmo, dmod + 5 * C, dy, gate_m, a->mo, T, C);
    perturb(nz, a->dmo, TC);
    ref64_linear_backward(a->dg, DW(FC2_W), DW(FC2_B), a->dmo, a->g, WT(FC2_W), T, F, C);
    perturb(nz, a->dg, TF);
    ref64_gelu_backward(a->dh, a->dg, a->h, TF);
    perturb(nz, a->dh, TF);
    ref64_linear_backward(a->dm3, DW(FC1_W), DW(FC1_B), a->dh, a->m3, WT(FC1_W), T, C, F);
    perturb(nz, a->dm3, TC);
    ref64_modulate_backward(a->dn3, dmod + 3 * C, dmod + 4 * C, a->dm3, a->n3, scale_m, T, C);
    perturb(nz, a->dn3, TC);
    ref64_layernorm_backward(a->dln, a->dn3, a->x2, T, C);
    perturb(nz, a->dln, TC);
    add(a->dx2, dy, a->dln, TC, nz);
    /* x2 = x1 + co */
    ref64_linear_backward(a->dca, DW(XOUT_W), DW(XOUT_B), a->dx2, a->ca, WT(XOUT_W), T, C, C);
    perturb(nz, a->dca, TC);
    ref64_attention_backward(a->dqc, a->dkvc, a->dkvc + C, a->dca, a->qc, C, a->kvc, a->kvc + C,
                             2 * C, T, Tc, C, H, a->p, a->dp);
    perturb(nz, a->dqc, TC);
    perturb(nz, a->dkvc, 2 * (size_t)Tc * C);
    ref64_linear_backward(NULL, DW(XKV_W), DW(XKV_B), a->dkvc, a->cond, WT(XKV_W), Tc, C, 2 * C);
    ref64_linear_backward(a->dn2, DW(XQ_W), DW(XQ_B), a->dqc, a->n2, WT(XQ_W), T, C, C);
    perturb(nz, a->dn2, TC);
    ref64_layernorm_backward(a->dln, a->dn2, a->x1, T, C);
    perturb(nz, a->dln, TC);
    add(a->dx1, a->dx2, a->dln, TC, nz);
    /* x1 = x + gate_a * ao */
    ref64_residual_backward(a->dao, dmod + 2 * C, a->dx1, gate_a, a->ao, T, C);
    perturb(nz, a->dao, TC);
    ref64_linear_backward(a->datt, DW(ATTN_OUT_W), DW(ATTN_OUT_B), a->dao, a->att, WT(ATTN_OUT_W),
                          T, C, C);
    perturb(nz, a->datt, TC);
    ref64_attention_backward(a->dqkv, a->dqkv + C, a->dqkv + 2 * C, a->datt, a->qkv, 3 * C,
                             a->qkv + C, a->qkv + 2 * C, 3 * C, T, T, C, H, a->p, a->dp);
    perturb(nz, a->dqkv, 3 * TC);
    ref64_linear_backward(a->dm1, DW(QKV_W), DW(QKV_B), a->dqkv, a->m1, WT(QKV_W), T, C, 3 * C);
    perturb(nz, a->dm1, TC);
    ref64_modulate_backward(a->dn1, dmod, dmod + C, a->dm1, a->n1, scale_a, T, C);
    perturb(nz, a->dn1, TC);
    ref64_layernorm_backward(a->dln, a->dn1, a->x, T, C);
    perturb(nz, a->dln, TC);
    add(dx, a->dx1, a->dln, TC, nz);
    /* mod = ada(temb): dmod is complete now */
    ref64_linear_backward(NULL, DW(ADA_W), DW(ADA_B), dmod, a->temb, WT(ADA_W), 1, C, 6 * C);
#undef DW
}

/* ---- loss and a whole step ---------------------------------------------------------------- */

/* Mean squared error, and its gradient into dy when dy is not NULL. */
double ref64_loss(const ref64_model *r, const ref64_inputs *in, const double *y, double *dy,
                  ref64_noise *nz) {
    size_t n = (size_t)r->T * r->C;
    double s = 0;
    for (size_t i = 0; i < n; i++) {
        double e = y[i] - in->target[i];
        s += e * e;
        if (dy) dy[i] = 2 * e / (double)n;
    }
    if (dy) perturb(nz, dy, n);
    return s / (double)n;
}

/* Forward of every layer, the loss, backward of every layer; the loss, or
 * NAN when out of memory. */
double ref64_step(const ref64_model *r, const ref64_inputs *in, double *y, double *dparams,
                  ref64_noise *nz) {
    size_t TC = (size_t)r->T * r->C;
    ref64_acts **acts = calloc((size_t)r->L, sizeof *acts);
    double *temb = malloc(sizeof(double) * (size_t)r->C);
    double *cur = malloc(sizeof(double) * TC), *next = malloc(sizeof(double) * TC);
    double loss = NAN;
    int ok = acts && temb && cur && next;
    for (int l = 0; ok && l < r->L; l++)
        ok = (acts[l] = ref64_acts_new(r)) != NULL;
    if (ok) {
        /* one silu(temb(t)) for every layer, as one stored tensor */
        timestep_features(temb, in->t, r->C, nz);
        memcpy(cur, in->x, sizeof(double) * TC);
        for (int l = 0; l < r->L; l++) {
            layer_forward(r, l, temb, in->cond, cur, next, acts[l], nz);
            double *s = cur;
            cur = next, next = s;
        }
        memcpy(y, cur, sizeof(double) * TC);
        loss = ref64_loss(r, in, y, cur, nz); /* cur: dy */
        for (int l = r->L - 1; l >= 0; l--) {
            ref64_layer_backward(r, l, acts[l], cur, next, dparams + (size_t)l * r->P, nz);
            double *s = cur;
            cur = next, next = s;
        }
    }
    for (int l = 0; acts && l < r->L; l++)
        ref64_acts_free(acts[l]);
    free(acts), free(temb), free(cur), free(next);
    return loss;
}
