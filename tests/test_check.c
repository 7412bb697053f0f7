/* test_check.c - the static verifier: deadlocks that only rendezvous
 * exposes, deadlocks under every semantics, the eager:BYTES threshold,
 * mismatched message order, count errors, groups, collectives and chunk
 * markers, and the memory model. */
#include <dirent.h>
#include <math.h>

#include "testutil.h"

static ppv_check_report *check_file(const char *name, const char *sem, ppv_schedule **keep) {
    ppv_schedule *s = load_ok(data_path(name));
    ppv_check_report *rep = check_with(s, sem);
    if (keep) *keep = s;
    else ppv_schedule_free(s);
    return rep;
}

static void assert_wait(const ppv_wait *w, int rank, const char *action, int waits_for) {
    assert_int_equal(w->rank, rank);
    assert_string_equal(w->action, action);
    assert_int_equal(w->waits_for, waits_for);
}

static void test_rendezvous_deadlock_names_both_ranks_and_the_cycle(void **state) {
    (void)state;
    /* pytorch#172668: both ranks sit in a send */
    ppv_check_report *rep = check_file("rendezvous_only.csv", "rendezvous", NULL);
    assert_false(rep->ok);
    assert_true(rep->deadlock);
    assert_int_equal(rep->nerrors, 0);
    assert_int_equal(rep->nblocked, 2);
    assert_int_equal(rep->ncycle, 2);
    assert_wait(&rep->cycle[0], 0, "0SEND_F1", 1);
    assert_int_equal(rep->cycle[0].index, 3);
    assert_wait(&rep->cycle[1], 1, "1SEND_F0", 0);
    assert_string_equal(rep->cycle[1].reason,
                        "send (rendezvous) waits for rank 0 to reach 2RECV_F0 (index 4)");
    assert_false(rep->simulated);
    ppv_check_report_free(rep);
}

static void test_rendezvous_only_deadlock_completes_under_eager(void **state) {
    (void)state;
    ppv_check_report *rep = check_file("rendezvous_only.csv", "eager", NULL);
    assert_true(rep->ok);
    assert_false(rep->deadlock);
    assert_true(rep->simulated);
    ppv_check_report_free(rep);
}

static void test_eager_bytes_threshold_hides_or_exposes_the_hang(void **state) {
    (void)state;
    /* 64 KiB messages fit NCCL's 4 MiB buffer: the swap completes ... */
    ppv_check_report *rep = check_file("exchange_small.ppv", "eager:4M", NULL);
    assert_true(rep->ok);
    ppv_check_report_free(rep);
    /* ... 8 MiB ones do not, which is the hang production sizes see */
    rep = check_file("exchange_ungrouped.ppv", "eager:4M", NULL);
    assert_true(rep->deadlock);
    assert_int_equal(rep->ncycle, 2);
    assert_wait(&rep->cycle[0], 0, "SEND>1#7", 1);
    assert_wait(&rep->cycle[1], 1, "SEND>0#7", 0);
    ppv_check_report_free(rep);
    rep = check_file("exchange_small.ppv", "eager:65535", NULL);
    assert_true(rep->deadlock);
    ppv_check_report_free(rep);
    rep = check_file("exchange_small.ppv", "eager:65536", NULL);
    assert_false(rep->deadlock);
    ppv_check_report_free(rep);
}

static void test_grouped_exchange_is_safe_under_rendezvous(void **state) {
    (void)state;
    ppv_check_report *rep = check_file("exchange_grouped.ppv", "rendezvous", NULL);
    assert_true(rep->ok);
    assert_int_equal(rep->nblocked, 0);
    ppv_check_report_free(rep);
}

static void test_receive_cycle_deadlocks_under_every_semantics(void **state) {
    (void)state;
    static const char *sems[] = {"rendezvous", "eager", "eager:4M"};
    for (int k = 0; k < 3; k++) {
        ppv_check_report *rep = check_file("every_semantics.csv", sems[k], NULL);
        assert_true(rep->deadlock);
        assert_int_equal(rep->nerrors, 0);
        assert_int_equal(rep->ncycle, 2);
        assert_wait(&rep->cycle[0], 0, "2RECV_F0", 1);
        assert_wait(&rep->cycle[1], 1, "1RECV_F0", 0);
        ppv_check_report_free(rep);
    }
}

static void test_compute_order_cycle_deadlocks_before_lowering(void **state) {
    (void)state;
    ppv_check_report *rep = check_file("dependency_cycle.csv", "eager", NULL);
    assert_true(rep->deadlock);
    assert_null(rep->checked);
    assert_int_equal(rep->ncycle, 2);
    assert_wait(&rep->cycle[0], 0, "0B0", 1);
    assert_string_equal(rep->cycle[0].reason, "needs the input gradient of 1B/I0 from rank 1, "
                                              "which has not computed it");
    assert_wait(&rep->cycle[1], 1, "1F1", 0);
    ppv_check_report_free(rep);
}

static void test_mismatched_message_order_names_both_actions(void **state) {
    (void)state;
    ppv_check_report *rep = check_file("mismatched_order.csv", "rendezvous", NULL);
    assert_false(rep->ok);
    assert_false(rep->deadlock);
    assert_int_equal(rep->nerrors, 2);
    assert_int_equal(rep->errors[0].rank, 1);
    assert_int_equal(rep->errors[0].index, 0);
    assert_string_equal(rep->errors[0].action, "1RECV_F1");
    assert_string_equal(rep->errors[0].message,
                        "rank 1's 1RECV_F1 (index 0) receives rank 0's 0SEND_F0 (index 1): FIFO "
                        "order on channel 0->1 pairs them (message #0), but they name different "
                        "microbatches (0 sent, 1 expected)");
    ppv_check_report_free(rep);
}

static void test_count_and_order_errors_are_each_reported(void **state) {
    (void)state;
    ppv_check_report *rep = check_file("count_errors.csv", "rendezvous", NULL);
    assert_false(rep->ok);
    assert_false(rep->simulated);
    assert_int_equal(rep->errors_total, 7);
    static const char *want[] = {
        "duplicate forward of stage 1 microbatch 1 (" PPV_TEST_DATA "/count_errors.csv:2:13)",
        "W without a prior I for stage 1 microbatch 1 (" PPV_TEST_DATA "/count_errors.csv:2:17)",
        "stage 0 microbatch 1 has I but no W: the weight gradient is never computed",
        "stage 0 has no forward 0F2 (each of the 3 microbatches runs once per stage)",
        "stage 0 has no backward (0B2 or 0I2) for microbatch 2",
        "stage 1 has no backward (1B1 or 1I1) for microbatch 1",
        "stage 1 has no backward (1B2 or 1I2) for microbatch 2"};
    for (int k = 0; k < 7; k++) assert_string_equal(rep->errors[k].message, want[k]);
    ppv_check_report_free(rep);
}

static void test_missing_receive_and_local_order_errors(void **state) {
    (void)state;
    char err[256];
    ppv_schedule *s = NULL;
    /* rank 1 computes 1F0 before receiving it; rank 0 computes 1? no: 0F1 before 0F0 is fine */
    const char *text = "0F0,0SEND_F0\n1F0,1RECV_F0\n";
    assert_int_equal(ppv_schedule_parse_csv(text, strlen(text), "m.csv", PPV_DIALECT_AUTO, &s,
                                            err, sizeof err),
                     0);
    ppv_check_report *rep = check_with(s, "eager");
    assert_int_equal(rep->errors_total, 1);
    assert_string_equal(rep->errors[0].message,
                        "no 1RECV_F0 before it: its input from rank 0 never arrives (m.csv:2:1)");
    ppv_check_report_free(rep);
    ppv_schedule_free(s);
    /* two stages on one rank in the wrong order */
    text = "1F0,0F0\n";
    assert_int_equal(ppv_schedule_parse_csv(text, strlen(text), "o.csv", PPV_DIALECT_AUTO, &s,
                                            err, sizeof err),
                     0);
    rep = check_with(s, "eager");
    assert_string_equal(rep->errors[0].message,
                        "input not computed yet: 0F0 must come earlier on rank 0 (o.csv:1:1)");
    ppv_check_report_free(rep);
    ppv_schedule_free(s);
}

static void test_collectives_chunks_and_roots_are_checked(void **state) {
    (void)state;
    ppv_check_report *rep = check_file("mesh_collectives.ppv", "rendezvous", NULL);
    assert_true(rep->ok);
    ppv_check_report_free(rep);
    rep = check_file("mesh_broken.ppv", "rendezvous", NULL);
    assert_false(rep->ok);
    assert_int_equal(rep->errors_total, 3);
    assert_string_equal(rep->errors[0].message, "expected_generator_calls=3 but 2 GEN follow it");
    assert_int_equal(rep->errors[0].rank, 2);
    assert_string_equal(rep->errors[1].message,
                        "collective #0 on group 'mesh': rank 3's BCAST@mesh (index 0) and rank "
                        "1's BCAST@mesh (index 1) do not match: roots differ");
    assert_true(rep->deadlock);
    assert_int_equal(rep->nblocked, 3);
    assert_wait(&rep->blocked[1], 1, "ALLREDUCE@mesh", 3);
    assert_string_equal(rep->blocked[1].reason,
                        "collective #1 on group 'mesh': rank 3 never issues it");
    assert_int_equal(rep->ncycle, 0); /* rank 3 finished: a chain, not a cycle */
    ppv_check_report_free(rep);
}

static void test_interop_files_check_clean(void **state) {
    (void)state;
    static const char *files[] = {"dualpipev_4rank_10mb.csv", "zb1p_2rank_2stagep_compute.csv",
                                  "zb1p_2rank_2stagep_comms.csv"};
    static const char *sems[] = {"rendezvous", "eager", "eager:4M"};
    for (int f = 0; f < 3; f++)
        for (int k = 0; k < 3; k++) {
            ppv_schedule *s = load_ok(interop_path(files[f]));
            ppv_check_report *rep = check_with(s, sems[k]);
            assert_true(rep->ok);
            ppv_check_report_free(rep);
            ppv_schedule_free(s);
        }
}

/* Every schedule PyTorch's classes write (tests/data/pytorch/classes) gets
 * PyTorch's own verdict: Schedule1F1B's files run a backward before its
 * forward on the last rank (PyTorch's _validate_schedule rejects them too);
 * every other file, compute-only (lowered by ppv) or lowered by PyTorch,
 * checks clean under rendezvous. */
static void test_every_schedule_pytorch_classes_write_gets_pytorchs_verdict(void **state) {
    (void)state;
    static const struct {
        const char *cls;
        int files;
    } classes[] = {{"Schedule1F1B", 16},          {"ScheduleDualPipeV", 22},
                   {"ScheduleGPipe", 38},         {"ScheduleInterleaved1F1B", 128},
                   {"ScheduleInterleavedZeroBubble", 128}, {"ScheduleLoopedBFS", 152},
                   {"ScheduleZBVZeroBubble", 38}};
    for (size_t c = 0; c < sizeof classes / sizeof classes[0]; c++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/classes/%s", PPV_INTEROP_DIR, classes[c].cls);
        DIR *d = opendir(dir);
        assert_non_null(d);
        int n = 0, invalid = strcmp(classes[c].cls, "Schedule1F1B") == 0;
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!strstr(e->d_name, ".csv")) continue;
            char path[8192];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            ppv_schedule *s = load_ok(path);
            ppv_check_report *rep = check_with(s, "rendezvous");
            if (invalid) {
                assert_false(rep->ok);
                assert_true(rep->nerrors > 0);
                assert_non_null(strstr(rep->errors[0].message, "backward before its forward"));
                assert_int_equal(rep->errors[0].rank, s->nranks - 1);
            } else if (!rep->ok) {
                fail_msg("%s: PyTorch accepts it, ppv does not", path);
            }
            ppv_check_report_free(rep);
            ppv_schedule_free(s);
            n++;
        }
        closedir(d);
        assert_int_equal(n, classes[c].files);
    }
}

static ppv_check_report *check_costs(const ppv_schedule *s, double comm) {
    ppv_check_options o = ppv_check_defaults();
    o.costs.comm = comm;
    ppv_check_report *rep = NULL;
    char err[256];
    if (ppv_schedule_check(s, &o, &rep, err, sizeof err) != 0) fail_msg("%s", err);
    return rep;
}

/* The time model (spec/schedule-format.md, "Time"): a compute waits for
 * the receive that brings its input, not for every communication before
 * it, so with free communication a file PyTorch lowered and its
 * compute-only twin take the same time, in every pair of every class (the
 * model before this one, where each receive waited at its place, made the
 * lowered file longer in 202 of these 253 pairs). */
static void test_a_lowered_file_takes_its_compute_only_twins_time(void **state) {
    (void)state;
    static const char *const cls[] = {"ScheduleDualPipeV", "ScheduleGPipe",
                                      "ScheduleInterleaved1F1B", "ScheduleInterleavedZeroBubble",
                                      "ScheduleLoopedBFS", "ScheduleZBVZeroBubble"};
    int pairs = 0, waited = 0;
    for (size_t c = 0; c < sizeof cls / sizeof cls[0]; c++) {
        char dir[4096];
        snprintf(dir, sizeof dir, "%s/classes/%s", PPV_INTEROP_DIR, cls[c]);
        DIR *d = opendir(dir);
        assert_non_null(d);
        struct dirent *e;
        while ((e = readdir(d))) {
            const char *tail = strstr(e->d_name, "_comms.csv");
            if (!tail) continue;
            char comms[8192], compute[8192];
            snprintf(comms, sizeof comms, "%s/%s", dir, e->d_name);
            snprintf(compute, sizeof compute, "%s/%.*s_compute.csv", dir,
                     (int)(tail - e->d_name), e->d_name);
            ppv_schedule *a = load_ok(comms), *b = load_ok(compute);
            ppv_check_report *ra = check_costs(a, 0), *rb = check_costs(b, 0);
            assert_true(ra->ok && rb->ok);
            if (ra->makespan != rb->makespan)
                fail_msg("%s: makespan %g, its compute-only file's %g", comms, ra->makespan,
                         rb->makespan);
            /* communication that costs something shows, and the receive
             * that brings a compute's input is waited for */
            ppv_check_report *slow = check_costs(a, 1);
            assert_true(slow->makespan >= ra->makespan);
            waited += slow->makespan > ra->makespan;
            ppv_check_report_free(slow);
            ppv_check_report_free(ra);
            ppv_check_report_free(rb);
            ppv_schedule_free(a);
            ppv_schedule_free(b);
            pairs++;
        }
        closedir(d);
    }
    assert_int_equal(pairs, 253);
    assert_int_equal(waited, pairs); /* every pipeline has a message on its critical path */
}

/* Rank 1 posts both receives first, as a lowered file may. Its first
 * forward needs only the first: it starts when that has come (time 1),
 * not when the second has (2), and the step takes 9 units (F=1, B=2),
 * what the compute-only 1F1B takes; were each receive waited for at its
 * place it would take 10. */
/* CSV text read as name into *s and checked with its timeline kept. */
static ppv_check_report *check_text_with_timeline(const char *text, const char *name,
                                                  ppv_schedule **s) {
    char err[256];
    assert_int_equal(
        ppv_schedule_parse_csv(text, strlen(text), name, PPV_DIALECT_AUTO, s, err, sizeof err), 0);
    ppv_check_options o = ppv_check_defaults();
    o.keep_timeline = 1;
    ppv_check_report *rep = NULL;
    assert_int_equal(ppv_schedule_check(*s, &o, &rep, err, sizeof err), 0);
    return rep;
}

/* The times of the two-rank file below whose receives come early (its
 * second microbatch named 1, or 5000): the makespan, rank 1's forwards and
 * rank 0's last backward. */
static void assert_early_times(const ppv_check_report *rep) {
    assert_true(rep->makespan == 9);
    assert_true(rep->spans[1][2].start == 1 && rep->spans[1][2].end == 2); /* 1F0 */
    assert_true(rep->spans[1][5].start == 4 && rep->spans[1][5].end == 5); /* 1F of mb 1 */
    assert_true(rep->spans[0][7].start == 7 && rep->spans[0][7].end == 9); /* 0B of mb 1 */
}

/* The dependencies are found through a table of every (stage,
 * microbatch) where that is no bigger than the schedule, else by hashing
 * (a file naming far more microbatches than it holds): the same times
 * either way. Here microbatch 1 of the file below is renamed 5000. */
static void test_dependencies_by_table_and_by_hash_give_the_same_times(void **state) {
    (void)state;
    const char *text = "0F0,0SEND_F0,0F5000,0SEND_F5000,0RECV_B0,0B0,0RECV_B5000,0B5000\n"
                       "1RECV_F0,1RECV_F5000,1F0,1B0,1SEND_B0,1F5000,1B5000,1SEND_B5000\n";
    ppv_schedule *s = NULL;
    ppv_check_report *rep = check_text_with_timeline(text, "sparse.csv", &s);
    assert_false(rep->ok); /* microbatches 1..4999 are missing */
    assert_true(rep->simulated);
    assert_early_times(rep); /* as with microbatches 0 and 1 */
    ppv_check_report_free(rep);
    ppv_schedule_free(s);
}

static void test_a_compute_waits_only_for_its_own_input(void **state) {
    (void)state;
    const char *text = "0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1\n"
                       "1RECV_F0,1RECV_F1,1F0,1B0,1SEND_B0,1F1,1B1,1SEND_B1\n";
    ppv_schedule *s = NULL;
    ppv_check_report *rep = check_text_with_timeline(text, "early.csv", &s);
    assert_true(rep->ok);
    assert_early_times(rep);
    ppv_check_report_free(rep);
    ppv_schedule *ref = gen_ok("1f1b", 2, 2, 0);
    ppv_check_report *r1 = check_costs(ref, 0);
    assert_true(r1->makespan == 9);
    ppv_check_report_free(r1);
    /* at C = 5 each hand-over costs 5: the critical path crosses twice */
    r1 = check_costs(s, 5);
    assert_true(r1->makespan == 19);
    ppv_check_report_free(r1);
    ppv_schedule_free(ref);
    ppv_schedule_free(s);
}

static void test_memory_model_options(void **state) {
    (void)state;
    ppv_schedule *s = gen_ok("1f1b", 4, 8, 0);
    ppv_check_options o = ppv_check_defaults();
    o.mem.unit = 1024; /* bytes per F */
    ppv_check_report *rep = NULL;
    char err[256];
    assert_int_equal(ppv_schedule_check(s, &o, &rep, err, sizeof err), 0);
    assert_true(rep->peak_activation[0] == 4096);
    assert_true(rep->peak_activation[3] == 1024);
    ppv_check_report_free(rep);
    ppv_schedule_free(s);
    /* I frees half of the activation, W the rest */
    const char *text = "ppv-schedule 1\nranks 1\nrank 0\n0F0\n0F1\n0I0\n0F2\n0W0\n0I1\n0W1\n"
                       "0I2\n0W2\n";
    assert_int_equal(ppv_schedule_parse_native(text, strlen(text), "h.ppv", &s, err, sizeof err), 0);
    o = ppv_check_defaults();
    assert_int_equal(ppv_schedule_check(s, &o, &rep, err, sizeof err), 0);
    assert_true(rep->peak_activation[0] == 3.0);
    ppv_check_report_free(rep);
    o.mem.i_frac = 0.5;
    assert_int_equal(ppv_schedule_check(s, &o, &rep, err, sizeof err), 0);
    assert_true(rep->peak_activation[0] == 2.5);
    ppv_check_report_free(rep);
    o.mem.i_frac = 1.5;
    assert_int_equal(ppv_schedule_check(s, &o, &rep, err, sizeof err), -1);
    assert_string_equal(err, "memory fractions must lie in [0, 1]");
    ppv_schedule_free(s);
}

static void test_recompute_stashes_only_the_input(void **state) {
    (void)state;
    const char *text = "ppv-schedule 1\nranks 1\nrank 0\n0F0\n0F1\n0R0\n0B0\n0R1\n0B1\n";
    ppv_schedule *s = NULL;
    char err[256];
    assert_int_equal(ppv_schedule_parse_native(text, strlen(text), "r.ppv", &s, err, sizeof err), 0);
    ppv_check_options o = ppv_check_defaults();
    o.mem.stash_frac = 0.25;
    ppv_check_report *rep = NULL;
    assert_int_equal(ppv_schedule_check(s, &o, &rep, err, sizeof err), 0);
    assert_true(rep->ok);
    /* 0.25 + 0.25 stashed, then one full recompute live at a time */
    assert_true(rep->peak_activation[0] == 1.25);
    ppv_check_report_free(rep);
    o.mem.stash_frac = 0;
    ppv_schedule_free(s);
    text = "ppv-schedule 1\nranks 1\nrank 0\n0F0\n0B0\n0R0\n";
    assert_int_equal(ppv_schedule_parse_native(text, strlen(text), "r.ppv", &s, err, sizeof err), 0);
    assert_int_equal(ppv_schedule_check(s, &o, &rep, err, sizeof err), 0);
    assert_string_equal(rep->errors[0].message,
                        "recompute must come after 0F0 and before its backward (r.ppv:6:1)");
    ppv_check_report_free(rep);
    ppv_schedule_free(s);
}

static void test_bad_costs_are_rejected(void **state) {
    (void)state;
    ppv_schedule *s = gen_ok("1f1b", 2, 2, 0);
    ppv_check_options o = ppv_check_defaults();
    o.costs = (ppv_costs){1, 1, 1, 0}; /* I would cost 0 */
    ppv_check_report *rep = NULL;
    char err[256];
    assert_int_equal(ppv_schedule_check(s, &o, &rep, err, sizeof err), -1);
    assert_string_equal(err, "costs need F > 0, B > W >= 0 and C >= 0 (got 1,1,1,0)");
    ppv_schedule_free(s);
}

/* Parses CSV text that must parse. */
static ppv_schedule *csv_ok(const char *text) {
    ppv_schedule *s = NULL;
    char err[512] = "";
    int rc =
        ppv_schedule_parse_csv(text, strlen(text), "t.csv", PPV_DIALECT_AUTO, &s, err, sizeof err);
    if (rc != 0) fprintf(stderr, "%s\n", err);
    assert_int_equal(rc, 0);
    return s;
}

/* The semantics decides deadlock only: times are those of asynchronous
 * sends under every semantics, to the bit. A rendezvous run takes its ops
 * in another order than an eager one, so a compute total summed in run
 * order differed in the last bits (interleaved-1f1b p=4 m=16 at these
 * costs did). */
static void test_times_are_the_same_bits_under_every_semantics(void **state) {
    (void)state;
    static const char *const kinds[] = {"interleaved-1f1b", "dualpipev", "zbv", "1f1b"};
    static const char *const sems[] = {"rendezvous", "eager", "eager:4M", "eager:1"};
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        ppv_gen_params gp = {4, 16, 0};
        ppv_schedule *s = NULL;
        char err[512];
        assert_int_equal(ppv_generate(kinds[k], &gp, &s, err, sizeof err), 0);
        double mk[4], bub[4];
        for (int j = 0; j < 4; j++) {
            ppv_check_options o = ppv_check_defaults();
            o.costs = (ppv_costs){1.3, 2.1, 0.7, 0.25};
            assert_int_equal(ppv_semantics_parse(sems[j], &o.sem), 0);
            ppv_check_report *r = NULL;
            assert_int_equal(ppv_schedule_check(s, &o, &r, err, sizeof err), 0);
            assert_true(r->ok);
            mk[j] = r->makespan, bub[j] = r->bubble_ratio;
            ppv_check_report_free(r);
        }
        for (int j = 1; j < 4; j++)
            if (memcmp(&mk[j], &mk[0], sizeof mk[0]) || memcmp(&bub[j], &bub[0], sizeof bub[0]))
                fail_msg("%s: %s gives %.17g, %.17g; rendezvous %.17g, %.17g", kinds[k], sems[j],
                         mk[j], bub[j], mk[0], bub[0]);
        ppv_schedule_free(s);
    }
}

/* A lowered 1F1B of 4 ranks and 20,000 microbatches (about 400,000
 * actions) is checked in runs of ranks side by side where the machine has
 * the processors: its times, peaks and errors are those of one pass. The
 * makespan is 1F1B's (m + p - 1)(F + B) and rank r holds p - r
 * activations at its peak; errors come rank by rank, the first 1000
 * stored and every one counted. */
static ppv_schedule *big_1f1b(void) {
    ppv_gen_params gp = {4, 20000, 0};
    ppv_schedule *s = NULL, *low = NULL;
    char err[512];
    ppv_costs c = {1, 2, 1, 0};
    assert_int_equal(ppv_generate("1f1b", &gp, &s, err, sizeof err), 0);
    assert_int_equal(ppv_schedule_lower(s, &c, 0, &low, err, sizeof err), 0);
    ppv_schedule_free(s);
    return low;
}

static ppv_check_report *check_big(const ppv_schedule *s) {
    ppv_check_options o = ppv_check_defaults();
    ppv_check_report *r = NULL;
    char err[512];
    assert_int_equal(ppv_schedule_check(s, &o, &r, err, sizeof err), 0);
    return r;
}

/* The report's problems for PyTorch's runtime (ppv_check_options.pytorch)
 * are ppv_check_pytorch's, worked out beside the simulation or, for a
 * timeline or a compute-only schedule, after it. */
static void expect_pytorch_view(const ppv_schedule *s, int keep_timeline) {
    ppv_problem *v = NULL;
    int32_t n = -1;
    char err[512];
    assert_int_equal(ppv_check_pytorch(s, &v, &n, err, sizeof err), 0);
    ppv_check_options o = ppv_check_defaults();
    o.keep_timeline = keep_timeline;
    o.pytorch = 1;
    ppv_check_report *r = NULL;
    assert_int_equal(ppv_schedule_check(s, &o, &r, err, sizeof err), 0);
    assert_int_equal(r->npytorch, n);
    for (int32_t k = 0; k < n; k++) {
        assert_int_equal(r->pytorch[k].rank, v[k].rank);
        assert_int_equal(r->pytorch[k].index, v[k].index);
        assert_string_equal(r->pytorch[k].message, v[k].message);
    }
    ppv_check_report_free(r);
    free(v);
}

static void test_the_check_works_out_pytorchs_view_when_asked(void **state) {
    (void)state;
    ppv_schedule *s = big_1f1b();
    /* rank 2's REDUCE_GRAD taken out: its gradients are never scaled */
    ppv_program *p = &s->prog[2];
    int32_t at = -1, last_b = -1;
    for (int32_t i = 0; i < p->n; i++) {
        if (p->acts[i].kind == PPV_ACT_REDUCE_GRAD) at = i;
        if (p->acts[i].kind == PPV_ACT_B) last_b = i;
    }
    assert_true(at > last_b && last_b > 0);
    memmove(&p->acts[at], &p->acts[at + 1], (size_t)(p->n - at - 1) * sizeof *p->acts);
    p->n--;
    ppv_check_options o = ppv_check_defaults();
    o.pytorch = 1;
    ppv_check_report *r = NULL;
    char err[512];
    assert_int_equal(ppv_schedule_check(s, &o, &r, err, sizeof err), 0);
    assert_true(r->ok);
    assert_int_equal(r->npytorch, 1);
    assert_int_equal(r->pytorch[0].rank, 2);
    assert_int_equal(r->pytorch[0].index, last_b);
    assert_string_equal(r->pytorch[0].message,
                        "stage 2 has no REDUCE_GRAD after its last backward: PyTorch's runtime "
                        "never scales (or reduces) its gradients, which come out 20000 times too "
                        "large (lower with ppv gen --comms or ppv check --lowered-out)");
    ppv_check_report_free(r);
    o.pytorch = 0; /* not asked: none */
    assert_int_equal(ppv_schedule_check(s, &o, &r, err, sizeof err), 0);
    assert_null(r->pytorch);
    assert_int_equal(r->npytorch, 0);
    ppv_check_report_free(r);
    expect_pytorch_view(s, 0);
    expect_pytorch_view(s, 1); /* a timeline: worked out after the check */
    ppv_schedule_free(s);

    /* a compute-only schedule with a REDUCE_GRAD, which PyTorch's
     * _load_csv refuses (lowered and checked first) */
    static const char csv[] = "0F0,,,0B0,0REDUCE_GRAD\n,1F0,1B0\n";
    ppv_schedule *c = NULL;
    assert_int_equal(ppv_schedule_parse_text(csv, strlen(csv), "t.csv", PPV_DIALECT_AUTO, &c, err,
                                             sizeof err),
                     0);
    expect_pytorch_view(c, 0);
    ppv_problem *v = NULL;
    int32_t n = 0;
    assert_int_equal(ppv_check_pytorch(c, &v, &n, err, sizeof err), 0);
    assert_int_equal(n, 1);
    assert_int_equal(v[0].rank, 0);
    assert_int_equal(v[0].index, 2);
    free(v);
    ppv_schedule_free(c);
}

static void test_a_large_schedule_checked_in_runs_of_ranks(void **state) {
    (void)state;
    ppv_schedule *s = big_1f1b();
    int64_t total = 0;
    for (int32_t r = 0; r < 4; r++) total += s->prog[r].n;
    assert_true(total > 200000);
    ppv_check_report *r = check_big(s);
    assert_true(r->ok);
    assert_true(r->makespan == (20000 + 4 - 1) * 3.0);
    for (int32_t k = 0; k < 4; k++) assert_true(r->peak_activation[k] == 4 - k);
    ppv_check_report_free(r);

    /* one duplicate forward at the end of rank 0 and of rank 3 */
    int32_t n0 = s->prog[0].n, n3 = s->prog[3].n;
    ppv_action f0 = ppv_action_make(PPV_ACT_F, 0, 0), f3 = ppv_action_make(PPV_ACT_F, 3, 0);
    assert_int_equal(ppv_schedule_append(s, 0, &f0), 0);
    assert_int_equal(ppv_schedule_append(s, 3, &f3), 0);
    r = check_big(s);
    assert_false(r->ok);
    assert_int_equal(r->errors_total, 2);
    assert_int_equal(r->nerrors, 2);
    assert_int_equal(r->errors[0].rank, 0);
    assert_int_equal(r->errors[0].index, n0);
    assert_string_equal(r->errors[0].message, "duplicate forward of stage 0 microbatch 0");
    assert_int_equal(r->errors[1].rank, 3);
    assert_int_equal(r->errors[1].index, n3);
    assert_string_equal(r->errors[1].message, "duplicate forward of stage 3 microbatch 0");
    ppv_check_report_free(r);

    /* 1,200 more on rank 0: its first 1000 are stored, rank 3's counted */
    for (int k = 0; k < 1200; k++) assert_int_equal(ppv_schedule_append(s, 0, &f0), 0);
    r = check_big(s);
    assert_int_equal(r->errors_total, 1202);
    assert_int_equal(r->nerrors, 1000);
    assert_int_equal(r->errors[999].rank, 0);
    assert_int_equal(r->errors[999].index, n0 + 999);
    ppv_check_report_free(r);
    ppv_schedule_free(s);

    /* two receives out of order on rank 1 (channel 0->1, the first made)
     * and on rank 3 (2->3, the fifth): paired side by side, the first
     * channel's errors still come first */
    s = big_1f1b();
    int32_t at[2][2] = {{1, -1}, {3, -1}};
    for (int k = 0; k < 2; k++) {
        ppv_program *p = &s->prog[at[k][0]];
        for (int32_t i = 0; i < p->n && at[k][1] < 0; i++)
            if (p->acts[i].kind == PPV_ACT_RECV_F && p->acts[i].mb == 7) at[k][1] = i;
        assert_true(at[k][1] > 0);
        for (int32_t i = at[k][1] + 1; i < p->n; i++)
            if (p->acts[i].kind == PPV_ACT_RECV_F && p->acts[i].mb == 8) {
                p->acts[i].mb = 7;
                p->acts[at[k][1]].mb = 8;
                break;
            }
    }
    r = check_big(s);
    char want[2][300];
    for (int k = 0; k < 2; k++) {
        const ppv_program *from = &s->prog[at[k][0] - 1];
        int32_t si = -1;
        for (int32_t i = 0; i < from->n && si < 0; i++)
            if (from->acts[i].kind == PPV_ACT_SEND_F && from->acts[i].mb == 7) si = i;
        snprintf(want[k], sizeof want[k], "rank %d's %dRECV_F8 (index %d) receives rank %d's "
                 "%dSEND_F7 (index %d): FIFO order on channel %d->%d pairs them (message #7), "
                 "but they name different microbatches (7 sent, 8 expected)",
                 at[k][0], at[k][0], at[k][1], at[k][0] - 1, at[k][0] - 1, si, at[k][0] - 1,
                 at[k][0]);
    }
    int32_t first[2] = {-1, -1};
    for (int32_t e = 0; e < r->nerrors; e++)
        for (int k = 0; k < 2; k++)
            if (first[k] < 0 && strcmp(r->errors[e].message, want[k]) == 0) first[k] = e;
    for (int32_t e = 0; first[0] < 0 && e < r->nerrors; e++)
        print_message("%s\n", r->errors[e].message);
    if (first[0] < 0 || first[1] < first[0])
        fail_msg("channel 0->1's error at %d, 2->3's at %d (of %d)", first[0], first[1],
                 r->nerrors);
    ppv_check_report_free(r);
    ppv_schedule_free(s);
}

/* One action naming microbatch 99999999: the other 99,999,999 forwards are
 * missing and every one is counted, from the one action (not an array of
 * 10^8 microbatches); the first 1000 are stored in order. */
static void test_microbatch_99999999_alone_lacks_every_other_forward(void **state) {
    (void)state;
    ppv_schedule *s = csv_ok("0F99999999\n");
    ppv_check_report *rep = check_with(s, "rendezvous");
    assert_false(rep->ok);
    assert_int_equal(rep->nmb, 100000000);
    assert_int_equal(rep->errors_total, 99999999);
    assert_int_equal(rep->nerrors, 1000);
    assert_string_equal(rep->errors[0].message,
                        "stage 0 has no forward 0F0 (each of the 100000000 microbatches runs once "
                        "per stage)");
    assert_string_equal(rep->errors[999].message,
                        "stage 0 has no forward 0F999 (each of the 100000000 microbatches runs "
                        "once per stage)");
    assert_true(rep->peak_activation[0] == 1.0);
    ppv_check_report_free(rep);
    ppv_schedule_free(s);
}

/* 64 stages at microbatch 99999999 in one 758-byte row (28 s, then out of
 * memory, when the checker sized its arrays stages x microbatches). */
static void test_64_stages_at_microbatch_99999999_are_counted_not_allocated(void **state) {
    (void)state;
    char row[1024];
    size_t n = 0;
    for (int st = 0; st < 64; st++)
        n += (size_t)snprintf(row + n, sizeof row - n, "%s%dF99999999", st ? "," : "", st);
    snprintf(row + n, sizeof row - n, "\n");
    ppv_schedule *s = csv_ok(row);
    ppv_check_report *rep = check_with(s, "rendezvous");
    assert_int_equal(rep->errors_total, 64LL * 99999999);
    assert_string_equal(rep->errors[0].message,
                        "stage 0 has no forward 0F0 (each of the 100000000 microbatches runs once "
                        "per stage)");
    assert_true(rep->peak_activation[0] == 1.0); /* 64 forwards of 1/64 */
    ppv_check_report_free(rep);
    ppv_schedule_free(s);
}

/* Sparse microbatches keep every error the dense checker gives: order
 * errors against pairs no action names, and the count errors on both sides
 * of a named pair, in stage and microbatch order. */
static void test_sparse_microbatches_report_order_and_count_errors_in_place(void **state) {
    (void)state;
    ppv_schedule *s = csv_ok("0F5,1F99999999,1B99999999,0B5\n");
    ppv_check_report *rep = check_with(s, "rendezvous");
    /* 2 order errors; 2 per missing pair: stage 0 all but 5, stage 1 all but 99999999 */
    assert_int_equal(rep->errors_total, 2 + 4LL * 99999999);
    static const char *const want[] = {
        "input not computed yet: 0F99999999 must come earlier on rank 0 (t.csv:1:5)",
        ("gradient not computed yet: the backward of stage 1 microbatch 5 must come earlier on "
         "rank 0 (t.csv:1:27)"),
        "stage 0 has no forward 0F0 (each of the 100000000 microbatches runs once per stage)",
        "stage 0 has no backward (0B0 or 0I0) for microbatch 0",
    };
    for (int k = 0; k < 4; k++)
        assert_string_equal(rep->errors[k].message, want[k]);
    assert_string_equal(rep->errors[11].message, "stage 0 has no backward (0B4 or 0I4) for "
                                                 "microbatch 4");
    assert_string_equal(rep->errors[12].message, "stage 0 has no forward 0F6 (each of the "
                                                 "100000000 microbatches runs once per stage)");
    ppv_check_report_free(rep);
    ppv_schedule_free(s);
}

/* Group 65536 and group 0 are two groups (16 bits made them one, and this
 * deadlock checked OK): each rank waits in a collective the other never
 * joins. */
static void test_collectives_on_group_65536_and_group_0_deadlock(void **state) {
    (void)state;
    char *t = many_groups_text(65537, "ALLREDUCE group=g65536", "ALLREDUCE group=g0");
    ppv_schedule *s = NULL;
    char err[512] = "";
    assert_int_equal(ppv_schedule_parse_native(t, strlen(t), "g.ppv", &s, err, sizeof err), 0);
    ppv_check_report *rep = check_with(s, "rendezvous");
    assert_false(rep->ok);
    assert_true(rep->deadlock);
    assert_int_equal(rep->errors_total, 2);
    assert_string_equal(
        rep->errors[0].message,
        "rank 0 issues only 0 collectives on group 'g0'; others issue collective #0");
    assert_string_equal(rep->errors[1].message, "rank 1 issues only 0 collectives on group "
                                                "'g65536'; others issue collective #0");
    assert_int_equal(rep->nblocked, 2);
    assert_wait(&rep->blocked[0], 0, "ALLREDUCE@g65536", 1);
    assert_string_equal(rep->blocked[0].reason,
                        "collective #0 on group 'g65536': rank 1 never issues it");
    ppv_check_report_free(rep);
    ppv_schedule_free(s);
    free(t);
}

static void test_semantics_parse(void **state) {
    (void)state;
    ppv_semantics sem;
    assert_int_equal(ppv_semantics_parse("eager:4M", &sem), 0);
    assert_int_equal(sem.kind, PPV_SEM_EAGER_BYTES);
    assert_int_equal(sem.eager_limit, 4 << 20);
    assert_int_equal(ppv_semantics_parse("eager:12", &sem), 0);
    assert_int_equal(sem.eager_limit, 12);
    assert_int_equal(ppv_semantics_parse("eager:", &sem), -1);
    assert_int_equal(ppv_semantics_parse("eager:4X", &sem), -1);
    assert_int_equal(ppv_semantics_parse("buffered", &sem), -1);
    char buf[32];
    ppv_semantics_format(&(ppv_semantics){PPV_SEM_EAGER_BYTES, 4096}, buf, sizeof buf);
    assert_string_equal(buf, "eager:4096");
}

/* ---- memory in bytes (--model) ------------------------------------------ */

static ppv_model_spec spec_ok(const char *text) {
    ppv_model_spec m;
    char err[512];
    if (ppv_model_spec_parse(text, &m, err, sizeof err) < 0) fail_msg("%s: %s", text, err);
    return m;
}

/* The per-layer activation bytes are Korthikanti et al.'s table 2, and the
 * paper's own figures follow: 5as/h is 80 for GPT-3 and 64 for MT-NLG, so
 * selective recompute keeps 34/114 and 34/98 of the activations. */
static void test_layer_activation_bytes_are_the_papers(void **state) {
    (void)state;
    ppv_model_spec g = spec_ok("layers=96,hidden=12288,heads=96,seq=2048,vocab=51200,tp=8,sp=1");
    double sbh = 2048.0 * 12288;
    assert_true(ppv_layer_activation_bytes(&g) == sbh * (34 + 80) / 8);
    g.recompute = PPV_MEMRC_SELECTIVE;
    assert_true(ppv_layer_activation_bytes(&g) == 34 * sbh / 8);
    g.recompute = PPV_MEMRC_FULL;
    assert_true(ppv_layer_activation_bytes(&g) == 2 * sbh / 8);
    /* tensor parallelism alone leaves the 10sbh of layer norms and dropout whole */
    g = spec_ok("layers=96,hidden=12288,heads=96,seq=2048,tp=8");
    assert_true(ppv_layer_activation_bytes(&g) == sbh * (10 + 24.0 / 8 + 80.0 / 8));
    g.recompute = PPV_MEMRC_SELECTIVE;
    assert_true(ppv_layer_activation_bytes(&g) == sbh * (10 + 24.0 / 8));
    g.recompute = PPV_MEMRC_FULL;
    assert_true(ppv_layer_activation_bytes(&g) == 2 * sbh);
    /* the savings the paper quotes: 70% for GPT-3, 65% for MT-NLG */
    ppv_model_spec a = spec_ok("layers=96,hidden=12288,heads=96,seq=2048,tp=8,sp=1"),
                   b = spec_ok("layers=105,hidden=20480,heads=128,seq=2048,tp=8,sp=1");
    double full_a = ppv_layer_activation_bytes(&a), full_b = ppv_layer_activation_bytes(&b);
    a.recompute = b.recompute = PPV_MEMRC_SELECTIVE;
    assert_int_equal((int)lround(100 * (1 - ppv_layer_activation_bytes(&a) / full_a)), 70);
    assert_int_equal((int)lround(100 * (1 - ppv_layer_activation_bytes(&b) / full_b)), 65);
    /* at t = 1 both columns are sbh(34 + 5as/h) */
    ppv_model_spec one = spec_ok("layers=24,hidden=2048,heads=16,seq=2048");
    assert_true(ppv_layer_activation_bytes(&one) == 2048.0 * 2048 * (34 + 80));
}

/* Bytes per rank for 1F1B, ZB-H1 and ZB-V at p = 4, by hand: 24 layers of
 * h = 2048 (12h^2 + 13h = 50,358,272 parameters), 478,150,656 activation
 * bytes a layer and microbatch, a 50257-word vocabulary. */
static void test_bytes_per_rank_by_hand(void **state) {
    (void)state;
    ppv_model_spec m = spec_ok("layers=24,hidden=2048,heads=16,seq=2048,vocab=50257");
    const double layer = 50358272, act = 478150656, word = 50257.0 * 2048, pos = 2048.0 * 2048;
    char err[256];
    ppv_memory_bytes b;
    ppv_schedule *s = gen_ok("1f1b", 4, 8, 1);
    assert_int_equal(ppv_schedule_memory_bytes(s, &m, &b, err, sizeof err), 0);
    for (int32_t r = 0; r < 4; r++) {
        double params = 6 * layer + (r == 0 ? word + pos : 0) + (r == 3 ? word + 2 * 2048 : 0);
        assert_true(b.params[r] == params);
        assert_true(b.activations[r] == (4 - r) * 6 * act); /* p - r microbatches */
        /* the peak is the last warm-up forward */
        assert_int_equal(s->prog[r].acts[b.peak_index[r]].kind, PPV_ACT_F);
        assert_int_equal(s->prog[r].acts[b.peak_index[r]].mb, 3 - r);
    }
    double w, g, o;
    ppv_memory_split(&m, b.params[1], &w, &g, &o);
    assert_true(w == 2 * 6 * layer && g == w && o == 12 * 6 * layer);
    ppv_memory_bytes_free(&b);
    ppv_schedule_free(s);
    /* ZB-H1: every rank holds p microbatches (W comes late) */
    s = gen_ok("zb-h1", 4, 8, 1);
    assert_int_equal(ppv_schedule_memory_bytes(s, &m, &b, err, sizeof err), 0);
    for (int32_t r = 0; r < 4; r++) assert_true(b.activations[r] == 4 * 6 * act);
    ppv_memory_bytes_free(&b);
    ppv_schedule_free(s);
    /* ZB-V: 8 stages of 3 layers, rank 0 holds stages 0 and 7 and so both
     * embeddings ends, the word embedding once; 2p chunk forwards live */
    s = gen_ok("zbv", 4, 8, 2);
    assert_int_equal(ppv_schedule_memory_bytes(s, &m, &b, err, sizeof err), 0);
    for (int32_t r = 0; r < 4; r++) {
        double params = 6 * layer + (r == 0 ? word + pos + 2 * 2048 : 0);
        assert_true(b.params[r] == params);
        assert_true(b.activations[r] == 8 * 3 * act);
    }
    ppv_memory_bytes_free(&b);
    /* uneven: 26 layers over 8 stages are 4,4,3,3,3,3,3,3 */
    m.layers = 26;
    assert_int_equal(ppv_schedule_memory_bytes(s, &m, &b, err, sizeof err), 0);
    assert_true(b.params[0] == (4 + 3) * layer + word + pos + 2 * 2048);
    assert_true(b.params[1] == (4 + 3) * layer);
    assert_true(b.params[2] == 6 * layer);
    ppv_memory_bytes_free(&b);
    m.layers = 7;
    assert_int_equal(ppv_schedule_memory_bytes(s, &m, &b, err, sizeof err), -1);
    assert_string_equal(err, "--model: 7 layers cannot fill 8 stages");
    ppv_schedule_free(s);
}

static void test_model_spec_errors(void **state) {
    (void)state;
    static const char *const rows[][2] = {
        {"layers=4,hidden=64,heads=4", "--model needs layers, hidden, heads and seq"},
        {"layers=4,hidden=64,heads=4,seq=8,colour=red", "--model: unknown key 'colour'"},
        {"layers=4,hidden=64,heads=4,seq=8,tp=3", "--model: tp=3 must divide hidden=64"},
        {"layers=4,hidden=64,heads=5,seq=8", "--model: hidden=64 is not a multiple of heads=5"},
        {"layers=4,hidden=64,heads=4,seq=8,sp=1", "--model: sp=1 (sequence parallelism) needs tp > 1"},
        {"layers=4,hidden=64,heads=4,seq=eight", "--model: seq needs a whole number from 1 to 16777216, not 'eight'"},
        {"layers=4,hidden=64,heads=4,seq=8,dtype=fp32", "--model: dtype is bf16 or fp16"},
        {"layers=4,hidden=64,heads=4,seq=8,recompute=some", "--model: recompute is none, selective"},
        {"layers=4 hidden", "--model: a space in 'layers=4 hidden'"}};
    for (size_t k = 0; k < sizeof rows / sizeof rows[0]; k++) {
        ppv_model_spec m;
        char err[512] = "";
        assert_int_equal(ppv_model_spec_parse(rows[k][0], &m, err, sizeof err), -1);
        if (!strstr(err, rows[k][1])) fail_msg("%s: got '%s'", rows[k][0], err);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rendezvous_deadlock_names_both_ranks_and_the_cycle),
        cmocka_unit_test(test_rendezvous_only_deadlock_completes_under_eager),
        cmocka_unit_test(test_eager_bytes_threshold_hides_or_exposes_the_hang),
        cmocka_unit_test(test_grouped_exchange_is_safe_under_rendezvous),
        cmocka_unit_test(test_receive_cycle_deadlocks_under_every_semantics),
        cmocka_unit_test(test_compute_order_cycle_deadlocks_before_lowering),
        cmocka_unit_test(test_mismatched_message_order_names_both_actions),
        cmocka_unit_test(test_count_and_order_errors_are_each_reported),
        cmocka_unit_test(test_missing_receive_and_local_order_errors),
        cmocka_unit_test(test_collectives_chunks_and_roots_are_checked),
        cmocka_unit_test(test_interop_files_check_clean),
        cmocka_unit_test(test_every_schedule_pytorch_classes_write_gets_pytorchs_verdict),
        cmocka_unit_test(test_a_lowered_file_takes_its_compute_only_twins_time),
        cmocka_unit_test(test_a_compute_waits_only_for_its_own_input),
        cmocka_unit_test(test_dependencies_by_table_and_by_hash_give_the_same_times),
        cmocka_unit_test(test_memory_model_options),
        cmocka_unit_test(test_recompute_stashes_only_the_input),
        cmocka_unit_test(test_bad_costs_are_rejected),
        cmocka_unit_test(test_microbatch_99999999_alone_lacks_every_other_forward),
        cmocka_unit_test(test_64_stages_at_microbatch_99999999_are_counted_not_allocated),
        cmocka_unit_test(test_sparse_microbatches_report_order_and_count_errors_in_place),
        cmocka_unit_test(test_collectives_on_group_65536_and_group_0_deadlock),
        cmocka_unit_test(test_semantics_parse),
        cmocka_unit_test(test_times_are_the_same_bits_under_every_semantics),
        cmocka_unit_test(test_a_large_schedule_checked_in_runs_of_ranks),
        cmocka_unit_test(test_the_check_works_out_pytorchs_view_when_asked),
        cmocka_unit_test(test_layer_activation_bytes_are_the_papers),
        cmocka_unit_test(test_bytes_per_rank_by_hand),
        cmocka_unit_test(test_model_spec_errors),
    };
    return cmocka_run_group_tests(tests, NULL, tmp_cleanup);
}
