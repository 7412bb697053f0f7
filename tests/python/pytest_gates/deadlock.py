"""Two ranks that each receive first: a deadlock ppv fuzz py names."""
import numpy as np

import ppv.dist as dist


def main(rank, world_size):
    dist.init_process_group("gloo")
    t = np.zeros(2, np.float32)
    dist.recv(t, src=1 - rank)
    dist.send(t, dst=1 - rank)
