/* test_dfs.c - the exhaustive strategy (ppv fuzz --strategy dfs): on
 * small programs that poll, it runs each class of interleavings once and
 * sees exactly what a brute-force enumeration of every interleaving sees
 * (written here, independent of the explorer); it finds a deadlock that
 * only some orders reach and hands back a trace that replays it; and on a
 * wildcard-free schedule, where every order is equivalent, it proves the
 * space with one run. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ppv_fuzz.h"
#include "testutil.h"

/* ---- what a program saw: a set of strings ---------------------------------------- */

#define MAX_SEEN 4096
typedef struct seen {
    char obs[64];  /* this run's observation */
    int nobs;
    char *set[MAX_SEEN];
    int n;
} seen;

static void seen_add(seen *s, const char *o) {
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->set[i], o)) return;
    assert_true(s->n < MAX_SEEN);
    s->set[s->n++] = strdup(o);
}

static int seen_has(const seen *s, const char *o) {
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->set[i], o)) return 1;
    return 0;
}

static void seen_free(seen *s) {
    for (int i = 0; i < s->n; i++) free(s->set[i]);
    s->n = 0;
}

/* ---- the programs ----------------------------------------------------------------- */

typedef struct prog {
    int probes;       /* the poller's rounds */
    int forgets;      /* the seeded bug: a message that has arrived makes it skip rank 2 */
    seen *s;
    int64_t ends;     /* runs judged */
} prog;

static int probe(ppv_transport *t, int32_t rank, int32_t peer) {
    int a = 0;
    int rc = t->ops->probe(t->impl, rank, peer, 0, &a);
    return rc ? -1 : a;
}

/* Rank 0 probes ranks 1 and 2 in turn, `probes` rounds, writing down each
 * answer, then receives both messages; ranks 1 and 2 send one each. */
static void poller(ppv_transport *t, int32_t rank, void *arg) {
    prog *p = arg;
    int32_t v = rank;
    if (rank) {
        t->ops->send(t->impl, rank, &v, sizeof v, 0, 0, "SEND");
        return;
    }
    for (int i = 0; i < p->probes; i++)
        for (int32_t src = 1; src <= 2; src++) {
            int a = probe(t, 0, src);
            if (a < 0) return;
            p->s->obs[p->s->nobs++] = (char)('0' + a);
        }
    t->ops->recv(t->impl, 0, &v, sizeof v, 1, 0, "RECV");
    t->ops->recv(t->impl, 0, &v, sizeof v, 2, 0, "RECV");
}

/* The seeded bug: rank 0 asks whether rank 1's message is there; when it
 * is, it takes it and forgets rank 2, whose rendezvous send then waits
 * forever. Only the orders where rank 1 sends before the probe reach it. */
static void forgetful(ppv_transport *t, int32_t rank, void *arg) {
    (void)arg;
    int32_t v = rank;
    if (rank) {
        t->ops->send(t->impl, rank, &v, sizeof v, 0, 0, "SEND");
        return;
    }
    int a = probe(t, 0, 1);
    if (a < 0) return;
    t->ops->recv(t->impl, 0, &v, sizeof v, 1, 0, "RECV from 1");
    if (!a) t->ops->recv(t->impl, 0, &v, sizeof v, 2, 0, "RECV from 2");
}

static void reset(void *arg) {
    prog *p = arg;
    p->s->nobs = 0;
    memset(p->s->obs, 0, sizeof p->s->obs);
}

/* Records what the run saw (done runs only) and passes it. */
static int judge(void *arg, const ppv_world_result *res, char *why, size_t n) {
    prog *p = arg;
    p->ends++;
    if (res->status != PPV_RUN_DONE) {
        snprintf(why, n, "%s", res->message);
        return -1;
    }
    p->s->obs[p->s->nobs] = '\0';
    seen_add(p->s, p->s->obs);
    return 0;
}

/* ---- brute force: every interleaving, no reduction -------------------------------- */

#define MAX_STEPS 256
typedef struct brute {
    int32_t path[MAX_STEPS];
    unsigned char ready[MAX_STEPS][8];
    int64_t len, forced;
    int32_t P;
} brute;

static int32_t brute_choose(void *ctx, int64_t k, const unsigned char *ready, int32_t P) {
    brute *b = ctx;
    assert_true(k < MAX_STEPS && P <= 8);
    b->P = P;
    if (k < b->forced) return b->path[k];
    memcpy(b->ready[k], ready, (size_t)P);
    for (int32_t r = 0; r < P; r++)
        if (ready[r]) {
            b->path[k] = r;
            b->len = k + 1;
            return r;
        }
    return -1;
}

static void brute_ran(void *ctx, int64_t k, const ppv_step *s) {
    (void)ctx, (void)k, (void)s;
}

/* Every interleaving of the program: the number of runs, with every done
 * run's observation in s and the deadlocked runs counted. */
static int64_t brute_force(ppv_rank_main fn, prog *p, ppv_sem_kind sem, int64_t *deadlocks) {
    brute b;
    memset(&b, 0, sizeof b);
    ppv_explorer ex = {.choose = brute_choose, .ran = brute_ran, .ctx = &b};
    int64_t runs = 0;
    *deadlocks = 0;
    for (;;) {
        ppv_world_options wo;
        memset(&wo, 0, sizeof wo);
        wo.nranks = 3;
        wo.sem.kind = sem;
        wo.policy.kind = PPV_POLICY_EXPLORE;
        wo.policy.explorer = &ex;
        wo.watchdog_steps = 1000;
        wo.stack_bytes = 65536;
        char err[256];
        ppv_world *w = ppv_world_new(&wo, err, sizeof err);
        assert_non_null(w);
        reset(p);
        ppv_world_result res;
        b.len = b.forced;
        assert_int_equal(ppv_world_run(w, fn, p, &res), 0);
        runs++;
        if (res.status == PPV_RUN_DONE) {
            p->s->obs[p->s->nobs] = '\0';
            seen_add(p->s, p->s->obs);
        } else {
            if (res.status != PPV_RUN_DEADLOCK) fprintf(stderr, "brute: %s\n", res.message);
            assert_int_equal(res.status, PPV_RUN_DEADLOCK);
            (*deadlocks)++;
        }
        ppv_world_result_free(&res);
        ppv_world_free(w);
        /* the deepest step with a later runnable rank not yet tried */
        int64_t k = b.len - 1;
        for (; k >= 0; k--) {
            int32_t r = b.path[k] + 1;
            while (r < b.P && !b.ready[k][r]) r++;
            if (r < b.P) {
                b.path[k] = r;
                break;
            }
        }
        if (k < 0) return runs;
        b.forced = k + 1;
    }
}

/* ---- random polling programs ------------------------------------------------------ */

/* Ranks 1 and 2 each send rank 0 one or two messages (rank 2 may first
 * wait for a token from rank 1); rank 0 runs a script of probes, taking a
 * message at once when its probe finds one, and then receives what is
 * left, except that with `forget` a probe that finds rank 1's message makes
 * it forget rank 2's last one (which deadlocks a rendezvous send). What a
 * run sees: the probes' answers and the order of the receives. */
typedef struct rprog {
    int nsend[3];
    int token;         /* rank 1 sends rank 2 a token first; rank 2 waits for it */
    int nprobe, peer[4];
    int forget;
    seen *s;
    int all_pass;      /* judge: record deadlocks too, and go on */
} rprog;

static void note(seen *s, char c) {
    if (s->nobs < (int)sizeof s->obs - 1) s->obs[s->nobs++] = c;
}

static void random_main(ppv_transport *t, int32_t rank, void *arg) {
    rprog *p = arg;
    int32_t v = rank;
    if (rank == 1 && p->token) t->ops->send(t->impl, 1, &v, sizeof v, 2, 0, "TOKEN");
    if (rank == 2 && p->token) t->ops->recv(t->impl, 2, &v, sizeof v, 1, 0, "TOKEN");
    if (rank) {
        for (int i = 0; i < p->nsend[rank]; i++)
            if (t->ops->send(t->impl, rank, &v, sizeof v, 0, 0, "SEND")) return;
        return;
    }
    int left[3] = {0, p->nsend[1], p->nsend[2]};
    for (int i = 0; i < p->nprobe; i++) {
        int32_t src = p->peer[i];
        int a = left[src] ? probe(t, 0, src) : 0;
        if (a < 0) return;
        note(p->s, (char)('0' + a));
        if (a) {
            if (t->ops->recv(t->impl, 0, &v, sizeof v, src, 0, "RECV")) return;
            note(p->s, (char)('a' + src));
            left[src]--;
            if (p->forget && src == 1 && left[2]) left[2]--;
        }
    }
    for (int32_t src = 1; src <= 2; src++)
        while (left[src]-- > 0) {
            if (t->ops->recv(t->impl, 0, &v, sizeof v, src, 0, "RECV")) return;
            note(p->s, (char)('a' + src));
        }
}

static void random_reset(void *arg) {
    rprog *p = arg;
    p->s->nobs = 0;
    memset(p->s->obs, 0, sizeof p->s->obs);
}

static int random_judge(void *arg, const ppv_world_result *res, char *why, size_t n) {
    rprog *p = arg;
    char o[80];
    p->s->obs[p->s->nobs] = '\0';
    snprintf(o, sizeof o, "%s%s", res->status == PPV_RUN_DONE ? "" : "stuck:", p->s->obs);
    seen_add(p->s, o);
    if (res->status != PPV_RUN_DONE && !p->all_pass) {
        snprintf(why, n, "%s", res->message);
        return -1;
    }
    return 0;
}

/* Every order of p, or -1 past `cap` of them. */
static int64_t brute_force_random(rprog *p, ppv_sem_kind sem, int64_t cap) {
    brute b;
    memset(&b, 0, sizeof b);
    ppv_explorer ex = {.choose = brute_choose, .ran = brute_ran, .ctx = &b};
    int64_t runs = 0;
    for (;;) {
        ppv_world_options wo;
        memset(&wo, 0, sizeof wo);
        wo.nranks = 3;
        wo.sem.kind = sem;
        wo.policy.kind = PPV_POLICY_EXPLORE;
        wo.policy.explorer = &ex;
        wo.watchdog_steps = 1000;
        wo.stack_bytes = 65536;
        char err[256];
        ppv_world *w = ppv_world_new(&wo, err, sizeof err);
        assert_non_null(w);
        random_reset(p);
        ppv_world_result res;
        b.len = b.forced;
        assert_int_equal(ppv_world_run(w, random_main, p, &res), 0);
        if (++runs > cap) {
            ppv_world_result_free(&res);
            ppv_world_free(w);
            return -1;
        }
        char why[64];
        random_judge(p, &res, why, sizeof why);
        ppv_world_result_free(&res);
        ppv_world_free(w);
        int64_t k = b.len - 1;
        for (; k >= 0; k--) {
            int32_t r = b.path[k] + 1;
            while (r < b.P && !b.ready[k][r]) r++;
            if (r < b.P) {
                b.path[k] = r;
                break;
            }
        }
        if (k < 0) return runs;
        b.forced = k + 1;
    }
}

static ppv_fuzz_report *dfs(const ppv_fuzz_program *pg);

static void test_random_polling_programs_match_brute_force(void **state) {
    (void)state;
    int want = (int)sweep(30, 8, 4), tried = 0;
    int64_t cap = sweep(60000, 20000, 5000);
    int64_t saved = 0, total = 0, found_stuck = 0;
    for (int seed = 1; tried < want; seed++) {
        uint64_t z = (uint64_t)seed * 0x9E3779B97F4A7C15ULL;
        rprog base;
        memset(&base, 0, sizeof base);
        base.nsend[1] = 1 + (int)(z >> 60) % 2;
        base.nsend[2] = 1 + (int)(z >> 56) % 2;
        base.token = (int)(z >> 52) % 2;
        base.nprobe = 1 + (int)(z >> 48) % 3;
        for (int i = 0; i < base.nprobe; i++) base.peer[i] = 1 + (int)(z >> (40 - 4 * i)) % 2;
        base.forget = (int)(z >> 20) % 3 == 0;
        for (int sem = 0; sem < 2; sem++) {
            ppv_sem_kind kind = sem ? PPV_SEM_RENDEZVOUS : PPV_SEM_EAGER;
            seen all = {0}, explored = {0};
            rprog bp = base, dp = base;
            bp.s = &all;
            bp.all_pass = 1;
            int64_t every = brute_force_random(&bp, kind, cap);
            if (every < 0) { /* too many orders to enumerate here */
                seen_free(&all);
                continue;
            }
            tried++;
            dp.s = &explored;
            dp.all_pass = 1;
            ppv_fuzz_program pg = {.nranks = 3,
                                   .sem = {.kind = kind},
                                   .watchdog_steps = 1000,
                                   .reset = random_reset,
                                   .main = random_main,
                                   .judge = random_judge,
                                   .arg = &dp};
            ppv_fuzz_report *r = dfs(&pg);
            assert_true(r->complete);
            if (explored.n != all.n) {
                for (int i = 0; i < all.n; i++)
                    if (!seen_has(&explored, all.set[i]))
                        fail_msg("seed %d %s: brute force saw %s, dfs did not", seed,
                                 sem ? "rendezvous" : "eager", all.set[i]);
                fail_msg("seed %d: dfs saw %d outcomes, brute force %d", seed, explored.n, all.n);
            }
            for (int i = 0; i < all.n; i++) {
                assert_true(seen_has(&explored, all.set[i]));
                found_stuck += !strncmp(all.set[i], "stuck:", 6);
            }
            /* never more classes than orders, and never fewer than outcomes */
            assert_true(r->classes >= all.n && r->classes <= every);
            if (getenv("PPV_DFS_SIZES"))
                print_message("seed %d sem %d: %lld orders, %lld classes, forget %d token %d "
                              "sends %d %d probes %d\n",
                              seed, sem, (long long)every, (long long)r->classes, base.forget,
                              base.token, base.nsend[1], base.nsend[2], base.nprobe);
            saved += every - r->runs;
            total += every;
            ppv_fuzz_report_free(r);
            seen_free(&all);
            seen_free(&explored);
        }
    }
    print_message("%d programs: %lld orders, dfs ran %lld fewer\n", tried, (long long)total,
                  (long long)saved);
    /* the seeded forgetting deadlocked somewhere (the few small programs
     * valgrind has time for may not include one that does) */
    if (!RUNNING_ON_VALGRIND) assert_true(found_stuck > 0);
    assert_true(saved > total / 2);
}

static ppv_fuzz_report *dfs(const ppv_fuzz_program *pg) {
    ppv_fuzz_options o;
    memset(&o, 0, sizeof o);
    o.strategy = PPV_FUZZ_DFS;
    o.pct_depth = 3;
    o.runs = 100000;
    o.program = pg;
    ppv_fuzz_report *r = NULL;
    char err[512];
    if (ppv_fuzz(&o, &r, err, sizeof err) != 0) fail_msg("ppv_fuzz: %s", err);
    return r;
}

static void test_a_poller_sees_what_every_interleaving_sees_once_per_class(void **state) {
    (void)state;
    for (int sem = 0; sem < 2; sem++) {
        ppv_sem_kind kind = sem ? PPV_SEM_RENDEZVOUS : PPV_SEM_EAGER;
        seen all = {0}, explored = {0};
        prog p = {2, 0, &all, 0};
        int64_t deadlocks;
        int64_t every = brute_force(poller, &p, kind, &deadlocks);
        assert_int_equal(deadlocks, 0);
        /* each sender's message arrives before the first, between or after
         * the two probes of its channel: 3 x 3 answers */
        assert_int_equal(all.n, 9);
        for (const char *o = "0000"; o; o = NULL) assert_true(seen_has(&all, o));
        assert_true(seen_has(&all, "1111"));
        assert_true(seen_has(&all, "0101"));
        assert_false(seen_has(&all, "1000")); /* a message never leaves unreceived */
        assert_true(every > 100);             /* what the reduction saves */

        prog q = {2, 0, &explored, 0};
        ppv_fuzz_program pg = {.nranks = 3,
                               .sem = {.kind = kind},
                               .watchdog_steps = 1000,
                               .reset = reset,
                               .main = poller,
                               .judge = judge,
                               .arg = &q};
        ppv_fuzz_report *r = dfs(&pg);
        assert_false(r->found);
        assert_true(r->complete);
        /* one class per pair of arrival points, each run to its end once */
        assert_int_equal(r->classes, 9);
        assert_int_equal(explored.n, 9);
        for (int i = 0; i < all.n; i++) assert_true(seen_has(&explored, all.set[i]));
        /* the reference (round-robin) is judged too: one end more */
        assert_int_equal(q.ends, 1 + r->classes);
        assert_true(r->runs < every);
        ppv_fuzz_report_free(r);
        seen_free(&all);
        seen_free(&explored);
    }
}

static void test_three_rounds_of_probes_give_sixteen_classes(void **state) {
    (void)state;
    seen all = {0}, explored = {0};
    prog p = {3, 0, &all, 0};
    int64_t deadlocks;
    brute_force(poller, &p, PPV_SEM_EAGER, &deadlocks);
    assert_int_equal(all.n, 16);
    prog q = {3, 0, &explored, 0};
    ppv_fuzz_program pg = {.nranks = 3,
                           .sem = {.kind = PPV_SEM_EAGER},
                           .watchdog_steps = 1000,
                           .reset = reset,
                           .main = poller,
                           .judge = judge,
                           .arg = &q};
    ppv_fuzz_report *r = dfs(&pg);
    assert_true(r->complete);
    assert_int_equal(r->classes, 16);
    assert_int_equal(explored.n, 16);
    ppv_fuzz_report_free(r);
    seen_free(&all);
    seen_free(&explored);
}

/* Runs fn on P ranks under sem, following the decisions of a recorded run. */
static ppv_world_result replay_decisions(ppv_rank_main fn, void *arg, int32_t P, ppv_sem_kind sem,
                                         const ppv_world *recorded) {
    int64_t n = 0;
    ppv_world_options wo;
    memset(&wo, 0, sizeof wo);
    wo.nranks = P;
    wo.sem.kind = sem;
    wo.policy.kind = PPV_POLICY_REPLAY;
    wo.policy.replay = ppv_world_decisions(recorded, &n);
    wo.policy.nreplay = n;
    wo.watchdog_steps = 1000;
    char err[256];
    ppv_world *w = ppv_world_new(&wo, err, sizeof err);
    assert_non_null(w);
    ppv_world_result res;
    assert_int_equal(ppv_world_run(w, fn, arg, &res), 0);
    ppv_world_free(w);
    return res;
}

static void test_a_deadlock_only_some_orders_reach_is_found_and_replays(void **state) {
    (void)state;
    seen all = {0};
    prog p = {0, 1, &all, 0};
    int64_t deadlocks;
    int64_t every = brute_force(forgetful, &p, PPV_SEM_RENDEZVOUS, &deadlocks);
    assert_true(deadlocks > 0 && deadlocks < every); /* some orders only */

    /* round-robin runs rank 0 first: its probe finds nothing, no bug */
    prog q = {0, 1, &all, 0};
    ppv_fuzz_program pg = {.nranks = 3,
                           .sem = {.kind = PPV_SEM_RENDEZVOUS},
                           .watchdog_steps = 1000,
                           .reset = reset,
                           .main = forgetful,
                           .judge = judge,
                           .arg = &q};
    ppv_fuzz_options o;
    memset(&o, 0, sizeof o);
    o.strategy = PPV_FUZZ_RANDOM;
    o.pct_depth = 3;
    o.runs = 1;
    o.program = &pg;
    ppv_fuzz_report *r = NULL;
    char err[512];
    assert_int_equal(ppv_fuzz(&o, &r, err, sizeof err), 0);
    assert_false(r->found);
    ppv_fuzz_report_free(r);

    r = dfs(&pg);
    assert_true(r->found);
    assert_int_equal(r->failing_policy.kind, PPV_POLICY_EXPLORE);
    assert_non_null(strstr(r->failure, "deadlock"));
    /* the minimal trace: rank 1 sends (its second step: the first runs to
     * the send's scheduling point) before rank 0 probes (its second) */
    int64_t n = 0;
    const int32_t *d = ppv_world_decisions(r->minimal, &n);
    assert_true(r->minimal_prefix >= 1);
    int64_t send_at = -1, probe_at = -1;
    for (int64_t i = 0, n0 = 0, n1 = 0; i < n; i++) {
        if (d[i] == 0 && ++n0 == 2) probe_at = i;
        if (d[i] == 1 && ++n1 == 2) send_at = i;
    }
    assert_true(send_at >= 0 && probe_at >= 0);
    assert_true(send_at < probe_at);
    /* the story names the forgotten sender; there is no cycle, rank 0 is done */
    assert_string_equal(r->minimal_story, "blocked: rank 2 at SEND: send of 4 bytes (rendezvous) "
                                          "waits for rank 0 to post its receive (rank 0 has "
                                          "returned)");
    /* and it replays to the same deadlock, every time */
    for (int again = 0; again < 2; again++) {
        ppv_world_result res = replay_decisions(forgetful, &q, 3, PPV_SEM_RENDEZVOUS, r->minimal);
        assert_int_equal(res.status, PPV_RUN_DEADLOCK);
        assert_int_equal(res.nblocked, 1);
        assert_int_equal(res.blocked[0].rank, 2);
        ppv_world_result_free(&res);
    }
    ppv_fuzz_report_free(r);
    seen_free(&all);
}

/* The seeded bug of depth 3: a queue of two slots between a producer
 * (rank 0) and a consumer (rank 1), eager sends. The producer puts item 1,
 * looks (probe) for the consumer's "ready", and only if it is there puts
 * item 2 into the second slot; then it puts the end marker and takes the
 * ready. The consumer looks for item 1 and takes it if it is there, says
 * ready, and looks again: a consumer that took item 1 early and then finds
 * item 2 already in its slot believes the queue was filled behind its
 * back and counts a third item before the end marker: it takes the marker
 * for that item and waits for a marker nobody sends, a deadlock.
 * That takes three ordering constraints: item 1 before the consumer's first
 * look, the ready before the producer's look, item 2 before the consumer's
 * second look. In PCT's terms, the producer must run first and be
 * preempted just before its look (after which the consumer runs, never
 * blocking), then the consumer just before its second look: two change
 * points, so PCT at depth 2 (one change point) cannot reach it in any run,
 * and PCT at depth 3 reaches it with a probability of about 1 / (2 k^2)
 * for a run of k steps. */
static void two_slot_queue(ppv_transport *t, int32_t rank, void *arg) {
    (void)arg;
    int32_t item1 = 1, item2 = 2, end = 0, ready = 7, v = -1;
    if (rank > 1) return; /* brute_force's third rank has nothing to do */
    if (rank == 0) {
        t->ops->send(t->impl, 0, &item1, sizeof item1, 1, 0, "SEND item 1");
        int seen = probe(t, 0, 1);
        if (seen < 0) return;
        if (seen) t->ops->send(t->impl, 0, &item2, sizeof item2, 1, 0, "SEND item 2");
        t->ops->send(t->impl, 0, &end, sizeof end, 1, 0, "SEND end");
        t->ops->recv(t->impl, 0, &v, sizeof v, 1, 0, "RECV ready");
        return;
    }
    int early = probe(t, 1, 0);
    if (early < 0) return;
    if (early) t->ops->recv(t->impl, 1, &v, sizeof v, 0, 0, "RECV item 1");
    t->ops->send(t->impl, 1, &ready, sizeof ready, 0, 0, "SEND ready");
    int again = probe(t, 1, 0);
    if (again < 0) return;
    v = -1;
    if (again && t->ops->recv(t->impl, 1, &v, sizeof v, 0, 0, "RECV next") == 0 && early &&
        v == item2) {
        /* the bug: it counts a third item before the end marker, so it takes
         * the marker for the item and waits for a marker nobody sends */
        if (t->ops->recv(t->impl, 1, &v, sizeof v, 0, 0, "RECV item 3") == 0)
            t->ops->recv(t->impl, 1, &v, sizeof v, 0, 0, "RECV end");
        return;
    }
    while (v != end && t->ops->recv(t->impl, 1, &v, sizeof v, 0, 0, "RECV drain") == 0) {
    }
}

static ppv_fuzz_report *explore_program(const ppv_fuzz_program *pg, ppv_fuzz_strategy st,
                                        int32_t depth, int64_t runs) {
    ppv_fuzz_options o;
    memset(&o, 0, sizeof o);
    o.strategy = st;
    o.pct_depth = depth;
    o.runs = runs;
    o.seed = 1;
    o.program = pg;
    ppv_fuzz_report *r = NULL;
    char err[512];
    if (ppv_fuzz(&o, &r, err, sizeof err) != 0) fprintf(stderr, "%s\n", err);
    assert_non_null(r);
    return r;
}

static void test_seeded_two_slot_queue_needs_pct_depth_3(void **state) {
    (void)state;
    seen all = {0};
    prog p = {0, 0, &all, 0};
    int64_t deadlocks;
    int64_t every = brute_force(two_slot_queue, &p, PPV_SEM_EAGER, &deadlocks);
    assert_true(deadlocks > 0 && deadlocks < every); /* a few orders only */
    print_message("%lld of %lld interleavings deadlock\n", (long long)deadlocks, (long long)every);
    ppv_fuzz_program pg = {.nranks = 2,
                           .sem = {.kind = PPV_SEM_EAGER},
                           .watchdog_steps = 1000,
                           .main = two_slot_queue};
    /* one change point never reaches it */
    ppv_fuzz_report *r = explore_program(&pg, PPV_FUZZ_PCT, 2, 3000);
    assert_int_equal(r->runs, 3000);
    assert_false(r->found);
    ppv_fuzz_report_free(r);
    /* two do, and the minimal trace replays to the same deadlock */
    r = explore_program(&pg, PPV_FUZZ_PCT, 3, 3000);
    assert_true(r->found);
    print_message("pct:3 found it at run %lld\n", (long long)r->failing_run);
    assert_int_equal(r->failing_policy.kind, PPV_POLICY_PCT);
    assert_int_equal(r->failing_policy.depth, 3);
    assert_non_null(strstr(r->failure, "deadlock"));
    assert_non_null(strstr(r->minimal_story, "rank 1 at RECV end"));
    ppv_world_result res = replay_decisions(two_slot_queue, NULL, 2, PPV_SEM_EAGER, r->minimal);
    assert_int_equal(res.status, PPV_RUN_DEADLOCK);
    ppv_world_result_free(&res);
    ppv_fuzz_report_free(r);
    /* and the exhaustive strategy, which needs no luck */
    r = dfs(&pg);
    assert_true(r->found);
    ppv_fuzz_report_free(r);
    seen_free(&all);
}

static void test_a_schedule_without_probes_is_one_class(void **state) {
    (void)state;
    /* sends and receives of fixed peers commute: every order of 1F1B is
     * the same computation, and dfs proves it in one run */
    ppv_schedule *s = gen_ok("1f1b", 4, 8, 0);
    ppv_fuzz_options o;
    memset(&o, 0, sizeof o);
    o.strategy = PPV_FUZZ_DFS;
    o.pct_depth = 3;
    o.runs = 1000;
    o.run = ppv_run_defaults();
    o.schedule = s;
    ppv_fuzz_report *r = NULL;
    char err[512];
    assert_int_equal(ppv_fuzz(&o, &r, err, sizeof err), 0);
    assert_false(r->found);
    assert_true(r->complete);
    assert_int_equal(r->classes, 1);
    assert_int_equal(r->pruned, 0);
    assert_int_equal(r->runs, 2); /* the reference and the one class */
    ppv_fuzz_report_free(r);
    /* the deadlock under rendezvous is found (round-robin already has it) */
    ppv_schedule *bad = load_ok(data_path("rendezvous_only_train.csv"));
    o.schedule = bad;
    o.run.sem.kind = PPV_SEM_RENDEZVOUS;
    assert_int_equal(ppv_fuzz(&o, &r, err, sizeof err), 0);
    assert_true(r->found);
    assert_non_null(strstr(r->failure, "deadlock"));
    ppv_fuzz_report_free(r);
    ppv_schedule_free(bad);
    ppv_schedule_free(s);
}

static void test_dfs_refuses_what_it_cannot_do(void **state) {
    (void)state;
    seen all = {0};
    prog q = {1, 0, &all, 0};
    ppv_fuzz_program pg = {.nranks = 3,
                           .sem = {.kind = PPV_SEM_EAGER},
                           .watchdog_steps = 1000,
                           .reset = reset,
                           .main = poller,
                           .judge = judge,
                           .arg = &q};
    ppv_fuzz_options o;
    memset(&o, 0, sizeof o);
    o.strategy = PPV_FUZZ_DFS;
    o.pct_depth = 3;
    o.runs = 10;
    o.program = &pg;
    o.faults = 1u << PPV_FAULT_DROP;
    ppv_fuzz_report *r = NULL;
    char err[512];
    assert_int_equal(ppv_fuzz(&o, &r, err, sizeof err), -1);
    assert_non_null(strstr(err, "faults are put in by random, pct and portfolio"));
    o.faults = 0;
    o.jobs = 2;
    assert_int_equal(ppv_fuzz(&o, &r, err, sizeof err), -1);
    assert_non_null(strstr(err, "it runs in one job"));
    /* a budget too small to finish says so */
    o.jobs = 1;
    o.runs = 3;
    assert_int_equal(ppv_fuzz(&o, &r, err, sizeof err), 0);
    assert_false(r->found);
    assert_false(r->complete);
    assert_int_equal(r->runs, 3);
    ppv_fuzz_report_free(r);
    seen_free(&all);
}

/* ---- seeded bugs in the pipeline ------------------------------------------------- */

static ppv_pp_options small_pipeline(void) {
    ppv_pp_options pp = ppv_pp_defaults();
    pp.mesh = 1;
    pp.chunks = 4;
    pp.steps = 2;
    pp.control_only = 1;
    return pp;
}

static ppv_fuzz_report *explore_pp(const ppv_pp_options *pp, ppv_fuzz_strategy st, int64_t n) {
    ppv_fuzz_options o;
    memset(&o, 0, sizeof o);
    o.strategy = st;
    o.pct_depth = 3;
    o.runs = n;
    o.pp = pp;
    ppv_fuzz_report *r = NULL;
    char err[512];
    if (ppv_fuzz(&o, &r, err, sizeof err) != 0) fail_msg("ppv_fuzz: %s", err);
    return r;
}

/* Replays a report's minimal trace on the pipeline: the run's report. */
static ppv_pp_report *replay_pp(const ppv_pp_options *pp, const ppv_fuzz_report *r) {
    int64_t n = 0;
    const int32_t *d = ppv_world_decisions(r->minimal, &n);
    ppv_pp_options po = *pp;
    po.policy.kind = PPV_POLICY_REPLAY;
    po.policy.replay = d;
    po.policy.nreplay = n;
    ppv_pp_report *rep = NULL;
    char err[512];
    if (ppv_pp_run(&po, &rep, err, sizeof err) != 0) fail_msg("ppv_pp_run: %s", err);
    return rep;
}

static void test_a_polling_stage0_emits_the_same_video_in_every_class(void **state) {
    (void)state;
    ppv_pp_options pp = small_pipeline();
    ppv_pp_report *plain = NULL, *polled = NULL;
    char err[512];
    assert_int_equal(ppv_pp_run(&pp, &plain, err, sizeof err), 0);
    assert_true(plain->ok);
    pp.poll = 1;
    /* what it does depends on the order: its queue fills differently */
    int32_t fills[8] = {0};
    for (uint64_t seed = 0; seed < 40; seed++) {
        pp.policy.kind = PPV_POLICY_RANDOM;
        pp.policy.seed = seed;
        assert_int_equal(ppv_pp_run(&pp, &polled, err, sizeof err), 0);
        assert_true(polled->ok);
        assert_true(polled->output_digest == plain->output_digest);
        assert_true(polled->max_ready >= 1 && polled->max_ready <= pp.d_out);
        fills[polled->max_ready] = 1;
        ppv_pp_report_free(polled);
    }
    assert_true(fills[1] && fills[2]);
    pp.policy.kind = PPV_POLICY_RR;
    /* and dfs runs every class of it: 4 chunks on one mesh rank */
    ppv_fuzz_report *r = explore_pp(&pp, PPV_FUZZ_DFS, 100000);
    assert_true(r->complete);
    assert_false(r->found);
    assert_int_equal(r->classes, 144);
    ppv_fuzz_report_free(r);
    pp.chunks = 2;
    r = explore_pp(&pp, PPV_FUZZ_DFS, 100000);
    assert_int_equal(r->classes, 9);
    ppv_fuzz_report_free(r);
    ppv_pp_report_free(plain);
}

static void test_seeded_wait_path_that_trusts_a_stale_epoch(void **state) {
    (void)state;
    ppv_pp_options pp = small_pipeline();
    pp.poll = 1;
    pp.inject = PPV_INJECT_OM09; /* a stale result arrives after the cut */
    pp.cuts[pp.ncuts++] = 2;
    ppv_fuzz_report *r = explore_pp(&pp, PPV_FUZZ_DFS, 100000);
    assert_true(r->complete); /* the correct design: every class drops the stale result */
    assert_false(r->found);
    int64_t classes = r->classes;
    ppv_fuzz_report_free(r);

    pp.bug = PPV_PP_BUG_WAIT_TRUSTS_EPOCH;
    r = explore_pp(&pp, PPV_FUZZ_RANDOM, 1); /* round-robin alone: the bug hides */
    assert_false(r->found);
    ppv_fuzz_report_free(r);
    r = explore_pp(&pp, PPV_FUZZ_DFS, 100000);
    assert_true(r->found);
    assert_true(r->failing_run < classes + 1);
    print_message("found at run %lld of %lld classes: %s\n", (long long)r->failing_run,
                  (long long)classes, r->failure);
    assert_non_null(strstr(r->failure, "has call_id 1 after call_id 1: a stale or repeated "
                                       "result was decoded"));
    /* the minimal trace (its forced prefix, then round-robin) replays to
     * the failure the report gives it, every time: here stage 0 took the
     * stale result for chunk 2's and so refuses chunk 2's own */
    for (int again = 0; again < 2; again++) {
        ppv_pp_report *rep = replay_pp(&pp, r);
        assert_false(rep->ok);
        assert_string_equal(rep->message, r->minimal_failure);
        assert_int_equal(rep->dropped_stale, 0);
        ppv_pp_report_free(rep);
    }
    assert_non_null(strstr(r->minimal_failure, "result for call_id 2 chunk_index 2, but the next "
                                               "expected is call_id 3"));
    ppv_fuzz_report_free(r);
    /* the sampling strategies find it too */
    r = explore_pp(&pp, PPV_FUZZ_PORTFOLIO, 200);
    assert_true(r->found);
    print_message("portfolio: found at run %lld\n", (long long)r->failing_run);
    ppv_fuzz_report_free(r);
}

static void test_seeded_stage0_that_decodes_before_it_sends(void **state) {
    (void)state;
    ppv_pp_options pp = small_pipeline();
    pp.d_in = 1;
    pp.bug = PPV_PP_BUG_DECODE_FIRST;
    ppv_fuzz_report *r = explore_pp(&pp, PPV_FUZZ_PORTFOLIO, 20);
    assert_true(r->found);
    print_message("%s\n", r->failure);
    assert_non_null(strstr(r->failure, "stage 0 decodes a result while envelope 1 could be in "
                                       "flight (inflight 0 of D_in 1): the mesh idles"));
    ppv_fuzz_report_free(r);
}

static void test_seeded_leader_that_dies_after_a_header(void **state) {
    (void)state;
    ppv_pp_options pp = small_pipeline();
    pp.mesh = 2;
    pp.bug = PPV_PP_BUG_LEADER_DIES;
    ppv_fuzz_report *r = explore_pp(&pp, PPV_FUZZ_PORTFOLIO, 20);
    assert_true(r->found);
    print_message("%s\n", r->failure);
    assert_non_null(strstr(r->failure, "deadlock"));
    ppv_fuzz_report_free(r);
}

static void test_seeded_worker_that_decides_recompute_itself(void **state) {
    (void)state;
    ppv_pp_options pp = small_pipeline();
    pp.mesh = 2;
    pp.chunks = 6;
    pp.kv_recompute = 1;
    pp.recompute_every = 2;
    pp.cuts[pp.ncuts++] = 3;
    ppv_fuzz_report *r = explore_pp(&pp, PPV_FUZZ_PORTFOLIO, 20);
    assert_false(r->found);
    ppv_fuzz_report_free(r);
    pp.bug = PPV_PP_BUG_WORKER_LOCAL_RECOMPUTE;
    r = explore_pp(&pp, PPV_FUZZ_PORTFOLIO, 20);
    assert_true(r->found);
    print_message("%s\n", r->failure);
    ppv_fuzz_report_free(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_poller_sees_what_every_interleaving_sees_once_per_class),
        cmocka_unit_test(test_three_rounds_of_probes_give_sixteen_classes),
        cmocka_unit_test(test_a_deadlock_only_some_orders_reach_is_found_and_replays),
        cmocka_unit_test(test_seeded_two_slot_queue_needs_pct_depth_3),
        cmocka_unit_test(test_a_schedule_without_probes_is_one_class),
        cmocka_unit_test(test_dfs_refuses_what_it_cannot_do),
        cmocka_unit_test(test_random_polling_programs_match_brute_force),
        cmocka_unit_test(test_a_polling_stage0_emits_the_same_video_in_every_class),
        cmocka_unit_test(test_seeded_wait_path_that_trusts_a_stale_epoch),
        cmocka_unit_test(test_seeded_stage0_that_decodes_before_it_sends),
        cmocka_unit_test(test_seeded_leader_that_dies_after_a_header),
        cmocka_unit_test(test_seeded_worker_that_decides_recompute_itself),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
