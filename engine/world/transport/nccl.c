/* nccl.c - the NCCL transport: one process per GPU, started by mpirun,
 * its messages through ncclSend/ncclRecv and the collectives on a CUDA
 * stream of its own (eager sends on a second). A module (libppv_nccl.so)
 * that proc.c loads for `--transport nccl`; it opens libnccl and
 * libcudart itself (dlopen:
 * $PPV_NCCL_LIBRARY and $PPV_CUDART_LIBRARY, else the loader's search and
 * the toolkit it was built with), so that the tests can put a stand-in for
 * both in their place on machines without a GPU (tests/fake_nccl/).
 *
 * Bootstrap: rank 0's ncclUniqueId goes to the others with MPI_Bcast
 * under mpirun, or through a file in $PPV_LAUNCH_DIR under `ppv launch`
 * (which sets PPV_LAUNCH_RANK and PPV_LAUNCH_SIZE and starts no MPI);
 * each process takes GPU (local rank mod devices). The communicator is
 * non-blocking (config.blocking = 0), so no NCCL call can hold the CPU:
 * every wait polls cudaStreamQuery and ncclCommGetAsyncError, and after
 * the run's timeout the rank reports the hang (the call, the peer, the
 * message), calls ncclCommAbort and ends the job, as it does on an
 * asynchronous error. A call that answers ncclInProgress may not yet
 * have put its kernels on the stream (NCCL does that from a thread of its
 * own): nothing follows it there until the communicators say so. Host
 * buffers are staged through device memory: a
 * send copies in then sends, a receive receives then copies out; inside a
 * group the receives' copies wait for ncclGroupEnd, when the group's
 * operations are launched.
 *
 * Send semantics are the run's, as on MPI. A rendezvous send waits for
 * its stream (NCCL may wait for the receive: small messages go into the
 * peer's FIFO, large ones wait). An eager one (every send under eager,
 * those up to BYTES under eager:BYTES) is copied to the device, launched
 * on a stream of its own and not waited for: its staging buffer is freed
 * when its event says it is done, and the run's end waits for every one
 * (under the watchdog), so a send never received is a reported hang.
 * NCCL runs one communicator's calls in the order they were issued,
 * whatever their streams, so a launched send would hold up this rank's
 * next receive on that communicator; messages on the world therefore
 * travel on two communicators split from it, one carrying every message
 * to a higher rank (or to itself), the other every message to a lower
 * one. Stage 0's next envelope (to the leader) and the leader's result
 * (to stage 0) then pass each other. Both ends pick the communicator from
 * the pair of ranks alone, so grouped and ungrouped calls match as
 * before. Collectives agree first on kind,
 * root and size, as on the mock; an allreduce is an allgather summed in
 * member order, the mock's bits. Communicators other than the world are
 * split from it (ncclCommSplit, non-blocking too); peers are named by
 * their global rank, as on the mock. NCCL has no probe: polling stays on
 * the mock and MPI.
 */
#define _POSIX_C_SOURCE 200809L
#include <dlfcn.h>
#include <limits.h>
#include <mpi.h>
#include <nccl.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "proc_common.h"

/* The functions of libnccl and libcudart the transport calls. */
typedef struct nccl_api {
    ncclResult_t (*GetUniqueId)(ncclUniqueId *);
    ncclResult_t (*CommInitRankConfig)(ncclComm_t *, int, ncclUniqueId, int, ncclConfig_t *);
    ncclResult_t (*CommSplit)(ncclComm_t, int, int, ncclComm_t *, ncclConfig_t *);
    ncclResult_t (*CommGetAsyncError)(ncclComm_t, ncclResult_t *);
    ncclResult_t (*CommAbort)(ncclComm_t);
    ncclResult_t (*CommFinalize)(ncclComm_t);
    ncclResult_t (*CommDestroy)(ncclComm_t);
    ncclResult_t (*Send)(const void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*Recv)(void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*GroupStart)(void);
    ncclResult_t (*GroupEnd)(void);
    ncclResult_t (*AllGather)(const void *, void *, size_t, ncclDataType_t, ncclComm_t,
                              cudaStream_t);
    ncclResult_t (*Broadcast)(const void *, void *, size_t, ncclDataType_t, int, ncclComm_t,
                              cudaStream_t);
    const char *(*GetErrorString)(ncclResult_t);
    cudaError_t (*GetDeviceCount)(int *);
    cudaError_t (*SetDevice)(int);
    cudaError_t (*StreamCreate)(cudaStream_t *);
    cudaError_t (*StreamDestroy)(cudaStream_t);
    cudaError_t (*StreamQuery)(cudaStream_t);
    cudaError_t (*Malloc)(void **, size_t);
    cudaError_t (*Free)(void *);
    cudaError_t (*MemcpyAsync)(void *, const void *, size_t, enum cudaMemcpyKind, cudaStream_t);
    cudaError_t (*EventCreateWithFlags)(cudaEvent_t *, unsigned int);
    cudaError_t (*EventRecord)(cudaEvent_t, cudaStream_t);
    cudaError_t (*EventQuery)(cudaEvent_t);
    cudaError_t (*EventDestroy)(cudaEvent_t);
    const char *(*GetErrorStringCuda)(cudaError_t);
} nccl_api;

/* A device staging buffer of the pool. */
typedef struct dev_block {
    void *ptr;
    size_t size;
    int busy;
} dev_block;

/* A receive of an open group: its device buffer, copied out at group_end. */
typedef struct staged {
    void *dev, *host;
    size_t bytes;
    int32_t peer;
    int send;
    char what[64];
} staged;

/* An eager send launched and not yet known to be done: its staging
 * buffer, and the event recorded after it on the send stream. */
typedef struct in_flight {
    void *dev;
    cudaEvent_t done;
    size_t bytes;
    int32_t peer;
    char what[64];
} in_flight;

/* A communicator: the world (0) or one split from it. */
typedef struct nccl_comm {
    ncclComm_t comm; /* NULL where this rank is not a member */
    int32_t n;
    int32_t *member_of; /* [world size]: the rank in it, -1 */
} nccl_comm;

typedef struct nccl_t {
    proc_base b; /* first: the shared handle */
    int mpi_inited;
    int launched; /* started by ppv launch: no MPI */
    nccl_api api;
    ncclComm_t comm; /* the world's */
    nccl_comm *comms;
    int32_t ncomms;
    /* messages on the world: [0] to a higher rank or to itself, [1] to a
     * lower one (split from it, so a launched send never holds up a
     * receive from the other side) */
    ncclComm_t way[2];
    cudaStream_t stream;
    cudaStream_t send_stream; /* eager sends: launched, not waited for */
    in_flight *sent;          /* those, oldest first */
    int nsent, capsent;
    cudaEvent_t *spare; /* events of sends found done, for the next ones */
    int nspare, capspare;
    int device;
    int in_group;
    staged *grp;
    int ngrp, capgrp;
    dev_block *pool; /* staging buffers */
    int npool, cappool;
} nccl_t;

/* The job ends: every communicator aborted (nothing of it may hang the
 * exit), then MPI_Abort with this exit status; under ppv launch, exit
 * (the launcher ends the other ranks). */
static void nccl_end_job(proc_base *b, int code) {
    nccl_t *m = (nccl_t *)b;
    for (int32_t k = m->ncomms - 1; k >= 1; k--)
        if (m->comms[k].comm) m->api.CommAbort(m->comms[k].comm);
    for (int w = 0; w < 2; w++)
        if (m->way[w]) m->api.CommAbort(m->way[w]);
    if (m->comm) m->api.CommAbort(m->comm);
    m->comm = NULL;
    if (!m->launched) MPI_Abort(MPI_COMM_WORLD, code);
    exit(code);
}

#define failf(m, ...) proc_failf(&(m)->b, __VA_ARGS__)

static void check_nccl(nccl_t *m, ncclResult_t rc, const char *what) {
    if (rc != ncclSuccess && rc != ncclInProgress)
        failf(m, 1, "%s: NCCL says: %s", what, m->api.GetErrorString(rc));
}

static void check_cuda(nccl_t *m, cudaError_t rc, const char *what) {
    if (rc != cudaSuccess) failf(m, 1, "%s: CUDA says: %s", what, m->api.GetErrorStringCuda(rc));
}

/* Asks every communicator how it stands: the job ends (what failed) when
 * one has failed; returns whether one is still in progress. */
static int comms_in_progress(nccl_t *m, const char *what) {
    int busy = 0;
    for (int32_t k = 0; k < m->ncomms + 2; k++) {
        ncclComm_t c = k < m->ncomms ? m->comms[k].comm : m->way[k - m->ncomms];
        if (!c) continue;
        ncclResult_t st = ncclSuccess;
        check_nccl(m, m->api.CommGetAsyncError(c, &st), "ncclCommGetAsyncError");
        if (st == ncclInProgress)
            busy = 1;
        else if (st != ncclSuccess)
            failf(m, 0, "%s: the communicator failed (NCCL says: %s); aborted", what,
                  m->api.GetErrorString(st));
    }
    return busy;
}

/* One more turn of a wait for what that began at t0: past --timeout the
 * hang is reported ("hang: WHAT STATE N s ...; ncclCommAbort called" and
 * tail) and the job ends; before it, a pause that grows with the wait. */
static void pause_or_hang(nccl_t *m, double t0, int *spins, const char *what, const char *state,
                          const char *tail) {
    double waited = proc_now() - t0;
    char text[64];
    if (waited > proc_bound(&m->b))
        failf(m, 0, "hang: %s %s %.1f s (%s); ncclCommAbort called%s", what, state, waited,
              proc_bound_text(&m->b, text, sizeof text), tail);
    proc_backoff(spins, waited);
}

/* A call on a non-blocking communicator may return (ncclInProgress)
 * before its kernels are on the stream: NCCL puts them there from a
 * thread of its own. Until every communicator says it is no longer in
 * progress, nothing may follow them onto the stream (a receive's copy out
 * would run before the receive) and the stream's being idle means
 * nothing. So after rc, this waits for that, under the watchdog. */
static void issued(nccl_t *m, ncclResult_t rc, const char *what) {
    check_nccl(m, rc, what);
    if (rc != ncclInProgress) return;
    double t0 = proc_now();
    int spins = 0;
    while (comms_in_progress(m, what))
        pause_or_hang(m, t0, &spins, what, "was not issued to the stream in", "");
}

/* Waits until the stream has run everything put on it, polling the
 * communicators' asynchronous errors; past the timeout, the hang is
 * reported (what: the call and its peer) and the job ends. */
static void wait_on(nccl_t *m, cudaStream_t stream, const char *what) {
    double t0 = proc_now();
    int spins = 0;
    for (;;) {
        cudaError_t q = m->api.StreamQuery(stream);
        if (q != cudaSuccess && q != cudaErrorNotReady) check_cuda(m, q, what);
        /* asked whether the stream finished or not: an operation can end
         * while its communicator fails, and the error belongs to this call */
        comms_in_progress(m, what);
        if (q == cudaSuccess) break;
        pause_or_hang(m, t0, &spins, what, "has waited", ": a deadlock, or a rank that stopped");
    }
    m->b.last_done = proc_now();
}

/* wait_on the main stream. */
static void wait_stream(nccl_t *m, const char *what) {
    wait_on(m, m->stream, what);
}

/* Room for one more element in the array *v of *n, capacity *cap
 * (doubled when full; first first elements), or the job ends. */
static void grow(nccl_t *m, void **v, int n, int *cap, size_t elem, int first) {
    if (n < *cap) return;
    int c = *cap ? 2 * *cap : first;
    void *p = realloc(*v, (size_t)c * elem);
    if (!p) failf(m, 1, "out of memory");
    *v = p;
    *cap = c;
}

/* Device staging buffers are kept for the next calls (cudaMalloc is slow,
 * and cudaFree waits for the whole device): a free one large enough is
 * taken, else a new one made. */
static void *dev_alloc(nccl_t *m, size_t bytes) {
    for (int i = 0; i < m->npool; i++)
        if (!m->pool[i].busy && m->pool[i].size >= bytes) {
            m->pool[i].busy = 1;
            return m->pool[i].ptr;
        }
    grow(m, (void **)&m->pool, m->npool, &m->cappool, sizeof *m->pool, 8);
    void *d = NULL;
    check_cuda(m, m->api.Malloc(&d, bytes ? bytes : 1), "cudaMalloc");
    m->pool[m->npool++] = (dev_block){d, bytes ? bytes : 1, 1};
    return d;
}

/* A staging buffer back to the pool, once the stream is done with it. */
static void dev_release(nccl_t *m, void *d) {
    for (int i = 0; i < m->npool; i++)
        if (m->pool[i].ptr == d) m->pool[i].busy = 0;
}

/* The communicator of comm, with this rank in it, or the job ends. */
static nccl_comm *comm_of(nccl_t *m, int32_t comm, const char *what) {
    if (comm < 0 || comm >= m->ncomms || !m->comms[comm].comm)
        failf(m, 0, "%s: rank %d is not a member of communicator %d", what, m->b.rank, comm);
    return &m->comms[comm];
}

/* peer's rank in c, or the job ends. A rank may exchange with itself
 * inside a group only (NCCL's rule: its send and its receive must be
 * launched together); the engine never does, a benchmark on one GPU does. */
static int peer_in(nccl_t *m, const nccl_comm *c, int32_t comm, int32_t peer, const char *what) {
    if (peer < 0 || peer >= m->b.size || c->member_of[peer] < 0)
        failf(m, 0, "%s: rank %d cannot exchange with rank %d on communicator %d", what, m->b.rank,
              peer, comm);
    if (peer == m->b.rank && !m->in_group)
        failf(m, 0,
              "%s: rank %d exchanges with itself outside a group (its send and receive must be "
              "in one group)",
              what, m->b.rank);
    return c->member_of[peer];
}

static staged *group_slot(nccl_t *m) {
    grow(m, (void **)&m->grp, m->ngrp, &m->capgrp, sizeof *m->grp, 16);
    return &m->grp[m->ngrp++];
}

/* The communicator a message from rank `from` to rank `to` travels on:
 * on the world, the one of its direction; elsewhere c's own. */
static ncclComm_t p2p_comm(const nccl_t *m, int32_t comm, const nccl_comm *c, int32_t from,
                           int32_t to) {
    return comm == 0 ? m->way[to >= from ? 0 : 1] : c->comm;
}

/* Gives back the staging buffers of the launched sends that are done
 * (their stream runs in order: the first not done ends the look). */
static void reap_sent(nccl_t *m) {
    int k = 0;
    for (; k < m->nsent; k++) {
        cudaError_t q = m->api.EventQuery(m->sent[k].done);
        if (q == cudaErrorNotReady) break;
        check_cuda(m, q, m->sent[k].what);
        dev_release(m, m->sent[k].dev);
        grow(m, (void **)&m->spare, m->nspare, &m->capspare, sizeof *m->spare, 8);
        m->spare[m->nspare++] = m->sent[k].done;
    }
    memmove(m->sent, m->sent + k, (size_t)(m->nsent - k) * sizeof *m->sent);
    m->nsent -= k;
}

/* Launches an eager send of d (already on the device) to `to` on nc and
 * returns: its buffer stays taken until its event says it is done. */
static void launch_send(nccl_t *m, void *d, size_t bytes, int32_t peer, int to, ncclComm_t nc,
                        const char *desc, const char *what) {
    issued(m, m->api.Send(d, bytes, ncclUint8, to, nc, m->send_stream), desc);
    grow(m, (void **)&m->sent, m->nsent, &m->capsent, sizeof *m->sent, 16);
    in_flight *f = &m->sent[m->nsent];
    if (m->nspare)
        f->done = m->spare[--m->nspare];
    else
        check_cuda(m, m->api.EventCreateWithFlags(&f->done, cudaEventDisableTiming), what);
    check_cuda(m, m->api.EventRecord(f->done, m->send_stream), what);
    f->dev = d;
    f->bytes = bytes;
    f->peer = peer;
    proc_set_what(f->what, sizeof f->what, what);
    m->nsent++;
}

/* Every launched send done, under the watchdog: one never received is a
 * hang that names it. */
static void wait_sent(nccl_t *m) {
    if (!m->nsent) return;
    char desc[200];
    snprintf(desc, sizeof desc,
             "the end of the run, for %s (a send of %zu bytes to rank %d, %d in flight)",
             m->sent[0].what, m->sent[0].bytes, m->sent[0].peer, m->nsent);
    wait_on(m, m->send_stream, desc);
    reap_sent(m);
}

static int nccl_send(void *impl, int32_t rank, const void *buf, size_t bytes, int32_t peer,
                     int32_t comm, const char *what) {
    nccl_t *m = impl;
    (void)rank;
    nccl_comm *c = comm_of(m, comm, what);
    int to = peer_in(m, c, comm, peer, what);
    ncclComm_t nc = p2p_comm(m, comm, c, m->b.rank, peer);
    reap_sent(m);
    void *d = dev_alloc(m, bytes);
    check_cuda(m, m->api.MemcpyAsync(d, buf, bytes, cudaMemcpyHostToDevice, m->stream), what);
    char desc[160];
    snprintf(desc, sizeof desc, "%s (a send of %zu bytes to rank %d)", what ? what : "send", bytes,
             peer);
    if (!m->in_group && proc_eager(&m->b, bytes)) {
        wait_stream(m, desc); /* the copy: the caller may reuse buf */
        launch_send(m, d, bytes, peer, to, nc, desc, what);
        return 0;
    }
    ncclResult_t rc = m->api.Send(d, bytes, ncclUint8, to, nc, m->stream);
    if (m->in_group) { /* launched at group_end */
        check_nccl(m, rc, what);
        staged *g = group_slot(m);
        *g = (staged){.dev = d, .bytes = bytes, .peer = peer, .send = 1};
        proc_set_what(g->what, sizeof g->what, what);
        return 0;
    }
    issued(m, rc, desc);
    wait_stream(m, desc);
    dev_release(m, d);
    return 0;
}

/* A receive's copy out comes after the wait for it: a copy to pageable
 * host memory holds the CPU until it is done, where no watchdog runs. */
static int nccl_recv(void *impl, int32_t rank, void *buf, size_t bytes, int32_t peer, int32_t comm,
                     const char *what) {
    nccl_t *m = impl;
    (void)rank;
    nccl_comm *c = comm_of(m, comm, what);
    int from = peer_in(m, c, comm, peer, what);
    ncclComm_t nc = p2p_comm(m, comm, c, peer, m->b.rank);
    void *d = dev_alloc(m, bytes);
    ncclResult_t rc = m->api.Recv(d, bytes, ncclUint8, from, nc, m->stream);
    if (m->in_group) { /* copied out once the group has run */
        check_nccl(m, rc, what);
        staged *g = group_slot(m);
        *g = (staged){.dev = d, .host = buf, .bytes = bytes, .peer = peer, .send = 0};
        proc_set_what(g->what, sizeof g->what, what);
        return 0;
    }
    char desc[160];
    snprintf(desc, sizeof desc, "%s (a receive of %zu bytes from rank %d)", what ? what : "recv",
             bytes, peer);
    issued(m, rc, desc);
    wait_stream(m, desc);
    check_cuda(m, m->api.MemcpyAsync(buf, d, bytes, cudaMemcpyDeviceToHost, m->stream), what);
    wait_stream(m, desc);
    dev_release(m, d);
    return 0;
}

static int nccl_group_start(void *impl, int32_t rank) {
    nccl_t *m = impl;
    (void)rank;
    if (m->in_group) failf(m, 0, "group_start inside an open group");
    check_nccl(m, m->api.GroupStart(), "ncclGroupStart");
    m->in_group = 1;
    m->ngrp = 0;
    return 0;
}

static int nccl_group_end(void *impl, int32_t rank) {
    nccl_t *m = impl;
    (void)rank;
    if (!m->in_group) failf(m, 0, "group_end without group_start");
    m->in_group = 0;
    issued(m, m->api.GroupEnd(), "ncclGroupEnd");
    char desc[256];
    int n = snprintf(desc, sizeof desc, "a group of %d calls", m->ngrp);
    for (int i = 0; i < m->ngrp && i < 4 && n > 0 && (size_t)n < sizeof desc; i++)
        n += snprintf(desc + n, sizeof desc - (size_t)n, "%s%s (%s rank %d)", i ? ", " : ": ",
                      m->grp[i].what, m->grp[i].send ? "to" : "from", m->grp[i].peer);
    wait_stream(m, desc); /* then the receives' copies out (see nccl_recv) */
    for (int i = 0; i < m->ngrp; i++)
        if (!m->grp[i].send)
            check_cuda(m,
                       m->api.MemcpyAsync(m->grp[i].host, m->grp[i].dev, m->grp[i].bytes,
                                          cudaMemcpyDeviceToHost, m->stream),
                       m->grp[i].what);
    wait_stream(m, desc);
    for (int i = 0; i < m->ngrp; i++)
        dev_release(m, m->grp[i].dev);
    m->ngrp = 0;
    return 0;
}

/* Runs one allgather of `bytes` from every member of c into host `all`. */
static void gather(nccl_t *m, const nccl_comm *c, const void *mine, void *all, size_t bytes,
                   const char *what) {
    void *d = dev_alloc(m, bytes * (size_t)(c->n + 1));
    char *din = (char *)d + bytes * (size_t)c->n;
    check_cuda(m, m->api.MemcpyAsync(din, mine, bytes, cudaMemcpyHostToDevice, m->stream), what);
    issued(m, m->api.AllGather(din, d, bytes, ncclUint8, c->comm, m->stream), what);
    wait_stream(m, what);
    check_cuda(m,
               m->api.MemcpyAsync(all, d, bytes * (size_t)c->n, cudaMemcpyDeviceToHost, m->stream),
               what);
    wait_stream(m, what);
    dev_release(m, d);
}

/* proc_gather_fn over NCCL. */
static void gather_agreement(void *impl, const void *c, const int64_t *mine, int64_t *all,
                             const char *what) {
    gather(impl, c, mine, all, 3 * sizeof *mine, what);
}

/* Every member says what it calls (proc_agree). */
static void agree(nccl_t *m, const nccl_comm *c, int32_t comm, int kind, int32_t root, size_t bytes,
                  const char *what) {
    proc_agree(m, m->in_group, c, comm, c->n, kind, root, bytes, what, gather_agreement);
}

static int nccl_allreduce_f32(void *impl, int32_t rank, float *buf, size_t count, int32_t comm,
                              const char *what) {
    nccl_t *m = impl;
    (void)rank;
    what = what ? what : "ALLREDUCE";
    nccl_comm *c = comm_of(m, comm, what);
    agree(m, c, comm, PROC_ALLREDUCE, -1, count * sizeof(float), what);
    float *all = malloc((count ? count : 1) * (size_t)c->n * sizeof *all);
    if (!all) failf(m, 1, "out of memory");
    gather(m, c, buf, all, count * sizeof(float), what);
    proc_sum_in_order(buf, all, count, c->n);
    free(all);
    return 0;
}

static int nccl_broadcast(void *impl, int32_t rank, void *buf, size_t bytes, int32_t root,
                          int32_t comm, const char *what) {
    nccl_t *m = impl;
    (void)rank;
    what = what ? what : "BCAST";
    nccl_comm *c = comm_of(m, comm, what);
    if (root < 0 || root >= c->n)
        failf(m, 0, "broadcast root %d is outside communicator %d", root, comm);
    agree(m, c, comm, PROC_BCAST, root, bytes, what);
    void *d = dev_alloc(m, bytes);
    check_cuda(m, m->api.MemcpyAsync(d, buf, bytes, cudaMemcpyHostToDevice, m->stream), what);
    issued(m, m->api.Broadcast(d, d, bytes, ncclUint8, root, c->comm, m->stream), what);
    wait_stream(m, what);
    check_cuda(m, m->api.MemcpyAsync(buf, d, bytes, cudaMemcpyDeviceToHost, m->stream), what);
    wait_stream(m, what);
    dev_release(m, d);
    return 0;
}

static int nccl_allgather(void *impl, int32_t rank, const void *send, void *recv, size_t bytes,
                          int32_t comm, const char *what) {
    nccl_t *m = impl;
    (void)rank;
    what = what ? what : "ALLGATHER";
    nccl_comm *c = comm_of(m, comm, what);
    agree(m, c, comm, PROC_ALLGATHER, -1, bytes, what);
    gather(m, c, send, recv, bytes, what);
    return 0;
}

static int nccl_probe(void *impl, int32_t rank, int32_t peer, int32_t comm, int *arrived) {
    nccl_t *m = impl;
    (void)rank;
    (void)peer;
    (void)comm;
    (void)arrived;
    failf(m, 0, "NCCL has no probe: a program that polls runs on the mock or on MPI");
    return PPV_ERR_USAGE;
}

static const ppv_transport_ops nccl_ops = {
    .send = nccl_send,
    .recv = nccl_recv,
    .group_start = nccl_group_start,
    .group_end = nccl_group_end,
    .allreduce_f32 = nccl_allreduce_f32,
    .broadcast = nccl_broadcast,
    .allgather = nccl_allgather,
    .abort = proc_abort,
    .async_error = proc_async_error,
    .probe = nccl_probe,
    .fail = proc_fail,
    .progress = proc_progress,
    .yield = proc_yield,
    .set_wait = proc_set_wait,
};

/* Opens the library at env's path, else the names given; NULL with the
 * reason. */
static void *open_lib(const char *env, const char *const *names, size_t n, char *err,
                      size_t errlen) {
    const char *path = getenv(env);
    if (path && *path) {
        void *h = dlopen(path, RTLD_NOW | RTLD_GLOBAL);
        if (!h) snprintf(err, errlen, "%s=%s: %s", env, path, dlerror());
        return h;
    }
    for (size_t k = 0; k < n; k++) {
        void *h = dlopen(names[k], RTLD_NOW | RTLD_GLOBAL);
        if (h) return h;
        snprintf(err, errlen, "cannot load %s (set %s): %s", names[0], env, dlerror());
    }
    return NULL;
}

#ifndef PPV_CUDART_FALLBACK
#define PPV_CUDART_FALLBACK "libcudart.so"
#endif
#ifndef PPV_NCCL_FALLBACK
#define PPV_NCCL_FALLBACK "libnccl.so.2"
#endif

/* Binds every function; 0, or -1 with the one missing. */
static int bind(void *hn, void *hc, nccl_api *a, char *err, size_t errlen) {
#define BIND(h, field, name)                                                                       \
    do {                                                                                           \
        void *sym = dlsym(h, name);                                                                \
        if (!sym) {                                                                                \
            snprintf(err, errlen, "%s is missing from the library", name);                         \
            return -1;                                                                             \
        }                                                                                          \
        memcpy(&a->field, &sym, sizeof sym);                                                       \
    } while (0)
    BIND(hn, GetUniqueId, "ncclGetUniqueId");
    BIND(hn, CommInitRankConfig, "ncclCommInitRankConfig");
    BIND(hn, CommSplit, "ncclCommSplit");
    BIND(hn, CommGetAsyncError, "ncclCommGetAsyncError");
    BIND(hn, CommAbort, "ncclCommAbort");
    BIND(hn, CommFinalize, "ncclCommFinalize");
    BIND(hn, CommDestroy, "ncclCommDestroy");
    BIND(hn, Send, "ncclSend");
    BIND(hn, Recv, "ncclRecv");
    BIND(hn, GroupStart, "ncclGroupStart");
    BIND(hn, GroupEnd, "ncclGroupEnd");
    BIND(hn, AllGather, "ncclAllGather");
    BIND(hn, Broadcast, "ncclBroadcast");
    BIND(hn, GetErrorString, "ncclGetErrorString");
    BIND(hc, GetDeviceCount, "cudaGetDeviceCount");
    BIND(hc, SetDevice, "cudaSetDevice");
    BIND(hc, StreamCreate, "cudaStreamCreate");
    BIND(hc, StreamDestroy, "cudaStreamDestroy");
    BIND(hc, StreamQuery, "cudaStreamQuery");
    BIND(hc, Malloc, "cudaMalloc");
    BIND(hc, Free, "cudaFree");
    BIND(hc, MemcpyAsync, "cudaMemcpyAsync");
    BIND(hc, EventCreateWithFlags, "cudaEventCreateWithFlags");
    BIND(hc, EventRecord, "cudaEventRecord");
    BIND(hc, EventQuery, "cudaEventQuery");
    BIND(hc, EventDestroy, "cudaEventDestroy");
    BIND(hc, GetErrorStringCuda, "cudaGetErrorString");
#undef BIND
    return 0;
}

/* ppv launch's bootstrap: rank 0 writes its id to DIR/nccl-id (a
 * temporary name, then renamed, so no rank reads half of it); the others
 * wait for it, at most 60 s. 0, or -1 with the reason. */
static int share_id(const char *dir, int32_t rank, ncclUniqueId *id, char *err, size_t errlen) {
    char path[4200], tmp[4220];
    snprintf(path, sizeof path, "%s/nccl-id", dir);
    if (rank == 0) {
        snprintf(tmp, sizeof tmp, "%s.tmp", path);
        FILE *f = fopen(tmp, "wb");
        if (!f || fwrite(id, sizeof *id, 1, f) != 1 || fclose(f) != 0 || rename(tmp, path) != 0) {
            snprintf(err, errlen, "cannot write the NCCL id to %s", path);
            return -1;
        }
        return 0;
    }
    double t0 = proc_now();
    int spins = 0;
    for (;;) {
        FILE *f = fopen(path, "rb");
        if (f) {
            size_t got = fread(id, sizeof *id, 1, f);
            fclose(f);
            if (got == 1) return 0;
        }
        if (proc_now() - t0 > 60) {
            snprintf(err, errlen, "rank 0's NCCL id did not appear in %s within 60 s", path);
            return -1;
        }
        proc_backoff(&spins, 1); /* past the spinning: sleep between looks */
    }
}

/* This process's rank among those on its machine. */
static int local_rank(void) {
    MPI_Comm node;
    int r = 0;
    if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node) ==
        MPI_SUCCESS) {
        MPI_Comm_rank(node, &r);
        MPI_Comm_free(&node);
    }
    return r;
}

/* Adds communicator ncomms: c (NULL where this rank is not in it) and its
 * members (proc_members). 0, or -1 out of memory. */
static int push_comm(nccl_t *m, ncclComm_t c, int32_t *member_of, int32_t n) {
    nccl_comm *cs = realloc(m->comms, (size_t)(m->ncomms + 1) * sizeof *cs);
    if (!cs) return -1;
    m->comms = cs;
    cs[m->ncomms++] = (nccl_comm){c, n, member_of};
    return 0;
}

/* A communicator split from the world, every rank calling (non-blocking,
 * polled until ready under the timeout): *out, NULL where color is
 * NCCL_SPLIT_NOCOLOR. 0, or -1 with the reason. */
static int split_world(nccl_t *m, int color, int key, ncclComm_t *out, char *err, size_t errlen) {
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclComm_t c = NULL;
    ncclResult_t nr = m->api.CommSplit(m->comm, color, key, &c, &config);
    double t0 = proc_now();
    int spins = 0;
    while (nr == ncclInProgress && c) {
        if (m->api.CommGetAsyncError(c, &nr) != ncclSuccess) nr = ncclInternalError;
        if (nr == ncclInProgress && proc_now() - t0 > m->b.cfg.timeout_s) {
            snprintf(err, errlen, "ncclCommSplit has not finished in %g s", m->b.cfg.timeout_s);
            return -1;
        }
        proc_backoff(&spins, proc_now() - t0);
    }
    if (nr != ncclSuccess && nr != ncclInProgress) {
        snprintf(err, errlen, "ncclCommSplit: %s", m->api.GetErrorString(nr));
        return -1;
    }
    *out = c;
    return 0;
}

static void *nccl_start(int32_t *rank, int32_t *size, char *err, size_t errlen) {
    static const char *const cudart[] = {PPV_CUDART_FALLBACK, "libcudart.so"};
    static const char *const nccl[] = {"libnccl.so.2", PPV_NCCL_FALLBACK};
    void *hc = open_lib("PPV_CUDART_LIBRARY", cudart, 2, err, errlen);
    if (!hc) return NULL;
    void *hn = open_lib("PPV_NCCL_LIBRARY", nccl, 2, err, errlen);
    if (!hn) return NULL;
    nccl_t *m = calloc(1, sizeof *m);
    if (!m) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    if (bind(hn, hc, &m->api, err, errlen) < 0) {
        free(m);
        return NULL;
    }
    int r = 0, n = 0, ndev = 0;
    const char *lsize = getenv("PPV_LAUNCH_SIZE"), *ldir = getenv("PPV_LAUNCH_DIR");
    if (lsize && *lsize && ldir && *ldir) { /* ppv launch: the rank and size it gave */
        m->launched = 1;
        n = atoi(lsize);
        r = atoi(getenv("PPV_LAUNCH_RANK") ? getenv("PPV_LAUNCH_RANK") : "-1");
        if (n < 1 || r < 0 || r >= n) {
            snprintf(err, errlen, "PPV_LAUNCH_RANK %d of PPV_LAUNCH_SIZE %d: not a rank", r, n);
            free(m);
            return NULL;
        }
    } else {
        int inited = 0;
        MPI_Initialized(&inited);
        if (!inited) {
            if (MPI_Init(NULL, NULL) != MPI_SUCCESS) {
                snprintf(err, errlen,
                         "MPI_Init failed (the NCCL transport starts under mpirun "
                         "or ppv launch)");
                free(m);
                return NULL;
            }
            m->mpi_inited = 1;
        }
        MPI_Comm_rank(MPI_COMM_WORLD, &r);
        MPI_Comm_size(MPI_COMM_WORLD, &n);
    }
    m->b.rank = *rank = r;
    m->b.size = *size = n;
    m->b.cfg.timeout_s = 60;
    m->b.end_job = nccl_end_job;
    cudaError_t ce = m->api.GetDeviceCount(&ndev);
    if (ce != cudaSuccess || ndev < 1) {
        snprintf(err, errlen, "no GPU here (%s)",
                 ce != cudaSuccess ? m->api.GetErrorStringCuda(ce) : "0 devices");
        goto fail;
    }
    m->device = (m->launched ? r : local_rank()) % ndev; /* ppv launch: one machine */
    if ((ce = m->api.SetDevice(m->device)) != cudaSuccess ||
        (ce = m->api.StreamCreate(&m->stream)) != cudaSuccess) {
        snprintf(err, errlen, "GPU %d: %s", m->device, m->api.GetErrorStringCuda(ce));
        goto fail;
    }
    /* rank 0's id to every rank, then a non-blocking communicator */
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (r == 0 && m->api.GetUniqueId(&id) != ncclSuccess) memset(&id, 0xff, sizeof id);
    if (!m->launched)
        MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    else if (share_id(ldir, r, &id, err, errlen) < 0)
        goto fail;
    ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
    config.blocking = 0;
    ncclResult_t nr = m->api.CommInitRankConfig(&m->comm, n, id, r, &config);
    double t0 = proc_now();
    int spins = 0;
    while (nr == ncclInProgress) {
        if (m->api.CommGetAsyncError(m->comm, &nr) != ncclSuccess) nr = ncclInternalError;
        if (nr == ncclInProgress && proc_now() - t0 > 60) {
            snprintf(err, errlen, "ncclCommInitRankConfig has not finished in 60 s");
            m->api.CommAbort(m->comm);
            m->comm = NULL;
            goto fail;
        }
        proc_backoff(&spins, proc_now() - t0);
    }
    if (nr != ncclSuccess) {
        snprintf(err, errlen, "ncclCommInitRankConfig: %s", m->api.GetErrorString(nr));
        goto fail;
    }
    int32_t *all, me;
    if (proc_members(&m->b, NULL, n, &all, &me, err, errlen) < 0) goto fail;
    if (push_comm(m, m->comm, all, n) < 0) {
        free(all);
        snprintf(err, errlen, "out of memory");
        goto fail;
    }
    if (split_world(m, 0, r, &m->way[0], err, errlen) < 0 ||
        split_world(m, 0, r, &m->way[1], err, errlen) < 0)
        goto fail;
    if ((ce = m->api.StreamCreate(&m->send_stream)) != cudaSuccess) {
        snprintf(err, errlen, "GPU %d: %s", m->device, m->api.GetErrorStringCuda(ce));
        goto fail;
    }
    m->b.last_done = proc_now();
    return m;
fail:
    if (m->mpi_inited) MPI_Finalize();
    free(m);
    return NULL;
}

/* Every rank, the same list: split from the world. The new
 * communicator's id, or -1 with the reason. */
static int32_t nccl_add_comm(void *impl, const int32_t *ranks, int32_t n, char *err,
                             size_t errlen) {
    nccl_t *m = impl;
    int32_t *member_of, me;
    if (proc_members(&m->b, ranks, n, &member_of, &me, err, errlen) < 0) return -1;
    ncclComm_t c = NULL;
    if (split_world(m, me >= 0 ? 1 : NCCL_SPLIT_NOCOLOR, me, &c, err, errlen) < 0) {
        free(member_of);
        return -1;
    }
    if (push_comm(m, me >= 0 ? c : NULL, member_of, n) < 0) {
        snprintf(err, errlen, "out of memory");
        free(member_of);
        return -1;
    }
    return m->ncomms - 1;
}

/* Everything put on the stream done, then every rank there: an
 * agreement, so a rank still in a collective is reported. */
static int nccl_settle(void *impl) {
    nccl_t *m = impl;
    wait_sent(m);
    wait_stream(m, "the end of the run");
    agree(m, &m->comms[0], 0, PROC_END, -1, 0, "the end of the run");
    return 0;
}

static void nccl_end(void *impl) {
    nccl_t *m = impl;
    if (!m) return;
    for (int32_t k = m->ncomms - 1; k >= 1; k--) {
        if (m->comms[k].comm) m->api.CommDestroy(m->comms[k].comm);
        free(m->comms[k].member_of);
    }
    if (m->ncomms) free(m->comms[0].member_of);
    free(m->comms);
    for (int w = 0; w < 2; w++)
        if (m->way[w]) m->api.CommDestroy(m->way[w]);
    if (m->comm) {
        /* a clean end: finalize polls until the communicator is flushed */
        ncclResult_t nr = m->api.CommFinalize(m->comm);
        double t0 = proc_now();
        int spins = 0;
        while (nr == ncclInProgress && proc_now() - t0 < m->b.cfg.timeout_s) {
            if (m->api.CommGetAsyncError(m->comm, &nr) != ncclSuccess) break;
            proc_backoff(&spins, proc_now() - t0);
        }
        if (nr == ncclSuccess)
            m->api.CommDestroy(m->comm);
        else
            m->api.CommAbort(m->comm);
    }
    for (int i = 0; i < m->npool; i++)
        m->api.Free(m->pool[i].ptr);
    free(m->pool);
    for (int k = 0; k < m->nsent; k++)
        m->api.EventDestroy(m->sent[k].done);
    for (int k = 0; k < m->nspare; k++)
        m->api.EventDestroy(m->spare[k]);
    free(m->sent);
    free(m->spare);
    if (m->send_stream) m->api.StreamDestroy(m->send_stream);
    if (m->stream) m->api.StreamDestroy(m->stream);
    if (m->mpi_inited) MPI_Finalize();
    free(m->grp);
    free(m);
}

static const ppv_proc_module module = {
    .start = nccl_start,
    .configure = proc_configure,
    .add_comm = nccl_add_comm,
    .settle = nccl_settle,
    .end = nccl_end,
    .ops = &nccl_ops,
};

const ppv_proc_module *ppv_proc_module_v1(void);
const ppv_proc_module *ppv_proc_module_v1(void) {
    return &module;
}
