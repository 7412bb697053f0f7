#!/usr/bin/env python3
"""tools/sweep.py - the outside sweep: ppv run the way a hostile world runs it.

Five sections, each a count of cases and of the ones that went wrong:

  mutants  every shipped golden file with bytes flipped, set or cut off (a
           seeded stream of mutants): `ppv replay` and `ppv diff` must neither
           crash nor hang, and must judge the file's structure alike (a
           replay that says OK where diff cannot read the file, or a replay
           that refuses a file diff calls the same, is a failure).
  kills    SIGKILL and SIGTERM at seeded moments of `record` and
           `pp --record`: nothing may be left in the folder but the target,
           complete or absent. The same with PPV_OUTPUT_NAMED=1 (the
           temporary-name fallback): SIGTERM leaves nothing, SIGKILL leaves
           its temporary, which the next record into the folder removes.
  disk     a full disk (a small tmpfs, mounted where this runs as root and
           may mount; skipped otherwise): every writer exits 2 naming the
           operating system's reason and leaves nothing.
  targets  outputs into a FIFO with a reader, a symbolic link, a link into a
           missing folder, a directory, and (as root) null and full
           character devices made in a private folder, never the system's.
  numbers  every numeric option one past its limits and malformed: exit 2
           naming the option, nothing on standard output.

Prints a table of counts and exits 1 when any case went wrong, 2 on a
setup error. CI runs `--short` (a few hundred mutants, ten kills).

    python3 tools/sweep.py [--ppv PATH] [--short] [--mutants N] [--kills N]
                           [--seed S] [--only SECTION,...]
"""
import argparse
import os
import random
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
SECTIONS = ["mutants", "kills", "disk", "targets", "numbers"]
TIMEOUT_S = 120  # any one ppv command; past it, a hang


class Section:
    def __init__(self, name):
        self.name, self.cases, self.failed, self.skipped = name, 0, 0, 0
        self.notes, self.problems = [], []

    def case(self, ok, what=""):
        self.cases += 1
        if not ok:
            self.failed += 1
            if len(self.problems) < 20:
                self.problems.append(what)


def ppv_run(ppv, args, env=None, timeout=TIMEOUT_S, cwd=None):
    """(exit code, stdout, stderr); code None for a hang, -N for signal N."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    try:
        p = subprocess.run([ppv] + args, capture_output=True, text=True, errors="replace",
                           timeout=timeout, env=full_env, cwd=cwd, stdin=subprocess.DEVNULL)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        return None, "", "(no end after %d s)" % timeout


def listing(d):
    return sorted(os.listdir(d))


# ---- mutants ------------------------------------------------------------------------

def mutate(rng, data):
    """A mutant of data and what was done to it."""
    b = bytearray(data)
    kind = rng.random()
    if kind < 0.8:
        at, bit = rng.randrange(len(b)), rng.randrange(8)
        b[at] ^= 1 << bit
        return bytes(b), "bit %d of byte %d flipped" % (bit, at)
    if kind < 0.9:
        at = rng.randrange(len(b))
        b[at] = rng.randrange(256)
        return bytes(b), "byte %d set to %d" % (at, b[at])
    at = rng.randrange(len(b))
    return bytes(b[:at]), "cut at byte %d" % at


def sweep_mutants(ppv, n, rng, work, goldens):
    s = Section("mutants")
    pairs = {}
    path = os.path.join(work, "mutant.h5")
    for k in range(n):
        golden = goldens[k % len(goldens)]
        with open(golden, "rb") as f:
            data, what = mutate(rng, f.read())
        with open(path, "wb") as f:
            f.write(data)
        name = "%s, %s" % (os.path.basename(golden), what)
        r, _, rerr = ppv_run(ppv, ["replay", path])
        d, _, derr = ppv_run(ppv, ["diff", golden, path])
        pairs[(r, d)] = pairs.get((r, d), 0) + 1
        if r is None or d is None:
            s.case(False, "%s: %s hangs" % (name, "replay" if r is None else "diff"))
        elif r not in (0, 1, 2) or d not in (0, 1, 2):
            s.case(False, "%s: replay exit %s, diff exit %s (a crash): %s%s"
                   % (name, r, d, rerr.strip()[-200:], derr.strip()[-200:]))
        elif r == 0 and d == 2:
            s.case(False, "%s: replay says OK, diff cannot read it: %s" % (name, derr.strip()))
        elif r == 2 and d == 0:
            s.case(False, "%s: replay refuses a file diff calls the same: %s"
                   % (name, rerr.strip()))
        else:
            s.case(True)
    s.notes.append("(replay, diff) exits: " + ", ".join(
        "%s: %d" % (pair, count) for pair, count in sorted(pairs.items(), key=str)))
    return s


# ---- kills ------------------------------------------------------------------------------

def kill_case(ppv, d, sched, k, rng, env, sig):
    """One writer killed by sig; the names left beside s.csv."""
    target = os.path.join(d, "out.h5")
    if k % 2 == 0:
        args = ["record", target, sched, "--layers", "6", "--width", "64"]
    else:
        args = ["pp", "--chunks", "1000000", "--record", target]
    full_env = dict(os.environ)
    full_env.update(env)
    p = subprocess.Popen([ppv] + args, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         env=full_env)
    time.sleep(rng.uniform(0.005, 0.25))
    p.send_signal(sig)
    p.wait()
    left = [x for x in listing(d) if x not in ("s.csv", "out.h5")]
    complete = True
    if os.path.exists(target):  # finished before the signal, or an older complete file
        code, _, _ = ppv_run(ppv, ["conform" if k % 2 else "replay", target])
        complete = code == 0
        os.unlink(target)
    return left, complete


def sweep_kills(ppv, n, rng, work):
    s = Section("kills")
    d = os.path.join(work, "kills")
    os.mkdir(d)
    sched = os.path.join(d, "s.csv")
    if ppv_run(ppv, ["gen", "zbv", "-p", "2", "-m", "4", "-o", sched])[0] != 0:
        raise SystemExit("sweep: ppv gen failed")
    left_named = 0
    for named in (False, True):
        env = {"PPV_OUTPUT_NAMED": "1"} if named else {}
        for k in range(n):
            sig = signal.SIGKILL if k % 4 < 2 else signal.SIGTERM
            left, complete = kill_case(ppv, d, sched, k, rng, env, sig)
            what = "%s%s at a random moment of %s" % (
                "PPV_OUTPUT_NAMED=1: " if named else "", sig.name,
                "record" if k % 2 == 0 else "pp --record")
            if not complete:
                s.case(False, what + ": the target is not a complete file")
            elif named and sig == signal.SIGKILL:
                # the fallback's known debris: the next record into the folder removes it
                left_named += len(left)
                code, _, err = ppv_run(ppv, ["record", os.path.join(d, "out.h5"), sched], env=env)
                os.unlink(os.path.join(d, "out.h5"))
                after = [x for x in listing(d) if x not in ("s.csv", "out.h5")]
                s.case(code == 0 and not after, what + ": the next record left %s (exit %s) %s"
                       % (" ".join(after), code, err.strip()))
            else:
                s.case(not left, what + ": left " + " ".join(left))
    s.notes.append("temporaries SIGKILL left at a temporary name (then removed): %d"
                   % left_named)
    return s


# ---- a full disk ---------------------------------------------------------------------------

def sweep_disk(ppv, work):
    s = Section("disk")
    mnt = os.path.join(work, "full")
    os.mkdir(mnt)
    if os.geteuid() != 0 or subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", mnt],
            capture_output=True).returncode != 0:
        s.skipped += 1
        s.notes.append("skipped: cannot mount a small tmpfs here (needs root)")
        return s
    try:
        sched = os.path.join(work, "big.csv")
        ppv_run(ppv, ["gen", "zbv", "-p", "8", "-m", "64", "-o", sched])
        cases = [
            ["gen", "zbv", "-p", "16", "-m", "256", "-o", os.path.join(mnt, "g.csv")],
            ["record", os.path.join(mnt, "r.h5"), sched],
            ["pp", "--chunks", "4", "--record", os.path.join(mnt, "p.h5")],
            ["show", sched, "--svg", os.path.join(mnt, "s.svg")],
            ["check", sched, "--junit", os.path.join(mnt, "j.xml")],
        ]
        # fill what the cases could fit in, so even small outputs meet a full disk
        fd = os.open(os.path.join(mnt, "filler"), os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            while os.write(fd, b"\0" * 4096) > 0:
                pass
        except OSError:
            pass
        os.close(fd)
        for args in cases:
            code, out, err = ppv_run(ppv, args)
            left = [x for x in listing(mnt) if x != "filler"]
            s.case(code == 2 and "No space left on device" in err and not left,
                   "ppv %s: exit %s, left %s, %s" % (" ".join(args[:2]), code, left, err.strip()))
    finally:
        subprocess.run(["umount", mnt], capture_output=True)
    return s


# ---- special targets ---------------------------------------------------------------------

def sweep_targets(ppv, work):
    s = Section("targets")
    d = os.path.join(work, "targets")
    os.mkdir(d)
    want = ppv_run(ppv, ["gen", "1f1b", "-p", "2", "-m", "2"])[1]
    sched = os.path.join(d, "s.csv")
    ppv_run(ppv, ["gen", "1f1b", "-p", "2", "-m", "2", "-o", sched])
    # a FIFO with a reader: written straight through, still a FIFO
    for what, args in (("gen", ["gen", "1f1b", "-p", "2", "-m", "2", "-o"]),
                       ("record", ["record", None, sched])):
        fifo = os.path.join(d, what + ".fifo")
        os.mkfifo(fifo)
        got = []
        reader = threading.Thread(target=lambda: got.append(open(fifo, "rb").read()))
        reader.start()
        argv = [a if a is not None else fifo for a in args] + ([fifo] if what == "gen" else [])
        code, _, err = ppv_run(ppv, argv, timeout=60)
        reader.join(60)
        data = got[0] if got else b""
        good = want.encode() if what == "gen" else b"\x89HDF\r\n\x1a\n"
        s.case(code == 0 and data.startswith(good) and stat.S_ISFIFO(os.lstat(fifo).st_mode),
               "%s into a FIFO: exit %s, %d bytes read, %s" % (what, code, len(data), err.strip()))
    # a symbolic link: the target written, the link kept
    os.symlink("target.csv", os.path.join(d, "link.csv"))
    code, _, err = ppv_run(ppv, ["gen", "1f1b", "-p", "2", "-m", "2", "-o",
                                 os.path.join(d, "link.csv")])
    ok = (code == 0 and os.path.islink(os.path.join(d, "link.csv"))
          and open(os.path.join(d, "target.csv")).read() == want)
    s.case(ok, "gen into a symbolic link: exit %s, %s" % (code, err.strip()))
    # a link into a missing folder, and a directory: exit 2, nothing made
    os.symlink("missing/x.csv", os.path.join(d, "dangling.csv"))
    for name in ("dangling.csv", "."):
        before = listing(d)
        code, out, err = ppv_run(ppv, ["gen", "1f1b", "-p", "2", "-m", "2", "-o",
                                       os.path.join(d, name)])
        s.case(code == 2 and not out and listing(d) == before,
               "gen into %s: exit %s, %s" % (name, code, err.strip()))
    # character devices made here (as root), never the system's own
    if os.geteuid() != 0:
        s.skipped += 2
        s.notes.append("character devices skipped (needs root to mknod)")
        return s
    for name, minor, want_code in (("null", 3, 0), ("full", 7, 2)):
        dev = os.path.join(d, name)
        os.mknod(dev, 0o666 | stat.S_IFCHR, os.makedev(1, minor))
        code, _, err = ppv_run(ppv, ["record", dev, sched])
        still = stat.S_ISCHR(os.lstat(dev).st_mode)
        reason = want_code == 0 or "No space left on device" in err
        s.case(code == want_code and still and reason,
               "record into a %s device: exit %s, still a device: %s, %s"
               % (name, code, still, err.strip()))
    return s


# ---- numbers -------------------------------------------------------------------------------

NUMBERS = [  # (command before the option, the option, one past each limit)
    (["gen", "1f1b", "-m", "2"], "-p", ["0", "1048577"]),
    (["gen", "1f1b", "-p", "2"], "-m", ["0", "16777217"]),
    (["pp"], "--mesh", ["0", "65"]),
    (["pp"], "--chunks", ["0", "1000001"]),
    (["pp"], "--d-in", ["0", "1025"]),
    (["pp"], "--hard-cut-at", ["0", "1000000"]),
    (["pp"], "--seed", ["-1", "9223372036854775808"]),
    (["pp"], "--fingerprint-every", ["-1", "1000001"]),
    (["fuzz", "pp"], "--runs", ["0", "1000000001"]),
    (["fuzz", "pp"], "--jobs", ["0", "65"]),
    (["fuzz", "pp"], "--seed", ["-1", "18446744073709551616"]),
    (["run", "@"], "--layers", ["0", "4097"]),
    (["run", "@"], "--seed", ["-1", "99999999999999999999"]),
    (["check", "@"], "--msg-bytes", ["-1", "1125899906842625"]),
    (["launch"], "-n", ["0", "1025"]),
]
MALFORMED = [" 2", "+2", "2,", "", "2x", "0x10", "2 "]


def sweep_numbers(ppv, work):
    s = Section("numbers")
    sched = os.path.join(work, "numbers.csv")
    ppv_run(ppv, ["gen", "1f1b", "-p", "2", "-m", "2", "-o", sched])
    for cmd, opt, past in NUMBERS:
        for bad in past + MALFORMED:
            argv = [sched if a == "@" else a for a in cmd] + [opt, bad]
            if cmd[0] == "launch":
                argv.append("true")
            code, out, err = ppv_run(ppv, argv, timeout=60)
            s.case(code == 2 and opt in err and not out,
                   "ppv %s %s '%s': exit %s, %s" % (" ".join(cmd), opt, bad, code, err.strip()))
    return s


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ppv", default=None, help="the ppv binary (default: build/tools/ppv, "
                    "else ppv on PATH)")
    ap.add_argument("--short", action="store_true", help="CI's size: 300 mutants, 10 kills")
    ap.add_argument("--mutants", type=int, default=None, help="mutants (default 3000)")
    ap.add_argument("--kills", type=int, default=None, help="kills each way (default 40)")
    ap.add_argument("--seed", type=int, default=1, help="the mutants' and kills' seed")
    ap.add_argument("--only", default=",".join(SECTIONS),
                    help="sections, comma-separated: " + ",".join(SECTIONS))
    a = ap.parse_args()
    only = a.only.split(",")
    for name in only:
        if name not in SECTIONS:
            ap.error("--only: no section %r (%s)" % (name, ",".join(SECTIONS)))
    for name, v in (("--mutants", a.mutants), ("--kills", a.kills)):
        if v is not None and v < 1:
            ap.error("%s needs a positive count" % name)
    nmut = a.mutants or (300 if a.short else 3000)
    nkill = a.kills or (10 if a.short else 40)
    ppv = a.ppv or os.path.join(REPO, "build", "tools", "ppv")
    if not os.path.exists(ppv):
        ppv = shutil.which("ppv")
    if not ppv or not os.access(ppv, os.X_OK):
        print("sweep: no ppv binary (build it, or name it with --ppv)", file=sys.stderr)
        return 2
    gdir = os.path.join(REPO, "golden")
    goldens = sorted(os.path.join(gdir, x) for x in os.listdir(gdir) if x.endswith(".h5"))
    if not goldens:
        print("sweep: no golden files in %s/golden" % REPO, file=sys.stderr)
        return 2
    work = tempfile.mkdtemp(prefix="ppv_sweep_")
    rng = random.Random(a.seed)
    results = []
    try:
        for name in SECTIONS:
            if name not in only:
                continue
            t0 = time.time()
            if name == "mutants":
                sec = sweep_mutants(ppv, nmut, random.Random(rng.random()), work, goldens)
            elif name == "kills":
                sec = sweep_kills(ppv, nkill, random.Random(rng.random()), work)
            elif name == "disk":
                sec = sweep_disk(ppv, work)
            elif name == "targets":
                sec = sweep_targets(ppv, work)
            else:
                sec = sweep_numbers(ppv, work)
            sec.seconds = time.time() - t0
            results.append(sec)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print("%-9s %7s %7s %7s %8s %8s" % ("section", "cases", "ok", "failed", "skipped", "seconds"))
    for sec in results:
        print("%-9s %7d %7d %7d %8d %8.1f" % (sec.name, sec.cases, sec.cases - sec.failed,
                                             sec.failed, sec.skipped, sec.seconds))
    for sec in results:
        for note in sec.notes:
            print("%s: %s" % (sec.name, note))
        for p in sec.problems:
            print("%s: FAILED: %s" % (sec.name, p))
    failed = sum(sec.failed for sec in results)
    print("sweep: %s (seed %d)" % ("%d failed" % failed if failed else "every case as it must be",
                                   a.seed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
