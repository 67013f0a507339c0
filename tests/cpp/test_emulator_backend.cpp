// test_emulator_backend.cpp — the `emulate` backend's plumbing: its kernel table is exactly the
// registered ops' kernels, NVRTC-style lowered names map back to it, it serves host tensors
// only, and cc1d_report describes it.
#include <doctest/doctest.h>

#include <set>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "fallback/emulator/kernel_registry.h"
#include "kernels_src/fwd_params.h"
#include "ops/fwd/fwd_op.h"
#include "test_support.h"

TEST_CASE("the host kernel table is exactly the name expressions of every registered op") {
  const auto& all = cc1d::emu::host_kernels();
  std::set<std::string> table;
  for (const auto& k : all) {
    CHECK_MESSAGE(table.insert(k.name).second, "registered twice: " << k.name);
    CHECK((k.fn != nullptr));
    CHECK((k.writes != nullptr));
    CHECK(k.param_bytes > 0);
  }
  std::set<std::string> planned;
  for (const cc1d::OpEntry* op : cc1d::all_ops()) {
    if (op->kernels == nullptr) continue;
    CHECK_MESSAGE((op->host_kernels != nullptr), "op " << op->name << " has kernels but no host instantiations");
    for (const std::string& n : op->kernels()) planned.insert(n);
  }
  CHECK(table == planned);
  const std::vector<std::string> fwd = cc1d::all_fwd_kernels();
  CHECK(fwd.size() == 9 * CC1D_MAX_WIDTH * cc1d::kFwdNumPaths);
  for (const std::string& n : fwd) CHECK(cc1d::emu::find_host_kernel(n)->param_bytes == sizeof(cc1d::FwdParams));
  CHECK(cc1d::emu::find_host_kernel("cc1d::causal_conv1d_fwd_kernel<float, float, 9, 0>") == nullptr);
}

TEST_CASE("Itanium-mangled (NVRTC lowered) names map to the host instantiation") {
  // Mangled names as g++ and NVRTC produce them for these instantiations (checked with c++filt).
  const char* cases[][2] = {
      {"_ZN4cc1d24causal_conv1d_fwd_kernelINS_6bf16_tEfLi4ELi0EEEvNS_9FwdParamsE",
       "cc1d::causal_conv1d_fwd_kernel<cc1d::bf16_t, float, 4, 0>"},
      {"_ZN4cc1d24causal_conv1d_fwd_kernelINS_6half_tES1_Li1ELi1EEEvNS_9FwdParamsE",
       "cc1d::causal_conv1d_fwd_kernel<cc1d::half_t, cc1d::half_t, 1, 1>"},
      {"_ZN4cc1d24causal_conv1d_fwd_kernelIfNS_6bf16_tELi8ELi1EEEvNS_9FwdParamsE",
       "cc1d::causal_conv1d_fwd_kernel<float, cc1d::bf16_t, 8, 1>"},
      {"_ZN4cc1d24causal_conv1d_fwd_kernelINS_6bf16_tENS_6half_tELi3ELi0EEEvNS_9FwdParamsE",
       "cc1d::causal_conv1d_fwd_kernel<cc1d::bf16_t, cc1d::half_t, 3, 0>"},
  };
  for (const auto& c : cases) {
    CAPTURE(c[0]);
    CHECK(cc1d::emu::name_expression_from_lowered(c[0]) == c[1]);
    const cc1d::emu::HostKernel* k = cc1d::emu::find_host_kernel_lowered(c[0]);
    REQUIRE(k != nullptr);
    CHECK(k->name == c[1]);
  }
  CHECK(cc1d::emu::find_host_kernel_lowered("not_a_mangled_name") == nullptr);
  CHECK(cc1d::emu::find_host_kernel_lowered("_Z3foov") == nullptr);
  CHECK(cc1d::emu::find_host_kernel_lowered(nullptr) == nullptr);
}

TEST_CASE("emulate serves host tensors and explains why not CUDA tensors") {
  CHECK(cc1d_backend_available(CC1D_BACKEND_EMULATE, CC1D_DEVICE_CPU, 0) == CC1D_OK);
  REQUIRE(cc1d_backend_available(CC1D_BACKEND_EMULATE, CC1D_DEVICE_CUDA, 0) == CC1D_ERR_BACKEND_UNAVAILABLE);
  const std::string why = cc1d_last_error();
  CHECK(why.find("host (CPU) tensors") != std::string::npos);
  CHECK(why.find("nvrtc backend") != std::string::npos);
}

TEST_CASE("the emulate backend launches plan_fwd's kernel and geometry") {
  using namespace cc1d_test;
  std::mt19937 rng = cc1d_test::test_rng(108);
  HostTensor x = make_x(CC1D_FLOAT16, 1, 2, 50, Layout::ChannelLast);
  x.randomize(rng);
  HostTensor w = HostTensor::contiguous(CC1D_BFLOAT16, {2, 5});
  w.randomize(rng);
  HostTensor out = make_x(CC1D_FLOAT16, 1, 2, 50, Layout::ChannelLast);
  out.fill_all(NAN);
  cc1d_fwd_args a{};
  a.struct_size = sizeof a;
  a.x = &x.t;
  a.weight = &w.t;
  a.out = &out.t;
  a.backend = CC1D_BACKEND_EMULATE;
  const cc1d::emu::HostKernel* k =
      cc1d::emu::find_host_kernel("cc1d::causal_conv1d_fwd_kernel<cc1d::half_t, cc1d::bf16_t, 5, 1>");
  REQUIRE(k != nullptr);
  const uint64_t runs = cc1d::emu::host_kernel_launches(*k);
  const cc1d::emu::Stats before = cc1d::emu::stats();
  REQUIRE_MESSAGE(cc1d_causal_conv1d_fwd(&a) == CC1D_OK, cc1d_last_error());
  CHECK(cc1d::emu::host_kernel_launches(*k) == runs + 1);
  // Channel path (dim 2 is no multiple of 8): ceil(50 / (4 warps x 32 steps)) = 1 time chunk x
  // ceil(2 / 32) = 1 channel block of 128 threads. With CAUSAL_CONV1D_EMULATE_CHECK=1 (set by
  // ctest) the grid runs twice.
  const cc1d::emu::Stats after = cc1d::emu::stats();
  const uint64_t passes = cc1d::emu::options_from_env().check ? 2 : 1;
  CHECK(after.blocks - before.blocks == 1 * passes);
  CHECK(after.threads - before.threads == 1 * 128 * passes);
}

TEST_CASE("cc1d_report describes the emulate backend") {
  size_t needed = 0;
  REQUIRE(cc1d_report(nullptr, 0, &needed) == CC1D_ERR_BUFFER_TOO_SMALL);
  std::string buf(needed, '\0');
  REQUIRE(cc1d_report(&buf[0], buf.size(), &needed) == CC1D_OK);
  CHECK(buf.find("\"host_kernels\": " + std::to_string(cc1d::emu::host_kernels().size())) != std::string::npos);
  CHECK(buf.find("not a fast path") != std::string::npos);
}
