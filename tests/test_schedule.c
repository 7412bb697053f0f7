/* test_schedule.c - the schedule IR, PyTorch's CSV in both dialects and
 * forms, ppv's native format, and their parse errors. */
#define _GNU_SOURCE /* mincore, sched_getaffinity */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "engine/schedule/schedule_internal.h" /* white-box: the readers, huge-page blocks */
#include "testutil.h"

static ppv_schedule *parse_csv(const char *text, ppv_dialect d, char *err, size_t n) {
    ppv_schedule *s = NULL;
    int rc = ppv_schedule_parse_csv(text, strlen(text), "t.csv", d, &s, err, n);
    if (rc != 0) return NULL;
    return s;
}

static void expect_csv_error(const char *text, const char *message) {
    char err[1024] = "";
    ppv_schedule *s = parse_csv(text, PPV_DIALECT_AUTO, err, sizeof err);
    assert_null(s);
    assert_string_equal(err, message);
}

static void test_interop_dualpipev_loads_with_v_placement(void **state) {
    (void)state;
    ppv_schedule *s = load_ok(interop_path("dualpipev_4rank_10mb.csv"));
    assert_int_equal(s->nranks, 4);
    assert_int_equal(s->nstages, 8);
    assert_int_equal(s->nmb, 10);
    assert_int_equal(s->form, PPV_FORM_COMPUTE_ONLY);
    static const int32_t vmap[8] = {0, 1, 2, 3, 3, 2, 1, 0};
    for (int st = 0; st < 8; st++) assert_int_equal(s->stage_rank[st], vmap[st]);
    /* row 0 holds 38 cells; 9 of them are overlapped pairs */
    int overlapped = 0;
    for (int32_t i = 0; i < s->prog[0].n; i++) overlapped += s->prog[0].acts[i].overlap != 0;
    assert_int_equal(overlapped, 18);
    assert_int_equal(s->prog[0].n, 38 + 9);
    assert_int_equal(s->prog[0].acts[s->prog[0].n - 1].step, 37);
    ppv_schedule_free(s);
}

static void test_interop_zb1p_compute_and_comms_load_with_loop_placement(void **state) {
    (void)state;
    ppv_schedule *c = load_ok(interop_path("zb1p_2rank_2stagep_compute.csv"));
    ppv_schedule *k = load_ok(interop_path("zb1p_2rank_2stagep_comms.csv"));
    assert_int_equal(c->form, PPV_FORM_COMPUTE_ONLY);
    assert_int_equal(k->form, PPV_FORM_COMPUTE_COMMS);
    for (int st = 0; st < 4; st++) {
        assert_int_equal(c->stage_rank[st], st % 2);
        assert_int_equal(k->stage_rank[st], st % 2);
    }
    assert_int_equal(c->nmb, 8);
    assert_int_equal(k->prog[0].n, 80);
    assert_int_equal(k->prog[1].n, 96);
    /* rank 1's first cell is empty: its first action sits at step 1 */
    assert_int_equal(c->prog[1].acts[0].step, 1);
    ppv_schedule_free(c);
    ppv_schedule_free(k);
}

static void test_csv_writer_reproduces_every_interop_file_byte_for_byte(void **state) {
    (void)state;
    static const char *files[] = {"dualpipev_4rank_10mb.csv", "zb1p_2rank_2stagep_compute.csv",
                                  "zb1p_2rank_2stagep_comms.csv"};
    for (size_t k = 0; k < 3; k++) {
        ppv_schedule *s = load_ok(interop_path(files[k]));
        char *want = slurp(interop_path(files[k]));
        char *got = csv_text(s);
        assert_string_equal(got, want);
        free(want);
        free(got);
        ppv_schedule_free(s);
    }
}

static void test_action_tokens_round_trip(void **state) {
    (void)state;
    /* PyTorch's own round-trip list */
    static const char *toks[] = {"1F0",      "2I1",      "0W3",       "0B3",
                                 "1UNSHARD", "3RESHARD", "2SEND_B2",  "1RECV_F1",
                                 "0REDUCE_GRAD", "4SEND_F12", "5RECV_B0"};
    for (size_t k = 0; k < sizeof toks / sizeof toks[0]; k++) {
        ppv_action a;
        char why[256], buf[64];
        assert_int_equal(ppv_parse_torch_token(toks[k], strlen(toks[k]), 0, &a, why, sizeof why),
                         0);
        ppv_action_format(NULL, &a, buf, sizeof buf);
        assert_string_equal(buf, toks[k]);
    }
}

static void test_legacy_dialect_is_detected_and_mapped(void **state) {
    (void)state;
    ppv_schedule *s = load_ok(data_path("legacy_dialect.csv"));
    assert_int_equal(s->dialect, PPV_DIALECT_LEGACY);
    /* rank 0: 0F0 0F1 0B0 0W0 ... where B meant backward-for-inputs */
    assert_int_equal(s->prog[0].acts[2].kind, PPV_ACT_I);
    assert_int_equal(s->prog[0].acts[3].kind, PPV_ACT_W);
    /* rank 1: BW was the full backward */
    assert_int_equal(s->prog[1].acts[1].kind, PPV_ACT_B);
    ppv_check_report *rep = check_with(s, "rendezvous");
    assert_true(rep->ok);
    ppv_check_report_free(rep);
    ppv_schedule_free(s);
}

static void test_dialect_flag_overrides_detection(void **state) {
    (void)state;
    char err[512];
    /* B and W without I: read as legacy unless told otherwise */
    ppv_schedule *s = parse_csv("0F0,0B0,0W0\n", PPV_DIALECT_AUTO, err, sizeof err);
    assert_non_null(s);
    assert_int_equal(s->prog[0].acts[1].kind, PPV_ACT_I);
    ppv_schedule_free(s);
    s = parse_csv("0F0,0B0,0W0\n", PPV_DIALECT_CURRENT, err, sizeof err);
    assert_non_null(s);
    assert_int_equal(s->prog[0].acts[1].kind, PPV_ACT_B);
    ppv_schedule_free(s);
    assert_null(parse_csv("0F0,0BW0\n", PPV_DIALECT_CURRENT, err, sizeof err));
    assert_string_equal(err, "t.csv:1:5: rank 0 step 1 cell '0BW0': 'BW' is the older PyTorch "
                             "dialect's full backward; read the file with --dialect legacy "
                             "(today it is spelled 'B')");
    assert_null(parse_csv("0F0,0I0\n", PPV_DIALECT_LEGACY, err, sizeof err));
}

static void test_csv_parse_errors_name_file_line_column_and_cell(void **state) {
    (void)state;
    expect_csv_error("0F0,0X1\n", "t.csv:1:5: rank 0 step 1 cell '0X1': unknown action type 'X' "
                                  "(expected one of F I B W UNSHARD RESHARD REDUCE_GRAD SEND_F "
                                  "RECV_F SEND_B RECV_B)");
    expect_csv_error("0F0\n1F0,,F3\n", "t.csv:2:6: rank 1 step 2 cell 'F3': expected a stage "
                                      "number first, as in '2F0' ([stage][type][microbatch])");
    expect_csv_error("0F\n", "t.csv:1:1: rank 0 step 0 cell '0F': F needs a microbatch index, "
                            "as in '0F0'");
    expect_csv_error("0F0x\n", "t.csv:1:1: rank 0 step 0 cell '0F0x': unexpected 'x' after the "
                              "action");
    expect_csv_error("0UNSHARD3\n", "t.csv:1:1: rank 0 step 0 cell '0UNSHARD3': UNSHARD takes no "
                                   "microbatch index");
    expect_csv_error("(0F1;1B0\n", "t.csv:1:1: rank 0 step 0 cell '(0F1;1B0': an overlapped "
                                  "cell is written '(a;b)OVERLAP_F_B'");
    expect_csv_error("(0F1;0SEND_F0)OVERLAP_F_B\n",
                     "t.csv:1:1: rank 0 step 0 cell '(0F1;0SEND_F0)OVERLAP_F_B': OVERLAP_F_B "
                     "may only hold F, I, B or W, not SEND_F");
    expect_csv_error("0R0\n", "t.csv:1:1: rank 0 step 0 cell '0R0': 'R' is a ppv extension; it "
                             "belongs in a native schedule file (spec/schedule-format.md)");
    expect_csv_error("0SEND1\n", "t.csv:1:1: rank 0 step 0 cell '0SEND1': 'SEND' is a ppv "
                                 "extension with no stage; it belongs in a native schedule file "
                                 "(spec/schedule-format.md)");
    expect_csv_error("", "t.csv:1:1: empty schedule (no rank rows)");
    expect_csv_error("0F999999999\n", "t.csv:1:1: rank 0 step 0 cell '0F999999999': microbatch "
                                     "index too large (limit 100000000)");
    expect_csv_error("0F0,999999999F0\n", "t.csv:1:5: rank 0 step 1 cell '999999999F0': stage "
                                          "index too large (limit 100000000)");
}

static void test_stage_on_two_ranks_is_rejected(void **state) {
    (void)state;
    char err[512];
    ppv_schedule *s = NULL;
    assert_int_equal(ppv_schedule_load(data_path("two_ranks_one_stage.csv"), PPV_DIALECT_AUTO, &s,
                                       err, sizeof err),
                     -1);
    assert_null(s);
    assert_non_null(strstr(err, "two_ranks_one_stage.csv:2:1: rank 1 cell '1F1': stage 1 is "
                                "already on rank 0"));
    /* the reader notes each program's first 8 stages; a program of more
     * (rank 0: 10) is read again by finish, and either way the first
     * action, rank by rank, on a stage another rank holds is named */
    static const char *const texts[] = {
        "0F0,1F0,2F0,3F0,4F0,5F0,6F0,7F0,8F0,9F0\n10F0,3F1\n",
        "0F0,1F0\n2F0,3F0,4F0,5F0,6F0,7F0,8F0,9F0,10F0,1F1,0F2\n",
        "0F0,1F0,0F1,2F0\n2F1,3F0\n"};
    static const char *const want[] = {
        "t.csv:2:6: rank 1 cell '3F1': stage 3 is already on rank 0",
        "t.csv:2:38: rank 1 cell '1F1': stage 1 is already on rank 0",
        "t.csv:2:1: rank 1 cell '2F1': stage 2 is already on rank 0"};
    for (int k = 0; k < 3; k++) {
        assert_int_equal(ppv_schedule_parse_csv(texts[k], strlen(texts[k]), "t.csv",
                                                PPV_DIALECT_AUTO, &s, err, sizeof err),
                         -1);
        assert_null(s);
        if (!strstr(err, want[k])) fail_msg("%d: %s", k, err);
    }
}

static void test_crlf_quotes_and_trailing_blank_lines_are_accepted(void **state) {
    (void)state;
    char err[512];
    ppv_schedule *s = parse_csv("0F0,\"0B0\"\r\n1F0, 1B0 \r\n\r\n\n", PPV_DIALECT_AUTO, err,
                                sizeof err);
    assert_non_null(s);
    assert_int_equal(s->nranks, 2);
    assert_int_equal(s->prog[1].n, 2);
    assert_int_equal(s->prog[1].acts[1].kind, PPV_ACT_B);
    ppv_schedule_free(s);
}

static void test_native_format_round_trips_and_keeps_extensions(void **state) {
    (void)state;
    ppv_schedule *s = load_ok(data_path("mesh_collectives.ppv"));
    assert_int_equal(s->nranks, 4);
    assert_int_equal(s->ngroups, 1);
    assert_string_equal(s->groups[0].name, "mesh");
    const ppv_action *b = &s->prog[1].acts[1];
    assert_int_equal(b->kind, PPV_ACT_BCAST);
    assert_int_equal(b->root, 0);
    assert_int_equal(b->bytes, 4096);
    assert_int_equal(b->dtype, PPV_DTYPE_U8);
    assert_int_equal(s->prog[1].acts[2].kind, PPV_ACT_CHUNK);
    assert_int_equal(s->prog[1].acts[2].count, 3);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(ppv_schedule_write_native(s, f), 0);
    fclose(f);
    ppv_schedule *t = NULL;
    char err[512];
    assert_int_equal(ppv_schedule_parse_native(buf, len, "rt.ppv", &t, err, sizeof err), 0);
    assert_int_equal(ppv_schedule_size(t), ppv_schedule_size(s));
    for (int32_t r = 0; r < s->nranks; r++)
        for (int32_t i = 0; i < s->prog[r].n; i++) {
            const ppv_action *x = &s->prog[r].acts[i], *y = &t->prog[r].acts[i];
            assert_int_equal(x->kind, y->kind);
            assert_int_equal(x->peer, y->peer);
            assert_int_equal(x->tag, y->tag);
            assert_int_equal(x->bytes, y->bytes);
            assert_int_equal(x->group, y->group);
            assert_int_equal(x->root, y->root);
            assert_int_equal(x->count, y->count);
        }
    /* the CSV cannot hold a collective */
    char e2[256];
    FILE *g = fopen("/dev/null", "w");
    assert_int_equal(ppv_schedule_write_csv(s, g, e2, sizeof e2), -1);
    fclose(g);
    assert_string_equal(e2, "rank 0 uses SEND, a ppv extension PyTorch's CSV cannot hold; write "
                            "the native format instead");
    free(buf);
    ppv_schedule_free(s);
    ppv_schedule_free(t);
}

static void expect_native_error(const char *text, const char *message) {
    ppv_schedule *s = NULL;
    char err[1024] = "";
    assert_int_equal(ppv_schedule_parse_native(text, strlen(text), "n.ppv", &s, err, sizeof err),
                     -1);
    assert_null(s);
    assert_string_equal(err, message);
}

static void test_native_parse_errors_name_line_column_and_cell(void **state) {
    (void)state;
    expect_native_error("ppv-schedule 2\n", "n.ppv:1:14: native schedule version 2 is not "
                                            "supported (this ppv reads 1)");
    expect_native_error("ranks 2\n", "n.ppv:1:1: a native schedule starts with 'ppv-schedule 1'");
    expect_native_error("ppv-schedule 1\nranks 2\nrank 0\nSEND tag=1\n",
                        "n.ppv:4:1: rank 0 cell 'SEND': SEND needs peer=RANK");
    expect_native_error("ppv-schedule 1\nranks 2\nrank 0\nSEND peer=5\n",
                        "n.ppv:4:11: rank 0 cell 'SEND': peer must be a rank in 0..1");
    expect_native_error("ppv-schedule 1\nranks 2\nrank 1\n  ALLREDUCE group=tp\n",
                        "n.ppv:4:19: rank 1 cell 'ALLREDUCE': no process group 'tp' (declare it "
                        "with 'group tp RANK...')");
    expect_native_error("ppv-schedule 1\nranks 2\ngroup g 0 1\nrank 0\nBCAST group=g root=2\n",
                        "n.ppv:5:1: rank 0 cell 'BCAST': root 2 is outside group 'g' of 2 ranks");
    expect_native_error("ppv-schedule 1\nranks 2\nrank 0\nCHUNK\n",
                        "n.ppv:4:1: rank 0 cell 'CHUNK': CHUNK needs expected_generator_calls=N");
    expect_native_error("ppv-schedule 1\nranks 2\nrank 0\nGEN peer=1\n",
                        "n.ppv:4:5: rank 0 cell 'GEN': GEN takes no attribute 'peer'");
    expect_native_error("ppv-schedule 1\nranks 2\n0F0\n",
                        "n.ppv:3:1: an action must follow a 'rank R' line");
    expect_native_error("ppv-schedule 1\nranks 1\nmicrobatches 1\nrank 0\n0F3\n",
                        "n.ppv: an action names microbatch 3 but 'microbatches 1' was given");
}

static ppv_schedule *parse_native_ok(const char *text) {
    ppv_schedule *s = NULL;
    char err[1024] = "";
    int rc = ppv_schedule_parse_native(text, strlen(text), "n.ppv", &s, err, sizeof err);
    if (rc != 0) fprintf(stderr, "%s\n", err);
    assert_int_equal(rc, 0);
    return s;
}

/* ppv_action.group held 16 bits: group 65536 was read as group 0. */
static void test_collective_names_group_65536_not_group_0(void **state) {
    (void)state;
    char *t = many_groups_text(65537, "ALLREDUCE group=g65536", "ALLREDUCE group=g32768");
    ppv_schedule *s = parse_native_ok(t);
    assert_int_equal(s->ngroups, 65537);
    assert_int_equal(s->prog[0].acts[0].group, 65536);
    assert_int_equal(s->prog[1].acts[0].group, 32768);
    char buf[64];
    ppv_action_format(s, &s->prog[0].acts[0], buf, sizeof buf);
    assert_string_equal(buf, "ALLREDUCE@g65536");
    ppv_schedule_free(s);
    free(t);
}

/* Where an action was read: line and byte column, kept beside the
 * programs; nothing for actions no reader placed. */
/* A file read without its places: the same actions, no place (CSV and
 * native alike). */
static void test_a_file_read_without_its_places(void **state) {
    (void)state;
    static const char *const files[] = {"count_errors.csv", "exchange_ungrouped.ppv"};
    for (size_t k = 0; k < 2; k++) {
        ppv_schedule *a = NULL, *b = NULL;
        char err[512];
        int32_t line = 0, col = 0;
        assert_int_equal(
            ppv_schedule_load(data_path(files[k]), PPV_DIALECT_AUTO, &a, err, sizeof err), 0);
        assert_int_equal(
            ppv_schedule_load_placeless(data_path(files[k]), PPV_DIALECT_AUTO, &b, err, sizeof err),
            0);
        assert_int_equal(ppv_schedule_where(a, 0, 0, &line, &col), 0);
        assert_int_equal(a->nranks, b->nranks);
        for (int32_t r = 0; r < a->nranks; r++) {
            assert_int_equal(a->prog[r].n, b->prog[r].n);
            assert_memory_equal(a->prog[r].acts, b->prog[r].acts,
                                (size_t)a->prog[r].n * sizeof(ppv_action));
            assert_null(b->prog[r].src);
            for (int32_t i = 0; i < b->prog[r].n; i++)
                assert_int_equal(ppv_schedule_where(b, r, i, &line, &col), -1);
        }
        assert_int_equal(b->nlines, 0);
        ppv_schedule_free(a);
        ppv_schedule_free(b);
    }
}

/* Whether this kernel makes a mapping's pages at once (Linux 5.14). */
static int can_populate(void) {
#ifdef MADV_POPULATE_WRITE
    size_t n = 4096;
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return 0;
    int ok = madvise(p, n, MADV_POPULATE_WRITE) == 0;
    munmap(p, n);
    return ok;
#else
    return 0;
#endif
}

/* ppv_alloc_big's two kinds of block, either side of 256 KiB: a mapping
 * starts on a 2 MiB boundary and a malloc block never does (which is how
 * ppv_free_big tells them apart); both hold all their bytes, and
 * ppv_calloc_big's are zeroed. A mapping's pages are resident before
 * anything touches them (mincore), where the kernel can populate. */
static void test_big_blocks_either_side_of_256_kib(void **state) {
    (void)state;
    const size_t mib2 = (size_t)2 << 20, own = (size_t)256 << 10;
    static const size_t sizes[] = {0,
                                   1,
                                   4096,
                                   ((size_t)256 << 10) - 1,
                                   (size_t)256 << 10,
                                   ((size_t)2 << 20) - 1,
                                   (size_t)2 << 20,
                                   ((size_t)2 << 20) + 1,
                                   ((size_t)5 << 20) + 12345};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        size_t n = sizes[k];
        unsigned char *a = ppv_alloc_big(n), *z = ppv_calloc_big(n, 1);
        assert_non_null(a);
        assert_non_null(z);
        assert_int_equal((uintptr_t)a % mib2 == 0, n >= own);
        assert_int_equal((uintptr_t)z % mib2 == 0, n >= own);
        if (n >= own && can_populate()) {
            size_t pages = (n + 4095) / 4096, resident = 0;
            unsigned char *vec = malloc(pages);
            assert_non_null(vec);
            assert_int_equal(mincore(a, n, vec), 0);
            for (size_t i = 0; i < pages; i++)
                resident += vec[i] & 1;
            assert_int_equal(resident, pages);
            free(vec);
        }
        size_t nonzero = 0;
        for (size_t i = 0; i < n; i++)
            nonzero += z[i] != 0;
        assert_int_equal(nonzero, 0);
        memset(a, 0xa5, n);
        memset(z, 0x5a, n);
        ppv_free_big(a);
        ppv_free_big(z);
    }
    ppv_free_big(NULL);
    assert_null(ppv_calloc_big(SIZE_MAX / 2, 4)); /* n * size overflows */
}

/* ---- runs side by side, on helpers ---------------------------------------- */

enum { RUN_PARTS = 1000, RUN_RUNS = 4 };

/* What each part of a pass saw: its run, and the thread that ran it. */
typedef struct run_marks {
    int32_t run[RUN_PARTS];
    int times[RUN_PARTS];
    pthread_t who[RUN_RUNS];
    int cpus[RUN_RUNS]; /* processors the run's thread may use */
} run_marks;

static void mark_run(void *arg, int32_t run, int32_t from, int32_t to) {
    run_marks *m = arg;
    m->who[run] = pthread_self();
    cpu_set_t may;
    m->cpus[run] = sched_getaffinity(0, sizeof may, &may) == 0 ? CPU_COUNT(&may) : -1;
    for (int32_t k = from; k < to; k++) {
        m->run[k] = run;
        m->times[k]++;
    }
}

/* One pass of RUN_RUNS runs over RUN_PARTS parts of a unit each: every
 * part once, cut in runs of 250 (the cut written out: run k holds parts
 * [250 k, 250 (k + 1))). Returns how many runs another thread took. */
static int one_pass(run_marks *m) {
    int64_t ends[RUN_PARTS + 1];
    for (int32_t k = 0; k <= RUN_PARTS; k++) ends[k] = k;
    memset(m, 0, sizeof *m);
    ppv_runs(RUN_RUNS, ends, RUN_PARTS, mark_run, m);
    for (int32_t k = 0; k < RUN_PARTS; k++) {
        if (m->times[k] != 1 || m->run[k] != k / 250) return -1;
    }
    int away = 0;
    for (int32_t r = 0; r < RUN_RUNS; r++) away += !pthread_equal(m->who[r], pthread_self());
    return away;
}

static void *passes(void *arg) {
    int *bad = arg;
    run_marks *m = malloc(sizeof *m);
    for (int i = 0; m && i < 200; i++) *bad += one_pass(m) < 0;
    if (!m) *bad = 1;
    free(m);
    return NULL;
}

static void bump(void *arg) {
    (*(int *)arg)++;
}

static void where_run(void *arg) {
    *(int *)arg = sched_getcpu();
}

/* The helpers that runs go to: every part of a pass once, in the runs the
 * cut gives, from two threads at once; a helper takes a run where there
 * are two processors, held to one other than the caller's (also when the
 * caller has since come to it); and a forked child, which has none of its
 * parent's helpers, still finishes its passes (it would wait forever for
 * a helper that is not there). */
static void test_runs_go_to_helpers_and_a_forked_child_makes_its_own(void **state) {
    (void)state;
    ppv_helpers_wake();
    run_marks *m = malloc(sizeof *m);
    assert_non_null(m);
    int away = one_pass(m);
    assert_true(away >= 0);
    cpu_set_t may;
    int cpus = sched_getaffinity(0, sizeof may, &may) == 0 ? CPU_COUNT(&may) : 1;
    if (sysconf(_SC_NPROCESSORS_ONLN) > 1 && cpus > 1) {
        assert_true(away >= 1);
        for (int32_t r = 1; r < RUN_RUNS; r++)
            if (!pthread_equal(m->who[r], pthread_self())) assert_int_equal(m->cpus[r], 1);
    }
    int n = 0;
    ppv_beside b;
    if (!ppv_beside_start(&b, bump, &n)) bump(&n);
    ppv_beside_join(&b);
    ppv_beside_join(&b); /* again: nothing */
    assert_int_equal(n, 1);
    if (sysconf(_SC_NPROCESSORS_ONLN) > 1 && cpus > 1) {
        /* this thread held to the helper's processor: the helper moves
         * off it when given work, and the two do not take turns there */
        int there = -1, then = -1;
        assert_true(ppv_beside_start(&b, where_run, &there));
        ppv_beside_join(&b);
        assert_true(there >= 0);
        cpu_set_t one;
        CPU_ZERO(&one);
        CPU_SET(there, &one);
        assert_int_equal(sched_setaffinity(0, sizeof one, &one), 0);
        assert_int_equal(sched_getcpu(), there);
        assert_true(ppv_beside_start(&b, where_run, &then));
        ppv_beside_join(&b);
        assert_int_equal(sched_setaffinity(0, sizeof may, &may), 0);
        assert_true(then >= 0);
        assert_int_not_equal(then, there);
    }

    pthread_t t;
    int bad_a = 0, bad_b = 0;
    assert_int_equal(pthread_create(&t, NULL, passes, &bad_a), 0);
    passes(&bad_b);
    assert_int_equal(pthread_join(t, NULL), 0);
    assert_int_equal(bad_a, 0);
    assert_int_equal(bad_b, 0);

    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        int ok = one_pass(m) >= 0;
        int k = 0;
        if (!ppv_beside_start(&b, bump, &k)) bump(&k);
        ppv_beside_join(&b);
        free(m); /* valgrind, following this child, counts what it holds */
        _exit(ok && k == 1 ? 0 : 1);
    }
    int status = -1, waited = 0;
    for (; waited < 3000 && waitpid(pid, &status, WNOHANG) == 0; waited++) {
        struct timespec ms10 = {0, 10 * 1000 * 1000};
        nanosleep(&ms10, NULL);
    }
    if (waited == 3000) { /* 30 s: it hangs */
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        fail_msg("the forked child's pass never ended");
    }
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
    free(m);
}

/* The programs of a CSV take one block, sized by the cells that hold
 * something (idle cells take no room), which a row with an overlapped
 * cell outgrows. */
static void test_programs_share_a_block_sized_by_their_cells(void **state) {
    (void)state;
    static const char csv[] = "0F0,,, ,0F1,(0I0;0W0)OVERLAP_F_B\n , ,\n\n,,,,\n1F0,,\r\n";
    char err[512] = "";
    ppv_schedule *s = parse_csv(csv, PPV_DIALECT_AUTO, err, sizeof err);
    assert_non_null(s);
    /* row 0: 0F0, ' ', 0F1 and the overlapped cell; row 1: its second
     * ' '; rows 2 and 3: none; row 4: 1F0 and the '\r' after its commas */
    assert_int_equal(s->arena_n, 4 + 1 + 2);
    assert_int_equal(s->nranks, 5);
    static const int32_t n[5] = {4, 0, 0, 0, 1};
    for (int32_t r = 0; r < 5; r++)
        assert_int_equal(s->prog[r].n, n[r]);
    assert_int_equal(s->prog[0].acts[1].step, 4);
    assert_int_equal(s->prog[0].acts[3].kind, PPV_ACT_W);
    assert_int_equal(s->prog[4].acts[0].mb, 0);
    ppv_schedule_free(s);
}

/* A CSV of three rows: row 0 holds n forwards of stage 0 and then an
 * overlapped cell of two actions (a row with more actions than cells),
 * row 1 is blank, row 2 holds n forwards of stage 1 after two spaces. */
static char *big_csv(int32_t n, size_t *len) {
    size_t cap = (size_t)n * 2 * 12 + 64, at = 0;
    char *t = malloc(cap);
    assert_non_null(t);
    for (int32_t i = 0; i < n; i++)
        at += (size_t)sprintf(t + at, "0F%d,", i);
    at += (size_t)sprintf(t + at, "(0I0;0W0)OVERLAP_F_B\n\n  ");
    for (int32_t i = 0; i < n; i++)
        at += (size_t)sprintf(t + at, i ? ",1F%d" : "1F%d", i);
    t[at++] = '\n';
    *len = at;
    return t;
}

static void expect_big(const ppv_schedule *s, int32_t n) {
    assert_non_null(s);
    assert_int_equal(s->nranks, 3);
    assert_int_equal(s->prog[0].n, n + 2);
    assert_int_equal(s->prog[1].n, 0);
    assert_int_equal(s->prog[2].n, n);
    for (int32_t i = 0; i < n; i++) {
        assert_int_equal(s->prog[0].acts[i].kind, PPV_ACT_F);
        assert_int_equal(s->prog[0].acts[i].mb, i);
        assert_int_equal(s->prog[2].acts[i].stage, 1);
        assert_int_equal(s->prog[2].acts[i].mb, i);
        assert_int_equal(s->prog[2].acts[i].step, i);
    }
    assert_int_equal(s->prog[0].acts[n].kind, PPV_ACT_I);
    assert_int_equal(s->prog[0].acts[n + 1].kind, PPV_ACT_W);
    assert_int_equal(s->prog[0].acts[n + 1].step, n);
    assert_int_equal(s->prog[0].acts[n + 1].overlap, s->prog[0].acts[n].overlap);
}

/* 300,002 actions in 9.6 MB, read from a file (one block of its size)
 * and from a pipe (grown as it comes), both on the huge-page path
 * (blocks of 2 MiB and more); the programs share one block, which row 0
 * outgrows with its last cell. */
static void test_a_large_file_is_read_whole_from_a_file_and_a_pipe(void **state) {
    (void)state;
    const int32_t n = 150000;
    size_t len;
    char *text = big_csv(n, &len);
    assert_true(len > ((size_t)2 << 20));
    const char *path = tmp_path("big.csv");
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, len, f), len);
    assert_int_equal(fclose(f), 0);
    ppv_schedule *s = NULL;
    char err[512] = "";
    assert_int_equal(ppv_schedule_load_placeless(path, PPV_DIALECT_AUTO, &s, err, sizeof err), 0);
    expect_big(s, n);
    assert_int_equal(s->arena_n, 2 * n + 1);
    ppv_schedule_free(s);

    int fds[2];
    assert_int_equal(pipe(fds), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        for (size_t at = 0; at < len;) {
            ssize_t w = write(fds[1], text + at, len - at);
            if (w <= 0) _exit(1);
            at += (size_t)w;
        }
        free(text); /* valgrind, following this child, counts what it holds */
        _exit(0);
    }
    close(fds[1]);
    int saved = dup(0);
    assert_true(saved >= 0);
    assert_int_equal(dup2(fds[0], 0), 0);
    close(fds[0]);
    int rc = ppv_schedule_load("-", PPV_DIALECT_AUTO, &s, err, sizeof err);
    assert_int_equal(dup2(saved, 0), 0);
    close(saved);
    clearerr(stdin);
    int status = -1;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_int_equal(status, 0);
    assert_int_equal(rc, 0);
    expect_big(s, n);
    int32_t line = 0, col = 0;
    assert_int_equal(ppv_schedule_where(s, 2, n - 1, &line, &col), 0);
    assert_int_equal(line, 3);
    int32_t want_col = 3; /* after the two spaces, then each earlier cell and its comma */
    for (int32_t i = 0; i < n - 1; i++)
        want_col += snprintf(NULL, 0, "1F%d,", i);
    assert_int_equal(col, want_col);
    ppv_schedule_free(s);
    free(text);
}

/* Eight rows of 60,000 cells each (about 4 MB): read by several threads
 * where the machine has the processors (one a MiB, rows cut by bytes),
 * as one would read them. The schedule is the file's, and of two bad
 * cells the one in the earlier row is the error, wherever the rows were
 * cut; a bad cell in the last row alone is named as exactly. */
static char *rows_csv(int32_t rows, int32_t n, int32_t bad_row, int32_t bad_step,
                      int32_t bad_row2, size_t *len, int32_t *bad_col) {
    size_t cap = (size_t)rows * (size_t)n * 16 + 64, at = 0;
    char *t = malloc(cap);
    assert_non_null(t);
    for (int32_t r = 0; r < rows; r++) {
        size_t row_at = at;
        for (int32_t i = 0; i < n; i++) {
            int bad = (r == bad_row || r == bad_row2) && i == bad_step;
            if (bad && r == bad_row) *bad_col = (int32_t)(at - row_at) + (i ? 2 : 1);
            at += (size_t)sprintf(t + at, bad ? "%s%dZ%d" : "%s%dF%d", i ? "," : "", r, i);
        }
        t[at++] = '\n';
    }
    *len = at;
    return t;
}

static void test_a_large_file_read_in_runs_names_its_first_bad_row(void **state) {
    (void)state;
    const int32_t rows = 8, n = 60000;
    size_t len;
    int32_t col = 0;
    char err[512] = "", want[512];
    char *t = rows_csv(rows, n, -1, -1, -1, &len, &col);
    assert_true(len > ((size_t)3 << 20));
    ppv_schedule *s = NULL;
    assert_int_equal(ppv_schedule_parse_csv(t, len, "t.csv", PPV_DIALECT_AUTO, &s, err, sizeof err),
                     0);
    assert_int_equal(s->nranks, rows);
    assert_int_equal(s->nstages, rows);
    assert_int_equal(s->nmb, n);
    for (int32_t r = 0; r < rows; r++) {
        assert_int_equal(s->prog[r].n, n);
        assert_int_equal(s->stage_rank[r], r);
        for (int32_t i = 0; i < n; i += 997) {
            assert_int_equal(s->prog[r].acts[i].kind, PPV_ACT_F);
            assert_int_equal(s->prog[r].acts[i].stage, r);
            assert_int_equal(s->prog[r].acts[i].mb, i);
            assert_int_equal(s->prog[r].acts[i].step, i);
        }
    }
    int32_t line = 0, c = 0;
    assert_int_equal(ppv_schedule_where(s, 7, 1, &line, &c), 0);
    assert_int_equal(line, 8);
    assert_int_equal(c, 5); /* after "7F0," */
    ppv_schedule_free(s);
    free(t);

    t = rows_csv(rows, n, 7, 12345, -1, &len, &col); /* the last row alone */
    assert_int_equal(ppv_schedule_parse_csv(t, len, "t.csv", PPV_DIALECT_AUTO, &s, err, sizeof err),
                     -1);
    assert_null(s);
    snprintf(want, sizeof want, "t.csv:8:%d: rank 7 step 12345 cell '7Z12345': unknown action "
             "type 'Z' (expected one of F I B W UNSHARD RESHARD REDUCE_GRAD SEND_F RECV_F SEND_B "
             "RECV_B)", col);
    /* "7F0," to "7F12344,": 3 bytes each and the digits (10 of 1, 90 of 2, ...) */
    assert_int_equal(col, 12345 * 3 + 10 * 1 + 90 * 2 + 900 * 3 + 9000 * 4 + 2345 * 5 + 1);
    assert_string_equal(err, want);
    free(t);

    t = rows_csv(rows, n, 1, 50000, 6, &len, &col); /* rows 2 and 7: row 2 speaks */
    assert_int_equal(ppv_schedule_parse_csv(t, len, "t.csv", PPV_DIALECT_AUTO, &s, err, sizeof err),
                     -1);
    snprintf(want, sizeof want, "t.csv:2:%d: rank 1 step 50000 cell '1Z50000': unknown action "
             "type 'Z' (expected one of F I B W UNSHARD RESHARD REDUCE_GRAD SEND_F RECV_F SEND_B "
             "RECV_B)", col);
    assert_string_equal(err, want);
    free(t);
}

static void test_where_an_action_was_read(void **state) {
    (void)state;
    static const char csv[] = "0F0,,  0F1,(0I0;0W0)OVERLAP_F_B\n1F0\n";
    static const char nat[] = "ppv-schedule 1\n# a comment\nranks 2\nrank 1\n  0F0 \n"
                              "(0I0;0W0)OVERLAP_F_B\nrank 0\nSEND peer=1 tag=2\n";
    ppv_schedule *s = NULL, *t = NULL;
    char err[512];
    int32_t line = 0, col = 0;
    assert_int_equal(
        ppv_schedule_parse_csv(csv, sizeof csv - 1, "w.csv", PPV_DIALECT_AUTO, &s, err, sizeof err),
        0);
    static const int32_t want[][4] = {
        {0, 0, 1, 1}, {0, 1, 1, 8}, {0, 2, 1, 12}, {0, 3, 1, 12}, {1, 0, 2, 1}};
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        assert_int_equal(ppv_schedule_where(s, want[k][0], want[k][1], &line, &col), 0);
        assert_int_equal(line, want[k][2]);
        assert_int_equal(col, want[k][3]);
    }
    assert_int_equal(ppv_schedule_where(s, 0, 4, &line, &col), -1);
    assert_int_equal(ppv_schedule_where(s, 2, 0, &line, &col), -1);
    ppv_action a = ppv_action_make(PPV_ACT_F, 0, 1);
    assert_int_equal(ppv_schedule_append(s, 1, &a), 0); /* added, not read */
    assert_int_equal(ppv_schedule_where(s, 1, 1, &line, &col), -1);
    assert_int_equal(ppv_schedule_parse_native(nat, sizeof nat - 1, "w.ppv", &t, err, sizeof err),
                     0);
    static const int32_t nwant[][4] = {{1, 0, 5, 3}, {1, 1, 6, 1}, {1, 2, 6, 1}, {0, 0, 8, 1}};
    for (size_t k = 0; k < sizeof nwant / sizeof nwant[0]; k++) {
        assert_int_equal(ppv_schedule_where(t, nwant[k][0], nwant[k][1], &line, &col), 0);
        assert_int_equal(line, nwant[k][2]);
        assert_int_equal(col, nwant[k][3]);
    }
    ppv_schedule *g = NULL;
    ppv_gen_params gp = {2, 4, 0};
    assert_int_equal(ppv_generate("1f1b", &gp, &g, err, sizeof err), 0);
    assert_int_equal(ppv_schedule_where(g, 0, 0, &line, &col), -1);
    ppv_schedule_free(g);
    ppv_schedule_free(s);
    ppv_schedule_free(t);
}

/* Overlap ids are 16 bits and wrap after 65,535 cells: neighbours still
 * differ, none becomes 0 ("not overlapped"), and the file is written back
 * byte for byte. */
static void test_overlap_ids_wrap_without_merging_cells(void **state) {
    (void)state;
    enum { CELLS = 65540 };
    size_t cap = (size_t)CELLS * 40 + 16, len = 0;
    char *t = malloc(cap);
    assert_non_null(t);
    for (int32_t k = 0; k < CELLS; k++)
        len += (size_t)snprintf(t + len, cap - len, "%s(0F%d;0I%d)OVERLAP_F_B", k ? "," : "", k + 1,
                                k);
    len += (size_t)snprintf(t + len, cap - len, "\n");
    ppv_schedule *s = NULL;
    char err[512];
    assert_int_equal(ppv_schedule_parse_csv(t, len, "o.csv", PPV_DIALECT_AUTO, &s, err, sizeof err),
                     0);
    const ppv_program *p = &s->prog[0];
    assert_int_equal(p->n, 2 * CELLS);
    for (int32_t k = 0; k < CELLS; k++) {
        const ppv_action *a = &p->acts[2 * k];
        if (a->overlap == 0 || a[1].overlap != a->overlap ||
            (k + 1 < CELLS && a[2].overlap == a->overlap))
            fail_msg("cell %d: ids %u %u, next %u", k, a->overlap, a[1].overlap,
                     k + 1 < CELLS ? a[2].overlap : 0u);
    }
    assert_int_equal(p->acts[2 * 65535].overlap, 1); /* the 65,536th cell */
    char *back = NULL;
    size_t blen = 0;
    FILE *f = open_memstream(&back, &blen);
    assert_int_equal(ppv_schedule_write_csv(s, f, err, sizeof err), 0);
    fclose(f);
    assert_int_equal(blen, len);
    assert_memory_equal(back, t, len);
    free(back);
    ppv_schedule_free(s);
    free(t);
}

/* Declaring and finding groups by name is a hash lookup (30,000 took 1.6 s
 * by linear search): every name still finds its own group, and a name
 * declared twice is still refused. */
static void test_thirty_thousand_groups_each_find_their_own_index(void **state) {
    (void)state;
    char *t = many_groups_text(30000, "ALLREDUCE group=g29999", "ALLREDUCE group=g0");
    ppv_schedule *s = parse_native_ok(t);
    assert_int_equal(s->ngroups, 30000);
    for (int32_t g = 0; g < 30000; g++) {
        char name[16];
        snprintf(name, sizeof name, "g%d", g);
        if (ppv_schedule_find_group(s, name) != g) fail_msg("%s is group %d", name, g);
    }
    assert_int_equal(ppv_schedule_find_group(s, "g30000"), -1);
    assert_int_equal(s->prog[0].acts[0].group, 29999);
    assert_int_equal(ppv_schedule_add_group(s, "g17", (const int32_t[]){0}, 1), -1);
    assert_int_equal(ppv_schedule_add_group(s, "h", (const int32_t[]){1}, 1), 30000);
    assert_int_equal(ppv_schedule_find_group(s, "h"), 30000);
    ppv_schedule_free(s);
    free(t);
    t = many_groups_text(3, "group g1 1", "BARRIER group=g1");
    expect_native_error(t, "n.ppv:7:1: group 'g1' is empty or declared twice");
    free(t);
}

/* A stage index far beyond the actions ('99999999F0' in 11 bytes) is
 * reported as before, from the actions alone, not from an array of 10^8
 * stages. */
static void test_stage_99999999_is_judged_without_an_array_of_stages(void **state) {
    (void)state;
    expect_csv_error("99999999F0\n",
                     "t.csv: stage 0 is computed by no rank (stages 0..99999999 are named)");
    expect_csv_error("0F0,99999999F0,1F0\n",
                     "t.csv: stage 2 is computed by no rank (stages 0..99999999 are named)");
    /* a stage on two ranks is reported first, at the first offending cell in
     * rank and program order (not the lowest stage's) */
    expect_csv_error("0F0,5F0\n3F1,99999999F0\n5F1,0F1,3F2\n",
                     "t.csv:3:1: rank 2 cell '5F1': stage 5 is already on rank 0 (a stage lives "
                     "on one rank)");
}

static void test_binary_and_missing_files_are_errors(void **state) {
    (void)state;
    char err[512];
    ppv_schedule *s = NULL;
    assert_int_equal(ppv_schedule_load("/nonexistent/x.csv", PPV_DIALECT_AUTO, &s, err, sizeof err),
                     -1);
    assert_string_equal(err, "/nonexistent/x.csv: cannot open: No such file or directory");
    const char *path = tmp_path("binary.csv");
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "0F0\0\1", 5), 5);
    close(fd);
    assert_int_equal(ppv_schedule_load(path, PPV_DIALECT_AUTO, &s, err, sizeof err), -1);
    assert_non_null(strstr(err, "binary data (a NUL byte) in a schedule file"));
    unlink(path);
}

/* Checks a schedule that parsed; the check must run to a verdict (an
 * empty one, no stage or microbatch, is refused as run refuses it). */
static void check_parsed(ppv_schedule *s) {
    if (!s) return;
    char err[512];
    ppv_check_options o = ppv_check_defaults();
    ppv_check_report *rep = NULL;
    int64_t actions = 0;
    for (int32_t r = 0; r < s->nranks; r++) actions += s->prog[r].n;
    int empty = actions == 0;
    assert_int_equal(ppv_schedule_check(s, &o, &rep, err, sizeof err), empty ? -1 : 0);
    if (empty) assert_non_null(strstr(err, "no stage or microbatch to check"));
    ppv_check_report_free(rep);
    ppv_schedule_free(s);
}

/* Fails unless a and b are the same schedule: ranks, microbatches, and on
 * every rank the same actions in order (kind, stage, microbatch, what a
 * kind carries, size, group by name, which ones share an overlapped cell). */
static void assert_same_schedule(const ppv_schedule *a, const ppv_schedule *b, const char *how) {
    if (a->nranks != b->nranks || a->nmb != b->nmb)
        fail_msg("%s: %d ranks, %d microbatches became %d, %d", how, a->nranks, a->nmb, b->nranks,
                 b->nmb);
    for (int32_t r = 0; r < a->nranks; r++) {
        const ppv_program *pa = &a->prog[r], *pb = &b->prog[r];
        if (pa->n != pb->n) fail_msg("%s: rank %d: %d actions became %d", how, r, pa->n, pb->n);
        for (int32_t i = 0; i < pa->n; i++) {
            const ppv_action *x = &pa->acts[i], *y = &pb->acts[i];
            int same = x->kind == y->kind && x->stage == y->stage && x->mb == y->mb &&
                       x->peer == y->peer && x->tag == y->tag && x->bytes == y->bytes &&
                       x->dtype == y->dtype && (x->overlap != 0) == (y->overlap != 0) &&
                       (i == 0 || (x->overlap && x->overlap == pa->acts[i - 1].overlap) ==
                                      (y->overlap && y->overlap == pb->acts[i - 1].overlap));
            if (same && (ppv_action_flags(x->kind) & PPV_AF_COLL)) /* groups by name */
                same = strcmp(a->groups[x->group].name, b->groups[y->group].name) == 0;
            if (!same) fail_msg("%s: rank %d action %d differs", how, r, i);
        }
    }
}

/* Whatever ppv accepts it writes in a form it accepts again that means the
 * same schedule: native always, CSV when every action is PyTorch's. */
static void assert_round_trips(const ppv_schedule *s) {
    char err[1024], *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_int_equal(ppv_schedule_write_native(s, f), 0);
    fclose(f);
    ppv_schedule *back = NULL;
    if (ppv_schedule_parse_native(buf, len, "back.ppv", &back, err, sizeof err) != 0)
        fail_msg("ppv wrote native text it refuses: %s\n%s", err, buf);
    assert_same_schedule(s, back, "native");
    ppv_schedule_free(back);
    free(buf);
    buf = NULL;
    f = open_memstream(&buf, &len);
    int csv = ppv_schedule_write_csv(s, f, err, sizeof err);
    fclose(f);
    if (csv == 0) {
        if (ppv_schedule_parse_csv(buf, len, "back.csv", PPV_DIALECT_CURRENT, &back, err,
                                   sizeof err) != 0)
            fail_msg("ppv wrote CSV it refuses: %s\n%s", err, buf);
        assert_same_schedule(s, back, "csv");
        ppv_schedule_free(back);
    }
    free(buf);
}

/* Parses text as CSV and as native; whatever parses must also check and
 * round-trip. Returns whether the CSV parsed. */
static int parse_and_check(const char *text, size_t len) {
    ppv_schedule *s = NULL;
    char err[1024];
    int rc = ppv_schedule_parse_csv(text, len, "m.csv", PPV_DIALECT_AUTO, &s, err, sizeof err);
    assert_true(rc == 0 || rc == -1);
    if (rc == -1) assert_non_null(strstr(err, "m.csv:"));
    if (s) assert_round_trips(s);
    check_parsed(s);
    int nrc = ppv_schedule_parse_native(text, len, "m.ppv", &s, err, sizeof err);
    assert_true(nrc == 0 || nrc == -1);
    if (s) assert_round_trips(s);
    check_parsed(s);
    return rc == 0;
}

/* The files ppv wrote and then refused (issue 16) now read back. */
static void test_files_ppv_writes_it_reads_again(void **state) {
    (void)state;
    /* a one-action overlapped cell is refused in native as in CSV */
    expect_native_error("ppv-schedule 1\nranks 1\nrank 0\n(0F0)OVERLAP_F_B\n0B0\n",
                        "n.ppv:4:1: rank 0 cell '(0F0)OVERLAP_F_B': OVERLAP_F_B needs at least "
                        "two actions");
    /* idle ranks, the largest index, both formats */
    static const char *const texts[] = {",\n", "0F0,0B0\n,\n", "0F0,0B0\n,\n1F0,1B0\n",
                                        "0F100000000,0B100000000\n",
                                        "(0F0;1B0)OVERLAP_F_B,1F0,0B0\n"};
    for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++) {
        char err[512];
        ppv_schedule *s = parse_csv(texts[k], PPV_DIALECT_AUTO, err, sizeof err);
        if (!s) fail_msg("%s: %s", texts[k], err);
        assert_round_trips(s);
        ppv_schedule_free(s);
    }
    /* a NUL is refused by every reader, not only by the file loader */
    static const char nul_csv[] = "0F0,0B\0000\n";
    static const char nul_native[] = "ppv-schedule 1\nranks 1\ngroup a\0b 0\nrank 0\n";
    ppv_schedule *s = NULL;
    char err[256];
    assert_int_equal(ppv_schedule_parse_csv(nul_csv, sizeof nul_csv - 1, "n.csv", PPV_DIALECT_AUTO,
                                            &s, err, sizeof err),
                     -1);
    assert_string_equal(err, "n.csv: binary data (a NUL byte) in a schedule file");
    assert_int_equal(ppv_schedule_parse_native(nul_native, sizeof nul_native - 1, "n.ppv", &s, err,
                                               sizeof err),
                     -1);
    assert_string_equal(err, "n.ppv: binary data (a NUL byte) in a schedule file");
}

/* Every test file and every PyTorch-written schedule round-trips. */
static void test_every_schedule_file_round_trips(void **state) {
    (void)state;
    static const char *const data[] = {"bad_token.csv",         "count_errors.csv",
                                       "dependency_cycle.csv",  "every_semantics.csv",
                                       "exchange_grouped.ppv",  "exchange_small.ppv",
                                       "exchange_ungrouped.ppv", "legacy_dialect.csv",
                                       "mesh_broken.ppv",       "mesh_collectives.ppv",
                                       "mismatched_order.csv",  "rendezvous_only.csv",
                                       "rendezvous_only_train.csv", "two_ranks_one_stage.csv"};
    int n = 0;
    for (size_t k = 0; k < sizeof data / sizeof data[0]; k++) {
        ppv_schedule *s = NULL;
        char err[1024];
        if (ppv_schedule_load(data_path(data[k]), PPV_DIALECT_AUTO, &s, err, sizeof err) != 0)
            continue; /* bad_token.csv and two_ranks_one_stage.csv are refused, as they must be */
        assert_round_trips(s);
        ppv_schedule_free(s);
        n++;
    }
    assert_int_equal(n, 12);
    static const char *const interop[] = {"dualpipev_4rank_10mb.csv",
                                          "zb1p_2rank_2stagep_compute.csv",
                                          "zb1p_2rank_2stagep_comms.csv"};
    for (size_t k = 0; k < 3; k++) {
        ppv_schedule *s = load_ok(interop_path(interop[k]));
        assert_round_trips(s);
        ppv_schedule_free(s);
    }
}

static void test_truncated_and_corrupted_files_never_crash(void **state) {
    (void)state;
    static const char *files[] = {"zb1p_2rank_2stagep_comms.csv", "dualpipev_4rank_10mb.csv"};
    static const char junk[] = {'\0', ',', '(', ')', ';', '9', 'F', 'B', '\n', ' ', '"', 'X'};
    int parsed = 0, runs = 0;
    for (int f = 0; f < 2; f++) {
        char *text = slurp(interop_path(files[f]));
        size_t len = strlen(text);
        for (size_t cut = 0; cut <= len; cut += 7, runs++) parsed += parse_and_check(text, cut);
        for (size_t at = 0; at < len; at += 5)
            for (size_t j = 0; j < sizeof junk; j += 3, runs++) {
                char saved = text[at];
                text[at] = junk[(at + j) % sizeof junk];
                parsed += parse_and_check(text, len);
                text[at] = saved;
            }
        free(text);
    }
    /* most truncations still parse (a shorter row); most corruptions do not */
    assert_true(parsed > 0 && parsed < runs);
    const char *nat = slurp(data_path("mesh_collectives.ppv"));
    size_t nlen = strlen(nat);
    char *m = strdup(nat);
    for (size_t at = 0; at < nlen; at++)
        for (size_t j = 0; j < sizeof junk; j += 2) {
            m[at] = junk[(at + j) % sizeof junk];
            parse_and_check(m, nlen);
            m[at] = nat[at];
        }
    free(m);
    free((char *)nat);
}

/* The one reader of numbers and lists that every option uses. */
static void test_whole_numbers_and_lists_are_read_strictly(void **state) {
    (void)state;
    int64_t v = 7;
    assert_int_equal(ppv_parse_whole("9223372036854775807", 0, INT64_MAX, &v), 0);
    assert_true(v == INT64_MAX);
    assert_int_equal(ppv_parse_whole("-9223372036854775808", INT64_MIN, 0, &v), 0);
    assert_true(v == INT64_MIN);
    assert_int_equal(ppv_parse_whole("64", 1, 64, &v), 0);
    assert_int_equal(v, 64);
    assert_int_equal(ppv_parse_whole("1", 1, 64, &v), 0);
    assert_int_equal(v, 1);
    v = 7;
    static const char *const bad[] = {"65", "0", "9223372036854775808", "-1", " 2", "+2", "2 ",
                                      "",   "-", "2,",                 "0x1", "1e3", "--1"};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++)
        if (ppv_parse_whole(bad[k], 1, 64, &v) != -1) fail_msg("'%s' was read", bad[k]);
    assert_int_equal(ppv_parse_whole("-1", 0, 64, &v), -1); /* no sign where lo >= 0 */
    assert_int_equal(ppv_parse_whole("-9223372036854775809", INT64_MIN, 0, &v), -1);
    assert_int_equal(v, 7); /* untouched on refusal */
    char item[8];
    const char *p = "1,22,333";
    assert_int_equal(ppv_list_next(&p, item, sizeof item), 1);
    assert_string_equal(item, "1");
    assert_int_equal(ppv_list_next(&p, item, sizeof item), 1);
    assert_string_equal(item, "22");
    assert_int_equal(ppv_list_next(&p, item, sizeof item), 1);
    assert_string_equal(item, "333");
    assert_int_equal(ppv_list_next(&p, item, sizeof item), 0);
    static const char *const lists[] = {"", ",", "1,", ",1", "1,,2", "12345678"};
    for (size_t k = 0; k < sizeof lists / sizeof lists[0]; k++) {
        p = lists[k];
        int rc;
        while ((rc = ppv_list_next(&p, item, sizeof item)) > 0) {
        }
        if (rc != -1) fail_msg("list '%s' was read whole", lists[k]);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_whole_numbers_and_lists_are_read_strictly),
        cmocka_unit_test(test_interop_dualpipev_loads_with_v_placement),
        cmocka_unit_test(test_interop_zb1p_compute_and_comms_load_with_loop_placement),
        cmocka_unit_test(test_csv_writer_reproduces_every_interop_file_byte_for_byte),
        cmocka_unit_test(test_action_tokens_round_trip),
        cmocka_unit_test(test_legacy_dialect_is_detected_and_mapped),
        cmocka_unit_test(test_dialect_flag_overrides_detection),
        cmocka_unit_test(test_csv_parse_errors_name_file_line_column_and_cell),
        cmocka_unit_test(test_stage_on_two_ranks_is_rejected),
        cmocka_unit_test(test_crlf_quotes_and_trailing_blank_lines_are_accepted),
        cmocka_unit_test(test_native_format_round_trips_and_keeps_extensions),
        cmocka_unit_test(test_native_parse_errors_name_line_column_and_cell),
        cmocka_unit_test(test_collective_names_group_65536_not_group_0),
        cmocka_unit_test(test_thirty_thousand_groups_each_find_their_own_index),
        cmocka_unit_test(test_overlap_ids_wrap_without_merging_cells),
        cmocka_unit_test(test_where_an_action_was_read),
        cmocka_unit_test(test_a_file_read_without_its_places),
        cmocka_unit_test(test_big_blocks_either_side_of_256_kib),
        cmocka_unit_test(test_runs_go_to_helpers_and_a_forked_child_makes_its_own),
        cmocka_unit_test(test_programs_share_a_block_sized_by_their_cells),
        cmocka_unit_test(test_a_large_file_is_read_whole_from_a_file_and_a_pipe),
        cmocka_unit_test(test_a_large_file_read_in_runs_names_its_first_bad_row),
        cmocka_unit_test(test_stage_99999999_is_judged_without_an_array_of_stages),
        cmocka_unit_test(test_binary_and_missing_files_are_errors),
        cmocka_unit_test(test_truncated_and_corrupted_files_never_crash),
        cmocka_unit_test(test_files_ppv_writes_it_reads_again),
        cmocka_unit_test(test_every_schedule_file_round_trips),
    };
    return cmocka_run_group_tests(tests, NULL, tmp_cleanup);
}
