/* run.c - one run of the explorer's target (a schedule, the pipeline or a
 * program of external code) under one policy and fault, told as an
 * outcome; the explorer (explore.c) and the exhaustive search (dfs.c) both
 * call it.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fuzz_internal.h"

double fuzz_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Each blocked rank's action and what it waits for, then the cycle. */
static void tell(const ppv_world_result *w, char *out, size_t n) {
    size_t k = 0;
    out[0] = '\0';
    if (w->status != PPV_RUN_DEADLOCK && w->status != PPV_RUN_HANG) return;
    for (int32_t i = 0; i < w->nblocked && k < n; i++) {
        const ppv_wait *b = &w->blocked[i];
        int m = snprintf(out + k, n - k, "%srank %d at %s: %s", i ? "; " : "blocked: ", b->rank,
                         b->action, b->reason);
        if (m < 0) return;
        k += (size_t)m;
    }
    for (int32_t i = 0; i < w->ncycle && k < n; i++) {
        int m = snprintf(out + k, n - k, "%s%d", i ? " -> " : "\ncycle: ", w->cycle[i].rank);
        if (m < 0) return;
        k += (size_t)m;
    }
    if (w->ncycle && k < n) snprintf(out + k, n - k, " -> %d", w->cycle[0].rank);
}

/* Judges a finished run of a schedule against reference (the one-rank
 * gradients' digest) into out. */
static void judge_schedule(const ppv_run_report *r, uint64_t reference, outcome *out) {
    out->steps = r->world.steps;
    out->sends = r->world.sends;
    out->trace_digest = r->world.trace_digest;
    tell(&r->world, out->story, sizeof out->story);
    if (r->world.status == PPV_RUN_PRUNED)
        out->pruned = out->pass = 1;
    else if (r->world.status != PPV_RUN_DONE) {
        snprintf(out->why, sizeof out->why, "%s", r->world.message[0] ? r->world.message
                                                                      : "the run did not complete");
        out->named_failure = 1;
    }
    else if (r->grad_digest != reference)
        out->differs = snprintf(out->why, sizeof out->why,
                                "gradients %016" PRIx64
                                " differ from the one-rank reference's %016" PRIx64,
                                r->grad_digest, reference) > 0;
    else if (memcmp(r->peak_bytes, r->predicted_bytes, (size_t)r->nranks * sizeof(int64_t)))
        snprintf(out->why, sizeof out->why, "measured activation memory differs from the prediction");
    else
        out->pass = 1;
}

static int run_schedule(const target *tg, const ppv_policy *pol, const ppv_fault *fault, int keep,
                        outcome *out, char *err, size_t errlen) {
    ppv_run_options ro = tg->o->run;
    ro.policy = *pol;
    ro.fault = *fault;
    ro.progress = NULL;
    ppv_run_report *r = NULL;
    if (ppv_run(tg->o->schedule, &ro, &r, err, errlen) < 0) return -1;
    judge_schedule(r, tg->grad_digest, out);
    if (keep) {
        out->world = r->trace;
        r->trace = NULL;
    }
    ppv_run_report_free(r);
    return 0;
}

uint64_t fuzz_reference(const target *tg, const ppv_fault *fault) {
    if (!tg->o->pp) return tg->grad_digest;
    ppv_pp_inject i = tg->o->pp->inject;
    return fault->kind == PPV_FAULT_CUT && fault->message >= 0 && fault->message < tg->ncut
               ? tg->cut_digest[fault->message]
           : i == PPV_INJECT_NONE ? tg->out_digest
                                  : tg->clean_digest;
}

/* Judges a finished run of the pipeline (options po, fault its fault)
 * against reference, the output digest it must give when it completes
 * (the round-robin run's, with the same hard cut or without the
 * injection), into out. */
static void judge_pp(const ppv_pp_options *po, const ppv_pp_report *r, uint64_t reference,
                     outcome *out) {
    const ppv_fault *fault = &po->fault;
    out->steps = r->world.steps;
    out->sends = r->world.sends;
    out->trace_digest = r->world.trace_digest;
    out->named_failure = !r->ok && r->failure != PPV_FAIL_NONE && r->message[0];
    ppv_pp_inject i = po->inject;
    ppv_failure mode = ppv_pp_inject_mode(i);
    tell(&r->world, out->story, sizeof out->story);
    int64_t back = -1; /* the first decoded result whose call_id does not rise */
    for (int64_t k = 1; k < r->chunks_emitted && back < 0; k++)
        if (r->emitted_call_ids[k] <= r->emitted_call_ids[k - 1]) back = k;
    if (r->world.status == PPV_RUN_PRUNED)
        out->pruned = out->pass = 1;
    else if (back >= 0)
        snprintf(out->why, sizeof out->why,
                 "decoded result %" PRId64 " has call_id %" PRId64 " after call_id %" PRId64
                 ": a stale or repeated result was decoded",
                 back, r->emitted_call_ids[back], r->emitted_call_ids[back - 1]);
    else if (i == PPV_INJECT_NONE || mode == PPV_FAIL_NONE) {
        /* a hard cut the explorer put in: the round-robin run's output with it */
        if (!r->ok && fault->kind == PPV_FAULT_CUT)
            snprintf(out->why, sizeof out->why, "with a hard cut at chunk %lld: %.900s",
                     (long long)fault->message, r->message);
        else if (!r->ok)
            snprintf(out->why, sizeof out->why, "%s", r->message);
        else if (r->output_digest != reference)
            out->differs = snprintf(out->why, sizeof out->why,
                                    "output digest %016" PRIx64
                                    " differs from the reference's %016" PRIx64,
                                    r->output_digest, reference) > 0;
        else if (i != PPV_INJECT_NONE && r->dropped_stale + r->dropped_duplicate != 1)
            snprintf(out->why, sizeof out->why,
                     "%s: %" PRId64 " stale and %" PRId64 " duplicate results dropped, not 1",
                     ppv_pp_inject_token(i), r->dropped_stale, r->dropped_duplicate);
        else
            out->pass = 1;
    } else if (r->ok)
        snprintf(out->why, sizeof out->why, "%s went unnoticed: the run completed",
                 ppv_pp_inject_token(i));
    else if (r->failure != mode || r->caught_by != ppv_pp_inject_caught_by(i))
        snprintf(out->why, sizeof out->why, "%s must give %s at %s, not %s at %s: %.900s",
                 ppv_pp_inject_token(i), ppv_failure_id(mode),
                 ppv_pp_point_name(ppv_pp_inject_caught_by(i)), ppv_failure_id(r->failure),
                 ppv_pp_point_name(r->caught_by), r->message);
    else
        out->pass = 1;
}

static int run_pp(const target *tg, const ppv_policy *pol, const ppv_fault *fault, int keep,
                  outcome *out, char *err, size_t errlen) {
    ppv_pp_options po = *tg->o->pp;
    po.policy = *pol;
    po.fault = *fault;
    po.memory_off = 1; /* the judge reads no rows */
    ppv_pp_report *r = NULL;
    if (ppv_pp_run(&po, &r, err, errlen) < 0) return -1;
    judge_pp(&po, r, fuzz_reference(tg, fault), out);
    if (keep) {
        out->world = r->trace;
        r->trace = NULL;
    }
    ppv_pp_report_free(r);
    return 0;
}

static int run_program(const target *tg, int32_t job, const ppv_policy *pol,
                       const ppv_fault *fault, int keep, outcome *out, char *err, size_t errlen) {
    const ppv_fuzz_program *pg = tg->o->program;
    void *arg = pg->job_args && job >= 0 && job < pg->njob_args ? pg->job_args[job] : pg->arg;
    ppv_world_options wo;
    memset(&wo, 0, sizeof wo);
    wo.nranks = pg->nranks;
    wo.sem = pg->sem;
    wo.policy = *pol;
    wo.watchdog_steps = pg->watchdog_steps > 0 ? pg->watchdog_steps : 100000;
    wo.stack_bytes = 256 * 1024;
    wo.fault = *fault;
    ppv_world *w = ppv_world_new(&wo, err, errlen);
    if (!w) return -1;
    if (pg->setup && pg->setup(arg, w, err, errlen) < 0) {
        ppv_world_free(w);
        return -1;
    }
    if (pg->reset) pg->reset(arg);
    ppv_world_result res;
    if (ppv_world_run(w, pg->main, arg, &res) < 0) {
        snprintf(err, errlen, "%s", res.message);
        ppv_world_result_free(&res);
        ppv_world_free(w);
        return -1;
    }
    out->steps = res.steps;
    out->sends = res.sends;
    out->trace_digest = res.trace_digest;
    tell(&res, out->story, sizeof out->story);
    if (res.status == PPV_RUN_PRUNED)
        out->pruned = out->pass = 1;
    else if (pg->judge) {
        out->pass = pg->judge(arg, &res, out->why, sizeof out->why) == 0;
        out->named_failure = !out->pass && res.status != PPV_RUN_DONE;
    } else if (res.status != PPV_RUN_DONE) {
        snprintf(out->why, sizeof out->why, "%s", res.message);
        out->named_failure = 1;
    } else
        out->pass = 1;
    ppv_world_result_free(&res);
    if (keep) out->world = w;
    else ppv_world_free(w);
    return 0;
}

/* The verdict with the fault taken into account: with a fault that loses
 * or breaks a message, a named failure is the right end, silence is not;
 * a delay, a buffered link or a hard cut must change nothing the reference
 * shows. */
static void judge_fault(const ppv_fault *fault, outcome *out) {
    int breaks = fault->kind == PPV_FAULT_DROP || fault->kind == PPV_FAULT_DUPLICATE ||
                 fault->kind == PPV_FAULT_CORRUPT || fault->kind == PPV_FAULT_KILL;
    if (breaks && !out->pass && out->named_failure) out->pass = 1;
    if (out->pass) return;
    char why[1024];
    if (breaks)
        snprintf(why, sizeof why, "a %s at send %lld went unnoticed: %.900s",
                 ppv_fault_name(fault->kind), (long long)fault->message, out->why);
    else if (fault->kind == PPV_FAULT_DELAY || fault->kind == PPV_FAULT_EAGER)
        snprintf(why, sizeof why, "%s at send %lld changed the run: %.900s",
                 fault->kind == PPV_FAULT_DELAY ? "a delay" : "a buffered link",
                 (long long)fault->message, out->why);
    else if (fault->kind == PPV_FAULT_CUT && out->differs)
        snprintf(why, sizeof why, "with a hard cut at chunk %lld: %.900s",
                 (long long)fault->message, out->why);
    else if (fault->kind == PPV_FAULT_CUT)
        snprintf(why, sizeof why, "%.1000s", out->why);
    else if (out->differs)
        snprintf(why, sizeof why, "%.900s: the result depends on the interleaving", out->why);
    else
        snprintf(why, sizeof why, "%.1000s", out->why);
    memcpy(out->why, why, sizeof why);
}

int fuzz_run_job(const target *tg, int32_t job, const ppv_policy *pol, const ppv_fault *fault,
                 int keep, outcome *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    int rc = tg->o->pp        ? run_pp(tg, pol, fault, keep, out, err, errlen)
             : tg->o->program ? run_program(tg, job, pol, fault, keep, out, err, errlen)
                              : run_schedule(tg, pol, fault, keep, out, err, errlen);
    if (rc == 0) judge_fault(fault, out);
    return rc;
}

int fuzz_run_once(const target *tg, const ppv_policy *pol, const ppv_fault *fault, int keep,
                  outcome *out, char *err, size_t errlen) {
    return fuzz_run_job(tg, -1, pol, fault, keep, out, err, errlen);
}

int ppv_fuzz_judge_pp(const ppv_pp_options *po, const ppv_pp_report *r, uint64_t reference,
                      char *why, size_t n) {
    outcome out;
    memset(&out, 0, sizeof out);
    judge_pp(po, r, reference, &out);
    judge_fault(&po->fault, &out);
    snprintf(why, n, "%s", out.pass ? "" : out.why);
    return out.pass;
}

int ppv_fuzz_judge_run(const ppv_run_options *ro, const ppv_run_report *r, uint64_t reference,
                       char *why, size_t n) {
    outcome out;
    memset(&out, 0, sizeof out);
    judge_schedule(r, reference, &out);
    judge_fault(&ro->fault, &out);
    snprintf(why, n, "%s", out.pass ? "" : out.why);
    return out.pass;
}
