/* world_internal.h - the mock world's state, shared by the scheduler
 * (world.c) and the mock transport (mock.c), which builds on it; private
 * to the world room. */
#ifndef PPV_WORLD_INTERNAL_H
#define PPV_WORLD_INTERNAL_H

#include <ucontext.h>

#include "../engine_internal.h"
#include "ppv_world.h"

enum { RANK_READY, RANK_BLOCKED, RANK_DONE };

/* A posted point-to-point operation. */
typedef struct p2p_op {
    int send;          /* 1 send, 0 receive */
    int32_t rank, peer, comm;
    const void *sbuf;  /* send: the caller's buffer (rendezvous) */
    void *rbuf;        /* receive: where the data lands */
    void *owned;       /* eager send: the copy held by the channel, in the op's own
                        * block (right behind it) */
    size_t bytes;
    size_t cap; /* eager copy: the bytes its block holds behind the op */
    int done;
    int64_t step;      /* the scheduler step that posted it (an explorer's order) */
    int held;          /* PPV_FAULT_DELAY: not visible to its receiver yet */
    int async;         /* world_post_async's: the rank goes on; it waits only if it asks */
    int waited;        /* an async op its rank waits for now (its completion wakes it) */
    char what[64];
    struct p2p_op *next; /* in the channel queue, or the group list */
} p2p_op;

/* FIFO queues of one (sender, receiver, communicator). */
typedef struct channel {
    p2p_op *sends, *sends_tail; /* posted, not yet received (eager ones are done) */
    p2p_op *recvs, *recvs_tail; /* posted, not yet matched */
    int64_t nsends, nrecvs;     /* posted so far (an explorer's sequence numbers) */
} channel;

enum { COLL_ALLREDUCE, COLL_BCAST, COLL_ALLGATHER };

/* The k-th collective of a communicator, as its members arrive. */
typedef struct coll_slot {
    int kind;
    int32_t root;
    size_t bytes;
    int32_t arrived;
    int32_t first;     /* the member that arrived first: the call the others must match */
    void **bufs;       /* [n] member buffers (in/out) */
    const void **src;  /* [n] allgather send buffers */
    int64_t *arrive;   /* [n] the step each member arrived in */
    int done;
    int32_t departed; /* members that left it: the last one recycles it */
    char what[64];
    struct coll_slot *next_spare;
} coll_slot;

typedef struct world_comm {
    int32_t n;
    int64_t tag; /* ppv_ext_new_group: the point-to-point tag it carries (0: none) */
    int32_t *ranks;     /* [n] global ranks */
    int32_t *member_of; /* [nranks] index in the comm, -1 */
    int64_t *seq;       /* [n] collectives issued per member */
    coll_slot **slots;  /* by sequence number; each one block with its arrays */
    int64_t nslots, capslots;
    coll_slot *spare_slots; /* finished slots, reused by the next collectives */
} world_comm;

/* PPV_FAST_SWITCH: on x86-64 (outside AddressSanitizer, which tracks
 * stacks through swapcontext) ranks switch with a few instructions and no
 * system call; swapcontext saves and restores the signal mask with one
 * each way, which dominated the scheduler's cost. */
#if defined(__x86_64__) && defined(__linux__) && !defined(__SANITIZE_ADDRESS__)
#if defined(__has_feature)
#if !__has_feature(address_sanitizer)
#define PPV_FAST_SWITCH 1
#endif
#else
#define PPV_FAST_SWITCH 1
#endif
#endif

typedef struct rank_ctx {
    ucontext_t ctx;
    void *sp;                /* PPV_FAST_SWITCH: the saved stack pointer */
    struct ppv_world *world; /* for the rank's entry */
    int32_t rank;
    int dead; /* PPV_FAULT_KILL: every call fails from now on */
    int started; /* it has a stack and a context (start_rank succeeded) */
    void *stack;
    unsigned stack_id; /* valgrind stack registration */
    int state;
    int in_group;
    p2p_op *group, *group_tail; /* ops queued in the open group */
    int32_t pending;    /* ops this rank waits on */
    /* world_wait_any: it waits for a message from any member of any_comm */
    int any_wait;
    int32_t any_comm;
    char any_what[64];
    /* world_wait_some: the first of its ops (or any_wait's message) to
     * complete wakes it, the others complete as not waited for */
    int some, some_fired;
    p2p_op **some_ops; /* the ops it waits on, for the report */
    int32_t nsome;
    const int32_t *some_any; /* ... and the communicators a message on which wakes it */
    int32_t nsome_any, some_any_hit; /* (the one that did) */
    /* ... and a timeout: when no rank can go on, the earliest deadline
     * (seconds of its threads' clock) ends its wait (timed_out) */
    int timed, timed_out;
    double deadline;
    p2p_op *waiting;    /* first op it waits on (report) */
    coll_slot *waiting_coll;
    int32_t waiting_comm;
    /* PPV_POLICY_EXPLORE: steps the rank's next step follows (the send
     * its receive took, the step that completed what it waited on, ...);
     * they bind its next step, since a step touches channels only as it
     * starts */
    int64_t *defer;
    int32_t ndefer, capdefer;
    /* world_post_async's ops, by number - 1: NULL once waited for (or
     * cancelled); a done one is the list's, a pending one its channel's */
    p2p_op **async;
    int64_t nasync, capasync;
} rank_ctx;

struct ppv_world {
    ppv_world_options opt;
    int32_t P;
    rank_ctx *ranks;
    ucontext_t sched_ctx;
    void *sched_sp; /* PPV_FAST_SWITCH: the scheduler's saved stack pointer */
    int64_t nsends;  /* point-to-point sends so far (a fault's point) */
    p2p_op *orphans; /* ops a mismatch left in no queue: freed with the world */
    p2p_op *spare_ops;  /* finished ops, reused by the next calls */
    p2p_op *spare_msgs; /* received eager copies, reused by the next eager sends */
    int fault_applied;
    int held;             /* PPV_FAULT_DELAY: a message is held back */
    int64_t release_at;   /* the step it arrives at */
    /* the transport's: the held message becomes visible and is matched;
     * 0, or -1 when out of memory */
    int (*release)(ppv_world *w);
    int eager_link;       /* PPV_FAULT_EAGER: this link buffers ... */
    int32_t link_comm, link_from, link_to;
    size_t link_bytes;    /* ... messages up to this size */
    ppv_transport transport;
    channel *chans;     /* [ncomms][P][P], grown by add_comm */
    world_comm *comms;
    int32_t ncomms;
    int aborted;
    int failed;
    int env_error; /* the failure was the environment's (ppv_world_fail_env) */
    int32_t failed_rank;
    char fail_msg[512];
    int has_mismatch; /* mismatch holds the collective that failed the run */
    ppv_coll_mismatch mismatch;
    int64_t steps, last_progress;
    int32_t *decisions;
    int64_t ndecisions, capdecisions;
    int32_t last; /* last rank chosen */
    int64_t dev_at;     /* REPLAY with deviations: the next one not yet passed */
    int64_t *dev_steps; /* note_deviations: where the run left round-robin */
    int32_t *dev_ranks;
    int64_t ndevs, capdevs;
    ppv_step_note *notes; /* policy note_steps: what each step did */
    int64_t nnotes, capnotes;
    int64_t *pct_prio;   /* [P] */
    int64_t *pct_change; /* [depth-1] steps at which the running rank is demoted */
    int32_t pct_fired;   /* change points that fired */
    ppv_rank_main fn;
    void *arg;
    int32_t current;
    ppv_world_result *res; /* the running run's result */
    /* a decision a rank took at its scheduling point (next_rank) and
     * handed to the scheduler: decide's return and rank */
    int decided, decided_rc;
    int32_t decided_rank;
    /* PPV_POLICY_EXPLORE: what the running step touched and followed */
    int explore;
    ppv_touch *touch;
    int64_t *after;
    int32_t ntouch, captouch, nafter, capafter;
};

/* Channel of (from -> to) on comm c. */
static inline channel *world_channel(ppv_world *w, int32_t c, int32_t from, int32_t to) {
    return &w->chans[((size_t)c * w->P + (size_t)from) * w->P + (size_t)to];
}

/* The step now running (an op's order, for an explorer). */
static inline int64_t world_step(const ppv_world *w) {
    return w->steps - 1;
}

/* For an explorer: the running step touches channel (comm, from -> to)
 * (PPV_TOUCH_SEND of its seq-th message, or PPV_TOUCH_PROBE for it); what
 * rank does next follows step. */
void world_touch(ppv_world *w, int32_t kind, int32_t comm, int32_t from, int32_t to,
                 int64_t seq);
void world_after(ppv_world *w, int32_t rank, int64_t step);
/* With policy note_steps: adds to what the running step did (a transport
 * call, in words); nothing otherwise (the macro asks first, so a run that
 * does not note pays no call). */
void world_note_step(ppv_world *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define world_note(w, ...)                                                                         \
    do {                                                                                           \
        if ((w)->opt.policy.note_steps) world_note_step((w), __VA_ARGS__);                         \
    } while (0)

/* A scheduling point: back to the scheduler, as runnable. */
void ppv_world_switch(ppv_world *w, int32_t rank);

/* Blocks the rank until its pending count reaches zero (or an abort);
 * returns 0 or PPV_ERR_ABORTED. */
int ppv_world_wait(ppv_world *w, int32_t rank);

/* An op of rank completed: progress, and wake the rank when it waits on
 * nothing more. */
void ppv_world_complete(ppv_world *w, int32_t rank);

/* The run fails with msg (the first failure is the run's); the world is
 * aborted. The mock transport's fail. */
void ppv_world_abort_with(ppv_world *w, int32_t rank, int env, const char *msg);

/* Blocks rank until a message from another member of comm is there to
 * receive (at once when one is): the wait of a receive from any rank,
 * whose caller then probes its peers. A scheduling point that touches
 * every such channel as a probe does. 0, PPV_ERR_ABORTED, or
 * PPV_ERR_USAGE after failing the run. The mock transport's (mock.c). */
int world_wait_any(ppv_world *w, int32_t rank, int32_t comm, const char *what);

/* torch.distributed's isend and irecv (the Python ranks, external.c): a
 * point-to-point op posted at once that its rank does not wait for. It
 * completes when matched: a send when received (at once when the send
 * semantics make it eager), a receive when its message is there. A send's
 * data is copied when posted. Its number (1, 2, ... per rank) in *id. */
int world_post_async(ppv_world *w, int32_t rank, int send, const void *sbuf, void *rbuf,
                     size_t bytes, int32_t peer, int32_t comm, const char *what, int64_t *id);
/* Waits until rank's async op id completes (a scheduling point). */
int world_wait_async(ppv_world *w, int32_t rank, int64_t id, const char *what);
/* Whether rank's async op id has completed, in *done (a scheduling point). */
int world_test_async(ppv_world *w, int32_t rank, int64_t id, int *done);
/* Waits until the first of rank's async ops ids[0..n) completes, or
 * until a message from any other member of one of the communicators
 * anys[0..nany) is there to receive: *which is the index of the first op
 * done (in the list's order), n + j for a message on anys[j] (the first
 * such), or -1 when block is 0 and nothing is ready yet. With deadline >= 0 the wait has a timeout, which ends it
 * (*which -1) only when no rank of the world can go on (time passes only
 * then), the earliest deadline of all first. A scheduling point. The op found done is taken, as
 * world_wait_async takes it (a later wait for it returns at once). A
 * rank whose threads each wait on their own call (ppv.dist with threads)
 * waits this way for whichever comes first. */
int world_wait_some(ppv_world *w, int32_t rank, const int64_t *ids, int32_t n,
                    const int32_t *anys, int32_t nany, int block, double deadline,
                    const char *what, int32_t *which);
/* Rank's function ended: its receives still pending are taken back (their
 * buffers go with it); its sends stay, to be received. */
void world_end_async(ppv_world *w, int32_t rank);

/* A world with no transport yet (world.c): the scheduler's state and the
 * communicator of every rank. ppv_world_new (mock.c) gives it the mock
 * transport. NULL with the reason. */
ppv_world *ppv_world_make(const ppv_world_options *opt, char *err, size_t errlen);

/* A communicator by its ranks, for reports: "the world", or "the group
 * [1,2]" (comm must exist). */
void world_comm_name(const ppv_world *w, int32_t comm, char *buf, size_t n);

#endif
