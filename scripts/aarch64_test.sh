#!/usr/bin/env bash
# The aarch64 build (Grace hosts: GH200, GB200), checked from an x86-64 machine: libcc1d and its
# C++ tests cross-compiled with Debian's g++-aarch64-linux-gnu (cmake/toolchains/), each test run
# under qemu-user, the NVRTC tests with NVIDIA's aarch64 NVRTC wheel. On aarch64 there is no
# AVX: the cpu backend runs its NEON units (simd_base.cpp and simd_neon_bf16.cpp; qemu emulates
# FEAT_BF16), whose conversions, clamps and reciprocal no x86 build compiles. `make aarch64-test`;
# CI runs it.
#   BUILD_AARCH64       the build directory (default build/cmake-aarch64)
#   CC1D_NVRTC_AARCH64  where the wheel goes (default ~/.cache/causal-conv1d/aarch64-nvrtc13)
#
# Left out, for what qemu-user 7.2 (Debian 12) cannot do; each passes on x86-64:
# - the two cases of test_cpu_fwd that fork while the thread pool runs (qemu aborts in the child:
#   "qemu_plugin_vcpu_init_hook: assertion failed");
# - tests that start their children with exec (test_fake_driver_e2e, test_cache_fleet): an aarch64
#   executable runs only through qemu, which exec does not know of without binfmt_misc;
# - test_huge_pages: it reads /proc/self/smaps, which qemu shows with the host's addresses;
# - label `slow` (every kernel variant compiled, about an hour under qemu), and test_fake_driver_nvrtc
#   (every forward variant compiled: 42 s on x86-64, 11 minutes under qemu; the nvrtc_backend
#   scenarios run the aarch64 NVRTC through the same fake driver).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${BUILD_AARCH64:-build/cmake-aarch64}"
NVRTC="${CC1D_NVRTC_AARCH64:-$HOME/.cache/causal-conv1d/aarch64-nvrtc13}"
VENV="${CC1D_VENV:-$HOME/.cache/causal-conv1d/venv}"
JOBS="${JOBS:-2}"
source scripts/apt_get.sh

apt_install_missing aarch64-test g++-aarch64-linux-gnu qemu-user
# NVRTC 13.0: the fake driver reports CUDA 13.0, and a newer NVRTC's PTX is refused by an older
# driver (as a real one would), which nvrtc_backend.future_sm_ptx would then see.
LIBNVRTC="$NVRTC/nvidia/cu13/lib/libnvrtc.so.13"
if [ ! -e "$LIBNVRTC" ]; then
  echo "aarch64-test: installing the aarch64 NVRTC 13.0 wheel into $NVRTC"
  "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps --only-binary=:all: \
    --platform manylinux2014_aarch64 --target "$NVRTC" "nvidia-cuda-nvrtc==13.0.*"
fi

launcher=()
command -v ccache >/dev/null && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_C_COMPILER_LAUNCHER=ccache)
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_TOOLCHAIN_FILE=cmake/toolchains/aarch64-linux-gnu.cmake \
  -DCC1D_BUILD_PYARGS=OFF -DCC1D_BUILD_TORCH=OFF -DCC1D_BUILD_BENCH=OFF "${launcher[@]}" >/dev/null
cmake --build "$BUILD" -j "$JOBS"
readelf -h "$BUILD/libcc1d.so" | grep -q AArch64 || { echo "aarch64-test: $BUILD/libcc1d.so is not an aarch64 library" >&2; exit 1; }
sysroot=$(sed -n 's/^CC1D_AARCH64_SYSROOT:PATH=//p' "$BUILD/CMakeCache.txt")

export CAUSAL_CONV1D_NVRTC="$(readlink -f "$LIBNVRTC")"
export CC1D_TEST_SIMD_BUILDS=neon_bf16,base  # test_cpu_simd: both NEON units run (qemu has FEAT_BF16)
status=0
ctest --test-dir "$BUILD" --output-on-failure -j "$JOBS" -LE slow \
  -E '^(test_cpu_fwd|test_fake_driver_e2e|test_cache_fleet|test_huge_pages|test_fake_driver_nvrtc)$' || status=1
echo "aarch64-test: the NEON units' steady-state loops (bench/neon_loops.py)"
python3 bench/neon_loops.py "$BUILD" --check || status=1
echo "aarch64-test: test_cpu_fwd without its two fork cases"
qemu-aarch64 -L "$sysroot" "$BUILD/tests/cpp/test_cpu_fwd" --test-case-exclude='*forked*' || status=1
exit $status
