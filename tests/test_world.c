/* test_world.c - the mock transport under the deterministic scheduler:
 * semantics, groups, collectives, deadlock and hang reports, policies and
 * exact replay from a trace, and clean unwinding after a failure. */
#include <unistd.h>

#include "testutil.h"

typedef struct ring_arg {
    int grouped;
    size_t bytes;
    int32_t got[16]; /* what each rank received */
    int rc[16];      /* its last transport result */
} ring_arg;

/* Each rank sends its id to the right and receives from the left. */
static void ring_main(ppv_transport *t, int32_t rank, void *varg) {
    ring_arg *a = varg;
    int32_t P = 0;
    while (P < 16 && a->rc[P] != -999) P++; /* nranks marked by the test */
    size_t n = a->bytes / sizeof(int32_t);
    int32_t *out = malloc(a->bytes), *in = calloc(n, sizeof *in);
    for (size_t k = 0; k < n; k++) out[k] = rank;
    int rc = 0;
    if (a->grouped) rc = t->ops->group_start(t->impl, rank);
    if (!rc) rc = t->ops->send(t->impl, rank, out, a->bytes, (rank + 1) % P, 0, "SEND right");
    if (!rc) rc = t->ops->recv(t->impl, rank, in, a->bytes, (rank + P - 1) % P, 0, "RECV left");
    if (!rc && a->grouped) rc = t->ops->group_end(t->impl, rank);
    a->got[rank] = rc ? -1 : in[n - 1];
    a->rc[rank] = rc;
    free(out);
    free(in);
}

static ppv_world *world(int32_t P, const char *sem, const char *policy, uint64_t seed) {
    ppv_world_options o;
    memset(&o, 0, sizeof o);
    o.nranks = P;
    assert_int_equal(ppv_semantics_parse(sem, &o.sem), 0);
    assert_int_equal(ppv_policy_parse(policy, &o.policy), 0);
    o.policy.seed = seed;
    o.watchdog_steps = 1000;
    char err[256];
    ppv_world *w = ppv_world_new(&o, err, sizeof err);
    assert_non_null(w);
    return w;
}

static ring_arg ring(int P, int grouped, size_t bytes) {
    ring_arg a;
    memset(&a, 0, sizeof a);
    a.grouped = grouped;
    a.bytes = bytes;
    for (int k = 0; k < 16; k++) a.rc[k] = k < P ? 0 : -999;
    return a;
}

static void test_ring_of_sends_deadlocks_under_rendezvous_with_the_full_cycle(void **state) {
    (void)state;
    ppv_world *w = world(4, "rendezvous", "rr", 0);
    ring_arg a = ring(4, 0, 64);
    ppv_world_result res;
    assert_int_equal(ppv_world_run(w, ring_main, &a, &res), 0);
    assert_int_equal(res.status, PPV_RUN_DEADLOCK);
    assert_int_equal(res.nblocked, 4);
    assert_int_equal(res.ncycle, 4);
    for (int k = 0; k < 4; k++) {
        assert_int_equal(res.cycle[k].rank, k);
        assert_string_equal(res.cycle[k].action, "SEND right");
        assert_int_equal(res.cycle[k].waits_for, (k + 1) % 4);
        assert_int_equal(a.rc[k], PPV_ERR_ABORTED); /* every rank unwound */
    }
    assert_string_equal(res.cycle[0].reason,
                        "send of 64 bytes (rendezvous) waits for rank 1 to post its receive");
    ppv_world_result_free(&res);
    ppv_world_free(w);
}

/* After a deadlock, each rank tries a best-effort send more (as a failed
 * run sends its SHUTDOWN): unwinding runs them, and takes no scheduler
 * decisions, so the trace ends where the deadlock was found. */
static void retry_main(ppv_transport *t, int32_t rank, void *arg) {
    int *rcs = arg;
    int32_t v = rank;
    int rc = t->ops->send(t->impl, rank, &v, sizeof v, (rank + 1) % 3, 0, "SEND right");
    if (rc) rc = t->ops->send(t->impl, rank, &v, sizeof v, (rank + 1) % 3, 0, "SEND again");
    rcs[rank] = rc;
}

static void test_unwinding_after_a_deadlock_takes_no_decisions(void **state) {
    (void)state;
    for (int pol = 0; pol < 2; pol++) {
        ppv_world *w = world(3, "rendezvous", pol ? "random" : "rr", 5);
        int rcs[3] = {0, 0, 0};
        ppv_world_result res;
        assert_int_equal(ppv_world_run(w, retry_main, rcs, &res), 0);
        assert_int_equal(res.status, PPV_RUN_DEADLOCK);
        /* each rank: a step for its send, one that finds it blocked */
        assert_string_equal(res.message, "deadlock after 6 scheduler steps: 3 of 3 ranks blocked");
        assert_int_equal(res.steps, 6);
        int64_t n = 0;
        ppv_world_decisions(w, &n);
        assert_int_equal(n, 6);
        for (int k = 0; k < 3; k++)
            assert_int_equal(rcs[k], PPV_ERR_ABORTED);
        ppv_world_result_free(&res);
        ppv_world_free(w);
    }
}

static void test_ring_completes_eager_grouped_or_below_the_threshold(void **state) {
    (void)state;
    static const struct {
        const char *sem;
        int grouped;
        size_t bytes;
        ppv_run_status want;
    } cases[] = {{"eager", 0, 64, PPV_RUN_DONE},          {"rendezvous", 1, 64, PPV_RUN_DONE},
                 {"eager:64", 0, 64, PPV_RUN_DONE},       {"eager:60", 0, 64, PPV_RUN_DEADLOCK},
                 {"eager:4M", 0, 8 << 20, PPV_RUN_DEADLOCK}, {"eager:4M", 1, 8 << 20, PPV_RUN_DONE}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        ppv_world *w = world(5, cases[c].sem, "rr", 0);
        ring_arg a = ring(5, cases[c].grouped, cases[c].bytes);
        ppv_world_result res;
        assert_int_equal(ppv_world_run(w, ring_main, &a, &res), 0);
        assert_int_equal(res.status, cases[c].want);
        if (cases[c].want == PPV_RUN_DONE)
            for (int k = 0; k < 5; k++) assert_int_equal(a.got[k], (k + 4) % 5);
        ppv_world_result_free(&res);
        ppv_world_free(w);
    }
}

/* Ranks 1..P-1 each send two messages to rank 0, which receives them in a
 * fixed order: the data is the same under every interleaving. */
typedef struct fan_arg {
    int32_t sum[2];
} fan_arg;

static void fan_main(ppv_transport *t, int32_t rank, void *varg) {
    fan_arg *a = varg;
    if (rank == 0) {
        for (int32_t r = 1; r < 4; r++)
            for (int k = 0; k < 2; k++) {
                int32_t v = 0;
                if (t->ops->recv(t->impl, 0, &v, sizeof v, r, 0, "RECV") == 0) a->sum[k] += v * r;
            }
        return;
    }
    for (int k = 0; k < 2; k++) {
        int32_t v = 10 * rank + k;
        if (t->ops->send(t->impl, rank, &v, sizeof v, 0, 0, "SEND")) return;
    }
}

static uint64_t run_fan(const ppv_policy *pol, ppv_world_result *res, fan_arg *a,
                        ppv_world **keep) {
    ppv_world_options o;
    memset(&o, 0, sizeof o);
    o.nranks = 4;
    o.sem.kind = PPV_SEM_EAGER;
    o.policy = *pol;
    char err[256];
    ppv_world *w = ppv_world_new(&o, err, sizeof err);
    memset(a, 0, sizeof *a);
    assert_int_equal(ppv_world_run(w, fan_main, a, res), 0);
    if (keep) *keep = w;
    else ppv_world_free(w);
    return res->trace_digest;
}

static void test_policies_are_deterministic_and_seeds_differ(void **state) {
    (void)state;
    ppv_policy pol;
    ppv_world_result r1, r2;
    fan_arg a1, a2;
    assert_int_equal(ppv_policy_parse("random", &pol), 0);
    pol.seed = 11;
    uint64_t d1 = run_fan(&pol, &r1, &a1, NULL), d2 = run_fan(&pol, &r2, &a2, NULL);
    assert_int_equal(r1.status, PPV_RUN_DONE);
    assert_true(d1 == d2);
    int differ = 0;
    for (uint64_t seed = 12; seed < 20; seed++) {
        pol.seed = seed;
        differ += run_fan(&pol, &r2, &a2, NULL) != d1;
        assert_int_equal(a2.sum[0], a1.sum[0]); /* the data never depends on the order */
        assert_int_equal(a2.sum[1], a1.sum[1]);
    }
    assert_true(differ >= 6);
    assert_int_equal(a1.sum[0], 10 * 1 + 20 * 2 + 30 * 3);
    assert_int_equal(ppv_policy_parse("pct:3", &pol), 0);
    pol.seed = 5;
    pol.pct_steps = 20;
    d1 = run_fan(&pol, &r1, &a1, NULL);
    d2 = run_fan(&pol, &r2, &a2, NULL);
    assert_int_equal(r1.status, PPV_RUN_DONE);
    assert_true(d1 == d2);
    assert_int_equal(ppv_policy_parse("pct:0", &pol), -1);
    assert_int_equal(ppv_policy_parse("fifo", &pol), -1);
}

static void test_a_trace_file_replays_the_run_exactly(void **state) {
    (void)state;
    ppv_policy pol;
    assert_int_equal(ppv_policy_parse("random", &pol), 0);
    pol.seed = 99;
    ppv_world_result res, again;
    fan_arg a, b;
    ppv_world *w;
    uint64_t digest = run_fan(&pol, &res, &a, &w);
    const char *path = tmp_path("fan.trace");
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    FILE *f = fdopen(fd, "w");
    assert_int_equal(ppv_trace_write(f, w), 0);
    fclose(f);
    int64_t n0;
    const int32_t *orig = ppv_world_decisions(w, &n0);
    int32_t *dec, P;
    int64_t n;
    char err[256];
    assert_int_equal(ppv_trace_read(path, INT64_MAX, &dec, &n, &P, err, sizeof err), 0);
    assert_int_equal(n, n0);
    assert_int_equal(P, 4);
    assert_memory_equal(dec, orig, (size_t)n * sizeof *dec);
    ppv_world_free(w);
    ppv_policy rep = {.kind = PPV_POLICY_REPLAY, .replay = dec, .nreplay = n};
    assert_true(run_fan(&rep, &again, &b, NULL) == digest);
    assert_int_equal(again.status, PPV_RUN_DONE);
    assert_int_equal(again.steps, res.steps);
    /* a trace that asks for a rank that cannot run is refused, not followed */
    int32_t bad = dec[n - 1];
    dec[n - 1] = (bad + 1) % 4;
    run_fan(&rep, &again, &b, NULL);
    assert_int_equal(again.status, PPV_RUN_FAILED);
    assert_non_null(strstr(again.message, "trace diverges at step"));
    dec[n - 1] = bad;
    rep.nreplay = n - 1;
    run_fan(&rep, &again, &b, NULL);
    assert_int_equal(again.status, PPV_RUN_FAILED);
    assert_non_null(strstr(again.message, "trace ends after"));
    free(dec);
    /* a damaged file is an error with its place */
    f = fopen(path, "w");
    fputs("ppv-trace 1\nranks 4\ndecisions 3\n0 2\n7 1\n", f);
    fclose(f);
    assert_int_equal(ppv_trace_read(path, INT64_MAX, &dec, &n, &P, err, sizeof err), -1);
    assert_non_null(strstr(err, ":5: bad run '7 1'"));
    /* a few bytes can announce billions of decisions: above the cap the
     * header is refused, and below it nothing is allocated until the runs
     * add up (ASan would fail a 4 TiB allocation) */
    f = fopen(path, "w");
    fputs("ppv-trace 1\nranks 2\ndecisions 400000000\n0 400000000\n", f);
    fclose(f);
    dec = (int32_t *)1;
    assert_int_equal(ppv_trace_read(path, 1 << 20, &dec, &n, &P, err, sizeof err), -1);
    assert_null(dec);
    assert_non_null(strstr(err, ":3: 400000000 decisions (1600000000 bytes in memory) are more "
                                "than the memory limit allows (1048576)"));
    f = fopen(path, "w");
    fputs("ppv-trace 1\nranks 2\ndecisions 1099511627776\n1 3\n0 1\n", f);
    fclose(f);
    assert_int_equal(ppv_trace_read(path, INT64_MAX, &dec, &n, &P, err, sizeof err), -1);
    assert_non_null(strstr(err, ":5: trace truncated or malformed (4 of 1099511627776 decisions)"));
    f = fopen(path, "w");
    fputs("ppv-trace 1\nranks 2\ndecisions 4\n1 3\n0 1\n", f);
    fclose(f);
    assert_int_equal(ppv_trace_read(path, 4, &dec, &n, &P, err, sizeof err), 0);
    assert_int_equal(n, 4);
    assert_int_equal(dec[0] + dec[1] + dec[2] + 10 * dec[3], 3);
    free(dec);
    unlink(path);
}

static void poll_main(ppv_transport *t, int32_t rank, void *arg) {
    (void)arg;
    if (rank == 0)
        while (t->ops->async_error(t->impl, 0) == 0) ppv_world_yield(t, 0); /* a flag never set */
}

static void test_watchdog_reports_a_polling_hang(void **state) {
    (void)state;
    ppv_world *w = world(2, "eager", "rr", 0);
    ppv_world_result res;
    assert_int_equal(ppv_world_run(w, poll_main, NULL, &res), 0);
    assert_int_equal(res.status, PPV_RUN_HANG);
    assert_int_equal(res.nblocked, 1);
    assert_int_equal(res.blocked[0].rank, 0);
    assert_string_equal(res.blocked[0].reason, "runnable, but made no progress");
    assert_string_equal(res.message, "hang: 1001 scheduler steps without progress (watchdog 1000)");
    ppv_world_result_free(&res);
    ppv_world_free(w);
}

typedef struct coll_arg {
    int32_t mesh;
    float sum[4];
    int32_t bcast[4], gathered[4][3];
    int skip_rank, bad_root_rank;
    int rc[4];
} coll_arg;

static void coll_main(ppv_transport *t, int32_t rank, void *varg) {
    coll_arg *a = varg;
    if (rank == 0) return; /* not in the mesh */
    float v = 0.1f * (float)rank;
    int rc = t->ops->allreduce_f32(t->impl, rank, &v, 1, a->mesh, "ALLREDUCE");
    a->sum[rank] = v;
    int32_t b = rank == 1 ? 42 : 0;
    if (!rc) rc = t->ops->broadcast(t->impl, rank, &b, sizeof b, rank == a->bad_root_rank ? 1 : 0,
                                   a->mesh, "BCAST");
    a->bcast[rank] = b;
    int32_t me = rank * 7;
    if (!rc && rank != a->skip_rank)
        rc = t->ops->allgather(t->impl, rank, &me, a->gathered[rank], sizeof me, a->mesh,
                               "ALLGATHER");
    a->rc[rank] = rc;
}

static void test_collectives_reduce_in_rank_order_and_check_agreement(void **state) {
    (void)state;
    for (uint64_t seed = 0; seed < 4; seed++) {
        ppv_world *w = world(4, "rendezvous", "random", seed);
        coll_arg a;
        memset(&a, 0, sizeof a);
        a.skip_rank = a.bad_root_rank = -1;
        int32_t mesh[3] = {1, 2, 3};
        a.mesh = ppv_world_add_comm(w, mesh, 3);
        assert_int_equal(a.mesh, 1);
        ppv_world_result res;
        assert_int_equal(ppv_world_run(w, coll_main, &a, &res), 0);
        assert_int_equal(res.status, PPV_RUN_DONE);
        float want = 0.0f;
        want += 0.1f * 1, want += 0.1f * 2, want += 0.1f * 3;
        for (int r = 1; r < 4; r++) {
            assert_memory_equal(&a.sum[r], &want, sizeof want); /* bitwise, any arrival order */
            assert_int_equal(a.bcast[r], 42);
            for (int k = 0; k < 3; k++) assert_int_equal(a.gathered[r][k], 7 * (k + 1));
        }
        ppv_world_result_free(&res);
        ppv_world_free(w);
    }
    /* a member that never joins: the others deadlock waiting for it */
    ppv_world *w = world(4, "rendezvous", "rr", 0);
    coll_arg a;
    memset(&a, 0, sizeof a);
    a.skip_rank = 3;
    a.bad_root_rank = -1;
    int32_t mesh[3] = {1, 2, 3};
    a.mesh = ppv_world_add_comm(w, mesh, 3);
    ppv_world_result res;
    assert_int_equal(ppv_world_run(w, coll_main, &a, &res), 0);
    assert_int_equal(res.status, PPV_RUN_DEADLOCK);
    assert_int_equal(res.nblocked, 2);
    assert_string_equal(res.blocked[0].action, "ALLGATHER");
    assert_int_equal(res.blocked[0].waits_for, 3);
    assert_int_equal(res.ncycle, 0);
    ppv_world_result_free(&res);
    ppv_world_free(w);
    /* a root that disagrees fails the run, naming the collective */
    w = world(4, "rendezvous", "rr", 0);
    memset(&a, 0, sizeof a);
    a.skip_rank = -1;
    a.bad_root_rank = 2;
    a.mesh = ppv_world_add_comm(w, mesh, 3);
    assert_int_equal(ppv_world_run(w, coll_main, &a, &res), 0);
    assert_int_equal(res.status, PPV_RUN_FAILED);
    assert_string_equal(res.message,
                        "rank 2: collective #1 on communicator 1: member 1 (rank 2) calls broadcast "
                        "'BCAST', 4 bytes from member 1, member 2 (rank 3) broadcast 'BCAST', 4 "
                        "bytes from member 0: the root differs");
    assert_int_equal(a.rc[2], PPV_ERR_MISMATCH);
    assert_int_equal(a.rc[3], PPV_ERR_ABORTED);
    ppv_world_result_free(&res);
    ppv_world_free(w);
}

static void fail_main(ppv_transport *t, int32_t rank, void *arg) {
    int *rcs = arg;
    void *held = malloc(1000); /* must be freed on every path */
    int32_t v = 0;
    if (rank == 1) {
        ppv_world_fail(t, 1, "tripwire: call_id %d is not above %d", 7, 7);
        rcs[rank] = 1;
    } else {
        rcs[rank] = t->ops->recv(t->impl, rank, &v, sizeof v, (rank + 1) % 3, 0, "RECV");
    }
    free(held);
}

static void test_a_failing_rank_aborts_the_others_cleanly(void **state) {
    (void)state;
    ppv_world *w = world(3, "rendezvous", "rr", 0);
    int rcs[3] = {0, 0, 0};
    ppv_world_result res;
    assert_int_equal(ppv_world_run(w, fail_main, rcs, &res), 0);
    assert_int_equal(res.status, PPV_RUN_FAILED);
    assert_int_equal(res.failed_rank, 1);
    assert_string_equal(res.message, "rank 1: tripwire: call_id 7 is not above 7");
    assert_int_equal(rcs[0], PPV_ERR_ABORTED);
    assert_int_equal(rcs[2], PPV_ERR_ABORTED);
    ppv_world_result_free(&res);
    ppv_world_free(w);
}

static void bad_peer_main(ppv_transport *t, int32_t rank, void *arg) {
    (void)arg;
    int32_t v = 0;
    if (rank == 0) t->ops->send(t->impl, 0, &v, sizeof v, 0, 0, "SEND self");
}

static void test_bad_usage_fails_the_run(void **state) {
    (void)state;
    ppv_world *w = world(2, "eager", "rr", 0);
    ppv_world_result res;
    assert_int_equal(ppv_world_run(w, bad_peer_main, NULL, &res), 0);
    assert_int_equal(res.status, PPV_RUN_FAILED);
    assert_string_equal(res.message,
                        "rank 0: SEND self: rank 0 cannot send to rank 0 on communicator 0");
    ppv_world_result_free(&res);
    ppv_world_free(w);
    ppv_world_options o;
    memset(&o, 0, sizeof o);
    char err[128];
    assert_null(ppv_world_new(&o, err, sizeof err));
    assert_string_equal(err, "the mock world takes 1..1024 ranks, not 0");
}

/* A lenient replay forces a prefix of decisions and goes on round-robin:
 * the explorer's minimisation. A strict one refuses to run past its trace. */
static void test_a_lenient_replay_forces_a_prefix_then_goes_round_robin(void **state) {
    (void)state;
    ppv_policy random = {.kind = PPV_POLICY_RANDOM, .seed = 5};
    ppv_world_result res, again;
    fan_arg a, b;
    ppv_world *w = NULL;
    run_fan(&random, &res, &a, &w);
    int64_t n = 0;
    const int32_t *d = ppv_world_decisions(w, &n);
    assert_true(n > 10);
    int prefixes = 0;
    for (int64_t k = 0; k <= n; k += n / 4, prefixes++) {
        ppv_policy prefix = {.kind = PPV_POLICY_REPLAY, .replay = d, .nreplay = k, .lenient = 1};
        ppv_world *w2 = NULL;
        run_fan(&prefix, &again, &b, &w2);
        assert_int_equal(again.status, PPV_RUN_DONE);
        assert_memory_equal(b.sum, a.sum, sizeof a.sum); /* the data never depends on the order */
        int64_t n2 = 0;
        const int32_t *d2 = ppv_world_decisions(w2, &n2);
        assert_true(n2 >= k);
        assert_memory_equal(d2, d, (size_t)k * sizeof *d); /* the prefix is forced */
        if (k == n) assert_true(again.trace_digest == res.trace_digest);
        ppv_world_result_free(&again);
        ppv_world_free(w2);
    }
    assert_true(prefixes >= 5);
    ppv_policy strict = {.kind = PPV_POLICY_REPLAY, .replay = d, .nreplay = n / 2};
    run_fan(&strict, &again, &b, NULL);
    assert_int_equal(again.status, PPV_RUN_FAILED);
    assert_non_null(strstr(again.message, "trace ends after"));
    ppv_world_result_free(&again);
    ppv_world_result_free(&res);
    ppv_world_free(w);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_lenient_replay_forces_a_prefix_then_goes_round_robin),
        cmocka_unit_test(test_ring_of_sends_deadlocks_under_rendezvous_with_the_full_cycle),
        cmocka_unit_test(test_unwinding_after_a_deadlock_takes_no_decisions),
        cmocka_unit_test(test_ring_completes_eager_grouped_or_below_the_threshold),
        cmocka_unit_test(test_policies_are_deterministic_and_seeds_differ),
        cmocka_unit_test(test_a_trace_file_replays_the_run_exactly),
        cmocka_unit_test(test_watchdog_reports_a_polling_hang),
        cmocka_unit_test(test_collectives_reduce_in_rank_order_and_check_agreement),
        cmocka_unit_test(test_a_failing_rank_aborts_the_others_cleanly),
        cmocka_unit_test(test_bad_usage_fails_the_run),
    };
    return cmocka_run_group_tests(tests, NULL, tmp_cleanup);
}
