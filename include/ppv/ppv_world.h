/* ppv_world.h - the engine's world room: the transport interface, the mock
 * world under its deterministic scheduler, and the transports of
 * processes (MPI, NCCL) loaded as modules.
 *
 * Functions return 0 on success and a negative value on failure, with a
 * message in the caller's buffer; no function here exits the process.
 */
#ifndef PPV_WORLD_H
#define PPV_WORLD_H

#include "ppv_check.h"

/* ------------------------------------------------------------------------ */
/* Transports                                                               */

/* Errors a transport call returns (0 is success). */
enum {
    PPV_ERR_ABORTED = -100, /* the communicator was aborted (a peer failed, a deadlock) */
    PPV_ERR_MISMATCH = -101, /* a collective disagrees on kind, root, size or dtype */
    PPV_ERR_USAGE = -102,    /* a bad peer, group or nesting */
    PPV_ERR_TOO_BIG = -103   /* a message larger than a shared bridge carries (ppv_ext) */
};

/* A collective its members disagree on (PPV_ERR_MISMATCH), as the
 * transport saw it: which two members' calls differ, in what, and how
 * many members had made the earlier call when the odd one arrived. */
typedef struct ppv_coll_mismatch {
    int64_t seq;            /* the communicator's collective number */
    int32_t comm;
    int32_t member, other;  /* indices in the communicator: the call that did not match, and */
                            /* the one it was measured against (the first to arrive) */
    int32_t member_rank, other_rank; /* their world ranks */
    int32_t agreeing;       /* members that had made other's call when member arrived */
    const char *property;   /* "kind", "size" or "root": the first that differs */
    char call[96], other_call[96]; /* each call in words: "all-reduce 'tp all-reduce', 8 bytes" */
} ppv_coll_mismatch;

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
    /* After a call returned PPV_ERR_MISMATCH on a collective: 1 with *out,
     * else 0. NULL where the transport ends the job itself (MPI, NCCL). */
    int (*mismatch)(void *impl, ppv_coll_mismatch *out);
    /* Work was done (a compute): the mock's watchdog counts from here. */
    void (*progress)(void *impl, int32_t rank);
    /* A poll that did nothing: the mock switches ranks here. */
    void (*yield)(void *impl, int32_t rank);
    /* The run's clock in nanoseconds, for timings and event logs: the
     * mock's virtual time (one microsecond a scheduler step, so its times
     * are as deterministic as its trace). NULL: the machine's monotonic
     * clock (ppv_transport_clock_ns). */
    int64_t (*clock_ns)(void *impl);
    /* Bounds this process's next waits by seconds of wall time instead of
     * the run's timeout, naming `why` in the hang's report (a watchdog and
     * what it watches); seconds <= 0 goes back to the timeout. NULL: the
     * transport has no wall-time bound (the mock counts steps). */
    void (*set_wait)(void *impl, double seconds, const char *why);
} ppv_transport_ops;

typedef struct ppv_transport {
    const ppv_transport_ops *ops;
    void *impl;
} ppv_transport;

/* ------------------------------------------------------------------------ */
/* External ranks: OS threads or processes of any language (a Python      */
/* control plane's ranks) run as the ranks of a mock world, in lockstep    */

/* One run's bridge between n threads and a mock world's ranks: pass
 * ppv_ext_rank_main as the world's rank main with the bridge as its arg,
 * and have thread r call ppv_ext_begin(x, r), then its communication calls,
 * then ppv_ext_end. Each call is a scheduling point, and at most one
 * thread runs between two of them (the scheduler's choice), so a run is
 * decided by the policy alone. A thread that runs idle_seconds of wall
 * time without a call fails the run, naming its rank and its last call;
 * from then on, and once the world has stopped (a deadlock, a failure) or
 * the rank was killed, its calls return PPV_ERR_ABORTED at once. A bridge
 * made by ppv_ext_new serves one run; make a new one for the next. */
typedef struct ppv_ext ppv_ext;

ppv_ext *ppv_ext_new(int32_t nranks, double idle_seconds, char *err, size_t errlen);
/* A bridge in shared memory, whose ranks may be processes forked after it
 * was made (each rank's calls from one thread of one process): a call's
 * data travels through a payload of message_bytes a rank (taken only as
 * it is touched), and a call that needs more returns PPV_ERR_TOO_BIG. It
 * serves run after run: ppv_ext_reset before each but the first, once no
 * thread or process of the last is left. ppv_ext_end may come from
 * another process (one that saw the rank's process die). */
ppv_ext *ppv_ext_new_shared(int32_t nranks, double idle_seconds, size_t message_bytes,
                            char *err, size_t errlen);
void ppv_ext_reset(ppv_ext *x);
/* The most one call of a shared bridge carries (0: a bridge of threads,
 * no bound). */
size_t ppv_ext_message_bytes(const ppv_ext *x);
/* Every call waiting, or made from now on, returns PPV_ERR_ABORTED (a
 * driver giving up). */
void ppv_ext_close(ppv_ext *x);
/* After ppv_world_run has returned and the threads have ended. */
void ppv_ext_free(ppv_ext *x);
/* The world's rank main for a bridge (arg). */
void ppv_ext_rank_main(ppv_transport *t, int32_t rank, void *arg);

/* Thread r's side. Each returns 0 or a transport error (PPV_ERR_*); what
 * names the call's place in a deadlock's report (a Python file:line, say;
 * 63 bytes kept). */
int ppv_ext_begin(ppv_ext *x, int32_t rank);
int ppv_ext_send(ppv_ext *x, int32_t rank, const void *buf, size_t bytes, int32_t peer,
                 int32_t comm, const char *what);
int ppv_ext_recv(ppv_ext *x, int32_t rank, void *buf, size_t bytes, int32_t peer, int32_t comm,
                 const char *what);
int ppv_ext_broadcast(ppv_ext *x, int32_t rank, void *buf, size_t bytes, int32_t root,
                      int32_t comm, const char *what);
int ppv_ext_allreduce_f32(ppv_ext *x, int32_t rank, float *buf, size_t count, int32_t comm,
                          const char *what);
int ppv_ext_allgather(ppv_ext *x, int32_t rank, const void *send, void *recv, size_t bytes,
                      int32_t comm, const char *what);
int ppv_ext_barrier(ppv_ext *x, int32_t rank, int32_t comm, const char *what);
int ppv_ext_probe(ppv_ext *x, int32_t rank, int32_t peer, int32_t comm, int *arrived,
                  const char *what);
int ppv_ext_yield(ppv_ext *x, int32_t rank, const char *what);
/* Waits until a message from another member of comm is there to receive
 * (at once when one is): with ppv_ext_probe of each member after it, a
 * receive from any rank (torch.distributed's src=None) that blocks, as a
 * receive does, rather than spins. The mock world only. */
int ppv_ext_wait_any(ppv_ext *x, int32_t rank, int32_t comm, const char *what);
/* torch.distributed's isend and irecv: posted at once, the thread goes on;
 * each completes when matched (a send when received, or at once when the
 * send semantics make it eager; its data is copied when posted), and
 * ppv_ext_wait_op waits for one, ppv_ext_test_op says whether it is done.
 * The op's number (1, 2, ... per rank and run) in *id. A receive still
 * pending when the thread ends is taken back (its buffer must live until
 * then); a send stays receivable. The mock world only. */
int ppv_ext_isend(ppv_ext *x, int32_t rank, const void *buf, size_t bytes, int32_t peer,
                  int32_t comm, const char *what, int64_t *id);
int ppv_ext_irecv(ppv_ext *x, int32_t rank, void *buf, size_t bytes, int32_t peer, int32_t comm,
                  const char *what, int64_t *id);
int ppv_ext_wait_op(ppv_ext *x, int32_t rank, int64_t id, const char *what);
int ppv_ext_test_op(ppv_ext *x, int32_t rank, int64_t id, int *done, const char *what);
/* Waits for the first of the posted ops ids[0..n) to complete, or for a
 * message from any other member of one of the communicators anys[0..nany)
 * (at most 64) to be there: *which is the first done op's index in the
 * list (taken, as ppv_ext_wait_op takes it), n + j for a message on
 * anys[j], or -1 when block is 0 and nothing is ready yet, or when the wait timed out: with deadline >=
 * 0 (seconds of the rank's clock) it ends when no rank of the world can
 * go on, the earliest deadline first. A rank whose threads each wait on a call of
 * their own (ppv.dist with threads) waits this way. The mock world only. */
int ppv_ext_wait_some(ppv_ext *x, int32_t rank, const int64_t *ids, int32_t n,
                      const int32_t *anys, int32_t nany, int block, double deadline,
                      int32_t *which, const char *what);
/* torch.distributed's new_group: the communicator of ranks (n global
 * ranks, in order) in *comm, made by the first rank to ask and the same
 * for every other (the world's ranks in order, tag 0: communicator 0).
 * A tag other than 0 gives a communicator of its own over the same ranks,
 * for the point-to-point messages of that tag (each tag its own queues,
 * as tag matching has them). Not a scheduling point. The mock world
 * only. */
int ppv_ext_new_group(ppv_ext *x, int32_t rank, const int32_t *ranks, int32_t n, int64_t tag,
                      int32_t *comm, const char *what);
/* Sends and receives between these two are posted together and complete
 * at the end (NCCL's group calls). */
int ppv_ext_group_start(ppv_ext *x, int32_t rank, const char *what);
int ppv_ext_group_end(ppv_ext *x, int32_t rank, const char *what);
/* The thread is done: error NULL or "" when its function returned, else
 * why it failed (a Python exception and its place), which fails the run.
 * Only the first call for a rank counts. */
void ppv_ext_end(ppv_ext *x, int32_t rank, const char *error);
/* 1 once rank has ended (ppv_ext_end), else 0. */
int ppv_ext_ended(const ppv_ext *x, int32_t rank);

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

/* What one run asks of a transport of processes. */
typedef struct ppv_proc_config {
    ppv_semantics sem;
    double timeout_s; /* the longest any call may wait */
} ppv_proc_config;

/* Before a rank's program: configures the transport and gives t this
 * process's rank calls. 0, or -1 with the reason. */
int ppv_proc_configure(ppv_proc *p, const ppv_proc_config *cfg, ppv_transport *t, char *err,
                       size_t errlen);
/* After the rank's program: waits until every rank is there. 0, or an
 * error (the job has then been ended). */
int ppv_proc_settle(ppv_proc *p);
/* Every rank, the same list: a communicator over those global ranks; its
 * id, or -1 with the reason. */
int32_t ppv_proc_add_comm(ppv_proc *p, const int32_t *ranks, int32_t n, char *err, size_t errlen);
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
    int then_rr; /* REPLAY: past the decisions, go on round-robin (a minimal trace:
                    its forced decisions only); one that cannot run still diverges */
    /* REPLAY with no decisions: round-robin but at these steps (in rising
     * order), where the rank given runs instead: a minimal trace's
     * deviations. One that cannot run diverges, or, lenient, is skipped. */
    const int64_t *dev_step;
    const int32_t *dev_rank;
    int64_t ndev;
    int note_deviations; /* record where the run's decisions differ from round-robin's
                            (ppv_world_deviations) */
    int note_steps; /* record what each step did (ppv_world_steps): `ppv fuzz explain` */
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
    uint64_t trace_digest; /* ppv-fnv64 of the decisions (spec/digests.md) */
    ppv_wait *blocked;     /* DEADLOCK/HANG: every rank not done */
    int32_t nblocked;
    ppv_wait *cycle; /* the wait-for cycle, when there is one */
    int32_t ncycle;
    int32_t failed_rank;
    int env_error;     /* FAILED because the run could not be carried out (out of memory,
                          an input that could not be read): not a finding about what ran */
    int32_t pct_fired; /* PCT: change points that fired (at most depth - 1) */
    int diverged;      /* FAILED because a replayed trace named a rank that could not run,
                          or ended while ranks still ran: the program is not the one traced */
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
    __attribute__((format(printf, 3, 4), cold));

/* As ppv_world_fail, for a failure of the environment (out of memory, an
 * input that cannot be read): the result says env_error, and commands
 * exit 2 rather than report a finding. */
void ppv_world_fail_env(ppv_transport *t, int32_t rank, const char *fmt, ...)
    __attribute__((format(printf, 3, 4), cold));

/* From inside a rank: a scheduling point that does nothing (a poll). It is
 * not progress: a rank that only polls trips the watchdog. */
void ppv_world_yield(ppv_transport *t, int32_t rank);

/* The transport's clock (its clock_ns), or CLOCK_MONOTONIC in nanoseconds. */
int64_t ppv_transport_clock_ns(const ppv_transport *t);

/* From inside a rank: work was done (a compute), for the watchdog. */
void ppv_world_progress(ppv_transport *t, int32_t rank);

/* The decisions taken so far, and the trace file that replays them. */
const int32_t *ppv_world_decisions(const ppv_world *w, int64_t *n);
/* With policy note_deviations: the steps at which the run's decision was
 * not round-robin's, and the rank run there (the run replays from these
 * alone: dev_step/dev_rank); their number. */
int64_t ppv_world_deviations(const ppv_world *w, const int64_t **steps, const int32_t **ranks);
/* With policy note_steps: each step's rank and what it did there (the
 * transport calls it made, in order), one note a step; their number. */
typedef struct ppv_step_note {
    int64_t step;
    int32_t rank;
    char did[200];
} ppv_step_note;
int64_t ppv_world_steps(const ppv_world *w, const ppv_step_note **notes);
int ppv_trace_write(FILE *f, const ppv_world *w);
/* A run whose policy noted its deviations, as a trace of them alone:
 * round-robin but at those steps ("at STEP RANK" lines), the smallest
 * thing a reader needs. */
int ppv_trace_write_deviations(FILE *f, const ppv_world *w);
/* A trace file's deviations (malloc'd, *n 0 when it has none); 0, or -1
 * with err (file and line). */
int ppv_trace_read_deviations(const char *path, int64_t **steps, int32_t **ranks, int64_t *n,
                              char *err, size_t errlen);
/* Whether a trace file goes on round-robin after its decisions (1), or
 * must end with them (0); -1 with err. */
int ppv_trace_read_then_rr(const char *path, char *err, size_t errlen);
/* Reads a trace file's decisions (malloc'd). A trace is run-length
 * encoded, so a few bytes can announce billions of decisions: one that
 * announces more than max_decisions is refused before anything is
 * allocated, and the decisions are allocated only once the runs add up. */
int ppv_trace_read(const char *path, int64_t max_decisions, int32_t **decisions, int64_t *n,
                   int32_t *nranks, char *err, size_t errlen);
/* The fault a trace file records (kind NONE when it has none); 0 or -1. */
int ppv_trace_read_fault(const char *path, ppv_fault *fault, char *err, size_t errlen);

/* What a failing run's trace records of its failure, after its decisions
 * (the explorer writes it): the digest the run was measured against (the
 * reference's output, or for a schedule its gradients) and the failure as
 * the explorer told it, so that a replay judges the run again and fails
 * the same way. */
typedef struct ppv_trace_verdict {
    int present;        /* the trace has one */
    uint64_t reference; /* `reference HEX` */
    char failure[1024]; /* `verdict TEXT` (one line) */
    /* `target TEXT` (may be empty): the explorer's target and its options
     * as `ppv fuzz` was given them, words apart, so that `ppv fuzz explain`
     * runs the trace again on its own */
    char target[1024];
} ppv_trace_verdict;

/* Appends v's lines to a trace being written (after ppv_trace_write). */
int ppv_trace_write_verdict(FILE *f, const ppv_trace_verdict *v);
/* The verdict a trace file records (present 0 when it has none); 0, or -1
 * with err (a malformed line: file and line). */
int ppv_trace_read_verdict(const char *path, ppv_trace_verdict *v, char *err, size_t errlen);

#endif
