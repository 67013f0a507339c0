// registry.cpp — the list of ops: one line per op.
#include "ops/fwd/fwd_op.h"
#include "ops/update/update_op.h"
#include "ops/op.h"

namespace cc1d {

const std::vector<const OpEntry*>& all_ops() {
  static const std::vector<const OpEntry*> ops = {
      &kFwdOp,
      &kUpdateOp,
  };
  return ops;
}

const OpEntry* find_op(int32_t id) {
  for (const OpEntry* op : all_ops())
    if (op->id == id) return op;
  return nullptr;
}

}  // namespace cc1d
