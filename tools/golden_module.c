/* golden_module.c - ppv's way to the golden layer (ppv_golden.h): the
 * layer and HDF5 live in a module, libppv_golden.so, loaded the first time
 * a command calls into it (record, replay, diff, demo, pp --record). Every
 * other command starts without HDF5 and the libraries it brings (curl,
 * gnutls, krb5, ...: about 7 MiB resident and a few milliseconds). The
 * module takes the engine's functions from ppv itself, which exports them
 * (tools/CMakeLists.txt), so one engine serves both.
 *
 * The module is looked for at $PPV_GOLDEN_MODULE alone if it is set, else
 * where `cmake --install` puts it (relative to ppv's own folder), then
 * where this build put it (likewise relative), then under the install
 * prefix, then by the dynamic loader's search. Without
 * it a golden command cannot run: it says why and exits 2.
 *
 * Each function of ppv_golden.h that ppv calls is defined here with the
 * header's own signature (so the compiler checks them) and forwards to the
 * module's definition of that name. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ppv_golden.h"
#include "ppv_kernels.h"

static void *golden;

/* The module, loaded and set up (HDF5's exit-time cleanup off) once; on
 * failure the command ends here with exit 2. */
static void *module(void) {
    if (golden) return golden;
    /* installed first: an installed ppv must not pick up a build tree's */
    char why[4096];
    golden = ppv_module_open("PPV_GOLDEN_MODULE", PPV_GOLDEN_MODULE_INSTALLED, PPV_GOLDEN_MODULE,
                             PPV_GOLDEN_MODULE_PREFIXED, "libppv_golden.so", RTLD_NOW | RTLD_LOCAL,
                             NULL, 0, NULL, why, sizeof why);
    if (!golden) {
        fprintf(stderr,
                "ppv: cannot load the golden-file module (libppv_golden.so, HDF5): %s; set "
                "PPV_GOLDEN_MODULE to its path\n",
                why);
        exit(2);
    }
    void (*init)(void);
    void *sym = dlsym(golden, "ppv_golden_process_init");
    memcpy(&init, &sym, sizeof init);
    if (init) init();
    return golden;
}

/* The module's function called name, or the command ends with exit 2. */
static void *lookup(const char *name) {
    void *sym = dlsym(module(), name);
    if (!sym) {
        fprintf(stderr, "ppv: the golden-file module has no %s (a module of another ppv?)\n",
                name);
        exit(2);
    }
    return sym;
}

/* ret name params forwards args to the module's name (FORWARD_VOID: a
 * function that returns nothing). */
#define BIND_ONCE(name, params)                                                                    \
    if (!fn) {                                                                                     \
        void *sym = lookup(#name);                                                                 \
        memcpy(&fn, &sym, sizeof fn);                                                              \
    }
#define FORWARD(ret, name, params, args)                                                           \
    ret name params {                                                                              \
        static ret(*fn) params;                                                                    \
        BIND_ONCE(name, params)                                                                    \
        return fn args;                                                                            \
    }
#define FORWARD_VOID(name, params, args)                                                           \
    void name params {                                                                             \
        static void(*fn) params;                                                                   \
        BIND_ONCE(name, params)                                                                    \
        fn args;                                                                                   \
    }

FORWARD(ppv_diff_options, ppv_diff_defaults, (void), ())
FORWARD(int, ppv_diff_files,
        (const char *a, const char *b, const ppv_diff_options *o, ppv_diff_report **out, char *err,
         size_t errlen),
        (a, b, o, out, err, errlen))
FORWARD_VOID(ppv_diff_report_free, (ppv_diff_report * r), (r))
FORWARD(int, ppv_golden_record,
        (const char *path, const ppv_schedule *s, const ppv_record_options *o,
         ppv_run_report **rep, char *err, size_t errlen),
        (path, s, o, rep, err, errlen))
FORWARD(int, ppv_golden_replay,
        (const char *path, const ppv_diff_options *o, int perturb, ppv_replay_result *out,
         char *err, size_t errlen),
        (path, o, perturb, out, err, errlen))
FORWARD(int, ppv_golden_replay_on,
        (const char *path, const ppv_diff_options *o, int perturb, ppv_proc *proc,
         double timeout_s, ppv_replay_result *out, char *err, size_t errlen),
        (path, o, perturb, proc, timeout_s, out, err, errlen))
FORWARD_VOID(ppv_replay_result_free, (ppv_replay_result * r), (r))
FORWARD(int64_t, ppv_golden_bad_heap, (const char *path), (path))
FORWARD(int, ppv_golden_is_inference, (const char *path), (path))
FORWARD(ppv_inference_writer *, ppv_inference_create,
        (const char *path, const ppv_inference_setup *setup, char *err, size_t errlen),
        (path, setup, err, errlen))
FORWARD(int, ppv_inference_append,
        (ppv_inference_writer * w, const ppv_envelope *e, const ppv_result *r, char *err,
         size_t errlen),
        (w, e, r, err, errlen))
FORWARD(int, ppv_inference_commit, (ppv_inference_writer * w, char *err, size_t errlen),
        (w, err, errlen))
FORWARD_VOID(ppv_inference_abort, (ppv_inference_writer * w), (w))
FORWARD(int, ppv_inference_replay,
        (const char *path, const ppv_diff_options *o, int32_t mesh, int perturb,
         ppv_inference_replay_result *out, char *err, size_t errlen),
        (path, o, mesh, perturb, out, err, errlen))
FORWARD_VOID(ppv_inference_replay_free, (ppv_inference_replay_result * r), (r))
FORWARD(int, ppv_tolerance_parse, (const char *text, ppv_tolerance *t), (text, t))
FORWARD_VOID(ppv_tolerance_format, (const ppv_tolerance *t, char *buf, size_t len),
        (t, buf, len))
FORWARD(int, ppv_conform,
        (const char *path, const ppv_conform_options *o, ppv_conform_report *out, char *err,
         size_t errlen),
        (path, o, out, err, errlen))
FORWARD_VOID(ppv_conform_report_free, (ppv_conform_report * r), (r))
FORWARD(const char *, ppv_conform_check_name, (ppv_conform_check c), (c))
FORWARD(const char *, ppv_conform_check_text, (ppv_conform_check c), (c))
FORWARD(int, ppv_inference_events_begin,
        (ppv_inference_writer * w, const ppv_inference_events *how, char *err, size_t errlen),
        (w, how, err, errlen))
FORWARD(int, ppv_inference_event,
        (ppv_inference_writer * w, const ppv_pp_event *ev, char *err, size_t errlen),
        (w, ev, err, errlen))
FORWARD(int, ppv_inference_memory,
        (ppv_inference_writer * w, const ppv_pp_mem_row *rows, int32_t nranks, const char *clock,
         char *err, size_t errlen),
        (w, rows, nranks, clock, err, errlen))
FORWARD(int, ppv_inference_rank_value,
        (ppv_inference_writer * w, int32_t mesh_rank, ppv_pp_rank_record kind, int64_t call_id,
         uint64_t value, char *err, size_t errlen),
        (w, mesh_rank, kind, call_id, value, err, errlen))
