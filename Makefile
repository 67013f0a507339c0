# The two commands of the README:
#   make demo   installs what is missing, then runs the demo
#   make test   installs what is missing, then runs every test (ctest, the ASan job, pytest)
VENV ?= $(HOME)/.cache/causal-conv1d/venv
export CC1D_VENV := $(VENV)
JOBS ?= 2
BUILD ?= build/cmake
BUILD_ASAN ?= build/cmake-asan

.PHONY: demo test setup cpp-test asan-test py-test bench clean

demo: setup
	$(VENV)/bin/causal-conv1d demo

test: setup cpp-test asan-test py-test

setup:
	@scripts/setup.sh

cpp-test:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build $(BUILD) -j $(JOBS)
	ctest --test-dir $(BUILD) --output-on-failure -j $(JOBS)

# The emulator under AddressSanitizer: an out-of-bounds global or shared access fails.
asan-test:
	cmake -S . -B $(BUILD_ASAN) -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCC1D_SANITIZE=ON -DCC1D_BUILD_BENCH=OFF >/dev/null
	cmake --build $(BUILD_ASAN) -j $(JOBS)
	ctest --test-dir $(BUILD_ASAN) --output-on-failure -j $(JOBS) -L asan

py-test:
	$(VENV)/bin/python -m pytest -q

bench: setup
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
	cmake --build $(BUILD) -j $(JOBS)
	$(BUILD)/bench/bench_compile
	$(BUILD)/bench/bench_overhead
	$(BUILD)/bench/bench_cache_load

clean:
	rm -rf build
