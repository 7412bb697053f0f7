#!/usr/bin/env bash
# readme_examples.sh README SOURCE_DIR BUILD_DIR [MORE.md...] - runs the
# examples of README and of each MORE.md as a user pasting them in order
# would, so that the documents and the code cannot drift apart.
#
# Examples are the "$ " lines of a file's ```console blocks. Each file's
# examples run in one bash session of their own, in order, in a fresh
# directory that looks like the repository (tests/, golden/, python/, examples/ and build/ link
# to the real ones), so every file must be self-contained. Each example must
# exit 0, or N where its comment says "# exit N". Lines that follow a
# command inside its block are its expected standard output, compared
# exactly. A file named README.md must hold at least 4 examples and any
# other at least 1, so that a broken extraction cannot pass as an empty
# file. Prints one line per file and, last, the total:
# "readme_examples: N passed, M failed". Exits 0 when every example passed.
set -uo pipefail

if [ $# -lt 3 ]; then
  echo "usage: readme_examples.sh README SOURCE_DIR BUILD_DIR [MORE.md...]" >&2
  exit 2
fi
src=$2 build=$3
files=("$1" "${@:4}")

passed=0 failed=0
current= # the directory of the file being run, removed on any exit
trap '[ -n "$current" ] && rm -rf "$current"' EXIT

# run_file FILE: runs FILE's examples in a fresh directory; adds to passed
# and failed.
run_file() {
  local doc=$1 doc_shown work count k cmd want got problem min name
  local file_passed=0 file_failed=0
  name=$(basename "$doc")
  work=$(mktemp -d "${TMPDIR:-/tmp}/ppv_readme_XXXXXX") || return 1
  current=$work
  doc_shown=${doc#"$src"/}
  ln -s "$src/tests" "$work/tests"
  ln -s "$src/golden" "$work/golden"
  ln -s "$src/python" "$work/python"
  ln -s "$src/examples" "$work/examples"
  ln -s "$build" "$work/build"

  # Split the console blocks into cmd.N (the command), want.N (the exit
  # code) and out.N (expected output, if any).
  if ! awk -v dir="$work" '
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
  ' "$doc"; then
    echo "FAIL $doc_shown: cannot be read"
    failed=$((failed + 1))
    rm -rf "$work"
    return
  fi

  count=$(cat "$work/count")
  min=1
  [ "$name" = README.md ] && min=4
  if [ "$count" -lt "$min" ]; then
    echo "FAIL $doc_shown: found $count examples, fewer than $min"
    failed=$((failed + 1))
    rm -rf "$work"
    return
  fi

  # One script, so that exports carry from one example to the next. Its
  # python3 is the system's where there is one (Debian's python3-h5py is
  # for it), not another found first on PATH.
  {
    echo 'cd "$1" || exit 1'
    echo '[ -x /usr/bin/python3 ] && python3() { /usr/bin/python3 "$@"; }'
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

  for ((k = 1; k <= count; k++)); do
    cmd=$(cat "$work/cmd.$k") want=$(cat "$work/want.$k")
    got=$(cat "$work/rc.$k" 2>/dev/null || echo missing)
    problem=
    if [ "$got" != "$want" ]; then
      problem="exit $got, the document says $want"
    elif [ -f "$work/out.$k" ] && ! cmp -s "$work/out.$k" "$work/got.$k"; then
      problem="output differs from the document's:
$(diff "$work/out.$k" "$work/got.$k")"
    fi
    if [ -n "$problem" ]; then
      file_failed=$((file_failed + 1))
      echo "FAIL $doc_shown, example $k: \$ $cmd"
      echo "  $problem"
      sed 's/^/  stderr: /' "$work/err.$k" | head -5
    else
      file_passed=$((file_passed + 1))
    fi
  done
  echo "  $doc_shown: $file_passed of $count examples passed"
  passed=$((passed + file_passed))
  failed=$((failed + file_failed))
  rm -rf "$work"
}

for f in "${files[@]}"; do
  run_file "$f"
done
echo "readme_examples: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
