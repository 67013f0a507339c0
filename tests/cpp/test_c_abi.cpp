// The C ABI contract: versions, the thread-local error, and a status plus an actionable
// message for every kind of bad input — never a crash.
#include <doctest/doctest.h>

#include <string>
#include <thread>

#include "test_support.h"

using namespace cc1d_test;

namespace {

struct Fixture {
  HostTensor x = HostTensor::contiguous(CC1D_FLOAT32, {2, 4, 16});
  HostTensor w = HostTensor::contiguous(CC1D_FLOAT32, {4, 3});
  HostTensor bias = HostTensor::contiguous(CC1D_FLOAT32, {4});
  HostTensor seq = HostTensor::contiguous(CC1D_INT32, {2, 16});
  HostTensor init = HostTensor::contiguous(CC1D_FLOAT32, {2, 4, 2});
  HostTensor out = HostTensor::contiguous(CC1D_FLOAT32, {2, 4, 16});
  HostTensor fin = HostTensor::contiguous(CC1D_FLOAT32, {2, 4, 2});
  cc1d_fwd_args a{};
  Fixture() {
    std::mt19937 rng = cc1d_test::test_rng(101);
    x.randomize(rng);
    w.randomize(rng);
    bias.randomize(rng);
    init.randomize(rng);
    a.struct_size = sizeof a;
    a.x = &x.t;
    a.weight = &w.t;
    a.bias = &bias.t;
    a.seq_idx = &seq.t;
    a.initial_states = &init.t;
    a.out = &out.t;
    a.final_states = &fin.t;
    a.backend = CC1D_BACKEND_CPU;
  }
  // Runs and expects `status` with a message containing every fragment.
  void expect(cc1d_status status, std::initializer_list<const char*> fragments) {
    out.fill_all(NAN);
    const cc1d_status got = cc1d_causal_conv1d_fwd(&a);
    const std::string msg = cc1d_last_error();
    INFO("message: " << msg);
    CHECK(got == status);
    for (const char* f : fragments) CHECK_MESSAGE(msg.find(f) != std::string::npos, "missing '" << f << "'");
    if (status != CC1D_OK) CHECK(std::isnan(out.get(0)));  // nothing written on a validation error
  }
};

}  // namespace

TEST_CASE("versions") {
  CHECK(cc1d_abi_version() == CC1D_ABI_VERSION);
  CHECK(std::string(cc1d_version()).size() > 0);
}

TEST_CASE("a valid call succeeds") {
  Fixture f;
  f.expect(CC1D_OK, {});
  CHECK(!std::isnan(f.out.get(0)));
}

TEST_CASE("null pointers") {
  CHECK(cc1d_causal_conv1d_fwd(nullptr) == CC1D_ERR_NULL_POINTER);
  CHECK(std::string(cc1d_last_error()).find("args is NULL") != std::string::npos);
  Fixture f;
  f.a.x = nullptr;
  f.expect(CC1D_ERR_NULL_POINTER, {"x", "NULL"});
  Fixture g;
  g.a.weight = nullptr;
  g.expect(CC1D_ERR_NULL_POINTER, {"weight"});
  Fixture h;
  h.a.out = nullptr;
  h.expect(CC1D_ERR_NULL_POINTER, {"out"});
  Fixture i;
  i.x.t.data = nullptr;
  i.expect(CC1D_ERR_NULL_POINTER, {"x", "data pointer is NULL"});
}

TEST_CASE("struct_size too small") {
  Fixture f;
  f.a.struct_size = 8;
  f.expect(CC1D_ERR_INVALID_ARGUMENT, {"struct_size", "sizeof(cc1d_fwd_args)"});
}

TEST_CASE("wrong ranks and shapes name the argument, the expectation and what came") {
  { Fixture f; f.x.t.ndim = 2; f.expect(CC1D_ERR_INVALID_ARGUMENT, {"x", "3-D", "got 2-D"}); }
  { Fixture f; f.w.t.shape[0] = 5; f.expect(CC1D_ERR_INVALID_ARGUMENT, {"weight", "(dim=4, width)", "(5, 3)"}); }
  { Fixture f; f.bias.t.shape[0] = 3; f.expect(CC1D_ERR_INVALID_ARGUMENT, {"bias", "(dim=4,)", "(3,)"}); }
  { Fixture f; f.seq.t.shape[1] = 15; f.expect(CC1D_ERR_INVALID_ARGUMENT, {"seq_idx", "seqlen=16", "(2, 15)"}); }
  { Fixture f; f.init.t.shape[2] = 3; f.expect(CC1D_ERR_INVALID_ARGUMENT, {"initial_states", "width-1=2", "(2, 4, 3)"}); }
  { Fixture f; f.fin.t.shape[0] = 1; f.expect(CC1D_ERR_INVALID_ARGUMENT, {"final_states", "(1, 4, 2)"}); }
  { Fixture f; f.out.t.shape[2] = 15; f.expect(CC1D_ERR_INVALID_ARGUMENT, {"out", "(2, 4, 15)"}); }
  { Fixture f; f.x.t.shape[2] = 0; f.expect(CC1D_ERR_INVALID_ARGUMENT, {"x", "seqlen"}); }
  { Fixture f; f.x.t.strides[1] = -16; f.expect(CC1D_ERR_INVALID_ARGUMENT, {"x", "negative"}); }
}

TEST_CASE("width outside 1..8") {
  HostTensor w9 = HostTensor::contiguous(CC1D_FLOAT32, {4, 9});
  Fixture f;
  f.a.weight = &w9.t;
  f.a.initial_states = nullptr;
  f.a.final_states = nullptr;
  f.expect(CC1D_ERR_INVALID_ARGUMENT, {"weight", "width", "1..8", "got 9"});
  HostTensor w0 = HostTensor::contiguous(CC1D_FLOAT32, {4, 0});
  Fixture g;
  g.a.weight = &w0.t;
  g.a.initial_states = nullptr;
  g.a.final_states = nullptr;
  g.expect(CC1D_ERR_INVALID_ARGUMENT, {"width", "got 0"});
}

TEST_CASE("dtypes") {
  { Fixture f; f.x.t.dtype = CC1D_INT32; f.expect(CC1D_ERR_INVALID_TYPE, {"x", "float32, float16 or bfloat16", "int32"}); }
  { Fixture f; f.x.t.dtype = 42; f.expect(CC1D_ERR_INVALID_TYPE, {"x", "unknown dtype"}); }
  { Fixture f; f.bias.t.dtype = CC1D_FLOAT16; f.expect(CC1D_ERR_INVALID_TYPE, {"bias", "weight's dtype", "float16"}); }
  { Fixture f; f.seq.t.dtype = CC1D_FLOAT32; f.expect(CC1D_ERR_INVALID_TYPE, {"seq_idx", "int32", "float32"}); }
  { Fixture f; f.init.t.dtype = CC1D_BFLOAT16; f.expect(CC1D_ERR_INVALID_TYPE, {"initial_states", "x's dtype"}); }
  { Fixture f; f.out.t.dtype = CC1D_FLOAT16; f.expect(CC1D_ERR_INVALID_TYPE, {"out", "x's dtype"}); }
  { Fixture f; f.fin.t.dtype = CC1D_FLOAT16; f.expect(CC1D_ERR_INVALID_TYPE, {"final_states"}); }
}

TEST_CASE("devices must match x") {
  { Fixture f; f.w.t.device_type = CC1D_DEVICE_CUDA; f.expect(CC1D_ERR_INVALID_ARGUMENT, {"weight", "device of x (cpu:0)", "cuda:0"}); }
  { Fixture f; f.bias.t.device_index = 1; f.expect(CC1D_ERR_INVALID_ARGUMENT, {"bias", "cpu:1"}); }
  { Fixture f; f.init.t.device_type = CC1D_DEVICE_CUDA; f.expect(CC1D_ERR_INVALID_ARGUMENT, {"initial_states"}); }
  { Fixture f; f.x.t.device_type = 7; f.expect(CC1D_ERR_INVALID_ARGUMENT, {"x", "device_type"}); }
}

TEST_CASE("activation and backend values") {
  { Fixture f; f.a.activation = 2; f.expect(CC1D_ERR_INVALID_ARGUMENT, {"activation", "got 2"}); }
  { Fixture f; f.a.backend = 9; f.expect(CC1D_ERR_INVALID_ARGUMENT, {"backend", "got 9"}); }
}

TEST_CASE("outputs may not alias inputs or be broadcast") {
  { Fixture f; f.a.out = &f.x.t; f.a.x = &f.x.t; f.out.fill_all(NAN); CHECK(cc1d_causal_conv1d_fwd(&f.a) == CC1D_ERR_INVALID_ARGUMENT);
    CHECK(std::string(cc1d_last_error()).find("overlaps x") != std::string::npos); }
  { Fixture f; f.out.t.strides[0] = 0; f.expect(CC1D_ERR_INVALID_ARGUMENT, {"out", "stride 0"}); }
  { Fixture f; f.a.final_states = &f.init.t; CHECK(cc1d_causal_conv1d_fwd(&f.a) == CC1D_ERR_INVALID_ARGUMENT);
    CHECK(std::string(cc1d_last_error()).find("final_states") != std::string::npos); }
}

TEST_CASE("a backend that cannot serve says why") {
  Fixture f;
  f.a.backend = CC1D_BACKEND_CPU;
  f.x.t.device_type = f.w.t.device_type = f.bias.t.device_type = f.seq.t.device_type = CC1D_DEVICE_CUDA;
  f.init.t.device_type = f.out.t.device_type = f.fin.t.device_type = CC1D_DEVICE_CUDA;
  f.expect(CC1D_ERR_BACKEND_UNAVAILABLE, {"cpu backend", "host"});
  CHECK(cc1d_backend_available(CC1D_BACKEND_CPU, CC1D_DEVICE_CPU, 0) == CC1D_OK);
  CHECK(cc1d_backend_available(CC1D_BACKEND_CPU, 5, 0) == CC1D_ERR_INVALID_ARGUMENT);
}

TEST_CASE("empty batch or dim is a no-op") {
  HostTensor x = HostTensor::contiguous(CC1D_FLOAT32, {0, 4, 8}), out = HostTensor::contiguous(CC1D_FLOAT32, {0, 4, 8});
  HostTensor w = HostTensor::contiguous(CC1D_FLOAT32, {4, 2});
  cc1d_fwd_args a{};
  a.struct_size = sizeof a;
  a.x = &x.t;
  a.weight = &w.t;
  a.out = &out.t;
  x.t.data = out.t.data = nullptr;
  CHECK(cc1d_causal_conv1d_fwd(&a) == CC1D_OK);
}

TEST_CASE("the error is thread-local") {
  CHECK(cc1d_causal_conv1d_fwd(nullptr) == CC1D_ERR_NULL_POINTER);
  std::string other;
  std::thread([&] { other = cc1d_last_error(); }).join();
  CHECK(other == "");
  CHECK(std::string(cc1d_last_error()).find("args is NULL") != std::string::npos);
}

TEST_CASE("report and torch info") {
  CHECK(cc1d_set_torch_info("2.9.0", "13.0", 1) == CC1D_OK);
  CHECK(cc1d_set_torch_info(nullptr, nullptr, -1) == CC1D_OK);
  CHECK(cc1d_set_torch_info("2.9.0+cu130", "13.0", 1) == CC1D_OK);
  size_t needed = 0;
  CHECK(cc1d_report(nullptr, 0, &needed) == CC1D_ERR_BUFFER_TOO_SMALL);
  CHECK(needed > 10);
  std::string buf(needed, '\0');
  REQUIRE(cc1d_report(&buf[0], buf.size(), &needed) == CC1D_OK);
  CHECK(buf.find("\"torch\": {\"version\": \"2.9.0+cu130\"") != std::string::npos);
  CHECK(buf.find("\"cpu\"") != std::string::npos);
  CHECK(buf.find("\"nvrtc\"") != std::string::npos);
  CHECK(buf.find("\"emulate\"") != std::string::npos);
}
