/* gen_heuristic.c - the zero-bubble authors' cost-aware heuristic for one
 * stage a rank (ZB-H1 and ZB-H2 under any F, I, W and message costs),
 * written from the description of `manual_order` in their reference
 * scheduler (sail-sg/zero-bubble-pipeline-parallelism, zb.py), which
 * builds the schedule it starts its search from with it.
 *
 * The schedule is built microbatch by microbatch while every stage's
 * clock (when its last action ends) and every action's end time are
 * tracked under the costs; an F allocates one activation, I none, W frees
 * it, and no stage ever holds more than the cap.
 * - Microbatch 0: every stage runs F0; then, from the last stage back,
 *   each stage counts the warm-up forwards it can run before microbatch
 *   0's backward reaches it (within the cap, and never more than the
 *   stage before it), runs them, and the backwards I0 run from the last
 *   stage to the first.
 * - Each later microbatch: a stage takes its next F unless (with
 *   prioritize_b) it is two or more forwards ahead of the next stage and
 *   that stage's next F and I would leave it idle; a stage takes an F only
 *   if every later stage does. Before an F or an I that would wait for
 *   its input, the stage fills the wait with pending W, and W also makes
 *   room under the cap.
 * - The remaining W close every stage.
 * Three switches give the eight variants the reference tries (a bubble
 * allowed before the first backward, backwards prioritised, a wait
 * shorter than the worst stage's bubble filled with W); the one with the
 * shortest stage span (first F's start to last W's end) wins, the earlier
 * variant on a tie, as in the reference.
 */
#include <stdlib.h>
#include <string.h>

#include "gen_internal.h"

enum { HF, HI, HW }; /* action types */

typedef struct heur {
    int32_t S, m;
    double cost[3], comm, cap;
    int32_t *n[3];  /* [S]: next microbatch of each type */
    int32_t *pos;   /* [S]: actions placed */
    double *clock;  /* [S]: when the stage's last action ends */
    double *bubble; /* [S]: idle time after its first F */
    double *mem;    /* [S]: activations held */
    double *end;    /* [3][S][m]: when each action ends, 0 before it is placed */
    uint8_t *order; /* [S][3m]: type of the k-th action of each stage */
    int failed;
} heur;

static double *end_of(heur *h, int type, int32_t st, int32_t mb) {
    return &h->end[((int64_t)type * h->S + st) * h->m + mb];
}

static double mem_of(int type) {
    return type == HF ? 1.0 : type == HW ? -1.0 : 0.0;
}

static double worst_bubble(const heur *h) {
    double b = 0;
    for (int32_t j = 0; j < h->S; j++)
        if (h->bubble[j] > b) b = h->bubble[j];
    return b;
}

/* Places stage j's next action of the type. */
static void place(heur *h, int32_t j, int type) {
    int32_t mb = h->n[type][j];
    double c = h->cost[type], at = h->clock[j] + c, free_run = at;
    if (type == HF && j > 0 && *end_of(h, HF, j - 1, mb) + h->comm + c > at)
        at = *end_of(h, HF, j - 1, mb) + h->comm + c;
    if (type == HI && j < h->S - 1 && *end_of(h, HI, j + 1, mb) + h->comm + c > at)
        at = *end_of(h, HI, j + 1, mb) + h->comm + c;
    if (h->n[HF][j] > 0) h->bubble[j] += at - free_run;
    h->clock[j] = at;
    *end_of(h, type, j, mb) = at;
    h->mem[j] += mem_of(type);
    h->order[(int64_t)j * 3 * h->m + h->pos[j]++] = (uint8_t)type;
    h->n[type][j]++;
}

/* Runs W on stage j until an F (or I) fits under the cap. */
static void room_for(heur *h, int32_t j, int type) {
    while (h->mem[j] + mem_of(type) > h->cap) {
        if (h->n[HW][j] >= h->n[HI][j]) {
            h->failed = 1;
            return;
        }
        place(h, j, HW);
    }
}

/* Before an action whose input arrives at `ready`, fills stage j's wait
 * with pending W: every W that ends by then, and one more unless (with
 * greedy off) the wait is within the worst stage's bubble. */
static void fill_wait(heur *h, int32_t j, double ready, int greedy) {
    while (h->n[HW][j] < h->n[HI][j] && h->clock[j] + h->cost[HW] <= ready)
        place(h, j, HW);
    if (h->n[HW][j] < h->n[HI][j] && h->clock[j] < ready) {
        if (ready - h->clock[j] <= worst_bubble(h) - h->bubble[j]) {
            if (greedy) place(h, j, HW);
        } else {
            place(h, j, HW);
        }
    }
}

/* Builds one variant into h (reset first); the stage span, or -1. */
static double build(heur *h, int bubble_first, int prio_b, int greedy) {
    int32_t S = h->S, m = h->m;
    for (int t = 0; t < 3; t++)
        memset(h->n[t], 0, (size_t)S * sizeof *h->n[t]);
    memset(h->pos, 0, (size_t)S * sizeof *h->pos);
    for (int32_t j = 0; j < S; j++)
        h->clock[j] = h->bubble[j] = h->mem[j] = 0;
    memset(h->end, 0, (size_t)3 * S * m * sizeof *h->end);
    h->failed = 0;
    int32_t *want = calloc((size_t)S, sizeof *want);
    if (!want) return -1;
    for (int32_t i = 0; i < m && !h->failed; i++) {
        memset(want, 0, (size_t)S * sizeof *want);
        if (i == 0) {
            for (int32_t j = 0; j < S; j++)
                place(h, j, HF);
            double back = 0; /* when microbatch 0's backward can start on the stage */
            for (int32_t j = S - 1; j >= 0; j--) {
                if (j == S - 1) {
                    back = *end_of(h, HF, j, 0) + h->cost[HI];
                    continue;
                }
                double mem = h->mem[j], busy = h->clock[j];
                while (h->n[HF][j] + want[j] < m && mem + 1 <= h->cap) {
                    if (bubble_first ? busy + h->cost[HF] > back + h->comm : busy >= back + h->comm)
                        break;
                    mem += 1;
                    busy += h->cost[HF];
                    want[j]++;
                }
                back = (busy > back + h->comm ? busy : back + h->comm) + h->cost[HI];
            }
            for (int32_t j = 1; j < S; j++)
                while (want[j] > 0 && want[j] >= want[j - 1] && h->n[HF][j] + want[j] < m)
                    want[j]--;
            for (int32_t j = 0; j < S; j++)
                for (int32_t k = 0; k < want[j]; k++)
                    place(h, j, HF);
            for (int32_t j = S - 1; j >= 0; j--)
                place(h, j, HI);
            continue;
        }
        for (int32_t j = 0; j < S; j++) {
            if (h->n[HF][j] >= m) continue;
            if (prio_b && j + 1 < S && h->n[HF][j] >= h->n[HF][j + 1] + 2) {
                double next = h->clock[j + 1] + h->cost[HF] + h->cost[HI] + h->comm;
                if (h->clock[j] >= next) continue;
                double wcost = 0, mem = h->mem[j] + 1;
                for (int32_t k = 0; mem > h->cap && h->n[HW][j] + k < h->n[HI][j]; k++) {
                    wcost += h->cost[HW];
                    mem -= 1;
                }
                if (h->clock[j] + h->cost[HF] + wcost <= next) {
                    want[j] = 1;
                    continue;
                }
                if (next - h->clock[j] <= worst_bubble(h) - h->bubble[j]) continue;
            }
            want[j] = 1;
        }
        for (int32_t j = S - 2; j >= 0; j--)
            if (want[j + 1] < want[j]) want[j] = want[j + 1];
        for (int32_t j = 0; j < S && !h->failed; j++) {
            if (!want[j]) continue;
            room_for(h, j, HF);
            if (j > 0 && !h->failed)
                fill_wait(h, j, *end_of(h, HF, j - 1, h->n[HF][j]) + h->comm, greedy);
            if (!h->failed) place(h, j, HF);
        }
        for (int32_t j = S - 1; j >= 0 && !h->failed; j--) {
            room_for(h, j, HI);
            if (j + 1 < S && !h->failed)
                fill_wait(h, j, *end_of(h, HI, j + 1, i) + h->comm, greedy);
            if (j == 0 && h->n[HF][j] == m)
                while (h->n[HW][j] < h->n[HI][j])
                    place(h, j, HW);
            if (!h->failed) place(h, j, HI);
        }
    }
    free(want);
    if (h->failed) return -1;
    double span = 0;
    for (int32_t j = 0; j < S; j++) {
        /* every stage ran each forward and backward (a variant that left
         * one out is no schedule: the reference would fail its own check) */
        if (h->n[HF][j] != m || h->n[HI][j] != m) return -1;
        while (h->n[HW][j] < m)
            place(h, j, HW);
        double sj = *end_of(h, HW, j, m - 1) - *end_of(h, HF, j, 0) + h->cost[HF];
        if (sj > span) span = sj;
    }
    return span;
}

int ppv_gen_zb_heuristic(ppv_schedule *s, int32_t P, int32_t m, const ppv_costs *costs,
                         int32_t cap) {
    heur h;
    memset(&h, 0, sizeof h);
    h.S = P, h.m = m, h.cap = cap, h.comm = costs->comm;
    h.cost[HF] = costs->f, h.cost[HI] = costs->b - costs->w, h.cost[HW] = costs->w;
    size_t sm = (size_t)P * (size_t)m;
    for (int t = 0; t < 3; t++)
        h.n[t] = malloc((size_t)P * sizeof *h.n[t]);
    h.pos = malloc((size_t)P * sizeof *h.pos);
    h.clock = malloc((size_t)P * sizeof *h.clock);
    h.bubble = malloc((size_t)P * sizeof *h.bubble);
    h.mem = malloc((size_t)P * sizeof *h.mem);
    h.end = malloc(3 * sm * sizeof *h.end);
    h.order = malloc(3 * sm);
    uint8_t *best = malloc(3 * sm);
    int rc = -1;
    if (!h.n[0] || !h.n[1] || !h.n[2] || !h.pos || !h.clock || !h.bubble || !h.mem || !h.end ||
        !h.order || !best || cap < 1)
        goto done;
    double best_span = -1;
    for (int a = 1; a >= 0; a--) /* the reference's order: True before False */
        for (int b = 1; b >= 0; b--)
            for (int g = 1; g >= 0; g--) {
                double span = build(&h, a, b, g);
                if (span >= 0 && (best_span < 0 || span < best_span)) {
                    best_span = span;
                    memcpy(best, h.order, 3 * sm);
                }
            }
    if (best_span < 0) goto done;
    static const ppv_action_kind kinds[3] = {PPV_ACT_F, PPV_ACT_I, PPV_ACT_W};
    for (int32_t j = 0; j < P; j++) {
        int32_t next[3] = {0, 0, 0};
        for (int64_t k = 0; k < 3 * (int64_t)m; k++) {
            int t = best[(int64_t)j * 3 * m + k];
            if (ppv_gen_emit(s, j, kinds[t], j, next[t]++) < 0) goto done;
        }
    }
    rc = 0;
done:
    for (int t = 0; t < 3; t++)
        free(h.n[t]);
    free(h.pos), free(h.clock), free(h.bubble), free(h.mem), free(h.end), free(h.order);
    free(best);
    return rc;
}

/* ---- ZB-V ---------------------------------------------------------------------------- */

/* The authors' cost-aware ZB-V heuristic (their zbv.py, `try_v_schedule`
 * and `create_schedule`), in ppv's words. Rank r holds two chunks: chunk 0
 * (stage r, forwards flowing down the ranks) and chunk 1 (stage 2p-1-r,
 * flowing back up). Inside, a backward's "lane" is the direction its
 * input flows: lane 0 is chunk 1's backward (its input comes from rank
 * r-1), lane 1 chunk 0's (from rank r+1); forwards use lane = chunk.
 * - Warm-up: every rank runs chunk 0's F0; from the last rank back, rank
 *   i runs more chunk-0 forwards on ranks 0..i while they fit before chunk
 *   1's first forward reaches it (and 2 + 2i activations fit the cap),
 *   then its chunk-1 F0; then ranks run forwards of alternating chunks
 *   until each holds as many as the rank before it.
 * - Then 2m rounds: each rank runs one backward (lane 1 when its input is
 *   there, lane 0 first otherwise) and then one forward (chunk 1 when its
 *   input is there), filling waits with pending W, and W making room
 *   under the cap.
 * - A run's worst stage bubble is offered back as the "approved" bubbles
 *   of the next run while that lowers the worst bubble; of the four
 *   (fill before B, fill before F) variants the smallest worst bubble
 *   wins, the earlier on a tie.
 */

typedef struct vh {
    int32_t S, m;
    double cost[3], comm, cap;
    int fill_f, fill_b;
    const double *approved; /* [S] or NULL */
    double max_approved;
    int32_t (*count)[4]; /* [S]: F lane 0, F lane 1, B lane 0, B lane 1 */
    double *end;         /* [3 types][2 lanes][S][m]: when each action ends, -1 */
    double *clock, *mem, *bubble;
    int32_t *wq, *wq_head, *wq_tail; /* [S][2m]: pending W as lane*m+mb */
    int32_t *sched, *nsched;         /* [S][6m]: type*2+lane, then mb, packed */
    int failed;
} vh;

static double *vend(vh *h, int type, int lane, int32_t st, int32_t mb) {
    return &h->end[(((int64_t)type * 2 + lane) * h->S + st) * h->m + mb];
}

static double vworst(const vh *h, int32_t st) {
    double b = 0;
    for (int32_t j = 0; j < h->S; j++)
        if (h->bubble[j] > b) b = h->bubble[j];
    if (st >= 0 && h->approved && h->max_approved - h->approved[st] > b)
        b = h->max_approved - h->approved[st];
    return b;
}

/* Places stage st's next action of (type, lane); W takes its lane and
 * microbatch from the stage's pending queue. */
static void vplace(vh *h, int type, int lane, int32_t st) {
    if (h->failed) return;
    int32_t mb;
    if (type == HW) {
        if (h->wq_head[st] == h->wq_tail[st]) {
            h->failed = 1;
            return;
        }
        int32_t key = h->wq[(int64_t)st * 2 * h->m + h->wq_head[st]++];
        lane = key / h->m;
        mb = key % h->m;
    } else {
        mb = h->count[st][type * 2 + lane];
        if (mb >= h->m) {
            h->failed = 1;
            return;
        }
    }
    double mem = type == HF ? 1.0 : type == HW ? -1.0 : 0.0;
    if (h->mem[st] + mem > h->cap) {
        h->failed = 1;
        return;
    }
    double at = h->clock[st] + h->cost[type], free_run = at;
    if (type != HW) {
        /* inside the rank: F lane 1 after F lane 0, B lane 0 after F lane 1,
         * B lane 1 after B lane 0, of the same microbatch */
        int order = type * 2 + lane;
        if (order > 0 && *vend(h, (order - 1) / 2, (order - 1) % 2, st, mb) < 0) {
            h->failed = 1;
            return;
        }
        int32_t from = lane == 1 ? st + 1 : st - 1;
        if (from >= 0 && from < h->S) {
            double in = *vend(h, type, lane, from, mb);
            if (in < 0) {
                h->failed = 1;
                return;
            }
            if (in + h->comm + h->cost[type] > at) at = in + h->comm + h->cost[type];
        }
    }
    if (h->count[st][0] > 0) h->bubble[st] += at - free_run;
    *vend(h, type, lane, st, mb) = at;
    h->clock[st] = at;
    h->mem[st] += mem;
    int32_t *row = &h->sched[(int64_t)st * 12 * h->m];
    row[2 * h->nsched[st]] = type * 2 + lane;
    row[2 * h->nsched[st] + 1] = mb;
    h->nsched[st]++;
    if (type == HI) h->wq[(int64_t)st * 2 * h->m + h->wq_tail[st]++] = lane * h->m + mb;
    if (type != HW) h->count[st][type * 2 + lane]++;
}

static int vpending(const vh *h, int32_t st) {
    return h->wq_head[st] < h->wq_tail[st];
}

/* Before stage st's action whose input (if it has one) ends at `in` (-1
 * while it has not run), fills the wait with W; `fill`: also one more W
 * when the wait is longer than the stage's share of the worst bubble.
 * Without an input the reference measures that wait from its last node's
 * end (a Python index of -1: the last rank's last chunk-1 W), which is -1
 * until the very end; so does this. */
static void vfill(vh *h, int32_t st, int has_input, double in, int fill) {
    if (!has_input) in = *vend(h, HW, 1, h->S - 1, h->m - 1);
    while (has_input && vpending(h, st) && in + h->comm >= h->clock[st] + h->cost[HW])
        vplace(h, HW, 0, st);
    if (vpending(h, st) && in + h->comm - h->clock[st] > vworst(h, st) - h->bubble[st] && fill)
        vplace(h, HW, 0, st);
}

/* One run; the worst stage bubble, or -1. */
static double vrun(vh *h) {
    int32_t S = h->S, m = h->m;
    memset(h->count, 0, (size_t)S * sizeof *h->count);
    for (int64_t k = 0; k < 6 * (int64_t)S * m; k++)
        h->end[k] = -1;
    for (int32_t j = 0; j < S; j++) {
        h->clock[j] = h->mem[j] = h->bubble[j] = 0;
        h->wq_head[j] = h->wq_tail[j] = h->nsched[j] = 0;
    }
    h->failed = 0;
    h->max_approved = -1;
    if (h->approved)
        for (int32_t j = 0; j < S; j++)
            if (h->approved[j] > h->max_approved) h->max_approved = h->approved[j];
    for (int32_t i = 0; i < S; i++)
        vplace(h, HF, 0, i);
    for (int32_t i = S - 1; i >= 0 && !h->failed; i--) {
        if (i == S - 1) {
            vplace(h, HF, 1, i);
            continue;
        }
        double ready = *vend(h, HF, 1, i + 1, 0) + h->comm;
        while (h->mem[i] + (2.0 + 2.0 * i) <= h->cap && h->clock[i] + h->cost[HF] <= ready &&
               h->count[i][0] < m && !h->failed)
            for (int32_t j = 0; j <= i; j++)
                vplace(h, HF, 0, j);
        vplace(h, HF, 1, i);
    }
    int lane = 0, idle = 0; /* idle: passes in a row that placed nothing */
    for (int32_t i = 1; i < S && !h->failed; i++)
        while (!h->failed &&
               (h->count[i][0] + h->count[i][1] < h->count[i - 1][0] + h->count[i - 1][1] ||
                (h->count[i][1] <= h->count[i - 1][1] && h->count[i - 1][1] < m))) {
            int placed = 0;
            for (int32_t j = S - 1; j >= i; j--)
                if (h->count[j][lane] < m) vplace(h, HF, lane, j), placed = 1;
            lane = 1 - lane;
            idle = placed ? 0 : idle + 1;
            if (idle == 2) h->failed = 1; /* neither chunk can move: the reference would spin */
        }
    int32_t *order = malloc((size_t)S * 2 * sizeof *order);
    if (!order) return -1;
    for (int32_t round = 0; round < 2 * m && !h->failed; round++) {
        for (int32_t i = 0; i < S; i++) /* room for a backward (it holds nothing more) */
            while (!h->failed && h->mem[i] > h->cap)
                vplace(h, HW, 0, i);
        /* lane 1 backwards (last rank first), then lane 0 (first rank first) */
        int32_t n1 = 0, n0 = 0, *lane0 = order + S;
        for (int32_t i = 0; i < S; i++) {
            int one;
            if (h->count[i][3] >= h->count[i][2])
                one = 0;
            else if (i == S - 1)
                one = 1;
            else
                one = *vend(h, HI, 1, i + 1, h->count[i][3]) >= 0 || h->count[i][2] >= m;
            if (one)
                order[n1++] = i;
            else
                lane0[n0++] = i;
        }
        for (int32_t k = 0; k < n1 + n0 && !h->failed; k++) {
            int32_t i = k < n1 ? order[n1 - 1 - k] : lane0[k - n1];
            int ln = k < n1 ? 1 : 0;
            double in = -1;
            int has = 0;
            if (ln == 1 && i < S - 1) has = 1, in = *vend(h, HI, 1, i + 1, h->count[i][3]);
            if (ln == 0 && i > 0) has = 1, in = *vend(h, HI, 0, i - 1, h->count[i][2]);
            vfill(h, i, has, in, ln == 1 || h->fill_b);
            vplace(h, HI, ln, i);
        }
        for (int32_t i = 0; i < S && !h->failed; i++) {
            if (h->count[i][1] >= m) continue;
            int put = -1;
            if (h->count[i][1] >= h->count[i][0])
                put = 0;
            else if (i == S - 1)
                put = 1;
            else if (*vend(h, HF, 1, i + 1, h->count[i][1]) >= 0)
                put = 1;
            else if (h->count[i][0] < m && (i == 0 || *vend(h, HF, 0, i - 1, h->count[i][0]) >= 0))
                put = 0;
            if (put < 0) continue;
            while (!h->failed && h->mem[i] + 1 > h->cap)
                vplace(h, HW, 0, i);
            double in = -1;
            int has = 0;
            if (put == 0 && i > 0) has = 1, in = *vend(h, HF, 0, i - 1, h->count[i][0]);
            if (put == 1 && i < S - 1) has = 1, in = *vend(h, HF, 1, i + 1, h->count[i][1]);
            vfill(h, i, has, in, h->fill_f);
            vplace(h, HF, put, i);
        }
    }
    free(order);
    for (int32_t i = 0; i < S && !h->failed; i++)
        while (!h->failed && vpending(h, i))
            vplace(h, HW, 0, i);
    for (int32_t i = 0; i < S && !h->failed; i++) /* every action placed, once */
        if (h->nsched[i] != 6 * m) h->failed = 1;
    return h->failed ? -1 : vworst(h, -1);
}

int ppv_gen_zbv_heuristic(ppv_schedule *s, int32_t P, int32_t m, const ppv_costs *costs,
                          int32_t cap) {
    vh h;
    memset(&h, 0, sizeof h);
    h.S = P, h.m = m, h.cap = cap, h.comm = costs->comm;
    h.cost[HF] = costs->f, h.cost[HI] = costs->b - costs->w, h.cost[HW] = costs->w;
    size_t sm = (size_t)P * (size_t)m;
    h.count = malloc((size_t)P * sizeof *h.count);
    h.end = malloc(6 * sm * sizeof *h.end);
    h.clock = malloc((size_t)P * sizeof *h.clock);
    h.mem = malloc((size_t)P * sizeof *h.mem);
    h.bubble = malloc((size_t)P * sizeof *h.bubble);
    h.wq = malloc(2 * sm * sizeof *h.wq);
    h.wq_head = malloc((size_t)P * sizeof *h.wq_head);
    h.wq_tail = malloc((size_t)P * sizeof *h.wq_tail);
    h.sched = malloc(12 * sm * sizeof *h.sched);
    h.nsched = malloc((size_t)P * sizeof *h.nsched);
    double *approved = malloc((size_t)P * sizeof *approved);
    int32_t *best = malloc(12 * sm * sizeof *best), *keep = malloc(12 * sm * sizeof *keep);
    int rc = -1;
    if (!h.count || !h.end || !h.clock || !h.mem || !h.bubble || !h.wq || !h.wq_head ||
        !h.wq_tail || !h.sched || !h.nsched || !approved || !best || !keep || cap < 2 || m < 1)
        goto done;
    double best_worst = -1;
    for (int fb = 1; fb >= 0; fb--)
        for (int ff = 1; ff >= 0; ff--) {
            h.fill_b = fb, h.fill_f = ff, h.approved = NULL;
            double worst = vrun(&h);
            if (worst < 0) continue;
            /* offer this run's bubbles back while that lowers the worst */
            for (int k = 0; k < 10000; k++) {
                memcpy(approved, h.bubble, (size_t)P * sizeof *approved);
                memcpy(keep, h.sched, 12 * sm * sizeof *keep);
                h.approved = approved;
                double next = vrun(&h);
                if (next >= 0 && next < worst) {
                    worst = next;
                    continue;
                }
                memcpy(h.sched, keep, 12 * sm * sizeof *keep); /* the better run's order */
                break;
            }
            if (best_worst < 0 || worst < best_worst) {
                best_worst = worst;
                memcpy(best, h.sched, 12 * sm * sizeof *best);
            }
        }
    if (best_worst < 0) goto done;
    for (int32_t r = 0; r < P; r++) {
        const int32_t *row = &best[(int64_t)r * 12 * m];
        for (int64_t k = 0; k < 3 * 2 * (int64_t)m; k++) {
            int code = row[2 * k], type = code / 2, lane = code % 2;
            /* a forward's lane is its chunk; a backward's (and its W's) lane
             * is the other chunk */
            int chunk = type == HF ? lane : 1 - lane;
            int32_t stage = chunk == 0 ? r : 2 * P - 1 - r;
            ppv_action_kind kind = type == HF ? PPV_ACT_F : type == HI ? PPV_ACT_I : PPV_ACT_W;
            if (ppv_gen_emit(s, r, kind, stage, row[2 * k + 1]) < 0) goto done;
        }
    }
    rc = 0;
done:
    free(h.count), free(h.end), free(h.clock), free(h.mem), free(h.bubble);
    free(h.wq), free(h.wq_head), free(h.wq_tail), free(h.sched), free(h.nsched);
    free(approved), free(best), free(keep);
    return rc;
}
