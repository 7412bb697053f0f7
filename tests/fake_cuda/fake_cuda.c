/* fake_cuda.c - a stand-in for the CUDA module (kernels/cuda/ops.cu) with
 * the same entry point, so that the device plumbing (loading, the tables,
 * failures, comparisons) is tested on machines without a GPU. Its ops are
 * the CPU's, changed as PPV_FAKE_CUDA says:
 *   (unset)      the CPU's bits exactly (a perfect device)
 *   nodevice     the entry answers "no CUDA device"
 *   fail:N       the N-th op (from 1) fails: status() reports it from then
 *                on, as the real module's does (whose failed ops write NaN;
 *                these go on computing the CPU's values, so that nothing
 *                reads memory no op wrote)
 *   flip         linear_forward flips bit 16 of its first output (the lowest bit
 *                bf16 keeps, so the model's rounding after the op keeps it)
 *   scale        the cuBLAS table's matmuls return 1.5 times the product
 * The tests point ppv at it with PPV_CUDA_MODULE.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels_internal.h"

static long calls, fail_at;
static int failed;
static char failure[200];
static int flip, scale;

/* Counts an op, failing the fail_at-th. */
static void enter(const char *op) {
    if (++calls == fail_at && !failed) {
        snprintf(failure, sizeof failure, "CUDA op %s: injected failure (op %ld)", op, calls);
        failed = 1;
    }
}

static void linear_forward(float *out, const float *inp, const float *w, const float *b, int M,
                           int IC, int OC) {
    enter("linear_forward");
    ppvk_cpu_ops.linear_forward(out, inp, w, b, M, IC, OC);
    if (flip && M > 0 && OC > 0) {
        unsigned u;
        memcpy(&u, out, sizeof u);
        u ^= 1u << 16;
        memcpy(out, &u, sizeof u);
    }
}

static void scaled(float *x, size_t n) {
    for (size_t i = 0; scale && i < n; i++)
        x[i] *= 1.5f;
}

static void blas_linear_forward(float *out, const float *inp, const float *w, const float *b, int M,
                                int IC, int OC) {
    enter("linear_forward (cuBLAS)");
    ppvk_cpu_ops.linear_forward(out, inp, w, b, M, IC, OC);
    scaled(out, (size_t)M * OC);
}

#define PASS(name, params, args)                                                                   \
    static void name params {                                                                      \
        enter(#name);                                                                              \
        ppvk_cpu_ops.name args;                                                                    \
    }
PASS(linear_backward_input, (float *a, const float *b, const float *c, int d, int e, int f),
     (a, b, c, d, e, f))
PASS(linear_backward_weight,
     (float *a, float *b, const float *c, const float *d, int e, int f, int g),
     (a, b, c, d, e, f, g))
PASS(layernorm_forward, (float *a, float *b, float *c, const float *d, int e, int f),
     (a, b, c, d, e, f))
PASS(layernorm_backward,
     (float *a, const float *b, const float *c, const float *d, const float *e, int f, int g),
     (a, b, c, d, e, f, g))
PASS(modulate_forward, (float *a, const float *b, const float *c, const float *d, int e, int f),
     (a, b, c, d, e, f))
PASS(modulate_backward,
     (float *a, float *b, float *c, const float *d, const float *e, const float *f, int g, int h),
     (a, b, c, d, e, f, g, h))
PASS(residual_forward, (float *a, const float *b, const float *c, const float *d, int e, int f),
     (a, b, c, d, e, f))
PASS(residual_backward,
     (float *a, float *b, const float *c, const float *d, const float *e, int f, int g),
     (a, b, c, d, e, f, g))
PASS(gelu_forward, (float *a, const float *b, size_t n), (a, b, n))
PASS(gelu_backward, (float *a, const float *b, const float *c, size_t n), (a, b, c, n))
PASS(silu_forward, (float *a, const float *b, size_t n), (a, b, n))
PASS(timestep_embedding, (float *a, float t, int c), (a, t, c))
PASS(attention_forward,
     (float *a, float *b, const float *c, int d, const float *e, const float *f, int g, int h,
      int i, int j, int k, float *l),
     (a, b, c, d, e, f, g, h, i, j, k, l))
PASS(attention_backward,
     (float *a, float *b, float *c, const float *d, const float *e, int f, const float *g,
      const float *h, int i, const float *j, int k, int l, int m, int n, float *o),
     (a, b, c, d, e, f, g, h, i, j, k, l, m, n, o))
PASS(kv_attention_forward,
     (float *a, const float *b, const float *c, const float *d, int e, float f, const float *g,
      const float *h, int i, int j, int k, int l, float *m),
     (a, b, c, d, e, f, g, h, i, j, k, l, m))
PASS(block_partial,
     (float *a, const float *b, size_t c, const float *d, size_t e, int f, int g, int h),
     (a, b, c, d, e, f, g, h))
PASS(round_bf16, (float *a, size_t n), (a, n))

static int status(char *err, size_t errlen) {
    if (!failed) return 0;
    if (err && errlen) snprintf(err, errlen, "%s", failure);
    return -1;
}

static ppvk_ops table(const char *name, int cublas) {
    ppvk_ops t = {
        .name = name,
        .linear_forward = cublas ? blas_linear_forward : linear_forward,
        .linear_backward_input = linear_backward_input,
        .linear_backward_weight = linear_backward_weight,
        .layernorm_forward = layernorm_forward,
        .layernorm_backward = layernorm_backward,
        .modulate_forward = modulate_forward,
        .modulate_backward = modulate_backward,
        .residual_forward = residual_forward,
        .residual_backward = residual_backward,
        .gelu_forward = gelu_forward,
        .gelu_backward = gelu_backward,
        .silu_forward = silu_forward,
        .timestep_embedding = timestep_embedding,
        .attention_forward = attention_forward,
        .attention_backward = attention_backward,
        .kv_attention_forward = kv_attention_forward,
        .block_partial = block_partial,
        .round_bf16 = round_bf16,
        .status = status,
    };
    return t;
}

static ppvk_ops reference_table, cublas_table;

__attribute__((visibility("default"))) const ppvk_ops *
ppvk_cuda_ops_open(const char *variant, char *err, size_t errlen) {
    const char *how = getenv("PPV_FAKE_CUDA");
    how = how ? how : "";
    if (strcmp(how, "nodevice") == 0) {
        snprintf(err, errlen, "no CUDA device (the stand-in module)");
        return NULL;
    }
    if (strncmp(how, "fail:", 5) == 0) fail_at = atol(how + 5);
    flip = strcmp(how, "flip") == 0;
    scale = strcmp(how, "scale") == 0;
    reference_table = table("cuda", 0);
    cublas_table = table("cuda:cublas", 1);
    return strcmp(variant, "cublas") == 0 ? &cublas_table : &reference_table;
}
