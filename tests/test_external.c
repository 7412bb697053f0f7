/* test_external.c - external ranks (ppv_ext, engine/world/external.c):
 * OS threads or processes run as a mock world's ranks in lockstep with
 * it. Each run starts one pthread a rank, or (a shared bridge) forks one
 * process a rank, as `ppv fuzz py` does; the world's scheduler alone
 * decides the interleaving, so runs are reproducible, deadlocks are
 * reported with each thread's place, and a thread that fails, never
 * calls, or idles, or a process that dies, is a failure naming its rank,
 * never a hang. Each test runs as threads and again as processes. */
#define _GNU_SOURCE
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "ppv_world.h"

enum { MAXR = 8 };

typedef struct program program;
typedef void (*rank_fn)(program *p, int32_t rank);

/* One run: the bridge, the threads' function and what they saw. */
struct program {
    ppv_ext *x;
    int32_t n;
    rank_fn fn;
    int rc[MAXR];       /* the first failed call's error, or 0 */
    float got[MAXR][4]; /* what each rank received */
    char order[256];    /* the order in which ranks ran their first code, as digits */
    int norder;
};

/* The test's mode: 0 threads, 1 processes (cmocka's prestate). */
static int processes;
static int as_threads = 0, as_processes = 1;

static void use_mode(void **state) {
    processes = state && *state ? *(const int *)*state : 0;
}

/* Processes: the bridge every run of a size reuses (reset between). */
static ppv_ext *shared_x;
static int32_t shared_n;
static double shared_idle;
enum { PAYLOAD = 4096 }; /* a shared bridge's message bound, in these tests */

typedef struct thread_arg {
    program *p;
    int32_t rank;
} thread_arg;

static void *thread_main(void *arg) {
    thread_arg *a = arg;
    if (ppv_ext_begin(a->p->x, a->rank) != 0) {
        ppv_ext_end(a->p->x, a->rank, NULL);
        return NULL;
    }
    a->p->fn(a->p, a->rank);
    return NULL;
}

static void note_ran(program *p, int32_t rank) {
    int k = __atomic_fetch_add(&p->norder, 1, __ATOMIC_ACQ_REL); /* one rank runs at a time */
    if (k < (int)sizeof p->order - 1) p->order[k] = (char)('0' + rank);
}

typedef struct reaper_arg {
    ppv_ext *x;
    pid_t pids[MAXR];
    int32_t n;
} reaper_arg;

/* Processes: takes each rank's process as it goes; one that died before
 * its end is ended with how (as ppv fuzz py's zygote does). */
static void *reaper(void *varg) {
    reaper_arg *a = varg;
    for (int32_t k = 0; k < a->n; k++) {
        int status = 0;
        pid_t pid = waitpid(-1, &status, 0); /* whichever goes first */
        int32_t r = 0;
        while (r < a->n && a->pids[r] != pid) r++;
        if (r == a->n) break;
        char why[128];
        if (WIFSIGNALED(status)) snprintf(why, sizeof why, "killed by signal %d", WTERMSIG(status));
        else snprintf(why, sizeof why, "exited with status %d", WEXITSTATUS(status));
        ppv_ext_end(a->x, r, why); /* nothing when it had ended */
    }
    return NULL;
}

/* Runs fn on n threads (or processes) under policy (rr, random, pct)
 * and seed. */
static void run(program *p, int32_t n, rank_fn fn, const char *sem, const char *policy,
                uint64_t seed, double idle, ppv_world_result *res) {
    memset(p, 0, sizeof *p);
    /* processes: what the ranks write lives in shared memory, copied back */
    program *q = p;
    if (processes) {
        q = mmap(NULL, sizeof *q, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        assert_true(q != MAP_FAILED);
        memset(q, 0, sizeof *q);
    }
    q->n = n;
    q->fn = fn;
    char err[256];
    if (processes && shared_x && shared_n == n && shared_idle == idle) {
        ppv_ext_reset(shared_x);
        q->x = shared_x;
    } else if (processes) {
        ppv_ext_free(shared_x);
        shared_x = q->x = ppv_ext_new_shared(n, idle, PAYLOAD, err, sizeof err);
        shared_n = n;
        shared_idle = idle;
    } else {
        q->x = ppv_ext_new(n, idle, err, sizeof err);
    }
    assert_non_null(q->x);
    ppv_world_options o;
    memset(&o, 0, sizeof o);
    o.nranks = n;
    assert_int_equal(ppv_semantics_parse(sem, &o.sem), 0);
    assert_int_equal(ppv_policy_parse(policy, &o.policy), 0);
    o.policy.seed = seed;
    o.watchdog_steps = 1000;
    ppv_world *w = ppv_world_new(&o, err, sizeof err);
    assert_non_null(w);
    pthread_t th[MAXR], reap;
    thread_arg args[MAXR];
    reaper_arg ra = {q->x, {0}, n};
    for (int32_t r = 0; r < n; r++) {
        args[r] = (thread_arg){q, r};
        if (!processes) {
            assert_int_equal(pthread_create(&th[r], NULL, thread_main, &args[r]), 0);
            continue;
        }
        fflush(NULL);
        ra.pids[r] = fork();
        assert_true(ra.pids[r] >= 0);
        if (ra.pids[r] == 0) {
            thread_main(&args[r]);
            _exit(0);
        }
    }
    if (processes) assert_int_equal(pthread_create(&reap, NULL, reaper, &ra), 0);
    assert_int_equal(ppv_world_run(w, ppv_ext_rank_main, q->x, res), 0);
    if (processes) {
        pthread_join(reap, NULL);
        *p = *q;
        munmap(q, sizeof *q);
    } else {
        for (int32_t r = 0; r < n; r++) pthread_join(th[r], NULL);
        ppv_ext_free(q->x);
    }
    ppv_world_free(w);
}

static int keep(program *p, int32_t rank, int rc) {
    if (rc && !p->rc[rank]) p->rc[rank] = rc;
    return rc;
}

/* ---- programs ---------------------------------------------------------------- */

/* A ring that is safe under rendezvous: even ranks send first. */
static void ring_safe(program *p, int32_t r) {
    note_ran(p, r);
    float out[4] = {(float)r, (float)(10 * r), 0, 0}, in[4] = {0};
    int32_t right = (r + 1) % p->n, left = (r + p->n - 1) % p->n;
    int rc;
    if (r % 2 == 0) {
        rc = keep(p, r, ppv_ext_send(p->x, r, out, sizeof out, right, 0, "ring.py:5 send"));
        if (!rc) rc = keep(p, r, ppv_ext_recv(p->x, r, in, sizeof in, left, 0, "ring.py:6 recv"));
    } else {
        rc = keep(p, r, ppv_ext_recv(p->x, r, in, sizeof in, left, 0, "ring.py:8 recv"));
        if (!rc) rc = keep(p, r, ppv_ext_send(p->x, r, out, sizeof out, right, 0, "ring.py:9 send"));
    }
    memcpy(p->got[r], in, sizeof in);
    ppv_ext_end(p->x, r, NULL);
}

/* Every rank sends first: a cycle under rendezvous. */
static void ring_sends_first(program *p, int32_t r) {
    float out[4] = {(float)r, 0, 0, 0}, in[4] = {0};
    int32_t right = (r + 1) % p->n, left = (r + p->n - 1) % p->n;
    char what[64];
    snprintf(what, sizeof what, "ctl.py:%d send to %d", 40 + r, right);
    int rc = keep(p, r, ppv_ext_send(p->x, r, out, sizeof out, right, 0, what));
    if (!rc) keep(p, r, ppv_ext_recv(p->x, r, in, sizeof in, left, 0, "ctl.py:50 recv"));
    ppv_ext_end(p->x, r, rc ? "DistAborted: the world stopped" : NULL);
}

/* Collectives: an all-reduce, a broadcast from rank 1, an all-gather, a
 * barrier. */
static void collectives(program *p, int32_t r) {
    float v[2] = {(float)(r + 1), 0.5f};
    int rc = keep(p, r, ppv_ext_allreduce_f32(p->x, r, v, 2, 0, "all_reduce"));
    float b[1] = {r == 1 ? 7.25f : -1.0f};
    if (!rc) rc = keep(p, r, ppv_ext_broadcast(p->x, r, b, sizeof b, 1, 0, "broadcast"));
    float mine = (float)(100 + r), all[MAXR] = {0};
    if (!rc) rc = keep(p, r, ppv_ext_allgather(p->x, r, &mine, all, sizeof mine, 0, "gather"));
    if (!rc) rc = keep(p, r, ppv_ext_barrier(p->x, r, 0, "barrier"));
    p->got[r][0] = v[0];
    p->got[r][1] = v[1];
    p->got[r][2] = b[0];
    p->got[r][3] = all[0] + 2 * all[1] + 4 * all[2];
    ppv_ext_end(p->x, r, NULL);
}

/* Rank 0 broadcasts while rank 1 all-reduces: a collective mismatch. */
static void mismatched(program *p, int32_t r) {
    float v[1] = {1};
    int rc = r == 0 ? ppv_ext_broadcast(p->x, r, v, sizeof v, 0, 0, "broadcast")
                    : ppv_ext_allreduce_f32(p->x, r, v, 1, 0, "all_reduce");
    keep(p, r, rc);
    ppv_ext_end(p->x, r, NULL);
}

/* Rank 1 raises after its first receive (a Python exception). */
static void raises(program *p, int32_t r) {
    float v[1] = {3};
    if (r == 0) {
        keep(p, r, ppv_ext_send(p->x, r, v, sizeof v, 1, 0, "send"));
        keep(p, r, ppv_ext_recv(p->x, r, v, sizeof v, 1, 0, "recv reply"));
        ppv_ext_end(p->x, r, NULL);
    } else {
        keep(p, r, ppv_ext_recv(p->x, r, v, sizeof v, 0, 0, "recv"));
        ppv_ext_end(p->x, r, "ValueError: bad header (ctl.py:77)");
    }
}

static void sleep_s(double s) {
    struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    nanosleep(&ts, NULL);
}

/* Rank 1 computes past the idle bound after one call, then calls again. */
static void idles(program *p, int32_t r) {
    float v[1] = {1};
    if (r == 1) {
        keep(p, r, ppv_ext_send(p->x, r, v, sizeof v, 0, 0, "ctl.py:12 send"));
        sleep_s(1.0);
        keep(p, r, ppv_ext_send(p->x, r, v, sizeof v, 0, 0, "ctl.py:14 send"));
    } else {
        keep(p, r, ppv_ext_recv(p->x, r, v, sizeof v, 1, 0, "recv"));
        keep(p, r, ppv_ext_recv(p->x, r, v, sizeof v, 1, 0, "recv"));
    }
    ppv_ext_end(p->x, r, NULL);
}

/* Rank 1 ends without a call; rank 0 waits for it forever. */
static void one_quits(program *p, int32_t r) {
    float v[1] = {1};
    if (r == 0) keep(p, r, ppv_ext_recv(p->x, r, v, sizeof v, 1, 0, "ctl.py:3 recv"));
    ppv_ext_end(p->x, r, NULL);
}

/* Rank 0 receives from any rank: it waits until a message is there, then
 * takes the first rank's it finds; the others each send one. */
static void from_any(program *p, int32_t r) {
    if (r == 0) {
        for (int k = 0; k < p->n - 1; k++) {
            int rc = keep(p, r, ppv_ext_wait_any(p->x, r, 0, "any.py:4 recv from any"));
            int32_t src = -1;
            for (int32_t q = 1; rc == 0 && src < 0 && q < p->n; q++) {
                int there = 0;
                rc = keep(p, r, ppv_ext_probe(p->x, r, q, 0, &there, "any.py:6 probe"));
                if (!rc && there) src = q;
            }
            if (rc || src < 0) {
                ppv_ext_end(p->x, r, rc ? NULL : "wait_any returned with nothing there");
                return;
            }
            float v[1];
            if (keep(p, r, ppv_ext_recv(p->x, r, v, sizeof v, src, 0, "any.py:9 recv"))) break;
            p->got[0][k] = v[0];
            note_ran(p, src);
        }
    } else {
        float v[1] = {(float)(10 * r)};
        keep(p, r, ppv_ext_send(p->x, r, v, sizeof v, 0, 0, "any.py:13 send"));
    }
    ppv_ext_end(p->x, r, NULL);
}

/* Every rank sends right and receives left in one group: no cycle even
 * under rendezvous. */
static void grouped_ring(program *p, int32_t r) {
    float out[1] = {(float)r}, in[1] = {-1};
    int rc = keep(p, r, ppv_ext_group_start(p->x, r, "group"));
    if (!rc) rc = keep(p, r, ppv_ext_send(p->x, r, out, sizeof out, (r + 1) % p->n, 0, "send"));
    if (!rc) rc = keep(p, r, ppv_ext_recv(p->x, r, in, sizeof in, (r + p->n - 1) % p->n, 0, "recv"));
    if (!rc) rc = keep(p, r, ppv_ext_group_end(p->x, r, "group end"));
    p->got[r][0] = in[0];
    ppv_ext_end(p->x, r, NULL);
}

/* Rank 0 waits for a message from any rank that never comes. */
static void waits_forever(program *p, int32_t r) {
    if (r == 0) keep(p, r, ppv_ext_wait_any(p->x, r, 0, "any.py:20 recv from any"));
    ppv_ext_end(p->x, r, NULL);
}

/* ---- tests ------------------------------------------------------------------- */

/* torch's posted operations: rank 0 isends to 1 (the buffer reused at
 * once: the data was taken when posted), joins a broadcast before waiting
 * for it, and waits for the later of two irecvs first; rank 2 ends with an
 * irecv nobody sends to (taken back at its end). */
static void posted(program *p, int32_t r) {
    int rc = 0;
    float b[1] = {r == 2 ? 5.0f : 0.0f};
    if (r == 0) {
        float out[4] = {1, 2, 3, 4}, a[4] = {0}, c[4] = {0};
        int64_t s = 0, ra = 0, rb = 0;
        int done = -1;
        rc = keep(p, r, ppv_ext_isend(p->x, r, out, sizeof out, 1, 0, "isend", &s));
        out[0] = -99; /* the send took its data when posted */
        if (!rc) rc = keep(p, r, ppv_ext_broadcast(p->x, r, b, sizeof b, 2, 0, "broadcast"));
        if (!rc) rc = keep(p, r, ppv_ext_wait_op(p->x, r, s, "wait isend"));
        if (!rc) rc = keep(p, r, ppv_ext_test_op(p->x, r, s, &done, "test"));
        if (!rc) rc = keep(p, r, ppv_ext_irecv(p->x, r, a, sizeof a, 1, 0, "irecv 1", &ra));
        if (!rc) rc = keep(p, r, ppv_ext_irecv(p->x, r, c, sizeof c, 2, 0, "irecv 2", &rb));
        if (!rc) rc = keep(p, r, ppv_ext_wait_op(p->x, r, rb, "wait 2"));
        if (!rc) rc = keep(p, r, ppv_ext_send(p->x, r, out, sizeof out, 1, 0, "go"));
        if (!rc) rc = keep(p, r, ppv_ext_wait_op(p->x, r, ra, "wait 1"));
        p->got[r][0] = a[0];
        p->got[r][1] = c[0];
        p->got[r][2] = (float)done;
        p->got[r][3] = (float)(s == 1 && ra == 2 && rb == 3);
    } else if (r == 1) {
        float in[4] = {0}, go[4] = {0}, back[4] = {11, 0, 0, 0};
        rc = keep(p, r, ppv_ext_broadcast(p->x, r, b, sizeof b, 2, 0, "broadcast"));
        if (!rc) rc = keep(p, r, ppv_ext_recv(p->x, r, in, sizeof in, 0, 0, "recv"));
        if (!rc) rc = keep(p, r, ppv_ext_recv(p->x, r, go, sizeof go, 0, 0, "recv go"));
        if (!rc) rc = keep(p, r, ppv_ext_send(p->x, r, back, sizeof back, 0, 0, "send back"));
        p->got[r][0] = in[0];
        p->got[r][1] = go[0];
    } else {
        float to0[4] = {22, 0, 0, 0}, never[4] = {0};
        int64_t id = 0;
        rc = keep(p, r, ppv_ext_broadcast(p->x, r, b, sizeof b, 2, 0, "broadcast"));
        if (!rc) rc = keep(p, r, ppv_ext_send(p->x, r, to0, sizeof to0, 0, 0, "send"));
        if (!rc) rc = keep(p, r, ppv_ext_irecv(p->x, r, never, sizeof never, 1, 0, "never", &id));
    }
    ppv_ext_end(p->x, r, NULL);
}

/* Rank 0 waits for an isend rank 1 never receives: a deadlock naming the
 * wait, under rendezvous; eager sends complete at once. */
static void unreceived(program *p, int32_t r) {
    if (r == 0) {
        float out[1] = {1};
        int64_t id = 0;
        int rc = keep(p, r, ppv_ext_isend(p->x, r, out, sizeof out, 1, 0, "ctl.py:7 isend", &id));
        if (!rc) keep(p, r, ppv_ext_wait_op(p->x, r, id, "ctl.py:8 wait"));
    }
    ppv_ext_end(p->x, r, NULL);
}

static void test_posted_operations_complete_each_on_its_own(void **state) {
    use_mode(state);
    static const char *const policies[] = {"rr", "random", "pct"};
    for (int k = 0; k < 3; k++)
        for (uint64_t seed = 0; seed < 20; seed++) {
            program p;
            ppv_world_result res;
            run(&p, 3, posted, "rendezvous", policies[k], seed, 10, &res);
            if (res.status != PPV_RUN_DONE) fail_msg("%s seed %llu: %s", policies[k],
                                                     (unsigned long long)seed, res.message);
            assert_true(p.got[1][0] == 1.0f);   /* the data as posted, not the -99 after */
            assert_true(p.got[1][1] == -99.0f); /* the blocking send of the reused buffer */
            assert_true(p.got[0][0] == 11.0f && p.got[0][1] == 22.0f);
            assert_true(p.got[0][2] == 1.0f);   /* waited for: done */
            assert_true(p.got[0][3] == 1.0f);   /* numbered 1, 2, 3 */
            for (int32_t r = 0; r < 3; r++) assert_int_equal(p.rc[r], 0);
            ppv_world_result_free(&res);
        }
    program p;
    ppv_world_result res;
    run(&p, 2, unreceived, "rendezvous", "rr", 0, 10, &res);
    if (res.status != PPV_RUN_DEADLOCK) fail_msg("%d: %s", res.status, res.message);
    assert_int_equal(res.nblocked, 1);
    assert_int_equal(res.blocked[0].rank, 0);
    assert_string_equal(res.blocked[0].action, "ctl.py:8 wait");
    ppv_world_result_free(&res);
    run(&p, 2, unreceived, "eager", "rr", 0, 10, &res);
    assert_int_equal(res.status, PPV_RUN_DONE);
    ppv_world_result_free(&res);
}

static void test_a_safe_ring_completes_under_every_policy(void **state) {
    use_mode(state);
    const char *policies[] = {"rr", "random", "pct:2"};
    for (int k = 0; k < 3; k++)
        for (uint64_t seed = 1; seed <= 20; seed++) {
            program p;
            ppv_world_result res;
            run(&p, 5, ring_safe, "rendezvous", policies[k], seed, 10.0, &res);
            assert_int_equal(res.status, PPV_RUN_DONE);
            for (int32_t r = 0; r < 5; r++) {
                int32_t left = (r + 4) % 5;
                assert_int_equal(p.rc[r], 0);
                assert_true(p.got[r][0] == (float)left);
                assert_true(p.got[r][1] == (float)(10 * left));
            }
            ppv_world_result_free(&res);
        }
}

/* The scheduler decides which thread runs: the same seed gives the same
 * decisions and the same order of the threads' own code; other seeds give
 * other orders. */
static void test_the_interleaving_is_the_seeds(void **state) {
    use_mode(state);
    uint64_t digest[20];
    char first[20][16];
    int distinct = 0;
    for (uint64_t seed = 0; seed < 20; seed++) {
        program p;
        ppv_world_result res;
        run(&p, 5, ring_safe, "rendezvous", "random", seed, 10.0, &res);
        assert_int_equal(res.status, PPV_RUN_DONE);
        digest[seed] = res.trace_digest;
        snprintf(first[seed], sizeof first[seed], "%.*s", p.norder, p.order);
        assert_int_equal(strlen(first[seed]), 5);
        ppv_world_result_free(&res);
        run(&p, 5, ring_safe, "rendezvous", "random", seed, 10.0, &res);
        assert_true(res.trace_digest == digest[seed]);
        assert_string_equal(p.order, first[seed]);
        ppv_world_result_free(&res);
        int seen = 0;
        for (uint64_t k = 0; k < seed; k++) seen |= strcmp(first[k], first[seed]) == 0;
        distinct += !seen;
    }
    assert_true(distinct >= 5); /* 20 seeds, 120 orders of 5 ranks' first steps */
    /* round-robin takes the ranks in order */
    program p;
    ppv_world_result res;
    run(&p, 5, ring_safe, "rendezvous", "rr", 0, 10.0, &res);
    assert_string_equal(p.order, "01234");
    ppv_world_result_free(&res);
}

static void test_a_deadlock_names_every_threads_place(void **state) {
    use_mode(state);
    program p;
    ppv_world_result res;
    run(&p, 3, ring_sends_first, "rendezvous", "random", 3, 10.0, &res);
    assert_int_equal(res.status, PPV_RUN_DEADLOCK);
    assert_int_equal(res.nblocked, 3);
    assert_int_equal(res.ncycle, 3);
    for (int32_t k = 0; k < 3; k++) {
        const ppv_wait *b = &res.blocked[k];
        char want[64];
        snprintf(want, sizeof want, "ctl.py:%d send to %d", 40 + b->rank, (b->rank + 1) % 3);
        assert_string_equal(b->action, want);
        assert_int_equal(b->waits_for, (b->rank + 1) % 3);
        /* the unwinding failed each thread's call, and the thread ended */
        assert_int_equal(p.rc[b->rank], PPV_ERR_ABORTED);
    }
    ppv_world_result_free(&res);
    /* the same program completes when sends are buffered */
    run(&p, 3, ring_sends_first, "eager", "random", 3, 10.0, &res);
    assert_int_equal(res.status, PPV_RUN_DONE);
    ppv_world_result_free(&res);
}

static void test_collectives_give_exact_values(void **state) {
    use_mode(state);
    for (uint64_t seed = 0; seed < 10; seed++) {
        program p;
        ppv_world_result res;
        run(&p, 3, collectives, "rendezvous", "random", seed, 10.0, &res);
        assert_int_equal(res.status, PPV_RUN_DONE);
        for (int32_t r = 0; r < 3; r++) {
            assert_int_equal(p.rc[r], 0);
            assert_true(p.got[r][0] == 6.0f);  /* 1 + 2 + 3 */
            assert_true(p.got[r][1] == 1.5f);  /* 0.5 three times */
            assert_true(p.got[r][2] == 7.25f); /* rank 1's */
            assert_true(p.got[r][3] == 100.0f + 2 * 101.0f + 4 * 102.0f);
        }
        ppv_world_result_free(&res);
    }
}

static void test_a_collective_mismatch_fails_the_run(void **state) {
    use_mode(state);
    program p;
    ppv_world_result res;
    run(&p, 2, mismatched, "rendezvous", "rr", 0, 10.0, &res);
    assert_int_equal(res.status, PPV_RUN_FAILED);
    assert_non_null(strstr(res.message, "broadcast"));
    assert_true(p.rc[0] != 0 || p.rc[1] != 0);
    ppv_world_result_free(&res);
}

static void test_a_threads_exception_fails_the_run_with_its_message(void **state) {
    use_mode(state);
    program p;
    ppv_world_result res;
    run(&p, 2, raises, "rendezvous", "rr", 0, 10.0, &res);
    assert_int_equal(res.status, PPV_RUN_FAILED);
    assert_int_equal(res.failed_rank, 1);
    assert_string_equal(res.message, "rank 1: ValueError: bad header (ctl.py:77)");
    assert_int_equal(p.rc[0], PPV_ERR_ABORTED); /* its receive never came */
    ppv_world_result_free(&res);
}

static void test_a_thread_that_idles_fails_the_run_not_hangs_it(void **state) {
    use_mode(state);
    program p;
    ppv_world_result res;
    run(&p, 2, idles, "eager", "rr", 0, 0.25, &res);
    assert_int_equal(res.status, PPV_RUN_FAILED);
    assert_int_equal(res.failed_rank, 1);
    assert_string_equal(res.message, "rank 1: ran for more than 0.25 s without a call to ppv after "
                                     "its call 1 (ctl.py:12 send)");
    assert_int_equal(p.rc[1], PPV_ERR_ABORTED); /* its late call found the run over */
    ppv_world_result_free(&res);
}

static void test_a_thread_that_never_calls_is_a_deadlock_of_its_peer(void **state) {
    use_mode(state);
    program p;
    ppv_world_result res;
    run(&p, 2, one_quits, "rendezvous", "rr", 0, 10.0, &res);
    assert_int_equal(res.status, PPV_RUN_DEADLOCK);
    assert_int_equal(res.nblocked, 1);
    assert_int_equal(res.blocked[0].rank, 0);
    assert_string_equal(res.blocked[0].action, "ctl.py:3 recv");
    assert_string_equal(res.blocked[0].reason,
                        "receive waits for rank 1 to send (rank 1 has returned)");
    assert_int_equal(res.blocked[0].waits_for, 1);
    ppv_world_result_free(&res);
}

/* A receive from any rank blocks until one is there, takes the senders in
 * the order the scheduler lets them send, and every order comes up. */
static void test_a_receive_from_any_rank_blocks_and_takes_each_order(void **state) {
    use_mode(state);
    int seen_12 = 0, seen_21 = 0;
    for (uint64_t seed = 0; seed < 40; seed++) {
        program p;
        ppv_world_result res;
        run(&p, 3, from_any, "rendezvous", "random", seed, 10.0, &res);
        assert_int_equal(res.status, PPV_RUN_DONE);
        assert_int_equal(p.rc[0], 0);
        assert_int_equal(p.norder, 2);
        /* the values match the order taken */
        assert_true(p.got[0][0] == 10.0f * (float)(p.order[0] - '0'));
        assert_true(p.got[0][1] == 10.0f * (float)(p.order[1] - '0'));
        seen_12 += strcmp(p.order, "12") == 0;
        seen_21 += strcmp(p.order, "21") == 0;
        ppv_world_result_free(&res);
    }
    assert_int_equal(seen_12 + seen_21, 40);
    assert_true(seen_12 > 0 && seen_21 > 0);
    /* one that never comes is a deadlock naming the wait, not a spin */
    program p;
    ppv_world_result res;
    run(&p, 2, waits_forever, "rendezvous", "rr", 0, 10.0, &res);
    assert_int_equal(res.status, PPV_RUN_DEADLOCK);
    assert_int_equal(res.nblocked, 1);
    assert_string_equal(res.blocked[0].action, "any.py:20 recv from any");
    assert_string_equal(res.blocked[0].reason,
                        "receive from any rank of the world waits for a message");
    assert_true(res.steps < 10);
    ppv_world_result_free(&res);
}

static void test_a_grouped_ring_completes_under_rendezvous(void **state) {
    use_mode(state);
    for (uint64_t seed = 0; seed < 10; seed++) {
        program p;
        ppv_world_result res;
        run(&p, 4, grouped_ring, "rendezvous", "random", seed, 10.0, &res);
        assert_int_equal(res.status, PPV_RUN_DONE);
        for (int32_t r = 0; r < 4; r++) assert_true(p.got[r][0] == (float)((r + 3) % 4));
        ppv_world_result_free(&res);
    }
}

/* A thread that never starts: the bridge's idle bound, not a hang. */
static void test_a_thread_that_never_starts_fails_the_run(void **state) {
    use_mode(state);
    char err[256];
    ppv_ext *x = ppv_ext_new(2, 0.05, err, sizeof err);
    assert_non_null(x);
    ppv_world_options o;
    memset(&o, 0, sizeof o);
    o.nranks = 2;
    assert_int_equal(ppv_semantics_parse("rendezvous", &o.sem), 0);
    assert_int_equal(ppv_policy_parse("rr", &o.policy), 0);
    o.watchdog_steps = 1000;
    ppv_world *w = ppv_world_new(&o, err, sizeof err);
    assert_non_null(w);
    ppv_world_result res;
    assert_int_equal(ppv_world_run(w, ppv_ext_rank_main, x, &res), 0);
    assert_int_equal(res.status, PPV_RUN_FAILED);
    assert_string_equal(res.message, "rank 0: its thread did not start within 0.05 s");
    /* late threads find the run over */
    assert_int_equal(ppv_ext_begin(x, 0), PPV_ERR_ABORTED);
    float v = 0;
    assert_int_equal(ppv_ext_send(x, 1, &v, sizeof v, 0, 0, "late"), PPV_ERR_ABORTED);
    assert_int_equal(ppv_ext_send(x, 2, &v, sizeof v, 0, 0, "no rank"), PPV_ERR_USAGE);
    ppv_world_result_free(&res);
    ppv_world_free(w);
    ppv_ext_free(x);
    assert_null(ppv_ext_new(0, 1.0, err, sizeof err));
    assert_string_equal(err, "external ranks: 0 ranks and 1 s idle bound: need at least 1 and "
                             "more than 0");
}

/* Rank 1's process leaves without its end (as a plug-in that calls
 * exit): the rank fails with how its process ended, its peer's wait is
 * unwound, nothing hangs. */
static void dies(program *p, int32_t r) {
    float v[1] = {0};
    if (r == 1) {
        keep(p, r, ppv_ext_send(p->x, r, v, sizeof v, 0, 0, "ctl.py:3 send"));
        _exit(3);
    }
    keep(p, r, ppv_ext_recv(p->x, r, v, sizeof v, 1, 0, "ctl.py:5 recv"));
    keep(p, r, ppv_ext_recv(p->x, r, v, sizeof v, 1, 0, "ctl.py:6 recv"));
    ppv_ext_end(p->x, r, NULL);
}

static void test_a_process_that_dies_fails_its_rank(void **state) {
    use_mode(state);
    program p;
    ppv_world_result res;
    run(&p, 2, dies, "rendezvous", "rr", 0, 10.0, &res);
    assert_int_equal(res.status, PPV_RUN_FAILED);
    assert_int_equal(res.failed_rank, 1);
    assert_string_equal(res.message, "rank 1: exited with status 3");
    assert_int_equal(p.rc[0], PPV_ERR_ABORTED); /* its second receive never came */
    ppv_world_result_free(&res);
}

/* A shared bridge carries PAYLOAD bytes a call: more is PPV_ERR_TOO_BIG,
 * for the data a call takes and for what an all-gather brings back. */
static void too_big(program *p, int32_t r) {
    static char big[PAYLOAD + 1];
    char half[PAYLOAD / 2] = {0}, all[PAYLOAD];
    if (r == 0) keep(p, r, ppv_ext_send(p->x, r, big, sizeof big, 1, 0, "send"));
    else keep(p, r, ppv_ext_recv(p->x, r, big, sizeof big, 0, 0, "recv"));
    p->got[r][0] = (float)ppv_ext_allgather(p->x, r, half, all, sizeof half, 0, "gather");
    float fits = (float)r;
    p->got[r][1] = (float)ppv_ext_broadcast(p->x, r, &fits, sizeof fits, 1, 0, "broadcast");
    p->got[r][2] = fits;
    ppv_ext_end(p->x, r, NULL);
}

static void test_a_message_larger_than_the_payload_is_refused(void **state) {
    use_mode(state);
    program p;
    ppv_world_result res;
    run(&p, 2, too_big, "rendezvous", "rr", 0, 10.0, &res);
    if (res.status != PPV_RUN_DONE) fail_msg("%s", res.message);
    for (int32_t r = 0; r < 2; r++) {
        assert_int_equal(p.rc[r], PPV_ERR_TOO_BIG);
        assert_true(p.got[r][0] == (float)PPV_ERR_TOO_BIG); /* two parts of half the payload */
        assert_true(p.got[r][1] == 0.0f && p.got[r][2] == 1.0f); /* what fits goes on */
    }
    ppv_world_result_free(&res);
}

#define BOTH(t)                                                                             \
    cmocka_unit_test_prestate(t, &as_threads), cmocka_unit_test_prestate(t, &as_processes)

static int free_shared(void **state) {
    (void)state;
    ppv_ext_free(shared_x);
    shared_x = NULL;
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        BOTH(test_a_safe_ring_completes_under_every_policy),
        BOTH(test_the_interleaving_is_the_seeds),
        BOTH(test_a_deadlock_names_every_threads_place),
        BOTH(test_collectives_give_exact_values),
        BOTH(test_a_collective_mismatch_fails_the_run),
        BOTH(test_a_threads_exception_fails_the_run_with_its_message),
        BOTH(test_a_thread_that_idles_fails_the_run_not_hangs_it),
        BOTH(test_a_thread_that_never_calls_is_a_deadlock_of_its_peer),
        cmocka_unit_test(test_a_thread_that_never_starts_fails_the_run),
        BOTH(test_a_receive_from_any_rank_blocks_and_takes_each_order),
        BOTH(test_a_grouped_ring_completes_under_rendezvous),
        BOTH(test_posted_operations_complete_each_on_its_own),
        cmocka_unit_test_prestate(test_a_process_that_dies_fails_its_rank, &as_processes),
        cmocka_unit_test_prestate(test_a_message_larger_than_the_payload_is_refused,
                                  &as_processes),
    };
    return cmocka_run_group_tests(tests, NULL, free_shared);
}
