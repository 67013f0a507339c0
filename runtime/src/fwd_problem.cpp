#include "fwd_problem.h"

#include <algorithm>
#include <sstream>
#include <string>

#include "error.h"

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

namespace {

const char* kWhere = "cc1d_causal_conv1d_fwd";

std::string shape_str(const cc1d_tensor& t) {
  std::ostringstream s;
  s << "(";
  for (int i = 0; i < t.ndim && i < CC1D_MAX_RANK; ++i) s << (i ? ", " : "") << t.shape[i];
  s << (t.ndim == 1 ? ",)" : ")");
  return s.str();
}

[[noreturn]] void bad(const char* arg, const std::string& what, cc1d_status st = CC1D_ERR_INVALID_ARGUMENT) {
  fail(st, std::string(kWhere) + ": " + arg + ": " + what);
}

size_t elem_size(cc1d_dtype d) { return d == CC1D_FLOAT32 || d == CC1D_INT32 ? 4 : 2; }

// Structural checks common to every tensor argument; `shape` holds the expected sizes
// (-1 = any) and `expected` describes them for the message.
TensorRef check_tensor(const cc1d_tensor* t, const char* arg, int ndim, const int64_t* shape,
                       const std::string& expected, bool is_output) {
  if (t->ndim != ndim)
    bad(arg, "expected a " + std::to_string(ndim) + "-D tensor " + expected + ", got " +
                 std::to_string(t->ndim) + "-D");
  for (int i = 0; i < ndim; ++i) {
    if (t->shape[i] < 0) bad(arg, "shape " + shape_str(*t) + " has a negative size");
    if (t->strides[i] < 0) bad(arg, "stride " + std::to_string(t->strides[i]) + " at dim " + std::to_string(i) + " is negative; pass a view with non-negative strides");
  }
  for (int i = 0; i < ndim; ++i)
    if (shape[i] >= 0 && t->shape[i] != shape[i])
      bad(arg, "expected shape " + expected + ", got " + shape_str(*t));
  if (t->device_type != CC1D_DEVICE_CPU && t->device_type != CC1D_DEVICE_CUDA)
    bad(arg, "unknown device_type " + std::to_string(t->device_type) + " (expected 0=cpu or 1=cuda)");
  int64_t numel = 1;
  for (int i = 0; i < ndim; ++i) numel *= t->shape[i];
  if (numel > 0 && t->data == nullptr)
    bad(arg, "data pointer is NULL for a tensor of shape " + shape_str(*t), CC1D_ERR_NULL_POINTER);
  if (is_output && numel > 0)
    for (int i = 0; i < ndim; ++i)
      if (t->shape[i] > 1 && t->strides[i] == 0)
        bad(arg, "is an output but has stride 0 at dim " + std::to_string(i) +
                     " (a broadcast view); pass a writable tensor with distinct elements");
  TensorRef r;
  r.data = t->data;
  r.dtype = static_cast<cc1d_dtype>(t->dtype);
  for (int i = 0; i < ndim; ++i) {
    r.shape[i] = t->shape[i];
    r.strides[i] = t->strides[i];
  }
  return r;
}

void check_float_dtype(const cc1d_tensor* t, const char* arg) {
  if (t->dtype != CC1D_FLOAT32 && t->dtype != CC1D_FLOAT16 && t->dtype != CC1D_BFLOAT16)
    bad(arg, std::string("expected dtype float32, float16 or bfloat16, got ") + dtype_name(t->dtype),
        CC1D_ERR_INVALID_TYPE);
}

void check_dtype(const cc1d_tensor* t, const char* arg, cc1d_dtype want, const char* why) {
  if (t->dtype != want)
    bad(arg, std::string("expected dtype ") + dtype_name(want) + " (" + why + "), got " +
                 dtype_name(t->dtype), CC1D_ERR_INVALID_TYPE);
}

void check_same_device(const cc1d_tensor* t, const char* arg, const cc1d_tensor* x) {
  if (t->device_type != x->device_type || t->device_index != x->device_index) {
    auto dev = [](const cc1d_tensor* u) {
      return std::string(u->device_type == CC1D_DEVICE_CUDA ? "cuda:" : "cpu:") + std::to_string(u->device_index);
    };
    bad(arg, "expected the device of x (" + dev(x) + "), got " + dev(t));
  }
}

// Byte range [lo, hi) spanned by a tensor; empty when it has no elements.
struct Span { uintptr_t lo = 0, hi = 0; };
Span span_of(const TensorRef& t, int ndim) {
  Span s;
  if (!t.present()) return s;
  int64_t last = 0;
  for (int i = 0; i < ndim; ++i) {
    if (t.shape[i] == 0) return s;
    last += (t.shape[i] - 1) * t.strides[i];
  }
  s.lo = reinterpret_cast<uintptr_t>(t.data);
  s.hi = s.lo + static_cast<uintptr_t>(last + 1) * elem_size(t.dtype);
  return s;
}
bool overlaps(Span a, Span b) { return a.lo < a.hi && b.lo < b.hi && a.lo < b.hi && b.lo < a.hi; }

}  // namespace

FwdProblem validate_fwd(const cc1d_fwd_args* a) {
  if (a == nullptr) fail(CC1D_ERR_NULL_POINTER, std::string(kWhere) + ": args is NULL");
  if (a->struct_size < sizeof(cc1d_fwd_args))
    fail(CC1D_ERR_INVALID_ARGUMENT, std::string(kWhere) + ": args->struct_size is " +
         std::to_string(a->struct_size) + ", expected " + std::to_string(sizeof(cc1d_fwd_args)) +
         " (set it to sizeof(cc1d_fwd_args))");
  if (!a->x) bad("x", "is required but NULL", CC1D_ERR_NULL_POINTER);
  if (!a->weight) bad("weight", "is required but NULL", CC1D_ERR_NULL_POINTER);
  if (!a->out) bad("out", "is required but NULL", CC1D_ERR_NULL_POINTER);

  FwdProblem p;
  const int64_t any3[3] = {-1, -1, -1};
  p.x = check_tensor(a->x, "x", 3, any3, "(batch, dim, seqlen)", false);
  check_float_dtype(a->x, "x");
  p.batch = p.x.shape[0];
  p.dim = p.x.shape[1];
  p.seqlen = p.x.shape[2];
  if (p.seqlen < 1) bad("x", "seqlen (x.shape[2]) must be >= 1, got " + std::to_string(p.seqlen));
  p.x_dtype = p.x.dtype;
  p.device_type = static_cast<cc1d_device_type>(a->x->device_type);
  p.device_index = a->x->device_index;
  const std::string dim_s = std::to_string(p.dim);

  const int64_t wshape[2] = {p.dim, -1};
  p.weight = check_tensor(a->weight, "weight", 2, wshape, "(dim=" + dim_s + ", width)", false);
  check_float_dtype(a->weight, "weight");
  check_same_device(a->weight, "weight", a->x);
  p.w_dtype = p.weight.dtype;
  if (p.weight.shape[1] < 1 || p.weight.shape[1] > CC1D_MAX_WIDTH)
    bad("weight", "width (weight.shape[1]) must be in 1.." + std::to_string(CC1D_MAX_WIDTH) +
                      ", got " + std::to_string(p.weight.shape[1]));
  p.width = static_cast<int>(p.weight.shape[1]);
  const std::string states_s = "(batch=" + std::to_string(p.batch) + ", dim=" + dim_s +
                               ", width-1=" + std::to_string(p.width - 1) + ")";
  const int64_t sshape[3] = {p.batch, p.dim, p.width - 1};

  if (a->bias) {
    const int64_t bshape[1] = {p.dim};
    p.bias = check_tensor(a->bias, "bias", 1, bshape, "(dim=" + dim_s + ",)", false);
    check_dtype(a->bias, "bias", p.w_dtype, "bias must have weight's dtype");
    check_same_device(a->bias, "bias", a->x);
  }
  if (a->seq_idx) {
    const int64_t qshape[2] = {p.batch, p.seqlen};
    p.seq_idx = check_tensor(a->seq_idx, "seq_idx", 2, qshape,
                             "(batch=" + std::to_string(p.batch) + ", seqlen=" + std::to_string(p.seqlen) + ")", false);
    check_dtype(a->seq_idx, "seq_idx", CC1D_INT32, "segment ids");
    check_same_device(a->seq_idx, "seq_idx", a->x);
  }
  if (a->initial_states) {
    p.initial_states = check_tensor(a->initial_states, "initial_states", 3, sshape, states_s, false);
    check_dtype(a->initial_states, "initial_states", p.x_dtype, "states have x's dtype");
    check_same_device(a->initial_states, "initial_states", a->x);
  }
  const int64_t oshape[3] = {p.batch, p.dim, p.seqlen};
  p.out = check_tensor(a->out, "out", 3, oshape,
                       "(batch=" + std::to_string(p.batch) + ", dim=" + dim_s + ", seqlen=" + std::to_string(p.seqlen) + ") like x",
                       true);
  check_dtype(a->out, "out", p.x_dtype, "out has x's dtype");
  check_same_device(a->out, "out", a->x);
  if (a->final_states) {
    p.final_states = check_tensor(a->final_states, "final_states", 3, sshape, states_s, true);
    check_dtype(a->final_states, "final_states", p.x_dtype, "states have x's dtype");
    check_same_device(a->final_states, "final_states", a->x);
  }
  if (a->activation != CC1D_ACT_NONE && a->activation != CC1D_ACT_SILU)
    bad("activation", "expected 0 (none) or 1 (silu), got " + std::to_string(a->activation));
  p.silu = a->activation == CC1D_ACT_SILU;
  if (a->backend < CC1D_BACKEND_AUTO || a->backend > CC1D_BACKEND_EMULATE)
    bad("backend", "expected 0 (auto), 1 (cpu), 2 (nvrtc) or 3 (emulate), got " + std::to_string(a->backend));

  // Outputs are written while inputs are read, so they must not share memory with them.
  const Span out_s = span_of(p.out, 3), fin_s = span_of(p.final_states, 3);
  const struct { const char* name; Span s; } inputs[] = {
      {"x", span_of(p.x, 3)}, {"weight", span_of(p.weight, 2)}, {"bias", span_of(p.bias, 1)},
      {"seq_idx", span_of(p.seq_idx, 2)}, {"initial_states", span_of(p.initial_states, 3)}};
  for (const auto& in : inputs) {
    if (overlaps(out_s, in.s)) bad("out", std::string("overlaps ") + in.name + " in memory; pass a separate output buffer");
    if (overlaps(fin_s, in.s)) bad("final_states", std::string("overlaps ") + in.name + " in memory; pass a separate buffer");
  }
  if (overlaps(out_s, fin_s)) bad("final_states", "overlaps out in memory; pass a separate buffer");
  return p;
}

}  // namespace cc1d
