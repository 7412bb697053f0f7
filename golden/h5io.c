/* h5io.c - HDF5 helpers: the bf16 type, attributes, checksummed datasets
 * and the ppv-file check. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "golden_internal.h"

void ppv_golden_process_init(void) {
    /* HDF5 1.10 crashes in its exit-time cleanup (H5F__close_cb) when a
     * file's close failed because its flush could not write (a full disk):
     * the half-closed file is closed again. A process that is about to exit
     * needs no cleanup, so ppv skips it; the error was already reported. */
    H5dont_atexit();
}

void h5_quiet(void) {
    H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
}

hid_t h5_open_read(const char *path) {
    hid_t fapl = H5Pcreate(H5P_FILE_ACCESS);
    if (fapl < 0) return -1;
    H5AC_cache_config_t mdc;
    memset(&mdc, 0, sizeof mdc);
    mdc.version = H5AC__CURR_CACHE_CONFIG_VERSION;
    if (H5Pget_mdc_config(fapl, &mdc) >= 0) {
        mdc.set_initial_size = 1;
        mdc.initial_size = 1 << 19;
        mdc.max_size = 1 << 20;
        mdc.min_size = 1 << 18;
        H5Pset_mdc_config(fapl, &mdc);
    }
    hid_t f = H5Fopen(path, H5F_ACC_RDONLY, fapl);
    H5Pclose(fapl);
    return f;
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
            rc = *v ? 0 : -2;
        }
        H5Tclose(mt);
    } else {
        size_t n = H5Tget_size(t);
        hid_t mt = H5Tcopy(H5T_C_S1);
        H5Tset_size(mt, n + 1);
        H5Tset_cset(mt, H5Tget_cset(t));
        char *s = calloc(n + 2, 1);
        if (!s) rc = -2;
        else if (H5Aread(a, mt, s) >= 0) *v = s, s = NULL, rc = 0;
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
    int got = h5_read_attr_str(f, "ppv_format", &fmt);
    if (got == -2) return gerr(err, errlen, "%s: out of memory", path);
    if (got < 0) return 0;
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

/* ---- microbatch inputs ------------------------------------------------------------ */

const golden_input golden_inputs[] = {
#define PPV_GOLDEN_INPUT(name, shape) {#name, PPV_GOLDEN_##shape, offsetof(ppv_mb_inputs, name)},
#include "golden_inputs.def"
#undef PPV_GOLDEN_INPUT
};
const int golden_ninputs = (int)(sizeof golden_inputs / sizeof golden_inputs[0]);

int golden_input_dims(const golden_input *gi, const ppv_model_config *c, hsize_t dims[2]) {
    if (gi->shape == PPV_GOLDEN_SCALAR) return dims[0] = 1, 1;
    dims[0] = (hsize_t)(gi->shape == PPV_GOLDEN_TOKENS ? c->seq_len : c->cond_len);
    dims[1] = (hsize_t)c->d_model;
    return 2;
}

ppv_bf16 **golden_input_tensor(const golden_input *gi, ppv_mb_inputs *in) {
    return (ppv_bf16 **)((char *)in + gi->field);
}

void *golden_input_data(const golden_input *gi, ppv_mb_inputs *in) {
    return gi->shape == PPV_GOLDEN_SCALAR ? (void *)((char *)in + gi->field)
                                          : (void *)*golden_input_tensor(gi, in);
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
    /* no modification times in the object header: the same run recorded
     * twice gives the same bytes */
    if (sp < 0 || pl < 0 || H5Pset_chunk(pl, rank, chunk) < 0 || H5Pset_fletcher32(pl) < 0 ||
        H5Pset_obj_track_times(pl, 0) < 0)
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
