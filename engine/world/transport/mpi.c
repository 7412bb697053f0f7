/* mpi.c - the MPI transport: one process per rank, started by mpirun, on
 * one machine or many. Built as its own module (libppv_mpi.so), which
 * proc.c loads when a command is given `--transport mpi`, so that ppv
 * itself needs no MPI library to start.
 *
 * The same semantics as the mock:
 *  - point-to-point messages match FIFO per (sender, receiver,
 *    communicator): one tag on a communicator of ppv's own (a duplicate of
 *    MPI_COMM_WORLD), and MPI does not let messages overtake;
 *  - under rendezvous a send is MPI_Issend (it completes when the receive
 *    has started); under eager it is buffered: the message is copied and
 *    sent with MPI_Isend, the call returns at once and the copy is freed
 *    when MPI is done with it (MPI_Bsend's semantics with a buffer that
 *    grows with what is in flight, where MPI_Bsend needs the worst case
 *    attached before the run, which a stream of chunks does not know);
 *    under eager:BYTES the one or the other by size. So a schedule that
 *    deadlocks under rendezvous on the mock deadlocks here;
 *  - communicators other than the world are made at setup with
 *    MPI_Comm_split, peers are named by their global rank as on the mock;
 *  - a group posts its calls and waits for them all at group_end;
 *  - collectives first exchange what each member called (kind, root,
 *    size), so a mismatch is reported as on the mock rather than left to
 *    MPI; the sum of an allreduce is taken in member order on every rank,
 *    the same bits as the mock's whatever MPI's own reduction order.
 * No call waits unboundedly: every wait polls its requests (MPI_Test) and
 * gives up after the run's timeout, reporting the rank, the call and the
 * peer it waits for; then MPI_Abort ends the job. A failure (a tripwire)
 * is reported by its rank and ends the job the same way, with exit status
 * 1 (a finding) or 2 (the environment).
 */
#define _POSIX_C_SOURCE 200809L
#include <limits.h>
#include <mpi.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "proc_common.h"

/* Under AddressSanitizer (ppv's PPV_SANITIZE build), what OpenMPI allocates
 * in MPI_Init and MPI_Finalize and keeps to the process's end is OpenMPI's,
 * not a leak of ppv's: LeakSanitizer is told to ignore the allocations
 * those two calls make on this thread, so that a refusal outside mpirun is
 * exit 2 there too. ppv's own allocations stay checked. */
#if defined(__SANITIZE_ADDRESS__)
#define PPV_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define PPV_LSAN 1
#endif
#endif
#ifdef PPV_LSAN
#include <sanitizer/lsan_interface.h>
#define LSAN_IGNORE_BEGIN() __lsan_disable()
#define LSAN_IGNORE_END() __lsan_enable()
#else
#define LSAN_IGNORE_BEGIN() ((void)0)
#define LSAN_IGNORE_END() ((void)0)
#endif

enum { TAG = 7 };

/* A posted request and what it is, for the hang report. */
typedef struct pending {
    MPI_Request req;
    int send;
    int32_t peer;
    size_t bytes;
    char what[64];
} pending;

/* A buffered send in flight: its copy, until MPI is done with it. */
typedef struct outbox {
    pending p;
    struct outbox *next;
    /* the copy follows */
} outbox;

/* A communicator: the world (0) or one made at setup. */
typedef struct mpi_comm {
    MPI_Comm comm;
    int32_t n;
    int32_t *member_of; /* [world size]: the rank in this communicator, -1 */
} mpi_comm;

typedef struct mpi_t {
    proc_base b; /* first: the shared handle */
    int inited;  /* this module called MPI_Init */
    MPI_Comm world;
    mpi_comm *comms;
    int32_t ncomms;
    outbox *out; /* buffered sends in flight */
    int in_group;
    pending *grp; /* an open group's requests */
    int ngrp, capgrp;
} mpi_t;

/* The job ends: MPI_Abort with this exit status. */
static void mpi_end_job(proc_base *b, int code) {
    (void)b;
    MPI_Abort(MPI_COMM_WORLD, code);
}

#define failf(m, ...) proc_failf(&(m)->b, __VA_ARGS__)

static void mpi_error(mpi_t *m, int rc, const char *what) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof text, "error %d", rc);
    failf(m, 1, "%s: MPI says: %s", what, text);
}

/* Waits for the n requests of p under the watchdog; receives are checked
 * for their size. 0, or the job ends (a hang, a short message, an MPI
 * error). */
static int wait_pending(mpi_t *m, pending *p, int n) {
    double t0 = proc_now();
    int spins = 0;
    for (;;) {
        int left = 0;
        for (int i = 0; i < n; i++) {
            if (p[i].req == MPI_REQUEST_NULL) continue;
            int flag = 0;
            MPI_Status st;
            int rc = MPI_Test(&p[i].req, &flag, &st);
            if (rc != MPI_SUCCESS) mpi_error(m, rc, p[i].what);
            if (!flag) {
                left++;
                continue;
            }
            m->b.last_done = proc_now();
            if (!p[i].send) {
                int got = 0;
                MPI_Get_count(&st, MPI_BYTE, &got);
                if ((size_t)got != p[i].bytes)
                    failf(m, 0, "%s receives %zu bytes but rank %d sent %d", p[i].what, p[i].bytes,
                          p[i].peer, got);
            }
        }
        if (!left) return 0;
        double waited = proc_now() - t0;
        char text[64];
        if (waited > proc_bound(&m->b))
            for (int i = 0; i < n; i++) {
                if (p[i].req == MPI_REQUEST_NULL) continue;
                if (p[i].peer < 0) /* a collective or the end-of-run barrier */
                    failf(m, 0,
                          "hang: %s has waited %.1f s (%s) for every member of its "
                          "communicator; a deadlock, or a rank that stopped",
                          p[i].what, waited, proc_bound_text(&m->b, text, sizeof text));
                failf(m, 0,
                      "hang: %s has waited %.1f s (%s) to %s rank %d (%zu bytes%s); "
                      "a deadlock, or a rank that stopped",
                      p[i].what, waited, proc_bound_text(&m->b, text, sizeof text),
                      p[i].send ? "send to" : "receive from", p[i].peer, p[i].bytes,
                      p[i].send ? ", a synchronous send: it waits for the receive" : "");
            }
        proc_backoff(&spins, waited);
    }
}

/* The communicator of comm, with rank a member of it, or the job ends (a
 * usage error). */
static mpi_comm *comm_of(mpi_t *m, int32_t comm, const char *what) {
    if (comm < 0 || comm >= m->ncomms || m->comms[comm].member_of[m->b.rank] < 0)
        failf(m, 0, "%s: rank %d is not a member of communicator %d", what, m->b.rank, comm);
    return &m->comms[comm];
}

/* peer's rank in c, or the job ends (a usage error). */
static int peer_in(mpi_t *m, const mpi_comm *c, int32_t comm, int32_t peer, int send,
                   const char *what) {
    if (peer < 0 || peer >= m->b.size || peer == m->b.rank || c->member_of[peer] < 0)
        failf(m, 0, "%s: rank %d cannot %s rank %d on communicator %d", what, m->b.rank,
              send ? "send to" : "receive from", peer, comm);
    return c->member_of[peer];
}

static void check_size(mpi_t *m, size_t bytes, const char *what) {
    if (bytes > INT_MAX)
        failf(m, 1, "%s: %zu bytes; the MPI transport sends at most %d bytes a message", what,
              bytes, INT_MAX);
}

/* A request to wait for now, or at group_end. */
static pending *new_pending(mpi_t *m, pending *one) {
    if (!m->in_group) return one;
    if (m->ngrp == m->capgrp) {
        int cap = m->capgrp ? 2 * m->capgrp : 16;
        pending *g = realloc(m->grp, (size_t)cap * sizeof *g);
        if (!g) failf(m, 1, "out of memory");
        m->grp = g;
        m->capgrp = cap;
    }
    return &m->grp[m->ngrp++];
}

/* Frees the buffered sends MPI is done with. */
static void reap(mpi_t *m) {
    for (outbox **pp = &m->out; *pp;) {
        outbox *b = *pp;
        int flag = 0, rc = MPI_Test(&b->p.req, &flag, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS) mpi_error(m, rc, b->p.what);
        if (!flag) {
            pp = &b->next;
            continue;
        }
        *pp = b->next;
        free(b);
    }
}

static int mpi_send(void *impl, int32_t rank, const void *buf, size_t bytes, int32_t peer,
                    int32_t comm, const char *what) {
    mpi_t *m = impl;
    (void)rank;
    mpi_comm *c = comm_of(m, comm, what);
    int to = peer_in(m, c, comm, peer, 1, what);
    check_size(m, bytes, what);
    if (proc_eager(&m->b, bytes)) { /* completes here: MPI sends the copy when it can */
        reap(m);
        outbox *b = malloc(sizeof *b + (bytes ? bytes : 1));
        if (!b) failf(m, 1, "out of memory buffering %s (%zu bytes)", what, bytes);
        memcpy(b + 1, buf, bytes);
        b->p.send = 1;
        b->p.peer = peer;
        b->p.bytes = bytes;
        proc_set_what(b->p.what, sizeof b->p.what, what);
        int rc = MPI_Isend(b + 1, (int)bytes, MPI_BYTE, to, TAG, c->comm, &b->p.req);
        if (rc != MPI_SUCCESS) mpi_error(m, rc, what);
        b->next = m->out;
        m->out = b;
        m->b.last_done = proc_now();
        return 0;
    }
    pending one, *p = new_pending(m, &one);
    p->send = 1;
    p->peer = peer;
    p->bytes = bytes;
    proc_set_what(p->what, sizeof p->what, what);
    int rc = MPI_Issend(buf, (int)bytes, MPI_BYTE, to, TAG, c->comm, &p->req);
    if (rc != MPI_SUCCESS) mpi_error(m, rc, what);
    return m->in_group ? 0 : wait_pending(m, p, 1);
}

static int mpi_recv(void *impl, int32_t rank, void *buf, size_t bytes, int32_t peer, int32_t comm,
                    const char *what) {
    mpi_t *m = impl;
    (void)rank;
    mpi_comm *c = comm_of(m, comm, what);
    int from = peer_in(m, c, comm, peer, 0, what);
    check_size(m, bytes, what);
    pending one, *p = new_pending(m, &one);
    p->send = 0;
    p->peer = peer;
    p->bytes = bytes;
    proc_set_what(p->what, sizeof p->what, what);
    int rc = MPI_Irecv(buf, (int)bytes, MPI_BYTE, from, TAG, c->comm, &p->req);
    if (rc != MPI_SUCCESS) mpi_error(m, rc, what);
    return m->in_group ? 0 : wait_pending(m, p, 1);
}

static int mpi_group_start(void *impl, int32_t rank) {
    mpi_t *m = impl;
    (void)rank;
    if (m->in_group) failf(m, 0, "group_start inside an open group");
    m->in_group = 1;
    m->ngrp = 0;
    return 0;
}

static int mpi_group_end(void *impl, int32_t rank) {
    mpi_t *m = impl;
    (void)rank;
    if (!m->in_group) failf(m, 0, "group_end without group_start");
    m->in_group = 0;
    int n = m->ngrp;
    m->ngrp = 0;
    return wait_pending(m, m->grp, n);
}

/* Waits for a collective's request (no peer, no size to check). */
static int wait_one(mpi_t *m, MPI_Request req, int rc, const char *what) {
    if (rc != MPI_SUCCESS) mpi_error(m, rc, what);
    pending p = {.req = req, .send = 1, .peer = -1};
    proc_set_what(p.what, sizeof p.what, what);
    return wait_pending(m, &p, 1);
}

/* proc_gather_fn over MPI. */
static void gather_agreement(void *impl, const void *c, const int64_t *mine, int64_t *all,
                             const char *what) {
    MPI_Request req;
    int rc = MPI_Iallgather(mine, 3, MPI_INT64_T, all, 3, MPI_INT64_T, ((const mpi_comm *)c)->comm,
                            &req);
    wait_one(impl, req, rc, what);
}

/* Every member says what it calls (proc_agree). */
static void agree(mpi_t *m, const mpi_comm *c, int32_t comm, int kind, int32_t root, size_t bytes,
                  const char *what) {
    proc_agree(m, m->in_group, c, comm, c->n, kind, root, bytes, what, gather_agreement);
}

static int mpi_allreduce_f32(void *impl, int32_t rank, float *buf, size_t count, int32_t comm,
                             const char *what) {
    mpi_t *m = impl;
    (void)rank;
    what = what ? what : "ALLREDUCE";
    mpi_comm *c = comm_of(m, comm, what);
    check_size(m, count * sizeof(float) * (size_t)c->n, what);
    agree(m, c, comm, PROC_ALLREDUCE, -1, count * sizeof(float), what);
    float *all = malloc((count ? count : 1) * (size_t)c->n * sizeof *all);
    if (!all) failf(m, 1, "out of memory");
    MPI_Request req;
    int rc = MPI_Iallgather(buf, (int)count, MPI_FLOAT, all, (int)count, MPI_FLOAT, c->comm, &req);
    wait_one(m, req, rc, what);
    proc_sum_in_order(buf, all, count, c->n);
    free(all);
    return 0;
}

static int mpi_broadcast(void *impl, int32_t rank, void *buf, size_t bytes, int32_t root,
                         int32_t comm, const char *what) {
    mpi_t *m = impl;
    (void)rank;
    what = what ? what : "BCAST";
    mpi_comm *c = comm_of(m, comm, what);
    if (root < 0 || root >= c->n)
        failf(m, 0, "broadcast root %d is outside communicator %d", root, comm);
    check_size(m, bytes, what);
    agree(m, c, comm, PROC_BCAST, root, bytes, what);
    MPI_Request req;
    int rc = MPI_Ibcast(buf, (int)bytes, MPI_BYTE, root, c->comm, &req);
    return wait_one(m, req, rc, what);
}

static int mpi_allgather(void *impl, int32_t rank, const void *send, void *recv, size_t bytes,
                         int32_t comm, const char *what) {
    mpi_t *m = impl;
    (void)rank;
    what = what ? what : "ALLGATHER";
    mpi_comm *c = comm_of(m, comm, what);
    check_size(m, bytes * (size_t)c->n, what);
    agree(m, c, comm, PROC_ALLGATHER, -1, bytes, what);
    MPI_Request req;
    int rc = MPI_Iallgather(send, (int)bytes, MPI_BYTE, recv, (int)bytes, MPI_BYTE, c->comm, &req);
    return wait_one(m, req, rc, what);
}

static int mpi_probe(void *impl, int32_t rank, int32_t peer, int32_t comm, int *arrived) {
    mpi_t *m = impl;
    (void)rank;
    mpi_comm *c = comm_of(m, comm, "probe");
    int from = peer_in(m, c, comm, peer, 0, "probe");
    int flag = 0, rc = MPI_Iprobe(from, TAG, c->comm, &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) mpi_error(m, rc, "probe");
    *arrived = flag;
    return 0;
}

static const ppv_transport_ops mpi_ops = {
    .send = mpi_send,
    .recv = mpi_recv,
    .group_start = mpi_group_start,
    .group_end = mpi_group_end,
    .allreduce_f32 = mpi_allreduce_f32,
    .broadcast = mpi_broadcast,
    .allgather = mpi_allgather,
    .abort = proc_abort,
    .async_error = proc_async_error,
    .probe = mpi_probe,
    .fail = proc_fail,
    .progress = proc_progress,
    .yield = proc_yield,
    .set_wait = proc_set_wait,
};

/* Adds communicator ncomms: c (MPI_COMM_NULL where this rank is not in
 * it) and its members (proc_members). 0, or -1 out of memory. */
static int push_comm(mpi_t *m, MPI_Comm c, int32_t *member_of, int32_t n) {
    mpi_comm *cs = realloc(m->comms, (size_t)(m->ncomms + 1) * sizeof *cs);
    if (!cs) return -1;
    m->comms = cs;
    cs[m->ncomms++] = (mpi_comm){c, n, member_of};
    return 0;
}

static void *mpi_start(int32_t *rank, int32_t *size, char *err, size_t errlen) {
    mpi_t *m = calloc(1, sizeof *m);
    if (!m) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        LSAN_IGNORE_BEGIN();
        int rc = MPI_Init(NULL, NULL);
        LSAN_IGNORE_END();
        if (rc != MPI_SUCCESS) {
            snprintf(err, errlen, "MPI_Init failed");
            free(m);
            return NULL;
        }
        m->inited = 1;
    }
    int r = 0, n = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &r);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    m->b.rank = *rank = r;
    m->b.size = *size = n;
    m->b.cfg.timeout_s = 60;
    m->b.last_done = proc_now();
    m->b.end_job = mpi_end_job;
    /* ppv's own communicator: its messages never meet another library's,
     * and errors come back to be reported rather than abort unexplained */
    int32_t *all = NULL, me;
    if (MPI_Comm_dup(MPI_COMM_WORLD, &m->world) != MPI_SUCCESS ||
        MPI_Comm_set_errhandler(m->world, MPI_ERRORS_RETURN) != MPI_SUCCESS ||
        proc_members(&m->b, NULL, n, &all, &me, err, errlen) < 0 ||
        push_comm(m, m->world, all, n) < 0) {
        free(all);
        snprintf(err, errlen, "cannot make ppv's communicator (MPI_Comm_dup, or out of memory)");
        if (m->inited) {
            LSAN_IGNORE_BEGIN();
            MPI_Finalize();
            LSAN_IGNORE_END();
        }
        free(m);
        return NULL;
    }
    return m;
}

/* Every rank calls it with the same list: the id of the new communicator,
 * or -1 with the reason. */
static int32_t mpi_add_comm(void *impl, const int32_t *ranks, int32_t n, char *err, size_t errlen) {
    mpi_t *m = impl;
    int32_t *member_of, me;
    if (proc_members(&m->b, ranks, n, &member_of, &me, err, errlen) < 0) return -1;
    MPI_Comm c = MPI_COMM_NULL;
    if (MPI_Comm_split(m->world, me >= 0 ? 1 : MPI_UNDEFINED, me, &c) != MPI_SUCCESS ||
        (c != MPI_COMM_NULL && MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN) != MPI_SUCCESS)) {
        snprintf(err, errlen, "MPI_Comm_split failed");
        free(member_of);
        return -1;
    }
    if (push_comm(m, c, member_of, n) < 0) {
        snprintf(err, errlen, "out of memory");
        free(member_of);
        return -1;
    }
    return m->ncomms - 1;
}

/* Every buffered send delivered (under the watchdog), then every rank
 * there: an agreement, so a rank still in a collective is reported. */
static int mpi_settle(void *impl) {
    mpi_t *m = impl;
    for (outbox *b = m->out; b; b = b->next)
        wait_pending(m, &b->p, 1);
    reap(m);
    agree(m, &m->comms[0], 0, PROC_END, -1, 0, "the end of the run");
    return 0;
}

static void mpi_end(void *impl) {
    mpi_t *m = impl;
    if (!m) return;
    for (int32_t k = m->ncomms - 1; k >= 0; k--) {
        if (m->comms[k].comm != MPI_COMM_NULL) MPI_Comm_free(&m->comms[k].comm);
        free(m->comms[k].member_of);
    }
    free(m->comms);
    while (m->out) { /* a job that ends here has nothing left to deliver */
        outbox *b = m->out;
        m->out = b->next;
        MPI_Cancel(&b->p.req);
        MPI_Request_free(&b->p.req);
        free(b);
    }
    if (m->inited) {
        LSAN_IGNORE_BEGIN();
        MPI_Finalize();
        LSAN_IGNORE_END();
    }
    free(m->grp);
    free(m);
}

static const ppv_proc_module module = {
    .start = mpi_start,
    .configure = proc_configure,
    .add_comm = mpi_add_comm,
    .settle = mpi_settle,
    .end = mpi_end,
    .ops = &mpi_ops,
};

const ppv_proc_module *ppv_proc_module_v1(void);
const ppv_proc_module *ppv_proc_module_v1(void) {
    return &module;
}
