/* gen_optimal.c - `ppv gen optimal`: the schedule of smallest makespan for
 * p ranks and m microbatches under the costs and a memory cap, proven
 * optimal by a MILP solver (GLPK, a Debian package), for small sizes.
 *
 * The model is time-indexed (Sousa and Wolsey's formulation of machine
 * scheduling): time is cut into ticks (the costs scaled to integers), and
 * a binary x[j][t] says job j (an F, I or W of one stage and microbatch)
 * starts at tick t. Each job starts once; a rank runs one job at a time;
 * an F follows the previous stage's F of its microbatch by that stage's
 * message time, the last stage's I its F, an I the next stage's I by the
 * message time, a W its I; on each stage the microbatches run in order
 * (F, I and W each), as every PyTorch and zero-bubble schedule runs them;
 * with a cap, a rank's activations (an F allocates its stage's, an I frees
 * its fraction, a W the rest, as `ppv check` counts them) never pass it.
 * The makespan C is at least every job's end, and is minimised. Each job's
 * ticks run from its earliest start (the longest chain before it) to its
 * latest (the horizon, the best named kind's makespan, less the longest
 * chain after it), which keeps the model small.
 *
 * Before the solver, a local search improves the best named kind's order
 * (improve, below; where no kind fits the cap, one microbatch at a time,
 * which is then the solver's first solution too); where it reaches the
 * ranks' load bound that is the proof and no solver runs, and where the
 * time limit cuts the solver short above it, the searched schedule is the
 * best found.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gen_internal.h"

#ifdef PPV_HAVE_GLPK
#include <dlfcn.h>
#include <glpk.h>

/* GLPK is loaded when asked (Debian's libglpk40), as ppv loads MPI: ppv
 * and libppv link without it, and only `gen optimal` needs it. */
static struct {
    int loaded;
    int (*term_hook)(int (*)(void *, const char *), void *);
    glp_prob *(*create_prob)(void);
    void (*set_obj_dir)(glp_prob *, int);
    int (*add_cols)(glp_prob *, int);
    void (*set_col_kind)(glp_prob *, int, int);
    void (*set_obj_coef)(glp_prob *, int, double);
    void (*set_col_bnds)(glp_prob *, int, int, double, double);
    int (*add_rows)(glp_prob *, int);
    void (*set_row_bnds)(glp_prob *, int, int, double, double);
    void (*set_mat_row)(glp_prob *, int, int, const int[], const double[]);
    int (*get_num_rows)(glp_prob *);
    void (*init_iocp)(glp_iocp *);
    int (*intopt)(glp_prob *, const glp_iocp *);
    int (*mip_status)(glp_prob *);
    double (*mip_obj_val)(glp_prob *);
    double (*mip_col_val)(glp_prob *, int);
    void (*delete_prob)(glp_prob *);
    int (*ios_reason)(glp_tree *);
    int (*ios_heur_sol)(glp_tree *, const double *);
    void (*init_smcp)(glp_smcp *);
    int (*simplex)(glp_prob *, const glp_smcp *);
} gl;

/* 0, or -1 with the reason. */
static int load_glpk(char *err, size_t errlen) {
    if (gl.loaded) return 0;
    const char *path = getenv("PPV_GLPK_LIBRARY");
    void *h = dlopen(path && *path ? path : "libglpk.so.40", RTLD_NOW | RTLD_LOCAL);
    if (!h && !(path && *path)) h = dlopen("libglpk.so", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return ppv_errf(err, errlen, "optimal: cannot load GLPK, the solver that proves the "
                        "optimum (Debian: apt-get install libglpk40): %s", dlerror());
#define GLPK_FN(name)                                                                              \
    if (!(*(void **)&gl.name = dlsym(h, "glp_" #name)))                                            \
        return ppv_errf(err, errlen, "optimal: the GLPK library has no glp_%s", #name);
    GLPK_FN(term_hook) GLPK_FN(create_prob) GLPK_FN(set_obj_dir) GLPK_FN(add_cols)
    GLPK_FN(set_col_kind) GLPK_FN(set_obj_coef) GLPK_FN(set_col_bnds) GLPK_FN(add_rows)
    GLPK_FN(set_row_bnds) GLPK_FN(set_mat_row) GLPK_FN(get_num_rows) GLPK_FN(init_iocp)
    GLPK_FN(intopt) GLPK_FN(mip_status) GLPK_FN(mip_obj_val) GLPK_FN(mip_col_val)
    GLPK_FN(delete_prob) GLPK_FN(ios_reason) GLPK_FN(ios_heur_sol) GLPK_FN(init_smcp)
    GLPK_FN(simplex)
#undef GLPK_FN
    gl.loaded = 1;
    return 0;
}
#endif

enum { JOB_F, JOB_I, JOB_W };
enum { MAX_VARIABLES = 30000 }; /* binaries the solver is given at most */

typedef struct job {
    int32_t stage, mb, kind, rank;
    int64_t d;             /* duration, ticks */
    int64_t est, lst;      /* earliest and latest start */
    int col0;              /* its first column (tick est) */
} job;

typedef struct model {
    int32_t P, S, m;
    const ppv_optimal_params *p;
    double scale; /* ticks a cost unit */
    int64_t f[2048], i[2048], w[2048], c[2048]; /* per stage, ticks */
    double act[2048], ifrac[2048];
    double act_unit; /* the largest stage's activation: the cap rows count in it */
    job *jobs;
    int32_t njobs;
    int64_t horizon;
    /* per stage: microbatch k + held[st]'s F waits for microbatch k's
     * activation to be given back (by freer[st], its I or W), or 0 (the
     * cap allows every microbatch at once, or there is none) */
    int64_t held[2048];
    int freer[2048];
} model;

/* Whether the ranks' activations are capped, and rank q's cap. */
static int capped(const ppv_optimal_params *p) {
    return p->rank_caps || p->cap > 0;
}

static double cap_of(const ppv_optimal_params *p, int32_t q) {
    return p->rank_caps ? p->rank_caps[q] : p->cap;
}

static int32_t rank_of(const model *md, int32_t st) {
    return md->p->shape_v ? (st < md->P ? st : 2 * md->P - 1 - st) : st;
}

/* The ticks a message from stage a to stage b takes: a's message time,
 * none when both are on one rank (as ppv check lowers them). */
static int64_t message(const model *md, int32_t a, int32_t b) {
    return rank_of(md, a) == rank_of(md, b) ? 0 : md->c[a];
}

static int32_t job_index(const model *md, int32_t st, int32_t mb, int32_t kind) {
    return (st * md->m + mb) * 3 + kind;
}

/* The ticks of cost v (scale ticks a unit), or -1 when it is not a whole
 * number of them. */
static int64_t ticks(double v, double scale) {
    double t = v * scale, r = nearbyint(t);
    return fabs(t - r) < 1e-9 * fmax(1.0, fabs(t)) ? (int64_t)r : -1;
}

/* The stage's costs: the file's, or the costs for every stage. */
static ppv_stage_cost cost_of(const ppv_optimal_params *p, int32_t st, int32_t S, int32_t P) {
    if (p->stages) return p->stages->s[st];
    ppv_stage_cost c = {p->costs.f, p->costs.b, p->costs.w, p->costs.comm,
                        (double)P / S, 0, 0};
    return c;
}

/* What the cap implies on each stage (model.held, model.freer): a stage
 * whose held + 1 activations pass its rank's cap starts microbatch k +
 * held's F only after microbatch k's activation is given back (its I
 * ends; with no I-fraction, its W), since the stage's microbatches run in
 * order and those from k on all hold theirs until then. */
static void cap_precedences(model *md) {
    for (int32_t st = 0; st < md->S; st++) {
        md->held[st] = 0;
        md->freer[st] = md->ifrac[st] > 0 ? JOB_I : JOB_W;
        double a = md->act[st] / md->act_unit;
        if (!capped(md->p) || !(a > 0)) continue;
        double q = floor(cap_of(md->p, rank_of(md, st)) / md->act_unit / a + 1e-9);
        if (q >= 1 && q < md->m) md->held[st] = (int64_t)q;
    }
}

/* The job that must end before job F (stage st, microbatch mb) starts by
 * the cap, or NULL. */
static const job *cap_before(const model *md, int32_t st, int32_t mb) {
    int64_t q = md->held[st];
    return q && mb >= q ? &md->jobs[job_index(md, st, (int32_t)(mb - q), md->freer[st])] : NULL;
}

/* The longest chain of jobs (durations and messages) ending just before
 * job j (est) or starting just after it (tail), over the precedences
 * (the cap's too). */
static void chains(model *md, int64_t *tail) {
    int32_t S = md->S, m = md->m;
    /* forward pass: F along the stages, then I back, then W */
    for (int32_t mb = 0; mb < m; mb++) {
        for (int32_t st = 0; st < S; st++) {
            job *F = &md->jobs[job_index(md, st, mb, JOB_F)];
            int64_t e = 0;
            if (st > 0) {
                const job *pf = &md->jobs[job_index(md, st - 1, mb, JOB_F)];
                e = pf->est + pf->d + message(md, st - 1, st);
            }
            if (mb > 0) {
                const job *pm = &md->jobs[job_index(md, st, mb - 1, JOB_F)];
                if (pm->est + pm->d > e) e = pm->est + pm->d;
            }
            const job *freed = cap_before(md, st, mb);
            if (freed && freed->est + freed->d > e) e = freed->est + freed->d;
            F->est = e;
        }
        for (int32_t st = S - 1; st >= 0; st--) {
            job *I = &md->jobs[job_index(md, st, mb, JOB_I)];
            const job *F = &md->jobs[job_index(md, st, mb, JOB_F)];
            int64_t e = F->est + F->d;
            if (st < S - 1) {
                const job *ni = &md->jobs[job_index(md, st + 1, mb, JOB_I)];
                if (ni->est + ni->d + message(md, st + 1, st) > e)
                    e = ni->est + ni->d + message(md, st + 1, st);
            }
            if (mb > 0) {
                const job *pm = &md->jobs[job_index(md, st, mb - 1, JOB_I)];
                if (pm->est + pm->d > e) e = pm->est + pm->d;
            }
            I->est = e;
            job *W = &md->jobs[job_index(md, st, mb, JOB_W)];
            e = I->est + I->d;
            if (mb > 0) {
                const job *pw = &md->jobs[job_index(md, st, mb - 1, JOB_W)];
                if (pw->est + pw->d > e) e = pw->est + pw->d;
            }
            W->est = e;
        }
    }
    /* backward pass: the longest chain from a job's start to the end */
    for (int32_t k = 0; k < md->njobs; k++) tail[k] = md->jobs[k].d;
    for (int32_t mb = m - 1; mb >= 0; mb--) {
        for (int32_t st = 0; st < S; st++) {
            int32_t w = job_index(md, st, mb, JOB_W);
            if (mb < m - 1) {
                int32_t nw = job_index(md, st, mb + 1, JOB_W);
                if (md->jobs[w].d + tail[nw] > tail[w]) tail[w] = md->jobs[w].d + tail[nw];
            }
            int64_t q = md->held[st];
            if (q && md->freer[st] == JOB_W && mb + q < m) {
                int32_t nf = job_index(md, st, (int32_t)(mb + q), JOB_F);
                if (md->jobs[w].d + tail[nf] > tail[w]) tail[w] = md->jobs[w].d + tail[nf];
            }
        }
        for (int32_t st = 0; st < S; st++) {
            int32_t i = job_index(md, st, mb, JOB_I), w = job_index(md, st, mb, JOB_W);
            int64_t t = md->jobs[i].d + tail[w];
            if (st > 0) {
                int32_t pi = job_index(md, st - 1, mb, JOB_I);
                int64_t g = md->jobs[i].d + message(md, st, st - 1) + tail[pi];
                if (g > t) t = g;
            }
            if (mb < m - 1) {
                int32_t ni = job_index(md, st, mb + 1, JOB_I);
                if (md->jobs[i].d + tail[ni] > t) t = md->jobs[i].d + tail[ni];
            }
            int64_t q = md->held[st];
            if (q && md->freer[st] == JOB_I && mb + q < m) {
                int32_t nf = job_index(md, st, (int32_t)(mb + q), JOB_F);
                if (md->jobs[i].d + tail[nf] > t) t = md->jobs[i].d + tail[nf];
            }
            tail[i] = t;
        }
        for (int32_t st = S - 1; st >= 0; st--) {
            int32_t f = job_index(md, st, mb, JOB_F), i = job_index(md, st, mb, JOB_I);
            int64_t t = md->jobs[f].d + tail[i];
            if (st < S - 1) {
                int32_t nf = job_index(md, st + 1, mb, JOB_F);
                int64_t g = md->jobs[f].d + message(md, st, st + 1) + tail[nf];
                if (g > t) t = g;
            }
            if (mb < m - 1) {
                int32_t nf = job_index(md, st, mb + 1, JOB_F);
                if (md->jobs[f].d + tail[nf] > t) t = md->jobs[f].d + tail[nf];
            }
            tail[f] = t;
        }
    }
}

/* The seed's improvement: a local search over each rank's order of its
 * jobs, before the solver. The solver starts from the best named kind;
 * where that kind is a tick or two above the optimum, GLPK's branching
 * may not find better in minutes (the uneven V at p = 4, m = 8: ZB-V's
 * 73 kept for 1544 s, where a schedule of 72 exists). A job moved a few
 * places within its rank's order finds such schedules in milliseconds,
 * and a schedule that reaches the ranks' load bound needs no proof
 * beyond it.
 *
 * An order is timed as ppv check times a program: each job starts as soon
 * as its rank is free and the jobs it follows have ended (with their
 * messages); an order that deadlocks, or passes a rank's cap at an F,
 * is not a schedule. A move takes one job of one rank (chosen by a
 * counter-based random stream with a fixed seed) to a place at most
 * SEARCH_REACH away; it is kept when the makespan, then the sum of the
 * jobs' ends, is no worse (so the search walks across plateaus). It
 * stops at the load bound, after SEARCH_STALE moves in a row that improve
 * neither, or after SEARCH_MOVES: the same model gives the same result on
 * any machine.
 *
 * The solver still starts from the best named kind, not from the searched
 * order: a better first solution sent GLPK's branching the long way in a
 * measured case (p = 4, m = 8 within 3 activations: 31 proven in 0.7 s
 * from the kinds' 33, in 12 s from the searched 32). */
enum { SEARCH_REACH = 6, SEARCH_MOVES = 20000, SEARCH_STALE = 4000 };
#define SEARCH_SEED 0x7070765f6f707455ull /* the stream's fixed seed */

typedef struct search {
    int32_t *seq;             /* every rank's jobs in order, rank after rank */
    int32_t *off;             /* [P + 1]: rank q's are seq[off[q]..off[q + 1]) */
    int64_t *start, *end;     /* [njobs], the last timing */
    int32_t *next;            /* [P], the timing's scratch */
    int64_t *free_at;
    double *held;
    int64_t span, sum;        /* the last timing's makespan and sum of ends */
} search;

/* The jobs j must wait for, with the gap after each one's end: at most 3. */
static int waits_for(const model *md, const job *j, int32_t *pre, int64_t *gap) {
    int n = 0;
    if (j->mb > 0) pre[n] = job_index(md, j->stage, j->mb - 1, j->kind), gap[n++] = 0;
    if (j->kind == JOB_F && j->stage > 0)
        pre[n] = job_index(md, j->stage - 1, j->mb, JOB_F),
        gap[n++] = message(md, j->stage - 1, j->stage);
    if (j->kind == JOB_I) {
        pre[n] = job_index(md, j->stage, j->mb, JOB_F), gap[n++] = 0;
        if (j->stage < md->S - 1)
            pre[n] = job_index(md, j->stage + 1, j->mb, JOB_I),
            gap[n++] = message(md, j->stage + 1, j->stage);
    }
    if (j->kind == JOB_W) pre[n] = job_index(md, j->stage, j->mb, JOB_I), gap[n++] = 0;
    return n;
}

/* Times the order in sr (start, end, span, sum). 0, or -1 when it
 * deadlocks or passes a cap. */
static int time_order(const model *md, search *sr) {
    for (int32_t k = 0; k < md->njobs; k++) sr->end[k] = -1;
    for (int32_t q = 0; q < md->P; q++)
        sr->next[q] = sr->off[q], sr->free_at[q] = 0, sr->held[q] = 0;
    int32_t done = 0;
    sr->span = 0, sr->sum = 0;
    for (int progress = 1; progress;) {
        progress = 0;
        for (int32_t q = 0; q < md->P; q++)
            while (sr->next[q] < sr->off[q + 1]) {
                int32_t k = sr->seq[sr->next[q]], pre[3];
                const job *j = &md->jobs[k];
                int64_t gap[3], at = sr->free_at[q];
                int n = waits_for(md, j, pre, gap), ready = 1;
                for (int e = 0; e < n && ready; e++) {
                    ready = sr->end[pre[e]] >= 0;
                    if (ready && sr->end[pre[e]] + gap[e] > at) at = sr->end[pre[e]] + gap[e];
                }
                if (!ready) break;
                if (capped(md->p)) {
                    double a = md->act[j->stage] / md->act_unit;
                    if (j->kind == JOB_F) {
                        sr->held[q] += a;
                        if (sr->held[q] > cap_of(md->p, q) / md->act_unit + 1e-9) return -1;
                    } else {
                        sr->held[q] -= (j->kind == JOB_I ? md->ifrac[j->stage]
                                                         : 1 - md->ifrac[j->stage]) * a;
                    }
                }
                sr->start[k] = at;
                sr->end[k] = at + j->d;
                sr->free_at[q] = sr->end[k];
                if (sr->end[k] > sr->span) sr->span = sr->end[k];
                sr->sum += sr->end[k];
                sr->next[q]++, done++, progress = 1;
            }
    }
    return done == md->njobs ? 0 : -1;
}

/* Moves seq[i] to place t within one rank's stretch. */
static void move_job(int32_t *seq, int32_t i, int32_t t) {
    int32_t k = seq[i];
    if (t > i) memmove(&seq[i], &seq[i + 1], (size_t)(t - i) * sizeof *seq);
    else memmove(&seq[t + 1], &seq[t], (size_t)(i - t) * sizeof *seq);
    seq[t] = k;
}

/* The local search from sr's order (which times), down to the makespan
 * bound lb; sr ends timed at the best order found. Returns the moves
 * tried. */
static int64_t improve(const model *md, search *sr, int64_t lb) {
    int64_t tried = 0, stale = 0;
    int64_t span = sr->span, sum = sr->sum;
    while (span > lb && tried < SEARCH_MOVES && stale < SEARCH_STALE) {
        uint64_t r = ppv_rng_bits(SEARCH_SEED, 0, (uint64_t)tried++);
        int32_t q = (int32_t)(r % (uint64_t)md->P);
        int32_t n = sr->off[q + 1] - sr->off[q];
        if (n < 2) continue;
        int32_t i = (int32_t)((r >> 16) % (uint64_t)n);
        int32_t d = (int32_t)((r >> 40) % (2 * SEARCH_REACH)) - SEARCH_REACH;
        int32_t t = i + (d >= 0 ? d + 1 : d); /* never 0 */
        if (t < 0) t = 0;
        if (t > n - 1) t = n - 1;
        if (t == i) continue;
        int32_t *base = sr->seq + sr->off[q];
        move_job(base, i, t);
        int ok = time_order(md, sr) == 0 && (sr->span < span ||
                                             (sr->span == span && sr->sum <= sum));
        if (ok) {
            stale = sr->span < span || sr->sum < sum ? 0 : stale + 1;
            span = sr->span, sum = sr->sum;
        } else {
            move_job(base, t, i);
            stale++;
        }
    }
    time_order(md, sr); /* the kept order's times (the last one tried may have failed) */
    return tried;
}

/* The check's options for the model's costs. */
static ppv_check_options check_options(const ppv_optimal_params *p) {
    ppv_check_options o = ppv_check_defaults();
    o.costs = p->costs;
    o.stages = p->stages;
    return o;
}

/* The horizon: the smallest makespan of a named kind of the shape within
 * the cap, under the costs (a schedule the model must not do worse than),
 * in cost units; or the fully sequential run's when none fits. */
static double horizon_units(const model *md, ppv_schedule **best_kind) {
    static const char *const one[] = {"1f1b", "zb-h1", "zb-h2", "gpipe"};
    static const char *const v[] = {"zbv", "v-half", "v-min"};
    const char *const *kinds = md->p->shape_v ? v : one;
    int n = md->p->shape_v ? 3 : 4;
    ppv_check_options o = check_options(md->p);
    double best = 0;
    for (int32_t st = 0; st < md->S; st++) {
        ppv_stage_cost c = cost_of(md->p, st, md->S, md->P);
        best += (c.f + c.b + 2 * c.comm) * md->m;
    }
    for (int k = 0; k <= n; k++) {
        ppv_gen_params gp = {md->P, md->m, md->p->shape_v ? 2 : 1};
        ppv_schedule *s = NULL;
        ppv_check_report *r = NULL;
        char err[256];
        if (k < n) {
            if (ppv_generate(kinds[k], &gp, &s, err, sizeof err) < 0) continue;
        } else if (md->p->cap > 0 && !md->p->rank_caps) { /* the greedy at the cap */
            if (!(s = ppv_gen_capped_greedy(md->P, md->m, gp.stages_per_rank, md->p->cap)))
                continue;
        } else {
            continue;
        }
        int placed = s->nstages == md->S; /* the model's placement, or no candidate */
        for (int32_t st = 0; placed && st < md->S; st++)
            placed = s->stage_rank[st] == rank_of(md, st);
        if (!placed) {
            ppv_schedule_free(s);
            continue;
        }
        if (ppv_schedule_check(s, &o, &r, err, sizeof err) == 0 && r->ok && r->simulated) {
            int within = 1;
            for (int32_t q = 0; q < r->nranks && capped(md->p); q++)
                within &= r->peak_activation[q] <= cap_of(md->p, q) * (1 + 1e-12) + 1e-9;
            if (within && r->makespan < best) {
                best = r->makespan;
                ppv_schedule_free(*best_kind);
                *best_kind = s;
                s = NULL;
            }
        }
        ppv_check_report_free(r);
        ppv_schedule_free(s);
    }
    return best;
}

/* The ticks and every stage's costs in them. 0, or -1 (err). */
static int model_costs(model *md, char *err, size_t errlen) {
    static const double scales[] = {1, 2, 4, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000};
    for (size_t k = 0; k < sizeof scales / sizeof *scales; k++) {
        md->scale = scales[k];
        int ok = 1;
        for (int32_t st = 0; st < md->S && ok; st++) {
            ppv_stage_cost c = cost_of(md->p, st, md->S, md->P);
            md->f[st] = ticks(c.f, md->scale);
            md->i[st] = ticks(c.b - c.w, md->scale);
            md->w[st] = ticks(c.w, md->scale);
            md->c[st] = ticks(c.comm, md->scale);
            md->act[st] = c.act;
            md->ifrac[st] = c.i_frac;
            md->act_unit = fmax(md->act_unit, c.act);
            ok = md->f[st] > 0 && md->i[st] > 0 && md->w[st] >= 0 && md->c[st] >= 0;
        }
        if (ok) {
            if (!(md->act_unit > 0)) md->act_unit = 1; /* nothing is held: any unit */
            return 0;
        }
    }
    /* which one is not (at 1/1000, the finest tick) */
    for (int32_t st = 0; st < md->S; st++) {
        ppv_stage_cost c = cost_of(md->p, st, md->S, md->P);
        const char *name = ticks(c.f, 1000) < 0 ? "F" : ticks(c.b - c.w, 1000) < 0 ? "I (B - W)"
                           : ticks(c.w, 1000) < 0 ? "W" : ticks(c.comm, 1000) < 0 ? "message"
                                                                                   : NULL;
        double v = !name ? 0 : name[0] == 'F' ? c.f : name[0] == 'I' ? c.b - c.w
                             : name[0] == 'W' ? c.w : c.comm;
        if (name)
            return ppv_errf(err, errlen, "optimal: every cost must be a multiple of 1/1000 of a "
                            "unit (the solver counts time in whole ticks): stage %d's %s is %.9g "
                            "(%s)%s", (int)st, name, v, md->p->stages ? md->p->stages->source
                                                                       : "--costs",
                            md->p->stages && !strcmp(md->p->stages->source, "the model")
                                ? "; give the model's times rounded in a cost file (ppv show "
                                  "--model SPEC --model-costs prints them)"
                                : "");
    }
    return ppv_errf(err, errlen, "optimal: every cost must be a multiple of 1/1000 of a unit (the "
                    "solver counts time in whole ticks)");
}

#ifdef PPV_HAVE_GLPK
static int quiet_glpk(void *info, const char *s) {
    (void)info, (void)s;
    return 1; /* nothing on the terminal */
}

/* The row being built: its columns and coefficients. */
typedef struct row {
    int *ind;
    double *val;
    int n, cap;
} row;

static int row_add(row *r, int col, double v) {
    if (r->n + 1 >= r->cap) {
        int cap = r->cap ? 2 * r->cap : 64;
        int *i = realloc(r->ind, (size_t)(cap + 1) * sizeof *i);
        if (!i) return -1;
        r->ind = i;
        double *d = realloc(r->val, (size_t)(cap + 1) * sizeof *d);
        if (!d) return -1;
        r->val = d;
        r->cap = cap;
    }
    r->n++;
    r->ind[r->n] = col; /* GLPK counts from 1 */
    r->val[r->n] = v;
    return 0;
}

/* Adds the row of r's entries with bounds (type GLP_UP, GLP_LO, GLP_FX,
 * GLP_DB) lo..hi, and empties r. */
static void row_put(glp_prob *lp, row *r, int type, double lo, double hi) {
    int k = gl.add_rows(lp, 1);
    gl.set_row_bnds(lp, k, type, lo, hi);
    gl.set_mat_row(lp, k, r->n, r->ind, r->val);
    r->n = 0;
}

static int col_of(const job *j, int64_t t) {
    return j->col0 + (int)(t - j->est);
}

/* "start(b) >= start(a) + gap", disaggregated (a stronger relaxation
 * than one row of start times): for every tick t of b's window, b has
 * started by t only if a had by t - gap. */
static int precede(glp_prob *lp, row *r, const job *a, const job *b, int64_t gap) {
    for (int64_t t = b->est; t <= b->lst; t++) {
        for (int64_t u = b->est; u <= t; u++)
            if (row_add(r, col_of(b, u), 1) < 0) return -1;
        for (int64_t u = a->est; u <= a->lst && u <= t - gap; u++)
            if (row_add(r, col_of(a, u), -1) < 0) return -1;
        row_put(lp, r, GLP_UP, 0, 0);
    }
    return 0;
}

/* The first solution the solver is given: the best named kind's starts
 * (a B split into its I and W), found by ppv check, as columns. */
typedef struct seed_solution {
    double *x; /* [cols + 1], GLPK's numbering; NULL when none */
    int given;
} seed_solution;

static void give_seed(glp_tree *T, void *info) {
    seed_solution *sd = info;
    if (sd->x && !sd->given && gl.ios_reason(T) == GLP_IHEUR) {
        sd->given = 1;
        gl.ios_heur_sol(T, sd->x);
    }
}
#endif

/* The seed's order: each rank's jobs as the best named kind runs them (a
 * B split into its I and W), into sr. 0, or -1 when the kind's actions
 * are not the model's jobs. */
static int seed_order(const model *md, const ppv_schedule *seed, search *sr) {
    if (!seed) return -1;
    int32_t n = 0;
    int ok = seed->nranks == md->P;
    for (int32_t q = 0; q < md->P && ok; q++) {
        sr->off[q] = n;
        for (int32_t i = 0; i < seed->prog[q].n && ok; i++) {
            const ppv_action *a = &seed->prog[q].acts[i];
            int kind = a->kind == PPV_ACT_F ? JOB_F
                       : a->kind == PPV_ACT_I || a->kind == PPV_ACT_B ? JOB_I
                       : a->kind == PPV_ACT_W ? JOB_W : -1;
            if (kind < 0) continue;
            ok = a->stage >= 0 && a->stage < md->S && a->mb >= 0 && a->mb < md->m;
            for (int pass = 0; ok && pass < (a->kind == PPV_ACT_B ? 2 : 1); pass++) {
                int32_t k = job_index(md, a->stage, a->mb, kind + pass);
                ok = md->jobs[k].rank == q && n < md->njobs;
                if (ok) sr->seq[n++] = k;
            }
        }
    }
    sr->off[md->P] = n;
    return ok && n == md->njobs ? 0 : -1; /* a job twice leaves another out: a deadlock */
}

/* One microbatch at a time, where no named kind fits the cap: each
 * microbatch's F through the stages, its I back, its W, before the next
 * one's, each rank's jobs in that order, into sr. A rank then holds one
 * microbatch's activations of its stages at most, as every schedule
 * does at that microbatch's last F: it fits any cap a schedule fits. */
static void sequential_order(const model *md, search *sr) {
    int32_t *at = sr->next; /* each rank's next place, counted from 0 */
    for (int32_t q = 0; q < md->P; q++) at[q] = 0;
    for (int32_t k = 0; k < md->njobs; k++) at[md->jobs[k].rank]++;
    sr->off[0] = 0;
    for (int32_t q = 0; q < md->P; q++) sr->off[q + 1] = sr->off[q] + at[q], at[q] = sr->off[q];
    for (int32_t mb = 0; mb < md->m; mb++)
        for (int32_t pass = 0; pass < 3; pass++)
            for (int32_t n = 0; n < md->S; n++) {
                int32_t st = pass == 1 ? md->S - 1 - n : n; /* the I's run back */
                int32_t k = job_index(md, st, mb, pass);
                sr->seq[at[md->jobs[k].rank]++] = k;
            }
}

/* The schedule of each rank's jobs in the order given (job indices, any
 * ranks' interleaving), or NULL (out of memory, or not a schedule). */
static ppv_schedule *schedule_of(const model *md, const int32_t *order) {
    static const ppv_action_kind kinds[3] = {PPV_ACT_F, PPV_ACT_I, PPV_ACT_W};
    ppv_schedule *s = ppv_schedule_new(md->P);
    int bad = !s;
    if (!bad) {
        s->nmb = md->m;
        s->dialect = PPV_DIALECT_CURRENT;
        snprintf(s->name, sizeof s->name, "optimal-p%d-m%d-%s", md->P, md->m,
                 md->p->shape_v ? "v" : "1f1b");
    }
    for (int32_t k = 0; k < md->njobs && !bad; k++) {
        const job *j = &md->jobs[order[k]];
        bad = ppv_gen_emit(s, j->rank, kinds[j->kind], j->stage, j->mb) < 0;
    }
    char why[256];
    if (bad || ppv_schedule_finish(s, why, sizeof why) < 0) {
        ppv_schedule_free(s);
        return NULL;
    }
    return s;
}

/* No rank ends before its earliest job can start plus all its work: the
 * makespan's lower bound, in ticks. */
static int64_t load_bound(const model *md) {
    int64_t lb = 0;
    for (int32_t q = 0; q < md->P; q++) {
        int64_t first = INT64_MAX, work = 0;
        for (int32_t k = 0; k < md->njobs; k++)
            if (md->jobs[k].rank == q) {
                work += md->jobs[k].d;
                if (md->jobs[k].est < first) first = md->jobs[k].est;
            }
        if (first != INT64_MAX && first + work > lb) lb = first + work;
    }
    return lb;
}

/* Each job's latest start (the horizon less the longest chain after it,
 * tail); returns the binaries the windows make. */
static int64_t windows(model *md, const int64_t *tail) {
    int64_t vars = 0;
    for (int32_t k = 0; k < md->njobs; k++) {
        job *j = &md->jobs[k];
        j->lst = md->horizon - tail[k];
        if (j->lst < j->est) j->lst = j->est; /* the horizon is reachable: never empty */
        vars += j->lst - j->est + 1;
    }
    return vars;
}

static double seconds_since(const struct timespec *t0) {
    struct timespec t1;
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0->tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0->tv_nsec);
}

#ifdef PPV_HAVE_GLPK
/* The seed's starts as a solution vector (GLPK's numbering, the makespan
 * last), or NULL when it has none the model can take. */
static double *seed_columns(const model *md, const ppv_schedule *seed, int cols) {
    if (!seed) return NULL;
    ppv_check_options o = check_options(md->p);
    o.keep_timeline = 1;
    ppv_check_report *r = NULL;
    char err[256];
    double *x = calloc((size_t)cols + 1, sizeof *x);
    if (!x || ppv_schedule_check(seed, &o, &r, err, sizeof err) < 0 || !r->ok || !r->spans) {
        free(x);
        ppv_check_report_free(r);
        return NULL;
    }
    int ok = 1;
    int64_t done = 0;
    for (int32_t q = 0; q < r->checked->nranks && ok; q++)
        for (int32_t i = 0; i < r->checked->prog[q].n && ok; i++) {
            const ppv_action *a = &r->checked->prog[q].acts[i];
            int kind = a->kind == PPV_ACT_F ? JOB_F
                       : a->kind == PPV_ACT_I || a->kind == PPV_ACT_B ? JOB_I
                       : a->kind == PPV_ACT_W ? JOB_W : -1;
            if (kind < 0) continue;
            if (a->stage < 0 || a->stage >= md->S || a->mb < 0 || a->mb >= md->m) {
                ok = 0;
                break;
            }
            int64_t t = ticks(r->spans[q][i].start, md->scale);
            for (int pass = 0; pass < (a->kind == PPV_ACT_B ? 2 : 1) && ok; pass++) {
                const job *j = &md->jobs[job_index(md, a->stage, a->mb, kind + pass)];
                int64_t at = t + (pass ? md->jobs[job_index(md, a->stage, a->mb, JOB_I)].d : 0);
                ok = t >= 0 && at >= j->est && at <= j->lst;
                if (ok) x[col_of(j, at)] = 1, done++;
            }
        }
    x[cols] = r->makespan * md->scale;
    ppv_check_report_free(r);
    if (!ok || done != md->njobs) {
        free(x);
        return NULL;
    }
    return x;
}
#endif

#ifdef PPV_HAVE_GLPK
/* The searched order's starts as a solution vector, where no named kind
 * gives one; NULL when a start falls outside its job's window. */
static double *searched_columns(const model *md, const search *sr, int cols) {
    double *x = calloc((size_t)cols + 1, sizeof *x);
    for (int32_t k = 0; k < md->njobs && x; k++) {
        const job *j = &md->jobs[k];
        if (sr->start[k] < j->est || sr->start[k] > j->lst) {
            free(x);
            return NULL;
        }
        x[col_of(j, sr->start[k])] = 1;
    }
    if (x) x[cols] = (double)sr->span;
    return x;
}

static int solve(const model *in, const search *sr, ppv_schedule **seed, int64_t lb,
                 const struct timespec *t0, ppv_schedule **out, ppv_optimal_report *rep,
                 char *err, size_t errlen);
#endif

int ppv_generate_optimal(const ppv_optimal_params *p, ppv_schedule **out, ppv_optimal_report *rep,
                         char *err, size_t errlen) {
    *out = NULL;
    memset(rep, 0, sizeof *rep);
    model md;
    memset(&md, 0, sizeof md);
    md.p = p;
    md.P = p->ranks;
    md.m = p->microbatches;
    md.S = p->shape_v ? 2 * p->ranks : p->ranks;
    if (md.P < 1 || md.m < 1 || md.S > 2048)
        return ppv_errf(err, errlen, "optimal: needs 1 to 1024 ranks and a microbatch or more");
    if (p->stages && p->stages->n != md.S)
        return ppv_errf(err, errlen, "%s gives costs for %d stage%s, but the %s shape on %d ranks "
                        "has %d", p->stages->source, (int)p->stages->n,
                        p->stages->n == 1 ? "" : "s", p->shape_v ? "V" : "1F1B", md.P, md.S);
    if (model_costs(&md, err, errlen) < 0) return -1;
    ppv_schedule *seed = NULL; /* the best named kind: the solver's first solution */
    double hu = horizon_units(&md, &seed);
    md.horizon = (int64_t)ceil(hu * md.scale - 1e-9);
    md.njobs = md.S * md.m * 3;
    md.jobs = calloc((size_t)md.njobs, sizeof *md.jobs);
    int64_t *tail = malloc((size_t)md.njobs * sizeof *tail);
    if (!md.jobs || !tail) {
        free(md.jobs), free(tail);
        ppv_schedule_free(seed);
        return ppv_errf(err, errlen, "out of memory");
    }
    for (int32_t st = 0; st < md.S; st++)
        for (int32_t mb = 0; mb < md.m; mb++)
            for (int32_t k = 0; k < 3; k++) {
                job *j = &md.jobs[job_index(&md, st, mb, k)];
                j->stage = st, j->mb = mb, j->kind = k, j->rank = rank_of(&md, st);
                j->d = k == JOB_F ? md.f[st] : k == JOB_I ? md.i[st] : md.w[st];
            }
    cap_precedences(&md);
    chains(&md, tail);
    int64_t vars = windows(&md, tail);
    rep->variables = vars;
    rep->horizon = seed ? hu : NAN; /* without a kind within the cap: the sequential run's */
    if (vars > MAX_VARIABLES) {
        free(md.jobs);
        free(tail);
        ppv_schedule_free(seed);
        return ppv_errf(err, errlen,
                        "optimal: p %d, m %d needs about %lld binary variables (%d jobs over a "
                        "horizon of %lld ticks), more than the %d this solver is given; it "
                        "proves small sizes (p up to 4, m up to 8 with one stage a rank)",
                        md.P, md.m, (long long)vars, (int)md.njobs, (long long)md.horizon,
                        MAX_VARIABLES);
    }
    /* the search from the best named kind (or one microbatch at a time);
     * a schedule at the load bound is proven by it */
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int64_t lb = load_bound(&md);
    rep->lower_bound = (double)lb / md.scale;
    rep->searched = NAN;
    search sr;
    memset(&sr, 0, sizeof sr);
    sr.seq = malloc((size_t)md.njobs * sizeof *sr.seq);
    sr.off = malloc((size_t)(md.P + 1) * sizeof *sr.off);
    sr.start = malloc((size_t)md.njobs * sizeof *sr.start);
    sr.end = malloc((size_t)md.njobs * sizeof *sr.end);
    sr.next = malloc((size_t)md.P * sizeof *sr.next);
    sr.free_at = malloc((size_t)md.P * sizeof *sr.free_at);
    sr.held = malloc((size_t)md.P * sizeof *sr.held);
    int searched = sr.seq && sr.off && sr.start && sr.end && sr.next && sr.free_at && sr.held;
    if (searched && !seed) sequential_order(&md, &sr);
    searched = searched && (!seed || seed_order(&md, seed, &sr) == 0) && time_order(&md, &sr) == 0;
    if (searched) {
        rep->moves = improve(&md, &sr, lb);
        rep->searched = (double)sr.span / md.scale;
        /* with no kind within the cap, the searched order is the horizon:
         * a far smaller model than the sequential run's */
        if (!seed && sr.span < md.horizon) {
            md.horizon = sr.span;
            rep->variables = windows(&md, tail);
        }
    }
    free(tail);
    int rc = 0;
    if (searched && sr.span <= lb) {
        *out = schedule_of(&md, sr.seq);
        rep->proven = rep->by_bound = 1;
        rep->makespan = rep->bound = rep->searched;
        rep->seconds = seconds_since(&t0);
        rc = *out ? 0 : ppv_errf(err, errlen, "out of memory");
    }
#ifndef PPV_HAVE_GLPK
    else rc = ppv_errf(err, errlen, "optimal: this ppv was built without GLPK's header (Debian: "
                       "libglpk-dev): it has no solver to prove an optimum with");
#else
    else if (load_glpk(err, errlen) < 0) rc = -1;
    else rc = solve(&md, searched ? &sr : NULL, &seed, lb, &t0, out, rep, err, errlen);
#endif
    free(sr.seq), free(sr.off), free(sr.start), free(sr.end), free(sr.next), free(sr.free_at);
    free(sr.held);
    free(md.jobs);
    ppv_schedule_free(seed);
    return rc;
}

#ifdef PPV_HAVE_GLPK
/* The MILP over the model, from the best named kind *seed (taken when it
 * is what is returned); the searched order sr (or NULL) is returned where
 * the time limit cuts the solver short above it. Fills *out and rep. 0,
 * or -1 (err). */
static int solve(const model *in, const search *sr, ppv_schedule **seed, int64_t lb,
                 const struct timespec *t0, ppv_schedule **out, ppv_optimal_report *rep,
                 char *err, size_t errlen) {
    model md = *in; /* its jobs are in's: their columns are set here */
    const ppv_optimal_params *p = md.p;
    int64_t vars = rep->variables;
    gl.term_hook(quiet_glpk, NULL);
    glp_prob *lp = gl.create_prob();
    gl.set_obj_dir(lp, GLP_MIN);
    int cols = (int)vars + 1, C = cols; /* the makespan is the last column */
    gl.add_cols(lp, cols);
    int col = 1;
    for (int32_t k = 0; k < md.njobs; k++) {
        md.jobs[k].col0 = col;
        for (int64_t t = md.jobs[k].est; t <= md.jobs[k].lst; t++, col++) {
            gl.set_col_kind(lp, col, GLP_BV);
            gl.set_obj_coef(lp, col, 0);
        }
    }
    gl.set_col_bnds(lp, C, GLP_LO, (double)lb, 0);
    gl.set_obj_coef(lp, C, 1);
    row r = {NULL, NULL, 0, 0};
    int oom = 0;
    /* each job starts once, and C is past its end */
    for (int32_t k = 0; k < md.njobs && !oom; k++) {
        const job *j = &md.jobs[k];
        for (int64_t t = j->est; t <= j->lst && !oom; t++) oom = row_add(&r, col_of(j, t), 1) < 0;
        if (!oom) row_put(lp, &r, GLP_FX, 1, 1);
        for (int64_t t = j->est; t <= j->lst && !oom; t++)
            oom = row_add(&r, col_of(j, t), -(double)(t + j->d)) < 0;
        if (!oom && !(oom = row_add(&r, C, 1) < 0)) row_put(lp, &r, GLP_LO, 0, 0);
    }
    /* the precedences, and each stage's microbatches in order */
    for (int32_t st = 0; st < md.S && !oom; st++)
        for (int32_t mb = 0; mb < md.m && !oom; mb++) {
            const job *F = &md.jobs[job_index(&md, st, mb, JOB_F)];
            const job *I = &md.jobs[job_index(&md, st, mb, JOB_I)];
            const job *W = &md.jobs[job_index(&md, st, mb, JOB_W)];
            if (st > 0)
                oom |= precede(lp, &r, &md.jobs[job_index(&md, st - 1, mb, JOB_F)], F,
                               md.jobs[job_index(&md, st - 1, mb, JOB_F)].d +
                                   message(&md, st - 1, st)) < 0;
            if (st == md.S - 1) oom |= precede(lp, &r, F, I, F->d) < 0;
            else {
                const job *ni = &md.jobs[job_index(&md, st + 1, mb, JOB_I)];
                oom |= precede(lp, &r, ni, I, ni->d + message(&md, st + 1, st)) < 0;
                oom |= precede(lp, &r, F, I, F->d) < 0;
            }
            oom |= precede(lp, &r, I, W, I->d) < 0;
            if (mb > 0)
                for (int k = 0; k < 3 && !oom; k++) {
                    const job *a = &md.jobs[job_index(&md, st, mb - 1, k)];
                    oom |= precede(lp, &r, a, &md.jobs[job_index(&md, st, mb, k)], a->d) < 0;
                }
        }
    /* what the cap implies (cap_precedences): valid inequalities that
     * tighten the LP bound the time index leaves loose */
    for (int32_t st = 0; st < md.S && !oom; st++)
        for (int32_t mb = 0; mb < md.m && !oom; mb++) {
            const job *freed = cap_before(&md, st, mb);
            if (freed)
                oom = precede(lp, &r, freed, &md.jobs[job_index(&md, st, mb, JOB_F)], freed->d) <
                      0;
        }
    /* a rank runs one job at a time; with a cap, its activations stay
     * within it at every tick */
    for (int32_t q = 0; q < md.P && !oom; q++)
        for (int64_t t = 0; t < md.horizon && !oom; t++) {
            for (int32_t k = 0; k < md.njobs && !oom; k++) {
                const job *j = &md.jobs[k];
                if (j->rank != q || j->d == 0) continue;
                for (int64_t s = t - j->d + 1; s <= t && !oom; s++)
                    if (s >= j->est && s <= j->lst) oom = row_add(&r, col_of(j, s), 1) < 0;
            }
            if (!oom && r.n) row_put(lp, &r, GLP_UP, 0, 1);
            if (!capped(p)) continue;
            for (int32_t k = 0; k < md.njobs && !oom; k++) {
                const job *j = &md.jobs[k];
                if (j->rank != q) continue;
                double a = md.act[j->stage] / md.act_unit;
                double v = j->kind == JOB_F ? a : j->kind == JOB_I ? -md.ifrac[j->stage] * a
                                                                   : -(1 - md.ifrac[j->stage]) * a;
                int64_t last = j->kind == JOB_F ? t : t - j->d; /* started, or ended, by t */
                for (int64_t s = j->est; s <= j->lst && s <= last && !oom; s++)
                    if (v != 0) oom = row_add(&r, col_of(j, s), v) < 0;
            }
            if (!oom && r.n) row_put(lp, &r, GLP_UP, 0, cap_of(p, q) / md.act_unit + 1e-9);
        }
    free(r.ind);
    free(r.val);
    if (oom) {
        gl.delete_prob(lp);
        return ppv_errf(err, errlen, "out of memory");
    }
    rep->constraints = gl.get_num_rows(lp);
    seed_solution sd = {*seed ? seed_columns(&md, *seed, cols)
                              : sr ? searched_columns(&md, sr, cols) : NULL, 0};
    glp_iocp parm;
    gl.init_iocp(&parm);
    parm.cb_func = give_seed;
    parm.cb_info = &sd;
    /* the seed is given in the model's own columns, which GLPK's MIP
     * presolver renumbers (it fixes and removes some): with a seed, no
     * presolve, and the LP relaxation solved first as intopt then needs
     * (a seed read in presolved columns was taken as a makespan of 1) */
    parm.presolve = sd.x ? GLP_OFF : GLP_ON;
    /* mixed-integer rounding and clique cuts: they close the gap the time
     * index leaves in the LP bound (V p = 4, m = 4 proven in 1.5 s, not
     * in 30 without; p = 4, m = 8 within 3 activations in 15 s, not in
     * 60), and cost the proofs that need none nothing measurable
     * (ppv_bench_optimal's table: 40 s either way) */
    parm.mir_cuts = GLP_ON;
    parm.clq_cuts = GLP_ON;
    parm.msg_lev = GLP_MSG_OFF;
    parm.tm_lim = p->time_limit > 0 ? (int)fmin(p->time_limit * 1000, 2e9) : 60000;
    int rc = 0;
    if (sd.x) {
        glp_smcp sp;
        gl.init_smcp(&sp);
        sp.msg_lev = GLP_MSG_OFF;
        sp.presolve = GLP_ON; /* the LP's presolve keeps the columns' numbers */
        sp.tm_lim = parm.tm_lim;
        rc = gl.simplex(lp, &sp);
    }
    if (rc == 0) rc = gl.intopt(lp, &parm);
    free(sd.x);
    rep->seconds = seconds_since(t0);
    int st = gl.mip_status(lp);
    if (rc == GLP_ETMLIM && st != GLP_OPT && st != GLP_FEAS && (sr || *seed)) {
        /* stopped before it took the seed: the searched order (or the
         * best named kind) is the best found */
        gl.delete_prob(lp);
        rep->bound = NAN;
        if (sr) {
            rep->makespan = rep->searched;
            *out = schedule_of(&md, sr->seq);
            return *out ? 0 : ppv_errf(err, errlen, "out of memory");
        }
        rep->makespan = rep->horizon;
        *out = *seed;
        *seed = NULL;
        return 0;
    }
    if ((rc != 0 && rc != GLP_ETMLIM && rc != GLP_EMIPGAP) || (st != GLP_OPT && st != GLP_FEAS)) {
        gl.delete_prob(lp);
        if (st == GLP_NOFEAS && p->rank_caps)
            return ppv_errf(err, errlen, "optimal: no schedule of the shape keeps every rank "
                            "within its cap");
        if (st == GLP_NOFEAS)
            return ppv_errf(err, errlen, "optimal: no schedule of the shape keeps every rank "
                            "within %g activations", p->cap);
        return ppv_errf(err, errlen, "optimal: the solver found no schedule within %g s (GLPK "
                        "code %d): give more --time-limit, or a smaller size",
                        p->time_limit > 0 ? p->time_limit : 60.0, rc);
    }
    rep->proven = st == GLP_OPT && rc == 0;
    rep->makespan = nearbyint(gl.mip_obj_val(lp)) / md.scale; /* whole ticks */
    rep->bound = rep->proven ? rep->makespan : NAN;
    if (!rep->proven && sr && rep->searched < rep->makespan) {
        /* cut short above the searched order: that is the best found */
        gl.delete_prob(lp);
        rep->makespan = rep->searched;
        *out = schedule_of(&md, sr->seq);
        return *out ? 0 : ppv_errf(err, errlen, "out of memory");
    }
    /* the schedule: each rank's jobs in the order they start */
    int64_t *start = malloc((size_t)md.njobs * sizeof *start);
    int32_t *order = malloc((size_t)md.njobs * sizeof *order);
    int bad = !start || !order;
    for (int32_t k = 0; k < md.njobs && !bad; k++) {
        const job *j = &md.jobs[k];
        start[k] = -1;
        for (int64_t t = j->est; t <= j->lst; t++)
            if (gl.mip_col_val(lp, col_of(j, t)) > 0.5) start[k] = t;
        order[k] = k;
        bad = start[k] < 0;
    }
    gl.delete_prob(lp);
    /* insertion sort by (rank, start, job): tiny sizes only */
    for (int32_t a = 1; a < md.njobs && !bad; a++)
        for (int32_t b = a; b > 0; b--) {
            const job *x = &md.jobs[order[b - 1]], *y = &md.jobs[order[b]];
            int later = x->rank > y->rank || (x->rank == y->rank && (start[order[b - 1]] >
                        start[order[b]] || (start[order[b - 1]] == start[order[b]] &&
                        order[b - 1] > order[b])));
            if (!later) break;
            int32_t tmp = order[b - 1];
            order[b - 1] = order[b];
            order[b] = tmp;
        }
    *out = bad ? NULL : schedule_of(&md, order);
    free(start);
    free(order);
    if (!*out)
        return ppv_errf(err, errlen, "optimal: out of memory, or the solver's schedule does not "
                        "form one");
    return 0;
}
#endif
