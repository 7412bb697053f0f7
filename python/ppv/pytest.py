"""ppv.pytest: ppv's gates as pytest tests. Registered through the pytest11
entry point by `pip install` (and by the .deb's dist-info), or loaded with
`-p ppv.pytest`. Fixtures, each a function that runs ppv with --json and
returns the parsed report, or fails the test with ppv's own message:

    def test_stream_conforms(ppv_conform):
        ppv_conform("recordings/stage0.h5", strict=True)

    def test_control_plane_has_no_deadlock(ppv_fuzz_py):
        ppv_fuzz_py("control.py:main", n=3, runs=500, strategy="pct")

- ppv_conform(path, **options), ppv_replay(path, **options) and
  ppv_check(schedule, **options): `ppv conform|replay|check PATH`;
- ppv_fuzz_py(target, n=3, **options): `ppv fuzz py TARGET -n N`, whose
  traces go to the test's temporary folder: a failure names the minimal
  trace and where each rank was blocked;
- ppv_record(name="recording.h5", **options): a ppv.record.Recorder on a
  file of the test's temporary folder (its .path; close() it, then
  ppv_conform(rec.path)).

Options are ppv's own, spelt as keywords: ranks=3 is --ranks 3,
strict=True is --strict (ppv.cli.arguments); timeout=SECONDS bounds the
run (ppv.cli.TIMEOUT, 1800, by default), and one that does not finish
fails the test. A relative path is taken from
the test file's folder. The marker @pytest.mark.ppv_golden("golden/x.h5")
replays a golden file before the test (several paths, and replay's
options as keywords, may be given); the reports are the fixture
ppv_golden_reports.
"""
import os

import pytest

from ppv import cli


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "ppv_golden(*paths, **options): replay these golden files with ppv replay "
        "before the test; the test fails if one does not replay")


def _fail(what, err):
    pytest.fail("%s: %s" % (what, err), pytrace=False)


def _path(request, path, what):
    """path taken from the test file's folder when relative; the test fails
    when it is not there."""
    test_file = getattr(request.node, "path", None) or request.node.fspath  # pytest >= 7: path
    full = os.path.normpath(os.path.join(os.path.dirname(str(test_file)), path))
    if not os.path.exists(full):
        _fail(what, "no such file: %s" % full)
    return full


def _gate(what, command, verdict, timeout=None):
    """The report of a gate that holds; else the test fails with ppv's
    message (outside the except, so that no traceback of ppv.cli comes with
    it)."""
    try:
        return cli.run_report(command, [], verdict, timeout=timeout)
    except cli.GateFailure as failure:
        message = "\n" + str(failure)
    except (cli.PpvInputError, cli.PpvNotFound, RuntimeError) as err:
        message = str(err)
    _fail(what, message)


def _file_fixture(request, name, command, verdict):
    def run(path, timeout=None, **options):
        full = _path(request, str(path), name)
        return _gate("%s(%s)" % (name, path), command + [full] + cli.arguments(options), verdict,
                     timeout)
    return run


@pytest.fixture
def ppv_conform(request):
    """ppv_conform(path, **options): `ppv conform PATH`; its report."""
    return _file_fixture(request, "ppv_conform", ["conform"], "conforms")


@pytest.fixture
def ppv_replay(request):
    """ppv_replay(path, **options): `ppv replay PATH`; its report."""
    return _file_fixture(request, "ppv_replay", ["replay"], "ok")


@pytest.fixture
def ppv_check(request):
    """ppv_check(schedule, **options): `ppv check SCHEDULE`; its report."""
    return _file_fixture(request, "ppv_check", ["check"], "ok")


@pytest.fixture
def ppv_fuzz_py(request, tmp_path):
    """ppv_fuzz_py(target, n=3, **options): `ppv fuzz py FILE.py[:FUNCTION]
    -n N --out DIR`, DIR in the test's temporary folder; its report."""
    def run(target, n=3, timeout=None, **options):
        target = str(target)
        file, colon, function = target.partition(":")
        full = _path(request, file, "ppv_fuzz_py")
        out = tmp_path / ("ppv-fuzz-%d" % len(list(tmp_path.glob("ppv-fuzz-*"))))
        args = ["fuzz", "py", full + colon + function, "-n", str(n), "--out", str(out)]
        return _gate("ppv_fuzz_py(%s)" % target, args + cli.arguments(options), "ok", timeout)
    return run


@pytest.fixture
def ppv_record(tmp_path):
    """ppv_record(name="recording.h5", **options): a ppv.record.Recorder
    writing tmp_path/name (options: setup, events, memory_clock)."""
    from ppv import record  # h5py: only where a test records

    def make(name="recording.h5", **options):
        return record.Recorder(str(tmp_path / name), **options)
    return make


@pytest.fixture(autouse=True)
def _ppv_golden_marker(request):
    """Replays the ppv_golden marker's files before a marked test."""
    reports = []
    for marker in request.node.iter_markers("ppv_golden"):
        if not marker.args:
            _fail("ppv_golden", "the marker names no golden file")
        for path in marker.args:
            full = _path(request, str(path), "ppv_golden")
            reports.append(_gate("ppv_golden(%s)" % path,
                                 ["replay", full] + cli.arguments(marker.kwargs), "ok"))
    return reports


@pytest.fixture
def ppv_golden_reports(_ppv_golden_marker):
    """The reports of the ppv_golden marker's replays, in its order."""
    return _ppv_golden_marker
