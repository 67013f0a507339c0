// cpu_backend.cpp — the `cpu` backend: each op's native CPU implementation (fallback/cpu/),
// multi-threaded on host memory.
#include "backends/backend.h"
#include "fallback/cpu/simd.h"
#include "fallback/cpu/thread_pool.h"
#include "platform/cpu_cache.h"
#include "platform/huge_pages.h"

namespace cc1d {

namespace {

class CpuBackend final : public Backend {
 public:
  cc1d_backend id() const override { return CC1D_BACKEND_CPU; }

  std::string unavailable_reason(const OpEntry& op, cc1d_device_type type, int) override {
    if (op.cpu == nullptr) return std::string("the cpu backend has no implementation of op '") + op.name + "'";
    if (type != CC1D_DEVICE_CPU)
      return "the cpu backend reads host memory only, and these tensors are on a CUDA device; copy them to the "
             "host, or use the nvrtc backend";
    return "";
  }

  // A fresh output's first writes are a page fault per 4 KiB (platform/huge_pages.h).
  void run(const OpEntry& op, const Problem& problem, void*) override {
    for (int i = 0; i < problem.noutputs; ++i) {
      const ByteSpan& s = problem.outputs[i];
      if (!s.empty()) advise_huge_pages(reinterpret_cast<void*>(s.lo), s.hi - s.lo);
    }
    op.cpu(problem);
  }

  std::string report_json() override {
    return "{\"compiled_in\": true, \"available\": true, \"threads\": " + std::to_string(num_threads()) +
           ", \"simd\": \"" + simd().name + "\", \"simd_floats\": " + std::to_string(simd().width) +
           ", \"huge_pages\": \"" + huge_page_mode() +
           "\", \"huge_page_advice\": " + (huge_page_advice_on() ? "true" : "false") +
           ", \"last_level_cache_bytes\": " + std::to_string(last_level_cache_bytes()) + "}";
  }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace cc1d
