// fwd_problem.h — a validated forward call, the common input of every backend.
#pragma once
#include <cstdint>

#include "cc1d/cc1d.h"

namespace cc1d {

// A tensor after validation: rank fixed by its role, strides in elements.
struct TensorRef {
  void* data = nullptr;
  cc1d_dtype dtype = CC1D_FLOAT32;
  int64_t shape[3] = {0, 0, 0};
  int64_t strides[3] = {0, 0, 0};
  bool present() const { return data != nullptr; }
};

struct FwdProblem {
  int64_t batch = 0, dim = 0, seqlen = 0;
  int width = 0;
  bool silu = false;
  cc1d_device_type device_type = CC1D_DEVICE_CPU;
  int device_index = 0;
  cc1d_dtype x_dtype = CC1D_FLOAT32;  // also out and states
  cc1d_dtype w_dtype = CC1D_FLOAT32;  // also bias
  TensorRef x, weight, bias, seq_idx, initial_states, out, final_states;  // absent: data==nullptr
};

// Checks every argument (null pointers, ranks, shapes, dtypes, devices, output aliasing) and
// throws cc1d::Error naming the argument, what was expected and what came.
FwdProblem validate_fwd(const cc1d_fwd_args* args);

// "float32", "float16", "bfloat16", "int32" or "dtype(N)".
const char* dtype_name(int32_t dtype);

}  // namespace cc1d
