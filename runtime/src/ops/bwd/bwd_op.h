// bwd_op.h — the backward op: its validated problem, its geometry, its registry entry and its
// parts (validation and the C entry points in bwd_op.cpp, the kernel plan in bwd_plan.cpp, the
// CPU implementation in fallback/cpu/bwd_cpu.cpp, the kernels in kernels_src/bwd.cuh).
#pragma once
#include <cstdint>

#include "core/tensor.h"
#include "ops/bwd/bwd_kernels.h"
#include "ops/conv_inputs.h"
#include "ops/op.h"

namespace cc1d {

struct BwdProblem : ConvProblem {
  bool deterministic = false;  // args.deterministic or CAUSAL_CONV1D_DETERMINISTIC
  TensorRef dout, dfinal_states, dx, dweight, dbias, dinitial_states;  // absent: !given
  TensorRef workspace_arg;  // the caller's workspace tensor (Problem::workspace points to its data)
  bool wants_sums() const { return dweight.present() || dbias.present(); }
};

// How the kernels split the work; the workspace size follows from it.
struct BwdGeometry {
  int layout = 0;                      // kBwdLayout* (bwd_params.h)
  int64_t segment_len = 0;             // time steps per segment
  int64_t num_segments = 0;            // segments per row
  int64_t num_channel_blocks = 0;      // time layouts: dim; channel layout: ceil(dim / threads)
  int64_t parts = 0;                   // rows of fp32 partial sums: 1, or batch * num_segments
  size_t workspace_bytes = 0;          // parts * dim * (width+1) floats; 0 without dweight/dbias
};

// Validates every argument (arg_table.h's checks, then the workspace's size and stride).
BwdProblem validate_bwd(const cc1d_bwd_args* args);

BwdGeometry bwd_geometry(const BwdProblem& problem);                  // bwd_plan.cpp
std::vector<KernelLaunch> plan_bwd(const Problem& problem, void* workspace);  // bwd_plan.cpp
void bwd_cpu(const Problem& problem);                                 // fallback/cpu/bwd_cpu.cpp

extern const OpEntry kBwdOp;

}  // namespace cc1d
