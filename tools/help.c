/* help.c - every command's help, defined once: `ppv help CMD`, `ppv CMD
 * --help` and the manual pages (`ppv man CMD`) are printed from this table,
 * each option from its line in options.h.
 *
 * An option's line says its argument, what it does and its default. The
 * command's getopt table is expanded from the same options.h list, and a
 * test runs every listed option through its command's parser, so the help
 * cannot name an option the command does not take.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"

/* An options.h line as a help line. */
#define HELP_OPTION(ID, SHORT, NAME, ARG, VALUE, TEXT, DEF) {SHORT, NAME, ARG, TEXT, DEF},
#define END_OPTIONS                                                                                \
    { 0, NULL, NULL, NULL, NULL }

/* Each options.h list as a group of help lines. */
static const help_option gen_options[] = {GEN_OPTIONS(HELP_OPTION) END_OPTIONS};
static const help_option check_options[] = {CHECK_OPTIONS(HELP_OPTION) END_OPTIONS};
static const help_option check_only_options[] = {CHECK_ONLY_OPTIONS(HELP_OPTION) END_OPTIONS};
static const help_option show_options[] = {SHOW_OPTIONS(HELP_OPTION) END_OPTIONS};
static const help_option run_options[] = {RUN_OPTIONS(HELP_OPTION) END_OPTIONS};
static const help_option transport_options[] = {TRANSPORT_OPTIONS(HELP_OPTION) END_OPTIONS};
static const help_option gemm_option[] = {GEMM_OPTIONS(HELP_OPTION) END_OPTIONS};
static const help_option trace_option[] = {TRACE_OPTIONS(HELP_OPTION) END_OPTIONS};
static const help_option junit_option[] = {JUNIT_OPTIONS(HELP_OPTION) END_OPTIONS};
static const help_option record_only[] = {RECORD_ONLY_OPTIONS(HELP_OPTION) END_OPTIONS};
static const help_option diff_options[] = {DIFF_OPTIONS(HELP_OPTION) END_OPTIONS};
static const help_option diff_only[] = {DIFF_ONLY_OPTIONS(HELP_OPTION) END_OPTIONS};
static const help_option ignore_attr_option[] = {IGNORE_ATTR_OPTIONS(HELP_OPTION) END_OPTIONS};
static const help_option exclude_option[] = {EXCLUDE_OPTIONS(HELP_OPTION) END_OPTIONS};
static const help_option replay_only[] = {REPLAY_ONLY_OPTIONS(HELP_OPTION) END_OPTIONS};
static const help_option replay_transport[] = {REPLAY_TRANSPORT_OPTIONS(HELP_OPTION) END_OPTIONS};
static const help_option pp_options[] = {PP_OPTIONS(HELP_OPTION, HELP_OPTION) END_OPTIONS};
static const help_option pp_transport[] = {PP_TRANSPORT_OPTIONS(HELP_OPTION) END_OPTIONS};
static const help_option fuzz_options[] = {FUZZ_OPTIONS(HELP_OPTION) END_OPTIONS};
static const help_option fuzz_schedule_options[] = {FUZZ_SCHEDULE_OPTIONS(HELP_OPTION) END_OPTIONS};
static const help_option fuzz_py_options[] = {FUZZ_PY_OPTIONS(HELP_OPTION) END_OPTIONS};
static const help_option launch_options[] = {LAUNCH_OPTIONS(HELP_OPTION) END_OPTIONS};
static const help_option conform_options[] = {CONFORM_OPTIONS(HELP_OPTION) END_OPTIONS};
static const help_option no_options[] = {END_OPTIONS};

/* Each command's groups, in the order its help prints them. */
static const help_option *const gen_groups[] = {gen_options, NULL};
static const help_option *const check_groups[] = {check_options, check_only_options, NULL};
static const help_option *const show_groups[] = {show_options, check_options, NULL};
static const help_option *const run_groups[] = {run_options,  transport_options, gemm_option,
                                                trace_option, junit_option,      NULL};
static const help_option *const vr_groups[] = {run_options, junit_option, NULL};
static const help_option *const record_groups[] = {run_options, transport_options, trace_option,
                                                   record_only, NULL};
static const help_option *const replay_groups[] = {diff_options, exclude_option, replay_only,
                                                   replay_transport, NULL};
static const help_option *const diff_groups[] = {diff_options, diff_only, ignore_attr_option,
                                                 exclude_option, NULL};
static const help_option *const pp_groups[] = {pp_options, pp_transport, NULL};
static const help_option *const fuzz_groups[] = {fuzz_options, fuzz_schedule_options,
                                                  fuzz_py_options, NULL};
static const help_option *const launch_groups[] = {launch_options, NULL};
static const help_option *const conform_groups[] = {conform_options, NULL};
static const help_option *const none_groups[] = {no_options, NULL};

static const char *const gen_examples[] = {
    "ppv gen dualpipev -p 4 -m 10 -o dpv.csv",  "ppv gen zbv -p 4 -m 8 --comms -o zbv_comms.csv",
    "ppv gen 1f1b -p 4 -m 8 --format native",   "ppv gen auto -p 4 -m 8 --cap 3 --costs 1,2,1,0",
    "ppv gen zb-h2 -p 4 -m 16 --costs 1,2,1,1", "ppv gen optimal -p 4 -m 4 --cap 3 -o opt.csv",
    NULL};
static const char *const check_examples[] = {
    "ppv check dpv.csv", "ppv check zbv_comms.csv --semantics eager:4M --json",
    "ppv gen 1f1b -p 4 -m 8 | ppv check - --junit check.xml",
    "ppv check dpv.csv --model layers=24,hidden=2048,heads=16,seq=2048,vocab=50257 --mem-cap 40G",
    "ppv check opt.csv --cost-file stages.csv --optimal", NULL};
static const char *const show_examples[] = {
    "ppv show dpv.csv", "ppv show dpv.csv --svg dpv.svg --chrome-trace dpv.json", NULL};
static const char *const run_examples[] = {
    "ppv run zbv.csv --policy pct --seed 7 --trace-out zbv.trace --json",
    "ppv run zbv.csv --replay zbv.trace",
    "ppv run zbv.csv --recompute all --junit run.xml",
    "mpirun -np 4 ppv run zbv.csv --transport mpi --semantics eager",
    "mpirun -np 4 ppv run zbv.csv --transport nccl --timeout 30",
    NULL};
static const char *const pp_examples[] = {
    "ppv pp --mesh 4 --chunks 16 --policy random --seed 3 --json",
    "ppv pp --kv recompute --hard-cut-at 5 --record run.h5",
    "ppv pp --inject list",
    "ppv pp --inject OM-03",
    "ppv pp --compare-kv --kv-window 3",
    "mpirun -np 3 ppv pp --mesh 2 --transport mpi",
    NULL};
static const char *const launch_examples[] = {
    "ppv launch -n 4 -- ppv run zbv.csv --transport nccl",
    "ppv launch -n 1 -- ppv run one_rank.csv --transport nccl --json", NULL};
static const char *const fuzz_examples[] = {
    "ppv fuzz zbv.csv --semantics eager --runs 500", "ppv fuzz pp --mesh 4 --time 10 --out found",
    "ppv fuzz pp --inject OM-09 --hard-cut-at 3 --strategy pct --pct-depth 4 --json",
    "ppv fuzz pp --poll --chunks 4 --control-only --strategy dfs",
    "mpirun -np 4 ppv fuzz pp --control-only --strategy random --runs 1000000",
    "ppv fuzz checker --time 60 --out disagreement", "ppv fuzz explain found/minimal.trace",
    "ppv fuzz py control.py:main -n 3 --strategy pct --runs 2000 --out found",
    NULL};
static const char *const vr_examples[] = {
    "ppv verify-recompute zbv.csv", "ppv verify-recompute zbv.csv --recompute 0,3 --json",
    "ppv verify-recompute zbv.csv --recompute selective --recompute layers:1 --recompute mb:2",
    NULL};
static const char *const record_examples[] = {"ppv record g.h5 zbv.csv --policy random --seed 1",
                                              "ppv record g.h5 zbv.csv --trace-out g.trace --json",
                                              NULL};
static const char *const conform_examples[] = {"ppv conform rec.h5",
                                               "ppv conform rec.h5 --json --junit conform.xml",
                                               NULL};
static const char *const replay_examples[] = {"ppv replay g.h5",
                                              "ppv replay g.h5 --json --junit replay.xml", NULL};
static const char *const diff_examples[] = {
    "ppv diff a.h5 b.h5 --tolerance ulp:2 --max-report 5",
    "ppv diff a.h5 b.h5 --ignore-attr seed --ignore-attr policy_seed",
    "ppv diff a.h5 b.h5 --exclude /training/grads --json", NULL};
static const char *const demo_examples[] = {"ppv demo", NULL};
static const char *const version_examples[] = {"ppv version", "ppv --version", NULL};
static const char *const help_examples[] = {"ppv help check", "ppv check --help", NULL};
static const char *const man_examples[] = {"ppv man check > ppv-check.1", NULL};

/* Every command's help (ppv.c's table says which commands there are). */
static const help_command commands[] = {
    {"gen", "KIND -p RANKS -m MICROBATCHES [options]",
     "Writes a schedule of KIND: gpipe, 1f1b, interleaved-1f1b, zb-h1, zb-h2, zbv, v-half, "
     "v-min or dualpipev; one of PyTorch's schedule classes, action for action: "
     "pytorch-gpipe, pytorch-1f1b (the valid order), pytorch-looped-bfs, "
     "pytorch-interleaved-1f1b, pytorch-interleaved-zb, pytorch-zbv or pytorch-dualpipev; "
     "auto; or optimal. Without --comms it is PyTorch's compute-only CSV; with it, "
     "the schedule lowered with send/recv actions. Sizes whose schedule would not fit in "
     "memory are refused with the estimate. auto writes the schedule with the smallest "
     "makespan ppv finds under --costs with every rank within --cap: the best of every kind "
     "at every stage count (and a greedy built to the cap), the four best then improved by "
     "swapping adjacent actions while the check passes; a line on standard error says what it "
     "chose. "
     "A named kind given --costs (or --cost-file, or --model with --model-costs: each stage's "
     "own) is tuned to them the same way, within its own peak. optimal writes the schedule of "
     "smallest makespan under the costs within --cap (or, with --model, --mem-cap bytes a "
     "rank), proven by GLPK's MILP solver (one stage a rank, or two in a V with "
     "--kind-shape v; each stage's microbatches in order) or by the ranks' load bound where a "
     "local search from the best named kind reaches it, or the best found when "
     "--time-limit cuts the solver short, said so; sizes beyond p 4, m 8 are refused with the model's "
     "size. It is deterministic: the same options give the same schedule.",
     gen_groups, gen_examples},
    {"check", "FILE [options]",
     "Checks a schedule (PyTorch CSV in either dialect, or ppv's native format; - reads "
     "standard input): structure, message matching, deadlock under the send semantics, peak "
     "activation memory, makespan and bubble ratio. A compute-only file is lowered with "
     "send/recv first. The bubble ratio is the zero-bubble papers' measure: 1 - (compute "
     "time summed over ranks) / (ranks x the longest span from a rank's first compute to its "
     "last); the idle time before a rank's first compute and after its last is not counted, "
     "since the next iteration's work fills it.",
     check_groups, check_examples},
    {"show", "FILE [options]",
     "Simulates the schedule as check does and draws it: a text timeline on standard output, "
     "or an SVG and a Chrome trace. Under each rank's lane the SVG draws the activations it "
     "holds over time, as check counts them for its peak (one forward's activations a unit), "
     "the peak named; the Chrome trace carries the same as a counter track a rank. Takes "
     "every check option.",
     show_groups, show_examples},
    {"run", "SCHEDULE [options]",
     "Runs one training step of the built-in model, every rank a coroutine on the mock "
     "transport under the deterministic scheduler, and compares the gradients with the "
     "one-rank reference bit for bit and every rank's activation memory with the prediction. "
     "With --transport mpi, under mpirun, every rank is a process and its messages go through "
     "MPI: the same gradients, bit for bit; a schedule the check finds deadlocks is refused "
     "before launch unless --allow-unsafe. "
     "Exit 1 on a deadlock, a hang or any difference. On a terminal, progress is shown on "
     "standard error (not with --json).",
     run_groups, run_examples},
    {"verify-recompute", "SCHEDULE [options]",
     "Runs the step once stashing every activation and once recomputing every stage (or the "
     "stages --recompute names), and compares the gradients bit for bit; on a difference it "
     "names the first differing gradient by layer, tensor and index. It checks the measured "
     "peaks against the prediction and the forward passes and attention-core rebuilds against "
     "what the schedule implies. --recompute may be given up to 16 times: each policy is "
     "verified in turn, and the exit is 1 when any fails.",
     vr_groups, vr_examples},
    {"pp", "[options]",
     "Runs streaming inference split in two stages on the mock transport: stage 0 (rank 0) "
     "plans each chunk's PPEnvelopeV1, sends it and decodes the PPResultV1; the mesh (ranks "
     "1..N, rank 1 leading) validates it, checks that every rank holds the same input, and "
     "runs the generator (tensor-parallel, every split reduction summed in fixed blocks, so "
     "the bits do not depend on the mesh size). expected_generator_calls is checked before "
     "stage 0 sends, by the leader before it broadcasts, by every mesh rank while it runs and "
     "by stage 0 on the result; a startup handshake compares every rank's plan. The "
     "stage-0/leader link is buffered (the users' send and receive threads); stage 0's "
     "D_in/D_out bounds are its only backpressure. The output digest does not depend on "
     "D_in, D_out, the policy, the seed or the mesh size. Exit 1 when the run fails (or, "
     "with --inject, when the fault is not caught as it must be).",
     pp_groups, pp_examples},
    {"fuzz", "SCHEDULE|pp|checker [options] | py FILE.py[:FUNCTION] -n N [options] | explain TRACE",
     "Runs the target many times, each under other scheduler decisions (random, PCT, a "
     "portfolio of both, or dfs: each class of equivalent interleavings once, where a probe "
     "and a send on its channel are the only steps that do not commute), and checks every run "
     "against the round-robin reference: a schedule "
     "must complete with the one-rank reference's gradients and the predicted memory; the "
     "pipeline (pp, which takes pp's options) must complete with the reference's output "
     "digest or, with --inject, be caught as the break-it matrix says. A deadlock, a hang, a "
     "check that fires in some orders only, or output that depends on the order is a "
     "failure: it is minimised to the shortest prefix of decisions that still fails with "
     "round-robin after it, and with --out both traces are written for ppv run --replay or "
     "ppv pp --replay. TARGET checker fuzzes ppv check against the engine: it draws "
     "schedules from the generators, lowers them with their messages, mutates them (adjacent "
     "actions swapped, a message moved) and, for each well-formed one and each of rendezvous, "
     "eager and eager:BYTES, compares ppv check's verdict with what the engine does under dfs; "
     "--runs counts schedules (default 200) and --out DIR receives a disagreeing schedule, "
     "minimised. Exit 1 when a run fails or the two disagree. On a terminal, progress is shown "
     "on standard error. Started by mpirun, it is a campaign: the runs (dfs: the search's "
     "branches) are split across the job's processes, each with its own --jobs, and process 0 "
     "prints one report, the same with --runs for any number of processes. ppv fuzz explain "
     "TRACE runs a trace ppv fuzz wrote again on the target its target line names and tells "
     "the failure: the steps around the forced ones (marked *), every probe that finds a "
     "message, the end, and the replay's verdict (its exit code). TARGET py FILE.py:FUNCTION "
     "runs FUNCTION(rank, world_size) on every rank of an -n world, and py FILE.py runs the "
     "script as every rank's __main__ (as torchrun runs it), each rank a process forked "
     "afresh for every run from one import (--ranks-as threads: threads of one interpreter, "
     "module state shared), whose "
     "ppv.dist calls (python/ppv/dist.py, torch.distributed's semantics with gloo; a file "
     "that imports torch.distributed has its calls routed there, unchanged) are the "
     "scheduling points: a deadlock, a collective mismatch, an exception on any rank or a "
     "rank idle past --idle is a failure, with each rank's place (file:line); --replay TRACE "
     "runs a trace it wrote again.",
     fuzz_groups, fuzz_examples},
    {"launch", "-n N -- COMMAND [ARGS...]",
     "Starts N copies of COMMAND, each with PPV_LAUNCH_RANK (0 to N-1), PPV_LAUNCH_SIZE (N) "
     "and PPV_LAUNCH_DIR (a new private folder, removed at the end), on this machine: how "
     "--transport nccl starts without MPI, rank 0 handing its ncclUniqueId to the others "
     "through a file there. When a copy fails, the others are ended (SIGTERM, then SIGKILL "
     "two seconds later). The exit status is the first failure's (128 + the signal for a "
     "copy killed by one), else 0.",
     launch_groups, launch_examples},
    {"record", "OUT.h5 SCHEDULE [options]",
     "Runs the step as run does and writes model, inputs, schedule, options, loss and "
     "gradients to OUT.h5 (an anonymous file, synced and linked in when complete: a failed "
     "or killed run leaves nothing; where the file system has none, a temporary name that "
     "SIGINT, SIGTERM and SIGHUP remove, as does the next record into the folder after a "
     "crash). With SOURCE_DATE_EPOCH set, the same run "
     "gives the same bytes. "
     "--perturb records the perturbed gradients, so that replaying the file must fail.",
     record_groups, record_examples},
    {"replay", "GOLDEN.h5 [options]",
     "Rebuilds the run from the file alone (weights, inputs, schedule, options), re-runs it "
     "and compares loss and gradients with the recorded ones. An inference recording (ppv pp "
     "--record, the Python recorder ppv.record) is replayed with the file as stage 0: the mesh is "
     "rebuilt from the file's setup, fed the recorded envelopes in order, and each result is "
     "compared with the recorded one (latents_out under the tolerance; "
     "its ids, observed_generator_calls, mesh_current_start_frame, output_digest_i64, ok and "
     "error_message exactly); the "
     "first differing call is named by call_id and chunk_index. The recording is first checked "
     "as ppv conform checks it, and OK means it conforms, the re-run completed and answered "
     "every recorded call, and every answer is the recorded one. A recording with no setup "
     "(one from a pipeline of your own) is checked against the contract only, and the output "
     "says that its outputs were not recomputed. --exclude '/inference/calls/*/result' leaves "
     "the recorded results out of the comparison (not out of the contract's checks): for a "
     "recording whose setup names ppv's generator but whose outputs came from another model. "
     "Exit 1 on any difference or violation.",
     replay_groups, replay_examples},
    {"diff", "A.h5 B.h5 [options]",
     "Compares two HDF5 files, B the expected side: structure, attributes and every dataset's "
     "values under the tolerance. Exit 0 same, 1 different, 2 error (missing file, not HDF5, "
     "corrupted data caught by the checksums).",
     diff_groups, diff_examples},
    {"conform", "REC.h5 [options]",
     "Checks an inference recording (ppv pp --record, the Python recorder) against the PP "
     "inference contract with no model at all: every envelope by its action's rules, every "
     "result against the envelope it answers (ids, observed_generator_calls, ok and "
     "error_message, latents_out's dtype, shape and finiteness, output_digest_i64), the "
     "stream's order, fields the contract does not define (the video key is forbidden), and "
     "whether the recording is complete (it ends in SHUTDOWN, ERROR or the mesh's error "
     "result). Each violation names its check, its rule (FM-xx or PPV-*), the call and its "
     "ids. Exit 0 conforming, 1 a violation, 2 unreadable.",
     conform_groups, conform_examples},
    {"demo", "",
     "Generates every schedule kind, checks it under every send semantics, runs it on the "
     "engine (stash and recompute against the one-rank reference) and replays the shipped "
     "golden files bit for bit.",
     none_groups, demo_examples},
    {"version", "", "Prints ppv's version (also -V and --version).", none_groups, version_examples},
    {"help", "[COMMAND]", "Prints the list of commands, or one command's help.", none_groups,
     help_examples},
    {"man", "[COMMAND]",
     "Prints the manual page of ppv, or of one command, in roff (what `man` reads).", none_groups,
     man_examples},
    {NULL, NULL, NULL, NULL, NULL}};

const help_command *help_find(const char *name) {
    for (const help_command *c = commands; c->name; c++)
        if (strcmp(c->name, name) == 0) return c;
    return NULL;
}

/* Prints text wrapped at 78 columns, every line indented by indent. */
static void wrap(FILE *f, const char *text, int indent, int first_col) {
    int col = first_col;
    const char *p = text;
    while (*p) {
        const char *sp = strchr(p, ' ');
        size_t n = sp ? (size_t)(sp - p) : strlen(p);
        if (col > indent && col + 1 + (int)n > 78) {
            fprintf(f, "\n%*s", indent, "");
            col = indent;
        } else if (col > indent) {
            fputc(' ', f);
            col++;
        } else if (col < indent) {
            fprintf(f, "%*s", indent - col, "");
            col = indent;
        }
        fwrite(p, 1, n, f);
        col += (int)n;
        p += n;
        while (*p == ' ')
            p++;
    }
    fputc('\n', f);
}

/* An option's spellings: "-p, --ranks" or "--comms". */
static const char *option_names(const help_option *o, char *buf, size_t n) {
    if (o->short_name) snprintf(buf, n, "-%c, --%s", o->short_name, o->name);
    else snprintf(buf, n, "--%s", o->name);
    return buf;
}

void help_print(const help_command *c, FILE *f) {
    fprintf(f, "usage: ppv %s%s%s\n\n", c->name, c->args[0] ? " " : "", c->args);
    wrap(f, c->description, 0, 0);
    int any = 0;
    for (int g = 0; c->groups[g]; g++)
        for (const help_option *o = c->groups[g]; o->name; o++) {
            if (!any++) fputs("\noptions:\n", f);
            char head[96], names[64];
            snprintf(head, sizeof head, "  %s%s%s", option_names(o, names, sizeof names),
                     o->arg ? " " : "", o->arg ? o->arg : "");
            fputs(head, f);
            /* the text and its default, of any length */
            size_t len = strlen(o->text) + (o->def ? strlen(o->def) + 12 : 0) + 1;
            char *text = malloc(len);
            if (text)
                snprintf(text, len, "%s%s%s%s", o->text, o->def ? " (default: " : "",
                         o->def ? o->def : "", o->def ? ")" : "");
            int col = (int)strlen(head);
            if (col >= 30) {
                fputc('\n', f);
                col = 0;
            }
            wrap(f, text ? text : o->text, 30, col);
            free(text);
        }
    fprintf(f, "%s  -h, --help%*shelp for this command\n", any ? "" : "\noptions:\n", 18, "");
    fputs("\nexamples:\n", f);
    for (int k = 0; c->examples[k]; k++)
        fprintf(f, "  %s\n", c->examples[k]);
    fputs("\nexit codes: 0 the check holds, 1 a problem was found, 2 bad usage or input\n", f);
}

void help_print_overview(const cli_command *commands, FILE *f) {
    fputs("usage: ppv COMMAND [options]   (ppv help COMMAND for one command)\n\ncommands:\n", f);
    for (const cli_command *c = commands; c->name; c++)
        fprintf(f, "  %-17s %s\n", c->name, c->summary);
    fputs("\nexit codes: 0 the check holds, 1 a problem was found, 2 bad usage or input\n", f);
}

/* Writes s for roff: backslashes doubled, a leading dot or quote guarded. */
static void roff(FILE *f, const char *s) {
    if (*s == '.' || *s == '\'') fputs("\\&", f);
    for (; *s; s++) {
        if (*s == '\\')
            fputs("\\e", f);
        else if (*s == '-')
            fputs("\\-", f);
        else
            fputc(*s, f);
    }
}

void help_print_man(const cli_command *commands, const cli_command *cmd, FILE *f) {
    const help_command *c = cmd ? help_find(cmd->name) : NULL;
    char title[64];
    snprintf(title, sizeof title, "PPV%s%s", cmd ? "-" : "", cmd ? cmd->name : "");
    for (char *p = title; *p; p++)
        if (*p >= 'a' && *p <= 'z') *p = (char)(*p - 'a' + 'A');
    fprintf(f, ".TH %s 1 \"\" \"ppv %s\" \"ppv manual\"\n.SH NAME\n", title, PPV_VERSION_STRING);
    if (!cmd) {
        fputs("ppv \\- deterministic test and verification of pipeline-parallel execution\n"
              ".SH SYNOPSIS\n.B ppv\n\\fICOMMAND\\fR [\\fIoptions\\fR]\n.SH COMMANDS\n",
              f);
        for (const cli_command *k = commands; k->name; k++) {
            fprintf(f, ".TP\n.BR ppv\\-%s (1)\n", k->name);
            roff(f, k->summary);
            fputc('\n', f);
        }
    } else {
        fprintf(f, "ppv\\-%s \\- ", c->name);
        roff(f, cmd->summary);
        fprintf(f, "\n.SH SYNOPSIS\n.B ppv %s\n", c->name);
        roff(f, c->args);
        fputs("\n.SH DESCRIPTION\n", f);
        roff(f, c->description);
        fputs("\n.SH OPTIONS\n", f);
        for (int g = 0; c->groups[g]; g++)
            for (const help_option *o = c->groups[g]; o->name; o++) {
                char names[64];
                fputs(".TP\n\\fB", f);
                roff(f, option_names(o, names, sizeof names));
                fputs("\\fR", f);
                if (o->arg) {
                    fputs(" \\fI", f);
                    roff(f, o->arg);
                    fputs("\\fR", f);
                }
                fputc('\n', f);
                roff(f, o->text);
                if (o->def) {
                    fputs(" (default: ", f);
                    roff(f, o->def);
                    fputc(')', f);
                }
                fputc('\n', f);
            }
        fputs(".TP\n\\fB\\-h, \\-\\-help\\fR\nhelp for this command\n.SH EXAMPLES\n.nf\n", f);
        for (int k = 0; c->examples[k]; k++) {
            roff(f, c->examples[k]);
            fputc('\n', f);
        }
        fputs(".fi\n", f);
    }
    fputs(".SH EXIT STATUS\n0 the check holds, 1 a problem was found, 2 bad usage or unreadable "
          "input.\n",
          f);
    if (cmd) fputs(".SH SEE ALSO\n.BR ppv (1)\n", f);
}
