// varlen_cpu.cpp — the varlen-states op's native CPU implementation (run by the cpu backend): the
// same semantics as kernels_src/varlen.cuh. A copy of bits: each (sequence, state slot) row of out
// is one token's dim elements of x, or zeros; rows with unit dim strides are memcpy/memset, others
// a strided loop over 2- or 4-byte words. Validation has already rejected bad host cu_seqlens.
#include <algorithm>
#include <cstdint>
#include <cstring>

#include "fallback/cpu/thread_pool.h"
#include "ops/varlen/varlen_op.h"

namespace cc1d {

namespace {

constexpr int64_t kSerialElements = 1 << 16;  // below this many elements per chunk, no pool

template <typename Word>
void copy_row(const VarlenProblem& p, const Word* src, Word* dst) {
  const int64_t xs = p.x.strides[1], os = p.out.strides[1];
  if (src == nullptr) {
    if (os == 1) std::memset(dst, 0, p.dim * sizeof(Word));
    else for (int64_t c = 0; c < p.dim; ++c) dst[c * os] = 0;
  } else if (xs == 1 && os == 1) {
    std::memcpy(dst, src, p.dim * sizeof(Word));
  } else {
    for (int64_t c = 0; c < p.dim; ++c) dst[c * os] = src[c * xs];
  }
}

template <typename Word>
void run(const VarlenProblem& p) {
  const int64_t sl = p.state_len;
  const Word* x = static_cast<const Word*>(p.x.data);
  Word* out = static_cast<Word*>(p.out.data);
  parallel_for(p.batch * sl, std::max<int64_t>(1, kSerialElements / p.dim), [&](int64_t lo, int64_t hi) {
    for (int64_t row = lo; row < hi; ++row) {
      const int64_t b = row / sl, s = row % sl;
      int64_t begin = 0, end = 0;
      varlen_bounds(p, b, &begin, &end);
      const int64_t t = end - sl + s;  // the token slot s holds, if it belongs to sequence b
      copy_row<Word>(p, t >= begin ? x + t * p.x.strides[0] : nullptr,
                     out + b * p.out.strides[0] + s * p.out.strides[2]);
    }
  });
}

}  // namespace

void varlen_cpu(const Problem& problem) {
  const auto& p = static_cast<const VarlenProblem&>(problem);
  if (dtype_size(p.dtype) == 4) run<uint32_t>(p);
  else run<uint16_t>(p);
}

}  // namespace cc1d
