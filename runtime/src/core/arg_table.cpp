#include "core/arg_table.h"

#include <cstring>
#include <string>

#include "core/error.h"

namespace cc1d {

void bad_arg(const OpTable& table, const char* arg, const std::string& what, cc1d_status status) {
  fail(status, std::string(table.fn) + ": " + arg + ": " + what);
}

bool silu_activation(const OpTable& table, int32_t activation) {
  if (activation != CC1D_ACT_NONE && activation != CC1D_ACT_SILU)
    bad_arg(table, "activation", "expected 0 (none) or 1 (silu), got " + std::to_string(activation));
  return activation == CC1D_ACT_SILU;
}

namespace {

std::string device_string(int32_t type, int32_t index) {
  return (type == CC1D_DEVICE_CUDA ? "cuda:" : "cpu:") + std::to_string(index);
}

// "(batch=2, dim=64, width-1=3)" for a row, with the values bound so far.
std::string expected_shape(const OpTable& tb, const ArgRow& row, const int64_t* sym) {
  std::string s = "(";
  for (int i = 0; i < row.rank; ++i) {
    const DimRule& d = row.dims[i];
    s += i ? ", " : "";
    if (d.sym < 0) {
      s += "any";
      continue;
    }
    s += tb.syms[d.sym].name;
    if (d.offset) s += (d.offset > 0 ? "+" : "") + std::to_string(d.offset);
    if (d.at_least) s += " or more";
    if (sym[d.sym] >= 0) s += "=" + std::to_string(sym[d.sym] + d.offset);
  }
  return s + (row.rank == 1 ? ",)" : ")");
}

std::string rank_words(const ArgRow& row) {
  return row.min_rank == row.rank ? std::to_string(row.rank) + "-D"
                                  : std::to_string(row.min_rank) + "-D or " + std::to_string(row.rank) + "-D";
}

}  // namespace

BoundArgs bind_args(const OpTable& tb, const void* args) {
  if (args == nullptr) fail(CC1D_ERR_NULL_POINTER, std::string(tb.fn) + ": args is NULL");
  uint32_t struct_size = 0;
  std::memcpy(&struct_size, args, sizeof struct_size);
  if (struct_size < tb.min_struct_size)
    fail(CC1D_ERR_INVALID_ARGUMENT, std::string(tb.fn) + ": args->struct_size is " + std::to_string(struct_size) +
                                        ", expected at least " + std::to_string(tb.min_struct_size) +
                                        " (set it to sizeof(" + tb.args_struct + "))");
  BoundArgs out;
  for (int64_t& s : out.sym) s = -1;
  ByteSpan spans[kMaxArgRows];
  const cc1d_tensor* first = nullptr;
  for (int r = 0; r < tb.nrows; ++r) {
    const ArgRow& row = tb.rows[r];
    const cc1d_tensor* t = nullptr;
    std::memcpy(&t, static_cast<const char*>(args) + row.member, sizeof t);
    if (t == nullptr) {
      if (row.required) bad_arg(tb, row.name, "is required but NULL", CC1D_ERR_NULL_POINTER);
      continue;
    }
    if (t->ndim < row.min_rank || t->ndim > row.rank)
      bad_arg(tb, row.name, "expected a " + rank_words(row) + " tensor " + expected_shape(tb, row, out.sym) + ", got " +
                                std::to_string(t->ndim) + "-D");
    if (t->device_type != CC1D_DEVICE_CPU && t->device_type != CC1D_DEVICE_CUDA)
      bad_arg(tb, row.name, "unknown device_type " + std::to_string(t->device_type) + " (expected 0=cpu or 1=cuda)");
    if (t->device_type == CC1D_DEVICE_CUDA && t->device_index < 0)
      bad_arg(tb, row.name, "CUDA device index " + std::to_string(t->device_index) + " is negative");
    for (int i = 0; i < t->ndim; ++i) {
      if (t->shape[i] < 0)
        bad_arg(tb, row.name, "shape " + shape_string(t->shape, t->ndim) + " has a negative size");
      if (t->strides[i] < 0)
        bad_arg(tb, row.name, "stride " + std::to_string(t->strides[i]) + " at dim " + std::to_string(i) +
                                  " is negative; pass a view with non-negative strides");
    }
    if (first == nullptr) {
      first = t;
      out.device_type = static_cast<cc1d_device_type>(t->device_type);
      out.device_index = t->device_type == CC1D_DEVICE_CUDA ? t->device_index : 0;
    } else if (t->device_type != first->device_type || t->device_index != first->device_index) {
      bad_arg(tb, row.name, "expected the device of " + std::string(tb.rows[0].name) + " (" +
                                device_string(first->device_type, first->device_index) + "), got " +
                                device_string(t->device_type, t->device_index));
    }

    const DtypeRule& dr = row.dtype;
    if (dr.kind == DtypeRule::Int32 && t->dtype != CC1D_INT32)
      bad_arg(tb, row.name, std::string("expected dtype int32, got ") + dtype_name(t->dtype), CC1D_ERR_INVALID_TYPE);
    if (dr.kind == DtypeRule::Float32 && t->dtype != CC1D_FLOAT32)
      bad_arg(tb, row.name, std::string("expected dtype float32, got ") + dtype_name(t->dtype), CC1D_ERR_INVALID_TYPE);
    if (dr.kind == DtypeRule::AnyFloat && !is_float_dtype(t->dtype))
      bad_arg(tb, row.name, std::string("expected dtype float32, float16 or bfloat16, got ") + dtype_name(t->dtype),
              CC1D_ERR_INVALID_TYPE);
    if (dr.kind == DtypeRule::SameAs && out.t[dr.row].given && t->dtype != out.t[dr.row].dtype)
      bad_arg(tb, row.name, std::string("expected dtype ") + dtype_name(out.t[dr.row].dtype) + " (" + dr.why +
                                "), got " + dtype_name(t->dtype), CC1D_ERR_INVALID_TYPE);

    TensorRef& ref = out.t[r];
    ref.given = true;
    ref.data = t->data;
    ref.dtype = static_cast<cc1d_dtype>(t->dtype);
    ref.ndim = row.rank;
    for (int i = 0; i < row.rank; ++i) {
      ref.shape[i] = i < t->ndim ? t->shape[i] : 1;
      // A size-1 dim is only ever indexed at 0: its stride is made 0, so no kernel forms an
      // offset (or steps a pointer past its end) with a huge stride the caller never meant to use.
      ref.strides[i] = i < t->ndim && ref.shape[i] != 1 ? t->strides[i] : 0;
    }
    for (int i = 0; i < row.rank; ++i) {
      const DimRule& d = row.dims[i];
      if (d.sym < 0) continue;
      int64_t& v = out.sym[d.sym];
      const int64_t size = ref.shape[i];
      if (v < 0) {
        if (d.at_least) bad_arg(tb, row.name, "internal error: an at-least rule cannot bind a size", CC1D_ERR_INTERNAL);
        v = size - d.offset;
        const SymbolSpec& s = tb.syms[d.sym];
        if (v < s.lo || v > s.hi)
          bad_arg(tb, row.name, std::string(s.name) + " (" + row.name + ".shape[" + std::to_string(i) + "]) must be " +
                                    (s.hi == kNoLimit ? ">= " + std::to_string(s.lo)
                                                      : "in " + std::to_string(s.lo) + ".." + std::to_string(s.hi)) +
                                    ", got " + std::to_string(v));
      } else if (d.at_least ? size < v + d.offset : size != v + d.offset) {
        bad_arg(tb, row.name, "expected shape " + expected_shape(tb, row, out.sym) + ", got " +
                                  shape_string(t->shape, t->ndim));
      }
    }
    const int64_t numel = ref.numel();
    if (numel > 0 && ref.data == nullptr)
      bad_arg(tb, row.name, "data pointer is NULL for a tensor of shape " + shape_string(t->shape, t->ndim),
              CC1D_ERR_NULL_POINTER);
    if (numel > 0 && reinterpret_cast<uintptr_t>(ref.data) % dtype_size(ref.dtype) != 0)
      bad_arg(tb, row.name, "data pointer is not aligned to its " + std::to_string(dtype_size(ref.dtype)) +
                                "-byte " + dtype_name(ref.dtype) + " elements");
    if (!byte_span(ref, &spans[r]))
      bad_arg(tb, row.name, "shape " + shape_string(t->shape, t->ndim) + " with strides " +
                                shape_string(t->strides, t->ndim) +
                                " reaches past the 64-bit address space; the tensor is too large to address");
    if (row.role != Role::In && numel > 0)
      for (int i = 0; i < row.rank; ++i)
        if (ref.shape[i] > 1 && ref.strides[i] == 0)
          bad_arg(tb, row.name, "is written but has stride 0 at dim " + std::to_string(i) +
                                    " (a broadcast view); pass a writable tensor with distinct elements");
    if (row.role != Role::In && numel > 0 && self_overlapping(ref))
      bad_arg(tb, row.name, "is written but its strides " + shape_string(t->strides, t->ndim) + " for shape " +
                                shape_string(t->shape, t->ndim) +
                                " make elements share memory (a broadcast or overlapping view); pass a "
                                "tensor with distinct elements, e.g. a contiguous one");
  }
  // Written tensors must not share memory with anything else (reads would see partial writes).
  for (int w = 0; w < tb.nrows; ++w) {
    if (tb.rows[w].role == Role::In || !out.t[w].present()) continue;
    for (int o = 0; o < tb.nrows; ++o) {
      if (o == w || !out.t[o].present() || (tb.rows[w].may_overlap >> o & 1u)) continue;
      if (tb.rows[o].role != Role::In && o < w) continue;  // each written pair once
      if (spans_overlap(spans[w], spans[o]))
        bad_arg(tb, tb.rows[w].name, std::string("overlaps ") + tb.rows[o].name +
                                         " in memory; pass separate buffers");
    }
    if (tb.rows[w].role == Role::Out) out.written[out.nwritten++] = spans[w];
  }
  return out;
}

}  // namespace cc1d
