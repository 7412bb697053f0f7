#!/usr/bin/env bash
# sweep.sh PPV FAILWRITE_SO [STRIDE [NAMES]] - the allocation and I/O failure sweep
# (issue 16), in the manner of SQLite's fault simulation. PPV is a ppv
# built with -DPPV_FAILINJECT=ON (its own allocations counted, the N-th
# failing: PPV_FAIL_ALLOC) and, for the leak check, -DPPV_SANITIZE=ON;
# FAILWRITE_SO fails the N-th write (PPV_FAIL_WRITE). Each command below
# runs once to count its allocations and writes, then once for every n
# (every STRIDE-th; default 1) with the n-th allocation failing, and once
# for every n with the n-th write failing. Every such run must end
# cleanly: exit 2 with a "ppv CMD:" message and no output file or
# temporary left behind, or exit 0 with exactly a clean run's output (the
# failure was absorbed). A crash, a sanitizer report (a leak included), a
# hang (60 s), exit 1 or a silent wrong answer fails the sweep. Prints the
# number of failure points exercised per command. NAMES (comma-separated,
# default all: check,run,record,replay,diff,conform) sweeps only those commands, so
# that CTest can run the sweep in parts side by side.
set -uo pipefail
ppv=$1 so=$2 stride=${3:-1} names=${4:-check,run,record,replay,diff,conform}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/ppv_failsweep_XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
export ASAN_OPTIONS=detect_leaks=1:exitcode=86:verify_asan_link_order=0
export LSAN_OPTIONS="suppressions=$here/../lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS=halt_on_error=1:exitcode=86
"$ppv" gen 1f1b -p 2 -m 4 -o s.csv || exit 1
"$ppv" record g.h5 s.csv --layers 2 --width 8 >/dev/null || exit 1
cp g.h5 h.h5
"$ppv" pp --chunks 3 --record i.h5 >/dev/null || exit 1

# name | command (OUT is the file it writes, if any) | that file
cmds=(
  "check|check s.csv --json|"
  "run|run s.csv --layers 2 --width 8 --json|"
  "record|record OUT s.csv --layers 2 --width 8|out.h5"
  "replay|replay g.h5 --json|"
  "diff|diff g.h5 h.h5 --json|"
  "conform|conform i.h5 --json|"
)
strip() { sed -E 's/"seconds":[0-9.e+-]+//g' "$1"; }
status=0
points_total=0
for spec in "${cmds[@]}"; do
  IFS='|' read -r name cmdline out <<<"$spec"
  case ",$names," in *",$name,"*) ;; *) continue ;; esac
  line=${cmdline//OUT/$out}
  rm -f alloc.counts write.counts out.h5
  # shellcheck disable=SC2086
  PPV_FAIL_COUNTS=alloc.counts "$ppv" $line >clean.out 2>clean.err
  clean_rc=$?
  # shellcheck disable=SC2086
  PPV_FAIL_WRITE_COUNTS=write.counts LD_PRELOAD=$so "$ppv" $line >/dev/null 2>&1
  if [ "$clean_rc" -ne 0 ]; then
    echo "failsweep: $name: the clean run exits $clean_rc" >&2
    head -20 clean.err >&2
    status=1
    continue
  fi
  strip clean.out >clean.cmp
  nalloc=$(sort -n alloc.counts | tail -1)
  nwrite=$(sort -n write.counts | tail -1)
  points=0 bad=0
  for kind in ALLOC WRITE; do
    total=$nalloc pre=()
    [ "$kind" = WRITE ] && total=$nwrite pre=(LD_PRELOAD="$so")
    for ((n = 1; n <= total; n += stride)); do
      rm -f out.h5 .out.h5.tmp.* 2>/dev/null
      # shellcheck disable=SC2086
      env "${pre[@]}" "PPV_FAIL_$kind=$n" timeout 60 "$ppv" $line >got.out 2>got.err
      rc=$?
      points=$((points + 1))
      why=
      if [ "$rc" -eq 0 ]; then
        strip got.out | cmp -s - clean.cmp || why="exit 0 with other output than a clean run"
      elif [ "$rc" -eq 2 ]; then
        grep -q "^ppv $name: " got.err || why="exit 2 without a 'ppv $name:' message"
        if [ -n "$out" ] && [ -e "$out" ]; then why="exit 2 but $out was left behind"; fi
        if ls -a | grep -q '\.tmp\.'; then why="exit 2 but a temporary file was left behind"; fi
      elif [ "$rc" -eq 86 ]; then
        why="a sanitizer report"
      else
        why="exit $rc"
      fi
      if [ -n "$why" ]; then
        bad=$((bad + 1))
        if [ "$bad" -le 8 ]; then
          echo "failsweep: $name, $kind $n: $why" >&2
          grep -E 'ERROR|SUMMARY|#[0-9] |^ppv' got.err | head -12 | sed 's/^/  /' >&2
        fi
      fi
    done
  done
  echo "failsweep: $name: $points failure points ($nalloc allocations, $nwrite writes, every $stride), $bad bad"
  points_total=$((points_total + points))
  [ "$bad" -eq 0 ] || status=1
done
echo "failsweep: $points_total failure points exercised"
exit $status
