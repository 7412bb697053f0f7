/* generator.c - loading a generator plug-in (ppv_generator.h) and naming
 * it. A shared object is opened with dlopen and asked for its table; a
 * Python module is run by the Python bridge, itself a module
 * (libppv_pygen.so) loaded only when a .py generator is asked for, so that
 * ppv starts where Python is absent. Handles stay open for the life of the
 * process: a table may be used by any number of runs.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pp_internal.h"

uint64_t ppv_generator_digest(const char *name, const char *version, const char *params) {
    const char *parts[3] = {name, version, params ? params : ""};
    uint64_t h = 0xcbf29ce484222325ULL;
    for (int i = 0; i < 3; i++)
        for (const unsigned char *p = (const unsigned char *)parts[i];; p++) {
            h = (h ^ *p) * 0x100000001b3ULL; /* the NUL too: "ab","c" is not "a","bc" */
            if (!*p) break;
        }
    return h;
}

/* Checks a table before any run uses it. 0, or -1 with the reason. */
static int table_check(const char *path, const ppv_generator *g, char *err, size_t errlen) {
    if (!g) return ppv_errf(err, errlen, "%s: its %s returned no table", path, PPV_GENERATOR_ENTRY);
    if (g->abi < PPV_GENERATOR_ABI_OLDEST || g->abi > PPV_GENERATOR_ABI)
        return ppv_errf(err, errlen,
                        "%s was built against version %d of the generator interface; this ppv "
                        "takes versions %d to %d: build it again against this ppv's "
                        "ppv_generator.h",
                        path, (int)g->abi, PPV_GENERATOR_ABI_OLDEST, PPV_GENERATOR_ABI);
    if (!g->name || !*g->name || !g->version || !*g->version)
        return ppv_errf(err, errlen, "%s: its table has no name or no version", path);
    if (!g->create || !g->kv_reset || !g->call || !g->destroy)
        return ppv_errf(err, errlen,
                        "%s: generator %s %s lacks create, kv_reset, call or destroy (only "
                        "kv_snapshot, and open with close, may be NULL)",
                        path, g->name, g->version);
    if (!g->open != !g->close)
        return ppv_errf(err, errlen, "%s: generator %s %s has %s without %s", path, g->name,
                        g->version, g->open ? "open" : "close", g->open ? "close" : "open");
    return 0;
}

/* The Python bridge: $PPV_PYGEN_MODULE, where an installed ppv has it
 * (relative to the program's folder), where this build put it (likewise),
 * under the install prefix, then the loader's own search. */
static const ppv_generator *python_open(const char *path, char *err, size_t errlen) {
#ifdef PPV_PYGEN_MODULE
    char why[4096];
    void *h = ppv_module_open("PPV_PYGEN_MODULE", PPV_PYGEN_MODULE_INSTALLED, PPV_PYGEN_MODULE,
                              PPV_PYGEN_MODULE_PREFIXED, "libppv_pygen.so",
                              RTLD_NOW | RTLD_GLOBAL, /* numpy needs libpython's symbols */
                              NULL, 0, NULL, why, sizeof why);
    if (!h) {
        ppv_errf(err, errlen, "%s: cannot load ppv's Python bridge: %s", path, why);
        return NULL;
    }
    typedef const ppv_generator *(*open_fn)(const char *, char *, size_t);
    void *sym = dlsym(h, "ppv_pygen_open");
    if (!sym) {
        ppv_errf(err, errlen, "%s: the Python bridge has no ppv_pygen_open", path);
        return NULL;
    }
    open_fn fn;
    memcpy(&fn, &sym, sizeof fn);
    return fn(path, err, errlen);
#else
    ppv_errf(err, errlen,
             "%s: this ppv was built without the Python bridge (it needs libpython3-dev and "
             "python3-numpy: install them and configure it again)",
             path);
    return NULL;
#endif
}

const ppv_generator *ppv_generator_open(const char *path, char *err, size_t errlen) {
    size_t n = strlen(path);
    const ppv_generator *g;
    if (n > 3 && !strcmp(path + n - 3, ".py")) {
        if (!(g = python_open(path, err, errlen))) return NULL;
    } else {
        /* a bare name would be searched for by the loader: ask for a path */
        char local[4096];
        if (!strchr(path, '/')) {
            if (snprintf(local, sizeof local, "./%s", path) >= (int)sizeof local) {
                ppv_errf(err, errlen, "%s: the path is too long", path);
                return NULL;
            }
            path = local;
        }
        void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            ppv_errf(err, errlen, "cannot load the generator: %s", dlerror());
            return NULL;
        }
        void *sym = dlsym(h, PPV_GENERATOR_ENTRY);
        if (!sym) {
            ppv_errf(err, errlen, "%s has no function %s: not a ppv generator plug-in", path,
                     PPV_GENERATOR_ENTRY);
            dlclose(h);
            return NULL;
        }
        ppv_generator_entry_fn fn;
        memcpy(&fn, &sym, sizeof fn); /* object to function pointer (POSIX) */
        g = fn();
        if (table_check(path, g, err, errlen) < 0) {
            dlclose(h);
            return NULL;
        }
        return g;
    }
    return table_check(path, g, err, errlen) < 0 ? NULL : g;
}
