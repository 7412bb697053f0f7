/* bench_pp.c - `ppv pp` throughput: chunks per second of the whole
 * pipeline with the model (PP0, and PP1 on meshes of 2 and 4), and
 * complete control-plane runs per second with the model's compute taken
 * out (--control-only: every message, broadcast, gather and check kept),
 * which is what an interleaving explorer runs many times. The issue's
 * target for the control plane: 20,000 complete 3-rank (stage 0 + a mesh
 * of 2), 16-chunk runs per second. A benchmark reports figures; it never
 * fails on them (exit 2 only when a run fails).
 *
 * The control plane is measured in one process, and in one process per
 * core at once (the machine's throughput, as `ppv fuzz --jobs` and CI
 * sweeps use it; each process reports its own rate).
 *
 * Every run draws its own seed, as the explorer's runs do: one seed run
 * over and over repeats one interleaving, whose branches and memory the
 * machine learns, and read about 12% faster than the explorer's runs.
 *
 * usage: ppv_bench_pp [SECONDS per figure, default 2] [control]
 *   control: the control-plane rows only (for a profiler)
 * ppv_bench_pp 0 once on|off [control]: one run of ppv pp's defaults (or
 *   the control plane alone) with the memory accounting on or off, for
 *   `valgrind --tool=callgrind` to count the accounting's instructions
 * ppv_bench_pp SECONDS plan: ppv pp --plan at the pilot's sizes (320x576,
 *   a 40-block DiT, D_in = D_out = 2, meshes 1, 2, 4), microseconds each
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_util.h"
#include "ppv_engine.h"

/* Runs o repeatedly for about `secs` seconds; runs per second, or -1. */
static double rate(const ppv_pp_options *o, double secs, int64_t *steps) {
    double t0 = bench_now(), t = t0;
    long runs = 0;
    char err[512];
    ppv_pp_options each = *o;
    while (t - t0 < secs) {
        ppv_pp_report *r = NULL;
        each.policy.seed = o->policy.seed + (uint64_t)runs; /* a new interleaving each run */
        if (ppv_pp_run(&each, &r, err, sizeof err) != 0 || !r->ok) {
            fprintf(stderr, "ppv_bench_pp: %s\n", r ? r->message : err);
            ppv_pp_report_free(r);
            return -1;
        }
        *steps = r->world.steps;
        ppv_pp_report_free(r);
        runs++;
        t = bench_now();
    }
    return (double)runs / (t - t0);
}

/* o's rate in n processes at once: their sum, or -1. Each child writes
 * its rate to the pipe. */
static double rate_parallel(const ppv_pp_options *o, double secs, int n, double *each) {
    int fds[2];
    if (n > 64 || pipe(fds) != 0) return -1;
    for (int k = 0; k < n; k++) {
        pid_t pid = fork();
        if (pid < 0) return -1;
        if (pid == 0) {
            int64_t steps = 0;
            ppv_pp_options mine = *o; /* disjoint seeds, as ppv fuzz --jobs gives its workers */
            mine.policy.seed = o->policy.seed + ((uint64_t)k << 40);
            double r = rate(&mine, secs, &steps);
            _exit(write(fds[1], &r, sizeof r) == (ssize_t)sizeof r && r >= 0 ? 0 : 2);
        }
    }
    close(fds[1]);
    double sum = 0;
    int got = 0, failed = 0;
    for (double r; read(fds[0], &r, sizeof r) == (ssize_t)sizeof r;)
        each[got++] = r, sum += r;
    close(fds[0]);
    for (int k = 0; k < n; k++) {
        int st = 0;
        if (wait(&st) < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) failed = 1;
    }
    return failed || got != n ? -1 : sum;
}

/* One run with the accounting on or off (callgrind's figure). */
static int once(int memory, int control) {
    ppv_pp_options o = ppv_pp_defaults();
    o.memory_off = !memory;
    o.control_only = control;
    ppv_pp_report *r = NULL;
    char err[512];
    if (ppv_pp_run(&o, &r, err, sizeof err) != 0 || !r->ok) {
        fprintf(stderr, "ppv_bench_pp: %s\n", r ? r->message : err);
        ppv_pp_report_free(r);
        return 2;
    }
    printf("memory %s: rows %s, output digest %016llx\n", memory ? "on" : "off",
           r->mem ? "kept" : "none", (unsigned long long)r->output_digest);
    ppv_pp_report_free(r);
    return 0;
}

/* --plan at the pilot's sizes, microseconds a plan. */
static int plan_rate(double secs) {
    printf("ppv pp --plan: 320x576 frames, a 40-block DiT (d_model 5120, bf16), D_in = D_out = 2\n");
    for (int32_t mesh = 1; mesh <= 4; mesh *= 2) {
        ppv_pp_options o = ppv_pp_defaults();
        o.height = 320;
        o.width = 576;
        o.mesh = mesh;
        o.model = (ppv_gen_config){.layers = 40, .d_model = 5120, .n_heads = 40, .d_ff = 13840,
                                   .cond_dim = 4096, .seed = 1};
        o.cond_len = 512;
        double t0 = bench_now(), t = t0;
        long n = 0;
        uint64_t peak = 0;
        while (t - t0 < secs) {
            ppv_pp_plan p;
            char err[512];
            if (ppv_pp_plan_run(&o, 2, &p, err, sizeof err) != 0) {
                fprintf(stderr, "ppv_bench_pp: %s\n", err);
                return 2;
            }
            peak = p.mem[1].peak;
            ppv_pp_plan_free(&p);
            n++;
            t = bench_now();
        }
        printf("mesh %d: %.1f us a plan (%ld plans), the leader's peak %llu bytes\n", mesh,
               (t - t0) / (double)n * 1e6, n, (unsigned long long)peak);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 3 && strcmp(argv[2], "once") == 0)
        return once(strcmp(argv[3], "on") == 0, argc > 4 && strcmp(argv[4], "control") == 0);
    double secs = argc > 1 ? atof(argv[1]) : 2.0;
    if (!(secs > 0)) secs = 2.0;
    if (argc > 2 && strcmp(argv[2], "plan") == 0) return plan_rate(secs);
    int control_only = argc > 2 && strcmp(argv[2], "control") == 0;
    printf("ppv pp: whole pipeline (generator 2 layers, C 32, 4 heads; 32x32, 4 steps, stash)\n");
    printf("%-28s %12s %14s %16s\n", "configuration", "runs/s", "chunks/s", "sched steps/run");
    static const int32_t meshes[] = {1, 2, 4};
    for (int k = 0; k < 3 && !control_only; k++) {
        ppv_pp_options o = ppv_pp_defaults();
        o.mesh = meshes[k];
        o.chunks = 16;
        int64_t steps = 0;
        double r = rate(&o, secs, &steps);
        if (r < 0) return 2;
        char name[64];
        snprintf(name, sizeof name, "%s, mesh %d, 16 chunks", meshes[k] == 1 ? "PP0" : "PP1",
                 meshes[k]);
        printf("%-28s %12.1f %14.1f %16lld\n", name, r, r * 16, (long long)steps);
    }
    printf("\ncontrol plane only (--control-only), random policy\n");
    printf("%-28s %12s %14s %16s %14s\n", "configuration", "runs/s", "chunks/s", "sched steps/run",
           "sched steps/s");
    for (int k = 0; k < 3; k++) {
        ppv_pp_options o = ppv_pp_defaults();
        o.mesh = meshes[k];
        o.chunks = 16;
        o.control_only = 1;
        o.policy.kind = PPV_POLICY_RANDOM;
        int64_t steps = 0;
        double r = rate(&o, secs, &steps);
        if (r < 0) return 2;
        char name[64];
        snprintf(name, sizeof name, "%d ranks, 16 chunks", 1 + meshes[k]);
        printf("%-28s %12.1f %14.1f %16lld %14.0f\n", name, r, r * 16, (long long)steps,
               r * (double)steps);
    }
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    if (cores < 1) cores = 1;
    if (cores > 64) cores = 64;
    ppv_pp_options o = ppv_pp_defaults();
    o.chunks = 16;
    o.control_only = 1;
    o.policy.kind = PPV_POLICY_RANDOM;
    double each[64];
    double r = rate_parallel(&o, secs, (int)cores, each);
    if (r < 0) return 2;
    char name[64];
    snprintf(name, sizeof name, "3 ranks, %ld processes", cores);
    printf("%-28s %12.1f %14.1f   (each:", name, r, r * 16);
    for (long k = 0; k < cores; k++)
        printf(" %.0f", each[k]);
    printf("; target: 20000 runs/s)\n");
    return 0;
}
