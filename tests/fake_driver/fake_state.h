// fake_state.h — shared state of the fake libcuda (tests/fake_driver/): configuration from the
// environment, counters, contexts, and the image checks. Internal to the fake.
#pragma once
#include <atomic>
#include <cstddef>
#include <string>
#include <vector>

#include "fake_cuda.h"

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace fake {

using CUresult = int;

constexpr int kMaxDevices = 64;

struct Config {
  std::vector<int> sms{90};  // one SM per device (CC1D_FAKE_DEVICES, else CC1D_FAKE_SM x COUNT)
  int version = 13000;
  int sm_count = 132;
  int blocks_per_sm = 8;  // cuOccupancyMaxActiveBlocksPerMultiprocessor's answer (< 0: it fails)
  long long memory_mib = 81559;  // cuDeviceTotalMem, in MiB (an 80 GB part)
  int init_result = 0;       // cuInit fails with it when not 0 (the no_device fault: 100)
  int launch_result = 0;     // cuLaunchKernel fails with it when not 0 (the launch fault: 719)
  bool stub = false;
  bool module_load_fault = false;
  bool link_fault = false;   // cuLinkAddData refuses the PTX (fake_link.cpp)
  bool execute = true;       // CC1D_FAKE_EXECUTE=0: launches are checked and recorded, not run
  int devices() const { return static_cast<int>(sms.size()); }
  bool has_device(int d) const { return d >= 0 && d < devices(); }
};

// The configuration in force (read from the environment on first use).
const Config& config();
void read_config();

struct Counters {
  std::atomic<long> init{0}, get_proc_address{0};
  std::atomic<long> ctx_retain{0}, ctx_release{0}, ctx_push{0}, ctx_pop{0};
  std::atomic<long> module_load{0}, module_unload{0}, get_function{0}, launch{0};
  std::atomic<long> mem_alloc{0}, mem_free{0}, memcpy{0}, memset{0}, synchronize{0};
  std::atomic<long> get_proc_address_v2{0}, proc_not_found{0}, ptx_loads{0};
};
Counters& counters();

// Records why a call failed (cc1d_fake_last_error) and returns `code`.
CUresult failed(CUresult code, const std::string& why);

// The device of this thread's current context, or -1 when none is current.
int current_device();

bool initialized();
void set_initialized(bool v);

// Common entry checks: the stub fault, then cuInit having succeeded.
inline CUresult stub_or_uninit() {
  if (config().stub) return FAKE_CUDA_ERROR_STUB_LIBRARY;
  if (!initialized()) return FAKE_CUDA_ERROR_NOT_INITIALIZED;
  return FAKE_CUDA_SUCCESS;
}

// ---- kernel images (fake_image.cpp) ---------------------------------------------------------
struct Image {
  std::string bytes;  // a copy of what cuModuleLoadData was given
  bool ptx = false;
  int sm = -1;        // cubin: the ELF header's SM; PTX: the .target SM
  int ptx_isa_major = 0;
};

// Reads a cubin (size from its ELF headers) or NUL-terminated PTX at `data`; returns
// FAKE_CUDA_SUCCESS or the error a driver would give for unreadable data.
CUresult read_image(const void* data, Image* out, std::string* why);
// Whether a device of SM `device_sm` on driver `version` can run it; else the error code.
CUresult check_image_runs(const Image& image, int device_sm, int version, std::string* why);
// Whether the image defines a kernel entry named `name`.
bool image_has_entry(const Image& image, const char* name);

// CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED (and the capture invalidated) if a simulated capture
// refuses a potentially unsafe `call` from this thread now, else success (fake_capture.cpp).
CUresult refuse_if_capturing(const char* call);

// Records a successful launch for cc1d_fake_last_launch.
void record_launch(const cc1d_fake_launch& launch);
// Records that cuGetProcAddress(_v2) was asked for `symbol` (cc1d_fake_proc_requests).
void record_proc_request(const char* symbol);

}  // namespace fake
