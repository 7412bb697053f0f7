/* misbehave.c - a generator plug-in that breaks the interface on purpose,
 * for the tests of what ppv does then. Each call copies its latents and
 * makes one all-reduce on the mesh; the settings pick the fault:
 *   fail=create|call|kv_reset|destroy   that function returns an error
 *   extra=1     one more all-reduce than the peers (after call `at`)
 *   skip=1      one all-reduce fewer than the peers (at call `at`)
 *   world=1     the all-reduce at call `at` names the world group
 *   bigger=1    the all-reduce at call `at` is one float longer
 *   badroot=1   a broadcast at call `at` from a root outside the mesh
 *   nostate=1   create succeeds without giving a state
 *   die=exit|_exit|segv|abort|loop   at call `at` the plug-in ends the
 *               process (exit(0), _exit(0)), crashes, aborts or never
 *               returns: the plug-in guard must name it (tools/guard.c)
 *   forget=1    a KV rebuild leaves out each block's first context frame
 *   skew=1      a KV rebuild caches each frame's value plus 1
 *   mix=1       a cached frame's value adds the frame cached before it
 *               (not frame-local: after eviction a rebuild differs)
 *   drift=K     not deterministic: from the process's K-th create on,
 *               every output's first value is moved by a count of creates
 *               kept in a global, so each run of the same configuration
 *               differs from the last (--repeat, the explorer)
 * on mesh rank `rank` (default: the last), at its call `at` (default 2).
 * Built with MISBEHAVE_ABI, the table declares that interface version;
 * with MISBEHAVE_VARIANT 2 it has no name, 3 an open without a close, 4 a
 * kv_snapshot whose size differs from rank to rank, 5 an open that shares
 * nothing (NULL) and a close that fails, 6 a snapshot of its cache (one
 * value a cached frame: the frame's first latent), 7 the same declaring
 * its cache frame-local (PPV_GENERATOR_KV_FRAME_LOCAL). */
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ppv_generator.h"

#ifndef MISBEHAVE_ABI
#define MISBEHAVE_ABI PPV_GENERATOR_ABI
#endif

typedef struct bad {
    ppv_generator_comm comm;
    char fail[16], die[16];
    int extra, skip, world, bigger, badroot, nostate, rank, at, me, calls, drift, forget, mix, skew;
    size_t values;
    float cache[64]; /* one value a cached frame, oldest first */
    int cached, window;
} bad;

static int creates; /* drift=1's state kept from run to run: what a plug-in must not do */

static int bad_create(const ppv_generator_setup *s, const ppv_generator_comm *comm, void **state,
                      char *err, size_t errlen) {
    bad *b = calloc(1, sizeof *b);
    if (!b) return -1;
    b->comm = *comm;
    b->rank = s->mesh_size - 1;
    b->at = 2;
    b->me = s->mesh_rank;
    b->values = (size_t)s->channels * (size_t)(s->latent_h * s->latent_w);
    b->window = s->kv_window < 64 ? s->kv_window : 64;
    creates++;
    for (const char *p = s->params; *p;) {
        char key[16], val[16];
        int n = 0;
        if (sscanf(p, "%15[a-z_]=%15[a-z_0-9]%n", key, val, &n) != 2) break;
        if (!strcmp(key, "fail")) snprintf(b->fail, sizeof b->fail, "%s", val);
        else if (!strcmp(key, "extra")) b->extra = atoi(val);
        else if (!strcmp(key, "skip")) b->skip = atoi(val);
        else if (!strcmp(key, "world")) b->world = atoi(val);
        else if (!strcmp(key, "bigger")) b->bigger = atoi(val);
        else if (!strcmp(key, "badroot")) b->badroot = atoi(val);
        else if (!strcmp(key, "nostate")) b->nostate = atoi(val);
        else if (!strcmp(key, "rank")) b->rank = atoi(val);
        else if (!strcmp(key, "at")) b->at = atoi(val);
        else if (!strcmp(key, "die")) snprintf(b->die, sizeof b->die, "%s", val);
        else if (!strcmp(key, "forget")) b->forget = atoi(val);
        else if (!strcmp(key, "mix")) b->mix = atoi(val);
        else if (!strcmp(key, "skew")) b->skew = atoi(val);
        else if (!strcmp(key, "drift")) b->drift = atoi(val) && creates >= atoi(val) ? creates : 0;
        p += n + (p[n] == ',');
    }
    if (!strcmp(b->fail, "create") && b->me == b->rank) {
        snprintf(err, errlen, "asked to fail in create");
        free(b);
        return -1;
    }
    if (b->nostate && b->me == b->rank) {
        free(b);
        return 0;
    }
    *state = b;
    return 0;
}

static int bad_kv_reset(void *state, char *err, size_t errlen) {
    bad *b = state;
    b->cached = 0;
    if (!strcmp(b->fail, "kv_reset") && b->me == b->rank) {
        snprintf(err, errlen, "asked to fail in kv_reset");
        return -1;
    }
    return 0;
}

/* bf16 bits as a float. */
static float bf16_value(uint16_t bits) {
    uint32_t u = (uint32_t)bits << 16;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

/* Appends the frames' values to the cache, the oldest evicted. */
static void cache_write(bad *b, const ppv_generator_call *a) {
    for (int32_t f = 0; f < a->frames; f++) {
        if (b->forget && a->kind == PPV_GENERATOR_CALL_REBUILD && f == 0) continue;
        float v = bf16_value(a->latents[(size_t)f * b->values]);
        if (b->mix && b->cached) v += b->cache[b->cached - 1];
        if (b->skew && a->kind == PPV_GENERATOR_CALL_REBUILD) v += 1.0f;
        if (b->cached == b->window) {
            memmove(b->cache, b->cache + 1, (size_t)(b->window - 1) * sizeof *b->cache);
            b->cached--;
        }
        if (b->cached < b->window) b->cache[b->cached++] = v;
    }
}

static int bad_call(void *state, const ppv_generator_call *a, char *err, size_t errlen) {
    bad *b = state;
    if (a->write_cache) cache_write(b, a);
    if (!a->out) return 0; /* a rebuild or a cache write: nothing more */
    int here = b->me == b->rank && ++b->calls == b->at;
    if (here && !strcmp(b->fail, "call")) {
        snprintf(err, errlen, "asked to fail at call %d (call_id %lld)", b->calls,
                 (long long)a->call_id);
        return -1;
    }
    if (here && b->die[0]) {
        static volatile uintptr_t unmapped = 16; /* an address no process maps */
        volatile int *nowhere = (volatile int *)unmapped;
        if (!strcmp(b->die, "exit")) exit(0);
        if (!strcmp(b->die, "_exit")) _exit(0);
        if (!strcmp(b->die, "segv")) return *nowhere;
        if (!strcmp(b->die, "abort")) abort();
        if (!strcmp(b->die, "loop"))
            for (volatile unsigned long spin = 0;; spin++) {
            }
    }
    float v[2] = {(float)b->me, 1.0f};
    int rc = 0;
    if (!(here && b->skip))
        rc = b->comm.all_reduce_sum(b->comm.ctx,
                                    here && b->world ? PPV_GENERATOR_GROUP_WORLD
                                                     : PPV_GENERATOR_GROUP_MESH,
                                    v, here && b->bigger ? 2 : 1);
    if (!rc && here && b->extra)
        rc = b->comm.all_reduce_sum(b->comm.ctx, PPV_GENERATOR_GROUP_MESH, v, 1);
    if (!rc && here && b->badroot)
        rc = b->comm.broadcast(b->comm.ctx, PPV_GENERATOR_GROUP_MESH, v, sizeof v[0],
                               b->comm.size);
    if (rc) return rc;
    memcpy(a->out, a->latents, (size_t)a->frames * b->values * sizeof *a->out);
    a->out[0] = (uint16_t)(a->out[0] + b->drift);
    return 0;
}

static int bad_destroy(void *state, char *err, size_t errlen) {
    bad *b = state;
    int fail = !strcmp(b->fail, "destroy") && b->me == b->rank;
    free(b);
    if (fail) snprintf(err, errlen, "asked to fail in destroy");
    return fail ? -1 : 0;
}

#ifndef MISBEHAVE_VARIANT
#define MISBEHAVE_VARIANT 1
#endif

/* Variant 4: rank r's snapshot holds r + 1 floats. */
static int bad_kv_snapshot(void *state, float *dst, size_t cap, size_t *count, char *err,
                           size_t errlen) {
    (void)err, (void)errlen;
    bad *b = state;
    *count = (size_t)b->me + 1;
    for (size_t i = 0; dst && i < *count && i < cap; i++) dst[i] = 1.0f;
    return 0;
}

/* Variants 6 and 7: the cache as it is. */
static int bad_cache_snapshot(void *state, float *dst, size_t cap, size_t *count, char *err,
                              size_t errlen) {
    (void)err, (void)errlen;
    bad *b = state;
    *count = (size_t)b->cached;
    if (dst && cap >= *count) memcpy(dst, b->cache, *count * sizeof *dst);
    return 0;
}

static int bad_open(const ppv_generator_setup *s, void **shared, char *err, size_t errlen) {
    (void)s, (void)err, (void)errlen;
    *shared = NULL;
    return 0;
}

static int bad_close(void *shared, char *err, size_t errlen) {
    (void)shared;
    snprintf(err, errlen, "asked to fail in close");
    return -1;
}

static const ppv_generator table = {
    .abi = MISBEHAVE_ABI,
    .name = MISBEHAVE_VARIANT == 2 ? "" : "misbehave",
    .version = "1",
    .create = bad_create,
    .kv_reset = bad_kv_reset,
    .kv_snapshot = MISBEHAVE_VARIANT == 4   ? bad_kv_snapshot
                   : MISBEHAVE_VARIANT >= 6 ? bad_cache_snapshot
                                            : NULL,
    .call = bad_call,
    .destroy = bad_destroy,
    .open = MISBEHAVE_VARIANT == 3 || MISBEHAVE_VARIANT == 5 ? bad_open : NULL,
    .close = MISBEHAVE_VARIANT == 5 ? bad_close : NULL,
    .flags = MISBEHAVE_VARIANT == 7 ? PPV_GENERATOR_KV_FRAME_LOCAL : 0u,
};

const ppv_generator *ppv_generator_entry(void) {
    return &table;
}
