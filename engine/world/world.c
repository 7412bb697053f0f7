/* world.c - the mock world's deterministic scheduler.
 *
 * Every rank is a coroutine (ucontext) with its own stack. A rank runs
 * until it reaches a scheduling point (every transport call is one) or
 * blocks; the scheduler then picks the next runnable rank by policy and
 * records the decision. The decisions alone determine the run, so a trace
 * replays it exactly. When no rank can run and not all are done, the run is
 * a deadlock and is reported with the same wait-for report as `ppv check`;
 * when `watchdog_steps` decisions pass without progress, it is a hang. On
 * either, the world is aborted and every rank unwinds through
 * PPV_ERR_ABORTED, so no rank's memory is left behind.
 */
#include <errno.h>
#include <stdarg.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "world_internal.h"

#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define PPV_HAVE_VALGRIND 1
#endif
#endif

#define RNG_SCHED 0x5343484544ULL /* stream id of the scheduler's random draws */

/* 64 random bits from (seed, stream, index): splitmix64's finaliser over a
 * mix of the three, so every decision is a pure function of its key. */
static uint64_t sched_bits(uint64_t seed, uint64_t stream, uint64_t index) {
    uint64_t z = seed * 0x9E3779B97F4A7C15ULL ^ (stream + 0x632BE59BD9B4E019ULL) * 0xBF58476D1CE4E5B9ULL ^
                 (index + 1) * 0x94D049BB133111EBULL;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* ---- switching between the scheduler and the ranks ------------------------------ */

/* Where a rank at a scheduling point goes next: -1 back to the scheduler,
 * or the rank that runs the next step (itself: it goes on). */
static int32_t next_rank(ppv_world *w, int32_t rank);

#ifdef PPV_FAST_SWITCH
/* ctx_switch(save, to): pushes the callee-saved registers and the SSE and
 * x87 control words, stores the stack pointer in *save, loads `to` and pops
 * the same from there. A new stack is laid out by fiber_init so that the
 * first switch "returns" into fiber_start, which calls r12(r13). */
void ppv_ctx_switch(void **save, void *to);
void ppv_fiber_start(void);
__asm__(".text\n"
        ".globl ppv_ctx_switch\n"
        ".type ppv_ctx_switch,@function\n"
        "ppv_ctx_switch:\n"
        "  pushq %rbp\n"
        "  pushq %rbx\n"
        "  pushq %r12\n"
        "  pushq %r13\n"
        "  pushq %r14\n"
        "  pushq %r15\n"
        "  subq $8, %rsp\n"
        "  stmxcsr (%rsp)\n"
        "  fnstcw 4(%rsp)\n"
        "  movq %rsp, (%rdi)\n"
        "  movq %rsi, %rsp\n"
        "  ldmxcsr (%rsp)\n"
        "  fldcw 4(%rsp)\n"
        "  addq $8, %rsp\n"
        "  popq %r15\n"
        "  popq %r14\n"
        "  popq %r13\n"
        "  popq %r12\n"
        "  popq %rbx\n"
        "  popq %rbp\n"
        "  ret\n"
        ".size ppv_ctx_switch, .-ppv_ctx_switch\n"
        ".globl ppv_fiber_start\n"
        ".type ppv_fiber_start,@function\n"
        "ppv_fiber_start:\n"
        "  movq %r13, %rdi\n"
        "  callq *%r12\n"
        "  ud2\n"
        ".size ppv_fiber_start, .-ppv_fiber_start\n");

/* The first frame of a new stack: control words, r15, r14, r13 (the
 * argument), r12 (the function), rbx, rbp, and fiber_start as the return
 * address; after that `ret` the stack pointer is 16-byte aligned, as a
 * call needs. */
static void *fiber_init(void *stack, size_t bytes, void (*fn)(void *), void *arg) {
    uintptr_t top = ((uintptr_t)stack + bytes) & ~(uintptr_t)15;
    uint64_t *sp = (uint64_t *)(top - 80);
    memset(sp, 0, 80);
    uint32_t mxcsr = 0x1F80;
    uint16_t fcw = 0x037F;
    memcpy((char *)sp, &mxcsr, 4);
    memcpy((char *)sp + 4, &fcw, 2);
    sp[3] = (uint64_t)(uintptr_t)arg;
    sp[4] = (uint64_t)(uintptr_t)fn;
    sp[7] = (uint64_t)(uintptr_t)ppv_fiber_start;
    return sp;
}

/* A rank's first frame: runs it, then hands its stack back for good. */
static void rank_entry(void *arg) {
    rank_ctx *rc = arg;
    ppv_world *w = rc->world;
    w->fn(&w->transport, rc->rank, w->arg);
    rc->state = RANK_DONE;
    w->last_progress = w->steps;
    ppv_ctx_switch(&rc->sp, w->sched_sp); /* never resumed */
    __builtin_unreachable();
}

/* The scheduler hands the processor to rank r until it yields. */
static void run_rank(ppv_world *w, int32_t r) {
    ppv_ctx_switch(&w->sched_sp, w->ranks[r].sp);
}

void ppv_world_switch(ppv_world *w, int32_t rank) {
    int32_t r = next_rank(w, rank);
    if (r == rank) return;
    ppv_ctx_switch(&w->ranks[rank].sp, r < 0 ? w->sched_sp : w->ranks[r].sp);
}
#else
static void rank_entry(unsigned hi, unsigned lo, int rank) {
    ppv_world *w = (ppv_world *)(((uintptr_t)hi << 32) | (uintptr_t)lo);
    w->fn(&w->transport, rank, w->arg);
    w->ranks[rank].state = RANK_DONE;
    w->last_progress = w->steps;
    /* uc_link returns to the scheduler */
}

static void run_rank(ppv_world *w, int32_t r) {
    swapcontext(&w->sched_ctx, &w->ranks[r].ctx);
}

void ppv_world_switch(ppv_world *w, int32_t rank) {
    int32_t r = next_rank(w, rank);
    if (r == rank) return;
    swapcontext(&w->ranks[rank].ctx, r < 0 ? &w->sched_ctx : &w->ranks[r].ctx);
}
#endif

ppv_world *ppv_world_make(const ppv_world_options *opt, char *err, size_t errlen) {
    if (opt->nranks < 1 || opt->nranks > 1024) {
        ppv_errf(err, errlen, "the mock world takes 1..1024 ranks, not %d", opt->nranks);
        return NULL;
    }
    if (opt->policy.kind == PPV_POLICY_PCT && opt->policy.depth < 1) {
        ppv_errf(err, errlen, "PCT needs a depth of at least 1");
        return NULL;
    }
    if (opt->policy.kind == PPV_POLICY_EXPLORE &&
        (!opt->policy.explorer || !opt->policy.explorer->choose || !opt->policy.explorer->ran)) {
        ppv_errf(err, errlen, "the explore policy needs an explorer");
        return NULL;
    }
    ppv_world *w = calloc(1, sizeof *w);
    if (!w) goto oom;
    w->opt = *opt;
    if (w->opt.watchdog_steps <= 0) w->opt.watchdog_steps = 100000;
    if (w->opt.stack_bytes < 65536) w->opt.stack_bytes = 1 << 20;
    w->P = opt->nranks;
    w->ranks = calloc((size_t)w->P, sizeof *w->ranks);
    w->transport.impl = w;
    w->last = -1;
    if (!w->ranks) goto oom;
    int32_t *all = malloc((size_t)w->P * sizeof *all);
    if (!all) goto oom;
    for (int32_t r = 0; r < w->P; r++) all[r] = r;
    int32_t c = ppv_world_add_comm(w, all, w->P);
    free(all);
    if (c != 0) goto oom;
    return w;
oom:
    ppv_world_free(w);
    ppv_errf(err, errlen, "out of memory");
    return NULL;
}

int32_t ppv_world_add_comm(ppv_world *w, const int32_t *ranks, int32_t n) {
    if (n < 1) return -1;
    for (int32_t k = 0; k < n; k++)
        if (ranks[k] < 0 || ranks[k] >= w->P) return -1;
    world_comm *cs = realloc(w->comms, (size_t)(w->ncomms + 1) * sizeof *cs);
    if (!cs) return -1;
    w->comms = cs;
    size_t per = (size_t)w->P * (size_t)w->P;
    channel *ch = realloc(w->chans, (size_t)(w->ncomms + 1) * per * sizeof *ch);
    if (!ch) return -1;
    w->chans = ch;
    memset(&w->chans[(size_t)w->ncomms * per], 0, per * sizeof *ch);
    world_comm *c = &w->comms[w->ncomms];
    memset(c, 0, sizeof *c);
    c->n = n;
    c->ranks = malloc((size_t)n * sizeof *c->ranks);
    c->member_of = malloc((size_t)w->P * sizeof *c->member_of);
    c->seq = calloc((size_t)n, sizeof *c->seq);
    if (!c->ranks || !c->member_of || !c->seq) {
        free(c->ranks), free(c->member_of), free(c->seq);
        return -1;
    }
    for (int32_t r = 0; r < w->P; r++) c->member_of[r] = -1;
    for (int32_t k = 0; k < n; k++) {
        if (c->member_of[ranks[k]] >= 0) {
            free(c->ranks), free(c->member_of), free(c->seq);
            return -1;
        }
        c->ranks[k] = ranks[k];
        c->member_of[ranks[k]] = k;
    }
    return w->ncomms++;
}

/* Stacks of freed worlds, kept (per thread) for the next: a run makes a
 * world, and fresh stacks cost the kernel's page faults every time. */
enum { STACK_CACHE = 16 };
static _Thread_local struct {
    void *p;
    size_t bytes;
} stack_cache[STACK_CACHE];
static _Thread_local int nstack_cache;

static void *stack_get(size_t bytes) {
    for (int k = 0; k < nstack_cache; k++)
        if (stack_cache[k].bytes == bytes) {
            void *p = stack_cache[k].p;
            stack_cache[k] = stack_cache[--nstack_cache];
            return p;
        }
    return malloc(bytes);
}

/* A thread's cache is freed when the thread ends (an explorer's workers
 * are threads); the main thread's stays reachable until the process ends. */
static pthread_key_t stack_key;
static pthread_once_t stack_once = PTHREAD_ONCE_INIT;
static _Thread_local int stack_key_set;

static void stack_cache_free(void *unused) {
    (void)unused;
    for (int k = 0; k < nstack_cache; k++)
        free(stack_cache[k].p);
    nstack_cache = 0;
}

static void stack_key_make(void) {
    (void)pthread_key_create(&stack_key, stack_cache_free);
}

static void stack_put(void *p, size_t bytes) {
    if (!p) return;
    if (!stack_key_set) { /* any non-NULL value: stack_cache_free runs at exit */
        pthread_once(&stack_once, stack_key_make);
        stack_key_set = pthread_setspecific(stack_key, &stack_once) == 0;
    }
    if (nstack_cache == STACK_CACHE) {
        free(p);
        return;
    }
    stack_cache[nstack_cache].p = p;
    stack_cache[nstack_cache++].bytes = bytes;
}

static void free_queue(p2p_op *op) {
    while (op) {
        p2p_op *next = op->next;
        free(op); /* an eager copy lives in its op's block */
        op = next;
    }
}

void ppv_world_free(ppv_world *w) {
    if (!w) return;
    free(w->notes);
    free(w->dev_steps);
    free(w->dev_ranks);
    free_queue(w->orphans);
    free_queue(w->spare_ops);
    free_queue(w->spare_msgs);
    for (int32_t r = 0; w->ranks && r < w->P; r++) {
#ifdef PPV_HAVE_VALGRIND
        if (w->ranks[r].stack) VALGRIND_STACK_DEREGISTER(w->ranks[r].stack_id);
#endif
        stack_put(w->ranks[r].stack, w->opt.stack_bytes);
        free(w->ranks[r].defer);
        free_queue(w->ranks[r].group);
        for (int64_t k = 0; k < w->ranks[r].nasync; k++) /* done ones: a pending one is freed */
            if (w->ranks[r].async[k] && w->ranks[r].async[k]->done) /* with its channel */
                free(w->ranks[r].async[k]);
        free(w->ranks[r].async);
    }
    for (int32_t c = 0; c < w->ncomms; c++) {
        for (int32_t a = 0; a < w->P; a++)
            for (int32_t b = 0; b < w->P; b++) {
                channel *ch = world_channel(w, c, a, b);
                /* receives and rendezvous sends still queued belong to an
                 * aborted run; eager copies belong to the channel */
                free_queue(ch->sends);
                free_queue(ch->recvs);
            }
        world_comm *cm = &w->comms[c];
        while (cm->spare_slots) {
            coll_slot *next = cm->spare_slots->next_spare;
            free(cm->spare_slots);
            cm->spare_slots = next;
        }
        for (int64_t k = 0; k < cm->nslots; k++) {
            free(cm->slots[k]);
        }
        free(cm->slots);
        free(cm->ranks);
        free(cm->member_of);
        free(cm->seq);
    }
    free(w->comms);
    free(w->chans);
    free(w->ranks);
    free(w->decisions);
    free(w->pct_prio);
    free(w->pct_change);
    free(w->touch);
    free(w->after);
    free(w);
}

void world_touch(ppv_world *w, int32_t kind, int32_t comm, int32_t from, int32_t to,
                 int64_t seq) {
    if (!w->explore) return;
    if (w->ntouch == w->captouch) {
        int32_t cap = w->captouch ? 2 * w->captouch : 16;
        ppv_touch *t = realloc(w->touch, (size_t)cap * sizeof *t);
        if (!t) {
            ppv_world_fail_env(&w->transport, w->current, "out of memory noting a step");
            return;
        }
        w->touch = t;
        w->captouch = cap;
    }
    uint64_t ch = ((uint64_t)comm * (uint64_t)w->P + (uint64_t)from) * (uint64_t)w->P + (uint64_t)to;
    w->touch[w->ntouch++] = (ppv_touch){kind, ch, seq};
}

void world_after(ppv_world *w, int32_t rank, int64_t step) {
    if (!w->explore || step < 0) return;
    rank_ctx *rc = &w->ranks[rank];
    if (rc->ndefer == rc->capdefer) {
        int32_t cap = rc->capdefer ? 2 * rc->capdefer : 8;
        int64_t *a = realloc(rc->defer, (size_t)cap * sizeof *a);
        if (!a) {
            ppv_world_fail_env(&w->transport, w->current, "out of memory noting a step");
            return;
        }
        rc->defer = a;
        rc->capdefer = cap;
    }
    rc->defer[rc->ndefer++] = step;
}

/* The running rank's deferred steps become its step's. */
static int take_deferred(ppv_world *w, int32_t r) {
    rank_ctx *rc = &w->ranks[r];
    w->nafter = 0;
    if (rc->ndefer > w->capafter) {
        int64_t *a = realloc(w->after, (size_t)rc->ndefer * sizeof *a);
        if (!a) return -1;
        w->after = a;
        w->capafter = rc->ndefer;
    }
    if (rc->ndefer) memcpy(w->after, rc->defer, (size_t)rc->ndefer * sizeof *w->after);
    w->nafter = rc->ndefer;
    rc->ndefer = 0;
    return 0;
}

int ppv_world_wait(ppv_world *w, int32_t rank) {
    rank_ctx *rc = &w->ranks[rank];
    int blocked = 0;
    char what[64] = "";
    while (rc->pending > 0 && !w->aborted) {
        if (!blocked && w->opt.policy.note_steps)
            snprintf(what, sizeof what, "%s", rc->waiting        ? rc->waiting->what
                                              : rc->waiting_coll ? rc->waiting_coll->what
                                                                 : "its calls");
        blocked = 1;
        rc->state = RANK_BLOCKED;
        ppv_world_switch(w, rank);
    }
    rc->state = RANK_READY;
    if (blocked && !w->aborted) world_note(w, "%s completes", what);
    return w->aborted ? PPV_ERR_ABORTED : 0;
}

void ppv_world_complete(ppv_world *w, int32_t rank) {
    rank_ctx *rc = &w->ranks[rank];
    w->last_progress = w->steps;
    if (rank != w->current) world_after(w, rank, world_step(w));
    if (--rc->pending == 0) {
        rc->waiting = NULL;
        rc->waiting_coll = NULL;
        if (rc->state == RANK_BLOCKED) rc->state = RANK_READY;
    }
}

/* The mock's fail: the first failure is the run's; the world is aborted. */
void ppv_world_abort_with(ppv_world *w, int32_t rank, int env, const char *msg) {
    if (!w->failed) {
        snprintf(w->fail_msg, sizeof w->fail_msg, "%s", msg);
        w->failed = 1;
        w->env_error = env;
        w->failed_rank = rank;
    }
    w->aborted = 1;
}

static void vfail(ppv_transport *t, int32_t rank, int env, const char *fmt, va_list ap) {
    char msg[sizeof((ppv_world *)0)->fail_msg];
    vsnprintf(msg, sizeof msg, fmt, ap);
    t->ops->fail(t->impl, rank, env, msg);
}

void ppv_world_fail(ppv_transport *t, int32_t rank, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfail(t, rank, 0, fmt, ap);
    va_end(ap);
}

void ppv_world_fail_env(ppv_transport *t, int32_t rank, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vfail(t, rank, 1, fmt, ap);
    va_end(ap);
}

void ppv_world_yield(ppv_transport *t, int32_t rank) {
    t->ops->yield(t->impl, rank);
}

int64_t ppv_transport_clock_ns(const ppv_transport *t) {
    if (t->ops->clock_ns) return t->ops->clock_ns(t->impl);
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void ppv_world_progress(ppv_transport *t, int32_t rank) {
    t->ops->progress(t->impl, rank);
}

/* ---- policies ---------------------------------------------------------------- */

int ppv_policy_parse(const char *text, ppv_policy *out) {
    memset(out, 0, sizeof *out);
    if (strcmp(text, "rr") == 0) out->kind = PPV_POLICY_RR;
    else if (strcmp(text, "random") == 0) out->kind = PPV_POLICY_RANDOM;
    else if (strcmp(text, "pct") == 0) out->kind = PPV_POLICY_PCT, out->depth = 3;
    else if (strncmp(text, "pct:", 4) == 0) {
        int64_t d;
        if (ppv_parse_whole(text + 4, 1, 64, &d) < 0) return -1;
        out->kind = PPV_POLICY_PCT;
        out->depth = (int32_t)d;
    } else
        return -1;
    return 0;
}

/* PCT (Burckhardt et al., ASPLOS'10): distinct random priorities above
 * depth-1, and depth-1 change points in [1, pct_steps] at which the rank
 * about to run drops below every initial priority. */
static int pct_init(ppv_world *w) {
    const ppv_policy *pol = &w->opt.policy;
    int32_t d = pol->depth;
    w->pct_prio = malloc((size_t)w->P * sizeof *w->pct_prio);
    w->pct_change = malloc((size_t)(d > 1 ? d - 1 : 1) * sizeof *w->pct_change);
    if (!w->pct_prio || !w->pct_change) return -1;
    for (int32_t r = 0; r < w->P; r++) w->pct_prio[r] = d + r;
    for (int32_t r = w->P - 1; r > 0; r--) { /* Fisher-Yates */
        int32_t j = (int32_t)(sched_bits(pol->seed, RNG_SCHED, (uint64_t)r) % (uint64_t)(r + 1));
        int64_t t = w->pct_prio[r];
        w->pct_prio[r] = w->pct_prio[j];
        w->pct_prio[j] = t;
    }
    int64_t k = pol->pct_steps > 0 ? pol->pct_steps : 1000;
    for (int32_t i = 0; i < d - 1; i++)
        w->pct_change[i] = 1 + (int64_t)(sched_bits(pol->seed, RNG_SCHED + 1, (uint64_t)i) %
                                          (uint64_t)k);
    return 0;
}

/* The explorer's choice among the runnable ranks; -2 when it ends the run. */
static __attribute__((noinline)) int32_t pick_explore(ppv_world *w) {
    const ppv_policy *pol = &w->opt.policy;
    int32_t P = w->P;
    unsigned char ready[256] = {0}, *rd = P <= 256 ? ready : malloc((size_t)P);
    if (!rd) return -1;
    for (int32_t r = 0; r < P; r++)
        rd[r] = w->ranks[r].state == RANK_READY;
    int32_t r = pol->explorer->choose(pol->explorer->ctx, w->steps, rd, P);
    if (rd != ready) free(rd);
    if (r < 0 || r >= P || w->ranks[r].state != RANK_READY) return -2;
    return r;
}

/* Round-robin's choice: the first rank ready after the last one run. */
static int32_t rr_pick(const ppv_world *w) {
    for (int32_t k = 1; k <= w->P; k++) {
        int32_t r = (w->last + k + w->P) % w->P;
        if (w->ranks[r].state == RANK_READY) return r;
    }
    return -1;
}

/* REPLAY with deviations: round-robin's choice but at a deviation's step;
 * -1 with a message where one cannot run (not lenient). */
static int32_t pick_deviation(ppv_world *w) {
    const ppv_policy *pol = &w->opt.policy;
    while (w->dev_at < pol->ndev && pol->dev_step[w->dev_at] < w->steps) w->dev_at++;
    if (w->dev_at < pol->ndev && pol->dev_step[w->dev_at] == w->steps) {
        int32_t r = pol->dev_rank[w->dev_at];
        if (r >= 0 && r < w->P && w->ranks[r].state == RANK_READY) return r;
        if (!pol->lenient) {
            snprintf(w->fail_msg, sizeof w->fail_msg,
                     "trace diverges at step %lld: it runs rank %d, which cannot run now",
                     (long long)w->steps, r);
            return -1;
        }
    }
    return rr_pick(w);
}

/* The next rank to run, or -1 with a message (replay divergence). */
static int32_t pick(ppv_world *w, int32_t nready) {
    const ppv_policy *pol = &w->opt.policy;
    int32_t P = w->P;
    switch (pol->kind) {
    case PPV_POLICY_RR:
        return rr_pick(w);
    case PPV_POLICY_RANDOM: {
        /* the same draw modulo nready; without a division when it is a
         * power of two (one rank ready: the choice is forced) */
        int32_t n = 0;
        if (nready > 1) {
            uint64_t bits = sched_bits(pol->seed, RNG_SCHED, (uint64_t)w->steps);
            n = (int32_t)((nready & (nready - 1)) == 0 ? bits & (uint64_t)(nready - 1)
                                                       : bits % (uint64_t)nready);
        }
        for (int32_t r = 0; r < P; r++)
            if (w->ranks[r].state == RANK_READY && n-- == 0) return r;
        return -1;
    }
    case PPV_POLICY_PCT: {
        for (int pass = 0; pass < 2; pass++) {
            int32_t best = -1;
            for (int32_t r = 0; r < P; r++)
                if (w->ranks[r].state == RANK_READY &&
                    (best < 0 || w->pct_prio[r] > w->pct_prio[best]))
                    best = r;
            int demoted = 0;
            for (int32_t i = 0; pass == 0 && i < pol->depth - 1; i++)
                if (w->pct_change[i] == w->steps) {
                    w->pct_prio[best] = pol->depth - 1 - i;
                    demoted = 1;
                    w->pct_fired++;
                }
            if (!demoted) return best;
        }
        return -1;
    }
    case PPV_POLICY_EXPLORE:
        return pick_explore(w);
    case PPV_POLICY_REPLAY: {
        if (pol->ndev) return pick_deviation(w);
        if (pol->lenient && (w->steps >= pol->nreplay || pol->replay[w->steps] < 0 ||
                             pol->replay[w->steps] >= P ||
                             w->ranks[pol->replay[w->steps]].state != RANK_READY))
            return rr_pick(w);
        if (w->steps >= pol->nreplay && pol->then_rr) /* round-robin after a minimal trace */
            return rr_pick(w);
        if (w->steps >= pol->nreplay) {
            snprintf(w->fail_msg, sizeof w->fail_msg,
                     "trace ends after %lld decisions but ranks still run",
                     (long long)pol->nreplay);
            return -1;
        }
        int32_t r = pol->replay[w->steps];
        if (r < 0 || r >= P || w->ranks[r].state != RANK_READY) {
            snprintf(w->fail_msg, sizeof w->fail_msg,
                     "trace diverges at step %lld: it runs rank %d, which cannot run now",
                     (long long)w->steps, r);
            return -1;
        }
        return r;
    }
    }
    return -1;
}

static int record(ppv_world *w, int32_t r) {
    if (w->ndecisions == w->capdecisions) {
        int64_t cap = w->capdecisions ? w->capdecisions * 2 : 1024;
        int32_t *d = realloc(w->decisions, (size_t)cap * sizeof *d);
        if (!d) return -1;
        w->decisions = d;
        w->capdecisions = cap;
    }
    w->decisions[w->ndecisions++] = r;
    return 0;
}

/* ---- reports ---------------------------------------------------------------- */

/* " (rank p has returned)" when it has, else "": what a wait on p
 * cannot get. */
static const char *returned(const ppv_world *w, int32_t p, char *buf, size_t n) {
    buf[0] = 0;
    if (p >= 0 && p < w->P && w->ranks[p].state == RANK_DONE)
        snprintf(buf, n, " (rank %d has returned)", (int)p);
    return buf;
}

void world_comm_name(const ppv_world *w, int32_t comm, char *buf, size_t n) {
    const world_comm *c = &w->comms[comm];
    size_t at;
    if (comm == 0 || c->n == w->P) {
        at = (size_t)snprintf(buf, n, "the world");
    } else {
        at = (size_t)snprintf(buf, n, "the group [");
        for (int32_t k = 0; k < c->n && at + 32 < n; k++)
            at += (size_t)snprintf(buf + at, n - at, "%s%d", k ? "," : "", (int)c->ranks[k]);
        at += (size_t)snprintf(buf + at, n - at, "%s", at + 32 < n ? "]" : ",...]");
    }
    if (c->tag && at < n) snprintf(buf + at, n - at, ", tag %lld", (long long)c->tag);
}

/* What op waits for, in out's reason (and whom, in waits_for). */
static void describe_op(ppv_world *w, const p2p_op *op, ppv_wait *out) {
    out->waits_for = op->peer;
    char gone[48];
    if (op->send)
        snprintf(out->reason, sizeof out->reason,
                 "send of %zu bytes (rendezvous) waits for rank %d to post its receive%s",
                 op->bytes, op->peer, returned(w, op->peer, gone, sizeof gone));
    else
        snprintf(out->reason, sizeof out->reason, "receive waits for rank %d to send%s", op->peer,
                 returned(w, op->peer, gone, sizeof gone));
}

static void describe(ppv_world *w, int32_t r, ppv_wait *out) {
    rank_ctx *rc = &w->ranks[r];
    memset(out, 0, sizeof *out);
    out->rank = r;
    out->index = -1;
    out->waits_for = -1;
    if (rc->some && rc->nsome == 1 && !rc->any_wait) { /* one thread's call: as if alone */
        snprintf(out->action, sizeof out->action, "%s", rc->some_ops[0]->what);
        describe_op(w, rc->some_ops[0], out);
    } else if (rc->some) { /* its threads, each on its own call (world_wait_some) */
        snprintf(out->action, sizeof out->action, "%s",
                 rc->nsome ? rc->some_ops[0]->what : rc->any_what);
        out->waits_for = rc->nsome ? rc->some_ops[0]->peer : -1;
        size_t at = (size_t)snprintf(out->reason, sizeof out->reason,
                                     "its threads' %d calls wait, none can complete: ",
                                     (int)(rc->nsome + rc->nsome_any));
        for (int32_t k = 0; k <= rc->nsome && at < sizeof out->reason; k++) {
            const char *call = k < rc->nsome ? rc->some_ops[k]->what
                               : rc->any_wait ? rc->any_what
                                              : NULL;
            if (call)
                at += (size_t)snprintf(out->reason + at, sizeof out->reason - at, "%s%s",
                                       k ? "; " : "", call);
        }
    } else if (rc->waiting) {
        p2p_op *op = rc->waiting;
        snprintf(out->action, sizeof out->action, "%s", op->what);
        describe_op(w, op, out);
    } else if (rc->waiting_coll) {
        coll_slot *s = rc->waiting_coll;
        world_comm *c = &w->comms[rc->waiting_comm];
        snprintf(out->action, sizeof out->action, "%s", s->what);
        for (int32_t k = 0; k < c->n; k++)
            if (!s->bufs[k]) {
                out->waits_for = c->ranks[k];
                char name[96], gone[48];
                world_comm_name(w, rc->waiting_comm, name, sizeof name);
                snprintf(out->reason, sizeof out->reason,
                         "collective on %s waits for rank %d to join%s", name, c->ranks[k],
                         returned(w, c->ranks[k], gone, sizeof gone));
                break;
            }
    } else if (rc->any_wait) {
        snprintf(out->action, sizeof out->action, "%s", rc->any_what);
        char name[96];
        world_comm_name(w, rc->any_comm, name, sizeof name);
        snprintf(out->reason, sizeof out->reason, "receive from any rank of %s waits for a message",
                 name);
    } else {
        snprintf(out->action, sizeof out->action, "(running)");
        snprintf(out->reason, sizeof out->reason, "runnable, but made no progress");
    }
}

static int report_stuck(ppv_world *w, ppv_world_result *res) {
    res->blocked = calloc((size_t)w->P, sizeof *res->blocked);
    if (!res->blocked) return -1;
    for (int32_t r = 0; r < w->P; r++)
        if (w->ranks[r].state != RANK_DONE) describe(w, r, &res->blocked[res->nblocked++]);
    return ppv_wait_cycle(res->blocked, res->nblocked, w->P, &res->cycle, &res->ncycle);
}

/* Resumes every unfinished rank until it returns (transport calls fail with
 * PPV_ERR_ABORTED now). */
static void unwind(ppv_world *w) {
    w->aborted = 1;
    for (int64_t guard = 0; guard < 1000000; guard++) {
        int32_t live = -1;
        for (int32_t r = 0; r < w->P && live < 0; r++) {
            if (!w->ranks[r].started) w->ranks[r].state = RANK_DONE; /* never ran */
            if (w->ranks[r].state != RANK_DONE) live = r;
        }
        if (live < 0) return;
        w->ranks[live].state = RANK_READY;
        w->current = live;
        run_rank(w, live);
    }
}

/* Gives rank r its stack and a context that starts in rank_entry. */
static int start_rank(ppv_world *w, int32_t r) {
    uintptr_t self = (uintptr_t)w;
    rank_ctx *rc = &w->ranks[r];
    rc->stack = stack_get(w->opt.stack_bytes);
    rc->world = w;
    rc->rank = r;
#ifdef PPV_FAST_SWITCH
    (void)self;
    if (!rc->stack) return -1;
#ifdef PPV_HAVE_VALGRIND
    rc->stack_id = VALGRIND_STACK_REGISTER(rc->stack, (char *)rc->stack + w->opt.stack_bytes);
#endif
    rc->sp = fiber_init(rc->stack, w->opt.stack_bytes, rank_entry, rc);
    rc->state = RANK_READY;
    rc->started = 1;
    return 0;
#else
    if (!rc->stack || getcontext(&rc->ctx) < 0) return -1;
#ifdef PPV_HAVE_VALGRIND
    rc->stack_id = VALGRIND_STACK_REGISTER(rc->stack, (char *)rc->stack + w->opt.stack_bytes);
#endif
    rc->ctx.uc_stack.ss_sp = rc->stack;
    rc->ctx.uc_stack.ss_size = w->opt.stack_bytes;
    rc->ctx.uc_link = &w->sched_ctx;
    makecontext(&rc->ctx, (void (*)(void))rank_entry, 3, (unsigned)(self >> 32),
                (unsigned)(self & 0xffffffffu), (int)r);
    rc->state = RANK_READY;
    rc->started = 1;
    return 0;
#endif
}

/* No rank can go on: the blocked rank whose wait has the earliest
 * deadline (the lowest rank of equal ones) times out and goes on (not
 * progress: a run whose ranks only ever time out is the watchdog's).
 * 1 when one did. */
static int fire_timer(ppv_world *w) {
    int32_t best = -1;
    for (int32_t r = 0; r < w->P; r++) {
        const rank_ctx *rc = &w->ranks[r];
        if (rc->state == RANK_BLOCKED && rc->timed && !rc->some_fired &&
            (best < 0 || rc->deadline < w->ranks[best].deadline))
            best = r;
    }
    if (best < 0) return 0;
    rank_ctx *rc = &w->ranks[best];
    rc->some_fired = 1;
    rc->timed_out = 1;
    rc->any_wait = 0;
    if (--rc->pending == 0) rc->state = RANK_READY;
    return 1;
}

/* decide's every case: the run's end, a delayed message's arrival, a
 * deadlock, the watchdog, as well as a plain decision. */
static __attribute__((noinline)) int decide_all(ppv_world *w, int32_t *out) {
    ppv_world_result *res = w->res;
    for (;;) {
        int32_t nready = 0, ndone = 0;
        for (int32_t r = 0; r < w->P; r++) {
            nready += w->ranks[r].state == RANK_READY;
            ndone += w->ranks[r].state == RANK_DONE;
        }
        if (w->failed) {
            res->status = PPV_RUN_FAILED;
            res->env_error = w->env_error;
            res->failed_rank = w->failed_rank;
            snprintf(res->message, sizeof res->message, "rank %d: %.480s", w->failed_rank,
                     w->fail_msg);
            return 1;
        }
        if (ndone == w->P) {
            res->status = PPV_RUN_DONE;
            return 1;
        }
        if (w->held && (nready == 0 || w->steps >= w->release_at)) {
            /* a delayed message arrives: late, or at once when nothing else can run */
            if (w->release(w) < 0) return -1;
            continue;
        }
        if (nready == 0 && fire_timer(w)) continue;
        if (nready == 0) {
            res->status = PPV_RUN_DEADLOCK;
            if (report_stuck(w, res) < 0) return -1;
            snprintf(res->message, sizeof res->message,
                     "deadlock after %lld scheduler steps: %d of %d ranks blocked",
                     (long long)w->steps, res->nblocked, w->P);
            return 1;
        }
        if (w->steps - w->last_progress > w->opt.watchdog_steps) {
            res->status = PPV_RUN_HANG;
            if (report_stuck(w, res) < 0) return -1;
            snprintf(res->message, sizeof res->message,
                     "hang: %lld scheduler steps without progress (watchdog %lld)",
                     (long long)(w->steps - w->last_progress), (long long)w->opt.watchdog_steps);
            return 1;
        }
        int32_t r = pick(w, nready);
        if (r == -2) {
            res->status = PPV_RUN_PRUNED;
            snprintf(res->message, sizeof res->message,
                     "the explorer ended the run after %lld steps", (long long)w->steps);
            return 1;
        }
        if (r < 0) {
            res->status = PPV_RUN_FAILED;
            snprintf(res->message, sizeof res->message, "%.500s", w->fail_msg);
            return 1;
        }
        *out = r;
        return 0;
    }
}

/* A policy's pick that ended the run (an explorer's prune, a replay that
 * diverged): 1, with w->res saying so. */
static __attribute__((noinline)) int pick_ended(ppv_world *w, int32_t r) {
    ppv_world_result *res = w->res;
    if (r == -2) {
        res->status = PPV_RUN_PRUNED;
        snprintf(res->message, sizeof res->message, "the explorer ended the run after %lld steps",
                 (long long)w->steps);
        return 1;
    }
    res->status = PPV_RUN_FAILED;
    res->diverged = w->opt.policy.kind == PPV_POLICY_REPLAY; /* the one policy that ends so */
    snprintf(res->message, sizeof res->message, "%.500s", w->fail_msg);
    return 1;
}

/* The scheduler's decision before a step: 0 with *out the rank to run, 1
 * when the run ends (w->res says how), -1 out of memory. The common case
 * (ranks running, nothing held, the watchdog far) is decided here, the
 * rest by decide_all. */
static inline __attribute__((always_inline)) int decide(ppv_world *w, int32_t *out) {
    int32_t nready = 0, ndone = 0;
    for (int32_t r = 0; r < w->P; r++) {
        nready += w->ranks[r].state == RANK_READY;
        ndone += w->ranks[r].state == RANK_DONE;
    }
    if (w->failed || ndone == w->P || w->held || nready == 0 ||
        w->steps - w->last_progress > w->opt.watchdog_steps)
        return decide_all(w, out);
    int32_t r = pick(w, nready);
    if (r < 0) return pick_ended(w, r);
    *out = r;
    return 0;
}

/* Notes that step w->steps runs r where round-robin would not; 0 or -1. */
static int note_deviation(ppv_world *w, int32_t r) {
    if (rr_pick(w) == r) return 0;
    if (w->ndevs == w->capdevs) {
        int64_t cap = w->capdevs ? 2 * w->capdevs : 64;
        int64_t *s = realloc(w->dev_steps, (size_t)cap * sizeof *s);
        if (s) w->dev_steps = s;
        int32_t *k = realloc(w->dev_ranks, (size_t)cap * sizeof *k);
        if (k) w->dev_ranks = k;
        if (!s || !k) return -1;
        w->capdevs = cap;
    }
    w->dev_steps[w->ndevs] = w->steps;
    w->dev_ranks[w->ndevs++] = r;
    return 0;
}

/* Notes that step w->steps runs r, with nothing done yet; 0 or -1. */
static int note_step(ppv_world *w, int32_t r) {
    if (w->nnotes == w->capnotes) {
        int64_t cap = w->capnotes ? 2 * w->capnotes : 256;
        ppv_step_note *n = realloc(w->notes, (size_t)cap * sizeof *n);
        if (!n) return -1;
        w->notes = n;
        w->capnotes = cap;
    }
    ppv_step_note *n = &w->notes[w->nnotes++];
    n->step = w->steps;
    n->rank = r;
    n->did[0] = '\0';
    return 0;
}

void world_note_step(ppv_world *w, const char *fmt, ...) {
    if (!w->opt.policy.note_steps || !w->res || !w->nnotes) return;
    ppv_step_note *n = &w->notes[w->nnotes - 1];
    size_t len = strlen(n->did);
    if (len && len + 2 < sizeof n->did) {
        memcpy(n->did + len, "; ", 3);
        len += 2;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(n->did + len, sizeof n->did - len, fmt, ap);
    va_end(ap);
}

int64_t ppv_world_steps(const ppv_world *w, const ppv_step_note **notes) {
    *notes = w->notes;
    return w->nnotes;
}

/* Starts step number w->steps on rank r: the decision is recorded. 0, or
 * -1 out of memory. */
static inline __attribute__((always_inline)) int begin_step(ppv_world *w, int32_t r) {
    if (w->opt.policy.note_deviations && note_deviation(w, r) < 0) return -1;
    if (w->opt.policy.note_steps && note_step(w, r) < 0) return -1;
    if (record(w, r) < 0) return -1;
    w->steps++;
    w->last = r;
    w->current = r;
    if (w->explore) {
        w->ntouch = 0;
        if (take_deferred(w, r) < 0) return -1;
    }
    return 0;
}

/* A rank at a scheduling point takes the next decision itself and hands
 * the processor straight to the rank chosen (or keeps it, when chosen
 * again: a rank often runs until it blocks): one context switch a step, or
 * none, where going through the scheduler took two. When the run ends (or
 * memory runs out) the decision goes to the scheduler with it. An
 * explorer's steps always pass through the scheduler, which reports each
 * one; so does unwinding, which takes no decisions. */
static int32_t next_rank(ppv_world *w, int32_t rank) {
    (void)rank;
    if (w->explore || !w->res) return -1;
    int32_t r = -1;
    int rc = decide(w, &r);
    if (rc == 0 && begin_step(w, r) == 0) return r;
    w->decided = 1;
    w->decided_rc = rc ? rc : -1;
    w->decided_rank = r;
    return -1;
}

int ppv_world_run(ppv_world *w, ppv_rank_main fn, void *arg, ppv_world_result *res) {
    memset(res, 0, sizeof *res);
    res->failed_rank = -1;
    w->fn = fn;
    w->arg = arg;
    w->res = res;
    w->decided = 0;
    if (w->opt.policy.kind == PPV_POLICY_PCT && pct_init(w) < 0) goto oom;
    w->explore = w->opt.policy.kind == PPV_POLICY_EXPLORE;
    for (int32_t r = 0; r < w->P; r++)
        if (start_rank(w, r) < 0) goto oom;
    for (;;) {
        int32_t r = -1;
        int rc;
        /* back here at the start, when a rank ends, and when a rank's
         * decision ends the run */
        if (w->decided) {
            w->decided = 0;
            rc = w->decided_rc;
            r = w->decided_rank;
        } else
            rc = decide(w, &r);
        if (rc > 0) break;
        if (rc < 0 || begin_step(w, r) < 0) goto oom;
        run_rank(w, r);
        if (w->explore) {
            ppv_step st = {r, w->touch, w->ntouch, w->after, w->nafter};
            w->opt.policy.explorer->ran(w->opt.policy.explorer->ctx, w->steps - 1, &st);
        }
    }
    w->res = NULL; /* unwinding takes no decisions */
    unwind(w);
    res->steps = w->steps;
    res->sends = w->nsends;
    res->fault_applied = w->fault_applied;
    res->pct_fired = w->pct_fired;
    /* ppv-fnv64 (spec/digests.md) over the decisions' 4 little-endian bytes each; a rank below
     * 256 has three zero bytes, whose steps are three multiplications */
    const uint64_t prime = 1099511628211ULL, prime4 = prime * prime * prime * prime;
    uint64_t h = 1469598103934665603ULL;
    for (int64_t k = 0; k < w->ndecisions; k++) {
        uint32_t v = (uint32_t)w->decisions[k];
        if (v < 256) {
            h = (h ^ v) * prime4;
            continue;
        }
        for (int b = 0; b < 4; b++) {
            h ^= (v >> (8 * b)) & 0xffu;
            h *= prime;
        }
    }
    res->trace_digest = h;
    return 0;
oom:
    w->res = NULL;
    unwind(w);
    snprintf(res->message, sizeof res->message, "out of memory in the mock world");
    return -1;
}

void ppv_world_result_free(ppv_world_result *r) {
    free(r->blocked);
    free(r->cycle);
    r->blocked = r->cycle = NULL;
    r->nblocked = r->ncycle = 0;
}

/* ---- traces ------------------------------------------------------------------ */

const int32_t *ppv_world_decisions(const ppv_world *w, int64_t *n) {
    *n = w->ndecisions;
    return w->decisions;
}

int64_t ppv_world_deviations(const ppv_world *w, const int64_t **steps, const int32_t **ranks) {
    *steps = w->dev_steps;
    *ranks = w->dev_ranks;
    return w->ndevs;
}

static const char *const fault_names[PPV_FAULT_COUNT] = {
    "none", "drop", "duplicate", "corrupt", "kill", "delay", "eager", "cut"};

int ppv_fault_parse(const char *text, ppv_fault_kind *out) {
    for (int k = 0; k < PPV_FAULT_COUNT; k++)
        if (!strcmp(text, fault_names[k])) {
            *out = (ppv_fault_kind)k;
            return 0;
        }
    return -1;
}

const char *ppv_fault_name(ppv_fault_kind k) {
    return (unsigned)k < PPV_FAULT_COUNT ? fault_names[k] : "?";
}

/* The trace of w's decisions; or, with devs, no decision but w's
 * deviations from round-robin, round-robin after them. */
static int write_trace(FILE *f, const ppv_world *w, int devs) {
    int64_t n = devs ? 0 : w->ndecisions;
    fprintf(f, "ppv-trace 1\nranks %d\ndecisions %lld\n", w->P, (long long)n);
    for (int64_t k = 0; k < n;) { /* run-length: RANK COUNT */
        int64_t j = k;
        while (j < n && w->decisions[j] == w->decisions[k]) j++;
        fprintf(f, "%d %lld\n", w->decisions[k], (long long)(j - k));
        k = j;
    }
    if (devs) {
        fprintf(f, "deviations %lld\n", (long long)w->ndevs);
        for (int64_t k = 0; k < w->ndevs; k++)
            fprintf(f, "at %lld %d\n", (long long)w->dev_steps[k], w->dev_ranks[k]);
        fprintf(f, "then round-robin\n");
    }
    if (w->opt.fault.kind != PPV_FAULT_NONE)
        fprintf(f, "fault %s %lld\n", ppv_fault_name(w->opt.fault.kind),
                (long long)w->opt.fault.message);
    return ferror(f) ? -1 : 0;
}

int ppv_trace_write(FILE *f, const ppv_world *w) {
    return write_trace(f, w, 0);
}

int ppv_trace_write_deviations(FILE *f, const ppv_world *w) {
    return write_trace(f, w, 1);
}

int ppv_trace_read_deviations(const char *path, int64_t **steps, int32_t **ranks, int64_t *n,
                              char *err, size_t errlen) {
    *steps = NULL;
    *ranks = NULL;
    *n = 0;
    FILE *f = fopen(path, "r");
    if (!f) return ppv_errf(err, errlen, "%s: cannot open trace", path);
    char line[256];
    int rc = 0, ln = 0;
    int64_t cap = 0;
    long long announced = -1; /* the "deviations N" line's N */
    while (rc == 0 && fgets(line, sizeof line, f)) {
        ln++;
        if (strncmp(line, "deviations ", 11) == 0) {
            int end = 0;
            if (announced >= 0 || sscanf(line, "deviations %lld%n", &announced, &end) != 1 ||
                announced < 0 || (line[end] && line[end] != '\n'))
                rc = ppv_errf(err, errlen, "%s:%d: bad deviations line (expected 'deviations "
                              "N', once)", path, ln);
            continue;
        }
        if (strncmp(line, "at ", 3) != 0) continue;
        long long st;
        int r, end = 0;
        if (sscanf(line, "at %lld %d%n", &st, &r, &end) != 2 || (line[end] && line[end] != '\n') ||
            st < 0 || r < 0 || (*n && st <= (*steps)[*n - 1])) {
            rc = ppv_errf(err, errlen, "%s:%d: bad deviation (expected 'at STEP RANK', steps "
                          "rising)", path, ln);
            break;
        }
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            int64_t *s2 = realloc(*steps, (size_t)cap * sizeof *s2);
            if (s2) *steps = s2;
            int32_t *r2 = realloc(*ranks, (size_t)cap * sizeof *r2);
            if (r2) *ranks = r2;
            if (!s2 || !r2) {
                rc = ppv_errf(err, errlen, "%s: out of memory", path);
                break;
            }
        }
        (*steps)[*n] = st;
        (*ranks)[(*n)++] = r;
    }
    fclose(f);
    if (rc == 0 && (*n ? announced != *n : announced > 0))
        rc = ppv_errf(err, errlen, "%s: %lld 'at' lines, but the trace announces %lld "
                      "deviations", path, (long long)*n, announced < 0 ? 0 : announced);
    if (rc < 0) {
        free(*steps);
        free(*ranks);
        *steps = NULL;
        *ranks = NULL;
        *n = 0;
    }
    return rc;
}

int ppv_trace_read_then_rr(const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "r");
    if (!f) return ppv_errf(err, errlen, "%s: cannot open trace", path);
    char line[256];
    int rr = 0;
    while (fgets(line, sizeof line, f))
        if (strcmp(line, "then round-robin\n") == 0 || strcmp(line, "then round-robin") == 0)
            rr = 1;
    fclose(f);
    return rr;
}

int ppv_trace_read(const char *path, int64_t max_decisions, int32_t **decisions, int64_t *n,
                   int32_t *nranks, char *err, size_t errlen) {
    *decisions = NULL;
    *n = 0;
    FILE *f = fopen(path, "r");
    if (!f) return ppv_errf(err, errlen, "%s: cannot open trace", path);
    int version = 0, line = 3;
    long long total = 0;
    int32_t P = 0;
    if (fscanf(f, "ppv-trace %d\nranks %d\ndecisions %lld\n", &version, &P, &total) != 3 ||
        version != 1 || P < 1 || total < 0) {
        fclose(f);
        return ppv_errf(err, errlen, "%s:1:1: not a ppv trace (expected 'ppv-trace 1', 'ranks "
                        "N', 'decisions N')", path);
    }
    if (total > max_decisions) {
        fclose(f);
        return ppv_errf(err, errlen, "%s:3: %lld decisions (%.0f bytes in memory) are more than "
                        "the memory limit allows (%lld)", path, total, (double)total * 4.0,
                        (long long)max_decisions);
    }
    /* The runs first, in memory that grows with the file: the decisions
     * are allocated only once the runs are known to add up to them. */
    typedef struct run {
        int32_t rank;
        int64_t count;
    } run;
    run *runs = NULL;
    size_t nruns = 0, cap = 0;
    long long got = 0;
    int r, rc = 0;
    long long cnt;
    while (rc == 0 && fscanf(f, "%d %lld", &r, &cnt) == 2) {
        line++;
        if (r < 0 || r >= P || cnt < 1 || cnt > total - got) /* never got + cnt: it can overflow */
            rc = ppv_errf(err, errlen, "%s:%d: bad run '%d %lld' (rank 0..%d, %lld decisions "
                          "in all)", path, line, r, cnt, P - 1, total);
        else {
            if (nruns == cap) {
                size_t ncap = cap ? 2 * cap : 64;
                run *more = realloc(runs, ncap * sizeof *more);
                if (!more) {
                    rc = ppv_errf(err, errlen, "%s: out of memory", path);
                    break;
                }
                runs = more, cap = ncap;
            }
            runs[nruns++] = (run){r, cnt};
            got += cnt;
        }
    }
    /* what follows the runs, each read apart: a minimal trace's deviations
     * and round-robin tail (ppv_trace_read_deviations, _then_rr), the
     * fault (ppv_trace_read_fault) and a failure's verdict
     * (ppv_trace_read_verdict); any other word is malformed */
    char kind[16];
    int c, word = EOF;
    static const char *const tails[] = {"deviations", "at", "then", "fault", "reference",
                                        "verdict", "target"};
    while (rc == 0 && (word = fscanf(f, " %15[a-z]", kind)) == 1) {
        int known = 0;
        for (size_t k = 0; k < sizeof tails / sizeof tails[0]; k++)
            known |= !strcmp(kind, tails[k]);
        if (!known) break;
        line++;
        while ((c = fgetc(f)) != EOF && c != '\n') {
        }
    }
    if (rc == 0 && (got != total || word == 1 || fscanf(f, " %15s", kind) != EOF))
        rc = ppv_errf(err, errlen, "%s:%d: trace truncated or malformed (%lld of %lld decisions)",
                      path, line, got, total);
    fclose(f);
    int32_t *d = NULL;
    if (rc == 0 && !(d = malloc((size_t)(total ? total : 1) * sizeof *d)))
        rc = ppv_errf(err, errlen, "%s: out of memory for %lld decisions", path, total);
    for (size_t k = 0, i = 0; rc == 0 && k < nruns; k++)
        for (int64_t j = 0; j < runs[k].count; j++) d[i++] = runs[k].rank;
    free(runs);
    if (rc < 0) return rc;
    *decisions = d;
    *n = total;
    *nranks = P;
    return 0;
}

int ppv_trace_write_verdict(FILE *f, const ppv_trace_verdict *v) {
    if (!v->present) return 0;
    fprintf(f, "reference %016" PRIx64 "\nverdict ", v->reference);
    for (const char *p = v->failure; *p; p++) /* one line */
        fputc(*p == '\n' || *p == '\r' ? ' ' : *p, f);
    fputc('\n', f);
    if (v->target[0]) {
        fputs("target ", f);
        for (const char *p = v->target; *p; p++)
            fputc(*p == '\n' || *p == '\r' ? ' ' : *p, f);
        fputc('\n', f);
    }
    return ferror(f) ? -1 : 0;
}

int ppv_trace_read_verdict(const char *path, ppv_trace_verdict *v, char *err, size_t errlen) {
    memset(v, 0, sizeof *v);
    FILE *f = fopen(path, "r");
    if (!f) return ppv_errf(err, errlen, "%s: cannot open trace", path);
    char line[1200];
    int rc = 0, n = 0, seen = 0;
    while (rc == 0 && fgets(line, sizeof line, f)) {
        n++;
        size_t len = strcspn(line, "\n");
        if (line[len] != '\n' && !feof(f)) { /* longer than a verdict: skip its rest */
            int c;
            while ((c = fgetc(f)) != EOF && c != '\n') {
            }
        }
        line[len] = '\0';
        if (strncmp(line, "reference ", 10) == 0) {
            char *end;
            errno = 0;
            unsigned long long x = strtoull(line + 10, &end, 16);
            if (errno || end == line + 10 || *end || strlen(line + 10) != 16)
                rc = ppv_errf(err, errlen, "%s:%d: bad reference line (expected 'reference' and "
                              "16 hex digits)", path, n);
            v->reference = (uint64_t)x;
            seen |= 1;
        } else if (strncmp(line, "verdict ", 8) == 0) {
            snprintf(v->failure, sizeof v->failure, "%.1023s", line + 8);
            seen |= 2;
        } else if (strncmp(line, "target ", 7) == 0) {
            snprintf(v->target, sizeof v->target, "%.1023s", line + 7);
        }
    }
    fclose(f);
    if (rc == 0 && seen && seen != 3)
        rc = ppv_errf(err, errlen, "%s: a trace's verdict needs both its 'reference' and its "
                      "'verdict' line", path);
    v->present = rc == 0 && seen == 3;
    return rc;
}

int ppv_trace_read_fault(const char *path, ppv_fault *fault, char *err, size_t errlen) {
    memset(fault, 0, sizeof *fault);
    FILE *f = fopen(path, "r");
    if (!f) return ppv_errf(err, errlen, "%s: cannot open trace", path);
    char line[256];
    int rc = 0, n = 0;
    while (fgets(line, sizeof line, f)) {
        n++;
        char kind[16];
        long long at;
        if (strncmp(line, "fault ", 6) != 0) continue;
        ppv_fault_kind k;
        if (sscanf(line, "fault %15s %lld", kind, &at) != 2 || ppv_fault_parse(kind, &k) < 0 ||
            k == PPV_FAULT_NONE || at < 0) {
            rc = ppv_errf(err, errlen, "%s:%d: bad fault line (expected 'fault drop|duplicate|"
                          "corrupt|kill|delay|eager|cut N')", path, n);
            break;
        }
        fault->kind = k;
        fault->message = at;
    }
    fclose(f);
    return rc;
}
