// ptx_pack_none.cpp — the empty shipped PTX pack: a libcc1d built without the tier
// (CC1D_PTX_TIER=OFF, or no NVRTC at build time) and the tool that makes the pack.
#include "nvrtc/ptx_tier.h"

namespace cc1d {

const PtxPack& shipped_ptx_pack() {
  static const PtxPack pack{nullptr, 0, nullptr, 0};
  return pack;
}

}  // namespace cc1d
