/* schedule.c - the schedule IR: construction, stage->rank inference and the
 * compact spelling of actions used in messages.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "schedule_internal.h"

/* A million actions and the check's arrays fit in 50 MiB only if this holds. */
_Static_assert(sizeof(ppv_action) == 32, "ppv_action must stay 32 bytes");
_Static_assert(PPV_ACT_COUNT <= 32, "ppv_finish_notes.kinds holds a bit for each kind");

ppv_schedule *ppv_schedule_new(int32_t nranks) {
    if (nranks < 0) return NULL;
    ppv_schedule *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->nranks = nranks;
    s->prog = calloc(nranks > 0 ? (size_t)nranks : 1, sizeof *s->prog);
    if (!s->prog) {
        free(s);
        return NULL;
    }
    return s;
}

/* Whether p's actions lie in the schedule's arena, which it does not own. */
static int in_arena(const ppv_schedule *s, const ppv_program *p) {
    uintptr_t a = (uintptr_t)p->acts, lo = (uintptr_t)s->arena;
    return s->arena && a >= lo && a < lo + s->arena_n * sizeof *s->arena;
}

void ppv_schedule_free(ppv_schedule *s) {
    if (!s) return;
    for (int32_t r = 0; r < s->nranks; r++) {
        if (!in_arena(s, &s->prog[r])) free(s->prog[r].acts);
        free(s->prog[r].src);
    }
    ppv_free_big(s->arena);
    free(s->line_off);
    for (int32_t g = 0; g < s->ngroups; g++) free(s->groups[g].ranks);
    free(s->groups);
    free(s->group_index);
    free(s->prog);
    free(s->stage_rank);
    free(s);
}

ppv_action ppv_action_make(ppv_action_kind k, int32_t stage, int32_t mb) {
    ppv_action a;
    memset(&a, 0, sizeof a);
    a.kind = (uint8_t)k;
    a.stage = stage;
    a.mb = mb;
    a.peer = -1; /* and group, count */
    a.tag = -1;  /* and root */
    a.step = -1;
    return a;
}

int ppv_schedule_reserve(ppv_schedule *s, int32_t rank, int32_t cap) {
    ppv_program *p = &s->prog[rank];
    if (cap <= p->cap) return 0;
    ppv_action *acts;
    if (in_arena(s, p)) { /* outgrew its share: a block of its own */
        if ((acts = malloc((size_t)cap * sizeof *acts)) && p->n)
            memcpy(acts, p->acts, (size_t)p->n * sizeof *acts);
    } else {
        acts = realloc(p->acts, (size_t)cap * sizeof *acts);
    }
    if (!acts) return -1;
    p->acts = acts;
    if (p->src) {
        uint32_t *src = realloc(p->src, (size_t)cap * sizeof *src);
        if (!src) return -1;
        p->src = src;
    }
    p->cap = cap;
    return 0;
}

int ppv_schedule_reserve_all(ppv_schedule *s, const int32_t *caps) {
    size_t total = 0; /* a program that has room already keeps it */
    for (int32_t r = 0; r < s->nranks; r++)
        if (s->prog[r].cap == 0 && caps[r] > 0) total += (size_t)caps[r];
    if (s->arena || total == 0) return 0;
    if (total > SIZE_MAX / sizeof *s->arena ||
        !(s->arena = ppv_alloc_big(total * sizeof *s->arena)))
        return -1;
    s->arena_n = total;
    ppv_action *at = s->arena;
    for (int32_t r = 0; r < s->nranks; r++) {
        if (s->prog[r].cap != 0 || caps[r] <= 0) continue;
        s->prog[r].acts = at;
        s->prog[r].cap = caps[r];
        at += caps[r];
    }
    return 0;
}

ppv_action *ppv_schedule_push_grow(ppv_schedule *s, int32_t rank, int64_t at) {
    if (rank < 0 || rank >= s->nranks) return NULL;
    ppv_program *p = &s->prog[rank];
    if (p->n == p->cap && ppv_schedule_reserve(s, rank, p->cap ? p->cap * 2 : 16) < 0) return NULL;
    if (at >= 0 && !p->src && !s->placeless) { /* the first action with a place */
        p->src = calloc((size_t)p->cap, sizeof *p->src);
        if (!p->src) return NULL;
    }
    if (p->src) p->src[p->n] = at >= 0 && at < UINT32_MAX ? (uint32_t)at + 1 : 0;
    return &p->acts[p->n++];
}

int ppv_schedule_append_at(ppv_schedule *s, int32_t rank, const ppv_action *a, int64_t at) {
    ppv_action *d = ppv_schedule_push(s, rank, at);
    if (!d) return -1;
    *d = *a;
    int32_t n = s->prog[rank].n;
    if (d->step < 0) d->step = n > 1 ? d[-1].step + 1 : 0;
    return 0;
}

int ppv_schedule_append(ppv_schedule *s, int32_t rank, const ppv_action *a) {
    return ppv_schedule_append_at(s, rank, a, -1);
}

int ppv_schedule_add_line(ppv_schedule *s, int64_t at) {
    if (s->placeless) return 0;
    if (s->nlines >= (1 << 30)) return 0;     /* later lines: places unknown */
    if ((s->nlines & (s->nlines - 1)) == 0) { /* 0, 1, 2, 4, ...: full */
        int64_t *lo = realloc(s->line_off, (size_t)(s->nlines ? 2 * s->nlines : 1) * sizeof *lo);
        if (!lo) return -1;
        s->line_off = lo;
    }
    s->line_off[s->nlines++] = at;
    return 0;
}

int ppv_schedule_where(const ppv_schedule *s, int32_t rank, int32_t i, int32_t *line,
                       int32_t *col) {
    if (rank < 0 || rank >= s->nranks || i < 0 || i >= s->prog[rank].n || !s->prog[rank].src ||
        !s->prog[rank].src[i] || s->nlines == 0)
        return -1;
    int64_t at = (int64_t)s->prog[rank].src[i] - 1;
    int32_t lo = 0, hi = s->nlines - 1; /* the last line starting at or before at */
    while (lo < hi) {
        int32_t mid = lo + (hi - lo + 1) / 2;
        if (s->line_off[mid] <= at)
            lo = mid;
        else
            hi = mid - 1;
    }
    if (lo == (1 << 30) - 1) return -1; /* past the lines kept */
    int64_t c = at - s->line_off[lo] + 1;
    *line = lo + 1;
    *col = c < INT32_MAX ? (int32_t)c : INT32_MAX;
    return 0;
}

/* "file:line:col" of rank's action i, or "file" when its place is unknown. */
static void place(const ppv_schedule *s, int32_t rank, int32_t i, char *buf, size_t n) {
    int32_t line, col;
    if (ppv_schedule_where(s, rank, i, &line, &col) == 0)
        snprintf(buf, n, "%s:%d:%d", s->name, line, col);
    else
        snprintf(buf, n, "%s", s->name);
}

/* The error for rank's action i, whose stage rank owner already computes. */
static int stage_taken(const ppv_schedule *s, int32_t rank, int32_t i, int32_t owner, char *err,
                       size_t errlen) {
    const ppv_action *a = &s->prog[rank].acts[i];
    char buf[64], at[300];
    ppv_action_format(s, a, buf, sizeof buf);
    place(s, rank, i, at, sizeof at);
    return ppv_errf(err, errlen,
                    "%s: rank %d cell '%s': stage %d is already on rank %d (a stage lives on one "
                    "rank)",
                    at, rank, buf, a->stage, owner);
}

/* Groups by name: an open-addressing hash table of group indices, so that
 * declaring and finding n groups costs O(n), not O(n^2) (65,537 groups took
 * 31 s by linear search). It also holds the groups array's capacity. */
struct ppv_group_index {
    int32_t cap;    /* groups allocated in ppv_schedule.groups */
    int32_t nslots; /* a power of two, at least twice the groups */
    int32_t slot[]; /* group index, or -1 when empty */
};

/* FNV-1a of a group name. */
static uint32_t name_hash(const char *name) {
    uint32_t h = 2166136261u;
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 16777619u;
    return h;
}

/* The slot that holds name in ix, or the empty slot where it would go. */
static int32_t index_slot(const ppv_schedule *s, const struct ppv_group_index *ix,
                          const char *name) {
    uint32_t mask = (uint32_t)ix->nslots - 1, k = name_hash(name) & mask;
    while (ix->slot[k] >= 0 && strcmp(s->groups[ix->slot[k]].name, name) != 0)
        k = (k + 1) & mask;
    return (int32_t)k;
}

/* Makes room for one more group: the array grows by doubling and the table
 * is rebuilt at half load. Returns 0, or -1 when out of memory. */
static int reserve_group(ppv_schedule *s) {
    struct ppv_group_index *ix = s->group_index;
    int32_t cap = ix ? ix->cap : 0;
    if (s->ngroups == cap) {
        int32_t ncap = cap ? 2 * cap : 4;
        ppv_group *g = realloc(s->groups, (size_t)ncap * sizeof *g);
        if (!g) return -1;
        s->groups = g;
        cap = ncap;
        if (ix) ix->cap = cap;
    }
    if (ix && 2 * (int64_t)(s->ngroups + 1) <= ix->nslots) return 0;
    int32_t nslots = 16;
    while (nslots < 2 * (s->ngroups + 1))
        nslots *= 2;
    struct ppv_group_index *nx = malloc(sizeof *nx + (size_t)nslots * sizeof nx->slot[0]);
    if (!nx) return -1;
    nx->cap = cap;
    nx->nslots = nslots;
    for (int32_t k = 0; k < nslots; k++)
        nx->slot[k] = -1;
    free(ix);
    s->group_index = nx;
    for (int32_t g = 0; g < s->ngroups; g++)
        nx->slot[index_slot(s, nx, s->groups[g].name)] = g;
    return 0;
}

int ppv_schedule_add_group(ppv_schedule *s, const char *name, const int32_t *ranks, int32_t n) {
    if (strlen(name) >= sizeof s->groups[0].name || ppv_schedule_find_group(s, name) >= 0)
        return -1;
    if (reserve_group(s) < 0) return -1;
    ppv_group *ng = &s->groups[s->ngroups];
    memset(ng, 0, sizeof *ng);
    strcpy(ng->name, name);
    ng->ranks = malloc((size_t)(n > 0 ? n : 1) * sizeof *ng->ranks);
    if (!ng->ranks) return -1;
    memcpy(ng->ranks, ranks, (size_t)n * sizeof *ranks);
    ng->n = n;
    s->group_index->slot[index_slot(s, s->group_index, name)] = s->ngroups;
    return s->ngroups++;
}

int ppv_schedule_find_group(const ppv_schedule *s, const char *name) {
    if (!s->group_index) return -1; /* no group added yet */
    return s->group_index->slot[index_slot(s, s->group_index, name)];
}

int64_t ppv_schedule_size(const ppv_schedule *s) {
    int64_t n = 0;
    for (int32_t r = 0; r < s->nranks; r++) n += s->prog[r].n;
    return n;
}

/* A stage-placing action, for sorting by stage. */
typedef struct placed {
    int32_t stage, rank, index;
} placed;

static int placed_cmp(const void *x, const void *y) {
    const placed *a = x, *b = y;
    if (a->stage != b->stage) return a->stage < b->stage ? -1 : 1;
    if (a->rank != b->rank) return a->rank < b->rank ? -1 : 1;
    return (a->index > b->index) - (a->index < b->index);
}

/* The error of a schedule whose stage count exceeds the actions that place
 * stages ('99999999F0'): some stage is computed by no rank, unless a stage
 * on two ranks is reported first, as the dense pass below would. Sorting
 * the placing actions costs what the file holds, not the stage count.
 * Always returns -1. */
static int sparse_stages_error(ppv_schedule *s, int64_t nplaced, char *err, size_t errlen) {
    placed *pl = malloc((size_t)(nplaced ? nplaced : 1) * sizeof *pl);
    if (!pl) return ppv_errf(err, errlen, "%s: out of memory", s->name);
    int64_t n = 0;
    for (int32_t r = 0; r < s->nranks; r++)
        for (int32_t i = 0; i < s->prog[r].n; i++)
            if (ppv_places_stage(&s->prog[r].acts[i]))
                pl[n++] = (placed){s->prog[r].acts[i].stage, r, i};
    qsort(pl, (size_t)n, sizeof *pl, placed_cmp);
    /* the first action, in rank then program order, whose stage an earlier
     * rank placed: per stage (a run of pl), the first entry off its lowest
     * rank; and the lowest stage no action places */
    const placed *dup = NULL;
    int32_t dup_owner = -1, gap = -1, expect = 0;
    for (int64_t k = 0, j; k < n; k = j) {
        for (j = k + 1; j < n && pl[j].stage == pl[k].stage; j++)
            continue;
        if (pl[k].stage != expect && gap < 0) gap = expect;
        expect = pl[k].stage + 1;
        for (int64_t q = k + 1; q < j; q++)
            if (pl[q].rank != pl[k].rank) {
                if (!dup || pl[q].rank < dup->rank ||
                    (pl[q].rank == dup->rank && pl[q].index < dup->index))
                    dup = &pl[q], dup_owner = pl[k].rank;
                break;
            }
    }
    int rc;
    if (dup) {
        rc = stage_taken(s, dup->rank, dup->index, dup_owner, err, errlen);
    } else {
        rc = ppv_errf(err, errlen, "%s: stage %d is computed by no rank (stages 0..%d are named)",
                      s->name, gap, s->nstages - 1);
    }
    free(pl);
    return rc;
}

int ppv_schedule_finish(ppv_schedule *s, char *err, size_t errlen) {
    ppv_finish_notes n = ppv_finish_notes_init();
    for (int32_t r = 0; r < s->nranks; r++)
        for (int32_t i = 0; i < s->prog[r].n; i++)
            ppv_finish_note(&n, &s->prog[r].acts[i]);
    return ppv_schedule_finish_noted(s, &n, err, errlen);
}

int ppv_schedule_finish_noted(ppv_schedule *s, const ppv_finish_notes *n, char *err,
                              size_t errlen) {
    int32_t maxstage = n->maxstage, maxmb = n->maxmb;
    int64_t nplaced = n->nplaced;
    int comms = 0;
    for (int k = 0; k < PPV_ACT_COUNT; k++)
        comms |= (n->kinds >> k & 1) &&
                 ((ppv_action_flags((ppv_action_kind)k) & (PPV_AF_COMM | PPV_AF_COLL)) ||
                  k == PPV_ACT_GROUP_START || k == PPV_ACT_GROUP_END);
    s->form = comms ? PPV_FORM_COMPUTE_COMMS : PPV_FORM_COMPUTE_ONLY;
    for (int32_t r = 0; r < s->nranks; r++) { /* give back what doubling over-allocated */
        ppv_program *p = &s->prog[r];
        if (p->n == 0 || p->n == p->cap || in_arena(s, p)) continue;
        ppv_action *acts = realloc(p->acts, (size_t)p->n * sizeof *acts);
        if (!acts) continue;
        p->acts = acts, p->cap = p->n; /* src may stay longer than cap */
        uint32_t *src = p->src ? realloc(p->src, (size_t)p->n * sizeof *src) : NULL;
        if (src) p->src = src;
    }
    if (s->nmb < maxmb + 1) s->nmb = maxmb + 1;
    free(s->stage_rank);
    s->stage_rank = NULL;
    s->nstages = maxstage + 1;
    if (s->nstages == 0) return 0;
    /* more stages than placing actions: a stage is missing, and an array of
     * nstages would cost what the largest index says, not the file */
    if (s->nstages > nplaced) return sparse_stages_error(s, nplaced, err, errlen);
    s->stage_rank = malloc((size_t)s->nstages * sizeof *s->stage_rank);
    if (!s->stage_rank) return ppv_errf(err, errlen, "%s: out of memory", s->name);
    for (int32_t st = 0; st < s->nstages; st++) s->stage_rank[st] = -1;
    for (int32_t r = 0; r < s->nranks; r++) {
        const ppv_rank_stages *rs = n->ranks ? &n->ranks[r] : NULL;
        if (rs && rs->n >= 0) { /* the reader noted the program's stages */
            for (int32_t k = 0; k < rs->n; k++) {
                int32_t st = rs->first[k].stage, at = rs->first[k].index;
                int32_t owner = s->stage_rank[st];
                if (owner < 0) s->stage_rank[st] = r;
                else if (owner != r) return stage_taken(s, r, at, owner, err, errlen);
            }
            continue;
        }
        for (int32_t i = 0, last = -1; i < s->prog[r].n; i++) {
            const ppv_action *a = &s->prog[r].acts[i];
            if (a->stage == last || !ppv_places_stage(a)) continue; /* last: this rank's already */
            last = a->stage;
            int32_t owner = s->stage_rank[a->stage];
            if (owner < 0) {
                s->stage_rank[a->stage] = r;
            } else if (owner != r) {
                return stage_taken(s, r, i, owner, err, errlen);
            }
        }
    }
    for (int32_t st = 0; st < s->nstages; st++)
        if (s->stage_rank[st] < 0)
            return ppv_errf(err, errlen,
                            "%s: stage %d is computed by no rank (stages 0..%d are named)",
                            s->name, st, s->nstages - 1);
    return 0;
}

void ppv_action_format(const ppv_schedule *s, const ppv_action *a, char *buf, size_t n) {
    unsigned fl = ppv_action_flags(a->kind);
    const char *tok = ppv_action_token(a->kind);
    if (fl & PPV_AF_PEER) {
        snprintf(buf, n, "%s%s%d#%d", tok, (fl & PPV_AF_SEND) ? ">" : "<", a->peer, a->tag);
    } else if (fl & PPV_AF_COLL) {
        const char *g = (s && a->group >= 0 && a->group < s->ngroups) ? s->groups[a->group].name
                                                                       : "?";
        snprintf(buf, n, "%s@%s", tok, g);
    } else if (a->kind == PPV_ACT_CHUNK) {
        snprintf(buf, n, "CHUNK(%d)", a->count);
    } else if ((fl & PPV_AF_STAGE) && (fl & PPV_AF_MB)) {
        snprintf(buf, n, "%d%s%d", a->stage, tok, a->mb);
    } else if (fl & PPV_AF_STAGE) {
        snprintf(buf, n, "%d%s", a->stage, tok);
    } else {
        snprintf(buf, n, "%s", tok);
    }
}

int ppv_errf(char *err, size_t errlen, const char *fmt, ...) {
    if (err && errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

int ppv_refuse_nul(const char *text, size_t len, const char *name, char *err, size_t errlen) {
    if (!memchr(text, '\0', len)) return 0;
    return ppv_errf(err, errlen, "%s: binary data (a NUL byte) in a schedule file", name);
}

/* ---- option texts ------------------------------------------------------------------ */

int ppv_parse_whole(const char *text, int64_t lo, int64_t hi, int64_t *out) {
    const char *p = text;
    int neg = *p == '-' && lo < 0;
    if (neg) p++;
    if (*p < '0' || *p > '9') return -1;
    uint64_t v = 0, limit = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    for (; *p >= '0' && *p <= '9'; p++) {
        uint64_t d = (uint64_t)(*p - '0');
        if (v > (limit - d) / 10) return -1; /* beyond an int64 */
        v = v * 10 + d;
    }
    if (*p) return -1;
    int64_t x = neg ? (v == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)v) : (int64_t)v;
    if (x < lo || x > hi) return -1;
    *out = x;
    return 0;
}

/* Digits at *p into *v (nothing beyond an int64): the count read, or -1. */
static int digits(const char **p, uint64_t limit, uint64_t *v) {
    const char *s = *p;
    *v = 0;
    for (; *s >= '0' && *s <= '9'; s++) {
        uint64_t d = (uint64_t)(*s - '0');
        if (*v > (limit - d) / 10) return -1;
        *v = *v * 10 + d;
    }
    int n = (int)(s - *p);
    *p = s;
    return n;
}

int ppv_parse_fraction(const char *text, double lo, double hi, double *out) {
    const char *p = text;
    uint64_t ignored;
    if (*p == '-' && lo < 0) p++;
    if (digits(&p, UINT64_MAX, &ignored) == 0) return -1; /* a digit first: no '.5' */
    if (*p == '.') {
        p++;
        while (*p >= '0' && *p <= '9') p++;
        if (p[-1] == '.') return -1; /* '5.' */
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '-') p++;
        if (*p < '0' || *p > '9') return -1;
        while (*p >= '0' && *p <= '9') p++;
    }
    if (*p) return -1;
    /* the text is plain decimal now, which strtod reads exactly as written */
    char *end;
    double v = strtod(text, &end);
    if (end != p || !isfinite(v) || v < lo || v > hi) return -1;
    if (v == 0) v = 0; /* "-0.0" where negatives are allowed: no -0 */
    *out = v;
    return 0;
}

int ppv_parse_bytes(const char *text, int64_t lo, int64_t hi, int64_t *out) {
    const char *p = text;
    uint64_t v;
    if (digits(&p, (uint64_t)INT64_MAX, &v) <= 0) return -1;
    int shift = *p == 'K' ? 10 : *p == 'M' ? 20 : *p == 'G' ? 30 : 0;
    if (shift) p++;
    if (*p || v > ((uint64_t)INT64_MAX >> shift)) return -1;
    int64_t x = (int64_t)(v << shift);
    if (x < lo || x > hi) return -1;
    *out = x;
    return 0;
}

int ppv_parse_pairs(const char *text, ppv_pair *items, int max, char *why, size_t whylen) {
    const char *p = text;
    int n = 0;
    if (!*p) return ppv_errf(why, whylen, "an empty list: give key=value items");
    for (;;) {
        const char *comma = strchr(p, ','), *end = comma ? comma : p + strlen(p);
        const char *eq = memchr(p, '=', (size_t)(end - p));
        int len = (int)(end - p);
        if (len == 0)
            return ppv_errf(why, whylen, "an empty item (%s)",
                            p == text ? "a leading ','" : comma ? "',,'" : "a trailing ','");
        for (const char *c = p; c < end; c++)
            if (*c == ' ' || *c == '\t' || *c == '\n' || *c == '\r')
                return ppv_errf(why, whylen, "a space in '%.*s'", len, p);
        if (!eq) return ppv_errf(why, whylen, "'%.*s' is not key=value", len, p);
        size_t klen = (size_t)(eq - p), vlen = (size_t)(end - eq - 1);
        if (klen == 0 || vlen == 0)
            return ppv_errf(why, whylen, "'%.*s' has an empty %s", len, p, klen ? "value" : "key");
        if (n == max) return ppv_errf(why, whylen, "more than %d items", max);
        if (klen >= sizeof items[n].key || vlen >= sizeof items[n].value)
            return ppv_errf(why, whylen, "'%.*s' is too long", len, p);
        memcpy(items[n].key, p, klen);
        items[n].key[klen] = 0;
        memcpy(items[n].value, eq + 1, vlen);
        items[n].value[vlen] = 0;
        for (int k = 0; k < n; k++)
            if (!strcmp(items[k].key, items[n].key))
                return ppv_errf(why, whylen, "%s is given twice", items[n].key);
        n++;
        if (!comma) return n;
        p = comma + 1;
    }
}

int ppv_list_next(const char **p, char *item, size_t n) {
    const char *s = *p;
    if (!s) return 0; /* past the last item */
    const char *comma = strchr(s, ',');
    size_t len = comma ? (size_t)(comma - s) : strlen(s);
    if (len == 0 || len >= n) return -1;
    memcpy(item, s, len);
    item[len] = 0;
    *p = comma ? comma + 1 : NULL;
    return 1;
}
