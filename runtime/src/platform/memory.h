// memory.h — the only place in libcc1d that gives the OS advice about memory.
#pragma once
#include <cstddef>

namespace cc1d {

struct TensorRef;

// Before a CPU kernel writes a large output for the first time: asks Linux to back the whole
// 2 MiB pages inside [data, data + bytes) with transparent huge pages, so first touch takes one
// fault per 2 MiB instead of one per 4 KiB (a freshly allocated output is otherwise capped at a
// few GB/s by page faults). Only where THP is in "madvise" mode (with "always" it is already
// on; with "never" nothing can be done), only for outputs of at least kHugePageMinBytes, and
// not when CAUSAL_CONV1D_CPU_HUGE_PAGES=0. Contents are never changed; a no-op elsewhere.
constexpr size_t kHugePageMinBytes = size_t(8) << 20;
void advise_huge_pages(void* data, size_t bytes);
// The same for the bytes a host tensor spans.
void advise_huge_pages(const TensorRef& t);

}  // namespace cc1d
