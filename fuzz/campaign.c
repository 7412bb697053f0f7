/* campaign.c - what the processes of a campaign (`mpirun -np N ppv fuzz`)
 * say to each other: each one's state at a round's end, and lists of
 * different lengths (the interleavings each one saw, a failing run's
 * decisions). Everything goes through the one allgather the caller gives
 * (ppv_fuzz_campaign), so the explorer knows nothing of MPI. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_internal.h"

int campaign_on(const ppv_fuzz_options *o) {
    return o->campaign && o->campaign->size > 1;
}

int campaign_exchange(const ppv_fuzz_campaign *c, const round_state *mine, round_state *all,
                      char *err, size_t errlen) {
    return c->allgather(c->ctx, mine, all, sizeof *mine, err, errlen);
}

int campaign_gather(const ppv_fuzz_campaign *c, const void *mine, int64_t n, size_t item,
                    void **all, int64_t *total, char *err, size_t errlen) {
    *all = NULL;
    *total = 0;
    int32_t N = c->size;
    int64_t *counts = malloc((size_t)N * sizeof *counts);
    if (!counts) goto oom;
    if (c->allgather(c->ctx, &n, counts, sizeof n, err, errlen) < 0) {
        free(counts);
        return -1;
    }
    int64_t most = 0, sum = 0;
    for (int32_t i = 0; i < N; i++) {
        if (counts[i] > most) most = counts[i];
        sum += counts[i];
    }
    /* every process sends `most` items: its own, then padding */
    size_t slot = (size_t)most * item;
    unsigned char *send = calloc(slot ? slot : 1, 1);
    unsigned char *recv = malloc(slot * (size_t)N + 1);
    unsigned char *out = malloc((size_t)sum * item + 1);
    if (!send || !recv || !out) {
        free(send), free(recv), free(out), free(counts);
        goto oom;
    }
    if (n) memcpy(send, mine, (size_t)n * item);
    if (slot && c->allgather(c->ctx, send, recv, slot, err, errlen) < 0) {
        free(send), free(recv), free(out), free(counts);
        return -1;
    }
    size_t at = 0;
    for (int32_t i = 0; i < N; i++) {
        memcpy(out + at, recv + (size_t)i * slot, (size_t)counts[i] * item);
        at += (size_t)counts[i] * item;
    }
    free(send), free(recv), free(counts);
    *all = out;
    *total = sum;
    return 0;
oom:
    snprintf(err, errlen, "out of memory");
    return -1;
}

int campaign_failed(const ppv_fuzz_campaign *c, const round_state *all, char *err,
                    size_t errlen) {
    for (int32_t i = 0; i < c->size; i++)
        if (all[i].failed) {
            snprintf(err, errlen, "process %d of the campaign: %s", i, all[i].err);
            return 0;
        }
    return -1;
}

int64_t campaign_grow(const round_state *all, int32_t n, int64_t chunk) {
    double slowest = 0;
    for (int32_t i = 0; i < n; i++)
        if (all[i].busy > slowest) slowest = all[i].busy;
    return slowest < 0.1 && chunk < ((int64_t)1 << 20) ? 2 * chunk : chunk;
}
