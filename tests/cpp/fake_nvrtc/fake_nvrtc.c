/* fake_nvrtc.c — a fake libnvrtc for discovery tests. Built several times by gpu_tests.cmake
 * with different FAKE_MAJOR / FAKE_MINOR / FAKE_ARCHS, so the search order, the version and arch
 * queries, and every rejection rule can be exercised without any real toolkit.
 *   FAKE_NO_ARCH_API  omit nvrtcGetSupportedArchs (like NVRTC < 11.2)
 *   FAKE_NO_COMPILE   omit nvrtcCompileProgram (an incomplete library)
 *   FAKE_NO_BUILTINS  a program is created, and its compile fails as NVRTC's does when it cannot
 *                     load libnvrtc-builtins (NVRTC_ERROR_BUILTIN_OPERATION_FAILURE, with its log)
 * Compiling always fails: these libraries only ever answer questions. */
#include <stddef.h>
#include <string.h>

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
static int g_program; /* the one program handle FAKE_NO_BUILTINS hands out */
#ifdef FAKE_NO_BUILTINS
#define FAKE_CREATE_STATUS 0
#define FAKE_COMPILE_STATUS 7 /* NVRTC_ERROR_BUILTIN_OPERATION_FAILURE */
#define FAKE_NAME_STATUS 0
static const char kLog[] = "nvrtc: error: failed to open libnvrtc-builtins.so.13.0.\n"
                           "  Make sure that libnvrtc-builtins.so.13.0 is installed correctly.\n";
#else
#define FAKE_CREATE_STATUS 5 /* NVRTC_ERROR_PROGRAM_CREATION_FAILURE */
#define FAKE_COMPILE_STATUS 6
#define FAKE_NAME_STATUS 1
static const char kLog[] = "";
#endif
API int nvrtcCreateProgram(void** p, const char* s, const char* n, int h, const char* const* a,
                           const char* const* b) {
  (void)s; (void)n; (void)h; (void)a; (void)b;
  *p = FAKE_CREATE_STATUS == 0 ? (void*)&g_program : NULL;
  return FAKE_CREATE_STATUS;
}
API int nvrtcDestroyProgram(void** p) { (void)p; return 0; }
#ifndef FAKE_NO_COMPILE
API int nvrtcCompileProgram(void* p, int n, const char* const* o) { (void)p; (void)n; (void)o; return FAKE_COMPILE_STATUS; }
#endif
API int nvrtcGetPTXSize(void* p, size_t* s) { (void)p; *s = 0; return 1; }
API int nvrtcGetPTX(void* p, char* s) { (void)p; (void)s; return 1; }
API int nvrtcGetCUBINSize(void* p, size_t* s) { (void)p; *s = 0; return 1; }
API int nvrtcGetCUBIN(void* p, char* s) { (void)p; (void)s; return 1; }
API int nvrtcGetProgramLogSize(void* p, size_t* s) { (void)p; *s = sizeof kLog; return 0; }
API int nvrtcGetProgramLog(void* p, char* s) { (void)p; memcpy(s, kLog, sizeof kLog); return 0; }
API int nvrtcAddNameExpression(void* p, const char* n) { (void)p; (void)n; return FAKE_NAME_STATUS; }
API int nvrtcGetLoweredName(void* p, const char* n, const char** l) { (void)p; (void)n; *l = NULL; return 1; }
