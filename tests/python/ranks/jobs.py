"""Ranks under `ppv fuzz py --jobs J`, for tests/python/test_dist.py: with
more than one job, each job's ranks keep to one CPU, the same for every
rank of a run."""
import os

import numpy as np

import ppv.dist as dist


def one_cpu(rank, size):
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) != 1:
        raise RuntimeError(f"rank {rank} may run on CPUs {cpus}, not on one")
    mine = np.array([cpus[0]], dtype=np.float32)
    every = [np.zeros(1, dtype=np.float32) for _ in range(size)]
    dist.all_gather(every, mine)
    if len({int(c[0]) for c in every}) != 1:
        raise RuntimeError(f"the ranks of one run keep to CPUs {[int(c[0]) for c in every]}")
