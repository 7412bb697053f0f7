"""Ranks that break ppv.dist's rules, for tests/python/test_dist.py."""
import time

import numpy as np

import ppv.dist as dist


def list_payload(rank, size):
    if rank == 0:
        dist.send([1, 2, 3], 1)
    else:
        dist.recv(np.zeros(3, dtype=np.float32), 0)


def bytes_into(rank, size):
    if rank == 0:
        dist.send(b"abcd", 1)
    else:
        dist.recv(b"wxyz", 0)


def idles(rank, size):
    if rank == 1:
        time.sleep(1.0)
    dist.barrier()


def quits(rank, size):
    if rank == 0:
        dist.recv(np.zeros(1, dtype=np.float32), 1)


def keeps_calling(rank, size):
    if rank == 0:
        dist.recv(np.zeros(1, dtype=np.float32), 1)
    else:
        raise ValueError("rank 1 gives up")


def stubborn(rank, size):
    if rank == 0:
        dist.recv(np.zeros(1, dtype=np.float32), 1)   # never comes
    else:
        while True:                                     # goes on past its run's end
            try:
                dist.barrier()
            except dist.DistError:
                pass


not_a_function = 3


def exits(rank, size):
    if rank == 0:
        dist.recv(np.zeros(1, dtype=np.float32), 1)
    else:
        import os
        os._exit(0)                                     # its process leaves, its function never returns


def crashes(rank, size):
    if rank == 0:
        dist.recv(np.zeros(1, dtype=np.float32), 1)
    else:
        import ctypes
        ctypes.string_at(0)                             # a segmentation fault


def too_big(rank, size):
    a = np.zeros((257 << 20) // 4, dtype=np.float32)   # untouched pages: nothing is copied
    if rank == 0:
        dist.send(a, 1)
    else:
        dist.recv(a, 0)


def thread_calls(rank, size):
    import threading
    caught = []

    def background():
        try:
            dist.send(np.zeros(1, dtype=np.float32), 1 - rank)
        except RuntimeError as e:
            caught.append(e)
    t = threading.Thread(target=background, name="sender")
    t.start()
    t.join()
    raise caught[0]


def group_left(rank, size):
    mesh = dist.new_group([1, 2])
    if rank == 1:
        dist.barrier(group=mesh)                        # rank 2 has returned: never joins


def recv_before_any_wait(rank, size):
    if rank == 0:
        w = dist.irecv(np.zeros(1, dtype=np.float32), src=None)
        dist.recv(np.zeros(1, dtype=np.float32), 1)     # would take irecv's message under torch
        w.wait()
    else:
        dist.send(np.ones(1, dtype=np.float32), 0)
        dist.send(np.ones(1, dtype=np.float32), 0)
