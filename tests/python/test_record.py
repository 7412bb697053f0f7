"""tests/python/test_record.py PPV - ppv's Python package (python/ppv):
what it ships agrees with ppv's C definitions, its digest is ppv's, and the
worked example of docs/contract.md records a stream that `ppv conform`
accepts, and rejects when stage 0 is broken on purpose. Run by CTest
(python_record) with PYTHONPATH set to python/; PPV is the ppv binary."""

import json
import os
import re
import subprocess
import sys
import tempfile
import unittest

import h5py
import numpy as np

from ppv import digest
from ppv import record
from ppv import _contract

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
PPV = None


def source(path):
    with open(os.path.join(SOURCE, path)) as f:
        return f.read()


def run(*args):
    return subprocess.run([PPV] + list(args), capture_output=True, text=True)


class Shipped(unittest.TestCase):
    def test_contract_lists_are_spec_contract_def(self):
        text = source("spec/contract.def")
        fields = {"ENV": [], "RES": []}
        tensors = {"ENV": [], "RES": []}
        for m in re.finditer(r"^PPV_(ENV|RES)_FIELD\((\w+), (\w+), \w+\)", text, re.M):
            fields[m.group(1)].append((m.group(2), m.group(3).lower()))
        for m in re.finditer(r"^PPV_(ENV|RES)_TENSOR\((\w+), (\w+), (\d+), \w+\)", text, re.M):
            tensors[m.group(1)].append((m.group(2), m.group(3).lower(), int(m.group(4))))
        actions = {m.group(1): int(m.group(2))
                   for m in re.finditer(r"^PPV_PP_ACTION\((\w+), (\d+)\)", text, re.M)}
        self.assertEqual(list(_contract.ENVELOPE_FIELDS), fields["ENV"])
        self.assertEqual(list(_contract.OPTIONAL_FIELDS),
                         re.findall(r"^PPV_ENV_FIELD\((\w+), \w+, OPTIONAL\)", text, re.M))
        self.assertEqual(list(_contract.RESULT_FIELDS), fields["RES"])
        self.assertEqual(list(_contract.ENVELOPE_TENSORS), tensors["ENV"])
        self.assertEqual(list(_contract.RESULT_TENSORS), tensors["RES"])
        self.assertEqual(_contract.ACTIONS, actions)
        self.assertEqual(len(fields["ENV"]), 19)

    def test_event_codes_are_ppv_pp_h(self):
        text = source("include/ppv/ppv_pp.h")
        def names(macro):
            body = text[text.index("#define " + macro):]
            body = body[:body.index("\n\n")]
            return tuple(re.findall(r'X\(\w+, "(\w+)"\)', body))
        self.assertEqual(record.KINDS, names("PPV_PP_EVENT_KINDS"))
        self.assertEqual(record.VERDICTS, names("PPV_PP_VERDICTS"))
        struct = text[text.index("typedef struct ppv_pp_event {"):]
        struct = struct[:struct.index("} ppv_pp_event;")]
        members = tuple(m for line in re.findall(r"int64_t ([^;]+);", struct)
                        for m in re.split(r",\s*", line))
        self.assertEqual(record.EVENT_FIELDS, members)


class Recording(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()

    def tearDown(self):
        self.dir.cleanup()

    def path(self, name):
        return os.path.join(self.dir.name, name)

    def test_digest_reference_gives_the_specs_vectors(self):
        """python/ppv/digest.py against spec/digests.md's table (the C gives
        the same: test_contract's test_digests_give_the_specs_test_vectors)."""
        text = source("spec/digests.md")
        rows = re.findall(r"^\| (\d+) bytes 0\.\.n-1 \| `([0-9a-f]{16})` \| `([0-9a-f]{16})` \|$",
                          text, re.M)
        self.assertEqual([int(n) for n, _, _ in rows], [0, 31, 32, 33])
        for n, words, fnv in rows:
            data = bytes(range(int(n)))
            self.assertEqual("%016x" % digest.ppv_words64x4(data), words)
            self.assertEqual("%016x" % digest.ppv_fnv64(data), fnv)
        self.assertEqual(digest.PPV_BASIS, 1469598103934665603)
        self.assertEqual(digest.FNV_BASIS, 14695981039346656037)
        self.assertEqual("%016x" % digest.envelope_digest(b"call_id=5\n", [bytes(range(34))]),
                         "7ac67418da5d56bc")
        self.assertEqual("%016x" % digest.generator_digest("tp-mlp", "1", "hidden=32,seed=9"),
                         "24ea5d73125440b3")
        # a shipped golden's first latents_out, written by ppv's C
        with h5py.File(os.path.join(SOURCE, "golden", "infer_pp1_stash_cut.h5"), "r") as f:
            res = f["inference/calls/call_000000/result"]
            ds = res["latents_out"]
            bits = np.empty(ds.shape, dtype="<u2")
            ds.id.read(h5py.h5s.ALL, h5py.h5s.ALL, bits, mtype=ds.id.get_type())
            self.assertEqual(digest.output_digest_i64(bits), int(res.attrs["output_digest_i64"]))
        self.assertIn("| `golden/infer_pp1_stash_cut.h5` call 0's `latents_out` | `%016x` |"
                      % digest.ppv_words64x4(bits), text)

    def test_run_output_digest_is_the_one_ppv_pp_prints(self):
        rec = self.path("chain.h5")
        r = run("pp", "--chunks", "3", "--record", rec)
        self.assertEqual(r.returncode, 0, r.stderr)
        printed = re.search(r"^output digest: ([0-9a-f]{16})$", r.stdout, re.M).group(1)
        chunks = []
        with h5py.File(rec, "r") as f:
            for k in range(3):
                ds = f["inference/calls/call_%06d/result/latents_out" % k]
                bits = np.empty(ds.shape, dtype="<u2")
                ds.id.read(h5py.h5s.ALL, h5py.h5s.ALL, bits, mtype=ds.id.get_type())
                chunks.append(bits)
        self.assertEqual("%016x" % digest.run_output_digest(chunks), printed)

    def test_setup_digest_is_the_one_ppv_records(self):
        rec = self.path("gen.h5")
        r = run("pp", "--chunks", "2", "--generator-params", "layers=1", "--record", rec)
        self.assertEqual(r.returncode, 0, r.stderr)
        with h5py.File(rec, "r") as f:
            g = f["inference/generator"]
            want = digest.signed(digest.generator_digest(
                "ppv-dit", "1", "layers=1,d_model=32,n_heads=4,d_ff=64,seed=1"))
            self.assertEqual(int(g.attrs["setup_digest"]), want)

    def test_digest_is_the_one_ppv_records(self):
        rec = self.path("pp.h5")
        r = run("pp", "--chunks", "3", "--record", rec)
        self.assertEqual(r.returncode, 0, r.stderr)
        with h5py.File(rec, "r") as f:
            for k in range(3):
                res = f["inference/calls/call_%06d/result" % k]
                ds = res["latents_out"]
                bits = np.empty(ds.shape, dtype="<u2")
                ds.id.read(h5py.h5s.ALL, h5py.h5s.ALL, bits, mtype=ds.id.get_type())
                self.assertEqual(record.digest(bits), int(res.attrs["output_digest_i64"]))
        # a changed bit, a changed length: another digest
        self.assertNotEqual(record.digest(np.zeros(7, np.uint16)),
                            record.digest(np.zeros(8, np.uint16)))

    def example(self, *extra):
        out = self.path("loop.h5")
        r = subprocess.run([sys.executable, os.path.join(SOURCE, "python/examples/pp0_loop.py"),
                            out] + list(extra), capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        return run("conform", out)

    def test_the_worked_example_conforms(self):
        r = self.example()
        # every dataset the recorder wrote carries its checksum
        with h5py.File(self.path("loop.h5"), "r") as f:
            datasets = []
            f.visititems(lambda name, obj: datasets.append(obj)
                         if isinstance(obj, h5py.Dataset) else None)
            self.assertEqual(len(datasets), 8 * 3 + 7 + 1)
            self.assertEqual([d.name for d in datasets if not d.fletcher32], [])
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("10 calls (8 INFER, 7 results), 26 events, format version 2", r.stdout)
        self.assertIn("conformance: 0 violations of 17 checks\nresult: CONFORMS\n", r.stdout)

    def test_the_example_decoding_its_late_result_does_not(self):
        r = self.example("--bug", "decode-late")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("FM-10 [stale] at call 4 (call_id 4, chunk_index 3, cache_epoch 0): "
                      "event 12: a result of cache_epoch 0 while the epoch is 1 was accepted, "
                      "not dropped as stale", r.stdout)
        self.assertIn("call_id 4 decoded while it was abandoned", r.stdout)

    def overlapped(self, period, chunks=20):
        """A stream whose chunk k takes stage 0 4 ms to build and send (from
        period*k) and 6 ms to decode after its result comes, and the mesh 10
        ms: OverlapScore = max(0, 20 - period) / 10."""
        sys.path.insert(0, os.path.join(SOURCE, "python", "examples"))
        import pp0_loop
        ms = 1000000
        out = self.path("overlap_%d.h5" % period)
        rec = record.Recorder(out, events={"d_in": 2, "d_out": 2})
        steps = []
        for k in range(chunks):
            e = pp0_loop.envelope(k, k, 0, k)
            r = pp0_loop.mesh(e)
            r["tB_ms"] = 10.0
            t = period * k
            steps += [(t + 4, 0, "sent", e, t), (t + 14, 1, "received", r, None),
                      (t + 20, 2, "decoded", r, t + 14)]
        for t, _, what, msg, begin in sorted(steps, key=lambda s: (s[0], s[1])):
            if what == "sent":
                rec.sent(msg, t_ns=t * ms, t_begin_ns=begin * ms)
            elif what == "received":
                rec.received(msg, "accepted", t_ns=t * ms)
            else:
                rec.decoded(msg, t_ns=t * ms, t_begin_ns=begin * ms)
        bye = {name: 0 for name, _ in record.ENVELOPE_FIELDS}
        bye.update(pp_envelope_version=1, action=record.ACTIONS["SHUTDOWN"], call_id=chunks,
                   kv_cache_attention_bias=0.3, pp_disable_vace=1)
        rec.sent(bye, t_ns=(period * chunks + 30) * ms)
        rec.close()
        return run("conform", out, "--overlap", "--json")

    def test_overlap_score_from_the_logged_times(self):
        import json
        for period, score, code in ((10, 1.0, 0), (15, 0.5, 0), (20, 0.0, 1)):
            r = self.overlapped(period)
            self.assertEqual(r.returncode, code, r.stdout + r.stderr)
            o = json.loads(r.stdout)
            self.assertEqual(o["overlap"]["samples"], 10)
            self.assertEqual(o["overlap"]["score"], score)
            self.assertEqual(o["overlap"]["median_period_ms"], float(period))
            self.assertEqual(o["overlap"]["median_stage0_ms"], 10.0)
            self.assertEqual(o["overlap"]["median_stage1_ms"], 10.0)
            self.assertEqual(o["by_check"]["overlap"], code)
        bad = o["list"][0]
        self.assertEqual((bad["check"], bad["rule"]), ("overlap", "PPV-OVERLAP"))
        self.assertIn("OverlapScore 0.000 below 0.30 over 10 chunks", bad["message"])

    def ranks(self, records):
        """The worked example's stream with the mesh ranks' records added."""
        sys.path.insert(0, os.path.join(SOURCE, "python", "examples"))
        import pp0_loop
        out = self.path("ranks.h5")
        rec = record.Recorder(out)
        for k in range(3):
            e = pp0_loop.envelope(k, k, 0, k)
            rec.append(e, pp0_loop.mesh(e))
        bye = {name: 0 for name, _ in record.ENVELOPE_FIELDS}
        bye.update(pp_envelope_version=1, action=record.ACTIONS["SHUTDOWN"], call_id=3,
                   kv_cache_attention_bias=0.3, pp_disable_vace=1)
        rec.append(bye)
        for args in records:
            rec.rank_record(*args)
        rec.close()
        import json
        r = run("conform", out, "--json")
        return r.returncode, json.loads(r.stdout)

    def test_the_ranks_records_franken_checks(self):
        good = [(r, "input_digest", k, 100 + k) for r in range(2) for k in range(3)]
        good += [(r, "shard_fingerprint", k, 7 + r) for r in range(2) for k in (0, 2)]
        good += [(r, "state_digest", 1, 2**64 - 5) for r in range(2)]
        code, o = self.ranks(good)
        self.assertEqual(code, 0, o)
        for check in ("rank-inputs", "shard-fingerprints", "rank-state"):
            self.assertEqual(o["by_check"][check], 0)
        cases = [
            ([(1, "input_digest", 2, 555)], "rank-inputs", "PPV-DIGEST",
             "call_id 2: mesh rank 1's input digest 000000000000022b differs from mesh rank 0's"),
            ([(1, "shard_fingerprint", 0, 9)], "shard-fingerprints", "PPV-FINGERPRINT",
             "mesh rank 1's shard fingerprint was 0000000000000009 (call_id 0) and is "
             "0000000000000008 at call_id 2"),
            ([(1, "state_digest", 1, 3)], "rank-state", "PPV-DIGEST",
             "call_id 1: mesh rank 1's state digest"),
        ]
        for change, check, rule, text in cases:
            rows = [g for g in good if g[:3] != change[0][:3]] + change
            code, o = self.ranks(rows)
            self.assertEqual(code, 1, o)
            self.assertEqual(o["violations"], 1, o["list"])
            v = o["list"][0]
            self.assertEqual((v["check"], v["rule"]), (check, rule))
            self.assertIn(text, v["message"])
        # the same shard on two ranks (both fingerprints 7, stable)
        same = [g for g in good if g[1] != "shard_fingerprint"]
        same += [(r, "shard_fingerprint", 0, 7) for r in range(2)]
        code, o = self.ranks(same)
        self.assertEqual(code, 1)
        self.assertIn("mesh ranks 0 and 1 have the same shard fingerprint 0000000000000007",
                      o["list"][0]["message"])
        # no records: those checks are not made
        code, o = self.ranks([])
        self.assertEqual(code, 0)
        self.assertIsNone(o["by_check"]["rank-inputs"])

    def memory_stream(self, fill, *conform_args):
        """The worked example's stream with fill(rec) adding memory samples,
        then `ppv conform --json` with conform_args."""
        sys.path.insert(0, os.path.join(SOURCE, "python", "examples"))
        import pp0_loop
        import json
        out = self.path("mem.h5")
        rec = record.Recorder(out)
        for k in range(3):
            e = pp0_loop.envelope(k, k, 0, k)
            rec.append(e, pp0_loop.mesh(e))
        bye = {name: 0 for name, _ in record.ENVELOPE_FIELDS}
        bye.update(pp_envelope_version=1, action=record.ACTIONS["SHUTDOWN"], call_id=3,
                   kv_cache_attention_bias=0.3, pp_disable_vace=1)
        rec.append(bye)
        fill(rec)
        rec.close()
        r = run("conform", out, "--json", *conform_args)
        return r.returncode, json.loads(r.stdout), out

    def test_memory_samples_from_python_gated_by_a_cap(self):
        def good(rec):
            # stage 0 sampled: 100, 300, 200 bytes; the leader's peak read
            # apart (as torch.cuda.max_memory_allocated gives it), above
            # every sample it took
            for t, b in ((10, 100), (20, 300), (30, 200)):
                rec.memory_sample(0, b, t_ns=t, phase="steady")
            rec.memory_sample(1, 5000, t_ns=15)
            rec.memory_sample(1, 4000, t_ns=25)
            rec.memory_peak(1, 6000, t_ns=22, chunk=1, call_id=1,
                            at_peak={"weights": 5000, "working": 1000})
        code, o, out = self.memory_stream(good, "--mem-cap", "300,6000")
        self.assertEqual(code, 0, o["list"])
        self.assertEqual(o["format_version"], 2)
        self.assertEqual(o["memory_clock"], "monotonic")
        self.assertEqual([(m["rank"], m["peak_bytes"], m["samples"], m["cap_bytes"])
                          for m in o["memory"]], [(0, 300, 3, 300), (1, 6000, 2, 6000)])
        self.assertEqual(o["memory"][1]["at_peak"], {"weights": 5000, "working": 1000})
        with h5py.File(out, "r") as f:
            self.assertEqual(f["inference/memory/rank_0000/samples"].shape, (3, 3))
            self.assertEqual(f["inference/memory/rank_0001/samples"].shape, (2, 2))
            self.assertTrue(f["inference/memory/rank_0000/samples"].fletcher32)
        clock, rows = record.read_memory(out)
        self.assertEqual(clock, "monotonic")
        self.assertEqual([r["rank"] for r in rows], [0, 1])
        self.assertEqual(rows[1]["peak_chunk"], 1)
        self.assertEqual(rows[0]["samples"][:, 1].tolist(), [100, 300, 200])
        # one byte over stage 0's cap: the violation names it, exit 1
        code, o, _ = self.memory_stream(good, "--mem-cap", "299,1M")
        self.assertEqual(code, 1)
        self.assertEqual(o["violations"], 1, o["list"])
        v = o["list"][0]
        self.assertEqual((v["check"], v["rule"]), ("memory", "PPV-MEMORY"))
        self.assertEqual(v["message"], "rank 0 (stage 0) peaks at 300 bytes, 1 bytes over its "
                                       "cap of 299")
        # the leader's over: its recorded peak's chunk, call and breakdown
        code, o, _ = self.memory_stream(good, "--mem-cap", "1M,5999")
        self.assertEqual(code, 1)
        self.assertEqual(o["list"][0]["message"],
                         "rank 1 (leader) peaks at 6000 bytes, 1 bytes over its cap of 5999, at "
                         "chunk 1, call_id 1, t_ns 22: it held weights 5000, working 1000")

        def low_peak(rec):
            rec.memory_sample(2, 800, t_ns=5)
            rec.memory_peak(2, 700)
        code, o, _ = self.memory_stream(low_peak)
        self.assertEqual(code, 1)
        self.assertEqual(o["list"][0]["message"],
                         "rank 2 (worker): peak_bytes 700, but sample 0 (t_ns 5) holds 800: the "
                         "recorded peak is below what the rank held")
        # no samples and a cap: nothing to check, exit 2 (the JSON says why)
        code, o, _ = self.memory_stream(lambda rec: None, "--mem-cap", "1G")
        self.assertEqual(code, 2)
        self.assertIn("holds no memory samples", o["error"])
        # what the recorder refuses before writing
        rec = record.Recorder(self.path("bad.h5"))
        with self.assertRaisesRegex(record.ContractError, "rank 'gpu0' is neither"):
            rec.memory_sample("gpu0", 1)
        with self.assertRaisesRegex(record.ContractError, "phase 'hot' is none of"):
            rec.memory_sample(0, 1, phase="hot")
        rec.memory_sample(0, 1, phase="steady")
        with self.assertRaisesRegex(record.ContractError, "give a phase for all or none"):
            rec.memory_sample(0, 2)
        with self.assertRaisesRegex(record.ContractError, "at_peak kinds gpu are none of"):
            rec.memory_peak(0, 2, at_peak={"gpu": 1})
        rec.abort()

    def test_a_memory_part_written_by_hand(self):
        """h5py alone, from spec/golden-format.md: two rows, (n, 2) samples
        with no phase, only peak_bytes beside them."""
        code, o, out = self.memory_stream(lambda rec: None)
        self.assertEqual(code, 0, o)
        self.assertIsNone(o["memory"])
        with h5py.File(out, "r+") as f:
            mem = f["inference"].create_group("memory")
            mem.attrs["clock"] = "monotonic"
            for rank, rows in ((0, [[5, 10], [9, 40], [12, 0]]), (1, [[6, 500], [8, 700]])):
                g = mem.create_group("rank_%04d" % rank)
                g.attrs["rank"] = np.int64(rank)
                g.attrs["peak_bytes"] = np.int64(max(b for _, b in rows))
                g.create_dataset("samples", data=np.array(rows, dtype="<i8"))
        r = run("conform", out, "--json", "--mem-cap", "40,699")
        o = json.loads(r.stdout)
        self.assertEqual(r.returncode, 1, o)
        self.assertEqual([(m["rank"], m["peak_bytes"], m["samples"]) for m in o["memory"]],
                         [(0, 40, 3), (1, 700, 2)])
        self.assertEqual([v["message"] for v in o["list"]],
                         ["rank 1 (leader) peaks at 700 bytes, 1 bytes over its cap of 699"])
        with h5py.File(out, "r+") as f:  # a string where a count belongs
            g = f["inference/memory/rank_0000"]
            del g.attrs["peak_bytes"]
            g.attrs["peak_bytes"] = "forty"
        r = run("conform", out, "--json")
        o = json.loads(r.stdout)
        self.assertEqual(r.returncode, 1)
        self.assertEqual((o["list"][0]["rule"], o["list"][0]["check"]), ("PPV-FIELD", "memory"))

    def test_a_result_is_written_once_to_a_call_that_was_sent(self):
        rec = record.Recorder(self.path("x.h5"), events={"d_in": 2, "d_out": 2})
        result = {name: 0 for name, _ in record.RESULT_FIELDS}
        result.update(call_id=9, error_message="")
        with self.assertRaisesRegex(record.ContractError, "call_id 9 was never sent"):
            rec.decoded(result)
        with self.assertRaisesRegex(record.ContractError, "verdict 'kept' is none of"):
            rec.received({"call_id": 0}, "kept")
        rec.abort()
        self.assertEqual(os.listdir(self.dir.name), [])
        with self.assertRaisesRegex(record.ContractError, "events: needs d_in and d_out"):
            record.Recorder(self.path("y.h5"), events={"d_in": 2})


class RecorderMistakes(unittest.TestCase):
    """Recordings a recorder got wrong, written by hand with h5py as an
    outside recorder would write them: each mistake is a violation naming
    its call and its tensor or field (exit 1), never "cannot read"."""

    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.clean = os.path.join(self.dir.name, "clean.h5")
        r = run("pp", "--chunks", "3", "--record", self.clean)
        self.assertEqual(r.returncode, 0, r.stderr)

    def tearDown(self):
        self.dir.cleanup()

    def broken(self, change):
        path = os.path.join(self.dir.name, "broken.h5")
        with open(self.clean, "rb") as a, open(path, "wb") as b:
            b.write(a.read())
        with h5py.File(path, "r+") as f:
            change(f)
        return run("conform", path), path

    @staticmethod
    def retype(group, name, dtype=None, shape=None):
        data = group[name][()]
        del group[name]
        data = data.astype(dtype) if dtype else data
        group.create_dataset(name, data=data.reshape(shape) if shape else data)

    def test_each_mistake_is_a_violation_with_the_calls_ids(self):
        call1 = "inference/calls/call_000001"
        ids = " at call 1 (call_id 1, chunk_index 1, cache_epoch 0): "
        cases = [
            (lambda f: self.retype(f[call1 + "/envelope"], "latents_in", np.float32),
             "FM-07 [envelope]" + ids + "envelope/latents_in is stored as f32 with 5 dimensions, "
             "the contract says bf16 with 5"),
            (lambda f: self.retype(f[call1 + "/envelope"], "current_denoising_step_list",
                                   np.int32),
             "FM-07 [envelope]" + ids + "envelope/current_denoising_step_list is stored as i32 "
             "with 1 dimension, the contract says i64 with 1"),
            (lambda f: self.retype(f[call1 + "/envelope"], "current_denoising_step_list", None,
                                   (1, -1)),
             "FM-07 [envelope]" + ids + "envelope/current_denoising_step_list is stored as i64 "
             "with 2 dimensions, the contract says i64 with 1"),
            (lambda f: f[call1 + "/envelope"].attrs.modify("reset_kv_cache", np.int64(2)),
             "PPV-FIELD [envelope]" + ids + "envelope/reset_kv_cache is 2: a boolean is 0 or 1"),
            (lambda f: self.retype(f[call1 + "/result"], "latents_out", np.float32),
             "FM-07 [result]" + ids + "result/latents_out is stored as f32 with 5 dimensions, "
             "the contract says bf16 with 5"),
        ]
        for change, want in cases:
            r, path = self.broken(change)
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertIn(want, r.stdout)
            self.assertIn("conformance: 1 violation of ", r.stdout)
            # replay gives the same verdict: the violation, and nothing re-run
            r = run("replay", path)
            self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
            self.assertIn(want, r.stdout)
            if "PPV-FIELD" not in want:  # a boolean read as 1 still re-runs
                self.assertIn(": nothing was replayed: the recording breaks the contract where "
                              "the re-run reads it (", r.stdout)


if __name__ == "__main__":
    PPV = sys.argv.pop(1)
    unittest.main()
