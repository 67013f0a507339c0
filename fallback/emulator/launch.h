// launch.h — runs one kernel launch (grid x block emulated GPU threads) on host memory.
//
// Blocks run in parallel on the runtime's thread pool (CAUSAL_CONV1D_NUM_THREADS caps it);
// the threads of a block run as fibers on one OS thread (block_runner.h).
//
// Checking mode (CAUSAL_CONV1D_EMULATE_CHECK=1): the launch runs twice, first with threads and
// blocks in their natural order, then — from the same initial output contents — with the
// threads' start and resume order shuffled between barriers, the blocks shuffled, half the
// grid's rows of blocks in y and z (every kernel strides them, so each block then serves
// several batch rows), and fresh shared memory filled with another byte. The output regions
// must come out byte-identical; otherwise the kernel has a missing barrier, a race (between
// threads, blocks, or one block's successive items), or reads uninitialised shared memory,
// and the launch fails naming the kernel and the seed that reproduces it. One exception: a float
// that received atomicAdds (in both runs, the same number of them, or the launch fails) may
// differ by the rounding of another summation order, at most 2 * n * FLT_EPSILON * sum |addend|.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "emu_types.h"

namespace cc1d {
namespace emu {

struct Region {
  void* data = nullptr;
  size_t bytes = 0;
};

// The byte range covering a strided tensor (non-negative strides); empty when data is null or
// a size is 0. For the kernels' `writes` functions (kernel_registry.h).
Region strided_region(void* data, size_t elem_bytes, const long long* shape, const long long* strides, int rank);

struct LaunchOptions {
  bool check = false;    // CAUSAL_CONV1D_EMULATE_CHECK=1
  uint64_t seed = 0;     // CAUSAL_CONV1D_EMULATE_SEED; 0: a new seed per launch
  int max_workers = 0;   // 0: every thread of the pool (CAUSAL_CONV1D_NUM_THREADS)
  bool shuffle = false;  // without check: run once in the shuffled order (tests)
};

// Reads CAUSAL_CONV1D_EMULATE_CHECK and CAUSAL_CONV1D_EMULATE_SEED (on every call, so tests
// may change them).
LaunchOptions options_from_env();

struct Launch {
  std::string kernel;                 // the name expression, for messages
  void (*fn)(void** args) = nullptr;  // runs the kernel body for the current emulated thread
  void** args = nullptr;              // as cuLaunchKernel's kernelParams
  dim3 grid, block;
  size_t dynamic_shared = 0;
  std::vector<Region> outputs;        // what the kernel writes: compared in checking mode
};

// Runs `launch` to completion. Throws cc1d::Error: CC1D_ERR_INVALID_ARGUMENT for a geometry a
// GPU would reject, CC1D_ERR_INTERNAL for a kernel fault (deadlock, misaligned vector access,
// an exception, or outputs that depend on thread order in checking mode).
void launch(const Launch& launch, const LaunchOptions& options);

struct Stats {
  uint64_t launches = 0;         // launches run (a checked launch counts once)
  uint64_t checked_launches = 0; // of which in checking mode
  uint64_t blocks = 0;           // blocks run, both passes of checked launches included
  uint64_t threads = 0;          // emulated GPU threads run
};
Stats stats();

}  // namespace emu
}  // namespace cc1d
