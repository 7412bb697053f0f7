/* cmd_fuzz.c - `ppv fuzz`: the interleaving explorer on a schedule (run on
 * the engine) or on the PP inference pipeline; on a failure it writes the
 * failing and the minimised traces, which `ppv run --replay` or `ppv pp
 * --replay` reproduce exactly. */
#include <inttypes.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "ppv_fuzz.h"

/* fuzz's options, and the pipeline's (cli.h: PIPE_*) for the pp target. */
enum { FUZZ_OPTIONS(CLI_OPTION_ID) FUZZ_SCHEDULE_OPTIONS(CLI_OPTION_ID)
           FUZZ_PY_OPTIONS(CLI_OPTION_ID) };
static const cli_option fuzz_options[] = {PP_OPTIONS(CLI_SKIP, CLI_PIPE_OPTION)
                                              FUZZ_OPTIONS(CLI_OPTION)
                                                  FUZZ_SCHEDULE_OPTIONS(CLI_OPTION)
                                                      FUZZ_PY_OPTIONS(CLI_OPTION)};

typedef struct fuzz_args {
    ppv_fuzz_options f;
    ppv_pp_options pp;
    const char *target, *out, *recompute, *junit;
    const char *semantics;
    int json, pp_target, checker_target, schedule_only_used, pp_only_used;
    /* py FILE.py:FUNCTION: its ranks, idle bound and trace to replay */
    int py_target, py_only_used, sem_watchdog_used;
    int32_t py_ranks;
    int py_threads; /* --ranks-as threads */
    double py_idle;
    const char *py_spec, *py_replay;
    char py_name[4200]; /* "py FILE.py:FUNCTION", the report's target */
    ppv_fuzz_program py_program;
    int strategy_given, seed_given, depth_given, faults_given, jobs_given;
    /* the target's options as given, words apart (a trace's target line);
     * too_long: one held a space, or they did not fit */
    char target_words[900];
    int too_long;
} fuzz_args;

/* Adds option c (and its argument) to the target's words. */
static void target_word(fuzz_args *a, int c, const char *arg) {
    const char *name = NULL;
    for (size_t i = 0; i < sizeof fuzz_options / sizeof fuzz_options[0]; i++)
        if (fuzz_options[i].id == c) {
            name = fuzz_options[i].name;
            if (!fuzz_options[i].arg) arg = NULL; /* a flag */
        }
    size_t len = strlen(a->target_words);
    int n = name ? snprintf(a->target_words + len, sizeof a->target_words - len, " --%s%s%s",
                            name, arg ? " " : "", arg ? arg : "")
                 : -1;
    if (n < 0 || (size_t)n >= sizeof a->target_words - len ||
        (arg && (!*arg || strpbrk(arg, " \t\n"))))
        a->too_long = 1;
}

/* -1 when parsed, else the exit code. */
static int parse_fuzz_args(int argc, char **argv, fuzz_args *a) {
    memset(a, 0, sizeof *a);
    a->f.strategy = PPV_FUZZ_PORTFOLIO;
    a->f.pct_depth = 3;
    a->f.run = ppv_run_defaults();
    a->pp = ppv_pp_defaults();
    a->recompute = "none";
    a->py_idle = 10;
    cli_parser p;
    CLI_BEGIN(&p, argv, fuzz_options, 0);
    int c;
    long long n;
    char err[512];
    int runs_given = 0;
    while ((c = cli_next(&p, argc, argv)) != CLI_END) {
        int rc = pp_pipeline_option(c, &p, optarg, &a->pp, NULL);
        if (rc < 0) return PPV_EXIT_BAD_INPUT;
        if (rc == 0) {
            a->pp_only_used = 1;
            target_word(a, c, optarg);
            continue;
        }
        switch (c) {
        case OPT_RUNS:
            a->f.runs = p.num;
            runs_given = 1;
            break;
        case OPT_JOBS:
            a->f.jobs = (int32_t)p.num;
            a->jobs_given = 1;
            break;
        case OPT_FAULTS: {
            char tok[32];
            const char *at = optarg;
            int got;
            a->f.faults = 0;
            while ((got = ppv_list_next(&at, tok, sizeof tok)) >= 0) {
                ppv_fault_kind k;
                if (got == 0) break;
                if (ppv_fault_parse(tok, &k) < 0 || k == PPV_FAULT_NONE) got = -1;
                if (got < 0) break;
                a->f.faults |= 1u << k;
            }
            if (got < 0)
                return usage_error("--faults lists drop, duplicate, corrupt, kill, delay, "
                                   "eager and cut (no empty item), not '%s'",
                                   optarg);
            a->faults_given = 1;
            break;
        }
        case OPT_TIME: a->f.seconds = p.real; break;
        case OPT_STRATEGY:
            if (ppv_fuzz_strategy_parse(optarg, &a->f.strategy) < 0)
                return usage_error("--strategy is random, pct, portfolio or dfs, not '%s'",
                                   optarg);
            a->strategy_given = 1;
            break;
        case OPT_PCT_DEPTH:
            a->f.pct_depth = (int32_t)p.num;
            a->depth_given = 1;
            break;
        case OPT_SEED:
            a->f.seed = (uint64_t)p.num;
            a->seed_given = 1;
            break;
        case OPT_OUT:
            a->out = optarg;
            break;
        case OPT_JSON:
            a->json = 1;
            break;
        case OPT_JUNIT:
            a->junit = optarg;
            break;
        case OPT_SEMANTICS:
            target_word(a, c, optarg);
            if (semantics_option(&p, optarg, &a->f.run.sem)) return PPV_EXIT_BAD_INPUT;
            a->sem_watchdog_used = 1;
            break;
        case OPT_RECOMPUTE:
            target_word(a, c, optarg);
            if (ppv_recompute_parse(optarg, -1, NULL, err, sizeof err) < 0) {
                fprintf(stderr, "ppv fuzz: --recompute %s\n", err);
                return bad_option();
            }
            a->recompute = optarg;
            a->schedule_only_used = 1;
            break;
        case OPT_LAYERS:
            target_word(a, c, optarg);
            a->f.run.model.layers = (int32_t)p.num;
            a->schedule_only_used = 1;
            break;
        case OPT_WIDTH:
            target_word(a, c, optarg);
            if ((n = p.num) % a->f.run.model.n_heads)
                return usage_error("--width needs a multiple of the model's heads, not '%s'",
                                   optarg);
            a->f.run.model.d_model = (int32_t)n;
            a->f.run.model.d_ff = 2 * (int32_t)n;
            a->schedule_only_used = 1;
            break;
        case OPT_WATCHDOG:
            target_word(a, c, optarg);
            a->f.run.watchdog_steps = p.num;
            a->sem_watchdog_used = 1;
            break;
        case OPT_RANKS:
            target_word(a, c, optarg);
            a->py_ranks = (int32_t)p.num;
            a->py_only_used = 1;
            break;
        case OPT_RANKS_AS:
            if (strcmp(optarg, "processes") && strcmp(optarg, "threads"))
                return usage_error("--ranks-as is processes or threads, not '%s'", optarg);
            target_word(a, c, optarg);
            a->py_threads = !strcmp(optarg, "threads");
            a->py_only_used = 1;
            break;
        case OPT_IDLE:
            target_word(a, c, optarg);
            a->py_idle = p.real;
            a->py_only_used = 1;
            break;
        case OPT_REPLAY:
            a->py_replay = optarg;
            a->py_only_used = 1;
            break;
        case CLI_HELP:
            return print_help();
        default:
            return bad_option();
        }
    }
    a->py_target = argc - optind >= 1 && !strcmp(argv[optind], "py");
    if (a->py_target && argc - optind != 2)
        return usage_error("py takes FILE.py:FUNCTION or FILE.py: ppv fuzz py FILE.py[:FUNCTION] "
                           "-n RANKS%s",
                           "");
    if (!a->py_target && argc - optind != 1)
        return usage_error("takes one TARGET: a schedule file, pp, checker, or py "
                           "FILE.py[:FUNCTION]%s", "");
    a->target = argv[optind];
    if (a->py_target) {
        a->py_spec = argv[optind + 1];
        snprintf(a->py_name, sizeof a->py_name, "py %s", a->py_spec);
        a->target = a->py_name;
    }
    if (!a->py_target && a->py_only_used)
        return usage_error("--ranks, --ranks-as, --idle and --replay are for a py target, not %s",
                           a->target);
    a->pp_target = !strcmp(a->target, "pp");
    a->checker_target = !strcmp(a->target, "checker");
    if (a->checker_target) {
        if (a->schedule_only_used || a->sem_watchdog_used || a->pp_only_used)
            return usage_error("checker draws its own schedules and runs each under every "
                               "semantics: it takes --runs, --time, --seed, --out, --json and "
                               "--junit%s",
                               "");
        const char *bad = a->strategy_given ? "--strategy"
                          : a->depth_given  ? "--pct-depth"
                          : a->faults_given ? "--faults"
                          : a->jobs_given   ? "--jobs"
                                            : NULL;
        if (bad)
            return usage_error("checker judges every schedule with dfs, in one job: %s is for a "
                               "schedule or pp",
                               bad);
        if (!runs_given && !(a->f.seconds > 0)) a->f.runs = 200;
        return -1;
    }
    if (a->py_target) {
        if (a->schedule_only_used || a->pp_only_used)
            return usage_error("a py target takes -n, --ranks-as, --semantics, --watchdog and "
                               "--idle, not the pipeline's or a schedule's model options%s", "");
        if (a->py_ranks < 1) return usage_error("py needs -n RANKS (its world's ranks)%s", "");
        if (a->jobs_given && a->f.jobs > 1 && a->py_threads)
            return usage_error("--jobs: with --ranks-as threads every run shares ppv's one "
                               "Python interpreter, so it runs in one job (ranks as processes "
                               "take --jobs: a zygote a job)%s", "");
        if (a->py_replay) {
            const char *bad = runs_given                  ? "--runs"
                              : a->f.seconds > 0          ? "--time"
                              : a->strategy_given         ? "--strategy"
                              : a->depth_given            ? "--pct-depth"
                              : a->seed_given             ? "--seed"
                              : a->faults_given           ? "--faults"
                              : a->jobs_given             ? "--jobs"
                              : a->out                    ? "--out"
                              : a->junit                  ? "--junit"
                                                          : NULL;
            if (bad)
                return usage_error("--replay runs the trace once, with its own decisions and "
                                   "fault: %s is for exploring", bad);
        }
    }
    if (a->pp_target && (a->schedule_only_used || a->sem_watchdog_used))
        return usage_error("--semantics, --recompute, --layers, --width and --watchdog are for a "
                           "schedule target%s; the pipeline takes pp's options",
                           "");
    if (!a->pp_target && a->pp_only_used)
        return usage_error("pp's options are for the pp target, not the schedule %s", a->target);
    if (a->pp_target && pp_pipeline_finish(&a->pp) < 0) return PPV_EXIT_BAD_INPUT;
    if (a->f.strategy == PPV_FUZZ_DFS && (a->seed_given || a->depth_given))
        return usage_error("dfs draws nothing: %s is for random, pct and portfolio",
                           a->seed_given ? "--seed" : "--pct-depth");
    if (a->f.pct_depth < 2 && a->f.strategy != PPV_FUZZ_PCT)
        return usage_error("--pct-depth 1 (no change points) is for --strategy pct; the "
                           "portfolio runs depths 2 and up%s",
                           "");
    if (!runs_given && !(a->f.seconds > 0))
        a->f.runs = a->f.strategy == PPV_FUZZ_DFS ? 100000 : 1000;
    return -1;
}

static void show_progress(void *ctx, const ppv_fuzz_progress *p) {
    (void)ctx;
    fprintf(stderr, "\r\033[K%lld runs, %.0f runs/s, %lld distinct interleavings, 0 failures",
            (long long)p->runs, p->seconds > 0 ? (double)p->runs / p->seconds : 0.0,
            (long long)p->distinct);
    fflush(stderr);
}

/* Writes DIR/NAME.trace from w (every decision, or with deviations its
 * deviations from round-robin alone), with the failure and
 * what it was measured against, so that a replay fails the same way; 0,
 * or -1 after a message. */
/* The verdict a trace of this exploration ends with. */
static ppv_trace_verdict verdict_of(const fuzz_args *a, uint64_t reference, const char *failure) {
    ppv_trace_verdict v = {1, reference, "", ""};
    snprintf(v.failure, sizeof v.failure, "%s", failure);
    if (a->py_target && !a->too_long && !strpbrk(a->py_spec, " \t\n"))
        snprintf(v.target, sizeof v.target, "py %s%s", a->py_spec, a->target_words);
    else if (!a->too_long && !strpbrk(a->target, " \t\n"))
        snprintf(v.target, sizeof v.target, "%s%s", a->target, a->target_words);
    return v;
}

static int save_trace(const char *dir, const char *name, const ppv_world *w, int deviations,
                      uint64_t reference, const char *failure, const fuzz_args *a, char *path,
                      size_t n) {
    snprintf(path, n, "%s/%s", dir, name);
    ppv_trace_verdict v = verdict_of(a, reference, failure);
    return w ? write_trace_file(path, w, deviations, &v) : -1;
}

/* The minimal trace's text (what minimal.trace holds), for a report whose
 * --out could not be written: a new string, or NULL. */
static char *minimal_trace_text(const ppv_fuzz_report *r, const fuzz_args *a) {
    char *text = NULL;
    size_t len = 0;
    FILE *f = r->minimal ? open_memstream(&text, &len) : NULL;
    if (!f) return NULL;
    ppv_trace_verdict v = verdict_of(a, r->minimal_reference, r->minimal_failure);
    int bad = ppv_trace_write_deviations(f, r->minimal) < 0 || ppv_trace_write_verdict(f, &v) < 0;
    if (fclose(f) != 0 || bad) {
        free(text);
        return NULL;
    }
    return text;
}

/* The end of the stretch of deviations that starts at i: each within
 * three steps of the last (round-robin switching to a rank the run keeps
 * out, and the run taking the processor back from it). */
static int64_t stretch_end(const int64_t *steps, int64_t n, int64_t i) {
    int64_t j = i + 1;
    while (j < n && steps[j] - steps[j - 1] <= 3) j++;
    return j;
}

/* The stretches of a minimal run's deviations (ppv_world_deviations). */
static int64_t stretches(const ppv_world *w) {
    const int64_t *ds;
    const int32_t *dr;
    int64_t nd = w ? ppv_world_deviations(w, &ds, &dr) : 0, count = 0;
    for (int64_t i = 0; i < nd; count++)
        i = stretch_end(ds, nd, i);
    return count;
}

static const char *policy_text(const ppv_policy *p, char *buf, size_t n) {
    switch (p->kind) {
    case PPV_POLICY_RR:
        snprintf(buf, n, "round-robin");
        break;
    case PPV_POLICY_RANDOM:
        snprintf(buf, n, "random, seed %llu", (unsigned long long)p->seed);
        break;
    case PPV_POLICY_PCT:
        snprintf(buf, n, "pct:%d, seed %llu", p->depth, (unsigned long long)p->seed);
        break;
    case PPV_POLICY_EXPLORE:
        snprintf(buf, n, "dfs");
        break;
    default:
        snprintf(buf, n, "replay");
    }
    return buf;
}

/* --junit: one case for the exploration (and, for dfs, one for its
 * coverage); 0, or -1 after a message. */
static int write_junit(const char *path, const char *target, const char *what, int failed,
                       const char *failure, int dfs, int complete) {
    junit j;
    char suite[512];
    snprintf(suite, sizeof suite, "ppv fuzz %s", target);
    junit_init(&j, suite);
    int rc = failed ? junit_add(&j, what, "%s", failure) : junit_add(&j, what, NULL);
    if (dfs && !failed)
        rc |= complete ? junit_add(&j, "every class explored", NULL)
                       : junit_add(&j, "every class explored",
                                   "the budget ran out before every class was explored");
    return finish_junit(&j, path, rc) < 0 ? -1 : 0;
}

static void show_checker_progress(void *ctx, const ppv_fuzz_differential_report *p) {
    (void)ctx;
    fprintf(stderr, "\r\033[K%lld schedules, %lld judgements compared, %lld deadlocks agreed",
            (long long)p->schedules, (long long)p->compared, (long long)p->deadlocks);
    fflush(stderr);
}

/* ppv fuzz checker: ppv check against the engine. */
static int fuzz_checker(const fuzz_args *a) {
    ppv_fuzz_differential_options o;
    memset(&o, 0, sizeof o);
    o.seed = a->f.seed;
    o.schedules = a->f.runs;
    o.seconds = a->f.seconds;
    int tty = !a->json && isatty(2);
    if (tty) o.progress = show_checker_progress;
    int made = 0; /* --out made here: removed again when nothing goes in it */
    if (a->out && !(made = mkdir(a->out, 0777) == 0) && errno != EEXIST) {
        fprintf(stderr, "ppv fuzz: cannot make %s: %s\n", a->out, strerror(errno));
        return PPV_EXIT_BAD_INPUT;
    }
    ppv_fuzz_differential_report *r = NULL;
    char err[1024];
    if (ppv_fuzz_differential(&o, &r, err, sizeof err) < 0) {
        if (tty) fputs("\r\033[K", stderr);
        fprintf(stderr, "ppv fuzz: %s\n", err);
        if (made) rmdir(a->out);
        return PPV_EXIT_BAD_INPUT;
    }
    if (made && !r->found) rmdir(a->out);
    if (tty) fputs("\r\033[K", stderr);
    char path[4200] = "", sem[64] = "";
    if (r->found) ppv_semantics_format(&r->sem, sem, sizeof sem);
    if (r->found && a->out) {
        snprintf(path, sizeof path, "%s/disagreement.ppv", a->out);
        atomic_file af;
        int bad = atomic_open(&af, path) < 0;
        if (!bad && ppv_schedule_write_native(r->minimal, af.f) < 0) {
            atomic_abort(&af);
            bad = 1;
        }
        if (bad || atomic_commit(&af) < 0) {
            fprintf(stderr, "ppv fuzz: cannot write %s: %s\n", path,
                    af.why[0] ? af.why : strerror(errno));
            ppv_fuzz_differential_report_free(r);
            return PPV_EXIT_BAD_INPUT;
        }
    }
    if (a->json) {
        json_object *j = json_object_new_object();
        json_object_object_add(j, "ok", json_object_new_boolean(!r->found));
        json_object_object_add(j, "target", json_object_new_string("checker"));
        json_object_object_add(j, "schedules", json_object_new_int64(r->schedules));
        json_object_object_add(j, "ill_formed", json_object_new_int64(r->invalid));
        json_object_object_add(j, "compared", json_object_new_int64(r->compared));
        json_object_object_add(j, "deadlocks", json_object_new_int64(r->deadlocks));
        json_object_object_add(j, "seconds", finite_json(r->seconds));
        json_object_object_add(j, "failure", r->found ? json_object_new_string(r->failure) : NULL);
        json_object_object_add(j, "semantics", r->found ? json_object_new_string(sem) : NULL);
        json_object_object_add(j, "schedule", path[0] ? json_object_new_string(path) : NULL);
        puts(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN |
                                                   JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(j);
    } else {
        printf("ppv fuzz: ppv check against the engine (dfs), schedules drawn from seed %llu\n",
               (unsigned long long)a->f.seed);
        printf("schedules: %lld in %.2f s; %lld ill formed (nothing to compare); %lld "
               "judgements compared, %lld of them deadlocks, all agreed%s\n",
               (long long)r->schedules, r->seconds, (long long)r->invalid,
               (long long)r->compared, (long long)r->deadlocks, r->found ? " but the last" : "");
        if (r->found) {
            printf("disagreement under %s (%d mutation%s): %s\n", sem, r->mutations,
                   r->mutations == 1 ? "" : "s", r->failure);
            if (path[0]) printf("schedule: %s (ppv check and ppv run read it)\n", path);
        }
        printf("result: %s\n", r->found ? "PROBLEM" : "OK");
    }
    int rc = r->found ? PPV_EXIT_PROBLEM : PPV_EXIT_OK;
    if (a->junit && write_junit(a->junit, "checker", "ppv check agrees with the engine",
                                r->found, r->failure, 0, 0) < 0)
        rc = PPV_EXIT_BAD_INPUT;
    ppv_fuzz_differential_report_free(r);
    return rc;
}

/* Readies the target a names: the pipeline's options checked, the
 * schedule loaded with its recompute mask (*s, *mask), or the Python
 * function's ranks (*py); the caller frees them. -1, or an exit code after
 * the message. */
static int setup_target(fuzz_args *a, ppv_schedule **s, ppv_recompute **mask, py_target **py) {
    char err[1024];
    if (a->py_target) {
        if (py_target_open(a->py_spec, a->py_ranks, a->py_idle, !a->py_threads,
                           a->py_replay ? 1 : a->f.jobs, py, &a->py_program) < 0)
            return PPV_EXIT_BAD_INPUT;
        a->py_program.sem = a->f.run.sem;
        a->py_program.watchdog_steps = a->f.run.watchdog_steps;
        a->f.program = &a->py_program;
        return -1;
    }
    if (a->pp_target) {
        if (ppv_pp_options_check(&a->pp, err, sizeof err) < 0) {
            fprintf(stderr, "ppv fuzz: %s\n(run 'ppv help fuzz' for usage)\n", err);
            return PPV_EXIT_BAD_INPUT;
        }
        a->f.pp = &a->pp;
        return -1;
    }
    if (ppv_schedule_load(a->target, PPV_DIALECT_AUTO, s, err, sizeof err) < 0) {
        fprintf(stderr, "ppv fuzz: %s\n", err);
        return PPV_EXIT_BAD_INPUT;
    }
    *mask = calloc((size_t)(*s)->nstages + 1, sizeof **mask);
    if (!*mask || ppv_recompute_parse(a->recompute, (*s)->nstages, *mask, err, sizeof err) < 0) {
        fprintf(stderr, "ppv fuzz: --recompute %s\n", *mask ? err : "out of memory");
        return PPV_EXIT_BAD_INPUT;
    }
    a->f.run.recompute = *mask;
    a->f.schedule = *s;
    return -1;
}

/* ---- ppv fuzz explain TRACE ---------------------------------------------------------- */

/* Step k's line of the story: '*' where the run left round-robin; on the
 * pipeline, the rank's part in it. */
static void story_line(const ppv_step_note *n, int forced, int pp) {
    const char *role = !pp ? "" : n->rank == 0 ? " (stage 0)" : n->rank == 1 ? " (the leader)"
                                                                              : " (a worker)";
    printf("%c step %-5lld rank %d%s  %s\n", forced ? '*' : ' ', (long long)n->step, n->rank,
           role, n->did[0] ? n->did : "(runs)");
}

/* Runs a failing trace again (the target its `target` line names, which
 * ppv fuzz wrote) noting what every step did, and tells the failure: the
 * steps around each stretch of forced decisions, every probe that finds a
 * message (round-robin's never do), the steps that end the run, how it
 * ended, and the replay's judgement. */
static int fuzz_explain(int argc, char **argv) {
    static const cli_option explain_options[] = {{0, 0, NULL, NULL, V_NONE}};
    cli_parser p;
    CLI_BEGIN(&p, argv, explain_options, 0);
    int c;
    while ((c = cli_next(&p, argc, argv)) != CLI_END) {
        if (c == CLI_HELP) return print_help();
        return bad_option();
    }
    if (argc - optind != 1)
        return usage_error("explain takes one TRACE (a trace ppv fuzz --out wrote)%s", "");
    const char *path = argv[optind];
    replay_trace rt;
    memset(&rt, 0, sizeof rt);
    ppv_policy pol;
    memset(&pol, 0, sizeof pol);
    ppv_fault fault;
    int32_t nranks = 0;
    int rc = PPV_EXIT_BAD_INPUT;
    if (replay_trace_read(path, physical_memory() / 4, &rt, &pol, &fault, &nranks) < 0) {
        replay_trace_free(&rt);
        return PPV_EXIT_BAD_INPUT;
    }
    if (!rt.verdict.target[0]) {
        fprintf(stderr, "ppv fuzz: %s has no target line (ppv fuzz --out writes one); replay it "
                        "with ppv pp --replay or ppv run --replay and the options it ran with\n",
                path);
        replay_trace_free(&rt);
        return PPV_EXIT_BAD_INPUT;
    }
    /* the target line, parsed as ppv fuzz parsed it */
    char words[sizeof rt.verdict.target];
    snprintf(words, sizeof words, "%s", rt.verdict.target);
    char *targv[256];
    int targc = 0;
    targv[targc++] = "fuzz";
    for (char *save = NULL, *w = strtok_r(words, " ", &save); w && targc < 255;
         w = strtok_r(NULL, " ", &save))
        targv[targc++] = w;
    targv[targc] = NULL;
    fuzz_args a;
    ppv_schedule *s = NULL;
    ppv_recompute *mask = NULL;
    ppv_pp_report *pr = NULL;
    ppv_run_report *rr = NULL;
    char err[1024];
    py_target *py = NULL;
    ppv_world *pyw = NULL;
    ppv_world_result pyres;
    memset(&pyres, 0, sizeof pyres);
    int got = parse_fuzz_args(targc, targv, &a);
    if (got < 0 && a.checker_target) got = usage_error("checker leaves no trace%s", "");
    if (got >= 0 || (got = setup_target(&a, &s, &mask, &py)) >= 0) {
        fprintf(stderr, "ppv fuzz: %s: its target line '%s' is not a target ppv fuzz takes\n",
                path, rt.verdict.target);
        goto done;
    }
    pol.note_steps = 1;
    pol.note_deviations = 1;
    const ppv_world *w;
    const ppv_world_result *res;
    int passes = 1; /* the explorer's judgement of the run */
    char why[1024] = "";
    if (a.py_target) {
        if (nranks != a.py_ranks) {
            fprintf(stderr, "ppv fuzz: %s is a trace of %d ranks; its target has %d\n", path,
                    nranks, (int)a.py_ranks);
            goto done;
        }
        if (py_target_run(py, &a.py_program, &pol, &fault, &pyw, &pyres) < 0) goto done;
        w = pyw;
        res = &pyres;
        passes = pyres.status == PPV_RUN_DONE;
        snprintf(why, sizeof why, "%s", pyres.message);
    } else if (a.pp_target) {
        if (nranks != 1 + a.pp.mesh) {
            fprintf(stderr, "ppv fuzz: %s is a trace of %d ranks; its target's stage 0 and mesh "
                            "of %d are %d\n", path, nranks, a.pp.mesh, 1 + a.pp.mesh);
            goto done;
        }
        a.pp.policy = pol;
        a.pp.fault = fault;
        guard_arm(a.json);
        if (ppv_pp_run(&a.pp, &pr, err, sizeof err) < 0) {
            fprintf(stderr, "ppv fuzz: %s\n", err);
            goto done;
        }
        w = pr->trace;
        res = &pr->world;
        passes = ppv_fuzz_judge_pp(&a.pp, pr, rt.verdict.reference, why, sizeof why);
    } else {
        if (nranks != s->nranks) {
            fprintf(stderr, "ppv fuzz: %s is a trace of %d ranks; %s has %d\n", path, nranks,
                    a.target, s->nranks);
            goto done;
        }
        a.f.run.policy = pol;
        a.f.run.fault = fault;
        if (ppv_run(s, &a.f.run, &rr, err, sizeof err) < 0) {
            fprintf(stderr, "ppv fuzz: %s\n", err);
            goto done;
        }
        w = rr->trace;
        res = &rr->world;
        passes = ppv_fuzz_judge_run(&a.f.run, rr, rt.verdict.reference, why, sizeof why);
    }
    /* judged as ppv pp --replay and ppv run --replay judge (print_replay) */
    replay_judgement j;
    memset(&j, 0, sizeof j);
    j.diverged = res->diverged;
    j.judged = !j.diverged && rt.verdict.present;
    j.passes = passes;
    snprintf(j.why, sizeof j.why, "%s", why);
    if (!w) {
        fprintf(stderr, "ppv fuzz: the run kept no trace to explain\n");
        goto done;
    }
    const ppv_step_note *notes;
    const int64_t *ds;
    const int32_t *dr;
    int64_t nn = ppv_world_steps(w, &notes), nd = ppv_world_deviations(w, &ds, &dr);
    printf("ppv fuzz explain: %s\ntarget: %s\n", path, rt.verdict.target);
    if (fault.kind)
        printf("fault: a %s at send %lld\n", ppv_fault_name(fault.kind), (long long)fault.message);
    printf("%lld steps: round-robin but at %lld (*), in %lld stretch%s\n", (long long)nn,
           (long long)nd, (long long)stretches(w), stretches(w) == 1 ? "" : "es");
    /* the steps shown: three before each stretch to its end, and the last six */
    size_t cells = (size_t)(nn ? nn : 1);
    unsigned char *show = calloc(cells, 1), *forced = calloc(cells, 1);
    if (!show || !forced) {
        free(show), free(forced);
        fprintf(stderr, "ppv fuzz: out of memory\n");
        goto done;
    }
    for (int64_t i = 0; i < nd;) {
        int64_t e = stretch_end(ds, nd, i);
        for (int64_t k = ds[i] - 3; k <= ds[e - 1]; k++)
            if (k >= 0 && k < nn) show[k] = 1;
        i = e;
    }
    for (int64_t i = 0; i < nd; i++)
        if (ds[i] >= 0 && ds[i] < nn) forced[ds[i]] = 1;
    for (int64_t k = 0; k < nn; k++) /* round-robin's probes find nothing */
        if (k >= nn - 6 || strstr(notes[k].did, ": a message is there")) show[k] = 1;
    for (int64_t k = 0; k < nn;) {
        if (show[k]) {
            story_line(&notes[k], forced[k], a.pp_target);
            k++;
            continue;
        }
        int64_t e = k;
        while (e < nn && !show[e]) e++;
        if (e - k == 1) { /* one step: itself */
            show[k] = 1;
            continue;
        }
        printf("  ... steps %lld-%lld: round-robin\n", (long long)k, (long long)e - 1);
        k = e;
    }
    free(show);
    free(forced);
    if (res->status != PPV_RUN_DONE && res->message[0]) printf("end: %s\n", res->message);
    for (int32_t i = 0; i < res->nblocked; i++) /* a deadlock or hang: who waits for what */
        printf("  rank %d waits at %s: %s\n", res->blocked[i].rank, res->blocked[i].action,
               res->blocked[i].reason);
    for (int32_t i = 0; i < res->ncycle; i++)
        printf("%s%d", i ? " -> " : "  cycle: ", res->cycle[i].rank);
    if (res->ncycle) printf(" -> %d\n", res->cycle[0].rank);
    print_replay(&j, &rt.verdict, res->message);
    rc = j.diverged || (j.judged && !j.passes) ? PPV_EXIT_PROBLEM : PPV_EXIT_OK;
done:
    ppv_pp_report_free(pr);
    ppv_run_report_free(rr);
    ppv_world_result_free(&pyres);
    ppv_world_free(pyw);
    py_target_close(py);
    free(mask);
    ppv_schedule_free(s);
    replay_trace_free(&rt);
    return rc;
}

/* The processes of the MPI job this one was started in, as mpirun says in
 * the environment (Open MPI's OMPI_COMM_WORLD_SIZE, MPICH's PMI_SIZE); 1
 * outside one. */
static long mpi_job_size(void) {
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof *vars; i++) {
        const char *v = getenv(vars[i]);
        char *end;
        long n = v ? strtol(v, &end, 10) : 0;
        if (v && *v && !*end && n > 0) return n;
    }
    return 1;
}

/* A campaign's exchange (ppv_fuzz_campaign) over the MPI transport's
 * allgather on the job's world. */
typedef struct campaign_link {
    ppv_transport t;
    int32_t rank;
} campaign_link;

static int campaign_allgather(void *ctx, const void *send, void *recv, size_t bytes, char *err,
                              size_t errlen) {
    campaign_link *l = ctx;
    int rc = l->t.ops->allgather(l->t.impl, l->rank, send, recv, bytes, 0, "the campaign");
    if (rc) snprintf(err, errlen, "the campaign's exchange between processes failed (%d)", rc);
    return rc ? -1 : 0;
}

int cmd_fuzz(int argc, char **argv) {
    if (argc >= 2 && !strcmp(argv[1], "explain")) return fuzz_explain(argc - 1, argv + 1);
    fuzz_args a;
    int rc = parse_fuzz_args(argc, argv, &a);
    if (rc >= 0) return rc;
    long job = mpi_job_size();
    if (a.checker_target && job > 1) {
        fprintf(stderr, "ppv fuzz: checker runs in one process; start it without mpirun (%ld "
                        "processes here)\n", job);
        return PPV_EXIT_BAD_INPUT;
    }
    if (a.checker_target) return fuzz_checker(&a);
    char err[1024];
    ppv_proc *proc = NULL;
    int lead = 1;
    campaign_link link;
    ppv_fuzz_campaign campaign;
    ppv_schedule *s = NULL;
    ppv_recompute *mask = NULL;
    py_target *py = NULL;
    int made = 0; /* --out made here: removed again when nothing goes in it */
    if ((rc = setup_target(&a, &s, &mask, &py)) >= 0) goto done;
    if (py && a.py_replay) {
        rc = py_target_replay(py, &a.py_program, a.py_replay, a.json);
        goto done;
    }
    /* started by mpirun: a campaign, the runs split across the processes;
     * process 0 reports and writes the files */
    if (job > 1) {
        char why[128];
        snprintf(why, sizeof why, "started by mpirun as one of %ld processes (a campaign)", job);
        if ((rc = join_job("mpi", why, &proc, &lead)) >= 0) goto done;
        /* a round's exchange waits for the slowest process's runs */
        ppv_proc_config cfg = {a.f.run.sem, 600};
        if (ppv_proc_configure(proc, &cfg, &link.t, err, sizeof err) < 0) {
            fprintf(stderr, "ppv fuzz: %s\n", err);
            rc = PPV_EXIT_BAD_INPUT;
            goto done;
        }
        link.rank = ppv_proc_rank(proc);
        campaign = (ppv_fuzz_campaign){link.rank, ppv_proc_size(proc), campaign_allgather, &link};
        a.f.campaign = &campaign;
    }
    if (a.out && lead && !(made = mkdir(a.out, 0777) == 0) && errno != EEXIST) {
        fprintf(stderr, "ppv fuzz: cannot make %s: %s\n", a.out, strerror(errno));
        rc = PPV_EXIT_BAD_INPUT;
        goto done;
    }
    int tty = !a.json && lead && isatty(2);
    if (tty) a.f.progress = show_progress;
    ppv_fuzz_report *r = NULL;
    if (a.pp_target) guard_arm(a.json);
    if (ppv_fuzz(&a.f, &r, err, sizeof err) < 0) {
        if (tty) fputs("\r\033[K", stderr);
        if (lead) fprintf(stderr, "ppv fuzz: %s\n", err);
        rc = PPV_EXIT_BAD_INPUT;
        goto done;
    }
    if (tty) fputs("\r\033[K", stderr);
    char failing_path[4200] = "", minimal_path[4200] = "", pol[96];
    char *unsaved = NULL; /* the minimal trace's text when --out could not take it */
    if (r->found && a.out && lead) {
        if (save_trace(a.out, "failing.trace", r->failing, 0, r->failing_reference, r->failure,
                       &a, failing_path, sizeof failing_path) < 0 ||
            save_trace(a.out, "minimal.trace", r->minimal, 1, r->minimal_reference,
                       r->minimal_failure, &a, minimal_path, sizeof minimal_path) < 0) {
            /* the result is printed all the same, the minimal trace in it */
            failing_path[0] = minimal_path[0] = 0;
            unsaved = minimal_trace_text(r, &a);
            if (!unsaved) unsaved = strdup("");
        }
    }
    if (a.json) {
        json_object *j = json_object_new_object();
        json_object_object_add(j, "ok", json_object_new_boolean(!r->found));
        json_object_object_add(j, "target", json_object_new_string(a.target));
        json_object_object_add(j, "strategy",
                               json_object_new_string(ppv_fuzz_strategy_name(a.f.strategy)));
        json_object_object_add(j, "processes", json_object_new_int(proc ? ppv_proc_size(proc) : 1));
        json_object_object_add(j, "runs", json_object_new_int64(r->runs));
        json_object *each = NULL; /* a campaign: the runs each process made */
        if (r->nprocesses) {
            each = json_object_new_array();
            for (int32_t i = 0; i < r->nprocesses; i++)
                json_object_array_add(each, json_object_new_int64(r->process_runs[i]));
        }
        json_object_object_add(j, "process_runs", each);
        json_object_object_add(j, "distinct_interleavings", json_object_new_int64(r->distinct));
        if (a.f.strategy == PPV_FUZZ_DFS) {
            json_object_object_add(j, "complete", json_object_new_boolean(r->complete));
            json_object_object_add(j, "classes", json_object_new_int64(r->classes));
            json_object_object_add(j, "pruned", json_object_new_int64(r->pruned));
        }
        json_object_object_add(j, "seconds", finite_json(r->seconds));
        json_object_object_add(j, "failure",
                               r->found ? json_object_new_string(r->failure) : NULL);
        json_object_object_add(j, "failing_run",
                               r->found ? json_object_new_int64(r->failing_run) : NULL);
        json_object_object_add(
            j, "failing_policy",
            r->found ? json_object_new_string(policy_text(&r->failing_policy, pol, sizeof pol))
                     : NULL);
        json_object_object_add(
            j, "failing_fault",
            r->found && r->failing_fault.kind
                ? json_object_new_string(ppv_fault_name(r->failing_fault.kind))
                : NULL);
        json_object_object_add(j, "failing_fault_send",
                               r->found && r->failing_fault.kind
                                   ? json_object_new_int64(r->failing_fault.message)
                                   : NULL);
        json_object_object_add(j, "failing_steps",
                               r->found ? json_object_new_int64(r->failing_steps) : NULL);
        json_object_object_add(j, "minimal_prefix",
                               r->found ? json_object_new_int64(r->minimal_prefix) : NULL);
        json_object_object_add(j, "minimal_deviations",
                               r->found ? json_object_new_int64(r->minimal_deviations) : NULL);
        json_object_object_add(j, "minimal_stretches",
                               r->found ? json_object_new_int64(stretches(r->minimal)) : NULL);
        json_object_object_add(j, "minimal_failure",
                               r->found ? json_object_new_string(r->minimal_failure) : NULL);
        json_object_object_add(j, "minimal_story",
                               r->found && r->minimal_story[0]
                                   ? json_object_new_string(r->minimal_story)
                                   : NULL);
        json_object_object_add(j, "minimal_trace",
                               minimal_path[0] ? json_object_new_string(minimal_path) : NULL);
        if (unsaved) /* --out could not be written: the trace itself */
            json_object_object_add(j, "minimal_trace_text", json_object_new_string(unsaved));
        puts(json_object_to_json_string_ext(j, JSON_C_TO_STRING_PLAIN |
                                                   JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(j);
    } else {
        char across[64] = "";
        if (proc) snprintf(across, sizeof across, ", across %d processes", ppv_proc_size(proc));
        if (a.f.strategy == PPV_FUZZ_DFS)
            printf("ppv fuzz: %s, strategy dfs (partial-order reduction, sleep sets)%s\n",
                   a.target, across);
        else
            printf("ppv fuzz: %s, strategy %s (PCT depth up to %d), seeds from %llu%s\n",
                   a.target, ppv_fuzz_strategy_name(a.f.strategy), a.f.pct_depth,
                   (unsigned long long)a.f.seed, across);
        printf("runs: %lld in %.2f s (%.0f runs/s), %lld distinct interleavings\n",
               (long long)r->runs, r->seconds, r->seconds > 0 ? (double)r->runs / r->seconds : 0.0,
               (long long)r->distinct);
        if (r->nprocesses) {
            printf("runs by process:");
            for (int32_t i = 0; i < r->nprocesses; i++)
                printf("%s %lld", i ? "," : "", (long long)r->process_runs[i]);
            printf(" (the reference's run not counted)\n");
        }
        if (a.f.strategy == PPV_FUZZ_DFS)
            printf("classes: %lld run to the end, %lld runs ended early (sleep sets); %s\n",
                   (long long)r->classes, (long long)r->pruned,
                   r->complete ? "every class explored"
                   : r->found  ? "stopped at the failure"
                               : "not every class explored (the budget ran out)");
        if (r->found) {
            char fault[64] = "";
            if (r->failing_fault.kind)
                snprintf(fault, sizeof fault, ", a %s at send %lld",
                         ppv_fault_name(r->failing_fault.kind),
                         (long long)r->failing_fault.message);
            printf("failure at run %lld (%s%s, %lld scheduler steps): %s\n",
                   (long long)r->failing_run, policy_text(&r->failing_policy, pol, sizeof pol),
                   fault, (long long)r->failing_steps, r->failure);
            char with[96] = "";
            if (r->minimal_fault.kind)
                snprintf(with, sizeof with, ", with the %s", ppv_fault_name(r->minimal_fault.kind));
            else if (r->failing_fault.kind)
                snprintf(with, sizeof with, ", without the %s (it fails anyway)",
                         ppv_fault_name(r->failing_fault.kind));
            printf("minimal: round-robin but at %lld step%s (of %lld decisions forced before "
                   "round-robin)%s: %s\n",
                   (long long)r->minimal_deviations, r->minimal_deviations == 1 ? "" : "s",
                   (long long)r->minimal_prefix, with, r->minimal_failure);
            const int64_t *ds;
            const int32_t *dr;
            int64_t nd = r->minimal ? ppv_world_deviations(r->minimal, &ds, &dr) : 0;
            if (nd > 0) { /* the stretches of steps where the run leaves round-robin,
                           * and the ranks it runs there */
                int64_t shown = 0, i = 0;
                printf("  forced:");
                for (; i < nd && shown < 12; shown++) {
                    int64_t j = stretch_end(ds, nd, i);
                    unsigned long long who = 0; /* the ranks run there (the first 64) */
                    for (int64_t k = i; k < j; k++)
                        if (dr[k] < 64) who |= 1ULL << dr[k];
                    if (j - i == 1)
                        printf("%s step %lld to rank%s", shown ? ";" : "", (long long)ds[i],
                               (who & (who - 1)) ? "s" : "");
                    else
                        printf("%s steps %lld-%lld (%lld forced) to rank%s", shown ? ";" : "",
                               (long long)ds[i], (long long)ds[j - 1], (long long)(j - i),
                               (who & (who - 1)) ? "s" : "");
                    for (int b = 0, first = 1; b < 64; b++)
                        if (who >> b & 1) printf("%s %d", first ? (first = 0, "") : ",", b);
                    i = j;
                }
                printf("%s\n", i < nd ? " ..." : "");
            }
            if (r->minimal_story[0]) {
                printf("  ");
                for (const char *c = r->minimal_story; *c; c++)
                    fputs(*c == '\n' ? "\n  " : (char[]){*c, 0}, stdout);
                printf("\n");
            }
            char py_again[4300];
            snprintf(py_again, sizeof py_again, "fuzz %s -n %d", a.target, (int)a.py_ranks);
            if (minimal_path[0])
                printf("traces: %s (failing), %s (minimal); replay with ppv %s --replay %s\n",
                       failing_path, minimal_path,
                       a.pp_target   ? "pp [the same pp options]"
                       : a.py_target ? py_again
                                     : "run SCHEDULE [the same options]",
                       minimal_path);
            if (unsaved)
                printf("traces: not written to %s (above); the minimal trace, to replay with "
                       "--replay:\n%s",
                       a.out, unsaved);
        }
        printf("result: %s\n", r->found ? "PROBLEM" : "OK");
    }
    rc = unsaved ? PPV_EXIT_BAD_INPUT : r->found ? PPV_EXIT_PROBLEM : PPV_EXIT_OK;
    free(unsaved);
    char what[128];
    snprintf(what, sizeof what, "every run (%s) passes", ppv_fuzz_strategy_name(a.f.strategy));
    if (a.junit && lead && write_junit(a.junit, a.target, what, r->found, r->failure,
                               a.f.strategy == PPV_FUZZ_DFS, r->complete) < 0)
        rc = PPV_EXIT_BAD_INPUT;
    if (made && !r->found) rmdir(a.out); /* nothing went in it */
    ppv_fuzz_report_free(r);
done:
    if (made && rc == PPV_EXIT_BAD_INPUT) rmdir(a.out); /* empty unless a trace went in */
    free(mask);
    ppv_schedule_free(s);
    py_target_close(py);
    ppv_proc_end(proc);
    return rc;
}
