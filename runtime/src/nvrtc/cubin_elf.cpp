#include "nvrtc/cubin_elf.h"

#include <cstdint>
#include <cstring>

namespace cc1d {

namespace {

constexpr unsigned char kElfMagic[4] = {0x7f, 'E', 'L', 'F'};
constexpr int kEiClass = 4, kEiData = 5, kEiAbiVersion = 8;
constexpr unsigned char kElfClass32 = 1, kElfClass64 = 2, kElfDataLsb = 1, kElfDataMsb = 2;
constexpr uint16_t kEmCuda = 190;
constexpr int kAbiV1Max = 7;  // ELFABIVERSION_CUDA_V1; 8 is V2

// Reads an unsigned little/big-endian integer of n bytes at p (no alignment assumed).
uint32_t read_uint(const unsigned char* p, int n, bool lsb) {
  uint32_t v = 0;
  for (int i = 0; i < n; ++i) {
    const int shift = 8 * (lsb ? i : n - 1 - i);
    v |= static_cast<uint32_t>(p[i]) << shift;
  }
  return v;
}

// Validates the parts of the header we rely on; fills abi and flags.
bool read_cuda_header(const void* image, size_t size, int* abi, uint32_t* flags) {
  if (image == nullptr || size < 52) return false;  // 52 = sizeof(Elf32_Ehdr)
  const auto* b = static_cast<const unsigned char*>(image);
  if (std::memcmp(b, kElfMagic, 4) != 0) return false;
  const unsigned char cls = b[kEiClass], data = b[kEiData];
  if ((cls != kElfClass32 && cls != kElfClass64) || (data != kElfDataLsb && data != kElfDataMsb))
    return false;
  const bool lsb = data == kElfDataLsb;
  // e_machine sits at 18 in both classes; e_flags at 36 (ELF32) or 48 (ELF64).
  if (read_uint(b + 18, 2, lsb) != kEmCuda) return false;
  const size_t flags_off = cls == kElfClass64 ? 48 : 36;
  if (size < flags_off + 4 || (cls == kElfClass64 && size < 64)) return false;
  *abi = b[kEiAbiVersion];
  *flags = read_uint(b + flags_off, 4, lsb);
  return true;
}

}  // namespace

int cubin_sm(const void* image, size_t size) {
  int abi = 0;
  uint32_t flags = 0;
  if (!read_cuda_header(image, size, &abi, &flags)) return -1;
  const int sm = abi <= kAbiV1Max ? static_cast<int>(flags & 0xffu)
                                  : static_cast<int>((flags >> 8) & 0xffu);
  return sm > 0 ? sm : -1;
}

int cubin_abi_version(const void* image, size_t size) {
  int abi = 0;
  uint32_t flags = 0;
  return read_cuda_header(image, size, &abi, &flags) ? abi : -1;
}

bool looks_like_ptx(const void* image, size_t size) {
  const char* p = static_cast<const char*>(image);
  if (p == nullptr) return false;
  size_t i = 0;
  while (i < size) {
    const char c = p[i];
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      ++i;
    } else if (c == '/' && i + 1 < size && p[i + 1] == '/') {  // line comment
      while (i < size && p[i] != '\n') ++i;
    } else if (c == '/' && i + 1 < size && p[i + 1] == '*') {  // block comment
      i += 2;
      while (i + 1 < size && !(p[i] == '*' && p[i + 1] == '/')) ++i;
      i += 2;
    } else {
      static const char kVersion[] = ".version";
      return size - i >= sizeof(kVersion) - 1 &&
             std::memcmp(p + i, kVersion, sizeof(kVersion) - 1) == 0;
    }
  }
  return false;
}

}  // namespace cc1d
