/* cli.c - what the commands share: usage messages and help, the option
 * parser over options.h's lists, the one integer parser and the other
 * argument parsers, the memory bounds, progress on a terminal, the
 * options several commands take (--device, --transport, --timeout,
 * --model, the PP pipeline's), and JSON, trace and JUnit outputs.
 *
 * It calls no command: every cmd_*.c calls it, and ppv.c calls them.
 */
#include <errno.h>
#include <getopt.h>
#include <json-c/json.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"
#include "ppv_golden.h"

/* ---- usage and help ------------------------------------------------------------------- */

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
    const help_command *c = help_find(g_cmd);
    if (c) help_print(c, stdout);
    return PPV_EXIT_OK;
}

/* getopt's own messages name argv[0]: make it "ppv CMD", and point at help
 * after them. */
static void getopt_prepare(char **argv) {
    static char name[64];
    snprintf(name, sizeof name, "ppv %s", g_cmd);
    argv[0] = name;
    optind = 1;
}

int bad_option(void) {
    fprintf(stderr, "(run 'ppv help %s' for usage)\n", g_cmd);
    return PPV_EXIT_BAD_INPUT;
}

/* (cli.h) */
int no_operands(int argc, char **argv) {
    if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) return print_help();
    if (argc > 1) return usage_error("takes no argument, not '%s'", argv[1]);
    return -1;
}

/* ---- the option parser ---------------------------------------------------------------- */

/* getopt's value for opts[i] when it has no letter: past every char. */
enum { LONG_ONLY_BASE = 256 };

void cli_begin(cli_parser *p, char **argv, const cli_option *opts, int n, int stop_at_operand) {
    getopt_prepare(argv);
    p->opts = opts;
    p->n = n;
    char *s = p->shorts;
    if (stop_at_operand) *s++ = '+';
    for (int i = 0; i < n; i++) {
        const cli_option *o = &opts[i];
        p->longs[i] = (struct option){o->name, o->arg ? required_argument : no_argument, NULL,
                                      o->short_name ? o->short_name : LONG_ONLY_BASE + i};
        if (o->short_name) {
            *s++ = o->short_name;
            if (o->arg) *s++ = ':';
        }
    }
    p->longs[n] = (struct option){"help", no_argument, NULL, 'h'};
    p->longs[n + 1] = (struct option){NULL, 0, NULL, 0};
    *s++ = 'h';
    *s = 0;
}

/* "a whole number from 1 to 64", "seconds above 0, at most 1e+06": the
 * range of a value of kind k (an OV_FORM's inner kind), for messages. */
static void range_text(const option_value *v, option_kind k, char *buf, size_t n) {
    if (k == OV_INT || k == OV_BYTES)
        snprintf(buf, n, "%s from %lld to %lld%s", k == OV_INT ? "a whole number" : "a byte count",
                 v->lo, v->hi, k == OV_BYTES ? " (digits, then K, M or G)" : "");
    else if (v->open_lo)
        snprintf(buf, n, "%s above %g, at most %g", k == OV_SECONDS ? "seconds" : "a number",
                 v->flo, v->fhi);
    else
        snprintf(buf, n, "%s from %g to %g", k == OV_SECONDS ? "seconds" : "a number", v->flo,
                 v->fhi);
}

static void value_message(const char *name, const option_value *v, const char *what,
                          const char *arg) {
    char range[160];
    range_text(v, v->kind == OV_FORM ? v->inner : v->kind, range, sizeof range);
    fprintf(stderr, "ppv %s: --%s needs %s%s%s, not '%s'\n", g_cmd, name, what ? what : "",
            what ? " with " : "", range, arg);
}

/* An option's name in messages: "ranks (-p)" where it has a letter, so
 * the spelling the user typed is there either way. */
static const char *shown_name(const cli_option *o, char *buf, size_t n) {
    if (!o->short_name) return o->name;
    snprintf(buf, n, "%s (-%c)", o->name, o->short_name);
    return buf;
}

/* (cli.h) */
int value_error(const char *name, const option_value *v, const char *what, const char *arg) {
    value_message(name, v, what, arg);
    return bad_option();
}

/* 0 when path can be written as an output file: standard output, a
 * FIFO or device, or a file (through its links) in an existing folder. */
static int output_file_ok(const char *name, const char *path) {
    char resolved[4096], err[4600];
    ppv_output_kind kind;
    if (!strcmp(path, "-")) return 0;
    if (!*path) return fprintf(stderr, "ppv %s: --%s needs a file name, not ''\n", g_cmd, name), -1;
    if (ppv_output_target(path, resolved, sizeof resolved, &kind, err, sizeof err) < 0)
        return fprintf(stderr, "ppv %s: --%s: cannot write %s\n", g_cmd, name, err), -1;
    if (kind != PPV_OUTPUT_FILE) return 0;
    char *slash = strrchr(resolved, '/');
    if (!slash) return 0;
    if (slash == resolved) slash[1] = 0;
    else *slash = 0;
    struct stat st;
    errno = 0;
    if (stat(resolved, &st) != 0 || !S_ISDIR(st.st_mode))
        return fprintf(stderr, "ppv %s: --%s: cannot write %s: %s\n", g_cmd, name, path,
                       strerror(errno ? errno : ENOTDIR)),
               -1;
    return 0;
}

/* 0 when path is a folder, or can be made as one (its parent is a folder). */
static int output_dir_ok(const char *name, const char *path) {
    struct stat st;
    if (!*path) return fprintf(stderr, "ppv %s: --%s needs a directory, not ''\n", g_cmd, name), -1;
    if (stat(path, &st) == 0) {
        if (S_ISDIR(st.st_mode)) return 0;
        return fprintf(stderr, "ppv %s: --%s %s: exists and is not a directory\n", g_cmd, name,
                       path),
               -1;
    }
    if (errno != ENOENT)
        return fprintf(stderr, "ppv %s: --%s %s: %s\n", g_cmd, name, path, strerror(errno)), -1;
    char parent[4096];
    snprintf(parent, sizeof parent, "%s", path);
    char *slash = strrchr(parent, '/');
    while (slash && slash > parent && slash[1] == 0) { /* "dir/" */
        *slash = 0;
        slash = strrchr(parent, '/');
    }
    if (!slash) return 0;
    if (slash == parent) slash[1] = 0;
    else *slash = 0;
    if (stat(parent, &st) != 0 || !S_ISDIR(st.st_mode))
        return fprintf(stderr, "ppv %s: --%s %s: cannot be made: %s is not a directory\n",
                       g_cmd, name, path, parent),
               -1;
    return 0;
}

/* Reads option o's argument arg by its declared value into p: 0, or -1
 * after the message. */
static int read_value(cli_parser *p, const cli_option *o, const char *arg) {
    const option_value *v = &o->value;
    int64_t n;
    double x;
    char shown[96];
    const char *name = shown_name(o, shown, sizeof shown);
    switch (v->kind) {
    case OV_INT:
        if (ppv_parse_whole(arg, v->lo, v->hi, &n) < 0) return value_message(name, v, NULL, arg), -1;
        p->num = n;
        return 0;
    case OV_BYTES:
        if (ppv_parse_bytes(arg, v->lo, v->hi, &n) < 0) return value_message(name, v, NULL, arg), -1;
        p->num = n;
        return 0;
    case OV_SECONDS:
    case OV_FRAC:
        if (ppv_parse_fraction(arg, v->flo, v->fhi, &x) < 0 || (v->open_lo && x == v->flo))
            return value_message(name, v, NULL, arg), -1;
        p->real = x;
        return 0;
    case OV_OUT:
        return output_file_ok(name, arg);
    case OV_DIR:
        return output_dir_ok(name, arg);
    default: return 0; /* read by the command */
    }
}

int cli_next(cli_parser *p, int argc, char **argv) {
    int c = getopt_long(argc, argv, p->shorts, p->longs, NULL);
    if (c == -1) return CLI_END;
    if (c == 'h') return CLI_HELP;
    const cli_option *o = NULL;
    if (c >= LONG_ONLY_BASE && c < LONG_ONLY_BASE + p->n) o = &p->opts[c - LONG_ONLY_BASE];
    for (int i = 0; !o && i < p->n; i++)
        if (p->opts[i].short_name && p->opts[i].short_name == c) o = &p->opts[i];
    if (!o) return CLI_UNKNOWN;
    p->cur = o;
    if (o->arg && read_value(p, o, optarg) < 0) return CLI_UNKNOWN; /* after the message */
    return o->id;
}

/* ---- argument parsers ------------------------------------------------------------------ */

/* (cli.h) */
int parse_fractions(const char *s, double lo, double hi, double *v, int n) {
    char item[64];
    const char *p = s;
    int k = 0, rc;
    while ((rc = ppv_list_next(&p, item, sizeof item)) > 0) {
        if (k == n || ppv_parse_fraction(item, lo, hi, &v[k]) < 0) return -1;
        k++;
    }
    return rc < 0 ? -1 : k;
}

/* (cli.h) */
int costs_option(const cli_parser *p, const char *arg, ppv_costs *out) {
    double v[4];
    const option_value *val = &p->cur->value;
    int k = parse_fractions(arg, val->flo, val->fhi, v, 4);
    if (k < 3) return value_error(p->cur->name, val, "F,B,W[,C], each", arg);
    if (!(v[0] > 0) || !(v[1] > v[2])) /* the checker's rule (ppv_schedule_check), said here */
        return value_error(p->cur->name, val, "F,B,W[,C] with F > 0 and B > W, each", arg);
    *out = (ppv_costs){v[0], v[1], v[2], k == 4 ? v[3] : 0.0};
    return 0;
}

/* (cli.h) */
int byte_list(const cli_parser *p, const char *arg, double *v, int max) {
    char item[64];
    const char *at = arg;
    const option_value *val = &p->cur->value;
    int k = 0, rc;
    int64_t b;
    while ((rc = ppv_list_next(&at, item, sizeof item)) > 0) {
        if (k == max || ppv_parse_bytes(item, val->lo, val->hi, &b) < 0) break;
        v[k++] = (double)b;
    }
    if (rc == 0) return k;
    char what[64] = "a list, each";
    if (k == max) snprintf(what, sizeof what, "at most %d items, each", max);
    value_error(p->cur->name, val, what, arg);
    return -1;
}

/* (cli.h) */
int semantics_option(const cli_parser *p, const char *arg, ppv_semantics *out) {
    if (ppv_semantics_parse(arg, out) == 0) return 0;
    return value_error(p->cur->name, &p->cur->value, "rendezvous, eager or eager:BYTES,", arg);
}

/* ---- memory bounds --------------------------------------------------------------------- */

long long physical_memory(void) {
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
    return pages > 0 && size > 0 ? (long long)pages * size : 1LL << 62;
}

/* Prints a size as "12.3 GiB". */
const char *human_bytes(double b, char *buf, size_t n) {
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    while (b >= 1024 && u < 5) b /= 1024, u++;
    snprintf(buf, n, u ? "%.1f %s" : "%.0f %s", b, units[u]);
    return buf;
}

/* Refuses work whose estimated memory exceeds the limit: exit 2 with both
 * figures, else -1. */
int refuse_if_too_big(const char *what, double estimate, long long limit) {
    if (estimate <= (double)limit) return -1;
    char e[32], l[32];
    fprintf(stderr,
            "ppv %s: %s needs about %s of memory, more than the limit of %s; use smaller "
            "sizes (or --max-memory BYTES if this machine really has it)\n",
            g_cmd, what, human_bytes(estimate, e, sizeof e), human_bytes((double)limit, l, sizeof l));
    return PPV_EXIT_BAD_INPUT;
}

/* Estimated memory of loading and checking the schedule file at path: a
 * file of n bytes holds at most about n/3 actions. -1 when unknown (stdin). */
double file_estimate(const char *path) {
    struct stat st;
    if (strcmp(path, "-") == 0 || stat(path, &st) != 0 || !S_ISREG(st.st_mode)) return -1;
    return (double)st.st_size * BYTES_PER_FILE_BYTE;
}

/* ---- progress on a terminal ------------------------------------------------------------ */

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
    fprintf(stderr, "\r\033[K%s: %lld of %lld %s (%.0f%%), %.0f %s/s, %.1f s left", p->what,
            (long long)done, (long long)total, p->unit,
            total ? 100.0 * (double)done / (double)total : 100.0, rate, p->unit, left);
    fflush(stderr);
}

/* Ends the status line, if one was drawn. */
void progress_end(progress *p) {
    if (p->shown) fputs("\r\033[K", stderr);
    p->shown = 0;
    p->start = 0;
}

/* Turns progress on for o when stderr is a terminal and the output is not
 * JSON. */
void progress_attach(ppv_run_options *o, progress *p, const char *what, int json) {
    memset(p, 0, sizeof *p);
    p->what = what;
    p->unit = "actions";
    if (json || !isatty(STDERR_FILENO)) return;
    o->progress = progress_update;
    o->progress_ctx = p;
}

/* (cli.h) */
void progress_attach_pp(ppv_pp_options *o, progress *p, const char *what, int json) {
    memset(p, 0, sizeof *p);
    p->what = what;
    p->unit = "chunks";
    if (json || !isatty(STDERR_FILENO)) return;
    o->progress = progress_update;
    o->progress_ctx = p;
}
/* ---- options several commands take ----------------------------------------------------- */

/* --device (cli.h). */
int device_option(const char *arg, const char **device) {
    if (strcmp(arg, "cpu") != 0 && strcmp(arg, "cuda") != 0) {
        usage_error("--device is cpu or cuda, not '%s'", arg);
        return -1;
    }
    *device = arg;
    return 0;
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

/* (cli.h) */
int join_job(const char *name, const char *why, ppv_proc **proc, int *lead) {
    char err[512];
    *proc = NULL;
    *lead = 1;
    if (ppv_proc_start(name, proc, err, sizeof err) < 0) {
        fprintf(stderr, "ppv %s: %s: %s\n", g_cmd, why, err);
        return PPV_EXIT_BAD_INPUT;
    }
    *lead = ppv_proc_rank(*proc) == 0;
    if (!*lead && !freopen("/dev/null", "w", stdout)) {
        fprintf(stderr, "ppv %s: cannot silence rank %d's output: %s\n", g_cmd,
                ppv_proc_rank(*proc), strerror(errno));
        ppv_proc_end(*proc);
        *proc = NULL;
        return PPV_EXIT_BAD_INPUT;
    }
    return -1;
}

/* (cli.h) */
int start_transport(const char *name, ppv_proc **proc, int *lead) {
    *proc = NULL;
    *lead = 1;
    if (!name) return -1;
    char why[64];
    snprintf(why, sizeof why, "--transport %s", name);
    return join_job(name, why, proc, lead);
}

/* Reads --model: the spec itself, or a file holding it (an argument with
 * no '='). Returns 0, or an exit code after the message. */
int model_text(const char *arg, char **out) {
    char *text = NULL;
    *out = NULL;
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
        /* one item a line (or a comma list), '#' to the end of a line a
         * comment, spaces around an item ignored: the lines joined with
         * commas into one list (the grammar of --model SPEC) */
        char *w = text;
        for (char *line = text, *next; line; line = next) {
            next = strchr(line, '\n');
            if (next) *next++ = 0;
            char *hash = strchr(line, '#');
            if (hash) *hash = 0;
            while (*line == ' ' || *line == '\t') line++;
            size_t len = strlen(line);
            while (len && strchr(" \t\r", line[len - 1])) len--;
            if (!len) continue;
            if (w > text) *w++ = ',';
            memmove(w, line, len);
            w += len;
        }
        *w = 0;
    }
    *out = text;
    return 0;
}

int cost_file(const char *path, ppv_stage_costs *out) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "ppv %s: --cost-file %s: %s\n", g_cmd, path, strerror(errno));
        return PPV_EXIT_BAD_INPUT;
    }
    size_t n = 0, cap = 0, limit = (size_t)64 << 20; /* a million stages and more */
    char *text = NULL;
    int ch, bad = 0;
    while (!bad && (ch = fgetc(f)) != EOF) {
        if (n + 1 >= cap) {
            char *t = n + 1 >= limit ? NULL : realloc(text, cap = cap ? 2 * cap : 4096);
            if (!t) bad = 1;
            else text = t;
        }
        if (!bad) text[n++] = (char)ch;
        if (!ch) bad = 2;
    }
    int read_error = ferror(f);
    fclose(f);
    if (bad || read_error || !text) {
        fprintf(stderr, "ppv %s: --cost-file %s: %s\n", g_cmd, path,
                bad == 2     ? "a NUL byte: not a text file"
                : bad        ? "larger than 64 MiB, or out of memory"
                : read_error ? "cannot read it"
                             : "empty: a cost file starts 'ppv-costs,1'");
        free(text);
        return PPV_EXIT_BAD_INPUT;
    }
    text[n] = 0;
    char err[512];
    int rc = ppv_stage_costs_parse(text, path, out, err, sizeof err);
    free(text);
    if (rc < 0) {
        fprintf(stderr, "ppv %s: --cost-file: %s\n", g_cmd, err);
        return PPV_EXIT_BAD_INPUT;
    }
    return 0;
}

int model_spec(const char *arg, ppv_model_spec *m) {
    char err[512], *text = NULL;
    int bad = model_text(arg, &text);
    if (bad) return bad;
    int rc = ppv_model_spec_parse(text ? text : arg, m, err, sizeof err);
    free(text);
    if (rc < 0) {
        fprintf(stderr, "ppv %s: %s (in --model '%s')\n", g_cmd, err, arg);
        return PPV_EXIT_BAD_INPUT;
    }
    return 0;
}

/* ---- outputs --------------------------------------------------------------------------- */

json_object *hex_json(uint64_t v) {
    char buf[20];
    snprintf(buf, sizeof buf, "%016llx", (unsigned long long)v);
    return json_object_new_string(buf);
}

json_object *finite_json(double v) {
    return isfinite(v) ? json_object_new_double(v) : NULL;
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

/* (cli.h) */
int write_atomically(const char *path, int (*write)(FILE *f, const void *arg), const void *arg,
                     const char *nothing) {
    atomic_file af;
    if (atomic_open(&af, path) < 0) {
        fprintf(stderr, "ppv %s: cannot write %s: %s\n", g_cmd, path, af.why);
        return -1;
    }
    errno = 0;
    if (write(af.f, arg) < 0) {
        /* a write that failed (a full disk, a size limit), or nothing to write */
        int failed = ferror(af.f) || !nothing, e = errno ? errno : EIO;
        atomic_abort(&af);
        if (failed) fprintf(stderr, "ppv %s: cannot write %s: %s\n", g_cmd, path, strerror(e));
        else fprintf(stderr, "ppv %s: nothing to write in %s (%s)\n", g_cmd, path, nothing);
        return -1;
    }
    if (atomic_commit(&af) < 0) {
        fprintf(stderr, "ppv %s: cannot write %s: %s\n", g_cmd, path, af.why);
        return -1;
    }
    return 0;
}

typedef struct trace_file {
    const ppv_world *w;
    int deviations;
    const ppv_trace_verdict *v;
} trace_file;

static int write_trace(FILE *f, const void *arg) {
    const trace_file *t = arg;
    int bad = t->deviations ? ppv_trace_write_deviations(f, t->w) : ppv_trace_write(f, t->w);
    return bad < 0 || (t->v && ppv_trace_write_verdict(f, t->v) < 0) ? -1 : 0;
}

/* Writes w's scheduling decisions to path atomically (its deviations from
 * round-robin alone when deviations: a minimal trace), and v's verdict
 * after them when v is given; -1 after printing the reason. */
int write_trace_file(const char *path, const ppv_world *w, int deviations,
                     const ppv_trace_verdict *v) {
    trace_file t = {w, deviations, v};
    return write_atomically(path, write_trace, &t, NULL);
}

/* Writes a finished JUnit suite; -1 after printing the reason. */
int finish_junit(junit *j, const char *path, int rc) {
    char err[512];
    if (rc == 0) rc = junit_write(j, path, err, sizeof err);
    else snprintf(err, sizeof err, "out of memory");
    if (rc < 0) fprintf(stderr, "ppv %s: %s\n", g_cmd, err);
    junit_free(j);
    return rc;
}

/* (cli.h) */
uint64_t differences(const ppv_diff_report *r) {
    uint64_t n = 0;
    for (int k = 0; k < r->n; k++) n += r->entries[k].count > 0;
    return n;
}

/* ---- the PP pipeline's options (ppv pp, ppv fuzz pp) ------------------------------------ */

/* --hard-cut-at K[,K...] into o; 0, or -1 after the usage message. */
static int parse_cuts(const char *arg, const option_value *v, ppv_pp_options *o) {
    char item[32];
    const char *p = arg;
    int rc;
    o->ncuts = 0;
    while ((rc = ppv_list_next(&p, item, sizeof item)) > 0) {
        if (o->ncuts == PPV_PP_MAX_CUTS) {
            fprintf(stderr, "ppv %s: --hard-cut-at takes at most %d chunks, not '%s'\n", g_cmd,
                    PPV_PP_MAX_CUTS, arg);
            bad_option();
            return -1;
        }
        int64_t k;
        if (ppv_parse_whole(item, v->lo, v->hi, &k) < 0) break;
        o->cuts[o->ncuts++] = (int32_t)k;
    }
    if (rc != 0) {
        value_error("hard-cut-at", v, "chunk numbers K or K1,K2,... (no empty item)", arg);
        return -1;
    }
    return 0;
}

int replay_trace_read(const char *path, int64_t max_decisions, replay_trace *rt, ppv_policy *pol,
                      ppv_fault *fault, int32_t *nranks) {
    char err[1024];
    int64_t n = 0;
    int then_rr = 0;
    if (ppv_trace_read(path, max_decisions, &rt->decisions, &n, nranks, err, sizeof err) < 0 ||
        (then_rr = ppv_trace_read_then_rr(path, err, sizeof err)) < 0 ||
        ppv_trace_read_deviations(path, &rt->dev_steps, &rt->dev_ranks, &pol->ndev, err,
                                  sizeof err) < 0 ||
        ppv_trace_read_fault(path, fault, err, sizeof err) < 0 ||
        ppv_trace_read_verdict(path, &rt->verdict, err, sizeof err) < 0) {
        fprintf(stderr, "ppv %s: %s\n", g_cmd, err);
        return -1;
    }
    pol->kind = PPV_POLICY_REPLAY;
    pol->replay = rt->decisions;
    pol->nreplay = n;
    pol->then_rr = then_rr;
    pol->dev_step = rt->dev_steps;
    pol->dev_rank = rt->dev_ranks;
    return 0;
}

void replay_trace_free(replay_trace *rt) {
    free(rt->decisions);
    free(rt->dev_steps);
    free(rt->dev_ranks);
    rt->decisions = rt->dev_ranks = NULL;
    rt->dev_steps = NULL;
}

json_object *replay_json(const replay_judgement *j, const ppv_trace_verdict *v) {
    json_object *o = json_object_new_object();
    json_object_object_add(o, "diverged", json_object_new_boolean(j->diverged));
    json_object_object_add(o, "recorded", v->present ? json_object_new_string(v->failure) : NULL);
    json_object_object_add(o, "fails_again",
                           j->judged ? json_object_new_boolean(!j->passes) : NULL);
    json_object_object_add(o, "failure",
                           j->judged && !j->passes ? json_object_new_string(j->why) : NULL);
    return o;
}

int print_replay(const replay_judgement *j, const ppv_trace_verdict *v, const char *message) {
    if (j->diverged)
        printf("replay: the trace diverges from this program (%s): it no longer runs as "
               "recorded\nresult: DIVERGED\n",
               message);
    else if (j->judged && !j->passes)
        printf("replay: fails again: %s%s%s\nresult: FAILED\n", j->why,
               strcmp(j->why, v->failure) ? "\nreplay: the trace recorded: " : "",
               strcmp(j->why, v->failure) ? v->failure : " (as recorded)");
    else if (j->judged)
        printf("replay: no longer fails (the trace recorded: %s)\nresult: OK\n", v->failure);
    return j->diverged || j->judged;
}

/* (cli.h) */
/* The declaration of pipeline option id, for its range. */
static const cli_option pipe_options[] = {PP_OPTIONS(CLI_SKIP, CLI_PIPE_OPTION)};
static const option_value *pipe_value(int id) {
    for (size_t i = 0; i < sizeof pipe_options / sizeof pipe_options[0]; i++)
        if (pipe_options[i].id == id) return &pipe_options[i].value;
    return NULL;
}

int pp_pipeline_option(int id, const cli_parser *p, const char *arg, ppv_pp_options *o,
                       int *list) {
    int32_t n32 = (int32_t)p->num; /* every pipeline number fits an int32 (options.h) */
    switch (id) {
    case PIPE_MESH: o->mesh = n32; return 0;
    case PIPE_CHUNKS: o->chunks = n32; return 0;
    case PIPE_STEPS: o->steps = n32; return 0;
    case PIPE_RECOMPUTE_EVERY: o->recompute_every = n32; return 0;
    case PIPE_KV:
        if (!strcmp(arg, "stash")) o->kv_recompute = 0;
        else if (!strcmp(arg, "recompute")) o->kv_recompute = 1;
        else {
            usage_error("--kv is stash or recompute, not '%s'", arg);
            return -1;
        }
        return 0;
    case PIPE_KV_WINDOW: o->kv_window = n32; return 0;
    case PIPE_D_IN: o->d_in = n32; return 0;
    case PIPE_D_OUT: o->d_out = n32; return 0;
    case PIPE_HARD_CUT_AT: return parse_cuts(arg, pipe_value(id), o);
    case PIPE_INJECT: {
        if (list && !strcmp(arg, "list")) {
            *list = 1;
            return 0;
        }
        int i = ppv_pp_inject_lookup(arg);
        if (i <= 0) {
            usage_error("--inject takes a name that 'ppv pp --inject list' shows, not '%s'", arg);
            return -1;
        }
        o->inject = (ppv_pp_inject)i;
        return 0;
    }
    case PIPE_SEED_BUG: {
        if (list && !strcmp(arg, "list")) {
            *list = 2;
            return 0;
        }
        int b = ppv_pp_bug_lookup(arg);
        if (b < 0) {
            usage_error("--seed-bug takes a name that 'ppv pp --seed-bug list' shows, not '%s'",
                        arg);
            return -1;
        }
        o->bug = (ppv_pp_bug)b;
        return 0;
    }
    case PIPE_WATCHDOG_STEPS: o->watchdog_steps = p->num; return 0;
    case PIPE_CONTROL_ONLY:
        o->control_only = 1;
        return 0;
    case PIPE_CALL_TIMEOUT: guard_set_call_timeout(p->real); return 0;
    case PIPE_POLL:
        o->poll = 1;
        return 0;
    case PIPE_HEARTBEAT: o->heartbeat_s = p->real; return 0;
    case PIPE_COST: { /* decode=N,call=M, either or both, in any order */
        ppv_pair items[2];
        char why[600];
        int64_t steps[2] = {0, 0};
        int n = ppv_parse_pairs(arg, items, 2, why, sizeof why);
        for (int i = 0; i < n; i++) {
            int k = !strcmp(items[i].key, "decode") ? 0 : !strcmp(items[i].key, "call") ? 1 : -1;
            if (k < 0) {
                snprintf(why, sizeof why, "%s is not decode or call", items[i].key);
                n = -1;
            } else if (ppv_parse_whole(items[i].value, pipe_value(id)->lo, pipe_value(id)->hi,
                                       &steps[k]) < 0) {
                snprintf(why, sizeof why, "%s=%s is out of range", items[i].key, items[i].value);
                n = -1;
            }
        }
        if (n < 0) {
            char what[700];
            snprintf(what, sizeof what, "decode=N,call=M in steps (%s)", why);
            value_error("cost", pipe_value(id), what, arg);
            return -1;
        }
        o->cost_decode = (int32_t)steps[0];
        o->cost_call = (int32_t)steps[1];
        return 0;
    }
    case PIPE_FINGERPRINT_EVERY: o->fingerprint_every = n32; return 0;
    case PIPE_ENVELOPE_DIGEST:
        if (!strcmp(arg, "on")) o->envelope_digest = 1;
        else if (!strcmp(arg, "off")) o->envelope_digest = 0;
        else {
            usage_error("--envelope-digest is on or off, not '%s'", arg);
            return -1;
        }
        return 0;
    case PIPE_GENERATOR: {
        if (!strcmp(arg, "builtin")) {
            o->generator = NULL;
            return 0;
        }
        char err[1024];
        if (!(o->generator = ppv_generator_open(arg, err, sizeof err))) {
            usage_error("--generator: %s", err);
            return -1;
        }
        return 0;
    }
    case PIPE_GENERATOR_PARAMS:
        o->generator_params = arg;
        return 0;
    case PIPE_FRAME: {
        char h[16], *x = strchr(arg, 'x');
        size_t n = x ? (size_t)(x - arg) : 0;
        if (!x || n == 0 || n >= sizeof h) {
            value_error("frame", pipe_value(id), "HxW in pixels, multiples of 16", arg);
            return -1;
        }
        memcpy(h, arg, n);
        h[n] = 0;
        int64_t hv, wv;
        const option_value *v = pipe_value(id);
        if (ppv_parse_whole(h, v->lo, v->hi, &hv) < 0 ||
            ppv_parse_whole(x + 1, v->lo, v->hi, &wv) < 0 || hv % 16 || wv % 16) {
            value_error("frame", v, "HxW in pixels, multiples of 16", arg);
            return -1;
        }
        o->height = (int32_t)hv;
        o->width = (int32_t)wv;
        return 0;
    }
    }
    return 1;
}

/* (cli.h) */
int pp_pipeline_finish(ppv_pp_options *o) {
    if (o->control_only && (o->generator || o->generator_params)) {
        usage_error("--control-only runs no model, so it takes no --generator or "
                    "--generator-params%s",
                    "");
        return -1;
    }
    if (o->generator || !o->generator_params) return 0;
    char err[512];
    ppv_pair items[8];
    if (ppv_parse_pairs(o->generator_params, items, 8, err, sizeof err) < 0) {
        fprintf(stderr, "ppv %s: --generator-params needs key=value items: %s, not '%s'\n", g_cmd,
                err, o->generator_params);
        bad_option();
        return -1;
    }
    if (ppv_gen_config_parse(o->generator_params, o->model.cond_dim, &o->model, err, sizeof err) <
        0) {
        usage_error("--generator-params: %s", err);
        return -1;
    }
    o->generator_params = NULL; /* the built-in's settings are o->model now */
    return 0;
}
