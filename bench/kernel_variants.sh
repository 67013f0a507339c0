#!/usr/bin/env bash
# Tuning experiments for a device run, one knob changed each, timed by bench/device_run.sh's
# `variants` step beside the working tree: a variant named fwd_* with bench/gpu_fwd.py, bwd_*
# with bench/gpu_bwd.py (its vector layouts), `base` with both.
#
#   bench/kernel_variants.sh OUT_DIR [BASE_DIR]   (on the device: kernel variants)
#   bench/kernel_variants.sh --libs OUT_DIR       (on the build machine: library variants)
#   bench/kernel_variants.sh --check OUT_DIR      (kernel variants, and the library variants'
#                                                  edits on copies of their files: nothing built)
#
# Kernel variants are copies of kernels_src/ for CAUSAL_CONV1D_KERNEL_DIR (the runtime compiles
# whatever sources that names; the cache key holds their hash): only knobs the host planner does
# not read may change there (register caps, loads in flight, tile shapes at the same steps per
# work item). With BASE_DIR (kernel sources of another revision, e.g.
# `git archive HEAD kernels_src | tar -x -C build/kernels-base --strip-components=1`, carried to
# the device, which has no git history), also OUT_DIR/base/: a before/after in the same run.
# Library variants change a constant that the planner reads too: each is libcc1d built from a
# copy of the tracked sources (as they are in the working tree) into OUT_DIR/<name>/libcc1d.so,
# for CAUSAL_CONV1D_LIBRARY; device_run.sh takes them from CC1D_LIB_VARIANTS=OUT_DIR (carried,
# about 9 MB each). Each edit must match exactly once, or the script fails: a variant identical
# to the working tree would measure nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
libs=0 check=0
[ "${1:-}" = --libs ] && libs=1 && shift
[ "${1:-}" = --check ] && check=1 && shift
out=${1:?usage: bench/kernel_variants.sh [--libs | --check] OUT_DIR [BASE_DIR]}
rm -rf "$out"
mkdir -p "$out"

# edit NAME DIR FILE FROM TO [FILE FROM TO]...: FROM replaced by TO in DIR/FILE.
edit() {
  local name=$1 dir=$2
  shift 2
  while (($#)); do
    local f="$dir/$1" from=$2 to=$3
    shift 3
    [ "$(grep -cF -- "$from" "$f")" = 1 ] || { echo "variant $name: '$from' is not in $f exactly once" >&2; exit 1; }
    FROM="$from" TO="$to" perl -0pi -e 's/\Q$ENV{FROM}\E/$ENV{TO}/' "$f"
  done
}

# variant NAME FILE FROM TO [...]: kernels_src/ with the edits (FILE relative to kernels_src/).
variant() {
  ((libs)) && return 0
  cp -r kernels_src "$out/$1"
  edit "$1" "$out/$1" "${@:2}"
  echo "$1"
}

# variant_file NAME FILE SRC [FILE FROM TO]...: kernels_src/ with FILE replaced by SRC (a file of
# bench/variants/, relative to the repo), then the edits.
variant_file() {
  ((libs)) && return 0
  cp -r kernels_src "$out/$1"
  cp "$3" "$out/$1/$2"
  edit "$1" "$out/$1" "${@:4}"
  echo "$1"
}

# lib_variant NAME FILE FROM TO [...]: libcc1d built with the edits (FILE relative to the repo),
# without the shipped PTX tier (smaller to carry; the benchmarks time warm calls).
lib_variant() {
  ((libs || check)) || return 0
  if ((check)); then  # each edit must apply; nothing is built
    local i
    for ((i = 2; i <= $#; i += 3)); do
      mkdir -p "$out/$1/src/$(dirname "${!i}")"
      cp "${!i}" "$out/$1/src/${!i}"
    done
    edit "$1" "$out/$1/src" "${@:2}"
    echo "$1"
    return 0
  fi
  local src="$out/$1/src" bld="$out/$1/build"
  mkdir -p "$src"
  git ls-files -z | xargs -0 cp --parents -t "$src"
  edit "$1" "$src" "${@:2}"
  cmake -S "$src" -B "$bld" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCC1D_BUILD_TESTS=OFF -DCC1D_BUILD_BENCH=OFF \
    -DCC1D_BUILD_EMULATOR=OFF -DCC1D_BUILD_PYARGS=OFF -DCC1D_BUILD_TORCH=OFF -DCC1D_PTX_TIER=OFF > "$out/$1/cmake.log"
  cmake --build "$bld" --target cc1d >> "$out/$1/cmake.log"
  cp -L "$bld/libcc1d.so" "$out/$1/libcc1d.so"
  # The argument packer is found beside libcc1d: the main build's, so that calls cost the same.
  [ ! -f build/cmake/libcc1d_pyargs.so ] || cp build/cmake/libcc1d_pyargs.so "$out/$1/"
  rm -rf "$src" "$bld"
  echo "$1"
}

# Measured on an H200 and dropped (RESULTS.md, "Kernel variants"): the forward's register caps of
# 40 and 32 (they spilled; 23-156% slower) and 64-step channel-last tiles (within 3 points
# either way); the backward's TIME_VEC with 2 or 3 warp steps of loads ahead at 96 or 120
# registers (16-bit 4-8 points slower), and fp32 two ahead (7-9 points slower); 2026-12-04.
# The backward's TIME_VEC at 72 registers (7 resident blocks; it spills 22 instructions outside
# its loop) against the tree's 80 (6 blocks).
MINB='return layout == kBwdLayoutTimeVec && x_bytes == 2 ? 6 : 0;'
variant bwd_mb7 bwd_params.h "$MINB" "${MINB/? 6 :/? 7 :}"
# Channel-last items in channel-block-major order: the tree gives consecutive blocks consecutive
# time chunks of one block of channels, so at dim 8192 (16 KiB rows) the resident blocks read
# 128-byte pieces of many rows, a few channel blocks wide. With the channel block varying fastest,
# they read whole rows side by side, and (backward) their atomics go to different channels. The
# forward's 1x8192x16384 channel-last rows stayed at 82% with every tile shape; emulator grids
# pass with both edits (checked 2026-12-05).
MAPF='const long long chunk = u % nt, cb = u / nt;'
variant fwd_cbfast fwd.cuh "$MAPF" 'const unsigned ncb = (unsigned)p.num_channel_blocks; const bool cbf = !(PATH == kFwdPathTime || PATH == kFwdPathTimeSeq); const long long chunk = cbf ? u / ncb : u % nt, cb = cbf ? u % ncb : u / nt;'
MAPB='const long long seg = u % ns, cb = u / ns;'
variant bwd_cbfast bwd.cuh "$MAPB" 'const unsigned ncb = (unsigned)p.num_channel_blocks; const bool cbf = bwd_channel_layout(LAYOUT); const long long seg = cbf ? u / ncb : u % ns, cb = cbf ? u % ncb : u / ns;'
# Every kernel's 16-byte global stores as streaming stores (st.global.cs: evict-first, the
# outputs are not read again), timed by both benchmarks.
STV='asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};"'
variant st_cs common.cuh "$STV" "${STV/st.global.v4/st.global.cs.v4}"
# The backward's TIME_VEC walk unrolled by 2, as in the tree (ptxas then keeps the two stages in
# registers of their own: bf16 on sm_90 executes about 28.7 loop instructions an output against
# 31.1, for 15% more compile time), or not at all.
variant bwd_unroll1 bwd_time_vec.cuh '#pragma unroll 2' '#pragma unroll 1'
# The backward's TIME_VEC walk with its loads as asynchronous copies into a ring of the warp's
# shared memory, 3 warp steps ahead (bench/variants/bwd_time_vec_async.cuh): 3 KiB in flight a
# warp (16-bit) instead of 1 at the same 80 registers, for about 9% more instructions (sm_90
# bf16 loop 30.9 -> 33.6 an output). Whether the walk waits on memory or on its arithmetic, which
# the registers-held loads ahead (above) could not tell apart: they cost occupancy. With 72
# registers (7 blocks, 44%) it spills 12 instructions outside the loop on sm_90, none in it.
# Emulator grids pass (2026-12-05, again at 19:30 with the head peel of rows off 16 bytes, which
# it shares with the tree through bwd_vec_ends.cuh). `base` (older kernels) assumes aligned rows,
# as the `variants` step's layouts (channel-first of 2048 steps, channel-last) are.
variant_file bwd_async bwd_time_vec.cuh bench/variants/bwd_time_vec_async.cuh
variant_file bwd_async_mb7 bwd_time_vec.cuh bench/variants/bwd_time_vec_async.cuh bwd_params.h "$MINB" "${MINB/? 6 :/? 7 :}"
# The backward's TIME_VEC segments: at least 4 warp steps (1024 steps) a warp, as in the tree,
# or 8 or 16 (a whole row up to 4096 steps: upstream's block walks its whole row); the
# per-(channel, segment) setup (weights, the halo's recomputed g, the sums' reduction) took a
# third of the walk's instructions at 4 on an H200.
SPANS='constexpr int kBwdVecMinSpans = 4;'
lib_variant bwd_spans8 kernels_src/bwd_params.h "$SPANS" "${SPANS/= 4;/= 8;}"
lib_variant bwd_spans16 kernels_src/bwd_params.h "$SPANS" "${SPANS/= 4;/= 16;}"
# The forward's channel-last work items of 8 tiles (256 steps) instead of 4: the 16384-step rows
# stayed at 82% of the copy with every tile shape tried.
TILES='constexpr int kFwdChannelTiles = 4;'
lib_variant fwd_tiles8 kernels_src/fwd_params.h "$TILES" "${TILES/= 4;/= 8;}"
# The backward's channel walks (CHANNEL_VEC among them) over segments of at least 256 steps
# instead of 64 (2 tiles an item at 2048 steps): the per-item setup (weights, the halo's
# recomputed g) and the reduction of the sums over fewer steps.
CHSEG='constexpr int kBwdMinChannelSegment = 64;'
lib_variant bwd_chseg256 kernels_src/bwd_params.h "$CHSEG" "${CHSEG/= 64;/= 256;}"
# Channel-first rows under 40 steps (of 16 channels or more) walk channels on every backend since
# 2026-12-05 (ConvProblem::time_major, conv_inputs.h), as the cpu backend measured; on the GPU
# that rests on an estimate: the time paths give such a row a warp (TIME_VEC) or a block (TIME),
# most of whose lanes idle, and a row of 8 steps costs a few hundred warp instructions of setup
# and one step for its 8 outputs, where the channel paths give a lane a channel (about 30
# instructions an output, 32 outputs a warp instruction). `time_short_rows` restores the walk
# along time, for the measurement: timed on the benchmarks' short-row shape (64, 4096, 8).
ROUTE='time_major = rows_along_time && (seqlen >= kMinTimeMajorLen || dim < kMinChannelMajorDim);'
lib_variant time_short_rows runtime/src/ops/conv_inputs.h "$ROUTE" 'time_major = rows_along_time;'
# The CHANNEL_VEC fp32 tiles of 32 channels (128-byte rows, a channel a lane) as before
# 2026-12-06, against the tree's 64 (two a lane; 16-bit tiles are the same in both): on sm_90
# the backward executes about 50.6 instructions an output at 48 registers and 56% occupancy
# against 38.5 at 96 and 31% (on sm_80 44% -> 19%, by shared memory), the forward with silu 31.6
# at 94% against 21.6 at 50%. Measured on the H200 (2026-12-04): backward 68-73% of the copy,
# forward 82-90%.
TILE='  constexpr int C = kBwdTileChannels;          // channels per tile row'
TPLAN='g.num_channel_blocks = ceil_div(p.dim, kBwdTileChannels);'
lib_variant bwd_tile128b kernels_src/bwd.cuh "$TILE" '  constexpr int C = 128 / (int)sizeof(TX);' \
  runtime/src/ops/bwd/bwd_plan.cpp "$TPLAN" 'g.num_channel_blocks = ceil_div(p.dim, 128 / dtype_size(p.x_dtype));'
FTILE='  constexpr int C = kFwdTileChannels;          // channels per tile row'
FPLAN='p.num_channel_blocks = ceil_div(pr.dim, kFwdTileChannels);'
lib_variant fwd_tile128b kernels_src/fwd.cuh "$FTILE" '  constexpr int C = 128 / (int)sizeof(TX);' \
  runtime/src/ops/fwd/fwd_plan.cpp "$FPLAN" 'p.num_channel_blocks = ceil_div(pr.dim, 128 / dtype_size(pr.x_dtype));'
if ((!libs)) && [ -n "${2:-}" ]; then
  cp -r "$2" "$out/base"
  echo base
fi
