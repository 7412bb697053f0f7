/* gen_auto.c - `ppv gen auto`: the schedule with the smallest makespan ppv
 * can find for p ranks and m microbatches under the given costs and a
 * per-rank activation cap.
 *
 * Costs are a rank's share of the model: a kind with v stages a rank runs
 * each action at 1/v of them, so kinds of any v compare fairly.
 *
 * 1. Candidates: every named kind at every stage count it takes (1..4 a
 *    rank), and, when there is a cap, the memory-capped greedy at that cap
 *    with 1 and 2 stages a rank. Each is checked (lowered, deadlock under
 *    rendezvous, peak, makespan under the costs); the best that fits the
 *    cap is the start: smallest makespan, then smallest peak, then the
 *    order above.
 * 2. Local search: adjacent actions of one rank are swapped, in a fixed
 *    order (rank, then position); a swap is kept when the check still
 *    passes, every rank stays within the cap and the makespan falls. The
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

#include "gen.h"

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The score of a checked schedule; ok 0 when it fails or does not fit. */
typedef struct score {
    int ok;
    double makespan, peak;
} score;

/* The check's options for s: the costs are a rank's whole share of the
 * model, so with v stages a rank each compute action costs 1/v of them
 * (a message costs the same). */
static ppv_check_options options_for(const ppv_schedule *s, const ppv_gen_auto_params *p) {
    ppv_check_options o = ppv_check_defaults();
    double v = s->nranks > 0 && s->nstages > s->nranks ? (double)s->nstages / s->nranks : 1.0;
    o.costs = p->costs;
    o.costs.f /= v, o.costs.b /= v, o.costs.w /= v;
    return o;
}

static score evaluate(const ppv_schedule *s, const ppv_gen_auto_params *p) {
    score sc = {0, 0, 0};
    ppv_check_options o = options_for(s, p);
    ppv_check_report *rep = NULL;
    char err[256];
    if (ppv_schedule_check(s, &o, &rep, err, sizeof err) < 0) return sc;
    if (rep->ok && rep->simulated) {
        sc.makespan = rep->makespan;
        for (int32_t r = 0; r < rep->nranks; r++)
            if (rep->peak_activation[r] > sc.peak) sc.peak = rep->peak_activation[r];
        sc.ok = p->cap <= 0 || sc.peak <= p->cap + 1e-9;
    }
    ppv_check_report_free(rep);
    return sc;
}

static int better(score a, score b) {
    if (!a.ok) return 0;
    if (!b.ok) return 1;
    return a.makespan < b.makespan || (a.makespan == b.makespan && a.peak < b.peak);
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

int ppv_generate_auto(const ppv_gen_auto_params *p, ppv_schedule **out, ppv_gen_auto_report *rep,
                      char *err, size_t errlen) {
    *out = NULL;
    memset(rep, 0, sizeof *rep);
    double t0 = now_s();
    ppv_schedule *best = NULL;
    score bs = {0, 0, 0};
    double least_peak = -1;
    const char *const *names = ppv_generator_names();
    char why[512];
    /* 1. the candidates */
    for (int k = 0; names[k]; k++)
        for (int32_t v = 1; v <= 4; v++) {
            ppv_gen_params gp = {p->ranks, p->microbatches, v};
            ppv_schedule *s = NULL;
            if (ppv_generate(names[k], &gp, &s, why, sizeof why) < 0) continue;
            score sc = evaluate(s, p);
            rep->candidates++;
            if (sc.makespan > 0 && (least_peak < 0 || sc.peak < least_peak)) least_peak = sc.peak;
            if (better(sc, bs)) {
                ppv_schedule_free(best);
                best = s, bs = sc;
                snprintf(rep->start, sizeof rep->start, "%s -v %d", names[k], v);
            } else {
                ppv_schedule_free(s);
            }
        }
    for (int32_t v = 1; p->cap > 0 && v <= 2; v++) {
        int32_t cap = (int32_t)(p->cap * v + 1e-9); /* the greedy counts stage activations */
        ppv_schedule *s = ppv_schedule_new(p->ranks);
        if (!s) break;
        s->nmb = p->microbatches;
        s->dialect = PPV_DIALECT_CURRENT;
        snprintf(s->name, sizeof s->name, "capped-greedy-p%d-m%d-v%d", p->ranks, p->microbatches,
                 v);
        if (cap < v || ppv_gen_greedy_capped(s, p->ranks, p->microbatches, v, cap) < 0 ||
            ppv_schedule_finish(s, why, sizeof why) < 0) {
            ppv_schedule_free(s);
            continue;
        }
        score sc = evaluate(s, p);
        rep->candidates++;
        if (sc.makespan > 0 && (least_peak < 0 || sc.peak < least_peak)) least_peak = sc.peak;
        if (better(sc, bs)) {
            ppv_schedule_free(best);
            best = s, bs = sc;
            snprintf(rep->start, sizeof rep->start, "capped greedy -v %d", v);
        } else {
            ppv_schedule_free(s);
        }
    }
    if (!best) {
        if (least_peak < 0)
            return ppv_errf(err, errlen, "no schedule of any kind for p=%d m=%d", p->ranks,
                            p->microbatches);
        return ppv_errf(err, errlen,
                        "no schedule fits a cap of %g activations a rank: the smallest peak ppv "
                        "builds for p=%d m=%d is %g",
                        p->cap, p->ranks, p->microbatches, least_peak);
    }
    rep->start_makespan = bs.makespan;
    /* 2. the local search */
    int improved = 1;
    while (improved) {
        improved = 0;
        for (int32_t r = 0; r < best->nranks && !improved; r++) {
            ppv_program *pr = &best->prog[r];
            for (int32_t i = 0; i + 1 < pr->n && !improved; i++) {
                if (!swappable(&pr->acts[i], &pr->acts[i + 1])) continue;
                if (p->budget > 0 && rep->evaluated >= p->budget) goto stop;
                if (p->time_limit > 0 && now_s() - t0 > p->time_limit) {
                    rep->stopped_by_time = 1;
                    goto stop;
                }
                swap_adjacent(pr, i);
                score sc = evaluate(best, p);
                rep->evaluated++;
                if (better(sc, bs) && sc.makespan < bs.makespan) {
                    bs = sc;
                    rep->improvements++;
                    improved = 1;
                } else {
                    swap_adjacent(pr, i);
                }
            }
        }
    }
    rep->converged = 1;
stop:
    snprintf(best->name, sizeof best->name, "auto-p%d-m%d", p->ranks, p->microbatches);
    rep->makespan = bs.makespan;
    rep->peak = bs.peak;
    rep->stages_per_rank = best->nstages / best->nranks;
    ppv_check_options o = options_for(best, p);
    ppv_check_report *cr = NULL;
    if (ppv_schedule_check(best, &o, &cr, why, sizeof why) == 0) {
        rep->bubble_ratio = cr->bubble_ratio;
        ppv_check_report_free(cr);
    }
    *out = best;
    return 0;
}
