/* cmd_run.c - `ppv run`, `ppv verify-recompute` and `ppv record`: one
 * training step of the built-in model on the engine (the mock transport,
 * or a job of MPI or NCCL processes), checked against the one-rank
 * reference bit for bit and against the predicted memory; recompute
 * against stash; and the step recorded as a golden HDF5 file. The three
 * share one parser, each refusing the options it would ignore.
 */
#include <errno.h>
#include <json-c/json.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "ppv_fuzz.h"
#include "ppv_golden.h"

/* The three commands' options: one parser, which refuses each command the
 * options it would ignore. */
enum {
    RUN_OPTIONS(CLI_OPTION_ID) TRANSPORT_OPTIONS(CLI_OPTION_ID) GEMM_OPTIONS(CLI_OPTION_ID)
        TRACE_OPTIONS(CLI_OPTION_ID) JUNIT_OPTIONS(CLI_OPTION_ID) RECORD_ONLY_OPTIONS(CLI_OPTION_ID)
};
static const cli_option run_options[] = {
    RUN_OPTIONS(CLI_OPTION) TRANSPORT_OPTIONS(CLI_OPTION) GEMM_OPTIONS(CLI_OPTION)
        TRACE_OPTIONS(CLI_OPTION) JUNIT_OPTIONS(CLI_OPTION) RECORD_ONLY_OPTIONS(CLI_OPTION)};

typedef struct run_args {
    ppv_run_options opt;
    ppv_recompute *recompute; /* [nstages] once the schedule is known */
    const char *recompute_text, *trace_out, *replay, *file, *junit;
    const char *recompute_texts[16]; /* verify-recompute: each --recompute given */
    int nrecompute;
    replay_trace rt; /* --replay's */
    int json, perturb, fail_after, term_after;
    int cublas; /* run: --gemm cublas */
    long long max_memory;
    const char *transport;   /* run, record: --transport mpi or nccl (NULL: the mock) */
    const char *mock_option; /* an option of the mock transport's that was given */
    const char *proc_option; /* an option of a transport of processes that was given */
} run_args;

/* Parses run's options. Returns -1 on success, else an exit code. */
static int parse_run_args(int argc, char **argv, run_args *ra) {
    memset(ra, 0, sizeof *ra);
    ra->opt = ppv_run_defaults();
    ra->recompute_text = "none";
    ra->max_memory = physical_memory();
    int is_run = strcmp(g_cmd, "run") == 0, is_record = strcmp(g_cmd, "record") == 0;
    long long n;
    int c;
    cli_parser p;
    CLI_BEGIN(&p, argv, run_options, 0);
    while ((c = cli_next(&p, argc, argv)) != CLI_END) {
        /* each command takes only the options it honours */
        if ((c == OPT_TRACE_OUT && !is_run && !is_record) || (c == OPT_JUNIT && is_record) ||
            ((c == OPT_FAIL_AFTER || c == OPT_TERM_AFTER) && !is_record))
            return usage_error("%s is not an option of this command",
                               c == OPT_TRACE_OUT    ? "--trace-out"
                               : c == OPT_JUNIT      ? "--junit"
                               : c == OPT_FAIL_AFTER ? "--fail-after"
                                                     : "--term-after");
        if ((c == OPT_TRANSPORT || c == OPT_TIMEOUT || c == OPT_ALLOW_UNSAFE) && !is_run &&
            !is_record)
            return usage_error("%s is an option of run and record",
                               c == OPT_TRANSPORT ? "--transport"
                               : c == OPT_TIMEOUT ? "--timeout"
                                                  : "--allow-unsafe");
        switch (c) {
        case OPT_POLICY:
            ra->mock_option = "--policy";
            break;
        case OPT_SEED:
            ra->mock_option = "--seed";
            break;
        case OPT_TRACE_OUT:
            ra->mock_option = "--trace-out";
            break;
        case OPT_REPLAY:
            ra->mock_option = "--replay";
            break;
        case OPT_WATCHDOG:
            ra->mock_option = "--watchdog";
            break;
        case OPT_TIMEOUT:
            ra->proc_option = "--timeout";
            break;
        case OPT_ALLOW_UNSAFE:
            ra->proc_option = "--allow-unsafe";
            break;
        }
        switch (c) {
        case OPT_SEMANTICS:
            if (semantics_option(&p, optarg, &ra->opt.sem)) return PPV_EXIT_BAD_INPUT;
            break;
        case OPT_POLICY: {
            uint64_t seed = ra->opt.policy.seed;
            if (ppv_policy_parse(optarg, &ra->opt.policy) < 0)
                return value_error("policy", &p.cur->value, "rr, random, pct or pct:DEPTH,", optarg);
            ra->opt.policy.seed = seed;
            break;
        }
        case OPT_SEED:
            ra->opt.policy.seed = (uint64_t)p.num;
            break;
        case OPT_RECOMPUTE:
            if (ra->nrecompute == (strcmp(g_cmd, "verify-recompute") == 0 ? 16 : 1))
                return usage_error("takes %s", strcmp(g_cmd, "verify-recompute") == 0
                                                   ? "at most 16 --recompute policies"
                                                   : "one --recompute (verify-recompute takes "
                                                     "several)");
            char err[512];
            if (ppv_recompute_parse(optarg, -1, NULL, err, sizeof err) < 0) {
                fprintf(stderr, "ppv %s: --recompute %s\n", g_cmd, err);
                return bad_option();
            }
            ra->recompute_text = optarg;
            ra->recompute_texts[ra->nrecompute++] = optarg;
            break;
        case OPT_TRACE_OUT: ra->trace_out = optarg; break;
        case OPT_REPLAY: ra->replay = optarg; break;
        case OPT_LAYERS:
            ra->opt.model.layers = (int32_t)p.num;
            break;
        case OPT_WIDTH:
            if ((n = p.num) % ra->opt.model.n_heads)
                return usage_error("--width needs a multiple of the model's heads, not '%s'",
                                   optarg);
            ra->opt.model.d_model = (int32_t)n;
            ra->opt.model.d_ff = 2 * (int32_t)n;
            break;
        case OPT_WATCHDOG:
            ra->opt.watchdog_steps = p.num;
            break;
        case OPT_JSON: ra->json = 1; break;
        case OPT_PERTURB: ra->perturb = 1; break;
        case OPT_FAIL_AFTER: /* record's crash test: stop after N datasets */
            ra->fail_after = (int)p.num;
            break;
        case OPT_TERM_AFTER: /* record's interruption test: SIGTERM itself after N datasets */
            ra->term_after = (int)p.num;
            break;
        case OPT_JUNIT: ra->junit = optarg; break;
        case OPT_MAX_MEMORY:
            ra->max_memory = p.num;
            break;
        case OPT_DEVICE:
            if (device_option(optarg, &ra->opt.device) < 0) return PPV_EXIT_BAD_INPUT;
            break;
        case OPT_GEMM:
            if (!is_run) return usage_error("%s is run's option", "--gemm");
            if (strcmp(optarg, "reference") != 0 && strcmp(optarg, "cublas") != 0)
                return usage_error("--gemm is reference or cublas, not '%s'", optarg);
            ra->cublas = strcmp(optarg, "cublas") == 0;
            break;
        case OPT_TRANSPORT:
            if (transport_option(optarg, &ra->transport) < 0) return PPV_EXIT_BAD_INPUT;
            break;
        case OPT_TIMEOUT:
            ra->opt.timeout_s = p.real;
            break;
        case OPT_ALLOW_UNSAFE:
            ra->opt.allow_unsafe = 1;
            break;
        case CLI_HELP: return print_help();
        default: return bad_option();
        }
    }
    /* each transport takes only the options it honours */
    if (ra->transport && ra->mock_option)
        return usage_error("%s is the mock transport's: on --transport mpi or nccl the ranks are "
                           "processes that MPI or NCCL schedules",
                           ra->mock_option);
    if (!ra->transport && ra->proc_option)
        return usage_error("%s is for --transport mpi or nccl (the mock reports a deadlock "
                           "without running into it)",
                           ra->proc_option);
    if (ra->cublas) {
        if (!ra->opt.device || strcmp(ra->opt.device, "cuda") != 0)
            return usage_error("--gemm cublas runs on the GPU: it needs --device cuda%s", "");
        ra->opt.device = "cuda:cublas";
    }
    if (optind != argc - 1) return usage_error("needs one schedule FILE (- for standard input)%s", "");
    ra->file = argv[optind];
    return -1;
}

/* Estimated memory of running s with o: the schedule, every microbatch's
 * inputs, and each stage's activations for every microbatch (the most a
 * rank can hold), in bytes. */
static double run_estimate(const ppv_schedule *s, const ppv_run_options *o) {
    ppv_model_config cfg = ppv_run_model_config(o, s);
    double actions = 0;
    for (int32_t r = 0; r < s->nranks; r++) actions += s->prog[r].n;
    double tc = (double)cfg.seq_len * cfg.d_model;
    double per_layer_mb = tc * 2 * 16 + (double)cfg.seq_len * cfg.seq_len * cfg.n_heads * 4;
    double weights = (double)cfg.layers * (12.0 * cfg.d_model * cfg.d_model) * 4 * 3;
    return actions * BYTES_PER_ACTION + weights +
           (double)s->nmb * ((double)cfg.layers * per_layer_mb + tc * 8);
}

/* Loads the schedule and the trace to replay, and sets the recompute mask. */
static int prepare_run(run_args *ra, ppv_schedule **s) {
    char err[1024];
    int rc = refuse_if_too_big(ra->file, file_estimate(ra->file), ra->max_memory);
    if (rc >= 0) return rc;
    if (ppv_schedule_load(ra->file, PPV_DIALECT_AUTO, s, err, sizeof err) < 0) {
        fprintf(stderr, "ppv %s: %s\n", g_cmd, err);
        return PPV_EXIT_BAD_INPUT;
    }
    char what[300];
    snprintf(what, sizeof what, "running %s", (*s)->name);
    double estimate = run_estimate(*s, &ra->opt);
    rc = refuse_if_too_big(what, estimate, ra->max_memory);
    if (rc >= 0) return rc;
    ra->recompute = calloc((size_t)((*s)->nstages + 1), sizeof *ra->recompute);
    if (!ra->recompute ||
        ppv_recompute_parse(ra->recompute_text, (*s)->nstages, ra->recompute, err, sizeof err) < 0) {
        fprintf(stderr, "ppv %s: --recompute %s\n", g_cmd, ra->recompute ? err : "out of memory");
        return PPV_EXIT_BAD_INPUT;
    }
    ra->opt.recompute = ra->recompute;
    if (ra->replay) {
        int32_t P;
        /* what the run leaves of --max-memory, at 4 bytes a decision; a
         * fault the explorer put in is part of what the trace replays, and
         * the failure it found what the replay is judged by */
        int64_t cap = (int64_t)(((double)ra->max_memory - estimate) / 4);
        if (replay_trace_read(ra->replay, cap, &ra->rt, &ra->opt.policy, &ra->opt.fault, &P) < 0)
            return PPV_EXIT_BAD_INPUT;
        if (P != (*s)->nranks) {
            fprintf(stderr, "ppv %s: %s: trace of %d ranks, schedule of %d\n", g_cmd, ra->replay, P,
                    (*s)->nranks);
            return PPV_EXIT_BAD_INPUT;
        }
    }
    return -1;
}

static const char *status_name(ppv_run_status st) {
    static const char *const names[] = {"done", "deadlock", "hang", "failed"};
    return names[st];
}

static json_object *bytes_json(const int64_t *v, int32_t n) {
    json_object *a = json_object_new_array();
    for (int32_t k = 0; k < n; k++) json_object_array_add(a, json_object_new_int64(v[k]));
    return a;
}

/* Adds a run's checks to j: completion, one case per rank for deadlock and
 * for measured vs predicted memory, and the gradients against the
 * reference (when given). Returns 0, or -1 when out of memory. */
static int run_cases(junit *j, const char *label, const ppv_run_report *rep, int ref_known,
                     int matches, uint64_t ref_digest) {
    char name[128];
    int rc = 0, done = rep->world.status == PPV_RUN_DONE;
    snprintf(name, sizeof name, "%scompletes", label);
    rc |= done ? junit_add(j, name, NULL)
               : junit_add(j, name, "%s: %s", status_name(rep->world.status), rep->world.message);
    for (int32_t r = 0; r < rep->nranks; r++) {
        const ppv_wait *w = NULL;
        for (int32_t k = 0; k < rep->world.nblocked; k++)
            if (rep->world.blocked[k].rank == r) w = &rep->world.blocked[k];
        snprintf(name, sizeof name, "%sdeadlock-free: rank %d", label, r);
        rc |= w ? junit_add(j, name, "blocked at %s, waits for rank %d: %s", w->action, w->waits_for,
                            w->reason)
                : junit_add(j, name, NULL);
    }
    if (!done) return rc;
    for (int32_t r = 0; r < rep->nranks; r++) {
        snprintf(name, sizeof name, "%sactivation bytes as predicted: rank %d", label, r);
        rc |= rep->peak_bytes[r] == rep->predicted_bytes[r]
                  ? junit_add(j, name, NULL)
                  : junit_add(j, name, "measured peak %lld bytes, predicted %lld",
                              (long long)rep->peak_bytes[r], (long long)rep->predicted_bytes[r]);
    }
    if (ref_known) {
        snprintf(name, sizeof name, "%sgradients equal the one-rank reference", label);
        rc |= matches ? junit_add(j, name, NULL)
                      : junit_add(j, name, "grad digest %016llx, reference %016llx",
                                  (unsigned long long)rep->grad_digest,
                                  (unsigned long long)ref_digest);
    }
    return rc;
}

static int run_junit(const char *path, const ppv_schedule *s, const ppv_run_report *rep,
                     int matches, uint64_t ref_digest) {
    junit j;
    char suite[300];
    snprintf(suite, sizeof suite, "ppv run %s", s->name);
    junit_init(&j, suite);
    return finish_junit(&j, path, run_cases(&j, "", rep, 1, matches, ref_digest));
}

/* --transport for run and record: joins the job (ra->opt.proc); rank 0
 * alone writes the JUnit file. -1, or an exit code. */
static int join_transport(run_args *ra, ppv_proc **proc, int *lead) {
    int rc = start_transport(ra->transport, proc, lead);
    if (rc >= 0) return rc;
    ra->opt.proc = *proc;
    if (!*lead) ra->junit = NULL;
    return -1;
}

/* ---- run ------------------------------------------------------------------------------- */

/* ppv run SCHEDULE [options]. */
int cmd_run(int argc, char **argv) {
    run_args ra;
    int rc = parse_run_args(argc, argv, &ra);
    if (rc >= 0) return rc;
    ppv_schedule *s = NULL;
    ppv_run_report *rep = NULL;
    float *ref = NULL;
    char err[1024];
    ppv_proc *proc = NULL;
    int lead = 1; /* this process prints the report (on MPI, rank 0) */
    if ((rc = join_transport(&ra, &proc, &lead)) >= 0) return rc;
    if ((rc = prepare_run(&ra, &s)) >= 0) goto done;
    ra.opt.perturb = ra.perturb;
    progress pr;
    progress_attach(&ra.opt, &pr, "run", ra.json || !lead);
    int run_rc = ppv_run(s, &ra.opt, &rep, err, sizeof err);
    progress_end(&pr);
    if (run_rc < 0) {
        fprintf(stderr, "ppv run: %s\n", err);
        rc = PPV_EXIT_BAD_INPUT;
        goto done;
    }
    int done_ok = rep->world.status == PPV_RUN_DONE;
    size_t nref = 0;
    double ref_loss = 0;
    ppv_model_config cfg = ppv_run_model_config(&ra.opt, s);
    if (ppv_run_reference(&cfg, s->nmb, &ref, &nref, &ref_loss, err, sizeof err) < 0) {
        fprintf(stderr, "ppv run: reference: %s\n", err);
        rc = PPV_EXIT_BAD_INPUT;
        goto done;
    }
    uint64_t ref_digest = ppv_digest(ref, nref * sizeof *ref);
    int matches = done_ok && rep->grad_digest == ref_digest;
    /* cuBLAS sums in its own order: within the bound, not bit for bit */
    ppv_grad_diff gd = {0};
    if (done_ok && ra.cublas) {
        ppv_grads_compare(rep->grads, ref, nref < rep->ngrads ? nref : rep->ngrads, &gd);
        matches = nref == rep->ngrads && gd.rel_l2 <= PPV_CUBLAS_GRAD_BOUND;
    }
    int mem_ok = done_ok && memcmp(rep->peak_bytes, rep->predicted_bytes,
                                   (size_t)rep->nranks * sizeof *rep->peak_bytes) == 0;
    int ok = done_ok && matches && mem_ok;
    /* a replayed trace: another program diverges; a recorded failure is
     * judged again as the explorer judged it */
    replay_judgement rj = {ra.replay && rep->world.diverged, 0, 0, ""};
    rj.judged = ra.replay && !rj.diverged && ra.rt.verdict.present;
    if (rj.diverged) ok = 0;
    else if (rj.judged)
        ok = rj.passes = ppv_fuzz_judge_run(&ra.opt, rep, ra.rt.verdict.reference, rj.why,
                                            sizeof rj.why);
    if (ra.trace_out && rep->trace) {
        if (write_trace_file(ra.trace_out, rep->trace, 0, NULL) < 0) {
            rc = PPV_EXIT_BAD_INPUT;
            goto done;
        }
    }
    if (ra.junit && run_junit(ra.junit, s, rep, matches, ref_digest) < 0) {
        rc = PPV_EXIT_BAD_INPUT;
        goto done;
    }
    if (ra.json) {
        json_object *o = json_object_new_object();
        char sem[64];
        ppv_semantics_format(&ra.opt.sem, sem, sizeof sem);
        json_object_object_add(o, "ok", json_object_new_boolean(ok));
        json_object_object_add(o, "status", json_object_new_string(status_name(rep->world.status)));
        json_object_object_add(o, "message", json_object_new_string(rep->world.message));
        json_object_object_add(o, "semantics", json_object_new_string(sem));
        json_object_object_add(o, "transport",
                               json_object_new_string(proc ? ppv_proc_name(proc) : "mock"));
        if (proc) json_object_object_add(o, "processes", json_object_new_int(ppv_proc_size(proc)));
        json_object_object_add(o, "device",
                               json_object_new_string(ra.cublas       ? "cuda"
                                                      : ra.opt.device ? ra.opt.device
                                                                      : "cpu"));
        json_object_object_add(o, "gemm",
                               json_object_new_string(ra.cublas ? "cublas" : "reference"));
        if (ra.cublas && done_ok) {
            json_object_object_add(o, "grad_max_ulp", json_object_new_int64((int64_t)gd.max_ulp));
            json_object_object_add(o, "grad_rel_l2", finite_json(gd.rel_l2));
            json_object_object_add(o, "grad_rel_l2_bound",
                                   finite_json(PPV_CUBLAS_GRAD_BOUND));
        }
        json_object_object_add(o, "steps", json_object_new_int64(rep->world.steps));
        json_object_object_add(o, "loss", done_ok ? finite_json(rep->loss) : NULL);
        json_object_object_add(o, "grad_digest", done_ok ? hex_json(rep->grad_digest) : NULL);
        json_object_object_add(o, "reference_grad_digest", hex_json(ref_digest));
        json_object_object_add(o, "matches_reference", json_object_new_boolean(matches));
        json_object_object_add(o, "peak_activation_bytes",
                               bytes_json(rep->peak_bytes ? rep->peak_bytes : rep->predicted_bytes,
                                          rep->peak_bytes ? rep->nranks : 0));
        json_object_object_add(o, "predicted_peak_activation_bytes",
                               bytes_json(rep->predicted_bytes, rep->predicted_bytes ? rep->nranks : 0));
        json_object_object_add(o, "grad_buffers_peak", json_object_new_int(rep->grad_buffers_peak));
        json_object_object_add(o, "trace_digest", hex_json(rep->world.trace_digest));
        if (ra.opt.policy.kind == PPV_POLICY_PCT) {
            json_object_object_add(o, "pct_steps", json_object_new_int64(rep->pct_steps));
            json_object_object_add(o, "pct_change_points_fired",
                                   json_object_new_int(rep->world.pct_fired));
        }
        json_object_object_add(o, "deadlock",
                               json_object_new_boolean(rep->world.status == PPV_RUN_DEADLOCK));
        json_object *cyc = json_object_new_array(), *bl = json_object_new_array();
        for (int32_t k = 0; k < rep->world.ncycle; k++)
            json_object_array_add(cyc, wait_json(&rep->world.cycle[k]));
        for (int32_t k = 0; k < rep->world.nblocked; k++)
            json_object_array_add(bl, wait_json(&rep->world.blocked[k]));
        json_object_object_add(o, "cycle", cyc);
        json_object_object_add(o, "blocked", bl);
        json_object_object_add(o, "replay", ra.replay ? replay_json(&rj, &ra.rt.verdict) : NULL);
        puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(o);
    } else {
        printf("%s: %d ranks, %d stages, %d microbatches, %d layers\n", s->name, rep->nranks,
               rep->nstages, rep->nmb, rep->nlayers);
        if (rep->world.status == PPV_RUN_FAILED)
            printf("status: failed: %s\n", rep->world.message);
        else if (rep->world.message[0]) /* the message opens with the status */
            printf("status: %s\n", rep->world.message);
        else if (proc)
            printf("status: %s on %d %s processes, one rank each\n", status_name(rep->world.status),
                   ppv_proc_size(proc), strcmp(ppv_proc_name(proc), "mpi") == 0 ? "MPI" : "NCCL");
        else
            printf("status: %s after %lld scheduler steps\n", status_name(rep->world.status),
                   (long long)rep->world.steps);
        for (int32_t k = 0; k < rep->world.nblocked; k++) {
            const ppv_wait *w = &rep->world.blocked[k];
            printf("  rank %d blocked at %s, waits for rank %d: %s\n", w->rank, w->action,
                   w->waits_for, w->reason);
        }
        if (rep->world.ncycle) {
            printf("cycle:");
            for (int32_t k = 0; k < rep->world.ncycle; k++)
                printf(" rank %d (%s) ->", rep->world.cycle[k].rank, rep->world.cycle[k].action);
            printf(" rank %d\n", rep->world.cycle[0].rank);
        }
        if (done_ok) {
            if (ra.opt.device && strcmp(ra.opt.device, "cpu") != 0)
                printf("device: cuda%s (the one-rank reference runs on the CPU)\n",
                       ra.cublas ? ", matmuls on cuBLAS" : "");
            if (ra.cublas)
                printf("loss: %.9g\ngrad digest: %016llx (reference %016llx): cuBLAS sums in its "
                       "own order: max %llu ULP, relative 2-norm %.3g %s %.3g: %s\n",
                       rep->loss, (unsigned long long)rep->grad_digest,
                       (unsigned long long)ref_digest, (unsigned long long)gd.max_ulp, gd.rel_l2,
                       matches ? "<=" : ">", PPV_CUBLAS_GRAD_BOUND,
                       matches ? "within the bound" : "OUTSIDE THE BOUND");
            else
                printf("loss: %.9g\ngrad digest: %016llx (reference %016llx): %s\n", rep->loss,
                       (unsigned long long)rep->grad_digest, (unsigned long long)ref_digest,
                       matches ? "bitwise equal" : "DIFFERENT");
            printf("peak activation bytes:");
            for (int32_t r = 0; r < rep->nranks; r++)
                printf(" %lld%s", (long long)rep->peak_bytes[r],
                       rep->peak_bytes[r] == rep->predicted_bytes[r] ? "" : "(!)");
            printf("  (predicted%s)\n", mem_ok ? ": all equal" : " differs where marked");
        }
        if (proc)
            printf("transport: %s (no trace: %s, not ppv, orders the ranks)\n", ppv_proc_name(proc),
                   strcmp(ppv_proc_name(proc), "mpi") == 0 ? "MPI" : "NCCL");
        else
            printf("trace digest: %016llx\n", (unsigned long long)rep->world.trace_digest);
        if (!print_replay(&rj, &ra.rt.verdict, rep->world.message))
            printf("result: %s\n", ok ? "OK" : "PROBLEM");
    }
    rc = ok ? PPV_EXIT_OK : PPV_EXIT_PROBLEM;
done:
    free(ref);
    free(ra.recompute);
    replay_trace_free(&ra.rt);
    ppv_run_report_free(rep);
    ppv_schedule_free(s);
    ppv_proc_end(proc);
    return rc;
}

/* ---- verify-recompute ------------------------------------------------------------------ */

static void print_bytes(const char *label, const int64_t *v, int32_t n) {
    printf("%s", label);
    for (int32_t r = 0; r < n; r++) printf(" %lld", (long long)v[r]);
    putchar('\n');
}

/* One policy's verdict against stash, for verify-recompute: runs both,
 * adds its JUnit cases to j (when not NULL, each name prefixed by `label`)
 * and its JSON object to arr (when not NULL; `text` names the policy
 * there), or prints it. Returns 1 when
 * it passed, 0 when not, or an exit code + 2 when it could not run. */
static int verify_policy(const ppv_schedule *s, ppv_run_options o, const char *text,
                         const char *label, junit *j, json_object *arr, int *jrc) {
    ppv_recompute_verdict v;
    char err[1024], name[256];
    progress pr;
    progress_attach(&o, &pr, "verify-recompute", arr != NULL);
    int vrc = ppv_verify_recompute(s, &o, &v, err, sizeof err);
    progress_end(&pr);
    if (vrc < 0) {
        fprintf(stderr, "ppv verify-recompute: %s\n", err);
        return PPV_EXIT_BAD_INPUT + 2;
    }
    /* Evidence that the recompute path really re-ran the forward (the engine
     * compares the runs' counters with what the schedule implies) and what
     * recomputing costs in layer and stage forwards (cost units at F = 1). */
    int done_both = v.stash->world.status == PPV_RUN_DONE && v.recompute->world.status == PPV_RUN_DONE;
    const ppv_recompute_evidence *ev = &v.evidence;
    long long fw_stash = ev->stash_forwards, fw_rec = ev->recompute_forwards;
    long long want_stash = ev->want_stash_forwards, want_rec = ev->want_recompute_forwards;
    long long cores = ev->core_rebuilds, want_cores = ev->want_core_rebuilds;
    long long lf_stash = ev->stash_layer_forwards, lf_rec = ev->recompute_layer_forwards;
    double extra_units = ev->extra_forward_units;
    int fw_ok = done_both && ev->forwards_ok, pred_ok = done_both && ev->peaks_ok;

    if (j) {
        snprintf(name, sizeof name, "%sstash: ", label);
        *jrc |= run_cases(j, name, v.stash, 0, 0, 0);
        snprintf(name, sizeof name, "%srecompute: ", label);
        *jrc |= run_cases(j, name, v.recompute, 0, 0, 0);
        if (done_both) {
            snprintf(name, sizeof name, "%srecompute equals stash bit for bit", label);
            *jrc |= v.diff.bitwise_equal
                        ? junit_add(j, name, NULL)
                        : junit_add(j, name,
                                    "first difference: layer %d %s[%lld]: recompute %.9g, stash "
                                    "%.9g; max ulp %llu",
                                    v.first_layer, v.first_tensor, (long long)v.first_tensor_index,
                                    v.diff.first_a, v.diff.first_b,
                                    (unsigned long long)v.diff.max_ulp);
            snprintf(name, sizeof name, "%sforward passes as the schedule implies", label);
            *jrc |= fw_ok ? junit_add(j, name, NULL)
                          : junit_add(j, name,
                                      "stash ran %lld (schedule: %lld), recompute %lld (schedule: "
                                      "%lld); attention cores rebuilt %lld (schedule: %lld)",
                                      fw_stash, want_stash, fw_rec, want_rec, cores, want_cores);
            snprintf(name, sizeof name, "%smeasured peak bytes equal the prediction", label);
            *jrc |= pred_ok ? junit_add(j, name, NULL)
                            : junit_add(j, name,
                                        "rank 0: stash %lld (predicted %lld), recompute %lld "
                                        "(predicted %lld)",
                                        (long long)v.stash->peak_bytes[0],
                                        (long long)v.stash->predicted_bytes[0],
                                        (long long)v.recompute->peak_bytes[0],
                                        (long long)v.recompute->predicted_bytes[0]);
        }
    }
    const ppv_run_report *bad = v.stash->world.status != PPV_RUN_DONE       ? v.stash
                                : v.recompute->world.status != PPV_RUN_DONE ? v.recompute
                                                                            : NULL;
    if (bad) {
        fprintf(stderr, "ppv verify-recompute: %sthe %s run did not complete (%s): %s\n", label,
                bad == v.stash ? "stash" : "recompute", status_name(bad->world.status),
                bad->world.message);
        ppv_recompute_verdict_free(&v);
        return 0;
    }
    const ppv_grad_diff *d = &v.diff;
    int ok = d->bitwise_equal && fw_ok && pred_ok;
    if (arr) {
        json_object *o2 = json_object_new_object();
        json_object_object_add(o2, "policy", json_object_new_string(text));
        json_object_object_add(o2, "ok", json_object_new_boolean(ok));
        json_object_object_add(o2, "bitwise_equal", json_object_new_boolean(d->bitwise_equal));
        json_object_object_add(o2, "stash_forward_passes", json_object_new_int64(fw_stash));
        json_object_object_add(o2, "recompute_forward_passes", json_object_new_int64(fw_rec));
        json_object_object_add(o2, "expected_recompute_forward_passes", json_object_new_int64(want_rec));
        json_object_object_add(o2, "attention_core_rebuilds", json_object_new_int64(cores));
        json_object_object_add(o2, "expected_attention_core_rebuilds",
                               json_object_new_int64(want_cores));
        json_object_object_add(o2, "gradients", json_object_new_int64((int64_t)v.stash->ngrads));
        json_object_object_add(o2, "max_ulp", json_object_new_int64((int64_t)d->max_ulp));
        json_object_object_add(o2, "max_abs", finite_json(d->max_abs));
        json_object_object_add(o2, "max_rel", finite_json(d->max_rel));
        json_object_object_add(o2, "first_index", json_object_new_int64(d->first_index));
        json_object_object_add(o2, "first_layer", json_object_new_int(v.first_layer));
        json_object_object_add(o2, "first_tensor",
                               d->bitwise_equal ? NULL : json_object_new_string(v.first_tensor));
        json_object_object_add(o2, "first_tensor_index", json_object_new_int64(v.first_tensor_index));
        json_object_object_add(o2, "first_recompute",
                               d->bitwise_equal ? NULL : finite_json(d->first_a));
        json_object_object_add(o2, "first_stash",
                               d->bitwise_equal ? NULL : finite_json(d->first_b));
        json_object_object_add(o2, "stash_grad_digest", hex_json(v.stash->grad_digest));
        json_object_object_add(o2, "recompute_grad_digest", hex_json(v.recompute->grad_digest));
        json_object_object_add(o2, "stash_peak_activation_bytes",
                               bytes_json(v.stash->peak_bytes, v.stash->nranks));
        json_object_object_add(o2, "recompute_peak_activation_bytes",
                               bytes_json(v.recompute->peak_bytes, v.recompute->nranks));
        json_object_object_add(o2, "recompute_predicted_peak_activation_bytes",
                               bytes_json(v.recompute->predicted_bytes, v.recompute->nranks));
        json_object_object_add(o2, "predicted_equals_measured", json_object_new_boolean(pred_ok));
        json_object_object_add(o2, "stash_layer_forwards", json_object_new_int64(lf_stash));
        json_object_object_add(o2, "recompute_layer_forwards", json_object_new_int64(lf_rec));
        json_object_object_add(o2, "extra_stage_forwards", finite_json(extra_units));
        json_object_array_add(arr, o2);
    } else {
        printf("%s: %zu gradients, recompute vs stash: %s\n", s->name, v.stash->ngrads,
               d->bitwise_equal ? "bitwise equal" : "DIFFERENT");
        if (!d->bitwise_equal)
            printf("max ulp %llu, max abs %.9g, max rel %.9g\nfirst difference: gradient %lld = "
                   "layer %d %s[%lld]: recompute %.9g, stash %.9g\n",
                   (unsigned long long)d->max_ulp, d->max_abs, d->max_rel,
                   (long long)d->first_index, v.first_layer, v.first_tensor,
                   (long long)v.first_tensor_index, d->first_a, d->first_b);
        print_bytes("peak activation bytes, stash:    ", v.stash->peak_bytes, v.stash->nranks);
        print_bytes("peak activation bytes, recompute:", v.recompute->peak_bytes,
                    v.recompute->nranks);
        print_bytes("predicted, recompute:            ", v.recompute->predicted_bytes,
                    v.recompute->nranks);
        if (!pred_ok) printf("peak activation bytes: measured and predicted DIFFER\n");
        printf("forward passes: stash %lld, recompute %lld (the schedule implies %lld and %lld)%s\n",
               fw_stash, fw_rec, want_stash, want_rec,
               fw_stash == want_stash && fw_rec == want_rec ? "" : ": MISMATCH");
        if (want_cores || cores)
            printf("attention cores rebuilt: %lld layers (the schedule implies %lld)%s\n", cores,
                   want_cores, cores == want_cores ? "" : ": MISMATCH");
        printf("extra forward compute: %lld layer forwards beyond stash's %lld (+%.1f%%), %.10g "
               "stage forwards (cost units at F = 1)\n",
               lf_rec - lf_stash, lf_stash,
               lf_stash ? 100.0 * (double)(lf_rec - lf_stash) / (double)lf_stash : 0.0,
               extra_units);
        printf("result: %s\n", ok ? "OK" : "PROBLEM");
    }
    ppv_recompute_verdict_free(&v);
    return ok;
}

/* verify-recompute: each --recompute given (every stage full when none is)
 * against stash; several are verified one after the other. */
int cmd_verify_recompute(int argc, char **argv) {
    run_args ra;
    int rc = parse_run_args(argc, argv, &ra);
    if (rc >= 0) return rc;
    ppv_schedule *s = NULL;
    ppv_recompute *pol = NULL;
    json_object *arr = NULL;
    junit j;
    int jrc = 0, have_junit = 0;
    if ((rc = prepare_run(&ra, &s)) >= 0) goto done;
    int n = ra.nrecompute ? ra.nrecompute : 1, multi = n > 1;
    /* every policy is read before anything runs */
    pol = calloc((size_t)n * ((size_t)s->nstages + 1), sizeof *pol);
    if (!pol) {
        fprintf(stderr, "ppv verify-recompute: out of memory\n");
        rc = PPV_EXIT_BAD_INPUT;
        goto done;
    }
    for (int k = 0; k < ra.nrecompute; k++) {
        char err[512];
        if (ppv_recompute_parse(ra.recompute_texts[k], s->nstages, pol + (size_t)k * (s->nstages + 1),
                                err, sizeof err) < 0) {
            fprintf(stderr, "ppv verify-recompute: --recompute %s\n", err);
            rc = PPV_EXIT_BAD_INPUT;
            goto done;
        }
    }
    if (ra.junit) {
        char suite[300];
        snprintf(suite, sizeof suite, "ppv verify-recompute %s", s->name);
        junit_init(&j, suite);
        have_junit = 1;
    }
    if (ra.json && !(arr = json_object_new_array())) {
        fprintf(stderr, "ppv verify-recompute: out of memory\n");
        rc = PPV_EXIT_BAD_INPUT;
        goto done;
    }
    int all_ok = 1;
    for (int k = 0; k < n; k++) {
        const char *text = ra.nrecompute ? ra.recompute_texts[k] : "none";
        ppv_run_options o = ra.opt;
        /* "none", the default, means every stage in full (ppv_verify_recompute) */
        o.recompute = strcmp(text, "none") == 0 ? NULL : pol + (size_t)k * (s->nstages + 1);
        o.perturb = ra.perturb;
        char label[256] = "";
        if (multi) snprintf(label, sizeof label, "[%s] ", text);
        if (k == 0 && !ra.json && ra.opt.device && strcmp(ra.opt.device, "cpu") != 0)
            printf("device: %s (both runs)\n", ra.opt.device);
        if (multi && !ra.json) printf("%spolicy %s\n", k ? "\n" : "", text);
        int v = verify_policy(s, o, text, label, have_junit ? &j : NULL, arr, &jrc);
        if (v >= 2) {
            rc = v - 2;
            goto done;
        }
        all_ok &= v;
    }
    if (have_junit) {
        have_junit = 0;
        if (finish_junit(&j, ra.junit, jrc) < 0) {
            rc = PPV_EXIT_BAD_INPUT;
            goto done;
        }
    }
    if (arr) {
        json_object *out = arr;
        if (multi) {
            out = json_object_new_object();
            json_object_object_add(out, "ok", json_object_new_boolean(all_ok));
            json_object_object_add(out, "policies", arr);
        } else {
            out = json_object_get(json_object_array_get_idx(arr, 0));
            json_object_put(arr);
        }
        arr = NULL;
        if (out) puts(json_object_to_json_string_ext(out, JSON_C_TO_STRING_PLAIN));
        json_object_put(out);
    }
    if (multi && !ra.json) printf("\nresult: %s (%d policies)\n", all_ok ? "OK" : "PROBLEM", n);
    rc = all_ok ? PPV_EXIT_OK : PPV_EXIT_PROBLEM;
done:
    if (have_junit) junit_free(&j);
    json_object_put(arr);
    free(pol);
    free(ra.recompute);
    replay_trace_free(&ra.rt);
    ppv_schedule_free(s);
    return rc;
}

/* ---- record ---------------------------------------------------------------------------- */

/* ppv record OUT.h5 SCHEDULE [options]: the step as run runs it, written
 * as a golden file. */
int cmd_record(int argc, char **argv) {
    if (argc >= 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) return print_help();
    if (argc < 2 || argv[1][0] == '-')
        return usage_error("needs OUT.h5 and a schedule FILE%s", "");
    const char *out = argv[1];
    run_args ra;
    int rc = parse_run_args(argc - 1, argv + 1, &ra); /* OUT.h5 stands where the command was */
    if (rc >= 0) return rc;
    ppv_schedule *s = NULL;
    ppv_run_report *rep = NULL;
    char *text = NULL, err[1024];
    ppv_proc *proc = NULL;
    int lead = 1; /* this process writes the file (on MPI, rank 0) */
    if ((rc = join_transport(&ra, &proc, &lead)) >= 0) return rc;
    if ((rc = prepare_run(&ra, &s)) >= 0) goto done;
    size_t len = 0;
    if (!(text = ppv_file_read(ra.file, &len, err, sizeof err))) {
        fprintf(stderr, "ppv record: %s\n", err);
        rc = PPV_EXIT_BAD_INPUT;
        goto done;
    }
    ppv_record_options ro;
    memset(&ro, 0, sizeof ro);
    ro.run = ra.opt;
    ro.run.perturb = ra.perturb; /* the file then holds the flipped bit: its replay must fail */
    ro.schedule_text = text;
    ro.schedule_len = len;
    const char *slash = strrchr(ra.file, '/');
    ro.schedule_name = strcmp(ra.file, "-") == 0 ? "stdin" : slash ? slash + 1 : ra.file;
    ro.recompute_text = ra.recompute_text;
    ro.fail_after = ra.fail_after;
    ro.term_after = ra.term_after;
    progress pr;
    progress_attach(&ro.run, &pr, "record", ra.json);
    /* on MPI every rank runs its part; rank 0 writes what they computed */
    int rrc = lead ? ppv_golden_record(out, s, &ro, &rep, err, sizeof err)
                   : ppv_run(s, &ro.run, &rep, err, sizeof err);
    progress_end(&pr);
    if (rrc < 0) {
        fprintf(stderr, "ppv record: %s\n", err);
        rc = PPV_EXIT_BAD_INPUT;
        goto done;
    }
    if (rep->world.status != PPV_RUN_DONE) {
        fprintf(stderr, "ppv record: the run did not complete, nothing written: %s\n",
                rep->world.message);
        rc = PPV_EXIT_PROBLEM;
        goto done;
    }
    if (ra.trace_out && write_trace_file(ra.trace_out, rep->trace, 0, NULL) < 0) {
        rc = PPV_EXIT_BAD_INPUT;
        goto done;
    }
    if (ra.json) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "ok", json_object_new_boolean(1));
        json_object_object_add(o, "file", json_object_new_string(out));
        json_object_object_add(o, "schedule", json_object_new_string(s->name));
        json_object_object_add(o, "ranks", json_object_new_int(rep->nranks));
        json_object_object_add(o, "stages", json_object_new_int(rep->nstages));
        json_object_object_add(o, "microbatches", json_object_new_int(rep->nmb));
        json_object_object_add(o, "layers", json_object_new_int(rep->nlayers));
        json_object_object_add(o, "loss", finite_json(rep->loss));
        json_object_object_add(o, "grad_digest", hex_json(rep->grad_digest));
        json_object_object_add(o, "trace_digest", hex_json(rep->world.trace_digest));
        json_object_object_add(o, "perturbed", json_object_new_boolean(ra.perturb));
        puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(o);
    } else {
        printf("%s: recorded %s (%d ranks, %d stages, %d microbatches, %d layers), loss %.9g, grad "
               "digest %016llx%s\n",
               out, s->name, rep->nranks, rep->nstages, rep->nmb, rep->nlayers, rep->loss,
               (unsigned long long)rep->grad_digest,
               ra.perturb ? " (perturbed: one gradient bit flipped, so its replay fails)" : "");
    }
    rc = PPV_EXIT_OK;
done:
    free(text);
    free(ra.recompute);
    replay_trace_free(&ra.rt);
    ppv_run_report_free(rep);
    ppv_schedule_free(s);
    ppv_proc_end(proc);
    return rc;
}

