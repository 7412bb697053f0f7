/* bench_explore.c - how fast each strategy finds each seeded bug (ppv pp
 * --seed-bug): for every bug that makes a run fail and every strategy
 * (random, PCT at depths 1 to 3, the portfolio, dfs), the runs and the
 * time to the first failure over SEEDS seeds (median and 90th
 * percentile; a search that finds nothing within MAX_RUNS counts as
 * MAX_RUNS and is reported as missed), and for dfs, which draws nothing,
 * whether it finds the bug and after how many classes. Beside each PCT
 * figure: PCT's bound for the program (n scheduler steps, k ranks, depth
 * d), k * n^(d-1) runs in expectation at worst. A benchmark reports
 * figures; it never fails on them (exit 2 only when a search cannot run).
 *
 * usage: ppv_bench_explore [SEEDS, default 30] [MAX_RUNS, default 20000]
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench_util.h"
#include "ppv_fuzz.h"

/* A bug and the pipeline that shows it (ppv pp --seed-bug list's options). */
typedef struct bug_case {
    ppv_pp_bug bug;
    ppv_pp_options o;
} bug_case;

static ppv_pp_options small(int32_t mesh) {
    ppv_pp_options o = ppv_pp_defaults();
    o.mesh = mesh;
    o.chunks = 4;
    o.steps = 2;
    o.control_only = 1;
    return o;
}

static int cases(bug_case *out) {
    int n = 0;
    ppv_pp_options o = small(1);
    o.poll = 1;
    o.inject = PPV_INJECT_OM09;
    o.cuts[o.ncuts++] = 2;
    out[n++] = (bug_case){PPV_PP_BUG_WAIT_TRUSTS_EPOCH, o};
    o = small(2);
    o.d_in = 1;
    out[n++] = (bug_case){PPV_PP_BUG_DECODE_FIRST, o};
    out[n++] = (bug_case){PPV_PP_BUG_LEADER_DIES, small(2)};
    o = small(2);
    o.chunks = 6;
    o.kv_recompute = 1;
    o.recompute_every = 2;
    o.cuts[o.ncuts++] = 3;
    out[n++] = (bug_case){PPV_PP_BUG_WORKER_LOCAL_RECOMPUTE, o};
    o = ppv_pp_defaults();
    o.mesh = 2;
    o.chunks = 3;
    o.steps = 2;
    out[n++] = (bug_case){PPV_PP_BUG_SHARD_RELOAD, o};
    o = small(2);
    o.poll = 1;
    out[n++] = (bug_case){PPV_PP_BUG_SEND_ON_PROBE_HIT, o};
    o.cuts[o.ncuts++] = 2;
    out[n++] = (bug_case){PPV_PP_BUG_CUT_ON_PROBE_HIT, o};
    for (int k = 0; k < n; k++)
        out[k].o.bug = out[k].bug;
    return n;
}

typedef struct strategy {
    const char *name;
    ppv_fuzz_strategy s;
    int32_t depth;
} strategy;

static const strategy strategies[] = {
    {"random", PPV_FUZZ_RANDOM, 3},  {"pct:1", PPV_FUZZ_PCT, 1},         {"pct:2", PPV_FUZZ_PCT, 2},
    {"pct:3", PPV_FUZZ_PCT, 3},      {"portfolio", PPV_FUZZ_PORTFOLIO, 3}, {"dfs", PPV_FUZZ_DFS, 3},
};
enum { NSTRAT = sizeof strategies / sizeof strategies[0] };

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The q-quantile of v[0..n-1] (sorted in place), nearest rank. */
static double quantile(double *v, int n, double q) {
    qsort(v, (size_t)n, sizeof *v, by_value);
    int at = (int)ceil(q * n) - 1;
    return v[at < 0 ? 0 : at >= n ? n - 1 : at];
}

int main(int argc, char **argv) {
    int seeds = argc > 1 ? atoi(argv[1]) : 30;
    int64_t max_runs = argc > 2 ? atoll(argv[2]) : 20000;
    if (seeds < 1 || seeds > 1000 || max_runs < 1) {
        fprintf(stderr, "usage: ppv_bench_explore [SEEDS 1..1000] [MAX_RUNS]\n");
        return 2;
    }
    bug_case bc[16];
    int nb = cases(bc);
    printf("runs to the first failure over %d seeds (at most %lld runs a search; one job)\n",
           seeds, (long long)max_runs);
    printf("%-22s %-9s %6s %9s %9s %9s %9s %14s\n", "bug", "strategy", "found", "runs p50",
           "runs p90", "ms p50", "ms p90", "PCT bound");
    for (int b = 0; b < nb; b++) {
        /* the reference's length and ranks, for PCT's bound */
        ppv_pp_options ref = bc[b].o;
        ref.bug = PPV_PP_BUG_NONE;
        ppv_pp_report *rr = NULL;
        char err[1024];
        if (ppv_pp_run(&ref, &rr, err, sizeof err) != 0) {
            fprintf(stderr, "ppv_bench_explore: %s: %s\n", ppv_pp_bug_token(bc[b].bug), err);
            return 2;
        }
        double n = (double)rr->world.steps, k = 1.0 + ref.mesh;
        ppv_pp_report_free(rr);
        for (int s = 0; s < NSTRAT; s++) {
            int dfs = strategies[s].s == PPV_FUZZ_DFS, tries = dfs ? 1 : seeds, found = 0;
            double runs[1000], ms[1000];
            int64_t classes = 0;
            for (int t = 0; t < tries; t++) {
                ppv_fuzz_options o;
                memset(&o, 0, sizeof o);
                o.strategy = strategies[s].s;
                o.pct_depth = strategies[s].depth;
                o.seed = (uint64_t)t * 1000003u;
                o.runs = max_runs;
                o.pp = &bc[b].o;
                ppv_fuzz_report *r = NULL;
                double t0 = bench_now();
                if (ppv_fuzz(&o, &r, err, sizeof err) != 0) {
                    fprintf(stderr, "ppv_bench_explore: %s, %s: %s\n", ppv_pp_bug_token(bc[b].bug),
                            strategies[s].name, err);
                    return 2;
                }
                double secs = bench_now() - t0;
                found += r->found;
                runs[t] = r->found ? (double)r->failing_run + 1 : (double)max_runs;
                ms[t] = secs * 1e3;
                classes = r->found ? r->failing_run + 1 : r->classes;
                ppv_fuzz_report_free(r);
            }
            char bound[32] = "";
            if (strategies[s].s == PPV_FUZZ_PCT)
                snprintf(bound, sizeof bound, "%.3g",
                         k * pow(n, (double)(strategies[s].depth - 1)));
            if (dfs)
                printf("%-22s %-9s %6s %9lld %9s %9.1f %9s %14s\n", ppv_pp_bug_token(bc[b].bug),
                       "dfs", found ? "yes" : "no", (long long)classes, "-", ms[0], "-",
                       found ? "" : "(every class)");
            else
                printf("%-22s %-9s %3d/%-2d %9.0f %9.0f %9.1f %9.1f %14s\n",
                       ppv_pp_bug_token(bc[b].bug), strategies[s].name, found, tries,
                       quantile(runs, tries, 0.5), quantile(runs, tries, 0.9),
                       quantile(ms, tries, 0.5), quantile(ms, tries, 0.9), bound);
            fflush(stdout);
        }
        printf("%-22s n = %.0f scheduler steps, k = %.0f ranks\n", "", n, k);
    }
    return 0;
}
