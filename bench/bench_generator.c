/* bench_generator.c - what the generator interface costs (issue 30):
 *
 *  (a) the cost of a generator call through a plug-in: µs a call of the
 *      whole pipeline (stage 0, a mesh of 2, 64 chunks of 4 steps, 32x32)
 *      with no model (--control-only), with passthrough.c (a copy and one
 *      all-reduce) and with passthrough.py (the same in Python): the
 *      Python bridge's overhead is the difference of the last two;
 *  (b) the example tp-mlp, C against Python, per call;
 *  (c) with "big": the built-in generator at the contract's 320x576
 *      frames, 8 heads, meshes 1, 2, 4 and 8 on the mock transport:
 *      chunks per second (the mock runs the ranks one at a time, so the
 *      mesh splits the work without running it in parallel; MPI's figures
 *      come from `ppv pp --transport mpi`, docs/generators.md);
 *  (d) the plug-in guard's cost a call: the two marks the engine makes
 *      around every call into a generator (engine/pp/guard.c), in ns.
 *
 * usage: ppv_bench_generator [SECONDS per figure, default 2] [big]
 * A benchmark reports figures; it never fails on them (exit 2 only when a
 * run fails or a plug-in does not load).
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "ppv_engine.h"
#include "pp_internal.h"

/* Runs o for about secs seconds; seconds a run, generator calls a run. */
static int timed(const ppv_pp_options *o, double secs, double *per_run, int64_t *calls) {
    double t0 = bench_now(), t = t0;
    long runs = 0;
    char err[512];
    do {
        ppv_pp_report *r = NULL;
        if (ppv_pp_run(o, &r, err, sizeof err) != 0 || !r->ok) {
            fprintf(stderr, "ppv_bench_generator: %s\n", r ? r->message : err);
            ppv_pp_report_free(r);
            return -1;
        }
        /* every denoising call, and each chunk's cache write */
        *calls = r->generator_calls + r->chunks_emitted;
        ppv_pp_report_free(r);
        runs++;
        t = bench_now();
    } while (t - t0 < secs);
    *per_run = (t - t0) / (double)runs;
    return 0;
}

static const ppv_generator *load(const char *path) {
    char err[1024];
    const ppv_generator *g = ppv_generator_open(path, err, sizeof err);
    if (!g) fprintf(stderr, "ppv_bench_generator: %s\n", err);
    return g;
}

/* One row: µs a generator call (the pipeline's time a call) and runs/s. */
static int row(const char *name, const ppv_pp_options *o, double secs, double *us) {
    double per_run;
    int64_t calls;
    if (timed(o, secs, &per_run, &calls) < 0) return -1;
    *us = per_run / (double)calls * 1e6;
    printf("%-40s %12.2f %12.1f %10lld\n", name, *us, 1.0 / per_run, (long long)calls);
    return 0;
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 2.0;
    if (!(secs > 0)) secs = 2.0;
    int big = argc > 2 && !strcmp(argv[2], "big");
    ppv_pp_options o = ppv_pp_defaults();
    o.chunks = 64;
    printf("(a) a generator call through the interface: stage 0 + a mesh of 2, 64 chunks of 4 "
           "steps, 32x32\n");
    printf("%-40s %12s %12s %10s\n", "generator", "us/call", "runs/s", "calls/run");
    double none, c, py;
    ppv_pp_options ctl = o;
    ctl.control_only = 1;
    if (row("none (--control-only)", &ctl, secs, &none) < 0) return 2;
    ppv_pp_options pc = o;
    if (!(pc.generator = load(PPV_BENCH_PASS_SO))) return 2;
    if (row("passthrough.c", &pc, secs, &c) < 0) return 2;
#ifdef PPV_BENCH_PASS_PY
    ppv_pp_options pp = o;
    if (!(pp.generator = load(PPV_BENCH_PASS_PY))) return 2;
    if (row("passthrough.py", &pp, secs, &py) < 0) return 2;
    printf("the Python bridge: %.2f us a call over the C plug-in's %.2f us\n", py - c, c - none);
#else
    (void)py;
    printf("passthrough.py: this build has no Python bridge\n");
#endif
    printf("\n(b) the example tp-mlp (hidden 64, 4 blocks), C against Python, same setup\n");
    printf("%-40s %12s %12s %10s\n", "generator", "us/call", "runs/s", "calls/run");
    ppv_pp_options tc = o;
    tc.chunks = 8;
    if (!(tc.generator = load(PPV_BENCH_TP_MLP_SO))) return 2;
    if (row("tp_mlp.c", &tc, secs, &c) < 0) return 2;
#ifdef PPV_BENCH_PASS_PY
    ppv_pp_options tpy = tc;
    if (!(tpy.generator = load(PPV_BENCH_TP_MLP_PY))) return 2;
    if (row("tp_mlp.py", &tpy, secs, &py) < 0) return 2;
#endif
    /* (d): the marks alone, as a call makes them (enter, then leave) */
    ppv_generator_site site = {"bench", "1", "call", 0, 0, 0, 0};
    long pairs = 0;
    double t0 = bench_now(), t;
    do {
        for (int i = 0; i < 1000000; i++) {
            const ppv_generator_site *was = pp_site_set(&site);
            site.call_id++;
            pp_site_set(was);
        }
        pairs += 1000000;
        t = bench_now();
    } while (t - t0 < secs);
    printf("\n(d) the plug-in guard's marks around a generator call: %.2f ns a call (%ld calls)\n",
           (t - t0) / (double)pairs * 1e9, pairs);
    if (!big) return 0;
    printf("\n(c) the built-in at 320x576 (latents 40x72), 2 layers, C 32, 8 heads, 4 steps, "
           "stash, 2 chunks a run\n");
    printf("%-40s %12s %12s\n", "mesh (mock)", "s/chunk", "chunks/s");
    static const int32_t meshes[] = {1, 2, 4, 8};
    for (int k = 0; k < 4; k++) {
        ppv_pp_options b = ppv_pp_defaults();
        b.mesh = meshes[k];
        b.chunks = 2;
        b.height = 320;
        b.width = 576;
        b.model.n_heads = 8;
        double per_run;
        int64_t calls;
        if (timed(&b, 0.001, &per_run, &calls) < 0) return 2;
        char name[64];
        snprintf(name, sizeof name, "%d", meshes[k]);
        printf("%-40s %12.2f %12.3f\n", name, per_run / 2, 2 / per_run);
    }
    return 0;
}
