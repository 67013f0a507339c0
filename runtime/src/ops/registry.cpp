// registry.cpp — the list of ops (one line per op), and what their name expressions share.
#include "ops/bwd/bwd_op.h"
#include "ops/fwd/fwd_op.h"
#include "ops/update/update_op.h"
#include "ops/varlen/varlen_op.h"
#include "ops/op.h"

#include "core/error.h"

namespace cc1d {

const std::vector<const OpEntry*>& all_ops() {
  static const std::vector<const OpEntry*> ops = {
      &kFwdOp,
      &kUpdateOp,
      &kBwdOp,
      &kVarlenOp,
  };
  return ops;
}

const char* kernel_type_name(cc1d_dtype dtype) {
  switch (dtype) {
    case CC1D_FLOAT16: return "cc1d::half_t";
    case CC1D_BFLOAT16: return "cc1d::bf16_t";
    default: return "float";
  }
}

const OpEntry* find_op(int32_t id) {
  for (const OpEntry* op : all_ops())
    if (op->id == id) return op;
  return nullptr;
}

const char* kernel_file_of(const OpEntry& op) {
  if (op.kernel_file == nullptr) fail(CC1D_ERR_INTERNAL, std::string("op '") + op.name + "' names no kernel file");
  return op.kernel_file;
}

const OpEntry* find_kernel_op(const std::string& kernel) {
  for (const OpEntry* op : all_ops())
    if (op->kernels != nullptr)
      for (const std::string& k : op->kernels())
        if (k == kernel) return op;
  return nullptr;
}

}  // namespace cc1d
