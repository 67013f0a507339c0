// trampoline.h — adapts a host-compiled __global__ function to the emulator's calling
// convention, void(void** args), where args is cuLaunchKernel's kernelParams: one pointer
// per kernel parameter, pointing at that parameter's value.
//
//   __global__ void scale(float* x, float a, int n);
//   void (*fn)(void**) = cc1d::emu::trampoline<&scale>;   // usable in emu::Launch::fn
#pragma once
#include <cstddef>
#include <type_traits>
#include <utility>

namespace cc1d {
namespace emu {

template <typename... A, size_t... I>
inline void call_with_params(void (*kernel)(A...), void** args, std::index_sequence<I...>) {
  kernel(*static_cast<std::remove_cv_t<std::remove_reference_t<A>>*>(args[I])...);
}

template <typename F>
struct KernelArity;
template <typename... A>
struct KernelArity<void (*)(A...)> {
  static constexpr size_t value = sizeof...(A);
};

template <auto Kernel>
void trampoline(void** args) {
  call_with_params(Kernel, args, std::make_index_sequence<KernelArity<decltype(Kernel)>::value>{});
}

}  // namespace emu
}  // namespace cc1d
