#!/usr/bin/env bash
# The one scripted GPU run (device machine: torch present, no network, maybe no spdlog headers).
# libcc1d is built HERE and carried: it depends on libc/libstdc++/libm only, so the same binary
# serves the device's Python, torch and CUDA. From the repo root on the build machine:
#   cmake -S . -B build/cmake -G Ninja && cmake --build build/cmake -j2 --target cc1d
# then run this script there with carry=["build/cmake"] (it writes its logs to $OUT when set).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/cc1d-device}"
mkdir -p "$OUT"
export PYTHONPATH="$PWD/python" CAUSAL_CONV1D_LIBRARY="$PWD/build/cmake/libcc1d.so" PYTHONUNBUFFERED=1
export CAUSAL_CONV1D_LOG_LEVEL=info
nvidia-smi -L 2>&1 | tee "$OUT/gpu.txt"
python3 -m causal_conv1d report > "$OUT/report.json" 2>&1
python3 -m causal_conv1d demo 2>&1 | tee "$OUT/demo.txt"
timeout 240 python3 -m pytest -q -m gpu -p no:cacheprovider tests/python 2>&1 | tail -30 | tee "$OUT/gpu_tests.txt"
timeout 240 python3 bench/gpu_fwd.py 2>&1 | tee "$OUT/gpu_fwd.md"
