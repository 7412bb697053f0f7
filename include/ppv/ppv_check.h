/* ppv_check.h - the engine's check room: send semantics, costs and the memory
 * model, ppv's send/recv lowering and the static verifier (deadlock,
 * matching, memory, time).
 *
 * Functions return 0 on success and a negative value on failure, with a
 * message in the caller's buffer; no function here exits the process.
 */
#ifndef PPV_CHECK_H
#define PPV_CHECK_H

#include "ppv_schedule.h"

/* ------------------------------------------------------------------------ */
/* Send semantics, costs, memory model                                      */

typedef enum ppv_sem_kind { PPV_SEM_RENDEZVOUS, PPV_SEM_EAGER, PPV_SEM_EAGER_BYTES } ppv_sem_kind;

typedef struct ppv_semantics {
    ppv_sem_kind kind;
    int64_t eager_limit; /* PPV_SEM_EAGER_BYTES: sends up to this size are buffered */
} ppv_semantics;

/* Parses "eager", "rendezvous" or "eager:BYTES" (K/M/G suffixes allowed). */
int ppv_semantics_parse(const char *text, ppv_semantics *out);
void ppv_semantics_format(const ppv_semantics *sem, char *buf, size_t n);

typedef struct ppv_costs {
    double f, b, w; /* forward, full backward, weight backward; I costs b - w */
    double comm;    /* latency of one message or collective */
} ppv_costs;

typedef struct ppv_mem_model {
    double unit;       /* activation an F allocates; <= 0 means ranks/stages */
    double i_frac;     /* part of it that I frees (W frees the rest) */
    double stash_frac; /* part an F keeps when the stage/microbatch is recomputed by R */
} ppv_mem_model;

/* One stage's costs, for stages that are not alike (a cost file's row,
 * docs/schedules.md): its times, the time of each message it sends, and
 * what one microbatch's F allocates on it, with the fractions an I frees
 * and a recomputed F keeps, as --mem has them. */
typedef struct ppv_stage_cost {
    double f, b, w;           /* forward, full backward, weight backward; I costs b - w */
    double comm;              /* each message this stage sends (either direction) */
    double act;               /* the activation of one F: in any unit, bytes say */
    double i_frac, stash_frac; /* of act: freed by I; kept by an F that R recomputes */
} ppv_stage_cost;

/* Per-stage costs for a schedule of n stages. */
typedef struct ppv_stage_costs {
    int32_t n;
    ppv_stage_cost *s; /* [n] */
    char source[96];   /* "FILE" or "the model": where they came from, for messages */
} ppv_stage_costs;

/* A cost file (docs/schedules.md, "Stages that are not alike"): a first
 * line `ppv-costs,1`, a header naming the columns (stage, f, b, w
 * required; comm, act, i_frac, stash optional) and a row a stage in order
 * from 0. `#` starts a comment. 0, or -1 with "name:line: what is wrong". */
int ppv_stage_costs_parse(const char *text, const char *name, ppv_stage_costs *out, char *err,
                          size_t errlen);
void ppv_stage_costs_free(ppv_stage_costs *c);

typedef struct ppv_model_spec ppv_model_spec;
/* The costs of a GPT-style model split over nstages stages as the memory
 * model splits it (spec/memory-model.md): each stage's layers, the output
 * layer (and its loss) on the last; times in units of one layer's forward
 * FLOPs (24bsh^2 + 4bs^2h, divided by t; an I and a W each as much as the
 * forward; with recompute=full the I repeats the forward), activations in
 * bytes by the layer formula, message time comm, and the fractions of mm.
 * 0, or -1 with the reason. */
int ppv_stage_costs_from_model(const ppv_model_spec *m, int32_t nstages, double comm,
                               const ppv_mem_model *mm, ppv_stage_costs *out, char *err,
                               size_t errlen);

typedef struct ppv_check_options {
    ppv_semantics sem;
    ppv_costs costs;
    ppv_mem_model mem;
    int64_t msg_bytes; /* size of a PyTorch SEND_F/SEND_B message */
    int keep_timeline; /* fill ppv_check_report.spans */
    /* per-stage costs (NULL: costs and mem for every stage): times,
     * message times and activations of each stage; a schedule of another
     * number of stages is refused */
    const ppv_stage_costs *stages;
    /* also what PyTorch's runtime would do wrong with the schedule
     * (ppv_check_pytorch), into ppv_check_report.pytorch: worked out beside
     * the simulation */
    int pytorch;
} ppv_check_options;

/* Defaults: rendezvous, costs 1,2,1,0, unit ranks/stages, 8 MiB messages. */
ppv_check_options ppv_check_defaults(void);

/* Peak activation per rank of s's compute order with an F of stage st
 * holding stage_w[st] (bytes, say) until its backward frees it (mm's
 * i_frac and stash_frac apply as in the check); at[r] (may be NULL) is
 * the action at which rank r first reaches its peak, -1 if never. 0, or
 * -1 when out of memory. */
int ppv_schedule_peak_weighted(const ppv_schedule *s, const ppv_mem_model *mm,
                               const double *stage_w, double *peak, int32_t *at);

/* Memory in bytes for a GPT-style model (`ppv check --model`, memory.c,
 * spec/memory-model.md). */
typedef enum ppv_mem_recompute {
    PPV_MEMRC_NONE,
    PPV_MEMRC_SELECTIVE, /* Korthikanti et al.: the attention core recomputed */
    PPV_MEMRC_FULL       /* only each layer's input kept */
} ppv_mem_recompute;
enum { PPV_OPT_NONE, PPV_OPT_ADAM };

struct ppv_model_spec {
    int64_t layers, hidden, heads, seq, mbs, vocab;
    int32_t dtype_bytes; /* 2: bf16 or fp16 */
    int32_t tp;          /* tensor-parallel degree */
    int sp;              /* sequence parallelism (with tp > 1) */
    int optimizer;       /* PPV_OPT_*: adam keeps 12 bytes a parameter beside weight and grad */
    ppv_mem_recompute recompute;
};

/* Parses "key=value" items separated by commas or white space: layers,
 * hidden, heads, seq (required), vocab, mbs (1), dtype (bf16), optimizer
 * (adam|none), tp (1), sp (0), recompute (none|selective|full). 0, or -1
 * with the reason. */
int ppv_model_spec_parse(const char *text, ppv_model_spec *m, char *err, size_t errlen);

/* Activation bytes of one layer for one microbatch on one rank. */
double ppv_layer_activation_bytes(const ppv_model_spec *m);

typedef struct ppv_memory_bytes {
    int32_t nranks;
    double *params;      /* [nranks] parameters the rank holds */
    double *activations; /* [nranks] peak activation bytes */
    int32_t *peak_index; /* [nranks] action at which the activations peak first */
} ppv_memory_bytes;

/* Per rank: the parameters its stages hold (layers split evenly over the
 * stages, the first ones taking one more; embeddings on the first and
 * last stage's ranks) and the peak of its activations over the order. */
int ppv_schedule_memory_bytes(const ppv_schedule *s, const ppv_model_spec *m,
                              ppv_memory_bytes *out, char *err, size_t errlen);
void ppv_memory_bytes_free(ppv_memory_bytes *b);
/* Bytes of weights, gradients and optimizer state for params parameters. */
void ppv_memory_split(const ppv_model_spec *m, double params, double *weights, double *grads,
                      double *optimizer);

/* ------------------------------------------------------------------------ */
/* Lowering                                                                 */

/* Inserts SEND_F/RECV_F/SEND_B/RECV_B into a compute-only schedule so that
 * it completes under every send semantics (each message's send and receive
 * occupy the same place in one global order of events), with what
 * PyTorch's runtime needs to run the file as its own: REDUCE_GRAD after
 * each stage's last B or W (without it PyTorch never scales the stage's
 * gradients) and UNSHARD/RESHARD where PyTorch's lowering puts them, unless
 * the compute order holds its own. Returns 0 with
 * *out, 1 when the compute order itself cannot progress (a dependency
 * cycle; *out is NULL and the check reports it), or -1 on error. */
int ppv_schedule_lower(const ppv_schedule *s, const ppv_costs *costs, int64_t msg_bytes,
                       ppv_schedule **out, char *err, size_t errlen);

/* PyTorch's own lowering (_prepare_schedule_with_comms), cell for cell:
 * UNSHARD/RESHARD (three stages a rank unsharded at most), REDUCE_GRAD
 * after each stage's m-th B or W, then sends and receives placed in
 * rounds, rank 0 first, a receive posted as soon as its sender runs. A
 * compute order that holds its own REDUCE_GRAD, UNSHARD or RESHARD gets
 * the sends and receives alone. Unlike ppv_schedule_lower it promises
 * nothing under rendezvous sends: ppv check says whether it completes.
 * Returns 0 with *out, 1 when no rank can go on (the reason in err), or
 * -1 on error. */
int ppv_schedule_lower_pytorch(const ppv_schedule *s, int64_t msg_bytes, ppv_schedule **out,
                               char *err, size_t errlen);

/* ------------------------------------------------------------------------ */
/* The static verifier                                                      */

typedef struct ppv_problem {
    int32_t rank, index; /* index into the rank's checked program, -1 if none */
    char action[64];
    char message[320];
} ppv_problem;

/* One blocked rank: the action it is stuck on and the rank it waits for. */
typedef struct ppv_wait {
    int32_t rank, index;
    char action[64];
    int32_t waits_for; /* -1 when it waits for nothing that can come */
    char reason[160];
} ppv_wait;

typedef struct ppv_span {
    double start, end;
} ppv_span;

typedef struct ppv_check_report {
    int ok;       /* no error and no deadlock */
    int deadlock; /* some rank can never finish */
    int32_t nranks, nstages, nmb;
    ppv_semantics sem;
    ppv_problem *errors;
    int32_t nerrors;   /* errors stored */
    int64_t errors_total; /* errors found (storage is capped) */
    ppv_wait *blocked; /* every rank that did not finish */
    int32_t nblocked;
    ppv_wait *cycle; /* the wait-for cycle, in order, when there is one */
    int32_t ncycle;
    double *peak_activation; /* [nranks] */
    int32_t *peak_index;     /* [nranks]: the action at which the rank first reaches its peak,
                              * -1 when it holds nothing */
    int simulated; /* makespan and bubble_ratio were computed */
    double makespan, bubble_ratio;
    ppv_schedule *checked; /* the programs simulated (lowered when compute-only) */
    ppv_span **spans;      /* [nranks][n] start/end of each action, keep_timeline */
    double **live;         /* [nranks][n] activations held after each action (the unit of
                            * peak_activation), keep_timeline */
    /* The lifespan view, when simulated (docs/schedules.md): per stage,
     * the median over its microbatches of an activation's lifespan (its F's
     * start to the end of the last backward that frees it: B, or W when the
     * backward is split) and the largest; the steady state's repeating
     * interval T (the building block's period: in the steady state every
     * rank repeats one microbatch's work on all its stages at the pace of
     * the busiest, so T is the largest rank's busy time over the
     * microbatches); alive = ceil(lifespan
     * / T), at most the microbatches: the activations a steady state holds
     * at once. Per
     * rank, the bound: the sum over its stages of alive x the stage's
     * activation, beside peak_activation. NaN where a stage has fewer than
     * two microbatches or none completes. */
    double *lifespan, *lifespan_max, *interval; /* [nstages] */
    int32_t *alive;                             /* [nstages] */
    double *peak_bound;                         /* [nranks] */
    /* with ppv_check_options.pytorch: ppv_check_pytorch's problems with
     * the schedule checked (NULL when none), whatever the verdict */
    ppv_problem *pytorch;
    int32_t npytorch;
} ppv_check_report;

/* Checks a schedule: per-rank dependencies and counts, message matching,
 * deadlock under the semantics, peak activation memory, makespan and bubble
 * ratio. Returns 0 with *out filled (the verdict is in the report), or -1
 * with a message when the options are unusable. */
int ppv_schedule_check(const ppv_schedule *s, const ppv_check_options *opt,
                       ppv_check_report **out, char *err, size_t errlen);

void ppv_check_report_free(ppv_check_report *r);

/* What PyTorch's runtime (_PipelineScheduleRuntime) would do wrong with s,
 * which ppv's own check may accept (`ppv check --target pytorch`): on a
 * compute_comms file, every stage with a backward but no REDUCE_GRAD (its
 * gradients never scaled: m times too large), and the first action of each
 * kind PyTorch's runtime cannot run (ppv's extensions; in a compute_only
 * file, UNSHARD, RESHARD and REDUCE_GRAD too). *out is malloc'd
 * (NULL when none), *n its length. 0, or -1 out of memory. */
int ppv_check_pytorch(const ppv_schedule *s, ppv_problem **out, int32_t *n, char *err,
                      size_t errlen);

/* The first stage k whose next stage k+1 is on the same rank (a V
 * placement's stages p-1 and p), or -1. PyTorch's runtime runs such a file,
 * but its PipelineStage greets the next stage's rank on its first step,
 * and gloo cannot send to its own rank (NCCL can): under gloo it fails, as
 * PyTorch's own ZBV and DualPipeV classes do. A note, not a problem. */
int32_t ppv_pytorch_shared_neighbours(const ppv_schedule *s);

#endif
