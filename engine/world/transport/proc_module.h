/* proc_module.h - what a transport of processes (libppv_mpi.so) gives the
 * engine that loads it (proc.c). Private to the world room: the module
 * and the loader are built from the same tree, and the symbol's version
 * says so. */
#ifndef PPV_PROC_MODULE_H
#define PPV_PROC_MODULE_H

#include "ppv_world.h"

#define PPV_PROC_MODULE_SYMBOL "ppv_proc_module_v1"

typedef struct ppv_proc_module {
    /* Joins the job (MPI_Init): the transport's handle, or NULL with the
     * reason. */
    void *(*start)(int32_t *rank, int32_t *size, char *err, size_t errlen);
    /* Before a run. 0, or -1 with the reason. */
    int (*configure)(void *impl, const ppv_proc_config *cfg, char *err, size_t errlen);
    /* Every rank, the same list: a communicator over those global ranks
     * (the world is 0); its id, or -1 with the reason. */
    int32_t (*add_comm)(void *impl, const int32_t *ranks, int32_t n, char *err, size_t errlen);
    /* After a run, on every rank: waits (under the watchdog) until its
     * buffered messages are delivered and every rank is there. 0, or an
     * error (the job has then been ended). */
    int (*settle)(void *impl);
    /* Leaves the job (MPI_Finalize) and frees the handle. */
    void (*end)(void *impl);
    const ppv_transport_ops *ops;
} ppv_proc_module;

typedef const ppv_proc_module *(*ppv_proc_module_fn)(void);

#endif
