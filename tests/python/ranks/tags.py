"""Point-to-point tags, for tests/python/test_dist.py: a receive takes
its sender's next message with its tag, each tag in its own order, as on
gloo."""
import numpy as np

import ppv.dist as dist


def _one(v):
    return np.array([v], dtype=np.float32)


def out_of_order(rank, size):
    if rank == 0:
        late = dist.isend(_one(7.0), 1, tag=7)        # posted first, received last
        dist.send(_one(3.0), 1, tag=3)
        late.wait()
        dist.send(_one(8.0), 2, tag=8)
    elif rank == 1:
        b = np.zeros(1, dtype=np.float32)
        dist.recv(b, 0, tag=3)
        assert b[0] == 3.0, b
        dist.recv(b, 0, tag=7)
        assert b[0] == 7.0, b
    else:
        b = np.zeros(1, dtype=np.float32)
        assert dist.recv(b, None, tag=8) == 0         # from any rank, tag 8 only
        assert b[0] == 8.0, b


def wrong_tag(rank, size):
    if rank == 0:
        dist.send(_one(1.0), 1, tag=5)
    elif rank == 1:
        dist.recv(np.zeros(1, dtype=np.float32), 0, tag=4)
