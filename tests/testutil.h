/* testutil.h - helpers for ppv's cmocka tests. */
#ifndef PPV_TESTUTIL_H
#define PPV_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ppv_engine.h"

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

#endif
