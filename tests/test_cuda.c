/* test_cuda.c - the CUDA device against the CPU, bit for bit.
 *
 * With a GPU: every op of the ops table on ragged shapes and strided rows
 * (outputs compared over whole poisoned buffers, so a value written where
 * the CPU writes none fails too), a whole training step of the block stack,
 * whole pipeline runs of every generated schedule kind through the engine,
 * `ppv pp` on PP0 and PP1 with both KV modes, and the command line (`run`,
 * `replay` of a shipped golden file, `pp`) with --device cuda.
 *
 * Without one (or with ppv built without CUDA) those skip, and the tests
 * that remain show that asking for cuda fails with the reason, at the API
 * and on the command line (exit 2), never by quietly running on the CPU.
 */
#include "testutil.h"

#include <math.h>

#include "kernels/kernels_internal.h"
#include "ppv_kernels.h"

/* The CUDA table, or NULL (the reason in why). */
static const ppvk_ops *cuda_ops(void) {
    static int tried;
    static const ppvk_ops *ops;
    static char why[512];
    if (!tried) {
        tried = 1;
        ops = ppvk_device_ops("cuda", why, sizeof why);
        if (!ops) print_message("no CUDA device here, the GPU tests skip: %s\n", why);
    }
    return ops;
}

#define NEED_GPU()                                                                                 \
    const ppvk_ops *gpu = cuda_ops();                                                              \
    if (!gpu) skip();                                                                              \
    const ppvk_ops *cpu = &ppvk_cpu_ops

/* n bf16-valued normals times scale, keyed by tensor. */
static float *normals(size_t n, uint64_t tensor, float scale) {
    float *x = malloc((n ? n : 1) * sizeof *x);
    assert_non_null(x);
    for (size_t i = 0; i < n; i++)
        x[i] = ppv_bf16_to_f32(ppv_bf16_from_f32(ppv_rng_normal(11, tensor, i) * scale));
    return x;
}

/* Two output buffers of n floats, both filled with the same poison. */
static void outputs(size_t n, float **a, float **b) {
    *a = malloc((n ? n : 1) * sizeof **a);
    *b = malloc((n ? n : 1) * sizeof **b);
    assert_non_null(*a);
    assert_non_null(*b);
    memset(*a, 0x7e, n * sizeof **a);
    memset(*b, 0x7e, n * sizeof **b);
}

/* Fails at the first value whose bits differ, naming it. */
static void same_bits(const char *what, const float *cpu, const float *gpu, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t a, b;
        memcpy(&a, &cpu[i], sizeof a);
        memcpy(&b, &gpu[i], sizeof b);
        if (a != b)
            fail_msg("%s: value %zu of %zu: CPU %.9g (%08x), GPU %.9g (%08x)", what, i, n,
                     (double)cpu[i], a, (double)gpu[i], b);
    }
}

/* ---- without a GPU ------------------------------------------------------------------- */

static void test_unknown_device_is_refused(void **state) {
    (void)state;
    char err[256] = "";
    assert_null(ppvk_device_ops("tpu", err, sizeof err));
    assert_string_equal(err, "unknown device 'tpu' (cpu, cuda or cuda:cublas)");
    assert_ptr_equal(ppvk_device_ops("cpu", err, sizeof err), &ppvk_cpu_ops);
}

static void test_cuda_without_a_gpu_is_an_error_not_the_cpu(void **state) {
    (void)state;
    if (cuda_ops()) skip(); /* a GPU is here: the tests below run instead */
    char err[512] = "";
    assert_null(ppvk_device_ops("cuda", err, sizeof err));
    assert_true(strncmp(err, "CUDA is not usable here: ", 25) == 0 ||
                strncmp(err, "this ppv was built without CUDA", 31) == 0);
    ppv_model_config cfg = ppv_model_config_default();
    ppv_model *m = ppv_model_new(&cfg, err, sizeof err);
    assert_non_null(m);
    assert_int_equal(ppv_model_set_device(m, "cuda", err, sizeof err), -1);
    assert_string_equal(ppv_model_device(m), "cpu");
    ppv_model_free(m);

    char *s = gen_file("f.csv", "1f1b", "2", "4");
    run_result r = RUN("run", s, "--device", "cuda");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "ppv run: "));
    assert_true(strstr(r.err, "CUDA is not usable here") || strstr(r.err, "built without CUDA"));
    run_free(&r);
    r = RUN("pp", "--chunks", "2", "--device", "cuda");
    assert_int_equal(r.code, 2);
    run_free(&r);
}

static void test_device_option_takes_only_cpu_or_cuda(void **state) {
    (void)state;
    char *s = gen_file("f.csv", "1f1b", "2", "4");
    run_result r = RUN("run", s, "--device", "gpu");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--device is cpu or cuda, not 'gpu'"));
    run_free(&r);
    r = RUN("run", s, "--device", "cpu", "--json");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "\"device\":\"cpu\""));
    run_free(&r);
    r = RUN("pp", "--device", "gpu");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--device is cpu or cuda, not 'gpu'"));
    run_free(&r);
    r = RUN("diff", s, s, "--device", "cuda");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--device is replay's option"));
    run_free(&r);
    /* weights set to one device, a run told another: refused, never mixed */
    char err[256];
    ppv_model_config cfg = ppv_model_config_default();
    ppv_model *m = ppv_model_new(&cfg, err, sizeof err);
    ppv_schedule *sch = NULL;
    ppv_gen_params gp = {2, 4, 0};
    assert_int_equal(ppv_generate("1f1b", &gp, &sch, err, sizeof err), 0);
    ppv_run_options o = ppv_run_defaults();
    o.weights = m;
    o.device = "cuda";
    ppv_run_report *rep = NULL;
    assert_int_equal(ppv_run(sch, &o, &rep, err, sizeof err), -1);
    assert_string_equal(err, "the given weights run on cpu, not cuda");
    ppv_schedule_free(sch);
    ppv_model_free(m);
    r = RUN("pp", "--control-only", "--device", "cpu");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--control-only runs no model, so it has no --device"));
    run_free(&r);
}

/* ---- the device plumbing, on the stand-in module (tests/fake_cuda/) -------------------- */

/* Points ppv (and this process's later loads, if any) at the stand-in,
 * behaving as how says. */
static void use_fake(const char *how) {
    setenv("PPV_CUDA_MODULE", PPV_FAKE_CUDA_MODULE, 1);
    if (how)
        setenv("PPV_FAKE_CUDA", how, 1);
    else
        unsetenv("PPV_FAKE_CUDA");
}

static void use_real(void) {
    unsetenv("PPV_CUDA_MODULE");
    unsetenv("PPV_FAKE_CUDA");
}

/* A device whose ops give the CPU's bits passes run, replay and pp, and
 * says so; one whose forward differs in one bit is caught by each. */
static void test_device_results_are_compared_not_trusted(void **state) {
    (void)state;
    char *f = gen_file("f.csv", "1f1b", "2", "4");
    char golden[1024];
    snprintf(golden, sizeof golden, "%s/train_1f1b_p4_m8.h5", PPV_GOLDEN_DIR);
    use_fake(NULL);
    run_result r = RUN("run", f, "--device", "cuda");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "device: cuda (the one-rank reference runs on the CPU)"));
    assert_non_null(strstr(r.out, "bitwise equal"));
    run_free(&r);
    r = RUN("replay", golden, "--device", "cuda");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "from the file's weights and inputs on cuda\n"));
    run_free(&r);
    r = RUN("verify-recompute", f, "--device", "cuda", "--recompute", "selective");
    assert_int_equal(r.code, 0);
    assert_true(strncmp(r.out, "device: cuda (both runs)\n", 25) == 0);
    run_free(&r);
    char infer[1024];
    snprintf(infer, sizeof infer, "%s/infer_pp1_stash_cut.h5", PPV_GOLDEN_DIR);
    r = RUN("replay", infer, "--device", "cuda", "--json");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "\"device\":\"cuda\""));
    run_free(&r);
    r = RUN("pp", "--chunks", "2", "--device", "cuda");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "(generator on cuda)"));
    run_free(&r);

    use_fake("flip");
    r = RUN("run", f, "--device", "cuda");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "DIFFERENT"));
    run_free(&r);
    r = RUN("replay", golden, "--device", "cuda");
    assert_int_equal(r.code, 1);
    run_free(&r);
    use_real();
}

/* A device op that fails ends the command with exit 2 and the op's
 * name: the results after it are never reported as a verdict. */
static void test_a_failed_device_op_fails_the_command(void **state) {
    (void)state;
    char *f = gen_file("f.csv", "1f1b", "2", "4");
    use_fake("fail:40");
    run_result r = RUN("run", f, "--device", "cuda");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "ppv run: CUDA op "));
    assert_non_null(strstr(r.err, ": injected failure (op 40)"));
    assert_string_equal(r.out, "");
    run_free(&r);
    r = RUN("pp", "--chunks", "2", "--device", "cuda");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, ": injected failure (op 40)"));
    run_free(&r);
    use_fake("nodevice");
    r = RUN("run", f, "--device", "cuda");
    assert_int_equal(r.code, 2);
    assert_non_null(
        strstr(r.err, "ppv run: CUDA is not usable here: no CUDA device (the stand-in module)"));
    run_free(&r);
    setenv("PPV_CUDA_MODULE", "/nonexistent/libppv_cuda.so", 1);
    r = RUN("run", f, "--device", "cuda");
    assert_int_equal(r.code, 2);
    assert_non_null(
        strstr(r.err, "ppv run: cannot load the CUDA module: /nonexistent/libppv_cuda.so"));
    run_free(&r);
    use_real();
}

/* --gemm cublas is judged by the bound: the same products within it
 * (here exactly: 0 ULP), products 1.5 times too large outside it. */
static void test_cublas_gradients_are_judged_by_the_bound(void **state) {
    (void)state;
    char *f = gen_file("f.csv", "1f1b", "2", "4");
    use_fake(NULL);
    run_result r = RUN("run", f, "--device", "cuda", "--gemm", "cublas");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "device: cuda, matmuls on cuBLAS"));
    assert_non_null(strstr(r.out, "max 0 ULP, relative 2-norm 0 <= 0.0625: within the bound"));
    run_free(&r);
    r = RUN("run", f, "--device", "cuda", "--gemm", "cublas", "--json");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "\"device\":\"cuda\",\"gemm\":\"cublas\""));
    assert_non_null(strstr(r.out, "\"grad_rel_l2\":0"));
    run_free(&r);
    use_fake("scale");
    r = RUN("run", f, "--device", "cuda", "--gemm", "cublas");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "OUTSIDE THE BOUND"));
    run_free(&r);
    r = RUN("run", f, "--gemm", "cublas");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--gemm cublas runs on the GPU: it needs --device cuda"));
    run_free(&r);
    r = RUN("verify-recompute", f, "--gemm", "cublas");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--gemm is run's option"));
    run_free(&r);
    use_real();
}

/* ---- every op, CPU against GPU --------------------------------------------------------- */

static void test_linear_ops_match(void **state) {
    (void)state;
    NEED_GPU();
    static const int shapes[][3] = {{1, 32, 192}, {7, 33, 17}, {64, 256, 96}, {130, 64, 300}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        int M = shapes[k][0], IC = shapes[k][1], OC = shapes[k][2];
        float *inp = normals((size_t)M * IC, 1, 1), *w = normals((size_t)OC * IC, 2, 0.125f);
        float *b = normals((size_t)OC, 3, 0.5f), *dout = normals((size_t)M * OC, 4, 1);
        float *a, *g;
        outputs((size_t)M * OC, &a, &g);
        cpu->linear_forward(a, inp, w, b, M, IC, OC);
        gpu->linear_forward(g, inp, w, b, M, IC, OC);
        same_bits("linear_forward", a, g, (size_t)M * OC);
        cpu->linear_forward(a, inp, w, NULL, M, IC, OC);
        gpu->linear_forward(g, inp, w, NULL, M, IC, OC);
        same_bits("linear_forward without bias", a, g, (size_t)M * OC);
        free(a), free(g);
        outputs((size_t)M * IC, &a, &g);
        cpu->linear_backward_input(a, dout, w, M, IC, OC);
        gpu->linear_backward_input(g, dout, w, M, IC, OC);
        same_bits("linear_backward_input", a, g, (size_t)M * IC);
        free(a), free(g);
        float *da, *dg;
        outputs((size_t)OC * IC, &a, &g);
        outputs((size_t)OC, &da, &dg);
        cpu->linear_backward_weight(a, da, dout, inp, M, IC, OC);
        gpu->linear_backward_weight(g, dg, dout, inp, M, IC, OC);
        same_bits("linear_backward_weight dw", a, g, (size_t)OC * IC);
        same_bits("linear_backward_weight db", da, dg, (size_t)OC);
        free(a), free(g), free(da), free(dg);
        float *pa, *pg;
        outputs((size_t)M * 5, &pa, &pg); /* a block of K = 5 of every strided row */
        cpu->block_partial(pa, inp + 3, (size_t)IC, w + 7, (size_t)IC, M, 5, IC > 12 ? 5 : 1);
        gpu->block_partial(pg, inp + 3, (size_t)IC, w + 7, (size_t)IC, M, 5, IC > 12 ? 5 : 1);
        same_bits("block_partial", pa, pg, (size_t)M * 5);
        free(pa), free(pg);
        free(inp), free(w), free(b), free(dout);
    }
    assert_int_equal(gpu->status(NULL, 0), 0);
}

static void test_row_and_pointwise_ops_match(void **state) {
    (void)state;
    NEED_GPU();
    static const int shapes[][2] = {{1, 32}, {17, 33}, {128, 256}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        int M = shapes[k][0], C = shapes[k][1];
        size_t n = (size_t)M * C;
        float *x = normals(n, 10, 3), *y = normals(n, 11, 1), *d = normals(n, 12, 1);
        float *shift = normals((size_t)C, 13, 0.5f), *scale = normals((size_t)C, 14, 0.5f);
        float *a, *g, *ma, *mg, *ra, *rg;
        outputs(n, &a, &g);
        outputs((size_t)M, &ma, &mg);
        outputs((size_t)M, &ra, &rg);
        cpu->layernorm_forward(a, ma, ra, x, M, C);
        gpu->layernorm_forward(g, mg, rg, x, M, C);
        same_bits("layernorm_forward", a, g, n);
        same_bits("layernorm_forward mean", ma, mg, (size_t)M);
        same_bits("layernorm_forward rstd", ra, rg, (size_t)M);
        cpu->layernorm_backward(a, d, x, ma, ra, M, C);
        gpu->layernorm_backward(g, d, x, ma, ra, M, C);
        same_bits("layernorm_backward", a, g, n);
        cpu->modulate_forward(a, x, shift, scale, M, C);
        gpu->modulate_forward(g, x, shift, scale, M, C);
        same_bits("modulate_forward", a, g, n);
        float *sa, *sg, *ca, *cg;
        outputs((size_t)C, &sa, &sg);
        outputs((size_t)C, &ca, &cg);
        cpu->modulate_backward(a, sa, ca, d, x, scale, M, C);
        gpu->modulate_backward(g, sg, cg, d, x, scale, M, C);
        same_bits("modulate_backward dinp", a, g, n);
        same_bits("modulate_backward dshift", sa, sg, (size_t)C);
        same_bits("modulate_backward dscale", ca, cg, (size_t)C);
        for (int gated = 0; gated < 2; gated++) {
            const float *gate = gated ? scale : NULL;
            cpu->residual_forward(a, x, gate, y, M, C);
            gpu->residual_forward(g, x, gate, y, M, C);
            same_bits("residual_forward", a, g, n);
            cpu->residual_backward(a, sa, d, gate, y, M, C);
            gpu->residual_backward(g, sg, d, gate, y, M, C);
            same_bits("residual_backward dy", a, g, n);
            same_bits("residual_backward dgate", sa, sg, (size_t)C);
        }
        cpu->gelu_forward(a, x, n);
        gpu->gelu_forward(g, x, n);
        same_bits("gelu_forward", a, g, n);
        cpu->gelu_backward(a, d, x, n);
        gpu->gelu_backward(g, d, x, n);
        same_bits("gelu_backward", a, g, n);
        cpu->silu_forward(a, x, n);
        gpu->silu_forward(g, x, n);
        same_bits("silu_forward", a, g, n);
        static const float ts[] = {0.0f, 0.37f, 0.999f};
        for (size_t t = 0; t < 3; t++) {
            cpu->timestep_embedding(a, ts[t], C);
            gpu->timestep_embedding(g, ts[t], C);
            same_bits("timestep_embedding", a, g, (size_t)C);
        }
        for (size_t i = 0; i < n; i++) { /* every kind of fp32: ties, NaN, inf, subnormals */
            uint32_t u = (uint32_t)ppv_rng_bits(5, k, i);
            if (i % 7 == 0) u = (u & 0xffff0000u) | 0x8000u; /* a tie */
            memcpy(&a[i], &u, sizeof u);
            memcpy(&g[i], &u, sizeof u);
        }
        cpu->round_bf16(a, n);
        gpu->round_bf16(g, n);
        same_bits("round_bf16", a, g, n);
        free(a), free(g), free(ma), free(mg), free(ra), free(rg), free(sa), free(sg), free(ca),
            free(cg);
        free(x), free(y), free(d), free(shift), free(scale);
    }
    assert_int_equal(gpu->status(NULL, 0), 0);
}

/* Attention forward and backward in the model's two layouts: q, k, v
 * interleaved in one qkv buffer (self-attention), and q apart from an
 * interleaved kv (cross-attention). */
static void test_attention_ops_match(void **state) {
    (void)state;
    NEED_GPU();
    static const int shapes[][4] = {
        {8, 8, 32, 2}, {13, 29, 48, 3}, {64, 64, 128, 4}, {1, 5, 16, 1}};
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        int T = shapes[k][0], Tk = shapes[k][1], C = shapes[k][2], H = shapes[k][3];
        for (int self = 0; self < 2; self++) {
            if (self && T != Tk) continue;
            int ldq = self ? 3 * C : C, ldkv = self ? 3 * C : 2 * C;
            size_t nq = (size_t)T * ldq, nkv = (size_t)Tk * ldkv;
            float *qbuf = normals(nq, 20, 1), *kvbuf = self ? qbuf : normals(nkv, 21, 1);
            const float *q = qbuf, *kk = self ? qbuf + C : kvbuf,
                        *v = self ? qbuf + 2 * C : kvbuf + C;
            float *dout = normals((size_t)T * C, 22, 1), *scratch = malloc(sizeof(float) * 2 * Tk);
            float *a, *g, *sa, *sg;
            outputs((size_t)T * C, &a, &g);
            outputs((size_t)H * T * 2, &sa, &sg);
            cpu->attention_forward(a, sa, q, ldq, kk, v, ldkv, T, Tk, C, H, scratch);
            gpu->attention_forward(g, sg, q, ldq, kk, v, ldkv, T, Tk, C, H, scratch);
            same_bits("attention_forward", a, g, (size_t)T * C);
            same_bits("attention_forward stats", sa, sg, (size_t)H * T * 2);
            /* gradients into the same layouts as the inputs */
            float *dqa, *dqg, *dkva, *dkvg;
            outputs(nq, &dqa, &dqg);
            outputs(self ? 1 : nkv, &dkva, &dkvg);
            float *dka = self ? dqa + C : dkva, *dva = self ? dqa + 2 * C : dkva + C;
            float *dkg = self ? dqg + C : dkvg, *dvg = self ? dqg + 2 * C : dkvg + C;
            cpu->attention_backward(dqa, dka, dva, dout, q, ldq, kk, v, ldkv, sa, T, Tk, C, H,
                                    scratch);
            gpu->attention_backward(dqg, dkg, dvg, dout, q, ldq, kk, v, ldkv, sa, T, Tk, C, H,
                                    scratch);
            same_bits(self ? "attention_backward dqkv" : "attention_backward dq", dqa, dqg, nq);
            if (!self) same_bits("attention_backward dkv", dkva, dkvg, nkv);
            free(a), free(g), free(sa), free(sg), free(dqa), free(dqg), free(dkva), free(dkvg);
            free(dout), free(scratch), free(qbuf);
            if (!self) free(kvbuf);
        }
    }
    /* the generator's attention: cached keys (with and without a bias) then the chunk's */
    static const int kv[][5] = {
        {6, 4, 2, 8, 0}, {12, 9, 3, 16, 1}, {48, 0, 4, 32, 0}, {5, 7, 1, 4, 1}};
    for (size_t k = 0; k < sizeof kv / sizeof kv[0]; k++) {
        int M = kv[k][0], n0 = kv[k][1], nh = kv[k][2], hd = kv[k][3], n1 = M;
        float bias0 = kv[k][4] ? -0.75f : 0.0f;
        size_t ld = (size_t)nh * hd;
        float *q = normals((size_t)M * ld, 30, 1), *k0 = normals((size_t)(n0 + 1) * ld, 31, 1);
        float *v0 = normals((size_t)(n0 + 1) * ld, 32, 1), *k1 = normals((size_t)n1 * ld, 33, 1);
        float *v1 = normals((size_t)n1 * ld, 34, 1), *scratch = malloc(sizeof(float) * (n0 + n1));
        float *a, *g;
        outputs((size_t)M * ld, &a, &g);
        cpu->kv_attention_forward(a, q, k0, v0, n0, bias0, k1, v1, n1, M, nh, hd, scratch);
        gpu->kv_attention_forward(g, q, k0, v0, n0, bias0, k1, v1, n1, M, nh, hd, scratch);
        same_bits("kv_attention_forward", a, g, (size_t)M * ld);
        cpu->kv_attention_forward(a, q, k0, v0, n0 + 1, bias0, NULL, NULL, 0, M, nh, hd, scratch);
        gpu->kv_attention_forward(g, q, k0, v0, n0 + 1, bias0, NULL, NULL, 0, M, nh, hd, scratch);
        same_bits("kv_attention_forward, cached keys only", a, g, (size_t)M * ld);
        free(a), free(g), free(q), free(k0), free(v0), free(k1), free(v1), free(scratch);
    }
    assert_int_equal(gpu->status(NULL, 0), 0);
}

/* ---- the cuBLAS matmuls ---------------------------------------------------------------- */

/* The table with the matmuls on cuBLAS, or NULL. */
static const ppvk_ops *cublas_ops(void) {
    char why[512];
    const ppvk_ops *ops = ppvk_device_ops("cuda:cublas", why, sizeof why);
    if (!ops) print_message("cuBLAS path not usable here: %s\n", why);
    return ops;
}

/* Largest ULP distance seen, reported by the test that measured it. */
static uint64_t max_ulp(const float *a, const float *b, size_t n) {
    uint64_t m = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t ua, ub;
        memcpy(&ua, &a[i], 4), memcpy(&ub, &b[i], 4);
        uint64_t d = ppv_ulp_distance(ua, ub, 32);
        m = d > m ? d : m;
    }
    return m;
}

/* out[i] within 2 gamma_K sum_k |x_ik y_ik| (+ one rounding of |want| for
 * a bias added after the sum) of want[i]: two fp32 sums of the same K
 * products in different orders each lie within gamma_K = K u / (1 - K u)
 * (u = 2^-24) of the exact sum (Higham, Accuracy and Stability, 3.1).
 * mags[i] holds the sum of |products|. */
static void within_sum_bound(const char *what, const float *got, const float *want,
                             const double *mags, size_t n, int K, int bias) {
    double u = 0x1p-24, gamma = K * u / (1 - K * u);
    for (size_t i = 0; i < n; i++) {
        double bound = 2 * gamma * mags[i] + (bias ? 2 * u * fabs((double)want[i]) : 0);
        if (fabs((double)got[i] - (double)want[i]) > bound)
            fail_msg("%s: value %zu: cuBLAS %.9g, reference %.9g, |difference| %.3g > bound %.3g",
                     what, i, (double)got[i], (double)want[i], fabs((double)got[i] - want[i]),
                     bound);
    }
}

/* Every matmul op on cuBLAS: within the summation bound of the reference,
 * and the same bits when run again (deterministic run to run). */
static void test_cublas_matmuls_within_bound_and_repeatable(void **state) {
    (void)state;
    NEED_GPU();
    (void)gpu;
    const ppvk_ops *blas = cublas_ops();
    if (!blas) skip();
    static const int shapes[][3] = {{1, 32, 192}, {7, 33, 17}, {64, 256, 96}, {130, 640, 300}};
    uint64_t worst = 0;
    for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
        int M = shapes[k][0], IC = shapes[k][1], OC = shapes[k][2];
        float *inp = normals((size_t)M * IC, 1, 1), *w = normals((size_t)OC * IC, 2, 0.125f);
        float *b = normals((size_t)OC, 3, 0.5f), *dout = normals((size_t)M * OC, 4, 1);
        size_t nmax = (size_t)(M > OC ? M : OC) * (size_t)(IC > OC ? IC : OC);
        double *mag = calloc(nmax, sizeof *mag);
        float *r, *g, *g2 = malloc(nmax * sizeof *g2);
        outputs(nmax, &r, &g);
        /* forward: sum over IC of inp[t][i] w[o][i] */
        for (int t = 0; t < M; t++)
            for (int o = 0; o < OC; o++)
                for (int i = 0; i < IC; i++)
                    mag[(size_t)t * OC + o] +=
                        fabs((double)inp[(size_t)t * IC + i] * w[(size_t)o * IC + i]);
        cpu->linear_forward(r, inp, w, b, M, IC, OC);
        blas->linear_forward(g, inp, w, b, M, IC, OC);
        blas->linear_forward(g2, inp, w, b, M, IC, OC);
        within_sum_bound("linear_forward", g, r, mag, (size_t)M * OC, IC, 1);
        assert_memory_equal(g, g2, (size_t)M * OC * sizeof *g);
        worst = max_ulp(g, r, (size_t)M * OC) > worst ? max_ulp(g, r, (size_t)M * OC) : worst;
        /* input backward: sum over OC of dout[t][o] w[o][i] */
        memset(mag, 0, nmax * sizeof *mag);
        for (int t = 0; t < M; t++)
            for (int i = 0; i < IC; i++)
                for (int o = 0; o < OC; o++)
                    mag[(size_t)t * IC + i] +=
                        fabs((double)dout[(size_t)t * OC + o] * w[(size_t)o * IC + i]);
        cpu->linear_backward_input(r, dout, w, M, IC, OC);
        blas->linear_backward_input(g, dout, w, M, IC, OC);
        blas->linear_backward_input(g2, dout, w, M, IC, OC);
        within_sum_bound("linear_backward_input", g, r, mag, (size_t)M * IC, OC, 0);
        assert_memory_equal(g, g2, (size_t)M * IC * sizeof *g);
        worst = max_ulp(g, r, (size_t)M * IC) > worst ? max_ulp(g, r, (size_t)M * IC) : worst;
        /* weight backward: sum over M of dout[t][o] inp[t][i]; db is the reference's */
        memset(mag, 0, nmax * sizeof *mag);
        for (int o = 0; o < OC; o++)
            for (int i = 0; i < IC; i++)
                for (int t = 0; t < M; t++)
                    mag[(size_t)o * IC + i] +=
                        fabs((double)dout[(size_t)t * OC + o] * inp[(size_t)t * IC + i]);
        float *dbr = malloc(sizeof(float) * OC), *dbg = malloc(sizeof(float) * OC);
        cpu->linear_backward_weight(r, dbr, dout, inp, M, IC, OC);
        blas->linear_backward_weight(g, dbg, dout, inp, M, IC, OC);
        blas->linear_backward_weight(g2, dbg, dout, inp, M, IC, OC);
        within_sum_bound("linear_backward_weight", g, r, mag, (size_t)OC * IC, M, 0);
        assert_memory_equal(g, g2, (size_t)OC * IC * sizeof *g);
        same_bits("linear_backward_weight db (the reference's column sums)", dbr, dbg, (size_t)OC);
        worst = max_ulp(g, r, (size_t)OC * IC) > worst ? max_ulp(g, r, (size_t)OC * IC) : worst;
        free(dbr), free(dbg), free(mag), free(r), free(g), free(g2);
        free(inp), free(w), free(b), free(dout);
    }
    assert_int_equal(blas->status(NULL, 0), 0);
    print_message("cuBLAS matmuls against the reference: at most %llu ULP\n",
                  (unsigned long long)worst);
}

/* A whole pipeline step with the matmuls on cuBLAS: the gradients within
 * PPV_CUBLAS_GRAD_BOUND of the CPU's, and the same bits run after run. */
static void test_cublas_run_within_bound_and_repeatable(void **state) {
    (void)state;
    NEED_GPU();
    (void)gpu, (void)cpu;
    if (!cublas_ops()) skip();
    char err[1024];
    ppv_gen_params gp = {4, 8, 0};
    ppv_schedule *s = NULL;
    assert_int_equal(ppv_generate("1f1b", &gp, &s, err, sizeof err), 0);
    ppv_run_options o = ppv_run_defaults();
    o.model.layers = 8;
    o.model.d_model = 128;
    o.model.d_ff = 256;
    ppv_run_report *a = NULL, *g = NULL, *g2 = NULL;
    assert_int_equal(ppv_run(s, &o, &a, err, sizeof err), 0);
    o.device = "cuda:cublas";
    assert_int_equal(ppv_run(s, &o, &g, err, sizeof err), 0);
    assert_int_equal(ppv_run(s, &o, &g2, err, sizeof err), 0);
    assert_int_equal(g->grad_digest, g2->grad_digest);
    assert_int_equal(a->ngrads, g->ngrads);
    ppv_grad_diff d;
    ppv_grads_compare(g->grads, a->grads, a->ngrads, &d);
    print_message("cuBLAS step against the reference: max %llu ULP, relative 2-norm %.3g "
                  "(bound %.3g)\n",
                  (unsigned long long)d.max_ulp, d.rel_l2, PPV_CUBLAS_GRAD_BOUND);
    assert_false(d.bitwise_equal); /* another order: if this holds, cuBLAS was not used */
    assert_true(d.rel_l2 <= PPV_CUBLAS_GRAD_BOUND);
    ppv_run_report_free(a), ppv_run_report_free(g), ppv_run_report_free(g2);
    ppv_schedule_free(s);

    char *f = gen_file("c.csv", "1f1b", "2", "4");
    run_result r = RUN("run", f, "--device", "cuda", "--gemm", "cublas");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "device: cuda, matmuls on cuBLAS"));
    assert_non_null(strstr(r.out, "within the bound"));
    run_free(&r);
}

/* The distance the cuBLAS bound is judged by, on numbers worked by hand. */
static void test_relative_2norm_of_gradients(void **state) {
    (void)state;
    float b[] = {3, 4, 0}, a[] = {3, 4.5f, 0};
    ppv_grad_diff d;
    ppv_grads_compare(a, b, 3, &d);
    assert_true(d.rel_l2 == 0.1); /* ||(0, 0.5, 0)|| / ||(3, 4, 0)|| = 0.5 / 5 */
    assert_int_equal(d.max_ulp, 0x40900000u - 0x40800000u);
    a[2] = NAN;
    ppv_grads_compare(a, b, 3, &d);
    assert_true(isinf(d.rel_l2)); /* a NaN on one side is never within a bound */
    ppv_grads_compare(b, b, 3, &d);
    assert_true(d.rel_l2 == 0.0 && d.bitwise_equal);
}

/* ---- whole steps ------------------------------------------------------------------------ */

/* Forward, loss gradient, input backward and weight backward of a 3-layer
 * stack on a model of width 64: every byte the same on both devices. */
static void test_training_step_matches(void **state) {
    (void)state;
    NEED_GPU();
    (void)cpu;
    ppv_model_config cfg = {3, 64, 4, 128, 16, 8, 7};
    char err[512];
    ppv_model *mc = ppv_model_new(&cfg, err, sizeof err),
              *mg = ppv_model_new(&cfg, err, sizeof err);
    assert_non_null(mc);
    assert_non_null(mg);
    assert_int_equal(ppv_model_set_device(mg, "cuda", err, sizeof err), 0);
    assert_string_equal(ppv_model_device(mg), "cuda");
    size_t tc = (size_t)cfg.seq_len * cfg.d_model, sb = ppv_layers_saved_bytes(mc, 0, 3);
    size_t wb = ppv_layers_wstate_bytes(mc, 0, 3), ng = ppv_model_grad_count(mc, 0, 3);
    ppv_model *ms[2] = {mc, mg};
    void *saved[2], *ws[2];
    ppv_bf16 *y[2], *dy[2], *dx[2];
    float *dp[2];
    for (int d = 0; d < 2; d++) {
        ppv_mb_inputs in;
        assert_int_equal(ppv_mb_inputs_init(ms[d], 1, &in), 0);
        saved[d] = calloc(1, sb), ws[d] = calloc(1, wb);
        y[d] = calloc(tc, 2), dy[d] = calloc(tc, 2), dx[d] = calloc(tc, 2);
        dp[d] = calloc(ng, sizeof(float));
        assert_int_equal(ppv_layers_forward(ms[d], 0, 3, &in, in.x, y[d], saved[d]), 0);
        assert_int_equal(ppv_loss_backward(ms[d], &in, y[d], dy[d]), 0);
        assert_int_equal(ppv_layers_backward_input(ms[d], 0, 3, &in, saved[d], dy[d], dx[d], ws[d]),
                         0);
        assert_int_equal(ppv_layers_backward_weight(ms[d], 0, 3, &in, ws[d], dp[d]), 0);
        ppv_mb_inputs_free(&in);
    }
    assert_int_equal(ppv_model_device_status(mg, err, sizeof err), 0);
    assert_memory_equal(y[0], y[1], tc * 2);
    assert_memory_equal(saved[0], saved[1], sb);
    assert_memory_equal(dx[0], dx[1], tc * 2);
    assert_memory_equal(ws[0], ws[1], wb);
    same_bits("weight gradients", dp[0], dp[1], ng);
    for (int d = 0; d < 2; d++)
        free(saved[d]), free(ws[d]), free(y[d]), free(dy[d]), free(dx[d]), free(dp[d]);
    ppv_model_free(mc);
    ppv_model_free(mg);
}

/* Every generated kind on the engine, stash and recompute: the same loss,
 * gradients and peaks on both devices. */
static void test_pipeline_runs_match_for_every_kind(void **state) {
    (void)state;
    NEED_GPU();
    (void)cpu;
    char err[1024];
    int kinds = 0;
    for (const char *const *kind = ppv_generator_names(); *kind; kind++) {
        ppv_gen_params gp = {2, 4, 0};
        ppv_schedule *s = NULL;
        if (ppv_generate(*kind, &gp, &s, err, sizeof err) < 0) continue; /* a size it refuses */
        for (int rc = 0; rc < 2; rc++) {
            ppv_recompute all[8] = {{0}};
            for (int st = 0; st < s->nstages && st < 8; st++)
                all[st] = (ppv_recompute){rc ? PPV_RC_SELECTIVE : PPV_RC_NONE, 0};
            ppv_run_options o = ppv_run_defaults();
            o.recompute = s->nstages <= 8 ? all : NULL;
            ppv_run_report *a = NULL, *g = NULL;
            assert_int_equal(ppv_run(s, &o, &a, err, sizeof err), 0);
            o.device = "cuda";
            if (ppv_run(s, &o, &g, err, sizeof err) < 0) fail_msg("%s on cuda: %s", *kind, err);
            assert_int_equal(a->world.status, PPV_RUN_DONE);
            assert_int_equal(g->world.status, PPV_RUN_DONE);
            if (a->grad_digest != g->grad_digest || a->loss != g->loss)
                fail_msg("%s (%s): CPU grad digest %016llx loss %.9g, GPU %016llx loss %.9g", *kind,
                         rc ? "selective" : "stash", (unsigned long long)a->grad_digest, a->loss,
                         (unsigned long long)g->grad_digest, g->loss);
            assert_memory_equal(a->peak_bytes, g->peak_bytes,
                                (size_t)a->nranks * sizeof *a->peak_bytes);
            ppv_run_report_free(a);
            ppv_run_report_free(g);
        }
        ppv_schedule_free(s);
        kinds++;
    }
    assert_true(kinds >= 9);
}

/* The inference pipeline: PP0 and PP1 (mesh 2, 4), KV stash and recompute,
 * a hard cut: the same output digest on both devices. */
static void test_pp_runs_match(void **state) {
    (void)state;
    NEED_GPU();
    (void)cpu;
    static const int cases[][3] = {{1, 0, 0}, {2, 1, 0}, {4, 1, 1}, {2, 0, 1}};
    char err[1024];
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        ppv_pp_options o = ppv_pp_defaults();
        o.mesh = cases[k][0];
        o.kv_recompute = cases[k][1];
        o.chunks = 4;
        if (cases[k][2]) o.cuts[o.ncuts++] = 2;
        ppv_pp_report *a = NULL, *g = NULL;
        assert_int_equal(ppv_pp_run(&o, &a, err, sizeof err), 0);
        o.device = "cuda";
        if (ppv_pp_run(&o, &g, err, sizeof err) < 0) fail_msg("pp on cuda: %s", err);
        assert_true(a->ok);
        assert_true(g->ok);
        if (a->output_digest != g->output_digest)
            fail_msg("pp mesh %d kv %s: CPU %016llx, GPU %016llx", o.mesh,
                     o.kv_recompute ? "recompute" : "stash", (unsigned long long)a->output_digest,
                     (unsigned long long)g->output_digest);
        ppv_pp_report_free(a);
        ppv_pp_report_free(g);
    }
}

/* The command line: run, replay of the shipped goldens (recorded on the
 * CPU) and pp, each with --device cuda. */
static void test_command_line_on_cuda(void **state) {
    (void)state;
    NEED_GPU();
    (void)cpu;
    char *s = gen_file("f.csv", "zbv", "2", "4");
    run_result r = RUN("run", s, "--device", "cuda");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "device: cuda"));
    assert_non_null(strstr(r.out, "bitwise equal"));
    run_free(&r);
    static const char *const goldens[] = {"train_1f1b_p4_m8.h5", "train_zbv_p2_m4_recompute.h5",
                                          "infer_pp1_stash_cut.h5",
                                          "infer_pp1_mesh4_recompute_cut.h5"};
    for (size_t k = 0; k < sizeof goldens / sizeof goldens[0]; k++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", PPV_GOLDEN_DIR, goldens[k]);
        r = RUN("replay", path, "--device", "cuda");
        if (r.code != 0)
            fail_msg("replay %s --device cuda: exit %d\n%s%s", goldens[k], r.code, r.out, r.err);
        run_free(&r);
    }
    r = RUN("pp", "--mesh", "2", "--chunks", "3", "--device", "cuda", "--json");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "\"device\":\"cuda\""));
    run_free(&r);
}

/* Recordings cross devices both ways: a training golden and an inference
 * recording made on the GPU replay on the CPU (the shipped goldens, made
 * on the CPU, replay on the GPU in test_command_line_on_cuda). */
static void test_recorded_on_gpu_replays_on_cpu(void **state) {
    (void)state;
    NEED_GPU();
    (void)gpu, (void)cpu;
    char *f = gen_file("r.csv", "zbv", "2", "4");
    char train[4096], infer[4096];
    snprintf(train, sizeof train, "%s", tmp_path("train_gpu.h5"));
    snprintf(infer, sizeof infer, "%s", tmp_path("infer_gpu.h5"));
    run_result r = RUN("record", train, f, "--device", "cuda", "--recompute", "selective");
    assert_int_equal(r.code, 0);
    run_free(&r);
    r = RUN("replay", train);
    if (r.code != 0)
        fail_msg("replay on the CPU of a GPU recording: exit %d\n%s%s", r.code, r.out, r.err);
    run_free(&r);
    r = RUN("pp", "--mesh", "2", "--kv", "recompute", "--chunks", "4", "--hard-cut-at", "2",
            "--device", "cuda", "--record", infer);
    assert_int_equal(r.code, 0);
    run_free(&r);
    r = RUN("replay", infer);
    if (r.code != 0)
        fail_msg("replay on the CPU of a GPU pp recording: exit %d\n%s%s", r.code, r.out, r.err);
    run_free(&r);
    r = RUN("replay", infer, "--mesh", "4", "--device", "cuda");
    assert_int_equal(r.code, 0);
    run_free(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unknown_device_is_refused),
        cmocka_unit_test(test_cuda_without_a_gpu_is_an_error_not_the_cpu),
        cmocka_unit_test(test_device_option_takes_only_cpu_or_cuda),
        cmocka_unit_test(test_device_results_are_compared_not_trusted),
        cmocka_unit_test(test_a_failed_device_op_fails_the_command),
        cmocka_unit_test(test_cublas_gradients_are_judged_by_the_bound),
        cmocka_unit_test(test_linear_ops_match),
        cmocka_unit_test(test_row_and_pointwise_ops_match),
        cmocka_unit_test(test_attention_ops_match),
        cmocka_unit_test(test_training_step_matches),
        cmocka_unit_test(test_pipeline_runs_match_for_every_kind),
        cmocka_unit_test(test_pp_runs_match),
        cmocka_unit_test(test_command_line_on_cuda),
        cmocka_unit_test(test_recorded_on_gpu_replays_on_cpu),
        cmocka_unit_test(test_relative_2norm_of_gradients),
        cmocka_unit_test(test_cublas_matmuls_within_bound_and_repeatable),
        cmocka_unit_test(test_cublas_run_within_bound_and_repeatable),
    };
    return cmocka_run_group_tests(tests, NULL, tmp_cleanup);
}
