/* runs.c - work cut into runs of parts that threads take side by side:
 * a file's rows, a schedule's ranks, its message channels.
 *
 * A part is a unit whose work touches only its own data (a rank's
 * program and the cells of its stages, a row's program); the caller
 * keeps one state per run and merges the runs in order, so that the
 * result is the one a single pass gives, whatever the number of runs.
 * The count depends on the processors online, never on timing; which
 * thread takes a run changes nothing but the time.
 *
 * The threads are helpers made once and kept (one for each processor
 * online but this one, up to PPV_MAX_RUNS - 1), each held to a processor
 * other than its caller's. A thread made for each pass cost more than the
 * pass gained: on the 2-processor machines ppv's CI runs on, a new thread
 * began 0.8 ms after it was made, or stayed on its maker's processor and
 * began when the maker's run was over (measured: 1 ms passes of `ppv
 * check` on a 389,000-action file ran one after the other as often as
 * side by side). A helper held to an idle processor wakes in 20-50 us. One
 * that has just worked waits HELPER_SPIN_NS for the next pass, yielding
 * its processor to anything else runnable (a file's passes follow each
 * other closely), then sleeps on a condition variable until work comes;
 * longer spins (2 ms) measured no faster.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "schedule_internal.h"

#define HELPER_SPIN_NS 200000 /* 0.2 ms */

/* The processors online, asked once a process (sysconf reads a file for
 * it, and every pass and every job given a helper asks). */
static long online_cpus(void) {
    static atomic_long online;
    long n = atomic_load_explicit(&online, memory_order_relaxed);
    if (n <= 0) {
        n = sysconf(_SC_NPROCESSORS_ONLN);
        atomic_store_explicit(&online, n > 0 ? n : 1, memory_order_relaxed);
    }
    return n > 0 ? n : 1;
}

int32_t ppv_run_count(int64_t work, int64_t per_run, int32_t parts) {
    long cpus = online_cpus();
    int64_t n = per_run > 0 ? work / per_run : 1;
    if (cpus < n) n = cpus;
    if (parts < n) n = parts;
    return n < 1 ? 1 : n > PPV_MAX_RUNS ? PPV_MAX_RUNS : (int32_t)n;
}

/* A kept thread and the one job it may hold. The claimer (busy 0 -> 1)
 * writes the job, then posted; the helper runs it, then sets done to
 * posted; the claimer, having seen done reach its ticket, clears busy. */
typedef struct helper {
    pthread_t tid;
    atomic_int busy;
    atomic_long posted, done;
    void (*fn)(void *);
    void *arg;
    atomic_int cpu;     /* the processor it is held to, -1: none (set by its claimer) */
    pthread_mutex_t mu; /* with cv: where an idle helper sleeps */
    pthread_cond_t cv;
} helper;

static helper g_helper[PPV_MAX_RUNS - 1];
static atomic_int g_nhelpers; /* made so far: grows under g_make, each made whole first */
static pthread_mutex_t g_make = PTHREAD_MUTEX_INITIALIZER;
static int g_atfork;
#ifdef CPU_SET
static cpu_set_t g_may; /* the processors the first helper's maker could use */
#endif

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void *helper_main(void *p) {
    helper *h = p;
    long seen = 0;
    for (;;) {
        int64_t until = now_ns() + HELPER_SPIN_NS;
        while (atomic_load_explicit(&h->posted, memory_order_acquire) == seen) {
            if (now_ns() < until) {
                sched_yield();
                continue;
            }
            /* asleep until a job is posted; the wait is bounded and
             * looped, and the mutex orders it with the poster's signal */
            pthread_mutex_lock(&h->mu);
            while (atomic_load_explicit(&h->posted, memory_order_acquire) == seen) {
                struct timespec t;
                clock_gettime(CLOCK_REALTIME, &t);
                t.tv_sec += 1;
                pthread_cond_timedwait(&h->cv, &h->mu, &t);
            }
            pthread_mutex_unlock(&h->mu);
        }
        seen = atomic_load_explicit(&h->posted, memory_order_acquire);
        h->fn(h->arg);
        atomic_store_explicit(&h->done, seen, memory_order_release);
    }
    return NULL;
}

/* A forked child has none of its parent's helpers. */
static void forget_helpers(void) {
    atomic_store(&g_nhelpers, 0);
    pthread_mutex_init(&g_make, NULL);
}

/* Holds helper h (claimed, or being made) to a processor of g_may other
 * than the one the caller is on, and, where there is a choice, than the
 * other helpers' (the first made helpers). Where the system refuses or
 * has no other, the kernel places it. */
static void hold_helper(helper *h, int made) {
#ifdef CPU_SET
    cpu_set_t one;
    const cpu_set_t *may = &g_may;
    int here = sched_getcpu(), pick = -1;
    for (int c = 0; c < CPU_SETSIZE && pick < 0; c++) {
        int taken = c == here || !CPU_ISSET(c, may);
        for (int k = 0; k < made && !taken; k++) {
            const helper *o = &g_helper[k];
            taken = o != h && atomic_load_explicit(&o->cpu, memory_order_relaxed) == c;
        }
        if (!taken) pick = c;
    }
    for (int c = 0; c < CPU_SETSIZE && pick < 0; c++)
        if (c != here && CPU_ISSET(c, may)) pick = c;
    if (pick < 0) return;
    CPU_ZERO(&one);
    CPU_SET(pick, &one);
    if (pthread_setaffinity_np(h->tid, sizeof one, &one) == 0)
        atomic_store_explicit(&h->cpu, pick, memory_order_relaxed);
#else
    (void)h, (void)made;
#endif
}

void ppv_helpers_wake(void) {
    long online = online_cpus();
    int want = online - 1 < PPV_MAX_RUNS - 1 ? (int)online - 1 : PPV_MAX_RUNS - 1;
    if (want <= 0 || atomic_load(&g_nhelpers) >= want) return;
    pthread_mutex_lock(&g_make);
    if (!g_atfork) {
        g_atfork = pthread_atfork(NULL, NULL, forget_helpers) == 0;
#ifdef CPU_SET
        if (sched_getaffinity(0, sizeof g_may, &g_may) != 0) CPU_ZERO(&g_may); /* none held */
#endif
    }
    /* Each helper is held to a processor other than the caller's: left
     * to the kernel, a new thread often stayed on its maker's processor
     * for milliseconds, the two taking turns while the other idled. */
    for (int k = atomic_load(&g_nhelpers); g_atfork && k < want; k++) {
        helper *h = &g_helper[k];
        atomic_init(&h->busy, 0);
        atomic_init(&h->posted, 0);
        atomic_init(&h->done, 0);
        atomic_init(&h->cpu, -1);
        pthread_mutex_init(&h->mu, NULL);
        pthread_cond_init(&h->cv, NULL);
        pthread_attr_t at;
        int made = pthread_attr_init(&at) == 0;
        made = made && pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED) == 0 &&
               pthread_create(&h->tid, &at, helper_main, h) == 0;
        pthread_attr_destroy(&at);
        if (!made) break;
        hold_helper(h, k);
        atomic_store(&g_nhelpers, k + 1);
    }
    pthread_mutex_unlock(&g_make);
}

int ppv_beside_start(ppv_beside *b, void (*fn)(void *), void *arg) {
    b->h = NULL;
    ppv_helpers_wake();
    int n = atomic_load(&g_nhelpers);
    for (int k = 0; k < n; k++) {
        helper *h = &g_helper[k];
        int idle = 0;
        if (!atomic_compare_exchange_strong(&h->busy, &idle, 1)) continue;
#ifdef CPU_SET
        /* the caller has come to the helper's processor (an unheld thread
         * goes where the kernel puts it): the helper moves, or the two
         * would take turns on it */
        int held = atomic_load_explicit(&h->cpu, memory_order_relaxed);
        if (held >= 0 && sched_getcpu() == held) hold_helper(h, n);
#endif
        h->fn = fn, h->arg = arg;
        b->ticket = atomic_load_explicit(&h->posted, memory_order_relaxed) + 1;
        atomic_store_explicit(&h->posted, b->ticket, memory_order_release);
        pthread_mutex_lock(&h->mu);
        pthread_cond_signal(&h->cv);
        pthread_mutex_unlock(&h->mu);
        b->h = h;
        return 1;
    }
    return 0;
}

void ppv_beside_join(ppv_beside *b) {
    helper *h = b->h;
    if (!h) return;
    /* the helper is running the job, which ends: the wait is the job's */
    while (atomic_load_explicit(&h->done, memory_order_acquire) != b->ticket) sched_yield();
    atomic_store(&h->busy, 0);
    b->h = NULL;
}

typedef struct run_arg {
    void (*fn)(void *, int32_t, int32_t, int32_t);
    void *arg;
    int32_t run, from, to;
} run_arg;

static void run_job(void *p) {
    run_arg *a = p;
    a->fn(a->arg, a->run, a->from, a->to);
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
    ppv_beside on[PPV_MAX_RUNS];
    int32_t given = 1; /* runs [1, given) went to helpers; the rest run here */
    while (given < nruns && ppv_beside_start(&on[given], run_job, &a[given])) given++;
    run_job(&a[0]);
    for (int32_t k = given; k < nruns; k++) run_job(&a[k]);
    for (int32_t k = 1; k < given; k++) ppv_beside_join(&on[k]);
}
