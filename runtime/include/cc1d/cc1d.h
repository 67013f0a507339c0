/*
 * cc1d.h — the public C ABI of libcc1d, the causal_conv1d runtime.
 *
 * libcc1d computes the depthwise causal 1-D convolution used by Mamba-style models:
 *
 *     y[b,c,t] = act( bias[c] + sum_{k=0}^{W-1} w[c,k] * x[b,c,t-W+1+k] )
 *
 * where x[b,c,s] for s < 0 comes from initial_states[b,c,W-1+s] when given, else 0, and
 * act is identity or silu(z) = z / (1 + exp(-z)). Accumulation is always fp32.
 *
 * Contract of every function in this header
 *  - No C++ exception ever crosses it; nothing aborts, exits or writes to stdout.
 *    Diagnostics go to stderr through the logger (CAUSAL_CONV1D_LOG_LEVEL).
 *  - Each returns a cc1d_status. On anything but CC1D_OK, cc1d_last_error() returns a
 *    thread-local, NUL-terminated message that names the argument or the step that failed,
 *    what was expected, what came, and what to do next. It stays valid until the next
 *    failing call on the same thread.
 *  - Tensors are borrowed: libcc1d never frees or keeps a pointer after a call returns
 *    (a launch on a CUDA stream reads them asynchronously, like any CUDA kernel).
 *  - Thread safety: every function may be called from any thread concurrently.
 *
 * Versioning
 *  - CC1D_ABI_VERSION changes only when an existing struct layout or signature changes.
 *    A caller compares cc1d_abi_version() with the value it was written against and
 *    refuses to use a library with another one. Structs carry `struct_size` first, so a
 *    newer library can accept older (shorter) structs.
 *
 * Environment variables read by the runtime (all optional):
 *  - CAUSAL_CONV1D_BACKEND     auto|cpu|nvrtc|emulate: the default backend for CC1D_BACKEND_AUTO.
 *  - CAUSAL_CONV1D_STRICT      1: a fallback from the requested backend is an error, not a warning.
 *  - CAUSAL_CONV1D_LOG_LEVEL   trace|debug|info|warn|error|off (default warn).
 *  - CAUSAL_CONV1D_NUM_THREADS threads of the CPU backend (default: hardware concurrency).
 *  - CAUSAL_CONV1D_NVRTC       path of a libnvrtc to try first.
 *  - CAUSAL_CONV1D_NVRTC_SEARCH_PATH  colon-separated roots searched for NVRTC (each root
 *                              itself, and its nvidia/cu13/lib and nvidia/cuda_nvrtc/lib).
 *  - CAUSAL_CONV1D_CUDA_DRIVER path of the libcuda to load instead of libcuda.so.1 (tests).
 *  - CAUSAL_CONV1D_KERNEL_DIR  directory of kernel sources used instead of the embedded ones.
 *  - CAUSAL_CONV1D_CACHE_DIR   cubin cache directory (default $XDG_CACHE_HOME or
 *                              ~/.cache, then /causal_conv1d); "off" disables the disk cache.
 *  - CAUSAL_CONV1D_EMULATE_CHECK 1: the emulate backend runs each launch twice (natural, then
 *                              shuffled thread order between barriers) and fails on a difference.
 *  - CAUSAL_CONV1D_EMULATE_SEED  seed of that shuffled order, to reproduce a reported mismatch.
 *  - CAUSAL_CONV1D_CACHE_MAX_MB size cap of the disk cache in MiB (default 256, 0 = none);
 *                              the least recently used entries are removed first.
 */
#ifndef CC1D_CC1D_H
#define CC1D_CC1D_H

#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define CC1D_API __declspec(dllexport)
#else
#define CC1D_API __attribute__((visibility("default")))
#endif

#ifdef __cplusplus
extern "C" {
#endif

#define CC1D_ABI_VERSION 1u
#define CC1D_MAX_RANK 4

/* Status codes. Stable numbers: Python maps them to exceptions. */
typedef enum cc1d_status {
  CC1D_OK = 0,
  CC1D_ERR_INVALID_ARGUMENT = 1,  /* a shape, dtype, stride, device or value is wrong (ValueError) */
  CC1D_ERR_INVALID_TYPE = 2,      /* an unsupported dtype (TypeError) */
  CC1D_ERR_NULL_POINTER = 3,      /* a required pointer was NULL */
  CC1D_ERR_UNSUPPORTED = 4,       /* valid, but the chosen backend cannot do it */
  CC1D_ERR_BACKEND_UNAVAILABLE = 5, /* the backend cannot run here (no driver, no NVRTC, a module the
                                     driver rejects, ...): callers fall back */
  CC1D_ERR_COMPILE = 6,           /* NVRTC rejected the kernel source */
  CC1D_ERR_CUDA = 7,              /* the CUDA driver returned an error */
  CC1D_ERR_BUFFER_TOO_SMALL = 8,  /* an output buffer (e.g. for cc1d_report) is too small */
  CC1D_ERR_INTERNAL = 9           /* a bug in libcc1d: please report it with the message */
} cc1d_status;

/* Element types. */
typedef enum cc1d_dtype {
  CC1D_FLOAT32 = 0,
  CC1D_FLOAT16 = 1,
  CC1D_BFLOAT16 = 2,
  CC1D_INT32 = 3 /* seq_idx only */
} cc1d_dtype;

typedef enum cc1d_device_type { CC1D_DEVICE_CPU = 0, CC1D_DEVICE_CUDA = 1 } cc1d_device_type;

/* Backends. AUTO picks CPU for host tensors and NVRTC for CUDA tensors (or the one named by
 * CAUSAL_CONV1D_BACKEND). A named backend is used as asked; if it cannot run, the call fails
 * with CC1D_ERR_BACKEND_UNAVAILABLE (callers such as the Python layer then choose a fallback). */
typedef enum cc1d_backend {
  CC1D_BACKEND_AUTO = 0,
  CC1D_BACKEND_CPU = 1,     /* native multi-threaded C++ kernels, host memory */
  CC1D_BACKEND_NVRTC = 2,   /* kernels_src JIT-compiled by NVRTC for the device's exact SM */
  CC1D_BACKEND_EMULATE = 3  /* kernels_src compiled for the host and run by the emulator (debug) */
} cc1d_backend;

typedef enum cc1d_activation { CC1D_ACT_NONE = 0, CC1D_ACT_SILU = 1 } cc1d_activation;

/* A borrowed strided tensor. Strides are in elements and may be any non-negative value
 * (views, broadcasts with stride 0 are rejected only for outputs). Shapes and strides use
 * 64-bit integers; no 32-bit offset limit applies anywhere. */
typedef struct cc1d_tensor {
  void* data;                  /* first element; NULL only when numel == 0 */
  int32_t dtype;               /* cc1d_dtype */
  int32_t device_type;         /* cc1d_device_type */
  int32_t device_index;        /* CUDA ordinal; 0 for CPU */
  int32_t ndim;                /* 1..CC1D_MAX_RANK */
  int64_t shape[CC1D_MAX_RANK];
  int64_t strides[CC1D_MAX_RANK];
} cc1d_tensor;

/* Arguments of the forward. Optional tensors are NULL pointers.
 *   x               (batch, dim, seqlen), fp32/fp16/bf16, any strides.
 *   weight          (dim, width), fp32/fp16/bf16 independent of x, 1 <= width <= CC1D_MAX_WIDTH.
 *   bias            (dim,), weight's dtype, optional.
 *   seq_idx         (batch, seqlen) int32, optional: a tap whose seq_idx differs from the output
 *                   token's is masked; a token with seq_idx < 0 outputs 0. Positions before 0
 *                   (initial_states) belong to the segment of token 0.
 *   initial_states  (batch, dim, width-1), x's dtype, optional: x at positions -(W-1)..-1.
 *   out             (batch, dim, seqlen), x's dtype, written.
 *   final_states    (batch, dim, width-1), x's dtype, optional, written: the last W-1 entries
 *                   of concat(initial_states or zeros, x) along time.
 *   stream          CUstream for CUDA tensors (NULL = legacy default stream); ignored on CPU. */
typedef struct cc1d_fwd_args {
  uint32_t struct_size; /* sizeof(cc1d_fwd_args) */
  const cc1d_tensor* x;
  const cc1d_tensor* weight;
  const cc1d_tensor* bias;
  const cc1d_tensor* seq_idx;
  const cc1d_tensor* initial_states;
  const cc1d_tensor* out;
  const cc1d_tensor* final_states;
  int32_t activation; /* cc1d_activation */
  int32_t backend;    /* cc1d_backend */
  void* stream;
} cc1d_fwd_args;

#define CC1D_MAX_WIDTH 8

/* ABI version of this library (compare with CC1D_ABI_VERSION). */
CC1D_API uint32_t cc1d_abi_version(void);

/* Library version string, e.g. "0.1.0". Static storage. */
CC1D_API const char* cc1d_version(void);

/* The last error message on this thread ("" if none). */
CC1D_API const char* cc1d_last_error(void);

/* Runs the forward. Validates everything first; on a validation error nothing is written. */
CC1D_API cc1d_status cc1d_causal_conv1d_fwd(const cc1d_fwd_args* args);

/* Records facts about the host framework, reported by cc1d_report (strings are copied;
 * any may be NULL). cxx11_abi: 1, 0, or -1 for unknown. */
CC1D_API cc1d_status cc1d_set_torch_info(const char* torch_version, const char* torch_cuda_version,
                                         int32_t cxx11_abi);

/* Writes a JSON report (versions, torch facts, devices, driver, NVRTC candidates with the
 * reason each was accepted or rejected, backend decisions, caches) into buf. If buf is too
 * small (or NULL), returns CC1D_ERR_BUFFER_TOO_SMALL and sets *needed to the size required
 * including the NUL. Probes the GPU environment on first use (never fails because of it). */
CC1D_API cc1d_status cc1d_report(char* buf, size_t buf_size, size_t* needed);

/* Whether `backend` can run on device (device_type, device_index) right now: CC1D_OK, or
 * CC1D_ERR_BACKEND_UNAVAILABLE with the reason in cc1d_last_error(). */
CC1D_API cc1d_status cc1d_backend_available(int32_t backend, int32_t device_type,
                                            int32_t device_index);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CC1D_CC1D_H */
