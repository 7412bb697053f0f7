/* csv.c - PyTorch torch.distributed.pipelining schedule CSV: one row per
 * rank, one cell per time step, empty cell = idle, cell grammar
 * `[stage][type][microbatch]` or `(a;b)OVERLAP_F_B`.
 *
 * Read in both of PyTorch's dialects and in both forms (compute_only and
 * compute_comms); written in today's dialect, so PyTorch loads it.
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"


/* Reads a decimal number of at most 9 digits at *p; returns digits read. */
static int read_index(const char *s, size_t len, size_t *p, int32_t *out) {
    size_t i = *p;
    int64_t v = 0;
    int nd = 0;
    while (i < len && isdigit((unsigned char)s[i])) {
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
    while (p < len && (isupper((unsigned char)tok[p]) || tok[p] == '_')) p++;
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

/* Whether the text uses the older dialect: a BW cell, or B and W cells with
 * no I cell (today's dialect forbids W without I). */
static int detect_legacy(const char *text, size_t len) {
    int has_bw = 0, has_b = 0, has_w = 0, has_i = 0;
    for (size_t i = 1; i < len; i++) {
        if (!isdigit((unsigned char)text[i - 1])) continue;
        char c = text[i];
        char n = i + 1 < len ? text[i + 1] : 0;
        if (c == 'B' && n == 'W') has_bw = 1;
        else if (c == 'B' && (isdigit((unsigned char)n))) has_b = 1;
        else if (c == 'W' && isdigit((unsigned char)n)) has_w = 1;
        else if (c == 'I' && isdigit((unsigned char)n)) has_i = 1;
    }
    return has_bw || (has_b && has_w && !has_i);
}

/* Parses one cell (already trimmed) at step into rank's program. */
static int parse_cell(ppv_schedule *s, int32_t rank, int32_t step, const char *cell, size_t len,
                      int line, int col, int legacy, int32_t *overlap_ids, char *err,
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
        int32_t id = ++*overlap_ids;
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
            a.line = line;
            a.col = col;
            if (ppv_schedule_append(s, rank, &a) < 0) goto oom;
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
    a.line = line;
    a.col = col;
    if (ppv_schedule_append(s, rank, &a) < 0) goto oom;
    return 0;
fail:
    return ppv_errf(err, errlen, "%s:%d:%d: rank %d step %d cell '%.*s': %s", s->name, line, col,
                    rank, step, (int)(len > 60 ? 60 : len), cell, why);
oom:
    return ppv_errf(err, errlen, "%s: out of memory", s->name);
}

int ppv_schedule_parse_csv(const char *text, size_t len, const char *name, ppv_dialect dialect,
                           ppv_schedule **out, char *err, size_t errlen) {
    *out = NULL;
    if (ppv_refuse_nul(text, len, name, err, errlen) < 0) return -1;
    int legacy = dialect == PPV_DIALECT_LEGACY ||
                 (dialect == PPV_DIALECT_AUTO && detect_legacy(text, len));
    /* rows: every line up to the last non-blank one */
    int32_t nrows = 0;
    size_t last = len;
    while (last > 0 && isspace((unsigned char)text[last - 1])) last--;
    if (last > 0) {
        nrows = 1;
        for (const char *q = text; (q = memchr(q, '\n', (size_t)(text + last - q))); q++) nrows++;
    }
    if (nrows == 0) return ppv_errf(err, errlen, "%s:1:1: empty schedule (no rank rows)", name);
    ppv_schedule *s = ppv_schedule_new(nrows);
    if (!s) return ppv_errf(err, errlen, "%s: out of memory", name);
    snprintf(s->name, sizeof s->name, "%s", name);
    s->dialect = legacy ? PPV_DIALECT_LEGACY : PPV_DIALECT_CURRENT;
    int32_t overlap_ids = 0;
    size_t pos = 0;
    for (int32_t rank = 0; rank < nrows; rank++) {
        size_t eol = pos;
        while (eol < len && text[eol] != '\n') eol++;
        size_t end = eol;
        if (end > pos && text[end - 1] == '\r') end--;
        int32_t step = 0;
        size_t c = pos;
        int blank = 1;
        for (size_t k = pos; k < end && blank; k++)
            if (!isspace((unsigned char)text[k])) blank = 0;
        while (!blank && c <= end) {
            size_t ce = c;
            int quoted = c < end && text[c] == '"';
            if (quoted) {
                ce = c + 1;
                while (ce < end && text[ce] != '"') ce++;
                ce = ce < end ? ce + 1 : ce;
            }
            while (ce < end && text[ce] != ',') ce++;
            size_t a = c, b = ce;
            while (a < b && isspace((unsigned char)text[a])) a++;
            while (b > a && isspace((unsigned char)text[b - 1])) b--;
            if (b - a >= 2 && text[a] == '"' && text[b - 1] == '"') {
                a++;
                b--;
            }
            if (b > a &&
                parse_cell(s, rank, step, text + a, b - a, rank + 1, (int)(a - pos) + 1, legacy,
                           &overlap_ids, err, errlen) < 0) {
                ppv_schedule_free(s);
                return -1;
            }
            step++;
            c = ce + 1;
        }
        pos = eol + 1;
    }
    if (ppv_schedule_finish(s, err, errlen) < 0) {
        ppv_schedule_free(s);
        return -1;
    }
    *out = s;
    return 0;
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
