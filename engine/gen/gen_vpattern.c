/* gen_vpattern.c - V-Half and V-Min as the paper builds them ("Pipeline
 * Parallelism with Controllable Memory", Qi et al., 2024), the way the
 * authors' reference scheduler does (zbv_greedy.py in
 * sail-sg/zero-bubble-pipeline-parallelism), so that ppv's schedules are
 * the reference's, cell for cell.
 *
 * Rank r holds stages r (chunk 0) and 2p-1-r (chunk 1). Work is placed in
 * unit time slots, six kinds a rank: F (chunk 0 forward), f (chunk 1
 * forward), B (chunk 1's backward for inputs), b (chunk 0's), and the two
 * weight backwards. The method:
 *  1. A stable pattern: each rank's F, f, B, b at fixed offsets in a
 *     period of 6 slots, microbatch k at offset + 6k; the offsets set the
 *     memory (V-Min a third of 1F1B's activations, V-Half a half).
 *  2. W fills the empty slots, oldest backward first.
 *  3. Squeeze: in slot order, each operation of the warm-up and cool-down
 *     moves to the earliest free slot after its dependencies where the
 *     rank's peak memory does not rise. Once with the W placed, then again
 *     without them, and the W are placed again, each chunk's on its own.
 *  4. The order of each rank is its operations by slot.
 * The order does not depend on the F, I, W costs (the reference evaluates
 * costs on the order afterwards), so ppv builds it at unit costs.
 */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "gen_internal.h"

enum { KF, Kf, KB, Kb, KW, Kw, NKINDS };

/* One rank's slots: t[k][mb] is the slot of kind k's microbatch mb, for
 * the kinds in use (4 without W, 5 with one W list, 6 with W split). */
typedef struct vrank {
    int32_t *t[NKINDS];
    int32_t nw[2]; /* entries in the W lists */
} vrank;

typedef struct vsched {
    int32_t P, m;
    vrank *r;
    int32_t *scratch; /* 2m: B and b slots, sorted */
} vsched;

/* The next pending slot of each list (cursor p[k]); INT32_MAX when done. */
static int32_t pending(const vrank *v, int k, const int32_t *p, int32_t m) {
    int32_t n = k < KW ? m : v->nw[k - KW];
    return p[k] < n ? v->t[k][p[k]] : INT32_MAX;
}

/* The last slot any list of the rank uses. */
static int32_t last_slot(const vrank *v, int nk, int32_t m) {
    int32_t b = -1;
    for (int k = 0; k < nk; k++) {
        int32_t n = k < KW ? m : v->nw[k - KW];
        for (int32_t i = 0; i < n; i++)
            if (v->t[k][i] > b) b = v->t[k][i];
    }
    return b;
}

/* Peak activations of a rank: F and f hold one each, which a W frees; with
 * no W list, a W runs in each empty slot while a backward waits for one. */
static int32_t rank_memory(const vrank *v, int nk, int32_t m) {
    int32_t p[NKINDS] = {0}, cur = 0, peak = 0, wait = 0, bound = last_slot(v, nk, m);
    for (int32_t i = 0; i <= bound; i++) {
        int32_t best = INT32_MAX;
        int bk = -1;
        for (int k = 0; k < nk; k++) {
            int32_t s = pending(v, k, p, m);
            if (s < best) best = s, bk = k;
        }
        if (best == i) {
            p[bk]++;
            if (bk <= Kf) cur++;
            else if (bk <= Kb) wait++;
            else cur--;
        } else if (nk == 4 && wait) {
            cur--, wait--;
        }
        if (cur > peak) peak = cur;
    }
    return peak;
}

/* Places the W of a rank in its empty slots (split: each chunk's W in its
 * own list), then any left after the last slot. */
static void put_w(vrank *v, int32_t m, int split) {
    int32_t p[NKINDS] = {0}, wait[2] = {0, 0}, bound = last_slot(v, 4, m), i;
    v->nw[0] = v->nw[1] = 0;
    for (i = 0; i <= bound; i++) {
        int32_t best = INT32_MAX;
        int bk = -1;
        for (int k = 0; k < 4; k++) {
            int32_t s = pending(v, k, p, m);
            if (s < best) best = s, bk = k;
        }
        if (best == i) {
            p[bk]++;
            if (bk >= KB) wait[split ? bk - KB : 0]++;
            continue;
        }
        for (int w = 0; w < 2; w++)
            if (wait[w]) {
                v->t[KW + w][v->nw[w]++] = i;
                wait[w]--;
                break;
            }
    }
    i = bound; /* the rest go after the last slot, one a slot */
    for (int w = 0; w < 2; w++)
        while (wait[w] > 0) v->t[KW + w][v->nw[w]++] = ++i, wait[w]--;
}

/* The slot order of the whole schedule: the (slot, rank, kind, mb) of the
 * next operation over every rank's lists, as cursors p (P x NKINDS). */
static int next_op(const vsched *g, int nk, int32_t *p, int32_t *rank, int *kind) {
    int32_t best = INT32_MAX;
    *rank = -1;
    for (int32_t r = 0; r < g->P; r++)
        for (int k = 0; k < nk; k++) {
            int32_t s = pending(&g->r[r], k, p + r * NKINDS, g->m);
            if (s < best) best = s, *rank = r, *kind = k;
        }
    return *rank >= 0;
}

static int cmp_i32(const void *a, const void *b) {
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

/* Unit-cost execution of the slot order: every operation starts when its
 * dependencies and its rank's previous operation have ended. The start
 * times become the new slots. */
static int execute(vsched *g, int nk, int32_t *p, int32_t *end_prev) {
    int32_t P = g->P, m = g->m;
    memset(p, 0, (size_t)P * NKINDS * sizeof *p);
    for (int32_t r = 0; r < P; r++) end_prev[r] = 0;
    /* end times, written over the slots as operations run in slot order:
     * an operation's dependencies all come earlier in that order */
    int32_t rank;
    int kind = 0;
    int32_t *ends[NKINDS];
    for (int k = 0; k < nk; k++) {
        ends[k] = malloc((size_t)P * 2 * (size_t)m * sizeof *ends[k]);
        if (!ends[k]) {
            for (int j = 0; j < k; j++) free(ends[j]);
            return -1;
        }
    }
#define END(k, r, mb) ends[k][(size_t)(r) * 2 * (size_t)m + (size_t)(mb)]
    while (next_op(g, nk, p, &rank, &kind)) {
        int32_t mb = p[rank * NKINDS + kind]++, dep = end_prev[rank];
        if ((kind == KF || kind == KB) && rank > 0 && END(kind, rank - 1, mb) > dep)
            dep = END(kind, rank - 1, mb);
        if ((kind == Kf || kind == Kb) && rank + 1 < P && END(kind, rank + 1, mb) > dep)
            dep = END(kind, rank + 1, mb);
        if (kind > KF && kind < KW && END(kind - 1, rank, mb) > dep) dep = END(kind - 1, rank, mb);
        if (mb > 0 && END(kind, rank, mb - 1) > dep) dep = END(kind, rank, mb - 1);
        END(kind, rank, mb) = dep + 1;
        end_prev[rank] = dep + 1;
    }
    for (int32_t r = 0; r < P; r++)
        for (int k = 0; k < nk; k++) {
            int32_t n = k < KW ? m : g->r[r].nw[k - KW];
            for (int32_t i = 0; i < n; i++) g->r[r].t[k][i] = END(k, r, i) - 1;
        }
#undef END
    for (int k = 0; k < nk; k++) free(ends[k]);
    return 0;
}

/* One squeeze pass (step 3). with_w: the W are placed first and squeezed
 * too, else they are placed after. */
static int squeeze(vsched *g, int with_w) {
    int32_t P = g->P, m = g->m;
    int nk = with_w ? 5 : 4;
    if (with_w)
        for (int32_t r = 0; r < P; r++) put_w(&g->r[r], m, 0);
    int32_t peak = 0, width = 0;
    for (int32_t r = 0; r < P; r++) {
        int32_t mem = rank_memory(&g->r[r], nk, m), b = last_slot(&g->r[r], nk, m) + 1;
        if (mem > peak) peak = mem;
        if (b > width) width = b;
    }
    int32_t *p = calloc((size_t)P * NKINDS, sizeof *p);
    unsigned char *used = calloc((size_t)P * (size_t)width, 1);
    int32_t *end_prev = malloc((size_t)P * sizeof *end_prev);
    int rc = -1;
    if (!p || !used || !end_prev) goto done;
    int phase = 0;
    int32_t rank;
    int kind = 0;
    while (next_op(g, nk, p, &rank, &kind)) {
        vrank *v = &g->r[rank];
        int32_t mb = p[rank * NKINDS + kind]++, slot = v->t[kind][mb];
        unsigned char *u = used + (size_t)rank * (size_t)width;
        /* the steady state, from the first b of rank 0 to the last F, stays */
        if (kind == Kb && rank == 0 && phase == 0) phase = 1;
        if (phase == 1 || (phase == 0 && !with_w)) {
            if (phase == 1 && kind == KF && mb == m - 1) phase = 2;
            u[slot] = 1;
            continue;
        }
        int32_t dep = -1;
        if ((kind == KF || kind == KB) && rank > 0 && g->r[rank - 1].t[kind][mb] > dep)
            dep = g->r[rank - 1].t[kind][mb];
        if ((kind == Kf || kind == Kb) && rank + 1 < P && g->r[rank + 1].t[kind][mb] > dep)
            dep = g->r[rank + 1].t[kind][mb];
        if (kind > KF && kind < KW && v->t[kind - 1][mb] > dep) dep = v->t[kind - 1][mb];
        if (kind == KW) { /* the mb-th backward of either chunk */
            memcpy(g->scratch, v->t[KB], (size_t)m * sizeof *g->scratch);
            memcpy(g->scratch + m, v->t[Kb], (size_t)m * sizeof *g->scratch);
            qsort(g->scratch, 2 * (size_t)m, sizeof *g->scratch, cmp_i32);
            if (g->scratch[mb] > dep) dep = g->scratch[mb];
        }
        if (mb > 0 && v->t[kind][mb - 1] > dep) dep = v->t[kind][mb - 1];
        int placed = 0;
        for (int32_t s = dep + 1; s < slot && !placed; s++) {
            if (u[s]) continue;
            v->t[kind][mb] = s;
            placed = rank_memory(v, nk, m) <= peak;
        }
        if (!placed) v->t[kind][mb] = slot;
        u[v->t[kind][mb]] = 1;
    }
    if (!with_w)
        for (int32_t r = 0; r < P; r++) put_w(&g->r[r], m, 0);
    rc = execute(g, 5, p, end_prev);
done:
    free(p);
    free(used);
    free(end_prev);
    return rc;
}

/* Stage of kind k's operation on rank r, and the ppv action. */
static void op_of(int32_t P, int32_t r, int k, int32_t *stage, ppv_action_kind *act) {
    static const ppv_action_kind acts[NKINDS] = {PPV_ACT_F, PPV_ACT_F, PPV_ACT_I,
                                                 PPV_ACT_I, PPV_ACT_W, PPV_ACT_W};
    int chunk1 = k == Kf || k == KB || k == KW;
    *stage = chunk1 ? 2 * P - 1 - r : r;
    *act = acts[k];
}

static int vpattern_build(ppv_schedule *s, const ppv_gen_params *prm, int vmin) {
    int32_t P = prm->ranks, m = prm->microbatches;
    vsched g = {P, m, calloc((size_t)P, sizeof(vrank)), malloc(2 * (size_t)m * sizeof(int32_t))};
    int rc = -1;
    if (!g.r || !g.scratch) goto done;
    for (int32_t r = 0; r < P; r++)
        for (int k = 0; k < NKINDS; k++) /* W lists hold up to 2m (one list for both chunks) */
            if (!(g.r[r].t[k] = malloc((k < KW ? 1 : 2) * (size_t)m * sizeof(int32_t)))) goto done;
    /* 1. the stable pattern: offsets of F, f, B, b in a period of 6 */
    for (int32_t r = 0; r < P; r++) {
        int32_t off[4];
        if (vmin) {
            int32_t gap = P % 3 == 0 ? 2 : 0;
            off[0] = r, off[1] = 2 * P - r - 1, off[2] = 2 * P + gap + r,
            off[3] = 4 * P + gap - r - 1;
        } else {
            int32_t gap = P % 2 == 0 ? 3 : 0;
            off[0] = 2 * r, off[1] = 3 * P - r - 2, off[2] = 3 * P + gap + 2 * r - 1,
            off[3] = 6 * P + gap - r - 2;
        }
        for (int k = 0; k < 4; k++)
            for (int32_t i = 0; i < m; i++) g.r[r].t[k][i] = off[k] + 6 * i;
    }
    /* 2, 3: squeezed with the W, then without them */
    if (squeeze(&g, 1) < 0 || squeeze(&g, 0) < 0) goto done;
    /* the W again, each chunk's own */
    for (int32_t r = 0; r < P; r++) put_w(&g.r[r], m, 1);
    /* 4. each rank's operations by slot (kind, then microbatch, on a tie) */
    for (int32_t r = 0; r < P; r++) {
        int32_t p[NKINDS] = {0};
        for (;;) {
            int32_t best = INT32_MAX;
            int bk = -1;
            for (int k = 0; k < NKINDS; k++) {
                int32_t t = pending(&g.r[r], k, p, m);
                if (t < best) best = t, bk = k;
            }
            if (bk < 0) break;
            int32_t stage;
            ppv_action_kind act;
            op_of(P, r, bk, &stage, &act);
            if (ppv_gen_emit(s, r, act, stage, p[bk]++) < 0) goto done;
        }
    }
    rc = 0;
done:
    for (int32_t r = 0; g.r && r < P; r++)
        for (int k = 0; k < NKINDS; k++) free(g.r[r].t[k]);
    free(g.r);
    free(g.scratch);
    return rc;
}

int ppv_gen_v_half_build(ppv_schedule *s, const ppv_gen_params *p) {
    return vpattern_build(s, p, 0);
}

int ppv_gen_v_min_build(ppv_schedule *s, const ppv_gen_params *p) {
    return vpattern_build(s, p, 1);
}
