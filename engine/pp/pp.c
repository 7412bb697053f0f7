/* pp.c - the PP inference pipeline's run: puts stage 0 (rank 0) and the
 * mesh (ranks 1..mesh; rank 1 leads) into one deterministic world, or runs
 * this process's rank on a transport of processes (options, failures, the
 * handshake and the planned envelopes are shared.c's).
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

#include "pp_internal.h"

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

/* On processes each rank counted its own row: every rank broadcasts its
 * peak, breakdown and what it held at the end, then stage 0 the phase each
 * mesh rank's peak call was sent in (the mesh cannot know it). Timelines
 * stay in their own process; the link's row is not counted. */
static void gather_memory(pp_ctx *c, ppv_transport *t, int32_t me) {
    ppv_pp_report *r = c->rep;
    const ppv_transport_ops *x = t->ops;
    for (int32_t k = 0; k < c->nranks; k++) {
        ppv_pp_mem_row *row = &r->mem[k];
        struct {
            uint64_t peak, total, at_peak[PPV_MEM_KIND_COUNT], now[PPV_MEM_KIND_COUNT];
            int64_t chunk, call_id, t_ns;
            int32_t phase, pad;
        } s = {row->peak, row->total, {0}, {0}, row->peak_chunk, row->peak_call_id,
               row->peak_t_ns, (int32_t)row->peak_phase, 0};
        memcpy(s.at_peak, row->at_peak, sizeof s.at_peak);
        memcpy(s.now, row->now, sizeof s.now);
        x->broadcast(t->impl, me, &s, sizeof s, k, 0, "each rank's memory");
        if (k == me) continue;
        row->peak = s.peak;
        row->total = s.total;
        memcpy(row->at_peak, s.at_peak, sizeof row->at_peak);
        memcpy(row->now, s.now, sizeof row->now);
        row->peak_chunk = s.chunk;
        row->peak_call_id = s.call_id;
        row->peak_t_ns = s.t_ns;
        row->peak_phase = (ppv_pp_phase)s.phase;
    }
    /* one at a time: nothing to allocate, so every process takes part */
    for (int32_t k = 1; k < c->nranks; k++) {
        int64_t id = r->mem[k].peak_call_id;
        int32_t phase = id >= 0 && id < c->nsent_phase && c->sent_phase[id] >= 0
                            ? c->sent_phase[id]
                            : (int32_t)r->mem[k].peak_phase;
        x->broadcast(t->impl, me, &phase, sizeof phase, 0, 0, "a mesh rank's peak phase");
        r->mem[k].peak_phase = (ppv_pp_phase)phase;
    }
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
        o->keep_kv || (o->inject != PPV_INJECT_NONE && o->inject != PPV_INJECT_OM13))
        return ppv_errf(err, errlen,
                        "policies, faults, injections (but OM-13, stage 0 dying), replayed "
                        "decisions and the KV comparison are the mock's; on processes the "
                        "transport orders the ranks");
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
    int64_t counts[7] = {r->chunks_emitted, r->dropped_stale, r->dropped_duplicate, r->max_inflight,
                         r->max_ready,      r->reordered,     r->heartbeats};
    x->broadcast(t.impl, me, counts, sizeof counts, 0, 0, "stage 0's counts");
    r->chunks_emitted = counts[0];
    r->dropped_stale = counts[1];
    r->dropped_duplicate = counts[2];
    r->max_inflight = (int32_t)counts[3];
    r->max_ready = (int32_t)counts[4];
    r->reordered = counts[5];
    r->heartbeats = counts[6];
    x->broadcast(t.impl, me, &r->output_digest, sizeof r->output_digest, 0, 0, "output digest");
    size_t n = (size_t)chunks * sizeof(int64_t);
    x->broadcast(t.impl, me, r->expected_calls, n, 0, 0, "expected calls");
    x->broadcast(t.impl, me, r->observed_calls, n, 0, 0, "observed calls");
    x->broadcast(t.impl, me, r->emitted_call_ids, n, 0, 0, "emitted call ids");
    x->broadcast(t.impl, me, &r->generator_calls, sizeof r->generator_calls, 1, 0,
                 "generator calls");
    x->broadcast(t.impl, me, &r->retried, sizeof r->retried, 1, 0, "retries answered");
    /* the fields the leader filtered, beside stage 0's own */
    struct {
        int64_t n, call_id;
        char name[64];
    } lead = {r->unknown_fields, r->unknown_field_call_id, ""};
    memcpy(lead.name, r->unknown_field, sizeof lead.name);
    x->broadcast(t.impl, me, &lead, sizeof lead, 1, 0, "unknown fields");
    if (me != 1 && lead.n) {
        if (!r->unknown_fields) {
            memcpy(r->unknown_field, lead.name, sizeof r->unknown_field);
            r->unknown_field_call_id = lead.call_id;
        }
        r->unknown_fields += lead.n;
    }
    if (r->mem) gather_memory(c, &t, me);
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
    r->reordered = r->retried = r->heartbeats = 0;
    memset(&r->overlap, 0, sizeof r->overlap);
    r->unknown_fields = 0;
    r->unknown_field[0] = 0;
    r->unknown_field_call_id = -1;
    r->output_digest = 0xcbf29ce484222325ULL;
    r->max_inflight = r->max_ready = 0;
    r->generator_calls = 0;
    r->noutputs = 0;
    for (int64_t k = 0; r->kv && k < r->nkv; k++) {
        free(r->kv[k]);
        r->kv[k] = NULL;
        r->kv_floats[k] = 0;
    }
    for (int32_t k = 0; r->mem && k < r->nmem; k++) {
        free(r->mem[k].timeline);
        memset(&r->mem[k], 0, sizeof r->mem[k]);
        r->mem[k].peak_chunk = r->mem[k].peak_call_id = r->mem[k].peak_t_ns = -1;
    }
}

/* The process's site of a generator's open or close (the plug-in guard). */
static ppv_generator_site process_site(const ppv_generator *g, const char *what) {
    ppv_generator_site s = {g->name, g->version, what, -1, -1, -1, -1};
    return s;
}

/* The generator's close, owed after every open that succeeded, whatever
 * it shared: 0, or -1 with the reason (err may be NULL when a failure is
 * already being reported). */
static int gen_close(pp_ctx *c, char *err, size_t errlen) {
    if (!c->gen_opened) return 0;
    char why[512] = "";
    ppv_generator_site site = process_site(c->gen, "close");
    const ppv_generator_site *was = pp_site_set(&site);
    int rc = c->gen->close(c->gen_shared, why, sizeof why);
    pp_site_set(was);
    c->gen_shared = NULL;
    c->gen_opened = 0;
    if (rc && err)
        ppv_errf(err, errlen, "generator %s %s failed in close: %s", c->gen->name, c->gen->version,
                 why[0] ? why : "(it gave no reason)");
    return rc ? -1 : 0;
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
    if (!o->control_only) {
        c.gen = o->generator ? o->generator : ppv_generator_builtin();
        if (pp_gen_params_set(&c, err, errlen) < 0) return -1;
        if (c.gen->open) { /* a generator that cannot open (a device): exit 2 */
            ppv_generator_setup s;
            char why[512] = "";
            pp_generator_setup(&c, -1, &s);
            ppv_generator_site site = process_site(c.gen, "open");
            const ppv_generator_site *was = pp_site_set(&site);
            int rc = c.gen->open(&s, &c.gen_shared, why, sizeof why);
            pp_site_set(was);
            if (rc)
                return ppv_errf(err, errlen, "generator %s %s failed in open: %s", c.gen->name,
                                c.gen->version, why[0] ? why : "(it gave no reason)");
            c.gen_opened = 1;
        }
    }
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
    /* the accounting: on the mock every rank is in this process; on
     * processes each counts its own, gathered at the end */
    if (!o->memory_off) {
        c.nstamps = 2 * (o->d_in + o->d_out) + 16;
        if (!(r->mem = calloc((size_t)c.nranks + 1, sizeof *r->mem)) ||
            !(c.stamps = malloc((size_t)c.nstamps * sizeof *c.stamps)))
            goto oom;
        r->nmem = c.nranks + 1;
        for (int32_t k = 0; k < c.nstamps; k++)
            c.stamps[k].call_id = -1;
    }
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
        quiet.on_event = NULL;
        quiet.on_rank = NULL;
        quiet.progress = NULL;
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
    c.phase = PPV_PHASE_WARMUP;
    for (int32_t k = 0; k < c.nstamps; k++)
        c.stamps[k].call_id = -1;
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
                              ppv_pp_role_name(b), group,
                              r->world.blocked[k].action);
            else
                n += snprintf(r->message + n, sizeof r->message - (size_t)n,
                              "; rank %d (%s, group %s, after call_id %" PRId64
                              ", chunk_index %" PRId64 ", cache_epoch %" PRId64 ") waits at %s",
                              b, ppv_pp_role_name(b), group, ids[0],
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
    if (gen_close(&c, err, errlen) < 0) { /* the results are not to be trusted */
        free(c.last_ids);
    free(c.stamps);
    free(c.sent_phase);
        ppv_pp_report_free(r);
        return -1;
    }
    free(c.last_ids);
    free(c.stamps);
    free(c.sent_phase);
    *out = r;
    return 0;
oom:
    ppv_errf(err, errlen, "out of memory");
fail:
    gen_close(&c, NULL, 0);
    free(c.last_ids);
    free(c.stamps);
    free(c.sent_phase);
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
    for (int32_t k = 0; r->mem && k < r->nmem; k++)
        free(r->mem[k].timeline);
    free(r->mem);
    ppv_world_result_free(&r->world);
    ppv_world_free(r->trace);
    free(r);
}
