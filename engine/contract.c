/* contract.c - the PP inference contract (spec/contract.def): the rules an
 * envelope and a result must keep, and their wire framing.
 *
 * Everything here is generated from the field and tensor tables, so a field
 * added to contract.def is checked, framed and parsed without another edit.
 * Framing does every check before it returns a header: a header on the wire
 * is a commitment the peer blocks on (anti-stranding).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- the tables --------------------------------------------------------------- */

typedef enum field_kind { KIND_INT, KIND_BOOL, KIND_FLOAT, KIND_STR } field_kind;
typedef enum field_when { WHEN_ALWAYS, WHEN_INFER, WHEN_OK, WHEN_RECOMPUTE } field_when;

typedef struct field_desc {
    const char *name;
    field_kind kind;
    field_when when;
    size_t offset;
} field_desc;

typedef struct tensor_desc {
    const char *name;
    ppv_dtype dtype;
    int rank;
    field_when when;
    size_t offset;
} tensor_desc;

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

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* One message's tables: an envelope's or a result's. */
typedef struct message_desc {
    const char *what;
    const field_desc *fields;
    int nfields;
    const tensor_desc *tensors;
    int ntensors;
} message_desc;

static const message_desc envelope_desc = {"envelope", env_fields, COUNT(env_fields), env_tensors,
                                           COUNT(env_tensors)};
static const message_desc result_desc = {"result", res_fields, COUNT(res_fields), res_tensors,
                                         COUNT(res_tensors)};

/* Largest tensor a spec may announce: a receiver allocates from specs. */
#define MAX_TENSOR_BYTES ((size_t)1 << 32)

/* ---- small helpers ---------------------------------------------------------------- */

/* Formats the failure's message and returns the mode. */
static ppv_failure failf(ppv_failure mode, char *msg, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static ppv_failure failf(ppv_failure mode, char *msg, size_t n, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (msg && n) vsnprintf(msg, n, fmt, ap);
    va_end(ap);
    return mode;
}

/* Writes v in decimal at out (NUL-terminated); its length. The metadata
 * text is built once per message, so it avoids printf's cost. */
static size_t i64_text(int64_t v, char *out) {
    char tmp[24];
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    size_t n = 0, len = 0;
    do {
        tmp[n++] = (char)('0' + u % 10);
        u /= 10;
    } while (u);
    if (v < 0) out[len++] = '-';
    while (n) out[len++] = tmp[--n];
    out[len] = 0;
    return len;
}

/* A malloc'd "key=value" line, or NULL. */
static char *key_value(const char *prefix, const char *key, const char *value) {
    size_t p = strlen(prefix), k = strlen(key), v = strlen(value);
    char *s = malloc(p + k + v + 2);
    if (!s) return NULL;
    memcpy(s, prefix, p);
    memcpy(s + p, key, k);
    s[p + k] = '=';
    memcpy(s + p + k + 1, value, v + 1);
    return s;
}

/* The ids every message names: "call_id 7, chunk_index 3, cache_epoch 0". */
#define IDS_FMT "call_id %" PRId64 ", chunk_index %" PRId64 ", cache_epoch %" PRId64
#define IDS(x) (x)->call_id, (x)->chunk_index, (x)->cache_epoch

static int64_t *int_at(void *base, const field_desc *d) {
    return (int64_t *)((char *)base + d->offset);
}

static int *bool_at(void *base, const field_desc *d) {
    return (int *)((char *)base + d->offset);
}

static double *float_at(void *base, const field_desc *d) {
    return (double *)((char *)base + d->offset);
}

static char *str_at(void *base, const field_desc *d) {
    return (char *)base + d->offset;
}

static ppv_tensor *tensor_at(void *base, const tensor_desc *d) {
    return (ppv_tensor *)((char *)base + d->offset);
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
        return failf(d->when == WHEN_RECOMPUTE ? PPV_FAIL_FM15 : PPV_FAIL_RULE, msg, n,
                     "%s present in %s envelope (" IDS_FMT ")%s", d->name,
                     ppv_pp_action_name(e->action), IDS(e),
                     d->when == WHEN_RECOMPUTE ? ": do_kv_recompute is 0, so it must be absent"
                                               : "");
    if (!wanted) return PPV_FAIL_NONE;
    if (!t->data)
        return failf(PPV_FAIL_FM06, msg, n, "%s missing (" IDS_FMT ")%s", d->name, IDS(e),
                     d->when == WHEN_RECOMPUTE ? ": do_kv_recompute needs the context frames" : "");
    if (t->dtype != (int)d->dtype)
        return failf(PPV_FAIL_FM07, msg, n, "%s has dtype %s, the contract says %s (" IDS_FMT ")",
                     d->name, ppv_dtype_token((ppv_dtype)t->dtype), ppv_dtype_token(d->dtype),
                     IDS(e));
    if (t->rank != d->rank)
        return failf(PPV_FAIL_FM07, msg, n,
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
        return failf(PPV_FAIL_ORDER, msg, n,
                     "chunk_index %" PRId64 " after %" PRId64
                     " in the same epoch: chunk_index must increase (it may restart only with a "
                     "new cache_epoch) (" IDS_FMT ")",
                     e->chunk_index, o->chunk_index, IDS(e));
    if (e->chunk_index < 0 || e->current_start_frame < 0)
        return failf(PPV_FAIL_RULE, msg, n,
                     "chunk_index and current_start_frame are >= 0 (" IDS_FMT ")", IDS(e));
    int first = new_epoch || o->chunk_index < 0;
    if (first && !e->init_cache)
        return failf(PPV_FAIL_RULE, msg, n,
                     "the first chunk of an epoch must set init_cache (" IDS_FMT ")", IDS(e));
    if (first && e->do_kv_recompute)
        return failf(
            PPV_FAIL_RULE, msg, n,
            "do_kv_recompute on the first chunk of an epoch: there is no context yet (" IDS_FMT ")",
            IDS(e));
    if (e->height <= 0 || e->width <= 0 || e->height % 16 || e->width % 16)
        return failf(PPV_FAIL_RULE, msg, n,
                     "height %" PRId64 " and width %" PRId64
                     " must be positive multiples of 16 (" IDS_FMT ")",
                     e->height, e->width, IDS(e));
    if (e->num_denoise_steps < 1)
        return failf(PPV_FAIL_RULE, msg, n,
                     "num_denoise_steps %" PRId64 " must be >= 1 (" IDS_FMT ")",
                     e->num_denoise_steps, IDS(e));
    int64_t want = ppv_expected_generator_calls(e->do_kv_recompute, e->num_denoise_steps);
    if (e->expected_generator_calls != want)
        return failf(PPV_FAIL_FM02, msg, n,
                     "expected_generator_calls %" PRId64 ", but do_kv_recompute %d + "
                     "num_denoise_steps %" PRId64 " make %" PRId64 " (" IDS_FMT ")",
                     e->expected_generator_calls, e->do_kv_recompute, e->num_denoise_steps, want,
                     IDS(e));
    if (!isfinite(e->kv_cache_attention_bias) || !isfinite(e->noise_scale))
        return failf(PPV_FAIL_FM04, msg, n,
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
        return failf(PPV_FAIL_FM02, msg, n,
                     "current_denoising_step_list has %" PRId64
                     " steps, num_denoise_steps says %" PRId64 " (" IDS_FMT ")",
                     steps->dims[0], e->num_denoise_steps, IDS(e));
    if (!latent_shape(&e->latents_in, e->height, e->width, 3))
        return failf(PPV_FAIL_FM07, msg, n,
                     "latents_in is %s, the contract says (1, 3, 16, %" PRId64 ", %" PRId64
                     ") for %" PRId64 "x%" PRId64 " (" IDS_FMT ")",
                     shape_text(&e->latents_in, sh, sizeof sh), e->height / 8, e->width / 8,
                     e->height, e->width, IDS(e));
    if (e->do_kv_recompute && !latent_shape(&e->context_frames, e->height, e->width, 0))
        return failf(PPV_FAIL_FM07, msg, n,
                     "context_frames is %s, the contract says (1, frames, 16, %" PRId64 ", %" PRId64
                     ") (" IDS_FMT ")",
                     shape_text(&e->context_frames, sh, sizeof sh), e->height / 8, e->width / 8,
                     IDS(e));
    const ppv_tensor *c = &e->conditioning_embeds;
    if (c->dims[0] < 1 || c->dims[1] < 1 || c->dims[2] < 1)
        return failf(PPV_FAIL_FM07, msg, n,
                     "conditioning_embeds is %s: every dimension >= 1 (" IDS_FMT ")",
                     shape_text(c, sh, sizeof sh), IDS(e));
    return PPV_FAIL_NONE;
}

ppv_failure ppv_envelope_check(const ppv_envelope *e, const ppv_contract_order *o, char *msg,
                               size_t msglen) {
    if (e->pp_envelope_version != PPV_PP_ENVELOPE_VERSION)
        return failf(PPV_FAIL_VERSION, msg, msglen,
                     "pp_envelope_version %" PRId64 ": this ppv reads version %d (" IDS_FMT ")",
                     e->pp_envelope_version, PPV_PP_ENVELOPE_VERSION, IDS(e));
    if (e->action < 0 || e->action >= PPV_PP_ACTION_COUNT)
        return failf(PPV_FAIL_FIELD, msg, msglen,
                     "action %" PRId64 " is not a PPAction (" IDS_FMT ")", e->action, IDS(e));
    for (int k = 0; k < COUNT(env_fields); k++)
        if (env_fields[k].kind == KIND_BOOL) {
            int v = *bool_at((void *)e, &env_fields[k]);
            if (v != 0 && v != 1)
                return failf(PPV_FAIL_FIELD, msg, msglen, "%s is %d, not a boolean (" IDS_FMT ")",
                             env_fields[k].name, v, IDS(e));
        }
    if (!e->pp_disable_vace)
        return failf(PPV_FAIL_RULE, msg, msglen,
                     "pp_disable_vace must be 1: VACE does not run in the pipeline (" IDS_FMT ")",
                     IDS(e));
    if (e->call_id <= o->call_id)
        return failf(PPV_FAIL_ORDER, msg, msglen,
                     "call_id %" PRId64 " after %" PRId64 ": call_id must strictly increase over "
                     "every action (" IDS_FMT ")",
                     e->call_id, o->call_id, IDS(e));
    if (e->cache_epoch < o->cache_epoch)
        return failf(PPV_FAIL_ORDER, msg, msglen,
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
        *mode = failf(PPV_FAIL_VERSION, msg, msglen,
                      "pp_result_version %" PRId64 ": this ppv reads version %d (" IDS_FMT ")",
                      r->pp_result_version, PPV_PP_RESULT_VERSION, IDS(r));
        return PPV_RESULT_REJECT;
    }
    if (r->cache_epoch != cache_epoch) {
        failf(PPV_FAIL_FM10, msg, msglen,
              "result of cache_epoch %" PRId64 " while the epoch is %" PRId64
              ": dropped, never decoded (" IDS_FMT ")",
              r->cache_epoch, cache_epoch, IDS(r));
        return PPV_RESULT_DROP_STALE;
    }
    if (r->call_id <= last_accepted) {
        failf(PPV_FAIL_NONE, msg, msglen,
              "call_id %" PRId64 " was already accepted: a duplicate, dropped (" IDS_FMT ")",
              r->call_id, IDS(r));
        return PPV_RESULT_DROP_DUPLICATE;
    }
    if (r->call_id != sent->call_id || r->chunk_index != sent->chunk_index) {
        *mode = failf(PPV_FAIL_ORDER, msg, msglen,
                      "result for call_id %" PRId64 " chunk_index %" PRId64
                      ", but the next expected is call_id %" PRId64 " chunk_index %" PRId64
                      " (" IDS_FMT ")",
                      r->call_id, r->chunk_index, sent->call_id, sent->chunk_index, IDS(r));
        return PPV_RESULT_REJECT;
    }
    if (r->ok != 0 && r->ok != 1) {
        *mode = failf(PPV_FAIL_FIELD, msg, msglen, "ok is %d, not a boolean (" IDS_FMT ")", r->ok,
                      IDS(r));
        return PPV_RESULT_REJECT;
    }
    if (!r->ok) {
        if (r->latents_out.data) {
            *mode = failf(PPV_FAIL_RULE, msg, msglen,
                          "a failed result carries latents_out (" IDS_FMT ")", IDS(r));
            return PPV_RESULT_REJECT;
        }
        if (!memchr(r->error_message, 0, sizeof r->error_message) || !r->error_message[0]) {
            *mode = failf(PPV_FAIL_RULE, msg, msglen,
                          "a failed result says nothing in error_message (" IDS_FMT ")", IDS(r));
            return PPV_RESULT_REJECT;
        }
        return PPV_RESULT_ACCEPT;
    }
    if (r->observed_generator_calls != sent->expected_generator_calls) {
        *mode = failf(PPV_FAIL_FM02, msg, msglen,
                      "observed_generator_calls %" PRId64 ", expected_generator_calls %" PRId64
                      " (" IDS_FMT ")",
                      r->observed_generator_calls, sent->expected_generator_calls, IDS(r));
        return PPV_RESULT_REJECT;
    }
    const ppv_tensor *t = &r->latents_out;
    if (!t->data || t->dtype != PPV_DTYPE_BF16 || t->rank != 5 ||
        memcmp(t->dims, sent->latents_in.dims, sizeof t->dims) != 0) {
        *mode = failf(PPV_FAIL_FM07, msg, msglen,
                      "latents_out is %s %s, the envelope's latents_in is bf16 %s (" IDS_FMT ")",
                      t->data ? ppv_dtype_token((ppv_dtype)t->dtype) : "missing",
                      t->data ? shape_text(t, a, sizeof a) : "",
                      shape_text(&sent->latents_in, b, sizeof b), IDS(r));
        return PPV_RESULT_REJECT;
    }
    return PPV_RESULT_ACCEPT;
}

/* ---- framing ----------------------------------------------------------------------- */

static int by_key(const void *a, const void *b) {
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* 1 if the field or tensor travels in a message whose action is INFER (or
 * a result) and, for a result, whether it is ok. */
static int travels(field_when when, int is_result, int ok, int recompute) {
    switch (when) {
    case WHEN_ALWAYS:
        return 1;
    case WHEN_INFER:
        return 1;
    case WHEN_OK:
        return is_result && ok;
    case WHEN_RECOMPUTE:
        return recompute;
    }
    return 0;
}

/* Serialises the fields and tensor specs of msg (an envelope or a result at
 * base) as canonical text: lines sorted by key. Fills f's meta, tensors and
 * header words 4 and 6. Returns PPV_FAIL_NONE, or FM-04 when a value cannot
 * be written (a string field without its NUL, or out of memory). */
static ppv_failure frame_payload(const message_desc *md, void *base, int ok, int recompute,
                                 ppv_frame *f, char *msg, size_t n) {
    char *lines[64];
    int nl = 0;
    ppv_failure rc = PPV_FAIL_NONE;
    int is_result = md == &result_desc;
    for (int k = 0; k < md->nfields && rc == PPV_FAIL_NONE; k++) {
        const field_desc *d = &md->fields[k];
        if (!travels(d->when, is_result, ok, recompute)) continue;
        char v[600];
        switch (d->kind) {
        case KIND_INT:
            i64_text(*int_at(base, d), v);
            break;
        case KIND_BOOL:
            i64_text(*bool_at(base, d), v);
            break;
        case KIND_FLOAT:
            snprintf(v, sizeof v, "%.17g", *float_at(base, d));
            break;
        case KIND_STR: {
            const char *s = str_at(base, d);
            if (!memchr(s, 0, 256) || strchr(s, '\n'))
                rc = failf(PPV_FAIL_FM04, msg, n, "%s cannot be serialised: %s", d->name,
                           memchr(s, 0, 256) ? "it holds a newline" : "no terminating NUL");
            else
                snprintf(v, sizeof v, "%s", s);
            break;
        }
        }
        if (rc != PPV_FAIL_NONE) break;
        char *line = key_value("", d->name, v);
        if (!line)
            rc = failf(PPV_FAIL_FM04, msg, n, "out of memory");
        else
            lines[nl++] = line;
    }
    f->ntensors = 0;
    for (int k = 0; k < md->ntensors && rc == PPV_FAIL_NONE; k++) {
        const tensor_desc *d = &md->tensors[k];
        const ppv_tensor *t = tensor_at(base, d);
        if (!t->data) continue;
        char spec[16 + 21 * PPV_TENSOR_MAX_RANK];
        size_t len = strlen(ppv_dtype_token((ppv_dtype)t->dtype));
        memcpy(spec, ppv_dtype_token((ppv_dtype)t->dtype), len + 1);
        for (int j = 0; j < t->rank && j < PPV_TENSOR_MAX_RANK; j++) {
            spec[len++] = ' ';
            len += i64_text(t->dims[j], spec + len);
        }
        char *line = key_value("tensor.", d->name, spec);
        if (!line)
            rc = failf(PPV_FAIL_FM04, msg, n, "out of memory");
        else
            lines[nl++] = line;
    }
    if (rc == PPV_FAIL_NONE) {
        qsort(lines, (size_t)nl, sizeof *lines, by_key);
        size_t total = 0;
        for (int k = 0; k < nl; k++)
            total += strlen(lines[k]) + 1;
        f->meta = malloc(total + 1);
        if (!f->meta) rc = failf(PPV_FAIL_FM04, msg, n, "out of memory");
        size_t at = 0;
        for (int k = 0; f->meta && k < nl; k++) {
            size_t l = strlen(lines[k]);
            memcpy(f->meta + at, lines[k], l);
            f->meta[at + l] = '\n';
            at += l + 1;
            /* a tensor line's key names its place in spec order */
            if (strncmp(lines[k], "tensor.", 7) == 0)
                for (int j = 0; j < md->ntensors; j++) {
                    size_t kl = strlen(md->tensors[j].name);
                    if (strncmp(lines[k] + 7, md->tensors[j].name, kl) == 0 &&
                        lines[k][7 + kl] == '=')
                        f->tensors[f->ntensors++] = tensor_at(base, &md->tensors[j]);
                }
        }
        if (f->meta) {
            f->meta[at] = 0;
            f->header[4] = f->ntensors;
            f->header[6] = (int64_t)at;
        }
    }
    for (int k = 0; k < nl; k++)
        free(lines[k]);
    return rc;
}

/* dtype check of every tensor that travels, per the tables (FM-07: a late
 * unsupported dtype would strand the receiver). */
static ppv_failure check_specs(const message_desc *md, void *base, const char *ids, char *msg,
                               size_t n) {
    for (int k = 0; k < md->ntensors; k++) {
        const tensor_desc *d = &md->tensors[k];
        const ppv_tensor *t = tensor_at(base, d);
        if (!t->data) continue;
        if (t->dtype != (int)d->dtype || t->rank != d->rank)
            return failf(PPV_FAIL_FM07, msg, n,
                         "%s: %s of %d dimensions, the contract says %s of %d (%s)", d->name,
                         ppv_dtype_token((ppv_dtype)t->dtype), t->rank, ppv_dtype_token(d->dtype),
                         d->rank, ids);
        for (int j = 0; j < t->rank; j++)
            if (t->dims[j] < 0)
                return failf(PPV_FAIL_FM07, msg, n, "%s: dimension %d is negative (%s)", d->name, j,
                             ids);
        if (ppv_tensor_bytes(t) > MAX_TENSOR_BYTES)
            return failf(PPV_FAIL_FM07, msg, n, "%s: %zu bytes, more than a message may carry (%s)",
                         d->name, ppv_tensor_bytes(t), ids);
    }
    return PPV_FAIL_NONE;
}

ppv_failure ppv_envelope_frame(const ppv_envelope *e, const ppv_contract_order *o, ppv_frame *f,
                               char *msg, size_t msglen) {
    memset(f, 0, sizeof *f);
    ppv_failure rc = ppv_envelope_check(e, o, msg, msglen);
    if (rc != PPV_FAIL_NONE) return rc;
    char ids[160];
    snprintf(ids, sizeof ids, IDS_FMT, IDS(e));
    if (e->action == PPV_PP_INFER) {
        if ((rc = check_specs(&envelope_desc, (void *)e, ids, msg, msglen)) != PPV_FAIL_NONE ||
            (rc = frame_payload(&envelope_desc, (void *)e, 1, e->do_kv_recompute, f, msg,
                                msglen)) != PPV_FAIL_NONE) {
            ppv_frame_free(f);
            return rc;
        }
    }
    f->header[0] = e->action;
    f->header[1] = e->call_id;
    f->header[2] = e->chunk_index;
    f->header[3] = e->cache_epoch;
    f->header[5] = e->pp_envelope_version;
    return PPV_FAIL_NONE;
}

ppv_failure ppv_envelope_frame_unchecked(const ppv_envelope *e, ppv_frame *f, char *msg,
                                         size_t msglen) {
    memset(f, 0, sizeof *f);
    ppv_failure rc = PPV_FAIL_NONE;
    if (e->action == PPV_PP_INFER &&
        (rc = frame_payload(&envelope_desc, (void *)e, 1, e->do_kv_recompute, f, msg, msglen)) !=
            PPV_FAIL_NONE) {
        ppv_frame_free(f);
        return rc;
    }
    f->header[0] = e->action;
    f->header[1] = e->call_id;
    f->header[2] = e->chunk_index;
    f->header[3] = e->cache_epoch;
    f->header[5] = e->pp_envelope_version;
    return PPV_FAIL_NONE;
}

ppv_failure ppv_result_frame(const ppv_result *r, ppv_frame *f, char *msg, size_t msglen) {
    memset(f, 0, sizeof *f);
    char ids[160];
    snprintf(ids, sizeof ids, IDS_FMT, IDS(r));
    if (r->pp_result_version != PPV_PP_RESULT_VERSION)
        return failf(PPV_FAIL_VERSION, msg, msglen, "pp_result_version %" PRId64 " (%s)",
                     r->pp_result_version, ids);
    if (r->ok != 0 && r->ok != 1)
        return failf(PPV_FAIL_FIELD, msg, msglen, "ok is %d, not a boolean (%s)", r->ok, ids);
    ppv_failure rc;
    if ((rc = check_specs(&result_desc, (void *)r, ids, msg, msglen)) != PPV_FAIL_NONE ||
        (rc = frame_payload(&result_desc, (void *)r, r->ok, 0, f, msg, msglen)) != PPV_FAIL_NONE) {
        ppv_frame_free(f);
        return rc;
    }
    f->header[0] = PPV_PP_INFER; /* a result answers an INFER */
    f->header[1] = r->call_id;
    f->header[2] = r->chunk_index;
    f->header[3] = r->cache_epoch;
    f->header[5] = r->pp_result_version;
    return PPV_FAIL_NONE;
}

void ppv_frame_free(ppv_frame *f) {
    free(f->meta);
    memset(f, 0, sizeof *f);
}

/* ---- unframing ---------------------------------------------------------------------- */

/* Parses a whole decimal int64; 0 or -1. */
static int parse_i64(const char *s, int64_t *v) {
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (end == s || *end || errno) return -1;
    *v = x;
    return 0;
}

static void free_tensors(const message_desc *md, void *base) {
    for (int k = 0; k < md->ntensors; k++) {
        ppv_tensor *t = tensor_at(base, &md->tensors[k]);
        free(t->data);
        t->data = NULL;
    }
}

void ppv_envelope_free_tensors(ppv_envelope *e) {
    free_tensors(&envelope_desc, e);
}

void ppv_result_free_tensors(ppv_result *r) {
    free_tensors(&result_desc, r);
}

/* Applies one "tensor.KEY=DTYPE d0 d1 ..." line: a known key, the table's
 * dtype and rank, a bounded size; allocates the tensor (zeroed). */
static ppv_failure parse_spec(const message_desc *md, void *base, const char *key, const char *v,
                              const char *ids, uint32_t *seen_t, char *msg, size_t n) {
    int k = 0;
    while (k < md->ntensors && strcmp(md->tensors[k].name, key) != 0)
        k++;
    if (k == md->ntensors)
        return failf(PPV_FAIL_FIELD, msg, n, "unknown tensor '%s' in the %s's specs (%s)", key,
                     md->what, ids);
    if (*seen_t & (1u << k))
        return failf(PPV_FAIL_FIELD, msg, n, "tensor %s is specified twice (%s)", key, ids);
    *seen_t |= 1u << k;
    const tensor_desc *d = &md->tensors[k];
    ppv_tensor *t = tensor_at(base, d);
    char dt[16];
    int used = 0;
    if (sscanf(v, "%15s%n", dt, &used) != 1)
        return failf(PPV_FAIL_FIELD, msg, n, "tensor %s: no dtype (%s)", key, ids);
    int dtype = ppv_dtype_lookup(dt);
    if (dtype != (int)d->dtype)
        return failf(PPV_FAIL_FM07, msg, n, "tensor %s: dtype %s, the contract says %s (%s)", key,
                     dt, ppv_dtype_token(d->dtype), ids);
    t->dtype = dtype;
    t->rank = 0;
    const char *p = v + used;
    while (*p) {
        while (*p == ' ')
            p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long long x = strtoll(p, &end, 10);
        if (end == p || errno || x < 0 || (*end && *end != ' ') || t->rank == PPV_TENSOR_MAX_RANK)
            return failf(PPV_FAIL_FIELD, msg, n, "tensor %s: bad shape '%s' (%s)", key, v + used,
                         ids);
        t->dims[t->rank++] = x;
        p = end;
    }
    if (t->rank != d->rank)
        return failf(PPV_FAIL_FM07, msg, n, "tensor %s: %d dimensions, the contract says %d (%s)",
                     key, t->rank, d->rank, ids);
    double bytes = (double)(d->dtype == PPV_DTYPE_I64 ? 8 : 2);
    for (int j = 0; j < t->rank; j++)
        bytes *= (double)t->dims[j];
    if (bytes > (double)MAX_TENSOR_BYTES)
        return failf(PPV_FAIL_FM07, msg, n,
                     "tensor %s: %.0f bytes, more than a message may carry (%s)", key, bytes, ids);
    t->data = calloc(1, bytes > 0 ? (size_t)bytes : 1);
    if (!t->data) return failf(PPV_FAIL_FIELD, msg, n, "tensor %s: out of memory (%s)", key, ids);
    return PPV_FAIL_NONE;
}

/* The receiver's side of either message: header, then the metadata lines
 * into base, tensors allocated, listed in spec order. */
static ppv_failure unframe(const message_desc *md, const int64_t *header, const char *meta,
                           void *base, ppv_tensor **order, int *norder, char *msg, size_t n) {
    char ids[160];
    snprintf(ids, sizeof ids, "call_id %" PRId64 ", chunk_index %" PRId64 ", cache_epoch %" PRId64,
             header[1], header[2], header[3]);
    *norder = 0;
    int is_result = md == &result_desc;
    int version = is_result ? PPV_PP_RESULT_VERSION : PPV_PP_ENVELOPE_VERSION;
    if (header[5] != version)
        return failf(PPV_FAIL_VERSION, msg, n,
                     "%s version %" PRId64 ": this ppv reads version %d (%s)", md->what, header[5],
                     version, ids);
    if (header[0] < 0 || header[0] >= PPV_PP_ACTION_COUNT)
        return failf(PPV_FAIL_FIELD, msg, n, "action %" PRId64 " is not a PPAction (%s)", header[0],
                     ids);
    if (header[4] < 0 || header[4] > md->ntensors || header[6] < 0 || header[6] > (1 << 20))
        return failf(PPV_FAIL_FIELD, msg, n,
                     "header announces %" PRId64 " tensors and %" PRId64 " bytes of metadata (%s)",
                     header[4], header[6], ids);
    int payload = is_result || header[0] == PPV_PP_INFER;
    if (!payload) {
        if (header[4] || header[6])
            return failf(PPV_FAIL_FIELD, msg, n, "a %s header announces a payload (%s)",
                         ppv_pp_action_name(header[0]), ids);
        ppv_envelope *e = base;
        ppv_envelope_init(e);
        e->action = header[0];
        e->call_id = header[1];
        e->chunk_index = header[2];
        e->cache_epoch = header[3];
        e->pp_envelope_version = header[5];
        return PPV_FAIL_NONE;
    }
    if (!meta || strlen(meta) != (size_t)header[6])
        return failf(PPV_FAIL_FIELD, msg, n,
                     "metadata is not the %" PRId64 " bytes the header announces (%s)", header[6],
                     ids);
    uint64_t seen = 0;
    uint32_t seen_t = 0;
    ppv_failure rc = PPV_FAIL_NONE;
    const char *p = meta;
    char prev[700] = "";
    while (*p && rc == PPV_FAIL_NONE) {
        const char *nl = strchr(p, '\n');
        if (!nl) {
            rc = failf(PPV_FAIL_FIELD, msg, n, "metadata does not end with a newline (%s)", ids);
            break;
        }
        char line[700];
        size_t len = (size_t)(nl - p);
        if (len >= sizeof line) {
            rc = failf(PPV_FAIL_FIELD, msg, n, "a metadata line of %zu bytes (%s)", len, ids);
            break;
        }
        memcpy(line, p, len);
        line[len] = 0;
        p = nl + 1;
        char *eq = strchr(line, '=');
        if (!eq) {
            rc = failf(PPV_FAIL_FIELD, msg, n, "metadata line '%s' is not key=value (%s)", line,
                       ids);
            break;
        }
        *eq = 0;
        const char *key = line, *v = eq + 1;
        if (strcmp(key, prev) <= 0) {
            rc = failf(PPV_FAIL_FIELD, msg, n, "metadata key '%s' out of order or repeated (%s)",
                       key, ids);
            break;
        }
        memcpy(prev, key, strlen(key) + 1); /* shorter than line, so it fits */
        if (strncmp(key, "tensor.", 7) == 0) {
            rc = parse_spec(md, base, key + 7, v, ids, &seen_t, msg, n);
            continue;
        }
        int k = 0; /* the first byte first: most names differ there */
        while (k < md->nfields &&
               (md->fields[k].name[0] != key[0] || strcmp(md->fields[k].name, key) != 0))
            k++;
        if (k == md->nfields) {
            rc = failf(PPV_FAIL_FIELD, msg, n, "unknown field '%s' in the %s (%s)", key, md->what,
                       ids);
            break;
        }
        seen |= 1ull << k;
        const field_desc *d = &md->fields[k];
        int64_t iv = 0;
        char *end;
        switch (d->kind) {
        case KIND_INT:
            if (parse_i64(v, int_at(base, d)) < 0)
                rc = failf(PPV_FAIL_FIELD, msg, n, "%s='%s' is not an integer (%s)", key, v, ids);
            break;
        case KIND_BOOL:
            if (parse_i64(v, &iv) < 0 || (iv != 0 && iv != 1))
                rc = failf(PPV_FAIL_FIELD, msg, n, "%s='%s' is not 0 or 1 (%s)", key, v, ids);
            *bool_at(base, d) = (int)iv;
            break;
        case KIND_FLOAT:
            errno = 0;
            *float_at(base, d) = strtod(v, &end);
            if (end == v || *end || errno)
                rc = failf(PPV_FAIL_FIELD, msg, n, "%s='%s' is not a number (%s)", key, v, ids);
            break;
        case KIND_STR:
            if (strlen(v) >= 256)
                rc = failf(PPV_FAIL_FIELD, msg, n, "%s is longer than 255 bytes (%s)", key, ids);
            else
                snprintf(str_at(base, d), 256, "%s", v);
            break;
        }
    }
    int ok = 1;
    if (rc == PPV_FAIL_NONE && is_result) ok = ((ppv_result *)base)->ok;
    for (int k = 0; k < md->nfields && rc == PPV_FAIL_NONE; k++)
        if (travels(md->fields[k].when, is_result, ok, 0) && !(seen & (1ull << k)))
            rc = failf(PPV_FAIL_FIELD, msg, n, "field %s is missing from the %s (%s)",
                       md->fields[k].name, md->what, ids);
    /* the header is what the peer committed to: the metadata must agree */
    if (rc == PPV_FAIL_NONE) {
        int64_t want[4] = {header[1], header[2], header[3], header[5]};
        const char *names[4] = {"call_id", "chunk_index", "cache_epoch",
                                is_result ? "pp_result_version" : "pp_envelope_version"};
        for (int j = 0; j < 4 && rc == PPV_FAIL_NONE; j++)
            for (int k = 0; k < md->nfields; k++)
                if (strcmp(md->fields[k].name, names[j]) == 0 &&
                    *int_at(base, &md->fields[k]) != want[j])
                    rc = failf(PPV_FAIL_FIELD, msg, n,
                               "header says %s %" PRId64 ", metadata %" PRId64 " (%s)", names[j],
                               want[j], *int_at(base, &md->fields[k]), ids);
        if (!is_result && rc == PPV_FAIL_NONE && ((ppv_envelope *)base)->action != header[0])
            rc = failf(PPV_FAIL_FIELD, msg, n,
                       "header says action %" PRId64 ", metadata %" PRId64 " (%s)", header[0],
                       ((ppv_envelope *)base)->action, ids);
    }
    int nt = 0;
    for (int k = 0; k < md->ntensors; k++)
        nt += (seen_t >> k) & 1;
    if (rc == PPV_FAIL_NONE && nt != header[4])
        rc = failf(PPV_FAIL_FIELD, msg, n,
                   "header announces %" PRId64 " tensors, the specs list %d (%s)", header[4], nt,
                   ids);
    if (rc != PPV_FAIL_NONE) {
        free_tensors(md, base);
        return rc;
    }
    /* spec order is key order, which is the order of the metadata lines */
    for (p = meta; *p; p = strchr(p, '\n') + 1)
        if (strncmp(p, "tensor.", 7) == 0)
            for (int k = 0; k < md->ntensors; k++) {
                size_t kl = strlen(md->tensors[k].name);
                if (strncmp(p + 7, md->tensors[k].name, kl) == 0 && p[7 + kl] == '=')
                    order[(*norder)++] = tensor_at(base, &md->tensors[k]);
            }
    return PPV_FAIL_NONE;
}

ppv_failure ppv_envelope_unframe(const int64_t *header, const char *meta, ppv_envelope *e,
                                 ppv_tensor **order, int *norder, char *msg, size_t msglen) {
    memset(e, 0, sizeof *e);
    return unframe(&envelope_desc, header, meta, e, order, norder, msg, msglen);
}

ppv_failure ppv_result_unframe(const int64_t *header, const char *meta, ppv_result *r,
                               ppv_tensor **order, int *norder, char *msg, size_t msglen) {
    memset(r, 0, sizeof *r);
    return unframe(&result_desc, header, meta, r, order, norder, msg, msglen);
}
