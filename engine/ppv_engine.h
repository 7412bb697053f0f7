/* ppv_engine.h - the engine layer's one public header: the schedule IR, the
 * PyTorch CSV and native readers/writers, the schedule generators, ppv's
 * send/recv lowering and the static verifier (deadlock, matching, memory,
 * time).
 *
 * Functions return 0 on success and a negative value on failure, with a
 * message in the caller's buffer; no function here exits the process.
 */
#ifndef PPV_ENGINE_H
#define PPV_ENGINE_H

#include <stdint.h>
#include <stdio.h>

#include "ppv_spec.h"

/* ------------------------------------------------------------------------ */
/* The schedule IR                                                          */

/* One action of one rank's program. Fields a kind does not carry are -1. */
typedef struct ppv_action {
    uint8_t kind;    /* ppv_action_kind */
    uint8_t dtype;   /* ppv_dtype, collectives and native messages */
    int16_t group;   /* collective: index into ppv_schedule.groups */
    int32_t stage;   /* stage index */
    int32_t mb;      /* microbatch index */
    union {          /* what only some kinds carry */
        struct {
            int32_t peer; /* native SEND/RECV: peer rank */
            int32_t tag;  /* native SEND/RECV: tag that both sides must agree on */
        };
        int32_t root;  /* BCAST (and the other collectives, -1): root as a group rank */
        int32_t count; /* CHUNK: expected_generator_calls */
    };
    int32_t overlap; /* id shared by the sub-actions of one OVERLAP_F_B cell, 0 if none */
    int32_t step;    /* time step (CSV column) of the action */
    int32_t line;    /* source position, 0 when generated */
    int32_t col;
    int64_t bytes; /* message or collective size in bytes, 0 = default */
} ppv_action;

typedef struct ppv_program {
    ppv_action *acts;
    int32_t n, cap;
} ppv_program;

/* A named process group for collectives; ranks are global ranks. */
typedef struct ppv_group {
    char name[32];
    int32_t *ranks;
    int32_t n;
} ppv_group;

typedef enum ppv_form { PPV_FORM_COMPUTE_ONLY, PPV_FORM_COMPUTE_COMMS } ppv_form;

/* PyTorch's two CSV dialects: today's (I = backward for inputs, B = full
 * backward) and the older one (B = backward for inputs, BW = full backward). */
typedef enum ppv_dialect { PPV_DIALECT_AUTO, PPV_DIALECT_CURRENT, PPV_DIALECT_LEGACY } ppv_dialect;

typedef struct ppv_schedule {
    int32_t nranks;
    int32_t nstages;     /* 0 when no action names a stage */
    int32_t nmb;         /* microbatches */
    int32_t *stage_rank; /* [nstages]: rank that computes the stage */
    ppv_program *prog;   /* [nranks] */
    ppv_group *groups;
    int32_t ngroups;
    ppv_form form;
    ppv_dialect dialect; /* dialect the file was read in */
    char name[256];      /* file name for messages */
} ppv_schedule;

/* A new empty schedule of nranks programs, or NULL when out of memory. */
ppv_schedule *ppv_schedule_new(int32_t nranks);
void ppv_schedule_free(ppv_schedule *s);

/* An action of kind k with every optional field unset. */
ppv_action ppv_action_make(ppv_action_kind k, int32_t stage, int32_t mb);

/* Appends a copy of a to rank's program. Returns 0, or -1 when out of memory. */
int ppv_schedule_append(ppv_schedule *s, int32_t rank, const ppv_action *a);

/* Adds a process group; returns its index, or -1 (out of memory or a name
 * already used). */
int ppv_schedule_add_group(ppv_schedule *s, const char *name, const int32_t *ranks, int32_t n);

/* Index of the group named name, or -1. */
int ppv_schedule_find_group(const ppv_schedule *s, const char *name);

/* Infers nstages, nmb (unless set beforehand), form and the stage->rank map
 * from the programs. Returns 0, or -1 with a message (a stage computed on two
 * ranks, a stage that no rank computes). */
int ppv_schedule_finish(ppv_schedule *s, char *err, size_t errlen);

/* Writes the action's compact spelling ("2F0", "1SEND_B3", "SEND>1#4",
 * "ALLREDUCE@mesh") into buf. */
void ppv_action_format(const ppv_schedule *s, const ppv_action *a, char *buf, size_t n);

/* Total number of actions over all ranks. */
int64_t ppv_schedule_size(const ppv_schedule *s);

/* ------------------------------------------------------------------------ */
/* Reading and writing                                                      */

/* Reads a schedule file; the format is detected from its first line (a
 * native file starts with "ppv-schedule"). On bad input returns -1 with
 * "file:line:col: rank R cell 'X': what is wrong" in err. */
int ppv_schedule_load(const char *path, ppv_dialect dialect, ppv_schedule **out, char *err,
                      size_t errlen);

/* Parses PyTorch CSV text (name is used in messages). */
int ppv_schedule_parse_csv(const char *text, size_t len, const char *name, ppv_dialect dialect,
                           ppv_schedule **out, char *err, size_t errlen);

/* Parses ppv's native text format (spec/schedule-format.md). */
int ppv_schedule_parse_native(const char *text, size_t len, const char *name, ppv_schedule **out,
                              char *err, size_t errlen);

/* Writes the CSV PyTorch reads: a row per rank, a cell per time step, empty
 * cells for idle steps. Fails (-1) when the schedule uses ppv extensions. */
int ppv_schedule_write_csv(const ppv_schedule *s, FILE *f, char *err, size_t errlen);

/* Writes the native format; every schedule can be written this way. */
int ppv_schedule_write_native(const ppv_schedule *s, FILE *f);

/* ------------------------------------------------------------------------ */
/* Generators                                                               */

typedef struct ppv_gen_params {
    int32_t ranks;
    int32_t microbatches;
    int32_t stages_per_rank; /* 0 = the kind's default */
} ppv_gen_params;

/* Generator names, NULL-terminated. */
const char *const *ppv_generator_names(void);

/* Builds a compute-only schedule of the named kind. Returns 0, or -1 with
 * the reason (unknown kind, parameters the kind cannot take). */
int ppv_generate(const char *kind, const ppv_gen_params *p, ppv_schedule **out, char *err,
                 size_t errlen);

/* ------------------------------------------------------------------------ */
/* Send semantics, costs, memory model                                      */

typedef enum ppv_sem_kind { PPV_SEM_RENDEZVOUS, PPV_SEM_EAGER, PPV_SEM_EAGER_BYTES } ppv_sem_kind;

typedef struct ppv_semantics {
    ppv_sem_kind kind;
    int64_t eager_limit; /* PPV_SEM_EAGER_BYTES: sends up to this size are buffered */
} ppv_semantics;

/* Parses "eager", "rendezvous" or "eager:BYTES" (K/M/G suffixes allowed). */
int ppv_semantics_parse(const char *text, ppv_semantics *out);
void ppv_semantics_format(const ppv_semantics *sem, char *buf, size_t n);

typedef struct ppv_costs {
    double f, b, w; /* forward, full backward, weight backward; I costs b - w */
    double comm;    /* latency of one message or collective */
} ppv_costs;

typedef struct ppv_mem_model {
    double unit;       /* activation an F allocates; <= 0 means ranks/stages */
    double i_frac;     /* part of it that I frees (W frees the rest) */
    double stash_frac; /* part an F keeps when the stage/microbatch is recomputed by R */
} ppv_mem_model;

typedef struct ppv_check_options {
    ppv_semantics sem;
    ppv_costs costs;
    ppv_mem_model mem;
    int64_t msg_bytes; /* size of a PyTorch SEND_F/SEND_B message */
    int keep_timeline; /* fill ppv_check_report.spans */
} ppv_check_options;

/* Defaults: rendezvous, costs 1,2,1,0, unit ranks/stages, 8 MiB messages. */
ppv_check_options ppv_check_defaults(void);

/* ------------------------------------------------------------------------ */
/* Lowering                                                                 */

/* Inserts SEND_F/RECV_F/SEND_B/RECV_B into a compute-only schedule so that
 * it completes under every send semantics (each message's send and receive
 * occupy the same place in one global order of events). Returns 0 with
 * *out, 1 when the compute order itself cannot progress (a dependency
 * cycle; *out is NULL and the check reports it), or -1 on error. */
int ppv_schedule_lower(const ppv_schedule *s, const ppv_costs *costs, int64_t msg_bytes,
                       ppv_schedule **out, char *err, size_t errlen);

/* ------------------------------------------------------------------------ */
/* The static verifier                                                      */

typedef struct ppv_problem {
    int32_t rank, index; /* index into the rank's checked program, -1 if none */
    char action[64];
    char message[320];
} ppv_problem;

/* One blocked rank: the action it is stuck on and the rank it waits for. */
typedef struct ppv_wait {
    int32_t rank, index;
    char action[64];
    int32_t waits_for; /* -1 when it waits for nothing that can come */
    char reason[160];
} ppv_wait;

typedef struct ppv_span {
    double start, end;
} ppv_span;

typedef struct ppv_check_report {
    int ok;       /* no error and no deadlock */
    int deadlock; /* some rank can never finish */
    int32_t nranks, nstages, nmb;
    ppv_semantics sem;
    ppv_problem *errors;
    int32_t nerrors;   /* errors stored */
    int64_t errors_total; /* errors found (storage is capped) */
    ppv_wait *blocked; /* every rank that did not finish */
    int32_t nblocked;
    ppv_wait *cycle; /* the wait-for cycle, in order, when there is one */
    int32_t ncycle;
    double *peak_activation; /* [nranks] */
    int simulated; /* makespan and bubble_ratio were computed */
    double makespan, bubble_ratio;
    ppv_schedule *checked; /* the programs simulated (lowered when compute-only) */
    ppv_span **spans;      /* [nranks][n] start/end of each action, keep_timeline */
} ppv_check_report;

/* Checks a schedule: per-rank dependencies and counts, message matching,
 * deadlock under the semantics, peak activation memory, makespan and bubble
 * ratio. Returns 0 with *out filled (the verdict is in the report), or -1
 * with a message when the options are unusable. */
int ppv_schedule_check(const ppv_schedule *s, const ppv_check_options *opt,
                       ppv_check_report **out, char *err, size_t errlen);

void ppv_check_report_free(ppv_check_report *r);

#endif
