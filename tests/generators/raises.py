"""raises.py - a Python generator that fails on purpose (tests/test_generator.c):
params raise=create|call|kv_reset raises ValueError there on the last mesh
rank; exit=1 raises SystemExit in call (which must not end ppv); keep=1
keeps the latents array past the call (refused); none=1 makes create
return None (refused); os_exit=1 calls os._exit(0) in call and abort=1
os.abort() (the plug-in guard must name both). Otherwise each call
copies its latents and makes one all-reduce."""
import os

import numpy as np

NAME = "raises"
VERSION = "1"
ABI = 2


class Raises:
    def __init__(self, setup, comm):
        self.opts = dict(item.split("=") for item in filter(None, setup["params"].split(",")))
        self.comm = comm
        self.last = setup["mesh_rank"] == setup["mesh_size"] - 1
        if self.last and self.opts.get("raise") == "create":
            raise ValueError("asked to raise in create")

    def kv_reset(self):
        if self.last and self.opts.get("raise") == "kv_reset":
            raise ValueError("asked to raise in kv_reset")

    def call(self, latents, cond, out, **rest):
        if out is None:
            return
        if self.last and self.opts.get("raise") == "call":
            raise ValueError("asked to raise in call %d" % rest["call_id"])
        if self.last and self.opts.get("exit") == "1":
            raise SystemExit(3)
        if self.last and self.opts.get("os_exit") == "1":
            os._exit(0)
        if self.last and self.opts.get("abort") == "1":
            os.abort()
        if self.opts.get("keep") == "1":
            self.kept = latents
        v = np.zeros(1, np.float32)
        self.comm.all_reduce_sum(v)
        out[...] = latents


def create(setup, comm):
    if "none=1" in setup["params"]:
        return None
    return Raises(setup, comm)
