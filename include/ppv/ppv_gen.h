/* ppv_gen.h - the engine's generator room: every named schedule kind, the
 * cost-aware tuner and `gen auto`'s search.
 *
 * Functions return 0 on success and a negative value on failure, with a
 * message in the caller's buffer; no function here exits the process.
 */
#ifndef PPV_GEN_H
#define PPV_GEN_H

#include "ppv_check.h"

/* ------------------------------------------------------------------------ */
/* Generators                                                               */

typedef struct ppv_gen_params {
    int32_t ranks;
    int32_t microbatches;
    int32_t stages_per_rank; /* 0 = the kind's default */
} ppv_gen_params;

/* Generator names, NULL-terminated. */
const char *const *ppv_generator_names(void);

/* Builds a compute-only schedule of the named kind. Returns 0, or -1 with
 * the reason (unknown kind, parameters the kind cannot take). */
int ppv_generate(const char *kind, const ppv_gen_params *p, ppv_schedule **out, char *err,
                 size_t errlen);

/* `ppv gen auto`: the smallest makespan ppv finds for p ranks and m
 * microbatches under the costs (a rank's whole share of the model: with v
 * stages a rank each action costs 1/v of them), with every rank within
 * cap activations (microbatch activations, as `ppv check` counts them). It starts from the
 * best of every named kind (and the capped greedy) and improves it by
 * swapping adjacent actions (gen_auto.c). Deterministic; time_limit is a
 * safety stop that the report flags. */
typedef struct ppv_gen_auto_params {
    int32_t ranks, microbatches;
    ppv_costs costs;
    double cap;         /* <= 0: no cap */
    int64_t budget;     /* checks the local search may make; 0: no bound */
    double time_limit;  /* seconds; <= 0: none */
    const ppv_model_spec *model; /* NULL, or the model whose bytes are weighed */
    double mem_cap_bytes;        /* with model: every rank's weights, gradients, optimizer
                                  * state and peak activations within it; <= 0: no cap */
    int per_action; /* costs are each action's (as `ppv check` takes them), not a rank's
                     * whole share */
    /* per-stage costs (a cost file): each candidate with this many stages
     * is judged by them (as `ppv check --cost-file`), one with another
     * number of stages is not a candidate; NULL: costs */
    const ppv_stage_costs *stages;
    int model_costs; /* with model: each candidate judged by the costs the model's split over its
                      * stages gives (ppv_stage_costs_from_model, message time costs.comm) */
} ppv_gen_auto_params;

typedef struct ppv_gen_auto_report {
    char start[64];           /* the candidate the search started from */
    double start_makespan;
    double makespan, bubble_ratio, peak; /* of the result; peak: the largest rank's */
    double peak_bytes;                   /* with a model: the largest rank's total bytes */
    int32_t stages_per_rank;             /* of the result */
    int64_t candidates, evaluated, improvements; /* improvements: of the winning climb */
    int32_t starts;      /* candidates the search climbed from (the best few) */
    int converged;       /* a whole scan kept no swap */
    int stopped_by_time; /* the time limit cut the search */
    double cap;          /* ppv_generate_tuned: the kind's own peak, which bounds the search */
} ppv_gen_auto_report;

/* 0 with *out (compute-only), or -1 with the reason: no kind builds the
 * size, or none fits the cap (the message names the smallest peak). */
int ppv_generate_auto(const ppv_gen_auto_params *p, ppv_schedule **out, ppv_gen_auto_report *rep,
                      char *err, size_t errlen);

/* The named kind tuned to per-action costs (as `ppv check --costs` takes
 * them): the kind's own order, and for zb-h1 and zb-h2 with one stage a
 * rank also the zero-bubble authors' cost-aware heuristic at the kind's
 * cap (p, 2p - 1 activations), the better under the costs; then auto's
 * local search, every rank within the own order's peak. rep as auto's
 * (cap: that peak). 0 with *out, or -1. */
/* stages (may be NULL): per-stage costs the kind is tuned to instead (the
 * heuristic starts from their mean). */
int ppv_generate_tuned(const char *kind, const ppv_gen_params *gp, const ppv_costs *costs,
                       const ppv_stage_costs *stages, int64_t budget, double time_limit,
                       ppv_schedule **out, ppv_gen_auto_report *rep, char *err, size_t errlen);

/* `ppv gen optimal`: the schedule of smallest makespan for p ranks and m
 * microbatches under the costs (each action's, as `ppv check` takes them,
 * or each stage's) with every rank within cap activations (as check counts
 * them), proven by a MILP solver (GLPK; gen_optimal.c has the model). Its
 * space: every order in which each stage runs its microbatches' F, I and W
 * in microbatch order, one stage a rank (1F1B's placement) or two in a V
 * (rank r holds stages r and 2p-1-r). The solver stops at time_limit
 * seconds (<= 0: 60) with its best, not proven. 0 with *out, or -1 (err):
 * too large a model (the message gives its size), costs not a multiple of
 * 1/1000, no schedule within the cap, no solver in this build. */
typedef struct ppv_optimal_params {
    int32_t ranks, microbatches;
    int shape_v;                   /* 0: one stage a rank; 1: two in a V */
    ppv_costs costs;               /* every stage's, when stages is NULL */
    const ppv_stage_costs *stages; /* or each stage's own (2p of them for a V) */
    double cap;                    /* activations a rank may hold; <= 0: no cap */
    double time_limit;             /* seconds */
    const double *rank_caps;       /* [ranks] or NULL: each rank's own cap, in the stages'
                                    * activation unit (0: it may hold none); instead of cap */
} ppv_optimal_params;

typedef struct ppv_optimal_report {
    int proven;         /* the solver closed the gap: no schedule of the space is faster */
    double makespan;    /* of the schedule found, in cost units */
    double bound;       /* the proven optimum (NaN when not proven) */
    double horizon;     /* the best named kind's makespan within the cap (the model's horizon);
                         * NaN when none fits it */
    double lower_bound; /* no rank ends before its earliest job can start plus all its work */
    double searched;    /* the makespan the local search reached from the best named kind (or,
                         * where none fits the cap, one microbatch at a time) */
    int64_t moves;      /* the local search's moves tried */
    int by_bound;       /* proven because the search reached lower_bound: no solver ran */
    int64_t variables;  /* binaries */
    int64_t constraints; /* 0 when no solver ran */
    double seconds;     /* the search's and the solver's */
} ppv_optimal_report;

int ppv_generate_optimal(const ppv_optimal_params *p, ppv_schedule **out, ppv_optimal_report *rep,
                         char *err, size_t errlen);

#endif
