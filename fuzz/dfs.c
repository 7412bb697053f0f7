/* dfs.c - exhaustive exploration: depth-first over the scheduler's
 * decisions, running the target again from its start for every branch
 * (stateless search), with dynamic partial-order reduction in its
 * source-set form (Abdulla, Aronis, Jonsson and Sagonas, POPL 2014) and
 * sleep sets (Godefroid, 1996), so that each class of equivalent
 * interleavings is run to its end once.
 *
 * Which steps can be reordered is the transport's to say (ppv_step): a
 * probe and a send on the probed channel are dependent, every other pair
 * of steps of two ranks commutes. Happens-before is each rank's program
 * order, the transport's own edges (the send a receive took, ...) and the
 * dependent pairs in the order they ran, kept as vector clocks. After
 * every step, an earlier dependent step of another rank that happens
 * before it only through that dependence is a race. To reverse it, the
 * state before the earlier step must begin the steps after it that do not
 * depend on it, and then the later one: one rank that can begin them (an
 * initial) joins that state's backtrack set, unless one is there. (Taking
 * the later step's own rank, as the first DPOR did, misses classes once
 * sleep sets prune: tests/mutants/dfs_backtracks_the_later_rank.patch.) A
 * rank explored from a state sleeps in the states below for as long as
 * the steps taken commute with its own; a run whose runnable ranks all
 * sleep ends early (pruned: its rest repeats an explored class). The
 * search is complete when no state on the path has a backtrack rank left
 * that is neither done nor asleep.
 */
#include <stdlib.h>
#include <string.h>

#include "fuzz_internal.h"

typedef struct sleeper {
    int32_t rank;
    int64_t off; /* its step's touch list in the pool */
    int32_t len;
} sleeper;

typedef struct dfs {
    int32_t P;
    int64_t n;      /* states on the path with a step taken from them */
    int64_t cap;    /* allocated states */
    int64_t branch; /* the state whose choice is new in this run (-1: none yet) */
    /* per state k (rows of P): */
    unsigned char *enabled, *backtrack, *done;
    unsigned char *foreign; /* a branch another process of a campaign explores */
    int64_t *doneoff; /* touch list of a done rank's step from k */
    int32_t *donelen;
    int32_t *vc; /* the vector clock of step k */
    /* per state k: */
    int32_t *chosen;
    int32_t *local;   /* step k is its rank's local[k]-th (from 1) */
    int64_t *evoff;   /* step k's touch list */
    int32_t *evlen;
    int64_t *fpmark;  /* the pool's length after state k's last touch list */
    int64_t *sloff;   /* state k's sleep set in the sleeper pool */
    int32_t *sllen;
    /* pools */
    ppv_touch *fp;
    int64_t nfp, capfp;
    sleeper *sl;
    int64_t nsl, capsl;
    int64_t *probes; /* steps that probe, in order */
    int64_t nprobes, capprobes;
    int64_t *last;   /* [P] each rank's latest step on the path (-1) */
    int32_t *base;   /* [P] scratch: a step's clock before dependent steps join */
    unsigned char *scratch; /* [P] */
    int64_t *deps;   /* scratch: the steps one step depends on */
    int64_t capdeps;
    int oom;
    int64_t diverged; /* the step at which a replayed prefix ran differently (-1) */
} dfs;

static int grow(void **p, int64_t *cap, int64_t need, size_t size) {
    if (need <= *cap) return 0;
    int64_t c = *cap ? *cap : 256;
    while (c < need) c *= 2;
    void *q = realloc(*p, (size_t)c * size);
    if (!q) return -1;
    *p = q;
    *cap = c;
    return 0;
}

/* Room for state k. */
static int reserve(dfs *d, int64_t k) {
    if (k < d->cap) return 0;
    int64_t c = d->cap ? 2 * d->cap : 1024;
    while (c <= k) c *= 2;
    size_t P = (size_t)d->P, C = (size_t)c;
#define REGROW(f, n)                                    \
    do {                                                \
        void *q = realloc(d->f, (n) * sizeof *d->f);    \
        if (!q) return -1;                              \
        d->f = q;                                       \
    } while (0)
    REGROW(enabled, C * P);
    REGROW(backtrack, C * P);
    REGROW(done, C * P);
    REGROW(foreign, C * P);
    REGROW(doneoff, C * P);
    REGROW(donelen, C * P);
    REGROW(vc, C * P);
    REGROW(chosen, C);
    REGROW(local, C);
    REGROW(evoff, C);
    REGROW(evlen, C);
    REGROW(fpmark, C);
    REGROW(sloff, C);
    REGROW(sllen, C);
#undef REGROW
    d->cap = c;
    return 0;
}

static void dfs_free(dfs *d) {
    free(d->enabled), free(d->backtrack), free(d->done), free(d->doneoff), free(d->donelen);
    free(d->foreign);
    free(d->vc), free(d->chosen), free(d->local), free(d->evoff), free(d->evlen);
    free(d->fpmark), free(d->sloff), free(d->sllen), free(d->fp), free(d->sl);
    free(d->probes), free(d->last), free(d->base), free(d->scratch), free(d->deps);
}

/* Whether two touch lists hold a probe and the send it would find first. */
static int dependent(const ppv_touch *a, int32_t na, const ppv_touch *b, int32_t nb) {
    for (int32_t i = 0; i < na; i++)
        for (int32_t j = 0; j < nb; j++)
            if (a[i].channel == b[j].channel && a[i].seq == b[j].seq && a[i].kind != b[j].kind)
                return 1;
    return 0;
}

static int has_kind(const ppv_touch *t, int32_t n, int32_t kind) {
    for (int32_t i = 0; i < n; i++)
        if (t[i].kind == kind) return 1;
    return 0;
}

static int asleep(const dfs *d, int64_t k, int32_t r) {
    for (int32_t i = 0; i < d->sllen[k]; i++)
        if (d->sl[d->sloff[k] + i].rank == r) return 1;
    return 0;
}

static int add_sleeper(dfs *d, int32_t rank, int64_t off, int32_t len) {
    if (grow((void **)&d->sl, &d->capsl, d->nsl + 1, sizeof *d->sl) < 0) return -1;
    d->sl[d->nsl++] = (sleeper){rank, off, len};
    return 0;
}

/* Ready for the next run: the path's states up to the branch stay, with
 * the branch's new choice; everything below it is dropped. */
static void begin_run(dfs *d) {
    d->diverged = -1;
    if (d->branch < 0) {
        d->n = d->nfp = d->nsl = d->nprobes = 0;
    } else {
        int64_t b = d->branch;
        d->n = b + 1;
        d->nfp = d->fpmark[b];
        d->nsl = d->sloff[b] + d->sllen[b];
        while (d->nprobes && d->probes[d->nprobes - 1] >= b) d->nprobes--;
    }
    if (!d->last) return; /* the first run sizes everything at its first step */
    for (int32_t r = 0; r < d->P; r++) d->last[r] = -1;
    int64_t upto = d->branch < 0 ? 0 : d->branch;
    for (int64_t k = 0; k < upto; k++) d->last[d->chosen[k]] = k;
}

static int32_t choose(void *ctx, int64_t k, const unsigned char *ready, int32_t P) {
    dfs *d = ctx;
    if (!d->last) { /* the first step of the first run */
        d->P = P;
        d->last = malloc((size_t)P * sizeof *d->last);
        d->base = malloc((size_t)P * sizeof *d->base);
        d->scratch = malloc((size_t)P);
        /* the pools exist from the start: offsets into them are never taken from NULL */
        if (!d->last || !d->base || !d->scratch ||
            grow((void **)&d->fp, &d->capfp, 1, sizeof *d->fp) < 0 ||
            grow((void **)&d->sl, &d->capsl, 1, sizeof *d->sl) < 0 ||
            grow((void **)&d->probes, &d->capprobes, 1, sizeof *d->probes) < 0 ||
            grow((void **)&d->deps, &d->capdeps, 1, sizeof *d->deps) < 0)
            goto oom;
        for (int32_t r = 0; r < P; r++) d->last[r] = -1;
    }
    if (P != d->P) goto diverged;
    if (k < d->n) { /* on the kept path: the same decisions give the same states */
        if (memcmp(&d->enabled[(size_t)k * (size_t)P], ready, (size_t)P)) goto diverged;
        return d->chosen[k];
    }
    if (k != d->n) goto diverged;
    if (reserve(d, k) < 0) goto oom;
    size_t row = (size_t)k * (size_t)P;
    memcpy(&d->enabled[row], ready, (size_t)P);
    memset(&d->backtrack[row], 0, (size_t)P);
    memset(&d->done[row], 0, (size_t)P);
    memset(&d->foreign[row], 0, (size_t)P);
    /* the sleep set: the parent's sleepers and the ranks explored from the
     * parent before, as long as the parent's step commutes with theirs (a
     * branch another process explores was never run here: its step is not
     * known, and it does not sleep) */
    d->sloff[k] = d->nsl;
    d->sllen[k] = 0;
    if (k > 0) {
        int64_t p = k - 1;
        size_t prow = (size_t)p * (size_t)P;
        const ppv_touch *t = d->fp + d->evoff[p];
        int32_t nt = d->evlen[p];
        for (int32_t i = 0; i < d->sllen[p]; i++) {
            sleeper s = d->sl[d->sloff[p] + i];
            if (!dependent(d->fp + s.off, s.len, t, nt)) {
                if (add_sleeper(d, s.rank, s.off, s.len) < 0) goto oom;
                d->sllen[k]++;
            }
        }
        for (int32_t r = 0; r < P; r++)
            if (d->done[prow + (size_t)r] && !d->foreign[prow + (size_t)r] &&
                r != d->chosen[p] && !asleep(d, p, r) &&
                !dependent(d->fp + d->doneoff[prow + (size_t)r], d->donelen[prow + (size_t)r], t,
                           nt)) {
                if (add_sleeper(d, r, d->doneoff[prow + (size_t)r], d->donelen[prow + (size_t)r]) <
                    0)
                    goto oom;
                d->sllen[k]++;
            }
    }
    for (int32_t r = 0; r < P; r++)
        if (ready[r] && !asleep(d, k, r)) {
            d->chosen[k] = r;
            d->done[row + (size_t)r] = d->backtrack[row + (size_t)r] = 1;
            d->n = k + 1;
            return r;
        }
    d->nsl = d->sloff[k]; /* every runnable rank sleeps: the run ends here */
    return -1;
diverged:
    d->diverged = k;
    return -1;
oom:
    d->oom = 1;
    return -1;
}

static void join(int32_t *into, const int32_t *from, int32_t P) {
    for (int32_t q = 0; q < P; q++)
        if (from[q] > into[q]) into[q] = from[q];
}

/* Whether step a happens before step b (a < b). */
static int before(const dfs *d, int64_t a, int64_t b) {
    return d->vc[(size_t)b * (size_t)d->P + (size_t)d->chosen[a]] >= d->local[a];
}

/* The race of step j with the later step k (source-DPOR: Abdulla et al.,
 * POPL 2014). To reverse it, the state before j must start what comes
 * after j without depending on j, and then k: a rank that starts that
 * sequence (one of its initials) joins j's backtrack set, unless one is
 * there already. */
static void race(dfs *d, int64_t j, int64_t k) {
    int32_t P = d->P;
    size_t row = (size_t)j * (size_t)P;
    int32_t pick = -1;
    unsigned char *seen = d->scratch;
    memset(seen, 0, (size_t)P);
    for (int64_t e = j + 1; e <= k; e++) {
        if (e < k && before(d, j, e)) continue; /* not in the sequence */
        int32_t q = d->chosen[e];
        if (seen[q]) continue;
        seen[q] = 1;
        int initial = 1;
        for (int64_t f = j + 1; f < e && initial; f++)
            if (!before(d, j, f) && before(d, f, e)) initial = 0;
        if (!initial) continue;
        if (d->backtrack[row + (size_t)q]) return; /* an initial is there already */
        if (pick < 0 && d->enabled[row + (size_t)q]) pick = q;
    }
    if (pick >= 0)
        d->backtrack[row + (size_t)pick] = 1;
    else /* cannot happen with steps that only wait on what happens before them */
        for (int32_t q = 0; q < P; q++) d->backtrack[row + (size_t)q] |= d->enabled[row + (size_t)q];
}

static void ran(void *ctx, int64_t k, const ppv_step *st) {
    dfs *d = ctx;
    if (d->oom || d->diverged >= 0) return;
    if (d->branch >= 0 && k < d->branch) return; /* kept: the same step as before */
    int32_t P = d->P, r = st->rank;
    size_t row = (size_t)k * (size_t)P;
    if (grow((void **)&d->fp, &d->capfp, d->nfp + st->ntouch, sizeof *d->fp) < 0 ||
        grow((void **)&d->deps, &d->capdeps, k + 1, sizeof *d->deps) < 0) {
        d->oom = 1;
        return;
    }
    d->evoff[k] = d->nfp;
    d->evlen[k] = st->ntouch;
    if (st->ntouch) memcpy(d->fp + d->nfp, st->touch, (size_t)st->ntouch * sizeof *d->fp);
    d->nfp += st->ntouch;
    d->fpmark[k] = d->nfp;
    d->doneoff[row + (size_t)r] = d->evoff[k];
    d->donelen[row + (size_t)r] = st->ntouch;
    int64_t prev = d->last[r];
    d->local[k] = prev >= 0 ? d->local[prev] + 1 : 1;
    /* the clock from program order and the transport's edges */
    int32_t *vc = &d->vc[row];
    if (prev >= 0) memcpy(vc, &d->vc[(size_t)prev * (size_t)P], (size_t)P * sizeof *vc);
    else memset(vc, 0, (size_t)P * sizeof *vc);
    for (int32_t i = 0; i < st->nafter; i++)
        if (st->after[i] >= 0 && st->after[i] < k)
            join(vc, &d->vc[(size_t)st->after[i] * (size_t)P], P);
    vc[r] = d->local[k];
    memcpy(d->base, vc, (size_t)P * sizeof *vc);
    /* the earlier steps of other ranks it depends on */
    const ppv_touch *t = st->touch;
    int32_t nt = st->ntouch;
    int64_t ndeps = 0;
    if (has_kind(t, nt, PPV_TOUCH_SEND)) /* earlier probes of the channels */
        for (int64_t i = 0; i < d->nprobes; i++) {
            int64_t j = d->probes[i];
            if (d->chosen[j] != r && dependent(d->fp + d->evoff[j], d->evlen[j], t, nt))
                d->deps[ndeps++] = j;
        }
    if (has_kind(t, nt, PPV_TOUCH_PROBE)) /* earlier sends on them */
        for (int64_t j = 0; j < k; j++)
            if (d->chosen[j] != r && d->evlen[j] &&
                dependent(d->fp + d->evoff[j], d->evlen[j], t, nt))
                d->deps[ndeps++] = j;
    for (int64_t i = 0; i < ndeps; i++) join(vc, &d->vc[(size_t)d->deps[i] * (size_t)P], P);
    /* a race: j happens before k neither by the clock without dependences
     * nor through another dependent step */
    for (int64_t i = 0; i < ndeps; i++) {
        int64_t j = d->deps[i];
        int32_t q = d->chosen[j];
        if (d->base[q] >= d->local[j]) continue;
        int ordered = 0;
        for (int64_t m = 0; m < ndeps && !ordered; m++)
            ordered = m != i && d->deps[m] > j && before(d, j, d->deps[m]);
        if (!ordered) race(d, j, k);
    }
    d->last[r] = k;
    if (has_kind(t, nt, PPV_TOUCH_PROBE)) {
        if (grow((void **)&d->probes, &d->capprobes, d->nprobes + 1, sizeof *d->probes) < 0) {
            d->oom = 1;
            return;
        }
        d->probes[d->nprobes++] = k;
    }
}

/* The next branch: the deepest state with a backtrack rank neither done
 * nor asleep. 0 when there is none (the search is complete). */
static int next_branch(dfs *d) {
    for (int64_t k = d->n - 1; k >= 0; k--) {
        size_t row = (size_t)k * (size_t)d->P;
        for (int32_t r = 0; r < d->P; r++) {
            if (!d->backtrack[row + (size_t)r] || d->done[row + (size_t)r]) continue;
            d->done[row + (size_t)r] = 1;
            if (asleep(d, k, r) || d->foreign[row + (size_t)r]) continue;
            d->chosen[k] = r;
            d->branch = k;
            return 1;
        }
    }
    return 0;
}

/* A campaign's split of the search (ppv_fuzz_campaign): after the first
 * run, which every process makes alike, the branches it left open are
 * numbered in the order next_branch takes them and the k-th goes to
 * process k mod size; the others' are foreign here. A branch found later
 * is explored by the process that finds it. */
static void split(dfs *d, int32_t rank, int32_t size) {
    int64_t j = 0;
    for (int64_t k = d->n - 1; k >= 0; k--) {
        size_t row = (size_t)k * (size_t)d->P;
        for (int32_t r = 0; r < d->P; r++)
            if (d->backtrack[row + (size_t)r] && !d->done[row + (size_t)r] &&
                j++ % size != rank)
                d->foreign[row + (size_t)r] = 1;
    }
}

/* What a search has made: runs, classes run to their end, runs pruned. */
typedef struct counts {
    int64_t runs, classes, pruned;
} counts;

/* One run of the search, counted in *c: 0 when it passed, 1 when it
 * failed (kept in *failing), -1 with err. */
static int one_run(const target *tg, dfs *d, const ppv_policy *pol, counts *rep,
                   outcome *failing, char *err, size_t errlen) {
    static const ppv_fault none = {PPV_FAULT_NONE, 0};
    begin_run(d);
    outcome out;
    if (fuzz_run_once(tg, pol, &none, 1, &out, err, errlen) < 0) return -1;
    rep->runs++;
    if (d->oom) {
        ppv_world_free(out.world);
        snprintf(err, errlen, "out of memory exploring run %lld", (long long)rep->runs - 1);
        return -1;
    }
    if (d->diverged >= 0) {
        ppv_world_free(out.world);
        snprintf(err, errlen,
                 "the target is not deterministic: replaying the same decisions, step %lld "
                 "found other ranks runnable",
                 (long long)d->diverged);
        return -1;
    }
    if (out.pruned) rep->pruned++;
    else rep->classes++;
    if (!out.pass) {
        *failing = out;
        return 1;
    }
    ppv_world_free(out.world);
    return 0;
}

/* The search split across a campaign's processes, in rounds: each process
 * runs its share of the round's runs, then all compare; the campaign ends
 * at a round in which one found a failure (the first such process's run,
 * replayed on every process from its decisions), when every share is
 * explored, or at the options' limits. rep holds the sums. */
static int dfs_campaign(const target *tg, dfs *d, const ppv_policy *pol, ppv_fuzz_report *rep,
                        outcome *failing, double t0, char *err, size_t errlen) {
    const ppv_fuzz_options *o = tg->o;
    const ppv_fuzz_campaign *c = o->campaign;
    int32_t N = c->size;
    round_state *all = calloc((size_t)N, sizeof *all);
    rep->nprocesses = N;
    rep->process_runs = calloc((size_t)N, sizeof *rep->process_runs);
    if (!all || !rep->process_runs) {
        free(all);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int64_t chunk = 1, total = rep->runs, before = rep->runs;
    counts here = {0, 0, 0}; /* this process's */
    int state = 0, split_done = 0, rc = 0; /* state: 1 found, 2 this share explored */
    outcome mine;
    memset(&mine, 0, sizeof mine);
    for (;;) {
        round_state me;
        memset(&me, 0, sizeof me);
        int64_t quota = chunk;
        if (o->runs > 0) { /* the runs left, in nearly equal parts */
            int64_t left = o->runs - total;
            int64_t part = left * (c->rank + 1) / N - left * c->rank / N;
            if (part < quota) quota = part;
        }
        double t = fuzz_now();
        for (int64_t q = 0; q < quota && state == 0; q++) {
            int st = one_run(tg, d, pol, &here, &mine, err, errlen);
            if (st < 0) {
                me.failed = 1;
                snprintf(me.err, sizeof me.err, "%s", err);
                break;
            }
            if (st == 1) {
                state = 1;
                break;
            }
            if (!split_done) {
                split(d, c->rank, N);
                split_done = 1;
            }
            if (!next_branch(d)) state = 2;
        }
        me.runs = here.runs;
        me.classes = here.classes;
        me.pruned = here.pruned;
        me.found = state == 1;
        me.complete = state == 2;
        me.busy = fuzz_now() - t;
        me.elapsed = fuzz_now() - t0;
        if (campaign_exchange(c, &me, all, err, errlen) < 0 ||
            campaign_failed(c, all, err, errlen) == 0) {
            rc = -1;
            break;
        }
        int32_t finder = -1, complete = 1;
        int64_t classes = 0, pruned = 0;
        double elapsed = 0;
        total = before;
        for (int32_t i = N - 1; i >= 0; i--) {
            total += all[i].runs;
            classes += all[i].classes;
            pruned += all[i].pruned;
            if (all[i].found) finder = i;
            complete &= all[i].complete;
            if (all[i].elapsed > elapsed) elapsed = all[i].elapsed;
        }
        if (finder >= 0) { /* its decisions, to every process */
            int64_t n = 0, got = 0;
            const int32_t *dec = c->rank == finder ? ppv_world_decisions(mine.world, &n) : NULL;
            void *each = NULL;
            rc = campaign_gather(c, dec, n, sizeof *dec, &each, &got, err, errlen);
            ppv_world_free(mine.world);
            mine.world = NULL;
            ppv_policy again = {.kind = PPV_POLICY_REPLAY, .replay = each, .nreplay = got};
            static const ppv_fault none = {PPV_FAULT_NONE, 0};
            if (rc == 0 && fuzz_run_once(tg, &again, &none, 1, failing, err, errlen) < 0)
                rc = -1;
            free(each);
            if (rc == 0 && failing->pass) {
                snprintf(err, errlen, "process %d's failing run passed when replayed here: the "
                         "processes do not run the same target", finder);
                ppv_world_free(failing->world);
                rc = -1;
            }
            if (rc == 0) {
                rep->found = 1;
                rep->failing_run = total - 1;
            }
        }
        rep->runs = total;
        for (int32_t i = 0; i < N && rep->process_runs; i++) rep->process_runs[i] = all[i].runs;
        rep->classes = classes;
        rep->pruned = pruned;
        rep->complete = finder < 0 && complete;
        if (rc < 0 || finder >= 0 || complete) break;
        if ((o->runs > 0 && total >= o->runs) || (o->seconds > 0 && elapsed >= o->seconds))
            break;
        if (o->progress && c->rank == 0) {
            ppv_fuzz_progress pr = {total, classes, elapsed};
            o->progress(o->progress_ctx, &pr);
        }
        chunk = campaign_grow(all, N, chunk);
    }
    ppv_world_free(mine.world);
    free(all);
    return rc;
}

int fuzz_dfs(const target *tg, ppv_fuzz_report *rep, outcome *failing, double t0, char *err,
             size_t errlen) {
    const ppv_fuzz_options *o = tg->o;
    dfs d;
    memset(&d, 0, sizeof d);
    d.branch = -1;
    ppv_explorer ex = {choose, ran, &d};
    ppv_policy pol;
    memset(&pol, 0, sizeof pol);
    pol.kind = PPV_POLICY_EXPLORE;
    pol.explorer = &ex;
    int rc = 0;
    if (campaign_on(o)) {
        rc = dfs_campaign(tg, &d, &pol, rep, failing, t0, err, errlen);
        dfs_free(&d);
        return rc;
    }
    double shown = t0;
    for (;;) {
        double t = fuzz_now();
        if ((o->runs > 0 && rep->runs >= o->runs) || (o->seconds > 0 && t - t0 >= o->seconds))
            break;
        if (o->progress && t - shown >= 0.2) {
            ppv_fuzz_progress pr = {rep->runs, rep->classes, t - t0};
            o->progress(o->progress_ctx, &pr);
            shown = t;
        }
        counts c = {rep->runs, rep->classes, rep->pruned};
        int st = one_run(tg, &d, &pol, &c, failing, err, errlen);
        rep->runs = c.runs;
        rep->classes = c.classes;
        rep->pruned = c.pruned;
        if (st < 0) {
            rc = -1;
            break;
        }
        if (st == 1) {
            rep->found = 1;
            rep->failing_run = rep->runs - 1;
            break;
        }
        if (!next_branch(&d)) {
            rep->complete = 1;
            break;
        }
    }
    dfs_free(&d);
    return rc;
}
