/* bench_world.c - the mock transport's cost: coroutine switches per second
 * under each scheduling policy, and whole `ppv run` training steps per
 * second on generated schedules. A benchmark reports figures; it never
 * fails on them (exit 2 only when a run cannot be set up or does not
 * complete).
 *
 * usage: ppv_bench_world [MESSAGES]   (in all, split over the ranks)
 * Each scheduler step is one switch into a rank coroutine and one back, so
 * switches = 2 x steps.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ppv_engine.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

typedef struct ring {
    int32_t nranks;
    int64_t messages;
} ring;

/* Every rank passes a token around the ring, messages times. */
static void ring_main(ppv_transport *t, int32_t rank, void *varg) {
    const ring *a = varg;
    int64_t token = rank;
    for (int64_t k = 0; k < a->messages; k++) {
        if (t->ops->send(t->impl, rank, &token, sizeof token, (rank + 1) % a->nranks, 0, "SEND"))
            return;
        if (t->ops->recv(t->impl, rank, &token, sizeof token, (rank + a->nranks - 1) % a->nranks, 0,
                         "RECV"))
            return;
        ppv_world_progress(t, rank);
    }
}

static int bench_switches(int32_t P, const char *policy, int64_t messages) {
    ppv_world_options o;
    memset(&o, 0, sizeof o);
    o.nranks = P;
    ppv_semantics_parse("eager", &o.sem);
    ppv_policy_parse(policy, &o.policy);
    o.policy.seed = 1;
    o.watchdog_steps = 1000000;
    char err[256];
    ppv_world *w = ppv_world_new(&o, err, sizeof err);
    if (!w) {
        fprintf(stderr, "bench: %s\n", err);
        return -1;
    }
    ring a = {P, messages};
    ppv_world_result res;
    double t0 = now();
    int rc = ppv_world_run(w, ring_main, &a, &res);
    double secs = now() - t0;
    if (rc < 0 || res.status != PPV_RUN_DONE) {
        fprintf(stderr, "bench: ring of %d did not complete: %s\n", P, res.message);
        rc = -1;
    } else {
        printf("%-6s %6d %12lld %9.3f %14.0f\n", policy, P, (long long)res.steps, secs,
               2.0 * (double)res.steps / secs);
    }
    ppv_world_result_free(&res);
    ppv_world_free(w);
    return rc;
}

static int bench_run(const char *kind, int32_t p, int32_t m, int32_t v) {
    ppv_gen_params gp = {p, m, v};
    ppv_schedule *s = NULL;
    char err[512];
    if (ppv_generate(kind, &gp, &s, err, sizeof err) < 0) {
        fprintf(stderr, "bench: %s\n", err);
        return -1;
    }
    ppv_run_options o = ppv_run_defaults();
    o.policy.kind = PPV_POLICY_RANDOM;
    o.policy.seed = 1;
    ppv_run_report *rep = NULL;
    double t0 = now();
    int rc = ppv_run(s, &o, &rep, err, sizeof err);
    double secs = now() - t0;
    if (rc < 0 || rep->world.status != PPV_RUN_DONE) {
        fprintf(stderr, "bench: %s did not run: %s\n", kind, rc < 0 ? err : rep->world.message);
        rc = -1;
    } else {
        printf("%-17s %4d %5d %7d %9lld %9.3f %12.0f\n", kind, p, m, rep->nlayers,
               (long long)rep->world.steps, secs, (double)rep->world.steps / secs);
    }
    ppv_run_report_free(rep);
    ppv_schedule_free(s);
    return rc;
}

int main(int argc, char **argv) {
    int64_t messages = argc > 1 ? atoll(argv[1]) : 200000;
    if (messages < 1) {
        fprintf(stderr, "usage: ppv_bench_world [MESSAGES]\n");
        return 2;
    }
    printf("mock transport: token ring, eager sends, %lld messages in all\n", (long long)messages);
    printf("%-6s %6s %12s %9s %14s\n", "policy", "ranks", "steps", "seconds", "switches/s");
    static const char *policies[] = {"rr", "random", "pct"};
    static const int32_t sizes[] = {2, 8, 64};
    for (int q = 0; q < 3; q++)
        for (int k = 0; k < 3; k++)
            if (bench_switches(sizes[k], policies[q], messages / sizes[k]) < 0) return 2;
    printf("\nppv run: one training step, default model, random policy, rendezvous\n");
    printf("%-17s %4s %5s %7s %9s %9s %12s\n", "schedule", "p", "m", "layers", "steps", "seconds",
           "steps/s");
    if (bench_run("1f1b", 8, 64, 1) < 0 || bench_run("zbv", 8, 64, 2) < 0 ||
        bench_run("interleaved-1f1b", 16, 64, 2) < 0)
        return 2;
    return 0;
}
