#!/bin/sh
# test_install.sh - the installed package works for an outside program
# (CTest test_install, registered in tests/CMakeLists.txt).
#
# Installs the build into a fresh prefix with `cmake --install`, checks the
# installed files, compiles every public header on its own, builds
# main.c here with find_package(ppv) and with pkg-config, runs both and
# compares their output with the expected text exactly. The prefix is a
# mktemp -d folder, removed on exit. Six checks, in order; the first that
# fails stops the test with its reason and "test_install: N passed, 1
# failed" (exit 1); all six print "test_install: 6 passed, 0 failed".
#
# Usage: test_install.sh BUILD_DIR, with the environment (set by CTest):
#   PPV_CMAKE PPV_CONFIG PPV_GENERATOR PPV_MAKE_PROGRAM PPV_CC PPV_PKG_CONFIG
#   PPV_VERSION PPV_BINDIR PPV_LIBDIR PPV_INCLUDEDIR PPV_MANDIR PPV_GOLDENDIR PPV_PYTHONDIR
#   PPV_MAN_PAGES (space-separated page names, ppv.1 ppv-check.1 ...)
set -u

passed=0
fail() {
    echo "test_install: FAIL: $*" >&2
    echo "test_install: $passed passed, 1 failed"
    exit 1
}

# Runs a command with its output in $tmp/log; on failure shows the log.
run_logged() {
    what=$1
    shift
    if ! "$@" >"$tmp/log" 2>&1; then
        cat "$tmp/log" >&2
        fail "$what: '$*' failed (output above)"
    fi
}

[ $# -eq 1 ] || fail "usage: test_install.sh BUILD_DIR"
build=$1
here=$(cd "$(dirname "$0")" && pwd)
for v in PPV_CMAKE PPV_CONFIG PPV_GENERATOR PPV_CC PPV_PKG_CONFIG PPV_VERSION PPV_BINDIR \
    PPV_LIBDIR PPV_INCLUDEDIR PPV_MANDIR PPV_GOLDENDIR PPV_PYTHONDIR PPV_MAN_PAGES; do
    eval "[ -n \"\${$v:-}\" ]" || fail "$v is not set (run this through ctest)"
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ppv-test-install.XXXXXX") || fail "mktemp -d failed"
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT TERM
prefix=$tmp/prefix

# 1. Install.
unset DESTDIR # it would move the whole tree out of the prefix
run_logged "cmake --install" "$PPV_CMAKE" --install "$build" --config "$PPV_CONFIG" \
    --prefix "$prefix"
# An absolute DESTINATION would ignore --prefix and write outside it.
outside=$(grep -v "^$prefix/" "$build/install_manifest.txt")
[ -z "$outside" ] || fail "cmake --install --prefix wrote outside the prefix (an absolute
DESTINATION in an install rule?):
$outside"
passed=$((passed + 1))

# 2. The installed files.
headers="ppv_spec.h ppv_kernels.h ppv_engine.h ppv_golden.h ppv_fuzz.h" # one public header per layer
missing=""
check_file() {
    [ -f "$prefix/$1" ] || missing="$missing $1"
}
check_file "$PPV_BINDIR/ppv"
for h in $headers actions.def dtypes.def exit_codes.def contract.def inject.def ppv_version.h; do
    check_file "$PPV_INCLUDEDIR/ppv/$h"
done
if [ ! -f "$prefix/$PPV_LIBDIR/libppv.a" ] && [ ! -f "$prefix/$PPV_LIBDIR/libppv.so" ]; then
    missing="$missing $PPV_LIBDIR/libppv.a-or-.so"
fi
for f in ppvConfig.cmake ppvConfigVersion.cmake ppvTargets.cmake; do
    check_file "$PPV_LIBDIR/cmake/ppv/$f"
done
check_file "$PPV_LIBDIR/pkgconfig/ppv.pc"
# the Python package, with the contract's field list inside it
for f in __init__.py record.py _contract.py digest.py; do
    check_file "$PPV_PYTHONDIR/ppv/$f"
done
for page in $PPV_MAN_PAGES; do
    check_file "$PPV_MANDIR/man1/$page"
done
# every command that `ppv help` lists has its page
for cmd in $("$PPV_BUILD_PPV" help | sed -n 's/^  \([a-z-]*\)  .*/\1/p'); do
    check_file "$PPV_MANDIR/man1/ppv-$cmd.1"
done
golden=$PPV_GOLDENDIR/train_1f1b_p4_m8.h5
check_file "$golden"
[ -z "$missing" ] || fail "not installed under $prefix:$missing"
for page in ppv.1 ppv-check.1; do
    grep -q '^\.TH ' "$prefix/$PPV_MANDIR/man1/$page" ||
        fail "$PPV_MANDIR/man1/$page has no .TH line: not a man page"
done
# the installed package imports on its own (the field list needs no h5py)
PYTHONPATH=$prefix/$PPV_PYTHONDIR /usr/bin/python3 -c \
    'from ppv import _contract; assert dict(_contract.ENVELOPE_FIELDS)["call_id"] == "int"' \
    >"$tmp/py" 2>&1 || fail "the installed Python package ppv does not import: $(cat "$tmp/py")"
# ... and is of this version (python/ppv/__init__.py against CMakeLists.txt)
pyversion=$(PYTHONPATH=$prefix/$PPV_PYTHONDIR /usr/bin/python3 -c 'import ppv; print(ppv.__version__)' 2>&1)
[ "$pyversion" = "$PPV_VERSION" ] ||
    fail "the Python package says version '$pyversion', the project $PPV_VERSION (python/ppv/__init__.py)"
passed=$((passed + 1))

# 3. The installed binary runs from the prefix.
"$prefix/$PPV_BINDIR/ppv" version >"$tmp/version" 2>&1 ||
    fail "installed 'ppv version' exited with $?: $(cat "$tmp/version")"
grep -q "$PPV_VERSION" "$tmp/version" ||
    fail "installed 'ppv version' printed '$(cat "$tmp/version")', not version $PPV_VERSION"
# the installed demo replays the installed golden files
"$prefix/$PPV_BINDIR/ppv" demo >"$tmp/demo" 2>&1 ||
    fail "installed 'ppv demo' exited with $?: $(tail -5 "$tmp/demo")"
grep -q "shipped golden files ($prefix/$PPV_BINDIR/\.\./share/ppv/golden)" "$tmp/demo" ||
    fail "installed 'ppv demo' did not use the installed golden files: $(grep 'golden files' "$tmp/demo")"
# ... through the installed golden-file module (HDF5), not the build's
# (ppv loads it for the commands that need it, tools/golden_module.c)
if [ "${PPV_GOLDEN_LINKED:-0}" = 0 ]; then
    LD_DEBUG=files "$prefix/$PPV_BINDIR/ppv" demo >/dev/null 2>"$tmp/loaded" ||
        fail "installed 'ppv demo' under LD_DEBUG=files exited with $?"
    grep -q "file=$prefix/$PPV_BINDIR/\.\./$PPV_LIBDIR/ppv/libppv_golden\.so " "$tmp/loaded" ||
        fail "installed 'ppv demo' did not load $PPV_LIBDIR/ppv/libppv_golden.so from the prefix: $(grep 'libppv_golden' "$tmp/loaded" | head -3)"
fi
passed=$((passed + 1))

# 4. Every public header compiles on its own from the prefix.
for h in $headers; do
    printf '#include <ppv/%s>\n' "$h" >"$tmp/one_header.c"
    run_logged "header ppv/$h on its own" "$PPV_CC" -std=c11 -Wall -Wextra -Werror \
        -fsyntax-only -I"$prefix/$PPV_INCLUDEDIR" "$tmp/one_header.c"
done
passed=$((passed + 1))

cat >"$tmp/expected" <<EOF
ppv $PPV_VERSION
1f1b ranks=4 microbatches=8: 64 actions
check: ok, rank 0 peak activation 4
golden against itself: same
EOF

# Runs a built consumer on the installed golden file and compares its output.
check_output() {
    how=$1
    LD_LIBRARY_PATH="$prefix/$PPV_LIBDIR${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        "$2" "$prefix/$golden" >"$tmp/out" 2>&1 ||
        fail "the program built with $how exited with $?: $(cat "$tmp/out")"
    diff -u "$tmp/expected" "$tmp/out" >"$tmp/diff" ||
        fail "the program built with $how printed other output (- expected, + got):
$(cat "$tmp/diff")"
}

# 5. find_package(ppv) and ppv::ppv, from the prefix only.
set -- -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$PPV_CC" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF
[ -n "${PPV_MAKE_PROGRAM:-}" ] && set -- "$@" -DCMAKE_MAKE_PROGRAM="$PPV_MAKE_PROGRAM"
run_logged "configuring tests/install with find_package(ppv)" \
    "$PPV_CMAKE" -S "$here" -B "$tmp/consumer" -G "$PPV_GENERATOR" "$@"
found=$(sed -n 's/^ppv_DIR:PATH=//p' "$tmp/consumer/CMakeCache.txt")
[ "$found" = "$prefix/$PPV_LIBDIR/cmake/ppv" ] ||
    fail "find_package(ppv) found '$found', not the package in $prefix/$PPV_LIBDIR/cmake/ppv"
run_logged "building tests/install against ppv::ppv" "$PPV_CMAKE" --build "$tmp/consumer"
check_output "find_package(ppv)" "$tmp/consumer/ppv_install_consumer"
passed=$((passed + 1))

# 6. pkg-config ppv.
PKG_CONFIG_PATH="$prefix/$PPV_LIBDIR/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export PKG_CONFIG_PATH
modversion=$("$PPV_PKG_CONFIG" --modversion ppv 2>&1) ||
    fail "pkg-config --modversion ppv: $modversion"
[ "$modversion" = "$PPV_VERSION" ] ||
    fail "pkg-config says ppv $modversion, the project is $PPV_VERSION"
flags=$("$PPV_PKG_CONFIG" --cflags --libs ppv 2>&1) || fail "pkg-config --cflags --libs ppv: $flags"
# $flags is split into words on purpose, as in cc main.c $(pkg-config ...).
# shellcheck disable=SC2086
run_logged "compiling main.c with pkg-config ppv ($flags)" \
    "$PPV_CC" -std=c11 -Wall -Wextra -Werror "$here/main.c" -o "$tmp/pc_consumer" $flags
check_output "pkg-config" "$tmp/pc_consumer"
passed=$((passed + 1))

echo "test_install: $passed passed, 0 failed"
