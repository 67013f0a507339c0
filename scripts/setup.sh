#!/usr/bin/env bash
# Installs what the project needs and is missing, then (re)installs the Python package.
# Idempotent and quiet when everything is present. Used by `make demo` and `make test`.
#   CC1D_VENV    the virtual environment (default ~/.cache/causal-conv1d/venv, outside the clone
#                so CI and later sessions reuse it)
#   CC1D_NVRTC12 where the NVRTC 12 wheel goes (default ~/.cache/causal-conv1d/nvrtc12), and
#   CC1D_NVRTC11 the NVRTC 11.8 wheel (default ~/.cache/causal-conv1d/nvrtc11): the C++ NVRTC tests
#                also run with each
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${CC1D_VENV:-$HOME/.cache/causal-conv1d/venv}"
NVRTC12="${CC1D_NVRTC12:-$HOME/.cache/causal-conv1d/nvrtc12}"
NVRTC11="${CC1D_NVRTC11:-$HOME/.cache/causal-conv1d/nvrtc11}"
PY="${PYTHON:-python3}"

# apt-get that waits for the Debian package lock instead of failing at once.
source scripts/apt_get.sh

# 1. System packages: compiler, CMake, Ninja, the header-only spdlog/fmt and doctest, and ccache
#    (make's builds keep their objects in ~/.cache/causal-conv1d/ccache, shared by every clone).
apt_pkgs=(g++ cmake ninja-build libspdlog-dev libfmt-dev doctest-dev ccache)
# The system python needs python3-venv for `python3 -m venv`; a pyenv python has it built in.
"$PY" -c "import venv, ensurepip" 2>/dev/null || apt_pkgs+=(python3-venv)
apt_install_missing setup "${apt_pkgs[@]}"

# 2. The virtual environment with torch, numpy, pytest and the build backend, and transformers:
#    pytest checks that every transformers model which imports causal_conv1d gets this package.
if [ ! -x "$VENV/bin/python" ]; then
  echo "setup: creating the virtual environment $VENV"
  "$PY" -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import torch, numpy, pytest, scikit_build_core, transformers" 2>/dev/null; then
  echo "setup: installing torch, numpy, pytest, scikit-build-core, transformers into $VENV (first run: several minutes)"
  "$VENV/bin/pip" install -q --disable-pip-version-check torch numpy pytest scikit-build-core transformers
fi

# 3. The NVRTCs of two pip wheels, beside the venv (not in it: torch brings its own NVRTC), for the
#    C++ NVRTC tests that run with each (Makefile: CC1D_NVRTC12, CC1D_NVRTC11): the newest CUDA 12,
#    and 11.8, the NVRTC of torch's cu118 wheels (the oldest front end a supported torch brings).
for wheel in "$NVRTC12:libnvrtc.so.12:nvidia-cuda-nvrtc-cu12" \
             "$NVRTC11:libnvrtc.so.11.2:nvidia-cuda-nvrtc-cu11==11.8.89"; do
  IFS=: read -r dir lib req <<<"$wheel"
  if [ ! -e "$dir/nvidia/cuda_nvrtc/lib/$lib" ]; then
    echo "setup: installing $req into $dir (for the C++ NVRTC tests)"
    "$VENV/bin/pip" install -q --disable-pip-version-check --no-deps --target "$dir" "$req"
  fi
done

# 4. The static SASS profile (bench/sass_profile.py, a ctest) disassembles cubins with NVIDIA's
# cuobjdump and nvdisasm: small pip packages, no GPU or toolkit needed.
if ! ls "$VENV"/lib/python3*/site-packages/nvidia/*/bin/nvdisasm "$VENV"/lib/python3*/site-packages/nvidia/*/bin/cuobjdump \
     >/dev/null 2>&1; then
  echo "setup: installing nvidia-cuda-nvdisasm, nvidia-cuda-cuobjdump into $VENV"
  "$VENV/bin/pip" install -q --disable-pip-version-check nvidia-cuda-nvdisasm nvidia-cuda-cuobjdump
fi

# 5. The package itself (incremental: scikit-build-core keeps its build dir in build/).
echo "setup: installing causal_conv1d into $VENV"
if command -v ccache >/dev/null; then  # the wheel's build shares make's object cache
  export CMAKE_CXX_COMPILER_LAUNCHER=ccache CMAKE_C_COMPILER_LAUNCHER=ccache
  # ...under the compiler names make's CMake picks: ccache hashes the name, so the wheel's g++
  # (pip's CMake chose it) missed every object of make's c++ and each unit compiled twice.
  export CXX="${CXX:-c++}" CC="${CC:-cc}"
fi
CMAKE_BUILD_PARALLEL_LEVEL="${CMAKE_BUILD_PARALLEL_LEVEL:-2}" \
  "$VENV/bin/pip" install -q --disable-pip-version-check --no-build-isolation --no-deps . 
