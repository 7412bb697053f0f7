"""Module state, as control planes keep it, for tests/python/test_dist.py:
valid when every rank is a process of its own started afresh (as under a
launcher), wrong when ranks or runs share the module."""
import itertools

import numpy as np

import ppv.dist as dist

_CALL_IDS = itertools.count()   # each process numbers its own calls from 0
_SEEN = []                      # what this rank has received, in this launch


def call_ids(rank, size):
    first = next(_CALL_IDS)
    assert first == 0, f"rank {rank}: the first call id is {first}, not 0"
    token = np.zeros(1, dtype=np.float32)
    if rank == 0:
        dist.send(np.array([float(next(_CALL_IDS))], dtype=np.float32), 1)
        dist.recv(token, size - 1)
    else:
        dist.recv(token, rank - 1)
        _SEEN.append(float(token[0]))
        token += next(_CALL_IDS)
        dist.send(token, (rank + 1) % size)
    assert len(_SEEN) <= 1, f"rank {rank} has seen {_SEEN} in one launch"


def prints(rank, size):
    token = np.zeros(1, dtype=np.float32)
    for k in range(2):
        if rank == 0:
            dist.send(token, 1)
            dist.recv(token, size - 1)
        else:
            dist.recv(token, rank - 1)
            token += 1
            dist.send(token, (rank + 1) % size)
        print(f"rank {rank} lap {k} token {int(token[0])}")
