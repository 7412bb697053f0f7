/* device.c - finds the ops table of a device by name. "cpu" is built in;
 * "cuda" lives in its own module (libppv_cuda.so, cuda/ops.cu), loaded on
 * first use, so that ppv itself needs no CUDA library to start and runs
 * unchanged on machines without a GPU (or under valgrind, which cannot
 * follow a GPU driver).
 *
 * "cuda:cublas" is the same module's second table (the matmuls on cuBLAS).
 * The module is looked for at $PPV_CUDA_MODULE, then where an installed
 * ppv has it (beside the program: ../lib/ppv), then where this build put
 * it (likewise relative), then under the install prefix, then by the
 * dynamic loader's own search (LD_LIBRARY_PATH); a ppv built without CUDA
 * looks only at $PPV_CUDA_MODULE (the tests' stand-in, tests/fake_cuda/).
 */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels_internal.h"

/* The module's entry, once loaded, or the reason it could not be; the
 * loader runs once. Each variant's table is asked for once. */
static pthread_once_t module_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t variant_lock = PTHREAD_MUTEX_INITIALIZER;
static ppvk_cuda_open_fn module_open;
static char module_err[5120]; /* a path and the loader's reason */
enum { V_REFERENCE, V_CUBLAS, V_COUNT };
static const char *const variant_names[V_COUNT] = {"reference", "cublas"};
static int variant_tried[V_COUNT];
static const ppvk_ops *variant_ops[V_COUNT];
static char variant_err[V_COUNT][512];

/* Opens the module and takes its entry; the reason kept on failure. */
static void module_load(void) {
#ifdef PPV_CUDA_MODULE
    const char *installed = PPV_CUDA_MODULE_INSTALLED, *built = PPV_CUDA_MODULE,
               *prefixed = PPV_CUDA_MODULE_PREFIXED, *name = "libppv_cuda.so";
#else
    const char *installed = NULL, *built = NULL, *prefixed = NULL, *name = NULL;
    const char *env = getenv("PPV_CUDA_MODULE");
    if (!env || !*env) {
        snprintf(module_err, sizeof module_err,
                 "this ppv was built without CUDA (configure it where nvcc is found, or with "
                 "-DPPV_CUDA=ON to require it)");
        return;
    }
#endif
    char path[4096], why[4096];
    void *h = ppv_module_open("PPV_CUDA_MODULE", installed, built, prefixed, name,
                              RTLD_NOW | RTLD_LOCAL, path, sizeof path, NULL, why, sizeof why);
    if (!h) {
        snprintf(module_err, sizeof module_err, "cannot load the CUDA module: %s", why);
        return;
    }
    void *sym = dlsym(h, PPVK_CUDA_OPEN_SYMBOL);
    if (!sym) {
        snprintf(module_err, sizeof module_err, "%s has no %s: not a ppv CUDA module", path,
                 PPVK_CUDA_OPEN_SYMBOL);
        dlclose(h);
        return;
    }
    memcpy(&module_open, &sym, sizeof module_open); /* object to function pointer (POSIX) */
    /* the handle stays open for the life of the process */
}

/* The table of variant v, or NULL with the reason in err. */
static const ppvk_ops *cuda_variant(int v, char *err, size_t errlen) {
    pthread_once(&module_once, module_load);
    if (!module_open) {
        snprintf(err, errlen, "%s", module_err);
        return NULL;
    }
    pthread_mutex_lock(&variant_lock);
    if (!variant_tried[v]) {
        char why[400] = "";
        variant_ops[v] = module_open(variant_names[v], why, sizeof why);
        if (!variant_ops[v])
            snprintf(variant_err[v], sizeof variant_err[v], "CUDA is not usable here: %s", why);
        variant_tried[v] = 1;
    }
    const ppvk_ops *ops = variant_ops[v];
    if (!ops) snprintf(err, errlen, "%s", variant_err[v]);
    pthread_mutex_unlock(&variant_lock);
    return ops;
}

/* The ops of device `name`; NULL with the reason in err. */
const ppvk_ops *ppvk_device_ops(const char *name, char *err, size_t errlen) {
    if (!name || strcmp(name, "cpu") == 0) return &ppvk_cpu_ops;
    int cublas = strcmp(name, "cuda:cublas") == 0;
    if (strcmp(name, "cuda") != 0 && !cublas) {
        snprintf(err, errlen, "unknown device '%s' (cpu, cuda or cuda:cublas)", name);
        return NULL;
    }
    return cuda_variant(cublas ? V_CUBLAS : V_REFERENCE, err, errlen);
}

int ppvk_set_device(const ppvk_ops **ops, const char *name, char *err, size_t errlen) {
    char dummy[1];
    if (!err || errlen == 0) err = dummy, errlen = sizeof dummy;
    const ppvk_ops *found = ppvk_device_ops(name, err, errlen);
    if (!found) return -1;
    *ops = found;
    return 0;
}

int ppvk_device_status(const ppvk_ops *ops, char *err, size_t errlen) {
    char dummy[1];
    if (!err || errlen == 0) err = dummy, errlen = sizeof dummy;
    return ops->status(err, errlen);
}
