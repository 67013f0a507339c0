#include "fallback/emulator/launch.h"

#include <algorithm>
#include <atomic>
#include <cfloat>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>

#include "core/error.h"
#include "core/gpu_limits.h"
#include "fallback/cpu/thread_pool.h"
#include "fallback/emulator/block_runner.h"

namespace cc1d {
namespace emu {

namespace {

std::atomic<uint64_t> g_launches{0}, g_checked{0}, g_blocks{0}, g_threads{0};

// One runner per OS thread, kept with its fibers for later launches.
BlockRunner& local_runner() {
  thread_local std::unique_ptr<BlockRunner> runner;
  if (!runner) runner = std::make_unique<BlockRunner>();
  return *runner;
}

uint64_t gcd(uint64_t a, uint64_t b) {
  while (b != 0) {
    const uint64_t t = a % b;
    a = b;
    b = t;
  }
  return a;
}

// Block visiting order: identity, or the bijection i -> (a*i + c) mod n with gcd(a, n) = 1.
struct BlockOrder {
  uint64_t n = 1, a = 1, c = 0;
  uint64_t operator()(uint64_t i) const {
    return static_cast<uint64_t>((static_cast<unsigned __int128>(a) * i + c) % n);
  }
};

BlockOrder block_order(uint64_t n, bool random, uint64_t seed) {
  BlockOrder o;
  o.n = n;
  if (!random || n < 2) return o;
  uint64_t s = seed * 0x2545f4914f6cdd1dull + 0x9e3779b97f4a7c15ull;
  o.c = s % n;
  o.a = (s >> 17) % n;
  while (o.a == 0 || gcd(o.a, n) != 1) o.a = (o.a + 1) % n;
  return o;
}

void validate_geometry(const Launch& l) {
  const dim3 b = l.block, g = l.grid;
  const uint64_t threads = uint64_t(b.x) * b.y * b.z;
  if (b.x == 0 || b.y == 0 || b.z == 0 || b.x > kMaxBlockThreads || b.y > kMaxBlockThreads || b.z > kMaxBlockZ ||
      threads > kMaxBlockThreads)
    fail(CC1D_ERR_INVALID_ARGUMENT,
         "emulated launch of " + l.kernel + ": block (" + std::to_string(b.x) + "," + std::to_string(b.y) + "," +
             std::to_string(b.z) + ") is not a valid CUDA block (each dimension >= 1, x,y <= 1024, z <= 64, "
             "at most 1024 threads)");
  if (g.x == 0 || g.y == 0 || g.z == 0 || g.x > kMaxGridX || g.y > kMaxGridYZ || g.z > kMaxGridYZ)
    fail(CC1D_ERR_INVALID_ARGUMENT,
         "emulated launch of " + l.kernel + ": grid (" + std::to_string(g.x) + "," + std::to_string(g.y) + "," +
             std::to_string(g.z) + ") is not a valid CUDA grid (x <= 2^31-1, y,z <= 65535, none 0)");
  if (l.dynamic_shared > kMaxOptInShared)
    fail(CC1D_ERR_INVALID_ARGUMENT, "emulated launch of " + l.kernel + ": " + std::to_string(l.dynamic_shared) +
                                        " bytes of dynamic shared memory exceed the 227 KiB any GPU offers");
  if (l.fn == nullptr) fail(CC1D_ERR_INTERNAL, "emulated launch of " + l.kernel + " has no host function");
}

// Runs every block once; returns "" or the first error.
std::string run_grid(const Launch& l, bool random, uint64_t seed, unsigned char poison, int max_workers,
                     FloatAtomicLog* float_atomics = nullptr, dim3 grid = {0, 0, 0}) {
  LaunchSpec spec;
  spec.kernel_name = l.kernel.c_str();
  spec.fn = l.fn;
  spec.args = l.args;
  spec.grid = grid.x == 0 ? l.grid : grid;
  spec.block = l.block;
  spec.dynamic_shared = l.dynamic_shared;
  spec.random_order = random;
  spec.seed = seed;
  spec.poison = poison;
  spec.float_atomics = float_atomics;

  const uint64_t nblocks = uint64_t(spec.grid.x) * spec.grid.y * spec.grid.z;
  const BlockOrder order = block_order(nblocks, random, seed);
  std::atomic<bool> failed{false};
  std::mutex mu;
  std::string first_error;
  auto run_range = [&](int64_t begin, int64_t end) {
    BlockRunner& runner = local_runner();
    for (int64_t i = begin; i < end && !failed.load(std::memory_order_relaxed); ++i) {
      std::string err = runner.run(spec, order(static_cast<uint64_t>(i)));
      if (!err.empty()) {
        std::lock_guard<std::mutex> lock(mu);
        if (first_error.empty()) first_error = std::move(err);
        failed = true;
      }
    }
  };
  const int pool = num_threads();
  const int workers = max_workers > 0 ? std::min(max_workers, pool) : pool;
  if (workers <= 1 || nblocks == 1) {
    run_range(0, static_cast<int64_t>(nblocks));
  } else {
    // Capped: as many chunks as workers; otherwise a few chunks per worker to balance.
    const uint64_t chunks = workers < pool ? uint64_t(workers) : uint64_t(workers) * 4;
    const int64_t grain = static_cast<int64_t>((nblocks + chunks - 1) / chunks);
    parallel_for(static_cast<int64_t>(nblocks), grain, run_range);
  }
  g_blocks += nblocks;
  g_threads += nblocks * l.block.x * l.block.y * l.block.z;
  return first_error;
}

std::vector<std::vector<unsigned char>> snapshot(const std::vector<Region>& regions) {
  std::vector<std::vector<unsigned char>> out;
  for (const Region& r : regions) {
    const auto* p = static_cast<const unsigned char*>(r.data);
    out.emplace_back(p, p + r.bytes);
  }
  return out;
}

void restore(const std::vector<Region>& regions, const std::vector<std::vector<unsigned char>>& saved) {
  for (size_t i = 0; i < regions.size(); ++i)
    if (regions[i].bytes > 0) std::memcpy(regions[i].data, saved[i].data(), regions[i].bytes);
}

bool in_region(const Region& r, uintptr_t a, size_t bytes) {
  const auto lo = reinterpret_cast<uintptr_t>(r.data);
  return a >= lo && a + bytes <= lo + r.bytes;
}

// Both runs made the same float atomicAdds to every output address (so only their order, and
// hence the rounding, may differ). Returns "" or what differs.
std::string compare_float_atomics(const std::vector<Region>& outputs,
                                  const std::unordered_map<uintptr_t, FloatAtomicLog::Entry>& natural,
                                  const std::unordered_map<uintptr_t, FloatAtomicLog::Entry>& shuffled) {
  auto in_outputs = [&](uintptr_t a) {
    return std::any_of(outputs.begin(), outputs.end(), [&](const Region& r) { return in_region(r, a, 4); });
  };
  auto count = [](const std::unordered_map<uintptr_t, FloatAtomicLog::Entry>& m, uintptr_t a) -> uint64_t {
    const auto it = m.find(a);
    return it == m.end() ? 0 : it->second.count;
  };
  for (const auto* m : {&natural, &shuffled})
    for (const auto& kv : *m)
      if (in_outputs(kv.first) && count(natural, kv.first) != count(shuffled, kv.first)) {
        char addr[32];
        std::snprintf(addr, sizeof addr, "%#llx", static_cast<unsigned long long>(kv.first));
        return "made " + std::to_string(count(natural, kv.first)) + " float atomicAdd(s) to " + addr +
               " in natural order and " + std::to_string(count(shuffled, kv.first)) + " in shuffled order";
      }
  return "";
}

// "" when `r` now holds `want` byte for byte, except floats that received atomicAdds: those may
// differ by the rounding of another summation order, 2 * count * FLT_EPSILON * sum |addend|.
std::string compare_output(const Region& r, const std::vector<unsigned char>& want,
                           const std::unordered_map<uintptr_t, FloatAtomicLog::Entry>& sums) {
  const auto* got = static_cast<const unsigned char*>(r.data);
  size_t first = want.size(), differ = 0;
  for (size_t k = 0; k < want.size(); ++k) {
    if (got[k] == want[k]) continue;
    const uintptr_t a = (reinterpret_cast<uintptr_t>(r.data) + k) & ~uintptr_t{3};
    const auto it = sums.find(a);
    if (it != sums.end() && in_region(r, a, 4)) {
      const size_t off = a - reinterpret_cast<uintptr_t>(r.data);
      float g, w;
      std::memcpy(&g, got + off, 4);
      std::memcpy(&w, want.data() + off, 4);
      const double bound = 2.0 * static_cast<double>(it->second.count) * FLT_EPSILON * it->second.magnitude;
      if (std::fabs(static_cast<double>(g) - w) <= bound) {
        k = off + 3;  // this float is fine
        continue;
      }
    }
    if (first == want.size()) first = k;
    ++differ;
  }
  if (differ == 0) return "";
  return "differs in " + std::to_string(differ) + " of " + std::to_string(want.size()) + " bytes, first at byte " +
         std::to_string(first) +
         (sums.empty() ? "" : " (floats that received atomicAdds are compared within their rounding bound)");
}

uint64_t next_seed() {
  static std::atomic<uint64_t> counter{0};
  return 0x5eedc0de12345678ull + 0x9e3779b97f4a7c15ull * ++counter;
}

}  // namespace

Region strided_region(void* data, size_t elem_bytes, const long long* shape, const long long* strides, int rank) {
  Region r;
  if (data == nullptr) return r;
  long long last = 0;
  for (int i = 0; i < rank; ++i) {
    if (shape[i] <= 0) return r;
    last += (shape[i] - 1) * strides[i];
  }
  r.data = data;
  r.bytes = static_cast<size_t>(last + 1) * elem_bytes;
  return r;
}

LaunchOptions options_from_env() {
  LaunchOptions o;
  const char* check = std::getenv("CAUSAL_CONV1D_EMULATE_CHECK");
  o.check = check != nullptr && *check != '\0' && std::strcmp(check, "0") != 0;
  const char* seed = std::getenv("CAUSAL_CONV1D_EMULATE_SEED");
  if (seed != nullptr && *seed != '\0') o.seed = std::strtoull(seed, nullptr, 0);
  return o;
}

Stats stats() {
  Stats s;
  s.launches = g_launches.load();
  s.checked_launches = g_checked.load();
  s.blocks = g_blocks.load();
  s.threads = g_threads.load();
  return s;
}

void launch(const Launch& l, const LaunchOptions& opt) {
  validate_geometry(l);
  ++g_launches;
  const uint64_t seed = opt.seed != 0 ? opt.seed : next_seed();
  if (!opt.check) {
    const std::string err = run_grid(l, opt.shuffle, seed, 0xff, opt.max_workers);
    if (!err.empty()) fail(CC1D_ERR_INTERNAL, "emulator: " + err);
    return;
  }
  ++g_checked;
  const auto initial = snapshot(l.outputs);
  FloatAtomicLog natural_atomics, shuffled_atomics;
  std::string err = run_grid(l, false, seed, 0xff, opt.max_workers, &natural_atomics);
  if (!err.empty()) fail(CC1D_ERR_INTERNAL, "emulator: " + err);
  const auto natural = snapshot(l.outputs);
  restore(l.outputs, initial);
  const unsigned char poison = static_cast<unsigned char>(0x5a ^ (seed & 0x7f));  // never 0xff
  // Every kernel strides its grid's y and z (batch rows) over the work, so half as many rows of
  // blocks must give the same bytes, each block now serving several items one after another:
  // what one item leaves in shared memory must not reach the next.
  const dim3 rows{l.grid.x, (l.grid.y + 1) / 2, (l.grid.z + 1) / 2};
  err = run_grid(l, true, seed, poison, opt.max_workers, &shuffled_atomics, rows);
  if (!err.empty())
    fail(CC1D_ERR_INTERNAL, "emulator (shuffled thread order, CAUSAL_CONV1D_EMULATE_SEED=" + std::to_string(seed) +
                                "): " + err);
  const std::string reproduce = ". Reproduce with CAUSAL_CONV1D_EMULATE_SEED=" + std::to_string(seed);
  const auto sums = natural_atomics.entries();
  err = compare_float_atomics(l.outputs, sums, shuffled_atomics.entries());
  if (!err.empty())
    fail(CC1D_ERR_INTERNAL, "emulator check (CAUSAL_CONV1D_EMULATE_CHECK=1): kernel " + l.kernel + " " + err +
                                ": the atomics a thread performs must not depend on the order threads run in" +
                                reproduce);
  for (size_t i = 0; i < l.outputs.size(); ++i) {
    const std::string diff = compare_output(l.outputs[i], natural[i], sums);
    if (diff.empty()) continue;
    fail(CC1D_ERR_INTERNAL,
         "emulator check (CAUSAL_CONV1D_EMULATE_CHECK=1): kernel " + l.kernel +
             " wrote different bytes when its threads ran in another order: output " + std::to_string(i) + " " + diff +
             " (that run also had half the grid's rows of blocks, each serving several batch rows). A missing "
             "__syncthreads/__syncwarp, a race between threads or blocks or between one block's items, or a read "
             "of uninitialised shared memory" + reproduce);
  }
}

}  // namespace emu
}  // namespace cc1d
