// fake_capture.cpp — CUDA-graph stream capture as the fake libcuda models it: which calls a
// capture in progress refuses, per the driver's rules for cuThreadExchangeStreamCaptureMode.
// A test begins a capture on its thread with cc1d_fake_begin_capture (standing in for
// cuStreamBeginCapture on the caller's stream) and learns at cc1d_fake_end_capture whether a
// refused call invalidated it. Only module loading is modelled as potentially unsafe: it is the
// one such call the runtime makes on a first use (allocation, copies and synchronisation are
// counted elsewhere and must never happen at all).
#include <mutex>
#include <thread>
#include <utility>

#include "fake_api.h"

namespace fake {

namespace {

constexpr int kGlobal = 0, kThreadLocal = 1, kRelaxed = 2;  // CUstreamCaptureMode

std::mutex g_mu;
bool g_capturing = false;
int g_capture_mode = kGlobal;
std::thread::id g_capturer;
bool g_invalidated = false;
thread_local int t_mode = kGlobal;

}  // namespace

CUresult refuse_if_capturing(const char* call) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (!g_capturing || g_capture_mode == kRelaxed || t_mode == kRelaxed) return FAKE_CUDA_SUCCESS;
  const bool mine = g_capturer == std::this_thread::get_id();
  // Global: refused while this thread captures or any thread runs a global capture;
  // thread-local: only while this thread captures.
  if (!mine && !(t_mode == kGlobal && g_capture_mode == kGlobal)) return FAKE_CUDA_SUCCESS;
  g_invalidated = true;
  return failed(FAKE_CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
                std::string(call) + ": not permitted while a stream is capturing (the capture is now invalid)");
}

}  // namespace fake

FAKE_EXPORT CUresult cuThreadExchangeStreamCaptureMode(int* mode) {
  if (CUresult r = fake::stub_or_uninit()) return r;
  if (mode == nullptr || *mode < fake::kGlobal || *mode > fake::kRelaxed)
    return fake::failed(FAKE_CUDA_ERROR_INVALID_VALUE, "cuThreadExchangeStreamCaptureMode: invalid mode");
  std::swap(*mode, fake::t_mode);
  return FAKE_CUDA_SUCCESS;
}

FAKE_EXPORT int cc1d_fake_begin_capture(int mode) {
  std::lock_guard<std::mutex> lock(fake::g_mu);
  if (fake::g_capturing || mode < fake::kGlobal || mode > fake::kRelaxed) return FAKE_CUDA_ERROR_INVALID_VALUE;
  fake::g_capturing = true;
  fake::g_capture_mode = mode;
  fake::g_capturer = std::this_thread::get_id();
  fake::g_invalidated = false;
  return FAKE_CUDA_SUCCESS;
}

FAKE_EXPORT int cc1d_fake_end_capture(void) {
  std::lock_guard<std::mutex> lock(fake::g_mu);
  if (!fake::g_capturing) return FAKE_CUDA_ERROR_INVALID_VALUE;
  fake::g_capturing = false;
  return fake::g_invalidated ? FAKE_CUDA_ERROR_STREAM_CAPTURE_INVALIDATED : FAKE_CUDA_SUCCESS;
}

FAKE_EXPORT int cc1d_fake_capture_mode(void) { return fake::t_mode; }
