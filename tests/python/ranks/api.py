"""Every ppv.dist call with values checked, for tests/python/test_dist.py:
runs clean under any interleaving."""
import numpy as np

import ppv.dist as dist


def everything(rank, size):
    dist.init_process_group(rank=rank, world_size=size)
    assert dist.is_initialized() and dist.get_rank() == rank and dist.get_world_size() == size
    pair = dist.new_group([0, 1])
    assert dist.get_world_size(pair) == (2 if rank < 2 else -1)  # torch: -1 outside it
    assert dist.get_rank(pair) == (rank if rank < 2 else -1)
    # isend/irecv around a ring, waited for
    out = np.full(3, rank, dtype=np.int64)
    got = np.zeros(3, dtype=np.int64)
    works = [dist.isend(out, (rank + 1) % size), dist.irecv(got, (rank - 1) % size)]
    for w in works:
        w.wait()
        assert w.is_completed()
    assert list(got) == [(rank - 1) % size] * 3
    # all_reduce, broadcast, all_gather on the world
    v = np.array([rank + 1, 0.5], dtype=np.float32)
    dist.all_reduce(v)
    assert list(v) == [size * (size + 1) / 2, 0.5 * size]
    b = np.array([42.0 if rank == size - 1 else -1.0], dtype=np.float32)
    dist.broadcast(b, src=size - 1)
    assert b[0] == 42.0
    mine = np.array([10 * rank], dtype=np.int32)
    every = [np.zeros(1, dtype=np.int32) for _ in range(size)]
    dist.all_gather(every, mine)
    assert [int(e[0]) for e in every] == [10 * r for r in range(size)]
    # a group's collectives: ranks 0 and 1 only
    if rank < 2:
        s = np.array([1.0], dtype=np.float32)
        dist.all_reduce(s, group=pair)
        assert s[0] == 2.0
        dist.barrier(group=pair)
    # receives from any rank: rank 0 takes one message from each other rank
    if rank == 0:
        seen = set()
        for _ in range(size - 1):
            buf = bytearray(4)
            src = dist.recv(buf, src=None)
            assert bytes(buf) == bytes([src]) * 4, (src, bytes(buf))
            seen.add(src)
        assert seen == set(range(1, size))
    else:
        dist.send(bytes([rank]) * 4, 0)
    dist.barrier()
    dist.destroy_process_group()
    assert not dist.is_initialized()
