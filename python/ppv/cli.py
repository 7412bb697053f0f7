"""ppv.cli: the ppv program from Python. Finds it, runs a command with
--json and hands back the parsed report, or raises with ppv's own words.
The pytest plugin (ppv.pytest) is built on it; it needs nothing but the
standard library.

The Python package links no library of ppv's: ppv.record, ppv.digest and
ppv.dist are Python, and the world ppv.dist talks to is given to it by the
ppv process that runs the ranks (ppv fuzz py). What it must find is the
program, in this order (find_ppv):

1. $PPV_PROGRAM, when set: that file and nothing else;
2. the package's own installed copy: PREFIX/bin/ppv beside
   PREFIX/lib/python3/dist-packages/ppv (the .deb, cmake --install), or
   this source tree's build/tools/ppv (PYTHONPATH=python);
3. pkg-config's ppv (its bindir), where ppv.pc is found;
4. ppv on PATH.

When none works, PpvNotFound says what was tried and why each failed.
"""
import json
import os
import shutil
import subprocess

from ppv import __version__

__all__ = ["PpvNotFound", "PpvInputError", "GateFailure", "find_ppv", "version", "arguments",
           "run_report"]


class PpvNotFound(RuntimeError):
    """No ppv program was found; the message lists each place tried."""


class PpvInputError(RuntimeError):
    """ppv refused the command (exit 2: bad input, bad usage, a ppv too old
    for an option): the message is ppv's, with what to do."""


class GateFailure(AssertionError):
    """The check ran and found a problem (exit 1): the message is ppv's own
    report; .report is its --json object."""

    def __init__(self, message, report):
        super().__init__(message)
        self.report = report


def _executable(path):
    return os.path.isfile(path) and os.access(path, os.X_OK)


def _own_copy():
    """Where the ppv that came with this package is: PREFIX/bin/ppv for a
    package under PREFIX/lib/python3*/{dist,site}-packages, the source tree's
    build/tools/ppv for python/ppv, else None."""
    here = os.path.dirname(os.path.realpath(__file__))
    parts = here.split(os.sep)
    if (len(parts) >= 5 and parts[-2] in ("dist-packages", "site-packages") and
            parts[-3].startswith("python3") and parts[-4] == "lib"):
        return os.path.join(os.sep.join(parts[:-4]) or os.sep, "bin", "ppv")
    source = os.path.dirname(os.path.dirname(here))
    if parts[-2:] == ["python", "ppv"] and os.path.isfile(os.path.join(source, "CMakeLists.txt")):
        return os.path.join(source, "build", "tools", "ppv")
    return None


def find_ppv():
    """The path of the ppv program (the order of the module docstring), or
    PpvNotFound naming every place tried."""
    tried = []
    explicit = os.environ.get("PPV_PROGRAM")
    if explicit:
        if _executable(explicit):
            return explicit
        raise PpvNotFound("PPV_PROGRAM is %s, which is not an executable file" % explicit)
    tried.append("PPV_PROGRAM (not set)")
    candidate = _own_copy()
    if candidate:
        if _executable(candidate):
            return candidate
        tried.append("%s (no such program)" % candidate)
    pkg_config = shutil.which("pkg-config")
    if pkg_config:
        got = subprocess.run([pkg_config, "--variable=bindir", "ppv"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, universal_newlines=True)
        bindir = got.stdout.strip()
        if got.returncode == 0 and bindir:
            candidate = os.path.join(bindir, "ppv")
            if _executable(candidate):
                return candidate
            tried.append("pkg-config ppv (%s: no such program)" % candidate)
        elif got.returncode != 0:
            tried.append("pkg-config ppv (no ppv.pc on its search path)")
        else:
            tried.append("pkg-config ppv (its ppv.pc has no bindir)")
    else:
        tried.append("pkg-config ppv (no pkg-config)")
    on_path = shutil.which("ppv")
    if on_path:
        return on_path
    tried.append("ppv on PATH (none)")
    raise PpvNotFound("cannot find the ppv program; tried: " + "; ".join(tried) +
                      ". Install ppv (the .deb, or cmake --install) or set PPV_PROGRAM")


def version(program=None):
    """ppv's version as the program prints it (`ppv version`)."""
    program = program or find_ppv()
    got = subprocess.run([program, "version"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         universal_newlines=True, timeout=60)
    words = got.stdout.split()
    return words[1] if got.returncode == 0 and len(words) > 1 else "unknown"


def arguments(options):
    """Command-line options from keyword arguments: ranks=3 is --ranks 3,
    strict=True is --strict, False or None leaves the option out, and a list
    repeats it (ignore=["a", "b"] is --ignore a --ignore b)."""
    args = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value is None or value is False:
            continue
        if value is True:
            args.append(flag)
        elif isinstance(value, (list, tuple)):
            for v in value:
                args += [flag, str(v)]
        else:
            args += [flag, str(value)]
    return args


def _refusal(program, stderr):
    """PpvInputError's message for an exit 2, naming an option this ppv does
    not know as what it likely is: a ppv older than this package."""
    text = stderr.strip() or "ppv exited with 2 and said nothing"
    if "unrecognized option" in text or "invalid option" in text:
        text += ("\n(ppv at %s is version %s, the Python package %s: an option it does not "
                 "know is one from a newer ppv, or misspelt)" %
                 (program, version(program), __version__))
    return text


TIMEOUT = 1800  # seconds a ppv command may take before run_report gives up on it


def _run(argv, timeout, cwd, **streams):
    """subprocess.run with a bound: a ppv that does not finish in timeout
    seconds is killed and is a RuntimeError, never a result."""
    try:
        return subprocess.run(argv, universal_newlines=True, timeout=timeout, cwd=cwd, **streams)
    except subprocess.TimeoutExpired:
        raise RuntimeError("%s did not finish in %g s (timeout=)" % (" ".join(argv), timeout))


def run_report(command, args, verdict, timeout=None, cwd=None):
    """Runs `ppv COMMAND ARGS --json` and returns its report (the parsed
    JSON) when report[verdict] is true. Raises GateFailure (exit 1) with
    ppv's text report as the message (the command run again without --json:
    ppv is deterministic), PpvInputError (exit 2) with what ppv said, and
    RuntimeError for anything else (a crash, a report that is not JSON, a
    run that took longer than timeout seconds, TIMEOUT when None)."""
    program = find_ppv()
    timeout = TIMEOUT if timeout is None else timeout
    argv = [program] + command + args + ["--json"]
    got = _run(argv, timeout, cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if got.returncode == 2:
        raise PpvInputError(_refusal(program, got.stderr))
    try:
        report = json.loads(got.stdout)
    except ValueError:
        raise RuntimeError("%s exited with %d and printed no JSON report: %s" %
                           (" ".join(argv), got.returncode, (got.stderr or got.stdout)[-2000:]))
    if got.returncode == 0 and report.get(verdict) is True:
        return report
    if got.returncode != 1:
        raise RuntimeError("%s exited with %d: %s" % (" ".join(argv), got.returncode,
                                                        got.stderr[-2000:]))
    if command[0] == "fuzz":
        lines = [report.get("failure") or "failed"]
        if report.get("minimal_story"):
            lines.append(report["minimal_story"])
        if report.get("minimal_trace"):
            lines.append("minimal trace: %s (ppv fuzz py ... --replay %s)" %
                         (report["minimal_trace"], report["minimal_trace"]))
        raise GateFailure("\n".join(lines), report)
    text = _run(argv[:-1], timeout, cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT).stdout
    raise GateFailure(text.strip(), report)
