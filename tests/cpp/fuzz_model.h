// fuzz_model.h — the C ABI fuzz's independent model of what libcc1d must answer (validity,
// spans, overlap, backing storage, availability), its random tensors and descriptor mutations,
// and the CC1D_FUZZ_VERBOSE dump. Written without libcc1d's validation code, so the two can
// disagree; test_c_abi_fuzz.cpp drives it.
#pragma once
#include <stdio.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "test_support.h"

namespace cc1d_fuzz {

using namespace cc1d_test;
using i128 = __int128;

// ---- the independent model ----------------------------------------------------------------

enum class Expect { Invalid, Unavailable, Ok };

struct Model {
  std::string why;  // why the call is invalid ("" when valid)
  void bad(const std::string& w) {
    if (why.empty()) why = w;
  }
};

inline int elem_size(int32_t dt) { return dt == CC1D_FLOAT32 || dt == CC1D_INT32 ? 4 : dt == 1 || dt == 2 ? 2 : 0; }
inline bool is_float(int32_t dt) { return dt == CC1D_FLOAT32 || dt == CC1D_FLOAT16 || dt == CC1D_BFLOAT16; }

// Bytes [lo, hi) of a descriptor, or {0, 0} when empty; `ok` false when it overflows.
struct Span {
  uintptr_t lo = 0, hi = 0;
  bool ok = true;
};
inline Span span_of(const cc1d_tensor& t) {
  Span s;
  i128 last = 0;
  bool huge = false;  // past 64 bits: stop adding (two such products could overflow even __int128)
  for (int i = 0; i < t.ndim; ++i) {
    if (t.shape[i] == 0) return s;
    if (!huge) last += static_cast<i128>(t.shape[i] - 1) * t.strides[i];
    huge = huge || last > INT64_MAX || last < INT64_MIN;
  }
  if (huge) {
    s.ok = false;
    return s;
  }
  const i128 bytes = (last + 1) * elem_size(t.dtype);
  const i128 end = static_cast<i128>(reinterpret_cast<uintptr_t>(t.data)) + bytes;
  if (last > INT64_MAX || bytes > INT64_MAX || end > static_cast<i128>(UINTPTR_MAX)) {
    s.ok = false;
    return s;
  }
  s.lo = reinterpret_cast<uintptr_t>(t.data);
  s.hi = static_cast<uintptr_t>(end);
  return s;
}

inline i128 numel_of(const cc1d_tensor& t) {
  i128 n = 1;
  for (int i = 0; i < t.ndim; ++i) {
    if (t.shape[i] == 0) return 0;
    n *= t.shape[i];
    if (n > INT64_MAX) n = static_cast<i128>(INT64_MAX) + 1;  // saturate: "too many"
  }
  return n;
}

// Stride-sorted rule for a large tensor: each stride must step over the extent of the smaller
// dims. Exact when it says "distinct"; it may flag an interleaved layout (the library refuses
// those too).
inline bool sorted_strides_overlap(const cc1d_tensor& t) {
  std::vector<std::pair<int64_t, int64_t>> d;  // (stride, size) of the dims with size > 1
  for (int i = 0; i < t.ndim; ++i)
    if (t.shape[i] > 1) d.emplace_back(t.strides[i], t.shape[i]);
  std::sort(d.begin(), d.end());
  i128 extent = 1;
  for (const auto& [stride, size] : d) {
    if (stride < extent) return true;
    extent += static_cast<i128>(stride) * (size - 1);
  }
  return false;
}

// Brute force for a small tensor: do two index tuples share an element?
inline bool overlaps_itself(const cc1d_tensor& t) {
  if (numel_of(t) > 100000) return sorted_strides_overlap(t);
  std::vector<int64_t> offs;
  std::vector<int64_t> idx(t.ndim, 0);
  for (;;) {
    int64_t o = 0;
    for (int i = 0; i < t.ndim; ++i) o += idx[i] * t.strides[i];
    offs.push_back(o);
    int d = t.ndim - 1;
    while (d >= 0 && ++idx[d] == t.shape[d]) idx[d--] = 0;
    if (d < 0) break;
  }
  std::sort(offs.begin(), offs.end());
  return std::adjacent_find(offs.begin(), offs.end()) != offs.end();
}

// A slot of the argument struct: its name, the host tensor backing it, whether it is given.
struct Slot {
  const char* name;
  HostTensor h;
  bool given = true;
  bool written = false;
  const cc1d_tensor* ptr() const { return given ? &h.t : nullptr; }
  int32_t storage_dtype = -1;  // the dtype the storage was filled with (set when generated)
};

// Valid descriptors whose dtype a mutation changed read the storage as another type (garbage,
// NaN): correct, but not comparable with a reference. Such cases are discarded.
inline bool retyped(const std::vector<Slot>& s) {
  for (const Slot& slot : s)
    if (slot.given && slot.h.t.dtype != slot.storage_dtype) return true;
  return false;
}

// The checks every tensor gets; `dims` are the expected sizes (-1: any; -2: at least `least`).
inline void check_common(Model& m, const Slot& s, int rank_lo, int rank_hi, const cc1d_tensor& x, std::vector<int64_t> dims,
                  int64_t least = 0) {
  const cc1d_tensor& t = s.h.t;
  const std::string n = s.name;
  if (t.ndim < rank_lo || t.ndim > rank_hi) return m.bad(n + " rank");
  if (t.device_type != 0 && t.device_type != 1) return m.bad(n + " device type");
  if (t.device_type == 1 && t.device_index < 0) return m.bad(n + " device index");
  if (t.device_type != x.device_type || t.device_index != x.device_index) m.bad(n + " device");
  for (int i = 0; i < t.ndim; ++i)
    if (t.shape[i] < 0 || t.strides[i] < 0) return m.bad(n + " negative");
  for (size_t i = 0; i < dims.size(); ++i) {
    const int64_t size = static_cast<int>(i) < t.ndim ? t.shape[i] : 1;
    if (dims[i] >= 0 && size != dims[i]) m.bad(n + " shape");
    if (dims[i] == -2 && size < least) m.bad(n + " too short");
  }
  const i128 ne = numel_of(t);
  if (ne > INT64_MAX) m.bad(n + " numel overflow");
  if (ne > 0 && t.data == nullptr) m.bad(n + " null data");
  const int es = elem_size(t.dtype);
  if (ne > 0 && es > 0 && reinterpret_cast<uintptr_t>(t.data) % es != 0) m.bad(n + " misaligned");
  if (!span_of(t).ok) return m.bad(n + " span overflow");
  if (s.written && ne > 0 && overlaps_itself(t)) m.bad(n + " overlaps itself");
}

inline void check_dtype(Model& m, const Slot& s, int32_t want) {  // want: -1 any float
  if (want < 0 ? !is_float(s.h.t.dtype) : s.h.t.dtype != want) m.bad(std::string(s.name) + " dtype");
}

inline void check_cross_overlap(Model& m, const std::vector<const Slot*>& slots) {
  for (const Slot* w : slots) {
    if (!w->given || !w->written) continue;
    const Span a = span_of(w->h.t);
    for (const Slot* o : slots) {
      if (o == w || !o->given) continue;
      const Span b = span_of(o->h.t);
      if (a.lo < a.hi && b.lo < b.hi && a.lo < b.hi && b.lo < a.hi) m.bad(std::string(w->name) + " overlaps " + o->name);
    }
  }
}

// Whether the descriptor's elements lie inside its host storage (a valid descriptor that does not
// would make the library read memory the fuzzer did not allocate: such cases are discarded).
inline bool backed(const Slot& s) {
  if (!s.given) return true;
  const Span sp = span_of(s.h.t);
  if (sp.lo == sp.hi) return true;
  const auto lo = reinterpret_cast<uintptr_t>(s.h.storage.data());
  return sp.ok && sp.lo >= lo && sp.hi <= lo + s.h.storage.size();
}

inline bool g_emulate_built = false;  // this libcc1d has the emulate backend
inline std::map<std::string, int> g_outcomes;  // "fwd invalid", "update ok", ...

inline Expect counted(const char* op, Expect e) {
  static const char* names[] = {"invalid", "unavailable", "ok"};
  ++g_outcomes[std::string(op) + " " + names[static_cast<int>(e)]];
  return e;
}

// What libcc1d must answer for valid descriptors: the backend serves, or is unavailable here
// (no GPU driver: the test points CAUSAL_CONV1D_CUDA_DRIVER at nothing).
inline Expect availability(int32_t backend, int32_t device_type, bool nothing_to_do) {
  if (nothing_to_do) return Expect::Ok;
  const bool cpu = device_type == CC1D_DEVICE_CPU;
  switch (backend) {
    case CC1D_BACKEND_AUTO:
    case CC1D_BACKEND_CPU: return cpu ? Expect::Ok : Expect::Unavailable;
    case CC1D_BACKEND_EMULATE: return cpu && g_emulate_built ? Expect::Ok : Expect::Unavailable;
    default: return Expect::Unavailable;  // nvrtc without a driver, aten (host framework only)
  }
}

// ---- random problems --------------------------------------------------------------------

struct Rng {
  std::mt19937 g;
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(g); }
  bool chance(int percent) { return pick(0, 99) < percent; }
};

// A tensor of the given sizes in a random layout: dims permuted, optional gaps, and (inputs
// only) a broadcast stride 0.
inline HostTensor random_tensor(Rng& r, int dtype, std::vector<int64_t> shape, bool input) {
  const int n = static_cast<int>(shape.size());
  std::vector<int> order(n);
  for (int i = 0; i < n; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), r.g);
  std::vector<int64_t> strides(n, 1);
  int64_t step = 1;
  for (int i = n - 1; i >= 0; --i) {
    const int d = order[i];
    strides[d] = step;
    step *= std::max<int64_t>(shape[d], 1) + (r.chance(20) ? r.pick(1, 2) : 0);
  }
  if (input && n > 0 && r.chance(10)) strides[r.pick(0, n - 1)] = 0;
  HostTensor h(dtype, shape, strides);
  h.randomize(r.g);
  return h;
}

inline void mutate_tensor(Rng& r, Slot& s, std::vector<Slot>& all) {
  cc1d_tensor& t = s.h.t;
  const int dim = std::max(0, std::min(t.ndim, CC1D_MAX_RANK) - 1);
  static const int64_t huge[] = {INT64_C(1) << 61, INT64_C(1) << 62, INT64_MAX, INT64_C(1) << 40, -1, -7};
  switch (r.pick(0, 11)) {
    case 0: t.ndim += r.chance(50) ? 1 : -1; break;
    case 1: t.shape[dim] = huge[r.pick(0, 5)]; break;
    case 2: t.shape[dim] += r.chance(50) && t.shape[dim] < INT64_MAX ? 1 : -1; break;  // never past INT64_MAX
    case 3: t.strides[dim] = huge[r.pick(0, 5)]; break;
    case 4: t.strides[dim] = 0; break;
    case 5: t.data = nullptr; break;
    case 6: t.data = static_cast<char*>(t.data) + 1; break;
    case 7: t.dtype = std::vector<int32_t>{-1, 0, 1, 2, 3, 7}[r.pick(0, 5)]; break;
    case 8: t.device_type = r.chance(70) ? 1 : 5; break;
    case 9: t.device_index = r.chance(50) ? 1 : -1; break;
    case 10: t.shape[dim] = INT64_C(1) << 62, t.data = nullptr; break;
    default: {  // alias another argument's memory
      const Slot& o = all[r.pick(0, static_cast<int>(all.size()) - 1)];
      if (o.given) t.data = o.h.t.data;
    }
  }
}

// CC1D_FUZZ_VERBOSE=1: every call's descriptors, to see what a replayed iteration does.
inline void dump(const char* op, const std::vector<Slot>& s, int32_t activation, int32_t backend, const std::string& why) {
  if (std::getenv("CC1D_FUZZ_VERBOSE") == nullptr) return;
  std::printf("[fuzz] %s activation %d backend %d, model: %s\n", op, activation, backend,
              why.empty() ? "valid" : why.c_str());
  for (const Slot& x : s) {
    const cc1d_tensor& t = x.h.t;
    std::printf("  %-18s %s dtype %d dev %d:%d ndim %d shape", x.name, x.given ? "given" : "NULL ", t.dtype,
                t.device_type, t.device_index, t.ndim);
    for (int i = 0; i < std::min(t.ndim, CC1D_MAX_RANK); ++i) std::printf(" %lld", static_cast<long long>(t.shape[i]));
    std::printf(" strides");
    for (int i = 0; i < std::min(t.ndim, CC1D_MAX_RANK); ++i) std::printf(" %lld", static_cast<long long>(t.strides[i]));
    std::printf(" data %+lld (storage %zu bytes)\n",
                static_cast<long long>(static_cast<const char*>(t.data) -
                                       reinterpret_cast<const char*>(x.h.storage.data())),
                x.h.storage.size());
  }
  std::fflush(stdout);
}

}  // namespace cc1d_fuzz
