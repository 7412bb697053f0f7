/* contract.h - the PP inference contract's tables (spec/contract.def), as
 * the rules (rules.c) and the wire framing (frame.c) both read them;
 * private to the pp room.
 */
#ifndef PPV_PP_CONTRACT_H
#define PPV_PP_CONTRACT_H

#include <inttypes.h>
#include <stdio.h>

#include "pp_internal.h"

typedef enum field_kind { KIND_INT, KIND_BOOL, KIND_FLOAT, KIND_STR } field_kind;
typedef enum field_when {
    WHEN_ALWAYS,
    WHEN_INFER,
    WHEN_OK,
    WHEN_RECOMPUTE,
    WHEN_OPTIONAL /* an INT written only when not 0, never required */
} field_when;

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

/* One message's tables: an envelope's or a result's. */
typedef struct message_desc {
    const char *what;
    const field_desc *fields;
    int nfields;
    const tensor_desc *tensors;
    int ntensors;
} message_desc;

/* An envelope's and a result's tables (rules.c). */
extern const message_desc pp_envelope_desc;
extern const message_desc pp_result_desc;

#define COUNT(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Formats the failure's message and returns the mode (rules.c). */
ppv_failure pp_failf(ppv_failure mode, char *msg, size_t n, const char *fmt, ...)
    __attribute__((format(printf, 4, 5), cold));

/* The ids every message names: "call_id 7, chunk_index 3, cache_epoch 0". */
#define IDS_FMT "call_id %" PRId64 ", chunk_index %" PRId64 ", cache_epoch %" PRId64
#define IDS(x) (x)->call_id, (x)->chunk_index, (x)->cache_epoch

/* The same text from the three ids at v, written into buf only when a
 * failure is reported. */
static inline const char *ids_text(const int64_t *v, char *buf, size_t n) {
    snprintf(buf, n, IDS_FMT, v[0], v[1], v[2]);
    return buf;
}
#define IDS_TEXT(v) ids_text((v), idsbuf, sizeof idsbuf)

static inline int64_t *int_at(void *base, const field_desc *d) {
    return (int64_t *)((char *)base + d->offset);
}

static inline int *bool_at(void *base, const field_desc *d) {
    return (int *)((char *)base + d->offset);
}

static inline double *float_at(void *base, const field_desc *d) {
    return (double *)((char *)base + d->offset);
}

static inline char *str_at(void *base, const field_desc *d) {
    return (char *)base + d->offset;
}

static inline ppv_tensor *tensor_at(void *base, const tensor_desc *d) {
    return (ppv_tensor *)((char *)base + d->offset);
}

#endif
