/* fuzz_golden.c - libFuzzer harness for the golden-file loaders: what
 * `ppv replay` does with a file (ppv_golden_is_inference, then
 * ppv_golden_replay for a training file, or the inference recording's
 * loader, ppv_inference_open and ppv_inference_read, and ppv conform's checks,
 * for a recording), and
 * what `ppv diff` does with it (ppv_diff_files, the file against itself).
 *
 * The loaders take a path, so the input is written to the harness's
 * temporary file first. A refusal gives a reason (the recording's loader
 * names the file; replay's messages about the layout name only the
 * object, "/model: missing", which `ppv replay` prints as it is); a file
 * compared with itself has no difference but its unreadable attributes
 * (diff lists "(unreadable) vs (unreadable)"); and whatever happened, no
 * HDF5 object is left open (a leaked id keeps a file open inside the
 * library). A recording's re-run (ppv_inference_replay) is left out: it
 * builds the generator the file's setup names, up to a million layers,
 * which is the file's request, not a parser's work.
 *
 * HDF5 itself is not instrumented: coverage is ppv's, and the file's
 * checksums (HDF5 1.10 format) turn most mutations into refusals, which is
 * what the loaders must handle. Two bugs of HDF5 1.10.8 are kept out of
 * the way: files whose global heap it cannot load (ppv_golden_bad_heap_mem) are
 * not given to it, and it leaks an object header it was loading when that
 * header is corrupted. Replayed (replay_main.c: gcc, valgrind, the ASan
 * build), HDF5's free lists are off, as test_golden has them, so that leak
 * carries H5O_protect's stack and tests/valgrind.supp and tests/lsan.supp
 * suppress it alone. Under libFuzzer the free lists stay on (off, each
 * input costs five times as much under ASan) and golden.lsan.supp
 * suppresses leaks of blocks HDF5 allocated: HDF5 is built without frame
 * pointers, so ASan's fast unwinder sees only the allocating HDF5 frame.
 * ppv's own leaks are still reported, leaked HDF5 ids are checked here,
 * and README.md says how the corpus is then replayed under valgrind.
 */
#include <hdf5.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ppv_golden.h"

enum { MAX_CALLS = 64 }; /* calls of a recording read per input */

/* The recording's loader: its setup and every call (up to MAX_CALLS). */
static void load_inference(const char *path) {
    int64_t n = -1;
    ppv_inference_setup setup;
    int has_setup = -1;
    char err[1024] = "";
    ppv_inference_reader *r = ppv_inference_open(path, &n, &setup, &has_setup, err, sizeof err);
    if (!r) {
        HARNESS_CHECK(strncmp(err, path, strlen(path)) == 0, "'%s' does not name the file", err);
        return;
    }
    HARNESS_CHECK(n >= 0 && (has_setup == 0 || has_setup == 1), "%lld calls, setup %d",
                  (long long)n, has_setup);
    for (int64_t k = 0; k < n && k < MAX_CALLS; k++) {
        ppv_envelope e;
        ppv_result res;
        int has_result = -1;
        if (ppv_inference_read(r, k, &e, &res, &has_result, err, sizeof err) < 0) {
            HARNESS_CHECK(strncmp(err, path, strlen(path)) == 0, "'%s' does not name the file",
                          err);
            break;
        }
        ppv_envelope_free_tensors(&e);
        if (has_result) ppv_result_free_tensors(&res);
    }
    ppv_inference_close(r);
    /* ppv conform: a report whose counts add up, or a refusal naming the
     * file (it reads every call, so only files of few calls) */
    if (n > MAX_CALLS) return;
    ppv_conform_report cr;
    if (ppv_conform(path, NULL, &cr, err, sizeof err) < 0) {
        HARNESS_CHECK(strncmp(err, path, strlen(path)) == 0 || !strcmp(err, "out of memory"),
                      "conform: '%s' does not name the file", err);
        return;
    }
    int64_t sum = 0;
    for (int c = 0; c < PPV_CONFORM_COUNT; c++)
        sum += cr.by_check[c];
    HARNESS_CHECK(sum == cr.violations && cr.nv <= cr.violations && cr.present >= 0,
                  "conform: %lld violations, %lld by check, %d kept", (long long)cr.violations,
                  (long long)sum, cr.nv);
    ppv_conform_report_free(&cr);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static int started;
    if (!started) {
        ppv_golden_process_init(); /* as the ppv command does */
#ifdef PPV_FUZZ_REPLAY
        H5set_free_list_limits(0, 0, 0, 0, 0, 0); /* leaks carry their own stack */
#endif
        H5Eset_auto2(H5E_DEFAULT, NULL, NULL);
        started = 1;
    }
    if (ppv_golden_bad_heap_mem(data, size) >= 0) return 0; /* HDF5's bug, README.md "Known" */
    const char *path = harness_write_temp(data, size, "fuzz.h5");
    char err[1024] = "";
    ppv_diff_options o = ppv_diff_defaults();
    o.threads = 1;
    if (ppv_golden_is_inference(path)) {
        load_inference(path);
    } else {
        ppv_replay_result rr;
        if (ppv_golden_replay(path, &o, 0, &rr, err, sizeof err) == 0)
            ppv_replay_result_free(&rr);
        else
            HARNESS_CHECK(err[0] != 0, "a refusal without a reason");
    }
    ppv_diff_report *rep = NULL;
    err[0] = 0;
    if (ppv_diff_files(path, path, &o, &rep, err, sizeof err) == 0) {
        /* the one difference a file has from itself: an attribute that
         * cannot be read, which diff reports rather than refuses */
        for (int k = 0; k < rep->n; k++)
            HARNESS_CHECK(strstr(rep->entries[k].what, ": (unreadable) vs (unreadable)"),
                          "the file differs from itself: %s: %s", rep->entries[k].path,
                          rep->entries[k].what);
        ppv_diff_report_free(rep);
    }
    ssize_t open = H5Fget_obj_count(H5F_OBJ_ALL, H5F_OBJ_ALL);
    HARNESS_CHECK(open == 0, "%zd HDF5 objects left open", open);
    H5garbage_collect(); /* the free lists' blocks back to malloc, so that an
                            input's mallocs and frees balance unless it leaks */
    return 0;
}
