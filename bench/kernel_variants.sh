#!/usr/bin/env bash
# Tuning experiments for a device run: writes copies of kernels_src/ that differ from the
# working tree in one knob each, for CAUSAL_CONV1D_KERNEL_DIR (the runtime compiles whatever
# sources that names; the cache key holds their hash). Only knobs the host planner does not
# read may change here (register caps, loads in flight, tile shapes at the same steps per work
# item). bench/device_run.sh's `variants` step times each directory beside the embedded kernels:
# a variant named fwd_* with bench/gpu_fwd.py, bwd_* with bench/gpu_bwd.py (its vector layouts),
# `base` with both.
#
#   bench/kernel_variants.sh OUT_DIR [BASE_DIR]
#
# OUT_DIR/<name>/ for each variant below; with BASE_DIR (kernel sources of another revision, e.g.
# `git archive HEAD kernels_src | tar -x -C build/kernels-base --strip-components=1`, carried to
# the device, which has no git history), also OUT_DIR/base/: a before/after in the same run.
# Each edit must match exactly once, or the script fails: a variant identical to the working
# tree would measure nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:?usage: bench/kernel_variants.sh OUT_DIR [BASE_DIR]}
rm -rf "$out"
mkdir -p "$out"

# variant NAME FILE FROM TO [FILE FROM TO]...: kernels_src/ with FROM replaced by TO in FILE.
variant() {
  local name=$1 dir="$out/$1"
  shift
  cp -r kernels_src "$dir"
  while (($#)); do
    local f="$dir/$1" from=$2 to=$3
    shift 3
    [ "$(grep -cF -- "$from" "$f")" = 1 ] || { echo "variant $name: '$from' is not in $f exactly once" >&2; exit 1; }
    FROM="$from" TO="$to" perl -0pi -e 's/\Q$ENV{FROM}\E/$ENV{TO}/' "$f"
  done
  echo "$name"
}

# Measured on an H200 and dropped (RESULTS.md, "Kernel variants"): the forward's register caps of
# 40 and 32 (they spilled; 23-156% slower) and 64-step channel-last tiles (within 3 points
# either way), 2026-12-04.
# The backward's TIME_VEC: warp steps of loads in flight during a step's math (16-bit; fp32 is
# 1) and the launch bounds' minimum of resident blocks, which sets the register cap. The tree
# has 2 steps at 5 blocks (96 registers, 31% occupancy): one step at 6 blocks (80 registers,
# 38%), three at 4 (120, 25%), and fp32 two steps ahead too (124 registers, 25%).
AHEAD='static constexpr int kAhead = sizeof(TX) == 4 ? 1 : 2;'
MINB='return layout == kBwdLayoutTimeVec && x_bytes == 2 ? 5 : 0;'
variant bwd_ahead1_mb6 bwd_time_vec.cuh "$AHEAD" "${AHEAD/: 2;/: 1;}" bwd_params.h "$MINB" "${MINB/? 5 :/? 6 :}"
variant bwd_ahead3_mb4 bwd_time_vec.cuh "$AHEAD" "${AHEAD/: 2;/: 3;}" bwd_params.h "$MINB" "${MINB/? 5 :/? 4 :}"
variant bwd_fp32_ahead2 bwd_time_vec.cuh "$AHEAD" 'static constexpr int kAhead = 2;'
if [ -n "${2:-}" ]; then
  cp -r "$2" "$out/base"
  echo base
fi
