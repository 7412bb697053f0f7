/* diff.c - `ppv diff`: compare any two HDF5 files, like h5diff, with ppv's
 * tolerance modes, an explicit NaN policy, a report of the first differing
 * elements per dataset, and the ppv-specific checks when both files are
 * golden files. Memory does not grow with the file: contiguous datasets
 * stored as the comparison reads them are scanned raw, in parallel
 * (compare_raw); the rest are read through HDF5 (which checks Fletcher-32)
 * in blocks of at most BLOCK_BYTES per side, small enough to stay in the
 * cache. Objects under an excluded path and ignored attributes are left
 * out before anything is read or reported. Files come from other systems:
 * their objects are listed by walk.c's walk, which replay shares, so a
 * corrupted file is an error that names it and the object. */
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "golden_internal.h"

enum { BLOCK_BYTES = 1 << 20 };

typedef h5_obj obj;
typedef h5_objlist objlist;

static int by_path(const void *a, const void *b) {
    return strcmp(((const obj *)a)->path, ((const obj *)b)->path);
}

static const char *type_name(H5O_type_t t) {
    return t == H5O_TYPE_GROUP            ? "group"
           : t == H5O_TYPE_DATASET        ? "dataset"
           : t == H5O_TYPE_NAMED_DATATYPE ? "named datatype"
                                          : "object";
}

/* A short name for a dataset or attribute type. */
static void describe(hid_t t, char *buf, size_t len) {
    size_t sz = H5Tget_size(t);
    switch (H5Tget_class(t)) {
    case H5T_FLOAT:
        if (h5_is_bf16(t))
            snprintf(buf, len, "bf16");
        else if (sz == 4 || sz == 8)
            snprintf(buf, len, "fp%zu", sz * 8);
        else
            snprintf(buf, len, "float%zu", sz * 8);
        break;
    case H5T_INTEGER:
        snprintf(buf, len, "%sint%zu", H5Tget_sign(t) == H5T_SGN_NONE ? "u" : "", sz * 8);
        break;
    case H5T_STRING:
        if (H5Tis_variable_str(t) > 0)
            snprintf(buf, len, "vlen string");
        else
            snprintf(buf, len, "string%zu", sz);
        break;
    default:
        snprintf(buf, len, "other%zu", sz * 8);
        break;
    }
}

/* How values of type t are compared (mem_type gives the type read). */
static elem_kind kind_of(hid_t t) {
    if (H5Tget_class(t) == H5T_FLOAT) {
        if (h5_is_bf16(t)) return ELEM_BF16;
        return H5Tget_size(t) == 4 ? ELEM_F32 : ELEM_F64;
    }
    return H5Tget_class(t) == H5T_INTEGER ? ELEM_INT : ELEM_RAW;
}

/* The memory type to read values of kind k stored as t (caller closes). */
static hid_t mem_type(elem_kind k, hid_t t) {
    switch (k) {
    case ELEM_F32:
        return H5Tcopy(H5T_NATIVE_FLOAT);
    case ELEM_F64:
        return H5Tcopy(H5T_NATIVE_DOUBLE);
    case ELEM_BF16:
        return h5_bf16_type();
    case ELEM_INT:
        return H5Tcopy(H5T_NATIVE_INT64);
    case ELEM_RAW:
        return H5Tget_native_type(t, H5T_DIR_ASCEND);
    }
    return -1;
}

typedef struct differ {
    hid_t fa, fb;
    int fd_a, fd_b;          /* the same files, for raw reads (-1: none) */
    uint64_t size_a, size_b; /* their sizes */
    const ppv_diff_options *o;
    ppv_diff_report *r;
    char *err;
    size_t errlen;
    const char *name_a, *name_b; /* the files' names, for messages */
} differ;

/* ---- what is left out ----------------------------------------------------------- */

int ppv_diff_attr_ignored(const ppv_diff_options *o, const char *name) {
    for (int k = 0; k < o->nignore_attrs; k++)
        if (fnmatch(o->ignore_attrs[k], name, 0) == 0) return 1;
    return 0;
}

/* 1 if the exclude pattern pat leaves out the object at path: pat (with
 * repeated and trailing slashes dropped) matches path or an ancestor's
 * path whole; the root only for pat "/". 0 also when out of memory: the
 * object is then compared, never skipped by mistake. */
static int excluded_by(const char *pat, const char *path) {
    size_t pn = strlen(pat), n = strlen(path);
    char small[1024], *buf = pn + n + 2 <= sizeof small ? small : malloc(pn + n + 2);
    if (!buf) return 0;
    char *p = buf, *q = buf + pn + 1;
    size_t m = 0;
    for (size_t k = 0; k < pn; k++)
        if (pat[k] != '/' || m == 0 || p[m - 1] != '/') p[m++] = pat[k];
    while (m > 1 && p[m - 1] == '/')
        m--;
    p[m] = '\0';
    memcpy(q, path, n + 1);
    int hit = strcmp(p, "/") == 0;
    /* each prefix of path that ends a component: /a, /a/b, /a/b/c */
    for (size_t at = 1; !hit && n > 1 && at <= n; at++) {
        if (q[at] != '/' && q[at] != '\0') continue;
        char c = q[at];
        q[at] = '\0';
        hit = fnmatch(p, q, FNM_PATHNAME) == 0;
        q[at] = c;
    }
    if (buf != small) free(buf);
    return hit;
}

int ppv_diff_path_excluded(const ppv_diff_options *o, const char *path) {
    for (int k = 0; k < o->nexcludes; k++)
        if (excluded_by(o->excludes[k], path)) return 1;
    return 0;
}

/* ---- attributes ---------------------------------------------------------------- */

typedef struct names {
    char **v;
    size_t n, cap;
} names;

static herr_t attr_name(hid_t loc, const char *name, const H5A_info_t *info, void *arg) {
    (void)loc, (void)info;
    names *l = arg;
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 16;
        char **nv = realloc(l->v, cap * sizeof *nv);
        if (!nv) return -1;
        l->v = nv;
        l->cap = cap;
    }
    return (l->v[l->n++] = strdup(name)) ? 0 : -1;
}

static void names_free(names *l) {
    for (size_t k = 0; k < l->n; k++)
        free(l->v[k]);
    free(l->v);
}

/* Reads an attribute's values as text for comparison and reports: NULL
 * when it cannot be read, and then *oom says whether memory ran out. */
static char *attr_text(hid_t obj, const char *name, int *oom) {
    hid_t a = H5Aopen(obj, name, H5P_DEFAULT);
    if (a < 0) return NULL;
    hid_t t = H5Aget_type(a), sp = H5Aget_space(a);
    hssize_t n = sp < 0 ? -1 : H5Sget_simple_extent_npoints(sp);
    char *out = NULL;
    if (t < 0 || n < 0 || n > (1 << 20)) goto done;
    if (H5Tget_class(t) == H5T_STRING) {
        if (n == 1) {
            H5Aclose(a), a = -1;
            if (h5_read_attr_str(obj, name, &out) == -2) *oom = 1;
        }
        goto done;
    }
    size_t len = 32 * (size_t)n + 2, at = 0;
    out = calloc(len, 1);
    if (!out) {
        *oom = 1;
        goto done;
    }
    if (H5Tget_class(t) == H5T_INTEGER) {
        /* as 64-bit integers: through a double, values past 2^53 that
         * differ in their low bits (a seed, a digest) would read the same */
        int is_unsigned = H5Tget_sign(t) == H5T_SGN_NONE;
        long long *v = malloc((size_t)(n ? n : 1) * sizeof *v);
        if (!v) *oom = 1;
        int ok = v && H5Aread(a, is_unsigned ? H5T_NATIVE_ULLONG : H5T_NATIVE_LLONG, v) >= 0;
        for (hssize_t k = 0; ok && k < n; k++)
            at += is_unsigned ? (size_t)snprintf(out + at, len - at, "%s%llu", k ? "," : "",
                                                 (unsigned long long)v[k])
                              : (size_t)snprintf(out + at, len - at, "%s%lld", k ? "," : "", v[k]);
        free(v);
        if (!ok) free(out), out = NULL;
    } else if (H5Tget_class(t) == H5T_FLOAT) {
        double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
        if (!v) *oom = 1;
        int ok = v && H5Aread(a, H5T_NATIVE_DOUBLE, v) >= 0;
        for (hssize_t k = 0; ok && k < n; k++)
            at += (size_t)snprintf(out + at, len - at, "%s%.17g", k ? "," : "", v[k]);
        free(v);
        if (!ok) free(out), out = NULL;
    } else {
        size_t sz = H5Tget_size(t);
        unsigned char *raw = malloc(sz * (size_t)n + 1);
        hid_t nt = H5Tget_native_type(t, H5T_DIR_ASCEND);
        free(out);
        out = NULL;
        if (!raw) *oom = 1;
        if (raw && nt >= 0 && H5Aread(a, nt, raw) >= 0) {
            if (!(out = malloc(2 * sz * n + 1))) *oom = 1;
            for (size_t k = 0; out && k < sz * (size_t)n; k++)
                sprintf(out + 2 * k, "%02x", raw[k]);
            if (out) out[2 * sz * n] = '\0';
        }
        if (nt >= 0) H5Tclose(nt);
        free(raw);
    }
done:
    if (sp >= 0) H5Sclose(sp);
    if (t >= 0) H5Tclose(t);
    if (a >= 0) H5Aclose(a);
    return out;
}

static int informational(const differ *d, const char *path, const char *name) {
    return d->r->ppv_files && !d->o->all_attributes && strcmp(path, "/") == 0 &&
           (strcmp(name, "created") == 0 || strcmp(name, "producer_version") == 0);
}

static int compare_attributes(differ *d, const char *path) {
    names na = {0}, nb = {0};
    hid_t oa = H5Oopen(d->fa, path, H5P_DEFAULT), ob = H5Oopen(d->fb, path, H5P_DEFAULT);
    int rc = -1;
    const char *bad = NULL;
    if (oa < 0 || H5Aiterate2(oa, H5_INDEX_NAME, H5_ITER_INC, NULL, attr_name, &na) < 0)
        bad = d->name_a;
    else if (ob < 0 || H5Aiterate2(ob, H5_INDEX_NAME, H5_ITER_INC, NULL, attr_name, &nb) < 0)
        bad = d->name_b;
    if (bad) {
        gerr(d->err, d->errlen, "%s: corrupted file: cannot read the attributes of %s", bad, path);
        goto done;
    }
    size_t i = 0, j = 0;
    while (i < na.n || j < nb.n) {
        int c = i == na.n ? 1 : j == nb.n ? -1 : strcmp(na.v[i], nb.v[j]);
        if (c != 0) {
            const char *nm = c < 0 ? na.v[i] : nb.v[j];
            if (!informational(d, path, nm) && !ppv_diff_attr_ignored(d->o, nm) &&
                diff_mismatch(d->r, path, "attribute %s only in %s", nm, c < 0 ? "A" : "B") < 0)
                goto oom;
            c < 0 ? i++ : j++;
            continue;
        }
        const char *nm = na.v[i];
        i++, j++;
        if (informational(d, path, nm) || ppv_diff_attr_ignored(d->o, nm)) continue;
        int oom = 0;
        char *ta = attr_text(oa, nm, &oom), *tb = attr_text(ob, nm, &oom);
        if (oom) {
            free(ta);
            free(tb);
            goto oom;
        }
        int bad = (!ta || !tb || strcmp(ta, tb) != 0) &&
                  diff_mismatch(d->r, path, "attribute %s: %.120s vs %.120s", nm,
                                ta ? ta : "(unreadable)", tb ? tb : "(unreadable)") < 0;
        free(ta);
        free(tb);
        if (bad) goto oom;
    }
    rc = 0;
    goto done;
oom:
    gerr(d->err, d->errlen, "out of memory");
done:
    names_free(&na);
    names_free(&nb);
    if (oa >= 0) H5Oclose(oa);
    if (ob >= 0) H5Oclose(ob);
    return rc;
}

/* ---- datasets -------------------------------------------------------------------- */

/* Datasets a ppv file must hold as bf16: weights and input tensors (the
 * timestep is a scalar fp32). */
static int ppv_bf16_path(const char *path) {
    size_t n = strlen(path);
    int timestep = n >= 9 && strcmp(path + n - 9, "/timestep") == 0;
    return (strncmp(path, "/model/", 7) == 0 || strstr(path, "/inputs/") != NULL) && !timestep;
}

/* "(4,16)" */
static const char *shape_text(const hsize_t *dims, int rank, char *buf, size_t len) {
    size_t at = (size_t)snprintf(buf, len, "(");
    for (int k = 0; k < rank && at < len; k++)
        at += (size_t)snprintf(buf + at, len - at, "%s%llu", k ? "," : "",
                               (unsigned long long)dims[k]);
    if (at < len) snprintf(buf + at, len - at, ")");
    return buf;
}

/* Reads rows [r0, r0 + nr) of dataset d (dims, rank) into buf. */
static int read_rows(hid_t d, hid_t mt, int rank, const hsize_t *dims, hsize_t r0, hsize_t nr,
                     void *buf) {
    if (rank == 0) return H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, buf) < 0 ? -1 : 0;
    hsize_t start[8] = {0}, count[8];
    for (int k = 0; k < rank; k++)
        count[k] = dims[k];
    start[0] = r0;
    count[0] = nr;
    hid_t fs = H5Dget_space(d), ms = H5Screate_simple(rank, count, NULL);
    int rc = fs >= 0 && ms >= 0 &&
                     H5Sselect_hyperslab(fs, H5S_SELECT_SET, start, NULL, count, NULL) >= 0 &&
                     H5Dread(d, mt, ms, fs, H5P_DEFAULT, buf) >= 0
                 ? 0
                 : -1;
    if (ms >= 0) H5Sclose(ms);
    if (fs >= 0) H5Sclose(fs);
    return rc;
}

/* How a dataset of shape dims (rank dimensions; a scalar is one row) is
 * read in blocks of whole rows of at most block elements: *row elements
 * per row, *rows rows; returns the rows per block (at least one: a row
 * larger than a block is read whole). */
static hsize_t block_rows(int rank, const hsize_t *dims, hsize_t block, hsize_t *row,
                          hsize_t *rows) {
    *row = 1;
    *rows = rank ? dims[0] : 1;
    for (int j = 1; j < rank; j++)
        *row *= dims[j];
    hsize_t per = *row ? block / *row : 1;
    if (per < 1) per = 1;
    return per > *rows ? *rows : per;
}

/* The memory type to read variable-length strings stored as t. */
static hid_t vlen_string_type(hid_t t) {
    hid_t m = H5Tcopy(H5T_C_S1);
    if (m >= 0 && (H5Tset_size(m, H5T_VARIABLE) < 0 || H5Tset_cset(m, H5Tget_cset(t)) < 0))
        H5Tclose(m), m = -1;
    return m;
}

/* Compares datasets of variable-length strings element by element as
 * text (a NULL string reads as empty), in blocks of rows. */
static int compare_vlen_strings(differ *d, const char *path, hid_t da, hid_t db, hid_t ta, hid_t tb,
                                int rank, const hsize_t *dims) {
    hid_t ma = vlen_string_type(ta), mb = vlen_string_type(tb);
    hsize_t row, rows, per = block_rows(rank, dims, 65536, &row, &rows);
    hsize_t cap = per * row > 0 ? per * row : 1;
    char **sa = calloc(cap, sizeof *sa), **sb = calloc(cap, sizeof *sb);
    hid_t ms = H5Screate_simple(1, &cap, NULL);
    ppv_diff_entry *e = sa && sb ? diff_add(d->r, path, "values") : NULL;
    int rc = -1;
    if (ma < 0 || mb < 0 || ms < 0 || !e) {
        gerr(d->err, d->errlen, "out of memory");
        goto done;
    }
    snprintf(e->type, sizeof e->type, "vlen string");
    int idx = d->r->n - 1;
    for (hsize_t r0 = 0; r0 < rows && row; r0 += per) {
        hsize_t nr = rows - r0 < per ? rows - r0 : per, n = nr * row;
        int ok = read_rows(da, ma, rank, dims, r0, nr, sa) == 0 &&
                 read_rows(db, mb, rank, dims, r0, nr, sb) == 0;
        e = &d->r->entries[idx];
        for (hsize_t i = 0; ok && i < n; i++)
            if (strcmp(sa[i] ? sa[i] : "", sb[i] ? sb[i] : "") != 0)
                diff_note(e, d->o, r0 * row + i, NAN, NAN, 0, dims, rank);
        e->compared += ok ? n : 0;
        /* HDF5 allocated the strings it read; a failed read leaves NULLs */
        H5Dvlen_reclaim(ma, ms, H5P_DEFAULT, sa);
        H5Dvlen_reclaim(mb, ms, H5P_DEFAULT, sb);
        memset(sa, 0, cap * sizeof *sa);
        memset(sb, 0, cap * sizeof *sb);
        if (!ok) {
            gerr(d->err, d->errlen, "%s: cannot read the values: corrupted data or unreadable",
                 path);
            goto done;
        }
    }
    d->r->elements += d->r->entries[idx].compared;
    diff_values_done(d->r, d->o);
    rc = 0;
done:
    free(sa);
    free(sb);
    if (ms >= 0) H5Sclose(ms);
    if (ma >= 0) H5Tclose(ma);
    if (mb >= 0) H5Tclose(mb);
    return rc;
}

/* Where the values of dataset ds lie raw in its file, when they can be
 * compared there without HDF5 reading them: contiguous (so unfiltered)
 * storage inside the file, holding exactly n elements whose stored type
 * is the comparison's memory type mt. 0 and *out, or -1: read through
 * HDF5. */
static int raw_values(hid_t ds, hid_t ftype, hid_t mt, uint64_t n, int fd, uint64_t fsize,
                      raw_side *out) {
    if (fd < 0 || H5Tequal(ftype, mt) <= 0) return -1;
    hid_t dcpl = H5Dget_create_plist(ds);
    int contiguous = dcpl >= 0 && H5Pget_layout(dcpl) == H5D_CONTIGUOUS &&
                     H5Pget_external_count(dcpl) == 0 && H5Pget_nfilters(dcpl) == 0;
    if (dcpl >= 0) H5Pclose(dcpl);
    haddr_t off = contiguous ? H5Dget_offset(ds) : HADDR_UNDEF; /* unallocated: fill values */
    uint64_t bytes = n * H5Tget_size(mt);
    if (off == HADDR_UNDEF || H5Dget_storage_size(ds) != bytes || off > fsize ||
        fsize - off < bytes)
        return -1; /* HDF5 reads it, and reports a truncated file */
    *out = (raw_side){fd, off};
    return 0;
}

static int compare_dataset(differ *d, const char *path) {
    hid_t da = H5Dopen2(d->fa, path, H5P_DEFAULT), db = H5Dopen2(d->fb, path, H5P_DEFAULT);
    hid_t ta = da < 0 ? -1 : H5Dget_type(da), tb = db < 0 ? -1 : H5Dget_type(db);
    hid_t sa = da < 0 ? -1 : H5Dget_space(da), sb = db < 0 ? -1 : H5Dget_space(db);
    hid_t mt = -1;
    void *ba = NULL, *bb = NULL;
    int rc = -1;
    if (ta < 0 || tb < 0 || sa < 0 || sb < 0) {
        gerr(d->err, d->errlen, "%s: cannot open the dataset (corrupted?)", path);
        goto done;
    }
    char na[16], nb[16], shape_a[160], shape_b[160];
    describe(ta, na, sizeof na);
    describe(tb, nb, sizeof nb);
    d->r->datasets++;
    int rank = H5Sget_simple_extent_ndims(sa), rank_b = H5Sget_simple_extent_ndims(sb);
    hsize_t dims[8], dimsb[8];
    if (rank >= 0 && rank <= 8 && rank == rank_b) {
        H5Sget_simple_extent_dims(sa, dims, NULL);
        H5Sget_simple_extent_dims(sb, dimsb, NULL);
    }
    int mismatch;
    if (d->r->ppv_files && ppv_bf16_path(path) && (strcmp(na, "bf16") || strcmp(nb, "bf16")))
        mismatch = diff_mismatch(d->r, path, "type: %s vs %s, where a ppv file holds bf16", na, nb);
    else if (strcmp(na, nb) != 0 || H5Tget_size(ta) != H5Tget_size(tb))
        mismatch = diff_mismatch(d->r, path, "type: %s vs %s", na, nb);
    else if (rank < 0 || rank > 8 || rank != rank_b)
        mismatch = diff_mismatch(d->r, path, "shape: %d vs %d dimensions", rank, rank_b);
    else if (rank && memcmp(dims, dimsb, (size_t)rank * sizeof *dims) != 0)
        mismatch = diff_mismatch(d->r, path, "shape: %s vs %s",
                                 shape_text(dims, rank, shape_a, sizeof shape_a),
                                 shape_text(dimsb, rank, shape_b, sizeof shape_b));
    else
        mismatch = 1; /* none: compare the values */
    if (mismatch < 0) goto oom;
    if (mismatch == 0) {
        rc = 0;
        goto done;
    }
    if (H5Tis_variable_str(ta) > 0) {
        rc = compare_vlen_strings(d, path, da, db, ta, tb, rank, dims);
        goto done;
    }
    if (H5Tget_class(ta) == H5T_VLEN || H5Tget_class(ta) == H5T_REFERENCE) {
        ppv_diff_entry *e =
            diff_add(d->r, path, "values of a variable-length type are not compared");
        if (!e) goto oom;
        e->count = 0; /* listed, like h5diff -c, but not a difference */
        rc = 0;
        goto done;
    }
    elem_kind k = kind_of(ta);
    if ((mt = mem_type(k, ta)) < 0) goto oom;
    size_t esize = H5Tget_size(mt);
    hsize_t row, rows, per = block_rows(rank, dims, BLOCK_BYTES / esize, &row, &rows);
    hsize_t elems = per * row;
    size_t cap = (size_t)(elems > 0 ? elems : 1) * esize;
    ppv_diff_entry *e = diff_add(d->r, path, "values");
    if (!e) goto oom;
    snprintf(e->type, sizeof e->type, "%s", na);
    int idx = d->r->n - 1;
    raw_side ra, rb;
    if (raw_values(da, ta, mt, rows * row, d->fd_a, d->size_a, &ra) == 0 &&
        raw_values(db, tb, mt, rows * row, d->fd_b, d->size_b, &rb) == 0) {
        char why[256];
        if (compare_raw(e, k, esize, ra, rb, rows * row, dims, rank, d->o, why, sizeof why) < 0) {
            gerr(d->err, d->errlen, "%s: cannot read the values: %s", path, why);
            goto done;
        }
        rows = 0; /* compared */
    }
    /* zeroed: padding HDF5 does not write (compound types) compares equal */
    if (rows && row && (!(ba = calloc(1, cap)) || !(bb = calloc(1, cap)))) goto oom;
    for (hsize_t r0 = 0; r0 < rows && row; r0 += per) {
        hsize_t nr = rows - r0 < per ? rows - r0 : per;
        if (read_rows(da, mt, rank, dims, r0, nr, ba) < 0 ||
            read_rows(db, mt, rank, dims, r0, nr, bb) < 0) {
            gerr(d->err, d->errlen,
                 "%s: cannot read the values: corrupted data (checksum failed) or unreadable",
                 path);
            goto done;
        }
        compare_block(&d->r->entries[idx], k, esize, ba, bb, (size_t)(nr * row), r0 * row, dims,
                      rank, d->o);
    }
    d->r->elements += d->r->entries[idx].compared;
    diff_values_done(d->r, d->o);
    rc = 0;
    goto done;
oom:
    gerr(d->err, d->errlen, "out of memory");
done:
    free(ba);
    free(bb);
    if (mt >= 0) H5Tclose(mt);
    if (sa >= 0) H5Sclose(sa);
    if (sb >= 0) H5Sclose(sb);
    if (ta >= 0) H5Tclose(ta);
    if (tb >= 0) H5Tclose(tb);
    if (da >= 0) H5Dclose(da);
    if (db >= 0) H5Dclose(db);
    return rc;
}

/* ---- files -------------------------------------------------------------------------- */

/* Opens path for reading; -1 with the reason. */
static hid_t open_file(const char *path, char *err, size_t errlen) {
    return h5_open_checked(path, err, errlen);
}

/* The file once more, for raw reads of contiguous datasets; -1 if it
 * cannot be opened (HDF5 then reads everything). */
static int open_raw(const char *path, uint64_t *size) {
    int fd = open(path, O_RDONLY);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) != 0) close(fd), fd = -1;
    *size = fd >= 0 ? (uint64_t)st.st_size : 0;
    return fd;
}

int ppv_diff_files(const char *a, const char *b, const ppv_diff_options *o, ppv_diff_report **out,
                   char *err, size_t errlen) {
    h5_quiet();
    *out = NULL;
    objlist la = {0}, lb = {0};
    differ d = {-1, -1, -1, -1, 0, 0, o, calloc(1, sizeof(ppv_diff_report)), err, errlen, a, b};
    int rc = -1;
    if (!d.r) return gerr(err, errlen, "out of memory");
    for (int k = 0; k < o->nexcludes; k++)
        if (o->excludes[k][0] != '/') {
            gerr(err, errlen, "exclude '%s': not an absolute HDF5 path (start it with /)",
                 o->excludes[k]);
            goto done;
        }
    if ((d.fa = open_file(a, err, errlen)) < 0 || (d.fb = open_file(b, err, errlen)) < 0) goto done;
    d.fd_a = open_raw(a, &d.size_a);
    d.fd_b = open_raw(b, &d.size_b);
    int pa = h5_ppv_file(d.fa, a, err, errlen), pb = h5_ppv_file(d.fb, b, err, errlen);
    if (pa < 0 || pb < 0) goto done;
    d.r->ppv_files = pa && pb;
    if (h5_list_objects(d.fa, a, &la, err, errlen) < 0 || h5_list_objects(d.fb, b, &lb, err, errlen) < 0)
        goto done;
    qsort(la.v, la.n, sizeof *la.v, by_path);
    qsort(lb.v, lb.n, sizeof *lb.v, by_path);
    size_t i = 0, j = 0;
    while (i < la.n || j < lb.n) {
        int c = i == la.n ? 1 : j == lb.n ? -1 : strcmp(la.v[i].path, lb.v[j].path);
        if (ppv_diff_path_excluded(o, c <= 0 ? la.v[i].path : lb.v[j].path)) {
            if (c <= 0) i++; /* on either side or both: not compared, not missing */
            if (c >= 0) j++;
            continue;
        }
        if (c != 0) {
            const obj *only = c < 0 ? &la.v[i] : &lb.v[j];
            if (diff_mismatch(d.r, only->path, "%s only in %s", type_name(only->type),
                              c < 0 ? "A" : "B") < 0)
                goto oom;
            c < 0 ? i++ : j++;
            continue;
        }
        const char *p = la.v[i].path;
        d.r->objects++;
        if (la.v[i].type != lb.v[j].type) {
            if (diff_mismatch(d.r, p, "object type: %s vs %s", type_name(la.v[i].type),
                              type_name(lb.v[j].type)) < 0)
                goto oom;
        } else {
            if (compare_attributes(&d, p) < 0) goto done;
            if (la.v[i].type == H5O_TYPE_DATASET && compare_dataset(&d, p) < 0) goto done;
        }
        i++, j++;
    }
    *out = d.r;
    d.r = NULL;
    rc = 0;
    goto done;
oom:
    gerr(err, errlen, "out of memory");
done:
    h5_objlist_free(&la);
    h5_objlist_free(&lb);
    ppv_diff_report_free(d.r);
    if (d.fa >= 0) H5Fclose(d.fa);
    if (d.fb >= 0) H5Fclose(d.fb);
    if (d.fd_a >= 0) close(d.fd_a);
    if (d.fd_b >= 0) close(d.fd_b);
    return rc;
}
