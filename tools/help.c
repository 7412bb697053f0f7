/* help.c - every command's help, defined once: `ppv help CMD`, `ppv CMD
 * --help` and the manual pages (`ppv man CMD`) are printed from this table.
 *
 * An option's line says its argument, what it does and its default; a test
 * runs every listed option through its command's parser, so the table
 * cannot name an option the command does not take.
 */
#include <string.h>

#include "cli.h"

#define END_OPTIONS                                                                                \
    { NULL, NULL, NULL, NULL }

static const help_option gen_options[] = {
    {"-p, --ranks", "N", "number of ranks (required)", NULL},
    {"-m, --microbatches", "N", "number of microbatches (required)", NULL},
    {"-v, --stages-per-rank", "V", "stages per rank",
     "the kind's own: 1, or 2 for zbv, v-half, "
     "v-min, dualpipev and interleaved-1f1b"},
    {"--comms", NULL,
     "write the schedule lowered with SEND/RECV actions (completes under "
     "every send semantics)",
     "compute only"},
    {"-o, --output", "FILE", "write to FILE (temporary name, then renamed)", "standard output"},
    {"--format", "csv|native", "PyTorch's CSV or ppv's native format", "csv"},
    {"--costs", "F,B,W[,C]",
     "times of a forward, a full backward, a weight backward and a message: what --comms "
     "lowers with and what auto minimises (auto: a rank's whole share of the model, so a "
     "kind with V stages a rank runs each action at 1/V of them); given to a named kind, "
     "each action's (as check takes them), and the kind is tuned to them: for zb-h1, zb-h2 "
     "and zbv also the zero-bubble authors' cost-aware heuristic, then the local search, no "
     "rank above the kind's own peak",
     "1,2,1,0; a named kind untuned"},
    {"--cap", "A",
     "auto: at most A activations on any rank (whole microbatches, as check counts them)",
     "no cap"},
    {"--budget", "N",
     "auto, or a kind tuned with --costs: schedules the local search may check (0: no bound)",
     "2000"},
    {"--time-limit", "S",
     "auto, or a kind tuned with --costs: stop the search after S seconds (a safety stop: a "
     "result it cuts short depends on the machine, and says so)",
     "60"},
    {"--model", "SPEC|FILE",
     "auto: weigh each candidate's bytes a rank for this GPT-style model (as check --model)", NULL},
    {"--mem-cap", "BYTES",
     "auto, with --model: every rank's weights, gradients, optimizer state and peak "
     "activations within BYTES (K, M, G suffixes)",
     "no cap"},
    {"--max-memory", "BYTES", "refuse sizes whose schedule would need more (K, M, G suffixes)",
     "this machine's memory"},
    END_OPTIONS};

static const help_option check_options[] = {
    {"--semantics", "S",
     "send semantics: eager, rendezvous or eager:BYTES (eager below BYTES, "
     "rendezvous from there; K, M, G suffixes)",
     "rendezvous"},
    {"--costs", "F,B,W[,C]",
     "time of a forward, a full backward, a weight backward and a "
     "message, in cost units; a backward-for-inputs costs B-W",
     "1,2,1,0"},
    {"--mem", "UNIT[,IFRAC[,STASH]]",
     "activation memory of one forward; the fraction a "
     "backward-for-inputs keeps; a stashed input (recompute)",
     "0,0,0; a UNIT of 0 means ranks/stages"},
    {"--msg-bytes", "N", "size of one message, for eager:BYTES", "8388608"},
    {"--dialect", "auto|current|legacy", "PyTorch CSV dialect (legacy: B meant I, BW meant B)",
     "auto"},
    {"--json", NULL, "print the report as one JSON object", NULL},
    {"--junit", "FILE",
     "also write the checks as JUnit XML (one testcase per rank for "
     "deadlock, one for the structure)",
     NULL},
    {"--lowered-out", "FILE",
     "write the checked schedule (lowered, for a compute-only file) as "
     "CSV",
     NULL},
    {"--max-memory", "BYTES",
     "refuse inputs whose estimated memory exceeds BYTES (K, M, G "
     "suffixes)",
     "this machine's physical memory"},
    END_OPTIONS};

static const help_option check_only_options[] = {
    {"--model", "SPEC|FILE",
     "also report each rank's memory in bytes (weights, gradients, optimizer state, peak "
     "activations) for a GPT-style model: key=value items, comma-separated or one a line in "
     "FILE: layers, hidden, heads, seq, vocab, mbs, dtype, optimizer, tp, sp, recompute "
     "(spec/memory-model.md)",
     NULL},
    {"--mem-cap", "BYTES[,BYTES...]",
     "with --model: exit 1 when a rank needs more (one cap for every rank, or one for each), "
     "naming the first such rank, by how much, and the action where its activations peak",
     NULL},
    END_OPTIONS};

static const help_option show_options[] = {
    {"--svg", "OUT", "write an SVG timeline (ranks as rows, a time axis in cost units)", NULL},
    {"--chrome-trace", "OUT",
     "write Chrome-trace JSON (open in Perfetto); one cost unit is "
     "shown as 1 ms",
     NULL},
    END_OPTIONS};

static const help_option run_options[] = {
    {"--semantics", "S", "send semantics: eager, rendezvous or eager:BYTES", "rendezvous"},
    {"--policy", "rr|random|pct[:DEPTH]",
     "scheduling policy of the mock world; pct (depth 3 by default) draws its DEPTH-1 change "
     "points over the run's length, measured by a round-robin run first",
     "rr"},
    {"--seed", "N", "seed of the random and pct policies", "0"},
    {"--recompute", "POLICY|S:POLICY|S,...",
     "what stages keep for the backward: none (stash), full|all (the stage input; the forward "
     "runs again before the backward), selective (all but the attention cores; the backward "
     "rebuilds them a layer at a time), layers:K (the input of every K-th layer; the backward "
     "rebuilds K layers at a time), mb:N (stash while the rank holds fewer than N stashed "
     "forwards, full beyond); per stage as S:POLICY, a bare S meaning full",
     "none"},
    {"--replay", "TRACE", "run exactly the interleaving of a written trace", NULL},
    {"--layers", "N", "model layers (raised to the stage count)", "4"},
    {"--width", "C", "model width, a multiple of the heads; the MLP is 2C wide", "32"},
    {"--watchdog", "STEPS", "scheduler steps without progress that make a hang", "100000"},
    {"--device", "cpu|cuda",
     "where the model's kernels run: cuda runs every one on the GPU with the CPU's bits (inputs "
     "and outputs copied each op: a check, not a fast path); exit 2 if CUDA is not usable here",
     "cpu"},
    {"--perturb", NULL, "flip the lowest bit of one gradient, to watch a comparison fail", NULL},
    {"--json", NULL, "print the report as one JSON object", NULL},
    {"--max-memory", "BYTES", "refuse inputs whose estimated memory exceeds BYTES",
     "this machine's physical memory"},
    END_OPTIONS};

static const help_option gemm_option[] = {
    {"--gemm", "reference|cublas",
     "with --device cuda: cublas runs the matmuls on cuBLAS (deterministic run to run, pedantic "
     "math, no atomics); they sum in cuBLAS's order, so the gradients are checked against the "
     "reference within a relative 2-norm of 2^-4 and the distance is printed, not bit for bit",
     "reference"},
    END_OPTIONS};

static const help_option transport_options[] = {
    {"--transport", "mock|mpi|nccl",
     "where the ranks run: mock (every rank a coroutine in this process, under --policy), mpi "
     "or nccl (one process per rank, or per GPU, started by mpirun -np RANKS; rank 0 prints "
     "the report); on mpi rendezvous sends are MPI_Issend, eager ones buffered (a copy sent "
     "with MPI_Isend); nccl sends as NCCL does",
     "mock"},
    {"--timeout", "SECONDS",
     "with --transport mpi or nccl: the longest any call may wait; then the rank reports the "
     "hang (its action, the peer), nccl aborts its communicator, and the job ends with exit 1",
     "60"},
    {"--allow-unsafe", NULL,
     "with --transport mpi or nccl: launch a schedule that the check finds deadlocks under the "
     "semantics, so the watchdog shows the hang (without it the run is refused, exit 1)",
     NULL},
    END_OPTIONS};

static const help_option replay_transport[] = {
    {"--transport", "mock|mpi|nccl",
     "where a training recording re-runs: mock, mpi or nccl (one process per rank, started by "
     "mpirun -np RANKS; rank 0 prints the comparison), whatever it was recorded on",
     "mock"},
    {"--timeout", "SECONDS", "with --transport mpi or nccl: the longest any call may wait", "60"},
    END_OPTIONS};

static const help_option pp_transport[] = {
    {"--transport", "mock|mpi|nccl",
     "where the ranks run: mock, mpi or nccl (stage 0 and the mesh one process each, started "
     "by mpirun -np 1+MESH; rank 0 prints the report and writes --record's file; nccl takes "
     "no --poll)",
     "mock"},
    {"--timeout", "SECONDS",
     "with --transport mpi or nccl: the longest any call may wait; then the rank reports the "
     "hang and the job ends with exit 1",
     "60"},
    END_OPTIONS};

static const help_option trace_option[] = {
    {"--trace-out", "FILE", "write every scheduling decision (replay it with --replay)", NULL},
    END_OPTIONS};

static const help_option record_only[] = {
    {"--fail-after", "N",
     "testing: end the process (exit 3) after writing N datasets, to show "
     "that a crash leaves no file",
     NULL},
    {"--term-after", "N",
     "testing: send the process SIGTERM after writing N datasets, to show "
     "that an interrupted record removes its temporary file",
     NULL},
    END_OPTIONS};

static const help_option junit_option[] = {
    {"--junit", "FILE", "also write the checks as JUnit XML", NULL}, END_OPTIONS};

static const help_option diff_options[] = {
    {"--tolerance", "MODE",
     "bitwise, ulp:N, abs:X, rel:Y or abs:X,rel:Y (|a-b| <= X + Y*|b|, "
     "b the expected side)",
     "bitwise"},
    {"--nan", "equal|differ", "whether two NaNs compare equal", "equal"},
    {"--max-report", "N", "differing elements listed per dataset", "10"},
    {"--json", NULL, "print the report as one JSON object", NULL},
    {"--junit", "FILE", "also write JUnit XML, one testcase per compared dataset", NULL},
    END_OPTIONS};

static const help_option diff_only[] = {
    {"--all-attributes", NULL, "also compare created and producer_version of ppv files", NULL},
    {"--threads", "N", "threads that scan contiguous datasets, 1..8 (same report for any N)",
     "one per CPU"},
    END_OPTIONS};

static const help_option ignore_attr_option[] = {
    {"--ignore-attr", "NAME",
     "leave attributes called NAME out, on every object (shell "
     "wildcards such as '*seed'; repeatable, up to 64)",
     NULL},
    END_OPTIONS};

static const help_option exclude_option[] = {
    {"--exclude", "PATH",
     "leave the object at the absolute PATH and everything below it out "
     "(/a/b covers /a/b/c, not /a/bc; shell wildcards per component; "
     "repeatable, up to 64)",
     NULL},
    END_OPTIONS};

static const help_option replay_only[] = {
    {"--perturb", NULL,
     "flip one bit of the re-run (a gradient, or an inference recording's first latents_out), "
     "to watch the comparison fail",
     NULL},
    {"--mesh", "N",
     "inference recordings: replay on a mesh of N ranks instead of the recorded one (the "
     "bits must not change)",
     "the recorded mesh"},
    {"--device", "cpu|cuda",
     "where the replayed model's kernels run (a recording made on the CPU replays on the GPU "
     "bit for bit, and the reverse); exit 2 if CUDA is not usable here",
     "cpu"},
    END_OPTIONS};

static const help_option no_options[] = {END_OPTIONS};

static const help_option *const gen_groups[] = {gen_options, NULL};
static const help_option *const check_groups[] = {check_options, check_only_options, NULL};
static const help_option *const show_groups[] = {show_options, check_options, NULL};
static const help_option pp_options[] = {
    {"--mesh", "N",
     "stage-1 ranks: 1 is PP0 (the leader alone), 2 or more PP1 (a leader and "
     "workers, tensor-parallel); must divide the generator's 4 heads",
     "2"},
    {"--chunks", "K", "chunks stage 0 asks for (3 latent frames each)", "8"},
    {"--steps", "S", "denoising steps per chunk: generator calls = S, plus 1 with KV recompute",
     "4"},
    {"--kv", "stash|recompute",
     "stash: the mesh keeps each chunk's K/V; recompute: stage 0 sends context frames and the "
     "mesh rebuilds the cache with one generator call (R0a)",
     "stash"},
    {"--recompute-every", "E",
     "with --kv recompute: the chunks j of an epoch with j % E == 0, "
     "j > 0, recompute",
     "1"},
    {"--kv-window", "F",
     "latent frames the KV cache keeps (a multiple of 3); older ones are "
     "evicted",
     "6"},
    {"--d-in", "D", "stage 0's bound on envelopes in flight to the mesh", "2"},
    {"--d-out", "D", "stage 0's bound on results waiting to be decoded", "2"},
    {"--hard-cut-at", "K[,K...]",
     "hard cuts before these chunks: stage 0 drains what is in "
     "flight, bumps cache_epoch and starts a new stream (init_cache)",
     NULL},
    {"--inject", "NAME|list",
     "put in a fault of the break-it matrix; exit 0 when it is caught as "
     "it must be; 'list' prints them all with what each must produce",
     NULL},
    {"--policy", "rr|random|pct[:DEPTH]", "scheduling policy of the mock world", "rr"},
    {"--seed", "N", "seed of the random and pct policies", "0"},
    {"--watchdog-steps", "N", "scheduler steps without progress that end a wait as a hang",
     "100000"},
    {"--record", "FILE.h5",
     "write every envelope and result in call order, with the mesh's "
     "setup, as an inference recording (temporary name, then renamed)",
     NULL},
    {"--trace-out", "FILE", "write the run's scheduler decisions (a replayable trace)", NULL},
    {"--replay", "TRACE",
     "run exactly the interleaving of a trace (ppv pp --trace-out, ppv fuzz "
     "--out)",
     NULL},
    {"--compare-kv", NULL,
     "run KV stash and KV recompute and compare caches and outputs (bitwise "
     "equal unless the window evicted frames)",
     NULL},
    {"--control-only", NULL,
     "skip the model's compute (a call passes its latents through) and "
     "keep every message and collective: the control plane alone",
     NULL},
    {"--poll", NULL,
     "stage 0 probes the link before each move and takes a result as soon as "
     "it has arrived (a receive thread's behaviour): its moves depend on the interleaving, its "
     "output must not",
     NULL},
    {"--device", "cpu|cuda",
     "where the generator's kernels run: cuda runs every one on the GPU with the CPU's bits "
     "(a check, not a fast path); exit 2 if CUDA is not usable here",
     "cpu"},
    {"--json", NULL, "print the report as one JSON object", NULL},
    END_OPTIONS};

static const help_option fuzz_options[] = {
    {"--runs", "N", "runs to make (the round-robin reference is the first)",
     "1000 (dfs: 100000), or --time"},
    {"--time", "SECONDS", "explore for this long instead", NULL},
    {"--strategy", "random|pct|portfolio|dfs",
     "the scheduler's decisions: random at every step, PCT (change points over the "
     "reference run's length), runs alternating random and PCT at depths 2..--pct-depth, or "
     "dfs: every class of equivalent interleavings once (partial-order reduction and sleep "
     "sets; it says whether it covered them all)",
     "portfolio"},
    {"--pct-depth", "D", "PCT's depth (D-1 change points; not for dfs)", "3"},
    {"--jobs", "J",
     "worker threads; runs are handed out in order and the first failing run is reported, so "
     "the verdict does not depend on J (dfs is one search: 1)",
     "1"},
    {"--faults", "LIST",
     "put one fault in every run but the reference, the kinds in turn, at a send drawn from the "
     "seed: drop, duplicate, corrupt, kill (a message lost, delivered twice, one bit flipped; "
     "the sending rank dead: the run must end as the reference does or fail with a named "
     "failure, never complete with other output), delay (the message arrives 64 steps late), "
     "eager (its link buffers from then on: masking) and, for pp, cut (a hard cut before a "
     "drawn chunk): these three must change nothing (the cut: the output of the round-robin "
     "run with that cut)",
     "none"},
    {"--seed", "N", "run i's policy seed is N + i (not for dfs, which draws nothing)", "0"},
    {"--out", "DIR", "on a failure, write DIR/failing.trace and DIR/minimal.trace", NULL},
    {"--json", NULL, "print the report as one JSON object", NULL},
    {"--junit", "FILE", "also write a JUnit XML report (the exploration as one test case; dfs "
     "adds one for its coverage)", NULL},
    END_OPTIONS};
static const help_option fuzz_schedule_options[] = {
    {"--semantics", "S", "a schedule target: send semantics", "rendezvous"},
    {"--recompute", "none|all|S,...", "a schedule target: stages recomputed", "none"},
    {"--layers", "N", "a schedule target: model layers", "4"},
    {"--width", "C", "a schedule target: model width", "32"},
    {"--watchdog", "STEPS", "a schedule target: steps without progress that make a hang",
     "100000"},
    END_OPTIONS};

static const help_option *const run_groups[] = {run_options,  transport_options, gemm_option,
                                                trace_option, junit_option,      NULL};
static const help_option *const pp_groups[] = {pp_options, pp_transport, NULL};
static const help_option *const fuzz_groups[] = {fuzz_options, fuzz_schedule_options, NULL};
static const help_option launch_options[] = {
    {"-n, --ranks", "N", "copies of COMMAND to start, ranks 0 to N-1 (required)", NULL},
    END_OPTIONS};
static const help_option *const launch_groups[] = {launch_options, NULL};
static const help_option *const vr_groups[] = {run_options, junit_option, NULL};
static const help_option *const record_groups[] = {run_options, transport_options, trace_option,
                                                   record_only, NULL};
static const help_option *const replay_groups[] = {diff_options, exclude_option, replay_only,
                                                   replay_transport, NULL};
static const help_option *const diff_groups[] = {diff_options, diff_only, ignore_attr_option,
                                                 exclude_option, NULL};
static const help_option *const none_groups[] = {no_options, NULL};

static const char *const gen_examples[] = {
    "ppv gen dualpipev -p 4 -m 10 -o dpv.csv",  "ppv gen zbv -p 4 -m 8 --comms -o zbv_comms.csv",
    "ppv gen 1f1b -p 4 -m 8 --format native",   "ppv gen auto -p 4 -m 8 --cap 3 --costs 1,2,1,0",
    "ppv gen zb-h2 -p 4 -m 16 --costs 1,2,1,1", NULL};
static const char *const check_examples[] = {
    "ppv check dpv.csv", "ppv check zbv_comms.csv --semantics eager:4M --json",
    "ppv gen 1f1b -p 4 -m 8 | ppv check - --junit check.xml",
    "ppv check dpv.csv --model layers=24,hidden=2048,heads=16,seq=2048,vocab=50257 --mem-cap 40G",
    NULL};
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
    "ppv fuzz checker --time 60 --out disagreement", NULL};
static const char *const vr_examples[] = {
    "ppv verify-recompute zbv.csv", "ppv verify-recompute zbv.csv --recompute 0,3 --json",
    "ppv verify-recompute zbv.csv --recompute selective --recompute layers:1 --recompute mb:2",
    NULL};
static const char *const record_examples[] = {"ppv record g.h5 zbv.csv --policy random --seed 1",
                                              "ppv record g.h5 zbv.csv --trace-out g.trace --json",
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

static const help_command commands[] = {
    {"gen", "KIND -p RANKS -m MICROBATCHES [options]", "write a schedule",
     "Writes a schedule of KIND: gpipe, 1f1b, interleaved-1f1b, zb-h1, zb-h2, zbv, v-half, "
     "v-min or dualpipev; one of PyTorch's schedule classes, action for action: "
     "pytorch-gpipe, pytorch-1f1b (the valid order), pytorch-looped-bfs, "
     "pytorch-interleaved-1f1b, pytorch-interleaved-zb, pytorch-zbv or pytorch-dualpipev; "
     "or auto. Without --comms it is PyTorch's compute-only CSV; with it, "
     "the schedule lowered with send/recv actions. Sizes whose schedule would not fit in "
     "memory are refused with the estimate. auto writes the schedule with the smallest "
     "makespan ppv finds under --costs with every rank within --cap: the best of every kind "
     "at every stage count (and a greedy built to the cap), the four best then improved by "
     "swapping adjacent actions while the check passes; a line on standard error says what it "
     "chose. "
     "A named kind given --costs is tuned to them the same way, within its own peak. "
     "It is deterministic: the same options give the same schedule.",
     gen_groups, gen_examples},
    {"check", "FILE [options]", "verify a schedule",
     "Checks a schedule (PyTorch CSV in either dialect, or ppv's native format; - reads "
     "standard input): structure, message matching, deadlock under the send semantics, peak "
     "activation memory, makespan and bubble ratio. A compute-only file is lowered with "
     "send/recv first. The bubble ratio is the zero-bubble papers' measure: 1 - (compute "
     "time summed over ranks) / (ranks x the longest span from a rank's first compute to its "
     "last); the idle time before a rank's first compute and after its last is not counted, "
     "since the next iteration's work fills it.",
     check_groups, check_examples},
    {"show", "FILE [options]", "draw the simulated schedule",
     "Simulates the schedule as check does and draws it: a text timeline on standard output, "
     "or an SVG and a Chrome trace. Under each rank's lane the SVG draws the activations it "
     "holds over time, as check counts them for its peak (one forward's activations a unit), "
     "the peak named; the Chrome trace carries the same as a counter track a rank. Takes "
     "every check option.",
     show_groups, show_examples},
    {"run", "SCHEDULE [options]", "run one training step (mock, MPI or NCCL)",
     "Runs one training step of the built-in model, every rank a coroutine on the mock "
     "transport under the deterministic scheduler, and compares the gradients with the "
     "one-rank reference bit for bit and every rank's activation memory with the prediction. "
     "With --transport mpi, under mpirun, every rank is a process and its messages go through "
     "MPI: the same gradients, bit for bit; a schedule the check finds deadlocks is refused "
     "before launch unless --allow-unsafe. "
     "Exit 1 on a deadlock, a hang or any difference. On a terminal, progress is shown on "
     "standard error (not with --json).",
     run_groups, run_examples},
    {"verify-recompute", "SCHEDULE [options]", "compare recompute with stash, bit for bit",
     "Runs the step once stashing every activation and once recomputing every stage (or the "
     "stages --recompute names), and compares the gradients bit for bit; on a difference it "
     "names the first differing gradient by layer, tensor and index. It checks the measured "
     "peaks against the prediction and the forward passes and attention-core rebuilds against "
     "what the schedule implies. --recompute may be given up to 16 times: each policy is "
     "verified in turn, and the exit is 1 when any fails.",
     vr_groups, vr_examples},
    {"pp", "[options]", "run the PP inference pipeline (stage 0 and a mesh) and break it",
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
    {"fuzz", "SCHEDULE|pp|checker [options]",
     "explore interleavings and hand back a minimal reproducer",
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
     "on standard error.",
     fuzz_groups, fuzz_examples},
    {"launch", "-n N -- COMMAND [ARGS...]", "start N ranks of a command without mpirun",
     "Starts N copies of COMMAND, each with PPV_LAUNCH_RANK (0 to N-1), PPV_LAUNCH_SIZE (N) "
     "and PPV_LAUNCH_DIR (a new private folder, removed at the end), on this machine: how "
     "--transport nccl starts without MPI, rank 0 handing its ncclUniqueId to the others "
     "through a file there. When a copy fails, the others are ended (SIGTERM, then SIGKILL "
     "two seconds later). The exit status is the first failure's (128 + the signal for a "
     "copy killed by one), else 0.",
     launch_groups, launch_examples},
    {"record", "OUT.h5 SCHEDULE [options]", "record a run as a golden HDF5 file",
     "Runs the step as run does and writes model, inputs, schedule, options, loss and "
     "gradients to OUT.h5 (temporary name, fsync, rename: a failed run leaves nothing; "
     "SIGINT, SIGTERM and SIGHUP remove the temporary file, and the next record into the "
     "folder removes those of crashed records). With SOURCE_DATE_EPOCH set, the same run "
     "gives the same bytes. "
     "--perturb records the perturbed gradients, so that replaying the file must fail.",
     record_groups, record_examples},
    {"replay", "GOLDEN.h5 [options]", "re-run a golden file and compare",
     "Rebuilds the run from the file alone (weights, inputs, schedule, options), re-runs it "
     "and compares loss and gradients with the recorded ones. An inference recording (ppv pp "
     "--record, tools/ppv_record.py) is replayed with the file as stage 0: the mesh is "
     "rebuilt from the file's setup, fed the recorded envelopes in order, and each result is "
     "compared with the recorded one (latents_out under the tolerance; "
     "observed_generator_calls, mesh_current_start_frame, ok and error_message exactly); the "
     "first differing call is named by call_id and chunk_index. Exit 1 on any difference.",
     replay_groups, replay_examples},
    {"diff", "A.h5 B.h5 [options]", "compare two HDF5 files",
     "Compares two HDF5 files, B the expected side: structure, attributes and every dataset's "
     "values under the tolerance. Exit 0 same, 1 different, 2 error (missing file, not HDF5, "
     "corrupted data caught by the checksums).",
     diff_groups, diff_examples},
    {"demo", "", "the main job on the built-in model",
     "Generates every schedule kind, checks it under every send semantics, runs it on the "
     "engine (stash and recompute against the one-rank reference) and replays the shipped "
     "golden files bit for bit.",
     none_groups, demo_examples},
    {"version", "", "print the version", "Prints ppv's version (also -V and --version).",
     none_groups, version_examples},
    {"help", "[COMMAND]", "print help", "Prints the list of commands, or one command's help.",
     none_groups, help_examples},
    {"man", "[COMMAND]", "print a manual page",
     "Prints the manual page of ppv, or of one command, in roff (what `man` reads).", none_groups,
     man_examples},
    {NULL, NULL, NULL, NULL, NULL, NULL}};

const help_command *help_find(const char *name) {
    for (const help_command *c = commands; c->name; c++)
        if (strcmp(c->name, name) == 0) return c;
    return NULL;
}

const help_command *help_commands(void) {
    return commands;
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

void help_print(const help_command *c, FILE *f) {
    fprintf(f, "usage: ppv %s%s%s\n\n", c->name, c->args[0] ? " " : "", c->args);
    wrap(f, c->description, 0, 0);
    int any = 0;
    for (int g = 0; c->groups[g]; g++)
        for (const help_option *o = c->groups[g]; o->names; o++) {
            if (!any++) fputs("\noptions:\n", f);
            char head[96];
            snprintf(head, sizeof head, "  %s%s%s", o->names, o->arg ? " " : "",
                     o->arg ? o->arg : "");
            fputs(head, f);
            char text[512];
            snprintf(text, sizeof text, "%s%s%s%s", o->text, o->def ? " (default: " : "",
                     o->def ? o->def : "", o->def ? ")" : "");
            int col = (int)strlen(head);
            if (col >= 30) {
                fputc('\n', f);
                col = 0;
            }
            wrap(f, text, 30, col);
        }
    fprintf(f, "%s  -h, --help%*shelp for this command\n", any ? "" : "\noptions:\n", 18, "");
    fputs("\nexamples:\n", f);
    for (int k = 0; c->examples[k]; k++)
        fprintf(f, "  %s\n", c->examples[k]);
    fputs("\nexit codes: 0 the check holds, 1 a problem was found, 2 bad usage or input\n", f);
}

void help_print_overview(FILE *f) {
    fputs("usage: ppv COMMAND [options]   (ppv help COMMAND for one command)\n\ncommands:\n", f);
    for (const help_command *c = commands; c->name; c++)
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

void help_print_man(const help_command *c, FILE *f) {
    char title[64];
    snprintf(title, sizeof title, "PPV%s%s", c ? "-" : "", c ? c->name : "");
    for (char *p = title; *p; p++)
        if (*p >= 'a' && *p <= 'z') *p = (char)(*p - 'a' + 'A');
    fprintf(f, ".TH %s 1 \"\" \"ppv %s\" \"ppv manual\"\n.SH NAME\n", title, PPV_VERSION_STRING);
    if (!c) {
        fputs("ppv \\- deterministic test and verification of pipeline-parallel execution\n"
              ".SH SYNOPSIS\n.B ppv\n\\fICOMMAND\\fR [\\fIoptions\\fR]\n.SH COMMANDS\n",
              f);
        for (const help_command *k = commands; k->name; k++) {
            fprintf(f, ".TP\n.BR ppv\\-%s (1)\n", k->name);
            roff(f, k->summary);
            fputc('\n', f);
        }
    } else {
        fprintf(f, "ppv\\-%s \\- ", c->name);
        roff(f, c->summary);
        fprintf(f, "\n.SH SYNOPSIS\n.B ppv %s\n", c->name);
        roff(f, c->args);
        fputs("\n.SH DESCRIPTION\n", f);
        roff(f, c->description);
        fputs("\n.SH OPTIONS\n", f);
        for (int g = 0; c->groups[g]; g++)
            for (const help_option *o = c->groups[g]; o->names; o++) {
                fputs(".TP\n\\fB", f);
                roff(f, o->names);
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
    if (c) fputs(".SH SEE ALSO\n.BR ppv (1)\n", f);
}
