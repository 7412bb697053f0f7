/* test_pp_memory.c - the inference pipeline's byte accounting (ppv pp's
 * memory lines), the prediction (--plan) and the cap (--mem-cap).
 *
 * The expected bytes come from the tensors' shapes, computed here: a
 * chunk's latents, the conditioning, the step list and the context frames,
 * the built-in generator's weight list, cache and working block as the
 * kernels lay them out. A run's measure must equal them, and the plan must
 * equal the run, row for row, in every configuration below. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ppv_engine.h"
#include "testutil.h"

/* ---- the shapes, computed here -------------------------------------------------- */

typedef struct shapes {
    uint64_t frame, latents, cond, steps; /* bytes */
    int64_t tpf;                           /* tokens a latent frame */
} shapes;

static shapes shapes_of(const ppv_pp_options *o) {
    shapes s;
    s.frame = 16 * (uint64_t)(o->height / 8) * (uint64_t)(o->width / 8) * 2; /* bf16 */
    s.latents = 3 * s.frame;
    s.cond = (uint64_t)o->cond_len * (uint64_t)o->model.cond_dim * 2;
    s.steps = (uint64_t)o->steps * 8; /* int64 */
    s.tpf = (int64_t)(o->height / 16) * (o->width / 16);
    return s;
}

/* The built-in's weights: 8 weight matrices and their biases a layer, the
 * patch embedding and its inverse; fp32. */
static uint64_t builtin_weights(const ppv_gen_config *g) {
    uint64_t C = (uint64_t)g->d_model, D = (uint64_t)g->cond_dim, F = (uint64_t)g->d_ff;
    uint64_t layer = (6 * C * C + 6 * C) + (3 * C * C + 3 * C) + (C * C + C) + (C * C + C) +
                     (2 * C * D + 2 * C) + (C * C + C) + (F * C + F) + (C * F + C);
    uint64_t embed = (C * 64 + C) + (64 * C + 64);
    return 4 * (layer * (uint64_t)g->layers + embed);
}

/* One mesh rank's cache: K and V, every layer, the window of its heads. */
static uint64_t builtin_kv(const ppv_gen_config *g, int32_t mesh, int32_t window, int64_t tpf) {
    return 4 * 2 * (uint64_t)g->layers * (uint64_t)window * (uint64_t)tpf *
           (uint64_t)(g->d_model / mesh);
}

/* One call's working block, field by field (kernels/dit.c's CALL_WORK). */
static uint64_t builtin_work(const ppv_gen_config *g, int32_t mesh, int64_t tpf, int32_t frames,
                             int32_t cached, int32_t cond_len) {
    uint64_t M = (uint64_t)(frames * tpf), C = (uint64_t)g->d_model, H = (uint64_t)g->n_heads;
    uint64_t heads = H / (uint64_t)mesh, hd = C / H, W = heads * hd;
    uint64_t FW = heads * ((uint64_t)g->d_ff / H), Tc = (uint64_t)cond_len;
    uint64_t D = (uint64_t)g->cond_dim, Nc = (uint64_t)(cached * tpf);
    uint64_t f = M * 64 + M * C + M * C + M * W + M * W + M * C + M + M + C + 6 * C + Tc * D +
                 Tc * W + Tc * W + M * FW + heads * M * C + (mesh > 1 ? H * M * C : 0) +
                 (uint64_t)g->layers * 2 * M * W + M * 64 + (Nc + M > Tc ? Nc + M : Tc);
    return 4 * f;
}

static ppv_pp_report *run(const ppv_pp_options *o) {
    ppv_pp_report *r = NULL;
    char err[512];
    if (ppv_pp_run(o, &r, err, sizeof err) != 0) fail_msg("ppv_pp_run: %s", err);
    assert_true(r->ok);
    assert_non_null(r->mem);
    assert_int_equal(r->nmem, 2 + o->mesh);
    return r;
}

/* The plan equals the run, row for row (the link: the run within the bound). */
static void plan_equals_run(const ppv_pp_options *o, const ppv_pp_report *r) {
    ppv_pp_plan p;
    char err[512];
    if (ppv_pp_plan_run(o, 0, &p, err, sizeof err) != 0) fail_msg("plan: %s", err);
    assert_int_equal(p.nmem, r->nmem);
    for (int32_t k = 0; k + 1 < r->nmem; k++) {
        const ppv_pp_mem_row *a = &r->mem[k], *b = &p.mem[k];
        if (a->peak != b->peak || a->peak_chunk != b->peak_chunk ||
            a->peak_call_id != b->peak_call_id || a->peak_phase != b->peak_phase ||
            memcmp(a->at_peak, b->at_peak, sizeof a->at_peak) != 0)
            fail_msg("mesh %d d_in %d d_out %d kv %d cuts %d: row %d measured %llu at chunk %lld "
                     "(%s), planned %llu at chunk %lld (%s)",
                     o->mesh, o->d_in, o->d_out, o->kv_recompute, o->ncuts, k,
                     (unsigned long long)a->peak, (long long)a->peak_chunk,
                     ppv_pp_phase_name(a->peak_phase), (unsigned long long)b->peak,
                     (long long)b->peak_chunk, ppv_pp_phase_name(b->peak_phase));
        assert_int_equal(a->total, 0); /* every buffer given back */
    }
    assert_true(r->mem[r->nmem - 1].peak <= p.mem[p.nmem - 1].peak);
    assert_int_equal(r->mem[r->nmem - 1].total, 0);
    ppv_pp_plan_free(&p);
}

/* Stash, no cut: stage 0 holds D_in + 1 envelopes and a result (D_out 2 or
 * more: it sends once more after a receive), or D_in and a result (D_out
 * 1); the leader one envelope, its three chunk buffers, its result cache,
 * the generator's weights and cache, and the working block of a step with
 * the window full, first at chunk window/3. */
static void test_measured_bytes_are_the_shapes(void **state) {
    (void)state;
    static const int32_t meshes[] = {1, 2, 4}, depths[] = {1, 2, 4};
    for (size_t a = 0; a < 3; a++)
        for (size_t b = 0; b < 3; b++)
            for (int d_out1 = 0; d_out1 < 2; d_out1++) {
                ppv_pp_options o = ppv_pp_defaults();
                o.mesh = meshes[a];
                o.d_in = depths[b];
                o.d_out = d_out1 ? 1 : depths[b];
                o.chunks = 9;
                shapes s = shapes_of(&o);
                uint64_t E = s.latents + s.cond + s.steps, R = s.latents;
                ppv_pp_report *r = run(&o);
                int32_t held = o.d_out >= 2 ? o.d_in + 1 : o.d_in;
                assert_int_equal(r->mem[0].peak, (uint64_t)held * E + R);
                assert_int_equal(r->mem[0].at_peak[PPV_MEM_ENVELOPES], (uint64_t)held * E);
                assert_int_equal(r->mem[0].at_peak[PPV_MEM_RESULTS], R);
                uint64_t gen = builtin_weights(&o.model) +
                               builtin_kv(&o.model, o.mesh, o.kv_window, s.tpf) +
                               builtin_work(&o.model, o.mesh, s.tpf, 3, o.kv_window, o.cond_len);
                for (int32_t k = 1; k <= o.mesh; k++) {
                    uint64_t want = E + 3 * R + (k == 1 ? R : 0) + gen;
                    assert_int_equal(r->mem[k].peak, want);
                    assert_int_equal(r->mem[k].peak_chunk, o.kv_window / 3);
                    assert_int_equal(r->mem[k].at_peak[PPV_MEM_WORKING],
                                     builtin_work(&o.model, o.mesh, s.tpf, 3, o.kv_window,
                                                  o.cond_len));
                }
                plan_equals_run(&o, r);
                ppv_pp_report_free(r);
            }
}

/* Recompute every chunk: each envelope after the first waits for every
 * result before it, so stage 0 holds one envelope (the window of context
 * frames at most), its result and the context buffer. */
static void test_recompute_holds_one_envelope_with_its_context(void **state) {
    (void)state;
    for (int32_t mesh = 1; mesh <= 4; mesh *= 2) {
        ppv_pp_options o = ppv_pp_defaults();
        o.mesh = mesh;
        o.kv_recompute = 1;
        o.chunks = 6;
        shapes s = shapes_of(&o);
        uint64_t ctx = (uint64_t)o.kv_window * s.frame;
        uint64_t E = s.latents + s.cond + s.steps + ctx, R = s.latents;
        ppv_pp_report *r = run(&o);
        assert_int_equal(r->mem[0].peak, ctx + E + R);
        assert_int_equal(r->mem[0].at_peak[PPV_MEM_CONTEXT], ctx);
        assert_int_equal(r->mem[0].peak_chunk, o.kv_window / 3); /* the first with the window full */
        plan_equals_run(&o, r);
        ppv_pp_report_free(r);
    }
}

/* The plan equals the run under cuts, cadences and depths, and on the
 * control plane alone (no generator: ppv's buffers only). */
static void test_plan_equals_run_everywhere(void **state) {
    (void)state;
    for (int32_t mesh = 1; mesh <= 4; mesh *= 2)
        for (int32_t d = 1; d <= 4; d *= 2)
            for (int kv = 0; kv < 3; kv++)
                for (int cut = 0; cut < 2; cut++)
                    for (int ctl = 0; ctl < 2; ctl++) {
                        ppv_pp_options o = ppv_pp_defaults();
                        o.mesh = mesh;
                        o.d_in = o.d_out = d;
                        o.kv_recompute = kv > 0;
                        o.recompute_every = kv == 2 ? 2 : 1;
                        o.chunks = 9;
                        o.control_only = ctl;
                        if (cut) {
                            o.cuts[0] = 3;
                            o.cuts[1] = 5;
                            o.ncuts = 2;
                        }
                        ppv_pp_report *r = run(&o);
                        plan_equals_run(&o, r);
                        if (ctl) assert_int_equal(r->mem[1].at_peak[PPV_MEM_WEIGHTS], 0);
                        ppv_pp_report_free(r);
                    }
}

/* A cut right after chunk 0: the new epoch fills its queues before its
 * first decode, and the peak is there. */
static void test_the_peak_names_its_phase(void **state) {
    (void)state;
    ppv_pp_options o = ppv_pp_defaults();
    o.cuts[0] = 1;
    o.ncuts = 1;
    ppv_pp_report *r = run(&o);
    assert_int_equal(r->mem[0].peak_chunk, 3);
    assert_int_equal(r->mem[0].peak_call_id, 3);
    assert_int_equal(r->mem[0].peak_phase, PPV_PHASE_NEW_EPOCH);
    assert_string_equal(ppv_pp_phase_name(r->mem[1].peak_phase), "new-epoch");
    ppv_pp_report_free(r);
    o = ppv_pp_defaults(); /* without a cut: the end of warm-up */
    r = run(&o);
    assert_int_equal(r->mem[0].peak_chunk, 2);
    assert_int_equal(r->mem[0].peak_phase, PPV_PHASE_WARMUP);
    ppv_pp_report_free(r);
}

/* The timeline: every change, ending at nothing held; the seeded bug that
 * keeps every result grows by one result a chunk. */
static void test_a_result_never_freed_grows_with_the_chunks(void **state) {
    (void)state;
    uint64_t peak[2], end[2];
    for (int i = 0; i < 2; i++) {
        ppv_pp_options o = ppv_pp_defaults();
        o.chunks = 4 + 4 * i;
        o.bug = PPV_PP_BUG_RESULTS_KEPT;
        o.mem_timeline = 1;
        ppv_pp_report *r = run(&o);
        peak[i] = r->mem[0].peak;
        end[i] = r->mem[0].total;
        const ppv_pp_mem_row *s0 = &r->mem[0];
        assert_true(s0->ntimeline > 0);
        assert_int_equal(s0->timeline[s0->ntimeline - 1].bytes, s0->total);
        ppv_pp_report_free(r);
    }
    shapes s = shapes_of(&(ppv_pp_options){.height = 32, .width = 32, .cond_len = 4, .steps = 4});
    assert_int_equal(end[0], 4 * s.latents);
    assert_int_equal(end[1], 8 * s.latents);
    assert_int_equal(peak[1] - peak[0], 4 * s.latents);
    /* from the command line: named, exit 1 */
    run_result c = RUN("pp", "--seed-bug", "results-kept", "--chunks", "4");
    assert_int_equal(c.code, 1);
    assert_non_null(strstr(c.out, "memory: rank 0 (stage 0) still holds 6144 bytes at the end of "
                                  "the run (results 6144): a buffer that is never given back"));
    assert_non_null(strstr(c.out, "\nresult: PROBLEM\n"));
    run_free(&c);
    ppv_pp_options o = ppv_pp_defaults(); /* the reference gives everything back */
    o.mem_timeline = 1;
    ppv_pp_report *r = run(&o);
    for (int32_t k = 0; k < r->nmem; k++) {
        assert_int_equal(r->mem[k].total, 0);
        assert_int_equal(r->mem[k].timeline[r->mem[k].ntimeline - 1].bytes, 0);
    }
    ppv_pp_report_free(r);
}

/* --mem-cap: the first rank over, by how much, when and what it held. */
static void test_the_cap_names_rank_chunk_and_phase(void **state) {
    (void)state;
    /* defaults: stage 0 7008 bytes, the leader 210960, a worker 209424 */
    run_result r = RUN("pp", "--mem-cap", "210000");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "\nmemory: rank 1 (leader) peaks at 210960 bytes (206.0 KiB), "
                                  "960 bytes over its cap of 210000 (205.1 KiB), at chunk 2, "
                                  "call_id 2 (warm-up): it held envelopes 1824, buffers 4608, "
                                  "result_cache 1536, weights 168576, kv_cache 6144, working "
                                  "28272\nresult: PROBLEM\n"));
    run_free(&r);
    r = RUN("pp", "--mem-cap", "211000");
    assert_int_equal(r.code, 0);
    run_free(&r);
    /* one cap a rank: stage 0's own */
    r = RUN("pp", "--plan", "--mem-cap", "7007,1M");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "memory: rank 0 (stage 0) peaks at 7008 bytes (6.8 KiB), 1 "
                                  "bytes over its cap of 7007"));
    run_free(&r);
    r = RUN("pp", "--plan", "--mem-cap", "7008,1M", "--json");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "\"over_mem_cap\":null"));
    run_free(&r);
    r = RUN("pp", "--mem-cap", "1M", "--compare-kv");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--mem-cap gates one run or --plan: not with --compare-kv"));
    run_free(&r);
    r = RUN("pp", "--model", "layers=4");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--model describes a model for --plan"));
    run_free(&r);
    r = RUN("pp", "--plan", "--poll");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--plan predicts the pipeline's own moves"));
    run_free(&r);
}

/* A plug-in that reports its bytes: the plan and a run agree on them. */
static void test_plan_and_run_agree_on_a_plugin(void **state) {
    (void)state;
    const ppv_generator *g = NULL;
    char err[512];
    g = ppv_generator_open(PPV_TP_MLP, err, sizeof err);
    if (!g) fail_msg("%s", err);
    for (int32_t mesh = 1; mesh <= 4; mesh *= 2) {
        ppv_pp_options o = ppv_pp_defaults();
        o.generator = g;
        o.mesh = mesh;
        o.kv_recompute = 1;
        o.cuts[0] = 3;
        o.ncuts = 1;
        ppv_pp_report *r = run(&o);
        plan_equals_run(&o, r);
        /* tp-mlp's defaults: 64 hidden units, 4 blocks; its weights whole */
        assert_int_equal(r->mem[1].at_peak[PPV_MEM_WEIGHTS], (2 * 64 * 16 + 2 * 64) * 4);
        assert_int_equal(r->mem[1].at_peak[PPV_MEM_KV_CACHE], (uint64_t)o.kv_window * 16 * 4);
        ppv_pp_report_free(r);
    }
}

/* --model: the built-in's architecture at the pilot's sizes, in bf16:
 * the weights, the cache and the boundary tensors of the reference's
 * 320x576 frames (276,480 bytes of latents). */
static void test_plan_at_the_pilot_sizes(void **state) {
    (void)state;
    run_result r = RUN("pp", "--plan", "--frame", "320x576", "--mesh", "4", "--model",
                       data_path("../../examples/models/dit-40-blocks.txt"), "--json");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "\"result_bytes\":276480"));
    /* latents + 512 x 4096 bf16 conditioning + 4 int64 steps */
    assert_non_null(strstr(r.out, "\"envelope_bytes\":4470816"));
    run_free(&r);
    ppv_pp_options o = ppv_pp_defaults();
    o.height = 320;
    o.width = 576;
    o.mesh = 4;
    o.model = (ppv_gen_config){.layers = 40, .d_model = 5120, .n_heads = 40, .d_ff = 13840,
                               .cond_dim = 4096, .seed = 1};
    o.cond_len = 512;
    ppv_pp_plan p;
    char err[512];
    if (ppv_pp_plan_run(&o, 2, &p, err, sizeof err) != 0) fail_msg("plan: %s", err);
    shapes s = shapes_of(&o);
    assert_int_equal(p.mem[1].at_peak[PPV_MEM_WEIGHTS], builtin_weights(&o.model) / 2);
    assert_int_equal(p.mem[1].at_peak[PPV_MEM_KV_CACHE],
                     builtin_kv(&o.model, 4, o.kv_window, s.tpf) / 2);
    ppv_pp_plan_free(&p);
}

/* --sweep: one run a depth, stage 0's peak (D+1) E + R (D 1: D_out 1,
 * so D E + R); --compare-kv: each policy's peaks, recompute's with its
 * context (30 frames kept, 15 sent with the last chunk). */
static void test_sweep_and_compare_report_bytes(void **state) {
    (void)state;
    ppv_pp_options o = ppv_pp_defaults();
    shapes s = shapes_of(&o);
    uint64_t E = s.latents + s.cond + s.steps, R = s.latents;
    run_result r = RUN("pp", "--sweep", "d=1,2,4");
    assert_int_equal(r.code, 0);
    char want[256];
    snprintf(want, sizeof want, "\n     1            -              - %llu 210960 209424\n",
             (unsigned long long)(E + R));
    assert_non_null(strstr(r.out, want));
    snprintf(want, sizeof want, "\n     4            -              - %llu 210960 209424\n",
             (unsigned long long)(5 * E + R));
    assert_non_null(strstr(r.out, want));
    run_free(&r);
    r = RUN("pp", "--sweep", "d=1,4", "--mem-cap", "5K,1M");
    assert_int_equal(r.code, 1); /* D 4's stage 0 passes 5 KiB */
    snprintf(want, sizeof want, "\n     4            -              - %llu 210960 209424  over "
             "--mem-cap\n", (unsigned long long)(5 * E + R));
    assert_non_null(strstr(r.out, want));
    assert_non_null(strstr(r.out, "\nresult: PROBLEM\n"));
    run_free(&r);
    r = RUN("pp", "--compare-kv", "--kv-window", "30", "--chunks", "6");
    assert_int_equal(r.code, 0);
    snprintf(want, sizeof want, "\nstash: 24 generator calls, 764 us of virtual time, peak bytes "
             "by rank %llu ", (unsigned long long)(3 * E + R));
    assert_non_null(strstr(r.out, want));
    uint64_t ctx = 30 * s.frame, last = E + 15 * s.frame;
    snprintf(want, sizeof want, "\nrecompute: 29 generator calls, 1064 us of virtual time, peak "
             "bytes by rank %llu ", (unsigned long long)(ctx + last + R));
    assert_non_null(strstr(r.out, want));
    run_free(&r);
}

static int count(const char *text, const char *what) {
    int n = 0;
    for (const char *p = text; (p = strstr(p, what)); p++) n++;
    return n;
}

/* --memory-svg: a step line and a peak a row, a dashed line a hard cut. */
static void test_memory_svg_marks_peaks_and_cuts(void **state) {
    (void)state;
    const char *path = tmp_path("memory.svg");
    run_result r = RUN("pp", "--hard-cut-at", "3,5", "--memory-svg", path);
    assert_int_equal(r.code, 0);
    run_free(&r);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    static char text[1 << 20];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    assert_int_equal(count(text, "class=\"bytes\""), 4); /* 3 ranks and the link */
    assert_int_equal(count(text, "class=\"peak\""), 4);
    assert_int_equal(count(text, "class=\"cut\""), 2);
    assert_non_null(strstr(text, ">peak 210960 bytes at chunk 2, call_id 2 (warm-up)</text>"));
    assert_non_null(strstr(text, "<title>cut-drain</title>"));
    r = RUN("pp", "--plan", "--memory-svg", path);
    assert_int_equal(r.code, 2);
    run_free(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_measured_bytes_are_the_shapes),
        cmocka_unit_test(test_recompute_holds_one_envelope_with_its_context),
        cmocka_unit_test(test_plan_equals_run_everywhere),
        cmocka_unit_test(test_the_peak_names_its_phase),
        cmocka_unit_test(test_a_result_never_freed_grows_with_the_chunks),
        cmocka_unit_test(test_the_cap_names_rank_chunk_and_phase),
        cmocka_unit_test(test_plan_and_run_agree_on_a_plugin),
        cmocka_unit_test(test_plan_at_the_pilot_sizes),
        cmocka_unit_test(test_sweep_and_compare_report_bytes),
        cmocka_unit_test(test_memory_svg_marks_peaks_and_cuts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
