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
 * Operations ("ops"): each has one entry point taking one argument struct.
 *   cc1d_causal_conv1d_fwd     the forward over a whole sequence (cc1d_fwd_args)
 *   cc1d_causal_conv1d_update  one decode step on a rolling or circular state (cc1d_update_args)
 *   cc1d_causal_conv1d_bwd     the backward: gradients of the forward's inputs (cc1d_bwd_args)
 *   cc1d_causal_conv1d_varlen_states  the conv states of packed variable-length sequences
 *                              (cc1d_varlen_states_args)
 * Every op runs on every backend that supports it; cc1d_plan_dispatch() says which would serve.
 *
 * Contract of every function in this header
 *  - No C++ exception ever crosses it; nothing aborts, exits or writes to stdout.
 *    Diagnostics go to the log (stderr, or the callback of cc1d_set_log_callback).
 *  - Each returns a cc1d_status (or a plain value where noted). On anything but CC1D_OK,
 *    cc1d_last_error() returns a thread-local, NUL-terminated message that names the argument
 *    or the step that failed, what was expected, what came, and what to do next. It stays
 *    valid until the next failing call on the same thread.
 *  - Tensors are borrowed: libcc1d never frees or keeps a pointer after a call returns
 *    (a launch on a CUDA stream reads them asynchronously, like any CUDA kernel).
 *  - An op validates every argument before anything is written: on an error, no output and
 *    no state buffer has been touched.
 *  - Thread safety: every function may be called from any thread concurrently.
 *
 * Tensors (cc1d_tensor)
 *  - Shapes and strides are 64-bit and in elements; strides may be any non-negative value
 *    (views, transposes, broadcasts of inputs). Every extent computation is overflow-checked:
 *    a descriptor whose byte span does not fit the address space is rejected. The stride of a
 *    size-1 dim is never used (that dim is only indexed at 0), so it may hold any value.
 *  - data must be aligned to the element size, and may be NULL only for a tensor with no
 *    elements.
 *  - Outputs must not overlap themselves (no broadcast or overlapping strides) nor any other
 *    argument, except where an op documents an argument as read and written (in-out).
 *
 * Versioning
 *  - CC1D_ABI_VERSION changes only when an existing struct layout or signature changes;
 *    new functions, ops, enum values and backends are additions under the same version.
 *    A caller compares cc1d_abi_version() with the value it was written against and refuses
 *    a library with another one. Structs carry `struct_size` first, so a newer library can
 *    accept older (shorter) structs.
 *
 * Environment variables read by libcc1d (all optional):
 *  - CAUSAL_CONV1D_BACKEND     auto|cpu|nvrtc|emulate|aten: the backend CC1D_BACKEND_AUTO
 *                              stands for (read by cc1d_plan_dispatch and by AUTO calls).
 *  - CAUSAL_CONV1D_STRICT      1|true|yes|on: reported by cc1d_plan_dispatch (plan.strict),
 *                              so that host frameworks turn a fallback into an error. libcc1d
 *                              itself never falls back silently: an AUTO call that cannot be
 *                              served by its first candidate fails with the reasons.
 *  - CAUSAL_CONV1D_DETERMINISTIC 1|true|yes|on: every cc1d_causal_conv1d_bwd call runs as if
 *                              args.deterministic were 1. Read by libcc1d alone, on every call
 *                              (host frameworks pass their own switch, e.g. torch's
 *                              deterministic-algorithms flag, as args.deterministic; the
 *                              Python package passes 0 when this variable is 0|false|no|off,
 *                              upstream's override).
 *  - CAUSAL_CONV1D_LOG_LEVEL   trace|debug|info|warn|error|off (default warn).
 *  - CAUSAL_CONV1D_NUM_THREADS threads of the cpu and emulate backends (default: all cores).
 *  - CAUSAL_CONV1D_CPU_STREAM unset/auto: the cpu backend's channel-last forward writes an output
 *                              over half the last-level cache with non-temporal stores (no
 *                              read of each line before its write); 1: always; 0: never. The
 *                              same values either way.
 *  - CAUSAL_CONV1D_HUGEPAGES  0|false|no|off: the cpu backend stops asking for transparent huge
 *                              pages (madvise) on the untouched whole huge pages of an output of
 *                              two huge pages or more before writing it (default on, where the
 *                              kernel's THP mode is "madvise"; no data changes either way).
 *  - CAUSAL_CONV1D_GRID_WAVES  0..1024 (default 0: a block per work item): the nvrtc backend
 *                              caps each launch whose kernel strides over its grid (the
 *                              forward's, the backward's) at N times the blocks the device holds
 *                              at once (multiprocessors x cuOccupancyMaxActiveBlocksPerMultiprocessor);
 *                              1 is a persistent grid. Same results; for measuring. Read on
 *                              every call; a bad value: one warning, and 0.
 *  - CAUSAL_CONV1D_NVRTC       path of a libnvrtc to try first; "none" (any case): no NVRTC is
 *                              searched for, so kernels come only from the caches and the
 *                              shipped PTX tier (as on a node without NVRTC).
 *  - CAUSAL_CONV1D_NVRTC_SEARCH_PATH  colon-separated roots searched for NVRTC (each root
 *                              itself, and its nvidia/cu13/lib and nvidia/cuda_nvrtc/lib).
 *  - CAUSAL_CONV1D_CUDA_DRIVER path of the libcuda to load instead of libcuda.so.1 (tests).
 *  - CAUSAL_CONV1D_KERNEL_DIR  directory of kernel sources used instead of the embedded ones.
 *  - CAUSAL_CONV1D_PTX_TIER    0 / off: the nvrtc backend never uses the shipped PTX tier (PTX of
 *                              the common variants, made by NVRTC when libcc1d was built, which the
 *                              driver's JIT turns into a cubin at a first call in about a third of
 *                              an NVRTC compile) and compiles every kernel with NVRTC. Default on;
 *                              the report's "ptx_tier" says what it holds and, per device, whether
 *                              it serves it and why not. A device with no usable NVRTC that the
 *                              tier covers runs the tier's kernels (report mode "shipped PTX
 *                              only"; after those of a precompiled tier of its arch, if any:
 *                              "precompiled"): a call needing another fails with
 *                              CC1D_ERR_UNSUPPORTED.
 *  - CAUSAL_CONV1D_CACHE_DIR   the local compiled-kernel cache (default $XDG_CACHE_HOME or
 *                              ~/.cache, then /causal-conv1d/kernels); "off" disables it. See
 *                              "Kernel cache" below.
 *  - CAUSAL_CONV1D_CACHE_MAX_MB size cap of the local cache in MiB (default 256, 0 = none,
 *                              digits only, at most 2^44-1); the least recently used entries
 *                              are removed first. A bad value: one warning, and the default.
 *  - CAUSAL_CONV1D_CACHE_PATH  colon-separated read-only tiers searched after the local cache
 *                              (absolute paths, e.g. the output of cc1d_precompile).
 *  - CAUSAL_CONV1D_CACHE_LOCK_TIMEOUT seconds a process waits for another that compiles the
 *                              same kernel (default 60) before compiling it itself.
 *  - CAUSAL_CONV1D_EMULATE_CHECK 1: the emulate backend runs each launch twice (natural, then
 *                              shuffled thread order between barriers) and fails on a difference.
 *  - CAUSAL_CONV1D_EMULATE_SEED  seed of that shuffled order, to reproduce a reported mismatch.
 *
 * Kernel cache (the nvrtc backend's compiled kernels; cc1d_cache_command, cc1d_precompile)
 *  - Lookup: memory, then the local cache <dir>/kernels-v3/<sha256 key>.cc1dbin, then each tier
 *    of CAUSAL_CONV1D_CACHE_PATH (<tier>/kernels-v3/...). A tier hit is copied into the local
 *    cache. The key covers the kernel sources, the variant, the target (sm_XY / compute_XY),
 *    the compiler and its version, the options and the ABI. When no cache holds the key of the
 *    device's own compiler, a tier's image by another compiler for the same target whose oldest
 *    driver (<tier>/targets-v1) this driver meets stands in before anything is compiled; the
 *    report's per-device "precompiled" lists each tier target of its arch and its use there.
 *  - Compile once: a process that misses takes a per-key lock (an OFD lock on one byte of
 *    <dir>/kernels-v3/compile.lock), looks again, compiles and stores; the others wait, then
 *    load its entry. The lock of a process that dies is released by the kernel; a holder that
 *    keeps it past CAUSAL_CONV1D_CACHE_LOCK_TIMEOUT is bypassed (the waiter compiles too).
 *  - Integrity: each entry carries a header (every byte checked) and a SHA-256 of its payload,
 *    which names its own key; it is opened without blocking, must be a regular file, and is
 *    read up to the size its header gives. Writes go through a locked temp file, fsync and
 *    rename. A bad local entry is ignored and rebuilt; a bad tier entry is skipped, counted
 *    and reported, never deleted. A failed compile is never stored.
 *  - Trust (whatever is in the cache becomes code on the GPU): the local directory is created
 *    0700 and its entries 0600; an existing one owned by another user, or writable by its
 *    group or others, is not used (one warning says why and how to fix it). A tier, and each
 *    entry, must be owned by the user or root and writable by no one else. The checksum
 *    guards against damage, not against a writer.
 *  - Degradation: a directory that cannot be created or written, or a full disk (after
 *    evicting old entries, retried at each later store), leaves compiled kernels in memory,
 *    with one warning; cc1d_report says the true state.
 *  - NVRTC's facts: <dir>/nvrtc-facts-v1 keeps each libnvrtc's version and SMs, keyed by the
 *    file's identity (path, inode, size, mtime, ctime), and where the loader found each soname.
 *    A later process then chooses its NVRTC without loading it, and loads it only to compile: a
 *    process whose kernels all come from a cache or the shipped PTX tier never maps NVRTC (about
 *    100 MB; 4-6 ms warm, 26-84 ms from a cold page cache). Same trust rule as the entries; a
 *    changed file is asked again; a library that answers otherwise than its facts when loaded
 *    fails that compile with CC1D_ERR_BACKEND_UNAVAILABLE (CC1D_CACHE_CLEAR deletes the
 *    file). Kept only with a local cache; cc1d_report's nvrtc_candidates say "loaded" for each.
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
#define CC1D_MAX_WIDTH 8      /* widths 1..CC1D_MAX_WIDTH */
#define CC1D_MAX_BACKENDS 8   /* capacity of cc1d_plan.candidates */
#define CC1D_MAX_VARLEN_STATE_LEN 1048576 /* state_len of cc1d_varlen_states_args: 1..2^20 */

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
  CC1D_INT32 = 3 /* indices and segment ids only */
} cc1d_dtype;

typedef enum cc1d_device_type { CC1D_DEVICE_CPU = 0, CC1D_DEVICE_CUDA = 1 } cc1d_device_type;

/* Backends. cc1d_backend_name() gives each one's name ("auto", "cpu", "nvrtc", "emulate",
 * "aten"); CAUSAL_CONV1D_BACKEND takes the same names.
 *  AUTO     CAUSAL_CONV1D_BACKEND if set, else: host tensors -> cpu, then aten;
 *           CUDA tensors -> nvrtc, then aten, then cpu through host copies.
 *  ATEN     served by the host framework (torch ops in Python, the ATen reference of the
 *           optional libtorch op library); libcc1d lists it in plans but never runs it. An op
 *           called with ATEN validates every argument, then fails with
 *           CC1D_ERR_BACKEND_UNAVAILABLE (or returns CC1D_OK when there is nothing to compute):
 *           hosts validate this way before running their reference. */
typedef enum cc1d_backend {
  CC1D_BACKEND_AUTO = 0,
  CC1D_BACKEND_CPU = 1,     /* native multi-threaded C++ kernels, host memory */
  CC1D_BACKEND_NVRTC = 2,   /* kernels_src JIT-compiled by NVRTC for the device's exact SM */
  CC1D_BACKEND_EMULATE = 3, /* kernels_src compiled for the host and run by the emulator (debug) */
  CC1D_BACKEND_ATEN = 4     /* the host framework's reference (not run by libcc1d) */
} cc1d_backend;

/* Ops, for cc1d_plan_dispatch and cc1d_op_name ("fwd", "update", "bwd", "varlen_states"). */
typedef enum cc1d_op {
  CC1D_OP_FWD = 0,
  CC1D_OP_UPDATE = 1,
  CC1D_OP_BWD = 2,
  CC1D_OP_VARLEN_STATES = 3
} cc1d_op;

typedef enum cc1d_activation { CC1D_ACT_NONE = 0, CC1D_ACT_SILU = 1 } cc1d_activation;

/* A borrowed strided tensor (see "Tensors" above). */
typedef struct cc1d_tensor {
  void* data;                  /* first element; NULL only when the tensor has no elements */
  int32_t dtype;               /* cc1d_dtype */
  int32_t device_type;         /* cc1d_device_type */
  int32_t device_index;        /* CUDA ordinal; 0 for CPU */
  int32_t ndim;                /* 1..CC1D_MAX_RANK */
  int64_t shape[CC1D_MAX_RANK];
  int64_t strides[CC1D_MAX_RANK];
} cc1d_tensor;

/* Arguments of the forward. Optional tensors are NULL pointers.
 *   x               (batch, dim, seqlen), fp32/fp16/bf16, any strides; seqlen >= 1.
 *   weight          (dim, width), fp32/fp16/bf16 independent of x, 1 <= width <= CC1D_MAX_WIDTH.
 *   bias            (dim,), weight's dtype, optional.
 *   seq_idx         (batch, seqlen) int32, optional: a tap whose seq_idx differs from the output
 *                   token's is masked; a token with seq_idx < 0 outputs 0. Positions before 0
 *                   (initial_states) belong to the segment of token 0.
 *   initial_states  (batch, dim, width-1), x's dtype, optional: x at positions -(W-1)..-1.
 *   out             (batch, dim, seqlen), x's dtype, written.
 *   final_states    (batch, dim, width-1), x's dtype, optional, written: the last W-1 entries
 *                   of concat(initial_states or zeros, x) along time.
 *   backend         cc1d_backend. A named backend is used as asked; if it cannot serve, the
 *                   call fails with CC1D_ERR_BACKEND_UNAVAILABLE and the reason. AUTO tries the
 *                   candidates of cc1d_plan_dispatch that libcc1d can run itself, in order.
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

/* Arguments of the decode-step update (upstream causal_conv1d_update semantics).
 *   x                   (batch, dim, seqlen), or (batch, dim) for seqlen 1; fp32/fp16/bf16.
 *   conv_state          (pool, dim, state_len), x's dtype, any strides; state_len >= width-1.
 *                       Read and written (in-out). Without conv_state_indices, pool == batch.
 *   weight, bias        as for the forward.
 *   cache_seqlens       (batch,) int32, optional. Without it the state shifts left by seqlen
 *                       and x is appended. With it the state is a circular buffer: token t of
 *                       row b is written at (cache_seqlens[b] + t) % state_len, and its window
 *                       reads the W-1 entries before that position. The caller advances
 *                       cache_seqlens.
 *   conv_state_indices  (batch,) int32, optional: row b uses conv_state[indices[b]]. An index
 *                       < 0 is a padding slot: its outputs are 0 and no state is touched.
 *   out                 (batch, dim, seqlen) (or (batch, dim), like x), x's dtype, written.
 * An index >= pool, a duplicated index, or a negative cache_seqlens: for host tensors the call
 * fails with CC1D_ERR_INVALID_ARGUMENT before anything is written; for CUDA tensors (whose
 * values libcc1d does not read on the host) the kernel treats such a row as padding (outputs
 * 0, no state written; duplicated indices race as on upstream). */
typedef struct cc1d_update_args {
  uint32_t struct_size; /* sizeof(cc1d_update_args) */
  const cc1d_tensor* x;
  const cc1d_tensor* conv_state;
  const cc1d_tensor* weight;
  const cc1d_tensor* bias;
  const cc1d_tensor* cache_seqlens;
  const cc1d_tensor* conv_state_indices;
  const cc1d_tensor* out;
  int32_t activation; /* cc1d_activation */
  int32_t backend;    /* cc1d_backend */
  void* stream;
} cc1d_update_args;

/* Arguments of the backward: the gradients of the forward's inputs (upstream 1.6 semantics).
 * Optional tensors are NULL pointers; each gradient is computed only when its output is given.
 *   x, weight, bias, seq_idx, initial_states, activation   the forward's, as in cc1d_fwd_args.
 *   dout            (batch, dim, seqlen), x's dtype, any strides: the gradient of out.
 *   dfinal_states   (batch, dim, width-1), x's dtype, optional: the gradient of final_states; it
 *                   flows into dx and dinitial_states.
 *   dx              (batch, dim, seqlen), x's dtype, optional, written.
 *   dweight         (dim, width), weight's dtype, optional, written.
 *   dbias           (dim,), weight's dtype, optional, written (bias itself may be absent).
 *   dinitial_states (batch, dim, width-1), x's dtype, optional, written (initial_states may be
 *                   absent: the gradient of zero states).
 *   workspace       (n,) float32, unit stride, optional, written: scratch of the GPU kernels,
 *                   n >= cc1d_causal_conv1d_bwd_workspace(). Required on CUDA tensors when dweight
 *                   or dbias is given (libcc1d never allocates device memory); host backends use
 *                   their own when it is NULL.
 *   deterministic   0 or 1 (or CAUSAL_CONV1D_DETERMINISTIC): 1 makes dweight and dbias bitwise
 *                   identical between calls with the same inputs. The GPU kernels then store
 *                   per-block fp32 partial sums and reduce them in a fixed order (a workspace of
 *                   batch * segments rows instead of one), instead of adding them with fp32
 *                   atomics. The cpu backend is deterministic in either mode (a fixed reduction
 *                   order, independent of the thread count); dx and dinitial_states are on every
 *                   backend.
 *   backend, stream as for the forward.
 * SiLU is recomputed from the pre-activation; a token with seq_idx < 0 contributes nothing;
 * dweight and dbias accumulate in fp32 and are stored in weight's dtype. */
typedef struct cc1d_bwd_args {
  uint32_t struct_size; /* sizeof(cc1d_bwd_args) */
  const cc1d_tensor* x;
  const cc1d_tensor* weight;
  const cc1d_tensor* bias;
  const cc1d_tensor* seq_idx;
  const cc1d_tensor* initial_states;
  const cc1d_tensor* dout;
  const cc1d_tensor* dfinal_states;
  const cc1d_tensor* dx;
  const cc1d_tensor* dweight;
  const cc1d_tensor* dbias;
  const cc1d_tensor* dinitial_states;
  const cc1d_tensor* workspace;
  int32_t activation;    /* cc1d_activation */
  int32_t deterministic; /* 0 or 1 */
  int32_t backend;       /* cc1d_backend */
  void* stream;
} cc1d_bwd_args;

/* Arguments of the varlen-states op (upstream causal_conv1d_varlen_states): the conv states that
 * the last tokens of each sequence of a packed batch leave behind, for decoding to continue.
 *   x           (total_tokens, dim), fp32/fp16/bf16, any strides (upstream's kernel wants
 *               x.strides[1] == 1; here that layout, with 16-byte aligned rows, is the fast path).
 *   cu_seqlens  (batch+1,) int32, any stride: sequence b is tokens [cu_seqlens[b], cu_seqlens[b+1])
 *               of x. Cumulative lengths: non-decreasing, each in [0, total_tokens] (upstream starts
 *               at 0; a larger start only leaves the first tokens out of every sequence).
 *   out         (batch, dim, state_len), x's dtype, any strides, written: for each sequence b,
 *               its last n = min(len_b, state_len) tokens, transposed, at out[b, :, state_len-n:],
 *               and 0 at out[b, :, :state_len-n] (an empty sequence gives a zero state).
 *               1 <= state_len <= CC1D_MAX_VARLEN_STATE_LEN. Upstream allocates it as
 *               empty(batch, state_len, dim).transpose(1, 2) (strides (state_len*dim, 1, dim)), the
 *               fast path's layout, and the one the Python and libtorch ops allocate.
 *   backend, stream as for the forward.
 * cu_seqlens values: for host tensors the call fails with CC1D_ERR_INVALID_ARGUMENT, naming the
 * first bad entry, before anything is written. For CUDA tensors libcc1d cannot read them without a
 * synchronisation, so only their shape and dtype are checked; the kernel clamps instead and never
 * reads outside x: end_b = clamp(cu_seqlens[b+1], 0, total), start_b = clamp(cu_seqlens[b], 0,
 * end_b) (so a decreasing pair is an empty sequence, a zero state).
 * Copies bits: the states are x's elements unconverted (NaN and -0.0 included). */
typedef struct cc1d_varlen_states_args {
  uint32_t struct_size; /* sizeof(cc1d_varlen_states_args) */
  const cc1d_tensor* x;
  const cc1d_tensor* cu_seqlens;
  const cc1d_tensor* out;
  int32_t backend; /* cc1d_backend */
  void* stream;
} cc1d_varlen_states_args;

/* One candidate of a dispatch plan. */
typedef struct cc1d_candidate {
  int32_t backend;      /* cc1d_backend */
  int32_t available;    /* 1: it can serve this op on this device now */
  int32_t host_copies;  /* 1: it reads host memory, so CUDA tensors must be copied to the host
                           and back by the caller (libcc1d never copies) */
  int32_t runs_in_host; /* 1: run by the host framework (ATEN), not by libcc1d */
  const char* reason;   /* why it is or is not available; thread-local, valid until the next
                           cc1d_plan_dispatch call on this thread */
} cc1d_candidate;

/* Where the requested backend came from. */
typedef enum cc1d_source {
  CC1D_SOURCE_ARGUMENT = 0,    /* the caller named a backend */
  CC1D_SOURCE_ENVIRONMENT = 1, /* CAUSAL_CONV1D_BACKEND */
  CC1D_SOURCE_DEFAULT = 2      /* neither: auto */
} cc1d_source;

/* The dispatch policy's answer: the backends to try, in order. The host framework tries each
 * available candidate in turn; every candidate before the one that serves is a fallback, which
 * must be reported (and refused when strict is 1). */
typedef struct cc1d_plan {
  uint32_t struct_size;  /* sizeof(cc1d_plan), set by the caller */
  int32_t requested;     /* the backend in force after CAUSAL_CONV1D_BACKEND: AUTO or one backend */
  int32_t source;        /* cc1d_source */
  int32_t strict;        /* 1 when CAUSAL_CONV1D_STRICT asks fallbacks to be errors */
  int32_t count;         /* candidates used */
  cc1d_candidate candidates[CC1D_MAX_BACKENDS];
} cc1d_plan;

/* Log levels, for the callback and cc1d_set_log_level. */
typedef enum cc1d_log_level {
  CC1D_LOG_TRACE = 0, CC1D_LOG_DEBUG = 1, CC1D_LOG_INFO = 2, CC1D_LOG_WARN = 3,
  CC1D_LOG_ERROR = 4, CC1D_LOG_OFF = 5
} cc1d_log_level;

/* Receives each log line (no trailing newline). May be called from any thread, including the
 * library's worker threads; must not call back into libcc1d. */
typedef void (*cc1d_log_fn)(int32_t level, const char* message, void* user);

/* ABI version of this library (compare with CC1D_ABI_VERSION). */
CC1D_API uint32_t cc1d_abi_version(void);

/* Library version string, e.g. "0.2.0". Static storage. */
CC1D_API const char* cc1d_version(void);

/* The last error message on this thread ("" if none). */
CC1D_API const char* cc1d_last_error(void);

/* Name of a backend ("auto", "cpu", "nvrtc", "emulate", "aten"), or NULL past the last one:
 * iterate from 0 until NULL. Static storage. */
CC1D_API const char* cc1d_backend_name(int32_t backend);

/* Name of an op ("fwd", "update", "bwd", "varlen_states"), or NULL past the last one. Static
 * storage. */
CC1D_API const char* cc1d_op_name(int32_t op);

/* Runs the forward. */
CC1D_API cc1d_status cc1d_causal_conv1d_fwd(const cc1d_fwd_args* args);

/* Runs one decode step: writes out and updates conv_state in place. */
CC1D_API cc1d_status cc1d_causal_conv1d_update(const cc1d_update_args* args);

/* Runs the backward: writes the gradients whose outputs are given. */
CC1D_API cc1d_status cc1d_causal_conv1d_bwd(const cc1d_bwd_args* args);

/* Writes the conv states of packed variable-length sequences into out (cc1d_varlen_states_args). */
CC1D_API cc1d_status cc1d_causal_conv1d_varlen_states(const cc1d_varlen_states_args* args);

/* Sets *elements to the float32 workspace a cc1d_causal_conv1d_bwd call with these arguments
 * needs on a GPU backend (0 when neither dweight nor dbias is given), after validating them
 * (args->workspace is ignored). */
CC1D_API cc1d_status cc1d_causal_conv1d_bwd_workspace(const cc1d_bwd_args* args, int64_t* elements);

/* The dispatch policy for `op` on a device: `backend` is what the caller asked for (AUTO
 * defers to CAUSAL_CONV1D_BACKEND, then to the default order). Fills *plan. Probes the GPU
 * environment on first use; never fails because a backend is unavailable (that is a
 * candidate with available = 0 and its reason). */
CC1D_API cc1d_status cc1d_plan_dispatch(int32_t op, int32_t backend, int32_t device_type,
                                        int32_t device_index, cc1d_plan* plan);

/* Whether `backend` can serve `op`'s tensors on the device right now: CC1D_OK, or
 * CC1D_ERR_BACKEND_UNAVAILABLE with the reason in cc1d_last_error(). */
CC1D_API cc1d_status cc1d_backend_available(int32_t backend, int32_t device_type,
                                            int32_t device_index);

/* Routes log lines to `fn` (NULL: back to stderr). Lines below the level are not formatted. */
CC1D_API cc1d_status cc1d_set_log_callback(cc1d_log_fn fn, void* user);

/* Sets the level (cc1d_log_level); the initial one comes from CAUSAL_CONV1D_LOG_LEVEL. */
CC1D_API cc1d_status cc1d_set_log_level(int32_t level);

/* The level in force (cc1d_log_level). */
CC1D_API int32_t cc1d_get_log_level(void);

/* Records facts about the host framework, reported by cc1d_report (strings are copied;
 * any may be NULL). cxx11_abi: 1, 0, or -1 for unknown. */
CC1D_API cc1d_status cc1d_set_torch_info(const char* torch_version, const char* torch_cuda_version,
                                         int32_t cxx11_abi);

/* Kernel cache commands, for cc1d_cache_command. */
typedef enum cc1d_cache_cmd {
  CC1D_CACHE_PATH = 0,   /* where the local cache and each tier live, their state, a tier's targets */
  CC1D_CACHE_STATS = 1,  /* entries, bytes, temp files; hits, misses, corrupt, writes, evictions */
  CC1D_CACHE_LIST = 2,   /* every entry: key, file, bytes, mtime, kernel, target, compiler, ok */
  CC1D_CACHE_VERIFY = 3, /* checks every entry; removes bad local ones (tiers: reported only) */
  CC1D_CACHE_CLEAR = 4   /* removes every local entry and NVRTC's facts (tiers are never written) */
} cc1d_cache_cmd;

/* Arguments of cc1d_precompile. Each list is a pointer and a count; NULL (or count 0) means
 * the default. */
typedef struct cc1d_precompile_args {
  uint32_t struct_size;     /* sizeof(cc1d_precompile_args) */
  const char* out_dir;      /* required; created (0755) if absent; must be owned by the user or
                               root and writable by no one else, as a tier must */
  const int32_t* archs;     /* SMs, e.g. 90 for sm_90; default 75, 80, 86, 89, 90, 100, 120 */
  int32_t num_archs;
  const int32_t* ops;       /* cc1d_op ids; default every op */
  int32_t num_ops;
  const int32_t* dtypes;    /* cc1d_dtype: the element types a variant may use (a variant naming
                               another is skipped); default fp32, fp16, bf16 */
  int32_t num_dtypes;
  const int32_t* widths;    /* 1..CC1D_MAX_WIDTH (a variant's first integer template argument);
                               default all */
  int32_t num_widths;
  int32_t driver_version;   /* the nodes' driver as cuDriverGetVersion gives it (12080 = CUDA 12.8);
                               0: a driver that runs the newest NVRTC found */
  int32_t torch_cuda_major; /* the CUDA major of the nodes' torch (NVRTC rule 2); 0: the torch of
                               cc1d_set_torch_info, if any */
  int32_t jobs;             /* compile threads; 0: one per core */
} cc1d_precompile_args;

/* Runs a kernel cache command (cc1d_cache_cmd) on the cache the environment configures
 * (CAUSAL_CONV1D_CACHE_DIR, CAUSAL_CONV1D_CACHE_PATH) and sets *json to its result, a JSON
 * object {"command", "local": {...}, "tiers": [{...}]} allocated by libcc1d: release it with
 * cc1d_free. Needs no GPU and no NVRTC. */
CC1D_API cc1d_status cc1d_cache_command(int32_t command, char** json);

/* Compiles kernel variants for GPUs that are not here: for each arch, with the NVRTC, target
 * and options a node with that arch, driver_version and torch would choose (the rules of
 * cc1d_report's nvrtc_candidates, with no driver loaded), each requested op's variants that use
 * only the requested dtypes and widths, in parallel, into out_dir/kernels-v3/ (entries 0644),
 * skipping those already there. The directory is then usable by nodes as a read-only tier
 * (CAUSAL_CONV1D_CACHE_PATH), provided they run the same libcc1d and kernel sources:
 * out_dir/targets-v1 gives each arch's target, compiler, options and the oldest driver that loads
 * its images, so that a node with no usable NVRTC takes its keys from there (report mode
 * "precompiled"), and one whose NVRTC choice differs loads the tier's image of a kernel for its
 * target, where its driver can, instead of compiling it. Writes out_dir/manifest.json (NVRTC per arch,
 * assumptions, every variant with its key, bytes and origin, totals with the throughput) and sets
 * *manifest_json to the same text (release it with cc1d_free). Errors: CC1D_ERR_INVALID_ARGUMENT
 * (a bad list value, an unusable out_dir), CC1D_ERR_BACKEND_UNAVAILABLE (no NVRTC),
 * CC1D_ERR_UNSUPPORTED (an arch no NVRTC found can serve, with the reason), CC1D_ERR_COMPILE
 * (after compiling all other variants: the failed ones are named, and listed under "errors" in
 * the manifest). */
CC1D_API cc1d_status cc1d_precompile(const cc1d_precompile_args* args, char** manifest_json);

/* Releases a string that libcc1d allocated for the caller (NULL is fine). */
CC1D_API void cc1d_free(void* p);
/* The outcome of cc1d_self_test. */
typedef struct cc1d_self_test_result {
  uint32_t struct_size; /* sizeof(cc1d_self_test_result), set by the caller */
  int32_t backend;      /* the backend that ran (cc1d_backend) */
  int32_t passed;       /* 1: every output within tolerance * (|reference| + 1) */
  int32_t runs;         /* timed calls after the first */
  int64_t elements;     /* outputs compared */
  int64_t mismatches;   /* outputs outside the tolerance (a NaN counts) */
  double max_abs_error;
  double tolerance;
  double first_ms;      /* the first call: compiles, or loads from the cache, on the nvrtc backend */
  double median_ms;     /* the median of the timed calls */
} cc1d_self_test_result;

/* Runs the forward once on one device through `backend` (AUTO: the first candidate of the
 * dispatch plan that libcc1d runs itself), compares every output with a float64 reference
 * computed on the host, and times it. The case is fixed: fp32, batch 2, dim 96, seqlen 300,
 * width 4, bias, silu, random inputs from a fixed seed. On a CUDA device the tensors live in
 * device memory allocated through the driver for the test (the only place libcc1d allocates or
 * copies device memory), launches go to the legacy default stream and each call is
 * synchronised. A backend that cannot serve the device fails as an op would
 * (CC1D_ERR_BACKEND_UNAVAILABLE, with the reason); a wrong result is CC1D_OK with passed = 0. */
CC1D_API cc1d_status cc1d_self_test(int32_t backend, int32_t device_type, int32_t device_index,
                                    cc1d_self_test_result* result);

/* Writes a JSON report (versions, torch facts, ops, devices, driver, NVRTC candidates with the
 * reason each was accepted or rejected, backend decisions, caches) into buf. If buf is too
 * small (or NULL), returns CC1D_ERR_BUFFER_TOO_SMALL and sets *needed to the size required
 * including the NUL. Probes the GPU environment on first use (never fails because of it). */
CC1D_API cc1d_status cc1d_report(char* buf, size_t buf_size, size_t* needed);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* CC1D_CC1D_H */
