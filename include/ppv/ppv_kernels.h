/* ppv_kernels.h - the kernels layer's one public header: deterministic CPU
 * reference kernels and the small DiT-like transformer built from them.
 *
 * Determinism rules: bf16 storage with round-to-nearest-even, fp32
 * accumulation in a fixed order, no implicit FMA contraction (this layer is
 * compiled with -ffp-contract=off), weights and inputs from a counter-based
 * RNG keyed by (seed, tensor, index). Batch invariance: every output row
 * depends only on its own inputs, never on how many rows one call
 * processes (matmuls reduce over k in a fixed order; attention visits keys
 * in a fixed order per query). Multithreading, if any, splits output rows,
 * never a reduction.
 *
 * Functions return 0 on success and a negative value on failure.
 */
#ifndef PPV_KERNELS_H
#define PPV_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "ppv_generator.h"
#include "ppv_spec.h"

/* ---- bf16 ----------------------------------------------------------------- */

typedef uint16_t ppv_bf16;

/* float -> bf16, round to nearest even; NaN stays a (quiet) NaN. */
ppv_bf16 ppv_bf16_from_f32(float x);
float ppv_bf16_to_f32(ppv_bf16 h);

/* ULPs between two IEEE floats of width 16 (bf16), 32 or 64 bits, given as
 * bit patterns: the sign-magnitude bits mapped onto one ordered line, so
 * adjacent floats are 1 apart and +0 and -0 are 0 apart. */
uint64_t ppv_ulp_distance(uint64_t a_bits, uint64_t b_bits, int width);

/* ---- counter-based RNG ------------------------------------------------------ */

/* 64 random bits that depend only on (seed, tensor, index). */
uint64_t ppv_rng_bits(uint64_t seed, uint64_t tensor, uint64_t index);
/* Uniform in [0, 1) and standard normal, from the same key. */
float ppv_rng_uniform(uint64_t seed, uint64_t tensor, uint64_t index);
float ppv_rng_normal(uint64_t seed, uint64_t tensor, uint64_t index);

/* ---- the model ---------------------------------------------------------------- */

typedef struct ppv_model_config {
    int32_t layers;   /* transformer blocks */
    int32_t d_model;  /* C */
    int32_t n_heads;  /* H, divides C */
    int32_t d_ff;     /* MLP hidden width */
    int32_t seq_len;  /* T: tokens per microbatch */
    int32_t cond_len; /* Tc: conditioning tokens for cross-attention */
    uint64_t seed;    /* weights and inputs */
} ppv_model_config;

/* A small default that runs in milliseconds (4 layers, C=32, 2 heads,
 * d_ff=64, T=8, Tc=4, seed 1). */
ppv_model_config ppv_model_config_default(void);

typedef struct ppv_model ppv_model; /* weights (bf16), opaque */

/* Builds the model with weights drawn from the counter RNG; NULL on a bad
 * config (with a reason in err) or out of memory. */
ppv_model *ppv_model_new(const ppv_model_config *cfg, char *err, size_t errlen);
void ppv_model_free(ppv_model *m);
const ppv_model_config *ppv_model_config_of(const ppv_model *m);

/* Devices. A model's ops run on the CPU unless set to "cuda", where each op
 * runs as a CUDA kernel that computes the CPU's bits (the arithmetic is
 * written once and compiled for both). The CUDA ops live in a module loaded
 * on first use; -1 with the reason in err when ppv was built without CUDA,
 * the module is missing or no GPU is present. Data stays in host memory:
 * each op copies its inputs in and its outputs out, so the GPU path is a
 * check of the bits, not a fast path. */
int ppv_model_set_device(ppv_model *m, const char *name, char *err, size_t errlen);
const char *ppv_model_device(const ppv_model *m); /* "cpu" or "cuda" */
/* 0 while every device op has succeeded; -1 with the first failure in err
 * (the outputs since are undefined and must not be trusted). */
int ppv_model_device_status(const ppv_model *m, char *err, size_t errlen);

/* Where ppv's modules are (the golden-file, CUDA, MPI, NCCL and Python
 * ones): rel appended to the folder of the running program
 * (/proc/self/exe), so that an installed or packaged ppv finds its own
 * modules and never reaches back into the tree it was built in. 0, or -1
 * with out "" (no such link, or the path is longer than n). */
int ppv_path_beside_program(const char *rel, char *out, size_t n);
/* Opens a module of ppv's with dlopen(flags): at $env alone when that is
 * set; else at installed (relative to the program's folder: where an
 * install puts it), built (likewise: where this build did), prefixed (the
 * install prefix's path) and name (the loader's search), the first that
 * opens; NULL or "" skips a place. Returns the handle, and the path it
 * opened in opened (may be NULL); or NULL with the loader's reason in why,
 * for the first place where a file is (a module there that would not load:
 * a library it needs is missing), else for the first place, and *there
 * (may be NULL) saying whether any place held a file. */
void *ppv_module_open(const char *env, const char *installed, const char *built,
                      const char *prefixed, const char *name, int flags, char *opened,
                      size_t openedlen, int *there, char *why, size_t whylen);

/* Number of fp32 gradient values of layers [l0, l1). */
size_t ppv_model_grad_count(const ppv_model *m, int32_t l0, int32_t l1);

/* Every layer has the same PPV_MODEL_PARAM_TENSORS parameter tensors, stored
 * one after another in this order (weights and dparams alike):
 *   ada_w (6C, C)  ada_b (6C)   adaLN: shift, scale, gate (attn), then (MLP)
 *   qkv_w (3C, C)  qkv_b (3C)   self-attention q, k, v
 *   attn_out_w (C, C)  attn_out_b (C)
 *   xq_w (C, C)  xq_b (C)       cross-attention query from the tokens
 *   xkv_w (2C, C)  xkv_b (2C)   cross-attention k, v from cond
 *   xout_w (C, C)  xout_b (C)
 *   fc1_w (d_ff, C)  fc1_b (d_ff)   fc2_w (C, d_ff)  fc2_b (C)
 * dparams of layers [l0, l1) is layer l0's tensors, then l0+1's, and so on. */
enum { PPV_MODEL_PARAM_TENSORS = 16 };

typedef struct ppv_param_tensor {
    const char *name; /* "qkv_w" */
    int32_t rows;     /* out features */
    int32_t cols;     /* in features; 1 for a bias */
    size_t offset;    /* first value within its layer's parameters */
} ppv_param_tensor;

/* Describes parameter tensor i (0 <= i < PPV_MODEL_PARAM_TENSORS); -1 if i
 * is out of range. */
int ppv_model_param_tensor(const ppv_model *m, int i, ppv_param_tensor *out);

/* The bf16 parameters of one layer in the order above
 * (ppv_model_grad_count(m, layer, layer + 1) values); NULL if layer is out
 * of range. */
const ppv_bf16 *ppv_model_layer_params(const ppv_model *m, int32_t layer);

/* Replaces one layer's parameters (a model read back from a file); 0, or
 * -1 if layer is out of range. */
int ppv_model_set_layer_params(ppv_model *m, int32_t layer, const ppv_bf16 *params);

/* One microbatch's inputs, drawn from the counter RNG keyed by the model's
 * seed and the microbatch index. */
typedef struct ppv_mb_inputs {
    ppv_bf16 *x;      /* (T, C) noisy latent entering layer 0 */
    ppv_bf16 *cond;   /* (Tc, C) conditioning embeddings */
    ppv_bf16 *target; /* (T, C) what the last layer should produce */
    float timestep;   /* adaLN conditioning, in [0, 1) */
} ppv_mb_inputs;

/* Functions that can fail return 0 or -1 (out of memory, bad arguments);
 * ignoring that would compute on what was never written, so the compiler
 * is asked to refuse it. */
#if defined(__GNUC__) || defined(__clang__)
#define PPV_MUST_CHECK __attribute__((warn_unused_result))
#else
#define PPV_MUST_CHECK
#endif

PPV_MUST_CHECK int ppv_mb_inputs_init(const ppv_model *m, int32_t mb, ppv_mb_inputs *in);
void ppv_mb_inputs_free(ppv_mb_inputs *in);

/* Bytes a forward of layers [l0, l1) saves for its backward, and bytes the
 * backward-for-inputs keeps for the backward-for-weights. Both depend only
 * on the config and the layer range. */
size_t ppv_layers_saved_bytes(const ppv_model *m, int32_t l0, int32_t l1);
size_t ppv_layers_wstate_bytes(const ppv_model *m, int32_t l0, int32_t l1);

/* Forward of layers [l0, l1): x_in (T, C) -> x_out (T, C), filling saved
 * (ppv_layers_saved_bytes) with what the backward needs. */
PPV_MUST_CHECK int ppv_layers_forward(const ppv_model *m, int32_t l0, int32_t l1, const ppv_mb_inputs *in,
                       const ppv_bf16 *x_in, ppv_bf16 *x_out, void *saved);

/* Backward for inputs: dy (T, C) -> dx (T, C), filling wstate
 * (ppv_layers_wstate_bytes) with everything the weight backward needs
 * (the linears' inputs copied from saved among it), so that saved can be
 * freed once this returns. */
PPV_MUST_CHECK int ppv_layers_backward_input(const ppv_model *m, int32_t l0, int32_t l1, const ppv_mb_inputs *in,
                              const void *saved, const ppv_bf16 *dy, ppv_bf16 *dx, void *wstate);

/* Selective recompute (Korthikanti et al., 2022): the same forward and
 * input backward, but saved (ppv_layers_selective_saved_bytes) leaves out
 * the attention cores, the self- and cross-attention outputs and their
 * softmax statistics, and the input backward rebuilds each layer's from
 * the q, k and v that saved keeps, into `core` (ppv_layer_core_bytes,
 * float-aligned, reused layer after layer), before that layer's backward.
 * dx and wstate are bitwise those of the stashing pair. The backward
 * returns the attention-core pairs it rebuilt (l1 - l0), or -1. */
size_t ppv_layers_selective_saved_bytes(const ppv_model *m, int32_t l0, int32_t l1);
size_t ppv_layer_core_bytes(const ppv_model *m);
PPV_MUST_CHECK int ppv_layers_forward_selective(const ppv_model *m, int32_t l0, int32_t l1,
                                                const ppv_mb_inputs *in, const ppv_bf16 *x_in,
                                                ppv_bf16 *x_out, void *saved);
PPV_MUST_CHECK int ppv_layers_backward_input_selective(const ppv_model *m, int32_t l0, int32_t l1,
                                                       const ppv_mb_inputs *in, const void *saved,
                                                       const ppv_bf16 *dy, ppv_bf16 *dx,
                                                       void *wstate, void *core);

/* Backward for weights: writes (not accumulates) the fp32 gradients of
 * layers [l0, l1) for this microbatch into dparams
 * (ppv_model_grad_count values), from wstate alone. */
PPV_MUST_CHECK int ppv_layers_backward_weight(const ppv_model *m, int32_t l0, int32_t l1, const ppv_mb_inputs *in,
                               const void *wstate, float *dparams);

/* Loss of the last layer's output y against in->target (mean squared
 * error, fp32) and its gradient dy (T, C). */
float ppv_loss_forward(const ppv_model *m, const ppv_mb_inputs *in, const ppv_bf16 *y);
PPV_MUST_CHECK int ppv_loss_backward(const ppv_model *m, const ppv_mb_inputs *in, const ppv_bf16 *y, ppv_bf16 *dy);

/* ---- the streaming generator (inference) ---------------------------------------
 *
 * The video-diffusion generator that the PP inference engine runs: DiT
 * blocks over latent tokens with adaLN by timestep, self-attention over a
 * per-layer KV cache of past latent frames, cross-attention to the
 * conditioning embeddings and an MLP. A latent chunk (1, F, 16, h, w) is
 * patchified 2x2: each frame gives (h/2)(w/2) tokens of 64 features.
 *
 * Tensor parallelism: a mesh of `mesh` ranks splits the heads (and the
 * MLP, cut into n_heads blocks) into equal contiguous parts; rank r holds
 * heads [r*H/mesh, (r+1)*H/mesh) and their K/V. Every reduction the split
 * cuts (attention output projections, the MLP's second linear) is summed as
 * fixed k-blocks, one block per head, each reduced in order into its own
 * (M, C) partial; the partials of all blocks are gathered (the callback)
 * and added in block order 0, 1, ..., H-1 by every rank. A one-rank call
 * forms the same partials and adds them in the same order, so the output is
 * bitwise the same for every mesh size that divides n_heads. */

typedef struct ppv_gen_config {
    int32_t layers;    /* DiT blocks */
    int32_t d_model;   /* C */
    int32_t n_heads;   /* H: divides C; the mesh size must divide H */
    int32_t d_ff;      /* MLP width: a multiple of H */
    int32_t cond_dim;  /* last dimension of conditioning_embeds */
    uint64_t seed;     /* weights */
} ppv_gen_config;

/* 2 layers, C=32, 4 heads, d_ff=64, cond_dim=32, seed 1. */
ppv_gen_config ppv_gen_config_default(void);

typedef struct ppv_genmodel ppv_genmodel; /* bf16 weights, opaque */

/* NULL with a reason (a bad config) or out of memory. */
ppv_genmodel *ppv_genmodel_new(const ppv_gen_config *cfg, char *err, size_t errlen);
void ppv_genmodel_free(ppv_genmodel *m);
const ppv_gen_config *ppv_genmodel_config(const ppv_genmodel *m);
/* Devices, as for ppv_model_set_device: "cpu" or "cuda". */
int ppv_genmodel_set_device(ppv_genmodel *m, const char *name, char *err, size_t errlen);
const char *ppv_genmodel_device(const ppv_genmodel *m);
int ppv_genmodel_device_status(const ppv_genmodel *m, char *err, size_t errlen);

/* A fingerprint of the weights rank `rank` of a mesh of `mesh` owns alone
 * (its heads' rows of Q, K and V and its MLP blocks' rows of fc1, every
 * layer): FNV-1a over their bit patterns, never 0. Distinct ranks' shards
 * give distinct values; 0 when mesh does not divide n_heads or rank is out
 * of range. */
uint64_t ppv_genmodel_shard_fingerprint(const ppv_genmodel *m, int32_t rank, int32_t mesh);

/* Bytes the built-in generator holds and allocates, from its config
 * alone (nothing is allocated), with elements of elem_bytes (the built-in
 * keeps fp32: 4): its weights (the whole model, which every mesh rank
 * holds); one mesh rank's KV cache, allocated whole (K and V of every
 * layer for `window` frames of its heads); and what one call of `frames`
 * frames allocates while it runs when the cache holds `cached` frames and
 * the conditioning has cond_len tokens. 0 for shapes it does not run. */
uint64_t ppv_genmodel_weight_bytes(const ppv_gen_config *g, int32_t elem_bytes);
uint64_t ppv_kv_cache_bytes(const ppv_gen_config *g, int32_t mesh, int32_t window,
                            int32_t tokens_per_frame, int32_t elem_bytes);
uint64_t ppv_gen_call_work_bytes(const ppv_gen_config *g, int32_t mesh, int32_t tokens_per_frame,
                                 int32_t frames, int32_t cached, int32_t cond_len,
                                 int32_t elem_bytes);

/* One rank's KV cache: for every layer, K and V of its heads for the last
 * `window` latent frames at most (older frames are evicted first). */
typedef struct ppv_kv_cache ppv_kv_cache;

/* A cache for rank `rank` of a mesh of `mesh` ranks, frames of
 * tokens_per_frame tokens; NULL if mesh does not divide n_heads, window < 1
 * or out of memory. */
ppv_kv_cache *ppv_kv_cache_new(const ppv_genmodel *m, int32_t rank, int32_t mesh, int32_t window,
                               int32_t tokens_per_frame);
void ppv_kv_cache_free(ppv_kv_cache *c);
/* Drops every frame (a new epoch, or a rebuild by recompute). */
void ppv_kv_cache_reset(ppv_kv_cache *c);
/* Frames held now (at most the window). */
int32_t ppv_kv_cache_frames(const ppv_kv_cache *c);
/* Layer l's K and V of this rank's heads, oldest frame first, as fp32
 * holding bf16 values: (frames * tokens_per_frame, heads_of_rank * C/H)
 * each, copied into k and v (which hold that many floats). -1 if l is out
 * of range. */
int ppv_kv_cache_read(const ppv_kv_cache *c, int32_t l, float *k, float *v);
/* Floats one layer's K (or V) of this rank holds when the cache is full. */
size_t ppv_kv_cache_layer_floats(const ppv_kv_cache *c);

/* Exchanges partial sums across the mesh: every rank passes `count` floats
 * (its heads' blocks, in head order) and receives all ranks' blocks in rank
 * order (mesh * count floats). 0, or a negative value that the call returns. */
typedef int (*ppv_gather_fn)(void *ctx, const float *mine, float *all, size_t count);

typedef struct ppv_gen_call_args {
    const ppv_bf16 *latents; /* (frames, 16, h, w): one chunk, or context frames */
    int32_t frames, h, w;    /* h and w even */
    const ppv_bf16 *cond;    /* (cond_len, cond_dim) */
    int32_t cond_len;
    float timestep;          /* adaLN input: a step of the list / 1000 */
    float cache_bias;        /* added to the logits of cached keys; 0 = none */
    int write_cache;         /* 1: append this chunk's K/V to the cache (a
                                cache write); 0: read the cache only */
    ppv_bf16 *out;           /* (frames, 16, h, w), or NULL */
} ppv_gen_call_args;

/* One generator call on rank `rank` of a mesh of `mesh` ranks (the cache's).
 * The chunk's queries attend to every cached key (oldest first) and then to
 * every key of the chunk itself. With write_cache the chunk's K/V are
 * appended to each layer's cache after that layer has used them. gather is
 * called 3 times per layer when mesh > 1 (NULL is allowed only when mesh is
 * 1). out is a damped denoising step, latents + (prediction - latents) / 4,
 * so outputs fed back as inputs stay O(1); any finite timestep is taken as
 * is (step 1000 gives 1.0). On any failure the cache and out are left as
 * they were. Returns 0, or -1 with a reason (shapes, cond_len < 1, a
 * non-finite timestep or cache_bias, a cache of another model) or the
 * gather's error. */
int ppv_gen_call(const ppv_genmodel *m, ppv_kv_cache *cache, const ppv_gen_call_args *a,
                 ppv_gather_fn gather, void *gather_ctx, char *err, size_t errlen);

/* The built-in generator as a plug-in table (ppv_generator.h), named
 * "ppv-dit": its settings text is "layers=L,d_model=C,n_heads=H,d_ff=F,
 * seed=S" (any subset; the rest from ppv_gen_config_default), cond_dim is
 * the setup's, and the mesh must divide n_heads. */
const ppv_generator *ppv_generator_builtin(void);
/* The configuration a settings text gives (cond_dim from the setup); 0, or
 * -1 with the reason naming the bad item. */
int ppv_gen_config_parse(const char *params, int32_t cond_dim, ppv_gen_config *cfg, char *err,
                         size_t errlen);
/* Checks a configuration as ppv_genmodel_new does (sizes, n_heads dividing
 * d_model and d_ff); 0, or -1 with the reason. */
int ppv_gen_config_check(const ppv_gen_config *c, char *err, size_t errlen);
/* c's settings text (its cond_dim is the setup's); 0, or -1 if n is short. */
int ppv_gen_config_format(const ppv_gen_config *c, char *buf, size_t n);

/* ---- matmul (the benchmarked kernel) ------------------------------------------- */

/* out (M, N) = a (M, K) . w (N, K)^T, fp32 in and out, each output element
 * reduced over k = 0..K-1 in order. threads > 1 splits output rows (a small
 * product uses fewer threads: at least 64 MFLOP each). */
void ppv_matmul_f32(float *out, const float *a, const float *w, int32_t M, int32_t N, int32_t K,
                    int32_t threads);

/* The instruction set ppv_matmul_f32 runs on this machine ("generic",
 * "avx2", "avx512"); every choice gives the same bits. */
const char *ppv_matmul_isa(void);

#endif
