/* dit_generator.c - the built-in generator (dit.c) as a ppv_generator
 * table: the engine runs it exactly as it runs a plug-in.
 *
 * Its settings are the text "layers=L,d_model=C,n_heads=H,d_ff=F,seed=S"
 * (any subset, in any order; the rest from ppv_gen_config_default) and
 * the setup's cond_dim. open builds the weights once a run in each process
 * (from the seed; every rank reads all of them), each mesh rank a KV cache
 * of its own heads; the tensor-parallel gather is the comm's all-gather on
 * the mesh.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels_internal.h"

#define BUILTIN_KEYS(X) X(layers) X(d_model) X(n_heads) X(d_ff)

int ppv_gen_config_parse(const char *params, int32_t cond_dim, ppv_gen_config *cfg, char *err,
                         size_t errlen) {
    ppv_gen_config c = ppv_gen_config_default();
    c.cond_dim = cond_dim;
    const char *p = params ? params : "";
    while (*p) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        char item[64];
        if (len == 0 || len >= sizeof item) {
            snprintf(err, errlen, "the built-in generator's settings are key=value items "
                     "separated by commas (keys layers, d_model, n_heads, d_ff, seed), not '%s'",
                     params);
            return -1;
        }
        memcpy(item, p, len);
        item[len] = 0;
        p += len + (end != NULL);
        if (end && !*p) { /* a trailing comma */
            snprintf(err, errlen, "the built-in generator's settings end in a comma: '%s'", params);
            return -1;
        }
        char *eq = strchr(item, '=');
        char *stop = NULL;
        errno = 0;
        long long v = eq && eq[1] >= '0' && eq[1] <= '9' ? strtoll(eq + 1, &stop, 10) : -1;
        if (!eq || !stop || *stop || errno || v < 0) {
            snprintf(err, errlen, "the built-in generator's setting '%s' is not key=N with N a "
                     "non-negative whole number", item);
            return -1;
        }
        *eq = 0;
        int known = 0;
#define SET_KEY(k)                                                                                 \
    if (!strcmp(item, #k)) {                                                                       \
        if (v > 1 << 20) {                                                                         \
            snprintf(err, errlen, "the built-in generator's %s = %lld is out of range: 1..%d", #k, \
                     v, 1 << 20);                                                                  \
            return -1;                                                                             \
        }                                                                                          \
        c.k = (int32_t)v;                                                                          \
        known = 1;                                                                                 \
    }
        BUILTIN_KEYS(SET_KEY)
#undef SET_KEY
        if (!strcmp(item, "seed")) {
            c.seed = (uint64_t)v;
            known = 1;
        }
        if (!known) {
            snprintf(err, errlen, "the built-in generator has no setting '%s' (it has layers, "
                     "d_model, n_heads, d_ff and seed)", item);
            return -1;
        }
    }
    *cfg = c;
    return 0;
}

int ppv_gen_config_format(const ppv_gen_config *c, char *buf, size_t n) {
    int w = snprintf(buf, n, "layers=%d,d_model=%d,n_heads=%d,d_ff=%d,seed=%llu", c->layers,
                     c->d_model, c->n_heads, c->d_ff, (unsigned long long)c->seed);
    return w < 0 || (size_t)w >= n ? -1 : 0;
}

typedef struct builtin {
    const ppv_genmodel *model; /* the run's, shared by the process's ranks (open) */
    ppv_kv_cache *cache;
    ppv_generator_comm comm;
    int32_t h, w, tokens_per_frame, window;
} builtin;

static int gather(void *ctx, const float *mine, float *all, size_t count) {
    const ppv_generator_comm *c = ctx;
    return c->all_gather(c->ctx, PPV_GENERATOR_GROUP_MESH, mine, all, count * sizeof *mine);
}

/* The weights, built once a run: every rank reads all of them. */
static int builtin_open(const ppv_generator_setup *s, void **shared, char *err, size_t errlen) {
    ppv_gen_config cfg;
    if (ppv_gen_config_parse(s->params, s->cond_dim, &cfg, err, errlen) < 0) return -1;
    ppv_genmodel *m = ppv_genmodel_new(&cfg, err, errlen);
    if (!m) return -1;
    if (s->device && ppv_genmodel_set_device(m, s->device, err, errlen) < 0) {
        ppv_genmodel_free(m);
        return -1;
    }
    *shared = m;
    return 0;
}

/* Frees the weights; a device op that failed during the run fails here
 * (its results are not to be trusted). */
static int builtin_close(void *shared, char *err, size_t errlen) {
    int rc = ppv_genmodel_device_status(shared, err, errlen);
    ppv_genmodel_free(shared);
    return rc;
}

static int builtin_destroy(void *state, char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    builtin *b = state;
    if (!b) return 0;
    ppv_kv_cache_free(b->cache);
    free(b);
    return 0;
}

static int builtin_create(const ppv_generator_setup *s, const ppv_generator_comm *comm,
                          void **state, char *err, size_t errlen) {
    if (!s->shared) {
        snprintf(err, errlen, "the built-in generator's create needs its open's weights");
        return -1;
    }
    const ppv_genmodel *model = s->shared;
    int32_t heads = ppv_genmodel_config(model)->n_heads;
    if (heads % s->mesh_size) {
        snprintf(err, errlen, "a mesh of %d must divide the generator's %d heads", s->mesh_size,
                 heads);
        return -1;
    }
    builtin *b = calloc(1, sizeof *b);
    if (!b) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    b->model = model;
    b->comm = *comm;
    b->h = s->latent_h;
    b->w = s->latent_w;
    b->tokens_per_frame = (s->latent_h / 2) * (s->latent_w / 2);
    b->window = s->kv_window;
    if (!(b->cache = ppv_kv_cache_new(model, s->mesh_rank, s->mesh_size, s->kv_window,
                                      b->tokens_per_frame))) {
        snprintf(err, errlen, "cannot build the KV cache (window %d, %d tokens a frame)",
                 s->kv_window, b->tokens_per_frame);
        builtin_destroy(b, NULL, 0);
        return -1;
    }
    *state = b;
    return 0;
}

static int builtin_kv_reset(void *state, char *err, size_t errlen) {
    (void)err;
    (void)errlen;
    ppv_kv_cache_reset(((builtin *)state)->cache);
    return 0;
}

/* Every layer's K then V of this rank's heads, oldest frame first. */
static int builtin_kv_snapshot(void *state, float *dst, size_t cap, size_t *count, char *err,
                               size_t errlen) {
    builtin *b = state;
    const ppv_gen_config *g = ppv_genmodel_config(b->model);
    size_t part = ppv_kv_cache_layer_floats(b->cache) / (size_t)b->window *
                  (size_t)ppv_kv_cache_frames(b->cache);
    *count = (size_t)g->layers * 2 * part;
    if (!dst) return 0;
    if (cap < *count) {
        snprintf(err, errlen, "a snapshot of %zu floats does not fit %zu", *count, cap);
        return -1;
    }
    for (int32_t l = 0; l < g->layers; l++)
        ppv_kv_cache_read(b->cache, l, dst + (size_t)l * 2 * part, dst + ((size_t)l * 2 + 1) * part);
    return 0;
}

static int builtin_call(void *state, const ppv_generator_call *a, char *err, size_t errlen) {
    builtin *b = state;
    ppv_gen_call_args k = {
        .latents = (const ppv_bf16 *)a->latents,
        .frames = a->frames,
        .h = b->h,
        .w = b->w,
        .cond = (const ppv_bf16 *)a->cond,
        .cond_len = a->cond_len,
        .timestep = a->timestep,
        .cache_bias = a->cache_bias,
        .write_cache = a->write_cache,
        .out = (ppv_bf16 *)a->out,
    };
    return ppv_gen_call(b->model, b->cache, &k, b->comm.size > 1 ? gather : NULL, &b->comm, err,
                        errlen);
}

/* Its bytes from the settings alone: the whole model's weights (every
 * rank reads them all; on the mock the ranks share open's one copy), the
 * KV cache as create allocates it, and a call's working block. */
static int builtin_memory(const ppv_generator_setup *s, const ppv_generator_shape *call,
                          ppv_generator_memory *out, char *err, size_t errlen) {
    ppv_gen_config cfg;
    if (ppv_gen_config_parse(s->params, s->cond_dim, &cfg, err, errlen) < 0 ||
        ppv_gen_config_check(&cfg, err, errlen) < 0)
        return -1;
    if (cfg.n_heads % s->mesh_size) {
        snprintf(err, errlen, "a mesh of %d must divide the generator's %d heads", s->mesh_size,
                 cfg.n_heads);
        return -1;
    }
    int32_t tpf = (s->latent_h / 2) * (s->latent_w / 2);
    out->weights = ppv_genmodel_weight_bytes(&cfg, (int32_t)sizeof(float));
    out->kv_cache = ppv_kv_cache_bytes(&cfg, s->mesh_size, s->kv_window, tpf, (int32_t)sizeof(float));
    out->working = call ? ppv_gen_call_work_bytes(&cfg, s->mesh_size, tpf, call->frames,
                                                  call->cached, call->cond_len,
                                                  (int32_t)sizeof(float))
                        : 0;
    return 0;
}

static const ppv_generator builtin_table = {
    .abi = PPV_GENERATOR_ABI,
    .name = "ppv-dit",
    .version = "1",
    .create = builtin_create,
    .kv_reset = builtin_kv_reset,
    .kv_snapshot = builtin_kv_snapshot,
    .call = builtin_call,
    .destroy = builtin_destroy,
    .open = builtin_open,
    .close = builtin_close,
    .memory = builtin_memory,
};

const ppv_generator *ppv_generator_builtin(void) {
    return &builtin_table;
}
