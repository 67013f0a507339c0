#include "env_report.h"

#include <cstdio>
#include <mutex>

#include "backend.h"
#include "cc1d/cc1d.h"

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

std::string json_quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string report_json() {
  const TorchInfo t = torch_info();
  std::string j = "{\"version\": " + json_quote(cc1d_version()) +
                  ", \"abi_version\": " + std::to_string(cc1d_abi_version()) +
                  ", \"torch\": {\"version\": " + json_quote(t.version) +
                  ", \"cuda_version\": " + json_quote(t.cuda_version) +
                  ", \"cxx11_abi\": " + std::to_string(t.cxx11_abi) + "}, \"backends\": {";
  for (int id = CC1D_BACKEND_CPU; id <= CC1D_BACKEND_EMULATE; ++id) {
    Backend& b = backend(static_cast<cc1d_backend>(id));
    j += std::string(id == CC1D_BACKEND_CPU ? "" : ", ") + json_quote(b.name()) + ": " + b.report_json();
  }
  return j + "}}";
}

}  // namespace cc1d
