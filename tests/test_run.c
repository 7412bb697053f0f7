/* test_run.c - schedules executed on real tensors: every generated kind
 * under every policy gives the one-rank reference's gradients bit for bit,
 * recompute equals stash, measured activation bytes equal the prediction,
 * runs replay exactly, and deadlocks are reported, not waited out. */
#include <math.h>
#include <unistd.h>

#include "testutil.h"

enum { P = 4, M = 8, LAYERS = 8 };

/* Every kind ppv gen knows, with the stages per rank it takes. */
static const struct {
    const char *kind;
    int v;
} kinds[] = {{"gpipe", 1},  {"1f1b", 1},  {"interleaved-1f1b", 2},
             {"zb-h1", 1},  {"zb-h2", 1}, {"zbv", 2},
             {"v-half", 2}, {"v-min", 2}, {"dualpipev", 2}};

static ppv_run_options options(const char *sem, const char *policy, uint64_t seed) {
    ppv_run_options o = ppv_run_defaults();
    assert_int_equal(ppv_semantics_parse(sem, &o.sem), 0);
    assert_int_equal(ppv_policy_parse(policy, &o.policy), 0);
    o.policy.seed = seed;
    o.model.layers = LAYERS;
    return o;
}

/* Runs s and requires the run itself (not its verdict) to succeed. */
static ppv_run_report *run_ok(const ppv_schedule *s, const ppv_run_options *o) {
    ppv_run_report *rep = NULL;
    char err[1024] = "";
    int rc = ppv_run(s, o, &rep, err, sizeof err);
    if (rc != 0) fprintf(stderr, "run %s: %s\n", s->name, err);
    assert_int_equal(rc, 0);
    assert_non_null(rep);
    return rep;
}

/* The one-rank reference's gradient digest for LAYERS layers and M
 * microbatches. */
static uint64_t reference_digest(float **grads, size_t *n) {
    ppv_model_config cfg = ppv_model_config_default();
    cfg.layers = LAYERS;
    double loss;
    char err[256];
    assert_int_equal(ppv_run_reference(&cfg, M, grads, n, &loss, err, sizeof err), 0);
    assert_true(isfinite(loss) && loss > 0);
    return ppv_digest(*grads, *n * sizeof **grads);
}

static void test_every_kind_under_every_policy_matches_the_reference(void **state) {
    (void)state;
    float *ref;
    size_t nref;
    uint64_t want = reference_digest(&ref, &nref);
    static const struct {
        const char *policy;
        uint64_t seed;
    } pols[] = {{"rr", 0}, {"pct:5", 4}, {"random", 1}, {"random", 2}, {"pct", 3}};
    static const char *sems[] = {"rendezvous", "eager"};
    /* under valgrind (twenty times slower) round-robin and one PCT seed */
    size_t npols = (size_t)sweep(5, 5, 2);
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        ppv_schedule *s = gen_ok(kinds[k].kind, P, M, kinds[k].v);
        for (size_t q = 0; q < npols; q++)
            for (size_t e = 0; e < 2; e++) {
                ppv_run_options o = options(sems[e], pols[q].policy, pols[q].seed);
                ppv_run_report *rep = run_ok(s, &o);
                if (rep->world.status != PPV_RUN_DONE || rep->grad_digest != want)
                    fprintf(stderr, "%s %s seed %llu %s: %s\n", kinds[k].kind, pols[q].policy,
                            (unsigned long long)pols[q].seed, sems[e], rep->world.message);
                assert_int_equal(rep->world.status, PPV_RUN_DONE);
                assert_int_equal(rep->ngrads, nref);
                assert_memory_equal(rep->grads, ref, nref * sizeof *ref);
                assert_int_equal(rep->grad_digest, want);
                for (int32_t r = 0; r < rep->nranks; r++)
                    assert_int_equal(rep->peak_bytes[r], rep->predicted_bytes[r]);
                /* every kind runs each stage's W in microbatch order: gradients are
                 * summed as they finish, one buffer at a time */
                assert_int_equal(rep->grad_buffers_peak, 1);
                ppv_run_report_free(rep);
            }
        ppv_schedule_free(s);
    }
    free(ref);
}

/* Gradients are summed in microbatch order whatever order the backwards
 * ran in: a schedule that runs them backwards holds every buffer until
 * microbatch 0's arrives, and still gives the reference's bits. */
static void test_out_of_order_backwards_sum_in_microbatch_order(void **state) {
    (void)state;
    static const char text[] = "0F0,0F1,0F2,0F3,0B3,0B2,0B1,0B0\n";
    ppv_schedule *s = NULL;
    char err[512];
    assert_int_equal(ppv_schedule_parse_text(text, sizeof text - 1, "reverse", PPV_DIALECT_AUTO,
                                             &s, err, sizeof err),
                     0);
    ppv_run_options o = options("rendezvous", "rr", 0);
    o.model.layers = 2;
    ppv_run_report *rep = run_ok(s, &o);
    assert_int_equal(rep->world.status, PPV_RUN_DONE);
    assert_int_equal(rep->grad_buffers_peak, 4);
    float *g;
    size_t n;
    double loss;
    assert_int_equal(ppv_run_reference(&o.model, 4, &g, &n, &loss, err, sizeof err), 0);
    assert_int_equal(rep->ngrads, n);
    assert_memory_equal(rep->grads, g, n * sizeof *g);
    free(g);
    ppv_run_report_free(rep);
    ppv_schedule_free(s);
}

static void test_lowered_comms_files_run_like_their_compute_only_form(void **state) {
    (void)state;
    float *ref;
    size_t nref;
    uint64_t want = reference_digest(&ref, &nref);
    free(ref);
    static const char *files[] = {"zb1p_2rank_2stagep_comms.csv", "zb1p_2rank_2stagep_compute.csv",
                                  "dualpipev_4rank_10mb.csv"};
    for (size_t k = 0; k < 3; k++) {
        ppv_schedule *s = load_ok(interop_path(files[k]));
        ppv_run_options o = options("rendezvous", "random", 7);
        ppv_model_config cfg = o.model;
        if (cfg.layers < s->nstages) cfg.layers = s->nstages;
        float *g;
        size_t n;
        double loss;
        char err[256];
        assert_int_equal(ppv_run_reference(&cfg, s->nmb, &g, &n, &loss, err, sizeof err), 0);
        ppv_run_report *rep = run_ok(s, &o);
        assert_int_equal(rep->world.status, PPV_RUN_DONE);
        assert_memory_equal(rep->grads, g, n * sizeof *g);
        assert_true(rep->loss == loss);
        if (s->nmb == M && cfg.layers == LAYERS) assert_int_equal(rep->grad_digest, want);
        free(g);
        ppv_run_report_free(rep);
        ppv_schedule_free(s);
    }
}

static void test_unequal_and_single_layer_stages_still_match(void **state) {
    (void)state;
    ppv_schedule *s = gen_ok("1f1b", P, 5, 1);
    static const int32_t layers[] = {4, 5, 7};
    static const int32_t last_stage_layers[] = {1, 2, 2};
    for (int k = 0; k < 3; k++) {
        ppv_run_options o = options("rendezvous", "rr", 0);
        o.model.layers = layers[k];
        ppv_run_report *rep = run_ok(s, &o);
        assert_int_equal(rep->world.status, PPV_RUN_DONE);
        assert_int_equal(rep->stage_layer[0], 0);
        assert_int_equal(rep->stage_layer[P], layers[k]);
        assert_int_equal(rep->stage_layer[P] - rep->stage_layer[P - 1], last_stage_layers[k]);
        float *g;
        size_t n;
        double loss;
        char err[256];
        assert_int_equal(ppv_run_reference(&o.model, 5, &g, &n, &loss, err, sizeof err), 0);
        assert_int_equal(rep->ngrads, n);
        assert_memory_equal(rep->grads, g, n * sizeof *g);
        free(g);
        ppv_run_report_free(rep);
    }
    ppv_schedule_free(s);
}

/* One layer's saved tensors and weight state, and a stage input, in
 * bytes, for o's model. */
static void layer_bytes(const ppv_run_options *o, int64_t *saved, int64_t *wstate,
                        int64_t *input) {
    char err[256];
    ppv_model *m = ppv_model_new(&o->model, err, sizeof err);
    assert_non_null(m);
    *saved = (int64_t)ppv_layers_saved_bytes(m, 0, 1);
    *wstate = (int64_t)ppv_layers_wstate_bytes(m, 0, 1);
    *input = (int64_t)o->model.seq_len * o->model.d_model * 2;
    ppv_model_free(m);
}

/* 1F1B's peaks by formula: rank r holds p - r forwards' saved tensors and
 * one backward's weight state; recomputed, it holds p - r inputs, and at
 * a backward the regenerated saved tensors take the place of one of them
 * (saved holds the stage input) beside the weight state, which is larger
 * than an input: (p - r - 1) inputs + saved + wstate. */
static void test_peak_bytes_follow_the_1f1b_formula_with_and_without_recompute(void **state) {
    (void)state;
    ppv_schedule *s = gen_ok("1f1b", P, M, 1);
    ppv_run_options o = options("rendezvous", "rr", 0);
    o.model.layers = P; /* one layer per stage */
    char err[256];
    int64_t saved, wstate, input;
    layer_bytes(&o, &saved, &wstate, &input);
    assert_true(input < wstate && wstate < saved);

    ppv_recompute_verdict v;
    assert_int_equal(ppv_verify_recompute(s, &o, &v, err, sizeof err), 0);
    assert_true(v.diff.bitwise_equal);
    assert_int_equal(v.diff.first_index, -1);
    assert_int_equal(v.first_layer, -1);
    for (int32_t r = 0; r < P; r++) {
        assert_int_equal(v.stash->peak_bytes[r], (P - r) * saved + wstate);
        assert_int_equal(v.stash->predicted_bytes[r], v.stash->peak_bytes[r]);
        assert_int_equal(v.recompute->peak_bytes[r], (P - r - 1) * input + saved + wstate);
        assert_int_equal(v.recompute->predicted_bytes[r], v.recompute->peak_bytes[r]);
    }
    assert_true(v.recompute->peak_bytes[0] < v.stash->peak_bytes[0] / 2);
    ppv_recompute_verdict_free(&v);

    /* GPipe holds every microbatch: m saved sets against m inputs */
    ppv_schedule *g = gen_ok("gpipe", P, M, 1);
    assert_int_equal(ppv_verify_recompute(g, &o, &v, err, sizeof err), 0);
    assert_true(v.diff.bitwise_equal);
    for (int32_t r = 0; r < P; r++) {
        assert_int_equal(v.stash->peak_bytes[r], M * saved + wstate);
        assert_int_equal(v.recompute->peak_bytes[r], (M - 1) * input + saved + wstate);
    }
    ppv_recompute_verdict_free(&v);
    ppv_schedule_free(g);

    /* the measurement is the allocator's, not the prediction: 4096 bytes
     * more held on rank 0 show there and nowhere else */
    o.extra_bytes = 4096;
    ppv_run_report *rep = NULL;
    assert_int_equal(ppv_run(s, &o, &rep, err, sizeof err), 0);
    assert_int_equal(rep->world.status, PPV_RUN_DONE);
    assert_int_equal(rep->peak_bytes[0], P * saved + wstate + 4096);
    assert_int_equal(rep->predicted_bytes[0], P * saved + wstate);
    for (int32_t r = 1; r < P; r++)
        assert_int_equal(rep->peak_bytes[r], rep->predicted_bytes[r]);
    ppv_run_report_free(rep);
    ppv_schedule_free(s);
}

/* ZB-H1's peaks by formula, from the paper's order (not from ppv's
 * prediction): a forward's saved tensors live until its input backward
 * (which copies what the weight backward reads into wstate), a weight
 * state until its W. Rank r runs p - r forwards, then r pairs (I, F)
 * that each leave one more weight state waiting, then (I, W, F): the
 * peak is at an I with p - r forwards and r + 1 weight states held,
 * (p - r) saved + (r + 1) wstate. */
static void test_peak_bytes_follow_the_zb_h1_formula(void **state) {
    (void)state;
    ppv_run_options o = options("rendezvous", "rr", 0);
    o.model.layers = P;
    char err[256];
    int64_t saved, wstate, input;
    layer_bytes(&o, &saved, &wstate, &input);
    assert_true(wstate < saved);
    const int32_t ms[] = {P, M, 3 * P + 1};
    for (int k = 0; k < 3; k++) {
        ppv_schedule *s = gen_ok("zb-h1", P, ms[k], 1);
        ppv_run_report *rep = NULL;
        assert_int_equal(ppv_run(s, &o, &rep, err, sizeof err), 0);
        assert_int_equal(rep->world.status, PPV_RUN_DONE);
        for (int32_t r = 0; r < P; r++)
            assert_int_equal(rep->peak_bytes[r], (P - r) * saved + (r + 1) * wstate);
        ppv_run_report_free(rep);
        ppv_schedule_free(s);
    }
}

/* ZB-V's peaks by formula (PyTorch's ScheduleZBVZeroBubble order, one
 * layer a stage), read off the order for p = 2..8: in the steady state
 * every rank holds 2p chunk forwards when an I adds its weight state;
 * in the cool-down rank r's input backwards run ahead of their W, and
 * at each I the forwards held s and weight states w add up to
 * p + r + 1 (s from p - r to p + r - 1). A forward's saved tensors are
 * larger than a weight state, so the cool-down's largest is
 * (p + r - 1) saved + 2 wstate, below 2p saved + wstate on every rank. */
static void test_peak_bytes_follow_the_zbv_formula(void **state) {
    (void)state;
    ppv_run_options o = options("rendezvous", "rr", 0);
    o.model.layers = 2 * P;
    char err[256];
    int64_t saved, wstate, input;
    layer_bytes(&o, &saved, &wstate, &input);
    assert_true(wstate < saved);
    const int32_t ms[] = {2 * P, M + 3, 4 * P};
    for (int k = 0; k < 3; k++) {
        ppv_schedule *s = gen_ok("zbv", P, ms[k], 2);
        ppv_run_report *rep = NULL;
        assert_int_equal(ppv_run(s, &o, &rep, err, sizeof err), 0);
        assert_int_equal(rep->world.status, PPV_RUN_DONE);
        for (int32_t r = 0; r < P; r++)
            assert_int_equal(rep->peak_bytes[r], 2 * P * saved + wstate);
        ppv_run_report_free(rep);
        ppv_schedule_free(s);
    }
}

static void test_recompute_equals_stash_for_every_kind_and_some_stages(void **state) {
    (void)state;
    /* under valgrind, as test_selective_sits_between_stash_and_full_on_every_kind */
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k += (size_t)sweep(1, 1, 2)) {
        ppv_schedule *s = gen_ok(kinds[k].kind, P, M, kinds[k].v);
        ppv_run_options o = options("rendezvous", "random", 11);
        ppv_recompute odd[16] = {{0, 0}};
        for (int32_t st = 1; st < s->nstages; st += 2)
            odd[st] = (ppv_recompute){PPV_RC_FULL, 0};
        for (int pass = 0; pass < 2; pass++) {
            o.recompute = pass ? odd : NULL;
            ppv_recompute_verdict v;
            char err[256];
            assert_int_equal(ppv_verify_recompute(s, &o, &v, err, sizeof err), 0);
            assert_int_equal(v.recompute->world.status, PPV_RUN_DONE);
            assert_true(v.diff.bitwise_equal);
            assert_int_equal(v.stash->grad_digest, v.recompute->grad_digest);
            /* measured as predicted, and never above stashing: what W
             * needs is kept at I, the rest of saved goes there */
            for (int32_t r = 0; r < P; r++) {
                assert_int_equal(v.recompute->peak_bytes[r], v.recompute->predicted_bytes[r]);
                assert_int_equal(v.stash->peak_bytes[r], v.stash->predicted_bytes[r]);
                if (v.recompute->peak_bytes[r] > v.stash->peak_bytes[r])
                    fprintf(stderr, "%s rank %d: recompute %lld > stash %lld\n", kinds[k].kind,
                            (int)r, (long long)v.recompute->peak_bytes[r],
                            (long long)v.stash->peak_bytes[r]);
                assert_true(v.recompute->peak_bytes[r] <= v.stash->peak_bytes[r]);
            }
            /* the forward really ran again: once per F, and once more for each
             * backward of a recomputed stage (every stage on the first pass) */
            for (int32_t st = 0; st < s->nstages; st++)
                for (int32_t mb = 0; mb < s->nmb; mb++) {
                    assert_int_equal(v.stash->forwards[st * s->nmb + mb], 1);
                    assert_int_equal(v.recompute->forwards[st * s->nmb + mb],
                                     pass && odd[st].kind == PPV_RC_NONE ? 1 : 2);
                }
            ppv_recompute_verdict_free(&v);
        }
        ppv_schedule_free(s);
    }
}

/* Policies from their text (the CLI's --recompute). */
static ppv_recompute *policies(const char *text, int32_t nstages) {
    ppv_recompute *rc = calloc((size_t)nstages, sizeof *rc);
    char err[256];
    assert_non_null(rc);
    if (ppv_recompute_parse(text, nstages, rc, err, sizeof err) < 0) fprintf(stderr, "%s\n", err);
    assert_int_equal(ppv_recompute_parse(text, nstages, rc, err, sizeof err), 0);
    return rc;
}

/* Every kind under every policy, with two layers a stage: the gradients
 * equal stashing bit for bit, the allocator's peak equals the prediction
 * and never exceeds stashing on any rank, and the forwards the engine ran
 * are one per F plus one rebuild per recomputed backward, layer by layer. */
static void test_every_policy_on_every_kind(void **state) {
    (void)state;
    static const char *const texts[] = {"full",      "layers:1", "mb:0", "mb:1",
                                        "selective", "0:layers:1,1:mb:1,3:full,2:selective"};
    /* under valgrind every other kind: 1f1b, zb-h1, zbv and v-min */
    size_t first = (size_t)sweep(0, 0, 1), step = (size_t)sweep(1, 1, 2);
    for (size_t k = first; k < sizeof kinds / sizeof kinds[0]; k += step) {
        ppv_schedule *s = gen_ok(kinds[k].kind, P, M, kinds[k].v);
        ppv_run_options o = options("rendezvous", "random", 5);
        o.model.layers = 2 * s->nstages;
        ppv_run_report *stash = run_ok(s, &o);
        for (size_t t = 0; t < sizeof texts / sizeof texts[0]; t++) {
            ppv_recompute *rc = policies(texts[t], s->nstages);
            o.recompute = rc;
            ppv_run_report *rep = run_ok(s, &o);
            assert_int_equal(rep->world.status, PPV_RUN_DONE);
            assert_int_equal(rep->ngrads, stash->ngrads);
            assert_memory_equal(rep->grads, stash->grads, stash->ngrads * sizeof *stash->grads);
            for (int32_t r = 0; r < P; r++) {
                assert_int_equal(stash->peak_bytes[r], stash->predicted_bytes[r]);
                assert_int_equal(rep->peak_bytes[r], rep->predicted_bytes[r]);
                if (rep->peak_bytes[r] > stash->peak_bytes[r])
                    fprintf(stderr, "%s %s rank %d: %lld > %lld\n", kinds[k].kind, texts[t],
                            (int)r, (long long)rep->peak_bytes[r],
                            (long long)stash->peak_bytes[r]);
                assert_true(rep->peak_bytes[r] <= stash->peak_bytes[r]);
            }
            uint8_t mode[64];
            assert_true(s->nstages * s->nmb <= 64);
            ppv_recompute_modes(s, rc, mode);
            for (int32_t st = 0; st < s->nstages; st++) {
                int64_t rebuilt = 0, selective = 0;
                for (int32_t mb = 0; mb < s->nmb; mb++) {
                    uint8_t md = mode[st * s->nmb + mb];
                    int again = md != PPV_RC_NONE && md != PPV_RC_SELECTIVE;
                    rebuilt += again;
                    selective += md == PPV_RC_SELECTIVE;
                    assert_int_equal(rep->forwards[st * s->nmb + mb], 1 + again);
                }
                assert_int_equal(stash->layer_forwards[st], 2 * s->nmb);
                assert_int_equal(rep->layer_forwards[st], 2 * (s->nmb + rebuilt));
                /* a selective backward rebuilds both layers' attention cores */
                assert_int_equal(stash->core_rebuilds[st], 0);
                assert_int_equal(rep->core_rebuilds[st], 2 * selective);
                int all_selective = strcmp(texts[t], "selective") == 0 ||
                                    (strstr(texts[t], "2:selective") && st == 2);
                assert_int_equal(selective, all_selective ? s->nmb : 0);
            }
            ppv_run_report_free(rep);
            free(rc);
        }
        o.recompute = NULL;
        ppv_run_report_free(stash);
        ppv_schedule_free(s);
    }
}

/* Checkpointed layers by hand: 1F1B p=2 m=4, four layers a stage (S a
 * layer's saved tensors, W its weight state, In a stage input). The last
 * rank holds one forward at a time; its backward rebuilds the segments
 * last first, each beside the weight states of the segments after it, so
 * the peak is the first segment's rebuild: k S + 4 W (k layers a
 * segment). Rank 0 holds the next forward's checkpoints on top: 4/k In.
 * Full recompute rebuilds the whole stage: 4 S + 4 W (its input goes
 * once saved is back), rank 0 one In more. */
static void test_layer_checkpoint_peaks_by_hand(void **state) {
    (void)state;
    ppv_schedule *s = gen_ok("1f1b", 2, 4, 1);
    ppv_run_options o = options("rendezvous", "rr", 0);
    o.model.layers = 8;
    char err[256];
    int64_t S, W, In;
    layer_bytes(&o, &S, &W, &In);
    assert_true(In < W && W < S);
    static const struct {
        const char *text;
        int32_t k;
    } rows[] = {{"layers:1", 1}, {"layers:2", 2}, {"layers:4", 4}, {"full", 4}};
    for (size_t t = 0; t < sizeof rows / sizeof rows[0]; t++) {
        ppv_recompute *rc = policies(rows[t].text, 2);
        o.recompute = rc;
        ppv_run_report *rep = NULL;
        assert_int_equal(ppv_run(s, &o, &rep, err, sizeof err), 0);
        assert_int_equal(rep->world.status, PPV_RUN_DONE);
        int32_t k = rows[t].k;
        assert_int_equal(rep->peak_bytes[1], k * S + 4 * W);
        assert_int_equal(rep->peak_bytes[0], (4 / k) * In + k * S + 4 * W);
        ppv_run_report_free(rep);
        free(rc);
    }
    ppv_schedule_free(s);
}

/* Selective recompute by hand on 1F1B p=4 m=8, two layers a stage: a
 * forward keeps its saved tensors less the attention cores, the self- and
 * cross-attention outputs (T C bf16 each) and their softmax statistics
 * (2 H T fp32 each), and the input backward rebuilds one layer's cores at a
 * time beside saved and the weight state. Rank r holds p - r forwards:
 * (p - r) Ssel + W + core, with Ssel = S - 2 core for the stage's two
 * layers. Full recompute holds inputs instead, and rebuilds a whole
 * stage's saved at a backward: (p - r - 1) In + S + W. So selective sits
 * strictly between stash and full wherever a rank holds more than one
 * forward, and below both on the last rank, which holds one at a time (a
 * full rebuild there is as large as stashing). */
static void test_selective_peaks_by_hand(void **state) {
    (void)state;
    ppv_schedule *s = gen_ok("1f1b", P, M, 1);
    ppv_run_options o = options("rendezvous", "random", 9);
    o.model.layers = 2 * P;
    int64_t S1, W1, In;
    layer_bytes(&o, &S1, &W1, &In);
    const ppv_model_config *c = &o.model;
    int64_t core = 2 * (int64_t)c->seq_len * c->d_model * 2 + 2 * 2 * (int64_t)c->n_heads * c->seq_len * 4;
    int64_t S = 2 * S1, W = 2 * W1, Ssel = S - 2 * core;
    ppv_run_report *peaks[3];
    static const char *const texts[] = {"none", "selective", "full"};
    for (int t = 0; t < 3; t++) {
        ppv_recompute *rc = policies(texts[t], P);
        o.recompute = rc;
        peaks[t] = run_ok(s, &o);
        assert_int_equal(peaks[t]->world.status, PPV_RUN_DONE);
        free(rc);
    }
    assert_memory_equal(peaks[1]->grads, peaks[0]->grads, peaks[0]->ngrads * sizeof(float));
    for (int32_t r = 0; r < P; r++) {
        assert_int_equal(peaks[0]->peak_bytes[r], (P - r) * S + W);
        assert_int_equal(peaks[1]->peak_bytes[r], (P - r) * Ssel + W + core);
        assert_int_equal(peaks[2]->peak_bytes[r], (P - r - 1) * In + S + W);
        assert_true(peaks[1]->peak_bytes[r] < peaks[0]->peak_bytes[r]);
        if (r < P - 1)
            assert_true(peaks[2]->peak_bytes[r] < peaks[1]->peak_bytes[r]);
        else
            assert_true(peaks[1]->peak_bytes[r] < peaks[2]->peak_bytes[r]);
        assert_int_equal(peaks[1]->core_rebuilds[r], 2 * M);
    }
    for (int t = 0; t < 3; t++) ppv_run_report_free(peaks[t]);
    o.recompute = NULL;
    ppv_schedule_free(s);
}

/* Every kind: selective's peak is below stashing on every rank, and
 * strictly between full recompute and stashing on the rank that decides
 * whether the schedule fits (the highest stashing peak). */
static void test_selective_sits_between_stash_and_full_on_every_kind(void **state) {
    (void)state;
    /* under valgrind the kinds test_every_policy_on_every_kind leaves out
     * there: gpipe, interleaved-1f1b, zb-h2, v-half and dualpipev */
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k += (size_t)sweep(1, 1, 2)) {
        ppv_schedule *s = gen_ok(kinds[k].kind, P, M, kinds[k].v);
        ppv_run_options o = options("rendezvous", "rr", 0);
        o.model.layers = 2 * s->nstages;
        ppv_run_report *stash = run_ok(s, &o);
        ppv_recompute *sel = policies("selective", s->nstages), *full = policies("full", s->nstages);
        o.recompute = sel;
        ppv_run_report *a = run_ok(s, &o);
        o.recompute = full;
        ppv_run_report *b = run_ok(s, &o);
        int32_t top = 0;
        for (int32_t r = 0; r < P; r++) {
            assert_true(a->peak_bytes[r] < stash->peak_bytes[r]);
            if (stash->peak_bytes[r] > stash->peak_bytes[top]) top = r;
        }
        if (!(b->peak_bytes[top] < a->peak_bytes[top]))
            fprintf(stderr, "%s rank %d: full %lld, selective %lld, stash %lld\n", kinds[k].kind,
                    (int)top, (long long)b->peak_bytes[top], (long long)a->peak_bytes[top],
                    (long long)stash->peak_bytes[top]);
        assert_true(b->peak_bytes[top] < a->peak_bytes[top]);
        assert_true(a->peak_bytes[top] < stash->peak_bytes[top]);
        ppv_run_report_free(stash), ppv_run_report_free(a), ppv_run_report_free(b);
        free(sel), free(full);
        ppv_schedule_free(s);
    }
}

/* By microbatch, by hand on 1F1B p=4 m=8 with mb:1: a forward is
 * recomputed when its rank already holds a stashed one. Rank 0 (F0..F3,
 * then B and F alternating) stashes F0 and F4 and recomputes the other
 * six; rank 1 recomputes F1 F2 F4 F5 F7, rank 2 F1 F3 F5 F7, and the last
 * rank (F, B alternating) none. */
static void test_by_microbatch_recomputes_what_the_rank_holds_beyond(void **state) {
    (void)state;
    ppv_schedule *s = gen_ok("1f1b", P, M, 1);
    ppv_run_options o = options("rendezvous", "rr", 0);
    ppv_recompute *rc = policies("mb:1", P);
    o.recompute = rc;
    ppv_recompute_verdict v;
    char err[256];
    assert_int_equal(ppv_verify_recompute(s, &o, &v, err, sizeof err), 0);
    assert_true(v.diff.bitwise_equal);
    static const int again[P][M] = {{0, 1, 1, 1, 0, 1, 1, 1},
                                    {0, 1, 1, 0, 1, 1, 0, 1},
                                    {0, 1, 0, 1, 0, 1, 0, 1},
                                    {0, 0, 0, 0, 0, 0, 0, 0}};
    for (int32_t st = 0; st < P; st++)
        for (int32_t mb = 0; mb < M; mb++)
            assert_int_equal(v.recompute->forwards[st * M + mb], 1 + again[st][mb]);
    ppv_recompute_verdict_free(&v);
    free(rc);
    ppv_schedule_free(s);
}

/* --recompute's grammar and its refusals. */
static void test_recompute_policies_parse_and_refuse(void **state) {
    (void)state;
    ppv_recompute rc[4];
    char err[256];
    assert_int_equal(ppv_recompute_parse("layers:2,1:full,3:mb:1,2:none", 4, rc, err, sizeof err), 0);
    assert_int_equal(rc[0].kind, PPV_RC_LAYERS);
    assert_int_equal(rc[0].k, 2);
    assert_int_equal(rc[1].kind, PPV_RC_FULL);
    assert_int_equal(rc[2].kind, PPV_RC_NONE);
    assert_int_equal(rc[3].kind, PPV_RC_MB);
    assert_int_equal(rc[3].k, 1);
    assert_int_equal(ppv_recompute_parse("0,2", 4, rc, err, sizeof err), 0);
    assert_int_equal(rc[0].kind, PPV_RC_FULL);
    assert_int_equal(rc[1].kind, PPV_RC_NONE);
    assert_int_equal(rc[2].kind, PPV_RC_FULL);
    assert_int_equal(ppv_recompute_parse("all", 4, rc, err, sizeof err), 0);
    assert_int_equal(rc[3].kind, PPV_RC_FULL);
    assert_int_equal(ppv_recompute_parse("full,1:selective", 4, rc, err, sizeof err), 0);
    assert_int_equal(rc[0].kind, PPV_RC_FULL);
    assert_int_equal(rc[1].kind, PPV_RC_SELECTIVE);
    static const struct {
        const char *text, *why;
    } bad[] = {{"layers:0", "'layers:0': layers needs a count of 1 or more layers a segment"},
               {"mb", "'mb': mb needs a count of 0 or more forwards"},
               {"4", "'4': the schedule's stages are 0..3"},
               {"1:sometimes",
                "'1:sometimes': a policy is none, full, selective (rebuild the attention cores), "
                "layers:K"},
               {"full:2", "'full:2': full takes no count"},
               {"selective:1", "'selective:1': selective takes no count"},
               {"2x", "'2x' is not STAGE, STAGE:POLICY or POLICY"},
               {"", "'': an empty list"}};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        assert_int_equal(ppv_recompute_parse(bad[k].text, 4, rc, err, sizeof err), -1);
        if (!strstr(err, bad[k].why)) fprintf(stderr, "got: %s\n", err);
        assert_non_null(strstr(err, bad[k].why));
    }
}

static void test_a_perturbed_recompute_path_is_reported_exactly(void **state) {
    (void)state;
    ppv_schedule *s = gen_ok("zbv", P, M, 2);
    ppv_run_options o = options("rendezvous", "rr", 0);
    o.perturb = 1;
    ppv_recompute_verdict v;
    char err[256];
    assert_int_equal(ppv_verify_recompute(s, &o, &v, err, sizeof err), 0);
    assert_false(v.diff.bitwise_equal);
    assert_int_equal(v.diff.max_ulp, 1);
    assert_int_equal(v.diff.first_index, 0);
    assert_int_equal(v.first_layer, 0);
    assert_string_equal(v.first_tensor, "ada_w");
    assert_int_equal(v.first_tensor_index, 0);
    float a = v.recompute->grads[0], b = v.stash->grads[0];
    assert_true(a == v.diff.first_a && b == v.diff.first_b);
    assert_true(nextafterf(b, a) == a); /* one step apart */
    assert_true(v.diff.max_abs == fabs((double)a - (double)b));
    assert_true(v.diff.max_rel == fabs((double)a - (double)b) / fabs((double)b));
    /* everything after the first gradient is untouched */
    assert_memory_equal(v.recompute->grads + 1, v.stash->grads + 1,
                        (v.stash->ngrads - 1) * sizeof(float));
    ppv_recompute_verdict_free(&v);
    ppv_schedule_free(s);
}

static void test_gradient_comparison_measures_ulps_across_signs(void **state) {
    (void)state;
    float a[5] = {1.0f, 0.0f, -1.0f, 3.0f, 2.0f};
    float b[5] = {1.0f, -0.0f, 1.0f, 3.0f, 2.0f};
    ppv_grad_diff d;
    ppv_grads_compare(a, b, 5, &d);
    assert_false(d.bitwise_equal); /* +0 and -0 differ bit for bit */
    assert_int_equal(d.first_index, 1);
    assert_int_equal(d.max_ulp, 2ull * 0x3f800000u); /* -1 to +1 through zero */
    assert_true(d.max_abs == 2.0);
    assert_true(d.max_rel == 2.0);
    a[1] = 0.0f, b[1] = 0.0f, a[2] = nextafterf(1.0f, 2.0f);
    ppv_grads_compare(a, b, 5, &d);
    assert_int_equal(d.first_index, 2);
    assert_int_equal(d.max_ulp, 1);
    ppv_grads_compare(b, b, 5, &d);
    assert_true(d.bitwise_equal);
    assert_int_equal(d.first_index, -1);
    assert_int_equal(d.max_ulp, 0);
}

/* Writes a run's trace to a temporary file and reads its decisions back. */
static int32_t *trace_round_trip(const ppv_run_report *rep, int64_t *n) {
    char *path = tmp_path("traceXXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_int_equal(ppv_trace_write(f, rep->trace), 0);
    fclose(f);
    int32_t *dec = NULL, nranks = 0;
    char err[256];
    assert_int_equal(ppv_trace_read(path, INT64_MAX, &dec, n, &nranks, err, sizeof err), 0);
    assert_int_equal(nranks, rep->nranks);
    unlink(path);
    return dec;
}

static void test_runs_repeat_and_replay_bit_for_bit(void **state) {
    (void)state;
    ppv_schedule *s = gen_ok("interleaved-1f1b", P, M, 2);
    ppv_run_options o = options("eager", "pct", 42);
    ppv_run_report *a = run_ok(s, &o), *b = run_ok(s, &o);
    assert_int_equal(a->world.status, PPV_RUN_DONE);
    assert_int_equal(a->world.trace_digest, b->world.trace_digest);
    assert_int_equal(a->world.steps, b->world.steps);
    assert_int_equal(a->grad_digest, b->grad_digest);
    assert_true(a->loss == b->loss);

    int64_t n;
    int32_t *dec = trace_round_trip(a, &n);
    assert_int_equal(n, a->world.steps);
    ppv_run_options r = o;
    r.policy.kind = PPV_POLICY_REPLAY;
    r.policy.replay = dec;
    r.policy.nreplay = n;
    ppv_run_report *c = run_ok(s, &r);
    assert_int_equal(c->world.status, PPV_RUN_DONE);
    assert_int_equal(c->world.trace_digest, a->world.trace_digest);
    assert_int_equal(c->grad_digest, a->grad_digest);

    /* other seeds interleave differently and still give the same gradients */
    int differs = 0;
    for (uint64_t seed = 1; seed <= 4; seed++) {
        ppv_run_options q = options("eager", "random", seed);
        ppv_run_report *d = run_ok(s, &q);
        differs += d->world.trace_digest != a->world.trace_digest;
        assert_int_equal(d->grad_digest, a->grad_digest);
        ppv_run_report_free(d);
    }
    assert_int_equal(differs, 4);

    /* a trace cut short no longer describes the run: replay says so */
    r.policy.nreplay = n / 2;
    ppv_run_report *e = run_ok(s, &r);
    assert_int_equal(e->world.status, PPV_RUN_FAILED);
    assert_non_null(strstr(e->world.message, "trace ends after"));
    free(dec);
    ppv_run_report_free(a);
    ppv_run_report_free(b);
    ppv_run_report_free(c);
    ppv_run_report_free(e);
    ppv_schedule_free(s);
}

/* Distinct values among the first n of v. */
static int distinct(const uint64_t *v, int n) {
    int d = 0;
    for (int i = 0; i < n; i++) {
        int seen = 0;
        for (int j = 0; j < i && !seen; j++) seen = v[j] == v[i];
        d += !seen;
    }
    return d;
}

/* PCT draws its depth-1 change points over the run actually taken (its
 * length measured first), so they fire; and the seed orders the ranks.
 * (Drawn over a fixed 1..1000 while 1F1B p=4 m=8 takes 148 steps, most
 * never fired and PCT gave 28 distinct interleavings in 50 seeds.) */
static void test_pct_and_random_change_order_with_the_seed(void **state) {
    (void)state;
    enum { SEEDS = 20 };
    ppv_schedule *s = gen_ok("1f1b", 4, 8, 0);
    uint64_t d3[SEEDS], d1[SEEDS], dr[SEEDS], grads = 0;
    /* the order is the schedule's, not the model's: a small model (one
     * layer a stage, width 16) keeps the 60 runs short under valgrind */
    ppv_model_config small = ppv_model_config_default();
    small.layers = 4;
    small.d_model = 16;
    small.n_heads = 2;
    small.d_ff = 32;
    small.seq_len = 4;
    small.cond_len = 4;
    for (int seed = 0; seed < SEEDS; seed++) {
        ppv_run_options o = options("rendezvous", "pct:3", (uint64_t)seed);
        o.model = small;
        ppv_run_report *rep = run_ok(s, &o);
        assert_int_equal(rep->world.status, PPV_RUN_DONE);
        assert_int_equal(rep->pct_steps, 148); /* the round-robin run's length */
        assert_int_equal(rep->world.pct_fired, 2);
        d3[seed] = rep->world.trace_digest;
        if (seed == 0) grads = rep->grad_digest;
        assert_true(rep->grad_digest == grads); /* interleavings change no bit */
        ppv_run_report_free(rep);
        o = options("rendezvous", "pct:1", (uint64_t)seed); /* priorities alone */
        o.model = small;
        rep = run_ok(s, &o);
        assert_int_equal(rep->world.pct_fired, 0);
        d1[seed] = rep->world.trace_digest;
        ppv_run_report_free(rep);
        o = options("rendezvous", "random", (uint64_t)seed);
        o.model = small;
        rep = run_ok(s, &o);
        assert_int_equal(rep->pct_steps, 0);
        dr[seed] = rep->world.trace_digest;
        ppv_run_report_free(rep);
    }
    assert_int_equal(distinct(dr, SEEDS), SEEDS); /* random: the seed is the order */
    /* without change points PCT is one of 4! priority orders, which the seed picks */
    assert_true(distinct(d1, SEEDS) > 8 && distinct(d1, SEEDS) <= 24);
    assert_int_equal(distinct(d3, SEEDS), SEEDS);
    ppv_schedule_free(s);
}

static void test_rendezvous_deadlock_is_reported_and_eager_completes(void **state) {
    (void)state;
    ppv_schedule *s = load_ok(data_path("rendezvous_only_train.csv"));
    /* messages are seq_len * d_model bf16 values: 8 * 32 * 2 = 512 bytes */
    static const struct {
        const char *sem;
        ppv_run_status want;
    } cases[] = {{"rendezvous", PPV_RUN_DEADLOCK},
                 {"eager:511", PPV_RUN_DEADLOCK},
                 {"eager:512", PPV_RUN_DONE},
                 {"eager", PPV_RUN_DONE}};
    for (int k = 0; k < 4; k++)
        for (uint64_t seed = 0; seed < 3; seed++) {
            ppv_run_options o = options(cases[k].sem, seed ? "random" : "rr", seed);
            ppv_run_report *rep = run_ok(s, &o);
            assert_int_equal(rep->world.status, cases[k].want);
            if (cases[k].want == PPV_RUN_DEADLOCK) {
                assert_int_equal(rep->world.ncycle, 2);
                assert_int_equal(rep->world.nblocked, 2);
                assert_int_equal(rep->world.cycle[0].rank, 0);
                assert_string_equal(rep->world.cycle[0].action, "0SEND_F1");
                assert_int_equal(rep->world.cycle[0].waits_for, 1);
                assert_int_equal(rep->world.cycle[1].rank, 1);
                assert_string_equal(rep->world.cycle[1].action, "1SEND_F0");
                assert_int_equal(rep->world.cycle[1].waits_for, 0);
                assert_null(rep->grads);
            } else {
                assert_non_null(rep->grads);
                assert_int_equal(rep->peak_bytes[0], rep->predicted_bytes[0]);
            }
            ppv_run_report_free(rep);
        }
    ppv_schedule_free(s);
}

static void test_a_compute_order_cycle_is_reported_before_running(void **state) {
    (void)state;
    ppv_schedule *s = load_ok(data_path("dependency_cycle.csv"));
    ppv_run_options o = options("eager", "rr", 0);
    ppv_run_report *rep = run_ok(s, &o);
    assert_int_equal(rep->world.status, PPV_RUN_DEADLOCK);
    assert_int_equal(rep->world.steps, 0);
    assert_int_equal(rep->world.ncycle, 2);
    assert_string_equal(rep->world.cycle[0].action, "0B0");
    assert_string_equal(rep->world.cycle[1].action, "1F1");
    ppv_run_report_free(rep);
    ppv_schedule_free(s);
}

static void test_schedules_that_cannot_train_are_refused(void **state) {
    (void)state;
    ppv_run_options o = options("eager", "rr", 0);
    ppv_run_report *rep = NULL;
    char err[512] = "";
    ppv_schedule *s = load_ok(data_path("rendezvous_only.csv")); /* forwards only */
    assert_int_equal(ppv_run(s, &o, &rep, err, sizeof err), -1);
    assert_null(rep);
    assert_non_null(strstr(err, "stage 0 microbatch 0 has no backward (B or I)"));
    ppv_schedule_free(s);
    s = load_ok(data_path("count_errors.csv"));
    assert_int_equal(ppv_run(s, &o, &rep, err, sizeof err), -1);
    assert_null(rep);
    assert_non_null(strstr(err, "run 'ppv check' for every error"));
    ppv_schedule_free(s);
}

/* The evidence verify-recompute reports comes from the runs' own counters,
 * checked against the schedule: exact on 1F1B p=2 m=4 (stage 0 selective,
 * stage 1 full), and each counter or peak doctored by one is refused. */
static void test_recompute_evidence_rejects_doctored_counters(void **state) {
    (void)state;
    ppv_schedule *s = gen_ok("1f1b", 2, 4, 1);
    ppv_run_options o = options("rendezvous", "rr", 0);
    o.model.layers = 4; /* two a stage */
    ppv_recompute rc[3] = {{PPV_RC_SELECTIVE, 0}, {PPV_RC_FULL, 0}, {0, 0}};
    o.recompute = rc;
    char err[256];
    ppv_recompute_verdict v;
    assert_int_equal(ppv_verify_recompute(s, &o, &v, err, sizeof err), 0);
    const ppv_recompute_evidence *e = &v.evidence;
    assert_int_equal(e->want_stash_forwards, 8);      /* 2 stages x 4 microbatches */
    assert_int_equal(e->want_recompute_forwards, 12); /* + stage 1's 4 backwards */
    assert_int_equal(e->want_core_rebuilds, 8);       /* stage 0: 4 backwards x 2 layers */
    assert_int_equal(e->stash_forwards, 8);
    assert_int_equal(e->recompute_forwards, 12);
    assert_int_equal(e->core_rebuilds, 8);
    assert_int_equal(e->stash_layer_forwards, 16);
    assert_int_equal(e->recompute_layer_forwards, 24);
    assert_true(e->extra_forward_units == 4.0);
    assert_true(e->forwards_ok && e->peaks_ok);

    ppv_recompute_evidence ev;
#define DOCTORED(counter)                                                                          \
    do {                                                                                           \
        (counter) += 1;                                                                            \
        assert_int_equal(ppv_recompute_evidence_of(s, rc, v.stash, v.recompute, &ev), 0);          \
        assert_false(ev.forwards_ok);                                                              \
        assert_true(ev.peaks_ok);                                                                  \
        (counter) -= 1;                                                                            \
    } while (0)
    DOCTORED(v.stash->forwards[1]);
    DOCTORED(v.recompute->forwards[5]);
    DOCTORED(v.recompute->core_rebuilds[0]);
    DOCTORED(v.stash->core_rebuilds[1]);
#undef DOCTORED
    for (int32_t r = 0; r < 2; r++) {
        v.recompute->peak_bytes[r] += 1;
        assert_int_equal(ppv_recompute_evidence_of(s, rc, v.stash, v.recompute, &ev), 0);
        assert_true(ev.forwards_ok);
        assert_false(ev.peaks_ok);
        v.recompute->peak_bytes[r] -= 1;
        v.stash->predicted_bytes[r] += 1;
        assert_int_equal(ppv_recompute_evidence_of(s, rc, v.stash, v.recompute, &ev), 0);
        assert_false(ev.peaks_ok);
        v.stash->predicted_bytes[r] -= 1;
    }
    /* read against another policy, the same runs are not what it implies */
    ppv_recompute full[3] = {{PPV_RC_FULL, 0}, {PPV_RC_FULL, 0}, {0, 0}};
    assert_int_equal(ppv_recompute_evidence_of(s, full, v.stash, v.recompute, &ev), 0);
    assert_int_equal(ev.want_recompute_forwards, 16);
    assert_false(ev.forwards_ok);
    ppv_schedule *other = gen_ok("1f1b", 2, 2, 1); /* runs of another schedule */
    assert_int_equal(ppv_recompute_evidence_of(other, rc, v.stash, v.recompute, &ev), -1);
    ppv_schedule_free(other);
    v.recompute->world.status = PPV_RUN_DEADLOCK;
    assert_int_equal(ppv_recompute_evidence_of(s, rc, v.stash, v.recompute, &ev), -1);
    assert_false(ev.forwards_ok);
    ppv_recompute_verdict_free(&v);
    ppv_schedule_free(s);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_kind_under_every_policy_matches_the_reference),
        cmocka_unit_test(test_lowered_comms_files_run_like_their_compute_only_form),
        cmocka_unit_test(test_unequal_and_single_layer_stages_still_match),
        cmocka_unit_test(test_out_of_order_backwards_sum_in_microbatch_order),
        cmocka_unit_test(test_peak_bytes_follow_the_1f1b_formula_with_and_without_recompute),
        cmocka_unit_test(test_peak_bytes_follow_the_zb_h1_formula),
        cmocka_unit_test(test_peak_bytes_follow_the_zbv_formula),
        cmocka_unit_test(test_recompute_equals_stash_for_every_kind_and_some_stages),
        cmocka_unit_test(test_every_policy_on_every_kind),
        cmocka_unit_test(test_layer_checkpoint_peaks_by_hand),
        cmocka_unit_test(test_by_microbatch_recomputes_what_the_rank_holds_beyond),
        cmocka_unit_test(test_recompute_policies_parse_and_refuse),
        cmocka_unit_test(test_recompute_evidence_rejects_doctored_counters),
        cmocka_unit_test(test_selective_peaks_by_hand),
        cmocka_unit_test(test_selective_sits_between_stash_and_full_on_every_kind),
        cmocka_unit_test(test_a_perturbed_recompute_path_is_reported_exactly),
        cmocka_unit_test(test_gradient_comparison_measures_ulps_across_signs),
        cmocka_unit_test(test_runs_repeat_and_replay_bit_for_bit),
        cmocka_unit_test(test_pct_and_random_change_order_with_the_seed),
        cmocka_unit_test(test_rendezvous_deadlock_is_reported_and_eager_completes),
        cmocka_unit_test(test_a_compute_order_cycle_is_reported_before_running),
        cmocka_unit_test(test_schedules_that_cannot_train_are_refused),
    };
    return cmocka_run_group_tests(tests, NULL, tmp_cleanup);
}
