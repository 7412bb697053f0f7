/* rules.c - the PP inference contract's rules (spec/contract.def): what an
 * envelope and a result must keep, checked from the field and tensor
 * tables, so a field added to contract.def is checked without another
 * edit. The wire framing is frame.c's.
 */
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "contract.h"

static const field_desc env_fields[] = {
#define PPV_ENV_FIELD(name, kind, when)                                                            \
    {#name, KIND_##kind, WHEN_##when, offsetof(ppv_envelope, name)},
#include "contract.def"
#undef PPV_ENV_FIELD
};
static const tensor_desc env_tensors[] = {
#define PPV_ENV_TENSOR(name, dtype, rank, when)                                                    \
    {#name, PPV_DTYPE_##dtype, rank, WHEN_##when, offsetof(ppv_envelope, name)},
#include "contract.def"
#undef PPV_ENV_TENSOR
};
static const field_desc res_fields[] = {
#define PPV_RES_FIELD(name, kind, when)                                                            \
    {#name, KIND_##kind, WHEN_##when, offsetof(ppv_result, name)},
#include "contract.def"
#undef PPV_RES_FIELD
};
static const tensor_desc res_tensors[] = {
#define PPV_RES_TENSOR(name, dtype, rank, when)                                                    \
    {#name, PPV_DTYPE_##dtype, rank, WHEN_##when, offsetof(ppv_result, name)},
#include "contract.def"
#undef PPV_RES_TENSOR
};

const message_desc pp_envelope_desc = {"envelope", env_fields, COUNT(env_fields), env_tensors,
                                           COUNT(env_tensors)};
const message_desc pp_result_desc = {"result", res_fields, COUNT(res_fields), res_tensors,
                                         COUNT(res_tensors)};

ppv_failure pp_failf(ppv_failure mode, char *msg, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (msg && n) vsnprintf(msg, n, fmt, ap);
    va_end(ap);
    return mode;
}

size_t ppv_tensor_bytes(const ppv_tensor *t) {
    static const size_t elem[] = {
#define PPV_DTYPE(name, token, bytes) bytes,
#include "dtypes.def"
#undef PPV_DTYPE
    };
    if (!t->data || t->dtype < 0 || t->dtype >= PPV_DTYPE_COUNT) return 0;
    size_t n = elem[t->dtype];
    for (int k = 0; k < t->rank; k++)
        n *= (size_t)t->dims[k];
    return n;
}

/* "(1, 3, 16, 8, 8)" */
static const char *shape_text(const ppv_tensor *t, char *buf, size_t n) {
    size_t len = (size_t)snprintf(buf, n, "(");
    for (int k = 0; k < t->rank && len < n; k++)
        len += (size_t)snprintf(buf + len, n - len, "%s%" PRId64, k ? ", " : "", t->dims[k]);
    if (len < n) snprintf(buf + len, n - len, ")");
    return buf;
}

const char *ppv_pp_event_kind_name(int64_t k) {
    static const char *const names[] = {
#define PPV_PP_EVENT_NAME(ID, name) name,
        PPV_PP_EVENT_KINDS(PPV_PP_EVENT_NAME)
#undef PPV_PP_EVENT_NAME
    };
    return k >= 0 && k < PPV_EVENT_KIND_COUNT ? names[k] : "?";
}

const char *ppv_pp_verdict_name(int64_t v) {
    static const char *const names[] = {
#define PPV_PP_VERDICT_NAME(ID, name) name,
        PPV_PP_VERDICTS(PPV_PP_VERDICT_NAME)
#undef PPV_PP_VERDICT_NAME
    };
    return v >= 0 && v < PPV_VERDICT_COUNT ? names[v] : "?";
}

const char *ppv_pp_rank_record_name(int k) {
    static const char *const names[] = {
#define PPV_PP_RANK_NAME(ID, name) name,
        PPV_PP_RANK_RECORDS(PPV_PP_RANK_NAME)
#undef PPV_PP_RANK_NAME
    };
    return k >= 0 && k < PPV_RANK_RECORD_COUNT ? names[k] : "?";
}

/* ---- rules ------------------------------------------------------------------------- */

int64_t ppv_expected_generator_calls(int do_kv_recompute, int64_t num_denoise_steps) {
    return (do_kv_recompute ? 1 : 0) + num_denoise_steps;
}

void ppv_envelope_init(ppv_envelope *e) {
    memset(e, 0, sizeof *e);
    e->pp_envelope_version = PPV_PP_ENVELOPE_VERSION;
    e->action = PPV_PP_INFER;
    e->pp_disable_vace = 1;
    e->kv_cache_attention_bias = 0.3;
}

void ppv_result_init(ppv_result *r, const ppv_envelope *e) {
    memset(r, 0, sizeof *r);
    r->pp_result_version = PPV_PP_RESULT_VERSION;
    r->call_id = e->call_id;
    r->chunk_index = e->chunk_index;
    r->cache_epoch = e->cache_epoch;
    r->ok = 1;
}

ppv_contract_order ppv_contract_order_start(void) {
    return (ppv_contract_order){-1, -1, -1};
}

void ppv_contract_order_advance(ppv_contract_order *o, const ppv_envelope *e) {
    if (e->cache_epoch > o->cache_epoch) o->chunk_index = -1;
    o->call_id = e->call_id;
    o->cache_epoch = e->cache_epoch;
    if (e->action == PPV_PP_INFER) o->chunk_index = e->chunk_index;
}

/* Checks a tensor against its table entry: absent when it must be, present
 * with the table's dtype and rank when it must be. */
static ppv_failure check_tensor(const ppv_envelope *e, const tensor_desc *d, int wanted, char *msg,
                                size_t n) {
    const ppv_tensor *t = tensor_at((void *)e, d);
    if (!wanted && t->data)
        return pp_failf(d->when == WHEN_RECOMPUTE ? PPV_FAIL_FM15 : PPV_FAIL_RULE, msg, n,
                     "%s present in %s envelope (" IDS_FMT ")%s", d->name,
                     ppv_pp_action_name(e->action), IDS(e),
                     d->when == WHEN_RECOMPUTE ? ": do_kv_recompute is 0, so it must be absent"
                                               : "");
    if (!wanted) return PPV_FAIL_NONE;
    if (!t->data)
        return pp_failf(PPV_FAIL_FM06, msg, n, "%s missing (" IDS_FMT ")%s", d->name, IDS(e),
                     d->when == WHEN_RECOMPUTE ? ": do_kv_recompute needs the context frames" : "");
    if (t->dtype != (int)d->dtype)
        return pp_failf(PPV_FAIL_FM07, msg, n, "%s has dtype %s, the contract says %s (" IDS_FMT ")",
                     d->name, ppv_dtype_token((ppv_dtype)t->dtype), ppv_dtype_token(d->dtype),
                     IDS(e));
    if (t->rank != d->rank)
        return pp_failf(PPV_FAIL_FM07, msg, n,
                     "%s has %d dimensions, the contract says %d (" IDS_FMT ")", d->name, t->rank,
                     d->rank, IDS(e));
    return PPV_FAIL_NONE;
}

/* 1 if t's shape is (1, frames, 16, h/8, w/8) for some frames >= 1 (or
 * exactly want_frames when that is > 0). */
static int latent_shape(const ppv_tensor *t, int64_t h, int64_t w, int64_t want_frames) {
    return t->dims[0] == 1 && t->dims[1] >= 1 && (want_frames <= 0 || t->dims[1] == want_frames) &&
           t->dims[2] == 16 && t->dims[3] == h / 8 && t->dims[4] == w / 8;
}

/* The INFER-only rules: sizes, the call formula, the step list, the
 * tensors, and what the first chunk of an epoch may do. */
static ppv_failure check_infer(const ppv_envelope *e, const ppv_contract_order *o, char *msg,
                               size_t n) {
    char sh[96];
    int new_epoch = e->cache_epoch > o->cache_epoch;
    if (!new_epoch && e->chunk_index <= o->chunk_index)
        return pp_failf(PPV_FAIL_ORDER, msg, n,
                     "chunk_index %" PRId64 " after %" PRId64
                     " in the same epoch: chunk_index must increase (it may restart only with a "
                     "new cache_epoch) (" IDS_FMT ")",
                     e->chunk_index, o->chunk_index, IDS(e));
    if (e->chunk_index < 0 || e->current_start_frame < 0)
        return pp_failf(PPV_FAIL_RULE, msg, n,
                     "chunk_index and current_start_frame are >= 0 (" IDS_FMT ")", IDS(e));
    int first = new_epoch || o->chunk_index < 0;
    if (first && !e->init_cache)
        return pp_failf(PPV_FAIL_RULE, msg, n,
                     "the first chunk of an epoch must set init_cache (" IDS_FMT ")", IDS(e));
    if (first && e->do_kv_recompute)
        return pp_failf(
            PPV_FAIL_RULE, msg, n,
            "do_kv_recompute on the first chunk of an epoch: there is no context yet (" IDS_FMT ")",
            IDS(e));
    if (e->height <= 0 || e->width <= 0 || e->height % 16 || e->width % 16)
        return pp_failf(PPV_FAIL_RULE, msg, n,
                     "height %" PRId64 " and width %" PRId64
                     " must be positive multiples of 16 (" IDS_FMT ")",
                     e->height, e->width, IDS(e));
    if (e->num_denoise_steps < 1)
        return pp_failf(PPV_FAIL_RULE, msg, n,
                     "num_denoise_steps %" PRId64 " must be >= 1 (" IDS_FMT ")",
                     e->num_denoise_steps, IDS(e));
    int64_t want = ppv_expected_generator_calls(e->do_kv_recompute, e->num_denoise_steps);
    if (e->expected_generator_calls != want)
        return pp_failf(PPV_FAIL_FM02, msg, n,
                     "expected_generator_calls %" PRId64 ", but do_kv_recompute %d + "
                     "num_denoise_steps %" PRId64 " make %" PRId64 " (" IDS_FMT ")",
                     e->expected_generator_calls, e->do_kv_recompute, e->num_denoise_steps, want,
                     IDS(e));
    if (!isfinite(e->kv_cache_attention_bias) || !isfinite(e->noise_scale))
        return pp_failf(PPV_FAIL_FM04, msg, n,
                     "kv_cache_attention_bias %g, noise_scale %g: the canonical metadata text "
                     "cannot carry a value that is not finite (" IDS_FMT ")",
                     e->kv_cache_attention_bias, e->noise_scale, IDS(e));
    ppv_failure f;
    for (int k = 0; k < COUNT(env_tensors); k++) {
        const tensor_desc *d = &env_tensors[k];
        int wanted = d->when == WHEN_INFER || (d->when == WHEN_RECOMPUTE && e->do_kv_recompute);
        if ((f = check_tensor(e, d, wanted, msg, n)) != PPV_FAIL_NONE) return f;
    }
    const ppv_tensor *steps = &e->current_denoising_step_list;
    if (steps->dims[0] != e->num_denoise_steps)
        return pp_failf(PPV_FAIL_FM02, msg, n,
                     "current_denoising_step_list has %" PRId64
                     " steps, num_denoise_steps says %" PRId64 " (" IDS_FMT ")",
                     steps->dims[0], e->num_denoise_steps, IDS(e));
    if (!latent_shape(&e->latents_in, e->height, e->width, 3))
        return pp_failf(PPV_FAIL_FM07, msg, n,
                     "latents_in is %s, the contract says (1, 3, 16, %" PRId64 ", %" PRId64
                     ") for %" PRId64 "x%" PRId64 " (" IDS_FMT ")",
                     shape_text(&e->latents_in, sh, sizeof sh), e->height / 8, e->width / 8,
                     e->height, e->width, IDS(e));
    if (e->do_kv_recompute && !latent_shape(&e->context_frames, e->height, e->width, 0))
        return pp_failf(PPV_FAIL_FM07, msg, n,
                     "context_frames is %s, the contract says (1, frames, 16, %" PRId64 ", %" PRId64
                     ") (" IDS_FMT ")",
                     shape_text(&e->context_frames, sh, sizeof sh), e->height / 8, e->width / 8,
                     IDS(e));
    const ppv_tensor *c = &e->conditioning_embeds;
    if (c->dims[0] < 1 || c->dims[1] < 1 || c->dims[2] < 1)
        return pp_failf(PPV_FAIL_FM07, msg, n,
                     "conditioning_embeds is %s: every dimension >= 1 (" IDS_FMT ")",
                     shape_text(c, sh, sizeof sh), IDS(e));
    return PPV_FAIL_NONE;
}

ppv_failure ppv_envelope_check(const ppv_envelope *e, const ppv_contract_order *o, char *msg,
                               size_t msglen) {
    if (e->pp_envelope_version != PPV_PP_ENVELOPE_VERSION)
        return pp_failf(PPV_FAIL_VERSION, msg, msglen,
                     "pp_envelope_version %" PRId64 ": this ppv reads version %d (" IDS_FMT ")",
                     e->pp_envelope_version, PPV_PP_ENVELOPE_VERSION, IDS(e));
    if (e->action < 0 || e->action >= PPV_PP_ACTION_COUNT)
        return pp_failf(PPV_FAIL_FIELD, msg, msglen,
                     "action %" PRId64 " is not a PPAction (" IDS_FMT ")", e->action, IDS(e));
    for (int k = 0; k < COUNT(env_fields); k++)
        if (env_fields[k].kind == KIND_BOOL) {
            int v = *bool_at((void *)e, &env_fields[k]);
            if (v != 0 && v != 1)
                return pp_failf(PPV_FAIL_FIELD, msg, msglen, "%s is %d, not a boolean (" IDS_FMT ")",
                             env_fields[k].name, v, IDS(e));
        }
    if (!e->pp_disable_vace)
        return pp_failf(PPV_FAIL_RULE, msg, msglen,
                     "pp_disable_vace must be 1: VACE does not run in the pipeline (" IDS_FMT ")",
                     IDS(e));
    if (e->call_id <= o->call_id)
        return pp_failf(PPV_FAIL_ORDER, msg, msglen,
                     "call_id %" PRId64 " after %" PRId64 ": call_id must strictly increase over "
                     "every action (" IDS_FMT ")",
                     e->call_id, o->call_id, IDS(e));
    if (e->cache_epoch < o->cache_epoch)
        return pp_failf(PPV_FAIL_ORDER, msg, msglen,
                     "cache_epoch %" PRId64 " after %" PRId64
                     ": the epoch never goes back (" IDS_FMT ")",
                     e->cache_epoch, o->cache_epoch, IDS(e));
    if (e->action == PPV_PP_INFER) return check_infer(e, o, msg, msglen);
    for (int k = 0; k < COUNT(env_tensors); k++) {
        ppv_failure f = check_tensor(e, &env_tensors[k], 0, msg, msglen);
        if (f != PPV_FAIL_NONE) return f;
    }
    return PPV_FAIL_NONE;
}

ppv_result_verdict ppv_result_check(const ppv_result *r, const ppv_envelope *sent,
                                    int64_t cache_epoch, int64_t last_accepted, ppv_failure *mode,
                                    char *msg, size_t msglen) {
    char a[96], b[96];
    *mode = PPV_FAIL_NONE;
    if (r->pp_result_version != PPV_PP_RESULT_VERSION) {
        *mode = pp_failf(PPV_FAIL_VERSION, msg, msglen,
                      "pp_result_version %" PRId64 ": this ppv reads version %d (" IDS_FMT ")",
                      r->pp_result_version, PPV_PP_RESULT_VERSION, IDS(r));
        return PPV_RESULT_REJECT;
    }
    if (r->cache_epoch != cache_epoch) {
        pp_failf(PPV_FAIL_FM10, msg, msglen,
              "result of cache_epoch %" PRId64 " while the epoch is %" PRId64
              ": dropped, never decoded (" IDS_FMT ")",
              r->cache_epoch, cache_epoch, IDS(r));
        return PPV_RESULT_DROP_STALE;
    }
    /* an error result is the mesh's word on the envelope it was sent,
     * whatever its call_id (a regressed one included): never a duplicate */
    if (r->call_id <= last_accepted && r->ok) {
        pp_failf(PPV_FAIL_NONE, msg, msglen,
              "call_id %" PRId64 " was already accepted: a duplicate, dropped (" IDS_FMT ")",
              r->call_id, IDS(r));
        return PPV_RESULT_DROP_DUPLICATE;
    }
    if (r->call_id != sent->call_id || r->chunk_index != sent->chunk_index) {
        *mode = pp_failf(PPV_FAIL_ORDER, msg, msglen,
                      "result for call_id %" PRId64 " chunk_index %" PRId64
                      ", but the next expected is call_id %" PRId64 " chunk_index %" PRId64
                      " (" IDS_FMT ")",
                      r->call_id, r->chunk_index, sent->call_id, sent->chunk_index, IDS(r));
        return PPV_RESULT_REJECT;
    }
    if (r->ok != 0 && r->ok != 1) {
        *mode = pp_failf(PPV_FAIL_FIELD, msg, msglen, "ok is %d, not a boolean (" IDS_FMT ")", r->ok,
                      IDS(r));
        return PPV_RESULT_REJECT;
    }
    if (!r->ok) {
        if (r->latents_out.data) {
            *mode = pp_failf(PPV_FAIL_RULE, msg, msglen,
                          "a failed result carries latents_out (" IDS_FMT ")", IDS(r));
            return PPV_RESULT_REJECT;
        }
        if (!memchr(r->error_message, 0, sizeof r->error_message) || !r->error_message[0]) {
            *mode = pp_failf(PPV_FAIL_RULE, msg, msglen,
                          "a failed result says nothing in error_message (" IDS_FMT ")", IDS(r));
            return PPV_RESULT_REJECT;
        }
        return PPV_RESULT_ACCEPT;
    }
    if (r->observed_generator_calls != sent->expected_generator_calls) {
        *mode = pp_failf(PPV_FAIL_FM02, msg, msglen,
                      "observed_generator_calls %" PRId64 ", expected_generator_calls %" PRId64
                      " (" IDS_FMT ")",
                      r->observed_generator_calls, sent->expected_generator_calls, IDS(r));
        return PPV_RESULT_REJECT;
    }
    const ppv_tensor *t = &r->latents_out;
    if (!t->data || t->dtype != PPV_DTYPE_BF16 || t->rank != 5 ||
        memcmp(t->dims, sent->latents_in.dims, sizeof t->dims) != 0) {
        *mode = pp_failf(PPV_FAIL_FM07, msg, msglen,
                      "latents_out is %s %s, the envelope's latents_in is bf16 %s (" IDS_FMT ")",
                      t->data ? ppv_dtype_token((ppv_dtype)t->dtype) : "missing",
                      t->data ? shape_text(t, a, sizeof a) : "",
                      shape_text(&sent->latents_in, b, sizeof b), IDS(r));
        return PPV_RESULT_REJECT;
    }
    return PPV_RESULT_ACCEPT;
}

/* ---- framing ----------------------------------------------------------------------- */
