#include "kernel_registry.h"

#include <cxxabi.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "error.h"
#include "fwd_plan.h"

namespace cc1d {
namespace emu {

namespace {

// The byte span [data, data + bytes) covering a strided tensor (non-negative strides).
Region span(void* data, size_t elem_bytes, const long long* shape, const long long* strides, int rank) {
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

size_t dtype_bytes(cc1d_dtype d) { return d == CC1D_FLOAT32 || d == CC1D_INT32 ? 4 : 2; }

// out (batch, dim, seqlen) and final_states (batch, dim, width-1), both of x's dtype.
std::vector<Region> fwd_outputs(const HostKernel& k, void** args) {
  FwdParams p;
  std::memcpy(&p, args[0], sizeof p);
  std::vector<Region> regions;
  const size_t eb = dtype_bytes(k.x_dtype);
  const long long out_shape[3] = {p.batch, p.dim, p.seqlen};
  Region out = span(p.out, eb, out_shape, p.out_stride, 3);
  if (out.bytes > 0) regions.push_back(out);
  const long long fin_shape[3] = {p.batch, p.dim, k.width - 1};
  Region fin = span(p.final_states, eb, fin_shape, p.final_stride, 3);
  if (fin.bytes > 0) regions.push_back(fin);
  return regions;
}

std::string fwd_name(const HostKernel& k) {
  return std::string("cc1d::causal_conv1d_fwd_kernel<") + kernel_type_name(k.x_dtype) + ", " +
         kernel_type_name(k.w_dtype) + ", " + std::to_string(k.width) + ", " + std::to_string(k.layout) + ">";
}

std::vector<HostKernel> build() {
  std::vector<HostKernel> all;
  add_fwd_kernels_f32(all);
  add_fwd_kernels_f16(all);
  add_fwd_kernels_bf16(all);
  for (HostKernel& k : all) {
    if (k.param_bytes != sizeof(FwdParams))
      fail(CC1D_ERR_INTERNAL, "emulator: host kernel parameter block of " + std::to_string(k.param_bytes) +
                                  " bytes, runtime FwdParams has " + std::to_string(sizeof(FwdParams)));
    k.name = fwd_name(k);
    k.outputs = &fwd_outputs;
  }
  std::sort(all.begin(), all.end(), [](const HostKernel& a, const HostKernel& b) { return a.name < b.name; });
  return all;
}

std::atomic<uint64_t>* launch_counters() {
  static std::unique_ptr<std::atomic<uint64_t>[]> counters(new std::atomic<uint64_t>[host_kernels().size()]());
  return counters.get();
}

}  // namespace

uint64_t host_kernel_launches(const HostKernel& kernel) {
  return launch_counters()[&kernel - host_kernels().data()].load();
}

const std::vector<HostKernel>& host_kernels() {
  static const std::vector<HostKernel> all = build();
  return all;
}

const HostKernel* find_host_kernel(const std::string& name) {
  const auto& all = host_kernels();
  auto it = std::lower_bound(all.begin(), all.end(), name,
                             [](const HostKernel& k, const std::string& n) { return k.name < n; });
  return it != all.end() && it->name == name ? &*it : nullptr;
}

std::string name_expression_from_lowered(const char* lowered) {
  if (lowered == nullptr) return "";
  int status = 0;
  std::unique_ptr<char, void (*)(void*)> demangled(abi::__cxa_demangle(lowered, nullptr, nullptr, &status),
                                                   &std::free);
  if (status != 0 || !demangled) return "";
  // "void cc1d::causal_conv1d_fwd_kernel<cc1d::bf16_t, float, 4, 0>(cc1d::FwdParams)":
  // drop the return type and the parameter list (the last top-level parenthesis).
  std::string s = demangled.get();
  if (s.compare(0, 5, "void ") == 0) s.erase(0, 5);
  int depth = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '<') ++depth;
    if (s[i] == '>') --depth;
    if (s[i] == '(' && depth == 0) return s.substr(0, i);
  }
  return s;
}

const HostKernel* find_host_kernel_lowered(const char* lowered) {
  const std::string name = name_expression_from_lowered(lowered);
  return name.empty() ? nullptr : find_host_kernel(name);
}

void launch_host_kernel(const HostKernel& k, dim3 grid, dim3 block, size_t dynamic_shared, void** args,
                        const LaunchOptions& options) {
  if (args == nullptr || args[0] == nullptr)
    fail(CC1D_ERR_INVALID_ARGUMENT, "emulated launch of " + k.name + " without its parameter block");
  Launch l;
  l.kernel = k.name;
  l.fn = k.fn;
  l.args = args;
  l.grid = grid;
  l.block = block;
  l.dynamic_shared = dynamic_shared;
  if (options.check && k.outputs != nullptr) l.outputs = k.outputs(k, args);
  launch(l, options);
  const auto& all = host_kernels();
  if (&k >= all.data() && &k < all.data() + all.size()) ++launch_counters()[&k - all.data()];
}

}  // namespace emu
}  // namespace cc1d
