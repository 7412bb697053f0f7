/* native.c - ppv's native schedule text format (spec/schedule-format.md):
 * what PyTorch's CSV cannot say (explicit peers, tags and sizes, NCCL-style
 * groups, collectives on named process groups, generator calls and chunk
 * markers), one action per line. The loader that picks the format is
 * load.c.
 */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "schedule_internal.h"

#define MAX_RANKS 65536

typedef struct cursor {
    const char *name;
    int line;
    const char *bol; /* beginning of the current line */
    char *err;
    size_t errlen;
    const char *text; /* the whole text, for byte offsets */
} cursor;

static int fail_at(const cursor *c, const char *at, int32_t rank, const char *tok, size_t toklen,
                   const char *fmt, ...) __attribute__((format(printf, 6, 7)));

static int fail_at(const cursor *c, const char *at, int32_t rank, const char *tok, size_t toklen,
                   const char *fmt, ...) {
    char why[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    int col = (int)(at - c->bol) + 1;
    if (rank >= 0)
        return ppv_errf(c->err, c->errlen, "%s:%d:%d: rank %d cell '%.*s': %s", c->name, c->line,
                        col, rank, (int)(toklen > 60 ? 60 : toklen), tok, why);
    return ppv_errf(c->err, c->errlen, "%s:%d:%d: %s", c->name, c->line, col, why);
}

/* Parses a non-negative integer of the whole word [p, e). */
static int word_int(const char *p, const char *e, int64_t limit, int64_t *out) {
    if (p == e) return -1;
    int64_t v = 0;
    for (; p < e; p++) {
        if (!isdigit((unsigned char)*p)) return -1;
        v = v * 10 + (*p - '0');
        if (v > limit) return -1;
    }
    *out = v;
    return 0;
}

/* Next whitespace-separated word of [*p, end); returns 0 when none is left. */
static int next_word(const char **p, const char *end, const char **ws, const char **we) {
    const char *q = *p;
    while (q < end && isspace((unsigned char)*q)) q++;
    if (q == end) return 0;
    *ws = q;
    while (q < end && !isspace((unsigned char)*q)) q++;
    *we = q;
    *p = q;
    return 1;
}

/* Applies one key=value attribute to a. */
static int apply_attr(const cursor *c, ppv_schedule *s, int32_t rank, ppv_action *a,
                      const char *ws, const char *we, const char *tok, size_t toklen) {
    const char *eq = memchr(ws, '=', (size_t)(we - ws));
    if (!eq)
        return fail_at(c, ws, rank, tok, toklen, "expected key=value, got '%.*s'",
                       (int)(we - ws), ws);
    size_t klen = (size_t)(eq - ws);
    const char *v = eq + 1;
    unsigned fl = ppv_action_flags(a->kind);
    int64_t n;
#define KEY(k) (klen == sizeof(k) - 1 && memcmp(ws, k, klen) == 0)
    if (KEY("bytes") && (fl & (PPV_AF_COMM | PPV_AF_COLL))) {
        if (word_int(v, we, INT64_C(1) << 50, &n) < 0)
            return fail_at(c, v, rank, tok, toklen, "bytes must be a non-negative integer");
        a->bytes = n;
    } else if (KEY("peer") && (fl & PPV_AF_PEER)) {
        if (word_int(v, we, MAX_RANKS, &n) < 0 || n >= s->nranks)
            return fail_at(c, v, rank, tok, toklen, "peer must be a rank in 0..%d",
                           s->nranks - 1);
        if (n == rank)
            return fail_at(c, v, rank, tok, toklen, "a rank cannot message itself");
        a->peer = (int32_t)n;
    } else if (KEY("tag") && (fl & PPV_AF_PEER)) {
        if (word_int(v, we, INT32_MAX, &n) < 0)
            return fail_at(c, v, rank, tok, toklen, "tag must be a non-negative integer");
        a->tag = (int32_t)n;
    } else if (KEY("dtype") && (fl & (PPV_AF_PEER | PPV_AF_COLL))) {
        char d[16];
        snprintf(d, sizeof d, "%.*s", (int)(we - v), v);
        int dt = ppv_dtype_lookup(d);
        if (dt < 0)
            return fail_at(c, v, rank, tok, toklen, "unknown dtype '%s' (bf16 f32 i64 u8)", d);
        a->dtype = (uint8_t)dt;
    } else if (KEY("group") && (fl & PPV_AF_COLL)) {
        char g[64];
        snprintf(g, sizeof g, "%.*s", (int)(we - v), v);
        int gi = ppv_schedule_find_group(s, g);
        if (gi < 0)
            return fail_at(c, v, rank, tok, toklen,
                           "no process group '%s' (declare it with 'group %s RANK...')", g, g);
        a->group = gi;
    } else if (KEY("root") && (fl & PPV_AF_ROOT)) {
        if (word_int(v, we, MAX_RANKS, &n) < 0)
            return fail_at(c, v, rank, tok, toklen, "root must be a group rank");
        a->root = (int32_t)n;
    } else if (KEY("expected_generator_calls") && a->kind == PPV_ACT_CHUNK) {
        if (word_int(v, we, INT32_MAX, &n) < 0)
            return fail_at(c, v, rank, tok, toklen,
                           "expected_generator_calls must be a non-negative integer");
        a->count = (int32_t)n;
    } else {
        return fail_at(c, ws, rank, tok, toklen, "%s takes no attribute '%.*s'",
                       ppv_action_token(a->kind), (int)klen, ws);
    }
#undef KEY
    return 0;
}

/* Parses one action line of rank into s. */
static int parse_action(const cursor *c, ppv_schedule *s, int32_t rank, const char *p,
                        const char *end, uint16_t *overlap_ids) {
    const char *ws = p, *we = p;
    if (!next_word(&p, end, &ws, &we))
        return fail_at(c, p, rank, p, 0, "expected an action");
    size_t toklen = (size_t)(we - ws);
    ppv_action a;
    char why[256];
    int32_t step = s->prog[rank].n ? s->prog[rank].acts[s->prog[rank].n - 1].step + 1 : 0;
    if (*ws == '(') {
        /* an overlapped cell, spelled as in the CSV */
        static const char ovl[] = ")OVERLAP_F_B";
        const char *close = memchr(ws, ')', toklen);
        int rc = 0;
        if (!close || (size_t)(we - close) != sizeof ovl - 1 ||
            memcmp(close, ovl, sizeof ovl - 1) != 0)
            rc = fail_at(c, ws, rank, ws, toklen, "an overlapped cell is written '(a;b)OVERLAP_F_B'");
        uint16_t id = *overlap_ids = ppv_overlap_next(*overlap_ids);
        for (const char *q = ws + 1; rc == 0 && q <= close;) {
            const char *e = q;
            while (e < close && *e != ';') e++;
            if (ppv_parse_torch_token(q, (size_t)(e - q), 0, &a, why, sizeof why) < 0)
                rc = fail_at(c, q, rank, ws, toklen, "%s", why);
            else if (!(ppv_action_flags(a.kind) & PPV_AF_COMPUTE))
                rc = fail_at(c, q, rank, ws, toklen, "OVERLAP_F_B may only hold F, I, B or W");
            else {
                a.overlap = id;
                a.step = step;
                if (ppv_schedule_append_at(s, rank, &a, ws - c->text) < 0)
                    rc = fail_at(c, ws, rank, ws, toklen, "out of memory");
            }
            q = e + 1;
        }
        if (rc == 0 && s->prog[rank].acts[s->prog[rank].n - 1].overlap == id &&
            (s->prog[rank].n < 2 || s->prog[rank].acts[s->prog[rank].n - 2].overlap != id))
            rc = fail_at(c, ws, rank, ws, toklen, "OVERLAP_F_B needs at least two actions");
        if (rc == 0 && next_word(&p, end, &ws, &we))
            rc = fail_at(c, ws, rank, ws, toklen, "OVERLAP_F_B takes no attributes");
        return rc;
    }
    if (isdigit((unsigned char)*ws)) {
        if (ppv_parse_torch_token(ws, toklen, 0, &a, why, sizeof why) < 0)
            return fail_at(c, ws, rank, ws, toklen, "%s", why);
    } else {
        int k = ppv_action_lookup(ws, toklen);
        if (k < 0 || (ppv_action_flags((ppv_action_kind)k) & PPV_AF_STAGE))
            return fail_at(c, ws, rank, ws, toklen,
                           "unknown action '%.*s' (expected a PyTorch action such as 2F0, or "
                           "SEND RECV GROUP_START GROUP_END ALLREDUCE BCAST ALLGATHER BARRIER "
                           "GEN CHUNK)",
                           (int)toklen, ws);
        a = ppv_action_make((ppv_action_kind)k, -1, -1);
        if (ppv_action_flags(a.kind) & PPV_AF_PEER) a.tag = 0;
        if (ppv_action_flags(a.kind) & PPV_AF_ROOT) a.root = -1;
    }
    a.step = step;
    const char *tok = ws;
    const char *aw, *ae;
    while (next_word(&p, end, &aw, &ae))
        if (apply_attr(c, s, rank, &a, aw, ae, tok, toklen) < 0) return -1;
    unsigned fl = ppv_action_flags(a.kind);
    if ((fl & PPV_AF_PEER) && a.peer < 0)
        return fail_at(c, tok, rank, tok, toklen, "%s needs peer=RANK", ppv_action_token(a.kind));
    if ((fl & PPV_AF_COLL) && a.group < 0)
        return fail_at(c, tok, rank, tok, toklen, "%s needs group=NAME", ppv_action_token(a.kind));
    if ((fl & PPV_AF_ROOT) && a.root < 0)
        return fail_at(c, tok, rank, tok, toklen, "%s needs root=GROUP_RANK",
                       ppv_action_token(a.kind));
    if ((fl & PPV_AF_ROOT) && a.root >= s->groups[a.group].n)
        return fail_at(c, tok, rank, tok, toklen, "root %d is outside group '%s' of %d ranks",
                       a.root, s->groups[a.group].name, s->groups[a.group].n);
    if (a.kind == PPV_ACT_CHUNK && a.count < 0)
        return fail_at(c, tok, rank, tok, toklen, "CHUNK needs expected_generator_calls=N");
    if (ppv_schedule_append_at(s, rank, &a, tok - c->text) < 0)
        return fail_at(c, tok, rank, tok, toklen, "out of memory");
    return 0;
}

int ppv_schedule_parse_native(const char *text, size_t len, const char *name, ppv_schedule **out,
                              char *err, size_t errlen) {
    *out = NULL;
    if (ppv_refuse_nul(text, len, name, err, errlen) < 0) return -1;
    return ppv_parse_native(text, len, name, 1, out, err, errlen);
}

int ppv_parse_native(const char *text, size_t len, const char *name, int places, ppv_schedule **out,
                     char *err, size_t errlen) {
    *out = NULL;
    cursor c = {name, 0, text, err, errlen, text};
    ppv_schedule *s = NULL;
    int seen_header = 0;
    int32_t rank = -1;
    uint16_t overlap_ids = 0;
    int64_t nmb = -1;
    const char *p = text, *tend = text + len;
    while (p < tend) {
        const char *eol = memchr(p, '\n', (size_t)(tend - p));
        if (!eol) eol = tend;
        c.line++;
        c.bol = p;
        if (s && ppv_schedule_add_line(s, p - text) < 0) {
            fail_at(&c, p, -1, NULL, 0, "out of memory");
            goto fail;
        }
        const char *end = eol;
        const char *hash = memchr(p, '#', (size_t)(end - p));
        if (hash) end = hash;
        const char *q = p, *ws, *we;
        p = eol + 1;
        if (!next_word(&q, end, &ws, &we)) continue;
        size_t wl = (size_t)(we - ws);
#define IS(k) (wl == sizeof(k) - 1 && memcmp(ws, k, wl) == 0)
        int64_t n;
        const char *vs, *ve;
        if (!seen_header) {
            if (!IS("ppv-schedule") || !next_word(&q, end, &vs, &ve) ||
                word_int(vs, ve, 1000, &n) < 0) {
                fail_at(&c, ws, -1, NULL, 0, "a native schedule starts with 'ppv-schedule 1'");
                goto fail;
            }
            if (n != 1) {
                fail_at(&c, vs, -1, NULL, 0,
                        "native schedule version %lld is not supported (this ppv reads 1)",
                        (long long)n);
                goto fail;
            }
            seen_header = 1;
        } else if (IS("ranks")) {
            if (s) {
                fail_at(&c, ws, -1, NULL, 0, "'ranks' given twice");
                goto fail;
            }
            if (!next_word(&q, end, &vs, &ve) || word_int(vs, ve, MAX_RANKS, &n) < 0 || n < 1) {
                fail_at(&c, ws, -1, NULL, 0, "'ranks N' needs N in 1..%d", MAX_RANKS);
                goto fail;
            }
            s = ppv_schedule_new((int32_t)n);
            if (!s) {
                fail_at(&c, ws, -1, NULL, 0, "out of memory");
                goto fail;
            }
            s->placeless = !places;
            snprintf(s->name, sizeof s->name, "%s", name);
            s->dialect = PPV_DIALECT_CURRENT;
            for (const char *l = text; l && l <= c.bol;) { /* the lines so far */
                if (ppv_schedule_add_line(s, l - text) < 0) {
                    fail_at(&c, ws, -1, NULL, 0, "out of memory");
                    goto fail;
                }
                l = memchr(l, '\n', (size_t)(tend - l));
                l = l ? l + 1 : NULL;
            }
        } else if (!s) {
            fail_at(&c, ws, -1, NULL, 0, "'ranks N' must come before '%.*s'", (int)wl, ws);
            goto fail;
        } else if (IS("microbatches")) {
            if (!next_word(&q, end, &vs, &ve) || word_int(vs, ve, PPV_MAX_INDEX + 1, &n) < 0) {
                fail_at(&c, ws, -1, NULL, 0, "'microbatches M' needs a number");
                goto fail;
            }
            nmb = n;
        } else if (IS("group")) {
            char gname[64];
            int32_t members[1024];
            int32_t nm = 0;
            if (!next_word(&q, end, &vs, &ve) || ve - vs >= 32) {
                fail_at(&c, ws, -1, NULL, 0, "'group NAME RANK...' needs a name under 32 bytes");
                goto fail;
            }
            snprintf(gname, sizeof gname, "%.*s", (int)(ve - vs), vs);
            const char *rs, *re;
            while (next_word(&q, end, &rs, &re)) {
                if (word_int(rs, re, MAX_RANKS, &n) < 0 || n >= s->nranks || nm == 1024) {
                    fail_at(&c, rs, -1, NULL, 0, "group '%s': '%.*s' is not a rank in 0..%d",
                            gname, (int)(re - rs), rs, s->nranks - 1);
                    goto fail;
                }
                for (int32_t k = 0; k < nm; k++)
                    if (members[k] == n) {
                        fail_at(&c, rs, -1, NULL, 0, "group '%s' names rank %lld twice", gname,
                                (long long)n);
                        goto fail;
                    }
                members[nm++] = (int32_t)n;
            }
            if (nm == 0 || ppv_schedule_add_group(s, gname, members, nm) < 0) {
                fail_at(&c, ws, -1, NULL, 0, "group '%s' is empty or declared twice", gname);
                goto fail;
            }
        } else if (IS("rank")) {
            if (!next_word(&q, end, &vs, &ve) || word_int(vs, ve, MAX_RANKS, &n) < 0 ||
                n >= s->nranks) {
                fail_at(&c, ws, -1, NULL, 0, "'rank R' needs R in 0..%d", s->nranks - 1);
                goto fail;
            }
            rank = (int32_t)n;
        } else if (rank < 0) {
            fail_at(&c, ws, -1, NULL, 0, "an action must follow a 'rank R' line");
            goto fail;
        } else if (parse_action(&c, s, rank, ws, end, &overlap_ids) < 0) {
            goto fail;
        }
#undef IS
    }
    if (!seen_header) {
        ppv_errf(err, errlen, "%s:1:1: empty file (a native schedule starts with 'ppv-schedule 1')",
                 name);
        goto fail;
    }
    if (!s) {
        ppv_errf(err, errlen, "%s:%d:1: no 'ranks N' line", name, c.line);
        goto fail;
    }
    if (nmb >= 0) s->nmb = (int32_t)nmb;
    if (ppv_schedule_finish(s, err, errlen) < 0) goto fail;
    if (nmb >= 0 && s->nmb > nmb) {
        ppv_errf(err, errlen, "%s: an action names microbatch %d but 'microbatches %lld' was given",
                 name, s->nmb - 1, (long long)nmb);
        goto fail;
    }
    *out = s;
    return 0;
fail:
    ppv_schedule_free(s);
    return -1;
}

int ppv_schedule_write_native(const ppv_schedule *s, FILE *f) {
    fprintf(f, "ppv-schedule 1\nranks %d\nmicrobatches %d\n", s->nranks, s->nmb);
    for (int32_t g = 0; g < s->ngroups; g++) {
        fprintf(f, "group %s", s->groups[g].name);
        for (int32_t k = 0; k < s->groups[g].n; k++) fprintf(f, " %d", s->groups[g].ranks[k]);
        fputc('\n', f);
    }
    for (int32_t r = 0; r < s->nranks; r++) {
        fprintf(f, "rank %d\n", r);
        const ppv_program *p = &s->prog[r];
        for (int32_t i = 0; i < p->n; i++) {
            const ppv_action *a = &p->acts[i];
            unsigned fl = ppv_action_flags(a->kind);
            if (a->overlap) {
                int32_t j = i;
                fputc('(', f);
                for (; j < p->n && p->acts[j].overlap == a->overlap; j++)
                    fprintf(f, "%s%d%s%d", j > i ? ";" : "", p->acts[j].stage,
                            ppv_action_token(p->acts[j].kind), p->acts[j].mb);
                fputs(")OVERLAP_F_B\n", f);
                i = j - 1;
                continue;
            }
            if (fl & PPV_AF_STAGE) {
                fprintf(f, "%d%s", a->stage, ppv_action_token(a->kind));
                if (fl & PPV_AF_MB) fprintf(f, "%d", a->mb);
            } else {
                fputs(ppv_action_token(a->kind), f);
            }
            if (fl & PPV_AF_PEER) fprintf(f, " peer=%d tag=%d", a->peer, a->tag);
            if (fl & PPV_AF_COLL) fprintf(f, " group=%s", s->groups[a->group].name);
            if (fl & PPV_AF_ROOT) fprintf(f, " root=%d", a->root);
            if ((fl & (PPV_AF_COMM | PPV_AF_COLL)) && a->bytes) fprintf(f, " bytes=%lld",
                                                                         (long long)a->bytes);
            if ((fl & (PPV_AF_PEER | PPV_AF_COLL)) && a->dtype)
                fprintf(f, " dtype=%s", ppv_dtype_token((ppv_dtype)a->dtype));
            if (a->kind == PPV_ACT_CHUNK) fprintf(f, " expected_generator_calls=%d", a->count);
            fputc('\n', f);
        }
    }
    return ferror(f) ? -1 : 0;
}
