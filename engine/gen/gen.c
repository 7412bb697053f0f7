/* gen.c - schedule generators: one table of plug-ins (name, parameter check,
 * builder), in the manner of nccl-tests' struct testColl.
 *
 * gpipe, 1f1b, interleaved-1f1b, zbv and dualpipev follow the published
 * per-rank orders (GPipe, Megatron-LM, PyTorch's ZBV and DualPipeV, whose
 * output PyTorch's own test pins). zb-h1 (gen_greedy.c), v-half and v-min
 * (gen_vpattern.c) are the zero-bubble authors' schedules, cell for cell
 * what their reference scheduler writes; zb-h2 comes from a memory-capped
 * greedy list scheduler (gen_greedy.c): unit F/I/W times, I before F
 * before W, and a per-rank activation cap equal to the published peak.
 */
#include <stdlib.h>
#include <string.h>

#include "gen_internal.h"

#define MAX_GEN_RANKS 4096
#define MAX_GEN_MB 1000000

/* Appends an OVERLAP_F_B cell holding fwd and bwd. */
static int emit_overlap(ppv_schedule *s, int32_t rank, uint16_t *ids, ppv_action fwd,
                        ppv_action bwd) {
    int32_t step = s->prog[rank].n ? s->prog[rank].acts[s->prog[rank].n - 1].step + 1 : 0;
    fwd.overlap = bwd.overlap = *ids = ppv_overlap_next(*ids);
    fwd.step = bwd.step = step;
    if (ppv_schedule_append(s, rank, &fwd) < 0) return -1;
    return ppv_schedule_append(s, rank, &bwd);
}

/* ---- GPipe: all forwards, then all backwards ---------------------------- */

static int gpipe_check(const ppv_gen_params *p, char *err, size_t n) {
    if (p->stages_per_rank != 1)
        return ppv_errf(err, n, "gpipe places one stage per rank (-v 1), not %d",
                        p->stages_per_rank);
    return 0;
}

static int gpipe_build(ppv_schedule *s, const ppv_gen_params *p) {
    for (int32_t r = 0; r < p->ranks; r++) {
        for (int32_t mb = 0; mb < p->microbatches; mb++)
            if (ppv_gen_emit(s, r, PPV_ACT_F, r, mb) < 0) return -1;
        for (int32_t mb = 0; mb < p->microbatches; mb++)
            if (ppv_gen_emit(s, r, PPV_ACT_B, r, mb) < 0) return -1;
    }
    return 0;
}

/* ---- 1F1B: warmup forwards, then one forward one backward --------------- */

static int one_f_one_b_check(const ppv_gen_params *p, char *err, size_t n) {
    if (p->stages_per_rank != 1)
        return ppv_errf(err, n, "1f1b places one stage per rank (-v 1), not %d; for more use "
                                "interleaved-1f1b", p->stages_per_rank);
    if (p->microbatches < p->ranks)
        return ppv_errf(err, n,
                        "1f1b needs at least as many microbatches as stages (m=%d < %d); "
                        "fewer leave ranks waiting on backwards that never come "
                        "(torchtitan#775)", p->microbatches, p->ranks);
    return 0;
}

static int one_f_one_b_build(ppv_schedule *s, const ppv_gen_params *p) {
    int32_t m = p->microbatches;
    for (int32_t r = 0; r < p->ranks; r++) {
        int32_t warm = p->ranks - 1 - r;
        if (warm > m) warm = m;
        int32_t f = 0, b = 0;
        while (f < warm)
            if (ppv_gen_emit(s, r, PPV_ACT_F, r, f++) < 0) return -1;
        while (f < m) {
            if (ppv_gen_emit(s, r, PPV_ACT_F, r, f++) < 0) return -1;
            if (ppv_gen_emit(s, r, PPV_ACT_B, r, b++) < 0) return -1;
        }
        while (b < m)
            if (ppv_gen_emit(s, r, PPV_ACT_B, r, b++) < 0) return -1;
    }
    return 0;
}

/* ---- Interleaved 1F1B (Megatron-LM, microbatch groups of p) ------------- */

static int interleaved_check(const ppv_gen_params *p, char *err, size_t n) {
    if (p->stages_per_rank < 2)
        return ppv_errf(err, n, "interleaved-1f1b needs at least 2 stages per rank (-v), not %d",
                        p->stages_per_rank);
    if (p->microbatches < p->ranks || p->microbatches % p->ranks != 0)
        return ppv_errf(err, n,
                        "interleaved-1f1b runs microbatches in groups of p=%d, so m must be a "
                        "positive multiple of %d (m=%d)",
                        p->ranks, p->ranks, p->microbatches);
    return 0;
}

static int interleaved_build(ppv_schedule *s, const ppv_gen_params *p) {
    int32_t P = p->ranks, v = p->stages_per_rank, m = p->microbatches;
    int64_t total = (int64_t)m * v;
    for (int32_t r = 0; r < P; r++) {
        int64_t warm = 2LL * (P - r - 1) + (int64_t)(v - 1) * P;
        if (warm > total) warm = total;
        int64_t kf = 0, kb = 0;
        /* virtual microbatch k: chunk (k / p) % v, microbatch (k / (p v)) p + k % p */
#define CHUNK_OF(k) ((int32_t)(((k) / P) % v))
#define MB_OF(k) ((int32_t)(((k) / ((int64_t)P * v)) * P + (k) % P))
        while (kf < warm) {
            if (ppv_gen_emit(s, r, PPV_ACT_F, CHUNK_OF(kf) * P + r, MB_OF(kf)) < 0) return -1;
            kf++;
        }
        while (kf < total) {
            if (ppv_gen_emit(s, r, PPV_ACT_F, CHUNK_OF(kf) * P + r, MB_OF(kf)) < 0) return -1;
            kf++;
            if (ppv_gen_emit(s, r, PPV_ACT_B, (v - 1 - CHUNK_OF(kb)) * P + r, MB_OF(kb)) < 0)
                return -1;
            kb++;
        }
        while (kb < total) {
            if (ppv_gen_emit(s, r, PPV_ACT_B, (v - 1 - CHUNK_OF(kb)) * P + r, MB_OF(kb)) < 0)
                return -1;
            kb++;
        }
#undef CHUNK_OF
#undef MB_OF
    }
    return 0;
}

/* ---- V placement: rank r holds stage r and stage 2p-1-r ----------------- */

static int v_check(const ppv_gen_params *p, char *err, size_t n) {
    if (p->stages_per_rank != 2)
        return ppv_errf(err, n, "V schedules place exactly 2 stages per rank (-v 2), not %d",
                        p->stages_per_rank);
    return 0;
}

/* ZB-V (PyTorch's ScheduleZBVZeroBubble order): chunk-0 warmup, then
 * F/I/W of both chunks in turn; microbatches past m become idle. */
static int zbv_build(ppv_schedule *s, const ppv_gen_params *p) {
    int32_t P = p->ranks, m = p->microbatches;
    int32_t n = m > 2 * P - 1 ? m : 2 * P - 1;
    for (int32_t r = 0; r < P; r++) {
        int32_t s0 = r, s1 = 2 * P - 1 - r;
        int32_t f0 = 0, f1 = 0, b0 = 0, b1 = 0, w0, w1, step = r;
#define PUT(kind, st, mbx)                                                                       \
    do {                                                                                         \
        if ((mbx) < m) {                                                                         \
            ppv_action a_ = ppv_action_make(kind, st, mbx);                                      \
            a_.step = step;                                                                      \
            if (ppv_schedule_append(s, r, &a_) < 0) return -1;                                   \
        }                                                                                        \
        step++;                                                                                  \
    } while (0)
        for (int32_t i = 0; i < 2 * (P - r) - 1; i++, f0++) PUT(PPV_ACT_F, s0, f0);
        for (int32_t i = 0; i < r; i++, f0++, f1++) {
            PUT(PPV_ACT_F, s1, f1);
            PUT(PPV_ACT_F, s0, f0);
        }
        for (int32_t i = 0; i < P - r; i++, f1++, b1++) {
            PUT(PPV_ACT_F, s1, f1);
            PUT(PPV_ACT_I, s1, b1);
            PUT(PPV_ACT_W, s1, b1);
        }
        while (f1 < f0 || f0 < n) {
            if (f0 < n) {
                PUT(PPV_ACT_F, s0, f0);
                f0++;
            }
            PUT(PPV_ACT_I, s0, b0);
            PUT(PPV_ACT_W, s0, b0);
            b0++;
            PUT(PPV_ACT_F, s1, f1);
            PUT(PPV_ACT_I, s1, b1);
            PUT(PPV_ACT_W, s1, b1);
            f1++;
            b1++;
        }
        w0 = b0;
        w1 = b1;
        for (int32_t i = 0; i < r; i++, b0++, b1++) {
            PUT(PPV_ACT_I, s0, b0);
            PUT(PPV_ACT_I, s1, b1);
        }
        for (int32_t i = 0; i < P - r; i++, b0++, w0++) {
            PUT(PPV_ACT_I, s0, b0);
            PUT(PPV_ACT_W, s0, w0);
        }
        for (; w1 < b1; w1++) PUT(PPV_ACT_W, s1, w1);
        for (; w0 < b0; w0++) PUT(PPV_ACT_W, s0, w0);
#undef PUT
    }
    return 0;
}

static int dualpipev_check(const ppv_gen_params *p, char *err, size_t n) {
    if (v_check(p, err, n) < 0) return -1;
    if (p->microbatches < 2 * p->ranks)
        return ppv_errf(err, n,
                        "dualpipev needs at least as many microbatches as stages: m=%d < 2p=%d",
                        p->microbatches, 2 * p->ranks);
    return 0;
}

/* Per-rank counters of the DualPipeV order: next microbatch of F and of the
 * backward (I or B) per local chunk, and the queue of W owed after each I. */
typedef struct dpv_state {
    ppv_schedule *s;
    int32_t rank, stage[2], nf[2], nb[2];
    uint16_t ids;
    int32_t *wq_stage, *wq_mb, wq_head, wq_tail;
} dpv_state;

static int dpv_fwd(dpv_state *d, int c) {
    return ppv_gen_emit(d->s, d->rank, PPV_ACT_F, d->stage[c], d->nf[c]++);
}

/* Backward of chunk c: full (B) or for inputs only (I, owing a W). */
static int dpv_bwd(dpv_state *d, int c, int split) {
    int32_t mb = d->nb[c]++;
    if (split) {
        d->wq_stage[d->wq_tail] = d->stage[c];
        d->wq_mb[d->wq_tail++] = mb;
    }
    return ppv_gen_emit(d->s, d->rank, split ? PPV_ACT_I : PPV_ACT_B, d->stage[c], mb);
}

static int dpv_weight(dpv_state *d) {
    if (d->wq_head == d->wq_tail) return 0;
    int32_t i = d->wq_head++;
    return ppv_gen_emit(d->s, d->rank, PPV_ACT_W, d->wq_stage[i], d->wq_mb[i]);
}

/* Forward of chunk cf overlapped with the full backward of chunk cb. */
static int dpv_overlap(dpv_state *d, int cf, int cb) {
    ppv_action f = ppv_action_make(PPV_ACT_F, d->stage[cf], d->nf[cf]++);
    ppv_action b = ppv_action_make(PPV_ACT_B, d->stage[cb], d->nb[cb]++);
    return emit_overlap(d->s, d->rank, &d->ids, f, b);
}

/* DualPipeV (DeepSeek; PyTorch's ScheduleDualPipeV): the eight phases. */
static int dualpipev_build(ppv_schedule *s, const ppv_gen_params *p) {
    int32_t P = p->ranks, m = p->microbatches;
    int rc = 0;
    uint16_t ids = 0;
    for (int32_t r = 0; r < P && rc == 0; r++) {
        dpv_state d = {s, r, {r, 2 * P - 1 - r}, {0, 0}, {0, 0}, ids, NULL, NULL, 0, 0};
        d.wq_stage = malloc(sizeof(int32_t) * (size_t)(2 * m + 1));
        d.wq_mb = malloc(sizeof(int32_t) * (size_t)(2 * m + 1));
        if (!d.wq_stage || !d.wq_mb) rc = -1;
        /* 1: chunk-0 forwards; 2: F0 F1 pairs */
        for (int32_t i = 0; rc == 0 && i < 2 * (P - r - 1); i++) rc = dpv_fwd(&d, 0);
        for (int32_t i = 0; rc == 0 && i < r + 1; i++) {
            rc = dpv_fwd(&d, 0);
            if (rc == 0) rc = dpv_fwd(&d, 1);
        }
        /* 3: I1 W F1 (zero bubble) */
        for (int32_t i = 0; rc == 0 && i < P - r - 1; i++) {
            rc = dpv_bwd(&d, 1, 1);
            if (rc == 0) rc = dpv_weight(&d);
            if (rc == 0) rc = dpv_fwd(&d, 1);
        }
        /* 4: main loop, F0+B1 and F1+B0 overlapped (the last rank's first
         * pair runs unoverlapped to shorten the bubble) */
        for (int32_t i = 0; rc == 0 && i < m - 2 * P + r + 1; i++) {
            if (i == 0 && r == P - 1) {
                rc = dpv_fwd(&d, 0);
                if (rc == 0) rc = dpv_bwd(&d, 1, 0);
            } else {
                rc = dpv_overlap(&d, 0, 1);
            }
            if (rc == 0) rc = dpv_overlap(&d, 1, 0);
        }
        /* 5: B1, F1+B0 */
        for (int32_t i = 0; rc == 0 && i < P - r - 1; i++) {
            rc = dpv_bwd(&d, 1, 0);
            if (rc == 0) rc = dpv_overlap(&d, 1, 0);
        }
        /* 6: B1 B0, switching to split backwards halfway */
        int zb = 0;
        int32_t n6 = r + 1;
        for (int32_t i = 0; rc == 0 && i < n6; i++) {
            if (i == n6 / 2 && r % 2 == 1) zb = 1;
            rc = dpv_bwd(&d, 1, zb);
            if (i == n6 / 2 && r % 2 == 0) zb = 1;
            if (rc == 0) rc = dpv_bwd(&d, 0, zb);
        }
        /* 7: W, B0; 8: the remaining W */
        for (int32_t i = 0; rc == 0 && i < P - r - 1; i++) {
            rc = dpv_weight(&d);
            if (rc == 0) rc = dpv_bwd(&d, 0, zb);
        }
        for (int32_t i = 0; rc == 0 && i < r + 1; i++) rc = dpv_weight(&d);
        ids = d.ids;
        free(d.wq_stage);
        free(d.wq_mb);
    }
    return rc;
}

/* ---- the table ---------------------------------------------------------- */

typedef struct generator {
    const char *name;
    int32_t default_v;
    int (*check)(const ppv_gen_params *p, char *err, size_t n);
    int (*build)(ppv_schedule *s, const ppv_gen_params *p);
} generator;

static const generator generators[] = {
    {"gpipe", 1, gpipe_check, gpipe_build},
    {"1f1b", 1, one_f_one_b_check, one_f_one_b_build},
    {"interleaved-1f1b", 2, interleaved_check, interleaved_build},
    {"zb-h1", 1, ppv_gen_zb_check, ppv_gen_zb_h1_build},
    {"zb-h2", 1, ppv_gen_zb_check, ppv_gen_zb_h2_build},
    {"zbv", 2, v_check, zbv_build},
    {"v-half", 2, v_check, ppv_gen_v_half_build},
    {"v-min", 2, v_check, ppv_gen_v_min_build},
    {"dualpipev", 2, dualpipev_check, dualpipev_build},
    /* PyTorch's schedule classes, cell for cell (gen_pytorch.c) */
    {"pytorch-gpipe", 1, ppv_gen_pt_single_check, ppv_gen_pt_gpipe_build},
    {"pytorch-1f1b", 1, ppv_gen_pt_1f1b_check, ppv_gen_pt_1f1b_build},
    {"pytorch-looped-bfs", 2, ppv_gen_pt_any_check, ppv_gen_pt_looped_bfs_build},
    {"pytorch-interleaved-1f1b", 2, ppv_gen_pt_interleaved_check,
     ppv_gen_pt_interleaved_1f1b_build},
    {"pytorch-interleaved-zb", 2, ppv_gen_pt_interleaved_check, ppv_gen_pt_interleaved_zb_build},
    {"pytorch-zbv", 2, v_check, zbv_build},
    {"pytorch-dualpipev", 2, dualpipev_check, dualpipev_build},
};

const char *const *ppv_generator_names(void) {
    static const char *names[sizeof generators / sizeof generators[0] + 1];
    for (size_t i = 0; i < sizeof generators / sizeof generators[0]; i++)
        names[i] = generators[i].name;
    return names;
}

int ppv_generate(const char *kind, const ppv_gen_params *in, ppv_schedule **out, char *err,
                 size_t errlen) {
    *out = NULL;
    const generator *g = NULL;
    for (size_t i = 0; i < sizeof generators / sizeof generators[0]; i++)
        if (strcmp(generators[i].name, kind) == 0) g = &generators[i];
    if (!g) {
        char list[512] = "";
        for (size_t i = 0; i < sizeof generators / sizeof generators[0]; i++)
            snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? " " : "",
                     generators[i].name);
        return ppv_errf(err, errlen, "unknown schedule kind '%s' (%s)", kind, list);
    }
    ppv_gen_params p = *in;
    if (p.stages_per_rank == 0) p.stages_per_rank = g->default_v;
    if (p.ranks < 1 || p.ranks > MAX_GEN_RANKS)
        return ppv_errf(err, errlen, "%s: ranks must be in 1..%d, not %d", kind, MAX_GEN_RANKS,
                        p.ranks);
    if (p.microbatches < 1 || p.microbatches > MAX_GEN_MB)
        return ppv_errf(err, errlen, "%s: microbatches must be in 1..%d, not %d", kind,
                        MAX_GEN_MB, p.microbatches);
    if (p.stages_per_rank < 1 || p.stages_per_rank > 64)
        return ppv_errf(err, errlen, "%s: stages per rank must be in 1..64, not %d", kind,
                        p.stages_per_rank);
    char why[256];
    if (g->check(&p, why, sizeof why) < 0) return ppv_errf(err, errlen, "%s", why);
    ppv_schedule *s = ppv_schedule_new(p.ranks);
    if (!s) return ppv_errf(err, errlen, "out of memory");
    snprintf(s->name, sizeof s->name, "%s-p%d-m%d-v%d", kind, p.ranks, p.microbatches,
             p.stages_per_rank);
    s->dialect = PPV_DIALECT_CURRENT;
    s->nmb = p.microbatches;
    if (g->build(s, &p) < 0) {
        ppv_schedule_free(s);
        return ppv_errf(err, errlen, "%s: out of memory or generator stalled", kind);
    }
    if (ppv_schedule_finish(s, err, errlen) < 0) {
        ppv_schedule_free(s);
        return -1;
    }
    *out = s;
    return 0;
}
