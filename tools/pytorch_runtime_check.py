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
                 "pytorch-gpipe,pytorch-looped-bfs,pytorch-interleaved-1f1b,"
                 "pytorch-interleaved-zb,pytorch-zbv,pytorch-dualpipev")
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


def worker(rank, size, path, fmt, m, port, out):
    """One rank: load the file into PyTorch's runtime, run a step, save grads."""
    import torch
    import torch.distributed as dist
    from torch.distributed.pipelining import PipelineStage
    from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=size)
    by_rank, nstages = stages_of(path)
    mine = by_rank[rank]
    stages = [PipelineStage(stage_module(s), s, nstages, torch.device("cpu")) for s in mine]
    sched = _PipelineScheduleRuntime(stages, m, loss_fn=loss_fn, scale_grads=True)
    sched._load_csv(path, format=fmt)
    x, y = batch(m)
    args = (x,) if 0 in mine else ()
    target = y if nstages - 1 in mine else None
    sched.step(*args, target=target)
    grads = {st.stage_index: [p.grad.clone() if p.grad is not None else None
                              for p in st.submod.parameters()] for st in stages}
    torch.save(grads, out)
    dist.destroy_process_group()


def reference(nstages, m):
    """Each stage's gradients, the microbatches in order, divided by m."""
    mods = [stage_module(s) for s in range(nstages)]
    x, y = batch(m)
    for k in range(m):
        h = x[k * ROWS:(k + 1) * ROWS]
        for mod in mods:
            h = mod(h)
        loss_fn(h, y[k * ROWS:(k + 1) * ROWS]).backward()
    return {s: [p.grad / m for p in mod.parameters()] for s, mod in enumerate(mods)}


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_one(args, kind, fmt, work):
    """(completed, max abs difference or None, what went wrong)."""
    import torch
    path = os.path.join(work, f"{kind}_{fmt}.csv")
    gen = [args.ppv, "gen", kind, "-p", str(args.ranks), "-m", str(args.microbatches), "-o", path]
    if fmt == "compute_comms":
        gen.append("--comms")
    r = subprocess.run(gen, capture_output=True, text=True)
    if r.returncode != 0:
        return "no file", None, r.stderr.strip()
    port = free_port()
    procs, outs = [], []
    for rank in range(args.ranks):
        out = os.path.join(work, f"{kind}_{fmt}_{rank}.pt")
        outs.append(out)
        procs.append(subprocess.Popen(
            [sys.executable, __file__, "--worker", str(rank), str(args.ranks), path, fmt,
             str(args.microbatches), str(port), out],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    failed, logs = False, []
    for p in procs:
        try:
            log, _ = p.communicate(timeout=args.timeout)
        except subprocess.TimeoutExpired:
            for q in procs:
                q.kill()
            return "hung", None, f"killed after {args.timeout} s"
        failed |= p.returncode != 0
        logs.append(log)
    if failed:
        tail = [line for log in logs for line in log.splitlines() if "Error" in line]
        return "failed", None, tail[0] if tail else "a rank exited non-zero"
    _, nstages = stages_of(path)
    want = reference(nstages, args.microbatches)
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
    ap.add_argument("--ppv", default="build/tools/ppv", help="the ppv binary (build/tools/ppv)")
    ap.add_argument("--kinds", default=DEFAULT_KINDS, help="comma-separated kinds")
    ap.add_argument("-p", "--ranks", type=int, default=4, help="ranks, one process each (4)")
    ap.add_argument("-m", "--microbatches", type=int, default=8, help="microbatches (8)")
    ap.add_argument("--atol", type=float, default=0.0,
                    help="largest gradient difference allowed (0: bitwise equal)")
    ap.add_argument("--timeout", type=float, default=120.0,
                    help="seconds before a run's processes are killed as hung (120)")
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        rank, size, path, fmt, m, port, out = sys.argv[2:9]
        worker(int(rank), int(size), path, fmt, int(m), int(port), out)
        return 0
    args = ap.parse_args()
    missing = have_pipelining()
    if missing:
        print(f"pytorch_runtime_check: skipped, nothing run: torch.distributed.pipelining is "
              f"not available here ({missing})")
        return 0
    if not os.access(args.ppv, os.X_OK):
        print(f"pytorch_runtime_check: {args.ppv} is not an executable ppv (--ppv)",
              file=sys.stderr)
        return 2
    bad = 0
    print(f"{'kind':28} {'format':14} {'completed':10} max abs difference")
    with tempfile.TemporaryDirectory(prefix="ppv_torch_") as work:
        for kind in args.kinds.split(","):
            for fmt in ("compute_only", "compute_comms"):
                done, diff, why = run_one(args, kind, fmt, work)
                shown = "-" if diff is None else f"{diff:.3g}"
                print(f"{kind:28} {fmt:14} {done:10} {shown}" + (f"  ({why})" if why else ""))
                bad += done != "yes" or diff is None or diff > args.atol
    print(f"pytorch_runtime_check: {2 * len(args.kinds.split(',')) - bad} passed, {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
