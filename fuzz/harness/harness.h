/* harness.h - what the fuzz harnesses share: a check that fails like a
 * crash (libFuzzer and replay_main both stop on abort), and a per-process
 * temporary file for the readers that take a path. Header-only, so each
 * harness stays one translation unit plus replay_main.c or libFuzzer.
 */
#ifndef PPV_FUZZ_HARNESS_H
#define PPV_FUZZ_HARNESS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ppv_engine.h"

/* A property the code under test broke: the message names the harness
 * line, then the process aborts, which libFuzzer saves as a crash. */
#define HARNESS_CHECK(cond, ...)                                                                   \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);               \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

/* The harness's own temporary folder (mkdtemp under $TMPDIR or /tmp) and
 * the one file in it that inputs are written to; removed at exit. */
static char harness_dir[4096], harness_file[4200];

static inline void harness_cleanup(void) {
    if (harness_file[0]) unlink(harness_file);
    if (harness_dir[0]) rmdir(harness_dir);
}

/* Writes the input to the harness's temporary file and returns its path;
 * aborts when it cannot (the machine, not the code under test, failed). */
static inline const char *harness_write_temp(const uint8_t *data, size_t size, const char *name) {
    if (!harness_dir[0]) {
        const char *tmp = getenv("TMPDIR");
        snprintf(harness_dir, sizeof harness_dir, "%s/ppv-fuzz-XXXXXX",
                 tmp && tmp[0] ? tmp : "/tmp");
        HARNESS_CHECK(mkdtemp(harness_dir) != NULL, "cannot make a folder in %s",
                      tmp && tmp[0] ? tmp : "/tmp");
        snprintf(harness_file, sizeof harness_file, "%s/%s", harness_dir, name);
        atexit(harness_cleanup);
    }
    FILE *f = fopen(harness_file, "wb");
    HARNESS_CHECK(f != NULL, "cannot write %s", harness_file);
    int ok = fwrite(data, 1, size, f) == size;
    ok &= fclose(f) == 0;
    HARNESS_CHECK(ok, "cannot write %s", harness_file);
    return harness_file;
}

/* Two schedules hold the same programs and groups: what a writer and its
 * reader must keep (source positions aside; overlap ids may be renumbered,
 * so only which actions share one is compared). */
static inline void harness_same_schedule(const ppv_schedule *a, const ppv_schedule *b,
                                         const char *text) {
    HARNESS_CHECK(a->nranks == b->nranks && a->nstages == b->nstages && a->nmb == b->nmb &&
                      a->form == b->form && a->ngroups == b->ngroups,
                  "read back: %d ranks, %d stages, %d microbatches, form %d, %d groups; "
                  "written: %d, %d, %d, %d, %d\n%s",
                  b->nranks, b->nstages, b->nmb, (int)b->form, b->ngroups, a->nranks, a->nstages,
                  a->nmb, (int)a->form, a->ngroups, text);
    for (int32_t g = 0; g < a->ngroups; g++) {
        const ppv_group *x = &a->groups[g], *y = &b->groups[g];
        HARNESS_CHECK(strcmp(x->name, y->name) == 0 && x->n == y->n &&
                          memcmp(x->ranks, y->ranks, (size_t)x->n * sizeof *x->ranks) == 0,
                      "group %d differs when read back\n%s", g, text);
    }
    for (int32_t r = 0; r < a->nranks; r++) {
        const ppv_program *p = &a->prog[r], *q = &b->prog[r];
        HARNESS_CHECK(p->n == q->n, "rank %d: %d actions, %d read back\n%s", r, p->n, q->n, text);
        for (int32_t i = 0; i < p->n; i++) {
            const ppv_action *x = &p->acts[i], *y = &q->acts[i];
            int same_overlap = (x->overlap != 0) == (y->overlap != 0) &&
                               (i == 0 || (x->overlap && x->overlap == p->acts[i - 1].overlap) ==
                                              (y->overlap && y->overlap == q->acts[i - 1].overlap));
            HARNESS_CHECK(x->kind == y->kind && x->dtype == y->dtype && x->group == y->group &&
                              x->stage == y->stage && x->mb == y->mb && x->peer == y->peer &&
                              x->tag == y->tag && x->step == y->step && x->bytes == y->bytes &&
                              same_overlap,
                          "rank %d action %d differs when read back\n%s", r, i, text);
        }
    }
}

/* What `ppv check` does with a schedule: the verifier, with a timeline, in
 * one of three send semantics picked by variant. It must not fail on a
 * schedule the reader accepted, and its verdict must be consistent. */
static inline void harness_check_schedule(const ppv_schedule *s, size_t variant) {
    ppv_check_options o = ppv_check_defaults();
    static const char *const sems[] = {"rendezvous", "eager", "eager:4M"};
    HARNESS_CHECK(ppv_semantics_parse(sems[variant % 3], &o.sem) == 0, "semantics");
    o.keep_timeline = 1;
    ppv_check_report *rep = NULL;
    char err[1024] = "";
    int rc = ppv_schedule_check(s, &o, &rep, err, sizeof err);
    int64_t actions = 0;
    for (int32_t r = 0; r < s->nranks; r++) actions += s->prog[r].n;
    if (actions == 0) { /* an empty schedule is refused, never judged */
        HARNESS_CHECK(rc < 0 && strstr(err, "no action"), "an empty schedule was judged");
        return;
    }
    HARNESS_CHECK(rc == 0 && rep != NULL, "the check failed on a schedule it was given: %s", err);
    HARNESS_CHECK(rep->ok == (rep->errors_total == 0 && !rep->deadlock),
                  "verdict ok %d with %lld errors, deadlock %d", rep->ok,
                  (long long)rep->errors_total, rep->deadlock);
    HARNESS_CHECK(rep->nerrors <= rep->errors_total && rep->nranks == s->nranks,
                  "%d errors stored of %lld", rep->nerrors, (long long)rep->errors_total);
    ppv_check_report_free(rep);
}

/* A malloc'd copy of what write() puts in a stream, NUL-terminated, or
 * NULL when the writer failed (its message in err). */
static inline char *harness_written(const ppv_schedule *s, int csv, size_t *len, char *err,
                                    size_t errlen) {
    char *buf = NULL;
    FILE *f = open_memstream(&buf, len);
    HARNESS_CHECK(f != NULL, "open_memstream");
    int rc = csv ? ppv_schedule_write_csv(s, f, err, errlen) : ppv_schedule_write_native(s, f);
    HARNESS_CHECK(fclose(f) == 0 && buf != NULL, "open_memstream");
    if (rc < 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

#endif
