"""PyTorch's own reading and simulation of a schedule CSV, for ppv_bench_check.

usage: python3 pytorch_check.py FILE.csv

Reads FILE (a compute_comms CSV: one row per rank) the way PyTorch's
pipelining runtime loads one (csv.reader, then _Action.from_str on every
cell), places each stage on the first rank that names it, and runs
_simulate_comms_compute on it, the check PyTorch has for such a file
(eager sends only). Prints one line: parse seconds, simulate seconds and
the peak RSS in MiB. PyTorch before 2.7 has no REDUCE_GRAD action and its
simulator refuses UNSHARD and RESHARD: there the cells of these three
(three per stage: 384 of the 909,696 of zbv p=64 m=1024) are left out,
and their number goes to stderr. Exits 77 when this Python has no
torch.distributed.pipelining (PyTorch 2.4 or later), 1 when PyTorch's
simulation raises.
"""
import csv
import resource
import sys
import time

try:
    from torch.distributed.pipelining.schedules import _Action, _simulate_comms_compute
    from torch.distributed.pipelining.schedules import _ComputationType
except ImportError as e:
    print(f"no torch.distributed.pipelining here ({e})", file=sys.stderr)
    sys.exit(77)


# PyTorch 2.7 added REDUCE_GRAD and taught the simulator UNSHARD/RESHARD.
OLD_SIMULATOR = not hasattr(_ComputationType, "REDUCE_GRAD")
FSDP_CELLS = ("UNSHARD", "RESHARD", "REDUCE_GRAD")


def main(path):
    t0 = time.perf_counter()
    order = {}
    dropped = 0
    with open(path, newline="") as f:
        for rank, row in enumerate(csv.reader(f)):
            if OLD_SIMULATOR:
                kept = [cell for cell in row if not cell.endswith(FSDP_CELLS)]
                dropped += len(row) - len(kept)
                row = kept
            order[rank] = [_Action.from_str(cell) for cell in row]
    t1 = time.perf_counter()
    owner = {}
    for rank, row in order.items():
        for a in row:
            if a is not None and a.stage_index >= 0:
                owner.setdefault(a.stage_index, rank)
    try:
        _simulate_comms_compute(order, lambda s: owner[s], len(owner))
    except Exception as e:  # PyTorch's verdict on the file, reported as is
        print(f"PyTorch's simulation raised: {e}", file=sys.stderr)
        return 1
    t2 = time.perf_counter()
    if dropped:
        print(f"PyTorch before 2.7: {dropped} UNSHARD/RESHARD/REDUCE_GRAD cells left out",
              file=sys.stderr)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"{t1 - t0:.3f} {t2 - t1:.3f} {rss:.1f}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__.splitlines()[2])
    sys.exit(main(sys.argv[1]))
