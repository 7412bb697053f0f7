/* main.c - an outside program built against an installed ppv (test_install):
 * it sees only the installed headers and libppv. It generates 1F1B on 4
 * ranks with 8 microbatches, checks it, and compares the given golden file
 * with itself, so the engine and the golden layer (and HDF5) are linked.
 *
 * Usage: ppv_install_consumer GOLDEN.h5; prints three facts and returns 0,
 * or names what failed and returns 1.
 */
#include <stdio.h>

#include <ppv/ppv_engine.h>
#include <ppv/ppv_golden.h>
#include <ppv/ppv_kernels.h>
#include <ppv/ppv_spec.h>

/* Prints the facts; returns 0 when every call succeeded and the schedule
 * checks ok, else 1. */
static int run(const char *golden) {
    char err[512];
    printf("ppv %s\n", PPV_VERSION_STRING); /* from the installed ppv_version.h */
    ppv_gen_params p = {.ranks = 4, .microbatches = 8, .stages_per_rank = 0};
    ppv_schedule *s = NULL;
    if (ppv_generate("1f1b", &p, &s, err, sizeof err) != 0) {
        fprintf(stderr, "ppv_generate 1f1b: %s\n", err);
        return 1;
    }
    printf("1f1b ranks=4 microbatches=8: %lld actions\n", (long long)ppv_schedule_size(s));

    int rc = 1;
    ppv_check_options opt = ppv_check_defaults();
    ppv_check_report *r = NULL;
    if (ppv_schedule_check(s, &opt, &r, err, sizeof err) != 0) {
        fprintf(stderr, "ppv_schedule_check: %s\n", err);
    } else {
        printf("check: %s, rank 0 peak activation %g\n", r->ok ? "ok" : "FAILED",
               r->peak_activation[0]);
        rc = r->ok ? 0 : 1;
    }
    ppv_check_report_free(r);
    ppv_schedule_free(s);

    ppv_diff_options o = ppv_diff_defaults();
    ppv_diff_report *d = NULL;
    if (ppv_diff_files(golden, golden, &o, &d, err, sizeof err) != 0) {
        fprintf(stderr, "ppv_diff_files %s: %s\n", golden, err);
        return 1;
    }
    printf("golden against itself: %s\n", d->n == 0 ? "same" : "DIFFERENT");
    if (d->n != 0) rc = 1;
    ppv_diff_report_free(d);
    return rc;
}

int main(int argc, char **argv) {
    if (argc != 2) {
        fprintf(stderr, "usage: %s GOLDEN.h5\n", argv[0]);
        return 2;
    }
    return run(argv[1]);
}
