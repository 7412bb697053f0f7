/* ppv_pp.h - the engine's pp room: the PP inference contract's rules and
 * framing, and the inference pipeline (stage 0 and the mesh).
 *
 * Functions return 0 on success and a negative value on failure, with a
 * message in the caller's buffer; no function here exits the process.
 */
#ifndef PPV_PP_H
#define PPV_PP_H

#include "ppv_run.h"

/* ---- the PP inference contract (spec/contract.def) ------------------------------ */

/* The formula every tripwire checks: one generator call to rebuild the KV
 * cache when recomputing, plus one per denoising step. */
int64_t ppv_expected_generator_calls(int do_kv_recompute, int64_t num_denoise_steps);

/* An INFER envelope with every field at its default (version 1,
 * pp_disable_vace 1, kv_cache_attention_bias 0.3, ids 0) and no tensor. */
void ppv_envelope_init(ppv_envelope *e);
/* A result of version 1 for e's ids, ok, with no tensor. */
void ppv_result_init(ppv_result *r, const ppv_envelope *e);

/* What a receiver has seen so far, for the ordering rules: call_id
 * strictly increases over all actions, chunk_index over the INFERs of an
 * epoch, cache_epoch never decreases. */
typedef struct ppv_contract_order {
    int64_t call_id;     /* last seen; -1 before any */
    int64_t chunk_index; /* last INFER's in this epoch; -1 before any */
    int64_t cache_epoch; /* current; -1 before any */
} ppv_contract_order;

ppv_contract_order ppv_contract_order_start(void);

/* Checks e on its own and against o, which it does not change. Returns
 * PPV_FAIL_NONE, or the failure mode with msg naming the rule and e's
 * call_id, chunk_index and cache_epoch. */
ppv_failure ppv_envelope_check(const ppv_envelope *e, const ppv_contract_order *o, char *msg,
                               size_t msglen);
/* Takes a checked envelope's ids into o. */
void ppv_contract_order_advance(ppv_contract_order *o, const ppv_envelope *e);

/* What stage 0 does with a result of the envelope it sent. */
typedef enum ppv_result_verdict {
    PPV_RESULT_ACCEPT,          /* decode it (ok) or report the mesh's error (!ok) */
    PPV_RESULT_DROP_STALE,      /* another cache epoch: never decoded */
    PPV_RESULT_DROP_DUPLICATE,  /* a call_id already accepted: never decoded */
    PPV_RESULT_REJECT           /* breaks the contract: *mode says how */
} ppv_result_verdict;

/* Stage 0's acceptance rules for r, given the envelope sent with that
 * call_id, the current epoch and the last call_id accepted (-1: none). */
ppv_result_verdict ppv_result_check(const ppv_result *r, const ppv_envelope *sent,
                                    int64_t cache_epoch, int64_t last_accepted, ppv_failure *mode,
                                    char *msg, size_t msglen);

/* Bytes of t's elements (0 when absent). */
size_t ppv_tensor_bytes(const ppv_tensor *t);

/* Wire framing: a header of PPV_FRAME_HEADER words (action, call_id,
 * chunk_index, cache_epoch, n_tensors, version, meta_bytes), then the
 * metadata and tensor specs as canonical text (one "key=value" line per
 * field and "tensor.KEY=DTYPE d0 d1 ..." per tensor, sorted by key), then
 * the tensors in spec order. Only an INFER envelope or a result has a
 * payload: NOOP, SHUTDOWN and ERROR are their header. */
enum { PPV_FRAME_HEADER = 7, PPV_FRAME_MAX_TENSORS = 8 };

typedef struct ppv_frame {
    int64_t header[PPV_FRAME_HEADER];
    char *meta; /* header[6] bytes and a NUL; NULL when there is no payload */
    int ntensors;
    const ppv_tensor *tensors[PPV_FRAME_MAX_TENSORS]; /* spec order */
} ppv_frame;

/* Anti-stranding: checks e against o, serialises the metadata, builds and
 * checks every tensor spec, all before anything is sent. PPV_FAIL_NONE with
 * *f ready to send (the header is then a commitment), or the failure mode
 * and nothing in *f. f's tensors point into e. */
ppv_failure ppv_envelope_frame(const ppv_envelope *e, const ppv_contract_order *o, ppv_frame *f,
                               char *msg, size_t msglen);
/* The same for a result; r is checked for form only (stage 0 judges it). */
ppv_failure ppv_result_frame(const ppv_result *r, ppv_frame *f, char *msg, size_t msglen);
void ppv_frame_free(ppv_frame *f);

/* Receiver's side: rebuilds an envelope from its header and metadata,
 * refusing an unknown version, action or field, a missing or repeated
 * field, a header that disagrees with the metadata and a spec of the wrong
 * dtype or rank, before anything else is received. Tensors are allocated
 * from the specs (zeroed) and listed in spec order in order[], to be filled
 * with the payload. meta may be NULL when header says 0 bytes. */
ppv_failure ppv_envelope_unframe(const int64_t *header, const char *meta, ppv_envelope *e,
                                 ppv_tensor **order, int *norder, char *msg, size_t msglen);
ppv_failure ppv_result_unframe(const int64_t *header, const char *meta, ppv_result *r,
                               ppv_tensor **order, int *norder, char *msg, size_t msglen);
/* envelope_digest_i64 for an INFER envelope: a digest of its canonical
 * metadata text without that field (so of the contract's fields, never a
 * newer sender's) and of its tensors in spec order. Never 0 (which means
 * "none"); 0 for any other action or an envelope that cannot be framed. */
uint64_t ppv_envelope_digest(const ppv_envelope *e);

/* Frees the tensors an unframe allocated. */
void ppv_envelope_free_tensors(ppv_envelope *e);
void ppv_result_free_tensors(ppv_result *r);

/* ---- the PP inference pipeline on the mock transport (ppv pp) -------------------- */

/* Faults `ppv pp --inject` puts in on purpose (spec/inject.def). */
typedef enum ppv_pp_inject {
#define PPV_PP_INJECT(NAME, token, mode, caught_by, text) PPV_INJECT_##NAME,
#include "inject.def"
#undef PPV_PP_INJECT
    PPV_INJECT_COUNT
} ppv_pp_inject;

/* What catches a failure: the four tripwire points, and the other checks. */
typedef enum ppv_pp_point {
    PPV_POINT_NONE,
    PPV_POINT_STAGE0_SEND,   /* 1: stage 0 before it sends */
    PPV_POINT_LEADER,        /* 2: the leader before it broadcasts */
    PPV_POINT_MESH_RUNNING,  /* 3: every mesh rank while it runs the chunk */
    PPV_POINT_STAGE0_RESULT, /* 4: stage 0 on the result */
    PPV_POINT_HANDSHAKE,     /* the startup parity check */
    PPV_POINT_GROUP,         /* the collective wrapper's group check */
    PPV_POINT_DIGEST,        /* the mesh's input digest */
    PPV_POINT_TRANSPORT,     /* the transport (a collective mismatch) */
    PPV_POINT_WATCHDOG,      /* a bounded wait */
    PPV_POINT_FINGERPRINT,   /* the mesh's shard fingerprints */
    PPV_POINT_BROADCAST,     /* the collective wrapper's refusal of a broadcast in a block */
    PPV_POINT_COUNT
} ppv_pp_point;

/* "stage0-send", "leader", ... */
const char *ppv_pp_point_name(ppv_pp_point p);
/* Injection token ("OM-03", "extra-generator-call"), what it does, the
 * failure mode it must produce (PPV_FAIL_NONE: the run completes ok) and
 * the point that must catch it. */
const char *ppv_pp_inject_token(ppv_pp_inject i);
const char *ppv_pp_inject_text(ppv_pp_inject i);
ppv_failure ppv_pp_inject_mode(ppv_pp_inject i);
ppv_pp_point ppv_pp_inject_caught_by(ppv_pp_inject i);
/* The injection spelled token, or -1. */
int ppv_pp_inject_lookup(const char *token);

enum { PPV_PP_MAX_CUTS = 64 };

/* Design variants with a known bug, for the explorer's tests (the seeded
 * bugs it must find): never what ppv pp runs. */
typedef enum ppv_pp_bug {
    PPV_PP_BUG_NONE,
    PPV_PP_BUG_WAIT_TRUSTS_EPOCH,   /* with poll: stage 0 takes a result it waited for (its probe
                                       found nothing) without judging it, a stale one included */
    PPV_PP_BUG_DECODE_FIRST,        /* stage 0 decodes result k before it sends envelope k+1 */
    PPV_PP_BUG_LEADER_DIES,         /* the leader returns after receiving chunk 1's header */
    PPV_PP_BUG_WORKER_LOCAL_RECOMPUTE, /* the last mesh rank decides KV recompute from its own
                                         count of chunks, not the envelope's flag */
    PPV_PP_BUG_SHARD_RELOAD, /* the built-in generator's last mesh rank reloads mesh rank 0's
                               shard before chunk 1 (a hot reload gone wrong) */
    PPV_PP_BUG_BLOCKING_DECODE, /* stage 0 sends an envelope only when nothing is in flight or
                                  waiting to be decoded (a decode on the send thread): the
                                  output is right, the mesh idles through every decode */
    PPV_PP_BUG_SEND_ON_PROBE_HIT, /* with poll: when its probe finds a result with D_in in
                                     flight, stage 0 sends the next envelope before taking it
                                     (past D_in: the bounded queue's tripwire) */
    PPV_PP_BUG_CUT_ON_PROBE_HIT,  /* with poll: at a hard cut, stage 0 takes a result its
                                     probe found for the old epoch drained and starts the new
                                     one with results still in flight */
    PPV_PP_BUG_RESULTS_KEPT, /* stage 0 keeps every decoded result's latents and never gives
                                them back (a list that only grows): the output is right, its
                                memory grows with the chunks */
    PPV_PP_BUG_COUNT
} ppv_pp_bug;

/* A seeded bug's name on the command line (--seed-bug), what it breaks,
 * and the options under which it can show; NULL for none. */
const char *ppv_pp_bug_token(ppv_pp_bug b);
const char *ppv_pp_bug_text(ppv_pp_bug b);
const char *ppv_pp_bug_needs(ppv_pp_bug b);
/* The bug spelled token, or -1. */
int ppv_pp_bug_lookup(const char *token);

/* Stage 0's event log (a recording's /inference/events): what it sent,
 * what it received and what it did with each result, and what it decoded,
 * in order, with the time and its queue depths. */
#define PPV_PP_EVENT_KINDS(X)                                                                      \
    X(SENT, "sent")         /* an envelope of any action (a NOOP is a heartbeat) */                \
    X(RECEIVED, "received") /* a result; the verdict says what stage 0 did with it */             \
    X(DECODED, "decoded")   /* an accepted result decoded: its chunk emitted */                   \
    X(ABANDONED, "abandoned") /* an INFER in flight given up at a hard cut: its result, if */     \
                              /* one comes, is late */

#define PPV_PP_VERDICTS(X)                                                                         \
    X(NONE, "none")           /* not a received result */                                          \
    X(ACCEPTED, "accepted")   /* queued for decoding */                                            \
    X(STALE, "stale")         /* another cache epoch: dropped, never decoded */                    \
    X(DUPLICATE, "duplicate") /* a call_id already accepted: dropped and logged */                 \
    X(LATE, "late")           /* a call stage 0 abandoned: dropped and logged */                   \
    X(AHEAD, "ahead")         /* past the next expected call_id: held in the reorder buffer */     \
    X(ERROR, "error")         /* the mesh's error result: the stream ends */                       \
    X(REJECTED, "rejected")   /* breaks the contract: the run fails */

typedef enum ppv_pp_event_kind {
#define PPV_PP_EVENT_ENUM(ID, name) PPV_EVENT_##ID,
    PPV_PP_EVENT_KINDS(PPV_PP_EVENT_ENUM)
#undef PPV_PP_EVENT_ENUM
        PPV_EVENT_KIND_COUNT
} ppv_pp_event_kind;

typedef enum ppv_pp_verdict {
#define PPV_PP_VERDICT_ENUM(ID, name) PPV_VERDICT_##ID,
    PPV_PP_VERDICTS(PPV_PP_VERDICT_ENUM)
#undef PPV_PP_VERDICT_ENUM
        PPV_VERDICT_COUNT
} ppv_pp_verdict;

/* "sent", ... and "accepted", ...; "?" when out of range. */
const char *ppv_pp_event_kind_name(int64_t k);
const char *ppv_pp_verdict_name(int64_t v);

typedef struct ppv_pp_event {
    int64_t t_ns;       /* when it was done (the transport's clock, ppv_transport_clock_ns) */
    int64_t t_begin_ns; /* SENT: when stage 0 began building the envelope; DECODED: when the */
                        /* decode began; else t_ns */
    int64_t kind, verdict;
    int64_t action, call_id, chunk_index, cache_epoch; /* the envelope's, or the result's */
    int64_t inflight, ready; /* stage 0's queues after it: sent and unanswered, to decode */
} ppv_pp_event;

/* What a mesh rank may record of itself beside the log (a recording's
 * /inference/ranks), by call_id: the digest of the input it received, its
 * weight shard's fingerprint, and a digest of its scalar state. */
#define PPV_PP_RANK_RECORDS(X)                                                                     \
    X(INPUT_DIGEST, "input_digest")                                                                \
    X(SHARD_FINGERPRINT, "shard_fingerprint")                                                      \
    X(STATE_DIGEST, "state_digest")

typedef enum ppv_pp_rank_record {
#define PPV_PP_RANK_ENUM(ID, name) PPV_RANK_##ID,
    PPV_PP_RANK_RECORDS(PPV_PP_RANK_ENUM)
#undef PPV_PP_RANK_ENUM
        PPV_RANK_RECORD_COUNT
} ppv_pp_rank_record;

/* "input_digest", ...; "?" when out of range. */
const char *ppv_pp_rank_record_name(int k);

/* ---- generators (ppv_generator.h) ----------------------------------------------- */

/* A generator plug-in's table: a shared object (its PPV_GENERATOR_ENTRY),
 * or a Python module (a path ending in .py, run by the Python bridge).
 * Refused, NULL with the reason, when it does not load, lacks the entry or
 * a function, or was built against another version of the interface. The
 * plug-in stays loaded for the life of the process. */
const ppv_generator *ppv_generator_open(const char *path, char *err, size_t errlen);
/* A digest of what a recording's generator is: its name, version and
 * settings text (FNV-1a over each with its NUL). */
uint64_t ppv_generator_digest(const char *name, const char *version, const char *params);

/* ---- the plug-in guard ---------------------------------------------------------- */

/* Where a generator's own code runs: the engine marks every call into a
 * generator's table (open, create, kv_reset, kv_snapshot, call, destroy,
 * close) on the calling thread, and unmarks it while the generator waits
 * in one of ppv's collectives. A process that guards its plug-ins (the
 * ppv command: tools/guard.c) reads the mark to name the plug-in when it
 * calls exit(), dies of a signal or never returns. This is the library's
 * one process-wide state besides the CUDA module's: one slot per thread,
 * claimed on its first call into a generator. */
typedef struct ppv_generator_site {
    const char *name, *version; /* the generator's */
    const char *function;       /* "call", "create", ... */
    int32_t mesh_rank;          /* -1: the process's open or close */
    int64_t call_id, chunk_index, cache_epoch; /* the envelope's; -1 before the first */
} ppv_generator_site;

/* The site whose plug-in code runs now on the calling thread, or NULL when
 * ppv's own code runs. Async-signal-safe. */
const ppv_generator_site *ppv_generator_site_now(void);

/* For a watchdog thread: calls fn for every thread now in a generator's
 * code, with the site and the number of times that thread has entered
 * generator code so far (the same count on two visits, the same call
 * still running). Returns the number of threads visited. */
int ppv_generator_sites_visit(void (*fn)(void *ctx, int slot, const ppv_generator_site *s,
                                         uint64_t entries),
                              void *ctx);

/* ---- memory (docs/memory.md) -------------------------------------------------- */

/* What a rank's bytes are (the breakdown of a peak). Stage 0: the
 * envelopes it holds (planned until their result is decoded: a retry and
 * the recorder need them), the results it received and has not decoded,
 * and the decoded frames it keeps as context for recompute. A mesh rank:
 * the envelope in hand (after the broadcast, its own copy), the chunk's
 * buffers (the output and the denoising loop's two latents), the leader's
 * result cache, and what the generator reports (weights, KV cache, a
 * call's working memory). The link: what the buffered stage-0/leader link
 * holds, sent and not yet received (the transport's copies). Only tensor
 * data is counted: headers, metadata text and bookkeeping under 1 KiB a
 * rank are not. */
#define PPV_PP_MEM_KINDS(X)                                                                        \
    X(ENVELOPES, "envelopes")                                                                      \
    X(RESULTS, "results")                                                                          \
    X(CONTEXT, "context")                                                                          \
    X(BUFFERS, "buffers")                                                                          \
    X(RESULT_CACHE, "result_cache")                                                                \
    X(WEIGHTS, "weights")                                                                          \
    X(KV_CACHE, "kv_cache")                                                                        \
    X(WORKING, "working")                                                                          \
    X(LINK, "link")

typedef enum ppv_pp_mem_kind {
#define PPV_PP_MEM_ENUM(ID, name) PPV_MEM_##ID,
    PPV_PP_MEM_KINDS(PPV_PP_MEM_ENUM)
#undef PPV_PP_MEM_ENUM
        PPV_MEM_KIND_COUNT
} ppv_pp_mem_kind;

/* Where the pipeline is, as stage 0 sees it: filling the queues before the
 * first decode, steady state, draining for a hard cut, the new epoch until
 * its first decode, and the end (every chunk sent). A mesh rank's bytes
 * take the phase its envelope was sent in. */
#define PPV_PP_PHASES(X)                                                                           \
    X(WARMUP, "warm-up")                                                                           \
    X(STEADY, "steady")                                                                            \
    X(CUT_DRAIN, "cut-drain")                                                                      \
    X(NEW_EPOCH, "new-epoch")                                                                      \
    X(END, "end")

typedef enum ppv_pp_phase {
#define PPV_PP_PHASE_ENUM(ID, name) PPV_PHASE_##ID,
    PPV_PP_PHASES(PPV_PP_PHASE_ENUM)
#undef PPV_PP_PHASE_ENUM
        PPV_PHASE_COUNT
} ppv_pp_phase;

/* "envelopes", ... and "warm-up", ...; "?" when out of range. */
const char *ppv_pp_mem_kind_name(int k);
const char *ppv_pp_phase_name(int p);
/* A PP0/PP1 rank's role: "stage 0" (rank 0), "leader" (1), "worker". */
const char *ppv_pp_role_name(int32_t rank);

typedef struct ppv_pp_mem_sample {
    int64_t t_ns;       /* the transport's clock */
    uint64_t bytes;     /* the row's total after the change */
    ppv_pp_phase phase; /* the change's */
} ppv_pp_mem_sample;

/* One row of the accounting: a rank (or the link). The peak is the first
 * moment the total reached its highest value; chunk and call_id are those
 * of the buffer whose allocation reached it (-1: a buffer of no envelope,
 * allocated at start). */
typedef struct ppv_pp_mem_row {
    uint64_t peak;
    uint64_t at_peak[PPV_MEM_KIND_COUNT]; /* the breakdown then */
    int64_t peak_chunk, peak_call_id, peak_t_ns;
    ppv_pp_phase peak_phase;
    uint64_t now[PPV_MEM_KIND_COUNT], total; /* as the run left it */
    ppv_pp_mem_sample *timeline;             /* every change, with ppv_pp_options.mem_timeline */
    int64_t ntimeline, timeline_cap;
} ppv_pp_mem_row;

typedef struct ppv_pp_options {
    int32_t mesh;            /* stage-1 ranks: 1 is PP0, >= 2 PP1 (leader + workers) */
    int32_t chunks;          /* chunks stage 0 asks for */
    int32_t steps;           /* denoising steps per chunk */
    int kv_recompute;        /* 0: stash (R1); 1: recompute from stage 0's context frames (R0a) */
    int32_t recompute_every; /* with kv_recompute: chunks j % E == 0 of an epoch, j > 0 */
    int32_t kv_window;       /* latent frames the KV cache keeps: a multiple of 3 */
    int32_t d_in, d_out;     /* stage 0's queue bounds: inflight_to_mesh, ready_for_decode */
    int32_t cuts[PPV_PP_MAX_CUTS]; /* chunks before which stage 0 makes a hard cut */
    int32_t ncuts;
    int32_t height, width;   /* pixels: multiples of 16 */
    int32_t cond_len;        /* conditioning tokens */
    ppv_gen_config model; /* the built-in generator's (and stage 0's cond_dim, whichever runs) */
    /* The generator the mesh runs: NULL the built-in (ppv_generator_builtin,
     * configured by model), else a plug-in's table with its settings text
     * (NULL: ""). See ppv_generator_open. */
    const ppv_generator *generator;
    const char *generator_params;
    const char *device; /* where the generator's ops run: NULL or "cpu", or "cuda" */
    ppv_pp_inject inject;
    ppv_policy policy;
    int64_t watchdog_steps;
    int control_only; /* no model compute: a call passes its latents through, keeping every
                         message and collective (the control plane alone) */
    int poll; /* stage 0 takes each result as soon as it has arrived (it probes the link
                 between sends and decodes, as a receive thread does), so what it does
                 next depends on the interleaving; its output must not */
    /* stage 0 puts envelope_digest_i64 in every INFER it plans, and the
     * leader refuses one without it or that does not match it (PPV-ENVELOPE),
     * before any collective. Off, the leader still checks a digest that comes. */
    int envelope_digest;
    /* Shard fingerprints (OM-12): with N > 0, every mesh rank fingerprints
     * the weight shard it holds at start (the baseline: no two ranks alike),
     * on every init_cache and every N chunks it runs (each unchanged from its
     * baseline, no two alike), all-gathered; PPV-FINGERPRINT otherwise. The
     * built-in's fingerprint reads its weights (ppv_genmodel_shard_fingerprint);
     * a plug-in's and --control-only's stands for the shard its setup names
     * (the generator interface shows ppv no weights). 0: none. */
    int32_t fingerprint_every;
    unsigned skip_points; /* tests: 1 << ppv_pp_point of checks taken out */
    ppv_pp_bug bug;       /* tests: a seeded bug */
    ppv_fault fault;      /* one transport fault (the explorer's), or none */
    /* Virtual time on the mock (a microsecond a scheduler step): a decode
     * costs cost_decode steps of stage 0, a generator call (a cache write
     * included) cost_call steps of each mesh rank. 0: free (the default). */
    int32_t cost_decode, cost_call;
    /* Replay: stage 0 sends these envelopes in order instead of planning
     * (they are not changed; their tensors stay the caller's), and every
     * result it receives is passed to on_result. */
    const ppv_envelope *replay;
    int64_t nreplay;
    /* Called by stage 0 for each envelope it sends, with its result once
     * accepted (NULL for SHUTDOWN, or when none came): a recorder. */
    int (*on_call)(void *ctx, const ppv_envelope *e, const ppv_result *r, char *err,
                   size_t errlen);
    void *on_call_ctx;
    /* Called by stage 0 for every event of its log, in order: a recorder. */
    int (*on_event)(void *ctx, const ppv_pp_event *ev, char *err, size_t errlen);
    void *on_event_ctx;
    /* Called by each mesh rank (mesh rank 0 the leader) with what it records
     * of itself (on the mock: the input digest of every INFER, on a mesh of
     * 2 or more). */
    int (*on_rank)(void *ctx, int32_t mesh_rank, ppv_pp_rank_record kind, int64_t call_id,
                   uint64_t value, char *err, size_t errlen);
    void *on_rank_ctx;
    /* Called by stage 0 after each decoded chunk with the chunks emitted
     * and the run's total (a progress display; it must not touch the run). */
    void (*progress)(void *ctx, int64_t done, int64_t total);
    void *progress_ctx;
    /* --compare-kv: keep the whole mesh's KV cache as each chunk's
     * denoising starts (ppv_pp_report.kv) */
    int keep_kv;
    /* Where the ranks run: NULL on the mock; or a job of 1 + mesh processes
     * (ppv_proc_start), this one running its own rank, the link to the
     * leader buffered as on the mock and no call waiting longer than
     * timeout_s (then the rank reports the hang and the job ends, as any
     * failure does). Every process ends with stage 0's report. policy,
     * watchdog_steps, fault, inject, replay and keep_kv are the mock's. */
    ppv_proc *proc;
    double timeout_s;
    /* Heartbeats: stage 0 sends a NOOP (it takes a call_id) whenever this
     * long has passed since it last sent, looking between its steps (it is
     * one thread: a decode longer than the workers' watchdog ends the run);
     * the transport's clock, so virtual seconds on the mock. 0: none. */
    double heartbeat_s;
    /* With proc: how long a mesh rank waits for the next envelope (the
     * leader from stage 0, a worker for the leader's broadcast) before it
     * ends the job naming the last header it saw; every header, a NOOP
     * included, starts the wait again. 0: the timeout. The mock has no
     * wall time: its waits end by watchdog_steps. */
    double worker_watchdog_s;
    /* keep every row's timeline (ppv_pp_mem_row.timeline): each change of
     * its bytes, with the time */
    int mem_timeline;
    /* no accounting at all (ppv_pp_report.mem NULL): the explorer, which
     * runs the pipeline many times and never reads the rows */
    int memory_off;
} ppv_pp_options;

/* Mesh 2, 8 chunks, 4 steps, stash, E=1, window 6, D_in = D_out = 2, no
 * cut, 32x32, 4 conditioning tokens, the generator's default, rr,
 * watchdog 100000 steps, envelope digests on. */
ppv_pp_options ppv_pp_defaults(void);

/* Checks the options on their own; 0, or -1 with the reason. */
int ppv_pp_options_check(const ppv_pp_options *o, char *err, size_t errlen);

/* The contract's overlap metric. Per decoded chunk, in decode order: when
 * stage 0 began building its envelope and sent it, took its result and
 * emitted it (transport clock, ns; t_recv < 0: the result was held ahead
 * and has no receive time of its own), the result's tB_ms and
 * t_mesh_idle_ms, and the decode's own time (ms). */
typedef struct ppv_pp_chunk_times {
    int64_t t_begin, t_sent, t_recv, t_emit;
    double tB_ms, mesh_idle_ms, decode_ms;
} ppv_pp_chunk_times;

/* period_k = tEmit[k] - tEmit[k-1], stage0_k = (tA1 - tA0) + (tEmit -
 * tRecv), stage1_k = tB_ms, hidden_k = max(0, stage0 + stage1 - period);
 * OverlapScore = median(hidden / min(stage0, stage1)) over the chunks
 * after PPV_PP_OVERLAP_WARMUP whose two stages took time; the others are
 * medians over the same chunks. samples 0: nothing to measure. */
#define PPV_PP_OVERLAP_WARMUP 10
#define PPV_PP_OVERLAP_MIN 0.30
typedef struct ppv_pp_overlap {
    int64_t samples;
    double score, period_ms, stage0_ms, stage1_ms, hidden_ms, mesh_idle_ms, decode_ms;
} ppv_pp_overlap;

/* 0, or -1 out of memory. */
int ppv_pp_overlap_measure(const ppv_pp_chunk_times *c, int64_t n, ppv_pp_overlap *out);

typedef struct ppv_pp_report {
    int ok;
    ppv_failure failure;      /* PPV_FAIL_NONE when ok */
    ppv_pp_point caught_by;   /* PPV_POINT_NONE when ok */
    int32_t failed_rank;      /* -1 when ok */
    char message[1024];       /* carries call_id, chunk_index, cache_epoch, rank and group */
    int64_t chunks_emitted;   /* results decoded */
    int64_t *expected_calls;  /* [chunks_emitted] */
    int64_t *observed_calls;  /* [chunks_emitted] */
    int64_t *emitted_call_ids;
    int64_t dropped_stale, dropped_duplicate;
    int64_t heartbeats; /* NOOPs stage 0 sent */
    int64_t reordered; /* results that came ahead of their turn, held in stage 0's reorder
                          buffer (at most D_out at once) and decoded in call order */
    int64_t retried;   /* envelopes the leader answered from its result cache (a retry of
                          the call it last ran: never run twice) */
    /* metadata keys the receivers filtered out (a newer sender's fields):
     * how many, the first one's name and the call_id it came with */
    int64_t unknown_fields;
    char unknown_field[64];
    int64_t unknown_field_call_id;
    uint64_t output_digest;          /* chained ppv_digest_words of the decoded latents, in order */
    ppv_pp_overlap overlap;          /* stage 0's own measure, on the transport's clock */
    int32_t max_inflight, max_ready; /* the queues' high-water marks */
    int64_t generator_calls;  /* leader's, over the run */
    ppv_world_result world;   /* steps, trace digest, blocked ranks */
    ppv_world *trace;
    /* keep_kv: per emitted chunk, every layer's K then V of the whole mesh
     * (heads in order), as the chunk's denoising started */
    float **kv;        /* [nkv], by chunk; NULL where the chunk never ran */
    size_t *kv_floats; /* [nkv] */
    int64_t nkv;
    /* keep_kv: the decoded latents of every emitted chunk, bf16 in order
     * (NULL otherwise) */
    uint16_t *outputs;
    size_t noutputs;
    /* the accounting (on the mock): one row per rank, then the link's */
    ppv_pp_mem_row *mem;
    int32_t nmem;
} ppv_pp_report;

/* 1 when the run ended as its injection must (ok without one): the
 * failure mode and the point the table names, or for a fault that must
 * complete, ok with that fault counted (a stale, duplicate or unknown
 * field; a retry answered once; a reordering kept in order). */
int ppv_pp_as_injected(const ppv_pp_options *o, const ppv_pp_report *r);

/* Runs stage 0 and the mesh on the mock transport. 0 with *out (the
 * verdict is in it), or -1 when the options cannot run (err). */
int ppv_pp_run(const ppv_pp_options *o, ppv_pp_report **out, char *err, size_t errlen);
void ppv_pp_report_free(ppv_pp_report *r);

/* ---- the prediction: ppv pp --plan ----------------------------------------------- */

/* Every rank's peak as a run of o on the mock would measure it, from the
 * buffers' shapes alone: nothing of their size is allocated and nothing
 * runs. Stage 0's moves are replayed as counts (its queues, drains and
 * cuts), each mesh rank's chunks with the generator's reported bytes
 * (ppv_generator.memory; a generator without it is counted for ppv's own
 * buffers, and `reported` is 0). The link's row is a bound: at most D_in
 * messages are on it at once, their largest sizes. elem_bytes scales the
 * built-in's weights, cache and working memory (its own are fp32: 4); 0
 * means 4. Refused (-1, err) for what a prediction cannot know: --poll,
 * heartbeats, injections, seeded bugs, replays and faults. */
typedef struct ppv_pp_plan {
    int32_t nmem; /* ranks, then the link */
    ppv_pp_mem_row *mem;
    int reported;               /* the generator reports its bytes (or there is none) */
    uint64_t envelope_bytes;    /* one INFER's tensors without context frames */
    uint64_t result_bytes;      /* one result's latents_out */
    uint64_t context_max_bytes; /* the largest context_frames an envelope carries */
} ppv_pp_plan;

int ppv_pp_plan_run(const ppv_pp_options *o, int32_t elem_bytes, ppv_pp_plan *out, char *err,
                    size_t errlen);
void ppv_pp_plan_free(ppv_pp_plan *p);

/* The first row over its cap (caps[i] for rank i, the last cap for the
 * rest; the link is never capped), or -1 when every row fits. */
int32_t ppv_pp_mem_over(const ppv_pp_mem_row *rows, int32_t nranks, const double *caps,
                        int32_t ncaps);

#endif
