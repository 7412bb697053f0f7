/* ppv_schedule.h - the engine's schedule room: the schedule IR, the PyTorch CSV
 * and native readers and writers, and the format-neutral loader.
 *
 * Functions return 0 on success and a negative value on failure, with a
 * message in the caller's buffer; no function here exits the process.
 */
#ifndef PPV_SCHEDULE_H
#define PPV_SCHEDULE_H

#include <stdint.h>
#include <stdio.h>

#include "ppv_kernels.h"
#include "ppv_spec.h"

/* ------------------------------------------------------------------------ */
/* The schedule IR                                                          */

/* One action of one rank's program. Fields a kind does not carry are -1.
 * 32 bytes: a check of a million actions holds them all (where each came
 * from in its file is kept beside the programs, ppv_schedule_where). */
typedef struct ppv_action {
    uint8_t kind;     /* ppv_action_kind */
    uint8_t dtype;    /* ppv_dtype, collectives and native messages */
    uint16_t overlap; /* id shared by the sub-actions of one OVERLAP_F_B cell, 0 if none;
                       * only neighbours compare ids, so they count 1..65535 and wrap */
    int32_t stage;    /* stage index */
    int32_t mb;       /* microbatch index */
    int32_t step;     /* time step (CSV column) of the action */
    union {           /* what only some kinds carry */
        struct {
            int32_t peer; /* native SEND/RECV: peer rank */
            int32_t tag;  /* native SEND/RECV: tag that both sides must agree on */
        };
        struct {
            int32_t group; /* collective: index into ppv_schedule.groups */
            int32_t root;  /* BCAST (and the other collectives, -1): root as a group rank */
        };
        int32_t count; /* CHUNK: expected_generator_calls */
    };
    int64_t bytes; /* message or collective size in bytes, 0 = default */
} ppv_action;

/* The next overlap id after id (1..65535, then 1 again). */
static inline uint16_t ppv_overlap_next(uint16_t id) {
    return (uint16_t)(id % 65535u + 1u);
}

typedef struct ppv_program {
    ppv_action *acts;
    int32_t n, cap;
    uint32_t *src; /* [cap] or NULL: byte offset + 1 of each action's cell in the text it
                    * was read from (0: not read, or past 4 GiB); see ppv_schedule_where */
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
    struct ppv_group_index *group_index; /* private to schedule.c: groups by name */
    int64_t *line_off; /* [nlines]: byte offset of each line of the text read, or NULL */
    int32_t nlines;
    int placeless; /* read without keeping where each action was (ppv_schedule_load_placeless) */
    ppv_action *arena; /* private to schedule.c: one block holding the programs of a reader
                        * that knew their sizes up front, or NULL */
    size_t arena_n;    /* actions in arena */
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

/* Index of the group named name, or -1; a hash lookup (groups must be added
 * with ppv_schedule_add_group, which keeps the index). */
int ppv_schedule_find_group(const ppv_schedule *s, const char *name);

/* Infers nstages, nmb (unless set beforehand), form and the stage->rank map
 * from the programs. Returns 0, or -1 with a message (a stage computed on two
 * ranks, a stage that no rank computes). */
int ppv_schedule_finish(ppv_schedule *s, char *err, size_t errlen);

/* Where rank's action i was read: its 1-based line and byte column in the
 * file. Returns 0, or -1 when unknown (a generated or appended action). */
int ppv_schedule_where(const ppv_schedule *s, int32_t rank, int32_t i, int32_t *line, int32_t *col);

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

/* As ppv_schedule_load, keeping no record of where each action was read
 * (4 bytes an action less): ppv_schedule_where answers -1 and messages
 * about actions name the file alone. For a caller that can read the file
 * again should a message need its places (ppv check does). */
int ppv_schedule_load_placeless(const char *path, ppv_dialect dialect, ppv_schedule **out,
                                char *err, size_t errlen);

/* A whole file, malloc'd (len bytes, not terminated); NULL with
 * "path: reason" in err. */
char *ppv_file_read(const char *path, size_t *len, char *err, size_t errlen);

/* Where an output named path goes. PPV_OUTPUT_FILE: a regular file or a
 * new name, written to a temporary name in its folder and renamed; a
 * symbolic link is followed (up to 40 links), so *resolved is the final
 * target, written the same way in the target's folder and the link kept.
 * PPV_OUTPUT_STREAM: "-" (standard output), a FIFO or a character device,
 * written straight through, never replaced. */
typedef enum ppv_output_kind { PPV_OUTPUT_FILE, PPV_OUTPUT_STREAM } ppv_output_kind;

/* 0 with *kind and the path to write in resolved (n bytes), or -1 with
 * "path: reason" in err: a directory, a socket or block device (never
 * replaced), a loop of links, a name that cannot be looked at. */
int ppv_output_target(const char *path, char *resolved, size_t n, ppv_output_kind *kind,
                      char *err, size_t errlen);

/* An anonymous file (O_TMPFILE) in the folder of path, for an output that gets
 * its name only when complete (nothing is left behind by a writer killed
 * with any signal, SIGKILL included): a read-write descriptor, or -1 where
 * the kernel or the file system has none (the caller falls back to a
 * temporary name). */
int ppv_output_anon_open(const char *path);

/* Gives the complete anonymous file fd the name path: linked straight in
 * when the name is free, else linked at a fresh name made from tmp (its
 * last six characters "XXXXXX" replaced; tmplen bytes) and renamed over
 * path. 0, or -1 with errno (nothing left at either name). */
int ppv_output_anon_place(int fd, const char *path, char *tmp, size_t tmplen);

/* The name messages give a path: "<stdin>" for "-", else the path. */
const char *ppv_path_name(const char *path);

/* Parses a schedule held in memory, native or CSV by its first word. */
int ppv_schedule_parse_text(const char *text, size_t len, const char *name, ppv_dialect dialect,
                            ppv_schedule **out, char *err, size_t errlen);

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

/* ---- option texts: the one number and list reader every option uses ---- */

/* text, a whole decimal number in [lo, hi], into *out: digits only, a '-'
 * first where lo < 0; no space, no '+', nothing after, nothing beyond an
 * int64 (refused, never clamped). 0, or -1. */
int ppv_parse_whole(const char *text, int64_t lo, int64_t hi, int64_t *out);

/* text, a decimal fraction in [lo, hi], into *out: digits, then a '.'
 * with digits and an exponent ('e' or 'E', a '-' allowed, digits) if any;
 * a '-' first where lo < 0. No space, '+', hexadecimal, "inf" or "nan",
 * nothing that is not finite, no '.5' or '5.'. 0, or -1. */
int ppv_parse_fraction(const char *text, double lo, double hi, double *out);

/* text, a byte count in [lo, hi], into *out: a whole decimal number with
 * one optional suffix K, M or G (times 2^10, 2^20, 2^30); no fraction,
 * exponent, hexadecimal, sign or space, nothing beyond an int64. 0, or -1. */
int ppv_parse_bytes(const char *text, int64_t lo, int64_t hi, int64_t *out);

/* One item of a key=value list. */
typedef struct ppv_pair {
    char key[32], value[224];
} ppv_pair;

/* text, key=value items separated by commas, into items[0..max): the
 * count, or -1 with why (the item at fault and what is wrong with it: an
 * empty item, key or value, a space, no '=', a key given twice, more than
 * max items, a key or value too long). */
int ppv_parse_pairs(const char *text, ppv_pair *items, int max, char *why, size_t whylen);

/* The next item of a comma-separated list at *p into item (n bytes),
 * moving *p past it: 1 with an item, 0 at the end, -1 for an empty list,
 * an empty item (",,", a leading or trailing ',') or one longer than n-1.
 * Start with *p at the list; an empty text is refused by the first call. */
int ppv_list_next(const char **p, char *item, size_t n);

#endif
