#!/usr/bin/env bash
# libcc1d built by the other compilers a user's `pip install` may find: clang++, g++-11 (the
# default of Ubuntu 22.04, RHEL 9 and Amazon Linux 2023) and g++-8 (the oldest that builds it: the
# major version of RHEL 8's default; Ubuntu 20.04's and Debian 11's g++ 9 and 10 lie between, and
# built it by hand on 2026-12-07), beside the g++ 12 of the main build. clang and g++-11 are
# installed from Debian if missing; g++-8, which Debian no longer has, is unpacked from Ubuntu
# 20.04's packages into ~/.cache/causal-conv1d/gcc-8 (scripts/gcc8.sh). Each compiler builds the
# library at -O1, and the random-config and special-value tests run against it, on the cpu, aten
# and emulate backends. A GCC-12-only builtin and GCC-only vector shuffles once broke the clang
# and g++-11 builds, a GCC 9 builtin the g++-8 one. `make compilers-test`; CI runs it.
#   BUILD_COMPILERS  the build directories' prefix (default build/cmake-cc: build/cmake-cc-clang++, ...)
set -euo pipefail
cd "$(dirname "$0")/.."
PREFIX="${BUILD_COMPILERS:-build/cmake-cc}"
VENV="${CC1D_VENV:-$HOME/.cache/causal-conv1d/venv}"
JOBS="${JOBS:-2}"
source scripts/apt_get.sh

apt_install_missing compilers-test clang g++-11 curl
GCC8=$(scripts/gcc8.sh "$HOME/.cache/causal-conv1d/gcc-8")
read -r GCC8_BIN GCC8_LIBS <<<"$GCC8"
export LD_LIBRARY_PATH="$GCC8_LIBS${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"  # holds libisl.so.22 alone
LAUNCHER=()
command -v ccache >/dev/null && LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
for pair in clang:clang++ gcc-11:g++-11 "$GCC8_BIN/gcc-8:$GCC8_BIN/g++-8"; do
  cc=${pair%%:*} cxx=${pair#*:}
  build="$PREFIX-$(basename "$cxx")"
  echo "compilers-test: $($cxx --version | head -1)"
  cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-O1 -DCMAKE_C_FLAGS_DEBUG=-O1 \
    -DCMAKE_C_COMPILER="$cc" -DCMAKE_CXX_COMPILER="$cxx" -DCC1D_BUILD_TESTS=OFF -DCC1D_BUILD_BENCH=OFF \
    -DCC1D_PTX_TIER=OFF "${LAUNCHER[@]}" >/dev/null
  cmake --build "$build" -j "$JOBS" --target cc1d cc1d_pyargs
  CAUSAL_CONV1D_LIBRARY="$PWD/$build/libcc1d.so" CAUSAL_CONV1D_STRICT=1 PYTHONPATH=python \
    "$VENV/bin/python" -m pytest -q -p no:cacheprovider tests/python/test_random_configs.py \
    tests/python/test_special_values.py
done
