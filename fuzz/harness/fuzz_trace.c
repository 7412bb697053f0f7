/* fuzz_trace.c - libFuzzer harness for the trace reader (ppv_trace_read,
 * ppv_trace_read_fault), what `ppv run --replay` and `ppv fuzz` read.
 *
 * The readers take a path, so the input is written to the harness's
 * temporary file first. Decisions read must name ranks of the trace, a
 * fault read must be a fault; a refusal names the file and hands back
 * nothing.
 *
 * The reader is given a cap of MAX_DECISIONS decisions, as the commands
 * give it what their memory limit leaves: a run of N decisions is two
 * numbers, so 50 bytes can announce 1.6 GB of them, and such a file must
 * be refused by its count before anything is allocated (README.md).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ppv_engine.h"

enum { MAX_DECISIONS = 1 << 20 };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = harness_write_temp(data, size, "fuzz.trace");
    size_t plen = strlen(path);
    int32_t *d = (int32_t *)1, nranks = -1;
    int64_t n = -1;
    char err[1024] = "";
    int rc = ppv_trace_read(path, MAX_DECISIONS, &d, &n, &nranks, err, sizeof err);
    if (rc != 0) {
        HARNESS_CHECK(rc == -1 && d == NULL && n == 0, "rc %d", rc);
        HARNESS_CHECK(strncmp(err, path, plen) == 0 && err[plen] == ':',
                      "the message does not name the file: '%s'", err);
    } else {
        HARNESS_CHECK(d != NULL && n >= 0 && nranks >= 1, "%lld decisions of %d ranks",
                      (long long)n, nranks);
        for (int64_t k = 0; k < n; k++)
            HARNESS_CHECK(d[k] >= 0 && d[k] < nranks, "decision %lld is rank %d of %d",
                          (long long)k, d[k], nranks);
        free(d);
    }
    ppv_fault fault;
    err[0] = 0;
    rc = ppv_trace_read_fault(path, &fault, err, sizeof err);
    if (rc != 0) {
        HARNESS_CHECK(rc == -1 && strncmp(err, path, plen) == 0 && err[plen] == ':',
                      "rc %d, message '%s'", rc, err);
    } else {
        HARNESS_CHECK(fault.kind < PPV_FAULT_COUNT && fault.message >= 0 &&
                          (fault.kind != PPV_FAULT_NONE || fault.message == 0),
                      "fault %d at %lld", (int)fault.kind, (long long)fault.message);
    }
    return 0;
}
