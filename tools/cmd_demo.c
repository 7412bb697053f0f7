/* cmd_demo.c - `ppv demo`: the main job on the built-in model, end to
 * end: every generator checked under each send semantics, every kind run
 * on the engine (stash and recompute against the one-rank reference), the
 * PP inference pipeline on every mesh with its break-it matrix, and the
 * shipped golden files replayed bit for bit.
 */
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "ppv_golden.h"

/* The demo's second half: each kind run on the engine, stash and recompute,
 * against the one-rank reference. Returns the number of failures. */
static int demo_runs(const char *const *kinds) {
    enum { P = 4, M = 8, LAYERS = 8 };
    printf("\nppv demo: one training step of the built-in model (%d layers), every rank a\n"
           "coroutine on the mock transport (rendezvous, random policy, seed 1)\n", LAYERS);
    printf("%-17s %-10s %-10s %-10s %14s %14s\n", "schedule", "reference", "recompute",
           "memory", "peak[r0] stash", "recomputed");
    ppv_run_options o = ppv_run_defaults();
    o.policy.kind = PPV_POLICY_RANDOM;
    o.policy.seed = 1;
    o.model.layers = LAYERS;
    char err[512];
    float *ref = NULL;
    size_t nref = 0;
    double loss = 0;
    if (ppv_run_reference(&o.model, M, &ref, &nref, &loss, err, sizeof err) < 0) {
        printf("reference failed: %s\n", err);
        return 1;
    }
    uint64_t want = ppv_digest(ref, nref * sizeof *ref);
    free(ref);
    int failures = 0;
    for (int k = 0; kinds[k]; k++) {
        ppv_gen_params gp = {P, M, 0};
        ppv_schedule *s = NULL;
        ppv_recompute_verdict v;
        memset(&v, 0, sizeof v);
        if (ppv_generate(kinds[k], &gp, &s, err, sizeof err) < 0 ||
            ppv_verify_recompute(s, &o, &v, err, sizeof err) < 0 ||
            v.stash->world.status != PPV_RUN_DONE || v.recompute->world.status != PPV_RUN_DONE) {
            printf("%-17s run failed: %s\n", kinds[k],
                   v.stash && v.stash->world.status != PPV_RUN_DONE ? v.stash->world.message : err);
            failures++;
        } else {
            int same = v.stash->grad_digest == want;
            int mem = 1;
            for (int32_t r = 0; r < P; r++)
                mem &= v.stash->peak_bytes[r] == v.stash->predicted_bytes[r] &&
                       v.recompute->peak_bytes[r] == v.recompute->predicted_bytes[r];
            failures += !same + !v.diff.bitwise_equal + !mem;
            printf("%-17s %-10s %-10s %-10s %14lld %14lld\n", kinds[k], same ? "bitwise" : "DIFFERENT",
                   v.diff.bitwise_equal ? "bitwise" : "DIFFERENT", mem ? "predicted" : "MISPREDICTED",
                   (long long)v.stash->peak_bytes[0], (long long)v.recompute->peak_bytes[0]);
        }
        ppv_recompute_verdict_free(&v);
        ppv_schedule_free(s);
    }
    printf("%s\n", failures ? "demo: PROBLEM"
                             : "demo: every schedule's gradients equal the reference bit for bit");
    return failures;
}

/* Where the shipped golden files are: beside an installed ppv
 * (PPV_GOLDEN_DIR_INSTALLED, relative to the executable's folder), else the
 * source tree's golden/ that this build came from (likewise relative). */
static void golden_dir(char *buf, size_t n) {
    struct stat st;
    if (ppv_path_beside_program(PPV_GOLDEN_DIR_INSTALLED, buf, n) == 0 && stat(buf, &st) == 0 &&
        S_ISDIR(st.st_mode))
        return;
    ppv_path_beside_program(PPV_GOLDEN_DIR, buf, n);
}

/* The demo's last part: the shipped golden files replay bit for bit (an
 * inference recording on its recorded mesh and on one rank). */
static int demo_goldens(void) {
    static const char *const files[] = {"train_1f1b_p4_m8.h5",
                                        "train_zbv_p2_m4_recompute.h5",
                                        "infer_pp0_stash_cut.h5",
                                        "infer_pp0_recompute_cut.h5",
                                        "infer_pp1_stash_cut.h5",
                                        "infer_pp1_mesh4_recompute_cut.h5"};
    char dir[8192];
    golden_dir(dir, sizeof dir);
    printf("\nppv demo: shipped golden files (%s), rebuilt from the file alone and re-run\n", dir);
    int failures = 0;
    for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
        char path[8400], err[1024];
        snprintf(path, sizeof path, "%s/%s", dir, files[k]);
        ppv_diff_options o = ppv_diff_defaults();
        if (strncmp(files[k], "infer_", 6) == 0) {
            int32_t recorded = 0;
            for (int32_t mesh = 0; mesh <= 1 && recorded != 1; mesh++) {
                ppv_inference_replay_result res;
                if (ppv_inference_replay(path, &o, mesh, 0, &res, err, sizeof err) < 0) {
                    printf("%-34s ERROR: %s\n", files[k], err);
                    failures++;
                    break;
                }
                uint64_t nd = differences(res.diff);
                printf("%-34s %3lld calls, mesh %d (recorded %d) %6llu values: %s\n", files[k],
                       (long long)res.calls, res.mesh, res.setup.mesh,
                       (unsigned long long)res.diff->elements, nd ? "DIFFERENT" : "bitwise equal");
                failures += nd != 0;
                recorded = res.setup.mesh;
                ppv_inference_replay_free(&res);
            }
            continue;
        }
        ppv_replay_result res;
        if (ppv_golden_replay(path, &o, 0, &res, err, sizeof err) < 0) {
            printf("%-34s ERROR: %s\n", files[k], err);
            failures++;
            continue;
        }
        uint64_t nd = differences(res.diff);
        printf("%-34s %3d microbatches %3d layers %8llu values: %s\n", files[k], res.microbatches,
               res.layers, (unsigned long long)res.diff->elements, nd ? "DIFFERENT" : "bitwise equal");
        failures += nd != 0;
        ppv_replay_result_free(&res);
    }
    printf("%s\n", failures ? "demo: PROBLEM" : "demo: every golden file replays bit for bit");
    return failures;
}

/* The PP inference pipeline: the same bits on every mesh size, and every
 * fault of the break-it matrix caught where it must be. */
static int demo_pp(void) {
    int failures = 0;
    printf("\nppv demo: PP inference (ppv pp): stage 0 and a mesh on the mock transport, 8 chunks "
           "of 4 steps,\nhard cut before chunk 4, random policy, seed 1\n");
    printf("%-5s %-10s %-17s %-28s %s\n", "mesh", "kv", "output digest", "generator calls/chunk",
           "result");
    uint64_t want[2] = {0, 0};
    for (int kv = 0; kv < 2; kv++)
        for (int32_t mesh = 1; mesh <= 4; mesh *= 2) {
            ppv_pp_options o = ppv_pp_defaults();
            o.mesh = mesh;
            o.kv_recompute = kv;
            o.ncuts = 1;
            o.cuts[0] = 4;
            o.policy.kind = PPV_POLICY_RANDOM;
            o.policy.seed = 1;
            ppv_pp_report *r = NULL;
            char err[512], calls[64] = "";
            if (ppv_pp_run(&o, &r, err, sizeof err) < 0) {
                printf("%-5d ERROR: %s\n", mesh, err);
                failures++;
                continue;
            }
            for (int64_t k = 0, at = 0; k < r->chunks_emitted && at < 60; k++)
                at += snprintf(calls + at, sizeof calls - (size_t)at, "%s%lld", k ? "," : "",
                               (long long)r->observed_calls[k]);
            if (mesh == 1) want[kv] = r->output_digest;
            int good = r->ok && r->output_digest == want[kv];
            printf("%-5d %-10s %016llx  %-28s %s\n", mesh, kv ? "recompute" : "stash",
                   (unsigned long long)r->output_digest, calls,
                   good ? "ok" : r->ok ? "DIFFERENT" : r->message);
            failures += !good;
            ppv_pp_report_free(r);
        }
    { /* determinism checked, not assumed (ppv pp --repeat 3) */
        ppv_pp_options o = ppv_pp_defaults();
        ppv_pp_report *r = NULL;
        repeat_verdict v;
        char err[512];
        if (repeat_pp(&o, 3, &r, &v, err, sizeof err) < 0) {
            printf("repeat: ERROR: %s\n", err);
            failures++;
        } else {
            int good = r->ok && v.same && v.runs == 3;
            printf("\nrepeat (mesh 2, 8 chunks, 3 runs in fresh generator state): %s\n",
                   good ? "every result's output digest the same" : v.same ? r->message : v.why);
            failures += !good;
        }
        ppv_pp_report_free(r);
    }
    printf("\nbreak-it matrix (mesh 2, 4 chunks): each fault against what it must produce\n");
    for (int i = 1; i < PPV_INJECT_COUNT; i++) {
        ppv_pp_options o = ppv_pp_defaults();
        o.chunks = 4;
        o.inject = (ppv_pp_inject)i;
        if (i == PPV_INJECT_OM09) {
            o.ncuts = 1;
            o.cuts[0] = 2;
        }
        ppv_pp_report *r = NULL;
        char err[512];
        if (ppv_pp_run(&o, &r, err, sizeof err) < 0) {
            printf("%-21s ERROR: %s\n", ppv_pp_inject_token(i), err);
            failures++;
            continue;
        }
        int good = ppv_pp_as_injected(&o, r);
        char got[96];
        if (r->ok && (r->reordered || r->retried))
            snprintf(got, sizeof got, "ok, %lld reordered and %lld retried",
                     (long long)r->reordered, (long long)r->retried);
        else if (r->ok)
            snprintf(got, sizeof got, "ok, %lld stale and %lld duplicate dropped",
                     (long long)r->dropped_stale, (long long)r->dropped_duplicate);
        else
            snprintf(got, sizeof got, "%s caught by %s", ppv_failure_id(r->failure),
                     ppv_pp_point_name(r->caught_by));
        printf("%-21s %-46s %s\n", ppv_pp_inject_token(i), got, good ? "as it must" : "WRONG");
        failures += !good;
        ppv_pp_report_free(r);
    }
    printf("%s\n", failures ? "demo: PROBLEM"
                            : "demo: the same bits on every mesh; every fault caught where it "
                              "must be");
    return failures;
}

/* ppv demo: takes no operand. */
int cmd_demo(int argc, char **argv) {
    static const char *const sems[] = {"rendezvous", "eager", "eager:4M"};
    int rc = no_operands(argc, argv);
    if (rc >= 0) return rc;
    const char *const *kinds = ppv_generator_names();
    int failures = 0;
    printf("ppv demo: every generator, lowered with send/recv, checked under each semantics\n");
    printf("%-17s %3s %3s %6s  %-9s %-9s %-9s %9s %8s\n", "schedule", "p", "m", "stages",
           sems[0], sems[1], sems[2], "peak[r0]", "bubble");
    for (int k = 0; kinds[k]; k++) {
        ppv_gen_params gp = {4, 8, 0};
        char err[512];
        ppv_schedule *s = NULL, *low = NULL;
        ppv_check_options o = ppv_check_defaults();
        if (ppv_generate(kinds[k], &gp, &s, err, sizeof err) < 0 ||
            ppv_schedule_lower(s, &o.costs, 0, &low, err, sizeof err) != 0) {
            printf("%-17s generation failed: %s\n", kinds[k], err);
            failures++;
            ppv_schedule_free(s);
            continue;
        }
        printf("%-17s %3d %3d %6d ", kinds[k], s->nranks, s->nmb, s->nstages);
        double peak = 0, bubble = 0;
        for (int j = 0; j < 3; j++) {
            ppv_check_report *rep = NULL;
            ppv_semantics_parse(sems[j], &o.sem);
            if (ppv_schedule_check(low, &o, &rep, err, sizeof err) < 0 || !rep->ok) {
                printf(" %-9s", "PROBLEM");
                failures++;
            } else {
                printf(" %-9s", "ok");
                peak = rep->peak_activation[0];
                bubble = rep->bubble_ratio;
            }
            ppv_check_report_free(rep);
        }
        printf(" %9g %8.4f\n", peak, bubble);
        ppv_schedule_free(s);
        ppv_schedule_free(low);
    }
    printf("%s\n", failures ? "demo: PROBLEM" : "demo: all schedules deadlock-free");
    failures += demo_runs(kinds);
    failures += demo_pp();
    failures += demo_goldens();
    return failures ? PPV_EXIT_PROBLEM : PPV_EXIT_OK;
}
