/* ppv_run.h - the engine's run room: one training step of the built-in model
 * on any transport, its reference, digests and recompute evidence.
 *
 * Functions return 0 on success and a negative value on failure, with a
 * message in the caller's buffer; no function here exits the process.
 */
#ifndef PPV_RUN_H
#define PPV_RUN_H

#include "ppv_world.h"

/* ------------------------------------------------------------------------ */
/* Running a schedule: one training step of the built-in model              */

/* How a stage keeps what its backward needs (`--recompute`). A forward's
 * saved tensors serve the input backward (I or B), which copies what the
 * weight backward reads into its weight state and frees them. */
typedef enum ppv_recompute_kind {
    PPV_RC_NONE,   /* stash: saved lives from the forward to the input backward */
    PPV_RC_FULL,   /* keep the stage input; rebuild saved before the backward (at R or I) */
    PPV_RC_LAYERS, /* keep the input of every k-th layer of the stage; the input backward
                      rebuilds one segment of k layers at a time, last first */
    PPV_RC_MB,     /* by microbatch: stash while the rank holds fewer than k stashed
                      forwards (of any stage), FULL beyond */
    PPV_RC_SELECTIVE /* stash all but the attention cores (their outputs and softmax
                        statistics); the input backward rebuilds them a layer at a time
                        (Korthikanti et al., 2022) */
} ppv_recompute_kind;

typedef struct ppv_recompute {
    uint8_t kind; /* ppv_recompute_kind */
    int32_t k;    /* LAYERS: layers a segment; MB: stashed forwards a rank keeps */
} ppv_recompute;

typedef struct ppv_run_options {
    ppv_semantics sem;
    ppv_policy policy;
    ppv_model_config model;         /* layers are split over the schedule's stages */
    const ppv_recompute *recompute; /* [nstages], or NULL: every stage stashes */
    int64_t watchdog_steps;
    ppv_fault fault; /* one transport fault (the explorer's), or none */
    int64_t extra_bytes; /* self-test: rank 0 holds this many more activation bytes for
                            the whole step, through the engine's allocator, so that a
                            memory comparison that must fail can be seen to fail */
    int perturb; /* self-test: flip the lowest bit of the first summed gradient,
                    so a comparison that must fail can be seen to fail */
    /* Where the model and inputs come from (a golden file's replay): by
     * default the model is built from `model` and each microbatch's inputs
     * drawn from the RNG. With `weights`, that model runs as given (its
     * layers split over the stages, even if fewer); with `load_inputs`,
     * microbatch mb's inputs are loaded on first use (0, or -1 with a
     * message) and freed after its last weight backward. */
    const ppv_model *weights;
    /* Where the model's ops run: NULL or "cpu", or "cuda" (every kernel on
     * the GPU, the same bits; see ppv_model_set_device). With `weights`,
     * it must name the device those weights were set to. */
    const char *device;
    int (*load_inputs)(void *ctx, int32_t mb, ppv_mb_inputs *in, char *err, size_t errlen);
    void *inputs_ctx;
    /* Where the ranks run: NULL on the mock transport (every rank in this
     * process, under `policy`); or a job of processes (ppv_proc_start), of
     * which this process runs its own rank and the results are shared by
     * all. There a send is MPI's synchronous send under rendezvous and its
     * buffered send under eager (eager:BYTES: up to BYTES), a schedule
     * that deadlocks under `sem` is refused before it starts unless
     * `allow_unsafe`, and no call waits longer than `timeout_s` seconds:
     * the rank reports a hang (what it waits for, from which rank) and the
     * job ends. policy, watchdog_steps and fault are the mock's. */
    ppv_proc *proc;
    double timeout_s;
    int allow_unsafe;
    /* Called after every executed action with the count done and the
     * schedule's total (a progress display; it must not touch the run). */
    void (*progress)(void *ctx, int64_t done, int64_t total);
    void *progress_ctx;
} ppv_run_options;

ppv_run_options ppv_run_defaults(void);

/* The model config a run of s with o uses: the given weights' config, or
 * o->model with at least one layer per stage. */
ppv_model_config ppv_run_model_config(const ppv_run_options *o, const ppv_schedule *s);

/* Per-stage policies into out[nstages] from a comma-separated list of
 * items, each POLICY (every stage), STAGE:POLICY or STAGE (full), later
 * items overriding earlier ones; POLICY is none, full (or all),
 * selective, layers:K or mb:N. "none", "all" and "0,2,5" read as before. 0, or -1
 * with the reason. With nstages < 0 only the text's grammar is checked
 * (out is not written). */
int ppv_recompute_parse(const char *text, int32_t nstages, ppv_recompute *out, char *err,
                        size_t errlen);

/* The mode (a ppv_recompute_kind other than MB) each forward of s runs in
 * under the policies, into mode[stage * nmb + mb]: by microbatch a forward
 * is recomputed when its rank holds k stashed forwards at it. 0. */
int ppv_recompute_modes(const ppv_schedule *s, const ppv_recompute *recompute, uint8_t *mode);

/* Activation bytes of one stage: what a forward saves for the backward,
 * what the backward-for-inputs keeps for the weights, and the stage input a
 * recomputed stage stashes instead; its layer count and a layer's part of
 * saved and wstate (both are that times the layers); what a selective
 * forward saves, and one layer's attention cores, which its input backward
 * rebuilds (0 for a stage without layers). */
typedef struct ppv_stage_bytes {
    int64_t saved, wstate, input;
    int32_t layers;
    int64_t layer_saved, layer_wstate;
    int64_t selective_saved, core;
} ppv_stage_bytes;

typedef struct ppv_run_report {
    ppv_world_result world; /* status, steps, trace digest, deadlock report */
    int32_t nranks, nstages, nmb, nlayers;
    int32_t *stage_layer; /* [nstages + 1]: stage s holds layers [stage_layer[s], stage_layer[s+1]) */
    double loss;          /* mean over microbatches */
    float *mb_loss;       /* [nmb] each microbatch's loss */
    /* [nstages * nmb] forward passes the model ran for stage s, microbatch
     * mb (at s * nmb + mb), counted where they run: 1 per F, plus 1 when a
     * recomputed stage rebuilds its saved tensors for the backward */
    int32_t *forwards;
    int64_t *layer_forwards; /* [nstages] layer forward passes run, rebuilds included */
    /* [nstages] layers whose attention cores a selective input backward
     * rebuilt, as the kernel reports them */
    int64_t *core_rebuilds;
    float *grads;         /* all layers' gradients, summed over microbatches in order */
    size_t ngrads;
    uint64_t grad_digest; /* ppv-fnv64 of grads (ppv_digest) */
    int64_t *peak_bytes;      /* [nranks] measured by the engine's allocator */
    int64_t *predicted_bytes; /* [nranks] from the schedule alone */
    /* Most microbatch weight-gradient buffers held at once: a finished W's
     * gradients wait only until every earlier microbatch of its stage is
     * added (sums run in microbatch order), so this is 1 when each stage's
     * W actions run in microbatch order, and never grows with nmb then. */
    int32_t grad_buffers_peak;
    /* PCT: the run length its change points were drawn over, the policy's
     * pct_steps or, when that is 0, the steps of a round-robin run of the
     * same step (PCT's guarantee needs change points spread over the run
     * actually taken); 0 for other policies. */
    int64_t pct_steps;
    ppv_world *trace; /* the run's decisions, for ppv_trace_write */
} ppv_run_report;

/* Runs one training step of s (lowered first if compute-only) on the mock
 * transport. Returns 0 with *out (the verdict is in out->world.status), or
 * -1 when the schedule or options cannot run (message in err). */
int ppv_run(const ppv_schedule *s, const ppv_run_options *o, ppv_run_report **out, char *err,
            size_t errlen);
void ppv_run_report_free(ppv_run_report *r);

/* The same step on one rank with no pipeline: grads and mean loss. */
int ppv_run_reference(const ppv_model_config *cfg, int32_t nmb, float **grads, size_t *ngrads,
                      double *loss, char *err, size_t errlen);

/* Peak activation bytes per rank that the schedule implies, for the
 * engine's allocation rules: F keeps `saved`; I adds `wstate` and frees
 * `saved`; W frees `wstate`; B does I and W. A recomputed stage keeps
 * `input` (a checkpointed one, one input per segment), holds `saved` while
 * a forward runs and from its rebuild (at R or I; a segment's at I) to the
 * end of that backward, and frees an input once what it rebuilds is back.
 * A selective stage keeps `selective_saved` instead of `saved` and holds
 * `core` beside it and `wstate` while its input backward runs. */
int ppv_predict_activation_bytes(const ppv_schedule *s, const ppv_stage_bytes *bytes,
                                 const ppv_recompute *recompute, int64_t *peak);

/* ppv-fnv64 over n bytes (spec/digests.md): FNV-1a's step from
 * 1469598103934665603, FNV's offset basis with its last digit dropped, so
 * not FNV-1a itself (kept: recordings and traces depend on it). The
 * training gradients' digest. */
uint64_t ppv_digest(const void *data, size_t n);
/* A digest of n bytes read as little-endian 8-byte words in four
 * interleaved lanes of FNV-1a's step (the tail zero-padded, the length
 * folded in): ppv-words64x4, spec/digests.md:
 * several times faster than ppv_digest, and any change to one word changes
 * it. The inference contract's output_digest_i64 and the pipeline's output
 * digest, which are taken on every chunk. */
uint64_t ppv_digest_words(const void *data, size_t n);

/* How two gradient vectors differ. */
typedef struct ppv_grad_diff {
    int bitwise_equal;
    uint64_t max_ulp;
    double max_abs, max_rel;
    double rel_l2;       /* ||a - b|| / ||b|| in the 2-norm; inf where only one side is NaN */
    int64_t first_index; /* -1 when equal */
    float first_a, first_b;
} ppv_grad_diff;

/* The bound a step whose matmuls ran on cuBLAS (another summation order)
 * must meet against the reference: rel_l2 of the gradients <= 2^-4, the
 * bound the kernel tests give bf16-rounded gradients against float64
 * (tests/test_kernels.c, TOL_STACK_GRAD). */
#define PPV_CUBLAS_GRAD_BOUND 0x1p-4

void ppv_grads_compare(const float *a, const float *b, size_t n, ppv_grad_diff *d);

/* The evidence that the recompute path really re-ran what it claims,
 * from the two runs' own counters against what the schedule implies: one
 * stage forward per F, plus one per backward of a stage that recomputes
 * (full, layers:K, mb:N's recomputed microbatches), and under selective
 * recompute the attention cores of every layer of the stage at each such
 * backward; and each run's measured peak against the prediction. */
typedef struct ppv_recompute_evidence {
    int64_t stash_forwards, recompute_forwards;           /* counted by the runs */
    int64_t want_stash_forwards, want_recompute_forwards; /* implied by the schedule */
    int64_t core_rebuilds, want_core_rebuilds;            /* both runs together */
    int64_t stash_layer_forwards, recompute_layer_forwards;
    double extra_forward_units; /* recompute's extra layer forwards, in stage forwards */
    int forwards_ok;            /* every count equals what the schedule implies */
    int peaks_ok;               /* measured == predicted on every rank, both runs */
} ppv_recompute_evidence;

/* Fills *ev from two completed runs of s (stash: no stage recomputes;
 * rec: under recompute[nstages], NULL meaning full everywhere). 0, or -1
 * (ev zeroed) if a run did not complete or cannot be of s. */
int ppv_recompute_evidence_of(const ppv_schedule *s, const ppv_recompute *recompute,
                              const ppv_run_report *stash, const ppv_run_report *rec,
                              ppv_recompute_evidence *ev);

/* Recompute against stash: the same step with no stage recomputed and with
 * o->recompute's stages recomputed (every stage when NULL), gradients
 * compared bit for bit. o->perturb applies to the recompute path only. */
typedef struct ppv_recompute_verdict {
    ppv_grad_diff diff;          /* recompute (a) against stash (b) */
    ppv_recompute_evidence evidence; /* when both runs completed */
    int32_t first_layer;         /* where the first difference is; -1 when equal */
    char first_tensor[32];       /* parameter tensor name, "qkv_w" */
    int64_t first_tensor_index;  /* row-major index within that tensor */
    ppv_run_report *stash, *recompute;
} ppv_recompute_verdict;

/* 0 with both runs in *v (compare only when both are PPV_RUN_DONE), or -1
 * when the schedule cannot run (message in err). */
int ppv_verify_recompute(const ppv_schedule *s, const ppv_run_options *o,
                         ppv_recompute_verdict *v, char *err, size_t errlen);
void ppv_recompute_verdict_free(ppv_recompute_verdict *v);

#endif
