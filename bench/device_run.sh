#!/usr/bin/env bash
# The one scripted GPU run (device machine: torch present, no network, maybe no spdlog headers).
# libcc1d and the C++ benchmarks are built HERE and carried: libcc1d depends on libc/libstdc++/
# libm only, so the same binary serves the device's Python, torch and CUDA. From the repo root
# on the build machine:
#   cmake -S . -B build/cmake -G Ninja && cmake --build build/cmake -j2 --target cc1d cc1d_pyargs bench_compile
# then run this script there with carry=["build/cmake/libcc1d.so.0.2.0",
# "build/cmake/libcc1d_pyargs.so", "build/cmake/bench/bench_compile"] (about 38 MB with the
# shipped PTX tier; the whole build directory is over the 64 MiB a carry may hold; the
# libcc1d.so symlinks need not travel; the argument packer serves the device's CPython whatever
# its version, and the report step says whether it loaded). The `variants` step adds
# build/kernels-base (CC1D_VARIANTS_BASE) and build/lib-variants (CC1D_LIB_VARIANTS: seven
# libraries of about 10 MB): over 64 MiB together, so pack them all, gzipped (about 40 MB with
# five; check the size, and leave a library variant out if it passes 64 MiB):
#   tar czf build/device-carry.tgz build/cmake/libcc1d.so.0.2.0 build/cmake/libcc1d_pyargs.so \
#     build/cmake/bench/bench_compile build/kernels-base build/lib-variants
# carry ["build/device-carry.tgz"], and start the device command with
# `tar xzf build/device-carry.tgz &&`. See below.
#
#   bench/device_run.sh [--rehearse]
#
# The steps, most valuable first, share one time budget (CC1D_DEVICE_BUDGET_S, default 540 s,
# under the device tool's 600 s a call): each runs under `timeout` with at most its own limit and
# what is left; a step that would get under 20 s is skipped. CC1D_DEVICE_STEPS (a space-separated
# list of step names, default all) runs only those. Each step's whole output goes to
# $LOGS/<step>.txt (default /tmp/cc1d-device-logs); at the end they are packed into
# $OUT/logs.tgz and the main ones copied to $OUT (the device tool returns 8 files at most). The
# end of the output is each step's exit status and seconds and the benchmarks' tables, since a
# reply carries only the last lines. The exit status is 1 when any step failed or timed out.
#   gate: the strict demo on the GPU; if it fails (no driver, no NVRTC, a compile error) the
#   report and doctor say why and nothing else runs, so a second try has device time left.
#   precompile: every variant for this SM on every core (the compile throughput here), into a
#   tier that the gpu tests read; the benchmarks keep a fresh cache so that their first calls
#   really compile. The forward and backward benchmarks (every kernel path or layout, % of copy
#   bandwidth, first-call cost, a check against torch) come first; then the gpu tests; the call
#   overhead; compute-sanitizer memcheck and racecheck over each forward and backward
#   configuration once (--check-only); Nsight Compute metrics of the forward and backward main
#   kernels at the benchmarks' shapes (--clock-control none: the card's clocks are left alone);
#   the forward again with a persistent grid (CAUSAL_CONV1D_GRID_WAVES=1); cold compile times per
#   variant with the driver's JIT cache off. first_calls (after the benchmarks): cold first calls
#   from the shipped PTX tier against NVRTC and against the tier with no NVRTC, each in a fresh
#   process and cache.
# --rehearse checks the script on a machine without a GPU: the benchmarks run --quick on the cpu
# backend and the GPU-only tools are skipped.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT="${OUT:-/tmp/cc1d-device}"
LOGS="${LOGS:-/tmp/cc1d-device-logs}"
TIER=/tmp/cc1d-device-tier
rm -rf "$LOGS" "$TIER" /tmp/cc1d-device-cache
mkdir -p "$OUT" "$LOGS"
BENCH=()
SKIP_GPU_TOOLS=0
if [ "${1:-}" = "--rehearse" ]; then
  BENCH=(--quick --device cpu --backend cpu)
  SKIP_GPU_TOOLS=1
fi
LIB=""
for f in build/cmake/libcc1d.so build/cmake/libcc1d.so.*; do [ -f "$f" ] && LIB="$PWD/$f" && break; done
[ -n "$LIB" ] || { echo "no build/cmake/libcc1d.so*: build and carry it (see above)"; exit 1; }
export PYTHONPATH="$PWD/python" CAUSAL_CONV1D_LIBRARY="$LIB" PYTHONUNBUFFERED=1
export CAUSAL_CONV1D_LOG_LEVEL=info
# A fresh kernel cache, and no driver JIT cache: every first call below really compiles.
export CAUSAL_CONV1D_CACHE_DIR=/tmp/cc1d-device-cache CUDA_CACHE_DISABLE=1
PY="${PYTHON:-python3}"
DEADLINE=$(($(date +%s) + ${CC1D_DEVICE_BUDGET_S:-540}))
STEPS=" ${CC1D_DEVICE_STEPS:-all} "
printf '| step | exit status | seconds (limit) |\n|---|---|---|\n' > "$LOGS/steps.md"
FAILED=0  # steps that exited non-zero or timed out: the script's own exit status at the end

# step NAME MAX_S CMD...: CMD with its output in $LOGS/NAME.txt (and its last lines here).
step() {
  local name=$1 max=$2 left lim t0 rc
  shift 2
  [[ "$STEPS" == " all " || "$STEPS" == *" $name "* || "$STEPS" == *" ${name%%-*} "* ]] || return 0
  left=$((DEADLINE - $(date +%s)))
  if ((left < 20)); then
    echo "| $name | skipped: ${left} s of the budget left | |" >> "$LOGS/steps.md"
    return 0
  fi
  lim=$((max < left ? max : left))
  t0=$(date +%s)
  echo "== $name (at most $lim s)"
  timeout "$lim" "$@" > "$LOGS/$name.txt" 2>&1
  rc=$?
  ((rc == 0)) || FAILED=$((FAILED + 1))
  tail -n 8 "$LOGS/$name.txt"
  echo "| $name | $rc$( ((rc == 124)) && echo ' (timed out)') | $(($(date +%s) - t0)) ($lim) |" >> "$LOGS/steps.md"
  return $rc
}
have() { ((SKIP_GPU_TOOLS == 0)) && command -v "$1" > /dev/null 2>&1; }
# finish: the tables and step statuses last (a reply carries the end), the logs into $OUT.
finish() {
  echo
  [ -f "$LOGS/first_calls.txt" ] && { echo "== first_calls"; grep -E '^\| ' "$LOGS/first_calls.txt"; }
  for f in gpu_bwd gpu_fwd_waves1; do
    [ -f "$LOGS/$f.txt" ] && { echo "== $f"; grep -E '^\| \(|MISMATCH|match the baseline' "$LOGS/$f.txt"; }
  done
  # Each op's logs side by side (this tree's first), a table each.
  local fwd=() bwd=() f n
  [ -f "$LOGS/gpu_fwd.txt" ] && fwd+=("tree=$LOGS/gpu_fwd.txt")
  [ -f "$LOGS/gpu_bwd.txt" ] && bwd+=("tree=$LOGS/gpu_bwd.txt")
  for f in "$LOGS"/variants-*.txt; do
    [ -f "$f" ] || continue
    n=$(basename "$f" .txt)
    n=${n#variants-}
    if [[ "$n" == bwd-* ]]; then bwd+=("${n#bwd-}=$f"); else fwd+=("$n=$f"); fi
  done
  ((${#fwd[@]})) && { echo "== forward, % of copy"; "$PY" bench/compare_logs.py "${fwd[@]}"; }
  ((${#bwd[@]} > 1)) && { echo "== backward without autograd (direct), % of copy"; "$PY" bench/compare_logs.py "${bwd[@]}"; }
  grep -H -A6 MISMATCH "$LOGS"/gpu_fwd.txt "$LOGS"/variants-*.txt 2> /dev/null
  echo
  cat "$LOGS/steps.md"
  tar czf "$OUT/logs.tgz" -C "$LOGS" .
  for f in steps.md gpu_tests.txt gpu_fwd.txt gpu_bwd.txt ncu.txt; do [ -f "$LOGS/$f" ] && cp "$LOGS/$f" "$OUT/"; done
  ((FAILED == 0)) || { echo "$FAILED step(s) failed: see $LOGS/<step>.txt (in $OUT/logs.tgz)"; exit 1; }
}

have nvidia-smi && step gpu 20 nvidia-smi
step report 60 "$PY" -m causal_conv1d report
if ((SKIP_GPU_TOOLS)); then
  step demo 60 "$PY" -m causal_conv1d demo
elif ! step gate 90 env CAUSAL_CONV1D_STRICT=1 "$PY" -m causal_conv1d demo --device cuda; then
  step doctor 60 "$PY" -m causal_conv1d doctor
  echo "the GPU path is not live here (gate failed): nothing else runs"
  finish
fi
step gpu_fwd 120 "$PY" bench/gpu_fwd.py "${BENCH[@]}"
step gpu_bwd 120 "$PY" bench/gpu_bwd.py "${BENCH[@]}"
# Cold first calls from the shipped PTX tier, from NVRTC, and from the tier with no NVRTC at all
# (CAUSAL_CONV1D_NVRTC=none), each in a fresh process and cache, each output checked.
step first_calls 150 "$PY" bench/first_call.py $( ((SKIP_GPU_TOOLS)) && echo --device cpu)
# Tuning experiments (bench/kernel_variants.sh), each beside gpu_fwd and gpu_bwd above (the
# working tree's): fwd_* variants time the forward, bwd_* the backward's vector layouts, base
# both. Kernel variants are copies of the kernel sources with one knob changed (with
# CC1D_VARIANTS_BASE, also the kernel sources in that directory), loaded through
# CAUSAL_CONV1D_KERNEL_DIR; library variants (CC1D_LIB_VARIANTS=DIR, built by
# `bench/kernel_variants.sh --libs DIR` and carried) change a planner constant too, loaded
# through CAUSAL_CONV1D_LIBRARY. Steps variants-<name> (variants-bwd-<name>: the backward's);
# "variants" selects them all.
if [[ "$STEPS" == " all " || "$STEPS" == *" variants"* ]] && ((SKIP_GPU_TOOLS == 0)); then
  VARIANTS=/tmp/cc1d-kernel-variants
  VEC=(--layout channel-first --layout channel-last)
  # variant NAME SETTING: the benchmarks NAME selects, under the environment SETTING (VAR=VALUE).
  variant() {
    [[ "$1" == bwd_* ]] || step "variants-$1" 60 env "$2" "$PY" bench/gpu_fwd.py
    [[ "$1" == fwd_* ]] || step "variants-bwd-${1#bwd_}" 60 env "$2" "$PY" bench/gpu_bwd.py "${VEC[@]}"
  }
  bench/kernel_variants.sh "$VARIANTS" ${CC1D_VARIANTS_BASE:-} > /dev/null
  for d in "$VARIANTS"/*/; do variant "$(basename "$d")" CAUSAL_CONV1D_KERNEL_DIR="$d"; done
  for d in ${CC1D_LIB_VARIANTS:+"$CC1D_LIB_VARIANTS"/*/}; do
    variant "$(basename "$d")" CAUSAL_CONV1D_LIBRARY="$(cd "$d" && pwd)/libcc1d.so"
  done
fi
if ((SKIP_GPU_TOOLS == 0)); then
  SM=$("$PY" -c "import torch; c = torch.cuda.get_device_capability(0); print(c[0] * 10 + c[1])")
  step precompile 90 "$PY" -m causal_conv1d precompile --out "$TIER" --arch "$SM"
  XDIST=()
  "$PY" -c "import xdist" 2> /dev/null && XDIST=(-n 8)
  step gpu_tests 200 env CAUSAL_CONV1D_CACHE_PATH="$TIER" \
    "$PY" -m pytest -q -m gpu -p no:cacheprovider --maxfail 200 "${XDIST[@]}" tests/python
fi
((SKIP_GPU_TOOLS)) || step call_overhead 40 "$PY" bench/call_overhead.py --device cuda
if have compute-sanitizer; then
  # Out-of-bounds and misaligned accesses, then shared-memory races, on the real device (the
  # emulator's checking mode is the CPU's version of the second). Kernels come from the cache
  # the benchmarks above filled.
  SAN=(compute-sanitizer --error-exitcode 9 --print-limit 20)
  step memcheck_fwd 60 "${SAN[@]}" --tool memcheck "$PY" bench/gpu_fwd.py --quick --check-only
  step memcheck_bwd 60 "${SAN[@]}" --tool memcheck "$PY" bench/gpu_bwd.py --quick --check-only
  step racecheck_bwd 90 "${SAN[@]}" --tool racecheck "$PY" bench/gpu_bwd.py --quick --check-only
  step racecheck_fwd 60 "${SAN[@]}" --tool racecheck "$PY" bench/gpu_fwd.py --quick --check-only
fi
if have ncu; then
  # DRAM bytes, sectors per request, instructions and achieved occupancy of each configuration's
  # kernels at the benchmarks' full shapes (--check-only: each configuration runs once).
  NCU=(ncu --clock-control none --metrics dram__bytes.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum,l1tex__t_requests_pipe_lsu_mem_global_op_st.sum,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active,gpu__time_duration.sum,launch__registers_per_thread,launch__grid_size)
  step ncu 120 "${NCU[@]}" --kernel-name regex:causal_conv1d_fwd_kernel --launch-count 16 "$PY" bench/gpu_fwd.py --check-only
  step ncu_bwd 120 "${NCU[@]}" --kernel-name regex:causal_conv1d_bwd_kernel --launch-count 16 "$PY" bench/gpu_bwd.py --check-only
fi
# The forward again with a persistent grid (one wave of resident blocks per launch), beside the
# default grid of gpu_fwd: which is faster is this device's to say (RESULTS.md, "Waves").
step gpu_fwd_waves1 120 env CAUSAL_CONV1D_GRID_WAVES=1 "$PY" bench/gpu_fwd.py "${BENCH[@]}"
if ((SKIP_GPU_TOOLS == 0)) && [ -x build/cmake/bench/bench_compile ]; then
  # NVRTC's compile time per variant on one core, the driver's JIT cache off.
  step bench_compile 90 build/cmake/bench/bench_compile --arch "$SM"
fi
finish
