/* compare.c - the element comparator: tolerance modes, the per-dataset
 * report of differing elements, and a parallel scan of raw values that
 * gives the same report for any number of threads. */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "golden_internal.h"

/* ---- tolerances ------------------------------------------------------------------ */

/* abs:X and rel:Y: the one fraction grammar (ppv_parse_fraction). */
static int parse_num(const char *s, double *v) {
    return ppv_parse_fraction(s, 0, 1e300, v);
}

int ppv_tolerance_parse(const char *text, ppv_tolerance *t) {
    int nan_differ = t->nan_differ;
    memset(t, 0, sizeof *t);
    t->nan_differ = nan_differ;
    if (strcmp(text, "bitwise") == 0) return 0;
    if (strncmp(text, "ulp:", 4) == 0) {
        int64_t n;
        if (ppv_parse_whole(text + 4, 0, INT64_MAX, &n) < 0) return -1;
        t->kind = PPV_TOL_ULP;
        t->ulp = (uint64_t)n;
        return 0;
    }
    char buf[128];
    size_t len = strlen(text);
    if (len == 0 || len >= sizeof buf || text[0] == ',' || text[len - 1] == ',' ||
        strstr(text, ",,"))
        return -1;
    strcpy(buf, text);
    t->kind = PPV_TOL_ABSREL;
    int seen_abs = 0, seen_rel = 0;
    for (char *part = strtok(buf, ","); part; part = strtok(NULL, ",")) {
        if (strncmp(part, "abs:", 4) == 0 && !seen_abs && !seen_rel) {
            if (parse_num(part + 4, &t->abs) < 0) return -1;
            seen_abs = 1;
        } else if (strncmp(part, "rel:", 4) == 0 && !seen_rel) {
            if (parse_num(part + 4, &t->rel) < 0) return -1;
            seen_rel = 1;
        } else {
            return -1;
        }
    }
    return seen_abs || seen_rel ? 0 : -1;
}

void ppv_tolerance_format(const ppv_tolerance *t, char *buf, size_t len) {
    switch (t->kind) {
    case PPV_TOL_BITWISE:
        snprintf(buf, len, "bitwise");
        break;
    case PPV_TOL_ULP:
        snprintf(buf, len, "ulp:%llu", (unsigned long long)t->ulp);
        break;
    case PPV_TOL_ABSREL:
        snprintf(buf, len, "abs:%.17g,rel:%.17g", t->abs, t->rel);
        break;
    }
}

/* ---- element comparison -------------------------------------------------------------- */

static void where_of(uint64_t idx, const hsize_t *dims, int rank, char *buf, size_t len) {
    uint64_t c[8];
    for (int k = rank - 1; k >= 0; k--) {
        uint64_t d = dims[k] ? dims[k] : 1;
        c[k] = idx % d;
        idx /= d;
    }
    size_t n = (size_t)snprintf(buf, len, "[");
    for (int k = 0; k < rank && n < len; k++)
        n += (size_t)snprintf(buf + n, len - n, "%s%llu", k ? "," : "", (unsigned long long)c[k]);
    if (n < len) snprintf(buf + n, len - n, "]");
}

/* Judges one pair: 1 if they differ under the tolerance. */
static int judge(const ppv_tolerance *t, double a, double b, int a_nan, int b_nan, int same_bits,
                 uint64_t ulps) {
    if (a_nan || b_nan) return !(a_nan && b_nan && !t->nan_differ);
    switch (t->kind) {
    case PPV_TOL_BITWISE:
        return !same_bits;
    case PPV_TOL_ULP:
        return ulps > t->ulp;
    case PPV_TOL_ABSREL:
        if (a == b) return 0; /* equal infinities too */
        return !(fabs(a - b) <= t->abs + t->rel * fabs(b));
    }
    return 1;
}

void diff_note(ppv_diff_entry *e, const ppv_diff_options *o, uint64_t idx, double a, double b,
               uint64_t ulps, const hsize_t *dims, int rank) {
    e->count++;
    if (!isnan(a) && !isnan(b)) {
        double d = fabs(a - b);
        if (isnan(d)) d = INFINITY; /* infinities of different sign */
        double r = b != 0 ? d / fabs(b) : (d > 0 ? INFINITY : 0);
        if (d > e->max_abs) e->max_abs = d;
        if (r > e->max_rel) e->max_rel = r;
    }
    if (ulps > e->max_ulp) e->max_ulp = ulps;
    if (!e->first && o->max_report > 0) e->first = calloc((size_t)o->max_report, sizeof *e->first);
    if (e->nfirst < o->max_report && e->first) {
        ppv_diff_point *p = &e->first[e->nfirst++];
        p->index = idx;
        p->a = a;
        p->b = b;
        p->ulp = ulps;
        where_of(idx, dims, rank, p->where, sizeof p->where);
    }
}

/* Element i of a float array of width 16 (bf16), 32 or 64 bits: its bits
 * and its value. */
static void float_at(const char *p, size_t i, int width, uint64_t *bits, double *value) {
    if (width == 16) {
        uint16_t h;
        memcpy(&h, p + i * 2, 2);
        *bits = h;
        *value = ppv_bf16_to_f32(h);
    } else if (width == 32) {
        uint32_t u;
        float f;
        memcpy(&u, p + i * 4, 4);
        memcpy(&f, &u, 4);
        *bits = u;
        *value = f;
    } else {
        memcpy(bits, p + i * 8, 8);
        memcpy(value, bits, 8);
    }
}

/* ---- runs that pass without a look at each element ------------------------------------ */

/* Each function says whether every element of a run passes the tolerance
 * and none is NaN; it is written without branches so the compiler
 * vectorises it. "Passes" here implies judge() finds no difference (the
 * same comparisons in the same double arithmetic, no contraction), so a
 * run that passes can be skipped; any other run is judged element by
 * element. Raw file data need not be aligned. */
#define PPV_SIMD __attribute__((target_clones("avx512f", "avx2", "default")))

/* Unaligned, aliasing-safe views of raw bytes, which the vectoriser
 * handles (a memcpy per element it does not always). */
typedef float raw_f32 __attribute__((aligned(1), may_alias));
typedef double raw_f64 __attribute__((aligned(1), may_alias));
typedef uint16_t raw_u16 __attribute__((aligned(1), may_alias));
typedef uint32_t raw_u32 __attribute__((aligned(1), may_alias));
typedef uint64_t raw_u64 __attribute__((aligned(1), may_alias));

static inline double load_f32(const unsigned char *p, size_t i) {
    return ((const raw_f32 *)p)[i];
}
static inline double load_f64(const unsigned char *p, size_t i) {
    return ((const raw_f64 *)p)[i];
}
static inline double load_bf16(const unsigned char *p, size_t i) {
    union {
        uint32_t u;
        float f;
    } v = {(uint32_t)((const raw_u16 *)p)[i] << 16};
    return v.f;
}

#define ABSREL_RUN(name, load)                                                                     \
    PPV_SIMD static int name(const unsigned char *a, const unsigned char *b, size_t m, double abs, \
                             double rel) {                                                         \
        int bad = 0;                                                                               \
        for (size_t i = 0; i < m; i++) {                                                           \
            double x = load(a, i), y = load(b, i);                                                 \
            bad |= !(fabs(x - y) <= abs + rel * fabs(y));                                          \
        }                                                                                          \
        return !bad;                                                                               \
    }
ABSREL_RUN(absrel_run_f32, load_f32)
ABSREL_RUN(absrel_run_f64, load_f64)
ABSREL_RUN(absrel_run_bf16, load_bf16)

/* The biased-integer key of ppv_ulp_distance: keys of neighbouring values
 * differ by one, and +0 and -0 share a key. */
#define ULP_RUN(name, utype, raw, width, inf_bits)                                                 \
    PPV_SIMD static int name(const unsigned char *a, const unsigned char *b, size_t m,             \
                             utype ulp) {                                                          \
        const utype sign = (utype)((utype)1 << (width - 1)), mag = (utype)(sign - 1);              \
        int bad = 0;                                                                               \
        for (size_t i = 0; i < m; i++) {                                                           \
            utype x = ((const raw *)a)[i], y = ((const raw *)b)[i];                                \
            utype mx = (utype)(x & mag), my = (utype)(y & mag);                                    \
            utype kx = (utype)(x & sign ? sign - mx : sign + mx);                                  \
            utype ky = (utype)(y & sign ? sign - my : sign + my);                                  \
            utype dist = (utype)(kx > ky ? kx - ky : ky - kx);                                     \
            bad |= (dist > ulp) | (mx > (utype)(inf_bits)) | (my > (utype)(inf_bits));             \
        }                                                                                          \
        return !bad;                                                                               \
    }
/* inf_bits: the magnitude bits of infinity; anything above is a NaN. */
ULP_RUN(ulp_run_bf16, uint16_t, raw_u16, 16, 0x7f80u)
ULP_RUN(ulp_run_f32, uint32_t, raw_u32, 32, 0x7f800000u)
ULP_RUN(ulp_run_f64, uint64_t, raw_u64, 64, 0x7ff0000000000000ull)

/* 1 if every element of the run passes (see above). */
static int run_passes(elem_kind k, const ppv_tolerance *t, const void *a, const void *b, size_t m) {
    if (t->kind == PPV_TOL_ABSREL) {
        switch (k) {
        case ELEM_F32:
            return absrel_run_f32(a, b, m, t->abs, t->rel);
        case ELEM_F64:
            return absrel_run_f64(a, b, m, t->abs, t->rel);
        case ELEM_BF16:
            return absrel_run_bf16(a, b, m, t->abs, t->rel);
        default:
            return 0;
        }
    }
    if (t->kind == PPV_TOL_ULP) {
        switch (k) {
        case ELEM_F32:
            return ulp_run_f32(a, b, m, t->ulp > UINT32_MAX ? UINT32_MAX : (uint32_t)t->ulp);
        case ELEM_F64:
            return ulp_run_f64(a, b, m, t->ulp);
        case ELEM_BF16:
            return ulp_run_bf16(a, b, m, t->ulp > UINT16_MAX ? UINT16_MAX : (uint16_t)t->ulp);
        default:
            return 0;
        }
    }
    return 0;
}

void compare_block(ppv_diff_entry *e, elem_kind k, size_t esize, const void *a, const void *b,
                   size_t n, uint64_t base, const hsize_t *dims, int rank,
                   const ppv_diff_options *o) {
    e->compared += n;
    if (!o->tol.nan_differ && memcmp(a, b, n * esize) == 0) return; /* the common case */
    const ppv_tolerance *t = &o->tol;
    /* walk in 4 KiB runs, skipping runs whose bytes are equal or whose
     * elements all pass */
    size_t run = 4096 / esize ? 4096 / esize : 1;
    for (size_t s = 0; s < n; s += run) {
        size_t m = n - s < run ? n - s : run;
        const char *pa = (const char *)a + s * esize, *pb = (const char *)b + s * esize;
        if (!t->nan_differ && memcmp(pa, pb, m * esize) == 0) continue;
        if (run_passes(k, t, pa, pb, m)) continue;
        for (size_t i = 0; i < m; i++) {
            uint64_t idx = base + s + i;
            switch (k) {
            case ELEM_F32:
            case ELEM_F64:
            case ELEM_BF16: {
                int width = k == ELEM_BF16 ? 16 : k == ELEM_F32 ? 32 : 64;
                uint64_t ua, ub;
                double fa, fb;
                float_at(pa, i, width, &ua, &fa);
                float_at(pb, i, width, &ub, &fb);
                uint64_t u = ppv_ulp_distance(ua, ub, width);
                if (judge(t, fa, fb, isnan(fa), isnan(fb), ua == ub, u))
                    diff_note(e, o, idx, fa, fb, u, dims, rank);
                break;
            }
            case ELEM_INT: {
                int64_t ia, ib;
                memcpy(&ia, pa + i * 8, 8);
                memcpy(&ib, pb + i * 8, 8);
                uint64_t u = ia > ib ? (uint64_t)ia - (uint64_t)ib : (uint64_t)ib - (uint64_t)ia;
                int differ = t->kind == PPV_TOL_ABSREL
                                 ? !((double)u <= t->abs + t->rel * fabs((double)ib))
                                 : ia != ib;
                if (differ) diff_note(e, o, idx, (double)ia, (double)ib, u, dims, rank);
                break;
            }
            case ELEM_RAW:
                if (memcmp(pa + i * esize, pb + i * esize, esize))
                    diff_note(e, o, idx, NAN, NAN, 0, dims, rank);
                break;
            }
        }
    }
}

ppv_diff_entry *diff_add(ppv_diff_report *r, const char *path, const char *what) {
    if (r->n == r->cap) {
        int cap = r->cap ? 2 * r->cap : 16;
        ppv_diff_entry *ne = realloc(r->entries, (size_t)cap * sizeof *ne);
        if (!ne) return NULL;
        r->entries = ne;
        r->cap = cap;
    }
    ppv_diff_entry *e = &r->entries[r->n++];
    memset(e, 0, sizeof *e);
    snprintf(e->path, sizeof e->path, "%s", path);
    snprintf(e->what, sizeof e->what, "%s", what);
    return e;
}

int diff_mismatch(ppv_diff_report *r, const char *path, const char *fmt, ...) {
    char what[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    ppv_diff_entry *e = diff_add(r, path, what);
    if (!e) return -1;
    e->count = 1;
    return 0;
}

void diff_values_done(ppv_diff_report *r, const ppv_diff_options *o) {
    if (r->n == 0) return;
    ppv_diff_entry *e = &r->entries[r->n - 1];
    if (o->on_values) o->on_values(o->on_values_ctx, e);
    if (e->count == 0) {
        free(e->first);
        r->n--;
    }
}

ppv_diff_options ppv_diff_defaults(void) {
    ppv_diff_options o;
    memset(&o, 0, sizeof o);
    o.max_report = 10;
    return o;
}

void ppv_diff_report_free(ppv_diff_report *r) {
    if (!r) return;
    for (int k = 0; k < r->n; k++)
        free(r->entries[k].first);
    free(r->entries);
    free(r);
}

/* ---- a parallel scan of raw values ---------------------------------------------------- */

enum { RAW_BLOCK = 1 << 20, RAW_MAX_THREADS = 8 };

typedef struct raw_part {
    elem_kind k;
    size_t esize;
    raw_side a, b;
    uint64_t lo, hi; /* elements [lo, hi) */
    const hsize_t *dims;
    int rank;
    const ppv_diff_options *o;
    ppv_diff_entry e; /* this part's differences */
    int failed;       /* a read failed or came up short */
    int err;          /* its errno, 0 for end of file */
} raw_part;

/* Reads exactly len bytes at off; -1 with errno (0: end of file). */
static int read_full(int fd, void *buf, size_t len, uint64_t off) {
    size_t got = 0;
    while (got < len) {
        ssize_t r = pread(fd, (char *)buf + got, len - got, (off_t)(off + got));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            if (r == 0) errno = 0;
            return -1;
        }
        got += (size_t)r;
    }
    return 0;
}

static void *raw_part_run(void *arg) {
    raw_part *p = arg;
    unsigned char *ba = malloc(RAW_BLOCK), *bb = malloc(RAW_BLOCK);
    size_t per = RAW_BLOCK / p->esize;
    if (!ba || !bb) p->failed = 1, p->err = ENOMEM;
    for (uint64_t i = p->lo; !p->failed && i < p->hi; i += per) {
        size_t m = p->hi - i < per ? (size_t)(p->hi - i) : per;
        if (read_full(p->a.fd, ba, m * p->esize, p->a.offset + i * p->esize) < 0 ||
            read_full(p->b.fd, bb, m * p->esize, p->b.offset + i * p->esize) < 0) {
            p->failed = 1;
            p->err = errno;
            break;
        }
        compare_block(&p->e, p->k, p->esize, ba, bb, m, i, p->dims, p->rank, p->o);
    }
    free(ba);
    free(bb);
    return NULL;
}

/* Adds part's differences to e; parts are merged in index order, so the
 * first max_report differences are the file's first. */
static void entry_merge(ppv_diff_entry *e, ppv_diff_entry *part, int max_report) {
    e->compared += part->compared;
    e->count += part->count;
    if (part->max_abs > e->max_abs) e->max_abs = part->max_abs;
    if (part->max_rel > e->max_rel) e->max_rel = part->max_rel;
    if (part->max_ulp > e->max_ulp) e->max_ulp = part->max_ulp;
    if (part->nfirst > 0 && e->nfirst < max_report && !e->first)
        e->first = calloc((size_t)max_report, sizeof *e->first);
    for (int q = 0; e->first && q < part->nfirst && e->nfirst < max_report; q++)
        e->first[e->nfirst++] = part->first[q];
    free(part->first);
    part->first = NULL;
}

int compare_raw(ppv_diff_entry *e, elem_kind k, size_t esize, raw_side a, raw_side b, uint64_t n,
                const hsize_t *dims, int rank, const ppv_diff_options *o, char *err,
                size_t errlen) {
    uint64_t per = RAW_BLOCK / esize, blocks = (n + per - 1) / per;
    long threads = o->threads > 0 ? o->threads : sysconf(_SC_NPROCESSORS_ONLN);
    if (threads > RAW_MAX_THREADS) threads = RAW_MAX_THREADS;
    if ((uint64_t)threads > blocks) threads = (long)blocks;
    if (threads < 1) threads = 1;
    raw_part parts[RAW_MAX_THREADS];
    pthread_t tids[RAW_MAX_THREADS];
    int started[RAW_MAX_THREADS] = {0};
    for (long t = 0; t < threads; t++) {
        /* whole blocks per part, so block edges do not depend on threads */
        uint64_t lo = blocks * (uint64_t)t / (uint64_t)threads * per;
        uint64_t hi = blocks * (uint64_t)(t + 1) / (uint64_t)threads * per;
        parts[t] = (raw_part){.k = k,
                              .esize = esize,
                              .a = a,
                              .b = b,
                              .lo = lo,
                              .hi = hi < n ? hi : n,
                              .dims = dims,
                              .rank = rank,
                              .o = o};
        /* part 0 runs here; a thread that cannot start runs here too */
        if (t > 0) started[t] = pthread_create(&tids[t], NULL, raw_part_run, &parts[t]) == 0;
    }
    raw_part_run(&parts[0]);
    for (long t = 1; t < threads; t++) {
        if (started[t])
            pthread_join(tids[t], NULL);
        else
            raw_part_run(&parts[t]);
    }
    int rc = 0;
    for (long t = 0; t < threads; t++) {
        if (parts[t].failed && rc == 0)
            rc = gerr(err, errlen, "%s",
                      parts[t].err == 0 ? "the file ends inside the values"
                                        : strerror(parts[t].err));
        entry_merge(e, &parts[t].e, o->max_report);
    }
    return rc;
}
