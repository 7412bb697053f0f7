/* test_generator.c - generator plug-ins (ppv_generator.h) under ppv pp,
 * replay and fuzz pp: the built-in sized from its settings, the example
 * tensor-parallel MLP (examples/generators/tp_mlp.c) on every mesh, and a
 * plug-in that breaks the interface on purpose (generators/misbehave.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <json-c/json.h>

#include "ppv_engine.h"
#include "testutil.h"

/* The value after "label: " on a line of out, copied into buf. */
static const char *field(const char *out, const char *label, char *buf, size_t n) {
    const char *p = strstr(out, label);
    if (!p) return "";
    p += strlen(label);
    size_t len = strcspn(p, "\n");
    snprintf(buf, n, "%.*s", (int)len, p);
    return buf;
}

/* The output digest of a pp run that must end OK. */
static void digest_of(const char *const *args, char *digest, size_t n) {
    run_result r = run_in(NULL, args);
    if (r.code != 0) fprintf(stderr, "%s%s", r.out, r.err);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "result: OK"));
    field(r.out, "output digest: ", digest, n);
    run_free(&r);
}

/* The built-in runs through the same table, sized from --generator-params:
 * a mesh of 8 needs 8 heads, and gives mesh 1's bits. */
static void test_builtin_with_8_heads_runs_a_mesh_of_8_with_mesh_1s_bits(void **state) {
    (void)state;
    char d1[64], d8[64];
    digest_of((const char *const[]){"pp", "--mesh", "1", "--generator-params", "n_heads=8",
                                    "--chunks", "3", NULL},
              d1, sizeof d1);
    digest_of((const char *const[]){"pp", "--mesh", "8", "--generator-params", "n_heads=8",
                                    "--chunks", "3", NULL},
              d8, sizeof d8);
    assert_string_equal(d1, d8);
    assert_int_equal(strlen(d1), 16);
    /* other heads, other weights: another output */
    char d4[64];
    digest_of((const char *const[]){"pp", "--mesh", "1", "--chunks", "3", NULL}, d4, sizeof d4);
    assert_string_not_equal(d1, d4);
    run_result r = RUN("pp", "--mesh", "8", "--chunks", "3");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--mesh 8 must divide the generator's 4 heads"));
    run_free(&r);
    r = RUN("pp", "--generator-params", "n_heads=8,depth=3");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "the built-in generator has no setting 'depth'"));
    run_free(&r);
    static const char *const bad[][2] = {
        {"n_heads=8,", "--generator-params needs key=value items: an empty item (a trailing ',')"},
        {"layers=two", "'layers=two' is not key=N"},
        {"layers=-1", "'layers=-1' is not key=N"},
        {"layers=2000000", "layers = 2000000 is out of range: 1..1048576"},
        {"layers=2,,seed=1", "--generator-params needs key=value items: an empty item (',,')"},
    };
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        r = RUN("pp", "--generator-params", bad[k][0]);
        assert_int_equal(r.code, 2);
        if (!strstr(r.err, bad[k][1])) fail_msg("%s: '%s' lacks '%s'", bad[k][0], r.err, bad[k][1]);
        run_free(&r);
    }
}

/* --frame sizes the latents: the chunk's tensors follow it. */
static void test_frame_sizes_the_latents(void **state) {
    (void)state;
    char a[64], b[64];
    digest_of((const char *const[]){"pp", "--chunks", "2", "--frame", "48x64", NULL}, a, sizeof a);
    digest_of((const char *const[]){"pp", "--chunks", "2", NULL}, b, sizeof b);
    assert_string_not_equal(a, b);
    run_result r = RUN("pp", "--frame", "40x64");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--frame needs HxW in pixels, multiples of 16 with a whole number from 16 to 4096, not '40x64'"));
    run_free(&r);
    r = RUN("pp", "--frame", "32");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--frame needs HxW in pixels, multiples of 16 with a whole number from 16 to 4096, not '32'"));
    run_free(&r);
}

/* The example plug-in's tensor parallelism: meshes 1, 2 and 4 give the
 * same bits, whatever the interleaving policy. */
static void test_tp_mlp_gives_the_same_bits_on_meshes_1_2_and_4(void **state) {
    (void)state;
    char d[3][64];
    const char *mesh[3] = {"1", "2", "4"};
    for (int k = 0; k < 3; k++)
        digest_of((const char *const[]){"pp", "--generator", PPV_TP_MLP, "--mesh", mesh[k],
                                        "--chunks", "6", "--hard-cut-at", "4", "--policy",
                                        k == 2 ? "random" : "rr", NULL},
                  d[k], sizeof d[k]);
    assert_string_equal(d[0], d[1]);
    assert_string_equal(d[0], d[2]);
    /* its own arithmetic, not the built-in's; its settings change it */
    char builtin[64], other[64];
    digest_of((const char *const[]){"pp", "--chunks", "6", "--hard-cut-at", "4", NULL}, builtin,
              sizeof builtin);
    digest_of((const char *const[]){"pp", "--generator", PPV_TP_MLP, "--generator-params",
                                    "hidden=32,seed=9", "--chunks", "6", "--hard-cut-at", "4",
                                    NULL},
              other, sizeof other);
    assert_string_not_equal(d[0], builtin);
    assert_string_not_equal(d[0], other);
}

static void test_tp_mlp_recompute_equals_stash(void **state) {
    (void)state;
    run_result r = RUN("pp", "--generator", PPV_TP_MLP, "--chunks", "5", "--kv-window", "30",
                       "--compare-kv");
    if (r.code != 0) fprintf(stderr, "%s%s", r.out, r.err);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "kv caches: bitwise equal"));
    assert_non_null(strstr(r.out, "outputs: bitwise equal"));
    assert_non_null(strstr(r.out, "generator tp-mlp 1 declares its cache frame-local, so all 5 "
                                  "chunks must be bitwise equal, evicted or not"));
    run_free(&r);
    /* snapshots that differ in size from rank to rank are refused, not
     * written past the chunk's buffer */
    r = RUN("pp", "--generator", PPV_MISBEHAVE_SNAPSHOT, "--chunks", "3", "--compare-kv");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "generator misbehave 1 failed in kv_snapshot on mesh rank 0: its "
                                  "snapshot holds 1 values, another mesh rank's 2"));
    run_free(&r);
    /* a plug-in without kv_snapshot: its outputs alone */
    r = RUN("pp", "--generator", PPV_MISBEHAVE, "--chunks", "3", "--compare-kv");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "kv caches: not compared (generator misbehave 1 keeps no "
                                  "snapshot)\noutputs: bitwise equal"));
    run_free(&r);
}

/* A recording names its generator: it replays with that generator on any
 * mesh, and another generator is refused naming both. */
static void test_a_plugin_recording_replays_only_with_its_generator(void **state) {
    (void)state;
    const char *rec = tmp_path("tp.h5");
    run_result r = RUN("pp", "--generator", PPV_TP_MLP, "--generator-params", "hidden=32",
                       "--chunks", "4", "--record", rec);
    assert_int_equal(r.code, 0);
    run_free(&r);
    r = RUN("replay", rec, "--generator", PPV_TP_MLP, "--mesh", "4");
    if (r.code != 0) fprintf(stderr, "%s%s", r.out, r.err);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "replayed 5 recorded calls on a mesh of 4"));
    run_free(&r);
    r = RUN("replay", rec);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "was recorded with generator tp-mlp 1; this replay runs ppv-dit "
                                  "1 (the built-in)"));
    run_free(&r);
    r = RUN("replay", rec, "--generator", PPV_MISBEHAVE);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "recorded with generator tp-mlp 1; this replay runs misbehave 1"));
    run_free(&r);
    /* the built-in's recording refuses the plug-in the same way */
    const char *own = tmp_path("own.h5");
    r = RUN("pp", "--chunks", "2", "--record", own);
    assert_int_equal(r.code, 0);
    run_free(&r);
    r = RUN("replay", own, "--generator", PPV_TP_MLP);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "recorded with generator ppv-dit 1; this replay runs tp-mlp 1"));
    run_free(&r);
}

/* Every fault of the break-it matrix is caught as with the built-in. */
static void test_every_injection_is_caught_with_a_plugin(void **state) {
    (void)state;
    for (int i = 1; i < PPV_INJECT_COUNT; i++) {
        const char *tok = ppv_pp_inject_token((ppv_pp_inject)i);
        run_result r = RUN("pp", "--generator", PPV_TP_MLP, "--inject", tok, "--hard-cut-at", "2",
                           "--chunks", "4");
        if (r.code != 0) fprintf(stderr, "%s: %s%s", tok, r.out, r.err);
        assert_int_equal(r.code, 0);
        assert_non_null(strstr(r.out, "): it did\n"));
        assert_non_null(strstr(r.out, ppv_pp_inject_mode((ppv_pp_inject)i) ? "result: CAUGHT"
                                                                              : "result: OK"));
        run_free(&r);
    }
}

static void test_fuzz_pp_explores_a_plugin(void **state) {
    (void)state;
    run_result r = RUN("fuzz", "pp", "--generator", PPV_TP_MLP, "--runs", "40", "--mesh", "2",
                       "--chunks", "3");
    if (r.code != 0) fprintf(stderr, "%s%s", r.out, r.err);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "runs: 40 in "));
    run_free(&r);
}

/* A run with the misbehaving plug-in: exit 1 and the failure line. */
static char *misbehave(const char *params, const char *mesh) {
    run_result r = RUN("pp", "--generator", PPV_MISBEHAVE, "--generator-params", params, "--mesh",
                       mesh, "--chunks", "3");
    assert_int_equal(r.code, 1);
    char line[1024];
    char *f = strdup(field(r.out, "failure: ", line, sizeof line));
    run_free(&r);
    return f;
}

/* A plug-in's error ends the run naming the plug-in, the function and the
 * rank; its bad collectives are caught as ppv's own are, never a hang. */
static void test_plugin_failures_name_the_plugin_the_call_and_the_rank(void **state) {
    (void)state;
    static const struct {
        const char *params, *want;
    } cases[] = {
        {"fail=create", "PPV-GENERATOR caught by mesh-running on rank 2: PPV-GENERATOR (rank 2, "
                        "group mesh, before the first envelope): generator misbehave 1 failed in "
                        "create on mesh rank 1: asked to fail in create"},
        {"fail=call", "generator misbehave 1 failed in call on mesh rank 1: asked to fail at call "
                      "2 (call_id 0)"},
        {"fail=kv_reset", "generator misbehave 1 failed in kv_reset on mesh rank 1: asked to fail "
                          "in kv_reset"},
        {"fail=destroy", "generator misbehave 1 failed in destroy on mesh rank 1: asked to fail in "
                         "destroy"},
        {"world=1", "FM-22 caught by group-check on rank 2: FM-22 (rank 2, group world, call_id 0, "
                    "chunk_index 0, cache_epoch 0): the generator's all-reduce called on group world"},
        {"bigger=1", "PPV-COLLECTIVE"},
        /* found at the next envelope's broadcast: named by the last envelope seen */
        {"extra=1", "PPV-COLLECTIVE (rank 1, group mesh, after call_id 1, chunk_index 1, "
                    "cache_epoch 0): the envelope broadcast: the ranks disagree"},
        {"skip=1", "PPV-COLLECTIVE"},
        {"badroot=1", "generator misbehave 1 broadcast from mesh rank 2, but the mesh has 2 ranks"},
        {"nostate=1", "generator misbehave 1 failed in create on mesh rank 1: it returned no "
                      "state"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char *f = misbehave(cases[k].params, "2");
        if (!strstr(f, cases[k].want)) fail_msg("%s: '%s' lacks '%s'", cases[k].params, f,
                                                cases[k].want);
        free(f);
    }
    /* a collective mismatch names the mesh ranks, each one's call, what
     * differs and, when the others agreed first, the odd rank */
    run_result r = RUN("pp", "--generator", PPV_MISBEHAVE, "--generator-params", "bigger=1",
                       "--mesh", "3", "--chunks", "3");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "the generator's all-reduce: the ranks disagree on collective #7 "
                                  "of group mesh: mesh rank 2 calls all-reduce 'tp all-reduce', 8 "
                                  "bytes, mesh rank 0 all-reduce 'tp all-reduce', 4 bytes; the "
                                  "size differs (2 members had already made mesh rank 0's call, so "
                                  "mesh rank 2 is the odd one): under NCCL this is a hang"));
    run_free(&r);
    r = RUN("pp", "--generator", PPV_MISBEHAVE, "--generator-params", "bigger=1,rank=1", "--mesh",
            "3", "--chunks", "3");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "mesh rank 1 calls all-reduce 'tp all-reduce', 8 bytes, mesh "
                                  "rank 0 all-reduce 'tp all-reduce', 4 bytes; the size differs "
                                  "(no third member had arrived to tell which of the two is the "
                                  "odd one)"));
    run_free(&r);
    /* on PP0 (a mesh of 1) the call's failure is the leader's */
    char *f = misbehave("fail=call,rank=0", "1");
    assert_non_null(strstr(f, "failed in call on mesh rank 0"));
    free(f);
}

/* A plug-in that ends the process, crashes or never returns fails the run
 * (exit 1) naming itself, the function, the mesh rank and the envelope:
 * the gate can never pass on a run that did not finish. */
static void test_a_plugin_that_ends_the_process_fails_the_run_naming_itself(void **state) {
    (void)state;
    /* the guard ends ppv mid-run on purpose, with its memory in use, which
     * valgrind's leak check (on ppv's children here) calls lost: the
     * native, clang and ASan runs test it */
    if (RUNNING_ON_VALGRIND) skip();
    static const char *const site = " in call on mesh rank 1 (call_id 0, chunk_index 0, "
                                    "cache_epoch 0): ";
    static const struct {
        const char *die, *what, *why;
    } cases[] = {
        {"exit", "called exit(0)", "a plug-in may not end ppv's process, so the run did not finish"},
        {"_exit", "called _exit(0)", "a plug-in may not end ppv's process"},
        {"segv", "died of SIGSEGV (an invalid memory access)", "the run did not finish"},
        {"abort", "died of SIGABRT (abort)", "the run did not finish"},
        {"loop", "hung", "it has not returned after "},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        char params[64], want[512];
        snprintf(params, sizeof params, "die=%s", cases[k].die);
        snprintf(want, sizeof want,
                 "failure: PPV-GENERATOR caught by the plug-in guard: generator misbehave 1 %s%s%s",
                 cases[k].what, site, cases[k].why);
        run_result r = RUN("pp", "--generator", PPV_MISBEHAVE, "--generator-params", params,
                           "--chunks", "3", "--call-timeout", "1");
        assert_int_equal(r.code, 1);
        if (!strstr(r.out, want)) fail_msg("%s: '%s' lacks '%s'", params, r.out, want);
        assert_non_null(strstr(r.out, "result: PROBLEM (the run did not finish)\n"));
        assert_null(strstr(r.out, "output digest"));
        snprintf(want, sizeof want, "ppv pp: PPV-GENERATOR: generator misbehave 1 %s%s",
                 cases[k].what, site);
        if (!strstr(r.err, want)) fail_msg("%s: '%s' lacks '%s'", params, r.err, want);
        if (!strcmp(cases[k].die, "loop"))
            assert_non_null(strstr(r.out, " s of its own code (--call-timeout 1), so the run did "
                                          "not finish"));
        run_free(&r);
    }
    /* --json: one object that says so */
    run_result r = RUN("pp", "--generator", PPV_MISBEHAVE, "--generator-params", "die=exit,rank=0",
                       "--chunks", "3", "--json");
    assert_int_equal(r.code, 1);
    json_object *o = json_tokener_parse(r.out), *v;
    assert_non_null(o);
    assert_true(json_object_object_get_ex(o, "ok", &v));
    assert_false(json_object_get_boolean(v));
    assert_true(json_object_object_get_ex(o, "failure_mode", &v));
    assert_string_equal(json_object_get_string(v), "PPV-GENERATOR");
    assert_true(json_object_object_get_ex(o, "function", &v));
    assert_string_equal(json_object_get_string(v), "call");
    assert_true(json_object_object_get_ex(o, "mesh_rank", &v));
    assert_int_equal(json_object_get_int(v), 0);
    assert_true(json_object_object_get_ex(o, "call_id", &v));
    assert_int_equal(json_object_get_int(v), 0);
    json_object_put(o);
    run_free(&r);
    /* the explorer's runs are guarded as pp's are */
    r = RUN("fuzz", "pp", "--generator", PPV_MISBEHAVE, "--generator-params", "die=_exit",
            "--chunks", "2", "--runs", "3");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "ppv fuzz: PPV-GENERATOR: generator misbehave 1 called _exit(0) "
                                  "in call on mesh rank 1 (call_id 0"));
    run_free(&r);
    /* and so is replay: recorded where mesh rank 5 does not exist, replayed
     * on a mesh where it does */
    const char *rec = tmp_path("dies.h5");
    r = RUN("pp", "--generator", PPV_MISBEHAVE, "--generator-params", "die=exit,rank=5",
            "--chunks", "3", "--record", rec);
    assert_int_equal(r.code, 0);
    run_free(&r);
    r = RUN("replay", rec, "--generator", PPV_MISBEHAVE, "--mesh", "6");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "ppv replay: PPV-GENERATOR: generator misbehave 1 called exit(0) "
                                  "in call on mesh rank 5 (call_id 0"));
    run_free(&r);
    /* the bound is an option like any other */
    r = RUN("pp", "--call-timeout", "-1");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--call-timeout needs seconds from 0 to 1e+06, not '-1'"));
    run_free(&r);
}

/* The member key of the JSON object in text, as a string ("" when null). */
static char *json_member(const char *text, const char *key) {
    json_object *o = json_tokener_parse(text), *v = NULL;
    assert_non_null(o);
    assert_true(json_object_object_get_ex(o, key, &v));
    char *s = strdup(v ? json_object_get_string(v) : "");
    json_object_put(o);
    return s;
}

/* The report names the generator, its version and its settings; a run
 * that failed prints no output digest; a replay the generator refuses
 * says that nothing was replayed. */
static void test_reports_name_the_generator_and_a_failed_run_has_no_digest(void **state) {
    (void)state;
    run_result r = RUN("pp", "--generator", PPV_TP_MLP, "--generator-params", "hidden=32,seed=9",
                       "--chunks", "2");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "\ngenerator: tp-mlp 1, settings 'hidden=32,seed=9'\n"));
    run_free(&r);
    r = RUN("pp", "--chunks", "2", "--json");
    assert_int_equal(r.code, 0);
    char *v = json_member(r.out, "generator");
    assert_string_equal(v, "ppv-dit");
    free(v);
    v = json_member(r.out, "generator_params");
    assert_string_equal(v, "layers=2,d_model=32,n_heads=4,d_ff=64,seed=1");
    free(v);
    run_free(&r);
    r = RUN("pp", "--generator", PPV_MISBEHAVE, "--generator-params", "fail=call", "--chunks", "3");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "failure: PPV-GENERATOR"));
    assert_null(strstr(r.out, "output digest"));
    run_free(&r);
    r = RUN("pp", "--generator", PPV_MISBEHAVE, "--generator-params", "fail=call", "--chunks", "3",
            "--json");
    assert_int_equal(r.code, 1);
    v = json_member(r.out, "output_digest");
    assert_string_equal(v, "");
    free(v);
    v = json_member(r.out, "generator_version");
    assert_string_equal(v, "1");
    free(v);
    run_free(&r);
    const char *rec = tmp_path("tp_refused.h5");
    r = RUN("pp", "--generator", PPV_TP_MLP, "--chunks", "3", "--record", rec);
    assert_int_equal(r.code, 0);
    run_free(&r);
    r = RUN("replay", rec, "--generator", PPV_TP_MLP, "--mesh", "3");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, ": nothing was replayed: the re-run on a mesh of 3 failed before "
                                  "its first result (the file holds 4 recorded calls; it was "
                                  "recorded on 2)\ngenerator: tp-mlp 1, settings ''\n"));
    assert_null(strstr(r.out, "values compared"));
    assert_null(strstr(r.out, "first differing call"));
    run_free(&r);
    r = RUN("replay", rec, "--generator", PPV_TP_MLP, "--mesh", "3", "--json");
    assert_int_equal(r.code, 1);
    v = json_member(r.out, "replayed");
    assert_string_equal(v, "false");
    free(v);
    run_free(&r);
}

/* --repeat runs the configuration again in fresh generator state and
 * names the first call whose output differs; the explorer says a target
 * that differs in the reference's own order is not deterministic, rather
 * than blaming the interleaving. */
static void test_a_generator_that_is_not_deterministic_is_named(void **state) {
    (void)state;
    run_result r = RUN("pp", "--generator", PPV_TP_MLP, "--chunks", "3", "--repeat", "3");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "\nrepeat: 3 runs in fresh generator state, every result's "
                                  "output digest the same\nresult: OK\n"));
    run_free(&r);
    r = RUN("pp", "--generator", PPV_MISBEHAVE, "--generator-params", "drift=1", "--chunks", "3",
            "--repeat", "3");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "\nrepeat: the generator is not deterministic: run 2 of 3 gave "
                                  "call_id 0 (chunk_index 0, cache_epoch 0) output digest "));
    assert_non_null(strstr(r.out, "\nresult: PROBLEM\n"));
    run_free(&r);
    r = RUN("pp", "--generator", PPV_MISBEHAVE, "--generator-params", "drift=1", "--chunks", "3",
            "--repeat", "2", "--json");
    assert_int_equal(r.code, 1);
    json_object *o = json_tokener_parse(r.out), *rp, *v;
    assert_non_null(o);
    assert_true(json_object_object_get_ex(o, "repeat", &rp));
    assert_true(json_object_object_get_ex(rp, "deterministic", &v));
    assert_false(json_object_get_boolean(v));
    assert_true(json_object_object_get_ex(rp, "first_differing_run", &v));
    assert_int_equal(json_object_get_int(v), 2);
    assert_true(json_object_object_get_ex(rp, "first_differing_call_id", &v));
    assert_int_equal(json_object_get_int(v), 0);
    json_object_put(o);
    run_free(&r);
    /* without --repeat each run alone passes: the gate needs it */
    r = RUN("pp", "--generator", PPV_MISBEHAVE, "--generator-params", "drift=1", "--chunks", "3");
    assert_int_equal(r.code, 0);
    run_free(&r);
    r = RUN("pp", "--repeat", "2", "--compare-kv");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--repeat compares runs of a generator on the mock; it takes "
                                  "no --compare-kv"));
    run_free(&r);
    r = RUN("pp", "--repeat", "0");
    assert_int_equal(r.code, 2);
    run_free(&r);
    /* the explorer: different in the reference's own order (run 0), and
     * different only from a later run on (minimised to round-robin) */
    static const char *const changed = "the target, not the interleaving, differs from run to run "
                                       "(it is not deterministic: a clock, rand(), state kept from "
                                       "run to run)";
    r = RUN("fuzz", "pp", "--generator", PPV_MISBEHAVE, "--generator-params", "drift=1",
            "--chunks", "2", "--runs", "5");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "failure at run 0 (round-robin"));
    assert_non_null(strstr(r.out, changed));
    assert_null(strstr(r.out, "depends on the interleaving"));
    run_free(&r);
    r = RUN("fuzz", "pp", "--generator", PPV_MISBEHAVE, "--generator-params", "drift=12",
            "--chunks", "2", "--runs", "20");
    assert_int_equal(r.code, 1);
    assert_null(strstr(r.out, "failure at run 0 "));
    assert_non_null(strstr(r.out, "\nminimal: round-robin but at 0 steps"));
    assert_non_null(strstr(r.out, "the reference's own order fails now, with no decision forced: "));
    assert_non_null(strstr(r.out, changed));
    run_free(&r);
}

/* --compare-kv says what it can prove: caches of other sizes always fail;
 * chunks whose epoch evicted nothing must be equal; after eviction only a
 * generator that declares its cache frame-local must still be equal. */
static void test_compare_kv_says_what_it_can_prove(void **state) {
    (void)state;
    static const struct {
        const char *plugin, *params;
        int code;
        const char *want;
    } cases[] = {
        {PPV_MISBEHAVE_CACHE, "forget=1", 1,
         "kv caches: differ in size: chunk 1: stash holds 6 values, recompute 4\n"},
        {PPV_MISBEHAVE_CACHE, "forget=1", 1,
         "result: PROBLEM (the caches differ in size (chunk 1: stash holds 6 values, recompute "
         "4): eviction never changes a cache's size, so the rebuild leaves frames out or adds "
         "some)\n"},
        {PPV_MISBEHAVE_CACHE, "skew=1", 1,
         "result: PROBLEM (recompute and stash differ at chunk 1, mesh rank 0, value 0 of its "
         "snapshot, before the window evicted anything in that epoch)\n"},
        {PPV_MISBEHAVE_CACHE, "mix=1", 0,
         "the window evicted frames from chunk 3 on: the 3 chunks before any eviction in their "
         "epoch must be bitwise equal; the others may legitimately differ (the generator does "
         "not declare its cache frame-local)\nresult: OK\n"},
        {PPV_MISBEHAVE_LOCAL, "mix=1", 1,
         "result: PROBLEM (recompute and stash differ at chunk 3, mesh rank 0, value 0 of its "
         "snapshot, and the generator declares its cache frame-local)\n"},
        {PPV_MISBEHAVE_LOCAL, "", 0,
         "generator misbehave 1 declares its cache frame-local, so all 8 chunks must be bitwise "
         "equal, evicted or not\nresult: OK\n"},
        {PPV_TP_MLP, "", 0, "kv caches: bitwise equal\noutputs: bitwise equal\ngenerator tp-mlp 1 "
                            "declares its cache frame-local"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        run_result r = RUN("pp", "--generator", cases[k].plugin, "--generator-params",
                           cases[k].params, "--compare-kv", "--chunks", "8");
        if (r.code != cases[k].code || !strstr(r.out, cases[k].want))
            fail_msg("%s %s: exit %d, '%s' lacks '%s'", cases[k].plugin, cases[k].params, r.code,
                     r.out, cases[k].want);
        run_free(&r);
    }
    /* the built-in differs after eviction, and says by how much, relative too */
    run_result r = RUN("pp", "--compare-kv", "--chunks", "8");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "kv caches: differ: max "));
    assert_non_null(strstr(r.out, ", max rel "));
    assert_non_null(strstr(r.out, ", first at chunk 3, layer "));
    run_free(&r);
    r = RUN("pp", "--generator", PPV_MISBEHAVE_CACHE, "--generator-params", "forget=1",
            "--compare-kv", "--chunks", "8", "--json");
    assert_int_equal(r.code, 1);
    char *v = json_member(r.out, "kv_sizes_differ");
    assert_string_equal(v, "true");
    free(v);
    v = json_member(r.out, "ok");
    assert_string_equal(v, "false");
    free(v);
    run_free(&r);
}

/* close is owed after every open that succeeded, also one that shared
 * nothing, and a close that fails is named as an open that fails is. */
static void test_close_follows_every_open_and_its_failure_is_named(void **state) {
    (void)state;
    run_result r = RUN("pp", "--generator", PPV_MISBEHAVE_BADCLOSE, "--chunks", "2");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "ppv pp: generator misbehave 1 failed in close: asked to fail in "
                                  "close"));
    run_free(&r);
}

/* Loading: a file that is not a plug-in, one without the entry, one built
 * against another interface version: refused before anything runs. */
static void test_a_plugin_that_cannot_be_used_is_refused_at_load(void **state) {
    (void)state;
    run_result r = RUN("pp", "--generator", PPV_MISBEHAVE_NEWER);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "was built against version 4 of the generator interface; this "
                                  "ppv takes versions 2 to 3"));
    assert_string_equal(r.out, "");
    run_free(&r);
    /* an older interface is refused as a newer one is */
    r = RUN("pp", "--generator", PPV_MISBEHAVE_OLDER);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "was built against version 1 of the generator interface; this "
                                  "ppv takes versions 2 to 3"));
    run_free(&r);
    const char *text = tmp_path("not_a_plugin.so");
    FILE *fp = fopen(text, "w");
    assert_non_null(fp);
    fputs("not an ELF file\n", fp);
    fclose(fp);
    r = RUN("pp", "--generator", text);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--generator: cannot load the generator: "));
    run_free(&r);
    r = RUN("replay", data_path("../../golden/infer_pp1_stash_cut.h5"), "--generator",
            PPV_MISBEHAVE_NEWER);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "was built against version 4"));
    run_free(&r);
    /* a table of version 2 still loads and runs: ppv never reads the memory
     * function it does not have */
    r = RUN("pp", "--generator", PPV_MISBEHAVE_ABI2, "--chunks", "2", "--steps", "1", "--mesh",
            "1");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "\nresult: OK\n"));
    run_free(&r);
    r = RUN("pp", "--generator", PPV_MISBEHAVE_NONAME);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "its table has no name or no version"));
    run_free(&r);
    r = RUN("pp", "--generator", PPV_MISBEHAVE_HALFOPEN);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "generator misbehave 1 has open without close"));
    run_free(&r);
    r = RUN("replay", data_path("../../golden/train_1f1b_p4_m8.h5"), "--generator", "builtin");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--generator is for inference recordings"));
    run_free(&r);
    r = RUN("pp", "--control-only", "--generator", PPV_TP_MLP);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--control-only runs no model, so it takes no --generator"));
    run_free(&r);
}


/* ---- Python generators (the bridge, libppv_pygen.so) ---------------------------------- */

/* Skips where this ppv was built without the bridge (unless the setup
 * requires it), and under valgrind, which would check the interpreter and
 * numpy rather than ppv (the sanitizer build runs them: its suppressions
 * leave out what the never-finalized interpreter holds at exit). */
static int no_python(void) {
#ifdef PPV_HAVE_PYGEN
    return RUNNING_ON_VALGRIND;
#else
    if (getenv("PPV_REQUIRE_PYGEN")) fail_msg("PPV_REQUIRE_PYGEN: this ppv has no Python bridge");
    return 1;
#endif
}

/* The memory lines of a ppv pp output, from rank 0's to the link's. */
static char *memory_lines(const char *out) {
    const char *a = strstr(out, "\nmemory, rank 0");
    assert_non_null(a);
    const char *b = strstr(a, "\nmemory, link 0-1");
    assert_non_null(b);
    size_t n = (size_t)(b - a);
    char *t = malloc(n + 1);
    assert_non_null(t);
    memcpy(t, a, n);
    t[n] = 0;
    return t;
}

/* A Python generator of ABI 3 reports its bytes through memory(setup,
 * shape): a run counts them and --plan predicts the same, row for row;
 * what it returns wrong is the generator's failure. */
static void test_python_memory_is_measured_and_planned(void **state) {
    (void)state;
    if (no_python()) skip();
    run_result r = RUN("pp", "--generator", PPV_TP_MLP_PY, "--kv", "recompute", "--hard-cut-at",
                       "3");
    assert_int_equal(r.code, 0);
    run_result p = RUN("pp", "--generator", PPV_TP_MLP_PY, "--kv", "recompute", "--hard-cut-at",
                       "3", "--plan");
    assert_int_equal(p.code, 0);
    char *a = memory_lines(r.out), *b = memory_lines(p.out);
    assert_string_equal(a, b);
    /* tp-mlp's defaults: 64 hidden units in 4 blocks, C = 16; a step's
     * partial sums over the chunk's 3 frames of 4 x 4 latent pixels */
    int64_t weights = (2 * 64 * 16 + 2 * 64) * 4, cache = 6 * 16 * 4, work = 4 * 3 * 16 * 16 * 4;
    char want[160];
    snprintf(want, sizeof want, "weights %lld, kv_cache %lld, working %lld\n", (long long)weights,
             (long long)cache, (long long)work);
    assert_non_null(strstr(r.out, want));
    free(a);
    free(b);
    run_free(&r);
    run_free(&p);
    /* the same module returning a key ppv does not count */
    char *src = slurp(PPV_TP_MLP_PY);
    assert_non_null(src);
    size_t n = strlen(src);
    static const char bad[] = "\n\ndef memory(setup, shape):\n    return {\"gpu\": 1}\n";
    char *text = malloc(n + sizeof bad);
    assert_non_null(text);
    memcpy(text, src, n);
    memcpy(text + n, bad, sizeof bad);
    const char *path = tmp_path("tp_mlp_badmem.py");
    write_text(path, text);
    r = RUN("pp", "--generator", path, "--plan");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "failed in memory: memory returned the key gpu: only weights, "
                                  "kv_cache, buffers and working are bytes ppv counts"));
    run_free(&r);
    free(text);
    free(src);
}

/* The Python twin of tp_mlp.c gives its bits and its trace, on every mesh,
 * and the recordings of the two replay with each other. */
static void test_python_twin_gives_the_c_plugins_bits(void **state) {
    (void)state;
    if (no_python()) skip();
    run_result c = RUN("pp", "--generator", PPV_TP_MLP, "--chunks", "4");
    assert_int_equal(c.code, 0);
    char dc[64], tc[64], dp[64], tp[64];
    field(c.out, "output digest: ", dc, sizeof dc);
    field(c.out, "scheduler steps: ", tc, sizeof tc);
    run_free(&c);
    const char *mesh[2] = {"2", "4"};
    for (int k = 0; k < 2; k++) {
        run_result p = RUN("pp", "--generator", PPV_TP_MLP_PY, "--chunks", "4", "--mesh", mesh[k]);
        if (p.code != 0) fprintf(stderr, "%s%s", p.out, p.err);
        assert_int_equal(p.code, 0);
        assert_string_equal(field(p.out, "output digest: ", dp, sizeof dp), dc);
        if (k == 0) assert_string_equal(field(p.out, "scheduler steps: ", tp, sizeof tp), tc);
        run_free(&p);
    }
    const char *rec = tmp_path("py.h5");
    run_result r = RUN("pp", "--generator", PPV_TP_MLP_PY, "--chunks", "3", "--record", rec);
    assert_int_equal(r.code, 0);
    run_free(&r);
    r = RUN("replay", rec, "--generator", PPV_TP_MLP, "--mesh", "1");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "result: OK"));
    run_free(&r);
    r = RUN("pp", "--generator", PPV_TP_MLP_PY, "--chunks", "3", "--compare-kv");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "kv caches: bitwise equal"));
    run_free(&r);
    r = RUN("fuzz", "pp", "--generator", PPV_TP_MLP_PY, "--runs", "6", "--chunks", "2");
    assert_int_equal(r.code, 0);
    run_free(&r);
    for (int i = 1; i < PPV_INJECT_COUNT; i++) {
        const char *tok = ppv_pp_inject_token((ppv_pp_inject)i);
        r = RUN("pp", "--generator", PPV_TP_MLP_PY, "--inject", tok, "--hard-cut-at", "2",
                "--chunks", "3");
        if (r.code != 0) fprintf(stderr, "%s: %s%s", tok, r.out, r.err);
        assert_int_equal(r.code, 0);
        assert_non_null(strstr(r.out, "): it did\n"));
        run_free(&r);
    }
}

/* A Python exception ends the run naming the plug-in, the function, the
 * rank and the exception with its line; SystemExit does not end ppv; an
 * array kept past the call is refused. */
static void test_python_exceptions_are_failures_that_name_the_call(void **state) {
    (void)state;
    if (no_python()) skip();
    static const struct {
        const char *params, *want;
    } cases[] = {
        {"raise=create", "generator raises 1 failed in create on mesh rank 1: ValueError: asked "
                         "to raise in create ("},
        {"raise=call", "generator raises 1 failed in call on mesh rank 1: ValueError: asked to "
                       "raise in call 0 ("},
        {"raise=kv_reset", "failed in kv_reset on mesh rank 1: ValueError: asked to raise in "
                           "kv_reset"},
        {"exit=1", "failed in call on mesh rank 1: SystemExit: 3"},
        {"keep=1", "call kept a reference to latents, cond or out"},
        {"none=1", "generator raises 1 failed in create on mesh rank 1: create returned None"},
        /* the plug-in guard: Python's own ways out of the process */
        {"os_exit=1", "PPV-GENERATOR caught by the plug-in guard: generator raises 1 called "
                      "_exit(0) in call on mesh rank 1 (call_id 0, chunk_index 0, cache_epoch 0)"},
        {"abort=1", "PPV-GENERATOR caught by the plug-in guard: generator raises 1 died of SIGABRT "
                    "(abort) in call on mesh rank 1 (call_id 0"},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        run_result r = RUN("pp", "--generator", PPV_RAISES_PY, "--generator-params",
                           cases[k].params, "--chunks", "3");
        assert_int_equal(r.code, 1);
        if (!strstr(r.out, cases[k].want))
            fail_msg("%s: '%s' lacks '%s'", cases[k].params, r.out, cases[k].want);
        assert_non_null(strstr(r.out, "failure: PPV-GENERATOR"));
        run_free(&r);
    }
    run_result r = RUN("pp", "--generator", tmp_path("missing.py"));
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "cannot load the Python generator"));
    run_free(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_builtin_with_8_heads_runs_a_mesh_of_8_with_mesh_1s_bits),
        cmocka_unit_test(test_frame_sizes_the_latents),
        cmocka_unit_test(test_tp_mlp_gives_the_same_bits_on_meshes_1_2_and_4),
        cmocka_unit_test(test_tp_mlp_recompute_equals_stash),
        cmocka_unit_test(test_a_plugin_recording_replays_only_with_its_generator),
        cmocka_unit_test(test_every_injection_is_caught_with_a_plugin),
        cmocka_unit_test(test_fuzz_pp_explores_a_plugin),
        cmocka_unit_test(test_plugin_failures_name_the_plugin_the_call_and_the_rank),
        cmocka_unit_test(test_a_plugin_that_cannot_be_used_is_refused_at_load),
        cmocka_unit_test(test_a_plugin_that_ends_the_process_fails_the_run_naming_itself),
        cmocka_unit_test(test_close_follows_every_open_and_its_failure_is_named),
        cmocka_unit_test(test_a_generator_that_is_not_deterministic_is_named),
        cmocka_unit_test(test_compare_kv_says_what_it_can_prove),
        cmocka_unit_test(test_reports_name_the_generator_and_a_failed_run_has_no_digest),
        cmocka_unit_test(test_python_twin_gives_the_c_plugins_bits),
        cmocka_unit_test(test_python_memory_is_measured_and_planned),
        cmocka_unit_test(test_python_exceptions_are_failures_that_name_the_call),
    };
    return cmocka_run_group_tests(tests, NULL, tmp_cleanup);
}
