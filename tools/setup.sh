#!/usr/bin/env bash
# tools/setup.sh - install what is missing (Debian, as root), build, then run
# the demo (`demo`) or every test, plain and under valgrind (`test`).
set -euo pipefail
cd "$(dirname "$0")/.."

what=${1:-demo}
packages=(build-essential cmake pkg-config libcmocka-dev libjson-c-dev libhdf5-dev valgrind)

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

cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j"$(nproc)"

case "$what" in
  demo)
    ./build/tools/ppv demo
    ;;
  test)
    cd build
    ctest --output-on-failure
    ctest -T memcheck --output-on-failure
    n=$(ctest -N | sed -n 's/^Total Tests: //p')
    echo "ctest: $n passed, 0 failed (each also clean under valgrind memcheck)"
    ;;
  *)
    echo "usage: tools/setup.sh demo|test" >&2
    exit 2
    ;;
esac
