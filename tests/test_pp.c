/* test_pp.c - the PP inference pipeline (ppv pp): results that do not
 * depend on queue depths, interleavings or the mesh size; KV recompute
 * against stash; the break-it matrix under every policy and many seeds;
 * and each tripwire point shown to be the one that catches its fault. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ppv_engine.h"
#include "ppv_golden.h"
#include "testutil.h"

/* Seeds per policy: the full sweeps natively, a sample in the checked
 * builds (testutil.h's sweep: a tenth under the sanitizers, fewer under
 * valgrind). */
static int seeds(int native, int valgrind) {
    int64_t tenth = native / 10 > valgrind ? native / 10 : valgrind;
    return (int)sweep(native, tenth, valgrind);
}

/* The default pipeline's output digest: 8 chunks of 4 steps, stash, on any
 * mesh. Pinned so that a change to the generator or the plan shows. */
#define DEFAULT_DIGEST 0xe9561cfe466e3006ULL

static ppv_pp_options small(void) {
    ppv_pp_options o = ppv_pp_defaults();
    o.chunks = 4;
    o.steps = 2;
    return o;
}

static ppv_pp_report *run(const ppv_pp_options *o) {
    ppv_pp_report *r = NULL;
    char err[512];
    if (ppv_pp_run(o, &r, err, sizeof err) != 0) fail_msg("ppv_pp_run: %s", err);
    return r;
}

static uint64_t digest_of(const ppv_pp_options *o) {
    ppv_pp_report *r = run(o);
    if (!r->ok) fail_msg("the run failed: %s", r->message);
    uint64_t d = r->output_digest;
    ppv_pp_report_free(r);
    return d;
}

static void test_default_run_emits_every_chunk_with_the_planned_calls(void **state) {
    (void)state;
    ppv_pp_options o = ppv_pp_defaults();
    ppv_pp_report *r = run(&o);
    assert_true(r->ok);
    assert_int_equal(r->failure, PPV_FAIL_NONE);
    assert_int_equal(r->caught_by, PPV_POINT_NONE);
    assert_int_equal(r->chunks_emitted, 8);
    for (int k = 0; k < 8; k++) {
        assert_int_equal(r->expected_calls[k], 4);
        assert_int_equal(r->observed_calls[k], 4);
        assert_int_equal(r->emitted_call_ids[k], k);
    }
    assert_int_equal(r->dropped_stale, 0);
    assert_int_equal(r->dropped_duplicate, 0);
    assert_int_equal(r->generator_calls, 32);
    assert_null(r->outputs); /* kept only for --compare-kv */
    assert_int_equal(r->noutputs, 0);
    assert_true(r->output_digest == DEFAULT_DIGEST);
    ppv_pp_report_free(r);
}

static void test_output_does_not_depend_on_queues_policy_seed_or_mesh(void **state) {
    (void)state;
    ppv_pp_options base = small();
    base.mesh = 1;
    base.d_in = base.d_out = 1;
    uint64_t want = digest_of(&base);
    static const ppv_policy_kind kinds[] = {PPV_POLICY_RR, PPV_POLICY_RANDOM, PPV_POLICY_PCT};
    int n = seeds(12, 2), runs = 0;
    for (int32_t mesh = 1; mesh <= 4; mesh *= 2)
        for (int p = 0; p < 3; p++)
            for (int s = 0; s < (kinds[p] == PPV_POLICY_RR ? 1 : n); s++)
                for (int32_t din = 1; din <= 3; din++)
                    for (int32_t dout = 1; dout <= 2; dout++) {
                        ppv_pp_options o = small();
                        o.mesh = mesh;
                        o.d_in = din;
                        o.d_out = dout;
                        o.policy.kind = kinds[p];
                        o.policy.seed = (uint64_t)s;
                        ppv_pp_report *r = run(&o);
                        if (!r->ok || r->output_digest != want)
                            fail_msg("mesh %d policy %d seed %d D_in %d D_out %d: %s %016llx", mesh,
                                     p, s, din, dout, r->message,
                                     (unsigned long long)r->output_digest);
                        assert_true(r->max_inflight <= din && r->max_ready <= dout);
                        ppv_pp_report_free(r);
                        runs++;
                    }
    assert_int_equal(runs, 3 * (1 + 2 * n) * 6);
}

static void test_recompute_cuts_and_mesh_sizes_give_the_same_bits(void **state) {
    (void)state;
    uint64_t want = 0;
    for (int32_t mesh = 1; mesh <= 4; mesh *= 2) {
        ppv_pp_options o = ppv_pp_defaults();
        o.mesh = mesh;
        o.chunks = 9;
        o.kv_recompute = 1;
        o.recompute_every = 2;
        o.ncuts = 2;
        o.cuts[0] = 3;
        o.cuts[1] = 6;
        o.policy.kind = PPV_POLICY_RANDOM;
        o.policy.seed = 11;
        ppv_pp_report *r = run(&o);
        assert_true(r->ok);
        /* each epoch of 3 chunks: j = 0, 1 stash-only; j = 2 recomputes */
        static const int64_t calls[9] = {4, 4, 5, 4, 4, 5, 4, 4, 5};
        assert_int_equal(r->chunks_emitted, 9);
        assert_memory_equal(r->expected_calls, calls, sizeof calls);
        assert_memory_equal(r->observed_calls, calls, sizeof calls);
        if (mesh == 1) want = r->output_digest;
        assert_true(r->output_digest == want);
        ppv_pp_report_free(r);
    }
}

/* KV caches as each chunk's denoising starts, and outputs, of a stash run
 * and a recompute run of the same options. */
static void stash_and_recompute(int32_t window, int32_t chunks, ppv_pp_report **s,
                                ppv_pp_report **r) {
    ppv_pp_options o = small();
    o.chunks = chunks;
    o.kv_window = window;
    o.keep_kv = 1;
    *s = run(&o);
    o.kv_recompute = 1;
    *r = run(&o);
    assert_true((*s)->ok && (*r)->ok);
    assert_int_equal((*s)->nkv, chunks);
}

static void test_recompute_equals_stash_bit_for_bit_when_nothing_is_evicted(void **state) {
    (void)state;
    ppv_pp_report *s, *r;
    stash_and_recompute(30, 5, &s, &r);
    /* the recompute run really rebuilt the cache: one more call per chunk */
    for (int k = 1; k < 5; k++)
        assert_int_equal(r->observed_calls[k], s->observed_calls[k] + 1);
    for (int k = 0; k < 5; k++) {
        assert_int_equal(s->kv_floats[k], r->kv_floats[k]);
        /* chunk k starts with 3k frames: 2 layers, K and V, 4 tokens, C 32 */
        assert_int_equal(s->kv_floats[k], (size_t)k * 3 * 4 * 32 * 2 * 2);
        if (k) assert_memory_equal(s->kv[k], r->kv[k], s->kv_floats[k] * sizeof(float));
    }
    assert_int_equal(s->noutputs, r->noutputs);
    assert_memory_equal(s->outputs, r->outputs, s->noutputs * sizeof *s->outputs);
    ppv_pp_report_free(s);
    ppv_pp_report_free(r);
}

static void test_recompute_differs_from_stash_from_the_first_eviction_on(void **state) {
    (void)state;
    ppv_pp_report *s, *r;
    stash_and_recompute(3, 4, &s, &r);
    /* chunk 1 starts with 3 frames (the window): equal; chunk 2 with 6, of
     * which stash keeps K/V computed against the evicted frames */
    assert_memory_equal(s->kv[1], r->kv[1], s->kv_floats[1] * sizeof(float));
    assert_int_equal(s->kv_floats[2], r->kv_floats[2]);
    assert_true(memcmp(s->kv[2], r->kv[2], s->kv_floats[2] * sizeof(float)) != 0);
    size_t chunk = s->noutputs / 4;
    assert_memory_equal(s->outputs, r->outputs, 2 * chunk * sizeof *s->outputs);
    assert_true(memcmp(s->outputs + 2 * chunk, r->outputs + 2 * chunk,
                       chunk * sizeof *s->outputs) != 0);
    ppv_pp_report_free(s);
    ppv_pp_report_free(r);
}

static void test_stage0_sends_ahead_within_its_bounds(void **state) {
    (void)state;
    ppv_pp_options o = ppv_pp_defaults();
    o.d_in = 3;
    o.d_out = 1;
    ppv_pp_report *r = run(&o);
    assert_true(r->ok);
    assert_int_equal(r->max_inflight, 3);
    assert_int_equal(r->max_ready, 1);
    ppv_pp_report_free(r);
    /* R0a: an envelope that recomputes carries the last decoded frames, so
     * it waits for every earlier result: one in flight at a time */
    o.kv_recompute = 1;
    r = run(&o);
    assert_true(r->ok);
    assert_int_equal(r->max_inflight, 1);
    ppv_pp_report_free(r);
    o.d_in = 1;
    o.kv_recompute = 0;
    r = run(&o);
    assert_int_equal(r->max_inflight, 1);
    ppv_pp_report_free(r);
}

static void test_a_seed_replays_its_interleaving_and_seeds_differ(void **state) {
    (void)state;
    ppv_pp_options o = small();
    o.policy.kind = PPV_POLICY_RANDOM;
    o.policy.seed = 3;
    ppv_pp_report *a = run(&o), *b = run(&o);
    assert_true(a->world.trace_digest == b->world.trace_digest);
    assert_int_equal(a->world.steps, b->world.steps);
    uint64_t first = a->world.trace_digest;
    int distinct = 0;
    for (uint64_t s = 4; s < 10; s++) {
        ppv_pp_options q = o;
        q.policy.seed = s;
        ppv_pp_report *c = run(&q);
        distinct += c->world.trace_digest != first;
        ppv_pp_report_free(c);
    }
    assert_true(distinct >= 5);
    ppv_pp_report_free(a);
    ppv_pp_report_free(b);
}

/* The options an injection runs with: a mesh of 2, and a cut for OM-09. */
static ppv_pp_options inject_options(ppv_pp_inject i, int control_only) {
    ppv_pp_options o = small();
    o.inject = i;
    o.control_only = control_only;
    if (i == PPV_INJECT_OM09) {
        o.ncuts = 1;
        o.cuts[0] = 2;
    }
    return o;
}

/* One run of the matrix: the failure the table names, caught where it
 * says; a fault whose right outcome is not a failure completes with its
 * copy counted and the output of the run without it. */
static void expect_caught(ppv_pp_inject i, const ppv_pp_report *r, uint64_t clean_digest,
                          const char *how) {
    ppv_failure mode = ppv_pp_inject_mode(i);
    if (mode == PPV_FAIL_NONE) {
        if (!r->ok) fail_msg("%s %s: %s", ppv_pp_inject_token(i), how, r->message);
        assert_int_equal(r->dropped_stale, i == PPV_INJECT_OM09);
        assert_int_equal(r->dropped_duplicate, i == PPV_INJECT_DUPLICATE || i == PPV_INJECT_RETRY);
        assert_int_equal(r->retried, i == PPV_INJECT_RETRY);
        if (i != PPV_INJECT_REORDER_RESULTS) assert_int_equal(r->reordered, 0);
        assert_true(r->reordered <= 1); /* when the next envelope had come: the interleaving's */
        assert_int_equal(r->unknown_fields, i == PPV_INJECT_UNKNOWN_FIELD);
        assert_true(r->output_digest == clean_digest);
        return;
    }
    if (r->ok || r->failure != mode || r->caught_by != ppv_pp_inject_caught_by(i))
        fail_msg("%s %s: ok %d, %s caught by %s: %s", ppv_pp_inject_token(i), how, r->ok,
                 ppv_failure_id(r->failure), ppv_pp_point_name(r->caught_by), r->message);
}

static void matrix(int control_only, int nseeds) {
    static const ppv_policy_kind kinds[] = {PPV_POLICY_RR, PPV_POLICY_RANDOM, PPV_POLICY_PCT};
    int runs = 0;
    for (int i = 1; i < PPV_INJECT_COUNT; i++) {
        ppv_pp_options clean = inject_options((ppv_pp_inject)i, control_only);
        clean.inject = PPV_INJECT_NONE;
        uint64_t clean_digest = digest_of(&clean);
        for (int p = 0; p < 3; p++)
            for (int s = 0; s < nseeds; s++) {
                ppv_pp_options o = inject_options((ppv_pp_inject)i, control_only);
                o.policy.kind = kinds[p];
                o.policy.seed = (uint64_t)s;
                ppv_pp_report *r = run(&o);
                char how[64];
                snprintf(how, sizeof how, "policy %d seed %d", p, s);
                expect_caught((ppv_pp_inject)i, r, clean_digest, how);
                ppv_pp_report_free(r);
                runs++;
            }
    }
    assert_int_equal(runs, (PPV_INJECT_COUNT - 1) * 3 * nseeds);
}

static void test_break_it_matrix_on_the_control_plane_every_policy_1000_seeds(void **state) {
    (void)state;
    matrix(1, seeds(1000, 5));
}

static void test_break_it_matrix_with_the_model_every_policy(void **state) {
    (void)state;
    matrix(0, seeds(20, 2));
}

/* Runs injection i with some checks taken out (PPV_POINT_* bits). */
static ppv_pp_report *without(ppv_pp_inject i, unsigned points, int32_t mesh) {
    ppv_pp_options o = inject_options(i, 0);
    o.mesh = mesh;
    o.skip_points = points;
    return run(&o);
}

#define BIT(p) (1u << (p))

static void expect_failure(ppv_pp_report *r, ppv_failure mode, ppv_pp_point point,
                           const char *needle) {
    if (r->ok || r->failure != mode || r->caught_by != point)
        fail_msg("wanted %s at %s, got ok %d %s at %s: %s", ppv_failure_id(mode),
                 ppv_pp_point_name(point), r->ok, ppv_failure_id(r->failure),
                 ppv_pp_point_name(r->caught_by), r->message);
    if (needle && !strstr(r->message, needle)) fail_msg("'%s' not in: %s", needle, r->message);
    ppv_pp_report_free(r);
}

/* A hang NCCL would wait out: a collective mismatch or the watchdog. */
static void expect_hang(ppv_pp_report *r) {
    if (r->ok || (r->caught_by != PPV_POINT_TRANSPORT && r->caught_by != PPV_POINT_WATCHDOG))
        fail_msg("wanted a hang caught, got ok %d %s at %s: %s", r->ok, ppv_failure_id(r->failure),
                 ppv_pp_point_name(r->caught_by), r->message);
    ppv_pp_report_free(r);
}

/* Silent: the run completes, its output is not the clean run's. */
static void expect_silent_corruption(ppv_pp_report *r, ppv_pp_inject i) {
    ppv_pp_options clean = inject_options(i, 0);
    clean.inject = PPV_INJECT_NONE;
    assert_true(r->ok);
    assert_true(r->output_digest != digest_of(&clean));
    ppv_pp_report_free(r);
}

static void test_the_call_count_drift_moves_through_the_four_points(void **state) {
    (void)state;
    ppv_pp_inject i = PPV_INJECT_OM03; /* expected_generator_calls one short */
    expect_failure(without(i, 0, 2), PPV_FAIL_FM02, PPV_POINT_STAGE0_SEND, "nothing was sent");
    expect_failure(without(i, BIT(PPV_POINT_STAGE0_SEND), 2), PPV_FAIL_FM23, PPV_POINT_LEADER,
                   "FM-02");
    expect_failure(without(i, BIT(PPV_POINT_STAGE0_SEND) | BIT(PPV_POINT_LEADER), 2),
                   PPV_FAIL_FM02, PPV_POINT_MESH_RUNNING, "generator call 2 would pass");
    expect_failure(without(i,
                           BIT(PPV_POINT_STAGE0_SEND) | BIT(PPV_POINT_LEADER) |
                               BIT(PPV_POINT_MESH_RUNNING),
                           2),
                   PPV_FAIL_FM02, PPV_POINT_STAGE0_RESULT, "observed_generator_calls 2");
    /* with all four out, the drift goes through unseen */
    ppv_pp_report *r = without(i,
                               BIT(PPV_POINT_STAGE0_SEND) | BIT(PPV_POINT_LEADER) |
                                   BIT(PPV_POINT_MESH_RUNNING) | BIT(PPV_POINT_STAGE0_RESULT),
                               2);
    assert_true(r->ok);
    assert_int_equal(r->expected_calls[1], 1);
    assert_int_equal(r->observed_calls[1], 2);
    ppv_pp_report_free(r);
}

static void test_an_extra_generator_call_is_stopped_while_running(void **state) {
    (void)state;
    ppv_pp_inject i = PPV_INJECT_EXTRA_CALL;
    expect_failure(without(i, 0, 2), PPV_FAIL_FM02, PPV_POINT_MESH_RUNNING, "rank 2, group mesh");
    /* without point 3: on a mesh the extra call's collectives meet another
     * rank's different ones (a hang under NCCL) */
    expect_hang(without(i, BIT(PPV_POINT_MESH_RUNNING), 2));
    /* PP0 has no collectives: stage 0's check of the result catches it */
    expect_failure(without(i, BIT(PPV_POINT_MESH_RUNNING), 1), PPV_FAIL_FM02,
                   PPV_POINT_STAGE0_RESULT, "observed_generator_calls 3");
    expect_silent_corruption(
        without(i, BIT(PPV_POINT_MESH_RUNNING) | BIT(PPV_POINT_STAGE0_RESULT), 1), i);
}

static void test_stage0_preflight_faults_reach_the_leader_without_it(void **state) {
    (void)state;
    expect_failure(without(PPV_INJECT_OM01, BIT(PPV_POINT_STAGE0_SEND), 2), PPV_FAIL_FM23,
                   PPV_POINT_LEADER, "FM-04");
    expect_failure(without(PPV_INJECT_OM02, BIT(PPV_POINT_STAGE0_SEND), 2), PPV_FAIL_FM23,
                   PPV_POINT_LEADER, "FM-07");
    expect_failure(without(PPV_INJECT_OM10, BIT(PPV_POINT_STAGE0_SEND), 2), PPV_FAIL_FM23,
                   PPV_POINT_LEADER, "FM-06");
    /* the leader is the only check of the VACE bit: without it the envelope runs */
    ppv_pp_report *r = without(PPV_INJECT_OM07, BIT(PPV_POINT_LEADER), 2);
    assert_true(r->ok);
    ppv_pp_report_free(r);
}

static void test_the_other_checks_each_stand_between_a_fault_and_a_hang(void **state) {
    (void)state;
    /* the group check: a gather on the world waits for stage 0 forever */
    expect_hang(without(PPV_INJECT_OM08, BIT(PPV_POINT_GROUP), 2));
    /* the handshake: a rank with another plan runs an extra step, which
     * point 3 stops; a rank with a flag-gated collective hangs the mesh */
    expect_failure(without(PPV_INJECT_OM04, BIT(PPV_POINT_HANDSHAKE), 2), PPV_FAIL_FM02,
                   PPV_POINT_MESH_RUNNING, "rank 2");
    expect_hang(without(PPV_INJECT_OM05, BIT(PPV_POINT_HANDSHAKE), 2));
    /* the broadcast check: a worker's ad-hoc broadcast meets the others'
     * gathers (a hang under NCCL) */
    expect_failure(without(PPV_INJECT_OM06, 0, 2), PPV_FAIL_FM08, PPV_POINT_BROADCAST,
                   "FM-08 (rank 2, group mesh, call_id 1, chunk_index 1, cache_epoch 0): mesh "
                   "rank 1 broadcasts 40 bytes from mesh rank 0 on group mesh, its collective 1 "
                   "of the chunk");
    expect_hang(without(PPV_INJECT_OM06, BIT(PPV_POINT_BROADCAST), 2));
    /* the input digest: a perturbed rank computes a Franken-model silently */
    expect_silent_corruption(without(PPV_INJECT_OM11, BIT(PPV_POINT_DIGEST), 2), PPV_INJECT_OM11);
    /* stage 0's result check: a stale or duplicate result would be decoded */
    expect_silent_corruption(without(PPV_INJECT_OM09, BIT(PPV_POINT_STAGE0_RESULT), 2),
                             PPV_INJECT_OM09);
    expect_silent_corruption(without(PPV_INJECT_DUPLICATE, BIT(PPV_POINT_STAGE0_RESULT), 2),
                             PPV_INJECT_DUPLICATE);
}

static void test_failures_carry_ids_rank_and_group(void **state) {
    (void)state;
    ppv_pp_report *r = without(PPV_INJECT_OM08, 0, 2);
    assert_int_equal(r->failed_rank, 2);
    assert_non_null(strstr(r->message,
                           "FM-22 (rank 2, group world, call_id 1, chunk_index 1, cache_epoch 0)"));
    ppv_pp_report_free(r);
    r = without(PPV_INJECT_OM04, 0, 2);
    assert_non_null(strstr(r->message, "FM-01 (rank 0, group world, before the first envelope)"));
    assert_non_null(strstr(r->message, "steps: rank 2 has 3, rank 0 has 2"));
    ppv_pp_report_free(r);
    r = without(PPV_INJECT_OM05, 0, 4);
    assert_non_null(strstr(r->message, "extra_digest_collective: rank 4 has 1, rank 0 has 0"));
    ppv_pp_report_free(r);
}

/* OM-12: shard fingerprints. The built-in's reads the weights a rank owns
 * alone, so distinct ranks' differ and another seed's differ; the baseline
 * finds a rank that loaded another's shard before any chunk, and a later
 * fingerprint a shard reloaded under the run, at the cadence asked for. */
static void test_shard_fingerprints(void **state) {
    (void)state;
    ppv_gen_config g = ppv_gen_config_default();
    char err[256];
    ppv_genmodel *a = ppv_genmodel_new(&g, err, sizeof err);
    g.seed = 2;
    ppv_genmodel *b = ppv_genmodel_new(&g, err, sizeof err);
    assert_non_null(a);
    assert_non_null(b);
    uint64_t f[4];
    for (int32_t r = 0; r < 4; r++) {
        f[r] = ppv_genmodel_shard_fingerprint(a, r, 4);
        assert_true(f[r] != 0);
        for (int32_t q = 0; q < r; q++) assert_true(f[r] != f[q]);
        assert_true(ppv_genmodel_shard_fingerprint(b, r, 4) != f[r]);
    }
    assert_int_equal(ppv_genmodel_shard_fingerprint(a, 3, 4), f[3]);
    assert_int_equal(ppv_genmodel_shard_fingerprint(a, 4, 4), 0); /* no such rank */
    assert_int_equal(ppv_genmodel_shard_fingerprint(a, 0, 3), 0); /* 3 does not divide 4 heads */
    assert_true(ppv_genmodel_shard_fingerprint(a, 0, 1) != f[0]);
    ppv_genmodel_free(a);
    ppv_genmodel_free(b);
    /* the baseline: the last rank holds rank 0's shard */
    expect_failure(without(PPV_INJECT_OM12, 0, 4), PPV_FAIL_FINGERPRINT, PPV_POINT_FINGERPRINT,
                   "mesh ranks 0 and 3 have the same shard fingerprint");
    /* without the check the mesh computes a Franken-model, silently */
    expect_silent_corruption(without(PPV_INJECT_OM12, BIT(PPV_POINT_FINGERPRINT), 2),
                             PPV_INJECT_OM12);
    /* a reload before chunk 1, seen at the next fingerprint: chunk 1 with
     * every chunk fingerprinted, chunk 3 with every third */
    ppv_pp_options o = small();
    o.chunks = 5;
    o.bug = PPV_PP_BUG_SHARD_RELOAD;
    expect_failure(run(&o), PPV_FAIL_FINGERPRINT, PPV_POINT_FINGERPRINT,
                   "call_id 1, chunk_index 1, cache_epoch 0): mesh rank 1's shard fingerprint is");
    o.fingerprint_every = 3;
    ppv_pp_report *r = run(&o);
    assert_non_null(strstr(r->message, "its weights changed under the run"));
    expect_failure(r, PPV_FAIL_FINGERPRINT, PPV_POINT_FINGERPRINT, "call_id 3, chunk_index 3");
    o.skip_points = BIT(PPV_POINT_FINGERPRINT);
    r = run(&o);
    assert_true(r->ok);
    ppv_pp_report_free(r);
    /* clean runs pass on every mesh, with cuts (init_cache) and the model */
    for (int32_t mesh = 1; mesh <= 4; mesh *= 2) {
        o = small();
        o.mesh = mesh;
        o.fingerprint_every = 2;
        o.ncuts = 1;
        o.cuts[0] = 2;
        r = run(&o);
        if (!r->ok) fail_msg("mesh %d: %s", mesh, r->message);
        ppv_pp_report_free(r);
    }
    /* ppv pp --record keeps every rank's fingerprints, and conform checks them */
    const char *rec = tmp_path("fingerprints.h5");
    run_result c = RUN("pp", "--chunks", "5", "--mesh", "4", "--fingerprint-every", "2", "--record",
                       rec);
    assert_int_equal(c.code, 0);
    run_free(&c);
    c = RUN("conform", rec);
    assert_int_equal(c.code, 0);
    /* with the shards' fingerprints and each rank's memory */
    assert_non_null(strstr(c.out, "conformance: 0 violations of 21 checks\n"));
    run_free(&c);
    o.bug = PPV_PP_BUG_SHARD_RELOAD; /* the model's bug: not without it */
    o.control_only = 1;
    assert_int_equal(ppv_pp_run(&o, &r, err, sizeof err), -1);
    assert_string_equal(err, "the shard-reload bug needs the built-in generator on a mesh of 2 "
                             "or more");
    o.control_only = 0;
    o.bug = PPV_PP_BUG_NONE;
    o.fingerprint_every = -1;
    assert_int_equal(ppv_pp_run(&o, &r, err, sizeof err), -1);
    assert_string_equal(err, "--fingerprint-every -1: 0 (none) to 1000000");
}

static void test_an_orphaned_mesh_ends_by_watchdog_naming_its_waits(void **state) {
    (void)state;
    ppv_pp_report *r = without(PPV_INJECT_OM13, 0, 2);
    assert_false(r->ok);
    assert_int_equal(r->failure, PPV_FAIL_WATCHDOG);
    assert_int_equal(r->world.nblocked, 2);
    assert_int_equal(r->world.blocked[0].rank, 1);
    assert_int_equal(r->world.blocked[1].rank, 2);
    assert_non_null(strstr(r->message, "rank 1 (leader, group world, after call_id 1, chunk_index "
                                       "1, cache_epoch 0) waits at envelope header"));
    assert_non_null(strstr(r->message, "rank 2 (worker, group mesh, after call_id 1, chunk_index 1, "
                                       "cache_epoch 0) waits at header"));
    /* stage 0 decoded nothing of chunk 1 */
    assert_true(r->chunks_emitted <= 1);
    ppv_pp_report_free(r);
}

/* The cost model and the watchdog agree: a step of a decode's or a call's
 * --cost is work, so every cost the option takes (up to 1000000 steps a
 * call) finishes under the default --watchdog-steps (100000), while a
 * mesh left waiting is still a hang, however costly its calls. */
static void test_every_cost_the_option_takes_finishes_and_a_hang_is_still_one(void **state) {
    (void)state;
    /* the option's edge; under valgrind a fifth of it, still twice the watchdog */
    int32_t edge = RUNNING_ON_VALGRIND ? 200000 : 1000000;
    ppv_pp_options o = ppv_pp_defaults();
    o.chunks = 2;
    o.cost_call = edge;
    ppv_pp_report *r = run(&o);
    if (!r->ok) fail_msg("call=%d: %s", edge, r->message);
    assert_int_equal(r->chunks_emitted, 2);
    ppv_pp_report_free(r);
    o.cost_call = 0;
    o.cost_decode = edge;
    r = run(&o);
    if (!r->ok) fail_msg("decode=%d: %s", edge, r->message);
    ppv_pp_report_free(r);
    o = inject_options(PPV_INJECT_OM13, 0);
    o.cost_call = edge;
    r = run(&o);
    assert_false(r->ok);
    assert_int_equal(r->failure, PPV_FAIL_WATCHDOG);
    ppv_pp_report_free(r);
}

static void refused(ppv_pp_options o, const char *needle) {
    char err[512];
    assert_int_equal(ppv_pp_options_check(&o, err, sizeof err), -1);
    if (!strstr(err, needle)) fail_msg("'%s' not in: %s", needle, err);
    ppv_pp_report *r = (ppv_pp_report *)1;
    assert_int_equal(ppv_pp_run(&o, &r, err, sizeof err), -1);
    assert_null(r);
}

static void test_options_the_pipeline_cannot_run_are_refused_with_the_reason(void **state) {
    (void)state;
    ppv_pp_options o = small();
    o.mesh = 3;
    refused(o, "--mesh 3 must divide the generator's 4 heads");
    o = small();
    o.kv_window = 4;
    refused(o, "--kv-window 4: a multiple of 3");
    o = small();
    o.ncuts = 1;
    o.cuts[0] = 0;
    refused(o, "--hard-cut-at 0");
    o = small();
    o.ncuts = 2;
    o.cuts[0] = 3;
    o.cuts[1] = 2;
    refused(o, "increasing order");
    o = small();
    o.inject = PPV_INJECT_OM09;
    refused(o, "give --hard-cut-at");
    o = small();
    o.inject = PPV_INJECT_OM11;
    o.mesh = 1;
    refused(o, "needs a mesh of 2");
    o = small();
    o.inject = PPV_INJECT_OM03;
    o.chunks = 1;
    refused(o, "--chunks 2 or more");
    o = small();
    o.d_in = 0;
    refused(o, "--d-in 0");
}

static void test_every_injection_is_named_in_the_table(void **state) {
    (void)state;
    assert_int_equal(PPV_INJECT_COUNT, 21);
    for (int i = 0; i < PPV_INJECT_COUNT; i++)
        assert_int_equal(ppv_pp_inject_lookup(ppv_pp_inject_token((ppv_pp_inject)i)), i);
    assert_int_equal(ppv_pp_inject_lookup("OM-99"), -1);
    assert_int_equal(ppv_pp_inject_mode(PPV_INJECT_OM07), PPV_FAIL_FM23);
    assert_int_equal(ppv_pp_inject_mode(PPV_INJECT_CALL_ID_REGRESSION), PPV_FAIL_ORDER);
    assert_int_equal(ppv_pp_inject_caught_by(PPV_INJECT_CALL_ID_REGRESSION), PPV_POINT_LEADER);
    assert_int_equal(ppv_pp_inject_caught_by(PPV_INJECT_EXTRA_CALL), PPV_POINT_MESH_RUNNING);
}

/* The envelopes a run sends, deep-copied as stage 0 hands them out. */
typedef struct sent_log {
    ppv_envelope e[16];
    int n;
} sent_log;

static void copy_tensor(ppv_tensor *t) {
    if (!t->data) return;
    size_t n = ppv_tensor_bytes(t);
    void *d = malloc(n);
    assert_non_null(d);
    memcpy(d, t->data, n);
    t->data = d;
}

static int log_call(void *ctx, const ppv_envelope *e, const ppv_result *r, char *err, size_t n) {
    (void)r, (void)err, (void)n;
    sent_log *l = ctx;
    assert_true(l->n < 16);
    ppv_envelope *c = &l->e[l->n++];
    *c = *e;
    copy_tensor(&c->conditioning_embeds);
    copy_tensor(&c->latents_in);
    copy_tensor(&c->current_denoising_step_list);
    copy_tensor(&c->context_frames);
    return 0;
}

/* The mesh keeps its own place in the stream; stage 0 checks that it is
 * where the envelope says: a replayed envelope that jumps ahead without a
 * new stream is refused on its result. */
static void test_an_envelope_the_mesh_cannot_follow_is_refused(void **state) {
    (void)state;
    ppv_pp_options o = small();
    sent_log l = {.n = 0};
    o.on_call = log_call;
    o.on_call_ctx = &l;
    ppv_pp_report *r = run(&o);
    assert_true(r->ok);
    ppv_pp_report_free(r);
    assert_int_equal(l.n, 5); /* 4 chunks and the SHUTDOWN */
    assert_int_equal(l.e[2].current_start_frame, 6);
    ppv_pp_options re = small();
    re.replay = l.e;
    re.nreplay = l.n;
    r = run(&re);
    assert_true(r->ok); /* as recorded, it replays */
    ppv_pp_report_free(r);
    /* a sender without envelope digests: what follows is the mesh's own
     * checks, not the leader's digest check */
    for (int64_t k = 0; k < l.n; k++) l.e[k].envelope_digest_i64 = 0;
    r = run(&re); /* a run that requires digests refuses the first envelope without */
    assert_false(r->ok);
    assert_int_equal(r->failure, PPV_FAIL_ENVELOPE);
    assert_int_equal(r->caught_by, PPV_POINT_LEADER);
    assert_non_null(strstr(r->message, "call_id 0, chunk_index 0"));
    assert_non_null(strstr(r->message, "carries no envelope_digest_i64, and this run requires one"));
    ppv_pp_report_free(r);
    re.envelope_digest = 0;
    r = run(&re);
    assert_true(r->ok);
    ppv_pp_report_free(r);
    l.e[2].current_start_frame = 9; /* chunk 2 claims a frame the mesh is not at */
    r = run(&re);
    assert_false(r->ok);
    assert_int_equal(r->failure, PPV_FAIL_RULE);
    assert_int_equal(r->caught_by, PPV_POINT_STAGE0_RESULT);
    assert_non_null(strstr(r->message, "mesh_current_start_frame 6, the envelope said 9"));
    ppv_pp_report_free(r);
    /* a chunk of another size than the mesh runs is refused by the leader
     * before the mesh touches it */
    l.e[2].current_start_frame = 6;
    ppv_tensor *lat = &l.e[2].latents_in;
    free(lat->data);
    l.e[2].height = l.e[2].width = 48;
    lat->dims[3] = lat->dims[4] = 6;
    lat->data = calloc((size_t)(3 * 16 * 6 * 6), sizeof(uint16_t));
    assert_non_null(lat->data);
    r = run(&re);
    assert_false(r->ok);
    assert_int_equal(r->failure, PPV_FAIL_FM23);
    assert_non_null(strstr(r->message, "FM-07: a 48x48 chunk, the mesh runs 32x32"));
    ppv_pp_report_free(r);
    for (int k = 0; k < l.n; k++)
        ppv_envelope_free_tensors(&l.e[k]);
}

/* ---- the command ---------------------------------------------------------------------- */

static void test_command_reports_and_exits_by_the_verdict(void **state) {
    (void)state;
    run_result r = RUN("pp", "--chunks", "3", "--steps", "2");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "emitted 3 chunks; generator calls per chunk "
                                  "(expected/observed): 2/2 2/2 2/2\n"));
    assert_non_null(strstr(r.out, "result: OK\n"));
    run_free(&r);
    r = RUN("pp", "--inject", "OM-03", "--json");
    assert_int_equal(r.code, 0); /* caught as it must be */
    assert_non_null(strstr(r.out, "\"ok\":false,\"failure_mode\":\"FM-02\","
                                  "\"caught_by\":\"stage0-send\",\"failed_rank\":0"));
    assert_non_null(strstr(r.out, "\"as_expected\":true"));
    run_free(&r);
    r = RUN("pp", "--inject", "list");
    assert_int_equal(r.code, 0);
    int lines = 0;
    for (const char *p = r.out; (p = strchr(p, '\n')); p++)
        lines++;
    assert_int_equal(lines, 21); /* a heading and 20 injections */
    run_free(&r);
    r = RUN("pp", "--mesh", "3");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--mesh 3 must divide"));
    run_free(&r);
    r = RUN("pp", "--inject", "OM-99");
    assert_int_equal(r.code, 2);
    run_free(&r);
    r = RUN("pp", "--compare-kv", "--trace-out", tmp_path("kv.trace"));
    assert_int_equal(r.code, 2); /* one trace cannot hold two runs */
    assert_non_null(strstr(r.err, "--compare-kv runs its own two configurations"));
    run_free(&r);
    r = RUN("pp", "--kv", "sometimes");
    assert_int_equal(r.code, 2);
    run_free(&r);
}

static void test_command_compare_kv_says_equal_or_evicted(void **state) {
    (void)state;
    run_result r = RUN("pp", "--compare-kv", "--kv-window", "30", "--chunks", "4");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "kv caches: bitwise equal\noutputs: bitwise equal\n"
                                  "nothing was evicted, so all 4 chunks must be bitwise equal\n"));
    run_free(&r);
    r = RUN("pp", "--compare-kv", "--kv-window", "3", "--chunks", "4", "--json");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "\"evicted\":true,\"first_evicted_chunk\":2,"));
    assert_non_null(strstr(r.out, "\"kv_bitwise_equal\":false,"));
    assert_non_null(strstr(r.out, "\"kv_first_difference\":\"chunk 2, layer "));
    run_free(&r);
}

/* Outside mpirun a job of processes is refused, exit 2, in every build:
 * under AddressSanitizer too. Its leak check is off for this one process:
 * on this machine LeakSanitizer itself crashes ("Tracer caught signal 11")
 * reading the dynamic TLS of OpenMPI's singleton start-up, in ppv builds
 * old and new alike, and exits 1 whatever ppv does. */
static void test_mpi_outside_mpirun_is_refused_with_exit_2(void **state) {
    (void)state;
    /* under valgrind OpenMPI's own allocations are valgrind's to report
     * (test_mpi is left out of memcheck for them) */
    if (RUNNING_ON_VALGRIND) skip();
    const char *lsan = getenv("LSAN_OPTIONS");
    char *keep = lsan ? strdup(lsan) : NULL, opts[4096];
    snprintf(opts, sizeof opts, "%s%sdetect_leaks=0", lsan ? lsan : "", lsan && *lsan ? ":" : "");
    setenv("LSAN_OPTIONS", opts, 1);
    run_result r = RUN("pp", "--transport", "mpi", "--chunks", "2");
    if (keep) setenv("LSAN_OPTIONS", keep, 1);
    else unsetenv("LSAN_OPTIONS");
    free(keep);
    assert_int_equal(r.code, 2);
    assert_string_equal(r.out, "");
    assert_non_null(strstr(r.err, "ppv pp: "));
    run_free(&r);
}

static void test_a_recording_replays_on_any_mesh_and_a_flipped_bit_fails(void **state) {
    (void)state;
    const char *file = tmp_path("pp.h5");
    run_result r = RUN("pp", "--mesh", "4", "--chunks", "5", "--kv", "recompute",
                       "--hard-cut-at", "3", "--policy", "pct", "--record", file);
    assert_int_equal(r.code, 0);
    run_free(&r);
    r = RUN("replay", file);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "replayed 6 recorded calls on a mesh of 4"));
    assert_non_null(strstr(r.out, "6 objects, 5 datasets, 3840 values compared"));
    run_free(&r);
    r = RUN("replay", file, "--mesh", "1");
    assert_int_equal(r.code, 0);
    run_free(&r);
    r = RUN("replay", file, "--mesh", "2", "--perturb");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "first differing call: #0 (call_id 0, chunk_index 0)"));
    run_free(&r);
    /* a recorded fault fails the same way on replay, every answer the
     * recorded one, and the replay is a PROBLEM: a failed run is never OK */
    const char *bad = tmp_path("om07.h5");
    r = RUN("pp", "--inject", "OM-07", "--record", bad);
    assert_int_equal(r.code, 0);
    run_free(&r);
    r = RUN("replay", bad);
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "the re-run failed as FM-23"));
    assert_non_null(strstr(r.out, "values compared (bitwise, NaN equals NaN): same\nresult: PROBLEM\n"));
    assert_non_null(strstr(r.out, "PPV-RULE [envelope] at call 1 (call_id 1, chunk_index 1, "
                                  "cache_epoch 0): pp_disable_vace must be 1"));
    run_free(&r);
}

/* The shipped inference goldens replay bit for bit on their recorded mesh
 * and on meshes of 1, 2 and 4; each holds its setup and every call. */
static void test_shipped_inference_goldens_replay_on_every_mesh(void **state) {
    (void)state;
    static const struct {
        const char *file;
        int32_t mesh;
        int64_t calls;
    } files[] = {{"infer_pp0_stash_cut.h5", 1, 7},
                 {"infer_pp0_recompute_cut.h5", 1, 7},
                 {"infer_pp1_stash_cut.h5", 2, 7},
                 {"infer_pp1_mesh4_recompute_cut.h5", 4, 9}};
    for (size_t k = 0; k < sizeof files / sizeof files[0]; k++)
        for (int32_t mesh = 0; mesh <= 4; mesh = mesh ? mesh * 2 : 1) {
            char path[512], err[512];
            snprintf(path, sizeof path, "%s/%s", PPV_GOLDEN_DIR, files[k].file);
            ppv_diff_options o = ppv_diff_defaults();
            ppv_inference_replay_result res;
            if (ppv_inference_replay(path, &o, mesh, 0, &res, err, sizeof err) != 0)
                fail_msg("%s", err);
            assert_int_equal(res.setup.mesh, files[k].mesh);
            assert_int_equal(res.mesh, mesh ? mesh : files[k].mesh);
            assert_int_equal(res.calls, files[k].calls);
            assert_true(res.run->ok);
            assert_int_equal(res.run->chunks_emitted, files[k].calls - 1);
            if (res.diff->n) fail_msg("%s on mesh %d: %s", files[k].file, mesh, res.diff->entries[0].what);
            assert_int_equal(res.diff->datasets, files[k].calls - 1);
            assert_int_equal(res.first_call, -1);
            ppv_inference_replay_free(&res);
        }
}

/* Reordered results are never emitted out of order: stage 0 holds one that
 * comes ahead in its reorder buffer (at most D_out) and decodes in call
 * order. A retry of the last call is answered from the leader's result
 * cache, never run twice: one output; a retry with another envelope is an
 * order violation. */
static void test_reordered_results_and_retries(void **state) {
    (void)state;
    ppv_pp_options o = inject_options(PPV_INJECT_REORDER_RESULTS, 0);
    ppv_pp_options clean = o;
    clean.inject = PPV_INJECT_NONE;
    uint64_t want = digest_of(&clean);
    sent_log l = {.n = 0};
    ppv_pp_report *r = run(&o);
    assert_true(r->ok);
    assert_int_equal(r->reordered, 1); /* round-robin: chunk 2's envelope had come */
    assert_true(r->output_digest == want);
    for (int64_t k = 0; k < r->chunks_emitted; k++) assert_int_equal(r->emitted_call_ids[k], k);
    ppv_pp_report_free(r);
    /* a bound of D_out 1 still holds one */
    o.d_out = 1;
    clean.d_out = 1;
    r = run(&o);
    assert_true(r->ok);
    assert_true(r->output_digest == digest_of(&clean));
    ppv_pp_report_free(r);
    o.d_out = 2;
    /* without stage 0's judgement results are taken as they come: chunk 2's
     * is decoded before chunk 1's, and the video changes silently */
    o.skip_points = BIT(PPV_POINT_STAGE0_RESULT);
    r = run(&o);
    assert_true(r->ok);
    assert_int_equal(r->emitted_call_ids[1], 2);
    assert_int_equal(r->emitted_call_ids[2], 1);
    assert_true(r->output_digest != want);
    ppv_pp_report_free(r);
    /* retry */
    o = inject_options(PPV_INJECT_RETRY, 0);
    o.on_call = log_call;
    o.on_call_ctx = &l;
    r = run(&o);
    assert_true(r->ok);
    assert_int_equal(r->retried, 1);
    assert_int_equal(r->dropped_duplicate, 1);
    assert_true(r->output_digest == want);
    assert_int_equal(r->generator_calls, 4 * 2); /* chunk 1 ran once */
    assert_int_equal(l.n, 5);                    /* the retry is not a call of its own */
    ppv_pp_report_free(r);
    /* without the leader's check the chunk runs twice: the mesh's place in
     * the stream moves on twice, which stage 0 sees on the next result;
     * without that too, the video changes silently */
    expect_failure(without(PPV_INJECT_RETRY, BIT(PPV_POINT_LEADER), 2), PPV_FAIL_RULE,
                   PPV_POINT_STAGE0_RESULT, "mesh_current_start_frame 9, the envelope said 6");
    expect_silent_corruption(
        without(PPV_INJECT_RETRY, BIT(PPV_POINT_LEADER) | BIT(PPV_POINT_STAGE0_RESULT), 2),
        PPV_INJECT_RETRY);
    /* a retry must repeat its call: chunk 1 sent again with another noise scale */
    o = small();
    o.on_call = NULL;
    ppv_envelope rep[6];
    for (int k = 0; k < 5; k++) rep[k + (k >= 2)] = l.e[k];
    rep[2] = l.e[1];
    rep[2].noise_scale += 0.5;
    rep[2].envelope_digest_i64 = (int64_t)ppv_envelope_digest(&rep[2]);
    o.replay = rep;
    o.nreplay = 6;
    r = run(&o);
    expect_failure(r, PPV_FAIL_ORDER, PPV_POINT_LEADER,
                   "call_id 1 again, with another envelope");
    for (int k = 0; k < l.n; k++)
        ppv_envelope_free_tensors(&l.e[k]);
    char err[256];
    o = inject_options(PPV_INJECT_REORDER_RESULTS, 0);
    o.d_in = 1;
    assert_int_equal(ppv_pp_run(&o, &r, err, sizeof err), -1);
    assert_non_null(strstr(err, "--inject reorder-results needs --d-in 2 or more"));
    o = inject_options(PPV_INJECT_RETRY, 0);
    o.chunks = 2;
    assert_int_equal(ppv_pp_run(&o, &r, err, sizeof err), -1);
    assert_non_null(strstr(err, "--inject retry needs --chunks 3 or more"));
}

/* The overlap metric on the mock's virtual time with a stated cost model
 * (a decode 200 steps of stage 0, a generator call 20 of each mesh rank):
 * queues of 1 make the stages take turns (OverlapScore 0, the mesh idle for
 * every decode), queues of 2 let them interleave (>= 0.30). A stage 0
 * whose decode blocks its sends (the seeded bug) shows the contract's
 * signature: queues at ~0, and the mesh's idle time tracks the decode's. */
static void test_overlap_and_the_decode_blocks_the_mesh_signature(void **state) {
    (void)state;
    ppv_pp_options o = ppv_pp_defaults();
    o.chunks = 30;
    o.cost_decode = 200;
    o.cost_call = 20;
    o.d_in = o.d_out = 1;
    ppv_pp_report *r = run(&o);
    assert_true(r->ok);
    assert_int_equal(r->overlap.samples, 20);
    assert_true(r->overlap.score == 0);
    assert_true(r->overlap.hidden_ms == 0);
    assert_int_equal(r->max_inflight, 1);
    assert_true(r->overlap.mesh_idle_ms >= r->overlap.decode_ms); /* it waits out every decode */
    ppv_pp_report_free(r);
    o.d_in = o.d_out = 2;
    r = run(&o);
    assert_true(r->ok);
    assert_true(r->overlap.score >= PPV_PP_OVERLAP_MIN);
    assert_true(r->overlap.mesh_idle_ms < r->overlap.decode_ms / 2);
    double idle_ok = r->overlap.mesh_idle_ms;
    ppv_pp_report_free(r);
    for (int32_t cost = 200; cost <= 800; cost *= 2) {
        o.cost_decode = cost;
        o.bug = PPV_PP_BUG_BLOCKING_DECODE;
        r = run(&o);
        assert_true(r->ok);
        assert_int_equal(r->max_inflight, 1); /* the queues sit at ~0 */
        assert_true(r->overlap.score < PPV_PP_OVERLAP_MIN);
        assert_true(r->overlap.mesh_idle_ms > idle_ok);
        /* the signature: the mesh's idle time is the decode's, give or take a step a rank */
        double gap = r->overlap.mesh_idle_ms - r->overlap.decode_ms;
        if (gap < -0.01 || gap > 0.05)
            fail_msg("decode %d steps: the mesh idle %.3f ms, a decode %.3f ms", cost,
                     r->overlap.mesh_idle_ms, r->overlap.decode_ms);
        ppv_pp_report_free(r);
    }
    /* a stage 0 that decodes first with an envelope it could send is
     * stopped at once by its queue check; without the check it only loses
     * the queue's slack */
    o.bug = PPV_PP_BUG_DECODE_FIRST;
    expect_failure(run(&o), PPV_FAIL_RULE, PPV_POINT_STAGE0_SEND, "the mesh idles");
    o.skip_points = BIT(PPV_POINT_STAGE0_SEND);
    r = run(&o);
    assert_true(r->ok);
    ppv_pp_report_free(r);
    /* virtual time only: not on MPI or NCCL, and not negative */
    char err[256];
    o.cost_decode = -1;
    assert_int_equal(ppv_pp_run(&o, &r, err, sizeof err), -1);
    assert_string_equal(err, "--cost: decode and call take 0 to 1000000 steps");
}

/* Heartbeats on the mock's virtual clock: NOOPs (each takes a call_id)
 * between stage 0's steps, the output unchanged; recorded as calls, and
 * the recording conforms. */
static void test_heartbeats_change_nothing_but_the_trace(void **state) {
    (void)state;
    ppv_pp_options o = small();
    o.chunks = 6;
    ppv_pp_report *clean = run(&o);
    o.heartbeat_s = 50e-6; /* 50 scheduler steps */
    ppv_pp_report *r = run(&o);
    assert_true(r->ok);
    assert_true(r->heartbeats > 0);
    assert_true(r->output_digest == clean->output_digest);
    assert_true(r->world.trace_digest != clean->world.trace_digest);
    assert_true(r->emitted_call_ids[5] > 5); /* NOOPs took call_ids */
    ppv_pp_report_free(r);
    ppv_pp_report_free(clean);
    const char *rec = tmp_path("heartbeats.h5");
    run_result c = RUN("pp", "--chunks", "6", "--heartbeat", "0.00005", "--record", rec);
    assert_int_equal(c.code, 0);
    assert_non_null(strstr(c.out, "heartbeats: "));
    run_free(&c);
    c = RUN("conform", rec);
    assert_int_equal(c.code, 0);
    assert_non_null(strstr(c.out, "result: CONFORMS\n"));
    run_free(&c);
    char err[256];
    o.heartbeat_s = 2;
    o.worker_watchdog_s = 1;
    assert_int_equal(ppv_pp_run(&o, &r, err, sizeof err), -1);
    assert_string_equal(err, "--heartbeat 2 must be shorter than --worker-watchdog 1, or a quiet "
                             "stage 0 looks dead");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_run_emits_every_chunk_with_the_planned_calls),
        cmocka_unit_test(test_output_does_not_depend_on_queues_policy_seed_or_mesh),
        cmocka_unit_test(test_recompute_cuts_and_mesh_sizes_give_the_same_bits),
        cmocka_unit_test(test_recompute_equals_stash_bit_for_bit_when_nothing_is_evicted),
        cmocka_unit_test(test_recompute_differs_from_stash_from_the_first_eviction_on),
        cmocka_unit_test(test_stage0_sends_ahead_within_its_bounds),
        cmocka_unit_test(test_a_seed_replays_its_interleaving_and_seeds_differ),
        cmocka_unit_test(test_break_it_matrix_on_the_control_plane_every_policy_1000_seeds),
        cmocka_unit_test(test_break_it_matrix_with_the_model_every_policy),
        cmocka_unit_test(test_the_call_count_drift_moves_through_the_four_points),
        cmocka_unit_test(test_an_extra_generator_call_is_stopped_while_running),
        cmocka_unit_test(test_stage0_preflight_faults_reach_the_leader_without_it),
        cmocka_unit_test(test_the_other_checks_each_stand_between_a_fault_and_a_hang),
        cmocka_unit_test(test_failures_carry_ids_rank_and_group),
        cmocka_unit_test(test_shard_fingerprints),
        cmocka_unit_test(test_reordered_results_and_retries),
        cmocka_unit_test(test_overlap_and_the_decode_blocks_the_mesh_signature),
        cmocka_unit_test(test_heartbeats_change_nothing_but_the_trace),
        cmocka_unit_test(test_an_orphaned_mesh_ends_by_watchdog_naming_its_waits),
        cmocka_unit_test(test_every_cost_the_option_takes_finishes_and_a_hang_is_still_one),
        cmocka_unit_test(test_options_the_pipeline_cannot_run_are_refused_with_the_reason),
        cmocka_unit_test(test_every_injection_is_named_in_the_table),
        cmocka_unit_test(test_an_envelope_the_mesh_cannot_follow_is_refused),
        cmocka_unit_test(test_command_reports_and_exits_by_the_verdict),
        cmocka_unit_test(test_command_compare_kv_says_equal_or_evicted),
        cmocka_unit_test(test_a_recording_replays_on_any_mesh_and_a_flipped_bit_fails),
        cmocka_unit_test(test_mpi_outside_mpirun_is_refused_with_exit_2),
        cmocka_unit_test(test_shipped_inference_goldens_replay_on_every_mesh),
    };
    return cmocka_run_group_tests(tests, NULL, tmp_cleanup);
}
