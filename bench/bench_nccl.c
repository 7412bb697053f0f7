/* bench_nccl.c - the NCCL transport's cost against raw NCCL calls of the
 * same sizes:
 *
 *   ppv launch -n 1 -- ppv_bench_nccl [ROUNDS]   one GPU
 *   mpirun -np 2 ppv_bench_nccl [ROUNDS]         two GPUs or more (one each)
 *
 * With one process (NCCL gives a GPU to one rank only) rank 0 exchanges
 * with itself: a send and a receive in one group, NCCL's way of moving a
 * rank's data to itself. With two or more, ranks 0 and 1 ping-pong, each
 * call on its own. Both sides start from the same pageable host buffers and
 * do the same work: a copy in, ncclSend, ncclRecv, a copy out, on one
 * stream, then a wait for the stream. The raw side calls libnccl and
 * libcudart directly (the very libraries the transport opened) on a
 * communicator of its own, non-blocking as the transport's is (NCCL's
 * abort needs it), waiting the way such a program must: polling
 * ncclCommGetAsyncError while a call is in progress and cudaStreamQuery
 * until the stream is idle, without sleeping. The transport side is its
 * send, recv, group_start and group_end as a run calls them (staging pool,
 * watchdog and all). A blocking communicator's raw figure is printed
 * beside them where the library allows one. Best of 5 batches of ROUNDS
 * exchanges, alternated 3 times so both sides see the same machine; every
 * exchange's bytes are checked once per size. A benchmark reports
 * figures; it never fails on them (exit 2 only when it cannot run).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mpi.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "ppv_engine.h"

typedef struct raw_api {
    ncclResult_t (*GetUniqueId)(ncclUniqueId *);
    ncclResult_t (*CommInitRankConfig)(ncclComm_t *, int, ncclUniqueId, int, ncclConfig_t *);
    ncclResult_t (*CommGetAsyncError)(ncclComm_t, ncclResult_t *);
    ncclResult_t (*CommDestroy)(ncclComm_t);
    ncclResult_t (*Send)(const void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*Recv)(void *, size_t, ncclDataType_t, int, ncclComm_t, cudaStream_t);
    ncclResult_t (*GroupStart)(void);
    ncclResult_t (*GroupEnd)(void);
    const char *(*GetErrorString)(ncclResult_t);
    cudaError_t (*StreamCreate)(cudaStream_t *);
    cudaError_t (*StreamQuery)(cudaStream_t);
    cudaError_t (*Malloc)(void **, size_t);
    cudaError_t (*MemcpyAsync)(void *, const void *, size_t, enum cudaMemcpyKind, cudaStream_t);
} raw_api;

static raw_api api;
static int me, nranks;

static void die(const char *what) {
    fprintf(stderr, "ppv_bench_nccl: %s\n", what);
    if (nranks > 1) MPI_Abort(MPI_COMM_WORLD, 2);
    exit(2);
}

/* The functions of the libraries the transport loaded (RTLD_GLOBAL). */
static void bind_raw(void) {
#define BIND(field, name)                                                                          \
    do {                                                                                           \
        void *sym = dlsym(RTLD_DEFAULT, name);                                                     \
        if (!sym) die(name " is not loaded");                                                      \
        memcpy(&api.field, &sym, sizeof sym);                                                      \
    } while (0)
    BIND(GetUniqueId, "ncclGetUniqueId");
    BIND(CommInitRankConfig, "ncclCommInitRankConfig");
    BIND(CommGetAsyncError, "ncclCommGetAsyncError");
    BIND(CommDestroy, "ncclCommDestroy");
    BIND(Send, "ncclSend");
    BIND(Recv, "ncclRecv");
    BIND(GroupStart, "ncclGroupStart");
    BIND(GroupEnd, "ncclGroupEnd");
    BIND(GetErrorString, "ncclGetErrorString");
    BIND(StreamCreate, "cudaStreamCreate");
    BIND(StreamQuery, "cudaStreamQuery");
    BIND(Malloc, "cudaMalloc");
    BIND(MemcpyAsync, "cudaMemcpyAsync");
#undef BIND
}

/* rc, and if it is ncclInProgress the communicator polled until it is not. */
static void settle(ncclComm_t c, ncclResult_t rc) {
    while (rc == ncclInProgress)
        if (api.CommGetAsyncError(c, &rc) != ncclSuccess) rc = ncclInternalError;
    if (rc != ncclSuccess) die(api.GetErrorString(rc));
}

static void wait_idle(cudaStream_t s) {
    cudaError_t q;
    while ((q = api.StreamQuery(s)) == cudaErrorNotReady)
        ;
    if (q != cudaSuccess) die("cudaStreamQuery failed");
}

/* A raw communicator of every rank (rank 0's id through MPI when there
 * are several); NULL where the library refuses this kind. */
static ncclComm_t raw_comm(int blocking) {
    ncclUniqueId id;
    memset(&id, 0, sizeof id);
    if (me == 0 && api.GetUniqueId(&id) != ncclSuccess) die("ncclGetUniqueId failed");
    if (nranks > 1) MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, MPI_COMM_WORLD);
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.blocking = blocking;
    ncclComm_t c = NULL;
    ncclResult_t rc = api.CommInitRankConfig(&c, nranks, id, me, &cfg);
    while (rc == ncclInProgress && c)
        if (api.CommGetAsyncError(c, &rc) != ncclSuccess) rc = ncclInternalError;
    return rc == ncclSuccess ? c : NULL;
}

typedef struct side {
    ppv_transport *t; /* the transport, or NULL: raw on c */
    ncclComm_t c;
    cudaStream_t s;
    void *dsend, *drecv; /* the raw side's device buffers */
} side;

static void raw_send(side *x, const char *h, size_t bytes, int peer) {
    if (api.MemcpyAsync(x->dsend, h, bytes, cudaMemcpyHostToDevice, x->s) != cudaSuccess)
        die("cudaMemcpyAsync failed");
    settle(x->c, api.Send(x->dsend, bytes, ncclUint8, peer, x->c, x->s));
    wait_idle(x->s);
}

static void raw_recv(side *x, char *h, size_t bytes, int peer) {
    settle(x->c, api.Recv(x->drecv, bytes, ncclUint8, peer, x->c, x->s));
    if (api.MemcpyAsync(h, x->drecv, bytes, cudaMemcpyDeviceToHost, x->s) != cudaSuccess)
        die("cudaMemcpyAsync failed");
    wait_idle(x->s);
}

/* One exchange: rank 0 with itself (one process), or a round trip
 * between ranks 0 and 1. */
static void exchange(side *x, const char *out, char *in, size_t bytes) {
    ppv_transport *t = x->t;
    if (nranks == 1 && t) {
        t->ops->group_start(t->impl, 0);
        t->ops->send(t->impl, 0, out, bytes, 0, 0, "SELF_SEND");
        t->ops->recv(t->impl, 0, in, bytes, 0, 0, "SELF_RECV");
        t->ops->group_end(t->impl, 0);
    } else if (nranks == 1) {
        api.GroupStart();
        if (api.MemcpyAsync(x->dsend, out, bytes, cudaMemcpyHostToDevice, x->s) != cudaSuccess)
            die("cudaMemcpyAsync failed");
        api.Send(x->dsend, bytes, ncclUint8, 0, x->c, x->s);
        api.Recv(x->drecv, bytes, ncclUint8, 0, x->c, x->s);
        settle(x->c, api.GroupEnd());
        if (api.MemcpyAsync(in, x->drecv, bytes, cudaMemcpyDeviceToHost, x->s) != cudaSuccess)
            die("cudaMemcpyAsync failed");
        wait_idle(x->s);
    } else if (me == 0 && t) {
        t->ops->send(t->impl, 0, out, bytes, 1, 0, "PING");
        t->ops->recv(t->impl, 0, in, bytes, 1, 0, "PONG");
    } else if (me == 1 && t) {
        t->ops->recv(t->impl, 1, in, bytes, 0, 0, "PING");
        t->ops->send(t->impl, 1, in, bytes, 0, 0, "PONG");
    } else if (me == 0) {
        raw_send(x, out, bytes, 1);
        raw_recv(x, in, bytes, 1);
    } else if (me == 1) {
        raw_recv(x, in, bytes, 0);
        raw_send(x, in, bytes, 0);
    }
}

/* Seconds per exchange, best of 5 batches; -1 when x cannot run. The
 * first exchange's bytes are checked (rank 0 gets back what it sent). */
static double timed(side *x, const char *out, char *in, size_t bytes, int rounds) {
    int usable = x->t || x->c;
    if (nranks > 1) MPI_Allreduce(MPI_IN_PLACE, &usable, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    if (!usable) return -1;
    memset(in, 0, bytes);
    exchange(x, out, in, bytes);
    if (me == 0 && memcmp(in, out, bytes) != 0) die("an exchange brought back other bytes");
    double best = 1e30;
    for (int b = 0; b < 5; b++) {
        if (nranks > 1) MPI_Barrier(MPI_COMM_WORLD);
        double t0 = bench_now();
        for (int i = 0; i < rounds; i++)
            exchange(x, out, in, bytes);
        double dt = (bench_now() - t0) / rounds;
        best = dt < best ? dt : best;
    }
    return best;
}

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 200;
    if (rounds < 1) die("ROUNDS is a positive count");
    char err[512];
    ppv_proc *p = NULL;
    if (ppv_proc_start("nccl", &p, err, sizeof err) < 0) die(err);
    me = ppv_proc_rank(p);
    nranks = ppv_proc_size(p);
    int mpi = 0;
    MPI_Initialized(&mpi);
    if (nranks > 1 && !mpi) die("with two ranks or more, run it under mpirun (one GPU each)");
    bind_raw();
    ppv_proc_config cfg;
    memset(&cfg, 0, sizeof cfg);
    ppv_semantics_parse("rendezvous", &cfg.sem);
    cfg.timeout_s = 600;
    ppv_transport t;
    if (ppv_proc_configure(p, &cfg, &t, err, sizeof err) < 0) die(err);

    enum { MAXB = 1 << 24 };
    static const size_t sizes[] = {1 << 10, 1 << 14, 1 << 16, 1 << 18, 1 << 20, 1 << 22, MAXB};
    char *out = malloc(MAXB), *in = malloc(MAXB);
    if (!out || !in) die("out of memory");
    for (size_t i = 0; i < MAXB; i++)
        out[i] = (char)(i * 2654435761u >> 24);
    side ppv = {.t = &t}, nb = {0}, bl = {0};
    nb.c = raw_comm(0);
    if (!nb.c) die("the raw non-blocking communicator could not be made");
    bl.c = raw_comm(1);
    side *raws[2] = {&nb, &bl};
    for (int k = 0; k < 2; k++) {
        side *x = raws[k];
        if (!x->c) continue;
        if (api.StreamCreate(&x->s) != cudaSuccess || api.Malloc(&x->dsend, MAXB) != cudaSuccess ||
            api.Malloc(&x->drecv, MAXB) != cudaSuccess)
            die("cannot set up the raw side's stream and buffers");
    }
    if (me == 0)
        printf("%s, us per exchange (best of 5 x %d; 1 MiB and up: %d)\n%9s %10s %10s %8s %12s\n",
               nranks == 1 ? "one rank, a send to itself and its receive in one group"
                           : "ping-pong, rank 0 <-> 1",
               rounds, rounds / 4 + 1, "bytes", "raw", "ppv", "over", "raw blocking");
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t bytes = sizes[k];
        int r = bytes >= (1 << 20) ? rounds / 4 + 1 : rounds;
        double raw = 1e30, mine = 1e30, blocking = 1e30;
        for (int rep = 0; rep < 3; rep++) { /* alternated: the machine drifts */
            double a = timed(&nb, out, in, bytes, r);
            double b = timed(&ppv, out, in, bytes, r);
            double c = timed(&bl, out, in, bytes, r);
            raw = a < raw ? a : raw;
            mine = b < mine ? b : mine;
            blocking = c < blocking ? c : blocking;
        }
        if (me == 0) {
            printf("%9zu %10.1f %10.1f %+7.1f%% ", bytes, raw * 1e6, mine * 1e6,
                   (mine / raw - 1) * 100);
            if (blocking < 0)
                printf("%12s\n", "refused");
            else
                printf("%12.1f\n", blocking * 1e6);
        }
    }
    for (int k = 0; k < 2; k++)
        if (raws[k]->c) api.CommDestroy(raws[k]->c);
    free(out);
    free(in);
    ppv_proc_settle(p);
    ppv_proc_end(p);
    return 0;
}
