"""ppv_record - write ppv inference recordings from Python.

A pipeline written in Python (the PP inference contract's usual home) records
every envelope it sends and every result it receives with this module, and
`ppv` reads the file: the /inference layout of spec/golden-format.md, with
bf16 tensors as the HDF5 custom float type ppv uses, so h5dump and h5py show
their values. Needs h5py and numpy (Debian: python3-h5py).

    rec = Recorder("run.h5")
    rec.append(envelope, result)   # dicts: contract fields and numpy tensors
    rec.close()                    # renames the finished file into place

Envelope and result dicts hold the contract's fields by name (ints, bools,
floats, the error_message string) and its tensors: bf16 tensors as numpy
uint16 arrays of bf16 bit patterns (or float32 arrays, rounded to nearest
even), current_denoising_step_list as int64. The field lists are read from
spec/contract.def, the contract's one definition; an unknown or missing
field is an error before anything is written.

`python3 tools/ppv_record.py --demo OUT.h5` writes the small four-call run
that tests/test_inference.c records from C; the two files must compare equal.
"""

import os
import re
import sys
import tempfile
import time

import h5py
import numpy as np

FORMAT_NAME = "ppv-golden"
FORMAT_VERSION = 1
CALL_FMT = "call_%06d"

def _contract(path=None):
    """The contract's field and tensor lists, read from spec/contract.def (the
    one definition; PPV_CONTRACT_DEF names another copy, such as the one
    `cmake --install` puts in include/ppv/)."""
    path = path or os.environ.get("PPV_CONTRACT_DEF") or os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "spec", "contract.def")
    with open(path) as f:
        text = f.read()
    field = re.compile(r"^PPV_(ENV|RES)_FIELD\((\w+), (\w+), \w+\)", re.M)
    tensor = re.compile(r"^PPV_(ENV|RES)_TENSOR\((\w+), (\w+), (\d+), \w+\)", re.M)
    action = re.compile(r"^PPV_PP_ACTION\((\w+), (\d+)\)", re.M)
    fields = {"ENV": [], "RES": []}
    tensors = {"ENV": [], "RES": []}
    for m in field.finditer(text):
        fields[m.group(1)].append((m.group(2), m.group(3).lower()))
    for m in tensor.finditer(text):
        tensors[m.group(1)].append((m.group(2), m.group(3).lower(), int(m.group(4))))
    actions = {m.group(1): int(m.group(2)) for m in action.finditer(text)}
    return fields, tensors, actions


_FIELDS, _TENSORS, ACTIONS = _contract()
ENVELOPE_FIELDS, RESULT_FIELDS = _FIELDS["ENV"], _FIELDS["RES"]
ENVELOPE_TENSORS, RESULT_TENSORS = _TENSORS["ENV"], _TENSORS["RES"]



def bf16_type():
    """The bf16 file type of spec/golden-format.md: sign at bit 15, an 8-bit
    exponent at 7 (bias 127), a 7-bit mantissa at 0, little-endian."""
    t = h5py.h5t.IEEE_F32LE.copy()
    t.set_fields(15, 7, 8, 0, 7)
    t.set_precision(16)
    t.set_size(2)
    t.set_ebias(127)
    return t


def to_bf16_bits(a):
    """bf16 bit patterns (uint16) of a: taken as they are from uint16, rounded
    to nearest even from float32."""
    a = np.asarray(a)
    if a.dtype == np.uint16:
        return np.ascontiguousarray(a)
    if a.dtype != np.float32:
        raise TypeError("bf16 tensors are uint16 bit patterns or float32, not %s" % a.dtype)
    u = np.ascontiguousarray(a).view(np.uint32).astype(np.uint64)
    rounded = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    nan = np.isnan(a)
    out = rounded.astype(np.uint16)
    out[nan] = ((u[nan] >> 16) | 0x40).astype(np.uint16)  # a quiet NaN stays a NaN
    return out


class ContractError(ValueError):
    """A message that does not have the contract's fields."""


def _check(kind_name, message, fields, tensors):
    known = {n for n, _ in fields} | {n for n, _, _ in tensors}
    unknown = sorted(set(message) - known)
    if unknown:
        raise ContractError("%s: unknown field(s) %s" % (kind_name, ", ".join(unknown)))
    missing = [n for n, _ in fields if n not in message]
    if missing:
        raise ContractError("%s: missing field(s) %s" % (kind_name, ", ".join(missing)))
    for name, dtype, rank in tensors:
        if name in message and message[name] is not None and np.ndim(message[name]) != rank:
            raise ContractError("%s: %s has %d dimensions, the contract says %d"
                                % (kind_name, name, np.ndim(message[name]), rank))


class Recorder:
    """Writes one recording: append() each call in order, then close()."""

    def __init__(self, path):
        self.path = os.path.abspath(path)
        fd, self.tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".tmp.",
                                        dir=os.path.dirname(self.path))
        os.close(fd)
        fapl = h5py.h5p.create(h5py.h5p.FILE_ACCESS)
        fapl.set_libver_bounds(h5py.h5f.LIBVER_V110, h5py.h5f.LIBVER_V110)
        fcpl = h5py.h5p.create(h5py.h5p.FILE_CREATE)
        fcpl.set_obj_track_times(False)
        fid = h5py.h5f.create(self.tmp.encode(), h5py.h5f.ACC_TRUNC, fcpl=fcpl, fapl=fapl)
        self.f = h5py.File(fid)
        self.bf16 = bf16_type()
        self.n = 0
        created = time.gmtime(int(os.environ.get("SOURCE_DATE_EPOCH") or time.time()))
        root = self.f.attrs
        root.create("ppv_format", FORMAT_NAME, dtype=h5py.string_dtype())
        root.create("format_version", FORMAT_VERSION, dtype="<i8")
        root.create("producer", "ppv_record.py", dtype=h5py.string_dtype())
        root.create("producer_version", "1", dtype=h5py.string_dtype())
        root.create("created", time.strftime("%Y-%m-%dT%H:%M:%SZ", created),
                    dtype=h5py.string_dtype())
        root.create("kind", "inference", dtype=h5py.string_dtype())
        self.calls = self._group(self._group(self.f, "inference"), "calls")

    def _group(self, parent, name):
        gcpl = h5py.h5p.create(h5py.h5p.GROUP_CREATE)
        gcpl.set_obj_track_times(False)
        return h5py.Group(h5py.h5g.create(parent.id, name.encode(), gcpl=gcpl))

    def _tensor(self, group, name, dtype, value):
        if value is None:
            return
        if dtype == "bf16":
            data, ftype = to_bf16_bits(value), self.bf16
        else:
            data, ftype = np.ascontiguousarray(value, dtype="<i8"), h5py.h5t.STD_I64LE
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_chunk(tuple(max(1, d) for d in data.shape))
        dcpl.set_fletcher32()
        dcpl.set_obj_track_times(False)
        space = h5py.h5s.create_simple(data.shape)
        ds = h5py.h5d.create(group.id, name.encode(), ftype, space, dcpl=dcpl)
        ds.write(h5py.h5s.ALL, h5py.h5s.ALL, data, mtype=ftype)

    def _message(self, call, name, message, fields, tensors):
        g = self._group(call, name)
        for field, kind in fields:
            v = message[field]
            if kind == "str":
                g.attrs.create(field, str(v), dtype=h5py.string_dtype())
            elif kind == "float":
                g.attrs.create(field, float(v), dtype="<f8")
            else:
                g.attrs.create(field, int(v), dtype="<i8")
        for tname, dtype, _ in tensors:
            self._tensor(g, tname, dtype, message.get(tname))

    def append(self, envelope, result=None):
        """Records one call: its envelope and, for an INFER, its result."""
        _check("envelope", envelope, ENVELOPE_FIELDS, ENVELOPE_TENSORS)
        if result is not None:
            _check("result", result, RESULT_FIELDS, RESULT_TENSORS)
        call = self._group(self.calls, CALL_FMT % self.n)
        self._message(call, "envelope", envelope, ENVELOPE_FIELDS, ENVELOPE_TENSORS)
        if result is not None:
            self._message(call, "result", result, RESULT_FIELDS, RESULT_TENSORS)
        self.n += 1

    def close(self):
        """Writes the call count and renames the file into place."""
        self.f["inference"].attrs.create("calls", self.n, dtype="<i8")
        self.f.close()
        with open(self.tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(self.tmp, self.path)

    def abort(self):
        """Removes the unfinished file."""
        self.f.close()
        os.unlink(self.tmp)


def _demo_envelope(call, chunk, epoch, recompute, steps):
    """The same values as tests/contractutil.h's make_infer."""
    lat = (0x3F80 + np.arange(3 * 16 * 8 * 8) % 64).astype(np.uint16).reshape(1, 3, 16, 8, 8)
    cond = (0x4000 + np.arange(32)).astype(np.uint16).reshape(1, 4, 8)
    ctx = (0x3C00 + np.arange(2 * 16 * 8 * 8) % 32).astype(np.uint16).reshape(1, 2, 16, 8, 8)
    e = {name: 0 for name, _ in ENVELOPE_FIELDS}
    e.update(pp_envelope_version=1, action=ACTIONS["INFER"], call_id=call, chunk_index=chunk,
             cache_epoch=epoch, height=64, width=64, current_start_frame=3 * chunk,
             do_kv_recompute=recompute, num_denoise_steps=steps,
             expected_generator_calls=(1 if recompute else 0) + steps,
             init_cache=int(not recompute and chunk == 0), base_seed=42,
             kv_cache_attention_bias=0.3, noise_scale=0.75, pp_disable_vace=1,
             conditioning_embeds=cond, latents_in=lat,
             current_denoising_step_list=np.array([1000 - 250 * k for k in range(steps)]),
             context_frames=ctx if recompute else None)
    return e


def _demo(path):
    """tests/test_inference.c's make_run, recorded from Python."""
    rec = Recorder(path)
    envs = [_demo_envelope(0, 0, 0, 0, 4), _demo_envelope(1, 1, 0, 1, 3)]
    noop = {name: 0 for name, _ in ENVELOPE_FIELDS}
    noop.update(pp_envelope_version=1, action=ACTIONS["NOOP"], call_id=2, chunk_index=1,
                kv_cache_attention_bias=0.3, pp_disable_vace=1)
    last = _demo_envelope(3, 2, 0, 0, 2)
    last["noise_scale"] = -0.125
    for k, e in enumerate(envs):
        out = ((np.arange(3 * 16 * 8 * 8) * 13 + k) & 0xFFFF).astype(np.uint16)
        rec.append(e, {"pp_result_version": 1, "call_id": e["call_id"],
                       "chunk_index": e["chunk_index"], "cache_epoch": e["cache_epoch"],
                       "observed_generator_calls": e["expected_generator_calls"],
                       "mesh_current_start_frame": 3 * (k + 1), "output_digest_i64": -77 - k,
                       "ok": 1, "error_message": "", "tB_ms": 2.5 + k, "t_mesh_idle_ms": 0.0,
                       "latents_out": out.reshape(1, 3, 16, 8, 8)})
    rec.append(noop)
    rec.append(last, {"pp_result_version": 1, "call_id": 3, "chunk_index": 2, "cache_epoch": 0,
                      "observed_generator_calls": 0, "mesh_current_start_frame": 0,
                      "output_digest_i64": 0, "ok": 0,
                      "error_message": "FM-02: mesh rank 1 ran 3 generator calls, the plan says 2",
                      "tB_ms": 0.0, "t_mesh_idle_ms": 0.0})
    rec.close()


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "--demo":
        sys.exit("usage: ppv_record.py --demo OUT.h5")
    _demo(sys.argv[2])
