"""PyTorch's own pipelining runtime (torch.distributed.pipelining, torch 2.4
and later) under `ppv fuzz py tests/python/torch_pipelining.py:main -n 2`:
every rank builds its stages (Linear then Tanh, float64, the weights of
tools/pytorch_runtime_check.py), runs one step() of the schedule that
PPV_PIPE_SCHEDULE names, and checks each of its parameters' gradients,
bit for bit, against a one-process reference that sums the microbatches'
gradients in the order the schedule runs their backwards (so every
interleaving ppv explores must give exactly those bits):

  csv               _PipelineScheduleRuntime loading the lowered file
                    PPV_PIPE_FILE (compute_comms, as `ppv gen --comms`
                    writes it)
  1f1b              Schedule1F1B, one stage a rank
  interleaved-1f1b  ScheduleInterleaved1F1B, two stages a rank (looped)

PPV_PIPE_M microbatches (4 unless set). The same program runs under torch
with gloo (RANK and WORLD_SIZE set, as torchrun sets them), as the test
does to show that what it checks under ppv holds there.
"""
import os
import sys

import torch
import torch.distributed as dist
from torch.distributed.pipelining import PipelineStage, schedules  # once, in ppv's zygote

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "tools"))
import pytorch_runtime_check as prc  # noqa: E402  (the stages, batch and reference)

SCHEDULE = os.environ.get("PPV_PIPE_SCHEDULE", "csv")
FILE = os.environ.get("PPV_PIPE_FILE", "")
M = int(os.environ.get("PPV_PIPE_M", "4"))


def backward_order(pipeline_order):
    """Each stage's microbatches in the order a class's own schedule runs
    their backwards (B, or W where the input's and the weights' are apart)."""
    order = {}
    for actions in pipeline_order.values():
        for a in actions:
            if a is not None and str(a.computation_type) in ("B", "W"):
                order.setdefault(a.stage_index, []).append(a.microbatch_index)
    return order


def load_lowered(sched, path):
    """The lowered file into PyTorch's runtime (_load_csv). torch before 2.7
    has no REDUCE_GRAD action (a stage's gradients reduced across data
    parallel replicas; with none, it does nothing): there the file's
    REDUCE_GRAD cells are left out and the rest loaded as _load_csv loads
    them."""
    if hasattr(schedules, "REDUCE_GRAD"):
        sched._load_csv(path, format="compute_comms")
        return
    import csv
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    sched._load_actions({r: [schedules._Action.from_str(c) for c in row
                             if not c.strip().endswith("REDUCE_GRAD")]
                         for r, row in enumerate(rows)}, format="compute_comms")


def main(rank, size):
    torch.set_num_threads(1)
    dist.init_process_group("gloo")
    if SCHEDULE == "csv":
        by_rank, nstages = prc.stages_of(FILE)
        mine = by_rank[rank]
    elif SCHEDULE == "1f1b":
        nstages, mine = size, [rank]
    elif SCHEDULE == "interleaved-1f1b":
        nstages, mine = 2 * size, [rank, rank + size]
    else:
        raise ValueError(f"PPV_PIPE_SCHEDULE={SCHEDULE!r}: csv, 1f1b or interleaved-1f1b")
    stages = [PipelineStage(prc.stage_module(s), s, nstages, torch.device("cpu")) for s in mine]
    if SCHEDULE == "csv":
        cls = schedules._PipelineScheduleRuntime
        sched = cls(stages, M, loss_fn=prc.loss_fn, **prc.scaling(cls)[0])
        load_lowered(sched, FILE)
        order = prc.accumulation_order(FILE)
    elif SCHEDULE == "1f1b":
        cls = schedules.Schedule1F1B
        sched = cls(stages[0], M, loss_fn=prc.loss_fn, **prc.scaling(cls)[0])
        order = {s: list(range(M)) for s in range(nstages)}  # its backwards run 0..M-1
    else:
        cls = schedules.ScheduleInterleaved1F1B
        sched = cls(stages, M, loss_fn=prc.loss_fn, **prc.scaling(cls)[0])
        order = backward_order(sched.pipeline_order)
    x, y = prc.batch(M)
    sched.step(*((x,) if 0 in mine else ()), target=y if nstages - 1 in mine else None)
    want = prc.reference(nstages, M, order, prc.scaling(cls)[1])
    for st in stages:
        for k, (p, w) in enumerate(zip(st.submod.parameters(), want[st.stage_index])):
            if p.grad is None or not torch.equal(p.grad, w):
                off = "no gradient" if p.grad is None else \
                    f"{float((p.grad - w).abs().max()):.3g} off"
                raise AssertionError(f"stage {st.stage_index} parameter {k}: the gradient is "
                                     f"not the reference's ({off})")
    dist.destroy_process_group()


if __name__ == "__main__":  # under torch: RANK and WORLD_SIZE from the launcher
    main(int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]))
    print("done")
