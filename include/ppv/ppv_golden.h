/* ppv_golden.h - golden files: record an engine run into HDF5, replay it,
 * and compare any two HDF5 files with a stated tolerance. The layout is
 * spec/golden-format.md. Depends on ppv_engine.h; nothing below depends on
 * this layer. */
#ifndef PPV_GOLDEN_H
#define PPV_GOLDEN_H

#include <stddef.h>
#include <stdint.h>

#include "ppv_engine.h"

/* ---- tolerances ----------------------------------------------------------- */

typedef enum ppv_tol_kind {
    PPV_TOL_BITWISE, /* the stored bits; +0 and -0 differ */
    PPV_TOL_ULP,     /* biased-integer distance <= ulp */
    PPV_TOL_ABSREL   /* |a - b| <= abs + rel * |b| */
} ppv_tol_kind;

typedef struct ppv_tolerance {
    ppv_tol_kind kind;
    uint64_t ulp;
    double abs, rel;
    int nan_differ; /* 0: NaN equals NaN (default); 1: a NaN equals nothing */
} ppv_tolerance;

/* Parses "bitwise", "ulp:N", "abs:X", "rel:Y" or "abs:X,rel:Y"; -1 if bad. */
int ppv_tolerance_parse(const char *text, ppv_tolerance *t);
void ppv_tolerance_format(const ppv_tolerance *t, char *buf, size_t len);

/* ---- comparison reports --------------------------------------------------- */

typedef struct ppv_diff_point {
    uint64_t index; /* flat element index */
    char where[48]; /* "[3,17]" */
    double a, b;    /* both values (as double) */
    uint64_t ulp;   /* their distance in ULPs of the stored type */
} ppv_diff_point;

/* One difference between the two sides: a whole object (missing, other
 * type or shape, attribute) or a dataset's values. */
typedef struct ppv_diff_entry {
    char path[256];
    char what[320];    /* "values", "only in A", "type: fp32 vs bf16", ... */
    char type[16];     /* "fp32", "bf16", "fp64", "int64", ... */
    uint64_t compared; /* elements compared */
    uint64_t count;    /* elements that differ */
    double max_abs, max_rel;
    uint64_t max_ulp;
    ppv_diff_point *first; /* the first max_report differing elements */
    int nfirst;
} ppv_diff_entry;

typedef struct ppv_diff_report {
    ppv_diff_entry *entries;
    int n, cap;
    uint64_t objects, datasets, elements; /* compared */
    int ppv_files;                        /* both are ppv golden files */
} ppv_diff_report;

typedef struct ppv_diff_options {
    ppv_tolerance tol;
    int max_report;     /* differing elements listed per dataset (default 10) */
    int all_attributes; /* also compare created/producer_version of ppv files */
    int threads;        /* threads that scan large contiguous datasets (0: one per CPU) */
    const char *device; /* replay: where the model's ops run, "cpu" (NULL) or "cuda" */
    /* replay of an inference recording: the generator to re-run it with
     * (NULL: the built-in); refused unless it has the recorded name and
     * version */
    const ppv_generator *generator;
    /* Left out of the comparison: neither compared nor reported as only on
     * one side. The strings are the caller's; the defaults have none. */
    const char *const *ignore_attrs; /* attribute names, fnmatch globs, on every object */
    int nignore_attrs;
    const char *const *excludes; /* absolute object paths, FNM_PATHNAME globs: the */
    int nexcludes;               /* object and everything below it */
    /* Called once for each dataset whose values were compared, with its
     * entry (count 0: the values are the same), before a clean entry is
     * dropped from the report: a JUnit report lists every dataset. */
    void (*on_values)(void *ctx, const ppv_diff_entry *e);
    void *on_values_ctx;
} ppv_diff_options;

ppv_diff_options ppv_diff_defaults(void);

/* 1 if the attribute name matches one of o->ignore_attrs (fnmatch, no
 * flags: "seed" is that name, "*seed" any name ending in seed), else 0. */
int ppv_diff_attr_ignored(const ppv_diff_options *o, const char *name);

/* 1 if the object at path (absolute, as "/training/grads/layer_0001") is
 * left out by one of o->excludes, else 0: a pattern (trailing and repeated
 * slashes ignored) leaves out every object whose path or an ancestor's
 * matches it whole, component by component (fnmatch FNM_PATHNAME), so
 * "/a/b" leaves out /a/b and /a/b/c but not /a/bc, and
 * "/model/layer_000?" layers 0 to 9 of /model but not /model itself. Only
 * "/" leaves out the root group (its attributes). */
int ppv_diff_path_excluded(const ppv_diff_options *o, const char *path);
void ppv_diff_report_free(ppv_diff_report *r);

/* Compares files a and b (b is the expected side), leaving out what
 * o->excludes and o->ignore_attrs name. Returns 0 with *out (empty
 * entries: same), or -1 with the reason in err: an exclude pattern that
 * does not start with '/', a missing or non-HDF5 file, a ppv file of an
 * unsupported version, unreadable or corrupted data (a failed checksum). */
int ppv_diff_files(const char *a, const char *b, const ppv_diff_options *o, ppv_diff_report **out,
                   char *err, size_t errlen);

/* ---- record and replay ---------------------------------------------------- */

typedef struct ppv_record_options {
    ppv_run_options run;       /* run.recompute may be NULL */
    const char *schedule_text; /* the schedule file as read */
    size_t schedule_len;
    const char *schedule_name;
    const char *recompute_text; /* "none", "all", "0,2" */
    int fail_after;             /* tests: exit(3) after this many datasets (0: never) */
    int term_after;             /* tests: raise(SIGTERM) after this many datasets (0: never) */
} ppv_record_options;

/* Runs s and writes the run to path through a temporary file in the same
 * folder, flushed, synced and renamed: path is either untouched or a
 * complete file. While it writes, SIGINT, SIGTERM and SIGHUP (those at
 * their default action) remove the temporary file, then end the process as
 * they would have; it first removes the temporary files in the folder that
 * crashed records left. Returns 0 with *rep (status in rep->world; no file
 * is written unless the run completed), or -1 with the reason in err. */
int ppv_golden_record(const char *path, const ppv_schedule *s, const ppv_record_options *o,
                      ppv_run_report **rep, char *err, size_t errlen);

typedef struct ppv_replay_result {
    ppv_run_report *run;   /* the re-run */
    ppv_diff_report *diff; /* re-run (a) against the recorded outputs (b) */
    int32_t microbatches, layers;
    char schedule_name[256];
} ppv_replay_result;

/* Rebuilds the model, schedule, options and inputs from the file, re-runs
 * the step and compares loss and gradients with the recorded ones. Inputs
 * are read per microbatch when first needed; gradients are compared one
 * tensor at a time. perturb flips one gradient bit (a self-test). Returns 0
 * with *out, or -1 with the reason (exit 2 material) in err. */
int ppv_golden_replay(const char *path, const ppv_diff_options *o, int perturb,
                      ppv_replay_result *out, char *err, size_t errlen);
/* The same re-run on a job of processes (ppv_proc_start; NULL: the mock),
 * no call waiting longer than timeout_s: every process runs its rank, and
 * every one ends with the whole comparison. */
int ppv_golden_replay_on(const char *path, const ppv_diff_options *o, int perturb, ppv_proc *proc,
                         double timeout_s, ppv_replay_result *out, char *err, size_t errlen);
void ppv_replay_result_free(ppv_replay_result *r);

/* For a program (the ppv command), before any other call of this layer:
 * leaves out HDF5's exit-time cleanup, which crashes after a close that
 * failed on a full disk. */
void ppv_golden_process_init(void);

/* The byte offset of the first global heap collection in the file (or in
 * n bytes of one) that HDF5 1.10 would loop on or read past, -1 if none
 * (or the file cannot be read). Data can spell a collection header by
 * chance, so a hit means "bound the reading", not "corrupt". */
int64_t ppv_golden_bad_heap(const char *path);
int64_t ppv_golden_bad_heap_mem(const uint8_t *data, size_t n);

/* ---- inference recordings (/inference, spec/golden-format.md) ------------------- */

/* Writes every envelope and result of a run, in call order, to a temporary
 * file beside path that ppv_inference_commit renames into place. */
typedef struct ppv_inference_writer ppv_inference_writer;

/* What replay needs to rebuild the mesh that answered the calls:
 * attributes `mesh` and `kv_window` on /inference, and the generator's
 * configuration on /inference/generator. */
typedef struct ppv_inference_setup {
    int32_t mesh, kv_window;
    ppv_gen_config model; /* the built-in's (cond_dim: whichever generator ran) */
    /* the generator that answered (/inference/generator's name, version and
     * params, with setup_digest = ppv_generator_digest of the three); ""
     * when writing means the built-in, its params from model */
    char generator[64], generator_version[32];
    char generator_params[1024];
} ppv_inference_setup;

/* NULL with the reason in err when the temporary file cannot be made.
 * setup may be NULL (a file of calls alone, which replay cannot re-run). */
ppv_inference_writer *ppv_inference_create(const char *path, const ppv_inference_setup *setup,
                                           char *err, size_t errlen);
/* Appends one call: its envelope and, for an INFER, its result (NULL for
 * NOOP, SHUTDOWN and ERROR, which have none). 0, or -1 with the reason. */
int ppv_inference_append(ppv_inference_writer *w, const ppv_envelope *e, const ppv_result *r,
                         char *err, size_t errlen);
/* Stage 0's event log (format version 2): /inference/events, one record
 * per ppv_pp_event, with the clock the times are on and the queue bounds
 * they are judged by. */
typedef struct ppv_inference_events {
    const char *clock; /* "virtual" (the mock's) or "monotonic" (a machine's) */
    int64_t d_in, d_out; /* stage 0's queue bounds */
    int64_t reorder_bound; /* ahead results stage 0 may hold (0: none) */
} ppv_inference_events;

/* Starts the log, before the first call is appended; the file is then
 * format version 2. 0, or -1 with the reason. */
int ppv_inference_events_begin(ppv_inference_writer *w, const ppv_inference_events *how,
                               char *err, size_t errlen);
/* Appends one event (written in blocks). 0, or -1 with the reason. */
int ppv_inference_event(ppv_inference_writer *w, const ppv_pp_event *ev, char *err,
                        size_t errlen);
/* Records one value a mesh rank took of itself (ppv_pp_options.on_rank),
 * written at commit to /inference/ranks/rank_NNNN/KIND. 0, or -1. */
int ppv_inference_rank_value(ppv_inference_writer *w, int32_t mesh_rank, ppv_pp_rank_record kind,
                             int64_t call_id, uint64_t value, char *err, size_t errlen);
/* Each rank's bytes over the run (a version 2 part): /inference/memory,
 * a group a row (rank_NNNN for rows 0..nranks-1, `link` for row nranks)
 * with its peak's attributes and its timeline as (t_ns, bytes, phase)
 * samples; clock as the event log's. Written once, any time before
 * commit. 0, or -1 with the reason. */
int ppv_inference_memory(ppv_inference_writer *w, const ppv_pp_mem_row *rows, int32_t nranks,
                         const char *clock, char *err, size_t errlen);
/* Writes the call count, syncs and renames; frees w either way. */
int ppv_inference_commit(ppv_inference_writer *w, char *err, size_t errlen);
/* Removes the temporary file and frees w. */
void ppv_inference_abort(ppv_inference_writer *w);

typedef struct ppv_inference_reader ppv_inference_reader;

/* Opens a recording and says how many calls it holds; NULL with the
 * reason (missing, not HDF5, not a ppv inference recording, no calls). */
/* *has_setup says whether the file has the setup (and *setup holds it). */
ppv_inference_reader *ppv_inference_open(const char *path, int64_t *ncalls,
                                         ppv_inference_setup *setup, int *has_setup, char *err,
                                         size_t errlen);
/* Reads call k (0-based): the envelope and, if the call has one, the
 * result (*has_result). Tensors are malloc'd: free them with
 * ppv_envelope_free_tensors and ppv_result_free_tensors. The contract's
 * rules are not checked here (ppv_envelope_check does). 0, or -1 with the
 * reason naming the call and what is wrong. */
int ppv_inference_read(ppv_inference_reader *r, int64_t k, ppv_envelope *e, ppv_result *res,
                       int *has_result, char *err, size_t errlen);
void ppv_inference_close(ppv_inference_reader *r);

/* Replaying a recording: the mesh rebuilt from the file's setup, the
 * recorded envelopes fed to it in order (stage 0 is the file, so an
 * envelope that breaks the contract reaches the leader as it did), each
 * result compared with the recorded one: latents_out under o's tolerance,
 * its ids, observed_generator_calls, mesh_current_start_frame,
 * output_digest_i64, ok and error_message exactly. */
typedef struct ppv_inference_replay_result {
    ppv_pp_report *run;
    ppv_diff_report *diff;   /* re-run (a) against the recording (b) */
    int64_t calls;           /* in the file */
    int64_t first_call;      /* index of the first call that differs; -1 when none */
    int64_t first_call_id, first_chunk_index;
    ppv_inference_setup setup; /* as recorded */
    int32_t mesh;              /* the mesh it was replayed on */
} ppv_inference_replay_result;

/* 0 with *out, or -1 with the reason (exit 2 material: unreadable, no
 * setup, a setup the engine cannot run). mesh > 0 replays on a mesh of
 * that size instead of the recorded one (the bits must not change);
 * perturb flips the lowest bit of the first re-computed latents_out (a
 * self-test: the replay must then fail). o->excludes leave results out. */
int ppv_inference_replay(const char *path, const ppv_diff_options *o, int32_t mesh, int perturb,
                         ppv_inference_replay_result *out, char *err, size_t errlen);
void ppv_inference_replay_free(ppv_inference_replay_result *r);

/* 1 if path is a ppv file of kind "inference", 0 if not (or unreadable). */
int ppv_golden_is_inference(const char *path);

/* ---- conformance of a recording (ppv conform) -------------------------------------- */

/* Every check ppv conform makes, in the order it reports them:
 * X(ID, "name", "what it checks"). A violation names its check and the
 * contract's rule (an FM-xx or PPV-* id of spec/contract.def). */
#define PPV_CONFORM_CHECKS(X)                                                                      \
    X(COMPLETE, "complete",                                                                        \
      "the recording ends in SHUTDOWN, ERROR or the mesh's error result, and its calls count "     \
      "is the calls it holds")                                                                     \
    X(ENVELOPE, "envelope",                                                                        \
      "every envelope keeps the contract's rules for its action: version, fields, tensors, "       \
      "the call formula, call_id/chunk_index/cache_epoch order, an epoch's first chunk")           \
    X(ENVELOPE_DIGEST, "envelope-digest",                                                          \
      "where envelopes carry envelope_digest_i64: each is the digest of its envelope as recorded")  \
    X(AFTER_END, "after-end", "no call after SHUTDOWN, ERROR or the mesh's error result")          \
    X(UNKNOWN_FIELD, "unknown-field",                                                              \
      "no video key (forbidden); with --strict, no field or object the contract and the format "  \
      "do not define (without it they are counted and named: a receiver filters them out)")       \
    X(ANSWERED, "answered", "every INFER has one result, and no other action has one")             \
    X(RESULT, "result",                                                                            \
      "a result's version and ids equal the envelope it answers; ok and error_message; "           \
      "latents_out's dtype and shape")                                                             \
    X(GENERATOR_CALLS, "generator-calls",                                                          \
      "observed_generator_calls equals the envelope's expected_generator_calls")                   \
    X(DIGEST, "digest", "output_digest_i64 is the digest of latents_out")                          \
    X(FINITE, "finite", "latents_out holds finite values only")                                    \
    X(START_FRAME, "start-frame",                                                                  \
      "mesh_current_start_frame equals the envelope's current_start_frame")                        \
    X(ERROR_RESULT, "error-result", "no result reports a failure of the mesh (ok 0)")            \
    X(EVENT_LOG, "event-log",                                                                      \
      "version 2: the event log is in time order, and its sent envelopes are the recorded "        \
      "calls, one for one")                                                                        \
    X(STALE, "stale",                                                                              \
      "version 2: a result of another cache epoch is dropped as stale, and never decoded")         \
    X(DUPLICATE, "duplicate",                                                                      \
      "version 2: a result of a call already accepted is dropped as a duplicate, one of a call "   \
      "abandoned at a cut as late; neither is decoded")                                            \
    X(AHEAD, "ahead",                                                                              \
      "version 2: a result past the next expected call is never accepted out of order; it is "     \
      "held only within the recorded reorder bound, else it is an error")                          \
    X(DECODED, "decoded-once",                                                                     \
      "version 2: every INFER sent is decoded exactly once and in call order, abandoned at a "     \
      "cut, or answered by the mesh's error")                                                      \
    X(QUEUES, "queues",                                                                            \
      "version 2: stage 0's queues never above D_in in flight, D_out ready, counted from its "     \
      "events; the log's recorded depths agree with them")                                         \
    X(RANK_INPUTS, "rank-inputs",                                                                  \
      "where the mesh ranks recorded them: every rank's input digest of a call is the same")      \
    X(SHARD_FINGERPRINTS, "shard-fingerprints",                                                    \
      "where recorded: each rank's shard fingerprint never changes, and no two ranks' are equal")  \
    X(RANK_STATE, "rank-state", "where recorded: every rank's state digest of a call is the same") \
    X(MEMORY, "memory",                                                                            \
      "where recorded: each rank's memory samples are in time order and none above its "          \
      "peak_bytes; with --mem-cap, no rank's peak above its cap")                                 \
    X(OVERLAP, "overlap",                                                                          \
      "--overlap: the contract's OverlapScore, from the log's times and the results' tB_ms, "     \
      "is at least 0.30")

typedef enum ppv_conform_check {
#define PPV_CONFORM_ENUM(ID, name, text) PPV_CONFORM_##ID,
    PPV_CONFORM_CHECKS(PPV_CONFORM_ENUM)
#undef PPV_CONFORM_ENUM
        PPV_CONFORM_COUNT
} ppv_conform_check;

/* "complete", ... and what each checks. */
const char *ppv_conform_check_name(ppv_conform_check c);
const char *ppv_conform_check_text(ppv_conform_check c);

typedef struct ppv_conform_violation {
    ppv_conform_check check;
    ppv_failure rule;
    int64_t call; /* index in the file; -1: the file as a whole */
    int64_t call_id, chunk_index, cache_epoch; /* the call's envelope; -1 when none */
    char message[768]; /* what was expected and what was found */
} ppv_conform_violation;

/* The overlap metric's warm-up (chunks skipped) and passing score. */
#define PPV_OVERLAP_WARMUP PPV_PP_OVERLAP_WARMUP
#define PPV_OVERLAP_MIN PPV_PP_OVERLAP_MIN

typedef struct ppv_conform_options {
    int max_report; /* violations kept in the report (all are counted); 0: 100, below 0: none */
    int overlap;    /* also measure the overlap (PPV_CONFORM_OVERLAP) */
    int strict;     /* a field the contract does not define is a violation, not a count */
    /* --mem-cap: caps[i] bytes for rank i, the last for the ranks after it
     * (the link is never capped); a recording without memory samples is
     * then an error (-1), since nothing could be checked */
    const double *mem_caps;
    int nmem_caps;
} ppv_conform_options;

/* A row of the recording's memory part (/inference/memory), as conform
 * read it. */
typedef struct ppv_conform_memory {
    int32_t rank;       /* 0 stage 0, 1 the leader, 2... its workers; -1 the link */
    int64_t peak_bytes; /* the higher of its peak_bytes and its samples' highest */
    int64_t samples;
    int64_t peak_t_ns, peak_chunk, peak_call_id; /* INT64_MIN where not recorded */
    char peak_phase[24];                          /* "" where not recorded */
    int64_t held_at_end;                          /* -1 where not recorded */
    int64_t at_peak[PPV_MEM_KIND_COUNT];          /* -1 where not recorded */
    double cap;                                   /* its --mem-cap (0: none) */
} ppv_conform_memory;

typedef struct ppv_conform_report {
    ppv_conform_violation *v; /* the first max_report, in the order found */
    int nv;
    int64_t violations;               /* all found */
    int64_t by_check[PPV_CONFORM_COUNT]; /* found per check */
    int checked[PPV_CONFORM_COUNT];       /* 1: the check was made (the format holds what it reads) */
    int nchecked;
    int64_t events;                       /* in the event log (version 2) */
    /* --overlap: whether it was measured, the score and the medians of its
     * samples (the decoded chunks after the warm-up that have both stages) */
    int overlap_done;
    int64_t overlap_samples;
    double overlap_score, overlap_period_ms, overlap_stage0_ms, overlap_stage1_ms;
    int64_t format_version;
    int64_t calls;   /* the file's calls count */
    int64_t present; /* calls the file holds (in order from call 0) */
    int64_t infers, results;
    int has_setup;
    char limits[256]; /* what this file's format cannot show ("" when nothing) */
    /* fields and objects the contract and the format do not define: a
     * receiver filters them out, so they are counted and named (the first
     * few, each with its path) and are violations only with strict */
    int64_t unknown_fields;
    char unknown_names[512];
    /* the memory part, where recorded (its rows readable and judged) */
    ppv_conform_memory *mem;
    int32_t nmem;
    char mem_clock[24];
} ppv_conform_report;

/* Checks the recording at path against the contract, with no model: 0
 * with *out (out->violations == 0: it conforms), or -1 with the reason in
 * err (exit 2: missing, not HDF5, not an inference recording, a call that
 * cannot be read as the format says, naming its path in the file). Holds
 * one call's tensors at a time. */
int ppv_conform(const char *path, const ppv_conform_options *o, ppv_conform_report *out, char *err,
                size_t errlen);
void ppv_conform_report_free(ppv_conform_report *r);

#endif
