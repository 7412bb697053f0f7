/* bench_optimal.c - how far each named kind is from the proven optimum,
 * and what the proof costs: the table of docs/schedules.md ("How far from
 * the best"). For p in {2, 3, 4} and m in {4, 8}, at unit costs (F 1, B 2,
 * W 1), at the zero-bubble authors' F 2, I 2, W 1, and with an uneven
 * last stage (its F, I and W twice the others', as an output layer and
 * loss make it), it prints each one-stage-a-rank kind's makespan, peak and
 * bubble, the optimum within the kind's own peak and within 1F1B's, each
 * proven or not, the gap, and the solver's seconds; ZB-V's beside the V
 * shape's optimum (two stages a rank, each F, I and W at the costs, each
 * stage's activation half a one-stage-a-rank stage's); and gen auto's
 * choice beside the optimum of its own shape. A benchmark reports
 * figures; it never fails on them (exit 2 when the solver cannot run).
 *
 * usage: ppv_bench_optimal [TIME_LIMIT_S]   (default 60 a proof)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ppv_engine.h"

/* the one-stage-a-rank kinds, and ZB-V (two stages a rank, in a V: its
 * optimum is the V shape's) */
static const char *const kinds[] = {"1f1b", "zb-h1", "zb-h2", "gpipe", "zbv"};
enum { NKINDS = sizeof kinds / sizeof kinds[0] };

static int checked(const ppv_schedule *s, const ppv_stage_costs *sc, const ppv_costs *c,
                   double *makespan, double *peak, double *bubble) {
    ppv_check_options o = ppv_check_defaults();
    o.costs = *c;
    o.stages = sc;
    ppv_check_report *r = NULL;
    char err[512];
    if (ppv_schedule_check(s, &o, &r, err, sizeof err) < 0 || !r->ok || !r->simulated) {
        ppv_check_report_free(r);
        return -1;
    }
    *makespan = r->makespan, *bubble = r->bubble_ratio, *peak = 0;
    for (int32_t k = 0; k < r->nranks; k++)
        if (r->peak_activation[k] > *peak) *peak = r->peak_activation[k];
    ppv_check_report_free(r);
    return 0;
}

int main(int argc, char **argv) {
    double limit = argc > 1 ? atof(argv[1]) : 60;
    static const struct {
        const char *name;
        ppv_costs c;
        int uneven;
    } settings[] = {{"F1 B2 W1", {1, 2, 1, 0}, 0},
                    {"F2 I2 W1", {2, 3, 1, 0}, 0},
                    {"uneven (last stage x2)", {1, 2, 1, 0}, 1}};
    printf("| costs | p | m | kind | makespan | peak | bubble | optimum at its peak | gap | "
           "optimum at 1F1B's peak | solver s |\n|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (size_t c = 0; c < 3; c++)
        for (int32_t p = 2; p <= 4; p++)
            for (int32_t m = 4; m <= 8; m += 4) {
                /* uneven: the last stage twice the others (for the V, its
                 * last of 2p, on rank 0, each stage half a rank's layers) */
                ppv_stage_costs sc = {p, calloc((size_t)p, sizeof(ppv_stage_cost)), "uneven"};
                ppv_stage_costs sv = {2 * p, calloc((size_t)(2 * p), sizeof(ppv_stage_cost)),
                                      "uneven"};
                if (!sc.s || !sv.s) return 2;
                for (int32_t k = 0; k < p; k++) {
                    double x = k == p - 1 ? 2 : 1;
                    sc.s[k] = (ppv_stage_cost){x, 2 * x, x, 0, 1, 0, 0};
                }
                for (int32_t k = 0; k < 2 * p; k++) {
                    double x = k == 2 * p - 1 ? 2 : 1;
                    sv.s[k] = (ppv_stage_cost){x, 2 * x, x, 0, 0.5, 0, 0};
                }
                double f1b_peak = 0, ms, pk, bb;
                for (size_t k = 0; k <= NKINDS; k++) { /* the kinds, then gen auto */
                    int is_auto = k == NKINDS;
                    const char *name = is_auto ? "gen auto" : kinds[k];
                    ppv_schedule *s = NULL;
                    char err[512];
                    int rc;
                    if (is_auto) { /* each action's costs, as check takes them */
                        ppv_gen_auto_params ap = {p, m, settings[c].c, 0, 2000, limit, NULL, 0, 1,
                                                  settings[c].uneven ? &sc : NULL, 0};
                        ppv_gen_auto_report ar;
                        rc = ppv_generate_auto(&ap, &s, &ar, err, sizeof err);
                    } else {
                        ppv_gen_params gp = {p, m, strcmp(name, "zbv") == 0 ? 2 : 1};
                        rc = ppv_generate(name, &gp, &s, err, sizeof err);
                    }
                    /* its optimum's shape: one stage a rank, or a V (stage 2p-1 on rank 0);
                     * another placement (interleaved) has none here */
                    int v = rc == 0 && s->nstages == 2 * p && s->stage_rank[2 * p - 1] == 0;
                    int shaped = rc == 0 && (v || s->nstages == p);
                    const ppv_stage_costs *use = !settings[c].uneven ? NULL : v ? &sv : &sc;
                    if (rc < 0 || checked(s, use, &settings[c].c, &ms, &pk, &bb) < 0) {
                        if (rc < 0) fprintf(stderr, "bench: %s: %s\n", name, err);
                        ppv_schedule_free(s);
                        continue;
                    }
                    if (k == 0) f1b_peak = pk;
                    ppv_schedule_free(s);
                    if (!shaped) {
                        printf("| %s | %d | %d | %s | %g | %g | %.3f | - | - | - | - |\n",
                               settings[c].name, p, m, name, ms, pk, bb);
                        continue;
                    }
                    double opt[2] = {0, 0}, secs = 0;
                    int proven[2] = {0, 0};
                    for (int w = 0; w < 2; w++) {
                        ppv_optimal_params op = {p, m, v, settings[c].c, use,
                                                 w == 0 ? pk : f1b_peak, limit, NULL};
                        ppv_optimal_report rep;
                        ppv_schedule *o = NULL;
                        if (ppv_generate_optimal(&op, &o, &rep, err, sizeof err) < 0) {
                            fprintf(stderr, "bench: %s\n", err);
                            return 2;
                        }
                        opt[w] = rep.makespan, proven[w] = rep.proven, secs += rep.seconds;
                        ppv_schedule_free(o);
                    }
                    printf("| %s | %d | %d | %s | %g | %g | %.3f | %g%s | %.1f%% | %g%s | %.2f |\n",
                           settings[c].name, p, m, name, ms, pk, bb, opt[0],
                           proven[0] ? "" : " (not proven)", 100 * (ms - opt[0]) / opt[0], opt[1],
                           proven[1] ? "" : " (not proven)", secs);
                    fflush(stdout);
                }
                ppv_stage_costs_free(&sc);
                ppv_stage_costs_free(&sv);
            }
    return 0;
}
