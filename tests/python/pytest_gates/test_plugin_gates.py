"""The gates of ppv.pytest, each once passing and once failing. Not run
on its own: tests/python/test_adoption.py runs pytest on this file and
checks every outcome and every failure's message exactly."""
import os

import numpy as np
import pytest

from ppv import record

DATA = os.path.join("..", "..", "data")
GOLDEN = os.path.join("..", "..", "..", "golden")


def test_passes_replay(ppv_replay):
    report = ppv_replay(os.path.join(GOLDEN, "train_1f1b_p4_m8.h5"))
    assert (report["grad_digest"], report["elements"]) == ("cc8a908aac898846", 75912)


def test_passes_check(ppv_check):
    report = ppv_check(os.path.join(DATA, "rendezvous_only.csv"), semantics="eager")
    assert (report["deadlock"], report["peak_activation"]) == (False, [2.0, 2.0])


@pytest.mark.ppv_golden(os.path.join(GOLDEN, "infer_pp1_stash_cut.h5"),
                        os.path.join(GOLDEN, "train_zbv_p2_m4_recompute.h5"))
def test_passes_golden_marker(ppv_golden_reports):
    assert [r["ok"] for r in ppv_golden_reports] == [True, True]


def test_passes_record(ppv_record, ppv_conform, tmp_path):
    rec = ppv_record("one.h5")
    assert rec.path == str(tmp_path / "one.h5")
    e = {name: 0 for name, _ in record.ENVELOPE_FIELDS}
    e.update(pp_envelope_version=1, action=record.ACTIONS["SHUTDOWN"],
             kv_cache_attention_bias=0.3, pp_disable_vace=1)
    rec.append(e)
    rec.close()
    assert ppv_conform(rec.path)["calls"] == 1


def test_fails_conform_with_ppv_report(ppv_conform, tmp_path):
    path = str(tmp_path / "demo.h5")
    record._demo(path)  # digests and start frames wrong on purpose
    ppv_conform(path)


def test_fails_check_deadlock(ppv_check):
    ppv_check(os.path.join(DATA, "rendezvous_only.csv"), semantics="rendezvous")


def test_fails_fuzz_py_deadlock(ppv_fuzz_py):
    ppv_fuzz_py("deadlock.py:main", n=2, runs=20)


def test_fails_missing_file(ppv_conform):
    ppv_conform("no-such-recording.h5")


def test_fails_option_ppv_does_not_know(ppv_conform):
    ppv_conform(os.path.join(GOLDEN, "infer_pp0_stash_cut.h5"), frobnicate=3)


@pytest.mark.ppv_golden(os.path.join(DATA, "corrupt", "dense.h5"))
def test_fails_golden_marker_on_a_corrupt_file():
    pass


def test_fails_without_ppv(ppv_conform, monkeypatch):
    monkeypatch.setenv("PPV_PROGRAM", os.path.join(os.sep, "nonexistent", "ppv"))
    ppv_conform(os.path.join(GOLDEN, "infer_pp0_stash_cut.h5"))


def test_fails_when_ppv_does_not_finish_in_time(ppv_fuzz_py):
    ppv_fuzz_py("deadlock.py:main", n=2, runs=20, timeout=0.001)


def test_numpy_is_there():
    assert np.zeros(2).shape == (2,)
