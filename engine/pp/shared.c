/* shared.c - what the PP inference roles share: the options and the
 * break-it matrix's table, failure reports, the startup handshake, and the
 * planned envelopes of every chunk. stage0.c and mesh.c call it; it calls
 * neither.
 */
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp_internal.h"

/* ---- the break-it matrix's table ------------------------------------------------ */

static const struct {
    const char *token, *text;
    ppv_failure mode;
    ppv_pp_point point;
} injections[] = {
#define PPV_PP_INJECT(NAME, token, mode, point, text)                                              \
    {token, text, PPV_FAIL_##mode, PPV_POINT_##point},
#include "inject.def"
#undef PPV_PP_INJECT
};

/* The seeded bugs (ppv_pp.h): deliberately broken variants of the
 * reference, for measuring the explorer (--seed-bug). */
static const struct {
    const char *token, *text, *needs;
} bugs[PPV_PP_BUG_COUNT] = {
    [PPV_PP_BUG_NONE] = {"none", "the reference itself", ""},
    [PPV_PP_BUG_WAIT_TRUSTS_EPOCH] =
        {"wait-trusts-epoch",
         "with --poll, stage 0 takes a result it waited for (its probe found nothing) without "
         "judging it, a stale one included",
         "--mesh 1 --poll --inject OM-09 --hard-cut-at 2 --control-only --chunks 4 --steps 2"},
    [PPV_PP_BUG_DECODE_FIRST] = {"decode-first",
                                 "stage 0 decodes result k before it sends envelope k+1",
                                 "--d-in 1 --control-only --chunks 4 --steps 2"},
    [PPV_PP_BUG_LEADER_DIES] = {"leader-dies",
                                "the leader returns after receiving chunk 1's header",
                                "--mesh 2 --control-only --chunks 4 --steps 2"},
    [PPV_PP_BUG_WORKER_LOCAL_RECOMPUTE] =
        {"worker-local-recompute",
         "the last mesh rank decides KV recompute from its own count of chunks, not the "
         "envelope's flag",
         "--mesh 2 --kv recompute --recompute-every 2 --hard-cut-at 3 --control-only --chunks 6 "
         "--steps 2"},
    [PPV_PP_BUG_SHARD_RELOAD] =
        {"shard-reload",
         "the built-in generator's last mesh rank reloads mesh rank 0's shard before chunk 1",
         "--mesh 2 (the built-in generator)"},
    [PPV_PP_BUG_BLOCKING_DECODE] =
        {"blocking-decode",
         "stage 0 sends only when nothing is in flight or waiting to be decoded: the output is "
         "right, the overlap is lost (no failure: the OverlapScore shows it)",
         "--cost decode=200,call=20"},
    [PPV_PP_BUG_SEND_ON_PROBE_HIT] =
        {"send-on-probe-hit",
         "with --poll, when its probe finds a result with D_in envelopes in flight, stage 0 "
         "sends the next envelope before taking it: past D_in (the bounded queue's tripwire); "
         "round-robin's probes never find one",
         "--poll --control-only --chunks 4 --steps 2"},
    [PPV_PP_BUG_CUT_ON_PROBE_HIT] =
        {"cut-on-probe-hit",
         "with --poll, at a hard cut stage 0 takes a result its probe found for the old epoch "
         "drained and starts the new one with results still in flight; round-robin's probes "
         "never find one",
         "--poll --hard-cut-at 2 --control-only --chunks 4 --steps 2"},
    [PPV_PP_BUG_RESULTS_KEPT] =
        {"results-kept",
         "stage 0 keeps every decoded result's latents and never gives them back: the output is "
         "right, stage 0's bytes grow with the chunks (no failure of the contract: the memory "
         "accounting shows it)",
         "--chunks 8 (its memory line, or --mem-cap)"},
};

const char *ppv_pp_bug_token(ppv_pp_bug b) {
    return (unsigned)b < PPV_PP_BUG_COUNT ? bugs[b].token : NULL;
}
const char *ppv_pp_bug_text(ppv_pp_bug b) {
    return (unsigned)b < PPV_PP_BUG_COUNT ? bugs[b].text : NULL;
}
const char *ppv_pp_bug_needs(ppv_pp_bug b) {
    return (unsigned)b < PPV_PP_BUG_COUNT ? bugs[b].needs : NULL;
}
int ppv_pp_bug_lookup(const char *token) {
    for (int b = 0; b < PPV_PP_BUG_COUNT; b++)
        if (!strcmp(token, bugs[b].token)) return b;
    return -1;
}

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
    static const char *const names[] = {"none",         "stage0-send",       "leader",
                                        "mesh-running", "stage0-result",     "handshake",
                                        "group-check",  "input-digest",      "transport",
                                        "watchdog",     "shard-fingerprint", "broadcast-check"};
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
    o.envelope_digest = 1;
    return o;
}

int32_t pp_fingerprint_every(const ppv_pp_options *o) {
    if (o->fingerprint_every) return o->fingerprint_every;
    return o->inject == PPV_INJECT_OM12 || o->bug == PPV_PP_BUG_SHARD_RELOAD;
}

static int cut_at(const ppv_pp_options *o, int32_t k) {
    for (int32_t i = 0; i < o->ncuts; i++)
        if (o->cuts[i] == k) return 1;
    return 0;
}

int ppv_pp_options_check(const ppv_pp_options *o, char *err, size_t errlen) {
    if (o->mesh < 1 || o->mesh > 64) return ppv_errf(err, errlen, "--mesh %d: 1 to 64", o->mesh);
    if (!o->generator && (o->model.n_heads < 1 || o->model.n_heads % o->mesh))
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
                    o->inject != PPV_INJECT_OM05 && o->inject != PPV_INJECT_OM09 &&
                    o->inject != PPV_INJECT_OM12;
    if (on_chunk1 && (o->chunks < 2 || cut_at(o, PP_INJECT_CHUNK)))
        return ppv_errf(err, errlen,
                        "--inject %s acts on chunk %d, the second of the first epoch: it needs "
                        "--chunks 2 or more and no hard cut at %d",
                        ppv_pp_inject_token(o->inject), PP_INJECT_CHUNK, PP_INJECT_CHUNK);
    if (o->inject == PPV_INJECT_RETRY && o->chunks < 3)
        return ppv_errf(err, errlen,
                        "--inject retry needs --chunks 3 or more (stage 0 takes the "
                        "second answer while it waits for a later one)");
    if (o->inject == PPV_INJECT_REORDER_RESULTS && o->d_in < 2)
        return ppv_errf(err, errlen,
                        "--inject reorder-results needs --d-in 2 or more (two "
                        "envelopes in flight for their results to cross)");
    if (o->inject == PPV_INJECT_OM09 && o->ncuts == 0)
        return ppv_errf(err, errlen,
                        "--inject OM-09 delivers a result after a hard cut: give --hard-cut-at");
    if (o->fingerprint_every < 0 || o->fingerprint_every > 1000000)
        return ppv_errf(err, errlen, "--fingerprint-every %d: 0 (none) to 1000000",
                        o->fingerprint_every);
    if (o->bug == PPV_PP_BUG_SHARD_RELOAD && (o->generator || o->control_only || o->mesh < 2))
        return ppv_errf(err, errlen,
                        "the shard-reload bug needs the built-in generator on a mesh "
                        "of 2 or more");
    if ((o->inject == PPV_INJECT_OM11 || o->inject == PPV_INJECT_OM05 ||
         o->inject == PPV_INJECT_OM12 || o->inject == PPV_INJECT_OM04 ||
         o->inject == PPV_INJECT_OM08) &&
        o->mesh < 2)
        return ppv_errf(err, errlen, "--inject %s needs a mesh of 2 or more ranks",
                        ppv_pp_inject_token(o->inject));
    if (!(o->heartbeat_s >= 0 && o->heartbeat_s <= 3600) ||
        !(o->worker_watchdog_s >= 0 && o->worker_watchdog_s <= 86400))
        return ppv_errf(err, errlen, "--heartbeat %g and --worker-watchdog %g: seconds, 0 (none) "
                        "to an hour and a day", o->heartbeat_s, o->worker_watchdog_s);
    if (o->worker_watchdog_s > 0 && o->heartbeat_s >= o->worker_watchdog_s)
        return ppv_errf(err, errlen, "--heartbeat %g must be shorter than --worker-watchdog %g, "
                        "or a quiet stage 0 looks dead", o->heartbeat_s, o->worker_watchdog_s);
    if (o->heartbeat_s > 0 && o->replay)
        return ppv_errf(err, errlen, "a replay sends the recording's envelopes: no --heartbeat");
    if (o->cost_decode < 0 || o->cost_call < 0 || o->cost_decode > 1000000 ||
        o->cost_call > 1000000)
        return ppv_errf(err, errlen, "--cost: decode and call take 0 to 1000000 steps");
    if (o->proc && (o->cost_decode || o->cost_call))
        return ppv_errf(err, errlen, "--cost sets the mock's virtual time; on %s the clock is "
                        "the wall's", ppv_proc_name(o->proc));
    if (o->policy.kind == PPV_POLICY_REPLAY &&
        (o->policy.nreplay < 0 || (o->policy.nreplay > 0 && !o->policy.replay) ||
         (o->policy.ndev > 0 && (!o->policy.dev_step || !o->policy.dev_rank))))
        return ppv_errf(err, errlen, "a replay policy needs its decisions");
    return 0;
}

int ppv_pp_as_injected(const ppv_pp_options *o, const ppv_pp_report *r) {
    if (o->inject == PPV_INJECT_NONE) return r->ok;
    ppv_failure want = ppv_pp_inject_mode(o->inject);
    if (want != PPV_FAIL_NONE)
        return !r->ok && r->failure == want && r->caught_by == ppv_pp_inject_caught_by(o->inject);
    if (!r->ok) return 0;
    switch (o->inject) {
    case PPV_INJECT_OM09:
        return r->dropped_stale == 1;
    case PPV_INJECT_UNKNOWN_FIELD:
        return r->unknown_fields == 1;
    case PPV_INJECT_REORDER_RESULTS: /* held only when the next envelope had come */
        return r->reordered <= 1 && r->dropped_stale + r->dropped_duplicate == 0;
    case PPV_INJECT_RETRY: /* its second answer: a duplicate, or stale after a cut */
        return r->retried == 1 && r->dropped_duplicate + r->dropped_stale == 1;
    default:
        return r->dropped_duplicate == 1;
    }
}

/* ---- the overlap metric ------------------------------------------------------------ */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n) (sorts v); 0 when n is 0. */
static double median(double *v, int64_t n) {
    if (n <= 0) return 0;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int ppv_pp_overlap_measure(const ppv_pp_chunk_times *c, int64_t n, ppv_pp_overlap *out) {
    memset(out, 0, sizeof *out);
    enum { COLS = 7 };
    double *v = malloc((size_t)(n > 0 ? n : 1) * COLS * sizeof *v);
    if (!v) return -1;
    double *col[COLS];
    for (int j = 0; j < COLS; j++) col[j] = v + (size_t)j * (size_t)(n > 0 ? n : 1);
    int64_t m = 0;
    for (int64_t k = PPV_PP_OVERLAP_WARMUP; k < n; k++) {
        const ppv_pp_chunk_times *a = &c[k], *b = &c[k - 1];
        if (a->t_recv < 0) continue; /* taken ahead: no receive time of its own */
        double p = (double)(a->t_emit - b->t_emit) / 1e6;
        double s0 = (double)(a->t_sent - a->t_begin + a->t_emit - a->t_recv) / 1e6;
        double s1 = a->tB_ms, lo = s0 < s1 ? s0 : s1;
        if (lo <= 0) continue; /* a stage that took no time on this clock */
        double hidden = s0 + s1 - p > 0 ? s0 + s1 - p : 0;
        double row[COLS] = {hidden / lo, p, s0, s1, hidden, a->mesh_idle_ms, a->decode_ms};
        for (int j = 0; j < COLS; j++) col[j][m] = row[j];
        m++;
    }
    out->samples = m;
    out->score = median(col[0], m);
    out->period_ms = median(col[1], m);
    out->stage0_ms = median(col[2], m);
    out->stage1_ms = median(col[3], m);
    out->hidden_ms = median(col[4], m);
    out->mesh_idle_ms = median(col[5], m);
    out->decode_ms = median(col[6], m);
    free(v);
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
        else if (c->last_ids && c->last_ids[w.rank][0] >= 0) /* between two envelopes */
            n = snprintf(r->message, sizeof r->message,
                         "%s (rank %d, group %s, after call_id %" PRId64 ", chunk_index %" PRId64
                         ", cache_epoch %" PRId64 "): ",
                         ppv_failure_id(mode), w.rank, pp_group_name(w.group),
                         c->last_ids[w.rank][0], c->last_ids[w.rank][1], c->last_ids[w.rank][2]);
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

/* A member of communicator comm in the pipeline's terms: "mesh rank 1"
 * on the mesh's (member i is mesh rank i), "rank 2" on the world's. */
static void member_name(const pp_ctx *c, int32_t comm, int32_t member, int32_t rank, char *buf,
                        size_t n) {
    if (comm == c->mesh_comm && comm != 0) snprintf(buf, n, "mesh rank %d", member);
    else snprintf(buf, n, "rank %d", rank);
}

void pp_transport_error(pp_ctx *c, ppv_transport *t, pp_where w, int err, const char *what) {
    if (err == PPV_ERR_ABORTED) return; /* another rank failed and said why */
    ppv_coll_mismatch mm;
    if (err == PPV_ERR_MISMATCH && t->ops->mismatch && t->ops->mismatch(t->impl, &mm)) {
        /* which rank made which call, what differs, and who is the odd one
         * when the others already agreed */
        char me[32], other[32], odd[160];
        member_name(c, mm.comm, mm.member, mm.member_rank, me, sizeof me);
        member_name(c, mm.comm, mm.other, mm.other_rank, other, sizeof other);
        if (mm.agreeing >= 2)
            snprintf(odd, sizeof odd, "%d members had already made %s's call, so %s is the odd one",
                     mm.agreeing, other, me);
        else
            snprintf(odd, sizeof odd, "no third member had arrived to tell which of the two is "
                     "the odd one");
        pp_fail(c, t, w, PPV_FAIL_COLLECTIVE, PPV_POINT_TRANSPORT,
                "%s: the ranks disagree on collective #%" PRId64 " of group %s: %s calls %s, %s "
                "%s; the %s differs (%s): under NCCL this is a hang",
                what, mm.seq, mm.comm == c->mesh_comm && mm.comm != 0 ? "mesh" : "world", me,
                mm.call, other, mm.other_call, mm.property, odd);
        return;
    }
    pp_fail(c, t, w, PPV_FAIL_COLLECTIVE, PPV_POINT_TRANSPORT, "%s: %s", what,
            err == PPV_ERR_MISMATCH ? "the ranks disagree on this call (kind, root, size or "
                                      "group): under NCCL this is a hang"
                                    : "the transport refused the call");
}

/* ---- the handshake ----------------------------------------------------------------- */

/* The keys every rank's plan must agree on; flag keys gate collectives
 * (FM-03 when they differ), the rest are the plan (FM-01). */
/* clang-format off */
#define HANDSHAKE_KEYS(X)                                                                          \
    X(mesh, 0) X(chunks, 0) X(steps, 0) X(kv_recompute, 0) X(recompute_every, 0) X(kv_window, 0)  \
    X(height, 0) X(width, 0) X(cond_len, 0) X(layers, 0) X(d_model, 0) X(n_heads, 0) X(d_ff, 0)  \
    X(cond_dim, 0) X(model_seed, 0) X(generator, 0) X(control_only, 0) X(transport, 0)          \
    X(timeout_ms, 0) X(heartbeat_ms, 0) X(worker_watchdog_ms, 0) X(cost_decode, 0)              \
    X(cost_call, 0) X(poll, 0) X(envelope_digest, 0) X(fingerprint_every, 0) X(inject, 0)        \
    X(skip_points, 0) X(bug, 0)                                                                   \
    X(extra_digest_collective, 1)
/* clang-format on */

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
    k[HK_generator] =
        c->gen ? (int64_t)ppv_generator_digest(c->gen->name, c->gen->version, c->gen_params) : 0;
    k[HK_control_only] = o->control_only;
    /* where the ranks run, how long a call may wait, and every test hook:
     * a job whose processes were started with other settings stops here */
    const char *tr = o->proc ? ppv_proc_name(o->proc) : "mock";
    k[HK_transport] = !strcmp(tr, "mock") ? 0 : !strcmp(tr, "mpi") ? 1 : 2;
    k[HK_timeout_ms] = o->proc ? (int64_t)(o->timeout_s * 1000.0) : 0;
    k[HK_poll] = o->poll;
    k[HK_heartbeat_ms] = (int64_t)(o->heartbeat_s * 1000.0);
    k[HK_worker_watchdog_ms] = (int64_t)(o->worker_watchdog_s * 1000.0);
    k[HK_cost_decode] = o->cost_decode;
    k[HK_cost_call] = o->cost_call;
    k[HK_envelope_digest] = o->envelope_digest;
    k[HK_fingerprint_every] = pp_fingerprint_every(o);
    k[HK_inject] = o->inject;
    k[HK_skip_points] = (int64_t)o->skip_points;
    k[HK_bug] = o->bug;
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
                    at += (size_t)snprintf(
                        diff + at, sizeof diff - at,
                        "%s%s: rank %d has %" PRId64 ", rank 0 has %" PRId64 "%s", at ? "; " : "",
                        hk_desc[k].name, r, rec[1 + k], all[1 + k],
                        hk_desc[k].gates_collective ? " (a flag that gates a collective)" : "");
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
 * from a multiplicative hash of (draw, i / 4), four values a hash (7 bits
 * of each 16). No model reads them; a run's digests do. */
static void cheap_fill(ppv_bf16 *out, size_t n, uint64_t bits) {
    size_t i = 0;
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    /* the hash of quad i + 4 is the hash of quad i plus a constant (mod
     * 2^64): an addition a quad, no multiplication */
    uint64_t x = bits * 0xbf58476d1ce4e5b9ULL;
    const uint64_t step = 4 * 0x9e3779b97f4a7c15ULL * 0xbf58476d1ce4e5b9ULL;
    for (; i + 4 <= n; i += 4, x += step) { /* the four values in one store */
        uint64_t four = 0x3f803f803f803f80ULL | (x & 0x007f007f007f007fULL);
        memcpy(out + i, &four, sizeof four);
    }
#endif
    for (; i < n; i += 4) { /* the last values, one at a time */
        uint64_t h = (bits + i * 0x9e3779b97f4a7c15ULL) * 0xbf58476d1ce4e5b9ULL;
        for (size_t j = 0; j < 4 && i + j < n; j++)
            out[i + j] = (ppv_bf16)(0x3f80 | ((h >> (16 * j)) & 0x7f));
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

int pp_gen_params_set(pp_ctx *c, char *err, size_t errlen) {
    c->gen_params = c->o->generator_params ? c->o->generator_params : "";
    if (c->o->generator) return 0;
    if (ppv_gen_config_format(&c->o->model, c->builtin_params, sizeof c->builtin_params) < 0)
        return ppv_errf(err, errlen, "the built-in generator's settings are too long");
    c->gen_params = c->builtin_params;
    return 0;
}

void pp_generator_setup(const pp_ctx *c, int32_t mr, ppv_generator_setup *s) {
    const ppv_pp_options *o = c->o;
    memset(s, 0, sizeof *s);
    s->abi = PPV_GENERATOR_ABI;
    s->mesh_rank = mr;
    s->mesh_size = o->mesh;
    s->latent_h = o->height / 8;
    s->latent_w = o->width / 8;
    s->frames = PP_FRAMES_PER_CHUNK;
    s->channels = PP_LATENT_CHANNELS;
    s->kv_window = o->kv_window;
    s->cond_dim = o->model.cond_dim;
    s->params = c->gen_params;
    s->device = o->device ? o->device : "cpu";
    s->shared = c->gen_shared;
}

void pp_note_unknown(pp_ctx *c, int32_t n, const char *name, int64_t call_id) {
    ppv_pp_report *r = c->rep;
    if (n <= 0) return;
    if (!r->unknown_fields) {
        snprintf(r->unknown_field, sizeof r->unknown_field, "%s", name);
        r->unknown_field_call_id = call_id;
    }
    r->unknown_fields += n;
}
