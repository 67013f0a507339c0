// kernels_varlen.cpp — the varlen-states kernel compiled for the host: its 6 variants (3 dtypes x
// {scalar, 16-byte}), registered through the varlen op's OpEntry::host_kernels. kernels_src is
// included inside an anonymous namespace (see kernel_registry.h).
#include <cstring>

#include "fallback/emulator/cuda_prelude.h"
#include "fallback/emulator/kernel_registry.h"
#include "ops/varlen/varlen_kernels.h"

namespace {
#include "kernels_src/causal_conv1d.cu"
}  // namespace

namespace {

template <typename T, bool VEC>
void run_varlen(void** args) {
  cc1d::VarlenParams p;  // the anonymous-namespace copy: same source, same layout
  std::memcpy(&p, args[0], sizeof p);
  cc1d::causal_conv1d_varlen_states_kernel<T, VEC>(p);
}

// out (batch, dim, state_len), of x's type.
template <typename T>
std::vector<::cc1d::emu::Region> varlen_writes(const void* params) {
  cc1d::VarlenParams p;
  std::memcpy(&p, params, sizeof p);
  const long long shape[3] = {p.batch, p.dim, p.state_len};
  return {::cc1d::emu::strided_region(p.out, sizeof(T), shape, p.out_stride, 3)};
}

template <typename T>
void add_type(std::vector<::cc1d::emu::HostKernel>& out, cc1d_dtype x) {
  out.push_back({::cc1d::varlen_kernel_name(x, false), &run_varlen<T, false>, sizeof(cc1d::VarlenParams),
                 &varlen_writes<T>});
  out.push_back({::cc1d::varlen_kernel_name(x, true), &run_varlen<T, true>, sizeof(cc1d::VarlenParams),
                 &varlen_writes<T>});
}

void add_all(std::vector<::cc1d::emu::HostKernel>& out) {
  add_type<float>(out, CC1D_FLOAT32);
  add_type<cc1d::half_t>(out, CC1D_FLOAT16);
  add_type<cc1d::bf16_t>(out, CC1D_BFLOAT16);
}

}  // namespace

// Outside the anonymous namespace the name cc1d is ambiguous, so this only forwards.
namespace cc1d {
namespace emu {
void add_varlen_kernels(std::vector<HostKernel>& out) { add_all(out); }
}  // namespace emu
}  // namespace cc1d
