/* inference.c - inference recordings: every envelope and result of a PP
 * inference run, in call order, in the /inference layout of
 * spec/golden-format.md.
 *
 * The attributes and datasets are generated from spec/contract.def, so a
 * field added to the contract is recorded and read back without another
 * edit. The file is written through h5out.c (a temporary name beside the
 * target, renamed when complete), so a failed run never leaves half a
 * recording and a signal during the write leaves nothing.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libgen.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "golden_internal.h"

enum { EVENT_BLOCK = 4096 }; /* events written (and read) at a time */

struct ppv_inference_writer {
    h5_out out;
    hid_t calls, bf16;
    int64_t n;
    hid_t events, event_mem; /* /inference/events and its in-memory type (-1: no log) */
    int64_t nevents;
    ppv_pp_event *evbuf; /* events not yet written */
    int nbuf;
    /* the mesh ranks' own records, written at commit: for mesh rank r and
     * kind k, pairs (call_id, value) in rank_values[r * PPV_RANK_RECORD_COUNT + k] */
    struct rank_values {
        int64_t *v;
        size_t n, cap; /* pairs */
    } *rank_values;
    int32_t nranks;
    int memory; /* /inference/memory was written (a version 2 part) */
};

struct ppv_inference_reader {
    hid_t file, calls;
    hid_t events, event_mem; /* the event log, once inference_events_open found one */
    int64_t n;
    char path[4096];
    int lenient;                                   /* faults recorded, not refused */
    inference_fault faults[INFERENCE_MAX_FAULTS]; /* the last call's */
    int nfaults;
};

/* Where a lenient read records what it found wrong (NULL: refuse it). */
typedef struct fault_sink {
    ppv_inference_reader *r;
    int in_result;
} fault_sink;

static void add_fault(fault_sink *fs, ppv_failure rule, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void add_fault(fault_sink *fs, ppv_failure rule, const char *fmt, ...) {
    ppv_inference_reader *r = fs->r;
    if (r->nfaults == INFERENCE_MAX_FAULTS) return;
    inference_fault *f = &r->faults[r->nfaults++];
    f->in_result = fs->in_result;
    f->rule = rule;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->message, sizeof f->message, fmt, ap);
    va_end(ap);
}

void inference_set_lenient(ppv_inference_reader *r) {
    r->lenient = 1;
}

int inference_faults(const ppv_inference_reader *r, const inference_fault **out) {
    *out = r->faults;
    return r->nfaults;
}

/* A dataset type in the contract's words: "bf16", "f32", "i32", "u8"... */
static void type_name(hid_t ty, char *buf, size_t n) {
    H5T_class_t cl = H5Tget_class(ty);
    size_t bytes = H5Tget_size(ty);
    if (h5_is_bf16(ty)) snprintf(buf, n, "bf16");
    else if (cl == H5T_FLOAT) snprintf(buf, n, "f%zu", 8 * bytes);
    else if (cl == H5T_INTEGER)
        snprintf(buf, n, "%s%zu", H5Tget_sign(ty) == H5T_SGN_NONE ? "u" : "i", 8 * bytes);
    else snprintf(buf, n, "an HDF5 type of class %d, %zu bytes", (int)cl, bytes);
}

/* The event record's members, in order (ppv_pp_event's fields). */
#define EVENT_MEMBERS(X)                                                                           \
    X(t_ns) X(t_begin_ns) X(kind) X(verdict) X(action) X(call_id) X(chunk_index) X(cache_epoch)    \
        X(inflight) X(ready)

/* The compound type of one event: int64 members little-endian in the file
 * (file != 0), native in memory. */
static hid_t event_type(int file) {
    hid_t t = H5Tcreate(H5T_COMPOUND, file ? 8 * 10 : sizeof(ppv_pp_event));
    if (t < 0) return -1;
    hid_t m = file ? H5T_STD_I64LE : H5T_NATIVE_INT64;
    int rc = 0;
    size_t at = 0;
#define INSERT(f)                                                                                  \
    rc |= H5Tinsert(t, #f, file ? at : offsetof(ppv_pp_event, f), m) < 0;                          \
    at += 8;
    EVENT_MEMBERS(INSERT)
#undef INSERT
    if (rc) {
        H5Tclose(t);
        return -1;
    }
    return t;
}

/* ---- writing ---------------------------------------------------------------------- */

/* Writes one tensor as a dataset of its own type (bf16 as the custom
 * float, int64 natively); absent tensors are not written. */
static int write_tensor(ppv_inference_writer *w, hid_t g, const char *name, const ppv_tensor *t) {
    if (!t->data) return 0;
    hsize_t dims[PPV_TENSOR_MAX_RANK];
    for (int k = 0; k < t->rank; k++)
        dims[k] = (hsize_t)t->dims[k];
    if (t->dtype == PPV_DTYPE_BF16)
        return h5_write(g, name, w->bf16, w->bf16, t->rank, dims, t->data);
    if (t->dtype == PPV_DTYPE_I64)
        return h5_write(g, name, H5T_STD_I64LE, H5T_NATIVE_INT64, t->rank, dims, t->data);
    return -1; /* the contract has no other dtype */
}

static int write_int(hid_t g, const char *name, int64_t v) {
    return h5_attr_i64(g, name, v);
}
static int write_bool(hid_t g, const char *name, int v) {
    return h5_attr_i64(g, name, v);
}
static int write_float(hid_t g, const char *name, double v) {
    return h5_attr_f64(g, name, v);
}
static int write_str(hid_t g, const char *name, const char *v) {
    return memchr(v, 0, 256) ? h5_attr_str(g, name, v) : -1;
}

#define WRITE_INT(g, x, name) write_int(g, #name, (x)->name)
#define WRITE_BOOL(g, x, name) write_bool(g, #name, (x)->name)
#define WRITE_FLOAT(g, x, name) write_float(g, #name, (x)->name)
#define WRITE_STR(g, x, name) write_str(g, #name, (x)->name)

static int write_envelope(ppv_inference_writer *w, hid_t call, const ppv_envelope *e) {
    hid_t g = h5_out_group(&w->out, call, "envelope");
    if (g < 0) return -1;
    int rc = 0;
#define PPV_ENV_FIELD(name, kind, when) rc |= WRITE_##kind(g, e, name);
#include "contract.def"
#undef PPV_ENV_FIELD
#define PPV_ENV_TENSOR(name, dtype, rank, when) rc |= write_tensor(w, g, #name, &e->name);
#include "contract.def"
#undef PPV_ENV_TENSOR
    H5Gclose(g);
    return rc ? -1 : 0;
}

static int write_result(ppv_inference_writer *w, hid_t call, const ppv_result *r) {
    hid_t g = h5_out_group(&w->out, call, "result");
    if (g < 0) return -1;
    int rc = 0;
#define PPV_RES_FIELD(name, kind, when) rc |= WRITE_##kind(g, r, name);
#include "contract.def"
#undef PPV_RES_FIELD
#define PPV_RES_TENSOR(name, dtype, rank, when) rc |= write_tensor(w, g, #name, &r->name);
#include "contract.def"
#undef PPV_RES_TENSOR
    H5Gclose(g);
    return rc ? -1 : 0;
}

/* The root attributes every ppv file has. */
static int write_root(hid_t f) {
    char created[32] = "";
    h5_created_now(created, sizeof created);
    return h5_attr_str(f, "ppv_format", PPV_GOLDEN_FORMAT_NAME) |
           h5_attr_str(f, "producer", "ppv") |
           h5_attr_str(f, "producer_version", PPV_VERSION_STRING) |
           h5_attr_str(f, "created", created) | h5_attr_str(f, "kind", "inference");
}

/* The built-in generator's configuration keys on /inference/generator
 * (cond_dim is written for every generator). */
#define GENERATOR_KEYS(X) X(layers) X(d_model) X(n_heads) X(d_ff)

/* The setup's generator as (name, version, params): the built-in's params
 * from its configuration when the setup leaves them empty. */
static int setup_generator(const ppv_inference_setup *s, const char **name, const char **version,
                           char *params, size_t n) {
    int builtin = !s->generator[0] || !strcmp(s->generator, ppv_generator_builtin()->name);
    *name = builtin ? ppv_generator_builtin()->name : s->generator;
    *version = builtin ? ppv_generator_builtin()->version : s->generator_version;
    if (builtin) return ppv_gen_config_format(&s->model, params, n);
    snprintf(params, n, "%s", s->generator_params);
    return 0;
}

static int write_setup(ppv_inference_writer *w, hid_t inf, const ppv_inference_setup *s) {
    const char *name, *version;
    char params[sizeof s->generator_params];
    if (setup_generator(s, &name, &version, params, sizeof params) < 0) return -1;
    int builtin = !strcmp(name, ppv_generator_builtin()->name);
    hid_t g = h5_out_group(&w->out, inf, "generator");
    if (g < 0) return -1;
    int rc = h5_attr_i64(inf, "mesh", s->mesh) | h5_attr_i64(inf, "kv_window", s->kv_window) |
             h5_attr_i64(g, "cond_dim", s->model.cond_dim) | h5_attr_str(g, "name", name) |
             h5_attr_str(g, "version", version) | h5_attr_str(g, "params", params) |
             h5_attr_i64(g, "setup_digest", (int64_t)ppv_generator_digest(name, version, params));
    if (builtin) {
        rc |= h5_attr_i64(g, "seed", (int64_t)s->model.seed);
#define WRITE_KEY(k) rc |= h5_attr_i64(g, #k, s->model.k);
        GENERATOR_KEYS(WRITE_KEY)
#undef WRITE_KEY
    }
    H5Gclose(g);
    return rc;
}

/* A string attribute into dst (n bytes); 0, -1 absent or too long. */
static int read_text_attr(hid_t obj, const char *name, char *dst, size_t n) {
    char *v = NULL;
    if (H5Aexists(obj, name) <= 0 || h5_read_attr_str(obj, name, &v) < 0) return -1;
    int rc = strlen(v) < n ? 0 : -1;
    if (!rc) memcpy(dst, v, strlen(v) + 1);
    free(v);
    return rc;
}

/* 1 with *s filled when the file has a setup, 0 when it has none, -1 when
 * it has one that is incomplete, out of range or does not match its
 * digest (err). A file from before generators had names is the built-in's. */
static int read_setup(hid_t inf, const char *path, ppv_inference_setup *s, char *err,
                      size_t errlen) {
    if (H5Aexists(inf, "mesh") <= 0 && H5Lexists(inf, "generator", H5P_DEFAULT) <= 0) return 0;
    memset(s, 0, sizeof *s);
    int64_t v[8] = {0};
    hid_t g = H5Lexists(inf, "generator", H5P_DEFAULT) > 0
                  ? H5Gopen2(inf, "generator", H5P_DEFAULT)
                  : -1;
    int named = g >= 0 && H5Aexists(g, "name") > 0;
    int bad = g < 0 || h5_read_attr_i64(inf, "mesh", &v[0]) < 0 ||
              h5_read_attr_i64(inf, "kv_window", &v[1]) < 0 ||
              h5_read_attr_i64(g, "cond_dim", &v[3]) < 0;
    char digest_text[32] = "";
    int64_t digest = 0;
    if (!bad && named)
        bad = read_text_attr(g, "name", s->generator, sizeof s->generator) < 0 ||
              read_text_attr(g, "version", s->generator_version, sizeof s->generator_version) < 0 ||
              read_text_attr(g, "params", s->generator_params, sizeof s->generator_params) < 0 ||
              h5_read_attr_i64(g, "setup_digest", &digest) < 0;
    int builtin = !named || !strcmp(s->generator, ppv_generator_builtin()->name);
    s->model = ppv_gen_config_default();
    if (!bad && builtin) {
        bad = h5_read_attr_i64(g, "seed", &v[2]) < 0;
        int k = 4;
#define READ_KEY(key) bad |= h5_read_attr_i64(g, #key, &v[k++]) < 0;
        GENERATOR_KEYS(READ_KEY)
#undef READ_KEY
    }
    if (g >= 0) H5Gclose(g);
    for (int i = 0; i < 8 && !bad; i++)
        if (i != 2 && (builtin || i < 4) && (v[i] < 1 || v[i] > 1000000)) bad = 1;
    if (bad)
        return gerr(err, errlen,
                    "%s: /inference's setup (attributes mesh, kv_window; /inference/generator's "
                    "name, version, params, setup_digest, cond_dim and, for the built-in, seed, "
                    "layers, d_model, n_heads, d_ff) is incomplete or out of range",
                    path);
    s->mesh = (int32_t)v[0];
    s->kv_window = (int32_t)v[1];
    s->model.cond_dim = (int32_t)v[3];
    if (builtin) {
        s->model.seed = (uint64_t)v[2];
        int k = 4;
#define SET_KEY(key) s->model.key = (int32_t)v[k++];
        GENERATOR_KEYS(SET_KEY)
#undef SET_KEY
    }
    if (!named) {
        snprintf(s->generator, sizeof s->generator, "%s", ppv_generator_builtin()->name);
        snprintf(s->generator_version, sizeof s->generator_version, "%s",
                 ppv_generator_builtin()->version);
    }
    char keys[sizeof s->generator_params];
    if (builtin && ppv_gen_config_format(&s->model, keys, sizeof keys) < 0)
        return gerr(err, errlen, "%s: the built-in generator's setup is too long", path);
    if (builtin && !named) memcpy(s->generator_params, keys, sizeof keys);
    if (builtin && named && strcmp(keys, s->generator_params))
        return gerr(err, errlen,
                    "%s: /inference/generator's params '%s' disagree with its configuration "
                    "attributes ('%s')",
                    path, s->generator_params, keys);
    if (named && (uint64_t)digest != ppv_generator_digest(s->generator, s->generator_version,
                                                  s->generator_params)) {
        snprintf(digest_text, sizeof digest_text, "%016llx", (unsigned long long)digest);
        return gerr(err, errlen,
                    "%s: /inference/generator's setup_digest %s does not match its name, version "
                    "and params (the setup was changed after it was recorded)",
                    path, digest_text);
    }
    return 1;
}

ppv_inference_writer *ppv_inference_create(const char *path, const ppv_inference_setup *setup,
                                           char *err, size_t errlen) {
    h5_quiet();
    ppv_inference_writer *w = calloc(1, sizeof *w);
    if (!w) {
        gerr(err, errlen, "out of memory");
        return NULL;
    }
    w->calls = w->bf16 = w->events = w->event_mem = -1;
    if (h5_out_create(&w->out, path, "the recording", err, errlen) < 0) {
        free(w);
        return NULL;
    }
    w->bf16 = h5_bf16_type();
    hid_t inf = h5_out_group(&w->out, w->out.file, "inference");
    w->calls = inf < 0 ? -1 : h5_out_group(&w->out, inf, "calls");
    int bad_setup = inf >= 0 && setup && write_setup(w, inf, setup) != 0;
    if (inf >= 0) H5Gclose(inf);
    if (w->bf16 < 0 || w->calls < 0 || bad_setup || write_root(w->out.file) < 0) {
        gerr(err, errlen, "%s: cannot write the recording: %s", path, h5_write_failure(errno));
        ppv_inference_abort(w);
        return NULL;
    }
    return w;
}

int ppv_inference_append(ppv_inference_writer *w, const ppv_envelope *e, const ppv_result *r,
                         char *err, size_t errlen) {
    char name[32];
    snprintf(name, sizeof name, PPV_GOLDEN_CALL_FMT, (int)w->n);
    hid_t call = h5_out_group(&w->out, w->calls, name);
    int rc = call < 0 || write_envelope(w, call, e) < 0 || (r && write_result(w, call, r) < 0);
    if (call >= 0) H5Gclose(call);
    if (rc)
        return gerr(err, errlen, "%s: cannot write call %lld (call_id %lld)", w->out.path,
                    (long long)w->n, (long long)e->call_id);
    w->n++;
    return 0;
}

/* Writes the buffered events at the end of /inference/events. */
static int flush_events(ppv_inference_writer *w) {
    if (!w->nbuf) return 0;
    hsize_t start = (hsize_t)w->nevents, count = (hsize_t)w->nbuf, size = start + count;
    int rc = -1;
    hid_t fs = -1, ms = H5Screate_simple(1, &count, NULL);
    if (ms >= 0 && H5Dset_extent(w->events, &size) >= 0 && (fs = H5Dget_space(w->events)) >= 0 &&
        H5Sselect_hyperslab(fs, H5S_SELECT_SET, &start, NULL, &count, NULL) >= 0 &&
        H5Dwrite(w->events, w->event_mem, ms, fs, H5P_DEFAULT, w->evbuf) >= 0)
        rc = 0;
    if (fs >= 0) H5Sclose(fs);
    if (ms >= 0) H5Sclose(ms);
    w->nevents += w->nbuf;
    w->nbuf = 0;
    return rc;
}

int ppv_inference_events_begin(ppv_inference_writer *w, const ppv_inference_events *how,
                               char *err, size_t errlen) {
    if (w->events >= 0 || w->n)
        return gerr(err, errlen, "%s: the event log begins once, before the first call",
                    w->out.path);
    hsize_t zero = 0, unlimited = H5S_UNLIMITED, chunk = EVENT_BLOCK;
    hid_t ft = event_type(1), sp = H5Screate_simple(1, &zero, &unlimited);
    hid_t dcpl = H5Pcreate(H5P_DATASET_CREATE);
    hid_t inf = H5Gopen2(w->out.file, "inference", H5P_DEFAULT);
    w->event_mem = event_type(0);
    w->evbuf = malloc(EVENT_BLOCK * sizeof *w->evbuf);
    if (ft >= 0 && sp >= 0 && dcpl >= 0 && inf >= 0 && w->event_mem >= 0 && w->evbuf &&
        H5Pset_chunk(dcpl, 1, &chunk) >= 0 && H5Pset_fletcher32(dcpl) >= 0 &&
        H5Pset_obj_track_times(dcpl, 0) >= 0)
        w->events = H5Dcreate2(inf, "events", ft, sp, H5P_DEFAULT, dcpl, H5P_DEFAULT);
    int rc = w->events < 0 ||
             h5_attr_str(w->events, "clock", how->clock ? how->clock : "monotonic") ||
             h5_attr_i64(w->events, "d_in", how->d_in) ||
             h5_attr_i64(w->events, "d_out", how->d_out) ||
             h5_attr_i64(w->events, "reorder_bound", how->reorder_bound);
    if (inf >= 0) H5Gclose(inf);
    if (dcpl >= 0) H5Pclose(dcpl);
    if (sp >= 0) H5Sclose(sp);
    if (ft >= 0) H5Tclose(ft);
    if (rc)
        return gerr(err, errlen, "%s: cannot write the event log: %s", w->out.path,
                    h5_write_failure(errno));
    return 0;
}

int ppv_inference_event(ppv_inference_writer *w, const ppv_pp_event *ev, char *err,
                        size_t errlen) {
    if (w->events < 0)
        return gerr(err, errlen, "%s: an event before ppv_inference_events_begin", w->out.path);
    w->evbuf[w->nbuf++] = *ev;
    if (w->nbuf == EVENT_BLOCK && flush_events(w) < 0)
        return gerr(err, errlen, "%s: cannot write the event log: %s", w->out.path,
                    h5_write_failure(errno));
    return 0;
}

int ppv_inference_rank_value(ppv_inference_writer *w, int32_t mesh_rank, ppv_pp_rank_record kind,
                             int64_t call_id, uint64_t value, char *err, size_t errlen) {
    if (mesh_rank < 0 || mesh_rank >= 1000000 || kind < 0 || kind >= PPV_RANK_RECORD_COUNT)
        return gerr(err, errlen, "%s: a rank record of mesh rank %d, kind %d", w->out.path,
                    (int)mesh_rank, (int)kind);
    if (mesh_rank >= w->nranks) {
        int32_t n = mesh_rank + 1;
        struct rank_values *grown =
            realloc(w->rank_values, (size_t)n * PPV_RANK_RECORD_COUNT * sizeof *grown);
        if (!grown) return gerr(err, errlen, "out of memory");
        memset(grown + (size_t)w->nranks * PPV_RANK_RECORD_COUNT, 0,
               (size_t)(n - w->nranks) * PPV_RANK_RECORD_COUNT * sizeof *grown);
        w->rank_values = grown;
        w->nranks = n;
    }
    struct rank_values *rv = &w->rank_values[(size_t)mesh_rank * PPV_RANK_RECORD_COUNT + kind];
    if (rv->n == rv->cap) {
        size_t cap = rv->cap ? 2 * rv->cap : 64;
        int64_t *v = realloc(rv->v, cap * 2 * sizeof *v);
        if (!v) return gerr(err, errlen, "out of memory");
        rv->v = v;
        rv->cap = cap;
    }
    rv->v[2 * rv->n] = call_id;
    rv->v[2 * rv->n + 1] = (int64_t)value;
    rv->n++;
    return 0;
}

/* /inference/ranks/rank_NNNN/KIND: (n, 2) int64 of (call_id, value). */
static int write_rank_values(ppv_inference_writer *w, hid_t inf) {
    if (!w->nranks) return 0;
    hid_t ranks = h5_out_group(&w->out, inf, "ranks");
    int rc = ranks < 0;
    for (int32_t r = 0; r < w->nranks && !rc; r++) {
        char name[32];
        snprintf(name, sizeof name, "rank_%04d", (int)r);
        hid_t g = h5_out_group(&w->out, ranks, name);
        rc = g < 0 || h5_attr_i64(g, "mesh_rank", r) < 0;
        for (int k = 0; k < PPV_RANK_RECORD_COUNT && !rc; k++) {
            const struct rank_values *rv = &w->rank_values[(size_t)r * PPV_RANK_RECORD_COUNT + k];
            hsize_t dims[2] = {(hsize_t)rv->n, 2};
            if (rv->n)
                rc = h5_write(g, ppv_pp_rank_record_name(k), H5T_STD_I64LE, H5T_NATIVE_INT64, 2,
                              dims, rv->v) < 0;
        }
        if (g >= 0) H5Gclose(g);
    }
    if (ranks >= 0) H5Gclose(ranks);
    return rc ? -1 : 0;
}

/* One row of /inference/memory: its samples (t_ns, bytes, phase) and its
 * peak's attributes. */
static int write_memory_row(ppv_inference_writer *w, hid_t mem, const char *name, int32_t rank,
                            const ppv_pp_mem_row *r) {
    hid_t g = h5_out_group(&w->out, mem, name);
    int rc = g < 0 || (rank >= 0 && h5_attr_i64(g, "rank", rank) < 0) ||
             h5_attr_i64(g, "peak_bytes", (int64_t)r->peak) < 0 ||
             h5_attr_i64(g, "peak_t_ns", r->peak_t_ns) < 0 ||
             h5_attr_i64(g, "peak_chunk", r->peak_chunk) < 0 ||
             h5_attr_i64(g, "peak_call_id", r->peak_call_id) < 0 ||
             h5_attr_str(g, "peak_phase", ppv_pp_phase_name(r->peak_phase)) < 0 ||
             h5_attr_i64(g, "held_at_end_bytes", (int64_t)r->total) < 0;
    for (int k = 0; k < PPV_MEM_KIND_COUNT && !rc; k++)
        if (r->at_peak[k]) {
            char at[48];
            snprintf(at, sizeof at, "at_peak_%s", ppv_pp_mem_kind_name(k));
            rc = h5_attr_i64(g, at, (int64_t)r->at_peak[k]) < 0;
        }
    if (!rc && !r->timeline) { /* its samples stayed in another process */
        H5Gclose(g);
        return 0;
    }
    int64_t *v = rc ? NULL : malloc((size_t)(r->ntimeline ? r->ntimeline : 1) * 3 * sizeof *v);
    if (!rc && v) {
        for (int64_t i = 0; i < r->ntimeline; i++) {
            v[3 * i] = r->timeline[i].t_ns;
            v[3 * i + 1] = (int64_t)r->timeline[i].bytes;
            v[3 * i + 2] = r->timeline[i].phase;
        }
        hsize_t dims[2] = {(hsize_t)r->ntimeline, 3};
        rc = h5_write(g, "samples", H5T_STD_I64LE, H5T_NATIVE_INT64, 2, dims, v) < 0;
    }
    free(v);
    if (g >= 0) H5Gclose(g);
    return rc || !v ? -1 : 0;
}

int ppv_inference_memory(ppv_inference_writer *w, const ppv_pp_mem_row *rows, int32_t nranks,
                         const char *clock, char *err, size_t errlen) {
    if (w->memory)
        return gerr(err, errlen, "%s: the memory part is written once", w->out.path);
    hid_t inf = H5Gopen2(w->out.file, "inference", H5P_DEFAULT);
    hid_t mem = inf < 0 ? -1 : h5_out_group(&w->out, inf, "memory");
    int rc = mem < 0 || h5_attr_str(mem, "clock", clock) < 0;
    for (int32_t k = 0; k <= nranks && !rc; k++) {
        char name[32];
        if (k == nranks && !rows[k].timeline && !rows[k].peak) continue; /* not counted */
        if (k == nranks) snprintf(name, sizeof name, "link");
        else snprintf(name, sizeof name, "rank_%04d", (int)k);
        rc = write_memory_row(w, mem, name, k == nranks ? -1 : k, &rows[k]) < 0;
    }
    if (mem >= 0) H5Gclose(mem);
    if (inf >= 0) H5Gclose(inf);
    if (rc)
        return gerr(err, errlen, "%s: cannot write the memory samples: %s", w->out.path,
                    h5_write_failure(errno));
    w->memory = 1;
    return 0;
}

int ppv_inference_commit(ppv_inference_writer *w, char *err, size_t errlen) {
    hid_t inf = H5Gopen2(w->out.file, "inference", H5P_DEFAULT);
    int logged = w->events >= 0 || w->memory; /* both are version 2's */
    int bad = inf < 0 || h5_attr_i64(inf, "calls", w->n) < 0 || write_rank_values(w, inf) < 0 ||
              (w->events >= 0 &&
               (flush_events(w) < 0 || h5_attr_i64(w->events, "count", w->nevents) < 0)) ||
              h5_attr_i64(w->out.file, "format_version",
                          logged ? PPV_GOLDEN_EVENTS_VERSION : PPV_GOLDEN_CALLS_VERSION) < 0;
    if (inf >= 0) H5Gclose(inf);
    if (w->events >= 0) H5Dclose(w->events);
    w->events = -1;
    H5Gclose(w->calls);
    w->calls = -1;
    H5Tclose(w->bf16);
    w->bf16 = -1;
    int rc = bad ? gerr(err, errlen, "%s: cannot write the recording: %s", w->out.path,
                        h5_write_failure(errno))
                 : h5_out_commit(&w->out, "the recording", err, errlen);
    ppv_inference_abort(w); /* what is left: the temporary after a failure */
    return rc;
}

void ppv_inference_abort(ppv_inference_writer *w) {
    if (!w) return;
    if (w->events >= 0) H5Dclose(w->events);
    if (w->event_mem >= 0) H5Tclose(w->event_mem);
    free(w->evbuf);
    for (int32_t k = 0; k < w->nranks * PPV_RANK_RECORD_COUNT; k++)
        free(w->rank_values[k].v);
    free(w->rank_values);
    if (w->calls >= 0) H5Gclose(w->calls);
    if (w->bf16 >= 0) H5Tclose(w->bf16);
    h5_out_abort(&w->out);
    free(w);
}

/* ---- reading ----------------------------------------------------------------------- */

static int read_int(hid_t g, const char *name, int64_t *v) {
    return h5_read_attr_i64(g, name, v);
}

static int read_bool(hid_t g, const char *name, int *v, fault_sink *fs) {
    int64_t x;
    if (h5_read_attr_i64(g, name, &x) < 0) return -1;
    if (x != 0 && x != 1) {
        if (!fs) return -1;
        add_fault(fs, PPV_FAIL_FIELD, "%s/%s is %" PRId64 ": a boolean is 0 or 1",
                  fs->in_result ? "result" : "envelope", name, x);
        x = 1;
    }
    *v = (int)x;
    return 0;
}

static int read_float(hid_t g, const char *name, double *v) {
    if (H5Aexists(g, name) <= 0) return -1;
    hid_t a = H5Aopen(g, name, H5P_DEFAULT);
    if (a < 0) return -1;
    hid_t t = H5Aget_type(a), sp = H5Aget_space(a);
    int rc = t >= 0 && H5Tget_class(t) == H5T_FLOAT && sp >= 0 &&
                     H5Sget_simple_extent_npoints(sp) == 1 && H5Aread(a, H5T_NATIVE_DOUBLE, v) >= 0
                 ? 0
                 : -1;
    if (sp >= 0) H5Sclose(sp);
    if (t >= 0) H5Tclose(t);
    H5Aclose(a);
    return rc;
}

static int read_str(hid_t g, const char *name, char *v) {
    char *s = NULL;
    if (h5_read_attr_str(g, name, &s) < 0) return -1;
    int rc = strlen(s) < 256 ? 0 : -1;
    if (!rc) snprintf(v, 256, "%s", s);
    free(s);
    return rc;
}

/* Reads dataset name of g into t when it exists: dtype and rank as the
 * contract says, shape from the file. 0 (absent or read), or -1 with the
 * reason in err. */
static int read_tensor(hid_t g, const char *where, const char *name, ppv_dtype dtype, int rank,
                       ppv_tensor *t, fault_sink *fs, char *err, size_t errlen) {
    memset(t, 0, sizeof *t);
    if (H5Lexists(g, name, H5P_DEFAULT) <= 0) return 0;
    hid_t d = H5Dopen2(g, name, H5P_DEFAULT);
    hid_t ty = d < 0 ? -1 : H5Dget_type(d), sp = d < 0 ? -1 : H5Dget_space(d);
    int rc = -1;
    hsize_t dims[PPV_TENSOR_MAX_RANK];
    int ok_type = ty >= 0 && (dtype == PPV_DTYPE_BF16
                                  ? h5_is_bf16(ty)
                                  : H5Tget_class(ty) == H5T_INTEGER && H5Tget_size(ty) == 8);
    int ndims = sp < 0 ? -1 : H5Sget_simple_extent_ndims(sp);
    if (fs && d >= 0 && sp >= 0 && ty >= 0 && ndims >= 0 && (!ok_type || ndims != rank)) {
        /* readable, but not what the contract says: the recorder's mistake */
        char got[64];
        type_name(ty, got, sizeof got);
        add_fault(fs, PPV_FAIL_FM07,
                  "%s/%s is stored as %s with %d dimension%s, the contract says %s with %d",
                  fs->in_result ? "result" : "envelope", name, got, ndims, ndims == 1 ? "" : "s",
                  ppv_dtype_token(dtype), rank);
        rc = 0;
        goto done;
    }
    if (d < 0 || sp < 0 || !ok_type) {
        gerr(err, errlen, "%s/%s: not a %s dataset", where, name, ppv_dtype_token(dtype));
        goto done;
    }
    if (ndims != rank) {
        gerr(err, errlen, "%s/%s: %d dimensions, the contract says %d", where, name, ndims, rank);
        goto done;
    }
    H5Sget_simple_extent_dims(sp, dims, NULL);
    size_t n = dtype == PPV_DTYPE_BF16 ? 2 : 8;
    t->dtype = dtype;
    t->rank = rank;
    for (int k = 0; k < rank; k++) {
        t->dims[k] = (int64_t)dims[k];
        n *= (size_t)dims[k];
    }
    if (n > ((size_t)1 << 32) || !(t->data = malloc(n ? n : 1))) {
        gerr(err, errlen, "%s/%s: %zu bytes: too large", where, name, n);
        goto done;
    }
    hid_t mt = dtype == PPV_DTYPE_BF16 ? ty : H5T_NATIVE_INT64;
    if (H5Dread(d, mt, H5S_ALL, H5S_ALL, H5P_DEFAULT, t->data) < 0) {
        gerr(err, errlen, "%s/%s: cannot read: corrupted data (checksum)", where, name);
        free(t->data);
        t->data = NULL;
        goto done;
    }
    rc = 0;
done:
    if (sp >= 0) H5Sclose(sp);
    if (ty >= 0) H5Tclose(ty);
    if (d >= 0) H5Dclose(d);
    return rc;
}

#define READ_INT(g, x, name) read_int(g, #name, &(x)->name)
#define READ_BOOL(g, x, name) read_bool(g, #name, &(x)->name, fs)
#define READ_FLOAT(g, x, name) read_float(g, #name, &(x)->name)
#define READ_STR(g, x, name) read_str(g, #name, (x)->name)
#define KIND_NAME_INT "an integer"
#define KIND_NAME_BOOL "0 or 1"
#define KIND_NAME_FLOAT "a float"
#define KIND_NAME_STR "a string"

static int read_envelope(hid_t call, const char *where, ppv_envelope *e, fault_sink *fs, char *err,
                         size_t errlen) {
    memset(e, 0, sizeof *e);
    hid_t g =
        H5Lexists(call, "envelope", H5P_DEFAULT) > 0 ? H5Gopen2(call, "envelope", H5P_DEFAULT) : -1;
    if (g < 0) return gerr(err, errlen, "%s: no envelope group", where);
    int rc = 0;
/* an OPTIONAL field may be absent (a file written before it existed): 0 */
#define FIELD_OPTIONAL_ALWAYS 0
#define FIELD_OPTIONAL_INFER 0
#define FIELD_OPTIONAL_OPTIONAL 1
#define PPV_ENV_FIELD(name, kind, when)                                                            \
    if (!rc && (!FIELD_OPTIONAL_##when || H5Aexists(g, #name) > 0) &&                              \
        READ_##kind(g, e, name) < 0)                                                               \
        rc = gerr(err, errlen, "%s/envelope: attribute %s missing or not %s", where, #name,        \
                  KIND_NAME_##kind);
#include "contract.def"
#undef PPV_ENV_FIELD
    char w[200];
    snprintf(w, sizeof w, "%s/envelope", where);
#define PPV_ENV_TENSOR(name, dtype, rank, when)                                                    \
    if (!rc) rc = read_tensor(g, w, #name, PPV_DTYPE_##dtype, rank, &e->name, fs, err, errlen);
#include "contract.def"
#undef PPV_ENV_TENSOR
    H5Gclose(g);
    if (rc) ppv_envelope_free_tensors(e);
    return rc;
}

static int read_result(hid_t call, const char *where, ppv_result *r, int *present, fault_sink *fs,
                       char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    *present = H5Lexists(call, "result", H5P_DEFAULT) > 0;
    if (!*present) return 0;
    hid_t g = H5Gopen2(call, "result", H5P_DEFAULT);
    if (g < 0) return gerr(err, errlen, "%s/result: not a group", where);
    int rc = 0;
#define PPV_RES_FIELD(name, kind, when)                                                            \
    if (!rc && READ_##kind(g, r, name) < 0)                                                        \
        rc = gerr(err, errlen, "%s/result: attribute %s missing or not %s", where, #name,          \
                  KIND_NAME_##kind);
#include "contract.def"
#undef PPV_RES_FIELD
    char w[200];
    snprintf(w, sizeof w, "%s/result", where);
#define PPV_RES_TENSOR(name, dtype, rank, when)                                                    \
    if (!rc) rc = read_tensor(g, w, #name, PPV_DTYPE_##dtype, rank, &r->name, fs, err, errlen);
#include "contract.def"
#undef PPV_RES_TENSOR
    H5Gclose(g);
    if (rc) ppv_result_free_tensors(r);
    return rc;
}

ppv_inference_reader *ppv_inference_open(const char *path, int64_t *ncalls,
                                         ppv_inference_setup *setup, int *has_setup, char *err,
                                         size_t errlen) {
    h5_quiet();
    *ncalls = 0;
    *has_setup = 0;
    ppv_inference_reader *r = calloc(1, sizeof *r);
    if (!r) {
        gerr(err, errlen, "out of memory");
        return NULL;
    }
    r->file = r->calls = r->events = r->event_mem = -1;
    snprintf(r->path, sizeof r->path, "%s", path);
    r->file = h5_open_checked(path, err, errlen);
    if (r->file < 0) goto fail;
    int ppv = h5_ppv_file(r->file, path, err, errlen);
    char *kind = NULL;
    if (ppv < 0) goto fail;
    if (ppv == 0 || h5_read_attr_str(r->file, "kind", &kind) < 0 ||
        strcmp(kind, "inference") != 0) {
        gerr(err, errlen, "%s: not a ppv inference recording (kind %s)", path,
             kind ? kind : "missing");
        free(kind);
        goto fail;
    }
    free(kind);
    hid_t inf = H5Lexists(r->file, "inference", H5P_DEFAULT) > 0
                    ? H5Gopen2(r->file, "inference", H5P_DEFAULT)
                    : -1;
    int bad = inf < 0 || h5_read_attr_i64(inf, "calls", &r->n) < 0 || r->n < 0 ||
              H5Lexists(inf, "calls", H5P_DEFAULT) <= 0 ||
              (r->calls = H5Gopen2(inf, "calls", H5P_DEFAULT)) < 0;
    if (bad) {
        if (inf >= 0) H5Gclose(inf);
        gerr(err, errlen, "%s: /inference has no calls group or no calls count", path);
        goto fail;
    }
    ppv_inference_setup none;
    int got = read_setup(inf, path, setup ? setup : &none, err, errlen);
    H5Gclose(inf);
    if (got < 0) goto fail;
    *has_setup = got;
    *ncalls = r->n;
    return r;
fail:
    ppv_inference_close(r);
    return NULL;
}

int ppv_inference_read(ppv_inference_reader *r, int64_t k, ppv_envelope *e, ppv_result *res,
                       int *has_result, char *err, size_t errlen) {
    char name[32], where[100];
    snprintf(name, sizeof name, PPV_GOLDEN_CALL_FMT, (int)k);
    snprintf(where, sizeof where, "/inference/calls/%s", name);
    if (k < 0 || k >= r->n || H5Lexists(r->calls, name, H5P_DEFAULT) <= 0)
        return gerr(err, errlen, "%s: %s missing (the file says %lld calls)", r->path, where,
                    (long long)r->n);
    hid_t call = H5Gopen2(r->calls, name, H5P_DEFAULT);
    char why[512];
    r->nfaults = 0;
    fault_sink env_faults = {r, 0}, res_faults = {r, 1};
    int rc = call < 0 ? gerr(why, sizeof why, "%s: not a group", where)
                      : read_envelope(call, where, e, r->lenient ? &env_faults : NULL, why,
                                      sizeof why);
    if (rc == 0 && read_result(call, where, res, has_result, r->lenient ? &res_faults : NULL, why,
                               sizeof why) < 0) {
        ppv_envelope_free_tensors(e);
        rc = -1;
    }
    if (call >= 0) H5Gclose(call);
    if (rc) return gerr(err, errlen, "%s: %s", r->path, why);
    return 0;
}

void ppv_inference_close(ppv_inference_reader *r) {
    if (!r) return;
    if (r->events >= 0) H5Dclose(r->events);
    if (r->event_mem >= 0) H5Tclose(r->event_mem);
    if (r->calls >= 0) H5Gclose(r->calls);
    if (r->file >= 0) H5Fclose(r->file);
    free(r);
}

/* ---- what conform needs beyond the calls ----------------------------------------------- */

int64_t inference_format_version(ppv_inference_reader *r) {
    int64_t v = 0;
    return h5_read_attr_i64(r->file, "format_version", &v) < 0 ? 0 : v;
}

int64_t inference_links(ppv_inference_reader *r) {
    H5G_info_t gi;
    return H5Gget_info(r->calls, &gi) < 0 ? -1 : (int64_t)gi.nlinks;
}

int64_t inference_present(ppv_inference_reader *r) {
    int64_t k = 0;
    char name[32];
    for (;; k++) {
        snprintf(name, sizeof name, PPV_GOLDEN_CALL_FMT, (int)k);
        if (H5Lexists(r->calls, name, H5P_DEFAULT) <= 0) return k;
    }
}

typedef struct key_walk {
    const char *const *known;
    int nknown;
    const char *where;
    void (*cb)(void *ctx, const char *where, const char *name);
    void *ctx;
} key_walk;

static void key_seen(key_walk *w, const char *name) {
    for (int k = 0; k < w->nknown; k++)
        if (!strcmp(w->known[k], name)) return;
    w->cb(w->ctx, w->where, name);
}

static herr_t key_attr(hid_t loc, const char *name, const H5A_info_t *info, void *data) {
    (void)loc, (void)info;
    key_seen(data, name);
    return 0;
}

static herr_t key_link(hid_t loc, const char *name, const H5L_info_t *info, void *data) {
    (void)loc, (void)info;
    key_seen(data, name);
    return 0;
}

/* Calls cb for every attribute and link of g (at where) not in known. */
static int walk_keys(hid_t g, const char *where, const char *const *known, int nknown,
                     void (*cb)(void *, const char *, const char *), void *ctx) {
    key_walk w = {known, nknown, where, cb, ctx};
    return H5Aiterate2(g, H5_INDEX_NAME, H5_ITER_INC, NULL, key_attr, &w) < 0 ||
                   H5Literate(g, H5_INDEX_NAME, H5_ITER_INC, NULL, key_link, &w) < 0
               ? -1
               : 0;
}

int inference_unknown_keys(ppv_inference_reader *r, int64_t k,
                           void (*cb)(void *ctx, const char *where, const char *name), void *ctx) {
    static const char *const call_keys[] = {"envelope", "result"};
    static const char *const env_keys[] = {
#define PPV_ENV_FIELD(name, kind, when) #name,
#define PPV_ENV_TENSOR(name, dtype, rank, when) #name,
#include "contract.def"
#undef PPV_ENV_FIELD
#undef PPV_ENV_TENSOR
    };
    static const char *const res_keys[] = {
#define PPV_RES_FIELD(name, kind, when) #name,
#define PPV_RES_TENSOR(name, dtype, rank, when) #name,
#include "contract.def"
#undef PPV_RES_FIELD
#undef PPV_RES_TENSOR
    };
    char name[32], where[128];
    snprintf(name, sizeof name, PPV_GOLDEN_CALL_FMT, (int)k);
    snprintf(where, sizeof where, "/inference/calls/%s", name);
    hid_t call = H5Gopen2(r->calls, name, H5P_DEFAULT);
    if (call < 0) return -1;
    int rc = walk_keys(call, where, call_keys, 2, cb, ctx);
    for (int part = 0; part < 2 && rc == 0; part++) {
        const char *sub = part ? "result" : "envelope";
        if (H5Lexists(call, sub, H5P_DEFAULT) <= 0) continue;
        hid_t g = H5Gopen2(call, sub, H5P_DEFAULT);
        if (g < 0) {
            rc = -1;
            break;
        }
        char w[160];
        snprintf(w, sizeof w, "%s/%s", where, sub);
        rc = part ? walk_keys(g, w, res_keys, (int)(sizeof res_keys / sizeof *res_keys), cb, ctx)
                  : walk_keys(g, w, env_keys, (int)(sizeof env_keys / sizeof *env_keys), cb, ctx);
        H5Gclose(g);
    }
    H5Gclose(call);
    return rc;
}

int inference_unknown_file_keys(ppv_inference_reader *r,
                                void (*cb)(void *ctx, const char *where, const char *name),
                                void *ctx) {
    static const char *const root_keys[] = {"ppv_format", "producer", "producer_version",
                                            "created",    "kind",     "format_version",
                                            "inference"};
    static const char *const inference_keys[] = {"calls",     "mesh",  "kv_window", "events",
                                                 "generator", "ranks", "memory"};
    static const char *const event_keys[] = {"clock", "count", "d_in", "d_out", "reorder_bound"};
    static const char *const generator_keys[] = {"name",   "version", "params",  "setup_digest",
                                                 "cond_dim", "seed",  "layers",  "d_model",
                                                 "n_heads",  "d_ff"};
    static const struct {
        const char *path;
        const char *const *known;
        int n;
    } parts[] = {
        {"/", root_keys, (int)(sizeof root_keys / sizeof *root_keys)},
        {"/inference", inference_keys, (int)(sizeof inference_keys / sizeof *inference_keys)},
        {"/inference/events", event_keys, (int)(sizeof event_keys / sizeof *event_keys)},
        {"/inference/generator", generator_keys,
         (int)(sizeof generator_keys / sizeof *generator_keys)},
    };
    for (size_t k = 0; k < sizeof parts / sizeof *parts; k++) {
        if (k > 0 && H5Lexists(r->file, parts[k].path, H5P_DEFAULT) <= 0) continue;
        hid_t o = H5Oopen(r->file, parts[k].path, H5P_DEFAULT);
        if (o < 0) return -1;
        int rc = 0;
        if (H5Iget_type(o) == H5I_GROUP) {
            rc = walk_keys(o, k ? parts[k].path : "", parts[k].known, parts[k].n, cb, ctx);
        } else { /* a dataset has attributes only */
            key_walk w = {parts[k].known, parts[k].n, parts[k].path, cb, ctx};
            rc = H5Aiterate2(o, H5_INDEX_NAME, H5_ITER_INC, NULL, key_attr, &w) < 0 ? -1 : 0;
        }
        H5Oclose(o);
        if (rc < 0) return -1;
    }
    return 0;
}

int inference_events_open(ppv_inference_reader *r, ppv_inference_events *how, char *clock,
                          size_t clocklen, int64_t *n, int64_t *count, char *err, size_t errlen) {
    static const char where[] = "/inference/events";
    *n = 0;
    *count = -1;
    if (H5Lexists(r->file, "inference", H5P_DEFAULT) <= 0 ||
        H5Lexists(r->file, where, H5P_DEFAULT) <= 0)
        return 0;
    r->events = H5Dopen2(r->file, where, H5P_DEFAULT);
    hid_t t = r->events < 0 ? -1 : H5Dget_type(r->events);
    hid_t sp = r->events < 0 ? -1 : H5Dget_space(r->events);
    int bad = t < 0 || sp < 0 || H5Tget_class(t) != H5T_COMPOUND ||
              H5Sget_simple_extent_ndims(sp) != 1;
    const char *missing = NULL;
#define MEMBER(f)                                                                                  \
    if (!bad && !missing) {                                                                        \
        int i = H5Tget_member_index(t, #f);                                                        \
        if (i < 0 || H5Tget_member_class(t, (unsigned)i) != H5T_INTEGER) missing = #f;             \
    }
    EVENT_MEMBERS(MEMBER)
#undef MEMBER
    hsize_t dims = 0;
    if (!bad && !missing) H5Sget_simple_extent_dims(sp, &dims, NULL);
    if (sp >= 0) H5Sclose(sp);
    if (t >= 0) H5Tclose(t);
    if (bad) return gerr(err, errlen, "%s: %s: not a one-dimensional compound dataset", r->path, where);
    if (missing)
        return gerr(err, errlen, "%s: %s: no integer member %s", r->path, where, missing);
    char *c = NULL;
    memset(how, 0, sizeof *how);
    if (h5_read_attr_str(r->events, "clock", &c) < 0 ||
        h5_read_attr_i64(r->events, "d_in", &how->d_in) < 0 ||
        h5_read_attr_i64(r->events, "d_out", &how->d_out) < 0 ||
        h5_read_attr_i64(r->events, "reorder_bound", &how->reorder_bound) < 0) {
        free(c);
        return gerr(err, errlen,
                    "%s: %s: attribute clock (a string), d_in, d_out or reorder_bound (integers) "
                    "missing",
                    r->path, where);
    }
    snprintf(clock, clocklen, "%s", c);
    free(c);
    how->clock = clock;
    if (H5Aexists(r->events, "count") > 0 && h5_read_attr_i64(r->events, "count", count) < 0)
        return gerr(err, errlen, "%s: %s: attribute count is not an integer", r->path, where);
    if ((r->event_mem = event_type(0)) < 0) return gerr(err, errlen, "out of memory");
    *n = (int64_t)dims;
    return 1;
}

int inference_events_read(ppv_inference_reader *r, int64_t start, int64_t n, ppv_pp_event *out,
                          char *err, size_t errlen) {
    hsize_t s0 = (hsize_t)start, cnt = (hsize_t)n;
    hid_t fs = H5Dget_space(r->events), ms = H5Screate_simple(1, &cnt, NULL);
    int rc = fs >= 0 && ms >= 0 &&
                     H5Sselect_hyperslab(fs, H5S_SELECT_SET, &s0, NULL, &cnt, NULL) >= 0 &&
                     H5Dread(r->events, r->event_mem, ms, fs, H5P_DEFAULT, out) >= 0
                 ? 0
                 : gerr(err, errlen,
                        "%s: /inference/events: cannot read events %lld to %lld: corrupted data "
                        "(checksum) or values that are not 64-bit integers",
                        r->path, (long long)start, (long long)(start + n - 1));
    if (ms >= 0) H5Sclose(ms);
    if (fs >= 0) H5Sclose(fs);
    return rc;
}

typedef struct rank_walk {
    void (*cb)(void *ctx, int32_t mesh_rank, ppv_pp_rank_record kind, int64_t call_id,
               uint64_t value);
    void *ctx;
    int *has; /* [PPV_RANK_RECORD_COUNT]: a dataset of that kind was read */
    char *err;
    size_t errlen;
    const char *path;
    int rc;
} rank_walk;

static herr_t one_rank(hid_t ranks, const char *name, const H5L_info_t *info, void *data) {
    (void)info;
    rank_walk *w = data;
    char where[160];
    snprintf(where, sizeof where, "/inference/ranks/%s", name);
    hid_t g = H5Gopen2(ranks, name, H5P_DEFAULT);
    int64_t mr = -1;
    if (g < 0 || h5_read_attr_i64(g, "mesh_rank", &mr) < 0 || mr < 0 || mr >= 1000000) {
        if (g >= 0) H5Gclose(g);
        w->rc = gerr(w->err, w->errlen, "%s: %s: not a group with a mesh_rank (0..999999)",
                     w->path, where);
        return 1;
    }
    for (int k = 0; k < PPV_RANK_RECORD_COUNT && !w->rc; k++) {
        const char *kind = ppv_pp_rank_record_name(k);
        if (H5Lexists(g, kind, H5P_DEFAULT) <= 0) continue;
        hid_t d = H5Dopen2(g, kind, H5P_DEFAULT), sp = d < 0 ? -1 : H5Dget_space(d);
        hid_t t = d < 0 ? -1 : H5Dget_type(d);
        hsize_t dims[2] = {0, 0};
        int ok = sp >= 0 && t >= 0 && H5Tget_class(t) == H5T_INTEGER &&
                 H5Sget_simple_extent_ndims(sp) == 2 &&
                 H5Sget_simple_extent_dims(sp, dims, NULL) == 2 && dims[1] == 2 &&
                 dims[0] <= ((hsize_t)1 << 26);
        int64_t *v = ok ? malloc((size_t)(dims[0] ? dims[0] : 1) * 2 * sizeof *v) : NULL;
        if (!ok || !v || H5Dread(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) < 0)
            w->rc = gerr(w->err, w->errlen,
                         "%s: %s/%s: not an (n, 2) integer dataset of call_id and value, or "
                         "corrupted (checksum)",
                         w->path, where, kind);
        else {
            w->has[k] = 1;
            for (hsize_t i = 0; i < dims[0]; i++)
                w->cb(w->ctx, (int32_t)mr, (ppv_pp_rank_record)k, v[2 * i], (uint64_t)v[2 * i + 1]);
        }
        free(v);
        if (t >= 0) H5Tclose(t);
        if (sp >= 0) H5Sclose(sp);
        if (d >= 0) H5Dclose(d);
    }
    H5Gclose(g);
    return w->rc ? 1 : 0;
}

int inference_rank_values(ppv_inference_reader *r, int *has,
                          void (*cb)(void *ctx, int32_t mesh_rank, ppv_pp_rank_record kind,
                                     int64_t call_id, uint64_t value),
                          void *ctx, char *err, size_t errlen) {
    for (int k = 0; k < PPV_RANK_RECORD_COUNT; k++)
        has[k] = 0;
    if (H5Lexists(r->file, "/inference/ranks", H5P_DEFAULT) <= 0) return 0;
    hid_t ranks = H5Gopen2(r->file, "/inference/ranks", H5P_DEFAULT);
    if (ranks < 0)
        return gerr(err, errlen, "%s: /inference/ranks: not a group", r->path);
    rank_walk w = {cb, ctx, has, err, errlen, r->path, 0};
    herr_t rc = H5Literate(ranks, H5_INDEX_NAME, H5_ITER_INC, NULL, one_rank, &w);
    H5Gclose(ranks);
    if (w.rc) return -1;
    return rc < 0 ? gerr(err, errlen, "%s: /inference/ranks: cannot list it", r->path) : 0;
}

/* ---- /inference/memory ------------------------------------------------------------- */

typedef struct mem_walk {
    ppv_inference_reader *r;
    inference_mem *rows;
    int32_t n, cap;
    char *err;
    size_t errlen;
    int rc;
} mem_walk;

/* Attribute name of g as an integer, or absent when it is not there; *bad
 * when it is there but not an integer, *fail when the file cannot say. */
static int64_t attr_or(hid_t g, const char *name, int64_t absent, int *bad, int *fail) {
    int64_t v = absent;
    htri_t ex = H5Aexists(g, name);
    if (ex < 0) *fail = 1;
    else if (ex > 0 && h5_read_attr_i64(g, name, &v) < 0) *bad = 1, v = absent;
    return v;
}

/* Reads the samples of row m from group g: (n, 2) or (n, 3) integers. */
static int read_mem_samples(mem_walk *w, hid_t g, inference_mem *m) {
    htri_t ex = H5Lexists(g, "samples", H5P_DEFAULT);
    if (ex < 0)
        return gerr(w->err, w->errlen, "%s: /inference/memory/%s: cannot list it", w->r->path,
                    m->name);
    if (ex == 0) return 0; /* a peak alone */
    hid_t d = H5Dopen2(g, "samples", H5P_DEFAULT), sp = d < 0 ? -1 : H5Dget_space(d);
    hid_t t = d < 0 ? -1 : H5Dget_type(d);
    hsize_t dims[2] = {0, 0};
    int ok = sp >= 0 && t >= 0 && H5Tget_class(t) == H5T_INTEGER &&
             H5Sget_simple_extent_ndims(sp) == 2 &&
             H5Sget_simple_extent_dims(sp, dims, NULL) == 2 && (dims[1] == 2 || dims[1] == 3) &&
             dims[0] <= ((hsize_t)1 << 26);
    int64_t *v = ok ? malloc((size_t)(dims[0] ? dims[0] : 1) * dims[1] * sizeof *v) : NULL;
    int rc = 0;
    if (!ok)
        snprintf(m->fault, sizeof m->fault,
                 "/inference/memory/%s/samples: not an (n, 2) or (n, 3) integer table of "
                 "t_ns, bytes (and phase)",
                 m->name);
    else if (!v)
        rc = gerr(w->err, w->errlen, "out of memory");
    else if (H5Dread(d, H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) < 0)
        rc = gerr(w->err, w->errlen,
                  "%s: /inference/memory/%s/samples: cannot read it: corrupted data (checksum)",
                  w->r->path, m->name);
    else if ((m->samples = malloc((size_t)(dims[0] ? dims[0] : 1) * 3 * sizeof *m->samples))) {
        m->n = (int64_t)dims[0];
        for (hsize_t i = 0; i < dims[0]; i++) {
            m->samples[3 * i] = v[dims[1] * i];
            m->samples[3 * i + 1] = v[dims[1] * i + 1];
            m->samples[3 * i + 2] = dims[1] == 3 ? v[dims[1] * i + 2] : -1;
        }
    } else
        rc = gerr(w->err, w->errlen, "out of memory");
    free(v);
    if (t >= 0) H5Tclose(t);
    if (sp >= 0) H5Sclose(sp);
    if (d >= 0) H5Dclose(d);
    return rc;
}

static herr_t one_mem_row(hid_t mem, const char *name, const H5L_info_t *info, void *data) {
    (void)info;
    mem_walk *w = data;
    int link = !strcmp(name, "link");
    int32_t named = -1;
    if (!link && (strncmp(name, "rank_", 5) || sscanf(name + 5, "%d", &named) != 1 || named < 0 ||
                  named >= 1000000))
        return 0; /* not a row: conform lists unknown objects elsewhere */
    if (w->n == w->cap) {
        int32_t cap = w->cap ? 2 * w->cap : 8;
        inference_mem *grown = realloc(w->rows, (size_t)cap * sizeof *grown);
        if (!grown) {
            w->rc = gerr(w->err, w->errlen, "out of memory");
            return 1;
        }
        w->rows = grown;
        w->cap = cap;
    }
    inference_mem *m = &w->rows[w->n++];
    memset(m, 0, sizeof *m);
    snprintf(m->name, sizeof m->name, "%s", name);
    m->rank = link ? -1 : named;
    hid_t g = H5Gopen2(mem, name, H5P_DEFAULT);
    if (g < 0) {
        snprintf(m->fault, sizeof m->fault, "/inference/memory/%s: not a group", name);
        return 0;
    }
    int bad = 0, fail = 0;
    int64_t rank = attr_or(g, "rank", INT64_MIN, &bad, &fail);
    m->peak_bytes = attr_or(g, "peak_bytes", INT64_MIN, &bad, &fail);
    m->held_at_end = attr_or(g, "held_at_end_bytes", -1, &bad, &fail);
    m->peak_t_ns = attr_or(g, "peak_t_ns", INT64_MIN, &bad, &fail);
    m->peak_chunk = attr_or(g, "peak_chunk", INT64_MIN, &bad, &fail);
    m->peak_call_id = attr_or(g, "peak_call_id", INT64_MIN, &bad, &fail);
    for (int k = 0; k < PPV_MEM_KIND_COUNT; k++) {
        char at[48];
        snprintf(at, sizeof at, "at_peak_%s", ppv_pp_mem_kind_name(k));
        m->at_peak[k] = attr_or(g, at, -1, &bad, &fail);
    }
    if (fail) {
        H5Gclose(g);
        w->rc = gerr(w->err, w->errlen, "%s: /inference/memory/%s: cannot list its attributes",
                     w->r->path, name);
        return 1;
    }
    char *phase = NULL;
    int ex = H5Aexists(g, "peak_phase"), prc = ex > 0 ? h5_read_attr_str(g, "peak_phase", &phase) : 0;
    if (ex < 0 || prc == -2) { /* the file or memory failed, not the recorder */
        H5Gclose(g);
        w->rc = gerr(w->err, w->errlen, "%s: /inference/memory/%s: cannot read its peak_phase",
                     w->r->path, name);
        return 1;
    }
    if (prc < 0) bad = 1;
    else if (phase) snprintf(m->peak_phase, sizeof m->peak_phase, "%s", phase);
    free(phase);
    if (bad)
        snprintf(m->fault, sizeof m->fault,
                 "/inference/memory/%s: an attribute of the wrong type (rank, peak_bytes, "
                 "peak_t_ns, peak_chunk, peak_call_id, held_at_end_bytes and at_peak_* are "
                 "integers, peak_phase a string)",
                 name);
    else if (m->peak_bytes == INT64_MIN)
        snprintf(m->fault, sizeof m->fault, "/inference/memory/%s: no peak_bytes", name);
    else if (!link && rank != named)
        snprintf(m->fault, sizeof m->fault,
                 "/inference/memory/%s: its rank attribute is %s, not %d", name,
                 rank == INT64_MIN ? "missing" : "another", (int)named);
    else if (read_mem_samples(w, g, m) < 0)
        w->rc = -1;
    H5Gclose(g);
    return w->rc ? 1 : 0;
}

static int by_mem_rank(const void *a, const void *b) {
    const inference_mem *x = a, *y = b;
    uint32_t rx = (uint32_t)x->rank, ry = (uint32_t)y->rank; /* the link (-1) last */
    return rx < ry ? -1 : rx > ry;
}

int inference_memory(ppv_inference_reader *r, inference_mem **rows, int32_t *nrows, char *clock,
                     size_t clocklen, char *err, size_t errlen) {
    *rows = NULL;
    *nrows = 0;
    clock[0] = 0;
    htri_t inf = H5Lexists(r->file, "inference", H5P_DEFAULT);
    htri_t ex = inf > 0 ? H5Lexists(r->file, "/inference/memory", H5P_DEFAULT) : inf;
    if (ex < 0) return gerr(err, errlen, "%s: /inference: cannot list it", r->path);
    if (ex == 0) return 0;
    hid_t mem = H5Gopen2(r->file, "/inference/memory", H5P_DEFAULT);
    if (mem < 0) return gerr(err, errlen, "%s: /inference/memory: not a group", r->path);
    char *c = NULL;
    htri_t cex = H5Aexists(mem, "clock");
    int crc = cex > 0 ? h5_read_attr_str(mem, "clock", &c) : 0;
    if (cex < 0 || crc == -2) {
        free(c);
        H5Gclose(mem);
        return gerr(err, errlen, "%s: /inference/memory: cannot read its clock", r->path);
    }
    if (crc == 0 && c) snprintf(clock, clocklen, "%s", c);
    free(c);
    mem_walk w = {r, NULL, 0, 0, err, errlen, 0};
    herr_t rc = H5Literate(mem, H5_INDEX_NAME, H5_ITER_INC, NULL, one_mem_row, &w);
    H5Gclose(mem);
    if (!w.rc && rc < 0) w.rc = gerr(err, errlen, "%s: /inference/memory: cannot list it", r->path);
    if (w.rc) {
        inference_memory_free(w.rows, w.n);
        return -1;
    }
    if (w.n) qsort(w.rows, (size_t)w.n, sizeof *w.rows, by_mem_rank);
    *rows = w.rows;
    *nrows = w.n;
    return 1;
}

void inference_memory_free(inference_mem *rows, int32_t nrows) {
    for (int32_t k = 0; k < nrows; k++)
        free(rows[k].samples);
    free(rows);
}
