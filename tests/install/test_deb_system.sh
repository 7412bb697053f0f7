#!/bin/sh
# test_deb_system.sh - the Debian package on the machine itself (CTest
# test_deb_system): as root, install the package cpack makes with the
# command of docs/ci.md's CI jobs (apt-get install ./ppv_*.deb, which runs
# dpkg -i), run `ppv demo` and the jobs' pytest gates from the installed
# files (the plugin found by its entry point), then `apt-get remove` it and
# check that nothing it installed is left. It changes the machine, so it runs only
# where asked: PPV_DEB_SYSTEM=1 (tools/setup.sh test sets it for one run,
# alone), as root, with no ppv package installed; elsewhere it is skipped
# (exit 77) with the reason. Prints "test_deb_system: N passed, 0 failed".
#
# Usage: test_deb_system.sh BUILD_DIR, with test_deb.sh's environment.
set -u

passed=0
fail() {
    echo "test_deb_system: FAIL: $*" >&2
    echo "test_deb_system: $passed passed, 1 failed"
    exit 1
}
skip() {
    echo "test_deb_system: skipped: $*"
    exit 77
}

[ $# -eq 1 ] || fail "usage: test_deb_system.sh BUILD_DIR"
[ "${PPV_DEB_SYSTEM:-0}" = 1 ] || skip "it installs ppv on this machine; PPV_DEB_SYSTEM=1 asks for that"
[ "$(id -u)" = 0 ] || skip "dpkg -i needs root"
if dpkg-query -W -f='${Status}' ppv 2>/dev/null | grep -q "install ok installed"; then
    fail "a ppv package is installed here already: this test installs and removes its own"
fi
[ ! -e /usr/bin/ppv ] || fail "/usr/bin/ppv exists and belongs to no ppv package"
build=$(cd "$1" && pwd)
source=$(cd "$PPV_SOURCE_DIR" && pwd)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ppv-test-deb-system.XXXXXX") || fail "mktemp -d failed"
installed=0
cleanup() {
    [ $installed = 1 ] && dpkg -r ppv >/dev/null 2>&1
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' HUP INT TERM

"$PPV_CPACK" -G DEB -B "$tmp/pkg" --config "$build/CPackConfig.cmake" >"$tmp/log" 2>&1 ||
    fail "cpack -G DEB failed: $(tail -20 "$tmp/log")"
deb=$tmp/pkg/ppv_${PPV_VERSION}_$(dpkg --print-architecture).deb

# The jobs of docs/ci.md: GitHub's `- run:` steps and GitLab's script, the
# same commands in both. apt-get update is left out (it needs the network;
# .ci/run has just run it); the install runs in the package's folder and
# the gates in the source tree, with Debian's PATH (its python3).
doc=$source/docs/ci.md
sed -n '/^<!-- ci jobs/,$p' "$doc" | sed -n 's/^ *- run: //p' >"$tmp/github"
sed -n '/^ppv-gates:/,/^```/p' "$doc" | sed -n 's/^    - //p' >"$tmp/gitlab"
cmp -s "$tmp/github" "$tmp/gitlab" ||
    fail "docs/ci.md's GitHub and GitLab jobs run different commands: $(diff "$tmp/github" "$tmp/gitlab")"
grep -v '^apt-get update$' "$tmp/github" >"$tmp/jobs"
[ "$(wc -l <"$tmp/jobs")" -eq 2 ] || fail "docs/ci.md's jobs are not an install and a pytest run: $(cat "$tmp/jobs")"
install_cmd=$(sed -n 1p "$tmp/jobs")
gates_cmd=$(sed -n 2p "$tmp/jobs")
case "$install_cmd" in
    "apt-get install -y ./$(basename "$deb") "*) ;;
    *) fail "docs/ci.md installs '$install_cmd', not this version's $(basename "$deb")" ;;
esac
debian_path=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

# 1. dpkg -i (through apt-get, as the jobs do), on this machine
installed=1
(cd "$(dirname "$deb")" && DEBIAN_FRONTEND=noninteractive PATH=$debian_path sh -c "$install_cmd") \
    >"$tmp/log" 2>&1 || fail "$install_cmd: $(tail -20 "$tmp/log")"
dpkg -L ppv >"$tmp/files" || fail "dpkg -L ppv failed after $install_cmd"
passed=$((passed + 1))

# 2. ppv demo and the Python package from the installed files, from /
cd / || fail "cd /"
[ "$(command -v ppv)" = /usr/bin/ppv ] || fail "ppv on PATH is $(command -v ppv), not /usr/bin/ppv"
env -u PPV_GOLDEN_MODULE ppv demo >"$tmp/demo" 2>&1 || fail "ppv demo exited with $?: $(tail -5 "$tmp/demo")"
grep -q "shipped golden files (/usr/bin/\.\./share/ppv/golden)" "$tmp/demo" ||
    fail "ppv demo did not use the installed golden files: $(grep 'golden files' "$tmp/demo")"
tail -1 "$tmp/demo" | grep -q "^demo: every golden file replays bit for bit$" ||
    fail "ppv demo ended with '$(tail -1 "$tmp/demo")'"
# (writing its bytecode, as Python does by default: removing the package
# must remove that too)
out=$(env -u PYTHONPATH -u PPV_PROGRAM -u PYTHONDONTWRITEBYTECODE /usr/bin/python3 -c \
    'import ppv, ppv.cli; print(ppv.__file__, ppv.cli.find_ppv())' 2>&1) ||
    fail "import ppv: $out"
[ "$out" = "/usr/lib/python3/dist-packages/ppv/__init__.py /usr/bin/ppv" ] ||
    fail "the installed Python package: '$out'"
[ -d /usr/lib/python3/dist-packages/ppv/__pycache__ ] ||
    fail "importing ppv as root wrote no bytecode: the removal of it is not tested"
passed=$((passed + 1))

# 3. the jobs' gates, with the installed ppv and plugin (by its entry point)
(cd "$source" && env -u PYTHONPATH -u PPV_PROGRAM PATH=$debian_path sh -c "$gates_cmd") \
    >"$tmp/pytest.log" 2>&1 || fail "$gates_cmd: $(tail -30 "$tmp/pytest.log")"
tail -1 "$tmp/pytest.log" | grep -q " passed" || fail "pytest: $(tail -1 "$tmp/pytest.log")"
tail -1 "$tmp/pytest.log" | grep -q "failed" && fail "pytest: $(tail -1 "$tmp/pytest.log")"
passed=$((passed + 1))

# 4. apt-get remove leaves nothing behind
DEBIAN_FRONTEND=noninteractive apt-get remove -y -qq ppv >"$tmp/log" 2>&1 ||
    fail "apt-get remove ppv: $(cat "$tmp/log")"
installed=0
status=$(dpkg-query -W -f='${Status}' ppv 2>/dev/null)
case "$status" in
    ""|*not-installed) ;;
    *) fail "after apt-get remove, dpkg says ppv is '$status'" ;;
esac
left=""
while read -r f; do
    [ -d "$f" ] && continue # /usr, /usr/bin, ... (shared); ppv's own are below
    [ -e "$f" ] && left="$left $f"
done <"$tmp/files"
for d in /usr/share/ppv /usr/lib/ppv /usr/include/ppv /usr/lib/cmake/ppv \
    /usr/lib/python3/dist-packages/ppv "/usr/lib/python3/dist-packages/ppv-$PPV_VERSION.dist-info"; do
    [ -e "$d" ] && left="$left $d"
done
[ -z "$left" ] || fail "apt-get remove left:$left"
passed=$((passed + 1))
echo "test_deb_system: $passed passed, 0 failed"
