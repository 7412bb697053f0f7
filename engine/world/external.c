/* external.c - ranks that are threads or processes of any language
 * (ppv_ext): a Python control plane's ranks, say, run as the ranks of a
 * mock world under its deterministic scheduler.
 *
 * Each rank's coroutine (ppv_ext_rank_main) and its thread take turns,
 * like two ends of a baton. The coroutine hands the turn to the thread and
 * waits; the thread runs its own code up to its next communication call,
 * leaves the call in the rank's slot and hands the turn back; the
 * coroutine makes the call on the mock transport, where it is a scheduling
 * point like any of ppv's own ranks' calls (other coroutines, and so other
 * threads, may run while it waits), and hands the turn back with the
 * result. So at any moment at most one thread runs outside a call, and
 * which one is the scheduler's decision alone: a run is as deterministic as
 * a run of ppv's own ranks, with every policy, explorer and fault.
 *
 * The turn is one word a rank, a futex: its bits say whose turn it is and
 * whether the thread has joined or ended, the coroutine gone or the
 * bridge closed. A change of the word wakes whoever waits on it, so no
 * wake-up is lost, and a process that dies holds no lock. A shared bridge
 * (ppv_ext_new_shared) lives in shared memory with a payload area a
 * rank, so its "threads" may be processes forked after it was made: the
 * thread side copies a call's data into its payload, the coroutine makes
 * the call on the payload, and the thread side copies the answer out.
 *
 * Every wait has a bound. The coroutine waits for its thread at most
 * idle_seconds of wall time (a thread that computes, sleeps or waits on
 * something else that long is a failure naming its rank and its last
 * call), and then no longer serves it: the thread's later calls return
 * PPV_ERR_ABORTED at once. A thread waits only for its coroutine, which
 * the world always resumes (a deadlock's unwinding fails its call with
 * PPV_ERR_ABORTED), or for ppv_ext_close.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <linux/futex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "world_internal.h"

typedef enum ext_op {
    EXT_SEND,
    EXT_RECV,
    EXT_BROADCAST,
    EXT_ALLREDUCE,
    EXT_ALLGATHER,
    EXT_PROBE,
    EXT_YIELD,
    EXT_GROUP_START,
    EXT_GROUP_END,
    EXT_WAIT_ANY,
    EXT_ISEND,
    EXT_IRECV,
    EXT_WAIT_OP,
    EXT_TEST_OP,
    EXT_NEW_GROUP,
    EXT_WAIT_SOME,
    EXT_END
} ext_op;

/* The turn word's bits. */
enum {
    T_THREAD = 1,  /* the thread runs; clear: the coroutine has its call */
    T_JOINED = 2,  /* the thread called ppv_ext_begin */
    T_GONE = 4,    /* the coroutine serves it no more: calls fail at once */
    T_ENDED = 8,   /* the thread called ppv_ext_end (or its process died) */
    T_CLOSED = 16  /* ppv_ext_close */
};

/* A receive posted by irecv whose data is not yet the caller's: on the
 * coroutine's side of a shared bridge, the buffer the world receives
 * into; on the thread's, where the caller wants the data. */
typedef struct posted {
    int64_t id;
    void *buf;
    size_t bytes;
} posted;

typedef struct posted_list {
    posted *v;
    int64_t n, cap;
} posted_list;

/* A shared bridge's side of a rank, in one process's memory: its posted
 * receives, and the sends and receives of its open group (ids 0 and 1),
 * whose data goes when the group ends. */
typedef struct ext_side {
    posted_list recvs, grouped;
    int in_group;
    size_t grouped_bytes; /* the group's receives, together */
} ext_side;

typedef struct ext_rank {
    uint32_t turn; /* the futex: T_* bits */
    ext_op op;
    const void *sbuf; /* the call's data, as the coroutine reads it (a */
    void *rbuf;       /* shared bridge's: in the payload) */
    size_t bytes;
    int32_t peer, comm;
    int64_t op_id; /* EXT_WAIT_OP, EXT_TEST_OP: which; EXT_WAIT_SOME: whether it blocks */
    double deadline; /* EXT_WAIT_SOME: its timeout's (-1: none) */
    int rc;
    int answer;        /* EXT_PROBE's "arrived", EXT_TEST_OP's "done" */
    int64_t answer_id; /* EXT_ISEND, EXT_IRECV: the posted op's number */
    size_t answer_bytes; /* a shared bridge: the bytes the answer left in the payload */
    int64_t calls;
    char what[64];   /* the call's place, in the deadlock report */
    char last[64];   /* the last call's place, for an idle thread's report */
    char error[512]; /* EXT_END: the thread's failure; "" when it returned */
    unsigned char *payload; /* a shared bridge: the rank's data travels here */
    /* a shared bridge's thread side: its own (process's) posted receives,
     * and the process that made the list (another process, reporting a
     * death, leaves it alone) */
    struct ext_side *own;
    pid_t own_pid;
} ext_rank;

struct ppv_ext {
    int32_t n;
    double idle_seconds;
    int shared;
    int futex_op_flags; /* FUTEX_PRIVATE_FLAG unless shared */
    size_t payload_bytes; /* a shared bridge: each rank's payload */
    size_t map_bytes;     /* a shared bridge: the whole mapping */
    ext_rank *r;
    /* the coroutine side's, in the memory of the process that made the
     * bridge: a shared bridge's posted and grouped operations, per rank */
    ext_side *side;
};

/* ---- posted receives -------------------------------------------------------- */

static int posted_add(posted_list *l, int64_t id, void *buf, size_t bytes) {
    if (l->n == l->cap) {
        int64_t cap = l->cap ? 2 * l->cap : 8;
        posted *grown = realloc(l->v, (size_t)cap * sizeof *grown);
        if (!grown) return -1;
        l->v = grown;
        l->cap = cap;
    }
    l->v[l->n++] = (posted){id, buf, bytes};
    return 0;
}

/* Takes op id out of l: 1 with *out, or 0 (not a posted receive). */
static int posted_take(posted_list *l, int64_t id, posted *out) {
    for (int64_t k = 0; l && k < l->n; k++)
        if (l->v[k].id == id) {
            *out = l->v[k];
            l->v[k] = l->v[--l->n];
            return 1;
        }
    return 0;
}

static void posted_clear(posted_list *l, int free_buffers) {
    for (int64_t k = 0; free_buffers && k < l->n; k++) free(l->v[k].buf);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static void side_clear(ext_side *d, int free_buffers) {
    posted_clear(&d->recvs, free_buffers);
    posted_clear(&d->grouped, free_buffers);
    memset(d, 0, sizeof *d);
}

/* ---- the turn word ---------------------------------------------------------- */

static uint32_t turn_of(const ext_rank *e) {
    return __atomic_load_n(&e->turn, __ATOMIC_ACQUIRE);
}

/* Sets and clears bits of e's word and wakes whoever waits on it. */
static void turn_change(const ppv_ext *x, ext_rank *e, uint32_t set, uint32_t clear) {
    uint32_t v = turn_of(e);
    while (!__atomic_compare_exchange_n(&e->turn, &v, (v | set) & ~clear, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE)) {
    }
    syscall(SYS_futex, &e->turn, FUTEX_WAKE | x->futex_op_flags, INT_MAX, NULL, NULL, 0);
}

static double now_seconds(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Waits until (word & mask) == want or the word has a bit of stop, at
 * most seconds (< 0: no bound); the word, or 0 with *timed_out. */
static uint32_t turn_wait(const ppv_ext *x, ext_rank *e, uint32_t mask, uint32_t want,
                          uint32_t stop, double seconds, int *timed_out) {
    double until = seconds >= 0 ? now_seconds() + seconds : 0;
    *timed_out = 0;
    for (;;) {
        uint32_t v = turn_of(e);
        if ((v & mask) == want || (v & stop)) return v;
        struct timespec left, *bound = NULL;
        if (seconds >= 0) {
            double rest = until - now_seconds();
            if (rest <= 0) {
                *timed_out = 1;
                return 0;
            }
            left.tv_sec = (time_t)rest;
            left.tv_nsec = (long)((rest - (double)left.tv_sec) * 1e9);
            bound = &left;
        }
        /* sleeps only while the word is still v: a change in between is seen */
        syscall(SYS_futex, &e->turn, FUTEX_WAIT | x->futex_op_flags, v, bound, NULL, 0);
    }
}

/* ---- making and freeing ----------------------------------------------------- */

static int check_new(int32_t nranks, double idle_seconds, char *err, size_t errlen) {
    if (nranks < 1 || !(idle_seconds > 0)) {
        ppv_errf(err, errlen, "external ranks: %d ranks and %g s idle bound: need at least 1 "
                 "and more than 0", (int)nranks, idle_seconds);
        return -1;
    }
    return 0;
}

ppv_ext *ppv_ext_new(int32_t nranks, double idle_seconds, char *err, size_t errlen) {
    if (check_new(nranks, idle_seconds, err, errlen) < 0) return NULL;
    ppv_ext *x = calloc(1, sizeof *x);
    ext_rank *r = calloc((size_t)nranks, sizeof *r);
    if (!x || !r) {
        free(x);
        free(r);
        ppv_errf(err, errlen, "out of memory");
        return NULL;
    }
    x->n = nranks;
    x->idle_seconds = idle_seconds;
    x->futex_op_flags = FUTEX_PRIVATE_FLAG;
    x->r = r;
    return x;
}

ppv_ext *ppv_ext_new_shared(int32_t nranks, double idle_seconds, size_t message_bytes,
                            char *err, size_t errlen) {
    if (check_new(nranks, idle_seconds, err, errlen) < 0) return NULL;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t head = sizeof(ppv_ext) + (size_t)nranks * sizeof(ext_rank);
    head = (head + page - 1) / page * page;
    size_t each = (message_bytes + page - 1) / page * page;
    if (!each || each > ((size_t)1 << 40) / (size_t)nranks) {
        ppv_errf(err, errlen, "external ranks: %zu bytes a message on %d ranks: need 1 to %zu",
                 message_bytes, (int)nranks, ((size_t)1 << 40) / (size_t)nranks);
        return NULL;
    }
    size_t total = head + (size_t)nranks * each;
    /* pages are taken only as messages touch them */
    void *m = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    ext_side *side = calloc((size_t)nranks, sizeof *side);
    if (m == MAP_FAILED || !side) {
        if (m != MAP_FAILED) munmap(m, total);
        free(side);
        ppv_errf(err, errlen, "external ranks: cannot map %zu bytes of shared memory", total);
        return NULL;
    }
    ppv_ext *x = m;
    x->n = nranks;
    x->idle_seconds = idle_seconds;
    x->shared = 1;
    x->payload_bytes = each;
    x->map_bytes = total;
    x->r = (ext_rank *)(x + 1);
    x->side = side;
    for (int32_t k = 0; k < nranks; k++)
        x->r[k].payload = (unsigned char *)m + head + (size_t)k * each;
    return x;
}

static void clear_sides(ppv_ext *x) {
    for (int32_t k = 0; x->side && k < x->n; k++) side_clear(&x->side[k], 1);
}

void ppv_ext_reset(ppv_ext *x) {
    if (!x) return;
    clear_sides(x);
    for (int32_t k = 0; k < x->n; k++) {
        unsigned char *payload = x->r[k].payload;
        memset(&x->r[k], 0, sizeof x->r[k]); /* a process's own list went with it */
        x->r[k].payload = payload;
    }
}

void ppv_ext_close(ppv_ext *x) {
    if (!x) return;
    for (int32_t k = 0; k < x->n; k++) turn_change(x, &x->r[k], T_CLOSED, 0);
}

void ppv_ext_free(ppv_ext *x) {
    if (!x) return;
    clear_sides(x);
    if (x->shared) {
        free(x->side);
        munmap(x, x->map_bytes);
        return;
    }
    free(x->r);
    free(x);
}

/* ---- the coroutine's side --------------------------------------------------- */

/* Hands the turn to rank's thread and takes its next call; -1 when the
 * thread overran the idle bound or the bridge was closed (the run has
 * failed then), else the call's op. */
static int take_call(ppv_ext *x, ppv_transport *t, int32_t rank, int first) {
    ext_rank *e = &x->r[rank];
    int late;
    if (first) {
        uint32_t v = turn_wait(x, e, T_JOINED, T_JOINED, T_CLOSED, x->idle_seconds, &late);
        if (late || (v & T_CLOSED)) {
            turn_change(x, e, T_GONE, 0);
            ppv_world_fail(t, rank, "its thread did not start within %g s", x->idle_seconds);
            return -1;
        }
    }
    if (turn_of(e) & T_ENDED) return EXT_END; /* ended before this call */
    turn_change(x, e, T_THREAD, 0);
    uint32_t v = turn_wait(x, e, T_THREAD, 0, T_CLOSED, x->idle_seconds, &late);
    if (late || (v & T_CLOSED)) {
        turn_change(x, e, T_GONE, 0);
        if (e->calls)
            ppv_world_fail(t, rank, "ran for more than %g s without a call to ppv after its "
                           "call %lld (%s)", x->idle_seconds, (long long)e->calls, e->last);
        else
            ppv_world_fail(t, rank, "ran for more than %g s without a call to ppv from its start",
                           x->idle_seconds);
        return -1;
    }
    return v & T_ENDED ? EXT_END : (int)e->op;
}

/* A shared bridge's gathered bytes (the members' parts) fit the payload
 * after the rank's own part; 0, or PPV_ERR_TOO_BIG. */
static int gather_fits(const ppv_ext *x, ppv_world *w, const ext_rank *e) {
    int32_t members = e->comm >= 0 && e->comm < w->ncomms ? w->comms[e->comm].n : 0;
    size_t own = (e->bytes + 63) / 64 * 64;
    if (members && e->bytes > (x->payload_bytes - own) / (size_t)members) return PPV_ERR_TOO_BIG;
    return 0;
}

/* A shared bridge: the posted receive id of rank, if done, into its
 * payload (the thread side takes it from there). */
static void hand_posted(ppv_ext *x, int32_t rank, ext_rank *e, int64_t id) {
    posted p;
    if (!x->shared || !posted_take(&x->side[rank].recvs, id, &p)) return;
    memcpy(e->payload, p.buf, p.bytes);
    e->answer_bytes = p.bytes;
    free(p.buf);
}

/* A shared bridge: a send or receive inside rank's open group, whose
 * data moves when the group ends: each gets a buffer of this process's. */
static int grouped_call(ppv_ext *x, ppv_transport *t, int32_t rank, ext_rank *e) {
    ext_side *d = &x->side[rank];
    int send = e->op == EXT_SEND;
    if (!send && e->bytes > x->payload_bytes - d->grouped_bytes) return PPV_ERR_TOO_BIG;
    void *buf = malloc(e->bytes ? e->bytes : 1);
    if (!buf || posted_add(&d->grouped, send ? 0 : 1, buf, e->bytes) < 0) {
        free(buf);
        ppv_world_fail_env(t, rank, "out of memory queueing %s", e->what);
        return PPV_ERR_ABORTED;
    }
    if (send) {
        memcpy(buf, e->sbuf, e->bytes);
        return t->ops->send(t->impl, rank, buf, e->bytes, e->peer, e->comm, e->what);
    }
    d->grouped_bytes += e->bytes;
    return t->ops->recv(t->impl, rank, buf, e->bytes, e->peer, e->comm, e->what);
}

/* A shared bridge, at the end of rank's group: the group's receives, in
 * their order, one after the other in the payload. The buffers stay
 * until the bridge is reset when the group failed (the world may still
 * point at them). */
static void group_done(ppv_ext *x, int32_t rank, ext_rank *e, int rc) {
    ext_side *d = &x->side[rank];
    d->in_group = 0;
    d->grouped_bytes = 0;
    if (rc != 0) return;
    size_t at = 0;
    for (int64_t k = 0; k < d->grouped.n; k++) {
        posted *g = &d->grouped.v[k];
        if (g->id == 1) {
            memcpy(e->payload + at, g->buf, g->bytes);
            at += g->bytes;
        }
        free(g->buf);
    }
    d->grouped.n = 0;
    e->answer_bytes = at;
}

/* The communicator of the ranks in e's data (e->bytes of int32_t, in
 * order) and tag e->op_id, made by the first rank to ask: its number in
 * answer_id. The world's ranks in order, tag 0, are communicator 0. */
static int new_group(ppv_world *w, ext_rank *e) {
    const int32_t *ranks = e->sbuf;
    int32_t n = (int32_t)(e->bytes / sizeof *ranks);
    for (int32_t c = 0; c < w->ncomms; c++) {
        const world_comm *wc = &w->comms[c];
        if (wc->n == n && wc->tag == e->op_id &&
            !memcmp(wc->ranks, ranks, (size_t)n * sizeof *ranks)) {
            e->answer_id = c;
            return 0;
        }
    }
    int32_t c = ppv_world_add_comm(w, ranks, n);
    if (c < 0) return PPV_ERR_USAGE;
    w->comms[c].tag = e->op_id;
    e->answer_id = c;
    return 0;
}

/* Makes rank's call on the transport (a scheduling point). */
static int make_call(ppv_ext *x, ppv_transport *t, int32_t rank, ext_rank *e) {
    const ppv_transport_ops *o = t->ops;
    switch (e->op) {
    case EXT_SEND:
    case EXT_RECV:
        if (x->shared && x->side[rank].in_group) return grouped_call(x, t, rank, e);
        return e->op == EXT_SEND
                   ? o->send(t->impl, rank, e->sbuf, e->bytes, e->peer, e->comm, e->what)
                   : o->recv(t->impl, rank, e->rbuf, e->bytes, e->peer, e->comm, e->what);
    case EXT_BROADCAST:
        return o->broadcast(t->impl, rank, e->rbuf, e->bytes, e->peer, e->comm, e->what);
    case EXT_ALLREDUCE:
        return o->allreduce_f32(t->impl, rank, e->rbuf, e->bytes / sizeof(float), e->comm,
                                e->what);
    case EXT_ALLGATHER: {
        int rc = x->shared ? gather_fits(x, t->impl, e) : 0;
        if (!rc) rc = o->allgather(t->impl, rank, e->sbuf, e->rbuf, e->bytes, e->comm, e->what);
        if (!rc && x->shared) /* the members' parts, for the thread side to copy */
            e->answer_bytes = (size_t)((ppv_world *)t->impl)->comms[e->comm].n * e->bytes;
        return rc;
    }
    case EXT_PROBE: return o->probe(t->impl, rank, e->peer, e->comm, &e->answer);
    case EXT_YIELD: o->yield(t->impl, rank); return 0;
    case EXT_GROUP_START: {
        int rc = o->group_start(t->impl, rank);
        if (rc == 0 && x->shared) x->side[rank].in_group = 1;
        return rc;
    }
    case EXT_GROUP_END: {
        int rc = o->group_end(t->impl, rank);
        if (x->shared) group_done(x, rank, e, rc);
        return rc;
    }
    case EXT_WAIT_ANY: /* ppv_world_run's transport is the mock's: impl is the world */
        return world_wait_any(t->impl, rank, e->comm, e->what);
    case EXT_ISEND:
        return world_post_async(t->impl, rank, 1, e->sbuf, NULL, e->bytes, e->peer, e->comm,
                                e->what, &e->answer_id);
    case EXT_IRECV: {
        if (!x->shared)
            return world_post_async(t->impl, rank, 0, NULL, e->rbuf, e->bytes, e->peer, e->comm,
                                    e->what, &e->answer_id);
        /* the data outlives the call: a buffer of this process's until it is waited for */
        void *buf = malloc(e->bytes ? e->bytes : 1);
        if (!buf) {
            ppv_world_fail_env(t, rank, "out of memory posting %s", e->what);
            return PPV_ERR_ABORTED;
        }
        int rc = world_post_async(t->impl, rank, 0, NULL, buf, e->bytes, e->peer, e->comm,
                                  e->what, &e->answer_id);
        if (rc == 0 && posted_add(&x->side[rank].recvs, e->answer_id, buf, e->bytes) < 0) {
            ppv_world_fail_env(t, rank, "out of memory posting %s", e->what);
            return PPV_ERR_ABORTED; /* the world has the buffer: it is lost, not freed */
        }
        if (rc != 0) free(buf);
        return rc;
    }
    case EXT_WAIT_OP: {
        int rc = world_wait_async(t->impl, rank, e->op_id, e->what);
        if (rc == 0) hand_posted(x, rank, e, e->op_id);
        return rc;
    }
    case EXT_TEST_OP: {
        int rc = world_test_async(t->impl, rank, e->op_id, &e->answer);
        if (rc == 0 && e->answer) hand_posted(x, rank, e, e->op_id);
        return rc;
    }
    case EXT_NEW_GROUP: return new_group(t->impl, e);
    case EXT_WAIT_SOME: { /* e's data: peer op ids, then the communicators */
        const int64_t *ids = e->sbuf;
        int32_t n = e->peer, which = -1;
        int32_t nany = (int32_t)((e->bytes - (size_t)n * sizeof *ids) / sizeof(int32_t));
        int32_t anys[64];
        if (nany > 64) return PPV_ERR_USAGE;
        memcpy(anys, ids + n, (size_t)nany * sizeof *anys);
        int rc = world_wait_some(t->impl, rank, ids, n, anys, nany, e->op_id != 0, e->deadline,
                                 e->what, &which);
        e->answer = which;
        if (rc == 0 && which >= 0 && which < n) hand_posted(x, rank, e, ids[which]);
        return rc;
    }
    case EXT_END: break;
    }
    return PPV_ERR_USAGE;
}

void ppv_ext_rank_main(ppv_transport *t, int32_t rank, void *arg) {
    ppv_ext *x = arg;
    if (rank < 0 || rank >= x->n) {
        ppv_world_fail(t, rank, "no thread: the bridge has %d ranks", (int)x->n);
        return;
    }
    ext_rank *e = &x->r[rank];
    for (int first = 1;; first = 0) {
        int op = take_call(x, t, rank, first);
        if (op < 0) break;
        if (op == EXT_END) {
            turn_change(x, e, T_GONE, 0);
            world_end_async(t->impl, rank); /* its pending receives are taken back */
            if (e->error[0]) ppv_world_fail(t, rank, "%s", e->error);
            break;
        }
        e->answer_bytes = 0;
        int rc = make_call(x, t, rank, e); /* other ranks run meanwhile */
        if (rc == 0 && e->op != EXT_YIELD && e->op != EXT_PROBE && e->op != EXT_WAIT_ANY &&
            e->op != EXT_TEST_OP && e->op != EXT_NEW_GROUP &&
            !(e->op == EXT_WAIT_SOME && (e->answer < 0 || e->answer >= e->peer)))
            ppv_world_progress(t, rank);
        e->rc = rc;
        if (rc == PPV_ERR_ABORTED) {
            /* the world stopped, or this rank died: nothing more can happen
             * on it, so its thread's later calls fail at once */
            turn_change(x, e, T_GONE, 0);
            break;
        }
    }
}

/* ---- the thread's side ------------------------------------------------------ */

static int check_rank(const ppv_ext *x, int32_t rank) {
    return x && rank >= 0 && rank < x->n;
}

int ppv_ext_begin(ppv_ext *x, int32_t rank) {
    if (!check_rank(x, rank)) return PPV_ERR_USAGE;
    ext_rank *e = &x->r[rank];
    turn_change(x, e, T_JOINED, 0);
    int late;
    uint32_t v = turn_wait(x, e, T_THREAD, T_THREAD, T_GONE | T_CLOSED, -1, &late);
    return v & (T_GONE | T_CLOSED) ? PPV_ERR_ABORTED : 0;
}

/* Thread rank's call op (its arguments in e's fields, set by the
 * caller), made by its coroutine: its result, with the answer's values in
 * e. A shared bridge's call takes sbytes from sbuf into the payload. */
static int call(ppv_ext *x, ext_rank *e, ext_op op, const void *sbuf, size_t sbytes,
                const char *what) {
    if (turn_of(e) & (T_GONE | T_CLOSED)) return PPV_ERR_ABORTED;
    e->op = op;
    snprintf(e->what, sizeof e->what, "%s", what ? what : "");
    e->answer = 0;
    e->answer_id = 0;
    if (x->shared) {
        if (sbytes > x->payload_bytes || e->bytes > x->payload_bytes) return PPV_ERR_TOO_BIG;
        if (sbytes) memcpy(e->payload, sbuf, sbytes);
        e->sbuf = e->payload;
        /* an all-gather's parts go after the rank's own */
        e->rbuf = op == EXT_ALLGATHER ? e->payload + (sbytes + 63) / 64 * 64 : e->payload;
    }
    e->calls++;
    snprintf(e->last, sizeof e->last, "%s", e->what);
    turn_change(x, e, 0, T_THREAD);
    int late;
    uint32_t v = turn_wait(x, e, T_THREAD, T_THREAD, T_GONE | T_CLOSED, -1, &late);
    return v & T_THREAD ? e->rc : PPV_ERR_ABORTED;
}

/* e with a call's arguments (those it does not take are NULL, 0 or -1). */
static ext_rank *args(ppv_ext *x, int32_t rank, const void *sbuf, void *rbuf, size_t bytes,
                      int32_t peer, int32_t comm) {
    ext_rank *e = &x->r[rank];
    e->sbuf = sbuf;
    e->rbuf = rbuf;
    e->bytes = bytes;
    e->peer = peer;
    e->comm = comm;
    return e;
}

/* A shared bridge's answer, bytes of the payload, into the caller's buf. */
static int copy_out(const ppv_ext *x, const ext_rank *e, int rc, void *buf, size_t bytes) {
    if (rc == 0 && x->shared && bytes) memcpy(buf, e->payload, bytes);
    return rc;
}

int ppv_ext_send(ppv_ext *x, int32_t rank, const void *buf, size_t bytes, int32_t peer,
                 int32_t comm, const char *what) {
    if (!check_rank(x, rank)) return PPV_ERR_USAGE;
    return call(x, args(x, rank, buf, NULL, bytes, peer, comm), EXT_SEND, buf, bytes, what);
}

/* A shared bridge's thread side: the process's own side of the rank
 * (made by its first use), or NULL when out of memory. */
static ext_side *own_side(ext_rank *e) {
    if (e->own && e->own_pid == getpid()) return e->own;
    e->own = calloc(1, sizeof *e->own);
    e->own_pid = getpid();
    return e->own;
}

int ppv_ext_recv(ppv_ext *x, int32_t rank, void *buf, size_t bytes, int32_t peer, int32_t comm,
                 const char *what) {
    if (!check_rank(x, rank)) return PPV_ERR_USAGE;
    ext_rank *e = args(x, rank, NULL, buf, bytes, peer, comm);
    ext_side *own = x->shared ? own_side(e) : NULL;
    if (x->shared && !own) return PPV_ERR_ABORTED;
    int rc = call(x, e, EXT_RECV, NULL, 0, what);
    if (rc == 0 && own && own->in_group) /* its data comes when the group ends */
        return posted_add(&own->grouped, 1, buf, bytes) < 0 ? PPV_ERR_ABORTED : 0;
    return copy_out(x, e, rc, buf, bytes);
}

int ppv_ext_broadcast(ppv_ext *x, int32_t rank, void *buf, size_t bytes, int32_t root,
                      int32_t comm, const char *what) {
    if (!check_rank(x, rank)) return PPV_ERR_USAGE;
    ext_rank *e = args(x, rank, NULL, buf, bytes, root, comm);
    return copy_out(x, e, call(x, e, EXT_BROADCAST, buf, bytes, what), buf, bytes);
}

int ppv_ext_allreduce_f32(ppv_ext *x, int32_t rank, float *buf, size_t count, int32_t comm,
                          const char *what) {
    if (!check_rank(x, rank)) return PPV_ERR_USAGE;
    size_t bytes = count * sizeof(float);
    ext_rank *e = args(x, rank, NULL, buf, bytes, -1, comm);
    return copy_out(x, e, call(x, e, EXT_ALLREDUCE, buf, bytes, what), buf, bytes);
}

int ppv_ext_allgather(ppv_ext *x, int32_t rank, const void *send, void *recv, size_t bytes,
                      int32_t comm, const char *what) {
    if (!check_rank(x, rank)) return PPV_ERR_USAGE;
    ext_rank *e = args(x, rank, send, recv, bytes, -1, comm);
    int rc = call(x, e, EXT_ALLGATHER, send, bytes, what);
    if (rc == 0 && x->shared) memcpy(recv, e->rbuf, e->answer_bytes); /* every member's part */
    return rc;
}

int ppv_ext_barrier(ppv_ext *x, int32_t rank, int32_t comm, const char *what) {
    float one = 1.0f;
    return ppv_ext_allreduce_f32(x, rank, &one, 1, comm, what);
}

int ppv_ext_probe(ppv_ext *x, int32_t rank, int32_t peer, int32_t comm, int *arrived,
                  const char *what) {
    *arrived = 0;
    if (!check_rank(x, rank)) return PPV_ERR_USAGE;
    ext_rank *e = args(x, rank, NULL, NULL, 0, peer, comm);
    int rc = call(x, e, EXT_PROBE, NULL, 0, what);
    *arrived = rc == 0 && e->answer;
    return rc;
}

/* A call of no data. */
static int plain(ppv_ext *x, int32_t rank, ext_op op, int32_t comm, const char *what) {
    if (!check_rank(x, rank)) return PPV_ERR_USAGE;
    return call(x, args(x, rank, NULL, NULL, 0, -1, comm), op, NULL, 0, what);
}

int ppv_ext_yield(ppv_ext *x, int32_t rank, const char *what) {
    return plain(x, rank, EXT_YIELD, 0, what);
}

int ppv_ext_wait_any(ppv_ext *x, int32_t rank, int32_t comm, const char *what) {
    return plain(x, rank, EXT_WAIT_ANY, comm, what);
}

int ppv_ext_group_start(ppv_ext *x, int32_t rank, const char *what) {
    if (!check_rank(x, rank)) return PPV_ERR_USAGE;
    ext_side *own = x->shared ? own_side(&x->r[rank]) : NULL;
    if (x->shared && !own) return PPV_ERR_ABORTED;
    int rc = plain(x, rank, EXT_GROUP_START, 0, what);
    if (rc == 0 && own) own->in_group = 1;
    return rc;
}

int ppv_ext_group_end(ppv_ext *x, int32_t rank, const char *what) {
    if (!check_rank(x, rank)) return PPV_ERR_USAGE;
    int rc = plain(x, rank, EXT_GROUP_END, 0, what);
    ext_rank *e = &x->r[rank];
    ext_side *own = x->shared && e->own && e->own_pid == getpid() ? e->own : NULL;
    if (!own) return rc;
    size_t at = 0; /* the group's receives, one after the other in the payload */
    for (int64_t k = 0; rc == 0 && k < own->grouped.n; k++) {
        memcpy(own->grouped.v[k].buf, e->payload + at, own->grouped.v[k].bytes);
        at += own->grouped.v[k].bytes;
    }
    own->grouped.n = 0;
    own->in_group = 0;
    return rc;
}

int ppv_ext_new_group(ppv_ext *x, int32_t rank, const int32_t *ranks, int32_t n, int64_t tag,
                      int32_t *comm, const char *what) {
    *comm = -1;
    if (!check_rank(x, rank) || n < 1) return PPV_ERR_USAGE;
    size_t bytes = (size_t)n * sizeof *ranks;
    ext_rank *e = args(x, rank, ranks, NULL, bytes, -1, 0);
    e->op_id = tag;
    int rc = call(x, e, EXT_NEW_GROUP, ranks, bytes, what);
    if (rc == 0) *comm = (int32_t)e->answer_id;
    return rc;
}

int ppv_ext_isend(ppv_ext *x, int32_t rank, const void *buf, size_t bytes, int32_t peer,
                  int32_t comm, const char *what, int64_t *id) {
    *id = 0;
    if (!check_rank(x, rank)) return PPV_ERR_USAGE;
    ext_rank *e = args(x, rank, buf, NULL, bytes, peer, comm);
    int rc = call(x, e, EXT_ISEND, buf, bytes, what);
    if (rc == 0) *id = e->answer_id;
    return rc;
}


int ppv_ext_irecv(ppv_ext *x, int32_t rank, void *buf, size_t bytes, int32_t peer, int32_t comm,
                  const char *what, int64_t *id) {
    *id = 0;
    if (!check_rank(x, rank)) return PPV_ERR_USAGE;
    ext_rank *e = args(x, rank, NULL, buf, bytes, peer, comm);
    ext_side *own = x->shared ? own_side(e) : NULL;
    if (x->shared && !own) return PPV_ERR_ABORTED;
    int rc = call(x, e, EXT_IRECV, NULL, 0, what);
    if (rc != 0) return rc;
    if (own && posted_add(&own->recvs, e->answer_id, buf, bytes) < 0) return PPV_ERR_ABORTED;
    *id = e->answer_id;
    return 0;
}

/* A shared bridge: a posted receive the coroutine has handed over (its
 * data in the payload) into the caller's buffer. */
static void take_posted(ppv_ext *x, ext_rank *e, int64_t id) {
    posted p;
    if (x->shared && e->own && e->own_pid == getpid() && posted_take(&e->own->recvs, id, &p))
        memcpy(p.buf, e->payload, p.bytes);
}

int ppv_ext_wait_op(ppv_ext *x, int32_t rank, int64_t id, const char *what) {
    if (!check_rank(x, rank)) return PPV_ERR_USAGE;
    ext_rank *e = args(x, rank, NULL, NULL, 0, -1, 0);
    e->op_id = id;
    int rc = call(x, e, EXT_WAIT_OP, NULL, 0, what);
    if (rc == 0) take_posted(x, e, id);
    return rc;
}

int ppv_ext_wait_some(ppv_ext *x, int32_t rank, const int64_t *ids, int32_t n,
                      const int32_t *anys, int32_t nany, int block, double deadline,
                      int32_t *which, const char *what) {
    *which = -1;
    if (!check_rank(x, rank) || n < 0 || n > 4096 || nany < 0 || nany > 64)
        return PPV_ERR_USAGE;
    /* one block: the ids, then the communicators */
    size_t bytes = (size_t)n * sizeof *ids + (size_t)nany * sizeof *anys;
    int64_t *both = malloc(bytes ? bytes : 1);
    if (!both) return PPV_ERR_ABORTED;
    if (n) memcpy(both, ids, (size_t)n * sizeof *ids);
    if (nany) memcpy(both + n, anys, (size_t)nany * sizeof *anys);
    ext_rank *e = args(x, rank, both, NULL, bytes, n, 0);
    e->op_id = block;
    e->deadline = deadline;
    int rc = call(x, e, EXT_WAIT_SOME, both, bytes, what);
    free(both);
    if (rc != 0) return rc;
    *which = e->answer;
    if (*which >= 0 && *which < n) take_posted(x, e, ids[*which]);
    return 0;
}

int ppv_ext_test_op(ppv_ext *x, int32_t rank, int64_t id, int *done, const char *what) {
    *done = 0;
    if (!check_rank(x, rank)) return PPV_ERR_USAGE;
    ext_rank *e = args(x, rank, NULL, NULL, 0, -1, 0);
    e->op_id = id;
    int rc = call(x, e, EXT_TEST_OP, NULL, 0, what);
    if (rc == 0 && e->answer) {
        *done = 1;
        take_posted(x, e, id);
    }
    return rc;
}

void ppv_ext_end(ppv_ext *x, int32_t rank, const char *error) {
    if (!check_rank(x, rank)) return;
    ext_rank *e = &x->r[rank];
    if (turn_of(e) & T_ENDED) return; /* once: a process's death after its end is no news */
    if (e->own && e->own_pid == getpid()) {
        side_clear(e->own, 0);
        free(e->own);
        e->own = NULL;
    }
    snprintf(e->error, sizeof e->error, "%s", error ? error : "");
    turn_change(x, e, T_ENDED | T_JOINED, T_THREAD);
}

int ppv_ext_ended(const ppv_ext *x, int32_t rank) {
    return check_rank(x, rank) && (turn_of(&x->r[rank]) & T_ENDED) != 0;
}

size_t ppv_ext_message_bytes(const ppv_ext *x) {
    return x && x->shared ? x->payload_bytes : 0;
}
