#!/usr/bin/env bash
# Tuning experiments for a device run: writes copies of kernels_src/ that differ from the
# working tree in one knob each, for CAUSAL_CONV1D_KERNEL_DIR (the runtime compiles whatever
# sources that names; the cache key holds their hash). Only knobs the host planner does not
# read may change here: the forward's register cap, and its channel-last tile shape at the same
# steps per work item (kFwdChannelTile x kFwdChannelTiles). bench/device_run.sh's `variants`
# step times bench/gpu_fwd.py once per directory, beside the embedded kernels.
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

# (Register caps of 40 and 32, __launch_bounds__(kFwdThreads, 12 or 16), were tried on an H200
# on 2026-12-04: they spilled, and the 16-bit vector paths ran 23-156% slower; RESULTS.md,
# "Kernel variants".)
# Channel-last tiles of 64 steps, 2 per item: 3 halo rows per 64 instead of per 32, more rows
# copied per batch, half the barriers.
TILE='constexpr int kFwdChannelTile = 32;'
TILES='constexpr int kFwdChannelTiles = 4;'
variant fwd_tile64 fwd_params.h "$TILE" 'constexpr int kFwdChannelTile = 64;' fwd_params.h "$TILES" 'constexpr int kFwdChannelTiles = 2;'
if [ -n "${2:-}" ]; then
  cp -r "$2" "$out/base"
  echo base
fi
