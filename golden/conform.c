/* conform.c - a recording checked against the PP inference contract with
 * no model: every envelope and result by the contract's own checks
 * (engine/pp/rules.c), the stream's order and completeness, and the keys
 * the contract does not define. Reads one call at a time.
 */
#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "golden_internal.h"

static const char *const check_names[] = {
#define CHECK_NAME(ID, name, text) name,
    PPV_CONFORM_CHECKS(CHECK_NAME)
#undef CHECK_NAME
};
static const char *const check_texts[] = {
#define CHECK_TEXT(ID, name, text) text,
    PPV_CONFORM_CHECKS(CHECK_TEXT)
#undef CHECK_TEXT
};

const char *ppv_conform_check_name(ppv_conform_check c) {
    return (unsigned)c < PPV_CONFORM_COUNT ? check_names[c] : "?";
}

const char *ppv_conform_check_text(ppv_conform_check c) {
    return (unsigned)c < PPV_CONFORM_COUNT ? check_texts[c] : "?";
}

typedef struct conform {
    ppv_conform_report *rep;
    int max_report, overlap, strict;
    int cap; /* violations rep->v has room for */
    int oom;
    const ppv_envelope *e; /* the call being checked (NULL: the file) */
    int64_t k;
} conform;

static void violation(conform *c, ppv_conform_check check, ppv_failure rule, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Counts a violation of check (rule) at the current call; keeps the first
 * max_report. */
static void violation(conform *c, ppv_conform_check check, ppv_failure rule, const char *fmt,
                      ...) {
    ppv_conform_report *r = c->rep;
    r->violations++;
    r->by_check[check]++;
    if (r->nv >= c->max_report) return;
    if (r->nv == c->cap) { /* grown as found: --max-report is a bound, not an allocation */
        int cap = c->cap ? 2 * c->cap : 16;
        ppv_conform_violation *grown = realloc(r->v, (size_t)cap * sizeof *grown);
        if (!grown) {
            c->oom = 1;
            return;
        }
        r->v = grown;
        c->cap = cap;
    }
    ppv_conform_violation *v = &r->v[r->nv++];
    memset(v, 0, sizeof *v);
    v->check = check;
    v->rule = rule;
    v->call = c->e ? c->k : -1;
    v->call_id = c->e ? c->e->call_id : -1;
    v->chunk_index = c->e ? c->e->chunk_index : -1;
    v->cache_epoch = c->e ? c->e->cache_epoch : -1;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(v->message, sizeof v->message, fmt, ap);
    va_end(ap);
}

static void unknown_key(void *ctx, const char *where, const char *name) {
    conform *c = ctx;
    ppv_conform_report *r = c->rep;
    if (!strcmp(name, "video")) {
        violation(c, PPV_CONFORM_UNKNOWN_FIELD, PPV_FAIL_FIELD,
                  "%s/video: the video key is forbidden in the pipeline's messages", where);
        return;
    }
    r->unknown_fields++;
    size_t used = strlen(r->unknown_names);
    if (r->unknown_fields <= 8 && used + strlen(where) + strlen(name) + 4 < sizeof r->unknown_names)
        snprintf(r->unknown_names + used, sizeof r->unknown_names - used, "%s%s/%s",
                 used ? ", " : "", where, name);
    if (c->strict)
        violation(c, PPV_CONFORM_UNKNOWN_FIELD, PPV_FAIL_FIELD,
                  "%s/%s: a field the contract does not define (a receiver filters it out; "
                  "--strict refuses it)",
                  where, name);
}

/* The result's own checks beyond stage 0's verdict: finite values, the
 * digest, the start frame. */
static void check_output(conform *c, const ppv_envelope *e, const ppv_result *r) {
    const ppv_tensor *t = &r->latents_out;
    if (t->data && t->dtype == PPV_DTYPE_BF16) {
        size_t n = ppv_tensor_bytes(t) / 2, bad = 0, first = 0;
        const uint16_t *v = t->data;
        for (size_t i = 0; i < n; i++)
            if ((v[i] & 0x7F80u) == 0x7F80u && !bad++) first = i;
        if (bad)
            violation(c, PPV_CONFORM_FINITE, PPV_FAIL_RULE,
                      "latents_out holds %zu values that are not finite (the first at flat index "
                      "%zu, bits 0x%04x)",
                      bad, first, v[first]);
        uint64_t d = ppv_digest_words(t->data, ppv_tensor_bytes(t));
        if ((uint64_t)r->output_digest_i64 != d)
            violation(c, PPV_CONFORM_DIGEST, PPV_FAIL_CORRUPT,
                      "output_digest_i64 is %016" PRIx64 ", latents_out's digest is %016" PRIx64,
                      (uint64_t)r->output_digest_i64, d);
    }
    if (r->mesh_current_start_frame != e->current_start_frame)
        violation(c, PPV_CONFORM_START_FRAME, PPV_FAIL_RULE,
                  "mesh_current_start_frame %" PRId64 ", the envelope's current_start_frame %" PRId64
                  ": the mesh lost track of the stream",
                  r->mesh_current_start_frame, e->current_start_frame);
}

/* The checks of one INFER's result; *last_accepted is the last call_id
 * answered by a result stage 0 would decode. Returns 1 when the result is
 * the mesh's error (the stream ends there). */
static int check_result(conform *c, const ppv_envelope *e, const ppv_result *r,
                        int64_t *last_accepted) {
    ppv_failure mode;
    char msg[640];
    ppv_result_verdict v =
        ppv_result_check(r, e, e->cache_epoch, *last_accepted, &mode, msg, sizeof msg);
    switch (v) {
    case PPV_RESULT_DROP_STALE:
        violation(c, PPV_CONFORM_RESULT, PPV_FAIL_FM10,
                  "the recorded answer is of cache_epoch %" PRId64
                  ", its envelope's is %" PRId64 ": a stale result taken as the answer",
                  r->cache_epoch, e->cache_epoch);
        return 0;
    case PPV_RESULT_DROP_DUPLICATE:
        violation(c, PPV_CONFORM_RESULT, PPV_FAIL_ORDER,
                  "the recorded answer has call_id %" PRId64
                  ", already answered: a duplicate taken as the answer",
                  r->call_id);
        return 0;
    case PPV_RESULT_REJECT:
        violation(c, mode == PPV_FAIL_FM02 ? PPV_CONFORM_GENERATOR_CALLS : PPV_CONFORM_RESULT, mode,
                  "%s", msg);
        return 0;
    case PPV_RESULT_ACCEPT:
        break;
    }
    *last_accepted = r->call_id;
    if (!r->ok) {
        ppv_failure f = ppv_failure_named(r->error_message);
        violation(c, PPV_CONFORM_ERROR_RESULT, f != PPV_FAIL_NONE ? f : PPV_FAIL_RULE,
                  "the mesh answered with an error: %s", r->error_message);
        return 1;
    }
    check_output(c, e, r);
    return 0;
}

/* What the event pass needs of each call (a few bytes a call; no tensor). */
typedef struct call_info {
    int64_t call_id, chunk_index, cache_epoch;
    int8_t action, has_result, status;
    double tB_ms; /* the answer's */
    /* --overlap: when stage 0 began building the envelope and sent it,
     * took the result and decoded it (-1: not logged) */
    int64_t t_begin, t_sent, t_recv, t_emit;
} call_info;

/* A sent INFER's state in the event pass. */
enum { ST_UNSENT, ST_SENT, ST_ACCEPTED, ST_HELD, ST_DECODED, ST_ABANDONED, ST_ERROR, ST_REJECTED };

static const char *status_name(int st) {
    static const char *const names[] = {"never sent", "sent",      "accepted",  "held ahead",
                                        "decoded",    "abandoned", "an error",  "rejected"};
    return names[st];
}

/* The call whose envelope has call_id among the first n (call_ids
 * strictly increase in a conforming file; else the first with it), or -1. */
static int64_t find_call(const call_info *ci, int64_t n, int64_t call_id) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
        int64_t mid = lo + (hi - lo) / 2;
        if (ci[mid].call_id < call_id) lo = mid + 1;
        else hi = mid;
    }
    if (lo < n && ci[lo].call_id == call_id) return lo;
    for (int64_t k = 0; k < n; k++) /* out of order: the slow way */
        if (ci[k].call_id == call_id) return k;
    return -1;
}

/* Sets c's ids from an event's (its call, when found). */
static void at_event(conform *c, ppv_envelope *e, const ppv_pp_event *ev, int64_t call) {
    ppv_envelope_init(e);
    e->call_id = ev->call_id;
    e->chunk_index = ev->chunk_index;
    e->cache_epoch = ev->cache_epoch;
    c->e = e;
    c->k = call;
}

typedef struct event_pass {
    conform *c;
    call_info *ci;
    int64_t ncalls, sent, epoch, held, last_decoded, t_prev, q;
    ppv_inference_events how;
    int64_t *decoded; /* the calls in decode order (--overlap), ndecoded of them */
    int64_t ndecoded;
    /* the queues as the events themselves leave them, whatever the log's
     * inflight and ready say: INFERs by state */
    int64_t n_state[ST_REJECTED + 1];
    int over_in, over_out;      /* above D_in / D_out now (said once an episode) */
    int64_t disagree;           /* events whose recorded depths contradict the events */
    char first_disagree[512];   /* the first, in words */
    ppv_envelope disagree_ids;  /* and its ids */
    int64_t disagree_call;
} event_pass;

/* The next unanswered INFER of the current epoch (-1: none). */
static int64_t next_expected(const event_pass *p) {
    for (int64_t k = 0; k < p->sent; k++)
        if (p->ci[k].action == PPV_PP_INFER && p->ci[k].status == ST_SENT &&
            p->ci[k].cache_epoch == p->epoch)
            return k;
    return -1;
}

static void on_received(event_pass *p, const ppv_pp_event *ev, int64_t i) {
    conform *c = p->c;
    const char *verdict = ppv_pp_verdict_name(ev->verdict);
    if (i < 0 || p->ci[i].action != PPV_PP_INFER) {
        if (ev->verdict != PPV_VERDICT_REJECTED)
            violation(c, PPV_CONFORM_EVENT_LOG, PPV_FAIL_ORDER,
                      "event %" PRId64 ": a result for call_id %" PRId64
                      ", which stage 0 never sent as an INFER, was %s (only a rejection fits)",
                      p->q, ev->call_id, verdict);
        return;
    }
    call_info *ci = &p->ci[i];
    if (ev->cache_epoch != p->epoch) {
        /* a call given up at the cut may be logged as late as well */
        int late = ci->status == ST_ABANDONED && ev->verdict == PPV_VERDICT_LATE;
        if (ev->verdict != PPV_VERDICT_STALE && !late)
            violation(c, PPV_CONFORM_STALE, PPV_FAIL_FM10,
                      "event %" PRId64 ": a result of cache_epoch %" PRId64
                      " while the epoch is %" PRId64 " was %s, not dropped as stale",
                      p->q, ev->cache_epoch, p->epoch, verdict);
        if (ci->status == ST_SENT && ev->verdict == PPV_VERDICT_ACCEPTED) ci->status = ST_ACCEPTED;
        return;
    }
    if (ev->verdict == PPV_VERDICT_STALE) {
        violation(c, PPV_CONFORM_STALE, PPV_FAIL_FM10,
                  "event %" PRId64 ": a result of the current cache_epoch %" PRId64
                  " dropped as stale",
                  p->q, ev->cache_epoch);
        return;
    }
    if (ci->status == ST_ACCEPTED || ci->status == ST_HELD || ci->status == ST_DECODED) {
        if (ev->verdict != PPV_VERDICT_DUPLICATE)
            violation(c, PPV_CONFORM_DUPLICATE, PPV_FAIL_ORDER,
                      "event %" PRId64 ": a second result for call_id %" PRId64
                      " (already %s) was %s, not dropped as a duplicate",
                      p->q, ev->call_id, status_name(ci->status), verdict);
        return;
    }
    if (ci->status == ST_ABANDONED) {
        if (ev->verdict != PPV_VERDICT_LATE)
            violation(c, PPV_CONFORM_DUPLICATE, PPV_FAIL_ORDER,
                      "event %" PRId64 ": the result of call_id %" PRId64
                      ", abandoned at a cut, was %s, not dropped as late",
                      p->q, ev->call_id, verdict);
        return;
    }
    if (ci->status != ST_SENT) return; /* after an error or a rejection: the run ended */
    if (ev->verdict == PPV_VERDICT_DUPLICATE || ev->verdict == PPV_VERDICT_LATE) {
        violation(c, PPV_CONFORM_DUPLICATE, PPV_FAIL_ORDER,
                  "event %" PRId64 ": the first result for call_id %" PRId64
                  " was dropped as %s: it was neither accepted nor abandoned before",
                  p->q, ev->call_id, verdict);
        return;
    }
    int64_t want = next_expected(p);
    if (want >= 0 && i != want) { /* ahead of the next expected */
        if (ev->verdict == PPV_VERDICT_ACCEPTED)
            violation(c, PPV_CONFORM_AHEAD, PPV_FAIL_ORDER,
                      "event %" PRId64 ": the result for call_id %" PRId64
                      " was accepted before call_id %" PRId64 "'s: out of order",
                      p->q, ev->call_id, p->ci[want].call_id);
        else if (ev->verdict == PPV_VERDICT_AHEAD && p->held + 1 > p->how.reorder_bound)
            violation(c, PPV_CONFORM_AHEAD, PPV_FAIL_ORDER,
                      "event %" PRId64 ": the result for call_id %" PRId64
                      " came before call_id %" PRId64 "'s and was held, %" PRId64
                      " held beyond the reorder bound %" PRId64 " (an error)",
                      p->q, ev->call_id, p->ci[want].call_id, p->held + 1, p->how.reorder_bound);
        if (ev->verdict == PPV_VERDICT_AHEAD) {
            ci->status = ST_HELD;
            p->held++;
        } else if (ev->verdict == PPV_VERDICT_ACCEPTED)
            ci->status = ST_ACCEPTED;
        else if (ev->verdict == PPV_VERDICT_ERROR)
            ci->status = ST_ERROR;
        else if (ev->verdict == PPV_VERDICT_REJECTED)
            ci->status = ST_REJECTED;
        return;
    }
    switch (ev->verdict) {
    case PPV_VERDICT_ACCEPTED: ci->status = ST_ACCEPTED; break;
    case PPV_VERDICT_ERROR: ci->status = ST_ERROR; break;
    case PPV_VERDICT_REJECTED: ci->status = ST_REJECTED; break;
    case PPV_VERDICT_AHEAD:
        violation(c, PPV_CONFORM_AHEAD, PPV_FAIL_ORDER,
                  "event %" PRId64 ": the result for call_id %" PRId64
                  " is the next expected, but was held as ahead",
                  p->q, ev->call_id);
        ci->status = ST_HELD;
        p->held++;
        break;
    default:
        violation(c, PPV_CONFORM_EVENT_LOG, PPV_FAIL_FIELD,
                  "event %" PRId64 ": a received result with verdict %s", p->q, verdict);
    }
}

/* The call an event is about: the next recorded one for a send, else the
 * sent call with its call_id (-1: none). */
static int64_t event_call(const event_pass *p, const ppv_pp_event *ev) {
    return ev->kind == PPV_EVENT_SENT ? (p->sent < p->ncalls ? p->sent : -1)
                                      : find_call(p->ci, p->sent, ev->call_id);
}

static void apply_event(event_pass *p, const ppv_pp_event *ev) {
    conform *c = p->c;
    int64_t i = event_call(p, ev);
    ppv_envelope ids;
    at_event(c, &ids, ev, i);
    if (ev->t_ns < p->t_prev || ev->t_begin_ns > ev->t_ns)
        violation(c, PPV_CONFORM_EVENT_LOG, PPV_FAIL_ORDER,
                  "event %" PRId64 " (%s) at t_ns %" PRId64 ", begun at %" PRId64
                  ", the event before at %" PRId64 ": times go back",
                  p->q, ppv_pp_event_kind_name(ev->kind), ev->t_ns, ev->t_begin_ns, p->t_prev);
    p->t_prev = ev->t_ns;
    if (ev->inflight < 0 || ev->ready < 0 || ev->inflight > p->how.d_in ||
        ev->ready > p->how.d_out)
        violation(c, PPV_CONFORM_QUEUES, PPV_FAIL_QUEUE,
                  "event %" PRId64 " (%s): %" PRId64 " in flight and %" PRId64
                  " ready, the bounds are D_in %" PRId64 " and D_out %" PRId64,
                  p->q, ppv_pp_event_kind_name(ev->kind), ev->inflight, ev->ready, p->how.d_in,
                  p->how.d_out);
    if (ev->kind < 0 || ev->kind >= PPV_EVENT_KIND_COUNT || ev->verdict < 0 ||
        ev->verdict >= PPV_VERDICT_COUNT || (ev->kind == PPV_EVENT_RECEIVED) ==
                                                 (ev->verdict == PPV_VERDICT_NONE)) {
        violation(c, PPV_CONFORM_EVENT_LOG, PPV_FAIL_FIELD,
                  "event %" PRId64 ": kind %" PRId64 " with verdict %" PRId64
                  " (a received result has a verdict other than none, every other event none)",
                  p->q, ev->kind, ev->verdict);
        return;
    }
    switch ((ppv_pp_event_kind)ev->kind) {
    case PPV_EVENT_SENT: {
        if (p->sent >= p->ncalls) {
            violation(c, PPV_CONFORM_EVENT_LOG, PPV_FAIL_ORDER,
                      "event %" PRId64 ": a %s sent (call_id %" PRId64
                      ") after the %" PRId64 " recorded calls",
                      p->q, ppv_pp_action_name(ev->action), ev->call_id, p->ncalls);
            return;
        }
        call_info *ci = &p->ci[p->sent];
        c->k = p->sent;
        if (ci->call_id != ev->call_id || ci->action != ev->action ||
            ci->chunk_index != ev->chunk_index || ci->cache_epoch != ev->cache_epoch)
            violation(c, PPV_CONFORM_EVENT_LOG, PPV_FAIL_ORDER,
                      "event %" PRId64 ": sent %s call_id %" PRId64 " chunk_index %" PRId64
                      " cache_epoch %" PRId64 ", but call %" PRId64 " is %s call_id %" PRId64
                      " chunk_index %" PRId64 " cache_epoch %" PRId64,
                      p->q, ppv_pp_action_name(ev->action), ev->call_id, ev->chunk_index,
                      ev->cache_epoch, p->sent, ppv_pp_action_name(ci->action), ci->call_id,
                      ci->chunk_index, ci->cache_epoch);
        ci->status = ST_SENT;
        ci->t_begin = ev->t_begin_ns;
        ci->t_sent = ev->t_ns;
        p->epoch = ev->cache_epoch;
        p->sent++;
        return;
    }
    case PPV_EVENT_RECEIVED:
        on_received(p, ev, i);
        if (i >= 0 && ev->verdict == PPV_VERDICT_ACCEPTED) p->ci[i].t_recv = ev->t_ns;
        return;
    case PPV_EVENT_DECODED: {
        int st = i < 0 ? ST_UNSENT : p->ci[i].status;
        if (st != ST_ACCEPTED && st != ST_HELD) {
            violation(c, PPV_CONFORM_DECODED, PPV_FAIL_RULE,
                      "event %" PRId64 ": call_id %" PRId64
                      " decoded while it was %s: only an accepted result is decoded, once",
                      p->q, ev->call_id, status_name(st));
            return;
        }
        if (ev->call_id <= p->last_decoded)
            violation(c, PPV_CONFORM_DECODED, PPV_FAIL_ORDER,
                      "event %" PRId64 ": call_id %" PRId64 " decoded after call_id %" PRId64
                      ": results are emitted in call order",
                      p->q, ev->call_id, p->last_decoded);
        if (st == ST_HELD) p->held--;
        p->ci[i].status = ST_DECODED;
        p->ci[i].t_emit = ev->t_ns;
        p->last_decoded = ev->call_id;
        if (p->decoded) p->decoded[p->ndecoded++] = i;
        return;
    }
    case PPV_EVENT_ABANDONED:
        if (i < 0 || p->ci[i].status != ST_SENT)
            violation(c, PPV_CONFORM_DECODED, PPV_FAIL_RULE,
                      "event %" PRId64 ": call_id %" PRId64
                      " abandoned while it was %s: only an INFER waiting for its result is",
                      p->q, ev->call_id, i < 0 ? "never sent" : status_name(p->ci[i].status));
        else
            p->ci[i].status = ST_ABANDONED;
        return;
    case PPV_EVENT_KIND_COUNT: return;
    }
}

/* After event ev: the queue bounds on the depths the events themselves
 * give (INFERs sent and unanswered against D_in, results accepted and not
 * decoded against D_out), and the log's recorded depths against those:
 * ready + inflight is every INFER sent and not yet decoded or abandoned,
 * and inflight at least the unanswered ones (a result held ahead of its
 * turn, or the one that ended the run, may count on either side). */
static void check_depths(event_pass *p, const ppv_pp_event *ev, int64_t call) {
    conform *c = p->c;
    const int64_t *n = p->n_state;
    int64_t unanswered = n[ST_SENT], either = n[ST_HELD] + n[ST_ERROR] + n[ST_REJECTED];
    int64_t open = unanswered + either + n[ST_ACCEPTED];
    if (unanswered > p->how.d_in && !p->over_in)
        violation(c, PPV_CONFORM_QUEUES, PPV_FAIL_QUEUE,
                  "event %" PRId64 " (%s): the events leave %" PRId64 " INFERs sent and "
                  "unanswered, above D_in %" PRId64 " (the log says %" PRId64 " in flight)",
                  p->q, ppv_pp_event_kind_name(ev->kind), unanswered, p->how.d_in, ev->inflight);
    p->over_in = unanswered > p->how.d_in;
    if (n[ST_ACCEPTED] > p->how.d_out && !p->over_out)
        violation(c, PPV_CONFORM_QUEUES, PPV_FAIL_QUEUE,
                  "event %" PRId64 " (%s): the events leave %" PRId64 " results accepted and not "
                  "decoded, above D_out %" PRId64 " (the log says %" PRId64 " ready)",
                  p->q, ppv_pp_event_kind_name(ev->kind), n[ST_ACCEPTED], p->how.d_out,
                  ev->ready);
    p->over_out = n[ST_ACCEPTED] > p->how.d_out;
    if (ev->inflight + ev->ready == open && ev->inflight >= unanswered &&
        ev->inflight <= unanswered + either)
        return;
    if (!p->disagree++) {
        snprintf(p->first_disagree, sizeof p->first_disagree,
                 "event %" PRId64 " (%s) records %" PRId64 " in flight and %" PRId64
                 " ready, but the events up to it leave %" PRId64 " INFERs sent and not yet "
                 "decoded, %" PRId64 " of them unanswered: the log's depths disagree with its "
                 "own events",
                 p->q, ppv_pp_event_kind_name(ev->kind), ev->inflight, ev->ready, open,
                 unanswered);
        ppv_envelope_init(&p->disagree_ids);
        p->disagree_ids.call_id = ev->call_id;
        p->disagree_ids.chunk_index = ev->chunk_index;
        p->disagree_ids.cache_epoch = ev->cache_epoch;
        p->disagree_call = call;
    }
}

static void on_event(event_pass *p, const ppv_pp_event *ev) {
    int64_t i = event_call(p, ev);
    int infer = i >= 0 && p->ci[i].action == PPV_PP_INFER;
    int before = infer ? p->ci[i].status : -1;
    apply_event(p, ev);
    if (infer) { /* an event moves its own call only */
        p->n_state[before]--;
        p->n_state[p->ci[i].status]++;
    }
    ppv_envelope ids; /* apply_event's were its own */
    at_event(p->c, &ids, ev, i);
    check_depths(p, ev, i);
    p->c->e = NULL;
}

/* The contract's overlap metric (ppv_pp_overlap_measure) over the decoded
 * chunks, in decode order; below PPV_OVERLAP_MIN it is a violation, as is
 * a log too short or too coarse to measure it. */
static void overlap(conform *c, const call_info *ci, const int64_t *dec, int64_t n) {
    ppv_conform_report *r = c->rep;
    ppv_pp_chunk_times *t = malloc((size_t)(n > 0 ? n : 1) * sizeof *t);
    ppv_pp_overlap m;
    if (!t) {
        c->oom = 1;
        return;
    }
    for (int64_t k = 0; k < n; k++) {
        const call_info *a = &ci[dec[k]];
        t[k] = (ppv_pp_chunk_times){a->t_begin, a->t_sent, a->t_recv, a->t_emit, a->tB_ms, 0, 0};
    }
    int rc = ppv_pp_overlap_measure(t, n, &m);
    free(t);
    if (rc < 0) {
        c->oom = 1;
        return;
    }
    r->overlap_samples = m.samples;
    r->overlap_done = 1;
    if (m.samples == 0) {
        violation(c, PPV_CONFORM_OVERLAP, PPV_FAIL_OVERLAP,
                  "the overlap cannot be measured: %" PRId64 " decoded chunks, of which none "
                  "after the %d warm-up chunks has a receive time and two stages that took time",
                  n, PPV_OVERLAP_WARMUP);
        return;
    }
    r->overlap_score = m.score;
    r->overlap_period_ms = m.period_ms;
    r->overlap_stage0_ms = m.stage0_ms;
    r->overlap_stage1_ms = m.stage1_ms;
    if (m.score < PPV_OVERLAP_MIN)
        violation(c, PPV_CONFORM_OVERLAP, PPV_FAIL_OVERLAP,
                  "OverlapScore %.3f below %.2f over %" PRId64
                  " chunks (median period %.3f ms, stage 0 %.3f ms, the mesh %.3f ms): "
                  "stage 0 and the mesh take turns instead of overlapping",
                  m.score, PPV_OVERLAP_MIN, m.samples, m.period_ms, m.stage0_ms, m.stage1_ms);
}

/* The event log's checks; 0, or -1 with the reason (exit 2). */
static int check_events(conform *c, ppv_inference_reader *rd, call_info *ci, int64_t ncalls,
                        int complete, char *err, size_t errlen) {
    char clock[64];
    event_pass p;
    memset(&p, 0, sizeof p);
    p.c = c;
    p.ci = ci;
    p.ncalls = ncalls;
    p.epoch = -1;
    p.last_decoded = -1;
    p.t_prev = INT64_MIN;
    int64_t n = 0, count = -1;
    int has = inference_events_open(rd, &p.how, clock, sizeof clock, &n, &count, err, errlen);
    if (has < 0) return -1;
    if (has && count >= 0 && count != n)
        violation(c, PPV_CONFORM_EVENT_LOG, PPV_FAIL_FIELD,
                  "/inference/events: its count attribute says %" PRId64 " events, it holds %" PRId64,
                  count, n);
    if (has && strcmp(clock, "virtual") != 0 && strcmp(clock, "monotonic") != 0)
        violation(c, PPV_CONFORM_EVENT_LOG, PPV_FAIL_FIELD,
                  "/inference/events: clock '%.60s': the format's clocks are virtual (the mock's "
                  "steps) and monotonic (a machine's)",
                  clock);
    ppv_conform_report *r = c->rep;
    for (int k = PPV_CONFORM_EVENT_LOG; k <= PPV_CONFORM_QUEUES; k++)
        r->checked[k] = has;
    if (!has) {
        if (c->overlap)
            violation(c, PPV_CONFORM_OVERLAP, PPV_FAIL_OVERLAP,
                      "the overlap needs stage 0's event log (format version 2), which this "
                      "recording does not have");
        return 0;
    }
    r->limits[0] = 0;
    r->events = n;
    ppv_pp_event *buf = malloc(4096 * sizeof *buf);
    if (c->overlap && ncalls > 0) p.decoded = malloc((size_t)ncalls * sizeof *p.decoded);
    if (!buf || (c->overlap && ncalls > 0 && !p.decoded)) {
        free(buf);
        free(p.decoded);
        return gerr(err, errlen, "out of memory");
    }
    for (int64_t at = 0; at < n; at += 4096) {
        int64_t m = n - at < 4096 ? n - at : 4096;
        if (inference_events_read(rd, at, m, buf, err, errlen) < 0) {
            free(buf);
            free(p.decoded);
            return -1;
        }
        for (int64_t q = 0; q < m; q++) {
            p.q = at + q;
            on_event(&p, &buf[q]);
        }
    }
    free(buf);
    if (p.disagree) {
        c->e = &p.disagree_ids;
        c->k = p.disagree_call;
        if (p.disagree > 1)
            violation(c, PPV_CONFORM_QUEUES, PPV_FAIL_QUEUE, "%s (and %" PRId64 " later events)",
                      p.first_disagree, p.disagree - 1);
        else
            violation(c, PPV_CONFORM_QUEUES, PPV_FAIL_QUEUE, "%s", p.first_disagree);
    }
    c->e = NULL;
    if (c->overlap) overlap(c, ci, p.decoded, p.ndecoded);
    free(p.decoded);
    ppv_envelope none;
    c->e = NULL;
    if (p.sent < ncalls)
        violation(c, PPV_CONFORM_EVENT_LOG, PPV_FAIL_ORDER,
                  "the event log sends %" PRId64 " of the %" PRId64
                  " recorded calls: call %" PRId64 " and after have no sent event",
                  p.sent, ncalls, p.sent);
    for (int64_t k = 0; k < p.sent; k++) {
        if (ci[k].action != PPV_PP_INFER) continue;
        c->e = &none;
        c->k = k;
        ppv_envelope_init(&none);
        none.call_id = ci[k].call_id;
        none.chunk_index = ci[k].chunk_index;
        none.cache_epoch = ci[k].cache_epoch;
        int st = ci[k].status;
        if (complete && st != ST_DECODED && st != ST_ABANDONED && st != ST_ERROR)
            violation(c, PPV_CONFORM_DECODED, PPV_FAIL_RULE,
                      "an INFER %s at the end of the stream: every INFER is decoded once, "
                      "abandoned at a cut or answered by the mesh's error",
                      status_name(st));
        if (ci[k].has_result && st == ST_ABANDONED)
            violation(c, PPV_CONFORM_ANSWERED, PPV_FAIL_RULE,
                      "an INFER abandoned at a cut has a recorded answer");
        else if (!ci[k].has_result && st != ST_ABANDONED)
            violation(c, PPV_CONFORM_ANSWERED, PPV_FAIL_RULE,
                      "an INFER with no result: every INFER is answered by exactly one (or "
                      "abandoned at a cut)");
    }
    c->e = NULL;
    return 0;
}

/* ---- the mesh ranks' own records ---------------------------------------------------- */

typedef struct rank_value {
    int64_t call_id;
    uint64_t value;
    int32_t rank;
} rank_value;

typedef struct rank_table {
    rank_value *v[PPV_RANK_RECORD_COUNT];
    size_t n[PPV_RANK_RECORD_COUNT], cap[PPV_RANK_RECORD_COUNT];
    int oom;
} rank_table;

static void take_rank_value(void *ctx, int32_t mesh_rank, ppv_pp_rank_record kind,
                            int64_t call_id, uint64_t value) {
    rank_table *t = ctx;
    if (t->n[kind] == t->cap[kind]) {
        size_t cap = t->cap[kind] ? 2 * t->cap[kind] : 256;
        rank_value *v = realloc(t->v[kind], cap * sizeof *v);
        if (!v) {
            t->oom = 1;
            return;
        }
        t->v[kind] = v;
        t->cap[kind] = cap;
    }
    t->v[kind][t->n[kind]++] = (rank_value){call_id, value, mesh_rank};
}

static int by_call(const void *a, const void *b) {
    const rank_value *x = a, *y = b;
    if (x->call_id != y->call_id) return (x->call_id > y->call_id) - (x->call_id < y->call_id);
    return (x->rank > y->rank) - (x->rank < y->rank);
}

static int by_rank(const void *a, const void *b) {
    const rank_value *x = a, *y = b;
    if (x->rank != y->rank) return (x->rank > y->rank) - (x->rank < y->rank);
    return (x->call_id > y->call_id) - (x->call_id < y->call_id);
}

/* Sets c's call to the one with call_id (ids only), or the file. */
static void at_call(conform *c, ppv_envelope *ids, const call_info *ci, int64_t n,
                    int64_t call_id) {
    int64_t k = find_call(ci, n, call_id);
    if (k < 0) {
        c->e = NULL;
        return;
    }
    ppv_envelope_init(ids);
    ids->call_id = ci[k].call_id;
    ids->chunk_index = ci[k].chunk_index;
    ids->cache_epoch = ci[k].cache_epoch;
    c->e = ids;
    c->k = k;
}

/* Every rank's value of a call is the same (input and state digests). */
static void same_across_ranks(conform *c, rank_value *v, size_t n, ppv_conform_check check,
                              const char *what, const call_info *ci, int64_t ncalls) {
    if (!n) return;
    qsort(v, n, sizeof *v, by_call);
    ppv_envelope ids;
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && v[j].call_id == v[i].call_id)
            j++;
        for (size_t k = i + 1; k < j; k++)
            if (v[k].value != v[i].value) {
                at_call(c, &ids, ci, ncalls, v[i].call_id);
                violation(c, check, PPV_FAIL_DIGEST,
                          "call_id %" PRId64 ": mesh rank %d's %s %016" PRIx64
                          " differs from mesh rank %d's %016" PRIx64
                          ": the ranks would compute a Franken-model",
                          v[i].call_id, (int)v[k].rank, what, v[k].value, (int)v[i].rank,
                          v[i].value);
                break;
            }
        i = j;
    }
    c->e = NULL;
}

/* Each rank's fingerprint never changes; no two ranks share one. */
static void fingerprints(conform *c, rank_value *v, size_t n, const call_info *ci,
                         int64_t ncalls) {
    if (!n) return;
    qsort(v, n, sizeof *v, by_rank);
    ppv_envelope ids;
    size_t firsts = 0;
    for (size_t i = 0; i < n;) {
        size_t j = i + 1;
        while (j < n && v[j].rank == v[i].rank)
            j++;
        for (size_t k = i + 1; k < j; k++)
            if (v[k].value != v[i].value) {
                at_call(c, &ids, ci, ncalls, v[k].call_id);
                violation(c, PPV_CONFORM_SHARD_FINGERPRINTS, PPV_FAIL_FINGERPRINT,
                          "mesh rank %d's shard fingerprint was %016" PRIx64
                          " (call_id %" PRId64 ") and is %016" PRIx64
                          " at call_id %" PRId64 ": its weights changed under it",
                          (int)v[i].rank, v[i].value, v[i].call_id, v[k].value, v[k].call_id);
                break;
            }
        v[firsts++] = v[i]; /* each rank's first, for the comparison across ranks */
        i = j;
    }
    c->e = NULL;
    for (size_t a = 0; a < firsts; a++)
        for (size_t b = a + 1; b < firsts; b++)
            if (v[a].value == v[b].value) {
                violation(c, PPV_CONFORM_SHARD_FINGERPRINTS, PPV_FAIL_FINGERPRINT,
                          "mesh ranks %d and %d have the same shard fingerprint %016" PRIx64
                          ": distinct shards must differ (the same shard loaded twice, or a "
                          "fingerprint that does not look at the weights)",
                          (int)v[a].rank, (int)v[b].rank, v[a].value);
                return;
            }
}

static int check_ranks(conform *c, ppv_inference_reader *rd, const call_info *ci,
                       int64_t ncalls, char *err, size_t errlen) {
    rank_table t;
    memset(&t, 0, sizeof t);
    int has[PPV_RANK_RECORD_COUNT];
    int rc = inference_rank_values(rd, has, take_rank_value, &t, err, errlen);
    if (rc == 0 && t.oom) rc = gerr(err, errlen, "out of memory");
    if (rc == 0) {
        ppv_conform_report *r = c->rep;
        r->checked[PPV_CONFORM_RANK_INPUTS] = has[PPV_RANK_INPUT_DIGEST];
        r->checked[PPV_CONFORM_SHARD_FINGERPRINTS] = has[PPV_RANK_SHARD_FINGERPRINT];
        r->checked[PPV_CONFORM_RANK_STATE] = has[PPV_RANK_STATE_DIGEST];
        same_across_ranks(c, t.v[PPV_RANK_INPUT_DIGEST], t.n[PPV_RANK_INPUT_DIGEST],
                          PPV_CONFORM_RANK_INPUTS, "input digest", ci, ncalls);
        same_across_ranks(c, t.v[PPV_RANK_STATE_DIGEST], t.n[PPV_RANK_STATE_DIGEST],
                          PPV_CONFORM_RANK_STATE, "state digest", ci, ncalls);
        fingerprints(c, t.v[PPV_RANK_SHARD_FINGERPRINT], t.n[PPV_RANK_SHARD_FINGERPRINT], ci,
                     ncalls);
    }
    for (int k = 0; k < PPV_RANK_RECORD_COUNT; k++)
        free(t.v[k]);
    return rc;
}

/* "rank 0 (stage 0)", "rank 1 (leader)", "rank 2 (worker)" or "the link". */
static const char *mem_row_name(int32_t rank, char *buf, size_t n) {
    if (rank < 0) snprintf(buf, n, "the link");
    else snprintf(buf, n, "rank %d (%s)", (int)rank, ppv_pp_role_name(rank));
    return buf;
}

/* ", at chunk 2, call_id 2 (steady), t_ns 1200: it held envelopes 10, ..."
 * from what the row recorded of its peak (nothing where it recorded none). */
static void mem_peak_said(const ppv_conform_memory *m, char *buf, size_t n) {
    size_t at = 0;
    buf[0] = 0;
    if (m->peak_chunk != INT64_MIN && m->peak_chunk >= 0)
        at += (size_t)snprintf(buf + at, n - at, ", at chunk %" PRId64, m->peak_chunk);
    else if (m->peak_chunk == -1)
        at += (size_t)snprintf(buf + at, n - at, ", at start");
    if (at < n && m->peak_call_id != INT64_MIN && m->peak_call_id >= 0)
        at += (size_t)snprintf(buf + at, n - at, ", call_id %" PRId64, m->peak_call_id);
    if (at < n && m->peak_phase[0])
        at += (size_t)snprintf(buf + at, n - at, " (%s)", m->peak_phase);
    if (at < n && m->peak_t_ns != INT64_MIN)
        at += (size_t)snprintf(buf + at, n - at, ", t_ns %" PRId64, m->peak_t_ns);
    int any = 0;
    for (int k = 0; k < PPV_MEM_KIND_COUNT && at < n; k++)
        if (m->at_peak[k] > 0)
            at += (size_t)snprintf(buf + at, n - at, "%s%s %" PRId64, any++ ? ", " : ": it held ",
                                   ppv_pp_mem_kind_name(k), m->at_peak[k]);
}

/* The memory part: each row's samples in time order, none negative or
 * above its recorded peak, and with caps, each rank's peak within its cap.
 * 0, or -1 (err) when it cannot be read, or when caps are given and the
 * file has no memory part to check them on. */
static int check_memory(conform *c, ppv_inference_reader *rd, const ppv_conform_options *o,
                        const char *path, char *err, size_t errlen) {
    ppv_conform_report *out = c->rep;
    int ncaps = o && o->mem_caps ? o->nmem_caps : 0;
    inference_mem *rows = NULL;
    int32_t n = 0;
    int rc = inference_memory(rd, &rows, &n, out->mem_clock, sizeof out->mem_clock, err, errlen);
    if (rc < 0) return -1;
    if (rc == 0 || n == 0) {
        inference_memory_free(rows, n);
        if (ncaps)
            return gerr(err, errlen,
                        "%s: --mem-cap: the recording holds no memory samples (/inference/memory), "
                        "so no cap can be checked: record with ppv pp --record, or give "
                        "ppv.record's Recorder memory samples",
                        path);
        return 0;
    }
    out->checked[PPV_CONFORM_MEMORY] = 1;
    if (!(out->mem = calloc((size_t)n, sizeof *out->mem))) {
        inference_memory_free(rows, n);
        return gerr(err, errlen, "out of memory");
    }
    for (int32_t k = 0; k < n; k++) {
        const inference_mem *r = &rows[k];
        char name[64];
        mem_row_name(r->rank, name, sizeof name);
        if (r->fault[0]) {
            violation(c, PPV_CONFORM_MEMORY, PPV_FAIL_FIELD, "%s", r->fault);
            continue;
        }
        ppv_conform_memory *m = &out->mem[out->nmem++];
        m->rank = r->rank;
        m->samples = r->n;
        m->peak_t_ns = r->peak_t_ns;
        m->peak_chunk = r->peak_chunk;
        m->peak_call_id = r->peak_call_id;
        snprintf(m->peak_phase, sizeof m->peak_phase, "%s", r->peak_phase);
        m->held_at_end = r->held_at_end;
        memcpy(m->at_peak, r->at_peak, sizeof m->at_peak);
        int64_t high = INT64_MIN, at = -1;
        int order_said = 0, negative_said = 0, phase_said = 0;
        for (int64_t i = 0; i < r->n; i++) {
            const int64_t *s = &r->samples[3 * i];
            if (s[2] != -1 && (s[2] < 0 || s[2] >= PPV_PHASE_COUNT) && !phase_said++)
                violation(c, PPV_CONFORM_MEMORY, PPV_FAIL_FIELD,
                          "%s: sample %" PRId64 " has phase code %" PRId64 ": the codes are 0 "
                          "warm-up, 1 steady, 2 cut-drain, 3 new-epoch and 4 end",
                          name, i, s[2]);
            if (s[1] < 0 && !negative_said++)
                violation(c, PPV_CONFORM_MEMORY, PPV_FAIL_MEMORY,
                          "%s: sample %" PRId64 " (t_ns %" PRId64 ") holds %" PRId64
                          " bytes: a rank never holds fewer than none",
                          name, i, s[0], s[1]);
            if (i && s[0] < r->samples[3 * (i - 1)] && !order_said++)
                violation(c, PPV_CONFORM_MEMORY, PPV_FAIL_MEMORY,
                          "%s: sample %" PRId64 " is at t_ns %" PRId64 ", before sample %" PRId64
                          "'s %" PRId64 ": the samples are not in time order",
                          name, i, s[0], i - 1, r->samples[3 * (i - 1)]);
            if (s[1] > high) {
                high = s[1];
                at = i;
            }
        }
        if (r->peak_bytes < 0)
            violation(c, PPV_CONFORM_MEMORY, PPV_FAIL_MEMORY,
                      "%s: peak_bytes %" PRId64 ": a peak is never below none", name, r->peak_bytes);
        if (at >= 0 && high > r->peak_bytes)
            violation(c, PPV_CONFORM_MEMORY, PPV_FAIL_MEMORY,
                      "%s: peak_bytes %" PRId64 ", but sample %" PRId64 " (t_ns %" PRId64
                      ") holds %" PRId64 ": the recorded peak is below what the rank held",
                      name, r->peak_bytes, at, r->samples[3 * at], high);
        m->peak_bytes = at >= 0 && high > r->peak_bytes ? high : r->peak_bytes;
        if (m->rank < 0 || !ncaps) continue;
        m->cap = o->mem_caps[m->rank < ncaps ? m->rank : ncaps - 1];
        if ((double)m->peak_bytes <= m->cap) continue;
        char said[512];
        if (at >= 0 && high > r->peak_bytes) /* the sample, not the recorded peak, is over */
            snprintf(said, sizeof said, ", sample %" PRId64 " at t_ns %" PRId64, at,
                     r->samples[3 * at]);
        else
            mem_peak_said(m, said, sizeof said);
        violation(c, PPV_CONFORM_MEMORY, PPV_FAIL_MEMORY,
                  "%s peaks at %" PRId64 " bytes, %.0f bytes over its cap of %.0f%s", name,
                  m->peak_bytes, (double)m->peak_bytes - m->cap, m->cap, said);
    }
    inference_memory_free(rows, n);
    return 0;
}

int ppv_conform(const char *path, const ppv_conform_options *o, ppv_conform_report *out, char *err,
                size_t errlen) {
    memset(out, 0, sizeof *out);
    conform c = {out, !o || !o->max_report ? 100 : o->max_report < 0 ? 0 : o->max_report, o && o->overlap,
                 o && o->strict, 0, 0, NULL, -1};
    int64_t n = 0;
    ppv_inference_setup setup;
    ppv_inference_reader *rd = ppv_inference_open(path, &n, &setup, &out->has_setup, err, errlen);
    if (!rd) return -1;
    inference_set_lenient(rd); /* a recorder's mistakes are violations, not unreadable */
    out->calls = n;
    out->format_version = inference_format_version(rd);
    for (int k = 0; k < PPV_CONFORM_COUNT; k++) /* envelope-digest: once one is seen */
        out->checked[k] = (k != PPV_CONFORM_OVERLAP || c.overlap) &&
                          k != PPV_CONFORM_ENVELOPE_DIGEST && k != PPV_CONFORM_MEMORY;
    snprintf(out->limits, sizeof out->limits,
             "no event log (format version %" PRId64 "): what stage 0 dropped (stale, duplicate, "
             "late, ahead), heartbeats, timings and queue depths were not recorded, so their "
             "rules were not checked",
             out->format_version);
    if (inference_unknown_file_keys(rd, unknown_key, &c) < 0) {
        gerr(err, errlen, "%s: cannot list the file's groups and attributes", path);
        ppv_inference_close(rd);
        ppv_conform_report_free(out);
        return -1;
    }
    int64_t links = inference_links(rd);
    out->present = inference_present(rd);
    int64_t upto = out->present < n ? out->present : n;
    call_info *ci = calloc((size_t)(upto > 0 ? upto : 1), sizeof *ci);
    ppv_contract_order order = ppv_contract_order_start();
    int64_t last_accepted = -1, ended = -1; /* the call that ended the stream */
    int closed = 0, after_end_said = 0;      /* a SHUTDOWN or ERROR was sent */
    const char *end_what = "";
    int rc = -1;
    if (!ci) {
        gerr(err, errlen, "out of memory");
        goto done;
    }
    for (int64_t k = 0; k < upto; k++) {
        ppv_envelope e;
        ppv_result r;
        int has = 0;
        if (ppv_inference_read(rd, k, &e, &r, &has, err, errlen) < 0) goto done;
        c.e = &e;
        c.k = k;
        ci[k] = (call_info){e.call_id, e.chunk_index, e.cache_epoch, (int8_t)e.action,
                            (int8_t)has, ST_UNSENT, has ? r.tB_ms : 0.0, -1, -1, -1, -1};
        /* after the mesh's error only SHUTDOWN or ERROR may come; after
         * those, nothing */
        int closing = e.action == PPV_PP_SHUTDOWN || e.action == PPV_PP_ERROR;
        if (ended >= 0 && !after_end_said && (closed || !closing)) {
            violation(&c, PPV_CONFORM_AFTER_END, PPV_FAIL_ORDER,
                      "a %s after call %" PRId64 "'s %s: %s", ppv_pp_action_name(e.action), ended,
                      end_what,
                      closed ? "nothing follows the end of the stream"
                             : "after the mesh's error only SHUTDOWN or ERROR may follow");
            after_end_said = 1;
        }
        if (inference_unknown_keys(rd, k, unknown_key, &c) < 0) {
            ppv_envelope_free_tensors(&e);
            if (has) ppv_result_free_tensors(&r);
            gerr(err, errlen, "%s: /inference/calls/" PPV_GOLDEN_CALL_FMT ": cannot list its keys",
                 path, (int)k);
            goto done;
        }
        /* what the recorder stored wrong: each is the violation, and the
         * record it spoils is not judged further (its tensor is absent) */
        const inference_fault *faults;
        int nfaults = inference_faults(rd, &faults), env_faulty = 0, res_faulty = 0;
        for (int q = 0; q < nfaults; q++) {
            violation(&c, faults[q].in_result ? PPV_CONFORM_RESULT : PPV_CONFORM_ENVELOPE,
                      faults[q].rule, "%s", faults[q].message);
            if (faults[q].in_result) res_faulty = 1;
            else env_faulty = 1;
        }
        char msg[640];
        ppv_failure f = env_faulty ? PPV_FAIL_NONE : ppv_envelope_check(&e, &order, msg, sizeof msg);
        if (f != PPV_FAIL_NONE) violation(&c, PPV_CONFORM_ENVELOPE, f, "%s", msg);
        ppv_contract_order_advance(&order, &e);
        int infer = e.action == PPV_PP_INFER;
        if (infer && e.envelope_digest_i64 && !env_faulty) {
            out->checked[PPV_CONFORM_ENVELOPE_DIGEST] = 1;
            uint64_t d = ppv_envelope_digest(&e);
            if (!d) c.oom = 1; /* it could not be framed: only memory can run out here */
            else if (d != (uint64_t)e.envelope_digest_i64)
                violation(&c, PPV_CONFORM_ENVELOPE_DIGEST, PPV_FAIL_ENVELOPE,
                          "envelope_digest_i64 %016" PRIx64 ", but the envelope recorded digests "
                          "to %016" PRIx64 ": it changed after stage 0 sealed it",
                          (uint64_t)e.envelope_digest_i64, d);
        }
        out->infers += infer;
        if (!infer && has)
            violation(&c, PPV_CONFORM_ANSWERED, PPV_FAIL_RULE,
                      "a %s with a result: only an INFER is answered", ppv_pp_action_name(e.action));
        if (has) out->results++;
        if (infer && has && !res_faulty && !env_faulty && check_result(&c, &e, &r, &last_accepted) &&
            ended < 0) {
            ended = k;
            end_what = "error result";
        }
        if (closing && !closed) {
            closed = 1;
            if (ended < 0) {
                ended = k;
                end_what = ppv_pp_action_name(e.action);
            }
        }
        ppv_envelope_free_tensors(&e);
        if (has) ppv_result_free_tensors(&r);
        if (c.oom) {
            gerr(err, errlen, "out of memory");
            goto done;
        }
    }
    c.e = NULL;
    int complete = out->present == n && ended >= 0;
    if (check_events(&c, rd, ci, upto, complete, err, errlen) < 0 ||
        check_ranks(&c, rd, ci, upto, err, errlen) < 0 ||
        check_memory(&c, rd, o, path, err, errlen) < 0)
        goto done;
    if (!out->checked[PPV_CONFORM_EVENT_LOG]) /* no log: every INFER has its one result */
        for (int64_t k = 0; k < upto; k++)
            if (ci[k].action == PPV_PP_INFER && !ci[k].has_result) {
                ppv_envelope ids;
                ppv_envelope_init(&ids);
                ids.call_id = ci[k].call_id;
                ids.chunk_index = ci[k].chunk_index;
                ids.cache_epoch = ci[k].cache_epoch;
                c.e = &ids;
                c.k = k;
                violation(&c, PPV_CONFORM_ANSWERED, PPV_FAIL_RULE,
                          "an INFER with no result: every INFER is answered by exactly one");
            }
    c.e = NULL;
    if (out->present < n)
        violation(&c, PPV_CONFORM_COMPLETE, PPV_FAIL_TRUNCATED,
                  "truncated after call %" PRId64 ": /inference's calls says %" PRId64
                  ", the file holds %" PRId64 " (from call_000000 in order)",
                  out->present - 1, n, out->present);
    else if (out->present > n)
        violation(&c, PPV_CONFORM_COMPLETE, PPV_FAIL_TRUNCATED,
                  "/inference's calls says %" PRId64 ", the file holds %" PRId64
                  " calls: the count disagrees (the calls after it were not checked)",
                  n, out->present);
    if (links > out->present)
        violation(&c, PPV_CONFORM_UNKNOWN_FIELD, PPV_FAIL_FIELD,
                  "/inference/calls holds %" PRId64 " object(s) that are not calls in order from "
                  "call_000000",
                  links - out->present);
    if (out->present == n && n == 0)
        violation(&c, PPV_CONFORM_COMPLETE, PPV_FAIL_TRUNCATED,
                  "the recording holds no calls (not even SHUTDOWN)");
    else if (out->present == n && ended < 0)
        violation(&c, PPV_CONFORM_COMPLETE, PPV_FAIL_TRUNCATED,
                  "truncated after call %" PRId64
                  ": the stream ends without SHUTDOWN, ERROR or the mesh's error result",
                  out->present - 1);
    for (int k = 0; k < PPV_CONFORM_COUNT; k++)
        out->nchecked += out->checked[k];
    rc = c.oom ? gerr(err, errlen, "out of memory") : 0;
done:
    free(ci);
    ppv_inference_close(rd);
    if (rc < 0) ppv_conform_report_free(out);
    return rc;
}

void ppv_conform_report_free(ppv_conform_report *r) {
    free(r->v);
    r->v = NULL;
    r->nv = 0;
    free(r->mem);
    r->mem = NULL;
    r->nmem = 0;
}
