/* bench_replay.c - `ppv record` and `ppv replay` time and peak memory as
 * the number of microbatches grows: replay should stay bounded by one
 * microbatch plus the model, not grow with the file. A benchmark reports
 * figures; it never fails on them (exit 2 only when a command fails).
 *
 * usage: ppv_bench_replay PPV_BINARY [DIR [WIDTH]]
 * For m in 8, 64, 256, 1024 it generates 1f1b -p 4 -m m, records it with
 * --layers 8 --width WIDTH (default 64) into DIR (default /tmp) and
 * replays it, reporting the file size and each command's wall time and
 * peak resident set (wait4's ru_maxrss). */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench_util.h"

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s PPV_BINARY [DIR [WIDTH]]\n", argv[0]);
        return 2;
    }
    char *ppv = argv[1];
    const char *dir = argc > 2 ? argv[2] : "/tmp";
    char *width = argc > 3 ? argv[3] : "64";
    static const char *ms[] = {"8", "64", "256", "1024"};
    printf("1f1b p=4, 8 layers, width %s: record and replay as microbatches grow\n", width);
    printf("%6s %10s %10s %10s %10s %10s\n", "m", "file MiB", "record s", "record MiB", "replay s",
           "replay MiB");
    for (size_t k = 0; k < sizeof ms / sizeof ms[0]; k++) {
        char sched[512], golden[512];
        snprintf(sched, sizeof sched, "%s/ppv_bench_replay_%s.csv", dir, ms[k]);
        snprintf(golden, sizeof golden, "%s/ppv_bench_replay_%s.h5", dir, ms[k]);
        char *gen[] = {ppv, "gen", "1f1b", "-p", "4", "-m", (char *)ms[k], "-o", sched, NULL};
        char *rec[] = {ppv, "record", golden, sched, "--layers", "8", "--width", width, NULL};
        char *rep[] = {ppv, "replay", golden, NULL};
        double ts, rs, tr, rr, tp, rp;
        struct stat st;
        if (bench_run(gen, NULL, 0, &ts, &rs) != 0 || bench_run(rec, NULL, 0, &tr, &rr) != 0 ||
            bench_run(rep, NULL, 0, &tp, &rp) != 0 || stat(golden, &st) != 0) {
            fprintf(stderr, "m=%s: a command failed\n", ms[k]);
            return 2;
        }
        printf("%6s %10.2f %10.2f %10.1f %10.2f %10.1f\n", ms[k], st.st_size / 1048576.0, tr, rr,
               tp, rp);
        unlink(sched);
        unlink(golden);
    }
    return 0;
}
