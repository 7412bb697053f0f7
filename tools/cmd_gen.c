/* cmd_gen.c - `ppv gen`: writes a schedule of a named kind (PyTorch's
 * CSV or ppv's native format, compute only or lowered with its messages),
 * a kind tuned to --costs, or the best schedule the search finds (auto).
 * Sizes whose schedule would not fit in memory are refused first.
 */
#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

enum { GEN_OPTIONS(CLI_OPTION_ID) };
static const cli_option gen_options[] = {GEN_OPTIONS(CLI_OPTION)};

static int gen_run(int argc, char **argv, ppv_gen_params gp, ppv_gen_auto_params *app, int comms,
                   int native, int costs_given, int auto_only, int search_only,
                   const char *outpath, long long limit, const ppv_model_spec *model,
                   const ppv_stage_costs *stages, int model_costs);

static int write_schedule(const ppv_schedule *s, int comms, int native, const char *outpath,
                          const ppv_costs *costs, int pytorch);

/* gen optimal --model: each stage's activation (and with --model-costs
 * its times) from the model's split over the shape's stages, and with
 * --mem-cap each rank's cap on its activations: the bytes its weights,
 * gradients and optimizer state leave (as check --model counts them, on
 * the shape's placement). 0, or an exit code after the message. */
static int optimal_model(const ppv_optimal_params *op, const ppv_model_spec *model,
                         int model_costs, double mem_cap_bytes, ppv_stage_costs *stages,
                         double *rank_caps) {
    int32_t S = op->shape_v ? 2 * op->ranks : op->ranks;
    ppv_mem_model mm = {0, 0, 0};
    char err[1024];
    if (ppv_stage_costs_from_model(model, S, op->costs.comm, &mm, stages, err, sizeof err) < 0) {
        fprintf(stderr, "ppv gen: %s\n", err);
        return PPV_EXIT_BAD_INPUT;
    }
    for (int32_t st = 0; st < S && !model_costs; st++) /* the times are --costs' */
        stages->s[st].f = op->costs.f, stages->s[st].b = op->costs.b,
        stages->s[st].w = op->costs.w;
    snprintf(stages->source, sizeof stages->source, "the model");
    if (mem_cap_bytes <= 0) return 0;
    /* the shape's placement, from a kind that has it (the rest of its
     * schedule does not matter to the weights) */
    ppv_gen_params gp = {op->ranks, op->microbatches, op->shape_v ? 2 : 1};
    ppv_schedule *placed = NULL;
    ppv_memory_bytes mb;
    if (ppv_generate(op->shape_v ? "zbv" : "1f1b", &gp, &placed, err, sizeof err) < 0 ||
        ppv_schedule_memory_bytes(placed, model, &mb, err, sizeof err) < 0) {
        ppv_schedule_free(placed);
        fprintf(stderr, "ppv gen: %s\n", err);
        return PPV_EXIT_BAD_INPUT;
    }
    ppv_schedule_free(placed);
    int rc = 0;
    for (int32_t r = 0; r < op->ranks; r++) {
        double w, g, o;
        ppv_memory_split(model, mb.params[r], &w, &g, &o);
        rank_caps[r] = mem_cap_bytes - (w + g + o);
        /* every stage of the rank runs an F, and holds its activation */
        int32_t st = r, other = op->shape_v ? 2 * op->ranks - 1 - r : r;
        if (stages->s[other].act > stages->s[st].act) st = other;
        if (rc) continue;
        if (rank_caps[r] < 0) {
            fprintf(stderr, "ppv gen: optimal: rank %d's weights, gradients and optimizer "
                    "state alone need %.0f bytes, more than --mem-cap %.0f\n",
                    (int)r, w + g + o, mem_cap_bytes);
            rc = PPV_EXIT_BAD_INPUT;
        } else if (rank_caps[r] < stages->s[st].act) {
            fprintf(stderr, "ppv gen: optimal: --mem-cap %.0f leaves rank %d %.0f bytes beside "
                    "its weights, gradients and optimizer state (%.0f), less than one "
                    "microbatch's activation of stage %d (%.0f bytes): no schedule fits\n",
                    mem_cap_bytes, (int)r, rank_caps[r], w + g + o, (int)st,
                    stages->s[st].act);
            rc = PPV_EXIT_BAD_INPUT;
        }
    }
    ppv_memory_bytes_free(&mb);
    return rc;
}

/* ppv gen optimal: the proven optimum of small sizes (gen_optimal.c). */
static int gen_optimal(ppv_gen_params gp, const ppv_gen_auto_params *ap, int comms, int native,
                       const char *outpath, const ppv_model_spec *model, int model_costs,
                       const ppv_stage_costs *stages, int shape_v, long long limit) {
    if (!gp.ranks || !gp.microbatches) return usage_error("needs -p RANKS and -m MICROBATCHES%s", "");
    /* the schedule's actions, as for any kind (the solver's own model is
     * bounded by its variable count) */
    double actions = (double)gp.ranks * 2 * (double)gp.microbatches * 3.0 * (comms ? 3.0 : 1.0);
    char what[128];
    snprintf(what, sizeof what, "a schedule of up to %.0f actions", actions);
    int big = refuse_if_too_big(what, actions * BYTES_PER_ACTION, limit);
    if (big >= 0) return big;
    if (gp.stages_per_rank)
        return usage_error("'optimal' places the stages by --kind-shape; it takes no -v%s", "");
    if ((model_costs || ap->mem_cap_bytes > 0) && !model)
        return usage_error("--model-costs and --mem-cap need --model: the costs and bytes come "
                           "from a model%s", "");
    if (model && stages)
        return usage_error("--model gives each stage's activation, and --cost-file too: the file "
                           "alone, or --model with --model-costs for its times%s", "");
    if (model && ap->cap > 0)
        return usage_error("--cap counts activations; with --model the cap is in bytes: "
                           "--mem-cap BYTES%s", "");
    if (model && !model_costs && ap->mem_cap_bytes <= 0)
        return usage_error("--model gives 'optimal' each rank's bytes for --mem-cap, and each "
                           "stage's times with --model-costs: give one of them%s", "");
    ppv_optimal_params op = {gp.ranks, gp.microbatches, shape_v > 0, ap->costs, stages, ap->cap,
                             ap->time_limit, NULL};
    ppv_stage_costs derived = {0, NULL, ""};
    double *rank_caps = NULL;
    if (model) {
        rank_caps = ap->mem_cap_bytes > 0 ? calloc((size_t)gp.ranks, sizeof *rank_caps) : NULL;
        if (ap->mem_cap_bytes > 0 && !rank_caps) {
            fprintf(stderr, "ppv gen: out of memory\n");
            return PPV_EXIT_BAD_INPUT;
        }
        int mrc = optimal_model(&op, model, model_costs, ap->mem_cap_bytes, &derived, rank_caps);
        if (mrc) {
            ppv_stage_costs_free(&derived);
            free(rank_caps);
            return mrc;
        }
        op.stages = &derived;
        op.rank_caps = rank_caps;
    }
    ppv_optimal_report rep;
    ppv_schedule *s = NULL;
    char err[1024];
    int grc = ppv_generate_optimal(&op, &s, &rep, err, sizeof err);
    ppv_stage_costs_free(&derived);
    free(rank_caps);
    if (grc < 0) {
        fprintf(stderr, "ppv gen: %s\n", err);
        return PPV_EXIT_BAD_INPUT;
    }
    char cap[96] = "";
    if (ap->cap > 0) snprintf(cap, sizeof cap, ", every rank within %g activations", ap->cap);
    if (model && ap->mem_cap_bytes > 0)
        snprintf(cap, sizeof cap, ", every rank within --mem-cap %.0f bytes", ap->mem_cap_bytes);
    char kind[160] = "none within the cap";
    if (isfinite(rep.horizon) && isfinite(rep.searched) && rep.moves > 0)
        snprintf(kind, sizeof kind, "%g, %g after %lld moves of the local search", rep.horizon,
                 rep.searched, (long long)rep.moves);
    else if (isfinite(rep.horizon))
        snprintf(kind, sizeof kind, "%g", rep.horizon);
    else if (isfinite(rep.searched))
        snprintf(kind, sizeof kind, "none within the cap (one microbatch at a time, searched: %g "
                 "after %lld moves)", rep.searched, (long long)rep.moves);
    char how[160];
    if (rep.by_bound)
        snprintf(how, sizeof how, "the ranks' load bound (%g: a rank's earliest start and all its "
                 "work) reached, no solver needed", rep.lower_bound);
    else
        snprintf(how, sizeof how, "%lld binaries, %lld constraints", (long long)rep.variables,
                 (long long)rep.constraints);
    fprintf(stderr,
            "ppv gen: optimal: makespan %g, %s%s (%s shape, each stage's microbatches in "
            "order); the best named kind: %s; %s, %.2f s\n",
            rep.makespan,
            rep.proven ? "proven optimal" : "best found, not proven (--time-limit cut the solver "
                                            "short: the result depends on this machine's speed)",
            cap, shape_v > 0 ? "V" : "1F1B", kind, how, rep.seconds);
    int rc = write_schedule(s, comms, native, outpath, &ap->costs, 0);
    ppv_schedule_free(s);
    return rc;
}

/* ppv gen KIND -p RANKS -m MICROBATCHES [options]. */
int cmd_gen(int argc, char **argv) {
    ppv_gen_params gp = {0, 0, 0};
    int comms = 0, native = 0, costs_given = 0, auto_only = 0, search_only = 0, budget_given = 0;
    const char *outpath = NULL;
    long long limit = physical_memory();
    ppv_gen_auto_params ap = {0, 0, ppv_check_defaults().costs, 0, 2000, 60, NULL, 0, 0, NULL, 0};
    ppv_model_spec spec;
    ppv_stage_costs stages = {0, NULL, ""};
    const char *model = NULL, *cost_path = NULL;
    int c, k, rc, model_costs = 0, shape_v = -1;
    cli_parser p;
    CLI_BEGIN(&p, argv, gen_options, 0);
    while ((c = cli_next(&p, argc, argv)) != CLI_END) {
        switch (c) {
        case OPT_RANKS:
            gp.ranks = (int32_t)p.num;
            break;
        case OPT_MICROBATCHES:
            gp.microbatches = (int32_t)p.num;
            break;
        case OPT_STAGES_PER_RANK:
            gp.stages_per_rank = (int32_t)p.num;
            break;
        case OPT_COMMS: comms = 1; break;
        case OPT_OUTPUT: outpath = optarg; break;
        case OPT_FORMAT:
            if (strcmp(optarg, "csv") == 0) native = 0;
            else if (strcmp(optarg, "native") == 0) native = 1;
            else return usage_error("--format is csv or native, not '%s'", optarg);
            break;
        case OPT_MAX_MEMORY:
            limit = p.num;
            break;
        case OPT_COSTS:
            if (costs_option(&p, optarg, &ap.costs)) return PPV_EXIT_BAD_INPUT;
            costs_given = 1;
            break;
        case OPT_CAP:
            ap.cap = (double)p.num;
            auto_only = 1;
            break;
        case OPT_BUDGET:
            ap.budget = p.num;
            search_only = budget_given = 1;
            break;
        case OPT_TIME_LIMIT:
            ap.time_limit = p.real;
            search_only = 1;
            break;
        case OPT_MODEL:
            model = optarg;
            if ((k = model_spec(optarg, &spec))) {
                ppv_stage_costs_free(&stages);
                return k;
            }
            break;
        case OPT_MEM_CAP:
            ap.mem_cap_bytes = (double)p.num;
            auto_only = 1;
            break;
        case OPT_COST_FILE:
            ppv_stage_costs_free(&stages);
            if ((k = cost_file(optarg, &stages))) return k;
            cost_path = optarg;
            break;
        case OPT_MODEL_COSTS:
            model_costs = 1;
            break;
        case OPT_KIND_SHAPE:
            if (strcmp(optarg, "1f1b") == 0) shape_v = 0;
            else if (strcmp(optarg, "v") == 0) shape_v = 1;
            else {
                ppv_stage_costs_free(&stages);
                return usage_error("--kind-shape is 1f1b or v, not '%s'", optarg);
            }
            break;
        case CLI_HELP:
            ppv_stage_costs_free(&stages);
            return print_help();
        default:
            ppv_stage_costs_free(&stages);
            return bad_option();
        }
    }
    if (optind == argc - 1 && strcmp(argv[optind], "optimal") == 0)
        rc = budget_given ? usage_error("'optimal' is bounded by --time-limit, not --budget%s", "")
             : gen_optimal(gp, &ap, comms, native, outpath, model ? &spec : NULL, model_costs,
                           cost_path ? &stages : NULL, shape_v, limit);
    else if (shape_v >= 0)
        rc = usage_error("--kind-shape is for 'optimal'%s", "");
    else
        rc = gen_run(argc, argv, gp, &ap, comms, native, costs_given, auto_only, search_only,
                     outpath, limit, model ? &spec : NULL, cost_path ? &stages : NULL,
                     model_costs);
    ppv_stage_costs_free(&stages);
    return rc;
}

/* The rest of ppv gen, once its options are read. */
static int gen_run(int argc, char **argv, ppv_gen_params gp, ppv_gen_auto_params *app, int comms,
                   int native, int costs_given, int auto_only, int search_only,
                   const char *outpath, long long limit, const ppv_model_spec *model,
                   const ppv_stage_costs *stages, int model_costs) {
    ppv_gen_auto_params ap = *app;
    int rc;
    if (optind != argc - 1) return usage_error("needs one schedule KIND%s", "");
    if (!gp.ranks || !gp.microbatches) return usage_error("needs -p RANKS and -m MICROBATCHES%s", "");
    int is_auto = strcmp(argv[optind], "auto") == 0;
    if (auto_only && !is_auto)
        return usage_error("--cap and --mem-cap are for 'auto', not %s", argv[optind]);
    if (model && !model_costs && !is_auto)
        return usage_error("--model gives a named kind its costs only with --model-costs (a "
                           "rank's bytes: ppv check --model); %s has neither cap nor search by "
                           "bytes",
                           argv[optind]);
    if (model_costs && !model)
        return usage_error("--model-costs needs --model: the costs come from a model%s", "");
    if (model_costs && stages)
        return usage_error("--model-costs and --cost-file both give each stage's costs: one or "
                           "the other%s", "");
    if ((stages || model_costs) && !is_auto) costs_given = 1; /* tuned to each stage's costs */
    if (search_only && !is_auto && !costs_given)
        return usage_error("--budget and --time-limit bound the search of 'auto' or of a kind "
                           "tuned with --costs; %s has neither",
                           argv[optind]);
    if (ap.mem_cap_bytes > 0 && !model)
        return usage_error("--mem-cap needs --model: bytes come from a model%s", "");
    if (is_auto && gp.stages_per_rank)
        return usage_error("'auto' chooses the stages a rank itself; it takes no -v%s", "");
    /* at most F, I and W per stage and microbatch, and a send and a receive
     * beside each once lowered */
    double actions = (double)gp.ranks * (gp.stages_per_rank ? gp.stages_per_rank : 2) *
                     (double)gp.microbatches * 3.0 * (comms ? 3.0 : 1.0);
    char what[128];
    snprintf(what, sizeof what, "a schedule of up to %.0f actions", actions);
    rc = refuse_if_too_big(what, actions * BYTES_PER_ACTION, limit);
    if (rc >= 0) return rc;
    char err[1200];
    ppv_schedule *s = NULL;
    ppv_stage_costs derived = {0, NULL, ""};
    if (model_costs && !is_auto) { /* the model split over the kind's own stages */
        ppv_schedule *own = NULL;
        ppv_mem_model mm = {0, 0, 0};
        rc = ppv_generate(argv[optind], &gp, &own, err, sizeof err) < 0 ||
                     ppv_stage_costs_from_model(model, own->nstages, ap.costs.comm, &mm,
                                                &derived, err, sizeof err) < 0
                 ? -1
                 : 0;
        ppv_schedule_free(own);
        if (rc < 0) {
            fprintf(stderr, "ppv gen: %s\n", err);
            return PPV_EXIT_BAD_INPUT;
        }
        stages = &derived;
    }
    if (is_auto) {
        ap.ranks = gp.ranks, ap.microbatches = gp.microbatches;
        ap.model = model;
        ap.stages = stages;
        ap.model_costs = model_costs;
        ppv_gen_auto_report ar;
        if (ppv_generate_auto(&ap, &s, &ar, err, sizeof err) < 0) {
            fprintf(stderr, "ppv gen: auto: %s\n", err);
            return PPV_EXIT_BAD_INPUT;
        }
        fprintf(stderr,
                "ppv gen: auto: best of %lld candidates: %s (makespan %g); %lld improving swaps "
                "in %lld checks from %d starts%s: makespan %g, bubble ratio %.6f, peak activation "
                "%g\n",
                (long long)ar.candidates, ar.start, ar.start_makespan, (long long)ar.improvements,
                (long long)ar.evaluated, (int)ar.starts,
                ar.converged ? " (no swap left improves it)"
                : ar.stopped_by_time ? " (stopped by --time-limit: the result depends on this "
                                       "machine's speed)"
                                     : " (--budget spent)",
                ar.makespan, ar.bubble_ratio, ar.peak);
        if (model)
            fprintf(stderr, "ppv gen: auto: largest rank's memory %.0f bytes (%.1f GiB)%s\n",
                    ar.peak_bytes, ar.peak_bytes / (1024.0 * 1024 * 1024),
                    ap.mem_cap_bytes > 0 ? ", within --mem-cap" : "");
    } else if (costs_given) {
        ppv_gen_auto_report ar;
        char tuned_to[200];
        if (stages && model_costs)
            snprintf(tuned_to, sizeof tuned_to, "the %d stages' costs of the model's split",
                     (int)stages->n);
        else if (stages)
            snprintf(tuned_to, sizeof tuned_to, "the %d stages' costs of %s", (int)stages->n,
                     stages->source);
        else
            snprintf(tuned_to, sizeof tuned_to, "--costs %g,%g,%g,%g", ap.costs.f, ap.costs.b,
                     ap.costs.w, ap.costs.comm);
        rc = ppv_generate_tuned(argv[optind], &gp, &ap.costs, stages, ap.budget, ap.time_limit,
                                &s, &ar, err, sizeof err);
        ppv_stage_costs_free(&derived);
        if (rc < 0) {
            fprintf(stderr, "ppv gen: %s\n", err);
            return PPV_EXIT_BAD_INPUT;
        }
        fprintf(stderr,
                "ppv gen: %s tuned to %s: best of %lld candidate%s: %s "
                "(makespan %g); %lld improving swaps in %lld checks from %d start%s%s: makespan "
                "%g, bubble ratio %.6f, peak activation %g (the kind's own: at most %g)\n",
                argv[optind], tuned_to,
                (long long)ar.candidates, ar.candidates == 1 ? "" : "s", ar.start,
                ar.start_makespan, (long long)ar.improvements, (long long)ar.evaluated,
                (int)ar.starts, ar.starts == 1 ? "" : "s",
                ar.converged         ? " (no swap left improves it)"
                : ar.stopped_by_time ? " (stopped by --time-limit: the result depends on this "
                                       "machine's speed)"
                                     : " (--budget spent)",
                ar.makespan, ar.bubble_ratio, ar.peak, ar.cap);
    } else if (ppv_generate(argv[optind], &gp, &s, err, sizeof err) < 0) {
        fprintf(stderr, "ppv gen: %s\n", err);
        return PPV_EXIT_BAD_INPUT;
    }
    /* a PyTorch class's own order is lowered as PyTorch lowers it, so the
     * file is the one PyTorch would run (test_gen: it completes under
     * rendezvous sends for every size tried); ppv's lowering otherwise */
    rc = write_schedule(s, comms, native, outpath, &ap.costs,
                        strncmp(argv[optind], "pytorch-", 8) == 0 && !costs_given);
    ppv_schedule_free(s);
    return rc;
}

/* Writes s (lowered with its messages when comms) to outpath or standard
 * output; an exit code. */
static int write_schedule(const ppv_schedule *s, int comms, int native, const char *outpath,
                          const ppv_costs *costs, int pytorch) {
    ppv_schedule *low = NULL;
    char err[1200];
    int rc = PPV_EXIT_OK;
    if (comms) {
        int lrc = pytorch ? ppv_schedule_lower_pytorch(s, 0, &low, err, sizeof err)
                          : ppv_schedule_lower(s, costs, 0, &low, err, sizeof err);
        if (lrc != 0) {
            fprintf(stderr, "ppv gen: lowering %s failed: %s\n", s->name,
                    lrc == 1 && !pytorch ? "the compute order has a dependency cycle" : err);
            return PPV_EXIT_PROBLEM;
        }
    }
    const ppv_schedule *w = low ? low : s;
    atomic_file af;
    FILE *f = stdout;
    if (outpath) {
        if (atomic_open(&af, outpath) < 0) {
            fprintf(stderr, "ppv gen: cannot write %s: %s\n", outpath, af.why);
            rc = PPV_EXIT_BAD_INPUT;
            goto done;
        }
        f = af.f;
    }
    int wrc = native ? ppv_schedule_write_native(w, f) : ppv_schedule_write_csv(w, f, err, sizeof err);
    if (!outpath && ferror(stdout)) wrc = 0; /* main reports a failed standard output */
    if (wrc < 0 && native)
        snprintf(err, sizeof err, "cannot write %s: %s", outpath, strerror(errno));
    if (outpath) {
        if (wrc < 0) atomic_abort(&af);
        else if (atomic_commit(&af) < 0)
            wrc = -1, snprintf(err, sizeof err, "cannot write %s: %s", outpath, af.why);
    }
    if (wrc < 0) {
        fprintf(stderr, "ppv gen: %s\n", err);
        rc = PPV_EXIT_BAD_INPUT;
    }
done:
    ppv_schedule_free(low);
    return rc;
}
