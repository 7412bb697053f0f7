"""tests/python/test_torch_corpus.py PPV - zero false alarms: every program
of torch_corpus.py completes under real torch.distributed (3 processes,
gloo, env:// rendezvous) and under `ppv fuzz py` with every strategy,
thousands of runs in all; and the seeded variants of torch_variants.py,
each a real bug of the kind, are found. Skipped, with the reason, where
torch is not installed (Debian's python3-torch; tools/setup.sh test
installs it). Run by CTest (python_torch_corpus); PPV is the ppv binary."""

import json
import os
import socket
import subprocess
import sys
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
CORPUS = os.path.join(HERE, "torch_corpus.py")
VARIANTS = os.path.join(HERE, "torch_variants.py")
PPV = None
# the clang suite of tools/setup.sh test runs a quarter of the runs (the gcc
# suite runs them all; the sanitizer build leaves this test out)
SCALE = float(os.environ.get("PPV_CORPUS_SCALE", "1"))


def scaled(runs):
    return str(max(20, int(runs * SCALE)))

try:
    import torch  # noqa: F401
    import torch.distributed
    TORCH = None if torch.distributed.is_available() else "torch.distributed is not available"
except ImportError as e:
    TORCH = f"torch is not installed ({e}; Debian: apt-get install python3-torch)"
if TORCH and os.environ.get("PPV_REQUIRE_TORCH"):  # tools/setup.sh test: no skipping
    raise SystemExit(f"PPV_REQUIRE_TORCH is set, but {TORCH}")

sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))  # ppv.dist, for the list
if not TORCH:
    import torch_corpus  # noqa: E402


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fuzz(*args):
    r = subprocess.run([PPV, "fuzz", "py"] + list(args) + ["--json"], capture_output=True,
                       text=True, timeout=600)
    rep = json.loads(r.stdout, parse_constant=lambda c: 1 / 0) if r.stdout.strip() else None
    return r.returncode, rep, r.stderr


# torch 2.4 and later ask env://'s store for libuv, which Debian's torch is
# built without ("use_libuv was requested but PyTorch was build without
# libuv support"); USE_LIBUV=0 is the launcher's own switch, and 1.13
# ignores it.
NO_LIBUV = {"USE_LIBUV": "0"}


@unittest.skipIf(TORCH, TORCH)
class UnderTorch(unittest.TestCase):
    def test_every_program_completes_under_torch_with_gloo(self):
        env = dict(os.environ, WORLD_SIZE="3", MASTER_ADDR="127.0.0.1",
                   MASTER_PORT=str(free_port()), PPV_CORPUS_BACKEND="torch", **NO_LIBUV)
        procs = [subprocess.Popen([sys.executable, CORPUS], env=dict(env, RANK=str(r)),
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                 for r in range(3)]
        for r, p in enumerate(procs):
            out, err = p.communicate(timeout=300)
            self.assertEqual(p.returncode, 0, f"rank {r}: {err[-2000:]}")
            self.assertEqual(out, "done\n")


@unittest.skipIf(TORCH, TORCH)
class UnderPpv(unittest.TestCase):
    def test_no_program_is_a_failure_under_any_strategy(self):
        total = 0
        for name in torch_corpus.PROGRAMS:
            for strategy in ("random", "pct", "portfolio"):
                with self.subTest(program=name, strategy=strategy):
                    code, rep, err = fuzz(f"{CORPUS}:{name}", "-n", "3", "--strategy", strategy,
                                          "--runs", scaled(100))
                    self.assertEqual(code, 0, (rep or {}).get("failure") or err)
                    self.assertTrue(rep["ok"])
                    self.assertEqual(rep["runs"], int(scaled(100)))
                    total += rep["runs"]
        self.assertEqual(total, len(torch_corpus.PROGRAMS) * 3 * int(scaled(100)))

    def test_as_threads_the_ranks_share_module_state_and_such_programs_fail(self):
        # what ranks as processes (the default) are for: the same programs
        # pass above; as threads of one interpreter they share the module
        cases = [("module_counter_for_call_ids", "rank 1: AssertionError: rank 1: the first call "
                                                 "id is 2, not 0 (torch_corpus.py:223)"),
                 ("parallel_state_globals", "rank 1: AssertionError: pipeline model parallel "
                                            "group is already initialized (torch_corpus.py:236)")]
        for name, failure in cases:
            with self.subTest(program=name):
                code, rep, err = fuzz(f"{CORPUS}:{name}", "-n", "3", "--runs", "20",
                                      "--ranks-as", "threads")
                self.assertEqual(code, 1, err)
                self.assertEqual(rep["failing_run"], 0)
                self.assertEqual(rep["failure"], failure)

    def test_dfs_explores_every_class_of_the_first_three(self):
        # the programs ppv once called deadlocks, proven clean in every order
        for name in torch_corpus.PROGRAMS[:3]:
            with self.subTest(program=name):
                code, rep, err = fuzz(f"{CORPUS}:{name}", "-n", "3", "--strategy", "dfs")
                self.assertEqual(code, 0, (rep or {}).get("failure") or err)
                self.assertTrue(rep["complete"])

    def test_the_same_seed_gives_the_same_report(self):
        args = (f"{CORPUS}:two_isends_then_recv_any", "-n", "3", "--runs", "50", "--seed", "7")
        a, b = fuzz(*args)[1], fuzz(*args)[1]
        a["seconds"] = b["seconds"]
        self.assertEqual(a, b)


SCRIPT = os.path.join(HERE, "torch_script.py")


def torch_launch(script, n, **env):
    """Runs script as torchrun would: n processes, RANK, WORLD_SIZE and
    MASTER_* set, gloo. Each one's (exit code, stderr)."""
    base = dict(os.environ, WORLD_SIZE=str(n), MASTER_ADDR="127.0.0.1",
                MASTER_PORT=str(free_port()), PPV_CORPUS_BACKEND="torch", **NO_LIBUV, **env)
    procs = [subprocess.Popen([sys.executable, script], env=dict(base, RANK=str(r)),
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for r in range(n)]
    errs = [p.communicate(timeout=300)[1] for p in procs]
    return [(p.returncode, e) for p, e in zip(procs, errs)]


@unittest.skipIf(TORCH, TORCH)
class Unchanged(unittest.TestCase):
    """torch.distributed code as it is: the script under real torch, then
    under ppv as each rank's __main__ (`ppv fuzz py FILE.py -n N`)."""

    def test_the_script_runs_under_torch_and_under_ppv(self):
        for r, (code, err) in enumerate(torch_launch(SCRIPT, 3)):
            self.assertEqual(code, 0, f"rank {r} under torch: {err[-1500:]}")
        code, rep, err = fuzz(SCRIPT, "-n", "3", "--runs", scaled(300))
        self.assertEqual(code, 0, (rep or {}).get("failure") or err)
        self.assertEqual(rep["runs"], int(scaled(300)))
        self.assertEqual(rep["target"], f"py {SCRIPT}")

    def test_bad_input_is_named_never_a_hang(self):
        cases = [("mpi", "ValueError: init_process_group: ppv stands in for the backends gloo, "
                         "nccl, ppv, not 'mpi'"),
                 ("no_init", "RuntimeError: Default process group has not been initialized"),
                 ("fork", "RuntimeError: a rank forks or execs"),
                 ("signature", "rank 1: TypeError: send() missing 1 required positional "
                               "argument: 'dst' (torch_script.py:21)")]
        for variant, want in cases:
            with self.subTest(variant=variant):
                env = dict(os.environ, PPV_SCRIPT_VARIANT=variant)
                r = subprocess.run([PPV, "fuzz", "py", SCRIPT, "-n", "3", "--runs", "5",
                                    "--json"], capture_output=True, text=True, timeout=120,
                                   env=env)
                self.assertEqual(r.returncode, 1, r.stderr)
                rep = json.loads(r.stdout)
                self.assertIn(want, rep["failure"])
                self.assertIn("(torch_script.py:", rep["failure"])


PLANE = os.path.join(HERE, "torch_pp_control.py")


@unittest.skipIf(TORCH, TORCH)
class ControlPlane(unittest.TestCase):
    """The PP0/PP1 control plane written against torch.distributed: its
    clean version passes under real torch and under ppv; each seeded bug is
    found at the run stated here under every strategy, named, and its
    minimal trace replays as the same failure."""

    def test_the_clean_plane_passes_under_torch_and_under_ppv(self):
        for r, (code, err) in enumerate(torch_launch(PLANE, 3)):
            self.assertEqual(code, 0, f"rank {r} under torch: {err[-1500:]}")
        for strategy in ("random", "pct", "portfolio", "dfs"):
            with self.subTest(strategy=strategy):
                code, rep, err = fuzz(PLANE, "-n", "3", "--strategy", strategy, "--runs",
                                      scaled(300))
                self.assertEqual(code, 0, (rep or {}).get("failure") or err)
                self.assertTrue(rep["ok"])
                # dfs too: its classes outnumber 300
                self.assertEqual(rep["runs"], int(scaled(300)))

    def test_every_seeded_bug_is_found_named_and_replays(self):
        cases = [  # (variant, the failure, found at run: the same for every strategy)
            ("fm02", "rank 1: DistError: collective mismatch on the group [1,2]: rank 1 calls "
                     "broadcast float32[4] src=1 (torch_pp_control.py:111); rank 2 calls "
                     "all_reduce float32[1] SUM (torch_pp_control.py:"),
            ("fm03", "rank 2: DistError: collective mismatch on the group [1,2]: rank 1 calls "
                     "all_reduce float32[1] SUM (torch_pp_control.py:100); rank 2 calls "
                     "broadcast float32[4] src=1 (torch_pp_control.py:"),
            ("fm22", "deadlock after 126 scheduler steps: 3 of 3 ranks blocked"),
            ("receive_order", "rank 0: RuntimeError: the leader served 7 chunks, not 5 "
                              "(torch_pp_control.py:83)"),
            ("module_state", "rank 2: RuntimeError: the KV cache holds 4 chunks, more than the "
                             "window of 3 (torch_pp_control.py:141)"),
        ]
        import tempfile
        for variant, failure in cases:
            env = dict(os.environ, PPV_PLANE_VARIANT=variant)
            for strategy in ("random", "pct", "portfolio", "dfs"):
                with self.subTest(variant=variant, strategy=strategy), \
                        tempfile.TemporaryDirectory() as out:
                    r = subprocess.run([PPV, "fuzz", "py", PLANE, "-n", "3", "--strategy",
                                        strategy, "--runs", "200", "--out", out, "--json"],
                                       capture_output=True, text=True, timeout=300, env=env)
                    self.assertEqual(r.returncode, 1, r.stderr)
                    rep = json.loads(r.stdout)
                    self.assertEqual(rep["failing_run"], 0)
                    self.assertTrue(rep["failure"].startswith(failure), rep["failure"])
                    again = subprocess.run([PPV, "fuzz", "py", PLANE, "-n", "3", "--replay",
                                            os.path.join(out, "minimal.trace")],
                                           capture_output=True, text=True, timeout=120, env=env)
                    self.assertEqual(again.returncode, 1, again.stderr)
                    self.assertIn("replay: fails again: ", again.stdout)


@unittest.skipIf(TORCH, TORCH)
class SeededBugs(unittest.TestCase):
    """Each variant is a real bug (it fails or hangs under torch too): ppv
    finds it, names it in the program's terms, and its trace replays."""

    def test_each_variant_is_found_and_named(self):
        cases = [
            # (function, first failing run under random, what the failure says)
            ("recv_order_deadlock", 0, "deadlock after "),
            ("isend_never_received", 0, "deadlock after "),
            ("mismatched_collectives", 0,
             "DistError: collective mismatch on the group of every rank: rank 0 calls "
             "all_reduce float32[2] SUM (torch_variants.py:"),
            ("wrong_dtype_reduction", 0, "DistError: collective mismatch on the group of every "
                                         "rank: rank 0 calls all_reduce int64[1] SUM"),
            ("avg_on_gloo", 0, "ValueError: all_reduce (torch_variants.py:"),
        ]
        for function, bound, failure in cases:
            with self.subTest(function=function):
                code, rep, err = fuzz(f"{VARIANTS}:{function}", "-n", "3", "--runs", "100")
                self.assertEqual(code, 1, err)
                self.assertLessEqual(rep["failing_run"], bound)
                self.assertIn(failure, rep["failure"])

    def test_polling_an_irecv_is_the_hang_gloo_has(self):
        # gloo's irecv never reports completion before wait(): the loop spins
        code, rep, err = fuzz(f"{VARIANTS}:poll_irecv", "-n", "2", "--runs", "3")
        self.assertEqual(code, 1, err)
        self.assertIn("hang", rep["failure"])


if __name__ == "__main__":
    PPV = sys.argv.pop(1)
    unittest.main(verbosity=2)
