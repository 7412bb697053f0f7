/* golden_internal.h - HDF5 helpers and the element comparator shared by
 * record.c, replay.c and diff.c. Private to golden/. */
#ifndef PPV_GOLDEN_INTERNAL_H
#define PPV_GOLDEN_INTERNAL_H

#include <hdf5.h>
#include <stdarg.h>
#include <stdio.h>

#include "ppv_golden.h"

/* Formats a message into err and returns -1, for `return gerr(...)`. */
static inline int gerr(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static inline int gerr(char *err, size_t errlen, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    if (err && errlen) vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* ---- files written safely (h5out.c) ---- */

#include <signal.h>

enum { H5_CLEANUP_SIGNALS = 3 }; /* SIGINT, SIGTERM, SIGHUP */

/* The cleanup signals' actions before a write took them over. */
typedef struct h5_tmp_guard {
    struct sigaction old[H5_CLEANUP_SIGNALS];
    int installed[H5_CLEANUP_SIGNALS];
} h5_tmp_guard;

struct h5_image;

/* An HDF5 file being written: built in memory, written whole at commit. */
typedef struct h5_out {
    struct h5_image *image; /* the core driver's buffer (h5out.c) */
    hid_t file;
    hid_t gcpl; /* for groups: no modification time (h5_out_group) */
    char path[4096], dir[4096], tmp[8300];
    int guarded;
    h5_tmp_guard guard;
    int stream; /* standard output, a FIFO or a device: written straight through */
    int fd;     /* where the file goes (not a stream): an anonymous file or the temporary */
    int anon;   /* fd is an anonymous file (O_TMPFILE), else the temporary o->tmp */
} h5_out;

/* Starts an output: HDF5 builds the file in memory (its core driver), and
 * commit writes it whole. A symbolic link is followed (its target is
 * written, the link kept). A regular file or a new name goes to an
 * anonymous file in the target's folder (O_TMPFILE), linked in only when
 * complete, so even SIGKILL leaves nothing; where the file system has no
 * anonymous files, to a temporary name beside the target, guarded against
 * SIGINT, SIGTERM and SIGHUP (stale ones of dead writers in the folder are
 * removed). Standard output ("-"), a FIFO or a character device is written
 * straight through at commit, never replaced; anything else is refused
 * (ppv_output_target). 0, or -1 with the reason in err (what: "the golden
 * file", for messages). */
int h5_out_create(h5_out *o, const char *path, const char *what, char *err, size_t errlen);
/* A group with no modification time. */
hid_t h5_out_group(const h5_out *o, hid_t parent, const char *name);
/* Closes the file and writes it whole, syncs it and puts it in place;
 * on failure leaves nothing behind. 0, or -1 with the reason. */
int h5_out_commit(h5_out *o, const char *what, char *err, size_t errlen);
/* Closes and removes the temporary file. */
void h5_out_abort(h5_out *o);
/* An object of a file, as the walk lists it: its path ("/", "/model", ...). */
typedef struct h5_obj {
    char *path;
    H5O_type_t type;
} h5_obj;

typedef struct h5_objlist {
    h5_obj *v;
    size_t n, cap;
} h5_objlist;

/* Lists every object of file f (named file in messages) reachable from
 * its root by hard links into l (walk.c): the one walk diff and replay
 * share, so they judge a file's structure alike. 0, or -1 with the reason
 * in err (l holds what was listed; free it either way). */
int h5_list_objects(hid_t f, const char *file, h5_objlist *l, char *err, size_t errlen);
void h5_objlist_free(h5_objlist *l);

/* The one opening of a file to read that replay, diff and conform share:
 * readable, HDF5, and every object's header and attributes read once by
 * the walk above (h5dump's reading), so a corrupted link, header or
 * attribute block is the same error, exit 2, in every command. The file,
 * or -1 with the reason. */
hid_t h5_open_checked(const char *path, char *err, size_t errlen);

/* Why a write failed, from the errno the failing write left (e): the OS's
 * reason for a full or read-only disk or a size limit, else a guess. */
const char *h5_write_failure(int e);
/* The `created` attribute: now, or SOURCE_DATE_EPOCH when set. */
void h5_created_now(char *buf, size_t len);

/* Silences HDF5's own error printing; ppv reports errors itself. */
void h5_quiet(void);

/* Opens path read-only with HDF5's metadata cache held to 1 MiB of file
 * metadata (decoded, several times that in memory), so a file of many
 * objects is read in bounded memory; -1 if it cannot. */
hid_t h5_open_read(const char *path);

/* The bf16 file type of spec/golden-format.md (caller closes). */
hid_t h5_bf16_type(void);
/* 1 if t is that type (a 16-bit float with bf16's fields). */
int h5_is_bf16(hid_t t);

int h5_attr_i64(hid_t obj, const char *name, int64_t v);
int h5_attr_f64(hid_t obj, const char *name, double v);
int h5_attr_str(hid_t obj, const char *name, const char *v);
/* Reads an integer attribute; -1 if absent or not an integer. */
int h5_read_attr_i64(hid_t obj, const char *name, int64_t *v);
/* Reads a string attribute (fixed or variable length) into a malloc'd
 * string; -1 if absent or not a string. */
/* A string attribute, malloc'd into *v: 0, -1 when there is none (or it
 * is no single string), -2 when out of memory. */
int h5_read_attr_str(hid_t obj, const char *name, char **v);

/* 1 if f is a ppv golden file of a supported version, 0 if it is no ppv
 * file, -1 (reason in err) for a ppv file this ppv cannot read. */
int h5_ppv_file(hid_t f, const char *path, char *err, size_t errlen);

/* One microbatch input dataset (spec/golden_inputs.def). */
typedef struct golden_input {
    const char *name;
    ppv_golden_shape shape;
    size_t field; /* offsetof the ppv_mb_inputs field */
} golden_input;
extern const golden_input golden_inputs[];
extern const int golden_ninputs;

/* Its dataset shape for config c: the rank, dims filled. */
int golden_input_dims(const golden_input *gi, const ppv_model_config *c, hsize_t dims[2]);
/* Where its values live in in: the field itself for a scalar, else what
 * the field points to. */
void *golden_input_data(const golden_input *gi, ppv_mb_inputs *in);
/* The field itself, for a tensor field's pointer. */
ppv_bf16 **golden_input_tensor(const golden_input *gi, ppv_mb_inputs *in);

/* Writes a chunked, Fletcher-32-checked dataset. */
int h5_write(hid_t loc, const char *name, hid_t ftype, hid_t mtype, int rank, const hsize_t *dims,
             const void *data);

/* Reads a dataset whose shape must be exactly dims (rank dimensions);
 * -1 with "path: what is wrong" in err. */
int h5_read(hid_t loc, const char *name, hid_t mtype, int rank, const hsize_t *dims, void *data,
            char *err, size_t errlen);

/* Element comparison ------------------------------------------------------- */

typedef enum elem_kind { ELEM_F32, ELEM_F64, ELEM_BF16, ELEM_INT, ELEM_RAW } elem_kind;

/* Adds to e the comparison of n elements starting at flat index base.
 * a and b hold values of kind k (ELEM_INT: int64; ELEM_RAW: elem_size
 * bytes each, compared as bytes). dims/rank name indices in reports. */
void compare_block(ppv_diff_entry *e, elem_kind k, size_t elem_size, const void *a, const void *b,
                   size_t n, uint64_t base, const hsize_t *dims, int rank,
                   const ppv_diff_options *o);

/* Counts one differing element at flat index idx in e (a, b its values,
 * NaN for values that are not numbers; ulps their distance) and lists it
 * among the first o->max_report. */
void diff_note(ppv_diff_entry *e, const ppv_diff_options *o, uint64_t idx, double a, double b,
               uint64_t ulps, const hsize_t *dims, int rank);

/* Values stored raw, in the comparison's memory layout, at a file
 * offset. */
typedef struct raw_side {
    int fd;
    uint64_t offset;
} raw_side;

/* Adds to e the comparison of n elements of kind k stored raw at a and b
 * (dims/rank name indices), read with pread in 1 MiB blocks by up to
 * o->threads threads (0: one per CPU, at most 8). The report is the same
 * for any number of threads. -1 with the reason if a read fails or the
 * file ends. */
int compare_raw(ppv_diff_entry *e, elem_kind k, size_t esize, raw_side a, raw_side b, uint64_t n,
                const hsize_t *dims, int rank, const ppv_diff_options *o, char *err, size_t errlen);

/* Appends an entry to r and returns it (zeroed, path and what set); NULL
 * when out of memory. */
ppv_diff_entry *diff_add(ppv_diff_report *r, const char *path, const char *what);

/* Appends a one-count difference (a whole object, type, shape or
 * attribute) described by fmt; 0, or -1 when out of memory. */
int diff_mismatch(ppv_diff_report *r, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Ends the comparison of one dataset's values, the last entry: tells
 * o->on_values, then removes the entry if it holds no difference. */
void diff_values_done(ppv_diff_report *r, const ppv_diff_options *o);

/* ---- inference recordings beyond their calls (inference.c, for conform.c) ---- */

/* The file's format_version (0 when it has none). */
int64_t inference_format_version(ppv_inference_reader *r);
/* Links in /inference/calls (-1 when they cannot be counted). */
int64_t inference_links(ppv_inference_reader *r);
/* Calls held in order from call 0: the first index with no call_NNNNNN. */
int64_t inference_present(ppv_inference_reader *r);
/* The event log (format version 2): 1 with *how (its clock copied into
 * clock), *n events and its count attribute in *count (-1: none), 0 when
 * the file has none, -1 when it is not what the format says (err names
 * the object). */
int inference_events_open(ppv_inference_reader *r, ppv_inference_events *how, char *clock,
                          size_t clocklen, int64_t *n, int64_t *count, char *err, size_t errlen);
/* As inference_unknown_keys, for the file's own groups: the root,
 * /inference, its event log and its generator. */
int inference_unknown_file_keys(ppv_inference_reader *r,
                                void (*cb)(void *ctx, const char *where, const char *name),
                                void *ctx);
/* Events [start, start + n) into out. 0, or -1 with the reason. */
int inference_events_read(ppv_inference_reader *r, int64_t start, int64_t n, ppv_pp_event *out,
                          char *err, size_t errlen);
/* The mesh ranks' own records (/inference/ranks): cb for every (call_id,
 * value) of every rank and kind; has[kind] says whether any dataset of that
 * kind was there. 0, or -1 with the reason (a dataset not as the format
 * says, naming it). */
int inference_rank_values(ppv_inference_reader *r, int *has,
                          void (*cb)(void *ctx, int32_t mesh_rank, ppv_pp_rank_record kind,
                                     int64_t call_id, uint64_t value),
                          void *ctx, char *err, size_t errlen);
/* One row of /inference/memory as read: what conform judges. A row the
 * recorder wrote wrong (no peak_bytes, samples not an (n, 2) or (n, 3)
 * integer table, a rank that is not its name's) has fault set, and nothing
 * else of it is judged. */
typedef struct inference_mem {
    char name[32]; /* "rank_0001" or "link" */
    int32_t rank;  /* -1: the link */
    int64_t n;
    int64_t *samples; /* [n][3]: t_ns, bytes, phase (-1 where not recorded) */
    int64_t peak_bytes, held_at_end; /* held_at_end -1: not recorded */
    int64_t peak_t_ns, peak_chunk, peak_call_id; /* INT64_MIN: not recorded */
    char peak_phase[24];                          /* "" when not recorded */
    int64_t at_peak[PPV_MEM_KIND_COUNT];          /* -1: not recorded */
    char fault[256];
} inference_mem;
/* The memory part: 1 with *rows (ranks in order, then the link; free with
 * inference_memory_free) and its clock, 0 when the file has none, -1 when
 * it cannot be read (err). */
int inference_memory(ppv_inference_reader *r, inference_mem **rows, int32_t *nrows, char *clock,
                     size_t clocklen, char *err, size_t errlen);
void inference_memory_free(inference_mem *rows, int32_t nrows);

/* What a recorder got wrong in a call that can still be read (conform
 * judges these as violations, with the call's ids, where replay refuses
 * the file): a tensor present with another dtype or rank than the
 * contract's (FM-07), a boolean attribute that is an integer other than 0
 * or 1 (PPV-FIELD). */
enum { INFERENCE_MAX_FAULTS = 16 };
typedef struct inference_fault {
    int in_result; /* 0: the envelope's, 1: the result's */
    ppv_failure rule;
    char message[256];
} inference_fault;
/* From now on ppv_inference_read records such faults instead of failing
 * (the tensor is then absent, the boolean 1). */
void inference_set_lenient(ppv_inference_reader *r);
/* The faults of the call ppv_inference_read read last: how many, in *out. */
int inference_faults(const ppv_inference_reader *r, const inference_fault **out);

/* Calls cb(ctx, where, name) for every attribute or object of call k (its
 * group, its envelope and its result) that spec/contract.def does not
 * define; 0, or -1 when they cannot be listed. */
int inference_unknown_keys(ppv_inference_reader *r, int64_t k,
                           void (*cb)(void *ctx, const char *where, const char *name), void *ctx);

#endif
