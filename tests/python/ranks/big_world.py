"""Groups in a world of more than 6 ranks (each made by the world when a
rank first asks), for tests/python/test_dist.py: 8 ranks in two halves,
each half sums on its own group, and the two leaders talk on a group of
their own."""
import numpy as np

import ppv.dist as dist


def halves(rank, size):
    low = dist.new_group([0, 1, 2, 3])
    high = dist.new_group([4, 5, 6, 7])
    leaders = dist.new_group([0, 4])
    mine = low if rank < 4 else high
    x = np.array([float(rank)], dtype=np.float32)
    dist.all_reduce(x, group=mine)
    assert x[0] == (6.0 if rank < 4 else 22.0), x
    if rank in (0, 4):
        y = x.copy()
        dist.all_reduce(y, group=leaders)
        assert y[0] == 28.0, y
        assert dist.get_rank(leaders) == (0 if rank == 0 else 1)
    assert dist.get_world_size(leaders) == (2 if rank in (0, 4) else -1)
    dist.barrier()


def leader_skips(rank, size):
    leaders = dist.new_group([0, 4])
    if rank == 0:                                   # rank 4 never joins: a deadlock
        dist.all_reduce(np.zeros(1, dtype=np.float32), group=leaders)
    dist.barrier()
