// kernels_bwd_f16.cpp — host instantiations of the backward's main kernel with x of type
// cc1d::half_t (see kernels_bwd.inc).
#define CC1D_EMU_TX cc1d::half_t
#define CC1D_EMU_TX_DTYPE CC1D_FLOAT16
#define CC1D_EMU_ADD add_bwd_kernels_f16
#include "kernels_bwd.inc"
