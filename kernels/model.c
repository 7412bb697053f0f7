/* model.c - the small DiT-like block stack, its inputs and its loss.
 *
 * One block (x: (T, C) tokens, cond: (Tc, C), timestep t):
 *   mod = ada(silu(temb(t)))               six (C) vectors: shift/scale/gate
 *   x1  = x  + gate_a * out(attn(qkv(modulate(ln(x), shift_a, scale_a))))
 *   x2  = x1 + xout(attn(xq(ln(x1)), xkv(cond)))            cross-attention
 *   y   = x2 + gate_m * fc2(gelu(fc1(modulate(ln(x2), shift_m, scale_m))))
 *
 * Precision: weights and every tensor between ops are bf16 (rounded after
 * each op); ops accumulate in fp32 in a fixed order; parameter gradients
 * and the adaLN vectors' gradients are fp32. Activation gradients are
 * rounded to bf16 like activations.
 *
 * Memory: `saved` is written by the forward and holds every op input the
 * backward reads (and the LayerNorm/softmax statistics), so neither
 * backward recomputes a forward op; besides saved and dy the backward only
 * reads the weights and the microbatch's cond and timestep. `wstate`
 * holds the output gradient of every linear for the weight backward. Both
 * are laid out as [fp32 part of each layer][bf16 part of each layer], with
 * no padding, so their sizes are exact sums of the tables below; they must
 * be aligned for float (malloc'd memory is). Under selective recompute
 * saved leaves out the attention cores (CORE_*), and the input backward
 * rebuilds them one layer at a time into the caller's `core` area, laid out
 * the same way for one layer, from the q, k and v that saved keeps.
 *
 * RNG keys (seed = config seed): weight tensor i of layer l is
 * (1 << 56) | (l << 8) | i; input `which` (0 x, 1 cond, 2 target,
 * 3 timestep) of microbatch mb is (2 << 56) | (mb << 8) | which. Weights are
 * N(0, 1) / sqrt(in features), biases N(0, 1) * 0.02; inputs are N(0, 1)
 * and the timestep uniform in [0, 1).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels_internal.h"

/* ---- the tables: parameters, saved, wstate, workspaces ------------------------------- */

/* Sizes are in elements; d is a `const dims *`. */
typedef struct dims {
    size_t T, C, H, F, Tc;
} dims;

/* clang-format off */
/* (name, rows, cols): one layer's parameters, in order. */
#define PARAM_TENSORS(X) \
    X(ada_w, 6 * C, C)  X(ada_b, 6 * C, 1) \
    X(qkv_w, 3 * C, C)  X(qkv_b, 3 * C, 1) \
    X(attn_out_w, C, C) X(attn_out_b, C, 1) \
    X(xq_w, C, C)       X(xq_b, C, 1) \
    X(xkv_w, 2 * C, C)  X(xkv_b, 2 * C, 1) \
    X(xout_w, C, C)     X(xout_b, C, 1) \
    X(fc1_w, F, C)      X(fc1_b, F, 1) \
    X(fc2_w, C, F)      X(fc2_b, C, 1)

/* (name, values): what one layer's forward saves. fp32: LayerNorm and
 * softmax statistics (the softmax's max and sum per head and query). */
#define SAVED_F32(X) KEPT_F32(X) CORE_F32(X)
#define KEPT_F32(X) \
    X(mean1, d->T) X(rstd1, d->T) X(mean2, d->T) X(rstd2, d->T) X(mean3, d->T) X(rstd3, d->T)
/* bf16: the adaLN vectors and every op input the backward reads. */
#define SAVED_BF16(X) KEPT_BF16(X) CORE_BF16(X)
#define KEPT_BF16(X) \
    X(mod, 6 * d->C)        /* shift, scale, gate (attn), then (MLP) */ \
    X(x, d->T * d->C)       /* block input (LayerNorm 1) */ \
    X(n1, d->T * d->C)      /* LayerNorm 1 out (modulate) */ \
    X(m1, d->T * d->C)      /* modulated (qkv linear) */ \
    X(qkv, 3 * d->T * d->C) /* q | k | v per token (attention) */ \
    X(ao, d->T * d->C)      /* out linear (gate) */ \
    X(x1, d->T * d->C)      /* after self-attention (LayerNorm 2) */ \
    X(n2, d->T * d->C)      /* LayerNorm 2 out (xq linear) */ \
    X(qc, d->T * d->C)      /* cross-attention queries */ \
    X(kvc, 2 * d->Tc * d->C) /* k | v per cond token */ \
    X(x2, d->T * d->C)      /* after cross-attention (LayerNorm 3) */ \
    X(n3, d->T * d->C)      /* LayerNorm 3 out (modulate) */ \
    X(m3, d->T * d->C)      /* modulated (fc1) */ \
    X(h, d->T * d->F)       /* fc1 out (GELU) */ \
    X(g, d->T * d->F)       /* GELU out (fc2) */ \
    X(mo, d->T * d->C)      /* fc2 out (gate) */
/* The attention cores: what scores, softmax and the product with V make
 * from q, k and v, which selective recompute does not keep: the outputs
 * (the out and xout linears' inputs) and the softmax statistics. */
#define CORE_F32(X) X(sa_stats, 2 * d->H * d->T) X(ca_stats, 2 * d->H * d->T)
#define CORE_BF16(X) X(att, d->T * d->C) X(ca, d->T * d->C)

/* What one layer's input backward keeps for its weight backward: the
 * adaLN vectors' gradient (fp32), every linear's output gradient, and
 * copies of the linears' inputs (the saved tensors the weight backward
 * reads), so that the rest of saved is freed at the input backward. */
#define WSTATE_F32(X) X(dmod, 6 * d->C)
#define WSTATE_BF16(X) \
    X(dqkv, 3 * d->T * d->C) X(dao, d->T * d->C) X(dqc, d->T * d->C) \
    X(dkvc, 2 * d->Tc * d->C) X(dco, d->T * d->C) X(dh, d->T * d->F) X(dmo, d->T * d->C) \
    W_INPUTS(X)
/* The linears' inputs: names as in SAVED_BF16 (the qkv, attention out,
 * cross-attention query and out, fc1 and fc2 inputs). */
#define W_INPUTS(X) \
    X(m1, d->T * d->C) X(att, d->T * d->C) X(n2, d->T * d->C) X(ca, d->T * d->C) \
    X(m3, d->T * d->C) X(g, d->T * d->F)

/* fp32 working copies: every saved bf16 tensor, plus these. */
#define ACTS_EXTRA(X) \
    X(co, d->T * d->C) X(y, d->T * d->C) X(temb, d->C) X(cond, d->Tc * d->C) \
    X(scratch, 2 * (d->T > d->Tc ? d->T : d->Tc))
/* fp32 gradients of one layer's backward. */
#define GRADS(X) \
    X(dy, d->T * d->C) X(dmo, d->T * d->C) X(dg, d->T * d->F) X(dh, d->T * d->F) \
    X(dm3, d->T * d->C) X(dn3, d->T * d->C) X(dln, d->T * d->C) X(dx2, d->T * d->C) \
    X(dca, d->T * d->C) X(dqc, d->T * d->C) X(dkvc, 2 * d->Tc * d->C) X(dn2, d->T * d->C) \
    X(dx1, d->T * d->C) X(dao, d->T * d->C) X(datt, d->T * d->C) X(dqkv, 3 * d->T * d->C) \
    X(dm1, d->T * d->C) X(dn1, d->T * d->C)
/* clang-format on */

#define AS_FIELD_F32(name, n) float *name;
#define AS_FIELD_BF16(name, n) ppv_bf16 *name;
#define AS_COUNT(name, n) +(n)
/* Points s->name at p and advances p (s and p are locals of the caller). */
#define AS_PLACE(name, n) s->name = p, p += (n);

typedef struct saved_f32 {
    SAVED_F32(AS_FIELD_F32)
} saved_f32;
typedef struct saved_bf16 {
    SAVED_BF16(AS_FIELD_BF16)
} saved_bf16;
typedef struct wstate_f32 {
    WSTATE_F32(AS_FIELD_F32)
} wstate_f32;
typedef struct wstate_bf16 {
    WSTATE_BF16(AS_FIELD_BF16)
} wstate_bf16;
typedef struct acts { /* fp32 copies of the saved tensors, and a few more */
    SAVED_BF16(AS_FIELD_F32)
    ACTS_EXTRA(AS_FIELD_F32)
} acts;
typedef struct grads {
    GRADS(AS_FIELD_F32)
} grads;

#define AS_ENUM(name, rows, cols) P_##name,
enum { PARAM_TENSORS(AS_ENUM) P_COUNT };
_Static_assert((int)P_COUNT == (int)PPV_MODEL_PARAM_TENSORS, "parameter table and header disagree");

struct ppv_model {
    ppv_model_config cfg;
    dims d;
    ppv_param_tensor tensors[PPV_MODEL_PARAM_TENSORS];
    size_t layer_params; /* values per layer */
    ppv_bf16 *w16;       /* (layers, layer_params) */
    float *w32;          /* the same values widened for the fp32 ops */
    const ppvk_ops *ops; /* where the ops run: the CPU unless ppv_model_set_device says */
};

/* The tensor dimensions of a config, as sizes. */
static dims dims_of(const ppv_model_config *c) {
    return (dims){(size_t)c->seq_len, (size_t)c->d_model, (size_t)c->n_heads, (size_t)c->d_ff,
                  (size_t)c->cond_len};
}

/* Values per layer in each part of saved (without the attention cores
 * when `sel`), of the cores and of wstate. */
static size_t saved_f32_count(const dims *d, int sel) {
    return sel ? 0 KEPT_F32(AS_COUNT) : 0 SAVED_F32(AS_COUNT);
}
static size_t saved_bf16_count(const dims *d, int sel) {
    return sel ? 0 KEPT_BF16(AS_COUNT) : 0 SAVED_BF16(AS_COUNT);
}
static size_t core_bytes(const dims *d) {
    return sizeof(float) * (0 CORE_F32(AS_COUNT)) + sizeof(ppv_bf16) * (0 CORE_BF16(AS_COUNT));
}
static size_t wstate_f32_count(const dims *d) {
    return 0 WSTATE_F32(AS_COUNT);
}
static size_t wstate_bf16_count(const dims *d) {
    return 0 WSTATE_BF16(AS_COUNT);
}

/* Pointers to layer i's part of a saved area holding n layers: all of it
 * in base, or, when core is not NULL (selective), the attention cores in
 * core (one layer's) and the rest in base. The areas are only read through
 * them when base was a const pointer. */
static void saved_layout(const dims *d, void *base, int32_t n, int32_t i, void *core, saved_f32 *sf,
                         saved_bf16 *sb) {
    int sel = core != NULL;
    float *p = (float *)base + (size_t)i * saved_f32_count(d, sel);
    ppv_bf16 *q = (ppv_bf16 *)((float *)base + (size_t)n * saved_f32_count(d, sel)) +
                  (size_t)i * saved_bf16_count(d, sel);
    ppv_bf16 *qcore = NULL; /* where the bf16 cores go when apart */
    {
        saved_f32 *s = sf;
        KEPT_F32(AS_PLACE)
        if (sel) p = core;
        CORE_F32(AS_PLACE)
        qcore = (ppv_bf16 *)p;
    }
    {
        ppv_bf16 *p = q;
        saved_bf16 *s = sb;
        KEPT_BF16(AS_PLACE)
        if (sel) p = qcore;
        CORE_BF16(AS_PLACE)
    }
}

/* Pointers to layer i's part of a wstate area holding n layers. */
static void wstate_layout(const dims *d, void *base, int32_t n, int32_t i, wstate_f32 *wf,
                          wstate_bf16 *wb) {
    float *p = (float *)base + (size_t)i * wstate_f32_count(d);
    wstate_f32 *s = wf;
    WSTATE_F32(AS_PLACE)
    ppv_bf16 *q = (ppv_bf16 *)((float *)base + (size_t)n * wstate_f32_count(d)) +
                  (size_t)i * wstate_bf16_count(d);
    {
        ppv_bf16 *p = q;
        wstate_bf16 *s = wb;
        WSTATE_BF16(AS_PLACE)
    }
}

/* Allocates the fp32 working copies of one layer's activations (and, if
 * g is not NULL, its gradients) in one block; returns it (free it), or
 * NULL when out of memory. */
static float *work_alloc(const dims *d, acts *a, grads *g) {
    size_t n = 0 SAVED_BF16(AS_COUNT) ACTS_EXTRA(AS_COUNT);
    if (g) n += 0 GRADS(AS_COUNT);
    float *base = malloc(sizeof(float) * n), *p = base;
    if (!base) return NULL;
    {
        acts *s = a;
        SAVED_BF16(AS_PLACE)
        ACTS_EXTRA(AS_PLACE)
    }
    if (g) {
        grads *s = g;
        GRADS(AS_PLACE)
    }
    return base;
}

/* ---- config, weights, inputs ---------------------------------------------------------- */

/* The documented small default (see ppv_kernels.h). */
ppv_model_config ppv_model_config_default(void) {
    return (ppv_model_config){.layers = 4,
                              .d_model = 32,
                              .n_heads = 2,
                              .d_ff = 64,
                              .seq_len = 8,
                              .cond_len = 4,
                              .seed = 1};
}

/* Checks one dimension; writes the reason into err and returns -1 if bad. */
static int check_dim(const char *name, int32_t v, int32_t max, char *err, size_t errlen) {
    if (v >= 1 && v <= max) return 0;
    snprintf(err, errlen, "model config: %s = %d is out of range; use 1..%d", name, (int)v,
             (int)max);
    return -1;
}

/* 0 if c describes a model this layer can build, else -1 with a reason. */
static int config_check(const ppv_model_config *c, char *err, size_t errlen) {
    if (check_dim("layers", c->layers, 1 << 16, err, errlen) ||
        check_dim("d_model", c->d_model, 1 << 16, err, errlen) ||
        check_dim("n_heads", c->n_heads, 1 << 16, err, errlen) ||
        check_dim("d_ff", c->d_ff, 1 << 20, err, errlen) ||
        check_dim("seq_len", c->seq_len, 1 << 20, err, errlen) ||
        check_dim("cond_len", c->cond_len, 1 << 20, err, errlen))
        return -1;
    if (c->d_model % c->n_heads != 0) {
        snprintf(err, errlen,
                 "model config: n_heads = %d does not divide d_model = %d; pick n_heads that "
                 "divides d_model",
                 (int)c->n_heads, (int)c->d_model);
        return -1;
    }
    return 0;
}

/* RNG tensor keys of weights and inputs (see the top of this file). */
static uint64_t weight_key(int32_t layer, int tensor) {
    return (1ull << 56) | ((uint64_t)(uint32_t)layer << 8) | (uint64_t)tensor;
}

static uint64_t input_key(int32_t mb, int which) {
    return (2ull << 56) | ((uint64_t)(uint32_t)mb << 8) | (uint64_t)which;
}

/* Draws every weight of every layer from the counter RNG. */
static void weights_init(ppv_model *m) {
    for (int32_t l = 0; l < m->cfg.layers; l++)
        for (int i = 0; i < PPV_MODEL_PARAM_TENSORS; i++) {
            const ppv_param_tensor *t = &m->tensors[i];
            size_t n = (size_t)t->rows * (size_t)t->cols,
                   at = (size_t)l * m->layer_params + t->offset;
            float sd = t->cols == 1 ? 0.02f : 1.0f / sqrtf((float)t->cols);
            for (size_t e = 0; e < n; e++) {
                float v = ppv_rng_normal(m->cfg.seed, weight_key(l, i), e) * sd;
                m->w16[at + e] = ppv_bf16_from_f32(v);
                m->w32[at + e] = ppv_bf16_to_f32(m->w16[at + e]);
            }
        }
}

/* Validates cfg, lays out the parameter table and draws the weights. */
ppv_model *ppv_model_new(const ppv_model_config *cfg, char *err, size_t errlen) {
    char dummy[1];
    if (!err || errlen == 0) err = dummy, errlen = sizeof dummy;
    if (!cfg) {
        snprintf(err, errlen, "model config: NULL");
        return NULL;
    }
    if (config_check(cfg, err, errlen) != 0) return NULL;
    ppv_model *m = calloc(1, sizeof *m);
    if (!m) goto oom;
    m->cfg = *cfg;
    m->d = dims_of(cfg);
    m->ops = &ppvk_cpu_ops;
    int32_t C = cfg->d_model, F = cfg->d_ff;
    size_t off = 0;
#define AS_TENSOR(nm, r, c)                                                                        \
    m->tensors[P_##nm] = (ppv_param_tensor){#nm, (r), (c), off};                                   \
    off += (size_t)(r) * (size_t)(c);
    PARAM_TENSORS(AS_TENSOR)
    m->layer_params = off;
    size_t total = off * (size_t)cfg->layers;
    m->w16 = malloc(sizeof(ppv_bf16) * total);
    m->w32 = malloc(sizeof(float) * total);
    if (!m->w16 || !m->w32) goto oom;
    weights_init(m);
    return m;
oom:
    snprintf(err, errlen, "model: out of memory for %d layers of d_model %d", (int)cfg->layers,
             (int)cfg->d_model);
    ppv_model_free(m);
    return NULL;
}

/* Frees m (NULL is fine). */
void ppv_model_free(ppv_model *m) {
    if (!m) return;
    free(m->w16);
    free(m->w32);
    free(m);
}

/* m's config, or NULL. */
const ppv_model_config *ppv_model_config_of(const ppv_model *m) {
    return m ? &m->cfg : NULL;
}

/* Runs m's ops on device `name` from now on; 0, or -1 with the reason in err. */
int ppv_model_set_device(ppv_model *m, const char *name, char *err, size_t errlen) {
    if (!m) return -1;
    return ppvk_set_device(&m->ops, name, err, errlen);
}

/* The name of the device m's ops run on. */
const char *ppv_model_device(const ppv_model *m) {
    return m ? m->ops->name : "cpu";
}

/* 0 if every op m ran on its device succeeded; -1 with the first failure in err. */
int ppv_model_device_status(const ppv_model *m, char *err, size_t errlen) {
    return m ? ppvk_device_status(m->ops, err, errlen) : 0;
}

/* 1 if [l0, l1) is a layer range of m (possibly empty). */
static int range_ok(const ppv_model *m, int32_t l0, int32_t l1) {
    return m && l0 >= 0 && l0 <= l1 && l1 <= m->cfg.layers;
}

/* Parameter (and gradient) values of layers [l0, l1); 0 for a bad range. */
size_t ppv_model_grad_count(const ppv_model *m, int32_t l0, int32_t l1) {
    return range_ok(m, l0, l1) ? (size_t)(l1 - l0) * m->layer_params : 0;
}

/* Copies the description of tensor i; -1 if out of range. */
int ppv_model_param_tensor(const ppv_model *m, int i, ppv_param_tensor *out) {
    if (!m || !out || i < 0 || i >= PPV_MODEL_PARAM_TENSORS) return -1;
    *out = m->tensors[i];
    return 0;
}

/* Layer `layer`'s bf16 parameters, or NULL. */
const ppv_bf16 *ppv_model_layer_params(const ppv_model *m, int32_t layer) {
    if (!m || layer < 0 || layer >= m->cfg.layers) return NULL;
    return m->w16 + (size_t)layer * m->layer_params;
}

int ppv_model_set_layer_params(ppv_model *m, int32_t layer, const ppv_bf16 *params) {
    if (!m || !params || layer < 0 || layer >= m->cfg.layers) return -1;
    size_t n = m->layer_params, base = (size_t)layer * n;
    memcpy(m->w16 + base, params, n * sizeof *params);
    for (size_t k = 0; k < n; k++)
        m->w32[base + k] = ppv_bf16_to_f32(params[k]);
    return 0;
}

/* Draws microbatch mb's x, cond, target and timestep; 0, or -1 (nothing
 * left allocated). */
int ppv_mb_inputs_init(const ppv_model *m, int32_t mb, ppv_mb_inputs *in) {
    if (!m || !in || mb < 0) return -1;
    const dims *d = &m->d;
    size_t ntok = d->T * d->C, ncond = d->Tc * d->C;
    *in = (ppv_mb_inputs){0};
    in->x = malloc(sizeof(ppv_bf16) * ntok);
    in->cond = malloc(sizeof(ppv_bf16) * ncond);
    in->target = malloc(sizeof(ppv_bf16) * ntok);
    if (!in->x || !in->cond || !in->target) {
        ppv_mb_inputs_free(in);
        return -1;
    }
    uint64_t s = m->cfg.seed;
    for (size_t i = 0; i < ntok; i++) {
        in->x[i] = ppv_bf16_from_f32(ppv_rng_normal(s, input_key(mb, 0), i));
        in->target[i] = ppv_bf16_from_f32(ppv_rng_normal(s, input_key(mb, 2), i));
    }
    for (size_t i = 0; i < ncond; i++)
        in->cond[i] = ppv_bf16_from_f32(ppv_rng_normal(s, input_key(mb, 1), i));
    in->timestep = ppv_rng_uniform(s, input_key(mb, 3), 0);
    return 0;
}

/* Frees in's tensors and clears them. */
void ppv_mb_inputs_free(ppv_mb_inputs *in) {
    if (!in) return;
    free(in->x);
    free(in->cond);
    free(in->target);
    in->x = in->cond = in->target = NULL;
}

/* Exact bytes of saved for layers [l0, l1): the SAVED_* tables, or the
 * KEPT_* ones under selective recompute. */
static size_t saved_bytes(const ppv_model *m, int32_t l0, int32_t l1, int sel) {
    if (!range_ok(m, l0, l1)) return 0;
    return (size_t)(l1 - l0) * (sizeof(float) * saved_f32_count(&m->d, sel) +
                                sizeof(ppv_bf16) * saved_bf16_count(&m->d, sel));
}

size_t ppv_layers_saved_bytes(const ppv_model *m, int32_t l0, int32_t l1) {
    return saved_bytes(m, l0, l1, 0);
}

size_t ppv_layers_selective_saved_bytes(const ppv_model *m, int32_t l0, int32_t l1) {
    return saved_bytes(m, l0, l1, 1);
}

/* Exact bytes of one layer's attention cores: the CORE_* tables. */
size_t ppv_layer_core_bytes(const ppv_model *m) {
    return m ? core_bytes(&m->d) : 0;
}

/* Exact bytes of wstate for layers [l0, l1): the WSTATE_* tables. */
size_t ppv_layers_wstate_bytes(const ppv_model *m, int32_t l0, int32_t l1) {
    if (!range_ok(m, l0, l1)) return 0;
    return (size_t)(l1 - l0) *
           (sizeof(float) * wstate_f32_count(&m->d) + sizeof(ppv_bf16) * wstate_bf16_count(&m->d));
}

/* ---- forward -------------------------------------------------------------------------- */

/* Rounds an op's output x (n values) to bf16 in place and, if dst is not
 * NULL, stores it there. */
static void keep(float *x, ppv_bf16 *dst, size_t n) {
    ppvk_round_bf16(x, n);
    if (dst) ppvk_f32_to_bf16(dst, x, n);
}

/* The fp32 copy of one of layer l's parameter tensors. */
static const float *W(const ppv_model *m, int32_t l, int tensor) {
    return m->w32 + (size_t)l * m->layer_params + m->tensors[tensor].offset;
}

/* silu(temb(t)) (C), shared by every layer of a microbatch. */
static void timestep_features(const ppvk_ops *ops, float *out, float t, int C) {
    ops->timestep_embedding(out, t, C);
    ppvk_round_bf16(out, (size_t)C);
    ops->silu_forward(out, out, (size_t)C);
    ppvk_round_bf16(out, (size_t)C);
}

/* The self-attention core: a->qkv -> a->att (kept in sb->att) and the
 * softmax statistics. The forward and selective recompute's rebuild both
 * run it, so the rebuilt core is the forward's bit for bit. */
static void self_attention_core(const ppv_model *m, acts *a, saved_f32 *sf, saved_bf16 *sb) {
    const dims *d = &m->d;
    int T = (int)d->T, C = (int)d->C, H = (int)d->H;
    m->ops->attention_forward(a->att, sf->sa_stats, a->qkv, 3 * C, a->qkv + C, a->qkv + 2 * C,
                              3 * C, T, T, C, H, a->scratch);
    keep(a->att, sb->att, d->T * d->C);
}

/* The cross-attention core: a->qc, a->kvc -> a->ca (kept in sb->ca) and
 * the softmax statistics. */
static void cross_attention_core(const ppv_model *m, acts *a, saved_f32 *sf, saved_bf16 *sb) {
    const dims *d = &m->d;
    int T = (int)d->T, C = (int)d->C, H = (int)d->H, Tc = (int)d->Tc;
    m->ops->attention_forward(a->ca, sf->ca_stats, a->qc, C, a->kvc, a->kvc + C, 2 * C, T, Tc, C, H,
                              a->scratch);
    keep(a->ca, sb->ca, d->T * d->C);
}

/* One block: a->x (T, C) -> a->y (T, C), keeping op inputs in saved.
 * Expects a->temb (silu'd) and a->cond filled. */
static void layer_forward(const ppv_model *m, int32_t l, acts *a, saved_f32 *sf, saved_bf16 *sb) {
    const dims *d = &m->d;
    int T = (int)d->T, C = (int)d->C, F = (int)d->F, Tc = (int)d->Tc;
    size_t TC = d->T * d->C;
    float *mod = a->mod;
    const float *shift_a = mod, *scale_a = mod + C, *gate_a = mod + 2 * C;
    const float *shift_m = mod + 3 * C, *scale_m = mod + 4 * C, *gate_m = mod + 5 * C;

    m->ops->linear_forward(mod, a->temb, W(m, l, P_ada_w), W(m, l, P_ada_b), 1, C, 6 * C);
    keep(mod, sb->mod, 6 * d->C);
    keep(a->x, sb->x, TC);
    /* self-attention, adaLN-modulated and gated */
    m->ops->layernorm_forward(a->n1, sf->mean1, sf->rstd1, a->x, T, C);
    keep(a->n1, sb->n1, TC);
    m->ops->modulate_forward(a->m1, a->n1, shift_a, scale_a, T, C);
    keep(a->m1, sb->m1, TC);
    m->ops->linear_forward(a->qkv, a->m1, W(m, l, P_qkv_w), W(m, l, P_qkv_b), T, C, 3 * C);
    keep(a->qkv, sb->qkv, 3 * TC);
    self_attention_core(m, a, sf, sb);
    m->ops->linear_forward(a->ao, a->att, W(m, l, P_attn_out_w), W(m, l, P_attn_out_b), T, C, C);
    keep(a->ao, sb->ao, TC);
    m->ops->residual_forward(a->x1, a->x, gate_a, a->ao, T, C);
    keep(a->x1, sb->x1, TC);
    /* cross-attention to cond */
    m->ops->layernorm_forward(a->n2, sf->mean2, sf->rstd2, a->x1, T, C);
    keep(a->n2, sb->n2, TC);
    m->ops->linear_forward(a->qc, a->n2, W(m, l, P_xq_w), W(m, l, P_xq_b), T, C, C);
    keep(a->qc, sb->qc, TC);
    m->ops->linear_forward(a->kvc, a->cond, W(m, l, P_xkv_w), W(m, l, P_xkv_b), Tc, C, 2 * C);
    keep(a->kvc, sb->kvc, 2 * d->Tc * d->C);
    cross_attention_core(m, a, sf, sb);
    m->ops->linear_forward(a->co, a->ca, W(m, l, P_xout_w), W(m, l, P_xout_b), T, C, C);
    keep(a->co, NULL, TC);
    m->ops->residual_forward(a->x2, a->x1, NULL, a->co, T, C);
    keep(a->x2, sb->x2, TC);
    /* MLP, adaLN-modulated and gated */
    m->ops->layernorm_forward(a->n3, sf->mean3, sf->rstd3, a->x2, T, C);
    keep(a->n3, sb->n3, TC);
    m->ops->modulate_forward(a->m3, a->n3, shift_m, scale_m, T, C);
    keep(a->m3, sb->m3, TC);
    m->ops->linear_forward(a->h, a->m3, W(m, l, P_fc1_w), W(m, l, P_fc1_b), T, C, F);
    keep(a->h, sb->h, d->T * d->F);
    m->ops->gelu_forward(a->g, a->h, d->T * d->F);
    keep(a->g, sb->g, d->T * d->F);
    m->ops->linear_forward(a->mo, a->g, W(m, l, P_fc2_w), W(m, l, P_fc2_b), T, F, C);
    keep(a->mo, sb->mo, TC);
    m->ops->residual_forward(a->y, a->x2, gate_m, a->mo, T, C);
    keep(a->y, NULL, TC);
}

/* 1 if p is aligned for float (NULL counts as aligned). */
static int float_aligned(const void *p) {
    return (uintptr_t)p % _Alignof(float) == 0;
}

/* Forward of layers [l0, l1), keeping the attention cores in saved or
 * (sel) only in a scratch area; 0, or -1 on bad arguments or out of
 * memory. */
static int layers_forward(const ppv_model *m, int32_t l0, int32_t l1, const ppv_mb_inputs *in,
                          const ppv_bf16 *x_in, ppv_bf16 *x_out, void *saved, int sel) {
    if (!range_ok(m, l0, l1) || !in || !in->cond || !x_in || !x_out || !float_aligned(saved) ||
        (l1 > l0 && !saved))
        return -1;
    const dims *d = &m->d;
    acts a;
    float *work = work_alloc(d, &a, NULL);
    void *core = sel ? malloc(core_bytes(d)) : NULL;
    if (!work || (sel && !core)) {
        free(work), free(core);
        return -1;
    }
    ppvk_bf16_to_f32(a.x, x_in, d->T * d->C);
    ppvk_bf16_to_f32(a.cond, in->cond, d->Tc * d->C);
    timestep_features(m->ops, a.temb, in->timestep, (int)d->C);
    for (int32_t l = l0; l < l1; l++) {
        saved_f32 sf;
        saved_bf16 sb;
        saved_layout(d, saved, l1 - l0, l - l0, core, &sf, &sb);
        layer_forward(m, l, &a, &sf, &sb);
        memcpy(a.x, a.y, sizeof(float) * d->T * d->C);
    }
    ppvk_f32_to_bf16(x_out, a.x, d->T * d->C);
    free(work), free(core);
    return 0;
}

int ppv_layers_forward(const ppv_model *m, int32_t l0, int32_t l1, const ppv_mb_inputs *in,
                       const ppv_bf16 *x_in, ppv_bf16 *x_out, void *saved) {
    return layers_forward(m, l0, l1, in, x_in, x_out, saved, 0);
}

int ppv_layers_forward_selective(const ppv_model *m, int32_t l0, int32_t l1,
                                 const ppv_mb_inputs *in, const ppv_bf16 *x_in, ppv_bf16 *x_out,
                                 void *saved) {
    return layers_forward(m, l0, l1, in, x_in, x_out, saved, 1);
}

/* ---- backward ------------------------------------------------------------------------- */

/* Widens the saved bf16 tensors of one layer into a: all of them, or
 * (sel) all but the attention cores, which it rebuilds into sf and sb. */
static void acts_load(const ppv_model *m, acts *a, saved_f32 *sf, saved_bf16 *sb, int sel) {
    const dims *d = &m->d;
#define AS_LOAD(name, n) ppvk_bf16_to_f32(a->name, sb->name, (n));
    KEPT_BF16(AS_LOAD)
    if (!sel) {
        CORE_BF16(AS_LOAD)
        return;
    }
#undef AS_LOAD
    self_attention_core(m, a, sf, sb);
    cross_attention_core(m, a, sf, sb);
}

/* dout = round(resid + dln): the gradient reaching a residual stream from
 * both its branches. */
static void add_round(float *dout, const float *resid, const float *dln, size_t n) {
    for (size_t i = 0; i < n; i++)
        dout[i] = resid[i] + dln[i];
    ppvk_round_bf16(dout, n);
}

/* One block backward for inputs: g->dy (T, C) -> g->dy (the block input's
 * gradient), keeping the linear output gradients and the adaLN vectors'
 * gradient in wstate. Expects a loaded from saved. */
static void layer_backward_input(const ppv_model *m, int32_t l, const acts *a, grads *g,
                                 const saved_f32 *sf, wstate_f32 *wf, wstate_bf16 *wb) {
    const dims *d = &m->d;
    int T = (int)d->T, C = (int)d->C, H = (int)d->H, F = (int)d->F, Tc = (int)d->Tc;
    size_t TC = d->T * d->C;
    const float *scale_a = a->mod + C, *gate_a = a->mod + 2 * C;
    const float *scale_m = a->mod + 4 * C, *gate_m = a->mod + 5 * C;
    float *dmod = wf->dmod; /* (6C) fp32: shift, scale, gate (attn), then (MLP) */
    float *scratch = a->scratch;

    /* y = x2 + gate_m * fc2(gelu(fc1(modulate(ln(x2))))) */
    m->ops->residual_backward(g->dmo, dmod + 5 * C, g->dy, gate_m, a->mo, T, C);
    keep(g->dmo, wb->dmo, TC);
    m->ops->linear_backward_input(g->dg, g->dmo, W(m, l, P_fc2_w), T, F, C);
    keep(g->dg, NULL, d->T * d->F);
    m->ops->gelu_backward(g->dh, g->dg, a->h, d->T * d->F);
    keep(g->dh, wb->dh, d->T * d->F);
    m->ops->linear_backward_input(g->dm3, g->dh, W(m, l, P_fc1_w), T, C, F);
    keep(g->dm3, NULL, TC);
    m->ops->modulate_backward(g->dn3, dmod + 3 * C, dmod + 4 * C, g->dm3, a->n3, scale_m, T, C);
    keep(g->dn3, NULL, TC);
    m->ops->layernorm_backward(g->dln, g->dn3, a->x2, sf->mean3, sf->rstd3, T, C);
    add_round(g->dx2, g->dy, g->dln, TC);
    /* x2 = x1 + xout(attn(xq(ln(x1)), xkv(cond))) */
    ppvk_f32_to_bf16(wb->dco, g->dx2, TC);
    m->ops->linear_backward_input(g->dca, g->dx2, W(m, l, P_xout_w), T, C, C);
    keep(g->dca, NULL, TC);
    m->ops->attention_backward(g->dqc, g->dkvc, g->dkvc + C, g->dca, a->qc, C, a->kvc, a->kvc + C,
                               2 * C, sf->ca_stats, T, Tc, C, H, scratch);
    keep(g->dqc, wb->dqc, TC);
    keep(g->dkvc, wb->dkvc, 2 * d->Tc * d->C);
    m->ops->linear_backward_input(g->dn2, g->dqc, W(m, l, P_xq_w), T, C, C);
    keep(g->dn2, NULL, TC);
    m->ops->layernorm_backward(g->dln, g->dn2, a->x1, sf->mean2, sf->rstd2, T, C);
    add_round(g->dx1, g->dx2, g->dln, TC);
    /* x1 = x + gate_a * out(attn(qkv(modulate(ln(x))))) */
    m->ops->residual_backward(g->dao, dmod + 2 * C, g->dx1, gate_a, a->ao, T, C);
    keep(g->dao, wb->dao, TC);
    m->ops->linear_backward_input(g->datt, g->dao, W(m, l, P_attn_out_w), T, C, C);
    keep(g->datt, NULL, TC);
    m->ops->attention_backward(g->dqkv, g->dqkv + C, g->dqkv + 2 * C, g->datt, a->qkv, 3 * C,
                               a->qkv + C, a->qkv + 2 * C, 3 * C, sf->sa_stats, T, T, C, H,
                               scratch);
    keep(g->dqkv, wb->dqkv, 3 * TC);
    m->ops->linear_backward_input(g->dm1, g->dqkv, W(m, l, P_qkv_w), T, C, 3 * C);
    keep(g->dm1, NULL, TC);
    m->ops->modulate_backward(g->dn1, dmod, dmod + C, g->dm1, a->n1, scale_a, T, C);
    keep(g->dn1, NULL, TC);
    m->ops->layernorm_backward(g->dln, g->dn1, a->x, sf->mean1, sf->rstd1, T, C);
    add_round(g->dy, g->dx1, g->dln, TC);
}

/* Backward for inputs of layers [l0, l1), last layer first, rebuilding
 * each layer's attention cores into core first when it is not NULL; the
 * attention cores it rebuilt (one pair a layer), or -1. */
static int layers_backward_input(const ppv_model *m, int32_t l0, int32_t l1,
                                 const ppv_mb_inputs *in, const void *saved, const ppv_bf16 *dy,
                                 ppv_bf16 *dx, void *wstate, void *core) {
    if (!range_ok(m, l0, l1) || !in || !dy || !dx || !float_aligned(saved) ||
        !float_aligned(wstate) || !float_aligned(core) || (l1 > l0 && (!saved || !wstate)))
        return -1;
    const dims *d = &m->d;
    acts a;
    grads g;
    float *work = work_alloc(d, &a, &g);
    if (!work) return -1;
    ppvk_bf16_to_f32(g.dy, dy, d->T * d->C);
    for (int32_t l = l1 - 1; l >= l0; l--) {
        saved_f32 sf;
        saved_bf16 sb;
        wstate_f32 wf;
        wstate_bf16 wb;
        /* saved is only read; core (selective) is rebuilt */
        saved_layout(d, (void *)saved, l1 - l0, l - l0, core, &sf, &sb);
        wstate_layout(d, wstate, l1 - l0, l - l0, &wf, &wb);
        acts_load(m, &a, &sf, &sb, core != NULL);
        layer_backward_input(m, l, &a, &g, &sf, &wf, &wb);
#define AS_KEEP(name, n) memcpy(wb.name, sb.name, (n) * sizeof(ppv_bf16));
        W_INPUTS(AS_KEEP)
#undef AS_KEEP
    }
    ppvk_f32_to_bf16(dx, g.dy, d->T * d->C);
    free(work);
    return core ? (int)(l1 - l0) : 0;
}

int ppv_layers_backward_input(const ppv_model *m, int32_t l0, int32_t l1, const ppv_mb_inputs *in,
                              const void *saved, const ppv_bf16 *dy, ppv_bf16 *dx, void *wstate) {
    return layers_backward_input(m, l0, l1, in, saved, dy, dx, wstate, NULL);
}

int ppv_layers_backward_input_selective(const ppv_model *m, int32_t l0, int32_t l1,
                                        const ppv_mb_inputs *in, const void *saved,
                                        const ppv_bf16 *dy, ppv_bf16 *dx, void *wstate,
                                        void *core) {
    if (l1 > l0 && !core) return -1;
    return layers_backward_input(m, l0, l1, in, saved, dy, dx, wstate, core);
}

/* One block's parameter gradients (layer_params values at dp) from its
 * linears' inputs and output gradients, both in wstate. Expects a's
 * linear inputs loaded from wstate, a->temb and a->cond filled; g is
 * scratch. */
static void layer_backward_weight(const ppv_model *m, const acts *a, grads *g, const wstate_f32 *wf,
                                  const wstate_bf16 *wb, float *dp) {
    const dims *d = &m->d;
    int T = (int)d->T, C = (int)d->C, F = (int)d->F, Tc = (int)d->Tc;
    const ppv_param_tensor *t = m->tensors;
#define DW(name) (dp + t[P_##name].offset)
    m->ops->linear_backward_weight(DW(ada_w), DW(ada_b), wf->dmod, a->temb, 1, C, 6 * C);
    ppvk_bf16_to_f32(g->dqkv, wb->dqkv, 3 * d->T * d->C);
    m->ops->linear_backward_weight(DW(qkv_w), DW(qkv_b), g->dqkv, a->m1, T, C, 3 * C);
    ppvk_bf16_to_f32(g->dao, wb->dao, d->T * d->C);
    m->ops->linear_backward_weight(DW(attn_out_w), DW(attn_out_b), g->dao, a->att, T, C, C);
    ppvk_bf16_to_f32(g->dqc, wb->dqc, d->T * d->C);
    m->ops->linear_backward_weight(DW(xq_w), DW(xq_b), g->dqc, a->n2, T, C, C);
    ppvk_bf16_to_f32(g->dkvc, wb->dkvc, 2 * d->Tc * d->C);
    m->ops->linear_backward_weight(DW(xkv_w), DW(xkv_b), g->dkvc, a->cond, Tc, C, 2 * C);
    ppvk_bf16_to_f32(g->dx2, wb->dco, d->T * d->C);
    m->ops->linear_backward_weight(DW(xout_w), DW(xout_b), g->dx2, a->ca, T, C, C);
    ppvk_bf16_to_f32(g->dh, wb->dh, d->T * d->F);
    m->ops->linear_backward_weight(DW(fc1_w), DW(fc1_b), g->dh, a->m3, T, C, F);
    ppvk_bf16_to_f32(g->dmo, wb->dmo, d->T * d->C);
    m->ops->linear_backward_weight(DW(fc2_w), DW(fc2_b), g->dmo, a->g, T, F, C);
#undef DW
}

/* Backward for weights of layers [l0, l1) (any order would do: layers are
 * independent given wstate); 0 or -1. */
int ppv_layers_backward_weight(const ppv_model *m, int32_t l0, int32_t l1, const ppv_mb_inputs *in,
                               const void *wstate, float *dparams) {
    if (!range_ok(m, l0, l1) || !in || !in->cond || !float_aligned(wstate) ||
        (l1 > l0 && (!wstate || !dparams)))
        return -1;
    const dims *d = &m->d;
    acts a;
    grads g;
    float *work = work_alloc(d, &a, &g);
    if (!work) return -1;
    ppvk_bf16_to_f32(a.cond, in->cond, d->Tc * d->C);
    timestep_features(m->ops, a.temb, in->timestep, (int)d->C);
    for (int32_t l = l0; l < l1; l++) {
        wstate_f32 wf;
        wstate_bf16 wb;
        wstate_layout(d, (void *)wstate, l1 - l0, l - l0, &wf, &wb); /* read only */
#define AS_LOAD_W(name, n) ppvk_bf16_to_f32(a.name, wb.name, (n));
        W_INPUTS(AS_LOAD_W)
#undef AS_LOAD_W
        layer_backward_weight(m, &a, &g, &wf, &wb, dparams + (size_t)(l - l0) * m->layer_params);
    }
    free(work);
    return 0;
}

/* ---- loss ------------------------------------------------------------------------------- */

/* Mean squared error of y against in->target, fp32 in order; NaN on bad
 * arguments. */
float ppv_loss_forward(const ppv_model *m, const ppv_mb_inputs *in, const ppv_bf16 *y) {
    if (!m || !in || !in->target || !y) return NAN;
    size_t n = m->d.T * m->d.C;
    float s = 0.0f;
    for (size_t i = 0; i < n; i++) { /* in order */
        float e = ppv_bf16_to_f32(y[i]) - ppv_bf16_to_f32(in->target[i]);
        s += e * e;
    }
    return s / (float)n;
}

/* dy = bf16(2 (y - target) / (T C)); 0 or -1. */
int ppv_loss_backward(const ppv_model *m, const ppv_mb_inputs *in, const ppv_bf16 *y,
                      ppv_bf16 *dy) {
    if (!m || !in || !in->target || !y || !dy) return -1;
    size_t n = m->d.T * m->d.C;
    float k = 2.0f / (float)n;
    for (size_t i = 0; i < n; i++)
        dy[i] = ppv_bf16_from_f32(k * (ppv_bf16_to_f32(y[i]) - ppv_bf16_to_f32(in->target[i])));
    return 0;
}
