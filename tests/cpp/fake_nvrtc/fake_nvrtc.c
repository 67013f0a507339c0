/* fake_nvrtc.c — a fake libnvrtc for discovery tests. Built several times by gpu_tests.cmake
 * with different FAKE_MAJOR / FAKE_MINOR / FAKE_ARCHS, so the search order, the version and arch
 * queries, and every rejection rule can be exercised without any real toolkit.
 *   FAKE_NO_ARCH_API  omit nvrtcGetSupportedArchs (like NVRTC < 11.2)
 *   FAKE_NO_COMPILE   omit nvrtcCompileProgram (an incomplete library)
 * Compiling always fails: these libraries only ever answer questions. */
#include <stddef.h>

#define API __attribute__((visibility("default")))

static const int kArchs[] = {FAKE_ARCHS};

API int nvrtcVersion(int* major, int* minor) {
  *major = FAKE_MAJOR;
  *minor = FAKE_MINOR;
  return 0;
}
API int nvrtcGetNumSupportedArchs(int* n) {
  *n = (int)(sizeof kArchs / sizeof kArchs[0]);
  return 0;
}
#ifndef FAKE_NO_ARCH_API
API int nvrtcGetSupportedArchs(int* archs) {
  for (size_t i = 0; i < sizeof kArchs / sizeof kArchs[0]; ++i) archs[i] = kArchs[i];
  return 0;
}
#endif
API const char* nvrtcGetErrorString(int r) { return r ? "NVRTC_ERROR_FAKE" : "NVRTC_SUCCESS"; }
API int nvrtcCreateProgram(void** p, const char* s, const char* n, int h, const char* const* a,
                           const char* const* b) {
  (void)s; (void)n; (void)h; (void)a; (void)b;
  *p = NULL;
  return 5; /* NVRTC_ERROR_PROGRAM_CREATION_FAILURE */
}
API int nvrtcDestroyProgram(void** p) { (void)p; return 0; }
#ifndef FAKE_NO_COMPILE
API int nvrtcCompileProgram(void* p, int n, const char* const* o) { (void)p; (void)n; (void)o; return 6; }
#endif
API int nvrtcGetPTXSize(void* p, size_t* s) { (void)p; *s = 0; return 1; }
API int nvrtcGetPTX(void* p, char* s) { (void)p; (void)s; return 1; }
API int nvrtcGetCUBINSize(void* p, size_t* s) { (void)p; *s = 0; return 1; }
API int nvrtcGetCUBIN(void* p, char* s) { (void)p; (void)s; return 1; }
API int nvrtcGetProgramLogSize(void* p, size_t* s) { (void)p; *s = 0; return 1; }
API int nvrtcGetProgramLog(void* p, char* s) { (void)p; (void)s; return 1; }
API int nvrtcAddNameExpression(void* p, const char* n) { (void)p; (void)n; return 1; }
API int nvrtcGetLoweredName(void* p, const char* n, const char** l) { (void)p; (void)n; *l = NULL; return 1; }
