"""tests/python/test_pytorch_runtime_check.py PPV - tools/pytorch_runtime_check.py
without PyTorch: --write writes what ppv gen writes, the reference's order
is each stage's B and W order (overlapped cells included), bad options exit
2, and where torch.distributed.pipelining is absent it says so and runs
nothing. Run by CTest (pytorch_runtime_check); PPV is the ppv binary. The
runs in PyTorch itself need PyTorch (docs/schedules.md gives the table)."""

import importlib.util
import os
import subprocess
import sys
import tempfile
import unittest

SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
TOOL = os.path.join(SOURCE, "tools", "pytorch_runtime_check.py")
PPV = None

spec = importlib.util.spec_from_file_location("pytorch_runtime_check", TOOL)
check = importlib.util.module_from_spec(spec)
spec.loader.exec_module(check)


def tool(*args):
    return subprocess.run([sys.executable, TOOL] + list(args), capture_output=True, text=True)


def gen(*args):
    r = subprocess.run([PPV, "gen"] + list(args), capture_output=True, text=True, check=True)
    return r.stdout


class Tool(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory(prefix="ppv_torchcheck_")
        self.addCleanup(self.dir.cleanup)

    def path(self, name):
        return os.path.join(self.dir.name, name)

    def write(self, name, text):
        with open(self.path(name), "w") as f:
            f.write(text)
        return self.path(name)

    def test_write_is_ppv_gen_in_both_formats(self):
        out = self.path("files")
        r = tool("--ppv", PPV, "--write", out, "--kinds", "1f1b,zbv", "-p", "2", "-m", "4")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, f"pytorch_runtime_check: wrote 4 files into {out} (-p 2 -m 4)\n")
        self.assertEqual(sorted(os.listdir(out)), ["1f1b_compute_comms.csv", "1f1b_compute_only.csv",
                                                   "zbv_compute_comms.csv", "zbv_compute_only.csv"])
        with open(os.path.join(out, "zbv_compute_comms.csv")) as f:
            self.assertEqual(f.read(), gen("zbv", "-p", "2", "-m", "4", "--comms"))
        with open(os.path.join(out, "1f1b_compute_only.csv")) as f:
            self.assertEqual(f.read(), gen("1f1b", "-p", "2", "-m", "4"))
        r = tool("--ppv", PPV, "--write", out, "--kinds", "nosuch")
        self.assertEqual(r.returncode, 1)
        self.assertIn("pytorch_runtime_check: nosuch compute_only: ", r.stderr)

    def test_order_is_each_stages_b_and_w_order(self):
        bfs = self.write("bfs.csv", gen("pytorch-looped-bfs", "-p", "2", "-m", "3", "-v", "2"))
        self.assertEqual(check.accumulation_order(bfs),
                         {0: [2, 1, 0], 1: [2, 1, 0], 2: [2, 1, 0], 3: [2, 1, 0]})
        self.assertEqual(check.stages_of(bfs), ([[0, 2], [1, 3]], 4))
        mixed = self.write("mixed.csv", "0F0,0F1,0B1,0I0,0W0\n")
        self.assertEqual(check.accumulation_order(mixed), {0: [1, 0]})
        over = self.write("over.csv", "0F0,0F1,(0F2;1B0)OVERLAP_F_B,1W1,1B2\n")
        self.assertEqual(check.accumulation_order(over), {1: [0, 1, 2]})
        comms = self.write("comms.csv", gen("1f1b", "-p", "2", "-m", "2", "--comms"))
        self.assertEqual(check.accumulation_order(comms), {0: [0, 1], 1: [0, 1]})

    def test_bad_options_exit_2(self):
        cases = [
            (["--files", self.path("none")], f"{self.path('none')} is not a directory (--files)"),
            (["--ppv", self.path("none")], "is not an executable ppv (--ppv)"),
            (["--write", self.path("w"), "--files", self.dir.name], "exclude each other"),
            (["--jobs", "0", "--files", self.dir.name], "must be at least 1"),
            (["--write", self.path("w"), "--jobs", "2"], "--jobs is not used with --write"),
            (["--write", self.path("w"), "--controls"], "--controls is not used with --write"),
            (["--files", self.dir.name, "--ppv", PPV], "--ppv is not used with --files"),
        ]
        for args, message in cases:
            r = tool(*args)
            self.assertEqual(r.returncode, 2, args)
            self.assertIn(message, r.stderr)
            self.assertEqual(r.stdout, "")

    @unittest.skipIf(check.have_pipelining() is None, "PyTorch is here: the tool runs for real")
    def test_without_pytorch_it_runs_nothing(self):
        r = tool("--files", self.dir.name)
        self.assertEqual(r.returncode, 0)
        self.assertTrue(r.stdout.startswith("pytorch_runtime_check: skipped, nothing run: "
                                            "torch.distributed.pipelining is not available here"))


if __name__ == "__main__":
    PPV = sys.argv.pop(1)
    unittest.main()
