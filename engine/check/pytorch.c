/* pytorch.c - what PyTorch's runtime (torch.distributed.pipelining's
 * _PipelineScheduleRuntime) would do wrong with a schedule file that ppv's
 * own check accepts: `ppv check --target pytorch`.
 *
 * PyTorch runs a compute_comms file as written. It scales a stage's
 * gradients by 1/m (and, with data parallelism, reduces them) only at the
 * stage's REDUCE_GRAD, which its own lowering puts after the stage's m-th
 * B or W: a file without one trains silently with gradients m times too
 * large. A compute_only file it lowers itself, REDUCE_GRAD included, and
 * it refuses one that already holds an UNSHARD, RESHARD or REDUCE_GRAD
 * (its _load_csv(format="compute_only") takes F, I, B, W and overlapped
 * cells only), although its single-stage classes (GPipe, 1F1B) write
 * their REDUCE_GRAD into the compute-only order they dump. ppv's
 * extensions (explicit peers, groups, collectives, recompute, generator
 * calls) are no actions of PyTorch's runtime at all. A REDUCE_GRAD before
 * the stage's last backward is the checker's own error (check.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_internal.h"

typedef struct found {
    ppv_problem *v;
    int32_t n, cap;
} found;

/* Adds a problem at rank's action i (-1: none), message then the place. */
static int add(found *f, const ppv_schedule *s, int32_t rank, int32_t i, const char *msg) {
    if (f->n == f->cap) {
        int32_t cap = f->cap ? 2 * f->cap : 8;
        ppv_problem *v = realloc(f->v, (size_t)cap * sizeof *v);
        if (!v) return -1;
        f->v = v;
        f->cap = cap;
    }
    ppv_problem *p = &f->v[f->n++];
    memset(p, 0, sizeof *p);
    p->rank = rank;
    p->index = i;
    int32_t line, col;
    char place[300] = "";
    if (i >= 0) {
        ppv_action_format(s, &s->prog[rank].acts[i], p->action, sizeof p->action);
        if (ppv_schedule_where(s, rank, i, &line, &col) == 0)
            snprintf(place, sizeof place, " (%s:%d:%d)", s->name, (int)line, (int)col);
    }
    snprintf(p->message, sizeof p->message, "%s%s", msg, place);
    return 0;
}

int ppv_check_pytorch(const ppv_schedule *s, ppv_problem **out, int32_t *nout, char *err,
                      size_t errlen) {
    *out = NULL;
    *nout = 0;
    found f = {NULL, 0, 0};
    int32_t S = s->nstages;
    int32_t *last = malloc((size_t)(S ? S : 1) * sizeof *last);    /* last B or W */
    int32_t *reduce = malloc((size_t)(S ? S : 1) * sizeof *reduce); /* its REDUCE_GRAD */
    uint8_t told[256] = {0}; /* by kind: named already */
    char msg[320];
    if (!last || !reduce) goto oom;
    for (int32_t k = 0; k < S; k++) last[k] = reduce[k] = -1;
    for (int32_t r = 0; r < s->nranks; r++)
        for (int32_t i = 0; i < s->prog[r].n; i++) {
            const ppv_action *a = &s->prog[r].acts[i];
            if (!(ppv_action_flags(a->kind) & PPV_AF_TORCH)) {
                if (told[a->kind]) continue; /* the first of each kind names it */
                told[a->kind] = 1;
                snprintf(msg, sizeof msg,
                         "%s is ppv's extension: PyTorch's runtime has no such action (its CSV "
                         "grammar is F I B W UNSHARD RESHARD REDUCE_GRAD SEND_F RECV_F SEND_B "
                         "RECV_B, and overlapped F;B cells)",
                         ppv_action_token(a->kind));
                if (add(&f, s, r, i, msg) < 0) goto oom;
                continue;
            }
            if (s->form == PPV_FORM_COMPUTE_ONLY && !(ppv_action_flags(a->kind) & PPV_AF_COMPUTE) &&
                !told[a->kind]) {
                told[a->kind] = 1;
                snprintf(msg, sizeof msg,
                         "PyTorch's runtime refuses a compute-only file with %s (its "
                         "_load_csv(format=\"compute_only\") takes F, I, B, W and overlapped "
                         "cells only, and adds its own): drop it, or lower the file with ppv gen "
                         "--comms or ppv check --lowered-out",
                         ppv_action_token(a->kind));
                if (add(&f, s, r, i, msg) < 0) goto oom;
            }
            if (a->stage < 0 || a->stage >= S) continue;
            if (a->kind == PPV_ACT_B || a->kind == PPV_ACT_W) last[a->stage] = i;
            if (a->kind == PPV_ACT_REDUCE_GRAD && reduce[a->stage] < 0) reduce[a->stage] = i;
        }
    if (s->form == PPV_FORM_COMPUTE_COMMS)
        for (int32_t k = 0; k < S; k++) {
            if (last[k] < 0 || reduce[k] >= 0) continue;
            snprintf(msg, sizeof msg,
                     "stage %d has no REDUCE_GRAD after its last backward: PyTorch's runtime "
                     "never scales (or reduces) its gradients, which come out %d times too "
                     "large (lower with ppv gen --comms or ppv check --lowered-out)",
                     (int)k, (int)s->nmb);
            if (add(&f, s, s->stage_rank[k], last[k], msg) < 0) goto oom;
        }
    free(last);
    free(reduce);
    *out = f.v;
    *nout = f.n;
    return 0;
oom:
    free(last);
    free(reduce);
    free(f.v);
    return ppv_errf(err, errlen, "out of memory");
}

int32_t ppv_pytorch_shared_neighbours(const ppv_schedule *s) {
    for (int32_t k = 0; s->stage_rank && k + 1 < s->nstages; k++)
        if (s->stage_rank[k] == s->stage_rank[k + 1]) return k;
    return -1;
}
