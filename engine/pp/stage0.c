/* stage0.c - rank 0, outside the mesh: plans each chunk's envelope (or
 * takes it from a recording), sends it, receives and judges results, and
 * decodes them.
 *
 * Queues: at most D_in envelopes in flight to the mesh and D_out results
 * waiting to be decoded; envelope k+1 is sent before result k is decoded
 * whenever both bounds allow. A hard cut drains the chunks already sent
 * (they belong to the video before the cut and are decoded) and then bumps
 * cache_epoch, so what is emitted never depends on the queue depths or the
 * interleaving. An envelope with do_kv_recompute carries the epoch's last
 * decoded frames, so it waits until every earlier result is decoded (R0a).
 * With poll, stage 0 asks the link before each move whether a result has
 * arrived and takes it first (a receive thread's behaviour): its moves
 * then depend on the interleaving, and what it emits still must not.
 */
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pp_internal.h"

typedef struct inflight {
    ppv_envelope e;
    int owned; /* its tensors are stage 0's to free (planned, not replayed) */
    uint64_t bytes; /* its tensors' bytes, charged to stage 0 while it holds them */
    int64_t t_begin, t_sent; /* when stage 0 began building it, and sent it */
} inflight;

typedef struct ready { /* move_ready copies it field by field */
    ppv_result r;
    uint64_t digest; /* ppv_digest_words of latents_out, taken when it was judged */
    int digested;
    pp_received m;
    int32_t slot; /* index into the sent ring of its envelope */
    int64_t t_recv; /* when it was taken (-1: held ahead, taken with another) */
    uint64_t bytes; /* its tensors' bytes, charged to stage 0 */
} ready;

typedef struct stage0 {
    pp_ctx *c;
    ppv_transport *t;
    const ppv_pp_options *o;
    inflight *sent; /* ring of D_in + D_out: sent, result not yet decoded */
    int32_t nsent, sent_head, sent_cap;
    int32_t awaiting; /* of those, results not yet received */
    int probe_hit; /* poll: a probe found a result since the last send (seeded bugs) */
    ready *rdy;       /* ring of D_out */
    int32_t nready, ready_head;
    ready *held; /* the reorder buffer: results ahead of their turn, judged (D_out at most) */
    int32_t nheld;
    int64_t epoch, last_accepted, call_id;
    ppv_contract_order order;
    uint16_t *decoded; /* the epoch's last kv_window decoded frames */
    int64_t ndecoded;
    size_t frame; /* values per latent frame */
    uint64_t digest;
    int shut;      /* a SHUTDOWN was sent (a replayed one) */
    int32_t total; /* chunks to send */
    int64_t last_send_ns; /* when stage 0 last sent (heartbeats) */
    /* heartbeats sent while INFERs were in flight, recorded (on_call) once
     * the INFER sent before each is: a recording keeps the sending order */
    ppv_envelope *beats;
    int64_t *beat_after; /* the call_id of the INFER sent before it */
    int32_t nbeats, beats_cap;
    int64_t last_chunk;   /* chunk_index of the last INFER sent (a heartbeat's) */
    void **kept; /* the results-kept bug: every decoded result's latents */
    int64_t nkept;
    ppv_pp_chunk_times *times; /* per decoded chunk, for the overlap metric */
    int64_t ntimes, times_cap;
} stage0;

static pp_where at(const stage0 *s, const ppv_envelope *e) {
    (void)s;
    pp_where w = {0, PP_GROUP_WORLD, e};
    return w;
}

/* The inflight entry whose result comes next. */
static inflight *awaited(stage0 *s) {
    return &s->sent[(s->sent_head + s->nsent - s->awaiting) % s->sent_cap];
}

static void release(stage0 *s, inflight *f) {
    if (f->bytes)
        pp_mem(s->c, s->t, 0, PPV_MEM_ENVELOPES, -(int64_t)f->bytes, f->e.chunk_index, f->e.call_id);
    if (f->owned) pp_envelope_free(&f->e);
    memset(f, 0, sizeof *f);
}

/* Tells the recorder one event of stage 0's log (ids from the envelope or
 * result they belong to; t_begin < 0: now). 0, or -1 when the recorder
 * failed (the run fails with its reason). */
static int note_event(stage0 *s, ppv_pp_event_kind kind, ppv_pp_verdict verdict, int64_t action,
                      int64_t call_id, int64_t chunk_index, int64_t cache_epoch, int64_t t_begin) {
    if (!s->o->on_event) return 0;
    int64_t now = ppv_transport_clock_ns(s->t);
    ppv_pp_event ev = {now,         t_begin >= 0 ? t_begin : now,
                       kind,        verdict,
                       action,      call_id,
                       chunk_index, cache_epoch,
                       s->awaiting, s->nready};
    char err[256];
    if (s->o->on_event(s->o->on_event_ctx, &ev, err, sizeof err) == 0) return 0;
    pp_fail(s->c, s->t, at(s, NULL), PPV_FAIL_RULE, PPV_POINT_STAGE0_SEND, "%s", err);
    return -1;
}

static int note_envelope(stage0 *s, const ppv_envelope *e, int64_t t_begin) {
    return note_event(s, PPV_EVENT_SENT, PPV_VERDICT_NONE, e->action, e->call_id, e->chunk_index,
                      e->cache_epoch, t_begin);
}

static int note_result(stage0 *s, ppv_pp_event_kind kind, ppv_pp_verdict v, const ppv_result *r,
                       int64_t t_begin) {
    return note_event(s, kind, v, PPV_PP_INFER, r->call_id, r->chunk_index, r->cache_epoch,
                      t_begin);
}

/* Sends e (stage 0's preflight first unless skipped or replaying); with
 * seal, an INFER framed without a digest gets its envelope_digest_i64 from
 * that frame (pp_frame_seal: one framing, not two). 0, or -1 when the run
 * stops (a failure was recorded). */
static int send_envelope(stage0 *s, ppv_envelope *e, int preflight, int seal) {
    char msg[768];
    ppv_frame f;
    seal = seal && e->action == PPV_PP_INFER;
    if (seal) e->envelope_digest_i64 = 0;
    ppv_failure mode = preflight ? ppv_envelope_frame(e, &s->order, &f, msg, sizeof msg)
                                 : ppv_envelope_frame_unchecked(e, &f, msg, sizeof msg);
    if (mode != PPV_FAIL_NONE) {
        pp_fail(s->c, s->t, at(s, e), mode, PPV_POINT_STAGE0_SEND,
                "stage 0's preflight refused the envelope, nothing was sent: %s", msg);
        return -1;
    }
    if (seal && pp_frame_seal(&f, &e->envelope_digest_i64) < 0) {
        ppv_frame_free(&f);
        pp_fail(s->c, s->t, at(s, e), PPV_FAIL_RULE, PPV_POINT_STAGE0_SEND,
                "an envelope's digest line does not fit its frame");
        return -1;
    }
    ppv_contract_order_advance(&s->order, e);
    pp_note_ids(s->c, 0, f.header);
    /* the injected field of a newer sender: its own buffer, the frame's
     * (of the pool's size) put back after the send */
    static const char newer[] = "zz_newer_field=1\n";
    char *pooled = f.meta, *grown = NULL;
    if (s->o->inject == PPV_INJECT_UNKNOWN_FIELD && e->action == PPV_PP_INFER &&
        e->chunk_index == PP_INJECT_CHUNK) {
        size_t len = (size_t)f.header[6];
        if (!(grown = malloc(len + sizeof newer))) {
            ppv_frame_free(&f);
            pp_fail(s->c, s->t, at(s, e), PPV_FAIL_RULE, PPV_POINT_STAGE0_SEND, "out of memory");
            return -1;
        }
        memcpy(grown, f.meta, len);
        memcpy(grown + len, newer, sizeof newer); /* keys are sorted: "zz" is last */
        /* a newer sender's digest covers its field too, so it is not the
         * one this ppv computes: its first digit changed, in place */
        static const char key[] = "envelope_digest_i64=";
        char *at = strstr(grown, key);
        if (at && (at == grown || at[-1] == '\n')) {
            char *d = at + sizeof key - 1;
            d += *d == '-';
            *d = *d == '1' ? '2' : '1';
        }
        f.meta = grown;
        f.header[6] = (int64_t)(len + sizeof newer - 1);
    }
    int rc = pp_send_frame(s->t, 0, 1, &f, ppv_pp_action_name(e->action));
    uint64_t sent = 0; /* what the buffered link now holds of it */
    for (int i = 0; i < f.ntensors; i++)
        sent += ppv_tensor_bytes(f.tensors[i]);
    if (!rc) pp_mem(s->c, s->t, s->c->nranks, PPV_MEM_LINK, (int64_t)sent, e->chunk_index, e->call_id);
    free(grown);
    f.meta = pooled;
    ppv_frame_free(&f);
    if (rc) {
        pp_transport_error(s->c, s->t, at(s, e), rc, "sending an envelope to the leader");
        return -1;
    }
    s->last_send_ns = ppv_transport_clock_ns(s->t);
    if (e->action == PPV_PP_INFER) s->last_chunk = e->chunk_index;
    return 0;
}

/* A heartbeat: a NOOP with the next call_id, logged and recorded as any
 * envelope is. 0, or -1 when the run stops. */
static int heartbeat(stage0 *s) {
    ppv_envelope hb;
    ppv_envelope_init(&hb);
    hb.action = PPV_PP_NOOP;
    hb.call_id = s->call_id++;
    hb.chunk_index = s->last_chunk;
    hb.cache_epoch = s->epoch;
    if (send_envelope(s, &hb, 1, 0) < 0 || note_envelope(s, &hb, -1) < 0) return -1;
    s->c->rep->heartbeats++;
    if (!s->o->on_call) return 0;
    if (s->nsent) { /* after the INFER sent last, in the recording */
        if (s->nbeats == s->beats_cap) {
            int32_t cap = s->beats_cap ? 2 * s->beats_cap : 8;
            ppv_envelope *b = realloc(s->beats, (size_t)cap * sizeof *b);
            if (b) s->beats = b;
            int64_t *a = b ? realloc(s->beat_after, (size_t)cap * sizeof *a) : NULL;
            if (a) s->beat_after = a;
            if (!a) {
                pp_fail(s->c, s->t, at(s, &hb), PPV_FAIL_RULE, PPV_POINT_STAGE0_SEND,
                        "out of memory");
                return -1;
            }
            s->beats_cap = cap;
        }
        s->beats[s->nbeats] = hb;
        s->beat_after[s->nbeats++] = s->sent[(s->sent_head + s->nsent - 1) % s->sent_cap].e.call_id;
        return 0;
    }
    char err[256];
    if (s->o->on_call(s->o->on_call_ctx, &hb, NULL, err, sizeof err) < 0) {
        pp_fail(s->c, s->t, at(s, &hb), PPV_FAIL_RULE, PPV_POINT_STAGE0_SEND, "%s", err);
        return -1;
    }
    return 0;
}

/* Records the heartbeats sent after the INFER of call_id, now recorded. */
static int record_beats_after(stage0 *s, int64_t call_id) {
    int32_t k = 0;
    while (k < s->nbeats && s->beat_after[k] == call_id) {
        char err[256];
        if (s->o->on_call(s->o->on_call_ctx, &s->beats[k], NULL, err, sizeof err) < 0) {
            pp_fail(s->c, s->t, at(s, &s->beats[k]), PPV_FAIL_RULE, PPV_POINT_STAGE0_SEND, "%s",
                    err);
            return -1;
        }
        k++;
    }
    if (k) {
        memmove(s->beats, s->beats + k, (size_t)(s->nbeats - k) * sizeof *s->beats);
        memmove(s->beat_after, s->beat_after + k, (size_t)(s->nbeats - k) * sizeof *s->beat_after);
        s->nbeats -= k;
    }
    return 0;
}

/* Plans (or takes from the recording) envelope k and sends it. */
static int send_chunk(stage0 *s, int32_t k) {
    const ppv_pp_options *o = s->o;
    int64_t t_begin = ppv_transport_clock_ns(s->t);
    inflight *f = &s->sent[(s->sent_head + s->nsent) % s->sent_cap];
    int preflight = !pp_skipped(s->c, PPV_POINT_STAGE0_SEND), seal = 0;
    if (o->replay) {
        f->e = o->replay[k];
        f->owned = 0;
        preflight = 0; /* the recording is stage 0: the mesh judges what it sent */
    } else {
        int64_t epoch;
        int32_t j;
        pp_chunk_epoch(o, k, &epoch, &j);
        if (pp_plan_envelope(s->c, k, s->call_id, epoch, j, s->decoded, s->ndecoded, &f->e) < 0) {
            pp_fail(s->c, s->t, at(s, NULL), PPV_FAIL_RULE, PPV_POINT_STAGE0_SEND, "out of memory");
            return -1;
        }
        f->owned = 1;
        seal = o->envelope_digest;
        ppv_envelope *e = &f->e;
        if (k == PP_INJECT_CHUNK) switch (o->inject) {
            case PPV_INJECT_OM01:
                e->noise_scale = NAN;
                break;
            case PPV_INJECT_OM02:
                e->conditioning_embeds.dtype = PPV_DTYPE_U8;
                break;
            case PPV_INJECT_OM03:
                e->expected_generator_calls -= 1;
                break;
            case PPV_INJECT_OM07:
                e->pp_disable_vace = 0;
                preflight = 0;
                break;
            case PPV_INJECT_CALL_ID_REGRESSION:
                e->call_id -= 1; /* chunk 0's */
                preflight = 0;
                break;
            case PPV_INJECT_OM10:
                if (!e->do_kv_recompute) {
                    e->do_kv_recompute = 1;
                    e->expected_generator_calls += 1;
                }
                ppv_block_give(e->context_frames.data);
                memset(&e->context_frames, 0, sizeof e->context_frames);
                break;
            default:
                break;
            }
    }
    s->call_id = f->e.call_id + 1;
    if (f->e.action == PPV_PP_SHUTDOWN) s->shut = 1;
    pp_mem_stamp(s->c, f->e.call_id);
    f->bytes = pp_envelope_bytes(&f->e);
    pp_mem(s->c, s->t, 0, PPV_MEM_ENVELOPES, (int64_t)f->bytes, f->e.chunk_index, f->e.call_id);
    /* sealed last, as it is sent: what the leader must receive is what was
     * planned, injected faults included (a sender's bugs, not the wire's) */
    if (send_envelope(s, &f->e, preflight, seal) < 0) {
        release(s, f);
        return -1;
    }
    /* retry: the same call again, as after a timeout (the same epoch and
     * state); not a call of its own, so neither logged nor recorded */
    if (o->inject == PPV_INJECT_RETRY && !o->replay && k == PP_INJECT_CHUNK &&
        send_envelope(s, &f->e, 0, 0) < 0) {
        release(s, f);
        return -1;
    }
    if (f->e.action != PPV_PP_INFER) { /* a replayed NOOP or SHUTDOWN: nothing comes back */
        char err[256];
        if (note_envelope(s, &f->e, t_begin) < 0) {
            release(s, f);
            return -1;
        }
        if (o->on_call && o->on_call(o->on_call_ctx, &f->e, NULL, err, sizeof err) < 0) {
            pp_fail(s->c, s->t, at(s, &f->e), PPV_FAIL_RULE, PPV_POINT_STAGE0_SEND, "%s", err);
            release(s, f);
            return -1;
        }
        release(s, f);
        return 0;
    }
    f->t_begin = t_begin;
    f->t_sent = ppv_transport_clock_ns(s->t);
    s->nsent++;
    s->awaiting++;
    s->probe_hit = 0;
    if (s->awaiting > s->c->rep->max_inflight) s->c->rep->max_inflight = s->awaiting;
    if (note_envelope(s, &f->e, t_begin) < 0) return -1;
    /* the bounded queue's tripwire: never more than D_in in flight */
    if (s->awaiting > o->d_in && !pp_skipped(s->c, PPV_POINT_STAGE0_SEND)) {
        pp_fail(s->c, s->t, at(s, &f->e), PPV_FAIL_RULE, PPV_POINT_STAGE0_SEND,
                "stage 0 has %d envelopes in flight, more than D_in %d: its bounded queue "
                "overflowed",
                s->awaiting, o->d_in);
        return -1;
    }
    return 0;
}

/* The failure mode a failed result names first in its error_message. */
static ppv_failure mode_of(const char *text) {
    ppv_failure f = ppv_failure_named(text);
    return f != PPV_FAIL_NONE ? f : PPV_FAIL_RULE;
}

/* The in-flight envelope (not yet answered) of call_id, or NULL. */
static inflight *in_flight(stage0 *s, int64_t call_id) {
    for (int32_t i = s->nsent - s->awaiting; i < s->nsent; i++) {
        inflight *f = &s->sent[(s->sent_head + i) % s->sent_cap];
        if (f->e.call_id == call_id) return f;
    }
    return NULL;
}

/* Stage 0's rules for rd's result as the answer to f's envelope (tripwire
 * point 4), with its digest and start frame. */
static ppv_result_verdict judge(stage0 *s, ready *rd, const inflight *f, ppv_failure *mode,
                                char *msg, size_t msglen) {
    ppv_result_verdict v =
        ppv_result_check(&rd->r, &f->e, s->epoch, s->last_accepted, mode, msg, msglen);
    if (v == PPV_RESULT_ACCEPT && rd->r.ok) {
        rd->digest = ppv_digest_words(rd->r.latents_out.data, ppv_tensor_bytes(&rd->r.latents_out));
        rd->digested = 1;
    }
    if (v == PPV_RESULT_ACCEPT && rd->r.ok && rd->r.output_digest_i64 != (int64_t)rd->digest) {
        v = PPV_RESULT_REJECT;
        *mode = PPV_FAIL_CORRUPT;
        snprintf(msg, msglen,
                 "latents_out does not match output_digest_i64 %016" PRIx64
                 ": the result changed on its way",
                 (uint64_t)rd->r.output_digest_i64);
    } else if (v == PPV_RESULT_ACCEPT && rd->r.ok &&
               rd->r.mesh_current_start_frame != f->e.current_start_frame) {
        v = PPV_RESULT_REJECT;
        *mode = PPV_FAIL_RULE;
        snprintf(msg, msglen,
                 "mesh_current_start_frame %" PRId64 ", the envelope said %" PRId64
                 ": the mesh lost track of the stream",
                 rd->r.mesh_current_start_frame, f->e.current_start_frame);
    }
    return v;
}

/* Moves a received result to another place: its short metadata text and
 * its tensors' list point into itself (pp_received). */
static void move_ready(ready *dst, const ready *src) {
    /* field by field: the text kept in m.small is copied by its length,
     * not the whole buffer (a copy per result) */
    dst->r = src->r;
    dst->digest = src->digest;
    dst->digested = src->digested;
    dst->slot = src->slot;
    dst->t_recv = src->t_recv;
    dst->bytes = src->bytes;
    memcpy(dst->m.header, src->m.header, sizeof dst->m.header);
    dst->m.norder = src->m.norder;
    dst->m.meta = src->m.meta;
    if (src->m.meta == src->m.small) {
        size_t n = src->m.header[6] > 0 ? (size_t)src->m.header[6] : 0;
        memcpy(dst->m.small, src->m.small, n + 1); /* its NUL too */
        dst->m.meta = dst->m.small;
    }
    for (int k = 0; k < src->m.norder; k++)
        dst->m.order[k] = (ppv_tensor *)((char *)&dst->r +
                                         ((const char *)src->m.order[k] - (const char *)&src->r));
}

static void drop_ready(stage0 *s, ready *rd) {
    if (rd->bytes)
        pp_mem(s->c, s->t, 0, PPV_MEM_RESULTS, -(int64_t)rd->bytes, rd->r.chunk_index, rd->r.call_id);
    rd->bytes = 0;
    ppv_result_free_tensors(&rd->r);
    pp_received_free(&rd->m);
}

/* Moves an accepted result into the ready queue: the awaited call's. */
static void make_ready(stage0 *s, const ready *rd) {
    ready *slot = &s->rdy[(s->ready_head + s->nready) % s->o->d_out];
    move_ready(slot, rd);
    slot->slot = (s->sent_head + s->nsent - s->awaiting) % s->sent_cap;
    s->last_accepted = slot->r.call_id;
    s->awaiting--;
    s->nready++;
    if (s->nready > s->c->rep->max_ready) s->c->rep->max_ready = s->nready;
}

/* Results held ahead whose turn has come go to the ready queue, in call
 * order, while it has room. */
static void promote(stage0 *s) {
    for (int found = 1; found && s->nheld && s->awaiting && s->nready < s->o->d_out;) {
        found = 0;
        int64_t want = awaited(s)->e.call_id;
        for (int32_t i = 0; i < s->nheld; i++)
            if (s->held[i].r.call_id == want) {
                make_ready(s, &s->held[i]);
                if (i < --s->nheld) move_ready(&s->held[i], &s->held[s->nheld]);
                found = 1;
                break;
            }
    }
}

/* Receives one result and judges it (tripwire point 4); polled: its
 * probe found it. A result ahead of the awaited one whose envelope is in
 * flight is held in the reorder buffer while it has room (D_out). */
static int receive_result(stage0 *s, int polled) {
    ready got, *rd = &got;
    memset(&rd->r, 0, sizeof rd->r); /* rd->m is set by the receive */
    rd->digest = 0;
    rd->digested = 0;
    rd->slot = 0;
    rd->bytes = 0;
    char msg[768];
    ppv_failure mode;
    inflight *f = awaited(s);
    int rc = pp_recv_result(s->t, 0, 1, &rd->m, &rd->r, &mode, msg, sizeof msg);
    if (!rc) { /* off the link, into stage 0's hands */
        rd->bytes = ppv_tensor_bytes(&rd->r.latents_out);
        pp_mem(s->c, s->t, s->c->nranks, PPV_MEM_LINK, -(int64_t)rd->bytes, rd->r.chunk_index,
               rd->r.call_id);
        pp_mem(s->c, s->t, 0, PPV_MEM_RESULTS, (int64_t)rd->bytes, rd->r.chunk_index,
               rd->r.call_id);
    }
    if (rc) {
        pp_transport_error(s->c, s->t, at(s, &f->e), rc, "receiving a result");
        goto drop_fail;
    }
    if (mode != PPV_FAIL_NONE) {
        pp_fail(s->c, s->t, at(s, &f->e), mode, PPV_POINT_STAGE0_RESULT,
                "a result stage 0 cannot read: %s", msg);
        goto drop_fail;
    }
    pp_note_unknown(s->c, rd->r.unknown_fields, rd->r.unknown_field, rd->r.call_id);
    ppv_result_verdict v = PPV_RESULT_ACCEPT;
    int trusted = s->o->poll && !polled && s->o->bug == PPV_PP_BUG_WAIT_TRUSTS_EPOCH;
    int ahead = 0;
    if (!pp_skipped(s->c, PPV_POINT_STAGE0_RESULT) && !trusted) {
        v = judge(s, rd, f, &mode, msg, sizeof msg);
        inflight *later = v == PPV_RESULT_REJECT && mode == PPV_FAIL_ORDER &&
                                  rd->r.call_id > f->e.call_id && rd->r.ok
                              ? in_flight(s, rd->r.call_id)
                              : NULL;
        if (later) { /* ahead of its turn: judged as its own envelope's answer */
            for (int32_t i = 0; i < s->nheld; i++)
                if (s->held[i].r.call_id == rd->r.call_id) later = NULL; /* held already */
            if (later && s->nheld < s->o->d_out) {
                v = judge(s, rd, later, &mode, msg, sizeof msg);
                ahead = v == PPV_RESULT_ACCEPT;
            } else if (later)
                snprintf(msg, sizeof msg,
                         "result for call_id %" PRId64 " came ahead of call_id %" PRId64
                         "'s with the reorder buffer full (D_out %d held)",
                         rd->r.call_id, f->e.call_id, s->o->d_out);
            if (ahead) f = later;
        }
    }
    switch (v) {
    case PPV_RESULT_DROP_STALE:
        s->c->rep->dropped_stale++;
        if (note_result(s, PPV_EVENT_RECEIVED, PPV_VERDICT_STALE, &rd->r, -1) < 0) goto drop_fail;
        goto drop;
    case PPV_RESULT_DROP_DUPLICATE:
        s->c->rep->dropped_duplicate++;
        if (note_result(s, PPV_EVENT_RECEIVED, PPV_VERDICT_DUPLICATE, &rd->r, -1) < 0)
            goto drop_fail;
        goto drop;
    case PPV_RESULT_REJECT:
        note_result(s, PPV_EVENT_RECEIVED, PPV_VERDICT_REJECTED, &rd->r, -1);
        pp_fail(s->c, s->t, at(s, &f->e), mode, PPV_POINT_STAGE0_RESULT,
                "stage 0 rejected the result: %s", msg);
        goto drop_fail;
    case PPV_RESULT_ACCEPT:
        break;
    }
    if (!rd->r.ok) {
        /* the mesh said why; the failure is the mesh's, caught where it says
         * (and recorded: a replay must fail the same way) */
        char err[256];
        note_result(s, PPV_EVENT_RECEIVED, PPV_VERDICT_ERROR, &rd->r, -1);
        if (s->o->on_call) s->o->on_call(s->o->on_call_ctx, &f->e, &rd->r, err, sizeof err);
        ppv_failure m = mode_of(rd->r.error_message);
        pp_where w = {1, PP_GROUP_WORLD, &f->e};
        pp_fail(s->c, s->t, w, m,
                m == PPV_FAIL_FM23 || m == PPV_FAIL_ORDER || m == PPV_FAIL_ENVELOPE
                    ? PPV_POINT_LEADER
                    : PPV_POINT_MESH_RUNNING,
                "the mesh answered with an error: %s", rd->r.error_message);
        goto drop_fail;
    }
    rd->t_recv = ahead ? -1 : ppv_transport_clock_ns(s->t);
    if (ahead) {
        s->c->rep->reordered++;
        ready *h = &s->held[s->nheld++];
        move_ready(h, rd);
        return note_result(s, PPV_EVENT_RECEIVED, PPV_VERDICT_AHEAD, &h->r, -1);
    }
    make_ready(s, rd);
    int ok = note_result(s, PPV_EVENT_RECEIVED, PPV_VERDICT_ACCEPTED, &rd->r, -1);
    promote(s);
    return ok;
drop:
    drop_ready(s, rd);
    return 0;
drop_fail:
    drop_ready(s, rd);
    return -1;
}

/* Decodes the oldest ready result: it is emitted. */
static int decode(stage0 *s) {
    int64_t t_begin = ppv_transport_clock_ns(s->t);
    ready *rd = &s->rdy[s->ready_head];
    inflight *f = &s->sent[rd->slot];
    /* the decode's cost in virtual time: steps of stage 0 (--cost), each
     * one of work, so progress for the watchdog (a decode of any cost the
     * option takes is never a hang) */
    for (int32_t i = 0; i < s->o->cost_decode && s->t->ops->yield; i++) {
        s->t->ops->yield(s->t->impl, 0);
        ppv_world_progress(s->t, 0);
    }
    if (s->ntimes == s->times_cap) {
        int64_t cap = s->times_cap ? 2 * s->times_cap : 64;
        ppv_pp_chunk_times *grown = realloc(s->times, (size_t)cap * sizeof *grown);
        if (!grown) {
            pp_fail(s->c, s->t, at(s, &f->e), PPV_FAIL_RULE, PPV_POINT_STAGE0_RESULT,
                    "out of memory");
            return -1;
        }
        s->times = grown;
        s->times_cap = cap;
    }
    int64_t t_emit = ppv_transport_clock_ns(s->t);
    s->times[s->ntimes++] = (ppv_pp_chunk_times){f->t_begin,          f->t_sent,
                                                 rd->t_recv,          t_emit,
                                                 rd->r.tB_ms,         rd->r.t_mesh_idle_ms,
                                                 (double)(t_emit - t_begin) / 1e6};
    ppv_pp_report *rep = s->c->rep;
    const ppv_tensor *lat = &rd->r.latents_out;
    size_t n = (size_t)(ppv_tensor_bytes(lat) / sizeof(uint16_t));
    int rc = 0;
    if (n > PP_FRAMES_PER_CHUNK * s->frame) n = PP_FRAMES_PER_CHUNK * s->frame;
    /* the video's digest: each chunk's, chained in decode order */
    uint64_t d = rd->digested && n * sizeof(uint16_t) == ppv_tensor_bytes(lat)
                     ? rd->digest /* the digest stage 0 judged it by */
                     : ppv_digest_words(lat->data, n * sizeof(uint16_t));
    s->digest = (s->digest ^ d) * 0x100000001b3ULL;
    rep->output_digest = s->digest;
    if (rep->outputs) {
        memcpy(rep->outputs + rep->noutputs, lat->data, n * sizeof(uint16_t));
        rep->noutputs += n;
    }
    if (rep->chunks_emitted >= s->total) {
        pp_fail(s->c, s->t, at(s, &f->e), PPV_FAIL_RULE, PPV_POINT_STAGE0_RESULT,
                "stage 0 would decode a result more than the %d chunks it sent", s->total);
        rc = -1;
        goto release;
    }
    int64_t c = rep->chunks_emitted++;
    if (s->o->progress) s->o->progress(s->o->progress_ctx, rep->chunks_emitted, s->total);
    rep->expected_calls[c] = f->e.expected_generator_calls;
    rep->observed_calls[c] = rd->r.observed_generator_calls;
    rep->emitted_call_ids[c] = rd->r.call_id;
    /* the epoch's last kv_window frames, for context */
    int64_t keep = s->o->kv_window - PP_FRAMES_PER_CHUNK;
    if (s->ndecoded > keep) {
        memmove(s->decoded, s->decoded + (size_t)(s->ndecoded - keep) * s->frame,
                (size_t)keep * s->frame * sizeof *s->decoded);
        s->ndecoded = keep;
    }
    if (s->decoded && n == PP_FRAMES_PER_CHUNK * s->frame) {
        memcpy(s->decoded + (size_t)s->ndecoded * s->frame, lat->data, n * sizeof(uint16_t));
        s->ndecoded += PP_FRAMES_PER_CHUNK;
    }
    char err[512];
    if (s->o->on_call && s->o->on_call(s->o->on_call_ctx, &f->e, &rd->r, err, sizeof err) < 0) {
        pp_fail(s->c, s->t, at(s, &f->e), PPV_FAIL_RULE, PPV_POINT_STAGE0_RESULT, "%s", err);
        rc = -1;
    } else if (s->o->on_call && s->nbeats && record_beats_after(s, f->e.call_id) < 0)
        rc = -1;
release:;
    ppv_result done = rd->r; /* its ids, for the log */
    void **grown = s->o->bug == PPV_PP_BUG_RESULTS_KEPT
                       ? realloc(s->kept, (size_t)(s->nkept + 1) * sizeof *s->kept)
                       : NULL;
    if (grown && rd->r.latents_out.data) { /* seeded: kept, its bytes never given back */
        s->kept = grown;
        s->kept[s->nkept++] = rd->r.latents_out.data;
        rd->r.latents_out.data = NULL;
        rd->bytes = 0;
    } else if (grown)
        s->kept = grown;
    drop_ready(s, rd);
    s->ready_head = (s->ready_head + 1) % s->o->d_out;
    s->nready--;
    /* its envelope is done with */
    release(s, f);
    s->sent_head = (s->sent_head + 1) % s->sent_cap;
    s->nsent--;
    if (rc == 0 && note_result(s, PPV_EVENT_DECODED, PPV_VERDICT_NONE, &done, t_begin) < 0) rc = -1;
    if (s->c->phase == PPV_PHASE_WARMUP || s->c->phase == PPV_PHASE_NEW_EPOCH)
        s->c->phase = PPV_PHASE_STEADY; /* the queues have filled */
    if (rc == 0) promote(s);
    return rc;
}

/* The epoch of chunk k, and whether it needs every earlier result decoded
 * first (a new epoch drains; recompute needs the context). */
static int64_t chunk_epoch(const stage0 *s, int32_t k, int *must_drain) {
    int64_t epoch;
    if (s->o->replay) {
        const ppv_envelope *e = &s->o->replay[k];
        epoch = e->cache_epoch;
        *must_drain = epoch != s->epoch || e->action != PPV_PP_INFER;
        return epoch;
    }
    int32_t j;
    pp_chunk_epoch(s->o, k, &epoch, &j);
    *must_drain = epoch != s->epoch || pp_recomputes(s->o, j) ||
                  (k == PP_INJECT_CHUNK && s->o->inject == PPV_INJECT_OM10);
    return epoch;
}

void pp_stage0(pp_ctx *c, ppv_transport *t) {
    const ppv_pp_options *o = c->o;
    stage0 s;
    memset(&s, 0, sizeof s);
    s.c = c;
    s.t = t;
    s.o = o;
    s.sent_cap = o->d_in + o->d_out;
    s.epoch = o->replay ? (o->nreplay ? o->replay[0].cache_epoch : 0) : 0;
    s.last_accepted = -1;
    s.order = ppv_contract_order_start();
    s.frame = (size_t)(PP_LATENT_CHANNELS * (o->height / 8) * (o->width / 8));
    s.digest = 0xcbf29ce484222325ULL;
    int32_t total = o->replay ? (int32_t)o->nreplay : o->chunks;
    s.total = total;
    s.sent = calloc((size_t)s.sent_cap, sizeof *s.sent);
    s.rdy = calloc((size_t)o->d_out, sizeof *s.rdy);
    s.held = calloc((size_t)o->d_out, sizeof *s.held);
    /* the epoch's last decoded frames, kept only for recompute's context */
    size_t charged_context = 0, context = o->kv_recompute && !o->replay ? (size_t)o->kv_window * s.frame : 0;
    if (context) s.decoded = malloc(context * sizeof *s.decoded);
    if (!s.sent || !s.rdy || !s.held || (context && !s.decoded)) {
        pp_fail(c, t, at(&s, NULL), PPV_FAIL_RULE, PPV_POINT_STAGE0_SEND, "out of memory");
        goto done;
    }
    pp_mem(c, t, 0, PPV_MEM_CONTEXT, (int64_t)(context * sizeof *s.decoded), -1, -1);
    charged_context = context * sizeof *s.decoded;
    int32_t k = 0;
    s.last_send_ns = ppv_transport_clock_ns(t);
    int64_t beat_ns = (int64_t)(o->heartbeat_s * 1e9);
    for (;;) {
        if (beat_ns > 0 && ppv_transport_clock_ns(t) - s.last_send_ns >= beat_ns &&
            heartbeat(&s) < 0)
            goto done;
        if (o->poll && s.awaiting && s.nready < o->d_out) { /* has a result arrived? */
            int arrived = 0;
            int rc = t->ops->probe(t->impl, 0, 1, PP_GROUP_WORLD, &arrived);
            if (rc) {
                pp_transport_error(c, t, at(&s, &awaited(&s)->e), rc, "polling for a result");
                goto done;
            }
            if (arrived) {
                s.probe_hit = 1;
                /* seeded: a result on its way is taken for room in flight */
                if (o->bug == PPV_PP_BUG_SEND_ON_PROBE_HIT && k < total && s.awaiting == o->d_in) {
                    int drain;
                    if (chunk_epoch(&s, k, &drain) == s.epoch && !drain) {
                        if (send_chunk(&s, k) < 0) goto done;
                        k++;
                    }
                }
                if (receive_result(&s, 1) < 0) goto done;
                continue;
            }
        }
        int can_send = k < total && s.awaiting < o->d_in && s.nready < o->d_out;
        if (o->bug == PPV_PP_BUG_BLOCKING_DECODE && (s.awaiting || s.nready)) can_send = 0;
        if (can_send) {
            int drain;
            int64_t epoch = chunk_epoch(&s, k, &drain);
            /* seeded: a result its probe found taken for the old epoch drained */
            if (drain && s.nsent && !(o->bug == PPV_PP_BUG_CUT_ON_PROBE_HIT && s.probe_hit)) {
                can_send = 0;
                if (epoch != s.epoch) c->phase = PPV_PHASE_CUT_DRAIN;
            } else if (epoch != s.epoch) {
                s.epoch = epoch; /* a hard cut: nothing of the old epoch is in flight */
                s.ndecoded = 0;
                c->phase = PPV_PHASE_NEW_EPOCH;
            }
        }
        int decode_first = o->bug == PPV_PP_BUG_DECODE_FIRST && s.nready;
        if (can_send && !decode_first) {
            if (send_chunk(&s, k) < 0) goto done;
            if (o->inject == PPV_INJECT_OM13 && k == PP_INJECT_CHUNK)
                goto done; /* stage 0 dies: no SHUTDOWN, no receive */
            if (++k == total) c->phase = PPV_PHASE_END;
        } else if (s.nready) {
            /* the queue signature: a result is decoded only while the next
             * envelope cannot go (else the mesh idles while stage 0 decodes) */
            if (can_send && !pp_skipped(c, PPV_POINT_STAGE0_SEND)) {
                pp_fail(c, t, at(&s, NULL), PPV_FAIL_RULE, PPV_POINT_STAGE0_SEND,
                        "stage 0 decodes a result while envelope %d could be in flight "
                        "(inflight %d of D_in %d): the mesh idles, the overlap is lost",
                        k, s.awaiting, o->d_in);
                goto done;
            }
            if (decode(&s) < 0) goto done;
        } else if (s.awaiting) {
            if (receive_result(&s, 0) < 0) goto done;
        } else
            break;
    }
    if (s.shut) goto done;
    /* SHUTDOWN: a header only, ending the mesh's loop */
    ppv_envelope bye;
    ppv_envelope_init(&bye);
    bye.action = PPV_PP_SHUTDOWN;
    bye.call_id = s.call_id;
    bye.cache_epoch = s.epoch;
    if (send_envelope(&s, &bye, 1, 0) == 0 && note_envelope(&s, &bye, -1) == 0 && o->on_call) {
        char err[256];
        if (o->on_call(o->on_call_ctx, &bye, NULL, err, sizeof err) < 0)
            pp_fail(c, t, at(&s, &bye), PPV_FAIL_RULE, PPV_POINT_STAGE0_SEND, "%s", err);
    }
done:
    for (int32_t i = 0; s.rdy && i < s.nready; i++)
        drop_ready(&s, &s.rdy[(s.ready_head + i) % o->d_out]);
    for (int32_t i = 0; s.held && i < s.nheld; i++)
        drop_ready(&s, &s.held[i]);
    for (int32_t i = 0; s.sent && i < s.nsent; i++)
        release(&s, &s.sent[(s.sent_head + i) % s.sent_cap]);
    free(s.sent);
    free(s.rdy);
    free(s.held);
    free(s.decoded);
    pp_mem(c, t, 0, PPV_MEM_CONTEXT, -(int64_t)charged_context, -1, -1);
    if (ppv_pp_overlap_measure(s.times, s.ntimes, &c->rep->overlap) < 0 && !c->failed)
        pp_fail(c, t, at(&s, NULL), PPV_FAIL_RULE, PPV_POINT_STAGE0_RESULT, "out of memory");
    for (int64_t i = 0; i < s.nkept; i++) /* freed as the process's end would: still charged */
        free(s.kept[i]);
    free(s.kept);
    free(s.times);
    free(s.beats);
    free(s.beat_after);
}
