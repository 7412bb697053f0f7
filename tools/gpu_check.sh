#!/usr/bin/env bash
# gpu_check.sh - on a machine with a GPU: the CUDA device's tests and the
# figures a closing note reports. Usage: tools/gpu_check.sh [BUILD_DIR]
# (default build). Prints the GPU, runs tests/test_cuda (every op, a
# training step, every generated kind, ppv pp and the command line, CPU
# against GPU bit for bit), runs it again under compute-sanitizer's
# memcheck and initcheck where that is installed, and compares (and times)
# `ppv run` and `ppv pp` on both devices, and runs the NCCL transport on
# the real libraries (one rank through ppv launch; every GPU under mpirun
# where there are two or more) against the mock, and times the NCCL
# transport against raw ncclSend/ncclRecv (bench/ppv_bench_nccl).
# --no-sanitizer leaves compute-sanitizer out (it takes minutes; worth it
# when the CUDA code changed).
set -uo pipefail
sanitize=1
if [ "${1:-}" = --no-sanitizer ]; then
  sanitize=0
  shift
fi
build=${1:-build}
ppv=$build/tools/ppv
status=0
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
echo "== tests/test_cuda"
"$build/tests/test_cuda" || status=1
if ((sanitize)) && command -v compute-sanitizer >/dev/null; then
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
echo "== the NCCL transport on the real libraries (grad digest against the mock)"
# one rank through ppv launch (no MPI), then every GPU of the machine under
# mpirun (NCCL needs one GPU per rank)
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
ngpu=${ngpu:-0}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
unset PPV_NCCL_LIBRARY PPV_CUDART_LIBRARY
digest() { sed -n 's/.*"grad_digest":"\([0-9a-f]*\)".*/\1/p'; }
"$ppv" gen 1f1b -p 1 -m 4 -o "$tmp/one.csv" 2>/dev/null
a=$("$ppv" run "$tmp/one.csv" --json | digest)
b=$("$ppv" launch -n 1 -- "$ppv" run "$tmp/one.csv" --transport nccl --json | digest)
printf 'launch -n 1: mock %s nccl %s %s\n' "$a" "$b" "$([ -n "$b" ] && [ "$a" = "$b" ] && echo equal || echo DIFFERENT)"
[ -n "$b" ] && [ "$a" = "$b" ] || status=1
if ((ngpu >= 2)) && command -v mpirun >/dev/null; then
  for kind in 1f1b zbv dualpipev; do
    "$ppv" gen "$kind" -p "$ngpu" -m $((2 * ngpu)) -o "$tmp/n-$kind.csv" 2>/dev/null || continue
    a=$("$ppv" run "$tmp/n-$kind.csv" --json | digest)
    b=$(mpirun --oversubscribe -np "$ngpu" "$ppv" run "$tmp/n-$kind.csv" --transport nccl --json | digest)
    printf 'mpirun -np %d %-10s mock %s nccl %s %s\n' "$ngpu" "$kind" "$a" "$b" \
      "$([ -n "$b" ] && [ "$a" = "$b" ] && echo equal || echo DIFFERENT)"
    [ -n "$b" ] && [ "$a" = "$b" ] || status=1
  done
fi
if [ -x "$build/bench/ppv_bench_nccl" ]; then
  echo "== bench/ppv_bench_nccl: the NCCL transport against raw ncclSend/ncclRecv"
  "$ppv" launch -n 1 -- "$build/bench/ppv_bench_nccl" || status=1
  if ((ngpu >= 2)) && command -v mpirun >/dev/null; then
    mpirun --oversubscribe -np 2 "$build/bench/ppv_bench_nccl" || status=1
  fi
fi
if [ -x "$build/bench/ppv_bench_cuda" ]; then
  echo "== bench/ppv_bench_cuda: the cuBLAS path against raw cuBLAS"
  "$build/bench/ppv_bench_cuda" || status=1
fi
echo "gpu_check: $([ $status = 0 ] && echo OK || echo PROBLEM)"
exit $status
