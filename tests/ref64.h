/* ref64.h - a float64 reference of the training model (the block stack of
 * kernels/model.c), for tests only. Written from the documented math, not
 * from model.c: plain double loops, nothing rounded. It reads the model's
 * weights and a microbatch's inputs through the public kernels API and
 * calls no kernel.
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
 * derives its bounds from them).
 */
#ifndef PPV_TESTS_REF64_H
#define PPV_TESTS_REF64_H

#include <stddef.h>
#include <stdint.h>

#include "ppv_kernels.h"

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
