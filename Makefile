# The two commands of the README:
#   make demo   installs what is missing, then runs the demo
#   make test   installs what is missing, then runs every test (ctest, the ASan job, pytest)
VENV ?= $(HOME)/.cache/causal-conv1d/venv
export CC1D_VENV := $(VENV)
NVRTC12 ?= $(HOME)/.cache/causal-conv1d/nvrtc12
export CC1D_NVRTC12 := $(NVRTC12)
NVRTC11 ?= $(HOME)/.cache/causal-conv1d/nvrtc11
export CC1D_NVRTC11 := $(NVRTC11)
# cc1d_torch builds against the venv's torch; the NVRTC tests also run with the NVRTC 12 and 11.8
# wheels.
# The shipped PTX tier of the test build holds NVRTC 12's PTX beside the newest's, so that the
# tests choose between them by the driver's version.
CMAKE_TEST_ARGS = -DCC1D_TORCH_PYTHON=$(VENV)/bin/python -DCC1D_NVRTC12=$(NVRTC12)/nvidia/cuda_nvrtc/lib/libnvrtc.so.12 \
  -DCC1D_NVRTC11=$(NVRTC11)/nvidia/cuda_nvrtc/lib/libnvrtc.so.11.2 \
  "-DCC1D_PTX_TIER_NVRTC=newest;$(NVRTC12)/nvidia/cuda_nvrtc/lib/libnvrtc.so.12"
# Compiled objects are cached outside the clone by ccache (setup installs it; paths are made
# relative to the clone), so a fresh clone on a machine that has built once rebuilds in a minute
# or two instead of about twelve. Expanded when a recipe runs, i.e. after setup.
export CCACHE_DIR ?= $(HOME)/.cache/causal-conv1d/ccache
export CCACHE_BASEDIR := $(CURDIR)
export CCACHE_NOHASHDIR := true
CCACHE = $(shell command -v ccache 2>/dev/null)
CMAKE_LAUNCHER = $(if $(CCACHE),-DCMAKE_CXX_COMPILER_LAUNCHER=$(CCACHE) -DCMAKE_C_COMPILER_LAUNCHER=$(CCACHE))
JOBS ?= 2
BUILD ?= build/cmake
BUILD_ASAN ?= build/cmake-asan
# ctest's label `slow` (each such test has a fast representative beside it: test_nvrtc_compile_all,
# every kernel variant compiled, 5 minutes on 2 cores) runs when CC1D_TEST_SLOW=1, as CI does
# (.ci/run), so that `make test` stays under 15 minutes on a 2-core machine.
CTEST_SLOW = $(if $(filter 1,$(CC1D_TEST_SLOW)),,-LE slow)

.PHONY: demo test setup cpp-test asan-test py-test aarch64-test old-torch-test compilers-test bench clean

demo: setup
	$(VENV)/bin/causal-conv1d demo

# CC1D_TEST_SLOW=1 (CI) adds the aarch64 build, cross-compiled and its tests run under qemu-user
# (11.5 minutes on 2 cores, 3.5 more when ccache is cold), the Python tests under the oldest
# torch pyproject.toml accepts (old-torch-test: 2-3 minutes, 5 more to make its venv once), and
# libcc1d built by clang++ and g++-11 (compilers-test: about 10 minutes with ccache cold).
test: setup cpp-test asan-test py-test $(if $(filter 1,$(CC1D_TEST_SLOW)),aarch64-test old-torch-test compilers-test)

setup:
	@scripts/setup.sh

cpp-test:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_TEST_ARGS) $(CMAKE_LAUNCHER) >/dev/null
	cmake --build $(BUILD) -j $(JOBS)
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS) $(CTEST_SLOW)

# The emulator and the cpu backend under AddressSanitizer and UBSan (tests labelled asan): an
# out-of-bounds access fails. scripts/asan_ctest.sh reruns once only a test whose sole failure
# was LeakSanitizer's tracer crashing at exit (a fault of the sanitizer runtime, not a finding).
# -O1, as the sanitizers' authors advise: the job's tests ran in 125 s instead of 299 at -O0
# (2.4x), for a cold build of 692 s instead of 344 (ccache keeps it warm between runs).
ASAN_FLAGS = -g -O1
asan-test:
	cmake -S . -B $(BUILD_ASAN) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG="$(ASAN_FLAGS)" \
	  -DCMAKE_C_FLAGS_DEBUG="$(ASAN_FLAGS)" -DCC1D_SANITIZE=ON -DCC1D_BUILD_BENCH=OFF $(CMAKE_LAUNCHER) >/dev/null
	cmake --build $(BUILD_ASAN) -j $(JOBS)
	scripts/asan_ctest.sh $(BUILD_ASAN) --output-on-failure -j $(JOBS) -L asan

py-test:
	$(VENV)/bin/python -m pytest -q

# The Python tests under torch 2.1 (or the oldest torch with a wheel for this Python), against the
# Release build's libcc1d: scripts/old_torch_test.sh.
old-torch-test: cpp-test
	scripts/old_torch_test.sh $(BUILD)

# libcc1d for aarch64 (Grace), its C++ tests under qemu-user: scripts/aarch64_test.sh.
aarch64-test: setup
	BUILD_AARCH64=$(BUILD)-aarch64 JOBS=$(JOBS) scripts/aarch64_test.sh

compilers-test: setup
	BUILD_COMPILERS=$(BUILD)-cc JOBS=$(JOBS) scripts/compilers_test.sh

bench: setup
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release $(CMAKE_TEST_ARGS) $(CMAKE_LAUNCHER) >/dev/null
	cmake --build $(BUILD) -j $(JOBS)
	$(BUILD)/bench/bench_compile
	$(BUILD)/bench/bench_overhead
	$(BUILD)/bench/bench_cache_load

clean:
	rm -rf build
