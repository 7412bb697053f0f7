/* check.c - the static verifier.
 *
 * 1. Per-rank structure: every compute finds its input, counts per stage
 *    and microbatch, W after I, group and chunk markers well formed.
 * 2. Message matching: FIFO per (sender, receiver), the k-th send meets the
 *    k-th receive and both must name the same message; collectives match by
 *    per-group sequence number and must agree on kind, root, size, dtype.
 * 3. One simulation under the send semantics. With no wildcard receives an
 *    enabled step is never disabled by another rank, so every maximal
 *    interleaving ends in the same state: one run decides deadlock. The same
 *    run gives each action's start and end (list scheduling with the
 *    costs), hence makespan and bubble ratio. Work is linear in actions.
 * 4. Peak activation memory per rank from the compute order.
 * A compute-only schedule is lowered first (lower.c).
 */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "check_internal.h"

#define MAX_STORED_ERRORS 1000

enum { FD = 1, ID = 2, BD = 4, WD = 8, RF = 16, RB = 32, SF = 64, SB = 128, RD = 256 };

/* A growing list of program indices. */
typedef struct vec32 {
    int32_t *v;
    int64_t n, cap;
} vec32;

static inline int vec32_push(vec32 *x, int32_t val) {
    if (x->n == x->cap) {
        int64_t cap = x->cap ? x->cap * 2 : 8;
        int32_t *v = realloc(x->v, (size_t)cap * sizeof *v);
        if (!v) return -1;
        x->v = v;
        x->cap = cap;
    }
    x->v[x->n++] = val;
    return 0;
}

typedef struct channel {
    int32_t from, to;
    vec32 sends, recvs; /* in program order: indices in from's and in to's program */
} channel;

/* Per process group: the op each member issues at each sequence number. */
typedef struct coll_group {
    int64_t *members;   /* [members]: rank << 32 | index in the group, sorted (not [nranks]:
                         * 65,536 ranks x 30,000 groups would be 7.8 GB) */
    int32_t *count;     /* [members]: collectives issued so far */
    vec32 ops;          /* [seq * members + member]: index in the member's program, -1 when
                         * absent */
    int32_t nseq;
    int32_t *arrived; /* [nseq] */
    double *tmax;     /* [nseq] */
} coll_group;

typedef struct checker {
    const ppv_schedule *s;
    const ppv_check_options *opt;
    ppv_check_report *rep;
    int32_t P, S, m;
    int64_t *off, total;
    int oom;
    uint8_t *reduced; /* [S]: the stage's REDUCE_GRAD has run (its gradients are final) */
    /* matching */
    int32_t *cp; /* [total]: index of a message's counterpart in the peer's program, -1 */
    channel *chans;
    int32_t nchans, capchans;
    int32_t **chan_of; /* [P] -> list of (to, channel) pairs, n in chan_n */
    int32_t *chan_n, *chan_cap;
    coll_group *groups;
    /* allocated only for schedules with groups or collectives */
    int32_t *cseq;     /* [total]: sequence number of a collective */
    int32_t *grp_of;   /* [total]: index of the GROUP_START an op sits in, -1 */
    int32_t *grp_end;  /* [total]: for a GROUP_START, index of its GROUP_END */
    int32_t *grp_left; /* [total]: for a GROUP_START, ops not yet done */
    /* simulation */
    uint8_t *state; /* bit 1 posted, bit 2 done */
    double *at;     /* [total]: when a posted op was posted until it completes, then when it
                     * ended (the post time of a finished op is not kept: an eager send's is
                     * its end, and a blocked rank's next op posts when it is ready) */
    int32_t *pc;
    int32_t spare;  /* processors each_part leaves to work beside it */
    uint32_t kinds; /* 1 << kind for each kind in the programs (find_deps) */
    int64_t named;  /* actions that name a (stage, microbatch) pair (find_deps) */
    double *free_t;           /* [P]: when the rank's last operation ends, either stream */
    double *busy;             /* [P]: compute time, summed in program order (the same
                                 bits whatever order the run takes) */
    double *comp_t, *comm_t;  /* [P]: the compute and the communication stream */
    int32_t *dep;             /* [total]: the op (index in the same program) whose end
                                 this one needs (a compute's receive, a send's
                                 compute), -1 */
    double *first_t, *last_t; /* [P]: first compute start, last compute end */
    int32_t *queue;
    uint8_t *queued;
    int32_t qh, qn;
    int32_t running; /* the rank the simulation is advancing, -1 */
    /* the lifespan view: per (stage, mb) cell, when its F started and when
     * its last backward ended (-1: not yet) */
    const struct cells *cl;
    double *fstart, *freed;
    struct rank_msgs *msgs; /* [P]: each rank's messages by peer (find_deps), until the
                             * matching's channels take them */
    double kcost[PPV_ACT_COUNT]; /* each kind's time under --costs (ppv_action_cost) */
    double *scost; /* [stages][4] with per-stage costs: each cost class's time, or NULL */
} checker;

#define POSTED 1
#define DONE 2

static void add_error(checker *ck, int32_t rank, int32_t idx, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void add_error(checker *ck, int32_t rank, int32_t idx, const char *fmt, ...) {
    ppv_check_report *rep = ck->rep;
    rep->errors_total++;
    if (rep->nerrors >= MAX_STORED_ERRORS) return;
    if (!rep->errors) {
        rep->errors = calloc(MAX_STORED_ERRORS, sizeof *rep->errors);
        if (!rep->errors) {
            ck->oom = 1;
            return;
        }
    }
    ppv_problem *e = &rep->errors[rep->nerrors++];
    e->rank = rank;
    e->index = idx;
    e->action[0] = 0;
    if (rank >= 0 && idx >= 0)
        ppv_action_format(ck->s, &ck->s->prog[rank].acts[idx], e->action, sizeof e->action);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
}

/* Where rank r's action i came from, for messages: " (file:line:col)" or "". */
static void where(const checker *ck, int32_t r, int32_t i, char *buf, size_t n) {
    int32_t line, col;
    if (ppv_schedule_where(ck->s, r, i, &line, &col) == 0)
        snprintf(buf, n, " (%s:%d:%d)", ck->s->name, line, col);
    else
        buf[0] = 0;
}

/* ---- cells: the (stage, microbatch) pairs actions name ---------------------- */

/* The per-(stage, microbatch) state of structure and memory checks lives in
 * cells, one per pair the actions name, so that every pass costs what the
 * file holds and not stages x the largest microbatch index ('0F99999999'
 * is one action). Dense when stages x microbatches is within a few times
 * the actions (cell = stage * m + mb, as generated schedules are); sparse
 * otherwise: the sorted keys of the named pairs, found by binary search. */
typedef struct cells {
    int64_t m;    /* microbatches; a pair's key is stage * m + mb */
    int64_t n;    /* cells */
    int64_t *key; /* [n] sorted keys of the named pairs; NULL when dense (cell k is key k) */
} cells;

static int key_cmp(const void *x, const void *y) {
    int64_t a = *(const int64_t *)x, b = *(const int64_t *)y;
    return (a > b) - (a < b);
}

/* Whether a names a (stage, microbatch) pair. */
static int names_cell(const ppv_action *a) {
    return (ppv_action_flags(a->kind) & PPV_AF_MB) && a->stage >= 0 && a->mb >= 0;
}

/* Builds the cells of s, whose actions name named pairs (-1: count
 * them). Returns 0, or -1 when out of memory. */
static int cells_init(cells *c, const ppv_schedule *s, int64_t named) {
    memset(c, 0, sizeof *c);
    c->m = s->nmb;
    if (named < 0) {
        named = 0;
        for (int32_t r = 0; r < s->nranks; r++)
            for (int32_t i = 0; i < s->prog[r].n; i++)
                named += names_cell(&s->prog[r].acts[i]);
    }
    int64_t area = (int64_t)s->nstages * c->m;
    if (area <= 4 * named + 1024) {
        c->n = area;
        return 0;
    }
    c->key = malloc((size_t)(named ? named : 1) * sizeof *c->key);
    if (!c->key) return -1;
    for (int32_t r = 0; r < s->nranks; r++)
        for (int32_t i = 0; i < s->prog[r].n; i++) {
            const ppv_action *a = &s->prog[r].acts[i];
            if (names_cell(a)) c->key[c->n++] = (int64_t)a->stage * c->m + a->mb;
        }
    qsort(c->key, (size_t)c->n, sizeof *c->key, key_cmp);
    int64_t u = 0;
    for (int64_t k = 0; k < c->n; k++)
        if (u == 0 || c->key[u - 1] != c->key[k]) c->key[u++] = c->key[k];
    c->n = u;
    return 0;
}

/* The cell of key want in sparse cells, or -1. */
static int64_t sparse_cell(const cells *c, int64_t want) {
    const int64_t *hit = bsearch(&want, c->key, (size_t)c->n, sizeof *c->key, key_cmp);
    return hit ? hit - c->key : -1;
}

/* The cell of (stage, mb), or -1 when no action names the pair; inline
 * for dense cells, which every pass looks up for every action. */
static inline int64_t cell_of(const cells *c, int32_t stage, int32_t mb) {
    if (stage < 0 || mb < 0 || mb >= c->m) return -1;
    int64_t want = (int64_t)stage * c->m + mb;
    if (!c->key) return want < c->n ? want : -1;
    return sparse_cell(c, want);
}

/* The key (stage * m + mb) of cell k. */
static int64_t cell_key(const cells *c, int64_t k) {
    return c->key ? c->key[k] : k;
}

/* The flags of (stage, mb); 0 when no action names the pair. */
static uint16_t flags_at(const cells *c, const uint16_t *fl, int32_t stage, int32_t mb) {
    int64_t k = cell_of(c, stage, mb);
    return k < 0 ? 0 : fl[k];
}

/* Rank r's index in group g, or -1 when r is not a member. */
static int32_t member_of(const checker *ck, int32_t g, int32_t r) {
    const coll_group *cg = &ck->groups[g];
    int32_t lo = 0, hi = ck->s->groups[g].n - 1;
    while (lo <= hi) {
        int32_t mid = lo + (hi - lo) / 2, mr = (int32_t)(cg->members[mid] >> 32);
        if (mr == r) return (int32_t)(cg->members[mid] & 0xffffffff);
        if (mr < r)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -1;
}

/* ---- parts side by side: ranks, channels ------------------------------------ */

/* The runs of one pass over parts (ranks or channels): each run's
 * checker is the checker with errors, kinds and named of its own. */
typedef struct part_runs {
    void (*fn)(checker *, int32_t, void *);
    void *arg;
    checker view[PPV_MAX_RUNS];
    ppv_check_report errs[PPV_MAX_RUNS];
} part_runs;

static void part_run(void *arg, int32_t run, int32_t from, int32_t to) {
    part_runs *u = arg;
    for (int32_t k = from; k < to; k++) u->fn(&u->view[run], k, u->arg);
}

/* Appends the errors from holds (those of a later part of the pass) to
 * ck's, as one pass would have stored them: up to MAX_STORED_ERRORS, the
 * rest counted; from's are given back. */
static void append_errors(checker *ck, ppv_check_report *from) {
    ppv_check_report *rep = ck->rep;
    for (int32_t e = 0; e < from->nerrors && rep->nerrors < MAX_STORED_ERRORS; e++) {
        if (!rep->errors && !(rep->errors = calloc(MAX_STORED_ERRORS, sizeof *rep->errors))) {
            ck->oom = 1;
            break;
        }
        rep->errors[rep->nerrors++] = from->errors[e];
    }
    rep->errors_total += from->errors_total;
    free(from->errors);
    from->errors = NULL;
    from->nerrors = 0;
    from->errors_total = 0;
}

/* fn(ck, k, arg) for every part k of nparts, whose work up to k is
 * ends[k] (ends[nparts] the whole), in runs side by side (ppv_runs): one
 * for each 100,000 units of work, up to the processors online. fn may
 * write only part k's own entries: a rank's ops and the cells of its
 * stages (a finished schedule gives every stage one rank, and every
 * action that names a stage sits on it), or a channel's messages. The
 * errors come out as one pass stores them, part by part; kinds and named
 * are summed; ck->spare processors are left to work beside it. */
static void each_part(checker *ck, const int64_t *ends, int32_t nparts,
                      void (*fn)(checker *, int32_t, void *), void *arg) {
    int32_t n = ppv_run_count(ends[nparts], 100000, nparts);
    n = n - ck->spare > 1 ? n - ck->spare : 1;
    part_runs *u = n > 1 ? calloc(1, sizeof *u) : NULL;
    if (!u) { /* one run, or no room for more */
        for (int32_t k = 0; k < nparts; k++) fn(ck, k, arg);
        return;
    }
    u->fn = fn, u->arg = arg;
    for (int32_t k = 0; k < n; k++) {
        u->view[k] = *ck;
        u->view[k].rep = &u->errs[k];
        u->view[k].kinds = 0, u->view[k].named = 0, u->view[k].oom = 0;
    }
    ppv_runs(n, ends, nparts, part_run, u);
    for (int32_t k = 0; k < n; k++) {
        ck->kinds |= u->view[k].kinds;
        ck->named += u->view[k].named;
        ck->oom |= u->view[k].oom;
        append_errors(ck, &u->errs[k]);
    }
    free(u);
}

/* fn(ck, r, arg) for every rank r, side by side (each_part, the ranks'
 * actions the work). */
static void each_rank(checker *ck, void (*fn)(checker *, int32_t, void *), void *arg) {
    each_part(ck, ck->off, ck->P, fn, arg);
}

/* ---- 1. per-rank structure ----------------------------------------------- */

static inline int remote(const checker *ck, int32_t r, int32_t stage) {
    return stage >= 0 && stage < ck->S && ck->s->stage_rank[stage] != r;
}

static void check_rank(checker *ck, const cells *c, uint16_t *fl, int32_t r) {
    const ppv_schedule *s = ck->s;
    const ppv_program *p = &s->prog[r];
    int comms_form = s->form == PPV_FORM_COMPUTE_COMMS;
    int32_t group_at = -1, chunk_at = -1, gens = 0;
    char loc[300], nm[64];
#define LOC (where(ck, r, i, loc, sizeof loc), loc)
    for (int32_t i = 0; i < p->n; i++) {
        const ppv_action *a = &p->acts[i];
        unsigned af = ppv_action_flags(a->kind);
        /* the place, formatted only for a message (LOC) */
        uint16_t *f = (af & PPV_AF_MB) ? &fl[cell_of(c, a->stage, a->mb)] : NULL;
        int32_t st = a->stage;
        switch (a->kind) {
        case PPV_ACT_F:
            if (*f & FD) add_error(ck, r, i, "duplicate forward of stage %d microbatch %d%s", st,
                                   a->mb, LOC);
            if (st > 0 && !remote(ck, r, st - 1) && !(flags_at(c, fl, st - 1, a->mb) & FD))
                add_error(ck, r, i, "input not computed yet: %dF%d must come earlier on rank %d%s",
                          st - 1, a->mb, r, LOC);
            if (st > 0 && remote(ck, r, st - 1) && comms_form && !(*f & RF))
                add_error(ck, r, i, "no %dRECV_F%d before it: its input from rank %d never "
                          "arrives%s", st, a->mb, s->stage_rank[st - 1], LOC);
            *f |= FD;
            break;
        case PPV_ACT_I:
        case PPV_ACT_B:
            if (!(*f & FD)) add_error(ck, r, i, "backward before its forward %dF%d%s", st, a->mb,
                                      LOC);
            if (*f & (ID | BD)) add_error(ck, r, i, "duplicate backward of stage %d microbatch "
                                          "%d%s", st, a->mb, LOC);
            if (a->kind == PPV_ACT_B && st >= 0 && st < ck->S && ck->reduced[st])
                add_error(ck, r, i, "backward after %dREDUCE_GRAD: the stage's gradients are "
                          "final from there on%s", st, LOC);
            if (st < ck->S - 1 && !remote(ck, r, st + 1) &&
                !(flags_at(c, fl, st + 1, a->mb) & (ID | BD)))
                add_error(ck, r, i, "gradient not computed yet: the backward of stage %d "
                          "microbatch %d must come earlier on rank %d%s", st + 1, a->mb, r, LOC);
            if (st < ck->S - 1 && remote(ck, r, st + 1) && comms_form && !(*f & RB))
                add_error(ck, r, i, "no %dRECV_B%d before it: its gradient from rank %d never "
                          "arrives%s", st, a->mb, s->stage_rank[st + 1], LOC);
            *f |= a->kind == PPV_ACT_I ? ID : BD;
            break;
        case PPV_ACT_W:
            if (st >= 0 && st < ck->S && ck->reduced[st])
                add_error(ck, r, i, "W after %dREDUCE_GRAD: the stage's gradients are final "
                          "from there on%s", st, LOC);
            if (*f & BD) add_error(ck, r, i, "W after the full backward %dB%d, which already "
                                   "computed the weight gradient%s", st, a->mb, LOC);
            else if (!(*f & ID)) add_error(ck, r, i, "W without a prior I for stage %d "
                                           "microbatch %d%s", st, a->mb, LOC);
            if (*f & WD) add_error(ck, r, i, "duplicate W%s", LOC);
            *f |= WD;
            break;
        case PPV_ACT_R:
            if (!(*f & FD) || (*f & (ID | BD)))
                add_error(ck, r, i, "recompute must come after %dF%d and before its "
                          "backward%s", st, a->mb, LOC);
            *f |= RD;
            break;
        case PPV_ACT_SEND_F:
            if (!(*f & FD)) add_error(ck, r, i, "sends a forward not computed yet%s", LOC);
            if (!remote(ck, r, st + 1))
                add_error(ck, r, i, "%s%s", st + 1 >= ck->S ? "the last stage has no next stage "
                          "to send to" : "the next stage is on this rank: no message is needed",
                          LOC);
            if (*f & SF) add_error(ck, r, i, "duplicate SEND_F%s", LOC);
            *f |= SF;
            break;
        case PPV_ACT_SEND_B:
            if (!(*f & (ID | BD))) add_error(ck, r, i, "sends a gradient not computed yet%s",
                                             LOC);
            if (!remote(ck, r, st - 1))
                add_error(ck, r, i, "%s%s", st == 0 ? "stage 0 has no previous stage to send "
                          "to" : "the previous stage is on this rank: no message is needed", LOC);
            if (*f & SB) add_error(ck, r, i, "duplicate SEND_B%s", LOC);
            *f |= SB;
            break;
        case PPV_ACT_RECV_F:
            if (!remote(ck, r, st - 1))
                add_error(ck, r, i, "%s%s", st == 0 ? "stage 0 receives no forward input" :
                          "the previous stage is on this rank: no message comes", LOC);
            if (*f & RF) add_error(ck, r, i, "duplicate RECV_F%s", LOC);
            *f |= RF;
            break;
        case PPV_ACT_RECV_B:
            if (!remote(ck, r, st + 1))
                add_error(ck, r, i, "%s%s", st + 1 >= ck->S ? "the last stage receives no "
                          "gradient" : "the next stage is on this rank: no message comes", LOC);
            if (*f & RB) add_error(ck, r, i, "duplicate RECV_B%s", LOC);
            *f |= RB;
            break;
        case PPV_ACT_GROUP_START:
            if (group_at >= 0) add_error(ck, r, i, "GROUP_START inside the group opened at "
                                         "index %d (groups do not nest)%s", group_at, LOC);
            group_at = i;
            break;
        case PPV_ACT_GROUP_END:
            if (group_at < 0) add_error(ck, r, i, "GROUP_END without GROUP_START%s", LOC);
            group_at = -1;
            break;
        case PPV_ACT_REDUCE_GRAD:
            if (st >= 0 && st < ck->S) {
                if (ck->reduced[st]) add_error(ck, r, i, "duplicate REDUCE_GRAD%s", LOC);
                ck->reduced[st] = 1;
            }
            break;
        case PPV_ACT_GEN: gens++; break;
        case PPV_ACT_CHUNK:
            if (chunk_at >= 0 && gens != p->acts[chunk_at].count)
                add_error(ck, r, chunk_at, "expected_generator_calls=%d but %d GEN follow it",
                          p->acts[chunk_at].count, gens);
            chunk_at = i;
            gens = 0;
            break;
        default: break;
        }
        if ((af & PPV_AF_COLL) && member_of(ck, a->group, r) < 0)
            add_error(ck, r, i, "rank %d is not a member of group '%s'%s", r,
                      s->groups[a->group].name, LOC);
        if (group_at >= 0 && i != group_at &&
            ((af & PPV_AF_COMPUTE) || a->kind == PPV_ACT_CHUNK || (af & PPV_AF_STAGE && !(af & PPV_AF_COMM)))) {
            ppv_action_format(s, a, nm, sizeof nm);
            add_error(ck, r, i, "%s inside a group: only messages and collectives may be "
                      "grouped%s", nm, LOC);
        }
    }
    if (group_at >= 0) add_error(ck, r, group_at, "GROUP_START is never closed");
    if (chunk_at >= 0 && gens != p->acts[chunk_at].count)
        add_error(ck, r, chunk_at, "expected_generator_calls=%d but %d GEN follow it",
                  p->acts[chunk_at].count, gens);
}
#undef LOC

/* The count errors of one (stage, microbatch) pair with flags f. */
static void cell_errors(checker *ck, int32_t r, int32_t st, int64_t mb, uint16_t f, int backward) {
    if (!(f & FD))
        add_error(ck, r, -1,
                  "stage %d has no forward %dF%lld (each of the %d microbatches runs "
                  "once per stage)",
                  st, st, (long long)mb, ck->m);
    if (backward && !(f & (ID | BD)))
        add_error(ck, r, -1, "stage %d has no backward (%dB%lld or %dI%lld) for microbatch %lld",
                  st, st, (long long)mb, st, (long long)mb, (long long)mb);
    if ((f & ID) && !(f & WD))
        add_error(ck, r, -1,
                  "stage %d microbatch %lld has I but no W: the weight gradient is "
                  "never computed",
                  st, (long long)mb);
}

/* The errors of stage st's microbatches [from, to), pairs no action names:
 * each lacks its forward (and its backward when the schedule has any).
 * Stored while there is room, the rest only counted, so a gap of 10^8
 * microbatches costs no more than the stored messages. */
static void missing_cells(checker *ck, int32_t r, int32_t st, int64_t from, int64_t to,
                          int backward) {
    int64_t mb = from;
    for (; mb < to && ck->rep->nerrors < MAX_STORED_ERRORS && !ck->oom; mb++)
        cell_errors(ck, r, st, mb, 0, backward);
    if (mb < to) ck->rep->errors_total += (to - mb) * (backward ? 2 : 1);
}

/* Counts per stage and microbatch, after every rank's pass: stage by stage,
 * microbatch by microbatch, the pairs no action names taken as runs. */
static void check_counts(checker *ck, const cells *c, const uint16_t *fl) {
    int backward = 0;
    for (int64_t k = 0; k < c->n; k++)
        if (fl[k] & (ID | BD | WD)) backward = 1;
    int64_t k = 0;
    for (int32_t st = 0; st < ck->S; st++) {
        int32_t r = ck->s->stage_rank[st];
        int64_t next = 0; /* first microbatch of st not yet judged */
        for (; k < c->n && cell_key(c, k) / c->m == st; k++) {
            int64_t mb = cell_key(c, k) % c->m;
            missing_cells(ck, r, st, next, mb, backward);
            cell_errors(ck, r, st, mb, fl[k], backward);
            next = mb + 1;
        }
        missing_cells(ck, r, st, next, c->m, backward);
    }
}

/* ---- 2. matching ---------------------------------------------------------- */

/* The other rank of a point-to-point op on rank r, or -1. */
static inline int32_t message_peer(const checker *ck, int32_t r, const ppv_action *a) {
    int32_t st = a->stage, other = -1;
    switch (a->kind) {
    case PPV_ACT_SEND_F: other = st + 1; break;
    case PPV_ACT_RECV_F: other = st - 1; break;
    case PPV_ACT_SEND_B: other = st - 1; break;
    case PPV_ACT_RECV_B: other = st + 1; break;
    case PPV_ACT_SEND:
    case PPV_ACT_RECV: return a->peer == r ? -1 : a->peer;
    default: return -1;
    }
    return remote(ck, r, other) ? ck->s->stage_rank[other] : -1;
}

static channel *find_channel(checker *ck, int32_t from, int32_t to) {
    int32_t *list = ck->chan_of[from];
    for (int32_t k = 0; k < ck->chan_n[from]; k++)
        if (list[2 * k] == to) return &ck->chans[list[2 * k + 1]];
    if (ck->chan_n[from] == ck->chan_cap[from]) {
        int32_t cap = ck->chan_cap[from] ? ck->chan_cap[from] * 2 : 4;
        int32_t *nl = realloc(list, (size_t)cap * 2 * sizeof *nl);
        if (!nl) return NULL;
        ck->chan_of[from] = list = nl;
        ck->chan_cap[from] = cap;
    }
    if (ck->nchans == ck->capchans) {
        int32_t cap = ck->capchans ? ck->capchans * 2 : 16;
        channel *nc = realloc(ck->chans, (size_t)cap * sizeof *nc);
        if (!nc) return NULL;
        ck->chans = nc;
        ck->capchans = cap;
    }
    channel *c = &ck->chans[ck->nchans];
    memset(c, 0, sizeof *c);
    c->from = from;
    c->to = to;
    list[2 * ck->chan_n[from]] = to;
    list[2 * ck->chan_n[from] + 1] = ck->nchans++;
    ck->chan_n[from]++;
    return c;
}

static int64_t msg_bytes(const checker *ck, const ppv_action *a) {
    return a->bytes ? a->bytes : ck->opt->msg_bytes;
}

/* Why send and recv, paired by FIFO order, are not the same message; NULL
 * when they agree. */
static const char *pair_mismatch(const ppv_action *snd, const ppv_action *rcv, char *buf,
                                 size_t n) {
    int torch_s = snd->kind != PPV_ACT_SEND, torch_r = rcv->kind != PPV_ACT_RECV;
    if (torch_s != torch_r) return "one is a pipeline message and the other a native SEND/RECV";
    if (torch_s) {
        int fwd = snd->kind == PPV_ACT_SEND_F;
        if (fwd != (rcv->kind == PPV_ACT_RECV_F))
            return "one carries activations (F) and the other gradients (B)";
        int32_t want = fwd ? snd->stage + 1 : snd->stage - 1;
        if (rcv->stage != want) {
            snprintf(buf, n, "the send is for stage %d and the receive for stage %d", want,
                     rcv->stage);
            return buf;
        }
        if (rcv->mb != snd->mb) {
            snprintf(buf, n, "they name different microbatches (%d sent, %d expected)", snd->mb,
                     rcv->mb);
            return buf;
        }
    } else if (snd->tag != rcv->tag) {
        snprintf(buf, n, "tags differ (%d sent, %d expected)", snd->tag, rcv->tag);
        return buf;
    }
    if (snd->bytes && rcv->bytes && snd->bytes != rcv->bytes) {
        snprintf(buf, n, "sizes differ (%lld bytes sent, %lld expected)",
                 (long long)snd->bytes, (long long)rcv->bytes);
        return buf;
    }
    if (snd->dtype && rcv->dtype && snd->dtype != rcv->dtype) {
        snprintf(buf, n, "dtypes differ (%s sent, %s expected)",
                 ppv_dtype_token((ppv_dtype)snd->dtype), ppv_dtype_token((ppv_dtype)rcv->dtype));
        return buf;
    }
    return NULL;
}

/* One rank's messages with one peer, one way: the indices of its sends to
 * the peer, or of its receives from it, in program order. */
typedef struct peer_ops {
    int32_t peer;
    int send;
    vec32 ops;
} peer_ops;

/* A rank's peer_ops, in the order its program first names each. */
typedef struct rank_msgs {
    peer_ops *v;
    int32_t n, cap;
} rank_msgs;

/* Notes action i of rank r, a message (flags af), among r's messages by
 * peer and way (m: r's own list; *last: the peer_ops the rank's previous
 * message went to). A rank's messages are noted in program order. */
static inline void collect_op(checker *ck, rank_msgs *m, peer_ops **last, int32_t r, int32_t i,
                              const ppv_action *a, unsigned af) {
    int32_t other = message_peer(ck, r, a);
    if (other < 0) return;
    int snd = (af & PPV_AF_SEND) != 0;
    peer_ops *l = *last;
    if (!l || l->peer != other || l->send != snd) {
        l = NULL;
        for (int32_t k = 0; k < m->n && !l; k++)
            if (m->v[k].peer == other && m->v[k].send == snd) l = &m->v[k];
    }
    if (!l) {
        if (m->n == m->cap) {
            int32_t cap = m->cap ? 2 * m->cap : 4;
            peer_ops *nv = realloc(m->v, (size_t)cap * sizeof *nv);
            if (!nv) {
                ck->oom = 1;
                return;
            }
            m->v = nv, m->cap = cap;
        }
        l = &m->v[m->n++];
        *l = (peer_ops){other, snd, {NULL, 0, 0}};
    }
    *last = l;
    if (vec32_push(&l->ops, i) < 0) ck->oom = 1;
}

/* Gives back the ranks' lists of messages not yet taken by channels. */
static void free_msgs(checker *ck) {
    if (!ck->msgs) return;
    for (int32_t r = 0; r < ck->P; r++) {
        for (int32_t k = 0; k < ck->msgs[r].n; k++) free(ck->msgs[r].v[k].ops.v);
        free(ck->msgs[r].v);
    }
    free(ck->msgs);
    ck->msgs = NULL;
}

/* Channel k's sends and receives paired in FIFO order, and the errors of
 * the pairs that do not name the same message (each_part: a channel's
 * messages are its own). */
static void pair_channel(checker *ck, int32_t k, void *arg) {
    (void)arg;
    if (ck->oom) return;
    char why[160], sa[64], ra[64];
    channel *c = &ck->chans[k];
    int32_t n = (int32_t)(c->sends.n < c->recvs.n ? c->sends.n : c->recvs.n), sr = c->from,
            rr = c->to;
    const ppv_action *sp = ck->s->prog[sr].acts, *rp = ck->s->prog[rr].acts;
    for (int32_t j = 0; j < n; j++) {
        int32_t si = c->sends.v[j], ri = c->recvs.v[j];
        const ppv_action *snd = &sp[si], *rcv = &rp[ri];
        ck->cp[ck->off[sr] + si] = ri;
        ck->cp[ck->off[rr] + ri] = si;
        const char *bad = pair_mismatch(snd, rcv, why, sizeof why);
        if (bad) {
            ppv_action_format(ck->s, snd, sa, sizeof sa);
            ppv_action_format(ck->s, rcv, ra, sizeof ra);
            add_error(ck, rr, ri,
                      "rank %d's %s (index %d) receives rank %d's %s (index %d): FIFO order "
                      "on channel %d->%d pairs them (message #%lld), but %s",
                      rr, ra, ri, sr, sa, si, c->from, c->to, (long long)j, bad);
        }
    }
    for (int32_t j = n; j < c->sends.n; j++) {
        add_error(ck, sr, c->sends.v[j],
                  "no receive on rank %d matches it: rank %d sends %lld "
                  "messages to rank %d, which receives %lld",
                  c->to, c->from, (long long)c->sends.n, c->to, (long long)c->recvs.n);
    }
    for (int32_t j = n; j < c->recvs.n; j++) {
        add_error(ck, rr, c->recvs.v[j],
                  "no send from rank %d matches it: rank %d receives %lld "
                  "messages from rank %d, which sends %lld",
                  c->from, c->to, (long long)c->recvs.n, c->from, (long long)c->sends.n);
    }
}

static void match_messages(checker *ck) {
    /* each rank's lists (find_deps made them, side by side); the
     * channels, made in the order the ranks' programs first name them,
     * take the lists over */
    rank_msgs *msgs = ck->msgs;
    ck->msgs = NULL;
    if (!msgs) {
        ck->oom = 1;
        return;
    }
    for (int32_t r = 0; r < ck->P; r++) {
        for (int32_t k = 0; k < msgs[r].n; k++) {
            peer_ops *po = &msgs[r].v[k];
            channel *c = ck->oom ? NULL : po->send ? find_channel(ck, r, po->peer)
                                                    : find_channel(ck, po->peer, r);
            if (!c) {
                ck->oom = 1;
                free(po->ops.v);
                continue;
            }
            if (po->send) c->sends = po->ops;
            else c->recvs = po->ops;
        }
        free(msgs[r].v);
    }
    free(msgs);
    int64_t *ends = malloc(((size_t)ck->nchans + 1) * sizeof *ends); /* a channel's work */
    if (!ends) {
        ck->oom = 1;
    } else { /* the channels side by side */
        ends[0] = 0;
        for (int32_t k = 0; k < ck->nchans; k++)
            ends[k + 1] = ends[k] + ck->chans[k].sends.n + ck->chans[k].recvs.n;
        if (!ck->oom) each_part(ck, ends, ck->nchans, pair_channel, NULL);
    }
    free(ends);
    for (int32_t k = 0; k < ck->nchans; k++) { /* paired: the lists are done with */
        free(ck->chans[k].sends.v);
        free(ck->chans[k].recvs.v);
        ck->chans[k].sends = ck->chans[k].recvs = (vec32){NULL, 0, 0};
    }
}

static void match_collectives(checker *ck) {
    const ppv_schedule *s = ck->s;
    if (s->ngroups == 0) return; /* a collective names a group: there is none */
    for (int32_t r = 0; r < ck->P && !ck->oom; r++) {
        const ppv_program *p = &s->prog[r];
        for (int32_t i = 0; i < p->n; i++) {
            const ppv_action *a = &p->acts[i];
            if (!(ppv_action_flags(a->kind) & PPV_AF_COLL)) continue;
            coll_group *g = &ck->groups[a->group];
            int32_t me = member_of(ck, a->group, r), n = s->groups[a->group].n;
            if (me < 0) continue; /* reported by check_rank; never completes */
            int32_t seq = g->count[me]++;
            ck->cseq[ck->off[r] + i] = seq;
            while (g->nseq <= seq) {
                for (int32_t k = 0; k < n; k++)
                    if (vec32_push(&g->ops, -1) < 0) ck->oom = 1;
                g->nseq++;
            }
            if (ck->oom) return;
            g->ops.v[(int64_t)seq * n + me] = i;
        }
    }
    char an[64], bn[64];
    for (int32_t gi = 0; gi < s->ngroups && !ck->oom; gi++) {
        coll_group *g = &ck->groups[gi];
        int32_t n = s->groups[gi].n;
        g->arrived = calloc((size_t)(g->nseq ? g->nseq : 1), sizeof *g->arrived);
        g->tmax = calloc((size_t)(g->nseq ? g->nseq : 1), sizeof *g->tmax);
        if (!g->arrived || !g->tmax) {
            ck->oom = 1;
            return;
        }
        for (int32_t seq = 0; seq < g->nseq; seq++) {
            int32_t fr = -1, fi = -1;
            const ppv_action *fa = NULL;
            for (int32_t k = 0; k < n; k++) {
                int32_t rr = s->groups[gi].ranks[k], ri = g->ops.v[(int64_t)seq * n + k];
                if (ri < 0) {
                    add_error(ck, s->groups[gi].ranks[k], -1,
                              "rank %d issues only %d collectives on group '%s'; others issue "
                              "collective #%d", s->groups[gi].ranks[k], g->count[k],
                              s->groups[gi].name, seq);
                    continue;
                }
                const ppv_action *a = &s->prog[rr].acts[ri];
                if (!fa) {
                    fr = rr, fi = ri, fa = a;
                    continue;
                }
                const char *bad = NULL;
                if (a->kind != fa->kind) bad = "kinds differ";
                else if (a->root != fa->root) bad = "roots differ";
                else if (a->bytes != fa->bytes) bad = "sizes differ";
                else if (a->dtype != fa->dtype) bad = "dtypes differ";
                if (bad) {
                    ppv_action_format(s, a, an, sizeof an);
                    ppv_action_format(s, fa, bn, sizeof bn);
                    add_error(ck, rr, ri, "collective #%d on group '%s': rank %d's %s (index %d) "
                              "and rank %d's %s (index %d) do not match: %s", seq,
                              s->groups[gi].name, rr, an, ri, fr, bn, fi, bad);
                }
            }
        }
    }
}

/* ---- 3. simulation ---------------------------------------------------------- */

/* The later of two times (a simulated time is never NaN: costs are
 * checked, and times only add them), without fmax's call. */
static inline double later(double a, double b) {
    return a > b ? a : b;
}

/* Queues rank r to run on, unless it is queued or running (the running
 * rank reads each op's state after posting it: an op it completes itself,
 * as an eager send does, needs no second turn). */
static inline void wake(checker *ck, int32_t r) {
    if (ck->queued[r] || r == ck->running) return;
    int32_t at = ck->qh + ck->qn; /* a ring of P: no division for each wake */
    ck->queue[at < ck->P ? at : at - ck->P] = r;
    ck->qn++;
    ck->queued[r] = 1;
}

static inline void complete(checker *ck, int32_t rank, int64_t op, double t) {
    ck->state[op] |= DONE;
    ck->at[op] = t;
    int32_t g = ck->grp_of ? ck->grp_of[op] : -1;
    if (g >= 0) ck->grp_left[ck->off[rank] + g]--;
    wake(ck, rank);
}

static inline int eager_send(const checker *ck, const ppv_action *a) {
    if (ck->opt->sem.kind == PPV_SEM_EAGER) return 1;
    if (ck->opt->sem.kind == PPV_SEM_EAGER_BYTES) return msg_bytes(ck, a) <= ck->opt->sem.eager_limit;
    return 0;
}

/* An action's compute time: its stage's, with per-stage costs
 * (ppv_action_cost's, from the tables). */
static inline double cost_of(const checker *ck, const ppv_action *a) {
    if (a->kind >= PPV_ACT_COUNT) return 0.0;
    if (!ck->scost || a->stage < 0 || a->stage >= ck->opt->stages->n) return ck->kcost[a->kind];
    int cls = ppv_cost_class(a->kind);
    return cls < 0 ? 0.0 : ck->scost[(int64_t)a->stage * 4 + cls];
}

/* The time of the message a sends or receives: with per-stage costs the
 * sending stage's (a forward from stage s - 1 to s, a backward from s + 1
 * to s); a collective, or a message of no stage, takes --costs' C. */
static inline double message_time(const checker *ck, const ppv_action *a) {
    const ppv_stage_costs *sc = ck->opt->stages;
    if (!sc) return ck->opt->costs.comm;
    int32_t from = a->kind == PPV_ACT_SEND_F || a->kind == PPV_ACT_SEND_B ? a->stage
                   : a->kind == PPV_ACT_RECV_F                              ? a->stage - 1
                   : a->kind == PPV_ACT_RECV_B                              ? a->stage + 1
                                                                            : -1;
    return from >= 0 && from < sc->n ? sc->s[from].comm : ck->opt->costs.comm;
}

/* Rank r reaches op at time t: post it and complete whatever that enables.
 * The semantics decides when a send completes, hence deadlock; its time is
 * always that of an asynchronous send (isend, batch_isend_irecv on a
 * communication stream), which never waits to be received: it ends when
 * posted, and the receive ends C after both are posted. One run thus
 * decides deadlock under the semantics and gives makespan, bubble ratio
 * and timeline; times do not depend on the order the run takes. */
static void post(checker *ck, int32_t r, int64_t op, const ppv_action *a, double t) {
    double C = message_time(ck, a);
    ck->state[op] |= POSTED;
    ck->at[op] = t;
    unsigned af = ppv_action_flags(a->kind);
    if (af & PPV_AF_COLL) {
        coll_group *g = &ck->groups[a->group];
        int32_t seq = ck->cseq[op], n = ck->s->groups[a->group].n;
        if (member_of(ck, a->group, r) < 0 || seq < 0) return;
        if (t > g->tmax[seq]) g->tmax[seq] = t;
        if (++g->arrived[seq] < n) return;
        for (int32_t k = 0; k < n; k++) {
            int32_t who = ck->s->groups[a->group].ranks[k];
            complete(ck, who, ck->off[who] + g->ops.v[(int64_t)seq * n + k], g->tmax[seq] + C);
        }
        return;
    }
    int32_t other = message_peer(ck, r, a);
    int64_t c = ck->cp[op] >= 0 ? ck->off[other] + ck->cp[op] : -1;
    if (af & PPV_AF_SEND) {
        int eager = eager_send(ck, a);
        if (eager) complete(ck, r, op, t);
        if (c < 0 || !(ck->state[c] & POSTED) || (ck->state[c] & DONE)) return;
        if (!eager) complete(ck, r, op, t); /* met its receive */
        complete(ck, other, c, later(ck->at[c], t + C));
    } else if (af & PPV_AF_RECV) {
        if (c < 0 || !(ck->state[c] & POSTED)) return;
        if (ck->state[c] & DONE) {
            complete(ck, r, op, later(t, ck->at[c] + C));
        } else { /* a synchronous send waits for this receive */
            double sent = ck->at[c];
            complete(ck, other, c, sent);
            complete(ck, r, op, later(t, sent + C));
        }
    }
}

static inline int is_sync(const ppv_action *a) {
    return (ppv_action_flags(a->kind) & (PPV_AF_COMM | PPV_AF_COLL)) != 0;
}

/* Widens rank r's compute span to [t0, t1]. */
static inline void note_compute(checker *ck, int32_t r, double t0, double t1) {
    if (ck->first_t[r] < 0) ck->first_t[r] = t0;
    if (t1 > ck->last_t[r]) ck->last_t[r] = t1;
}

/* When op may start on its stream: a send once the compute that made its
 * tensor has ended, a compute once the receive that brought its input has
 * completed (ops with no such dependency: a send or collective at its
 * place among the computes, a compute naming no cell after every earlier
 * communication, as a program without cells would). */
static inline double ready_at(const checker *ck, int32_t r, int64_t op, const ppv_action *a) {
    int32_t d = ck->dep[op];
    unsigned af = ppv_action_flags(a->kind);
    if (af & PPV_AF_RECV) return ck->comm_t[r];
    double dt = d >= 0 ? ck->at[ck->off[r] + d] : 0;
    if (af & (PPV_AF_SEND | PPV_AF_COLL)) return later(ck->comm_t[r], d >= 0 ? dt : ck->comp_t[r]);
    if (d >= 0) return later(ck->comp_t[r], dt);
    if (a->stage < 0 || a->mb < 0) return later(ck->comp_t[r], ck->comm_t[r]);
    return ck->comp_t[r];
}

static inline void stream_end(checker *ck, int32_t r, double t) {
    if (t > ck->free_t[r]) ck->free_t[r] = t;
}

/* Runs rank r as far as it can go. Time (spec/schedule-format.md): each
 * rank has a compute stream and a communication stream, each in program
 * order; a send waits for the compute that made its tensor, a compute for
 * the receive that brought its input, and nothing else waits for a
 * communication. The rank's program still advances in order (a blocked
 * operation blocks what follows it): that decides deadlock as NCCL's one
 * stream of operations does. */
/* The lifespan view: a compute action of a (stage, mb) ran over [t0, t1]. */
static inline void note_life(checker *ck, const ppv_action *a, double t0, double t1) {
    if (!ck->fstart) return;
    int64_t k = cell_of(ck->cl, a->stage, a->mb);
    if (k < 0) return;
    /* a stage's microbatches come in order: the cells of the next few,
     * fetched while this rank waits for its next turn */
    if (k + 16 < ck->cl->n) {
        __builtin_prefetch(a->kind == PPV_ACT_F ? &ck->fstart[k + 16] : &ck->freed[k + 16]);
    }
    if (a->kind == PPV_ACT_F && ck->fstart[k] < 0) ck->fstart[k] = t0;
    else if ((a->kind == PPV_ACT_B || a->kind == PPV_ACT_W) && t1 > ck->freed[k])
        ck->freed[k] = t1;
}

static void advance(checker *ck, int32_t r, ppv_span *spans) {
    const ppv_program *p = &ck->s->prog[r];
    while (ck->pc[r] < p->n) {
        int32_t i = ck->pc[r];
        int64_t op = ck->off[r] + i;
        const ppv_action *a = &p->acts[i];
        if (i + 6 < p->n) __builtin_prefetch(a + 6); /* the rank's next turn's */
        if (a->kind == PPV_ACT_GROUP_START) {
            int32_t end = ck->grp_end[op];
            if (!(ck->state[op] & POSTED)) { /* posted together, once all can start */
                double t = ck->comm_t[r];
                for (int32_t k = i + 1; k < end; k++)
                    if (is_sync(&p->acts[k]))
                        t = later(t, ready_at(ck, r, ck->off[r] + k, &p->acts[k]));
                ck->state[op] |= POSTED;
                ck->at[op] = t;
                for (int32_t k = i + 1; k < end; k++)
                    if (is_sync(&p->acts[k])) post(ck, r, ck->off[r] + k, &p->acts[k], t);
            }
            if (ck->grp_left[op] > 0) return;
            double t = ck->at[op], tm = t;
            for (int32_t k = i + 1; k < end; k++) {
                int64_t o = ck->off[r] + k;
                double d = is_sync(&p->acts[k]) ? ck->at[o] : t;
                if (d > tm) tm = d;
                if (spans) spans[k] = (ppv_span){t, d};
            }
            if (spans) {
                spans[i] = (ppv_span){t, t};
                if (end < p->n) spans[end] = (ppv_span){tm, tm};
            }
            ck->comm_t[r] = t;
            stream_end(ck, r, tm);
            ck->pc[r] = end < p->n ? end + 1 : end;
            continue;
        }
        if (is_sync(a)) {
            double t = ready_at(ck, r, op, a);
            if (!(ck->state[op] & POSTED)) post(ck, r, op, a, t);
            if (!(ck->state[op] & DONE)) return;
            /* t is still the post time: nothing on this rank moved while it waited */
            double d = later(t, ck->at[op]);
            if (spans) spans[i] = (ppv_span){t, d};
            ck->at[op] = d;
            ck->comm_t[r] = t;
            stream_end(ck, r, d);
            ck->pc[r]++;
            continue;
        }
        double cost = cost_of(ck, a);
        if (!a->overlap && (ppv_action_flags(a->kind) & PPV_AF_COMPUTE)) {
            /* most actions: ready_at's compute case, written out here */
            int32_t d = ck->dep[op];
            double ct = ck->comp_t[r];
            double t = d >= 0 ? later(ct, ck->at[ck->off[r] + d])
                       : a->stage < 0 || a->mb < 0 ? later(ct, ck->comm_t[r])
                                                   : ct;
            double e = t + cost;
            if (spans) spans[i] = (ppv_span){t, e};
            note_compute(ck, r, t, e);
            note_life(ck, a, t, e);
            ck->busy[r] += cost;
            ck->at[op] = e;
            ck->comp_t[r] = e;
            stream_end(ck, r, e);
            ck->pc[r] = i + 1;
            continue;
        }
        double t = ready_at(ck, r, op, a);
        if (a->overlap) { /* an overlapped cell runs its sub-actions together */
            int32_t j = ppv_run_end(p, i);
            for (int32_t k = i + 1; k < j; k++) {
                cost += cost_of(ck, &p->acts[k]);
                t = later(t, ready_at(ck, r, ck->off[r] + k, &p->acts[k]));
            }
            for (int32_t k = i; k < j; k++) {
                if (spans) spans[k] = (ppv_span){t, t + cost};
                ck->at[ck->off[r] + k] = t + cost;
                note_life(ck, &p->acts[k], t, t + cost);
            }
            note_compute(ck, r, t, t + cost);
            ck->busy[r] += cost;
            ck->comp_t[r] = t + cost;
            stream_end(ck, r, t + cost);
            ck->pc[r] = j;
            continue;
        }
        if (spans) spans[i] = (ppv_span){t, t + cost}; /* a marker: no compute */
        ck->busy[r] += cost;
        ck->at[op] = t + cost;
        ck->comp_t[r] = t + cost;
        stream_end(ck, r, t + cost);
        ck->pc[r]++;
    }
}

/* What blocked rank r waits for. */
static void describe_wait(checker *ck, int32_t r, ppv_wait *w) {
    const ppv_program *p = &ck->s->prog[r];
    int32_t i = ck->pc[r];
    int64_t op = ck->off[r] + i;
    if (p->acts[i].kind == PPV_ACT_GROUP_START) { /* the first grouped op still open */
        for (int32_t k = i + 1; k < ck->grp_end[op]; k++)
            if (is_sync(&p->acts[k]) && !(ck->state[ck->off[r] + k] & DONE)) {
                i = k;
                break;
            }
        op = ck->off[r] + i;
    }
    const ppv_action *a = &p->acts[i];
    unsigned af = ppv_action_flags(a->kind);
    w->rank = r;
    w->index = i;
    ppv_action_format(ck->s, a, w->action, sizeof w->action);
    w->waits_for = -1;
    char other[64];
    if (af & PPV_AF_COLL) {
        int32_t n = ck->s->groups[a->group].n, seq = ck->cseq[op];
        coll_group *g = &ck->groups[a->group];
        snprintf(w->reason, sizeof w->reason, "collective on group '%s' that not every member "
                 "joins", ck->s->groups[a->group].name);
        for (int32_t k = 0; seq >= 0 && k < n; k++) {
            int32_t at = g->ops.v[(int64_t)seq * n + k], who = ck->s->groups[a->group].ranks[k];
            if (at < 0) {
                w->waits_for = who;
                snprintf(w->reason, sizeof w->reason, "collective #%d on group '%s': rank %d "
                         "never issues it", seq, ck->s->groups[a->group].name, who);
                break;
            }
            if (!(ck->state[ck->off[who] + at] & POSTED)) {
                w->waits_for = who;
                snprintf(w->reason, sizeof w->reason, "collective #%d on group '%s': rank %d "
                         "has not reached it", seq, ck->s->groups[a->group].name, who);
                break;
            }
        }
        return;
    }
    w->waits_for = message_peer(ck, r, a);
    int64_t c = ck->cp[op] >= 0 ? ck->off[w->waits_for] + ck->cp[op] : -1;
    int snd = (af & PPV_AF_SEND) != 0;
    if (w->waits_for < 0) {
        snprintf(w->reason, sizeof w->reason, "no rank can ever be its peer");
    } else if (c < 0) {
        snprintf(w->reason, sizeof w->reason, "no %s on rank %d ever matches it",
                 snd ? "receive" : "send", w->waits_for);
    } else {
        int32_t cr = w->waits_for, ci = ck->cp[op];
        ppv_action_format(ck->s, &ck->s->prog[cr].acts[ci], other, sizeof other);
        snprintf(w->reason, sizeof w->reason, "%s waits for rank %d to reach %s (index %d)",
                 snd ? "send (rendezvous)" : "receive", cr, other, ci);
    }
}

/* Fills rep->cycle from the wait-for edges of the blocked ranks. */
static int find_cycle(ppv_check_report *rep, int32_t P) {
    return ppv_wait_cycle(rep->blocked, rep->nblocked, P, &rep->cycle, &rep->ncycle);
}

static void simulate(checker *ck) {
    ppv_check_report *rep = ck->rep;
    int32_t P = ck->P;
    ck->running = -1;
    for (int32_t r = 0; r < P; r++) wake(ck, r);
    while (ck->qn > 0) {
        int32_t r = ck->queue[ck->qh];
        ck->qh = ck->qh + 1 < P ? ck->qh + 1 : 0;
        ck->qn--;
        ck->queued[r] = 0;
        ck->running = r;
        advance(ck, r, rep->spans ? rep->spans[r] : NULL);
        ck->running = -1;
    }
    rep->makespan = 0;
    for (int32_t r = 0; r < P; r++) {
        if (ck->pc[r] < ck->s->prog[r].n) {
            if (!rep->blocked) rep->blocked = calloc((size_t)P, sizeof *rep->blocked);
            if (!rep->blocked) {
                ck->oom = 1;
                return;
            }
            describe_wait(ck, r, &rep->blocked[rep->nblocked++]);
        }
        if (ck->free_t[r] > rep->makespan) rep->makespan = ck->free_t[r];
    }
    rep->deadlock = rep->nblocked > 0;
    if (rep->deadlock && find_cycle(rep, P) < 0) ck->oom = 1;
    /* The zero-bubble papers' measure: a rank's span runs from its first
     * compute to its last; the startup offset of later ranks is not a
     * bubble, since the next iteration's work fills it. */
    double span = 0;
    for (int32_t r = 0; r < P; r++)
        if (ck->first_t[r] >= 0 && ck->last_t[r] - ck->first_t[r] > span)
            span = ck->last_t[r] - ck->first_t[r];
    double busy = 0;
    for (int32_t r = 0; r < P; r++) busy += ck->busy[r];
    rep->bubble_ratio = span > 0 ? 1.0 - busy / ((double)P * span) : 0.0;
    rep->simulated = !rep->deadlock;
}

/* The k-th smallest of v[0..n) (0-based, n > k), v reordered so that
 * v[0..k) are no larger and v(k..n) no smaller: Hoare's selection with the
 * median of three as pivot, linear on average (64 stages of 1,024
 * lifespans took a qsort each). */
static double select_kth(double *v, int64_t n, int64_t k) {
    int64_t lo = 0, hi = n - 1;
    while (lo < hi) {
        double a = v[lo], b = v[lo + (hi - lo) / 2], c = v[hi];
        double piv = a < b ? (b < c ? b : (a < c ? c : a)) : (a < c ? a : (b < c ? c : b));
        int64_t i = lo, j = hi;
        while (i <= j) {
            while (v[i] < piv) i++;
            while (v[j] > piv) j--;
            if (i <= j) {
                double t = v[i];
                v[i++] = v[j];
                v[j--] = t;
            }
        }
        if (k <= j) hi = j;
        else if (k >= i) lo = i;
        else break; /* between the two halves: equal to the pivot */
    }
    return v[k];
}

/* The median of v[0..n) (reordered); NaN when n is 0. */
static double median(double *v, int64_t n) {
    if (n == 0) return NAN;
    double hi = select_kth(v, n, n / 2);
    if (n % 2) return hi;
    double lo = v[0]; /* the largest of the lower half */
    for (int64_t k = 1; k < n / 2; k++)
        if (v[k] > lo) lo = v[k];
    return (lo + hi) / 2;
}

/* The lifespan view from the simulated cells (ppv_check_report.lifespan):
 * 0, or -1 out of memory. */
static int lifespans(checker *ck, const ppv_schedule *s) {
    ppv_check_report *rep = ck->rep;
    int32_t S = s->nstages, m = s->nmb;
    const ppv_check_options *o = ck->opt;
    rep->lifespan = malloc((size_t)(S ? S : 1) * sizeof *rep->lifespan);
    rep->lifespan_max = malloc((size_t)(S ? S : 1) * sizeof *rep->lifespan_max);
    rep->interval = malloc((size_t)(S ? S : 1) * sizeof *rep->interval);
    rep->alive = calloc((size_t)(S ? S : 1), sizeof *rep->alive);
    rep->peak_bound = calloc((size_t)(s->nranks ? s->nranks : 1), sizeof *rep->peak_bound);
    double *life = malloc((size_t)(m ? m : 1) * sizeof *life);
    if (!rep->lifespan || !rep->lifespan_max || !rep->interval || !rep->alive ||
        !rep->peak_bound || !life) {
        free(life);
        return -1;
    }
    double unit = o->mem.unit > 0 ? o->mem.unit : (S > 0 ? (double)s->nranks / S : 1.0);
    double period = 0;
    for (int32_t r = 0; r < ck->P && m > 0; r++)
        if (ck->busy[r] / m > period) period = ck->busy[r] / m;
    for (int32_t st = 0; st < S; st++) {
        int64_t nl = 0;
        double top = NAN;
        for (int32_t mb = 0; mb < m; mb++) {
            int64_t k = cell_of(ck->cl, st, mb);
            double f = k >= 0 ? ck->fstart[k] : -1;
            if (f >= 0 && ck->freed[k] >= f) {
                life[nl++] = ck->freed[k] - f;
                if (!(top >= ck->freed[k] - f)) top = ck->freed[k] - f;
            }
        }
        rep->lifespan[st] = median(life, nl);
        rep->lifespan_max[st] = top;
        /* the building block's period: in the steady state every rank
         * repeats one microbatch's work on all its stages, at the pace of
         * the busiest (uneven stages wait for the slowest) */
        int32_t r = s->stage_rank[st];
        double T = period;
        rep->interval[st] = T;
        double l = rep->lifespan[st];
        int32_t alive = 0;
        if (l >= 0 && T > 0) {
            double q = ceil(l / T - 1e-9);
            alive = q > m ? m : (int32_t)q;
        }
        rep->alive[st] = alive;
        double w = o->stages && o->stages->n == S ? o->stages->s[st].act : unit;
        if (r >= 0 && r < s->nranks) rep->peak_bound[r] += alive * w;
    }
    free(life);
    return 0;
}

/* ---- compute-only schedules that cannot even be ordered --------------------- */

static void report_dependency_deadlock(checker *ck, const int32_t *stuck_pc) {
    ppv_check_report *rep = ck->rep;
    const ppv_schedule *s = ck->s;
    rep->blocked = calloc((size_t)ck->P, sizeof *rep->blocked);
    if (!rep->blocked) {
        ck->oom = 1;
        return;
    }
    for (int32_t r = 0; r < ck->P; r++) {
        if (stuck_pc[r] >= s->prog[r].n) continue;
        ppv_wait *w = &rep->blocked[rep->nblocked++];
        const ppv_program *p = &s->prog[r];
        int32_t i = stuck_pc[r], j = ppv_run_end(p, i), pick = i, in = -1, fwd = 0;
        for (int32_t k = i; k < j && in < 0; k++) {
            in = ppv_input_stage(s, &p->acts[k], &fwd);
            pick = k;
        }
        w->rank = r;
        w->index = pick;
        ppv_action_format(s, &p->acts[pick], w->action, sizeof w->action);
        if (in < 0) {
            w->waits_for = -1;
            snprintf(w->reason, sizeof w->reason, "waits for nothing yet cannot run");
            continue;
        }
        w->waits_for = s->stage_rank[in];
        snprintf(w->reason, sizeof w->reason, "needs %s %d%s%d from rank %d, which %s",
                 fwd ? "the activation of" : "the input gradient of", in, fwd ? "F" : "B/I",
                 p->acts[pick].mb, w->waits_for,
                 w->waits_for == r ? "comes later on this same rank" : "has not computed it");
    }
    rep->deadlock = 1;
    if (find_cycle(rep, ck->P) < 0) ck->oom = 1;
}

/* ---- 4. memory ---------------------------------------------------------------- */

/* The walk of each rank's compute order for its peak activation, one live
 * amount per cell: an F of stage st holds stage_w[st] (NULL: the unit of
 * mm), or its own act with per-stage costs sc. */
typedef struct peak_walk {
    const ppv_schedule *s;
    const cells *c;
    const ppv_mem_model *mm;
    ppv_mem_model same;
    const double *stage_w;
    const ppv_stage_costs *sc;
    int recompute; /* 0: s has no R (no pass looks for one) */
    double unit;
    double *live;
    uint8_t *recomputed;
    double *peak;        /* [nranks] */
    int32_t *at;         /* [nranks]: the index where the rank first reaches its peak (-1:
                          * it holds nothing), or NULL */
    double *const *level; /* [nranks][n]: the live amount after each action, in the unit
                           * of peak, or NULL */
} peak_walk;

/* Sets up w (the caller has filled s, c, mm, stage_w, sc, recompute, peak,
 * at and level). Returns 0, or -1 when out of memory. */
static int peak_begin(peak_walk *w) {
    int32_t S = w->s->nstages;
    if (w->sc && w->sc->n != S) w->sc = NULL; /* refused before; never read past its stages */
    const ppv_stage_costs *sc = w->sc;
    if (sc && !w->stage_w) { /* stages alike in memory: counted in units, as without them */
        int32_t k = 1;
        while (k < S && sc->s[k].act == sc->s[0].act && sc->s[k].i_frac == sc->s[0].i_frac &&
               sc->s[k].stash_frac == sc->s[0].stash_frac)
            k++;
        if (k == S && S > 0 && sc->s[0].act > 0) {
            w->same = (ppv_mem_model){sc->s[0].act, sc->s[0].i_frac, sc->s[0].stash_frac};
            w->mm = &w->same;
            w->sc = NULL;
        }
    }
    w->unit = w->mm->unit > 0 ? w->mm->unit : (S > 0 ? (double)w->s->nranks / S : 1.0);
    w->live = ppv_calloc_big((size_t)(w->c->n ? w->c->n : 1), sizeof *w->live);
    w->recomputed = ppv_calloc_big((size_t)(w->c->n ? w->c->n : 1), 1);
    return w->live && w->recomputed ? 0 : -1;
}

static void peak_end(peak_walk *w) {
    ppv_free_big(w->live);
    ppv_free_big(w->recomputed);
}

/* Rank r's walk: its R actions first (they mark their cells), then its
 * peak. It touches the cells of r's stages alone (each_rank). */
static void peak_rank(peak_walk *w, int32_t r) {
    const ppv_schedule *s = w->s;
    const ppv_program *p = &s->prog[r];
    const ppv_stage_costs *sc = w->sc;
    const ppv_mem_model *mm = w->mm;
    int32_t S = s->nstages;
    int weighted = w->stage_w || sc;
    for (int32_t i = 0; i < p->n && w->recompute; i++)
        if (p->acts[i].kind == PPV_ACT_R)
            w->recomputed[cell_of(w->c, p->acts[i].stage, p->acts[i].mb)] = 1;
    double cur = 0, top = 0; /* in units of one F's activation, or weighted */
    int32_t top_at = -1;
    for (int32_t i = 0; i < p->n; i++) {
        const ppv_action *a = &p->acts[i];
        if (w->level) w->level[r][i] = weighted ? cur : cur * w->unit;
        if (a->stage < 0 || a->mb < 0 || !(ppv_action_flags(a->kind) & PPV_AF_COMPUTE))
            continue;
        int64_t k = cell_of(w->c, a->stage, a->mb);
        const ppv_stage_cost *own = sc && a->stage < S ? &sc->s[a->stage] : NULL;
        double *l = &w->live[k], d = 0,
               wt = own ? own->act : w->stage_w && a->stage < S ? w->stage_w[a->stage] : 1.0;
        double stash = own ? own->stash_frac : mm->stash_frac;
        double ifrac = own ? own->i_frac : mm->i_frac;
        switch (a->kind) {
        case PPV_ACT_F: d = (w->recomputed[k] ? stash : 1.0) * wt; break;
        case PPV_ACT_R: d = (1.0 - stash) * wt; break;
        case PPV_ACT_I: d = -fmin(*l, ifrac * wt); break;
        case PPV_ACT_W:
        case PPV_ACT_B: d = -*l; break;
        default: break;
        }
        *l += d;
        cur += d;
        if (w->level) w->level[r][i] = weighted ? cur : cur * w->unit;
        if (cur > top) top = cur, top_at = i;
    }
    w->peak[r] = weighted ? top : top * w->unit;
    if (w->at) w->at[r] = top_at;
}

/* Peak activation per rank (into peak[nranks]), rank by rank (peak_walk
 * says what each argument is). Returns 0, or -1 when out of memory. */
static int peak_memory(const ppv_schedule *s, const cells *c, const ppv_mem_model *mm,
                       const double *stage_w, const ppv_stage_costs *sc, double *peak,
                       int32_t *at, double *const *level) {
    peak_walk w = {.s = s, .c = c, .mm = mm, .stage_w = stage_w, .sc = sc, .recompute = 1,
                   .peak = peak, .at = at, .level = level};
    int rc = peak_begin(&w);
    for (int32_t r = 0; r < s->nranks && rc == 0; r++) peak_rank(&w, r);
    peak_end(&w);
    return rc;
}

int ppv_schedule_peak_weighted(const ppv_schedule *s, const ppv_mem_model *mm,
                               const double *stage_w, double *peak, int32_t *at) {
    cells cl;
    if (cells_init(&cl, s, -1) < 0) return -1;
    int rc = peak_memory(s, &cl, mm, stage_w, NULL, peak, at, NULL);
    free(cl.key);
    return rc;
}

/* ---- driver ---------------------------------------------------------------- */

/* A rank's structure (check_rank) and peak (peak_rank) in one pass over
 * its program, which then lies in the cache for the second. */
typedef struct structure_pass {
    const cells *c;
    uint16_t *fl;
    peak_walk walk;
} structure_pass;

static void structure_rank(checker *ck, int32_t r, void *arg) {
    structure_pass *sp = arg;
    check_rank(ck, sp->c, sp->fl, r);
    peak_rank(&sp->walk, r);
}

/* The structure pass (rank by rank, then the counts) on a checker of its
 * own, whose errors come before the matching's: on a helper beside the
 * simulation, which reads none of what it writes. It starts once the
 * matching is done, which then has every processor. */
typedef struct structure_job {
    checker view;
    ppv_check_report errs;
    structure_pass *sp;
    ppv_beside on;
    /* then PyTorch's runtime's view of this schedule, where wanted (NULL:
     * not), which the simulation leaves a processor the time for */
    const ppv_schedule *pytorch;
    ppv_problem *pv;
    int32_t pn;
    int prc; /* ppv_check_pytorch's answer: 0, or -1 out of memory */
} structure_job;

static void structure_run(void *arg) {
    structure_job *j = arg;
    each_rank(&j->view, structure_rank, j->sp);
    check_counts(&j->view, j->sp->c, j->sp->fl);
    char err[64];
    if (j->pytorch) j->prc = ppv_check_pytorch(j->pytorch, &j->pv, &j->pn, err, sizeof err);
}

/* Starts the structure pass of ck in j, beside the caller (inline where no
 * helper is idle); it leaves the caller a processor. */
static void structure_start(structure_job *j, const checker *ck, structure_pass *sp,
                            const ppv_schedule *pytorch) {
    memset(&j->errs, 0, sizeof j->errs);
    j->pytorch = pytorch, j->pv = NULL, j->pn = 0, j->prc = 0;
    j->view = *ck;
    j->view.rep = &j->errs;
    j->view.spare = 1;
    j->sp = sp;
    if (!ppv_beside_start(&j->on, structure_run, j)) structure_run(j);
}

/* Waits for j (once; again does nothing). */
static void structure_join(structure_job *j) {
    ppv_beside_join(&j->on);
}

ppv_check_options ppv_check_defaults(void) {
    ppv_check_options o;
    memset(&o, 0, sizeof o);
    o.sem.kind = PPV_SEM_RENDEZVOUS;
    o.costs = (ppv_costs){1.0, 2.0, 1.0, 0.0};
    o.mem = (ppv_mem_model){0.0, 0.0, 0.0};
    o.msg_bytes = 8 << 20;
    return o;
}

void ppv_check_report_free(ppv_check_report *r) {
    if (!r) return;
    free(r->errors);
    free(r->blocked);
    free(r->cycle);
    free(r->peak_activation);
    free(r->peak_index);
    if (r->spans && r->checked)
        for (int32_t k = 0; k < r->checked->nranks; k++) free(r->spans[k]);
    if (r->live && r->checked)
        for (int32_t k = 0; k < r->checked->nranks; k++) free(r->live[k]);
    free(r->spans);
    free(r->live);
    free(r->lifespan);
    free(r->lifespan_max);
    free(r->interval);
    free(r->alive);
    free(r->peak_bound);
    free(r->pytorch);
    ppv_schedule_free(r->checked);
    free(r);
}

static void checker_free(checker *ck) {
    free_msgs(ck);
    free(ck->scost);
    ck->scost = NULL;
    ppv_free_big(ck->fstart);
    ppv_free_big(ck->freed);
    ck->fstart = ck->freed = NULL;
    free(ck->reduced);
    free(ck->off);
    ppv_free_big(ck->cp);
    for (int32_t k = 0; k < ck->nchans; k++) {
        free(ck->chans[k].sends.v);
        free(ck->chans[k].recvs.v);
    }
    free(ck->chans);
    if (ck->chan_of)
        for (int32_t r = 0; r < ck->P; r++) free(ck->chan_of[r]);
    free(ck->chan_of);
    free(ck->chan_n);
    free(ck->chan_cap);
    if (ck->groups)
        for (int32_t g = 0; g < ck->s->ngroups; g++) {
            free(ck->groups[g].members);
            free(ck->groups[g].count);
            free(ck->groups[g].ops.v);
            free(ck->groups[g].arrived);
            free(ck->groups[g].tmax);
        }
    free(ck->groups);
    ppv_free_big(ck->cseq);
    ppv_free_big(ck->grp_of);
    ppv_free_big(ck->grp_end);
    ppv_free_big(ck->grp_left);
    ppv_free_big(ck->state);
    ppv_free_big(ck->at);
    free(ck->pc);
    free(ck->free_t);
    free(ck->busy);
    free(ck->comp_t);
    free(ck->comm_t);
    ppv_free_big(ck->dep);
    free(ck->first_t);
    free(ck->last_t);
    free(ck->queue);
    free(ck->queued);
}

/* The time model's data dependencies (spec/schedule-format.md, "Time"):
 * a forward needs the RECV_F of its (stage, microbatch) and a backward
 * (B, I) its RECV_B, when the rank received them; a SEND_F needs the
 * forward of its cell, a SEND_B the backward for inputs. Each is the
 * latest such action before it in the rank's program. */

/* What action a of the rank needs (want) and what it provides (put), as
 * slots of its cell: 0 RECV_F, 1 RECV_B, 2 forward, 3 backward for inputs;
 * -1 for none. */
static inline void dep_slots(const ppv_action *a, int *want, int *put) {
    *want = *put = -1;
    switch (a->kind) {
    case PPV_ACT_F:
        *want = 0, *put = 2;
        break;
    case PPV_ACT_B:
    case PPV_ACT_I:
        *want = 1, *put = 3;
        break;
    case PPV_ACT_SEND_F:
        *want = 2;
        break;
    case PPV_ACT_SEND_B:
        *want = 3;
        break;
    case PPV_ACT_RECV_F:
        *put = 0;
        break;
    case PPV_ACT_RECV_B:
        *put = 1;
        break;
    default:
        break;
    }
}

/* A table of every (stage, microbatch, slot): where its rank last put it,
 * plus 1 (0: not yet, so that a new zeroed block is the empty table).
 * Only the stage's rank puts or reads a cell's slots. */
typedef struct deps_table {
    int32_t *at; /* [cells * 4] */
} deps_table;

/* Rank r's dependencies from the table (each_rank: a cell's slots are
 * put and read only by its stage's rank). */
static void deps_rank(checker *ck, int32_t r, void *arg) {
    const deps_table *t = arg;
    const ppv_program *p = &ck->s->prog[r];
    int32_t *dep = ck->dep + ck->off[r], *cp = ck->cp + ck->off[r];
    uint32_t kinds = 0; /* summed here, not in ck, a run's own but beside the others' */
    int64_t named = 0;
    rank_msgs *m = &ck->msgs[r];
    peer_ops *last = NULL;
    for (int32_t i = 0; i < p->n; i++) {
        const ppv_action *a = &p->acts[i];
        dep[i] = -1, cp[i] = -1;
        kinds |= 1u << (a->kind & 31);
        named += names_cell(a);
        unsigned af = ppv_action_flags(a->kind);
        if ((af & PPV_AF_COMM) && !ck->oom) collect_op(ck, m, &last, r, i, a, af);
        if (a->stage < 0 || a->stage >= ck->S || a->mb < 0 || a->mb >= ck->m) continue;
        int want, put;
        dep_slots(a, &want, &put);
        int64_t cell = ((int64_t)a->stage * ck->m + a->mb) * 4;
        if (want >= 0) dep[i] = t->at[cell + want] - 1;
        if (put >= 0) t->at[cell + put] = i + 1;
    }
    ck->kinds |= kinds;
    ck->named += named;
}

/* The dependencies by the table, where it is no bigger than the schedule
 * (stages x microbatches cells); 1 when done, 0 when not (find_deps
 * hashes then), -1 out of memory. A cell's slots are put and read by its
 * stage's rank alone, so the ranks are read side by side (each_rank). */
static int find_deps_dense(checker *ck) {
    int64_t cells = (int64_t)ck->S * ck->m;
    if (ck->S <= 0 || ck->m <= 0 || cells > ck->total + 1024) return 0;
    deps_table t = {ppv_calloc_big((size_t)cells * 4, sizeof *t.at)};
    if (!t.at) return -1;
    each_rank(ck, deps_rank, &t);
    ppv_free_big(t.at);
    return 1;
}

static int find_deps(checker *ck) {
    int dense = find_deps_dense(ck);
    if (dense != 0) return dense < 0 ? -1 : 0;
    const ppv_schedule *s = ck->s;
    int64_t most = 0;
    for (int32_t r = 0; r < s->nranks; r++)
        if (s->prog[r].n > most) most = s->prog[r].n;
    int64_t *key = malloc((size_t)(2 * most + 16) * sizeof *key);
    int32_t *val = malloc((size_t)(2 * most + 16) * sizeof *val);
    if (!key || !val) {
        free(key), free(val);
        return -1;
    }
    for (int32_t r = 0; r < s->nranks; r++) {
        const ppv_program *p = &s->prog[r];
        peer_ops *last = NULL;
        int64_t cap = 2 * (int64_t)p->n + 16; /* at most one entry per action: half full */
        for (int64_t k = 0; k < cap; k++)
            key[k] = -1;
#define SLOT_KEY(a, slot) ((((int64_t)(a)->stage << 32) | (uint32_t)(a)->mb) * 4 + (slot))
        for (int32_t i = 0; i < p->n; i++) {
            const ppv_action *a = &p->acts[i];
            int64_t op = ck->off[r] + i;
            ck->dep[op] = -1, ck->cp[op] = -1;
            ck->kinds |= 1u << (a->kind & 31);
            ck->named += names_cell(a);
            unsigned af = ppv_action_flags(a->kind);
            if ((af & PPV_AF_COMM) && !ck->oom) collect_op(ck, &ck->msgs[r], &last, r, i, a, af);
            if (a->stage < 0 || a->mb < 0) continue;
            int want, put;
            dep_slots(a, &want, &put);
            if (want >= 0) {
                int64_t kk = SLOT_KEY(a, want);
                for (uint64_t h = (uint64_t)kk * 0x9E3779B97F4A7C15ULL;; h++) {
                    int64_t at = (int64_t)(h % (uint64_t)cap);
                    if (key[at] == kk) {
                        ck->dep[op] = val[at];
                        break;
                    }
                    if (key[at] < 0) break;
                }
            }
            if (put >= 0) {
                int64_t kk = SLOT_KEY(a, put);
                for (uint64_t h = (uint64_t)kk * 0x9E3779B97F4A7C15ULL;; h++) {
                    int64_t at = (int64_t)(h % (uint64_t)cap);
                    if (key[at] < 0 || key[at] == kk) {
                        key[at] = kk;
                        val[at] = i;
                        break;
                    }
                }
            }
        }
#undef SLOT_KEY
    }
    free(key);
    free(val);
    return 0;
}

static int checker_init(checker *ck, const ppv_schedule *s) {
    int32_t P = s->nranks;
    for (int k = 0; k < PPV_ACT_COUNT; k++) {
        ppv_action x;
        memset(&x, 0, sizeof x);
        x.kind = (uint8_t)k;
        ck->kcost[k] = ppv_action_cost(&x, &ck->opt->costs);
    }
    const ppv_stage_costs *sc = ck->opt->stages;
    if (sc && sc->n > 0) {
        ck->scost = malloc((size_t)sc->n * 4 * sizeof *ck->scost);
        if (!ck->scost) return -1;
        for (int32_t st = 0; st < sc->n; st++) {
            const ppv_stage_cost *c = &sc->s[st];
            ppv_costs one = {c->f, c->b, c->w, c->comm};
            for (int cls = 0; cls < 4; cls++)
                ck->scost[(int64_t)st * 4 + cls] = ppv_class_cost(cls, &one);
        }
    }
    ck->s = s;
    ck->P = P;
    ck->S = s->nstages;
    ck->m = s->nmb;
    ck->off = malloc((size_t)(P + 1) * sizeof *ck->off);
    if (!ck->off) return -1;
    ck->off[0] = 0;
    for (int32_t r = 0; r < P; r++) ck->off[r + 1] = ck->off[r] + s->prog[r].n;
    int64_t n = ck->total = ck->off[P];
    size_t nn = (size_t)(n ? n : 1), pp = (size_t)(P ? P : 1);
    ck->cp = ppv_alloc_big(nn * sizeof *ck->cp);
    ck->chan_of = calloc(pp, sizeof *ck->chan_of);
    ck->chan_n = calloc(pp, sizeof *ck->chan_n);
    ck->chan_cap = calloc(pp, sizeof *ck->chan_cap);
    ck->pc = calloc(pp, sizeof *ck->pc);
    ck->free_t = calloc(pp, sizeof *ck->free_t);
    ck->busy = calloc(pp, sizeof *ck->busy);
    ck->comp_t = calloc(pp, sizeof *ck->comp_t);
    ck->comm_t = calloc(pp, sizeof *ck->comm_t);
    ck->dep = ppv_alloc_big(nn * sizeof *ck->dep);
    ck->first_t = malloc(pp * sizeof *ck->first_t);
    ck->last_t = calloc(pp, sizeof *ck->last_t);
    ck->queue = malloc(pp * sizeof *ck->queue);
    ck->queued = calloc(pp, 1);
    ck->groups = calloc((size_t)(s->ngroups ? s->ngroups : 1), sizeof *ck->groups);
    ck->msgs = calloc(pp, sizeof *ck->msgs);
    if (!ck->cp || !ck->chan_of || !ck->chan_n || !ck->chan_cap || !ck->pc || !ck->free_t ||
        !ck->busy || !ck->first_t || !ck->last_t || !ck->queue || !ck->queued || !ck->groups ||
        !ck->comp_t || !ck->comm_t || !ck->dep || !ck->msgs)
        return -1;
    if (find_deps(ck) < 0) return -1; /* and every op's cp to -1 */
    for (int32_t r = 0; r < P; r++) ck->first_t[r] = -1;
    if (s->ngroups == 0 && !(ck->kinds >> PPV_ACT_GROUP_START & 1)) return 0;
    ck->cseq = ppv_alloc_big(nn * sizeof *ck->cseq);
    ck->grp_of = ppv_alloc_big(nn * sizeof *ck->grp_of);
    ck->grp_end = ppv_alloc_big(nn * sizeof *ck->grp_end);
    ck->grp_left = ppv_calloc_big(nn, sizeof *ck->grp_left);
    if (!ck->cseq || !ck->grp_of || !ck->grp_end || !ck->grp_left) return -1;
    for (int64_t k = 0; k < n; k++) ck->cseq[k] = -1;
    for (int32_t r = 0; r < P; r++) { /* group extents */
        int32_t open = -1;
        for (int32_t i = 0; i < s->prog[r].n; i++) {
            int64_t op = ck->off[r] + i;
            ppv_action_kind k = s->prog[r].acts[i].kind;
            ck->grp_of[op] = -1;
            ck->grp_end[op] = -1;
            if (k == PPV_ACT_GROUP_START && open < 0) {
                open = i;
            } else if (k == PPV_ACT_GROUP_END && open >= 0) {
                ck->grp_end[ck->off[r] + open] = i;
                open = -1;
            } else if (open >= 0 && is_sync(&s->prog[r].acts[i])) {
                ck->grp_of[op] = open;
                ck->grp_left[ck->off[r] + open]++;
            }
        }
        if (open >= 0) ck->grp_end[ck->off[r] + open] = s->prog[r].n;
    }
    for (int32_t g = 0; g < s->ngroups; g++) {
        coll_group *cg = &ck->groups[g];
        int32_t n = s->groups[g].n;
        cg->members = malloc((size_t)(n ? n : 1) * sizeof *cg->members);
        cg->count = calloc((size_t)(n ? n : 1), sizeof *cg->count);
        if (!cg->members || !cg->count) return -1;
        for (int32_t k = 0; k < n; k++)
            cg->members[k] = (int64_t)s->groups[g].ranks[k] << 32 | k;
        qsort(cg->members, (size_t)n, sizeof *cg->members, key_cmp);
    }
    return 0;
}

int ppv_schedule_check(const ppv_schedule *s, const ppv_check_options *opt,
                       ppv_check_report **out, char *err, size_t errlen) {
    *out = NULL;
    int64_t actions = 0;
    for (int32_t r = 0; r < s->nranks; r++) actions += s->prog[r].n;
    if (actions >= 100000) ppv_helpers_wake(); /* its ranks are checked in runs */
    if (actions == 0) /* nothing to check is not OK (ppv_run refuses it too) */
        return ppv_errf(err, errlen, "%s: no action: no stage or microbatch to check", s->name);
    const ppv_costs *c = &opt->costs;
    if (!(c->f > 0) || !(c->b - c->w > 0) || !(c->w >= 0) || !(c->comm >= 0))
        return ppv_errf(err, errlen, "costs need F > 0, B > W >= 0 and C >= 0 (got %g,%g,%g,%g)",
                        c->f, c->b, c->w, c->comm);
    if (opt->stages && opt->stages->n != s->nstages)
        return ppv_errf(err, errlen, "%s gives costs for %d stage%s, but %s has %d", opt->stages->source,
                        (int)opt->stages->n, opt->stages->n == 1 ? "" : "s", s->name, (int)s->nstages);
    if (!(opt->mem.i_frac >= 0 && opt->mem.i_frac <= 1) ||
        !(opt->mem.stash_frac >= 0 && opt->mem.stash_frac <= 1))
        return ppv_errf(err, errlen, "memory fractions must lie in [0, 1]");
    ppv_check_report *rep = calloc(1, sizeof *rep);
    if (!rep) return ppv_errf(err, errlen, "out of memory");
    rep->nranks = s->nranks;
    rep->nstages = s->nstages;
    rep->nmb = s->nmb;
    rep->sem = opt->sem;
    checker ck;
    memset(&ck, 0, sizeof ck);
    ck.opt = opt;
    ck.rep = rep;
    int rc = -1;
    uint16_t *fl = NULL;
    int32_t *stuck = NULL;
    cells cl = {0, 0, NULL};
    int beside = 0; /* the structure pass runs beside the simulation (sj) */
    int pytorch_done = 0; /* PyTorch's view is sj's to work out */
    structure_job sj;
    structure_pass sp;
    ppv_check_report matched = {0};
    if (checker_init(&ck, s) < 0 || cells_init(&cl, s, ck.named) < 0) goto oom;
    fl = ppv_calloc_big((size_t)cl.n + 1, sizeof *fl);
    ck.reduced = calloc((size_t)s->nstages + 1, 1);
    if (!fl || !ck.reduced) goto oom;
    rep->peak_activation = calloc((size_t)(s->nranks ? s->nranks : 1), sizeof(double));
    rep->peak_index = calloc((size_t)(s->nranks ? s->nranks : 1), sizeof *rep->peak_index);
    if (!rep->peak_activation || !rep->peak_index) goto oom;
    sp = (structure_pass){&cl, fl, {.s = s, .c = &cl, .mm = &opt->mem, .sc = opt->stages,
                                    .recompute = ck.kinds >> PPV_ACT_R & 1,
                                    .peak = rep->peak_activation, .at = rep->peak_index}};
    if (peak_begin(&sp.walk) < 0) {
        peak_end(&sp.walk);
        goto oom;
    }
    /* A file with its messages: the structure pass beside the simulation
     * (after the matching), its errors first. A compute-only one is
     * lowered only when it passes, and a timeline reads the cells' peaks. */
    beside = s->form == PPV_FORM_COMPUTE_COMMS && !opt->keep_timeline;
    if (!beside) {
        each_rank(&ck, structure_rank, &sp); /* rank by rank: structure and peak */
        peak_end(&sp.walk);
        check_counts(&ck, &cl, fl);
    }

    const ppv_schedule *run = s;
    if (s->form == PPV_FORM_COMPUTE_ONLY) {
        if (rep->errors_total > 0) goto verdict; /* the order is not a pipeline to lower */
        stuck = malloc((size_t)(s->nranks ? s->nranks : 1) * sizeof *stuck);
        if (!stuck) goto oom;
        int lrc = ppv_lower_internal(s, c, opt->msg_bytes, &rep->checked, stuck, err, errlen);
        if (lrc < 0) goto fail;
        if (lrc == 1) {
            report_dependency_deadlock(&ck, stuck);
            if (ck.oom) goto oom;
            goto verdict;
        }
        run = rep->checked;
        checker_free(&ck);
        memset(&ck, 0, sizeof ck);
        ck.opt = opt;
        ck.rep = rep;
        if (checker_init(&ck, run) < 0) goto oom;
    }
    if (beside) ck.rep = &matched; /* its errors come after the structure's */
    match_messages(&ck);
    match_collectives(&ck);
    ck.rep = rep;
    if (beside) { /* PyTorch's view, where wanted, after the structure */
        structure_start(&sj, &ck, &sp, opt->pytorch ? s : NULL);
        pytorch_done = opt->pytorch;
    }
    /* the simulation's arrays, once the matching's lists are gone */
    ck.state = ppv_calloc_big((size_t)(ck.total ? ck.total : 1), 1);
    ck.at = ppv_calloc_big((size_t)(ck.total ? ck.total : 1), sizeof *ck.at);
    if (!ck.state || !ck.at) ck.oom = 1;
    if (ck.oom) goto oom;
    if (opt->keep_timeline) {
        rep->spans = calloc((size_t)(run->nranks ? run->nranks : 1), sizeof *rep->spans);
        if (!rep->spans) goto oom;
        for (int32_t r = 0; r < run->nranks; r++) {
            rep->spans[r] = calloc((size_t)(run->prog[r].n ? run->prog[r].n : 1), sizeof(ppv_span));
            if (!rep->spans[r]) goto oom;
        }
        if (!rep->checked) { /* spans index the checked programs: keep a copy */
            char e2[8];
            rep->checked = ppv_schedule_new(run->nranks);
            if (!rep->checked) goto oom;
            for (int32_t r = 0; r < run->nranks; r++)
                for (int32_t i = 0; i < run->prog[r].n; i++)
                    if (ppv_schedule_append(rep->checked, r, &run->prog[r].acts[i]) < 0) goto oom;
            for (int32_t g = 0; g < run->ngroups; g++)
                if (ppv_schedule_add_group(rep->checked, run->groups[g].name, run->groups[g].ranks,
                                           run->groups[g].n) < 0)
                    goto oom;
            memcpy(rep->checked->name, run->name, sizeof run->name);
            rep->checked->nmb = run->nmb;
            if (ppv_schedule_finish(rep->checked, e2, sizeof e2) < 0) goto oom;
        }
        /* the memory track: the same walk as the peak, over the checked
         * programs (their compute actions are the schedule's, in order) */
        rep->live = calloc((size_t)(run->nranks ? run->nranks : 1), sizeof *rep->live);
        if (!rep->live) goto oom;
        for (int32_t r = 0; r < run->nranks; r++)
            if (!(rep->live[r] = calloc((size_t)(run->prog[r].n ? run->prog[r].n : 1),
                                        sizeof(double))))
                goto oom;
        double *top = calloc((size_t)(run->nranks ? run->nranks : 1), sizeof *top);
        int lrc = top ? peak_memory(rep->checked, &cl, &opt->mem, NULL, opt->stages, top, NULL,
                                    rep->live)
                      : -1;
        free(top);
        if (lrc < 0) goto oom;
    }
    ck.cl = &cl;
    ck.fstart = ppv_calloc_big((size_t)(cl.n ? cl.n : 1), sizeof *ck.fstart);
    ck.freed = ppv_calloc_big((size_t)(cl.n ? cl.n : 1), sizeof *ck.freed);
    if (!ck.fstart || !ck.freed) goto oom;
    for (int64_t k = 0; k < cl.n; k++)
        ck.fstart[k] = ck.freed[k] = -1;
    simulate(&ck);
    if (beside) { /* the structure's errors, then the matching's */
        structure_join(&sj);
        peak_end(&sp.walk);
        ck.oom |= sj.view.oom || sj.prc < 0;
        append_errors(&ck, &sj.errs);
        append_errors(&ck, &matched);
        rep->pytorch = sj.pv, rep->npytorch = sj.pn;
        beside = 0;
    }
    if (ck.oom) goto oom;
    if (rep->simulated && lifespans(&ck, s) < 0) goto oom;
verdict:
    if (opt->pytorch && !pytorch_done &&
        ppv_check_pytorch(s, &rep->pytorch, &rep->npytorch, err, errlen) < 0)
        goto oom;
    rep->ok = rep->errors_total == 0 && !rep->deadlock;
    *out = rep;
    rep = NULL;
    rc = 0;
    goto fail;
oom:
    ppv_errf(err, errlen, "out of memory while checking %s", s->name);
fail:
    if (beside) { /* left on the way: nothing of it is read */
        structure_join(&sj);
        peak_end(&sp.walk);
        free(sj.errs.errors);
        free(sj.pv);
        free(matched.errors);
    }
    checker_free(&ck);
    free(cl.key);
    ppv_free_big(fl);
    free(stuck);
    ppv_check_report_free(rep);
    return rc;
}

int ppv_semantics_parse(const char *text, ppv_semantics *out) {
    if (strcmp(text, "rendezvous") == 0) {
        *out = (ppv_semantics){PPV_SEM_RENDEZVOUS, 0};
        return 0;
    }
    if (strcmp(text, "eager") == 0) {
        *out = (ppv_semantics){PPV_SEM_EAGER, 0};
        return 0;
    }
    int64_t limit;
    if (strncmp(text, "eager:", 6) == 0 && ppv_parse_bytes(text + 6, 0, 1LL << 50, &limit) == 0) {
        *out = (ppv_semantics){PPV_SEM_EAGER_BYTES, limit};
        return 0;
    }
    return -1;
}

void ppv_semantics_format(const ppv_semantics *sem, char *buf, size_t n) {
    if (sem->kind == PPV_SEM_EAGER) snprintf(buf, n, "eager");
    else if (sem->kind == PPV_SEM_EAGER_BYTES) snprintf(buf, n, "eager:%lld",
                                                         (long long)sem->eager_limit);
    else snprintf(buf, n, "rendezvous");
}
