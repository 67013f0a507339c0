// huge_pages.h — transparent huge pages for the outputs the cpu backend is about to write.
//
// A fresh output (torch.empty_like of a large tensor is a new mmap each call) is paid for by its
// first writes: one page fault per 4 KiB, which under a hypervisor costs microseconds each (64
// MiB: 43-55 ms to touch on the AMD EPYC VM of bench/RESULTS.md, 9 ms on 2 MiB pages). Where the
// kernel gives huge pages to memory that asks (`madvise` in
// /sys/kernel/mm/transparent_hugepage/enabled, a common default), libcc1d asks for them on the
// whole huge pages of such an output that no page of is resident yet: a buffer already in use
// keeps its pages as they are. The advice changes no data; CAUSAL_CONV1D_HUGEPAGES=0 turns it off.
#pragma once
#include <cstddef>
#include <string>

namespace cc1d {

// This machine's setting for memory that asks: "madvise" (libcc1d asks), "always" (every
// mapping has them already), "never", or "unavailable" (no such setting: not Linux, or no THP).
// Read once.
const std::string& huge_page_mode();

// The size of a huge page (hpage_pmd_size): 2 MiB on x86-64 and on 4 KiB-page Arm kernels, 512
// MiB on the 64 KiB-page kernels of some Arm servers; 2 MiB where sysfs does not say.
size_t huge_page_bytes();

// Whether libcc1d asks: the mode is "madvise" and CAUSAL_CONV1D_HUGEPAGES is not off (read on
// every call).
bool huge_page_advice_on();

// Asks for huge pages on every whole huge page of [p, p + n) that has no resident page, when
// huge_page_advice_on() and the range spans at least two huge pages (a smaller output is not
// worth a system call). Returns the bytes advised. Never fails: a refused request leaves the
// memory as it was.
size_t advise_huge_pages(void* p, size_t n);

}  // namespace cc1d
