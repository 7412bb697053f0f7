/* fake_nccl.c - a stand-in for the parts of libnccl and libcudart that the
 * NCCL transport (engine/world/transport/nccl.c) calls, with the same
 * signatures, over MPI between the processes of an mpirun job, so that
 * the transport's own logic (bootstrap, group nesting, the watchdog,
 * abort, asynchronous errors, message matching, staging) is tested on
 * machines without a GPU. The tests point $PPV_NCCL_LIBRARY and
 * $PPV_CUDART_LIBRARY at this library.
 *
 * A stream is a queue run in order, as a GPU runs it: a copy (or an
 * event's mark) runs when everything before it is done; a communication
 * starts when everything before it is done, or when it and everything
 * unfinished before it are of one group (ncclGroupStart..End: launched
 * together). One communicator's communications run one at a time in the
 * order they were issued, whatever their streams (the worst case of
 * NCCL's ordering: a later call on a communicator waits for an earlier
 * one that waits for its peer), unless they are of one group. Asking any
 * stream or event advances every stream. A send is
 * synchronous (MPI_Issend: NCCL may wait for the receive, and the test
 * takes the worst case) unless $PPV_FAKE_NCCL_EAGER_BYTES buffers those
 * up to that size, as NCCL's FIFO does. Device memory is host memory.
 *
 * Switches ($PPV_FAKE_NCCL_RANK limits them to one rank):
 *   PPV_FAKE_NCCL_HANG_AT=K   the K-th communication never starts
 *   PPV_FAKE_NCCL_UNISSUED_AT=K  the K-th communication is never put on
 *                             its stream (its communicator stays in progress)
 *   PPV_FAKE_NCCL_FAIL_AT=K   after the K-th, ncclCommGetAsyncError says
 *                             ncclRemoteError (a peer went away)
 *   PPV_FAKE_NCCL_STATS=FILE  at the process's end, appends "rank R: N
 *                             cudaMalloc" (the transport's staging pool
 *                             must not grow with the run)
 * A call outside a group, and a group's end, return ncclInProgress and
 * put their operations on the streams only at the next
 * ncclCommGetAsyncError, as a non-blocking communicator may (NCCL issues
 * them from a thread of its own): a copy queued before that runs first.
 * ncclCommInitRankConfig checks that every rank got the same unique id and
 * that the communicator is non-blocking (config.blocking = 0, which the
 * transport's watchdog needs to abort it), and answers ncclInProgress
 * once, so the transport's polling of its start is exercised;
 * ncclCommAbort says on stderr that it was called.
 */
#include <mpi.h>
#include <nccl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { OP_COPY, OP_MARK, OP_SEND, OP_RECV, OP_ALLGATHER, OP_BCAST };
enum { TAG = 11 };

typedef struct op {
    int kind, group; /* group: 0, or the launch it belongs to */
    cudaStream_t stream;
    struct ncclComm *comm;
    int started, done, hang, unissued;
    long seq; /* a communication's place in the order its communicator issued them */
    struct CUevent_st *event; /* OP_MARK: the event it completes */
    void *dst;
    const void *src;
    void *copy; /* a buffered send's data */
    size_t bytes;
    int peer, root;
    MPI_Request req;
    struct op *next;
} op;

struct CUstream_st {
    op *head, *tail;
};

/* An event: done once the mark that its last cudaEventRecord put on a
 * stream has run (never recorded: done). */
struct CUevent_st {
    int done;
    op *mark;
};

struct ncclComm {
    MPI_Comm comm;
    int rank, size, blocking, init_polls, aborted;
    int alone; /* one of ppv launch's worlds of one, in a job of more: carries nothing */
    ncclResult_t async;
};

static int in_group, group_id, ops_issued;
static struct ncclComm *last_comm;
static op *grouped, *grouped_tail; /* issued in the open group: launched at its end */
/* Launched but not yet on their streams: a non-blocking communicator's
 * call returns ncclInProgress and NCCL's own thread puts its kernels on
 * the stream later; here, at the next ncclCommGetAsyncError. */
static op *pending, *pending_tail;
static cudaStream_t *streams; /* every stream made, so that any query advances them all */
static int nstreams;

/* Under ppv launch there is no mpirun: each process is an MPI world of
 * its own (a singleton), which carries one rank's calls. */
static void ensure_mpi(void) {
    int inited = 0;
    MPI_Initialized(&inited);
    if (inited) return;
    MPI_Init(NULL, NULL);
    atexit((void (*)(void))MPI_Finalize);
}

/* $PPV_FAKE_NCCL_ID_LOG: each id made and taken, a line each, so a test
 * can see that every rank took rank 0's. */
static void log_id(const char *what, int rank, const ncclUniqueId *id) {
    const char *path = getenv("PPV_FAKE_NCCL_ID_LOG");
    if (!path || !*path) return;
    FILE *f = fopen(path, "a");
    if (!f) return;
    fprintf(f, "%s %d %.*s\n", what, rank, (int)sizeof id->internal, id->internal);
    fclose(f);
}

static long env_long(const char *name, long dflt) {
    const char *v = getenv(name);
    return v && *v ? strtol(v, NULL, 10) : dflt;
}

static int switch_here(void) {
    long r = env_long("PPV_FAKE_NCCL_RANK", -1);
    int me = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    return r < 0 || r == me;
}

/* ---- cudart ------------------------------------------------------------------------ */

cudaError_t cudaGetDeviceCount(int *n) {
    ensure_mpi();
    *n = (int)env_long("PPV_FAKE_CUDA_DEVICES", 1);
    return cudaSuccess;
}

cudaError_t cudaSetDevice(int d) {
    return d >= 0 && d < env_long("PPV_FAKE_CUDA_DEVICES", 1) ? cudaSuccess
                                                              : cudaErrorInvalidDevice;
}

cudaError_t cudaStreamCreate(cudaStream_t *s) {
    cudaStream_t *all = realloc(streams, (size_t)(nstreams + 1) * sizeof *all);
    if (!all) return cudaErrorMemoryAllocation;
    streams = all;
    *s = calloc(1, sizeof **s);
    if (!*s) return cudaErrorMemoryAllocation;
    streams[nstreams++] = *s;
    return cudaSuccess;
}

static long mallocs;
static int stats_rank;

/* PPV_FAKE_NCCL_STATS: the count of cudaMalloc calls, at exit. */
static void write_stats(void) {
    const char *path = getenv("PPV_FAKE_NCCL_STATS");
    FILE *f = path && *path ? fopen(path, "a") : NULL;
    if (!f) return;
    fprintf(f, "rank %d: %ld cudaMalloc\n", stats_rank, mallocs);
    fclose(f);
}

cudaError_t cudaMalloc(void **p, size_t n) {
    if (mallocs++ == 0) {
        MPI_Comm_rank(MPI_COMM_WORLD, &stats_rank);
        atexit(write_stats);
    }
    *p = malloc(n ? n : 1);
    return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}

cudaError_t cudaFree(void *p) {
    free(p);
    return cudaSuccess;
}

const char *cudaGetErrorString(cudaError_t e) {
    return e == cudaSuccess         ? "no error"
           : e == cudaErrorNotReady ? "not ready"
                                    : "a fake CUDA error";
}

/* o at the end of the list head..tail. */
static void append(op **head, op **tail, op *o) {
    o->next = NULL;
    if (*tail)
        (*tail)->next = o;
    else
        *head = o;
    *tail = o;
}

static void push(cudaStream_t s, op *o) {
    append(&s->head, &s->tail, o);
}

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind k,
                            cudaStream_t s) {
    (void)k;
    op *o = calloc(1, sizeof *o);
    if (!o) return cudaErrorMemoryAllocation;
    o->kind = OP_COPY;
    o->dst = dst;
    o->src = src;
    o->bytes = n;
    push(s, o);
    return cudaSuccess;
}

static void start(struct ncclComm *c, op *o) {
    o->started = 1;
    if (o->hang) return; /* never posted: it cannot complete */
    long eager = env_long("PPV_FAKE_NCCL_EAGER_BYTES", 0);
    switch (o->kind) {
    case OP_SEND:
        if ((long)o->bytes <= eager) {
            o->copy = malloc(o->bytes ? o->bytes : 1);
            memcpy(o->copy, o->src, o->bytes);
            MPI_Isend(o->copy, (int)o->bytes, MPI_BYTE, o->peer, TAG, c->comm, &o->req);
        } else
            MPI_Issend(o->src, (int)o->bytes, MPI_BYTE, o->peer, TAG, c->comm, &o->req);
        break;
    case OP_RECV:
        MPI_Irecv(o->dst, (int)o->bytes, MPI_BYTE, o->peer, TAG, c->comm, &o->req);
        break;
    case OP_ALLGATHER:
        MPI_Iallgather(o->src, (int)o->bytes, MPI_BYTE, o->dst, (int)o->bytes, MPI_BYTE, c->comm,
                       &o->req);
        break;
    case OP_BCAST:
        if (o->dst != o->src && c->rank == o->root) memcpy(o->dst, o->src, o->bytes);
        MPI_Ibcast(o->dst, (int)o->bytes, MPI_BYTE, o->root, c->comm, &o->req);
        break;
    }
}

/* Whether an unfinished communication of o's communicator, issued before
 * o and not of its group, is still on a stream or waiting to get there:
 * then o waits for it. */
static int comm_busy_before(const op *o) {
    for (int k = 0; k <= nstreams; k++)
        for (const op *p = k < nstreams ? streams[k]->head : pending; p; p = p->next)
            if (p != o && p->comm == o->comm && !p->done && p->seq < o->seq &&
                !(o->group && p->group == o->group))
                return 1;
    return 0;
}

/* Runs what can run on s; 1 when all is done. An op may start when every
 * unfinished op before it is a communication of its own group (launched
 * together); a copy or a mark only when nothing before it is unfinished;
 * a communication only when its communicator is done with the ones issued
 * before it. */
static int advance(cudaStream_t s) {
    int blocked = 0, gate = 0; /* gate: the group unfinished ops so far all belong to, or 0 */
    for (op *o = s->head; o; o = o->next) {
        if (o->done) continue;
        int local = o->kind == OP_COPY || o->kind == OP_MARK;
        int may = !blocked || (!local && o->group && o->group == gate);
        if (may && !o->started) {
            if (local) {
                if (o->kind == OP_COPY) memcpy(o->dst, o->src, o->bytes);
                if (o->event && o->event->mark == o) {
                    o->event->done = 1;
                    o->event->mark = NULL;
                }
                o->started = o->done = 1;
                continue;
            }
            if (!comm_busy_before(o)) start(o->comm, o);
        }
        if (o->started && !o->hang) {
            int flag = 0;
            MPI_Test(&o->req, &flag, MPI_STATUS_IGNORE);
            o->done = flag;
        }
        if (o->done) continue;
        if (!blocked)
            gate = !local ? o->group : 0;
        else if (o->group != gate)
            gate = 0;
        blocked = 1;
    }
    while (s->head && s->head->done) { /* retire the finished front */
        op *o = s->head;
        s->head = o->next;
        free(o->copy);
        free(o);
    }
    if (!s->head) s->tail = NULL;
    return s->head == NULL;
}

/* Every stream as far as it can go (one stream's progress can free
 * another's communication); then whether s is done. */
static int advance_all(cudaStream_t s) {
    for (int round = 0; round <= nstreams; round++)
        for (int k = 0; k < nstreams; k++)
            advance(streams[k]);
    return advance(s);
}

cudaError_t cudaStreamQuery(cudaStream_t s) {
    if (last_comm && last_comm->aborted) return cudaErrorLaunchFailure;
    return advance_all(s) ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaStreamDestroy(cudaStream_t s) {
    while (s->head) {
        op *o = s->head;
        s->head = o->next;
        if (o->event && o->event->mark == o) o->event->mark = NULL;
        free(o->copy);
        free(o);
    }
    for (int k = 0; k < nstreams; k++)
        if (streams[k] == s) streams[k] = streams[--nstreams];
    free(s);
    return cudaSuccess;
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *e, unsigned int flags) {
    (void)flags;
    *e = calloc(1, sizeof **e);
    if (!*e) return cudaErrorMemoryAllocation;
    (*e)->done = 1;
    return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s) {
    op *o = calloc(1, sizeof *o);
    if (!o) return cudaErrorMemoryAllocation;
    o->kind = OP_MARK;
    o->event = e;
    e->done = 0;
    e->mark = o;
    push(s, o);
    return cudaSuccess;
}

cudaError_t cudaEventQuery(cudaEvent_t e) {
    if (last_comm && last_comm->aborted) return cudaErrorLaunchFailure;
    if (nstreams) advance_all(streams[0]);
    return e->done ? cudaSuccess : cudaErrorNotReady;
}

cudaError_t cudaEventDestroy(cudaEvent_t e) {
    for (int k = 0; k < nstreams; k++) /* marks still queued complete nothing */
        for (op *o = streams[k]->head; o; o = o->next)
            if (o->event == e) o->event = NULL;
    free(e);
    return cudaSuccess;
}

/* ---- nccl -------------------------------------------------------------------------- */

const char *ncclGetErrorString(ncclResult_t r) {
    switch (r) {
    case ncclSuccess:
        return "no error";
    case ncclRemoteError:
        return "remote process exited or there was a network error (fake)";
    case ncclInvalidUsage:
        return "invalid usage (fake)";
    case ncclInProgress:
        return "operation in progress";
    default:
        return "a fake NCCL error";
    }
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
    memset(id, 0, sizeof *id);
    snprintf(id->internal, sizeof id->internal, "fake-nccl-%ld-%ld", (long)getpid(),
             (long)time(NULL));
    log_id("made", 0, id);
    return ncclSuccess;
}

ncclResult_t ncclCommInitRankConfig(ncclComm_t *out, int nranks, ncclUniqueId id, int rank,
                                    ncclConfig_t *config) {
    log_id("took", rank, &id);
    int me = 0, n = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    /* under ppv launch each process is a world of one: beyond one rank the
     * communicator is made (so the bootstrap can be seen) but carries
     * nothing (issue refuses every call) */
    int alone = n == 1 && nranks > 1 && getenv("PPV_LAUNCH_SIZE");
    if (!alone && (nranks != n || rank != me)) return ncclInvalidArgument;
    /* every rank must hold rank 0's id: the bootstrap's whole job */
    char *all = malloc((size_t)n * sizeof id);
    if (!all) return ncclSystemError;
    MPI_Allgather(&id, sizeof id, MPI_BYTE, all, sizeof id, MPI_BYTE, MPI_COMM_WORLD);
    int same = 1;
    for (int k = 0; k < n; k++)
        same &= memcmp(all + (size_t)k * sizeof id, &id, sizeof id) == 0;
    free(all);
    if (!same || id.internal[0] == 0) return ncclInvalidUsage;
    /* the transport's watchdog needs a communicator it can abort */
    if (!config || config->blocking != 0) return ncclInvalidUsage;
    struct ncclComm *c = calloc(1, sizeof *c);
    if (!c) return ncclSystemError;
    MPI_Comm_dup(MPI_COMM_WORLD, &c->comm);
    c->rank = rank;
    c->size = nranks;
    c->alone = alone;
    c->blocking = !config || config->blocking != 0;
    c->init_polls = c->blocking ? 0 : 1;
    *out = c;
    last_comm = c;
    return c->blocking ? ncclSuccess : ncclInProgress;
}

ncclResult_t ncclCommSplit(ncclComm_t parent, int color, int key, ncclComm_t *out,
                           ncclConfig_t *config) {
    *out = NULL;
    if (!config || config->blocking != 0) return ncclInvalidUsage;
    MPI_Comm mc = MPI_COMM_NULL;
    MPI_Comm_split(parent->comm, color == NCCL_SPLIT_NOCOLOR ? MPI_UNDEFINED : color, key, &mc);
    if (mc == MPI_COMM_NULL) return ncclSuccess;
    struct ncclComm *c = calloc(1, sizeof *c);
    if (!c) return ncclSystemError;
    c->comm = mc;
    c->alone = parent->alone;
    MPI_Comm_rank(mc, &c->rank);
    MPI_Comm_size(mc, &c->size);
    c->init_polls = 1;
    *out = c;
    return ncclInProgress;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t c, ncclResult_t *e) {
    if (c->init_polls > 0) {
        c->init_polls--;
        *e = ncclInProgress;
        return ncclSuccess;
    }
    if (pending) { /* the launch reaches its streams now; still in progress this once */
        op *left = NULL, *left_tail = NULL; /* the unissued stay, in progress for ever */
        while (pending) {
            op *o = pending;
            pending = o->next;
            if (o->unissued)
                append(&left, &left_tail, o);
            else
                push(o->stream, o);
        }
        pending = left, pending_tail = left_tail;
        *e = ncclInProgress;
        return ncclSuccess;
    }
    *e = c->async;
    return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t c) {
    if (!c) return ncclSuccess;
    fprintf(stderr, "fake nccl: ncclCommAbort on rank %d\n", c->rank); /* for the tests */
    c->aborted = 1;
    return ncclSuccess; /* the process ends next; MPI's requests go with it */
}

ncclResult_t ncclCommFinalize(ncclComm_t c) {
    (void)c;
    return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t c) {
    MPI_Comm_free(&c->comm);
    if (last_comm == c) last_comm = NULL;
    free(c);
    return ncclSuccess;
}

ncclResult_t ncclGroupStart(void) {
    if (in_group++ == 0) group_id++;
    return ncclSuccess;
}

ncclResult_t ncclGroupEnd(void) {
    if (in_group == 0) return ncclInvalidUsage;
    if (--in_group > 0) return ncclSuccess;
    if (!grouped) return ncclSuccess;
    if (pending_tail) /* the group's operations are launched together */
        pending_tail->next = grouped;
    else
        pending = grouped;
    pending_tail = grouped_tail;
    grouped = grouped_tail = NULL;
    return ncclInProgress;
}

static ncclResult_t issue(ncclComm_t c, cudaStream_t s, int kind, void *dst, const void *src,
                          size_t bytes, int peer, int root) {
    if (c->aborted || c->alone) return ncclInvalidUsage;
    op *o = calloc(1, sizeof *o);
    if (!o) return ncclSystemError;
    o->kind = kind;
    o->dst = dst;
    o->src = src;
    o->bytes = bytes;
    o->peer = peer;
    o->root = root;
    o->comm = c;
    int k = ++ops_issued;
    o->seq = k;
    if (switch_here()) {
        o->hang = k == env_long("PPV_FAKE_NCCL_HANG_AT", 0);
        o->unissued = k == env_long("PPV_FAKE_NCCL_UNISSUED_AT", 0);
        if (k == env_long("PPV_FAKE_NCCL_FAIL_AT", 0)) c->async = ncclRemoteError;
    }
    last_comm = c;
    o->stream = s;
    if (!in_group) { /* launched: on its stream once the communicator is polled */
        append(&pending, &pending_tail, o);
        return ncclInProgress;
    }
    o->group = group_id;
    append(&grouped, &grouped_tail, o);
    return ncclSuccess;
}

ncclResult_t ncclSend(const void *buf, size_t count, ncclDataType_t t, int peer, ncclComm_t c,
                      cudaStream_t s) {
    if (t != ncclUint8 || peer < 0 || peer >= c->size) return ncclInvalidArgument;
    return issue(c, s, OP_SEND, NULL, buf, count, peer, -1);
}

ncclResult_t ncclRecv(void *buf, size_t count, ncclDataType_t t, int peer, ncclComm_t c,
                      cudaStream_t s) {
    if (t != ncclUint8 || peer < 0 || peer >= c->size) return ncclInvalidArgument;
    return issue(c, s, OP_RECV, buf, NULL, count, peer, -1);
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t count, ncclDataType_t t,
                           ncclComm_t c, cudaStream_t s) {
    if (t != ncclUint8) return ncclInvalidArgument;
    return issue(c, s, OP_ALLGATHER, recv, send, count, -1, -1);
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count, ncclDataType_t t, int root,
                           ncclComm_t c, cudaStream_t s) {
    if (t != ncclUint8 || root < 0 || root >= c->size) return ncclInvalidArgument;
    return issue(c, s, OP_BCAST, recv, send, count, -1, root);
}
