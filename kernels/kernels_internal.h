/* kernels_internal.h - private to kernels/ (and its tests): portable math,
 * bf16 array helpers, the matmul's ISA variants, and the fp32 ops the model
 * is built from.
 *
 * Ops follow llm.c: `<op>_forward` / `<op>_backward`, fp32 in and fp32 out,
 * shapes in trailing comments, row-major. Inputs are bf16 values held in
 * floats; an op never rounds its own output to bf16, the model does that
 * after each op (ppvk_round_bf16). Every reduction is a single fp32
 * accumulator visited in a fixed order, so results do not depend on how
 * many rows one call processes. Backward functions write (never
 * accumulate) their outputs.
 */
#ifndef PPV_KERNELS_INTERNAL_H
#define PPV_KERNELS_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "arith.h"
#include "ppv_kernels.h"

#ifdef __cplusplus /* the CUDA files */
extern "C" {
#endif

/* ---- portable math ----------------------------------------------------------
 * ppvk_exp, ppvk_log, ppvk_cos_turns (cos 2 pi u), ppvk_tanh and the other
 * arithmetic that the CPU ops and the CUDA kernels share: arith.h. */

/* ---- bf16 arrays ---------------------------------------------------------------- */

void ppvk_bf16_to_f32(float *out, const ppv_bf16 *in, size_t n);
void ppvk_f32_to_bf16(ppv_bf16 *out, const float *in, size_t n);
/* Rounds x to bf16 precision in place (x stays fp32, holding bf16 values). */
void ppvk_round_bf16(float *x, size_t n);

/* ---- matmul ISA variants ----------------------------------------------------------
 * All variants compute the same bits; they differ in vector width only. */

enum { PPVK_ISA_GENERIC, PPVK_ISA_AVX2, PPVK_ISA_AVX512, PPVK_ISA_COUNT };

const char *ppvk_isa_name(int isa);
/* 1 if this machine can run variant isa. */
int ppvk_isa_supported(int isa);
/* The threads ppv_matmul_f32 uses for an M x N x K product when asked
 * for `threads`: at most that, and one per 64 MFLOP. */
int32_t ppvk_matmul_threads(int32_t M, int32_t N, int32_t K, int32_t threads);
/* ppv_matmul_f32 forced onto one variant and exactly `threads` threads
 * (fewer only if there are fewer 12-row units); -1 if the machine lacks
 * the variant. */
int ppvk_matmul_f32_isa(float *out, const float *a, const float *w, int32_t M, int32_t N, int32_t K,
                        int32_t threads, int isa);

/* ---- ops ---------------------------------------------------------------------------- */

/* out = inp . w^T + b. b may be NULL. */
void ppvk_linear_forward(float *out, const float *inp, const float *w, const float *b, int M,
                         int IC, int OC); /* out (M, OC), inp (M, IC), w (OC, IC), b (OC) */
/* dinp = dout . w, reduced over o in order. */
void ppvk_linear_backward_input(float *dinp, const float *dout, const float *w, int M, int IC,
                                int OC); /* dinp (M, IC), dout (M, OC), w (OC, IC) */
/* dw = dout^T . inp and db = column sums of dout, reduced over rows in order. */
void ppvk_linear_backward_weight(float *dw, float *db, const float *dout, const float *inp, int M,
                                 int IC, int OC); /* dw (OC, IC), db (OC) */

/* LayerNorm without affine, eps 1e-5; mean and rstd per row are kept for
 * the backward. */
void ppvk_layernorm_forward(float *out, float *mean, float *rstd, const float *inp, int M,
                            int C); /* out, inp (M, C); mean, rstd (M) */
void ppvk_layernorm_backward(float *dinp, const float *dout, const float *inp, const float *mean,
                             const float *rstd, int M, int C); /* dinp, dout, inp (M, C) */

/* adaLN: out = inp * (1 + scale) + shift, one (shift, scale) per channel. */
void ppvk_modulate_forward(float *out, const float *inp, const float *shift, const float *scale,
                           int M, int C); /* out, inp (M, C); shift, scale (C) */
void ppvk_modulate_backward(float *dinp, float *dshift, float *dscale, const float *dout,
                            const float *inp, const float *scale, int M, int C);

/* Gated residual: out = x + gate * y (gate per channel; gate NULL means 1). */
void ppvk_residual_forward(float *out, const float *x, const float *gate, const float *y, int M,
                           int C); /* out, x, y (M, C); gate (C) */
/* dy = dout * gate, dgate = sum over rows of dout * y (dgate unused if gate
 * is NULL). dx is dout itself. */
void ppvk_residual_backward(float *dy, float *dgate, const float *dout, const float *gate,
                            const float *y, int M, int C);

/* GELU, tanh approximation, elementwise. */
void ppvk_gelu_forward(float *out, const float *inp, size_t n);
void ppvk_gelu_backward(float *dinp, const float *dout, const float *inp, size_t n);

/* SiLU, elementwise (applied to the timestep embedding only, which has no
 * gradient, so there is no backward). */
void ppvk_silu_forward(float *out, const float *inp, size_t n);

/* Sinusoidal embedding of t in [0, 1) into C dims: cos then sin of
 * 1000 t * 10000^(-i / (C/2)), i < C/2; a last odd channel is 0. */
void ppvk_timestep_embedding(float *out, float t, int C); /* out (C) */

/* Multi-head attention, softmax over all Tk keys (not causal), scale
 * 1/sqrt(C/H). Query t of head h reads q[t*ldq + h*hd ..], keys and values
 * k[u*ldkv + h*hd ..], v[u*ldkv + h*hd ..]. stats keeps the softmax max and
 * sum per (h, t) so the backward rebuilds the same probabilities.
 * scratch: Tk floats. */
void ppvk_attention_forward(float *out, float *stats, const float *q, int ldq, const float *k,
                            const float *v, int ldkv, int T, int Tk, int C, int H,
                            float *scratch); /* out (T, C), stats (H, T, 2) */
/* dq, dk, dv are written with the strides of q, k, v (dk, dv zeroed first
 * in their head columns). scratch: 2 Tk floats. */
void ppvk_attention_backward(float *dq, float *dk, float *dv, const float *dout, const float *q,
                             int ldq, const float *k, const float *v, int ldkv, const float *stats,
                             int T, int Tk, int C, int H, float *scratch);

/* The generator's attention (dit.c): nh heads of hd columns, row stride
 * ld = nh hd for q, k, v and out; query t of head h attends to n0 keys
 * k0/v0 (their logits get + bias0 unless it is 0), then to n1 keys k1/v1,
 * in that order (k0 may be NULL when n0 is 0, k1 when n1 is). scratch:
 * n0 + n1 floats. */
void ppvk_kv_attention_forward(float *out, const float *q, const float *k0, const float *v0, int n0,
                               float bias0, const float *k1, const float *v1, int n1, int M, int nh,
                               int hd, float *scratch); /* out, q (M, ld); k, v (n, ld) */
/* One block's partial of a row-parallel linear: out (M, N) = a (M, K) .
 * w (N, K)^T with row strides lda and ldw, each value one fp32 sum over
 * k in order; no bias, not rounded. */
void ppvk_block_partial(float *out, const float *a, size_t lda, const float *w, size_t ldw, int M,
                        int N, int K);

/* ---- devices ------------------------------------------------------------------------
 * Where a model's ops run: a table of the ops above (nccl-tests' plug-in
 * style). The CPU table calls them directly; the CUDA table (cuda/ops.cu,
 * loaded from its own module when asked for) runs each on the GPU with
 * the same bits. A device op copies its inputs to the device and its
 * outputs back, so callers keep host pointers; it cannot return an error,
 * so a failure is kept and reported by status(). */
typedef struct ppvk_ops {
    const char *name; /* "cpu", "cuda" */
    void (*linear_forward)(float *out, const float *inp, const float *w, const float *b, int M,
                           int IC, int OC);
    void (*linear_backward_input)(float *dinp, const float *dout, const float *w, int M, int IC,
                                  int OC);
    void (*linear_backward_weight)(float *dw, float *db, const float *dout, const float *inp, int M,
                                   int IC, int OC);
    void (*layernorm_forward)(float *out, float *mean, float *rstd, const float *inp, int M, int C);
    void (*layernorm_backward)(float *dinp, const float *dout, const float *inp, const float *mean,
                               const float *rstd, int M, int C);
    void (*modulate_forward)(float *out, const float *inp, const float *shift, const float *scale,
                             int M, int C);
    void (*modulate_backward)(float *dinp, float *dshift, float *dscale, const float *dout,
                              const float *inp, const float *scale, int M, int C);
    void (*residual_forward)(float *out, const float *x, const float *gate, const float *y, int M,
                             int C);
    void (*residual_backward)(float *dy, float *dgate, const float *dout, const float *gate,
                              const float *y, int M, int C);
    void (*gelu_forward)(float *out, const float *inp, size_t n);
    void (*gelu_backward)(float *dinp, const float *dout, const float *inp, size_t n);
    void (*silu_forward)(float *out, const float *inp, size_t n);
    void (*timestep_embedding)(float *out, float t, int C);
    void (*attention_forward)(float *out, float *stats, const float *q, int ldq, const float *k,
                              const float *v, int ldkv, int T, int Tk, int C, int H,
                              float *scratch);
    void (*attention_backward)(float *dq, float *dk, float *dv, const float *dout, const float *q,
                               int ldq, const float *k, const float *v, int ldkv,
                               const float *stats, int T, int Tk, int C, int H, float *scratch);
    void (*kv_attention_forward)(float *out, const float *q, const float *k0, const float *v0,
                                 int n0, float bias0, const float *k1, const float *v1, int n1,
                                 int M, int nh, int hd, float *scratch);
    void (*block_partial)(float *out, const float *a, size_t lda, const float *w, size_t ldw, int M,
                          int N, int K);
    void (*round_bf16)(float *x, size_t n);
    /* 0, or -1 with the first failed op named in err (its outputs, and
     * everything computed from them, are then undefined). */
    int (*status)(char *err, size_t errlen);
} ppvk_ops;

extern const ppvk_ops ppvk_cpu_ops;

/* The ops of device "cpu", "cuda" or "cuda:cublas" (the CUDA ops with the
 * matmuls on cuBLAS: not the reference's bits); NULL with the reason in
 * err when the name is unknown, ppv was built without CUDA, its module or
 * cuBLAS cannot be loaded or no GPU is present. */
const ppvk_ops *ppvk_device_ops(const char *name, char *err, size_t errlen);

/* Points *ops at device name's table (ppv_model_set_device and
 * ppv_genmodel_set_device); 0, or -1 with the reason in err (*ops kept). */
int ppvk_set_device(const ppvk_ops **ops, const char *name, char *err, size_t errlen);
/* ops->status with a NULL or empty err allowed. */
int ppvk_device_status(const ppvk_ops *ops, char *err, size_t errlen);

/* What the CUDA module exports (cuda/ops.cu): the table of a variant
 * ("reference" or "cublas"), or NULL with the reason in err. */
typedef const ppvk_ops *(*ppvk_cuda_open_fn)(const char *variant, char *err, size_t errlen);
#define PPVK_CUDA_OPEN_SYMBOL "ppvk_cuda_ops_open"

#ifdef __cplusplus
}
#endif

#endif
