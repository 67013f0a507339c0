#include "nvrtc/gpu_env.h"

#include "api/report.h"
#include "core/json.h"
#include "nvrtc/nvrtc_choice.h"

namespace cc1d {

GpuEnv query_gpu_env() { return query_gpu_env(probe_cuda_driver()); }

GpuEnv query_gpu_env(DriverProbe probe) {
  GpuEnv env;
  env.driver = std::move(probe);
  if (env.driver.driver == nullptr || !env.driver.reason.empty()) return env;
  const CudaDriver& drv = *env.driver.driver;
  const CudaDriverApi& api = drv.api();
  int count = 0;
  CUresult r = api.cuDeviceGetCount(&count);
  if (r != kCudaSuccess || count <= 0) {
    env.driver.reason = r != kCudaSuccess
                            ? "cuDeviceGetCount failed: " + drv.describe(r)
                            : "the driver reports no CUDA device; check nvidia-smi and CUDA_VISIBLE_DEVICES";
    return env;
  }
  for (int i = 0; i < count; ++i) {
    DeviceInfo d;
    d.ordinal = i;
    CUdevice dev = 0;
    int major = 0, minor = 0;
    size_t mem = 0;
    char name[256] = {0};
    if ((r = api.cuDeviceGet(&dev, i)) != kCudaSuccess ||
        (r = api.cuDeviceGetAttribute(&major, kAttrCcMajor, dev)) != kCudaSuccess ||
        (r = api.cuDeviceGetAttribute(&minor, kAttrCcMinor, dev)) != kCudaSuccess ||
        (r = api.cuDeviceGetAttribute(&d.sm_count, kAttrSmCount, dev)) != kCudaSuccess ||
        (r = api.cuDeviceTotalMem(&mem, dev)) != kCudaSuccess) {
      env.devices_error += "device " + std::to_string(i) + ": " + drv.describe(r) + "; ";
      d.sm = 0;  // kept, so ordinals stay aligned; unusable
    } else {
      d.sm = major * 10 + minor;
      d.memory_bytes = mem;
    }
    if (api.cuDeviceGetName(name, (int)sizeof name - 1, dev) == kCudaSuccess) d.name = name;
    env.devices.push_back(d);
  }
  return env;
}

std::string gpu_env_json(const GpuEnv& env) {
  std::string tried = "[";
  for (size_t i = 0; i < env.driver.tried.size(); ++i)
    tried += std::string(i ? ", " : "") + "{\"path\": " + json_quote(env.driver.tried[i].path) +
             ", \"error\": " + json_quote(env.driver.tried[i].error) + "}";
  tried += "]";
  const CudaDriver* d = env.driver.driver.get();
  std::string j = "{\"available\": " + std::string(env.available() ? "true" : "false") +
                  ", \"reason\": " + json_quote(env.driver.reason) +
                  ", \"requested\": " + json_quote(env.driver.requested) + ", \"tried\": " + tried +
                  ", \"path\": " + json_quote(d ? d->path() : "") +
                  ", \"cuda_version\": " + json_quote(d && d->version() > 0 ? cuda_version_string(d->version()) : "") +
                  ", \"resolver\": " + json_quote(d ? d->resolver() : "") +
                  ", \"cu_init\": " + std::to_string(env.driver.init_result) + ", \"devices\": [";
  for (size_t i = 0; i < env.devices.size(); ++i) {
    const DeviceInfo& dev = env.devices[i];
    j += std::string(i ? ", " : "") + "{\"index\": " + std::to_string(dev.ordinal) +
         ", \"name\": " + json_quote(dev.name) + ", \"sm\": " + std::to_string(dev.sm) +
         ", \"sm_count\": " + std::to_string(dev.sm_count) +
         ", \"memory_bytes\": " + std::to_string(dev.memory_bytes) + "}";
  }
  j += "]";
  if (!env.devices_error.empty()) j += ", \"devices_error\": " + json_quote(env.devices_error);
  return j + "}";
}

int torch_cuda_major() { return parse_cuda_major(torch_info().cuda_version); }

}  // namespace cc1d
