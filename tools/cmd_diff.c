/* cmd_diff.c - `ppv replay` and `ppv diff`: a golden file re-run from the
 * file alone and compared with what it recorded (a training step, or an
 * inference recording with the file as stage 0), and two HDF5 files
 * compared under a tolerance. Both read files from other systems, so the
 * comparison runs in a child process that a corrupted file can only
 * crash. They share one parser, each refusing the other's own options.
 */
#include <errno.h>
#include <json-c/json.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cli.h"
#include "ppv_golden.h"

enum {
    DIFF_OPTIONS(CLI_OPTION_ID) DIFF_ONLY_OPTIONS(CLI_OPTION_ID) IGNORE_ATTR_OPTIONS(CLI_OPTION_ID)
        EXCLUDE_OPTIONS(CLI_OPTION_ID) REPLAY_ONLY_OPTIONS(CLI_OPTION_ID)
            REPLAY_TRANSPORT_OPTIONS(CLI_OPTION_ID)
};
static const cli_option diff_options[] = {
    DIFF_OPTIONS(CLI_OPTION) DIFF_ONLY_OPTIONS(CLI_OPTION) IGNORE_ATTR_OPTIONS(CLI_OPTION)
        EXCLUDE_OPTIONS(CLI_OPTION) REPLAY_ONLY_OPTIONS(CLI_OPTION)
            REPLAY_TRANSPORT_OPTIONS(CLI_OPTION)};

/* " on cuda" for a device other than the CPU, else "". */
static const char *on_device(const char *device) {
    return device && strcmp(device, "cpu") != 0 ? " on cuda" : "";
}

enum { MAX_LEFT_OUT = 64 }; /* --ignore-attr and --exclude patterns, each */

typedef struct diff_args {
    ppv_diff_options o; /* o.ignore_attrs and o.excludes point into the arrays below */
    int json, perturb;
    long long mesh; /* replay of an inference recording: another mesh size (0: the file's) */
    int generator_given; /* --generator (replay of an inference recording) */
    const char *junit;
    const char *files[2];
    int nfiles;
    const char *transport; /* replay: --transport mpi or nccl (NULL: the mock) */
    double timeout_s; /* replay: --timeout (0: not given) */
    const char *ignore_attrs[MAX_LEFT_OUT], *excludes[MAX_LEFT_OUT]; /* argv's strings */
} diff_args;

/* Options shared by replay and diff. Returns -1 on success, else an exit code. */
static int parse_diff_args(int argc, char **argv, int nfiles, diff_args *da) {
    memset(da, 0, sizeof *da);
    da->o = ppv_diff_defaults();
    da->o.ignore_attrs = da->ignore_attrs;
    da->o.excludes = da->excludes;
    int c;
    cli_parser p;
    CLI_BEGIN(&p, argv, diff_options, 0);
    while ((c = cli_next(&p, argc, argv)) != CLI_END) {
        switch (c) {
        case OPT_TOLERANCE: {
            if (ppv_tolerance_parse(optarg, &da->o.tol) < 0)
                return usage_error("--tolerance needs bitwise, ulp:N (N a whole number from 0 to "
                                   "9223372036854775807), abs:X, rel:Y or abs:X,rel:Y (X and Y "
                                   "numbers from 0 to 1e+300), not '%s'",
                                   optarg);
            break;
        }
        case OPT_NAN:
            if (strcmp(optarg, "equal") && strcmp(optarg, "differ"))
                return usage_error("--nan is equal or differ, not '%s'", optarg);
            da->o.tol.nan_differ = strcmp(optarg, "differ") == 0;
            break;
        case OPT_MAX_REPORT:
            da->o.max_report = (int)p.num;
            break;
        case OPT_ALL_ATTRIBUTES: da->o.all_attributes = 1; break;
        case OPT_THREADS:
            da->o.threads = (int)p.num;
            break;
        case OPT_PERTURB: da->perturb = 1; break;
        case OPT_JSON: da->json = 1; break;
        case OPT_JUNIT: da->junit = optarg; break;
        case OPT_IGNORE_ATTR:
            if (da->o.nignore_attrs == MAX_LEFT_OUT)
                return usage_error("--ignore-attr is given at most 64 times; '%s' is one more",
                                   optarg);
            da->ignore_attrs[da->o.nignore_attrs++] = optarg;
            break;
        case OPT_EXCLUDE:
            if (da->o.nexcludes == MAX_LEFT_OUT)
                return usage_error("--exclude is given at most 64 times; '%s' is one more", optarg);
            if (optarg[0] != '/')
                return usage_error("--exclude needs an absolute HDF5 path such as /training/grads, "
                                   "not '%s'", optarg);
            da->excludes[da->o.nexcludes++] = optarg;
            break;
        case OPT_DEVICE:
            if (nfiles != 1) return usage_error("%s is replay's option", "--device");
            if (device_option(optarg, &da->o.device) < 0) return PPV_EXIT_BAD_INPUT;
            break;
        case OPT_GENERATOR: {
            if (nfiles != 1) return usage_error("%s is replay's option", "--generator");
            da->generator_given = 1;
            da->o.generator = NULL;
            char why[1024];
            if (strcmp(optarg, "builtin") &&
                !(da->o.generator = ppv_generator_open(optarg, why, sizeof why)))
                return usage_error("--generator: %s", why);
            break;
        }
        case OPT_TRANSPORT:
            if (nfiles != 1) return usage_error("%s is replay's option", "--transport");
            if (transport_option(optarg, &da->transport) < 0) return PPV_EXIT_BAD_INPUT;
            break;
        case OPT_TIMEOUT:
            if (nfiles != 1) return usage_error("%s is replay's option", "--timeout");
            da->timeout_s = p.real;
            break;
        case OPT_CALL_TIMEOUT:
            if (nfiles != 1) return usage_error("%s is replay's option", "--call-timeout");
            guard_set_call_timeout(p.real);
            break;
        case OPT_MESH:
            if (nfiles != 1) return usage_error("%s is replay's option", "--mesh");
            da->mesh = p.num;
            break;
        case CLI_HELP: return print_help();
        default: return bad_option();
        }
    }
    /* replay compares no attributes and reads its datasets through HDF5 alone */
    if (nfiles == 1 && da->o.nignore_attrs)
        return usage_error("%s is diff's option; replay compares no attributes", "--ignore-attr");
    if (nfiles == 1 && da->o.all_attributes)
        return usage_error("%s is diff's option; replay compares no attributes",
                           "--all-attributes");
    if (nfiles == 1 && da->o.threads)
        return usage_error("%s is diff's option; replay compares one tensor at a time",
                           "--threads");
    if (da->timeout_s > 0 && !da->transport)
        return usage_error("%s is for --transport mpi or nccl", "--timeout");
    if (argc - optind != nfiles)
        return usage_error(nfiles == 1 ? "needs one GOLDEN.h5 file%s" : "needs two files A and B%s",
                           "");
    for (int k = 0; k < nfiles; k++) da->files[k] = argv[optind + k];
    da->nfiles = nfiles;
    return -1;
}

/* 1 if e's differing elements have numeric values to show (not strings
 * or other types compared as bytes). */
static int numeric(const ppv_diff_entry *e) {
    return strncmp(e->type, "fp", 2) == 0 || strcmp(e->type, "bf16") == 0 ||
           strstr(e->type, "int") != NULL;
}

static json_object *diff_json(const ppv_diff_report *r, const ppv_diff_options *o) {
    json_object *obj = json_object_new_object(), *list = json_object_new_array();
    char tol[96];
    ppv_tolerance_format(&o->tol, tol, sizeof tol);
    uint64_t nd = differences(r);
    json_object_object_add(obj, "same", json_object_new_boolean(nd == 0));
    json_object_object_add(obj, "tolerance", json_object_new_string(tol));
    json_object_object_add(obj, "nan", json_object_new_string(o->tol.nan_differ ? "differ" : "equal"));
    json_object_object_add(obj, "ppv_files", json_object_new_boolean(r->ppv_files));
    json_object_object_add(obj, "objects", json_object_new_int64((int64_t)r->objects));
    json_object_object_add(obj, "datasets", json_object_new_int64((int64_t)r->datasets));
    json_object_object_add(obj, "elements", json_object_new_int64((int64_t)r->elements));
    json_object_object_add(obj, "differences", json_object_new_int64((int64_t)nd));
    json_object *ia = json_object_new_array(), *ex = json_object_new_array();
    for (int k = 0; k < o->nignore_attrs; k++)
        json_object_array_add(ia, json_object_new_string(o->ignore_attrs[k]));
    for (int k = 0; k < o->nexcludes; k++)
        json_object_array_add(ex, json_object_new_string(o->excludes[k]));
    json_object_object_add(obj, "ignore_attrs", ia);
    json_object_object_add(obj, "excludes", ex);
    for (int k = 0; k < r->n; k++) {
        const ppv_diff_entry *e = &r->entries[k];
        json_object *je = json_object_new_object(), *pts = json_object_new_array();
        json_object_object_add(je, "path", json_object_new_string(e->path));
        json_object_object_add(je, "what", json_object_new_string(e->what));
        if (e->type[0]) json_object_object_add(je, "type", json_object_new_string(e->type));
        json_object_object_add(je, "compared", json_object_new_int64((int64_t)e->compared));
        json_object_object_add(je, "count", json_object_new_int64((int64_t)e->count));
        json_object_object_add(je, "max_abs", finite_json(e->max_abs));
        json_object_object_add(je, "max_rel", finite_json(e->max_rel));
        json_object_object_add(je, "max_ulp", json_object_new_int64((int64_t)e->max_ulp));
        for (int q = 0; q < e->nfirst; q++) {
            json_object *jp = json_object_new_object();
            json_object_object_add(jp, "index", json_object_new_int64((int64_t)e->first[q].index));
            json_object_object_add(jp, "where", json_object_new_string(e->first[q].where));
            if (!numeric(e)) {
                json_object_array_add(pts, jp);
                continue;
            }
            json_object_object_add(jp, "a", isfinite(e->first[q].a) ? finite_json(e->first[q].a)
                                                                   : json_object_new_string(isnan(e->first[q].a) ? "nan" : e->first[q].a > 0 ? "inf" : "-inf"));
            json_object_object_add(jp, "b", isfinite(e->first[q].b) ? finite_json(e->first[q].b)
                                                                   : json_object_new_string(isnan(e->first[q].b) ? "nan" : e->first[q].b > 0 ? "inf" : "-inf"));
            json_object_object_add(jp, "ulp", json_object_new_int64((int64_t)e->first[q].ulp));
            json_object_array_add(pts, jp);
        }
        json_object_object_add(je, "first", pts);
        json_object_array_add(list, je);
    }
    json_object_object_add(obj, "entries", list);
    return obj;
}

/* The patterns --ignore-attr and --exclude left out, as one line of text
 * (empty when none). */
static void left_out_text(const ppv_diff_options *o, char *buf, size_t n) {
    size_t len = 0;
    buf[0] = 0;
    for (int k = 0; k < o->nignore_attrs && len < n; k++)
        len += (size_t)snprintf(buf + len, n - len, "%sattribute %s", len ? ", " : "left out: ",
                                o->ignore_attrs[k]);
    for (int k = 0; k < o->nexcludes && len < n; k++)
        len += (size_t)snprintf(buf + len, n - len, "%s%s", len ? ", " : "left out: ", o->excludes[k]);
}

static void diff_print(const ppv_diff_report *r, const ppv_diff_options *o) {
    for (int k = 0; k < r->n; k++) {
        const ppv_diff_entry *e = &r->entries[k];
        if (strcmp(e->what, "values") != 0) {
            printf("%s: %s\n", e->path, e->what);
            continue;
        }
        printf("%s: %llu of %llu %s values differ; max abs %.9g, max rel %.9g, max ulp %llu\n",
               e->path, (unsigned long long)e->count, (unsigned long long)e->compared, e->type,
               e->max_abs, e->max_rel, (unsigned long long)e->max_ulp);
        for (int q = 0; q < e->nfirst; q++)
            if (numeric(e))
                printf("  %s: %.9g vs %.9g (%llu ulp)\n", e->first[q].where, e->first[q].a,
                       e->first[q].b, (unsigned long long)e->first[q].ulp);
            else
                printf("  %s: differs\n", e->first[q].where);
        if ((uint64_t)e->nfirst < e->count)
            printf("  ... %llu more\n", (unsigned long long)(e->count - (uint64_t)e->nfirst));
    }
    char tol[96];
    ppv_tolerance_format(&o->tol, tol, sizeof tol);
    uint64_t nd = differences(r);
    char left[1024];
    left_out_text(o, left, sizeof left);
    if (left[0]) printf("%s\n", left);
    printf("%llu objects, %llu datasets, %llu values compared (%s, NaN %s): %s\n",
           (unsigned long long)r->objects, (unsigned long long)r->datasets,
           (unsigned long long)r->elements, tol, o->tol.nan_differ ? "differs" : "equals NaN",
           nd ? "DIFFERENT" : "same");
}

/* A comparison's JUnit suite while it is being filled. */
typedef struct diff_junit {
    junit j;
    int oom;
} diff_junit;

/* ppv_diff_options.on_values: one testcase per dataset compared. */
static void junit_dataset(void *ctx, const ppv_diff_entry *e) {
    diff_junit *dj = ctx;
    if (e->count == 0) {
        dj->oom |= junit_add(&dj->j, e->path, NULL) < 0;
        return;
    }
    char first[200] = "";
    if (e->nfirst)
        snprintf(first, sizeof first, "; first at %s: %.9g vs %.9g", e->first[0].where, e->first[0].a,
                 e->first[0].b);
    dj->oom |= junit_add(&dj->j, e->path,
                         "%llu of %llu %s values differ; max abs %.9g, max rel %.9g, max ulp %llu%s",
                         (unsigned long long)e->count, (unsigned long long)e->compared, e->type,
                         e->max_abs, e->max_rel, (unsigned long long)e->max_ulp, first) < 0;
}

/* Starts a JUnit suite for da's comparison when --junit asks for one. */
static void diff_junit_begin(diff_args *da, diff_junit *dj) {
    memset(dj, 0, sizeof *dj);
    if (!da->junit) return;
    char suite[300];
    snprintf(suite, sizeof suite, "ppv %s %s%s%s", g_cmd, da->files[0], da->nfiles > 1 ? " " : "",
             da->nfiles > 1 ? da->files[1] : "");
    junit_init(&dj->j, suite);
    da->o.on_values = junit_dataset;
    da->o.on_values_ctx = dj;
}

/* Adds the differences that are not a dataset's values (objects on one
 * side only, types, shapes, attributes) and writes the file; -1 after
 * printing the reason. */
static int diff_junit_end(const diff_args *da, diff_junit *dj, const ppv_diff_report *r) {
    if (!da->junit) return 0;
    for (int k = 0; r && k < r->n; k++) {
        const ppv_diff_entry *e = &r->entries[k];
        if (strcmp(e->what, "values") == 0 || e->count == 0) continue;
        char name[300];
        snprintf(name, sizeof name, "structure: %s", e->path);
        dj->oom |= junit_add(&dj->j, name, "%s", e->what) < 0;
    }
    return finish_junit(&dj->j, da->junit, dj->oom ? -1 : 0);
}

/* Runs the rest of a diff or replay, printing included, in a child
 * process: ppv reads files from other systems, and a corrupted one can
 * crash the HDF5 library itself, or make it loop (a global heap
 * collection HDF5 1.10 cannot load, ppv_golden_bad_heap): the child then
 * gets a bound on its CPU time, HEAP_CPU_BASE_S plus a second a MiB, which
 * a file whose data only happens to spell such a collection stays far
 * under. Returns -1 in the child, which goes on with the command (or in
 * this process when fork fails), and in the parent the child's exit code,
 * or 2 after naming the files (label: the input, or "A or B") when the
 * child crashed or ran out of its bound, the words in why (for --json). A
 * child killed by another signal (SIGPIPE, SIGINT) ends the parent the
 * same way. */
enum { HEAP_CPU_BASE_S = 4 };

static int compare_in_child(const char *label, const char *const *paths, int npaths, char *why,
                            size_t whylen) {
    int64_t heap_at = -1;
    const char *heap_file = NULL;
    rlim_t bound = HEAP_CPU_BASE_S;
    for (int k = 0; k < npaths; k++) {
        struct stat st;
        if (stat(paths[k], &st) == 0) bound += (rlim_t)(st.st_size >> 20);
        int64_t at = ppv_golden_bad_heap(paths[k]);
        if (at >= 0 && heap_at < 0) heap_at = at, heap_file = paths[k];
    }
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0 && heap_at >= 0) {
        struct rlimit rl = {bound, bound + 2}; /* SIGXCPU, then SIGKILL */
        setrlimit(RLIMIT_CPU, &rl);
    }
    if (pid <= 0) return -1;
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR) {
            fprintf(stderr, "ppv %s: cannot wait for the comparison: %s\n", g_cmd, strerror(errno));
            return PPV_EXIT_BAD_INPUT;
        }
    if (WIFEXITED(st)) return WEXITSTATUS(st);
    int sig = WTERMSIG(st);
    if (heap_at >= 0 && (sig == SIGXCPU || sig == SIGKILL)) {
        snprintf(why, whylen,
                 "%s is corrupted: its global heap collection at byte %lld makes the HDF5 "
                 "library loop (stopped after %llu s of CPU time); nothing was compared",
                 heap_file, (long long)heap_at, (unsigned long long)bound);
        fprintf(stderr, "ppv %s: %s\n", g_cmd, why);
        return PPV_EXIT_BAD_INPUT;
    }
    if (sig != SIGSEGV && sig != SIGBUS && sig != SIGABRT && sig != SIGFPE && sig != SIGILL &&
        sig != SIGSYS && sig != SIGTRAP) {
        signal(sig, SIG_DFL);
        raise(sig);
        return PPV_EXIT_BAD_INPUT; /* a signal this process cannot take */
    }
    snprintf(why, whylen,
             "%s is corrupted: reading it crashed the HDF5 library (signal %d); nothing was "
             "compared",
             label, sig);
    fprintf(stderr, "ppv %s: %s\n", g_cmd, why);
    return PPV_EXIT_BAD_INPUT;
}

/* ppv diff A.h5 B.h5 [options]. */
int cmd_diff(int argc, char **argv) {
    diff_args da;
    int rc = parse_diff_args(argc, argv, 2, &da);
    if (rc >= 0) return rc;
    if (da.perturb) return usage_error("--perturb is replay's option%s", "");
    char files[8200];
    snprintf(files, sizeof files, "%s or %s", da.files[0], da.files[1]);
    char why[8400];
    if ((rc = compare_in_child(files, da.files, 2, why, sizeof why)) >= 0) return rc;
    ppv_diff_report *r = NULL;
    char err[1024];
    diff_junit dj;
    diff_junit_begin(&da, &dj);
    if (ppv_diff_files(da.files[0], da.files[1], &da.o, &r, err, sizeof err) < 0) {
        fprintf(stderr, "ppv diff: %s\n", err);
        if (da.junit) junit_free(&dj.j);
        return PPV_EXIT_BAD_INPUT;
    }
    if (diff_junit_end(&da, &dj, r) < 0) {
        ppv_diff_report_free(r);
        return PPV_EXIT_BAD_INPUT;
    }
    if (da.json) {
        json_object *o = diff_json(r, &da.o);
        puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(o);
    } else {
        diff_print(r, &da.o);
    }
    rc = differences(r) ? PPV_EXIT_PROBLEM : PPV_EXIT_OK;
    ppv_diff_report_free(r);
    return rc;
}

/* ---- conformance (ppv conform, and replay of an inference recording) ------------------- */

/* "call 3 (call_id 3, chunk_index 3, cache_epoch 0)" or "the file". */
static const char *violation_where(const ppv_conform_violation *v, char *buf, size_t n) {
    if (v->call < 0) snprintf(buf, n, "the file");
    else
        snprintf(buf, n, "call %lld (call_id %lld, chunk_index %lld, cache_epoch %lld)",
                 (long long)v->call, (long long)v->call_id, (long long)v->chunk_index,
                 (long long)v->cache_epoch);
    return buf;
}

static void conform_print(const char *path, const ppv_conform_report *r) {
    printf("%s: %lld calls (%lld INFER, %lld results), %lld events, format version %lld, checked "
           "against the contract with no model\n",
           path, (long long)r->present, (long long)r->infers, (long long)r->results,
           (long long)r->events, (long long)r->format_version);
    if (r->limits[0]) printf("not shown by this file: %s\n", r->limits);
    for (int k = 0; k < r->nv; k++) {
        const ppv_conform_violation *v = &r->v[k];
        char where[160];
        printf("%s [%s] at %s: %s\n", ppv_failure_id(v->rule), ppv_conform_check_name(v->check),
               violation_where(v, where, sizeof where), v->message);
    }
    if (r->violations > r->nv)
        printf("... %lld more violations (--max-report)\n", (long long)(r->violations - r->nv));
    if (r->unknown_fields)
        printf("unknown fields: %lld the contract does not define, filtered as a receiver filters "
               "them (%s%s; --strict refuses them)\n",
               (long long)r->unknown_fields, r->unknown_names,
               r->unknown_fields > 8 ? ", ..." : "");
    if (r->overlap_done && r->overlap_samples)
        printf("overlap: OverlapScore %.3f over %lld chunks after the warm-up (median period %.3f "
               "ms, stage 0 %.3f ms, the mesh %.3f ms)\n",
               r->overlap_score, (long long)r->overlap_samples, r->overlap_period_ms,
               r->overlap_stage0_ms, r->overlap_stage1_ms);
    for (int32_t k = 0; k < r->nmem; k++) {
        const ppv_conform_memory *m = &r->mem[k];
        char name[48], human[32], cap[64] = "";
        if (m->rank < 0) snprintf(name, sizeof name, "link 0-1");
        else
            snprintf(name, sizeof name, "rank %d (%s)", (int)m->rank, ppv_pp_role_name(m->rank));
        human_bytes((double)m->peak_bytes, human, sizeof human);
        if (m->cap > 0) snprintf(cap, sizeof cap, ", cap %.0f", m->cap);
        printf("memory, %s: peak %lld bytes (%s), %lld samples on the %s clock%s\n", name,
               (long long)m->peak_bytes, human, (long long)m->samples,
               r->mem_clock[0] ? r->mem_clock : "recorder's", cap);
    }
    printf("conformance: %lld violation%s of %d checks\n", (long long)r->violations,
           r->violations == 1 ? "" : "s", r->nchecked);
}

static json_object *conform_json(const ppv_conform_report *r) {
    json_object *o = json_object_new_object(), *list = json_object_new_array(),
                *checks = json_object_new_object();
    json_object_object_add(o, "conforms", json_object_new_boolean(r->violations == 0));
    json_object_object_add(o, "violations", json_object_new_int64(r->violations));
    json_object_object_add(o, "format_version", json_object_new_int64(r->format_version));
    json_object_object_add(o, "calls", json_object_new_int64(r->calls));
    json_object_object_add(o, "calls_present", json_object_new_int64(r->present));
    json_object_object_add(o, "infers", json_object_new_int64(r->infers));
    json_object_object_add(o, "results", json_object_new_int64(r->results));
    json_object_object_add(o, "has_setup", json_object_new_boolean(r->has_setup));
    json_object_object_add(o, "not_shown", r->limits[0] ? json_object_new_string(r->limits) : NULL);
    json_object_object_add(o, "unknown_fields", json_object_new_int64(r->unknown_fields));
    json_object *names = json_object_new_array();
    for (const char *p = r->unknown_names; *p;) { /* "a, b, c" */
        size_t n = strcspn(p, ",");
        json_object_array_add(names, json_object_new_string_len(p, (int)n));
        p += n;
        while (*p == ',' || *p == ' ') p++;
    }
    json_object_object_add(o, "unknown_field_names", names);
    for (int c = 0; c < PPV_CONFORM_COUNT; c++)
        json_object_object_add(checks, ppv_conform_check_name((ppv_conform_check)c),
                               r->checked[c] ? json_object_new_int64(r->by_check[c]) : NULL);
    json_object_object_add(o, "events", json_object_new_int64(r->events));
    if (r->overlap_done) {
        json_object *ov = json_object_new_object();
        json_object_object_add(ov, "samples", json_object_new_int64(r->overlap_samples));
        json_object_object_add(ov, "score", r->overlap_samples
                                                ? finite_json(r->overlap_score)
                                                : NULL);
        json_object_object_add(ov, "median_period_ms", finite_json(r->overlap_period_ms));
        json_object_object_add(ov, "median_stage0_ms", finite_json(r->overlap_stage0_ms));
        json_object_object_add(ov, "median_stage1_ms", finite_json(r->overlap_stage1_ms));
        json_object_object_add(o, "overlap", ov);
    }
    json_object_object_add(o, "by_check", checks);
    json_object *mem = NULL;
    if (r->checked[PPV_CONFORM_MEMORY]) {
        mem = json_object_new_array();
        for (int32_t k = 0; k < r->nmem; k++) {
            const ppv_conform_memory *m = &r->mem[k];
            json_object *j = json_object_new_object(), *held = json_object_new_object();
            json_object_object_add(j, "rank", m->rank < 0 ? NULL : json_object_new_int(m->rank));
            json_object_object_add(j, "link", json_object_new_boolean(m->rank < 0));
            json_object_object_add(j, "peak_bytes", json_object_new_int64(m->peak_bytes));
            json_object_object_add(j, "samples", json_object_new_int64(m->samples));
#define OR_NULL(v) ((v) == INT64_MIN ? NULL : json_object_new_int64(v))
            json_object_object_add(j, "peak_t_ns", OR_NULL(m->peak_t_ns));
            json_object_object_add(j, "peak_chunk", OR_NULL(m->peak_chunk));
            json_object_object_add(j, "peak_call_id", OR_NULL(m->peak_call_id));
#undef OR_NULL
            json_object_object_add(j, "peak_phase", m->peak_phase[0]
                                                        ? json_object_new_string(m->peak_phase)
                                                        : NULL);
            json_object_object_add(j, "held_at_end_bytes",
                                   m->held_at_end < 0 ? NULL : json_object_new_int64(m->held_at_end));
            for (int q = 0; q < PPV_MEM_KIND_COUNT; q++)
                if (m->at_peak[q] >= 0)
                    json_object_object_add(held, ppv_pp_mem_kind_name(q),
                                           json_object_new_int64(m->at_peak[q]));
            json_object_object_add(j, "at_peak", held);
            json_object_object_add(j, "cap_bytes",
                                   m->cap > 0 ? json_object_new_int64((int64_t)m->cap) : NULL);
            json_object_array_add(mem, j);
        }
    }
    json_object_object_add(o, "memory", mem);
    json_object_object_add(o, "memory_clock", r->checked[PPV_CONFORM_MEMORY] && r->mem_clock[0]
                                                  ? json_object_new_string(r->mem_clock)
                                                  : NULL);
    for (int k = 0; k < r->nv; k++) {
        const ppv_conform_violation *v = &r->v[k];
        json_object *j = json_object_new_object();
        json_object_object_add(j, "check", json_object_new_string(ppv_conform_check_name(v->check)));
        json_object_object_add(j, "rule", json_object_new_string(ppv_failure_id(v->rule)));
        json_object_object_add(j, "call", v->call < 0 ? NULL : json_object_new_int64(v->call));
        json_object_object_add(j, "call_id", v->call < 0 ? NULL : json_object_new_int64(v->call_id));
        json_object_object_add(j, "chunk_index",
                               v->call < 0 ? NULL : json_object_new_int64(v->chunk_index));
        json_object_object_add(j, "cache_epoch",
                               v->call < 0 ? NULL : json_object_new_int64(v->cache_epoch));
        json_object_object_add(j, "message", json_object_new_string(v->message));
        json_object_array_add(list, j);
    }
    json_object_object_add(o, "list", list);
    return o;
}

/* One testcase per check made, failed with its violations (those kept). */
static int conform_junit(junit *j, const ppv_conform_report *r) {
    for (int c = 0; c < PPV_CONFORM_COUNT; c++) {
        char name[96], text[4096];
        if (!r->checked[c]) continue;
        snprintf(name, sizeof name, "conform: %s", ppv_conform_check_name((ppv_conform_check)c));
        if (!r->by_check[c]) {
            if (junit_add(j, name, NULL) < 0) return -1;
            continue;
        }
        size_t len = (size_t)snprintf(text, sizeof text, "%lld violation(s)",
                                      (long long)r->by_check[c]);
        for (int k = 0; k < r->nv && len < sizeof text; k++) {
            if (r->v[k].check != (ppv_conform_check)c) continue;
            char where[160];
            len += (size_t)snprintf(text + len, sizeof text - len, "; %s at %s: %s",
                                    ppv_failure_id(r->v[k].rule),
                                    violation_where(&r->v[k], where, sizeof where),
                                    r->v[k].message);
        }
        if (junit_add(j, name, "%s", text) < 0) return -1;
    }
    return 0;
}

/* ppv replay of a recording with no setup: nothing can answer its
 * envelopes again, so it is checked against the contract alone and says
 * so. */
static int conform_only(diff_args *da, const ppv_conform_report *cr) {
    static const char why[] =
        "the recording has no setup (/inference's mesh and kv_window, /inference/generator), so "
        "no model answered its envelopes again: outputs were not recomputed, only the contract "
        "was checked";
    if (da->junit) {
        junit j;
        char suite[300];
        snprintf(suite, sizeof suite, "ppv replay %s", da->files[0]);
        junit_init(&j, suite);
        if (finish_junit(&j, da->junit, conform_junit(&j, cr)) < 0) return PPV_EXIT_BAD_INPUT;
    }
    if (da->json) {
        json_object *o = json_object_new_object();
        json_object_object_add(o, "ok", json_object_new_boolean(cr->violations == 0));
        json_object_object_add(o, "kind", json_object_new_string("inference"));
        json_object_object_add(o, "recomputed", json_object_new_boolean(0));
        json_object_object_add(o, "not_recomputed_because", json_object_new_string(why));
        json_object_object_add(o, "conform", conform_json(cr));
        puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(o);
    } else {
        conform_print(da->files[0], cr);
        printf("%s\n", why);
        printf("result: %s\n", cr->violations ? "PROBLEM" : "CONFORMS (outputs not recomputed)");
    }
    return cr->violations ? PPV_EXIT_PROBLEM : PPV_EXIT_OK;
}

/* ppv replay of an inference recording: checked against the contract,
 * then re-run with the file as stage 0 and compared. OK only when it
 * conforms, the re-run completed, answered every recorded call, and every
 * answer is the recorded one. */
/* The recorded generator's name, version and settings (the built-in's
 * from the recorded model when the file names none). */
static void recorded_generator(const ppv_inference_setup *s, const char **name,
                               const char **version, char *params, size_t n) {
    if (s->generator[0]) {
        *name = s->generator;
        *version = s->generator_version;
        snprintf(params, n, "%s", s->generator_params);
        return;
    }
    const ppv_generator *b = ppv_generator_builtin();
    *name = b->name;
    *version = b->version;
    if (ppv_gen_config_format(&s->model, params, n) < 0) params[0] = 0;
}

static int replay_inference(diff_args *da) {
    char err[1024];
    ppv_conform_report cr;
    if (ppv_conform(da->files[0], NULL, &cr, err, sizeof err) < 0) {
        fprintf(stderr, "ppv replay: %s\n", err);
        return PPV_EXIT_BAD_INPUT;
    }
    if (!cr.has_setup) {
        int rc = conform_only(da, &cr);
        ppv_conform_report_free(&cr);
        return rc;
    }
    ppv_inference_replay_result res;
    diff_junit dj;
    diff_junit_begin(da, &dj);
    guard_arm(da->json);
    if (ppv_inference_replay(da->files[0], &da->o, (int32_t)da->mesh, da->perturb, &res, err,
                             sizeof err) < 0) {
        if (cr.violations > 0) { /* the contract's verdict, with why nothing re-ran */
            if (da->junit) junit_free(&dj.j);
            if (da->json) {
                json_object *o = conform_json(&cr);
                json_object_object_add(o, "ok", json_object_new_boolean(0));
                json_object_object_add(o, "kind", json_object_new_string("inference"));
                json_object_object_add(o, "replayed", json_object_new_boolean(0));
                json_object_object_add(o, "why_not_replayed", json_object_new_string(err));
                puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
                                                           JSON_C_TO_STRING_NOSLASHESCAPE));
                json_object_put(o);
            } else {
                conform_print(da->files[0], &cr);
                printf("%s: nothing was replayed: the recording breaks the contract where the "
                       "re-run reads it (%s)\nresult: PROBLEM\n",
                       da->files[0], err);
            }
            ppv_conform_report_free(&cr);
            return PPV_EXIT_PROBLEM;
        }
        fprintf(stderr, "ppv replay: %s\n", err);
        if (da->junit) junit_free(&dj.j);
        ppv_conform_report_free(&cr);
        return PPV_EXIT_BAD_INPUT;
    }
    if (da->junit) dj.oom |= conform_junit(&dj.j, &cr) < 0;
    if (diff_junit_end(da, &dj, res.diff) < 0) {
        ppv_inference_replay_free(&res);
        ppv_conform_report_free(&cr);
        return PPV_EXIT_BAD_INPUT;
    }
    uint64_t nd = differences(res.diff);
    const ppv_pp_report *run = res.run;
    int ok = nd == 0 && run->ok && cr.violations == 0;
    /* a re-run that failed before its first result replayed nothing, and
     * has nothing to compare */
    int nothing = !run->ok && run->chunks_emitted == 0;
    const char *gname, *gversion;
    char gparams[1024];
    recorded_generator(&res.setup, &gname, &gversion, gparams, sizeof gparams);
    if (da->json) {
        json_object *o = diff_json(res.diff, &da->o);
        json_object_object_add(o, "ok", json_object_new_boolean(ok));
        json_object_object_add(o, "kind", json_object_new_string("inference"));
        json_object_object_add(o, "recomputed", json_object_new_boolean(1));
        json_object_object_add(o, "conform", conform_json(&cr));
        json_object_object_add(o, "calls", json_object_new_int64(res.calls));
        json_object_object_add(o, "mesh", json_object_new_int(res.mesh));
        json_object_object_add(o, "recorded_mesh", json_object_new_int(res.setup.mesh));
        json_object_object_add(o, "first_differing_call",
                               res.first_call < 0 ? NULL : json_object_new_int64(res.first_call));
        json_object_object_add(o, "first_differing_call_id",
                               res.first_call < 0 ? NULL : json_object_new_int64(res.first_call_id));
        json_object_object_add(o, "first_differing_chunk_index",
                               res.first_call < 0 ? NULL
                                                  : json_object_new_int64(res.first_chunk_index));
        json_object_object_add(o, "device",
                               json_object_new_string(da->o.device ? da->o.device : "cpu"));
        json_object_object_add(o, "run_ok", json_object_new_boolean(run->ok));
        json_object_object_add(o, "failure_mode",
                               run->ok ? NULL : json_object_new_string(ppv_failure_id(run->failure)));
        json_object_object_add(o, "chunks_emitted", json_object_new_int64(run->chunks_emitted));
        json_object_object_add(o, "replayed", json_object_new_boolean(!nothing));
        json_object_object_add(o, "output_digest", run->ok ? hex_json(run->output_digest) : NULL);
        json_object_object_add(o, "generator", json_object_new_string(gname));
        json_object_object_add(o, "generator_version", json_object_new_string(gversion));
        json_object_object_add(o, "generator_params", json_object_new_string(gparams));
        puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(o);
    } else {
        conform_print(da->files[0], &cr);
        if (nothing)
            printf("%s: nothing was replayed: the re-run on a mesh of %d failed before its first "
                   "result (the file holds %lld recorded calls; it was recorded on %d)%s\n",
                   da->files[0], res.mesh, (long long)res.calls, res.setup.mesh,
                   on_device(da->o.device));
        else
            printf("%s: replayed %lld recorded calls on a mesh of %d (the file is stage 0; it was "
                   "recorded on %d)%s\n",
                   da->files[0], (long long)res.calls, res.mesh, res.setup.mesh,
                   on_device(da->o.device));
        printf("generator: %s %s, settings '%s'\n", gname, gversion, gparams);
        if (!run->ok)
            printf("the re-run failed as %s: %s\n", ppv_failure_id(run->failure), run->message);
        if (!nothing) diff_print(res.diff, &da->o);
        if (!nothing && res.first_call >= 0)
            printf("first differing call: #%lld (call_id %lld, chunk_index %lld)\n",
                   (long long)res.first_call, (long long)res.first_call_id,
                   (long long)res.first_chunk_index);
        printf("result: %s\n", ok ? "OK" : "PROBLEM");
    }
    ppv_inference_replay_free(&res);
    ppv_conform_report_free(&cr);
    return ok ? PPV_EXIT_OK : PPV_EXIT_PROBLEM;
}

/* ppv conform REC.h5 [options]: the recording against the contract, no
 * model. */
int cmd_conform(int argc, char **argv) {
    enum { CONFORM_OPTIONS(CLI_OPTION_ID) };
    static const cli_option opts[] = {CONFORM_OPTIONS(CLI_OPTION)};
    ppv_conform_options co = {0};
    double caps[PPV_MAX_MEM_CAPS];
    const char *junit_path = NULL;
    int json = 0, c;
    cli_parser p;
    CLI_BEGIN(&p, argv, opts, 0);
    while ((c = cli_next(&p, argc, argv)) != CLI_END) {
        switch (c) {
        case OPT_JSON: json = 1; break;
        case OPT_JUNIT: junit_path = optarg; break;
        case OPT_MAX_REPORT:
            co.max_report = p.num ? (int)p.num : -1; /* the API's "none" */
            break;
        case OPT_OVERLAP: co.overlap = 1; break;
        case OPT_STRICT: co.strict = 1; break;
        case OPT_MEM_CAP:
            if ((co.nmem_caps = byte_list(&p, optarg, caps, PPV_MAX_MEM_CAPS)) < 0)
                return PPV_EXIT_BAD_INPUT;
            co.mem_caps = caps;
            break;
        case CLI_HELP: return print_help();
        default: return bad_option();
        }
    }
    if (argc - optind != 1) return usage_error("needs one recording REC.h5%s", "");
    const char *path = argv[optind];
    char err[8400] = "";
    int rc = compare_in_child(path, &path, 1, err, sizeof err);
    if (rc == PPV_EXIT_BAD_INPUT && *err) goto unreadable; /* the child crashed: it said why */
    if (rc >= 0) return rc;
    ppv_conform_report cr;
    if (ppv_conform(path, &co, &cr, err, sizeof err) < 0) {
        fprintf(stderr, "ppv conform: %s\n", err);
    unreadable:
        if (json) { /* --json always prints an object: why nothing was judged */
            json_object *o = json_object_new_object();
            json_object_object_add(o, "conforms", NULL);
            json_object_object_add(o, "readable", json_object_new_boolean(0));
            json_object_object_add(o, "error", json_object_new_string(err));
            json_object_object_add(o, "file", json_object_new_string(path));
            puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
                                                       JSON_C_TO_STRING_NOSLASHESCAPE));
            json_object_put(o);
        }
        return PPV_EXIT_BAD_INPUT;
    }
    if (junit_path) {
        junit j;
        char suite[300];
        snprintf(suite, sizeof suite, "ppv conform %s", path);
        junit_init(&j, suite);
        if (finish_junit(&j, junit_path, conform_junit(&j, &cr)) < 0) {
            ppv_conform_report_free(&cr);
            return PPV_EXIT_BAD_INPUT;
        }
    }
    if (json) {
        json_object *o = conform_json(&cr);
        json_object_object_add(o, "file", json_object_new_string(path));
        puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(o);
    } else {
        conform_print(path, &cr);
        printf("result: %s\n", cr.violations ? "PROBLEM" : "CONFORMS");
    }
    rc = cr.violations ? PPV_EXIT_PROBLEM : PPV_EXIT_OK;
    ppv_conform_report_free(&cr);
    return rc;
}

/* ppv replay GOLDEN.h5 [options]. */
int cmd_replay(int argc, char **argv) {
    diff_args da;
    int rc = parse_diff_args(argc, argv, 1, &da);
    if (rc >= 0) return rc;
    /* on MPI the job's processes are the ones mpirun started: no child */
    char why[4400];
    if (!da.transport && (rc = compare_in_child(da.files[0], da.files, 1, why, sizeof why)) >= 0)
        return rc;
    if (ppv_golden_is_inference(da.files[0])) {
        if (da.transport)
            return usage_error("--transport mpi and nccl replay training recordings; %s is an "
                               "inference recording, which replays on the mock",
                               da.files[0]);
        return replay_inference(&da);
    }
    if (da.generator_given)
        return usage_error("--generator is for inference recordings; %s is a training file",
                           da.files[0]);
    if (da.mesh)
        return usage_error("--mesh is for inference recordings; %s is a training file",
                           da.files[0]);
    ppv_replay_result res;
    char err[1024];
    ppv_proc *proc = NULL;
    int lead;
    if ((rc = start_transport(da.transport, &proc, &lead)) >= 0) return rc;
    if (!lead) da.junit = NULL; /* rank 0 writes it */
    diff_junit dj;
    diff_junit_begin(&da, &dj);
    if (ppv_golden_replay_on(da.files[0], &da.o, da.perturb, proc,
                             da.timeout_s > 0 ? da.timeout_s : ppv_run_defaults().timeout_s, &res,
                             err, sizeof err) < 0) {
        fprintf(stderr, "ppv replay: %s\n", err);
        if (da.junit) junit_free(&dj.j);
        ppv_proc_end(proc);
        return PPV_EXIT_BAD_INPUT;
    }
    if (diff_junit_end(&da, &dj, res.diff) < 0) {
        ppv_replay_result_free(&res);
        ppv_proc_end(proc);
        return PPV_EXIT_BAD_INPUT;
    }
    uint64_t nd = differences(res.diff);
    if (da.json) {
        json_object *o = diff_json(res.diff, &da.o);
        json_object_object_add(o, "ok", json_object_new_boolean(nd == 0));
        json_object_object_add(o, "schedule", json_object_new_string(res.schedule_name));
        json_object_object_add(o, "microbatches", json_object_new_int(res.microbatches));
        json_object_object_add(o, "layers", json_object_new_int(res.layers));
        json_object_object_add(o, "device",
                               json_object_new_string(da.o.device ? da.o.device : "cpu"));
        json_object_object_add(o, "trace_digest", hex_json(res.run->world.trace_digest));
        json_object_object_add(o, "grad_digest", res.run->grads ? hex_json(res.run->grad_digest) : NULL);
        puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(o);
    } else {
        printf("%s: re-ran %s (%d microbatches, %d layers) from the file's weights and inputs%s\n",
               da.files[0], res.schedule_name, res.microbatches, res.layers,
               on_device(da.o.device));
        diff_print(res.diff, &da.o);
        if (proc) printf("transport: %s, %d processes\n", ppv_proc_name(proc), ppv_proc_size(proc));
        printf("result: %s\n", nd ? "PROBLEM" : "OK");
    }
    ppv_replay_result_free(&res);
    ppv_proc_end(proc);
    return nd ? PPV_EXIT_PROBLEM : PPV_EXIT_OK;
}
