// kernels_bwd_f32.cpp — host instantiations of the backward's main kernel with x of type
// float (see kernels_bwd.inc).
#define CC1D_EMU_TX float
#define CC1D_EMU_TX_DTYPE CC1D_FLOAT32
#define CC1D_EMU_ADD add_bwd_kernels_f32
#include "kernels_bwd.inc"
