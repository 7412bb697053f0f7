#!/usr/bin/env bash
# gpu_check.sh - on a machine with a GPU: the CUDA device's tests and the
# figures a closing note reports. Usage: tools/gpu_check.sh [BUILD_DIR]
# (default build). Prints the GPU, runs tests/test_cuda (every op, a
# training step, every generated kind, ppv pp and the command line, CPU
# against GPU bit for bit), runs it again under compute-sanitizer's
# memcheck and initcheck where that is installed, and compares (and times)
# `ppv run` and `ppv pp` on both devices.
set -uo pipefail
build=${1:-build}
ppv=$build/tools/ppv
status=0
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
echo "== tests/test_cuda"
"$build/tests/test_cuda" || status=1
if command -v compute-sanitizer >/dev/null; then
  echo "== compute-sanitizer memcheck and initcheck (no kernel shares memory: no racecheck)"
  for tool in memcheck initcheck; do
    timeout 240 compute-sanitizer --tool $tool --error-exitcode 9 --print-limit 20 \
      "$build/tests/test_cuda" >"${OUT:-/tmp}/sanitizer_$tool.log" 2>&1
    rc=$?
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY|PASSED|FAILED" "${OUT:-/tmp}/sanitizer_$tool.log" | tail -4
    ((rc == 0)) || { echo "compute-sanitizer $tool: exit $rc"; status=1; }
  done
fi
echo "== ppv run, CPU against GPU (grad digest, milliseconds)"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
printf '%-18s %-18s %-18s %8s %8s\n' kind cpu cuda cpu_ms cuda_ms
for kind in gpipe 1f1b interleaved-1f1b zb-h1 zb-h2 zbv v-half v-min dualpipev; do
  "$ppv" gen "$kind" -p 4 -m 8 -o "$tmp/$kind.csv" 2>/dev/null || continue
  t0=$(date +%s%N)
  a=$("$ppv" run "$tmp/$kind.csv" --layers 8 --width 64 --json | sed 's/.*"grad_digest":"\([0-9a-f]*\)".*/\1/')
  t1=$(date +%s%N)
  b=$("$ppv" run "$tmp/$kind.csv" --layers 8 --width 64 --json --device cuda |
    sed 's/.*"grad_digest":"\([0-9a-f]*\)".*/\1/')
  t2=$(date +%s%N)
  printf '%-18s %-18s %-18s %8d %8d\n' "$kind" "$a" "$b" $(((t1 - t0) / 1000000)) \
    $(((t2 - t1) / 1000000))
  [ -n "$a" ] && [ "$a" = "$b" ] || status=1
done
echo "== ppv pp, CPU against GPU (output digest)"
for mesh in 1 2 4; do
  for kv in stash recompute; do
    a=$("$ppv" pp --mesh $mesh --kv $kv --chunks 8 --json | sed 's/.*"output_digest":"\([0-9a-f]*\)".*/\1/')
    b=$("$ppv" pp --mesh $mesh --kv $kv --chunks 8 --json --device cuda |
      sed 's/.*"output_digest":"\([0-9a-f]*\)".*/\1/')
    printf 'mesh %d kv %-9s cpu %s cuda %s %s\n' $mesh $kv "$a" "$b" "$([ "$a" = "$b" ] && echo equal || echo DIFFERENT)"
    [ -n "$a" ] && [ "$a" = "$b" ] || status=1
  done
done
if [ -x "$build/bench/ppv_bench_cuda" ]; then
  echo "== bench/ppv_bench_cuda: the cuBLAS path against raw cuBLAS"
  "$build/bench/ppv_bench_cuda" || status=1
fi
echo "gpu_check: $([ $status = 0 ] && echo OK || echo PROBLEM)"
exit $status
