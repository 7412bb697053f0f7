/* internal.h - helpers shared inside the engine layer; not part of its
 * public interface. */
#ifndef PPV_ENGINE_INTERNAL_H
#define PPV_ENGINE_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>

#include "ppv_engine.h"

/* Stage and microbatch indices above this are refused by every reader, so
 * that any schedule ppv holds can be written and read again (a count such
 * as `microbatches` goes up to PPV_MAX_INDEX + 1). */
#define PPV_MAX_INDEX 100000000

/* "%s: binary data (a NUL byte) in a schedule file" when text holds a NUL,
 * which no reader accepts (a name would end early); 0 otherwise. */
int ppv_refuse_nul(const char *text, size_t len, const char *name, char *err, size_t errlen);
/* n bytes for an array that grows with the schedule: from 2 MiB on a
 * mapping of its own on transparent huge pages, zeroed (pages.c). Given
 * back with ppv_free_big only; NULL when out of memory. */
void *ppv_alloc_big(size_t n);
/* ppv_alloc_big's calloc: n zeroed elements of size bytes. */
void *ppv_calloc_big(size_t n, size_t size);
void ppv_free_big(void *p);

/* The readers, keeping where each action was read (places 1) or not. */
int ppv_parse_csv(const char *text, size_t len, const char *name, ppv_dialect dialect, int places,
                  ppv_schedule **out, char *err, size_t errlen);
int ppv_parse_native(const char *text, size_t len, const char *name, int places, ppv_schedule **out,
                     char *err, size_t errlen);

/* Formats a message into err and returns -1, so callers can
 * `return ppv_errf(...)`. */
int ppv_errf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

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

/* A reader's next line starts at byte offset at (lines in order). Returns
 * 0, or -1 when out of memory. */
int ppv_schedule_add_line(ppv_schedule *s, int64_t at);

/* Parses one PyTorch action token "[stage][type][mb]" of length len into a.
 * legacy selects the older dialect (B = inputs, BW = full). On failure
 * returns -1 with the reason (no position) in why. */
int ppv_parse_torch_token(const char *tok, size_t len, int legacy, ppv_action *a, char *why,
                          size_t whylen);

/* The wait-for cycle among blocked ranks (each waits for one rank), found
 * by following waits_for; *cycle is malloc'd (NULL and 0 when the waits end
 * in a finished rank instead of closing). Returns 0, or -1 out of memory. */
int ppv_wait_cycle(const ppv_wait *blocked, int32_t nblocked, int32_t P, ppv_wait **cycle,
                   int32_t *ncycle);

/* Cost of an action's compute under the costs (0 for non-compute). */
double ppv_action_cost(const ppv_action *a, const ppv_costs *c);

/* ppv_envelope_frame without the contract checks: what a sender that
 * skips its preflight puts on the wire (tests of the receiver's checks and
 * of the tripwire points). Fails only when the text cannot be built. */
ppv_failure ppv_envelope_frame_unchecked(const ppv_envelope *e, ppv_frame *f, char *msg,
                                         size_t msglen);

/* Tensor data blocks (contract.c): n zeroed bytes, as calloc, often a block
 * this thread gave back; and a block given back for the next take. Both
 * are plain malloc blocks: free() and malloc() mix with them freely. */
void *ppv_block_take(size_t n);
void ppv_block_give(void *p);

/* A run on a transport of processes (proc.c): configures it and gives the
 * transport this process's rank calls (0, or -1 with the reason); after
 * the rank's program, waits until every rank is there (0, or the job has
 * been ended). */
struct ppv_proc_config;
int ppv_proc_configure(ppv_proc *p, const struct ppv_proc_config *cfg, ppv_transport *t, char *err,
                       size_t errlen);
int ppv_proc_settle(ppv_proc *p);
/* Every rank, the same list: a communicator over those global ranks; its
 * id, or -1 with the reason. */
int32_t ppv_proc_add_comm(ppv_proc *p, const int32_t *ranks, int32_t n, char *err, size_t errlen);

#endif
