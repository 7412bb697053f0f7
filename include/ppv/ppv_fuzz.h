/* ppv_fuzz.h - the fuzz layer's one public header: the interleaving
 * explorer. It runs a target (a schedule on the engine, or the PP inference
 * pipeline) under many scheduler decisions, checks every run against the
 * round-robin reference, and hands back a failing run's trace, minimised
 * to the shortest prefix of decisions that still fails when round-robin
 * takes over after it, so that `ppv run --replay` / `ppv pp --replay`
 * reproduce it exactly. Depends on ppv_engine.h.
 */
#ifndef PPV_FUZZ_H
#define PPV_FUZZ_H

#include <stdint.h>

#include "ppv_engine.h"

typedef enum ppv_fuzz_strategy {
    PPV_FUZZ_RANDOM,   /* uniform among runnable ranks at every step */
    PPV_FUZZ_PCT,      /* PCT at pct_depth, change points over the run's length */
    PPV_FUZZ_PORTFOLIO, /* runs alternate: random, then PCT at depths 2..pct_depth */
    PPV_FUZZ_DFS        /* every interleaving class once: depth-first search with
                           dynamic partial-order reduction and sleep sets */
} ppv_fuzz_strategy;

/* "random", "pct", "portfolio", "dfs"; -1 for another word. */
int ppv_fuzz_strategy_parse(const char *text, ppv_fuzz_strategy *out);
const char *ppv_fuzz_strategy_name(ppv_fuzz_strategy s);

typedef struct ppv_fuzz_progress {
    int64_t runs, distinct;
    double seconds;
} ppv_fuzz_progress;

/* A target of one's own: a program every rank of a mock world runs (a
 * design under test, written against the transport). */
typedef struct ppv_fuzz_program {
    int32_t nranks;
    ppv_semantics sem;
    int64_t watchdog_steps; /* 0: 100000 */
    void (*reset)(void *arg); /* before every run (may be NULL) */
    /* After each run's world is made, before it runs (may be NULL): the
     * communicators the program uses (ppv_world_add_comm). 0, or -1 with
     * why in err, which ends the exploration. */
    int (*setup)(void *arg, ppv_world *w, char *err, size_t errlen);
    ppv_rank_main main;
    /* After a run that went to its end (done, deadlock, hang or failed):
     * 0 when it passes, else -1 with why. NULL: it passes when it is
     * done. */
    int (*judge)(void *arg, const ppv_world_result *res, char *why, size_t n);
    void *arg;
    /* A program that cannot run two runs at once on one arg (ppv fuzz
     * py's ranks as processes: a zygote and a bridge each) gives one arg a
     * worker: worker j's runs get job_args[j] (j < njob_args; the others,
     * and every run outside the workers, get arg). NULL: every run gets
     * arg. */
    void *const *job_args;
    int32_t njob_args;
} ppv_fuzz_program;

/* A campaign across processes (`mpirun -np N ppv fuzz ...`): every process
 * calls ppv_fuzz with the same options and its own rank, and the explorer
 * splits the work among them. random, pct and portfolio go in rounds:
 * each round hands every process a block of the next runs (runs are
 * numbered as in one process, run i drawn from seed + i), each runs its
 * block with its own workers, and all compare at the round's end; the
 * first round with a failure ends the campaign at the smallest failing
 * run, every run below it having been made. So a number of runs gives the
 * same report for any N. dfs runs the search's first run everywhere, then
 * splits the branches that run left open among the processes (the k-th
 * to process k mod N); a branch a process finds later it explores itself.
 * Every process ends with the same report. */
typedef struct ppv_fuzz_campaign {
    int32_t rank, size;
    /* Called by every process alike: process i's `bytes` bytes of send
     * land at recv + i * bytes on every process. 0, or -1 with err. */
    int (*allgather)(void *ctx, const void *send, void *recv, size_t bytes, char *err,
                     size_t errlen);
    void *ctx;
} ppv_fuzz_campaign;

typedef struct ppv_fuzz_options {
    ppv_fuzz_strategy strategy;
    int32_t pct_depth; /* at least 2; PCT alone takes 1 (priorities, no change point) */
    uint64_t seed;     /* run i's policy seed is seed + i */
    int64_t runs;      /* stop after this many (0: no limit) */
    double seconds;    /* or after this long (0: no limit); one of the two is set */
    int32_t jobs;      /* worker threads (0 or 1: one). Runs are handed out in order
                          and the report names the smallest failing run, so with a
                          number of runs it is the same for any number of workers */
    /* the target: exactly one of schedule, pp and program */
    const ppv_schedule *schedule;
    ppv_run_options run; /* its policy is the explorer's */
    const ppv_pp_options *pp;
    const ppv_fuzz_program *program;
    /* faults to put in (1 << ppv_fault_kind bits; 0: none): run i > 0 gets
     * one, the kinds in turn, at a send drawn from (seed + i) among the
     * reference's sends. A run with a fault passes when it ends as the
     * reference does or fails with a named failure (a deadlock, a hang the
     * watchdog ends, a check that fires); completing with other output (a
     * silent corruption) fails. */
    unsigned faults;
    /* a campaign across processes (NULL: this process alone) */
    const ppv_fuzz_campaign *campaign;
    /* called about every 0.2 s and at the end (a display; it must not touch the run) */
    void (*progress)(void *ctx, const ppv_fuzz_progress *p);
    void *progress_ctx;
} ppv_fuzz_options;

typedef struct ppv_fuzz_report {
    int64_t runs;      /* made */
    int64_t distinct;  /* distinct interleavings (trace digests) among them */
    double seconds;
    /* dfs: whether every class was explored (the target cannot fail in any
     * order), the classes run to their end, and the runs the sleep sets
     * ended early (their rest repeated an explored class) */
    int complete;
    int64_t classes, pruned;
    int found;         /* a run failed its checks */
    int64_t failing_run;
    ppv_policy failing_policy; /* its kind, seed and depth */
    ppv_fault failing_fault;   /* the fault it ran with (kind NONE: none) */
    char failure[1024];        /* what failed, as the run said it */
    int64_t failing_steps;     /* its scheduler decisions */
    int64_t minimal_prefix;    /* decisions forced before round-robin takes over */
    int64_t minimal_deviations; /* then, the fewest steps that must leave round-robin (the
                                   minimal run's, ppv_trace_write_deviations) */
    ppv_fault minimal_fault;   /* the failing run's fault, or none when it fails without */
    char minimal_failure[1024];
    char minimal_story[2048];  /* a deadlock or hang in it: each blocked rank's action and
                                  what it waits for, then the wait-for cycle */
    ppv_world *minimal;        /* the minimised run's decisions (ppv_trace_write) */
    ppv_world *failing;        /* the failing run's decisions */
    /* what each was measured against (ppv_trace_write_verdict's reference) */
    uint64_t failing_reference, minimal_reference;
    /* a campaign: the runs each process made (the reference's not counted,
     * and in the round of a failure those past it too; nprocesses of
     * them, in rank order); one process: NULL, 0 */
    int64_t *process_runs;
    int32_t nprocesses;
} ppv_fuzz_report;

/* Explores. 0 with *out (found says whether a run failed), or -1 with the
 * reason when the target cannot run at all or the round-robin reference
 * itself fails (the reason says so: nothing to explore). */
int ppv_fuzz(const ppv_fuzz_options *o, ppv_fuzz_report **out, char *err, size_t errlen);
void ppv_fuzz_report_free(ppv_fuzz_report *r);

/* Judges a finished run as the explorer judges each of its runs (its
 * fault, its injection, the order of the results it decoded), against
 * reference: the output digest it must give, or for a schedule the
 * one-rank gradients' digest (a trace's recorded verdict). 1 when it
 * passes, 0 with why when it fails: how a replayed failing trace fails
 * again. */
int ppv_fuzz_judge_pp(const ppv_pp_options *po, const ppv_pp_report *r, uint64_t reference,
                      char *why, size_t n);
int ppv_fuzz_judge_run(const ppv_run_options *ro, const ppv_run_report *r, uint64_t reference,
                       char *why, size_t n);

/* ---- the checker against the engine ---------------------------------------------- */

typedef struct ppv_fuzz_differential_report {
    int64_t schedules;  /* generated and mutated */
    int64_t skipped;    /* the generator or the lowering refused the draw */
    int64_t invalid;    /* the checker found them ill formed: nothing to compare */
    int64_t compared;   /* (schedule, semantics) pairs judged by both */
    int64_t deadlocks;  /* of those, the checker said deadlock */
    int64_t incomplete; /* the explorer's budget ran out before every class ran */
    double seconds;
    int found;          /* the two disagreed */
    int64_t failing_schedule; /* its draw */
    ppv_semantics sem;
    int mutations;            /* left after minimisation */
    char failure[1024];
    ppv_schedule *minimal;    /* the disagreeing schedule (ppv_schedule_write_native) */
} ppv_fuzz_differential_report;

typedef struct ppv_fuzz_differential_options {
    uint64_t seed;     /* schedule i is drawn from seed + i */
    int64_t schedules; /* stop after this many (0: no limit) */
    double seconds;    /* or after this long; one of the two is set */
    int64_t runs_per_schedule; /* the explorer's budget per judgement (0: 1000) */
    /* the checker to test (NULL: ppv_schedule_check); tests put a broken one here */
    int (*check)(void *ctx, const ppv_schedule *s, const ppv_check_options *opt,
                 ppv_check_report **out, char *err, size_t errlen);
    void *check_ctx;
    void (*progress)(void *ctx, const ppv_fuzz_differential_report *sofar);
    void *progress_ctx;
} ppv_fuzz_differential_options;

/* Draws schedules, mutates them and compares ppv check's verdict under
 * rendezvous, eager and eager:BYTES with the engine's under dfs; stops at
 * the first disagreement (minimised). 0 with *out, or -1 with err. */
int ppv_fuzz_differential(const ppv_fuzz_differential_options *o,
                          ppv_fuzz_differential_report **out, char *err, size_t errlen);
void ppv_fuzz_differential_report_free(ppv_fuzz_differential_report *r);

#endif
