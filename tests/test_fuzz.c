/* test_fuzz.c - the interleaving explorer (ppv fuzz): it checks every run
 * against the round-robin reference, counts distinct interleavings, hands
 * back a failing run's trace that replays to the same failure, and
 * accepts a fault only when it is caught the same way in every order. */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ppv_fuzz.h"
#include "testutil.h"

/* Runs per exploration: fewer under valgrind, which is 50 times slower. */
static int64_t runs(int64_t native) {
    return RUNNING_ON_VALGRIND ? native / 10 : native;
}

static ppv_fuzz_options base(int64_t runs) {
    ppv_fuzz_options o;
    memset(&o, 0, sizeof o);
    o.strategy = PPV_FUZZ_PORTFOLIO;
    o.pct_depth = 3;
    o.runs = runs;
    o.run = ppv_run_defaults();
    return o;
}

static ppv_fuzz_report *fuzz(const ppv_fuzz_options *o) {
    ppv_fuzz_report *r = NULL;
    char err[512];
    if (ppv_fuzz(o, &r, err, sizeof err) != 0) fail_msg("ppv_fuzz: %s", err);
    return r;
}

static void test_a_deadlock_of_the_reference_is_run_0_and_its_trace_replays(void **state) {
    (void)state;
    ppv_schedule *s = load_ok(data_path("rendezvous_only_train.csv"));
    ppv_fuzz_options o = base(50);
    o.schedule = s;
    ppv_fuzz_report *r = fuzz(&o);
    assert_true(r->found);
    assert_int_equal(r->runs, 1); /* the explorer stops at the first failure */
    assert_int_equal(r->failing_run, 0);
    assert_int_equal(r->failing_policy.kind, PPV_POLICY_RR);
    assert_int_equal(r->minimal_prefix, 0);
    assert_non_null(strstr(r->failure, "deadlock after 7 scheduler steps: 2 of 2 ranks blocked"));
    /* its story: who waits for what, and the cycle */
    assert_string_equal(r->minimal_story,
                        "blocked: rank 0 at 0SEND_F1: send of 512 bytes (rendezvous) waits for "
                        "rank 1 to post its receive; rank 1 at 1SEND_F0: send of 512 bytes "
                        "(rendezvous) waits for rank 0 to post its receive\ncycle: 0 -> 1 -> 0");
    /* the minimal trace replays exactly, to the same deadlock */
    int64_t n = 0;
    const int32_t *d = ppv_world_decisions(r->minimal, &n);
    assert_int_equal(n, 7);
    ppv_run_options ro = ppv_run_defaults();
    ro.policy.kind = PPV_POLICY_REPLAY;
    ro.policy.replay = d;
    ro.policy.nreplay = n;
    ppv_run_report *rep = NULL;
    char err[256];
    assert_int_equal(ppv_run(s, &ro, &rep, err, sizeof err), 0);
    assert_int_equal(rep->world.status, PPV_RUN_DEADLOCK);
    assert_int_equal(rep->world.ncycle, 2);
    ppv_run_report_free(rep);
    ppv_fuzz_report_free(r);
    ppv_schedule_free(s);
}

static void test_a_clean_schedule_passes_every_interleaving(void **state) {
    (void)state;
    ppv_schedule *s = gen_ok("zbv", 2, 4, 0);
    ppv_fuzz_options o = base(runs(60));
    o.schedule = s;
    ppv_fuzz_report *r = fuzz(&o);
    assert_false(r->found);
    assert_int_equal(r->runs, runs(60));
    assert_true(r->distinct >= runs(60) / 2); /* seeds and strategies really change the order */
    assert_null(r->failing);
    ppv_fuzz_report_free(r);
    ppv_schedule_free(s);
}

static void test_the_pipeline_keeps_its_output_in_every_interleaving(void **state) {
    (void)state;
    ppv_pp_options pp = ppv_pp_defaults();
    pp.chunks = 4;
    pp.steps = 2;
    pp.control_only = 1;
    ppv_fuzz_options o = base(runs(200));
    o.pp = &pp;
    static const ppv_fuzz_strategy strategies[] = {PPV_FUZZ_RANDOM, PPV_FUZZ_PCT,
                                                   PPV_FUZZ_PORTFOLIO};
    for (int k = 0; k < 3; k++) {
        o.strategy = strategies[k];
        ppv_fuzz_report *r = fuzz(&o);
        assert_false(r->found);
        assert_int_equal(r->runs, runs(200));
        assert_true(r->distinct >= runs(200) / 2);
        ppv_fuzz_report_free(r);
    }
}

static void test_a_fault_passes_only_when_caught_the_same_way_in_every_order(void **state) {
    (void)state;
    ppv_pp_options pp = ppv_pp_defaults();
    pp.chunks = 4;
    pp.steps = 2;
    pp.control_only = 1;
    ppv_fuzz_options o = base(runs(100));
    o.pp = &pp;
    static const ppv_pp_inject caught[] = {PPV_INJECT_OM08, PPV_INJECT_EXTRA_CALL,
                                           PPV_INJECT_OM13, PPV_INJECT_DUPLICATE};
    for (size_t k = 0; k < sizeof caught / sizeof caught[0]; k++) {
        pp.inject = caught[k];
        ppv_fuzz_report *r = fuzz(&o);
        if (r->found) fail_msg("%s: %s", ppv_pp_inject_token(caught[k]), r->failure);
        assert_int_equal(r->runs, runs(100));
        ppv_fuzz_report_free(r);
    }
    /* with the leader's check taken out, OM-07 goes through: a failure */
    pp.inject = PPV_INJECT_OM07;
    pp.skip_points = 1u << PPV_POINT_LEADER;
    ppv_fuzz_report *r = fuzz(&o);
    assert_true(r->found);
    assert_int_equal(r->failing_run, 0);
    assert_string_equal(r->failure, "OM-07 went unnoticed: the run completed");
    ppv_fuzz_report_free(r);
}

static void test_bad_options_are_refused(void **state) {
    (void)state;
    ppv_fuzz_options o = base(0);
    ppv_fuzz_report *r = (ppv_fuzz_report *)1;
    char err[256];
    assert_int_equal(ppv_fuzz(&o, &r, err, sizeof err), -1);
    assert_null(r);
    assert_string_equal(err, "give the explorer one target: a schedule, the pipeline or a program");
    ppv_pp_options pp = ppv_pp_defaults();
    o.pp = &pp;
    assert_int_equal(ppv_fuzz(&o, &r, err, sizeof err), -1);
    assert_string_equal(err, "give a number of runs or a time");
    o.runs = 1;
    o.pct_depth = 1;
    assert_int_equal(ppv_fuzz(&o, &r, err, sizeof err), -1);
    assert_string_equal(err, "PCT depth 1: 2 to 64");
    ppv_fuzz_strategy st;
    assert_int_equal(ppv_fuzz_strategy_parse("bfs", &st), -1);
    assert_int_equal(ppv_fuzz_strategy_parse("dfs", &st), 0);
    assert_int_equal(st, PPV_FUZZ_DFS);
    assert_int_equal(ppv_fuzz_strategy_parse("pct", &st), 0);
    assert_int_equal(st, PPV_FUZZ_PCT);
}

/* Workers take runs in order and the first failing run is reported, so the
 * verdict, the run counts and the distinct interleavings do not depend on
 * how many there are. */
static void test_the_report_is_the_same_for_any_number_of_workers(void **state) {
    (void)state;
    ppv_pp_options pp = ppv_pp_defaults();
    pp.chunks = 4;
    pp.steps = 2;
    pp.control_only = 1;
    pp.envelope_digest = 0; /* the contract without it: corrupt finds the gap */
    for (int faults = 0; faults < 2; faults++) {
        ppv_fuzz_options o = base(runs(200));
        o.pp = &pp;
        o.faults = faults ? 1u << PPV_FAULT_CORRUPT : 0;
        ppv_fuzz_report *r[3];
        for (int j = 0; j < 3; j++) {
            o.jobs = j + 1;
            r[j] = fuzz(&o);
        }
        for (int j = 1; j < 3; j++) {
            assert_int_equal(r[j]->found, r[0]->found);
            assert_int_equal(r[j]->runs, r[0]->runs);
            assert_int_equal(r[j]->distinct, r[0]->distinct);
            assert_int_equal(r[j]->failing_run, r[0]->failing_run);
            assert_int_equal(r[j]->minimal_prefix, r[0]->minimal_prefix);
        }
        assert_int_equal(r[0]->found, faults); /* corrupt finds the envelope gap */
        for (int j = 0; j < 3; j++)
            ppv_fuzz_report_free(r[j]);
    }
}

/* ---- campaigns across processes, as threads ------------------------------------- */

/* A campaign's processes as threads of this one: the allgather of
 * ppv_fuzz_campaign through a barrier (each posts its buffer, all copy,
 * all wait before the buffers change). What mpirun gives `ppv fuzz`
 * (test_mpi.c runs that), here under the sanitizers and valgrind too. */
typedef struct threads_campaign {
    pthread_barrier_t bar;
    int32_t size;
    const void *posted[4];
} threads_campaign;

typedef struct campaign_member {
    threads_campaign *all;
    ppv_fuzz_campaign c;
    ppv_fuzz_options o;
    ppv_fuzz_report *r;
    int gathers;
} campaign_member;

static int threads_allgather(void *ctx, const void *send, void *recv, size_t bytes, char *err,
                             size_t errlen) {
    (void)err, (void)errlen;
    campaign_member *m = ctx;
    threads_campaign *t = m->all;
    t->posted[m->c.rank] = send;
    pthread_barrier_wait(&t->bar);
    for (int32_t i = 0; i < t->size; i++)
        memcpy((char *)recv + (size_t)i * bytes, t->posted[i], bytes);
    pthread_barrier_wait(&t->bar);
    m->gathers++;
    return 0;
}

static void *campaign_thread(void *arg) {
    campaign_member *m = arg;
    m->r = fuzz(&m->o);
    return NULL;
}

/* Runs o as a campaign of n threads; each one's report in r[]. */
static void campaign(const ppv_fuzz_options *o, int32_t n, campaign_member *m) {
    threads_campaign t;
    memset(&t, 0, sizeof t);
    t.size = n;
    pthread_barrier_init(&t.bar, NULL, (unsigned)n);
    pthread_t tid[4];
    for (int32_t i = 0; i < n; i++) {
        m[i] = (campaign_member){&t, {i, n, threads_allgather, &m[i]}, *o, NULL, 0};
        m[i].o.campaign = &m[i].c;
    }
    for (int32_t i = 0; i < n; i++)
        assert_int_equal(pthread_create(&tid[i], NULL, campaign_thread, &m[i]), 0);
    for (int32_t i = 0; i < n; i++)
        pthread_join(tid[i], NULL);
    pthread_barrier_destroy(&t.bar);
    for (int32_t i = 0; i < n; i++)
        assert_non_null(m[i].r);
}

/* random, pct and portfolio: a campaign of 2 or 3 processes reports what
 * one process does (the verdict, the runs, the distinct interleavings,
 * the failing run and its minimal trace), each process having made a
 * part of the runs and no more; every process ends with the same report. */
static void test_a_campaign_reports_what_one_process_does(void **state) {
    (void)state;
    ppv_pp_options pp = ppv_pp_defaults();
    pp.chunks = 4;
    pp.steps = 2;
    pp.control_only = 1;
    pp.poll = 1;
    for (int bug = 0; bug < 2; bug++) {
        pp.bug = bug ? PPV_PP_BUG_SEND_ON_PROBE_HIT : PPV_PP_BUG_NONE;
        /* the seeded bug fails at run 74 (valgrind too: it stops there) */
        ppv_fuzz_options o = base(bug ? 300 : runs(300));
        o.strategy = PPV_FUZZ_RANDOM;
        o.pp = &pp;
        ppv_fuzz_report *one = fuzz(&o);
        assert_int_equal(one->found, bug);
        assert_null(one->process_runs);
        if (bug) assert_int_equal(one->failing_run, 74); /* seed 74: see the seeded bugs' test */
        for (int32_t n = 2; n <= 3; n++) {
            campaign_member m[3];
            campaign(&o, n, m);
            int64_t sum = 0;
            for (int32_t i = 0; i < n; i++) {
                ppv_fuzz_report *r = m[i].r;
                assert_int_equal(r->found, one->found);
                assert_int_equal(r->runs, one->runs);
                assert_int_equal(r->distinct, one->distinct);
                assert_int_equal(r->failing_run, one->failing_run);
                assert_int_equal(r->minimal_prefix, one->minimal_prefix);
                assert_int_equal(r->minimal_deviations, one->minimal_deviations);
                assert_string_equal(r->failure, one->failure);
                assert_int_equal(r->nprocesses, n);
                assert_int_equal(r->process_runs[i], m[0].r->process_runs[i]);
                assert_true(m[i].gathers >= 3); /* rounds, then the interleavings */
                sum += m[0].r->process_runs[i];
                /* a share, not every run: each round splits its runs evenly, so
                 * without a failure the shares are within a few runs of equal */
                int64_t made = m[0].r->process_runs[i], even = (one->runs - 1) / n;
                if (made <= 0 || made >= one->runs - 1 ||
                    (!bug && (made < even - 16 || made > even + 16)))
                    fail_msg("process %d of %d made %lld of %lld runs", i, n,
                             (long long)m[0].r->process_runs[i], (long long)one->runs - 1);
            }
            /* the reference's run is not counted; in the round of a failure, runs
             * past it are made too */
            if (bug) assert_true(sum >= one->runs - 1 && sum < one->runs - 1 + 64);
            else assert_int_equal(sum, one->runs - 1);
            if (bug) { /* the same minimal trace on every process */
                int64_t n0, n1;
                const int64_t *s0, *s1;
                const int32_t *r0, *r1;
                n0 = ppv_world_deviations(one->minimal, &s0, &r0);
                n1 = ppv_world_deviations(m[n - 1].r->minimal, &s1, &r1);
                assert_int_equal(n1, n0);
                assert_memory_equal(s1, s0, (size_t)n0 * sizeof *s0);
                assert_memory_equal(r1, r0, (size_t)n0 * sizeof *r0);
            }
            for (int32_t i = 0; i < n; i++)
                ppv_fuzz_report_free(m[i].r);
        }
        ppv_fuzz_report_free(one);
    }
}

/* dfs split across processes: the search of a clean pipeline is complete
 * on every process, with every class one process runs (each process makes
 * the first run, so a class more per process); a seeded bug is found. */
static void test_a_dfs_campaign_splits_the_search(void **state) {
    (void)state;
    ppv_pp_options pp = ppv_pp_defaults();
    pp.chunks = 3;
    pp.steps = 2;
    pp.control_only = 1;
    pp.poll = 1;
    ppv_fuzz_options o = base(100000);
    o.strategy = PPV_FUZZ_DFS;
    o.pp = &pp;
    ppv_fuzz_report *one = fuzz(&o);
    assert_true(one->complete);
    assert_int_equal(one->classes, 36);
    campaign_member m[3];
    campaign(&o, 3, m);
    for (int32_t i = 0; i < 3; i++) {
        assert_true(m[i].r->complete);
        assert_false(m[i].r->found);
        assert_int_equal(m[i].r->classes, m[0].r->classes);
        /* at least every class once, and no search repeated whole */
        assert_true(m[i].r->classes >= one->classes + 2);
        assert_true(m[i].r->classes < 2 * one->classes);
        /* each made a share */
        assert_true(m[0].r->process_runs[i] > 1);
        assert_true(m[0].r->process_runs[i] < one->runs - 1);
    }
    for (int32_t i = 0; i < 3; i++)
        ppv_fuzz_report_free(m[i].r);
    ppv_fuzz_report_free(one);
    pp.chunks = 4;
    pp.bug = PPV_PP_BUG_SEND_ON_PROBE_HIT;
    campaign(&o, 2, m);
    for (int32_t i = 0; i < 2; i++) {
        assert_true(m[i].r->found);
        assert_false(m[i].r->complete);
        assert_non_null(strstr(m[i].r->failure, "more than D_in 2"));
        assert_int_equal(m[i].r->failing_run, m[0].r->failing_run);
        assert_int_equal(m[i].r->minimal_deviations, m[0].r->minimal_deviations);
    }
    for (int32_t i = 0; i < 2; i++)
        ppv_fuzz_report_free(m[i].r);
}

/* ---- faults ------------------------------------------------------------------------ */

static void test_lost_duplicated_and_killed_messages_end_named_or_unchanged(void **state) {
    (void)state;
    ppv_pp_options pp = ppv_pp_defaults();
    pp.chunks = 4;
    pp.steps = 2;
    ppv_fuzz_options o = base(runs(150));
    o.pp = &pp;
    o.faults = 1u << PPV_FAULT_DROP | 1u << PPV_FAULT_DUPLICATE | 1u << PPV_FAULT_KILL;
    ppv_fuzz_report *r = fuzz(&o);
    if (r->found) fail_msg("%s", r->failure);
    assert_int_equal(r->runs, runs(150));
    ppv_fuzz_report_free(r);
    ppv_schedule *s = gen_ok("zbv", 2, 4, 0);
    ppv_fuzz_options so = base(runs(60));
    so.schedule = s;
    so.faults = o.faults;
    r = fuzz(&so);
    if (r->found) fail_msg("%s", r->failure);
    ppv_fuzz_report_free(r);
    ppv_schedule_free(s);
}

/* Every message of a small run corrupted in turn (one bit, round-robin):
 * results are guarded (their output_digest_i64, their framing), and so are
 * envelopes with envelope_digest_i64 (the default), so each corrupted
 * message ends in a named failure. Without the envelope digest (the
 * contract as PPEnvelopeV1 has it), a bit flipped in an envelope's tensors
 * changes the output unseen: the gap the explorer found, pinned here. */
static void test_every_message_corrupted_in_turn(void **state) {
    (void)state;
    ppv_pp_options o = ppv_pp_defaults();
    o.chunks = 4;
    o.steps = 2;
    ppv_pp_report *r = NULL;
    char err[256];
    assert_int_equal(ppv_pp_run(&o, &r, err, sizeof err), 0);
    uint64_t ref = r->output_digest;
    int64_t sends = r->world.sends;
    ppv_pp_report_free(r);
    assert_int_equal(sends, 33); /* 4 envelopes of 5 messages, 4 results of 3, a SHUTDOWN */
    for (int digest = 1; digest >= 0; digest--) {
        o.envelope_digest = digest;
        int unchanged = 0, silent = 0, named = 0, corrupt = 0, envelope = 0;
        for (int64_t k = 0; k < sends; k++) {
            o.fault.kind = PPV_FAULT_CORRUPT;
            o.fault.message = k;
            assert_int_equal(ppv_pp_run(&o, &r, err, sizeof err), 0);
            assert_true(r->world.fault_applied);
            if (r->ok && r->output_digest == ref) unchanged++;
            else if (r->ok) silent++;
            else {
                named++;
                corrupt += r->failure == PPV_FAIL_CORRUPT;
                envelope += r->failure == PPV_FAIL_ENVELOPE;
                assert_non_null(strstr(r->message, "call_id"));
                if (r->failure == PPV_FAIL_ENVELOPE) {
                    assert_int_equal(r->caught_by, PPV_POINT_LEADER);
                    assert_non_null(strstr(r->message, "the envelope changed on its way"));
                }
            }
            ppv_pp_report_free(r);
        }
        assert_int_equal(corrupt, 4); /* every result's latents_out */
        /* with the digest, a flip in any of the 12 tensor messages of the 4
         * envelopes is caught by the leader (a flip in a header or metadata
         * is caught by the framing, as before) */
        assert_int_equal(named, digest ? 33 : 21);
        assert_int_equal(envelope, digest ? 12 : 0);
        /* every chunk's conditioning is used, so a flip in it changes that
         * chunk's output (before, chunks 1 to 3 kept chunk 0's and 3 flips
         * changed nothing) */
        assert_int_equal(silent, digest ? 0 : 12);
        assert_int_equal(unchanged, 0);
    }
    /* and the explorer finds one of the silent ones, with a replayable trace */
    ppv_pp_options pp = ppv_pp_defaults();
    pp.chunks = 4;
    pp.steps = 2;
    pp.envelope_digest = 0;
    ppv_fuzz_options fo = base(100);
    fo.pp = &pp;
    fo.faults = 1u << PPV_FAULT_CORRUPT;
    ppv_fuzz_report *f = fuzz(&fo);
    assert_true(f->found);
    assert_int_equal(f->failing_fault.kind, PPV_FAULT_CORRUPT);
    assert_non_null(strstr(f->failure, "went unnoticed: output digest"));
    assert_int_equal(f->minimal_prefix, 0); /* round-robin with the fault fails too */
    int64_t n = 0;
    const int32_t *d = ppv_world_decisions(f->minimal, &n);
    pp.policy.kind = PPV_POLICY_REPLAY;
    pp.policy.replay = d;
    pp.policy.nreplay = n;
    pp.fault = f->failing_fault;
    assert_int_equal(ppv_pp_run(&pp, &r, err, sizeof err), 0);
    assert_true(r->ok);
    assert_true(r->output_digest != ref);
    ppv_pp_report_free(r);
    ppv_fuzz_report_free(f);
}

/* ---- the command -------------------------------------------------------------------- */

/* --out is checked when the options are read (a regular file, or a
 * folder whose parent is missing, is exit 2 before any run); a write that
 * still fails at the end loses nothing: the failure and the minimal trace
 * are printed, text and --json, before exit 2, and the printed trace
 * replays. */
static void test_an_out_that_cannot_be_written_loses_no_result(void **state) {
    (void)state;
    const char *csv = data_path("rendezvous_only_train.csv");
    const char *regular = tmp_path("regular_file");
    FILE *f = fopen(regular, "w");
    assert_non_null(f);
    fclose(f);
    run_result r = RUN("fuzz", csv, "--runs", "5", "--out", regular);
    assert_int_equal(r.code, 2);
    assert_string_equal(r.out, "");
    assert_non_null(strstr(r.err, "--out"));
    assert_non_null(strstr(r.err, "exists and is not a directory"));
    run_free(&r);
    /* a folder where failing.trace should go: the write itself fails */
    const char *dir = tmp_path("blocked_out");
    char blocker[4200];
    assert_int_equal(mkdir(dir, 0700), 0);
    snprintf(blocker, sizeof blocker, "%s/failing.trace", dir);
    assert_int_equal(mkdir(blocker, 0700), 0);
    r = RUN("fuzz", csv, "--runs", "5", "--out", dir);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.out, "failure at run 0 (round-robin, 7 scheduler steps): deadlock"));
    const char *t = strstr(r.out, "the minimal trace, to replay with --replay:\nppv-trace 1\n");
    assert_non_null(t);
    assert_non_null(strstr(r.out, "result: PROBLEM\n"));
    const char *once = strstr(r.err, "a directory, not a file to write");
    assert_non_null(once);
    assert_null(strstr(once + 1, "a directory, not a file to write"));
    /* the printed trace replays */
    const char *trace = tmp_path("printed.trace");
    t = strchr(t, '\n') + 1;
    const char *end = strstr(t, "result: PROBLEM\n");
    f = fopen(trace, "w");
    assert_non_null(f);
    fwrite(t, 1, (size_t)(end - t), f);
    fclose(f);
    run_free(&r);
    r = RUN("run", csv, "--replay", trace);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "replay: fails again: deadlock after 7 scheduler steps"));
    run_free(&r);
    r = RUN("fuzz", csv, "--runs", "5", "--out", dir, "--json");
    assert_int_equal(r.code, 2);
    json_object *j = json_tokener_parse(r.out);
    assert_non_null(j);
    json_object *v;
    assert_true(json_object_object_get_ex(j, "failure", &v));
    assert_non_null(strstr(json_object_get_string(v), "deadlock"));
    assert_true(json_object_object_get_ex(j, "minimal_trace_text", &v));
    assert_non_null(strstr(json_object_get_string(v), "ppv-trace 1\nranks 2\n"));
    json_object_put(j);
    run_free(&r);
}

static void test_command_writes_traces_that_run_replays(void **state) {
    (void)state;
    /* nothing found: --out leaves nothing behind, not even its folder */
    const char *none = tmp_path("nothing_found");
    run_result n = RUN("fuzz", "pp", "--chunks", "2", "--runs", "3", "--out", none);
    assert_int_equal(n.code, 0);
    run_free(&n);
    assert_int_equal(access(none, F_OK), -1);
    const char *dir = tmp_path("found");
    run_result r = RUN("fuzz", data_path("rendezvous_only_train.csv"), "--runs", "5", "--out", dir);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "failure at run 0 (round-robin, 7 scheduler steps): deadlock"));
    assert_non_null(strstr(r.out, "result: PROBLEM\n"));
    run_free(&r);
    char trace[4200];
    snprintf(trace, sizeof trace, "%s/minimal.trace", dir);
    r = RUN("run", data_path("rendezvous_only_train.csv"), "--replay", trace);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "cycle: rank 0 (0SEND_F1) -> rank 1 (1SEND_F0) -> rank 0"));
    assert_non_null(strstr(r.out, "replay: fails again: deadlock after 7 scheduler steps: 2 of 2 "
                                  "ranks blocked (as recorded)\nresult: FAILED\n"));
    run_free(&r);
    /* the minimal trace forces nothing (round-robin fails): it holds no
     * decision, then round-robin; the failing one holds all 7 */
    char *mt = slurp(trace);
    assert_non_null(strstr(mt, "ppv-trace 1\nranks 2\ndecisions 0\ndeviations 0\nthen "
                               "round-robin\nreference "));
    free(mt);
    /* eager sends: a program that no longer fails on it; the failing
     * trace's 7 decisions do not finish it */
    r = RUN("run", data_path("rendezvous_only_train.csv"), "--sem", "eager", "--replay", trace);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "replay: no longer fails (the trace recorded: deadlock after 7 "
                                  "scheduler steps: 2 of 2 ranks blocked)\nresult: OK\n"));
    run_free(&r);
    snprintf(trace, sizeof trace, "%s/failing.trace", dir);
    r = RUN("run", data_path("rendezvous_only_train.csv"), "--sem", "eager", "--replay", trace);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "replay: the trace diverges from this program (trace ends after "
                                  "7 decisions but ranks still run): it no longer runs as "
                                  "recorded\nresult: DIVERGED\n"));
    run_free(&r);
    /* the pipeline's trace replays through ppv pp */
    const char *pt = tmp_path("pp.trace");
    r = RUN("pp", "--chunks", "3", "--policy", "random", "--seed", "5", "--trace-out", pt,
            "--json");
    assert_int_equal(r.code, 0);
    const char *digest = strstr(r.out, "\"trace_digest\":");
    assert_non_null(digest);
    char want[64];
    snprintf(want, sizeof want, "%.34s", digest);
    run_free(&r);
    r = RUN("pp", "--chunks", "3", "--replay", pt, "--json");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, want));
    run_free(&r);
    /* a fault found by the explorer is in its trace, and ppv pp replays it */
    const char *fdir = tmp_path("corrupt");
    r = RUN("fuzz", "pp", "--chunks", "4", "--steps", "2", "--faults", "corrupt", "--runs", "50",
            "--envelope-digest", "off", "--out", fdir);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "went unnoticed"));
    run_free(&r);
    char ftrace[4200];
    snprintf(ftrace, sizeof ftrace, "%s/minimal.trace", fdir);
    char *text = slurp(ftrace);
    /* the failing run's fault hit send 17; the minimal trace's is the
     * earliest where the same decisions still fail */
    assert_non_null(strstr(text, "\nfault corrupt 2\nreference e46644c90dc16ab4\nverdict a "
                                 "corrupt at send 2 went unnoticed: output digest "
                                 "f3922fb35a225102 differs from the reference's "
                                 "e46644c90dc16ab4\n"));
    char ftrace_full[4200];
    snprintf(ftrace_full, sizeof ftrace_full, "%s/failing.trace", fdir);
    char *whole = slurp(ftrace_full);
    assert_non_null(strstr(whole, "\nfault corrupt 17\n"));
    free(whole);
    /* a replayed failure is a failure: the same verdict, exit 1 */
    r = RUN("pp", "--chunks", "4", "--steps", "2", "--envelope-digest", "off", "--replay", ftrace);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "output digest: f3922fb35a225102\n"));
    assert_non_null(strstr(r.out, "replay: fails again: a corrupt at send 2 went unnoticed: "
                                  "output digest f3922fb35a225102 differs from the reference's "
                                  "e46644c90dc16ab4 (as recorded)\nresult: FAILED\n"));
    run_free(&r);
    /* a program that now gives the recorded reference: no longer fails
     * (here the reference is the one the corrupted run gives) */
    char *ref = strstr(text, "reference e46644c90dc16ab4");
    memcpy(ref + 10, "f3922fb35a225102", 16);
    const char *moved = tmp_path("no_longer.trace");
    write_text(moved, text);
    r = RUN("pp", "--chunks", "4", "--steps", "2", "--envelope-digest", "off", "--replay", moved);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "replay: no longer fails (the trace recorded: a corrupt at send "
                                  "2 went unnoticed"));
    assert_non_null(strstr(r.out, "result: OK\n"));
    run_free(&r);
    /* with envelope digests (the default) the leader catches the same
     * corruption on the minimal trace: it no longer fails; the failing
     * trace, every decision of the run without digests, diverges: where */
    r = RUN("pp", "--chunks", "4", "--steps", "2", "--replay", ftrace);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "failure: PPV-ENVELOPE caught by leader"));
    assert_non_null(strstr(r.out, "replay: no longer fails (the trace recorded: a corrupt at send "
                                  "2 went unnoticed"));
    run_free(&r);
    char full[4200];
    snprintf(full, sizeof full, "%s/failing.trace", fdir);
    r = RUN("pp", "--chunks", "4", "--steps", "2", "--replay", full);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "replay: the trace diverges from this program (trace diverges "
                                  "at step "));
    assert_non_null(strstr(r.out, "result: DIVERGED\n"));
    run_free(&r);
    /* a verdict cut in half, or a word after it, is refused */
    char *cut = strstr(text, "verdict ");
    *cut = '\0';
    write_text(moved, text);
    r = RUN("pp", "--chunks", "4", "--steps", "2", "--envelope-digest", "off", "--replay", moved);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "a trace's verdict needs both its 'reference' and its "
                                  "'verdict' line"));
    run_free(&r);
    strcat(text, "verdict x\nextra 1\n");
    write_text(moved, text);
    r = RUN("pp", "--chunks", "4", "--steps", "2", "--envelope-digest", "off", "--replay", moved);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "trace truncated or malformed"));
    run_free(&r);
    free(text);
    /* with envelope digests (the default) every corruption ends named: the
     * explorer finds no silent one */
    r = RUN("fuzz", "pp", "--chunks", "4", "--steps", "2", "--faults", "corrupt", "--runs", "50");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "result: OK\n"));
    run_free(&r);
    r = RUN("pp", "--chunks", "4", "--steps", "2");
    assert_non_null(strstr(r.out, "output digest: e46644c90dc16ab4"));
    run_free(&r);
    r = RUN("pp", "--chunks", "3", "--mesh", "4", "--replay", pt);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "is a trace of 3 ranks; stage 0 and a mesh of 4 are 5"));
    run_free(&r);
}

/* --seed-bug: the reference's broken variants from the command line. The
 * two probe bugs need an interleaving round-robin never makes (its probes
 * never find a result on a mesh of 2): one run does not find them, dfs
 * does, at a run pinned here, and the minimal trace replays as a failure. */
static void test_seeded_bugs_from_the_command_line(void **state) {
    (void)state;
    run_result r = RUN("pp", "--seed-bug", "list");
    assert_int_equal(r.code, 0);
    static const char *const names[] = {"wait-trusts-epoch", "decode-first", "leader-dies",
                                        "worker-local-recompute", "shard-reload",
                                        "blocking-decode", "send-on-probe-hit",
                                        "cut-on-probe-hit", "results-kept"};
    int lines = 0;
    for (const char *p = r.out; *p; p++) lines += *p == '\n';
    assert_int_equal(lines, 1 + 2 * 9);
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        char want[64];
        snprintf(want, sizeof want, "\n  %-24s ", names[k]);
        if (!strstr(r.out, want)) fail_msg("no %s in the list", names[k]);
    }
    run_free(&r);
    r = RUN("pp", "--seed-bug", "nosuch");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--seed-bug takes a name that 'ppv pp --seed-bug list' shows, "
                                  "not 'nosuch'"));
    run_free(&r);
    static const struct {
        const char *bug, *opt, *val, *found, *again;
    } probe_bugs[] = {
        {"send-on-probe-hit", "--d-in", "2",
         "failure at run 13 (dfs, 101 scheduler steps): PPV-RULE",
         "stage 0 has 3 envelopes in flight, more than D_in 2: its bounded queue overflowed"},
        {"cut-on-probe-hit", "--hard-cut-at", "2",
         "failure at run 34 (dfs, 146 scheduler steps): PPV-WATCHDOG: deadlock",
         "PPV-WATCHDOG: deadlock after 140 scheduler steps: 3 of 3 ranks blocked"},
    };
    for (size_t k = 0; k < 2; k++) {
        const char *bug = probe_bugs[k].bug, *opt = probe_bugs[k].opt, *val = probe_bugs[k].val;
        /* round-robin alone: the bug hides */
        r = RUN("fuzz", "pp", "--poll", "--control-only", "--chunks", "4", "--steps", "2", opt,
                val, "--seed-bug", bug, "--runs", "1");
        assert_int_equal(r.code, 0);
        run_free(&r);
        const char *dir = tmp_path(bug);
        r = RUN("fuzz", "pp", "--poll", "--control-only", "--chunks", "4", "--steps", "2", opt,
                val, "--seed-bug", bug, "--strategy", "dfs", "--runs", "1000", "--out", dir);
        assert_int_equal(r.code, 1);
        if (!strstr(r.out, probe_bugs[k].found)) fail_msg("%s: %s", bug, r.out);
        run_free(&r);
        char trace[4200];
        snprintf(trace, sizeof trace, "%s/minimal.trace", dir);
        r = RUN("pp", "--poll", "--control-only", "--chunks", "4", "--steps", "2", opt, val,
                "--seed-bug", bug, "--replay", trace);
        assert_int_equal(r.code, 1);
        assert_non_null(strstr(r.out, ", seeded bug "));
        if (!strstr(r.out, probe_bugs[k].again)) fail_msg("%s: %s", bug, r.out);
        assert_non_null(strstr(r.out, "(as recorded)\nresult: FAILED\n"));
        run_free(&r);
        /* the reference, on the bug's minimal trace (its forced decisions,
         * then round-robin), no longer fails; on the failing trace, which
         * holds every decision, it diverges where the bug took another path */
        r = RUN("pp", "--poll", "--control-only", "--chunks", "4", "--steps", "2", opt, val,
                "--replay", trace);
        assert_int_equal(r.code, 0);
        assert_non_null(strstr(r.out, "replay: no longer fails (the trace recorded: "));
        run_free(&r);
        snprintf(trace, sizeof trace, "%s/failing.trace", dir);
        r = RUN("pp", "--poll", "--control-only", "--chunks", "4", "--steps", "2", opt, val,
                "--replay", trace);
        assert_int_equal(r.code, 1);
        assert_non_null(strstr(r.out, "result: DIVERGED\n"));
        run_free(&r);
    }
}

/* Minimal means small to read: each seeded interleaving bug's minimal
 * trace is round-robin but at a few steps, grouped in stretches (steps
 * within three of each other), at most the bug's depth (3, the depth PCT
 * needs for cut-on-probe-hit) and 12 steps in all; the trace holds those
 * lines alone, and replays as the failure. A deviation line out of order
 * is refused. */
/* Lines of text that begin with prefix. */
static int lines_starting(const char *text, const char *prefix) {
    int n = 0;
    for (const char *p = text; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : NULL)
        n += strncmp(p, prefix, strlen(prefix)) == 0;
    return n;
}

/* ppv fuzz explain TRACE: the trace names its target (ppv fuzz writes a
 * target line), and explain runs it again telling each step around the
 * forced ones, every probe that finds a message, the end, and the replay's
 * verdict; on a changed target the failure is gone; a trace with no target,
 * or a target ppv fuzz would refuse, is exit 2. */
static void test_explain_tells_a_failure_as_a_story(void **state) {
    (void)state;
    const char *dir = tmp_path("explain");
    run_result r = RUN("fuzz", "pp", "--poll", "--control-only", "--chunks", "4", "--steps", "2",
                       "--seed-bug", "send-on-probe-hit", "--strategy", "dfs", "--out", dir);
    assert_int_equal(r.code, 1);
    run_free(&r);
    char trace[4200];
    snprintf(trace, sizeof trace, "%s/minimal.trace", dir);
    char *text = slurp(trace);
    assert_non_null(strstr(text, "\ntarget pp --poll --control-only --chunks 4 --steps 2 "
                                 "--seed-bug send-on-probe-hit\n"));
    r = RUN("fuzz", "explain", trace);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "\ntarget: pp --poll --control-only --chunks 4 --steps 2 "
                                  "--seed-bug send-on-probe-hit\n"
                                  "105 steps: round-robin but at 12 (*), in 2 stretches\n"
                                  "  ... steps 0-68: round-robin\n"
                                  "  step 69    rank 0 (stage 0)  sends INFER to rank 1 (1536 "
                                  "bytes)\n"));
    assert_int_equal(lines_starting(r.out, "* step "), 12); /* the trace's deviations */
    assert_non_null(strstr(r.out, "\n* step 91    rank 1 (the leader)  sends result to rank 0 "
                                  "(56 bytes)\n"));
    /* the probe that finds the result: what round-robin never does */
    assert_non_null(strstr(r.out, "\n  step 93    rank 0 (stage 0)  probes rank 1: a message is "
                                  "there\n"));
    assert_int_equal(lines_starting(r.out, "  step "), 19); /* 69-93 and 99-104 but the 12 */
    assert_non_null(strstr(r.out, "\nend: rank 0: PPV-RULE (rank 0, group world, call_id 3, "
                                  "chunk_index 3, cache_epoch 0): stage 0 has 3 envelopes in "
                                  "flight, more than D_in 2: its bounded queue overflowed\n"));
    assert_non_null(strstr(r.out, "its bounded queue overflowed (as recorded)\nresult: FAILED\n"));
    run_free(&r);
    /* the full failing trace too: its forced decisions found by the run */
    char failing[4200];
    snprintf(failing, sizeof failing, "%s/failing.trace", dir);
    r = RUN("fuzz", "explain", failing);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "101 steps: round-robin but at 68 (*), in 2 stretches\n"));
    run_free(&r);
    /* the target without the bug: the same interleaving no longer fails */
    char *cut = strstr(text, " --seed-bug send-on-probe-hit\n");
    memmove(cut, cut + strlen(" --seed-bug send-on-probe-hit"), strlen(cut) - 28);
    char *fixed = tmp_path("fixed.trace");
    write_text(fixed, text);
    r = RUN("fuzz", "explain", fixed);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "\nreplay: no longer fails (the trace recorded: PPV-RULE"));
    assert_non_null(strstr(r.out, "\nresult: OK\n"));
    run_free(&r);
    /* no target line; a target ppv fuzz refuses; the checker */
    char *target = strstr(text, "target pp");
    *target = '\0';
    char *bare = tmp_path("bare.trace");
    write_text(bare, text);
    r = RUN("fuzz", "explain", bare);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "bare.trace has no target line (ppv fuzz --out writes one)"));
    run_free(&r);
    static const char *const bad[] = {"target pp --chunks zero\n", "target checker\n",
                                      "target pp --mesh 4\n", "target pp --runs\n"};
    static const char *const says[] = {"--chunks", "checker leaves no trace",
                                       "is a trace of 3 ranks; its target's stage 0 and mesh",
                                       "is not a target ppv fuzz takes"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        char *t = malloc(strlen(text) + strlen(bad[k]) + 1);
        sprintf(t, "%s%s", text, bad[k]);
        write_text(bare, t);
        free(t);
        r = RUN("fuzz", "explain", bare);
        assert_int_equal(r.code, 2);
        assert_non_null(strstr(r.err, says[k]));
        assert_string_equal(r.out, "");
        run_free(&r);
    }
    free(text);
    /* a schedule's deadlock: who waits for what, and the cycle */
    const char *sdir = tmp_path("explain_schedule");
    r = RUN("fuzz", data_path("rendezvous_only_train.csv"), "--out", sdir);
    assert_int_equal(r.code, 1);
    run_free(&r);
    snprintf(trace, sizeof trace, "%s/minimal.trace", sdir);
    r = RUN("fuzz", "explain", trace);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "7 steps: round-robin but at 0 (*), in 0 stretches\n"));
    assert_non_null(strstr(r.out, "\n  step 6     rank 0  sends 0SEND_F1 to rank 1 (512 bytes)\n"
                                  "end: deadlock after 7 scheduler steps: 2 of 2 ranks blocked\n"
                                  "  rank 0 waits at 0SEND_F1: send of 512 bytes (rendezvous) "
                                  "waits for rank 1 to post its receive\n"
                                  "  rank 1 waits at 1SEND_F0: send of 512 bytes (rendezvous) "
                                  "waits for rank 0 to post its receive\n"
                                  "  cycle: 0 -> 1 -> 0\n"));
    run_free(&r);
}

static void test_minimal_traces_are_a_few_forced_steps(void **state) {
    (void)state;
    static const struct {
        const char *bug, *o1, *v1, *o2, *v2, *o3, *v3; /* the options that show it */
        int64_t deviations, stretches;
        const char *forced;
    } bugs[] = {
        {"wait-trusts-epoch", "--mesh", "1", "--inject", "OM-09", "--hard-cut-at", "2", 6, 1,
         "  forced: steps 47-52 (6 forced) to rank 0\n"},
        {"send-on-probe-hit", "--d-in", "2", "--d-out", "2", "--mesh", "2", 12, 2,
         "  forced: steps 72-85 (10 forced) to rank 1; steps 90-91 (2 forced) to rank 1\n"},
        {"cut-on-probe-hit", "--d-in", "2", "--d-out", "2", "--hard-cut-at", "2", 9, 1,
         "  forced: steps 27-39 (9 forced) to rank 1\n"},
    };
    for (size_t k = 0; k < sizeof bugs / sizeof bugs[0]; k++) {
        const char *dir = tmp_path(bugs[k].bug);
        run_result r = RUN("fuzz", "pp", "--poll", "--control-only", "--chunks", "4", "--steps",
                           "2", bugs[k].o1, bugs[k].v1, bugs[k].o2, bugs[k].v2, bugs[k].o3,
                           bugs[k].v3, "--seed-bug", bugs[k].bug, "--strategy", "dfs", "--out",
                           dir);
        assert_int_equal(r.code, 1);
        char want[128];
        snprintf(want, sizeof want, "minimal: round-robin but at %lld steps (of ",
                 (long long)bugs[k].deviations);
        if (!strstr(r.out, want) || !strstr(r.out, bugs[k].forced))
            fail_msg("%s: %s", bugs[k].bug, r.out);
        run_free(&r);
        r = RUN("fuzz", "pp", "--poll", "--control-only", "--chunks", "4", "--steps", "2",
                bugs[k].o1, bugs[k].v1, bugs[k].o2, bugs[k].v2, bugs[k].o3, bugs[k].v3,
                "--seed-bug", bugs[k].bug, "--strategy", "dfs", "--json");
        snprintf(want, sizeof want, "\"minimal_deviations\":%lld,\"minimal_stretches\":%lld",
                 (long long)bugs[k].deviations, (long long)bugs[k].stretches);
        if (!strstr(r.out, want)) fail_msg("%s: %s", bugs[k].bug, r.out);
        assert_true(bugs[k].stretches <= 3 && bugs[k].deviations <= 12);
        run_free(&r);
        char trace[4200];
        snprintf(trace, sizeof trace, "%s/minimal.trace", dir);
        char *text = slurp(trace);
        int lines = 0;
        for (const char *p = text; *p; p++) lines += *p == '\n';
        /* header 3, deviations 1 + one a step, then round-robin, reference, verdict,
         * target */
        assert_int_equal(lines, 3 + 1 + (int)bugs[k].deviations + 4);
        r = RUN("pp", "--poll", "--control-only", "--chunks", "4", "--steps", "2", bugs[k].o1,
                bugs[k].v1, bugs[k].o2, bugs[k].v2, bugs[k].o3, bugs[k].v3, "--seed-bug",
                bugs[k].bug, "--replay", trace);
        assert_int_equal(r.code, 1);
        assert_non_null(strstr(r.out, "(as recorded)\nresult: FAILED\n"));
        run_free(&r);
        if (k == 0) { /* two deviations swapped: refused, by line */
            char *a = strstr(text, "\nat "), *b = a ? strstr(a + 1, "\nat ") : NULL;
            assert_non_null(b);
            char la[32], lb[32];
            size_t na = (size_t)(b - a), nb = strcspn(b + 1, "\n") + 1;
            snprintf(la, sizeof la, "%.*s", (int)na, a);
            snprintf(lb, sizeof lb, "%.*s", (int)nb, b);
            memcpy(a, lb, nb);
            memcpy(a + nb, la, na);
            const char *bad = tmp_path("swapped.trace");
            write_text(bad, text);
            r = RUN("pp", "--poll", "--control-only", "--chunks", "4", "--steps", "2",
                    bugs[k].o1, bugs[k].v1, bugs[k].o2, bugs[k].v2, bugs[k].o3, bugs[k].v3,
                    "--replay", bad);
            assert_int_equal(r.code, 2);
            assert_non_null(strstr(r.err, ":6: bad deviation (expected 'at STEP RANK', steps "
                                          "rising)"));
            run_free(&r);
            /* written by hand, as a user would: a count that does not match
             * its lines, a reference that is not 16 hex digits, and a
             * well-formed one whose rank cannot run there (it diverges) */
            static const struct {
                const char *text, *err;
                int code;
            } hand[] = {
                {"ppv-trace 1\nranks 2\ndecisions 0\ndeviations 2\nat 5 0\nthen round-robin\n",
                 "1 'at' lines, but the trace announces 2 deviations", 2},
                {"ppv-trace 1\nranks 2\ndecisions 0\ndeviations 0\nthen round-robin\n"
                 "reference 12xy\nverdict it failed\n",
                 ":6: bad reference line (expected 'reference' and 16 hex digits)", 2},
                {"ppv-trace 1\nranks 2\ndecisions 0\ndeviations 1\nat 5 7\nthen round-robin\n",
                 "replay: the trace diverges from this program (trace diverges at step 5: it runs "
                 "rank 7, which cannot run now)",
                 1},
            };
            for (size_t h = 0; h < sizeof hand / sizeof hand[0]; h++) {
                write_text(bad, hand[h].text);
                r = RUN("pp", "--mesh", "1", "--poll", "--control-only", "--chunks", "4",
                        "--steps", "2", "--replay", bad);
                assert_int_equal(r.code, hand[h].code);
                if (!strstr(hand[h].code == 2 ? r.err : r.out, hand[h].err))
                    fail_msg("hand-written trace %zu: %s%s", h, r.out, r.err);
                run_free(&r);
            }
        }
        free(text);
    }
}

static void test_command_keeps_options_to_their_target(void **state) {
    (void)state;
    run_result r = RUN("fuzz", "pp", "--runs", "20", "--control-only", "--chunks", "3", "--json");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "\"ok\":true,\"target\":\"pp\",\"strategy\":\"portfolio\","
                                  "\"processes\":1,\"runs\":20,\"process_runs\":null,"));
    run_free(&r);
    r = RUN("fuzz", "pp", "--semantics", "eager");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "are for a schedule target"));
    run_free(&r);
    r = RUN("fuzz", data_path("rendezvous_only_train.csv"), "--mesh", "2");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "pp's options are for the pp target"));
    run_free(&r);
    r = RUN("fuzz", "pp", "--strategy", "dfs", "--seed", "3");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "dfs draws nothing: --seed is for random, pct and portfolio"));
    run_free(&r);
    r = RUN("fuzz", "pp", "--strategy", "dfs", "--pct-depth", "3");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "dfs draws nothing: --pct-depth is for"));
    run_free(&r);
    /* PCT at depth 1 (priorities alone) is PCT's; the portfolio runs 2 and up */
    r = RUN("fuzz", "pp", "--strategy", "portfolio", "--pct-depth", "1");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--pct-depth 1 (no change points) is for --strategy pct"));
    run_free(&r);
    r = RUN("fuzz", "pp", "--control-only", "--chunks", "2", "--strategy", "pct", "--pct-depth",
            "1", "--runs", "20");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "runs: 20 in "));
    run_free(&r);
    r = RUN("fuzz", "pp", "--strategy", "bfs");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--strategy is random, pct, portfolio or dfs, not 'bfs'"));
    run_free(&r);
    r = RUN("fuzz", "pp", "--strategy", "dfs", "--faults", "drop");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "faults are put in by random, pct and portfolio"));
    run_free(&r);
    r = RUN("fuzz");
    assert_int_equal(r.code, 2);
    run_free(&r);
}

/* ---- delays, buffered links, hard cuts --------------------------------------------- */

static void test_delays_and_buffered_links_change_nothing(void **state) {
    (void)state;
    ppv_pp_options pp = ppv_pp_defaults();
    pp.chunks = 4;
    pp.steps = 2;
    pp.control_only = 1;
    pp.poll = 1;
    ppv_fuzz_options o = base(runs(200));
    o.pp = &pp;
    o.faults = 1u << PPV_FAULT_DELAY | 1u << PPV_FAULT_EAGER;
    ppv_fuzz_report *r = fuzz(&o);
    assert_false(r->found);
    ppv_fuzz_report_free(r);
    /* the delay is really there: the run is longer, its output the same */
    ppv_pp_report *plain = NULL, *late = NULL;
    char err[256];
    assert_int_equal(ppv_pp_run(&pp, &plain, err, sizeof err), 0);
    pp.fault.kind = PPV_FAULT_DELAY;
    pp.fault.message = 3;
    assert_int_equal(ppv_pp_run(&pp, &late, err, sizeof err), 0);
    assert_true(late->ok);
    assert_true(late->world.fault_applied);
    assert_true(late->output_digest == plain->output_digest);
    assert_true(late->world.trace_digest != plain->world.trace_digest);
    ppv_pp_report_free(late);
    ppv_pp_report_free(plain);
    /* a schedule under rendezvous with one link buffered completes the same */
    ppv_schedule *s = gen_ok("1f1b", 3, 6, 0);
    o = base(runs(60));
    o.schedule = s;
    o.faults = 1u << PPV_FAULT_EAGER | 1u << PPV_FAULT_DELAY;
    r = fuzz(&o);
    assert_false(r->found);
    ppv_fuzz_report_free(r);
    ppv_schedule_free(s);
}

/* A design that gives up when a message is late: rank 0 probes three
 * times for rank 1's message and fails if it has not come. */
static void impatient(ppv_transport *t, int32_t rank, void *arg) {
    (void)arg;
    int32_t v = rank;
    if (rank == 1) {
        t->ops->send(t->impl, 1, &v, sizeof v, 0, 0, "SEND");
        return;
    }
    for (int tries = 0; tries < 3; tries++) {
        int a = 0;
        if (t->ops->probe(t->impl, 0, 1, 0, &a)) return;
        if (a) {
            t->ops->recv(t->impl, 0, &v, sizeof v, 1, 0, "RECV");
            return;
        }
    }
    ppv_world_fail(t, 0, "rank 1's message did not come in three polls: timeout");
}

static void test_a_delay_is_not_allowed_to_fail_a_run(void **state) {
    (void)state;
    ppv_fuzz_program pg = {
        .nranks = 2, .sem = {.kind = PPV_SEM_EAGER}, .watchdog_steps = 1000, .main = impatient};
    ppv_fuzz_options o = base(1);
    o.program = &pg;
    o.strategy = PPV_FUZZ_RANDOM;
    o.runs = 1;
    ppv_fuzz_report *r = fuzz(&o);
    assert_false(r->found); /* round-robin: the message comes in time */
    ppv_fuzz_report_free(r);
    o.runs = 3;
    o.faults = 1u << PPV_FAULT_DELAY;
    r = fuzz(&o);
    assert_true(r->found);
    assert_int_equal(r->failing_fault.kind, PPV_FAULT_DELAY);
    assert_non_null(strstr(r->failure, "a delay at send 0 changed the run: rank 0: rank 1's "
                                       "message did not come in three polls: timeout"));
    /* minimised, the delay goes: rank 0 polling three times before rank 1
     * has run at all times out as well */
    assert_int_equal(r->minimal_fault.kind, PPV_FAULT_NONE);
    assert_non_null(strstr(r->minimal_failure, "did not come in three polls: timeout"));
    int64_t n = 0;
    const int32_t *d = ppv_world_decisions(r->minimal, &n);
    assert_int_equal(r->minimal_prefix, 3);
    assert_true(d[0] == 0 && d[1] == 0 && d[2] == 0);
    ppv_fuzz_report_free(r);
}

static void test_a_cut_anywhere_finds_a_worker_that_counts_for_itself(void **state) {
    (void)state;
    ppv_pp_options pp = ppv_pp_defaults();
    pp.chunks = 6;
    pp.steps = 2;
    pp.control_only = 1;
    pp.kv_recompute = 1;
    pp.recompute_every = 2;
    ppv_fuzz_options o = base(runs(40));
    o.pp = &pp;
    o.faults = 1u << PPV_FAULT_CUT;
    ppv_fuzz_report *r = fuzz(&o);
    assert_false(r->found); /* the design is right wherever the cut falls */
    ppv_fuzz_report_free(r);
    pp.bug = PPV_PP_BUG_WORKER_LOCAL_RECOMPUTE;
    o.faults = 0;
    r = fuzz(&o);
    assert_false(r->found); /* without a cut its own count agrees with the plan */
    ppv_fuzz_report_free(r);
    o.faults = 1u << PPV_FAULT_CUT;
    r = fuzz(&o);
    assert_true(r->found);
    assert_int_equal(r->failing_fault.kind, PPV_FAULT_CUT);
    assert_non_null(strstr(r->failure, "with a hard cut at chunk"));
    assert_non_null(strstr(r->failure, "FM-02"));
    ppv_fuzz_report_free(r);
    /* a cut is the pipeline's */
    ppv_schedule *s = gen_ok("1f1b", 2, 4, 0);
    o = base(5);
    o.schedule = s;
    o.faults = 1u << PPV_FAULT_CUT;
    char err[256];
    assert_int_equal(ppv_fuzz(&o, &r, err, sizeof err), -1);
    assert_string_equal(err, "a cut fault is the pipeline's, with 2 chunks or more (pp)");
    ppv_schedule_free(s);
}

/* ---- ppv check against the engine ------------------------------------------------- */

static ppv_fuzz_differential_report *differential(int64_t n,
                                                   int (*check)(void *, const ppv_schedule *,
                                                                const ppv_check_options *,
                                                                ppv_check_report **, char *,
                                                                size_t)) {
    ppv_fuzz_differential_options o;
    memset(&o, 0, sizeof o);
    o.seed = 11;
    o.schedules = n;
    o.check = check;
    ppv_fuzz_differential_report *r = NULL;
    char err[512];
    if (ppv_fuzz_differential(&o, &r, err, sizeof err) != 0) fail_msg("differential: %s", err);
    return r;
}

static void test_the_checker_and_the_engine_agree(void **state) {
    (void)state;
    ppv_fuzz_differential_report *r = differential(RUNNING_ON_VALGRIND ? 15 : 150, NULL);
    assert_false(r->found);
    assert_int_equal(r->schedules, RUNNING_ON_VALGRIND ? 15 : 150);
    /* both verdicts are exercised: schedules that deadlock and ones that do not */
    assert_true(r->compared > r->schedules);
    assert_true(r->deadlocks > 0 && r->deadlocks < r->compared);
    assert_true(r->invalid > 0); /* some mutations break the schedule: not compared */
    assert_int_equal(r->incomplete, 0);
    print_message("%lld schedules: %lld compared, %lld deadlocks, %lld ill formed\n",
                  (long long)r->schedules, (long long)r->compared, (long long)r->deadlocks,
                  (long long)r->invalid);
    ppv_fuzz_differential_report_free(r);
}

/* A checker that misses rendezvous deadlocks. */
static int blind_to_rendezvous(void *ctx, const ppv_schedule *s, const ppv_check_options *opt,
                               ppv_check_report **out, char *err, size_t errlen) {
    (void)ctx;
    if (ppv_schedule_check(s, opt, out, err, errlen) < 0) return -1;
    if (opt->sem.kind == PPV_SEM_RENDEZVOUS) (*out)->deadlock = 0;
    return 0;
}

/* A checker that sees deadlocks under eager sends where there are none. */
static int afraid_of_eager(void *ctx, const ppv_schedule *s, const ppv_check_options *opt,
                           ppv_check_report **out, char *err, size_t errlen) {
    (void)ctx;
    if (ppv_schedule_check(s, opt, out, err, errlen) < 0) return -1;
    if (opt->sem.kind == PPV_SEM_EAGER) (*out)->deadlock = 1;
    return 0;
}

static void test_a_broken_checker_is_caught_and_minimised(void **state) {
    (void)state;
    ppv_fuzz_differential_report *r = differential(200, blind_to_rendezvous);
    assert_true(r->found);
    assert_int_equal(r->sem.kind, PPV_SEM_RENDEZVOUS);
    assert_non_null(strstr(r->failure, "ppv check says it completes, the engine deadlocks"));
    assert_non_null(r->minimal);
    assert_true(r->mutations <= 3);
    /* the real checker agrees with the engine on the schedule handed back */
    ppv_check_options co = ppv_check_defaults();
    co.msg_bytes = 64; /* the differential's small model: 2 x 4 tokens x 8 channels */
    ppv_check_report *cr = NULL;
    char err[256];
    assert_int_equal(ppv_schedule_check(r->minimal, &co, &cr, err, sizeof err), 0);
    assert_true(cr->deadlock);
    assert_int_equal(cr->nerrors, 0);
    ppv_check_report_free(cr);
    ppv_fuzz_differential_report_free(r);

    r = differential(200, afraid_of_eager);
    assert_true(r->found);
    assert_int_equal(r->sem.kind, PPV_SEM_EAGER);
    assert_int_equal(r->mutations, 0); /* any schedule shows it: no mutation is needed */
    assert_non_null(strstr(r->failure,
                           "ppv check says it deadlocks, the engine completes every interleaving"));
    ppv_fuzz_differential_report_free(r);
}

static void test_command_fuzzes_the_checker(void **state) {
    (void)state;
    run_result r = RUN("fuzz", "checker", "--runs", "12", "--seed", "3", "--json");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "\"ok\":true,\"target\":\"checker\",\"schedules\":12,"));
    run_free(&r);
    char *xml = tmp_path("checker.xml");
    r = RUN("fuzz", "checker", "--runs", "4", "--junit", xml);
    assert_int_equal(r.code, 0);
    run_free(&r);
    char *text = slurp(xml);
    assert_non_null(
        strstr(text, "<testsuite name=\"ppv fuzz checker\" tests=\"1\" failures=\"0\""));
    assert_non_null(strstr(text, "name=\"ppv check agrees with the engine\"/>"));
    free(text);
    /* a failing exploration is a failed case, with what failed */
    xml = tmp_path("fuzz.xml");
    r = RUN("fuzz", data_path("rendezvous_only_train.csv"), "--junit", xml);
    assert_int_equal(r.code, 1);
    run_free(&r);
    text = slurp(xml);
    assert_non_null(strstr(text, "tests=\"1\" failures=\"1\""));
    assert_non_null(strstr(text, "name=\"every run (portfolio) passes\">\n      <failure "
                                 "message=\"deadlock after 7 scheduler steps: 2 of 2 ranks "
                                 "blocked\">"));
    free(text);
    r = RUN("fuzz", "pp", "--poll", "--chunks", "2", "--control-only", "--strategy", "dfs",
            "--junit", xml);
    assert_int_equal(r.code, 0);
    run_free(&r);
    text = slurp(xml);
    assert_non_null(strstr(text, "tests=\"2\" failures=\"0\""));
    assert_non_null(strstr(text, "name=\"every class explored\"/>"));
    free(text);
    r = RUN("fuzz", "checker", "--faults", "drop");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--faults is for a schedule or pp"));
    run_free(&r);
    r = RUN("fuzz", "checker", "--mesh", "2");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "checker draws its own schedules"));
    run_free(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_deadlock_of_the_reference_is_run_0_and_its_trace_replays),
        cmocka_unit_test(test_a_clean_schedule_passes_every_interleaving),
        cmocka_unit_test(test_the_pipeline_keeps_its_output_in_every_interleaving),
        cmocka_unit_test(test_a_fault_passes_only_when_caught_the_same_way_in_every_order),
        cmocka_unit_test(test_bad_options_are_refused),
        cmocka_unit_test(test_the_report_is_the_same_for_any_number_of_workers),
        cmocka_unit_test(test_a_campaign_reports_what_one_process_does),
        cmocka_unit_test(test_a_dfs_campaign_splits_the_search),
        cmocka_unit_test(test_lost_duplicated_and_killed_messages_end_named_or_unchanged),
        cmocka_unit_test(test_every_message_corrupted_in_turn),
        cmocka_unit_test(test_an_out_that_cannot_be_written_loses_no_result),
        cmocka_unit_test(test_command_writes_traces_that_run_replays),
        cmocka_unit_test(test_seeded_bugs_from_the_command_line),
        cmocka_unit_test(test_minimal_traces_are_a_few_forced_steps),
        cmocka_unit_test(test_explain_tells_a_failure_as_a_story),
        cmocka_unit_test(test_command_keeps_options_to_their_target),
        cmocka_unit_test(test_delays_and_buffered_links_change_nothing),
        cmocka_unit_test(test_a_delay_is_not_allowed_to_fail_a_run),
        cmocka_unit_test(test_a_cut_anywhere_finds_a_worker_that_counts_for_itself),
        cmocka_unit_test(test_the_checker_and_the_engine_agree),
        cmocka_unit_test(test_a_broken_checker_is_caught_and_minimised),
        cmocka_unit_test(test_command_fuzzes_the_checker),
    };
    return cmocka_run_group_tests(tests, NULL, tmp_cleanup);
}
