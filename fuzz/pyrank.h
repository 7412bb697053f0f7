/* pyrank.h - between `ppv fuzz py` (tools/cmd_fuzz.c) and the Python
 * ranks module (libppv_pyrank.so, fuzz/pyrank.c), which ppv loads only
 * when a Python target is asked for, as it loads the Python generator
 * bridge: ppv itself starts without libpython.
 *
 * The module embeds Python, imports FILE.py and, for every run, starts one
 * process (or Python thread) a rank that calls FUNCTION(rank, world_size)
 * with ppv.dist (python/ppv/dist.py) bound to that run's bridge (ppv_ext):
 * each ppv.dist call is a scheduling point of the mock world. The bridge's
 * calls come in a table, so the module needs nothing of ppv's but this
 * header and ppv_world.h's types.
 */
#ifndef PPV_PYRANK_H
#define PPV_PYRANK_H

#include "ppv_world.h"

enum {
    PPV_PYRANK_ABI = 4,
    /* In a world of at most this many ranks, every set of ranks has a
     * communicator from the start (new_group is local): the set's mask
     * (bit r for rank r) is its number, and the world's is 0. In a larger
     * one new_group asks the world (ppv_ext_new_group). */
    PPV_PYRANK_GROUP_RANKS = 6
};

typedef struct ppv_pyrank_api {
    int (*begin)(ppv_ext *x, int32_t rank);
    int (*send)(ppv_ext *x, int32_t rank, const void *buf, size_t bytes, int32_t peer,
                int32_t comm, const char *what);
    int (*recv)(ppv_ext *x, int32_t rank, void *buf, size_t bytes, int32_t peer, int32_t comm,
                const char *what);
    int (*broadcast)(ppv_ext *x, int32_t rank, void *buf, size_t bytes, int32_t root,
                     int32_t comm, const char *what);
    int (*allreduce_f32)(ppv_ext *x, int32_t rank, float *buf, size_t count, int32_t comm,
                         const char *what);
    int (*allgather)(ppv_ext *x, int32_t rank, const void *send, void *recv, size_t bytes,
                     int32_t comm, const char *what);
    int (*probe)(ppv_ext *x, int32_t rank, int32_t peer, int32_t comm, int *arrived,
                 const char *what);
    int (*yield)(ppv_ext *x, int32_t rank, const char *what);
    int (*wait_any)(ppv_ext *x, int32_t rank, int32_t comm, const char *what);
    int (*group_start)(ppv_ext *x, int32_t rank, const char *what);
    int (*group_end)(ppv_ext *x, int32_t rank, const char *what);
    void (*end)(ppv_ext *x, int32_t rank, const char *error);
    int (*isend)(ppv_ext *x, int32_t rank, const void *buf, size_t bytes, int32_t peer,
                 int32_t comm, const char *what, int64_t *id);
    int (*irecv)(ppv_ext *x, int32_t rank, void *buf, size_t bytes, int32_t peer, int32_t comm,
                 const char *what, int64_t *id);
    int (*wait_op)(ppv_ext *x, int32_t rank, int64_t id, const char *what);
    int (*test_op)(ppv_ext *x, int32_t rank, int64_t id, int *done, const char *what);
    int (*ended)(const ppv_ext *x, int32_t rank);
    size_t (*message_bytes)(const ppv_ext *x);
    int (*new_group)(ppv_ext *x, int32_t rank, const int32_t *ranks, int32_t n, int64_t tag,
                     int32_t *comm, const char *what);
    int (*wait_some)(ppv_ext *x, int32_t rank, const int64_t *ids, int32_t n,
                     const int32_t *anys, int32_t nany, int block, double deadline,
                     int32_t *which, const char *what);
} ppv_pyrank_api;

typedef struct ppv_pyrank ppv_pyrank;

typedef struct ppv_pyrank_module {
    int abi; /* PPV_PYRANK_ABI */
    /* Imports file (with pkgdir, where the ppv package is, on sys.path)
     * and finds function in it; NULL with the reason (the Python error and
     * its place). With shared (a bridge of ppv_ext_new_shared) every rank
     * is a process: a process of the module's (the zygote) starts an
     * interpreter and imports the file once, within import_seconds, and
     * forks every run's ranks from there, so each starts from the state a
     * fresh launch gives it. Without, one interpreter here and a thread a
     * rank. */
    ppv_pyrank *(*open)(const char *file, const char *function, int32_t nranks,
                        const ppv_pyrank_api *api, const char *pkgdir, ppv_ext *shared,
                        double import_seconds, char *err, size_t errlen);
    /* One run: a thread or a process a rank, each waiting in begin (x is
     * the shared bridge, reset, when there is one). 0, or -1 with err. */
    int (*start)(ppv_pyrank *p, ppv_ext *x, char *err, size_t errlen);
    /* After the world's run: waits at most seconds for the ranks to end
     * (a process that does not is killed). 0, or -1 with err (one still
     * running or killed: no more runs are made). */
    int (*finish)(ppv_pyrank *p, double seconds, char *err, size_t errlen);
    void (*close)(ppv_pyrank *p);
} ppv_pyrank_module;

/* The module's one export. */
const ppv_pyrank_module *ppv_pyrank_entry(void);

#endif
