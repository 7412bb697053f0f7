/* repeat.c - `ppv pp --repeat N`: determinism checked, not assumed.
 *
 * The same configuration runs N times, each in fresh generator state (its
 * open, create, destroy and close again), under the same interleaving:
 * ppv's side of every run is then the same bit for bit, so a result that
 * differs from the first run's is the generator's doing (it reads a clock,
 * calls rand(), keeps state in a global). Every decoded result's
 * output_digest_i64 is compared, call by call, and the first that differs
 * is named. Only the first run keeps what the caller asked of it (its
 * recording, its trace, its report).
 */
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

typedef struct one_result {
    int64_t call_id, chunk_index, cache_epoch;
    uint64_t digest;
} one_result;

typedef struct results {
    one_result *v;
    int64_t n, cap;
    int oom;
    /* the caller's own hook, called on the first run only */
    int (*next)(void *ctx, const ppv_envelope *e, const ppv_result *r, char *err, size_t errlen);
    void *next_ctx;
} results;

static int note_result(void *ctx, const ppv_envelope *e, const ppv_result *r, char *err,
                       size_t errlen) {
    results *rs = ctx;
    if (r && r->ok) {
        if (rs->n == rs->cap) {
            int64_t cap = rs->cap ? 2 * rs->cap : 64;
            one_result *v = realloc(rs->v, (size_t)cap * sizeof *v);
            if (!v) {
                rs->oom = 1;
                return rs->next ? rs->next(rs->next_ctx, e, r, err, errlen) : 0;
            }
            rs->v = v;
            rs->cap = cap;
        }
        rs->v[rs->n++] = (one_result){r->call_id, r->chunk_index, r->cache_epoch,
                                      (uint64_t)r->output_digest_i64};
    }
    return rs->next ? rs->next(rs->next_ctx, e, r, err, errlen) : 0;
}

/* Where run b differs from run a (run number k), in v; 1 if it does. */
static int first_difference(const results *a, const results *b, int32_t k, repeat_verdict *v) {
    int64_t n = a->n < b->n ? a->n : b->n;
    for (int64_t i = 0; i < n; i++) {
        const one_result *x = &a->v[i], *y = &b->v[i];
        if (x->digest == y->digest && x->call_id == y->call_id) continue;
        v->run = k;
        v->call_id = y->call_id;
        v->chunk_index = y->chunk_index;
        v->cache_epoch = y->cache_epoch;
        v->digest = y->digest;
        v->first_digest = x->digest;
        if (x->call_id != y->call_id)
            snprintf(v->why, sizeof v->why,
                     "the generator is not deterministic: run %d of %d decoded call_id %" PRId64
                     " where run 1 decoded call_id %" PRId64 " (result %" PRId64 ")",
                     k, v->runs, y->call_id, x->call_id, i + 1);
        else
            snprintf(v->why, sizeof v->why,
                     "the generator is not deterministic: run %d of %d gave call_id %" PRId64
                     " (chunk_index %" PRId64 ", cache_epoch %" PRId64 ") output digest %016" PRIx64
                     ", run 1 %016" PRIx64 " (every run of ppv's side is the same, so the "
                     "generator's own state differs: a clock, rand(), a global kept from run "
                     "to run)",
                     k, v->runs, y->call_id, y->chunk_index, y->cache_epoch, y->digest, x->digest);
        return 1;
    }
    if (a->n == b->n) return 0;
    v->run = k;
    v->call_id = -1;
    snprintf(v->why, sizeof v->why,
             "the generator is not deterministic: run %d of %d decoded %" PRId64
             " results, run 1 %" PRId64,
             k, v->runs, b->n, a->n);
    return 1;
}

int repeat_pp(const ppv_pp_options *o, int32_t runs, ppv_pp_report **first, repeat_verdict *v,
              char *err, size_t errlen) {
    memset(v, 0, sizeof *v);
    v->runs = runs;
    v->same = 1;
    *first = NULL;
    results base = {.next = o->on_call, .next_ctx = o->on_call_ctx};
    ppv_pp_options once = *o;
    once.on_call = note_result;
    once.on_call_ctx = &base;
    int rc = ppv_pp_run(&once, first, err, errlen);
    if (rc < 0 || !(*first)->ok || runs <= 1) { /* nothing to compare with */
        v->runs = rc < 0 || !(*first)->ok ? 1 : runs;
        free(base.v);
        return rc;
    }
    /* the others: nothing recorded, drawn or traced, only their results */
    ppv_pp_options again = *o;
    again.on_event = NULL;
    again.on_rank = NULL;
    again.progress = NULL;
    again.on_call = note_result;
    for (int32_t k = 2; k <= runs && v->same && !base.oom; k++) {
        results rs = {0};
        again.on_call_ctx = &rs;
        ppv_pp_report *r = NULL;
        if (ppv_pp_run(&again, &r, err, errlen) < 0) {
            free(rs.v);
            free(base.v);
            ppv_pp_report_free(*first);
            *first = NULL;
            return -1;
        }
        if (rs.oom) {
            base.oom = 1;
        } else if (!r->ok) {
            v->same = 0;
            v->run = k;
            v->call_id = -1;
            snprintf(v->why, sizeof v->why,
                     "the generator is not deterministic: run %d of %d failed where run 1 passed: "
                     "%.400s",
                     k, runs, r->message);
        } else if (first_difference(&base, &rs, k, v)) {
            v->same = 0;
        }
        free(rs.v);
        ppv_pp_report_free(r);
    }
    free(base.v);
    if (base.oom) {
        ppv_pp_report_free(*first);
        *first = NULL;
        snprintf(err, errlen, "--repeat: out of memory keeping the results' digests");
        return -1;
    }
    return 0;
}
