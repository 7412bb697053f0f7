"""Gates a team keeps beside its model code, as pytest tests (docs/ci.md).
Each fixture runs ppv and fails the test with ppv's own report. Here the
files are ppv's shipped ones; in a team's repository they are its own
recordings, goldens, schedules and control plane.

    python3 -m pytest examples/ci              # with the .deb or pip install
    python3 -m pytest -p ppv.pytest examples/ci   # from a source tree (PYTHONPATH=python)
"""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python", "examples"))


@pytest.mark.ppv_golden("../../golden/train_1f1b_p4_m8.h5")
def test_training_step_replays_bit_for_bit(ppv_golden_reports):
    assert ppv_golden_reports[0]["differences"] == 0


def test_recorded_stage0_stream_conforms(ppv_conform):
    report = ppv_conform("../../golden/infer_pp0_stash_cut.h5")
    assert report["violations"] == 0


def test_stage0_loop_records_a_conforming_stream(ppv_record, ppv_conform):
    pp0_loop = pytest.importorskip("pp0_loop")  # numpy and h5py
    rec = ppv_record("loop.h5", events={"d_in": 2, "d_out": 2})
    pp0_loop.stage0(rec)
    ppv_conform(rec.path)


def test_schedule_is_deadlock_free_under_rendezvous(ppv_check):
    report = ppv_check("schedule.csv", semantics="rendezvous")
    assert report["deadlock"] is False


def test_control_plane_never_deadlocks(ppv_fuzz_py):
    pytest.importorskip("torch")
    ppv_fuzz_py("control.py:main", n=3, runs=100, strategy="portfolio")
