/* proc.c - transports whose ranks are processes (ppv_proc_start). The MPI
 * transport lives in its own module (libppv_mpi.so, transport/mpi.c),
 * loaded here when a command asks for it, so that ppv starts without any
 * MPI library (and runs under valgrind and the sanitizers without one).
 * The NCCL transport likewise (libppv_nccl.so, transport/nccl.c). A
 * module is looked for at $PPV_MPI_MODULE (or $PPV_NCCL_MODULE), then
 * where an installed ppv has it (relative to the program's folder), then
 * where this build put it (likewise), then under the install prefix, then
 * by the dynamic loader's own search.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "world_internal.h"
#include "transport/proc_module.h"

#ifndef PPV_MPI_PACKAGE
#define PPV_MPI_PACKAGE ""
#endif
/* the Debian package of MPI's library, where the build knew it */
static const char mpi_package[] = PPV_MPI_PACKAGE;

struct ppv_proc {
    const ppv_proc_module *mod;
    const char *name;
    void *impl;
    int32_t rank, size;
};

/* The transports of processes: the variable that names a module, and
 * where this build and `cmake --install` put it (ppv_module_paths). */
static const struct {
    const char *name, *env, *built, *installed, *prefixed, *lib;
} transports[] = {
#ifdef PPV_MPI_MODULE
    {"mpi", "PPV_MPI_MODULE", PPV_MPI_MODULE, PPV_MPI_MODULE_INSTALLED, PPV_MPI_MODULE_PREFIXED,
     "libppv_mpi.so"},
#else
    {"mpi", "PPV_MPI_MODULE", NULL, NULL, NULL, NULL},
#endif
#ifdef PPV_NCCL_MODULE
    {"nccl", "PPV_NCCL_MODULE", PPV_NCCL_MODULE, PPV_NCCL_MODULE_INSTALLED,
     PPV_NCCL_MODULE_PREFIXED, "libppv_nccl.so"},
#else
    {"nccl", "PPV_NCCL_MODULE", NULL, NULL, NULL, NULL},
#endif
};

/* Transport k's module, or NULL with the reason. The handle stays open
 * for the life of the process (MPI cannot be started twice). */
static const ppv_proc_module *module_find(size_t k, char *err, size_t errlen) {
    const char *env = getenv(transports[k].env);
    if (!transports[k].built && !(env && *env)) {
        ppv_errf(err, errlen,
                 "this ppv was built without the %s transport (it needs MPI: install "
                 "libopenmpi-dev%s, and configure it again)",
                 transports[k].name, k == 1 ? ", and NCCL's headers (the CUDA toolkit)" : "");
        return NULL;
    }
    char path[4096], why[4096];
    int there = 0;
    void *h = ppv_module_open(transports[k].env, transports[k].installed, transports[k].built,
                              transports[k].prefixed, transports[k].lib,
                              RTLD_NOW | RTLD_GLOBAL, /* MPI's own plugins need its symbols */
                              path, sizeof path, &there, why, sizeof why);
    if (!h) {
        if (there && mpi_package[0])
            ppv_errf(err, errlen,
                     "cannot load the transport: %s (the %s transport needs MPI's library: "
                     "apt-get install %s)",
                     why, transports[k].name, mpi_package);
        else
            ppv_errf(err, errlen, "cannot load the transport: %s", why);
        return NULL;
    }
    void *sym = dlsym(h, PPV_PROC_MODULE_SYMBOL);
    if (!sym) {
        ppv_errf(err, errlen, "%s has no %s: not a ppv transport module", path,
                 PPV_PROC_MODULE_SYMBOL);
        dlclose(h);
        return NULL;
    }
    ppv_proc_module_fn fn;
    memcpy(&fn, &sym, sizeof fn); /* object to function pointer (POSIX) */
    return fn();
}

int ppv_proc_start(const char *name, ppv_proc **out, char *err, size_t errlen) {
    *out = NULL;
    size_t k = 0;
    while (k < sizeof transports / sizeof transports[0] && strcmp(transports[k].name, name) != 0)
        k++;
    if (k == sizeof transports / sizeof transports[0])
        return ppv_errf(err, errlen, "unknown transport '%s' (mock, mpi or nccl)", name);
    const ppv_proc_module *mod = module_find(k, err, errlen);
    if (!mod) return -1;
    ppv_proc *p = calloc(1, sizeof *p);
    if (!p) return ppv_errf(err, errlen, "out of memory");
    p->mod = mod;
    p->name = transports[k].name;
    if (!(p->impl = mod->start(&p->rank, &p->size, err, errlen))) {
        free(p);
        return -1;
    }
    *out = p;
    return 0;
}

const char *ppv_proc_name(const ppv_proc *p) {
    return p->name;
}

int32_t ppv_proc_rank(const ppv_proc *p) {
    return p->rank;
}

int32_t ppv_proc_size(const ppv_proc *p) {
    return p->size;
}

void ppv_proc_end(ppv_proc *p) {
    if (!p) return;
    p->mod->end(p->impl);
    free(p);
}

int ppv_proc_configure(ppv_proc *p, const ppv_proc_config *cfg, ppv_transport *t, char *err,
                       size_t errlen) {
    if (p->mod->configure(p->impl, cfg, err, errlen) < 0) return -1;
    t->ops = p->mod->ops;
    t->impl = p->impl;
    return 0;
}

int32_t ppv_proc_add_comm(ppv_proc *p, const int32_t *ranks, int32_t n, char *err, size_t errlen) {
    return p->mod->add_comm(p->impl, ranks, n, err, errlen);
}

int ppv_proc_settle(ppv_proc *p) {
    return p->mod->settle(p->impl);
}
