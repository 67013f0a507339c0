// test_emulator_core.cpp — the emulator's CUDA semantics, one feature per test case, with small
// host-compiled kernels (test_emulator_kernels.cpp).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "fallback/emulator/launch.h"
#include "fallback/cpu/thread_pool.h"
#include "test_emulator_kernels.h"

namespace {

using cc1d::emu::Launch;
using cc1d::emu::LaunchOptions;

Launch make(const char* name, emu_kernels::Fn fn, void** args, dim3 grid, dim3 block, size_t shared = 0) {
  Launch l;
  l.kernel = name;
  l.fn = fn;
  l.args = args;
  l.grid = grid;
  l.block = block;
  l.dynamic_shared = shared;
  return l;
}

// Runs and returns the error message ("" on success).
std::string run(const Launch& l, LaunchOptions o = {}) {
  try {
    cc1d::emu::launch(l, o);
    return "";
  } catch (const cc1d::Error& e) {
    return e.what();
  }
}

}  // namespace

TEST_CASE("threads start in natural order by default and in a shuffled order when asked") {
  const int blocks = 3, threads = 128;
  std::vector<int> counter(blocks, 0), order(blocks * threads, -1);
  int* pc = counter.data();
  int* po = order.data();
  void* args[] = {&pc, &po};
  Launch l = make("record_order", emu_kernels::record_order, args, dim3(blocks), dim3(threads));
  REQUIRE(run(l) == "");
  for (int b = 0; b < blocks; ++b)
    for (int t = 0; t < threads; ++t) REQUIRE(order[b * threads + t] == t);

  // Checking mode runs the launch again shuffled; this kernel's output depends on the order,
  // so the check must fail — which also shows the second run really is in another order.
  std::fill(counter.begin(), counter.end(), 0);
  std::fill(order.begin(), order.end(), -1);
  LaunchOptions check;
  check.check = true;
  check.seed = 42;
  // The counters are written too: the second run must start from the same zeros.
  l.outputs = {{po, order.size() * sizeof(int)}, {pc, counter.size() * sizeof(int)}};
  const std::string err = run(l, check);
  CHECK(err.find("record_order") != std::string::npos);
  CHECK(err.find("different bytes") != std::string::npos);
  CHECK(err.find("CAUSAL_CONV1D_EMULATE_SEED=42") != std::string::npos);
  // The shuffled result is left in place: a permutation of 0..127 per block, not the identity.
  for (int b = 0; b < blocks; ++b) {
    std::vector<int> ranks(order.begin() + b * threads, order.begin() + (b + 1) * threads);
    std::vector<int> sorted = ranks;
    std::sort(sorted.begin(), sorted.end());
    for (int t = 0; t < threads; ++t) REQUIRE(sorted[t] == t);
    std::vector<int> identity(threads);
    std::iota(identity.begin(), identity.end(), 0);
    CHECK(ranks != identity);
  }
}

TEST_CASE("warp shuffles, votes and activemask over a warp of 32 fibers") {
  const int threads = 64;
  std::vector<unsigned> out(threads * 12, 0xdeadbeef);
  unsigned* p = out.data();
  void* args[] = {&p};
  LaunchOptions check;
  check.check = true;
  Launch l = make("warp_ops", emu_kernels::warp_ops, args, dim3(1), dim3(threads));
  l.outputs = {{p, out.size() * sizeof(unsigned)}};
  REQUIRE(run(l, check) == "");
  unsigned ballot3 = 0;
  for (int l3 = 0; l3 < 32; l3 += 3) ballot3 |= 1u << l3;
  for (int tid = 0; tid < threads; ++tid) {
    const unsigned lane = tid % 32;
    const unsigned* o = &out[tid * 12];
    CAPTURE(tid);
    CHECK(o[0] == 528u);
    CHECK(o[1] == (31 - lane) * 10);
    CHECK(o[2] == (lane >= 3 ? lane - 3 : lane));
    CHECK(o[3] == (lane + 5 < 32 ? lane + 5 : lane));
    CHECK(o[4] == (lane & 16u));
    CHECK(o[5] == (lane ^ 4u));
    CHECK(o[6] == ballot3);
    CHECK(o[7] == 1u);
    CHECK(o[8] == 0u);
    CHECK(o[9] == (lane < 16 ? 0xaaaau : 0u));
    CHECK(o[10] == (lane ^ 1u));
    CHECK(o[11] == 0xffffffffu);
  }
}

TEST_CASE("__syncthreads_count/_and/_or reduce over the block") {
  std::vector<int> out(4, -1);
  int* p = out.data();
  void* args[] = {&p};
  REQUIRE(run(make("barrier_votes", emu_kernels::barrier_votes, args, dim3(1), dim3(100))) == "");
  CHECK(out[0] == 34);  // 0, 3, ..., 99
  CHECK(out[1] == 0);
  CHECK(out[2] == 1);
  CHECK(out[3] == 1);
}

TEST_CASE("dynamic shared memory is per block and a barrier orders its writes and reads") {
  const int blocks = 5, threads = 96;
  std::vector<float> in(blocks * threads), out(blocks * threads, -1.f);
  std::iota(in.begin(), in.end(), 0.f);
  const float* pi = in.data();
  float* po = out.data();
  void* args[] = {&pi, &po};
  LaunchOptions check;
  check.check = true;
  Launch l = make("reverse_dynamic_shared", emu_kernels::reverse_dynamic_shared, args, dim3(blocks), dim3(threads),
                  threads * sizeof(float));
  l.outputs = {{po, out.size() * sizeof(float)}};
  REQUIRE(run(l, check) == "");
  for (int b = 0; b < blocks; ++b)
    for (int t = 0; t < threads; ++t) REQUIRE(out[b * threads + t] == in[b * threads + threads - 1 - t]);
}

TEST_CASE("3-D grids and blocks give CUDA's threadIdx, blockIdx, blockDim and gridDim") {
  const dim3 grid(2, 3, 2), block(4, 2, 3);
  const int n = 2 * 3 * 2 * 4 * 2 * 3;
  std::vector<unsigned> out(4 * n, 0xffffffffu);
  unsigned* p = out.data();
  void* args[] = {&p};
  REQUIRE(run(make("indices_3d", emu_kernels::indices_3d, args, grid, block)) == "");
  int i = 0;
  for (unsigned bz = 0; bz < 2; ++bz)
    for (unsigned by = 0; by < 3; ++by)
      for (unsigned bx = 0; bx < 2; ++bx)
        for (unsigned tz = 0; tz < 3; ++tz)
          for (unsigned ty = 0; ty < 2; ++ty)
            for (unsigned tx = 0; tx < 4; ++tx, ++i) {
              REQUIRE(out[4 * i + 0] == (tx | ty << 8 | tz << 16));
              REQUIRE(out[4 * i + 1] == (bx | by << 8 | bz << 16));
              REQUIRE(out[4 * i + 2] == (4u | 2u << 8 | 3u << 16));
              REQUIRE(out[4 * i + 3] == (2u | 3u << 8 | 2u << 16));
            }
}

TEST_CASE("atomicAdd on float and int is exact across parallel blocks") {
  float fsum = 0.f;
  int isum = 0;
  float* pf = &fsum;
  int* pi = &isum;
  void* args[] = {&pf, &pi};
  REQUIRE(run(make("atomics", emu_kernels::atomics, args, dim3(64), dim3(128))) == "");
  CHECK(isum == 64 * 128);
  CHECK(fsum == 8192.f);
}

TEST_CASE("atomics are real read-modify-writes and, in a shuffled run, interleave between threads") {
  const int blocks = 8, threads = 64, n = blocks * threads;
  int counter = 0;
  std::vector<int> out(2 * n, -1);
  int* pc = &counter;
  int* po = out.data();
  void* args[] = {&pc, &po};
  // Natural order within a block: a thread's two tickets are consecutive.
  LaunchOptions one_worker;
  one_worker.max_workers = 1;
  REQUIRE(run(make("atomic_tickets", emu_kernels::atomic_tickets, args, dim3(blocks), dim3(threads)), one_worker) == "");
  for (int g = 0; g < n; ++g) REQUIRE(out[2 * g + 1] == out[2 * g] + 1);
  for (uint64_t seed : {3u, 4u, 5u}) {
    counter = 0;
    std::fill(out.begin(), out.end(), -1);
    LaunchOptions shuffled;
    shuffled.shuffle = true;
    shuffled.seed = seed;
    REQUIRE(run(make("atomic_tickets", emu_kernels::atomic_tickets, args, dim3(blocks), dim3(threads)), shuffled) == "");
    // No ticket lost or given twice (blocks run on several OS threads), and the threads'
    // atomics interleaved: some thread's two tickets are not consecutive.
    std::vector<int> sorted = out;
    std::sort(sorted.begin(), sorted.end());
    for (int i = 0; i < 2 * n; ++i) REQUIRE(sorted[i] == i);
    int interleaved = 0;
    for (int g = 0; g < n; ++g) interleaved += out[2 * g + 1] != out[2 * g] + 1;
    CHECK(interleaved > n / 4);
  }
}

TEST_CASE("checking mode accepts float atomicAdd sums that round differently, and nothing else") {
  const int blocks = 16, threads = 128, n = blocks * threads;
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i) x[i] = 1.0f + 1e-3f * static_cast<float>((i * 7919) % 1000);  // order-dependent rounding
  std::vector<float> sums(4, 0.f);
  const float* px = x.data();
  float* ps = sums.data();
  void* args[] = {&px, &ps};
  LaunchOptions check;
  check.check = true;
  Launch sum_launch = make("float_atomic_sums", emu_kernels::float_atomic_sums, args, dim3(blocks), dim3(threads));
  sum_launch.outputs = {{ps, sums.size() * sizeof(float)}};
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    std::fill(sums.begin(), sums.end(), 0.f);
    check.seed = seed;
    REQUIRE(run(sum_launch, check) == "");
    for (int j = 0; j < 4; ++j) {
      double want = 0;
      for (int i = j; i < n; i += 4) want += x[i];
      CHECK(std::fabs(sums[j] - want) <= 1e-6 * want * n);
    }
  }
  // The same sums with a plain `+=` (one block, so no race on a GPU-like memory either): the
  // rounding differs between orders and nothing excuses it.
  Launch plain = make("float_plain_sums", emu_kernels::float_plain_sums, args, dim3(1), dim3(threads));
  plain.outputs = sum_launch.outputs;
  int caught = 0;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    std::fill(sums.begin(), sums.end(), 0.f);
    check.seed = seed;
    caught += run(plain, check).find("wrote different bytes") != std::string::npos;
  }
  CHECK(caught > 0);
  // A kernel whose set of float atomics depends on the order fails, saying so.
  int counter = 0;
  float hits = 0.f;
  int* pc = &counter;
  float* ph = &hits;
  void* args2[] = {&pc, &ph};
  Launch own = make("own_ticket_adds", emu_kernels::own_ticket_adds, args2, dim3(1), dim3(threads));
  own.outputs = {{ph, sizeof(float)}};
  check.seed = 7;
  const std::string err = run(own, check);
  CHECK(err.find("made 128 float atomicAdd(s)") != std::string::npos);
  CHECK(err.find("must not depend on the order") != std::string::npos);
  CHECK(err.find("CAUSAL_CONV1D_EMULATE_SEED=7") != std::string::npos);
}

TEST_CASE("threads that exit count as arrived at later barriers") {
  std::vector<int> out(64, 0);
  int* p = out.data();
  void* args[] = {&p};
  REQUIRE(run(make("early_exit", emu_kernels::early_exit, args, dim3(1), dim3(64))) == "");
  for (int t = 0; t < 64; ++t) CHECK(out[t] == (t & 1 ? 0 : 3));
}

TEST_CASE("a barrier and a warp operation that wait for each other are reported as a deadlock") {
  std::vector<int> out(32, 0);
  int* p = out.data();
  void* args[] = {&p};
  const std::string err = run(make("deadlock_kernel", emu_kernels::deadlock, args, dim3(2), dim3(32)));
  CHECK(err.find("deadlock") != std::string::npos);
  CHECK(err.find("deadlock_kernel") != std::string::npos);
  CHECK(err.find("1 thread(s) wait in __syncthreads and 31 in warp operations") != std::string::npos);
  // The runner recovers: its fibers are reset and a later launch works.
  std::vector<int> ok(64, 0);
  int* q = ok.data();
  void* args2[] = {&q};
  CHECK(run(make("early_exit", emu_kernels::early_exit, args2, dim3(1), dim3(64))) == "");
  CHECK(ok[0] == 3);
}

TEST_CASE("a misaligned vector load is an error naming the kernel; an aligned one is not") {
  alignas(16) float base[12];
  std::iota(base, base + 12, 1.f);
  float out[4] = {0, 0, 0, 0};
  const float* pb = base;
  float* po = out;
  int offset = 4;
  void* args[] = {&pb, &offset, &po};
  REQUIRE(run(make("vec_load", emu_kernels::vec_load, args, dim3(1), dim3(32))) == "");
  CHECK(out[0] == 5.f);
  CHECK(out[3] == 8.f);
  offset = 1;
  const std::string err = run(make("vec_load", emu_kernels::vec_load, args, dim3(1), dim3(32)));
  CHECK(err.find("misaligned 16-byte vector load") != std::string::npos);
  CHECK(err.find("kernel vec_load") != std::string::npos);
  CHECK(err.find("address % 16 = 4") != std::string::npos);
}

TEST_CASE("an exception thrown by a kernel becomes an error of the launch") {
  std::vector<int> out(32, 0);
  int* p = out.data();
  void* args[] = {&p};
  const std::string err = run(make("throws", emu_kernels::throws, args, dim3(1), dim3(32)));
  CHECK(err.find("thread (5,0,0) of block (0,0,0) of kernel throws") != std::string::npos);
  CHECK(err.find("kernel says no") != std::string::npos);
}

TEST_CASE("impossible launch geometries are rejected like a GPU would") {
  int* p = nullptr;
  void* args[] = {&p};
  CHECK(run(make("k", emu_kernels::atomics, args, dim3(1), dim3(1025))).find("not a valid CUDA block") !=
        std::string::npos);
  CHECK(run(make("k", emu_kernels::atomics, args, dim3(1), dim3(8, 8, 65))).find("not a valid CUDA block") !=
        std::string::npos);
  CHECK(run(make("k", emu_kernels::atomics, args, dim3(1, 70000), dim3(32))).find("not a valid CUDA grid") !=
        std::string::npos);
  CHECK(run(make("k", emu_kernels::atomics, args, dim3(1), dim3(32), 300 * 1024)).find("dynamic shared") !=
        std::string::npos);
}

TEST_CASE("blocks run in parallel on the pool, and max_workers caps it") {
  // ctest sets CAUSAL_CONV1D_NUM_THREADS=4, so the pool has several threads even on one core.
  REQUIRE(cc1d::num_threads() >= 2);
  const int blocks = 24;
  std::vector<unsigned long long> ids(blocks, 0);
  unsigned long long* p = ids.data();
  void* args[] = {&p};
  REQUIRE(run(make("record_os_thread", emu_kernels::record_os_thread, args, dim3(blocks), dim3(32))) == "");
  CHECK(std::set<unsigned long long>(ids.begin(), ids.end()).size() >= 2);
  LaunchOptions one;
  one.max_workers = 1;
  std::fill(ids.begin(), ids.end(), 0);
  REQUIRE(run(make("record_os_thread", emu_kernels::record_os_thread, args, dim3(blocks), dim3(32)), one) == "");
  CHECK(std::set<unsigned long long>(ids.begin(), ids.end()).size() == 1);
}

TEST_CASE("statistics count launches, blocks and threads") {
  const cc1d::emu::Stats before = cc1d::emu::stats();
  float f = 0;
  int i = 0;
  float* pf = &f;
  int* pi = &i;
  void* args[] = {&pf, &pi};
  REQUIRE(run(make("atomics", emu_kernels::atomics, args, dim3(3), dim3(50))) == "");
  const cc1d::emu::Stats after = cc1d::emu::stats();
  CHECK(after.launches == before.launches + 1);
  CHECK(after.blocks == before.blocks + 3);
  CHECK(after.threads == before.threads + 150);
}
