/* gen_greedy.c - ZB-H1 as the paper orders it, and ZB-H2 (and either with
 * more than one stage a rank, interleaved) from a greedy list scheduler
 * with unit F, I and W times. V-Half and V-Min are in gen_vpattern.c.
 *
 * At every time step each idle rank takes, in this order: a ready I (the
 * backward for inputs, oldest microbatch first), a ready F if the rank's
 * activation cap allows it, or a pending W (which frees an activation). The
 * cap is the schedule's published peak: p microbatches for ZB-H1 (1F1B's),
 * 2p - 1 for ZB-H2. A rank that starts a microbatch's first local chunk reserves room for its
 * later local chunks, so the oldest microbatch can always move and the
 * greedy never stalls for any cap of at least one microbatch.
 */
#include <limits.h>
#include <stdlib.h>

#include "gen_internal.h"

typedef struct greedy {
    int32_t P, S, m, v; /* ranks, stages, microbatches, chunks per rank */
    int32_t *fdone, *idone; /* [S*m]: time the F / I finishes, INT32_MAX if not run */
    int32_t *nf, *ni;       /* [S]: next microbatch to run F / I on */
    int32_t *mem, *reserve, *cap; /* [P], in chunk activations */
    int32_t *wq;                  /* [P][v*m] pending W as stage*m+mb, FIFO */
    int32_t *wq_head, *wq_tail;   /* [P] */
} greedy;

/* Stage of local chunk c (pipeline order) on rank r. */
static int32_t chunk_stage(const greedy *g, int32_t r, int32_t c) {
    return c * g->P + r;
}

/* Runs one idle rank's choice at time t; returns 1 if it took an action. */
static int greedy_step(greedy *g, ppv_schedule *s, int32_t r, int32_t t) {
    int32_t m = g->m, best_s = -1, best_mb = INT32_MAX;
    for (int32_t c = g->v - 1; c >= 0; c--) { /* I: oldest microbatch, later stage */
        int32_t st = chunk_stage(g, r, c), mb = g->ni[st];
        if (mb >= m || g->fdone[st * m + mb] > t) continue;
        if (st < g->S - 1 && g->idone[(st + 1) * m + mb] > t) continue;
        if (mb < best_mb) {
            best_mb = mb;
            best_s = st;
        }
    }
    if (best_s >= 0) {
        g->idone[best_s * m + best_mb] = t + 1;
        g->ni[best_s]++;
        g->wq[(int64_t)r * g->v * m + g->wq_tail[r]++] = best_s * m + best_mb;
        return ppv_gen_emit(s, r, PPV_ACT_I, best_s, best_mb) < 0 ? -1 : 1;
    }
    for (int32_t c = g->v - 1; c >= 0; c--) { /* F: later chunk first */
        int32_t st = chunk_stage(g, r, c), mb = g->nf[st];
        if (mb >= m || (st > 0 && g->fdone[(st - 1) * m + mb] > t)) continue;
        if (c == 0 && g->mem[r] + g->reserve[r] + g->v > g->cap[r]) continue;
        g->fdone[st * m + mb] = t + 1;
        g->nf[st]++;
        g->mem[r]++;
        g->reserve[r] += c == 0 ? g->v - 1 : -1;
        return ppv_gen_emit(s, r, PPV_ACT_F, st, mb) < 0 ? -1 : 1;
    }
    if (g->wq_head[r] < g->wq_tail[r]) {
        int32_t key = g->wq[(int64_t)r * g->v * m + g->wq_head[r]++];
        g->mem[r]--;
        return ppv_gen_emit(s, r, PPV_ACT_W, key / m, key % m) < 0 ? -1 : 1;
    }
    return 0;
}

/* Builds the schedule with per-rank caps (chunk activations). */
static int greedy_build(ppv_schedule *s, int32_t P, int32_t m, int32_t v,
                        const int32_t *cap) {
    greedy g = {P, P * v, m, v, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
                NULL, NULL, NULL};
    size_t sm = (size_t)g.S * (size_t)m;
    g.fdone = malloc(sm * sizeof *g.fdone);
    g.idone = malloc(sm * sizeof *g.idone);
    g.nf = calloc((size_t)g.S, sizeof *g.nf);
    g.ni = calloc((size_t)g.S, sizeof *g.ni);
    g.mem = calloc((size_t)P, sizeof *g.mem);
    g.reserve = calloc((size_t)P, sizeof *g.reserve);
    g.cap = malloc((size_t)P * sizeof *g.cap);
    g.wq = malloc(sm * sizeof *g.wq);
    g.wq_head = calloc((size_t)P, sizeof *g.wq_head);
    g.wq_tail = calloc((size_t)P, sizeof *g.wq_tail);
    int rc = -1;
    if (!g.fdone || !g.idone || !g.nf || !g.ni || !g.mem || !g.reserve || !g.cap || !g.wq ||
        !g.wq_head || !g.wq_tail)
        goto done;
    for (size_t i = 0; i < sm; i++) g.fdone[i] = g.idone[i] = INT32_MAX;
    for (int32_t r = 0; r < P; r++) g.cap[r] = cap[r] < v ? v : cap[r];
    int64_t left = 3 * (int64_t)sm;
    for (int32_t t = 0; left > 0; t++) {
        int progressed = 0;
        for (int32_t r = 0; r < P; r++) {
            int got = greedy_step(&g, s, r, t);
            if (got < 0) goto done;
            progressed += got;
            left -= got;
        }
        if (!progressed && left > 0) goto done; /* nothing can become ready later */
    }
    rc = 0;
done:
    free(g.fdone);
    free(g.idone);
    free(g.nf);
    free(g.ni);
    free(g.mem);
    free(g.reserve);
    free(g.cap);
    free(g.wq);
    free(g.wq_head);
    free(g.wq_tail);
    return rc;
}

int ppv_gen_zb_check(const ppv_gen_params *p, char *err, size_t n) {
    if (p->microbatches < p->ranks)
        return ppv_errf(err, n,
                        "zero-bubble schedules need at least as many microbatches as ranks "
                        "(m=%d < p=%d)",
                        p->microbatches, p->ranks);
    return 0;
}

/* Builds with cap(r) chunk activations per rank. */
static int build_with(ppv_schedule *s, const ppv_gen_params *p,
                      int32_t (*cap_of)(int32_t P, int32_t r, int32_t v)) {
    int32_t *cap = malloc((size_t)p->ranks * sizeof *cap);
    if (!cap) return -1;
    for (int32_t r = 0; r < p->ranks; r++) cap[r] = cap_of(p->ranks, r, p->stages_per_rank);
    int rc = greedy_build(s, p->ranks, p->microbatches, p->stages_per_rank, cap);
    free(cap);
    return rc;
}

static int32_t cap_h1(int32_t P, int32_t r, int32_t v) {
    (void)r;
    return v * P;
}
static int32_t cap_h2(int32_t P, int32_t r, int32_t v) {
    (void)r;
    return v * (2 * P - 1);
}

/* ZB-H1 as the paper draws it (Qi et al., 2023, figure 3), which is the
 * order the authors' scheduler writes at unit costs: rank r runs p - r
 * warm-up forwards, then r pairs (I, F), then (I, W, F) while forwards
 * remain, then (I, W) and the remaining W. Every rank holds at most p
 * microbatches from F to W, 1F1B's peak, and at unit F, I, W times the
 * bubble is (p - 1) / (3m + p - 1). The greedy with the same cap lets the
 * middle ranks run ahead and loses a fifth of that (29 against 27 units at
 * p = 4, m = 8). */
static int zb_h1_rank(ppv_schedule *s, int32_t P, int32_t m, int32_t r) {
    int32_t nf = 0, ni = 0, nw = 0;
#define EMIT(kind, n) (ppv_gen_emit(s, r, (kind), r, (n)++) < 0)
    while (nf < P - r && nf < m)
        if (EMIT(PPV_ACT_F, nf)) return -1;
    for (int32_t k = 0; k < r && ni < m; k++)
        if (EMIT(PPV_ACT_I, ni) || (nf < m && EMIT(PPV_ACT_F, nf))) return -1;
    while (nf < m)
        if (EMIT(PPV_ACT_I, ni) || EMIT(PPV_ACT_W, nw) || EMIT(PPV_ACT_F, nf)) return -1;
    while (ni < m)
        if (EMIT(PPV_ACT_I, ni) || EMIT(PPV_ACT_W, nw)) return -1;
    while (nw < m)
        if (EMIT(PPV_ACT_W, nw)) return -1;
#undef EMIT
    return 0;
}

int ppv_gen_zb_h1_build(ppv_schedule *s, const ppv_gen_params *p) {
    if (p->stages_per_rank != 1) return build_with(s, p, cap_h1);
    for (int32_t r = 0; r < p->ranks; r++)
        if (zb_h1_rank(s, p->ranks, p->microbatches, r) < 0) return -1;
    return 0;
}
int ppv_gen_greedy_capped(ppv_schedule *s, int32_t P, int32_t m, int32_t v, int32_t cap) {
    int32_t *caps = malloc((size_t)P * sizeof *caps);
    if (!caps) return -1;
    for (int32_t r = 0; r < P; r++) caps[r] = cap;
    int rc = greedy_build(s, P, m, v, caps);
    free(caps);
    return rc;
}

int ppv_gen_zb_h2_build(ppv_schedule *s, const ppv_gen_params *p) {
    return build_with(s, p, cap_h2);
}
