// kernels_fwd_bf16.cpp — host instantiations of the forward kernel with x of type cc1d::bf16_t
// (see kernels_fwd.inc).
#define CC1D_EMU_TX cc1d::bf16_t
#define CC1D_EMU_TX_DTYPE CC1D_BFLOAT16
#define CC1D_EMU_ADD add_fwd_kernels_bf16
#include "kernels_fwd.inc"
