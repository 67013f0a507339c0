// fake_counting.cpp — the fake libcuda's allocation, copy and synchronisation entry points,
// which only count (device memory is host memory, work is synchronous), the unversioned
// aliases of _v2 entry points, and cuGetProcAddress / cuGetProcAddress_v2.
//
// libcc1d must never call the counted ones on its launch path: a launch captured into a CUDA
// graph may not allocate, copy or synchronise. Tests read the counts with
// cc1d_fake_get_counters().
#include <cstdint>
#include <cstdlib>
#include <cstring>

#include "fake_api.h"

using fake::counters;

// Unversioned aliases (older exports of the same functions).
FAKE_EXPORT CUresult cuDevicePrimaryCtxRelease(int device) { return cuDevicePrimaryCtxRelease_v2(device); }
FAKE_EXPORT CUresult cuCtxPushCurrent(void* ctx) { return cuCtxPushCurrent_v2(ctx); }
FAKE_EXPORT CUresult cuCtxPopCurrent(void** ctx) { return cuCtxPopCurrent_v2(ctx); }

// ---- counted only ------------------------------------------------------------------------------
#define FAKE_COUNTED(counter)                       \
  if (CUresult r = fake::stub_or_uninit()) return r; \
  ++counters().counter

FAKE_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t bytes) {
  FAKE_COUNTED(mem_alloc);
  if (p == nullptr) return FAKE_CUDA_ERROR_INVALID_VALUE;
  *p = reinterpret_cast<CUdeviceptr>(std::malloc(bytes ? bytes : 1));
  return FAKE_CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemAlloc(CUdeviceptr* p, size_t bytes) { return cuMemAlloc_v2(p, bytes); }
FAKE_EXPORT CUresult cuMemAllocAsync(CUdeviceptr* p, size_t bytes, void*) { return cuMemAlloc_v2(p, bytes); }
FAKE_EXPORT CUresult cuMemAllocHost_v2(void** p, size_t bytes) {
  FAKE_COUNTED(mem_alloc);
  if (p == nullptr) return FAKE_CUDA_ERROR_INVALID_VALUE;
  *p = std::malloc(bytes ? bytes : 1);
  return FAKE_CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemHostAlloc(void** p, size_t bytes, unsigned) { return cuMemAllocHost_v2(p, bytes); }
FAKE_EXPORT CUresult cuMemFree_v2(CUdeviceptr p) {
  FAKE_COUNTED(mem_free);
  std::free(reinterpret_cast<void*>(p));
  return FAKE_CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemFree(CUdeviceptr p) { return cuMemFree_v2(p); }
FAKE_EXPORT CUresult cuMemFreeAsync(CUdeviceptr p, void*) { return cuMemFree_v2(p); }
FAKE_EXPORT CUresult cuMemFreeHost(void* p) {
  FAKE_COUNTED(mem_free);
  std::free(p);
  return FAKE_CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n) {
  FAKE_COUNTED(memcpy);
  std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), n);
  return FAKE_CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, void*) { return cuMemcpy(dst, src, n); }
FAKE_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t n) {
  return cuMemcpy(dst, reinterpret_cast<CUdeviceptr>(src), n);
}
FAKE_EXPORT CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t n) {
  return cuMemcpy(reinterpret_cast<CUdeviceptr>(dst), src, n);
}
FAKE_EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) { return cuMemcpy(dst, src, n); }
FAKE_EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t n, void*) {
  return cuMemcpyHtoD_v2(dst, src, n);
}
FAKE_EXPORT CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t n, void*) {
  return cuMemcpyDtoH_v2(dst, src, n);
}
FAKE_EXPORT CUresult cuMemcpyHtoD(CUdeviceptr dst, const void* src, size_t n) { return cuMemcpyHtoD_v2(dst, src, n); }
FAKE_EXPORT CUresult cuMemcpyDtoH(void* dst, CUdeviceptr src, size_t n) { return cuMemcpyDtoH_v2(dst, src, n); }

FAKE_EXPORT CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char v, size_t n) {
  FAKE_COUNTED(memset);
  std::memset(reinterpret_cast<void*>(dst), v, n);
  return FAKE_CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemsetD8Async(CUdeviceptr dst, unsigned char v, size_t n, void*) { return cuMemsetD8_v2(dst, v, n); }
FAKE_EXPORT CUresult cuMemsetD32_v2(CUdeviceptr dst, unsigned v, size_t n) {
  FAKE_COUNTED(memset);
  auto* p = reinterpret_cast<unsigned*>(dst);
  for (size_t i = 0; i < n; ++i) p[i] = v;
  return FAKE_CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuMemsetD32Async(CUdeviceptr dst, unsigned v, size_t n, void*) { return cuMemsetD32_v2(dst, v, n); }

FAKE_EXPORT CUresult cuStreamSynchronize(void*) {
  FAKE_COUNTED(synchronize);
  return FAKE_CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuCtxSynchronize(void) {
  FAKE_COUNTED(synchronize);
  return FAKE_CUDA_SUCCESS;
}
FAKE_EXPORT CUresult cuEventSynchronize(void*) {
  FAKE_COUNTED(synchronize);
  return FAKE_CUDA_SUCCESS;
}

// ---- cuGetProcAddress ------------------------------------------------------------------------

namespace {

struct Proc {
  const char* name;  // the unversioned name, as cuGetProcAddress is asked
  void* fn;
};

#define P(name, fn) {name, reinterpret_cast<void*>(&fn)}
FAKE_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, uint64_t flags);

const Proc kProcs[] = {
#define CC1D_CUDA_FN(name, sym, ret, params) P(#name, sym),
#include "runtime/src/nvrtc/cuda_api.def"
#undef CC1D_CUDA_FN
    P("cuGetProcAddress", cuGetProcAddress),
    // The PTX linker (fake_link.cpp):
    P("cuLinkCreate", cuLinkCreate_v2), P("cuLinkAddData", cuLinkAddData_v2), P("cuLinkComplete", cuLinkComplete),
    P("cuLinkDestroy", cuLinkDestroy),
    // Counted only:
    P("cuMemAlloc", cuMemAlloc_v2), P("cuMemAllocAsync", cuMemAllocAsync), P("cuMemAllocHost", cuMemAllocHost_v2),
    P("cuMemHostAlloc", cuMemHostAlloc), P("cuMemFree", cuMemFree_v2), P("cuMemFreeAsync", cuMemFreeAsync),
    P("cuMemFreeHost", cuMemFreeHost), P("cuMemcpy", cuMemcpy), P("cuMemcpyAsync", cuMemcpyAsync),
    P("cuMemcpyHtoD", cuMemcpyHtoD_v2), P("cuMemcpyDtoH", cuMemcpyDtoH_v2), P("cuMemcpyDtoD", cuMemcpyDtoD_v2),
    P("cuMemcpyHtoDAsync", cuMemcpyHtoDAsync_v2), P("cuMemcpyDtoHAsync", cuMemcpyDtoHAsync_v2),
    P("cuMemsetD8", cuMemsetD8_v2), P("cuMemsetD8Async", cuMemsetD8Async), P("cuMemsetD32", cuMemsetD32_v2),
    P("cuMemsetD32Async", cuMemsetD32Async), P("cuStreamSynchronize", cuStreamSynchronize),
    P("cuCtxSynchronize", cuCtxSynchronize), P("cuEventSynchronize", cuEventSynchronize),
};
#undef P

CUresult lookup(const char* symbol, void** pfn, int* status) {
  ++counters().get_proc_address;
  if (symbol != nullptr) fake::record_proc_request(symbol);  // asked for, whatever the answer
  if (fake::config().stub) return FAKE_CUDA_ERROR_STUB_LIBRARY;
  if (symbol == nullptr || pfn == nullptr) return FAKE_CUDA_ERROR_INVALID_VALUE;
  for (const Proc& p : kProcs)
    if (std::strcmp(p.name, symbol) == 0) {
      *pfn = p.fn;
      if (status != nullptr) *status = 0;  // CU_GET_PROC_ADDRESS_SUCCESS
      return FAKE_CUDA_SUCCESS;
    }
  // Like the real driver: versioned names ("cuMemAlloc_v2") and unknown names are not found.
  ++counters().proc_not_found;
  *pfn = nullptr;
  if (status != nullptr) *status = 1;  // CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND
  return FAKE_CUDA_ERROR_NOT_FOUND;
}

}  // namespace

FAKE_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int /*version*/, uint64_t /*flags*/) {
  return lookup(symbol, pfn, nullptr);
}

FAKE_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int /*version*/, uint64_t /*flags*/,
                                         int* status) {
  ++counters().get_proc_address_v2;
  return lookup(symbol, pfn, status);
}
