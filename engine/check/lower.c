/* lower.c - ppv's send/recv lowering of a compute-only schedule.
 *
 * A dependency-driven time simulation (eager messages, latency C) gives
 * every compute its start and end. Events are then ordered globally by
 * time: a message is one event at its producer's end, placed before any
 * compute that starts at that moment. Each rank's new program is that
 * global order projected onto the rank, the send right after its producer
 * and the receive where the message lands. Because send and receive of
 * every message sit at the same place of one global order, executing that
 * order is a complete run even when every send waits for its receive
 * (rendezvous), hence under eager and eager:BYTES too. PyTorch's pass puts
 * receives in place the same way; ppv also keeps the global order through
 * ties, which is what rules out the crossed sends of pytorch#172668.
 */
#include <stdlib.h>
#include <string.h>

#include "check_internal.h"

double ppv_action_cost(const ppv_action *a, const ppv_costs *c) {
    return ppv_class_cost(ppv_cost_class(a->kind), c);
}

/* Index just past the overlap run (or single action) starting at i. */
int32_t ppv_run_end(const ppv_program *p, int32_t i) {
    int32_t j = i + 1;
    if (p->acts[i].overlap)
        while (j < p->n && p->acts[j].overlap == p->acts[i].overlap) j++;
    return j;
}

void ppv_number_steps(ppv_schedule *s) {
    for (int32_t r = 0; r < s->nranks; r++) {
        ppv_program *p = &s->prog[r];
        for (int32_t i = 0, step = 0; i < p->n; step++) {
            int32_t j = ppv_run_end(p, i);
            for (; i < j; i++) p->acts[i].step = step;
        }
    }
}

/* Rank that produces the input a waits for across ranks or locally, and
 * the (stage, fwd) of that input; -1 when a needs nothing produced
 * elsewhere in the pipeline. */
int32_t ppv_input_stage(const ppv_schedule *s, const ppv_action *a, int *fwd) {
    if (a->stage < 0) return -1;
    if (a->kind == PPV_ACT_F && a->stage > 0) {
        *fwd = 1;
        return a->stage - 1;
    }
    if ((a->kind == PPV_ACT_I || a->kind == PPV_ACT_B) && a->stage < s->nstages - 1) {
        *fwd = 0;
        return a->stage + 1;
    }
    return -1;
}

typedef struct event {
    double time;
    int32_t type; /* 0 message, 1 compute */
    int32_t rank, idx;
} event;

static int event_cmp(const void *x, const void *y) {
    const event *a = x, *b = y;
    if (a->time != b->time) return a->time < b->time ? -1 : 1;
    if (a->type != b->type) return a->type - b->type;
    if (a->rank != b->rank) return a->rank - b->rank;
    return a->idx - b->idx;
}

int ppv_lower_internal(const ppv_schedule *s, const ppv_costs *costs, int64_t msg_bytes,
                       ppv_schedule **out, int32_t *stuck_pc, char *err, size_t errlen) {
    *out = NULL;
    int32_t P = s->nranks, S = s->nstages, m = s->nmb;
    size_t sm = (size_t)S * (size_t)m;
    int64_t total = ppv_schedule_size(s);
    double *fdone = malloc((sm ? sm : 1) * sizeof *fdone);
    double *bdone = malloc((sm ? sm : 1) * sizeof *bdone);
    double *start = malloc((size_t)(total ? total : 1) * sizeof *start);
    double *end = malloc((size_t)(total ? total : 1) * sizeof *end);
    int64_t *off = malloc((size_t)(P + 1) * sizeof *off);
    int32_t *pc = calloc((size_t)P, sizeof *pc);
    double *free_at = calloc((size_t)P, sizeof *free_at);
    int32_t *queue = malloc((size_t)(P ? P : 1) * sizeof *queue);
    uint8_t *queued = calloc((size_t)(P ? P : 1), 1);
    event *ev = NULL;
    ppv_schedule *o = NULL;
    int rc = -1;
    if (!fdone || !bdone || !start || !end || !off || !pc || !free_at || !queue || !queued) {
        ppv_errf(err, errlen, "out of memory");
        goto done;
    }
    for (size_t i = 0; i < sm; i++) fdone[i] = bdone[i] = -1.0;
    off[0] = 0;
    for (int32_t r = 0; r < P; r++) off[r + 1] = off[r] + s->prog[r].n;

    /* 1. dependency-driven simulation; a ring of ranks to advance */
    int32_t qh = 0, qn = P;
    for (int32_t r = 0; r < P; r++) queue[r] = r, queued[r] = 1;
    while (qn > 0) {
        int32_t r = queue[qh];
        qh = (qh + 1) % P;
        qn--;
        queued[r] = 0;
        const ppv_program *p = &s->prog[r];
        while (pc[r] < p->n) {
            int32_t i = pc[r], j = ppv_run_end(p, i);
            double t = free_at[r], cost = 0.0;
            int ready = 1;
            for (int32_t k = i; k < j && ready; k++) {
                const ppv_action *a = &p->acts[k];
                int fwd;
                int32_t in = ppv_input_stage(s, a, &fwd);
                cost += ppv_action_cost(a, costs);
                if (in < 0 || a->mb < 0 || a->mb >= m) continue;
                double d = (fwd ? fdone : bdone)[(size_t)in * m + a->mb];
                if (d < 0) {
                    ready = 0;
                    break;
                }
                if (s->stage_rank[in] != r) d += costs->comm;
                if (d > t) t = d;
            }
            if (!ready) break;
            for (int32_t k = i; k < j; k++) {
                const ppv_action *a = &p->acts[k];
                start[off[r] + k] = t;
                end[off[r] + k] = t + cost;
                if (a->stage < 0 || a->mb < 0 || a->mb >= m) continue;
                int32_t next = -1;
                if (a->kind == PPV_ACT_F) {
                    fdone[(size_t)a->stage * m + a->mb] = t + cost;
                    next = a->stage + 1;
                } else if (a->kind == PPV_ACT_I || a->kind == PPV_ACT_B) {
                    bdone[(size_t)a->stage * m + a->mb] = t + cost;
                    next = a->stage - 1;
                }
                if (next >= 0 && next < S) {
                    int32_t w = s->stage_rank[next];
                    if (!queued[w] && w != r) {
                        queue[(qh + qn) % P] = w;
                        qn++;
                        queued[w] = 1;
                    }
                }
            }
            free_at[r] = t + cost;
            pc[r] = j;
        }
    }
    int stuck = 0;
    for (int32_t r = 0; r < P; r++) {
        if (stuck_pc) stuck_pc[r] = pc[r];
        if (pc[r] < s->prog[r].n) stuck = 1;
    }
    if (stuck) {
        rc = 1;
        goto done;
    }

    /* 2. one global order of computes and messages */
    int64_t nev = 0;
    ev = malloc((size_t)(2 * total + 1) * sizeof *ev);
    if (!ev) {
        ppv_errf(err, errlen, "out of memory");
        goto done;
    }
    for (int32_t r = 0; r < P; r++) {
        const ppv_program *p = &s->prog[r];
        for (int32_t i = 0; i < p->n; i++) {
            const ppv_action *a = &p->acts[i];
            ev[nev++] = (event){start[off[r] + i], 1, r, i};
            int32_t to = -1;
            if (a->kind == PPV_ACT_F && a->stage + 1 < S) to = a->stage + 1;
            if ((a->kind == PPV_ACT_I || a->kind == PPV_ACT_B) && a->stage > 0) to = a->stage - 1;
            if (to >= 0 && s->stage_rank[to] != r) ev[nev++] = (event){end[off[r] + i], 0, r, i};
        }
    }
    qsort(ev, (size_t)nev, sizeof *ev, event_cmp);

    o = ppv_schedule_new(P);
    if (!o) {
        ppv_errf(err, errlen, "out of memory");
        goto done;
    }
    memcpy(o->name, s->name, sizeof o->name);
    o->dialect = s->dialect;
    o->nmb = s->nmb;
    for (int64_t e = 0; e < nev; e++) {
        const ppv_action *a = &s->prog[ev[e].rank].acts[ev[e].idx];
        int ok;
        if (ev[e].type == 1) {
            ppv_action c = *a;
            c.step = -1;
            ok = ppv_schedule_append(o, ev[e].rank, &c) == 0;
        } else {
            int fwd = a->kind == PPV_ACT_F;
            int32_t to = fwd ? a->stage + 1 : a->stage - 1;
            ppv_action snd = ppv_action_make(fwd ? PPV_ACT_SEND_F : PPV_ACT_SEND_B, a->stage, a->mb);
            ppv_action rcv = ppv_action_make(fwd ? PPV_ACT_RECV_F : PPV_ACT_RECV_B, to, a->mb);
            snd.bytes = rcv.bytes = msg_bytes;
            ok = ppv_schedule_append(o, ev[e].rank, &snd) == 0 &&
                 ppv_schedule_append(o, s->stage_rank[to], &rcv) == 0;
        }
        if (!ok) {
            ppv_errf(err, errlen, "out of memory");
            goto done;
        }
    }
    ppv_number_steps(o);
    if (ppv_schedule_finish(o, err, errlen) < 0) goto done;
    *out = o;
    o = NULL;
    rc = 0;
done:
    ppv_schedule_free(o);
    free(fdone);
    free(bdone);
    free(start);
    free(end);
    free(off);
    free(pc);
    free(free_at);
    free(queue);
    free(queued);
    free(ev);
    return rc;
}
