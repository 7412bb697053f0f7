/* gen_pytorch.c - the pytorch-* kinds: the per-rank orders of PyTorch's
 * schedule classes (torch.distributed.pipelining.schedules, at the commit
 * tests/data/pytorch/README.md names), rebuilt from their rules so that a
 * user can check, run and measure exactly what PyTorch would execute.
 * Idle cells (PyTorch pads ranks with None to align them in time) are left
 * out: they carry no action, and ppv's time model places every action by
 * its dependences. tests/test_gen.c compares every kind with every file
 * PyTorch's classes wrote, cell for cell.
 *
 * Placement: stage l p + r on rank r for local stage l (loop), except the
 * V classes (zbv, dualpipev), which are ppv's own zbv and dualpipev.
 *
 * One deliberate difference: PyTorch's Schedule1F1B numbers the last rank's
 * forwards from 1 (it runs F1 B0 F2 B1 ...: B0 before any F0), an order
 * PyTorch's own validator refuses. pytorch-1f1b writes the valid order,
 * F0 B0 F1 B1 ..., and test_gen pins the one-off difference.
 */
#include <stdlib.h>
#include <string.h>

#include "gen_internal.h"

/* Appends rank r's REDUCE_GRAD, as PyTorch's single-stage classes end. */
static int reduce_grad(ppv_schedule *s, int32_t r) {
    return ppv_gen_emit(s, r, PPV_ACT_REDUCE_GRAD, r, -1);
}

int ppv_gen_pt_single_check(const ppv_gen_params *p, char *err, size_t n) {
    if (p->stages_per_rank != 1)
        return ppv_errf(err, n, "PyTorch's single-stage classes place one stage per rank (-v 1), "
                                "not %d", p->stages_per_rank);
    return 0;
}

/* ScheduleGPipe: every forward, then every backward, in microbatch order. */
int ppv_gen_pt_gpipe_build(ppv_schedule *s, const ppv_gen_params *p) {
    for (int32_t r = 0; r < p->ranks; r++) {
        for (int32_t mb = 0; mb < p->microbatches; mb++)
            if (ppv_gen_emit(s, r, PPV_ACT_F, r, mb) < 0) return -1;
        for (int32_t mb = 0; mb < p->microbatches; mb++)
            if (ppv_gen_emit(s, r, PPV_ACT_B, r, mb) < 0) return -1;
        if (reduce_grad(s, r) < 0) return -1;
    }
    return 0;
}

int ppv_gen_pt_1f1b_check(const ppv_gen_params *p, char *err, size_t n) {
    if (ppv_gen_pt_single_check(p, err, n) < 0) return -1;
    if (p->microbatches < p->ranks)
        return ppv_errf(err, n, "Schedule1F1B needs at least as many microbatches as ranks "
                                "(m=%d < %d)", p->microbatches, p->ranks);
    return 0;
}

/* Schedule1F1B: p - 1 - r warm-up forwards, then a forward and a backward
 * in turn, then the remaining backwards (the valid order: see the top). */
int ppv_gen_pt_1f1b_build(ppv_schedule *s, const ppv_gen_params *p) {
    int32_t m = p->microbatches;
    for (int32_t r = 0; r < p->ranks; r++) {
        int32_t f = 0, b = 0;
        while (f < p->ranks - 1 - r)
            if (ppv_gen_emit(s, r, PPV_ACT_F, r, f++) < 0) return -1;
        while (f < m)
            if (ppv_gen_emit(s, r, PPV_ACT_F, r, f++) < 0 ||
                ppv_gen_emit(s, r, PPV_ACT_B, r, b++) < 0)
                return -1;
        while (b < m)
            if (ppv_gen_emit(s, r, PPV_ACT_B, r, b++) < 0) return -1;
        if (reduce_grad(s, r) < 0) return -1;
    }
    return 0;
}

int ppv_gen_pt_any_check(const ppv_gen_params *p, char *err, size_t n) {
    (void)p, (void)err, (void)n;
    return 0;
}

/* ScheduleLoopedBFS: each local stage's forwards in stage order, then the
 * backwards in the reverse order of stages and of microbatches. */
int ppv_gen_pt_looped_bfs_build(ppv_schedule *s, const ppv_gen_params *p) {
    int32_t P = p->ranks, v = p->stages_per_rank, m = p->microbatches;
    for (int32_t r = 0; r < P; r++) {
        for (int32_t l = 0; l < v; l++)
            for (int32_t mb = 0; mb < m; mb++)
                if (ppv_gen_emit(s, r, PPV_ACT_F, l * P + r, mb) < 0) return -1;
        for (int32_t l = v - 1; l >= 0; l--)
            for (int32_t mb = m - 1; mb >= 0; mb--)
                if (ppv_gen_emit(s, r, PPV_ACT_B, l * P + r, mb) < 0) return -1;
    }
    return 0;
}

/* The interleaved classes run microbatches in rounds of m / max(1, m / p). */
int ppv_gen_pt_interleaved_check(const ppv_gen_params *p, char *err, size_t n) {
    int32_t rounds = p->microbatches / p->ranks > 1 ? p->microbatches / p->ranks : 1;
    if (p->microbatches % rounds != 0)
        return ppv_errf(err, n,
                        "PyTorch's interleaved classes run m=%d microbatches in %d rounds "
                        "(m / p), so m must be a multiple of %d",
                        p->microbatches, rounds, rounds);
    return 0;
}

/* ScheduleInterleaved1F1B (zb = 0) and ScheduleInterleavedZeroBubble
 * (zb = 1) on one rank. Step k of the rank's F/B sequence works on local
 * stage (k / per_round) mod v, forwards counting up from stage 0 and
 * backwards (from the end of the warm-up) down from stage v - 1; each
 * stage's microbatches come in order. The warm-up is (v - 1) per_round
 * forwards plus 2 (or, zero bubble, 1) for each rank after this one, at
 * most v m; then a forward and a backward in turn; then the backwards.
 * Zero bubble splits each backward into I and W: rank r's first r
 * backwards of the steady phase leave their W waiting, every later
 * backward is followed by the oldest waiting W, and the rest end the
 * rank's program. */
static int interleaved_rank(ppv_schedule *s, const ppv_gen_params *p, int32_t r, int zb,
                            int32_t *next_f, int32_t *next_b, int32_t *next_w, int32_t *bstage) {
    int32_t P = p->ranks, v = p->stages_per_rank, m = p->microbatches;
    int32_t rounds = m / P > 1 ? m / P : 1, per_round = m / rounds;
    int64_t total = (int64_t)v * m;
    int64_t warm = (int64_t)(v - 1) * per_round + (zb ? 1 : 2) * (int64_t)(P - 1 - r);
    if (warm > total) warm = total;
    memset(next_f, 0, sizeof *next_f * (size_t)v);
    memset(next_b, 0, sizeof *next_b * (size_t)v);
    memset(next_w, 0, sizeof *next_w * (size_t)v);
    int64_t nb = 0, nw = 0; /* backwards run, weight backwards run */
    ppv_action_kind back = zb ? PPV_ACT_I : PPV_ACT_B;
    for (int64_t k = 0; k < warm + total; k++) {
        if (k < total) { /* a forward: the warm-up's, or the steady phase's */
            int32_t l = (int32_t)((k / per_round) % v);
            if (ppv_gen_emit(s, r, PPV_ACT_F, l * P + r, next_f[l]++) < 0) return -1;
        }
        if (k < warm) continue;
        int32_t l = v - 1 - (int32_t)(((k - warm) / per_round) % v);
        if (ppv_gen_emit(s, r, back, l * P + r, next_b[l]++) < 0) return -1;
        bstage[nb++] = l;
        if (zb && k - warm >= r) {
            int32_t lw = bstage[nw++];
            if (ppv_gen_emit(s, r, PPV_ACT_W, lw * P + r, next_w[lw]++) < 0) return -1;
        }
    }
    while (zb && nw < nb) {
        int32_t lw = bstage[nw++];
        if (ppv_gen_emit(s, r, PPV_ACT_W, lw * P + r, next_w[lw]++) < 0) return -1;
    }
    return 0;
}

static int interleaved_build(ppv_schedule *s, const ppv_gen_params *p, int zb) {
    int32_t v = p->stages_per_rank;
    int32_t *count = calloc((size_t)v * 3, sizeof *count);
    int32_t *bstage = malloc(sizeof *bstage * (size_t)v * (size_t)p->microbatches);
    int rc = count && bstage ? 0 : -1;
    for (int32_t r = 0; rc == 0 && r < p->ranks; r++)
        rc = interleaved_rank(s, p, r, zb, count, count + v, count + 2 * v, bstage);
    free(count);
    free(bstage);
    return rc;
}

int ppv_gen_pt_interleaved_1f1b_build(ppv_schedule *s, const ppv_gen_params *p) {
    return interleaved_build(s, p, 0);
}

int ppv_gen_pt_interleaved_zb_build(ppv_schedule *s, const ppv_gen_params *p) {
    return interleaved_build(s, p, 1);
}
