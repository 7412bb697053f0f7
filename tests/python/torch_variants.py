"""Seeded bugs in torch.distributed programs, for
tests/python/test_torch_corpus.py: each one fails or hangs under torch with
gloo too (a deadlock, a hang, an error), and ppv must find it, told in the
program's terms. Run under `ppv fuzz py FILE.py:FUNCTION -n 3` (poll_irecv
on 2 ranks)."""
import torch

import ppv.dist as dist


def recv_order_deadlock(rank, size):
    """Both ranks receive first: a deadlock under gloo's rendezvous sends."""
    if rank < 2:
        t = torch.zeros(1)
        dist.recv(t, 1 - rank)
        dist.send(t, 1 - rank)


def isend_never_received(rank, size):
    """Rank 0 waits for an isend rank 1 never receives."""
    if rank == 0:
        dist.isend(torch.ones(1), 1).wait()


def mismatched_collectives(rank, size):
    """Rank 2 calls all_gather where the others all_reduce."""
    t = torch.ones(2)
    if rank == 2:
        dist.all_gather([torch.zeros(2) for _ in range(size)], t)
    else:
        dist.all_reduce(t)


def wrong_dtype_reduction(rank, size):
    """One rank sums int64, the others float32 (gloo aborts the process)."""
    t = torch.ones(1, dtype=torch.int64 if rank == 0 else torch.float32)
    dist.all_reduce(t)


def avg_on_gloo(rank, size):
    """ReduceOp.AVG: gloo has it not."""
    dist.all_reduce(torch.ones(1), op=dist.ReduceOp.AVG)


def poll_irecv(rank, size):
    """Polling an irecv's is_completed(): never True under gloo before wait()."""
    if rank == 0:
        w = dist.irecv(torch.zeros(1), 1)
        while not w.is_completed():
            pass
    else:
        dist.send(torch.ones(1), 0)
