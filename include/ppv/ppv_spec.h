/* ppv_spec.h - the contract, written once: action kinds, element types and
 * exit codes, generated from the X-macro tables beside this header.
 *
 * This layer depends on nothing. Every other layer takes these names from
 * here instead of spelling them again.
 */
#ifndef PPV_SPEC_H
#define PPV_SPEC_H

#include <stddef.h>
#include <stdint.h>
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
enum {
    PPV_GOLDEN_FORMAT_VERSION = 2,  /* the largest this ppv reads */
    PPV_GOLDEN_TRAINING_VERSION = 1, /* a training file */
    PPV_GOLDEN_CALLS_VERSION = 1,    /* an inference recording of calls alone */
    PPV_GOLDEN_EVENTS_VERSION = 2    /* one with stage 0's event log */
};

/* Numbered groups of the golden layout: /model/layer_NNNN,
 * /training/grads/layer_NNNN and /training/inputs/mb_NNNN. */
#define PPV_GOLDEN_LAYER_FMT "layer_%04d"
#define PPV_GOLDEN_MB_FMT "mb_%04d"
/* One call of an inference recording: /inference/calls/call_NNNNNN. */
#define PPV_GOLDEN_CALL_FMT "call_%06d"

/* Shapes of a microbatch's input datasets (golden_inputs.def). */
typedef enum ppv_golden_shape {
    PPV_GOLDEN_TOKENS, /* (seq_len, d_model) bf16 */
    PPV_GOLDEN_COND,   /* (cond_len, d_model) bf16 */
    PPV_GOLDEN_SCALAR  /* (1) fp32 */
} ppv_golden_shape;

/* ppv's version, from the CMake project: PPV_VERSION_STRING. */
#include "ppv_version.h"

/* ---- the PP inference contract (contract.def) -------------------------------- */

/* The versions this ppv reads and writes: any other is refused before
 * anything blocks on it. */
enum { PPV_PP_ENVELOPE_VERSION = 1, PPV_PP_RESULT_VERSION = 1 };

typedef enum ppv_pp_action {
#define PPV_PP_ACTION(name, value) PPV_PP_##name = value,
#include "contract.def"
#undef PPV_PP_ACTION
    PPV_PP_ACTION_COUNT
} ppv_pp_action;

typedef enum ppv_failure {
#define PPV_FAILURE(name, id, text) PPV_FAIL_##name,
#include "contract.def"
#undef PPV_FAILURE
    PPV_FAIL_COUNT
} ppv_failure;

/* "FM-02", "PPV-ORDER", ... ("none" for PPV_FAIL_NONE). */
static inline const char *ppv_failure_id(ppv_failure f) {
    static const char *const ids[] = {
#define PPV_FAILURE(name, id, text) id,
#include "contract.def"
#undef PPV_FAILURE
    };
    return (unsigned)f < PPV_FAIL_COUNT ? ids[f] : "?";
}

/* What a failure mode means, in a few words. */
static inline const char *ppv_failure_text(ppv_failure f) {
    static const char *const texts[] = {
#define PPV_FAILURE(name, id, text) text,
#include "contract.def"
#undef PPV_FAILURE
    };
    return (unsigned)f < PPV_FAIL_COUNT ? texts[f] : "?";
}

/* The failure mode whose id text starts with, followed by a space, a colon
 * or the end ("FM-23: the leader ..."), else PPV_FAIL_NONE. */
static inline ppv_failure ppv_failure_named(const char *text) {
    for (int f = 1; f < PPV_FAIL_COUNT; f++) {
        const char *id = ppv_failure_id((ppv_failure)f);
        size_t n = 0;
        while (id[n] && text[n] == id[n]) n++;
        if (!id[n] && (text[n] == ' ' || text[n] == ':' || !text[n])) return (ppv_failure)f;
    }
    return PPV_FAIL_NONE;
}

static inline const char *ppv_pp_action_name(int64_t a) {
    static const char *const names[] = {
#define PPV_PP_ACTION(name, value) #name,
#include "contract.def"
#undef PPV_PP_ACTION
    };
    return a >= 0 && a < PPV_PP_ACTION_COUNT ? names[a] : "?";
}

enum { PPV_TENSOR_MAX_RANK = 8 };

/* A tensor of the contract: data == NULL means absent. The elements are
 * dims[0] x ... x dims[rank-1] values of dtype, contiguous, row-major. */
typedef struct ppv_tensor {
    int dtype; /* ppv_dtype */
    int rank;
    int64_t dims[PPV_TENSOR_MAX_RANK];
    void *data;
} ppv_tensor;

#define PPV_FIELD_DECL_INT(name) int64_t name;
#define PPV_FIELD_DECL_BOOL(name) int name;
#define PPV_FIELD_DECL_FLOAT(name) double name;
#define PPV_FIELD_DECL_STR(name) char name[256];

/* PPEnvelopeV1: stage 0 -> leader -> mesh. */
typedef struct ppv_envelope {
#define PPV_ENV_FIELD(name, kind, when) PPV_FIELD_DECL_##kind(name)
#include "contract.def"
#undef PPV_ENV_FIELD
#define PPV_ENV_TENSOR(name, dtype, rank, when) ppv_tensor name;
#include "contract.def"
#undef PPV_ENV_TENSOR
    /* not the contract's: what a receiver's unframe filtered out, metadata
     * keys it does not know (a newer sender's), and the first one's name */
    int32_t unknown_fields;
    char unknown_field[64];
} ppv_envelope;

/* PPResultV1: leader -> stage 0, exactly one per INFER, also on error. */
typedef struct ppv_result {
#define PPV_RES_FIELD(name, kind, when) PPV_FIELD_DECL_##kind(name)
#include "contract.def"
#undef PPV_RES_FIELD
#define PPV_RES_TENSOR(name, dtype, rank, when) ppv_tensor name;
#include "contract.def"
#undef PPV_RES_TENSOR
    int32_t unknown_fields; /* as the envelope's */
    char unknown_field[64];
} ppv_result;

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
    static const unsigned char lens[] = {
#define PPV_ACTION(name, token, fl) (unsigned char)(sizeof(token) - 1),
#include "actions.def"
#undef PPV_ACTION
    };
    for (int k = 0; k < PPV_ACT_COUNT; k++) {
        const char *t = ppv_action_token((ppv_action_kind)k);
        size_t j = 0;
        if (lens[k] != len) continue;
        while (j < len && t[j] == s[j])
            j++;
        if (j == len) return k;
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
