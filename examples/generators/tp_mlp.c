/* tp_mlp.c - a generator plug-in for ppv (ppv_generator.h): a small
 * tensor-parallel MLP over latent pixels, with a cache of past frames.
 * Build it on its own (it needs only ppv_generator.h):
 *
 *   cc -O2 -ffp-contract=off -shared -fPIC -I/usr/local/include/ppv \
 *      tp_mlp.c -o libtp_mlp.so
 *   ppv pp --generator ./libtp_mlp.so --generator-params hidden=64,seed=7
 *
 * The arithmetic, per latent pixel p of a call (x: its 16 channels):
 *   ctx    = cache_bias * (sum of the cached frames' channel means, oldest
 *            first) / frames cached                      (0 when empty)
 *   h_j    = relu(b1_j + t*tw_j + sum_c W1_jc (x_c + ctx_c))   hidden unit j
 *   part_b = sum over j in block b of W2_cj h_j                (B blocks)
 *   pred   = b2 + part_0 + part_1 + ... + part_{B-1}
 *   out    = bf16(x + (pred - x) / 4)
 * every sum in the order written, fp32, no contraction. Weights come from
 * (seed, tensor, index) through splitmix64, exact in fp32, so every rank
 * builds the same weights for the units it holds.
 *
 * Tensor parallelism: mesh rank r holds blocks [r B/n, (r+1) B/n) of the
 * hidden units. Each rank fills a (B, pixels, 16) buffer of -0.0 (the
 * additive identity: -0 + x is x for every x, zeros included) with its
 * blocks' partials; ppv's all-reduce adds the members' buffers in member
 * order, which leaves each block's partial exactly as its owner formed it,
 * and every rank then adds the blocks in block order. So meshes 1, 2 and 4
 * give the same bits. create broadcasts mesh rank 0's settings digest and
 * all-gathers the ranks' first blocks: a rank built from other settings,
 * or a mesh that does not cover the blocks, is refused before any chunk.
 *
 * The cache keeps, per written frame, its 16 channel means (the "K/V" of
 * this model): a KV rebuild from context frames writes what the stash
 * wrote, so recompute equals stash bit for bit.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ppv_generator.h"

enum { C = PPV_GENERATOR_CHANNELS, MAX_HIDDEN = 4096 };

typedef struct tp_mlp {
    ppv_generator_comm comm;
    int32_t hidden, blocks, first, last; /* this rank's units: [first, last) */
    int32_t h, w, window;
    float *w1, *b1, *tw, *w2, b2[C]; /* w1 (hidden, C), w2 (C, hidden): only [first, last) filled */
    float *cache;                    /* (window, C) channel means, oldest first */
    int32_t cached;
    float *part;                     /* (blocks, frames * h * w, C) */
} tp_mlp;

static uint64_t splitmix(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* Weight i of tensor k: a multiple of 2^-24 in [-1/2, 1/2), times scale (a
 * power of two), so fp32 holds it exactly. */
static float weight(uint64_t seed, uint64_t k, uint64_t i, float scale) {
    uint64_t r = splitmix(seed ^ splitmix((k << 32) | i)) >> 40;
    return ((float)r / 16777216.0f - 0.5f) * scale;
}

static float bf16_to_f32(uint16_t v) {
    uint32_t u = (uint32_t)v << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint16_t f32_to_bf16(float f) { /* round to nearest even (no NaN here) */
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* "hidden=H,blocks=B,seed=S" (any subset: 64, 4, 1). */
static int parse(const char *params, int32_t *hidden, int32_t *blocks, uint64_t *seed, char *err,
                 size_t errlen) {
    *hidden = 64, *blocks = 4, *seed = 1;
    for (const char *p = params; *p;) {
        char key[16];
        unsigned long long v;
        int n = 0;
        if (sscanf(p, "%15[a-z]=%llu%n", key, &v, &n) != 2 || (p[n] && p[n] != ',')) {
            snprintf(err, errlen, "tp-mlp's settings are hidden=H,blocks=B,seed=S, not '%s'",
                     params);
            return -1;
        }
        if (!strcmp(key, "hidden") && v >= 1 && v <= MAX_HIDDEN) *hidden = (int32_t)v;
        else if (!strcmp(key, "blocks") && v >= 1 && v <= 64) *blocks = (int32_t)v;
        else if (!strcmp(key, "seed")) *seed = v;
        else {
            snprintf(err, errlen, "tp-mlp has no setting %s=%llu (hidden 1..%d, blocks 1..64, "
                     "seed)", key, v, MAX_HIDDEN);
            return -1;
        }
        p += n + (p[n] == ',');
    }
    if (*hidden % *blocks) {
        snprintf(err, errlen, "tp-mlp: blocks=%d must divide hidden=%d", *blocks, *hidden);
        return -1;
    }
    return 0;
}

static int tp_destroy(void *state, char *err, size_t errlen) {
    (void)err, (void)errlen;
    tp_mlp *g = state;
    if (!g) return 0;
    free(g->w1), free(g->b1), free(g->tw), free(g->w2), free(g->cache), free(g->part);
    free(g);
    return 0;
}

static int tp_create(const ppv_generator_setup *s, const ppv_generator_comm *comm, void **state,
                     char *err, size_t errlen) {
    int32_t hidden, blocks;
    uint64_t seed;
    if (parse(s->params, &hidden, &blocks, &seed, err, errlen) < 0) return -1;
    if (strcmp(s->device, "cpu")) {
        snprintf(err, errlen, "tp-mlp runs on the CPU only, not on %s", s->device);
        return -1;
    }
    if (blocks % s->mesh_size) {
        snprintf(err, errlen, "a mesh of %d must divide tp-mlp's %d blocks", s->mesh_size, blocks);
        return -1;
    }
    tp_mlp *g = calloc(1, sizeof *g);
    if (!g) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    g->comm = *comm;
    g->hidden = hidden;
    g->blocks = blocks;
    g->first = hidden / s->mesh_size * s->mesh_rank;
    g->last = g->first + hidden / s->mesh_size;
    g->h = s->latent_h, g->w = s->latent_w, g->window = s->kv_window;
    size_t pixels = (size_t)s->frames * (size_t)(g->h * g->w);
    g->w1 = calloc((size_t)hidden * C, sizeof(float));
    g->w2 = calloc((size_t)hidden * C, sizeof(float));
    g->b1 = calloc((size_t)hidden, sizeof(float));
    g->tw = calloc((size_t)hidden, sizeof(float));
    g->cache = calloc((size_t)g->window * C, sizeof(float));
    g->part = calloc((size_t)blocks * pixels * C, sizeof(float));
    if (!g->w1 || !g->w2 || !g->b1 || !g->tw || !g->cache || !g->part) {
        tp_destroy(g, NULL, 0);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (int32_t j = g->first; j < g->last; j++) {
        for (int c = 0; c < C; c++) {
            g->w1[j * C + c] = weight(seed, 1, (uint64_t)(j * C + c), 0.5f);
            g->w2[c * hidden + j] = weight(seed, 2, (uint64_t)(c * hidden + j), 0.125f);
        }
        g->b1[j] = weight(seed, 3, (uint64_t)j, 0.0625f);
        g->tw[j] = weight(seed, 4, (uint64_t)j, 1.0f);
    }
    for (int c = 0; c < C; c++) g->b2[c] = weight(seed, 5, (uint64_t)c, 0.0625f);
    /* every rank built from mesh rank 0's settings, and the blocks covered */
    uint64_t mine = splitmix(seed ^ ((uint64_t)hidden << 32) ^ (uint64_t)blocks), root = mine;
    int rc = comm->broadcast(comm->ctx, PPV_GENERATOR_GROUP_MESH, &root, sizeof root, 0);
    if (!rc && root != mine) {
        snprintf(err, errlen, "mesh rank %d's settings differ from mesh rank 0's", s->mesh_rank);
        rc = -1;
    }
    int32_t first = g->first, *firsts = rc ? NULL : malloc((size_t)s->mesh_size * sizeof *firsts);
    if (!rc && !firsts) {
        snprintf(err, errlen, "out of memory");
        rc = -1;
    }
    if (!rc) rc = comm->all_gather(comm->ctx, PPV_GENERATOR_GROUP_MESH, &first, firsts,
                                   sizeof first);
    for (int32_t r = 0; !rc && r < s->mesh_size; r++)
        if (firsts[r] != hidden / s->mesh_size * r) {
            snprintf(err, errlen, "mesh rank %d holds units from %d, not %d", r, firsts[r],
                     hidden / s->mesh_size * r);
            rc = -1;
        }
    free(firsts);
    if (rc) {
        tp_destroy(g, NULL, 0);
        return rc;
    }
    *state = g;
    return 0;
}

static int tp_kv_reset(void *state, char *err, size_t errlen) {
    (void)err, (void)errlen;
    ((tp_mlp *)state)->cached = 0;
    return 0;
}

static int tp_kv_snapshot(void *state, float *dst, size_t cap, size_t *count, char *err,
                          size_t errlen) {
    tp_mlp *g = state;
    *count = (size_t)g->cached * C;
    if (dst && cap < *count) {
        snprintf(err, errlen, "a snapshot of %zu floats does not fit %zu", *count, cap);
        return -1;
    }
    if (dst) memcpy(dst, g->cache, *count * sizeof *dst);
    return 0;
}

/* Appends the frames' channel means to the cache, evicting the oldest. */
static void cache_write(tp_mlp *g, const uint16_t *lat, int32_t frames) {
    int32_t hw = g->h * g->w;
    for (int32_t f = 0; f < frames; f++) {
        if (g->cached == g->window) { /* full: drop the oldest */
            memmove(g->cache, g->cache + C, (size_t)(g->window - 1) * C * sizeof *g->cache);
            g->cached--;
        }
        float *m = g->cache + (size_t)g->cached * C;
        for (int c = 0; c < C; c++) {
            float sum = 0.0f;
            for (int32_t i = 0; i < hw; i++) sum = sum + bf16_to_f32(lat[((size_t)f * C + c) * hw + i]);
            m[c] = sum / (float)hw;
        }
        g->cached++;
    }
}

static int tp_call(void *state, const ppv_generator_call *a, char *err, size_t errlen) {
    tp_mlp *g = state;
    if (a->frames < 1 || a->frames > PPV_GENERATOR_FRAMES) {
        snprintf(err, errlen, "%d frames in a call (call_id %lld)", a->frames,
                 (long long)a->call_id);
        return -1;
    }
    int32_t hw = g->h * g->w, per = g->hidden / g->blocks;
    size_t pixels = (size_t)a->frames * (size_t)hw;
    if (a->out) {
        float ctx[C] = {0};
        for (int c = 0; c < C && g->cached; c++) {
            float sum = 0.0f;
            for (int32_t f = 0; f < g->cached; f++) sum = sum + g->cache[f * C + c];
            ctx[c] = a->cache_bias * (sum / (float)g->cached);
        }
        size_t nb = (size_t)g->blocks * pixels * C;
        for (size_t i = 0; i < nb; i++) g->part[i] = -0.0f;
        for (size_t p = 0; p < pixels; p++) {
            size_t f = p / (size_t)hw, at = p % (size_t)hw;
            float x[C];
            for (int c = 0; c < C; c++)
                x[c] = bf16_to_f32(a->latents[(f * C + (size_t)c) * (size_t)hw + at]) + ctx[c];
            for (int32_t j = g->first; j < g->last; j++) {
                float acc = g->b1[j];
                acc = acc + a->timestep * g->tw[j];
                for (int c = 0; c < C; c++) acc = acc + g->w1[j * C + c] * x[c];
                float hj = acc > 0.0f ? acc : 0.0f;
                float *part = g->part + ((size_t)(j / per) * pixels + p) * C;
                for (int c = 0; c < C; c++) part[c] = part[c] + g->w2[c * g->hidden + j] * hj;
            }
        }
        int rc = g->comm.all_reduce_sum(g->comm.ctx, PPV_GENERATOR_GROUP_MESH, g->part, nb);
        if (rc) return rc; /* ppv has recorded why */
        for (size_t p = 0; p < pixels; p++) {
            size_t f = p / (size_t)hw, at = p % (size_t)hw;
            for (int c = 0; c < C; c++) {
                float pred = g->b2[c];
                for (int32_t b = 0; b < g->blocks; b++)
                    pred = pred + g->part[((size_t)b * pixels + p) * C + (size_t)c];
                size_t i = (f * C + (size_t)c) * (size_t)hw + at;
                float x = bf16_to_f32(a->latents[i]);
                a->out[i] = f32_to_bf16(x + (pred - x) * 0.25f);
            }
        }
    }
    if (a->write_cache) cache_write(g, a->latents, a->frames);
    return 0;
}

/* Its bytes from the settings alone (ppv pp --plan asks without a run):
 * both weight matrices and their vectors, whole, the cache of channel
 * means and the partial sums it keeps; a call allocates nothing. */
static int tp_memory(const ppv_generator_setup *s, const ppv_generator_shape *call,
                     ppv_generator_memory *out, char *err, size_t errlen) {
    (void)call;
    int32_t hidden, blocks;
    uint64_t seed;
    if (parse(s->params, &hidden, &blocks, &seed, err, errlen) < 0) return -1;
    uint64_t pixels = (uint64_t)s->frames * (uint64_t)s->latent_h * (uint64_t)s->latent_w;
    out->weights = (2 * (uint64_t)hidden * C + 2 * (uint64_t)hidden) * sizeof(float);
    out->kv_cache = (uint64_t)s->kv_window * C * sizeof(float);
    out->buffers = (uint64_t)blocks * pixels * C * sizeof(float);
    out->working = 0;
    return 0;
}

static const ppv_generator table = {
    .abi = PPV_GENERATOR_ABI,
    .name = "tp-mlp",
    .version = "1",
    .create = tp_create,
    .kv_reset = tp_kv_reset,
    .kv_snapshot = tp_kv_snapshot,
    /* a cached frame is its own channel means: rebuilt, it is the stash */
    .flags = PPV_GENERATOR_KV_FRAME_LOCAL,
    .memory = tp_memory,
    .call = tp_call,
    .destroy = tp_destroy,
};

const ppv_generator *ppv_generator_entry(void) {
    return &table;
}
