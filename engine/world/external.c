/* external.c - ranks that are threads of any language (ppv_ext): a Python
 * control plane's ranks, say, each an OS thread, run as the ranks of a
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
 * Every wait has a bound. The coroutine waits for its thread at most
 * idle_seconds of wall time (a thread that computes, sleeps or waits on
 * something else that long is a failure naming its rank and its last
 * call), and then no longer serves it: the thread's later calls return
 * PPV_ERR_ABORTED at once. A thread waits only for its coroutine, which
 * the world always resumes (a deadlock's unwinding fails its call with
 * PPV_ERR_ABORTED), or for ppv_ext_close.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
    EXT_END
} ext_op;

typedef struct ext_rank {
    pthread_cond_t cv; /* the rank's two sides wait on it: a hand-over wakes one thread */
    int thread_turn; /* 1: the thread runs; 0: the coroutine has its call */
    int joined;      /* the thread called ppv_ext_begin */
    int gone;        /* the coroutine serves it no more: calls fail at once */
    int ended;       /* the thread called ppv_ext_end */
    ext_op op;
    const void *sbuf;
    void *rbuf;
    size_t bytes;
    int32_t peer, comm;
    int *arrived;  /* EXT_PROBE's answer, EXT_TEST_OP's "done" */
    int64_t *opid; /* EXT_ISEND, EXT_IRECV: the posted op's number */
    int64_t op_id; /* EXT_WAIT_OP, EXT_TEST_OP: which */
    int rc;
    int64_t calls;
    char what[64];  /* the call's place, in the deadlock report */
    char last[64];  /* the last call's place, for an idle thread's report */
    char error[512]; /* EXT_END: the thread's failure; "" when it returned */
} ext_rank;

struct ppv_ext {
    pthread_mutex_t mu;
    int32_t n;
    double idle_seconds;
    int closed;
    ext_rank *r;
};

ppv_ext *ppv_ext_new(int32_t nranks, double idle_seconds, char *err, size_t errlen) {
    if (nranks < 1 || !(idle_seconds > 0)) {
        ppv_errf(err, errlen, "external ranks: %d ranks and %g s idle bound: need at least 1 "
                 "and more than 0", (int)nranks, idle_seconds);
        return NULL;
    }
    ppv_ext *x = calloc(1, sizeof *x);
    ext_rank *r = calloc((size_t)nranks, sizeof *r);
    pthread_condattr_t ca;
    if (!x || !r || pthread_condattr_init(&ca) != 0) {
        free(x);
        free(r);
        ppv_errf(err, errlen, "out of memory");
        return NULL;
    }
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    int ok = pthread_mutex_init(&x->mu, NULL) == 0;
    int32_t made = 0;
    while (ok && made < nranks && pthread_cond_init(&r[made].cv, &ca) == 0) made++;
    if (!ok || made < nranks) {
        while (made > 0) pthread_cond_destroy(&r[--made].cv);
        if (ok) pthread_mutex_destroy(&x->mu);
        pthread_condattr_destroy(&ca);
        free(x);
        free(r);
        ppv_errf(err, errlen, "external ranks: cannot make a lock");
        return NULL;
    }
    pthread_condattr_destroy(&ca);
    x->n = nranks;
    x->idle_seconds = idle_seconds;
    x->r = r;
    return x;
}

void ppv_ext_close(ppv_ext *x) {
    if (!x) return;
    pthread_mutex_lock(&x->mu);
    x->closed = 1;
    for (int32_t k = 0; k < x->n; k++) pthread_cond_broadcast(&x->r[k].cv);
    pthread_mutex_unlock(&x->mu);
}

void ppv_ext_free(ppv_ext *x) {
    if (!x) return;
    pthread_mutex_destroy(&x->mu);
    for (int32_t k = 0; k < x->n; k++) pthread_cond_destroy(&x->r[k].cv);
    free(x->r);
    free(x);
}

/* Waits on e's condition until *flag == want, at most seconds (< 0: no
 * bound but x->closed); 0, or ETIMEDOUT. Called with x->mu held. */
static int wait_for(ppv_ext *x, ext_rank *e, const int *flag, int want, const int *gone,
                    double seconds) {
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    if (seconds >= 0) {
        double whole = (double)(int64_t)seconds;
        until.tv_sec += (time_t)whole;
        until.tv_nsec += (long)((seconds - whole) * 1e9);
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
    }
    while (*flag != want && !x->closed && !(gone && *gone)) {
        int rc = seconds >= 0 ? pthread_cond_timedwait(&e->cv, &x->mu, &until)
                              : pthread_cond_wait(&e->cv, &x->mu);
        if (rc == ETIMEDOUT && *flag != want) return ETIMEDOUT;
    }
    return 0;
}

/* ---- the coroutine's side --------------------------------------------------- */

/* Hands the turn to rank's thread and takes its next call; -1 when the
 * thread overran the idle bound or the bridge was closed (the run has
 * failed then), else the call's op. With x->mu held. */
static int take_call(ppv_ext *x, ppv_transport *t, int32_t rank, int first) {
    ext_rank *e = &x->r[rank];
    if (first) {
        if (wait_for(x, e, &e->joined, 1, NULL, x->idle_seconds) != 0 || x->closed) {
            e->gone = 1;
            pthread_mutex_unlock(&x->mu);
            ppv_world_fail(t, rank, "its thread did not start within %g s", x->idle_seconds);
            pthread_mutex_lock(&x->mu);
            return -1;
        }
    }
    if (e->ended) return EXT_END; /* ended before its first call */
    e->thread_turn = 1;
    pthread_cond_broadcast(&e->cv);
    if (wait_for(x, e, &e->thread_turn, 0, NULL, x->idle_seconds) != 0 || x->closed) {
        e->gone = 1;
        char last[sizeof e->last];
        snprintf(last, sizeof last, "%s", e->last);
        int64_t calls = e->calls;
        pthread_mutex_unlock(&x->mu);
        if (calls)
            ppv_world_fail(t, rank, "ran for more than %g s without a call to ppv after its "
                           "call %lld (%s)", x->idle_seconds, (long long)calls, last);
        else
            ppv_world_fail(t, rank, "ran for more than %g s without a call to ppv from its start",
                           x->idle_seconds);
        pthread_mutex_lock(&x->mu);
        return -1;
    }
    return (int)e->op;
}

/* Makes rank's call on the transport (a scheduling point). */
static int make_call(ppv_transport *t, int32_t rank, ext_rank *e) {
    const ppv_transport_ops *o = t->ops;
    switch (e->op) {
    case EXT_SEND: return o->send(t->impl, rank, e->sbuf, e->bytes, e->peer, e->comm, e->what);
    case EXT_RECV: return o->recv(t->impl, rank, e->rbuf, e->bytes, e->peer, e->comm, e->what);
    case EXT_BROADCAST:
        return o->broadcast(t->impl, rank, e->rbuf, e->bytes, e->peer, e->comm, e->what);
    case EXT_ALLREDUCE:
        return o->allreduce_f32(t->impl, rank, e->rbuf, e->bytes / sizeof(float), e->comm,
                                e->what);
    case EXT_ALLGATHER:
        return o->allgather(t->impl, rank, e->sbuf, e->rbuf, e->bytes, e->comm, e->what);
    case EXT_PROBE: return o->probe(t->impl, rank, e->peer, e->comm, e->arrived);
    case EXT_YIELD: o->yield(t->impl, rank); return 0;
    case EXT_GROUP_START: return o->group_start(t->impl, rank);
    case EXT_GROUP_END: return o->group_end(t->impl, rank);
    case EXT_WAIT_ANY: /* ppv_world_run's transport is the mock's: impl is the world */
        return world_wait_any(t->impl, rank, e->comm, e->what);
    case EXT_ISEND:
        return world_post_async(t->impl, rank, 1, e->sbuf, NULL, e->bytes, e->peer, e->comm,
                                e->what, e->opid);
    case EXT_IRECV:
        return world_post_async(t->impl, rank, 0, NULL, e->rbuf, e->bytes, e->peer, e->comm,
                                e->what, e->opid);
    case EXT_WAIT_OP: return world_wait_async(t->impl, rank, e->op_id, e->what);
    case EXT_TEST_OP: return world_test_async(t->impl, rank, e->op_id, e->arrived);
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
    pthread_mutex_lock(&x->mu);
    for (int first = 1;; first = 0) {
        int op = take_call(x, t, rank, first);
        if (op < 0) break;
        if (op == EXT_END) {
            e->gone = 1;
            world_end_async(t->impl, rank); /* its pending receives are taken back */
            char error[sizeof e->error];
            snprintf(error, sizeof error, "%s", e->error);
            pthread_mutex_unlock(&x->mu);
            if (error[0]) ppv_world_fail(t, rank, "%s", error);
            pthread_mutex_lock(&x->mu);
            break;
        }
        pthread_mutex_unlock(&x->mu);
        int rc = make_call(t, rank, e); /* other ranks run meanwhile */
        if (rc == 0 && e->op != EXT_YIELD && e->op != EXT_PROBE && e->op != EXT_WAIT_ANY &&
            e->op != EXT_TEST_OP)
            ppv_world_progress(t, rank);
        pthread_mutex_lock(&x->mu);
        e->rc = rc;
        if (rc == PPV_ERR_ABORTED) {
            /* the world stopped, or this rank died: nothing more can happen
             * on it, so its thread's later calls fail at once */
            e->gone = 1;
            pthread_cond_broadcast(&e->cv);
            break;
        }
    }
    pthread_cond_broadcast(&e->cv);
    pthread_mutex_unlock(&x->mu);
}

/* ---- the thread's side ------------------------------------------------------ */

static int check_rank(const ppv_ext *x, int32_t rank) {
    return x && rank >= 0 && rank < x->n;
}

int ppv_ext_begin(ppv_ext *x, int32_t rank) {
    if (!check_rank(x, rank)) return PPV_ERR_USAGE;
    ext_rank *e = &x->r[rank];
    pthread_mutex_lock(&x->mu);
    e->joined = 1;
    pthread_cond_broadcast(&e->cv);
    wait_for(x, e, &e->thread_turn, 1, &e->gone, -1);
    int rc = e->gone || x->closed ? PPV_ERR_ABORTED : 0;
    pthread_mutex_unlock(&x->mu);
    return rc;
}

/* Leaves the call (already in e) for the coroutine and waits for its
 * result. With x->mu held; returns with it released. */
static int hand_over(ppv_ext *x, ext_rank *e) {
    if (e->gone || x->closed) {
        pthread_mutex_unlock(&x->mu);
        return PPV_ERR_ABORTED;
    }
    e->calls++;
    snprintf(e->last, sizeof e->last, "%s", e->what);
    e->thread_turn = 0;
    pthread_cond_broadcast(&e->cv);
    wait_for(x, e, &e->thread_turn, 1, &e->gone, -1);
    int rc = e->thread_turn == 1 ? e->rc : PPV_ERR_ABORTED;
    pthread_mutex_unlock(&x->mu);
    return rc;
}

static ext_rank *lock_rank(ppv_ext *x, int32_t rank, ext_op op, const char *what) {
    ext_rank *e = &x->r[rank];
    pthread_mutex_lock(&x->mu);
    e->op = op;
    snprintf(e->what, sizeof e->what, "%s", what ? what : "");
    return e;
}

/* Thread rank's call op with its arguments (those it does not take are
 * NULL, 0 or -1), made by its coroutine; its result. */
static int call(ppv_ext *x, int32_t rank, ext_op op, const void *sbuf, void *rbuf, size_t bytes,
                int32_t peer, int32_t comm, int *arrived, const char *what) {
    if (!check_rank(x, rank)) return PPV_ERR_USAGE;
    ext_rank *e = lock_rank(x, rank, op, what);
    e->sbuf = sbuf;
    e->rbuf = rbuf;
    e->bytes = bytes;
    e->peer = peer;
    e->comm = comm;
    e->arrived = arrived;
    return hand_over(x, e);
}

int ppv_ext_send(ppv_ext *x, int32_t rank, const void *buf, size_t bytes, int32_t peer,
                 int32_t comm, const char *what) {
    return call(x, rank, EXT_SEND, buf, NULL, bytes, peer, comm, NULL, what);
}

int ppv_ext_recv(ppv_ext *x, int32_t rank, void *buf, size_t bytes, int32_t peer, int32_t comm,
                 const char *what) {
    return call(x, rank, EXT_RECV, NULL, buf, bytes, peer, comm, NULL, what);
}

int ppv_ext_broadcast(ppv_ext *x, int32_t rank, void *buf, size_t bytes, int32_t root,
                      int32_t comm, const char *what) {
    return call(x, rank, EXT_BROADCAST, NULL, buf, bytes, root, comm, NULL, what);
}

int ppv_ext_allreduce_f32(ppv_ext *x, int32_t rank, float *buf, size_t count, int32_t comm,
                          const char *what) {
    return call(x, rank, EXT_ALLREDUCE, NULL, buf, count * sizeof(float), -1, comm, NULL, what);
}

int ppv_ext_allgather(ppv_ext *x, int32_t rank, const void *send, void *recv, size_t bytes,
                      int32_t comm, const char *what) {
    return call(x, rank, EXT_ALLGATHER, send, recv, bytes, -1, comm, NULL, what);
}

int ppv_ext_barrier(ppv_ext *x, int32_t rank, int32_t comm, const char *what) {
    float one = 1.0f;
    return ppv_ext_allreduce_f32(x, rank, &one, 1, comm, what);
}

int ppv_ext_probe(ppv_ext *x, int32_t rank, int32_t peer, int32_t comm, int *arrived,
                  const char *what) {
    *arrived = 0;
    return call(x, rank, EXT_PROBE, NULL, NULL, 0, peer, comm, arrived, what);
}

int ppv_ext_yield(ppv_ext *x, int32_t rank, const char *what) {
    return call(x, rank, EXT_YIELD, NULL, NULL, 0, -1, 0, NULL, what);
}

int ppv_ext_wait_any(ppv_ext *x, int32_t rank, int32_t comm, const char *what) {
    return call(x, rank, EXT_WAIT_ANY, NULL, NULL, 0, -1, comm, NULL, what);
}

int ppv_ext_isend(ppv_ext *x, int32_t rank, const void *buf, size_t bytes, int32_t peer,
                  int32_t comm, const char *what, int64_t *id) {
    *id = 0;
    if (!check_rank(x, rank)) return PPV_ERR_USAGE;
    x->r[rank].opid = id;
    return call(x, rank, EXT_ISEND, buf, NULL, bytes, peer, comm, NULL, what);
}

int ppv_ext_irecv(ppv_ext *x, int32_t rank, void *buf, size_t bytes, int32_t peer, int32_t comm,
                  const char *what, int64_t *id) {
    *id = 0;
    if (!check_rank(x, rank)) return PPV_ERR_USAGE;
    x->r[rank].opid = id;
    return call(x, rank, EXT_IRECV, NULL, buf, bytes, peer, comm, NULL, what);
}

int ppv_ext_wait_op(ppv_ext *x, int32_t rank, int64_t id, const char *what) {
    if (!check_rank(x, rank)) return PPV_ERR_USAGE;
    x->r[rank].op_id = id;
    return call(x, rank, EXT_WAIT_OP, NULL, NULL, 0, -1, 0, NULL, what);
}

int ppv_ext_test_op(ppv_ext *x, int32_t rank, int64_t id, int *done, const char *what) {
    *done = 0;
    if (!check_rank(x, rank)) return PPV_ERR_USAGE;
    x->r[rank].op_id = id;
    return call(x, rank, EXT_TEST_OP, NULL, NULL, 0, -1, 0, done, what);
}

int ppv_ext_group_start(ppv_ext *x, int32_t rank, const char *what) {
    return call(x, rank, EXT_GROUP_START, NULL, NULL, 0, -1, 0, NULL, what);
}

int ppv_ext_group_end(ppv_ext *x, int32_t rank, const char *what) {
    return call(x, rank, EXT_GROUP_END, NULL, NULL, 0, -1, 0, NULL, what);
}

void ppv_ext_end(ppv_ext *x, int32_t rank, const char *error) {
    if (!check_rank(x, rank)) return;
    ext_rank *e = lock_rank(x, rank, EXT_END, "end");
    snprintf(e->error, sizeof e->error, "%s", error ? error : "");
    e->ended = 1;
    e->joined = 1;
    if (!e->gone && !x->closed) {
        e->thread_turn = 0;
        pthread_cond_broadcast(&e->cv);
    }
    pthread_mutex_unlock(&x->mu);
}
