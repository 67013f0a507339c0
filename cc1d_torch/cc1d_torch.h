/* cc1d_torch.h — the C entry points of the libtorch op library (libcc1d_torch.so), beside the ops it
 * registers with the torch dispatcher (causal_conv1d::fwd, causal_conv1d::update, ...; the list
 * is cc1d_torch/ops.def, the schemas are the Python package's).
 *
 * C++ users call the ops through the dispatcher; these functions serve the host framework. */
#ifndef CC1D_TORCH_H
#define CC1D_TORCH_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define CC1D_TORCH_API __attribute__((visibility("default")))

/* What the library was built against, as JSON: the same facts as its build record
 * libcc1d_torch.json (cc1d_version, abi, torch_version, torch_min, torch_cuda, cxx11_abi, ops). */
CC1D_TORCH_API const char* cc1d_torch_build_info(void);

/* Notices from the ops, to the host instead of stderr.
 *   CC1D_TORCH_NOTICE_FALLBACK  a backend could not serve and another one does: `message` says
 *                               which, why, and what to do; `key` identifies the reason (the host
 *                               shows each key once).
 *   CC1D_TORCH_NOTICE_CHOICE    after every call: `message` is a JSON object {op, backend,
 *                               requested, source, device, reason, fallback_from, host_copies}.
 * Called on the calling thread, inside the op; must not call back into torch. */
#define CC1D_TORCH_NOTICE_FALLBACK 0
#define CC1D_TORCH_NOTICE_CHOICE 1
typedef void (*cc1d_torch_notice_fn)(int32_t kind, const char* key, const char* message, void* user);
/* NULL: fallbacks go to stderr once per reason, choices nowhere. */
CC1D_TORCH_API void cc1d_torch_set_notice_callback(cc1d_torch_notice_fn fn, void* user);

#ifdef __cplusplus
}
#endif

#endif /* CC1D_TORCH_H */
