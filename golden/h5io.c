/* h5io.c - HDF5 helpers (the bf16 type, attributes, checksummed datasets)
 * and the element comparator with ppv's tolerance modes. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden_internal.h"

void h5_quiet(void) {
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

/* ---- types ------------------------------------------------------------------ */

hid_t h5_bf16_type(void) {
    hid_t t = H5Tcopy(H5T_IEEE_F32LE);
    if (t < 0) return -1;
    /* sign at 15, exponent at 7 (8 bits), mantissa at 0 (7 bits), bias 127 */
    if (H5Tset_fields(t, 15, 7, 8, 0, 7) < 0 || H5Tset_precision(t, 16) < 0 ||
        H5Tset_size(t, 2) < 0 || H5Tset_ebias(t, 127) < 0) {
        H5Tclose(t);
        return -1;
    }
    return t;
}

int h5_is_bf16(hid_t t) {
    if (H5Tget_class(t) != H5T_FLOAT || H5Tget_size(t) != 2) return 0;
    size_t spos, epos, esize, mpos, msize;
    if (H5Tget_fields(t, &spos, &epos, &esize, &mpos, &msize) < 0) return 0;
    return spos == 15 && epos == 7 && esize == 8 && mpos == 0 && msize == 7 &&
           H5Tget_ebias(t) == 127 && H5Tget_order(t) == H5T_ORDER_LE;
}

/* ---- attributes --------------------------------------------------------------- */

static int attr_write(hid_t obj, const char *name, hid_t ftype, hid_t mtype, const void *v) {
    hid_t sp = H5Screate(H5S_SCALAR);
    hid_t a = sp < 0 ? -1 : H5Acreate2(obj, name, ftype, sp, H5P_DEFAULT, H5P_DEFAULT);
    int rc = a < 0 || H5Awrite(a, mtype, v) < 0 ? -1 : 0;
    if (a >= 0) H5Aclose(a);
    if (sp >= 0) H5Sclose(sp);
    return rc;
}

int h5_attr_i64(hid_t obj, const char *name, int64_t v) {
    return attr_write(obj, name, H5T_STD_I64LE, H5T_NATIVE_INT64, &v);
}

int h5_attr_f64(hid_t obj, const char *name, double v) {
    return attr_write(obj, name, H5T_IEEE_F64LE, H5T_NATIVE_DOUBLE, &v);
}

int h5_attr_str(hid_t obj, const char *name, const char *v) {
    hid_t t = H5Tcopy(H5T_C_S1);
    if (t < 0) return -1;
    H5Tset_size(t, H5T_VARIABLE);
    H5Tset_cset(t, H5T_CSET_UTF8);
    int rc = attr_write(obj, name, t, t, &v);
    H5Tclose(t);
    return rc;
}

int h5_read_attr_i64(hid_t obj, const char *name, int64_t *v) {
    if (H5Aexists(obj, name) <= 0) return -1;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    if (a < 0) return -1;
    hid_t t = H5Aget_type(a), sp = H5Aget_space(a);
    int rc = -1;
    if (t >= 0 && H5Tget_class(t) == H5T_INTEGER && sp >= 0 &&
        H5Sget_simple_extent_npoints(sp) == 1)
        rc = H5Aread(a, H5T_NATIVE_INT64, v) < 0 ? -1 : 0;
    if (sp >= 0) H5Sclose(sp);
    if (t >= 0) H5Tclose(t);
    H5Aclose(a);
    return rc;
}

int h5_read_attr_str(hid_t obj, const char *name, char **v) {
    *v = NULL;
    if (H5Aexists(obj, name) <= 0) return -1;
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    if (a < 0) return -1;
    hid_t t = H5Aget_type(a), sp = H5Aget_space(a);
    int rc = -1;
    if (t < 0 || H5Tget_class(t) != H5T_STRING || sp < 0 || H5Sget_simple_extent_npoints(sp) != 1)
        goto done;
    if (H5Tis_variable_str(t) > 0) {
        hid_t mt = H5Tcopy(H5T_C_S1);
        H5Tset_size(mt, H5T_VARIABLE);
        H5Tset_cset(mt, H5Tget_cset(t)); /* HDF5 converts no ASCII <-> UTF-8 */
        char *s = NULL;
        if (H5Aread(a, mt, &s) >= 0 && s) {
            *v = strdup(s);
            H5free_memory(s);
            rc = *v ? 0 : -1;
        }
        H5Tclose(mt);
    } else {
        size_t n = H5Tget_size(t);
        hid_t mt = H5Tcopy(H5T_C_S1);
        H5Tset_size(mt, n + 1);
        H5Tset_cset(mt, H5Tget_cset(t));
        char *s = calloc(n + 2, 1);
        if (s && H5Aread(a, mt, s) >= 0) *v = s, s = NULL, rc = 0;
        free(s);
        H5Tclose(mt);
    }
done:
    if (sp >= 0) H5Sclose(sp);
    if (t >= 0) H5Tclose(t);
    H5Aclose(a);
    return rc;
}

/* 1 if f is a ppv file (of a supported version), 0 if not a ppv file, -1
 * (with the reason) for a ppv file this ppv cannot read. */
int h5_ppv_file(hid_t f, const char *path, char *err, size_t errlen) {
    char *fmt = NULL;
    if (h5_read_attr_str(f, "ppv_format", &fmt) < 0) return 0;
    int is = strcmp(fmt, PPV_GOLDEN_FORMAT_NAME) == 0;
    free(fmt);
    if (!is) return 0;
    int64_t v;
    if (h5_read_attr_i64(f, "format_version", &v) < 0)
        return gerr(err, errlen, "%s: a ppv file with no integer format_version", path);
    if (v < 1 || v > PPV_GOLDEN_FORMAT_VERSION)
        return gerr(err, errlen,
                    "%s: format version %lld is not supported (this ppv reads 1 to %d)", path,
                    (long long)v, PPV_GOLDEN_FORMAT_VERSION);
    return 1;
}

/* ---- datasets ------------------------------------------------------------------- */

int h5_write(hid_t loc, const char *name, hid_t ftype, hid_t mtype, int rank, const hsize_t *dims,
             const void *data) {
    hsize_t chunk[8];
    size_t esize = H5Tget_size(ftype), bytes = esize;
    for (int k = 0; k < rank; k++)
        chunk[k] = dims[k] ? dims[k] : 1;
    /* at most 1 MiB per chunk: halve the leading dimensions until it fits */
    for (int k = 0; k < rank; k++)
        bytes *= chunk[k];
    for (int k = 0; k < rank && bytes > (1u << 20); k++)
        while (chunk[k] > 1 && bytes > (1u << 20)) {
            bytes /= chunk[k];
            chunk[k] = (chunk[k] + 1) / 2;
            bytes *= chunk[k];
        }
    hid_t sp = H5Screate_simple(rank, dims, NULL);
    hid_t pl = H5Pcreate(H5P_DATASET_CREATE);
    int rc = -1;
    hid_t d = -1;
    if (sp < 0 || pl < 0 || H5Pset_chunk(pl, rank, chunk) < 0 || H5Pset_fletcher32(pl) < 0)
        goto done;
    d = H5Dcreate2(loc, name, ftype, sp, H5P_DEFAULT, pl, H5P_DEFAULT);
    if (d >= 0 && H5Dwrite(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) >= 0) rc = 0;
done:
    if (d >= 0) H5Dclose(d);
    if (pl >= 0) H5Pclose(pl);
    if (sp >= 0) H5Sclose(sp);
    return rc;
}

int h5_read(hid_t loc, const char *name, hid_t mtype, int rank, const hsize_t *dims, void *data,
            char *err, size_t errlen) {
    if (H5Lexists(loc, name, H5P_DEFAULT) <= 0) return gerr(err, errlen, "%s: missing", name);
    hid_t d = H5Dopen2(loc, name, H5P_DEFAULT);
    if (d < 0) return gerr(err, errlen, "%s: not a dataset", name);
    hid_t sp = H5Dget_space(d);
    hsize_t got[8];
    int r = sp < 0 ? -1 : H5Sget_simple_extent_ndims(sp);
    int rc = -1;
    if (r != rank || r > 8) {
        gerr(err, errlen, "%s: %d dimensions, expected %d", name, r, rank);
        goto done;
    }
    H5Sget_simple_extent_dims(sp, got, NULL);
    for (int k = 0; k < rank; k++)
        if (got[k] != dims[k]) {
            gerr(err, errlen, "%s: dimension %d is %llu, expected %llu", name, k,
                 (unsigned long long)got[k], (unsigned long long)dims[k]);
            goto done;
        }
    if (H5Dread(d, mtype, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0) {
        gerr(err, errlen,
             "%s: cannot read: corrupted data (checksum) or a type that does "
             "not convert",
             name);
        goto done;
    }
    rc = 0;
done:
    if (sp >= 0) H5Sclose(sp);
    H5Dclose(d);
    return rc;
}

/* ---- tolerances ------------------------------------------------------------------ */

static int parse_num(const char *s, double *v) {
    char *end;
    *v = strtod(s, &end);
    return end != s && *end == '\0' && isfinite(*v) && *v >= 0 ? 0 : -1;
}

int ppv_tolerance_parse(const char *text, ppv_tolerance *t) {
    int nan_differ = t->nan_differ;
    memset(t, 0, sizeof *t);
    t->nan_differ = nan_differ;
    if (strcmp(text, "bitwise") == 0) return 0;
    if (strncmp(text, "ulp:", 4) == 0) {
        char *end;
        const char *p = text + 4;
        if (*p < '0' || *p > '9') return -1;
        unsigned long long n = strtoull(p, &end, 10);
        if (*end) return -1;
        t->kind = PPV_TOL_ULP;
        t->ulp = n;
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

static void note(ppv_diff_entry *e, const ppv_diff_options *o, uint64_t idx, double a, double b,
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

void compare_block(ppv_diff_entry *e, elem_kind k, size_t esize, const void *a, const void *b,
                   size_t n, uint64_t base, const hsize_t *dims, int rank,
                   const ppv_diff_options *o) {
    e->compared += n;
    if (!o->tol.nan_differ && memcmp(a, b, n * esize) == 0) return; /* the common case */
    if (!e->first && o->max_report > 0) e->first = calloc((size_t)o->max_report, sizeof *e->first);
    const ppv_tolerance *t = &o->tol;
    /* walk in 4 KiB runs, skipping runs whose bytes are equal */
    size_t run = 4096 / esize ? 4096 / esize : 1;
    for (size_t s = 0; s < n; s += run) {
        size_t m = n - s < run ? n - s : run;
        const char *pa = (const char *)a + s * esize, *pb = (const char *)b + s * esize;
        if (!t->nan_differ && memcmp(pa, pb, m * esize) == 0) continue;
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
                    note(e, o, idx, fa, fb, u, dims, rank);
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
                if (differ) note(e, o, idx, (double)ia, (double)ib, u, dims, rank);
                break;
            }
            case ELEM_RAW:
                if (memcmp(pa + i * esize, pb + i * esize, esize))
                    note(e, o, idx, NAN, NAN, 0, dims, rank);
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

void diff_drop_if_clean(ppv_diff_report *r) {
    if (r->n == 0) return;
    ppv_diff_entry *e = &r->entries[r->n - 1];
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
