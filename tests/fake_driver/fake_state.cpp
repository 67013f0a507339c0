// fake_state.cpp — configuration, counters and test hooks of the fake libcuda.
#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>
#include <vector>

#include "fake_state.h"

namespace fake {

namespace {

std::mutex g_mu;
Config g_config;
bool g_config_read = false;
std::atomic<bool> g_initialized{false};
std::string g_last_error;
cc1d_fake_launch g_last_launch;
bool g_have_launch = false;
std::map<std::string, long> g_proc_requests;
std::vector<std::string> g_proc_order;  // distinct names, first asked first

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

std::vector<std::string> split(const char* list) {
  std::vector<std::string> items;
  std::stringstream ss(list);
  std::string item;
  while (std::getline(ss, item, ',')) items.push_back(item);
  return items;
}

Config parse_env() {
  Config c;
  // CC1D_FAKE_DEVICES ("90,80": one SM per device, "" none) takes precedence, so one variable
  // describes a mixed machine; otherwise CC1D_FAKE_DEVICE_COUNT devices of CC1D_FAKE_SM.
  c.sms.clear();
  if (const char* list = std::getenv("CC1D_FAKE_DEVICES")) {
    for (const std::string& sm : split(list))
      if (!sm.empty()) c.sms.push_back(std::atoi(sm.c_str()));
  } else {
    c.sms.assign(std::max(0, env_int("CC1D_FAKE_DEVICE_COUNT", 1)), env_int("CC1D_FAKE_SM", 90));
  }
  if (c.sms.size() > static_cast<size_t>(kMaxDevices)) c.sms.resize(kMaxDevices);
  c.version = env_int("CC1D_FAKE_DRIVER_VERSION", 13000);
  c.sm_count = env_int("CC1D_FAKE_SM_COUNT", 132);
  c.blocks_per_sm = env_int("CC1D_FAKE_BLOCKS_PER_SM", 8);
  c.memory_mib = env_int("CC1D_FAKE_MEMORY_MIB", 81559);
  c.init_result = env_int("CC1D_FAKE_INIT_RESULT", 0);
  c.launch_result = env_int("CC1D_FAKE_LAUNCH_RESULT", 0);
  c.execute = env_int("CC1D_FAKE_EXECUTE", 1) != 0;
  if (const char* f = std::getenv("CC1D_FAKE_FAULT")) {
    // no_device and launch are shorthands for the result variables (which win when both are set).
    for (const std::string& item : split(f)) {
      if (item == "no_device" && c.init_result == 0) c.init_result = FAKE_CUDA_ERROR_NO_DEVICE;
      else if (item == "stub") c.stub = true;
      else if (item == "module_load") c.module_load_fault = true;
      else if (item == "link") c.link_fault = true;
      else if (item == "launch" && c.launch_result == 0) c.launch_result = FAKE_CUDA_ERROR_LAUNCH_FAILED;
    }
  }
  return c;
}

}  // namespace

const Config& config() {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_config_read) {
    g_config = parse_env();
    g_config_read = true;
  }
  return g_config;
}

void read_config() {
  std::lock_guard<std::mutex> lock(g_mu);
  g_config = parse_env();
  g_config_read = true;
}

Counters& counters() {
  static Counters c;
  return c;
}

CUresult failed(CUresult code, const std::string& why) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_last_error = why;
  return code;
}

bool initialized() { return g_initialized.load(); }
void set_initialized(bool v) { g_initialized = v; }

void record_launch(const cc1d_fake_launch& launch) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_last_launch = launch;
  g_have_launch = true;
}

void record_proc_request(const char* symbol) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (g_proc_requests[symbol]++ == 0) g_proc_order.push_back(symbol);
}

}  // namespace fake

FAKE_EXPORT void cc1d_fake_get_counters(cc1d_fake_counters* out) {
  if (out == nullptr) return;
  const fake::Counters& c = fake::counters();
  out->init = c.init;
  out->get_proc_address = c.get_proc_address;
  out->ctx_retain = c.ctx_retain;
  out->ctx_release = c.ctx_release;
  out->ctx_push = c.ctx_push;
  out->ctx_pop = c.ctx_pop;
  out->module_load = c.module_load;
  out->module_unload = c.module_unload;
  out->get_function = c.get_function;
  out->launch = c.launch;
  out->mem_alloc = c.mem_alloc;
  out->mem_free = c.mem_free;
  out->memcpy = c.memcpy;
  out->memset = c.memset;
  out->synchronize = c.synchronize;
  out->get_proc_address_v2 = c.get_proc_address_v2;
  out->proc_not_found = c.proc_not_found;
  out->ptx_loads = c.ptx_loads;
}

FAKE_EXPORT void cc1d_fake_reset_counters(void) {
  fake::Counters& c = fake::counters();
  for (std::atomic<long>* a : {&c.init, &c.get_proc_address, &c.ctx_retain, &c.ctx_release, &c.ctx_push, &c.ctx_pop,
                               &c.module_load, &c.module_unload, &c.get_function, &c.launch, &c.mem_alloc, &c.mem_free,
                               &c.memcpy, &c.memset, &c.synchronize, &c.get_proc_address_v2, &c.proc_not_found,
                               &c.ptx_loads})
    *a = 0;
  std::lock_guard<std::mutex> lock(fake::g_mu);
  fake::g_proc_requests.clear();
  fake::g_proc_order.clear();
}

FAKE_EXPORT int cc1d_fake_last_launch(cc1d_fake_launch* out) {
  std::lock_guard<std::mutex> lock(fake::g_mu);
  if (!fake::g_have_launch) return 0;
  if (out != nullptr) *out = fake::g_last_launch;
  return 1;
}

FAKE_EXPORT long cc1d_fake_proc_requests(const char* symbol) {
  std::lock_guard<std::mutex> lock(fake::g_mu);
  if (symbol == nullptr) return static_cast<long>(fake::g_proc_order.size());
  auto it = fake::g_proc_requests.find(symbol);
  return it == fake::g_proc_requests.end() ? 0 : it->second;
}

FAKE_EXPORT const char* cc1d_fake_requested_proc(int i) {
  thread_local std::string copy;  // valid until this thread's next call, whatever others do
  std::lock_guard<std::mutex> lock(fake::g_mu);
  if (i < 0 || static_cast<size_t>(i) >= fake::g_proc_order.size()) return nullptr;
  copy = fake::g_proc_order[static_cast<size_t>(i)];
  return copy.c_str();
}

FAKE_EXPORT const char* cc1d_fake_last_error(void) {
  // Copied per thread, so the pointer stays valid while other threads fail.
  thread_local std::string copy;
  std::lock_guard<std::mutex> lock(fake::g_mu);
  copy = fake::g_last_error;
  return copy.c_str();
}

FAKE_EXPORT void cc1d_fake_reconfigure(void) {
  fake::read_config();
  fake::set_initialized(false);  // as after a fresh load: cuInit must be called again
}
