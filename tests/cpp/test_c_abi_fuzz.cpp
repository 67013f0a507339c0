// test_c_abi_fuzz.cpp — a bounded fuzz of the C ABI (cc1d_causal_conv1d_fwd, _update and
// _varlen_states).
//
// A child process makes CC1D_FUZZ_ITERS (default 3000) calls with random descriptors: a valid
// small problem with random layouts, then up to three mutations (ranks, sizes and strides up to
// 2^63-1, NULL or misaligned data, dtype and device codes, aliasing outputs, struct sizes,
// activation and backend values, bad index values). An independent model, written here without
// the library's code, says what each call must do: fail with an argument error (and write
// nothing), report the backend unavailable, or succeed — and then the result must match the
// float64 reference, with no write outside the outputs. The parent requires the child to finish
// within a time limit with exit status 0: a crash, a hang, a sanitizer report (the `asan` job
// runs this under ASan and UBSan) or any mismatch fails. The seed is printed; CC1D_TEST_SEED
// replays a run, and each failure names its iteration (CC1D_FUZZ_FIRST=i CC1D_FUZZ_ITERS=1 runs it
// alone).
#include <doctest/doctest.h>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "test_support.h"
#include "fuzz_model.h"
#include "update_case.h"

using namespace cc1d_test;
using namespace cc1d_fuzz;

namespace {

// ---- the ops --------------------------------------------------------------------------

struct Outcome {
  Expect expect;
  std::string why;
};

// Runs one random forward call; returns "" or a description of a mismatch.
std::string fuzz_fwd(Rng& r) {
  const int xdt = r.pick(0, 2), wdt = r.pick(0, 2);
  const int64_t B = r.pick(0, 3), D = r.pick(0, 5), L = r.chance(5) ? 0 : r.pick(1, 7);
  const int W = r.chance(5) ? r.pick(0, 1) * 9 : r.pick(1, CC1D_MAX_WIDTH);
  std::vector<Slot> s = {{"x", random_tensor(r, xdt, {B, D, L}, true)},
                         {"weight", random_tensor(r, wdt, {D, W}, true)},
                         {"bias", random_tensor(r, wdt, {D}, true)},
                         {"seq_idx", HostTensor::contiguous(CC1D_INT32, {B, L})},
                         {"initial_states", random_tensor(r, xdt, {B, D, std::max(W - 1, 0)}, true)},
                         {"out", random_tensor(r, xdt, {B, D, L}, false)},
                         {"final_states", random_tensor(r, xdt, {B, D, std::max(W - 1, 0)}, false)}};
  s[5].written = s[6].written = true;
  for (int64_t i = 0; i < B * L; ++i) s[3].h.set(i, r.pick(-1, 2));
  for (Slot& slot : s) {
    slot.storage_dtype = slot.h.t.dtype;
    if (slot.written) slot.h.fill_all(NAN);
  }
  for (int i : {2, 3, 4, 6}) s[i].given = r.chance(60);
  cc1d_fwd_args a{};
  a.struct_size = sizeof a;
  a.activation = r.pick(0, 1);
  a.backend = r.chance(80) ? CC1D_BACKEND_CPU + r.pick(0, 1) * 2 : r.pick(0, 4);
  for (int m = r.pick(0, 3); m > 0; --m) {
    const int what = r.pick(0, 9);
    if (what < 7) mutate_tensor(r, s[r.pick(0, 6)], s);
    else if (what == 7) s[r.pick(0, 6)].given = false;
    else if (what == 8) a.struct_size = r.pick(0, static_cast<int>(sizeof a) - 1);
    else if (r.chance(50)) a.activation = std::vector<int32_t>{-1, 2, 99}[r.pick(0, 2)];
    else a.backend = std::vector<int32_t>{-1, 5, 99}[r.pick(0, 2)];
  }
  a.x = s[0].ptr(), a.weight = s[1].ptr(), a.bias = s[2].ptr(), a.seq_idx = s[3].ptr();
  a.initial_states = s[4].ptr(), a.out = s[5].ptr(), a.final_states = s[6].ptr();

  // The model.
  Model m;
  if (a.struct_size < sizeof a) m.bad("struct_size");
  for (int i : {0, 1, 5})
    if (!s[i].given) m.bad(std::string(s[i].name) + " missing");
  if (m.why.empty()) {
    const cc1d_tensor& x = s[0].h.t;
    check_common(m, s[0], 3, 3, x, {-1, -1, -1});
    check_dtype(m, s[0], -1);
    const int64_t b = x.shape[0], d = x.shape[1], l = x.ndim == 3 ? x.shape[2] : 0;
    if (m.why.empty() && l < 1) m.bad("seqlen");
    check_common(m, s[1], 2, 2, x, {d, -1});
    check_dtype(m, s[1], -1);
    const int64_t w = s[1].h.t.ndim == 2 ? s[1].h.t.shape[1] : 0;
    if (w < 1 || w > CC1D_MAX_WIDTH) m.bad("width");
    if (s[2].given) check_common(m, s[2], 1, 1, x, {d}), check_dtype(m, s[2], s[1].h.t.dtype);
    if (s[3].given) check_common(m, s[3], 2, 2, x, {b, l}), check_dtype(m, s[3], CC1D_INT32);
    if (s[4].given) check_common(m, s[4], 3, 3, x, {b, d, w - 1}), check_dtype(m, s[4], x.dtype);
    check_common(m, s[5], 3, 3, x, {b, d, l});
    check_dtype(m, s[5], x.dtype);
    if (s[6].given) check_common(m, s[6], 3, 3, x, {b, d, w - 1}), check_dtype(m, s[6], x.dtype);
    std::vector<const Slot*> ptrs;
    for (const Slot& slot : s) ptrs.push_back(&slot);
    if (m.why.empty()) check_cross_overlap(m, ptrs);
  }
  if (a.activation != 0 && a.activation != 1) m.bad("activation");
  if (a.backend < 0 || a.backend > 4) m.bad("backend");
  if (m.why.empty() && retyped(s)) return "discard";
  if (m.why.empty())
    for (const Slot& slot : s)
      if (!backed(slot)) return "discard";
  const cc1d_tensor& x = s[0].h.t;
  const Expect expect = counted("fwd", !m.why.empty() ? Expect::Invalid
                                                      : availability(a.backend, x.device_type,
                                                                     x.shape[0] == 0 || x.shape[1] == 0));
  dump("fwd", s, a.activation, a.backend, m.why);
  std::vector<std::vector<unsigned char>> before;
  for (const Slot& slot : s) before.push_back(slot.h.storage);

  const cc1d_status st = cc1d_causal_conv1d_fwd(&a);
  const std::string msg = cc1d_last_error();
  // What must hold whatever happened: inputs never change.
  for (size_t i = 0; i < s.size(); ++i)
    if (!s[i].written && s[i].h.storage != before[i]) return std::string("input ") + s[i].name + " was written";
  if (expect == Expect::Invalid) {
    if (st != CC1D_ERR_INVALID_ARGUMENT && st != CC1D_ERR_INVALID_TYPE && st != CC1D_ERR_NULL_POINTER)
      return "expected an argument error (" + m.why + "), got status " + std::to_string(st) + ": " + msg;
    for (size_t i = 0; i < s.size(); ++i)
      if (s[i].h.storage != before[i]) return std::string("a rejected call wrote ") + s[i].name;
    return "";
  }
  if (expect == Expect::Unavailable) {
    if (st != CC1D_ERR_BACKEND_UNAVAILABLE) return "expected backend unavailable, got " + std::to_string(st) + ": " + msg;
    return "";
  }
  if (st != CC1D_OK) return "expected success, got status " + std::to_string(st) + ": " + msg;
  if (x.shape[0] == 0 || x.shape[1] == 0) return "";
  RefInputs in;
  in.x = &s[0].h;
  in.w = &s[1].h;
  in.bias = s[2].given ? &s[2].h : nullptr;
  in.seq = s[3].given ? &s[3].h : nullptr;
  in.init = s[4].given ? &s[4].h : nullptr;
  in.silu = a.activation == 1;
  std::vector<double> want_out, want_fin;
  reference_fwd(in, want_out, want_fin);
  std::string diff = compare(s[5].h, want_out, tolerance(x.dtype));
  if (diff.empty() && s[6].given) diff = compare(s[6].h, want_fin, tolerance(x.dtype));
  return diff.empty() ? "" : "wrong result: " + diff;
}

// Runs one random update call; returns "" or a description of a mismatch.
std::string fuzz_update(Rng& r) {
  const int xdt = r.pick(0, 2), wdt = r.pick(0, 2);
  const int64_t B = r.pick(0, 3), D = r.pick(0, 5), L = r.pick(1, 5);
  const int W = r.chance(5) ? r.pick(0, 1) * 9 : r.pick(1, CC1D_MAX_WIDTH);
  const int64_t S = std::max<int64_t>(1, W - 1 + r.pick(r.chance(5) ? -1 : 0, 3));
  const bool gather = r.chance(50), x2d = L == 1 && r.chance(50);
  const int64_t pool = gather ? B + r.pick(0, 3) : B;
  std::vector<Slot> s = {{"x", x2d ? random_tensor(r, xdt, {B, D}, true) : random_tensor(r, xdt, {B, D, L}, true)},
                         {"weight", random_tensor(r, wdt, {D, W}, true)},
                         {"bias", random_tensor(r, wdt, {D}, true)},
                         {"conv_state", random_tensor(r, xdt, {pool, D, S}, false)},
                         {"cache_seqlens", HostTensor::contiguous(CC1D_INT32, {B})},
                         {"conv_state_indices", HostTensor::contiguous(CC1D_INT32, {B})},
                         {"out", x2d ? random_tensor(r, xdt, {B, D}, false) : random_tensor(r, xdt, {B, D, L}, false)}};
  s[3].written = s[6].written = true;
  std::vector<int> rows(static_cast<size_t>(pool));
  for (int64_t i = 0; i < pool; ++i) rows[i] = static_cast<int>(i);
  std::shuffle(rows.begin(), rows.end(), r.g);
  for (int64_t b = 0; b < B; ++b) {
    s[4].h.set(b, r.pick(0, 20));
    s[5].h.set(b, r.chance(25) ? -1 : rows[b]);
  }
  s[2].given = r.chance(60);
  s[4].given = r.chance(50);
  s[5].given = gather;
  for (Slot& slot : s) slot.storage_dtype = slot.h.t.dtype;
  s[6].h.fill_all(NAN);
  cc1d_update_args a{};
  a.struct_size = sizeof a;
  a.activation = r.pick(0, 1);
  a.backend = r.chance(80) ? CC1D_BACKEND_CPU + r.pick(0, 1) * 2 : r.pick(0, 4);
  for (int m = r.pick(0, 3); m > 0; --m) {
    const int what = r.pick(0, 10);
    if (what < 6) mutate_tensor(r, s[r.pick(0, 6)], s);
    else if (what == 6) s[r.pick(0, 6)].given = false;
    else if (what == 7) a.struct_size = r.pick(0, static_cast<int>(sizeof a) - 1);
    else if (what == 8 && B > 0) s[5].h.set(r.pick(0, static_cast<int>(B) - 1), r.chance(50) ? pool + r.pick(0, 2) : rows[0]);
    else if (what == 9 && B > 0) s[4].h.set(r.pick(0, static_cast<int>(B) - 1), -r.pick(1, 3));
    else a.activation = 2;
  }
  a.x = s[0].ptr(), a.weight = s[1].ptr(), a.bias = s[2].ptr(), a.conv_state = s[3].ptr();
  a.cache_seqlens = s[4].ptr(), a.conv_state_indices = s[5].ptr(), a.out = s[6].ptr();

  Model m;
  if (a.struct_size < sizeof a) m.bad("struct_size");
  for (int i : {0, 1, 3, 6})
    if (!s[i].given) m.bad(std::string(s[i].name) + " missing");
  int64_t b = 0, d = 0, pool_rows = 0, sl = 0;
  if (m.why.empty()) {
    const cc1d_tensor& x = s[0].h.t;
    check_common(m, s[0], 2, 3, x, {-1, -1, -1});
    check_dtype(m, s[0], -1);
    b = x.shape[0], d = x.ndim >= 2 ? x.shape[1] : 0;
    const int64_t l = x.ndim == 3 ? x.shape[2] : 1;
    if (m.why.empty() && l < 1) m.bad("seqlen");
    check_common(m, s[1], 2, 2, x, {d, -1});
    check_dtype(m, s[1], -1);
    const int64_t w = s[1].h.t.ndim == 2 ? s[1].h.t.shape[1] : 0;
    if (w < 1 || w > CC1D_MAX_WIDTH) m.bad("width");
    if (s[2].given) check_common(m, s[2], 1, 1, x, {d}), check_dtype(m, s[2], s[1].h.t.dtype);
    check_common(m, s[3], 3, 3, x, {-1, d, -2}, w - 1);
    check_dtype(m, s[3], x.dtype);
    if (s[4].given) check_common(m, s[4], 1, 1, x, {b}), check_dtype(m, s[4], CC1D_INT32);
    if (s[5].given) check_common(m, s[5], 1, 1, x, {b}), check_dtype(m, s[5], CC1D_INT32);
    check_common(m, s[6], 2, 3, x, {b, d, l});
    check_dtype(m, s[6], x.dtype);
    std::vector<const Slot*> ptrs;
    for (const Slot& slot : s) ptrs.push_back(&slot);
    if (m.why.empty()) check_cross_overlap(m, ptrs);
    pool_rows = s[3].h.t.shape[0];
    sl = s[3].h.t.ndim == 3 ? s[3].h.t.shape[2] : 0;
    if (m.why.empty() && !s[5].given && pool_rows != b) m.bad("pool != batch");
    if (m.why.empty() && sl == 0 && b > 0 && d > 0) m.bad("state_len 0");
  }
  if (a.activation != 0 && a.activation != 1) m.bad("activation");
  if (m.why.empty() && retyped(s)) return "discard";
  if (m.why.empty())
    for (const Slot& slot : s)
      if (!backed(slot)) return "discard";
  const cc1d_tensor& x = s[0].h.t;
  if (m.why.empty() && x.device_type == CC1D_DEVICE_CPU) {  // host values
    std::vector<int64_t> used;
    for (int64_t i = 0; i < b; ++i) {
      if (s[4].given && s[4].h.get(s[4].h.off({i})) < 0) m.bad("negative cache_seqlens");
      if (!s[5].given) continue;
      const int64_t row = static_cast<int64_t>(s[5].h.get(s[5].h.off({i})));
      if (row >= pool_rows) m.bad("index out of range");
      if (row >= 0) used.push_back(row);
    }
    std::sort(used.begin(), used.end());
    if (std::adjacent_find(used.begin(), used.end()) != used.end()) m.bad("duplicate index");
  }
  if (a.backend < 0 || a.backend > 4) m.bad("backend");
  const Expect expect =
      counted("update", !m.why.empty() ? Expect::Invalid : availability(a.backend, x.device_type, b == 0 || d == 0));
  dump("update", s, a.activation, a.backend, m.why);
  std::vector<std::vector<unsigned char>> before;
  for (const Slot& slot : s) before.push_back(slot.h.storage);
  std::vector<double> want_out, want_state;
  if (expect == Expect::Ok && b > 0 && d > 0)
    reference_update(s[0].h, x.ndim, s[3].h, s[1].h, s[2].given ? &s[2].h : nullptr, s[4].given ? &s[4].h : nullptr,
                     s[5].given ? &s[5].h : nullptr, a.activation == 1, want_out, want_state);

  const cc1d_status st = cc1d_causal_conv1d_update(&a);
  const std::string msg = cc1d_last_error();
  for (size_t i = 0; i < s.size(); ++i)
    if (!s[i].written && s[i].h.storage != before[i]) return std::string("input ") + s[i].name + " was written";
  if (expect == Expect::Invalid) {
    if (st != CC1D_ERR_INVALID_ARGUMENT && st != CC1D_ERR_INVALID_TYPE && st != CC1D_ERR_NULL_POINTER)
      return "expected an argument error (" + m.why + "), got status " + std::to_string(st) + ": " + msg;
    for (size_t i = 0; i < s.size(); ++i)
      if (s[i].h.storage != before[i]) return std::string("a rejected call wrote ") + s[i].name;
    return "";
  }
  if (expect == Expect::Unavailable)
    return st == CC1D_ERR_BACKEND_UNAVAILABLE ? "" : "expected backend unavailable, got " + std::to_string(st) + ": " + msg;
  if (st != CC1D_OK) return "expected success, got status " + std::to_string(st) + ": " + msg;
  if (b == 0 || d == 0) return "";
  const int64_t steps = x.ndim == 3 ? x.shape[2] : 1;
  const HostTensor& out = s[6].h;
  for (int64_t i = 0; i < b; ++i)
    for (int64_t c = 0; c < d; ++c)
      for (int64_t t = 0; t < steps; ++t) {
        const double got = out.get(out.t.ndim == 2 ? out.off({i, c}) : out.off({i, c, t}));
        const double want = want_out[(i * d + c) * steps + t];
        if (!(std::fabs(got - want) <= tolerance(x.dtype) * (1 + std::fabs(want))))
          return "wrong out at (" + std::to_string(i) + "," + std::to_string(c) + "," + std::to_string(t) + ")";
      }
  const HostTensor& state = s[3].h;
  for (int64_t p = 0; p < pool_rows; ++p)
    for (int64_t c = 0; c < d; ++c)
      for (int64_t k = 0; k < sl; ++k)
        if (state.get(state.off({p, c, k})) != want_state[(p * d + c) * sl + k]) return "wrong conv_state";
  return "";
}

// Runs one random varlen-states call; returns "" or a description of a mismatch.
std::string fuzz_varlen(Rng& r) {
  const int xdt = r.pick(0, 2);
  const int64_t B = r.pick(0, 4), D = r.pick(0, 9), S = r.chance(5) ? 0 : r.pick(1, 6);
  std::vector<int64_t> cu_v{r.pick(0, 2)};
  for (int64_t b = 0; b < B; ++b) cu_v.push_back(cu_v.back() + (r.chance(25) ? 0 : r.pick(1, 8)));
  const int64_t total = cu_v.back() + r.pick(0, 2);
  std::vector<Slot> s = {{"x", random_tensor(r, xdt, {total, D}, true)},
                         {"cu_seqlens", HostTensor::contiguous(CC1D_INT32, {B + 1})},
                         {"out", random_tensor(r, xdt, {B, D, S}, false)}};
  s[2].written = true;
  for (int64_t i = 0; i <= B; ++i) s[1].h.set(i, static_cast<double>(cu_v[i]));
  for (Slot& slot : s) slot.storage_dtype = slot.h.t.dtype;
  s[2].h.fill_all(NAN);
  cc1d_varlen_states_args a{};
  a.struct_size = sizeof a;
  a.backend = r.chance(80) ? CC1D_BACKEND_CPU + r.pick(0, 1) * 2 : r.pick(0, 4);
  for (int m = r.pick(0, 3); m > 0; --m) {
    const int what = r.pick(0, 9);
    if (what < 5) mutate_tensor(r, s[r.pick(0, 2)], s);
    else if (what == 5) s[r.pick(0, 2)].given = false;
    else if (what == 6) a.struct_size = r.pick(0, static_cast<int>(sizeof a) - 1);
    else if (what == 7) s[1].h.set(r.pick(0, static_cast<int>(B)), std::vector<double>{-1, -9, 1e6}[r.pick(0, 2)]);
    else if (what == 8 && B > 0) s[1].h.set(r.pick(1, static_cast<int>(B)), static_cast<double>(cu_v[0]) - 1);
    else a.backend = std::vector<int32_t>{-1, 5, 99}[r.pick(0, 2)];
  }
  a.x = s[0].ptr(), a.cu_seqlens = s[1].ptr(), a.out = s[2].ptr();

  Model m;
  if (a.struct_size < sizeof a) m.bad("struct_size");
  for (const Slot& slot : s)
    if (!slot.given) m.bad(std::string(slot.name) + " missing");
  int64_t b = 0, d = 0, sl = 0, t = 0;
  if (m.why.empty()) {
    const cc1d_tensor& x = s[0].h.t;
    check_common(m, s[0], 2, 2, x, {-1, -1});
    check_dtype(m, s[0], -1);
    t = x.ndim == 2 ? x.shape[0] : 0, d = x.ndim == 2 ? x.shape[1] : 0;
    check_common(m, s[1], 1, 1, x, {-1});
    check_dtype(m, s[1], CC1D_INT32);
    b = s[1].h.t.ndim == 1 ? s[1].h.t.shape[0] - 1 : 0;
    if (b < 0) m.bad("batch");
    check_common(m, s[2], 3, 3, x, {b, d, -1});
    check_dtype(m, s[2], x.dtype);
    sl = s[2].h.t.ndim == 3 ? s[2].h.t.shape[2] : 0;
    if (sl < 1 || sl > CC1D_MAX_VARLEN_STATE_LEN) m.bad("state_len");
    if (m.why.empty()) check_cross_overlap(m, {&s[0], &s[1], &s[2]});
  }
  if (m.why.empty() && retyped(s)) return "discard";
  if (m.why.empty())
    for (const Slot& slot : s)
      if (!backed(slot)) return "discard";
  // After the discards: libcc1d reads host cu_seqlens values before it looks at the backend.
  if (a.backend < 0 || a.backend > 4) m.bad("backend");
  const cc1d_tensor& x = s[0].h.t;
  auto cu = [&](int64_t i) { return static_cast<int64_t>(s[1].h.get(s[1].h.off({i}))); };
  if (m.why.empty() && x.device_type == CC1D_DEVICE_CPU)  // host values
    for (int64_t i = 0; i <= b; ++i)
      if (cu(i) < 0 || cu(i) > t || (i > 0 && cu(i) < cu(i - 1))) m.bad("cu_seqlens values");
  const Expect expect =
      counted("varlen", !m.why.empty() ? Expect::Invalid : availability(a.backend, x.device_type, b == 0 || d == 0));
  std::vector<std::vector<unsigned char>> before;
  for (const Slot& slot : s) before.push_back(slot.h.storage);

  const cc1d_status st = cc1d_causal_conv1d_varlen_states(&a);
  const std::string msg = cc1d_last_error();
  for (size_t i = 0; i < 2; ++i)
    if (s[i].h.storage != before[i]) return std::string("input ") + s[i].name + " was written";
  if (expect == Expect::Invalid) {
    if (st != CC1D_ERR_INVALID_ARGUMENT && st != CC1D_ERR_INVALID_TYPE && st != CC1D_ERR_NULL_POINTER)
      return "expected an argument error (" + m.why + "), got status " + std::to_string(st) + ": " + msg;
    return s[2].h.storage != before[2] ? "a rejected call wrote out" : "";
  }
  if (expect == Expect::Unavailable)
    return st == CC1D_ERR_BACKEND_UNAVAILABLE ? "" : "expected backend unavailable, got " + std::to_string(st) + ": " + msg;
  if (st != CC1D_OK) return "expected success, got status " + std::to_string(st) + ": " + msg;
  const HostTensor &xh = s[0].h, &out = s[2].h;
  for (int64_t i = 0; i < b; ++i)
    for (int64_t k = 0; k < sl; ++k) {
      const int64_t tok = cu(i + 1) - sl + k;  // slot k's token, if it belongs to sequence i
      for (int64_t c = 0; c < d; ++c) {
        const double want = tok >= cu(i) ? xh.get(xh.off({tok, c})) : 0.0, got = out.get(out.off({i, c, k}));
        if (!(got == want || (std::isnan(got) && std::isnan(want))))
          return "wrong states at (" + std::to_string(i) + "," + std::to_string(c) + "," + std::to_string(k) + ")";
      }
    }
  return "";
}

// The child's whole run: 0 when every call behaved; prints the first mismatch.
int child(int first, int iters) {
  g_emulate_built = cc1d_backend_available(CC1D_BACKEND_EMULATE, CC1D_DEVICE_CPU, 0) == CC1D_OK;
  std::map<std::string, int> counts;
  for (int i = first; i < first + iters; ++i) {
    Rng r{test_rng(static_cast<uint32_t>(i))};
    const int pick = r.pick(0, 99);
    const char* op = pick < 40 ? "update" : pick < 55 ? "varlen" : "fwd";
    const std::string err = pick < 40 ? fuzz_update(r) : pick < 55 ? fuzz_varlen(r) : fuzz_fwd(r);
    if (err == "discard") {
      ++counts["discarded"];
      continue;
    }
    ++counts[op];
    if (!err.empty()) {
      std::printf("[fuzz] iteration %d (%s) of seed %u: %s\n", i, op, test_seed(), err.c_str());
      return 1;
    }
  }
  std::printf("[fuzz] %d fwd, %d update, %d varlen calls checked, %d discarded (valid, but unbacked or retyped);",
              counts["fwd"], counts["update"], counts["varlen"], counts["discarded"]);
  for (const auto& [what, n] : g_outcomes) std::printf(" %s %d,", what.c_str(), n);
  std::printf("\n");
  return 0;
}

}  // namespace

TEST_CASE("fuzz: random descriptors crash nothing, hang nothing, and give the model's answer") {
  const char* env = std::getenv("CC1D_FUZZ_ITERS");
  const int iters = env != nullptr ? std::atoi(env) : 3000;
  const char* first_env = std::getenv("CC1D_FUZZ_FIRST");  // replay from one iteration on
  const int first = first_env != nullptr ? std::atoi(first_env) : 0;
  test_seed();  // printed before the fork, so the parent's log has it
  std::fflush(stdout);
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    setenv("CAUSAL_CONV1D_CUDA_DRIVER", "/nonexistent/libcuda.so.1", 1);  // never a real GPU here
    setenv("CAUSAL_CONV1D_CACHE_DIR", "off", 1);
    setenv("CAUSAL_CONV1D_LOG_LEVEL", "off", 1);
    unsetenv("CAUSAL_CONV1D_BACKEND");
    const int rc = child(first, iters);
    std::fflush(stdout);
    _exit(rc);
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(600);
  int status = 0;
  pid_t done = 0;
  while ((done = waitpid(pid, &status, WNOHANG)) == 0 && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  if (done == 0) {
    kill(pid, SIGKILL);
    waitpid(pid, &status, 0);
    FAIL("the fuzz child hung for 600 s (seed " << test_seed() << ")");
  }
  INFO("seed " << test_seed() << " (replay with CC1D_TEST_SEED=" << test_seed() << ")");
  REQUIRE_MESSAGE(WIFEXITED(status), "the fuzz child died of signal " << (WIFSIGNALED(status) ? WTERMSIG(status) : 0));
  CHECK_MESSAGE(WEXITSTATUS(status) == 0, "the fuzz child found a mismatch (see its output above)");
}
