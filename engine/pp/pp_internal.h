/* pp_internal.h - shared by the PP inference roles (engine/pp/): the run's
 * context, which every rank's coroutine sees (they run in one process, one
 * at a time, under the deterministic scheduler). */
#ifndef PPV_PP_INTERNAL_H
#define PPV_PP_INTERNAL_H

#include <string.h>

#include "../engine_internal.h"
#include "ppv_pp.h"

enum { PP_FRAMES_PER_CHUNK = 3, PP_LATENT_CHANNELS = 16 };

/* Communicators of the run: the world (every rank) and the mesh (ranks
 * 1..mesh). A group is named wherever a collective is called. */
typedef enum pp_group { PP_GROUP_WORLD, PP_GROUP_MESH } pp_group;

typedef struct pp_ctx {
    const ppv_pp_options *o;
    ppv_pp_report *rep;
    const ppv_generator *gen; /* NULL when control_only */
    const char *gen_params;   /* its settings text */
    char builtin_params[192]; /* the built-in's, from o->model */
    void *gen_shared;         /* what the generator's open returned for this run */
    int gen_opened;           /* its open succeeded: close is owed */
    int32_t mesh_comm;
    int32_t nranks; /* 1 + mesh */
    /* first failure, kept by pp_fail */
    int failed;
    /* per rank: the ids of the last envelope it sent or received (-1: none
     * yet), so that a watchdog report names them */
    int64_t (*last_ids)[3];
    /* the accounting (memory.c): rep->mem's rows, stage 0's phase now, and
     * the phase each call was sent in (a ring by call_id) */
    ppv_pp_phase phase;
    struct pp_stamp {
        int64_t call_id;
        ppv_pp_phase phase;
    } *stamps;
    int32_t nstamps;
    /* on processes, stage 0's: the phase of every call it sent, by call_id
     * (the mesh ranks' peaks take theirs from it at the end) */
    int8_t *sent_phase;
    int64_t nsent_phase;
} pp_ctx;

static inline int pp_skipped(const pp_ctx *c, ppv_pp_point p) {
    return (c->o->skip_points >> p) & 1u;
}

/* Where a failure is: the ids of the envelope being handled (NULL: none
 * yet), the rank and the group. */
typedef struct pp_where {
    int32_t rank;
    pp_group group;
    const ppv_envelope *e;
} pp_where;

/* ---- memory (memory.c) */

/* One change of a row by delta bytes of kind (a buffer of the envelope of
 * chunk and call_id; -1: none), in phase at t_ns: the total, and the peak
 * with its breakdown and ids when the total passes it. With timeline, the
 * change is kept. The run's ledger and the plan both count with it. 0, or
 * -1 out of memory for the timeline. */
int pp_mem_row_change(ppv_pp_mem_row *r, ppv_pp_mem_kind kind, int64_t delta, int64_t chunk,
                      int64_t call_id, ppv_pp_phase phase, int64_t t_ns, int timeline);
/* The run's ledger: rank's row (c->nranks: the link) changes by delta, at
 * the transport's clock, in stage 0's phase (rank 0) or the phase
 * call_id was sent in (the mesh, the link). Nothing when the run keeps no
 * rows. */
void pp_mem(pp_ctx *c, ppv_transport *t, int32_t rank, ppv_pp_mem_kind kind, int64_t delta,
            int64_t chunk, int64_t call_id);
/* Stage 0 sent call_id in its phase now. */
void pp_mem_stamp(pp_ctx *c, int64_t call_id);
/* Bytes of an envelope's tensors (its latents, conditioning, step list and
 * context frames), or of a result's latents_out. */
uint64_t pp_envelope_bytes(const ppv_envelope *e);
/* The generator's memory function (version 3 on), or NULL. */
static inline int (*pp_generator_memory(const ppv_generator *g))(const ppv_generator_setup *,
                                                                 const ppv_generator_shape *,
                                                                 ppv_generator_memory *, char *,
                                                                 size_t) {
    return g && g->abi >= 3 ? g->memory : NULL;
}

/* What a generator reports of its bytes, asked once per call shape: its
 * memory function (or, for the built-in at another element size, the
 * kernels' arithmetic). reported 0: it reports nothing. */
typedef struct pp_gen_bytes {
    const ppv_generator *g;
    ppv_generator_setup s;
    int (*fn)(const ppv_generator_setup *, const ppv_generator_shape *, ppv_generator_memory *,
              char *, size_t);
    int reported, direct;
    int32_t elem, window, cond_len;
    ppv_gen_config cfg; /* direct */
    uint64_t *memo;     /* working bytes by (frames, cached, kind); all ones: not asked yet */
} pp_gen_bytes;

/* 0 with the resident bytes (weights, cache) of setup s's rank, or -1 with
 * the reason (the generator's memory failed). elem_bytes 0: the
 * generator's own. */
int pp_gen_bytes_open(pp_gen_bytes *b, const ppv_generator *g, const ppv_generator_setup *s,
                      int32_t elem_bytes, ppv_generator_memory *resident, char *err,
                      size_t errlen);
/* The working bytes of a call of that shape (0 when nothing is reported). */
int pp_gen_bytes_call(pp_gen_bytes *b, int32_t frames, int32_t cached, int32_t cond_len,
                      int32_t kind, uint64_t *bytes, char *err, size_t errlen);
void pp_gen_bytes_close(pp_gen_bytes *b);

/* Records the run's failure (the first one only) and aborts the world:
 * every other rank's next transport call returns PPV_ERR_ABORTED. The
 * message opens with the mode's id and the ids, rank and group. */
void pp_fail(pp_ctx *c, ppv_transport *t, pp_where w, ppv_failure mode, ppv_pp_point point,
             const char *fmt, ...) __attribute__((format(printf, 6, 7), cold));

/* A transport error as a failure: an abort (someone else failed: nothing
 * to add) or a mismatch (a collective the ranks disagree on). */
void pp_transport_error(pp_ctx *c, ppv_transport *t, pp_where w, int err, const char *what)
    __attribute__((cold));

const char *pp_group_name(pp_group g);

/* Notes that rank is handling the envelope of header h (ids at 1..3). */
static inline void pp_note_ids(pp_ctx *c, int32_t rank, const int64_t *h) {
    if (c->last_ids) memcpy(c->last_ids[rank], h + 1, sizeof c->last_ids[rank]);
}

/* Counts the metadata keys a receiver filtered from a message of call_id
 * (n of them, the first named name). */
void pp_note_unknown(pp_ctx *c, int32_t n, const char *name, int64_t call_id);

/* Marks s as the generator code running on this thread (NULL: ppv's own
 * code runs); the mark it replaces, to be set back (guard.c). */
const ppv_generator_site *pp_site_set(const ppv_generator_site *s);

/* The generator's setup for mesh rank mr (-1: the process's open). */
void pp_generator_setup(const pp_ctx *c, int32_t mr, ppv_generator_setup *s);
/* c->gen_params: --generator-params, or for the built-in its model's
 * settings (formatted into c->builtin_params). 0, or -1 (err). */
int pp_gen_params_set(pp_ctx *c, char *err, size_t errlen);

/* The roles (stage0.c, mesh.c); the handshake runs first on every rank
 * (pp.c). Each returns when its part of the run ends. */
int pp_handshake(pp_ctx *c, ppv_transport *t, int32_t rank);
void pp_stage0(pp_ctx *c, ppv_transport *t);
void pp_mesh(pp_ctx *c, ppv_transport *t, int32_t rank);

/* The envelope of chunk k that stage 0 plans (tensors malloc'd; context
 * frames from `decoded`, the epoch's decoded latents so far, oldest
 * first, `ndecoded` frames). 0, or -1 out of memory. */
int pp_plan_envelope(const pp_ctx *c, int32_t k, int64_t call_id, int64_t epoch,
                     int32_t chunk_in_epoch, const uint16_t *decoded, int64_t ndecoded,
                     ppv_envelope *e);
/* The chunk's place in its epoch: the epoch index and j (0 = first). */
void pp_chunk_epoch(const ppv_pp_options *o, int32_t k, int64_t *epoch, int32_t *j);
/* do_kv_recompute for the j-th chunk of an epoch. */
int pp_recomputes(const ppv_pp_options *o, int32_t j);
/* How often the mesh fingerprints its shards: the option, or every chunk
 * when OM-12 or the shard-reload bug asks for fingerprints; 0: never. */
int32_t pp_fingerprint_every(const ppv_pp_options *o);
/* Injections that act on one chunk act on this one. */
enum { PP_INJECT_CHUNK = 1 };

/* ---- the wire (wire.c): a frame is its header, then its metadata text,
 * then its tensors in spec order; each a message (p2p) or a broadcast
 * from the mesh's rank 0. Transport errors are returned as they are. */

/* What a receiver got: the header, the metadata text and the tensors in
 * spec order (pointing into the envelope or result it unframed into). */
typedef struct pp_received { /* stage0.c's move_ready copies it field by field */
    int64_t header[PPV_FRAME_HEADER];
    char *meta; /* short text in `small` (move_ready re-points it), else malloc'd */
    char small[1024];
    ppv_tensor *order[PPV_FRAME_MAX_TENSORS];
    int norder;
} pp_received;

void pp_received_free(pp_received *m);

int pp_send_frame(ppv_transport *t, int32_t rank, int32_t peer, const ppv_frame *f,
                  const char *what);
/* Receives a header from peer; then, when it announces a payload, the
 * metadata, unframes it into e (or res) and receives the tensors. *mode is
 * PPV_FAIL_NONE, or the unframe's failure (msg) with the header kept. */
int pp_recv_envelope(ppv_transport *t, int32_t rank, int32_t peer, pp_received *m,
                     ppv_envelope *e, ppv_failure *mode, char *msg, size_t msglen);
int pp_recv_result(ppv_transport *t, int32_t rank, int32_t peer, pp_received *m, ppv_result *res,
                   ppv_failure *mode, char *msg, size_t msglen);
/* The leader's broadcast of what it received (root: mesh rank 0), and a
 * worker's side of it. */
int pp_bcast_send(ppv_transport *t, int32_t rank, int32_t comm, pp_received *m);
int pp_bcast_recv(ppv_transport *t, int32_t rank, int32_t comm, pp_received *m, ppv_envelope *e,
                  ppv_failure *mode, char *msg, size_t msglen);

/* ppv_envelope_digest of an INFER from a text of it: meta (n bytes), with
 * or without its envelope_digest_i64 line (left out either way), and its
 * tensors in spec order. The same digest when the text is the envelope's
 * canonical text; 0 out of memory. */
uint64_t pp_envelope_digest_text(const char *meta, size_t n, const ppv_tensor *const *tensors,
                                 int ntensors);
/* Seals the frame of an INFER framed without a digest: its digest
 * (ppv_envelope_digest's, taken from the frame's own text and tensors)
 * into *digest and its line into the text, in key order: the frame the
 * envelope with that digest gives. 0, or -1 when the line does not fit. */
int pp_frame_seal(ppv_frame *f, int64_t *digest);

/* Frees an envelope's tensors that stage 0 or the mesh allocated. */
void pp_envelope_free(ppv_envelope *e);

/* ppv_envelope_frame without the contract checks: what a sender that
 * skips its preflight puts on the wire (tests of the receiver's checks and
 * of the tripwire points). Fails only when the text cannot be built. */
ppv_failure ppv_envelope_frame_unchecked(const ppv_envelope *e, ppv_frame *f, char *msg,
                                         size_t msglen);

/* Tensor data blocks (contract.c): n zeroed bytes, as calloc, often a block
 * this thread gave back; and a block given back for the next take. Both
 * are plain malloc blocks: free() and malloc() mix with them freely. */
void *ppv_block_take(size_t n);
void ppv_block_give(void *p);

#endif
