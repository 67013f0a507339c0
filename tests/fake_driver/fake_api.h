// fake_api.h — declarations of every driver entry point libcc1d uses, generated from the
// runtime's own lists (runtime/src/nvrtc/cuda_api.def, cuda_extra_api.def). The fake's definitions must match these
// signatures (C linkage: a mismatch does not compile), and its cuGetProcAddress table is built
// from the same list, so the fake can never drift from what the runtime resolves.
#pragma once
#include "fake_state.h"

using CUresult = int;
using CUdevice = int;
using CUcontext = void*;
using CUmodule = void*;
using CUfunction = void*;
using CUstream = void*;
using CUdeviceptr = unsigned long long;
using CUjit_option = int;
using CUlinkState = void*;

#define CC1D_CUDA_FN(name, sym, ret, params) FAKE_EXPORT ret sym params;
#include "runtime/src/nvrtc/cuda_api.def"
#include "runtime/src/nvrtc/cuda_extra_api.def"
#undef CC1D_CUDA_FN
