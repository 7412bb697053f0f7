/* explore.c - the interleaving explorer: many runs of one target, each
 * under other scheduler decisions, each checked against the round-robin
 * reference; the first failure is minimised to the shortest prefix of its
 * decisions that still fails when round-robin takes over after it.
 *
 * A run passes when it ends as the reference does: a schedule completes
 * with the one-rank reference's gradients and the predicted memory; the
 * pipeline completes with the reference's output digest, or, with a fault
 * injected, is caught with the failure mode and at the point the break-it
 * matrix names (a fault that must not fail completes with the output of
 * the run without it). Anything else is a failure: a deadlock or hang under
 * one interleaving, a check that fires only in some orders, or output that
 * depends on the order (a determinism bug).
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fuzz_internal.h"

int ppv_fuzz_strategy_parse(const char *text, ppv_fuzz_strategy *out) {
    if (!strcmp(text, "random")) *out = PPV_FUZZ_RANDOM;
    else if (!strcmp(text, "pct")) *out = PPV_FUZZ_PCT;
    else if (!strcmp(text, "portfolio")) *out = PPV_FUZZ_PORTFOLIO;
    else if (!strcmp(text, "dfs")) *out = PPV_FUZZ_DFS;
    else return -1;
    return 0;
}

const char *ppv_fuzz_strategy_name(ppv_fuzz_strategy s) {
    return s == PPV_FUZZ_RANDOM ? "random"
           : s == PPV_FUZZ_PCT  ? "pct"
           : s == PPV_FUZZ_DFS  ? "dfs"
                                : "portfolio";
}

/* ---- distinct interleavings: a set of trace digests ------------------------------ */

typedef struct digest_set {
    uint64_t *slot; /* 0 marks an empty slot (a digest of 0 is stored as 1) */
    size_t cap, n;
} digest_set;

/* Room for `more` digests without growing; 0, or -1 when out of memory. */
static int set_reserve(digest_set *s, size_t more) {
    if (2 * (s->n + more) > s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 1024;
        while (2 * (s->n + more) > cap) cap *= 2;
        uint64_t *slot = calloc(cap, sizeof *slot);
        if (!slot) return -1;
        for (size_t i = 0; i < s->cap; i++)
            if (s->slot[i])
                for (size_t j = s->slot[i] & (cap - 1);; j = (j + 1) & (cap - 1))
                    if (!slot[j]) {
                        slot[j] = s->slot[i];
                        break;
                    }
        free(s->slot);
        s->slot = slot;
        s->cap = cap;
    }
    return 0;
}

/* Adds d; 0, or -1 when out of memory. */
static int set_add(digest_set *s, uint64_t d) {
    if (!d) d = 1;
    if (set_reserve(s, 1) < 0) return -1;
    for (size_t j = d & (s->cap - 1);; j = (j + 1) & (s->cap - 1)) {
        if (s->slot[j] == d) return 0;
        if (!s->slot[j]) {
            s->slot[j] = d;
            s->n++;
            return 0;
        }
    }
}

static const ppv_fault no_fault = {PPV_FAULT_NONE, 0};

static void target_free(target *tg) {
    free(tg->cut_digest);
}

/* ---- the reference and the policies ---------------------------------------------- */

/* A failure that holds in the reference's own order cannot depend on the
 * interleaving: the judge's words that say so are dropped from why. */
static void drop_interleaving_claim(char *why) {
    static const char claim[] = ": the result depends on the interleaving";
    size_t n = strlen(why), k = sizeof claim - 1;
    if (n >= k && strcmp(why + n - k, claim) == 0) why[n - k] = 0;
}

static int reference(target *tg, outcome *ref, char *err, size_t errlen) {
    const ppv_fuzz_options *o = tg->o;
    if (o->schedule) {
        float *grads = NULL;
        size_t n = 0;
        double loss;
        ppv_model_config cfg = ppv_run_model_config(&o->run, o->schedule);
        if (ppv_run_reference(&cfg, o->schedule->nmb, &grads, &n, &loss, err, errlen) < 0)
            return -1;
        tg->grad_digest = ppv_digest(grads, n * sizeof *grads);
        free(grads);
    } else if (o->pp && o->pp->inject != PPV_INJECT_NONE &&
               ppv_pp_inject_mode(o->pp->inject) == PPV_FAIL_NONE) {
        ppv_pp_options clean = *o->pp;
        clean.inject = PPV_INJECT_NONE;
        clean.policy.kind = PPV_POLICY_RR;
        ppv_pp_report *r = NULL;
        if (ppv_pp_run(&clean, &r, err, errlen) < 0) return -1;
        tg->clean_digest = r->output_digest;
        ppv_pp_report_free(r);
    }
    ppv_policy rr = {.kind = PPV_POLICY_RR};
    if (o->pp) { /* the pipeline's reference output is its round-robin run's */
        ppv_pp_options po = *o->pp;
        po.policy = rr;
        ppv_pp_report *r = NULL;
        if (ppv_pp_run(&po, &r, err, errlen) < 0) return -1;
        tg->out_digest = r->output_digest;
        ppv_pp_report_free(r);
    }
    if (o->pp && (o->faults & (1u << PPV_FAULT_CUT))) { /* each chunk's cut, round-robin */
        int32_t n = o->pp->chunks;
        tg->ncut = n;
        tg->cut_digest = calloc((size_t)n, sizeof *tg->cut_digest);
        if (!tg->cut_digest) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        for (int32_t k = 1; k < n; k++) {
            ppv_pp_options po = *o->pp;
            po.policy = rr;
            po.fault.kind = PPV_FAULT_CUT;
            po.fault.message = k;
            ppv_pp_report *r = NULL;
            if (ppv_pp_run(&po, &r, err, errlen) < 0) return -1;
            tg->cut_digest[k] = r->output_digest; /* a failed one is judged run by run */
            ppv_pp_report_free(r);
        }
    }
    if (fuzz_run_once(tg, &rr, &no_fault, 1, ref, err, errlen) < 0) return -1;
    tg->ref_steps = ref->steps > 0 ? ref->steps : 1;
    tg->ref_sends = ref->sends;
    return 0;
}

/* Run i's policy under the strategy. */
static ppv_policy policy_of(const target *tg, int64_t i) {
    const ppv_fuzz_options *o = tg->o;
    ppv_policy p;
    memset(&p, 0, sizeof p);
    p.seed = o->seed + (uint64_t)i;
    p.pct_steps = tg->ref_steps;
    int32_t depths = o->pct_depth - 1; /* PCT depths 2..pct_depth */
    switch (o->strategy) {
    case PPV_FUZZ_RANDOM:
        p.kind = PPV_POLICY_RANDOM;
        break;
    case PPV_FUZZ_PCT:
        p.kind = PPV_POLICY_PCT;
        p.depth = o->pct_depth;
        break;
    case PPV_FUZZ_DFS: /* not drawn: dfs.c decides */
    case PPV_FUZZ_PORTFOLIO:
        if (i % (depths + 1) == 0) {
            p.kind = PPV_POLICY_RANDOM;
        } else {
            p.kind = PPV_POLICY_PCT;
            p.depth = 2 + (int32_t)(i % (depths + 1)) - 1;
        }
        break;
    }
    return p;
}

/* Run i's fault: the kinds asked for in turn, at a send drawn from its seed. */
static ppv_fault fault_of(const target *tg, int64_t i) {
    ppv_fault f = no_fault;
    int kinds[PPV_FAULT_COUNT], n = 0;
    for (int k = 1; k < PPV_FAULT_COUNT; k++)
        if (tg->o->faults & (1u << k)) kinds[n++] = k;
    if (!n || tg->ref_sends < 1) return f;
    f.kind = (ppv_fault_kind)kinds[(i - 1) % n];
    uint64_t z = (tg->o->seed + (uint64_t)i) * 0x9E3779B97F4A7C15ULL + 0x5FA417ULL;
    z = (z ^ (z >> 31)) * 0xBF58476D1CE4E5B9ULL;
    z ^= z >> 29;
    if (f.kind == PPV_FAULT_CUT) /* a chunk from 1 to chunks - 1 */
        f.message = 1 + (int64_t)(z % (uint64_t)(tg->ncut - 1));
    else
        f.message = (int64_t)(z % (uint64_t)tg->ref_sends);
    return f;
}

/* ---- minimisation ----------------------------------------------------------------- */

/* One run of round-robin but at the deviations given (lenient: one that
 * cannot run is skipped), noting where it left round-robin. */
static int deviation_run(const target *tg, const ppv_fault *fault, const int64_t *steps,
                         const int32_t *ranks, int64_t n, outcome *out, char *err,
                         size_t errlen) {
    ppv_policy p;
    memset(&p, 0, sizeof p);
    p.kind = PPV_POLICY_REPLAY;
    p.lenient = 1; /* no decisions: round-robin between the deviations */
    p.dev_step = steps;
    p.dev_rank = ranks;
    p.ndev = n;
    p.note_deviations = 1;
    return fuzz_run_once(tg, &p, fault, 1, out, err, errlen);
}

/* The failing run best (a forced prefix, then round-robin) as the few
 * steps where it must leave round-robin: its deviations, dropped in blocks,
 * the largest first (ddmin's complements), down to single ones, the last
 * first, while the run still fails without them. best becomes the run of
 * the deviations kept, which it notes exactly. */
static int minimise_deviations(const target *tg, const ppv_fault *fault, outcome *best,
                               char *err, size_t errlen) {
    /* best's decisions again, noting where they leave round-robin */
    ppv_policy p;
    memset(&p, 0, sizeof p);
    p.kind = PPV_POLICY_REPLAY;
    p.replay = ppv_world_decisions(best->world, &p.nreplay);
    p.note_deviations = 1;
    outcome cur;
    if (fuzz_run_once(tg, &p, fault, 1, &cur, err, errlen) < 0) return -1;
    int rc = 0;
    for (int dropped = 1; dropped && !cur.pass && rc == 0;) {
        const int64_t *cs;
        const int32_t *cr;
        int64_t n = ppv_world_deviations(cur.world, &cs, &cr);
        int64_t *ts = malloc((size_t)(n ? n : 1) * sizeof *ts);
        int32_t *tr = malloc((size_t)(n ? n : 1) * sizeof *tr);
        if (!ts || !tr) rc = -1, snprintf(err, errlen, "out of memory");
        dropped = 0;
        for (int64_t size = n; size >= 1 && !dropped && rc == 0; size /= 2)
            for (int64_t at = n - size; at >= 0 && !dropped && rc == 0; at -= size) {
                /* without deviations [at, at + size) (cs: cur's, n > 0 here) */
                memcpy(ts, cs, (size_t)at * sizeof *ts);
                memcpy(tr, cr, (size_t)at * sizeof *tr);
                memcpy(ts + at, cs + at + size, (size_t)(n - at - size) * sizeof *ts);
                memcpy(tr + at, cr + at + size, (size_t)(n - at - size) * sizeof *tr);
                outcome o;
                if (deviation_run(tg, fault, ts, tr, n - size, &o, err, errlen) < 0) {
                    rc = -1;
                } else if (!o.pass) { /* still fails: they go, and that run is cur */
                    ppv_world_free(cur.world);
                    cur = o;
                    dropped = 1;
                } else {
                    ppv_world_free(o.world);
                }
                if (at > 0 && at < size) at = size; /* the block at 0 next */
            }
        free(ts);
        free(tr);
    }
    if (rc < 0 || cur.pass) { /* cur.pass cannot happen with a deterministic engine */
        ppv_world_free(cur.world);
        return rc;
    }
    ppv_world_free(best->world);
    *best = cur;
    return 0;
}

/* The failing run made small: its fault dropped when it fails without,
 * else moved to the earliest send (chunk) where the run still fails; then
 * the shortest prefix of its decisions that still fails with round-robin
 * after it (binary search between the passing reference, prefix 0, and
 * the whole run); then its fewest deviations (minimise_deviations). */
static int minimise(const target *tg, ppv_fuzz_report *rep, char *err, size_t errlen) {
    ppv_fault kept = rep->failing_fault;
    const ppv_fault *fault = &kept;
    int64_t n = 0;
    const int32_t *d = ppv_world_decisions(rep->failing, &n);
    int32_t *copy = malloc((size_t)(n ? n : 1) * sizeof *copy);
    if (!copy) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    memcpy(copy, d, (size_t)n * sizeof *copy);
    ppv_policy p;
    memset(&p, 0, sizeof p);
    p.kind = PPV_POLICY_REPLAY;
    p.replay = copy;
    p.lenient = 1;
    int64_t lo = 0, hi = n;
    outcome best;
    memset(&best, 0, sizeof best);
    /* the fault first: when the run fails without it too, it goes */
    if (fault->kind != PPV_FAULT_NONE) {
        p.nreplay = n;
        if (fuzz_run_once(tg, &p, &no_fault, 1, &best, err, errlen) < 0) goto fail;
        if (!best.pass) kept = no_fault;
        ppv_world_free(best.world);
        memset(&best, 0, sizeof best);
    }
    /* then the earliest point it still fails at: the first send (a cut:
     * the first chunk) where the same decisions fail with it */
    int64_t first = kept.kind == PPV_FAULT_CUT ? 1 : 0;
    for (int64_t at = first; fault->kind != PPV_FAULT_NONE && at < kept.message; at++) {
        ppv_fault earlier = {kept.kind, at};
        p.nreplay = n;
        if (fuzz_run_once(tg, &p, &earlier, 0, &best, err, errlen) < 0) goto fail;
        if (!best.pass) kept.message = at;
        memset(&best, 0, sizeof best);
    }
    /* with a fault, round-robin alone may already fail */
    if (fault->kind != PPV_FAULT_NONE) {
        p.nreplay = 0;
        if (fuzz_run_once(tg, &p, fault, 1, &best, err, errlen) < 0) goto fail;
        if (!best.pass) {
            hi = 0;
            goto done;
        }
        ppv_world_free(best.world);
        memset(&best, 0, sizeof best);
    }
    /* the whole prefix replays the failure exactly */
    p.nreplay = n;
    if (fuzz_run_once(tg, &p, fault, 1, &best, err, errlen) < 0) goto fail;
    if (best.pass) { /* the same decisions, another end: the target decides, not ppv */
        snprintf(rep->minimal_failure, sizeof rep->minimal_failure,
                 "the failing run's decisions did not fail again: the target is not "
                 "deterministic (it differs from run to run under the same interleaving: a "
                 "clock, rand(), state kept from run to run): %.700s",
                 best.why);
    }
    while (hi - lo > 1 && !best.pass) {
        int64_t mid = lo + (hi - lo) / 2;
        p.nreplay = mid;
        outcome o;
        if (fuzz_run_once(tg, &p, fault, 1, &o, err, errlen) < 0) goto fail;
        if (o.pass) {
            lo = mid;
            ppv_world_free(o.world);
        } else {
            hi = mid;
            ppv_world_free(best.world);
            best = o;
        }
    }
done:
    rep->minimal_prefix = hi;
    rep->minimal_fault = kept;
    /* then the fewest steps that must leave round-robin */
    if (!best.pass && best.world) {
        if (minimise_deviations(tg, fault, &best, err, errlen) < 0) goto fail;
        const int64_t *ds;
        const int32_t *dr;
        rep->minimal_deviations = ppv_world_deviations(best.world, &ds, &dr);
    }
    /* the minimal run is round-robin's order at every step, which passed as
     * the reference: the interleaving is the reference's, so the target
     * changed */
    int target_changed = !best.pass && best.world && rep->minimal_deviations == 0 &&
                         kept.kind == PPV_FAULT_NONE;
    if (target_changed) drop_interleaving_claim(best.why);
    if (target_changed)
        snprintf(rep->minimal_failure, sizeof rep->minimal_failure,
                 "the reference's own order fails now, with no decision forced: the target, "
                 "not the interleaving, differs from run to run (it is not deterministic: a "
                 "clock, rand(), state kept from run to run): %.700s",
                 best.why);
    else if (!best.pass)
        snprintf(rep->minimal_failure, sizeof rep->minimal_failure, "%s", best.why);
    if (!best.pass) snprintf(rep->minimal_story, sizeof rep->minimal_story, "%s", best.story);
    rep->minimal = best.world;
    free(copy);
    return 0;
fail:
    ppv_world_free(best.world);
    free(copy);
    return -1;
}

/* ---- the workers ------------------------------------------------------------------ */

/* Runs 1, 2, ... are handed out in order to the workers; the result is the
 * smallest failing run, which does not depend on how the workers were
 * timed: every run below it was handed out before it and completes. */
typedef struct pool {
    const target *tg;
    pthread_mutex_t mu;
    int64_t next, limit; /* the next run to hand out; stop before limit */
    int64_t done;        /* runs completed */
    double t0, shown;
    int64_t best;        /* the smallest failing run so far */
    int campaign;        /* a round of a campaign: its block is run whole, the clock and
                            the display are the campaign's */
    int32_t joined;      /* workers started in this pool_run: each takes the next number */
    uint64_t *digests;   /* [run] its trace digest */
    int64_t ndig, capdig;
    int failed;
    char err[512];
} pool;

static void *worker(void *arg) {
    pool *p = arg;
    const ppv_fuzz_options *o = p->tg->o;
    pthread_mutex_lock(&p->mu);
    int32_t job = p->joined++;
    pthread_mutex_unlock(&p->mu);
    for (;;) {
        pthread_mutex_lock(&p->mu);
        double t = fuzz_now();
        int stop = p->failed || p->next >= p->limit || p->next > p->best ||
                   (!p->campaign && o->seconds > 0 && t - p->t0 >= o->seconds);
        int64_t i = p->next;
        if (!stop) p->next++;
        if (!stop && !p->campaign && o->progress && t - p->shown >= 0.2) {
            ppv_fuzz_progress pr = {1 + p->done, 0, t - p->t0};
            o->progress(o->progress_ctx, &pr);
            p->shown = t;
        }
        pthread_mutex_unlock(&p->mu);
        if (stop) return NULL;
        ppv_policy pol = policy_of(p->tg, i);
        ppv_fault fault = fault_of(p->tg, i);
        outcome r;
        char err[512];
        int rc = fuzz_run_job(p->tg, job, &pol, &fault, 0, &r, err, sizeof err);
        pthread_mutex_lock(&p->mu);
        if (rc < 0 && !p->failed) {
            p->failed = 1;
            snprintf(p->err, sizeof p->err, "%s", err);
        }
        if (rc == 0 && i >= p->capdig) {
            int64_t cap = p->capdig ? p->capdig : 1024;
            while (cap <= i) cap *= 2;
            uint64_t *d = realloc(p->digests, (size_t)cap * sizeof *d);
            if (!d) {
                p->failed = 1;
                snprintf(p->err, sizeof p->err, "out of memory");
            } else {
                p->digests = d;
                p->capdig = cap;
            }
        }
        if (rc == 0 && i < p->capdig) {
            p->digests[i] = r.trace_digest;
            if (i + 1 > p->ndig) p->ndig = i + 1;
            p->done++;
            if (!r.pass && i < p->best) p->best = i;
        }
        pthread_mutex_unlock(&p->mu);
    }
}

/* Runs the workers to the end; 0, or -1 with p->err. */
static int pool_run(pool *p, int32_t jobs) {
    pthread_mutex_init(&p->mu, NULL);
    p->joined = 0;
    pthread_t tid[64];
    int32_t started = 0;
    for (int32_t j = 1; j < jobs && j < 64; j++)
        if (pthread_create(&tid[started], NULL, worker, p) == 0) started++;
    worker(p); /* this thread is a worker too */
    for (int32_t j = 0; j < started; j++)
        pthread_join(tid[j], NULL);
    pthread_mutex_destroy(&p->mu);
    return p->failed ? -1 : 0;
}

/* The runs in rounds across a campaign's processes (ppv_fuzz_campaign):
 * each round splits the next runs into one block per process, which its
 * workers run whole; a round with a failure in it is the last. The digests
 * of the runs this process made up to the first failure go into mine, and
 * the runs each process made (past the failure too, in its round) are
 * added to made_by.
 * 0, or -1 with err (this process's error or another's). */
static int pool_campaign(pool *p, int32_t jobs, digest_set *mine, int64_t *made_by,
                         char *err, size_t errlen) {
    const ppv_fuzz_options *o = p->tg->o;
    const ppv_fuzz_campaign *c = o->campaign;
    int32_t N = c->size;
    round_state *all = calloc((size_t)N, sizeof *all);
    if (!all) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int64_t limit = o->runs > 0 ? o->runs : INT64_MAX, chunk = 4 * (int64_t)jobs;
    p->campaign = 1;
    int rc = 0;
    while (p->next < limit) {
        /* this round: runs [base, base + size), process r's block the r-th
         * of N nearly equal parts */
        int64_t base = p->next, size = limit - base;
        if (size > chunk * N) size = chunk * N;
        int64_t from = base + size * c->rank / N, to = base + size * (c->rank + 1) / N;
        round_state me;
        memset(&me, 0, sizeof me);
        double t = fuzz_now();
        int64_t done = p->done;
        p->next = from;
        p->limit = to;
        if (pool_run(p, jobs) < 0) {
            me.failed = 1;
            snprintf(me.err, sizeof me.err, "%s", p->err);
        }
        me.best = p->best;
        me.runs = p->done - done;
        /* room for this round's digests now: after the exchange, a process
         * that failed alone would leave the others waiting */
        if (!me.failed && set_reserve(mine, (size_t)(to - from)) < 0) {
            me.failed = 1;
            snprintf(me.err, sizeof me.err, "out of memory");
        }
        me.busy = fuzz_now() - t;
        me.elapsed = fuzz_now() - p->t0;
        if (campaign_exchange(c, &me, all, err, errlen) < 0 ||
            campaign_failed(c, all, err, errlen) == 0) {
            rc = -1;
            break;
        }
        int64_t best = INT64_MAX;
        double elapsed = 0;
        for (int32_t i = 0; i < N; i++) {
            if (all[i].best < best) best = all[i].best;
            if (all[i].elapsed > elapsed) elapsed = all[i].elapsed;
        }
        for (int32_t i = 0; i < N; i++) made_by[i] += all[i].runs;
        /* the runs made here up to the first failure */
        int64_t made = to; /* runs [from, made) */
        if (p->best < made) made = p->best + 1;
        if (best < made) made = best + 1;
        for (int64_t i = from; i < made; i++)
            set_add(mine, p->digests[i]); /* reserved: it cannot fail */
        p->next = base + size;
        if (best != INT64_MAX) {
            p->best = best;
            break;
        }
        if (o->progress && c->rank == 0) {
            ppv_fuzz_progress pr = {p->next, 0, elapsed};
            o->progress(o->progress_ctx, &pr);
        }
        if (o->seconds > 0 && elapsed >= o->seconds) break;
        chunk = campaign_grow(all, N, chunk);
    }
    p->done = p->next - 1;
    free(all);
    return rc;
}

/* ---- the explorer ----------------------------------------------------------------- */

int ppv_fuzz(const ppv_fuzz_options *o, ppv_fuzz_report **out, char *err, size_t errlen) {
    *out = NULL;
    if (!!o->schedule + !!o->pp + !!o->program != 1) {
        snprintf(err, errlen, "give the explorer one target: a schedule, the pipeline or a "
                              "program");
        return -1;
    }
    if (o->runs <= 0 && !(o->seconds > 0)) {
        snprintf(err, errlen, "give a number of runs or a time");
        return -1;
    }
    if (o->jobs < 0 || o->jobs > 64) {
        snprintf(err, errlen, "--jobs %d: 1 to 64", o->jobs);
        return -1;
    }
    if ((o->faults & (1u << PPV_FAULT_CUT)) && (!o->pp || o->pp->replay || o->pp->chunks < 2)) {
        snprintf(err, errlen, "a cut fault is the pipeline's, with 2 chunks or more (pp)");
        return -1;
    }
    if (o->strategy == PPV_FUZZ_DFS && o->faults) {
        snprintf(err, errlen, "dfs explores the interleavings of the target as it is: faults "
                              "are put in by random, pct and portfolio");
        return -1;
    }
    if (o->strategy == PPV_FUZZ_DFS && o->jobs > 1) {
        snprintf(err, errlen, "dfs is one search (each run extends the last): it runs in one "
                              "job");
        return -1;
    }
    int lowest = o->strategy == PPV_FUZZ_PCT ? 1 : 2; /* 1: priorities alone */
    if (o->pct_depth < lowest || o->pct_depth > 64) {
        snprintf(err, errlen, "PCT depth %d: %d to 64", o->pct_depth, lowest);
        return -1;
    }
    ppv_fuzz_report *rep = calloc(1, sizeof *rep);
    digest_set seen = {0};
    if (!rep) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    rep->failing_run = -1;
    target tg = {.o = o};
    outcome ref;
    double t0 = fuzz_now(), shown = t0;
    if (reference(&tg, &ref, err, errlen) < 0) goto fail;
    rep->runs = 1;
    if (set_add(&seen, ref.trace_digest) < 0) goto oom;
    if (!ref.pass) { /* round-robin itself fails: run 0 is the counterexample */
        rep->found = 1;
        rep->failing_run = 0;
        rep->failing_policy.kind = PPV_POLICY_RR;
        rep->failing_steps = ref.steps;
        /* its output is not the reference's, though the reference ran this same order */
        int target_changed = ref.differs && o->pp && !o->pp->inject;
        if (target_changed) drop_interleaving_claim(ref.why);
        if (target_changed)
            snprintf(rep->failure, sizeof rep->failure,
                     "the reference's own order gave another output than the reference run "
                     "before it, with no decision forced: the target, not the interleaving, "
                     "differs from run to run (it is not deterministic: a clock, rand(), state "
                     "kept from run to run): %.600s",
                     ref.why);
        else
            snprintf(rep->failure, sizeof rep->failure, "%s", ref.why);
        snprintf(rep->minimal_failure, sizeof rep->minimal_failure, "%s", rep->failure);
        snprintf(rep->minimal_story, sizeof rep->minimal_story, "%s", ref.story);
        rep->failing = ref.world;
        ref.world = NULL;
        if (rep->failing) {
            /* already minimal: no decision is forced */
            int64_t n = 0;
            const int32_t *d = ppv_world_decisions(rep->failing, &n);
            ppv_policy p = {.kind = PPV_POLICY_REPLAY, .replay = d, .nreplay = n};
            outcome again;
            if (fuzz_run_once(&tg, &p, &no_fault, 1, &again, err, errlen) < 0) goto fail;
            rep->minimal = again.world;
        }
    }
    ppv_world_free(ref.world);
    if (!rep->found && o->strategy == PPV_FUZZ_DFS) {
        outcome bad;
        memset(&bad, 0, sizeof bad);
        if (fuzz_dfs(&tg, rep, &bad, t0, err, errlen) < 0) goto fail;
        if (rep->found) {
            rep->failing_policy.kind = PPV_POLICY_EXPLORE;
            rep->failing_steps = bad.steps;
            snprintf(rep->failure, sizeof rep->failure, "%s", bad.why);
            rep->failing = bad.world;
            if (minimise(&tg, rep, err, errlen) < 0) goto fail;
        }
    } else if (!rep->found) {
        pool pl;
        memset(&pl, 0, sizeof pl);
        pl.tg = &tg;
        pl.next = 1;
        pl.limit = o->runs > 0 ? o->runs : INT64_MAX;
        pl.t0 = t0;
        pl.shown = shown;
        pl.best = INT64_MAX;
        pl.digests = NULL;
        int32_t jobs = o->jobs > 1 ? o->jobs : 1;
        if (campaign_on(o)) {
            /* the interleavings every process saw, in one set */
            digest_set mine = {0};
            void *each = NULL;
            int64_t n = 0;
            rep->nprocesses = o->campaign->size;
            rep->process_runs = calloc((size_t)rep->nprocesses, sizeof *rep->process_runs);
            int bad = !rep->process_runs;
            if (bad) snprintf(err, errlen, "out of memory");
            bad = bad || pool_campaign(&pl, jobs, &mine, rep->process_runs, err, errlen) < 0;
            if (!bad) { /* the set's slots, empty ones too: 0 adds nothing below */
                bad = campaign_gather(o->campaign, mine.slot, (int64_t)mine.cap,
                                      sizeof *mine.slot, &each, &n, err, errlen) < 0;
                for (int64_t i = 0; !bad && i < n; i++)
                    if (((uint64_t *)each)[i] && set_add(&seen, ((uint64_t *)each)[i]) < 0) {
                        snprintf(err, errlen, "out of memory");
                        bad = 1;
                    }
            }
            free(each);
            free(mine.slot);
            free(pl.digests);
            if (bad) goto fail;
        } else {
            if (pool_run(&pl, jobs) < 0) {
                snprintf(err, errlen, "%s", pl.err);
                free(pl.digests);
                goto fail;
            }
            /* every run below the first failure was made, whatever the
             * workers' timing: count those (and no later one) */
            int64_t upto = pl.best != INT64_MAX ? pl.best : pl.next - 1;
            for (int64_t i = 1; i <= upto && i < pl.ndig; i++)
                if (set_add(&seen, pl.digests[i]) < 0) {
                    free(pl.digests);
                    goto oom;
                }
            free(pl.digests);
        }
        rep->runs = 1 + (pl.best != INT64_MAX ? pl.best : pl.done);
        if (pl.best != INT64_MAX) {
            rep->found = 1;
            rep->failing_run = pl.best;
            rep->failing_policy = policy_of(&tg, pl.best);
            rep->failing_fault = fault_of(&tg, pl.best);
            /* again (in a campaign, on every process), keeping its decisions */
            outcome again;
            if (fuzz_run_once(&tg, &rep->failing_policy, &rep->failing_fault, 1, &again, err,
                              errlen) < 0)
                goto fail;
            rep->failing_steps = again.steps;
            snprintf(rep->failure, sizeof rep->failure, "%s", again.why);
            rep->failing = again.world;
            if (minimise(&tg, rep, err, errlen) < 0) goto fail;
        }
    }
    rep->distinct = o->strategy == PPV_FUZZ_DFS ? rep->classes : (int64_t)seen.n;
    rep->seconds = fuzz_now() - t0;
    if (rep->found) {
        rep->failing_reference = fuzz_reference(&tg, &rep->failing_fault);
        rep->minimal_reference = fuzz_reference(&tg, &rep->minimal_fault);
    }
    if (o->progress) {
        ppv_fuzz_progress pr = {rep->runs, rep->distinct, rep->seconds};
        o->progress(o->progress_ctx, &pr);
    }
    free(seen.slot);
    target_free(&tg);
    *out = rep;
    return 0;
oom:
    snprintf(err, errlen, "out of memory");
fail:
    free(seen.slot);
    target_free(&tg);
    ppv_fuzz_report_free(rep);
    return -1;
}

void ppv_fuzz_report_free(ppv_fuzz_report *r) {
    if (!r) return;
    ppv_world_free(r->minimal);
    ppv_world_free(r->failing);
    free(r->process_runs);
    free(r);
}
