"""passthrough.py - passthrough.c in Python: copy the latents to out and
all-reduce one float on the mesh (ppv_bench_generator's measure of the
Python bridge's cost a call)."""
import numpy as np

NAME = "passthrough"
VERSION = "1"
ABI = 2


class Pass:
    def __init__(self, comm):
        self.comm = comm
        self.v = np.ones(1, np.float32)

    def kv_reset(self):
        pass

    def call(self, latents, out, **rest):
        if out is not None:
            self.comm.all_reduce_sum(self.v)
            out[...] = latents


def create(setup, comm):
    return Pass(comm)
