#include "fallback/emulator/kernel_registry.h"

#include <cxxabi.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "core/error.h"
#include "ops/op.h"

namespace cc1d {
namespace emu {

namespace {

std::vector<HostKernel> build() {
  std::vector<HostKernel> all;
  for (const OpEntry* op : all_ops())
    if (op->host_kernels != nullptr) op->host_kernels(all);
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

void launch_host_kernel(const HostKernel& k, dim3 grid, dim3 block, size_t dynamic_shared, const void* params,
                        size_t param_bytes, const LaunchOptions& options) {
  if (params == nullptr || param_bytes != k.param_bytes)
    fail(CC1D_ERR_INVALID_ARGUMENT, "emulated launch of " + k.name + " with a parameter block of " +
                                        std::to_string(param_bytes) + " bytes; the kernel takes " +
                                        std::to_string(k.param_bytes));
  // The kernel receives a private copy, as a GPU kernel receives its by-value parameters.
  std::vector<unsigned char> copy(static_cast<const unsigned char*>(params),
                                  static_cast<const unsigned char*>(params) + param_bytes);
  void* args[] = {copy.data()};
  Launch l;
  l.kernel = k.name;
  l.fn = k.fn;
  l.args = args;
  l.grid = grid;
  l.block = block;
  l.dynamic_shared = dynamic_shared;
  if (options.check && k.writes != nullptr)
    for (const Region& r : k.writes(copy.data()))
      if (r.bytes > 0) l.outputs.push_back(r);
  launch(l, options);
  const auto& all = host_kernels();
  if (&k >= all.data() && &k < all.data() + all.size()) ++launch_counters()[&k - all.data()];
}

}  // namespace emu
}  // namespace cc1d
