/* bench_util.h - what the benchmark programs share: a monotonic clock,
 * and running a command for its exit code, wall time, peak resident set
 * and output. Header-only; the benchmarks are separate programs. */
#ifndef PPV_BENCH_UTIL_H
#define PPV_BENCH_UTIL_H

#include <fcntl.h>
#include <spawn.h>
#include <stddef.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

static inline double bench_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Runs argv (argv[0] looked up in PATH) with its standard output in
 * out[0 .. len-1], NUL-terminated (out NULL: discarded; more than fits is
 * read and dropped). Returns the exit code (-1 when it could not run or
 * was killed), with its wall seconds and peak RSS in MiB (wait4's
 * ru_maxrss). */
static inline int bench_run(char *const *argv, char *out, size_t len, double *secs,
                            double *rss_mib) {
    int fd[2];
    if (pipe(fd) != 0) return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fd[1], 1);
    posix_spawn_file_actions_addclose(&fa, fd[0]);
    pid_t pid;
    double t0 = bench_now();
    int spawned = posix_spawnp(&pid, argv[0], &fa, NULL, argv, environ) == 0;
    posix_spawn_file_actions_destroy(&fa);
    close(fd[1]);
    size_t at = 0;
    char sink[4096];
    for (ssize_t got = 1; spawned && got > 0;) {
        int keep = out && at + 1 < len;
        got = read(fd[0], keep ? out + at : sink, keep ? len - 1 - at : sizeof sink);
        if (keep && got > 0) at += (size_t)got;
    }
    if (out && len) out[at] = '\0';
    close(fd[0]);
    int st;
    struct rusage ru;
    if (!spawned || wait4(pid, &st, 0, &ru) != pid) return -1;
    *secs = bench_now() - t0;
    if (rss_mib) *rss_mib = ru.ru_maxrss / 1024.0;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

#endif
