/* guard.c - a plug-in can never pass a gate it did not pass.
 *
 * A generator plug-in runs inside ppv's process. Left alone, one that
 * calls exit(0) would end `ppv pp` with exit 0 and no report, one that
 * crashes would leave a bare 139, and one that never returns would hang
 * the gate. While the commands that run generators are at work (guard_arm),
 * this file turns each into a failure that names the plug-in, its
 * function, the mesh rank and the envelope (the engine marks every call
 * into a generator: ppv_generator_site):
 *
 *  - exit(), _exit() and _Exit() are defined here and exported from the
 *    executable, so a plug-in's (or its Python's os._exit) calls land
 *    here first; outside generator code they go on to the C library's;
 *  - fatal signals (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT) in
 *    generator code are reported, on an alternate stack; elsewhere the
 *    handler that was there before (the default, or a sanitizer's) runs;
 *  - a watchdog thread ends a call that has run its own code longer than
 *    --call-timeout seconds (the time it waits in ppv's collectives does
 *    not count: the engine unmarks those).
 *
 * Each ends the process with exit 1 (a problem found: PPV-GENERATOR),
 * after the report's failure and result lines (or its JSON object) on
 * standard output and the message on standard error. The guard's state is
 * the process's own, kept here in the command line's layer.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
static const char *const fatal_names[] = {
    "SIGSEGV (an invalid memory access)", "SIGBUS (a bus error)",
    "SIGFPE (an arithmetic fault)", "SIGILL (an illegal instruction)", "SIGABRT (abort)"};
enum { NFATAL = sizeof fatal_signals / sizeof fatal_signals[0] };

static struct {
    atomic_int armed;
    int json;
    double call_timeout_s; /* 0: no bound */
    struct sigaction before[NFATAL];
    atomic_int reporting; /* one report, whichever thread or signal comes first */
} guard = {.call_timeout_s = PPV_GUARD_CALL_TIMEOUT_S};

typedef void (*exit_fn)(int);

/* The C library's function name, past the one defined here (NULL: none). */
static exit_fn next_exit(const char *name) {
    void *sym = dlsym(RTLD_NEXT, name);
    exit_fn fn = NULL;
    if (sym) memcpy(&fn, &sym, sizeof fn);
    return fn;
}

/* The C library's own _exit, found when the guard is armed: a signal
 * handler may not call dlsym. */
static exit_fn libc__exit;

_Noreturn static void real_exit_now(int code) {
    exit_fn fn = libc__exit ? libc__exit : next_exit("_exit");
    if (fn) fn(code);
    syscall(SYS_exit_group, code);
    for (;;) pause();
}

/* ---- the report, built without allocating (a signal handler writes it) ------------------ */

typedef struct text {
    char buf[4096];
    size_t n;
} text;

static void put(text *t, const char *s) {
    while (*s && t->n + 1 < sizeof t->buf) t->buf[t->n++] = *s++;
    t->buf[t->n] = 0;
}

static void put_int(text *t, int64_t v) {
    char d[24];
    int i = 0;
    uint64_t u = v < 0 ? (uint64_t)0 - (uint64_t)v : (uint64_t)v;
    do d[i++] = (char)('0' + u % 10);
    while ((u /= 10) && i < 23);
    if (v < 0) put(t, "-");
    while (i > 0) {
        char c[2] = {d[--i], 0};
        put(t, c);
    }
}

/* s as a JSON string's contents. */
static void put_json(text *t, const char *s) {
    static const char hex[] = "0123456789abcdef";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            char c[3] = {'\\', (char)*p, 0};
            put(t, c);
        } else if (*p < 0x20) {
            char c[7] = {'\\', 'u', '0', '0', hex[*p >> 4], hex[*p & 15], 0};
            put(t, c);
        } else {
            char c[2] = {(char)*p, 0};
            put(t, c);
        }
    }
}

/* "generator NAME VERSION <what> in FUNCTION on mesh rank R (ids)". */
static void put_site(text *t, const ppv_generator_site *s, const char *what) {
    put(t, "generator ");
    put(t, s->name ? s->name : "?");
    put(t, " ");
    put(t, s->version ? s->version : "?");
    put(t, " ");
    put(t, what);
    put(t, " in ");
    put(t, s->function ? s->function : "?");
    if (s->mesh_rank < 0) {
        put(t, " (the process's, before or after every rank's)");
        return;
    }
    put(t, " on mesh rank ");
    put_int(t, s->mesh_rank);
    if (s->call_id < 0) {
        put(t, " (outside any envelope)");
        return;
    }
    put(t, " (call_id ");
    put_int(t, s->call_id);
    put(t, ", chunk_index ");
    put_int(t, s->chunk_index);
    put(t, ", cache_epoch ");
    put_int(t, s->cache_epoch);
    put(t, ")");
}

static void write_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w <= 0) return;
        p += w;
        n -= (size_t)w;
    }
}

/* Says the run failed at s (what it did, then why that fails the run)
 * and ends the process with exit 1. */
_Noreturn static void fail_at(const ppv_generator_site *s, const char *what, const char *why) {
    if (atomic_exchange(&guard.reporting, 1)) { /* another thread is saying it */
        for (;;) pause();
    }
    text msg = {.n = 0};
    put_site(&msg, s, what);
    put(&msg, ": ");
    put(&msg, why);
    text out = {.n = 0};
    /* the JSON object, whole or, when a plug-in's names make it too long
     * for the buffer, without them: never a cut object */
    for (int whole = 1; guard.json && whole >= 0; whole--) {
        out.n = 0;
        put(&out, "{\"ok\":false,\"failure_mode\":\"PPV-GENERATOR\",\"caught_by\":\"plug-in "
                  "guard\",\"message\":\"");
        put_json(&out, whole ? msg.buf : "(too long to show; see standard error)");
        put(&out, "\",\"generator\":\"");
        put_json(&out, whole && s->name ? s->name : "");
        put(&out, "\",\"generator_version\":\"");
        put_json(&out, whole && s->version ? s->version : "");
        put(&out, "\",\"function\":\"");
        put_json(&out, s->function ? s->function : "");
        put(&out, "\",\"mesh_rank\":");
        put_int(&out, s->mesh_rank);
        put(&out, ",\"call_id\":");
        if (s->call_id < 0) put(&out, "null");
        else put_int(&out, s->call_id);
        put(&out, ",\"finished\":false}\n");
        if (out.n + 1 < sizeof out.buf) break; /* it fit */
    }
    if (!guard.json) {
        put(&out, "failure: PPV-GENERATOR caught by the plug-in guard: ");
        put(&out, msg.buf);
        put(&out, "\nresult: PROBLEM (the run did not finish)\n");
    }
    write_all(STDOUT_FILENO, out.buf, out.n);
    text err = {.n = 0};
    put(&err, "ppv ");
    put(&err, g_cmd ? g_cmd : "");
    put(&err, ": PPV-GENERATOR: ");
    put(&err, msg.buf);
    put(&err, "\n");
    write_all(STDERR_FILENO, err.buf, err.n);
    real_exit_now(PPV_EXIT_PROBLEM);
}

/* ---- exit() from a plug-in --------------------------------------------------------------- */

/* Ends the run when generator code asks the process to end; else returns. */
static void refuse_exit(const char *how, int status) {
    const ppv_generator_site *s = atomic_load(&guard.armed) ? ppv_generator_site_now() : NULL;
    if (!s) return;
    fflush(stdout); /* whatever the command printed already comes first */
    text what = {.n = 0};
    put(&what, "called ");
    put(&what, how);
    put(&what, "(");
    put_int(&what, status);
    put(&what, ")");
    fail_at(s, what.buf, "a plug-in may not end ppv's process, so the run did not finish");
}

void exit(int status) {
    refuse_exit("exit", status);
    exit_fn fn = next_exit("exit");
    if (fn) fn(status);
    real_exit_now(status);
}

void _exit(int status) {
    refuse_exit("_exit", status);
    real_exit_now(status);
}

void _Exit(int status) {
    refuse_exit("_Exit", status);
    real_exit_now(status);
}

/* ---- fatal signals ----------------------------------------------------------------------- */

static void on_fatal(int sig) {
    const ppv_generator_site *s = atomic_load(&guard.armed) ? ppv_generator_site_now() : NULL;
    int k = 0;
    while (k < NFATAL && fatal_signals[k] != sig) k++;
    if (s) {
        text what = {.n = 0};
        put(&what, "died of ");
        if (k < NFATAL) put(&what, fatal_names[k]);
        else put_int(&what, sig);
        fail_at(s, what.buf, "the run did not finish");
    }
    /* ppv's own code: what was there before takes it (the fault repeats
     * when this returns; an abort is raised again) */
    if (k < NFATAL) sigaction(sig, &guard.before[k], NULL);
    if (sig == SIGABRT) raise(sig);
}

/* ---- the watchdog ------------------------------------------------------------------------ */

typedef struct seen {
    const ppv_generator_site *site;
    uint64_t entries;
    double since; /* when this call was first seen */
} seen;

enum { WATCH_SLOTS = 256 };

typedef struct watch {
    seen slot[WATCH_SLOTS];
    double now;
    const ppv_generator_site *late;
    double late_for;
} watch;

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void look(void *ctx, int slot, const ppv_generator_site *s, uint64_t entries) {
    watch *w = ctx;
    if (slot < 0 || slot >= WATCH_SLOTS) return;
    seen *p = &w->slot[slot];
    if (p->site != s || p->entries != entries) { /* another call since the last look */
        p->site = s;
        p->entries = entries;
        p->since = w->now;
        return;
    }
    if (w->now - p->since >= guard.call_timeout_s && !w->late) {
        w->late = s;
        w->late_for = w->now - p->since;
    }
}

/* The watchdog's thread and how it is told to stop (guard_disarm): it
 * waits on the condition between looks, so it stops at once. */
static struct {
    pthread_t tid;
    int started, stop;
    pthread_mutex_t lock;
    pthread_cond_t wake;
} dog = {.lock = PTHREAD_MUTEX_INITIALIZER};

static void *watchdog(void *arg) {
    (void)arg;
    static watch w; /* one watchdog a process */
    double tick = guard.call_timeout_s / 8;
    if (tick > 0.5) tick = 0.5;
    if (tick < 0.01) tick = 0.01;
    for (;;) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        long ns = until.tv_nsec + (long)(tick * 1e9);
        until.tv_sec += ns / 1000000000L;
        until.tv_nsec = ns % 1000000000L;
        pthread_mutex_lock(&dog.lock);
        while (!dog.stop && pthread_cond_timedwait(&dog.wake, &dog.lock, &until) == 0) {
        }
        int stop = dog.stop;
        pthread_mutex_unlock(&dog.lock);
        if (stop) return NULL;
        w.now = now_s();
        ppv_generator_sites_visit(look, &w);
        if (w.late) {
            char why[160];
            snprintf(why, sizeof why,
                     "it has not returned after %.1f s of its own code (--call-timeout %g), so "
                     "the run did not finish",
                     w.late_for, guard.call_timeout_s);
            fail_at(w.late, "hung", why);
        }
    }
    return NULL;
}

/* ---- arming ------------------------------------------------------------------------------ */

void guard_set_call_timeout(double seconds) {
    guard.call_timeout_s = seconds;
}

void guard_arm(int json) {
    if (atomic_exchange(&guard.armed, 1)) return;
    guard.json = json;
    libc__exit = next_exit("_exit");
    /* an alternate stack, so a rank whose stack overflowed is still named */
    static char altstack[64 * 1024];
    stack_t ss = {.ss_sp = altstack, .ss_size = sizeof altstack};
    sigaltstack(&ss, NULL);
    for (int k = 0; k < NFATAL; k++) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_fatal;
        sa.sa_flags = SA_ONSTACK;
        sigemptyset(&sa.sa_mask);
        sigaction(fatal_signals[k], &sa, &guard.before[k]);
    }
    if (guard.call_timeout_s > 0) {
        pthread_condattr_t ca;
        pthread_condattr_init(&ca);
        pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
        pthread_cond_init(&dog.wake, &ca);
        pthread_condattr_destroy(&ca);
        dog.started = pthread_create(&dog.tid, NULL, watchdog, NULL) == 0;
        if (!dog.started)
            fprintf(stderr, "ppv %s: warning: cannot start the --call-timeout watchdog\n", g_cmd);
    }
}

void guard_disarm(void) {
    if (!dog.started) return;
    pthread_mutex_lock(&dog.lock);
    dog.stop = 1;
    pthread_cond_signal(&dog.wake);
    pthread_mutex_unlock(&dog.lock);
    pthread_join(dog.tid, NULL);
    dog.started = 0;
    pthread_cond_destroy(&dog.wake);
}
