/* bench_check.c - how long `ppv check` takes, and how much memory, on
 * lowered 1F1B and ZB-V schedules of growing size up to p=64, m=1024,
 * under each send semantics. A benchmark reports figures; it never fails
 * on them (exit 2 only when a schedule cannot be built or checked).
 *
 * usage: ppv_bench_check PPV_BINARY [MAX_P MAX_M]
 * For each size it writes the lowered CSV to a temporary file, then
 *  - times ppv_schedule_check in this process (parse excluded) under each
 *    semantics, and under rendezvous with per-stage costs (every stage its
 *    own times, message time and activation: --cost-file) against uniform
 *    costs, and the file read and checked (as PyTorch's figures below
 *    are): the best of 7, each round taking every figure in turn;
 *  - runs the real command `ppv check FILE --semantics S` 5 times and
 *    reports its best and median wall time and its peak resident set
 *    (wait4's ru_maxrss; the largest of the runs). The machine's speed
 *    varies from run to run; the best is what the code costs.
 * At the largest size of each kind it also times PyTorch's own loader and
 * _simulate_comms_compute on the same file (pytorch_check.py), where
 * python3 has torch.distributed.pipelining, against both: the whole
 * command (process start and exit included, which PyTorch's figures
 * leave out) and the file read and checked in one process.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_util.h"
#include "ppv_engine.h"

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Runs `ppv check path --semantics sem`; returns its exit code, wall
 * seconds and peak RSS in MiB. */
static int run_check(const char *ppv, const char *path, const char *sem, double *secs,
                     double *rss_mib) {
    const char *argv[] = {ppv, "check", path, "--semantics", sem, "--json", NULL};
    return bench_run((char *const *)argv, NULL, 0, secs, rss_mib);
}

/* Best-of repetitions of the in-process timings, taken in turn (the
 * machine's speed drifts: each figure sees the same drift). */
#define REPS 7

/* One in-process check of low under o, timed; -1 where it fails. */
static double time_check(const ppv_schedule *low, const ppv_check_options *o) {
    ppv_check_report *r = NULL;
    char err[512];
    double t0 = bench_now();
    if (ppv_schedule_check(low, o, &r, err, sizeof err) < 0 || !r->ok) return -1;
    double dt = bench_now() - t0;
    ppv_check_report_free(r);
    return dt;
}

/* The file at path read and checked under eager in this process, as
 * PyTorch's figures are (no process start), timed; -1 where it fails. */
static double time_load_and_check(const char *path) {
    ppv_schedule *s = NULL;
    ppv_check_report *r = NULL;
    ppv_check_options o = ppv_check_defaults();
    char err[512];
    ppv_semantics_parse("eager", &o.sem);
    double t0 = bench_now();
    if (ppv_schedule_load_placeless(path, PPV_DIALECT_AUTO, &s, err, sizeof err) < 0) return -1;
    int rc = ppv_schedule_check(s, &o, &r, err, sizeof err);
    double dt = bench_now() - t0;
    int ok = rc == 0 && r->ok;
    ppv_check_report_free(r);
    ppv_schedule_free(s);
    return ok ? dt : -1;
}

/* Generates and lowers kind(p, m), writes it to path, and stores the best
 * of REPS in-process times: t[j] the check under sems[j], t[3] the check
 * under rendezvous with per-stage costs (every stage its own times,
 * message time and activation: --cost-file), t[5] the file read and
 * checked under eager. Returns the action count, or -1. */
static double build_and_time(const char *kind, int p, int m, const char *path,
                             const char *const *sems, double *t) {
    ppv_gen_params gp = {p, m, 0};
    ppv_schedule *s = NULL, *low = NULL;
    char err[512];
    ppv_check_options o[4];
    for (int j = 0; j < 4; j++) o[j] = ppv_check_defaults();
    if (ppv_generate(kind, &gp, &s, err, sizeof err) < 0 ||
        ppv_schedule_lower(s, &o[0].costs, 0, &low, err, sizeof err) != 0)
        return -1;
    FILE *f = fopen(path, "w");
    if (!f || ppv_schedule_write_csv(low, f, err, sizeof err) < 0 || fclose(f) != 0) return -1;
    ppv_stage_costs sc = {low->nstages, calloc((size_t)low->nstages, sizeof(ppv_stage_cost)), "b"};
    if (!sc.s) return -1;
    for (int32_t k = 0; k < low->nstages; k++)
        sc.s[k] = (ppv_stage_cost){1 + k / 1024.0, 2 + k / 512.0, 1, 0.01, 1 + k, 0, 0};
    for (int j = 0; j < 3; j++) ppv_semantics_parse(sems[j], &o[j].sem);
    ppv_semantics_parse("rendezvous", &o[3].sem);
    o[3].stages = &sc;
    for (int j = 0; j < 6; j++) t[j] = 1e30;
    for (int rep = 0; rep < REPS; rep++) {
        for (int j = 0; j < 4; j++) {
            double dt = time_check(low, &o[j]);
            if (dt < 0) return -1;
            if (dt < t[j]) t[j] = dt;
        }
        double dt = time_load_and_check(path);
        if (dt < 0) return -1;
        if (dt < t[5]) t[5] = dt;
    }
    ppv_stage_costs_free(&sc);
    double n = (double)ppv_schedule_size(low);
    ppv_schedule_free(s);
    ppv_schedule_free(low);
    return n;
}

/* PyTorch's own reading and simulation of the same file (pytorch_check.py,
 * where this Python has torch.distributed.pipelining), once: it takes
 * seconds where ppv takes a hundredth of one. */
static void pytorch_figure(const char *kind, int p, int m, const char *path, double ppv_eager,
                           double ppv_inproc) {
    char *const argv[] = {"python3", PPV_BENCH_PYTORCH, (char *)path, NULL};
    char out[256];
    double secs = 0, rss = 0, parse = 0, sim = 0;
    int code = bench_run(argv, out, sizeof out, &secs, &rss);
    if (code == 0 && sscanf(out, "%lf %lf", &parse, &sim) == 2)
        printf("%-6s %4d %5d  PyTorch's CSV loader %.3f s and _simulate_comms_compute %.3f s "
               "(eager only; %.3f s, %.1f MiB with Python's start): `ppv check --semantics "
               "eager`, the whole command, best of 5, %.4f s: %.0fx faster than the loader and "
               "simulator; the file read and checked in one process as PyTorch's are timed, "
               "best of %d, %.4f s: %.0fx\n",
               kind, p, m, parse, sim, secs, rss, ppv_eager, (parse + sim) / ppv_eager, REPS,
               ppv_inproc, (parse + sim) / ppv_inproc);
    else if (code == 77)
        printf("%-6s %4d %5d  PyTorch: no torch.distributed.pipelining in this python3 (PyTorch "
               "2.4 or later); not compared\n",
               kind, p, m);
    else
        printf("%-6s %4d %5d  PyTorch: %s exited %d\n", kind, p, m, PPV_BENCH_PYTORCH, code);
    fflush(stdout);
}

int main(int argc, char **argv) {
    if (argc != 2 && argc != 4) {
        fprintf(stderr, "usage: %s PPV_BINARY [MAX_P MAX_M]\n", argv[0]);
        return 2;
    }
    int max_p = argc == 4 ? atoi(argv[2]) : 64, max_m = argc == 4 ? atoi(argv[3]) : 1024;
    static const int sizes[][2] = {{4, 16}, {8, 64}, {16, 128}, {32, 256}, {64, 512}, {64, 1024}};
    static const char *kinds[] = {"1f1b", "zbv"};
    static const char *const sems[] = {"rendezvous", "eager", "eager:4M"};
    printf("%-6s %4s %5s %9s  %-10s %10s %10s %10s %9s\n", "kind", "p", "m", "actions", "semantics",
           "check_s", "cmd_best_s", "cmd_med_s", "rss_MiB");
    int rc = 0;
    for (size_t k = 0; k < 2; k++)
        for (size_t z = 0; z < sizeof sizes / sizeof sizes[0]; z++) {
            int p = sizes[z][0], m = sizes[z][1];
            if (p > max_p || m > max_m) continue;
            char path[] = "/tmp/ppv_bench_XXXXXX";
            int fd = mkstemp(path), pfd[2];
            if (fd < 0 || pipe(pfd) < 0) return 2;
            close(fd);
            /* A child builds the schedule and times the library, so this
             * process stays small and the commands' peak RSS is their own
             * (a spawned child starts from its parent's high-water mark). */
            pid_t pid = fork();
            if (pid == 0) {
                close(pfd[0]);
                double out[6] = {0, 0, 0, 0, 0, 0};
                out[4] = build_and_time(kinds[k], p, m, path, sems, out);
                _exit(write(pfd[1], out, sizeof out) == sizeof out && out[4] >= 0 ? 0 : 2);
            }
            close(pfd[1]);
            double got[6];
            int st;
            ssize_t nread = read(pfd[0], got, sizeof got);
            close(pfd[0]);
            if (pid < 0 || waitpid(pid, &st, 0) != pid || nread != sizeof got || !WIFEXITED(st) ||
                WEXITSTATUS(st) != 0) {
                fprintf(stderr, "bench: %s p=%d m=%d could not be built or checked\n", kinds[k],
                        p, m);
                unlink(path);
                return 2;
            }
            double eager_best = 0;
            for (size_t j = 0; j < 3; j++) {
                double secs[5], rss = 0;
                for (int rep = 0; rep < 5; rep++) {
                    double r = 0;
                    int code = run_check(argv[1], path, sems[j], &secs[rep], &r);
                    if (code != 0) {
                        fprintf(stderr, "bench: ppv check exited %d\n", code);
                        rc = 2;
                    }
                    rss = r > rss ? r : rss;
                }
                qsort(secs, 5, sizeof secs[0], cmp_double);
                if (!strcmp(sems[j], "eager")) eager_best = secs[0];
                printf("%-6s %4d %5d %9.0f  %-10s %10.4f %10.4f %10.4f %9.1f\n", kinds[k], p, m,
                       got[4], sems[j], got[j], secs[0], secs[2], rss);
                fflush(stdout);
            }
            printf("%-6s %4d %5d %9.0f  %-10s %10.4f  (per-stage costs: %.3f x uniform)\n",
                   kinds[k], p, m, got[4], "stages", got[3], got[3] / got[0]);
            if (p == max_p && m == max_m)
                pytorch_figure(kinds[k], p, m, path, eager_best, got[5]);
            unlink(path);
        }
    return rc;
}
