/* options.h - every option of every command, declared once (tools/ only).
 *
 * Each list is an X-macro of X(ID, SHORT, NAME, ARG, VALUE, TEXT, DEFAULT):
 * the option's identifier in its command's parser, its one-letter spelling
 * (0 for none), its long spelling without "--", its argument (NULL for a
 * flag), the kind of value it takes and its range (V_* below), what it
 * does and its default (NULL when it has none to state).
 * help.c expands a list into the help's option lines (and the manual's);
 * the command's own file expands the same list into its getopt table
 * (cli.h: CLI_OPTION), so an option cannot be in one and not the other.
 * The parser reads every number by its VALUE before the command sees it
 * (cli.c: cli_next), so one kind has one grammar (docs/commands.md,
 * "Values") in every command; the tests build their bad spellings from
 * the same declarations.
 * A list is one group of a command's help, in the order printed; a parser
 * may take several groups, and groups several commands share.
 */
#ifndef PPV_OPTIONS_H
#define PPV_OPTIONS_H

#include <stdint.h>

/* The kinds of value an option takes. */
typedef enum option_kind {
    OV_NONE,    /* a flag */
    OV_INT,     /* a whole number in [lo, hi] */
    OV_BYTES,   /* a byte count in [lo, hi]: digits, then K, M or G */
    OV_SECONDS, /* a duration in seconds, a fraction in [flo, fhi] ((flo, fhi] if open_lo) */
    OV_FRAC,    /* a fraction in [flo, fhi] */
    OV_FORM,    /* a text of its own grammar (parsed by its command), numbers of kind inner */
    OV_WORD,    /* one of the words its ARG lists (parsed by its command) */
    OV_TEXT,    /* a name or text the command reads as it is */
    OV_IN,      /* a file read */
    OV_OUT,     /* a file written ("-": standard output) */
    OV_DIR      /* a folder written into, made when missing */
} option_kind;

typedef struct option_value {
    option_kind kind;
    long long lo, hi; /* OV_INT, OV_BYTES, an OV_FORM of them */
    double flo, fhi;  /* OV_SECONDS, OV_FRAC, an OV_FORM of them */
    int open_lo;      /* flo itself is out of range */
    const char *form; /* OV_FORM: a valid text, with %s where a number goes */
    option_kind inner; /* OV_FORM: the kind of that number */
} option_value;

#define V_NONE {OV_NONE, 0, 0, 0, 0, 0, NULL, OV_NONE}
#define V_INT(lo, hi) {OV_INT, lo, hi, 0, 0, 0, NULL, OV_NONE}
#define V_BYTES(lo, hi) {OV_BYTES, lo, hi, 0, 0, 0, NULL, OV_NONE}
#define V_BYTES_MAX (1LL << 62)
#define V_SECONDS(lo, hi) {OV_SECONDS, 0, 0, lo, hi, 0, NULL, OV_NONE}
#define V_POSITIVE_SECONDS(hi) {OV_SECONDS, 0, 0, 0, hi, 1, NULL, OV_NONE}
#define V_FORM_INT(form, lo, hi) {OV_FORM, lo, hi, 0, 0, 0, form, OV_INT}
#define V_FORM_BYTES(form, lo, hi) {OV_FORM, lo, hi, 0, 0, 0, form, OV_BYTES}
#define V_FORM_FRAC(form, lo, hi) {OV_FORM, 0, 0, lo, hi, 0, form, OV_FRAC}
#define V_WORD {OV_WORD, 0, 0, 0, 0, 0, NULL, OV_NONE}
#define V_TEXT {OV_TEXT, 0, 0, 0, 0, 0, NULL, OV_NONE}
#define V_IN {OV_IN, 0, 0, 0, 0, 0, NULL, OV_NONE}
#define V_OUT {OV_OUT, 0, 0, 0, 0, 0, NULL, OV_NONE}
#define V_DIR {OV_DIR, 0, 0, 0, 0, 0, NULL, OV_NONE}
/* the composite values several options share: a cost of each action, a
 * model's key=value items, send semantics */
#define V_COSTS V_FORM_FRAC("1,2,1,%s", 0, 1e6)
#define V_MODEL V_FORM_INT("layers=%s,hidden=64,heads=4,seq=128", 1, 1 << 20)
#define V_PP_MODEL V_FORM_INT("layers=%s,d_model=32,n_heads=4,d_ff=64,dtype=bf16", 1, 1 << 16)
#define V_SEMANTICS V_FORM_BYTES("eager:%s", 0, 1LL << 50)

/* ---- gen ------------------------------------------------------------------------------- */

#define GEN_OPTIONS(X)                                                                             \
    X(RANKS, 'p', "ranks", "N", V_INT(1, 1 << 20), "number of ranks (required)", NULL)                                \
    X(MICROBATCHES, 'm', "microbatches", "N", V_INT(1, 1 << 24), "number of microbatches (required)", NULL)           \
    X(STAGES_PER_RANK, 'v', "stages-per-rank", "V", V_INT(1, 1024), "stages per rank",                             \
      "the kind's own: 1, or 2 for zbv, v-half, "                                                  \
      "v-min, dualpipev and interleaved-1f1b")                                                     \
    X(COMMS, 0, "comms", NULL, V_NONE,                                                                     \
      "write the schedule lowered with SEND/RECV actions (completes under "                        \
      "every send semantics)",                                                                     \
      "compute only")                                                                              \
    X(OUTPUT, 'o', "output", "FILE", V_OUT, "write to FILE (temporary name, then renamed)",               \
      "standard output")                                                                           \
    X(FORMAT, 0, "format", "csv|native", V_WORD, "PyTorch's CSV or ppv's native format", "csv")            \
    X(COSTS, 0, "costs", "F,B,W[,C]", V_COSTS,                                                              \
      "times of a forward, a full backward, a weight backward and a message: what --comms "        \
      "lowers with and what auto minimises (auto: a rank's whole share of the model, so a "        \
      "kind with V stages a rank runs each action at 1/V of them); given to a named kind, "        \
      "each action's (as check takes them), and the kind is tuned to them: for zb-h1, zb-h2 "      \
      "and zbv also the zero-bubble authors' cost-aware heuristic, then the local search, no "     \
      "rank above the kind's own peak",                                                            \
      "1,2,1,0; a named kind untuned")                                                             \
    X(CAP, 0, "cap", "A", V_INT(1, 1 << 24),                                                                          \
      "auto and optimal: at most A activations on any rank (whole microbatches, as check counts "  \
      "them)",                                                                                     \
      "no cap")                                                                                    \
    X(KIND_SHAPE, 0, "kind-shape", "1f1b|v", V_WORD,                                                      \
      "optimal: the stages' placement searched, one stage a rank (1f1b) or two in a V (v: rank r " \
      "holds stages r and 2p-1-r)",                                                                \
      "1f1b")                                                                                      \
    X(BUDGET, 0, "budget", "N", V_INT(0, 1LL << 40),                                                                    \
      "auto, or a kind tuned with --costs: schedules the local search may check (0: no bound)",    \
      "2000")                                                                                      \
    X(TIME_LIMIT, 0, "time-limit", "S", V_POSITIVE_SECONDS(1e6),                                                            \
      "auto, optimal, or a kind tuned with --costs: stop the search after S seconds (a safety "   \
      "stop: a result it cuts short depends on the machine, and says so; optimal then says 'best " \
      "found, not proven')",                                                                       \
      "60")                                                                                        \
    X(MODEL, 0, "model", "SPEC|FILE", V_MODEL,                                                              \
      "auto: weigh each candidate's bytes a rank for this GPT-style model (as check --model); "   \
      "optimal: each stage's activation from its split; with --model-costs, auto, optimal and a "  \
      "named kind take each stage's times from it too",                                            \
      NULL)                                                                                        \
    X(COST_FILE, 0, "cost-file", "FILE", V_IN,                                                            \
      "each stage's own times, message time and activation (a cost file, as check takes it): a "  \
      "named kind is tuned to them, as to --costs; auto judges every candidate of the file's "     \
      "stage count by them",                                                                       \
      NULL)                                                                                        \
    X(MODEL_COSTS, 0, "model-costs", NULL, V_NONE,                                                        \
      "with --model: auto judges each candidate, optimal solves, and a named kind is tuned (as "  \
      "to a cost file), "                                                                          \
      "by the times and activations the model's split over its stages gives (as check "           \
      "--model-costs)",                                                                            \
      NULL)                                                                                        \
    X(MEM_CAP, 0, "mem-cap", "BYTES", V_BYTES(1, V_BYTES_MAX),                                                              \
      "auto and optimal, with --model: every rank's weights, gradients, optimizer state and "     \
      "peak activations within BYTES (K, M, G suffixes)",                                          \
      "no cap")                                                                                    \
    X(MAX_MEMORY, 0, "max-memory", "BYTES", V_BYTES(1, V_BYTES_MAX),                                                        \
      "refuse sizes whose schedule would need more (K, M, G suffixes)", "this machine's memory")

/* ---- check and show ---------------------------------------------------------------------- */

/* Both commands' options. */
#define CHECK_OPTIONS(X)                                                                           \
    X(SEMANTICS, 0, "semantics", "S", V_SEMANTICS,                                                              \
      "send semantics: eager, rendezvous or eager:BYTES (eager below BYTES, "                      \
      "rendezvous from there; K, M, G suffixes)",                                                  \
      "rendezvous")                                                                                \
    X(COSTS, 0, "costs", "F,B,W[,C]", V_COSTS,                                                              \
      "time of a forward, a full backward, a weight backward and a "                               \
      "message, in cost units; a backward-for-inputs costs B-W",                                   \
      "1,2,1,0")                                                                                   \
    X(MEM, 0, "mem", "UNIT[,IFRAC[,STASH]]", V_FORM_FRAC("%s,0,0", 0, 1e15),                                                       \
      "activation memory of one forward; the fraction a "                                          \
      "backward-for-inputs keeps; a stashed input (recompute)",                                    \
      "0,0,0; a UNIT of 0 means ranks/stages")                                                     \
    X(COST_FILE, 0, "cost-file", "FILE", V_IN,                                                            \
      "each stage's own times, message time and activation, for stages that are not alike: a "     \
      "cost file (docs/schedules.md), one row a stage; --costs then times only collectives and "  \
      "messages of no stage",                                                                      \
      "--costs and --mem for every stage")                                                         \
    X(MODEL, 0, "model", "SPEC|FILE", V_MODEL,                                                              \
      "also report (show: also print) each rank's memory in bytes (weights, gradients, "          \
      "optimizer state, peak activations) for a GPT-style model: key=value items, comma-separated or one a line in "     \
      "FILE: layers, hidden, heads, seq, vocab, mbs, dtype, optimizer, tp, sp, recompute "         \
      "(spec/memory-model.md)",                                                                    \
      NULL)                                                                                        \
    X(MODEL_COSTS, 0, "model-costs", NULL, V_NONE,                                                        \
      "with --model: each stage's times and activation from the model's split (FLOP-"             \
      "proportional, in units of one layer's forward; the output layer on the last stage), as a " \
      "cost file would give them",                                                                 \
      NULL)                                                                                        \
    X(MEM_CAP, 0, "mem-cap", "BYTES[,BYTES...]", V_FORM_BYTES("%s", 1, V_BYTES_MAX),                                                   \
      "with --model: exit 1 (check and show alike) when a rank needs more (one cap for every "     \
      "rank, or one for each), naming the first such rank, by how much, and the action where "     \
      "its activations peak",                                                                      \
      NULL)                                                                                        \
    X(MSG_BYTES, 0, "msg-bytes", "N", V_BYTES(0, 1LL << 50), "size of one message, for eager:BYTES", "8388608")           \
    X(DIALECT, 0, "dialect", "auto|current|legacy", V_WORD,                                                \
      "PyTorch CSV dialect (legacy: B meant I, BW meant B)", "auto")                               \
    X(JSON, 0, "json", NULL, V_NONE, "print the report as one JSON object", NULL)                          \
    X(JUNIT, 0, "junit", "FILE", V_OUT,                                                                   \
      "also write the checks as JUnit XML (one testcase per rank for "                             \
      "deadlock, one for the structure)",                                                          \
      NULL)                                                                                        \
    X(LOWERED_OUT, 0, "lowered-out", "FILE", V_OUT,                                                       \
      "write the checked schedule (lowered, for a compute-only file) as "                          \
      "CSV",                                                                                       \
      NULL)                                                                                        \
    X(MAX_MEMORY, 0, "max-memory", "BYTES", V_BYTES(1, V_BYTES_MAX),                                                        \
      "refuse inputs whose estimated memory exceeds BYTES (K, M, G "                               \
      "suffixes)",                                                                                 \
      "this machine's physical memory")

#define CHECK_ONLY_OPTIONS(X)                                                                      \
    X(OPTIMAL, 0, "optimal", NULL, V_NONE,                                                                \
      "also prove the optimum for the schedule's size, placement (one stage a rank, or a V), "     \
      "costs and own peak (ppv gen optimal, at most 60 s) and report the schedule's gap to it",   \
      NULL)                                                                                        \
    X(TARGET, 0, "target", "ppv|pytorch", V_WORD,                                                          \
      "pytorch: also judge the file as PyTorch's runtime would run it, and exit 1 on any "         \
      "problem: a compute_comms stage with a backward but no REDUCE_GRAD (PyTorch never scales "   \
      "its gradients: m times too large), an action PyTorch's runtime has not (in a compute_only " \
      "file, UNSHARD, RESHARD and REDUCE_GRAD too); a note where a rank holds a stage and the "   \
      "next (gloo cannot send to its own rank)",                                                   \
      "ppv: those problems of a compute_comms file are warnings")

#define SHOW_OPTIONS(X)                                                                            \
    X(SVG, 0, "svg", "OUT", V_OUT, "write an SVG timeline (ranks as rows, a time axis in cost units)",    \
      NULL)                                                                                        \
    X(CHROME_TRACE, 0, "chrome-trace", "OUT", V_OUT,                                                      \
      "write Chrome-trace JSON (open in Perfetto); one cost unit is "                              \
      "shown as 1 ms",                                                                             \
      NULL)

/* ---- run, verify-recompute and record --------------------------------------------------- */

/* The three commands' options. */
#define RUN_OPTIONS(X)                                                                             \
    X(SEMANTICS, 0, "semantics", "S", V_SEMANTICS, "send semantics: eager, rendezvous or eager:BYTES",          \
      "rendezvous")                                                                                \
    X(POLICY, 0, "policy", "rr|random|pct[:DEPTH]", V_FORM_INT("pct:%s", 1, 64),                                                \
      "scheduling policy of the mock world; pct (depth 3 by default) draws its DEPTH-1 change "    \
      "points over the run's length, measured by a round-robin run first",                         \
      "rr")                                                                                        \
    X(SEED, 0, "seed", "N", V_INT(0, INT64_MAX), "seed of the random and pct policies", "0")                            \
    X(RECOMPUTE, 0, "recompute", "POLICY|S:POLICY|S,...", V_WORD,                                          \
      "what stages keep for the backward: none (stash), full|all (the stage input; the forward "   \
      "runs again before the backward), selective (all but the attention cores; the backward "     \
      "rebuilds them a layer at a time), layers:K (the input of every K-th layer; the backward "   \
      "rebuilds K layers at a time), mb:N (stash while the rank holds fewer than N stashed "       \
      "forwards, full beyond); per stage as S:POLICY, a bare S meaning full",                      \
      "none")                                                                                      \
    X(REPLAY, 0, "replay", "TRACE", V_IN,                                                                \
      "run exactly the interleaving of a written trace; a failure's trace (ppv fuzz --out) "      \
      "fails again, exit 1, or says it no longer fails or diverges",                              \
      NULL)                                                                                        \
    X(LAYERS, 0, "layers", "N", V_INT(1, 4096), "model layers (raised to the stage count)", "4")                   \
    X(WIDTH, 0, "width", "C", V_INT(4, 4096), "model width, a multiple of the heads; the MLP is 2C wide", "32")    \
    X(WATCHDOG, 0, "watchdog", "STEPS", V_INT(1, INT64_MAX), "scheduler steps without progress that make a hang",       \
      "100000")                                                                                    \
    X(DEVICE, 0, "device", "cpu|cuda", V_WORD,                                                             \
      "where the model's kernels run: cuda runs every one on the GPU with the CPU's bits (inputs " \
      "and outputs copied each op: a check, not a fast path); exit 2 if CUDA is not usable here",  \
      "cpu")                                                                                       \
    X(PERTURB, 0, "perturb", NULL, V_NONE,                                                                 \
      "flip the lowest bit of one gradient, to watch a comparison fail", NULL)                     \
    X(JSON, 0, "json", NULL, V_NONE, "print the report as one JSON object", NULL)                          \
    X(MAX_MEMORY, 0, "max-memory", "BYTES", V_BYTES(1, V_BYTES_MAX), "refuse inputs whose estimated memory exceeds BYTES",  \
      "this machine's physical memory")

/* run and record. */
#define TRANSPORT_OPTIONS(X)                                                                       \
    X(TRANSPORT, 0, "transport", "mock|mpi|nccl", V_WORD,                                                  \
      "where the ranks run: mock (every rank a coroutine in this process, under --policy), mpi "   \
      "or nccl (one process per rank, or per GPU, started by mpirun -np RANKS; rank 0 prints "     \
      "the report); on mpi rendezvous sends are MPI_Issend, eager ones buffered (a copy sent "     \
      "with MPI_Isend); nccl sends as NCCL does",                                                  \
      "mock")                                                                                      \
    X(TIMEOUT, 0, "timeout", "SECONDS", V_POSITIVE_SECONDS(1e6),                                                            \
      "with --transport mpi or nccl: the longest any call may wait; then the rank reports the "    \
      "hang (its action, the peer), nccl aborts its communicator, and the job ends with exit 1",   \
      "60")                                                                                        \
    X(ALLOW_UNSAFE, 0, "allow-unsafe", NULL, V_NONE,                                                       \
      "with --transport mpi or nccl: launch a schedule that the check finds deadlocks under the "  \
      "semantics, so the watchdog shows the hang (without it the run is refused, exit 1)",         \
      NULL)

/* run only. */
#define GEMM_OPTIONS(X)                                                                            \
    X(GEMM, 0, "gemm", "reference|cublas", V_WORD,                                                         \
      "with --device cuda: cublas runs the matmuls on cuBLAS (deterministic run to run, pedantic " \
      "math, no atomics); they sum in cuBLAS's order, so the gradients are checked against the "   \
      "reference within a relative 2-norm of 2^-4 and the distance is printed, not bit for bit",   \
      "reference")

/* run and record. */
#define TRACE_OPTIONS(X)                                                                           \
    X(TRACE_OUT, 0, "trace-out", "FILE", V_OUT,                                                           \
      "write every scheduling decision (replay it with --replay)", NULL)

/* run and verify-recompute. */
#define JUNIT_OPTIONS(X) X(JUNIT, 0, "junit", "FILE", V_OUT, "also write the checks as JUnit XML", NULL)

#define RECORD_ONLY_OPTIONS(X)                                                                     \
    X(FAIL_AFTER, 0, "fail-after", "N", V_INT(1, INT32_MAX),                                                            \
      "testing: end the process (exit 3) after writing N datasets, to show "                       \
      "that a crash leaves no file",                                                               \
      NULL)                                                                                        \
    X(TERM_AFTER, 0, "term-after", "N", V_INT(1, INT32_MAX),                                                            \
      "testing: send the process SIGTERM after writing N datasets, to show "                       \
      "that an interrupted record removes its temporary file",                                     \
      NULL)

/* ---- replay and diff --------------------------------------------------------------------- */

/* Both commands' options. */
#define DIFF_OPTIONS(X)                                                                            \
    X(TOLERANCE, 0, "tolerance", "MODE", V_FORM_INT("ulp:%s", 0, INT64_MAX),                                                           \
      "bitwise, ulp:N, abs:X, rel:Y or abs:X,rel:Y (|a-b| <= X + Y*|b|, "                          \
      "b the expected side)",                                                                      \
      "bitwise")                                                                                   \
    X(NAN, 0, "nan", "equal|differ", V_WORD, "whether two NaNs compare equal", "equal")                    \
    X(MAX_REPORT, 0, "max-report", "N", V_INT(0, 1000000), "differing elements listed per dataset", "10")             \
    X(JSON, 0, "json", NULL, V_NONE, "print the report as one JSON object", NULL)                          \
    X(JUNIT, 0, "junit", "FILE", V_OUT, "also write JUnit XML, one testcase per compared dataset", NULL)

#define DIFF_ONLY_OPTIONS(X)                                                                       \
    X(ALL_ATTRIBUTES, 0, "all-attributes", NULL, V_NONE,                                                   \
      "also compare created and producer_version of ppv files", NULL)                              \
    X(THREADS, 0, "threads", "N", V_INT(1, 8),                                                                  \
      "threads that scan contiguous datasets, 1..8 (same report for any N)", "one per CPU")

/* diff only. */
#define IGNORE_ATTR_OPTIONS(X)                                                                     \
    X(IGNORE_ATTR, 0, "ignore-attr", "NAME", V_TEXT,                                                       \
      "leave attributes called NAME out, on every object (shell "                                  \
      "wildcards such as '*seed'; repeatable, up to 64)",                                          \
      NULL)

/* Both commands. */
#define EXCLUDE_OPTIONS(X)                                                                         \
    X(EXCLUDE, 0, "exclude", "PATH", V_TEXT,                                                               \
      "leave the object at the absolute PATH and everything below it out "                         \
      "(/a/b covers /a/b/c, not /a/bc; shell wildcards per component; "                            \
      "repeatable, up to 64)",                                                                     \
      NULL)

/* ---- conform ---------------------------------------------------------------------------- */

#define CONFORM_OPTIONS(X)                                                                         \
    X(JSON, 0, "json", NULL, V_NONE, "print the report as one JSON object", NULL)                          \
    X(JUNIT, 0, "junit", "FILE", V_OUT, "also write JUnit XML, one testcase per check", NULL)             \
    X(MAX_REPORT, 0, "max-report", "N", V_INT(0, 1000000), "violations listed (all are counted)", "100")            \
    X(STRICT, 0, "strict", NULL, V_NONE,                                                                   \
      "a field or object the contract and the format do not define is a violation (without it, "  \
      "such fields are counted and named, as a receiver filters them out)",                        \
      NULL)                                                                                        \
    X(OVERLAP, 0, "overlap", NULL, V_NONE,                                                                 \
      "also measure the contract's overlap metric from the event log's times and the results' "   \
      "tB_ms (OverlapScore = median hidden/min(stage0, stage1) after 10 warm-up chunks); below "  \
      "0.30 is a violation",                                                                       \
      NULL)                                                                                        \
    X(MEM_CAP, 0, "mem-cap", "BYTES[,BYTES...]", V_FORM_BYTES("%s", 1, V_BYTES_MAX),                   \
      "check each rank's recorded memory (/inference/memory: its peak and samples) against a "    \
      "cap (one for every rank, or one each from rank 0): a rank over it is a violation "         \
      "(PPV-MEMORY); a recording without memory samples is exit 2",                               \
      NULL)

#define REPLAY_ONLY_OPTIONS(X)                                                                     \
    X(PERTURB, 0, "perturb", NULL, V_NONE,                                                                 \
      "flip one bit of the re-run (a gradient, or an inference recording's first latents_out), "   \
      "to watch the comparison fail",                                                              \
      NULL)                                                                                        \
    X(MESH, 0, "mesh", "N", V_INT(1, 64),                                                                        \
      "inference recordings: replay on a mesh of N ranks instead of the recorded one (the "        \
      "bits must not change)",                                                                     \
      "the recorded mesh")                                                                         \
    X(GENERATOR, 0, "generator", "builtin|FILE.so|FILE.py", V_TEXT,                                        \
      "inference recordings: the generator to re-run with; it must declare the recorded name "    \
      "and version (its settings come from the recording)",                                        \
      "builtin")                                                                                   \
    X(CALL_TIMEOUT, 0, "call-timeout", "SECONDS", V_SECONDS(0, 1e6),                                                  \
      "inference recordings: the longest one call into the generator may run its own code; "     \
      "then the replay ends as PPV-GENERATOR naming the call, exit 1 (0: no bound)",             \
      "300")                                                                                       \
    X(DEVICE, 0, "device", "cpu|cuda", V_WORD,                                                             \
      "where the replayed model's kernels run (a recording made on the CPU replays on the GPU "    \
      "bit for bit, and the reverse); exit 2 if CUDA is not usable here",                          \
      "cpu")

#define REPLAY_TRANSPORT_OPTIONS(X)                                                                \
    X(TRANSPORT, 0, "transport", "mock|mpi|nccl", V_WORD,                                                  \
      "where a training recording re-runs: mock, mpi or nccl (one process per rank, started by "   \
      "mpirun -np RANKS; rank 0 prints the comparison), whatever it was recorded on",              \
      "mock")                                                                                      \
    X(TIMEOUT, 0, "timeout", "SECONDS", V_POSITIVE_SECONDS(1e6),                                                            \
      "with --transport mpi or nccl: the longest any call may wait", "60")

/* ---- pp ---------------------------------------------------------------------------------- */

/* pp's options in the order its help prints them: PIPE marks the
 * pipeline's own, which `ppv fuzz pp` takes too (cli.h: PIPE_*, parsed by
 * pp_pipeline_option), X the rest. */
#define PP_OPTIONS(X, PIPE)                                                                        \
    PIPE(MESH, 0, "mesh", "N", V_INT(1, 64),                                                                     \
         "stage-1 ranks: 1 is PP0 (the leader alone), 2 or more PP1 (a leader and "                \
         "workers, tensor-parallel); the built-in generator needs it to divide its heads",         \
         "2")                                                                                      \
    PIPE(GENERATOR, 0, "generator", "builtin|FILE.so|FILE.py", V_TEXT,                                     \
         "the model the mesh runs: ppv's own, or a plug-in (ppv_generator.h; a .py module runs "   \
         "in an embedded Python)",                                                                 \
         "builtin")                                                                                \
    PIPE(GENERATOR_PARAMS, 0, "generator-params", "K=V[,K=V...]", V_TEXT,                                  \
         "the generator's settings, passed to it as text; the built-in's are layers, d_model, "    \
         "n_heads, d_ff and seed",                                                                 \
         "layers=2,d_model=32,n_heads=4,d_ff=64,seed=1")                                           \
    PIPE(FRAME, 0, "frame", "HxW", V_FORM_INT("%sx32", 16, 4096),                                                                 \
         "a video frame's size in pixels (multiples of 16; the latents are H/8 x W/8)", "32x32")   \
    PIPE(CHUNKS, 0, "chunks", "K", V_INT(1, 1000000), "chunks stage 0 asks for (3 latent frames each)", "8")          \
    PIPE(STEPS, 0, "steps", "S", V_INT(1, 1000),                                                                   \
         "denoising steps per chunk: generator calls = S, plus 1 with KV recompute", "4")          \
    PIPE(KV, 0, "kv", "stash|recompute", V_WORD,                                                           \
         "stash: the mesh keeps each chunk's K/V; recompute: stage 0 sends context frames and "    \
         "the mesh rebuilds the cache with one generator call (R0a)",                              \
         "stash")                                                                                  \
    PIPE(RECOMPUTE_EVERY, 0, "recompute-every", "E", V_INT(1, 1000000),                                               \
         "with --kv recompute: the chunks j of an epoch with j % E == 0, "                         \
         "j > 0, recompute",                                                                       \
         "1")                                                                                      \
    PIPE(KV_WINDOW, 0, "kv-window", "F", V_INT(3, 3000),                                                           \
         "latent frames the KV cache keeps (a multiple of 3); older ones are "                     \
         "evicted",                                                                                \
         "6")                                                                                      \
    PIPE(D_IN, 0, "d-in", "D", V_INT(1, 1024), "stage 0's bound on envelopes in flight to the mesh", "2")          \
    PIPE(D_OUT, 0, "d-out", "D", V_INT(1, 1024), "stage 0's bound on results waiting to be decoded", "2")          \
    PIPE(HARD_CUT_AT, 0, "hard-cut-at", "K[,K...]", V_FORM_INT("%s", 1, 999999),                                                \
         "hard cuts before these chunks: stage 0 drains what is in "                               \
         "flight, bumps cache_epoch and starts a new stream (init_cache)",                         \
         NULL)                                                                                     \
    PIPE(INJECT, 0, "inject", "NAME|list", V_WORD,                                                         \
         "put in a fault of the break-it matrix; exit 0 when it is caught as "                     \
         "it must be; 'list' prints them all with what each must produce",                         \
         NULL)                                                                                     \
    PIPE(SEED_BUG, 0, "seed-bug", "NAME|list", V_WORD,                                                     \
         "run a deliberately broken variant of the reference, for measuring the explorer; "       \
         "'list' prints them with the options that show each",                                    \
         NULL)                                                                                     \
    X(POLICY, 0, "policy", "rr|random|pct[:DEPTH]", V_FORM_INT("pct:%s", 1, 64), "scheduling policy of the mock world", "rr")   \
    X(SEED, 0, "seed", "N", V_INT(0, INT64_MAX), "seed of the random and pct policies", "0")                            \
    PIPE(WATCHDOG_STEPS, 0, "watchdog-steps", "N", V_INT(1, 2000000000),                                                 \
         "scheduler steps without progress that end a wait as a hang", "100000")                   \
    PIPE(CALL_TIMEOUT, 0, "call-timeout", "SECONDS", V_SECONDS(0, 1e6),                                               \
         "the longest one call into the generator may run its own code (its waits in ppv's "       \
         "collectives do not count); then the run ends as PPV-GENERATOR naming the call, exit 1 "  \
         "(0: no bound)",                                                                          \
         "300")                                                                                    \
    X(REPEAT, 0, "repeat", "N", V_INT(1, 1000),                                                                    \
      "run the same configuration N times, each in fresh generator state, and compare every "      \
      "result's output digest with the first run's: a generator that is not deterministic fails " \
      "(exit 1), naming the first call that differs (--record and --trace-out keep the first run)", \
      "1")                                                                                         \
    X(RECORD, 0, "record", "FILE.h5", V_OUT,                                                              \
      "write every envelope and result in call order, with the mesh's "                            \
      "setup, as an inference recording (temporary name, then renamed)",                           \
      NULL)                                                                                        \
    X(TRACE_OUT, 0, "trace-out", "FILE", V_OUT,                                                           \
      "write the run's scheduler decisions (a replayable trace)", NULL)                            \
    X(REPLAY, 0, "replay", "TRACE", V_IN,                                                                \
      "run exactly the interleaving of a trace (ppv pp --trace-out, ppv fuzz --out); a "         \
      "failure's trace fails again, exit 1, or says it no longer fails or diverges",              \
      NULL)                                                                                        \
    X(COMPARE_KV, 0, "compare-kv", NULL, V_NONE,                                                           \
      "run KV stash and KV recompute and compare caches and outputs (bitwise "                     \
      "equal unless the window evicted frames)",                                                   \
      NULL)                                                                                        \
    PIPE(CONTROL_ONLY, 0, "control-only", NULL, V_NONE,                                                    \
         "skip the model's compute (a call passes its latents through) and "                       \
         "keep every message and collective: the control plane alone",                             \
         NULL)                                                                                     \
    PIPE(POLL, 0, "poll", NULL, V_NONE,                                                                    \
         "stage 0 probes the link before each move and takes a result as soon as "                 \
         "it has arrived (a receive thread's behaviour): its moves depend on the interleaving, "   \
         "its output must not",                                                                    \
         NULL)                                                                                     \
    PIPE(ENVELOPE_DIGEST, 0, "envelope-digest", "on|off", V_WORD,                                          \
         "on: stage 0 puts envelope_digest_i64 (a digest of the other fields and the tensors) "    \
         "in every INFER and the leader refuses one that lacks it or does not match "              \
         "(PPV-ENVELOPE), before any collective; off: a contract without it, where a bit flipped " \
         "in an envelope's tensors on the way goes unseen",                                        \
         "on")                                                                                     \
    PIPE(HEARTBEAT, 0, "heartbeat", "SECONDS", V_POSITIVE_SECONDS(1e6),                                                     \
         "stage 0 sends a NOOP whenever this long has passed since it last sent (between its "     \
         "steps: it is one thread); every header restarts the mesh's --worker-watchdog. The "     \
         "transport's clock: virtual seconds on the mock",                                        \
         NULL)                                                                                     \
    PIPE(COST, 0, "cost", "decode=N,call=M", V_FORM_INT("decode=%s,call=1", 0, 1000000),                                                     \
         "virtual time on the mock (a microsecond a scheduler step): a decode costs N steps of "   \
         "stage 0, a generator call M steps of each mesh rank, so the overlap metric (--json's "   \
         "overlap) measures how the two stages interleave; not on mpi or nccl (wall time)",       \
         "decode=0,call=0")                                                                        \
    PIPE(FINGERPRINT_EVERY, 0, "fingerprint-every", "N", V_INT(0, 1000000),                                           \
         "shard fingerprints (OM-12): every mesh rank fingerprints its weight shard at start (no " \
         "two alike), on every init_cache and every N chunks (each unchanged, no two alike); "     \
         "PPV-FINGERPRINT otherwise. 0: none",                                                     \
         "0")                                                                                      \
    X(DEVICE, 0, "device", "cpu|cuda", V_WORD,                                                             \
      "where the generator's kernels run: cuda runs every one on the GPU with the CPU's bits "     \
      "(a check, not a fast path); exit 2 if CUDA is not usable here",                             \
      "cpu")                                                                                       \
    X(JSON, 0, "json", NULL, V_NONE, "print the report as one JSON object", NULL)                          \
    X(PLAN, 0, "plan", NULL, V_NONE,                                                                      \
      "predict every rank's peak bytes and what holds them from the buffers' shapes, without "    \
      "running anything (docs/memory.md); equal to a run's measure on the mock",                 \
      NULL)                                                                                        \
    X(MODEL, 0, "model", "SPEC|FILE", V_PP_MODEL,                                                         \
      "with --plan: the built-in generator's architecture at other sizes: layers, d_model, "      \
      "n_heads, d_ff, cond_dim, cond_len and dtype (fp32, bf16 or fp16), key=value items, "        \
      "comma-separated or one a line in FILE",                                                     \
      "the built-in's, fp32")                                                                      \
    X(MEMORY_SVG, 0, "memory-svg", "FILE", V_OUT,                                                       \
      "draw each rank's bytes over the run's time (the mock's virtual clock) as SVG, with each "  \
      "peak, the hard cuts and stage 0's phases marked",                                           \
      NULL)                                                                                        \
    X(SWEEP, 0, "sweep", "d=D[,D...]", V_FORM_INT("d=%s,2,4", 1, 1024),                                \
      "run once for each depth D (D_in = D_out = D) and print a table: OverlapScore and the "      \
      "mesh's idle time (under --cost), and each rank's peak bytes; exit 1 if a run fails or "     \
      "passes --mem-cap",                                                                          \
      NULL)                                                                                        \
    X(MEM_CAP, 0, "mem-cap", "BYTES[,BYTES...]", V_FORM_BYTES("%s", 1, V_BYTES_MAX),                   \
      "exit 1 when a rank's peak passes its cap (one for every rank, or one each from rank 0), "   \
      "naming the first, by how much, the chunk, call and phase, and what it held; with --plan "  \
      "too",                                                                                       \
      NULL)                                                                                        \
    X(WORKER_WATCHDOG, 0, "worker-watchdog", "SECONDS", V_POSITIVE_SECONDS(1e6),                                            \
      "with --transport mpi or nccl: how long a mesh rank waits for the next envelope (a "         \
      "heartbeat counts) before it ends the job naming the last header it saw; shorter than "    \
      "--timeout, longer than --heartbeat",                                                        \
      NULL)

#define PP_TRANSPORT_OPTIONS(X)                                                                    \
    X(TRANSPORT, 0, "transport", "mock|mpi|nccl", V_WORD,                                                  \
      "where the ranks run: mock, mpi or nccl (stage 0 and the mesh one process each, started "    \
      "by mpirun -np 1+MESH; rank 0 prints the report and writes --record's file; nccl takes "     \
      "no --poll)",                                                                                \
      "mock")                                                                                      \
    X(TIMEOUT, 0, "timeout", "SECONDS", V_POSITIVE_SECONDS(1e6),                                                            \
      "with --transport mpi or nccl: the longest any call may wait; then the rank reports the "    \
      "hang and the job ends with exit 1",                                                         \
      "60")

/* ---- fuzz -------------------------------------------------------------------------------- */

#define FUZZ_OPTIONS(X)                                                                            \
    X(RUNS, 0, "runs", "N", V_INT(1, 1000000000), "runs to make (the round-robin reference is the first)",               \
      "1000 (dfs: 100000), or --time")                                                             \
    X(TIME, 0, "time", "SECONDS", V_POSITIVE_SECONDS(1e6), "explore for this long instead", NULL)                           \
    X(STRATEGY, 0, "strategy", "random|pct|portfolio|dfs", V_WORD,                                         \
      "the scheduler's decisions: random at every step, PCT (change points over the "              \
      "reference run's length), runs alternating random and PCT at depths 2..--pct-depth, or "     \
      "dfs: every class of equivalent interleavings once (partial-order reduction and sleep "      \
      "sets; it says whether it covered them all)",                                                \
      "portfolio")                                                                                 \
    X(PCT_DEPTH, 0, "pct-depth", "D", V_INT(1, 64), "PCT's depth (D-1 change points; not for dfs)", "3")         \
    X(JOBS, 0, "jobs", "J", V_INT(1, 64),                                                                        \
      "worker threads; runs are handed out in order and the first failing run is reported, so "    \
      "the verdict does not depend on J (dfs is one search: 1; py: a zygote a job, each kept to "   \
      "a CPU)",                                                                                    \
      "1")                                                                                         \
    X(FAULTS, 0, "faults", "LIST", V_WORD,                                                                 \
      "put one fault in every run but the reference, the kinds in turn, at a send drawn from the " \
      "seed: drop, duplicate, corrupt, kill (a message lost, delivered twice, one bit flipped; "   \
      "the sending rank dead: the run must end as the reference does or fail with a named "        \
      "failure, never complete with other output), delay (the message arrives 64 steps late), "    \
      "eager (its link buffers from then on: masking) and, for pp, cut (a hard cut before a "      \
      "drawn chunk): these three must change nothing (the cut: the output of the round-robin "     \
      "run with that cut)",                                                                        \
      "none")                                                                                      \
    X(SEED, 0, "seed", "N", V_INT(0, INT64_MAX), "run i's policy seed is N + i (not for dfs, which draws nothing)",     \
      "0")                                                                                         \
    X(OUT, 0, "out", "DIR", V_DIR, "on a failure, write DIR/failing.trace and DIR/minimal.trace", NULL)   \
    X(JSON, 0, "json", NULL, V_NONE, "print the report as one JSON object", NULL)                          \
    X(JUNIT, 0, "junit", "FILE", V_OUT,                                                                   \
      "also write a JUnit XML report (the exploration as one test case; dfs "                      \
      "adds one for its coverage)",                                                                \
      NULL)

/* A schedule target's options. */
#define FUZZ_SCHEDULE_OPTIONS(X)                                                                   \
    X(SEMANTICS, 0, "semantics", "S", V_SEMANTICS, "a schedule or py target: send semantics", "rendezvous")     \
    X(RECOMPUTE, 0, "recompute", "none|all|S,...", V_WORD, "a schedule target: stages recomputed", "none") \
    X(LAYERS, 0, "layers", "N", V_INT(1, 4096), "a schedule target: model layers", "4")                            \
    X(WIDTH, 0, "width", "C", V_INT(4, 4096), "a schedule target: model width", "32")                              \
    X(WATCHDOG, 0, "watchdog", "STEPS", V_INT(1, INT64_MAX),                                                            \
      "a schedule or py target: steps without progress that make a "                              \
      "hang",                                                                                      \
      "100000")

/* A Python target's options (ppv fuzz py FILE.py:FUNCTION). */
#define FUZZ_PY_OPTIONS(X)                                                                         \
    X(RANKS, 'n', "ranks", "N", V_INT(1, 64), "py: the world's ranks, each a process of its own (required)", NULL)    \
    X(RANKS_AS, 0, "ranks-as", "processes|threads", V_WORD,                                                    \
      "py: every rank a process forked afresh each run from one import (module state its own), "  \
      "or a thread of one interpreter (faster to start; module state shared by ranks and runs)",  \
      "processes")                                                                                 \
    X(IDLE, 0, "idle", "SECONDS", V_POSITIVE_SECONDS(86400),                                                                  \
      "py: wall time a rank may run between two ppv.dist calls before the run fails (a rank "      \
      "that computes, sleeps or waits on anything but ppv)",                                       \
      "10")                                                                                        \
    X(REPLAY, 0, "replay", "TRACE", V_IN,                                                                \
      "py: run a trace ppv fuzz py wrote (--out) once, and say whether it fails again", NULL)

/* ---- launch ------------------------------------------------------------------------------ */

#define LAUNCH_OPTIONS(X)                                                                          \
    X(RANKS, 'n', "ranks", "N", V_INT(1, 1024), "copies of COMMAND to start, ranks 0 to N-1 (required)", NULL)

#endif
