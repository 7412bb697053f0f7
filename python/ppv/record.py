"""ppv.record - write ppv inference recordings from Python.

A pipeline written in Python (the PP inference contract's usual home) records
what its stage 0 sends and receives with this module, and `ppv conform`
checks the file against the contract (`ppv replay` re-runs it when it holds a
setup): the /inference layout of spec/golden-format.md, with bf16 tensors as
the HDF5 custom float type ppv uses, so h5dump and h5py show their values.
Needs h5py and numpy (Debian: python3-h5py).

The simple use, one call at a time (format version 1):

    from ppv.record import Recorder
    rec = Recorder("run.h5", setup)   # setup: optional, see below
    rec.append(envelope, result)      # dicts: contract fields and numpy tensors
    rec.close()                       # renames the finished file into place

With stage 0's event log (format version 2: what `ppv conform` needs to
judge stale, duplicate, late and ahead results, heartbeats, times and queue
depths), say what happened as it happens:

    rec = Recorder("run.h5", events={"d_in": 2, "d_out": 2})
    rec.sent(envelope)                    # any action; a NOOP is a heartbeat
    rec.received(result, "accepted")      # or "stale", "duplicate", "late",
                                          # "ahead", "error", "rejected"
    rec.decoded(result)                   # the accepted result, emitted
    rec.abandoned(envelope)               # an INFER given up at a hard cut
    rec.rank_record(1, "input_digest", call_id, digest)  # what a mesh rank saw
    rec.memory_sample(1, nbytes)          # what rank 1 holds now (memory part)
    rec.memory_peak(1, peak_bytes)        # its high-water mark, if sampled apart
    rec.close()

Times are time.monotonic_ns() unless given (t_ns=, and t_begin_ns= for when
building an envelope or decoding a result began); the queue depths are
counted from the events unless given (inflight=, ready=). append() records a
call as sent, received and decoded at once.

Envelope and result dicts hold the contract's fields by name (ints, bools,
floats, the error_message string) and its tensors: bf16 tensors as numpy
uint16 arrays of bf16 bit patterns (or float32 arrays, rounded to nearest
even), current_denoising_step_list as int64. The field lists ship with this
package (ppv/_contract.py, generated from ppv's spec/contract.def); an
unknown or missing field is an error before anything is written.
digest(latents_out) is the output_digest_i64 ppv checks.

The setup is what `ppv replay` needs to rebuild the mesh that answered the
calls: the mesh, the KV window and the generator (its declared name, version
and settings text, as `ppv pp --generator` runs it; setup_digest is computed
here). A recording of a model ppv cannot run has none. It is a dict written as
attributes, as `ppv pp --record` writes them:

    setup = {"mesh": 2, "kv_window": 6,            # on /inference
             "generator": {"name": "tp-mlp", "version": "1",
                           "params": "hidden=64,seed=7", "cond_dim": 32}}
                                                   # on /inference/generator

ppv's built-in generator ("ppv-dit") is named by its configuration instead:
{"seed": 1, "layers": 2, "d_model": 32, "n_heads": 4, "d_ff": 64,
"cond_dim": 32}, with or without "name": "ppv-dit", "version": "1".

Command line (python3 -m ppv.record):

    --demo OUT.h5
        writes the small four-call run that tests/test_inference.c records
        from C; the two files must compare equal.
    --rewrite IN.h5 OUT.h5 [--change CALL]
        reads a ppv inference recording (setup, every call's envelope and
        result, the event log, bf16 tensors as their raw bits) and writes it
        again with Recorder. --change CALL adds 1 to the bits of element 0 of
        call CALL's latents_out, so exactly one tensor element differs.

Exit status: 0 written, 2 bad input or a file that cannot be read or written.
"""

import argparse
import os
import sys
import tempfile
import time

import h5py
import numpy as np

from . import digest as _digest
from ._contract import (ACTIONS, ENVELOPE_FIELDS, ENVELOPE_TENSORS, OPTIONAL_FIELDS, RESULT_FIELDS,
                        RESULT_TENSORS)

FORMAT_NAME = "ppv-golden"
CALLS_VERSION = 1   # calls alone
EVENTS_VERSION = 2  # with stage 0's event log
CALL_FMT = "call_%06d"
# /inference/generator's attributes (golden/inference.c): every generator's
# name, version, params, setup_digest and cond_dim; the built-in's
# configuration besides. Not part of the call contract.
BUILTIN_NAME, BUILTIN_VERSION = "ppv-dit", "1"
GENERATOR_KEYS = ("seed", "layers", "d_model", "n_heads", "d_ff", "cond_dim")
NAMED_KEYS = ("name", "version", "params", "cond_dim")
# The event log's record (include/ppv/ppv_pp.h's ppv_pp_event) and codes
# (its PPV_PP_EVENT_KINDS and PPV_PP_VERDICTS, in order).
EVENT_FIELDS = ("t_ns", "t_begin_ns", "kind", "verdict", "action", "call_id", "chunk_index",
                "cache_epoch", "inflight", "ready")
EVENT_DTYPE = np.dtype([(name, "<i8") for name in EVENT_FIELDS])
KINDS = ("sent", "received", "decoded", "abandoned")
# What a mesh rank records of itself (its PPV_PP_RANK_RECORDS).
RANK_RECORDS = ("input_digest", "shard_fingerprint", "state_digest")
# /inference/memory: the kinds a peak's breakdown names and the phases of
# stage 0 (the codes of a sample's third column), as ppv_pp.h has them
MEMORY_KINDS = ("envelopes", "results", "context", "buffers", "result_cache", "weights",
                "kv_cache", "working", "link")
PHASES = ("warm-up", "steady", "cut-drain", "new-epoch", "end")
PEAK_KEYS = ("peak_t_ns", "peak_chunk", "peak_call_id", "held_at_end_bytes")
VERDICTS = ("none", "accepted", "stale", "duplicate", "late", "ahead", "error", "rejected")
EVENT_BLOCK = 4096


def digest(latents):
    """What output_digest_i64 holds for a tensor (as a signed int64): the
    reference implementation's (ppv.digest.output_digest_i64, spec/digests.md)."""
    return _digest.output_digest_i64(latents)


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
    missing = [n for n, _ in fields if n not in message and n not in OPTIONAL_FIELDS]
    if missing:
        raise ContractError("%s: missing field(s) %s" % (kind_name, ", ".join(missing)))
    for name, dtype, rank in tensors:
        if name in message and message[name] is not None and np.ndim(message[name]) != rank:
            raise ContractError("%s: %s has %d dimensions, the contract says %d"
                                % (kind_name, name, np.ndim(message[name]), rank))


def setup_digest(name, version, params):
    """ppv_generator_digest (engine/pp/generator.c): FNV-1a over name,
    version and params, each with its terminating NUL, as a signed int64."""
    h = 0xcbf29ce484222325
    for part in (name, version, params):
        for byte in part.encode() + b"\0":
            h = ((h ^ byte) * 0x100000001b3) & (2**64 - 1)
    return h - 2**64 if h >= 2**63 else h


def _setup_values(setup):
    """setup's (mesh, kv_window, {attribute: value} of /inference/generator),
    the seed as the int64 ppv stores its uint64 as; ContractError when a key
    is missing or unknown."""
    def keys(d):
        return ", ".join(sorted(d)) if isinstance(d, dict) else "a %s" % type(d).__name__

    if not isinstance(setup, dict) or set(setup) != {"mesh", "kv_window", "generator"}:
        raise ContractError("setup: needs exactly the keys generator, kv_window, mesh, not %s"
                            % keys(setup))
    gen = setup["generator"]
    if not isinstance(gen, dict):
        raise ContractError("setup: generator is a dict, not %s" % keys(gen))
    builtin = gen.get("name", BUILTIN_NAME) == BUILTIN_NAME
    want = set(GENERATOR_KEYS) if builtin else set(NAMED_KEYS)
    have = set(gen) - ({"name", "version"} if builtin else set())
    if have != want:
        raise ContractError("setup: generator %s needs exactly the keys %s, not %s"
                            % (gen.get("name", BUILTIN_NAME), ", ".join(sorted(want)),
                               keys(gen)))
    attrs = {"cond_dim": int(gen["cond_dim"])}
    if builtin:
        if gen.get("version", BUILTIN_VERSION) != BUILTIN_VERSION:
            raise ContractError("setup: the built-in generator is version %s, not %s"
                                % (BUILTIN_VERSION, gen["version"]))
        values = [int(gen[k]) for k in GENERATOR_KEYS]
        if not -2**63 <= values[0] < 2**64:
            raise ContractError("setup: generator seed %d does not fit 64 bits" % values[0])
        params = "layers=%d,d_model=%d,n_heads=%d,d_ff=%d,seed=%d" % (
            values[1], values[2], values[3], values[4], values[0])
        if values[0] >= 2**63:
            values[0] -= 2**64  # a uint64 seed, stored as ppv stores it
        attrs.update(zip(GENERATOR_KEYS, values))
        name, version = BUILTIN_NAME, BUILTIN_VERSION
    else:
        name, version, params = str(gen["name"]), str(gen["version"]), str(gen["params"])
    attrs.update(name=name, version=version, params=params,
                 setup_digest=setup_digest(name, version, params))
    return int(setup["mesh"]), int(setup["kv_window"]), attrs


class Recorder:
    """Writes one recording: append() each call in order (or, with events,
    sent/received/decoded as they happen), then close(). setup (optional):
    the dict of the module docstring, for `ppv replay`; events (optional):
    {"d_in": D, "d_out": D, "reorder_bound": 0, "clock": "monotonic"}, stage
    0's queue bounds (and how many results ahead it may hold) to keep the
    event log by."""

    def __init__(self, path, setup=None, events=None, memory_clock=None):
        setup_values = None if setup is None else _setup_values(setup)
        log = None if events is None else _event_settings(events)
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
        root.create("producer", "ppv.record", dtype=h5py.string_dtype())
        root.create("producer_version", "1", dtype=h5py.string_dtype())
        root.create("created", time.strftime("%Y-%m-%dT%H:%M:%SZ", created),
                    dtype=h5py.string_dtype())
        root.create("kind", "inference", dtype=h5py.string_dtype())
        inference = self._group(self.f, "inference")
        self.calls = self._group(inference, "calls")
        if setup_values is not None:
            mesh, kv_window, gen = setup_values
            inference.attrs.create("mesh", mesh, dtype="<i8")
            inference.attrs.create("kv_window", kv_window, dtype="<i8")
            g = self._group(inference, "generator")
            for key, v in gen.items():
                if isinstance(v, str):
                    g.attrs.create(key, v, dtype=h5py.string_dtype())
                else:
                    g.attrs.create(key, v, dtype="<i8")
        self.events = None
        self._ranks = {}       # (mesh rank, kind) -> [(call_id, value)]
        self._memory = {}      # rank or "link" -> {"samples": [...], "peak": {...}}
        self._memory_clock = str(memory_clock if memory_clock is not None
                                 else log["clock"] if log is not None else "monotonic")
        self._pending = []
        self._call_of = {}     # call_id -> index of its call group
        self._waiting = set()  # INFERs sent, no result taken yet
        self._ready = set()    # results taken, not yet decoded
        if log is not None:
            self.events = inference.create_dataset(
                "events", shape=(0,), maxshape=(None,), dtype=EVENT_DTYPE,
                chunks=(EVENT_BLOCK,), fletcher32=True, track_times=False)
            self.events.attrs.create("clock", log["clock"], dtype=h5py.string_dtype())
            for key in ("d_in", "d_out", "reorder_bound"):
                self.events.attrs.create(key, log[key], dtype="<i8")

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
            v = message.get(field, 0) if field in OPTIONAL_FIELDS else message[field]
            if kind == "str":
                g.attrs.create(field, str(v), dtype=h5py.string_dtype())
            elif kind == "float":
                g.attrs.create(field, float(v), dtype="<f8")
            else:
                g.attrs.create(field, int(v), dtype="<i8")
        for tname, dtype, _ in tensors:
            self._tensor(g, tname, dtype, message.get(tname))

    def _call(self, envelope):
        """A new call group holding envelope (checked first)."""
        _check("envelope", envelope, ENVELOPE_FIELDS, ENVELOPE_TENSORS)
        call = self._group(self.calls, CALL_FMT % self.n)
        self._message(call, "envelope", envelope, ENVELOPE_FIELDS, ENVELOPE_TENSORS)
        self._call_of[int(envelope["call_id"])] = self.n
        self.n += 1
        return call

    def _answer(self, result):
        """Writes result into the group of the call it answers."""
        _check("result", result, RESULT_FIELDS, RESULT_TENSORS)
        k = self._call_of.get(int(result["call_id"]))
        if k is None:
            raise ContractError("result: call_id %d was never sent" % int(result["call_id"]))
        call = self.calls[CALL_FMT % k]
        if "result" in call:
            raise ContractError("result: call_id %d already has its answer recorded"
                                % int(result["call_id"]))
        self._message(call, "result", result, RESULT_FIELDS, RESULT_TENSORS)

    def _event(self, kind, verdict, message, action, t_ns, t_begin_ns, inflight, ready):
        if self.events is None:
            raise ContractError("the event log is off: Recorder(path, events={...}) turns it on")
        t = time.monotonic_ns() if t_ns is None else int(t_ns)
        self._pending.append((t, t if t_begin_ns is None else int(t_begin_ns),
                              KINDS.index(kind), VERDICTS.index(verdict), int(action),
                              int(message["call_id"]), int(message.get("chunk_index", 0)),
                              int(message.get("cache_epoch", 0)),
                              len(self._waiting) if inflight is None else int(inflight),
                              len(self._ready) if ready is None else int(ready)))
        if len(self._pending) >= EVENT_BLOCK:
            self._flush()

    def _flush(self):
        if not self._pending:
            return
        n = self.events.shape[0]
        self.events.resize((n + len(self._pending),))
        self.events[n:] = np.array(self._pending, dtype=EVENT_DTYPE)
        self._pending = []

    def sent(self, envelope, t_ns=None, t_begin_ns=None, inflight=None, ready=None):
        """Records an envelope stage 0 sent (any action) as the next call."""
        self._call(envelope)
        if int(envelope["action"]) == ACTIONS["INFER"]:
            self._waiting.add(int(envelope["call_id"]))
        self._event("sent", "none", envelope, envelope["action"], t_ns, t_begin_ns, inflight,
                    ready)

    def heartbeat(self, call_id, cache_epoch=0, t_ns=None):
        """Records a heartbeat: a NOOP envelope sent with this call_id."""
        noop = {name: 0 for name, _ in ENVELOPE_FIELDS}
        noop.update(pp_envelope_version=1, action=ACTIONS["NOOP"], call_id=call_id,
                    cache_epoch=cache_epoch, kv_cache_attention_bias=0.3, pp_disable_vace=1)
        self.sent(noop, t_ns=t_ns)

    def received(self, result, verdict, t_ns=None, inflight=None, ready=None):
        """Records a result stage 0 received and what it did with it: accepted
        (to decode), stale, duplicate, late, ahead (held), error (the mesh's
        error: recorded as the call's answer) or rejected."""
        if verdict not in VERDICTS[1:]:
            raise ContractError("received: verdict %r is none of %s" % (verdict,
                                                                     ", ".join(VERDICTS[1:])))
        call_id = int(result["call_id"])
        if verdict in ("accepted", "ahead", "error", "rejected"):
            self._waiting.discard(call_id)
        if verdict in ("accepted", "ahead"):
            self._ready.add(call_id)
        if verdict == "error":
            self._answer(result)
        self._event("received", verdict, result, ACTIONS["INFER"], t_ns, None, inflight, ready)

    def decoded(self, result, t_ns=None, t_begin_ns=None, inflight=None, ready=None):
        """Records an accepted result decoded (its chunk emitted): the call's
        answer."""
        self._answer(result)
        self._ready.discard(int(result["call_id"]))
        self._event("decoded", "none", result, ACTIONS["INFER"], t_ns, t_begin_ns, inflight,
                    ready)

    def abandoned(self, envelope, t_ns=None, inflight=None, ready=None):
        """Records an INFER in flight that stage 0 gave up at a hard cut."""
        self._waiting.discard(int(envelope["call_id"]))
        self._event("abandoned", "none", envelope, ACTIONS["INFER"], t_ns, None, inflight,
                    ready)

    def rank_record(self, mesh_rank, kind, call_id, value):
        """Records what mesh rank mesh_rank took of itself at call_id: kind is
        "input_digest" (of the input it received), "shard_fingerprint" (of
        its weight shard) or "state_digest" (of its scalar state); value an
        int (a uint64 stored as its int64 bit pattern). `ppv conform` checks
        the input and state digests equal across ranks, and each rank's
        fingerprint stable and distinct from every other rank's."""
        if kind not in RANK_RECORDS:
            raise ContractError("rank_record: kind %r is none of %s" % (kind,
                                                                     ", ".join(RANK_RECORDS)))
        value = int(value)
        if value >= 1 << 63:
            value -= 1 << 64
        self._ranks.setdefault((int(mesh_rank), kind), []).append((int(call_id), value))

    def _memory_row(self, rank):
        if rank != "link" and (isinstance(rank, bool) or not isinstance(rank, (int, np.integer))
                               or not 0 <= rank < 1000000):
            raise ContractError("memory: rank %r is neither a rank 0..999999 (0 stage 0, 1 the "
                                "leader, 2... its workers) nor \"link\"" % (rank,))
        return self._memory.setdefault(rank if rank == "link" else int(rank),
                                       {"samples": [], "peak": None})

    def memory_sample(self, rank, nbytes, t_ns=None, phase=None):
        """Records what rank held after a change (or when sampled): nbytes
        bytes at t_ns (time.monotonic_ns() unless given; the Recorder's
        memory_clock, by default the event log's). rank: 0 stage 0, 1 the
        leader, 2... its workers, or "link" for a buffered link's copies.
        phase (optional, for every sample of a rank or for none): one of
        PHASES. `ppv conform --mem-cap` checks them against a cap."""
        row = self._memory_row(rank)
        if phase is not None and phase not in PHASES:
            raise ContractError("memory_sample: phase %r is none of %s" % (phase,
                                                                        ", ".join(PHASES)))
        if row["samples"] and (row["samples"][-1][2] is None) != (phase is None):
            raise ContractError("memory_sample: rank %r's samples give a phase for all or none"
                                % (rank,))
        t = time.monotonic_ns() if t_ns is None else int(t_ns)
        row["samples"].append((t, int(nbytes), None if phase is None else PHASES.index(phase)))

    def memory_peak(self, rank, nbytes, t_ns=None, chunk=None, call_id=None, phase=None,
                    at_peak=None, held_at_end=None):
        """Records rank's peak: nbytes, and what is known of it (when, the
        chunk and call_id of the buffer that reached it, -1 for one held from
        the start; its phase; at_peak, a dict of bytes by MEMORY_KINDS; what
        it still held at the end). Without it the peak is the samples'
        highest; a peak below a sample is what conform calls a violation."""
        row = self._memory_row(rank)
        if phase is not None and phase not in PHASES:
            raise ContractError("memory_peak: phase %r is none of %s" % (phase, ", ".join(PHASES)))
        held = dict(at_peak or {})
        unknown = sorted(set(held) - set(MEMORY_KINDS))
        if unknown:
            raise ContractError("memory_peak: at_peak kinds %s are none of %s"
                                % (", ".join(unknown), ", ".join(MEMORY_KINDS)))
        row["peak"] = {"peak_bytes": int(nbytes), "peak_phase": phase, "at_peak": held,
                       "peak_t_ns": t_ns, "peak_chunk": chunk, "peak_call_id": call_id,
                       "held_at_end_bytes": held_at_end}

    def _write_memory(self):
        mem = self._group(self.f["inference"], "memory")
        mem.attrs.create("clock", self._memory_clock, dtype=h5py.string_dtype())
        for rank in sorted(self._memory, key=lambda r: (r == "link", 0 if r == "link" else r)):
            row = self._memory[rank]
            g = self._group(mem, "link" if rank == "link" else "rank_%04d" % rank)
            if rank != "link":
                g.attrs.create("rank", rank, dtype="<i8")
            samples = row["samples"]
            peak = row["peak"] or {}
            high = max((b for _, b, _ in samples), default=0)
            g.attrs.create("peak_bytes", peak.get("peak_bytes", high), dtype="<i8")
            for key in PEAK_KEYS:
                if peak.get(key) is not None:
                    g.attrs.create(key, int(peak[key]), dtype="<i8")
            if peak.get("peak_phase") is not None:
                g.attrs.create("peak_phase", peak["peak_phase"], dtype=h5py.string_dtype())
            for kind in MEMORY_KINDS:
                if kind in peak.get("at_peak", {}):
                    g.attrs.create("at_peak_" + kind, int(peak["at_peak"][kind]), dtype="<i8")
            if samples:
                phased = samples[0][2] is not None
                rows = np.array([s if phased else s[:2] for s in samples],
                                dtype="<i8").reshape(-1, 3 if phased else 2)
                g.create_dataset("samples", data=rows, chunks=(min(len(rows), 16384),
                                                               rows.shape[1]),
                                 fletcher32=True, track_times=False)

    def append(self, envelope, result=None):
        """Records one call: its envelope and, for an INFER, its result (with
        the event log: sent, received and decoded at once)."""
        if self.events is None:
            _check("envelope", envelope, ENVELOPE_FIELDS, ENVELOPE_TENSORS)
            if result is not None:
                _check("result", result, RESULT_FIELDS, RESULT_TENSORS)
            call = self._call(envelope)
            if result is not None:
                self._message(call, "result", result, RESULT_FIELDS, RESULT_TENSORS)
            return
        self.sent(envelope)
        if result is not None:
            self.received(result, "accepted" if result["ok"] else "error")
            if result["ok"]:
                self.decoded(result)

    def close(self):
        """Writes the call count (and the event log) and renames the file into
        place."""
        if self.events is not None:
            self._flush()
            self.events.attrs.create("count", self.events.shape[0], dtype="<i8")
        if self._ranks:
            ranks = self._group(self.f["inference"], "ranks")
            for r in sorted({r for r, _ in self._ranks}):
                g = self._group(ranks, "rank_%04d" % r)
                g.attrs.create("mesh_rank", r, dtype="<i8")
                for kind in RANK_RECORDS:
                    if (r, kind) in self._ranks:
                        rows = np.array(self._ranks[(r, kind)], dtype="<i8").reshape(-1, 2)
                        g.create_dataset(kind, data=rows, chunks=rows.shape, fletcher32=True,
                                         track_times=False)
        if self._memory:
            self._write_memory()
        self.f.attrs.create("format_version",
                            CALLS_VERSION if self.events is None and not self._memory
                            else EVENTS_VERSION, dtype="<i8")
        self.f["inference"].attrs.create("calls", self.n, dtype="<i8")
        self.f.close()
        with open(self.tmp, "rb") as fh:
            os.fsync(fh.fileno())
        os.replace(self.tmp, self.path)

    def abort(self):
        """Removes the unfinished file."""
        self.f.close()
        os.unlink(self.tmp)


def _event_settings(events):
    """events' clock, d_in, d_out and reorder_bound; ContractError when a key
    is missing or unknown."""
    if not isinstance(events, dict) or not {"d_in", "d_out"} <= set(events) or \
            not set(events) <= {"d_in", "d_out", "reorder_bound", "clock"}:
        raise ContractError("events: needs d_in and d_out (and optionally reorder_bound, "
                            "clock), not %s" % (sorted(events) if isinstance(events, dict)
                                                else type(events).__name__))
    return {"clock": str(events.get("clock", "monotonic")), "d_in": int(events["d_in"]),
            "d_out": int(events["d_out"]), "reorder_bound": int(events.get("reorder_bound", 0))}


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


class RecordingError(ValueError):
    """A file that is not a readable ppv inference recording."""


def _is_bf16(ds):
    """Whether dataset ds has a 2-byte float file type (ppv's bf16)."""
    t = ds.id.get_type()
    return t.get_class() == h5py.h5t.FLOAT and t.get_size() == 2


def _read_tensor(group, where, name, dtype):
    """Dataset name of group as written: bf16 as its uint16 bit patterns (no
    conversion), int64 as int64; None when absent."""
    if name not in group:
        return None
    ds = group[name]
    if not isinstance(ds, h5py.Dataset):
        raise RecordingError("%s/%s: not a dataset" % (where, name))
    if dtype == "bf16":
        if not _is_bf16(ds):
            raise RecordingError("%s/%s: not a bf16 dataset" % (where, name))
        bits = np.empty(ds.shape, dtype="<u2")
        ds.id.read(h5py.h5s.ALL, h5py.h5s.ALL, bits, mtype=ds.id.get_type())
        return bits
    return np.asarray(ds[()], dtype="<i8")


def _read_message(call, where, name, fields, tensors):
    """The dict of call's group name (envelope or result): every contract
    field and tensor; None when the group is absent (a call with no result)."""
    if name not in call:
        return None
    g = call[name]
    where = "%s/%s" % (where, name)
    message = {}
    for field, kind in fields:
        if field not in g.attrs:
            if field in OPTIONAL_FIELDS:  # a file written before the field existed
                message[field] = 0
                continue
            raise RecordingError("%s: attribute %s missing" % (where, field))
        v = g.attrs[field]
        if kind == "str":
            message[field] = v.decode() if isinstance(v, bytes) else str(v)
        elif kind == "float":
            message[field] = float(v)
        else:
            message[field] = int(v)
    for tname, dtype, _ in tensors:
        message[tname] = _read_tensor(g, where, tname, dtype)
    return message


def _text(v):
    """An HDF5 string attribute as str (h5py gives str or bytes)."""
    return v.decode() if isinstance(v, bytes) else str(v)


def read_recording(path):
    """(setup or None, [(envelope, result or None), ...], event log or None,
    rank records) of a ppv inference recording, read with h5py: what Recorder
    takes, so rewriting it gives the same values. The event log is (its
    settings, its records as an EVENT_DTYPE array); the rank records are
    (mesh rank, kind, call_id, value) tuples, for rank_record."""
    with h5py.File(path, "r") as f:
        if f.attrs.get("ppv_format") != FORMAT_NAME or f.attrs.get("kind") != "inference":
            raise RecordingError("%s: not a ppv inference recording" % path)
        inf = f["inference"]
        setup = None
        if "mesh" in inf.attrs or "generator" in inf:
            gen = inf["generator"].attrs if "generator" in inf else {}
            name = _text(gen["name"]) if "name" in gen else BUILTIN_NAME
            keys = GENERATOR_KEYS if name == BUILTIN_NAME else NAMED_KEYS
            missing = [k for k in ("mesh", "kv_window") if k not in inf.attrs]
            missing += ["generator/" + k for k in keys if k not in gen]
            if missing:
                raise RecordingError("%s: /inference's setup is incomplete: %s missing"
                                     % (path, ", ".join(missing)))
            setup = {"mesh": int(inf.attrs["mesh"]), "kv_window": int(inf.attrs["kv_window"]),
                     "generator": {k: (_text(gen[k]) if k in ("name", "version", "params")
                                       else int(gen[k])) for k in keys}}
        calls = []
        for k in range(int(inf.attrs["calls"])):
            where = "/inference/calls/" + CALL_FMT % k
            if where not in f:
                raise RecordingError("%s: %s missing" % (path, where))
            call = f[where]
            env = _read_message(call, where, "envelope", ENVELOPE_FIELDS, ENVELOPE_TENSORS)
            if env is None:
                raise RecordingError("%s: %s has no envelope" % (path, where))
            calls.append((env, _read_message(call, where, "result", RESULT_FIELDS,
                                             RESULT_TENSORS)))
        log = None
        if "events" in inf:
            ev = inf["events"]
            log = ({"clock": ev.attrs["clock"].decode() if isinstance(ev.attrs["clock"], bytes)
                    else str(ev.attrs["clock"]),
                    "d_in": int(ev.attrs["d_in"]), "d_out": int(ev.attrs["d_out"]),
                    "reorder_bound": int(ev.attrs["reorder_bound"])},
                   np.asarray(ev[()], dtype=EVENT_DTYPE))
        ranks = []
        for name in sorted(inf["ranks"]) if "ranks" in inf else []:
            g = inf["ranks"][name]
            for kind in RANK_RECORDS:
                if kind in g:
                    ranks += [(int(g.attrs["mesh_rank"]), kind, int(c), int(v))
                              for c, v in np.asarray(g[kind][()], dtype="<i8")]
    return setup, calls, log, ranks


def read_memory(path):
    """(clock, rows) of a recording's memory part (/inference/memory), or
    None when it has none: rows in order (ranks, then "link"), each a dict of
    rank, samples (an (n, 2) or (n, 3) int64 array: t_ns, bytes, phase code)
    and the peak attributes recorded (peak_bytes, peak_t_ns, peak_chunk,
    peak_call_id, peak_phase, held_at_end_bytes, at_peak by kind), as
    memory_sample() and memory_peak() take them."""
    with h5py.File(path, "r") as f:
        if "inference" not in f or "memory" not in f["inference"]:
            return None
        mem = f["inference"]["memory"]
        clock = _text(mem.attrs["clock"]) if "clock" in mem.attrs else None
        rows = []
        names = sorted(n for n in mem if n.startswith("rank_")) + \
            (["link"] if "link" in mem else [])
        for name in names:
            g = mem[name]
            row = {"rank": "link" if name == "link" else int(g.attrs["rank"]),
                   "samples": np.asarray(g["samples"][()], dtype="<i8") if "samples" in g
                   else np.zeros((0, 2), dtype="<i8"),
                   "peak_bytes": int(g.attrs["peak_bytes"]),
                   "peak_phase": _text(g.attrs["peak_phase"]) if "peak_phase" in g.attrs
                   else None,
                   "at_peak": {k: int(g.attrs["at_peak_" + k]) for k in MEMORY_KINDS
                               if "at_peak_" + k in g.attrs}}
            for key in PEAK_KEYS:
                row[key] = int(g.attrs[key]) if key in g.attrs else None
            rows.append(row)
    return clock, rows


def rewrite(src, dst, change=None):
    """Writes src's setup and calls to dst with Recorder; change: the call
    whose latents_out element 0 gets 1 added to its bits."""
    setup, calls, log, ranks = read_recording(src)
    if change is not None:
        if not 0 <= change < len(calls):
            raise RecordingError("--change %d: %s has calls 0..%d" % (change, src, len(calls) - 1))
        result = calls[change][1]
        if result is None or result.get("latents_out") is None or result["latents_out"].size == 0:
            raise RecordingError("--change %d: call %d of %s has no latents_out to change"
                                 % (change, change, src))
        flat = result["latents_out"].reshape(-1)
        flat[0] = (int(flat[0]) + 1) & 0xFFFF
    memory = read_memory(src)
    rec = Recorder(dst, setup, None if log is None else log[0],
                   memory_clock=None if memory is None else memory[0])
    try:
        if log is None:
            for env, result in calls:
                rec.append(env, result)
        else:
            _replay_log(rec, calls, log[1])
        for args in ranks:
            rec.rank_record(*args)
        for row in memory[1] if memory else []:
            for sample in row["samples"]:
                rec.memory_sample(row["rank"], sample[1], t_ns=sample[0],
                                  phase=PHASES[sample[2]] if len(sample) == 3 else None)
            rec.memory_peak(row["rank"], row["peak_bytes"], t_ns=row["peak_t_ns"],
                            chunk=row["peak_chunk"], call_id=row["peak_call_id"],
                            phase=row["peak_phase"], at_peak=row["at_peak"],
                            held_at_end=row["held_at_end_bytes"])
    except BaseException:
        rec.abort()
        raise
    rec.close()


def _replay_log(rec, calls, events):
    """Writes calls and events to rec as the log tells it, times and queue
    depths as recorded."""
    answers = {int(env["call_id"]): result for env, result in calls}
    sent = 0
    for ev in events:
        kind, verdict = KINDS[ev["kind"]], VERDICTS[ev["verdict"]]
        depths = {"inflight": int(ev["inflight"]), "ready": int(ev["ready"])}
        ids = {"call_id": int(ev["call_id"]), "chunk_index": int(ev["chunk_index"]),
               "cache_epoch": int(ev["cache_epoch"])}
        if kind == "sent":
            rec.sent(calls[sent][0], t_ns=ev["t_ns"], t_begin_ns=ev["t_begin_ns"], **depths)
            sent += 1
        elif kind == "received":
            answer = answers.get(ids["call_id"])
            if verdict == "error":
                rec.received(answer, verdict, t_ns=ev["t_ns"], **depths)
            else:  # only the answer is kept: log the ids
                rec._event("received", verdict, ids, ev["action"], ev["t_ns"], None,
                           depths["inflight"], depths["ready"])
        elif kind == "decoded":
            rec.decoded(answers[ids["call_id"]], t_ns=ev["t_ns"], t_begin_ns=ev["t_begin_ns"],
                        **depths)
        else:
            rec.abandoned(ids, t_ns=ev["t_ns"], **depths)


def main(argv):
    ap = argparse.ArgumentParser(prog="python3 -m ppv.record",
                                 description="Write ppv inference recordings from Python.")
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--demo", metavar="OUT.h5", help="write the four-call demo run")
    mode.add_argument("--rewrite", nargs=2, metavar=("IN.h5", "OUT.h5"),
                      help="read a ppv inference recording and write it again from Python")
    ap.add_argument("--change", type=int, metavar="CALL",
                    help="with --rewrite: add 1 to the bits of call CALL's latents_out[0]")
    a = ap.parse_args(argv)
    if a.change is not None and not a.rewrite:
        ap.error("--change goes with --rewrite")
    try:
        if a.demo:
            _demo(a.demo)
        else:
            rewrite(a.rewrite[0], a.rewrite[1], a.change)
    except (OSError, KeyError, ValueError) as e:
        sys.stderr.write("ppv.record: %s\n" % e)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
