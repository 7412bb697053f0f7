/* dit.c - the streaming video generator (inference only) that the PP
 * inference engine runs, split over a tensor-parallel mesh by heads.
 *
 * One call on latents (F, 16, h, w), M = F (h/2)(w/2) tokens, W = the
 * rank's heads times hd columns:
 *   x    = patch(tokens)                      2x2 patches of 16 channels: 64
 *   mod  = ada(silu(temb(t)))                 per layer, replicated
 *   x   += gate_a * out(attn(qkv(modulate(ln(x), shift_a, scale_a)), cache))
 *   x   += xout(attn(xq(ln(x)), xkv(cond)))   cross-attention
 *   x   += gate_m * fc2(gelu(fc1(modulate(ln(x), shift_m, scale_m))))
 *   pred = unembed(ln(x));  out = latents + DENOISE_STEP (pred - latents)
 * The output is a damped step towards pred (which the final LayerNorm
 * keeps O(1)), not pred itself, so feeding outputs back as inputs call
 * after call stays bounded by max(|latents|, |pred|) and still depends on
 * the input.
 *
 * Tensor parallelism (ppv_kernels.h): replicated ops (patch, adaLN,
 * LayerNorm, modulate, residuals) give every rank the same bits; q, k, v,
 * fc1 are column slices of the full weight, each output reduced over all
 * inputs in order, so their bits do not depend on the split. The cut
 * reductions (attention out, cross-attention out, fc2) are formed as one
 * fp32 (M, C) partial per head block, reduced in order over that block's
 * inputs; the partials of all H blocks are gathered and summed in block
 * order, then the bias is added. A one-rank call does the same.
 *
 * KV cache: fp32 holding bf16 values, per layer (window * tokens_per_frame,
 * W) for K and again for V, oldest frame first and contiguous, so attention
 * reads it in place; eviction moves the kept rows to the front (memmove). A
 * call writes the cache only after every layer succeeded: a failed gather
 * leaves it as it was.
 *
 * Precision as model.c: bf16 weights, every tensor between ops rounded to
 * bf16, fp32 accumulation in a fixed order, exp from arith.h, no threads.
 * The timestep is used as given (step / 1000 may be 1.0): the embedding
 * reduces its angles exactly in turns, so any finite t is deterministic.
 *
 * RNG keys (seed = config seed): layer l's tensor i (GEN_LAYER_TENSORS
 * order) is (3 << 56) | (l << 8) | i; the embedding tensors i
 * (GEN_EMBED_TENSORS order) are (3 << 56) | (1 << 40) | i. Weights are
 * N(0, 1) / sqrt(in features), biases N(0, 1) * 0.02.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels_internal.h"

enum { PATCH = 64 }; /* features of a 2x2 patch of 16 channels */

/* out = latents + DENOISE_STEP * (pred - latents): a power of two, exact. */
static const float DENOISE_STEP = 0.25f;

/* Largest token and cache-row counts a call handles (ints in the ops). */
enum { MAX_ROWS = 1 << 24 };

/* clang-format off */
/* (name, rows, cols) of one layer's weights, in order (RNG index i). */
#define GEN_LAYER_TENSORS(X) \
    X(ada_w, 6 * C, C)  X(ada_b, 6 * C, 1) \
    X(qkv_w, 3 * C, C)  X(qkv_b, 3 * C, 1) \
    X(attn_out_w, C, C) X(attn_out_b, C, 1) \
    X(xq_w, C, C)       X(xq_b, C, 1) \
    X(xkv_w, 2 * C, D)  X(xkv_b, 2 * C, 1) \
    X(xout_w, C, C)     X(xout_b, C, 1) \
    X(fc1_w, F, C)      X(fc1_b, F, 1) \
    X(fc2_w, C, F)      X(fc2_b, C, 1)
/* The patch embedding and its inverse, shared by every layer. */
#define GEN_EMBED_TENSORS(X) \
    X(patch_w, C, PATCH)   X(patch_b, C, 1) \
    X(unembed_w, PATCH, C) X(unembed_b, PATCH, 1)
/* clang-format on */

#define AS_LAYER_ENUM(name, rows, cols) L_##name,
#define AS_EMBED_ENUM(name, rows, cols) E_##name,
enum { GEN_LAYER_TENSORS(AS_LAYER_ENUM) L_COUNT };
enum { GEN_EMBED_TENSORS(AS_EMBED_ENUM) E_COUNT };

typedef struct tensor_shape {
    size_t rows, cols, offset;
} tensor_shape;

struct ppv_genmodel {
    ppv_gen_config cfg;
    tensor_shape layer[L_COUNT], embed[E_COUNT];
    size_t layer_floats, embed_floats;
    float *w;            /* bf16 values: every layer's tensors, then the embedding's */
    const ppvk_ops *ops; /* where the ops run: the CPU unless ppv_genmodel_set_device says */
};

/* ---- config and weights -------------------------------------------------------------- */

/* The documented small default (see ppv_kernels.h). */
ppv_gen_config ppv_gen_config_default(void) {
    return (ppv_gen_config){
        .layers = 2, .d_model = 32, .n_heads = 4, .d_ff = 64, .cond_dim = 32, .seed = 1};
}

/* Checks one dimension; writes the reason into err and returns -1 if bad. */
static int check_dim(const char *name, int32_t v, int32_t max, char *err, size_t errlen) {
    if (v >= 1 && v <= max) return 0;
    snprintf(err, errlen, "generator config: %s = %d is out of range; use 1..%d", name, (int)v,
             (int)max);
    return -1;
}

/* 0 if c describes a generator this layer can build, else -1 with a reason. */
static int gen_config_check(const ppv_gen_config *c, char *err, size_t errlen) {
    if (check_dim("layers", c->layers, 1 << 16, err, errlen) ||
        check_dim("d_model", c->d_model, 1 << 16, err, errlen) ||
        check_dim("n_heads", c->n_heads, 1 << 16, err, errlen) ||
        check_dim("d_ff", c->d_ff, 1 << 20, err, errlen) ||
        check_dim("cond_dim", c->cond_dim, 1 << 20, err, errlen))
        return -1;
    if (c->d_model % c->n_heads != 0) {
        snprintf(err, errlen,
                 "generator config: n_heads = %d does not divide d_model = %d; pick n_heads "
                 "that divides d_model",
                 (int)c->n_heads, (int)c->d_model);
        return -1;
    }
    if (c->d_ff % c->n_heads != 0) {
        snprintf(err, errlen,
                 "generator config: d_ff = %d is not a multiple of n_heads = %d (the MLP is cut "
                 "into one block per head); pick d_ff = k * n_heads",
                 (int)c->d_ff, (int)c->n_heads);
        return -1;
    }
    return 0;
}

int ppv_gen_config_check(const ppv_gen_config *c, char *err, size_t errlen) {
    return gen_config_check(c, err, errlen);
}

/* RNG tensor keys (see the top of this file). */
static uint64_t layer_key(int32_t layer, int tensor) {
    return (3ull << 56) | ((uint64_t)(uint32_t)layer << 8) | (uint64_t)tensor;
}

static uint64_t embed_key(int tensor) {
    return (3ull << 56) | (1ull << 40) | (uint64_t)tensor;
}

/* Fills n weights at w from key: N(0, 1) / sqrt(cols), or N(0, 1) * 0.02 for
 * a bias (cols 1), rounded to bf16. */
static void draw(float *w, size_t n, size_t cols, uint64_t seed, uint64_t key) {
    float sd = cols == 1 ? 0.02f : 1.0f / sqrtf((float)cols);
    for (size_t e = 0; e < n; e++)
        w[e] = ppv_bf16_to_f32(ppv_bf16_from_f32(ppv_rng_normal(seed, key, e) * sd));
}

/* Validates cfg, lays out the tensors and draws the weights. */
ppv_genmodel *ppv_genmodel_new(const ppv_gen_config *cfg, char *err, size_t errlen) {
    char dummy[1];
    if (!err || errlen == 0) err = dummy, errlen = sizeof dummy;
    if (!cfg) {
        snprintf(err, errlen, "generator config: NULL");
        return NULL;
    }
    if (gen_config_check(cfg, err, errlen) != 0) return NULL;
    ppv_genmodel *m = calloc(1, sizeof *m);
    if (!m) goto oom;
    m->cfg = *cfg;
    m->ops = &ppvk_cpu_ops;
    size_t C = (size_t)cfg->d_model, F = (size_t)cfg->d_ff, D = (size_t)cfg->cond_dim, off = 0;
#define AS_SHAPE(table, prefix, nm, r, c)                                                          \
    m->table[prefix##nm] = (tensor_shape){(r), (c), off};                                          \
    off += (size_t)(r) * (size_t)(c);
#define AS_LAYER_SHAPE(nm, r, c) AS_SHAPE(layer, L_, nm, r, c)
#define AS_EMBED_SHAPE(nm, r, c) AS_SHAPE(embed, E_, nm, r, c)
    GEN_LAYER_TENSORS(AS_LAYER_SHAPE)
    m->layer_floats = off;
    off = 0;
    GEN_EMBED_TENSORS(AS_EMBED_SHAPE)
    m->embed_floats = off;
    m->w = malloc(sizeof(float) * (m->layer_floats * (size_t)cfg->layers + m->embed_floats));
    if (!m->w) goto oom;
    for (int32_t l = 0; l < cfg->layers; l++)
        for (int i = 0; i < L_COUNT; i++) {
            const tensor_shape *t = &m->layer[i];
            draw(m->w + (size_t)l * m->layer_floats + t->offset, t->rows * t->cols, t->cols,
                 cfg->seed, layer_key(l, i));
        }
    float *ew = m->w + (size_t)cfg->layers * m->layer_floats;
    for (int i = 0; i < E_COUNT; i++) {
        const tensor_shape *t = &m->embed[i];
        draw(ew + t->offset, t->rows * t->cols, t->cols, cfg->seed, embed_key(i));
    }
    return m;
oom:
    snprintf(err, errlen, "generator: out of memory for %d layers of d_model %d", (int)cfg->layers,
             (int)cfg->d_model);
    ppv_genmodel_free(m);
    return NULL;
}

/* Frees m (NULL is fine). */
void ppv_genmodel_free(ppv_genmodel *m) {
    if (!m) return;
    free(m->w);
    free(m);
}

/* Runs m's ops on device `name` from now on; 0, or -1 with the reason in err. */
int ppv_genmodel_set_device(ppv_genmodel *m, const char *name, char *err, size_t errlen) {
    if (!m) return -1;
    return ppvk_set_device(&m->ops, name, err, errlen);
}

/* The name of the device m's ops run on. */
const char *ppv_genmodel_device(const ppv_genmodel *m) {
    return m ? m->ops->name : "cpu";
}

/* 0 if every op m ran on its device succeeded; -1 with the first failure in err. */
int ppv_genmodel_device_status(const ppv_genmodel *m, char *err, size_t errlen) {
    return m ? ppvk_device_status(m->ops, err, errlen) : 0;
}

/* m's config, or NULL. */
const ppv_gen_config *ppv_genmodel_config(const ppv_genmodel *m) {
    return m ? &m->cfg : NULL;
}

/* Layer l's tensor i, and the embedding's tensor i. */
static const float *LW(const ppv_genmodel *m, int32_t l, int i) {
    return m->w + (size_t)l * m->layer_floats + m->layer[i].offset;
}

static const float *EW(const ppv_genmodel *m, int i) {
    return m->w + (size_t)m->cfg.layers * m->layer_floats + m->embed[i].offset;
}

/* ---- the KV cache ----------------------------------------------------------------------- */

struct ppv_kv_cache {
    int32_t layers, d_model, n_heads; /* of the model it was built for */
    int32_t rank, mesh, window, tpf;  /* tpf: tokens per frame */
    int32_t frames;                   /* held now, <= window */
    size_t width;                     /* columns: this rank's heads * hd */
    size_t layer_floats;              /* window * tpf * width */
    float *k, *v;                     /* (layers, window * tpf, width) each, oldest frame first */
};

/* An empty cache for rank of mesh, or NULL (see ppv_kernels.h). */
ppv_kv_cache *ppv_kv_cache_new(const ppv_genmodel *m, int32_t rank, int32_t mesh, int32_t window,
                               int32_t tokens_per_frame) {
    if (!m || mesh < 1 || m->cfg.n_heads % mesh != 0 || rank < 0 || rank >= mesh || window < 1 ||
        tokens_per_frame < 1 || (int64_t)window * tokens_per_frame > MAX_ROWS)
        return NULL;
    ppv_kv_cache *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    const ppv_gen_config *g = &m->cfg;
    *c = (ppv_kv_cache){.layers = g->layers,
                        .d_model = g->d_model,
                        .n_heads = g->n_heads,
                        .rank = rank,
                        .mesh = mesh,
                        .window = window,
                        .tpf = tokens_per_frame,
                        .width = (size_t)(g->d_model / mesh)};
    c->layer_floats = (size_t)window * (size_t)tokens_per_frame * c->width;
    size_t n = c->layer_floats * (size_t)g->layers;
    c->k = malloc(sizeof(float) * n);
    c->v = malloc(sizeof(float) * n);
    if (!c->k || !c->v) {
        ppv_kv_cache_free(c);
        return NULL;
    }
    return c;
}

/* Frees c (NULL is fine). */
void ppv_kv_cache_free(ppv_kv_cache *c) {
    if (!c) return;
    free(c->k);
    free(c->v);
    free(c);
}

void ppv_kv_cache_reset(ppv_kv_cache *c) {
    if (c) c->frames = 0;
}

int32_t ppv_kv_cache_frames(const ppv_kv_cache *c) {
    return c ? c->frames : 0;
}

/* Copies layer l's held rows of K and V; 0, or -1 on a bad layer. */
int ppv_kv_cache_read(const ppv_kv_cache *c, int32_t l, float *k, float *v) {
    if (!c || !k || !v || l < 0 || l >= c->layers) return -1;
    size_t n = (size_t)c->frames * (size_t)c->tpf * c->width, at = (size_t)l * c->layer_floats;
    memcpy(k, c->k + at, sizeof(float) * n);
    memcpy(v, c->v + at, sizeof(float) * n);
    return 0;
}

size_t ppv_kv_cache_layer_floats(const ppv_kv_cache *c) {
    return c ? c->layer_floats : 0;
}

/* Appends `frames` frames of rows (frames * tpf, width) to one layer's
 * store that holds `held` frames, keeping the newest `window`: the kept old
 * rows move to the front, then the newest chunk rows follow. */
static void cache_append(float *store, int32_t held, const float *rows, int32_t frames,
                         const ppv_kv_cache *c) {
    size_t frame = (size_t)c->tpf * c->width;
    int32_t take = frames < c->window ? frames : c->window;
    int32_t kept = held < c->window - take ? held : c->window - take;
    memmove(store, store + (size_t)(held - kept) * frame, sizeof(float) * (size_t)kept * frame);
    memcpy(store + (size_t)kept * frame, rows + (size_t)(frames - take) * frame,
           sizeof(float) * (size_t)take * frame);
}

/* ---- one call's shapes and working memory ----------------------------------------------- */

typedef struct call_dims {
    int M, C, H, hd, F, fb, D, Tc; /* fb: MLP units per block (d_ff / H) */
    int heads, h0, W, FW;          /* this rank's heads, first head, W = heads*hd, FW = heads*fb */
    int Nc;                        /* cached rows */
    int layers, rank, mesh;
} call_dims;

/* clang-format off */
/* (name, floats) of one call's working memory. */
#define CALL_WORK(X) \
    X(tok, (size_t)d->M * PATCH) X(x, (size_t)d->M * d->C) X(n, (size_t)d->M * d->C) \
    X(q, (size_t)d->M * d->W) X(att, (size_t)d->M * d->W) X(y, (size_t)d->M * d->C) \
    X(mean, (size_t)d->M) X(rstd, (size_t)d->M) X(temb, (size_t)d->C) X(mod, 6 * (size_t)d->C) \
    X(cond, (size_t)d->Tc * d->D) X(kc, (size_t)d->Tc * d->W) X(vc, (size_t)d->Tc * d->W) \
    X(hid, (size_t)d->M * d->FW) X(mine, (size_t)d->heads * d->M * d->C) \
    X(all, d->mesh > 1 ? (size_t)d->H * d->M * d->C : 0) \
    X(kvnew, (size_t)d->layers * 2 * d->M * d->W) \
    X(pred, (size_t)d->M * PATCH) \
    X(scratch, (size_t)(d->Nc + d->M > d->Tc ? d->Nc + d->M : d->Tc))
/* clang-format on */

#define AS_WORK_FIELD(name, n) float *name;
#define AS_WORK_COUNT(name, n) +(n)
#define AS_WORK_PLACE(name, n) w->name = p, p += (n);

typedef struct call_work {
    CALL_WORK(AS_WORK_FIELD)
} call_work;

/* Floats of one call's working memory. */
static size_t work_floats(const call_dims *d) {
    return 0 CALL_WORK(AS_WORK_COUNT);
}

/* Allocates one call's working memory in one block; returns it (free it),
 * or NULL when out of memory. */
static float *work_alloc(const call_dims *d, call_work *w) {
    float *base = malloc(sizeof(float) * work_floats(d)), *p = base;
    if (!base) return NULL;
    CALL_WORK(AS_WORK_PLACE)
    return base;
}

/* What one layer's steps share. */
typedef struct call_ctx {
    const ppv_genmodel *m;
    const ppv_kv_cache *cache;
    const ppv_gen_call_args *a;
    call_dims d;
    call_work w;
    ppv_gather_fn gather;
    void *gather_ctx;
    char *err;
    size_t errlen;
} call_ctx;

/* ---- ops of the generator ---------------------------------------------------------------- */

/* Rounds an op's output (n values) to bf16 in place. */
static void keep(float *x, size_t n) {
    ppvk_round_bf16(x, n);
}

/* tok (F * (h/2)(w/2), 64) from latents (F, 16, h, w): token (f, i, j) in
 * that order, feature c*4 + di*2 + dj = latents[f][c][2i + di][2j + dj]. */
static void patchify_forward(float *tok, const ppv_bf16 *lat, int frames, int h, int w) {
    int ph = h / 2, pw = w / 2;
    for (int f = 0; f < frames; f++)
        for (int i = 0; i < ph; i++)
            for (int j = 0; j < pw; j++) {
                float *t = tok + (((size_t)f * ph + i) * pw + j) * PATCH;
                for (int c = 0; c < 16; c++)
                    for (int di = 0; di < 2; di++)
                        for (int dj = 0; dj < 2; dj++) {
                            size_t at = (((size_t)f * 16 + c) * h + 2 * i + di) * w + 2 * j + dj;
                            t[c * 4 + di * 2 + dj] = ppv_bf16_to_f32(lat[at]);
                        }
            }
}

/* The inverse of patchify_forward: out (F, 16, h, w) from tok (M, 64). */
static void unpatchify_forward(ppv_bf16 *out, const float *tok, int frames, int h, int w) {
    int ph = h / 2, pw = w / 2;
    for (int f = 0; f < frames; f++)
        for (int i = 0; i < ph; i++)
            for (int j = 0; j < pw; j++) {
                const float *t = tok + (((size_t)f * ph + i) * pw + j) * PATCH;
                for (int c = 0; c < 16; c++)
                    for (int di = 0; di < 2; di++)
                        for (int dj = 0; dj < 2; dj++) {
                            size_t at = (((size_t)f * 16 + c) * h + 2 * i + di) * w + 2 * j + dj;
                            out[at] = ppv_bf16_from_f32(t[c * 4 + di * 2 + dj]);
                        }
            }
}

/* lat (n) += DENOISE_STEP * bf16(pred - lat), then rounded: a damped step
 * towards pred (the scaling by a power of two is exact). */
static void denoise_step_forward(float *lat, const float *pred, size_t n) {
    for (size_t i = 0; i < n; i++) {
        float diff = ppv_bf16_to_f32(ppv_bf16_from_f32(pred[i] - lat[i]));
        lat[i] = lat[i] + DENOISE_STEP * diff;
    }
    keep(lat, n);
}

/* y (M, C) = sum over blocks j = 0..H-1, in order, of inp_j . w_j^T, + b,
 * rounded: inp (M, heads * K) holds this rank's blocks of K inputs, w
 * (C, H * K) the full weight. This rank forms its blocks' partials, the
 * gather brings every block (mesh > 1), and every rank adds them alike.
 * 0, or the gather's error (with a reason naming `what`). */
static int row_parallel_forward(call_ctx *x, float *y, const float *inp, const float *w,
                                const float *b, int K, int32_t l, const char *what) {
    const call_dims *d = &x->d;
    size_t MC = (size_t)d->M * d->C, ldw = (size_t)d->H * K;
    for (int jj = 0; jj < d->heads; jj++)
        x->m->ops->block_partial(x->w.mine + (size_t)jj * MC, inp + (size_t)jj * K,
                                 (size_t)d->heads * K, w + (size_t)(d->h0 + jj) * K, ldw, d->M,
                                 d->C, K);
    const float *all = x->w.mine;
    if (d->mesh > 1) {
        int rc = x->gather(x->gather_ctx, x->w.mine, x->w.all, (size_t)d->heads * MC);
        if (rc != 0) {
            snprintf(x->err, x->errlen,
                     "gen call: rank %d of %d: layer %d %s: the gather failed with %d", d->rank,
                     d->mesh, (int)l, what, rc);
            return rc < 0 ? rc : -1;
        }
        all = x->w.all;
    }
    memcpy(y, all, sizeof(float) * MC);
    for (int j = 1; j < d->H; j++) { /* in block order */
        const float *p = all + (size_t)j * MC;
        for (size_t i = 0; i < MC; i++)
            y[i] += p[i];
    }
    for (int t = 0; t < d->M; t++)
        for (int o = 0; o < d->C; o++)
            y[(size_t)t * d->C + o] += b[o];
    keep(y, MC);
    return 0;
}

/* ---- the forward --------------------------------------------------------------------------- */

/* Self-attention of layer l: x += gate_a * out(attn(qkv(modulate(ln(x))))),
 * leaving the chunk's K and V (M, W) in kvnew for the cache. */
static int self_attention_forward(call_ctx *x, int32_t l) {
    const ppv_genmodel *m = x->m;
    const call_dims *d = &x->d;
    call_work *w = &x->w;
    int M = d->M, C = d->C, W = d->W;
    size_t MC = (size_t)M * C, MW = (size_t)M * W;
    const float *mod = w->mod, *qkv_w = LW(m, l, L_qkv_w), *qkv_b = LW(m, l, L_qkv_b);
    float *k = w->kvnew + (size_t)l * 2 * MW, *v = k + MW;
    size_t cached = (size_t)l * x->cache->layer_floats;

    m->ops->layernorm_forward(w->n, w->mean, w->rstd, w->x, M, C);
    keep(w->n, MC);
    m->ops->modulate_forward(w->n, w->n, mod, mod + C, M, C);
    keep(w->n, MC);
    size_t q0 = (size_t)d->h0 * d->hd; /* first row of this rank's q (and k, v) columns */
    m->ops->linear_forward(w->q, w->n, qkv_w + q0 * C, qkv_b + q0, M, C, W);
    m->ops->linear_forward(k, w->n, qkv_w + (C + q0) * C, qkv_b + C + q0, M, C, W);
    m->ops->linear_forward(v, w->n, qkv_w + (2 * C + q0) * C, qkv_b + 2 * C + q0, M, C, W);
    keep(w->q, MW);
    keep(k, MW);
    keep(v, MW);
    m->ops->kv_attention_forward(w->att, w->q, x->cache->k + cached, x->cache->v + cached, d->Nc,
                                 x->a->cache_bias, k, v, M, M, d->heads, d->hd, w->scratch);
    keep(w->att, MW);
    int rc = row_parallel_forward(x, w->y, w->att, LW(m, l, L_attn_out_w), LW(m, l, L_attn_out_b),
                                  d->hd, l, "self-attention out");
    if (rc) return rc;
    m->ops->residual_forward(w->x, w->x, mod + 2 * C, w->y, M, C);
    keep(w->x, MC);
    return 0;
}

/* Cross-attention of layer l to cond: x += xout(attn(xq(ln(x)), xkv(cond))). */
static int cross_attention_forward(call_ctx *x, int32_t l) {
    const ppv_genmodel *m = x->m;
    const call_dims *d = &x->d;
    call_work *w = &x->w;
    int M = d->M, C = d->C, W = d->W, D = d->D, Tc = d->Tc;
    size_t MC = (size_t)M * C, q0 = (size_t)d->h0 * d->hd;
    const float *xkv_w = LW(m, l, L_xkv_w), *xkv_b = LW(m, l, L_xkv_b);

    m->ops->layernorm_forward(w->n, w->mean, w->rstd, w->x, M, C);
    keep(w->n, MC);
    m->ops->linear_forward(w->q, w->n, LW(m, l, L_xq_w) + q0 * C, LW(m, l, L_xq_b) + q0, M, C, W);
    keep(w->q, (size_t)M * W);
    m->ops->linear_forward(w->kc, w->cond, xkv_w + q0 * D, xkv_b + q0, Tc, D, W);
    m->ops->linear_forward(w->vc, w->cond, xkv_w + (C + q0) * D, xkv_b + C + q0, Tc, D, W);
    keep(w->kc, (size_t)Tc * W);
    keep(w->vc, (size_t)Tc * W);
    m->ops->kv_attention_forward(w->att, w->q, w->kc, w->vc, Tc, 0.0f, NULL, NULL, 0, M, d->heads,
                                 d->hd, w->scratch);
    keep(w->att, (size_t)M * W);
    int rc = row_parallel_forward(x, w->y, w->att, LW(m, l, L_xout_w), LW(m, l, L_xout_b), d->hd, l,
                                  "cross-attention out");
    if (rc) return rc;
    m->ops->residual_forward(w->x, w->x, NULL, w->y, M, C);
    keep(w->x, MC);
    return 0;
}

/* MLP of layer l: x += gate_m * fc2(gelu(fc1(modulate(ln(x))))), fc1 on
 * this rank's blocks of d_ff / H units, fc2 row-parallel over the blocks. */
static int mlp_forward(call_ctx *x, int32_t l) {
    const ppv_genmodel *m = x->m;
    const call_dims *d = &x->d;
    call_work *w = &x->w;
    int M = d->M, C = d->C;
    size_t MC = (size_t)M * C, MF = (size_t)M * d->FW, f0 = (size_t)d->h0 * d->fb;
    const float *mod = w->mod;

    m->ops->layernorm_forward(w->n, w->mean, w->rstd, w->x, M, C);
    keep(w->n, MC);
    m->ops->modulate_forward(w->n, w->n, mod + 3 * C, mod + 4 * C, M, C);
    keep(w->n, MC);
    m->ops->linear_forward(w->hid, w->n, LW(m, l, L_fc1_w) + f0 * C, LW(m, l, L_fc1_b) + f0, M, C,
                           d->FW);
    keep(w->hid, MF);
    m->ops->gelu_forward(w->hid, w->hid, MF);
    keep(w->hid, MF);
    int rc = row_parallel_forward(x, w->y, w->hid, LW(m, l, L_fc2_w), LW(m, l, L_fc2_b), d->fb, l,
                                  "MLP fc2");
    if (rc) return rc;
    m->ops->residual_forward(w->x, w->x, mod + 5 * C, w->y, M, C);
    keep(w->x, MC);
    return 0;
}

/* Every layer, then the output if asked; 0 or the gather's error. */
static int gen_forward(call_ctx *x) {
    const ppv_genmodel *m = x->m;
    const ppv_gen_call_args *a = x->a;
    const call_dims *d = &x->d;
    call_work *w = &x->w;
    int M = d->M, C = d->C;
    size_t MC = (size_t)M * C;

    patchify_forward(w->tok, a->latents, a->frames, a->h, a->w);
    m->ops->linear_forward(w->x, w->tok, EW(m, E_patch_w), EW(m, E_patch_b), M, PATCH, C);
    keep(w->x, MC);
    ppvk_bf16_to_f32(w->cond, a->cond, (size_t)d->Tc * d->D);
    m->ops->timestep_embedding(w->temb, a->timestep, C);
    keep(w->temb, (size_t)C);
    m->ops->silu_forward(w->temb, w->temb, (size_t)C);
    keep(w->temb, (size_t)C);
    for (int32_t l = 0; l < d->layers; l++) {
        m->ops->linear_forward(w->mod, w->temb, LW(m, l, L_ada_w), LW(m, l, L_ada_b), 1, C, 6 * C);
        keep(w->mod, 6 * (size_t)C);
        int rc = self_attention_forward(x, l);
        if (!rc) rc = cross_attention_forward(x, l);
        if (!rc) rc = mlp_forward(x, l);
        if (rc) return rc;
    }
    if (!a->out) return 0;
    /* pred = unembed(ln(x)); out = latents + DENOISE_STEP (pred - latents) */
    m->ops->layernorm_forward(w->n, w->mean, w->rstd, w->x, M, C);
    keep(w->n, MC);
    m->ops->linear_forward(w->pred, w->n, EW(m, E_unembed_w), EW(m, E_unembed_b), M, C, PATCH);
    keep(w->pred, (size_t)M * PATCH);
    denoise_step_forward(w->tok, w->pred, (size_t)M * PATCH); /* tok: the latents, unchanged */
    unpatchify_forward(a->out, w->tok, a->frames, a->h, a->w);
    return 0;
}

/* ---- the call ----------------------------------------------------------------------------- */

/* 0 if a can run on m with cache, else -1 with a reason naming the fix. */
static int call_check(const ppv_genmodel *m, const ppv_kv_cache *c, const ppv_gen_call_args *a,
                      ppv_gather_fn gather, char *err, size_t errlen) {
    const char *missing = !m            ? "the model"
                          : !c          ? "the cache"
                          : !a          ? "the arguments"
                          : !a->latents ? "latents"
                          : !a->cond    ? "cond"
                                        : NULL;
    if (missing) {
        snprintf(err, errlen, "gen call: %s is NULL", missing);
        return -1;
    }
    const ppv_gen_config *g = &m->cfg;
    if (c->layers != g->layers || c->d_model != g->d_model || c->n_heads != g->n_heads) {
        snprintf(err, errlen,
                 "gen call: the cache was built for a model of %d layers, d_model %d, %d heads, "
                 "not this one (%d, %d, %d); build it with ppv_kv_cache_new for this model",
                 (int)c->layers, (int)c->d_model, (int)c->n_heads, (int)g->layers, (int)g->d_model,
                 (int)g->n_heads);
        return -1;
    }
    if (a->frames < 1) {
        snprintf(err, errlen, "gen call: frames = %d; a call needs at least 1 latent frame",
                 (int)a->frames);
        return -1;
    }
    if (a->h < 2 || a->w < 2 || a->h % 2 || a->w % 2 || a->h > 1 << 15 || a->w > 1 << 15) {
        snprintf(err, errlen,
                 "gen call: latent size h = %d, w = %d: both must be even, 2..32768 (2x2 "
                 "patches)",
                 (int)a->h, (int)a->w);
        return -1;
    }
    int64_t tpf = (int64_t)(a->h / 2) * (a->w / 2);
    if (tpf != c->tpf) {
        snprintf(err, errlen,
                 "gen call: h = %d, w = %d give %lld tokens per frame but the cache holds frames "
                 "of %d; build the cache with tokens_per_frame = (h/2)(w/2) = %lld",
                 (int)a->h, (int)a->w, (long long)tpf, (int)c->tpf, (long long)tpf);
        return -1;
    }
    if (tpf * a->frames > MAX_ROWS) {
        snprintf(err, errlen, "gen call: %d frames of %lld tokens exceed %d tokens; split the call",
                 (int)a->frames, (long long)tpf, MAX_ROWS);
        return -1;
    }
    if (a->cond_len < 1 || a->cond_len > MAX_ROWS) {
        snprintf(err, errlen, "gen call: cond_len = %d is out of range; use 1..%d",
                 (int)a->cond_len, MAX_ROWS);
        return -1;
    }
    if (!isfinite(a->timestep) || !isfinite(a->cache_bias)) {
        snprintf(err, errlen, "gen call: timestep = %g, cache_bias = %g: both must be finite",
                 (double)a->timestep, (double)a->cache_bias);
        return -1;
    }
    if (c->mesh > 1 && !gather) {
        snprintf(err, errlen,
                 "gen call: rank %d of a mesh of %d has no gather callback; pass one (NULL is "
                 "allowed only when mesh is 1)",
                 (int)c->rank, (int)c->mesh);
        return -1;
    }
    return 0;
}

/* The shapes of a call of `frames` frames of tpf tokens against `cached`
 * cached frames, on rank of mesh. */
static call_dims dims_of(const ppv_gen_config *g, int32_t rank, int32_t mesh, int32_t tpf,
                         int32_t frames, int32_t cached, int32_t cond_len) {
    call_dims d = {.M = frames * tpf,
                   .C = g->d_model,
                   .H = g->n_heads,
                   .hd = g->d_model / g->n_heads,
                   .F = g->d_ff,
                   .fb = g->d_ff / g->n_heads,
                   .D = g->cond_dim,
                   .Tc = cond_len,
                   .heads = g->n_heads / mesh,
                   .Nc = cached * tpf,
                   .layers = g->layers,
                   .rank = rank,
                   .mesh = mesh};
    d.h0 = rank * d.heads;
    d.W = d.heads * d.hd;
    d.FW = d.heads * d.fb;
    return d;
}

/* The shapes of a checked call. */
static call_dims call_dims_of(const ppv_genmodel *m, const ppv_kv_cache *c,
                              const ppv_gen_call_args *a) {
    return dims_of(&m->cfg, c->rank, c->mesh, c->tpf, a->frames, c->frames, a->cond_len);
}

/* ---- bytes, from the config alone (ppv_kernels.h) ------------------------------------------ */

static int bytes_config_ok(const ppv_gen_config *g, int32_t mesh) {
    return g && g->layers > 0 && g->d_model > 0 && g->n_heads > 0 && g->d_ff > 0 &&
           g->cond_dim > 0 && g->d_model % g->n_heads == 0 && g->d_ff % g->n_heads == 0 &&
           mesh > 0 && g->n_heads % mesh == 0;
}

uint64_t ppv_genmodel_weight_bytes(const ppv_gen_config *g, int32_t elem_bytes) {
    if (!bytes_config_ok(g, 1) || elem_bytes < 1) return 0;
    uint64_t C = (uint64_t)g->d_model, F = (uint64_t)g->d_ff, D = (uint64_t)g->cond_dim;
    uint64_t layer = 0, embed = 0;
#define AS_LAYER_COUNT(nm, r, c) layer += (uint64_t)(r) * (uint64_t)(c);
#define AS_EMBED_COUNT(nm, r, c) embed += (uint64_t)(r) * (uint64_t)(c);
    GEN_LAYER_TENSORS(AS_LAYER_COUNT)
    GEN_EMBED_TENSORS(AS_EMBED_COUNT)
#undef AS_LAYER_COUNT
#undef AS_EMBED_COUNT
    return (layer * (uint64_t)g->layers + embed) * (uint64_t)elem_bytes;
}

uint64_t ppv_kv_cache_bytes(const ppv_gen_config *g, int32_t mesh, int32_t window,
                            int32_t tokens_per_frame, int32_t elem_bytes) {
    if (!bytes_config_ok(g, mesh) || window < 1 || tokens_per_frame < 1 || elem_bytes < 1)
        return 0;
    uint64_t width = (uint64_t)(g->d_model / mesh);
    return 2 * (uint64_t)g->layers * (uint64_t)window * (uint64_t)tokens_per_frame * width *
           (uint64_t)elem_bytes;
}

uint64_t ppv_gen_call_work_bytes(const ppv_gen_config *g, int32_t mesh, int32_t tokens_per_frame,
                                 int32_t frames, int32_t cached, int32_t cond_len,
                                 int32_t elem_bytes) {
    if (!bytes_config_ok(g, mesh) || tokens_per_frame < 1 || frames < 1 || cached < 0 ||
        cond_len < 1 || elem_bytes < 1)
        return 0;
    call_dims d = dims_of(g, 0, mesh, tokens_per_frame, frames, cached, cond_len);
    return (uint64_t)work_floats(&d) * (uint64_t)elem_bytes;
}

/* FNV-1a over n floats' bit patterns, continuing h. */
static uint64_t fnv_floats(uint64_t h, const float *v, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t bits;
        memcpy(&bits, &v[i], sizeof bits);
        h = (h ^ bits) * 0x100000001b3ULL;
    }
    return h;
}

/* (ppv_kernels.h) */
uint64_t ppv_genmodel_shard_fingerprint(const ppv_genmodel *m, int32_t rank, int32_t mesh) {
    const ppv_gen_config *g = &m->cfg;
    if (mesh < 1 || rank < 0 || rank >= mesh || g->n_heads % mesh) return 0;
    size_t C = (size_t)g->d_model, hd = C / (size_t)g->n_heads, fb = (size_t)g->d_ff / (size_t)g->n_heads;
    size_t heads = (size_t)(g->n_heads / mesh), h0 = (size_t)rank * heads;
    size_t W = heads * hd, FW = heads * fb, f0 = h0 * fb;
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int32_t l = 0; l < g->layers; l++) {
        for (size_t b = 0; b < 3; b++) { /* its heads' rows of Q, K and V */
            size_t row = b * C + h0 * hd;
            h = fnv_floats(h, LW(m, l, L_qkv_w) + row * C, W * C);
            h = fnv_floats(h, LW(m, l, L_qkv_b) + row, W);
        }
        h = fnv_floats(h, LW(m, l, L_fc1_w) + f0 * C, FW * C); /* its MLP blocks' rows */
        h = fnv_floats(h, LW(m, l, L_fc1_b) + f0, FW);
    }
    return h ? h : 1;
}

/* One generator call (see ppv_kernels.h); the cache changes only when the
 * whole call succeeded. */
int ppv_gen_call(const ppv_genmodel *m, ppv_kv_cache *cache, const ppv_gen_call_args *a,
                 ppv_gather_fn gather, void *gather_ctx, char *err, size_t errlen) {
    char dummy[1];
    if (!err || errlen == 0) err = dummy, errlen = sizeof dummy;
    int rc = call_check(m, cache, a, gather, err, errlen);
    if (rc) return rc;
    call_ctx x = {.m = m,
                  .cache = cache,
                  .a = a,
                  .d = call_dims_of(m, cache, a),
                  .gather = gather,
                  .gather_ctx = gather_ctx,
                  .err = err,
                  .errlen = errlen};
    float *work = work_alloc(&x.d, &x.w);
    if (!work) {
        snprintf(err, errlen, "gen call: out of memory for %d tokens", x.d.M);
        return -1;
    }
    rc = gen_forward(&x);
    if (rc == 0 && a->write_cache) {
        size_t MW = (size_t)x.d.M * x.d.W;
        for (int32_t l = 0; l < x.d.layers; l++) {
            const float *k = x.w.kvnew + (size_t)l * 2 * MW;
            size_t at = (size_t)l * cache->layer_floats;
            cache_append(cache->k + at, cache->frames, k, a->frames, cache);
            cache_append(cache->v + at, cache->frames, k + MW, a->frames, cache);
        }
        int32_t total = cache->frames + (a->frames < cache->window ? a->frames : cache->window);
        cache->frames = total < cache->window ? total : cache->window;
    }
    free(work);
    return rc;
}
