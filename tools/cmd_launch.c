/* cmd_launch.c - ppv launch -n N -- COMMAND [ARGS...]: N copies of a
 * command, one per rank, for the NCCL transport where there is no mpirun.
 * Each copy gets PPV_LAUNCH_RANK, PPV_LAUNCH_SIZE and PPV_LAUNCH_DIR (a
 * fresh private folder, removed at the end), through which rank 0 hands
 * its ncclUniqueId to the others. When a copy ends with a failure, the
 * others are ended (SIGTERM, then SIGKILL two seconds later), so that one
 * dead rank never leaves the rest waiting; the exit status is the first
 * failure's (128 + the signal for one killed), else 0.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

extern char **environ;

/* Removes dir and the files in it (the bootstrap writes no folders). */
static void remove_dir(const char *dir) {
    DIR *d = opendir(dir);
    if (d) {
        struct dirent *e;
        char path[4200];
        while ((e = readdir(d)))
            if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
                snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
                unlink(path);
            }
        closedir(d);
    }
    rmdir(dir);
}

/* The exit status a shell would give for st. */
static int status_code(int st) {
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* Ends the copies still running: SIGTERM, then SIGKILL for any left after
 * two seconds. */
static void end_the_rest(pid_t *pids, int n) {
    for (int k = 0; k < n; k++)
        if (pids[k] > 0) kill(pids[k], SIGTERM);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (;;) {
        int left = 0;
        for (int k = 0; k < n; k++) {
            if (pids[k] <= 0) continue;
            int st;
            if (waitpid(pids[k], &st, WNOHANG) == pids[k])
                pids[k] = 0;
            else
                left++;
        }
        if (!left) return;
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - t0.tv_sec >= 2) break;
        struct timespec ts = {0, 20000000};
        nanosleep(&ts, NULL);
    }
    for (int k = 0; k < n; k++)
        if (pids[k] > 0) {
            kill(pids[k], SIGKILL);
            waitpid(pids[k], NULL, 0);
            pids[k] = 0;
        }
}

enum { LAUNCH_OPTIONS(CLI_OPTION_ID) };
static const cli_option launch_options[] = {LAUNCH_OPTIONS(CLI_OPTION)};

/* ppv launch -n N -- COMMAND [ARGS...]. */
int cmd_launch(int argc, char **argv) {
    long n = 0;
    int c;
    cli_parser p;
    /* the options end at the command, whose own options are its own */
    CLI_BEGIN(&p, argv, launch_options, 1);
    while ((c = cli_next(&p, argc, argv)) != CLI_END) {
        switch (c) {
        case OPT_RANKS:
            n = (long)p.num;
            break;
        case CLI_HELP:
            return print_help();
        default:
            return bad_option();
        }
    }
    if (n == 0) return usage_error("needs -n RANKS%s", "");
    if (optind >= argc) return usage_error("needs the COMMAND to start, after --%s", "");
    char dir[4096];
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/ppv_launch_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir)) {
        fprintf(stderr, "ppv launch: cannot make a folder in %s: %s\n", tmp && *tmp ? tmp : "/tmp",
                strerror(errno));
        return PPV_EXIT_BAD_INPUT;
    }
    pid_t *pids = calloc((size_t)n, sizeof *pids);
    if (!pids) {
        remove_dir(dir);
        fprintf(stderr, "ppv launch: out of memory\n");
        return PPV_EXIT_BAD_INPUT;
    }
    char size_s[24];
    snprintf(size_s, sizeof size_s, "%ld", n);
    int rc = PPV_EXIT_OK, started = 0;
    for (long r = 0; r < n; r++) {
        char rank_s[24];
        snprintf(rank_s, sizeof rank_s, "%ld", r);
        setenv("PPV_LAUNCH_RANK", rank_s, 1);
        setenv("PPV_LAUNCH_SIZE", size_s, 1);
        setenv("PPV_LAUNCH_DIR", dir, 1);
        int e = posix_spawnp(&pids[r], argv[optind], NULL, NULL, argv + optind, environ);
        if (e != 0) {
            fprintf(stderr, "ppv launch: cannot start %s: %s\n", argv[optind], strerror(e));
            pids[r] = 0;
            rc = PPV_EXIT_BAD_INPUT;
            break;
        }
        started++;
    }
    unsetenv("PPV_LAUNCH_RANK");
    unsetenv("PPV_LAUNCH_SIZE");
    unsetenv("PPV_LAUNCH_DIR");
    /* wait for every copy; the first failure ends the rest */
    int running = started;
    if (rc != PPV_EXIT_OK) end_the_rest(pids, (int)n), running = 0;
    while (running > 0) {
        int st;
        pid_t pid = wait(&st);
        if (pid < 0) {
            if (errno == EINTR) continue;
            break;
        }
        int k = 0;
        while (k < n && pids[k] != pid)
            k++;
        if (k == n) continue;
        pids[k] = 0;
        running--;
        int code = status_code(st);
        if (code != 0 && rc == PPV_EXIT_OK) {
            rc = code;
            if (running > 0) {
                fprintf(stderr, "ppv launch: rank %d ended with status %d; ending the other %d\n",
                        k, code, running);
                end_the_rest(pids, (int)n);
                running = 0;
            }
        }
    }
    free(pids);
    remove_dir(dir);
    return rc;
}
