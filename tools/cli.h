/* cli.h - shared by the ppv command's source files (tools/ only).
 *
 * ppv.c holds main and the table of commands; each family of commands has
 * its file (cmd_*.c), which calls the shared helpers (cli.c) and the
 * outputs (render.c, junit.c, atomic.c), never another command's file;
 * cli.c calls no command. Every option is declared once, in options.h. */
#ifndef PPV_CLI_H
#define PPV_CLI_H

#include <errno.h>
#include <getopt.h>
#include <stdio.h>

#include "options.h"
#include "ppv_engine.h"
#include "ppv_fuzz.h"

/* A file written with no name (O_TMPFILE) or at a temporary name beside
 * its target, named or renamed into place on success, so a failed run
 * never leaves a partial file (nor, with no name, anything at all). */
typedef struct atomic_file {
    FILE *f;
    int stream;     /* standard output, a FIFO or a device: written straight through */
    char path[4096]; /* what is written: a link's target */
    char tmp[4096 + 16];
    char why[512];  /* after a failure: the reason (the OS's, or what the path is) */
    int anon;       /* an anonymous file (O_TMPFILE), named only at commit */
} atomic_file;

/* Opens the output named path (ppv_output_target): 0, or -1 with af->why. */
int atomic_open(atomic_file *af, const char *path);
/* Flushes, syncs and renames (a stream: flushes); on failure removes the
 * temporary file. 0, or -1 with af->why. */
int atomic_commit(atomic_file *af);
void atomic_abort(atomic_file *af);

/* show's outputs, from a checked report with its timeline. */
int render_svg(const ppv_check_report *rep, FILE *f);
int render_chrome_trace(const ppv_check_report *rep, FILE *f);
void render_text(const ppv_check_report *rep, FILE *f);

/* JUnit XML: one suite, one case per check made. */
typedef struct junit_case {
    char *name;
    char *failure; /* NULL: passed */
} junit_case;

typedef struct junit {
    char suite[256];
    junit_case *cases;
    int n, cap, failures;
} junit;

/* Writes s as XML text (SVG and JUnit): the five special characters
 * escaped, other control characters (not allowed in XML 1.0) as spaces. */
void xml_text(FILE *f, const char *s);

void junit_init(junit *j, const char *suite);
/* Adds a case; failure_fmt NULL means it passed. Returns 0, or -1 when out
 * of memory. */
int junit_add(junit *j, const char *name, const char *failure_fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Writes the XML to path atomically; -1 with the OS reason in err. */
int junit_write(const junit *j, const char *path, char *err, size_t errlen);
void junit_free(junit *j);

/* ---- help (help.c) ------------------------------------------------------------------- */

/* One option of a command's help (a line of an options.h list): its
 * one-letter spelling (0 for none), its long one without "--", its
 * argument (NULL for a flag), what it does and its default (NULL when it
 * has none to state). */
typedef struct help_option {
    char short_name;
    const char *name, *arg, *text, *def;
} help_option;

typedef struct help_command {
    const char *name, *args, *description;
    const help_option *const *groups; /* NULL-terminated; each ends with a NULL name */
    const char *const *examples;      /* NULL-terminated */
} help_command;

/* One command of ppv: its name, the function that runs it (argv[0] is the
 * command's name) and the line the list of commands gives it. The table
 * is ppv.c's; help.c prints what it is handed. */
typedef struct cli_command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} cli_command;

/* The help of the command called name, or NULL. */
const help_command *help_find(const char *name);
void help_print(const help_command *c, FILE *f);
/* The list of commands (commands ends with a NULL name). */
void help_print_overview(const cli_command *commands, FILE *f);
/* ppv(1) when c is NULL, else ppv-NAME(1) for c, one of commands, in roff. */
void help_print_man(const cli_command *commands, const cli_command *c, FILE *f);

/* ---- option parsing (cli.c) ------------------------------------------------------------- */

/* One option of a command's parser: an options.h line without its help. */
typedef struct cli_option {
    int id;           /* what cli_next returns for it */
    char short_name;  /* 0: none */
    const char *name; /* the long spelling, without "--" */
    const char *arg;  /* NULL: a flag */
    option_value value; /* what its argument is, read by cli_next */
} cli_option;

/* Expansions of an options.h list: a command's identifiers (OPT_NAME, in
 * an enum), its parser's table, and nothing (for a part of a list that a
 * command does not take). */
#define CLI_OPTION_ID(ID, SHORT, NAME, ARG, VALUE, TEXT, DEF) OPT_##ID,
#define CLI_OPTION(ID, SHORT, NAME, ARG, VALUE, TEXT, DEF) {OPT_##ID, SHORT, NAME, ARG, VALUE},
#define CLI_SKIP(ID, SHORT, NAME, ARG, VALUE, TEXT, DEF)

/* What cli_next returns besides an option's identifier. */
enum { CLI_END = -1, CLI_HELP = -2, CLI_UNKNOWN = -3 };
enum { CLI_MAX_OPTIONS = 48 };

typedef struct cli_parser {
    const cli_option *opts;
    int n;
    struct option longs[CLI_MAX_OPTIONS + 2];
    char shorts[3 * CLI_MAX_OPTIONS + 3];
    const cli_option *cur; /* the option cli_next returned */
    long long num; /* its OV_INT or OV_BYTES value */
    double real;   /* its OV_SECONDS or OV_FRAC value */
} cli_parser;

/* Readies p to parse argv with the options opts (a static array), and
 * -h, --help: getopt restarts and its messages name "ppv CMD". With
 * stop_at_operand the options end at the first operand. */
#define CLI_BEGIN(p, argv, opts, stop_at_operand)                                                  \
    do {                                                                                           \
        _Static_assert(sizeof(opts) / sizeof((opts)[0]) <= CLI_MAX_OPTIONS,                        \
                       "raise CLI_MAX_OPTIONS");                                                   \
        cli_begin(p, argv, opts, (int)(sizeof(opts) / sizeof((opts)[0])), stop_at_operand);        \
    } while (0)
void cli_begin(cli_parser *p, char **argv, const cli_option *opts, int n, int stop_at_operand);
/* The next option's identifier (its argument in optarg), CLI_HELP for -h
 * or --help, CLI_UNKNOWN for one getopt refused (after its message), or
 * CLI_END after the last. */
int cli_next(cli_parser *p, int argc, char **argv);

/* ---- shared by the commands (cli.c) ----------------------------------------------------- */

struct json_object;

/* The command being run ("check", ...), for messages; set once by main. */
extern const char *g_cmd;
/* Prints "ppv CMD: " and the message (one %s for arg), then where to find
 * help; returns the usage exit code. */
int usage_error(const char *fmt, const char *arg);
/* Prints this command's help on stdout; the exit code of --help. */
int print_help(void);
/* After getopt's own message: where to find help; the usage exit code. */
int bad_option(void);
/* A command that takes no operand (argv[0] its name): --help prints its
 * help, anything else is refused. -1 when there is nothing, else the exit
 * code. */
int no_operands(int argc, char **argv);

/* A comma-separated list of up to n fractions, each in [lo, hi]
 * (ppv_parse_fraction), into v: how many, or -1 (an empty item too). */
int parse_fractions(const char *s, double lo, double hi, double *v, int n);
/* The message for option name's value arg, refused: "--NAME needs WHAT
 * with RANGE, not 'ARG'" (WHAT may be NULL), the range from v (an
 * OV_FORM's, of its numbers). Returns the usage exit code. */
int value_error(const char *name, const option_value *v, const char *what, const char *arg);
/* check --mem-cap: caps for at most this many ranks */
enum { PPV_MAX_MEM_CAPS = 4096 };
/* A comma-separated list of byte counts (the option p->cur, of kind
 * OV_FORM of OV_BYTES) into v[0..max): how many, or -1 after the message. */
int byte_list(const cli_parser *p, const char *arg, double *v, int max);
/* --semantics (rendezvous, eager, eager:BYTES) into *out: 0, or the usage
 * exit code after the message. */
int semantics_option(const cli_parser *p, const char *arg, ppv_semantics *out);
/* --costs F,B,W[,C] (the option p->cur) into *out: 0, or the usage exit
 * code after the message. */
int costs_option(const cli_parser *p, const char *arg, ppv_costs *out);

/* This machine's physical memory in bytes: the default --max-memory. */
long long physical_memory(void);
/* A size as "12.3 GiB" in buf. */
const char *human_bytes(double b, char *buf, size_t n);
/* Refuses work whose estimated memory exceeds the limit: exit 2 after a
 * message with both figures, else -1. */
int refuse_if_too_big(const char *what, double estimate, long long limit);
/* Estimated memory of loading and checking the schedule file at path; -1
 * when unknown (standard input). */
double file_estimate(const char *path);
/* Bytes a loaded schedule takes per action, measured (ppv check on
 * lowered 1F1B and ZBV up to 1.5 million actions) with headroom for the
 * checker's and the runtime's per-action state; a file of n bytes holds
 * at most about n/3 actions. */
enum { BYTES_PER_ACTION = 160, BYTES_PER_FILE_BYTE = 32 };

/* A status line on standard error while an engine run goes (on a
 * terminal, and not under --json). */
typedef struct progress {
    const char *what, *unit; /* "run", "actions" */
    double start, last;
    int shown;
} progress;
/* Turns progress on for o when stderr is a terminal and the output is not
 * JSON. */
void progress_attach(ppv_run_options *o, progress *p, const char *what, int json);
/* The same for a PP inference run, counted in chunks decoded. */
void progress_attach_pp(ppv_pp_options *o, progress *p, const char *what, int json);
/* Ends the status line, if one was drawn. */
void progress_end(progress *p);

/* --device: cpu or cuda (whether CUDA is usable here is known when the
 * run starts). 0, or -1 after a usage message. */
int device_option(const char *arg, const char **device);
/* --transport: mock (*out NULL), mpi or nccl; 0, or -1 after the usage
 * message. */
int transport_option(const char *arg, const char **out);
/* The plug-in guard (guard.c): while armed, a generator's exit(), fatal
 * signal or call past --call-timeout ends the run with exit 1, naming the
 * generator, its function, the mesh rank and the envelope, as the report's
 * failure (JSON with json). The commands that run generators arm it once
 * their options are read. */
#define PPV_GUARD_CALL_TIMEOUT_S 300

/* ppv pp --repeat (repeat.c): the first run that differs from run 1, and
 * where. */
typedef struct repeat_verdict {
    int32_t runs; /* made in all (1: nothing was repeated) */
    int same;     /* every run decoded run 1's results, bit for bit */
    int32_t run;  /* the first run that did not (2..runs) */
    int64_t call_id, chunk_index, cache_epoch; /* its first differing result (-1: none) */
    uint64_t digest, first_digest;             /* that result's output digest, and run 1's */
    char why[640];
} repeat_verdict;
/* Runs o `runs` times, each in fresh generator state, keeping the first
 * run's report (*first: recorded and traced as o asks; the others only
 * compared). 0 with *first and v, or -1 with the reason. */
int repeat_pp(const ppv_pp_options *o, int32_t runs, ppv_pp_report **first, repeat_verdict *v,
              char *err, size_t errlen);
/* --call-timeout: seconds, 0 for no bound. */
void guard_set_call_timeout(double seconds);
void guard_arm(int json);
/* Stops the --call-timeout watchdog (main, once the command returned). */
void guard_disarm(void);
/* Joins the job of transport name (NULL: the mock, nothing to join) and
 * says whether this process leads: every rank computes the whole report,
 * rank 0 prints it (the others' standard output goes nowhere) and writes
 * the files. -1, or an exit code after the message. */
int start_transport(const char *name, ppv_proc **proc, int *lead);
/* As start_transport, for a job ppv joins because mpirun started it (why
 * says so in a refusal). */
int join_job(const char *name, const char *why, ppv_proc **proc, int *lead);
/* --cost-file FILE: read and parsed into *out; 0, or an exit code after
 * the message (the file, its line and what is wrong). */
int cost_file(const char *path, ppv_stage_costs *out);
/* Reads --model: the spec itself, or a file holding it (an argument with
 * no '='). 0, or an exit code after the message. */
int model_spec(const char *arg, ppv_model_spec *m);
/* --model's text: the argument itself (NULL in *text), or a file's items
 * joined into one comma list (malloc'd). 0, or an exit code after the
 * message. */
int model_text(const char *arg, char **text);

/* A 64-bit digest as a 16-digit hex JSON string. */
struct json_object *hex_json(uint64_t v);
/* A figure as a JSON number, or null when it is not finite (JSON has no
 * NaN or infinity). */
struct json_object *finite_json(double v);
struct json_object *wait_json(const ppv_wait *w);
/* Writes path atomically: what write(f, arg) puts there replaces it only
 * when all of it was written. 0, or -1 after "ppv CMD: cannot write PATH:
 * why" (or, where write fails without a write error, "nothing to write in
 * PATH (nothing)"); a failed write leaves no file and the old one as it
 * was. */
int write_atomically(const char *path, int (*write)(FILE *f, const void *arg), const void *arg,
                     const char *nothing);
/* Writes w's decisions as a trace file (atomically); -1 after a message. */
int write_trace_file(const char *path, const ppv_world *w, int deviations,
                     const ppv_trace_verdict *v);

/* A trace read for --replay (ppv pp, run, verify-recompute, record). */
typedef struct replay_trace {
    int32_t *decisions, *dev_ranks; /* malloc'd */
    int64_t *dev_steps;
    ppv_trace_verdict verdict; /* a failing run's, as the explorer recorded it */
} replay_trace;

/* Reads the trace at path (at most max_decisions decisions) into rt and
 * makes pol its REPLAY policy (its decisions, or its deviations and
 * round-robin) and fault the fault it records; its ranks in *nranks. 0,
 * or -1 after printing the reason (rt freed either way by replay_trace_free). */
int replay_trace_read(const char *path, int64_t max_decisions, replay_trace *rt, ppv_policy *pol,
                      ppv_fault *fault, int32_t *nranks);
void replay_trace_free(replay_trace *rt);

/* A replayed run, judged: another program (it diverged from the trace),
 * or, when the trace recorded a failure, whether it fails again as the
 * explorer judges (ppv_fuzz_judge_pp/_run). */
typedef struct replay_judgement {
    int diverged;
    int judged;
    int passes; /* judged: it no longer fails */
    char why[1024];
} replay_judgement;

/* --json's "replay" object. */
struct json_object *replay_json(const replay_judgement *j, const ppv_trace_verdict *v);
/* Prints the replay's lines and the result line (DIVERGED, FAILED or OK)
 * and returns 1, or prints nothing and returns 0 when there is nothing to
 * say (not diverged, nothing recorded); message: the world's. */
int print_replay(const replay_judgement *j, const ppv_trace_verdict *v, const char *message);
/* Writes a finished JUnit suite to path and frees it (rc < 0: it ran out
 * of memory while filled); -1 after printing the reason. */
int finish_junit(junit *j, const char *path, int rc);
/* Number of a comparison's entries that are differences (some only
 * inform). */
struct ppv_diff_report;
uint64_t differences(const struct ppv_diff_report *r);

/* The PP pipeline's options (PIPE in options.h's PP_OPTIONS), which ppv pp
 * and ppv fuzz pp take: their identifiers, apart from any command's own. */
#define CLI_PIPE_ID(ID, SHORT, NAME, ARG, VALUE, TEXT, DEF) PIPE_##ID,
#define CLI_PIPE_OPTION(ID, SHORT, NAME, ARG, VALUE, TEXT, DEF) {PIPE_##ID, SHORT, NAME, ARG, VALUE},
enum { PIPE_BASE_ = 999, PP_OPTIONS(CLI_SKIP, CLI_PIPE_ID) };
/* Takes pipeline option id into o: 0 taken, 1 not one of them, -1 after a
 * usage message. list (may be NULL) is set by --inject list. */
int pp_pipeline_option(int id, const cli_parser *p, const char *arg, ppv_pp_options *o, int *list);
/* After the options: the built-in generator's --generator-params into
 * o->model. 0, or -1 after the usage message. */
int pp_pipeline_finish(ppv_pp_options *o);

/* ppv fuzz py (fuzz_py.c): a Python function run on every rank, as the
 * explorer's program target. */
typedef struct py_target py_target;
/* Loads the Python ranks module, imports FILE.py of spec (FILE.py:FUNCTION)
 * and fills *pg (its sem and watchdog are the caller's); with jobs > 1
 * (ranks as processes) once more for each further worker, each its own
 * zygote (pg->job_args). 0 with *out, or -1 after the message (exit 2). */
int py_target_open(const char *spec, int32_t nranks, double idle, int processes, int32_t jobs,
                   py_target **out, ppv_fuzz_program *pg);
void py_target_close(py_target *t);
/* --replay TRACE: the trace's run once; prints how it ended and whether it
 * fails again. Returns the exit code. */
int py_target_replay(py_target *t, const ppv_fuzz_program *pg, const char *trace, int json);
/* One run under pol with fault: its world (*out, kept for its decisions
 * and notes) and result. 0, or -1 after the message (res to be freed). */
int py_target_run(py_target *t, const ppv_fuzz_program *pg, const ppv_policy *pol,
                  const ppv_fault *fault, ppv_world **out, ppv_world_result *res);

/* ---- the commands, one file a family (ppv.c's table runs them) --------------------------- */

int cmd_gen(int argc, char **argv);              /* cmd_gen.c */
int cmd_check(int argc, char **argv);            /* cmd_check.c */
int cmd_show(int argc, char **argv);             /* cmd_check.c */
int cmd_run(int argc, char **argv);              /* cmd_run.c */
int cmd_verify_recompute(int argc, char **argv); /* cmd_run.c */
int cmd_record(int argc, char **argv);           /* cmd_run.c */
int cmd_replay(int argc, char **argv);           /* cmd_diff.c */
int cmd_diff(int argc, char **argv);             /* cmd_diff.c */
int cmd_conform(int argc, char **argv);          /* cmd_diff.c */
int cmd_pp(int argc, char **argv);               /* cmd_pp.c */
int cmd_fuzz(int argc, char **argv);             /* cmd_fuzz.c */
int cmd_launch(int argc, char **argv);           /* cmd_launch.c */
int cmd_demo(int argc, char **argv);             /* cmd_demo.c */

#endif
