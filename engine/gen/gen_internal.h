/* gen_internal.h - the generator room's builders, which the table of
 * kinds (gen.c) and the tuner (gen_auto.c) call; private to the room. */
#ifndef PPV_GEN_INTERNAL_H
#define PPV_GEN_INTERNAL_H

#include "../engine_internal.h"
#include "ppv_gen.h"

/* Appends a plain action to rank's program. Returns 0 or -1. */
static inline int ppv_gen_emit(ppv_schedule *s, int32_t rank, ppv_action_kind k, int32_t stage,
                               int32_t mb) {
    ppv_action a = ppv_action_make(k, stage, mb);
    return ppv_schedule_append(s, rank, &a);
}

int ppv_gen_zb_check(const ppv_gen_params *p, char *err, size_t n);
int ppv_gen_zb_h1_build(ppv_schedule *s, const ppv_gen_params *p);
/* The greedy list scheduler (gen_greedy.c) with v stages a rank and every
 * rank capped at cap stage activations (at least v). 0, or -1 when out of
 * memory or stalled. */
int ppv_gen_greedy_capped(ppv_schedule *s, int32_t P, int32_t m, int32_t v, int32_t cap);
/* That greedy as a finished schedule of ranks and m microbatches holding
 * at most cap_mb microbatches' activations a rank, or NULL (gen_auto.c). */
ppv_schedule *ppv_gen_capped_greedy(int32_t ranks, int32_t m, int32_t v, double cap_mb);
int ppv_gen_zb_h2_build(ppv_schedule *s, const ppv_gen_params *p);
/* The zero-bubble authors' cost-aware heuristic (gen_heuristic.c): one
 * stage a rank, F, I = b - w, W and message costs, at most cap
 * microbatches' activations a rank; the best of its eight variants. 0, or
 * -1 when out of memory or no variant fits the cap. */
int ppv_gen_zb_heuristic(ppv_schedule *s, int32_t P, int32_t m, const ppv_costs *costs,
                         int32_t cap);
/* Its ZB-V counterpart: two stages a rank in a V (rank r holds stages r
 * and 2P-1-r), per-chunk costs, at most cap chunk activations a rank (the
 * reference's default is 2P, p microbatches); the best of four variants. */
int ppv_gen_zbv_heuristic(ppv_schedule *s, int32_t P, int32_t m, const ppv_costs *costs,
                          int32_t cap);
int ppv_gen_v_half_build(ppv_schedule *s, const ppv_gen_params *p);
int ppv_gen_v_min_build(ppv_schedule *s, const ppv_gen_params *p);

/* The pytorch-* kinds (gen_pytorch.c): PyTorch's schedule classes. */
int ppv_gen_pt_single_check(const ppv_gen_params *p, char *err, size_t n);
int ppv_gen_pt_1f1b_check(const ppv_gen_params *p, char *err, size_t n);
int ppv_gen_pt_any_check(const ppv_gen_params *p, char *err, size_t n);
int ppv_gen_pt_interleaved_check(const ppv_gen_params *p, char *err, size_t n);
int ppv_gen_pt_gpipe_build(ppv_schedule *s, const ppv_gen_params *p);
int ppv_gen_pt_1f1b_build(ppv_schedule *s, const ppv_gen_params *p);
int ppv_gen_pt_looped_bfs_build(ppv_schedule *s, const ppv_gen_params *p);
int ppv_gen_pt_interleaved_1f1b_build(ppv_schedule *s, const ppv_gen_params *p);
int ppv_gen_pt_interleaved_zb_build(ppv_schedule *s, const ppv_gen_params *p);

#endif
