"""tests/python/test_adoption.py PPV - ppv the way a team installs and calls
it: the pytest plugin ppv.pytest (every gate passing and failing, with the
failure's message checked exactly, pytest_gates/), the example gates of
docs/ci.md (examples/ci/), and `pip install ./python` into a virtual
environment (the package there, the plugin found by its entry point, the
order in which ppv.cli looks for ppv). Skipped, with the reason, where
pytest or venv is missing (Debian: python3-pytest, python3-venv,
python3-wheel; tools/setup.sh test installs them and sets
PPV_REQUIRE_PYTEST). Run by CTest (python_adoption); PPV is the ppv binary."""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest
import xml.etree.ElementTree as ET

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.normpath(os.path.join(HERE, "..", ".."))
PPV = None

try:
    import pytest  # noqa: F401
    PYTEST = None
except ImportError as e:
    PYTEST = f"pytest is not installed ({e}; Debian: apt-get install python3-pytest)"
try:
    import ensurepip  # noqa: F401
    import venv  # noqa: F401
    import wheel  # noqa: F401
    VENV = PYTEST
except ImportError as e:
    VENV = PYTEST or (f"venv or wheel is missing ({e}; Debian: apt-get install python3-venv "
                      "python3-wheel)")
if (PYTEST or VENV) and os.environ.get("PPV_REQUIRE_PYTEST"):  # tools/setup.sh test
    raise SystemExit(f"PPV_REQUIRE_PYTEST is set, but {PYTEST or VENV}")


def pytest_run(python, args, env_extra, cwd):
    """Runs `python -m pytest ARGS` with caches off; its completed process."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.update(env_extra)
    return subprocess.run([python, "-m", "pytest", "-p", "no:cacheprovider"] + args,
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=900)


def outcomes(junit):
    """{test name: (outcome, message)} from a junit XML file."""
    got = {}
    for case in ET.parse(junit).iter("testcase"):
        kinds = [k for k in case if k.tag in ("failure", "error", "skipped")]
        got[case.get("name")] = ((kinds[0].tag, kinds[0].get("message")) if kinds
                                 else ("passed", None))
    return got


def doc_block(path, marker):
    """The command lines of the first fenced block after the line that
    starts with marker in the document at path."""
    with open(path) as f:
        lines = f.read().splitlines()
    start = next(k for k, line in enumerate(lines) if line.startswith(marker))
    fence = next(k for k in range(start, len(lines)) if lines[k].startswith("```"))
    end = next(k for k in range(fence + 1, len(lines)) if lines[k].startswith("```"))
    return [line for line in lines[fence + 1:end] if line.strip()]


class Scratch(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="ppv-adoption-")
        self.addCleanup(shutil.rmtree, self.tmp, True)


@unittest.skipIf(PYTEST, PYTEST)
class Plugin(Scratch):
    def test_every_gate_passes_and_fails_with_ppvs_message(self):
        base = os.path.join(self.tmp, "base")
        junit = os.path.join(self.tmp, "junit.xml")
        r = pytest_run(sys.executable, ["-p", "ppv.pytest", "--basetemp", base,
                                        "--junitxml", junit, "test_plugin_gates.py"],
                       {"PYTHONPATH": os.path.join(SOURCE, "python"), "PPV_PROGRAM": PPV},
                       os.path.join(HERE, "pytest_gates"))
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)  # some tests failed
        got = outcomes(junit)
        passing = ["test_passes_replay", "test_passes_check", "test_passes_golden_marker",
                   "test_passes_record", "test_numpy_is_there"]
        for name in passing:
            self.assertEqual(got.pop(name), ("passed", None), name)
        data = os.path.join(SOURCE, "tests", "data")
        golden = os.path.join(SOURCE, "golden")
        demo = os.path.join(base, "test_fails_conform_with_ppv_re0", "demo.h5")
        kind, message = got.pop("test_fails_conform_with_ppv_report")
        self.assertEqual(kind, "failure")
        self.assertTrue(message.startswith(f"ppv_conform({demo}): \n{demo}: 4 calls (3 INFER, 3 "
                                           "results), 0 events, format version 1"), message)
        self.assertIn("\nPPV-CORRUPT [digest] at call 0 (call_id 0, chunk_index 0, cache_epoch "
                      "0): output_digest_i64 is ffffffffffffffb3, latents_out's digest is "
                      "cf86b37b39f66912\n", message)
        self.assertTrue(message.endswith("\nconformance: 7 violations of 11 checks\nresult: "
                                         "PROBLEM"), message)
        kind, message = got.pop("test_fails_check_deadlock")
        self.assertEqual(kind, "failure")
        self.assertIn("\ndeadlock: 2 of 2 ranks can never finish\n  rank 0 blocked at 0SEND_F1 "
                      "(index 3), waits for rank 1: send (rendezvous) waits for rank 1 to reach "
                      "1RECV_F1 (index 3)\n", message)
        trace = os.path.join(base, "test_fails_fuzz_py_deadlock0", "ppv-fuzz-0", "minimal.trace")
        self.assertEqual(got.pop("test_fails_fuzz_py_deadlock"), (
            "failure", "ppv_fuzz_py(deadlock.py:main): \n"
            "deadlock after 4 scheduler steps: 2 of 2 ranks blocked\n"
            "blocked: rank 0 at recv from 1 (deadlock.py:10): receive waits for rank 1 to send; "
            "rank 1 at recv from 0 (deadlock.py:10): receive waits for rank 0 to send\n"
            "cycle: 0 -> 1 -> 0\n"
            f"minimal trace: {trace} (ppv fuzz py ... --replay {trace})"))
        self.assertTrue(os.path.isfile(trace), trace)
        # the trace it names replays the deadlock
        rep = subprocess.run([PPV, "fuzz", "py", os.path.join(HERE, "pytest_gates", "deadlock.py:main"),
                              "-n", "2", "--replay", trace], capture_output=True, text=True,
                             timeout=120)
        self.assertEqual(rep.returncode, 1, rep.stdout + rep.stderr)
        self.assertEqual(got.pop("test_fails_missing_file"), (
            "failure", "ppv_conform: no such file: " +
            os.path.join(HERE, "pytest_gates", "no-such-recording.h5")))
        self.assertEqual(got.pop("test_fails_option_ppv_does_not_know"), (
            "failure", "ppv_conform(../../../golden/infer_pp0_stash_cut.h5): ppv conform: "
            "unrecognized option '--frobnicate'\n(run 'ppv help conform' for usage)\n"
            f"(ppv at {PPV} is version 0.1.0, the Python package 0.1.0: an option it does not "
            "know is one from a newer ppv, or misspelt)"))
        kind, message = got.pop("test_fails_golden_marker_on_a_corrupt_file")
        self.assertEqual(kind, "error")  # the marker fails the test's setup
        self.assertTrue(message.startswith(
            'failed on setup with "ppv_golden(../../data/corrupt/dense.h5): ppv replay: '
            + os.path.join(data, "corrupt", "dense.h5")), message)
        self.assertEqual(got.pop("test_fails_without_ppv"), (
            "failure", "ppv_conform(../../../golden/infer_pp0_stash_cut.h5): PPV_PROGRAM is "
            "/nonexistent/ppv, which is not an executable file"))
        kind, message = got.pop("test_fails_when_ppv_does_not_finish_in_time")
        self.assertEqual(kind, "failure")
        self.assertTrue(message.startswith(f"ppv_fuzz_py(deadlock.py:main): {PPV} fuzz py "), message)
        self.assertTrue(message.endswith(" --json did not finish in 0.001 s (timeout=)"), message)
        self.assertEqual(got, {})  # nothing else ran
        self.assertTrue(os.path.isdir(golden))

    def test_example_gates_of_docs_ci_pass(self):
        # the command docs/ci.md gives for a source tree
        r = pytest_run(sys.executable, ["-p", "ppv.pytest", "-q", "examples/ci"],
                       {"PYTHONPATH": os.path.join(SOURCE, "python"), "PPV_PROGRAM": PPV}, SOURCE)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        try:
            import torch  # noqa: F401  (the control plane's gate needs it)
            want = "5 passed"
        except ImportError:
            want = "4 passed, 1 skipped"
        self.assertIn(want, r.stdout.splitlines()[-1])


@unittest.skipIf(VENV, VENV)
class PipInstall(Scratch):
    def test_pip_install_into_a_venv(self):
        # docs/ci.md's pip block, as it is written, in a folder that has a
        # copy of python/ (so that pip's egg-info and build/ stay out of the
        # tree) and ppv's examples/ and golden/; python3 is this test's interpreter
        block = doc_block(os.path.join(SOURCE, "docs", "ci.md"), "<!-- pip block")
        self.assertEqual(len(block), 3, block)
        work = os.path.join(self.tmp, "team")
        os.mkdir(work)
        shutil.copytree(os.path.join(SOURCE, "python"), os.path.join(work, "python"),
                        ignore=shutil.ignore_patterns("__pycache__", "build", "*.egg-info"))
        for folder in ("examples", "golden"):  # the gates and the files they read
            os.symlink(os.path.join(SOURCE, folder), os.path.join(work, folder))
        tools = os.path.join(self.tmp, "tools")
        os.mkdir(tools)
        os.symlink(sys.executable, os.path.join(tools, "python3"))
        os.symlink(shutil.which("pkg-config"), os.path.join(tools, "pkg-config"))
        env = {"PATH": tools + ":/usr/bin:/bin", "PPV_PROGRAM": PPV, "HOME": self.tmp}
        for command in block:
            r = subprocess.run(["sh", "-c", command], cwd=work, env=env, capture_output=True,
                               text=True, timeout=600)
            self.assertEqual(r.returncode, 0, f"{command}: {r.stdout}{r.stderr}")
            if "pip install" in command:
                self.assertIn("Successfully installed ppv-0.1.0", r.stdout)
            if "pytest" in command:  # the plugin came by its entry point: no -p
                self.assertNotIn("failed", r.stdout.splitlines()[-1])
                self.assertIn(" passed", r.stdout.splitlines()[-1])
        env_dir = os.path.join(work, "venv")
        py = os.path.join(env_dir, "bin", "python")
        site = subprocess.run([py, "-c", "import ppv, os; print(os.path.dirname(ppv.__path__[0]))"],
                              capture_output=True, text=True, cwd=self.tmp, check=True,
                              env={"PATH": "/nonexistent"}).stdout.strip()
        self.assertTrue(site.startswith(env_dir), site)

        # a PATH with pkg-config and no ppv (even where one is installed)
        bare = {"PATH": tools, "PKG_CONFIG_PATH": "", "PKG_CONFIG_LIBDIR": self.tmp}
        find = "import ppv.cli as c\ntry:\n    print(c.find_ppv())\nexcept c.PpvNotFound as e:\n    print(e)"

        def found(extra):
            return subprocess.run([py, "-c", find], capture_output=True, text=True,
                                  cwd=self.tmp, env=dict(bare, **extra), check=True).stdout.strip()
        own = os.path.join(env_dir, "bin", "ppv")
        msg = found({})
        self.assertEqual(msg, (
            f"cannot find the ppv program; tried: PPV_PROGRAM (not set); {own} (no such program); "
            "pkg-config ppv (no ppv.pc on its search path); ppv on PATH (none). Install ppv "
            "(the .deb, or cmake --install) or set PPV_PROGRAM"), msg)
        # 4. PATH
        on_path = os.path.join(self.tmp, "path")
        os.mkdir(on_path)
        os.symlink(PPV, os.path.join(on_path, "ppv"))
        self.assertEqual(found({"PATH": on_path + ":" + tools}),
                         os.path.join(on_path, "ppv"))
        # 3. pkg-config's bindir, ahead of PATH
        pc = os.path.join(self.tmp, "pc")
        os.mkdir(pc)
        bindir = os.path.join(self.tmp, "prefix", "bin")
        os.makedirs(bindir)
        os.symlink(PPV, os.path.join(bindir, "ppv"))
        with open(os.path.join(pc, "ppv.pc"), "w") as f:
            f.write(f"bindir={bindir}\nName: ppv\nDescription: x\nVersion: 0.1.0\n")
        self.assertEqual(found({"PKG_CONFIG_PATH": pc, "PATH": on_path + ":" + tools}),
                         os.path.join(bindir, "ppv"))
        # 2. the package's own copy (VENV/bin/ppv), ahead of pkg-config
        os.symlink(PPV, own)
        self.assertEqual(found({"PKG_CONFIG_PATH": pc}), own)
        # 1. PPV_PROGRAM, ahead of everything
        self.assertEqual(found({"PPV_PROGRAM": os.path.join(on_path, "ppv")}),
                         os.path.join(on_path, "ppv"))

        # ppv.dist from the venv: outside ppv every call says so; under
        # ppv fuzz py (given the venv's package) it runs the ranks
        r = subprocess.run([py, "-c", "import ppv.dist as d\ntry:\n    d.get_rank()\n"
                            "except d.DistError as e:\n    print(e)"],
                           capture_output=True, text=True, cwd=self.tmp, env=bare)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("ppv fuzz py", r.stdout)
        r = subprocess.run([PPV, "fuzz", "py", os.path.join(HERE, "pytest_gates", "deadlock.py:main"),
                            "-n", "2", "--runs", "5"], capture_output=True, text=True,
                           env=dict(os.environ, PPV_PYTHON_DIR=site), timeout=300)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("deadlock after 4 scheduler steps: 2 of 2 ranks blocked", r.stdout)


if __name__ == "__main__":
    PPV = os.path.abspath(sys.argv.pop(1))
    unittest.main()
