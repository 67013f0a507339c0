// report.h — facts the host framework tells us (cc1d_set_torch_info) and the JSON report of
// cc1d_report, composed from every op and every backend's own report.
#pragma once
#include <string>

namespace cc1d {

struct TorchInfo {
  std::string version;       // "" when unknown
  std::string cuda_version;  // torch.version.cuda, "" for CPU-only torch or unknown
  int cxx11_abi = -1;        // 1, 0, or -1 unknown
};

void set_torch_info(const std::string& version, const std::string& cuda_version, int cxx11_abi);
TorchInfo torch_info();

std::string report_json();

}  // namespace cc1d
