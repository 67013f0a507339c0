#!/usr/bin/env bash
# The one scripted GPU run (device machine: torch present, no network, maybe no spdlog headers).
# libcc1d and the C++ benchmarks are built HERE and carried: libcc1d depends on libc/libstdc++/
# libm only, so the same binary serves the device's Python, torch and CUDA. From the repo root
# on the build machine:
#   cmake -S . -B build/cmake -G Ninja && cmake --build build/cmake -j2 --target cc1d bench_compile
# then run this script there with carry=["build/cmake/libcc1d.so.0.2.0",
# "build/cmake/bench/bench_compile"] (6 MB; the whole build directory is over the 64 MiB a carry
# may hold; the libcc1d.so symlinks need not travel). It writes its logs to $OUT when set.
# About 6 minutes: report, demo, the gpu tests, the forward and backward benchmarks (every kernel
# path or layout, % of copy bandwidth, first-call cost), cold compile times with the driver's JIT cache off, the call overhead, and
# Nsight Compute metrics of the vector paths when ncu is installed.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/cc1d-device}"
mkdir -p "$OUT"
LIB=""
for f in build/cmake/libcc1d.so build/cmake/libcc1d.so.*; do [ -f "$f" ] && LIB="$PWD/$f" && break; done
[ -n "$LIB" ] || { echo "no build/cmake/libcc1d.so*: build and carry it (see above)"; exit 1; }
export PYTHONPATH="$PWD/python" CAUSAL_CONV1D_LIBRARY="$LIB" PYTHONUNBUFFERED=1
export CAUSAL_CONV1D_LOG_LEVEL=info
# A fresh kernel cache, and no driver JIT cache: every first call below really compiles.
export CAUSAL_CONV1D_CACHE_DIR="$OUT/kernel-cache" CUDA_CACHE_DISABLE=1
nvidia-smi -L 2>&1 | tee "$OUT/gpu.txt"
python3 -m causal_conv1d report > "$OUT/report.json" 2>&1
python3 -m causal_conv1d demo 2>&1 | tee "$OUT/demo.txt"
timeout 240 python3 -m pytest -q -m gpu -p no:cacheprovider tests/python 2>&1 | tail -30 | tee "$OUT/gpu_tests.txt"
timeout 300 python3 bench/gpu_fwd.py 2>&1 | tee "$OUT/gpu_fwd.md"
timeout 240 python3 bench/gpu_bwd.py 2>&1 | tee "$OUT/gpu_bwd.md"
timeout 60 python3 bench/call_overhead.py --device cuda 2>&1 | tee "$OUT/call_overhead.md"
if [ -x build/cmake/bench/bench_compile ]; then
  # The sm of device 0, e.g. 90; NVRTC's compile time per variant on one core.
  SM=$(python3 -c "import torch; c = torch.cuda.get_device_capability(0); print(c[0] * 10 + c[1])")
  timeout 180 build/cmake/bench/bench_compile --arch "$SM" 2>&1 | tee "$OUT/bench_compile.txt"
fi
if command -v ncu >/dev/null 2>&1; then
  # DRAM bytes, sectors per request and instructions of the forward kernels (small shapes).
  timeout 240 ncu --kernel-name regex:causal_conv1d_fwd --launch-count 8 \
    --metrics dram__bytes.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum,l1tex__t_requests_pipe_lsu_mem_global_op_st.sum,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum \
    python3 bench/gpu_fwd.py --quick 2>&1 | tee "$OUT/ncu.txt" | tail -80
else
  echo "ncu not found: no Nsight Compute metrics" | tee "$OUT/ncu.txt"
fi
