/* csv.c - PyTorch torch.distributed.pipelining schedule CSV: one row per
 * rank, one cell per time step, empty cell = idle, cell grammar
 * `[stage][type][microbatch]` or `(a;b)OVERLAP_F_B`.
 *
 * Read in both of PyTorch's dialects and in both forms (compute_only and
 * compute_comms); written in today's dialect, so PyTorch loads it.
 */
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "schedule_internal.h"

/* The C locale's classes, without a call per character (a million cells). */
static inline int is_digit(char c) {
    return c >= '0' && c <= '9';
}
static inline int is_space(char c) {
    return c == ' ' || (c >= '\t' && c <= '\r');
}

/* Reads a decimal number of at most 9 digits at *p; returns digits read. */
static int read_index(const char *s, size_t len, size_t *p, int32_t *out) {
    size_t i = *p;
    int64_t v = 0;
    int nd = 0;
    while (i < len && is_digit(s[i])) {
        v = v * 10 + (s[i] - '0');
        if (v > PPV_MAX_INDEX) return -1;
        i++;
        nd++;
    }
    *p = i;
    *out = (int32_t)v;
    return nd;
}

int ppv_parse_torch_token(const char *tok, size_t len, int legacy, ppv_action *a, char *why,
                          size_t whylen) {
    size_t p = 0;
    int32_t stage = -1, mb = -1;
    int nd = read_index(tok, len, &p, &stage);
    if (nd < 0) return ppv_errf(why, whylen, "stage index too large (limit %d)", PPV_MAX_INDEX);
    if (nd == 0)
        return ppv_errf(why, whylen,
                        "expected a stage number first, as in '2F0' ([stage][type][microbatch])");
    size_t t0 = p;
    while (p < len && ((tok[p] >= 'A' && tok[p] <= 'Z') || tok[p] == '_'))
        p++;
    if (p == t0)
        return ppv_errf(why, whylen, "expected an action type after stage %d, as in '%dF0'",
                        stage, stage);
    size_t tlen = p - t0;
    int kind;
    if (tlen == 2 && memcmp(tok + t0, "BW", 2) == 0) {
        if (!legacy)
            return ppv_errf(why, whylen,
                            "'BW' is the older PyTorch dialect's full backward; read the file "
                            "with --dialect legacy (today it is spelled 'B')");
        kind = PPV_ACT_B;
    } else {
        kind = ppv_action_lookup(tok + t0, tlen);
        if (kind < 0)
            return ppv_errf(why, whylen,
                            "unknown action type '%.*s' (expected one of F I B W UNSHARD RESHARD "
                            "REDUCE_GRAD SEND_F RECV_F SEND_B RECV_B)",
                            (int)tlen, tok + t0);
        if (legacy && kind == PPV_ACT_I)
            return ppv_errf(why, whylen,
                            "'I' does not exist in the older PyTorch dialect, where 'B' is the "
                            "backward for inputs; read the file with --dialect current");
        if (legacy && kind == PPV_ACT_B) kind = PPV_ACT_I;
    }
    unsigned fl = ppv_action_flags((ppv_action_kind)kind);
    if (!(fl & PPV_AF_STAGE))
        return ppv_errf(why, whylen,
                        "'%s' is a ppv extension with no stage; it belongs in a native schedule "
                        "file (spec/schedule-format.md)",
                        ppv_action_token((ppv_action_kind)kind));
    size_t m0 = p;
    nd = read_index(tok, len, &p, &mb);
    if (nd < 0) return ppv_errf(why, whylen, "microbatch index too large (limit %d)", PPV_MAX_INDEX);
    if (p != len)
        return ppv_errf(why, whylen, "unexpected '%.*s' after the action", (int)(len - p),
                        tok + p);
    if ((fl & PPV_AF_MB) && nd == 0)
        return ppv_errf(why, whylen, "%s needs a microbatch index, as in '%d%s0'",
                        ppv_action_token((ppv_action_kind)kind), stage,
                        ppv_action_token((ppv_action_kind)kind));
    if (!(fl & PPV_AF_MB) && p != m0)
        return ppv_errf(why, whylen, "%s takes no microbatch index",
                        ppv_action_token((ppv_action_kind)kind));
    *a = ppv_action_make((ppv_action_kind)kind, stage, (fl & PPV_AF_MB) ? mb : -1);
    return 0;
}

/* Whether letter c stands between a digit and, after it, a digit (next
 * 0) or the letter next: memchr's vectorized search from one letter to the
 * next, so a pass over a whole file costs little where the letter is rare,
 * and the first hit ends it. */
static int letter_in_cell(const char *text, size_t len, char c, char next) {
    if (len < 3) return 0;
    const char *end = text + len - 1; /* the letter has a byte after it */
    for (const char *p = memchr(text + 1, c, (size_t)(end - text - 1)); p;
         p = memchr(p + 1, c, (size_t)(end - p - 1)))
        if (is_digit(p[-1]) && (next ? p[1] == next : is_digit(p[1]))) return 1;
    return 0;
}

/* Whether the text uses the older dialect: a BW cell, or B and W cells with
 * no I cell (today's dialect forbids W without I). */
static int detect_legacy(const char *text, size_t len) {
    if (letter_in_cell(text, len, 'B', 'W')) return 1;
    return !letter_in_cell(text, len, 'I', 0) && letter_in_cell(text, len, 'B', 0) &&
           letter_in_cell(text, len, 'W', 0);
}

/* The kind nearly every cell holds (F I B W, or SEND_/RECV_ then F or
 * B), spelled as in actions.def, whose letters start t and are followed
 * by a byte that is no letter (t holds n bytes); its letters' count into
 * *len. -1 for anything else: the general path's lookup then decides. */
static int common_kind(const char *t, size_t n, size_t *len) {
    int kind = -1;
    *len = 1;
    switch (t[0]) {
    case 'F':
        kind = PPV_ACT_F;
        break;
    case 'I':
        kind = PPV_ACT_I;
        break;
    case 'B':
        kind = PPV_ACT_B;
        break;
    case 'W':
        kind = PPV_ACT_W;
        break;
    case 'S':
    case 'R':
        if (n < 6 || t[4] != '_' || (t[5] != 'F' && t[5] != 'B')) return -1;
        *len = 6;
        if (memcmp(t, "SEND", 4) == 0) kind = t[5] == 'F' ? PPV_ACT_SEND_F : PPV_ACT_SEND_B;
        if (memcmp(t, "RECV", 4) == 0) kind = t[5] == 'F' ? PPV_ACT_RECV_F : PPV_ACT_RECV_B;
        break;
    default:
        return -1;
    }
    int more = *len < n && ((t[*len] >= 'A' && t[*len] <= 'Z') || t[*len] == '_');
    return more ? -1 : kind;
}

/* Reads up to 9 decimal digits at t (n bytes) into *v; returns how many. */
static inline size_t digits(const char *t, size_t n, int32_t *v) {
    size_t i = 0, lim = n < 9 ? n : 9;
    int32_t x = 0;
    for (unsigned d; i < lim && (d = (unsigned)(t[i] - '0')) < 10; i++)
        x = x * 10 + (int32_t)d;
    *v = x;
    return i;
}

/* The common cell: `[stage][type][microbatch]` of a common_kind,
 * in today's dialect, with nothing around it, read in one pass over the
 * n bytes left on the line. Returns its length (up to the ',' or the end),
 * or 0 for anything else, which the general path reads and words the
 * errors of. */
static size_t fast_cell(const char *t, size_t n, int32_t *kind_, int32_t *stage_, int32_t *mb_) {
    int32_t stage, mb;
    size_t i = digits(t, n, &stage), kl, m;
    if (i == 0 || i == n || is_digit(t[i])) return 0;
    int kind = common_kind(t + i, n - i, &kl);
    if (kind < 0) return 0;
    i += kl;
    if ((m = digits(t + i, n - i, &mb)) == 0) return 0;
    i += m;
    if ((i < n && t[i] != ',') || stage > PPV_MAX_INDEX || mb > PPV_MAX_INDEX) return 0;
    *kind_ = kind, *stage_ = stage, *mb_ = mb;
    return i;
}

/* Parses one cell (already trimmed) at step into rank's program. */
static int parse_cell(ppv_schedule *s, int32_t rank, int32_t step, const char *cell, size_t len,
                      int64_t at, int line, int col, int legacy, uint16_t *overlap_ids, char *err,
                      size_t errlen) {
    char why[256];
    ppv_action a;
    static const char ovl[] = ")OVERLAP_F_B";
    if (len > 0 && cell[0] == '(') {
        const char *close = memchr(cell, ')', len);
        size_t tail = close ? len - (size_t)(close - cell) : 0;
        if (!close || tail != sizeof ovl - 1 || memcmp(close, ovl, tail) != 0) {
            snprintf(why, sizeof why, "an overlapped cell is written '(a;b)OVERLAP_F_B'");
            goto fail;
        }
        uint16_t id = *overlap_ids = ppv_overlap_next(*overlap_ids);
        const char *p = cell + 1;
        int nsub = 0;
        while (p <= close) {
            const char *e = p;
            while (e < close && *e != ';') e++;
            if (ppv_parse_torch_token(p, (size_t)(e - p), legacy, &a, why, sizeof why) < 0)
                goto fail;
            /* PyTorch's compute actions: R is a ppv extension here too */
            if ((ppv_action_flags(a.kind) & (PPV_AF_COMPUTE | PPV_AF_TORCH)) !=
                (PPV_AF_COMPUTE | PPV_AF_TORCH)) {
                snprintf(why, sizeof why, "OVERLAP_F_B may only hold F, I, B or W, not %s",
                         ppv_action_token(a.kind));
                goto fail;
            }
            a.overlap = id;
            a.step = step;
            if (ppv_schedule_append_at(s, rank, &a, at) < 0) goto oom;
            nsub++;
            p = e + 1;
        }
        if (nsub < 2) {
            snprintf(why, sizeof why, "OVERLAP_F_B needs at least two actions");
            goto fail;
        }
        return 0;
    }
    if (ppv_parse_torch_token(cell, len, legacy, &a, why, sizeof why) < 0) goto fail;
    if (!(ppv_action_flags(a.kind) & PPV_AF_TORCH)) {
        snprintf(why, sizeof why, "'%s' is a ppv extension; it belongs in a native schedule file "
                 "(spec/schedule-format.md)", ppv_action_token(a.kind));
        goto fail;
    }
    a.step = step;
    if (ppv_schedule_append_at(s, rank, &a, at) < 0) goto oom;
    return 0;
fail:
    return ppv_errf(err, errlen, "%s:%d:%d: rank %d step %d cell '%.*s': %s", s->name, line, col,
                    rank, step, (int)(len > 60 ? 60 : len), cell, why);
oom:
    return ppv_errf(err, errlen, "%s: out of memory", s->name);
}

/* The bytes of the 8 at p that are commas, as the high bit of each. */
static inline uint64_t commas_at(const char *p) {
    const uint64_t low7 = 0x7f7f7f7f7f7f7f7fULL;
    uint64_t w;
    memcpy(&w, p, sizeof w);
    w ^= 0x2c2c2c2c2c2c2c2cULL;                /* a comma's byte is now 0 */
    return ~(((w & low7) + low7) | w) & ~low7; /* the high bit of each 0 byte */
}

/* Where each row starts and ends (its '\n', or len): every line up to
 * the last non-blank one, found by one pass; start[nrows] is len. NULL
 * with *nrows 0 where there is none, or -1 when out of memory. */
static int64_t *row_bounds(const char *text, size_t len, int32_t *nrows, int64_t **eol) {
    *nrows = 0;
    *eol = NULL;
    size_t last = len;
    while (last > 0 && is_space(text[last - 1]))
        last--;
    int64_t n = 0, cap = 0, *st = NULL, *en = NULL;
    for (size_t pos = 0; pos < last;) {
        const char *nl = memchr(text + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - text) : len;
        if (n + 1 >= cap) { /* room for this row and start[nrows] */
            cap = cap ? 2 * cap : 64;
            int64_t *ns = cap < INT32_MAX ? realloc(st, (size_t)cap * sizeof *ns) : NULL;
            int64_t *ne = ns ? realloc(en, (size_t)cap * sizeof *ne) : NULL;
            st = ns ? ns : st, en = ne ? ne : en;
            if (!ns || !ne) {
                free(st);
                free(en);
                *nrows = -1;
                return NULL;
            }
        }
        st[n] = (int64_t)pos, en[n] = (int64_t)end;
        n++;
        pos = end + 1;
    }
    if (!n) return NULL;
    st[n] = (int64_t)len;
    *nrows = (int32_t)n;
    *eol = en;
    return st;
}

/* The cells that hold something on rows [from, to): each one's first byte
 * follows the row's start or a comma and is no comma (a cell of spaces
 * counts too); 0 where the row is blank. One action a cell, except an
 * OVERLAP_F_B cell's few, which then grow their program. Eight bytes at a
 * time: a 9 MB file is counted in a few milliseconds. */
static void row_cells(const char *text, const int64_t *start, const int64_t *eol, int32_t from,
                      int32_t to, int32_t *ncells) {
    for (int32_t r = from; r < to; r++) {
        size_t end = (size_t)eol[r], k = (size_t)start[r];
        while (k < end && is_space(text[k]))
            k++;
        int64_t n = k < end && text[k] != ',';
        /* a byte at j > k starts a cell where j - 1 is a comma and j is not */
        for (k++; k + 8 <= end; k += 8) {
            uint64_t starts = commas_at(text + k - 1) & ~commas_at(text + k);
            n += (int64_t)(((starts >> 7) * 0x0101010101010101ULL) >> 56);
        }
        for (; k < end; k++)
            n += (text[k - 1] == ',') & (text[k] != ',');
        ncells[r] = n < INT32_MAX ? (int32_t)n : INT32_MAX;
    }
}

int ppv_schedule_parse_csv(const char *text, size_t len, const char *name, ppv_dialect dialect,
                           ppv_schedule **out, char *err, size_t errlen) {
    *out = NULL;
    if (ppv_refuse_nul(text, len, name, err, errlen) < 0) return -1;
    return ppv_parse_csv(text, len, name, dialect, 1, out, err, errlen);
}

/* One run's reading of its rows. */
typedef struct rows_job {
    ppv_finish_notes notes; /* of the actions read */
    int rc;                 /* 0, or -1 with the message in err */
    char *err;
    size_t errlen;
} rows_job;

/* The file's rows, which runs of rows read side by side (ppv_runs): each
 * row is a rank's program, which no other run touches. */
typedef struct rows_read {
    const char *text;
    ppv_schedule *s;
    const int64_t *start; /* [nrows + 1]: where each row starts in text, then len */
    const int64_t *eol;   /* [nrows]: where each row ends */
    int32_t *ncells;
    int legacy;
    ppv_rank_stages *stages; /* [nrows]: each program's stages, for finish */
    rows_job job[PPV_MAX_RUNS];
} rows_read;

/* Reads rows [from, to) for one run, noting each action; stops at the
 * first bad cell. */
static int read_rows(const rows_read *rr, rows_job *j, int32_t from, int32_t to) {
    const char *text = rr->text;
    ppv_schedule *s = rr->s;
    int legacy = rr->legacy;
    /* noted here, not in j, which shares its cache line with other runs' */
    ppv_finish_notes notes = j->notes;
    for (int32_t rank = from; rank < to; rank++) {
        size_t pos = (size_t)rr->start[rank], end = (size_t)rr->eol[rank];
        ppv_rank_stages *rs = &rr->stages[rank];
        if (end > pos && text[end - 1] == '\r') end--;
        int32_t step = 0;
        uint16_t overlap_ids = 0; /* only neighbours compare ids: a row's own count */
        size_t c = pos;
        int blank = rr->ncells[rank] == 0; /* or a row of commas: it has no action either */
        /* the row's room, kept here: a common cell's action goes straight
         * into it where no place is kept (ppv_schedule_push's common case,
         * without reading the program back for each action) */
        ppv_program *p = &s->prog[rank];
        ppv_action *acts = p->acts;
        int32_t n = p->n, cap = p->cap;
        int direct = s->placeless && !p->src;
        while (!blank && c <= end) {
            int32_t kind, stage, mb;
            size_t fl = legacy ? 0 : fast_cell(text + c, end - c, &kind, &stage, &mb);
            if (fl && direct && n < cap) {
                ppv_action *d = &acts[n++];
                d->kind = (uint8_t)kind, d->dtype = 0, d->overlap = 0;
                d->stage = stage, d->mb = mb, d->step = step++;
                d->peer = -1, d->tag = -1, d->bytes = 0;
                ppv_finish_note_of(&notes, kind, stage, mb);
                ppv_rank_stage_note(rs, stage, n - 1);
                c += fl + 1;
                continue;
            }
            p->n = n; /* the program as the paths below read it */
            if (fl) { /* written field by field: no copy of a whole action */
                ppv_action *d = ppv_schedule_push(s, rank, (int64_t)c);
                if (!d) return ppv_errf(j->err, j->errlen, "%s: out of memory", s->name);
                d->kind = (uint8_t)kind, d->dtype = 0, d->overlap = 0;
                d->stage = stage, d->mb = mb, d->step = step++;
                d->peer = -1, d->tag = -1, d->bytes = 0;
                ppv_finish_note(&notes, d);
                ppv_rank_stage_note(rs, stage, s->prog[rank].n - 1);
                c += fl + 1;
                acts = p->acts, n = p->n, cap = p->cap, direct = s->placeless && !p->src;
                continue;
            }
            size_t ce = c;
            int quoted = c < end && text[c] == '"';
            if (quoted) {
                ce = c + 1;
                while (ce < end && text[ce] != '"') ce++;
                ce = ce < end ? ce + 1 : ce;
            }
            while (ce < end && text[ce] != ',') ce++;
            size_t a = c, b = ce;
            while (a < b && is_space(text[a]))
                a++;
            while (b > a && is_space(text[b - 1]))
                b--;
            if (b - a >= 2 && text[a] == '"' && text[b - 1] == '"') {
                a++;
                b--;
            }
            int32_t had = s->prog[rank].n;
            if (b > a && parse_cell(s, rank, step, text + a, b - a, (int64_t)a, rank + 1,
                                    (int)(a - pos) + 1, legacy, &overlap_ids, j->err,
                                    j->errlen) < 0)
                return -1;
            for (int32_t k = had; k < s->prog[rank].n; k++) {
                ppv_finish_note(&notes, &s->prog[rank].acts[k]);
                if (ppv_places_stage(&s->prog[rank].acts[k]))
                    ppv_rank_stage_note(rs, s->prog[rank].acts[k].stage, k);
            }
            step++;
            c = ce + 1;
            acts = p->acts, n = p->n, cap = p->cap, direct = s->placeless && !p->src;
        }
        p->n = n;
    }
    j->notes = notes;
    return 0;
}

static void count_run(void *arg, int32_t run, int32_t from, int32_t to) {
    rows_read *rr = arg;
    (void)run;
    row_cells(rr->text, rr->start, rr->eol, from, to, rr->ncells);
}

static void read_run(void *arg, int32_t run, int32_t from, int32_t to) {
    rows_read *rr = arg;
    rr->job[run].rc = read_rows(rr, &rr->job[run], from, to);
}

/* The file read in one dialect (legacy 1: the older one), its actions
 * noted for ppv_schedule_finish_noted on the way; the kinds present
 * (1 << kind each) into *kinds. */
static int parse_as(const char *text, size_t len, const char *name, int legacy, int places,
                    ppv_schedule **out, uint32_t *kinds, char *err, size_t errlen) {
    *out = NULL;
    int32_t nrows;
    int64_t *eol, *start = row_bounds(text, len, &nrows, &eol);
    if (nrows < 0) return ppv_errf(err, errlen, "%s: out of memory", name);
    if (nrows == 0) return ppv_errf(err, errlen, "%s:1:1: empty schedule (no rank rows)", name);
    ppv_schedule *s = ppv_schedule_new(nrows);
    int32_t *ncells = malloc((size_t)nrows * sizeof *ncells);
    rows_read *rr = calloc(1, sizeof *rr);
    ppv_rank_stages *stages = malloc((size_t)nrows * sizeof *stages);
    /* runs of rows, one a MiB of text, up to the processors online */
    int32_t nj = ppv_run_count((int64_t)len, (int64_t)1 << 20, nrows);
    size_t each = errlen ? errlen : 1; /* the other runs' messages */
    char *errs = nj > 1 ? malloc((size_t)(nj - 1) * each) : NULL;
    int rc = -1;
    if (!s || !ncells || !rr || !stages || (nj > 1 && !errs)) goto oom;
    snprintf(s->name, sizeof s->name, "%s", name);
    s->dialect = legacy ? PPV_DIALECT_LEGACY : PPV_DIALECT_CURRENT;
    s->placeless = !places;
    for (int32_t r = 0; r < nrows; r++) {
        stages[r].last = -1, stages[r].n = 0;
        if (ppv_schedule_add_line(s, start[r]) < 0) goto oom;
    }
    rr->text = text, rr->s = s, rr->start = start, rr->eol = eol;
    rr->ncells = ncells, rr->legacy = legacy, rr->stages = stages;
    /* every row's cells (0: a blank row), counted side by side, so that
     * all programs take one block (ppv_schedule_reserve_all) of the size
     * they need; then the rows read into it side by side */
    ppv_runs(nj, start, nrows, count_run, rr);
    if (ppv_schedule_reserve_all(s, ncells) < 0) goto oom;
    for (int32_t k = 0; k < nj; k++)
        rr->job[k] = (rows_job){ppv_finish_notes_init(), 0,
                                k ? errs + (size_t)(k - 1) * each : err, k ? each : errlen};
    ppv_runs(nj, start, nrows, read_run, rr);
    ppv_finish_notes notes = ppv_finish_notes_init();
    for (int32_t k = 0; k < nj; k++) { /* the first row that failed speaks */
        if (rr->job[k].rc < 0) {
            if (k) snprintf(err, errlen, "%s", rr->job[k].err);
            goto fail;
        }
        const ppv_finish_notes *n = &rr->job[k].notes;
        if (n->maxstage > notes.maxstage) notes.maxstage = n->maxstage;
        if (n->maxmb > notes.maxmb) notes.maxmb = n->maxmb;
        notes.nplaced += n->nplaced;
        notes.kinds |= n->kinds;
    }
    *kinds = notes.kinds;
    notes.ranks = stages;
    if (ppv_schedule_finish_noted(s, &notes, err, errlen) < 0) goto fail;
    *out = s;
    s = NULL;
    rc = 0;
    goto fail;
oom:
    ppv_errf(err, errlen, "%s: out of memory", name);
fail:
    free(ncells);
    free(start);
    free(eol);
    free(rr);
    free(stages);
    free(errs);
    ppv_schedule_free(s);
    return rc;
}

int ppv_parse_csv(const char *text, size_t len, const char *name, ppv_dialect dialect, int places,
                  ppv_schedule **out, char *err, size_t errlen) {
    *out = NULL;
    uint32_t k = 0;
    if (dialect != PPV_DIALECT_AUTO)
        return parse_as(text, len, name, dialect == PPV_DIALECT_LEGACY, places, out, &k, err,
                        errlen);
    /* Either dialect: read as today's, which most files are, and again as
     * the older one where detect_legacy would have said so. Read as
     * today's, a BW cell is an error, and every B, I or W between digits
     * is an action: the kinds read answer for the text. */
    if (parse_as(text, len, name, 0, places, out, &k, err, errlen) < 0)
        return detect_legacy(text, len) ? parse_as(text, len, name, 1, places, out, &k, err, errlen)
                                        : -1;
    if ((k >> PPV_ACT_I & 1) || !(k >> PPV_ACT_B & 1) || !(k >> PPV_ACT_W & 1)) return 0;
    ppv_schedule_free(*out);
    return parse_as(text, len, name, 1, places, out, &k, err, errlen);
}

/* Writes one action in today's dialect. */
static void put_token(FILE *f, const ppv_action *a) {
    unsigned fl = ppv_action_flags(a->kind);
    if (fl & PPV_AF_MB)
        fprintf(f, "%d%s%d", a->stage, ppv_action_token(a->kind), a->mb);
    else
        fprintf(f, "%d%s", a->stage, ppv_action_token(a->kind));
}

int ppv_schedule_write_csv(const ppv_schedule *s, FILE *f, char *err, size_t errlen) {
    for (int32_t r = 0; r < s->nranks; r++)
        for (int32_t i = 0; i < s->prog[r].n; i++)
            if (!(ppv_action_flags(s->prog[r].acts[i].kind) & PPV_AF_TORCH))
                return ppv_errf(err, errlen,
                                "rank %d uses %s, a ppv extension PyTorch's CSV cannot hold; "
                                "write the native format instead",
                                r, ppv_action_token(s->prog[r].acts[i].kind));
    for (int32_t r = 0; r < s->nranks; r++) {
        const ppv_program *p = &s->prog[r];
        int32_t col = 0; /* index of the next cell to write */
        for (int32_t i = 0; i < p->n;) {
            int32_t at = p->acts[i].step > col ? p->acts[i].step : col;
            for (; col < at; col++)
                if (col > 0) fputc(',', f);
            if (col > 0) fputc(',', f);
            if (p->acts[i].overlap) {
                int32_t id = p->acts[i].overlap, j = i;
                fputc('(', f);
                for (; j < p->n && p->acts[j].overlap == id; j++) {
                    if (j > i) fputc(';', f);
                    put_token(f, &p->acts[j]);
                }
                fputs(")OVERLAP_F_B", f);
                i = j;
            } else {
                put_token(f, &p->acts[i]);
                i++;
            }
            col++;
        }
        /* a rank with no action: two idle cells, which read back as a rank
         * (an empty line would read as the end of the schedule) */
        fputs(p->n ? "\n" : ",\n", f);
    }
    return ferror(f) ? ppv_errf(err, errlen, "write error: %s", strerror(errno)) : 0;
}
