#include "platform/huge_pages.h"

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <vector>

#include "core/env.h"

#ifdef __linux__
#include <sys/mman.h>
#include <unistd.h>
#endif

namespace cc1d {

namespace {

constexpr const char* kSysfs = "/sys/kernel/mm/transparent_hugepage/";

// The bracketed word of a sysfs choice list: "always [madvise] never" -> "madvise".
std::string chosen(const std::string& line) {
  const size_t a = line.find('['), b = line.find(']');
  return a != std::string::npos && b != std::string::npos && b > a ? line.substr(a + 1, b - a - 1) : "";
}

}  // namespace

size_t huge_page_bytes() {
  static const size_t bytes = [] {
    std::ifstream f(std::string(kSysfs) + "hpage_pmd_size");
    size_t v = 0;
    return f >> v && v > 0 && (v & (v - 1)) == 0 ? v : size_t(2) << 20;
  }();
  return bytes;
}

const std::string& huge_page_mode() {
  static const std::string mode = [] {
#ifdef __linux__
    std::ifstream f(std::string(kSysfs) + "enabled");
    std::string line;
    const std::string m = std::getline(f, line) ? chosen(line) : "";
    return m.empty() ? std::string("unavailable") : m;
#else
    return std::string("unavailable");
#endif
  }();
  return mode;
}

bool huge_page_advice_on() {
  return huge_page_mode() == "madvise" &&
         (std::getenv("CAUSAL_CONV1D_HUGEPAGES") == nullptr || env_flag("CAUSAL_CONV1D_HUGEPAGES"));
}

size_t advise_huge_pages(void* p, size_t n) {
#ifdef __linux__
  const size_t hp = huge_page_bytes();
  if (n < 2 * hp || !huge_page_advice_on()) return 0;
  const uintptr_t lo = (reinterpret_cast<uintptr_t>(p) + hp - 1) & ~(hp - 1);
  const uintptr_t hi = (reinterpret_cast<uintptr_t>(p) + n) & ~(hp - 1);  // n >= 2 hp: at least one whole page
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> resident((hi - lo) / page);
  if (mincore(reinterpret_cast<void*>(lo), hi - lo, resident.data()) != 0) return 0;
  // Runs of whole huge pages with no resident page, one madvise each.
  size_t advised = 0;
  const size_t per = hp / page;
  uintptr_t run = 0;  // start of the current run, 0: none
  for (uintptr_t at = lo; at <= hi; at += hp) {
    bool fresh = at < hi;
    for (size_t i = 0; fresh && i < per; ++i) fresh = !(resident[(at - lo) / page + i] & 1);
    if (fresh && run == 0) run = at;
    if (!fresh && run != 0) {
      if (madvise(reinterpret_cast<void*>(run), at - run, MADV_HUGEPAGE) == 0) advised += at - run;
      run = 0;
    }
  }
  return advised;
#else
  (void)p, (void)n;
  return 0;
#endif
}

}  // namespace cc1d
