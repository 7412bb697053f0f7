/* test_cli.c - the ppv command as a user runs it: exit codes 0/1/2,
 * messages, --json fields, generated files and show's pictures. */
#define _GNU_SOURCE /* mknod, makedev, O_TMPFILE */
#include <dirent.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <math.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"

/* run_ppv(args): run_in with the test's own standard input. */
static run_result run_ppv(const char *const *args) {
    return run_in(NULL, args);
}

/* Makes directory name in the test's directory; its path goes in buf. */
static void make_dir(char *buf, size_t len, const char *name) {
    snprintf(buf, len, "%s/%s", tmp_dir(), name);
    assert_int_equal(mkdir(buf, 0700), 0);
}

static void test_check_exit_codes_are_0_1_2(void **state) {
    (void)state;
    run_result r = RUN("check", interop_path("zb1p_2rank_2stagep_comms.csv"));
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "result: OK"));
    run_free(&r);
    r = RUN("check", data_path("rendezvous_only.csv"));
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "cycle: rank 0 (0SEND_F1) -> rank 1 (1SEND_F0) -> rank 0\n"));
    run_free(&r);
    r = RUN("check", data_path("rendezvous_only.csv"), "--semantics", "eager");
    assert_int_equal(r.code, 0);
    run_free(&r);
    r = RUN("check", data_path("bad_token.csv"));
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "bad_token.csv:1:5: rank 0 step 1 cell '0X1': unknown action "
                                  "type 'X'"));
    run_free(&r);
    r = RUN("check", "/nonexistent.csv");
    assert_int_equal(r.code, 2);
    assert_string_equal(r.err,
                        "ppv check: /nonexistent.csv: cannot open: No such file or directory\n");
    run_free(&r);
    r = RUN("check", data_path("rendezvous_only.csv"), "--semantics", "sometimes");
    assert_int_equal(r.code, 2);
    run_free(&r);
    r = RUN("check", data_path("rendezvous_only.csv"), "--costs", "1,1,1");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--costs needs F,B,W[,C] with F > 0 and B > W"));
    run_free(&r);
    r = RUN("frobnicate");
    assert_int_equal(r.code, 2);
    run_free(&r);
}

/* ppv check keeps no places while it checks (a big schedule's check stays
 * small): a file that fails is read again, so its messages still say
 * where, from a file or from standard input (read once, places kept). */
static void test_check_messages_give_places_from_a_file_and_stdin(void **state) {
    (void)state;
    char want[9000];
    snprintf(want, sizeof want,
             "error: rank 1 index 3 1F1: duplicate forward of stage 1 microbatch 1 "
             "(%s:2:13)\nerror: rank 1 index 4 1W1: W without a prior I for stage 1 microbatch 1 "
             "(%s:2:17)\n",
             data_path("count_errors.csv"), data_path("count_errors.csv"));
    run_result r = RUN("check", data_path("count_errors.csv"));
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, want));
    run_free(&r);
    r = RUN_STDIN(data_path("count_errors.csv"), "check", "-", "--json");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "duplicate forward of stage 1 microbatch 1 (<stdin>:2:13)"));
    run_free(&r);
    /* a file that cannot be read as a schedule: its message keeps its place */
    char bad[4200];
    snprintf(bad, sizeof bad, "%s/twice.csv", tmp_dir());
    FILE *f = fopen(bad, "w");
    assert_non_null(f);
    fputs("0F0,0B0\n0F1,0B1\n", f);
    assert_int_equal(fclose(f), 0);
    r = RUN("check", bad);
    assert_int_equal(r.code, 2);
    assert_non_null(
        strstr(r.err, "twice.csv:2:1: rank 1 cell '0F1': stage 0 is already on rank 0"));
    run_free(&r);
}

static void test_check_json_has_the_documented_fields(void **state) {
    (void)state;
    run_result r = RUN("check", data_path("rendezvous_only.csv"), "--json");
    assert_int_equal(r.code, 1);
    json_object *o = json_tokener_parse(r.out);
    assert_non_null(o);
    json_object *v;
    assert_true(json_object_object_get_ex(o, "ok", &v));
    assert_false(json_object_get_boolean(v));
    assert_true(json_object_object_get_ex(o, "ranks", &v));
    assert_int_equal(json_object_get_int(v), 2);
    assert_true(json_object_object_get_ex(o, "stages", &v));
    assert_int_equal(json_object_get_int(v), 4);
    assert_true(json_object_object_get_ex(o, "microbatches", &v));
    assert_int_equal(json_object_get_int(v), 2);
    assert_true(json_object_object_get_ex(o, "semantics", &v));
    assert_string_equal(json_object_get_string(v), "rendezvous");
    assert_true(json_object_object_get_ex(o, "deadlock", &v));
    assert_true(json_object_get_boolean(v));
    assert_true(json_object_object_get_ex(o, "cycle", &v));
    assert_int_equal(json_object_array_length(v), 2);
    json_object *c0 = json_object_array_get_idx(v, 0), *f;
    assert_true(json_object_object_get_ex(c0, "rank", &f));
    assert_int_equal(json_object_get_int(f), 0);
    assert_true(json_object_object_get_ex(c0, "action", &f));
    assert_string_equal(json_object_get_string(f), "0SEND_F1");
    assert_true(json_object_object_get_ex(c0, "waits_for", &f));
    assert_int_equal(json_object_get_int(f), 1);
    assert_true(json_object_object_get_ex(o, "errors", &v));
    assert_int_equal(json_object_array_length(v), 0);
    assert_true(json_object_object_get_ex(o, "peak_activation", &v));
    assert_int_equal(json_object_array_length(v), 2);
    assert_true(json_object_object_get_ex(o, "makespan", &v));
    assert_null(v); /* a deadlocked run has no makespan */
    assert_true(json_object_object_get_ex(o, "bubble_ratio", &v));
    json_object_put(o);
    run_free(&r);

    r = RUN("check", data_path("mismatched_order.csv"), "--json");
    assert_int_equal(r.code, 1);
    o = json_tokener_parse(r.out);
    assert_true(json_object_object_get_ex(o, "errors", &v));
    assert_int_equal(json_object_array_length(v), 2);
    json_object *e = json_object_array_get_idx(v, 1);
    assert_true(json_object_object_get_ex(e, "rank", &f));
    assert_int_equal(json_object_get_int(f), 1);
    assert_true(json_object_object_get_ex(e, "index", &f));
    assert_int_equal(json_object_get_int(f), 1);
    assert_true(json_object_object_get_ex(e, "action", &f));
    assert_string_equal(json_object_get_string(f), "1RECV_F0");
    assert_true(json_object_object_get_ex(e, "message", &f));
    assert_non_null(strstr(json_object_get_string(f), "rank 0's 0SEND_F1 (index 3)"));
    json_object_put(o);
    run_free(&r);

    const char *csv = tmp_path("1f1b.csv");
    r = RUN("gen", "1f1b", "-p", "4", "-m", "8", "-o", csv);
    assert_int_equal(r.code, 0);
    run_free(&r);
    r = RUN("check", csv, "--json", "--costs", "1,2,1,0");
    assert_int_equal(r.code, 0);
    o = json_tokener_parse(r.out);
    assert_true(json_object_object_get_ex(o, "makespan", &v));
    assert_true(json_object_get_double(v) == 33.0);
    assert_true(json_object_object_get_ex(o, "bubble_ratio", &v));
    assert_true(fabs(json_object_get_double(v) - 3.0 / 11.0) < 1e-12);
    assert_true(json_object_object_get_ex(o, "peak_activation", &v));
    assert_true(json_object_get_double(json_object_array_get_idx(v, 0)) == 4.0);
    json_object_put(o);
    run_free(&r);
}

static void test_gen_writes_pytorch_csv_and_rejects_bad_parameters(void **state) {
    (void)state;
    run_result r = RUN("gen", "dualpipev", "-p", "4", "-m", "10");
    assert_int_equal(r.code, 0);
    char *want = slurp(interop_path("dualpipev_4rank_10mb.csv"));
    assert_string_equal(r.out, want);
    free(want);
    run_free(&r);
    r = RUN("gen", "1f1b", "-p", "4", "-m", "2");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "1f1b needs at least as many microbatches as stages (m=2 < 4)"));
    run_free(&r);
    r = RUN("gen", "1f1b", "-p", "four", "-m", "2");
    assert_int_equal(r.code, 2);
    run_free(&r);
}

static int count_entries(const char *dir, const char *prefix) {
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0) n++;
    closedir(d);
    return n;
}

static void test_gen_comms_output_is_complete_and_checks_clean(void **state) {
    (void)state;
    char dir[4096], path[4200];
    make_dir(dir, sizeof dir, "gen_comms");
    snprintf(path, sizeof path, "%s/zbv.csv", dir);
    run_result r = RUN("gen", "zbv", "-p", "4", "-m", "8", "--comms", "-o", path);
    assert_int_equal(r.code, 0);
    run_free(&r);
    assert_int_equal(count_entries(dir, "zbv.csv"), 1); /* no temporary left beside it */
    static const char *sems[] = {"rendezvous", "eager", "eager:4M"};
    for (int k = 0; k < 3; k++) {
        r = RUN("check", path, "--semantics", sems[k]);
        assert_int_equal(r.code, 0);
        assert_non_null(strstr(r.out, "compute_comms"));
        run_free(&r);
    }
    /* check writes the lowering it verified, which checks clean as written */
    char lowered[4200];
    snprintf(lowered, sizeof lowered, "%s/lowered.csv", dir);
    r = RUN("check", interop_path("zb1p_2rank_2stagep_compute.csv"), "--lowered-out", lowered);
    assert_int_equal(r.code, 0);
    run_free(&r);
    r = RUN("check", lowered, "--semantics", "rendezvous");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "compute_comms"));
    run_free(&r);
    /* an unwritable target leaves nothing behind and exits 2 */
    char bad[4200];
    snprintf(bad, sizeof bad, "%s/missing/dir/x.csv", dir);
    r = RUN("gen", "zbv", "-p", "4", "-m", "8", "-o", bad);
    assert_int_equal(r.code, 2);
    run_free(&r);
}

/* Files PyTorch's runtime runs with the right gradients (issue 36): ppv's
 * lowering carries a REDUCE_GRAD for every stage, --target pytorch passes
 * it; a compute_comms file without them (PyTorch's own older artifact)
 * passes ppv's check with a warning a stage, and fails --target pytorch,
 * naming each stage at its last backward; a pytorch-* kind with --comms is
 * PyTorch's own lowering of its class, byte for byte. */
static void test_check_target_pytorch_names_stages_pytorch_would_never_scale(void **state) {
    (void)state;
    char dir[4096], path[4200], lowered[4200];
    make_dir(dir, sizeof dir, "target_pytorch");
    snprintf(path, sizeof path, "%s/1f1b.csv", dir);
    run_result r = RUN("gen", "1f1b", "-p", "2", "-m", "2", "--comms", "-o", path);
    assert_int_equal(r.code, 0);
    run_free(&r);
    char *text = slurp(path);
    assert_string_equal(text, "0UNSHARD,0F0,0SEND_F0,0F1,0SEND_F1,0RECV_B0,0B0,0RECV_B1,0B1,"
                              "0REDUCE_GRAD,0RESHARD\n"
                              "1UNSHARD,1RECV_F0,1F0,1RECV_F1,1B0,1SEND_B0,1F1,1B1,1SEND_B1,"
                              "1REDUCE_GRAD,1RESHARD\n");
    free(text);
    r = RUN("check", path, "--target", "pytorch");
    assert_int_equal(r.code, 0);
    assert_string_equal(r.err, "");
    run_free(&r);
    /* --lowered-out carries them too */
    snprintf(lowered, sizeof lowered, "%s/lowered.csv", dir);
    r = RUN("check", interop_path("zb1p_2rank_2stagep_compute.csv"), "--lowered-out", lowered);
    assert_int_equal(r.code, 0);
    run_free(&r);
    r = RUN("check", lowered, "--target", "pytorch");
    assert_int_equal(r.code, 0);
    run_free(&r);
    /* PyTorch's older artifact has none */
    const char *old = interop_path("zb1p_2rank_2stagep_comms.csv");
    r = RUN("check", old);
    assert_int_equal(r.code, 0);
    char want[6000];
    snprintf(want, sizeof want,
             "ppv check: warning: rank 0 index 79 0B7: stage 0 has no REDUCE_GRAD after its last "
             "backward: PyTorch's runtime never scales (or reduces) its gradients, which come out "
             "8 times too large (lower with ppv gen --comms or ppv check --lowered-out) "
             "(%s:1:557) (--target pytorch fails on this)\n",
             old);
    assert_int_equal(strncmp(r.err, want, strlen(want)), 0);
    int lines = 0;
    for (const char *c = r.err; *c; c++) lines += *c == '\n';
    assert_int_equal(lines, 4); /* one a stage */
    run_free(&r);
    r = RUN("check", old, "--target", "pytorch");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "pytorch: rank 1 index 91 3W7: stage 3 has no REDUCE_GRAD"));
    assert_non_null(strstr(r.out, "result: PROBLEM"));
    run_free(&r);
    r = RUN("check", old, "--target", "pytorch", "--json");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "\"ok\":false"));
    assert_non_null(strstr(r.out, "\"target\":\"pytorch\",\"target_problems\":[{\"rank\":0,"
                                  "\"index\":79,\"action\":\"0B7\""));
    run_free(&r);
    /* ppv's extensions are no actions of PyTorch's runtime */
    snprintf(path, sizeof path, "%s/native.ppv", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("ppv-schedule 1\nranks 1\nrank 0\n0F0\n0R0\n0B0\n", f);
    fclose(f);
    r = RUN("check", path);
    assert_int_equal(r.code, 0);
    run_free(&r);
    r = RUN("check", path, "--target", "pytorch");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "pytorch: rank 0 index 1 0R0: R is ppv's extension: "
                                  "PyTorch's runtime has no such action"));
    run_free(&r);
    r = RUN("check", path, "--target", "torch");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--target is ppv or pytorch, not 'torch'"));
    run_free(&r);
    /* a PyTorch class lowered as PyTorch lowers it */
    snprintf(path, sizeof path, "%s/bfs.csv", dir);
    r = RUN("gen", "pytorch-looped-bfs", "-p", "3", "-m", "4", "-v", "2", "--comms", "-o", path);
    assert_int_equal(r.code, 0);
    run_free(&r);
    char *got = slurp(path);
    char *pt = slurp(interop_path("classes/ScheduleLoopedBFS/p3_m4_v2_comms.csv"));
    char *w = pt;
    for (const char *c = pt; *c; c++)
        if (*c != '\r') *w++ = *c;
    *w = 0;
    assert_string_equal(got, pt);
    free(got);
    free(pt);
}

/* What PyTorch's own runtime did with ppv's files on a lent machine (torch
 * 2.11, tools/pytorch_runtime_check.py, docs/schedules.md):
 * _load_csv(format="compute_only") refused the compute-only order PyTorch's
 * single-stage classes dump, for its REDUCE_GRAD, and --target pytorch says
 * so at the cell; V-placed files ran bitwise right once gloo's send to its
 * own rank was taken out of the first step's greeting, so --target pytorch
 * passes them with a note naming the rank, and says nothing of a looped
 * placement. */
static void test_check_target_pytorch_as_measured_on_its_runtime(void **state) {
    (void)state;
    char dir[4096], path[4200];
    make_dir(dir, sizeof dir, "target_pytorch_measured");
    snprintf(path, sizeof path, "%s/gpipe.csv", dir);
    run_result r = RUN("gen", "pytorch-gpipe", "-p", "2", "-m", "2", "-o", path);
    assert_int_equal(r.code, 0);
    run_free(&r);
    char *text = slurp(path);
    assert_string_equal(text, "0F0,0F1,0B0,0B1,0REDUCE_GRAD\n1F0,1F1,1B0,1B1,1REDUCE_GRAD\n");
    free(text);
    r = RUN("check", path);
    assert_int_equal(r.code, 0);
    assert_string_equal(r.err, "");
    run_free(&r);
    r = RUN("check", path, "--target", "pytorch");
    assert_int_equal(r.code, 1);
    char want[6000];
    snprintf(want, sizeof want,
             "pytorch: rank 0 index 4 0REDUCE_GRAD: PyTorch's runtime refuses a compute-only "
             "file with REDUCE_GRAD (its _load_csv(format=\"compute_only\") takes F, I, B, W "
             "and overlapped cells only, and adds its own): drop it, or lower the file with ppv "
             "gen --comms or ppv check --lowered-out (%s:1:17)\n",
             path);
    assert_non_null(strstr(r.out, want));
    assert_null(strstr(r.out, "rank 1 index 4")); /* the first of its kind names it */
    assert_null(strstr(r.out, "pytorch: note"));
    run_free(&r);
    /* a user's own compute-only file, written by hand: an UNSHARD in it is
     * named at its cell as well */
    snprintf(path, sizeof path, "%s/mine.csv", dir);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs("0UNSHARD,0F0,0B0\n", f);
    fclose(f);
    r = RUN("check", path, "--target", "pytorch");
    assert_int_equal(r.code, 1);
    snprintf(want, sizeof want,
             "pytorch: rank 0 index 0 0UNSHARD: PyTorch's runtime refuses a compute-only file "
             "with UNSHARD (its _load_csv(format=\"compute_only\") takes F, I, B, W and "
             "overlapped cells only, and adds its own): drop it, or lower the file with ppv gen "
             "--comms or ppv check --lowered-out (%s:1:1)\n",
             path);
    assert_non_null(strstr(r.out, want));
    run_free(&r);
    /* lowered, PyTorch runs it */
    snprintf(path, sizeof path, "%s/gpipe.csv", dir);
    r = RUN("gen", "pytorch-gpipe", "-p", "2", "-m", "2", "--comms", "-o", path);
    assert_int_equal(r.code, 0);
    run_free(&r);
    r = RUN("check", path, "--target", "pytorch");
    assert_int_equal(r.code, 0);
    assert_null(strstr(r.out, "pytorch: "));
    run_free(&r);
    /* a V placement: runs, with the note on gloo */
    snprintf(path, sizeof path, "%s/zbv.csv", dir);
    r = RUN("gen", "zbv", "-p", "2", "-m", "4", "-o", path);
    assert_int_equal(r.code, 0);
    run_free(&r);
    r = RUN("check", path, "--target", "pytorch");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "pytorch: note: stages 1 and 2 are both on rank 1: PyTorch's "
                                  "runtime runs this file, but on its first step each "
                                  "PipelineStage greets the next stage's rank, and gloo cannot "
                                  "send to its own rank (NCCL can)"));
    assert_non_null(strstr(r.out, "result: OK"));
    run_free(&r);
    r = RUN("check", path, "--target", "pytorch", "--json");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "\"target_problems\":[],\"target_note\":\"stages 1 and 2 "
                                  "are both on rank 1: "));
    run_free(&r);
    r = RUN("check", path);
    assert_int_equal(r.code, 0);
    assert_null(strstr(r.out, "pytorch: note")); /* only under --target pytorch */
    run_free(&r);
}

static void test_show_writes_svg_and_chrome_trace(void **state) {
    (void)state;
    char dir[4096], svg[4200], trace[4200];
    make_dir(dir, sizeof dir, "show");
    snprintf(svg, sizeof svg, "%s/t.svg", dir);
    snprintf(trace, sizeof trace, "%s/t.json", dir);
    run_result r = RUN("show", interop_path("zb1p_2rank_2stagep_compute.csv"), "--svg", svg,
                       "--chrome-trace", trace);
    assert_int_equal(r.code, 0);
    run_free(&r);
    char *text = slurp(svg);
    assert_int_equal(strncmp(text, "<svg xmlns=\"http://www.w3.org/2000/svg\"", 39), 0);
    assert_non_null(strstr(text, "bubble"));
    assert_non_null(strstr(text, "rank 0 2I0"));
    free(text);
    json_object *o = json_object_from_file(trace), *ev;
    assert_non_null(o);
    assert_true(json_object_object_get_ex(o, "traceEvents", &ev));
    /* 2 thread names + the lowered program: 49 + 48 computes and their
     * messages; then each rank's memory counter, from 0 at t=0 */
    ppv_schedule *s = load_ok(interop_path("zb1p_2rank_2stagep_compute.csv"));
    ppv_check_report *rep = check_with(s, "rendezvous");
    size_t spans = 0, counters = 0;
    for (size_t i = 0; i < json_object_array_length(ev); i++) {
        json_object *ph;
        assert_true(json_object_object_get_ex(json_object_array_get_idx(ev, i), "ph", &ph));
        if (strcmp(json_object_get_string(ph), "C") == 0) counters++;
        else spans++;
    }
    assert_int_equal(spans, 2 + ppv_schedule_size(rep->checked));
    assert_true(counters > 2);
    json_object *e = json_object_array_get_idx(ev, 1), *f;
    assert_true(json_object_object_get_ex(e, "ph", &f));
    assert_string_equal(json_object_get_string(f), "X");
    assert_true(json_object_object_get_ex(e, "name", &f));
    assert_string_equal(json_object_get_string(f), "0F0");
    json_object_put(o);
    ppv_check_report_free(rep);
    ppv_schedule_free(s);
    r = RUN("show", data_path("legacy_dialect.csv"));
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "rank   1 | .1. 1F0 1B0 1F1 1B1\n"));
    run_free(&r);
}

/* The value of key in object o, which must be there. */
static json_object *field(json_object *o, const char *key) {
    json_object *v = NULL;
    if (!json_object_object_get_ex(o, key, &v)) fprintf(stderr, "no field '%s'\n", key);
    assert_true(json_object_object_get_ex(o, key, &v));
    return v;
}

static void test_run_json_fields_exit_codes_and_replay(void **state) {
    (void)state;
    char dir[4096], sched[4200], trace[4200];
    make_dir(dir, sizeof dir, "run");
    snprintf(sched, sizeof sched, "%s/zbv.csv", dir);
    snprintf(trace, sizeof trace, "%s/run.trace", dir);
    run_result r = RUN("gen", "zbv", "-p", "4", "-m", "8", "-o", sched);
    assert_int_equal(r.code, 0);
    run_free(&r);

    r = RUN("run", sched, "--policy", "random", "--seed", "9", "--trace-out", trace, "--json");
    assert_int_equal(r.code, 0);
    json_object *o = json_tokener_parse(r.out);
    assert_non_null(o);
    assert_true(json_object_get_boolean(field(o, "ok")));
    assert_false(json_object_get_boolean(field(o, "deadlock")));
    assert_true(json_object_get_boolean(field(o, "matches_reference")));
    assert_string_equal(json_object_get_string(field(o, "semantics")), "rendezvous");
    char g[32];
    snprintf(g, sizeof g, "%s", json_object_get_string(field(o, "grad_digest")));
    assert_int_equal(strlen(g), 16);
    assert_string_equal(g, json_object_get_string(field(o, "reference_grad_digest")));
    assert_true(isfinite(json_object_get_double(field(o, "loss"))));
    json_object *peak = field(o, "peak_activation_bytes"), *pred = field(o, "predicted_peak_activation_bytes");
    assert_int_equal(json_object_array_length(peak), 4);
    for (int k = 0; k < 4; k++) {
        int64_t a = json_object_get_int64(json_object_array_get_idx(peak, k));
        assert_true(a > 0);
        assert_int_equal(a, json_object_get_int64(json_object_array_get_idx(pred, k)));
    }
    char digest[32];
    snprintf(digest, sizeof digest, "%s", json_object_get_string(field(o, "trace_digest")));
    int64_t steps = json_object_get_int64(field(o, "steps"));
    json_object_put(o);
    run_free(&r);

    /* the trace replays the same interleaving; another seed gives another */
    r = RUN("run", sched, "--replay", trace, "--json");
    assert_int_equal(r.code, 0);
    o = json_tokener_parse(r.out);
    assert_string_equal(json_object_get_string(field(o, "trace_digest")), digest);
    assert_int_equal(json_object_get_int64(field(o, "steps")), steps);
    json_object_put(o);
    run_free(&r);
    r = RUN("run", sched, "--policy", "random", "--seed", "10", "--json");
    assert_int_equal(r.code, 0);
    o = json_tokener_parse(r.out);
    assert_string_not_equal(json_object_get_string(field(o, "trace_digest")), digest);
    assert_string_equal(json_object_get_string(field(o, "grad_digest")), g);
    json_object_put(o);
    run_free(&r);

    /* a wrong gradient on purpose: the comparison with the reference fails */
    r = RUN("run", sched, "--perturb");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "DIFFERENT"));
    assert_non_null(strstr(r.out, "result: PROBLEM"));
    run_free(&r);

    /* rendezvous deadlock: exit 1 with the wait-for report; eager completes */
    r = RUN("run", data_path("rendezvous_only_train.csv"), "--json");
    assert_int_equal(r.code, 1);
    o = json_tokener_parse(r.out);
    assert_true(json_object_get_boolean(field(o, "deadlock")));
    assert_false(json_object_get_boolean(field(o, "ok")));
    assert_null(field(o, "grad_digest"));
    json_object *cyc = field(o, "cycle");
    assert_int_equal(json_object_array_length(cyc), 2);
    json_object *c1 = json_object_array_get_idx(cyc, 1);
    assert_int_equal(json_object_get_int(field(c1, "rank")), 1);
    assert_string_equal(json_object_get_string(field(c1, "action")), "1SEND_F0");
    assert_int_equal(json_object_get_int(field(c1, "waits_for")), 0);
    json_object_put(o);
    run_free(&r);
    r = RUN("run", data_path("rendezvous_only_train.csv"));
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "cycle: rank 0 (0SEND_F1) -> rank 1 (1SEND_F0) -> rank 0\n"));
    run_free(&r);
    r = RUN("run", data_path("rendezvous_only_train.csv"), "--semantics", "eager");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "bitwise equal"));
    run_free(&r);

    /* bad input: exit 2 with the reason */
    r = RUN("run", data_path("rendezvous_only.csv"), "--semantics", "eager");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "stage 0 microbatch 0 has no backward (B or I)"));
    run_free(&r);
    r = RUN("run", sched, "--recompute", "8");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "ppv run: --recompute '8': the schedule's stages are 0..7\n"));
    run_free(&r);
    r = RUN("run", sched, "--replay", data_path("rendezvous_only.csv"));
    assert_int_equal(r.code, 2);
    run_free(&r);
    /* 52 bytes announcing 400 million decisions: refused by what
     * --max-memory leaves, before anything is allocated */
    char big[4096];
    snprintf(big, sizeof big, "%s",
             data_path("fuzz/trace/regress/decisions_400M_in_52_bytes.trace"));
    r = RUN("run", sched, "--replay", big, "--max-memory", "256M");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "decisions_400M_in_52_bytes.trace:3: 400000000 decisions "
                                  "(1600000000 bytes in memory) are more than the memory limit "
                                  "allows ("));
    assert_string_equal(r.out, "");
    run_free(&r);
    r = RUN("run", sched, "--width", "7");
    assert_int_equal(r.code, 2);
    run_free(&r);
}

static void test_verify_recompute_reports_equal_and_perturbed(void **state) {
    (void)state;
    const char *sched = tmp_path("verify_recompute.csv");
    run_result r = RUN("gen", "1f1b", "-p", "4", "-m", "8", "-o", sched);
    assert_int_equal(r.code, 0);
    run_free(&r);
    r = RUN("verify-recompute", sched, "--json");
    assert_int_equal(r.code, 0);
    json_object *o = json_tokener_parse(r.out);
    assert_true(json_object_get_boolean(field(o, "bitwise_equal")));
    assert_int_equal(json_object_get_int64(field(o, "max_ulp")), 0);
    assert_int_equal(json_object_get_int64(field(o, "first_index")), -1);
    assert_string_equal(json_object_get_string(field(o, "stash_grad_digest")),
                        json_object_get_string(field(o, "recompute_grad_digest")));
    json_object *sp = field(o, "stash_peak_activation_bytes"),
                *rp = field(o, "recompute_peak_activation_bytes");
    assert_true(json_object_get_int64(json_object_array_get_idx(rp, 0)) <
                json_object_get_int64(json_object_array_get_idx(sp, 0)));
    json_object_put(o);
    run_free(&r);

    r = RUN("verify-recompute", sched, "--perturb", "--json");
    assert_int_equal(r.code, 1);
    o = json_tokener_parse(r.out);
    assert_false(json_object_get_boolean(field(o, "bitwise_equal")));
    assert_int_equal(json_object_get_int64(field(o, "max_ulp")), 1);
    assert_int_equal(json_object_get_int64(field(o, "first_index")), 0);
    assert_int_equal(json_object_get_int(field(o, "first_layer")), 0);
    assert_string_equal(json_object_get_string(field(o, "first_tensor")), "ada_w");
    assert_int_equal(json_object_get_int64(field(o, "first_tensor_index")), 0);
    double a = json_object_get_double(field(o, "first_recompute"));
    double b = json_object_get_double(field(o, "first_stash"));
    assert_true(json_object_get_double(field(o, "max_abs")) == fabs(a - b));
    assert_true(nextafterf((float)b, (float)a) == (float)a);
    json_object_put(o);
    run_free(&r);
    r = RUN("verify-recompute", sched, "--perturb");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "recompute vs stash: DIFFERENT"));
    assert_non_null(strstr(r.out, "max ulp 1,"));
    assert_non_null(strstr(r.out, "gradient 0 = layer 0 ada_w[0]"));
    run_free(&r);
    r = RUN("verify-recompute", data_path("rendezvous_only_train.csv"));
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "the stash run did not complete (deadlock)"));
    run_free(&r);
}

/* 1 if path exists. */
static int exists(const char *path) { return access(path, F_OK) == 0; }

static void test_record_killed_at_any_point_leaves_nothing_or_a_whole_file(void **state) {
    (void)state;
    char dir[4096], sched[4200], out[4200];
    make_dir(dir, sizeof dir, "record");
    snprintf(sched, sizeof sched, "%s/s.csv", dir);
    snprintf(out, sizeof out, "%s/g.h5", dir);
    run_result r = RUN("gen", "zbv", "-p", "2", "-m", "4", "-o", sched);
    assert_int_equal(r.code, 0);
    run_free(&r);
    /* stopped after 1, 20, 60 and 120 of its 159 datasets: no target (under
     * valgrind the first and the last) */
    static const char *points[] = {"1", "20", "60", "120"};
    for (int k = 0; k < 4; k += (int)sweep(1, 1, 3)) {
        r = RUN("record", out, sched, "--fail-after", points[k]);
        assert_int_equal(r.code, 3);
        run_free(&r);
        assert_false(exists(out));
    }
    r = RUN("record", out, sched, "--layers", "6", "--width", "16");
    assert_int_equal(r.code, 0);
    run_free(&r);
    r = RUN("replay", out, "--json");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "\"same\":true"));
    run_free(&r);
    /* a crash while replacing it leaves the old, complete file */
    r = RUN("record", out, sched, "--fail-after", "30");
    assert_int_equal(r.code, 3);
    run_free(&r);
    r = RUN("replay", out);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "result: OK"));
    run_free(&r);
    /* a run that deadlocks records nothing */
    char out2[4200];
    snprintf(out2, sizeof out2, "%s/dead.h5", dir);
    r = RUN("record", out2, data_path("rendezvous_only_train.csv"));
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.err, "nothing written"));
    run_free(&r);
    assert_false(exists(out2));
    /* diff: same file 0, perturbed replay 1, missing file 2 */
    r = RUN("diff", out, out);
    assert_int_equal(r.code, 0);
    run_free(&r);
    r = RUN("replay", out, "--perturb");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "1 of 1536 fp32 values differ"));
    assert_non_null(strstr(r.out, "[0,0]:"));
    run_free(&r);
    r = RUN("diff", out, "/nonexistent.h5");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "/nonexistent.h5: cannot open"));
    run_free(&r);
    r = RUN("diff", out, out, "--tolerance", "sloppy");
    assert_int_equal(r.code, 2);
    run_free(&r);
    r = RUN("diff", out, out, "--threads", "0");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--threads needs a whole number from 1 to 8, not '0'"));
    run_free(&r);
    r = RUN("diff", out, out, "--threads", "3", "--json");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "\"same\":true"));
    run_free(&r);
}

/* Two recordings that differ only in the scheduler's seed: the interleaving
 * differs, the data is the same bits, and policy_seed is the one
 * difference, which --ignore-attr leaves out. */
static void test_diff_leaves_out_the_seed_attribute_and_excluded_paths(void **state) {
    (void)state;
    char dir[4096], sched[4200], g1[4200], g2[4200];
    make_dir(dir, sizeof dir, "seed");
    snprintf(sched, sizeof sched, "%s/s.csv", dir);
    snprintf(g1, sizeof g1, "%s/seed1.h5", dir);
    snprintf(g2, sizeof g2, "%s/seed2.h5", dir);
    run_result r = RUN("gen", "zbv", "-p", "2", "-m", "4", "-o", sched);
    assert_int_equal(r.code, 0);
    run_free(&r);
    static const char *seeds[] = {"1", "2"};
    for (int k = 0; k < 2; k++) {
        r = RUN("record", k ? g2 : g1, sched, "--policy", "random", "--seed", seeds[k], "--width",
                "16");
        assert_int_equal(r.code, 0);
        run_free(&r);
    }
    r = RUN("diff", g1, g2);
    assert_int_equal(r.code, 1);
    assert_string_equal(strstr(r.out, "/: "), "/: attribute policy_seed: 1 vs 2\n"
                                              "162 objects, 145 datasets, 40328 values compared "
                                              "(bitwise, NaN equals NaN): DIFFERENT\n");
    run_free(&r);
    r = RUN("diff", g1, g2, "--ignore-attr", "policy_seed");
    assert_int_equal(r.code, 0);
    assert_string_equal(r.out, "left out: attribute policy_seed\n"
                               "162 objects, 145 datasets, 40328 values compared "
                               "(bitwise, NaN equals NaN): same\n");
    run_free(&r);
    r = RUN("diff", g1, g2, "--ignore-attr", "*seed", "--json");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "\"same\":true"));
    assert_non_null(strstr(r.out, "\"ignore_attrs\":[\"*seed\"],\"excludes\":[]"));
    run_free(&r);
    /* the model's seed attribute is another name, equal on both sides */
    r = RUN("diff", g1, g2, "--ignore-attr", "seed");
    assert_int_equal(r.code, 1);
    run_free(&r);
    /* the difference is on the root, which only --exclude / leaves out */
    r = RUN("diff", g1, g2, "--exclude", "/training", "--exclude", "/model/");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "1 objects, 0 datasets, 0 values compared"));
    run_free(&r);
    r = RUN("diff", g1, g2, "--exclude", "/training/grads/layer_000?", "--ignore-attr", "seed",
            "--ignore-attr", "policy_seed");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "94 objects, 81 datasets, 20808 values compared"));
    run_free(&r);
    /* bad uses: a relative path, a 65th pattern, replay */
    r = RUN("diff", g1, g2, "--exclude", "training");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--exclude needs an absolute HDF5 path such as /training/grads, "
                                  "not 'training'"));
    run_free(&r);
    const char *many[2 * 65 + 4] = {"diff", g1, g2};
    for (int k = 0; k < 65; k++)
        many[3 + 2 * k] = "--ignore-attr", many[4 + 2 * k] = "x";
    many[3 + 2 * 65] = NULL;
    r = run_ppv(many);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "--ignore-attr is given at most 64 times"));
    run_free(&r);
    /* replay honours --exclude (a perturbed gradient left out is not a difference) and
     * refuses the options it would ignore */
    r = RUN("replay", g1, "--perturb");
    assert_int_equal(r.code, 1);
    run_free(&r);
    r = RUN("replay", g1, "--perturb", "--exclude", "/training/grads");
    assert_int_equal(r.code, 0);
    run_free(&r);
    r = RUN("replay", g1, "--ignore-attr", "policy_seed");
    assert_int_equal(r.code, 2);
    run_free(&r);
    r = RUN("replay", g1, "--threads", "2");
    assert_int_equal(r.code, 2);
    run_free(&r);
    r = RUN("replay", g1, "--all-attributes");
    assert_int_equal(r.code, 2);
    run_free(&r);
}

/* Starts ppv with args (NULL-terminated) and the environment plus env's
 * "NAME=value" entries (NULL-terminated, replacing the same names), with
 * its output discarded and SIGINT, SIGTERM and SIGHUP at their default
 * action; returns its PID. */
static pid_t spawn_start(const char *const *env, const char *const *args) {
    const char *argv[40], *envp[512];
    int n = 0, e = 0;
    argv[n++] = PPV_BIN;
    for (; args[n - 1]; n++) {
        assert_true(n < 39);
        argv[n] = args[n - 1];
    }
    argv[n] = NULL;
    for (char **p = environ; *p; p++) {
        int replaced = 0;
        for (int k = 0; env && env[k]; k++) {
            size_t len = strcspn(env[k], "=") + 1;
            replaced |= strncmp(*p, env[k], len) == 0;
        }
        if (!replaced) {
            assert_true(e < 500);
            envp[e++] = *p;
        }
    }
    for (int k = 0; env && env[k]; k++)
        envp[e++] = env[k];
    envp[e] = NULL;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    posix_spawnattr_t at;
    posix_spawnattr_init(&at);
    sigset_t dfl;
    sigemptyset(&dfl);
    sigaddset(&dfl, SIGINT);
    sigaddset(&dfl, SIGTERM);
    sigaddset(&dfl, SIGHUP);
    posix_spawnattr_setsigdefault(&at, &dfl);
    posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGDEF);
    pid_t pid;
    assert_int_equal(posix_spawn(&pid, PPV_BIN, &fa, &at, (char *const *)argv, (char *const *)envp),
                     0);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&at);
    return pid;
}

/* spawn_start, waited for: the wait status. */
static int spawn_status(const char *const *env, const char *const *args) {
    pid_t pid = spawn_start(env, args);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    return st;
}

/* Outputs at a temporary name, as where the file system has no anonymous
 * files (the fallback, for the cases that test it). */
static const char *const NAMED[] = {"PPV_OUTPUT_NAMED=1", NULL};

/* 1 if dir's file system makes anonymous files (O_TMPFILE). */
static int anonymous_files_work(const char *dir) {
#ifdef O_TMPFILE
    int fd = open(dir, O_TMPFILE | O_RDWR, 0600);
    if (fd >= 0) close(fd);
    return fd >= 0;
#else
    (void)dir;
    return 0;
#endif
}

/* The names in dir but . and .., sorted (strcmp) and joined by spaces;
 * malloc'd. */
static char *listing(const char *dir) {
    struct dirent **names;
    int n = scandir(dir, &names, NULL, alphasort);
    assert_true(n >= 0);
    size_t cap = 1, len = 0;
    for (int k = 0; k < n; k++)
        cap += strlen(names[k]->d_name) + 1;
    char *out = calloc(cap, 1);
    for (int k = 0; k < n; k++) {
        const char *nm = names[k]->d_name;
        if (strcmp(nm, ".") != 0 && strcmp(nm, "..") != 0)
            len += (size_t)sprintf(out + len, "%s%s", len ? " " : "", nm);
        free(names[k]);
    }
    free(names);
    return out;
}

/* A directory in the test's folder holding a small schedule, s.csv; its
 * path goes in dir, the schedule's in sched. */
static void record_dir(const char *name, char *dir, size_t dlen, char *sched, size_t slen) {
    make_dir(dir, dlen, name);
    snprintf(sched, slen, "%s/s.csv", dir);
    run_result r = RUN("gen", "1f1b", "-p", "2", "-m", "2", "-o", sched);
    assert_int_equal(r.code, 0);
    run_free(&r);
}

/* SIGTERM while record writes (--term-after raises it after N datasets):
 * the process dies of the signal, leaving nothing (an anonymous file; at a
 * temporary name, the handler removes it), and the target is not made, or
 * stays as it was. */
static void sigterm_case(const char *name, const char *const *env) {
    char dir[4096], sched[4200], out[4200];
    record_dir(name, dir, sizeof dir, sched, sizeof sched);
    snprintf(out, sizeof out, "%s/g.h5", dir);
    int st = spawn_status(env, (const char *const[]){"record", out, sched, "--layers", "2",
                                                     "--width", "16", "--term-after", "5", NULL});
    assert_true(WIFSIGNALED(st));
    assert_int_equal(WTERMSIG(st), SIGTERM);
    char *ls = listing(dir);
    assert_string_equal(ls, "s.csv");
    free(ls);
    run_result r = RUN("record", out, sched, "--layers", "2", "--width", "16");
    assert_int_equal(r.code, 0);
    run_free(&r);
    st = spawn_status(env, (const char *const[]){"record", out, sched, "--layers", "2", "--width",
                                                 "16", "--term-after", "20", NULL});
    assert_true(WIFSIGNALED(st));
    assert_int_equal(WTERMSIG(st), SIGTERM);
    ls = listing(dir);
    assert_string_equal(ls, "g.h5 s.csv");
    free(ls);
    r = RUN("replay", out);
    assert_int_equal(r.code, 0);
    run_free(&r);
}

static void test_record_killed_by_sigterm_removes_its_temporary_file(void **state) {
    (void)state;
    sigterm_case("sigterm", NULL);
    sigterm_case("sigterm-named", NAMED);
}

/* SIGKILL (no handler runs) at ten moments of `pp --record` and
 * `record --fail-after` (which dies with _exit, mid-write): with anonymous
 * files nothing is left, ever; at a temporary name (the fallback) the
 * temporary is left, to be removed by the next writer into the folder
 * (test_record_removes_temporary_files_whose_writer_is_gone). */
static void test_killed_writers_leave_nothing_behind(void **state) {
    (void)state;
    char dir[4096], sched[4200], out[4200];
    record_dir("sigkill", dir, sizeof dir, sched, sizeof sched);
    if (!anonymous_files_work(dir)) skip(); /* the fallback's debris is the case below */
    snprintf(out, sizeof out, "%s/r.h5", dir);
    int kills = (int)sweep(10, 3, 3);
    for (int k = 0; k < kills; k++) {
        pid_t pid = spawn_start(NULL, (const char *const[]){"pp", "--chunks", "1000000",
                                                            "--record", out, NULL});
        nanosleep(&(struct timespec){0, 20000000L * (k + 1)}, NULL);
        assert_int_equal(kill(pid, SIGKILL), 0);
        int st;
        assert_int_equal(waitpid(pid, &st, 0), pid);
        assert_true(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
        char *ls = listing(dir);
        assert_string_equal(ls, "s.csv");
        free(ls);
    }
    snprintf(out, sizeof out, "%s/g.h5", dir);
    for (int k = 0; k < 2; k++) {
        int st = spawn_status(k ? NAMED : NULL, (const char *const[]){"record", out, sched,
                                                                      "--fail-after", "3", NULL});
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 3);
        char *ls = listing(dir); /* named: ".g.h5.ppv-tmp.ID.PID.XXXXXX s.csv" */
        if (k == 0) assert_string_equal(ls, "s.csv");
        else assert_memory_equal(ls, ".g.h5.ppv-tmp.", 14);
        free(ls);
    }
}

/* A PID that no process has: a child that has exited and been waited for. */
static pid_t dead_pid(void) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) _exit(0);
    assert_int_equal(waitpid(pid, NULL, 0), pid);
    return pid;
}

/* Creates the file (or, link, a symbolic link to s.csv) name in dir. */
static void make_entry(const char *dir, const char *name, int link) {
    char path[8400];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (link) {
        assert_int_equal(symlink("s.csv", path), 0);
        return;
    }
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fclose(f);
}

/* At a temporary name (the fallback where the file system has no anonymous
 * files), crashed records (--fail-after) leave `.g.h5.ppv-tmp.ID.PID.XXXXXX`;
 * the next record into the folder removes those, and any other file of that
 * exact pattern whose writer (this host and PID namespace, ID) has no
 * process. A live writer's file, another writer's, a symbolic link and
 * names off the pattern stay. */
static void test_record_removes_temporary_files_whose_writer_is_gone(void **state) {
    (void)state;
    char dir[4096], sched[4200], out[4200];
    record_dir("stale", dir, sizeof dir, sched, sizeof sched);
    snprintf(out, sizeof out, "%s/g.h5", dir);
    /* each crash leaves its temporary; the second record removes the first's */
    char first[256] = "";
    for (int k = 0; k < 2; k++) {
        int st = spawn_status(NAMED, (const char *const[]){"record", out, sched, "--fail-after",
                                                           "3", NULL});
        assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 3);
        char *ls = listing(dir); /* ".g.h5.ppv-tmp.ID.PID.XXXXXX s.csv" */
        size_t name = strcspn(ls, " "), pid = strcspn(ls + 23, ".");
        assert_memory_equal(ls, ".g.h5.ppv-tmp.", 14);
        assert_int_equal(ls[22], '.');
        assert_int_equal(name, 23 + pid + 7);
        assert_string_equal(ls + name, " s.csv");
        assert_true(strncmp(ls, first, name) != 0); /* not the first crash's */
        snprintf(first, sizeof first, "%.*s", (int)name, ls);
        free(ls);
    }
    char id[9], other[9];
    snprintf(id, sizeof id, "%.8s", first + 14);
    snprintf(other, sizeof other, "%c%.7s", id[0] == '0' ? '1' : '0', id + 1);
    int dead = (int)dead_pid(), live = (int)getpid();
    enum { NCASES = 7, REMOVED = 1, LINK = 5 }; /* only .dead goes; .link is a symbolic link */
    char names[NCASES][128];
    snprintf(names[0], 128, ".live.h5.ppv-tmp.%s.%d.abcDE1", id, live);
    snprintf(names[1], 128, ".dead.h5.ppv-tmp.%s.%d.abcDE1", id, dead);
    snprintf(names[2], 128, ".other.h5.ppv-tmp.%s.%d.abcDE1", other, dead);
    snprintf(names[3], 128, "nodot.h5.ppv-tmp.%s.%d.abcDE1", id, dead);
    snprintf(names[4], 128, ".short.h5.ppv-tmp.%s.%d.abcDE", id, dead);
    snprintf(names[5], 128, ".link.h5.ppv-tmp.%s.%d.abcDE1", id, dead);
    snprintf(names[6], 128, ".old.h5.tmp.abcDE1");
    for (int k = 0; k < NCASES; k++)
        make_entry(dir, names[k], k == LINK);
    int st = spawn_status(NAMED, (const char *const[]){"record", out, sched, "--layers", "2",
                                                       "--width", "16", NULL});
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    char *ls = listing(dir);
    assert_null(strstr(ls, ".g.h5.ppv-tmp."));
    for (int k = 0; k < NCASES; k++) {
        char path[8400];
        snprintf(path, sizeof path, "%s/%s", dir, names[k]);
        struct stat st;
        if ((lstat(path, &st) == 0) != (k != REMOVED))
            fail_msg("%s: %s", names[k], k == REMOVED ? "left" : "removed");
    }
    free(ls);
}

/* HDF5 keeps modification times to the second; without them, and with
 * SOURCE_DATE_EPOCH fixing `created`, a run recorded twice in different
 * seconds is the same file, byte for byte. */
static void test_record_twice_with_source_date_epoch_gives_the_same_bytes(void **state) {
    (void)state;
    char dir[4096], sched[4200], a[4200], b[4200];
    record_dir("repro", dir, sizeof dir, sched, sizeof sched);
    snprintf(a, sizeof a, "%s/a.h5", dir);
    snprintf(b, sizeof b, "%s/b.h5", dir);
    const char *const env[] = {"SOURCE_DATE_EPOCH=1700000000", NULL};
    int st = spawn_status(
        env, (const char *const[]){"record", a, sched, "--layers", "2", "--width", "16", NULL});
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    time_t t0 = time(NULL);
    while (time(NULL) == t0)
        nanosleep(&(struct timespec){0, 20000000}, NULL);
    st = spawn_status(
        env, (const char *const[]){"record", b, sched, "--layers", "2", "--width", "16", NULL});
    assert_true(WIFEXITED(st) && WEXITSTATUS(st) == 0);
    struct stat sa, sb;
    assert_int_equal(stat(a, &sa), 0);
    assert_int_equal(stat(b, &sb), 0);
    assert_int_equal(sa.st_size, sb.st_size);
    char *da = slurp(a), *db = slurp(b);
    assert_memory_equal(da, db, (size_t)sa.st_size);
    free(da);
    free(db);
}

static void test_demo_passes(void **state) {
    (void)state;
    /* under valgrind (half a minute) the demo's parts are checked where
     * they are tested: test_run, test_golden, test_pp and test_commands */
    if (RUNNING_ON_VALGRIND) skip();
    run_result r = RUN("demo");
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "demo: all schedules deadlock-free"));
    assert_non_null(strstr(r.out, "dualpipev"));
    assert_non_null(strstr(r.out, "demo: every schedule's gradients equal the reference bit for bit"));
    assert_null(strstr(r.out, "DIFFERENT"));
    assert_non_null(strstr(r.out, "demo: every golden file replays bit for bit"));
    assert_non_null(strstr(r.out, "demo: the same bits on every mesh; every fault caught where it "
                                  "must be"));
    assert_null(strstr(r.out, "WRONG"));
    assert_non_null(strstr(r.out, "infer_pp1_mesh4_recompute_cut.h5     9 calls, mesh 1 (recorded 4)"));
    run_free(&r);
}

/* The lists refuse empty items, exit 2 with the option's name (every
 * option's numbers: test_commands, from the declarations). */
static void test_every_list_refuses_an_empty_item(void **state) {
    (void)state;
    const char *csv = gen_file("nums.csv", "1f1b", "2", "2");
    /* lists: no empty item */
    static const char *const lists[][3] = {{"fuzz", "--faults", ""},     {"fuzz", "--faults", ","},
                                           {"fuzz", "--faults", "drop,"}, {"pp", "--hard-cut-at", "1,,2"},
                                           {"run", "--recompute", "0,"},  {"check", "--mem-cap", "1G,"},
                                           {"pp", "--generator-params", "layers=1,,d_ff=8"},
                                           {"pp", "--generator-params", "layers=1,layers=2"},
                                           {"pp", "--cost", "decode=1,decode=2"},
                                           {"check", "--model", "layers=4,,hidden=64"}};
    for (size_t k = 0; k < sizeof lists / sizeof lists[0]; k++) {
        const char *argv[8];
        int n = 0;
        argv[n++] = lists[k][0];
        if (!strcmp(lists[k][0], "fuzz")) argv[n++] = "pp";
        if (!strcmp(lists[k][0], "run") || !strcmp(lists[k][0], "check")) argv[n++] = csv;
        if (!strcmp(lists[k][0], "check")) argv[n++] = "--model", argv[n++] = "layers=4,hidden=64,heads=4,seq=8,mbs=1";
        argv[n++] = lists[k][1];
        argv[n++] = lists[k][2];
        argv[n] = NULL;
        run_result r = run_in(NULL, argv);
        if (r.code != 2 || !strstr(r.err, lists[k][1]))
            fail_msg("ppv %s %s '%s': exit %d, stderr %s", lists[k][0], lists[k][1], lists[k][2],
                     r.code, r.err);
        run_free(&r);
    }
}

/* A write that fails names the write and the OS's reason, never "nothing
 * to write": here a file size limit (SIGXFSZ ignored, so the write returns
 * EFBIG), and no output is left. */
static void test_a_failed_svg_write_says_why(void **state) {
    (void)state;
    const char *csv = gen_file("big.csv", "1f1b", "4", "16");
    char *svg = tmp_path("limited.svg"), script[9000];
    snprintf(script, sizeof script, "trap '' XFSZ; ulimit -f 1; exec '%s' show '%s' --svg '%s'",
             PPV_BIN, csv, svg);
    const char *argv[] = {"/bin/bash", "-c", script, NULL};
    run_result r = run_program(NULL, NULL, 0, argv);
    assert_int_equal(r.code, 2);
    char want[4400];
    snprintf(want, sizeof want, "ppv show: cannot write %s: File too large\n", svg);
    assert_string_equal(r.err, want);
    assert_int_equal(access(svg, F_OK), -1);
    run_free(&r);
}

/* Reads fifo into out in a child shell (a reader for a write to block on);
 * returns its pid. */
static pid_t read_fifo(const char *fifo, const char *out) {
    char script[9000];
    snprintf(script, sizeof script, "exec cat '%s' > '%s'", fifo, out);
    const char *argv[] = {"/bin/sh", "-c", script, NULL};
    pid_t pid;
    assert_int_equal(posix_spawn(&pid, "/bin/sh", NULL, NULL, (char *const *)argv, environ), 0);
    return pid;
}

/* Waits at most 30 s for the reader, which ends when the writer closes the
 * FIFO; a writer that never opened it (it replaced the FIFO instead) leaves
 * the reader waiting, which is killed and fails the test, never hangs it. */
static void wait_reader(pid_t pid, const char *fifo) {
    struct stat st;
    int still_fifo = lstat(fifo, &st) == 0 && S_ISFIFO(st.st_mode), status;
    for (int k = 0; k < 3000 && still_fifo; k++) {
        if (waitpid(pid, &status, WNOHANG) == pid) {
            assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
            return;
        }
        usleep(10000);
    }
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    fail_msg("%s: %s", fifo,
             still_fifo ? "its reader got no end of file in 30 s"
                        : "no longer a FIFO: the output replaced it");
}

/* Outputs never replace what is not a regular file: a FIFO and a character
 * device are written straight through, a symbolic link's target is written
 * (the link kept), a directory is refused; HDF5 outputs too. Devices are
 * made in the test's own folder (as root), never the system's. */
static void test_outputs_never_replace_what_is_not_a_regular_file(void **state) {
    (void)state;
    run_result want = RUN("gen", "1f1b", "-p", "2", "-m", "2");
    assert_int_equal(want.code, 0);
    char fifo[4200], got[4200], link[4200], target[4200];
    snprintf(fifo, sizeof fifo, "%s", tmp_path("out.fifo"));
    snprintf(got, sizeof got, "%s", tmp_path("fifo.got"));
    assert_int_equal(mkfifo(fifo, 0600), 0);
    pid_t reader = read_fifo(fifo, got);
    run_result r = RUN("gen", "1f1b", "-p", "2", "-m", "2", "-o", fifo);
    assert_int_equal(r.code, 0);
    run_free(&r);
    wait_reader(reader, fifo);
    char *text = slurp(got);
    assert_string_equal(text, want.out);
    free(text);
    struct stat st;
    assert_int_equal(lstat(fifo, &st), 0);
    assert_true(S_ISFIFO(st.st_mode));
    /* a link: its target written in the target's folder, the link kept */
    snprintf(target, sizeof target, "%s", tmp_path("target.csv"));
    snprintf(link, sizeof link, "%s", tmp_path("link.csv"));
    assert_int_equal(symlink("target.csv", link), 0);
    r = RUN("gen", "1f1b", "-p", "2", "-m", "2", "-o", link);
    assert_int_equal(r.code, 0);
    run_free(&r);
    assert_int_equal(lstat(link, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    text = slurp(target);
    assert_string_equal(text, want.out);
    free(text);
    /* a link into a folder that is not there, and a directory */
    const char *dangling = tmp_path("dangling.csv");
    assert_int_equal(symlink("no_such_folder/x.csv", dangling), 0);
    r = RUN("gen", "1f1b", "-p", "2", "-m", "2", "-o", dangling);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "No such file or directory"));
    run_free(&r);
    r = RUN("gen", "1f1b", "-p", "2", "-m", "2", "-o", tmp_dir());
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "a directory, not a file to write"));
    run_free(&r);
    /* a recording into a FIFO: the whole file comes out, and conforms */
    reader = read_fifo(fifo, got);
    r = RUN("pp", "--chunks", "2", "--record", fifo);
    assert_int_equal(r.code, 0);
    run_free(&r);
    wait_reader(reader, fifo);
    r = RUN("conform", got);
    assert_int_equal(r.code, 0);
    run_free(&r);
    r = RUN("pp", "--chunks", "2", "--record", "-");
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "would mix the recording with the report"));
    run_free(&r);
    run_free(&want);
    if (geteuid() != 0) skip(); /* the devices below need mknod */
    char null_dev[4200], full_dev[4200];
    snprintf(null_dev, sizeof null_dev, "%s", tmp_path("my_null"));
    snprintf(full_dev, sizeof full_dev, "%s", tmp_path("my_full"));
    assert_int_equal(mknod(null_dev, S_IFCHR | 0666, makedev(1, 3)), 0);
    assert_int_equal(mknod(full_dev, S_IFCHR | 0666, makedev(1, 7)), 0);
    r = RUN("gen", "1f1b", "-p", "2", "-m", "2", "-o", null_dev);
    assert_int_equal(r.code, 0);
    run_free(&r);
    r = RUN("gen", "1f1b", "-p", "2", "-m", "2", "-o", full_dev);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "No space left on device"));
    run_free(&r);
    r = RUN("pp", "--chunks", "2", "--record", full_dev);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "No space left on device"));
    run_free(&r);
    r = RUN("pp", "--chunks", "2", "--record", null_dev);
    assert_int_equal(r.code, 0);
    run_free(&r);
    for (int k = 0; k < 2; k++) {
        assert_int_equal(lstat(k ? full_dev : null_dev, &st), 0);
        assert_true(S_ISCHR(st.st_mode));
    }
    unlink(null_dev);
    unlink(full_dev);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_check_exit_codes_are_0_1_2),
        cmocka_unit_test(test_check_messages_give_places_from_a_file_and_stdin),
        cmocka_unit_test(test_check_json_has_the_documented_fields),
        cmocka_unit_test(test_gen_writes_pytorch_csv_and_rejects_bad_parameters),
        cmocka_unit_test(test_gen_comms_output_is_complete_and_checks_clean),
        cmocka_unit_test(test_check_target_pytorch_names_stages_pytorch_would_never_scale),
        cmocka_unit_test(test_check_target_pytorch_as_measured_on_its_runtime),
        cmocka_unit_test(test_show_writes_svg_and_chrome_trace),
        cmocka_unit_test(test_run_json_fields_exit_codes_and_replay),
        cmocka_unit_test(test_verify_recompute_reports_equal_and_perturbed),
        cmocka_unit_test(test_record_killed_at_any_point_leaves_nothing_or_a_whole_file),
        cmocka_unit_test(test_diff_leaves_out_the_seed_attribute_and_excluded_paths),
        cmocka_unit_test(test_record_killed_by_sigterm_removes_its_temporary_file),
        cmocka_unit_test(test_killed_writers_leave_nothing_behind),
        cmocka_unit_test(test_record_removes_temporary_files_whose_writer_is_gone),
        cmocka_unit_test(test_record_twice_with_source_date_epoch_gives_the_same_bytes),
        cmocka_unit_test(test_demo_passes),
        cmocka_unit_test(test_every_list_refuses_an_empty_item),
        cmocka_unit_test(test_a_failed_svg_write_says_why),
        cmocka_unit_test(test_outputs_never_replace_what_is_not_a_regular_file),
    };
    return cmocka_run_group_tests(tests, NULL, tmp_cleanup);
}
