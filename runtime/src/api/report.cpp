#include "api/report.h"

#include <mutex>

#include "backends/backend.h"
#include "cc1d/cc1d.h"
#include "core/json.h"
#include "ops/op.h"

namespace cc1d {

namespace {
std::mutex g_mu;
TorchInfo g_torch;
}  // namespace

void set_torch_info(const std::string& version, const std::string& cuda_version, int cxx11_abi) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_torch = TorchInfo{version, cuda_version, cxx11_abi < 0 ? -1 : (cxx11_abi ? 1 : 0)};
}

TorchInfo torch_info() {
  std::lock_guard<std::mutex> lock(g_mu);
  return g_torch;
}

std::string report_json() {
  const TorchInfo t = torch_info();
  std::string j = "{\"version\": " + json_quote(cc1d_version()) +
                  ", \"abi_version\": " + std::to_string(cc1d_abi_version()) +
                  ", \"torch\": {\"version\": " + json_quote(t.version) +
                  ", \"cuda_version\": " + json_quote(t.cuda_version) +
                  ", \"cxx11_abi\": " + std::to_string(t.cxx11_abi) + "}, \"ops\": [";
  bool first = true;
  for (const OpEntry* op : all_ops()) {
    j += std::string(first ? "" : ", ") + "{\"name\": " + json_quote(op->name) +
         ", \"cpu\": " + (op->cpu ? "true" : "false") + ", \"kernels\": " +
         std::to_string(op->kernels ? op->kernels().size() : 0) + "}";
    first = false;
  }
  j += "], \"backends\": {";
  first = true;
  for (const BackendInfo& b : backend_list()) {
    if (b.make == nullptr) continue;
    j += std::string(first ? "" : ", ") + json_quote(b.name) + ": " + backend(b.id).report_json();
    first = false;
  }
  return j + "}}";
}

}  // namespace cc1d
