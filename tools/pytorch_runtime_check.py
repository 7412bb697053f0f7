#!/usr/bin/env python3
"""pytorch_runtime_check.py - ppv's schedules run by PyTorch's own runtime.

For each kind, ppv writes the schedule twice (compute_only, and lowered
with --comms as compute_comms); each file is loaded into PyTorch's
_PipelineScheduleRuntime with _load_csv(path, format), P gloo processes on
this machine's CPUs run one step() on small stages (Linear then Tanh, in
float64), and every parameter gradient is compared with a one-process
reference that runs the microbatches in order and divides by m, as
PyTorch's scale_grads does. Prints a table (kind, format, completed, max
abs difference) and exits 1 on any difference above --atol (0: bitwise)
or any run that failed or hung (each process is killed after --timeout
seconds); exits 0 with a message, having run nothing, where
torch.distributed.pipelining is not installed.

    python3 tools/pytorch_runtime_check.py --ppv build/tools/ppv
    python3 tools/pytorch_runtime_check.py --kinds zbv,dualpipev -p 2 -m 4

Where the machine with PyTorch has no ppv, write the files where ppv is
(--write DIR runs only ppv gen) and check them there (--files DIR).
The reference accumulates each stage's microbatch gradients in the order
the schedule runs that stage's B and W actions (an I accumulates none),
so a correct run is bitwise equal to it whatever the order.
"""
import argparse
import csv
import os
import re
import socket
import subprocess
import sys
import tempfile

DEFAULT_KINDS = ("gpipe,1f1b,interleaved-1f1b,zb-h1,zb-h2,zbv,v-half,v-min,dualpipev,"
                 "pytorch-gpipe,pytorch-1f1b,pytorch-looped-bfs,pytorch-interleaved-1f1b,"
                 "pytorch-interleaved-zb,pytorch-zbv,pytorch-dualpipev")
# ppv's kinds that are PyTorch's classes (--controls runs each class itself)
PYTORCH_CLASS = {
    "pytorch-gpipe": "ScheduleGPipe",
    "pytorch-1f1b": "Schedule1F1B",
    "pytorch-looped-bfs": "ScheduleLoopedBFS",
    "pytorch-interleaved-1f1b": "ScheduleInterleaved1F1B",
    "pytorch-interleaved-zb": "ScheduleInterleavedZeroBubble",
    "pytorch-zbv": "ScheduleZBVZeroBubble",
    "pytorch-dualpipev": "ScheduleDualPipeV",
}
WIDTH, ROWS = 8, 2  # features, rows per microbatch


def have_pipelining():
    try:
        import torch.distributed.pipelining  # noqa: F401
        from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime  # noqa: F401
    except Exception as e:  # ImportError, or a torch built without distributed
        return str(e)
    return None


def stage_module(stage):
    """Stage `stage`'s module: the same weights in every process."""
    import torch
    torch.manual_seed(1000 + stage)
    return torch.nn.Sequential(torch.nn.Linear(WIDTH, WIDTH), torch.nn.Tanh()).double()


def batch(m):
    import torch
    g = torch.Generator().manual_seed(7)
    x = torch.randn(m * ROWS, WIDTH, generator=g, dtype=torch.float64)
    y = torch.randn(m * ROWS, WIDTH, generator=g, dtype=torch.float64)
    return x, y


def loss_fn(out, target):
    import torch
    return torch.nn.functional.mse_loss(out, target)


def stages_of(path):
    """Every stage a row computes, by rank, and the number of stages."""
    cell = re.compile(r"(\d+)(?:F|I|B|W|UNSHARD|RESHARD|REDUCE_GRAD|SEND_F|RECV_F|SEND_B|RECV_B)")
    by_rank = []
    with open(path, newline="") as f:
        for row in csv.reader(f):
            by_rank.append(sorted({int(s) for c in row for s in cell.findall(c)}))
    return by_rank, 1 + max(s for r in by_rank for s in r)


def accumulation_order(path):
    """For each stage, the microbatches in the order its weight gradients
    accumulate: the order of its B and W actions (an I accumulates none),
    those inside a cell such as (0F7;7B3)OVERLAP_F_B included."""
    cell = re.compile(r"^\s*(\d+)([BW])(\d+)\s*$")
    seen = {}
    with open(path, newline="") as f:
        for row in csv.reader(f):
            for c in row:
                inner = c.strip()
                parts = inner[1:inner.index(")")].split(";") if inner.startswith("(") else [c]
                for part in parts:
                    hit = cell.match(part)
                    if hit:
                        seen.setdefault(int(hit[1]), []).append(int(hit[3]))
    return seen


def skip_self_handshake():
    """PipelineStage's first step greets each neighbouring stage's rank with a
    send and a receive, also where that stage is on the same rank (in a V
    placement, stage p-1 and stage p). gloo cannot send to its own rank
    (NCCL can), so such a greeting fails; this drops the greetings a rank
    would send itself, and changes nothing else."""
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage
    greet = PipelineStage._get_init_p2p_neighbors_ops

    def others_only(stage):
        me = dist.get_rank()
        return [op for op in greet(stage) if op.peer != me]
    PipelineStage._get_init_p2p_neighbors_ops = others_only


def scaling(cls):
    """The keyword arguments that make schedule class cls divide the
    gradients by m (scale_grads, from torch 2.7; 2.4 to 2.6 never divide),
    and whether it then does."""
    import inspect
    takes = any("scale_grads" in inspect.signature(c.__init__).parameters for c in cls.__mro__
                if "__init__" in c.__dict__)
    return ({"scale_grads": True}, True) if takes else ({}, False)


def worker(rank, size, path, fmt, m, port, out, skip_self):
    """One rank: load the file into PyTorch's runtime, run a step, save grads."""
    import torch
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage
    torch.set_num_threads(1)
    from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=size)
    if skip_self:
        skip_self_handshake()
    by_rank, nstages = stages_of(path)
    mine = by_rank[rank]
    stages = [PipelineStage(stage_module(s), s, nstages, torch.device("cpu")) for s in mine]
    if fmt == "class":  # PyTorch's own class for this kind, as a control: no file loaded
        import torch.distributed.pipelining.schedules as schedules
        cls = getattr(schedules, PYTORCH_CLASS[os.path.basename(path).split("_")[0]])
        single = issubclass(cls, schedules.PipelineScheduleSingle)
        sched = cls(stages[0] if single else stages, m, loss_fn=loss_fn, **scaling(cls)[0])
    else:
        sched = _PipelineScheduleRuntime(stages, m, loss_fn=loss_fn,
                                         **scaling(_PipelineScheduleRuntime)[0])
        sched._load_csv(path, format=fmt)
    x, y = batch(m)
    args = (x,) if 0 in mine else ()
    target = y if nstages - 1 in mine else None
    sched.step(*args, target=target)
    grads = {st.stage_index: [p.grad.clone() if p.grad is not None else None
                              for p in st.submod.parameters()] for st in stages}
    torch.save(grads, out)
    dist.destroy_process_group()


def reference(nstages, m, order, scaled=True):
    """Each stage's gradients: every microbatch's alone, summed in the order
    the schedule accumulates them (order[stage]), divided by m where the
    schedule scales them (scaled)."""
    mods = [stage_module(s) for s in range(nstages)]
    x, y = batch(m)
    alone = []
    for k in range(m):
        for mod in mods:
            mod.zero_grad(set_to_none=True)
        h = x[k * ROWS:(k + 1) * ROWS]
        for mod in mods:
            h = mod(h)
        loss_fn(h, y[k * ROWS:(k + 1) * ROWS]).backward()
        alone.append([[p.grad.clone() for p in mod.parameters()] for mod in mods])
    want = {}
    for s in range(nstages):
        mbs = order.get(s, [])
        if sorted(mbs) != list(range(m)):
            raise ValueError(f"stage {s} accumulates microbatches {mbs}, not each of 0..{m - 1}")
        total = [g.clone() for g in alone[mbs[0]][s]]
        for k in mbs[1:]:
            for t, g in zip(total, alone[k][s]):
                t += g
        want[s] = [t / m for t in total] if scaled else total
    return want


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


FORMATS = ("compute_only", "compute_comms")


def file_name(kind, fmt):
    return f"{kind}_{fmt}.csv"


def write_file(args, kind, fmt, where):
    """ppv gen's file for (kind, fmt) in `where`: (path, None) or (None, why)."""
    path = os.path.join(where, file_name(kind, fmt))
    gen = [args.ppv, "gen", kind, "-p", str(args.ranks), "-m", str(args.microbatches), "-o", path]
    if fmt == "compute_comms":
        gen.append("--comms")
    r = subprocess.run(gen, capture_output=True, text=True)
    if r.returncode != 0:
        return None, r.stderr.strip()
    return path, None


def run_one(args, kind, fmt, work):
    """(completed, max abs difference or None, what went wrong)."""
    import torch
    ffmt = "compute_only" if fmt == "class" else fmt  # a class row: its stages and order
    if args.files:
        path = os.path.join(args.files, file_name(kind, ffmt))
        if not os.path.exists(path):
            return "no file", None, f"{path} is missing"
    else:
        path, why = write_file(args, kind, ffmt, os.path.join(work, fmt))
        if path is None:
            return "no file", None, why
    by_rank, nstages = stages_of(path)
    if len(by_rank) != args.ranks:
        return "no file", None, f"{path} has {len(by_rank)} rows, not -p {args.ranks}"
    port = free_port()
    procs, outs = [], []
    for rank in range(args.ranks):
        out = os.path.join(work, f"{kind}_{fmt}_{rank}.pt")
        outs.append(out)
        procs.append(subprocess.Popen(
            [sys.executable, __file__, "--worker", str(rank), str(args.ranks), path, fmt,
             str(args.microbatches), str(port), out, str(int(args.skip_self_handshake))],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    logs, hung = [], False
    for p in procs:
        try:
            log, _ = p.communicate(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            hung = True
            for q in procs:
                q.kill()
            log, _ = p.communicate()
        logs.append(log or "")
    failed = hung or any(p.returncode != 0 for p in procs)
    if failed and args.logs:
        os.makedirs(args.logs, exist_ok=True)
        for rank, log in enumerate(logs):
            with open(os.path.join(args.logs, f"{kind}_{fmt}_rank{rank}.log"), "w") as f:
                f.write(log)
    if hung:
        return "hung", None, f"killed after {args.timeout:g} s"
    if failed:
        tail = [line.strip() for log in logs for line in log.splitlines()
                if "Error" in line or "error" in line]
        return "failed", None, tail[-1] if tail else "a rank exited non-zero"
    try:
        from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime
        want = reference(nstages, args.microbatches, accumulation_order(path),
                         scaling(_PipelineScheduleRuntime)[1])
    except ValueError as e:
        return "yes", None, f"no reference: {e}"
    worst = 0.0
    for out in outs:
        for stage, grads in torch.load(out).items():
            for g, w in zip(grads, want[stage]):
                if g is None:
                    return "yes", float("inf"), f"stage {stage} has no gradient"
                worst = max(worst, (g - w).abs().max().item())
    return "yes", worst, ""


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ppv", help="the ppv binary (build/tools/ppv)")
    ap.add_argument("--kinds", default=DEFAULT_KINDS, help="comma-separated kinds")
    ap.add_argument("-p", "--ranks", type=int, default=4, help="ranks, one process each (4)")
    ap.add_argument("-m", "--microbatches", type=int, default=8, help="microbatches (8)")
    ap.add_argument("--atol", type=float, default=0.0,
                    help="largest gradient difference allowed (0: bitwise equal)")
    ap.add_argument("--timeout", type=float, default=120.0,
                    help="seconds before a run's processes are killed as hung (120)")
    ap.add_argument("--jobs", type=int, default=1,
                    help="runs at once, each of -p processes (1)")
    ap.add_argument("--write", metavar="DIR",
                    help="only write ppv's files (KIND_FORMAT.csv) into DIR, and run nothing")
    ap.add_argument("--files", metavar="DIR",
                    help="check the files --write wrote into DIR (no ppv needed)")
    ap.add_argument("--controls", action="store_true",
                    help="also run PyTorch's own class for each pytorch-* kind (format: class)")
    ap.add_argument("--skip-self-handshake", action="store_true",
                    help="drop the first step's greeting a rank sends itself, which gloo "
                         "cannot send (a V placement's stages p-1 and p share a rank)")
    ap.add_argument("--logs", metavar="DIR",
                    help="keep every rank's output of a run that failed or hung in DIR")
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        rank, size, path, fmt, m, port, out, skip_self = sys.argv[2:10]
        worker(int(rank), int(size), path, fmt, int(m), int(port), out, skip_self == "1")
        return 0
    args = ap.parse_args()
    kinds = [k for k in args.kinds.split(",") if k]
    if args.jobs < 1 or args.ranks < 1 or args.microbatches < 1 or not kinds:
        print("pytorch_runtime_check: --jobs, -p and -m must be at least 1, and --kinds "
              "must name a kind", file=sys.stderr)
        return 2
    if args.write and args.files:
        print("pytorch_runtime_check: --write and --files exclude each other", file=sys.stderr)
        return 2
    # what a mode does not use, it refuses
    running = {"--atol": args.atol != 0.0, "--timeout": args.timeout != 120.0,
               "--jobs": args.jobs != 1, "--controls": args.controls,
               "--skip-self-handshake": args.skip_self_handshake, "--logs": args.logs}
    unused = [o for o, given in running.items() if given] if args.write else []
    if args.files and args.ppv:
        unused.append("--ppv")
    if unused:
        print(f"pytorch_runtime_check: {unused[0]} is not used with "
              f"{'--write' if args.write else '--files'}", file=sys.stderr)
        return 2
    if args.ppv is None:
        args.ppv = "build/tools/ppv"
    if (args.write or not args.files) and not os.access(args.ppv, os.X_OK):
        print(f"pytorch_runtime_check: {args.ppv} is not an executable ppv (--ppv)",
              file=sys.stderr)
        return 2
    if args.write:
        os.makedirs(args.write, exist_ok=True)
        bad = 0
        for kind in kinds:
            for fmt in FORMATS:
                path, why = write_file(args, kind, fmt, args.write)
                if path is None:
                    print(f"pytorch_runtime_check: {kind} {fmt}: {why}", file=sys.stderr)
                    bad += 1
        print(f"pytorch_runtime_check: wrote {2 * len(kinds) - bad} files into {args.write}"
              f" (-p {args.ranks} -m {args.microbatches})")
        return 1 if bad else 0
    if args.files and not os.path.isdir(args.files):
        print(f"pytorch_runtime_check: {args.files} is not a directory (--files)",
              file=sys.stderr)
        return 2
    missing = have_pipelining()
    if missing:
        print(f"pytorch_runtime_check: skipped, nothing run: torch.distributed.pipelining is "
              f"not available here ({missing})")
        return 0
    import torch
    from concurrent.futures import ThreadPoolExecutor
    print(f"torch {torch.__version__}, gloo on the CPU, -p {args.ranks} -m {args.microbatches}"
          + (", the greetings a rank sends itself skipped" if args.skip_self_handshake else ""))
    print(f"{'kind':28} {'format':14} {'completed':10} max abs difference")
    cases = [(kind, fmt) for kind in kinds for fmt in FORMATS]
    if args.controls:
        cases += [(kind, "class") for kind in kinds if kind in PYTORCH_CLASS]
    bad = 0
    with tempfile.TemporaryDirectory(prefix="ppv_torch_") as work, \
            ThreadPoolExecutor(max_workers=args.jobs) as pool:
        for fmt in FORMATS + ("class",):
            os.makedirs(os.path.join(work, fmt))
        results = pool.map(lambda c: run_one(args, c[0], c[1], work), cases)
        for (kind, fmt), (done, diff, why) in zip(cases, results):
            shown = "-" if diff is None else f"{diff:.3g}"
            print(f"{kind:28} {fmt:14} {done:10} {shown}" + (f"  ({why})" if why else ""),
                  flush=True)
            bad += done != "yes" or diff is None or diff > args.atol
    print(f"pytorch_runtime_check: {len(cases) - bad} passed, {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
