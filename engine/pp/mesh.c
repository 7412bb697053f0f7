/* mesh.c - stage 1: the leader (rank 1, mesh rank 0) and the workers.
 *
 * The leader receives a whole envelope from stage 0 and validates it
 * (tripwire point 2) before any mesh collective; a rejected envelope gets
 * an error result and an ERROR broadcast, so no worker waits for a chunk
 * that will not come. Every mesh rank then checks that all hold the same
 * input (an all-gathered digest), runs the chunk's generator calls with a
 * count that may never pass the plan (point 3) and, on the leader, sends
 * the one result. Every collective names its group and is refused before
 * the transport when the group is wrong.
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "pp_internal.h"

/* A result the leader keeps, with its own copy of latents_out. */
typedef struct kept {
    ppv_result r;
    ppv_bf16 *data;
    size_t cap; /* data's bytes */
    int has;
    uint64_t env_digest; /* ppv_envelope_digest of the envelope it answers */
} kept;

typedef struct mesh {
    int64_t chunks_run; /* INFERs this rank ran (the seeded local-recompute bug's count) */
    pp_ctx *c;
    ppv_transport *t;
    const ppv_pp_options *o;
    int32_t rank, mr, n;
    int leader, last;
    void *gen;               /* the generator's state on this rank (NULL: control-only) */
    ppv_generator_comm comm; /* the collectives lent to it */
    int64_t frame_pos;       /* where the mesh's stream is, in latent frames */
    ppv_contract_order order;
    const ppv_envelope *e; /* the chunk being run */
    int64_t calls, planned;
    int wrong_group; /* OM-08: the next gather names the world */
    int in_block;    /* running a chunk: a broadcast here is ad hoc (FM-08) */
    int adhoc;       /* OM-06: the next generator call broadcasts first */
    int64_t nccoll;  /* collectives this rank has made in the chunk */
    /* buffers every chunk uses: the denoising loop's two latents, and one
     * value (float or digest) per mesh rank for the gathers */
    ppv_bf16 *x, *y;
    size_t out_bytes; /* a chunk's output buffer's size */
    float *gathered;
    uint64_t *digests;
    /* the leader's result cache (the last call it answered: a retry of it
     * is answered from here, never run again) and, for reorder-results,
     * a result it holds back */
    kept last_answer, held_back;
    /* OM-09: a copy of the last result of the first epoch */
    ppv_result stale;
    ppv_bf16 *stale_data;
    size_t stale_bytes;
    int stale_sent;
    /* shard fingerprints: the shard this rank's generator was built for
     * (its mesh rank, unless a fault says otherwise), how often, and the
     * baseline and the last all-gathered values (one per mesh rank) */
    int32_t shard_rank, fp_every;
    uint64_t *fp_base, *fp_all;
    /* the leader's times on the transport's clock (virtual on the mock):
     * when the chunk's envelope arrived, and when its last answer went
     * (-1: none yet), for tB_ms and t_mesh_idle_ms */
    int64_t t_arrived, t_answered, idle_ns;
    int64_t last_header[3]; /* ids of the last header this rank received (-1: none) */
    uint64_t digest; /* ppv_envelope_digest of the envelope in hand (0: not yet taken) */
    ppv_generator_site site; /* this rank's generator call, for the plug-in guard */
    /* the accounting: what the generator reports (charged from create to
     * destroy), the frames its cache holds, and the envelope in hand */
    pp_gen_bytes gb;
    ppv_generator_memory resident;
    int32_t cached;
    uint64_t e_bytes;
} mesh;

static pp_where where(const mesh *m, pp_group g) {
    pp_where w = {m->rank, g, m->e};
    return w;
}

/* Marks this rank's generator as running its function `what` (the
 * plug-in guard, guard.c); the mark to set back when it returns. */
static const ppv_generator_site *site_enter(mesh *m, const char *what) {
    m->site.name = m->c->gen->name;
    m->site.version = m->c->gen->version;
    m->site.function = what;
    m->site.mesh_rank = m->mr;
    m->site.call_id = m->e ? m->e->call_id : -1;
    m->site.chunk_index = m->e ? m->e->chunk_index : -1;
    m->site.cache_epoch = m->e ? m->e->cache_epoch : -1;
    return pp_site_set(&m->site);
}

/* The communicator of group g for a collective that must run on
 * `expected`: refused (FM-22) before the transport when they differ. */
static int group_comm(mesh *m, pp_group used, pp_group expected, const char *what) {
    if (used != expected && !pp_skipped(m->c, PPV_POINT_GROUP)) {
        pp_fail(m->c, m->t, where(m, used), PPV_FAIL_FM22, PPV_POINT_GROUP,
                "%s called on group %s, but it belongs to group %s: refused before the "
                "transport (under NCCL the ranks would wait for each other forever)",
                what, pp_group_name(used), pp_group_name(expected));
        return -1;
    }
    return used == PP_GROUP_MESH ? m->c->mesh_comm : 0;
}

/* The group a generator's collective runs on: the one it names, or the
 * world once when OM-08 is injected. The communicator, or -1 refused. */
static int gen_group(mesh *m, int32_t named, const char *what) {
    pp_group used = named == PPV_GENERATOR_GROUP_MESH ? PP_GROUP_MESH : PP_GROUP_WORLD;
    if (m->wrong_group) used = PP_GROUP_WORLD;
    m->wrong_group = 0;
    return group_comm(m, used, PP_GROUP_MESH, what);
}

/* The collectives a generator is lent (ppv_generator_comm). */
static int gen_all_reduce_run(void *ctx, int32_t group, float *buf, size_t count) {
    mesh *m = ctx;
    m->nccoll++;
    int comm = gen_group(m, group, "the generator's all-reduce");
    if (comm < 0) return PPV_ERR_USAGE;
    int rc = m->t->ops->allreduce_f32(m->t->impl, m->rank, buf, count, comm, "tp all-reduce");
    if (rc)
        pp_transport_error(m->c, m->t, where(m, PP_GROUP_MESH), rc, "the generator's all-reduce");
    return rc;
}

static int gen_all_gather_run(void *ctx, int32_t group, const void *mine, void *all, size_t bytes) {
    mesh *m = ctx;
    m->nccoll++;
    int comm = gen_group(m, group, "the generator's all-gather");
    if (comm < 0) return PPV_ERR_USAGE;
    int rc = m->t->ops->allgather(m->t->impl, m->rank, mine, all, bytes, comm, "tp gather");
    if (rc)
        pp_transport_error(m->c, m->t, where(m, PP_GROUP_MESH), rc, "the generator's all-gather");
    return rc;
}

static int gen_broadcast_run(void *ctx, int32_t group, void *buf, size_t bytes, int32_t root) {
    mesh *m = ctx;
    int64_t seq = ++m->nccoll;
    int comm = gen_group(m, group, "the generator's broadcast");
    if (comm < 0) return PPV_ERR_USAGE;
    if (root < 0 || root >= m->n) {
        pp_fail(m->c, m->t, where(m, PP_GROUP_MESH), PPV_FAIL_GENERATOR, PPV_POINT_MESH_RUNNING,
                "generator %s %s broadcast from mesh rank %d, but the mesh has %d ranks",
                m->c->gen->name, m->c->gen->version, root, m->n);
        return PPV_ERR_USAGE;
    }
    if (m->in_block && !pp_skipped(m->c, PPV_POINT_BROADCAST)) {
        pp_fail(m->c, m->t,
                where(m, group == PPV_GENERATOR_GROUP_MESH ? PP_GROUP_MESH : PP_GROUP_WORLD),
                PPV_FAIL_FM08, PPV_POINT_BROADCAST,
                "mesh rank %d broadcasts %zu bytes from mesh rank %d on group %s, its collective "
                "%" PRId64 " of the chunk: an ad-hoc broadcast inside a block, refused before the "
                "transport (what a chunk needs travels in the envelope, by its tensor_specs)",
                m->mr, bytes, root, group == PPV_GENERATOR_GROUP_MESH ? "mesh" : "world", seq);
        return PPV_ERR_USAGE;
    }
    int rc = m->t->ops->broadcast(m->t->impl, m->rank, buf, bytes, root, comm, "tp broadcast");
    if (rc)
        pp_transport_error(m->c, m->t, where(m, PP_GROUP_MESH), rc, "the generator's broadcast");
    return rc;
}

/* The collectives as the generator calls them: while one runs (and waits
 * for the peers), ppv's code runs, not the plug-in's. */
static int gen_all_reduce(void *ctx, int32_t group, float *buf, size_t count) {
    const ppv_generator_site *was = pp_site_set(NULL);
    int rc = gen_all_reduce_run(ctx, group, buf, count);
    pp_site_set(was);
    return rc;
}

static int gen_all_gather(void *ctx, int32_t group, const void *mine, void *all, size_t bytes) {
    const ppv_generator_site *was = pp_site_set(NULL);
    int rc = gen_all_gather_run(ctx, group, mine, all, bytes);
    pp_site_set(was);
    return rc;
}

static int gen_broadcast(void *ctx, int32_t group, void *buf, size_t bytes, int32_t root) {
    const ppv_generator_site *was = pp_site_set(NULL);
    int rc = gen_broadcast_run(ctx, group, buf, bytes, root);
    pp_site_set(was);
    return rc;
}

/* A generator failure (the function `what` returned rc with err) that is
 * not already a recorded one: the plug-in, the call and the rank named. */
static int gen_error(mesh *m, int rc, const char *what, const char *err) {
    if (!m->c->failed) {
        const ppv_generator *g = m->c->gen;
        pp_fail(m->c, m->t, where(m, PP_GROUP_MESH), PPV_FAIL_GENERATOR, PPV_POINT_MESH_RUNNING,
                "generator %s %s failed in %s on mesh rank %d: %s", g ? g->name : "?",
                g ? g->version : "?", what, m->mr, err[0] ? err : "(it gave no reason)");
    }
    return rc ? rc : -1;
}

/* Counts one generator call against the plan (point 3). */
static int count_call(mesh *m) {
    if (m->calls + 1 > m->planned && !pp_skipped(m->c, PPV_POINT_MESH_RUNNING)) {
        pp_fail(m->c, m->t, where(m, PP_GROUP_MESH), PPV_FAIL_FM02, PPV_POINT_MESH_RUNNING,
                "generator call %" PRId64 " would pass expected_generator_calls %" PRId64
                ": the chunk stops here",
                m->calls + 1, m->planned);
        return -1;
    }
    m->calls++;
    return 0;
}

/* One generator call, or in control-only mode a pass-through (the caller
 * keeps its latents: nothing is copied) with the one collective a call
 * makes on a mesh. */
static int kernel(mesh *m, ppv_generator_call *a) {
    /* --cost: steps of work, each progress for the watchdog (as a decode's) */
    for (int32_t i = 0; i < m->o->cost_call && m->t->ops->yield; i++) {
        m->t->ops->yield(m->t->impl, m->rank);
        ppv_world_progress(m->t, m->rank);
    }
    if (m->adhoc) { /* OM-06: the shape sent the wrong way */
        m->adhoc = 0;
        int64_t dims[5];
        memcpy(dims, m->e->latents_in.dims, sizeof dims);
        int rc = gen_broadcast(m, PPV_GENERATOR_GROUP_MESH, dims, sizeof dims, 0);
        if (rc) return rc;
    }
    if (m->o->control_only) {
        if (m->n == 1) return 0;
        float mine = (float)m->calls;
        return gen_all_gather(m, PPV_GENERATOR_GROUP_MESH, &mine, m->gathered, sizeof mine);
    }
    char err[512] = "";
    a->call_id = m->e->call_id;
    a->chunk_index = m->e->chunk_index;
    a->cache_epoch = m->e->cache_epoch;
    const char *what = a->kind == PPV_GENERATOR_CALL_REBUILD       ? "call (a KV rebuild)"
                       : a->kind == PPV_GENERATOR_CALL_CACHE_WRITE ? "call (a cache write)"
                                                                   : "call";
    uint64_t work = 0;
    if (m->c->rep->mem && pp_gen_bytes_call(&m->gb, a->frames, m->cached, a->cond_len, a->kind, &work, err,
                          sizeof err) < 0)
        return gen_error(m, -1, "memory", err);
    pp_mem(m->c, m->t, m->rank, PPV_MEM_WORKING, (int64_t)work, a->chunk_index, a->call_id);
    const ppv_generator_site *was = site_enter(m, what);
    int rc = m->c->gen->call(m->gen, a, err, sizeof err);
    pp_site_set(was);
    pp_mem(m->c, m->t, m->rank, PPV_MEM_WORKING, -(int64_t)work, a->chunk_index, a->call_id);
    if (!rc && a->write_cache) { /* the window keeps its newest frames */
        int32_t total = m->cached + a->frames;
        m->cached = total < m->o->kv_window ? total : m->o->kv_window;
    }
    return rc ? gen_error(m, rc, what, err) : 0;
}

/* Drops the generator's cache. */
static int kv_reset(mesh *m) {
    m->cached = 0;
    if (!m->gen) return 0;
    char err[512] = "";
    const ppv_generator_site *was = site_enter(m, "kv_reset");
    int rc = m->c->gen->kv_reset(m->gen, err, sizeof err);
    pp_site_set(was);
    return rc ? gen_error(m, rc, "kv_reset", err) : 0;
}

/* Keeps the mesh's KV cache as the chunk's denoising starts (--compare-kv):
 * mesh rank r's snapshot at r times one rank's size. */
static int snapshot_kv(mesh *m, int64_t chunk) {
    ppv_pp_report *r = m->c->rep;
    if (!r->kv || chunk < 0 || chunk >= r->nkv || !m->gen || !m->c->gen->kv_snapshot) return 0;
    char err[512] = "";
    size_t part = 0;
    const ppv_generator_site *was = site_enter(m, "kv_snapshot");
    int rc = m->c->gen->kv_snapshot(m->gen, NULL, 0, &part, err, sizeof err);
    pp_site_set(was);
    if (rc) return gen_error(m, rc, "kv_snapshot", err);
    size_t total = (size_t)m->n * part;
    if (!r->kv[chunk]) {
        if (!(r->kv[chunk] = calloc(total ? total : 1, sizeof(float))))
            return gen_error(m, -1, "kv_snapshot", "out of memory");
        r->kv_floats[chunk] = total;
    }
    if (r->kv_floats[chunk] != total) {
        snprintf(err, sizeof err, "its snapshot holds %zu values, another mesh rank's %zu", part,
                 r->kv_floats[chunk] / (size_t)m->n);
        return gen_error(m, -1, "kv_snapshot", err);
    }
    was = site_enter(m, "kv_snapshot");
    rc = m->c->gen->kv_snapshot(m->gen, r->kv[chunk] + (size_t)m->mr * part, part, &part, err,
                                sizeof err);
    pp_site_set(was);
    return rc ? gen_error(m, rc, "kv_snapshot", err) : 0;
}

/* Builds this rank's generator (after the handshake, every mesh rank at
 * the same point: create may use the collectives). */
static int gen_create(mesh *m) {
    ppv_generator_setup s;
    pp_generator_setup(m->c, m->mr, &s);
    s.mesh_rank = m->shard_rank; /* OM-12: another rank's shard */
    m->comm.ctx = m;
    m->comm.rank = m->mr;
    m->comm.size = m->n;
    m->comm.all_reduce_sum = gen_all_reduce;
    m->comm.all_gather = gen_all_gather;
    m->comm.broadcast = gen_broadcast;
    char err[512] = "";
    void *state = NULL;
    const ppv_generator_site *was = site_enter(m, "create");
    int rc = m->c->gen->create(&s, &m->comm, &state, err, sizeof err);
    pp_site_set(was);
    if (rc) return gen_error(m, rc, "create", err);
    if (!state) return gen_error(m, -1, "create", "it returned no state");
    m->gen = state;
    pp_gen_bytes_close(&m->gb);
    if (pp_gen_bytes_open(&m->gb, m->c->gen, &s, 0, &m->resident, err, sizeof err) < 0)
        return gen_error(m, -1, "memory", err);
    pp_mem(m->c, m->t, m->rank, PPV_MEM_WEIGHTS, (int64_t)m->resident.weights, -1, -1);
    pp_mem(m->c, m->t, m->rank, PPV_MEM_KV_CACHE, (int64_t)m->resident.kv_cache, -1, -1);
    pp_mem(m->c, m->t, m->rank, PPV_MEM_BUFFERS, (int64_t)m->resident.buffers, -1, -1);
    return 0;
}

/* The generator's state destroyed: its bytes given back. */
static void gen_gone(mesh *m) {
    pp_mem(m->c, m->t, m->rank, PPV_MEM_WEIGHTS, -(int64_t)m->resident.weights, -1, -1);
    pp_mem(m->c, m->t, m->rank, PPV_MEM_KV_CACHE, -(int64_t)m->resident.kv_cache, -1, -1);
    pp_mem(m->c, m->t, m->rank, PPV_MEM_BUFFERS, -(int64_t)m->resident.buffers, -1, -1);
    memset(&m->resident, 0, sizeof m->resident);
}

/* The fingerprint of the shard this rank holds: the built-in's weights
 * themselves, else (a plug-in, or no model) a digest of the generator and
 * the shard its setup names. */
static uint64_t shard_fingerprint(const mesh *m) {
    const pp_ctx *c = m->c;
    if (c->gen && c->gen == ppv_generator_builtin() && c->gen_shared)
        return ppv_genmodel_shard_fingerprint(c->gen_shared, m->shard_rank, m->n);
    uint64_t h = c->gen ? ppv_generator_digest(c->gen->name, c->gen->version, c->gen_params) : 0;
    int64_t parts[2] = {m->shard_rank, m->n};
    return (h ^ ppv_digest_words(parts, sizeof parts)) * 0x100000001b3ULL | 1;
}

/* OM-12: every mesh rank's shard fingerprint, all-gathered. The baseline
 * (e NULL) is kept; later each must equal its baseline; always no two
 * ranks alike (a past bug gave the same value on every rank). The leader
 * reports; a worker that sees it just stops. */
static int check_fingerprints(mesh *m, const ppv_envelope *e) {
    if (pp_skipped(m->c, PPV_POINT_FINGERPRINT)) return 0;
    uint64_t mine = shard_fingerprint(m), *all = m->fp_all;
    char err[256];
    if (e && m->o->on_rank &&
        m->o->on_rank(m->o->on_rank_ctx, m->mr, PPV_RANK_SHARD_FINGERPRINT, e->call_id, mine, err,
                      sizeof err) < 0) {
        pp_fail(m->c, m->t, where(m, PP_GROUP_MESH), PPV_FAIL_RULE, PPV_POINT_FINGERPRINT, "%s",
                err);
        return -1;
    }
    all[0] = mine;
    if (m->n > 1) {
        int comm = group_comm(m, PP_GROUP_MESH, PP_GROUP_MESH, "the shard fingerprints");
        int rc = m->t->ops->allgather(m->t->impl, m->rank, &mine, all, sizeof mine, comm,
                                      "shard fingerprint");
        if (rc) {
            pp_transport_error(m->c, m->t, where(m, PP_GROUP_MESH), rc, "the shard fingerprints");
            return rc;
        }
    }
    if (!e) memcpy(m->fp_base, all, (size_t)m->n * sizeof *all);
    for (int32_t r = 0; r < m->n; r++)
        if (all[r] != m->fp_base[r]) {
            if (m->leader)
                pp_fail(m->c, m->t, where(m, PP_GROUP_MESH), PPV_FAIL_FINGERPRINT,
                        PPV_POINT_FINGERPRINT,
                        "mesh rank %d's shard fingerprint is %016" PRIx64
                        ", its baseline %016" PRIx64
                        ": its weights changed under the run (a reload or a write)",
                        r, all[r], m->fp_base[r]);
            return -1;
        }
    for (int32_t r = 1; r < m->n; r++)
        for (int32_t q = 0; q < r; q++)
            if (all[r] == all[q]) {
                if (m->leader)
                    pp_fail(m->c, m->t, where(m, PP_GROUP_MESH), PPV_FAIL_FINGERPRINT,
                            PPV_POINT_FINGERPRINT,
                            "mesh ranks %d and %d have the same shard fingerprint %016" PRIx64
                            "%s: distinct shards must fingerprint differently (a rank holds "
                            "another's shard, or the fingerprint does not see the weights)",
                            q, r, all[r], e ? "" : " at start");
                return -1;
            }
    return 0;
}

/* The shard-reload bug: the built-in's last rank rebuilds its generator
 * for mesh rank 0's shard (create makes no collective, so it may). */
static int reload_shard(mesh *m) {
    char err[512] = "";
    const ppv_generator_site *was = site_enter(m, "destroy");
    int rc = m->c->gen->destroy(m->gen, err, sizeof err);
    pp_site_set(was);
    m->gen = NULL;
    gen_gone(m);
    if (rc) return gen_error(m, rc, "destroy", err);
    m->shard_rank = 0;
    return gen_create(m);
}

/* Runs one INFER on this rank: resets, optional KV recompute, the denoising
 * loop, the cache write. out receives the final latents. */
static int run_chunk(mesh *m, const ppv_envelope *e, ppv_bf16 *out) {
    int rc = 0;
    const ppv_pp_options *o = m->o;
    int32_t h = (int32_t)(e->height / 8), w = (int32_t)(e->width / 8);
    size_t vals = (size_t)PP_FRAMES_PER_CHUNK * PP_LATENT_CHANNELS * (size_t)(h * w);
    if ((e->init_cache || e->reset_kv_cache) && (rc = kv_reset(m))) return rc;
    m->calls = 0;
    m->planned = e->expected_generator_calls;
    ppv_generator_call a;
    memset(&a, 0, sizeof a);
    /* the chunk's own conditioning, every chunk (the contract's leader
     * mapping): never one kept from an earlier chunk, which would let a
     * changed or zeroed embedding pass unseen (FM-17) */
    a.cond = (const uint16_t *)e->conditioning_embeds.data;
    a.cond_len = (int32_t)e->conditioning_embeds.dims[1];
    int recompute = e->do_kv_recompute;
    if (m->last && o->bug == PPV_PP_BUG_WORKER_LOCAL_RECOMPUTE) /* its own count decides */
        recompute = o->kv_recompute && m->chunks_run > 0 && m->chunks_run % o->recompute_every == 0;
    m->chunks_run++;
    if (recompute) {
        /* one generator call at timestep 0 over the context frames, chunk by
         * chunk with a block-causal mask, rebuilding the cache */
        if (count_call(m) < 0) return -1;
        if ((rc = kv_reset(m))) return rc;
        const ppv_bf16 *ctx = e->context_frames.data;
        int64_t nf = e->context_frames.dims[1];
        size_t frame = (size_t)PP_LATENT_CHANNELS * (size_t)(h * w);
        a.write_cache = 1;
        a.kind = PPV_GENERATOR_CALL_REBUILD;
        for (int64_t f = 0; f < nf; f += PP_FRAMES_PER_CHUNK) {
            a.latents = (const uint16_t *)(ctx + (size_t)f * frame);
            a.frames = (int32_t)(nf - f < PP_FRAMES_PER_CHUNK ? nf - f : PP_FRAMES_PER_CHUNK);
            if ((rc = kernel(m, &a))) return rc;
        }
        a.write_cache = 0;
    }
    if ((rc = snapshot_kv(m, e->chunk_index))) return rc;
    ppv_bf16 *x = m->x, *y = m->y;
    if (o->control_only) /* no model: x is only read, the input will do */
        x = e->latents_in.data;
    else
        memcpy(x, e->latents_in.data, vals * sizeof *x);
    const int64_t *steps = e->current_denoising_step_list.data;
    int64_t nsteps = e->num_denoise_steps + (m->last && o->inject == PPV_INJECT_OM04);
    int extra = m->last && o->inject == PPV_INJECT_EXTRA_CALL && e->chunk_index == PP_INJECT_CHUNK;
    if (o->inject == PPV_INJECT_MISSING_CALL && e->chunk_index == PP_INJECT_CHUNK) nsteps--;
    a.frames = PP_FRAMES_PER_CHUNK;
    a.cache_bias = (float)e->kv_cache_attention_bias;
    a.kind = PPV_GENERATOR_CALL_STEP;
    for (int64_t s = 0; s < nsteps + extra && !rc; s++) {
        if ((rc = count_call(m)) < 0) break;
        int64_t step = steps[s < e->num_denoise_steps ? s : e->num_denoise_steps - 1];
        a.latents = (const uint16_t *)x;
        a.out = (uint16_t *)y;
        a.timestep = (float)step / 1000.0f;
        if ((rc = kernel(m, &a)) == 0 && !o->control_only) {
            ppv_bf16 *tmp = x;
            x = y;
            y = tmp;
        }
    }
    if (rc) return rc;
    /* the chunk's clean K/V into the cache: a cache write at timestep 0,
     * not a generator call of the plan */
    a.latents = (const uint16_t *)x;
    a.out = NULL;
    a.timestep = 0;
    a.cache_bias = 0;
    a.write_cache = 1;
    a.kind = PPV_GENERATOR_CALL_CACHE_WRITE;
    if (m->gen && (rc = kernel(m, &a))) return rc;
    memcpy(out, x, vals * sizeof *out);
    return 0;
}

/* A digest of what this rank received: metadata text and tensors, each
 * part's ppv_digest_words chained (it only has to agree across the mesh's
 * ranks). */
static uint64_t input_digest(const pp_received *rm) {
    uint64_t h = 0xcbf29ce484222325ULL;
    if (rm->meta) h = (h ^ ppv_digest_words(rm->meta, (size_t)rm->header[6])) * 0x100000001b3ULL;
    for (int k = 0; k < rm->norder; k++)
        h = (h ^ ppv_digest_words(rm->order[k]->data, ppv_tensor_bytes(rm->order[k]))) *
            0x100000001b3ULL;
    return h;
}

/* Every mesh rank holds the same input, or the run stops (Franken-model
 * guard). The leader reports; a worker that sees it just stops. */
static int check_digest(mesh *m, const pp_received *rm) {
    if (m->n < 2 || pp_skipped(m->c, PPV_POINT_DIGEST)) return 0;
    uint64_t mine = input_digest(rm), *all = m->digests;
    char err[256];
    if (m->o->on_rank && m->o->on_rank(m->o->on_rank_ctx, m->mr, PPV_RANK_INPUT_DIGEST,
                                       m->e->call_id, mine, err, sizeof err) < 0) {
        pp_fail(m->c, m->t, where(m, PP_GROUP_MESH), PPV_FAIL_RULE, PPV_POINT_DIGEST, "%s", err);
        return -1;
    }
    int comm = group_comm(m, PP_GROUP_MESH, PP_GROUP_MESH, "the input digest");
    int rc =
        m->t->ops->allgather(m->t->impl, m->rank, &mine, all, sizeof mine, comm, "input digest");
    if (rc) {
        pp_transport_error(m->c, m->t, where(m, PP_GROUP_MESH), rc, "the input digest");
        return rc;
    }
    for (int32_t r = 1; r < m->n; r++)
        if (all[r] != all[0]) {
            if (m->leader)
                pp_fail(m->c, m->t, where(m, PP_GROUP_MESH), PPV_FAIL_DIGEST, PPV_POINT_DIGEST,
                        "mesh rank %d's input digest %016" PRIx64
                        " differs from the leader's %016" PRIx64
                        ": the ranks would compute a Franken-model",
                        r, all[r], all[0]);
            return -1;
        }
    return 0;
}

/* ppv_envelope_digest of e, the envelope in hand, taken once (the check,
 * a retry and the result cache all need it); 0 out of memory. */
static uint64_t digest_once(mesh *m, const ppv_envelope *e) {
    if (!m->digest) m->digest = ppv_envelope_digest(e);
    return m->digest;
}

/* The leader's check of an INFER's envelope_digest_i64 (before any
 * collective): PPV_FAIL_NONE, or PPV-ENVELOPE with msg. */
static ppv_failure check_envelope_digest(mesh *m, const ppv_envelope *e, char *msg,
                                         size_t msglen) {
    /* a newer sender's digest covers fields this ppv filtered out: it
     * cannot be checked here, and is not held against the envelope */
    if (e->unknown_fields) return PPV_FAIL_NONE;
    if (e->envelope_digest_i64 == 0) {
        if (!m->o->envelope_digest) return PPV_FAIL_NONE;
        snprintf(msg, msglen,
                 "the envelope carries no envelope_digest_i64, and this run "
                 "requires one (--envelope-digest)");
        return PPV_FAIL_ENVELOPE;
    }
    uint64_t got = digest_once(m, e);
    if (!got) {
        snprintf(msg, msglen, "out of memory computing the envelope's digest");
        return PPV_FAIL_RULE;
    }
    if (got == (uint64_t)e->envelope_digest_i64) return PPV_FAIL_NONE;
    snprintf(msg, msglen,
             "envelope_digest_i64 %016" PRIx64 ", but what arrived digests to %016" PRIx64
             ": the envelope changed on its way (a bit of its metadata or tensors)",
             (uint64_t)e->envelope_digest_i64, got);
    return PPV_FAIL_ENVELOPE;
}

/* --worker-watchdog: bounds the wait for the next envelope by wall time,
 * naming the last header seen (on) or back to the timeout (off). */
static void watch_next_header(mesh *m, int on) {
    double w = m->o->worker_watchdog_s;
    if (w <= 0 || !m->t->ops->set_wait) return;
    if (!on) {
        m->t->ops->set_wait(m->t->impl, 0, NULL);
        return;
    }
    char why[384];
    if (m->last_header[0] < 0)
        snprintf(why, sizeof why, "--worker-watchdog %g: mesh rank %d waits for its first "
                 "envelope", w, m->mr);
    else
        snprintf(why, sizeof why,
                 "--worker-watchdog %g: mesh rank %d waits for the next envelope; the last "
                 "header it saw: call_id %" PRId64 ", chunk_index %" PRId64 ", cache_epoch %" PRId64,
                 w, m->mr, m->last_header[0], m->last_header[1], m->last_header[2]);
    m->t->ops->set_wait(m->t->impl, w, why);
}

/* The leader refuses an envelope it received: one error result for an
 * INFER, and ERROR to the mesh so no worker waits. */
static void leader_reject(mesh *m, const int64_t *header, ppv_failure cause, const char *why) {
    ppv_envelope ids;
    ppv_envelope_init(&ids);
    ids.call_id = header[1];
    ids.chunk_index = header[2];
    ids.cache_epoch = header[3];
    m->e = &ids;
    if (header[0] == PPV_PP_INFER) {
        ppv_result r;
        ppv_result_init(&r, &ids);
        r.ok = 0;
        char text[1024];
        if (cause == PPV_FAIL_ORDER) /* the contract names it: an order violation */
            snprintf(text, sizeof text, "%s: the leader refused the envelope's ids (%s)",
                     ppv_failure_id(cause), why);
        else if (cause == PPV_FAIL_ENVELOPE) /* the wire's fault, not the leader's */
            snprintf(text, sizeof text, "%s: the leader refused the envelope (%s)",
                     ppv_failure_id(cause), why);
        else
            snprintf(text, sizeof text,
                     "%s: the leader rejected the envelope after receiving it "
                     "(%s: %s)",
                     ppv_failure_id(PPV_FAIL_FM23), ppv_failure_id(cause), why);
        size_t len =
            strlen(text) < sizeof r.error_message - 1 ? strlen(text) : sizeof r.error_message - 1;
        memcpy(r.error_message, text, len); /* the field's 255 bytes: a long reason is cut */
        r.error_message[len] = 0;
        ppv_frame f;
        char msg[256];
        if (ppv_result_frame(&r, &f, msg, sizeof msg) == PPV_FAIL_NONE) {
            int rc = pp_send_frame(m->t, m->rank, 0, &f, "error result");
            ppv_frame_free(&f);
            if (rc)
                pp_transport_error(m->c, m->t, where(m, PP_GROUP_WORLD), rc, "the error result");
        }
    } else {
        pp_fail(m->c, m->t, where(m, PP_GROUP_WORLD), PPV_FAIL_FM23, PPV_POINT_LEADER,
                "the leader rejected a %s envelope after receiving it (%s: %s)",
                ppv_pp_action_name(header[0]), ppv_failure_id(cause), why);
    }
    if (m->n > 1) {
        int64_t err_header[PPV_FRAME_HEADER] = {
            PPV_PP_ERROR, header[1], header[2], header[3], 0, 1, 0};
        int comm = group_comm(m, PP_GROUP_MESH, PP_GROUP_MESH, "the ERROR broadcast");
        int rc = m->t->ops->broadcast(m->t->impl, m->rank, err_header, sizeof err_header, 0, comm,
                                      "ERROR");
        if (rc) pp_transport_error(m->c, m->t, where(m, PP_GROUP_MESH), rc, "the ERROR broadcast");
    }
    m->e = NULL;
}

/* Sends a result frame to stage 0. */
static int send_result(mesh *m, const ppv_result *r) {
    ppv_frame f;
    char msg[512];
    ppv_failure mode = ppv_result_frame(r, &f, msg, sizeof msg);
    if (mode != PPV_FAIL_NONE) {
        pp_fail(m->c, m->t, where(m, PP_GROUP_WORLD), mode, PPV_POINT_LEADER,
                "the leader cannot frame its result: %s", msg);
        return -1;
    }
    int rc = pp_send_frame(m->t, m->rank, 0, &f, "result");
    uint64_t sent = 0; /* what the buffered link now holds of it */
    for (int i = 0; i < f.ntensors; i++)
        sent += ppv_tensor_bytes(f.tensors[i]);
    ppv_frame_free(&f);
    if (rc) pp_transport_error(m->c, m->t, where(m, PP_GROUP_WORLD), rc, "sending a result");
    else pp_mem(m->c, m->t, m->c->nranks, PPV_MEM_LINK, (int64_t)sent, r->chunk_index, r->call_id);
    return rc;
}

/* Keeps a copy of r (latents_out included) in k; -1 out of memory. */
static int keep(mesh *m, kept *k, const ppv_result *r) {
    size_t n = ppv_tensor_bytes(&r->latents_out);
    if (n > k->cap) {
        ppv_bf16 *d = realloc(k->data, n);
        if (!d) return -1;
        pp_mem(m->c, m->t, m->rank, PPV_MEM_RESULT_CACHE, (int64_t)(n - k->cap), r->chunk_index,
               r->call_id);
        k->data = d;
        k->cap = n;
    }
    k->r = *r;
    if (n) memcpy(k->data, r->latents_out.data, n);
    k->r.latents_out.data = n ? k->data : NULL;
    k->has = 1;
    return 0;
}

/* Keeps r as keep does, but takes the buffer *out that holds its
 * latents_out (bytes large) instead of copying it, and gives k's old one
 * back in *out for the next chunk; keep's copy when the sizes differ. */
static int keep_taking(mesh *m, kept *k, const ppv_result *r, ppv_bf16 **out, size_t bytes) {
    if (!k->data || k->cap != bytes || r->latents_out.data != *out ||
        ppv_tensor_bytes(&r->latents_out) > bytes)
        return keep(m, k, r);
    ppv_bf16 *old = k->data;
    k->r = *r;
    k->data = *out;
    *out = old;
    k->has = 1;
    return 0;
}

/* An INFER with the ids of the call the leader answered last: a retry.
 * The same envelope is answered from the result cache (never run again:
 * the KV cache must not change twice for one call_id); another is an
 * order violation. 1 when e was a retry (answered, or refused with *mode),
 * else 0. */
static int retry(mesh *m, const ppv_envelope *e, ppv_failure *mode, char *msg, size_t msglen) {
    const ppv_result *last = &m->last_answer.r;
    if (!m->last_answer.has || e->action != PPV_PP_INFER || e->call_id != last->call_id ||
        e->chunk_index != last->chunk_index || e->cache_epoch != last->cache_epoch)
        return 0;
    uint64_t d = digest_once(m, e);
    if (!d) {
        *mode = PPV_FAIL_RULE;
        snprintf(msg, msglen, "out of memory computing the envelope's digest");
        return 1;
    }
    if (d != m->last_answer.env_digest) {
        *mode = PPV_FAIL_ORDER;
        snprintf(msg, msglen,
                 "call_id %" PRId64 " again, with another envelope (digest %016" PRIx64
                 ", the call run had %016" PRIx64 "): a retry repeats its call exactly",
                 e->call_id, d, m->last_answer.env_digest);
        return 1;
    }
    m->c->rep->retried++;
    if (send_result(m, last)) *mode = PPV_FAIL_COLLECTIVE; /* recorded by send_result */
    return 1;
}

/* The leader's answer to one INFER, with the OM-09, duplicate-result and
 * reorder-results faults where they are asked for. */
static int answer(mesh *m, const ppv_envelope *e, ppv_bf16 **next_out, int64_t used_frame) {
    ppv_bf16 *out = *next_out; /* the chunk's output; *next_out may become another buffer */
    const ppv_pp_options *o = m->o;
    ppv_result r;
    ppv_result_init(&r, e);
    r.observed_generator_calls = m->calls;
    r.mesh_current_start_frame = used_frame;
    r.latents_out = e->latents_in;
    r.latents_out.data = out;
    r.output_digest_i64 = (int64_t)ppv_digest_words(out, ppv_tensor_bytes(&r.latents_out));
    /* the mesh's time on the chunk, and how long it had waited for it */
    int64_t now = ppv_transport_clock_ns(m->t);
    r.tB_ms = (double)(now - m->t_arrived) / 1e6;
    r.t_mesh_idle_ms = (double)m->idle_ns / 1e6;
    if (o->inject == PPV_INJECT_OM09 && e->cache_epoch > 0 && m->stale_data && !m->stale_sent) {
        m->stale_sent = 1; /* delayed: the old epoch's result arrives after the cut */
        if (send_result(m, &m->stale)) return -1;
    }
    if (keep_taking(m, &m->last_answer, &r, next_out, m->out_bytes) < 0) {
        gen_error(m, -1, "the result cache", "out of memory");
        return -1;
    }
    if (!(m->last_answer.env_digest = digest_once(m, e))) {
        gen_error(m, -1, "the result cache", "out of memory");
        return -1;
    }
    if (o->inject == PPV_INJECT_REORDER_RESULTS && e->chunk_index == PP_INJECT_CHUNK &&
        m->t->ops->probe) {
        /* the next envelope is here: this result waits until its answer */
        int arrived = 0;
        int rc = m->t->ops->probe(m->t->impl, m->rank, 0, 0, &arrived);
        if (rc) {
            pp_transport_error(m->c, m->t, where(m, PP_GROUP_WORLD), rc, "probing for an envelope");
            return -1;
        }
        if (arrived) {
            if (keep(m, &m->held_back, &r) < 0) {
                gen_error(m, -1, "a held result", "out of memory");
                return -1;
            }
            m->t_answered = ppv_transport_clock_ns(m->t);
            return 0;
        }
    }
    if (send_result(m, &r)) return -1;
    if (m->held_back.has) { /* reorder-results: the one held back, after */
        m->held_back.has = 0;
        if (send_result(m, &m->held_back.r)) return -1;
    }
    m->t_answered = ppv_transport_clock_ns(m->t);
    if (o->inject == PPV_INJECT_DUPLICATE && e->chunk_index == 0 && send_result(m, &r)) return -1;
    if (o->inject == PPV_INJECT_OM09 && e->cache_epoch == 0) {
        size_t n = ppv_tensor_bytes(&r.latents_out);
        ppv_bf16 *copy = realloc(m->stale_data, n);
        if (copy) {
            if (n != m->stale_bytes)
                pp_mem(m->c, m->t, m->rank, PPV_MEM_RESULT_CACHE,
                       (int64_t)n - (int64_t)m->stale_bytes, r.chunk_index, r.call_id);
            m->stale_bytes = n;
            memcpy(copy, out, n);
            m->stale = r;
            m->stale.latents_out.data = m->stale_data = copy;
        }
    }
    return 0;
}

/* The envelope in hand is done with: freed, its bytes given back. */
static void drop_envelope(mesh *m, ppv_envelope *e, pp_received *rm) {
    if (m->e_bytes)
        pp_mem(m->c, m->t, m->rank, PPV_MEM_ENVELOPES, -(int64_t)m->e_bytes, rm->header[2],
               rm->header[1]);
    m->e_bytes = 0;
    pp_envelope_free(e);
    pp_received_free(rm);
}

void pp_mesh(pp_ctx *c, ppv_transport *t, int32_t rank) {
    const ppv_pp_options *o = c->o;
    ppv_bf16 *out = NULL;
    int charged = 0; /* the chunk buffers are charged */
    mesh m;
    memset(&m, 0, sizeof m);
    m.c = c;
    m.t = t;
    m.o = o;
    m.rank = rank;
    m.mr = rank - 1;
    m.n = o->mesh;
    m.leader = m.mr == 0;
    m.last = m.mr == m.n - 1; /* the rank faults are put in (the leader on PP0) */
    m.order = ppv_contract_order_start();
    m.t_answered = -1;
    m.last_header[0] = m.last_header[1] = m.last_header[2] = -1;
    m.shard_rank = m.last && m.n > 1 && o->inject == PPV_INJECT_OM12 ? 0 : m.mr;
    m.fp_every = pp_fingerprint_every(o);
    if (m.fp_every) { /* the baseline before create: a wrong shard is named as one */
        m.fp_base = malloc((size_t)m.n * sizeof *m.fp_base);
        m.fp_all = malloc((size_t)m.n * sizeof *m.fp_all);
        if (!m.fp_base || !m.fp_all) {
            gen_error(&m, -1, "the shard fingerprints", "out of memory");
            goto done;
        }
        if (check_fingerprints(&m, NULL) < 0) goto done;
    }
    if (!o->control_only && gen_create(&m) < 0) goto done;
    size_t vals = (size_t)PP_FRAMES_PER_CHUNK * PP_LATENT_CHANNELS * (size_t)(o->height / 8) *
                  (size_t)(o->width / 8);
    out = malloc(vals * sizeof *out);
    m.out_bytes = vals * sizeof *out;
    if (m.leader) { /* the result cache's buffer, taken in turns with out */
        m.last_answer.data = malloc(m.out_bytes);
        m.last_answer.cap = m.last_answer.data ? m.out_bytes : 0;
    }
    m.x = malloc(vals * sizeof *m.x);
    m.y = malloc(vals * sizeof *m.y);
    m.gathered = malloc((size_t)m.n * sizeof *m.gathered);
    m.digests = malloc((size_t)m.n * sizeof *m.digests);
    if (!out || !m.x || !m.y || !m.gathered || !m.digests) {
        gen_error(&m, -1, "a chunk's buffers", "out of memory");
        goto done;
    }
    /* charged in the order they were allocated */
    charged = 1;
    pp_mem(c, t, rank, PPV_MEM_BUFFERS, (int64_t)m.out_bytes, -1, -1);
    pp_mem(c, t, rank, PPV_MEM_RESULT_CACHE, (int64_t)m.last_answer.cap, -1, -1);
    pp_mem(c, t, rank, PPV_MEM_BUFFERS, 2 * (int64_t)m.out_bytes, -1, -1);
    for (;;) {
        ppv_envelope e;
        pp_received rm;
        ppv_failure mode;
        char msg[768];
        memset(&e, 0, sizeof e);
        m.digest = 0; /* a new envelope */
        int rc;
        if (m.leader) {
            watch_next_header(&m, 1);
            rc = pp_recv_envelope(t, rank, 0, &rm, &e, &mode, msg, sizeof msg);
            watch_next_header(&m, 0);
            if (!rc) { /* off the link, into the leader's hands */
                m.e_bytes = pp_envelope_bytes(&e);
                pp_mem(c, t, c->nranks, PPV_MEM_LINK, -(int64_t)m.e_bytes, rm.header[2], rm.header[1]);
                pp_mem(c, t, rank, PPV_MEM_ENVELOPES, (int64_t)m.e_bytes, rm.header[2], rm.header[1]);
            }
            if (!rc) memcpy(m.last_header, rm.header + 1, sizeof m.last_header);
            if (!rc) pp_note_ids(c, rank, rm.header);
            if (!rc && mode == PPV_FAIL_NONE)
                pp_note_unknown(c, e.unknown_fields, e.unknown_field, e.call_id);
            /* the envelope's digest from the text as it arrived: when that
             * is the digest it carries, the text is the one its sender
             * digested, and the canonical text need not be made again
             * (digest_once makes it when they differ) */
            if (!rc && mode == PPV_FAIL_NONE && e.action == PPV_PP_INFER &&
                e.envelope_digest_i64 && !e.unknown_fields &&
                pp_envelope_digest_text(rm.meta, (size_t)rm.header[6],
                                        (const ppv_tensor *const *)rm.order, rm.norder) ==
                    (uint64_t)e.envelope_digest_i64)
                m.digest = (uint64_t)e.envelope_digest_i64;
            m.t_arrived = ppv_transport_clock_ns(t);
            m.idle_ns = m.t_answered >= 0 ? m.t_arrived - m.t_answered : 0;
            if (!rc && o->bug == PPV_PP_BUG_LEADER_DIES && rm.header[0] == PPV_PP_INFER &&
                e.chunk_index == PP_INJECT_CHUNK) { /* throws: no answer, no broadcast */
                drop_envelope(&m, &e, &rm);
                break;
            }
            if (rc) {
                pp_transport_error(c, t, where(&m, PP_GROUP_WORLD), rc, "waiting for an envelope");
                drop_envelope(&m, &e, &rm);
                break;
            }
            if (mode == PPV_FAIL_NONE && !pp_skipped(c, PPV_POINT_LEADER) &&
                retry(&m, &e, &mode, msg, sizeof msg)) {
                if (mode == PPV_FAIL_NONE) { /* answered from the result cache */
                    drop_envelope(&m, &e, &rm);
                    continue;
                }
                if (mode == PPV_FAIL_COLLECTIVE) { /* the send failed, and said why */
                    drop_envelope(&m, &e, &rm);
                    break;
                }
            }
            if (mode == PPV_FAIL_NONE && !pp_skipped(c, PPV_POINT_LEADER))
                mode = ppv_envelope_check(&e, &m.order, msg, sizeof msg);
            if (mode == PPV_FAIL_NONE && e.action == PPV_PP_INFER &&
                e.conditioning_embeds.dims[2] != o->model.cond_dim) {
                mode = PPV_FAIL_FM07;
                snprintf(msg, sizeof msg,
                         "conditioning_embeds' last dimension is %" PRId64
                         ", the generator's cond_dim %d",
                         e.conditioning_embeds.dims[2], o->model.cond_dim);
            }
            if (mode == PPV_FAIL_NONE && e.action == PPV_PP_INFER &&
                (e.height != o->height || e.width != o->width)) {
                mode = PPV_FAIL_FM07;
                snprintf(msg, sizeof msg, "a %" PRId64 "x%" PRId64 " chunk, the mesh runs %dx%d",
                         e.height, e.width, o->height, o->width);
            }
            if (mode == PPV_FAIL_NONE && e.action == PPV_PP_INFER &&
                !pp_skipped(c, PPV_POINT_LEADER))
                mode = check_envelope_digest(&m, &e, msg, sizeof msg);
            if (mode != PPV_FAIL_NONE) {
                leader_reject(&m, rm.header, mode, msg);
                drop_envelope(&m, &e, &rm);
                break;
            }
            ppv_contract_order_advance(&m.order, &e);
            if (m.n > 1) {
                int comm = group_comm(&m, PP_GROUP_MESH, PP_GROUP_MESH, "the envelope broadcast");
                if ((rc = pp_bcast_send(t, rank, comm, &rm))) {
                    pp_transport_error(c, t, where(&m, PP_GROUP_MESH), rc,
                                       "the envelope broadcast");
                    drop_envelope(&m, &e, &rm);
                    break;
                }
            }
        } else {
            int comm = group_comm(&m, PP_GROUP_MESH, PP_GROUP_MESH, "the envelope broadcast");
            watch_next_header(&m, 1);
            rc = pp_bcast_recv(t, rank, comm, &rm, &e, &mode, msg, sizeof msg);
            watch_next_header(&m, 0);
            if (!rc) { /* this rank's copy of the leader's */
                m.e_bytes = pp_envelope_bytes(&e);
                pp_mem(c, t, rank, PPV_MEM_ENVELOPES, (int64_t)m.e_bytes, rm.header[2], rm.header[1]);
            }
            if (!rc) memcpy(m.last_header, rm.header + 1, sizeof m.last_header);
            if (!rc) pp_note_ids(c, rank, rm.header);
            if (rc)
                pp_transport_error(c, t, where(&m, PP_GROUP_MESH), rc, "the envelope broadcast");
            if (!rc && mode != PPV_FAIL_NONE)
                pp_fail(c, t, where(&m, PP_GROUP_MESH), mode, PPV_POINT_LEADER,
                        "a worker cannot read the leader's broadcast: %s", msg);
            if (rc || mode != PPV_FAIL_NONE || rm.header[0] == PPV_PP_ERROR ||
                rm.header[0] == PPV_PP_SHUTDOWN) {
                drop_envelope(&m, &e, &rm);
                break; /* ERROR: the leader gave up on this envelope; SHUTDOWN: done */
            }
        }
        if (e.action != PPV_PP_INFER) {
            int stop = e.action == PPV_PP_SHUTDOWN;
            drop_envelope(&m, &e, &rm);
            if (stop) break;
            continue; /* NOOP */
        }
        m.e = &e;
        if (m.last && o->inject == PPV_INJECT_OM11 && e.chunk_index == PP_INJECT_CHUNK)
            ((unsigned char *)e.latents_in.data)[0] ^= 1;
        m.wrong_group = m.last && o->inject == PPV_INJECT_OM08 && e.chunk_index == PP_INJECT_CHUNK;
        rc = check_digest(&m, &rm);
        if (!rc && m.last && o->bug == PPV_PP_BUG_SHARD_RELOAD && e.chunk_index == PP_INJECT_CHUNK)
            rc = reload_shard(&m);
        if (!rc && m.fp_every && (e.init_cache || m.chunks_run % m.fp_every == 0))
            rc = check_fingerprints(&m, &e);
        if (!rc && m.last && o->inject == PPV_INJECT_OM05) {
            /* the flag-gated collective: only this rank's flag turns it on */
            uint64_t mine = 0, *all = malloc((size_t)m.n * sizeof *all);
            rc = all ? t->ops->allgather(t->impl, rank, &mine, all, sizeof mine, c->mesh_comm,
                                         "flag-gated digest")
                     : -1;
            free(all);
            if (rc)
                pp_transport_error(c, t, where(&m, PP_GROUP_MESH), rc, "a flag-gated collective");
        }
        if (e.init_cache) m.frame_pos = e.current_start_frame; /* a new stream */
        int64_t used_frame = m.frame_pos;
        m.adhoc = m.last && o->inject == PPV_INJECT_OM06 && e.chunk_index == PP_INJECT_CHUNK;
        m.nccoll = 0;
        m.in_block = 1;
        if (!rc) rc = run_chunk(&m, &e, out);
        m.in_block = 0;
        if (!rc) {
            m.frame_pos += PP_FRAMES_PER_CHUNK;
            c->rep->generator_calls += m.leader ? m.calls : 0;
            if (m.leader) rc = answer(&m, &e, &out, used_frame);
        }
        m.e = NULL;
        drop_envelope(&m, &e, &rm);
        if (rc) break;
    }
done:
    if (charged) {
        pp_mem(c, t, rank, PPV_MEM_BUFFERS, -3 * (int64_t)m.out_bytes, -1, -1);
        pp_mem(c, t, rank, PPV_MEM_RESULT_CACHE,
               -(int64_t)(m.last_answer.cap + m.held_back.cap + m.stale_bytes), -1, -1);
    }
    free(out);
    free(m.x);
    free(m.y);
    free(m.gathered);
    free(m.digests);
    free(m.fp_base);
    free(m.fp_all);
    free(m.stale_data);
    free(m.last_answer.data);
    free(m.held_back.data);
    if (m.gen) {
        char err[512] = "";
        const ppv_generator_site *was = site_enter(&m, "destroy");
        int rc = c->gen->destroy(m.gen, err, sizeof err);
        pp_site_set(was);
        gen_gone(&m);
        if (rc) gen_error(&m, rc, "destroy", err);
    }
    pp_gen_bytes_close(&m.gb);
}
