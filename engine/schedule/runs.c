/* runs.c - work cut into runs of parts that threads take side by side:
 * a file's rows, a schedule's ranks, its message channels.
 *
 * A part is a unit whose work touches only its own data (a rank's
 * program and the cells of its stages, a row's program); the caller
 * keeps one state per run and merges the runs in order, so that the
 * result is the one a single pass gives, whatever the number of runs.
 * The count depends on the processors online, never on timing.
 */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>
#include <unistd.h>

#include "schedule_internal.h"

int32_t ppv_run_count(int64_t work, int64_t per_run, int32_t parts) {
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    int64_t n = per_run > 0 ? work / per_run : 1;
    if (cpus < n) n = cpus;
    if (parts < n) n = parts;
    return n < 1 ? 1 : n > PPV_MAX_RUNS ? PPV_MAX_RUNS : (int32_t)n;
}

typedef struct run_arg {
    void (*fn)(void *, int32_t, int32_t, int32_t);
    void *arg;
    int32_t run, from, to;
} run_arg;

static void *run_thread(void *p) {
    run_arg *a = p;
    a->fn(a->arg, a->run, a->from, a->to);
    return NULL;
}

void ppv_runs(int32_t nruns, const int64_t *ends, int32_t nparts,
              void (*fn)(void *arg, int32_t run, int32_t from, int32_t to), void *arg) {
    if (nruns < 1) nruns = 1;
    if (nruns > PPV_MAX_RUNS) nruns = PPV_MAX_RUNS;
    run_arg a[PPV_MAX_RUNS];
    int64_t total = ends[nparts];
    for (int32_t k = 0, part = 0; k < nruns; k++) { /* about total / nruns of the work each */
        int64_t upto = k == nruns - 1 ? total : total / nruns * (k + 1);
        a[k] = (run_arg){fn, arg, k, part, part};
        while (a[k].to < nparts && (a[k].to == a[k].from || ends[a[k].to] < upto)) a[k].to++;
        if (k == nruns - 1) a[k].to = nparts;
        part = a[k].to;
    }
    pthread_t tid[PPV_MAX_RUNS];
    int started[PPV_MAX_RUNS] = {0};
    for (int32_t k = 1; k < nruns; k++) /* a thread that cannot start: its run goes here */
        started[k] = pthread_create(&tid[k], NULL, run_thread, &a[k]) == 0;
    run_thread(&a[0]);
    for (int32_t k = 1; k < nruns; k++) {
        if (started[k]) pthread_join(tid[k], NULL);
        else run_thread(&a[k]);
    }
}
