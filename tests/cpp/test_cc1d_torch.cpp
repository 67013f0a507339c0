// test_cc1d_torch.cpp — a C++ program that links cc1d_torch and libtorch, as the README shows: it
// runs each op through the torch dispatcher (causal_conv1d::fwd, causal_conv1d::update) on every
// backend, the ATen reference included, against the float64 reference of the C++ tests, on the
// same fresh random cases as the libcc1d tests (fwd_case.h, update_case.h).
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <ATen/ops/from_blob.h>
#include <doctest/doctest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

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
  CHECK(record.find("\"ops\": [\"fwd\", \"update\"") != std::string::npos);
  CHECK(record.find("\"varlen_states\"]") != std::string::npos);
}

TEST_CASE("the ops are registered with their schemas") {
  for (const char* op : {"causal_conv1d::fwd", "causal_conv1d::update", "causal_conv1d::varlen_states"}) {
    auto handle = c10::Dispatcher::singleton().findSchema({op, ""});
    REQUIRE_MESSAGE(handle.has_value(), op);
    CHECK(handle->hasKernelForDispatchKey(c10::DispatchKey::CPU));
    CHECK(handle->hasKernelForDispatchKey(c10::DispatchKey::CUDA));
  }
  std::ostringstream s;
  s << c10::Dispatcher::singleton().findSchemaOrThrow("causal_conv1d::update", "").schema();
  CHECK(s.str().find("Tensor(a!) conv_state") != std::string::npos);
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
  const std::string bad_backend = message([&] { fwd(w, "gpu"); });
  CHECK(bad_backend.find("argument 'backend' must be") != std::string::npos);
  CHECK(bad_backend.find("nvrtc") != std::string::npos);
  CHECK(message([&] { fwd(w, "cpu"); }) == "");
}
