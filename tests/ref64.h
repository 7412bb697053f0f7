/* ref64.h - a float64 reference of the training model (the block stack of
 * kernels/model.c) and of each of its ops, for tests only: the one float64
 * reference every test compares ppv's ops and model with. Written from the
 * documented math, not from model.c or ops.c: plain double loops, nothing
 * rounded. It reads the model's weights and a microbatch's inputs through
 * the public kernels API and calls no kernel.
 *
 * One block (x: (T, C), cond: (Tc, C), timestep t):
 *   mod = ada(silu(temb(t)))     shift_a, scale_a, gate_a, shift_m, scale_m, gate_m (C each)
 *   x1  = x  + gate_a * attn_out(selfattn(qkv(ln(x) * (1 + scale_a) + shift_a)))
 *   x2  = x1 + xout(crossattn(xq(ln(x1)), xkv(cond)))
 *   y   = x2 + gate_m * fc2(gelu(fc1(ln(x2) * (1 + scale_m) + shift_m)))
 * ln: LayerNorm without affine, eps 1e-5; attention: softmax over all keys,
 * scale 1/sqrt(C/H); gelu: tanh approximation; loss: mean squared error.
 *
 * The rounding-error model: given a ref64_noise, every op output (an
 * activation or an activation gradient; not the parameter gradients, which
 * ppv keeps in fp32) gets a draw of the error that rounding it to bf16
 * (8 significant bits, to nearest) makes: xi times half its ulp, xi
 * uniform in [-1, 1] and independent. Runs with different seeds sample the
 * first-order effect of ppv's storage on any result (tests/test_ref64.c
 * derives its bounds from them). With round_bf16 set instead, every op
 * output is rounded as ppv stores it (tests/test_kernels.c's model).
 */
#ifndef PPV_TESTS_REF64_H
#define PPV_TESTS_REF64_H

#include <stddef.h>
#include <stdint.h>

#include "ppv_kernels.h"

/* ---- ops ----------------------------------------------------------------------------
 * Row-major; M rows of C (or IC, OC) values. A backward writes (does not
 * accumulate) every gradient it is given. */

/* out = in . w^T + b. */
void ref64_linear_forward(double *out,      // (M, OC)
                          const double *in, // (M, IC)
                          const double *w,  // (OC, IC)
                          const double *b,  // (OC)
                          int M, int IC, int OC);
/* din = dout . w (din NULL: the input needs no gradient); dw = dout^T .
 * in; db = dout summed over rows. */
void ref64_linear_backward(double *din,        // (M, IC) or NULL
                           double *dw,         // (OC, IC)
                           double *db,         // (OC)
                           const double *dout, // (M, OC)
                           const double *in,   // (M, IC)
                           const double *w,    // (OC, IC)
                           int M, int IC, int OC);

/* LayerNorm without affine: (in - mean) / sqrt(var + 1e-5) per row. */
void ref64_layernorm_forward(double *out,      // (M, C)
                             const double *in, // (M, C)
                             int M, int C);
void ref64_layernorm_backward(double *din,        // (M, C)
                              const double *dout, // (M, C)
                              const double *in,   // (M, C), the forward's input
                              int M, int C);

/* adaLN modulation: out = in (1 + scale) + shift. */
void ref64_modulate_forward(double *out,         // (M, C)
                            const double *in,    // (M, C)
                            const double *shift, // (C)
                            const double *scale, // (C)
                            int M, int C);
void ref64_modulate_backward(double *din,         // (M, C)
                             double *dshift,      // (C)
                             double *dscale,      // (C)
                             const double *dout,  // (M, C)
                             const double *in,    // (M, C)
                             const double *scale, // (C)
                             int M, int C);

/* Gated residual: out = x + gate y (gate NULL: 1). */
void ref64_residual_forward(double *out,        // (M, C)
                            const double *x,    // (M, C)
                            const double *gate, // (C) or NULL
                            const double *y,    // (M, C)
                            int M, int C);
/* dy = dout gate; dgate = dout y summed over rows (written only when gate
 * is not NULL); x's gradient is dout itself. */
void ref64_residual_backward(double *dy,         // (M, C)
                             double *dgate,      // (C)
                             const double *dout, // (M, C)
                             const double *gate, // (C) or NULL
                             const double *y,    // (M, C)
                             int M, int C);

/* GELU, tanh approximation: x/2 (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
void ref64_gelu_forward(double *out,      // (n)
                        const double *in, // (n)
                        size_t n);
void ref64_gelu_backward(double *din,        // (n)
                         const double *dout, // (n)
                         const double *in,   // (n)
                         size_t n);

/* x sigmoid(x); out may be in. */
void ref64_silu_forward(double *out,      // (n)
                        const double *in, // (n)
                        size_t n);

/* cos, then sin, of 1000 t 10000^(-i / (C/2)) for i < C/2; an odd last
 * channel 0. */
void ref64_timestep_embedding(double *out, // (C)
                              double t, int C);

/* Multi-head attention over all Tk keys: out = softmax(q k^T / sqrt(C/H))
 * v per head, head h owning channels [h C/H, (h+1) C/H). q rows have
 * stride ldq, k and v rows ldkv (q, k, v may be columns of one qkv or kv
 * tensor). */
void ref64_attention_forward(double *out,     // (T, C)
                             const double *q, // (T, ldq)
                             int ldq,
                             const double *k, // (Tk, ldkv)
                             const double *v, // (Tk, ldkv)
                             int ldkv, int T, int Tk, int C, int H,
                             double *p); // (Tk) scratch
/* dq, dk, dv (the strides of q, k, v; their C columns written, the rest
 * kept) from dout. */
void ref64_attention_backward(double *dq,         // (T, ldq)
                              double *dk,         // (Tk, ldkv)
                              double *dv,         // (Tk, ldkv)
                              const double *dout, // (T, C)
                              const double *q,    // (T, ldq)
                              int ldq,
                              const double *k, // (Tk, ldkv)
                              const double *v, // (Tk, ldkv)
                              int ldkv, int T, int Tk, int C, int H,
                              double *p,   // (Tk) scratch
                              double *dp); // (Tk) scratch

/* ---- the model ---------------------------------------------------------------------- */

/* The parameter tensors of a layer, in the order ppv_kernels.h documents. */
enum {
    REF64_ADA_W,
    REF64_ADA_B,
    REF64_QKV_W,
    REF64_QKV_B,
    REF64_ATTN_OUT_W,
    REF64_ATTN_OUT_B,
    REF64_XQ_W,
    REF64_XQ_B,
    REF64_XKV_W,
    REF64_XKV_B,
    REF64_XOUT_W,
    REF64_XOUT_B,
    REF64_FC1_W,
    REF64_FC1_B,
    REF64_FC2_W,
    REF64_FC2_B,
    REF64_TENSORS
};

/* "ada_w", ...: tensor i's name as ppv_kernels.h spells it. */
const char *ref64_tensor_name(int i);

/* A model's dimensions and weights, widened to double. */
typedef struct ref64_model {
    int L, T, C, H, F, Tc;
    size_t rows[REF64_TENSORS], cols[REF64_TENSORS]; /* cols 1 for a bias */
    size_t off[REF64_TENSORS];                       /* first value within a layer */
    size_t P;                                        /* values per layer */
    double *w;                                       /* (L, P) */
} ref64_model;

/* A microbatch's inputs, widened to double. */
typedef struct ref64_inputs {
    double *x;      /* (T, C) */
    double *cond;   /* (Tc, C) */
    double *target; /* (T, C) */
    double t;       /* timestep */
} ref64_inputs;

/* The rounding-error model's random source; NULL where an argument takes
 * one means exact arithmetic. */
typedef struct ref64_noise {
    uint64_t state; /* the seed, then advanced by every draw */
    int round_bf16; /* set: no draws; every op output is rounded to bf16 (through
                       fp32) as ppv stores it, so that the model keeps ppv's values */
} ref64_noise;

/* Fills r from cfg and the weights of m, checking m's parameter table
 * against the documented one; 0, or -1 (a table mismatch or out of
 * memory, r left empty). */
int ref64_model_init(ref64_model *r, const ppv_model_config *cfg, const ppv_model *m);
void ref64_model_free(ref64_model *r);

/* Widens one microbatch's inputs; 0, or -1 when out of memory. */
int ref64_inputs_init(ref64_inputs *ri, const ref64_model *r, const ppv_mb_inputs *in);
void ref64_inputs_free(ref64_inputs *ri);

/* One layer's activations, kept by the forward for the backward. */
typedef struct ref64_acts ref64_acts;

/* NULL when out of memory. */
ref64_acts *ref64_acts_new(const ref64_model *r);
void ref64_acts_free(ref64_acts *a);

/* Layer l forward: x (T, C) -> y (T, C), keeping what the backward needs in
 * a. Computes silu(temb(t)) itself (perturbed like any op output). */
void ref64_layer_forward(const ref64_model *r, int l, const ref64_inputs *in, const double *x,
                         double *y, ref64_acts *a, ref64_noise *nz);

/* Layer l backward from a's forward: dy (T, C) -> dx (T, C) and the layer's
 * P parameter gradients into dparams. a's activations stay as they are; its
 * gradient buffers are scratch. */
void ref64_layer_backward(const ref64_model *r, int l, ref64_acts *a, const double *dy, double *dx,
                          double *dparams, ref64_noise *nz);

/* Mean squared error of y against in->target; dy (nullable) gets its
 * gradient 2 (y - target) / (T C), perturbed as an op output. */
double ref64_loss(const ref64_model *r, const ref64_inputs *in, const double *y, double *dy,
                  ref64_noise *nz);

/* One training step of the whole stack on one microbatch: forward of
 * layers 0..L-1 from in->x, the loss, and the backward. y (T, C) gets the
 * last layer's output, dparams (L P) the gradients; returns the loss, or
 * NAN when out of memory. */
double ref64_step(const ref64_model *r, const ref64_inputs *in, double *y, double *dparams,
                  ref64_noise *nz);

#endif
