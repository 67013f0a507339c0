/* fake_cuda.h — the test-only stand-in for libcuda.so.1 (tests/fake_driver/), and its test hooks.
 *
 * The fake implements exactly the driver entry points libcc1d uses (runtime/src/nvrtc/cuda_api.def), on a
 * GPU that does not exist: device memory is host memory, and cuLaunchKernel runs the launch
 * through the kernel emulator (fallback/emulator/) with the same grid, block, dynamic shared
 * memory and parameters. cuModuleLoadData takes the real cubin NVRTC produced and rejects it,
 * like a real driver, when its ELF header names an SM the device cannot run. cuLink* turn PTX into
 * a synthetic cubin for the current device (fake_link.cpp), as the shipped PTX tier uses them.
 *
 * Never installed. Tests select it with CAUSAL_CONV1D_CUDA_DRIVER=<build>/fake_driver/libcuda.so.1.
 *
 * Environment (read at first use; cc1d_fake_reconfigure() reads it again):
 *   CC1D_FAKE_DEVICES         comma-separated SMs, one per device, e.g. "90,80" (a mixed machine);
 *                             when set (even empty: no device) it overrides the next two
 *   CC1D_FAKE_SM              the devices' SM, e.g. 90 (default), 80, 86, 120
 *   CC1D_FAKE_DEVICE_COUNT    number of devices (default 1; 0 = cuInit fails with 100)
 *   CC1D_FAKE_DRIVER_VERSION  cuDriverGetVersion (default 13000)
 *   CC1D_FAKE_SM_COUNT        CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT (default 132)
 *   CC1D_FAKE_BLOCKS_PER_SM   cuOccupancyMaxActiveBlocksPerMultiprocessor's answer for any kernel
 *                             (default 8; below 0 the query fails with 1, invalid value)
 *   CC1D_FAKE_MEMORY_MIB      cuDeviceTotalMem in MiB (default 81559)
 *   CC1D_FAKE_INIT_RESULT     cuInit's result when not 0 (e.g. 100 no device, 35 old driver);
 *                             the driver then stays uninitialised
 *   CC1D_FAKE_LAUNCH_RESULT   cuLaunchKernel's result when not 0 (e.g. 719, 700), returned after
 *                             the launch checks, without running
 *   CC1D_FAKE_EXECUTE         0: launches are checked and recorded but not run (to time the host
 *                             path alone); default 1, run through the emulator
 *   CC1D_FAKE_FAULT           comma-separated fault switches:
 *       no_device    cuInit returns CUDA_ERROR_NO_DEVICE (100), as CC1D_FAKE_INIT_RESULT=100
 *       stub         every entry point returns CUDA_ERROR_STUB_LIBRARY (34), like the toolkit stub
 *       module_load  cuModuleLoadData returns CUDA_ERROR_INVALID_IMAGE (200)
 *       link         cuLinkAddData refuses the PTX with CUDA_ERROR_INVALID_PTX (218) and a log
 *       launch       cuLaunchKernel returns CUDA_ERROR_LAUNCH_FAILED (719), as
 *                    CC1D_FAKE_LAUNCH_RESULT=719
 *   CAUSAL_CONV1D_EMULATE_CHECK / _SEED / CAUSAL_CONV1D_NUM_THREADS apply to the emulated launches.
 *
 * Allocation, copy and synchronisation entry points (cuMemAlloc_v2, cuMemcpy*, cuMemset*,
 * cuStreamSynchronize, cuCtxSynchronize, ...) are exported too, and counted, so that tests can
 * assert the launch path never calls them (what CUDA graph capture requires). cuGetProcAddress
 * serves them as well, and records every name it is asked for, so tests can also assert that
 * the runtime never even asks (cc1d_fake_proc_requests / cc1d_fake_requested_proc).
 */
#ifndef CC1D_FAKE_CUDA_H
#define CC1D_FAKE_CUDA_H

#ifdef __cplusplus
extern "C" {
#endif

/* CUresult values the fake returns. */
enum {
  FAKE_CUDA_SUCCESS = 0,
  FAKE_CUDA_ERROR_INVALID_VALUE = 1,
  FAKE_CUDA_ERROR_NOT_INITIALIZED = 3,
  FAKE_CUDA_ERROR_STUB_LIBRARY = 34,
  FAKE_CUDA_ERROR_NO_DEVICE = 100,
  FAKE_CUDA_ERROR_INVALID_DEVICE = 101,
  FAKE_CUDA_ERROR_INVALID_IMAGE = 200,
  FAKE_CUDA_ERROR_INVALID_CONTEXT = 201,
  FAKE_CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
  FAKE_CUDA_ERROR_INVALID_PTX = 218,
  FAKE_CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
  FAKE_CUDA_ERROR_INVALID_HANDLE = 400,
  FAKE_CUDA_ERROR_NOT_FOUND = 500,
  FAKE_CUDA_ERROR_LAUNCH_FAILED = 719,
  FAKE_CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED = 900,
  FAKE_CUDA_ERROR_STREAM_CAPTURE_INVALIDATED = 901
};

typedef struct cc1d_fake_counters {
  long init, get_proc_address;
  long ctx_retain, ctx_release, ctx_push, ctx_pop;
  long module_load, module_unload, get_function, launch;
  /* Must stay 0 on the launch path: */
  long mem_alloc, mem_free, memcpy, memset, synchronize;
  long get_proc_address_v2; /* of get_proc_address, those through cuGetProcAddress_v2 */
  long proc_not_found;      /* cuGetProcAddress(_v2) calls for a name the fake lacks */
  long ptx_loads;           /* cuModuleLoadData calls that loaded PTX (JIT) rather than a cubin */
} cc1d_fake_counters;

typedef struct cc1d_fake_launch {
  char kernel[512]; /* the lowered name passed to cuModuleGetFunction */
  unsigned grid[3], block[3], shared_bytes;
  void* stream;
  int context_device; /* device of the context current at launch */
  /* A copy of the kernel's one by-value parameter (FwdParams for the forward kernels). */
  unsigned params_bytes; /* its size; only the first sizeof params bytes are copied */
  unsigned char params[512];
} cc1d_fake_launch;

/* Test hooks (resolve with dlsym on the handle of the loaded fake). */
void cc1d_fake_get_counters(cc1d_fake_counters* out);
/* Zeroes the counters and forgets the names asked of cuGetProcAddress. */
void cc1d_fake_reset_counters(void);
/* 1 and the last successful launch, or 0 if none yet. */
int cc1d_fake_last_launch(cc1d_fake_launch* out);
/* How often cuGetProcAddress(_v2) was asked for `symbol` since the last reset, found or not;
 * symbol NULL: how many distinct names were asked for. */
long cc1d_fake_proc_requests(const char* symbol);
/* The i-th distinct name asked for since the last reset (first asked first), or NULL past the
 * end. The pointer stays valid until this thread calls again. */
const char* cc1d_fake_requested_proc(int i);
/* Why the last failing call failed ("" if none). */
const char* cc1d_fake_last_error(void);
/* Reads the environment again (devices, version, faults); cuInit must then be called again. */
void cc1d_fake_reconfigure(void);
/* A simulated CUDA-graph capture, begun by the calling thread in `mode` (0 global, 1
 * thread-local, 2 relaxed: CUstreamCaptureMode). While it lasts, cuModuleLoadData refuses to
 * run with 900 (CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED) and invalidates the capture wherever a
 * real driver would: unless the capture or the calling thread's mode
 * (cuThreadExchangeStreamCaptureMode) is relaxed, in the capturing thread, and in any thread
 * in global mode during a global capture. Begin returns 0, or 1 when a capture is already
 * underway or the mode is invalid; end returns 0 if the capture stayed valid, 901
 * (CUDA_ERROR_STREAM_CAPTURE_INVALIDATED) if a refused call invalidated it, 1 if none was
 * underway. */
int cc1d_fake_begin_capture(int mode);
int cc1d_fake_end_capture(void);
/* The calling thread's capture mode (cuThreadExchangeStreamCaptureMode's; 0 until changed). */
int cc1d_fake_capture_mode(void);

#ifdef __cplusplus
}
#endif

#endif /* CC1D_FAKE_CUDA_H */
