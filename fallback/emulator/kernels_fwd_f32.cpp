// kernels_fwd_f32.cpp — host instantiations of the forward kernel with x of type float
// (see kernels_fwd.inc).
#define CC1D_EMU_TX float
#define CC1D_EMU_TX_DTYPE CC1D_FLOAT32
#define CC1D_EMU_ADD add_fwd_kernels_f32
#include "kernels_fwd.inc"
