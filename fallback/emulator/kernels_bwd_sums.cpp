// kernels_bwd_sums.cpp — the backward's zeroing and finalize kernels compiled for the host
// (see kernels_bwd.inc for the main kernel), registered through the op's OpEntry::host_kernels.
#include <cstring>

#include "fallback/emulator/cuda_prelude.h"
#include "fallback/emulator/kernel_registry.h"
#include "ops/bwd/bwd_kernels.h"

namespace {
#include "kernels_src/causal_conv1d.cu"
}  // namespace

namespace {

cc1d::BwdParams params_of(const void* block) {
  cc1d::BwdParams p;  // the anonymous-namespace copy: same source, same layout
  std::memcpy(&p, block, sizeof p);
  return p;
}

void run_zero(void** args) { cc1d::causal_conv1d_bwd_zero_kernel<float>(params_of(args[0])); }

template <typename TW>
void run_finalize(void** args) {
  cc1d::causal_conv1d_bwd_finalize_kernel<TW>(params_of(args[0]));
}

// The zeroing kernel writes the one row of sums the atomics add into.
std::vector<::cc1d::emu::Region> zero_writes(const void* params) {
  const cc1d::BwdParams p = params_of(params);
  const long long shape[1] = {p.dim * (p.width + 1)}, unit[1] = {1};
  return {::cc1d::emu::strided_region(p.acc, sizeof(float), shape, unit, 1)};
}

// The finalize kernel writes dweight (dim, width) and dbias (dim,), of weight's type.
template <typename TW>
std::vector<::cc1d::emu::Region> finalize_writes(const void* params) {
  const cc1d::BwdParams p = params_of(params);
  const long long dw_shape[2] = {p.dim, p.width}, db_shape[1] = {p.dim}, db_stride[1] = {p.db_stride};
  return {::cc1d::emu::strided_region(p.dweight, sizeof(TW), dw_shape, p.dw_stride, 2),
          ::cc1d::emu::strided_region(p.dbias, sizeof(TW), db_shape, db_stride, 1)};
}

void add_all(std::vector<::cc1d::emu::HostKernel>& out) {
  out.push_back({::cc1d::kBwdZeroKernel, &run_zero, sizeof(cc1d::BwdParams), &zero_writes});
  out.push_back({::cc1d::bwd_finalize_kernel_name(CC1D_FLOAT32), &run_finalize<float>, sizeof(cc1d::BwdParams),
                 &finalize_writes<float>});
  out.push_back({::cc1d::bwd_finalize_kernel_name(CC1D_FLOAT16), &run_finalize<cc1d::half_t>,
                 sizeof(cc1d::BwdParams), &finalize_writes<cc1d::half_t>});
  out.push_back({::cc1d::bwd_finalize_kernel_name(CC1D_BFLOAT16), &run_finalize<cc1d::bf16_t>,
                 sizeof(cc1d::BwdParams), &finalize_writes<cc1d::bf16_t>});
}

}  // namespace

namespace cc1d {
namespace emu {
void add_bwd_sum_kernels(std::vector<HostKernel>& out) { add_all(out); }
}  // namespace emu
}  // namespace cc1d
