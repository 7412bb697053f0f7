/* conform.c - a recording checked against the PP inference contract with
 * no model: every envelope and result by the contract's own checks
 * (engine/pp/rules.c), the stream's order and completeness, and the keys
 * the contract does not define. Reads one call at a time.
 */
#include <inttypes.h>
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
    int max_report;
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
    if (r->nv == 0) {
        r->v = calloc((size_t)c->max_report, sizeof *r->v);
        if (!r->v) {
            c->oom = 1;
            return;
        }
    }
    ppv_conform_violation *v = &r->v[r->nv++];
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
    if (!strcmp(name, "video"))
        violation(c, PPV_CONFORM_UNKNOWN_FIELD, PPV_FAIL_FIELD,
                  "%s/video: the video key is forbidden in the pipeline's messages", where);
    else
        violation(c, PPV_CONFORM_UNKNOWN_FIELD, PPV_FAIL_FIELD,
                  "%s/%s: a field the contract does not define (a receiver filters it out)", where,
                  name);
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

int ppv_conform(const char *path, const ppv_conform_options *o, ppv_conform_report *out, char *err,
                size_t errlen) {
    memset(out, 0, sizeof *out);
    conform c = {out, o && o->max_report > 0 ? o->max_report : 100, 0, NULL, -1};
    int64_t n = 0;
    ppv_inference_setup setup;
    ppv_inference_reader *rd = ppv_inference_open(path, &n, &setup, &out->has_setup, err, errlen);
    if (!rd) return -1;
    out->calls = n;
    out->format_version = inference_format_version(rd);
    if (out->format_version < 2)
        snprintf(out->limits, sizeof out->limits,
                 "format version %" PRId64 " holds one result per call and no event log: what "
                 "stage 0 dropped (stale, duplicate, late, ahead), heartbeats, timings and queue "
                 "depths are not recorded, so their rules are not checked",
                 out->format_version);
    int64_t links = inference_links(rd);
    out->present = inference_present(rd);
    ppv_contract_order order = ppv_contract_order_start();
    int64_t last_accepted = -1, ended = -1; /* the call that ended the stream */
    int closed = 0, after_end_said = 0;      /* a SHUTDOWN or ERROR was sent */
    const char *end_what = "";
    int rc = -1;
    int64_t upto = out->present < n ? out->present : n;
    for (int64_t k = 0; k < upto; k++) {
        ppv_envelope e;
        ppv_result r;
        int has = 0;
        if (ppv_inference_read(rd, k, &e, &r, &has, err, errlen) < 0) goto done;
        c.e = &e;
        c.k = k;
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
        char msg[640];
        ppv_failure f = ppv_envelope_check(&e, &order, msg, sizeof msg);
        if (f != PPV_FAIL_NONE) violation(&c, PPV_CONFORM_ENVELOPE, f, "%s", msg);
        ppv_contract_order_advance(&order, &e);
        int infer = e.action == PPV_PP_INFER;
        out->infers += infer;
        if (infer && !has)
            violation(&c, PPV_CONFORM_ANSWERED, PPV_FAIL_RULE,
                      "an INFER with no result: every INFER is answered by exactly one");
        else if (!infer && has)
            violation(&c, PPV_CONFORM_ANSWERED, PPV_FAIL_RULE,
                      "a %s with a result: only an INFER is answered", ppv_pp_action_name(e.action));
        if (has) out->results++;
        if (infer && has && check_result(&c, &e, &r, &last_accepted) && ended < 0) {
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
    rc = c.oom ? gerr(err, errlen, "out of memory") : 0;
done:
    ppv_inference_close(rd);
    if (rc < 0) ppv_conform_report_free(out);
    return rc;
}

void ppv_conform_report_free(ppv_conform_report *r) {
    free(r->v);
    r->v = NULL;
    r->nv = 0;
}
