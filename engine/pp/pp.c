/* pp.c - the PP inference pipeline on the mock transport: options, the
 * break-it matrix's table, the startup handshake, failures, the planned
 * envelopes, and the run that puts stage 0 (rank 0) and the mesh (ranks
 * 1..mesh; rank 1 leads) into one deterministic world.
 *
 * The stage-0/leader link is modelled as the users' send and receive
 * threads with their queues: sends on it are buffered (the world runs
 * eager), and the only backpressure is stage 0's own D_in/D_out bounds,
 * which is what those systems have. Collectives block until every member
 * arrives, as NCCL's do.
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../transport/proc_module.h"
#include "pp_internal.h"

/* ---- the break-it matrix's table ------------------------------------------------ */

static const struct {
    const char *token, *text;
    ppv_failure mode;
    ppv_pp_point point;
} injections[] = {
#define PPV_PP_INJECT(NAME, token, mode, point, text) {token, text, PPV_FAIL_##mode, PPV_POINT_##point},
#include "inject.def"
#undef PPV_PP_INJECT
};

const char *ppv_pp_inject_token(ppv_pp_inject i) {
    return (unsigned)i < PPV_INJECT_COUNT ? injections[i].token : "?";
}
const char *ppv_pp_inject_text(ppv_pp_inject i) {
    return (unsigned)i < PPV_INJECT_COUNT ? injections[i].text : "?";
}
ppv_failure ppv_pp_inject_mode(ppv_pp_inject i) {
    return (unsigned)i < PPV_INJECT_COUNT ? injections[i].mode : PPV_FAIL_NONE;
}
ppv_pp_point ppv_pp_inject_caught_by(ppv_pp_inject i) {
    return (unsigned)i < PPV_INJECT_COUNT ? injections[i].point : PPV_POINT_NONE;
}
int ppv_pp_inject_lookup(const char *token) {
    for (int i = 0; i < PPV_INJECT_COUNT; i++)
        if (!strcmp(token, injections[i].token)) return i;
    return -1;
}

const char *ppv_pp_point_name(ppv_pp_point p) {
    static const char *const names[] = {"none",       "stage0-send", "leader",   "mesh-running",
                                        "stage0-result", "handshake", "group-check",
                                        "input-digest",  "transport", "watchdog"};
    return (unsigned)p < PPV_POINT_COUNT ? names[p] : "?";
}

const char *pp_group_name(pp_group g) {
    return g == PP_GROUP_MESH ? "mesh" : "world";
}

/* ---- options ---------------------------------------------------------------------- */

ppv_pp_options ppv_pp_defaults(void) {
    ppv_pp_options o;
    memset(&o, 0, sizeof o);
    o.mesh = 2;
    o.chunks = 8;
    o.steps = 4;
    o.recompute_every = 1;
    o.kv_window = 6;
    o.d_in = o.d_out = 2;
    o.height = o.width = 32;
    o.cond_len = 4;
    o.model = ppv_gen_config_default();
    o.inject = PPV_INJECT_NONE;
    o.policy.kind = PPV_POLICY_RR;
    o.policy.depth = 3;
    o.watchdog_steps = 100000;
    o.timeout_s = 60;
    return o;
}

static int cut_at(const ppv_pp_options *o, int32_t k) {
    for (int32_t i = 0; i < o->ncuts; i++)
        if (o->cuts[i] == k) return 1;
    return 0;
}

int ppv_pp_options_check(const ppv_pp_options *o, char *err, size_t errlen) {
    if (o->mesh < 1 || o->mesh > 64) return ppv_errf(err, errlen, "--mesh %d: 1 to 64", o->mesh);
    if (o->model.n_heads < 1 || o->model.n_heads % o->mesh)
        return ppv_errf(err, errlen,
                        "--mesh %d must divide the generator's %d heads (tensor parallelism "
                        "splits them)",
                        o->mesh, o->model.n_heads);
    if (!o->replay && (o->chunks < 1 || o->chunks > 1000000))
        return ppv_errf(err, errlen, "--chunks %d: 1 to 1000000", o->chunks);
    if (o->steps < 1 || o->steps > 1000)
        return ppv_errf(err, errlen, "--steps %d: 1 to 1000", o->steps);
    if (o->recompute_every < 1)
        return ppv_errf(err, errlen, "--recompute-every %d: at least 1", o->recompute_every);
    if (o->kv_window < PP_FRAMES_PER_CHUNK || o->kv_window % PP_FRAMES_PER_CHUNK ||
        o->kv_window > 3000)
        return ppv_errf(err, errlen,
                        "--kv-window %d: a multiple of %d latent frames (a chunk), 3 to 3000",
                        o->kv_window, PP_FRAMES_PER_CHUNK);
    if (o->d_in < 1 || o->d_out < 1 || o->d_in > 1024 || o->d_out > 1024)
        return ppv_errf(err, errlen, "--d-in %d and --d-out %d: 1 to 1024", o->d_in, o->d_out);
    if (o->height < 16 || o->width < 16 || o->height % 16 || o->width % 16 || o->height > 4096 ||
        o->width > 4096)
        return ppv_errf(err, errlen, "height %d and width %d: multiples of 16, 16 to 4096",
                        o->height, o->width);
    if (o->cond_len < 1 || o->cond_len > 4096)
        return ppv_errf(err, errlen, "conditioning tokens %d: 1 to 4096", o->cond_len);
    if (o->ncuts < 0 || o->ncuts > PPV_PP_MAX_CUTS)
        return ppv_errf(err, errlen, "at most %d hard cuts", PPV_PP_MAX_CUTS);
    for (int32_t i = 0; i < o->ncuts; i++) {
        if (o->cuts[i] < 1 || (!o->replay && o->cuts[i] >= o->chunks))
            return ppv_errf(err, errlen,
                            "--hard-cut-at %d: a cut goes before a chunk 1..%d (chunk 0 starts "
                            "the first epoch)",
                            o->cuts[i], o->chunks - 1);
        if (i && o->cuts[i] <= o->cuts[i - 1])
            return ppv_errf(err, errlen, "--hard-cut-at: chunks in increasing order");
    }
    if ((unsigned)o->inject >= PPV_INJECT_COUNT)
        return ppv_errf(err, errlen, "unknown injection %d", (int)o->inject);
    if (o->replay && o->inject != PPV_INJECT_NONE)
        return ppv_errf(err, errlen, "a replay takes no --inject: the recording is stage 0");
    int on_chunk1 = o->inject != PPV_INJECT_NONE && o->inject != PPV_INJECT_OM04 &&
                    o->inject != PPV_INJECT_OM05 && o->inject != PPV_INJECT_OM09;
    if (on_chunk1 && (o->chunks < 2 || cut_at(o, PP_INJECT_CHUNK)))
        return ppv_errf(err, errlen,
                        "--inject %s acts on chunk %d, the second of the first epoch: it needs "
                        "--chunks 2 or more and no hard cut at %d",
                        ppv_pp_inject_token(o->inject), PP_INJECT_CHUNK, PP_INJECT_CHUNK);
    if (o->inject == PPV_INJECT_OM09 && o->ncuts == 0)
        return ppv_errf(err, errlen,
                        "--inject OM-09 delivers a result after a hard cut: give --hard-cut-at");
    if ((o->inject == PPV_INJECT_OM11 || o->inject == PPV_INJECT_OM05 ||
         o->inject == PPV_INJECT_OM04 || o->inject == PPV_INJECT_OM08) &&
        o->mesh < 2)
        return ppv_errf(err, errlen, "--inject %s needs a mesh of 2 or more ranks",
                        ppv_pp_inject_token(o->inject));
    if (o->policy.kind == PPV_POLICY_REPLAY && (!o->policy.replay || o->policy.nreplay < 0))
        return ppv_errf(err, errlen, "a replay policy needs its decisions");
    return 0;
}

/* ---- failures ---------------------------------------------------------------------- */

void pp_fail(pp_ctx *c, ppv_transport *t, pp_where w, ppv_failure mode, ppv_pp_point point,
             const char *fmt, ...) {
    if (!c->failed) {
        ppv_pp_report *r = c->rep;
        c->failed = 1;
        r->failure = mode;
        r->caught_by = point;
        r->failed_rank = w.rank;
        int n;
        if (w.e)
            n = snprintf(r->message, sizeof r->message,
                         "%s (rank %d, group %s, call_id %" PRId64 ", chunk_index %" PRId64
                         ", cache_epoch %" PRId64 "): ",
                         ppv_failure_id(mode), w.rank, pp_group_name(w.group), w.e->call_id,
                         w.e->chunk_index, w.e->cache_epoch);
        else
            n = snprintf(r->message, sizeof r->message,
                         "%s (rank %d, group %s, before the first envelope): ",
                         ppv_failure_id(mode), w.rank, pp_group_name(w.group));
        if (n > 0 && (size_t)n < sizeof r->message) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(r->message + n, sizeof r->message - (size_t)n, fmt, ap);
            va_end(ap);
        }
        ppv_world_fail(t, w.rank, "%s", r->message);
    }
    if (t->ops->abort) t->ops->abort(t->impl, w.rank, "a pipeline check failed");
}

void pp_transport_error(pp_ctx *c, ppv_transport *t, pp_where w, int err, const char *what) {
    if (err == PPV_ERR_ABORTED) return; /* another rank failed and said why */
    pp_fail(c, t, w, PPV_FAIL_COLLECTIVE, PPV_POINT_TRANSPORT,
            "%s: %s", what,
            err == PPV_ERR_MISMATCH ? "the ranks disagree on this call (kind, root, size or "
                                      "group): under NCCL this is a hang"
                                    : "the transport refused the call");
}

/* ---- the handshake ----------------------------------------------------------------- */

/* The keys every rank's plan must agree on; flag keys gate collectives
 * (FM-03 when they differ), the rest are the plan (FM-01). */
#define HANDSHAKE_KEYS(X)                                                                          \
    X(mesh, 0) X(chunks, 0) X(steps, 0) X(kv_recompute, 0) X(recompute_every, 0) X(kv_window, 0)  \
    X(height, 0) X(width, 0) X(cond_len, 0) X(layers, 0) X(d_model, 0) X(n_heads, 0) X(d_ff, 0)  \
    X(cond_dim, 0) X(model_seed, 0) X(control_only, 0) X(extra_digest_collective, 1)

enum {
#define KEY_ENUM(name, flag) HK_##name,
    HANDSHAKE_KEYS(KEY_ENUM)
#undef KEY_ENUM
        HK_COUNT
};

static const struct {
    const char *name;
    int gates_collective;
} hk_desc[] = {
#define KEY_DESC(name, flag) {#name, flag},
    HANDSHAKE_KEYS(KEY_DESC)
#undef KEY_DESC
};

/* This rank's record: its role (0 stage 0, 1 leader, 2 worker) and keys. */
static void handshake_record(const pp_ctx *c, int32_t rank, int64_t *rec) {
    const ppv_pp_options *o = c->o;
    int last = rank == o->mesh && rank >= 2;
    rec[0] = rank == 0 ? 0 : rank == 1 ? 1 : 2;
    int64_t *k = rec + 1;
    k[HK_mesh] = o->mesh;
    k[HK_chunks] = o->replay ? o->nreplay : o->chunks;
    k[HK_steps] = o->steps + (last && o->inject == PPV_INJECT_OM04);
    k[HK_kv_recompute] = o->kv_recompute;
    k[HK_recompute_every] = o->recompute_every;
    k[HK_kv_window] = o->kv_window;
    k[HK_height] = o->height;
    k[HK_width] = o->width;
    k[HK_cond_len] = o->cond_len;
    k[HK_layers] = o->model.layers;
    k[HK_d_model] = o->model.d_model;
    k[HK_n_heads] = o->model.n_heads;
    k[HK_d_ff] = o->model.d_ff;
    k[HK_cond_dim] = o->model.cond_dim;
    k[HK_model_seed] = (int64_t)o->model.seed;
    k[HK_control_only] = o->control_only;
    k[HK_extra_digest_collective] = last && o->inject == PPV_INJECT_OM05;
}

int pp_handshake(pp_ctx *c, ppv_transport *t, int32_t rank) {
    enum { N = 1 + HK_COUNT };
    int64_t mine[N], *all = malloc((size_t)c->nranks * sizeof mine);
    pp_where w = {rank, PP_GROUP_WORLD, NULL};
    if (!all) {
        pp_fail(c, t, w, PPV_FAIL_RULE, PPV_POINT_HANDSHAKE, "out of memory");
        return -1;
    }
    handshake_record(c, rank, mine);
    int rc = t->ops->allgather(t->impl, rank, mine, all, sizeof mine, 0, "handshake");
    if (rc) {
        pp_transport_error(c, t, w, rc, "the startup handshake");
        free(all);
        return -1;
    }
    if (pp_skipped(c, PPV_POINT_HANDSHAKE)) {
        free(all);
        return 0;
    }
    /* every rank finds the same difference; stage 0 reports it, the others
     * refuse to start */
    int bad = 0;
    char diff[768] = "";
    size_t at = 0;
    ppv_failure mode = PPV_FAIL_FM01;
    for (int32_t r = 0; r < c->nranks; r++) {
        const int64_t *rec = all + (size_t)r * N;
        int64_t role = r == 0 ? 0 : r == 1 ? 1 : 2;
        if (rec[0] != role) {
            bad = 1;
            at += (size_t)snprintf(diff + at, at < sizeof diff ? sizeof diff - at : 0,
                                   "%srank %d says role %" PRId64 ", expected %" PRId64,
                                   at ? "; " : "", r, rec[0], role);
        }
        for (int k = 0; k < HK_COUNT; k++)
            if (rec[1 + k] != all[1 + k]) {
                bad = 1;
                if (hk_desc[k].gates_collective) mode = PPV_FAIL_FM03;
                if (at < sizeof diff)
                    at += (size_t)snprintf(diff + at, sizeof diff - at,
                                           "%s%s: rank %d has %" PRId64 ", rank 0 has %" PRId64
                                           "%s",
                                           at ? "; " : "", hk_desc[k].name, r, rec[1 + k],
                                           all[1 + k],
                                           hk_desc[k].gates_collective
                                               ? " (a flag that gates a collective)"
                                               : "");
            }
    }
    free(all);
    if (!bad) return 0;
    if (rank == 0)
        pp_fail(c, t, w, mode, PPV_POINT_HANDSHAKE,
                "the startup handshake found ranks that disagree: %s", diff);
    return -1;
}

/* ---- the plan ---------------------------------------------------------------------- */

void pp_chunk_epoch(const ppv_pp_options *o, int32_t k, int64_t *epoch, int32_t *j) {
    int64_t e = 0;
    int32_t start = 0;
    for (int32_t i = 0; i < o->ncuts; i++)
        if (o->cuts[i] <= k) {
            e++;
            start = o->cuts[i];
        }
    *epoch = e;
    *j = k - start;
}

int pp_recomputes(const ppv_pp_options *o, int32_t j) {
    return o->kv_recompute && j > 0 && j % o->recompute_every == 0;
}

/* RNG tensors of stage 0's inputs (seed: the model's). */
#define KEY_COND(epoch) ((4ULL << 56) | (uint64_t)(epoch))
#define KEY_NOISE(chunk) ((5ULL << 56) | (uint64_t)(chunk))

static int tensor_alloc(ppv_tensor *t, ppv_dtype dtype, int rank, const int64_t *dims) {
    memset(t, 0, sizeof *t);
    t->dtype = dtype;
    t->rank = rank;
    memcpy(t->dims, dims, (size_t)rank * sizeof *dims);
    ppv_tensor probe = *t; /* ppv_tensor_bytes sizes a present tensor */
    probe.data = &probe;
    size_t n = ppv_tensor_bytes(&probe);
    t->data = ppv_block_take(n ? n : 1);
    return t->data ? 0 : -1;
}

void pp_envelope_free(ppv_envelope *e) {
    ppv_envelope_free_tensors(e);
}

/* n distinct-looking bf16 values in [1, 2) from one random draw: value i
 * from a multiplicative hash of (draw, i / 4), four values a hash, each
 * hash independent of the last. */
static void cheap_fill(ppv_bf16 *out, size_t n, uint64_t bits) {
    for (size_t i = 0; i < n; i += 4) {
        uint64_t x = (bits + i * 0x9e3779b97f4a7c15ULL) * 0xbf58476d1ce4e5b9ULL;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
        if (i + 4 <= n) { /* the four values in one store */
            uint64_t four = 0x3f803f803f803f80ULL | (x & 0x007f007f007f007fULL);
            memcpy(out + i, &four, sizeof four);
            continue;
        }
#endif
        for (size_t j = 0; j < 4 && i + j < n; j++)
            out[i + j] = (ppv_bf16)(0x3f80 | ((x >> (16 * j)) & 0x7f));
    }
}

int pp_plan_envelope(const pp_ctx *c, int32_t k, int64_t call_id, int64_t epoch,
                     int32_t chunk_in_epoch, const uint16_t *decoded, int64_t ndecoded,
                     ppv_envelope *e) {
    const ppv_pp_options *o = c->o;
    ppv_envelope_init(e);
    e->action = PPV_PP_INFER;
    e->call_id = call_id;
    e->chunk_index = k;
    e->cache_epoch = epoch;
    e->height = o->height;
    e->width = o->width;
    e->current_start_frame = (int64_t)chunk_in_epoch * PP_FRAMES_PER_CHUNK;
    e->do_kv_recompute = pp_recomputes(o, chunk_in_epoch);
    e->num_denoise_steps = o->steps;
    e->expected_generator_calls = ppv_expected_generator_calls(e->do_kv_recompute, o->steps);
    e->init_cache = e->reset_kv_cache = e->reset_crossattn_cache = chunk_in_epoch == 0;
    e->base_seed = (int64_t)o->model.seed;
    e->noise_scale = 1.0;
    uint64_t seed = o->model.seed;
    int64_t h8 = o->height / 8, w8 = o->width / 8;
    size_t frame = (size_t)(PP_LATENT_CHANNELS * h8 * w8);
    int64_t cd[3] = {1, o->cond_len, o->model.cond_dim};
    int64_t ld[5] = {1, PP_FRAMES_PER_CHUNK, PP_LATENT_CHANNELS, h8, w8};
    int64_t sd[1] = {o->steps};
    if (tensor_alloc(&e->conditioning_embeds, PPV_DTYPE_BF16, 3, cd) ||
        tensor_alloc(&e->latents_in, PPV_DTYPE_BF16, 5, ld) ||
        tensor_alloc(&e->current_denoising_step_list, PPV_DTYPE_I64, 1, sd))
        goto oom;
    ppv_bf16 *cond = e->conditioning_embeds.data, *lat = e->latents_in.data;
    if (o->control_only) {
        /* no model reads them: cheap values */
        cheap_fill(cond, (size_t)(cd[1] * cd[2]), ppv_rng_bits(seed, KEY_COND(epoch), 0));
        cheap_fill(lat, PP_FRAMES_PER_CHUNK * frame, ppv_rng_bits(seed, KEY_NOISE(k), 0));
    } else {
        for (int64_t i = 0; i < cd[1] * cd[2]; i++)
            cond[i] = ppv_bf16_from_f32(ppv_rng_normal(seed, KEY_COND(epoch), (uint64_t)i));
        for (size_t i = 0; i < PP_FRAMES_PER_CHUNK * frame; i++)
            lat[i] = ppv_bf16_from_f32(ppv_rng_normal(seed, KEY_NOISE(k), i));
    }
    int64_t *steps = e->current_denoising_step_list.data;
    for (int32_t s = 0; s < o->steps; s++)
        steps[s] = 1000 * (int64_t)(o->steps - s) / o->steps;
    if (e->do_kv_recompute) {
        int64_t nf = ndecoded < o->kv_window ? ndecoded : o->kv_window;
        int64_t fd[5] = {1, nf, PP_LATENT_CHANNELS, h8, w8};
        if (tensor_alloc(&e->context_frames, PPV_DTYPE_BF16, 5, fd)) goto oom;
        memcpy(e->context_frames.data, decoded + (size_t)(ndecoded - nf) * frame,
               (size_t)nf * frame * sizeof *decoded);
    }
    return 0;
oom:
    pp_envelope_free(e);
    return -1;
}

/* ---- the run ------------------------------------------------------------------------ */

static void rank_main(ppv_transport *t, int32_t rank, void *arg) {
    pp_ctx *c = arg;
    if (pp_handshake(c, t, rank) != 0) return;
    if (rank == 0)
        pp_stage0(c, t);
    else
        pp_mesh(c, t, rank);
}

static int run_world(pp_ctx *c, const ppv_policy *policy, ppv_world **wout, char *err,
                     size_t errlen) {
    ppv_world_options wo;
    memset(&wo, 0, sizeof wo);
    wo.nranks = c->nranks;
    wo.sem.kind = PPV_SEM_EAGER;
    wo.policy = *policy;
    wo.watchdog_steps = c->o->watchdog_steps;
    wo.stack_bytes = 256 * 1024;
    wo.fault = c->o->fault;
    ppv_world *w = ppv_world_new(&wo, err, errlen);
    if (!w) return -1;
    int32_t *mesh = malloc((size_t)c->o->mesh * sizeof *mesh);
    if (!mesh) {
        ppv_world_free(w);
        return ppv_errf(err, errlen, "out of memory");
    }
    for (int32_t r = 0; r < c->o->mesh; r++)
        mesh[r] = r + 1;
    c->mesh_comm = ppv_world_add_comm(w, mesh, c->o->mesh);
    free(mesh);
    if (c->mesh_comm < 0) {
        ppv_world_free(w);
        return ppv_errf(err, errlen, "out of memory");
    }
    if (ppv_world_run(w, rank_main, c, &c->rep->world) < 0) {
        ppv_errf(err, errlen, "%s", c->rep->world.message);
        ppv_world_free(w);
        return -1;
    }
    *wout = w;
    return 0;
}

/* The run on a job of processes: this process runs its rank; then stage
 * 0 (rank 0) broadcasts its report and the leader (rank 1) its generator
 * calls, so every process holds the whole report. A failure on any rank
 * ends the job there (the transport reports it), so a return is a
 * finished run. 0, or -1 with the reason. */
static int run_processes(pp_ctx *c, int64_t chunks, char *err, size_t errlen) {
    const ppv_pp_options *o = c->o;
    ppv_proc *p = o->proc;
    ppv_pp_report *r = c->rep;
    int32_t me = ppv_proc_rank(p);
    if (ppv_proc_size(p) != c->nranks)
        return ppv_errf(err, errlen,
                        "stage 0 and a mesh of %d are %d ranks but the job has %d "
                        "processes (mpirun -np %d)",
                        o->mesh, c->nranks, ppv_proc_size(p), c->nranks);
    if (o->policy.kind != PPV_POLICY_RR || o->fault.kind != PPV_FAULT_NONE || o->replay ||
        o->keep_kv || o->inject != PPV_INJECT_NONE)
        return ppv_errf(err, errlen,
                        "policies, faults, injections, replayed decisions and the "
                        "KV comparison are the mock's; on processes the transport orders the "
                        "ranks");
    if (!(o->timeout_s > 0)) return ppv_errf(err, errlen, "the timeout must be positive");
    int32_t *mesh = malloc((size_t)o->mesh * sizeof *mesh);
    if (!mesh) return ppv_errf(err, errlen, "out of memory");
    for (int32_t k = 0; k < o->mesh; k++)
        mesh[k] = k + 1;
    c->mesh_comm = ppv_proc_add_comm(p, mesh, o->mesh, err, errlen);
    free(mesh);
    if (c->mesh_comm < 0) return -1;
    ppv_proc_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.sem.kind = PPV_SEM_EAGER; /* the users' send and receive threads, as on the mock */
    cfg.timeout_s = o->timeout_s;
    ppv_transport t;
    if (ppv_proc_configure(p, &cfg, &t, err, errlen) < 0) return -1;
    rank_main(&t, me, c);
    ppv_proc_settle(p);
    const ppv_transport_ops *x = t.ops;
    int64_t counts[5] = {r->chunks_emitted, r->dropped_stale, r->dropped_duplicate, r->max_inflight,
                         r->max_ready};
    x->broadcast(t.impl, me, counts, sizeof counts, 0, 0, "stage 0's counts");
    r->chunks_emitted = counts[0];
    r->dropped_stale = counts[1];
    r->dropped_duplicate = counts[2];
    r->max_inflight = (int32_t)counts[3];
    r->max_ready = (int32_t)counts[4];
    x->broadcast(t.impl, me, &r->output_digest, sizeof r->output_digest, 0, 0, "output digest");
    size_t n = (size_t)chunks * sizeof(int64_t);
    x->broadcast(t.impl, me, r->expected_calls, n, 0, 0, "expected calls");
    x->broadcast(t.impl, me, r->observed_calls, n, 0, 0, "observed calls");
    x->broadcast(t.impl, me, r->emitted_call_ids, n, 0, 0, "emitted call ids");
    x->broadcast(t.impl, me, &r->generator_calls, sizeof r->generator_calls, 1, 0,
                 "generator calls");
    r->world.status = PPV_RUN_DONE;
    r->world.failed_rank = -1;
    return 0;
}

static void report_reset(ppv_pp_report *r) {
    ppv_world_result_free(&r->world);
    memset(&r->world, 0, sizeof r->world);
    r->ok = 0;
    r->failure = PPV_FAIL_NONE;
    r->caught_by = PPV_POINT_NONE;
    r->failed_rank = -1;
    r->message[0] = 0;
    r->chunks_emitted = 0;
    r->dropped_stale = r->dropped_duplicate = 0;
    r->output_digest = 0xcbf29ce484222325ULL;
    r->max_inflight = r->max_ready = 0;
    r->generator_calls = 0;
    r->noutputs = 0;
    for (int64_t k = 0; r->kv && k < r->nkv; k++) {
        free(r->kv[k]);
        r->kv[k] = NULL;
        r->kv_floats[k] = 0;
    }
}

int ppv_pp_run(const ppv_pp_options *o, ppv_pp_report **out, char *err, size_t errlen) {
    *out = NULL;
    ppv_pp_options withcut;
    if (o->fault.kind == PPV_FAULT_CUT) { /* the explorer's hard cut, kept in the trace */
        int64_t k = o->fault.message;
        int64_t total = o->replay ? o->nreplay : o->chunks;
        if (o->replay || k < 1 || k >= total)
            return ppv_errf(err, errlen, "a cut fault needs a planned chunk from 1 to %lld, "
                            "not %lld", (long long)total - 1, (long long)k);
        withcut = *o;
        int32_t i = withcut.ncuts;
        while (i > 0 && withcut.cuts[i - 1] > k) i--;
        if (!(i > 0 && withcut.cuts[i - 1] == k)) {
            if (withcut.ncuts == PPV_PP_MAX_CUTS)
                return ppv_errf(err, errlen, "at most %d hard cuts", PPV_PP_MAX_CUTS);
            memmove(&withcut.cuts[i + 1], &withcut.cuts[i],
                    (size_t)(withcut.ncuts - i) * sizeof *withcut.cuts);
            withcut.cuts[i] = (int32_t)k;
            withcut.ncuts++;
        }
        o = &withcut;
    }
    if (ppv_pp_options_check(o, err, errlen) < 0) return -1;
    int64_t chunks = o->replay ? o->nreplay : o->chunks;
    pp_ctx c;
    memset(&c, 0, sizeof c);
    c.o = o;
    c.nranks = 1 + o->mesh;
    ppv_genmodel *model = NULL;
    if (!o->control_only && !(model = ppv_genmodel_new(&o->model, err, errlen))) return -1;
    if (model && o->device && ppv_genmodel_set_device(model, o->device, err, errlen) < 0) {
        ppv_genmodel_free(model);
        return -1;
    }
    c.model = model;
    ppv_pp_report *r = calloc(1, sizeof *r);
    size_t frame = (size_t)(PP_LATENT_CHANNELS * (o->height / 8) * (o->width / 8));
    if (!r || !(r->expected_calls = calloc((size_t)chunks, sizeof *r->expected_calls)) ||
        !(r->observed_calls = calloc((size_t)chunks, sizeof *r->observed_calls)) ||
        !(r->emitted_call_ids = calloc((size_t)chunks, sizeof *r->emitted_call_ids)))
        goto oom;
    /* every decoded latent only when asked (--compare-kv): a long run keeps
     * just its digest */
    if (o->keep_kv &&
        !(r->outputs = malloc((size_t)chunks * PP_FRAMES_PER_CHUNK * frame * sizeof *r->outputs)))
        goto oom;
    if (o->keep_kv && (!(r->kv = calloc((size_t)chunks, sizeof *r->kv)) ||
                       !(r->kv_floats = calloc((size_t)chunks, sizeof *r->kv_floats))))
        goto oom;
    if (o->keep_kv) r->nkv = chunks;
    c.rep = r;
    if (!(c.last_ids = malloc((size_t)c.nranks * sizeof *c.last_ids))) goto oom;
    memset(c.last_ids, 0xff, (size_t)c.nranks * sizeof *c.last_ids); /* -1: none yet */
    if (o->proc) {
        report_reset(r);
        if (run_processes(&c, chunks, err, errlen) < 0) goto fail;
        goto verdict;
    }
    ppv_policy policy = o->policy;
    if (policy.kind == PPV_POLICY_PCT && policy.pct_steps <= 0) {
        /* PCT spreads its change points over the run's length: measure it
         * with a round-robin run of the same pipeline first */
        ppv_policy rr = {.kind = PPV_POLICY_RR};
        ppv_world *probe = NULL;
        ppv_pp_options quiet = *o; /* the probe records nothing */
        quiet.on_call = NULL;
        quiet.keep_kv = 0;
        quiet.fault.kind = PPV_FAULT_NONE;
        c.o = &quiet;
        report_reset(r);
        int rc = run_world(&c, &rr, &probe, err, errlen);
        c.o = o;
        if (rc < 0) goto fail;
        policy.pct_steps = r->world.steps > 0 ? r->world.steps : 1;
        ppv_world_free(probe);
        c.failed = 0;
    }
    report_reset(r);
    memset(c.last_ids, 0xff, (size_t)c.nranks * sizeof *c.last_ids);
    if (run_world(&c, &policy, &r->trace, err, errlen) < 0) goto fail;
    if (r->world.status == PPV_RUN_DEADLOCK || r->world.status == PPV_RUN_HANG) {
        c.failed = 1;
        r->failure = PPV_FAIL_WATCHDOG;
        r->caught_by = PPV_POINT_WATCHDOG;
        r->failed_rank = r->world.nblocked ? r->world.blocked[0].rank : -1;
        int n = snprintf(r->message, sizeof r->message, "PPV-WATCHDOG: %s",
                         r->world.message[0] ? r->world.message : "ranks wait for each other");
        for (int32_t k = 0; k < r->world.nblocked && n > 0 && (size_t)n < sizeof r->message; k++) {
            int32_t b = r->world.blocked[k].rank;
            const int64_t *ids = c.last_ids[b];
            /* the leader waits for stage 0 on the world; the mesh's waits are its own */
            const char *group = b <= 1 ? "world" : "mesh";
            if (ids[0] < 0)
                n += snprintf(r->message + n, sizeof r->message - (size_t)n,
                              "; rank %d (%s, group %s, before the first envelope) waits at %s", b,
                              b == 0 ? "stage 0" : b == 1 ? "leader" : "worker", group,
                              r->world.blocked[k].action);
            else
                n += snprintf(r->message + n, sizeof r->message - (size_t)n,
                              "; rank %d (%s, group %s, after call_id %" PRId64
                              ", chunk_index %" PRId64 ", cache_epoch %" PRId64 ") waits at %s",
                              b, b == 0 ? "stage 0" : b == 1 ? "leader" : "worker", group, ids[0],
                              ids[1], ids[2], r->world.blocked[k].action);
        }
    } else if (r->world.status == PPV_RUN_FAILED && !c.failed) {
        c.failed = 1;
        r->failure = PPV_FAIL_COLLECTIVE;
        r->caught_by = PPV_POINT_TRANSPORT;
        r->failed_rank = r->world.failed_rank;
        snprintf(r->message, sizeof r->message, "%s", r->world.message);
    }
verdict:;
    int64_t infers = chunks; /* a recording also holds NOOPs and its SHUTDOWN */
    if (o->replay) {
        infers = 0;
        for (int64_t k = 0; k < o->nreplay; k++)
            infers += o->replay[k].action == PPV_PP_INFER;
    }
    r->ok = !c.failed && r->world.status == PPV_RUN_DONE && r->chunks_emitted == infers;
    if (!r->ok && !c.failed) {
        r->failure = PPV_FAIL_RULE;
        snprintf(r->message, sizeof r->message,
                 "the run ended with %" PRId64 " of %" PRId64 " chunks emitted", r->chunks_emitted,
                 infers);
    }
    if (ppv_genmodel_device_status(model, err, errlen) < 0) goto fail; /* not to be trusted */
    ppv_genmodel_free(model);
    free(c.last_ids);
    *out = r;
    return 0;
oom:
    ppv_errf(err, errlen, "out of memory");
fail:
    free(c.last_ids);
    ppv_genmodel_free(model);
    ppv_pp_report_free(r);
    return -1;
}

void ppv_pp_report_free(ppv_pp_report *r) {
    if (!r) return;
    free(r->expected_calls);
    free(r->observed_calls);
    free(r->emitted_call_ids);
    free(r->outputs);
    for (int64_t k = 0; r->kv && k < r->nkv; k++)
        free(r->kv[k]);
    free(r->kv);
    free(r->kv_floats);
    ppv_world_result_free(&r->world);
    ppv_world_free(r->trace);
    free(r);
}
