// kernels_fwd_f16.cpp — host instantiations of the forward kernel with x of type cc1d::half_t
// (see kernels_fwd.inc).
#define CC1D_EMU_TX cc1d::half_t
#define CC1D_EMU_TX_DTYPE CC1D_FLOAT16
#define CC1D_EMU_ADD add_fwd_kernels_f16
#include "kernels_fwd.inc"
