"""tests/python/test_dist.py PPV - Python ranks under ppv's explorer:
`ppv fuzz py FILE.py:FUNCTION -n RANKS` with ppv.dist (python/ppv/dist.py).
The control plane of pp_control.py passes under every strategy; each of
its seeded failure modes is found within the runs stated here, told with
the rank and the Python place, and its minimal trace replays as the same
failure; bad input is a clear error, never a hang. Run by CTest
(python_dist); PPV is the ppv binary."""

import json
import os
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
PLANE = os.path.join(HERE, "pp_control.py")
BAD = os.path.join(HERE, "ranks", "bad_input.py")
PPV = None


def fuzz(*args, timeout=300):
    return subprocess.run([PPV, "fuzz", "py"] + list(args), capture_output=True, text=True,
                          timeout=timeout)


def report(*args):
    r = fuzz(*args, "--json")
    return r.returncode, (json.loads(r.stdout) if r.stdout.strip() else None), r.stderr


class ControlPlane(unittest.TestCase):
    def test_clean_passes_under_every_strategy(self):
        for strategy in ("random", "pct", "portfolio"):
            code, rep, err = report(f"{PLANE}:clean", "-n", "3", "--strategy", strategy,
                                    "--runs", "400")
            self.assertEqual(code, 0, err)
            self.assertTrue(rep["ok"])
            self.assertEqual(rep["runs"], 400)
            self.assertIsNone(rep["failure"])
            self.assertGreater(rep["distinct_interleavings"], 250)
        # it never probes or receives from any rank, so every order of its
        # calls is equivalent: dfs proves it with one class
        code, rep, err = report(f"{PLANE}:clean", "-n", "3", "--strategy", "dfs")
        self.assertEqual(code, 0, err)
        self.assertTrue(rep["complete"])
        self.assertEqual(rep["classes"], 1)

    def test_every_seeded_failure_mode_is_found_and_named(self):
        # (function, failing run at most, what the failure says)
        cases = [
            # a mismatch in the program's terms: the group by its ranks, the
            # root by the rank the program named, each rank's call and line
            ("fm02", 0, "rank 1: DistError: collective mismatch on the group [1,2]: rank 1 calls "
                        "broadcast float32[4] src=1 (pp_control.py:115); rank 2 calls all_reduce "
                        "float32[1] SUM (pp_control.py:104)"),
            ("fm03", 0, "rank 1: DistError: collective mismatch on the group [1,2]: rank 1 calls "
                        "all_reduce float32[1] SUM (pp_control.py:101); rank 2 calls broadcast "
                        "float32[4] src=1 (pp_control.py:129)"),
            ("fm04", 0, "rank 1: RuntimeError: the payload's shape is wrong (pp_control.py:114)"),
            ("fm22", 0, "deadlock after 100 scheduler steps: 3 of 3 ranks blocked"),
            ("fm23", 0, "rank 1: RuntimeError: cache epoch went backwards (pp_control.py:119)"),
            ("receive_order", 32, "deadlock after"),
        ]
        for function, bound, failure in cases:
            with self.subTest(function=function), tempfile.TemporaryDirectory() as out:
                code, rep, err = report(f"{PLANE}:{function}", "-n", "3", "--strategy", "random",
                                        "--runs", "200", "--out", out)
                self.assertEqual(code, 1, err)
                self.assertFalse(rep["ok"])
                self.assertLessEqual(rep["failing_run"], bound)
                self.assertTrue(rep["failure"].startswith(failure), rep["failure"])
                trace = os.path.join(out, "minimal.trace")
                self.assertEqual(rep["minimal_trace"], trace)
                r = fuzz(f"{PLANE}:{function}", "-n", "3", "--replay", trace)
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertIn("replay: fails again: ", r.stdout)
                self.assertIn("result: FAILED", r.stdout)
                # --json: the same verdict as one object
                r = fuzz(f"{PLANE}:{function}", "-n", "3", "--replay", trace, "--json")
                self.assertEqual(r.returncode, 1, r.stderr)
                j = json.loads(r.stdout, parse_constant=lambda c: 1 / 0)
                self.assertFalse(j["ok"])
                self.assertEqual(j["target"], "py")
                self.assertTrue(j["replay"]["fails_again"], j)

    def test_the_receive_order_deadlock_needs_an_interleaving(self):
        # round-robin alone passes it; each strategy finds it within the runs
        # stated (its first failing run, the same every time), and the
        # minimal run names both blocked ranks at their Python lines
        code, rep, err = report(f"{PLANE}:receive_order", "-n", "3", "--strategy", "random",
                                "--runs", "1")
        self.assertEqual(code, 0, err)
        self.assertTrue(rep["ok"])
        bounds = {"random": 1, "pct": 2, "portfolio": 1, "dfs": 4}
        for strategy, bound in bounds.items():
            with self.subTest(strategy=strategy):
                args = (f"{PLANE}:receive_order", "-n", "3", "--strategy", strategy,
                        "--runs", "200")
                code, rep, err = report(*args)
                self.assertEqual(code, 1, err)
                self.assertEqual(rep["failing_run"], bound)
                again = report(*args)[1]
                again["seconds"] = rep["seconds"]
                self.assertEqual(again, rep)  # the same report, byte for byte but the time
                self.assertTrue(rep["minimal_failure"].startswith("deadlock after "))
                story = rep["minimal_story"]
                self.assertIn("rank 0 at recv from 2 (pp_control.py:80): receive waits for rank 2 "
                              "to send", story)
                self.assertIn("rank 1 at send to 0 (pp_control.py:123): send of 16 bytes "
                              "(rendezvous) waits for rank 0 to post its receive", story)

    def test_explain_tells_the_receive_order_deadlock(self):
        with tempfile.TemporaryDirectory() as out:
            code, rep, err = report(f"{PLANE}:receive_order", "-n", "3", "--strategy", "random",
                                    "--runs", "100", "--out", out)
            self.assertEqual(code, 1, err)
            trace = os.path.join(out, "minimal.trace")
            r = subprocess.run([PPV, "fuzz", "explain", trace], capture_output=True, text=True,
                               timeout=120)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn(f"target: py {PLANE}:receive_order --ranks 3\n", r.stdout)
            # stage 0 probes the leader before its statistics are sent, then
            # finds the worker's heartbeat and takes it for them
            self.assertIn("rank 0  probes rank 1: nothing yet\n", r.stdout)
            self.assertIn("rank 0  probes rank 2: a message is there\n", r.stdout)
            self.assertIn("  rank 0 waits at recv from 2 (pp_control.py:80): receive waits for "
                          "rank 2 to send (rank 2 has returned)\n", r.stdout)
            self.assertTrue(r.stdout.endswith("(as recorded)\nresult: FAILED\n"), r.stdout)

    def test_a_trace_of_a_fixed_plane_no_longer_fails(self):
        with tempfile.TemporaryDirectory() as out:
            code, rep, err = report(f"{PLANE}:fm23", "-n", "3", "--runs", "5", "--out", out)
            self.assertEqual(code, 1, err)
            r = fuzz(f"{PLANE}:clean", "-n", "3", "--replay", os.path.join(out, "minimal.trace"))
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("replay: no longer fails (the trace recorded: rank 1: RuntimeError: "
                          "cache epoch went backwards", r.stdout)


class Api(unittest.TestCase):
    API = os.path.join(HERE, "ranks", "api.py")

    def test_every_call_gives_its_values_in_every_order(self):
        code, rep, err = report(f"{self.API}:everything", "-n", "3", "--strategy", "random",
                                "--runs", "300")
        self.assertEqual(code, 0, err)
        self.assertTrue(rep["ok"])
        # rank 0's three receives from any rank: every order of arrival is a
        # class of its own, and dfs runs each
        code, rep, err = report(f"{self.API}:everything", "-n", "4", "--strategy", "dfs")
        self.assertEqual(code, 0, err)
        self.assertTrue(rep["complete"])
        self.assertEqual(rep["classes"], 56)

    def test_outside_ppv_every_call_says_so(self):
        env = dict(os.environ, PYTHONPATH=os.path.join(HERE, "..", "..", "python"))
        r = subprocess.run([sys.executable, "-c", "import ppv.dist as d\n"
                            "try:\n d.send(b'x', 1)\nexcept d.DistError as e:\n print(e)"],
                           capture_output=True, text=True, env=env)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout, "ppv.dist is used outside a rank of `ppv fuzz py` (run the "
                                   "file under ppv fuzz py FILE.py:FUNCTION -n RANKS)\n")


class RanksAsProcesses(unittest.TestCase):
    """Every rank a process forked afresh each run (the default): module
    state is each rank's own and never carries from one run to the next;
    as threads (--ranks-as threads) the ranks share it, which such code
    cannot stand."""
    STATE = os.path.join(HERE, "ranks", "module_state.py")

    def test_module_state_is_each_ranks_own_in_every_run(self):
        for strategy in ("random", "pct", "portfolio", "dfs"):
            with self.subTest(strategy=strategy):
                code, rep, err = report(f"{self.STATE}:call_ids", "-n", "3", "--strategy",
                                        strategy, "--runs", "150")
                self.assertEqual(code, 0, (rep or {}).get("failure") or err)
                # dfs: the ring has two classes of interleaving, each run once
                self.assertEqual(rep["runs"], 2 if strategy == "dfs" else 150)
                self.assertTrue(rep["ok"])
        code, rep, err = report(f"{self.STATE}:call_ids", "-n", "3", "--runs", "20",
                                "--ranks-as", "threads")
        self.assertEqual(code, 1, err)
        self.assertEqual(rep["failing_run"], 0)
        self.assertEqual(rep["failure"], "rank 1: AssertionError: rank 1: the first call id is "
                                         "2, not 0 (module_state.py:16)")

    def test_a_ranks_output_comes_in_the_runs_order_every_time(self):
        args = (f"{self.STATE}:prints", "-n", "3", "--runs", "4", "--strategy", "random",
                "--seed", "3")
        a, b = fuzz(*args), fuzz(*args)
        self.assertEqual(a.returncode, 0, a.stderr)
        lines = [ln for ln in a.stdout.splitlines() if ln.startswith("rank ")]
        self.assertEqual(len(lines), 4 * 6)
        self.assertEqual(lines, [ln for ln in b.stdout.splitlines() if ln.startswith("rank ")])
        # each rank's own lines in its own order, every run
        for r in range(3):
            mine = [ln for ln in lines if ln.startswith(f"rank {r} ")]
            self.assertEqual([ln.split()[3] for ln in mine], ["0", "1"] * 4)

    def test_a_rank_whose_process_dies_is_named(self):
        crash = ("rank 1: its process was killed by signal 11 (Segmentation fault) before its "
                 "function returned")
        if os.environ.get("PPV_SANITIZED"):  # AddressSanitizer takes the signal, exits 1
            crash = ("rank 1: its process exited with status 1 before its function returned "
                     "(os._exit, or C code that calls exit)")
        cases = [("exits", "rank 1: its process exited with status 0 before its function "
                           "returned (os._exit, or C code that calls exit)"),
                 ("crashes", crash)]
        for function, want in cases:
            with self.subTest(function=function):
                code, rep, err = report(f"{BAD}:{function}", "-n", "2", "--runs", "20")
                self.assertEqual(code, 1, err)
                self.assertEqual(rep["failing_run"], 0)
                self.assertEqual(rep["failure"], want)

    def test_a_message_larger_than_a_process_carries_is_named(self):
        code, rep, err = report(f"{BAD}:too_big", "-n", "2", "--runs", "3")
        self.assertEqual(code, 1, err)
        self.assertEqual(rep["failure"], "rank 0: DistError: send to 1 (bad_input.py:74): the "
                                         "message is larger than a rank's process carries (256 "
                                         "MiB a call; --ranks-as threads has no such bound)")

    def test_a_thread_a_rank_starts_communicates_as_processes_only(self):
        # as processes the two senders wait on each other's receive (a
        # deadlock naming each thread's call); as threads of one
        # interpreter a rank cannot start one
        code, rep, err = report(f"{BAD}:thread_calls", "-n", "2", "--runs", "3")
        self.assertEqual(code, 1, err)
        self.assertEqual(rep["failure"], "deadlock after 6 scheduler steps: 2 of 2 ranks blocked")
        r = fuzz(f"{BAD}:thread_calls", "-n", "2", "--runs", "3")
        self.assertIn("  blocked: rank 0 at send to 1 (bad_input.py:85 in sender): send of 4 "
                      "bytes (rendezvous) waits for rank 1 to post its receive", r.stdout)
        code, rep, err = report(f"{BAD}:thread_calls", "-n", "2", "--runs", "3", "--ranks-as",
                                "threads")
        self.assertEqual(code, 1, err)
        self.assertEqual(rep["failure"], "rank 0: RuntimeError: a rank starts a thread (sender): "
                                         "under ppv fuzz py --ranks-as threads a rank's threads "
                                         "cannot take turns; run with --ranks-as processes (the "
                                         "default) (bad_input.py:89)")

    def test_a_wait_names_the_group_by_its_ranks_and_a_rank_that_returned(self):
        r = fuzz(f"{BAD}:group_left", "-n", "3", "--runs", "5")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("  blocked: rank 1 at barrier [1,2] (bad_input.py:97): collective on the group "
                      "[1,2] waits for rank 2 to join (rank 2 has returned)\n", r.stdout)

    def test_groups_of_a_world_of_more_than_6_ranks(self):
        big = os.path.join(HERE, "ranks", "big_world.py")
        for mode in ("processes", "threads"):
            for strategy in ("random", "pct"):
                with self.subTest(mode=mode, strategy=strategy):
                    code, rep, err = report(f"{big}:halves", "-n", "8", "--runs", "60",
                                            "--ranks-as", mode, "--strategy", strategy)
                    self.assertEqual(code, 0, (rep or {}).get("failure") or err)
                    self.assertEqual(rep["runs"], 60)
        r = fuzz(f"{big}:leader_skips", "-n", "8", "--runs", "5")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("  blocked: rank 0 at all_reduce [0,4] (big_world.py:30): collective on "
                      "the group [0,4] waits for rank 4 to join; rank 1 at barrier "
                      "(big_world.py:31): collective on the world waits for rank 0 to join;",
                      r.stdout)

    def test_tags_match_each_in_its_own_order(self):
        tags = os.path.join(HERE, "ranks", "tags.py")
        for strategy in ("random", "pct", "portfolio"):
            with self.subTest(strategy=strategy):
                code, rep, err = report(f"{tags}:out_of_order", "-n", "3", "--runs", "100",
                                        "--strategy", strategy)
                self.assertEqual(code, 0, (rep or {}).get("failure") or err)
                self.assertEqual(rep["runs"], 100)
        r = fuzz(f"{tags}:wrong_tag", "-n", "3", "--runs", "5")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("  blocked: rank 0 at send to 1 tag 5 (tags.py:33): send of 4 bytes "
                      "(rendezvous) waits for rank 1 to post its receive; rank 1 at recv from 0 "
                      "tag 4 (tags.py:35): receive waits for rank 0 to send\n", r.stdout)

    def test_objects_point_to_point_are_torchs_two_messages(self):
        objects = os.path.join(HERE, "ranks", "objects.py")
        code, rep, err = report(f"{objects}:relay", "-n", "3", "--runs", "50")
        self.assertEqual(code, 0, (rep or {}).get("failure") or err)
        self.assertEqual(rep["runs"], 50)
        # two senders at once to a receive from any rank: torch's own check
        for strategy, run in (("random", 1), ("pct", 4), ("dfs", 11)):
            with self.subTest(strategy=strategy):
                code, rep, err = report(f"{objects}:two_senders_at_once", "-n", "3", "--runs",
                                        "50", "--strategy", strategy)
                self.assertEqual(code, 1, err)
                self.assertEqual(rep["failing_run"], run)
                self.assertEqual(rep["failure"], "rank 0: RuntimeError: recv_object_list: "
                                 "mismatch in source ranks for object sizes and objects "
                                 "(torch's check) (objects.py:28)")

    def test_a_receive_before_the_wait_of_an_irecv_from_any_rank_is_refused(self):
        code, rep, err = report(f"{BAD}:recv_before_any_wait", "-n", "2", "--runs", "3")
        self.assertEqual(code, 1, err)
        self.assertEqual(rep["failure"], "rank 0: ValueError: recv from 1 (bad_input.py:103): "
                                         "irecv from any (bad_input.py:102) is still pending on "
                                         "this group; ppv makes a receive from any rank at its "
                                         "wait(), so no other receive may come before it (not "
                                         "modelled): wait() for it first (bad_input.py:103)")

    def test_a_wrong_ranks_as_is_refused(self):
        r = fuzz(f"{BAD}:quits", "-n", "2", "--ranks-as", "fibers")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--ranks-as is processes or threads, not 'fibers'", r.stderr)


class Jobs(unittest.TestCase):
    """--jobs J with ranks as processes: a zygote a job, each kept to a
    CPU; the report does not depend on J (with --ranks-as threads it is
    refused: BadInput)."""
    THREADS = os.path.join(HERE, "ranks", "threads.py")
    JOBS = os.path.join(HERE, "ranks", "jobs.py")

    def test_the_report_and_its_trace_are_the_same_for_any_number_of_jobs(self):
        for strategy, run in (("random", 6), ("pct", 3)):
            seen = []
            for jobs in ("1", "2", "3"):
                with self.subTest(strategy=strategy, jobs=jobs), \
                        tempfile.TemporaryDirectory() as out:
                    code, rep, err = report(f"{self.THREADS}:results_in_send_order", "-n", "3",
                                            "--runs", "40", "--strategy", strategy, "--jobs",
                                            jobs, "--out", out)
                    self.assertEqual(code, 1, err)
                    self.assertEqual(rep["failing_run"], run)
                    self.assertEqual(rep["failure"], "rank 0: RuntimeError: result 0 came from "
                                                     "rank 2, not 1 (threads.py:29)")
                    with open(os.path.join(out, "minimal.trace"), encoding="utf-8") as f:
                        seen.append((rep["minimal_prefix"], f.read()))
            self.assertEqual(seen[1], seen[0])
            self.assertEqual(seen[2], seen[0])

    def test_module_state_is_fresh_in_every_job(self):
        code, rep, err = report(f"{RanksAsProcesses.STATE}:call_ids", "-n", "3", "--runs", "60",
                                "--jobs", "2")
        self.assertEqual(code, 0, (rep or {}).get("failure") or err)
        self.assertEqual(rep["runs"], 60)

    @unittest.skipIf(len(os.sched_getaffinity(0)) < 2, "this process may use one CPU only")
    def test_each_jobs_ranks_keep_to_one_cpu(self):
        code, rep, err = report(f"{self.JOBS}:one_cpu", "-n", "3", "--runs", "30", "--jobs",
                                "2")
        self.assertEqual(code, 0, (rep or {}).get("failure") or err)
        self.assertEqual(rep["runs"], 30)
        # one job keeps to nothing: the ranks may run on every CPU
        code, rep, err = report(f"{self.JOBS}:one_cpu", "-n", "3", "--runs", "3")
        self.assertEqual(code, 1, err)
        self.assertIn("rank 0: RuntimeError: rank 0 may run on CPUs [", rep["failure"])


class BadInput(unittest.TestCase):
    def run_bad(self, function, *extra):
        return fuzz(f"{BAD}:{function}", "-n", "2", "--runs", "20", *extra, timeout=60)

    def test_a_payload_that_is_not_an_array_or_bytes(self):
        r = self.run_bad("list_payload")
        self.assertEqual(r.returncode, 1)
        self.assertIn("failure at run 0 (round-robin, ", r.stdout)
        self.assertIn("rank 0: TypeError: send to 1 (bad_input.py:11): the payload must be a "
                      "tensor, a numpy array or bytes, not list (bad_input.py:11)", r.stdout)
        r = self.run_bad("bytes_into")
        self.assertEqual(r.returncode, 1)
        self.assertIn("rank 1: TypeError: recv from 0 (bad_input.py:20): the payload is received "
                      "into, so it must be writable (a numpy array, a tensor or a bytearray), not bytes "
                      "(bad_input.py:20)", r.stdout)

    def test_a_rank_that_idles_fails_the_run(self):
        r = self.run_bad("idles", "--idle", "0.3")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("rank 1: ran for more than 0.3 s without a call to ppv from its start",
                      r.stdout)

    def test_a_rank_that_never_calls_is_its_peers_deadlock(self):
        r = self.run_bad("quits")
        self.assertEqual(r.returncode, 1)
        self.assertIn("blocked: rank 0 at recv from 1 (bad_input.py:31): receive waits for "
                      "rank 1 to send", r.stdout)
        r = self.run_bad("keeps_calling")
        self.assertEqual(r.returncode, 1)
        self.assertIn("rank 1: ValueError: rank 1 gives up (bad_input.py:38)", r.stdout)

    def test_a_rank_that_goes_on_after_its_run_stops_the_runs(self):
        r = self.run_bad("stubborn", "--idle", "0.3")
        self.assertEqual(r.returncode, 1)
        self.assertIn("blocked: rank 0 at recv from 1 (bad_input.py:43)", r.stdout)
        self.assertIn("ppv fuzz: warning: rank 1's process did not end within 1 s of its "
                      "run's end (does it catch DistError and go on?); it was killed; no run "
                      "was made after that\n", r.stderr)
        r = self.run_bad("stubborn", "--idle", "0.3", "--ranks-as", "threads")
        self.assertEqual(r.returncode, 1)
        self.assertIn("blocked: rank 0 at recv from 1 (bad_input.py:43)", r.stdout)
        self.assertIn("ppv fuzz: warning: rank 1's Python thread did not end within 1 s of its "
                      "run's end (does it catch DistError and go on?); no run was made after "
                      "that\n", r.stderr)

    def test_what_cannot_run_is_exit_2(self):
        syntax = os.path.join(HERE, "ranks", "bad_syntax.py")
        cases = [
            ([f"{syntax}:main", "-n", "2"], f"{syntax}: cannot import it: SyntaxError: "),
            ([f"{BAD}:nosuch", "-n", "2"], f"{BAD}: has no function nosuch"),
            ([f"{BAD}:not_a_function", "-n", "2"], f"{BAD}: has no function not_a_function"),
            ([f"{HERE}/nosuch.py:main", "-n", "2"], f"{HERE}/nosuch.py: cannot read it"),
            ([f"{BAD}x", "-n", "2"], "py takes FILE.py:FUNCTION (a Python file and the "
                                     "function every rank runs) or FILE.py"),
            ([f"{BAD}:quits"], "py needs -n RANKS"),
            ([f"{BAD}:quits", "-n", "2", "--jobs", "2", "--ranks-as", "threads"],
             "runs in one job"),
            ([f"{BAD}:quits", "-n", "2", "--replay", "x", "--runs", "3"],
             "--replay runs the trace once"),
            ([f"{BAD}:quits", "-n", "2", "--mesh", "2"], "a py target takes -n"),
            ([f"{BAD}:quits", "-n", "2", "--idle", "0"], "--idle needs seconds above 0"),
        ]
        for args, message in cases:
            with self.subTest(args=args):
                r = fuzz(*args, timeout=60)
                self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                self.assertIn(message, r.stderr)
                self.assertEqual(r.stdout, "")

    def test_a_trace_of_other_ranks_is_refused(self):
        with tempfile.TemporaryDirectory() as out:
            code, rep, err = report(f"{BAD}:quits", "-n", "2", "--runs", "3", "--out", out)
            self.assertEqual(code, 1, err)
            trace = os.path.join(out, "minimal.trace")
            r = fuzz(f"{BAD}:quits", "-n", "3", "--replay", trace)
            self.assertEqual(r.returncode, 2)
            self.assertIn(f"{trace} was taken on 2 ranks, not -n 3", r.stderr)


THREADS = os.path.join(HERE, "ranks", "threads.py")


class Threads(unittest.TestCase):
    """A rank's own threads (threading.Thread) take turns: a blocking call
    of one lets the others run, locks, events, queues, join and sleep are
    waits of the same kind, time is the rank's virtual clock, and what
    goes wrong is named in the program's terms."""

    def passes(self, function, ranks, runs, strategies=("random", "pct", "portfolio", "dfs")):
        """threads.py's function passes every run under each strategy."""
        for strategy in strategies:
            with self.subTest(strategy=strategy):
                code, rep, err = report(f"{THREADS}:{function}", "-n", str(ranks), "--strategy",
                                        strategy, "--runs", str(runs))
                self.assertEqual(code, 0, (rep or {}).get("failure") or err)
                self.assertTrue(rep["ok"])

    def test_a_seeded_bug_between_threads_is_found_and_its_trace_replays(self):
        # round-robin alone passes it: the results come in the order sent
        code, rep, err = report(f"{THREADS}:results_in_send_order", "-n", "3", "--strategy",
                                "random", "--runs", "1")
        self.assertEqual(code, 0, err)
        # each strategy finds it at the run stated (the same every time)
        for strategy, at in (("random", 6), ("pct", 3), ("portfolio", 4), ("dfs", 8)):
            with self.subTest(strategy=strategy), tempfile.TemporaryDirectory() as out:
                code, rep, err = report(f"{THREADS}:results_in_send_order", "-n", "3",
                                        "--strategy", strategy, "--runs", "100", "--out", out)
                self.assertEqual(code, 1, err)
                self.assertEqual(rep["failing_run"], at)
                self.assertEqual(rep["failure"], "rank 0: RuntimeError: result 0 came from rank "
                                                 "2, not 1 (threads.py:29)")
                trace = os.path.join(out, "minimal.trace")
                r = fuzz(f"{THREADS}:results_in_send_order", "-n", "3", "--replay", trace)
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertIn("replay: fails again: rank 0: RuntimeError: result 0 came from "
                              "rank 2, not 1 (threads.py:29)", r.stdout)

    def test_threads_that_wait_on_each_other_are_named(self):
        code, rep, err = report(f"{THREADS}:locks_taken_in_both_orders", "-n", "2", "--runs", "5")
        self.assertEqual(code, 1, err)
        self.assertEqual(rep["failing_run"], 0)
        self.assertEqual(rep["failure"], "rank 0: rank 0's threads wait on each other, and no call "
                                         "of theirs can complete: MainThread waits on a lock "
                                         "(threads.py:49); other waits on a lock (threads.py:44 in "
                                         "other)")

    def test_a_thread_that_raises_fails_the_run_naming_it(self):
        code, rep, err = report(f"{THREADS}:a_thread_raises", "-n", "2", "--runs", "5")
        self.assertEqual(code, 1, err)
        self.assertEqual(rep["failure"], "rank 1: thread bad: ValueError: a thread's own bug "
                                         "(threads.py:56)")

    def test_a_deadlock_through_threads_names_each_threads_call(self):
        r = fuzz(f"{THREADS}:both_threads_wait_for_rank_1", "-n", "3", "--runs", "5")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("deadlock after 7 scheduler steps: 2 of 3 ranks blocked", r.stdout)
        self.assertIn("  blocked: rank 0 at recv from 1 (threads.py:68): its threads' 2 calls "
                      "wait, none can complete: recv from 1 (threads.py:68); recv from 1 "
                      "(threads.py:66 in listener)", r.stdout)
        self.assertIn("  cycle: 0 -> 1 -> 0", r.stdout)

    def test_timeouts_run_on_the_ranks_clock(self):
        # the heartbeat's waits and the main thread's sleep end on virtual
        # time, when nothing else can go on: the same beats in every run
        r = fuzz(f"{THREADS}:heartbeats_on_the_rank_clock", "-n", "2", "--runs", "50")
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = [l for l in r.stdout.splitlines() if l.startswith("beats")]
        self.assertEqual(len(lines), 50)
        self.assertEqual(set(lines), {"beats 3 at [0.5, 1.0, 1.5], slept 2.000"})
        # a queue's get with a timeout waits for the thread that feeds it
        # (its receive can still complete), then times out on the clock
        r = fuzz(f"{THREADS}:a_queue_and_its_timeout", "-n", "2", "--runs", "60")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertEqual(r.stdout.count("got 7.0\n"), 60)
        self.assertEqual(r.stdout.count("empty after 1.5\n"), 60)

    def test_calls_that_complete_together_wake_the_rank_once(self):
        # both of rank 0's receives complete before it runs again: a third
        # thread's timeout of 100 s must not end for that, under any order
        self.passes("two_calls_complete_together", 3, 200)

    def test_each_thread_that_receives_from_any_rank_is_woken(self):
        # a results thread and a telemetry thread each receive from any rank
        # (tags 0 and 5): a message for either wakes the rank
        self.passes("two_threads_receive_from_any_rank", 3, 200)

    def test_a_thread_pool_left_running_ends_as_at_a_process_end(self):
        # threading's exit hooks run when the rank's function returns (a
        # pool never shut down stops its workers), then its threads end
        self.passes("a_thread_pool_left_running", 2, 50, ("random", "pct", "dfs"))

    def test_the_same_seed_gives_the_same_report(self):
        args = (f"{THREADS}:results_in_send_order", "-n", "3", "--runs", "30", "--seed", "5",
                "--strategy", "pct")
        a, b = report(*args)[1], report(*args)[1]
        a["seconds"] = b["seconds"]
        self.assertEqual(a, b)


if __name__ == "__main__":
    PPV = sys.argv.pop(1)
    unittest.main()
