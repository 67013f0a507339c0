// kernels_update.cpp — the update kernel compiled for the host: its 72 variants (9 dtype pairs x
// widths 1..8), registered through the update op's OpEntry::host_kernels. kernels_src is
// included inside an anonymous namespace (see kernel_registry.h).
#include <cstring>
#include <utility>

#include "fallback/emulator/cuda_prelude.h"
#include "fallback/emulator/kernel_registry.h"
#include "ops/update/update_kernels.h"

namespace {
#include "kernels_src/causal_conv1d.cu"
}  // namespace

namespace {

template <typename TX, typename TW, int W>
void run_update(void** args) {
  cc1d::UpdateParams p;  // the anonymous-namespace copy: same source, same layout
  std::memcpy(&p, args[0], sizeof p);
  cc1d::causal_conv1d_update_kernel<TX, TW, W>(p);
}

// out (batch, dim, seqlen) and the whole conv_state pool, both of x's type.
template <typename TX>
std::vector<::cc1d::emu::Region> update_writes(const void* params) {
  cc1d::UpdateParams p;
  std::memcpy(&p, params, sizeof p);
  const long long out_shape[3] = {p.batch, p.dim, p.seqlen};
  const long long state_shape[3] = {p.pool, p.dim, p.state_len};
  return {::cc1d::emu::strided_region(p.out, sizeof(TX), out_shape, p.out_stride, 3),
          ::cc1d::emu::strided_region(p.conv_state, sizeof(TX), state_shape, p.state_stride, 3)};
}

template <typename TX, typename TW, int... Ws>
void add_widths(std::vector<::cc1d::emu::HostKernel>& out, cc1d_dtype x, cc1d_dtype w,
                std::integer_sequence<int, Ws...>) {
  // Ws are 0-based; widths run 1..CC1D_MAX_WIDTH.
  (out.push_back({::cc1d::update_kernel_name(x, w, Ws + 1), &run_update<TX, TW, Ws + 1>, sizeof(cc1d::UpdateParams),
                  &update_writes<TX>}),
   ...);
}

template <typename TX>
void add_x(std::vector<::cc1d::emu::HostKernel>& out, cc1d_dtype x) {
  using Widths = std::make_integer_sequence<int, CC1D_MAX_WIDTH>;
  add_widths<TX, float>(out, x, CC1D_FLOAT32, Widths{});
  add_widths<TX, cc1d::half_t>(out, x, CC1D_FLOAT16, Widths{});
  add_widths<TX, cc1d::bf16_t>(out, x, CC1D_BFLOAT16, Widths{});
}

void add_all(std::vector<::cc1d::emu::HostKernel>& out) {
  add_x<float>(out, CC1D_FLOAT32);
  add_x<cc1d::half_t>(out, CC1D_FLOAT16);
  add_x<cc1d::bf16_t>(out, CC1D_BFLOAT16);
}

}  // namespace

// Outside the anonymous namespace the name cc1d is ambiguous, so this only forwards.
namespace cc1d {
namespace emu {
void add_update_kernels(std::vector<HostKernel>& out) { add_all(out); }
}  // namespace emu
}  // namespace cc1d
