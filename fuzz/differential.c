/* differential.c - the checker against the engine. Random schedules from
 * the generators, lowered with their messages, are mutated (two adjacent
 * actions of a rank swapped, a send or receive moved a few places) and
 * judged twice under each send semantics: by `ppv check`, statically, and
 * by the engine under the exhaustive explorer (dfs), which either finds a
 * deadlock (or a hang) or runs every class of interleavings to its end.
 * The two must agree on every schedule the checker finds well formed; a
 * run that completes must also match the one-rank reference's gradients
 * and the checker's memory prediction. A disagreement is minimised (the
 * fewest of its mutations that keep it) and reported with the schedule.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_internal.h"

static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

/* A stream of draws from one seed. */
typedef struct draws {
    uint64_t seed, n;
} draws;

static uint64_t draw(draws *d, uint64_t below) {
    return mix(d->seed * 0x9E3779B97F4A7C15ULL + ++d->n) % (below ? below : 1);
}

/* One mutation: at rank's action pos, swap it with the next (offset 0) or
 * move it by offset places. */
typedef struct mutation {
    int32_t rank, pos, offset;
} mutation;

static ppv_schedule *clone(const ppv_schedule *s) {
    ppv_schedule *c = ppv_schedule_new(s->nranks);
    if (!c) return NULL;
    for (int32_t g = 0; g < s->ngroups; g++)
        if (ppv_schedule_add_group(c, s->groups[g].name, s->groups[g].ranks, s->groups[g].n) < 0)
            goto fail;
    for (int32_t r = 0; r < s->nranks; r++)
        for (int32_t i = 0; i < s->prog[r].n; i++)
            if (ppv_schedule_append(c, r, &s->prog[r].acts[i]) < 0) goto fail;
    c->nmb = s->nmb;
    char err[256];
    if (ppv_schedule_finish(c, err, sizeof err) < 0) goto fail;
    snprintf(c->name, sizeof c->name, "%s", s->name);
    return c;
fail:
    ppv_schedule_free(c);
    return NULL;
}

static int is_message(const ppv_action *a) {
    return a->kind == PPV_ACT_SEND_F || a->kind == PPV_ACT_SEND_B || a->kind == PPV_ACT_RECV_F ||
           a->kind == PPV_ACT_RECV_B;
}

static void apply(ppv_schedule *s, const mutation *m) {
    ppv_program *p = &s->prog[m->rank];
    if (m->pos < 0 || m->pos >= p->n) return;
    int32_t to = m->offset ? m->pos + m->offset : m->pos + 1;
    if (to < 0) to = 0;
    if (to >= p->n) to = p->n - 1;
    if (!m->offset) { /* swap with the next */
        ppv_action t = p->acts[m->pos];
        p->acts[m->pos] = p->acts[to];
        p->acts[to] = t;
        return;
    }
    ppv_action a = p->acts[m->pos];
    if (to > m->pos)
        memmove(&p->acts[m->pos], &p->acts[m->pos + 1], (size_t)(to - m->pos) * sizeof a);
    else
        memmove(&p->acts[to + 1], &p->acts[to], (size_t)(m->pos - to) * sizeof a);
    p->acts[to] = a;
}

/* Draws a mutation of s: half swap two adjacent actions, half move a
 * message by up to three places either way. */
static mutation draw_mutation(const ppv_schedule *s, draws *d) {
    mutation m = {(int32_t)draw(d, (uint64_t)s->nranks), 0, 0};
    const ppv_program *p = &s->prog[m.rank];
    if (p->n < 2) return m;
    if (draw(d, 2)) {
        m.pos = (int32_t)draw(d, (uint64_t)p->n - 1);
        return m;
    }
    int32_t msgs = 0;
    for (int32_t i = 0; i < p->n; i++) msgs += is_message(&p->acts[i]);
    if (!msgs) return m;
    int32_t k = (int32_t)draw(d, (uint64_t)msgs);
    for (int32_t i = 0; i < p->n; i++)
        if (is_message(&p->acts[i]) && k-- == 0) m.pos = i;
    m.offset = (int32_t)draw(d, 6) - 3;
    if (m.offset >= 0) m.offset++; /* -3..-1, 1..3 */
    return m;
}

/* The verdicts on one schedule under one semantics. */
typedef struct verdict {
    int valid;      /* the checker found no error */
    int check_dead; /* the checker: some rank can never finish */
    int run_dead;   /* the engine: a deadlock or hang in some class */
    int run_bad;    /* the engine: another failure (gradients, memory, a check) */
    int complete;   /* the explorer covered every class */
    char why[1024];
} verdict;

/* The engine's run: a small model, since what is judged is the order of
 * the messages (their size is the model's activation, 2 x T x C bytes). */
static ppv_run_options small_run(void) {
    ppv_run_options ro = ppv_run_defaults();
    ro.model.d_model = 8;
    ro.model.n_heads = 2;
    ro.model.d_ff = 16;
    ro.model.seq_len = 4;
    ro.model.cond_len = 2;
    return ro;
}

static int judge(const ppv_schedule *s, const ppv_semantics *sem, int64_t msg_bytes,
                 const ppv_fuzz_differential_options *o, verdict *v, char *err, size_t errlen) {
    memset(v, 0, sizeof *v);
    ppv_check_options co = ppv_check_defaults();
    co.sem = *sem;
    co.msg_bytes = msg_bytes;
    ppv_check_report *cr = NULL;
    int rc = o->check ? o->check(o->check_ctx, s, &co, &cr, err, errlen)
                      : ppv_schedule_check(s, &co, &cr, err, errlen);
    if (rc < 0) return -1;
    v->valid = cr->nerrors == 0 && cr->errors_total == 0;
    v->check_dead = cr->deadlock;
    ppv_check_report_free(cr);
    if (!v->valid) return 0;
    ppv_fuzz_options fo;
    memset(&fo, 0, sizeof fo);
    fo.strategy = PPV_FUZZ_DFS;
    fo.pct_depth = 2;
    fo.runs = o->runs_per_schedule > 0 ? o->runs_per_schedule : 1000;
    fo.schedule = s;
    fo.run = small_run();
    fo.run.sem = *sem;
    fo.run.watchdog_steps = 10000;
    ppv_fuzz_report *fr = NULL;
    if (ppv_fuzz(&fo, &fr, err, errlen) < 0) return -1;
    v->complete = fr->complete || fr->found;
    if (fr->found) {
        v->run_dead = strstr(fr->failure, "deadlock") || strstr(fr->failure, "hang:");
        v->run_bad = !v->run_dead;
        snprintf(v->why, sizeof v->why, "%s", fr->failure);
    }
    ppv_fuzz_report_free(fr);
    return 0;
}

static int disagree(const verdict *v) {
    return v->valid && v->complete && (v->check_dead != v->run_dead || v->run_bad);
}

static ppv_schedule *mutated(const ppv_schedule *base, const mutation *ms, int n,
                             const int *keep) {
    ppv_schedule *s = clone(base);
    for (int i = 0; s && i < n; i++)
        if (!keep || keep[i]) apply(s, &ms[i]);
    return s;
}

static const char *const kinds[] = {"1f1b", "gpipe", "interleaved-1f1b", "zb-h1", "zbv",
                                    "dualpipev"};

int ppv_fuzz_differential(const ppv_fuzz_differential_options *o,
                          ppv_fuzz_differential_report **out, char *err, size_t errlen) {
    *out = NULL;
    if (o->schedules <= 0 && !(o->seconds > 0)) {
        snprintf(err, errlen, "give a number of schedules or a time");
        return -1;
    }
    ppv_fuzz_differential_report *rep = calloc(1, sizeof *rep);
    if (!rep) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    ppv_run_options ro = small_run();
    double t0 = fuzz_now(), shown = t0;
    for (int64_t i = 0;; i++) {
        double t = fuzz_now();
        if ((o->schedules > 0 && i >= o->schedules) || (o->seconds > 0 && t - t0 >= o->seconds))
            break;
        if (o->progress && t - shown >= 0.2) {
            o->progress(o->progress_ctx, rep);
            shown = t;
        }
        draws d = {o->seed + (uint64_t)i, 0};
        const char *kind = kinds[draw(&d, sizeof kinds / sizeof kinds[0])];
        ppv_gen_params gp = {2 + (int32_t)draw(&d, 3), 0, 0};
        gp.microbatches = gp.ranks + (int32_t)draw(&d, (uint64_t)gp.ranks + 1);
        if (!strcmp(kind, "zbv") || !strcmp(kind, "dualpipev") ||
            !strcmp(kind, "interleaved-1f1b"))
            gp.microbatches = 2 * gp.ranks; /* what these kinds take */
        ppv_schedule *gen = NULL, *low = NULL;
        char gerr[256];
        if (ppv_generate(kind, &gp, &gen, gerr, sizeof gerr) < 0) {
            rep->skipped++;
            continue;
        }
        ppv_model_config cfg = ppv_run_model_config(&ro, gen);
        int64_t msg = (int64_t)cfg.seq_len * cfg.d_model * 2; /* a bf16 activation */
        ppv_costs costs = ppv_check_defaults().costs;
        int lrc = ppv_schedule_lower(gen, &costs, msg, &low, gerr, sizeof gerr);
        ppv_schedule_free(gen);
        if (lrc != 0) {
            rep->skipped++;
            continue;
        }
        snprintf(low->name, sizeof low->name, "%s p=%d m=%d (seed %" PRIu64 ")", kind,
                 gp.ranks, gp.microbatches, o->seed + (uint64_t)i);
        mutation ms[3];
        int nm = (int)draw(&d, 4); /* 0..3 mutations */
        for (int k = 0; k < nm; k++) ms[k] = draw_mutation(low, &d);
        ppv_semantics sems[3] = {{PPV_SEM_RENDEZVOUS, 0}, {PPV_SEM_EAGER, 0},
                                 {PPV_SEM_EAGER_BYTES, draw(&d, 2) ? msg : msg - 1}};
        ppv_schedule *s = mutated(low, ms, nm, NULL);
        if (!s) {
            ppv_schedule_free(low);
            snprintf(err, errlen, "out of memory");
            goto fail;
        }
        rep->schedules++;
        for (int k = 0; k < 3 && !rep->found; k++) {
            verdict v;
            if (judge(s, &sems[k], msg, o, &v, err, errlen) < 0) {
                ppv_schedule_free(s);
                ppv_schedule_free(low);
                goto fail;
            }
            if (!v.valid) {
                rep->invalid++;
                break; /* ill-formed under one semantics is ill-formed under all */
            }
            rep->compared++;
            if (!v.complete) rep->incomplete++;
            rep->deadlocks += v.check_dead;
            if (!disagree(&v)) continue;
            /* minimise: drop each mutation the disagreement survives without */
            int keep[3] = {1, 1, 1};
            for (int m = 0; m < nm; m++) {
                keep[m] = 0;
                ppv_schedule *t = mutated(low, ms, nm, keep);
                verdict w;
                if (!t || judge(t, &sems[k], msg, o, &w, err, errlen) < 0) {
                    ppv_schedule_free(t);
                    ppv_schedule_free(s);
                    ppv_schedule_free(low);
                    goto fail;
                }
                if (disagree(&w)) {
                    ppv_schedule_free(s);
                    s = t;
                    v = w;
                } else {
                    keep[m] = 1;
                    ppv_schedule_free(t);
                }
            }
            rep->found = 1;
            rep->failing_schedule = i;
            rep->sem = sems[k];
            for (int m = 0; m < nm; m++) rep->mutations += keep[m];
            snprintf(rep->failure, sizeof rep->failure,
                     "%.200s: ppv check says %s, the engine %s%s%.700s", s->name,
                     v.check_dead ? "it deadlocks" : "it completes",
                     v.run_dead  ? "deadlocks"
                     : v.run_bad ? "fails otherwise"
                                 : "completes every interleaving",
                     v.why[0] ? ": " : "", v.why);
            rep->minimal = s;
            s = NULL;
        }
        ppv_schedule_free(s);
        ppv_schedule_free(low);
        if (rep->found) break;
    }
    rep->seconds = fuzz_now() - t0;
    if (o->progress) o->progress(o->progress_ctx, rep);
    *out = rep;
    return 0;
fail:
    ppv_fuzz_differential_report_free(rep);
    return -1;
}

void ppv_fuzz_differential_report_free(ppv_fuzz_differential_report *r) {
    if (!r) return;
    ppv_schedule_free(r->minimal);
    free(r);
}
