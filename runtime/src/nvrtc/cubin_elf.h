// cubin_elf.h — reads the target SM out of a CUDA cubin's ELF header.
//
// Used to check, before cuModuleLoadData, that a cubin (fresh from NVRTC or from the disk
// cache) was built for the device it is about to run on, and by tests and the fake driver
// to check what they were handed. No dependency on <elf.h> or any CUDA header.
#pragma once
#include <cstddef>

namespace cc1d {

// The SM (major*10 + minor, e.g. 90 for sm_90/sm_90a, 120 for sm_120) named by the ELF header
// of a CUDA cubin, or -1 if `image` is not a well-formed CUDA ELF (too short, not ELF,
// machine is not EM_CUDA, unknown class/encoding, or an SM field of 0).
//
// Two header encodings exist (see EF_CUDA_* in LLVM's BinaryFormat/ELF.h):
//  - EI_ABIVERSION 7 and older ("V1", toolkits up to 12.x): SM in e_flags bits 0..7,
//    virtual SM in bits 16..23, feature bits (0x100/0x200/0x400/0x800) in bits 8..11.
//  - EI_ABIVERSION 8 ("V2", CUDA 12.8+ for Blackwell, CUDA 13 for every SM):
//    SM in e_flags bits 8..15, low byte holds other flags (e.g. 0x04, 0x02, 0x08 = 'a').
int cubin_sm(const void* image, size_t size);

// The EI_ABIVERSION byte of a CUDA ELF (7 or 8 today), or -1 if not a CUDA ELF.
int cubin_abi_version(const void* image, size_t size);

// True if `image` starts like PTX text (".version" after optional comments/whitespace) —
// the other payload the runtime hands to cuModuleLoadData.
bool looks_like_ptx(const void* image, size_t size);

}  // namespace cc1d
