#include "core/tensor.h"

#include "core/checked.h"

namespace cc1d {

const char* dtype_name(int32_t dtype) {
  switch (dtype) {
    case CC1D_FLOAT32: return "float32";
    case CC1D_FLOAT16: return "float16";
    case CC1D_BFLOAT16: return "bfloat16";
    case CC1D_INT32: return "int32";
    default: return "unknown dtype";
  }
}

int dtype_size(int32_t dtype) {
  switch (dtype) {
    case CC1D_FLOAT32:
    case CC1D_INT32: return 4;
    case CC1D_FLOAT16:
    case CC1D_BFLOAT16: return 2;
    default: return 0;
  }
}

bool is_float_dtype(int32_t dtype) {
  return dtype == CC1D_FLOAT32 || dtype == CC1D_FLOAT16 || dtype == CC1D_BFLOAT16;
}

std::string shape_string(const int64_t* shape, int ndim) {
  std::string s = "(";
  for (int i = 0; i < ndim; ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (ndim == 1 ? ",)" : ")");
}

int64_t TensorRef::numel() const {
  for (int i = 0; i < ndim; ++i)
    if (shape[i] == 0) return 0;  // empty, however large the other sizes
  int64_t n = 1;
  for (int i = 0; i < ndim; ++i) n = mul_checked(n, shape[i], "numel");
  return n;
}

bool byte_span(const TensorRef& t, ByteSpan* out) {
  *out = ByteSpan{};
  if (!t.given || t.data == nullptr) return true;
  int64_t last = 0;
  for (int i = 0; i < t.ndim; ++i) {
    if (t.shape[i] == 0) return true;
    int64_t step;
    if (__builtin_mul_overflow(t.shape[i] - 1, t.strides[i], &step) || __builtin_add_overflow(last, step, &last))
      return false;
  }
  int64_t bytes;
  if (__builtin_add_overflow(last, 1, &bytes) || __builtin_mul_overflow(bytes, dtype_size(t.dtype), &bytes))
    return false;
  out->lo = reinterpret_cast<uintptr_t>(t.data);
  return !__builtin_add_overflow(out->lo, static_cast<uintptr_t>(bytes), &out->hi);
}

bool spans_overlap(ByteSpan a, ByteSpan b) {
  return !a.empty() && !b.empty() && a.lo < b.hi && b.lo < a.hi;
}

bool self_overlapping(const TensorRef& t) {
  struct D { int64_t size, stride; };
  D dims[CC1D_MAX_RANK];
  int n = 0;
  for (int i = 0; i < t.ndim; ++i) {
    if (t.shape[i] == 0) return false;  // no elements, nothing to overlap
    if (t.shape[i] > 1) dims[n++] = {t.shape[i], t.strides[i]};
  }
  for (int i = 1; i < n; ++i)  // insertion sort by stride: at most 4 dims
    for (int j = i; j > 0 && dims[j].stride < dims[j - 1].stride; --j) std::swap(dims[j], dims[j - 1]);
  // Each stride must step over the whole extent of the smaller dims (extents fit: byte_span
  // already checked them, and the sum below is bounded by that span).
  int64_t extent = 1;  // elements covered by the dims so far, from offset 0
  for (int i = 0; i < n; ++i) {
    if (dims[i].stride < extent) return true;
    extent = dims[i].stride * (dims[i].size - 1) + extent;
  }
  return false;
}

bool rows_aligned16(const TensorRef& t, int unit) {
  const int64_t es = dtype_size(t.dtype);
  if (t.strides[unit] != 1 || reinterpret_cast<uintptr_t>(t.data) % 16 != 0) return false;
  for (int d = 0; d < 3; ++d)
    if (d != unit && t.shape[d] > 1 && (t.strides[d] * es) % 16 != 0) return false;
  return true;
}

bool rows_equally_aligned16(const TensorRef& a, const TensorRef& b, int unit) {
  const int64_t es = dtype_size(a.dtype);
  const auto addr = [](const TensorRef& t) { return reinterpret_cast<uintptr_t>(t.data); };
  if (dtype_size(b.dtype) != es || a.strides[unit] != 1 || b.strides[unit] != 1) return false;
  if (addr(a) % es != 0 || addr(b) % es != 0 || (addr(a) - addr(b)) % 16 != 0) return false;
  for (int d = 0; d < 3; ++d)
    if (d != unit && a.shape[d] > 1 && ((a.strides[d] - b.strides[d]) * es) % 16 != 0) return false;
  return true;
}

}  // namespace cc1d
