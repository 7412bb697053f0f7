/* costs.c - per-stage costs for stages that are not alike: the cost file
 * (docs/schedules.md, "Stages that are not alike") and the costs a
 * GPT-style model's split gives each stage (spec/memory-model.md's
 * placement, FLOP-proportional times). The checker uses them for each
 * action's time, each message's and each F's activation.
 */
#include <stdlib.h>
#include <string.h>

#include "check_internal.h"

enum { MAX_STAGES = 1 << 20 };

/* The columns a cost file may name; the first four are required. */
static const char *const columns[] = {"stage", "f", "b", "w", "comm", "act", "i_frac", "stash"};
enum { COL_STAGE, COL_F, COL_B, COL_W, COL_COMM, COL_ACT, COL_IFRAC, COL_STASH, NCOLS };

void ppv_stage_costs_free(ppv_stage_costs *c) {
    free(c->s);
    c->s = NULL;
    c->n = 0;
}

/* Splits line (modified) at commas into cells; the count, or -1 when more
 * than max. Cells keep no surrounding spaces. */
static int split_cells(char *line, char **cell, int max) {
    int n = 0;
    for (char *p = line;;) {
        while (*p == ' ' || *p == '\t') p++;
        if (n == max) return -1;
        cell[n++] = p;
        char *end = strchr(p, ',');
        char *stop = end ? end : p + strlen(p);
        while (stop > p && (stop[-1] == ' ' || stop[-1] == '\t' || stop[-1] == '\r')) stop--;
        if (!end) {
            *stop = 0;
            return n;
        }
        *stop = 0;
        p = end + 1;
    }
}

int ppv_stage_costs_parse(const char *text, const char *name, ppv_stage_costs *out, char *err,
                          size_t errlen) {
    memset(out, 0, sizeof *out);
    snprintf(out->source, sizeof out->source, "%s", name);
    int col_of[NCOLS]; /* the column a field is in, -1 when absent */
    int ncol = 0, state = 0;  /* 0: the version line next, 1: the header, 2: rows */
    int32_t cap = 0;
    const char *p = text;
    for (int64_t line = 1; *p; line++) {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);
        char buf[1024];
        if (len >= sizeof buf) {
            ppv_stage_costs_free(out);
            return ppv_errf(err, errlen, "%s:%lld: a line longer than %zu characters", name,
                            (long long)line, sizeof buf - 1);
        }
        memcpy(buf, p, len);
        buf[len] = 0;
        p = nl ? nl + 1 : p + len;
        char *hash = strchr(buf, '#');
        if (hash) *hash = 0;
        char *cell[16];
        int n = split_cells(buf, cell, 16);
        if (n == 1 && !cell[0][0]) continue; /* blank or a comment */
        if (n < 0) {
            ppv_stage_costs_free(out);
            return ppv_errf(err, errlen, "%s:%lld: more than 16 cells", name, (long long)line);
        }
        if (state == 0) {
            int64_t v;
            if (n != 2 || strcmp(cell[0], "ppv-costs") || ppv_parse_whole(cell[1], 1, 1000, &v)) {
                ppv_stage_costs_free(out);
                return ppv_errf(err, errlen, "%s:%lld: not a ppv cost file: its first line is "
                                "'ppv-costs,1'", name, (long long)line);
            }
            if (v != 1) {
                ppv_stage_costs_free(out);
                return ppv_errf(err, errlen, "%s:%lld: cost file version %lld: this ppv reads "
                                "version 1", name, (long long)line, (long long)v);
            }
            state = 1;
            continue;
        }
        if (state == 1) {
            for (int k = 0; k < NCOLS; k++) col_of[k] = -1;
            for (int c = 0; c < n; c++) {
                int k = 0;
                while (k < NCOLS && strcmp(cell[c], columns[k])) k++;
                if (k == NCOLS || col_of[k] >= 0) {
                    ppv_stage_costs_free(out);
                    return ppv_errf(err, errlen, "%s:%lld: column '%s' %s (the columns: stage, "
                                    "f, b, w, and optionally comm, act, i_frac, stash)", name,
                                    (long long)line, cell[c], k == NCOLS ? "is unknown" : "twice");
                }
                col_of[k] = c;
            }
            for (int k = COL_STAGE; k <= COL_W; k++)
                if (col_of[k] < 0) {
                    ppv_stage_costs_free(out);
                    return ppv_errf(err, errlen, "%s:%lld: the header has no column '%s' (stage, "
                                    "f, b and w are required)", name, (long long)line, columns[k]);
                }
            ncol = n;
            state = 2;
            continue;
        }
        if (n != ncol) {
            ppv_stage_costs_free(out);
            return ppv_errf(err, errlen, "%s:%lld: %d cells, the header names %d", name,
                            (long long)line, n, ncol);
        }
        int64_t st;
        if (ppv_parse_whole(cell[col_of[COL_STAGE]], 0, MAX_STAGES - 1, &st) || st != out->n) {
            int32_t want = out->n;
            ppv_stage_costs_free(out);
            return ppv_errf(err, errlen, "%s:%lld: stage '%s': the rows give stages 0, 1, 2, ... "
                            "in order, and this one is stage %d", name, (long long)line,
                            cell[col_of[COL_STAGE]], (int)want);
        }
        if (out->n == cap) {
            int32_t grown_cap = cap ? 2 * cap : 8;
            ppv_stage_cost *g = realloc(out->s, (size_t)grown_cap * sizeof *g);
            if (!g) {
                ppv_stage_costs_free(out);
                return ppv_errf(err, errlen, "out of memory");
            }
            out->s = g;
            cap = grown_cap;
        }
        ppv_stage_cost *sc = &out->s[out->n];
        double v[NCOLS] = {0, 0, 0, 0, 0, 1, 0, 0}; /* act 1: one unit an F */
        for (int k = COL_F; k < NCOLS; k++) {
            if (col_of[k] < 0) continue;
            double hi = k == COL_IFRAC || k == COL_STASH ? 1 : 1e15;
            if (ppv_parse_fraction(cell[col_of[k]], 0, hi, &v[k])) {
                ppv_stage_costs_free(out);
                return ppv_errf(err, errlen, "%s:%lld: stage %d: %s '%s' is not a number in "
                                "[0, %g] (plain decimal, no sign, 'inf' or 'nan')", name,
                                (long long)line, (int)st, columns[k], cell[col_of[k]], hi);
            }
        }
        *sc = (ppv_stage_cost){v[COL_F], v[COL_B], v[COL_W], v[COL_COMM], v[COL_ACT],
                               v[COL_IFRAC], v[COL_STASH]};
        if (!(sc->f > 0) || !(sc->b > sc->w)) {
            ppv_stage_cost bad = *sc;
            ppv_stage_costs_free(out);
            return ppv_errf(err, errlen, "%s:%lld: stage %d: f %g, b %g, w %g: a stage needs "
                            "f > 0 and b > w (an I costs b - w)", name, (long long)line, (int)st,
                            bad.f, bad.b, bad.w);
        }
        out->n++;
    }
    if (state < 2 || out->n == 0) {
        ppv_stage_costs_free(out);
        return ppv_errf(err, errlen, "%s: %s", name,
                        state == 0   ? "empty: a cost file starts 'ppv-costs,1'"
                        : state == 1 ? "no header line after 'ppv-costs,1'"
                                     : "no stage: a row a stage follows the header");
    }
    return 0;
}

int ppv_stage_costs_from_model(const ppv_model_spec *m, int32_t nstages, double comm,
                               const ppv_mem_model *mm, ppv_stage_costs *out, char *err,
                               size_t errlen) {
    memset(out, 0, sizeof *out);
    snprintf(out->source, sizeof out->source, "the model");
    if (nstages < 1 || nstages > MAX_STAGES)
        return ppv_errf(err, errlen, "%d stages: a model is split over 1 to %d", (int)nstages,
                        MAX_STAGES);
    if (m->layers < nstages)
        return ppv_errf(err, errlen, "--model: %lld layers cannot fill %d stages",
                        (long long)m->layers, (int)nstages);
    if (!(out->s = calloc((size_t)nstages, sizeof *out->s)))
        return ppv_errf(err, errlen, "out of memory");
    out->n = nstages;
    double s = (double)m->seq, b = (double)m->mbs, h = (double)m->hidden, t = (double)m->tp;
    /* one layer's forward: the four h x h-sized matrices (24bsh^2) and the
     * attention's two s x s products (4bs^2h), split t ways */
    double layer = (24 * b * s * h * h + 4 * b * s * s * h) / t;
    double redo = m->recompute == PPV_MEMRC_FULL        ? 1.0
                  : m->recompute == PPV_MEMRC_SELECTIVE ? 4 * b * s * s * h / t / layer
                                                        : 0.0;
    double output = 2 * b * s * h * (double)m->vocab / t / layer; /* the logits' matmul */
    double act = ppv_layer_activation_bytes(m);
    for (int32_t st = 0; st < nstages; st++) {
        double L = (double)(m->layers / nstages + (st < m->layers % nstages));
        double f = L, i = L * (1 + redo), w = L;
        if (st == nstages - 1) f += output, i += output, w += output;
        out->s[st] = (ppv_stage_cost){f, i + w, w, comm, L * act, mm->i_frac, mm->stash_frac};
    }
    return 0;
}
