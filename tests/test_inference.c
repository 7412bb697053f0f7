/* test_inference.c - inference recordings (/inference in
 * spec/golden-format.md): every field and tensor of every call reads back
 * as written, a failed recording leaves nothing, a broken file names the
 * call and what is wrong, and equal runs give equal bytes; a `ppv pp`
 * recording rewritten by the Python recorder (python/ppv/record.py) replays, and replay names the
 * one call whose result was changed. */
#include <hdf5.h>
#include <json-c/json.h>
#include <spawn.h>
#include <sys/wait.h>
#include <time.h>

#include "contractutil.h"
#include "ppv_golden.h"
#include "testutil.h"

extern char **environ;

/* The calls of one small run: chunk 0, chunk 1 recomputing, a NOOP, and
 * chunk 2 whose mesh failed. */
typedef struct run {
    bufs b[3];
    ppv_envelope e[4];
    ppv_result r[4];
    int has[4];
    uint16_t out[2][sizeof((bufs *)0)->lat / 2];
} run;

/* whether the last file opened had a setup (these files have none) */
static int has_setup;

static void make_run(run *x) {
    memset(x, 0, sizeof *x);
    make_infer(&x->e[0], &x->b[0], 0, 0, 0, 0, 4);
    make_infer(&x->e[1], &x->b[1], 1, 1, 0, 1, 3);
    ppv_envelope_init(&x->e[2]);
    x->e[2].action = PPV_PP_NOOP;
    x->e[2].call_id = 2;
    x->e[2].chunk_index = 1;
    make_infer(&x->e[3], &x->b[2], 3, 2, 0, 0, 2);
    x->e[3].noise_scale = -0.125;
    for (int k = 0; k < 2; k++) {
        ppv_result_init(&x->r[k], &x->e[k]);
        x->r[k].observed_generator_calls = x->e[k].expected_generator_calls;
        x->r[k].mesh_current_start_frame = 3 * (k + 1);
        x->r[k].output_digest_i64 = -77 - k;
        x->r[k].tB_ms = 2.5 + k;
        for (size_t i = 0; i < sizeof x->out[k] / 2; i++)
            x->out[k][i] = (uint16_t)(i * 13 + k);
        set_tensor(&x->r[k].latents_out, PPV_DTYPE_BF16, x->out[k], 5, (int64_t[]){1, 3, 16, 8, 8});
        x->has[k] = 1;
    }
    ppv_result_init(&x->r[3], &x->e[3]);
    x->r[3].ok = 0;
    snprintf(x->r[3].error_message, sizeof x->r[3].error_message,
             "FM-02: mesh rank 1 ran 3 generator calls, the plan says 2");
    x->has[3] = 1;
}

static void record(const char *path, const run *x) {
    char err[512] = "";
    ppv_inference_writer *w = ppv_inference_create(path, NULL, err, sizeof err);
    if (!w) fail_msg("%s", err);
    for (int k = 0; k < 4; k++)
        assert_int_equal(
            ppv_inference_append(w, &x->e[k], x->has[k] ? &x->r[k] : NULL, err, sizeof err), 0);
    assert_int_equal(ppv_inference_commit(w, err, sizeof err), 0);
}

/* Compares two tensors' shape and bytes, then forgets their data so the
 * structs can be compared whole. */
static void same_tensor(ppv_tensor *a, ppv_tensor *b) {
    assert_int_equal(a->dtype, b->dtype);
    assert_int_equal(a->rank, b->rank);
    assert_memory_equal(a->dims, b->dims, sizeof a->dims);
    assert_int_equal(ppv_tensor_bytes(a), ppv_tensor_bytes(b));
    if (a->data) assert_memory_equal(a->data, b->data, ppv_tensor_bytes(a));
    a->data = b->data = NULL;
}

static void test_every_call_reads_back_as_written(void **state) {
    (void)state;
    run x;
    make_run(&x);
    char *path = tmp_path("run.h5");
    record(path, &x);
    char err[512];
    int64_t n = 0;
    ppv_inference_reader *r = ppv_inference_open(path, &n, NULL, &has_setup, err, sizeof err);
    assert_int_equal(has_setup, 0);
    assert_non_null(r);
    assert_int_equal(n, 4);
    ppv_contract_order order = ppv_contract_order_start();
    for (int k = 0; k < 4; k++) {
        ppv_envelope e, want = x.e[k];
        ppv_result res, wres = x.r[k];
        int has = -1;
        assert_int_equal(ppv_inference_read(r, k, &e, &res, &has, err, sizeof err), 0);
        assert_int_equal(has, x.has[k]);
        /* the recorded stream keeps the contract, as it did when recorded */
        assert_int_equal(ppv_envelope_check(&e, &order, err, sizeof err), PPV_FAIL_NONE);
        ppv_contract_order_advance(&order, &e);
        ppv_envelope held = e;
        same_tensor(&e.conditioning_embeds, &want.conditioning_embeds);
        same_tensor(&e.latents_in, &want.latents_in);
        same_tensor(&e.current_denoising_step_list, &want.current_denoising_step_list);
        same_tensor(&e.context_frames, &want.context_frames);
        assert_memory_equal(&e, &want, sizeof e);
        ppv_envelope_free_tensors(&held);
        if (has) {
            ppv_result rheld = res;
            same_tensor(&res.latents_out, &wres.latents_out);
            assert_memory_equal(&res, &wres, sizeof res);
            ppv_result_free_tensors(&rheld);
        }
    }
    assert_int_equal(ppv_inference_read(r, 4, &x.e[0], &x.r[0], x.has, err, sizeof err), -1);
    char want[4300];
    snprintf(want, sizeof want, "%s: /inference/calls/call_000004 missing (the file says 4 calls)",
             path);
    assert_string_equal(err, want);
    ppv_inference_close(r);
}

static void test_an_abandoned_recording_leaves_nothing(void **state) {
    (void)state;
    run x;
    make_run(&x);
    char dir[4200];
    snprintf(dir, sizeof dir, "%s/abandoned", tmp_dir());
    assert_int_equal(mkdir(dir, 0700), 0);
    char path[4300], err[512];
    snprintf(path, sizeof path, "%s/run.h5", dir);
    ppv_inference_writer *w = ppv_inference_create(path, NULL, err, sizeof err);
    assert_non_null(w);
    assert_int_equal(ppv_inference_append(w, &x.e[0], &x.r[0], err, sizeof err), 0);
    ppv_inference_abort(w);
    DIR *d = opendir(dir);
    int entries = 0;
    for (struct dirent *e; (e = readdir(d));)
        entries += e->d_name[0] != '.' || strlen(e->d_name) > 2;
    closedir(d);
    assert_int_equal(entries, 0);
    /* and a recording of the wrong kind is refused when read */
    int64_t n;
    assert_null(ppv_inference_open(path, &n, NULL, &has_setup, err, sizeof err));
    char want[4400];
    snprintf(want, sizeof want, "%s: cannot open: No such file or directory", path);
    assert_string_equal(err, want);
    assert_null(ppv_inference_open(PPV_GOLDEN_DIR "/train_1f1b_p4_m8.h5", &n, NULL, &has_setup, err,
                                   sizeof err));
    assert_string_equal(err, PPV_GOLDEN_DIR "/train_1f1b_p4_m8.h5: not a ppv inference recording "
                                            "(kind training)");
}

static void test_a_broken_call_is_named_with_what_is_wrong(void **state) {
    (void)state;
    run x;
    make_run(&x);
    char *path = tmp_path("broken.h5");
    record(path, &x);
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(f >= 0);
    assert_true(H5Adelete_by_name(f, "/inference/calls/call_000001/envelope", "chunk_index",
                                  H5P_DEFAULT) >= 0);
    assert_true(H5Ldelete(f, "/inference/calls/call_000003/envelope/latents_in", H5P_DEFAULT) >= 0);
    hsize_t dims[5] = {1, 3, 16, 8, 8};
    hid_t sp = H5Screate_simple(5, dims, NULL);
    hid_t d = H5Dcreate2(f, "/inference/calls/call_000003/envelope/latents_in", H5T_IEEE_F32LE, sp,
                         H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(d >= 0);
    H5Dclose(d);
    H5Sclose(sp);
    H5Fclose(f);
    char err[512], want[4400];
    int64_t n;
    ppv_inference_reader *r = ppv_inference_open(path, &n, NULL, &has_setup, err, sizeof err);
    assert_non_null(r);
    ppv_envelope e;
    ppv_result res;
    int has;
    assert_int_equal(ppv_inference_read(r, 0, &e, &res, &has, err, sizeof err), 0);
    ppv_envelope_free_tensors(&e);
    ppv_result_free_tensors(&res);
    assert_int_equal(ppv_inference_read(r, 1, &e, &res, &has, err, sizeof err), -1);
    snprintf(want, sizeof want,
             "%s: /inference/calls/call_000001/envelope: attribute chunk_index "
             "missing or not an integer",
             path);
    assert_string_equal(err, want);
    assert_int_equal(ppv_inference_read(r, 3, &e, &res, &has, err, sizeof err), -1);
    snprintf(want, sizeof want,
             "%s: /inference/calls/call_000003/envelope/latents_in: not a bf16 "
             "dataset",
             path);
    assert_string_equal(err, want);
    ppv_inference_close(r);
}

static void test_equal_runs_give_equal_bytes_and_diff_finds_one_changed_value(void **state) {
    (void)state;
    run x;
    make_run(&x);
    char a[4200], b[4200];
    snprintf(a, sizeof a, "%s", tmp_path("a.h5"));
    snprintf(b, sizeof b, "%s", tmp_path("b.h5"));
    setenv("SOURCE_DATE_EPOCH", "1700000000", 1);
    record(a, &x);
    /* a second later: object modification times, if HDF5 kept them, would differ */
    time_t t0 = time(NULL);
    while (time(NULL) == t0)
        nanosleep(&(struct timespec){0, 20000000}, NULL);
    record(b, &x);
    unsetenv("SOURCE_DATE_EPOCH");
    char *ta = slurp(a), *tb = slurp(b);
    struct stat sa, sb;
    assert_int_equal(stat(a, &sa), 0);
    assert_int_equal(stat(b, &sb), 0);
    assert_int_equal(sa.st_size, sb.st_size);
    assert_memory_equal(ta, tb, (size_t)sa.st_size);
    free(ta);
    free(tb);
    /* one bf16 element of one result changed: diff names that dataset and index */
    x.out[1][5] ^= 1;
    record(b, &x);
    ppv_diff_options o = ppv_diff_defaults();
    ppv_diff_report *rep = NULL;
    char err[512];
    assert_int_equal(ppv_diff_files(a, b, &o, &rep, err, sizeof err), 0);
    int values = 0;
    for (int k = 0; k < rep->n; k++)
        if (strcmp(rep->entries[k].what, "values") == 0) {
            values++;
            assert_string_equal(rep->entries[k].path,
                                "/inference/calls/call_000001/result/latents_out");
            assert_int_equal(rep->entries[k].count, 1);
            assert_int_equal(rep->entries[k].first[0].index, 5);
        }
    assert_int_equal(values, 1);
    ppv_diff_report_free(rep);
}

/* Runs argv (NULL-terminated) and returns its exit status (-1 if it did
 * not run or exit). */
static int spawn_wait(char *const *argv) {
    pid_t pid;
    if (posix_spawn(&pid, argv[0], NULL, NULL, argv, environ) != 0) return -1;
    int st;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st)) return -1;
    return WEXITSTATUS(st);
}

/* Skips the calling test when /usr/bin/python3 has no h5py, unless
 * PPV_REQUIRE_H5PY is set: then it fails. */
static void require_h5py(void) {
    setenv("PYTHONPATH", PPV_PYTHON_DIR, 1); /* ppv's package, from the source tree */
    char *const probe[] = {"/usr/bin/python3", "-c", "import h5py", NULL};
    if (spawn_wait(probe) != 0) {
        if (getenv("PPV_REQUIRE_H5PY"))
            fail_msg("/usr/bin/python3 cannot import h5py (Debian: python3-h5py)");
        skip(); /* tools/setup.sh test installs python3-h5py and sets PPV_REQUIRE_H5PY */
    }
}

/* The users' pipeline is Python: a recording written by ppv.record
 * (h5py) reads back through ppv and equals the one ppv writes from C. */
static void test_python_recorder_writes_what_ppv_reads(void **state) {
    (void)state;
    require_h5py();
    run x;
    make_run(&x);
    char c_file[4200], py_file[4200];
    snprintf(c_file, sizeof c_file, "%s", tmp_path("from_c.h5"));
    snprintf(py_file, sizeof py_file, "%s", tmp_path("from_python.h5"));
    record(c_file, &x);
    char *const py[] = {"/usr/bin/python3", "-m", "ppv.record", "--demo", py_file, NULL};
    assert_int_equal(spawn_wait(py), 0);
    /* every call reads back through ppv's reader */
    char err[512];
    int64_t n = 0;
    ppv_inference_reader *r = ppv_inference_open(py_file, &n, NULL, &has_setup, err, sizeof err);
    if (!r) fail_msg("%s", err);
    assert_int_equal(n, 4);
    for (int k = 0; k < 4; k++) {
        ppv_envelope e;
        ppv_result res;
        int has;
        if (ppv_inference_read(r, k, &e, &res, &has, err, sizeof err) != 0) fail_msg("%s", err);
        assert_int_equal(has, x.has[k]);
        ppv_envelope_free_tensors(&e);
        if (has) ppv_result_free_tensors(&res);
    }
    ppv_inference_close(r);
    /* and equals ppv's own recording in every value but who produced it */
    ppv_diff_options o = ppv_diff_defaults();
    const char *ignore[] = {"producer"};
    o.ignore_attrs = ignore;
    o.nignore_attrs = 1;
    ppv_diff_report *rep = NULL;
    assert_int_equal(ppv_diff_files(py_file, c_file, &o, &rep, err, sizeof err), 0);
    for (int k = 0; k < rep->n; k++)
        fprintf(stderr, "difference: %s: %s\n", rep->entries[k].path, rep->entries[k].what);
    assert_int_equal(rep->n, 0);
    assert_true(rep->datasets >= 10);
    ppv_diff_report_free(rep);
}

/* A recording of a real run, `ppv pp` on a mesh of 2 recomputing the KV
 * cache with a hard cut before chunk 2: five calls (four INFERs, call k
 * with call_id k and chunk_index k, then SHUTDOWN) and the setup. Made once
 * per test program, in tmp_dir(). */
static const char *pp_recording(void) {
    static char path[4200];
    if (path[0]) return path;
    snprintf(path, sizeof path, "%s", tmp_path("pp.h5"));
    run_result r = RUN("pp", "--mesh", "2", "--chunks", "4", "--kv", "recompute", "--hard-cut-at",
                       "2", "--record", path);
    if (r.code != 0) fail_msg("ppv pp --record exited %d: %s", r.code, r.err);
    run_free(&r);
    return path;
}

/* Runs python3 -m ppv.record --rewrite IN OUT [--change CALL] (change < 0:
 * none) and returns its exit status. */
static int python_rewrite(const char *in, const char *out, int change) {
    char call[24];
    snprintf(call, sizeof call, "%d", change);
    char *argv[] = {"/usr/bin/python3",
                    "-m",
                    "ppv.record",
                    "--rewrite",
                    (char *)in,
                    (char *)out,
                    "--change",
                    call,
                    NULL};
    if (change < 0) argv[6] = NULL;
    return spawn_wait(argv);
}

/* The users' pipeline records in Python what the mesh computed: the file
 * ppv.record writes (setup and event log included) holds every value ppv's own
 * does, and replays, on the recorded mesh and on another. */
static void test_python_rewrite_of_a_pp_recording_replays_the_same(void **state) {
    (void)state;
    require_h5py();
    const char *a = pp_recording();
    char b[4200];
    snprintf(b, sizeof b, "%s", tmp_path("pp_python.h5"));
    assert_int_equal(python_rewrite(a, b, -1), 0);
    /* created differs; diff leaves it out of ppv files unless --all-attributes */
    run_result r =
        RUN("diff", b, a, "--ignore-attr", "producer", "--ignore-attr", "producer_version");
    if (r.code != 0) fprintf(stderr, "%s%s", r.out, r.err);
    assert_int_equal(r.code, 0);
    run_free(&r);
    r = RUN("replay", b);
    if (r.code != 0) fprintf(stderr, "%s%s", r.out, r.err);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "replayed 5 recorded calls on a mesh of 2"));
    run_free(&r);
    r = RUN("replay", b, "--mesh", "1");
    if (r.code != 0) fprintf(stderr, "%s%s", r.out, r.err);
    assert_int_equal(r.code, 0);
    assert_non_null(strstr(r.out, "replayed 5 recorded calls on a mesh of 1"));
    run_free(&r);
}

/* One bf16 element of one recorded result changed: replay differs, and
 * names that call by its index, call_id and chunk_index. */
static void test_replay_names_the_call_whose_result_python_changed(void **state) {
    (void)state;
    require_h5py();
    const char *a = pp_recording();
    char c[4200], err[512];
    snprintf(c, sizeof c, "%s", tmp_path("pp_changed.h5"));
    assert_int_equal(python_rewrite(a, c, 2), 0);
    /* the call's ids, as recorded */
    int64_t n = 0;
    int has = 0;
    ppv_inference_reader *rd = ppv_inference_open(a, &n, NULL, &has_setup, err, sizeof err);
    if (!rd) fail_msg("%s", err);
    assert_int_equal(n, 5);
    ppv_envelope e;
    ppv_result res;
    if (ppv_inference_read(rd, 2, &e, &res, &has, err, sizeof err) != 0) fail_msg("%s", err);
    assert_int_equal(has, 1);
    assert_int_equal(e.call_id, 2);
    assert_int_equal(e.chunk_index, 2);
    ppv_envelope_free_tensors(&e);
    ppv_result_free_tensors(&res);
    ppv_inference_close(rd);
    run_result r = RUN("replay", c, "--json");
    if (r.code != 1) fprintf(stderr, "%s%s", r.out, r.err);
    assert_int_equal(r.code, 1);
    json_object *o = json_tokener_parse(r.out), *v;
    assert_non_null(o);
    assert_true(json_object_object_get_ex(o, "first_differing_call", &v));
    assert_int_equal(json_object_get_int64(v), 2);
    assert_true(json_object_object_get_ex(o, "first_differing_call_id", &v));
    assert_int_equal(json_object_get_int64(v), 2);
    assert_true(json_object_object_get_ex(o, "first_differing_chunk_index", &v));
    assert_int_equal(json_object_get_int64(v), 2);
    assert_true(json_object_object_get_ex(o, "differences", &v));
    assert_int_equal(json_object_get_int64(v), 1);
    assert_true(json_object_object_get_ex(o, "entries", &v));
    json_object *entry = json_object_array_get_idx(v, 0), *path;
    assert_true(json_object_object_get_ex(entry, "path", &path));
    assert_string_equal(json_object_get_string(path),
                        "/inference/calls/call_000002/result/latents_out");
    json_object_put(o);
    run_free(&r);
}

/* A recording with no setup cannot be re-run: replay checks it against
 * the contract alone and says plainly that no output was recomputed; this
 * one breaks the contract (its digests and start frames are made up), so
 * it is a PROBLEM, never OK. */
static void test_replay_of_a_recording_without_setup_checks_the_contract_only(void **state) {
    (void)state;
    run x;
    make_run(&x);
    char *path = tmp_path("no_setup.h5");
    record(path, &x);
    run_result r = RUN("replay", path);
    assert_int_equal(r.code, 1);
    assert_string_equal(r.err, "");
    assert_non_null(strstr(r.out, "no model answered its envelopes again: outputs were not "
                                  "recomputed, only the contract was checked\n"
                                  "result: PROBLEM\n"));
    assert_non_null(strstr(r.out, "PPV-CORRUPT [digest] at call 0 (call_id 0, chunk_index 0, "
                                  "cache_epoch 0): output_digest_i64 is ffffffffffffffb3"));
    assert_null(strstr(r.out, "result: OK"));
    run_free(&r);
    r = RUN("replay", path, "--json");
    assert_int_equal(r.code, 1);
    assert_non_null(strstr(r.out, "\"ok\":false,\"kind\":\"inference\",\"recomputed\":false"));
    run_free(&r);
}

/* A recording of a plug-in generator rewritten by the Python recorder (as
 * a user's own pipeline would write it, the setup named by the
 * generator's name, version and settings) replays with that plug-in, and
 * not with the built-in. */
static void test_python_rewrite_of_a_plugin_recording_replays_with_the_plugin(void **state) {
    (void)state;
    require_h5py();
    char a[4200], b[4200];
    snprintf(a, sizeof a, "%s", tmp_path("plugin.h5"));
    snprintf(b, sizeof b, "%s", tmp_path("plugin_python.h5"));
    run_result r = RUN("pp", "--generator", PPV_TP_MLP, "--generator-params", "hidden=32,seed=3",
                       "--chunks", "3", "--record", a);
    assert_int_equal(r.code, 0);
    run_free(&r);
    assert_int_equal(python_rewrite(a, b, -1), 0);
    ppv_inference_setup setup;
    int has = 0;
    int64_t n = 0;
    char err[1024];
    ppv_inference_reader *rd = ppv_inference_open(b, &n, &setup, &has, err, sizeof err);
    if (!rd) fail_msg("%s", err);
    ppv_inference_close(rd);
    assert_int_equal(has, 1);
    assert_string_equal(setup.generator, "tp-mlp");
    assert_string_equal(setup.generator_params, "hidden=32,seed=3");
    r = RUN("replay", b, "--generator", PPV_TP_MLP, "--mesh", "4");
    if (r.code != 0) fprintf(stderr, "%s%s", r.out, r.err);
    assert_int_equal(r.code, 0);
    run_free(&r);
    r = RUN("replay", b);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "was recorded with generator tp-mlp 1"));
    run_free(&r);
}

/* Replaces a string attribute of /inference/generator. */
static void set_generator_text(const char *path, const char *name, const char *value) {
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(f >= 0);
    hid_t g = H5Gopen2(f, "/inference/generator", H5P_DEFAULT);
    assert_true(g >= 0 && H5Adelete(g, name) >= 0);
    hid_t st = H5Tcopy(H5T_C_S1), sp = H5Screate(H5S_SCALAR);
    H5Tset_size(st, strlen(value) + 1);
    hid_t a = H5Acreate2(g, name, st, sp, H5P_DEFAULT, H5P_DEFAULT);
    assert_true(a >= 0 && H5Awrite(a, st, value) >= 0);
    H5Aclose(a), H5Sclose(sp), H5Tclose(st), H5Gclose(g), H5Fclose(f);
}

/* A recording names its generator and keeps a digest of its setup: a
 * setup changed afterwards is refused before anything is re-run, and a
 * generator renamed in the file is not the one replay runs. */
static void test_a_changed_generator_setup_is_refused(void **state) {
    (void)state;
    char path[4200];
    snprintf(path, sizeof path, "%s", tmp_path("named.h5"));
    run_result r = RUN("pp", "--chunks", "2", "--generator-params", "layers=1,seed=5", "--record",
                       path);
    assert_int_equal(r.code, 0);
    run_free(&r);
    r = RUN("replay", path);
    assert_int_equal(r.code, 0);
    run_free(&r);
    ppv_inference_setup setup;
    int has = 0;
    int64_t n = 0;
    char err[1024];
    ppv_inference_reader *rd = ppv_inference_open(path, &n, &setup, &has, err, sizeof err);
    assert_non_null(rd);
    ppv_inference_close(rd);
    assert_int_equal(has, 1);
    assert_string_equal(setup.generator, "ppv-dit");
    assert_string_equal(setup.generator_version, "1");
    assert_string_equal(setup.generator_params, "layers=1,d_model=32,n_heads=4,d_ff=64,seed=5");
    assert_int_equal(setup.model.layers, 1);
    assert_int_equal(setup.model.seed, 5);
    /* the built-in's settings text must say what its attributes say */
    set_generator_text(path, "params", "layers=2,d_model=32,n_heads=4,d_ff=64,seed=5");
    r = RUN("replay", path);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "params 'layers=2,d_model=32,n_heads=4,d_ff=64,seed=5' "
                                  "disagree with its configuration attributes "
                                  "('layers=1,d_model=32,n_heads=4,d_ff=64,seed=5')"));
    run_free(&r);
    set_generator_text(path, "params", "layers=1,d_model=32,n_heads=4,d_ff=64,seed=5");
    r = RUN("replay", path);
    assert_int_equal(r.code, 0);
    run_free(&r);
    set_generator_text(path, "version", "2");
    r = RUN("replay", path);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "setup_digest"));
    assert_non_null(strstr(r.err, "does not match its name, version and params"));
    run_free(&r);
    set_generator_text(path, "version", "1");
    set_generator_text(path, "name", "someone-elses");
    r = RUN("replay", path);
    assert_int_equal(r.code, 2);
    assert_non_null(strstr(r.err, "does not match")); /* the digest covers the name too */
    run_free(&r);
}

/* Call k's conditioning_embeds in the file: element 0's bits flipped
 * (flip), every element zeroed (zero), or the dataset deleted. */
enum cond_change { COND_FLIP, COND_ZERO, COND_DELETE };
static void change_conditioning(const char *path, int k, enum cond_change how) {
    char where[128];
    snprintf(where, sizeof where, "/inference/calls/call_%06d/envelope/conditioning_embeds", k);
    hid_t f = H5Fopen(path, H5F_ACC_RDWR, H5P_DEFAULT);
    assert_true(f >= 0);
    if (how == COND_DELETE) {
        assert_true(H5Ldelete(f, where, H5P_DEFAULT) >= 0);
        H5Fclose(f);
        return;
    }
    hid_t d = H5Dopen2(f, where, H5P_DEFAULT);
    assert_true(d >= 0);
    hid_t t = H5Dget_type(d), sp = H5Dget_space(d);
    hssize_t n = H5Sget_simple_extent_npoints(sp);
    assert_int_equal(H5Tget_size(t), 2);
    uint16_t *v = calloc((size_t)n, sizeof *v);
    assert_non_null(v);
    assert_true(H5Dread(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0);
    if (how == COND_FLIP) v[0] ^= 1;
    else memset(v, 0, (size_t)n * sizeof *v);
    assert_true(H5Dwrite(d, t, H5S_ALL, H5S_ALL, H5P_DEFAULT, v) >= 0);
    free(v);
    H5Tclose(t), H5Sclose(sp), H5Dclose(d), H5Fclose(f);
}

/* The mesh uses every chunk's own conditioning: a changed or zeroed
 * embedding on a chunk that resets nothing changes its output (replay
 * names that call), and a missing one is refused; none is silently
 * replaced by an earlier chunk's (FM-17). */
static void test_every_chunks_conditioning_is_used(void **state) {
    (void)state;
    static const char *const what[] = {"flip", "zero"};
    for (int how = COND_FLIP; how <= COND_DELETE; how++) {
        char path[4200];
        snprintf(path, sizeof path, "%s", tmp_path("cond.h5"));
        unlink(path);
        run_result r = RUN("pp", "--mesh", "2", "--chunks", "4", "--record", path);
        assert_int_equal(r.code, 0);
        run_free(&r);
        change_conditioning(path, 2, (enum cond_change)how);
        r = RUN("replay", path, "--json");
        if (how == COND_DELETE) { /* conform and the leader both refuse it */
            assert_int_equal(r.code, 1);
            assert_non_null(strstr(r.out, "\"rule\":\"FM-06\""));
            assert_non_null(strstr(r.out, "conditioning_embeds missing (call_id 2, chunk_index 2"));
            assert_non_null(strstr(r.out, "the leader rejected the envelope after receiving it "
                                          "(FM-06: conditioning_embeds missing"));
        } else {
            if (r.code != 1) fail_msg("%s: replay exited %d: %s%s", what[how], r.code, r.out, r.err);
            json_object *o = json_tokener_parse(r.out);
            assert_non_null(o);
            json_object *first = json_object_object_get(o, "first_differing_call");
            assert_non_null(first);
            assert_int_equal(json_object_get_int64(first), 2);
            json_object_put(o);
        }
        run_free(&r);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_call_reads_back_as_written),
        cmocka_unit_test(test_an_abandoned_recording_leaves_nothing),
        cmocka_unit_test(test_a_broken_call_is_named_with_what_is_wrong),
        cmocka_unit_test(test_equal_runs_give_equal_bytes_and_diff_finds_one_changed_value),
        cmocka_unit_test(test_python_recorder_writes_what_ppv_reads),
        cmocka_unit_test(test_python_rewrite_of_a_pp_recording_replays_the_same),
        cmocka_unit_test(test_replay_names_the_call_whose_result_python_changed),
        cmocka_unit_test(test_replay_of_a_recording_without_setup_checks_the_contract_only),
        cmocka_unit_test(test_a_changed_generator_setup_is_refused),
        cmocka_unit_test(test_python_rewrite_of_a_plugin_recording_replays_with_the_plugin),
        cmocka_unit_test(test_every_chunks_conditioning_is_used),
    };
    return cmocka_run_group_tests(tests, NULL, tmp_cleanup);
}
