// fake_state.cpp — configuration, counters and test hooks of the fake libcuda.
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <sstream>

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

int env_int(const char* name, int fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? std::atoi(v) : fallback;
}

Config parse_env() {
  Config c;
  c.sm = env_int("CC1D_FAKE_SM", 90);
  c.devices = env_int("CC1D_FAKE_DEVICE_COUNT", 1);
  c.version = env_int("CC1D_FAKE_DRIVER_VERSION", 13000);
  c.sm_count = env_int("CC1D_FAKE_SM_COUNT", 132);
  if (const char* f = std::getenv("CC1D_FAKE_FAULT")) {
    std::stringstream ss(f);
    std::string item;
    while (std::getline(ss, item, ',')) {
      if (item == "no_device") c.no_device = true;
      else if (item == "stub") c.stub = true;
      else if (item == "module_load") c.module_load_fault = true;
      else if (item == "launch") c.launch_fault = true;
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
}

FAKE_EXPORT void cc1d_fake_reset_counters(void) {
  fake::Counters& c = fake::counters();
  for (std::atomic<long>* a : {&c.init, &c.get_proc_address, &c.ctx_retain, &c.ctx_release, &c.ctx_push, &c.ctx_pop,
                               &c.module_load, &c.module_unload, &c.get_function, &c.launch, &c.mem_alloc, &c.mem_free,
                               &c.memcpy, &c.memset, &c.synchronize})
    *a = 0;
}

FAKE_EXPORT int cc1d_fake_last_launch(cc1d_fake_launch* out) {
  std::lock_guard<std::mutex> lock(fake::g_mu);
  if (!fake::g_have_launch) return 0;
  if (out != nullptr) *out = fake::g_last_launch;
  return 1;
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
