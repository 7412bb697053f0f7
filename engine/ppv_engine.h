/* ppv_engine.h - the engine layer's one public header: the schedule IR, the
 * PyTorch CSV and native readers/writers, the schedule generators, ppv's
 * send/recv lowering and the static verifier (deadlock, matching, memory,
 * time).
 *
 * Functions return 0 on success and a negative value on failure, with a
 * message in the caller's buffer; no function here exits the process.
 */
#ifndef PPV_ENGINE_H
#define PPV_ENGINE_H

#include <stdint.h>
#include <stdio.h>

#include "ppv_kernels.h"
#include "ppv_spec.h"

/* ------------------------------------------------------------------------ */
/* The schedule IR                                                          */

/* One action of one rank's program. Fields a kind does not carry are -1.
 * 32 bytes: a check of a million actions holds them all (where each came
 * from in its file is kept beside the programs, ppv_schedule_where). */
typedef struct ppv_action {
    uint8_t kind;     /* ppv_action_kind */
    uint8_t dtype;    /* ppv_dtype, collectives and native messages */
    uint16_t overlap; /* id shared by the sub-actions of one OVERLAP_F_B cell, 0 if none;
                       * only neighbours compare ids, so they count 1..65535 and wrap */
    int32_t stage;    /* stage index */
    int32_t mb;       /* microbatch index */
    int32_t step;     /* time step (CSV column) of the action */
    union {           /* what only some kinds carry */
        struct {
            int32_t peer; /* native SEND/RECV: peer rank */
            int32_t tag;  /* native SEND/RECV: tag that both sides must agree on */
        };
        struct {
            int32_t group; /* collective: index into ppv_schedule.groups */
            int32_t root;  /* BCAST (and the other collectives, -1): root as a group rank */
        };
        int32_t count; /* CHUNK: expected_generator_calls */
    };
    int64_t bytes; /* message or collective size in bytes, 0 = default */
} ppv_action;

/* The next overlap id after id (1..65535, then 1 again). */
static inline uint16_t ppv_overlap_next(uint16_t id) {
    return (uint16_t)(id % 65535u + 1u);
}

typedef struct ppv_program {
    ppv_action *acts;
    int32_t n, cap;
    uint32_t *src; /* [cap] or NULL: byte offset + 1 of each action's cell in the text it
                    * was read from (0: not read, or past 4 GiB); see ppv_schedule_where */
} ppv_program;

/* A named process group for collectives; ranks are global ranks. */
typedef struct ppv_group {
    char name[32];
    int32_t *ranks;
    int32_t n;
} ppv_group;

typedef enum ppv_form { PPV_FORM_COMPUTE_ONLY, PPV_FORM_COMPUTE_COMMS } ppv_form;

/* PyTorch's two CSV dialects: today's (I = backward for inputs, B = full
 * backward) and the older one (B = backward for inputs, BW = full backward). */
typedef enum ppv_dialect { PPV_DIALECT_AUTO, PPV_DIALECT_CURRENT, PPV_DIALECT_LEGACY } ppv_dialect;

typedef struct ppv_schedule {
    int32_t nranks;
    int32_t nstages;     /* 0 when no action names a stage */
    int32_t nmb;         /* microbatches */
    int32_t *stage_rank; /* [nstages]: rank that computes the stage */
    ppv_program *prog;   /* [nranks] */
    ppv_group *groups;
    int32_t ngroups;
    ppv_form form;
    ppv_dialect dialect; /* dialect the file was read in */
    char name[256];      /* file name for messages */
    struct ppv_group_index *group_index; /* private to schedule.c: groups by name */
    int64_t *line_off; /* [nlines]: byte offset of each line of the text read, or NULL */
    int32_t nlines;
    int placeless; /* read without keeping where each action was (ppv_schedule_load_placeless) */
    ppv_action *arena; /* private to schedule.c: one block holding the programs of a reader
                        * that knew their sizes up front, or NULL */
    size_t arena_n;    /* actions in arena */
} ppv_schedule;

/* A new empty schedule of nranks programs, or NULL when out of memory. */
ppv_schedule *ppv_schedule_new(int32_t nranks);
void ppv_schedule_free(ppv_schedule *s);

/* An action of kind k with every optional field unset. */
ppv_action ppv_action_make(ppv_action_kind k, int32_t stage, int32_t mb);

/* Appends a copy of a to rank's program. Returns 0, or -1 when out of memory. */
int ppv_schedule_append(ppv_schedule *s, int32_t rank, const ppv_action *a);

/* Adds a process group; returns its index, or -1 (out of memory or a name
 * already used). */
int ppv_schedule_add_group(ppv_schedule *s, const char *name, const int32_t *ranks, int32_t n);

/* Index of the group named name, or -1; a hash lookup (groups must be added
 * with ppv_schedule_add_group, which keeps the index). */
int ppv_schedule_find_group(const ppv_schedule *s, const char *name);

/* Infers nstages, nmb (unless set beforehand), form and the stage->rank map
 * from the programs. Returns 0, or -1 with a message (a stage computed on two
 * ranks, a stage that no rank computes). */
int ppv_schedule_finish(ppv_schedule *s, char *err, size_t errlen);

/* Where rank's action i was read: its 1-based line and byte column in the
 * file. Returns 0, or -1 when unknown (a generated or appended action). */
int ppv_schedule_where(const ppv_schedule *s, int32_t rank, int32_t i, int32_t *line, int32_t *col);

/* Writes the action's compact spelling ("2F0", "1SEND_B3", "SEND>1#4",
 * "ALLREDUCE@mesh") into buf. */
void ppv_action_format(const ppv_schedule *s, const ppv_action *a, char *buf, size_t n);

/* Total number of actions over all ranks. */
int64_t ppv_schedule_size(const ppv_schedule *s);

/* ------------------------------------------------------------------------ */
/* Reading and writing                                                      */

/* Reads a schedule file; the format is detected from its first line (a
 * native file starts with "ppv-schedule"). On bad input returns -1 with
 * "file:line:col: rank R cell 'X': what is wrong" in err. */
int ppv_schedule_load(const char *path, ppv_dialect dialect, ppv_schedule **out, char *err,
                      size_t errlen);

/* As ppv_schedule_load, keeping no record of where each action was read
 * (4 bytes an action less): ppv_schedule_where answers -1 and messages
 * about actions name the file alone. For a caller that can read the file
 * again should a message need its places (ppv check does). */
int ppv_schedule_load_placeless(const char *path, ppv_dialect dialect, ppv_schedule **out,
                                char *err, size_t errlen);

/* A whole file, malloc'd (len bytes, not terminated); NULL with
 * "path: reason" in err. */
char *ppv_file_read(const char *path, size_t *len, char *err, size_t errlen);

/* The name messages give a path: "<stdin>" for "-", else the path. */
const char *ppv_path_name(const char *path);

/* Parses a schedule held in memory, native or CSV by its first word. */
int ppv_schedule_parse_text(const char *text, size_t len, const char *name, ppv_dialect dialect,
                            ppv_schedule **out, char *err, size_t errlen);

/* Parses PyTorch CSV text (name is used in messages). */
int ppv_schedule_parse_csv(const char *text, size_t len, const char *name, ppv_dialect dialect,
                           ppv_schedule **out, char *err, size_t errlen);

/* Parses ppv's native text format (spec/schedule-format.md). */
int ppv_schedule_parse_native(const char *text, size_t len, const char *name, ppv_schedule **out,
                              char *err, size_t errlen);

/* Writes the CSV PyTorch reads: a row per rank, a cell per time step, empty
 * cells for idle steps. Fails (-1) when the schedule uses ppv extensions. */
int ppv_schedule_write_csv(const ppv_schedule *s, FILE *f, char *err, size_t errlen);

/* Writes the native format; every schedule can be written this way. */
int ppv_schedule_write_native(const ppv_schedule *s, FILE *f);

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

typedef struct ppv_check_options {
    ppv_semantics sem;
    ppv_costs costs;
    ppv_mem_model mem;
    int64_t msg_bytes; /* size of a PyTorch SEND_F/SEND_B message */
    int keep_timeline; /* fill ppv_check_report.spans */
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

typedef struct ppv_model_spec {
    int64_t layers, hidden, heads, seq, mbs, vocab;
    int32_t dtype_bytes; /* 2: bf16 or fp16 */
    int32_t tp;          /* tensor-parallel degree */
    int sp;              /* sequence parallelism (with tp > 1) */
    int optimizer;       /* PPV_OPT_*: adam keeps 12 bytes a parameter beside weight and grad */
    ppv_mem_recompute recompute;
} ppv_model_spec;

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
int ppv_generate_tuned(const char *kind, const ppv_gen_params *gp, const ppv_costs *costs,
                       int64_t budget, double time_limit, ppv_schedule **out,
                       ppv_gen_auto_report *rep, char *err, size_t errlen);

/* ------------------------------------------------------------------------ */
/* Lowering                                                                 */

/* Inserts SEND_F/RECV_F/SEND_B/RECV_B into a compute-only schedule so that
 * it completes under every send semantics (each message's send and receive
 * occupy the same place in one global order of events). Returns 0 with
 * *out, 1 when the compute order itself cannot progress (a dependency
 * cycle; *out is NULL and the check reports it), or -1 on error. */
int ppv_schedule_lower(const ppv_schedule *s, const ppv_costs *costs, int64_t msg_bytes,
                       ppv_schedule **out, char *err, size_t errlen);

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
} ppv_check_report;

/* Checks a schedule: per-rank dependencies and counts, message matching,
 * deadlock under the semantics, peak activation memory, makespan and bubble
 * ratio. Returns 0 with *out filled (the verdict is in the report), or -1
 * with a message when the options are unusable. */
int ppv_schedule_check(const ppv_schedule *s, const ppv_check_options *opt,
                       ppv_check_report **out, char *err, size_t errlen);

void ppv_check_report_free(ppv_check_report *r);

/* ------------------------------------------------------------------------ */
/* Transports                                                               */

/* Errors a transport call returns (0 is success). */
enum {
    PPV_ERR_ABORTED = -100, /* the communicator was aborted (a peer failed, a deadlock) */
    PPV_ERR_MISMATCH = -101, /* a collective disagrees on kind, root, size or dtype */
    PPV_ERR_USAGE = -102     /* a bad peer, group or nesting */
};

/* One NCCL-shaped interface; the mock transport and the real NCCL one (a
 * later layer) implement it, and the rank runtime calls only this. Every
 * call is made by one rank on its own behalf; comm 0 is the world. Sends
 * and receives match FIFO per (sender, receiver, communicator); collectives
 * match by per-communicator sequence number. */
typedef struct ppv_transport_ops {
    int (*send)(void *impl, int32_t rank, const void *buf, size_t bytes, int32_t peer,
                int32_t comm, const char *what);
    int (*recv)(void *impl, int32_t rank, void *buf, size_t bytes, int32_t peer, int32_t comm,
                const char *what);
    int (*group_start)(void *impl, int32_t rank);
    int (*group_end)(void *impl, int32_t rank);
    /* Sum of fp32 buffers, added in communicator rank order (deterministic). */
    int (*allreduce_f32)(void *impl, int32_t rank, float *buf, size_t count, int32_t comm,
                         const char *what);
    int (*broadcast)(void *impl, int32_t rank, void *buf, size_t bytes, int32_t root,
                     int32_t comm, const char *what);
    /* recv holds n x bytes: member i's send buffer lands at i * bytes. */
    int (*allgather)(void *impl, int32_t rank, const void *send, void *recv, size_t bytes,
                     int32_t comm, const char *what);
    int (*abort)(void *impl, int32_t rank, const char *why);
    /* 0, or the error that stopped the communicator. */
    int (*async_error)(void *impl, int32_t rank);
    /* Without waiting: *arrived says whether a message from peer on comm
     * is there to receive (MPI_Iprobe; a poll loop's question). */
    int (*probe)(void *impl, int32_t rank, int32_t peer, int32_t comm, int *arrived);
    /* The run fails here with msg: a finding (env 0) or the environment
     * (env 1). The mock aborts its world so that every rank unwinds; a
     * transport of processes reports it and ends the job (MPI_Abort). What
     * ppv_world_fail calls. */
    void (*fail)(void *impl, int32_t rank, int env, const char *msg);
    /* Work was done (a compute): the mock's watchdog counts from here. */
    void (*progress)(void *impl, int32_t rank);
    /* A poll that did nothing: the mock switches ranks here. */
    void (*yield)(void *impl, int32_t rank);
} ppv_transport_ops;

typedef struct ppv_transport {
    const ppv_transport_ops *ops;
    void *impl;
} ppv_transport;

/* ------------------------------------------------------------------------ */
/* Transports whose ranks are processes: `mpirun -np N ppv run FILE         */
/* --transport mpi`, one process per rank, on one machine or many           */

typedef struct ppv_proc ppv_proc;

/* Joins the job of the named transport ("mpi" or "nccl"): loads its
 * module (libppv_mpi.so, libppv_nccl.so, so that ppv itself starts
 * without any MPI or NCCL library) and starts it (MPI_Init; for NCCL the
 * communicator too). 0 with *out, or -1 with the reason (no module, a ppv
 * built without it, no GPU). */
int ppv_proc_start(const char *name, ppv_proc **out, char *err, size_t errlen);
/* "mpi" or "nccl". */
const char *ppv_proc_name(const ppv_proc *p);
/* This process's rank in the job, and the job's size. */
int32_t ppv_proc_rank(const ppv_proc *p);
int32_t ppv_proc_size(const ppv_proc *p);
/* Leaves the job (MPI_Finalize) and frees p; NULL is allowed. */
void ppv_proc_end(ppv_proc *p);

/* ------------------------------------------------------------------------ */
/* The mock world: every rank a coroutine in this process, under the        */
/* deterministic scheduler                                                  */

typedef enum ppv_policy_kind {
    PPV_POLICY_RR,     /* the next runnable rank after the last one */
    PPV_POLICY_RANDOM, /* uniform among runnable ranks, from (seed, step) */
    PPV_POLICY_PCT,    /* probabilistic concurrency testing (seed, depth) */
    PPV_POLICY_REPLAY, /* the decisions of a trace file */
    PPV_POLICY_EXPLORE /* an explorer's (ppv_explorer): the fuzz layer's dfs */
} ppv_policy_kind;

/* What one scheduler step did that an explorer needs to reorder steps
 * soundly. Sends and receives on one channel commute (FIFO, one sender,
 * one receiver) and collectives add in a fixed order, so the only steps
 * whose order can change what a rank does are a probe and the one send
 * whose message the probe would find first: the channel's seq-th, where
 * seq - 1 is what the prober has received from it. touch lists sends (the
 * channel's seq-th message) and probes (asking for the seq-th); a probe
 * and a send are dependent when channel and seq agree. after lists the
 * earlier steps this one had to follow (the send a receive took, the
 * receive a rendezvous send waited for, the step that completed what the
 * rank waited on, the arrivals a collective's last member combined). */
enum { PPV_TOUCH_SEND = 1, PPV_TOUCH_PROBE = 2 };
typedef struct ppv_touch {
    int32_t kind;
    uint64_t channel; /* (communicator, from, to) as one number */
    int64_t seq;
} ppv_touch;

typedef struct ppv_step {
    int32_t rank;
    const ppv_touch *touch;
    int32_t ntouch;
    const int64_t *after;
    int32_t nafter;
} ppv_step;

typedef struct ppv_explorer {
    /* The rank to run at this step (ready[r] marks the runnable ones), or
     * -1 to end the run here (PPV_RUN_PRUNED). */
    int32_t (*choose)(void *ctx, int64_t step, const unsigned char *ready, int32_t nranks);
    /* After the chosen rank ran its step. */
    void (*ran)(void *ctx, int64_t step, const ppv_step *s);
    void *ctx;
} ppv_explorer;

typedef struct ppv_policy {
    ppv_policy_kind kind;
    uint64_t seed;
    int32_t depth;     /* PCT: number of priority change points + 1 */
    int64_t pct_steps; /* PCT: steps over which change points are drawn */
    const int32_t *replay; /* REPLAY: the decisions, one rank per step */
    int64_t nreplay;
    int lenient; /* REPLAY: past the decisions, or where one names a rank that
                    cannot run, go on round-robin instead of failing (the
                    explorer's minimisation replays prefixes this way) */
    const ppv_explorer *explorer; /* EXPLORE */
} ppv_policy;

/* Parses "rr", "random", "pct" or "pct:DEPTH" (seed and trace are given
 * apart). */
int ppv_policy_parse(const char *text, ppv_policy *out);

/* One fault the mock transport puts into a run, at a point the explorer
 * chose; a trace file records it with the decisions. */
typedef enum ppv_fault_kind {
    PPV_FAULT_NONE,
    PPV_FAULT_DROP,      /* the message is lost (its sender goes on) */
    PPV_FAULT_DUPLICATE, /* the message arrives twice */
    PPV_FAULT_CORRUPT,   /* one bit of the message is flipped in transit */
    PPV_FAULT_KILL,      /* the sending rank dies instead of sending */
    PPV_FAULT_DELAY,     /* the message reaches its receiver PPV_FAULT_DELAY_STEPS scheduler
                            steps late (at once when nothing else can run); the channel's later
                            messages wait behind it */
    PPV_FAULT_EAGER,     /* from this message on, its link buffers messages up to its size:
                            buffering that can mask an unsafe send */
    PPV_FAULT_CUT,       /* the pipeline only: stage 0 makes a hard cut before chunk `message` */
    PPV_FAULT_COUNT
} ppv_fault_kind;

enum { PPV_FAULT_DELAY_STEPS = 64 };

typedef struct ppv_fault {
    ppv_fault_kind kind;
    int64_t message; /* the run's point-to-point send it hits, counted from 0 (CUT: the
                        chunk) */
} ppv_fault;

/* "drop", "duplicate", "corrupt", "kill", "delay", "eager", "cut" ("none" for
 * NONE); -1 for another. */
int ppv_fault_parse(const char *text, ppv_fault_kind *out);
const char *ppv_fault_name(ppv_fault_kind k);

typedef struct ppv_world_options {
    int32_t nranks;
    ppv_semantics sem;
    ppv_policy policy;
    int64_t watchdog_steps; /* scheduler steps without progress that make a hang */
    size_t stack_bytes;     /* per rank coroutine */
    ppv_fault fault;        /* PPV_FAULT_NONE: none */
} ppv_world_options;

typedef enum ppv_run_status {
    PPV_RUN_DONE,     /* every rank returned */
    PPV_RUN_DEADLOCK, /* no rank can run and not all are done */
    PPV_RUN_HANG,     /* the watchdog fired: steps without progress */
    PPV_RUN_FAILED,   /* a rank reported a failure (ppv_world_fail) */
    PPV_RUN_PRUNED    /* the explorer ended the run: what is left repeats an explored one */
} ppv_run_status;

typedef struct ppv_world_result {
    ppv_run_status status;
    int64_t steps;         /* scheduler decisions taken */
    int64_t sends;         /* point-to-point sends made (what a fault's point counts) */
    int fault_applied;     /* the fault was put in (its send was reached) */
    uint64_t trace_digest; /* FNV-1a of the decisions */
    ppv_wait *blocked;     /* DEADLOCK/HANG: every rank not done */
    int32_t nblocked;
    ppv_wait *cycle; /* the wait-for cycle, when there is one */
    int32_t ncycle;
    int32_t failed_rank;
    int env_error;     /* FAILED because the run could not be carried out (out of memory,
                          an input that could not be read): not a finding about what ran */
    int32_t pct_fired; /* PCT: change points that fired (at most depth - 1) */
    char message[512];
} ppv_world_result;

typedef struct ppv_world ppv_world;

/* What each rank runs: its program, through the transport. */
typedef void (*ppv_rank_main)(ppv_transport *t, int32_t rank, void *arg);

ppv_world *ppv_world_new(const ppv_world_options *opt, char *err, size_t errlen);
void ppv_world_free(ppv_world *w);

/* Adds a communicator over the given global ranks before the run; returns
 * its id (the world is 0), or -1. */
int32_t ppv_world_add_comm(ppv_world *w, const int32_t *ranks, int32_t n);

/* Runs fn on every rank to completion, deadlock, hang or failure. The
 * result's arrays are freed by ppv_world_result_free. Returns 0, or -1 on
 * an internal error (out of memory) with a message in result->message. */
int ppv_world_run(ppv_world *w, ppv_rank_main fn, void *arg, ppv_world_result *result);
void ppv_world_result_free(ppv_world_result *r);

/* From inside a rank: the run fails with this message (a tripwire). On
 * the mock the world is aborted so every other rank's next transport call
 * returns PPV_ERR_ABORTED; on a transport of processes the rank reports it
 * and the job ends (the transport's fail). */
void ppv_world_fail(ppv_transport *t, int32_t rank, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* As ppv_world_fail, for a failure of the environment (out of memory, an
 * input that cannot be read): the result says env_error, and commands
 * exit 2 rather than report a finding. */
void ppv_world_fail_env(ppv_transport *t, int32_t rank, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* From inside a rank: a scheduling point that does nothing (a poll). It is
 * not progress: a rank that only polls trips the watchdog. */
void ppv_world_yield(ppv_transport *t, int32_t rank);

/* From inside a rank: work was done (a compute), for the watchdog. */
void ppv_world_progress(ppv_transport *t, int32_t rank);

/* The decisions taken so far, and the trace file that replays them. */
const int32_t *ppv_world_decisions(const ppv_world *w, int64_t *n);
int ppv_trace_write(FILE *f, const ppv_world *w);
/* Reads a trace file's decisions (malloc'd). A trace is run-length
 * encoded, so a few bytes can announce billions of decisions: one that
 * announces more than max_decisions is refused before anything is
 * allocated, and the decisions are allocated only once the runs add up. */
int ppv_trace_read(const char *path, int64_t max_decisions, int32_t **decisions, int64_t *n,
                   int32_t *nranks, char *err, size_t errlen);
/* The fault a trace file records (kind NONE when it has none); 0 or -1. */
int ppv_trace_read_fault(const char *path, ppv_fault *fault, char *err, size_t errlen);

/* ------------------------------------------------------------------------ */
/* Running a schedule: one training step of the built-in model              */

/* How a stage keeps what its backward needs (`--recompute`). A forward's
 * saved tensors serve the input backward (I or B), which copies what the
 * weight backward reads into its weight state and frees them. */
typedef enum ppv_recompute_kind {
    PPV_RC_NONE,   /* stash: saved lives from the forward to the input backward */
    PPV_RC_FULL,   /* keep the stage input; rebuild saved before the backward (at R or I) */
    PPV_RC_LAYERS, /* keep the input of every k-th layer of the stage; the input backward
                      rebuilds one segment of k layers at a time, last first */
    PPV_RC_MB,     /* by microbatch: stash while the rank holds fewer than k stashed
                      forwards (of any stage), FULL beyond */
    PPV_RC_SELECTIVE /* stash all but the attention cores (their outputs and softmax
                        statistics); the input backward rebuilds them a layer at a time
                        (Korthikanti et al., 2022) */
} ppv_recompute_kind;

typedef struct ppv_recompute {
    uint8_t kind; /* ppv_recompute_kind */
    int32_t k;    /* LAYERS: layers a segment; MB: stashed forwards a rank keeps */
} ppv_recompute;

typedef struct ppv_run_options {
    ppv_semantics sem;
    ppv_policy policy;
    ppv_model_config model;         /* layers are split over the schedule's stages */
    const ppv_recompute *recompute; /* [nstages], or NULL: every stage stashes */
    int64_t watchdog_steps;
    ppv_fault fault; /* one transport fault (the explorer's), or none */
    int64_t extra_bytes; /* self-test: rank 0 holds this many more activation bytes for
                            the whole step, through the engine's allocator, so that a
                            memory comparison that must fail can be seen to fail */
    int perturb; /* self-test: flip the lowest bit of the first summed gradient,
                    so a comparison that must fail can be seen to fail */
    /* Where the model and inputs come from (a golden file's replay): by
     * default the model is built from `model` and each microbatch's inputs
     * drawn from the RNG. With `weights`, that model runs as given (its
     * layers split over the stages, even if fewer); with `load_inputs`,
     * microbatch mb's inputs are loaded on first use (0, or -1 with a
     * message) and freed after its last weight backward. */
    const ppv_model *weights;
    /* Where the model's ops run: NULL or "cpu", or "cuda" (every kernel on
     * the GPU, the same bits; see ppv_model_set_device). With `weights`,
     * it must name the device those weights were set to. */
    const char *device;
    int (*load_inputs)(void *ctx, int32_t mb, ppv_mb_inputs *in, char *err, size_t errlen);
    void *inputs_ctx;
    /* Where the ranks run: NULL on the mock transport (every rank in this
     * process, under `policy`); or a job of processes (ppv_proc_start), of
     * which this process runs its own rank and the results are shared by
     * all. There a send is MPI's synchronous send under rendezvous and its
     * buffered send under eager (eager:BYTES: up to BYTES), a schedule
     * that deadlocks under `sem` is refused before it starts unless
     * `allow_unsafe`, and no call waits longer than `timeout_s` seconds:
     * the rank reports a hang (what it waits for, from which rank) and the
     * job ends. policy, watchdog_steps and fault are the mock's. */
    ppv_proc *proc;
    double timeout_s;
    int allow_unsafe;
    /* Called after every executed action with the count done and the
     * schedule's total (a progress display; it must not touch the run). */
    void (*progress)(void *ctx, int64_t done, int64_t total);
    void *progress_ctx;
} ppv_run_options;

ppv_run_options ppv_run_defaults(void);

/* The model config a run of s with o uses: the given weights' config, or
 * o->model with at least one layer per stage. */
ppv_model_config ppv_run_model_config(const ppv_run_options *o, const ppv_schedule *s);

/* Per-stage policies into out[nstages] from a comma-separated list of
 * items, each POLICY (every stage), STAGE:POLICY or STAGE (full), later
 * items overriding earlier ones; POLICY is none, full (or all),
 * selective, layers:K or mb:N. "none", "all" and "0,2,5" read as before. 0, or -1
 * with the reason. */
int ppv_recompute_parse(const char *text, int32_t nstages, ppv_recompute *out, char *err,
                        size_t errlen);

/* The mode (a ppv_recompute_kind other than MB) each forward of s runs in
 * under the policies, into mode[stage * nmb + mb]: by microbatch a forward
 * is recomputed when its rank holds k stashed forwards at it. 0. */
int ppv_recompute_modes(const ppv_schedule *s, const ppv_recompute *recompute, uint8_t *mode);

/* Activation bytes of one stage: what a forward saves for the backward,
 * what the backward-for-inputs keeps for the weights, and the stage input a
 * recomputed stage stashes instead; its layer count and a layer's part of
 * saved and wstate (both are that times the layers); what a selective
 * forward saves, and one layer's attention cores, which its input backward
 * rebuilds (0 for a stage without layers). */
typedef struct ppv_stage_bytes {
    int64_t saved, wstate, input;
    int32_t layers;
    int64_t layer_saved, layer_wstate;
    int64_t selective_saved, core;
} ppv_stage_bytes;

typedef struct ppv_run_report {
    ppv_world_result world; /* status, steps, trace digest, deadlock report */
    int32_t nranks, nstages, nmb, nlayers;
    int32_t *stage_layer; /* [nstages + 1]: stage s holds layers [stage_layer[s], stage_layer[s+1]) */
    double loss;          /* mean over microbatches */
    float *mb_loss;       /* [nmb] each microbatch's loss */
    /* [nstages * nmb] forward passes the model ran for stage s, microbatch
     * mb (at s * nmb + mb), counted where they run: 1 per F, plus 1 when a
     * recomputed stage rebuilds its saved tensors for the backward */
    int32_t *forwards;
    int64_t *layer_forwards; /* [nstages] layer forward passes run, rebuilds included */
    /* [nstages] layers whose attention cores a selective input backward
     * rebuilt, as the kernel reports them */
    int64_t *core_rebuilds;
    float *grads;         /* all layers' gradients, summed over microbatches in order */
    size_t ngrads;
    uint64_t grad_digest; /* FNV-1a of grads */
    int64_t *peak_bytes;      /* [nranks] measured by the engine's allocator */
    int64_t *predicted_bytes; /* [nranks] from the schedule alone */
    /* Most microbatch weight-gradient buffers held at once: a finished W's
     * gradients wait only until every earlier microbatch of its stage is
     * added (sums run in microbatch order), so this is 1 when each stage's
     * W actions run in microbatch order, and never grows with nmb then. */
    int32_t grad_buffers_peak;
    /* PCT: the run length its change points were drawn over, the policy's
     * pct_steps or, when that is 0, the steps of a round-robin run of the
     * same step (PCT's guarantee needs change points spread over the run
     * actually taken); 0 for other policies. */
    int64_t pct_steps;
    ppv_world *trace; /* the run's decisions, for ppv_trace_write */
} ppv_run_report;

/* Runs one training step of s (lowered first if compute-only) on the mock
 * transport. Returns 0 with *out (the verdict is in out->world.status), or
 * -1 when the schedule or options cannot run (message in err). */
int ppv_run(const ppv_schedule *s, const ppv_run_options *o, ppv_run_report **out, char *err,
            size_t errlen);
void ppv_run_report_free(ppv_run_report *r);

/* The same step on one rank with no pipeline: grads and mean loss. */
int ppv_run_reference(const ppv_model_config *cfg, int32_t nmb, float **grads, size_t *ngrads,
                      double *loss, char *err, size_t errlen);

/* Peak activation bytes per rank that the schedule implies, for the
 * engine's allocation rules: F keeps `saved`; I adds `wstate` and frees
 * `saved`; W frees `wstate`; B does I and W. A recomputed stage keeps
 * `input` (a checkpointed one, one input per segment), holds `saved` while
 * a forward runs and from its rebuild (at R or I; a segment's at I) to the
 * end of that backward, and frees an input once what it rebuilds is back.
 * A selective stage keeps `selective_saved` instead of `saved` and holds
 * `core` beside it and `wstate` while its input backward runs. */
int ppv_predict_activation_bytes(const ppv_schedule *s, const ppv_stage_bytes *bytes,
                                 const ppv_recompute *recompute, int64_t *peak);

/* FNV-1a over n bytes (the training gradients' digest). */
uint64_t ppv_digest(const void *data, size_t n);
/* A digest of n bytes read as little-endian 8-byte words in four
 * interleaved FNV-1a lanes (the tail zero-padded, the length folded in):
 * several times faster than ppv_digest, and any change to one word changes
 * it. The inference contract's output_digest_i64 and the pipeline's output
 * digest, which are taken on every chunk. */
uint64_t ppv_digest_words(const void *data, size_t n);

/* How two gradient vectors differ. */
typedef struct ppv_grad_diff {
    int bitwise_equal;
    uint64_t max_ulp;
    double max_abs, max_rel;
    double rel_l2;       /* ||a - b|| / ||b|| in the 2-norm; inf where only one side is NaN */
    int64_t first_index; /* -1 when equal */
    float first_a, first_b;
} ppv_grad_diff;

/* The bound a step whose matmuls ran on cuBLAS (another summation order)
 * must meet against the reference: rel_l2 of the gradients <= 2^-4, the
 * bound the kernel tests give bf16-rounded gradients against float64
 * (tests/test_kernels.c, TOL_STACK_GRAD). */
#define PPV_CUBLAS_GRAD_BOUND 0x1p-4

void ppv_grads_compare(const float *a, const float *b, size_t n, ppv_grad_diff *d);

/* The evidence that the recompute path really re-ran what it claims,
 * from the two runs' own counters against what the schedule implies: one
 * stage forward per F, plus one per backward of a stage that recomputes
 * (full, layers:K, mb:N's recomputed microbatches), and under selective
 * recompute the attention cores of every layer of the stage at each such
 * backward; and each run's measured peak against the prediction. */
typedef struct ppv_recompute_evidence {
    int64_t stash_forwards, recompute_forwards;           /* counted by the runs */
    int64_t want_stash_forwards, want_recompute_forwards; /* implied by the schedule */
    int64_t core_rebuilds, want_core_rebuilds;            /* both runs together */
    int64_t stash_layer_forwards, recompute_layer_forwards;
    double extra_forward_units; /* recompute's extra layer forwards, in stage forwards */
    int forwards_ok;            /* every count equals what the schedule implies */
    int peaks_ok;               /* measured == predicted on every rank, both runs */
} ppv_recompute_evidence;

/* Fills *ev from two completed runs of s (stash: no stage recomputes;
 * rec: under recompute[nstages], NULL meaning full everywhere). 0, or -1
 * (ev zeroed) if a run did not complete or cannot be of s. */
int ppv_recompute_evidence_of(const ppv_schedule *s, const ppv_recompute *recompute,
                              const ppv_run_report *stash, const ppv_run_report *rec,
                              ppv_recompute_evidence *ev);

/* Recompute against stash: the same step with no stage recomputed and with
 * o->recompute's stages recomputed (every stage when NULL), gradients
 * compared bit for bit. o->perturb applies to the recompute path only. */
typedef struct ppv_recompute_verdict {
    ppv_grad_diff diff;          /* recompute (a) against stash (b) */
    ppv_recompute_evidence evidence; /* when both runs completed */
    int32_t first_layer;         /* where the first difference is; -1 when equal */
    char first_tensor[32];       /* parameter tensor name, "qkv_w" */
    int64_t first_tensor_index;  /* row-major index within that tensor */
    ppv_run_report *stash, *recompute;
} ppv_recompute_verdict;

/* 0 with both runs in *v (compare only when both are PPV_RUN_DONE), or -1
 * when the schedule cannot run (message in err). */
int ppv_verify_recompute(const ppv_schedule *s, const ppv_run_options *o,
                         ppv_recompute_verdict *v, char *err, size_t errlen);
void ppv_recompute_verdict_free(ppv_recompute_verdict *v);

/* ---- the PP inference contract (spec/contract.def) ------------------------------ */

/* The formula every tripwire checks: one generator call to rebuild the KV
 * cache when recomputing, plus one per denoising step. */
int64_t ppv_expected_generator_calls(int do_kv_recompute, int64_t num_denoise_steps);

/* An INFER envelope with every field at its default (version 1,
 * pp_disable_vace 1, kv_cache_attention_bias 0.3, ids 0) and no tensor. */
void ppv_envelope_init(ppv_envelope *e);
/* A result of version 1 for e's ids, ok, with no tensor. */
void ppv_result_init(ppv_result *r, const ppv_envelope *e);

/* What a receiver has seen so far, for the ordering rules: call_id
 * strictly increases over all actions, chunk_index over the INFERs of an
 * epoch, cache_epoch never decreases. */
typedef struct ppv_contract_order {
    int64_t call_id;     /* last seen; -1 before any */
    int64_t chunk_index; /* last INFER's in this epoch; -1 before any */
    int64_t cache_epoch; /* current; -1 before any */
} ppv_contract_order;

ppv_contract_order ppv_contract_order_start(void);

/* Checks e on its own and against o, which it does not change. Returns
 * PPV_FAIL_NONE, or the failure mode with msg naming the rule and e's
 * call_id, chunk_index and cache_epoch. */
ppv_failure ppv_envelope_check(const ppv_envelope *e, const ppv_contract_order *o, char *msg,
                               size_t msglen);
/* Takes a checked envelope's ids into o. */
void ppv_contract_order_advance(ppv_contract_order *o, const ppv_envelope *e);

/* What stage 0 does with a result of the envelope it sent. */
typedef enum ppv_result_verdict {
    PPV_RESULT_ACCEPT,          /* decode it (ok) or report the mesh's error (!ok) */
    PPV_RESULT_DROP_STALE,      /* another cache epoch: never decoded */
    PPV_RESULT_DROP_DUPLICATE,  /* a call_id already accepted: never decoded */
    PPV_RESULT_REJECT           /* breaks the contract: *mode says how */
} ppv_result_verdict;

/* Stage 0's acceptance rules for r, given the envelope sent with that
 * call_id, the current epoch and the last call_id accepted (-1: none). */
ppv_result_verdict ppv_result_check(const ppv_result *r, const ppv_envelope *sent,
                                    int64_t cache_epoch, int64_t last_accepted, ppv_failure *mode,
                                    char *msg, size_t msglen);

/* Bytes of t's elements (0 when absent). */
size_t ppv_tensor_bytes(const ppv_tensor *t);

/* Wire framing: a header of PPV_FRAME_HEADER words (action, call_id,
 * chunk_index, cache_epoch, n_tensors, version, meta_bytes), then the
 * metadata and tensor specs as canonical text (one "key=value" line per
 * field and "tensor.KEY=DTYPE d0 d1 ..." per tensor, sorted by key), then
 * the tensors in spec order. Only an INFER envelope or a result has a
 * payload: NOOP, SHUTDOWN and ERROR are their header. */
enum { PPV_FRAME_HEADER = 7, PPV_FRAME_MAX_TENSORS = 8 };

typedef struct ppv_frame {
    int64_t header[PPV_FRAME_HEADER];
    char *meta; /* header[6] bytes and a NUL; NULL when there is no payload */
    int ntensors;
    const ppv_tensor *tensors[PPV_FRAME_MAX_TENSORS]; /* spec order */
} ppv_frame;

/* Anti-stranding: checks e against o, serialises the metadata, builds and
 * checks every tensor spec, all before anything is sent. PPV_FAIL_NONE with
 * *f ready to send (the header is then a commitment), or the failure mode
 * and nothing in *f. f's tensors point into e. */
ppv_failure ppv_envelope_frame(const ppv_envelope *e, const ppv_contract_order *o, ppv_frame *f,
                               char *msg, size_t msglen);
/* The same for a result; r is checked for form only (stage 0 judges it). */
ppv_failure ppv_result_frame(const ppv_result *r, ppv_frame *f, char *msg, size_t msglen);
void ppv_frame_free(ppv_frame *f);

/* Receiver's side: rebuilds an envelope from its header and metadata,
 * refusing an unknown version, action or field, a missing or repeated
 * field, a header that disagrees with the metadata and a spec of the wrong
 * dtype or rank, before anything else is received. Tensors are allocated
 * from the specs (zeroed) and listed in spec order in order[], to be filled
 * with the payload. meta may be NULL when header says 0 bytes. */
ppv_failure ppv_envelope_unframe(const int64_t *header, const char *meta, ppv_envelope *e,
                                 ppv_tensor **order, int *norder, char *msg, size_t msglen);
ppv_failure ppv_result_unframe(const int64_t *header, const char *meta, ppv_result *r,
                               ppv_tensor **order, int *norder, char *msg, size_t msglen);
/* Frees the tensors an unframe allocated. */
void ppv_envelope_free_tensors(ppv_envelope *e);
void ppv_result_free_tensors(ppv_result *r);

/* ---- the PP inference pipeline on the mock transport (ppv pp) -------------------- */

/* Faults `ppv pp --inject` puts in on purpose (spec/inject.def). */
typedef enum ppv_pp_inject {
#define PPV_PP_INJECT(NAME, token, mode, caught_by, text) PPV_INJECT_##NAME,
#include "inject.def"
#undef PPV_PP_INJECT
    PPV_INJECT_COUNT
} ppv_pp_inject;

/* What catches a failure: the four tripwire points, and the other checks. */
typedef enum ppv_pp_point {
    PPV_POINT_NONE,
    PPV_POINT_STAGE0_SEND,   /* 1: stage 0 before it sends */
    PPV_POINT_LEADER,        /* 2: the leader before it broadcasts */
    PPV_POINT_MESH_RUNNING,  /* 3: every mesh rank while it runs the chunk */
    PPV_POINT_STAGE0_RESULT, /* 4: stage 0 on the result */
    PPV_POINT_HANDSHAKE,     /* the startup parity check */
    PPV_POINT_GROUP,         /* the collective wrapper's group check */
    PPV_POINT_DIGEST,        /* the mesh's input digest */
    PPV_POINT_TRANSPORT,     /* the transport (a collective mismatch) */
    PPV_POINT_WATCHDOG,      /* a bounded wait */
    PPV_POINT_COUNT
} ppv_pp_point;

/* "stage0-send", "leader", ... */
const char *ppv_pp_point_name(ppv_pp_point p);
/* Injection token ("OM-03", "extra-generator-call"), what it does, the
 * failure mode it must produce (PPV_FAIL_NONE: the run completes ok) and
 * the point that must catch it. */
const char *ppv_pp_inject_token(ppv_pp_inject i);
const char *ppv_pp_inject_text(ppv_pp_inject i);
ppv_failure ppv_pp_inject_mode(ppv_pp_inject i);
ppv_pp_point ppv_pp_inject_caught_by(ppv_pp_inject i);
/* The injection spelled token, or -1. */
int ppv_pp_inject_lookup(const char *token);

enum { PPV_PP_MAX_CUTS = 64 };

/* Design variants with a known bug, for the explorer's tests (the seeded
 * bugs it must find): never what ppv pp runs. */
typedef enum ppv_pp_bug {
    PPV_PP_BUG_NONE,
    PPV_PP_BUG_WAIT_TRUSTS_EPOCH,   /* with poll: stage 0 takes a result it waited for (its probe
                                       found nothing) without judging it, a stale one included */
    PPV_PP_BUG_DECODE_FIRST,        /* stage 0 decodes result k before it sends envelope k+1 */
    PPV_PP_BUG_LEADER_DIES,         /* the leader returns after receiving chunk 1's header */
    PPV_PP_BUG_WORKER_LOCAL_RECOMPUTE /* the last mesh rank decides KV recompute from its own
                                         count of chunks, not the envelope's flag */
} ppv_pp_bug;

typedef struct ppv_pp_options {
    int32_t mesh;            /* stage-1 ranks: 1 is PP0, >= 2 PP1 (leader + workers) */
    int32_t chunks;          /* chunks stage 0 asks for */
    int32_t steps;           /* denoising steps per chunk */
    int kv_recompute;        /* 0: stash (R1); 1: recompute from stage 0's context frames (R0a) */
    int32_t recompute_every; /* with kv_recompute: chunks j % E == 0 of an epoch, j > 0 */
    int32_t kv_window;       /* latent frames the KV cache keeps: a multiple of 3 */
    int32_t d_in, d_out;     /* stage 0's queue bounds: inflight_to_mesh, ready_for_decode */
    int32_t cuts[PPV_PP_MAX_CUTS]; /* chunks before which stage 0 makes a hard cut */
    int32_t ncuts;
    int32_t height, width;   /* pixels: multiples of 16 */
    int32_t cond_len;        /* conditioning tokens */
    ppv_gen_config model;
    const char *device; /* where the generator's ops run: NULL or "cpu", or "cuda" */
    ppv_pp_inject inject;
    ppv_policy policy;
    int64_t watchdog_steps;
    int control_only; /* no model compute: a call passes its latents through, keeping every
                         message and collective (the control plane alone) */
    int poll; /* stage 0 takes each result as soon as it has arrived (it probes the link
                 between sends and decodes, as a receive thread does), so what it does
                 next depends on the interleaving; its output must not */
    unsigned skip_points; /* tests: 1 << ppv_pp_point of checks taken out */
    ppv_pp_bug bug;       /* tests: a seeded bug */
    ppv_fault fault;      /* one transport fault (the explorer's), or none */
    /* Replay: stage 0 sends these envelopes in order instead of planning
     * (they are not changed; their tensors stay the caller's), and every
     * result it receives is passed to on_result. */
    const ppv_envelope *replay;
    int64_t nreplay;
    /* Called by stage 0 for each envelope it sends, with its result once
     * accepted (NULL for SHUTDOWN, or when none came): a recorder. */
    int (*on_call)(void *ctx, const ppv_envelope *e, const ppv_result *r, char *err,
                   size_t errlen);
    void *on_call_ctx;
    /* --compare-kv: keep the whole mesh's KV cache as each chunk's
     * denoising starts (ppv_pp_report.kv) */
    int keep_kv;
    /* Where the ranks run: NULL on the mock; or a job of 1 + mesh processes
     * (ppv_proc_start), this one running its own rank, the link to the
     * leader buffered as on the mock and no call waiting longer than
     * timeout_s (then the rank reports the hang and the job ends, as any
     * failure does). Every process ends with stage 0's report. policy,
     * watchdog_steps, fault, inject, replay and keep_kv are the mock's. */
    ppv_proc *proc;
    double timeout_s;
} ppv_pp_options;

/* Mesh 2, 8 chunks, 4 steps, stash, E=1, window 6, D_in = D_out = 2, no
 * cut, 32x32, 4 conditioning tokens, the generator's default, rr,
 * watchdog 100000 steps. */
ppv_pp_options ppv_pp_defaults(void);

/* Checks the options on their own; 0, or -1 with the reason. */
int ppv_pp_options_check(const ppv_pp_options *o, char *err, size_t errlen);

typedef struct ppv_pp_report {
    int ok;
    ppv_failure failure;      /* PPV_FAIL_NONE when ok */
    ppv_pp_point caught_by;   /* PPV_POINT_NONE when ok */
    int32_t failed_rank;      /* -1 when ok */
    char message[1024];       /* carries call_id, chunk_index, cache_epoch, rank and group */
    int64_t chunks_emitted;   /* results decoded */
    int64_t *expected_calls;  /* [chunks_emitted] */
    int64_t *observed_calls;  /* [chunks_emitted] */
    int64_t *emitted_call_ids;
    int64_t dropped_stale, dropped_duplicate;
    uint64_t output_digest;          /* chained ppv_digest_words of the decoded latents, in order */
    int32_t max_inflight, max_ready; /* the queues' high-water marks */
    int64_t generator_calls;  /* leader's, over the run */
    ppv_world_result world;   /* steps, trace digest, blocked ranks */
    ppv_world *trace;
    /* keep_kv: per emitted chunk, every layer's K then V of the whole mesh
     * (heads in order), as the chunk's denoising started */
    float **kv;        /* [nkv], by chunk; NULL where the chunk never ran */
    size_t *kv_floats; /* [nkv] */
    int64_t nkv;
    /* keep_kv: the decoded latents of every emitted chunk, bf16 in order
     * (NULL otherwise) */
    uint16_t *outputs;
    size_t noutputs;
} ppv_pp_report;

/* Runs stage 0 and the mesh on the mock transport. 0 with *out (the
 * verdict is in it), or -1 when the options cannot run (err). */
int ppv_pp_run(const ppv_pp_options *o, ppv_pp_report **out, char *err, size_t errlen);
void ppv_pp_report_free(ppv_pp_report *r);


#endif
