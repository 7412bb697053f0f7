/* ppv.c - the ppv command line: one binary, one function per subcommand,
 * found in the table below (a command's code is in its family's cmd_*.c,
 * its help in help.c, its options in options.h).
 *
 * Exit codes (spec/exit_codes.def): 0 the check holds, 1 the check found a
 * problem, 2 bad usage or unreadable input. The commands return them and
 * main alone exits with them.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "ppv_golden.h"

static int cmd_version(int argc, char **argv);
static int cmd_help(int argc, char **argv);
static int cmd_man(int argc, char **argv);

/* Every command, in the order the list of commands gives them. */
static const cli_command commands[] = {
    {"gen", cmd_gen, "write a schedule"},
    {"check", cmd_check, "verify a schedule"},
    {"show", cmd_show, "draw the simulated schedule"},
    {"run", cmd_run, "run one training step (mock, MPI or NCCL)"},
    {"verify-recompute", cmd_verify_recompute, "compare recompute with stash, bit for bit"},
    {"pp", cmd_pp, "run the PP inference pipeline (stage 0 and a mesh) and break it"},
    {"fuzz", cmd_fuzz, "explore interleavings and hand back a minimal reproducer"},
    {"launch", cmd_launch, "start N ranks of a command without mpirun"},
    {"record", cmd_record, "record a run as a golden HDF5 file"},
    {"replay", cmd_replay, "re-run a golden file and compare"},
    {"diff", cmd_diff, "compare two HDF5 files"},
    {"conform", cmd_conform, "check an inference recording against the contract, no model"},
    {"demo", cmd_demo, "the main job on the built-in model"},
    {"version", cmd_version, "print the version"},
    {"help", cmd_help, "print help"},
    {"man", cmd_man, "print a manual page"},
    {NULL, NULL, NULL}};

/* The command called name, or NULL. */
static const cli_command *find_command(const char *name) {
    for (const cli_command *c = commands; c->name; c++)
        if (strcmp(c->name, name) == 0) return c;
    return NULL;
}

/* ppv version: takes no operand. */
static int cmd_version(int argc, char **argv) {
    int rc = no_operands(argc, argv);
    if (rc >= 0) return rc;
    printf("ppv %s\n", PPV_VERSION_STRING);
    return PPV_EXIT_OK;
}

/* ppv help [CMD], ppv man [CMD] (man 1). */
static int help_or_man(int argc, char **argv, int man) {
    if (argc == 2 && (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help"))) return print_help();
    if (argc > 2) return usage_error("takes at most one COMMAND%s", "");
    const cli_command *c = NULL;
    if (argc == 2 && !(c = find_command(argv[1]))) return usage_error("no command '%s'", argv[1]);
    if (man) help_print_man(commands, c, stdout);
    else if (c) help_print(help_find(c->name), stdout);
    else help_print_overview(commands, stdout);
    return PPV_EXIT_OK;
}

static int cmd_help(int argc, char **argv) {
    return help_or_man(argc, argv, 0);
}

static int cmd_man(int argc, char **argv) {
    return help_or_man(argc, argv, 1);
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
        help_print_overview(commands, stderr);
        return PPV_EXIT_BAD_INPUT;
    }
    const char *name = argv[1];
    if (!strcmp(name, "--help") || !strcmp(name, "-h")) name = "help";
    if (!strcmp(name, "--version") || !strcmp(name, "-V")) name = "version";
    const cli_command *c = find_command(name);
    if (!c) return usage_error("unknown command '%s'", name);
    g_cmd = c->name;
    int rc = c->run(argc - 1, argv + 1);
    guard_disarm(); /* its thread ends before the process does */
    return finish_stdout(rc);
}
