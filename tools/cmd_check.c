/* cmd_check.c - `ppv check` and `ppv show`: a schedule loaded (PyTorch's
 * CSV in either dialect, or ppv's native format), lowered when compute
 * only, and checked; check reports it (text, JSON, JUnit, and with
 * --model each rank's bytes), show draws the simulated timeline (text,
 * SVG, Chrome trace). Both take the same options (costs, cost files and
 * a model alike), each refusing the other's own.
 */
#include <json-c/json.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

enum { CHECK_OPTIONS(CLI_OPTION_ID) CHECK_ONLY_OPTIONS(CLI_OPTION_ID) SHOW_OPTIONS(CLI_OPTION_ID) };
static const cli_option check_options[] = {
    CHECK_OPTIONS(CLI_OPTION) CHECK_ONLY_OPTIONS(CLI_OPTION) SHOW_OPTIONS(CLI_OPTION)};

typedef struct check_args {
    ppv_check_options opt;
    ppv_dialect dialect;
    int json;
    long long max_memory;
    const char *file, *lowered_out, *svg, *trace, *junit;
    const char *model;           /* --model SPEC|FILE, read into spec */
    ppv_model_spec spec;
    double caps[PPV_MAX_MEM_CAPS]; /* --mem-cap BYTES[,BYTES...] */
    int ncaps;
    int target_pytorch;          /* --target pytorch */
    ppv_stage_costs stages;      /* --cost-file, or --model-costs's (n 0: none) */
    int model_costs;             /* --model-costs */
    int optimal;                 /* --optimal */
    int mem_given;               /* --mem */
} check_args;

/* check --optimal: the proven optimum of the schedule's size and
 * placement within its own peak, and the gap. */
typedef struct optimal_view {
    int done;         /* compared */
    char why[1100];   /* why not, when not done ("" when done) */
    ppv_optimal_report rep;
    double makespan, cap, gap_percent;
} optimal_view;

/* check --model: the bytes of each rank and the --mem-cap verdict. */
typedef struct mem_view {
    ppv_model_spec spec;
    ppv_memory_bytes b;
    double *cap;      /* [nranks], NULL without --mem-cap */
    int32_t over;     /* first rank over its cap, -1 if none */
} mem_view;

/* Parses check's and show's shared options. Returns -1 on success, else an
 * exit code. */
static int parse_check_args(int argc, char **argv, check_args *ca, int show) {
    memset(ca, 0, sizeof *ca);
    ca->opt = ppv_check_defaults();
    ca->dialect = PPV_DIALECT_AUTO;
    ca->max_memory = physical_memory();
    double v[4];
    int c, k;
    cli_parser p;
    CLI_BEGIN(&p, argv, check_options, 0);
    while ((c = cli_next(&p, argc, argv)) != CLI_END) {
        switch (c) {
        case OPT_SEMANTICS:
            if (semantics_option(&p, optarg, &ca->opt.sem)) return PPV_EXIT_BAD_INPUT;
            break;
        case OPT_COSTS:
            if (costs_option(&p, optarg, &ca->opt.costs)) return PPV_EXIT_BAD_INPUT;
            break;
        case OPT_MEM: {
            const option_value *mv = &p.cur->value;
            k = parse_fractions(optarg, mv->flo, mv->fhi, v, 3);
            if (k < 1 || (k > 1 && v[1] > 1) || (k > 2 && v[2] > 1))
                return value_error("mem", mv,
                                   "UNIT[,IFRAC[,STASH]] (IFRAC and STASH at most 1), each",
                                   optarg);
            ca->opt.mem = (ppv_mem_model){v[0], k > 1 ? v[1] : 0.0, k > 2 ? v[2] : 0.0};
            ca->mem_given = 1;
            break;
        }
        case OPT_MSG_BYTES: ca->opt.msg_bytes = p.num; break;
        case OPT_COST_FILE: {
            ppv_stage_costs_free(&ca->stages);
            int rc = cost_file(optarg, &ca->stages);
            if (rc) return rc;
            break;
        }
        case OPT_OPTIMAL:
            if (show) return usage_error("--optimal belongs to 'ppv check'%s", "");
            ca->optimal = 1;
            break;
        case OPT_MODEL_COSTS:
            ca->model_costs = 1;
            break;
        case OPT_DIALECT:
            if (strcmp(optarg, "auto") == 0) ca->dialect = PPV_DIALECT_AUTO;
            else if (strcmp(optarg, "current") == 0) ca->dialect = PPV_DIALECT_CURRENT;
            else if (strcmp(optarg, "legacy") == 0) ca->dialect = PPV_DIALECT_LEGACY;
            else return usage_error("--dialect is auto, current or legacy, not '%s'", optarg);
            break;
        case OPT_JSON: ca->json = 1; break;
        case OPT_LOWERED_OUT: ca->lowered_out = optarg; break;
        case OPT_SVG:
        case OPT_CHROME_TRACE:
            if (!show) return usage_error("--svg and --chrome-trace belong to 'ppv show'%s", "");
            if (c == OPT_SVG) ca->svg = optarg;
            else ca->trace = optarg;
            break;
        case OPT_JUNIT: ca->junit = optarg; break;
        case OPT_MAX_MEMORY:
            ca->max_memory = p.num;
            break;
        case OPT_TARGET:
            if (show) return usage_error("--target belongs to 'ppv check'%s", "");
            if (strcmp(optarg, "pytorch") == 0) ca->target_pytorch = 1;
            else if (strcmp(optarg, "ppv") == 0) ca->target_pytorch = 0;
            else return usage_error("--target is ppv or pytorch, not '%s'", optarg);
            break;
        case OPT_MODEL:
        case OPT_MEM_CAP:
            if (c == OPT_MODEL) {
                ca->model = optarg;
                int rc = model_spec(optarg, &ca->spec);
                if (rc) return rc;
            } else if ((ca->ncaps = byte_list(&p, optarg, ca->caps, PPV_MAX_MEM_CAPS)) < 0) {
                return PPV_EXIT_BAD_INPUT;
            }
            break;
        case CLI_HELP: return print_help();
        default: return bad_option();
        }
    }
    if (ca->ncaps && !ca->model)
        return usage_error("--mem-cap needs --model: bytes come from a model%s", "");
    if (ca->model_costs && !ca->model)
        return usage_error("--model-costs needs --model: the costs come from a model%s", "");
    if (ca->model_costs && ca->stages.n)
        return usage_error("--model-costs and --cost-file both give each stage's costs: one or "
                           "the other%s", "");
    if (ca->stages.n && ca->mem_given)
        return usage_error("--cost-file gives each stage's activation and fractions: no --mem%s",
                           "");
    if (ca->model_costs && ca->opt.mem.unit > 0)
        return usage_error("--model-costs gives each stage's activation in bytes: --mem takes "
                           "only 0,IFRAC,STASH with it%s", "");
    if (ca->stages.n) ca->opt.stages = &ca->stages;
    if (optind != argc - 1) return usage_error("needs one schedule FILE (- for standard input)%s", "");
    ca->file = argv[optind];
    ca->opt.keep_timeline = show;
    return -1;
}

/* The bytes of each rank under --model and the --mem-cap verdict. Returns
 * -1 when built, else an exit code after the message. */
static int mem_view_build(const check_args *ca, const ppv_schedule *s, mem_view *mv) {
    memset(mv, 0, sizeof *mv);
    mv->over = -1;
    mv->spec = ca->spec;
    char err[512];
    if (ppv_schedule_memory_bytes(s, &mv->spec, &mv->b, err, sizeof err) < 0) {
        fprintf(stderr, "ppv %s: %s\n", g_cmd, err);
        return PPV_EXIT_BAD_INPUT;
    }
    if (!ca->ncaps) return -1;
    int32_t P = s->nranks, n = ca->ncaps;
    mv->cap = calloc((size_t)P, sizeof *mv->cap);
    if (!mv->cap) {
        fprintf(stderr, "ppv %s: out of memory\n", g_cmd);
        return PPV_EXIT_BAD_INPUT;
    }
    if (n != 1 && n != P) {
        fprintf(stderr, "ppv %s: --mem-cap gives %d caps for %d ranks: give one for every rank "
                "or one for each\n", g_cmd, n, P);
        return PPV_EXIT_BAD_INPUT;
    }
    for (int32_t r = 0; r < P; r++) mv->cap[r] = ca->caps[r < n ? r : 0];
    for (int32_t r = 0; r < P && mv->over < 0; r++) {
        double w, g, o;
        ppv_memory_split(&mv->spec, mv->b.params[r], &w, &g, &o);
        if (w + g + o + mv->b.activations[r] > mv->cap[r]) mv->over = r;
    }
    return -1;
}

static void mem_view_free(mem_view *mv) {
    ppv_memory_bytes_free(&mv->b);
    free(mv->cap);
}

/* The action at which rank r's activations peak, as text. */
static void peak_action(const ppv_schedule *s, const mem_view *mv, int32_t r, char *buf,
                        size_t n) {
    int32_t i = mv->b.peak_index[r];
    if (i < 0) snprintf(buf, n, "none");
    else ppv_action_format(s, &s->prog[r].acts[i], buf, n);
}

static void mem_text(const ppv_schedule *s, const mem_view *mv) {
    for (int32_t r = 0; r < mv->b.nranks; r++) {
        double w, g, o, a = mv->b.activations[r];
        ppv_memory_split(&mv->spec, mv->b.params[r], &w, &g, &o);
        char at[64], tot[32];
        peak_action(s, mv, r, at, sizeof at);
        printf("memory, rank %d: weights %.0f gradients %.0f optimizer %.0f activations %.0f "
               "(peak at %s) total %.0f bytes (%s)\n",
               r, w, g, o, a, at, w + g + o + a, human_bytes(w + g + o + a, tot, sizeof tot));
    }
    if (mv->over >= 0) {
        int32_t r = mv->over;
        double w, g, o, a = mv->b.activations[r];
        ppv_memory_split(&mv->spec, mv->b.params[r], &w, &g, &o);
        char at[64], need[32], cap[32];
        peak_action(s, mv, r, at, sizeof at);
        printf("memory: rank %d needs %s (%.0f bytes), %.0f bytes over its cap of %s; its "
               "activations peak at %s (index %d)\n",
               r, human_bytes(w + g + o + a, need, sizeof need), w + g + o + a,
               w + g + o + a - mv->cap[r], human_bytes(mv->cap[r], cap, sizeof cap), at,
               mv->b.peak_index[r]);
    }
}

/* A byte count (the formulas can give fractions of a byte) as an integer. */
static json_object *byte_count_json(double b) {
    return json_object_new_int64(llround(b));
}

static json_object *mem_json(const ppv_schedule *s, const mem_view *mv) {
    json_object *arr = json_object_new_array();
    for (int32_t r = 0; r < mv->b.nranks; r++) {
        double w, g, o, a = mv->b.activations[r];
        ppv_memory_split(&mv->spec, mv->b.params[r], &w, &g, &o);
        char at[64];
        peak_action(s, mv, r, at, sizeof at);
        json_object *e = json_object_new_object();
        json_object_object_add(e, "rank", json_object_new_int(r));
        json_object_object_add(e, "parameters", byte_count_json(mv->b.params[r]));
        json_object_object_add(e, "weights", byte_count_json(w));
        json_object_object_add(e, "gradients", byte_count_json(g));
        json_object_object_add(e, "optimizer", byte_count_json(o));
        json_object_object_add(e, "activations", byte_count_json(a));
        json_object_object_add(e, "peak_action", json_object_new_string(at));
        json_object_object_add(e, "peak_index", json_object_new_int(mv->b.peak_index[r]));
        json_object_object_add(e, "total", byte_count_json(w + g + o + a));
        if (mv->cap) {
            json_object_object_add(e, "cap", byte_count_json(mv->cap[r]));
            json_object_object_add(e, "within_cap", json_object_new_boolean(w + g + o + a <= mv->cap[r]));
        }
        json_object_array_add(arr, e);
    }
    return arr;
}

/* PyTorch's runtime's problems with the file (ppv_check_pytorch), for
 * --target pytorch or a default warning. */
typedef struct target_view {
    int pytorch; /* --target pytorch: the problems count */
    ppv_problem *v;
    int32_t n;
} target_view;

static json_object *problem_json(const ppv_problem *p) {
    json_object *e = json_object_new_object();
    json_object_object_add(e, "rank", json_object_new_int(p->rank));
    json_object_object_add(e, "index", json_object_new_int(p->index));
    json_object_object_add(e, "action", json_object_new_string(p->action));
    json_object_object_add(e, "message", json_object_new_string(p->message));
    return e;
}

/* The note on a rank that holds a stage and the next (gloo cannot greet its
 * own rank), into buf; 0 where no rank does. */
static int shared_neighbours_note(const ppv_schedule *s, char *buf, size_t len) {
    int32_t k = ppv_pytorch_shared_neighbours(s);
    if (k < 0) return 0;
    snprintf(buf, len,
             "stages %d and %d are both on rank %d: PyTorch's runtime runs this file, but on its "
             "first step each PipelineStage greets the next stage's rank, and gloo cannot send "
             "to its own rank (NCCL can), so under gloo it fails as PyTorch's own ZBV and "
             "DualPipeV classes do",
             (int)k, (int)k + 1, (int)s->stage_rank[k]);
    return 1;
}

/* The lifespan bound against the simulated peak of rank r, in words:
 * why they differ, or "" when they agree. */
static const char *bound_note(const ppv_check_report *rep, int32_t r) {
    double p = rep->peak_activation[r], b = rep->peak_bound[r];
    if (!(fabs(p - b) > 1e-9 * fmax(1.0, fabs(p)))) return "";
    return p > b ? "above the bound: the fill or the drain holds more than the steady state does"
                 : "below the bound: each stage's ceil(lifespan/T) rounds up, and a rank's stages "
                   "are not all at their most at the same moment";
}

static json_object *lifespan_json(const ppv_schedule *s, const ppv_check_report *rep) {
    if (!rep->lifespan) return NULL;
    json_object *o = json_object_new_object(), *st = json_object_new_array(),
                *rk = json_object_new_array();
    for (int32_t k = 0; k < rep->nstages; k++) {
        json_object *e = json_object_new_object();
        json_object_object_add(e, "stage", json_object_new_int(k));
        json_object_object_add(e, "rank", json_object_new_int(s->stage_rank[k]));
        json_object_object_add(e, "lifespan", finite_json(rep->lifespan[k]));
        json_object_object_add(e, "lifespan_max", finite_json(rep->lifespan_max[k]));
        json_object_object_add(e, "interval", finite_json(rep->interval[k]));
        json_object_object_add(e, "alive", json_object_new_int(rep->alive[k]));
        json_object_array_add(st, e);
    }
    for (int32_t r = 0; r < rep->nranks; r++) {
        json_object *e = json_object_new_object();
        const char *note = bound_note(rep, r);
        json_object_object_add(e, "rank", json_object_new_int(r));
        json_object_object_add(e, "bound", finite_json(rep->peak_bound[r]));
        json_object_object_add(e, "peak", finite_json(rep->peak_activation[r]));
        json_object_object_add(e, "note", note[0] ? json_object_new_string(note) : NULL);
        json_object_array_add(rk, e);
    }
    json_object_object_add(o, "stages", st);
    json_object_object_add(o, "ranks", rk);
    return o;
}

static void lifespan_text(const ppv_schedule *s, const ppv_check_report *rep) {
    if (!rep->lifespan) return;
    for (int32_t k = 0; k < rep->nstages && k < 16; k++)
        printf("lifespan, stage %d (rank %d): %g (largest %g), interval T %g: %d alive at once\n",
               k, s->stage_rank[k], rep->lifespan[k], rep->lifespan_max[k], rep->interval[k],
               rep->alive[k]);
    if (rep->nstages > 16)
        printf("lifespan: ... %d more stages (--json lists them)\n", rep->nstages - 16);
    printf("peak bound (each stage's ceil(lifespan/T) x its activation, a rank's summed):");
    for (int32_t r = 0; r < rep->nranks && r < 64; r++) printf(" %g", rep->peak_bound[r]);
    printf("%s\n", rep->nranks > 64 ? " ..." : "");
    for (int32_t r = 0, said = 0; r < rep->nranks && said < 8; r++) {
        const char *note = bound_note(rep, r);
        if (!note[0]) continue;
        printf("peak bound, rank %d: peak %g %s\n", r, rep->peak_activation[r], note);
        said++;
    }
}

/* check --optimal: the optimum for s's size and placement under the
 * check's costs, within s's own peak. */
static void optimal_build(const check_args *ca, const ppv_schedule *s, const ppv_check_report *rep,
                          optimal_view *ov) {
    memset(ov, 0, sizeof *ov);
    if (!rep->ok || !rep->simulated) {
        snprintf(ov->why, sizeof ov->why, "the schedule does not pass the check");
        return;
    }
    int one = s->nstages == s->nranks, v = s->nstages == 2 * s->nranks;
    for (int32_t st = 0; st < s->nstages && (one || v); st++) {
        one = one && s->stage_rank[st] == st;
        v = v && s->stage_rank[st] == (st < s->nranks ? st : 2 * s->nranks - 1 - st);
    }
    if (!one && !v) {
        snprintf(ov->why, sizeof ov->why, "its stages are placed neither one a rank nor in a V, "
                 "the placements the optimum is proven for");
        return;
    }
    double cap = 0;
    for (int32_t r = 0; r < rep->nranks; r++)
        if (rep->peak_activation[r] > cap) cap = rep->peak_activation[r];
    ppv_optimal_params op = {s->nranks, s->nmb, v, ca->opt.costs, ca->opt.stages, cap, 60, NULL};
    ppv_schedule *o = NULL;
    char err[1024];
    if (ppv_generate_optimal(&op, &o, &ov->rep, err, sizeof err) < 0) {
        snprintf(ov->why, sizeof ov->why, "%s", err);
        return;
    }
    ppv_schedule_free(o);
    ov->done = 1;
    ov->makespan = rep->makespan;
    ov->cap = cap;
    ov->gap_percent = 100.0 * (rep->makespan - ov->rep.makespan) / ov->rep.makespan;
}

static void optimal_text(const optimal_view *ov) {
    if (!ov->done) {
        printf("optimal: not compared: %s\n", ov->why);
        return;
    }
    printf("optimal: makespan %g, %s %g (%s, within this schedule's peak of %g activations), "
           "%.1f%% %s\n",
           ov->makespan, ov->rep.proven ? "optimum" : "best found", ov->rep.makespan,
           ov->rep.proven ? "proven" : "not proven in 60 s", ov->cap, fabs(ov->gap_percent),
           ov->gap_percent >= 0 ? "above" : "below: the schedule runs some stage's microbatches "
                                            "out of order, outside the space searched");
}

static json_object *optimal_json(const optimal_view *ov) {
    json_object *o = json_object_new_object();
    json_object_object_add(o, "compared", json_object_new_boolean(ov->done));
    json_object_object_add(o, "why_not", ov->done ? NULL : json_object_new_string(ov->why));
    json_object_object_add(o, "optimum", ov->done ? finite_json(ov->rep.makespan) : NULL);
    json_object_object_add(o, "proven", ov->done ? json_object_new_boolean(ov->rep.proven) : NULL);
    json_object_object_add(o, "cap", ov->done ? finite_json(ov->cap) : NULL);
    json_object_object_add(o, "gap_percent", ov->done ? finite_json(ov->gap_percent) : NULL);
    json_object_object_add(o, "solver_seconds", ov->done ? finite_json(ov->rep.seconds) : NULL);
    return o;
}

/* The per-stage costs a check used, for --json (null without them). */
static json_object *stage_costs_json(const ppv_stage_costs *sc) {
    if (!sc) return NULL;
    json_object *arr = json_object_new_array();
    for (int32_t k = 0; k < sc->n; k++) {
        const ppv_stage_cost *c = &sc->s[k];
        json_object *e = json_object_new_object();
        json_object_object_add(e, "stage", json_object_new_int(k));
        json_object_object_add(e, "f", json_object_new_double(c->f));
        json_object_object_add(e, "b", json_object_new_double(c->b));
        json_object_object_add(e, "w", json_object_new_double(c->w));
        json_object_object_add(e, "comm", json_object_new_double(c->comm));
        json_object_object_add(e, "act", json_object_new_double(c->act));
        json_object_object_add(e, "i_frac", json_object_new_double(c->i_frac));
        json_object_object_add(e, "stash", json_object_new_double(c->stash_frac));
        json_object_array_add(arr, e);
    }
    return arr;
}

static void print_json(const ppv_schedule *s, const ppv_check_report *rep, const mem_view *mv,
                       const target_view *tv, const ppv_stage_costs *sc, const optimal_view *ov) {
    json_object *o = json_object_new_object();
    char sem[64];
    ppv_semantics_format(&rep->sem, sem, sizeof sem);
    json_object_object_add(o, "ok", json_object_new_boolean(rep->ok && (!mv || mv->over < 0) &&
                                                            !(tv->pytorch && tv->n)));
    json_object_object_add(o, "file", json_object_new_string(s->name));
    json_object_object_add(o, "form", json_object_new_string(
        s->form == PPV_FORM_COMPUTE_ONLY ? "compute_only" : "compute_comms"));
    json_object_object_add(o, "ranks", json_object_new_int(rep->nranks));
    json_object_object_add(o, "stages", json_object_new_int(rep->nstages));
    json_object_object_add(o, "microbatches", json_object_new_int(rep->nmb));
    json_object_object_add(o, "semantics", json_object_new_string(sem));
    json_object_object_add(o, "deadlock", json_object_new_boolean(rep->deadlock));
    json_object *cyc = json_object_new_array();
    for (int32_t k = 0; k < rep->ncycle; k++) json_object_array_add(cyc, wait_json(&rep->cycle[k]));
    json_object_object_add(o, "cycle", cyc);
    json_object *bl = json_object_new_array();
    for (int32_t k = 0; k < rep->nblocked; k++) json_object_array_add(bl, wait_json(&rep->blocked[k]));
    json_object_object_add(o, "blocked", bl);
    json_object *errs = json_object_new_array();
    for (int32_t k = 0; k < rep->nerrors; k++) {
        json_object *e = json_object_new_object();
        json_object_object_add(e, "rank", json_object_new_int(rep->errors[k].rank));
        json_object_object_add(e, "index", json_object_new_int(rep->errors[k].index));
        json_object_object_add(e, "action", json_object_new_string(rep->errors[k].action));
        json_object_object_add(e, "message", json_object_new_string(rep->errors[k].message));
        json_object_array_add(errs, e);
    }
    json_object_object_add(o, "errors", errs);
    if (tv->pytorch) {
        json_object_object_add(o, "target", json_object_new_string("pytorch"));
        json_object *tp = json_object_new_array();
        for (int32_t k = 0; k < tv->n; k++) json_object_array_add(tp, problem_json(&tv->v[k]));
        json_object_object_add(o, "target_problems", tp);
        char note[400];
        json_object_object_add(o, "target_note", shared_neighbours_note(s, note, sizeof note)
                                                     ? json_object_new_string(note) : NULL);
    }
    json_object_object_add(o, "errors_total", json_object_new_int64(rep->errors_total));
    json_object *pk = json_object_new_array();
    for (int32_t r = 0; r < rep->nranks; r++)
        json_object_array_add(pk, finite_json(rep->peak_activation[r]));
    json_object_object_add(o, "peak_activation", pk);
    json_object_object_add(o, "makespan",
                           rep->simulated ? finite_json(rep->makespan) : NULL);
    json_object_object_add(o, "bubble_ratio",
                           rep->simulated ? finite_json(rep->bubble_ratio) : NULL);
    if (mv) json_object_object_add(o, "memory", mem_json(s, mv));
    json_object_object_add(o, "lifespan", lifespan_json(s, rep));
    json_object_object_add(o, "optimal", ov ? optimal_json(ov) : NULL);
    json_object_object_add(o, "costs_from", sc ? json_object_new_string(sc->source) : NULL);
    json_object_object_add(o, "stage_costs", stage_costs_json(sc));
    puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(o);
}

static void print_text(const ppv_schedule *s, const ppv_check_report *rep, const mem_view *mv,
                       const target_view *tv, const ppv_stage_costs *sc, const optimal_view *ov) {
    char sem[64];
    ppv_semantics_format(&rep->sem, sem, sizeof sem);
    printf("%s: %d ranks, %d stages, %d microbatches, %s%s\n", s->name, rep->nranks, rep->nstages,
           rep->nmb, s->form == PPV_FORM_COMPUTE_ONLY ? "compute_only" : "compute_comms",
           s->form == PPV_FORM_COMPUTE_ONLY && rep->checked ? " (lowered by ppv)" : "");
    printf("semantics: %s\n", sem);
    for (int32_t k = 0; sc && k < sc->n && k < 16; k++) {
        const ppv_stage_cost *c = &sc->s[k];
        printf("costs, stage %d (%s): F %g, B %g, W %g, message %g, activation %g (I frees %g, "
               "a stash keeps %g)\n",
               k, sc->source, c->f, c->b, c->w, c->comm, c->act, c->i_frac, c->stash_frac);
    }
    if (sc && sc->n > 16) printf("costs: ... %d more stages (--json lists them)\n", sc->n - 16);
    for (int32_t k = 0; k < rep->nerrors; k++) {
        const ppv_problem *e = &rep->errors[k];
        if (e->index >= 0)
            printf("error: rank %d index %d %s: %s\n", e->rank, e->index, e->action, e->message);
        else
            printf("error: rank %d: %s\n", e->rank, e->message);
    }
    if (rep->errors_total > rep->nerrors)
        printf("error: ... %lld more\n", (long long)(rep->errors_total - rep->nerrors));
    for (int32_t k = 0; tv->pytorch && k < tv->n; k++) {
        const ppv_problem *e = &tv->v[k];
        printf("pytorch: rank %d index %d %s: %s\n", e->rank, e->index, e->action, e->message);
    }
    char note[400];
    if (tv->pytorch && shared_neighbours_note(s, note, sizeof note))
        printf("pytorch: note: %s\n", note);
    if (rep->deadlock) {
        printf("deadlock: %d of %d ranks can never finish\n", rep->nblocked, rep->nranks);
        for (int32_t k = 0; k < rep->nblocked; k++) {
            const ppv_wait *w = &rep->blocked[k];
            printf("  rank %d blocked at %s (index %d), waits for rank %d: %s\n", w->rank,
                   w->action, w->index, w->waits_for, w->reason);
        }
        if (rep->ncycle) {
            printf("cycle:");
            for (int32_t k = 0; k < rep->ncycle; k++)
                printf(" rank %d (%s) ->", rep->cycle[k].rank, rep->cycle[k].action);
            printf(" rank %d\n", rep->cycle[0].rank);
        }
    }
    printf("peak activation:");
    for (int32_t r = 0; r < rep->nranks; r++) printf(" %g", rep->peak_activation[r]);
    printf("\n");
    if (rep->simulated) printf("makespan: %g  bubble ratio: %.6f\n", rep->makespan, rep->bubble_ratio);
    lifespan_text(s, rep);
    if (ov) optimal_text(ov);
    if (mv) mem_text(s, mv);
    printf("result: %s\n",
           rep->ok && (!mv || mv->over < 0) && !(tv->pytorch && tv->n) ? "OK" : "PROBLEM");
}

typedef struct check_output {
    const ppv_check_report *rep;
    int (*fn)(const ppv_check_report *, FILE *);
} check_output;

static int write_check_output(FILE *f, const void *arg) {
    const check_output *o = arg;
    return o->fn(o->rep, f);
}

static int write_output(const char *path, const ppv_check_report *rep,
                        int (*fn)(const ppv_check_report *, FILE *)) {
    check_output o = {rep, fn};
    return write_atomically(path, write_check_output, &o,
                            rep->checked ? "the schedule could not be simulated"
                                         : "no checked schedule");
}

/* Writes check's JUnit XML: the structure, then one case per rank for
 * deadlock. Returns 0, or -1 after printing the reason. */
static int check_junit(const char *path, const ppv_schedule *s, const ppv_check_report *rep) {
    junit j;
    char suite[400], sem[64], err[512];
    ppv_semantics_format(&rep->sem, sem, sizeof sem);
    snprintf(suite, sizeof suite, "ppv check %s (%s)", s->name, sem);
    junit_init(&j, suite);
    int rc = 0;
    if (rep->nerrors == 0)
        rc |= junit_add(&j, "structure", NULL);
    else
        rc |= junit_add(&j, "structure", "%lld errors; first: rank %d%s%s: %s",
                        (long long)rep->errors_total, rep->errors[0].rank,
                        rep->errors[0].index >= 0 ? " " : "",
                        rep->errors[0].index >= 0 ? rep->errors[0].action : "",
                        rep->errors[0].message);
    for (int32_t r = 0; r < rep->nranks; r++) {
        char name[64];
        snprintf(name, sizeof name, "deadlock-free: rank %d", r);
        const ppv_wait *w = NULL;
        for (int32_t k = 0; k < rep->nblocked; k++)
            if (rep->blocked[k].rank == r) w = &rep->blocked[k];
        if (w)
            rc |= junit_add(&j, name, "blocked at %s (action %d), waits for rank %d: %s", w->action,
                            w->index, w->waits_for, w->reason);
        else
            rc |= junit_add(&j, name, NULL);
    }
    if (rc == 0) rc = junit_write(&j, path, err, sizeof err);
    else snprintf(err, sizeof err, "out of memory");
    if (rc < 0) fprintf(stderr, "ppv %s: %s\n", g_cmd, err);
    junit_free(&j);
    return rc;
}

static int write_lowered(const ppv_check_report *rep, FILE *f) {
    char err[256];
    return rep->checked ? ppv_schedule_write_csv(rep->checked, f, err, sizeof err) : -1;
}

/* What PyTorch's runtime would do wrong with s (rep: the check's, which
 * worked them out beside its simulation), into tv; the messages name
 * places, so a file read without them is read again for them. Without
 * --target pytorch they are warnings on standard error. Returns -1, or
 * an exit code after the message. */
static int target_problems(const check_args *ca, const ppv_schedule *s, ppv_check_report *rep,
                           target_view *tv) {
    char err[512];
    ppv_schedule *placed = NULL;
    tv->v = rep->pytorch, tv->n = rep->npytorch;
    rep->pytorch = NULL, rep->npytorch = 0;
    if (tv->n && s->placeless &&
        ppv_schedule_load(ca->file, ca->dialect, &placed, err, sizeof err) == 0) {
        free(tv->v);
        tv->v = NULL;
        int prc = ppv_check_pytorch(placed, &tv->v, &tv->n, err, sizeof err);
        ppv_schedule_free(placed);
        if (prc < 0) goto fail;
    }
    for (int32_t k = 0; !tv->pytorch && k < tv->n; k++)
        fprintf(stderr, "ppv check: warning: rank %d index %d %s: %s (--target pytorch fails on "
                "this)\n", tv->v[k].rank, tv->v[k].index, tv->v[k].action, tv->v[k].message);
    return -1;
fail:
    fprintf(stderr, "ppv check: %s\n", err);
    return PPV_EXIT_BAD_INPUT;
}

/* --lowered-out of a compute-only file: the check's own lowering, plus
 * what PyTorch's runtime needs (ppv_schedule_lower: REDUCE_GRAD,
 * UNSHARD/RESHARD, which cost nothing and move nothing else). */
static int lowered_out(const check_args *ca, const ppv_schedule *s, const ppv_check_report *rep) {
    ppv_check_report copy = *rep;
    ppv_schedule *low = NULL;
    char err[512];
    if (s->form == PPV_FORM_COMPUTE_ONLY && rep->checked) {
        if (ppv_schedule_lower(s, &ca->opt.costs, ca->opt.msg_bytes, &low, err, sizeof err) != 0) {
            fprintf(stderr, "ppv %s: cannot write %s: %s\n", g_cmd, ca->lowered_out, err);
            return -1;
        }
        copy.checked = low;
    }
    int rc = write_output(ca->lowered_out, &copy, write_lowered);
    ppv_schedule_free(low);
    return rc;
}

static int check_body(check_args *ca, int show);

/* ppv check FILE or ppv show FILE (show 1). */
static int check_or_show(int argc, char **argv, int show) {
    check_args ca;
    int rc = parse_check_args(argc, argv, &ca, show);
    if (rc < 0) rc = check_body(&ca, show);
    ppv_stage_costs_free(&ca.stages);
    return rc;
}

/* The check (or show) of ca's file, its options read. */
static int check_body(check_args *cap, int show) {
    check_args ca = *cap; /* the stages stay cap's to free */
    int rc;
    char err[1024];
    ppv_schedule *s = NULL;
    rc = refuse_if_too_big(ca.file, file_estimate(ca.file), ca.max_memory);
    if (rc >= 0) return rc;
    /* Where each action was read (4 bytes an action) matters only to the
     * messages about a file that fails: it is read without, and read and
     * checked again with them when it fails (a big schedule's check stays
     * small; standard input cannot be read twice). */
    ppv_check_report *rep = NULL;
    int pytorch = 0; /* PyTorch's runtime's view of the file is wanted */
    for (int placeless = strcmp(ca.file, "-") != 0;; placeless = 0) {
        int lrc = placeless ? ppv_schedule_load_placeless(ca.file, ca.dialect, &s, err, sizeof err)
                            : ppv_schedule_load(ca.file, ca.dialect, &s, err, sizeof err);
        if (lrc < 0 && placeless) continue;
        /* PyTorch's runtime's view of the file, which the check works out */
        pytorch = lrc == 0 && !show && (ca.target_pytorch || s->form == PPV_FORM_COMPUTE_COMMS);
        ca.opt.pytorch = pytorch;
        if (lrc == 0 && ca.model_costs) { /* the model split over this schedule's stages */
            ppv_stage_costs_free(&cap->stages);
            if (ppv_stage_costs_from_model(&ca.spec, s->nstages, ca.opt.costs.comm, &ca.opt.mem,
                                           &cap->stages, err, sizeof err) < 0)
                lrc = -1;
            ca.stages = cap->stages;
            ca.opt.stages = &cap->stages;
        }
        int crc = lrc < 0 ? -1 : ppv_schedule_check(s, &ca.opt, &rep, err, sizeof err);
        if (crc < 0) {
            fprintf(stderr, "ppv %s: %s\n", g_cmd, err);
            ppv_schedule_free(s);
            return PPV_EXIT_BAD_INPUT;
        }
        if (!placeless || (rep->ok && rep->errors_total == 0)) break;
        ppv_check_report_free(rep);
        rep = NULL;
        ppv_schedule_free(s);
        s = NULL;
    }
    mem_view mv, *mvp = NULL;
    if (ca.model) {
        if ((rc = mem_view_build(&ca, s, &mv)) >= 0) {
            mem_view_free(&mv);
            ppv_check_report_free(rep);
            ppv_schedule_free(s);
            return rc;
        }
        mvp = &mv;
    }
    target_view tv = {ca.target_pytorch, NULL, 0};
    if (pytorch && (rc = target_problems(&ca, s, rep, &tv)) >= 0) {
        free(tv.v);
        if (mvp) mem_view_free(mvp);
        ppv_check_report_free(rep);
        ppv_schedule_free(s);
        return rc;
    }
    optimal_view ov, *ovp = NULL;
    if (ca.optimal) {
        optimal_build(&ca, s, rep, &ov);
        ovp = &ov;
    }
    if (ca.json) print_json(s, rep, mvp, &tv, ca.opt.stages, ovp);
    else if (!show || (!ca.svg && !ca.trace)) print_text(s, rep, mvp, &tv, ca.opt.stages, ovp);
    if (show && !ca.json && !ca.svg && !ca.trace) render_text(rep, stdout);
    rc = rep->ok && (!mvp || mvp->over < 0) && !(tv.pytorch && tv.n) ? PPV_EXIT_OK
                                                                      : PPV_EXIT_PROBLEM;
    if (mvp) mem_view_free(mvp);
    free(tv.v);
    if ((ca.svg && write_output(ca.svg, rep, render_svg) < 0) ||
        (ca.trace && write_output(ca.trace, rep, render_chrome_trace) < 0) ||
        (ca.lowered_out && lowered_out(&ca, s, rep) < 0) ||
        (ca.junit && check_junit(ca.junit, s, rep) < 0))
        rc = PPV_EXIT_BAD_INPUT;
    ppv_check_report_free(rep);
    ppv_schedule_free(s);
    return rc;
}

/* ppv check FILE [options]. */
int cmd_check(int argc, char **argv) {
    return check_or_show(argc, argv, 0);
}

/* ppv show FILE [options]. */
int cmd_show(int argc, char **argv) {
    return check_or_show(argc, argv, 1);
}
