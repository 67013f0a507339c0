// arg_table.h — table-driven validation of an op's tensor arguments.
//
// Each op describes its arguments as rows (ArgRow): which struct member holds the tensor,
// whether it is required, input or output, its dtype rule, its ranks and one rule per
// dimension in terms of size symbols the op's arguments share (batch, dim, width, ...).
// bind_args() checks every row in order and returns the validated tensors and the symbol
// values, or throws an Error that names the function, the argument, what was expected and
// what came. Checks, in order: NULL pointers, rank, device, negative sizes and strides,
// dtype, shapes against the symbols (the first row that mentions a symbol binds it), data
// pointer NULL or misaligned, overflow of the byte span, outputs that overlap themselves,
// and outputs that overlap any other argument (unless the row allows it).
#pragma once
#include <cstddef>
#include <cstdint>
#include <limits>

#include "core/tensor.h"

namespace cc1d {

constexpr int kMaxArgRows = 12;
constexpr int kMaxSymbols = 8;
constexpr int64_t kNoLimit = std::numeric_limits<int64_t>::max();

struct SymbolSpec {
  const char* name;  // "width"
  int64_t lo = 0, hi = kNoLimit;  // allowed range once bound
};

enum class Role : uint8_t { In, Out, InOut };  // InOut: read and written in place

struct DtypeRule {
  enum Kind : uint8_t { AnyFloat, Int32, SameAs, Float32 } kind = AnyFloat;  // Float32: scratch buffers
  int8_t row = -1;          // SameAs: the row whose dtype this one must have
  const char* why = "";     // SameAs: "states have x's dtype"
};

// A dimension's size: symbol + offset (binding the symbol the first time it is seen), at least
// symbol + offset, or anything.
struct DimRule {
  int8_t sym = -1;  // -1: any size
  int8_t offset = 0;
  bool at_least = false;
};

struct ArgRow {
  const char* name;
  size_t member;  // offsetof(<args struct>, <field>), a `const cc1d_tensor*`
  bool required;
  Role role;
  DtypeRule dtype;
  int8_t min_rank, rank;  // ranks min_rank..rank; missing trailing dims count as size 1
  DimRule dims[CC1D_MAX_RANK];
  uint32_t may_overlap = 0;  // bit i: this output may share memory with row i
};

struct OpTable {
  const char* fn;            // the C entry point, for messages
  const char* args_struct;   // its argument struct, for messages: "cc1d_fwd_args"
  size_t min_struct_size;    // the smallest struct_size accepted
  const SymbolSpec* syms;
  int nsyms;
  const ArgRow* rows;
  int nrows;
};

struct BoundArgs {
  TensorRef t[kMaxArgRows];     // by row; `given` false for an absent optional argument
  int64_t sym[kMaxSymbols];     // symbol values; -1 when no row bound it
  cc1d_device_type device_type = CC1D_DEVICE_CPU;
  int device_index = 0;
  ByteSpan written[kMaxArgRows];  // the memory of the present Role::Out tensors (overwritten whole)
  int nwritten = 0;
};

// Building blocks of the ops' tables (each op names its own symbols in an enum `Sym`).
constexpr DtypeRule kFloat{DtypeRule::AnyFloat};
constexpr DtypeRule kInt32{DtypeRule::Int32};
constexpr DtypeRule kFloat32{DtypeRule::Float32};
// A dim of size symbol + offset; at least symbol + offset.
template <typename Sym>
constexpr DimRule dim(Sym sym, int8_t offset = 0) { return DimRule{static_cast<int8_t>(sym), offset, false}; }
template <typename Sym>
constexpr DimRule at_least(Sym sym, int8_t offset) { return DimRule{static_cast<int8_t>(sym), offset, true}; }

// `args` points to the op's argument struct (struct_size first). Throws on the first problem.
BoundArgs bind_args(const OpTable& table, const void* args);

// The `activation` member (cc1d_activation): true for silu, false for none; throws otherwise.
bool silu_activation(const OpTable& table, int32_t activation);

// Throws CC1D_ERR_INVALID_ARGUMENT "<fn>: <arg>: <what>".
[[noreturn]] void bad_arg(const OpTable& table, const char* arg, const std::string& what,
                          cc1d_status status = CC1D_ERR_INVALID_ARGUMENT);

}  // namespace cc1d
