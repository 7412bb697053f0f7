/* waitfor.c - the wait-for cycle of blocked ranks, shared by the static
 * verifier and the engine's scheduler so both report a deadlock alike. */
#include <stdlib.h>

#include "check_internal.h"

int ppv_wait_cycle(const ppv_wait *blocked, int32_t nblocked, int32_t P, ppv_wait **cycle,
                   int32_t *ncycle) {
    *cycle = NULL;
    *ncycle = 0;
    int32_t *next = malloc((size_t)P * sizeof *next);
    int32_t *slot = malloc((size_t)P * sizeof *slot);
    int32_t *mark = calloc((size_t)P, sizeof *mark);
    if (!next || !slot || !mark) {
        free(next), free(slot), free(mark);
        return -1;
    }
    for (int32_t r = 0; r < P; r++) next[r] = -1, slot[r] = -1;
    for (int32_t k = 0; k < nblocked; k++) {
        next[blocked[k].rank] = blocked[k].waits_for;
        slot[blocked[k].rank] = k;
    }
    int32_t at = -1;
    for (int32_t k = 0; k < nblocked && at < 0; k++) {
        int32_t r = blocked[k].rank;
        while (r >= 0 && slot[r] >= 0 && mark[r] == 0) {
            mark[r] = k + 1;
            r = next[r];
        }
        if (r >= 0 && slot[r] >= 0 && mark[r] == k + 1) at = r; /* closed on this walk */
    }
    int rc = 0;
    if (at >= 0) {
        int32_t n = 0, r = at;
        do n++, r = next[r];
        while (r != at);
        *cycle = malloc((size_t)n * sizeof **cycle);
        if (!*cycle) rc = -1;
        for (int32_t k = 0; rc == 0 && k < n; k++, r = next[r]) (*cycle)[k] = blocked[slot[r]];
        if (rc == 0) *ncycle = n;
    }
    free(next), free(slot), free(mark);
    return rc;
}

