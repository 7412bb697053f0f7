#!/usr/bin/env bash
# readme_examples.sh README SOURCE_DIR BUILD_DIR - runs the README's examples
# as a user pasting them in order would, so that the two cannot drift apart.
#
# Examples are the "$ " lines of the README's ```console blocks. They run in
# one bash session, in order, in a fresh directory that looks like the
# repository (tests/, golden/ and build/ link to the real ones). Each must
# exit 0, or N where its comment says "# exit N". Lines that follow a
# command inside its block are its expected standard output, compared
# exactly.
set -uo pipefail

readme=$1 src=$2 build=$3
work=$(mktemp -d "${TMPDIR:-/tmp}/ppv_readme_XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
ln -s "$src/tests" "$work/tests"
ln -s "$src/golden" "$work/golden"
ln -s "$build" "$work/build"

# Split the console blocks into cmd.N (the command), want.N (the exit code)
# and out.N (expected output, if any).
awk -v dir="$work" '
  /^```console$/ { inblock = 1; next }
  /^```/ { inblock = 0; next }
  !inblock { next }
  /^\$ / {
    n++
    cmd = substr($0, 3)
    code = 0
    if (match(cmd, /# exit [0-9]+/)) code = substr(cmd, RSTART + 7, RLENGTH - 7)
    printf "%s\n", cmd > (dir "/cmd." n)
    printf "%s\n", code > (dir "/want." n)
    close(dir "/cmd." n); close(dir "/want." n)
    next
  }
  n { printf "%s\n", $0 >> (dir "/out." n); close(dir "/out." n) }
  END { printf "%d\n", n > (dir "/count") }
' "$readme"

count=$(cat "$work/count")
if [ "$count" -lt 10 ]; then
  echo "readme_examples: found only $count examples in $readme" >&2
  exit 1
fi

# One script, so that exports carry from one example to the next.
{
  echo 'cd "$1" || exit 1'
    for ((k = 1; k <= count; k++)); do
    if grep -q '^export ' "$work/cmd.$k"; then
      # an export must reach the next examples: it runs in the session itself
      echo "$(cat "$work/cmd.$k") >\"\$1/got.$k\" 2>\"\$1/err.$k\""
    else
      echo "( $(cat "$work/cmd.$k")"
      echo ") >\"\$1/got.$k\" 2>\"\$1/err.$k\" </dev/null"
    fi
    echo "echo \$? >\"\$1/rc.$k\""
  done
} >"$work/run.sh"
bash "$work/run.sh" "$work"

passed=0 failed=0
for ((k = 1; k <= count; k++)); do
  cmd=$(cat "$work/cmd.$k") want=$(cat "$work/want.$k")
  got=$(cat "$work/rc.$k" 2>/dev/null || echo missing)
  problem=
  if [ "$got" != "$want" ]; then
    problem="exit $got, the README says $want"
  elif [ -f "$work/out.$k" ] && ! cmp -s "$work/out.$k" "$work/got.$k"; then
    problem="output differs from the README's:
$(diff "$work/out.$k" "$work/got.$k")"
  fi
  if [ -n "$problem" ]; then
    failed=$((failed + 1))
    echo "FAIL example $k: \$ $cmd"
    echo "  $problem"
    sed 's/^/  stderr: /' "$work/err.$k" | head -5
  else
    passed=$((passed + 1))
  fi
done
echo "readme_examples: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
