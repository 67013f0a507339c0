// test_cc1d_torch.cpp — a C++ program that links cc1d_torch and libtorch, as the README shows: it
// runs each op through the torch dispatcher (causal_conv1d::fwd, ::update, ::bwd) on every
// backend, the ATen reference included, against the float64 reference of the C++ tests, on the
// same fresh random cases as the libcc1d tests (fwd_case.h, update_case.h, bwd_case.h).
#include <ATen/Context.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/from_blob.h>
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "bwd_case.h"
#include "cc1d_torch/cc1d_torch.h"
#include "fwd_case.h"
#include "update_case.h"
#include "varlen_case.h"

using namespace cc1d_test;

namespace {

const char* const kBackends[] = {"", "cpu", "aten", "emulate"};

c10::ScalarType scalar_type(int dtype) {
  switch (dtype) {
    case CC1D_FLOAT16: return c10::ScalarType::Half;
    case CC1D_BFLOAT16: return c10::ScalarType::BFloat16;
    case CC1D_INT32: return c10::ScalarType::Int;
    default: return c10::ScalarType::Float;
  }
}

// A torch view of a cc1d_tensor's memory (shared: what the op writes, the test reads).
c10::IValue wrap(const cc1d_tensor* t) {
  if (t == nullptr) return c10::IValue();
  return at::from_blob(t->data, at::IntArrayRef(t->shape, t->ndim), at::IntArrayRef(t->strides, t->ndim),
                       at::TensorOptions().dtype(scalar_type(t->dtype)));
}

// Calls causal_conv1d::<op> through the dispatcher, as any C++ user of cc1d_torch would.
std::vector<c10::IValue> call(const char* op, std::vector<c10::IValue> stack) {
  c10::Dispatcher::singleton().findSchemaOrThrow(op, "").callBoxed(&stack);
  return stack;
}

void run_fwd(cc1d_fwd_args& a, const std::string& backend) {
  auto out = call("causal_conv1d::fwd", {wrap(a.x), wrap(a.weight), wrap(a.bias), wrap(a.seq_idx),
                                         wrap(a.initial_states), a.final_states != nullptr,
                                         a.activation == CC1D_ACT_SILU, backend});
  wrap(a.out).toTensor().copy_(out.at(0).toTensor());
  if (a.final_states != nullptr) wrap(a.final_states).toTensor().copy_(out.at(1).toTensor());
}

void run_update(UpdateRun& r, const std::string& backend) {
  const cc1d_update_args& a = r.a;
  auto out = call("causal_conv1d::update", {wrap(a.x), wrap(a.conv_state), wrap(a.weight), wrap(a.bias),
                                            wrap(a.cache_seqlens), wrap(a.conv_state_indices),
                                            a.activation == CC1D_ACT_SILU, backend});
  wrap(a.out).toTensor().copy_(out.at(0).toTensor());
}

// Calls causal_conv1d::bwd on the run's tensors, dx written in place when `dx_out`, then copies the
// gradients the op allocated into the run's (NaN-poisoned) outputs for check_bwd.
void run_bwd(BwdRun& r, const std::string& backend, bool dx_out) {
  const cc1d_bwd_args& a = r.a;
  const BwdCase& c = r.c;
  auto out = call("causal_conv1d::bwd", {wrap(a.x), wrap(a.weight), wrap(a.bias), wrap(a.dout), wrap(a.seq_idx),
                                         wrap(a.initial_states), wrap(a.dfinal_states),
                                         dx_out ? wrap(a.dx) : c10::IValue(), a.activation == CC1D_ACT_SILU, c.dx,
                                         c.dweight, c.dbias, c.dinit, c.deterministic, backend});
  const at::Tensor gx = out.at(0).toTensor(), gw = out.at(1).toTensor(), gb = out.at(2).toTensor();
  const at::Tensor gi = out.at(3).toTensor();
  // Not wanted, or written into dx_out: an empty (0,) tensor, as the Python op returns.
  for (auto [returned, t] : {std::pair{c.dx && !dx_out, gx}, std::pair{c.dweight, gw}, std::pair{c.dbias, gb},
                             std::pair{c.dinit, gi}})
    if (!returned) CHECK(t.sizes() == at::IntArrayRef{0});
  if (c.dx && !dx_out) {
    CHECK(gx.strides() == wrap(a.x).toTensor().strides());  // like x (dense layouts; a view's gaps dropped)
    wrap(a.dx).toTensor().copy_(gx);
  }
  if (c.dweight) {
    CHECK((gw.sizes() == at::IntArrayRef{c.D, c.width} && gw.is_contiguous()));
    wrap(a.dweight).toTensor().copy_(gw);
  }
  if (c.dbias) wrap(a.dbias).toTensor().copy_(gb);
  if (c.dinit) {
    CHECK(gi.sizes() == at::IntArrayRef{c.B, c.D, c.width - 1});
    const at::Tensor xt = wrap(a.x).toTensor();
    const bool channel_last = xt.stride(1) == 1 && xt.stride(2) != 1;
    if (c.width > 1) CHECK(gi.stride(1) == (channel_last ? 1 : c.width - 1));  // channel-last when x is
    wrap(a.dinitial_states).toTensor().copy_(gi);
  }
}

// torch fills the memory of empty tensors with NaN while deterministic algorithms are on: the
// gradients the op allocates start poisoned, so an element no backend writes fails.
struct PoisonEmpty {
  const bool before = at::globalContext().deterministicAlgorithms();
  const bool fill_before = at::globalContext().deterministicFillUninitializedMemory();
  PoisonEmpty() {
    at::globalContext().setDeterministicAlgorithms(true, false);
    at::globalContext().setDeterministicFillUninitializedMemory(true);
  }
  ~PoisonEmpty() {
    at::globalContext().setDeterministicAlgorithms(before, false);
    at::globalContext().setDeterministicFillUninitializedMemory(fill_before);
  }
};

// The states come back allocated as upstream allocates them: (batch, state_len, dim) transposed.
void run_varlen(VarlenRun& r, const std::string& backend) {
  const cc1d_varlen_states_args& a = r.a;
  auto out = call("causal_conv1d::varlen_states", {wrap(a.x), wrap(a.cu_seqlens), a.out->shape[2], backend});
  const at::Tensor states = out.at(0).toTensor();
  const int64_t B = a.out->shape[0], D = a.out->shape[1], S = a.out->shape[2];
  REQUIRE(states.sizes() == at::IntArrayRef({B, D, S}));
  if (B > 0 && D > 1 && S > 1) REQUIRE(states.strides() == at::IntArrayRef({S * D, 1, D}));
  wrap(a.out).toTensor().copy_(states);
}

std::string slurp(const char* path) {
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("the build record beside the library is what the library says") {
  std::string record = slurp(CC1D_TORCH_RECORD);
  REQUIRE(!record.empty());
  record.erase(record.find_last_not_of('\n') + 1);
  CHECK(record == cc1d_torch_build_info());
  CHECK(record.find("\"ops\": [\"fwd\", \"update\", \"bwd\", \"varlen_states\"]") != std::string::npos);
}

TEST_CASE("the ops are registered with their schemas") {
  for (const char* op : {"causal_conv1d::fwd", "causal_conv1d::update", "causal_conv1d::bwd", "causal_conv1d::varlen_states"}) {
    auto handle = c10::Dispatcher::singleton().findSchema({op, ""});
    REQUIRE_MESSAGE(handle.has_value(), op);
    CHECK(handle->hasKernelForDispatchKey(c10::DispatchKey::CPU));
    CHECK(handle->hasKernelForDispatchKey(c10::DispatchKey::CUDA));
  }
  std::ostringstream s;
  s << c10::Dispatcher::singleton().findSchemaOrThrow("causal_conv1d::update", "").schema();
  CHECK(s.str().find("Tensor(a!) conv_state") != std::string::npos);
  std::ostringstream b;
  b << c10::Dispatcher::singleton().findSchemaOrThrow("causal_conv1d::bwd", "").schema();
  CHECK(b.str().find("Tensor(a!)? dx_out") != std::string::npos);
}

TEST_CASE("fwd on every backend against the float64 reference") {
  for (const char* backend : kBackends) {
    INFO("backend '" << std::string(backend) << "'");
    std::mt19937 rng = test_rng(900 + static_cast<uint32_t>(std::string(backend).size()));
    int i = 0;
    for (int xdt = 0; xdt < 3; ++xdt)
      for (int W : {1, 2, 4, 7})
        for (Layout layout : {Layout::ChannelFirst, Layout::ChannelLast, Layout::View}) {
          const int wdt = (xdt + W) % 3;
          ++i;
          FwdCase c{xdt, wdt, W, layout, 2, 1 + 7 * (i % 5), 1 + 13 * (i % 4), i % 2 == 0, i % 3 != 0,
                    i % 4 == 1, i % 3 == 2, i % 2 == 1};
          check_fwd_case(c, rng, [&](cc1d_fwd_args& a) { run_fwd(a, backend); });
        }
  }
}

TEST_CASE("update on every backend against the float64 reference") {
  for (const char* backend : kBackends) {
    INFO("backend '" << std::string(backend) << "'");
    run_update_grid(950 + static_cast<uint32_t>(std::string(backend).size()),
                    [&](UpdateRun& r) { run_update(r, backend); });
  }
}

TEST_CASE("bwd on every backend against the float64 reference") {
  const PoisonEmpty poison;
  for (const char* backend : kBackends) {
    INFO("backend '" << std::string(backend) << "'");
    std::mt19937 rng = test_rng(970 + static_cast<uint32_t>(std::string(backend).size()));
    int i = 0;
    for (int xdt = 0; xdt < 3; ++xdt)
      for (int W : {1, 2, 4, 7})
        for (Layout layout : {Layout::ChannelFirst, Layout::ChannelLast, Layout::View}) {
          ++i;
          BwdCase c{xdt, (xdt + W) % 3, W, layout, 2, 1 + 7 * (i % 5), 1 + 13 * (i % 4), i % 2 == 0, i % 3 != 0,
                    i % 4 == 1, i % 3 == 2, i % 2 == 1};
          c.dx = i % 7 != 3;  // each gradient left out now and then, all of them once
          c.dweight = i % 5 != 2 && i != 19;
          c.dbias = i % 6 != 4 && i != 19;
          c.dinit = i % 4 != 0 && i != 19;
          c.deterministic = i % 3 == 0;
          if (i == 19) c.dx = false;
          const bool dx_out = layout == Layout::View || i % 2 == 0;  // a view of a larger tensor: in place
          BwdRun r(c, rng);
          INFO(describe(c) << (dx_out ? " dx_out" : ""));
          const std::vector<unsigned char> dx_before = r.dx.storage;
          run_bwd(r, backend, dx_out);
          check_bwd(r, r.reference());
          const size_t es = dtype_size(c.xdt);
          for (int64_t g : gaps(r.dx))
            REQUIRE_MESSAGE(std::memcmp(&r.dx.storage[g * es], &dx_before[g * es], es) == 0, "stray write at dx " << g);
        }
  }
}

TEST_CASE("varlen_states on every backend against the float64 reference") {
  for (const char* backend : kBackends) {
    INFO("backend '" << std::string(backend) << "'");
    run_varlen_grid(970 + static_cast<uint32_t>(std::string(backend).size()),
                    [&](VarlenRun& r) { run_varlen(r, backend); });
  }
}

TEST_CASE("varlen_states: bad cu_seqlens values and state_len are refused on every backend") {
  const at::Tensor x = at::from_blob(std::vector<float>(12).data(), {4, 3}).clone();
  const at::Tensor cu = at::from_blob(std::vector<int32_t>{0, 3, 2}.data(), {3}, at::TensorOptions().dtype(at::kInt)).clone();
  for (const char* backend : {"cpu", "aten", ""}) {
    INFO("backend '" << backend << "'");
    std::string m;
    try {
      call("causal_conv1d::varlen_states", {x, cu, int64_t{2}, std::string(backend)});
    } catch (const std::exception& e) {
      m = e.what();
    }
    CHECK(m.find("cu_seqlens[2] is 2, below cu_seqlens[1] = 3") != std::string::npos);
  }
  std::string m;
  try {
    call("causal_conv1d::varlen_states", {x, cu, int64_t{0}, std::string("cpu")});
  } catch (const std::exception& e) {
    m = e.what();
  }
  CHECK(m.find("'state_len' must be between 1 and 1048576, got 0") != std::string::npos);
}

TEST_CASE("errors name the argument and the fix") {
  const at::Tensor x = at::from_blob(std::vector<float>(24).data(), {2, 3, 4}).clone();
  const at::Tensor w = at::from_blob(std::vector<float>(6).data(), {3, 2}).clone();
  const at::Tensor w_bad = at::from_blob(std::vector<float>(8).data(), {4, 2}).clone();
  auto fwd = [&](const at::Tensor& weight, const std::string& backend) {
    call("causal_conv1d::fwd", {x, weight, c10::IValue(), c10::IValue(), c10::IValue(), false, false, backend});
  };
  auto message = [](auto&& f) -> std::string {
    try {
      f();
    } catch (const std::exception& e) {
      return e.what();
    }
    return "";
  };
  // libcc1d's validation, on a libcc1d backend and before the ATen reference alike.
  for (const char* backend : {"cpu", "aten"}) {
    INFO("backend " << backend);
    const std::string m = message([&] { fwd(w_bad, backend); });
    CHECK(m.find("weight") != std::string::npos);
  }
  // The backward's: libcc1d names the argument, before any backend runs (the ATen one included).
  for (const char* backend : {"cpu", "aten"}) {
    INFO("backend " << backend);
    const at::Tensor dout_bad = at::from_blob(std::vector<float>(18).data(), {2, 3, 3}).clone();
    const std::string m = message([&] {
      call("causal_conv1d::bwd", {x, w, c10::IValue(), dout_bad, c10::IValue(), c10::IValue(), c10::IValue(),
                                  c10::IValue(), false, true, true, false, false, false, std::string(backend)});
    });
    CHECK(m.find("dout") != std::string::npos);
    CHECK(m.find("CC1D_ERR_INVALID_ARGUMENT") != std::string::npos);
  }
  const std::string bad_backend = message([&] { fwd(w, "gpu"); });
  CHECK(bad_backend.find("argument 'backend' must be") != std::string::npos);
  CHECK(bad_backend.find("nvrtc") != std::string::npos);
  CHECK(message([&] { fwd(w, "cpu"); }) == "");
}
