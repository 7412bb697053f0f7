/* frame.c - the PP inference contract's wire framing: an envelope or a
 * result as header, metadata text and tensors in spec order, and back.
 * Everything here is generated from the field and tensor tables, and
 * framing does every check before it returns a header: a header on the
 * wire is a commitment the peer blocks on (anti-stranding).
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

/* Largest tensor a spec may announce: a receiver allocates from specs. */
#define MAX_TENSOR_BYTES ((size_t)1 << 32)

/* "00" to "99", two digits a step. */
static const char digit_pairs[201] = "00010203040506070809101112131415161718192021222324252627282930"
                                     "31323334353637383940414243444546474849505152535455565758596061"
                                     "62636465666768697071727374757677787980818283848586878889909192"
                                     "93949596979899";

/* Writes v in decimal at out (NUL-terminated); its length. The metadata
 * text is built once per message, so it avoids printf's cost: the digits
 * are counted, then written from the last, two a step. */
static size_t i64_text(int64_t v, char *out) {
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    size_t digits = 1;
    for (uint64_t t = 10; digits < 20 && u >= t; t *= 10)
        digits++; /* (t stops at 10^19, before it would wrap) */
    size_t len = (v < 0) + digits;
    char *p = out + len;
    *p = 0;
    while (u >= 100) {
        unsigned d = (unsigned)(u % 100);
        u /= 100;
        p -= 2;
        memcpy(p, digit_pairs + 2 * d, 2);
    }
    if (u >= 10) {
        p -= 2;
        memcpy(p, digit_pairs + 2 * u, 2);
    } else
        *--p = (char)('0' + u);
    if (v < 0) out[0] = '-';
    return len;
}

/* A message's keys in the order of the canonical text: its fields by name
 * and its tensors as "tensor.NAME", sorted once (byte order, as strcmp). */
typedef struct key_ref {
    char key[72];
    size_t len;
    int tensor; /* 1: md->tensors[index], 0: md->fields[index] */
    int index;
    int plain; /* an INT or BOOL field: its line is most often key=digits */
} key_ref;

typedef struct key_order {
    int n;
    key_ref keys[64];
    size_t bound; /* bytes the longest text can take, its NUL included */
    int ids[4];   /* fields call_id, chunk_index, cache_epoch, the version */
    uint64_t required[2]; /* the fields that must be there, by the result's ok */
} key_order;

static key_order env_order, res_order;
static pthread_once_t order_once = PTHREAD_ONCE_INIT;

static int by_key(const void *a, const void *b) {
    return strcmp(((const key_ref *)a)->key, ((const key_ref *)b)->key);
}

static int field_index(const message_desc *md, const char *name) {
    for (int k = 0; k < md->nfields; k++)
        if (strcmp(md->fields[k].name, name) == 0) return k;
    return -1;
}

static int travels(field_when when, int is_result, int ok, int recompute);

static void order_build(const message_desc *md, key_order *o) {
    o->n = 0;
    o->bound = 1;
    for (int k = 0; k < md->nfields; k++) {
        key_ref *r = &o->keys[o->n++];
        snprintf(r->key, sizeof r->key, "%s", md->fields[k].name);
        r->index = k;
        /* a string's 255 bytes, or a number's 24 characters at most */
        o->bound += strlen(r->key) + 2 + (md->fields[k].kind == KIND_STR ? 255 : 24);
    }
    for (int k = 0; k < md->ntensors; k++) {
        key_ref *r = &o->keys[o->n++];
        snprintf(r->key, sizeof r->key, "tensor.%s", md->tensors[k].name);
        r->tensor = 1;
        r->index = k;
        o->bound += strlen(r->key) + 2 + 16 + 21 * PPV_TENSOR_MAX_RANK;
    }
    qsort(o->keys, (size_t)o->n, sizeof *o->keys, by_key);
    for (int k = 0; k < o->n; k++) {
        key_ref *r = &o->keys[k];
        r->len = strlen(r->key);
        r->plain = !r->tensor && (md->fields[r->index].kind == KIND_INT ||
                                  md->fields[r->index].kind == KIND_BOOL);
    }
    int is_result = md == &pp_result_desc;
    for (int ok = 0; ok < 2; ok++) {
        o->required[ok] = 0;
        for (int k = 0; k < md->nfields; k++)
            if (travels(md->fields[k].when, is_result, ok, 0) &&
                md->fields[k].when != WHEN_OPTIONAL)
                o->required[ok] |= 1ull << k;
    }
    const char *names[4] = {"call_id", "chunk_index", "cache_epoch",
                            md == &pp_result_desc ? "pp_result_version" : "pp_envelope_version"};
    for (int j = 0; j < 4; j++)
        o->ids[j] = field_index(md, names[j]);
}

static void orders_build(void) {
    order_build(&pp_envelope_desc, &env_order);
    order_build(&pp_result_desc, &res_order);
}

/* Metadata buffers, all of the larger message's bound: a frame lives from
 * framing to sending, so a sender needs one or two at a time, and a
 * thread keeps two for the next frames. */
static _Thread_local char *spare_meta[2];

static size_t meta_cap(void) {
    return env_order.bound > res_order.bound ? env_order.bound : res_order.bound;
}

/* A thread's buffers are freed when it ends (see world.c's stacks). */
static pthread_key_t meta_key;
static pthread_once_t meta_once = PTHREAD_ONCE_INIT;
static _Thread_local int meta_key_set;

static void meta_free(void *unused) {
    (void)unused;
    for (int k = 0; k < 2; k++) {
        free(spare_meta[k]);
        spare_meta[k] = NULL;
    }
}

static void meta_key_make(void) {
    (void)pthread_key_create(&meta_key, meta_free);
}

static char *meta_take(void) {
    for (int k = 0; k < 2; k++)
        if (spare_meta[k]) {
            char *p = spare_meta[k];
            spare_meta[k] = NULL;
            return p;
        }
    return malloc(meta_cap());
}

static void meta_give(char *p) {
    if (p && !meta_key_set) { /* any non-NULL value: meta_free runs at exit */
        pthread_once(&meta_once, meta_key_make);
        meta_key_set = pthread_setspecific(meta_key, &meta_once) == 0;
    }
    for (int k = 0; p && k < 2; k++)
        if (!spare_meta[k]) {
            spare_meta[k] = p;
            return;
        }
    free(p);
}

static const key_order *order_of(const message_desc *md) {
    pthread_once(&order_once, orders_build);
    return md == &pp_result_desc ? &res_order : &env_order;
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
    case WHEN_OPTIONAL:
        return 1; /* when not 0 (frame_payload); never missing */
    }
    return 0;
}

/* The texts of floats written last, by their bits: the same few values
 * (a bias, a noise scale) are written with every chunk, and printf's exact
 * conversion is slow. Per thread, direct-mapped. */
static _Thread_local struct {
    uint64_t bits;
    size_t len; /* 0: empty */
    char text[32];
} float_memo[8];

#ifdef __SIZEOF_INT128__
/* "%.17g" of v, exactly as printf writes it, for a v of magnitude 1e-3 to
 * 1e15 that is not a whole number (the measured times a result carries,
 * a new value every chunk): v = m * 2^e, so v * 10^p = m * 10^p / 2^-e,
 * with m * 10^p below 2^117 for p <= 19, rounded to the nearest (ties to
 * even, as printf) at the 17th significant digit; then fixed notation,
 * trailing zeros dropped. 0 when v is outside that range (printf then). */
static size_t float_text_exact(double v, char *out) {
    static const uint64_t pow10[20] = {1ULL,
                                       10ULL,
                                       100ULL,
                                       1000ULL,
                                       10000ULL,
                                       100000ULL,
                                       1000000ULL,
                                       10000000ULL,
                                       100000000ULL,
                                       1000000000ULL,
                                       10000000000ULL,
                                       100000000000ULL,
                                       1000000000000ULL,
                                       10000000000000ULL,
                                       100000000000000ULL,
                                       1000000000000000ULL,
                                       10000000000000000ULL,
                                       100000000000000000ULL,
                                       1000000000000000000ULL,
                                       10000000000000000000ULL};
    double a = fabs(v);
    if (!(a >= 1e-3 && a < 1e15)) return 0;
    uint64_t bits;
    memcpy(&bits, &a, sizeof bits);
    int biased = (int)(bits >> 52); /* a is normal: its exponent field is not 0 */
    uint64_t m = (bits & ((1ULL << 52) - 1)) | 1ULL << 52;
    int shift = 1075 - biased; /* a = m / 2^shift */
    if (shift <= 0 || shift > 116) return 0;
    /* the decimal exponent: a is in [2^n, 2^(n+1)), so floor(n log10 2)
     * (1233 / 4096 for log10 2), or one more; corrected below */
    int n = biased - 1023;
    int x = n >= 0 ? (n * 1233) >> 12 : -((-n * 1233 + 4095) >> 12);
    uint64_t digits = 0;
    for (int tries = 0; tries < 3; tries++) {
        int p = 16 - x;
        if (p < 0 || p > 19) return 0;
        unsigned __int128 prod = (unsigned __int128)m * pow10[p];
        unsigned __int128 q = prod >> shift, r = prod - (q << shift);
        unsigned __int128 half = (unsigned __int128)1 << (shift - 1);
        if (r > half || (r == half && (q & 1))) q++;
        if (q >= pow10[17]) { /* 18 digits: the exponent is one more */
            x++;
            continue;
        }
        if (q < pow10[16]) { /* 16 digits: one less */
            x--;
            continue;
        }
        digits = (uint64_t)q;
        break;
    }
    if (!digits || x < -4 || x >= 17) return 0; /* %g's exponent form: printf's */
    char d[17];
    for (int i = 16; i >= 0; i--, digits /= 10) d[i] = (char)('0' + digits % 10);
    int last = 16; /* the last significant digit kept (%g drops trailing zeros) */
    while (last > 0 && d[last] == '0') last--;
    size_t len = 0;
    if (v < 0) out[len++] = '-';
    if (x < 0) { /* 0.000ddd */
        out[len++] = '0';
        out[len++] = '.';
        for (int i = 0; i < -x - 1; i++) out[len++] = '0';
        for (int i = 0; i <= last; i++) out[len++] = d[i];
    } else { /* ddd.ddd */
        for (int i = 0; i <= x; i++) out[len++] = d[i];
        if (last > x) {
            out[len++] = '.';
            for (int i = x + 1; i <= last; i++) out[len++] = d[i];
        }
    }
    out[len] = '\0';
    return len;
}
#endif

/* Writes v as "%.17g" does (at most 24 characters and a NUL); integral
 * values below 10^15, the common case, and the measured times without
 * printf. */
static size_t float_text(double v, char *out) {
    if (fabs(v) < 1e15 && v == (double)(int64_t)v && !(v == 0 && signbit(v)))
        return i64_text((int64_t)v, out);
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    unsigned slot = (unsigned)((bits ^ bits >> 29 ^ bits >> 47) & 7);
    if (float_memo[slot].len && float_memo[slot].bits == bits) {
        memcpy(out, float_memo[slot].text, float_memo[slot].len + 1);
        return float_memo[slot].len;
    }
    size_t len = 0;
#ifdef __SIZEOF_INT128__
    len = float_text_exact(v, out);
#endif
    if (!len) len = (size_t)snprintf(out, 32, "%.17g", v);
    float_memo[slot].bits = bits;
    float_memo[slot].len = len;
    memcpy(float_memo[slot].text, out, len + 1);
    return len;
}

/* The reverse: texts read last and their values (strtod's exact
 * conversion is as slow). 0, or -1 when v is not a number. */
static _Thread_local struct {
    size_t len; /* 0: empty */
    char text[32];
    double value;
} parse_memo[8];

#ifdef __SIZEOF_INT128__
/* v's value, as strtod reads it, for the two common texts: a whole number
 * of at most 15 digits (exact as a double), and the fixed notation
 * float_text_exact writes (the measured times, a new text each chunk): a
 * candidate from the digits, and the doubles either side of it, kept when
 * float_text_exact writes one of them as v (17 significant digits name
 * one double). 0, or -1 for any other text (strtod then). Keeps strtod's
 * larger code out of the common path. */
static int parse_fixed(const char *v, size_t len, double *out) {
    static const double pow10[] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                   1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                   1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    if (len >= 32) return -1;
    const char *p = v + (*v == '-');
    uint64_t digits = 0;
    int n = 0, frac = -1; /* frac: the digits after the point */
    for (; *p; p++) {
        if (*p >= '0' && *p <= '9') {
            if (++n > 19) return -1;
            digits = digits * 10 + (uint64_t)(*p - '0');
            frac += frac >= 0;
        } else if (*p == '.' && frac < 0)
            frac = 0;
        else
            return -1;
    }
    if (frac < 0 && n >= 1 && n <= 15) { /* a whole number below 2^53: exact */
        *out = *v == '-' ? -(double)digits : (double)digits;
        return 0;
    }
    if (frac <= 0 || frac > 22 || !digits) return -1;
    double c = (double)digits / pow10[frac]; /* within an ulp or two of v */
    uint64_t bits;
    memcpy(&bits, &c, sizeof bits);
    for (int k = 0; k < 3; k++) { /* c, the next double up, the next down */
        uint64_t b = k == 0 ? bits : k == 1 ? bits + 1 : bits - 1;
        double x;
        memcpy(&x, &b, sizeof x);
        if (*v == '-') x = -x;
        char text[32];
        size_t tl = float_text_exact(x, text);
        if (tl == len && memcmp(text, v, len) == 0) {
            *out = x;
            return 0;
        }
    }
    return -1;
}
#endif

static int parse_double(const char *v, double *out) {
    size_t len = strlen(v);
    unsigned slot = (unsigned)(len + (unsigned char)v[len ? len - 1 : 0]) & 7;
    if (len && len < sizeof parse_memo[slot].text && parse_memo[slot].len == len &&
        memcmp(parse_memo[slot].text, v, len) == 0) {
        *out = parse_memo[slot].value;
        return 0;
    }
    double x;
#ifdef __SIZEOF_INT128__
    if (parse_fixed(v, len, &x) != 0)
#endif
    {
        char *end;
        errno = 0;
        x = strtod(v, &end);
        *out = x;
        /* ERANGE: an overflow, or an underflow; a subnormal result is
         * exact enough to keep (the writer wrote it), one rounded to zero
         * is not */
        if (end == v || *end || (errno && !(errno == ERANGE && isfinite(x) && x != 0))) return -1;
    }
    *out = x;
    if (len < sizeof parse_memo[slot].text) {
        parse_memo[slot].len = len;
        memcpy(parse_memo[slot].text, v, len);
        parse_memo[slot].value = x;
    }
    return 0;
}

/* Serialises the fields and tensor specs of msg (an envelope or a result at
 * base) as canonical text: lines sorted by key, written in the order built
 * once. Fills f's meta, tensors (spec order: key order) and header words 4
 * and 6. Returns PPV_FAIL_NONE, or FM-04 when a value cannot be written (a
 * string field without its NUL, or out of memory). */
static ppv_failure frame_payload(const message_desc *md, void *base, int ok, int recompute,
                                 ppv_frame *f, char *msg, size_t n) {
    const key_order *ko = order_of(md);
    int is_result = md == &pp_result_desc;
    f->ntensors = 0;
    for (int k = 0; k < md->nfields; k++) { /* nothing is written before every value can be */
        const field_desc *d = &md->fields[k];
        if (d->kind != KIND_STR || !travels(d->when, is_result, ok, recompute)) continue;
        const char *s = str_at(base, d);
        if (!memchr(s, 0, 256) || strchr(s, '\n'))
            return pp_failf(PPV_FAIL_FM04, msg, n, "%s cannot be serialised: %s", d->name,
                         memchr(s, 0, 256) ? "it holds a newline" : "no terminating NUL");
    }
    char *out = f->meta = meta_take();
    if (!out) return pp_failf(PPV_FAIL_FM04, msg, n, "out of memory");
    size_t at = 0;
    for (int i = 0; i < ko->n; i++) {
        const key_ref *r = &ko->keys[i];
        const ppv_tensor *t = NULL;
        const field_desc *d = NULL;
        if (r->tensor) {
            t = tensor_at(base, &md->tensors[r->index]);
            if (!t->data) continue;
        } else {
            d = &md->fields[r->index];
            if (!travels(d->when, is_result, ok, recompute)) continue;
            if (d->when == WHEN_OPTIONAL && *int_at(base, d) == 0) continue;
        }
        size_t kl = r->len;
        memcpy(out + at, r->key, kl);
        at += kl;
        out[at++] = '=';
        if (t) {
            const char *tok = ppv_dtype_token((ppv_dtype)t->dtype);
            size_t len = strlen(tok);
            memcpy(out + at, tok, len);
            at += len;
            for (int j = 0; j < t->rank && j < PPV_TENSOR_MAX_RANK; j++) {
                out[at++] = ' ';
                at += i64_text(t->dims[j], out + at);
            }
            f->tensors[f->ntensors++] = t;
        } else
            switch (d->kind) {
            case KIND_INT:
                at += i64_text(*int_at(base, d), out + at);
                break;
            case KIND_BOOL:
                at += i64_text(*bool_at(base, d), out + at);
                break;
            case KIND_FLOAT:
                at += float_text(*float_at(base, d), out + at);
                break;
            case KIND_STR: {
                const char *s = str_at(base, d);
                size_t len = strlen(s);
                memcpy(out + at, s, len);
                at += len;
                break;
            }
            }
        out[at++] = '\n';
    }
    out[at] = 0;
    f->header[4] = f->ntensors;
    f->header[6] = (int64_t)at;
    return PPV_FAIL_NONE;
}

/* dtype check of every tensor that travels, per the tables (FM-07: a late
 * unsupported dtype would strand the receiver). */
static ppv_failure check_specs(const message_desc *md, void *base, const int64_t *ids, char *msg,
                               size_t n) {
    char idsbuf[160];
    for (int k = 0; k < md->ntensors; k++) {
        const tensor_desc *d = &md->tensors[k];
        const ppv_tensor *t = tensor_at(base, d);
        if (!t->data) continue;
        if (t->dtype != (int)d->dtype || t->rank != d->rank)
            return pp_failf(PPV_FAIL_FM07, msg, n,
                         "%s: %s of %d dimensions, the contract says %s of %d (%s)", d->name,
                         ppv_dtype_token((ppv_dtype)t->dtype), t->rank, ppv_dtype_token(d->dtype),
                         d->rank, IDS_TEXT(ids));
        for (int j = 0; j < t->rank; j++)
            if (t->dims[j] < 0)
                return pp_failf(PPV_FAIL_FM07, msg, n, "%s: dimension %d is negative (%s)", d->name, j,
                             IDS_TEXT(ids));
        if (ppv_tensor_bytes(t) > MAX_TENSOR_BYTES)
            return pp_failf(PPV_FAIL_FM07, msg, n, "%s: %zu bytes, more than a message may carry (%s)",
                         d->name, ppv_tensor_bytes(t), IDS_TEXT(ids));
    }
    return PPV_FAIL_NONE;
}

ppv_failure ppv_envelope_frame(const ppv_envelope *e, const ppv_contract_order *o, ppv_frame *f,
                               char *msg, size_t msglen) {
    memset(f, 0, sizeof *f);
    ppv_failure rc = ppv_envelope_check(e, o, msg, msglen);
    if (rc != PPV_FAIL_NONE) return rc;
    int64_t ids[3] = {IDS(e)};
    if (e->action == PPV_PP_INFER) {
        if ((rc = check_specs(&pp_envelope_desc, (void *)e, ids, msg, msglen)) != PPV_FAIL_NONE ||
            (rc = frame_payload(&pp_envelope_desc, (void *)e, 1, e->do_kv_recompute, f, msg,
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
        (rc = frame_payload(&pp_envelope_desc, (void *)e, 1, e->do_kv_recompute, f, msg, msglen)) !=
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
    int64_t ids[3] = {IDS(r)};
    char idsbuf[160];
    if (r->pp_result_version != PPV_PP_RESULT_VERSION)
        return pp_failf(PPV_FAIL_VERSION, msg, msglen, "pp_result_version %" PRId64 " (%s)",
                     r->pp_result_version, IDS_TEXT(ids));
    if (r->ok != 0 && r->ok != 1)
        return pp_failf(PPV_FAIL_FIELD, msg, msglen, "ok is %d, not a boolean (%s)", r->ok,
                     IDS_TEXT(ids));
    ppv_failure rc;
    if ((rc = check_specs(&pp_result_desc, (void *)r, ids, msg, msglen)) != PPV_FAIL_NONE ||
        (rc = frame_payload(&pp_result_desc, (void *)r, r->ok, 0, f, msg, msglen)) != PPV_FAIL_NONE) {
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

/* The digest's definition over a text without the digest's line and the
 * tensors in spec order. */
static uint64_t digest_of(const char *text, size_t len, const ppv_tensor *const *t, int n) {
    uint64_t h = (0xcbf29ce484222325ULL ^ ppv_digest_words(text, len)) * 0x100000001b3ULL;
    for (int k = 0; k < n; k++)
        h = (h ^ ppv_digest_words(t[k]->data, ppv_tensor_bytes(t[k]))) * 0x100000001b3ULL;
    return h ? h : 1;
}

static const char digest_key[] = "envelope_digest_i64=";

/* Where text's digest line starts (len: its length with the newline), or
 * NULL when it has none. */
static const char *digest_line(const char *text, size_t n, size_t *len) {
    size_t kl = sizeof digest_key - 1;
    for (const char *p = text; p && p + kl <= text + n;) {
        if (memcmp(p, digest_key, kl) == 0) {
            const char *nl = memchr(p, '\n', (size_t)(text + n - p));
            *len = nl ? (size_t)(nl + 1 - p) : (size_t)(text + n - p);
            return p;
        }
        const char *nl = memchr(p, '\n', (size_t)(text + n - p));
        p = nl ? nl + 1 : NULL;
    }
    return NULL;
}

uint64_t ppv_envelope_digest(const ppv_envelope *e) {
    if (e->action != PPV_PP_INFER) return 0;
    ppv_envelope bare = *e; /* its tensors are e's, only read */
    bare.envelope_digest_i64 = 0;
    ppv_frame f;
    char msg[256];
    if (ppv_envelope_frame_unchecked(&bare, &f, msg, sizeof msg) != PPV_FAIL_NONE) return 0;
    uint64_t h = digest_of(f.meta, (size_t)f.header[6], (const ppv_tensor *const *)f.tensors,
                           f.ntensors);
    ppv_frame_free(&f);
    return h;
}

uint64_t pp_envelope_digest_text(const char *meta, size_t n, const ppv_tensor *const *tensors,
                                 int ntensors) {
    size_t len = 0;
    const char *line = digest_line(meta, n, &len);
    if (!line) return digest_of(meta, n, tensors, ntensors);
    char *bare = meta_take();
    if (!bare) return 0;
    size_t before = (size_t)(line - meta);
    memcpy(bare, meta, before);
    memcpy(bare + before, line + len, n - before - len);
    uint64_t h = digest_of(bare, n - len, tensors, ntensors);
    meta_give(bare);
    return h;
}

int pp_frame_seal(ppv_frame *f, int64_t *digest) {
    size_t n = (size_t)f->header[6];
    uint64_t h = digest_of(f->meta, n, (const ppv_tensor *const *)f->tensors, f->ntensors);
    /* the line goes before the first key that sorts after it (the text's
     * lines are in key order) */
    char line[48];
    int ll = snprintf(line, sizeof line, "%s", digest_key);
    ll += (int)i64_text((int64_t)h, line + ll);
    line[ll++] = '\n';
    const char *p = f->meta, *end = f->meta + n;
    while (p < end) {
        const char *eq = memchr(p, '=', (size_t)(end - p));
        size_t kl = eq ? (size_t)(eq - p) : (size_t)(end - p);
        int c = memcmp(p, digest_key, kl < sizeof digest_key - 2 ? kl : sizeof digest_key - 2);
        if (c > 0 || (c == 0 && kl > sizeof digest_key - 2)) break;
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        p = nl ? nl + 1 : end;
    }
    if (n + (size_t)ll + 1 > meta_cap()) return -1;
    size_t at = (size_t)(p - f->meta);
    memmove(f->meta + at + ll, f->meta + at, n - at + 1); /* the NUL too */
    memcpy(f->meta + at, line, (size_t)ll);
    f->header[6] = (int64_t)(n + (size_t)ll);
    *digest = (int64_t)h;
    return 0;
}

void ppv_frame_free(ppv_frame *f) {
    meta_give(f->meta);
    memset(f, 0, sizeof *f);
}

/* ---- unframing ---------------------------------------------------------------------- */

/* Parses a whole decimal int64; 0 or -1. */
static int parse_i64(const char *s, int64_t *v) {
    /* plain decimal of at most 18 digits, the common case, without strtoll
     * (which accepts the same and more: spaces, '+') */
    const char *d = s + (*s == '-');
    size_t len = 0;
    int64_t u = 0;
    while (d[len] >= '0' && d[len] <= '9' && len < 18)
        u = u * 10 + (d[len++] - '0');
    if (len && !d[len]) {
        *v = *s == '-' ? -u : u;
        return 0;
    }
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (end == s || *end || errno) return -1;
    *v = x;
    return 0;
}

/* Tensor data blocks a thread keeps for the next messages: a pipeline run
 * receives and frees a few tensors of the same few sizes every chunk, and
 * glibc's allocator takes its slow path for blocks of this size. Blocks
 * are plain malloc blocks, keyed by malloc_usable_size, so any of them
 * may be freed with free() and any malloc block given back; a block
 * taken is zeroed, as calloc's. Freed when the thread ends. */
enum { SPARE_BLOCKS = 16 };
static _Thread_local struct {
    void *p[SPARE_BLOCKS];
    size_t size[SPARE_BLOCKS];
    int n, key_set;
} spare_blocks;
static pthread_key_t blocks_key;
static pthread_once_t blocks_once = PTHREAD_ONCE_INIT;

static void blocks_free(void *unused) {
    (void)unused;
    for (int k = 0; k < spare_blocks.n; k++)
        free(spare_blocks.p[k]);
    spare_blocks.n = 0;
}

static void blocks_key_make(void) {
    (void)pthread_key_create(&blocks_key, blocks_free);
}

void *ppv_block_take(size_t n) {
#ifdef __GLIBC__
    for (int k = spare_blocks.n - 1; k >= 0; k--)
        if (spare_blocks.size[k] >= n && spare_blocks.size[k] <= 2 * n + 64) {
            void *p = spare_blocks.p[k];
            spare_blocks.n--;
            spare_blocks.p[k] = spare_blocks.p[spare_blocks.n];
            spare_blocks.size[k] = spare_blocks.size[spare_blocks.n];
            return memset(p, 0, n);
        }
#endif
    return calloc(n ? n : 1, 1);
}

void ppv_block_give(void *p) {
#ifdef __GLIBC__
    if (p && !spare_blocks.key_set) { /* any non-NULL value: blocks_free runs at exit */
        pthread_once(&blocks_once, blocks_key_make);
        spare_blocks.key_set = pthread_setspecific(blocks_key, &blocks_once) == 0;
    }
    if (p && spare_blocks.n < SPARE_BLOCKS) {
        spare_blocks.p[spare_blocks.n] = p;
        spare_blocks.size[spare_blocks.n++] = malloc_usable_size(p);
        return;
    }
#endif
    free(p);
}

static void free_tensors(const message_desc *md, void *base) {
    for (int k = 0; k < md->ntensors; k++) {
        ppv_tensor *t = tensor_at(base, &md->tensors[k]);
        ppv_block_give(t->data);
        t->data = NULL;
    }
}

void ppv_envelope_free_tensors(ppv_envelope *e) {
    free_tensors(&pp_envelope_desc, e);
}

void ppv_result_free_tensors(ppv_result *r) {
    free_tensors(&pp_result_desc, r);
}

/* Applies one "tensor.KEY=DTYPE d0 d1 ..." line (v NUL-terminated) to
 * tensor k of md: the table's dtype and rank, a bounded size; allocates the
 * tensor (zeroed). ids: the header's three. */
static ppv_failure parse_spec(const message_desc *md, void *base, int k, const char *v,
                              const int64_t *ids, char *msg, size_t n) {
    char idsbuf[160];
    const tensor_desc *d = &md->tensors[k];
    const char *key = d->name;
    ppv_tensor *t = tensor_at(base, d);
    /* the dtype: the first word, at most 15 bytes of it (as "%15s") */
    char dt[16];
    const char *p = v;
    while (isspace((unsigned char)*p))
        p++;
    size_t dl = 0;
    while (p[dl] && !isspace((unsigned char)p[dl]) && dl < 15)
        dl++;
    if (!dl) return pp_failf(PPV_FAIL_FIELD, msg, n, "tensor %s: no dtype (%s)", key, IDS_TEXT(ids));
    memcpy(dt, p, dl);
    dt[dl] = 0;
    const char *dims = p + dl;
    int dtype = strcmp(dt, ppv_dtype_token(d->dtype)) == 0 ? (int)d->dtype /* the usual */
                                                          : ppv_dtype_lookup(dt);
    if (dtype != (int)d->dtype)
        return pp_failf(PPV_FAIL_FM07, msg, n, "tensor %s: dtype %s, the contract says %s (%s)", key,
                     dt, ppv_dtype_token(d->dtype), IDS_TEXT(ids));
    t->dtype = dtype;
    t->rank = 0;
    p = dims;
    while (*p) {
        while (*p == ' ')
            p++;
        if (!*p) break;
        char *end;
        long long x = 0;
        size_t len = 0;
        while (p[len] >= '0' && p[len] <= '9' && len < 18) /* plain digits: no strtoll */
            x = x * 10 + (p[len++] - '0');
        if (len && (!p[len] || p[len] == ' '))
            end = (char *)p + len;
        else {
            errno = 0;
            x = strtoll(p, &end, 10);
            if (errno) end = (char *)p;
        }
        if (end == p || x < 0 || (*end && *end != ' ') || t->rank == PPV_TENSOR_MAX_RANK)
            return pp_failf(PPV_FAIL_FIELD, msg, n, "tensor %s: bad shape '%s' (%s)", key, dims,
                         IDS_TEXT(ids));
        t->dims[t->rank++] = x;
        p = end;
    }
    if (t->rank != d->rank)
        return pp_failf(PPV_FAIL_FM07, msg, n, "tensor %s: %d dimensions, the contract says %d (%s)",
                     key, t->rank, d->rank, IDS_TEXT(ids));
    double bytes = (double)(d->dtype == PPV_DTYPE_I64 ? 8 : 2);
    for (int j = 0; j < t->rank; j++)
        bytes *= (double)t->dims[j];
    if (bytes > (double)MAX_TENSOR_BYTES)
        return pp_failf(PPV_FAIL_FM07, msg, n,
                     "tensor %s: %.0f bytes, more than a message may carry (%s)", key, bytes,
                     IDS_TEXT(ids));
    t->data = ppv_block_take(bytes > 0 ? (size_t)bytes : 1);
    if (!t->data)
        return pp_failf(PPV_FAIL_FIELD, msg, n, "tensor %s: out of memory (%s)", key, IDS_TEXT(ids));
    return PPV_FAIL_NONE;
}

/* strcmp of a (al bytes) and b (bl bytes), neither holding a NUL. */
static inline int keycmp(const char *a, size_t al, const char *b, size_t bl) {
    if (al && bl && a[0] != b[0]) /* most keys differ in their first byte */
        return (unsigned char)a[0] < (unsigned char)b[0] ? -1 : 1;
    int c = memcmp(a, b, al < bl ? al : bl);
    return c ? c : (al > bl) - (al < bl);
}

/* The plain decimal integer that starts at v (an optional '-', then 1 to
 * 19 digits, within int64_t: a digest's 19 included), read up to the
 * first byte that is no digit or to stop: where it ends, the value in
 * *out; NULL when there is none (which parse_i64 then judges). */
static inline const char *scan_i64(const char *v, const char *stop, int64_t *out) {
    int neg = v < stop && *v == '-';
    const char *digits = v + neg, *q = digits;
    uint64_t u = 0;
    while (q < stop && *q >= '0' && *q <= '9' && q - digits < 20)
        u = u * 10 + (uint64_t)(*q++ - '0'); /* 19 digits fit in 64 bits */
    if (q == digits || q - digits > 19 || u > (uint64_t)INT64_MAX + (uint64_t)neg)
        return NULL; /* none, too long, or out of range */
    *out = neg ? (int64_t)(0 - u) : (int64_t)u;
    return q;
}

/* v's vl bytes as a plain integer (scan_i64) into *out; 0, or -1 when
 * they are anything else. */
static inline int plain_i64(const char *v, size_t vl, int64_t *out) {
    return scan_i64(v, v + vl, out) == v + vl ? 0 : -1;
}

/* When the line at p (text ending at stop) is kr's key, '=', then a
 * plain integer (scan_i64) and '\n': where its newline is, the value in
 * *out; else NULL. The key is compared a word at a time (the last word
 * overlapping the one before): it lies before the '=' that stop - p >
 * len leaves room for. */
static inline const char *plain_line(const key_ref *kr, const char *p, const char *stop,
                                     int64_t *out) {
    size_t kl = kr->len;
    if (!kr->plain || (size_t)(stop - p) <= kl + 1 || p[kl] != '=') return NULL;
    uint64_t a, b;
    if (kl >= 8) {
        for (size_t j = 0; j + 8 < kl; j += 8) {
            memcpy(&a, p + j, 8);
            memcpy(&b, kr->key + j, 8);
            if (a != b) return NULL;
        }
        memcpy(&a, p + kl - 8, 8);
        memcpy(&b, kr->key + kl - 8, 8);
        if (a != b) return NULL;
    } else if (memcmp(p, kr->key, kl) != 0)
        return NULL;
    const char *q = scan_i64(p + kl + 1, stop, out);
    return q && q < stop && *q == '\n' ? q : NULL;
}

/* Applies the value v (NUL-terminated) of field d. */
static ppv_failure parse_field(const field_desc *d, void *base, const char *v, const int64_t *ids,
                               char *msg, size_t n) {
    char idsbuf[160];
    const char *key = d->name;
    int64_t iv = 0;
    switch (d->kind) {
    case KIND_INT:
        if (parse_i64(v, int_at(base, d)) < 0)
            return pp_failf(PPV_FAIL_FIELD, msg, n, "%s='%s' is not an integer (%s)", key, v,
                         IDS_TEXT(ids));
        break;
    case KIND_BOOL:
        if (parse_i64(v, &iv) < 0 || (iv != 0 && iv != 1)) {
            *bool_at(base, d) = (int)iv;
            return pp_failf(PPV_FAIL_FIELD, msg, n, "%s='%s' is not 0 or 1 (%s)", key, v,
                         IDS_TEXT(ids));
        }
        *bool_at(base, d) = (int)iv;
        break;
    case KIND_FLOAT:
        if (parse_double(v, float_at(base, d)) < 0)
            return pp_failf(PPV_FAIL_FIELD, msg, n, "%s='%s' is not a number (%s)", key, v,
                         IDS_TEXT(ids));
        break;
    case KIND_STR:
        if (strlen(v) >= 256)
            return pp_failf(PPV_FAIL_FIELD, msg, n, "%s is longer than 255 bytes (%s)", key,
                         IDS_TEXT(ids));
        memcpy(str_at(base, d), v, strlen(v) + 1);
        break;
    }
    return PPV_FAIL_NONE;
}

/* The receiver's side of either message: header, then the metadata lines
 * into base, tensors allocated, listed in spec order. Lines are matched
 * against the keys in text order (key_order), so each is found by walking
 * forward, never by a search. */
static ppv_failure unframe(const message_desc *md, const int64_t *header, const char *meta,
                           void *base, ppv_tensor **order, int *norder, char *msg, size_t n) {
    char idsbuf[160];
    const int64_t *ids = header + 1;
    *norder = 0;
    int is_result = md == &pp_result_desc;
    int version = is_result ? PPV_PP_RESULT_VERSION : PPV_PP_ENVELOPE_VERSION;
    if (header[5] != version)
        return pp_failf(PPV_FAIL_VERSION, msg, n,
                     "%s version %" PRId64 ": this ppv reads version %d (%s)", md->what, header[5],
                     version, IDS_TEXT(ids));
    if (header[0] < 0 || header[0] >= PPV_PP_ACTION_COUNT)
        return pp_failf(PPV_FAIL_FIELD, msg, n, "action %" PRId64 " is not a PPAction (%s)", header[0],
                     IDS_TEXT(ids));
    if (header[4] < 0 || header[4] > md->ntensors || header[6] < 0 || header[6] > (1 << 20))
        return pp_failf(PPV_FAIL_FIELD, msg, n,
                     "header announces %" PRId64 " tensors and %" PRId64 " bytes of metadata (%s)",
                     header[4], header[6], IDS_TEXT(ids));
    int payload = is_result || header[0] == PPV_PP_INFER;
    if (!payload) {
        if (header[4] || header[6])
            return pp_failf(PPV_FAIL_FIELD, msg, n, "a %s header announces a payload (%s)",
                         ppv_pp_action_name(header[0]), IDS_TEXT(ids));
        ppv_envelope *e = base;
        ppv_envelope_init(e);
        e->action = header[0];
        e->call_id = header[1];
        e->chunk_index = header[2];
        e->cache_epoch = header[3];
        e->pp_envelope_version = header[5];
        return PPV_FAIL_NONE;
    }
    size_t mlen = (size_t)header[6];
    if (!meta || memchr(meta, 0, mlen) || meta[mlen])
        return pp_failf(PPV_FAIL_FIELD, msg, n,
                     "metadata is not the %" PRId64 " bytes the header announces (%s)", header[6],
                     IDS_TEXT(ids));
    const key_order *ko = order_of(md);
    uint64_t seen = 0;
    ppv_tensor *in_order[PPV_FRAME_MAX_TENSORS];
    int nin = 0, next = 0; /* next: the first key of ko the next line may be */
    ppv_failure rc = PPV_FAIL_NONE;
    const char *p = meta, *stop = meta + mlen, *prev = "";
    size_t prevlen = 0;
    while (p < stop && rc == PPV_FAIL_NONE) {
        /* the common line first: the next key, a plain integer, '\n' */
        int64_t iv;
        const char *after = next < ko->n ? plain_line(&ko->keys[next], p, stop, &iv) : NULL;
        if (after) {
            const key_ref *kr = &ko->keys[next++];
            const field_desc *d = &md->fields[kr->index];
            if (d->kind == KIND_INT || iv == 0 || iv == 1) {
                if (d->kind == KIND_INT)
                    *int_at(base, d) = iv;
                else
                    *bool_at(base, d) = (int)iv;
                seen |= 1ull << kr->index;
                prev = p;
                prevlen = kr->len;
                p = after + 1;
                continue;
            }
            next--; /* not plain after all: the line is read the long way */
        }
        const char *nl = memchr(p, '\n', (size_t)(stop - p));
        if (!nl) {
            rc = pp_failf(PPV_FAIL_FIELD, msg, n, "metadata does not end with a newline (%s)",
                       IDS_TEXT(ids));
            break;
        }
        size_t len = (size_t)(nl - p);
        if (len >= 700) {
            rc = pp_failf(PPV_FAIL_FIELD, msg, n, "a metadata line of %zu bytes (%s)", len,
                       IDS_TEXT(ids));
            break;
        }
        const char *line = p, *eq = NULL;
        p = nl + 1;
        /* the line is most often one of the next few keys, then '=': the
         * keys between are smaller (sorted), so they are passed */
        int c = 1;
        for (int j = next; j < next + 3 && j < ko->n; j++) {
            const key_ref *kr = &ko->keys[j];
            if (kr->len < len && line[kr->len] == '=' && memcmp(kr->key, line, kr->len) == 0) {
                eq = line + kr->len;
                next = j;
                c = 0;
                break;
            }
        }
        if (!eq && !(eq = memchr(line, '=', len))) {
            rc = pp_failf(PPV_FAIL_FIELD, msg, n, "metadata line '%.*s' is not key=value (%s)",
                       (int)len, line, IDS_TEXT(ids));
            break;
        }
        size_t kl = (size_t)(eq - line);
        while (c != 0 && next < ko->n) {
            const key_ref *kr = &ko->keys[next];
            if (kr->len == kl && memcmp(kr->key, line, kl) == 0) {
                c = 0;
                break;
            }
            if ((c = keycmp(kr->key, kr->len, line, kl)) > 0) break;
            next++;
        }
        /* a key found at or after next follows the previous line's; one not
         * found may be out of order, which is said first */
        const key_ref *r = c == 0 ? &ko->keys[next++] : NULL;
        if (!r && keycmp(line, kl, prev, prevlen) <= 0) {
            rc = pp_failf(PPV_FAIL_FIELD, msg, n, "metadata key '%.*s' out of order or repeated (%s)",
                       (int)kl, line, IDS_TEXT(ids));
            break;
        }
        prev = line;
        prevlen = kl;
        const char *vp = eq + 1;
        size_t vl = len - kl - 1;
        if (r && !r->tensor) { /* the common values need no copy */
            const field_desc *d = &md->fields[r->index];
            int64_t iv;
            if ((d->kind == KIND_INT || d->kind == KIND_BOOL) && plain_i64(vp, vl, &iv) == 0 &&
                (d->kind == KIND_INT || iv == 0 || iv == 1)) {
                if (d->kind == KIND_INT)
                    *int_at(base, d) = iv;
                else
                    *bool_at(base, d) = (int)iv;
                seen |= 1ull << r->index;
                continue;
            }
        }
        char v[700];
        memcpy(v, vp, vl);
        v[vl] = 0;
        if (kl >= 7 && memcmp(line, "tensor.", 7) == 0) {
            if (!r || !r->tensor) {
                rc = pp_failf(PPV_FAIL_FIELD, msg, n, "unknown tensor '%.*s' in the %s's specs (%s)",
                           (int)kl - 7, line + 7, md->what, IDS_TEXT(ids));
                break;
            }
            if ((rc = parse_spec(md, base, r->index, v, ids, msg, n)) == PPV_FAIL_NONE)
                in_order[nin++] = tensor_at(base, &md->tensors[r->index]);
            continue;
        }
        if (!r && kl == 5 && memcmp(line, "video", 5) == 0) {
            rc = pp_failf(PPV_FAIL_FIELD, msg, n, "the video key is forbidden in the %s (%s)",
                          md->what, IDS_TEXT(ids));
            break;
        }
        if (!r) { /* a newer sender's field: filtered, never a crash (the contract) */
            int32_t *count = is_result ? &((ppv_result *)base)->unknown_fields
                                       : &((ppv_envelope *)base)->unknown_fields;
            char *first = is_result ? ((ppv_result *)base)->unknown_field
                                    : ((ppv_envelope *)base)->unknown_field;
            if ((*count)++ == 0)
                snprintf(first, sizeof((ppv_envelope *)0)->unknown_field, "%.*s", (int)kl, line);
            continue;
        }
        seen |= 1ull << r->index;
        rc = parse_field(&md->fields[r->index], base, v, ids, msg, n);
    }
    int ok = 1;
    if (rc == PPV_FAIL_NONE && is_result) ok = ((ppv_result *)base)->ok;
    uint64_t missing = rc == PPV_FAIL_NONE ? ko->required[ok != 0] & ~seen : 0;
    if (missing) {
        int k = 0;
        while (!(missing >> k & 1))
            k++;
        rc = pp_failf(PPV_FAIL_FIELD, msg, n, "field %s is missing from the %s (%s)",
                      md->fields[k].name, md->what, IDS_TEXT(ids));
    }
    /* the header is what the peer committed to: the metadata must agree */
    if (rc == PPV_FAIL_NONE) {
        int64_t want[4] = {header[1], header[2], header[3], header[5]};
        for (int j = 0; j < 4 && rc == PPV_FAIL_NONE; j++) {
            const field_desc *d = &md->fields[ko->ids[j]];
            if (*int_at(base, d) != want[j])
                rc = pp_failf(PPV_FAIL_FIELD, msg, n,
                           "header says %s %" PRId64 ", metadata %" PRId64 " (%s)", d->name,
                           want[j], *int_at(base, d), IDS_TEXT(ids));
        }
        if (!is_result && rc == PPV_FAIL_NONE && ((ppv_envelope *)base)->action != header[0])
            rc = pp_failf(PPV_FAIL_FIELD, msg, n,
                       "header says action %" PRId64 ", metadata %" PRId64 " (%s)", header[0],
                       ((ppv_envelope *)base)->action, IDS_TEXT(ids));
    }
    if (rc == PPV_FAIL_NONE && nin != header[4])
        rc = pp_failf(PPV_FAIL_FIELD, msg, n,
                   "header announces %" PRId64 " tensors, the specs list %d (%s)", header[4], nin,
                   IDS_TEXT(ids));
    if (rc != PPV_FAIL_NONE) {
        free_tensors(md, base);
        return rc;
    }
    /* spec order is key order, which is the order of the metadata lines */
    memcpy(order, in_order, (size_t)nin * sizeof *order);
    *norder = nin;
    return PPV_FAIL_NONE;
}

/* The envelope this thread unframed last, to unframe the same bytes again
 * without reading them: a mock world runs its ranks on one thread, and a
 * broadcast hands every mesh rank the bytes its leader read a moment ago.
 * Unframing is a function of the header and the text alone; the copy
 * differs only in its tensors' memory, allocated anew. */
#define ENV_MEMO_TEXT 4096
static _Thread_local struct {
    int valid;
    int64_t header[PPV_FRAME_HEADER];
    char meta[ENV_MEMO_TEXT];
    ppv_envelope e;                    /* its tensors' data NULL */
    int norder;
    int index[PPV_FRAME_MAX_TENSORS]; /* order[k] is the tensor index[k] */
} env_memo;

static int env_memo_hit(const int64_t *header, const char *meta) {
    size_t n = (size_t)header[6];
    return env_memo.valid && meta && n > 0 && n < ENV_MEMO_TEXT &&
           memcmp(header, env_memo.header, sizeof env_memo.header) == 0 && meta[n] == 0 &&
           memcmp(meta, env_memo.meta, n) == 0;
}

static void env_memo_keep(const int64_t *header, const char *meta, const ppv_envelope *e,
                          ppv_tensor *const *order, int norder) {
    const message_desc *md = &pp_envelope_desc;
    size_t n = (size_t)header[6];
    env_memo.valid = 0;
    if (!meta || n == 0 || n >= ENV_MEMO_TEXT) return;
    for (int k = 0; k < norder; k++) {
        env_memo.index[k] = -1;
        for (int j = 0; j < md->ntensors; j++)
            if (order[k] == tensor_at((void *)e, &md->tensors[j])) env_memo.index[k] = j;
        if (env_memo.index[k] < 0) return;
    }
    memcpy(env_memo.header, header, sizeof env_memo.header);
    memcpy(env_memo.meta, meta, n);
    env_memo.e = *e;
    for (int j = 0; j < md->ntensors; j++) tensor_at(&env_memo.e, &md->tensors[j])->data = NULL;
    env_memo.norder = norder;
    env_memo.valid = 1;
}

/* The kept envelope into e, each tensor it lists given its memory. */
static ppv_failure env_memo_apply(ppv_envelope *e, ppv_tensor **order, int *norder, char *msg,
                                  size_t msglen) {
    const message_desc *md = &pp_envelope_desc;
    *e = env_memo.e;
    for (int k = 0; k < env_memo.norder; k++) {
        const tensor_desc *d = &md->tensors[env_memo.index[k]];
        ppv_tensor *t = tensor_at(e, d);
        size_t bytes = d->dtype == PPV_DTYPE_I64 ? 8 : 2; /* as parse_spec sizes it */
        for (int j = 0; j < t->rank; j++)
            bytes *= (size_t)t->dims[j];
        if (!(t->data = ppv_block_take(bytes ? bytes : 1))) {
            char idsbuf[160];
            const int64_t *ids = env_memo.header + 1;
            free_tensors(md, e);
            return pp_failf(PPV_FAIL_FIELD, msg, msglen, "tensor %s: out of memory (%s)",
                            d->name, IDS_TEXT(ids));
        }
        order[k] = t;
    }
    *norder = env_memo.norder;
    return PPV_FAIL_NONE;
}

ppv_failure ppv_envelope_unframe(const int64_t *header, const char *meta, ppv_envelope *e,
                                 ppv_tensor **order, int *norder, char *msg, size_t msglen) {
    memset(e, 0, sizeof *e);
    if (env_memo_hit(header, meta)) return env_memo_apply(e, order, norder, msg, msglen);
    ppv_failure rc = unframe(&pp_envelope_desc, header, meta, e, order, norder, msg, msglen);
    if (rc == PPV_FAIL_NONE) env_memo_keep(header, meta, e, order, *norder);
    return rc;
}

ppv_failure ppv_result_unframe(const int64_t *header, const char *meta, ppv_result *r,
                               ppv_tensor **order, int *norder, char *msg, size_t msglen) {
    memset(r, 0, sizeof *r);
    return unframe(&pp_result_desc, header, meta, r, order, norder, msg, msglen);
}
