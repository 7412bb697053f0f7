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
