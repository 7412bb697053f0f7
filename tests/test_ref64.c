/* test_ref64.c - the training model (kernels/model.c, driven through the
 * public kernels API) and the engine's one-rank reference against an
 * independent float64 model (tests/ref64.c), under bounds derived from the
 * arithmetic and tight enough that a 3% error in any one gradient tensor
 * fails.
 *
 * THE BOUND. ppv stores every op output, activation or activation
 * gradient, as bf16 rounded to nearest even: 8 significant bits, so a value
 * in [2^(e-1), 2^e) moves by at most half an ulp, 2^(e-9), a relative error
 * of at most u = 2^-8 per op. Inside an op it accumulates in fp32 over
 * K <= max(3C, d_ff) = 96 terms here: error <= K 2^-24 sum|terms| <
 * 2^-17 sum|terms|. Parameter gradients and the adaLN vectors' gradients
 * stay fp32.
 *
 * A worst-case bound adds every rounding at its maximum with one sign: a
 * layer stores ~40 tensors in a chain, so sum_i |J_i| u |v_i| is ~40 u = 16%
 * before LayerNorm's and attention's gains, loose enough to let a 3% bug
 * through. But RNE errors on computed data are independent, mean zero and
 * uniform on [-half ulp, +half ulp] (Higham and Mary, "A new approach to
 * probabilistic rounding error analysis", SISC 2019). To first order
 * (errors ~2^-8, second-order terms ~2^-16) the error of a compared tensor g
 * is delta = sum_i J_i e_i, e_i the rounding errors of stored tensor i and
 * J_i the derivative of g with respect to it, and
 *     sigma^2 = E ||delta||^2 = sum_i E ||J_i e_i||^2.
 * The float64 reference computes sigma: NOISE_RUNS runs add to each of its
 * op outputs a uniform draw of that op's bf16 rounding error (ref64.h), and
 * sigma^2 is the mean of ||g_noisy - g64||^2. (It perturbs every op output,
 * also those that ppv happens to compute exactly or fuses with the next op,
 * so sigma errs high, not low.) A compared tensor passes when
 *     ||g - g64|| <= LAMBDA sigma + FP32_REL ||g64||,   LAMBDA = 3,
 * norm-wise, each tensor of each layer on its own; FP32_REL = 2^-16 is the
 * fp32 accumulation. delta is a sum of thousands of independent bounded
 * terms: as a scalar it exceeds 3 sigma with probability 0.27% in the
 * Gaussian limit (2.2% at most by Hoeffding's inequality, uniform errors
 * being strictly sub-Gaussian), the norm of a vector spread over many
 * directions less often. Measured over 20 microbatches (2376 per-layer tensors),
 * ||g - g64|| / sigma had median 0.96 (the model is faithful, neither
 * loose nor tight), 99th percentile 1.47, maximum 2.1. Inputs and noise
 * seeds are fixed, so a pass is reproducible.
 *
 * Sensitivity: a check is evidence only if it can fail. Per layer the
 * reference starts from ppv's own layer input and output gradient (bf16
 * values, exact in double), so a bound covers one layer's roundings: 0.4%
 * to 2.3% of ||g64|| on the microbatches tested. Every per-layer tensor
 * there must also fail its bound when ppv's value is scaled by 1.03 or
 * 0.97 (test_each_layer_bound_catches_a_3_percent_error_in_every_tensor).
 * The whole-step and engine checks start from the microbatch and carry
 * every layer's error, so their bounds are wider (up to 4.4%): they catch
 * errors the kernels and the engine's reference share, and gross ones (a
 * wrong activation, a missing term) in any layer; in the default config
 * every tensor kind still fails a 3% error in at least one layer (measured,
 * not asserted).
 *
 * The loss needs no model: from ppv's own bf16 output, the fp32 loss makes
 * n + 3 fp32 roundings of non-negative terms, so |loss - loss64| <=
 * (n + 3) 2^-24 loss64; its gradient bf16(fl(fl(2/n) fl(y - t))) is within
 * (2^-8 + 2^-21) |dy64| of 2 (y - t) / n, value by value.
 *
 * REF64_VERBOSE=1 prints every comparison's error and bound.
 */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ppv_engine.h"
#include "ppv_kernels.h"
#include "ref64.h"

#define FP32_REL 0x1p-16 /* fp32 accumulation: K 2^-24 for K <= 96 terms, doubled */
#define LAMBDA 3.0
#define NOISE_RUNS 16
#define MUTATION 0.03 /* the error every per-layer bound must catch */

/* ---- helpers ------------------------------------------------------------------------- */

/* A model that must build. */
static ppv_model *model_ok(const ppv_model_config *c) {
    char err[256] = "";
    ppv_model *m = ppv_model_new(c, err, sizeof err);
    if (!m) fail_msg("ppv_model_new: %s", err);
    return m;
}

/* n zeroed doubles, or the test fails. */
static double *dalloc(size_t n) {
    double *d = calloc(n ? n : 1, sizeof(double));
    assert_non_null(d);
    return d;
}

/* n bytes, or the test fails. */
static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    assert_non_null(p);
    return p;
}

/* n bf16 values widened to double (exact). */
static void widen_bf16(double *out, const ppv_bf16 *in, size_t n) {
    for (size_t i = 0; i < n; i++)
        out[i] = ppv_bf16_to_f32(in[i]);
}

/* n floats widened to double. */
static void widen_f32(double *out, const float *in, size_t n) {
    for (size_t i = 0; i < n; i++)
        out[i] = in[i];
}

/* ||k a - b||^2. */
static double sq_dist(const double *a, double k, const double *b, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++)
        s += (k * a[i] - b[i]) * (k * a[i] - b[i]);
    return s;
}

/* 1 when REF64_VERBOSE asks for every comparison to be printed. */
static int verbose(void) {
    const char *v = getenv("REF64_VERBOSE");
    return v && *v && strcmp(v, "0") != 0;
}

/* One compared tensor: ppv's value got against the float64 want, with
 * dev2 = the sum over the NOISE_RUNS runs of ||noisy - want||^2. */
typedef struct verdict {
    double err, bound, norm; /* ||got - want||, its bound, ||want|| */
    double err_up, err_down; /* ||(1 +- MUTATION) got - want|| */
} verdict;

/* The verdict on got (n values) against want. */
static verdict judge(const double *got, const double *want, size_t n, double dev2) {
    verdict v;
    v.norm = 0;
    for (size_t i = 0; i < n; i++)
        v.norm += want[i] * want[i];
    v.norm = sqrt(v.norm);
    v.err = sqrt(sq_dist(got, 1.0, want, n));
    v.bound = LAMBDA * sqrt(dev2 / NOISE_RUNS) + FP32_REL * v.norm;
    v.err_up = sqrt(sq_dist(got, 1.0 + MUTATION, want, n));
    v.err_down = sqrt(sq_dist(got, 1.0 - MUTATION, want, n));
    return v;
}

/* The worst error / bound seen by this process, for REF64_VERBOSE. */
static double worst_ratio;
static char worst_what[128];

/* Fails unless v's error is within its bound; with sensitive, also
 * unless a 3% scaling of got would exceed it. */
static void expect_within(const verdict *v, int sensitive, const char *fmt, ...) {
    char what[128];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    double ratio = v->err / v->bound;
    if (verbose()) {
        printf("  %-28s rel err %.2e  rel bound %.2e  err/bound %.2f", what, v->err / v->norm,
               v->bound / v->norm, ratio);
        if (!isnan(v->err_up))
            printf("  3%%-scaled err/bound %.2f", fmin(v->err_up, v->err_down) / v->bound);
        printf("\n");
    }
    if (ratio > worst_ratio) {
        worst_ratio = ratio;
        snprintf(worst_what, sizeof worst_what, "%s", what);
    }
    if (!(v->err <= v->bound))
        fail_msg("%s: ||ppv - float64|| / ||float64|| = %.3g exceeds the rounding bound %.3g "
                 "(%.2f times): ppv computes it wrong (or the reference does); REF64_VERBOSE=1 "
                 "prints every comparison",
                 what, v->err / v->norm, v->bound / v->norm, ratio);
    if (sensitive && !(v->err_up > v->bound && v->err_down > v->bound))
        fail_msg("%s: the bound %.3g would not catch a %g%% error (it gives %.3g / %.3g); the "
                 "check is too loose to be evidence",
                 what, v->bound / v->norm, 100 * MUTATION, v->err_up / v->norm,
                 v->err_down / v->norm);
}

/* The second config under test (the first is the default): 4 heads of 4
 * channels, T C = 96 (so 2 / (T C) is inexact in fp32) and T != Tc. */
static ppv_model_config small_config(void) {
    return (ppv_model_config){.layers = 2,
                              .d_model = 16,
                              .n_heads = 4,
                              .d_ff = 32,
                              .seq_len = 6,
                              .cond_len = 3,
                              .seed = 7};
}

/* ---- the reference checked against finite differences --------------------------------- */

/* Loss of the float64 step at r's current weights and ri's x. */
static double ref_loss(const ref64_model *r, const ref64_inputs *ri, double *y, double *dp) {
    double l = ref64_step(r, ri, y, dp, NULL);
    assert_false(isnan(l));
    return l;
}

static void test_float64_backward_matches_finite_differences(void **state) {
    (void)state;
    ppv_model_config cfg = {.layers = 2,
                            .d_model = 8,
                            .n_heads = 2,
                            .d_ff = 16,
                            .seq_len = 4,
                            .cond_len = 3,
                            .seed = 3};
    ppv_model *m = model_ok(&cfg);
    ref64_model r;
    assert_int_equal(ref64_model_init(&r, &cfg, m), 0);
    ppv_mb_inputs in;
    assert_int_equal(ppv_mb_inputs_init(m, 0, &in), 0);
    ref64_inputs ri;
    assert_int_equal(ref64_inputs_init(&ri, &r, &in), 0);
    size_t TC = (size_t)r.T * r.C, NP = (size_t)r.L * r.P;
    double *y = dalloc(TC), *dp = dalloc(NP), *scratch = dalloc(NP);
    ref_loss(&r, &ri, y, dp);
    /* central differences, h = 1e-5: truncation h^2 L''' ~ 1e-10, cancellation
     * 1e-16 L / h ~ 1e-11, against gradients ~1e-3..1 */
    const double h = 1e-5;
    for (size_t i = 0; i < NP; i += 3) {
        double keep = r.w[i];
        r.w[i] = keep + h;
        double lp = ref_loss(&r, &ri, y, scratch);
        r.w[i] = keep - h;
        double lm = ref_loss(&r, &ri, y, scratch);
        r.w[i] = keep;
        double fd = (lp - lm) / (2 * h);
        if (!(fabs(fd - dp[i]) <= 1e-7 * (1 + fabs(fd))))
            fail_msg("parameter %zu (layer %zu): backward %.12g, finite differences %.12g", i,
                     i / r.P, dp[i], fd);
    }
    free(y), free(dp), free(scratch);
    ref64_inputs_free(&ri);
    ppv_mb_inputs_free(&in);
    ref64_model_free(&r);
    ppv_model_free(m);
}

/* ---- ppv layer by layer ------------------------------------------------------------------ */

/* ppv's forward and backward of microbatch mb, one layer per call (as a
 * pipeline stage runs them): x[l] enters layer l, dy[l] is the gradient of
 * x[l], dp the (L, P) parameter gradients, loss the fp32 loss. */
typedef struct ppv_trace {
    int L;
    size_t TC, P;
    ppv_mb_inputs in;
    double **x, **dy, *dp, loss;
} ppv_trace;

/* Runs microbatch mb through m one layer per call; free with ppv_trace_free. */
static ppv_trace ppv_trace_run(const ppv_model *m, const ppv_model_config *cfg, int32_t mb) {
    ppv_trace t = {.L = cfg->layers};
    t.TC = (size_t)cfg->seq_len * cfg->d_model;
    t.P = ppv_model_grad_count(m, 0, 1);
    assert_int_equal(ppv_mb_inputs_init(m, mb, &t.in), 0);
    t.x = xmalloc(sizeof(double *) * (size_t)(t.L + 1));
    t.dy = xmalloc(sizeof(double *) * (size_t)(t.L + 1));
    t.dp = dalloc((size_t)t.L * t.P);
    ppv_bf16 **x16 = xmalloc(sizeof(ppv_bf16 *) * (size_t)(t.L + 1));
    void **saved = xmalloc(sizeof(void *) * (size_t)t.L);
    float *dp = xmalloc(sizeof(float) * t.P);
    for (int l = 0; l <= t.L; l++) {
        x16[l] = xmalloc(sizeof(ppv_bf16) * t.TC);
        t.x[l] = dalloc(t.TC), t.dy[l] = dalloc(t.TC);
    }
    memcpy(x16[0], t.in.x, sizeof(ppv_bf16) * t.TC);
    for (int l = 0; l < t.L; l++) {
        saved[l] = xmalloc(ppv_layers_saved_bytes(m, l, l + 1));
        assert_int_equal(ppv_layers_forward(m, l, l + 1, &t.in, x16[l], x16[l + 1], saved[l]), 0);
    }
    t.loss = ppv_loss_forward(m, &t.in, x16[t.L]);
    ppv_bf16 *dy = xmalloc(sizeof(ppv_bf16) * t.TC), *dx = xmalloc(sizeof(ppv_bf16) * t.TC);
    assert_int_equal(ppv_loss_backward(m, &t.in, x16[t.L], dy), 0);
    widen_bf16(t.dy[t.L], dy, t.TC);
    for (int l = t.L - 1; l >= 0; l--) {
        void *wstate = xmalloc(ppv_layers_wstate_bytes(m, l, l + 1));
        assert_int_equal(ppv_layers_backward_input(m, l, l + 1, &t.in, saved[l], dy, dx, wstate),
                         0);
        assert_int_equal(ppv_layers_backward_weight(m, l, l + 1, &t.in, wstate, dp), 0);
        widen_f32(t.dp + (size_t)l * t.P, dp, t.P);
        widen_bf16(t.dy[l], dx, t.TC);
        memcpy(dy, dx, sizeof(ppv_bf16) * t.TC);
        free(wstate);
    }
    for (int l = 0; l <= t.L; l++) {
        widen_bf16(t.x[l], x16[l], t.TC);
        free(x16[l]);
        if (l < t.L) free(saved[l]);
    }
    free(x16), free(saved), free(dp), free(dy), free(dx);
    return t;
}

/* Frees what ppv_trace_run allocated. */
static void ppv_trace_free(ppv_trace *t) {
    for (int l = 0; l <= t->L; l++)
        free(t->x[l]), free(t->dy[l]);
    free(t->x), free(t->dy), free(t->dp);
    ppv_mb_inputs_free(&t->in);
}

/* Deviations of NOISE_RUNS noisy float64 runs of one layer from the exact
 * one, from ppv's layer input x and output gradient dy: dev2_y, dev2_dx and
 * dev2_dp[tensor] summed over the runs. */
typedef struct layer_ref {
    double *y, *dx, *dp; /* exact */
    double dev2_y, dev2_dx, dev2_dp[REF64_TENSORS];
} layer_ref;

/* The exact float64 layer l and NOISE_RUNS noisy runs of it. */
static layer_ref layer_ref_run(const ref64_model *r, int l, const ref64_inputs *ri, const double *x,
                               const double *dy) {
    size_t TC = (size_t)r->T * r->C;
    layer_ref lr = {dalloc(TC), dalloc(TC), dalloc(r->P), 0, 0, {0}};
    double *y = dalloc(TC), *dx = dalloc(TC), *dp = dalloc(r->P);
    ref64_acts *a = ref64_acts_new(r);
    assert_non_null(a);
    ref64_layer_forward(r, l, ri, x, lr.y, a, NULL);
    ref64_layer_backward(r, l, a, dy, lr.dx, lr.dp, NULL);
    for (int s = 0; s < NOISE_RUNS; s++) {
        ref64_noise nz = {.state = 0x5eed0000ull + (uint64_t)s * 1000 + (uint64_t)l};
        ref64_layer_forward(r, l, ri, x, y, a, &nz);
        ref64_layer_backward(r, l, a, dy, dx, dp, &nz);
        lr.dev2_y += sq_dist(y, 1.0, lr.y, TC);
        lr.dev2_dx += sq_dist(dx, 1.0, lr.dx, TC);
        for (int i = 0; i < REF64_TENSORS; i++)
            lr.dev2_dp[i] +=
                sq_dist(dp + r->off[i], 1.0, lr.dp + r->off[i], r->rows[i] * r->cols[i]);
    }
    ref64_acts_free(a);
    free(y), free(dx), free(dp);
    return lr;
}

/* Frees what layer_ref_run allocated. */
static void layer_ref_free(layer_ref *lr) {
    free(lr->y), free(lr->dx), free(lr->dp);
}

/* Every layer's output, input gradient and parameter gradients of ppv
 * against float64 from the same layer input and output gradient, for
 * microbatches 0..nmb-1; with sensitive, every bound must also catch a 3%
 * error. */
static void check_each_layer(const ppv_model_config *cfg, int32_t nmb, int sensitive) {
    ppv_model *m = model_ok(cfg);
    ref64_model r;
    assert_int_equal(ref64_model_init(&r, cfg, m), 0);
    size_t TC = (size_t)r.T * r.C;
    for (int32_t mb = 0; mb < nmb; mb++) {
        ppv_trace t = ppv_trace_run(m, cfg, mb);
        ref64_inputs ri;
        assert_int_equal(ref64_inputs_init(&ri, &r, &t.in), 0);
        if (verbose())
            printf("config C=%d H=%d F=%d T=%d Tc=%d, microbatch %d, per layer:\n", r.C, r.H, r.F,
                   r.T, r.Tc, mb);
        for (int l = 0; l < r.L; l++) {
            layer_ref lr = layer_ref_run(&r, l, &ri, t.x[l], t.dy[l + 1]);
            verdict v = judge(t.x[l + 1], lr.y, TC, lr.dev2_y);
            expect_within(&v, sensitive, "mb %d layer %d output", mb, l);
            v = judge(t.dy[l], lr.dx, TC, lr.dev2_dx);
            expect_within(&v, sensitive, "mb %d layer %d dx", mb, l);
            for (int i = 0; i < REF64_TENSORS; i++) {
                size_t at = (size_t)l * r.P + r.off[i];
                v = judge(t.dp + at, lr.dp + r.off[i], r.rows[i] * r.cols[i], lr.dev2_dp[i]);
                expect_within(&v, sensitive, "mb %d layer %d %s", mb, l, ref64_tensor_name(i));
            }
            layer_ref_free(&lr);
        }
        ref64_inputs_free(&ri);
        ppv_trace_free(&t);
    }
    ref64_model_free(&r);
    ppv_model_free(m);
}

static void test_each_layer_matches_float64_within_the_rounding_bound(void **state) {
    (void)state;
    ppv_model_config def = ppv_model_config_default(), small = small_config();
    check_each_layer(&def, 2, 0);
    check_each_layer(&small, 2, 0);
}

static void test_each_layer_bound_catches_a_3_percent_error_in_every_tensor(void **state) {
    (void)state;
    ppv_model_config def = ppv_model_config_default(), small = small_config();
    check_each_layer(&def, 2, 1);
    check_each_layer(&small, 2, 1);
}

/* ---- the loss ----------------------------------------------------------------------------- */

/* ppv's loss and loss gradient from its own output, against float64. */
static void check_loss(const ppv_model_config *cfg, int32_t mb) {
    ppv_model *m = model_ok(cfg);
    ref64_model r;
    assert_int_equal(ref64_model_init(&r, cfg, m), 0);
    ppv_trace t = ppv_trace_run(m, cfg, mb);
    ref64_inputs ri;
    assert_int_equal(ref64_inputs_init(&ri, &r, &t.in), 0);
    size_t n = t.TC;
    double *dy = dalloc(n);
    double loss = ref64_loss(&r, &ri, t.x[r.L], dy, NULL);
    double bound = (double)(n + 3) * 0x1p-24 * loss;
    if (!(fabs(t.loss - loss) <= bound))
        fail_msg("loss %.9g, float64 %.12g: error %.3g > (n + 3) 2^-24 loss = %.3g", t.loss, loss,
                 fabs(t.loss - loss), bound);
    for (size_t i = 0; i < n; i++)
        if (!(fabs(t.dy[r.L][i] - dy[i]) <= (0x1p-8 + 0x1p-21) * fabs(dy[i])))
            fail_msg("loss gradient %zu: %.9g, float64 %.12g: beyond one bf16 rounding", i,
                     t.dy[r.L][i], dy[i]);
    free(dy);
    ref64_inputs_free(&ri);
    ppv_trace_free(&t);
    ref64_model_free(&r);
    ppv_model_free(m);
}

static void
test_loss_and_its_gradient_match_float64_within_fp32_and_one_bf16_rounding(void **state) {
    (void)state;
    ppv_model_config def = ppv_model_config_default(), small = small_config();
    for (int32_t mb = 0; mb < 2; mb++) {
        check_loss(&def, mb);
        check_loss(&small, mb);
    }
}

/* ---- whole steps: ppv's stack and the engine's reference ------------------------------------ */

/* The float64 step summed over microbatches 0..nmb-1 (exact), and the
 * deviations of NOISE_RUNS noisy sums: per layer and tensor, for the last
 * layer's output of microbatch 0 (y) and for the mean loss. */
typedef struct step_ref {
    double *y, *dp, loss;               /* y of microbatch 0; dp summed; loss the mean */
    double dev2_y, dev2_loss, *dev2_dp; /* dev2_dp: (L, REF64_TENSORS) */
} step_ref;

/* The exact float64 step summed over nmb microbatches, and NOISE_RUNS noisy
 * sums. */
static step_ref step_ref_run(const ref64_model *r, const ppv_model *m, int32_t nmb) {
    size_t TC = (size_t)r->T * r->C, NP = (size_t)r->L * r->P;
    step_ref sr = {dalloc(TC), dalloc(NP), 0, 0, 0, dalloc((size_t)r->L * REF64_TENSORS)};
    double *y = dalloc(TC), *dp = dalloc(NP), *sum = dalloc(NP);
    for (int s = -1; s < NOISE_RUNS; s++) { /* s = -1: exact */
        double loss = 0;
        memset(sum, 0, sizeof(double) * NP);
        for (int32_t mb = 0; mb < nmb; mb++) {
            ppv_mb_inputs in;
            ref64_inputs ri;
            assert_int_equal(ppv_mb_inputs_init(m, mb, &in), 0);
            assert_int_equal(ref64_inputs_init(&ri, r, &in), 0);
            ref64_noise nz = {.state = 0xa11ull * 1000003 + (uint64_t)s * 1000 + (uint64_t)mb};
            double l = ref64_step(r, &ri, y, dp, s < 0 ? NULL : &nz);
            assert_false(isnan(l));
            loss += l / nmb;
            for (size_t k = 0; k < NP; k++)
                sum[k] += dp[k];
            if (mb == 0 && s < 0) memcpy(sr.y, y, sizeof(double) * TC);
            if (mb == 0 && s >= 0) sr.dev2_y += sq_dist(y, 1.0, sr.y, TC);
            ref64_inputs_free(&ri);
            ppv_mb_inputs_free(&in);
        }
        if (s < 0) {
            sr.loss = loss;
            memcpy(sr.dp, sum, sizeof(double) * NP);
            continue;
        }
        sr.dev2_loss += (loss - sr.loss) * (loss - sr.loss);
        for (int l = 0; l < r->L; l++)
            for (int i = 0; i < REF64_TENSORS; i++) {
                size_t at = (size_t)l * r->P + r->off[i];
                sr.dev2_dp[l * REF64_TENSORS + i] +=
                    sq_dist(sum + at, 1.0, sr.dp + at, r->rows[i] * r->cols[i]);
            }
    }
    free(y), free(dp), free(sum);
    return sr;
}

/* Frees what step_ref_run allocated. */
static void step_ref_free(step_ref *sr) {
    free(sr->y), free(sr->dp), free(sr->dev2_dp);
}

/* Every parameter tensor of grads (the whole model's, ppv's) against sr. */
static void expect_grads_within(const ref64_model *r, const double *grads, const step_ref *sr,
                                const char *who) {
    for (int l = 0; l < r->L; l++)
        for (int i = 0; i < REF64_TENSORS; i++) {
            size_t at = (size_t)l * r->P + r->off[i];
            verdict v = judge(grads + at, sr->dp + at, r->rows[i] * r->cols[i],
                              sr->dev2_dp[l * REF64_TENSORS + i]);
            expect_within(&v, 0, "%s layer %d %s", who, l, ref64_tensor_name(i));
        }
}

/* The loss: the model's deviation, plus fp32 summation of the mean. */
static void expect_loss_within(double got, const step_ref *sr, size_t n, const char *who) {
    verdict v = {.err = fabs(got - sr->loss),
                 .bound = LAMBDA * sqrt(sr->dev2_loss / NOISE_RUNS) +
                          (double)(n + 3) * 0x1p-24 * sr->loss,
                 .norm = sr->loss};
    v.err_up = v.err_down = NAN; /* not asked */
    expect_within(&v, 0, "%s loss", who);
}

/* ppv's whole stack in one call per pass, from microbatch 0's x. */
static void check_whole_step(const ppv_model_config *cfg) {
    ppv_model *m = model_ok(cfg);
    ref64_model r;
    assert_int_equal(ref64_model_init(&r, cfg, m), 0);
    step_ref sr = step_ref_run(&r, m, 1);
    int32_t L = cfg->layers;
    size_t TC = (size_t)r.T * r.C, NP = (size_t)L * r.P;
    ppv_mb_inputs in;
    assert_int_equal(ppv_mb_inputs_init(m, 0, &in), 0);
    ppv_bf16 *y = xmalloc(sizeof(ppv_bf16) * TC), *dy = xmalloc(sizeof(ppv_bf16) * TC);
    ppv_bf16 *dx = xmalloc(sizeof(ppv_bf16) * TC);
    void *saved = xmalloc(ppv_layers_saved_bytes(m, 0, L));
    void *wstate = xmalloc(ppv_layers_wstate_bytes(m, 0, L));
    float *dp = xmalloc(sizeof(float) * NP);
    double *yd = dalloc(TC), *dpd = dalloc(NP);
    assert_int_equal(ppv_layers_forward(m, 0, L, &in, in.x, y, saved), 0);
    double loss = ppv_loss_forward(m, &in, y);
    assert_int_equal(ppv_loss_backward(m, &in, y, dy), 0);
    assert_int_equal(ppv_layers_backward_input(m, 0, L, &in, saved, dy, dx, wstate), 0);
    assert_int_equal(ppv_layers_backward_weight(m, 0, L, &in, wstate, dp), 0);
    if (verbose())
        printf("config C=%d H=%d F=%d T=%d Tc=%d, whole step:\n", r.C, r.H, r.F, r.T, r.Tc);
    widen_bf16(yd, y, TC);
    verdict v = judge(yd, sr.y, TC, sr.dev2_y);
    expect_within(&v, 0, "stack output");
    expect_loss_within(loss, &sr, TC, "stack");
    widen_f32(dpd, dp, NP);
    expect_grads_within(&r, dpd, &sr, "stack");
    free(y), free(dy), free(dx), free(saved), free(wstate), free(dp), free(yd), free(dpd);
    ppv_mb_inputs_free(&in);
    step_ref_free(&sr);
    ref64_model_free(&r);
    ppv_model_free(m);
}

static void test_whole_step_matches_float64_within_the_rounding_bound(void **state) {
    (void)state;
    ppv_model_config def = ppv_model_config_default(), small = small_config();
    check_whole_step(&def);
    check_whole_step(&small);
}

/* ppv_run_reference (the engine's one-rank step: gradients summed over
 * microbatches, the mean loss) against the float64 sums. */
static void check_engine_reference(const ppv_model_config *cfg, int32_t nmb) {
    ppv_model *m = model_ok(cfg);
    ref64_model r;
    assert_int_equal(ref64_model_init(&r, cfg, m), 0);
    step_ref sr = step_ref_run(&r, m, nmb);
    float *grads = NULL;
    size_t ngrads = 0;
    double loss = 0;
    char err[256] = "";
    if (ppv_run_reference(cfg, nmb, &grads, &ngrads, &loss, err, sizeof err) != 0)
        fail_msg("ppv_run_reference: %s", err);
    assert_int_equal(ngrads, (size_t)r.L * r.P);
    double *g = dalloc(ngrads);
    widen_f32(g, grads, ngrads);
    if (verbose())
        printf("config C=%d H=%d F=%d T=%d Tc=%d, engine reference, %d microbatches:\n", r.C, r.H,
               r.F, r.T, r.Tc, nmb);
    expect_loss_within(loss, &sr, (size_t)r.T * r.C, "engine");
    expect_grads_within(&r, g, &sr, "engine");
    free(g), free(grads);
    step_ref_free(&sr);
    ref64_model_free(&r);
    ppv_model_free(m);
}

static void test_engine_reference_matches_float64_for_two_microbatches(void **state) {
    (void)state;
    ppv_model_config def = ppv_model_config_default(), small = small_config();
    check_engine_reference(&def, 2);
    check_engine_reference(&small, 2);
}

/* Prints the worst error / bound of the run (REF64_VERBOSE). */
static int report_worst(void **state) {
    (void)state;
    if (verbose()) printf("worst error / bound: %.3f (%s)\n", worst_ratio, worst_what);
    return 0;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_float64_backward_matches_finite_differences),
        cmocka_unit_test(test_each_layer_matches_float64_within_the_rounding_bound),
        cmocka_unit_test(test_each_layer_bound_catches_a_3_percent_error_in_every_tensor),
        cmocka_unit_test(
            test_loss_and_its_gradient_match_float64_within_fp32_and_one_bf16_rounding),
        cmocka_unit_test(test_whole_step_matches_float64_within_the_rounding_bound),
        cmocka_unit_test(test_engine_reference_matches_float64_for_two_microbatches),
    };
    return cmocka_run_group_tests(tests, NULL, report_worst);
}
