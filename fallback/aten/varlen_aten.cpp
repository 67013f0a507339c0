// varlen_aten.cpp — the varlen states with ATen ops, one sequence at a time: zeros, then the
// sequence's last tokens transposed into the right end of its (dim, state_len) plane. cu_seqlens
// is read on the host and clamped as the CUDA kernel clamps it (a no-op on validated values).
#include <algorithm>

#include "fallback/aten/aten_ref.h"

namespace cc1d::aten {

void varlen_states_reference(const Tensor& x, const Tensor& cu_seqlens, const Tensor& out) {
  const int64_t total = x.size(0), S = out.size(2);
  const std::vector<int64_t> cu = aten::host_ints(cu_seqlens);
  for (int64_t b = 0; b + 1 < static_cast<int64_t>(cu.size()); ++b) {
    const int64_t end = std::clamp<int64_t>(cu[b + 1], 0, total);
    const int64_t begin = std::max(std::clamp<int64_t>(cu[b], 0, end), end - S);
    const Tensor ob = aten::select(out, 0, b);  // (dim, state_len)
    aten::zero_(ob);
    if (end > begin)
      aten::copy_(aten::narrow(ob, 1, S - (end - begin), end - begin),
                  aten::transpose(aten::narrow(x, 0, begin, end - begin), 0, 1));
  }
}

}  // namespace cc1d::aten
