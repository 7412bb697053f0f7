/* engine_internal.h - the few helpers every room of the engine uses
 * (schedule, check, gen, world, run, pp); private to the engine layer. A
 * helper one room alone uses lives in that room's own header. This one
 * includes the lowest room's public header alone: each room's own header
 * includes its public one, which includes the rooms below it and no
 * other, so a call that goes up the layers does not compile.
 */
#ifndef PPV_ENGINE_INTERNAL_H
#define PPV_ENGINE_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>

#include "ppv_schedule.h"

/* Formats a message into err and returns -1, so callers can
 * `return ppv_errf(...)`. */
int ppv_errf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* n bytes for an array that grows with the schedule: from 256 KiB on a
 * mapping of its own, its whole 2 MiB ranges on transparent huge pages,
 * zeroed and made resident at once (pages.c). Given back with
 * ppv_free_big only; NULL when out of memory. */
void *ppv_alloc_big(size_t n);
/* ppv_alloc_big's calloc: n zeroed elements of size bytes. */
void *ppv_calloc_big(size_t n, size_t size);
void ppv_free_big(void *p);

/* Work in runs side by side (runs.c): at most this many threads. */
#define PPV_MAX_RUNS 8

/* How many runs for work units of work, one for each per_run units, up to
 * the processors online, parts and PPV_MAX_RUNS; at least 1. */
int32_t ppv_run_count(int64_t work, int64_t per_run, int32_t parts);

/* fn(arg, run, from, to) for nruns runs of consecutive parts [from, to),
 * cut so that each holds about the same work: ends[k] is the work of
 * parts [0, k) (ends[0] = 0, ends[nparts] the whole). Run 0 runs here,
 * the others on idle helpers (here, after run 0, where none is idle);
 * returns when all are done. A run may be empty. */
void ppv_runs(int32_t nruns, const int64_t *ends, int32_t nparts,
              void (*fn)(void *arg, int32_t run, int32_t from, int32_t to), void *arg);

/* Makes the helper threads ppv_runs and ppv_beside_start give work to,
 * once (a process keeps them; a forked child makes its own). A reader of
 * a big file calls it first, so that they are running when work comes. */
void ppv_helpers_wake(void);

/* A job on a helper beside the caller. */
typedef struct ppv_beside {
    void *h; /* the helper, NULL when none took the job */
    long ticket;
} ppv_beside;

/* fn(arg) on an idle helper: 1, or 0 when none is idle (then the caller
 * runs it). ppv_beside_join waits for it (once; where none took it,
 * returns at once). */
int ppv_beside_start(ppv_beside *b, void (*fn)(void *), void *arg);
void ppv_beside_join(ppv_beside *b);

/* The check room's (check/waitfor.c), which the world's deadlock report
 * shares. */
/* The wait-for cycle among blocked ranks (each waits for one rank), found
 * by following waits_for; *cycle is malloc'd (NULL and 0 when the waits end
 * in a finished rank instead of closing). Returns 0, or -1 out of memory. */
struct ppv_wait; /* ppv_check.h */
int ppv_wait_cycle(const struct ppv_wait *blocked, int32_t nblocked, int32_t P,
                   struct ppv_wait **cycle, int32_t *ncycle);

#endif
