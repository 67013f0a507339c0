// fake_link.cpp — the fake libcuda's PTX linker (cuLink*), as the shipped PTX tier uses it: PTX
// in, checked as cuModuleLoadData checks it (target SM, ISA version against the driver), and a
// synthetic cubin out for the current context's SM, defining the PTX's entries. The fault switch
// `link` makes cuLinkAddData refuse the PTX (CUDA_ERROR_INVALID_PTX) with a log, as ptxas would.
#include <cstdint>
#include <cstring>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "fake_api.h"
#include "fake_cubin.h"

namespace fake {

namespace {

struct LinkState {
  int sm = 0;
  char* error_log = nullptr;
  size_t error_log_bytes = 0;
  std::vector<std::string> entries;
  std::string cubin;
};

std::mutex g_link_mu;
std::set<LinkState*> g_links;

bool valid(LinkState* s) {
  std::lock_guard<std::mutex> lock(g_link_mu);
  return g_links.count(s) > 0;
}

void log_error(LinkState* s, const std::string& text) {
  if (s->error_log != nullptr && s->error_log_bytes > 0) {
    std::strncpy(s->error_log, text.c_str(), s->error_log_bytes - 1);
    s->error_log[s->error_log_bytes - 1] = '\0';
  }
}

// The names after each ".entry" of PTX text.
std::vector<std::string> ptx_entries(const std::string& ptx) {
  std::vector<std::string> names;
  for (size_t at = ptx.find(".entry "); at != std::string::npos; at = ptx.find(".entry ", at + 1)) {
    size_t b = at + 7, e = b;
    while (e < ptx.size() && ptx[e] != '(' && ptx[e] != ' ' && ptx[e] != '\n' && ptx[e] != '\t') ++e;
    names.push_back(ptx.substr(b, e - b));
  }
  return names;
}

}  // namespace

}  // namespace fake

using fake::config;
using fake::failed;

FAKE_EXPORT CUresult cuLinkCreate_v2(unsigned n, CUjit_option* options, void** values, CUlinkState* state) {
  if (CUresult r = fake::stub_or_uninit()) return r;
  if (state == nullptr || (n > 0 && (options == nullptr || values == nullptr))) return FAKE_CUDA_ERROR_INVALID_VALUE;
  const int device = fake::current_device();
  if (device < 0) return failed(FAKE_CUDA_ERROR_INVALID_CONTEXT, "cuLinkCreate: no current context");
  auto* s = new fake::LinkState;
  s->sm = config().sms[device];
  for (unsigned i = 0; i < n; ++i) {
    if (options[i] == 5) s->error_log = static_cast<char*>(values[i]);  // CU_JIT_ERROR_LOG_BUFFER
    if (options[i] == 6) s->error_log_bytes = reinterpret_cast<uintptr_t>(values[i]);
  }
  std::lock_guard<std::mutex> lock(fake::g_link_mu);
  fake::g_links.insert(s);
  *state = s;
  return FAKE_CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuLinkAddData_v2(CUlinkState state, int type, void* data, size_t size, const char* /*name*/,
                                      unsigned, CUjit_option*, void**) {
  if (CUresult r = fake::stub_or_uninit()) return r;
  auto* s = static_cast<fake::LinkState*>(state);
  if (!fake::valid(s) || data == nullptr || size == 0) return FAKE_CUDA_ERROR_INVALID_VALUE;
  if (type != 1) return failed(FAKE_CUDA_ERROR_INVALID_VALUE, "cuLinkAddData: the fake links PTX (type 1) only");
  if (static_cast<const char*>(data)[size - 1] != '\0')
    return failed(FAKE_CUDA_ERROR_INVALID_VALUE, "cuLinkAddData: PTX text must end with its NUL, counted in size");
  fake::Image image;
  std::string why;
  CUresult r = fake::read_image(data, &image, &why);
  if (r == FAKE_CUDA_SUCCESS && !image.ptx) r = FAKE_CUDA_ERROR_INVALID_VALUE, why = "cuLinkAddData: not PTX";
  if (r == FAKE_CUDA_SUCCESS) r = fake::check_image_runs(image, s->sm, config().version, &why);
  if (r == FAKE_CUDA_SUCCESS && config().link_fault)
    r = FAKE_CUDA_ERROR_INVALID_PTX, why = "ptxas fatal   : the fake's link fault switch";
  if (r != FAKE_CUDA_SUCCESS) {
    fake::log_error(s, why);
    return failed(r, why);
  }
  for (const std::string& e : fake::ptx_entries(image.bytes)) s->entries.push_back(e);
  return FAKE_CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuLinkComplete(CUlinkState state, void** cubin, size_t* size) {
  if (CUresult r = fake::stub_or_uninit()) return r;
  auto* s = static_cast<fake::LinkState*>(state);
  if (!fake::valid(s) || cubin == nullptr || size == nullptr) return FAKE_CUDA_ERROR_INVALID_VALUE;
  if (s->entries.empty()) return failed(FAKE_CUDA_ERROR_INVALID_VALUE, "cuLinkComplete: nothing was added");
  s->cubin = fake::make_cubin(s->sm, s->entries);
  *cubin = &s->cubin[0];
  *size = s->cubin.size();
  return FAKE_CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuLinkDestroy(CUlinkState state) {
  if (CUresult r = fake::stub_or_uninit()) return r;
  auto* s = static_cast<fake::LinkState*>(state);
  {
    std::lock_guard<std::mutex> lock(fake::g_link_mu);
    if (fake::g_links.erase(s) == 0) return FAKE_CUDA_ERROR_INVALID_HANDLE;
  }
  delete s;
  return FAKE_CUDA_SUCCESS;
}
