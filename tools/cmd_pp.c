/* cmd_pp.c - `ppv pp`: the PP inference pipeline (stage 0 and a mesh) on
 * the mock transport, its break-it matrix (--inject), KV stash against
 * recompute (--compare-kv) and recordings (--record). The pipeline's own
 * options, which ppv fuzz pp takes too, are parsed in cli.c. */
#include <inttypes.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ppv_fuzz.h"
#include "ppv_golden.h"

typedef struct pp_args {
    ppv_pp_options o;
    int json, compare_kv, list;
    const char *record, *trace_out, *replay;
    replay_trace rt; /* --replay's */
    const char *transport;   /* --transport mpi or nccl (NULL: the mock) */
    const char *mock_option; /* an option of the mock's that was given */
    int timeout_given;
    int32_t repeat;    /* --repeat (1: once) */
    repeat_verdict rv; /* what the repeats showed */
    int plan;          /* --plan */
    const char *model; /* --model (with --plan) */
    int32_t elem;      /* its dtype's bytes (0: the built-in's own) */
    int32_t mvals[6];  /* its sizes (pp_model's order), where mset has the bit */
    unsigned mset;
    double caps[PPV_MAX_MEM_CAPS]; /* --mem-cap */
    int ncaps;
    const char *memory_svg; /* --memory-svg */
    int32_t sweep[16]; /* --sweep's depths */
    int nsweep;
} pp_args;

/* --model for --plan: the built-in's architecture at other sizes. 0, or an
 * exit code after the message. */
static int pp_model(const char *arg, pp_args *a) {
    char *text = NULL, why[256];
    int bad = model_text(arg, &text);
    if (bad) return bad;
    ppv_pair items[16];
    int n = ppv_parse_pairs(text ? text : arg, items, 16, why, sizeof why);
    free(text);
    if (n < 0) {
        fprintf(stderr, "ppv pp: --model: %s (in --model '%s')\n", why, arg);
        return PPV_EXIT_BAD_INPUT;
    }
    for (int i = 0; i < n; i++) {
        const char *k = items[i].key, *v = items[i].value;
        if (!strcmp(k, "dtype")) {
            a->elem = !strcmp(v, "fp32") ? 4 : !strcmp(v, "bf16") || !strcmp(v, "fp16") ? 2 : -1;
            if (a->elem < 0) {
                fprintf(stderr, "ppv pp: --model: dtype is fp32, bf16 or fp16, not '%s' (in --model "
                        "'%s')\n", v, arg);
                return PPV_EXIT_BAD_INPUT;
            }
            continue;
        }
        static const struct {
            const char *key;
            int64_t hi;
        } ints[] = {{"layers", 1 << 16},  {"d_model", 1 << 16}, {"n_heads", 1 << 16},
                    {"d_ff", 1 << 20},    {"cond_dim", 1 << 20}, {"cond_len", 4096}};
        size_t w = 0;
        while (w < sizeof ints / sizeof *ints && strcmp(ints[w].key, k)) w++;
        int64_t x = 0;
        if (w == sizeof ints / sizeof *ints) {
            fprintf(stderr, "ppv pp: --model: unknown key '%s' (layers, d_model, n_heads, d_ff, "
                    "cond_dim, cond_len, dtype; in --model '%s')\n", k, arg);
            return PPV_EXIT_BAD_INPUT;
        }
        if (ppv_parse_whole(v, 1, ints[w].hi, &x) < 0) {
            fprintf(stderr, "ppv pp: --model: %s=%s is not a whole number from 1 to %lld (in "
                    "--model '%s')\n", k, v, (long long)ints[w].hi, arg);
            return PPV_EXIT_BAD_INPUT;
        }
        a->mvals[w] = (int32_t)x;
        a->mset |= 1u << w;
    }
    return 0;
}

/* --model's sizes over the pipeline's (after every option, whatever the order). */
static void pp_model_apply(pp_args *a) {
    int32_t *field[] = {&a->o.model.layers, &a->o.model.d_model,  &a->o.model.n_heads,
                        &a->o.model.d_ff,   &a->o.model.cond_dim, &a->o.cond_len};
    for (int w = 0; w < 6; w++)
        if (a->mset >> w & 1u) *field[w] = a->mvals[w];
}

/* pp's options: the pipeline's (cli.h: PIPE_*), pp's own and its transport's. */
enum { PP_OPTIONS(CLI_OPTION_ID, CLI_SKIP) PP_TRANSPORT_OPTIONS(CLI_OPTION_ID) };
static const cli_option pp_options[] = {PP_OPTIONS(CLI_OPTION, CLI_PIPE_OPTION)
                                            PP_TRANSPORT_OPTIONS(CLI_OPTION)};

/* -1 when parsed, else the exit code (help, a usage error). */
static int parse_pp_args(int argc, char **argv, pp_args *a) {
    memset(a, 0, sizeof *a);
    a->o = ppv_pp_defaults();
    a->repeat = 1;
    cli_parser p;
    CLI_BEGIN(&p, argv, pp_options, 0);
    int c;
    while ((c = cli_next(&p, argc, argv)) != CLI_END) {
        switch (c) { /* what a job of processes cannot honour */
        case OPT_POLICY:
            a->mock_option = "--policy";
            break;
        case OPT_SEED:
            a->mock_option = "--seed";
            break;
        case OPT_TRACE_OUT:
            a->mock_option = "--trace-out";
            break;
        case OPT_REPLAY:
            a->mock_option = "--replay";
            break;
        case OPT_COMPARE_KV:
            a->mock_option = "--compare-kv";
            break;
        case PIPE_WATCHDOG_STEPS:
            a->mock_option = "--watchdog-steps";
            break;
        case PIPE_INJECT: /* OM-13 kills stage 0, which means something anywhere */
            if (strcmp(optarg, "OM-13") != 0) a->mock_option = "--inject";
            break;
        }
        int rc = pp_pipeline_option(c, &p, optarg, &a->o, &a->list);
        if (rc < 0) return PPV_EXIT_BAD_INPUT;
        if (rc == 0) continue;
        switch (c) {
        case OPT_POLICY: {
            uint64_t keep = a->o.policy.seed;
            if (ppv_policy_parse(optarg, &a->o.policy) < 0 ||
                a->o.policy.kind == PPV_POLICY_REPLAY)
                return value_error("policy", &p.cur->value, "rr, random, pct or pct:DEPTH,", optarg);
            a->o.policy.seed = keep;
            break;
        }
        case OPT_SEED:
            a->o.policy.seed = (uint64_t)p.num;
            break;
        case OPT_RECORD:
            if (!strcmp(optarg, "-"))
                return usage_error("--record %s would mix the recording with the report on "
                                   "standard output; name a file or a FIFO",
                                   optarg);
            a->record = optarg;
            break;
        case OPT_TRACE_OUT:
            a->trace_out = optarg;
            break;
        case OPT_REPLAY:
            a->replay = optarg;
            break;
        case OPT_COMPARE_KV:
            a->compare_kv = 1;
            break;
        case OPT_REPEAT: {
            a->repeat = (int32_t)p.num;
            break;
        }
        case OPT_JSON:
            a->json = 1;
            break;
        case OPT_PLAN:
            a->plan = 1;
            break;
        case OPT_MODEL: {
            a->model = optarg;
            int bad = pp_model(optarg, a);
            if (bad) return bad;
            break;
        }
        case OPT_MEMORY_SVG:
            a->memory_svg = optarg;
            break;
        case OPT_SWEEP: {
            const char *v = optarg;
            char item[32];
            int k;
            if (strncmp(v, "d=", 2) != 0)
                return value_error("sweep", &p.cur->value, "d=D[,D...] (depths from 1 to 1024),",
                                   optarg);
            v += 2;
            a->nsweep = 0;
            while ((k = ppv_list_next(&v, item, sizeof item)) == 1) {
                int64_t d;
                if (a->nsweep == 16 || ppv_parse_whole(item, 1, 1024, &d) < 0) {
                    k = -1;
                    break;
                }
                a->sweep[a->nsweep++] = (int32_t)d;
            }
            if (k < 0 || !a->nsweep)
                return value_error("sweep", &p.cur->value,
                                   "d=D[,D...] (at most 16 depths from 1 to 1024),", optarg);
            break;
        }
        case OPT_MEM_CAP:
            if ((a->ncaps = byte_list(&p, optarg, a->caps, PPV_MAX_MEM_CAPS)) < 0)
                return PPV_EXIT_BAD_INPUT;
            break;
        case OPT_DEVICE:
            if (device_option(optarg, &a->o.device) < 0) return PPV_EXIT_BAD_INPUT;
            break;
        case OPT_TRANSPORT:
            if (transport_option(optarg, &a->transport) < 0) return PPV_EXIT_BAD_INPUT;
            break;
        case OPT_TIMEOUT:
            a->o.timeout_s = p.real;
            a->timeout_given = 1;
            break;
        case OPT_WORKER_WATCHDOG:
            a->o.worker_watchdog_s = p.real;
            break;
        case CLI_HELP:
            return print_help();
        default:
            return bad_option();
        }
    }
    if (optind < argc) return usage_error("takes no operand, not '%s'", argv[optind]);
    if (a->model && !a->plan)
        return usage_error("--model describes a model for --plan (a run measures the generator "
                           "it runs)%s", "");
    if (a->model) {
        pp_model_apply(a);
        if (a->o.generator)
            return usage_error("--model sizes the built-in generator; a plug-in reports its own "
                               "bytes%s", "");
    }
    if (pp_pipeline_finish(&a->o) < 0) return PPV_EXIT_BAD_INPUT;
    if (a->plan && (a->record || a->trace_out || a->replay || a->compare_kv || a->repeat > 1 ||
                    a->transport))
        return usage_error("--plan runs nothing: it takes no --record, --trace-out, --replay, "
                           "--compare-kv, --repeat or --transport%s", "");
    if (a->nsweep && (a->plan || a->record || a->trace_out || a->replay || a->compare_kv ||
                      a->repeat > 1 || a->transport))
        return usage_error("--sweep runs the mock once a depth: it takes no --plan, --record, "
                           "--trace-out, --replay, --compare-kv, --repeat or --transport%s", "");
    if (a->memory_svg && (a->plan || a->nsweep || a->compare_kv || a->transport))
        return usage_error("--memory-svg draws one run on the mock: not with --plan, --sweep, "
                           "--compare-kv or --transport%s", "");
    if (a->ncaps && a->compare_kv)
        return usage_error("--mem-cap gates one run or --plan: not with %s", "--compare-kv");
    if (a->transport && a->mock_option)
        return usage_error("%s is the mock transport's: on --transport mpi or nccl the ranks are "
                           "processes that MPI or NCCL schedules",
                           a->mock_option);
    if (!a->transport && a->o.worker_watchdog_s > 0)
        return usage_error("%s is for --transport mpi or nccl (the mock's watchdog counts steps: "
                           "--watchdog-steps)",
                           "--worker-watchdog");
    if (!a->transport && a->timeout_given)
        return usage_error("%s is for --transport mpi or nccl", "--timeout");
    if (a->transport && strcmp(a->transport, "nccl") == 0 && a->o.poll)
        return usage_error("--poll probes for results, and NCCL has no probe: poll on --transport "
                           "mpi or the mock%s",
                           "");
    if (a->compare_kv &&
        (a->record || a->trace_out || a->o.inject != PPV_INJECT_NONE || a->o.control_only))
        return usage_error("--compare-kv runs its own two configurations: it takes no --record, "
                           "--trace-out, --inject or --control-only%s",
                           "");
    if (a->repeat > 1 && (a->compare_kv || a->replay || a->transport || a->o.control_only))
        return usage_error("--repeat compares runs of a generator on the mock; it takes no %s",
                           a->compare_kv  ? "--compare-kv (which runs its own two)"
                           : a->replay    ? "--replay"
                           : a->transport ? "--transport"
                                          : "--control-only (no generator runs)");
    if (a->replay) {
        if (a->compare_kv)
            return usage_error("--replay runs one interleaving; --compare-kv runs two%s", "");
        int32_t nranks = 0;
        /* 4 bytes a decision, at most this machine's memory */
        if (replay_trace_read(a->replay, physical_memory() / 4, &a->rt, &a->o.policy, &a->o.fault,
                              &nranks) < 0)
            return PPV_EXIT_BAD_INPUT;
        if (nranks != 1 + a->o.mesh) {
            fprintf(stderr, "ppv pp: %s is a trace of %d ranks; stage 0 and a mesh of %d are %d\n",
                    a->replay, nranks, a->o.mesh, 1 + a->o.mesh);
            return PPV_EXIT_BAD_INPUT;
        }
    }
    if (a->o.device && a->o.control_only)
        return usage_error("--control-only runs no model, so it has no --device%s", "");
    if (a->record && a->o.control_only)
        return usage_error("--control-only computes nothing worth recording: no --record%s", "");
    return -1;
}

/* --seed-bug list: every seeded bug, what it breaks and the options that
 * show it. */
static int list_bugs(int json) {
    if (json) {
        json_object *arr = json_object_new_array();
        for (int b = 1; b < PPV_PP_BUG_COUNT; b++) {
            json_object *o = json_object_new_object();
            json_object_object_add(o, "name", json_object_new_string(ppv_pp_bug_token(b)));
            json_object_object_add(o, "breaks", json_object_new_string(ppv_pp_bug_text(b)));
            json_object_object_add(o, "shows_with", json_object_new_string(ppv_pp_bug_needs(b)));
            json_object_array_add(arr, o);
        }
        puts(json_object_to_json_string_ext(arr, JSON_C_TO_STRING_PLAIN |
                                                     JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(arr);
        return PPV_EXIT_OK;
    }
    printf("seeded bugs: deliberately broken variants of the reference, for measuring the "
           "explorer (never what ppv pp runs without --seed-bug)\n");
    for (int b = 1; b < PPV_PP_BUG_COUNT; b++)
        printf("  %-24s %s\n  %-24s shows with: %s\n", ppv_pp_bug_token(b), ppv_pp_bug_text(b),
               "", ppv_pp_bug_needs(b));
    return PPV_EXIT_OK;
}

static int list_injections(int json) {
    if (json) {
        json_object *arr = json_object_new_array();
        for (int i = 1; i < PPV_INJECT_COUNT; i++) {
            json_object *o = json_object_new_object();
            ppv_failure m = ppv_pp_inject_mode((ppv_pp_inject)i);
            json_object_object_add(o, "name", json_object_new_string(ppv_pp_inject_token(i)));
            json_object_object_add(o, "failure_mode",
                                   m ? json_object_new_string(ppv_failure_id(m)) : NULL);
            json_object_object_add(
                o, "caught_by",
                json_object_new_string(ppv_pp_point_name(ppv_pp_inject_caught_by(i))));
            json_object_object_add(o, "what", json_object_new_string(ppv_pp_inject_text(i)));
            json_object_array_add(arr, o);
        }
        puts(json_object_to_json_string_ext(arr, JSON_C_TO_STRING_PLAIN |
                                                      JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(arr);
        return PPV_EXIT_OK;
    }
    printf("%-21s %-13s %-14s %s\n", "injection", "must produce", "caught by", "what it does");
    for (int i = 1; i < PPV_INJECT_COUNT; i++) {
        ppv_failure m = ppv_pp_inject_mode((ppv_pp_inject)i);
        printf("%-21s %-13s %-14s %s\n", ppv_pp_inject_token(i),
               m ? ppv_failure_id(m) : "ok (counted)",
               ppv_pp_point_name(ppv_pp_inject_caught_by(i)), ppv_pp_inject_text(i));
    }
    return PPV_EXIT_OK;
}

static json_object *calls_json(const int64_t *v, int64_t n) {
    json_object *a = json_object_new_array();
    for (int64_t k = 0; k < n; k++)
        json_object_array_add(a, json_object_new_int64(v[k]));
    return a;
}

static void describe(const ppv_pp_options *o, FILE *f) {
    fprintf(f, "stage 0 + a mesh of %d (%s), %d chunks of %d steps, KV %s (window %d frames",
            o->mesh, o->mesh == 1 ? "PP0" : "PP1", o->chunks, o->steps,
            o->kv_recompute ? "recompute" : "stash", o->kv_window);
    if (o->kv_recompute) fprintf(f, ", recompute every %d", o->recompute_every);
    fprintf(f, "), D_in %d, D_out %d", o->d_in, o->d_out);
    for (int32_t i = 0; i < o->ncuts; i++)
        fprintf(f, "%s%d", i ? "," : ", hard cut before chunk ", o->cuts[i]);
    if (o->control_only) fprintf(f, ", control plane only");
    if (o->bug) fprintf(f, ", seeded bug %s", ppv_pp_bug_token(o->bug));
    fputc('\n', f);
}

/* The generator a run's mesh runs: its name, version and settings text
 * (the built-in's from --generator-params); name NULL for --control-only. */
typedef struct generator_named {
    const char *name, *version;
    char params[512];
} generator_named;

static generator_named generator_of(const ppv_pp_options *o) {
    generator_named g = {NULL, NULL, ""};
    if (o->control_only) return g;
    const ppv_generator *t = o->generator ? o->generator : ppv_generator_builtin();
    g.name = t->name;
    g.version = t->version;
    if (o->generator) snprintf(g.params, sizeof g.params, "%s", o->generator_params ? o->generator_params : "");
    else if (ppv_gen_config_format(&o->model, g.params, sizeof g.params) < 0) g.params[0] = 0;
    return g;
}

static void print_generator(const ppv_pp_options *o) {
    generator_named g = generator_of(o);
    if (!g.name) printf("generator: none (control plane only)\n");
    else printf("generator: %s %s, settings '%s'\n", g.name, g.version, g.params);
}

static void generator_json(json_object *j, const ppv_pp_options *o) {
    generator_named g = generator_of(o);
    json_object_object_add(j, "generator", g.name ? json_object_new_string(g.name) : NULL);
    json_object_object_add(j, "generator_version",
                           g.name ? json_object_new_string(g.version) : NULL);
    json_object_object_add(j, "generator_params", g.name ? json_object_new_string(g.params) : NULL);
}

/* ---- memory ---------------------------------------------------------------------- */

/* "rank 0 (stage 0)", "rank 1 (leader)", "rank 2 (worker)" or "link 0-1". */
static const char *row_name(int32_t k, int32_t nranks, char *buf, size_t n) {
    if (k == nranks) snprintf(buf, n, "link 0-1");
    else snprintf(buf, n, "rank %d (%s)", k, ppv_pp_role_name(k));
    return buf;
}

/* "envelopes 123, results 45" over the kinds that hold bytes. */
static void breakdown(const uint64_t *kinds, char *buf, size_t n) {
    size_t at = 0;
    buf[0] = 0;
    for (int k = 0; k < PPV_MEM_KIND_COUNT && at < n; k++)
        if (kinds[k])
            at += (size_t)snprintf(buf + at, n - at, "%s%s %" PRIu64, at ? ", " : "",
                                   ppv_pp_mem_kind_name(k), kinds[k]);
    if (!at) snprintf(buf, n, "nothing");
}

/* "at chunk 2, call_id 2 (warm-up)", or "at start (warm-up)". */
static void peak_when(const ppv_pp_mem_row *r, char *buf, size_t n) {
    if (r->peak_chunk < 0)
        snprintf(buf, n, "at start (%s)", ppv_pp_phase_name(r->peak_phase));
    else
        snprintf(buf, n, "at chunk %" PRId64 ", call_id %" PRId64 " (%s)", r->peak_chunk,
                 r->peak_call_id, ppv_pp_phase_name(r->peak_phase));
}

/* How the link's row was had: measured on the mock, a bound (--plan), or
 * not counted (on processes the copies are MPI's or NCCL's). */
enum { LINK_MEASURED, LINK_BOUND, LINK_NOT_COUNTED };

static void print_memory(const ppv_pp_mem_row *rows, int32_t nranks, int link_bound) {
    for (int32_t k = 0; k <= nranks; k++) {
        const ppv_pp_mem_row *r = &rows[k];
        char name[64], human[32], when[96], held[512];
        row_name(k, nranks, name, sizeof name);
        human_bytes((double)r->peak, human, sizeof human);
        if (k == nranks && link_bound == LINK_NOT_COUNTED) {
            printf("memory, %s: not counted on processes (its copies are the transport's own "
                   "buffers)\n",
                   name);
            continue;
        }
        if (k == nranks) {
            if (link_bound == LINK_BOUND)
                printf("memory, %s (the transport's buffered copies): at most %" PRIu64
                       " bytes (%s): D_in messages at their largest\n",
                       name, r->peak, human);
            else
                printf("memory, %s (the transport's buffered copies): peak %" PRIu64 " bytes (%s)\n",
                       name, r->peak, human);
            continue;
        }
        peak_when(r, when, sizeof when);
        breakdown(r->at_peak, held, sizeof held);
        printf("memory, %s: peak %" PRIu64 " bytes (%s) %s: %s\n", name, r->peak, human, when,
               held);
    }
}

static json_object *memory_json(const ppv_pp_mem_row *rows, int32_t nranks, int link_bound) {
    json_object *arr = json_object_new_array();
    for (int32_t k = 0; k <= nranks; k++) {
        const ppv_pp_mem_row *r = &rows[k];
        json_object *o = json_object_new_object();
        char name[64];
        json_object_object_add(o, "row", json_object_new_string(row_name(k, nranks, name, sizeof name)));
        json_object_object_add(o, "rank", k < nranks ? json_object_new_int(k) : NULL);
        int counted = k < nranks || link_bound != LINK_NOT_COUNTED;
        json_object_object_add(o, "peak_bytes",
                               counted ? json_object_new_int64((int64_t)r->peak) : NULL);
        json_object_object_add(o, "bound",
                               json_object_new_boolean(k == nranks && link_bound == LINK_BOUND));
        json_object_object_add(o, "counted", json_object_new_boolean(counted));
        int has = k < nranks;
        json_object_object_add(o, "chunk", has && r->peak_chunk >= 0 ? json_object_new_int64(r->peak_chunk) : NULL);
        json_object_object_add(o, "call_id", has && r->peak_call_id >= 0 ? json_object_new_int64(r->peak_call_id) : NULL);
        json_object_object_add(o, "phase", has ? json_object_new_string(ppv_pp_phase_name(r->peak_phase)) : NULL);
        json_object_object_add(o, "t_ns", r->peak_t_ns >= 0 ? json_object_new_int64(r->peak_t_ns) : NULL);
        json_object *b = json_object_new_object();
        for (int i = 0; i < PPV_MEM_KIND_COUNT; i++)
            json_object_object_add(b, ppv_pp_mem_kind_name(i), json_object_new_int64((int64_t)r->at_peak[i]));
        json_object_object_add(o, "at_peak", b);
        json_object_object_add(o, "held_at_end_bytes",
                               link_bound != LINK_MEASURED && k == nranks
                                   ? NULL
                                   : json_object_new_int64((int64_t)r->total));
        json_object *tl = NULL;
        if (r->timeline) { /* [t_ns, bytes] after every change */
            tl = json_object_new_array();
            for (int64_t i = 0; i < r->ntimeline; i++) {
                json_object *pt = json_object_new_array();
                json_object_array_add(pt, json_object_new_int64(r->timeline[i].t_ns));
                json_object_array_add(pt, json_object_new_int64((int64_t)r->timeline[i].bytes));
                json_object_array_add(tl, pt);
            }
        }
        json_object_object_add(o, "timeline", tl);
        json_object_array_add(arr, o);
    }
    return arr;
}

/* --mem-cap: the first rank over, said (text) or described (JSON); 1 when
 * one is over, else 0. */
static int mem_cap_verdict(const pp_args *a, const ppv_pp_mem_row *rows, int32_t nranks,
                           json_object *j) {
    if (!a->ncaps || !rows) return 0;
    int32_t k = ppv_pp_mem_over(rows, nranks, a->caps, a->ncaps);
    json_object *v = NULL;
    if (k >= 0) {
        const ppv_pp_mem_row *r = &rows[k];
        double cap = a->caps[k < a->ncaps ? k : a->ncaps - 1];
        char name[64], human[32], chuman[32], when[96], held[512];
        row_name(k, nranks, name, sizeof name);
        human_bytes((double)r->peak, human, sizeof human);
        human_bytes(cap, chuman, sizeof chuman);
        peak_when(r, when, sizeof when);
        breakdown(r->at_peak, held, sizeof held);
        char text[1024];
        snprintf(text, sizeof text,
                 "%s peaks at %" PRIu64 " bytes (%s), %.0f bytes over its cap of %.0f (%s), %s: "
                 "it held %s",
                 name, r->peak, human, (double)r->peak - cap, cap, chuman, when, held);
        if (j) {
            v = json_object_new_object();
            json_object_object_add(v, "rank", json_object_new_int(k));
            json_object_object_add(v, "cap_bytes", json_object_new_int64((int64_t)cap));
            json_object_object_add(v, "over_bytes", json_object_new_int64((int64_t)((double)r->peak - cap)));
            json_object_object_add(v, "message", json_object_new_string(text));
        } else
            printf("memory: %s\n", text);
    }
    if (j) json_object_object_add(j, "over_mem_cap", v);
    return k >= 0;
}

/* --memory-svg: a panel a row (each rank, then the link) of its bytes over
 * time as a step line, its peak marked; stage 0's phases as bands behind
 * them and each hard cut (the start of a new epoch) as a dashed line.
 * 0, or -1 when a write failed. */
static int memory_svg(FILE *f, const ppv_pp_mem_row *rows, int32_t nranks) {
    static const char *const fill[PPV_PHASE_COUNT] = {"#fdf1d6", "#ffffff", "#f9dcdc", "#dcecf9",
                                                      "#ececec"};
    const double W = 960, left = 150, right = 20, top = 50, ph = 100, gap = 26;
    int32_t n = nranks + 1;
    double H = top + n * (ph + gap) + 10, pw = W - left - right;
    int64_t tmax = 1;
    for (int32_t k = 0; k < n; k++)
        for (int64_t i = 0; i < rows[k].ntimeline; i++)
            if (rows[k].timeline[i].t_ns > tmax) tmax = rows[k].timeline[i].t_ns;
#define X_AT(t) (left + pw * (double)(t) / (double)tmax)
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
            "font-family=\"sans-serif\" font-size=\"11\">\n", W, H);
    fprintf(f, "<text x=\"%.0f\" y=\"18\" font-size=\"14\">ppv pp: bytes held by each rank over "
            "the run (virtual time, %" PRId64 " us)</text>\n", left, tmax / 1000);
    /* stage 0's phases, as bands over every panel, and the cuts */
    const ppv_pp_mem_row *s0 = &rows[0];
    int64_t from = 0;
    ppv_pp_phase cur = PPV_PHASE_WARMUP;
    for (int64_t i = 0; i <= s0->ntimeline; i++) {
        int end = i == s0->ntimeline;
        if (!end && s0->timeline[i].phase == cur) continue;
        int64_t to = end ? tmax : s0->timeline[i].t_ns;
        fprintf(f, "<rect class=\"phase\" x=\"%.1f\" y=\"%.0f\" width=\"%.1f\" height=\"%.0f\" "
                "fill=\"%s\"><title>%s</title></rect>\n", X_AT(from), top - 14,
                X_AT(to) - X_AT(from), H - top, fill[cur], ppv_pp_phase_name(cur));
        if (end) break;
        cur = s0->timeline[i].phase;
        from = to;
        if (cur == PPV_PHASE_NEW_EPOCH)
            fprintf(f, "<line class=\"cut\" x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" "
                    "stroke=\"#c0392b\" stroke-dasharray=\"4,3\"/><text x=\"%.1f\" y=\"%.0f\" "
                    "fill=\"#c0392b\">hard cut</text>\n", X_AT(to), top - 14, X_AT(to), H,
                    X_AT(to) + 3, top - 4);
    }
    for (int p = 0; p < PPV_PHASE_COUNT; p++) /* the legend */
        fprintf(f, "<rect x=\"%.0f\" y=\"26\" width=\"10\" height=\"10\" fill=\"%s\" "
                "stroke=\"#999\"/><text x=\"%.0f\" y=\"35\">%s</text>\n", left + 430 + p * 95.0,
                fill[p], left + 444 + p * 95.0, ppv_pp_phase_name(p));
    for (int32_t k = 0; k < n; k++) {
        const ppv_pp_mem_row *r = &rows[k];
        double y0 = top + k * (ph + gap), base = y0 + ph;
        double ymax = r->peak ? (double)r->peak : 1;
        char name[64], human[32];
        fprintf(f, "<text x=\"8\" y=\"%.0f\">%s</text>\n", y0 + 14,
                row_name(k, nranks, name, sizeof name));
        fprintf(f, "<text x=\"8\" y=\"%.0f\" fill=\"#555\">peak %s</text>\n", y0 + 30,
                human_bytes((double)r->peak, human, sizeof human));
        fprintf(f, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"#333\"/>\n",
                left, base, left + pw, base);
        fprintf(f, "<polyline class=\"bytes\" fill=\"none\" stroke=\"#1f5fa8\" "
                "stroke-width=\"1.2\" points=\"%.1f,%.1f", left, base);
        uint64_t last = 0;
        for (int64_t i = 0; i < r->ntimeline; i++) {
            double x = X_AT(r->timeline[i].t_ns);
            fprintf(f, " %.1f,%.1f %.1f,%.1f", x, base - ph * (double)last / ymax, x,
                    base - ph * (double)r->timeline[i].bytes / ymax);
            last = r->timeline[i].bytes;
        }
        fprintf(f, " %.1f,%.1f\"/>\n", left + pw, base - ph * (double)last / ymax);
        if (r->peak && r->peak_t_ns >= 0) {
            char when[96];
            peak_when(r, when, sizeof when);
            double x = X_AT(r->peak_t_ns);
            fprintf(f, "<circle class=\"peak\" cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"#c0392b\"/>"
                    "<text x=\"%.1f\" y=\"%.1f\" fill=\"#c0392b\">peak %" PRIu64 " bytes %s</text>\n",
                    x, base - ph, x + 6 < left + pw - 300 ? x + 6 : left + pw - 300, y0 - 3,
                    r->peak, k == nranks ? "" : when);
        }
    }
#undef X_AT
    fprintf(f, "</svg>\n");
    return ferror(f) ? -1 : 0;
}

typedef struct memory_rows {
    const ppv_pp_mem_row *rows;
    int32_t nranks;
} memory_rows;

static int write_svg(FILE *f, const void *arg) {
    const memory_rows *m = arg;
    return memory_svg(f, m->rows, m->nranks);
}

static int write_memory_svg(const char *path, const ppv_pp_mem_row *rows, int32_t nranks) {
    memory_rows m = {rows, nranks};
    return write_atomically(path, write_svg, &m, NULL);
}

/* A run that ended well gives every buffer back: the first row that still
 * holds bytes, said in text (into buf), or -1. */
static int32_t mem_held_at_end(const ppv_pp_mem_row *rows, int32_t nranks, char *buf, size_t n) {
    for (int32_t k = 0; rows && k <= nranks; k++) {
        if (!rows[k].total) continue;
        char name[64], held[512];
        breakdown(rows[k].now, held, sizeof held);
        snprintf(buf, n,
                 "%s still holds %" PRIu64 " bytes at the end of the run (%s): a buffer that is "
                 "never given back, so its bytes grow with the chunks",
                 row_name(k, nranks, name, sizeof name), rows[k].total, held);
        return k;
    }
    return -1;
}

/* A replayed trace, judged (cli.h). */
static replay_judgement judge_replay(const pp_args *a, const ppv_pp_report *r) {
    replay_judgement j;
    memset(&j, 0, sizeof j);
    if (!a->replay) return j;
    if (r->world.diverged) {
        j.diverged = 1;
    } else if (a->rt.verdict.present) {
        j.judged = 1;
        j.passes = ppv_fuzz_judge_pp(&a->o, r, a->rt.verdict.reference, j.why, sizeof j.why);
    }
    return j;
}

static int print_report(const pp_args *a, const ppv_pp_report *r) {
    const ppv_pp_options *o = &a->o;
    int expected = ppv_pp_as_injected(o, r);
    replay_judgement rj = judge_replay(a, r);
    /* a replayed failure fails again; a trace that no longer fails, or ran
     * another program, says so */
    if (rj.diverged || (rj.judged && !rj.passes)) expected = 0;
    else if (rj.judged) expected = 1;
    int32_t nranks = 1 + o->mesh, over = 0;
    if (a->json) {
        json_object *j = json_object_new_object();
        json_object_object_add(j, "ok", json_object_new_boolean(r->ok));
        json_object_object_add(j, "failure_mode",
                               r->ok ? NULL : json_object_new_string(ppv_failure_id(r->failure)));
        json_object_object_add(
            j, "caught_by", r->ok ? NULL : json_object_new_string(ppv_pp_point_name(r->caught_by)));
        json_object_object_add(j, "failed_rank", r->ok ? NULL : json_object_new_int(r->failed_rank));
        json_object_object_add(j, "message", json_object_new_string(r->message));
        json_object_object_add(j, "inject", o->inject ? json_object_new_string(
                                                           ppv_pp_inject_token(o->inject))
                                                     : NULL);
        json_object_object_add(j, "as_expected", json_object_new_boolean(expected));
        json_object_object_add(j, "chunks_emitted", json_object_new_int64(r->chunks_emitted));
        json_object_object_add(j, "expected_generator_calls",
                               calls_json(r->expected_calls, r->chunks_emitted));
        json_object_object_add(j, "observed_generator_calls",
                               calls_json(r->observed_calls, r->chunks_emitted));
        json_object_object_add(j, "dropped_stale", json_object_new_int64(r->dropped_stale));
        json_object_object_add(j, "dropped_duplicate", json_object_new_int64(r->dropped_duplicate));
        json_object_object_add(j, "heartbeats", json_object_new_int64(r->heartbeats));
        json_object_object_add(j, "reordered", json_object_new_int64(r->reordered));
        json_object_object_add(j, "retried", json_object_new_int64(r->retried));
        json_object_object_add(j, "unknown_fields", json_object_new_int64(r->unknown_fields));
        json_object_object_add(j, "first_unknown_field",
                               r->unknown_fields ? json_object_new_string(r->unknown_field) : NULL);
        json_object *ov = NULL;
        if (r->overlap.samples) { /* the contract's metric, medians after the warm-up */
            ov = json_object_new_object();
            json_object_object_add(ov, "samples", json_object_new_int64(r->overlap.samples));
            json_object_object_add(ov, "score", finite_json(r->overlap.score));
            json_object_object_add(ov, "period_ms", finite_json(r->overlap.period_ms));
            json_object_object_add(ov, "stage0_ms", finite_json(r->overlap.stage0_ms));
            json_object_object_add(ov, "stage1_ms", finite_json(r->overlap.stage1_ms));
            json_object_object_add(ov, "hidden_ms", finite_json(r->overlap.hidden_ms));
            json_object_object_add(ov, "mesh_idle_ms",
                                   finite_json(r->overlap.mesh_idle_ms));
            json_object_object_add(ov, "decode_ms", finite_json(r->overlap.decode_ms));
        }
        json_object_object_add(j, "overlap", ov);
        json_object_object_add(j, "max_inflight", json_object_new_int(r->max_inflight));
        json_object_object_add(j, "max_ready", json_object_new_int(r->max_ready));
        /* a run that failed has no output to digest */
        json_object_object_add(j, "output_digest", r->ok ? hex_json(r->output_digest) : NULL);
        generator_json(j, o);
        json_object_object_add(j, "device", json_object_new_string(o->device ? o->device : "cpu"));
        json_object_object_add(j, "transport",
                               json_object_new_string(o->proc ? ppv_proc_name(o->proc) : "mock"));
        json_object_object_add(j, "scheduler_steps", json_object_new_int64(r->world.steps));
        json_object_object_add(j, "trace_digest", hex_json(r->world.trace_digest));
        json_object *bl = json_object_new_array();
        for (int32_t k = 0; k < r->world.nblocked; k++)
            json_object_array_add(bl, wait_json(&r->world.blocked[k]));
        json_object_object_add(j, "blocked", bl);
        json_object_object_add(j, "replay", a->replay ? replay_json(&rj, &a->rt.verdict) : NULL);
        json_object *rp = NULL;
        if (a->rv.runs > 1) {
            rp = json_object_new_object();
            json_object_object_add(rp, "runs", json_object_new_int(a->rv.runs));
            json_object_object_add(rp, "deterministic", json_object_new_boolean(a->rv.same));
            json_object_object_add(rp, "first_differing_run",
                                   a->rv.same ? NULL : json_object_new_int(a->rv.run));
            json_object_object_add(rp, "first_differing_call_id",
                                   a->rv.same || a->rv.call_id < 0
                                       ? NULL
                                       : json_object_new_int64(a->rv.call_id));
            json_object_object_add(rp, "message",
                                   a->rv.same ? NULL : json_object_new_string(a->rv.why));
        }
        json_object_object_add(j, "repeat", rp);
        json_object_object_add(j, "memory", r->mem ? memory_json(r->mem, nranks, o->proc ? LINK_NOT_COUNTED : LINK_MEASURED) : NULL);
        over = mem_cap_verdict(a, r->mem, nranks, j);
        char held[768];
        int left = r->ok && mem_held_at_end(r->mem, nranks, held, sizeof held) >= 0;
        json_object_object_add(j, "memory_problem", left ? json_object_new_string(held) : NULL);
        over |= left;
        puts(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN |
                                                   JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(j);
    } else {
        printf("ppv pp: ");
        describe(o, stdout);
        print_generator(o);
        printf("emitted %" PRId64 " chunks; generator calls per chunk (expected/observed):",
               r->chunks_emitted);
        for (int64_t k = 0; k < r->chunks_emitted && k < 32; k++)
            printf(" %" PRId64 "/%" PRId64, r->expected_calls[k], r->observed_calls[k]);
        printf("%s\n", r->chunks_emitted > 32 ? " ..." : "");
        printf("dropped: %" PRId64 " stale, %" PRId64 " duplicate; queues at most %d in flight, "
               "%d ready\n",
               r->dropped_stale, r->dropped_duplicate, r->max_inflight, r->max_ready);
        if (r->mem) print_memory(r->mem, nranks, o->proc ? LINK_NOT_COUNTED : LINK_MEASURED);
        if (r->heartbeats)
            printf("heartbeats: %" PRId64 " NOOP%s sent\n", r->heartbeats,
                   r->heartbeats == 1 ? "" : "s");
        if (r->reordered)
            printf("reordered: %" PRId64 " result%s came ahead of %s turn, held in the reorder "
                   "buffer and decoded in call order\n",
                   r->reordered, r->reordered == 1 ? "" : "s", r->reordered == 1 ? "its" : "their");
        if (r->retried)
            printf("retried: %" PRId64 " envelope%s answered from the leader's result cache, "
                   "never run twice\n",
                   r->retried, r->retried == 1 ? "" : "s");
        if (r->unknown_fields) /* logged once: how many, and the first */
            printf("filtered: %" PRId64 " unknown field%s, the first '%s' (call_id %" PRId64
                   "): a newer sender's, ignored\n",
                   r->unknown_fields, r->unknown_fields == 1 ? "" : "s", r->unknown_field,
                   r->unknown_field_call_id);
        if (r->overlap.samples && (o->cost_decode || o->cost_call || o->proc))
            printf("overlap: OverlapScore %.3f over %" PRId64 " chunks (median period %.3f ms, "
                   "stage 0 %.3f, the mesh %.3f, hidden %.3f; the mesh idle %.3f ms, a decode "
                   "%.3f ms)\n",
                   r->overlap.score, r->overlap.samples, r->overlap.period_ms,
                   r->overlap.stage0_ms, r->overlap.stage1_ms, r->overlap.hidden_ms,
                   r->overlap.mesh_idle_ms, r->overlap.decode_ms);
        if (r->ok) /* a run that failed has no output to digest */
            printf("output digest: %016" PRIx64 "%s\n", r->output_digest,
                   o->device && strcmp(o->device, "cpu") != 0 ? " (generator on cuda)" : "");
        if (o->proc)
            printf("transport: %s, %d processes (no trace: the transport, not ppv, orders the "
                   "ranks)\n",
                   ppv_proc_name(o->proc), ppv_proc_size(o->proc));
        else
            printf("scheduler steps: %" PRId64 " (trace digest %016" PRIx64 ")\n", r->world.steps,
                   r->world.trace_digest);
        if (!r->ok)
            printf("failure: %s caught by %s on rank %d: %s\n", ppv_failure_id(r->failure),
                   ppv_pp_point_name(r->caught_by), r->failed_rank, r->message);
        if (o->inject)
            printf("injection %s: must give %s (%s): %s\n", ppv_pp_inject_token(o->inject),
                   ppv_pp_inject_mode(o->inject) ? ppv_failure_id(ppv_pp_inject_mode(o->inject))
                                                 : "ok, the fault counted",
                   ppv_pp_point_name(ppv_pp_inject_caught_by(o->inject)),
                   expected ? "it did" : "IT DID NOT");
        if (a->rv.runs > 1 && a->rv.same)
            printf("repeat: %d runs in fresh generator state, every result's output digest the "
                   "same\n",
                   a->rv.runs);
        else if (a->rv.runs > 1)
            printf("repeat: %s\n", a->rv.why);
        over = mem_cap_verdict(a, r->mem, nranks, NULL);
        char held[768];
        if (r->ok && mem_held_at_end(r->mem, nranks, held, sizeof held) >= 0) {
            printf("memory: %s\n", held);
            over = 1;
        }
        if (!print_replay(&rj, &a->rt.verdict, r->world.message))
            printf("result: %s\n", over                     ? "PROBLEM"
                                   : r->ok && a->rv.same   ? "OK"
                                   : o->inject && expected ? "CAUGHT"
                                                           : "PROBLEM");
    }
    return expected && a->rv.same && !over ? PPV_EXIT_OK : PPV_EXIT_PROBLEM;
}

/* ---- --record ------------------------------------------------------------------------ */

static int record_call(void *ctx, const ppv_envelope *e, const ppv_result *r, char *err,
                       size_t errlen) {
    return ppv_inference_append(ctx, e, r, err, errlen);
}

static int record_event(void *ctx, const ppv_pp_event *ev, char *err, size_t errlen) {
    return ppv_inference_event(ctx, ev, err, errlen);
}

static int record_rank(void *ctx, int32_t mesh_rank, ppv_pp_rank_record kind, int64_t call_id,
                       uint64_t value, char *err, size_t errlen) {
    return ppv_inference_rank_value(ctx, mesh_rank, kind, call_id, value, err, errlen);
}

/* ---- --compare-kv --------------------------------------------------------------------- */

static void print_diff(const char *what, const ppv_grad_diff *d, const char *where) {
    if (d->bitwise_equal)
        printf("%s: bitwise equal\n", what);
    else
        printf("%s: differ: max %" PRIu64 " ULP, max abs %.9g, max rel %.9g, first at %s (stash "
               "%.9g, recompute %.9g)\n",
               what, d->max_ulp, d->max_abs, d->max_rel, where, (double)d->first_b,
               (double)d->first_a);
}

/* Folds chunk d into the running total t, keeping t's first difference
 * (and where, from where_now) and the largest figures. */
static void fold_diff(ppv_grad_diff *t, const ppv_grad_diff *d, char *where, size_t n,
                      const char *where_now) {
    if (d->bitwise_equal) return;
    if (t->bitwise_equal) {
        *t = *d;
        snprintf(where, n, "%s", where_now);
        return;
    }
    if (d->max_ulp > t->max_ulp) t->max_ulp = d->max_ulp;
    if (d->max_abs > t->max_abs) t->max_abs = d->max_abs;
    if (d->max_rel > t->max_rel) t->max_rel = d->max_rel;
}

/* Where index i of chunk k's KV snapshot is, in words. */
static void kv_place(const pp_args *a, const ppv_pp_report *s, int64_t k, size_t i, char *buf,
                     size_t n) {
    const ppv_gen_config *g = &a->o.model;
    size_t part = s->kv_floats[k] / (size_t)a->o.mesh;
    int32_t rank = (int32_t)(i / part);
    size_t in = i % part;
    if (a->o.generator) {
        snprintf(buf, n, "chunk %" PRId64 ", mesh rank %d, value %zu of its snapshot", k, rank, in);
        return;
    }
    /* the built-in's snapshot is every layer's K then V of its heads, a row
     * per cached token */
    int32_t tpf = (a->o.height / 16) * (a->o.width / 16), hd = g->d_model / g->n_heads;
    int32_t cols = g->n_heads / a->o.mesh * hd;
    size_t lpart = part / ((size_t)g->layers * 2);
    int32_t layer = (int32_t)(in / (2 * lpart));
    int kv_v = (int)(in / lpart % 2);
    size_t row = in % lpart / (size_t)cols;
    snprintf(buf, n,
             "chunk %" PRId64 ", layer %d, %s, frame %zu of the cache, token %zu, channel %zu", k,
             layer, kv_v ? "V" : "K", row / (size_t)tpf, row % (size_t)tpf,
             (size_t)rank * (size_t)cols + in % lpart % (size_t)cols);
}

/* --compare-kv: the same run with KV stash and with KV recompute. What it
 * can prove: caches of different sizes are always wrong (eviction never
 * changes a cache's size); a chunk whose epoch has evicted nothing yet must
 * be bitwise equal, in its cache and its output; after eviction the two
 * may legitimately differ, unless the generator declares its cache
 * frame-local (PPV_GENERATOR_KV_FRAME_LOCAL), and then every chunk must be
 * equal. */
static int compare_kv(pp_args *a) {
    ppv_pp_options so = a->o, ro = a->o;
    so.kv_recompute = 0;
    ro.kv_recompute = 1;
    so.keep_kv = ro.keep_kv = 1;
    ppv_pp_report *s = NULL, *r = NULL;
    char err[1024];
    if (ppv_pp_run(&so, &s, err, sizeof err) < 0 || ppv_pp_run(&ro, &r, err, sizeof err) < 0) {
        fprintf(stderr, "ppv pp: %s\n", err);
        ppv_pp_report_free(s);
        return PPV_EXIT_BAD_INPUT;
    }
    int rc = PPV_EXIT_OK;
    if (!s->ok || !r->ok) {
        printf("ppv pp --compare-kv: a run failed: %s\n", !s->ok ? s->message : r->message);
        rc = PPV_EXIT_PROBLEM;
        goto done;
    }
    const ppv_generator *gen = a->o.generator ? a->o.generator : ppv_generator_builtin();
    int frame_local = (gen->flags & PPV_GENERATOR_KV_FRAME_LOCAL) != 0;
    int no_kv = !gen->kv_snapshot; /* the outputs alone are compared */
    /* chunk by chunk: the whole run's differences, those of the chunks that
     * must be equal (strict), and the first chunk whose epoch evicted */
    ppv_grad_diff kv = {.bitwise_equal = 1, .first_index = -1}, kv_strict = kv;
    ppv_grad_diff out = kv, out_strict = kv;
    char kv_where[256] = "", kv_strict_where[256] = "", out_where[128] = "",
         out_strict_where[128] = "", sizes[256] = "";
    int64_t first_evicted = -1, strict_chunks = 0;
    size_t per = s->chunks_emitted ? s->noutputs / (size_t)s->chunks_emitted : 0;
    float *fs = malloc((per ? per : 1) * sizeof *fs), *fr = malloc((per ? per : 1) * sizeof *fr);
    if (!fs || !fr) {
        free(fs);
        free(fr);
        fprintf(stderr, "ppv pp: out of memory\n");
        rc = PPV_EXIT_BAD_INPUT;
        goto done;
    }
    int64_t nchunks = s->chunks_emitted < r->chunks_emitted ? s->chunks_emitted : r->chunks_emitted;
    for (int64_t k = 0; k < nchunks; k++) {
        int64_t start = 0; /* frames the stream held before this chunk, in its epoch */
        for (int32_t i = 0; i < a->o.ncuts; i++)
            if (a->o.cuts[i] <= k) start = a->o.cuts[i];
        int evicted = (k - start) * 3 > a->o.kv_window;
        if (evicted && first_evicted < 0) first_evicted = k;
        int strict = frame_local || !evicted;
        strict_chunks += strict;
        char here[256];
        if (!no_kv && k < s->nkv && k < r->nkv && s->kv_floats[k] != r->kv_floats[k]) {
            if (!sizes[0])
                snprintf(sizes, sizeof sizes, "chunk %" PRId64 ": stash holds %zu values, recompute %zu",
                         k, s->kv_floats[k], r->kv_floats[k]);
        } else if (!no_kv && k < s->nkv && k < r->nkv) {
            ppv_grad_diff d;
            ppv_grads_compare(r->kv[k], s->kv[k], s->kv_floats[k], &d);
            if (!d.bitwise_equal) kv_place(a, s, k, (size_t)d.first_index, here, sizeof here);
            fold_diff(&kv, &d, kv_where, sizeof kv_where, here);
            if (strict) fold_diff(&kv_strict, &d, kv_strict_where, sizeof kv_strict_where, here);
        }
        for (size_t i = 0; i < per; i++) {
            fs[i] = ppv_bf16_to_f32(s->outputs[(size_t)k * per + i]);
            fr[i] = ppv_bf16_to_f32(r->outputs[(size_t)k * per + i]);
        }
        ppv_grad_diff d;
        ppv_grads_compare(fr, fs, per, &d);
        if (!d.bitwise_equal)
            snprintf(here, sizeof here, "chunk %" PRId64 ", value %zu", k, (size_t)d.first_index);
        fold_diff(&out, &d, out_where, sizeof out_where, here);
        if (strict) fold_diff(&out_strict, &d, out_strict_where, sizeof out_strict_where, here);
    }
    free(fs);
    free(fr);
    int wrong = sizes[0] || !kv_strict.bitwise_equal || !out_strict.bitwise_equal ||
                s->chunks_emitted != r->chunks_emitted;
    char why[512];
    if (sizes[0])
        snprintf(why, sizeof why, "the caches differ in size (%s): eviction never changes a "
                 "cache's size, so the rebuild leaves frames out or adds some", sizes);
    else if (!kv_strict.bitwise_equal || !out_strict.bitwise_equal)
        snprintf(why, sizeof why, "recompute and stash differ at %s, %s",
                 !kv_strict.bitwise_equal ? kv_strict_where : out_strict_where,
                 frame_local ? "and the generator declares its cache frame-local"
                             : "before the window evicted anything in that epoch");
    else
        why[0] = 0;
    if (a->json) {
        json_object *j = json_object_new_object();
        json_object_object_add(j, "ok", json_object_new_boolean(!wrong));
        json_object_object_add(j, "evicted", json_object_new_boolean(first_evicted >= 0));
        json_object_object_add(j, "first_evicted_chunk",
                               first_evicted < 0 ? NULL : json_object_new_int64(first_evicted));
        json_object_object_add(j, "frame_local", json_object_new_boolean(frame_local));
        json_object_object_add(j, "chunks_compared", json_object_new_int64(nchunks));
        json_object_object_add(j, "chunks_that_must_be_equal", json_object_new_int64(strict_chunks));
        json_object_object_add(j, "kv_sizes_differ",
                               no_kv ? NULL : json_object_new_boolean(sizes[0] != 0));
        json_object_object_add(j, "kv_bitwise_equal",
                               no_kv ? NULL : json_object_new_boolean(kv.bitwise_equal && !sizes[0]));
        json_object_object_add(j, "kv_max_ulp", json_object_new_int64((int64_t)kv.max_ulp));
        json_object_object_add(j, "kv_max_abs", finite_json(kv.max_abs));
        json_object_object_add(j, "kv_max_rel", finite_json(kv.max_rel));
        json_object_object_add(j, "kv_first_difference",
                               kv.bitwise_equal ? NULL : json_object_new_string(kv_where));
        json_object_object_add(j, "output_bitwise_equal",
                               json_object_new_boolean(out.bitwise_equal));
        json_object_object_add(j, "output_max_ulp", json_object_new_int64((int64_t)out.max_ulp));
        json_object_object_add(j, "output_max_abs", finite_json(out.max_abs));
        json_object_object_add(j, "output_max_rel", finite_json(out.max_rel));
        json_object_object_add(j, "output_first_difference",
                               out.bitwise_equal ? NULL : json_object_new_string(out_where));
        json_object_object_add(j, "problem", wrong ? json_object_new_string(why) : NULL);
        json_object_object_add(j, "stash_output_digest", hex_json(s->output_digest));
        json_object_object_add(j, "recompute_output_digest", hex_json(r->output_digest));
        const ppv_pp_report *both[2] = {s, r};
        static const char *const names[2] = {"stash", "recompute"};
        for (int i = 0; i < 2; i++) { /* each policy's cost: bytes, calls, virtual time */
            json_object *p = json_object_new_object();
            json_object_object_add(p, "generator_calls", json_object_new_int64(both[i]->generator_calls));
            json_object_object_add(p, "virtual_time_us", json_object_new_int64(both[i]->world.steps));
            json_object *peaks = json_object_new_array();
            for (int32_t k = 0; both[i]->mem && k < both[i]->nmem - 1; k++)
                json_object_array_add(peaks, json_object_new_int64((int64_t)both[i]->mem[k].peak));
            json_object_object_add(p, "peak_bytes", peaks);
            json_object_object_add(j, names[i], p);
        }
        generator_json(j, &a->o);
        puts(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN |
                                                   JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(j);
    } else {
        printf("ppv pp --compare-kv: KV stash against KV recompute (every %d), ",
               a->o.recompute_every);
        describe(&ro, stdout);
        print_generator(&a->o);
        const ppv_pp_report *both[2] = {s, r};
        static const char *const names[2] = {"stash", "recompute"};
        for (int i = 0; i < 2; i++) { /* each policy's cost */
            printf("%s: %" PRId64 " generator calls, %" PRId64 " us of virtual time, peak bytes by "
                   "rank", names[i], both[i]->generator_calls, both[i]->world.steps);
            for (int32_t k = 0; both[i]->mem && k < both[i]->nmem - 1; k++)
                printf(" %" PRIu64, both[i]->mem[k].peak);
            printf("\n");
        }
        if (no_kv)
            printf("kv caches: not compared (generator %s %s keeps no snapshot)\n", gen->name,
                   gen->version);
        else if (sizes[0])
            printf("kv caches: differ in size: %s\n", sizes);
        else
            print_diff("kv caches", &kv, kv_where);
        print_diff("outputs", &out, out_where);
        if (frame_local)
            printf("generator %s %s declares its cache frame-local, so all %" PRId64 " chunks must "
                   "be bitwise equal, evicted or not\n",
                   gen->name, gen->version, nchunks);
        else if (first_evicted >= 0)
            printf("the window evicted frames from chunk %" PRId64 " on: the %" PRId64 " chunks "
                   "before any eviction in their epoch must be bitwise equal; the others may "
                   "legitimately differ (the generator does not declare its cache frame-local)\n",
                   first_evicted, strict_chunks);
        else
            printf("nothing was evicted, so all %" PRId64 " chunks must be bitwise equal\n",
                   nchunks);
        if (wrong) printf("result: PROBLEM (%s)\n", why);
        else printf("result: OK\n");
    }
    if (wrong) rc = PPV_EXIT_PROBLEM;
done:
    ppv_pp_report_free(s);
    ppv_pp_report_free(r);
    return rc;
}

static int run_pp(pp_args *a);

/* --sweep d=...: one run a depth, a table (or JSON) of what a team weighs
 * before raising it. */
static int sweep_pp(const pp_args *a) {
    int32_t nranks = 1 + a->o.mesh;
    int bad = 0;
    json_object *arr = a->json ? json_object_new_array() : NULL;
    if (!a->json) {
        printf("ppv pp --sweep: ");
        describe(&a->o, stdout);
        printf("%6s %12s %14s %s\n", "D", "OverlapScore", "mesh idle ms", "peak bytes by rank");
    }
    for (int i = 0; i < a->nsweep; i++) {
        ppv_pp_options o = a->o;
        o.d_in = o.d_out = a->sweep[i];
        ppv_pp_report *r = NULL;
        char err[1024];
        if (ppv_pp_options_check(&o, err, sizeof err) < 0 || ppv_pp_run(&o, &r, err, sizeof err) < 0) {
            fprintf(stderr, "ppv pp: --sweep d=%d: %s\n", a->sweep[i], err);
            json_object_put(arr);
            return PPV_EXIT_BAD_INPUT;
        }
        int over = a->ncaps && ppv_pp_mem_over(r->mem, nranks, a->caps, a->ncaps) >= 0;
        bad |= !r->ok || over;
        if (arr) {
            json_object *j = json_object_new_object();
            json_object_object_add(j, "d", json_object_new_int(a->sweep[i]));
            json_object_object_add(j, "ok", json_object_new_boolean(r->ok));
            json_object_object_add(j, "message", r->ok ? NULL : json_object_new_string(r->message));
            json_object_object_add(j, "overlap_score", r->overlap.samples ? finite_json(r->overlap.score) : NULL);
            json_object_object_add(j, "mesh_idle_ms", r->overlap.samples ? finite_json(r->overlap.mesh_idle_ms) : NULL);
            json_object *peaks = json_object_new_array();
            for (int32_t k = 0; k < nranks; k++)
                json_object_array_add(peaks, json_object_new_int64((int64_t)r->mem[k].peak));
            json_object_object_add(j, "peak_bytes", peaks);
            json_object_object_add(j, "over_mem_cap", json_object_new_boolean(over));
            json_object_array_add(arr, j);
        } else {
            char score[32] = "-", idle[32] = "-";
            if (r->overlap.samples) {
                snprintf(score, sizeof score, "%.3f", r->overlap.score);
                snprintf(idle, sizeof idle, "%.3f", r->overlap.mesh_idle_ms);
            }
            printf("%6d %12s %14s", a->sweep[i], score, idle);
            for (int32_t k = 0; k < nranks; k++)
                printf(" %" PRIu64, r->mem[k].peak);
            printf("%s%s\n", over ? "  over --mem-cap" : "", r->ok ? "" : "  FAILED");
            if (!r->ok) printf("  d=%d: %s\n", a->sweep[i], r->message);
        }
        ppv_pp_report_free(r);
    }
    if (arr) {
        puts(json_object_to_json_string_ext(arr, JSON_C_TO_STRING_PLAIN |
                                                     JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(arr);
    } else {
        if (!a->o.cost_decode && !a->o.cost_call)
            printf("(no --cost: the OverlapScore needs the stages to take time)\n");
        printf("result: %s\n", bad ? "PROBLEM" : "OK");
    }
    return bad ? PPV_EXIT_PROBLEM : PPV_EXIT_OK;
}

/* --plan: the prediction, printed as a run's memory lines are. */
static int plan_pp(const pp_args *a) {
    ppv_pp_plan pl;
    char err[1024];
    if (ppv_pp_plan_run(&a->o, a->elem, &pl, err, sizeof err) < 0) {
        fprintf(stderr, "ppv pp: %s\n", err);
        return PPV_EXIT_BAD_INPUT;
    }
    int32_t nranks = 1 + a->o.mesh;
    int over;
    if (a->json) {
        json_object *j = json_object_new_object();
        json_object_object_add(j, "plan", json_object_new_boolean(1));
        generator_json(j, &a->o);
        json_object_object_add(j, "generator_reports_bytes", json_object_new_boolean(pl.reported));
        json_object_object_add(j, "dtype_bytes", json_object_new_int(a->elem ? a->elem : 4));
        json_object_object_add(j, "envelope_bytes", json_object_new_int64((int64_t)pl.envelope_bytes));
        json_object_object_add(j, "context_frames_max_bytes",
                               json_object_new_int64((int64_t)pl.context_max_bytes));
        json_object_object_add(j, "result_bytes", json_object_new_int64((int64_t)pl.result_bytes));
        json_object_object_add(j, "memory", memory_json(pl.mem, nranks, LINK_BOUND));
        over = mem_cap_verdict(a, pl.mem, nranks, j);
        json_object_object_add(j, "ok", json_object_new_boolean(!over));
        puts(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN |
                                                   JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(j);
    } else {
        printf("ppv pp --plan: ");
        describe(&a->o, stdout);
        print_generator(&a->o);
        if (!pl.reported)
            printf("generator: reports no bytes (no memory function): ppv's own buffers only\n");
        if (a->elem && a->elem != 4)
            printf("model: the built-in's architecture at %d-byte elements\n", a->elem);
        printf("tensors: an envelope %" PRIu64 " bytes (latents, conditioning, step list) plus "
               "context frames of at most %" PRIu64 ", a result %" PRIu64 "\n",
               pl.envelope_bytes, pl.context_max_bytes, pl.result_bytes);
        print_memory(pl.mem, nranks, LINK_BOUND);
        over = mem_cap_verdict(a, pl.mem, nranks, NULL);
        printf("result: %s\n", over ? "PROBLEM" : "OK");
    }
    ppv_pp_plan_free(&pl);
    return over ? PPV_EXIT_PROBLEM : PPV_EXIT_OK;
}

int cmd_pp(int argc, char **argv) {
    pp_args a;
    int rc = parse_pp_args(argc, argv, &a);
    if (rc < 0) rc = run_pp(&a);
    replay_trace_free(&a.rt);
    return rc;
}

static int run_pp(pp_args *ap) {
    pp_args a = *ap;
    int rc;
    if (a.list == 2) return list_bugs(a.json);
    if (a.list) return list_injections(a.json);
    char err[1024];
    if (ppv_pp_options_check(&a.o, err, sizeof err) < 0) {
        fprintf(stderr, "ppv pp: %s\n(run 'ppv help pp' for usage)\n", err);
        return PPV_EXIT_BAD_INPUT;
    }
    if (a.plan) return plan_pp(&a);
    if (a.nsweep) return sweep_pp(&a);
    if (a.compare_kv) {
        guard_arm(a.json);
        return compare_kv(&a);
    }
    /* --json carries each row's timeline, and --record its samples */
    a.o.mem_timeline = a.json || a.memory_svg || a.record;
    ppv_proc *proc = NULL;
    int lead = 1; /* this process prints the report and writes the file (on MPI, rank 0) */
    if ((rc = start_transport(a.transport, &proc, &lead)) >= 0) return rc;
    a.o.proc = proc;
    ppv_inference_writer *w = NULL;
    if (a.record && lead) {
        ppv_inference_setup setup;
        memset(&setup, 0, sizeof setup); /* an empty generator: the built-in */
        setup.mesh = a.o.mesh;
        setup.kv_window = a.o.kv_window;
        setup.model = a.o.model;
        if (a.o.generator) {
            const char *params = a.o.generator_params ? a.o.generator_params : "";
            if (strlen(params) >= sizeof setup.generator_params ||
                strlen(a.o.generator->name) >= sizeof setup.generator ||
                strlen(a.o.generator->version) >= sizeof setup.generator_version) {
                fprintf(stderr, "ppv pp: --record keeps a generator's name below %zu bytes, its "
                        "version below %zu and its settings below %zu\n",
                        sizeof setup.generator, sizeof setup.generator_version,
                        sizeof setup.generator_params);
                return PPV_EXIT_BAD_INPUT;
            }
            snprintf(setup.generator, sizeof setup.generator, "%s", a.o.generator->name);
            snprintf(setup.generator_version, sizeof setup.generator_version, "%s",
                     a.o.generator->version);
            snprintf(setup.generator_params, sizeof setup.generator_params, "%s", params);
        }
        /* stage 0's log: virtual time on the mock, the machine's clock on MPI or NCCL */
        ppv_inference_events how = {a.transport ? "monotonic" : "virtual", a.o.d_in, a.o.d_out,
                                    a.o.d_out}; /* the reorder buffer holds D_out */
        if (!(w = ppv_inference_create(a.record, &setup, err, sizeof err)) ||
            ppv_inference_events_begin(w, &how, err, sizeof err) < 0) {
            ppv_inference_abort(w);
            fprintf(stderr, "ppv pp: %s\n", err);
            return PPV_EXIT_BAD_INPUT;
        }
        a.o.on_call = record_call;
        a.o.on_call_ctx = w;
        a.o.on_event = record_event;
        a.o.on_event_ctx = w;
        a.o.on_rank = record_rank; /* on the mock, where the mesh's ranks are in this process */
        a.o.on_rank_ctx = w;
    }
    ppv_pp_report *r = NULL;
    rc = PPV_EXIT_BAD_INPUT;
    guard_arm(a.json);
    progress pr; /* stage 0's process draws it: it decodes the chunks */
    progress_attach_pp(&a.o, &pr, "pp", a.json || !lead);
    int ran = repeat_pp(&a.o, a.repeat, &r, &a.rv, err, sizeof err);
    progress_end(&pr);
    if (ran < 0) {
        fprintf(stderr, "ppv pp: %s\n", err);
        ppv_inference_abort(w);
        goto done;
    }
    if (w && r->mem && /* each rank's bytes, on the clock of the log */
        ppv_inference_memory(w, r->mem, r->nmem - 1, a.transport ? "monotonic" : "virtual", err,
                             sizeof err) < 0) {
        fprintf(stderr, "ppv pp: %s\n", err);
        ppv_inference_abort(w);
        goto done;
    }
    if (w && ppv_inference_commit(w, err, sizeof err) < 0) {
        fprintf(stderr, "ppv pp: %s\n", err);
        goto done;
    }
    if (a.trace_out && r->trace && write_trace_file(a.trace_out, r->trace, 0, NULL) < 0)
        goto done;
    if (a.memory_svg && r->mem && write_memory_svg(a.memory_svg, r->mem, 1 + a.o.mesh) < 0)
        goto done;
    rc = print_report(&a, r);
done:
    ppv_pp_report_free(r);
    ppv_proc_end(proc);
    return rc;
}
