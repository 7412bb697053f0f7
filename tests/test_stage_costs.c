/* test_stage_costs.c - stages that are not alike: the cost file, the costs
 * a model's split gives, the checker's per-stage times, messages and
 * activations, the lifespan view, and gen tuned to per-stage costs.
 *
 * Expected figures are worked out here by hand from the schedules'
 * timelines (each written out in a comment), never from the checker's
 * own arithmetic. */
#include <dirent.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ppv_engine.h"
#include "testutil.h"

static ppv_stage_costs parse_ok(const char *text) {
    ppv_stage_costs c;
    char err[512];
    if (ppv_stage_costs_parse(text, "t.csv", &c, err, sizeof err) < 0) fail_msg("%s", err);
    return c;
}

static void parse_fails(const char *text, const char *why) {
    ppv_stage_costs c;
    char err[512] = "";
    assert_int_equal(ppv_stage_costs_parse(text, "t.csv", &c, err, sizeof err), -1);
    if (!strstr(err, why)) fail_msg("wanted '%s', got '%s'", why, err);
    assert_null(c.s);
}

static ppv_schedule *gen(const char *kind, int32_t p, int32_t m) {
    ppv_gen_params gp = {p, m, 0};
    ppv_schedule *s = NULL;
    char err[512];
    if (ppv_generate(kind, &gp, &s, err, sizeof err) < 0) fail_msg("%s", err);
    return s;
}

static ppv_check_report *check(const ppv_schedule *s, const ppv_stage_costs *sc) {
    ppv_check_options o = ppv_check_defaults();
    o.stages = sc;
    ppv_check_report *r = NULL;
    char err[512];
    if (ppv_schedule_check(s, &o, &r, err, sizeof err) < 0) fail_msg("%s", err);
    assert_true(r->ok && r->simulated);
    return r;
}

static void test_a_cost_file_and_its_mistakes(void **state) {
    (void)state;
    ppv_stage_costs c = parse_ok("# two stages\nppv-costs,1\n\nstage, f, b, w, comm, act\n"
                                 "0,1,2,1,0.5,3\n1,2,4,2,0.25,5 # the slow one\n");
    assert_int_equal(c.n, 2);
    assert_true(c.s[1].f == 2 && c.s[1].b == 4 && c.s[1].w == 2 && c.s[1].comm == 0.25 &&
                c.s[1].act == 5 && c.s[1].i_frac == 0 && c.s[1].stash_frac == 0);
    assert_true(c.s[0].comm == 0.5 && c.s[0].act == 3);
    ppv_stage_costs_free(&c);
    c = parse_ok("ppv-costs,1\nw,b,f,stage,i_frac,stash\n1,2,1,0,0.5,0.25\n"); /* any order */
    assert_true(c.n == 1 && c.s[0].i_frac == 0.5 && c.s[0].stash_frac == 0.25 && c.s[0].act == 1);
    ppv_stage_costs_free(&c);
    parse_fails("", "empty: a cost file starts 'ppv-costs,1'");
    parse_fails("stage,f,b,w\n0,1,2,1\n", "t.csv:1: not a ppv cost file");
    parse_fails("ppv-costs,2\nstage,f,b,w\n", "t.csv:1: cost file version 2: this ppv reads "
                                             "version 1");
    parse_fails("ppv-costs,1\nstage,f,b\n", "t.csv:2: the header has no column 'w'");
    parse_fails("ppv-costs,1\nstage,f,b,w,speed\n", "t.csv:2: column 'speed' is unknown");
    parse_fails("ppv-costs,1\nstage,f,b,w,f\n", "t.csv:2: column 'f' twice");
    parse_fails("ppv-costs,1\nstage,f,b,w\n", "no stage: a row a stage follows the header");
    /* a stage missing */
    parse_fails("ppv-costs,1\nstage,f,b,w\n0,1,2,1\n2,1,2,1\n",
                "t.csv:4: stage '2': the rows give stages 0, 1, 2, ... in order, and this one "
                "is stage 1");
    parse_fails("ppv-costs,1\nstage,f,b,w\n0,-1,2,1\n", "t.csv:3: stage 0: f '-1' is not a number");
    parse_fails("ppv-costs,1\nstage,f,b,w\n0,nan,2,1\n", "t.csv:3: stage 0: f 'nan' is not a");
    parse_fails("ppv-costs,1\nstage,f,b,w\n0,1,inf,1\n", "t.csv:3: stage 0: b 'inf' is not a");
    parse_fails("ppv-costs,1\nstage,f,b,w\n0,0,2,1\n", "t.csv:3: stage 0: f 0, b 2, w 1: a "
                                                      "stage needs f > 0 and b > w");
    parse_fails("ppv-costs,1\nstage,f,b,w\n0,1,1,1\n", "b > w (an I costs b - w)");
    parse_fails("ppv-costs,1\nstage,f,b,w,i_frac\n0,1,2,1,1.5\n", "i_frac '1.5' is not a number "
                                                                "in [0, 1]");
    parse_fails("ppv-costs,1\nstage,f,b,w\n0,1,2\n", "t.csv:3: 3 cells, the header names 4");
    /* more stages than the schedule: the check refuses them */
    c = parse_ok("ppv-costs,1\nstage,f,b,w\n0,1,2,1\n1,1,2,1\n2,1,2,1\n");
    ppv_schedule *s = gen("1f1b", 2, 4);
    ppv_check_options o = ppv_check_defaults();
    o.stages = &c;
    ppv_check_report *r = NULL;
    char err[512];
    assert_int_equal(ppv_schedule_check(s, &o, &r, err, sizeof err), -1);
    assert_string_equal(err, "t.csv gives costs for 3 stages, but 1f1b-p2-m4-v1 has 2");
    ppv_schedule_free(s);
    ppv_stage_costs_free(&c);
}

/* 1F1B on 2 ranks, 2 microbatches; stage 0 F 1 B 2 (W 1), its messages
 * 0.5, an F's activation 3; stage 1 F 2 B 4 (W 2), messages 0.25,
 * activation 5. By hand (a message arrives its time after the send):
 *   stage 0: F0 [0,1], F1 [1,2]
 *   stage 1: F0 [1.5,3.5], B0 [3.5,7.5], F1 [7.5,9.5], B1 [9.5,13.5]
 *   stage 0: B0 [7.75,9.75], B1 [13.75,15.75]
 * makespan 15.75; rank 0 holds both F's (6), rank 1 one (5). Lifespans:
 * stage 0 9.75 and 14.75 (median 12.25), stage 1 6 and 6; T is the busier
 * rank's work a microbatch, 2 + 4 = 6; stage 0 ceil(12.25/6) = 3 capped at
 * 2 microbatches, stage 1 1: bounds 2 x 3 = 6 and 5. */
static void test_each_stage_its_own_time_message_and_activation(void **state) {
    (void)state;
    ppv_stage_costs c = parse_ok("ppv-costs,1\nstage,f,b,w,comm,act\n0,1,2,1,0.5,3\n"
                                 "1,2,4,2,0.25,5\n");
    ppv_schedule *s = gen("1f1b", 2, 2);
    ppv_check_report *r = check(s, &c);
    assert_true(r->makespan == 15.75);
    assert_true(r->peak_activation[0] == 6 && r->peak_activation[1] == 5);
    assert_true(r->lifespan[0] == 12.25 && r->lifespan_max[0] == 14.75);
    assert_true(r->lifespan[1] == 6 && r->lifespan_max[1] == 6);
    assert_true(r->interval[0] == 6 && r->interval[1] == 6);
    assert_int_equal(r->alive[0], 2);
    assert_int_equal(r->alive[1], 1);
    assert_true(r->peak_bound[0] == 6 && r->peak_bound[1] == 5);
    ppv_check_report_free(r);
    ppv_schedule_free(s);
    ppv_stage_costs_free(&c);
}

/* 1F1B, 2 ranks, 4 microbatches, F 1, B 2 everywhere. By hand:
 *   stage 0: F0 [0,1] F1 [1,2] B0 [4,6] F2 [6,7] B1 [7,9] F3 [9,10] B2 [10,12] B3 [13,15]
 *   stage 1: F0 [1,2] B0 [2,4] F1 [4,5] B1 [5,7] F2 [7,8] B2 [8,10] F3 [10,11] B3 [11,13]
 * stage 0's lifespans 6, 8, 6, 6 (median 6, largest 8); stage 1's all 3;
 * T = 12 / 4 = 3: 2 and 1 alive, the bound 2 and 1 is the peak. With the
 * last stage twice as slow (F 2, B 4, its activation 3) and 4 ranks, the
 * relation still holds: T = 6, and the bounds are the peaks. */
static void test_the_lifespan_sets_the_peak(void **state) {
    (void)state;
    ppv_schedule *s = gen("1f1b", 2, 4);
    ppv_check_report *r = check(s, NULL);
    assert_true(r->makespan == 15);
    assert_true(r->lifespan[0] == 6 && r->lifespan_max[0] == 8);
    assert_true(r->lifespan[1] == 3 && r->lifespan_max[1] == 3);
    assert_true(r->interval[0] == 3 && r->interval[1] == 3);
    assert_true(r->alive[0] == 2 && r->alive[1] == 1);
    assert_true(r->peak_bound[0] == 2 && r->peak_bound[1] == 1);
    assert_true(r->peak_activation[0] == 2 && r->peak_activation[1] == 1);
    ppv_check_report_free(r);
    ppv_schedule_free(s);
    ppv_stage_costs c = parse_ok("ppv-costs,1\nstage,f,b,w,act\n0,1,2,1,1\n1,1,2,1,1\n"
                                 "2,1,2,1,1\n3,2,4,2,3\n");
    s = gen("1f1b", 4, 8);
    r = check(s, &c);
    for (int32_t k = 0; k < 4; k++) {
        assert_true(r->interval[k] == 6);
        assert_true(r->peak_bound[k] == r->peak_activation[k]);
    }
    assert_true(r->peak_activation[0] == 4 && r->peak_activation[3] == 3);
    ppv_check_report_free(r);
    ppv_schedule_free(s);
    ppv_stage_costs_free(&c);
}

/* A uniform cost file (F 1, B 2, W 1, no message time, activation
 * ranks/stages as --mem's default) gives exactly what --costs 1,2,1,0
 * gives, on every schedule of the PyTorch and zero-bubble corpora. */
typedef struct corpus {
    int files, compared;
} corpus;

static void same_without_and_with(const char *path, corpus *cp) {
    ppv_schedule *s = NULL;
    char err[1024];
    if (ppv_schedule_load(path, PPV_DIALECT_AUTO, &s, err, sizeof err) < 0) return;
    cp->files++;
    ppv_stage_costs c = {s->nstages, calloc((size_t)s->nstages, sizeof(ppv_stage_cost)), "uniform"};
    assert_non_null(c.s);
    for (int32_t k = 0; k < s->nstages; k++)
        c.s[k] = (ppv_stage_cost){1, 2, 1, 0, (double)s->nranks / s->nstages, 0, 0};
    ppv_check_options o = ppv_check_defaults();
    ppv_check_report *a = NULL, *b = NULL;
    int ra = ppv_schedule_check(s, &o, &a, err, sizeof err);
    o.stages = &c;
    int rb = ppv_schedule_check(s, &o, &b, err, sizeof err);
    assert_int_equal(ra, rb);
    if (ra == 0) {
        assert_int_equal(a->ok, b->ok);
        assert_int_equal(a->deadlock, b->deadlock);
        assert_int_equal(a->simulated, b->simulated);
        if (a->simulated) {
            if (memcmp(&a->makespan, &b->makespan, sizeof a->makespan) ||
                memcmp(&a->bubble_ratio, &b->bubble_ratio, sizeof a->bubble_ratio))
                fail_msg("%s: makespan %g/%g, bubble %g/%g", path, a->makespan, b->makespan,
                         a->bubble_ratio, b->bubble_ratio);
            for (int32_t r = 0; r < s->nranks; r++)
                if (memcmp(&a->peak_bound[r], &b->peak_bound[r], sizeof(double)))
                    fail_msg("%s: rank %d's bound %.17g / %.17g", path, r, a->peak_bound[r],
                             b->peak_bound[r]);
        }
        assert_memory_equal(a->peak_activation, b->peak_activation,
                            (size_t)s->nranks * sizeof(double));
        cp->compared++;
    }
    ppv_check_report_free(a);
    ppv_check_report_free(b);
    ppv_stage_costs_free(&c);
    ppv_schedule_free(s);
}

static void walk(const char *dir, corpus *cp) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        size_t n = strlen(e->d_name);
        DIR *sub = opendir(path);
        if (sub) {
            closedir(sub);
            walk(path, cp);
        } else if (n > 4 && strcmp(e->d_name + n - 4, ".csv") == 0) {
            same_without_and_with(path, cp);
        }
    }
    closedir(d);
}

static void test_uniform_costs_give_todays_results(void **state) {
    (void)state;
    corpus cp = {0, 0};
    walk(PPV_TEST_DATA "/pytorch", &cp);
    walk(PPV_TEST_DATA "/zero-bubble", &cp);
    assert_true(cp.files > 500);
    assert_true(cp.compared > 500);
}

/* The costs of a GPT-style model split over 4 stages: 6 layers as 2, 2, 1,
 * 1; one layer's forward 24bsh^2 + 4bs^2h = 16777216 FLOPs at s 128, h 64
 * (the unit); the output layer's 2bshV = 16384000 FLOPs (0.9765625 units)
 * on the last stage; an activation sbh(34 + 5as/h) = 606208 bytes a layer. */
static void test_the_costs_a_models_split_gives(void **state) {
    (void)state;
    ppv_model_spec m;
    char err[512];
    assert_int_equal(ppv_model_spec_parse("layers=6,hidden=64,heads=4,seq=128,vocab=1000", &m, err,
                                          sizeof err),
                     0);
    ppv_mem_model mm = {0, 0.5, 0};
    ppv_stage_costs c;
    assert_int_equal(ppv_stage_costs_from_model(&m, 4, 0.125, &mm, &c, err, sizeof err), 0);
    assert_int_equal(c.n, 4);
    double out = 16384000.0 / 16777216.0;
    assert_true(out == 0.9765625);
    const double f[4] = {2, 2, 1, 1 + out}, act[4] = {2 * 606208.0, 2 * 606208.0, 606208, 606208};
    for (int k = 0; k < 4; k++) {
        if (c.s[k].f != f[k] || c.s[k].w != f[k] || c.s[k].b != 2 * f[k] || c.s[k].act != act[k] ||
            c.s[k].comm != 0.125 || c.s[k].i_frac != 0.5)
            fail_msg("stage %d: f %g b %g w %g act %g", k, c.s[k].f, c.s[k].b, c.s[k].w, c.s[k].act);
    }
    ppv_stage_costs_free(&c);
    /* full recompute: an I repeats the forward */
    assert_int_equal(ppv_model_spec_parse("layers=4,hidden=64,heads=4,seq=128,recompute=full", &m,
                                          err, sizeof err),
                     0);
    assert_int_equal(ppv_stage_costs_from_model(&m, 2, 0, &mm, &c, err, sizeof err), 0);
    assert_true(c.s[1].f == 2 && c.s[1].w == 2 && c.s[1].b == 6);
    ppv_stage_costs_free(&c);
    assert_int_equal(ppv_stage_costs_from_model(&m, 5, 0, &mm, &c, err, sizeof err), -1);
    assert_string_equal(err, "--model: 4 layers cannot fill 5 stages");
}

/* A kind tuned to per-stage costs is never slower under them than the
 * kind's own order; auto judges only candidates of the file's stage
 * count; a V kind is refused a 1-stage-a-rank file. */
static void test_gen_is_tuned_to_the_stages_costs(void **state) {
    (void)state;
    ppv_stage_costs c = parse_ok("ppv-costs,1\nstage,f,b,w\n0,1,2,1\n1,1,2,1\n2,1,2,1\n"
                                 "3,2,3,1\n");
    ppv_gen_params gp = {4, 8, 0};
    ppv_costs unit = {1, 2, 1, 0};
    char err[512];
    static const char *const kinds[] = {"1f1b", "zb-h1", "zb-h2"};
    for (size_t k = 0; k < 3; k++) {
        ppv_schedule *own = gen(kinds[k], 4, 8), *t = NULL;
        ppv_gen_auto_report ar;
        assert_int_equal(ppv_generate_tuned(kinds[k], &gp, &unit, &c, 2000, 0, &t, &ar, err,
                                            sizeof err),
                         0);
        ppv_check_report *a = check(own, &c), *b = check(t, &c);
        assert_true(b->makespan <= a->makespan);
        assert_true(ar.makespan == b->makespan && ar.bubble_ratio == b->bubble_ratio);
        ppv_check_report_free(a);
        ppv_check_report_free(b);
        ppv_schedule_free(own);
        ppv_schedule_free(t);
    }
    ppv_schedule *t = NULL;
    ppv_gen_auto_report ar;
    assert_int_equal(ppv_generate_tuned("zbv", &gp, &unit, &c, 2000, 0, &t, &ar, err, sizeof err),
                     -1);
    assert_string_equal(err, "t.csv gives costs for 4 stages, but zbv has 8");
    ppv_gen_auto_params ap = {4, 8, unit, 0, 2000, 0, NULL, 0, 0, &c, 0};
    assert_int_equal(ppv_generate_auto(&ap, &t, &ar, err, sizeof err), 0);
    assert_int_equal(t->nstages, 4);
    ppv_check_report *r = check(t, &c);
    assert_true(r->makespan == ar.makespan);
    for (size_t k = 0; k < 3; k++) { /* no worse than any named kind it could start from */
        ppv_schedule *own = gen(kinds[k], 4, 8);
        ppv_check_report *o = check(own, &c);
        assert_true(r->makespan <= o->makespan);
        ppv_check_report_free(o);
        ppv_schedule_free(own);
    }
    ppv_check_report_free(r);
    ppv_schedule_free(t);
    ppv_stage_costs_free(&c);
}

/* The rank's idle time between its first action's start and its last's
 * end, from the simulated timeline. */
static double idle_inside(const ppv_check_report *r, int32_t rank) {
    const ppv_program *pr = &r->checked->prog[rank];
    double busy = 0, first = INFINITY, last = 0;
    for (int32_t i = 0; i < pr->n; i++) {
        ppv_action_kind k = pr->acts[i].kind;
        if (k != PPV_ACT_F && k != PPV_ACT_B && k != PPV_ACT_I && k != PPV_ACT_W) continue;
        busy += r->spans[rank][i].end - r->spans[rank][i].start;
        first = fmin(first, r->spans[rank][i].start);
        last = fmax(last, r->spans[rank][i].end);
    }
    return last - first - busy;
}

/* Tuning moves work the way the costs say: with stage k twice as slow as
 * the others (F 2, B 4 against 1, 2) at p = 4, m = 8, no 1F1B-shaped
 * order can end before the slow stage's first input arrives (k units),
 * it has done its 8 x 6 units, and the backward has crossed the k stages
 * before it (2 units each): k + 48 + 2k, by hand. The tuned 1F1B meets
 * that bound, so the slow stage never idles once started (the fast
 * stages take the waiting); 1F1B's own order idles it (for k = 1: one
 * forward too few before its first backward). With the last stage slow
 * (k = 3) the kind's own order already meets the bound, 57, and the
 * tuning gives it no other order. */
static void test_tuning_keeps_the_slow_stage_busy(void **state) {
    (void)state;
    ppv_gen_params gp = {4, 8, 0};
    ppv_costs unit = {1, 2, 1, 0};
    char err[512], text[256];
    for (int32_t k = 1; k <= 3; k += 2) {
        snprintf(text, sizeof text, "ppv-costs,1\nstage,f,b,w\n");
        for (int32_t st = 0; st < 4; st++)
            snprintf(text + strlen(text), sizeof text - strlen(text), "%d,%s\n", (int)st,
                     st == k ? "2,4,2" : "1,2,1");
        ppv_stage_costs c = parse_ok(text);
        ppv_schedule *own = gen("1f1b", 4, 8), *t = NULL;
        ppv_gen_auto_report ar;
        assert_int_equal(ppv_generate_tuned("1f1b", &gp, &unit, &c, 2000, 0, &t, &ar, err,
                                            sizeof err),
                         0);
        ppv_check_options o = ppv_check_defaults();
        o.stages = &c;
        o.keep_timeline = 1;
        ppv_check_report *a = NULL, *b = NULL;
        assert_int_equal(ppv_schedule_check(own, &o, &a, err, sizeof err), 0);
        assert_int_equal(ppv_schedule_check(t, &o, &b, err, sizeof err), 0);
        double bound = k + 8 * 6 + 2 * k;
        assert_true(b->ok && b->makespan == bound);
        assert_true(idle_inside(b, k) == 0);
        if (k == 1) { /* the kind's own order idles the slow stage */
            assert_true(a->makespan > bound);
            assert_true(idle_inside(a, k) > 0);
        } else { /* already at the bound: the same order */
            assert_true(a->makespan == bound);
            for (int32_t r = 0; r < 4; r++) {
                assert_int_equal(t->prog[r].n, own->prog[r].n);
                for (int32_t i = 0; i < t->prog[r].n; i++)
                    assert_true(t->prog[r].acts[i].kind == own->prog[r].acts[i].kind &&
                                t->prog[r].acts[i].mb == own->prog[r].acts[i].mb);
            }
        }
        ppv_check_report_free(a);
        ppv_check_report_free(b);
        ppv_schedule_free(own);
        ppv_schedule_free(t);
        ppv_stage_costs_free(&c);
    }
}

/* As a user runs it: check and gen take --cost-file, a bad file is exit 2
 * naming its line; check --model-costs reports the model's stage costs. */
static void test_the_commands_take_a_cost_file(void **state) {
    (void)state;
    const char *costs = tmp_path("costs.csv"), *bad = tmp_path("bad.csv");
    const char *sched = tmp_path("f.csv");
    write_text(costs, "ppv-costs,1\nstage,f,b,w,comm,act\n0,1,2,1,0.5,3\n1,2,4,2,0.25,5\n");
    write_text(bad, "ppv-costs,1\nstage,f,b,w\n0,1,2,1\n1,-2,4,2\n");
    run_result r = RUN("gen", "1f1b", "-p", "2", "-m", "2", "-o", sched);
    assert_int_equal(r.code, 0);
    run_free(&r);
    r = RUN("check", sched, "--cost-file", costs);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "costs, stage 1 ("));
    assert_non_null(strstr(r.out, "): F 2, B 4, W 2, message 0.25, activation 5 (I frees 0, a "
                                  "stash keeps 0)\n"));
    assert_non_null(strstr(r.out, "\npeak activation: 6 5\nmakespan: 15.75  bubble ratio: "));
    assert_non_null(strstr(r.out, "lifespan, stage 0 (rank 0): 12.25 (largest 14.75), interval "
                                  "T 6: 2 alive at once\n"));
    run_free(&r);
    r = RUN("check", sched, "--cost-file", bad);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, ":4: stage 1: f '-2' is not a number"));
    run_free(&r);
    r = RUN("show", sched, "--cost-file", costs);
    assert_int_equal(r.code, 0);
    run_free(&r);
    r = RUN("check", sched, "--model", "layers=4,hidden=64,heads=4,seq=128", "--model-costs",
            "--json");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "\"costs_from\":\"the model\""));
    assert_non_null(strstr(r.out, "{\"stage\":1,\"f\":2.0,\"b\":4.0,\"w\":2.0,"));
    run_free(&r);
    r = RUN("check", sched, "--cost-file", costs, "--mem", "2");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--cost-file gives each stage's activation and fractions: no "
                                  "--mem"));
    run_free(&r);
    r = RUN("check", sched, "--model", "layers=4,hidden=64,heads=4,seq=128", "--model-costs",
            "--mem", "2");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--mem takes only 0,IFRAC,STASH with it"));
    run_free(&r);
    r = RUN("check", sched, "--model-costs");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--model-costs needs --model"));
    run_free(&r);
    r = RUN("gen", "zb-h1", "-p", "2", "-m", "4", "--cost-file", costs);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.err, "zb-h1 tuned to the 2 stages' costs of "));
    run_free(&r);
    /* a named kind tuned to the model's split, as to a file: the costs the
     * check of the same model gives (stage 1 of 2: F 2, B 4, W 2 above) */
    const char *tuned = tmp_path("tuned.csv");
    r = RUN("gen", "1f1b", "-p", "2", "-m", "4", "--model", "layers=4,hidden=64,heads=4,seq=128",
            "--model-costs", "-o", tuned);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.err, "1f1b tuned to the 2 stages' costs of the model's split: "));
    run_free(&r);
    r = RUN("show", tuned, "--model", "layers=4,hidden=64,heads=4,seq=128", "--model-costs");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "costs, stage 1 (the model): F 2, B 4, W 2, message 0, "));
    assert_non_null(strstr(r.out, "\nrank   1 | "));
    run_free(&r);
    r = RUN("gen", "1f1b", "-p", "2", "-m", "4", "--model", "layers=4,hidden=64,heads=4,seq=128");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--model gives a named kind its costs only with --model-costs"));
    run_free(&r);
    r = RUN("gen", "zbv", "-p", "2", "-m", "4", "--cost-file", costs);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "gives costs for 2 stages, but zbv has 4"));
    run_free(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_cost_file_and_its_mistakes),
        cmocka_unit_test(test_each_stage_its_own_time_message_and_activation),
        cmocka_unit_test(test_the_lifespan_sets_the_peak),
        cmocka_unit_test(test_uniform_costs_give_todays_results),
        cmocka_unit_test(test_the_costs_a_models_split_gives),
        cmocka_unit_test(test_gen_is_tuned_to_the_stages_costs),
        cmocka_unit_test(test_tuning_keeps_the_slow_stage_busy),
        cmocka_unit_test(test_the_commands_take_a_cost_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
