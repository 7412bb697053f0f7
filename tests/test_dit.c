/* test_dit.c - the streaming generator (kernels/dit.c): config checks, a
 * pinned digest of one call, determinism, bitwise-identical outputs and
 * K/V caches on meshes of 1, 2 and 4 ranks (and 8 on a wider model; one
 * pthread per rank, a barrier gather), the cache contract the PP engine
 * relies on (read-only calls leave it alone, chunk-by-chunk writes equal a
 * rebuild from scratch, the window evicts the oldest frames, a failed
 * gather leaves it as it was), the cache bias, the bounded output when
 * calls feed each other, and every refused shape with its reason.
 *
 * Every comparison is exact (memcmp of bits); inputs come from the counter
 * RNG keyed by (TEST_SEED, tensor, index).
 */
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif

#include "ppv_kernels.h"

enum { TEST_SEED = 2024, CH = 16, MAX_MESH = 8 };

/* ---- helpers ------------------------------------------------------------------------- */

/* n bf16 values drawn from N(0, 1), keyed by tensor. */
static ppv_bf16 *rand_bf16(size_t n, uint64_t tensor) {
    ppv_bf16 *x = malloc(sizeof *x * n);
    assert_non_null(x);
    for (size_t i = 0; i < n; i++)
        x[i] = ppv_bf16_from_f32(ppv_rng_normal(TEST_SEED, tensor, i));
    return x;
}

/* FNV-1a 64 over bytes, starting from h. */
static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static const uint64_t FNV_BASIS = 0xcbf29ce484222325ull;

/* FNV-1a of bf16 values, each as its low then high byte (any endianness). */
static uint64_t fnv_bf16(uint64_t h, const ppv_bf16 *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        unsigned char b[2] = {(unsigned char)(x[i] & 0xff), (unsigned char)(x[i] >> 8)};
        h = fnv(h, b, 2);
    }
    return h;
}

/* FNV-1a of floats' bit patterns, little-endian bytes. */
static uint64_t fnv_f32(uint64_t h, const float *x, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t u;
        memcpy(&u, &x[i], sizeof u);
        unsigned char b[4] = {(unsigned char)u, (unsigned char)(u >> 8), (unsigned char)(u >> 16),
                              (unsigned char)(u >> 24)};
        h = fnv(h, b, 4);
    }
    return h;
}

static ppv_genmodel *default_model(void) {
    ppv_gen_config cfg = ppv_gen_config_default();
    char err[256] = "";
    ppv_genmodel *m = ppv_genmodel_new(&cfg, err, sizeof err);
    if (!m) fail_msg("ppv_genmodel_new: %s", err);
    return m;
}

/* Values in one output of `frames` frames of h x w. */
static size_t out_count(int32_t frames, int32_t h, int32_t w) {
    return (size_t)frames * CH * (size_t)h * (size_t)w;
}

/* A layer's K and V of a cache, read into fresh buffers (free both). */
typedef struct kv_copy {
    float *k, *v;
} kv_copy;

static kv_copy kv_read(const ppv_kv_cache *c, int32_t l) {
    kv_copy r = {0};
    size_t cap = ppv_kv_cache_layer_floats(c);
    r.k = malloc(sizeof(float) * (cap ? cap : 1));
    r.v = malloc(sizeof(float) * (cap ? cap : 1));
    assert_non_null(r.k);
    assert_non_null(r.v);
    assert_int_equal(ppv_kv_cache_read(c, l, r.k, r.v), 0);
    return r;
}

static void kv_free(kv_copy *r) {
    free(r->k);
    free(r->v);
}

/* 1 if both caches hold the same frames and bitwise the same K and V in
 * every layer; `rows_off` skips that many leading rows of b (a larger
 * window holding older frames too). */
static int caches_equal_tail(const ppv_kv_cache *a, const ppv_kv_cache *b, int32_t layers,
                             size_t row_floats, size_t rows, size_t rows_off) {
    for (int32_t l = 0; l < layers; l++) {
        kv_copy x = kv_read(a, l), y = kv_read(b, l);
        int same =
            memcmp(x.k, y.k + rows_off * row_floats, sizeof(float) * rows * row_floats) == 0 &&
            memcmp(x.v, y.v + rows_off * row_floats, sizeof(float) * rows * row_floats) == 0;
        kv_free(&x);
        kv_free(&y);
        if (!same) return 0;
    }
    return 1;
}

/* ---- a scenario: calls run in order on one rank's cache ---------------------------------- */

typedef struct call_spec {
    int32_t chunk; /* which latents: scenario.latents[chunk]; -1: the previous call's output */
    float timestep, cache_bias;
    int write_cache;
} call_spec;

typedef struct scenario {
    const ppv_genmodel *m;
    int32_t frames, h, w, window, cond_len;
    const ppv_bf16 *const *latents; /* each (frames, 16, h, w) */
    const ppv_bf16 *cond;           /* (cond_len, cond_dim) */
    const call_spec *calls;
    int ncalls;
} scenario;

/* The mesh's shared gather buffer: each rank copies its blocks to
 * buf[rank * count], all wait, each copies the whole buffer out, all wait. */
typedef struct mesh_shared {
    pthread_barrier_t barrier;
    int mesh;
    float *buf;
    size_t cap; /* floats */
} mesh_shared;

typedef struct rank_job {
    mesh_shared *sh;
    const scenario *sc;
    int rank, rc;
    char err[256];
    ppv_bf16 *outs; /* ncalls outputs, one after another */
    float *k, *v;   /* (layers, frames * tpf, width): the final cache */
    int32_t frames; /* held by the final cache */
} rank_job;

static int barrier_gather(void *ctx, const float *mine, float *all, size_t count) {
    rank_job *j = ctx;
    mesh_shared *sh = j->sh;
    if (count * (size_t)sh->mesh > sh->cap) return -99; /* every rank alike */
    memcpy(sh->buf + (size_t)j->rank * count, mine, sizeof(float) * count);
    pthread_barrier_wait(&sh->barrier);
    memcpy(all, sh->buf, sizeof(float) * count * (size_t)sh->mesh);
    pthread_barrier_wait(&sh->barrier);
    return 0;
}

/* Runs every call of the scenario on rank j->rank; stores outputs and the
 * final cache in j. */
static void *rank_main(void *arg) {
    rank_job *j = arg;
    const scenario *sc = j->sc;
    int32_t tpf = (sc->h / 2) * (sc->w / 2);
    const ppv_gen_config *g = ppv_genmodel_config(sc->m);
    ppv_kv_cache *c = ppv_kv_cache_new(sc->m, j->rank, j->sh->mesh, sc->window, tpf);
    if (!c) {
        j->rc = -100;
        return NULL;
    }
    size_t n = out_count(sc->frames, sc->h, sc->w);
    for (int i = 0; i < sc->ncalls && j->rc == 0; i++) {
        const call_spec *s = &sc->calls[i];
        const ppv_bf16 *lat = s->chunk >= 0 ? sc->latents[s->chunk] : j->outs + (size_t)(i - 1) * n;
        ppv_gen_call_args a = {.latents = lat,
                               .frames = sc->frames,
                               .h = sc->h,
                               .w = sc->w,
                               .cond = sc->cond,
                               .cond_len = sc->cond_len,
                               .timestep = s->timestep,
                               .cache_bias = s->cache_bias,
                               .write_cache = s->write_cache,
                               .out = j->outs + (size_t)i * n};
        j->rc = ppv_gen_call(sc->m, c, &a, j->sh->mesh > 1 ? barrier_gather : NULL, j, j->err,
                             sizeof j->err);
    }
    j->frames = ppv_kv_cache_frames(c);
    size_t lf = ppv_kv_cache_layer_floats(c);
    for (int32_t l = 0; l < g->layers && j->rc == 0; l++)
        j->rc = ppv_kv_cache_read(c, l, j->k + (size_t)l * lf, j->v + (size_t)l * lf);
    ppv_kv_cache_free(c);
    return NULL;
}

/* The scenario on a mesh: outs (ncalls outputs, from every rank: checked
 * equal across ranks here), k and v (layers, frames * tpf, C) with the
 * ranks' head columns put side by side; returns the frames held. */
static int32_t run_on_mesh(const scenario *sc, int mesh, ppv_bf16 *outs, float *k, float *v) {
    const ppv_gen_config *g = ppv_genmodel_config(sc->m);
    int32_t tpf = (sc->h / 2) * (sc->w / 2), C = g->d_model;
    size_t rows_cap = (size_t)sc->window * tpf, width = (size_t)C / mesh;
    size_t nout = out_count(sc->frames, sc->h, sc->w) * sc->ncalls;
    size_t M = (size_t)sc->frames * tpf;
    mesh_shared sh = {.mesh = mesh, .cap = (size_t)g->n_heads * M * C};
    sh.buf = malloc(sizeof(float) * sh.cap);
    assert_non_null(sh.buf);
    assert_int_equal(pthread_barrier_init(&sh.barrier, NULL, (unsigned)mesh), 0);
    rank_job jobs[MAX_MESH];
    pthread_t tid[MAX_MESH];
    for (int r = 0; r < mesh; r++) {
        jobs[r] = (rank_job){.sh = &sh, .sc = sc, .rank = r};
        jobs[r].outs = malloc(sizeof(ppv_bf16) * nout);
        jobs[r].k = malloc(sizeof(float) * rows_cap * width * g->layers);
        jobs[r].v = malloc(sizeof(float) * rows_cap * width * g->layers);
        assert_true(jobs[r].outs && jobs[r].k && jobs[r].v);
    }
    for (int r = 0; r < mesh; r++)
        assert_int_equal(pthread_create(&tid[r], NULL, rank_main, &jobs[r]), 0);
    for (int r = 0; r < mesh; r++)
        assert_int_equal(pthread_join(tid[r], NULL), 0);
    for (int r = 0; r < mesh; r++) {
        if (jobs[r].rc != 0)
            fail_msg("mesh %d rank %d: rc %d: %s", mesh, r, jobs[r].rc, jobs[r].err);
        assert_int_equal(jobs[r].frames, jobs[0].frames);
        assert_memory_equal(jobs[r].outs, jobs[0].outs, sizeof(ppv_bf16) * nout);
    }
    memcpy(outs, jobs[0].outs, sizeof(ppv_bf16) * nout);
    size_t rows = (size_t)jobs[0].frames * tpf;
    for (int r = 0; r < mesh; r++)
        for (int32_t l = 0; l < g->layers; l++)
            for (size_t i = 0; i < rows; i++) {
                size_t from = (size_t)l * rows_cap * width + i * width;
                size_t to = ((size_t)l * rows + i) * C + (size_t)r * width;
                memcpy(k + to, jobs[r].k + from, sizeof(float) * width);
                memcpy(v + to, jobs[r].v + from, sizeof(float) * width);
            }
    int32_t frames = jobs[0].frames;
    for (int r = 0; r < mesh; r++) {
        free(jobs[r].outs);
        free(jobs[r].k);
        free(jobs[r].v);
    }
    pthread_barrier_destroy(&sh.barrier);
    free(sh.buf);
    return frames;
}

/* ---- the default inputs -------------------------------------------------------------- */

/* Three chunks of 3 frames of 4 x 6 latents and 4 cond tokens. */
typedef struct inputs {
    int32_t frames, h, w, cond_len;
    ppv_bf16 *chunk[3], *cond;
} inputs;

static inputs inputs_new(const ppv_genmodel *m, int32_t h, int32_t w) {
    inputs in = {.frames = 3, .h = h, .w = w, .cond_len = 4};
    for (int i = 0; i < 3; i++)
        in.chunk[i] = rand_bf16(out_count(in.frames, h, w), 10 + (uint64_t)i);
    in.cond = rand_bf16((size_t)in.cond_len * ppv_genmodel_config(m)->cond_dim, 20);
    return in;
}

static void inputs_free(inputs *in) {
    for (int i = 0; i < 3; i++)
        free(in->chunk[i]);
    free(in->cond);
}

static ppv_gen_call_args args_of(const inputs *in, int chunk, float timestep, float bias, int write,
                                 ppv_bf16 *out) {
    return (ppv_gen_call_args){.latents = in->chunk[chunk],
                               .frames = in->frames,
                               .h = in->h,
                               .w = in->w,
                               .cond = in->cond,
                               .cond_len = in->cond_len,
                               .timestep = timestep,
                               .cache_bias = bias,
                               .write_cache = write,
                               .out = out};
}

/* One call on a one-rank mesh that must succeed. */
static void call_ok(const ppv_genmodel *m, ppv_kv_cache *c, const ppv_gen_call_args *a) {
    char err[256] = "";
    int rc = ppv_gen_call(m, c, a, NULL, NULL, err, sizeof err);
    if (rc != 0) fail_msg("ppv_gen_call: rc %d: %s", rc, err);
}

/* ---- config and cache construction ---------------------------------------------------- */

static void test_gen_config_default_is_two_layers_c32_four_heads(void **state) {
    (void)state;
    ppv_gen_config c = ppv_gen_config_default();
    assert_int_equal(c.layers, 2);
    assert_int_equal(c.d_model, 32);
    assert_int_equal(c.n_heads, 4);
    assert_int_equal(c.d_ff, 64);
    assert_int_equal(c.cond_dim, 32);
    assert_int_equal(c.seed, 1);
}

/* cfg with one field changed must be refused with exactly `want`. */
static void expect_config_refused(ppv_gen_config cfg, const char *want) {
    char err[256] = "";
    ppv_genmodel *m = ppv_genmodel_new(&cfg, err, sizeof err);
    assert_null(m);
    assert_string_equal(err, want);
}

static void test_genmodel_new_names_a_bad_config_and_the_fix(void **state) {
    (void)state;
    ppv_gen_config c = ppv_gen_config_default();
    c.layers = 0;
    expect_config_refused(c, "generator config: layers = 0 is out of range; use 1..65536");
    c = ppv_gen_config_default();
    c.cond_dim = -3;
    expect_config_refused(c, "generator config: cond_dim = -3 is out of range; use 1..1048576");
    c = ppv_gen_config_default();
    c.d_model = 30;
    expect_config_refused(c, "generator config: n_heads = 4 does not divide d_model = 30; pick "
                             "n_heads that divides d_model");
    c = ppv_gen_config_default();
    c.d_ff = 66;
    expect_config_refused(c, "generator config: d_ff = 66 is not a multiple of n_heads = 4 (the "
                             "MLP is cut into one block per head); pick d_ff = k * n_heads");
    char err[64] = "";
    assert_null(ppv_genmodel_new(NULL, err, sizeof err));
    assert_string_equal(err, "generator config: NULL");
}

static void test_kv_cache_new_refuses_a_bad_mesh_rank_window_or_frame_size(void **state) {
    (void)state;
    ppv_genmodel *m = default_model();
    assert_null(ppv_kv_cache_new(m, 0, 3, 4, 6)); /* 3 does not divide 4 heads */
    assert_null(ppv_kv_cache_new(m, 0, 8, 4, 6)); /* more ranks than heads */
    assert_null(ppv_kv_cache_new(m, 2, 2, 4, 6)); /* rank out of the mesh */
    assert_null(ppv_kv_cache_new(m, 0, 2, 0, 6)); /* window < 1 */
    assert_null(ppv_kv_cache_new(m, 0, 2, 4, 0)); /* no tokens */
    assert_null(ppv_kv_cache_new(NULL, 0, 1, 4, 6));
    ppv_kv_cache *c = ppv_kv_cache_new(m, 1, 2, 4, 6);
    assert_non_null(c);
    assert_int_equal(ppv_kv_cache_frames(c), 0);
    assert_int_equal(ppv_kv_cache_layer_floats(c), 4 * 6 * 16); /* 2 heads of 8 */
    float k[1], v[1];
    assert_int_equal(ppv_kv_cache_read(c, 2, k, v), -1);
    assert_int_equal(ppv_kv_cache_read(c, -1, k, v), -1);
    assert_int_equal(ppv_kv_cache_read(c, 1, k, v), 0); /* empty: copies nothing */
    ppv_kv_cache_free(c);
    ppv_genmodel_free(m);
}

/* ---- exact results ----------------------------------------------------------------------- */

/* The default model's first call (step 1000: timestep 1.0) on chunk 0 of
 * 3 frames of 4 x 4, writing an empty cache: pinned so that any change to
 * the model, its weights or its ops is seen. */
static void test_gen_first_call_matches_pinned_digests(void **state) {
    (void)state;
    ppv_genmodel *m = default_model();
    inputs in = inputs_new(m, 4, 4);
    size_t n = out_count(3, 4, 4);
    ppv_bf16 *out = malloc(sizeof *out * n);
    ppv_kv_cache *c = ppv_kv_cache_new(m, 0, 1, 6, 4);
    assert_true(out && c);
    ppv_gen_call_args a = args_of(&in, 0, 1.0f, 0.0f, 1, out);
    call_ok(m, c, &a);
    assert_int_equal(ppv_kv_cache_frames(c), 3);
    uint64_t kv = FNV_BASIS;
    for (int32_t l = 0; l < 2; l++) {
        kv_copy r = kv_read(c, l);
        kv = fnv_f32(fnv_f32(kv, r.k, 3 * 4 * 32), r.v, 3 * 4 * 32);
        kv_free(&r);
    }
    uint64_t od = fnv_bf16(FNV_BASIS, out, n);
    assert_int_equal(od, 0xac197ef404faa81cull);
    assert_int_equal(kv, 0xb48b30bb71fba94cull);
    ppv_kv_cache_free(c);
    free(out);
    inputs_free(&in);
    ppv_genmodel_free(m);
}

/* The same call sequence on two separately built models and caches. */
static void test_gen_calls_repeat_bit_for_bit(void **state) {
    (void)state;
    ppv_bf16 *outs[2];
    ppv_kv_cache *caches[2];
    ppv_genmodel *models[2];
    size_t n = out_count(3, 4, 6);
    for (int run = 0; run < 2; run++) {
        models[run] = default_model();
        inputs in = inputs_new(models[run], 4, 6);
        outs[run] = malloc(sizeof(ppv_bf16) * 3 * n);
        caches[run] = ppv_kv_cache_new(models[run], 0, 1, 5, 6);
        assert_true(outs[run] && caches[run]);
        ppv_gen_call_args a = args_of(&in, 0, 0.5f, 0.0f, 1, outs[run]);
        call_ok(models[run], caches[run], &a);
        a = args_of(&in, 1, 0.25f, -1.0f, 0, outs[run] + n);
        call_ok(models[run], caches[run], &a);
        a = args_of(&in, 1, 0.0f, 0.0f, 1, outs[run] + 2 * n);
        call_ok(models[run], caches[run], &a);
        inputs_free(&in);
    }
    assert_memory_equal(outs[0], outs[1], sizeof(ppv_bf16) * 3 * n);
    assert_int_equal(ppv_kv_cache_frames(caches[0]), 5);
    assert_true(caches_equal_tail(caches[0], caches[1], 2, 32, 5 * 6, 0));
    for (int run = 0; run < 2; run++) {
        free(outs[run]);
        ppv_kv_cache_free(caches[run]);
        ppv_genmodel_free(models[run]);
    }
}

/* Meshes of 1, 2 and 4 ranks run the same calls (writes, a read with a
 * cache bias, an eviction, h != w): every rank's outputs and the ranks'
 * caches side by side are bitwise the one-rank results. */
static void test_gen_meshes_of_1_2_4_give_bitwise_identical_outputs_and_caches(void **state) {
    (void)state;
    ppv_genmodel *m = default_model();
    inputs in = inputs_new(m, 4, 6);
    const ppv_bf16 *const lat[3] = {in.chunk[0], in.chunk[1], in.chunk[2]};
    const call_spec calls[] = {
        {0, 1.0f, 0.0f, 1},   /* chunk 0 written to an empty cache */
        {1, 0.75f, -0.5f, 0}, /* chunk 1 reads it, biased */
        {1, 0.0f, 0.0f, 1},   /* chunk 1 written: window 4 evicts 2 frames */
        {2, 0.5f, 0.25f, 0},
    };
    scenario sc = {.m = m,
                   .frames = 3,
                   .h = 4,
                   .w = 6,
                   .window = 4,
                   .cond_len = in.cond_len,
                   .latents = lat,
                   .cond = in.cond,
                   .calls = calls,
                   .ncalls = 4};
    size_t nout = out_count(3, 4, 6) * 4, nkv = (size_t)2 * 4 * 6 * 32;
    ppv_bf16 *outs[3];
    float *k[3], *v[3];
    const int meshes[3] = {1, 2, 4};
    for (int i = 0; i < 3; i++) {
        outs[i] = malloc(sizeof(ppv_bf16) * nout);
        k[i] = malloc(sizeof(float) * nkv);
        v[i] = malloc(sizeof(float) * nkv);
        assert_true(outs[i] && k[i] && v[i]);
        assert_int_equal(run_on_mesh(&sc, meshes[i], outs[i], k[i], v[i]), 4);
    }
    for (int i = 1; i < 3; i++) {
        assert_memory_equal(outs[i], outs[0], sizeof(ppv_bf16) * nout);
        assert_memory_equal(k[i], k[0], sizeof(float) * nkv);
        assert_memory_equal(v[i], v[0], sizeof(float) * nkv);
    }
    for (int i = 0; i < 3; i++) {
        free(outs[i]);
        free(k[i]);
        free(v[i]);
    }
    inputs_free(&in);
    ppv_genmodel_free(m);
}

/* The engine's loop on meshes of 1, 2, 4 and 8 ranks of a wider model (8
 * heads, C = 64, 8 x 8 latents): 16 chunks of fresh noise, each denoised
 * by 5 calls that feed each other (the last writes the cache), with a
 * cache bias. Every bf16 rounding hides most fp32 differences, so this
 * runs many values through the cut reductions: a rank that added the
 * gathered blocks in another order would land on the other side of a
 * rounding somewhere and differ. */
static void test_gen_meshes_of_1_2_4_8_agree_over_a_long_fed_back_run(void **state) {
    (void)state;
    enum { CHUNKS = 16, STEPS = 5, H = 8, W = 8, C = 64, WINDOW = 6, MESHES = 4 };
    ppv_gen_config cfg = ppv_gen_config_default();
    cfg.d_model = C, cfg.n_heads = 8, cfg.d_ff = 128;
    ppv_genmodel *m = ppv_genmodel_new(&cfg, NULL, 0);
    assert_non_null(m);
    inputs in = inputs_new(m, H, W);
    size_t n = out_count(3, H, W), P = (H / 2) * (W / 2);
    /* under valgrind (threads run one at a time, 50 times slower) a quarter of it */
    int chunks = RUNNING_ON_VALGRIND ? CHUNKS / 4 : CHUNKS;
    ppv_bf16 *noise[CHUNKS];
    call_spec calls[CHUNKS * STEPS];
    for (int ch = 0; ch < chunks; ch++) {
        noise[ch] = rand_bf16(n, 200 + (uint64_t)ch);
        for (int s = 0; s < STEPS; s++)
            calls[ch * STEPS + s] = (call_spec){.chunk = s == 0 ? ch : -1,
                                                .timestep = (float)(1000 - 250 * s) / 1000.0f,
                                                .cache_bias = -0.25f,
                                                .write_cache = s == STEPS - 1};
    }
    scenario sc = {.m = m,
                   .frames = 3,
                   .h = H,
                   .w = W,
                   .window = WINDOW,
                   .cond_len = in.cond_len,
                   .latents = (const ppv_bf16 *const *)noise,
                   .cond = in.cond,
                   .calls = calls,
                   .ncalls = chunks * STEPS};
    size_t nout = n * (size_t)chunks * STEPS, nkv = (size_t)cfg.layers * WINDOW * P * C;
    ppv_bf16 *outs[MESHES];
    float *k[MESHES], *v[MESHES];
    const int meshes[MESHES] = {1, 2, 4, 8};
    for (int i = 0; i < MESHES; i++) {
        outs[i] = malloc(sizeof(ppv_bf16) * nout);
        k[i] = malloc(sizeof(float) * nkv);
        v[i] = malloc(sizeof(float) * nkv);
        assert_true(outs[i] && k[i] && v[i]);
        assert_int_equal(run_on_mesh(&sc, meshes[i], outs[i], k[i], v[i]), WINDOW);
    }
    for (int i = 1; i < MESHES; i++) {
        assert_memory_equal(outs[i], outs[0], sizeof(ppv_bf16) * nout);
        assert_memory_equal(k[i], k[0], sizeof(float) * nkv);
        assert_memory_equal(v[i], v[0], sizeof(float) * nkv);
    }
    for (int i = 0; i < MESHES; i++) {
        free(outs[i]);
        free(k[i]);
        free(v[i]);
    }
    for (int ch = 0; ch < chunks; ch++)
        free(noise[ch]);
    inputs_free(&in);
    ppv_genmodel_free(m);
}

/* ---- the cache contract ------------------------------------------------------------------ */

static void test_gen_read_only_call_leaves_the_cache_unchanged(void **state) {
    (void)state;
    ppv_genmodel *m = default_model();
    inputs in = inputs_new(m, 4, 6);
    ppv_kv_cache *c = ppv_kv_cache_new(m, 0, 1, 6, 6), *ref = ppv_kv_cache_new(m, 0, 1, 6, 6);
    assert_true(c && ref);
    ppv_gen_call_args a = args_of(&in, 0, 0.5f, 0.0f, 1, NULL);
    call_ok(m, c, &a);
    call_ok(m, ref, &a);
    for (int i = 0; i < 3; i++) {
        a = args_of(&in, 1, 0.2f * (float)i, 0.5f, 0, NULL);
        call_ok(m, c, &a);
    }
    assert_int_equal(ppv_kv_cache_frames(c), 3);
    assert_true(caches_equal_tail(c, ref, 2, 32, 3 * 6, 0));
    ppv_kv_cache_free(c);
    ppv_kv_cache_free(ref);
    inputs_free(&in);
    ppv_genmodel_free(m);
}

/* The engine's stash-versus-recompute property: a cache written chunk by
 * chunk (3 frames each) during generation, with read-only denoising calls
 * between the writes, equals a cache rebuilt from scratch by the write
 * calls alone on the same chunks, and the write calls' outputs agree. */
static void test_gen_cache_written_chunk_by_chunk_equals_a_rebuild_from_scratch(void **state) {
    (void)state;
    ppv_genmodel *m = default_model();
    inputs in = inputs_new(m, 4, 6);
    size_t n = out_count(3, 4, 6);
    ppv_kv_cache *live = ppv_kv_cache_new(m, 0, 1, 9, 6),
                 *rebuilt = ppv_kv_cache_new(m, 0, 1, 9, 6);
    ppv_bf16 *live_out = malloc(sizeof *live_out * 3 * n),
             *rebuilt_out = malloc(sizeof *rebuilt_out * 3 * n),
             *scratch = malloc(sizeof *scratch * n);
    assert_true(live && rebuilt && live_out && rebuilt_out && scratch);
    for (int ch = 0; ch < 3; ch++) {
        for (int step = 0; step < 4; step++) { /* denoising: read only */
            ppv_gen_call_args a = args_of(&in, ch, 1.0f - 0.25f * (float)step, 0.0f, 0, scratch);
            call_ok(m, live, &a);
        }
        ppv_gen_call_args a = args_of(&in, ch, 0.0f, 0.0f, 1, live_out + (size_t)ch * n);
        call_ok(m, live, &a);
    }
    ppv_kv_cache_reset(rebuilt);
    for (int ch = 0; ch < 3; ch++) {
        ppv_gen_call_args a = args_of(&in, ch, 0.0f, 0.0f, 1, rebuilt_out + (size_t)ch * n);
        call_ok(m, rebuilt, &a);
    }
    assert_int_equal(ppv_kv_cache_frames(live), 9);
    assert_int_equal(ppv_kv_cache_frames(rebuilt), 9);
    assert_true(caches_equal_tail(live, rebuilt, 2, 32, 9 * 6, 0));
    assert_memory_equal(live_out, rebuilt_out, sizeof *live_out * 3 * n);
    /* a reset cache rebuilt again gives the same cache once more */
    ppv_kv_cache_reset(live);
    assert_int_equal(ppv_kv_cache_frames(live), 0);
    for (int ch = 0; ch < 3; ch++) {
        ppv_gen_call_args a = args_of(&in, ch, 0.0f, 0.0f, 1, NULL);
        call_ok(m, live, &a);
    }
    assert_true(caches_equal_tail(live, rebuilt, 2, 32, 9 * 6, 0));
    ppv_kv_cache_free(live);
    ppv_kv_cache_free(rebuilt);
    free(live_out);
    free(rebuilt_out);
    free(scratch);
    inputs_free(&in);
    ppv_genmodel_free(m);
}

/* Two chunks of 3 frames: a window of 3 keeps only the second chunk, a
 * window of 4 the first chunk's last frame and the second chunk; their
 * K/V are those a window of 6 (no eviction) computed and holds last. */
static void test_gen_window_evicts_the_oldest_frames(void **state) {
    (void)state;
    ppv_genmodel *m = default_model();
    inputs in = inputs_new(m, 4, 6);
    ppv_kv_cache *full = ppv_kv_cache_new(m, 0, 1, 6, 6);
    assert_non_null(full);
    for (int ch = 0; ch < 2; ch++) {
        ppv_gen_call_args a = args_of(&in, ch, 0.0f, 0.0f, 1, NULL);
        call_ok(m, full, &a);
    }
    assert_int_equal(ppv_kv_cache_frames(full), 6);
    for (int32_t window = 3; window <= 4; window++) {
        ppv_kv_cache *c = ppv_kv_cache_new(m, 0, 1, window, 6);
        assert_non_null(c);
        for (int ch = 0; ch < 2; ch++) {
            ppv_gen_call_args a = args_of(&in, ch, 0.0f, 0.0f, 1, NULL);
            call_ok(m, c, &a);
        }
        assert_int_equal(ppv_kv_cache_frames(c), window);
        assert_true(
            caches_equal_tail(c, full, 2, 32, (size_t)window * 6, (size_t)(6 - window) * 6));
        ppv_kv_cache_free(c);
    }
    /* a chunk longer than the window keeps its own last frames: window 2
     * after chunk 0 holds chunk 0's frames 1 and 2 */
    ppv_kv_cache *two = ppv_kv_cache_new(m, 0, 1, 2, 6), *first = ppv_kv_cache_new(m, 0, 1, 6, 6);
    assert_true(two && first);
    ppv_gen_call_args a = args_of(&in, 0, 0.0f, 0.0f, 1, NULL);
    call_ok(m, two, &a);
    call_ok(m, first, &a);
    assert_int_equal(ppv_kv_cache_frames(two), 2);
    assert_true(caches_equal_tail(two, first, 2, 32, 2 * 6, 1 * 6));
    ppv_kv_cache_free(two);
    ppv_kv_cache_free(first);
    ppv_kv_cache_free(full);
    inputs_free(&in);
    ppv_genmodel_free(m);
}

/* The bias reaches the logits of cached keys only: with frames in the
 * cache a change of bias changes the output; with an empty cache it
 * cannot. */
static void test_gen_cache_bias_changes_the_output_only_through_cached_keys(void **state) {
    (void)state;
    ppv_genmodel *m = default_model();
    inputs in = inputs_new(m, 4, 6);
    size_t n = out_count(3, 4, 6);
    ppv_bf16 *a0 = malloc(sizeof *a0 * n), *a1 = malloc(sizeof *a1 * n);
    ppv_kv_cache *c = ppv_kv_cache_new(m, 0, 1, 6, 6);
    assert_true(a0 && a1 && c);
    ppv_gen_call_args a = args_of(&in, 0, 0.5f, 0.0f, 0, a0);
    call_ok(m, c, &a);
    a = args_of(&in, 0, 0.5f, 2.0f, 0, a1);
    call_ok(m, c, &a);
    assert_memory_equal(a0, a1, sizeof *a0 * n); /* empty cache: nothing to bias */
    a = args_of(&in, 0, 0.0f, 0.0f, 1, NULL);
    call_ok(m, c, &a);
    a = args_of(&in, 1, 0.5f, 0.0f, 0, a0);
    call_ok(m, c, &a);
    a = args_of(&in, 1, 0.5f, 2.0f, 0, a1);
    call_ok(m, c, &a);
    assert_memory_not_equal(a0, a1, sizeof *a0 * n);
    ppv_kv_cache_free(c);
    free(a0);
    free(a1);
    inputs_free(&in);
    ppv_genmodel_free(m);
}

/* The engine feeds each output back as the next input (5 calls a chunk,
 * the last writing the cache) for many chunks: the damped output step
 * keeps every value finite and O(1). The bound 8 is far above what the
 * step can reach from N(0, 1) latents (measured: under 4). */
static void test_gen_outputs_stay_bounded_when_fed_back(void **state) {
    (void)state;
    ppv_genmodel *m = default_model();
    inputs in = inputs_new(m, 4, 6);
    size_t n = out_count(3, 4, 6);
    ppv_bf16 *x = malloc(sizeof *x * n), *y = malloc(sizeof *y * n);
    ppv_kv_cache *c = ppv_kv_cache_new(m, 0, 1, 6, 6);
    assert_true(x && y && c);
    float worst = 0.0f;
    for (int ch = 0; ch < 16; ch++) {
        ppv_bf16 *noise = rand_bf16(n, 100 + (uint64_t)ch);
        memcpy(x, noise, sizeof *x * n);
        free(noise);
        for (int step = 0; step < 5; step++) {
            ppv_gen_call_args a = {.latents = x,
                                   .frames = 3,
                                   .h = 4,
                                   .w = 6,
                                   .cond = in.cond,
                                   .cond_len = in.cond_len,
                                   .timestep = (float)(1000 - 250 * step) / 1000.0f,
                                   .write_cache = step == 4,
                                   .out = y};
            call_ok(m, c, &a);
            for (size_t i = 0; i < n; i++) {
                float v = fabsf(ppv_bf16_to_f32(y[i]));
                assert_true(isfinite(v));
                worst = v > worst ? v : worst;
            }
            ppv_bf16 *t = x;
            x = y, y = t;
        }
    }
    assert_true(worst < 8.0f);
    ppv_kv_cache_free(c);
    free(x);
    free(y);
    inputs_free(&in);
    ppv_genmodel_free(m);
}

/* ---- refusals ------------------------------------------------------------------------------ */

/* a must be refused with -1 and exactly `want`; the cache and out stay as
 * they were. */
static void expect_call_refused(const ppv_genmodel *m, ppv_kv_cache *c, ppv_gen_call_args a,
                                ppv_gather_fn gather, const char *want) {
    char err[512] = "";
    int32_t frames = ppv_kv_cache_frames(c);
    int rc = ppv_gen_call(m, c, &a, gather, NULL, err, sizeof err);
    assert_int_equal(rc, -1);
    assert_string_equal(err, want);
    assert_int_equal(ppv_kv_cache_frames(c), frames);
}

static void test_gen_call_refuses_bad_shapes_with_the_reason(void **state) {
    (void)state;
    ppv_genmodel *m = default_model();
    inputs in = inputs_new(m, 4, 6);
    ppv_kv_cache *c = ppv_kv_cache_new(m, 0, 1, 6, 6), *c2 = ppv_kv_cache_new(m, 0, 2, 6, 6);
    assert_true(c && c2);
    ppv_gen_call_args a = args_of(&in, 0, 0.5f, 0.0f, 1, NULL);
    a.h = 5;
    expect_call_refused(m, c, a, NULL,
                        "gen call: latent size h = 5, w = 6: both must be even, 2..32768 (2x2 "
                        "patches)");
    a = args_of(&in, 0, 0.5f, 0.0f, 1, NULL);
    a.w = 3;
    expect_call_refused(m, c, a, NULL,
                        "gen call: latent size h = 4, w = 3: both must be even, 2..32768 (2x2 "
                        "patches)");
    a = args_of(&in, 0, 0.5f, 0.0f, 1, NULL);
    a.frames = 0;
    expect_call_refused(m, c, a, NULL,
                        "gen call: frames = 0; a call needs at least 1 latent frame");
    a = args_of(&in, 0, 0.5f, 0.0f, 1, NULL);
    a.h = 2, a.w = 4; /* 2 tokens a frame, the cache holds 6 */
    expect_call_refused(m, c, a, NULL,
                        "gen call: h = 2, w = 4 give 2 tokens per frame but the cache holds "
                        "frames of 6; build the cache with tokens_per_frame = (h/2)(w/2) = 2");
    a = args_of(&in, 0, 0.5f, 0.0f, 1, NULL);
    expect_call_refused(m, c2, a, NULL,
                        "gen call: rank 0 of a mesh of 2 has no gather callback; pass one (NULL "
                        "is allowed only when mesh is 1)");
    a.cond_len = 0;
    expect_call_refused(m, c, a, NULL, "gen call: cond_len = 0 is out of range; use 1..16777216");
    a = args_of(&in, 0, NAN, 0.0f, 1, NULL);
    expect_call_refused(m, c, a, NULL,
                        "gen call: timestep = nan, cache_bias = 0: both must be finite");
    a = args_of(&in, 0, 0.5f, 0.0f, 1, NULL);
    a.latents = NULL;
    expect_call_refused(m, c, a, NULL, "gen call: latents is NULL");
    /* a cache of another model */
    ppv_gen_config other = ppv_gen_config_default();
    other.layers = 3;
    ppv_genmodel *m3 = ppv_genmodel_new(&other, NULL, 0);
    ppv_kv_cache *c3 = ppv_kv_cache_new(m3, 0, 1, 6, 6);
    assert_true(m3 && c3);
    a = args_of(&in, 0, 0.5f, 0.0f, 1, NULL);
    expect_call_refused(m, c3, a, NULL,
                        "gen call: the cache was built for a model of 3 layers, d_model 32, 4 "
                        "heads, not this one (2, 32, 4); build it with ppv_kv_cache_new for this "
                        "model");
    ppv_kv_cache_free(c3);
    ppv_genmodel_free(m3);
    ppv_kv_cache_free(c);
    ppv_kv_cache_free(c2);
    inputs_free(&in);
    ppv_genmodel_free(m);
}

/* Rank 0 of a mesh of 2, alone: a gather that plays the other rank by
 * echoing this rank's blocks, and fails with -7 on its call fail_at
 * (counting from 1; 0 never). */
typedef struct failing_gather {
    int calls, fail_at;
} failing_gather;

static int gather_fails(void *ctx, const float *mine, float *all, size_t count) {
    failing_gather *g = ctx;
    if (++g->calls == g->fail_at) return -7;
    memcpy(all, mine, sizeof(float) * count);
    memcpy(all + count, mine, sizeof(float) * count);
    return 0;
}

/* The gather's error comes back as is, naming the layer and the step,
 * and the cache keeps what it held: layer 0's K/V, computed before the
 * failure in layer 1, are not half written. */
static void test_gen_call_returns_the_gather_error_and_keeps_the_cache(void **state) {
    (void)state;
    ppv_genmodel *m = default_model();
    inputs in = inputs_new(m, 4, 6);
    ppv_kv_cache *c = ppv_kv_cache_new(m, 0, 2, 6, 6), *ref = ppv_kv_cache_new(m, 0, 2, 6, 6);
    assert_true(c && ref);
    failing_gather ok = {.fail_at = 0};
    ppv_gen_call_args a = args_of(&in, 0, 0.5f, 0.0f, 1, NULL);
    char err[256] = "";
    assert_int_equal(ppv_gen_call(m, c, &a, gather_fails, &ok, err, sizeof err), 0);
    assert_int_equal(ppv_gen_call(m, ref, &a, gather_fails, &ok, err, sizeof err), 0);
    assert_int_equal(ok.calls, 2 * 3 * 2); /* 3 a layer */
    failing_gather g = {.fail_at = 5};     /* layer 1's cross-attention */
    a = args_of(&in, 1, 0.5f, 0.0f, 1, NULL);
    assert_int_equal(ppv_gen_call(m, c, &a, gather_fails, &g, err, sizeof err), -7);
    assert_string_equal(err,
                        "gen call: rank 0 of 2: layer 1 cross-attention out: the gather failed "
                        "with -7");
    assert_int_equal(g.calls, 5);
    assert_int_equal(ppv_kv_cache_frames(c), 3);
    assert_true(caches_equal_tail(c, ref, 2, 16, 3 * 6, 0));
    ppv_kv_cache_free(c);
    ppv_kv_cache_free(ref);
    inputs_free(&in);
    ppv_genmodel_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gen_config_default_is_two_layers_c32_four_heads),
        cmocka_unit_test(test_genmodel_new_names_a_bad_config_and_the_fix),
        cmocka_unit_test(test_kv_cache_new_refuses_a_bad_mesh_rank_window_or_frame_size),
        cmocka_unit_test(test_gen_first_call_matches_pinned_digests),
        cmocka_unit_test(test_gen_calls_repeat_bit_for_bit),
        cmocka_unit_test(test_gen_meshes_of_1_2_4_give_bitwise_identical_outputs_and_caches),
        cmocka_unit_test(test_gen_meshes_of_1_2_4_8_agree_over_a_long_fed_back_run),
        cmocka_unit_test(test_gen_read_only_call_leaves_the_cache_unchanged),
        cmocka_unit_test(test_gen_cache_written_chunk_by_chunk_equals_a_rebuild_from_scratch),
        cmocka_unit_test(test_gen_window_evicts_the_oldest_frames),
        cmocka_unit_test(test_gen_cache_bias_changes_the_output_only_through_cached_keys),
        cmocka_unit_test(test_gen_outputs_stay_bounded_when_fed_back),
        cmocka_unit_test(test_gen_call_refuses_bad_shapes_with_the_reason),
        cmocka_unit_test(test_gen_call_returns_the_gather_error_and_keeps_the_cache),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
