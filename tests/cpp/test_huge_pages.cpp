// Huge pages for fresh outputs (platform/huge_pages.h): what is advised, what is left alone, and
// that a forward through the cpu backend into a fresh mapping (the advised path) writes the same
// bits as into a NaN-poisoned buffer, which it must overwrite element by element.
#include <doctest/doctest.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <string>

#include "platform/huge_pages.h"
#include "test_support.h"

using namespace cc1d_test;

namespace {

// The machine's sizes, as libcc1d reads them: 2 MiB and 4 KiB on x86-64, 512 MiB and 64 KiB on
// some Arm servers.
const size_t kHuge = cc1d::huge_page_bytes();
const size_t kPage = static_cast<size_t>(sysconf(_SC_PAGESIZE));

// A fresh anonymous mapping (no page resident) of n bytes starting on a huge page's boundary.
struct Fresh {
  void* map = nullptr;
  size_t len = 0;
  unsigned char* p = nullptr;
  explicit Fresh(size_t n) : len(n + kHuge) {
    map = mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    REQUIRE(map != MAP_FAILED);
    p = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(map) + kHuge - 1) & ~(kHuge - 1));
  }
  ~Fresh() { munmap(map, len); }
};

// Whether the mapping holding address p carries MADV_HUGEPAGE ("hg" in its VmFlags).
bool advised(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  const uintptr_t a = reinterpret_cast<uintptr_t>(p);
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') inside = lo <= a && a < hi;
    if (inside && line.rfind("VmFlags:", 0) == 0) return (line + " ").find(" hg ") != std::string::npos;
  }
  return false;
}

bool asks() { return cc1d::huge_page_mode() == "madvise"; }

}  // namespace

TEST_CASE("the machine's huge page mode is one of the sysfs words") {
  const std::string& m = cc1d::huge_page_mode();
  MESSAGE("transparent huge pages: " << m);
  CHECK((m == "madvise" || m == "always" || m == "never" || m == "unavailable"));
}

TEST_CASE("untouched whole huge pages are advised where the mode is madvise; resident ones are not") {
  unsetenv("CAUSAL_CONV1D_HUGEPAGES");
  {
    Fresh f(8 * kHuge);
    // One byte before the first boundary and a partial page after the last: only whole pages count.
    CHECK(cc1d::advise_huge_pages(f.p - 1, 8 * kHuge + kPage) == (asks() ? 8 * kHuge : 0));
    CHECK(advised(f.p) == asks());
  }
  {
    Fresh f(8 * kHuge);
    f.p[kHuge + kPage] = 1;  // one resident page in the second huge page
    CHECK(cc1d::advise_huge_pages(f.p, 8 * kHuge) == (asks() ? 7 * kHuge : 0));
    CHECK(advised(f.p) == asks());
    CHECK_FALSE(advised(f.p + kHuge));
    CHECK(advised(f.p + 2 * kHuge) == asks());
  }
  {
    Fresh f(8 * kHuge);
    for (size_t at = 0; at < 8 * kHuge; at += kHuge) f.p[at] = 1;  // in use: each huge page holds a resident page
    CHECK(cc1d::advise_huge_pages(f.p, 8 * kHuge) == 0);
    CHECK_FALSE(advised(f.p));
  }
  {
    Fresh f(2 * kHuge);  // under two huge pages: not worth a system call
    CHECK(cc1d::advise_huge_pages(f.p, 2 * kHuge - 1) == 0);
    CHECK_FALSE(advised(f.p));
  }
}

TEST_CASE("CAUSAL_CONV1D_HUGEPAGES=0 turns the advice off") {
  Fresh f(8 * kHuge);
  setenv("CAUSAL_CONV1D_HUGEPAGES", "0", 1);
  CHECK_FALSE(cc1d::huge_page_advice_on());
  CHECK(cc1d::advise_huge_pages(f.p, 8 * kHuge) == 0);
  CHECK_FALSE(advised(f.p));
  setenv("CAUSAL_CONV1D_HUGEPAGES", "1", 1);
  CHECK(cc1d::huge_page_advice_on() == asks());
  CHECK(cc1d::advise_huge_pages(f.p, 8 * kHuge) == (asks() ? 8 * kHuge : 0));
  unsetenv("CAUSAL_CONV1D_HUGEPAGES");
}

TEST_CASE("a forward into a fresh mapping writes the same bits as into a poisoned buffer") {
  unsetenv("CAUSAL_CONV1D_HUGEPAGES");
  std::mt19937 rng = test_rng(131);
  const int64_t B = 2, D = 64, L = 16384 + 5;  // out: 8 MiB and a little of fp32
  for (Layout layout : {Layout::ChannelFirst, Layout::ChannelLast}) {
    INFO(layout_name(layout));
    HostTensor x = make_x(CC1D_FLOAT32, B, D, L, layout);
    x.randomize(rng);
    HostTensor w = HostTensor::contiguous(CC1D_FLOAT32, {D, 4});
    w.randomize(rng, 0.5);
    HostTensor bias = HostTensor::contiguous(CC1D_FLOAT32, {D});
    bias.randomize(rng);
    HostTensor poisoned = make_x(CC1D_FLOAT32, B, D, L, layout);
    poisoned.fill_all(NAN);
    const size_t bytes = poisoned.storage.size();
    Fresh f(bytes);
    cc1d_tensor fresh = poisoned.t;
    fresh.data = f.p;
    cc1d_fwd_args a{};
    a.struct_size = sizeof a;
    a.x = &x.t;
    a.weight = &w.t;
    a.bias = &bias.t;
    a.activation = CC1D_ACT_SILU;
    a.backend = CC1D_BACKEND_CPU;
    a.out = &fresh;
    REQUIRE_MESSAGE(cc1d_causal_conv1d_fwd(&a) == CC1D_OK, cc1d_last_error());
    CHECK(advised(f.p) == (asks() && bytes >= 2 * kHuge));  // 512 MiB huge pages: too small to ask
    a.out = &poisoned.t;
    REQUIRE_MESSAGE(cc1d_causal_conv1d_fwd(&a) == CC1D_OK, cc1d_last_error());
    CHECK(std::memcmp(f.p, poisoned.storage.data(), bytes) == 0);
    const std::string diff = reference_diff(poisoned, x, w, &bias, true);
    CHECK_MESSAGE(diff == "", diff);
  }
}
