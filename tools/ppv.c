/* ppv.c - the ppv command line: one binary, one function per subcommand.
 *
 * Exit codes (spec/exit_codes.def): 0 the check holds, 1 the check found a
 * problem, 2 bad usage or unreadable input. Only this file decides them.
 */
#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "ppv_golden.h"


/* The command being run ("check", ...), for messages; set once by main. */
const char *g_cmd = NULL;

/* Prints "ppv CMD: " (or "ppv: ") and the message, then where to find help. */
int usage_error(const char *fmt, const char *arg) {
    fprintf(stderr, "ppv%s%s: ", g_cmd ? " " : "", g_cmd ? g_cmd : "");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n(run 'ppv help%s%s' for usage)\n", g_cmd ? " " : "", g_cmd ? g_cmd : "");
    return PPV_EXIT_BAD_INPUT;
}

/* Prints this command's help on stdout; the exit code of --help. */
int print_help(void) {
    help_print(help_find(g_cmd), stdout);
    return PPV_EXIT_OK;
}

/* getopt's own messages name argv[0]: make it "ppv CMD", and point at help
 * after them. */
void getopt_prepare(char **argv) {
    static char name[64];
    snprintf(name, sizeof name, "ppv %s", g_cmd);
    argv[0] = name;
    optind = 1;
}

int bad_option(void) {
    fprintf(stderr, "(run 'ppv help %s' for usage)\n", g_cmd);
    return PPV_EXIT_BAD_INPUT;
}

/* Parses a byte count with an optional K, M or G suffix (powers of 1024). */
static int parse_bytes(const char *s, long long *out) {
    char *end;
    if (!s || !*s || *s == '-') return -1;
    double v = strtod(s, &end);
    double mul = 1;
    if (*end == 'K' || *end == 'k') mul = 1024.0, end++;
    else if (*end == 'M' || *end == 'm') mul = 1024.0 * 1024, end++;
    else if (*end == 'G' || *end == 'g') mul = 1024.0 * 1024 * 1024, end++;
    if (*end != 0 || !(v >= 0) || v * mul > 9e18) return -1;
    *out = (long long)(v * mul);
    return 0;
}

/* --max-memory's argument into *out; -1 after the usage message. */
static int max_memory_option(const char *arg, long long *out) {
    if (parse_bytes(arg, out) == 0) return 0;
    usage_error("--max-memory needs a byte count (K, M, G suffixes), not '%s'", arg);
    return -1;
}

long long physical_memory(void) {
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && size > 0 ? (long long)pages * size : 1LL << 62;
}

/* Prints a size as "12.3 GiB". */
static const char *human_bytes(double b, char *buf, size_t n) {
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    while (b >= 1024 && u < 5) b /= 1024, u++;
    snprintf(buf, n, u ? "%.1f %s" : "%.0f %s", b, units[u]);
    return buf;
}

/* Refuses work whose estimated memory exceeds the limit: exit 2 with both
 * figures, else -1. */
static int refuse_if_too_big(const char *what, double estimate, long long limit) {
    if (estimate <= (double)limit) return -1;
    char e[32], l[32];
    fprintf(stderr,
            "ppv %s: %s needs about %s of memory, more than the limit of %s; use smaller "
            "sizes (or --max-memory BYTES if this machine really has it)\n",
            g_cmd, what, human_bytes(estimate, e, sizeof e), human_bytes((double)limit, l, sizeof l));
    return PPV_EXIT_BAD_INPUT;
}

/* Bytes a loaded schedule takes per action, measured (ppv check on lowered
 * 1F1B and ZBV up to 1.5 million actions) with headroom for the checker's
 * and the runtime's per-action state. */
enum { BYTES_PER_ACTION = 160, BYTES_PER_FILE_BYTE = 32 };

/* Estimated memory of loading and checking the schedule file at path: a
 * file of n bytes holds at most about n/3 actions. -1 when unknown (stdin). */
static double file_estimate(const char *path) {
    struct stat st;
    if (strcmp(path, "-") == 0 || stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return -1;
    return (double)st.st_size * BYTES_PER_FILE_BYTE;
}

/* ---- progress on a terminal ---------------------------------------------------------- */

typedef struct progress {
    const char *what;
    double start, last;
    int shown;
} progress;

static double now_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ppv_run_options.progress: redraws one status line on stderr at most five
 * times a second, and at the end. */
static void progress_update(void *ctx, int64_t done, int64_t total) {
    progress *p = ctx;
    double t = now_seconds();
    if (!p->start) p->start = p->last = t;
    if (done < total && p->shown && t - p->last < 0.2) return;
    p->last = t;
    p->shown = 1;
    double el = t - p->start, rate = el > 0 ? (double)done / el : 0;
    double left = rate > 0 ? (double)(total - done) / rate : 0;
    fprintf(stderr, "\r\033[K%s: %lld of %lld actions (%.0f%%), %.0f actions/s, %.1f s left",
            p->what, (long long)done, (long long)total, total ? 100.0 * (double)done / (double)total : 100.0,
            rate, left);
    fflush(stderr);
}

/* Ends the status line, if one was drawn. */
static void progress_end(progress *p) {
    if (p->shown) fputs("\r\033[K", stderr);
    p->shown = 0;
    p->start = 0;
}

/* Turns progress on for o when stderr is a terminal and the output is not
 * JSON. */
static void progress_attach(ppv_run_options *o, progress *p, const char *what, int json) {
    memset(p, 0, sizeof *p);
    p->what = what;
    if (json || !isatty(STDERR_FILENO)) return;
    o->progress = progress_update;
    o->progress_ctx = p;
}

/* Parses a non-negative decimal into *out (with K/M/G suffix when sized). */
static int parse_int(const char *s, long long lo, long long hi, long long *out) {
    char *end;
    if (!s || !*s) return -1;
    long long v = strtoll(s, &end, 10);
    if (*end != 0 || v < lo || v > hi) return -1;
    *out = v;
    return 0;
}

/* Parses up to n comma-separated numbers; returns how many. */
static int parse_numbers(const char *s, double *v, int n) {
    int k = 0;
    const char *p = s;
    while (k < n) {
        char *end;
        double x = strtod(p, &end);
        if (end == p || !isfinite(x)) return -1;
        v[k++] = x;
        if (*end == 0) return k;
        if (*end != ',') return -1;
        p = end + 1;
    }
    return -1;
}

/* ---- gen -------------------------------------------------------------------- */

static int model_spec(const char *arg, ppv_model_spec *m);

static int cmd_gen(int argc, char **argv) {
    static const struct option opts[] = {{"ranks", required_argument, 0, 'p'},
                                         {"microbatches", required_argument, 0, 'm'},
                                         {"stages-per-rank", required_argument, 0, 'v'},
                                         {"comms", no_argument, 0, 'c'},
                                         {"output", required_argument, 0, 'o'},
                                         {"format", required_argument, 0, 'f'},
                                         {"max-memory", required_argument, 0, 'X'},
                                         {"costs", required_argument, 0, 'C'},
                                         {"cap", required_argument, 0, 'A'},
                                         {"budget", required_argument, 0, 'B'},
                                         {"time-limit", required_argument, 0, 'T'},
                                         {"model", required_argument, 0, 'M'},
                                         {"mem-cap", required_argument, 0, 'Y'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    ppv_gen_params gp = {0, 0, 0};
    int comms = 0, native = 0, costs_given = 0, auto_only = 0, search_only = 0;
    const char *outpath = NULL;
    long long v, limit = physical_memory();
    ppv_gen_auto_params ap = {0, 0, ppv_check_defaults().costs, 0, 2000, 60, NULL, 0, 0};
    ppv_model_spec spec;
    const char *model = NULL;
    double nums[4];
    int c, k;
    getopt_prepare(argv);
    while ((c = getopt_long(argc, argv, "p:m:v:o:h", opts, NULL)) != -1) {
        switch (c) {
        case 'p':
            if (parse_int(optarg, 1, 1 << 20, &v) < 0)
                return usage_error("-p needs a positive rank count, not '%s'", optarg);
            gp.ranks = (int32_t)v;
            break;
        case 'm':
            if (parse_int(optarg, 1, 1 << 24, &v) < 0)
                return usage_error("-m needs a positive microbatch count, not '%s'", optarg);
            gp.microbatches = (int32_t)v;
            break;
        case 'v':
            if (parse_int(optarg, 1, 1024, &v) < 0)
                return usage_error("-v needs a positive stage count, not '%s'", optarg);
            gp.stages_per_rank = (int32_t)v;
            break;
        case 'c': comms = 1; break;
        case 'o': outpath = optarg; break;
        case 'f':
            if (strcmp(optarg, "csv") == 0) native = 0;
            else if (strcmp(optarg, "native") == 0) native = 1;
            else return usage_error("--format is csv or native, not '%s'", optarg);
            break;
        case 'X':
            if (max_memory_option(optarg, &limit) < 0) return PPV_EXIT_BAD_INPUT;
            break;
        case 'C':
            k = parse_numbers(optarg, nums, 4);
            if (k < 3) return usage_error("--costs is F,B,W[,C], not '%s'", optarg);
            ap.costs = (ppv_costs){nums[0], nums[1], nums[2], k == 4 ? nums[3] : 0.0};
            costs_given = 1;
            break;
        case 'A':
            if (parse_numbers(optarg, nums, 1) != 1 || !(nums[0] > 0))
                return usage_error("--cap needs a positive activation count, not '%s'", optarg);
            ap.cap = nums[0];
            auto_only = 1;
            break;
        case 'B':
            if (parse_int(optarg, 0, 1LL << 40, &v) < 0)
                return usage_error("--budget needs a check count (0: no bound), not '%s'", optarg);
            ap.budget = v;
            search_only = 1;
            break;
        case 'T':
            if (parse_numbers(optarg, nums, 1) != 1 || !(nums[0] > 0))
                return usage_error("--time-limit needs a positive number of seconds, not '%s'",
                                   optarg);
            ap.time_limit = nums[0];
            search_only = 1;
            break;
        case 'M':
            model = optarg;
            auto_only = 1;
            break;
        case 'Y':
            if (parse_bytes(optarg, &v) < 0 || v <= 0)
                return usage_error("--mem-cap is one byte count (K, M, G suffixes), not '%s'",
                                   optarg);
            ap.mem_cap_bytes = (double)v;
            auto_only = 1;
            break;
        case 'h': return print_help();
        default: return bad_option();
        }
    }
    if (optind != argc - 1) return usage_error("needs one schedule KIND%s", "");
    if (!gp.ranks || !gp.microbatches) return usage_error("needs -p RANKS and -m MICROBATCHES%s", "");
    int is_auto = strcmp(argv[optind], "auto") == 0;
    if (auto_only && !is_auto)
        return usage_error("--cap, --model and --mem-cap are for 'auto', not %s", argv[optind]);
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
    int rc = refuse_if_too_big(what, actions * BYTES_PER_ACTION, limit);
    if (rc >= 0) return rc;
    char err[512];
    ppv_schedule *s = NULL, *low = NULL;
    if (is_auto) {
        ap.ranks = gp.ranks, ap.microbatches = gp.microbatches;
        if (model) {
            if ((rc = model_spec(model, &spec))) return rc;
            ap.model = &spec;
        }
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
        if (ppv_generate_tuned(argv[optind], &gp, &ap.costs, ap.budget, ap.time_limit, &s, &ar, err,
                               sizeof err) < 0) {
            fprintf(stderr, "ppv gen: %s\n", err);
            return PPV_EXIT_BAD_INPUT;
        }
        fprintf(stderr,
                "ppv gen: %s tuned to --costs %g,%g,%g,%g: best of %lld candidate%s: %s "
                "(makespan %g); %lld improving swaps in %lld checks from %d start%s%s: makespan "
                "%g, bubble ratio %.6f, peak activation %g (the kind's own: at most %g)\n",
                argv[optind], ap.costs.f, ap.costs.b, ap.costs.w, ap.costs.comm,
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
    rc = PPV_EXIT_OK;
    if (comms) {
        ppv_check_options o = ppv_check_defaults();
        o.costs = ap.costs;
        int lrc = ppv_schedule_lower(s, &o.costs, 0, &low, err, sizeof err);
        if (lrc != 0) {
            fprintf(stderr, "ppv gen: lowering %s failed: %s\n", s->name,
                    lrc == 1 ? "the compute order has a dependency cycle" : err);
            ppv_schedule_free(s);
            return PPV_EXIT_PROBLEM;
        }
    }
    const ppv_schedule *w = low ? low : s;
    atomic_file af;
    FILE *f = stdout;
    if (outpath) {
        if (atomic_open(&af, outpath) < 0) {
            fprintf(stderr, "ppv gen: cannot write %s: %s\n", outpath, strerror(errno));
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
            wrc = -1, snprintf(err, sizeof err, "cannot write %s: %s", outpath, strerror(errno));
    }
    if (wrc < 0) {
        fprintf(stderr, "ppv gen: %s\n", err);
        rc = PPV_EXIT_BAD_INPUT;
    }
done:
    ppv_schedule_free(s);
    ppv_schedule_free(low);
    return rc;
}

/* ---- check / show ------------------------------------------------------------- */

typedef struct check_args {
    ppv_check_options opt;
    ppv_dialect dialect;
    int json;
    long long max_memory;
    const char *file, *lowered_out, *svg, *trace, *junit;
    const char *model, *mem_cap; /* --model SPEC|FILE, --mem-cap BYTES[,BYTES...] */
} check_args;

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
    static const struct option opts[] = {{"semantics", required_argument, 0, 's'},
                                         {"costs", required_argument, 0, 'c'},
                                         {"mem", required_argument, 0, 'M'},
                                         {"msg-bytes", required_argument, 0, 'b'},
                                         {"dialect", required_argument, 0, 'd'},
                                         {"json", no_argument, 0, 'j'},
                                         {"lowered-out", required_argument, 0, 'L'},
                                         {"svg", required_argument, 0, 'S'},
                                         {"chrome-trace", required_argument, 0, 'T'},
                                         {"junit", required_argument, 0, 'J'},
                                         {"max-memory", required_argument, 0, 'X'},
                                         {"model", required_argument, 0, 'D'},
                                         {"mem-cap", required_argument, 0, 'Y'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    memset(ca, 0, sizeof *ca);
    ca->opt = ppv_check_defaults();
    ca->dialect = PPV_DIALECT_AUTO;
    ca->max_memory = physical_memory();
    double v[4];
    long long n;
    int c, k;
    getopt_prepare(argv);
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 's':
            if (ppv_semantics_parse(optarg, &ca->opt.sem) < 0)
                return usage_error("--semantics is eager, rendezvous or eager:BYTES, not '%s'",
                                   optarg);
            break;
        case 'c':
            k = parse_numbers(optarg, v, 4);
            if (k < 3) return usage_error("--costs is F,B,W[,C], not '%s'", optarg);
            ca->opt.costs = (ppv_costs){v[0], v[1], v[2], k == 4 ? v[3] : 0.0};
            break;
        case 'M':
            k = parse_numbers(optarg, v, 3);
            if (k < 1) return usage_error("--mem is UNIT[,IFRAC[,STASH]], not '%s'", optarg);
            ca->opt.mem = (ppv_mem_model){v[0], k > 1 ? v[1] : 0.0, k > 2 ? v[2] : 0.0};
            break;
        case 'b':
            if (parse_int(optarg, 0, 1LL << 50, &n) < 0)
                return usage_error("--msg-bytes needs a byte count, not '%s'", optarg);
            ca->opt.msg_bytes = n;
            break;
        case 'd':
            if (strcmp(optarg, "auto") == 0) ca->dialect = PPV_DIALECT_AUTO;
            else if (strcmp(optarg, "current") == 0) ca->dialect = PPV_DIALECT_CURRENT;
            else if (strcmp(optarg, "legacy") == 0) ca->dialect = PPV_DIALECT_LEGACY;
            else return usage_error("--dialect is auto, current or legacy, not '%s'", optarg);
            break;
        case 'j': ca->json = 1; break;
        case 'L': ca->lowered_out = optarg; break;
        case 'S':
        case 'T':
            if (!show) return usage_error("--svg and --chrome-trace belong to 'ppv show'%s", "");
            if (c == 'S') ca->svg = optarg;
            else ca->trace = optarg;
            break;
        case 'J': ca->junit = optarg; break;
        case 'X':
            if (max_memory_option(optarg, &ca->max_memory) < 0) return PPV_EXIT_BAD_INPUT;
            break;
        case 'D':
        case 'Y':
            if (show) return usage_error("--model and --mem-cap belong to 'ppv check'%s", "");
            if (c == 'D') ca->model = optarg;
            else ca->mem_cap = optarg;
            break;
        case 'h': return print_help();
        default: return bad_option();
        }
    }
    if (ca->mem_cap && !ca->model)
        return usage_error("--mem-cap needs --model: bytes come from a model%s", "");
    if (optind != argc - 1) return usage_error("needs one schedule FILE (- for standard input)%s", "");
    ca->file = argv[optind];
    ca->opt.keep_timeline = show;
    return -1;
}

/* Reads --model: the spec itself, or a file holding it (an argument with
 * no '='). Returns 0, or an exit code after the message. */
static int model_spec(const char *arg, ppv_model_spec *m) {
    char err[512], *text = NULL;
    if (!strchr(arg, '=')) {
        FILE *f = fopen(arg, "r");
        if (!f) {
            fprintf(stderr, "ppv %s: --model %s: no KEY=VALUE and no such file: %s\n", g_cmd, arg,
                    strerror(errno));
            return PPV_EXIT_BAD_INPUT;
        }
        size_t n = 0, cap = 0;
        int ch;
        while ((ch = fgetc(f)) != EOF && n < 65536) {
            if (n + 1 >= cap) {
                char *t = realloc(text, cap = cap ? 2 * cap : 256);
                if (!t) break;
                text = t;
            }
            text[n++] = (char)ch;
        }
        fclose(f);
        if (!text) {
            fprintf(stderr, "ppv %s: --model %s: empty or unreadable\n", g_cmd, arg);
            return PPV_EXIT_BAD_INPUT;
        }
        text[n] = 0;
        /* a file may hold comments: '#' to the end of the line */
        for (char *h = text; (h = strchr(h, '#'));)
            while (*h && *h != '\n') *h++ = ' ';
    }
    int rc = ppv_model_spec_parse(text ? text : arg, m, err, sizeof err);
    free(text);
    if (rc < 0) {
        fprintf(stderr, "ppv %s: %s\n", g_cmd, err);
        return PPV_EXIT_BAD_INPUT;
    }
    return 0;
}

/* The bytes of each rank under --model and the --mem-cap verdict. Returns
 * -1 when built, else an exit code after the message. */
static int mem_view_build(const check_args *ca, const ppv_schedule *s, mem_view *mv) {
    memset(mv, 0, sizeof *mv);
    mv->over = -1;
    int rc = model_spec(ca->model, &mv->spec);
    if (rc) return rc;
    char err[512];
    if (ppv_schedule_memory_bytes(s, &mv->spec, &mv->b, err, sizeof err) < 0) {
        fprintf(stderr, "ppv %s: %s\n", g_cmd, err);
        return PPV_EXIT_BAD_INPUT;
    }
    if (!ca->mem_cap) return -1;
    int32_t P = s->nranks, n = 0;
    mv->cap = calloc((size_t)P, sizeof *mv->cap);
    if (!mv->cap) {
        fprintf(stderr, "ppv %s: out of memory\n", g_cmd);
        return PPV_EXIT_BAD_INPUT;
    }
    char *copy = strdup(ca->mem_cap);
    for (char *save = NULL, *t = copy ? strtok_r(copy, ",", &save) : NULL; t;
         t = strtok_r(NULL, ",", &save)) {
        long long b;
        if (n >= P || parse_bytes(t, &b) < 0 || b <= 0) {
            free(copy);
            return usage_error("--mem-cap is one byte count (K, M, G suffixes) or one for each "
                               "rank, not '%s'", ca->mem_cap);
        }
        mv->cap[n++] = (double)b;
    }
    free(copy);
    if (n != 1 && n != P)
        return usage_error("--mem-cap is one byte count (K, M, G suffixes) or one for each "
                           "rank, not '%s'", ca->mem_cap);
    for (int32_t r = n; r < P; r++) mv->cap[r] = mv->cap[0];
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

json_object *wait_json(const ppv_wait *w) {
    json_object *o = json_object_new_object();
    json_object_object_add(o, "rank", json_object_new_int(w->rank));
    json_object_object_add(o, "index", json_object_new_int(w->index));
    json_object_object_add(o, "action", json_object_new_string(w->action));
    json_object_object_add(o, "waits_for", json_object_new_int(w->waits_for));
    json_object_object_add(o, "reason", json_object_new_string(w->reason));
    return o;
}

static void print_json(const ppv_schedule *s, const ppv_check_report *rep, const mem_view *mv) {
    json_object *o = json_object_new_object();
    char sem[64];
    ppv_semantics_format(&rep->sem, sem, sizeof sem);
    json_object_object_add(o, "ok", json_object_new_boolean(rep->ok && (!mv || mv->over < 0)));
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
    json_object_object_add(o, "errors_total", json_object_new_int64(rep->errors_total));
    json_object *pk = json_object_new_array();
    for (int32_t r = 0; r < rep->nranks; r++)
        json_object_array_add(pk, json_object_new_double(rep->peak_activation[r]));
    json_object_object_add(o, "peak_activation", pk);
    json_object_object_add(o, "makespan",
                           rep->simulated ? json_object_new_double(rep->makespan) : NULL);
    json_object_object_add(o, "bubble_ratio",
                           rep->simulated ? json_object_new_double(rep->bubble_ratio) : NULL);
    if (mv) json_object_object_add(o, "memory", mem_json(s, mv));
    puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
    json_object_put(o);
}

static void print_text(const ppv_schedule *s, const ppv_check_report *rep, const mem_view *mv) {
    char sem[64];
    ppv_semantics_format(&rep->sem, sem, sizeof sem);
    printf("%s: %d ranks, %d stages, %d microbatches, %s%s\n", s->name, rep->nranks, rep->nstages,
           rep->nmb, s->form == PPV_FORM_COMPUTE_ONLY ? "compute_only" : "compute_comms",
           s->form == PPV_FORM_COMPUTE_ONLY && rep->checked ? " (lowered by ppv)" : "");
    printf("semantics: %s\n", sem);
    for (int32_t k = 0; k < rep->nerrors; k++) {
        const ppv_problem *e = &rep->errors[k];
        if (e->index >= 0)
            printf("error: rank %d index %d %s: %s\n", e->rank, e->index, e->action, e->message);
        else
            printf("error: rank %d: %s\n", e->rank, e->message);
    }
    if (rep->errors_total > rep->nerrors)
        printf("error: ... %lld more\n", (long long)(rep->errors_total - rep->nerrors));
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
    if (mv) mem_text(s, mv);
    printf("result: %s\n", rep->ok && (!mv || mv->over < 0) ? "OK" : "PROBLEM");
}

static int write_output(const char *path, const ppv_check_report *rep,
                        int (*fn)(const ppv_check_report *, FILE *)) {
    atomic_file af;
    if (atomic_open(&af, path) < 0) {
        fprintf(stderr, "ppv %s: cannot write %s: %s\n", g_cmd, path, strerror(errno));
        return -1;
    }
    if (fn(rep, af.f) < 0) {
        atomic_abort(&af);
        fprintf(stderr, "ppv %s: nothing to write in %s (%s)\n", g_cmd, path,
                rep->checked ? "the schedule could not be simulated" : "no checked schedule");
        return -1;
    }
    if (atomic_commit(&af) < 0) {
        fprintf(stderr, "ppv %s: cannot write %s: %s\n", g_cmd, path, strerror(errno));
        return -1;
    }
    return 0;
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

static int cmd_check(int argc, char **argv, int show) {
    check_args ca;
    int rc = parse_check_args(argc, argv, &ca, show);
    if (rc >= 0) return rc;
    char err[1024];
    ppv_schedule *s = NULL;
    rc = refuse_if_too_big(ca.file, file_estimate(ca.file), ca.max_memory);
    if (rc >= 0) return rc;
    /* Where each action was read (4 bytes an action) matters only to the
     * messages about a file that fails: it is read without, and read and
     * checked again with them when it fails (a big schedule's check stays
     * small; standard input cannot be read twice). */
    ppv_check_report *rep = NULL;
    for (int placeless = strcmp(ca.file, "-") != 0;; placeless = 0) {
        int lrc = placeless ? ppv_schedule_load_placeless(ca.file, ca.dialect, &s, err, sizeof err)
                            : ppv_schedule_load(ca.file, ca.dialect, &s, err, sizeof err);
        if (lrc < 0 && placeless) continue;
        if (lrc < 0 || ppv_schedule_check(s, &ca.opt, &rep, err, sizeof err) < 0) {
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
    if (ca.json) print_json(s, rep, mvp);
    else if (!show || (!ca.svg && !ca.trace)) print_text(s, rep, mvp);
    if (show && !ca.json && !ca.svg && !ca.trace) render_text(rep, stdout);
    rc = rep->ok && (!mvp || mvp->over < 0) ? PPV_EXIT_OK : PPV_EXIT_PROBLEM;
    if (mvp) mem_view_free(mvp);
    if ((ca.svg && write_output(ca.svg, rep, render_svg) < 0) ||
        (ca.trace && write_output(ca.trace, rep, render_chrome_trace) < 0) ||
        (ca.lowered_out && write_output(ca.lowered_out, rep, write_lowered) < 0) ||
        (ca.junit && check_junit(ca.junit, s, rep) < 0))
        rc = PPV_EXIT_BAD_INPUT;
    ppv_check_report_free(rep);
    ppv_schedule_free(s);
    return rc;
}

/* ---- run / verify-recompute --------------------------------------------------------- */

typedef struct run_args {
    ppv_run_options opt;
    ppv_recompute *recompute; /* [nstages] once the schedule is known */
    const char *recompute_text, *trace_out, *replay, *file, *junit;
    const char *recompute_texts[16]; /* verify-recompute: each --recompute given */
    int nrecompute;
    int32_t *replay_decisions;
    int json, perturb, fail_after, term_after;
    int cublas; /* run: --gemm cublas */
    long long max_memory;
    const char *transport;   /* run, record: --transport mpi or nccl (NULL: the mock) */
    const char *mock_option; /* an option of the mock transport's that was given */
    const char *proc_option; /* an option of a transport of processes that was given */
} run_args;

/* " on cuda" for a device other than the CPU, else "". */
static const char *on_device(const char *device) {
    return device && strcmp(device, "cpu") != 0 ? " on cuda" : "";
}

/* --device (cli.h). */
int device_option(const char *arg, const char **device) {
    if (strcmp(arg, "cpu") != 0 && strcmp(arg, "cuda") != 0) {
        usage_error("--device is cpu or cuda, not '%s'", arg);
        return -1;
    }
    *device = arg;
    return 0;
}

/* Parses run's options. Returns -1 on success, else an exit code. */
static int parse_run_args(int argc, char **argv, run_args *ra) {
    static const struct option opts[] = {{"semantics", required_argument, 0, 's'},
                                         {"policy", required_argument, 0, 'p'},
                                         {"seed", required_argument, 0, 'e'},
                                         {"recompute", required_argument, 0, 'r'},
                                         {"trace-out", required_argument, 0, 't'},
                                         {"replay", required_argument, 0, 'R'},
                                         {"layers", required_argument, 0, 'l'},
                                         {"width", required_argument, 0, 'W'},
                                         {"watchdog", required_argument, 0, 'w'},
                                         {"json", no_argument, 0, 'j'},
                                         {"perturb", no_argument, 0, 'P'},
                                         {"fail-after", required_argument, 0, 'F'},
                                         {"term-after", required_argument, 0, 'K'},
                                         {"junit", required_argument, 0, 'J'},
                                         {"max-memory", required_argument, 0, 'X'},
                                         {"device", required_argument, 0, 'D'},
                                         {"gemm", required_argument, 0, 'G'},
                                         {"transport", required_argument, 0, 'T'},
                                         {"timeout", required_argument, 0, 'O'},
                                         {"allow-unsafe", no_argument, 0, 'U'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    memset(ra, 0, sizeof *ra);
    ra->opt = ppv_run_defaults();
    ra->recompute_text = "none";
    ra->max_memory = physical_memory();
    int is_run = strcmp(g_cmd, "run") == 0, is_record = strcmp(g_cmd, "record") == 0;
    long long n;
    int c;
    getopt_prepare(argv);
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        /* each command takes only the options it honours */
        if ((c == 't' && !is_run && !is_record) || (c == 'J' && is_record) ||
            ((c == 'F' || c == 'K') && !is_record))
            return usage_error("%s is not an option of this command",
                               c == 't'   ? "--trace-out"
                               : c == 'J' ? "--junit"
                               : c == 'F' ? "--fail-after"
                                          : "--term-after");
        if ((c == 'T' || c == 'O' || c == 'U') && !is_run && !is_record)
            return usage_error("%s is an option of run and record", c == 'T'   ? "--transport"
                                                                : c == 'O' ? "--timeout"
                                                                           : "--allow-unsafe");
        switch (c) {
        case 'p':
            ra->mock_option = "--policy";
            break;
        case 'e':
            ra->mock_option = "--seed";
            break;
        case 't':
            ra->mock_option = "--trace-out";
            break;
        case 'R':
            ra->mock_option = "--replay";
            break;
        case 'w':
            ra->mock_option = "--watchdog";
            break;
        case 'O':
            ra->proc_option = "--timeout";
            break;
        case 'U':
            ra->proc_option = "--allow-unsafe";
            break;
        }
        switch (c) {
        case 's':
            if (ppv_semantics_parse(optarg, &ra->opt.sem) < 0)
                return usage_error("--semantics is eager, rendezvous or eager:BYTES, not '%s'",
                                   optarg);
            break;
        case 'p': {
            uint64_t seed = ra->opt.policy.seed;
            if (ppv_policy_parse(optarg, &ra->opt.policy) < 0)
                return usage_error("--policy is rr, random, pct or pct:DEPTH, not '%s'", optarg);
            ra->opt.policy.seed = seed;
            break;
        }
        case 'e':
            if (parse_int(optarg, 0, INT64_MAX, &n) < 0)
                return usage_error("--seed needs a non-negative integer, not '%s'", optarg);
            ra->opt.policy.seed = (uint64_t)n;
            break;
        case 'r':
            if (ra->nrecompute == (strcmp(g_cmd, "verify-recompute") == 0 ? 16 : 1))
                return usage_error("takes %s", strcmp(g_cmd, "verify-recompute") == 0
                                                   ? "at most 16 --recompute policies"
                                                   : "one --recompute (verify-recompute takes "
                                                     "several)");
            ra->recompute_text = optarg;
            ra->recompute_texts[ra->nrecompute++] = optarg;
            break;
        case 't': ra->trace_out = optarg; break;
        case 'R': ra->replay = optarg; break;
        case 'l':
            if (parse_int(optarg, 1, 4096, &n) < 0)
                return usage_error("--layers needs a count in 1..4096, not '%s'", optarg);
            ra->opt.model.layers = (int32_t)n;
            break;
        case 'W':
            if (parse_int(optarg, 2, 4096, &n) < 0 || n % ra->opt.model.n_heads)
                return usage_error("--width needs a multiple of the model's heads in 2..4096, "
                                   "not '%s'", optarg);
            ra->opt.model.d_model = (int32_t)n;
            ra->opt.model.d_ff = 2 * (int32_t)n;
            break;
        case 'w':
            if (parse_int(optarg, 1, INT64_MAX, &n) < 0)
                return usage_error("--watchdog needs a positive step count, not '%s'", optarg);
            ra->opt.watchdog_steps = n;
            break;
        case 'j': ra->json = 1; break;
        case 'P': ra->perturb = 1; break;
        case 'F': /* record's crash test: stop after N datasets */
            if (parse_int(optarg, 1, INT32_MAX, &n) < 0)
                return usage_error("--fail-after needs a positive count, not '%s'", optarg);
            ra->fail_after = (int)n;
            break;
        case 'K': /* record's interruption test: SIGTERM itself after N datasets */
            if (parse_int(optarg, 1, INT32_MAX, &n) < 0)
                return usage_error("--term-after needs a positive count, not '%s'", optarg);
            ra->term_after = (int)n;
            break;
        case 'J': ra->junit = optarg; break;
        case 'X':
            if (max_memory_option(optarg, &ra->max_memory) < 0) return PPV_EXIT_BAD_INPUT;
            break;
        case 'D':
            if (device_option(optarg, &ra->opt.device) < 0) return PPV_EXIT_BAD_INPUT;
            break;
        case 'G':
            if (!is_run) return usage_error("%s is run's option", "--gemm");
            if (strcmp(optarg, "reference") != 0 && strcmp(optarg, "cublas") != 0)
                return usage_error("--gemm is reference or cublas, not '%s'", optarg);
            ra->cublas = strcmp(optarg, "cublas") == 0;
            break;
        case 'T':
            if (transport_option(optarg, &ra->transport) < 0) return PPV_EXIT_BAD_INPUT;
            break;
        case 'O':
            if (timeout_option(optarg, &ra->opt.timeout_s) < 0) return PPV_EXIT_BAD_INPUT;
            break;
        case 'U':
            ra->opt.allow_unsafe = 1;
            break;
        case 'h': return print_help();
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
        int64_t n;
        int32_t P;
        /* what the run leaves of --max-memory, at 4 bytes a decision */
        int64_t cap = (int64_t)(((double)ra->max_memory - estimate) / 4);
        if (ppv_trace_read(ra->replay, cap, &ra->replay_decisions, &n, &P, err, sizeof err) < 0) {
            fprintf(stderr, "ppv %s: %s\n", g_cmd, err);
            return PPV_EXIT_BAD_INPUT;
        }
        if (P != (*s)->nranks) {
            fprintf(stderr, "ppv %s: %s: trace of %d ranks, schedule of %d\n", g_cmd, ra->replay, P,
                    (*s)->nranks);
            return PPV_EXIT_BAD_INPUT;
        }
        ra->opt.policy.kind = PPV_POLICY_REPLAY;
        ra->opt.policy.replay = ra->replay_decisions;
        ra->opt.policy.nreplay = n;
        /* a fault the explorer put in is part of what the trace replays */
        if (ppv_trace_read_fault(ra->replay, &ra->opt.fault, err, sizeof err) < 0) {
            fprintf(stderr, "ppv %s: %s\n", g_cmd, err);
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

json_object *hex_json(uint64_t v) {
    char buf[20];
    snprintf(buf, sizeof buf, "%016llx", (unsigned long long)v);
    return json_object_new_string(buf);
}

/* Writes rep's scheduling decisions to path atomically; -1 after printing
 * the reason. */
int write_trace_file(const char *path, const ppv_world *w) {
    atomic_file af;
    if (atomic_open(&af, path) < 0) {
        fprintf(stderr, "ppv %s: cannot write %s: %s\n", g_cmd, path, strerror(errno));
        return -1;
    }
    if (ppv_trace_write(af.f, w) < 0) {
        fprintf(stderr, "ppv %s: cannot write %s: %s\n", g_cmd, path, strerror(errno));
        atomic_abort(&af);
        return -1;
    }
    if (atomic_commit(&af) < 0) {
        fprintf(stderr, "ppv %s: cannot write %s: %s\n", g_cmd, path, strerror(errno));
        return -1;
    }
    return 0;
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

/* Writes a finished JUnit suite; -1 after printing the reason. */
static int finish_junit(junit *j, const char *path, int rc) {
    char err[512];
    if (rc == 0) rc = junit_write(j, path, err, sizeof err);
    else snprintf(err, sizeof err, "out of memory");
    if (rc < 0) fprintf(stderr, "ppv %s: %s\n", g_cmd, err);
    junit_free(j);
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

/* --transport (cli.h). */
int transport_option(const char *arg, const char **out) {
    if (strcmp(arg, "mock") != 0 && strcmp(arg, "mpi") != 0 && strcmp(arg, "nccl") != 0) {
        usage_error("--transport is mock, mpi or nccl, not '%s'", arg);
        return -1;
    }
    *out = strcmp(arg, "mock") == 0 ? NULL : arg;
    return 0;
}

/* --timeout (cli.h). */
int timeout_option(const char *arg, double *out) {
    char *end;
    double t = strtod(arg, &end);
    if (end == arg || *end || !(t > 0) || t > 1e6) {
        usage_error("--timeout needs seconds in (0, 1e6], not '%s'", arg);
        return -1;
    }
    *out = t;
    return 0;
}

/* (cli.h) */
int start_transport(const char *name, ppv_proc **proc, int *lead) {
    char err[512];
    *proc = NULL;
    *lead = 1;
    if (!name) return -1;
    if (ppv_proc_start(name, proc, err, sizeof err) < 0) {
        fprintf(stderr, "ppv %s: --transport %s: %s\n", g_cmd, name, err);
        return PPV_EXIT_BAD_INPUT;
    }
    *lead = ppv_proc_rank(*proc) == 0;
    if (!*lead && !freopen("/dev/null", "w", stdout)) {
        fprintf(stderr, "ppv %s: cannot silence rank %d's output: %s\n", g_cmd,
                ppv_proc_rank(*proc), strerror(errno));
        ppv_proc_end(*proc);
        return PPV_EXIT_BAD_INPUT;
    }
    return -1;
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

static int cmd_run(int argc, char **argv) {
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
    if (ra.trace_out && rep->trace) {
        if (write_trace_file(ra.trace_out, rep->trace) < 0) {
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
            json_object_object_add(o, "grad_rel_l2", json_object_new_double(gd.rel_l2));
            json_object_object_add(o, "grad_rel_l2_bound",
                                   json_object_new_double(PPV_CUBLAS_GRAD_BOUND));
        }
        json_object_object_add(o, "steps", json_object_new_int64(rep->world.steps));
        json_object_object_add(o, "loss", done_ok ? json_object_new_double(rep->loss) : NULL);
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
        printf("result: %s\n", ok ? "OK" : "PROBLEM");
    }
    rc = ok ? PPV_EXIT_OK : PPV_EXIT_PROBLEM;
done:
    free(ref);
    free(ra.recompute);
    free(ra.replay_decisions);
    ppv_run_report_free(rep);
    ppv_schedule_free(s);
    ppv_proc_end(proc);
    return rc;
}

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
        json_object_object_add(o2, "max_abs", json_object_new_double(d->max_abs));
        json_object_object_add(o2, "max_rel", json_object_new_double(d->max_rel));
        json_object_object_add(o2, "first_index", json_object_new_int64(d->first_index));
        json_object_object_add(o2, "first_layer", json_object_new_int(v.first_layer));
        json_object_object_add(o2, "first_tensor",
                               d->bitwise_equal ? NULL : json_object_new_string(v.first_tensor));
        json_object_object_add(o2, "first_tensor_index", json_object_new_int64(v.first_tensor_index));
        json_object_object_add(o2, "first_recompute",
                               d->bitwise_equal ? NULL : json_object_new_double(d->first_a));
        json_object_object_add(o2, "first_stash",
                               d->bitwise_equal ? NULL : json_object_new_double(d->first_b));
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
        json_object_object_add(o2, "extra_stage_forwards", json_object_new_double(extra_units));
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
static int cmd_verify_recompute(int argc, char **argv) {
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
    free(ra.replay_decisions);
    ppv_schedule_free(s);
    return rc;
}

/* ---- record / replay / diff ----------------------------------------------------------- */

static int cmd_record(int argc, char **argv) {
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
    if (ra.trace_out && write_trace_file(ra.trace_out, rep->trace) < 0) {
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
        json_object_object_add(o, "loss", json_object_new_double(rep->loss));
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
    free(ra.replay_decisions);
    ppv_run_report_free(rep);
    ppv_schedule_free(s);
    ppv_proc_end(proc);
    return rc;
}

enum { MAX_LEFT_OUT = 64 }; /* --ignore-attr and --exclude patterns, each */

typedef struct diff_args {
    ppv_diff_options o; /* o.ignore_attrs and o.excludes point into the arrays below */
    int json, perturb;
    long long mesh; /* replay of an inference recording: another mesh size (0: the file's) */
    const char *junit;
    const char *files[2];
    int nfiles;
    const char *transport; /* replay: --transport mpi or nccl (NULL: the mock) */
    double timeout_s; /* replay: --timeout (0: not given) */
    const char *ignore_attrs[MAX_LEFT_OUT], *excludes[MAX_LEFT_OUT]; /* argv's strings */
} diff_args;

/* Options shared by replay and diff. Returns -1 on success, else an exit code. */
static int parse_diff_args(int argc, char **argv, int nfiles, diff_args *da) {
    static const struct option opts[] = {{"tolerance", required_argument, 0, 't'},
                                         {"nan", required_argument, 0, 'n'},
                                         {"max-report", required_argument, 0, 'm'},
                                         {"all-attributes", no_argument, 0, 'a'},
                                         {"threads", required_argument, 0, 'T'},
                                         {"perturb", no_argument, 0, 'P'},
                                         {"json", no_argument, 0, 'j'},
                                         {"junit", required_argument, 0, 'J'},
                                         {"ignore-attr", required_argument, 0, 'i'},
                                         {"exclude", required_argument, 0, 'x'},
                                         {"mesh", required_argument, 0, 'M'},
                                         {"device", required_argument, 0, 'D'},
                                         {"transport", required_argument, 0, 'R'},
                                         {"timeout", required_argument, 0, 'O'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    memset(da, 0, sizeof *da);
    da->o = ppv_diff_defaults();
    da->o.ignore_attrs = da->ignore_attrs;
    da->o.excludes = da->excludes;
    const char *tol = "bitwise";
    long long n;
    int c;
    getopt_prepare(argv);
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 't': tol = optarg; break;
        case 'n':
            if (strcmp(optarg, "equal") && strcmp(optarg, "differ"))
                return usage_error("--nan is equal or differ, not '%s'", optarg);
            da->o.tol.nan_differ = strcmp(optarg, "differ") == 0;
            break;
        case 'm':
            if (parse_int(optarg, 0, 1000000, &n) < 0)
                return usage_error("--max-report needs a count in 0..1000000, not '%s'", optarg);
            da->o.max_report = (int)n;
            break;
        case 'a': da->o.all_attributes = 1; break;
        case 'T':
            if (parse_int(optarg, 1, 8, &n) < 0)
                return usage_error("--threads needs a count in 1..8, not '%s'", optarg);
            da->o.threads = (int)n;
            break;
        case 'P': da->perturb = 1; break;
        case 'j': da->json = 1; break;
        case 'J': da->junit = optarg; break;
        case 'i':
            if (da->o.nignore_attrs == MAX_LEFT_OUT)
                return usage_error("--ignore-attr is given at most 64 times; '%s' is one more",
                                   optarg);
            da->ignore_attrs[da->o.nignore_attrs++] = optarg;
            break;
        case 'x':
            if (da->o.nexcludes == MAX_LEFT_OUT)
                return usage_error("--exclude is given at most 64 times; '%s' is one more", optarg);
            if (optarg[0] != '/')
                return usage_error("--exclude needs an absolute HDF5 path such as /training/grads, "
                                   "not '%s'", optarg);
            da->excludes[da->o.nexcludes++] = optarg;
            break;
        case 'D':
            if (nfiles != 1) return usage_error("%s is replay's option", "--device");
            if (device_option(optarg, &da->o.device) < 0) return PPV_EXIT_BAD_INPUT;
            break;
        case 'R':
            if (nfiles != 1) return usage_error("%s is replay's option", "--transport");
            if (transport_option(optarg, &da->transport) < 0) return PPV_EXIT_BAD_INPUT;
            break;
        case 'O':
            if (nfiles != 1) return usage_error("%s is replay's option", "--timeout");
            if (timeout_option(optarg, &da->timeout_s) < 0) return PPV_EXIT_BAD_INPUT;
            break;
        case 'M':
            if (nfiles != 1) return usage_error("%s is replay's option", "--mesh");
            if (parse_int(optarg, 1, 64, &da->mesh) < 0)
                return usage_error("--mesh needs a count in 1..64, not '%s'", optarg);
            break;
        case 'h': return print_help();
        default: return bad_option();
        }
    }
    if (ppv_tolerance_parse(tol, &da->o.tol) < 0)
        return usage_error("--tolerance is bitwise, ulp:N, abs:X, rel:Y or abs:X,rel:Y, not '%s'",
                           tol);
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

/* Number of entries that are differences (some only inform). */
static uint64_t differences(const ppv_diff_report *r) {
    uint64_t n = 0;
    for (int k = 0; k < r->n; k++) n += r->entries[k].count > 0;
    return n;
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
        json_object_object_add(je, "max_abs", json_object_new_double(e->max_abs));
        json_object_object_add(je, "max_rel", json_object_new_double(e->max_rel));
        json_object_object_add(je, "max_ulp", json_object_new_int64((int64_t)e->max_ulp));
        for (int q = 0; q < e->nfirst; q++) {
            json_object *jp = json_object_new_object();
            json_object_object_add(jp, "index", json_object_new_int64((int64_t)e->first[q].index));
            json_object_object_add(jp, "where", json_object_new_string(e->first[q].where));
            if (!numeric(e)) {
                json_object_array_add(pts, jp);
                continue;
            }
            json_object_object_add(jp, "a", isfinite(e->first[q].a) ? json_object_new_double(e->first[q].a)
                                                                   : json_object_new_string(isnan(e->first[q].a) ? "nan" : e->first[q].a > 0 ? "inf" : "-inf"));
            json_object_object_add(jp, "b", isfinite(e->first[q].b) ? json_object_new_double(e->first[q].b)
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
 * child crashed or ran out of its bound. A child killed by another signal
 * (SIGPIPE, SIGINT) ends the parent the same way. */
enum { HEAP_CPU_BASE_S = 4 };

static int compare_in_child(const char *label, const char *const *paths, int npaths) {
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
        fprintf(stderr,
                "ppv %s: %s is corrupted: its global heap collection at byte %lld makes the HDF5 "
                "library loop (stopped after %llu s of CPU time); nothing was compared\n",
                g_cmd, heap_file, (long long)heap_at, (unsigned long long)bound);
        return PPV_EXIT_BAD_INPUT;
    }
    if (sig != SIGSEGV && sig != SIGBUS && sig != SIGABRT && sig != SIGFPE && sig != SIGILL &&
        sig != SIGSYS && sig != SIGTRAP) {
        signal(sig, SIG_DFL);
        raise(sig);
        return PPV_EXIT_BAD_INPUT; /* a signal this process cannot take */
    }
    fprintf(stderr,
            "ppv %s: %s is corrupted: reading it crashed the HDF5 library (signal %d); nothing was "
            "compared\n",
            g_cmd, label, sig);
    return PPV_EXIT_BAD_INPUT;
}

static int cmd_diff(int argc, char **argv) {
    diff_args da;
    int rc = parse_diff_args(argc, argv, 2, &da);
    if (rc >= 0) return rc;
    if (da.perturb) return usage_error("--perturb is replay's option%s", "");
    char files[8200];
    snprintf(files, sizeof files, "%s or %s", da.files[0], da.files[1]);
    if ((rc = compare_in_child(files, da.files, 2)) >= 0) return rc;
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

/* ppv replay of an inference recording: the file is stage 0. */
static int replay_inference(diff_args *da) {
    ppv_inference_replay_result res;
    char err[1024];
    diff_junit dj;
    diff_junit_begin(da, &dj);
    if (ppv_inference_replay(da->files[0], &da->o, (int32_t)da->mesh, da->perturb, &res, err,
                             sizeof err) < 0) {
        fprintf(stderr, "ppv replay: %s\n", err);
        if (da->junit) junit_free(&dj.j);
        return PPV_EXIT_BAD_INPUT;
    }
    if (diff_junit_end(da, &dj, res.diff) < 0) {
        ppv_inference_replay_free(&res);
        return PPV_EXIT_BAD_INPUT;
    }
    uint64_t nd = differences(res.diff);
    const ppv_pp_report *run = res.run;
    if (da->json) {
        json_object *o = diff_json(res.diff, &da->o);
        json_object_object_add(o, "ok", json_object_new_boolean(nd == 0));
        json_object_object_add(o, "kind", json_object_new_string("inference"));
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
        json_object_object_add(o, "output_digest", hex_json(run->output_digest));
        puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN | JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(o);
    } else {
        printf("%s: replayed %lld recorded calls on a mesh of %d (the file is stage 0; it was "
               "recorded on %d)%s\n",
               da->files[0], (long long)res.calls, res.mesh, res.setup.mesh,
               on_device(da->o.device));
        if (!run->ok)
            printf("the re-run failed as %s: %s\n", ppv_failure_id(run->failure), run->message);
        diff_print(res.diff, &da->o);
        if (res.first_call >= 0)
            printf("first differing call: #%lld (call_id %lld, chunk_index %lld)\n",
                   (long long)res.first_call, (long long)res.first_call_id,
                   (long long)res.first_chunk_index);
        printf("result: %s\n", nd ? "PROBLEM" : "OK");
    }
    ppv_inference_replay_free(&res);
    return nd ? PPV_EXIT_PROBLEM : PPV_EXIT_OK;
}

static int cmd_replay(int argc, char **argv) {
    diff_args da;
    int rc = parse_diff_args(argc, argv, 1, &da);
    if (rc >= 0) return rc;
    /* on MPI the job's processes are the ones mpirun started: no child */
    if (!da.transport && (rc = compare_in_child(da.files[0], da.files, 1)) >= 0) return rc;
    if (ppv_golden_is_inference(da.files[0])) {
        if (da.transport)
            return usage_error("--transport mpi and nccl replay training recordings; %s is an "
                               "inference recording, which replays on the mock",
                               da.files[0]);
        return replay_inference(&da);
    }
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

/* ---- demo ------------------------------------------------------------------------ */

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
 * (PPV_GOLDEN_INSTALL_DIR, relative to the executable's folder), else the
 * source tree's golden/ that this build came from. */
static void golden_dir(char *buf, size_t n) {
    char exe[4096];
    ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (len > 0) {
        exe[len] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0;
        snprintf(buf, n, "%s/%s", exe, PPV_GOLDEN_INSTALL_DIR);
        struct stat st;
        if (stat(buf, &st) == 0 && S_ISDIR(st.st_mode)) return;
    }
    snprintf(buf, n, "%s", PPV_GOLDEN_DIR);
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
        ppv_failure want_mode = ppv_pp_inject_mode((ppv_pp_inject)i);
        int good = want_mode == PPV_FAIL_NONE
                       ? r->ok && r->dropped_stale + r->dropped_duplicate == 1
                       : !r->ok && r->failure == want_mode &&
                             r->caught_by == ppv_pp_inject_caught_by((ppv_pp_inject)i);
        char got[96];
        if (r->ok)
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

static int cmd_demo(void) {
    static const char *const sems[] = {"rendezvous", "eager", "eager:4M"};
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

/* ppv help [CMD], ppv man [CMD]. */
static int cmd_help(int argc, char **argv, int man) {
    if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) return print_help();
    if (argc > 2) return usage_error("takes at most one COMMAND%s", "");
    const help_command *c = NULL;
    if (argc == 2 && !(c = help_find(argv[1]))) return usage_error("no command '%s'", argv[1]);
    if (man) help_print_man(c, stdout);
    else if (c) help_print(c, stdout);
    else help_print_overview(stdout);
    return PPV_EXIT_OK;
}

/* Commands that take no operand: --help, or nothing. */
static int no_operands(int argc, char **argv) {
    if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) return print_help();
    if (argc > 1) return usage_error("takes no argument, not '%s'", argv[1]);
    return -1;
}

/* Runs the command named cmd (known to help_find); its exit code. */
static int run_command(const char *cmd, int argc, char **argv) {
    int rc;
    if (!strcmp(cmd, "help")) return cmd_help(argc - 1, argv + 1, 0);
    if (!strcmp(cmd, "man")) return cmd_help(argc - 1, argv + 1, 1);
    if (!strcmp(cmd, "version")) {
        if ((rc = no_operands(argc - 1, argv + 1)) >= 0) return rc;
        printf("ppv %s\n", PPV_VERSION_STRING);
        return PPV_EXIT_OK;
    }
    if (!strcmp(cmd, "demo")) {
        if ((rc = no_operands(argc - 1, argv + 1)) >= 0) return rc;
        return cmd_demo();
    }
    if (!strcmp(cmd, "gen")) return cmd_gen(argc - 1, argv + 1);
    if (!strcmp(cmd, "check")) return cmd_check(argc - 1, argv + 1, 0);
    if (!strcmp(cmd, "show")) return cmd_check(argc - 1, argv + 1, 1);
    if (!strcmp(cmd, "run")) return cmd_run(argc - 1, argv + 1);
    if (!strcmp(cmd, "verify-recompute")) return cmd_verify_recompute(argc - 1, argv + 1);
    if (!strcmp(cmd, "record")) return cmd_record(argc - 1, argv + 1);
    if (!strcmp(cmd, "replay")) return cmd_replay(argc - 1, argv + 1);
    if (!strcmp(cmd, "pp")) return cmd_pp(argc - 1, argv + 1);
    if (!strcmp(cmd, "fuzz")) return cmd_fuzz(argc - 1, argv + 1);
    if (!strcmp(cmd, "launch")) return cmd_launch(argc - 1, argv + 1);
    return cmd_diff(argc - 1, argv + 1);
}

/* Standard output is buffered: a full disk or a closed pipe shows only when
 * it is flushed, after the command has returned. Flushes it and, when any
 * write to it failed, says so and makes the exit code 2 (a command that
 * already failed keeps its own code). Returns the exit code. */
static int finish_stdout(int rc) {
    errno = 0;
    int bad = fflush(stdout) != 0;
    int e = errno;
    if (!bad && !ferror(stdout)) return rc;
    fprintf(stderr, "ppv %s: cannot write standard output: %s\n", g_cmd, strerror(e ? e : EIO));
    return rc != PPV_EXIT_OK ? rc : PPV_EXIT_BAD_INPUT;
}

int main(int argc, char **argv) {
#ifdef PPV_GOLDEN_LINKED /* else the module's loader does it (golden_module.c) */
    ppv_golden_process_init();
#endif
    if (argc < 2) {
        help_print_overview(stderr);
        return PPV_EXIT_BAD_INPUT;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h")) cmd = "help";
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "-V")) cmd = "version";
    if (!help_find(cmd)) return usage_error("unknown command '%s'", cmd);
    g_cmd = cmd;
    return finish_stdout(run_command(cmd, argc, argv));
}
