// test_emulator_broken.cpp — the checking mode catches a kernel with a missing __syncthreads and
// passes the same kernel with the barrier, which in turn proves the barrier really waits: in
// natural order thread 0 runs first and would read its partners' slots before they are written.
// A race between one block's successive items shows only when a block serves several: the
// checking mode's halved grid makes it so.
#include <doctest/doctest.h>

#include <numeric>
#include <string>
#include <vector>

#include "broken_kernel.h"
#include "core/error.h"
#include "fallback/emulator/launch.h"

namespace {

using cc1d::emu::Launch;
using cc1d::emu::LaunchOptions;

std::string run(const Launch& l, bool check, uint64_t seed = 0) {
  LaunchOptions o;
  o.check = check;
  o.seed = seed;
  try {
    cc1d::emu::launch(l, o);
    return "";
  } catch (const cc1d::Error& e) {
    return e.what();
  }
}

// One launch of `fn` (a block of kThreads) over `grid`, whose only output is [out, out + bytes).
Launch block_launch(void (*fn)(void**), const char* name, void** args, dim3 grid, void* out, size_t bytes) {
  Launch l;
  l.kernel = name;
  l.fn = fn;
  l.args = args;
  l.grid = grid;
  l.block = dim3(broken_kernel::kThreads);
  l.outputs = {{out, bytes}};
  return l;
}

struct SumCase {
  static constexpr int kBlocks = 6;
  std::vector<float> x, out;
  const float* px;
  float* po;
  void* args[2];
  SumCase() : x(kBlocks * broken_kernel::kThreads), out(kBlocks, -1.f) {
    // Small integers: every summation order gives the exact same float.
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7) % 13);
    px = x.data();
    po = out.data();
    args[0] = &px;
    args[1] = &po;
  }
  float want(int b) const {
    return std::accumulate(x.begin() + b * broken_kernel::kThreads, x.begin() + (b + 1) * broken_kernel::kThreads, 0.f);
  }
  Launch launch(void (*fn)(void**), const char* name) {
    return block_launch(fn, name, args, dim3(kBlocks), po, out.size() * sizeof(float));
  }
};

struct RotateCase {
  static constexpr int kRounds = 5;
  std::vector<int> in, out;
  const int* pi;
  int* po;
  int rounds = kRounds;
  void* args[3];
  RotateCase() : in(broken_kernel::kThreads), out(broken_kernel::kThreads, -1) {
    std::iota(in.begin(), in.end(), 1000);
    pi = in.data();
    po = out.data();
    args[0] = &pi;
    args[1] = &po;
    args[2] = &rounds;
  }
  int want(int t) const { return in[(t + kRounds) % broken_kernel::kThreads] + kRounds; }
  Launch launch(void (*fn)(void**), const char* name) {
    return block_launch(fn, name, args, dim3(1), po, out.size() * sizeof(int));
  }
};

struct RowsCase {
  static constexpr int kRows = 4;
  std::vector<float> x, out;
  const float* px;
  float* po;
  int rows = kRows;
  void* args[3];
  RowsCase() : x(kRows * broken_kernel::kThreads), out(kRows, -1.f) {
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 5) % 11);  // exact sums
    px = x.data();
    po = out.data();
    args[0] = &px;
    args[1] = &po;
    args[2] = &rows;
  }
  float want(int r) const {
    return std::accumulate(x.begin() + r * broken_kernel::kThreads, x.begin() + (r + 1) * broken_kernel::kThreads, 0.f);
  }
  Launch launch(void (*fn)(void**), const char* name) {  // one row per block, as a planner would size it
    return block_launch(fn, name, args, dim3(1, kRows), po, out.size() * sizeof(float));
  }
};

}  // namespace

TEST_CASE("the reduction with its barrier is right in natural order and passes the check") {
  SumCase c;
  REQUIRE(run(c.launch(broken_kernel::block_sum_with_barrier, "block_sum_with_barrier"), false) == "");
  for (int b = 0; b < SumCase::kBlocks; ++b) CHECK(c.out[b] == c.want(b));
  for (uint64_t seed : {1u, 2u, 3u, 77u}) {
    SumCase d;
    CAPTURE(seed);
    REQUIRE(run(d.launch(broken_kernel::block_sum_with_barrier, "block_sum_with_barrier"), true, seed) == "");
    for (int b = 0; b < SumCase::kBlocks; ++b) CHECK(d.out[b] == d.want(b));
  }
}

TEST_CASE("the reduction without its first barrier is wrong and the check names it") {
  SumCase c;
  REQUIRE(run(c.launch(broken_kernel::block_sum_missing_barrier, "block_sum_missing_barrier"), false) == "");
  bool any_wrong = false;
  for (int b = 0; b < SumCase::kBlocks; ++b) any_wrong = any_wrong || !(c.out[b] == c.want(b));
  CHECK(any_wrong);  // the emulator does not hide the race by running threads to completion
  for (uint64_t seed : {1u, 2u, 3u, 77u}) {
    SumCase d;
    CAPTURE(seed);
    const std::string err = run(d.launch(broken_kernel::block_sum_missing_barrier, "block_sum_missing_barrier"), true, seed);
    CHECK(err.find("kernel block_sum_missing_barrier wrote different bytes") != std::string::npos);
    CHECK(err.find("missing __syncthreads") != std::string::npos);
  }
}

TEST_CASE("a write-after-read race is caught from thread order alone") {
  // No uninitialised memory is read here, so only the shuffled order can expose the race.
  RotateCase ok;
  REQUIRE(run(ok.launch(broken_kernel::rotate_with_barrier, "rotate_with_barrier"), true, 5) == "");
  for (int t = 0; t < broken_kernel::kThreads; ++t) REQUIRE(ok.out[t] == ok.want(t));

  RotateCase natural;
  REQUIRE(run(natural.launch(broken_kernel::rotate_missing_barrier, "rotate_missing_barrier"), false) == "");
  // In natural order the last thread reads slot 0 after thread 0 rewrote it.
  CHECK(natural.out[broken_kernel::kThreads - 1] != natural.want(broken_kernel::kThreads - 1));

  for (uint64_t seed : {5u, 6u, 7u}) {
    RotateCase bad;
    CAPTURE(seed);
    const std::string err = run(bad.launch(broken_kernel::rotate_missing_barrier, "rotate_missing_barrier"), true, seed);
    CHECK(err.find("kernel rotate_missing_barrier wrote different bytes") != std::string::npos);
  }
}

TEST_CASE("a race between one block's successive items is caught by the halved grid") {
  RowsCase ok;
  REQUIRE(run(ok.launch(broken_kernel::row_totals_with_barrier, "row_totals_with_barrier"), true, 9) == "");
  for (int r = 0; r < RowsCase::kRows; ++r) REQUIRE(ok.out[r] == ok.want(r));

  // One row per block: no block has a next item, so the broken kernel is right as launched.
  RowsCase natural;
  REQUIRE(run(natural.launch(broken_kernel::row_totals_missing_barrier, "row_totals_missing_barrier"), false) == "");
  for (int r = 0; r < RowsCase::kRows; ++r) REQUIRE(natural.out[r] == natural.want(r));

  for (uint64_t seed : {9u, 10u, 11u}) {
    RowsCase bad;
    CAPTURE(seed);
    const std::string err =
        run(bad.launch(broken_kernel::row_totals_missing_barrier, "row_totals_missing_barrier"), true, seed);
    CHECK(err.find("kernel row_totals_missing_barrier wrote different bytes") != std::string::npos);
    CHECK(err.find("between one block's items") != std::string::npos);
  }
}
