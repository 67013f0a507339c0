// tensor.h — a validated tensor (TensorRef) and the memory facts validation needs: element
// sizes, the byte span a strided tensor covers, and whether two tensors or one tensor's own
// elements can share memory.
#pragma once
#include <cstdint>
#include <string>

#include "cc1d/cc1d.h"

namespace cc1d {

// A tensor after validation: the rank its role fixes (missing trailing dims are size 1),
// strides in elements, every extent known to fit in 64 bits.
struct TensorRef {
  bool given = false;  // passed by the caller (an optional argument may be absent)
  void* data = nullptr;
  cc1d_dtype dtype = CC1D_FLOAT32;
  int ndim = 0;
  int64_t shape[CC1D_MAX_RANK] = {0, 0, 0, 0};
  int64_t strides[CC1D_MAX_RANK] = {0, 0, 0, 0};
  // Present: given and holding at least one element (the only case a kernel reads it).
  bool present() const { return given && data != nullptr; }
  int64_t numel() const;
};

// Bytes [lo, hi) a tensor's elements occupy; empty (lo == hi) when it has none.
struct ByteSpan {
  uintptr_t lo = 0, hi = 0;
  bool empty() const { return lo >= hi; }
};

// "float32", "float16", "bfloat16", "int32" or "unknown dtype".
const char* dtype_name(int32_t dtype);
// 4 or 2; 0 for an unknown dtype.
int dtype_size(int32_t dtype);
bool is_float_dtype(int32_t dtype);

// "(2, 3, 17)" / "(5,)".
std::string shape_string(const int64_t* shape, int ndim);

// The byte span of a tensor into *out; false when its largest offset or its end address does
// not fit in 64 bits (the caller names the tensor in its error).
bool byte_span(const TensorRef& t, ByteSpan* out);

bool spans_overlap(ByteSpan a, ByteSpan b);

// The first n strides of t into a kernel parameter block (long long, as kernels_src declares them).
inline void copy_strides(long long* dst, const TensorRef& t, int n) {
  for (int i = 0; i < n; ++i) dst[i] = t.strides[i];
}

// Whether every row of rank-3 `t` along dim `unit` (stride 1) starts on a 16-byte boundary:
// the base address and every other dim's stride in bytes (where that dim has more than one
// index). The kernels' 16-byte vector paths need it of each tensor they move.
bool rows_aligned16(const TensorRef& t, int unit);

// Whether rank-3 `a` and `b` of one shape and element size have unit stride along `unit` and
// every row of `a` starts at the same address mod 16 as the same row of `b` (their bases and
// the other dims' strides agree mod 16 bytes): a kernel can then peel the same few elements off
// both rows and move the rest in aligned 16-byte vectors.
bool rows_equally_aligned16(const TensorRef& a, const TensorRef& b, int unit);

// Whether two distinct indices of `t` can address the same element (a broadcast stride 0, or
// strides too small for the sizes below them). Conservative: a layout whose strides, sorted,
// do not each step over everything below them counts as overlapping.
bool self_overlapping(const TensorRef& t);

}  // namespace cc1d
