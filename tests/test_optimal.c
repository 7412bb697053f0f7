/* test_optimal.c - ppv gen optimal: the MILP's optimum against brute force
 * on the smallest sizes, the schedule it writes (it passes ppv check with
 * the solver's makespan and runs on the engine with the reference's
 * gradients), no named kind ever faster than the proven optimum, and its
 * refusals. Skips where GLPK cannot be loaded. */
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

/* Whether the solver can run here (GLPK's library loads). */
static int have_solver(void) {
    ppv_optimal_params p = {2, 1, 0, {1, 2, 1, 0}, NULL, 0, 10, NULL};
    ppv_schedule *s = NULL;
    ppv_optimal_report r;
    char err[512];
    int rc = ppv_generate_optimal(&p, &s, &r, err, sizeof err);
    ppv_schedule_free(s);
    if (rc < 0 && (strstr(err, "cannot load GLPK") || strstr(err, "without GLPK"))) {
        if (getenv("PPV_REQUIRE_GLPK")) fail_msg("PPV_REQUIRE_GLPK: %s", err);
        return 0;
    }
    return 1;
}

static ppv_check_report *check(const ppv_schedule *s, const ppv_stage_costs *sc) {
    ppv_check_options o = ppv_check_defaults();
    o.stages = sc;
    ppv_check_report *r = NULL;
    char err[512];
    if (ppv_schedule_check(s, &o, &r, err, sizeof err) < 0) fail_msg("%s", err);
    return r;
}

static double peak_of(const ppv_check_report *r) {
    double p = 0;
    for (int32_t k = 0; k < r->nranks; k++)
        if (r->peak_activation[k] > p) p = r->peak_activation[k];
    return p;
}

/* ---- brute force: every order of two ranks' jobs --------------------------------- */

enum { MAXJ = 9 };

typedef struct orders {
    int n;             /* jobs a rank: 3m */
    int8_t seq[2000][MAXJ]; /* job = type * m + mb, type 0 F, 1 I, 2 W */
    int count;
} orders;

/* Every order of a stage's 3m jobs with F before I before W of each
 * microbatch, and (in_order) each type's microbatches in order. */
static void enumerate(orders *o, int m, int in_order, int8_t *cur, int depth, int *used) {
    if (depth == 3 * m) {
        assert_true(o->count < 2000);
        memcpy(o->seq[o->count++], cur, (size_t)(3 * m));
        return;
    }
    for (int j = 0; j < 3 * m; j++) {
        if (used[j]) continue;
        int type = j / m, mb = j % m;
        if (type > 0 && !used[(type - 1) * m + mb]) continue;
        if (in_order && mb > 0 && !used[type * m + mb - 1]) continue;
        used[j] = 1;
        cur[depth] = (int8_t)j;
        enumerate(o, m, in_order, cur, depth + 1, used);
        used[j] = 0;
    }
}

/* The smallest makespan over every pair of orders of 2 ranks (1F1B's
 * placement), each rank r within caps[r] (NULL: no cap) under sc (NULL:
 * unit costs); 1e30 when no order keeps within the caps. */
static double brute_force(int m, int in_order, const double *caps, const ppv_stage_costs *sc) {
    static orders o;
    memset(&o, 0, sizeof o);
    int8_t cur[MAXJ];
    int used[MAXJ] = {0};
    enumerate(&o, m, in_order, cur, 0, used);
    static const ppv_action_kind kinds[3] = {PPV_ACT_F, PPV_ACT_I, PPV_ACT_W};
    double best = 1e30;
    for (int a = 0; a < o.count; a++)
        for (int b = 0; b < o.count; b++) {
            ppv_schedule *s = ppv_schedule_new(2);
            s->nmb = m;
            s->dialect = PPV_DIALECT_CURRENT;
            for (int r = 0; r < 2; r++)
                for (int k = 0; k < 3 * m; k++) {
                    int j = (r ? o.seq[b] : o.seq[a])[k];
                    ppv_action act = ppv_action_make(kinds[j / m], r, j % m);
                    assert_int_equal(ppv_schedule_append(s, r, &act), 0);
                }
            char err[256];
            assert_int_equal(ppv_schedule_finish(s, err, sizeof err), 0);
            ppv_check_report *rep = check(s, sc);
            int within = rep->ok && rep->simulated;
            for (int r = 0; r < 2 && caps && within; r++)
                within = rep->peak_activation[r] <= caps[r] + 1e-9;
            if (within && rep->makespan < best) best = rep->makespan;
            ppv_check_report_free(rep);
            ppv_schedule_free(s);
        }
    return best;
}

static ppv_schedule *optimal(int32_t p, int32_t m, int v, double cap, const ppv_stage_costs *sc,
                             ppv_optimal_report *rep) {
    ppv_optimal_params op = {p, m, v, {1, 2, 1, 0}, sc, cap, 60, NULL};
    ppv_schedule *s = NULL;
    char err[512];
    if (ppv_generate_optimal(&op, &s, rep, err, sizeof err) < 0) fail_msg("%s", err);
    return s;
}

/* The solver's optimum is brute force's, at m = 2 over every order and at
 * m = 3 over the orders that run each type's microbatches in order (42 a
 * rank), with and without caps, at unit and at uneven costs. */
static void test_the_optimum_is_brute_forces(void **state) {
    (void)state;
    if (!have_solver()) skip();
    ppv_stage_costs uneven = {2, calloc(2, sizeof(ppv_stage_cost)), "uneven"};
    assert_non_null(uneven.s);
    uneven.s[0] = (ppv_stage_cost){1, 3, 1, 1, 1, 0, 0};
    uneven.s[1] = (ppv_stage_cost){2, 3, 2, 0, 2, 0, 0};
    /* an I that gives back half of stage 0's activation (the cap's implied
     * order then waits for the I, not the W) */
    ppv_stage_costs halves = {2, calloc(2, sizeof(ppv_stage_cost)), "halves"};
    assert_non_null(halves.s);
    halves.s[0] = (ppv_stage_cost){1, 2, 1, 0, 1, 0.5, 0};
    halves.s[1] = (ppv_stage_cost){1, 2, 1, 0, 1, 0, 0};
    static const struct {
        int m, in_order;
        double cap;
        int uneven;
    } cases[] = {{2, 0, 0, 0}, {2, 0, 1, 0}, {2, 0, 0, 1}, {2, 0, 2, 1}, {3, 1, 0, 0},
                 {3, 1, 2, 0}, {3, 1, 1, 0}, {3, 1, 0, 1}, {3, 1, 4, 1}, {3, 1, 1.5, 2},
                 {3, 1, 1, 2}};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const ppv_stage_costs *sc = cases[k].uneven == 2 ? &halves
                                    : cases[k].uneven    ? &uneven
                                                         : NULL;
        double caps[2] = {cases[k].cap, cases[k].cap};
        double want = brute_force(cases[k].m, cases[k].in_order, cases[k].cap > 0 ? caps : NULL, sc);
        ppv_optimal_report rep;
        ppv_schedule *s = optimal(2, cases[k].m, 0, cases[k].cap, sc, &rep);
        if (!rep.proven || rep.makespan != want)
            fail_msg("m %d cap %g%s: solver %g (proven %d), brute force %g", cases[k].m,
                     cases[k].cap, cases[k].uneven ? " uneven" : "", rep.makespan, rep.proven,
                     want);
        ppv_check_report *r = check(s, sc); /* its schedule is what it says */
        assert_true(r->ok);
        assert_true(r->makespan == rep.makespan);
        if (cases[k].cap > 0) assert_true(peak_of(r) <= cases[k].cap);
        ppv_check_report_free(r);
        ppv_schedule_free(s);
    }
    /* at m = 2 running microbatches in order loses nothing */
    assert_true(brute_force(2, 1, NULL, NULL) == brute_force(2, 0, NULL, NULL));
    ppv_stage_costs_free(&uneven);
    ppv_stage_costs_free(&halves);
}

/* Each rank its own cap, in bytes (gen optimal --mem-cap): the solver's
 * optimum is brute force's at m = 3 where stage 1's activation is three
 * times stage 0's, and a cap below one activation has no schedule. */
static void test_each_rank_its_own_cap(void **state) {
    (void)state;
    if (!have_solver()) skip();
    ppv_stage_costs sc = {2, calloc(2, sizeof(ppv_stage_cost)), "bytes"};
    assert_non_null(sc.s);
    sc.s[0] = (ppv_stage_cost){1, 2, 1, 0, 1000, 0, 0};
    sc.s[1] = (ppv_stage_cost){1, 2, 1, 0, 3000, 0, 0};
    static const double caps[][2] = {{3000, 9000}, {2000, 9000}, {1000, 9000}, {3000, 3000},
                                     {1000, 3000}, {2500, 6500}};
    double seen[6];
    for (size_t k = 0; k < sizeof caps / sizeof caps[0]; k++) {
        double want = brute_force(3, 1, caps[k], &sc);
        ppv_optimal_params op = {2, 3, 0, {1, 2, 1, 0}, &sc, 0, 60, caps[k]};
        ppv_schedule *s = NULL;
        ppv_optimal_report rep;
        char err[512];
        if (ppv_generate_optimal(&op, &s, &rep, err, sizeof err) < 0) fail_msg("%s", err);
        if (!rep.proven || rep.makespan != want)
            fail_msg("caps %g %g: solver %g (proven %d), brute force %g", caps[k][0], caps[k][1],
                     rep.makespan, rep.proven, want);
        ppv_check_report *r = check(s, &sc);
        assert_true(r->ok);
        assert_true(r->makespan == rep.makespan);
        for (int q = 0; q < 2; q++) assert_true(r->peak_activation[q] <= caps[k][q]);
        ppv_check_report_free(r);
        ppv_schedule_free(s);
        seen[k] = want;
    }
    /* the caps bind: one activation a rank is slower than three on rank 0 */
    assert_true(seen[2] > seen[0]);
    assert_true(seen[4] > seen[3]);
    double none[2] = {999, 9000}; /* rank 0 cannot hold one of stage 0's */
    ppv_optimal_params op = {2, 3, 0, {1, 2, 1, 0}, &sc, 0, 60, none};
    ppv_schedule *s = NULL;
    ppv_optimal_report rep;
    char err[512];
    assert_int_equal(ppv_generate_optimal(&op, &s, &rep, err, sizeof err), -1);
    assert_non_null(strstr(err, "no schedule of the shape keeps every rank within its cap"));
    ppv_stage_costs_free(&sc);
}

/* No named kind is faster than the proven optimum within its own peak,
 * and the optimal schedules run on the engine with the reference's
 * gradients, bit for bit. */
static void test_no_kind_beats_the_optimum_and_it_runs(void **state) {
    (void)state;
    if (!have_solver()) skip();
    static const char *const kinds[] = {"1f1b", "zb-h1", "zb-h2", "gpipe", "zbv"};
    for (int32_t p = 2; p <= 4; p++)
        for (size_t k = 0; k < 5; k++) {
            int v = k == 4; /* ZB-V, against the V shape (p = 4 takes seconds: not under
                             * valgrind, whose fiftyfold would reach the time limit) */
            if (v && p > sweep(4, 4, 3)) continue;
            ppv_gen_params gp = {p, 4, v ? 2 : 1};
            ppv_schedule *s = NULL;
            char err[512];
            assert_int_equal(ppv_generate(kinds[k], &gp, &s, err, sizeof err), 0);
            ppv_check_report *r = check(s, NULL);
            ppv_optimal_report rep;
            ppv_schedule *o = optimal(p, 4, v, peak_of(r), NULL, &rep);
            assert_true(rep.proven);
            if (rep.makespan > r->makespan)
                fail_msg("p %d: %s %g beats the optimum %g", p, kinds[k], r->makespan,
                         rep.makespan);
            ppv_run_options ro = ppv_run_defaults();
            ppv_run_report *run = NULL;
            assert_int_equal(ppv_run(o, &ro, &run, err, sizeof err), 0);
            assert_int_equal(run->world.status, PPV_RUN_DONE);
            ppv_model_config cfg = ppv_run_model_config(&ro, o);
            float *ref = NULL;
            size_t nref = 0;
            double loss = 0;
            assert_int_equal(ppv_run_reference(&cfg, o->nmb, &ref, &nref, &loss, err, sizeof err),
                             0);
            assert_int_equal(run->ngrads, nref);
            assert_memory_equal(run->grads, ref, nref * sizeof *ref);
            free(ref);
            ppv_run_report_free(run);
            ppv_check_report_free(r);
            ppv_schedule_free(s);
            ppv_schedule_free(o);
        }
    /* p = 4, m = 4 within 3 activations: the optimum, 18, is faster than
     * every named kind (ZB-H1 and 1F1B take 19 and more) */
    ppv_optimal_report rep;
    ppv_schedule *o = optimal(4, 4, 0, 3, NULL, &rep);
    assert_true(rep.proven && rep.makespan == 18 && rep.horizon == 19);
    ppv_schedule_free(o);
    /* the V at p = 4, m = 4: rank 3 (stages 3 and 4) waits 3 for the first
     * F to reach it and then has 2 stages x 4 microbatches x (F + I + W) =
     * 24 of work, so nothing ends before 27; the solver proves 27 reached
     * (its schedule checks at 27), where ZB-V takes 30 */
    if (RUNNING_ON_VALGRIND) return;
    o = optimal(4, 4, 1, 0, NULL, &rep);
    assert_true(rep.proven && rep.makespan == 27 && rep.horizon == 30);
    ppv_check_report *r = check(o, NULL);
    assert_true(r->ok && r->makespan == 27);
    ppv_check_report_free(r);
    ppv_schedule_free(o);
}

/* What a cap implies shrinks the model: a stage whose q + 1 activations
 * pass the cap starts microbatch k + q's F only after microbatch k's W
 * (gen_optimal.c's cap_precedences), as windows and as rows. With it the
 * 1F1B shape within 2 activations at m = 8 is proven (p = 3: 33, the best
 * kind's; it was not in 60 s), in a model of 402 binaries rather than
 * 1464, and each schedule checks at the solver's makespan within the cap.
 * p = 4 within 2 (41, about 7 s here) is left out under the sanitizers,
 * and p = 4 within 3 under valgrind too. */
static void test_a_cap_implies_an_order_that_proves_m_8(void **state) {
    (void)state;
    if (!have_solver()) skip();
    static const struct {
        int32_t p;
        double cap, makespan;
        int64_t variables, constraints;
    } cells[] = {{3, 2, 33, 402, 1219}, {4, 3, 31, 798, 2220}, {4, 2, 41, 564, 1760}};
    for (size_t k = 0; k < sizeof cells / sizeof cells[0]; k++) {
        if ((int64_t)k >= sweep(3, 2, 1)) continue; /* the sanitizers' and valgrind's slowness */
        ppv_optimal_report rep;
        ppv_schedule *o = optimal(cells[k].p, 8, 0, cells[k].cap, NULL, &rep);
        if (!rep.proven || rep.makespan != cells[k].makespan)
            fail_msg("p %d cap %g: %g (proven %d)", cells[k].p, cells[k].cap, rep.makespan,
                     rep.proven);
        assert_int_equal(rep.variables, cells[k].variables);
        assert_int_equal(rep.constraints, cells[k].constraints);
        ppv_check_report *r = check(o, NULL);
        assert_true(r->ok && r->makespan == cells[k].makespan);
        assert_true(peak_of(r) <= cells[k].cap);
        ppv_check_report_free(r);
        ppv_schedule_free(o);
    }
}

/* The uneven V at p = 4, m = 8 within 4 activations (tests/data/optimal:
 * every stage's F, I and W take 1, the last stage's 2, each activation
 * 0.5). Rank 0 holds stages 0 and 7 and can start at 0: 8 microbatches x
 * (3 + 6) = 72 of work, so no schedule ends before 72. ZB-V takes 73, and
 * GLPK kept it, not proven, for 1544 s; the local search reaches 72 from
 * it and the bound proves it, with no solver (so this runs without GLPK
 * too). ppv check, not the solver, gives the schedule's makespan and
 * peak. The same cell as a user runs it, from the cost file. */
static void test_the_load_bound_proves_what_the_search_reaches(void **state) {
    (void)state;
    ppv_stage_costs sv = {8, calloc(8, sizeof(ppv_stage_cost)), "uneven"};
    assert_non_null(sv.s);
    for (int32_t k = 0; k < 8; k++) {
        double x = k == 7 ? 2 : 1;
        sv.s[k] = (ppv_stage_cost){x, 2 * x, x, 0, 0.5, 0, 0};
    }
    ppv_optimal_report rep;
    ppv_schedule *s = optimal(4, 8, 1, 4, &sv, &rep);
    char err[512];
    assert_true(rep.horizon == 73 && rep.lower_bound == 8 * (3 + 6));
    assert_true(rep.proven && rep.by_bound && rep.makespan == 72 && rep.bound == 72);
    assert_true(rep.searched == 72 && rep.constraints == 0);
    assert_int_equal(rep.moves, 21);
    ppv_check_report *r = check(s, &sv);
    assert_true(r->ok && r->makespan == 72);
    for (int32_t q = 0; q < 4; q++) assert_true(r->peak_activation[q] <= 4);
    ppv_check_report_free(r);
    ppv_schedule_free(s);
    /* the named kind the search starts from is 73 under ppv check */
    ppv_gen_params gp = {4, 8, 2};
    assert_int_equal(ppv_generate("zbv", &gp, &s, err, sizeof err), 0);
    r = check(s, &sv);
    assert_true(r->ok && r->makespan == 73);
    ppv_check_report_free(r);
    ppv_schedule_free(s);
    free(sv.s);
    const char *out = tmp_path("v48.csv");
    run_result rr = RUN("gen", "optimal", "-p", "4", "-m", "8", "--kind-shape", "v", "--cost-file",
                        PPV_TEST_DATA "/optimal/uneven_v8_costs.csv", "--cap", "4", "-o", out);
    assert_int_equal(rr.code, 0);
    assert_non_null(strstr(rr.err, "ppv gen: optimal: makespan 72, proven optimal, every rank "
                                   "within 4 activations (V shape, each stage's microbatches in "
                                   "order); the best named kind: 73, 72 after 21 moves of the "
                                   "local search; the ranks' load bound (72: a rank's earliest "
                                   "start and all its work) reached, no solver needed, "));
    run_free(&rr);
    rr = RUN("check", out, "--cost-file", PPV_TEST_DATA "/optimal/uneven_v8_costs.csv");
    assert_int_equal(rr.code, 0);
    assert_non_null(strstr(rr.out, "\npeak activation: 4 4 4 4\n"));
    assert_non_null(strstr(rr.out, "\nmakespan: 72  bubble ratio: 0.250000\n"));
    run_free(&rr);
    /* ZB-V's gap to it, as check --optimal reports any schedule's */
    rr = RUN("gen", "zbv", "-p", "4", "-m", "8", "-o", out);
    assert_int_equal(rr.code, 0);
    run_free(&rr);
    rr = RUN("check", out, "--optimal", "--cost-file",
             PPV_TEST_DATA "/optimal/uneven_v8_costs.csv");
    assert_int_equal(rr.code, 0);
    assert_non_null(strstr(rr.out, "\noptimal: makespan 73, optimum 72 (proven, within this "
                                   "schedule's peak of 4 activations), 1.4% above\n"));
    run_free(&rr);
}

/* Where no named kind fits the cap (the V at p = 2, m = 4 within 1
 * activation: each rank may hold one microbatch's two stages), the search
 * starts from one microbatch at a time, and its result is the horizon
 * (756 binaries; the sequential run's made 1476) and the solver's first
 * solution. Before, the solver started from nothing (58 s to prove 33
 * here; at m = 8 and at p = 3 and 4 it found no schedule in 60 s). Cut
 * short at 1 s it gives the searched 33 (the optimum: GLPK proves it in
 * about 20 s here), and ppv check agrees. */
static void test_the_search_seeds_a_cap_no_kind_fits(void **state) {
    (void)state;
    if (!have_solver()) skip();
    ppv_optimal_params op = {2, 4, 1, {1, 2, 1, 0}, NULL, 1, 1, NULL};
    ppv_schedule *s = NULL;
    ppv_optimal_report rep;
    char err[512];
    if (ppv_generate_optimal(&op, &s, &rep, err, sizeof err) < 0) fail_msg("%s", err);
    assert_true(isnan(rep.horizon) && rep.searched == 33 && rep.makespan == 33);
    assert_int_equal(rep.variables, 756);
    ppv_check_report *r = check(s, NULL);
    assert_true(r->ok && r->makespan == 33 && peak_of(r) <= 1);
    ppv_check_report_free(r);
    ppv_schedule_free(s);
}

/* Too large a model is refused with its size; a time limit too short to
 * prove it returns the best found, not proven; a cap no schedule meets. */
static void test_sizes_it_cannot_prove_are_said(void **state) {
    (void)state;
    if (!have_solver()) skip();
    ppv_optimal_params op = {16, 64, 0, {1, 2, 1, 0}, NULL, 0, 10, NULL};
    ppv_schedule *s = NULL;
    ppv_optimal_report rep;
    char err[512];
    assert_int_equal(ppv_generate_optimal(&op, &s, &rep, err, sizeof err), -1);
    assert_non_null(strstr(err, "optimal: p 16, m 64 needs about "));
    assert_non_null(strstr(err, "binary variables (3072 jobs over a horizon of"));
    op = (ppv_optimal_params){4, 8, 0, {1, 2, 1, 0}, NULL, 3, 0.001, NULL};
    assert_int_equal(ppv_generate_optimal(&op, &s, &rep, err, sizeof err), 0);
    assert_false(rep.proven);
    /* cut short, the solver's schedule or the searched one, whichever is
     * shorter (the searched 32 here, where the kinds' best is 33) */
    assert_true(rep.makespan <= rep.searched && rep.searched <= rep.horizon);
    ppv_check_report *cr = check(s, NULL);
    assert_true(cr->ok && cr->makespan <= rep.makespan && peak_of(cr) <= 3);
    ppv_check_report_free(cr);
    ppv_schedule_free(s);
    op = (ppv_optimal_params){2, 2, 0, {1, 2, 1, 0}, NULL, 0.5, 10, NULL};
    assert_int_equal(ppv_generate_optimal(&op, &s, &rep, err, sizeof err), -1);
    assert_non_null(strstr(err, "no schedule of the shape keeps every rank within 0.5 "
                                "activations"));
    op = (ppv_optimal_params){2, 2, 0, {1, 2.0001, 1, 0}, NULL, 0, 10, NULL};
    assert_int_equal(ppv_generate_optimal(&op, &s, &rep, err, sizeof err), -1);
    assert_non_null(strstr(err, "every cost must be a multiple of 1/1000 of a unit (the solver "
                                "counts time in whole ticks): stage 0's I (B - W) is 1.0001 "
                                "(--costs)"));
    /* as a user runs it */
    const char *out = tmp_path("optimal.csv");
    run_result r = RUN("gen", "optimal", "-p", "4", "-m", "4", "--cap", "3", "-o", out);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.err, "ppv gen: optimal: makespan 18, proven optimal, every rank "
                                  "within 3 activations (1F1B shape, each stage's microbatches "
                                  "in order); the best named kind: 19, 18 after 5307 moves of "
                                  "the local search; 270 binaries, 788 constraints, "));
    run_free(&r);
    r = RUN("check", out, "--optimal");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "\noptimal: makespan 18, optimum 18 (proven, within this "
                                  "schedule's peak of 3 activations), 0.0% above\n"));
    run_free(&r);
    /* 1F1B: (m + p - 1)(F + B) = 21; within its peak of 4 the optimum is
     * m(F + B) + (p - 1)F, the fill alone, 12 + 3 = 15 */
    r = RUN("gen", "1f1b", "-p", "4", "-m", "4", "-o", out);
    assert_int_equal(r.code, 0);
    run_free(&r);
    r = RUN("check", out, "--optimal");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "\noptimal: makespan 21, optimum 15 (proven, within this "
                                  "schedule's peak of 4 activations), 40.0% above\n"));
    run_free(&r);
    r = RUN("gen", "optimal", "-p", "2", "-m", "2", "--budget", "10");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "'optimal' is bounded by --time-limit, not --budget"));
    run_free(&r);
    r = RUN("gen", "optimal", "-p", "2", "-m", "2", "--mem-cap", "4G");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--model-costs and --mem-cap need --model"));
    run_free(&r);
    r = RUN("gen", "optimal", "-p", "2", "-m", "2", "--model", "layers=4,hidden=64,heads=4,seq=8");
    assert_int_equal(r.code, 2); /* nothing it would change */
    assert_non_null(strstr(r.err, "--model gives 'optimal' each rank's bytes for --mem-cap, and "
                                  "each stage's times with --model-costs: give one of them"));
    run_free(&r);
    r = RUN("gen", "optimal", "-p", "2", "-m", "2", "--model", "layers=4,hidden=64,heads=4,seq=8",
            "--cap", "2");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "with --model the cap is in bytes: --mem-cap BYTES"));
    run_free(&r);
}

/* Every cell of the table docs/schedules.md shows (ppv_bench_optimal):
 * p 2 to 4, m 4 and 8, unit costs, the zero-bubble authors' F2 I2 W1 and
 * a last stage twice as slow: each optimum's schedule checks at the
 * solver's makespan within the cap (the solver's model of time and memory
 * is check's), and no one-stage-a-rank kind is faster than the proven
 * optimum within its own peak (where one were, the solver would be
 * wrong). m = 8 is left out under valgrind (its fiftyfold reaches the
 * time limit). */
static void test_no_kind_beats_the_optimum_on_any_cell(void **state) {
    (void)state;
    if (!have_solver()) skip();
    static const char *const kinds[] = {"1f1b", "zb-h1", "zb-h2", "gpipe"};
    static const ppv_costs settings[] = {{1, 2, 1, 0}, {2, 3, 1, 0}, {1, 2, 1, 0}};
    int cells = 0;
    for (int c = 0; c < 3; c++)
        for (int32_t p = 2; p <= 4; p++)
            for (int32_t m = 4; m <= sweep(8, 8, 4); m += 4) {
                ppv_stage_costs sc = {p, calloc((size_t)p, sizeof(ppv_stage_cost)), "uneven"};
                assert_non_null(sc.s);
                for (int32_t k = 0; k < p; k++) {
                    double x = k == p - 1 ? 2 : 1;
                    sc.s[k] = (ppv_stage_cost){x, 2 * x, x, 0, 1, 0, 0};
                }
                const ppv_stage_costs *use = c == 2 ? &sc : NULL;
                double solved_peak[4], solved[4];
                int nsolved = 0;
                for (size_t k = 0; k < 4; k++) {
                    ppv_gen_params gp = {p, m, 1};
                    ppv_schedule *s = NULL;
                    char err[512];
                    assert_int_equal(ppv_generate(kinds[k], &gp, &s, err, sizeof err), 0);
                    ppv_check_options o = ppv_check_defaults();
                    o.costs = settings[c];
                    o.stages = use;
                    ppv_check_report *r = NULL;
                    assert_int_equal(ppv_schedule_check(s, &o, &r, err, sizeof err), 0);
                    assert_true(r->ok && r->simulated);
                    double peak = peak_of(r), opt = -1;
                    for (int q = 0; q < nsolved; q++) /* kinds of one peak share a proof */
                        if (solved_peak[q] == peak) opt = solved[q];
                    if (opt < 0) {
                        ppv_optimal_params op = {p, m, 0, settings[c], use, peak, 60, NULL};
                        ppv_optimal_report rep;
                        ppv_schedule *best = NULL;
                        if (ppv_generate_optimal(&op, &best, &rep, err, sizeof err) < 0)
                            fail_msg("%s", err);
                        if (!rep.proven) fail_msg("setting %d p %d m %d: not proven", c, p, m);
                        /* the solver's time and memory are check's: its schedule, checked */
                        ppv_check_report *b = NULL;
                        assert_int_equal(ppv_schedule_check(best, &o, &b, err, sizeof err), 0);
                        if (!b->ok || b->makespan != rep.makespan || peak_of(b) > peak + 1e-9)
                            fail_msg("setting %d p %d m %d: the optimum checks at %g, peak %g "
                                     "(the solver said %g within %g)", c, p, m, b->makespan,
                                     peak_of(b), rep.makespan, peak);
                        ppv_check_report_free(b);
                        ppv_schedule_free(best);
                        opt = rep.makespan;
                        solved_peak[nsolved] = peak, solved[nsolved++] = opt;
                    }
                    if (r->makespan < opt - 1e-9)
                        fail_msg("setting %d p %d m %d: %s %g beats the optimum %g within %g", c,
                                 p, m, kinds[k], r->makespan, opt, peak);
                    cells++;
                    ppv_check_report_free(r);
                    ppv_schedule_free(s);
                }
                ppv_stage_costs_free(&sc);
            }
    assert_int_equal(cells, 3 * 3 * (RUNNING_ON_VALGRIND ? 1 : 2) * 4);
}

/* gen optimal --model --mem-cap, as a user runs it: the caps are what
 * check --model --mem-cap counts. The model (4 layers, hidden 64, seq
 * 128) puts 1,730,560 bytes of weights, gradients and optimizer state on
 * rank 0 and 1,601,536 on rank 1, and 1,212,416 bytes of activation in
 * each microbatch of either stage (check --model says so). */
static void test_the_cap_is_in_bytes(void **state) {
    (void)state;
    if (!have_solver()) skip();
    const char *out = tmp_path("bytes.csv");
    const char *model = "layers=4,hidden=64,heads=4,seq=128";
    /* 4,155,392 holds two microbatches on rank 0: 13, rank 1's 12 units
     * of work after the 1 it waits for stage 0's first F */
    run_result r = RUN("gen", "optimal", "-p", "2", "-m", "4", "--model", model, "--mem-cap",
                       "4155392", "-o", out);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.err, "optimal: makespan 13, proven optimal, every rank within "
                                  "--mem-cap 4155392 bytes (1F1B shape"));
    run_free(&r);
    /* 3,000,000 holds one a rank: each microbatch runs alone, F0 F1 I1
     * I0 W0 (W1 beside I0), 5 a microbatch, 20 */
    r = RUN("gen", "optimal", "-p", "2", "-m", "4", "--model", model, "--mem-cap", "3000000",
            "-o", out);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.err, "optimal: makespan 20, proven optimal, every rank within "
                                  "--mem-cap 3000000 bytes"));
    run_free(&r);
    r = RUN("check", out, "--model", model, "--mem-cap", "3000000");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "\nmakespan: 20 "));
    assert_non_null(strstr(r.out, "total 2942976 bytes"));
    run_free(&r);
    r = RUN("check", out, "--model", model, "--mem-cap", "2942975"); /* a byte less: over */
    assert_int_equal(r.code, 1);
    run_free(&r);
    /* 2,900,000 leaves rank 0 less than one activation */
    r = RUN("gen", "optimal", "-p", "2", "-m", "4", "--model", model, "--mem-cap", "2900000",
            "-o", out);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--mem-cap 2900000 leaves rank 0 1169440 bytes beside its "
                                  "weights, gradients and optimizer state (1730560), less than "
                                  "one microbatch's activation of stage 0 (1212416 bytes)"));
    run_free(&r);
    r = RUN("gen", "optimal", "-p", "2", "-m", "4", "--model", model, "--mem-cap", "1000000",
            "-o", out);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "rank 0's weights, gradients and optimizer state alone need "
                                  "1730560 bytes, more than --mem-cap 1000000"));
    run_free(&r);
    /* a cost file gives each stage's activation too: the two are refused */
    const char *costs = tmp_path("costs.csv");
    FILE *f = fopen(costs, "w");
    assert_non_null(f);
    fputs("ppv-costs,1\nstage,f,b,w\n0,1,2,1\n1,1,2,1\n", f);
    assert_int_equal(fclose(f), 0);
    r = RUN("gen", "optimal", "-p", "2", "-m", "4", "--model", model, "--mem-cap", "3000000",
            "--cost-file", costs, "-o", out);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--model gives each stage's activation, and --cost-file too"));
    run_free(&r);
    /* the model's own times (an output layer of 1000 words) fall between ticks */
    r = RUN("gen", "optimal", "-p", "2", "-m", "4", "--model",
            "layers=6,hidden=64,heads=4,seq=128,vocab=1000", "--model-costs", "-o", out);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "stage 1's F is 3.9765625 (the model); give the model's times "
                                  "rounded in a cost file (ppv show --model SPEC --model-costs "
                                  "prints them)"));
    run_free(&r);
    r = RUN("gen", "1f1b", "-p", "2", "-m", "2", "--kind-shape", "v");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--kind-shape is for 'optimal'"));
    run_free(&r);
    r = RUN("gen", "optimal", "-p", "2", "-m", "2", "--kind-shape", "w");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--kind-shape is 1f1b or v, not 'w'"));
    run_free(&r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_the_optimum_is_brute_forces),
        cmocka_unit_test(test_each_rank_its_own_cap),
        cmocka_unit_test(test_no_kind_beats_the_optimum_and_it_runs),
        cmocka_unit_test(test_no_kind_beats_the_optimum_on_any_cell),
        cmocka_unit_test(test_a_cap_implies_an_order_that_proves_m_8),
        cmocka_unit_test(test_the_load_bound_proves_what_the_search_reaches),
        cmocka_unit_test(test_the_search_seeds_a_cap_no_kind_fits),
        cmocka_unit_test(test_sizes_it_cannot_prove_are_said),
        cmocka_unit_test(test_the_cap_is_in_bytes),
    };
    return cmocka_run_group_tests(tests, NULL, tmp_cleanup);
}
