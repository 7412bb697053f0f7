"""tp_mlp.py - the Python twin of tp_mlp.c: the same tensor-parallel MLP
generator, the same arithmetic in numpy, so a recording made with one
replays bit for bit with the other (both declare tp-mlp 1).

    ppv pp --generator examples/generators/tp_mlp.py --generator-params hidden=64,seed=7

ppv runs this module in an embedded interpreter (docs/generators.md):
create(setup, comm) is called once on every mesh rank, then call(...) for
every generator call. The arrays ppv passes are its own buffers (uint16
holding bf16 bits), valid during the call only. Every fp32 operation is
written in the order tp_mlp.c does it (numpy's elementwise operations round
each one), never a numpy reduction, whose order numpy chooses.
"""
import numpy as np

NAME = "tp-mlp"
VERSION = "1"
ABI = 3  # 3: memory() below; a module of ABI 2 has none
# each cached frame is that frame's channel means alone: a rebuilt cache
# equals the stash even after eviction (PPV_GENERATOR_KV_FRAME_LOCAL)
KV_FRAME_LOCAL = True

C = 16
M64 = (1 << 64) - 1


def splitmix(x):
    x = (x + 0x9e3779b97f4a7c15) & M64
    x = ((x ^ (x >> 30)) * 0xbf58476d1ce4e5b9) & M64
    x = ((x ^ (x >> 27)) * 0x94d049bb133111eb) & M64
    return x ^ (x >> 31)


def weight(seed, k, i, scale):
    """Weight i of tensor k, exact in fp32 (tp_mlp.c's weight())."""
    r = splitmix(seed ^ splitmix((k << 32) | i)) >> 40
    return (np.float32(r) / np.float32(16777216.0) - np.float32(0.5)) * np.float32(scale)


def to_f32(bits):
    return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32)


def to_bf16(f):
    u = f.view(np.uint32)
    return ((u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) >> np.uint32(16)).astype(
        np.uint16)


def parse(params):
    got = {"hidden": 64, "blocks": 4, "seed": 1}
    for item in filter(None, params.split(",")):
        key, _, value = item.partition("=")
        if key not in got or not value.isdigit():
            raise ValueError("tp-mlp has no setting %r (hidden, blocks, seed)" % item)
        got[key] = int(value)
    if not 1 <= got["hidden"] <= 4096 or not 1 <= got["blocks"] <= 64:
        raise ValueError("tp-mlp: hidden 1..4096, blocks 1..64")
    if got["hidden"] % got["blocks"]:
        raise ValueError("tp-mlp: blocks=%d must divide hidden=%d" % (got["blocks"], got["hidden"]))
    return got["hidden"], got["blocks"], got["seed"]


class TpMlp:
    def __init__(self, setup, comm):
        hidden, blocks, seed = parse(setup["params"])
        if setup["device"] != "cpu":
            raise ValueError("tp-mlp runs on the CPU only, not on %s" % setup["device"])
        n, r = setup["mesh_size"], setup["mesh_rank"]
        if blocks % n:
            raise ValueError("a mesh of %d must divide tp-mlp's %d blocks" % (n, blocks))
        self.comm = comm
        self.hidden, self.blocks = hidden, blocks
        self.first = hidden // n * r
        self.last = self.first + hidden // n
        self.h, self.w, self.window = setup["latent_h"], setup["latent_w"], setup["kv_window"]
        self.w1 = np.zeros((hidden, C), np.float32)
        self.w2 = np.zeros((C, hidden), np.float32)
        self.b1 = np.zeros(hidden, np.float32)
        self.tw = np.zeros(hidden, np.float32)
        for j in range(self.first, self.last):
            for c in range(C):
                self.w1[j, c] = weight(seed, 1, j * C + c, 0.5)
                self.w2[c, j] = weight(seed, 2, c * hidden + j, 0.125)
            self.b1[j] = weight(seed, 3, j, 0.0625)
            self.tw[j] = weight(seed, 4, j, 1.0)
        self.b2 = np.array([weight(seed, 5, c, 0.0625) for c in range(C)], np.float32)
        self.cache = np.zeros((self.window, C), np.float32)
        self.cached = 0
        # every rank built from mesh rank 0's settings, and the blocks covered
        mine = splitmix(seed ^ (hidden << 32) ^ blocks)
        root = np.array([mine], np.uint64)
        comm.broadcast(root, 0)
        if int(root[0]) != mine:
            raise ValueError("mesh rank %d's settings differ from mesh rank 0's" % r)
        firsts = comm.all_gather(np.array([self.first], np.int32))
        for k in range(n):
            if int(firsts[k][0]) != hidden // n * k:
                raise ValueError("mesh rank %d holds units from %d" % (k, int(firsts[k][0])))

    def kv_reset(self):
        self.cached = 0

    def kv_snapshot(self):
        return self.cache[:self.cached].ravel().copy()

    def _cache_write(self, lat):
        hw = self.h * self.w
        for f in range(lat.shape[0]):
            if self.cached == self.window:
                self.cache[:-1] = self.cache[1:].copy()
                self.cached -= 1
            s = np.zeros(C, np.float32)
            for i in range(hw):
                s = s + lat[f, :, i]
            self.cache[self.cached] = s / np.float32(hw)
            self.cached += 1

    def call(self, latents, cond, out, timestep, cache_bias, write_cache, **ids):
        frames = latents.shape[0]
        hw = self.h * self.w
        lat = to_f32(latents).reshape(frames, C, hw)
        if out is not None:
            pixels = frames * hw
            ctx = np.zeros(C, np.float32)
            if self.cached:
                s = np.zeros(C, np.float32)
                for f in range(self.cached):
                    s = s + self.cache[f]
                ctx = np.float32(cache_bias) * (s / np.float32(self.cached))
            xo = lat.transpose(0, 2, 1).reshape(pixels, C)
            x = xo + ctx
            per = self.hidden // self.blocks
            part = np.full((self.blocks, pixels, C), -0.0, np.float32)
            t = np.float32(timestep)
            for j in range(self.first, self.last):
                acc = np.full(pixels, self.b1[j], np.float32)
                acc = acc + t * self.tw[j]
                for c in range(C):
                    acc = acc + self.w1[j, c] * x[:, c]
                hj = np.where(acc > np.float32(0), acc, np.float32(0))
                b = j // per
                part[b] = part[b] + self.w2[:, j][None, :] * hj[:, None]
            self.comm.all_reduce_sum(part)
            pred = np.full((pixels, C), self.b2, np.float32)
            for b in range(self.blocks):
                pred = pred + part[b]
            res = xo + (pred - xo) * np.float32(0.25)
            out[...] = to_bf16(res).reshape(frames, hw, C).transpose(0, 2, 1).reshape(out.shape)
        if write_cache:
            self._cache_write(lat)


def memory(setup, shape):
    """This rank's bytes from its setup alone (ppv pp --plan asks without a
    run): the weight arrays (held whole, filled for this rank's units), the
    cache, and with shape a call's working memory: a denoising step's
    per-block partial sums (blocks x pixels x 16 fp32), made and dropped in
    the call."""
    hidden, blocks, _ = parse(setup["params"])
    out = {"weights": (2 * hidden * C + 2 * hidden) * 4,
           "kv_cache": setup["kv_window"] * C * 4}
    if shape is not None:
        pixels = shape["frames"] * setup["latent_h"] * setup["latent_w"]
        out["working"] = blocks * pixels * C * 4 if shape["kind"] == "step" else 0
    return out


def create(setup, comm):
    return TpMlp(setup, comm)
