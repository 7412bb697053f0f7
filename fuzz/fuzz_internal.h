/* internal.h - what the explorer's strategies share; private to the fuzz
 * layer. */
#ifndef PPV_FUZZ_INTERNAL_H
#define PPV_FUZZ_INTERNAL_H

#include "ppv_fuzz.h"

typedef struct target {
    const ppv_fuzz_options *o;
    /* the reference: what every run must end as */
    uint64_t grad_digest;  /* schedule: the one-rank reference's gradients */
    uint64_t out_digest;   /* pipeline: the round-robin run's output digest */
    uint64_t clean_digest; /* pipeline with a fault that must not fail: the run without it */
    int64_t ref_steps;     /* the reference's length, for PCT */
    int64_t ref_sends;     /* its point-to-point sends, where faults are drawn */
    /* PPV_FAULT_CUT: per chunk k, the output of the round-robin run with a
     * hard cut at k */
    int32_t ncut;
    uint64_t *cut_digest;
} target;

/* The outcome of one run: its verdict, what failed, its steps and digest,
 * and (kept on request) its decisions. */
typedef struct outcome {
    int pass;
    int pruned;        /* the explorer ended it early: nothing to judge */
    int named_failure; /* it failed and said how (not a silent difference) */
    int differs;       /* it completed with other output than the reference */
    char why[1024];
    char story[2048]; /* a deadlock or hang: who waits for what, and the cycle */
    int64_t steps, sends;
    uint64_t trace_digest;
    ppv_world *world;
} outcome;

double fuzz_now(void);

/* The digest a run with fault is measured against: the output the
 * pipeline must give (with the same hard cut, or without the injection),
 * or a schedule's one-rank gradients. */
uint64_t fuzz_reference(const target *tg, const ppv_fault *fault);

/* One run of the target under pol (and fault), judged against the
 * reference; -1 with err when it cannot run at all. */
int fuzz_run_once(const target *tg, const ppv_policy *pol, const ppv_fault *fault, int keep,
                  outcome *out, char *err, size_t errlen);
/* The same on worker job's own arg (ppv_fuzz_program.job_args). */
int fuzz_run_job(const target *tg, int32_t job, const ppv_policy *pol, const ppv_fault *fault,
                 int keep, outcome *out, char *err, size_t errlen);

/* ---- campaign.c: the processes of a campaign (ppv_fuzz_campaign) ---- */

/* What each process says at the end of a round. */
typedef struct round_state {
    int64_t best;    /* random, pct, portfolio: its smallest failing run (INT64_MAX: none) */
    int64_t runs;    /* dfs: the runs it has made */
    int64_t classes, pruned;
    double busy;     /* seconds its runs of this round took */
    double elapsed;  /* seconds since its campaign began */
    int32_t failed;  /* it cannot go on: err says why */
    int32_t found;   /* dfs: a run failed */
    int32_t complete; /* dfs: its share of the search is explored */
    char err[512];
} round_state;

/* Whether o runs as a campaign of more than one process. */
int campaign_on(const ppv_fuzz_options *o);
/* Every process's state (all: one per process, in rank order); 0, or -1
 * with err. */
int campaign_exchange(const ppv_fuzz_campaign *c, const round_state *mine, round_state *all,
                      char *err, size_t errlen);
/* Every process's n items of `item` bytes each, one process after the
 * other in *all (malloc'd, *total items); 0, or -1 with err. */
int campaign_gather(const ppv_fuzz_campaign *c, const void *mine, int64_t n, size_t item,
                    void **all, int64_t *total, char *err, size_t errlen);
/* The process that cannot go on, as an error; -1 when none failed. */
int campaign_failed(const ppv_fuzz_campaign *c, const round_state *all, char *err,
                    size_t errlen);
/* The next round's runs per process: doubled while the slowest process
 * took under a tenth of a second. */
int64_t campaign_grow(const round_state *all, int32_t n, int64_t chunk);

/* dfs.c: explores every interleaving class of the target (runs 1, 2, ...
 * after the reference), stopping at the first failure (kept in *failing
 * with the run's number) or at the options' limits. 0, or -1 with err. */
int fuzz_dfs(const target *tg, ppv_fuzz_report *rep, outcome *failing, double t0, char *err,
             size_t errlen);

#endif
