/* ppv_spec.h - the contract, written once: action kinds, element types and
 * exit codes, generated from the X-macro tables beside this header.
 *
 * This layer depends on nothing. Every other layer takes these names from
 * here instead of spelling them again.
 */
#ifndef PPV_SPEC_H
#define PPV_SPEC_H

#include <stddef.h>
#include <string.h>

/* What an action carries and how it behaves (PPV_AF_* bits). */
enum {
    PPV_AF_COMPUTE = 1 << 0, /* occupies the rank for a cost */
    PPV_AF_STAGE = 1 << 1,   /* has a stage index */
    PPV_AF_MB = 1 << 2,      /* has a microbatch index */
    PPV_AF_COMM = 1 << 3,    /* point-to-point message */
    PPV_AF_SEND = 1 << 4,
    PPV_AF_RECV = 1 << 5,
    PPV_AF_PEER = 1 << 6, /* explicit peer/tag/bytes (native SEND/RECV) */
    PPV_AF_COLL = 1 << 7, /* collective on a named group */
    PPV_AF_ROOT = 1 << 8, /* collective with a root */
    PPV_AF_TORCH = 1 << 9 /* part of PyTorch's CSV grammar */
};

/* The golden file contract (spec/golden-format.md): the root attribute
 * ppv_format holds PPV_GOLDEN_FORMAT_NAME and format_version at most
 * PPV_GOLDEN_FORMAT_VERSION. */
#define PPV_GOLDEN_FORMAT_NAME "ppv-golden"
enum { PPV_GOLDEN_FORMAT_VERSION = 1 };

/* Numbered groups of the golden layout: /model/layer_NNNN,
 * /training/grads/layer_NNNN and /training/inputs/mb_NNNN. */
#define PPV_GOLDEN_LAYER_FMT "layer_%04d"
#define PPV_GOLDEN_MB_FMT "mb_%04d"

/* Shapes of a microbatch's input datasets (golden_inputs.def). */
typedef enum ppv_golden_shape {
    PPV_GOLDEN_TOKENS, /* (seq_len, d_model) bf16 */
    PPV_GOLDEN_COND,   /* (cond_len, d_model) bf16 */
    PPV_GOLDEN_SCALAR  /* (1) fp32 */
} ppv_golden_shape;

/* ppv's version, from the CMake project: PPV_VERSION_STRING. */
#include "ppv_version.h"

typedef enum ppv_action_kind {
#define PPV_ACTION(name, token, flags) PPV_ACT_##name,
#include "actions.def"
#undef PPV_ACTION
    PPV_ACT_COUNT
} ppv_action_kind;

typedef enum ppv_dtype {
#define PPV_DTYPE(name, token, bytes) PPV_DTYPE_##name,
#include "dtypes.def"
#undef PPV_DTYPE
    PPV_DTYPE_COUNT
} ppv_dtype;

typedef enum ppv_exit {
#define PPV_EXIT(name, value, meaning) PPV_EXIT_##name = value,
#include "exit_codes.def"
#undef PPV_EXIT
} ppv_exit;

/* Spelling of an action kind in schedule files. */
static inline const char *ppv_action_token(ppv_action_kind k) {
    static const char *const tokens[] = {
#define PPV_ACTION(name, token, flags) token,
#include "actions.def"
#undef PPV_ACTION
    };
    return (unsigned)k < PPV_ACT_COUNT ? tokens[k] : "?";
}

/* PPV_AF_* bits of an action kind. */
static inline unsigned ppv_action_flags(ppv_action_kind k) {
    static const unsigned flags[] = {
#define PPV_ACTION(name, token, fl) (fl),
#include "actions.def"
#undef PPV_ACTION
    };
    return (unsigned)k < PPV_ACT_COUNT ? flags[k] : 0u;
}

/* Action kind spelled by the first len bytes of s, or -1. */
static inline int ppv_action_lookup(const char *s, size_t len) {
    for (int k = 0; k < PPV_ACT_COUNT; k++) {
        const char *t = ppv_action_token((ppv_action_kind)k);
        if (strlen(t) == len && memcmp(t, s, len) == 0) return k;
    }
    return -1;
}

static inline const char *ppv_dtype_token(ppv_dtype d) {
    static const char *const tokens[] = {
#define PPV_DTYPE(name, token, bytes) token,
#include "dtypes.def"
#undef PPV_DTYPE
    };
    return (unsigned)d < PPV_DTYPE_COUNT ? tokens[d] : "?";
}

/* Element type spelled by s (NUL-terminated), or -1. */
static inline int ppv_dtype_lookup(const char *s) {
    for (int d = 0; d < PPV_DTYPE_COUNT; d++)
        if (strcmp(ppv_dtype_token((ppv_dtype)d), s) == 0) return d;
    return -1;
}

#endif
