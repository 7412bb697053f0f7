/* check_internal.h - the check room's helpers shared by the lowering
 * pass (lower.c) and the verifier (check.c); private to the room. */
#ifndef PPV_CHECK_INTERNAL_H
#define PPV_CHECK_INTERNAL_H

#include "../engine_internal.h"
#include "ppv_check.h"

/* ppv_schedule_lower without the option checks. On a dependency cycle
 * returns 1 and, when stuck_pc is not NULL, leaves in stuck_pc[r] the index
 * each rank could not get past. */
int ppv_lower_internal(const ppv_schedule *s, const ppv_costs *costs, int64_t msg_bytes,
                       ppv_schedule **out, int32_t *stuck_pc, char *err, size_t errlen);

/* Numbers each rank's cells in order from 0 (an overlapped cell's
 * sub-actions share one): a new program's time steps. */
void ppv_number_steps(ppv_schedule *s);

/* Index just past the overlapped cell (or the single action) starting at i. */
int32_t ppv_run_end(const ppv_program *p, int32_t i);

/* Stage whose output a consumes (*fwd = 1: that stage's forward, 0: its
 * input gradient), or -1 when a consumes no other stage's output. */
int32_t ppv_input_stage(const ppv_schedule *s, const ppv_action *a, int *fwd);

/* Cost of an action's compute under the costs (0 for non-compute). */
double ppv_action_cost(const ppv_action *a, const ppv_costs *c);

/* Which of the costs a kind's compute takes: 0 F (F, R, GEN), 1 B, 2 I
 * (B - W), 3 W; -1 none. ppv_class_cost gives the time of a class. */
static inline int ppv_cost_class(int kind) {
    switch (kind) {
    case PPV_ACT_F:
    case PPV_ACT_R:
    case PPV_ACT_GEN: return 0;
    case PPV_ACT_B: return 1;
    case PPV_ACT_I: return 2;
    case PPV_ACT_W: return 3;
    default: return -1;
    }
}

static inline double ppv_class_cost(int cls, const ppv_costs *c) {
    return cls == 0 ? c->f : cls == 1 ? c->b : cls == 2 ? c->b - c->w : cls == 3 ? c->w : 0.0;
}

/* PyTorch's UNSHARD/RESHARD and REDUCE_GRAD passes (lower_pytorch.c) on a
 * compute-only schedule: *out the compute order with them, or NULL when s
 * holds its own already. 0, or -1 with the reason. */
int ppv_lower_fsdp_ops(const ppv_schedule *s, ppv_schedule **out, char *err, size_t errlen);

#endif
