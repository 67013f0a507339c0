#include "platform/memory.h"

#include <cstdint>
#include <fstream>
#include <string>

#include "core/env.h"
#include "core/log.h"
#include "core/tensor.h"

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace cc1d {

#if defined(__linux__) && defined(MADV_HUGEPAGE)
namespace {
// Whether THP serves regions only on request: the mode is the bracketed word of this file.
bool thp_on_request() {
  static const bool madvise_mode = [] {
    std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
    std::string modes;
    std::getline(f, modes);
    return modes.find("[madvise]") != std::string::npos;
  }();
  return madvise_mode;
}
}  // namespace

void advise_huge_pages(void* data, size_t bytes) {
  constexpr uintptr_t kHuge = uintptr_t(2) << 20;
  if (bytes < kHugePageMinBytes || !thp_on_request() || !env_flag("CAUSAL_CONV1D_CPU_HUGE_PAGES", true)) return;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(data) + bytes) & ~(kHuge - 1);
  // Advice only: a refusal (an old kernel, a mapping it does not apply to) changes nothing.
  if (end > begin && madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE) != 0)
    logger().debug("madvise(MADV_HUGEPAGE) refused for a {}-byte output; it is written with small pages", bytes);
}
#else
void advise_huge_pages(void*, size_t) {}
#endif

void advise_huge_pages(const TensorRef& t) {
  ByteSpan s;
  if (t.present() && byte_span(t, &s) && !s.empty()) advise_huge_pages(reinterpret_cast<void*>(s.lo), s.hi - s.lo);
}

}  // namespace cc1d
