/* bench_pyranks.c - what Python ranks cost (ppv fuzz py, issues 31, 47):
 *
 * 1. the scheduling point: a ring of 3 ranks passing a token, as ppv's own
 *    coroutine ranks and as external ranks (ppv_ext, the bridge Python
 *    ranks ride on: one pthread a rank, or one process a rank on a shared
 *    bridge), in microseconds per scheduler step;
 * 2. complete runs per second of the 3-rank Python control planes per
 *    strategy: the numpy one (tests/python/pp_control.py:clean) and the
 *    torch.distributed one (tests/python/torch_pp_control.py), each with
 *    ranks as processes (one job, and --jobs J with J the CPUs this
 *    process may use: a zygote a job, each kept to a CPU) and as threads
 *    (`ppv fuzz py --ranks-as`), beside
 *    ppv's own pipeline of the same shape written in C (`ppv fuzz pp
 *    --control-only`, stage 0 and a mesh of 2, the same 5 chunks and hard
 *    cut). Without torch its columns say "-".
 *
 * usage: ppv_bench_pyranks [RUNS] [MESSAGES]   (defaults 2000 and 200000)
 * A benchmark reports figures; it never fails on them (exit 2 only when a
 * run cannot be set up or does not complete).
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench_util.h"
#include "ppv_engine.h"

enum { RANKS = 3 };

typedef struct ring {
    int64_t messages;
    ppv_ext *x;
    int32_t rank;
} ring;

/* ppv's own rank: the token around the ring. */
static void coroutine_rank(ppv_transport *t, int32_t rank, void *varg) {
    const ring *a = varg;
    int64_t token = rank;
    for (int64_t k = 0; k < a->messages; k++) {
        if (t->ops->send(t->impl, rank, &token, sizeof token, (rank + 1) % RANKS, 0, "SEND") ||
            t->ops->recv(t->impl, rank, &token, sizeof token, (rank + RANKS - 1) % RANKS, 0,
                         "RECV"))
            return;
        ppv_world_progress(t, rank);
    }
}

/* An external rank: the same, from its own thread. */
static void *thread_rank(void *varg) {
    const ring *a = varg;
    int64_t token = a->rank;
    int rc = ppv_ext_begin(a->x, a->rank);
    for (int64_t k = 0; rc == 0 && k < a->messages; k++) {
        rc = ppv_ext_send(a->x, a->rank, &token, sizeof token, (a->rank + 1) % RANKS, 0, "SEND");
        if (!rc)
            rc = ppv_ext_recv(a->x, a->rank, &token, sizeof token, (a->rank + RANKS - 1) % RANKS,
                              0, "RECV");
    }
    ppv_ext_end(a->x, a->rank, rc ? "a call failed" : NULL);
    return NULL;
}

/* Microseconds per scheduler step of the ring, -1 when it failed:
 * external 0 ppv's own ranks, 1 threads, 2 processes. */
static double ring_cost(int external, int64_t messages) {
    ppv_world_options o;
    memset(&o, 0, sizeof o);
    o.nranks = RANKS;
    ppv_semantics_parse("eager", &o.sem);
    ppv_policy_parse("rr", &o.policy);
    o.watchdog_steps = 1000000;
    char err[256];
    ppv_world *w = ppv_world_new(&o, err, sizeof err);
    if (!w) return -1;
    ring a = {messages, NULL, 0};
    ring each[RANKS];
    pthread_t th[RANKS];
    a.x = external == 1   ? ppv_ext_new(RANKS, 60, err, sizeof err)
          : external == 2 ? ppv_ext_new_shared(RANKS, 60, 4096, err, sizeof err)
                          : NULL;
    if (external && !a.x) {
        ppv_world_free(w);
        return -1;
    }
    pid_t pids[RANKS];
    for (int32_t r = 0; external && r < RANKS; r++) {
        each[r] = (ring){messages, a.x, r};
        if (external == 1) {
            pthread_create(&th[r], NULL, thread_rank, &each[r]);
            continue;
        }
        fflush(NULL);
        if ((pids[r] = fork()) == 0) {
            thread_rank(&each[r]);
            _exit(0);
        }
    }
    ppv_world_result res;
    double t0 = bench_now();
    int rc = external ? ppv_world_run(w, ppv_ext_rank_main, a.x, &res)
                      : ppv_world_run(w, coroutine_rank, &a, &res);
    double secs = bench_now() - t0;
    for (int32_t r = 0; external == 1 && r < RANKS; r++) pthread_join(th[r], NULL);
    for (int32_t r = 0; external == 2 && r < RANKS; r++) waitpid(pids[r], NULL, 0);
    int ok = rc == 0 && res.status == PPV_RUN_DONE;
    int64_t steps = res.steps;
    ppv_world_result_free(&res);
    ppv_world_free(w);
    ppv_ext_free(a.x);
    return ok && steps ? secs * 1e6 / (double)steps : -1;
}

/* A number after "key": in a JSON report, -1 when absent. */
static double json_number(const char *out, const char *key) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(out, pat);
    return p ? strtod(p + strlen(pat), NULL) : -1;
}

/* Runs per second of one `ppv fuzz` (argv), -1 when it did not pass. */
static double runs_per_second(char *const *argv) {
    static char out[1 << 16];
    double secs, rss;
    int code = bench_run(argv, out, sizeof out, &secs, &rss);
    double runs = json_number(out, "runs"), in = json_number(out, "seconds");
    if (code != 0 || runs <= 0 || in <= 0) return -1;
    return runs / in;
}

int main(int argc, char **argv) {
    long runs = argc > 1 ? strtol(argv[1], NULL, 10) : 2000;
    long messages = argc > 2 ? strtol(argv[2], NULL, 10) : 200000;
    if (runs < 1 || messages < 1) {
        fprintf(stderr, "usage: ppv_bench_pyranks [RUNS] [MESSAGES]\n");
        return 2;
    }
    double own = ring_cost(0, messages / RANKS), ext = ring_cost(1, messages / RANKS),
           proc = ring_cost(2, messages / RANKS);
    if (own < 0 || ext < 0 || proc < 0) {
        fprintf(stderr, "ppv_bench_pyranks: the ring did not complete\n");
        return 2;
    }
    printf("scheduling point (a ring of %d ranks, %ld messages, round-robin):\n", RANKS, messages);
    printf("  ppv's own coroutine ranks   %8.3f us a step\n", own);
    printf("  external ranks (pthreads)   %8.3f us a step (%.0fx)\n", ext, ext / own);
    printf("  external ranks (processes)  %8.3f us a step (%.0fx)\n", proc, proc / own);
    char n[32];
    snprintf(n, sizeof n, "%ld", runs);
    printf("\ncomplete runs per second, 3 ranks (stage 0 and a mesh of 2, 5 chunks, a hard cut),"
           " %ld runs:\n", runs);
    cpu_set_t cpus;
    int ncpu = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
    char jobs[32], many[32];
    snprintf(jobs, sizeof jobs, "%d", ncpu);
    snprintf(many, sizeof many, "jobs %d", ncpu);
    printf("  %-10s %10s %10s %10s %10s %10s %10s %10s\n", "", "numpy", "numpy", "numpy", "torch",
           "torch", "torch", "ppv's C");
    printf("  %-10s %10s %10s %10s %10s %10s %10s %10s\n", "strategy", "processes", many,
           "threads", "processes", many, "threads", "ranks");
    const char *strategies[] = {"random", "pct", "portfolio", "dfs"};
    for (int s = 0; s < 4; s++) {
        double v[7];
        for (int k = 0; k < 6; k++) {
            /* k: numpy then torch; processes, processes with --jobs, threads */
            int threads = k % 3 == 2, parallel = k % 3 == 1 && s != 3; /* dfs: one search */
            char *py[] = {PPV_BIN, "fuzz", "py", k < 3 ? PPV_PLANE : PPV_TORCH_PLANE, "-n", "3",
                          "--ranks-as", threads ? "threads" : "processes", "--strategy",
                          (char *)strategies[s], "--runs", n, "--json", "--jobs",
                          parallel ? jobs : "1", NULL};
            v[k] = k % 3 == 1 && s == 3 ? -1 : runs_per_second(py);
        }
        char *c[] = {PPV_BIN, "fuzz", "pp", "--control-only", "--mesh", "2", "--chunks", "5",
                     "--hard-cut-at", "3", "--strategy", (char *)strategies[s], "--runs", n,
                     "--json", NULL};
        v[6] = runs_per_second(c);
        printf("  %-10s", strategies[s]);
        for (int k = 0; k < 7; k++) {
            if (v[k] < 0) printf(" %10s", "-");
            else printf(" %10.0f", v[k]);
        }
        printf("%s\n", s == 3 ? "   (dfs stops when every class is run: few runs)" : "");
    }
    return 0;
}
