/* schedule_internal.h - the schedule room's helpers shared by its
 * readers (csv.c, native.c), the loader (load.c) and the IR (schedule.c);
 * private to the room.
 */
#ifndef PPV_SCHEDULE_INTERNAL_H
#define PPV_SCHEDULE_INTERNAL_H

#include "../engine_internal.h"

/* Stage and microbatch indices above this are refused by every reader, so
 * that any schedule ppv holds can be written and read again (a count such
 * as `microbatches` goes up to PPV_MAX_INDEX + 1). */
#define PPV_MAX_INDEX 100000000

/* "%s: binary data (a NUL byte) in a schedule file" when text holds a NUL,
 * which no reader accepts (a name would end early); 0 otherwise. */
int ppv_refuse_nul(const char *text, size_t len, const char *name, char *err, size_t errlen);

/* The readers, keeping where each action was read (places 1) or not, of
 * a text the caller has refused already where it holds a NUL
 * (ppv_refuse_nul: one pass over it, not one for each reader). */
int ppv_parse_csv(const char *text, size_t len, const char *name, ppv_dialect dialect, int places,
                  ppv_schedule **out, char *err, size_t errlen);
int ppv_parse_native(const char *text, size_t len, const char *name, int places, ppv_schedule **out,
                     char *err, size_t errlen);

/* ppv_schedule_append for a reader: at is the byte offset of the action's
 * cell in the text (-1: none), for ppv_schedule_where. */
int ppv_schedule_append_at(ppv_schedule *s, int32_t rank, const ppv_action *a, int64_t at);

/* Room for cap actions in rank's program (a reader that knows how many
 * come). Returns 0, or -1 when out of memory. */
int ppv_schedule_reserve(ppv_schedule *s, int32_t rank, int32_t cap);

/* Room for caps[r] actions in each rank r's program that has none yet
 * (a reader's new schedule: all of them), in one block for all
 * (ppv_alloc_big), so that a large schedule lies on huge pages; a program
 * that outgrows its share moves to a block of its own. Once per schedule
 * (later calls do nothing). Returns 0, or -1 when out of memory. */
int ppv_schedule_reserve_all(ppv_schedule *s, const int32_t *caps);

/* ppv_schedule_push when it must grow the program or make its places. */
ppv_action *ppv_schedule_push_grow(ppv_schedule *s, int32_t rank, int64_t at);

/* A new last action of rank's program, for the caller to fill in whole
 * (at as for ppv_schedule_append_at); NULL when out of memory. Inline: a
 * reader calls it for every action, and it mostly only takes a slot. */
static inline ppv_action *ppv_schedule_push(ppv_schedule *s, int32_t rank, int64_t at) {
    ppv_program *p = rank >= 0 && rank < s->nranks ? &s->prog[rank] : NULL;
    if (!p || p->n == p->cap || (at >= 0 && !p->src && !s->placeless))
        return ppv_schedule_push_grow(s, rank, at);
    if (p->src) p->src[p->n] = at >= 0 && at < UINT32_MAX ? (uint32_t)at + 1 : 0;
    return &p->acts[p->n++];
}

#define PPV_RANK_STAGES 8

/* The stages a rank's program places, each with the index of the first
 * action that places it, in the order the program first names them; n is
 * -1 where there are more than PPV_RANK_STAGES (finish then reads that
 * program). */
typedef struct ppv_rank_stages {
    int32_t last; /* the stage of the last placing action noted; -1: none */
    int32_t n;
    struct {
        int32_t stage, index;
    } first[PPV_RANK_STAGES];
} ppv_rank_stages;

/* What ppv_schedule_finish learns in its passes over the actions. A
 * reader that writes every action itself notes each on the way
 * (ppv_finish_note, ppv_rank_stage_note) and finishes without them
 * (ppv_schedule_finish_noted): a 9 MB file's actions are 29 MB to read. */
typedef struct ppv_finish_notes {
    int32_t maxstage, maxmb; /* -1 when none */
    int64_t nplaced;         /* actions that place a stage */
    uint32_t kinds;          /* 1 << kind for each kind present */
    const ppv_rank_stages *ranks; /* [nranks]: each program's stages, or NULL */
} ppv_finish_notes;

static inline ppv_finish_notes ppv_finish_notes_init(void) {
    return (ppv_finish_notes){-1, -1, 0, 0, NULL};
}

/* Whether a places a stage: a stage names the rank whose program holds
 * every action naming it. */
static inline int ppv_places_stage(const ppv_action *a) {
    return (ppv_action_flags(a->kind) & PPV_AF_STAGE) != 0 && a->stage >= 0;
}

/* Notes that the action at index of a rank's program places stage. */
static inline void ppv_rank_stage_note(ppv_rank_stages *rs, int32_t stage, int32_t index) {
    if (stage == rs->last) return;
    rs->last = stage;
    for (int32_t k = 0; k < rs->n; k++)
        if (rs->first[k].stage == stage) return;
    if (rs->n < 0) return;
    if (rs->n == PPV_RANK_STAGES) {
        rs->n = -1;
        return;
    }
    rs->first[rs->n].stage = stage, rs->first[rs->n].index = index;
    rs->n++;
}

/* Notes an action of kind, stage and mb (a reader's fields, before or
 * without reading the action back). */
static inline void ppv_finish_note_of(ppv_finish_notes *n, int kind, int32_t stage, int32_t mb) {
    if ((ppv_action_flags((ppv_action_kind)kind) & PPV_AF_STAGE) && stage >= 0) {
        n->nplaced++;
        if (stage > n->maxstage) n->maxstage = stage;
    }
    if (mb > n->maxmb) n->maxmb = mb;
    n->kinds |= 1u << (kind & 31);
}

static inline void ppv_finish_note(ppv_finish_notes *n, const ppv_action *a) {
    ppv_finish_note_of(n, a->kind, a->stage, a->mb);
}

/* ppv_schedule_finish with its first pass's notes already taken (every
 * action of s noted once). */
int ppv_schedule_finish_noted(ppv_schedule *s, const ppv_finish_notes *n, char *err,
                              size_t errlen);

/* A reader's next line starts at byte offset at (lines in order). Returns
 * 0, or -1 when out of memory. */
int ppv_schedule_add_line(ppv_schedule *s, int64_t at);

/* Parses one PyTorch action token "[stage][type][mb]" of length len into a.
 * legacy selects the older dialect (B = inputs, BW = full). On failure
 * returns -1 with the reason (no position) in why. */
int ppv_parse_torch_token(const char *tok, size_t len, int legacy, ppv_action *a, char *why,
                          size_t whylen);

#endif
