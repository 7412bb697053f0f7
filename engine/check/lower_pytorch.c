/* lower_pytorch.c - PyTorch's own lowering of a compute-only schedule
 * (torch.distributed.pipelining's _prepare_schedule_with_comms), cell for
 * cell, so that a pytorch-* kind written with --comms is the file PyTorch
 * would run; and ppv_schedule_lower, ppv's own lowering (lower.c) of the
 * compute order with PyTorch's passes 1 and 2 added, so that every file
 * ppv lowers runs in PyTorch's runtime with the right gradients.
 *
 * Three passes, as PyTorch makes them:
 *  1. UNSHARD/RESHARD: walking each rank's actions, the next three
 *     distinct stages it computes are kept unsharded; a stage that drops
 *     out of them is resharded first (lowest stage first), a stage that
 *     comes in is unsharded (in the order it comes), and what is still
 *     unsharded at the end is resharded.
 *  2. REDUCE_GRAD right after the action that completes a stage's m-th
 *     B or W (an overlapped cell's sub-actions counted in order).
 *  3. Sends and receives in rounds: each round, rank 0 first, every rank
 *     takes its next action if its input is there (a receive already
 *     posted on this rank, or the producing action run on this rank);
 *     the action's send follows it at once and the matching receive is
 *     appended to the consumer's rank there and then.
 * A schedule whose compute order already holds REDUCE_GRAD, UNSHARD or
 * RESHARD (PyTorch's single-stage classes write their own) gets pass 3
 * alone.
 */
#include <stdlib.h>
#include <string.h>

#include "check_internal.h"

/* Stages PyTorch keeps unsharded at once (its max_active_stages). */
enum { ACTIVE_STAGES = 3 };

typedef struct lowering {
    const ppv_schedule *s;
    int32_t S, m;
    uint8_t *recv_f, *done_f, *recv_b, *done_bi; /* [S * m]: this stage's rank has it */
} lowering;

static size_t at(const lowering *L, int32_t stage, int32_t mb) {
    return (size_t)stage * (size_t)L->m + (size_t)mb;
}

static int holds_own_fsdp(const ppv_schedule *s) {
    for (int32_t r = 0; r < s->nranks; r++)
        for (int32_t i = 0; i < s->prog[r].n; i++) {
            int k = s->prog[r].acts[i].kind;
            if (k == PPV_ACT_REDUCE_GRAD || k == PPV_ACT_UNSHARD || k == PPV_ACT_RESHARD) return 1;
        }
    return 0;
}

/* Appends a copy of a to rank r's program; 0 or -1. */
static int put(ppv_schedule *o, int32_t r, ppv_action a) {
    a.step = -1;
    return ppv_schedule_append(o, r, &a);
}

static int put_stage_op(ppv_schedule *o, int32_t r, ppv_action_kind k, int32_t stage) {
    ppv_action a = ppv_action_make(k, stage, -1);
    return put(o, r, a);
}

/* Passes 1 and 2 on rank r's program p into o's rank r. */
static int add_fsdp(const lowering *L, const ppv_program *p, int32_t r, ppv_schedule *o) {
    int32_t S = L->S, m = L->m;
    size_t ns = (size_t)(S > 0 ? S : 1), na = (size_t)(p->n > 0 ? p->n : 1);
    int32_t *next = malloc(ns * sizeof *next); /* next index computing the stage */
    int32_t *nextn = malloc(na * ACTIVE_STAGES * sizeof *nextn);
    uint8_t *active = calloc(ns, 1);
    int32_t *count = calloc(ns, sizeof *count); /* B and W so far */
    uint8_t *reduced = calloc(ns, 1);           /* its REDUCE_GRAD written */
    int rc = -1;
    if (!next || !nextn || !active || !count || !reduced) goto done;
    /* for every action i, the next ACTIVE_STAGES distinct stages from i in
     * order of first use (every sub-action of a cell counts) */
    for (int32_t k = 0; k < S; k++) next[k] = -1;
    for (int32_t i = p->n - 1; i >= 0; i--) {
        int32_t st = p->acts[i].stage;
        if (st >= 0 && st < S) next[st] = i;
        int32_t *row = &nextn[(size_t)i * ACTIVE_STAGES];
        for (int32_t j = 0; j < ACTIVE_STAGES; j++) row[j] = -1;
        for (int32_t k = 0; k < S; k++) { /* insertion by next use */
            if (next[k] < 0) continue;
            for (int32_t j = 0; j < ACTIVE_STAGES; j++) {
                if (row[j] >= 0 && next[row[j]] <= next[k]) continue;
                for (int32_t t = ACTIVE_STAGES - 1; t > j; t--) row[t] = row[t - 1];
                row[j] = k;
                break;
            }
        }
    }
    for (int32_t i = 0; i < p->n;) {
        int32_t end = ppv_run_end(p, i);
        const int32_t *row = &nextn[(size_t)i * ACTIVE_STAGES];
        for (int32_t k = 0; k < S; k++) {
            if (!active[k]) continue;
            int keep = 0;
            for (int32_t j = 0; j < ACTIVE_STAGES; j++) keep |= row[j] == k;
            if (keep) continue;
            active[k] = 0;
            if (put_stage_op(o, r, PPV_ACT_RESHARD, k) < 0) goto done;
        }
        for (int32_t j = 0; j < ACTIVE_STAGES && row[j] >= 0; j++) {
            if (active[row[j]]) continue;
            active[row[j]] = 1;
            if (put_stage_op(o, r, PPV_ACT_UNSHARD, row[j]) < 0) goto done;
        }
        for (int32_t q = i; q < end; q++) {
            const ppv_action *a = &p->acts[q];
            ppv_action c = *a;
            if (ppv_schedule_append(o, r, &c) < 0) goto done;
            if ((a->kind == PPV_ACT_B || a->kind == PPV_ACT_W) && a->stage >= 0 && a->stage < S)
                count[a->stage]++;
        }
        /* after the cell, the REDUCE_GRAD of each stage whose m-th
         * backward it held, in the order of its sub-actions */
        for (int32_t q = i; q < end; q++) {
            const ppv_action *a = &p->acts[q];
            if ((a->kind != PPV_ACT_B && a->kind != PPV_ACT_W) || a->stage < 0 || a->stage >= S ||
                count[a->stage] != m || reduced[a->stage])
                continue;
            reduced[a->stage] = 1;
            if (put_stage_op(o, r, PPV_ACT_REDUCE_GRAD, a->stage) < 0) goto done;
        }
        i = end;
    }
    for (int32_t k = 0; k < S; k++)
        if (active[k] && put_stage_op(o, r, PPV_ACT_RESHARD, k) < 0) goto done;
    rc = 0;
done:
    free(next);
    free(nextn);
    free(active);
    free(count);
    free(reduced);
    return rc;
}

/* Whether a's input is on its rank: PyTorch's _ready_to_schedule. */
static int ready(const lowering *L, const ppv_action *a) {
    const int32_t *sr = L->s->stage_rank;
    if (a->mb < 0 || a->mb >= L->m || a->stage < 0 || a->stage >= L->S) return 1;
    if (a->kind == PPV_ACT_F && a->stage > 0)
        return L->recv_f[at(L, a->stage, a->mb)] ||
               (sr[a->stage - 1] == sr[a->stage] && L->done_f[at(L, a->stage - 1, a->mb)]);
    if ((a->kind == PPV_ACT_I || a->kind == PPV_ACT_B) && a->stage < L->S - 1)
        return L->recv_b[at(L, a->stage, a->mb)] ||
               (sr[a->stage + 1] == sr[a->stage] && L->done_bi[at(L, a->stage + 1, a->mb)]);
    return 1;
}

/* Whether a sends its output to another rank: PyTorch's _has_comms. */
static int sends(const lowering *L, const ppv_action *a) {
    const int32_t *sr = L->s->stage_rank;
    if (a->mb < 0 || a->stage < 0 || a->stage >= L->S) return 0;
    if (a->kind == PPV_ACT_F)
        return a->stage < L->S - 1 && sr[a->stage + 1] != sr[a->stage];
    if (a->kind == PPV_ACT_I || a->kind == PPV_ACT_B)
        return a->stage > 0 && sr[a->stage - 1] != sr[a->stage];
    return 0;
}

static void mark_done(const lowering *L, const ppv_action *a) {
    if (a->mb < 0 || a->mb >= L->m || a->stage < 0 || a->stage >= L->S) return;
    if (a->kind == PPV_ACT_F) L->done_f[at(L, a->stage, a->mb)] = 1;
    if (a->kind == PPV_ACT_I || a->kind == PPV_ACT_B) L->done_bi[at(L, a->stage, a->mb)] = 1;
}

int ppv_lower_fsdp_ops(const ppv_schedule *s, ppv_schedule **out, char *err, size_t errlen) {
    *out = NULL;
    if (holds_own_fsdp(s)) return 0;
    lowering L = {s, s->nstages, s->nmb, NULL, NULL, NULL, NULL};
    ppv_schedule *pre = ppv_schedule_new(s->nranks);
    if (!pre) return ppv_errf(err, errlen, "out of memory");
    memcpy(pre->name, s->name, sizeof pre->name);
    pre->dialect = s->dialect;
    pre->nmb = s->nmb;
    for (int32_t r = 0; r < s->nranks; r++)
        if (add_fsdp(&L, &s->prog[r], r, pre) < 0) {
            ppv_schedule_free(pre);
            return ppv_errf(err, errlen, "out of memory");
        }
    ppv_number_steps(pre);
    if (ppv_schedule_finish(pre, err, errlen) < 0) {
        ppv_schedule_free(pre);
        return -1;
    }
    *out = pre;
    return 0;
}

int ppv_schedule_lower_pytorch(const ppv_schedule *s, int64_t msg_bytes, ppv_schedule **out,
                               char *err, size_t errlen) {
    *out = NULL;
    if (s->form != PPV_FORM_COMPUTE_ONLY)
        return ppv_errf(err, errlen, "%s already holds communication actions", s->name);
    int32_t P = s->nranks;
    lowering L = {s, s->nstages, s->nmb, NULL, NULL, NULL, NULL};
    size_t cells = (size_t)(L.S > 0 ? L.S : 1) * (size_t)(L.m > 0 ? L.m : 1);
    ppv_schedule *pre = NULL, *o = NULL;
    int32_t *pc = calloc((size_t)P, sizeof *pc);
    L.recv_f = calloc(cells, 1);
    L.done_f = calloc(cells, 1);
    L.recv_b = calloc(cells, 1);
    L.done_bi = calloc(cells, 1);
    int rc = -1;
    if (!pc || !L.recv_f || !L.done_f || !L.recv_b || !L.done_bi) goto oom;
    if (ppv_lower_fsdp_ops(s, &pre, err, errlen) < 0) goto done;
    const ppv_schedule *src = pre ? pre : s;
    o = ppv_schedule_new(P);
    if (!o) goto oom;
    memcpy(o->name, s->name, sizeof o->name);
    o->dialect = s->dialect;
    o->nmb = s->nmb;
    int32_t left = 0;
    for (int32_t r = 0; r < P; r++) left += src->prog[r].n > 0;
    while (left) {
        int progress = 0;
        for (int32_t r = 0; r < P; r++) {
            const ppv_program *p = &src->prog[r];
            if (pc[r] >= p->n) continue;
            int32_t end = ppv_run_end(p, pc[r]);
            int ok = 1;
            for (int32_t q = pc[r]; q < end; q++) ok &= ready(&L, &p->acts[q]);
            if (!ok) continue;
            for (int32_t q = pc[r]; q < end; q++) {
                ppv_action c = p->acts[q];
                if (ppv_schedule_append(o, r, &c) < 0) goto oom;
                mark_done(&L, &p->acts[q]);
            }
            for (int32_t q = pc[r]; q < end; q++) {
                const ppv_action *a = &p->acts[q];
                if (!sends(&L, a)) continue;
                int fwd = a->kind == PPV_ACT_F;
                int32_t to = fwd ? a->stage + 1 : a->stage - 1;
                ppv_action snd = ppv_action_make(fwd ? PPV_ACT_SEND_F : PPV_ACT_SEND_B, a->stage, a->mb);
                ppv_action rcv = ppv_action_make(fwd ? PPV_ACT_RECV_F : PPV_ACT_RECV_B, to, a->mb);
                snd.bytes = rcv.bytes = msg_bytes;
                if (put(o, r, snd) < 0 || put(o, s->stage_rank[to], rcv) < 0) goto oom;
                (fwd ? L.recv_f : L.recv_b)[at(&L, to, a->mb)] = 1;
            }
            pc[r] = end;
            left -= pc[r] >= p->n;
            progress = 1;
        }
        if (left && !progress) {
            char buf[64];
            int32_t r = 0;
            while (pc[r] >= src->prog[r].n) r++;
            ppv_action_format(src, &src->prog[r].acts[pc[r]], buf, sizeof buf);
            ppv_errf(err, errlen,
                     "%s: PyTorch's lowering cannot go on: no rank's next action has its input "
                     "(rank %d waits at %s)",
                     s->name, r, buf);
            rc = 1;
            goto done;
        }
    }
    ppv_number_steps(o);
    if (ppv_schedule_finish(o, err, errlen) < 0) goto done;
    *out = o;
    o = NULL;
    rc = 0;
    goto done;
oom:
    ppv_errf(err, errlen, "out of memory");
done:
    ppv_schedule_free(pre);
    ppv_schedule_free(o);
    free(pc);
    free(L.recv_f);
    free(L.done_f);
    free(L.recv_b);
    free(L.done_bi);
    return rc;
}

/* ppv's lowering (lower.c) of the compute order with PyTorch's passes 1
 * and 2 added: a file PyTorch's runtime runs as its own. */
int ppv_schedule_lower(const ppv_schedule *s, const ppv_costs *costs, int64_t msg_bytes,
                       ppv_schedule **out, char *err, size_t errlen) {
    if (s->form != PPV_FORM_COMPUTE_ONLY)
        return ppv_errf(err, errlen, "%s already holds communication actions", s->name);
    if (!(costs->f > 0) || !(costs->b - costs->w > 0) || !(costs->w >= 0) || !(costs->comm >= 0))
        return ppv_errf(err, errlen, "costs need F > 0, B > W >= 0 and C >= 0");
    /* what PyTorch's runtime needs to run the file as its own: its gradients
     * scaled at REDUCE_GRAD, FSDP stages unsharded; zero-cost actions, so
     * every other action keeps its place */
    ppv_schedule *fsdp = NULL;
    if (ppv_lower_fsdp_ops(s, &fsdp, err, errlen) < 0) return -1;
    int rc = ppv_lower_internal(fsdp ? fsdp : s, costs, msg_bytes, out, NULL, err, errlen);
    ppv_schedule_free(fsdp);
    return rc;
}
