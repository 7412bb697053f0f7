#!/usr/bin/env bash
# golden/make_goldens.sh - regenerates the shipped golden files from fixed
# seeds with the ppv built in build/. Run from anywhere:
#   bash golden/make_goldens.sh
# Each file replays bit for bit (`ppv replay golden/NAME.h5`); tests do that.
set -euo pipefail
cd "$(dirname "$0")/.."
ppv=./build/tools/ppv
export SOURCE_DATE_EPOCH=1767225600 # 2026-01-01T00:00:00Z: the recorded creation time
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

"$ppv" gen 1f1b -p 4 -m 8 -o "$tmp/1f1b_p4_m8.csv"
"$ppv" record golden/train_1f1b_p4_m8.h5 "$tmp/1f1b_p4_m8.csv" --policy random --seed 1
"$ppv" gen zbv -p 2 -m 4 -o "$tmp/zbv_p2_m4.csv"
"$ppv" record golden/train_zbv_p2_m4_recompute.h5 "$tmp/zbv_p2_m4.csv" --recompute all \
  --policy pct --seed 7 --semantics eager --layers 6 --width 16

# Inference recordings (ppv pp --record): PP0 and PP1, KV stash and KV
# recompute, each across a hard cut. `ppv replay` feeds the recorded
# envelopes to a mesh rebuilt from the file and compares every result.
"$ppv" pp --mesh 1 --chunks 6 --hard-cut-at 3 --policy random --seed 1 \
  --record golden/infer_pp0_stash_cut.h5
"$ppv" pp --mesh 1 --chunks 6 --kv recompute --hard-cut-at 3 --policy random --seed 2 \
  --record golden/infer_pp0_recompute_cut.h5
"$ppv" pp --mesh 2 --chunks 6 --hard-cut-at 3 --policy pct --seed 3 \
  --record golden/infer_pp1_stash_cut.h5
"$ppv" pp --mesh 4 --chunks 8 --kv recompute --recompute-every 2 --hard-cut-at 4 --policy random \
  --seed 4 --record golden/infer_pp1_mesh4_recompute_cut.h5
