/* ppv_generator.h - the generator plug-in interface (ABI version 2).
 *
 * The model behind the PP inference mesh is a table of functions that the
 * engine calls on every mesh rank: ppv's built-in generator is one such
 * table, and a team's own model is another, built as a shared object
 * (`ppv pp --generator FILE.so`) or written in Python (FILE.py, see
 * docs/generators.md). A plug-in's collectives are ppv's: they run on the
 * mesh's communicator over whichever transport runs, so group checks,
 * digests, injected faults and the interleaving explorer act on them as on
 * ppv's own code.
 *
 * This header stands alone (C11, no other ppv header) so that a plug-in
 * compiles against it without ppv's build. A shared object exports one
 * function, PPV_GENERATOR_ENTRY, returning its table; ppv refuses a table
 * whose abi is not one from PPV_GENERATOR_ABI_OLDEST to PPV_GENERATOR_ABI.
 *
 * Every function returns 0, or a negative value with a reason in err (at
 * most errlen bytes, NUL-terminated); none may exit the process. On the
 * mock transport all mesh ranks run in one process, one at a time, each on
 * its own stack: a plug-in keeps every rank's data in its state, never in
 * globals.
 */
#ifndef PPV_GENERATOR_H
#define PPV_GENERATOR_H

#include <stddef.h>
#include <stdint.h>

/* Version 2 (2026-12-01) added the call's kind (ppv_generator_call.kind)
 * and the table's flags; a plug-in built for version 1 is built again.
 * Version 3 (2026-12-02) added the optional memory function at the end of
 * the table; ppv still loads a version-2 table (which has none). */
#define PPV_GENERATOR_ABI 3
#define PPV_GENERATOR_ABI_OLDEST 2
#define PPV_GENERATOR_ENTRY "ppv_generator_entry"

/* A chunk is PPV_GENERATOR_FRAMES latent frames of PPV_GENERATOR_CHANNELS
 * channels; latents and conditioning are bf16 (the top 16 bits of an IEEE
 * float32) held as uint16_t, row-major. */
enum { PPV_GENERATOR_FRAMES = 3, PPV_GENERATOR_CHANNELS = 16 };

/* The groups a collective may name: the mesh (stage 1's ranks, where a
 * generator's collectives belong) and the world (stage 0 too). ppv
 * refuses a collective on the world before the transport (FM-22): under
 * NCCL it would wait forever for stage 0. */
enum { PPV_GENERATOR_GROUP_WORLD = 0, PPV_GENERATOR_GROUP_MESH = 1 };

/* The collectives ppv lends a generator, valid from create to destroy.
 * Each returns 0, or a negative value when the run has failed (a peer
 * disagreed, the run was aborted, a wait passed its bound): ppv has
 * already recorded why, and the generator returns that value at once,
 * leaving its outputs and cache as they were. */
typedef struct ppv_generator_comm {
    void *ctx;
    int32_t rank, size; /* this rank's place in the mesh, and the mesh's size */
    /* buf (count floats) becomes the sum over the group's members, added
     * in member order 0, 1, ..., size-1 on every member (the same bits
     * everywhere, whatever the transport). */
    int (*all_reduce_sum)(void *ctx, int32_t group, float *buf, size_t count);
    /* all (size x bytes) receives member i's `mine` at i * bytes. */
    int (*all_gather)(void *ctx, int32_t group, const void *mine, void *all, size_t bytes);
    /* buf (bytes) becomes member root's buf. In create only: inside a call
     * it is refused as FM-08 (an ad-hoc broadcast in a block; what a chunk
     * needs travels in the envelope, described by its tensor specs). */
    int (*broadcast)(void *ctx, int32_t group, void *buf, size_t bytes, int32_t root);
} ppv_generator_comm;

/* What a generator is built from: the recording's (or the run's) setup and
 * this rank's place in the mesh. */
typedef struct ppv_generator_setup {
    int32_t abi;                  /* PPV_GENERATOR_ABI */
    int32_t mesh_rank, mesh_size; /* as in comm */
    int32_t latent_h, latent_w;   /* a latent frame's size: the frame's pixels / 8 */
    int32_t frames, channels;     /* a chunk: PPV_GENERATOR_FRAMES, PPV_GENERATOR_CHANNELS */
    int32_t kv_window;            /* latent frames the KV cache keeps at most (oldest evicted) */
    int32_t cond_dim;             /* conditioning_embeds' last dimension */
    const char *params;           /* the generator's own settings (--generator-params): */
                                  /* "key=value,..." or "" */
    const char *device;           /* "cpu" or "cuda": where ppv was asked to run it */
    void *shared;                 /* what open returned for this run (NULL: no open) */
} ppv_generator_setup;

/* What a call is for (ppv_generator_call.kind), said by ppv rather than
 * left to the order of calls. */
enum {
    PPV_GENERATOR_CALL_STEP = 0,        /* a denoising step: writes out */
    PPV_GENERATOR_CALL_REBUILD = 1,     /* KV recompute: one block of the context frames stage 0
                                           sent, written to the emptied cache (out NULL) */
    PPV_GENERATOR_CALL_CACHE_WRITE = 2, /* the chunk's clean latents at timestep 0 appended to
                                           the cache after its denoising (out NULL) */
};

/* Properties a generator declares (ppv_generator.flags). */
enum {
    /* Each cached frame's K/V depend on that frame (and the conditioning)
     * alone, never on the frames cached before it: a cache rebuilt from
     * the context frames then equals the stash bit for bit even after the
     * window evicted frames, and --compare-kv requires it. */
    PPV_GENERATOR_KV_FRAME_LOCAL = 1u << 0,
};

/* One generator call. The chunk's queries attend to the cache (under
 * cache_bias) and to the chunk itself; with write_cache the chunk's K/V
 * are appended to the cache after use. out NULL is a cache write alone
 * (the chunk's clean latents at timestep 0, after its denoising). Every
 * mesh rank makes the same calls in the same order. */
typedef struct ppv_generator_call {
    const uint16_t *latents; /* bf16 (frames, channels, latent_h, latent_w) */
    int32_t frames;          /* 1..PPV_GENERATOR_FRAMES (a KV rebuild's last block may be short) */
    const uint16_t *cond;    /* bf16 (cond_len, cond_dim) */
    int32_t cond_len;
    float timestep;          /* a step of the denoising list / 1000; 0 for cache writes */
    float cache_bias;        /* added to the logits of cached keys; 0 = none */
    int32_t write_cache;
    uint16_t *out;           /* bf16 like latents, or NULL */
    int64_t call_id, chunk_index, cache_epoch; /* the envelope's, for messages */
    int32_t kind;            /* PPV_GENERATOR_CALL_* */
} ppv_generator_call;

/* What a rank of the generator holds, in bytes (ppv_generator.memory). */
typedef struct ppv_generator_memory {
    uint64_t weights;  /* the weights this rank holds (its shard, or the whole model) */
    uint64_t kv_cache; /* its KV cache and any other state kept from chunk to chunk */
    uint64_t buffers;  /* working buffers it keeps from create to destroy */
    uint64_t working;  /* what the call asked about allocates while it runs (0: no call) */
} ppv_generator_memory;

/* The shape of a call, for its working memory: `frames` latent frames in,
 * `cached` frames in the cache as it starts (0..kv_window), cond_len
 * conditioning tokens, and its kind (PPV_GENERATOR_CALL_*). */
typedef struct ppv_generator_shape {
    int32_t frames, cached, cond_len, kind;
} ppv_generator_shape;

typedef struct ppv_generator {
    int32_t abi;         /* PPV_GENERATOR_ABI */
    const char *name;    /* names the arithmetic: recordings are replayed only by a */
    const char *version; /* generator of the same name and version */
    /* Builds this rank's generator into *state. It may call comm's
     * collectives (every rank the same ones). */
    int (*create)(const ppv_generator_setup *s, const ppv_generator_comm *comm, void **state,
                  char *err, size_t errlen);
    /* Drops every cached frame (a new stream, a reset, a rebuild). */
    int (*kv_reset)(void *state, char *err, size_t errlen);
    /* This rank's cache as floats, in the generator's own order (for
     * --compare-kv): *count floats, copied into dst when dst is not NULL
     * and cap >= *count. NULL when the generator keeps no cache. */
    int (*kv_snapshot)(void *state, float *dst, size_t cap, size_t *count, char *err,
                       size_t errlen);
    int (*call)(void *state, const ppv_generator_call *a, char *err, size_t errlen);
    /* Frees state (also after a failed call). */
    int (*destroy)(void *state, char *err, size_t errlen);
    /* Optional, both or neither (NULL): once a run in each process, before
     * any create and after every destroy, what that process's ranks share
     * (weights every rank only reads: on the mock transport all the mesh's
     * ranks are in one process). open's setup has mesh_rank -1; create's
     * setup carries the result as `shared`. A failure of either means the
     * run cannot be trusted (exit 2), as a device that fails does. */
    int (*open)(const ppv_generator_setup *s, void **shared, char *err, size_t errlen);
    int (*close)(void *shared, char *err, size_t errlen);
    uint32_t flags; /* PPV_GENERATOR_* properties; 0: none declared */
    /* Optional (NULL: ppv counts only the buffers it allocates itself;
     * version 3 on). This rank's bytes as a function of its setup alone,
     * never of its state, so that `ppv pp --plan` asks it without running
     * anything (setup.shared is then NULL): its weights and cache, and with
     * call not NULL the working memory of a call of that shape. ppv charges
     * weights and cache from create to destroy and a call's working memory
     * while the call runs. */
    int (*memory)(const ppv_generator_setup *s, const ppv_generator_shape *call,
                  ppv_generator_memory *out, char *err, size_t errlen);
} ppv_generator;

/* The one function a plug-in exports, under the name PPV_GENERATOR_ENTRY. */
typedef const ppv_generator *(*ppv_generator_entry_fn)(void);

#endif
