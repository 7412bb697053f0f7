/* testutil.h - helpers for ppv's cmocka tests. Files a test writes go in
 * its process's own temporary directory (tmp_path), made under $TMPDIR on
 * first use and removed by the group teardown tmp_cleanup, so two test runs
 * on one machine never share a name. */
#ifndef PPV_TESTUTIL_H
#define PPV_TESTUTIL_H

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <math.h>
#include <setjmp.h>
#include <spawn.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "ppv_engine.h"

/* RUNNING_ON_VALGRIND: 1 under valgrind (ctest -T memcheck), where a test
 * may run a smaller sweep; 0 elsewhere. */
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif
#ifndef PPV_TEST_SANITIZED
#define PPV_TEST_SANITIZED 0
#endif

/* The size of a long sweep (seeds, programs, runs) in this build: whole in
 * the gcc and clang builds of the README's test command, which run every
 * case; a sample in the checked builds, which look for memory errors on
 * the same code paths and run far slower: the sanitizer build (about ten
 * times) and valgrind (about fifty). */
static inline int64_t sweep(int64_t native, int64_t sanitized, int64_t valgrind) {
    return RUNNING_ON_VALGRIND ? valgrind : PPV_TEST_SANITIZED ? sanitized : native;
}

/* PPV_TEST_DATA and PPV_INTEROP_DIR come from tests/CMakeLists.txt. */
static inline const char *data_path(const char *name) {
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s", PPV_TEST_DATA, name);
    return buf;
}

static inline const char *interop_path(const char *name) {
    static char buf[4096];
    snprintf(buf, sizeof buf, "%s/%s", PPV_INTEROP_DIR, name);
    return buf;
}

/* ---- the process's temporary directory --------------------------------------- */

/* The directory's path once made ("" before); state of this test program. */
static inline char *tmp_dir_state(void) {
    static char dir[4096];
    return dir;
}

/* The process's temporary directory, $TMPDIR/ppv_test_XXXXXX (/tmp when
 * TMPDIR is unset or empty), made by mkdtemp on the first call; fails the
 * calling test if it cannot be made. */
static inline const char *tmp_dir(void) {
    char *dir = tmp_dir_state();
    if (dir[0]) return dir;
    const char *base = getenv("TMPDIR");
    if (!base || !*base) base = "/tmp";
    size_t n = strlen(base);
    while (n > 1 && base[n - 1] == '/')
        n--;
    snprintf(dir, 4096, "%.*s/ppv_test_XXXXXX", (int)n, base);
    if (!mkdtemp(dir)) {
        fprintf(stderr,
                "cannot make a temporary directory %s: %s (set TMPDIR to a writable "
                "directory)\n",
                dir, strerror(errno));
        dir[0] = '\0';
        fail();
    }
    return dir;
}

/* name inside tmp_dir(), in one of 16 buffers used in turn: a path stays
 * valid until 16 more calls. Writable, so mkstemp can fill in XXXXXX. */
static inline char *tmp_path(const char *name) {
    static char ring[16][4096];
    static int next;
    char *p = ring[next++ % 16];
    snprintf(p, sizeof ring[0], "%s/%s", tmp_dir(), name);
    return p;
}

/* Removes every entry of the directory open as dfd (closed on return),
 * depth first; symbolic links are removed, never followed. 0, or -1 if
 * something stays. */
static inline int tmp_empty_dir(int dfd) {
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return -1;
    }
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *n = e->d_name;
        if (strcmp(n, ".") == 0 || strcmp(n, "..") == 0) continue;
        struct stat st;
        if (fstatat(dirfd(d), n, &st, AT_SYMLINK_NOFOLLOW) != 0) {
            rc = -1;
            continue;
        }
        if (!S_ISDIR(st.st_mode)) {
            rc |= unlinkat(dirfd(d), n, 0);
            continue;
        }
        /* O_NOFOLLOW: a directory swapped for a link since fstatat is not entered */
        int sub = openat(dirfd(d), n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
        if (sub < 0 || tmp_empty_dir(sub) < 0 || unlinkat(dirfd(d), n, AT_REMOVEDIR) != 0) rc = -1;
    }
    closedir(d);
    return rc ? -1 : 0;
}

/* Group teardown for cmocka_run_group_tests: removes tmp_dir() and all it
 * holds, if it was made. 0, or -1 (the group fails) if anything stays. */
static inline int tmp_cleanup(void **state) {
    (void)state;
    char *dir = tmp_dir_state();
    if (!dir[0]) return 0;
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW);
    int rc = fd < 0 || tmp_empty_dir(fd) < 0 || rmdir(dir) != 0 ? -1 : 0;
    if (rc) fprintf(stderr, "cannot remove the temporary directory %s: %s\n", dir, strerror(errno));
    dir[0] = '\0';
    return rc;
}

/* ---- schedules ------------------------------------------------------------------ */

/* Loads a schedule that must parse. */
static inline ppv_schedule *load_ok(const char *path) {
    char err[1024] = "";
    ppv_schedule *s = NULL;
    int rc = ppv_schedule_load(path, PPV_DIALECT_AUTO, &s, err, sizeof err);
    if (rc != 0) fprintf(stderr, "load %s: %s\n", path, err);
    assert_int_equal(rc, 0);
    assert_non_null(s);
    return s;
}

/* Checks s under the named semantics with default costs. */
static inline ppv_check_report *check_with(const ppv_schedule *s, const char *sem) {
    ppv_check_options o = ppv_check_defaults();
    assert_int_equal(ppv_semantics_parse(sem, &o.sem), 0);
    ppv_check_report *rep = NULL;
    char err[512] = "";
    assert_int_equal(ppv_schedule_check(s, &o, &rep, err, sizeof err), 0);
    assert_non_null(rep);
    return rep;
}

/* Generates KIND with p ranks, m microbatches and v stages per rank. */
static inline ppv_schedule *gen_ok(const char *kind, int p, int m, int v) {
    ppv_gen_params gp = {p, m, v};
    ppv_schedule *s = NULL;
    char err[512] = "";
    int rc = ppv_generate(kind, &gp, &s, err, sizeof err);
    if (rc != 0) fprintf(stderr, "gen %s p=%d m=%d v=%d: %s\n", kind, p, m, v, err);
    assert_int_equal(rc, 0);
    return s;
}

/* Writes s as CSV into a malloc'd string. */
static inline char *csv_text(const ppv_schedule *s) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    char err[256];
    assert_int_equal(ppv_schedule_write_csv(s, f, err, sizeof err), 0);
    fclose(f);
    return buf;
}

/* Reads a whole file into a malloc'd string. */
static inline char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *buf = malloc((size_t)n + 1);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    buf[n] = 0;
    fclose(f);
    return buf;
}

/* Writes text to path (replacing it). */
static inline void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

/* A native schedule of two ranks declaring groups g0..g{ngroups-1} (both
 * ranks), rank 0 running rank0's action line and rank 1 rank1's; malloc'd. */
static inline char *many_groups_text(int32_t ngroups, const char *rank0, const char *rank1) {
    size_t cap = 64 + (size_t)ngroups * 24 + strlen(rank0) + strlen(rank1);
    char *t = malloc(cap);
    size_t n = (size_t)snprintf(t, cap, "ppv-schedule 1\nranks 2\n");
    for (int32_t g = 0; g < ngroups; g++)
        n += (size_t)snprintf(t + n, cap - n, "group g%d 0 1\n", g);
    snprintf(t + n, cap - n, "rank 0\n%s\nrank 1\n%s\n", rank0, rank1);
    return t;
}

/* ---- running the ppv command ------------------------------------------------------- */

extern char **environ;

typedef struct run_result {
    int code;
    char *out, *err;
} run_result;

/* Runs argv (NULL-terminated; argv[0] a path, or looked up in PATH when
 * search) with stdin from in_path (NULL: the test's own), capturing
 * stderr, and stdout too unless out_dev names a device to open as stdout
 * instead (then r.out is ""), through files in tmp_dir(). */
static inline run_result run_program(const char *in_path, const char *out_dev, int search,
                                     const char *const *argv) {
    char outp[4200], errp[4200];
    snprintf(outp, sizeof outp, "%s/outXXXXXX", tmp_dir());
    snprintf(errp, sizeof errp, "%s/errXXXXXX", tmp_dir());
    int fo = mkstemp(outp), fe = mkstemp(errp);
    assert_true(fo >= 0 && fe >= 0);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    if (in_path) posix_spawn_file_actions_addopen(&fa, 0, in_path, O_RDONLY, 0);
    if (out_dev)
        posix_spawn_file_actions_addopen(&fa, 1, out_dev, O_WRONLY, 0);
    else
        posix_spawn_file_actions_adddup2(&fa, fo, 1);
    posix_spawn_file_actions_adddup2(&fa, fe, 2);
    pid_t pid;
    int e = search ? posix_spawnp(&pid, argv[0], &fa, NULL, (char *const *)argv, environ)
                   : posix_spawn(&pid, argv[0], &fa, NULL, (char *const *)argv, environ);
    assert_int_equal(e, 0);
    posix_spawn_file_actions_destroy(&fa);
    int st;
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    close(fo);
    close(fe);
    run_result r = {WEXITSTATUS(st), slurp(outp), slurp(errp)};
    unlink(outp);
    unlink(errp);
    return r;
}

/* 1 when o and everything in it is plain JSON: no NaN or Infinity. */
static inline int json_all_finite(json_object *o) {
    switch (json_object_get_type(o)) {
    case json_type_double: return isfinite(json_object_get_double(o));
    case json_type_array:
        for (size_t i = 0; i < json_object_array_length(o); i++)
            if (!json_all_finite(json_object_array_get_idx(o, i))) return 0;
        return 1;
    case json_type_object: {
        json_object_object_foreach(o, key, val) {
            (void)key;
            if (!json_all_finite(val)) return 0;
        }
        return 1;
    }
    default: return 1;
    }
}

/* 0 when out is one JSON value a strict parser reads (json-c's
 * JSON_TOKENER_STRICT, nothing after it but newlines) holding no NaN or
 * Infinity, which no JSON parser takes; else -1 with why. */
static inline int json_strict_ok(const char *out, char *why, size_t n) {
    json_tokener *tok = json_tokener_new();
    assert_non_null(tok);
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    size_t len = strlen(out);
    json_object *o = json_tokener_parse_ex(tok, out, (int)len);
    size_t used = json_tokener_get_parse_end(tok);
    int rc = 0;
    if (!o || json_tokener_get_error(tok) != json_tokener_success) {
        snprintf(why, n, "%s at byte %zu", json_tokener_error_desc(json_tokener_get_error(tok)),
                 used);
        rc = -1;
    } else if (strspn(out + used, "\n") != len - used) {
        snprintf(why, n, "more after the value, at byte %zu", used);
        rc = -1;
    } else if (!json_all_finite(o)) {
        snprintf(why, n, "a figure that is not finite");
        rc = -1;
    }
    json_object_put(o);
    json_tokener_free(tok);
    return rc;
}

/* Every --json output of the suite is checked by json_strict_ok, whatever
 * the command's exit code. */
static inline void json_output_parses(const char *const *args, const char *out) {
    int json = 0;
    for (int i = 0; args[i]; i++) {
        if (!strcmp(args[i], "--help") || !strcmp(args[i], "-h")) return; /* the help, not JSON */
        json |= !strcmp(args[i], "--json");
    }
    char why[128];
    if (json && out[0] && json_strict_ok(out, why, sizeof why) < 0)
        fail_msg("--json printed what a strict parser refuses (%s): %.400s", why, out);
}

/* The ppv binary (PPV_BIN, from tests/CMakeLists.txt) as a user runs it,
 * with args (NULL-terminated); as run_program. Every --json output is
 * checked (json_output_parses). */
static inline run_result run_io(const char *in_path, const char *out_dev, const char *const *args) {
    size_t nargs = 0;
    while (args[nargs])
        nargs++;
    const char **argv = calloc(nargs + 2, sizeof *argv);
    assert_non_null(argv);
    argv[0] = PPV_BIN;
    memcpy(argv + 1, args, nargs * sizeof *argv);
    run_result r = run_program(in_path, out_dev, 0, argv);
    free(argv);
    json_output_parses(args, r.out);
    return r;
}

/* Runs ppv with args and stdin from in_path (NULL: the test's own). */
static inline run_result run_in(const char *in_path, const char *const *args) {
    return run_io(in_path, NULL, args);
}

static inline void run_free(run_result *r) {
    free(r->out);
    free(r->err);
}

#define RUN(...) run_in(NULL, (const char *const[]){__VA_ARGS__, NULL})
#define RUN_STDIN(in, ...) run_in(in, (const char *const[]){__VA_ARGS__, NULL})
#define RUN_TO_FULL(...) run_io(NULL, "/dev/full", (const char *const[]){__VA_ARGS__, NULL})

/* `ppv gen KIND -p P -m M` into the test's directory as name; its path. */
static inline char *gen_file(const char *name, const char *kind, const char *p, const char *m) {
    char *path = tmp_path(name);
    run_result r = RUN("gen", kind, "-p", p, "-m", m, "-o", path);
    assert_int_equal(r.code, 0);
    run_free(&r);
    return path;
}

#endif
