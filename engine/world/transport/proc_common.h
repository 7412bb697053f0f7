/* proc_common.h - what the transports of processes (mpi.c, nccl.c) share:
 * a handle that opens with proc_base, the job's end on a failure, the
 * polling between two looks at a request, the watchdog of a rank that
 * only polls, the members of a communicator, the agreement before a
 * collective, and abort. Each module is built on its own, so these are
 * static inline. */
#ifndef PPV_PROC_COMMON_H
#define PPV_PROC_COMMON_H

#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "proc_module.h"

/* The first member of a transport's handle. */
typedef struct proc_base {
    int32_t rank, size;
    ppv_proc_config cfg;
    double last_done; /* the last completion or progress (a poll's watchdog) */
    /* a wait's bound and what it is, when set_wait gave one (0: the
     * timeout, --timeout) */
    double wait_s;
    char wait_why[384];
    /* Ends the job with this exit status (after aborting what must not
     * hang the exit); does not return. */
    void (*end_job)(struct proc_base *b, int code);
} proc_base;

static inline double proc_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static inline void proc_set_what(char *dst, size_t n, const char *what) {
    snprintf(dst, n, "%s", what ? what : "(unnamed)");
}

/* The transport's fail (ppv_transport_ops.fail): the report on stderr,
 * then the job ends with exit status 1 (a finding) or 2 (the
 * environment). */
static inline void proc_fail(void *impl, int32_t rank, int env, const char *msg) {
    proc_base *b = impl;
    fprintf(stderr, "ppv: rank %d of %d: %s\n", rank, b->size, msg);
    fflush(stderr);
    b->end_job(b, env ? 2 : 1);
    exit(env ? 2 : 1); /* end_job does not return; if it did, still end */
}

static inline void proc_failf(proc_base *b, int env, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static inline void proc_failf(proc_base *b, int env, const char *fmt, ...) {
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    proc_fail(b, b->rank, env, msg);
}

/* Between two polls of a wait: a few tests in a row, then the CPU to
 * others at each poll (mpirun --oversubscribe puts several ranks on a
 * core; on an idle core sched_yield returns at once, and every test
 * drives the library's progress); past 100 ms of waiting, short sleeps. */
static inline void proc_backoff(int *spins, double waited) {
    if (++*spins < 64) return;
    if (waited < 0.1) {
        sched_yield();
        return;
    }
    struct timespec ts = {0, 100000};
    nanosleep(&ts, NULL);
}

/* How long a wait may take, and the words for it in a report ("--timeout
 * 60", or what set_wait said). */
static inline double proc_bound(const proc_base *b) {
    return b->wait_s > 0 ? b->wait_s : b->cfg.timeout_s;
}

static inline const char *proc_bound_text(const proc_base *b, char *buf, size_t n) {
    if (b->wait_s > 0) return b->wait_why;
    snprintf(buf, n, "--timeout %g", b->cfg.timeout_s);
    return buf;
}

/* ppv_transport_ops.set_wait. */
static inline void proc_set_wait(void *impl, double seconds, const char *why) {
    proc_base *b = impl;
    b->wait_s = seconds > 0 ? seconds : 0;
    snprintf(b->wait_why, sizeof b->wait_why, "%s", why && seconds > 0 ? why : "");
}

/* ppv_transport_ops.progress: work was done. */
static inline void proc_progress(void *impl, int32_t rank) {
    (void)rank;
    ((proc_base *)impl)->last_done = proc_now();
}

/* ppv_transport_ops.yield: a poll that found nothing. The CPU to others,
 * and the watchdog of a rank that polls forever. */
static inline void proc_yield(void *impl, int32_t rank) {
    proc_base *b = impl;
    double idle = proc_now() - b->last_done;
    char text[64];
    if (idle > proc_bound(b))
        proc_failf(b, 0, "hang: rank %d has polled for %.1f s (%s) without progress", rank, idle,
                   proc_bound_text(b, text, sizeof text));
    sched_yield();
}

/* ppv_transport_ops' collectives, as each transport tells them apart
 * when its members agree on what they call, and the end of a run (settle),
 * which agrees the same way: a rank that ends while another waits in a
 * collective is a mismatch, reported, not a hang. */
enum { PROC_ALLREDUCE = 1, PROC_BCAST, PROC_ALLGATHER, PROC_END };

/* Gathers every member's three numbers over the transport's communicator
 * c: all[3 * k] gets member k's (what names the wait in a report). */
typedef void proc_gather_fn(void *impl, const void *c, const int64_t *mine, int64_t *all,
                            const char *what);

/* Before a collective (or the end of a run, PROC_END), its n members
 * agree on what each calls: kind, root and bytes, exchanged by gather.
 * The job ends on a collective inside a group, or at the first
 * disagreement, as the mock reports one. */
static inline void proc_agree(void *impl, int in_group, const void *c, int32_t comm, int32_t n,
                              int kind, int32_t root, size_t bytes, const char *what,
                              proc_gather_fn *gather) {
    static const char *const kinds[] = {"?", "ALLREDUCE", "BCAST", "ALLGATHER",
                                        "the end of the run"};
    proc_base *b = impl;
    if (in_group) proc_failf(b, 0, "%s: a collective inside a group", what);
    int64_t mine[3] = {kind, root, (int64_t)bytes};
    int64_t *all = malloc((size_t)n * sizeof mine);
    if (!all) proc_failf(b, 1, "out of memory");
    char desc[96];
    snprintf(desc, sizeof desc, "%s (agreeing on it)", what);
    gather(impl, c, mine, all, desc);
    for (int32_t k = 0; k < n; k++) {
        const int64_t *t = &all[3 * k];
        if (t[0] == mine[0] && t[1] == mine[1] && t[2] == mine[2]) continue;
        proc_failf(b, 0,
                   "collective on communicator %d: rank %d's %s (%lld bytes, root %lld) does not "
                   "match member %d's (%s, %lld bytes, root %lld)",
                   comm, b->rank, what, (long long)mine[2], (long long)mine[1], k,
                   t[0] >= 1 && t[0] <= PROC_END ? kinds[t[0]] : kinds[0], (long long)t[2],
                   (long long)t[1]);
    }
    free(all);
}

/* ppv_transport_ops.abort: the job ends with the rank's reason. */
static inline int proc_abort(void *impl, int32_t rank, const char *why) {
    proc_failf(impl, 0, "rank %d aborted the job: %s", rank, why ? why : "(no reason)");
    return 0;
}

/* ppv_transport_ops.async_error: a failure ends the job, so a rank that
 * can still ask has seen none. */
static inline int proc_async_error(void *impl, int32_t rank) {
    (void)impl;
    (void)rank;
    return 0;
}

/* An allreduce from an allgather (all: member k's count floats at k *
 * count): the sum in member order into buf, the mock's bits. */
static inline void proc_sum_in_order(float *buf, const float *all, size_t count, int32_t n) {
    for (size_t i = 0; i < count; i++) {
        float acc = 0.0f;
        for (int32_t k = 0; k < n; k++) acc += all[(size_t)k * count + i];
        buf[i] = acc;
    }
}

/* Whether a send of bytes is buffered (eager) under the run's semantics:
 * every send under eager, those up to the limit under eager:BYTES. */
static inline int proc_eager(const proc_base *b, size_t bytes) {
    switch (b->cfg.sem.kind) {
    case PPV_SEM_EAGER:
        return 1;
    case PPV_SEM_EAGER_BYTES:
        return (int64_t)bytes <= b->cfg.sem.eager_limit;
    default:
        return 0;
    }
}

/* ppv_transport_ops' configure: the run's semantics and timeout. */
static inline int proc_configure(void *impl, const ppv_proc_config *cfg, char *err,
                                 size_t errlen) {
    proc_base *b = impl;
    (void)err;
    (void)errlen;
    b->cfg = *cfg;
    b->last_done = proc_now();
    return 0;
}

/* A communicator's members: *member_of (malloc'd, [size]: the rank in it,
 * -1) from the n global ranks listed (NULL: every rank), and *me, this
 * rank's place (-1: not a member). 0, or -1 with the reason. */
static inline int proc_members(const proc_base *b, const int32_t *ranks, int32_t n,
                               int32_t **member_of, int32_t *me, char *err, size_t errlen) {
    *me = -1;
    if (!(*member_of = malloc((size_t)b->size * sizeof **member_of))) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (int32_t r = 0; r < b->size; r++) (*member_of)[r] = -1;
    for (int32_t k = 0; k < n; k++) {
        int32_t r = ranks ? ranks[k] : k;
        if (r < 0 || r >= b->size || (*member_of)[r] >= 0) {
            snprintf(err, errlen, "communicator member %d is outside the job's %d ranks or "
                     "listed twice", r, b->size);
            free(*member_of);
            *member_of = NULL;
            return -1;
        }
        (*member_of)[r] = k;
        if (r == b->rank) *me = k;
    }
    return 0;
}

#endif
