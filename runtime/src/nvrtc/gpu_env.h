// gpu_env.h — the GPU environment as data: the driver, its CUDA version, every device
// (name, SM, SM count), and the torch facts given through cc1d_set_torch_info. The NVRTC
// backend decides from this, and cc1d_report shows the same facts it decided from.
#pragma once
#include <string>
#include <vector>

#include "nvrtc/cuda_driver.h"

namespace cc1d {

struct DeviceInfo {
  int ordinal = 0;
  std::string name;
  int sm = 0;        // major*10 + minor
  int sm_count = 0;  // multiprocessors
  unsigned long long memory_bytes = 0;  // cuDeviceTotalMem
};

struct GpuEnv {
  DriverProbe driver;               // driver.reason != "" when unavailable
  std::vector<DeviceInfo> devices;  // empty when unavailable
  std::string devices_error;        // a device query that failed, if any
  bool available() const { return driver.driver != nullptr && driver.reason.empty() && !devices.empty(); }
};

// Loads the driver (CAUSAL_CONV1D_CUDA_DRIVER or libcuda.so.1) and lists the devices.
GpuEnv query_gpu_env();
// Lists the devices of an already probed driver.
GpuEnv query_gpu_env(DriverProbe probe);

// {"path", "requested", "tried", "cuda_version", "resolver", "available", "reason", "devices"}
// (each device: index, name, sm, sm_count, memory_bytes).
std::string gpu_env_json(const GpuEnv& env);

// torch.version.cuda's major from cc1d_set_torch_info, 0 if unknown or CPU-only torch.
int torch_cuda_major();

}  // namespace cc1d
