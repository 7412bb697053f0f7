"""ppv.digest - the reference implementation of every digest ppv writes,
as spec/digests.md defines them, constant for constant. Plain Python
integers (mod 2**64), so an outsider can check a recording without ppv;
the C (engine/run/digest.c, engine/pp/frame.c) must agree with it on the
spec's test vectors (tests/python/test_record.py, tests/test_contract.c).

    ppv_fnv64(data)          ppv_digest: training gradients, the trace digest
    ppv_words64x4(data)      ppv_digest_words: output_digest_i64 and the rest
    output_digest_i64(a)     what a result's output_digest_i64 holds (signed)
    run_output_digest(ds)    `ppv pp`'s "output digest" over decoded chunks
    envelope_digest(t, ts)   an envelope's envelope_digest_i64 (unsigned)
    generator_digest(n,v,p)  /inference/generator's setup_digest (unsigned)
"""

MASK = (1 << 64) - 1
PRIME = 0x100000001B3  # 1099511628211, FNV-1a's 64-bit prime
FNV_BASIS = 0xCBF29CE484222325  # 14695981039346656037, FNV-1a's offset basis
# ppv's byte digest and first lane start from 1469598103934665603: FNV's
# basis with its last digit dropped (a slip kept because recordings and
# traces depend on it). It is not FNV-1a's basis: ppv_fnv64 is not FNV-1a.
PPV_BASIS = 0x14650FB0739D0383  # 1469598103934665603
LANE_SEEDS = (PPV_BASIS, 0x9E3779B97F4A7C15, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9)


def _bytes(data):
    """data as bytes: bytes-like, or an array's contiguous buffer."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    import numpy as np  # only for arrays

    return np.ascontiguousarray(data).tobytes()


def ppv_fnv64(data):
    """FNV-1a's step over every byte, from PPV_BASIS (unsigned 64-bit)."""
    h = PPV_BASIS
    for b in _bytes(data):
        h = ((h ^ b) * PRIME) & MASK
    return h


def ppv_words64x4(data):
    """Four lanes over the little-endian 8-byte words (word i to lane i mod
    4), one more round on the tail zero-padded to 32 bytes (always, also
    when the tail is empty), then the length and the lanes folded in, then
    h ^ h >> 29 (unsigned 64-bit)."""
    data = _bytes(data)
    n = len(data)
    lanes = list(LANE_SEEDS)
    whole = n // 32 * 32
    blocks = [data[k:k + 32] for k in range(0, whole, 32)]
    blocks.append(data[whole:] + bytes(32 - (n - whole)))
    for block in blocks:
        for i in range(4):
            word = int.from_bytes(block[8 * i:8 * i + 8], "little")
            lanes[i] = ((lanes[i] ^ word) * PRIME) & MASK
    h = (n * PRIME) & MASK  # no offset basis: the length is the start
    for lane in lanes:
        h = ((h ^ lane) * PRIME) & MASK
    return h ^ (h >> 29)


def signed(h):
    """An unsigned 64-bit digest as the int64 an HDF5 attribute holds."""
    return h - (1 << 64) if h >= 1 << 63 else h


def output_digest_i64(latents_out):
    """A result's output_digest_i64: ppv_words64x4 of latents_out's bytes
    (bf16 bit patterns, little-endian, row-major), as int64."""
    return signed(ppv_words64x4(latents_out))


def run_output_digest(chunks):
    """`ppv pp`'s output digest: from FNV_BASIS, h = (h ^ d) * PRIME for the
    ppv_words64x4 d of each decoded chunk's latents_out, in call order."""
    h = FNV_BASIS
    for c in chunks:
        h = ((h ^ ppv_words64x4(c)) * PRIME) & MASK
    return h


def envelope_digest(text, tensors):
    """envelope_digest_i64 (unsigned): the canonical metadata text without
    its envelope_digest_i64 line, then each tensor's bytes in spec order,
    each through ppv_words64x4 and chained from FNV_BASIS; 0 becomes 1."""
    h = ((FNV_BASIS ^ ppv_words64x4(text)) * PRIME) & MASK
    for t in tensors:
        h = ((h ^ ppv_words64x4(t)) * PRIME) & MASK
    return h or 1


def generator_digest(name, version, params):
    """/inference/generator's setup_digest (unsigned): FNV-1a (FNV_BASIS)
    over name, version and params, each with its terminating NUL byte."""
    h = FNV_BASIS
    for part in (name, version, params):
        for b in part.encode() + b"\0":
            h = ((h ^ b) * PRIME) & MASK
    return h
