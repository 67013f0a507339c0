// cache_api.cpp — the C entry points of the kernel cache: cache commands, precompile, and the
// release of the strings they return.
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "api/guard.h"
#include "cc1d/cc1d.h"
#include "jit/cache_admin.h"
#include "jit/precompile.h"
#include "ops/op.h"

namespace cc1d {

namespace {

// A string the caller releases with cc1d_free.
char* give(const std::string& s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (p == nullptr) throw std::bad_alloc();
  std::memcpy(p, s.c_str(), s.size() + 1);
  return p;
}

// One of the argument lists, each value checked by `ok` (which names what is expected).
std::vector<int> list_arg(const char* name, const int32_t* values, int32_t count, bool (*ok)(int32_t),
                          const char* expected) {
  const std::string where = std::string("cc1d_precompile: ") + name;
  if (count < 0 || count > 4096) fail(CC1D_ERR_INVALID_ARGUMENT, where + " count is " + std::to_string(count) + "; expected 0..4096");
  if (count > 0 && values == nullptr) fail(CC1D_ERR_NULL_POINTER, where + " is NULL with a count of " + std::to_string(count));
  std::vector<int> out;
  for (int32_t i = 0; i < count; ++i) {
    if (!ok(values[i]))
      fail(CC1D_ERR_INVALID_ARGUMENT, where + "[" + std::to_string(i) + "] is " + std::to_string(values[i]) +
                                          "; expected " + expected);
    out.push_back(values[i]);
  }
  return out;
}

bool ok_arch(int32_t v) { return v >= 10 && v <= 1000; }
bool ok_op(int32_t v) { return find_op(v) != nullptr && find_op(v)->kernels != nullptr; }
bool ok_dtype(int32_t v) { return v == CC1D_FLOAT32 || v == CC1D_FLOAT16 || v == CC1D_BFLOAT16; }
bool ok_width(int32_t v) { return v >= 1 && v <= CC1D_MAX_WIDTH; }

std::string run_precompile(const cc1d_precompile_args* a) {
  if (a == nullptr) fail(CC1D_ERR_NULL_POINTER, "cc1d_precompile: args is NULL");
  if (a->struct_size < sizeof(cc1d_precompile_args))
    fail(CC1D_ERR_INVALID_ARGUMENT, "cc1d_precompile: args->struct_size is " + std::to_string(a->struct_size) +
                                        ", expected " + std::to_string(sizeof(cc1d_precompile_args)));
  if (a->out_dir == nullptr || *a->out_dir == '\0')
    fail(CC1D_ERR_INVALID_ARGUMENT, "cc1d_precompile: out_dir is required (the directory to write the tier to)");
  for (const auto& [name, v] : {std::pair<const char*, int32_t>{"driver_version", a->driver_version},
                                {"torch_cuda_major", a->torch_cuda_major}, {"jobs", a->jobs}})
    if (v < 0) fail(CC1D_ERR_INVALID_ARGUMENT, std::string("cc1d_precompile: ") + name + " is " + std::to_string(v) +
                                                   "; expected >= 0 (0: the default)");
  OfflineTargets targets;
  targets.archs = list_arg("archs", a->archs, a->num_archs, ok_arch, "an SM number such as 90 (10..1000)");
  if (targets.archs.empty()) targets.archs = default_precompile_archs();
  targets.driver_version = a->driver_version;
  targets.torch_major = a->torch_cuda_major;
  PrecompileRequest req;
  req.out_dir = a->out_dir;
  req.ops = list_arg("ops", a->ops, a->num_ops, ok_op, "a cc1d_op with GPU kernels");
  for (int d : list_arg("dtypes", a->dtypes, a->num_dtypes, ok_dtype, "0 (fp32), 1 (fp16) or 2 (bf16)"))
    req.dtypes.push_back(static_cast<cc1d_dtype>(d));
  req.widths = list_arg("widths", a->widths, a->num_widths, ok_width, "1..CC1D_MAX_WIDTH");
  req.jobs = a->jobs;

  const auto toolchain = make_nvrtc_toolchain(&targets);
  const std::string why = toolchain->probe();
  if (!why.empty())
    fail(CC1D_ERR_BACKEND_UNAVAILABLE, "cc1d_precompile: " + why + "; install an NVRTC as the GPU nodes have it "
                                                                   "(pip install nvidia-cuda-nvrtc, or a CUDA toolkit)");
  for (const JitDevice& d : toolchain->devices())
    if (!d.usable) fail(CC1D_ERR_UNSUPPORTED, "cc1d_precompile: sm_" + std::to_string(d.arch) + ": " + d.reason);
  return precompile(*toolchain, req);
}

}  // namespace

}  // namespace cc1d

using cc1d::guarded;

extern "C" {

CC1D_API cc1d_status cc1d_cache_command(int32_t command, char** json) {
  return guarded("cc1d_cache_command", [&] {
    if (json == nullptr) cc1d::fail(CC1D_ERR_NULL_POINTER, "cc1d_cache_command: json is NULL");
    *json = nullptr;
    *json = cc1d::give(cc1d::cache_command_json(command));
  });
}

CC1D_API cc1d_status cc1d_precompile(const cc1d_precompile_args* args, char** manifest_json) {
  return guarded("cc1d_precompile", [&] {
    if (manifest_json == nullptr) cc1d::fail(CC1D_ERR_NULL_POINTER, "cc1d_precompile: manifest_json is NULL");
    *manifest_json = nullptr;
    *manifest_json = cc1d::give(cc1d::run_precompile(args));
  });
}

CC1D_API void cc1d_free(void* p) { std::free(p); }

}  // extern "C"
