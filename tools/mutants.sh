#!/usr/bin/env bash
# tools/mutants.sh [PATCH...] - the mutation run (issue 14): applies each
# deliberate bug in tests/mutants/*.patch (or the ones named) to a fresh
# copy of the committed tree, builds it, runs the test suite (natively,
# without the install and README tests, which test packaging), and reports
# whether a test caught it. A mutant that survives is a claim no test backs.
# Each patch opens with a comment saying what it breaks.
#
# Exit 0 when every mutant was caught, 1 when one survived, 2 on a setup
# error. Too long for every CI run (about a minute and a half per mutant on
# 2 cores); run it on demand:
#   bash tools/mutants.sh                       # every mutant
#   cmake -S . -B build -DPPV_MUTATION_TESTS=ON && ctest --test-dir build -L mutation
set -uo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
cd "$src" || exit 2
patches=("$@")
[ ${#patches[@]} -gt 0 ] || patches=(tests/mutants/*.patch)
work=$(mktemp -d "${TMPDIR:-/tmp}/ppv_mutants_XXXXXX") || exit 2
trap 'rm -rf "$work"' EXIT
git -C "$src" archive --format=tar HEAD | tar -x -C "$work" || exit 2
cmake -S "$work" -B "$work/build" -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null || exit 2
cmake --build "$work/build" -j2 >/dev/null 2>&1 || { echo "mutants: the clean tree does not build"; exit 2; }
# A mutant whose patch says "needs: sanitize" (a dropped free, which only a
# leak checker sees) is built and tested with ASan+UBSan and leak detection.
if grep -l 'needs: sanitize' "${patches[@]}" >/dev/null 2>&1; then
  CC=gcc cmake -S "$work" -B "$work/build-asan" -DCMAKE_BUILD_TYPE=Debug -DPPV_SANITIZE=ON \
    >/dev/null || exit 2
  cmake --build "$work/build-asan" -j2 >/dev/null 2>&1 || { echo "mutants: the ASan build fails"; exit 2; }
fi
survived=0 total=0
printf '%-44s %-9s %s\n' mutant verdict "caught by"
for p in "${patches[@]}"; do
  name=$(basename "$p" .patch)
  total=$((total + 1))
  if ! (cd "$work" && patch -p1 -s <"$src/$p" >/dev/null); then
    printf '%-44s %-9s %s\n' "$name" ERROR "the patch does not apply"
    survived=$((survived + 1))
    continue
  fi
  dir=build
  grep -q 'needs: sanitize' "$src/$p" && dir=build-asan
  if ! cmake --build "$work/$dir" -j2 >"$work/build.log" 2>&1; then
    printf '%-44s %-9s %s\n' "$name" caught "the build (a compile error)"
  elif (cd "$work/$dir" && PPV_REQUIRE_H5PY=${PPV_REQUIRE_H5PY:-} ctest -j2 -E 'test_install|readme_examples' --timeout 600 >"$work/ctest.log" 2>&1); then
    printf '%-44s %-9s %s\n' "$name" SURVIVED "-"
    survived=$((survived + 1))
  else
    failed=$(grep -E '^\s+[0-9]+ - ' "$work/ctest.log" | awk '{print $3}' | tr '\n' ' ')
    printf '%-44s %-9s %s\n' "$name" caught "$failed"
  fi
  (cd "$work" && patch -p1 -R -s <"$src/$p") || { echo "mutants: cannot undo $name"; exit 2; }
done
echo "mutants: $((total - survived)) of $total caught"
[ "$survived" -eq 0 ]
