/* fuzz_trace.c - libFuzzer harness for the trace reader (ppv_trace_read,
 * ppv_trace_read_fault), what `ppv run --replay` and `ppv fuzz` read.
 *
 * The readers take a path, so the input is written to the harness's
 * temporary file first. Decisions read must name ranks of the trace, a
 * fault read must be a fault; a refusal names the file and hands back
 * nothing.
 *
 * A trace that announces more than MAX_DECISIONS decisions is not read:
 * ppv_trace_read allocates the announced count before it reads a run, and
 * a run of N decisions is two numbers, so 50 bytes make it fill 1.6 GB
 * (README.md, "Known"); what such a file is owed is a refusal by size
 * before it is read, which is its caller's to make.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ppv_engine.h"

enum { MAX_DECISIONS = 1 << 20 };

/* The decision count the header announces, read as ppv_trace_read reads
 * it; -1 when the header does not parse. */
static long long announced(const uint8_t *data, size_t size) {
    char *head = malloc(size + 1);
    HARNESS_CHECK(head != NULL, "out of memory");
    memcpy(head, data, size);
    head[size] = 0; /* a NUL stops fscanf where it stops sscanf */
    int version, ranks;
    long long total = -1;
    if (sscanf(head, "ppv-trace %d\nranks %d\ndecisions %lld", &version, &ranks, &total) != 3)
        total = -1;
    free(head);
    return total;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (announced(data, size) > MAX_DECISIONS) return 0;
    const char *path = harness_write_temp(data, size, "fuzz.trace");
    size_t plen = strlen(path);
    int32_t *d = (int32_t *)1, nranks = -1;
    int64_t n = -1;
    char err[1024] = "";
    int rc = ppv_trace_read(path, &d, &n, &nranks, err, sizeof err);
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
