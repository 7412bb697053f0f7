"""tests/python/test_torch_pipelining.py PPV - PyTorch's own pipelining
runtime (torch.distributed.pipelining, torch 2.4 and later) under `ppv fuzz
py` (tests/python/torch_pipelining.py): _PipelineScheduleRuntime loading
ppv's lowered file, Schedule1F1B and ScheduleInterleaved1F1B each run one
step() with the reference's gradients, bit for bit, in every interleaving
explored; a lowered file with a send and a receive swapped is a deadlock,
under ppv and under torch; receives posted out of order give gradients the
program's check rejects, under both. Skipped, with the reason, where torch
has no pipelining (Debian 12's python3-torch is 1.13; Debian 13's is 2.6).
Run by CTest (python_torch_pipelining); PPV is the ppv binary."""

import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAM = os.path.join(HERE, "torch_pipelining.py")
PPV = None

try:
    import torch
    from torch.distributed.pipelining.schedules import _PipelineScheduleRuntime  # noqa: F401
    PIPELINING = None
except ImportError as e:
    PIPELINING = (f"torch.distributed.pipelining is not here ({e}); it needs torch 2.4 or later "
                  f"(Debian 13's python3-torch)")
except Exception as e:  # a torch built without distributed
    PIPELINING = f"torch.distributed.pipelining cannot be imported: {e}"

sys.path.insert(0, HERE)
from test_torch_corpus import NO_LIBUV, free_port  # noqa: E402


def lowered(d, edit=None):
    """ppv gen 1f1b -p 2 -m 4 --comms, in d, with edit(rows) applied."""
    path = os.path.join(d, "1f1b.csv")
    subprocess.run([PPV, "gen", "1f1b", "-p", "2", "-m", "4", "--comms", "-o", path],
                   check=True, capture_output=True)
    with open(path) as f:
        rows = [line.strip().split(",") for line in f if line.strip()]
    if edit:
        edit(rows)
        with open(path, "w") as f:
            f.write("".join(",".join(r) + "\n" for r in rows))
    return path


def swap_send_and_receive(rows):
    """Rank 0 posts its receive of microbatch 1's gradient where it sent
    microbatch 1's activation, and sends that activation after its
    backward of microbatch 0, which now waits for rank 1's second gradient,
    which needs that activation: a deadlock."""
    r = rows[0]
    i, j = r.index("0SEND_F1"), r.index("0RECV_B1")
    r[i], r[j] = r[j], r[i]


def receives_out_of_order(rows):
    """Rank 1 posts microbatch 1's receive before microbatch 0's: the first
    activation lands in microbatch 1's buffer (a receive takes its sender's
    next message): no hang, the wrong gradients."""
    r = rows[1]
    i = r.index("1RECV_F0")
    assert r[i:i + 3] == ["1RECV_F0", "1F0", "1RECV_F1"], r
    r[i:i + 3] = ["1RECV_F1", "1RECV_F0", "1F0"]


def under_torch(env, seconds=60):
    """The program as torchrun runs it: 2 gloo processes. Each one's
    (exit code or None where it was still running after seconds, output)."""
    base = dict(os.environ, WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(free_port()),
                **NO_LIBUV, **env)
    procs = [subprocess.Popen([sys.executable, PROGRAM], env=dict(base, RANK=str(r)),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for r in range(2)]
    until = time.monotonic() + seconds
    codes = []
    for p in procs:  # each one's state at the deadline, before any is killed
        try:
            p.wait(timeout=max(0.1, until - time.monotonic()))
            codes.append(p.returncode)
        except subprocess.TimeoutExpired:
            codes.append(None)
    for p in procs:
        p.kill()
    return [(c, p.communicate()[0]) for c, p in zip(codes, procs)]


def fuzz(env, *args):
    r = subprocess.run([PPV, "fuzz", "py", PROGRAM + ":main", "-n", "2", "--json"] + list(args),
                       capture_output=True, text=True, timeout=600, env=dict(os.environ, **env))
    # the report is the last line: PyTorch's runtime prints the schedule to
    # the rank's standard output when an action fails, before it
    last = r.stdout.strip().splitlines()[-1] if r.stdout.strip() else ""
    return r.returncode, (json.loads(last) if last.startswith("{") else None), r.stderr


@unittest.skipIf(PIPELINING, PIPELINING)
class Pipelining(unittest.TestCase):
    def passes_every_strategy(self, env, runs=30):
        """No failure in runs runs of each strategy; dfs proves one class
        (each rank receives from one named peer at a time, so every order
        of the calls is equivalent)."""
        for strategy in ("random", "pct", "portfolio", "dfs"):
            with self.subTest(strategy=strategy):
                code, rep, err = fuzz(env, "--strategy", strategy, "--runs", str(runs))
                self.assertEqual(code, 0, (err, rep))
                self.assertIsNone(rep["failure"])
                if strategy == "dfs":
                    self.assertEqual((rep["complete"], rep["classes"]), (True, 1))
                else:
                    self.assertEqual(rep["runs"], runs)

    def test_the_runtime_runs_ppvs_lowered_file_under_torch_and_under_ppv(self):
        with tempfile.TemporaryDirectory() as d:
            env = {"PPV_PIPE_SCHEDULE": "csv", "PPV_PIPE_FILE": lowered(d)}
            for r, (code, out) in enumerate(under_torch(env)):
                self.assertEqual(code, 0, f"rank {r}: {out[-2000:]}")
                self.assertTrue(out.endswith("done\n"), out[-500:])
            self.passes_every_strategy(env)

    def test_pytorchs_own_classes_give_the_reference_gradients_in_every_order(self):
        # ppv's world: a batch_isend_irecv's sends go whether or not their
        # Work is kept (as with NCCL, which coalesces a batch); see
        # docs/explorer.md for gloo on torch 2.6, which drops them
        for schedule in ("1f1b", "interleaved-1f1b"):
            with self.subTest(schedule=schedule):
                self.passes_every_strategy({"PPV_PIPE_SCHEDULE": schedule})

    def test_a_send_and_a_receive_swapped_is_a_deadlock_that_replays(self):
        with tempfile.TemporaryDirectory() as d, tempfile.TemporaryDirectory() as out:
            env = {"PPV_PIPE_SCHEDULE": "csv",
                   "PPV_PIPE_FILE": lowered(d, swap_send_and_receive)}
            code, rep, err = fuzz(env, "--runs", "20", "--out", out)
            self.assertEqual(code, 1, err)
            self.assertEqual(rep["failing_run"], 0)
            self.assertTrue(rep["failure"].startswith(
                "deadlock after 17 scheduler steps: 2 of 2 ranks blocked"), rep["failure"])
            again = subprocess.run([PPV, "fuzz", "py", PROGRAM + ":main", "-n", "2", "--replay",
                                    os.path.join(out, "minimal.trace")], capture_output=True,
                                   text=True, timeout=300, env=dict(os.environ, **env))
            self.assertEqual(again.returncode, 1, again.stderr)
            self.assertIn("replay: fails again: deadlock", again.stdout)
            # and torch hangs on it: neither rank ends
            self.assertEqual([c for c, _ in under_torch(env, seconds=20)], [None, None])

    def test_receives_out_of_order_are_wrong_gradients_the_check_rejects(self):
        with tempfile.TemporaryDirectory() as d:
            env = {"PPV_PIPE_SCHEDULE": "csv",
                   "PPV_PIPE_FILE": lowered(d, receives_out_of_order)}
            code, rep, err = fuzz(env, "--runs", "10")
            self.assertEqual(code, 1, err)
            self.assertEqual(rep["failing_run"], 0)
            self.assertRegex(rep["failure"], r"^rank 1: AssertionError: stage 1 parameter 0: the "
                             r"gradient is not the reference's \(0\.538 off\)")
            got = under_torch(env)
            self.assertEqual([c for c, _ in got], [1, 1])
            self.assertIn("stage 1 parameter 0: the gradient is not the reference's (0.538 off)",
                          got[1][1])


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: test_torch_pipelining.py PPV [unittest args]")
    PPV = os.path.abspath(sys.argv.pop(1))
    unittest.main(verbosity=2)
