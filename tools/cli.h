/* cli.h - shared by the ppv command's source files (tools/ only). */
#ifndef PPV_CLI_H
#define PPV_CLI_H

#include <errno.h>
#include <getopt.h>
#include <stdio.h>

#include "ppv_engine.h"

/* A file written to a temporary name beside its target and renamed into
 * place on success, so a failed run never leaves a partial file. */
typedef struct atomic_file {
    FILE *f;
    char path[4096];
    char tmp[4096];
} atomic_file;

int atomic_open(atomic_file *af, const char *path);
/* Flushes, syncs and renames; on failure removes the temporary file. */
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

/* One option of a command's help: its spellings, its argument (NULL for a
 * flag), what it does and its default (NULL when it has none to state). */
typedef struct help_option {
    const char *names, *arg, *text, *def;
} help_option;

typedef struct help_command {
    const char *name, *args, *summary, *description;
    const help_option *const *groups; /* NULL-terminated; each ends with a NULL name */
    const char *const *examples;      /* NULL-terminated */
} help_command;

/* The command called name, or NULL. */
const help_command *help_find(const char *name);
/* Every command, ending with a NULL name. */
const help_command *help_commands(void);
void help_print(const help_command *c, FILE *f);
void help_print_overview(FILE *f);
/* ppv(1) when c is NULL, else ppv-NAME(1), in roff. */
void help_print_man(const help_command *c, FILE *f);

/* ---- shared by the command files (ppv.c) ------------------------------------------- */

struct json_object;

/* This machine's physical memory in bytes: the default --max-memory. */
long long physical_memory(void);

/* The command being run ("check", ...), for messages; set once by main. */
extern const char *g_cmd;
/* Prints "ppv CMD: " and the message (one %s for arg), then where to find
 * help; returns the usage exit code. */
int usage_error(const char *fmt, const char *arg);
/* --device: cpu or cuda (whether CUDA is usable here is known when the
 * run starts). 0, or -1 after a usage message. */
int device_option(const char *arg, const char **device);
/* Prints this command's help on stdout; the exit code of --help. */
int print_help(void);
/* Makes getopt's messages name "ppv CMD" and restarts it. */
void getopt_prepare(char **argv);
/* After getopt's own message: where to find help; the usage exit code. */
int bad_option(void);
/* A 64-bit digest as a 16-digit hex JSON string. */
struct json_object *hex_json(uint64_t v);
struct json_object *wait_json(const ppv_wait *w);

/* Writes w's decisions as a trace file (atomically); -1 after a message. */
int write_trace_file(const char *path, const ppv_world *w);

/* --transport: mock (*out NULL), mpi or nccl; 0, or -1 after the usage
 * message. */
int transport_option(const char *arg, const char **out);
/* --timeout: seconds in (0, 1e6]; 0, or -1 after the usage message. */
int timeout_option(const char *arg, double *out);
/* Joins the job of transport name (NULL: the mock, nothing to join) and
 * says whether this process leads: every rank computes the whole report,
 * rank 0 prints it (the others' standard output goes nowhere) and writes
 * the files. -1, or an exit code after the message. */
int start_transport(const char *name, ppv_proc **proc, int *lead);

/* ppv pp (cmd_pp.c). */
int cmd_pp(int argc, char **argv);

/* ppv launch (cmd_launch.c). */
int cmd_launch(int argc, char **argv);
/* The pipeline's options (shared by ppv fuzz pp), zero-terminated, and
 * their handler: 0 taken, 1 not one of them, -1 after a usage message.
 * list (may be NULL) is set by --inject list. */
extern const struct option pp_pipeline_options[];
int pp_pipeline_option(int c, const char *arg, ppv_pp_options *o, int *list);
/* ppv fuzz (cmd_fuzz.c). */
int cmd_fuzz(int argc, char **argv);

#endif
