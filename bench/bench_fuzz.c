/* bench_fuzz.c - `ppv fuzz` executions per second, per strategy, on
 * (a) 1F1B p=4 m=8 with the built-in small model, (b) the pipeline with 3
 * ranks (stage 0 and a mesh of 2) and 16 chunks, --control-only, and the
 * same with --poll (where interleavings change what stage 0 does); then
 * (c) dfs on 1F1B of growing size: the largest it covers completely
 * within 60 s (a wildcard-free schedule is one class, so the time is one
 * engine run and the reference's), and (d) dfs on the polling pipeline:
 * classes per chunk count. A benchmark reports figures; it never fails on
 * them (exit 2 only when an exploration cannot run or finds a failure).
 *
 * usage: ppv_bench_fuzz [SECONDS per figure, default 2]
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "ppv_fuzz.h"

static int explore(ppv_fuzz_options *o, ppv_fuzz_report **r) {
    char err[512];
    if (ppv_fuzz(o, r, err, sizeof err) != 0) {
        fprintf(stderr, "ppv_bench_fuzz: %s\n", err);
        return -1;
    }
    if ((*r)->found) {
        fprintf(stderr, "ppv_bench_fuzz: a run failed: %s\n", (*r)->failure);
        return -1;
    }
    return 0;
}

static const ppv_fuzz_strategy strategies[] = {PPV_FUZZ_RANDOM, PPV_FUZZ_PCT, PPV_FUZZ_PORTFOLIO};

static int row(const char *name, ppv_fuzz_options base, double secs) {
    for (int k = 0; k < 3; k++) {
        ppv_fuzz_options o = base;
        o.strategy = strategies[k];
        o.pct_depth = 3;
        o.seconds = secs;
        o.runs = 0;
        ppv_fuzz_report *r = NULL;
        if (explore(&o, &r) < 0) return -1;
        printf("%-34s %-10s %10.0f %10lld\n", name, ppv_fuzz_strategy_name(o.strategy),
               (double)r->runs / r->seconds, (long long)r->distinct);
        ppv_fuzz_report_free(r);
    }
    return 0;
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 2.0;
    if (!(secs > 0)) secs = 2.0;
    char err[512];
    printf("%-34s %-10s %10s %10s\n", "target", "strategy", "runs/s", "distinct");
    ppv_schedule *s = NULL;
    ppv_gen_params gp = {4, 8, 0};
    if (ppv_generate("1f1b", &gp, &s, err, sizeof err) < 0) {
        fprintf(stderr, "ppv_bench_fuzz: %s\n", err);
        return 2;
    }
    ppv_fuzz_options o;
    memset(&o, 0, sizeof o);
    o.schedule = s;
    o.run = ppv_run_defaults();
    if (row("(a) 1F1B p=4 m=8, small model", o, secs) < 0) return 2;
    ppv_pp_options pp = ppv_pp_defaults();
    pp.mesh = 2;
    pp.chunks = 16;
    pp.control_only = 1;
    memset(&o, 0, sizeof o);
    o.pp = &pp;
    if (row("(b) pp 3 ranks 16 chunks, control", o, secs) < 0) return 2;
    ppv_pp_options poll = pp;
    poll.poll = 1;
    o.pp = &poll;
    if (row("(b) the same, --poll", o, secs) < 0) return 2;
    ppv_schedule_free(s);

    printf("\n(c) dfs on 1F1B (rendezvous; the reference run included)\n");
    printf("%-14s %10s %10s %10s %12s\n", "schedule", "actions", "classes", "complete",
           "seconds");
    static const int32_t sizes[][2] = {{4, 8}, {8, 16}, {16, 32}, {32, 64}, {32, 128},
                                       {64, 128}, {64, 256}, {128, 256}};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        ppv_gen_params g = {sizes[k][0], sizes[k][1], 0};
        if (ppv_generate("1f1b", &g, &s, err, sizeof err) < 0) {
            fprintf(stderr, "ppv_bench_fuzz: %s\n", err);
            return 2;
        }
        memset(&o, 0, sizeof o);
        o.schedule = s;
        o.run = ppv_run_defaults();
        o.strategy = PPV_FUZZ_DFS;
        o.pct_depth = 2;
        o.runs = 1000;
        double t0 = bench_now();
        ppv_fuzz_report *r = NULL;
        if (explore(&o, &r) < 0) return 2;
        double t = bench_now() - t0;
        char name[32];
        snprintf(name, sizeof name, "p=%d m=%d", g.ranks, g.microbatches);
        printf("%-14s %10lld %10lld %10s %12.2f\n", name, (long long)ppv_schedule_size(s),
               (long long)r->classes, r->complete ? "yes" : "no", t);
        ppv_fuzz_report_free(r);
        ppv_schedule_free(s);
        if (t > 60) break;
    }

    printf("\n(d) dfs on the polling pipeline (--poll --control-only, mesh 1)\n");
    printf("%-10s %10s %10s %12s %12s\n", "chunks", "classes", "complete", "seconds", "runs/s");
    for (int32_t chunks = 2; chunks <= 8; chunks += 2) {
        ppv_pp_options q = ppv_pp_defaults();
        q.mesh = 1;
        q.chunks = chunks;
        q.control_only = 1;
        q.poll = 1;
        memset(&o, 0, sizeof o);
        o.pp = &q;
        o.strategy = PPV_FUZZ_DFS;
        o.pct_depth = 2;
        o.runs = 1000000;
        ppv_fuzz_report *r = NULL;
        if (explore(&o, &r) < 0) return 2;
        printf("%-10d %10lld %10s %12.2f %12.0f\n", chunks, (long long)r->classes,
               r->complete ? "yes" : "no", r->seconds, (double)r->runs / r->seconds);
        ppv_fuzz_report_free(r);
    }
    return 0;
}
