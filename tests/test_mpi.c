/* test_mpi.c - the MPI transport (engine/world/transport/mpi.c), one process per
 * rank under mpirun, oversubscribed on this machine's cores:
 *  - `ppv run --transport mpi` gives the mock's gradient digest, loss and
 *    memory peaks for every generator kind, under each send semantics;
 *  - a schedule that deadlocks under rendezvous is refused before launch,
 *    and with --allow-unsafe hangs on MPI as on the mock, until the
 *    watchdog names the rank, the action and the peer and ends the job;
 *  - the transport's own logic (tests/mpi_ranks.c): collectives with the
 *    mock's bits, groups, buffered sends by size, and every failure it
 *    must report (a short message, a collective mismatch, a tripwire, an
 *    environment failure, a rank that polls forever, nested groups, a bad
 *    peer).
 * Skipped where ppv was built without MPI or mpirun is missing.
 */
#include <json-c/json.h>
#include <time.h>

#include "testutil.h"

#ifndef PPV_HAVE_MPI
#define PPV_HAVE_MPI 0
#endif

/* mpirun on n processes of prog args..., as root in a container too, with
 * more processes than cores. */
static run_result mpirun(int n, const char *prog, const char *const *args) {
    char np[16];
    snprintf(np, sizeof np, "%d", n);
    const char *argv[64] = {"mpirun", "--oversubscribe", "--bind-to", "none", "-np", np, prog};
    size_t k = 7;
    for (size_t i = 0; args[i]; i++)
        argv[k++] = args[i];
    argv[k] = NULL;
    return run_program("/dev/null", NULL, 1, argv);
}

#define RANKS_BIN PPV_MPI_RANKS /* tests/mpi_ranks.c */
#define MPIRUN(n, prog, ...) mpirun(n, prog, (const char *const[]){__VA_ARGS__, NULL})

static int have_mpirun(void) {
    const char *path = getenv("PATH");
    if (!path) return 0;
    char *dirs = strdup(path), *save = NULL;
    int found = 0;
    for (char *d = strtok_r(dirs, ":", &save); d && !found; d = strtok_r(NULL, ":", &save)) {
        char p[4200];
        snprintf(p, sizeof p, "%s/mpirun", d);
        found = access(p, X_OK) == 0;
    }
    free(dirs);
    return found;
}

static void need_mpi(void) {
    if (!PPV_HAVE_MPI || PPV_TEST_SANITIZED || !have_mpirun()) skip();
}

/* The keys (NULL-terminated) of a command's --json object, as one string
 * "key=value;..." for comparing two runs. */
static char *json_fields(const char *json, const char *const *keys) {
    json_object *o = json_tokener_parse(json);
    assert_non_null(o);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    for (size_t k = 0; keys[k]; k++) {
        json_object *v = NULL;
        assert_true(json_object_object_get_ex(o, keys[k], &v));
        fprintf(f, "%s=%s;", keys[k], json_object_to_json_string(v));
    }
    fclose(f);
    json_object_put(o);
    return buf;
}

/* What a `ppv run --json` printed that both transports must agree on. */
static char *run_fields(const char *json) {
    static const char *const keys[] = {"status",
                                       "loss",
                                       "grad_digest",
                                       "matches_reference",
                                       "peak_activation_bytes",
                                       "predicted_peak_activation_bytes",
                                       NULL};
    return json_fields(json, keys);
}

/* The fields of two reports (fields: run_fields or pp_fields) are equal:
 * the process transport's run is the mock's. */
static void assert_same_fields(char *(*fields)(const char *), const char *mock,
                               const char *got) {
    char *a = fields(mock), *b = fields(got);
    assert_string_equal(b, a);
    free(a);
    free(b);
}

/* Every generator kind (PyTorch's classes and auto among them) at p=2,
 * m=4, and 1F1B and ZB-H1 on more ranks: the MPI run's digest, loss and
 * peaks are the mock's, under each semantics in turn (1F1B p=4 under all
 * three). */
static void test_run_equals_mock_for_every_kind(void **state) {
    (void)state;
    need_mpi();
    static const char *const sems[] = {"rendezvous", "eager", "eager:1K"};
    const char *const *kinds = ppv_generator_names();
    size_t nkinds = 0;
    while (kinds[nkinds])
        nkinds++;
    assert_true(nkinds >= 16);
    static const char *const more[][3] = {
        {"auto", "2", "4"}, {"1f1b", "4", "8"}, {"zb-h1", "3", "6"}};
    for (size_t k = 0; k < nkinds + 3; k++) {
        const char *kind = k < nkinds ? kinds[k] : more[k - nkinds][0];
        const char *p = k < nkinds ? "2" : more[k - nkinds][1];
        const char *m = k < nkinds ? "4" : more[k - nkinds][2];
        char name[64];
        snprintf(name, sizeof name, "%s-%s.csv", kind, p);
        char *path = gen_file(name, kind, p, m);
        for (size_t j = 0; j < 3; j++) {
            if (j != k % 3 && k != nkinds + 1) continue;
            run_result mock = RUN("run", path, "--semantics", sems[j], "--json");
            assert_int_equal(mock.code, 0);
            run_result mpi = MPIRUN(atoi(p), PPV_BIN, "run", path, "--transport", "mpi",
                                    "--semantics", sems[j], "--json");
            if (mpi.code != 0) fprintf(stderr, "%s %s: %s%s", kind, sems[j], mpi.out, mpi.err);
            assert_int_equal(mpi.code, 0);
            char *a = run_fields(mock.out), *b = run_fields(mpi.out);
            assert_string_equal(b, a);
            assert_non_null(strstr(a, "matches_reference=true"));
            assert_non_null(strstr(mpi.out, "\"transport\":\"mpi\""));
            free(a);
            free(b);
            run_free(&mock);
            run_free(&mpi);
        }
    }
}

/* Only rank 0 prints the report; the text says where it ran. */
static void test_run_text_report_once(void **state) {
    (void)state;
    need_mpi();
    char *path = gen_file("f.csv", "1f1b", "3", "4");
    run_result r = MPIRUN(3, PPV_BIN, "run", path, "--transport", "mpi");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "status: done on 3 MPI processes, one rank each\n"));
    assert_non_null(strstr(r.out, "bitwise equal"));
    const char *first = strstr(r.out, "result: OK"),
               *again = first ? strstr(first + 1, "result:") : NULL;
    assert_non_null(first);
    assert_null(again);
    run_free(&r);
}

static void test_deadlock_refused_then_reported_by_the_watchdog(void **state) {
    (void)state;
    need_mpi();
    const char *f = data_path("rendezvous_only_train.csv");
    run_result r = MPIRUN(2, PPV_BIN, "run", f, "--transport", "mpi");
    assert_int_equal(r.code, 1);
    assert_non_null(
        strstr(r.out, "deadlock under rendezvous, found by the check before launching"));
    assert_non_null(strstr(r.out, "cycle: rank 0 (0SEND_F1) -> rank 1 (1SEND_F0) -> rank 0"));
    run_free(&r);
    /* launched anyway: MPI's synchronous sends hang as the mock's rendezvous does */
    r = MPIRUN(2, PPV_BIN, "run", f, "--transport", "mpi", "--allow-unsafe", "--timeout", "1");
    assert_int_equal(r.code, 1);
    assert_true(strstr(r.err, "hang: 0SEND_F1 has waited") ||
                strstr(r.err, "hang: 1SEND_F0 has waited"));
    assert_true(strstr(r.err, "to send to rank 1 (512 bytes, a synchronous send") ||
                strstr(r.err, "to send to rank 0 (512 bytes, a synchronous send"));
    run_free(&r);
    /* buffered sends: it completes, with the mock's bits */
    run_result mock = RUN("run", f, "--semantics", "eager", "--json");
    r = MPIRUN(2, PPV_BIN, "run", f, "--transport", "mpi", "--semantics", "eager", "--json");
    assert_int_equal(mock.code, 0);
    assert_int_equal(r.code, 0);
    assert_same_fields(run_fields, mock.out, r.out);
    run_free(&mock);
    run_free(&r);
    /* eager below the message size (512 bytes) is rendezvous for it: refused */
    r = MPIRUN(2, PPV_BIN, "run", f, "--transport", "mpi", "--semantics", "eager:511");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "deadlock under eager:511"));
    run_free(&r);
}

/* The engine itself refuses the mock's settings on processes (the
 * commands refuse the options first). */
static void test_engine_refuses_the_mocks_settings(void **state) {
    (void)state;
    need_mpi();
    run_result r = MPIRUN(2, RANKS_BIN, "--refusals");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "run -1: policies, faults and replayed decisions are the "
                                  "mock's; on processes the transport orders the ranks\n"));
    assert_non_null(strstr(r.out, "pp -1: policies, faults, injections (but OM-13, stage 0 "
                                  "dying), replayed decisions and the KV comparison are the "
                                  "mock's"));
    run_free(&r);
}

static void test_process_count_must_match(void **state) {
    (void)state;
    need_mpi();
    char *path = gen_file("f4.csv", "1f1b", "4", "4");
    run_result r = MPIRUN(3, PPV_BIN, "run", path, "--transport", "mpi");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "has 4 ranks but the job has 3 processes (mpirun -np 4)"));
    run_free(&r);
}

/* Record on MPI, replay on the mock, and the reverse; a file recorded on
 * MPI equals the mock's recording of the same run. */
static void test_record_and_replay_across_transports(void **state) {
    (void)state;
    need_mpi();
    char *sched = gen_file("z.csv", "zbv", "2", "4");
    char on_mpi[4200], on_mock[4200], bad[4200];
    snprintf(on_mpi, sizeof on_mpi, "%s", tmp_path("mpi.h5"));
    snprintf(on_mock, sizeof on_mock, "%s", tmp_path("mock.h5"));
    snprintf(bad, sizeof bad, "%s", tmp_path("bad.h5"));
    run_result r = MPIRUN(2, PPV_BIN, "record", on_mpi, sched, "--transport", "mpi");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "recorded"));
    run_free(&r);
    r = RUN("record", on_mock, sched);
    assert_int_equal(r.code, 0);
    run_free(&r);
    r = RUN("diff", on_mpi, on_mock);
    assert_int_equal(r.code, 0);
    run_free(&r);
    /* recorded under a random interleaving of the mock, replayed where MPI
     * orders the ranks */
    char random[4200];
    snprintf(random, sizeof random, "%s", tmp_path("random.h5"));
    r = RUN("record", random, sched, "--policy", "random", "--seed", "4");
    assert_int_equal(r.code, 0);
    run_free(&r);
    r = MPIRUN(2, PPV_BIN, "replay", random, "--transport", "mpi");
    assert_int_equal(r.code, 0);
    run_free(&r);
    r = RUN("replay", on_mpi);
    assert_int_equal(r.code, 0);
    run_free(&r);
    r = MPIRUN(2, PPV_BIN, "replay", on_mock, "--transport", "mpi");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "transport: mpi, 2 processes\nresult: OK\n"));
    run_free(&r);
    /* the shipped golden file (recorded on the mock) replays on MPI */
    r = MPIRUN(4, PPV_BIN, "replay", PPV_GOLDEN_DIR "/train_1f1b_p4_m8.h5", "--transport", "mpi");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "result: OK"));
    run_free(&r);
    /* a recording whose gradients are wrong by one bit fails its replay on MPI */
    r = RUN("record", bad, sched, "--perturb");
    assert_int_equal(r.code, 0);
    run_free(&r);
    r = MPIRUN(2, PPV_BIN, "replay", bad, "--transport", "mpi");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "result: PROBLEM"));
    run_free(&r);
}

/* What a `ppv pp --json` printed that both transports must agree on. */
static char *pp_fields(const char *json) {
    static const char *const keys[] = {"ok",
                                       "chunks_emitted",
                                       "expected_generator_calls",
                                       "observed_generator_calls",
                                       "dropped_stale",
                                       "dropped_duplicate",
                                       "output_digest",
                                       NULL};
    return json_fields(json, keys);
}

/* The inference pipeline, stage 0 and a mesh of 1, 2 and 4 processes: the
 * mock's output digest and generator calls, chunk for chunk. */
static void test_pp_equals_mock_on_every_mesh(void **state) {
    (void)state;
    need_mpi();
    static const struct {
        const char *mesh, *np;
        const char *extra[4];
    } cases[] = {{"1", "2", {"--kv", "recompute", "--hard-cut-at", "3"}},
                 {"2", "3", {"--poll", NULL}},
                 {"4", "5", {"--kv", "recompute", "--recompute-every", "2"}}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const char *args[16] = {"pp", "--mesh", cases[k].mesh, "--chunks", "6", "--json"};
        int n = 6;
        for (int j = 0; j < 4 && cases[k].extra[j]; j++)
            args[n++] = cases[k].extra[j];
        args[n] = NULL;
        run_result mock = run_in(NULL, args);
        assert_int_equal(mock.code, 0);
        args[n++] = "--transport";
        args[n++] = "mpi";
        args[n] = NULL;
        run_result mpi = mpirun(atoi(cases[k].np), PPV_BIN, args);
        if (mpi.code != 0) fprintf(stderr, "mesh %s: %s%s", cases[k].mesh, mpi.out, mpi.err);
        assert_int_equal(mpi.code, 0);
        char *a = pp_fields(mock.out), *b = pp_fields(mpi.out);
        assert_string_equal(b, a);
        assert_non_null(strstr(a, "ok=true;chunks_emitted=6;"));
        assert_non_null(strstr(mpi.out, "\"transport\":\"mpi\""));
        free(a);
        free(b);
        run_free(&mock);
        run_free(&mpi);
    }
}

/* An inference recording made on MPI replays on the mock (the file's
 * stage 0 against a rebuilt mesh), and on another mesh size. */
static void test_pp_record_on_mpi_replays_on_the_mock(void **state) {
    (void)state;
    need_mpi();
    char h5[4200];
    snprintf(h5, sizeof h5, "%s", tmp_path("pp.h5"));
    run_result r = MPIRUN(3, PPV_BIN, "pp", "--mesh", "2", "--chunks", "4", "--record", h5,
                          "--transport", "mpi");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "transport: mpi, 3 processes"));
    /* each process counted its own rank, gathered to the report: the mesh
     * ranks' bytes are the mock's (one chunk at a time, whatever the
     * timing), stage 0's within its D_in + 1 envelopes and D_out results;
     * the link's copies are MPI's */
    run_result mock = RUN("pp", "--mesh", "2", "--chunks", "4");
    assert_int_equal(mock.code, 0);
    for (int k = 1; k <= 2; k++) {
        char want[64];
        snprintf(want, sizeof want, "\nmemory, rank %d (", k);
        const char *a = strstr(mock.out, want), *b = strstr(r.out, want);
        assert_non_null(a);
        assert_non_null(b);
        size_t n = strcspn(a + 1, "\n");
        assert_int_equal(strncmp(a, b, n + 1), 0);
    }
    assert_non_null(strstr(r.out, "\nmemory, link 0-1: not counted on processes"));
    run_free(&mock);
    run_free(&r);
    r = RUN("conform", h5, "--mem-cap", "210000");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "rank 1 (leader) peaks at 210960 bytes, 960 bytes over its cap "
                                  "of 210000, at chunk 2, call_id 2 (warm-up)"));
    assert_non_null(strstr(r.out, "samples on the monotonic clock"));
    run_free(&r);
    r = MPIRUN(3, PPV_BIN, "pp", "--mesh", "2", "--chunks", "4", "--transport", "mpi",
               "--mem-cap", "1M,210000");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "memory: rank 1 (leader) peaks at 210960 bytes (206.0 KiB), "
                                  "960 bytes over its cap of 210000"));
    run_free(&r);
    r = RUN("replay", h5);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "result: OK"));
    run_free(&r);
    r = RUN("replay", h5, "--mesh", "4");
    assert_int_equal(r.code, 0);
    run_free(&r);
    /* the wrong process count, and the mock's own options */
    r = MPIRUN(2, PPV_BIN, "pp", "--mesh", "2", "--transport", "mpi");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "are 3 ranks but the job has 2 processes (mpirun -np 3)"));
    run_free(&r);
}

/* What a `ppv fuzz --json` printed that a campaign of any size must agree
 * on with one process. */
static char *fuzz_fields(const char *json) {
    static const char *const keys[] = {"ok", "strategy", "runs", "distinct_interleavings",
                                       "failure", "failing_run", "failing_policy",
                                       "failing_steps", "minimal_prefix", "minimal_deviations",
                                       "minimal_stretches", "minimal_failure", NULL};
    return json_fields(json, keys);
}

/* `mpirun -np N ppv fuzz`: a campaign across N processes. random on a
 * seeded bug reports what one process does, with the same traces, for 2
 * and 4 processes; each process makes a part of the runs; one report is
 * printed; dfs splits its search and covers it; the checker target is
 * refused. */
static void test_fuzz_campaigns_across_processes(void **state) {
    (void)state;
    need_mpi();
    const char *args[32] = {"fuzz", "pp", "--seed-bug", "send-on-probe-hit", "--poll",
                            "--control-only", "--chunks", "4", "--steps", "2", "--strategy",
                            "random", "--runs", "2000", "--json", "--out"};
    int n = 16;
    char one_dir[4200];
    snprintf(one_dir, sizeof one_dir, "%s", tmp_path("fuzz1"));
    args[n] = one_dir;
    args[n + 1] = NULL;
    run_result one = run_in(NULL, args);
    assert_int_equal(one.code, 1);
    char *want = fuzz_fields(one.out);
    assert_non_null(strstr(want, "runs=75;")); /* the seeded bug's first failure, run 74 */
    assert_non_null(strstr(one.out, "\"processes\":1,"));
    char path[4400];
    snprintf(path, sizeof path, "%s/minimal.trace", one_dir);
    char *trace1 = slurp(path);
    for (int np = 2; np <= 4; np += 2) {
        char dir[4200];
        snprintf(dir, sizeof dir, "%s%d", tmp_path("fuzz"), np);
        args[n] = dir;
        run_result r = mpirun(np, PPV_BIN, args);
        if (r.code != 1) fprintf(stderr, "%s%s", r.out, r.err);
        assert_int_equal(r.code, 1);
        char *got = fuzz_fields(r.out);
        assert_string_equal(got, want);
        char processes[32];
        snprintf(processes, sizeof processes, "\"processes\":%d,", np);
        assert_non_null(strstr(r.out, processes));
        /* one report, by process 0: one JSON object */
        assert_null(strstr(strchr(r.out, '{') + 1, "{\"ok\""));
        /* each process made a part of the runs */
        json_object *o = json_tokener_parse(r.out), *each = NULL;
        assert_true(json_object_object_get_ex(o, "process_runs", &each));
        assert_int_equal(json_object_array_length(each), np);
        int64_t sum = 0;
        for (int i = 0; i < np; i++) {
            int64_t k = json_object_get_int64(json_object_array_get_idx(each, (size_t)i));
            assert_true(k > 0 && k < 74);
            sum += k;
        }
        assert_true(sum >= 74);
        json_object_put(o);
        /* the same minimal trace */
        snprintf(path, sizeof path, "%s/minimal.trace", dir);
        char *trace = slurp(path);
        assert_string_equal(trace, trace1);
        free(trace);
        free(got);
        run_free(&r);
    }
    free(trace1);
    free(want);
    run_free(&one);
    /* without a failure: the same runs and interleavings, each process a share */
    run_result clean = RUN("fuzz", "pp", "--control-only", "--chunks", "4", "--strategy",
                           "portfolio", "--runs", "3000", "--json");
    assert_int_equal(clean.code, 0);
    run_result r = MPIRUN(2, PPV_BIN, "fuzz", "pp", "--control-only", "--chunks", "4",
                          "--strategy", "portfolio", "--runs", "3000", "--json");
    assert_int_equal(r.code, 0);
    char *a = fuzz_fields(clean.out), *b = fuzz_fields(r.out);
    assert_string_equal(b, a);
    assert_non_null(strstr(a, "ok=true;strategy=\"portfolio\";runs=3000;"));
    free(a);
    free(b);
    run_free(&clean);
    run_free(&r);
    /* dfs: the search split, covered whole */
    r = MPIRUN(2, PPV_BIN, "fuzz", "pp", "--control-only", "--chunks", "3", "--poll",
               "--strategy", "dfs");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "strategy dfs (partial-order reduction, sleep sets), across 2 "
                                  "processes\n"));
    assert_non_null(strstr(r.out, "; every class explored\n"));
    assert_non_null(strstr(r.out, "runs by process: "));
    run_free(&r);
    /* the checker is one process's */
    r = MPIRUN(2, PPV_BIN, "fuzz", "checker", "--runs", "1");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "ppv fuzz: checker runs in one process; start it without "
                                  "mpirun (2 processes here)"));
    run_free(&r);
}

/* Options of one transport are refused on the other (no MPI needed). */
static void test_transport_options(void **state) {
    (void)state;
    const char *f = data_path("rendezvous_only_train.csv");
    run_result r = RUN("run", f, "--timeout", "5");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--timeout is for --transport mpi"));
    run_free(&r);
    r = RUN("run", f, "--allow-unsafe");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--allow-unsafe is for --transport mpi"));
    run_free(&r);
    static const char *const mock_only[][2] = {
        {"--policy", "random"}, {"--seed", "3"}, {"--watchdog", "10"}, {"--trace-out", "x"}};
    for (size_t k = 0; k < 4; k++) {
        r = RUN("run", f, "--transport", "mpi", mock_only[k][0], mock_only[k][1]);
        assert_int_equal(r.code, 2);
        assert_non_null(strstr(r.err, "is the mock transport's"));
        run_free(&r);
    }
    r = RUN("run", f, "--transport", "tcp");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--transport is mock, mpi or nccl, not 'tcp'"));
    run_free(&r);
    r = RUN("run", f, "--transport", "mpi", "--timeout", "0");
    assert_int_equal(r.code, 2);
    run_free(&r);
    r = RUN("replay", "x.h5", "--timeout", "3");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--timeout is for --transport mpi"));
    run_free(&r);
    r = RUN("diff", "a.h5", "b.h5", "--transport", "mpi");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--transport is replay's option"));
    run_free(&r);
    r = RUN("replay", PPV_GOLDEN_DIR "/infer_pp1_stash_cut.h5", "--transport", "mpi");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "is an inference recording, which replays on the mock"));
    run_free(&r);
    static const char *const pp_mock_only[][2] = {{"--inject", "OM-03"},
                                                  {"--policy", "random"},
                                                  {"--watchdog-steps", "50"},
                                                  {"--compare-kv", NULL}};
    for (size_t k = 0; k < 4; k++) {
        r = pp_mock_only[k][1]
                ? RUN("pp", "--transport", "mpi", pp_mock_only[k][0], pp_mock_only[k][1])
                : RUN("pp", "--transport", "mpi", pp_mock_only[k][0]);
        assert_int_equal(r.code, 2);
        assert_non_null(strstr(r.err, "is the mock transport's"));
        run_free(&r);
    }
    r = RUN("pp", "--timeout", "4");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--timeout is for --transport mpi"));
    run_free(&r);
    r = RUN("verify-recompute", f, "--transport", "mpi");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--transport is an option of run and record"));
    run_free(&r);
}


/* A scenario that must hang is given 1 s (rank 0 three times that), one
 * that must finish or fail at once 30 or 60 s: a loaded machine does not
 * turn it into a hang. */
static run_result ranks(int n, const char *scenario, const char *sem, const char *timeout) {
    return MPIRUN(n, RANKS_BIN, scenario, sem, timeout);
}

static char *mock_ranks(const char *scenario, const char *n) {
    const char *argv[] = {RANKS_BIN, "--mock", scenario, n, NULL};
    run_result r = run_program(NULL, NULL, 0, argv);
    assert_int_equal(r.code, 0);
    free(r.err);
    return r.out;
}

/* Allreduce in member order, broadcast, allgather: the mock's bits. */
static void test_collectives_have_the_mocks_bits(void **state) {
    (void)state;
    need_mpi();
    char *want = mock_ranks("collectives", "4");
    run_result r = ranks(4, "collectives", "rendezvous", "60");
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, want);
    /* the sums in member order (1, 0, 3, 0, 5, 0: the reverse order, or
     * pairs first, gives 0, 2, 0, 4, 0, 6), rank 1's word, and 100 + r * r
     * from each rank */
    assert_string_equal(want, "0000803f0000000000004040000000000000a04000000000"
                              "8877665544332211"
                              "6400000065000000680000006d000000"
                              "000000000000000000000000000000000000000000000000"
                              "000000000000000000000000000000000000000000000000\n");
    run_free(&r);
    free(want);
}

/* Send then receive on both sides: a hang under rendezvous and under
 * eager below the size, done under eager, and grouped under rendezvous. */
static void test_exchange_by_semantics(void **state) {
    (void)state;
    need_mpi();
    run_result r = ranks(2, "exchange", "rendezvous", "1");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "rank 1 of 2: hang: 1SEND_X has waited"));
    assert_non_null(strstr(r.err, "to send to rank 0 (64 bytes, a synchronous send"));
    run_free(&r);
    r = ranks(2, "exchange", "eager:63", "1");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "hang: 1SEND_X"));
    run_free(&r);
    char *want = mock_ranks("exchange-grouped", "2");
    static const char *const ok[][2] = {
        {"exchange", "eager"}, {"exchange", "eager:64"}, {"exchange-grouped", "rendezvous"}};
    for (size_t k = 0; k < 3; k++) {
        r = ranks(2, ok[k][0], ok[k][1], "60");
        assert_int_equal(r.code, 0);
        assert_string_equal(r.out, want); /* rank 1's 64 bytes, 40..7f */
        run_free(&r);
    }
    assert_string_equal(want, "404142434445464748494a4b4c4d4e4f505152535455565758595a5b5c5d5e5f"
                              "606162636465666768696a6b6c6d6e6f707172737475767778797a7b7c7d7e7f\n");
    free(want);
}

static void test_failures_are_reported_and_end_the_job(void **state) {
    (void)state;
    need_mpi();
    /* only the poll must wait for its timeout; the others fail at once, and
     * a long timeout keeps a loaded machine from turning them into hangs */
    static const struct {
        const char *scenario;
        int code;
        const char *says, *timeout;
    } cases[] = {
        {"size-mismatch", 1, "1RECV_F0 receives 16 bytes but rank 0 sent 8", "30"},
        {"collective-mismatch", 1, "collective on communicator 0: rank ", "30"},
        {"tripwire", 1, "rank 1 of 2: tripwire: chunk 3 came after chunk 4", "30"},
        {"env-failure", 2, "rank 1 of 2: out of memory holding chunk 3", "30"},
        {"poll", 1, "rank 1 of 2: hang: rank 1 has polled for", "1"},
        {"lonely-collective", 1, "the end of the run", "30"}, /* a mismatch: below */
        {"nested-group", 1, "group_start inside an open group", "30"},
        {"bad-peer", 1, "0SEND_F0: rank 0 cannot send to rank 5 on communicator 0", "30"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        run_result r = ranks(2, cases[k].scenario, "rendezvous", cases[k].timeout);
        if (r.code != cases[k].code || !strstr(r.err, cases[k].says))
            fprintf(stderr, "%s: exit %d\n%s", cases[k].scenario, r.code, r.err);
        assert_int_equal(r.code, cases[k].code);
        assert_non_null(strstr(r.err, cases[k].says));
        if (k == 5) /* rank 1 ended while rank 0 broadcast: either reports it */
            assert_non_null(strstr(r.err, "does not match member"));
        if (k == 1) /* either rank may be the one to report it first */
            assert_true(strstr(r.err, "BCAST (8 bytes, root 0) does not match member 1's (BCAST, "
                                      "8 bytes, root 1)") ||
                        strstr(r.err, "BCAST (8 bytes, root 1) does not match member 0's (BCAST, "
                                      "8 bytes, root 0)"));
        run_free(&r);
    }
}

/* ---- the NCCL transport, on the stand-in (tests/fake_nccl/) ---------------------- */

#ifndef PPV_HAVE_NCCL
#define PPV_HAVE_NCCL 0
#define PPV_FAKE_NCCL ""
#endif

/* The stand-in in libnccl's and libcudart's place, and its switches
 * cleared (a test sets the ones it wants). */
static void need_nccl(void) {
    need_mpi();
    if (!PPV_HAVE_NCCL) skip();
    setenv("PPV_NCCL_LIBRARY", PPV_FAKE_NCCL, 1);
    setenv("PPV_CUDART_LIBRARY", PPV_FAKE_NCCL, 1);
    unsetenv("PPV_FAKE_NCCL_HANG_AT");
    unsetenv("PPV_FAKE_NCCL_UNISSUED_AT");
    unsetenv("PPV_FAKE_NCCL_FAIL_AT");
    unsetenv("PPV_FAKE_NCCL_RANK");
    unsetenv("PPV_FAKE_NCCL_EAGER_BYTES");
    unsetenv("PPV_FAKE_NCCL_STATS");
}

static void test_nccl_run_equals_mock(void **state) {
    (void)state;
    need_nccl();
    static const struct {
        const char *kind, *p, *m;
    } sizes[] = {{"1f1b", "4", "8"}, {"zbv", "2", "4"}, {"interleaved-1f1b", "2", "4"}};
    for (size_t k = 0; k < 3; k++) {
        char name[64];
        snprintf(name, sizeof name, "nccl-%s.csv", sizes[k].kind);
        char *path = gen_file(name, sizes[k].kind, sizes[k].p, sizes[k].m);
        run_result mock = RUN("run", path, "--json");
        run_result r =
            MPIRUN(atoi(sizes[k].p), PPV_BIN, "run", path, "--transport", "nccl", "--json");
        if (r.code != 0) fprintf(stderr, "%s: %s%s", sizes[k].kind, r.out, r.err);
        assert_int_equal(mock.code, 0);
        assert_int_equal(r.code, 0);
        assert_same_fields(run_fields, mock.out, r.out);
        assert_non_null(strstr(r.out, "\"transport\":\"nccl\""));
        run_free(&mock);
        run_free(&r);
    }
    /* record on NCCL, replay on the mock */
    char h5[4200];
    snprintf(h5, sizeof h5, "%s", tmp_path("nccl.h5"));
    char *path = gen_file("nccl-rec.csv", "zbv", "2", "4");
    run_result r = MPIRUN(2, PPV_BIN, "record", h5, path, "--transport", "nccl");
    assert_int_equal(r.code, 0);
    run_free(&r);
    r = RUN("replay", h5);
    assert_int_equal(r.code, 0);
    run_free(&r);
}

/* The pipeline on NCCL, the mesh a communicator split from the world: the
 * mock's output digest and calls, with recompute and with stash at every
 * depth (stage 0's next envelope passes the leader's result: eager sends
 * are launched, not waited for, on a communicator of their direction);
 * polling refused (NCCL has no probe). */
static void test_nccl_pp_equals_mock(void **state) {
    (void)state;
    need_nccl();
    static const char *const meshes[][2] = {{"2", "3"}, {"4", "5"}};
    for (size_t k = 0; k < 2; k++) {
        run_result mock =
            RUN("pp", "--mesh", meshes[k][0], "--chunks", "5", "--kv", "recompute", "--json");
        run_result r = MPIRUN(atoi(meshes[k][1]), PPV_BIN, "pp", "--mesh", meshes[k][0], "--chunks",
                              "5", "--kv", "recompute", "--json", "--transport", "nccl");
        if (r.code != 0) fprintf(stderr, "mesh %s: %s%s", meshes[k][0], r.out, r.err);
        assert_int_equal(mock.code, 0);
        assert_int_equal(r.code, 0);
        assert_same_fields(pp_fields, mock.out, r.out);
        assert_non_null(strstr(r.out, "\"transport\":\"nccl\""));
        run_free(&mock);
        run_free(&r);
    }
    /* stash, one to four envelopes in flight, a hard cut: the mock's output */
    static const char *const stash[][7] = {
        {"2", "--d-in", "1", "--d-out", "1", "--chunks", "5"},
        {"2", "--d-in", "2", "--d-out", "2", "--chunks", "5"},
        {"2", "--d-in", "2", "--d-out", "1", "--hard-cut-at", "3"},
        {"4", "--d-in", "4", "--d-out", "2", "--chunks", "7"},
    };
    for (size_t k = 0; k < sizeof stash / sizeof stash[0]; k++) {
        const char *const *o = stash[k];
        run_result mock = RUN("pp", "--mesh", o[0], o[1], o[2], o[3], o[4], o[5], o[6], "--json");
        run_result r = MPIRUN(atoi(o[0]) + 1, PPV_BIN, "pp", "--mesh", o[0], o[1], o[2], o[3], o[4], o[5],
                              o[6], "--json", "--transport", "nccl", "--timeout", "20");
        if (r.code != 0) fprintf(stderr, "stash %zu: %s%s", k, r.out, r.err);
        assert_int_equal(mock.code, 0);
        assert_int_equal(r.code, 0);
        assert_same_fields(pp_fields, mock.out, r.out);
        run_free(&mock);
        run_free(&r);
    }
    /* a launched send's staging buffer is given back when it is done: the
     * device memory taken does not grow with the run (a pool that kept
     * them would take 4 more buffers a chunk) */
    char stats[2][4200];
    for (int k = 0; k < 2; k++) {
        snprintf(stats[k], sizeof stats[k], "%s", tmp_path(k ? "stats-60" : "stats-6"));
        unlink(stats[k]);
        setenv("PPV_FAKE_NCCL_STATS", stats[k], 1);
        run_result r = MPIRUN(3, PPV_BIN, "pp", "--mesh", "2", "--chunks", k ? "60" : "6",
                              "--transport", "nccl");
        assert_int_equal(r.code, 0);
        run_free(&r);
    }
    unsetenv("PPV_FAKE_NCCL_STATS");
    for (int rank = 0; rank < 3; rank++) {
        long got[2] = {-1, -1};
        for (int k = 0; k < 2; k++) {
            char *text = slurp(stats[k]), key[32];
            snprintf(key, sizeof key, "rank %d: ", rank);
            const char *at = strstr(text, key);
            assert_non_null(at);
            got[k] = strtol(at + strlen(key), NULL, 10);
            free(text);
        }
        if (got[1] >= got[0] + 10)
            fail_msg("rank %d took %ld device buffers in 6 chunks, %ld in 60", rank, got[0],
                     got[1]);
    }
    run_result r = RUN("pp", "--poll", "--kv", "recompute", "--transport", "nccl");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "NCCL has no probe"));
    run_free(&r);
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* OM-13 on processes: stage 0 dies after chunk 1. With --worker-watchdog
 * the mesh ends the job within the watchdog (plus a heartbeat, plus the
 * job's start), naming the last header it saw, long before --timeout; on
 * MPI and on NCCL. A live stage 0's heartbeats are NOOPs that change
 * nothing: the mock's output. */
static void test_worker_watchdog_ends_an_orphaned_mesh(void **state) {
    (void)state;
    need_mpi();
    run_result mock = RUN("pp", "--mesh", "2", "--chunks", "6", "--json");
    run_result r = MPIRUN(3, PPV_BIN, "pp", "--transport", "mpi", "--mesh", "2", "--chunks", "6",
                          "--heartbeat", "0.0001", "--worker-watchdog", "30", "--json");
    assert_int_equal(r.code, 0);
    assert_null(strstr(r.out, "\"heartbeats\":0,"));
    assert_same_fields(pp_fields, mock.out, r.out);
    run_free(&mock);
    run_free(&r);
    /* the watchdog is wall time, and must outlast the heartbeat */
    r = RUN("pp", "--worker-watchdog", "2");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--worker-watchdog is for --transport mpi or nccl"));
    run_free(&r);
    r = RUN("pp", "--transport", "mpi", "--heartbeat", "3", "--worker-watchdog", "2");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--heartbeat 3 must be shorter than --worker-watchdog 2"));
    run_free(&r);
    for (int t = 0; t < 2; t++) {
        if (t) need_nccl(); /* skips the rest where NCCL's stand-in is not built */
        double t0 = now_s();
        r = MPIRUN(3, PPV_BIN, "pp", "--transport", t ? "nccl" : "mpi", "--mesh", "2", "--chunks",
                   "4", "--d-in", "1", "--inject", "OM-13", "--worker-watchdog", "2", "--heartbeat",
                   "0.5", "--timeout", "120");
        double took = now_s() - t0;
        assert_int_equal(r.code, 1);
        assert_non_null(strstr(r.err, "(--worker-watchdog 2: mesh rank "));
        assert_non_null(strstr(r.err, "the last header it saw: call_id "));
        if (took > 2 + 0.5 + 30) fail_msg("%s: the mesh ended after %.1f s", t ? "nccl" : "mpi", took);
        fprintf(stderr, "OM-13 on %s: the job ended after %.1f s (watchdog 2 s)\n",
                t ? "nccl" : "mpi", took);
        run_free(&r);
    }
}

/* Processes started with other settings (one mpirun, two command lines):
 * the startup handshake names the key, the rank and both values before
 * any envelope: the transport's own settings and the generator too. */
static void test_pp_processes_with_other_settings_stop_at_the_handshake(void **state) {
    (void)state;
    need_mpi();
    static const struct {
        const char *opt, *val, *want;
    } cases[] = {
        {"--timeout", "5", "the startup handshake found ranks that disagree: timeout_ms: rank 2 "
                           "has 5000, rank 0 has 60000"},
        {"--generator", PPV_TP_MLP, "generator: rank 2 has "},
        {"--poll", NULL, "poll: rank 2 has 1, rank 0 has 0"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        run_result r = MPIRUN(2, PPV_BIN, "pp", "--transport", "mpi", "--mesh", "2", "--chunks", "2",
                              ":", "-np", "1", PPV_BIN, "pp", "--transport", "mpi", "--mesh", "2",
                              "--chunks", "2", cases[k].opt, cases[k].val);
        if (r.code != 1) fprintf(stderr, "%s: exit %d: %s%s", cases[k].opt, r.code, r.out, r.err);
        assert_int_equal(r.code, 1);
        if (!strstr(r.err, cases[k].want)) fail_msg("%s: '%s' lacks '%s'", cases[k].opt, r.err,
                                                    cases[k].want);
        assert_non_null(strstr(r.err, "FM-01 (rank 0, group world, before the first envelope)"));
        run_free(&r);
    }
}

/* A plug-in that ends its process, aborts or never returns, on a mesh
 * rank of an MPI or NCCL job: that rank names the plug-in, the function,
 * the mesh rank and the call before the job ends, and the job fails
 * (never exit 0 with nothing said). */
static void test_a_plugin_that_ends_its_rank_is_named_on_mpi_and_nccl(void **state) {
    (void)state;
    need_mpi();
    static const struct {
        const char *die, *says;
    } cases[] = {
        {"exit", "called exit(0) in call on mesh rank 1 (call_id 0, chunk_index 0, cache_epoch 0)"},
        {"_exit", "called _exit(0) in call on mesh rank 1 (call_id 0"},
        {"abort", "died of SIGABRT (abort) in call on mesh rank 1 (call_id 0"},
        {"loop", "hung in call on mesh rank 1 (call_id 0, chunk_index 0, cache_epoch 0): it has "
                 "not returned after 2.0 s of its own code (--call-timeout 2)"},
    };
    for (int t = 0; t < 2; t++) {
        if (t == 1 && !PPV_HAVE_NCCL) break;
        if (t == 1) need_nccl();
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
            char params[32];
            snprintf(params, sizeof params, "die=%s", cases[k].die);
            run_result r = MPIRUN(3, PPV_BIN, "pp", "--mesh", "2", "--chunks", "3", "--generator",
                                  PPV_MISBEHAVE, "--generator-params", params, "--call-timeout",
                                  "2", "--transport", t ? "nccl" : "mpi");
            if (r.code != 1 || !strstr(r.err, cases[k].says))
                fprintf(stderr, "%s on %s: exit %d\n%s", cases[k].die, t ? "nccl" : "mpi", r.code,
                        r.err);
            assert_int_equal(r.code, 1);
            assert_non_null(strstr(r.err, "ppv pp: PPV-GENERATOR: generator misbehave 1 "));
            assert_non_null(strstr(r.err, cases[k].says));
            assert_null(strstr(r.out, "result: OK"));
            run_free(&r);
        }
    }
}

/* A generator plug-in's collectives on MPI and on NCCL (the stand-in):
 * the mock's outputs and calls, and the Python twin's too. */
static void test_generator_plugins_equal_the_mock_on_mpi_and_nccl(void **state) {
    (void)state;
    need_mpi();
    const char *gens[2] = {PPV_TP_MLP, PPV_TP_MLP_PY};
    for (int g = 0; g < 2; g++) {
#ifndef PPV_HAVE_PYGEN
        if (g == 1) break;
#endif
        for (int t = 0; t < 2; t++) {
#ifdef PPV_HAVE_NCCL
            if (t == 1) need_nccl();
#else
            if (t == 1) break;
#endif
            run_result mock = RUN("pp", "--generator", gens[g], "--mesh", "2", "--chunks", "4",
                                  "--kv", "recompute", "--json");
            run_result r = MPIRUN(3, PPV_BIN, "pp", "--generator", gens[g], "--mesh", "2",
                                  "--chunks", "4", "--kv", "recompute", "--json", "--transport",
                                  t ? "nccl" : "mpi");
            if (r.code != 0) fprintf(stderr, "%s on %d: %s%s", gens[g], t, r.out, r.err);
            assert_int_equal(mock.code, 0);
            assert_int_equal(r.code, 0);
            char *a = pp_fields(mock.out), *b = pp_fields(r.out);
            assert_string_equal(b, a);
            assert_non_null(strstr(a, "ok=true;chunks_emitted=4;"));
            free(a);
            free(b);
            run_free(&mock);
            run_free(&r);
        }
    }
}

/* A call that never completes: the watchdog reports the call and its
 * peer, aborts the communicator and ends the job; an asynchronous error
 * is reported the same way. */
static void test_nccl_watchdog_and_async_errors(void **state) {
    (void)state;
    need_nccl();
    char *path = gen_file("nccl-w.csv", "zbv", "2", "4");
    setenv("PPV_FAKE_NCCL_HANG_AT", "3", 1);
    setenv("PPV_FAKE_NCCL_RANK", "1", 1);
    run_result r = MPIRUN(2, PPV_BIN, "run", path, "--transport", "nccl", "--timeout", "1");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "has waited"));
    assert_non_null(strstr(r.err, "(--timeout 1); ncclCommAbort called"));
    assert_true(strstr(r.err, "fake nccl: ncclCommAbort on rank 0") ||
                strstr(r.err, "fake nccl: ncclCommAbort on rank 1"));
    assert_true(strstr(r.err, "1RECV_F2 (a receive of 512 bytes from rank 0)") ||
                strstr(r.err, "0SEND_F2 (a send of 512 bytes to rank 1)"));
    run_free(&r);
    unsetenv("PPV_FAKE_NCCL_HANG_AT");
    setenv("PPV_FAKE_NCCL_FAIL_AT", "3", 1);
    setenv("PPV_FAKE_NCCL_RANK", "0", 1);
    r = MPIRUN(2, PPV_BIN, "run", path, "--transport", "nccl", "--timeout", "20");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "rank 0 of 2: 0SEND_F2 (a send of 512 bytes to rank 1): the "
                                  "communicator failed (NCCL says: remote process exited"));
    assert_non_null(strstr(r.err, "fake nccl: ncclCommAbort on rank 0"));
    run_free(&r);
    unsetenv("PPV_FAKE_NCCL_FAIL_AT");
    unsetenv("PPV_FAKE_NCCL_RANK");
    /* a schedule that deadlocks unless sends are buffered, launched anyway */
    r = MPIRUN(2, PPV_BIN, "run", data_path("rendezvous_only_train.csv"), "--transport", "nccl",
               "--allow-unsafe", "--timeout", "1");
    assert_int_equal(r.code, 1);
    assert_true(strstr(r.err, "hang: 0SEND_F1 (a send of 512 bytes to rank 1)") ||
                strstr(r.err, "hang: 1SEND_F0 (a send of 512 bytes to rank 0)"));
    run_free(&r);
}

/* The transport's own logic on the stand-in: the mock's bits for the
 * collectives, groups launched together, NCCL's FIFO masking an unsafe
 * exchange, and what NCCL cannot do refused. */
static void test_nccl_transport_logic(void **state) {
    (void)state;
    need_nccl();
    char *want = mock_ranks("collectives", "4");
    run_result r = MPIRUN(4, RANKS_BIN, "collectives", "rendezvous", "60", "nccl");
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, want);
    run_free(&r);
    free(want);
    want = mock_ranks("exchange-grouped", "2");
    r = MPIRUN(2, RANKS_BIN, "exchange-grouped", "rendezvous", "60", "nccl");
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, want);
    run_free(&r);
    /* a rank's message to itself, grouped with its receive (NCCL allows it) */
    r = MPIRUN(2, RANKS_BIN, "self-grouped", "rendezvous", "60", "nccl");
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out,
                        "c0c1c2c3c4c5c6c7c8c9cacbcccdcecfd0d1d2d3d4d5d6d7d8d9dadbdcdddedf"
                        "e0e1e2e3e4e5e6e7e8e9eaebecedeeeff0f1f2f3f4f5f6f7f8f9fafbfcfdfeff\n");
    run_free(&r);
    /* a group NCCL never puts on the stream: the wait for it is bounded too
     * (one rank, so no other rank's watchdog ends the job first) */
    setenv("PPV_FAKE_NCCL_UNISSUED_AT", "1", 1);
    r = MPIRUN(1, RANKS_BIN, "self-grouped", "rendezvous", "1", "nccl");
    unsetenv("PPV_FAKE_NCCL_UNISSUED_AT");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "hang: ncclGroupEnd was not issued to the stream in "));
    assert_non_null(strstr(r.err, "(--timeout 3); ncclCommAbort called")); /* rank 0: 3x */
    run_free(&r);
    /* ungrouped send-send: a hang when NCCL waits for the receive ... */
    r = MPIRUN(2, RANKS_BIN, "exchange", "rendezvous", "1", "nccl");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "hang: 1SEND_X (a send of 64 bytes to rank 0)"));
    run_free(&r);
    /* ... which NCCL's FIFO hides when the message fits (issue #479's pattern) */
    setenv("PPV_FAKE_NCCL_EAGER_BYTES", "64", 1);
    r = MPIRUN(2, RANKS_BIN, "exchange", "rendezvous", "60", "nccl");
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, want);
    run_free(&r);
    unsetenv("PPV_FAKE_NCCL_EAGER_BYTES");
    /* ... and eager semantics pass, NCCL waiting for every receive: the
     * sends are launched on their own stream and communicator ... */
    r = MPIRUN(2, RANKS_BIN, "exchange", "eager", "60", "nccl");
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, want);
    run_free(&r);
    /* ... but not sends above eager:BYTES */
    r = MPIRUN(2, RANKS_BIN, "exchange", "eager:32", "1", "nccl");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "hang: 1SEND_X (a send of 64 bytes to rank 0)"));
    run_free(&r);
    free(want);
    /* launched and waited-for sends to one peer arrive in the order sent */
    want = mock_ranks("mixed-sizes", "2");
    r = MPIRUN(2, RANKS_BIN, "mixed-sizes", "eager:32", "60", "nccl");
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, want);
    run_free(&r);
    free(want);
    /* a launched send nobody receives: the run's end waits for it and
     * reports the hang (NCCL cannot be left with a send in flight) */
    r = MPIRUN(2, RANKS_BIN, "unreceived", "eager", "1", "nccl");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "hang: the end of the run"));
    run_free(&r);
    static const struct {
        const char *scenario, *says;
    } cases[] = {
        {"nested-group", "group_start inside an open group"},
        {"poll", "NCCL has no probe"},
        {"collective-mismatch", "collective on communicator 0: rank "},
        {"tripwire", "rank 1 of 2: tripwire: chunk 3 came after chunk 4"},
        {"lonely-collective", "the end of the run"},
        {"self-ungrouped", "0SEND_SELF: rank 0 exchanges with itself outside a group"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        r = MPIRUN(2, RANKS_BIN, cases[k].scenario, "rendezvous", "30", "nccl");
        if (r.code != 1 || !strstr(r.err, cases[k].says))
            fprintf(stderr, "%s: exit %d\n%s", cases[k].scenario, r.code, r.err);
        assert_int_equal(r.code, 1);
        assert_non_null(strstr(r.err, cases[k].says));
        run_free(&r);
    }
}

/* ---- ppv launch: ranks without mpirun ----------------------------------------------- */

/* Each copy learns its rank, the size and a folder that exists while the
 * job runs and is gone after it; a failing copy ends the others, and its
 * status is the launch's (no MPI needed). */
static void test_launch_gives_each_copy_its_rank(void **state) {
    (void)state;
    char out[4200];
    snprintf(out, sizeof out, "%s", tmp_path("launch-out"));
    mkdir(out, 0700);
    setenv("PPV_TEST_OUT", out, 1);
    run_result r = RUN("launch", "-n", "3", "--", "sh", "-c",
                       "test -d \"$PPV_LAUNCH_DIR\" && echo \"$PPV_LAUNCH_RANK $PPV_LAUNCH_SIZE "
                       "$PPV_LAUNCH_DIR\" > \"$PPV_TEST_OUT/$PPV_LAUNCH_RANK\"");
    assert_int_equal(r.code, 0);
    run_free(&r);
    char launch_dir[4200] = "";
    for (int k = 0; k < 3; k++) {
        char path[4300];
        snprintf(path, sizeof path, "%s/%d", out, k);
        char *text = slurp(path);
        int rank = -1, size = -1;
        char dir[4200];
        assert_int_equal(sscanf(text, "%d %d %4199s", &rank, &size, dir), 3);
        assert_int_equal(rank, k);
        assert_int_equal(size, 3);
        if (k == 0) snprintf(launch_dir, sizeof launch_dir, "%s", dir);
        assert_string_equal(dir, launch_dir); /* one folder for the job */
        free(text);
        unlink(path);
    }
    rmdir(out);
    assert_int_not_equal(access(launch_dir, F_OK), 0); /* removed at the end */
    /* rank 1 fails at once; rank 0 would sleep a minute: it is ended */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    r = RUN("launch", "-n", "2", "--", "sh", "-c",
            "if [ \"$PPV_LAUNCH_RANK\" = 1 ]; then exit 3; fi; exec sleep 60");
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_int_equal(r.code, 3);
    assert_non_null(strstr(r.err, "ppv launch: rank 1 ended with status 3; ending the other 1"));
    assert_true(t1.tv_sec - t0.tv_sec < 30);
    run_free(&r);
    r = RUN("launch", "-n", "0", "--", "true");
    assert_int_equal(r.code, 2);
    run_free(&r);
    r = RUN("launch", "-n", "2");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "needs the COMMAND to start"));
    run_free(&r);
}

/* The NCCL transport under ppv launch: rank 0's id reaches every rank
 * through the launch folder, and one rank runs a step end to end on the
 * stand-in (which carries messages over MPI, which ppv launch does not
 * start: beyond one rank each copy is a world of its own, so there only
 * the bootstrap can be seen). */
static void test_launch_bootstraps_nccl(void **state) {
    (void)state;
    need_nccl();
    char *path = gen_file("one.csv", "1f1b", "1", "4");
    run_result mock = RUN("run", path, "--json");
    run_result r =
        RUN("launch", "-n", "1", "--", PPV_BIN, "run", path, "--transport", "nccl", "--json");
    assert_int_equal(mock.code, 0);
    if (r.code != 0) fprintf(stderr, "%s%s", r.out, r.err);
    assert_int_equal(r.code, 0);
    assert_same_fields(run_fields, mock.out, r.out);
    run_free(&mock);
    run_free(&r);
    char log[4200];
    snprintf(log, sizeof log, "%s", tmp_path("ids.log"));
    unlink(log);
    setenv("PPV_FAKE_NCCL_ID_LOG", log, 1);
    r = RUN("launch", "-n", "2", "--", RANKS_BIN, "start-only", "rendezvous", "30", "nccl");
    unsetenv("PPV_FAKE_NCCL_ID_LOG");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "rank 0 of 2 started\n"));
    assert_non_null(strstr(r.out, "rank 1 of 2 started\n"));
    run_free(&r);
    char *text = slurp(log);
    char made[200] = "", took0[200] = "", took1[200] = "";
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        if (!strncmp(line, "made 0 ", 7)) snprintf(made, sizeof made, "%s", line + 7);
        if (!strncmp(line, "took 0 ", 7)) snprintf(took0, sizeof took0, "%s", line + 7);
        if (!strncmp(line, "took 1 ", 7)) snprintf(took1, sizeof took1, "%s", line + 7);
    }
    assert_true(made[0] != 0);
    assert_string_equal(took0, made);
    assert_string_equal(took1, made);
    free(text);
}

int main(void) {
    if (geteuid() == 0) { /* OpenMPI refuses root unless told (a CI container) */
        setenv("OMPI_ALLOW_RUN_AS_ROOT", "1", 1);
        setenv("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1", 1);
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_transport_options),
        cmocka_unit_test(test_run_equals_mock_for_every_kind),
        cmocka_unit_test(test_run_text_report_once),
        cmocka_unit_test(test_deadlock_refused_then_reported_by_the_watchdog),
        cmocka_unit_test(test_engine_refuses_the_mocks_settings),
        cmocka_unit_test(test_process_count_must_match),
        cmocka_unit_test(test_record_and_replay_across_transports),
        cmocka_unit_test(test_pp_equals_mock_on_every_mesh),
        cmocka_unit_test(test_pp_record_on_mpi_replays_on_the_mock),
        cmocka_unit_test(test_collectives_have_the_mocks_bits),
        cmocka_unit_test(test_exchange_by_semantics),
        cmocka_unit_test(test_failures_are_reported_and_end_the_job),
        cmocka_unit_test(test_nccl_run_equals_mock),
        cmocka_unit_test(test_nccl_pp_equals_mock),
        cmocka_unit_test(test_worker_watchdog_ends_an_orphaned_mesh),
        cmocka_unit_test(test_generator_plugins_equal_the_mock_on_mpi_and_nccl),
        cmocka_unit_test(test_a_plugin_that_ends_its_rank_is_named_on_mpi_and_nccl),
        cmocka_unit_test(test_pp_processes_with_other_settings_stop_at_the_handshake),
        cmocka_unit_test(test_nccl_watchdog_and_async_errors),
        cmocka_unit_test(test_nccl_transport_logic),
        cmocka_unit_test(test_fuzz_campaigns_across_processes),
        cmocka_unit_test(test_launch_gives_each_copy_its_rank),
        cmocka_unit_test(test_launch_bootstraps_nccl),
    };
    return cmocka_run_group_tests(tests, NULL, tmp_cleanup);
}
