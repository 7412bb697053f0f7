/* gen_auto.c - `ppv gen auto`: the schedule with the smallest makespan ppv
 * can find for p ranks and m microbatches under the given costs and a
 * per-rank activation cap.
 *
 * Costs are a rank's share of the model: a kind with v stages a rank runs
 * each action at 1/v of them, so kinds of any v compare fairly.
 *
 * 1. Candidates: every named kind at every stage count it takes (1..4 a
 *    rank), and, when there is a cap, the memory-capped greedy at that cap
 *    with 1 and 2 stages a rank (under a cap in bytes alone, at 1, 2, 4,
 *    ... p microbatches: the bytes of --model decide which fit). Each is checked (lowered, deadlock under
 *    rendezvous, peak, makespan under the costs); the best that fits the
 *    cap is the start: smallest makespan, then smallest peak, then the
 *    order above.
 * 2. Local search: adjacent actions of one rank are swapped, in a fixed
 *    order (rank, then position); a swap is kept when the check still
 *    passes, every rank stays within the cap (activations, and bytes
 *    under a model) and the makespan falls. The
 *    scan starts again after every kept swap and ends when a whole scan
 *    keeps none, or after `budget` checks.
 * Everything is deterministic: the same parameters give the same schedule.
 * The time limit is a safety stop, reported when it acts, since a result
 * cut short by time depends on the machine.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gen_internal.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The score of a checked schedule; ok 0 when it fails or does not fit.
 * bytes: the largest rank's weights, gradients, optimizer state and peak
 * activations under p->model (0 without one). */
typedef struct score {
    int ok;
    double makespan, peak, bytes;
} score;

/* The check's options for s: the costs are a rank's whole share of the
 * model, so with v stages a rank each compute action costs 1/v of them
 * (a message costs the same). */
static ppv_check_options options_for(const ppv_schedule *s, const ppv_gen_auto_params *p) {
    ppv_check_options o = ppv_check_defaults();
    double v = !p->per_action && s->nranks > 0 && s->nstages > s->nranks
                   ? (double)s->nstages / s->nranks
                   : 1.0;
    o.costs = p->costs;
    o.costs.f /= v, o.costs.b /= v, o.costs.w /= v;
    return o;
}

/* s checked as p judges it: its costs, or each stage's (p->stages, or
 * the model's split over s's stages). 0 with *rep, or -1 (s is then no
 * candidate: another number of stages than the cost file's, say). */
static int check_candidate(const ppv_schedule *s, const ppv_gen_auto_params *p,
                           ppv_check_report **rep) {
    ppv_check_options o = options_for(s, p);
    char err[256];
    ppv_stage_costs derived = {0, NULL, ""};
    *rep = NULL;
    if (p->model_costs && p->model) {
        ppv_mem_model mm = {0, 0, 0};
        if (ppv_stage_costs_from_model(p->model, s->nstages, p->costs.comm, &mm, &derived, err,
                                       sizeof err) < 0)
            return -1;
        o.stages = &derived;
    } else if (p->stages) {
        if (p->stages->n != s->nstages) return -1;
        o.stages = p->stages;
    }
    int rc = ppv_schedule_check(s, &o, rep, err, sizeof err);
    ppv_stage_costs_free(&derived);
    return rc;
}

static score evaluate(const ppv_schedule *s, const ppv_gen_auto_params *p) {
    score sc = {0, 0, 0, 0};
    ppv_check_report *rep = NULL;
    char err[256];
    if (check_candidate(s, p, &rep) < 0) return sc;
    if (rep->ok && rep->simulated) {
        sc.makespan = rep->makespan;
        for (int32_t r = 0; r < rep->nranks; r++)
            if (rep->peak_activation[r] > sc.peak) sc.peak = rep->peak_activation[r];
        sc.ok = p->cap <= 0 || sc.peak <= p->cap + 1e-9;
    }
    ppv_check_report_free(rep);
    ppv_memory_bytes mb;
    if (sc.makespan > 0 && p->model) {
        if (ppv_schedule_memory_bytes(s, p->model, &mb, err, sizeof err) < 0) {
            sc.ok = 0, sc.makespan = 0;
            return sc;
        }
        for (int32_t r = 0; r < mb.nranks; r++) {
            double w, g, o;
            ppv_memory_split(p->model, mb.params[r], &w, &g, &o);
            if (w + g + o + mb.activations[r] > sc.bytes) sc.bytes = w + g + o + mb.activations[r];
        }
        ppv_memory_bytes_free(&mb);
        if (p->mem_cap_bytes > 0 && sc.bytes > p->mem_cap_bytes) sc.ok = 0;
    }
    return sc;
}

static int better(score a, score b) {
    if (!a.ok) return 0;
    if (!b.ok) return 1;
    if (a.makespan != b.makespan) return a.makespan < b.makespan;
    return a.bytes != b.bytes ? a.bytes < b.bytes : a.peak < b.peak;
}

/* The local search climbs from each of the STARTS best candidates in turn
 * (a climb from the best alone can stop on a worse summit than one from
 * the second best). */
enum { STARTS = 4 };

/* The search's state while it collects candidates: the best STARTS, best
 * first. */
typedef struct pool {
    const ppv_gen_auto_params *p;
    ppv_gen_auto_report *rep;
    int n;
    ppv_schedule *best[STARTS];
    score bs[STARTS];
    char label[STARTS][64];
    double least_peak, least_bytes; /* of the candidates that pass the check; < 0: none */
} pool;

/* Scores candidate s (taking it) and keeps it among the best STARTS (after
 * those it ties with: the earlier candidate ranks first). */
static void consider(pool *pl, ppv_schedule *s, const char *label) {
    score sc = evaluate(s, pl->p);
    pl->rep->candidates++;
    if (sc.makespan > 0 && (pl->least_peak < 0 || sc.peak < pl->least_peak))
        pl->least_peak = sc.peak;
    if (sc.makespan > 0 && pl->p->model && (pl->least_bytes < 0 || sc.bytes < pl->least_bytes))
        pl->least_bytes = sc.bytes;
    if (!sc.ok) {
        ppv_schedule_free(s);
        return;
    }
    int at = pl->n;
    while (at > 0 && better(sc, pl->bs[at - 1])) at--;
    if (at == STARTS) {
        ppv_schedule_free(s);
        return;
    }
    if (pl->n == STARTS) ppv_schedule_free(pl->best[--pl->n]);
    memmove(&pl->best[at + 1], &pl->best[at], sizeof pl->best[0] * (size_t)(pl->n - at));
    memmove(&pl->bs[at + 1], &pl->bs[at], sizeof pl->bs[0] * (size_t)(pl->n - at));
    memmove(&pl->label[at + 1], &pl->label[at], sizeof pl->label[0] * (size_t)(pl->n - at));
    pl->best[at] = s, pl->bs[at] = sc;
    snprintf(pl->label[at], sizeof pl->label[at], "%s", label);
    pl->n++;
}

/* The memory-capped greedy with v stages a rank holding at most cap
 * microbatches' activations, or NULL when it cannot be built. */
/* An empty schedule of ranks and m microbatches for a builder to fill, or
 * NULL; and s finished, or NULL (s freed) when built < 0 or it fails. */
static ppv_schedule *candidate(int32_t ranks, int32_t m) {
    ppv_schedule *s = ppv_schedule_new(ranks);
    if (!s) return NULL;
    s->nmb = m;
    s->dialect = PPV_DIALECT_CURRENT;
    return s;
}

static ppv_schedule *finished(ppv_schedule *s, int built) {
    char why[256];
    if (built < 0 || ppv_schedule_finish(s, why, sizeof why) < 0) {
        ppv_schedule_free(s);
        return NULL;
    }
    return s;
}

ppv_schedule *ppv_gen_capped_greedy(int32_t ranks, int32_t m, int32_t v, double cap_mb) {
    int32_t cap = (int32_t)(cap_mb * v + 1e-9); /* the greedy counts stage activations */
    ppv_schedule *s = cap < v ? NULL : candidate(ranks, m);
    if (!s) return NULL;
    snprintf(s->name, sizeof s->name, "capped-greedy-p%d-m%d-v%d", ranks, m, v);
    return finished(s, ppv_gen_greedy_capped(s, ranks, m, v, cap));
}

/* The zero-bubble authors' cost-aware heuristic at a cap of `cap`
 * activations (one stage a rank: microbatches), or its ZB-V counterpart
 * (v_shape: chunk activations, half a microbatch each), or NULL when it
 * cannot be built. */
static ppv_schedule *heuristic(int32_t ranks, int32_t m, const ppv_costs *costs, int32_t cap,
                               int v_shape) {
    ppv_schedule *s = candidate(ranks, m);
    if (!s) return NULL;
    snprintf(s->name, sizeof s->name, "%s-heuristic-p%d-m%d-cap%d", v_shape ? "zbv" : "zb", ranks,
             m, cap);
    return finished(s, v_shape ? ppv_gen_zbv_heuristic(s, ranks, m, costs, cap)
                               : ppv_gen_zb_heuristic(s, ranks, m, costs, cap));
}

/* Swaps actions i and i+1 of a program, keeping each slot's step. */
static void swap_adjacent(ppv_program *pr, int32_t i) {
    ppv_action a = pr->acts[i], b = pr->acts[i + 1];
    int32_t sa = a.step, sb = b.step;
    pr->acts[i] = b;
    pr->acts[i + 1] = a;
    pr->acts[i].step = sa;
    pr->acts[i + 1].step = sb;
}

/* A swap the check could accept: two compute actions of one rank that are
 * not one cell (OVERLAP_F_B) and not one stage's same microbatch. */
static int swappable(const ppv_action *a, const ppv_action *b) {
    if (a->overlap || b->overlap) return 0;
    if ((ppv_action_flags(a->kind) & PPV_AF_COMM) || (ppv_action_flags(b->kind) & PPV_AF_COMM))
        return 0;
    return !(a->stage == b->stage && a->mb == b->mb);
}

/* Swaps adjacent actions of s while a swap shortens the makespan and the
 * check still passes, from *bs (updated). 0 when a whole scan kept no swap,
 * 1 when the budget or the time limit stopped it. */
static int climb(ppv_schedule *s, score *bs, const ppv_gen_auto_params *p,
                 ppv_gen_auto_report *rep, double t0, int64_t *improvements) {
    int improved = 1;
    while (improved) {
        improved = 0;
        for (int32_t r = 0; r < s->nranks && !improved; r++) {
            ppv_program *pr = &s->prog[r];
            for (int32_t i = 0; i + 1 < pr->n && !improved; i++) {
                if (!swappable(&pr->acts[i], &pr->acts[i + 1])) continue;
                if (p->budget > 0 && rep->evaluated >= p->budget) return 1;
                if (p->time_limit > 0 && now_s() - t0 > p->time_limit) {
                    rep->stopped_by_time = 1;
                    return 1;
                }
                swap_adjacent(pr, i);
                score sc = evaluate(s, p);
                rep->evaluated++;
                if (better(sc, *bs) && sc.makespan < bs->makespan) {
                    *bs = sc;
                    ++*improvements;
                    improved = 1;
                } else {
                    swap_adjacent(pr, i);
                }
            }
        }
    }
    return 0;
}

/* 2. The local search from each start in pl; the best summit wins (the
 * earlier start on a tie). Fills rep and *out; 0. */
static int search(pool *pl_, const ppv_gen_auto_params *p, ppv_gen_auto_report *rep, double t0,
                  ppv_schedule **out) {
    pool pl = *pl_;
    rep->candidates = pl_->rep->candidates;
    ppv_schedule *best = NULL;
    score bs = {0};
    int stopped = 0;
    for (int k = 0; k < pl.n; k++) {
        ppv_schedule *cur = pl.best[k];
        pl.best[k] = NULL;
        score cs = pl.bs[k];
        int64_t improvements = 0;
        if (!stopped) {
            rep->starts++;
            stopped = climb(cur, &cs, p, rep, t0, &improvements);
        }
        if (!best || (better(cs, bs) && cs.makespan < bs.makespan)) {
            ppv_schedule_free(best);
            best = cur, bs = cs;
            snprintf(rep->start, sizeof rep->start, "%s", pl.label[k]);
            rep->start_makespan = pl.bs[k].makespan;
            rep->improvements = improvements;
        } else {
            ppv_schedule_free(cur);
        }
    }
    rep->converged = !stopped;
    rep->makespan = bs.makespan;
    rep->peak = bs.peak;
    rep->peak_bytes = bs.bytes;
    rep->stages_per_rank = best->nstages / best->nranks;
    ppv_check_report *cr = NULL;
    if (check_candidate(best, p, &cr) == 0) {
        rep->bubble_ratio = cr->bubble_ratio;
        ppv_check_report_free(cr);
    }
    *out = best;
    return 0;
}

int ppv_generate_auto(const ppv_gen_auto_params *p, ppv_schedule **out, ppv_gen_auto_report *rep,
                      char *err, size_t errlen) {
    *out = NULL;
    memset(rep, 0, sizeof *rep);
    double t0 = now_s();
    pool pl;
    memset(&pl, 0, sizeof pl);
    pl.p = p, pl.rep = rep, pl.least_peak = pl.least_bytes = -1;
    const char *const *names = ppv_generator_names();
    char why[512], label[64];
    /* 1. the candidates: every kind (PyTorch's classes included) */
    for (int k = 0; names[k]; k++)
        for (int32_t v = 1; v <= 4; v++) {
            ppv_gen_params gp = {p->ranks, p->microbatches, v};
            ppv_schedule *s = NULL;
            if (ppv_generate(names[k], &gp, &s, why, sizeof why) < 0) continue;
            snprintf(label, sizeof label, "%s -v %d", names[k], v);
            consider(&pl, s, label);
        }
    /* the capped greedy at the cap; under a cap in bytes alone, at 1, 2,
     * 4, ... and p microbatches (the bytes decide which fit) */
    for (int32_t v = 1; v <= 2; v++) {
        if (p->cap > 0) {
            ppv_schedule *s = ppv_gen_capped_greedy(p->ranks, p->microbatches, v, p->cap);
            snprintf(label, sizeof label, "capped greedy -v %d", v);
            if (s) consider(&pl, s, label);
        } else if (p->model && p->mem_cap_bytes > 0) {
            for (int32_t c = 1;; c = c * 2 < p->ranks ? c * 2 : p->ranks) {
                ppv_schedule *s = ppv_gen_capped_greedy(p->ranks, p->microbatches, v, c);
                snprintf(label, sizeof label, "capped greedy -v %d (%d microbatches)", v, c);
                if (s) consider(&pl, s, label);
                if (c >= p->ranks) break;
            }
        }
    }
    /* the authors' cost-aware heuristics at the cap: one stage a rank (at
     * ZB-H2's 2p - 1 without a cap) and ZB-V (at p microbatches without
     * one, as the reference); ZB-V's actions cost half a rank's share */
    {
        int32_t cap = p->cap > 0 ? (int32_t)(p->cap + 1e-9) : 2 * p->ranks - 1;
        ppv_schedule *s = heuristic(p->ranks, p->microbatches, &p->costs, cap, 0);
        snprintf(label, sizeof label, "cost-aware heuristic (cap %d)", cap);
        if (s) consider(&pl, s, label);
        int32_t chunks = p->cap > 0 ? (int32_t)(2 * p->cap + 1e-9) : 2 * p->ranks;
        ppv_costs half = {p->costs.f / 2, p->costs.b / 2, p->costs.w / 2, p->costs.comm};
        s = heuristic(p->ranks, p->microbatches, &half, chunks, 1); /* NULL below 2 chunks */
        snprintf(label, sizeof label, "cost-aware ZB-V heuristic (cap %d chunks)", chunks);
        if (s) consider(&pl, s, label);
    }
    if (pl.n == 0) {
        if (pl.least_peak < 0)
            return ppv_errf(err, errlen, "no schedule of any kind for p=%d m=%d", p->ranks,
                            p->microbatches);
        if (p->model && p->mem_cap_bytes > 0 && p->cap <= 0)
            return ppv_errf(err, errlen,
                            "no schedule fits a cap of %.0f bytes (%.2f GiB) a rank: the least "
                            "ppv builds for p=%d m=%d needs %.0f (%.2f GiB)",
                            p->mem_cap_bytes, p->mem_cap_bytes / 1073741824.0, p->ranks,
                            p->microbatches, pl.least_bytes, pl.least_bytes / 1073741824.0);
        return ppv_errf(err, errlen,
                        "no schedule fits a cap of %g activations a rank: the smallest peak ppv "
                        "builds for p=%d m=%d is %g",
                        p->cap, p->ranks, p->microbatches, pl.least_peak);
    }
    int rc = search(&pl, p, rep, t0, out);
    snprintf((*out)->name, sizeof(*out)->name, "auto-p%d-m%d", p->ranks, p->microbatches);
    return rc;
}

int ppv_generate_tuned(const char *kind, const ppv_gen_params *gp, const ppv_costs *costs_in,
                       const ppv_stage_costs *stages, int64_t budget, double time_limit,
                       ppv_schedule **out, ppv_gen_auto_report *rep, char *err, size_t errlen) {
    *out = NULL;
    memset(rep, 0, sizeof *rep);
    double t0 = now_s();
    ppv_schedule *own = NULL;
    if (ppv_generate(kind, gp, &own, err, errlen) < 0) return -1;
    if (stages && stages->n != own->nstages) {
        int32_t n = own->nstages;
        ppv_schedule_free(own);
        return ppv_errf(err, errlen, "%s gives costs for %d stage%s, but %s has %d",
                        stages->source, (int)stages->n, stages->n == 1 ? "" : "s", kind, (int)n);
    }
    ppv_costs mean = *costs_in; /* the heuristic's: the stages' mean */
    if (stages) {
        mean.f = mean.b = mean.w = 0;
        for (int32_t k = 0; k < stages->n; k++)
            mean.f += stages->s[k].f / stages->n, mean.b += stages->s[k].b / stages->n,
                mean.w += stages->s[k].w / stages->n;
    }
    const ppv_costs *costs = &mean;
    ppv_gen_auto_params p = {own->nranks, own->nmb, *costs_in, 0, budget, time_limit, NULL, 0, 1,
                             stages, 0};
    score sc = evaluate(own, &p);
    if (!sc.makespan) {
        ppv_schedule_free(own);
        return ppv_errf(err, errlen, "%s: the kind's own order does not pass the check", kind);
    }
    p.cap = sc.peak; /* never above the kind's own peak */
    char name[sizeof own->name];
    snprintf(name, sizeof name, "%s", own->name);
    pool pl;
    memset(&pl, 0, sizeof pl);
    pl.p = &p, pl.rep = rep, pl.least_peak = pl.least_bytes = -1;
    consider(&pl, own, kind);
    /* ZB-H1 and ZB-H2: the authors' cost-aware heuristic at the kind's cap */
    int h1 = strcmp(kind, "zb-h1") == 0, h2 = strcmp(kind, "zb-h2") == 0;
    int zbv = strcmp(kind, "zbv") == 0;
    char label[64];
    if ((h1 || h2) && (gp->stages_per_rank == 0 || gp->stages_per_rank == 1)) {
        int32_t cap = h1 ? p.ranks : 2 * p.ranks - 1;
        ppv_schedule *s = heuristic(p.ranks, p.microbatches, costs, cap, 0);
        snprintf(label, sizeof label, "cost-aware heuristic (cap %d)", cap);
        if (s) consider(&pl, s, label);
    }
    if (zbv && (gp->stages_per_rank == 0 || gp->stages_per_rank == 2)) {
        ppv_schedule *s = heuristic(p.ranks, p.microbatches, costs, 2 * p.ranks, 1);
        snprintf(label, sizeof label, "cost-aware ZB-V heuristic (cap %d chunks)", 2 * p.ranks);
        if (s) consider(&pl, s, label);
    }
    if (pl.n == 0) /* the kind's own order always fits its own peak */
        return ppv_errf(err, errlen, "%s: out of memory", kind);
    int rc = search(&pl, &p, rep, t0, out);
    rep->cap = p.cap;
    snprintf((*out)->name, sizeof(*out)->name, "%s", name);
    return rc;
}
