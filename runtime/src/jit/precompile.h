// precompile.h — `causal-conv1d precompile`: every requested kernel variant compiled, on a
// machine without a GPU, for each arch of a fleet, into a directory that GPU nodes use as a
// read-only tier (CAUSAL_CONV1D_CACHE_PATH), plus its manifest and its targets (tier_targets.h: a
// node with no compiler takes its keys from there).
//
// The toolchain is an offline one (toolchain.h, OfflineTargets): its devices are the archs, each
// compiled for exactly as a node would (same compiler choice, target, options, kernel sources),
// so the keys are the node's keys. Variants come from the ops' own lists (OpEntry::kernels), so
// a new op is precompiled without a change here. Compiles run in parallel, one per thread.
#pragma once
#include <string>
#include <vector>

#include "cc1d/cc1d.h"
#include "jit/toolchain.h"

namespace cc1d {

struct PrecompileRequest {
  std::string out_dir;
  std::vector<int> ops;           // cc1d_op ids; empty: every op with kernels
  std::vector<cc1d_dtype> dtypes; // element types a variant may use; empty: fp32, fp16, bf16
  std::vector<int> widths;        // 1..CC1D_MAX_WIDTH; empty: all
  int jobs = 0;                   // compile threads; 0: one per core
};

// The archs of a fleet (precompile's default): Turing to Blackwell.
const std::vector<int>& default_precompile_archs();

// The top-level template arguments of a name expression, trimmed ("float", "4", ...).
std::vector<std::string> template_args(const std::string& name);

// The variants of `op` that the filters keep. An element type is one of kernel_type_name()'s
// words among a name expression's template arguments; the width is its first integer template
// argument (every op's kernel template takes the element types first, then the width). A
// variant is kept when every element type it names is among `dtypes` and its width among
// `widths` (empty lists keep all).
std::vector<std::string> filter_variants(const std::vector<std::string>& kernels, const std::vector<cc1d_dtype>& dtypes,
                                         const std::vector<int>& widths);

// Compiles every variant for every device of `toolchain` (already probed, each device usable)
// into req.out_dir, skipping those already there. Writes out_dir/manifest.json and returns the
// same JSON. Throws CC1D_ERR_COMPILE, naming each failed variant, after compiling all others.
std::string precompile(Toolchain& toolchain, const PrecompileRequest& req);

}  // namespace cc1d
