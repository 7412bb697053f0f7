#!/usr/bin/env bash
# tools/setup.sh - install what is missing (Debian, as root), build, then run
# the demo (`demo`) or every test (`test`).
#
# `test` builds three times, warnings as errors: RelWithDebInfo with gcc in
# build/, Release with clang in build-release/ and Debug with gcc under
# ASan+UBSan (PPV_SANITIZE) in build-asan/, whose ppv can also fail its N-th
# allocation on request for the failure sweep (PPV_FAILINJECT: the
# failsweep_* tests, tests/failsweep/). It runs the first two test
# suites at the same time (two runs on one machine must not disturb each
# other), then build-asan/'s alone (its processes take several times the
# memory), then build/'s again under valgrind, and closes with one summary
# line counting build/'s test cases.
set -euo pipefail
cd "$(dirname "$0")/.."

what=${1:-demo}
# python3-h5py for the Python recorder (python/ppv/record.py), whose tests
# must not skip here
packages=(build-essential cmake pkg-config libcmocka-dev libjson-c-dev libhdf5-dev python3-h5py)
# valgrind and clang for the test matrix; OpenMPI for the MPI transport's
# module and its test (test_mpi, under mpirun)
[ "$what" = test ] && packages+=(valgrind clang libopenmpi-dev openmpi-bin)
# libpython3-dev and python3-numpy for the Python generator bridge
# (libppv_pygen.so), whose tests must not skip here either
[ "$what" = test ] && packages+=(libpython3-dev python3-numpy)
# python3-torch (1.13, CPU, gloo) for the torch.distributed corpus that runs
# under real torch and under ppv (tests/python/test_torch_corpus.py)
[ "$what" = test ] && packages+=(python3-torch)
# libglpk-dev (GLPK's header; its library, libglpk40, is loaded when asked)
# for ppv gen optimal's proofs, whose tests must not skip here
[ "$what" = test ] && packages+=(libglpk-dev)
# pytest, venv and wheel for the pytest plugin and `pip install ./python`
# (tests/python/test_adoption.py); dpkg-dev for the .deb's test
# (dpkg-shlibdeps, tests/install/test_deb.sh)
[ "$what" = test ] && packages+=(python3-pytest python3-venv python3-wheel python3-setuptools dpkg-dev)
export PPV_REQUIRE_H5PY=1
[ "$what" = test ] && export PPV_REQUIRE_PYGEN=1 PPV_REQUIRE_TORCH=1 PPV_REQUIRE_GLPK=1 \
  PPV_REQUIRE_PYTEST=1

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# build DIR TYPE CC: configures and builds with warnings as errors.
build() {
  CC=$3 cmake -S . -B "$1" -DCMAKE_BUILD_TYPE="$2" -DPPV_WERROR=ON >/dev/null
  cmake --build "$1" -j"$(nproc)"
}

# cases DIR: test cases the last ctest run in DIR ran, from its log: cmocka's
# "N test(s) run", a script's "N passed, M failed", else 1 per test.
cases() {
  awk '
    /^[0-9]+\/[0-9]+ Testing: / { if (open) total += seen ? seen : 1; open = 1; seen = 0 }
    /^\[==========\] [0-9]+ test\(s\) run\./ { seen += $2 }
    /^[a-z_]+: [0-9]+ passed, [0-9]+ failed$/ { seen += $2 + $4 }
    END { if (open) total += seen ? seen : 1; print total + 0 }
  ' "$1/Testing/Temporary/LastTest.log"
}

# memcheck_report DIR: names each test valgrind complained about, with what
# it said (the logs ctest leaves in Testing/Temporary).
memcheck_report() {
  local log n name
  for log in "$1"/Testing/Temporary/MemoryChecker.*.log; do
    [ -f "$log" ] || continue
    grep -qE 'ERROR SUMMARY: [1-9]|(definitely|indirectly|possibly) lost: [1-9]' "$log" || continue
    n=${log##*MemoryChecker.}
    n=${n%.log}
    name=$(cd "$1" && ctest -N | sed -n "s/^ *Test *#$n: //p")
    echo "valgrind: test ${name:-#$n} ($log):"
    grep -vE '^==[0-9]+== (Memcheck|Copyright|Using Valgrind|Command|Parent PID|$)' "$log" |
      grep -E '^==[0-9]+==' | head -60 | sed 's/^/  /'
  done
}

case "$what" in
  demo)
    build build RelWithDebInfo "${CC:-cc}"
    ./build/tools/ppv demo
    ;;
  test)
    build build RelWithDebInfo gcc
    build build-release Release clang
    CC=gcc cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=Debug -DPPV_WERROR=ON -DPPV_SANITIZE=ON -DPPV_FAILINJECT=ON \
      >/dev/null
    cmake --build build-asan -j"$(nproc)"
    # both suites at once, each logging to its build folder
    (cd build && ctest --output-on-failure >Testing/run.log 2>&1) & gcc_run=$!
    # (the torch corpus's thousands of runs once, in the gcc suite: a quarter here)
    (cd build-release && PPV_CORPUS_SCALE=0.25 ctest --output-on-failure >Testing/run.log 2>&1) &
    clang_run=$!
    status=0
    wait $gcc_run || status=1
    wait $clang_run || status=$((status | 2))
    grep -E 'tests passed|Total Test time' build/Testing/run.log | sed 's/^/gcc RelWithDebInfo: /'
    grep -E 'tests passed|Total Test time' build-release/Testing/run.log | sed 's/^/clang Release: /'
    if ((status)); then
      ((status & 1)) && cat build/Testing/run.log
      ((status & 2)) && cat build-release/Testing/run.log
      echo "ctest: 0 passed, 1 failed (see above)"
      exit 1
    fi
    # ASan+UBSan: reports go to files (tests/CMakeLists.txt), shown on a
    # failure when they hold an error
    mkdir -p build-asan/Testing/Temporary
    rm -f build-asan/Testing/Temporary/sanitizer.*
    # two test programs at a time (each is single-threaded; they share
    # nothing but the CPU), here and under valgrind
    if ! (cd build-asan && ctest -j2 --output-on-failure >Testing/run.log 2>&1); then
      cat build-asan/Testing/run.log
      for log in build-asan/Testing/Temporary/sanitizer.*; do
        grep -qE 'ERROR: |runtime error: ' "$log" 2>/dev/null || continue
        echo "sanitizer report $log:"
        head -60 "$log" | sed 's/^/  /'
      done
      echo "ctest: 0 passed, 1 failed (ASan+UBSan, see above)"
      exit 1
    fi
    grep -E 'tests passed|Total Test time' build-asan/Testing/run.log | sed 's/^/gcc Debug ASan+UBSan: /'
    n=$(cases build)
    # the .deb installed on this machine, run and removed, alone (as root;
    # tests/install/test_deb_system.sh; every other run skips it), after
    # the count of build/'s cases, which its ctest run would overwrite
    if ! (cd build && PPV_DEB_SYSTEM=1 ctest -R '^test_deb_system$' --output-on-failure \
          >Testing/deb.log 2>&1); then
      cat build/Testing/deb.log
      echo "ctest: 0 passed, 1 failed (the .deb on this machine, see above)"
      exit 1
    fi
    grep -E 'tests passed|Skipped' build/Testing/deb.log | sed 's/^/dpkg -i, demo, remove: /'
    (cd build && ctest -T memcheck -j2 --output-on-failure) || {
      memcheck_report build
      echo "ctest: 0 passed, 1 failed (valgrind memcheck, see above)"
      exit 1
    }
    report=$(memcheck_report build)
    if [ -n "$report" ]; then
      echo "$report"
      echo "ctest: 0 passed, 1 failed (valgrind memcheck, see above)"
      exit 1
    fi
    programs=$(cd build && ctest -N | sed -n 's/^Total Tests: //p')
    echo "ctest: $programs test programs, $n test cases, each passed with gcc, with clang and under ASan+UBSan (test_install and the .deb's tests are left out there) and clean under valgrind"
    echo "$n passed, 0 failed"
    ;;
  *)
    echo "usage: tools/setup.sh demo|test" >&2
    exit 2
    ;;
esac
