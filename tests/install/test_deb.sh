#!/bin/sh
# test_deb.sh - the Debian package (CTest test_deb, tests/CMakeLists.txt).
#
# Builds ppv_VERSION_ARCH.deb with `cpack -G DEB` from the build, unpacks
# it with dpkg-deb -x into a scratch root and checks, in order: the file
# list; the control fields, Depends against what dpkg-shlibdeps (Debian's
# own tool, not ppv's CMake) finds the core binaries need, with MPI only
# recommended; that nothing in it names the build or source tree and no
# binary has an RPATH; that the unpacked ppv runs (version, conform on a
# shipped golden, demo on its own modules and golden files) and the
# unpacked Python package imports and finds that ppv; and that a missing
# MPI library is named with its Debian package. The first check that
# fails stops the test with its reason and "test_deb: N passed, 1 failed".
#
# Usage: test_deb.sh BUILD_DIR, with the environment (set by CTest):
#   PPV_CPACK PPV_VERSION PPV_CC PPV_SOURCE_DIR PPV_MAN_PAGES
#   PPV_MODULES (the module files this build made) PPV_MPI_PACKAGE
set -u

passed=0
fail() {
    echo "test_deb: FAIL: $*" >&2
    echo "test_deb: $passed passed, 1 failed"
    exit 1
}

[ $# -eq 1 ] || fail "usage: test_deb.sh BUILD_DIR"
build=$(cd "$1" && pwd)
for v in PPV_CPACK PPV_VERSION PPV_CC PPV_SOURCE_DIR PPV_MAN_PAGES PPV_MODULES; do
    eval "[ -n \"\${$v:-}\" ]" || fail "$v is not set (run this through ctest)"
done
for tool in dpkg-deb dpkg-shlibdeps readelf; do
    command -v $tool >/dev/null || fail "$tool is missing (Debian: apt-get install dpkg-dev binutils)"
done
source=$(cd "$PPV_SOURCE_DIR" && pwd)

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ppv-test-deb.XXXXXX") || fail "mktemp -d failed"
trap 'rm -rf "$tmp"' EXIT
trap 'exit 1' HUP INT TERM

# 1. The package.
"$PPV_CPACK" -G DEB -B "$tmp/pkg" --config "$build/CPackConfig.cmake" >"$tmp/log" 2>&1 ||
    fail "cpack -G DEB failed: $(tail -20 "$tmp/log")"
arch=$(dpkg --print-architecture)
deb=$tmp/pkg/ppv_${PPV_VERSION}_$arch.deb
[ -f "$deb" ] || fail "cpack made no $deb: $(ls "$tmp/pkg")"
root=$tmp/root
dpkg-deb -x "$deb" "$root" || fail "dpkg-deb -x $deb failed"
passed=$((passed + 1))

# 2. The files: every part of ppv, and nothing outside /usr.
py=usr/lib/python3/dist-packages
missing=""
for f in usr/bin/ppv usr/include/ppv/ppv_spec.h usr/include/ppv/ppv_engine.h \
    usr/include/ppv/ppv_golden.h usr/include/ppv/ppv_fuzz.h usr/include/ppv/ppv_version.h \
    usr/lib/cmake/ppv/ppvConfig.cmake usr/lib/pkgconfig/ppv.pc \
    usr/share/ppv/golden/train_1f1b_p4_m8.h5 usr/share/ppv/golden/infer_pp0_stash_cut.h5 \
    $py/ppv/__init__.py $py/ppv/record.py $py/ppv/dist.py $py/ppv/cli.py $py/ppv/pytest.py \
    $py/ppv-$PPV_VERSION.dist-info/METADATA $py/ppv-$PPV_VERSION.dist-info/entry_points.txt; do
    [ -f "$root/$f" ] || missing="$missing $f"
done
[ -f "$root/usr/lib/libppv.a" ] || [ -f "$root/usr/lib/libppv.so" ] || missing="$missing usr/lib/libppv.a-or-.so"
for m in $PPV_MODULES; do
    [ -f "$root/usr/lib/ppv/$m" ] || missing="$missing usr/lib/ppv/$m"
done
for page in $PPV_MAN_PAGES; do
    [ -f "$root/usr/share/man/man1/$page" ] || missing="$missing usr/share/man/man1/$page"
done
[ -z "$missing" ] || fail "not in the package:$missing"
outside=$(cd "$root" && find . -mindepth 1 -maxdepth 1 ! -name usr)
[ -z "$outside" ] || fail "the package installs outside /usr: $outside"
grep -q '^ppv.pytest = ppv.pytest$' "$root/$py/ppv-$PPV_VERSION.dist-info/entry_points.txt" ||
    fail "the dist-info does not register the pytest plugin"
passed=$((passed + 1))

# 3. The control fields. Depends holds every package that dpkg-shlibdeps
# finds ppv and its Python modules need; MPI's is recommended, not
# depended on (ppv starts without it).
field() { dpkg-deb -f "$deb" "$1"; }
[ "$(field Package)" = ppv ] || fail "Package is '$(field Package)'"
[ "$(field Version)" = "$PPV_VERSION" ] || fail "Version is '$(field Version)', not $PPV_VERSION"
[ "$(field Architecture)" = "$arch" ] || fail "Architecture is '$(field Architecture)'"
depends=$(field Depends)
mkdir -p "$tmp/shlib/debian"
printf 'Source: ppv\n\nPackage: ppv\nArchitecture: any\n' >"$tmp/shlib/debian/control"
core="$root/usr/bin/ppv $root/usr/lib/ppv/libppv_golden.so"
for m in libppv_pygen.so libppv_pyrank.so; do
    [ -f "$root/usr/lib/ppv/$m" ] && core="$core $root/usr/lib/ppv/$m"
done
(cd "$tmp/shlib" && dpkg-shlibdeps -O $core) >"$tmp/shlibs" 2>"$tmp/shlibs.err" ||
    fail "dpkg-shlibdeps failed: $(cat "$tmp/shlibs.err")"
needed=$(sed -n 's/^shlibs:Depends=//p' "$tmp/shlibs" | tr ',' '\n' | sed 's/^ *//; s/ .*//' | sort -u)
[ -n "$needed" ] || fail "dpkg-shlibdeps found nothing: $(cat "$tmp/shlibs")"
for p in $needed python3; do
    echo "$depends" | tr ',' '\n' | sed 's/^ *//; s/ .*//' | grep -qx "$p" ||
        fail "Depends ($depends) lacks $p, which dpkg-shlibdeps says ppv needs"
done
for p in $(echo "$depends" | tr ',' '\n' | sed 's/^ *//; s/ .*//'); do
    echo "$needed python3" | tr ' ' '\n' | grep -qx "$p" ||
        fail "Depends ($depends) names $p, which dpkg-shlibdeps does not find ppv needs"
done
if [ -f "$root/usr/lib/ppv/libppv_mpi.so" ]; then
    mpi=$( (cd "$tmp/shlib" && dpkg-shlibdeps -O "$root/usr/lib/ppv/libppv_mpi.so") |
        sed -n 's/^shlibs:Depends=//p' | tr ',' '\n' | sed 's/^ *//; s/ .*//' | grep -i mpi)
    [ -n "$mpi" ] || fail "dpkg-shlibdeps finds no MPI package for libppv_mpi.so"
    for p in $mpi; do
        field Recommends | tr ',' '\n' | sed 's/^ *//; s/ .*//' | grep -qx "$p" ||
            fail "Recommends ($(field Recommends)) lacks $p (the MPI transport's library)"
        echo "$depends" | grep -q "$p" && fail "Depends names $p: ppv must start without MPI"
    done
fi
passed=$((passed + 1))

# 4. Nothing points back into the build or the source tree.
back=$(grep -rlF -e "$build" -e "$source" "$root")
[ -z "$back" ] || fail "files in the package name the build or source tree: $back"
for f in $(find "$root" -type f); do
    if readelf -d "$f" 2>/dev/null | grep -qE '\((RPATH|RUNPATH)\)'; then
        fail "$f has an RPATH: $(readelf -d "$f" | grep -E 'RPATH|RUNPATH')"
    fi
done
passed=$((passed + 1))

# 5. It runs from the unpacked tree, on its own modules and files, from a
# folder outside both trees.
cd "$tmp" || fail "cd $tmp"
ppv=$root/usr/bin/ppv
out=$(env -u PPV_GOLDEN_MODULE -u PPV_PYTHON_DIR "$ppv" version 2>&1) || fail "ppv version: $out"
[ "$out" = "ppv $PPV_VERSION" ] || fail "ppv version printed '$out'"
out=$("$ppv" conform "$root/usr/share/ppv/golden/infer_pp0_stash_cut.h5" --json 2>&1) ||
    fail "ppv conform on the shipped golden: $out"
echo "$out" | grep -q '"conforms":true' || fail "ppv conform: $out"
LD_DEBUG=files "$ppv" demo >"$tmp/demo" 2>"$tmp/loaded" || fail "ppv demo: $(tail -5 "$tmp/demo")"
grep -q "shipped golden files ($root/usr/bin/\.\./share/ppv/golden)" "$tmp/demo" ||
    fail "ppv demo did not use the package's golden files: $(grep 'golden files' "$tmp/demo")"
grep -q "file=$root/usr/bin/\.\./lib/ppv/libppv_golden\.so " "$tmp/loaded" ||
    fail "ppv demo did not load the package's libppv_golden.so: $(grep libppv_golden "$tmp/loaded" | head -3)"
grep -qF "$build" "$tmp/loaded" && fail "ppv demo loaded a file of the build: $(grep -F "$build" "$tmp/loaded" | head -3)"
out=$(cd "$tmp" && env -u PPV_PROGRAM PYTHONPATH="$root/$py" /usr/bin/python3 -c \
    'import ppv, ppv.cli; print(ppv.__file__); print(ppv.__version__); print(ppv.cli.find_ppv())' 2>&1) ||
    fail "the package's Python does not import: $out"
[ "$out" = "$(printf '%s\n%s\n%s' "$root/$py/ppv/__init__.py" "$PPV_VERSION" "$root/usr/bin/ppv")" ] ||
    fail "the package's Python: '$out'"
passed=$((passed + 1))

# 6. A missing MPI library is named with the Debian package to install: a
# stand-in module that needs a library that is not there.
if [ -f "$root/usr/lib/ppv/libppv_mpi.so" ] && [ -n "${PPV_MPI_PACKAGE:-}" ]; then
    echo 'int ppv_test_gone(void) { return 1; }' >"$tmp/gone.c"
    echo 'int ppv_test_gone(void); int ppv_test_use(void) { return ppv_test_gone(); }' >"$tmp/mod.c"
    "$PPV_CC" -shared -fPIC -o "$tmp/libppv_test_gone.so.1" -Wl,-soname,libppv_test_gone.so.1 \
        "$tmp/gone.c" && "$PPV_CC" -shared -fPIC -o "$root/usr/lib/ppv/libppv_mpi.so" "$tmp/mod.c" \
        "$tmp/libppv_test_gone.so.1" || fail "cannot build the stand-in module"
    rm -f "$tmp/libppv_test_gone.so.1"
    out=$(env -u PPV_MPI_MODULE "$ppv" pp --transport mpi 2>&1)
    rc=$?
    [ $rc -eq 2 ] || fail "ppv pp --transport mpi without MPI's library exited with $rc: $out"
    want="ppv pp: --transport mpi: cannot load the transport: libppv_test_gone.so.1: cannot open shared object file: No such file or directory (the mpi transport needs MPI's library: apt-get install $PPV_MPI_PACKAGE)"
    [ "$out" = "$want" ] || fail "ppv pp --transport mpi without MPI's library said
  '$out', not
  '$want'"
fi
passed=$((passed + 1))
echo "test_deb: $passed passed, 0 failed"
