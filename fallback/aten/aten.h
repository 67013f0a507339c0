// aten.h — ATen ops called through the torch dispatcher, spelled once for either libtorch C++ API:
// the stable ABI (torch/csrc/stable, when CC1D_TORCH_STABLE is 1: one build runs on every newer
// libtorch) or the classic ATen API (older torch). The ATen reference (fallback/aten/) and the
// libtorch op library (cc1d_torch/) are written against this header only.
//
//   call("aten::mul", "Tensor", a, b)   runs aten::mul.Tensor(a, b) and returns its first output
//
// Arguments are boxed as the op's schema expects: Tensor, int, bool, std::vector<int64_t>,
// std::vector<Tensor>, ScalarType; an optional (`T?`) argument as std::optional<T> (the stable ABI
// boxes optionals differently), or None when absent. Every argument of the schema is passed,
// defaults included (the boxed convention has no defaults). Ops with Scalar arguments are avoided:
// the stable ABI does not box them.
#pragma once
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#if CC1D_TORCH_STABLE
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/ScalarType.h>
#else
#include <ATen/core/Tensor.h>
#include <ATen/core/dispatch/Dispatcher.h>
#endif

namespace cc1d::aten {

#if CC1D_TORCH_STABLE
using Tensor = torch::stable::Tensor;
using ScalarType = torch::headeronly::ScalarType;
using OptTensor = std::optional<Tensor>;
using Str = std::string;  // a `str` argument of an op's kernel
#else
using Tensor = at::Tensor;
using ScalarType = c10::ScalarType;
using OptTensor = c10::optional<Tensor>;  // std::optional from torch 2.4 on, its own class before
using Str = c10::string_view;             // a `str` argument of an op's kernel
#endif

struct None {};  // an absent optional argument
constexpr None none{};

enum class Place { Cpu, Cuda, Other };

#if CC1D_TORCH_STABLE
inline StableIValue box(const Tensor& t) { return torch::stable::detail::from(t); }
inline StableIValue box(None) { return torch::stable::detail::from(std::nullopt); }
inline StableIValue box(const OptTensor& t) { return torch::stable::detail::from(t); }
inline StableIValue box(int64_t v) { return torch::stable::detail::from(v); }
inline StableIValue box(int v) { return box(static_cast<int64_t>(v)); }
inline StableIValue box(bool v) { return torch::stable::detail::from(v); }
inline StableIValue box(ScalarType v) { return torch::stable::detail::from(v); }
inline StableIValue box(const std::vector<int64_t>& v) { return torch::stable::detail::from(v); }
inline StableIValue box(const std::vector<Tensor>& v) { return torch::stable::detail::from(v); }
template <class T>
StableIValue box(const std::optional<T>& v) {
  return torch::stable::detail::from(v);
}

template <class... A>
Tensor call(const char* op, const char* overload, const A&... args) {
  StableIValue stack[sizeof...(A) > 0 ? sizeof...(A) : 1] = {box(args)...};
  STABLE_TORCH_ERROR_CODE_CHECK(torch_call_dispatcher(op, overload, stack, TORCH_ABI_VERSION));
  return torch::stable::detail::to<Tensor>(stack[0]);
}

inline int device_index(const Tensor& t) { return t.is_cpu() ? 0 : t.get_device_index(); }
inline Tensor to_cpu(const Tensor& t) {
  return torch::stable::to(t, torch::stable::Device(torch::headeronly::DeviceType::CPU));
}
#else
inline c10::IValue box(const Tensor& t) { return c10::IValue(t); }
inline c10::IValue box(None) { return c10::IValue(); }
inline c10::IValue box(const OptTensor& t) { return t ? c10::IValue(*t) : c10::IValue(); }
inline c10::IValue box(int64_t v) { return c10::IValue(v); }
inline c10::IValue box(int v) { return box(static_cast<int64_t>(v)); }
inline c10::IValue box(bool v) { return c10::IValue(v); }
inline c10::IValue box(ScalarType v) { return c10::IValue(v); }
inline c10::IValue box(const std::vector<int64_t>& v) { return c10::IValue(v); }
inline c10::IValue box(const std::vector<Tensor>& v) { return c10::IValue(v); }
template <class T>
c10::IValue box(const std::optional<T>& v) {
  return v ? box(*v) : c10::IValue();
}

template <class... A>
Tensor call(const char* op, const char* overload, const A&... args) {
  std::vector<c10::IValue> stack{box(args)...};
  c10::Dispatcher::singleton().findSchemaOrThrow(op, overload).callBoxed(&stack);
  return stack.at(0).toTensor();
}

inline int device_index(const Tensor& t) { return t.is_cpu() ? 0 : static_cast<int>(t.get_device()); }
inline Tensor to_cpu(const Tensor& t) { return t.cpu(); }
#endif

inline Place place(const Tensor& t) { return t.is_cpu() ? Place::Cpu : t.is_cuda() ? Place::Cuda : Place::Other; }

[[noreturn]] inline void raise(const std::string& message) { throw std::runtime_error(message); }

// ---- the ops the reference and the op library use -----------------------------------------
inline Tensor to(const Tensor& t, ScalarType dtype) {
  return call("aten::to", "dtype", t, dtype, false, false, none);
}
inline Tensor narrow(const Tensor& t, int64_t dim, int64_t start, int64_t length) {
  return call("aten::narrow", "", t, dim, start, length);
}
inline Tensor select(const Tensor& t, int64_t dim, int64_t index) { return call("aten::select", "int", t, dim, index); }
inline Tensor unsqueeze(const Tensor& t, int64_t dim) { return call("aten::unsqueeze", "", t, dim); }
inline Tensor squeeze(const Tensor& t, int64_t dim) { return call("aten::squeeze", "dim", t, dim); }
inline Tensor transpose(const Tensor& t, int64_t a, int64_t b) { return call("aten::transpose", "int", t, a, b); }
inline Tensor expand(const Tensor& t, const std::vector<int64_t>& size) {
  return call("aten::expand", "", t, size, false);
}
inline Tensor cat(const std::vector<Tensor>& ts, int64_t dim) { return call("aten::cat", "", ts, dim); }
inline Tensor stack(const std::vector<Tensor>& ts, int64_t dim) { return call("aten::stack", "", ts, dim); }
inline Tensor sum(const Tensor& t, int64_t dim) {
  return call("aten::sum", "dim_IntList", t, std::make_optional(std::vector<int64_t>{dim}), false, none);
}
inline Tensor sum(const Tensor& t, const std::vector<int64_t>& dims) {
  return call("aten::sum", "dim_IntList", t, std::make_optional(dims), false, none);
}
inline Tensor mul(const Tensor& a, const Tensor& b) { return call("aten::mul", "Tensor", a, b); }
inline Tensor eq(const Tensor& a, const Tensor& b) { return call("aten::eq", "Tensor", a, b); }
inline Tensor ge(const Tensor& a, const Tensor& b) { return call("aten::ge", "Tensor", a, b); }
inline Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  return call("aten::where", "self", cond, a, b);
}
inline Tensor silu(const Tensor& t) { return call("aten::silu", "", t); }
// grad * silu'(t): the backward of silu, written by ATen (no Scalar arguments, unlike add/sub).
inline Tensor silu_backward(const Tensor& grad, const Tensor& t) { return call("aten::silu_backward", "", grad, t); }
inline Tensor new_zeros(const Tensor& like, const std::vector<int64_t>& size, ScalarType dtype) {
  return call("aten::new_zeros", "", like, size, std::optional<ScalarType>(dtype), none, none, none);
}
inline Tensor new_empty(const Tensor& like, const std::vector<int64_t>& size) {
  return call("aten::new_empty", "", like, size, none, none, none, none);
}
inline Tensor new_empty(const Tensor& like, const std::vector<int64_t>& size, ScalarType dtype) {
  return call("aten::new_empty", "", like, size, std::optional<ScalarType>(dtype), none, none, none);
}
inline Tensor empty_like(const Tensor& t) {  // t's layout when dense (preserve_format)
  return call("aten::empty_like", "", t, none, none, none, none, none);
}
inline void copy_(const Tensor& dst, const Tensor& src) { call("aten::copy_", "", dst, src, false); }
inline void zero_(const Tensor& t) { call("aten::zero_", "", t); }

// The values of a small integer tensor (indices, lengths), read on the host.
std::vector<int64_t> host_ints(const Tensor& t);

}  // namespace cc1d::aten
