// fake_cubin.h — a synthetic cubin: what the fake libcuda's linker returns for PTX, and what
// the fake-driver tests load.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

namespace fake {

inline void put(std::string& s, size_t at, uint64_t v, int n) {
  for (int i = 0; i < n; ++i) s[at + i] = static_cast<char>((v >> (8 * i)) & 0xff);
}

// A minimal CUDA ELF: header naming `sm` (ABI v8 layout, or v7 when abi == 7) and a string
// table holding `symbols`, described by a section header table.
inline std::string make_cubin(int sm, const std::vector<std::string>& symbols, int abi = 8) {
  std::string strtab(1, '\0');
  for (const std::string& s : symbols) strtab += s + std::string(1, '\0');
  const size_t shoff = (64 + strtab.size() + 7) / 8 * 8;
  std::string img(shoff + 2 * 64, '\0');
  img.replace(0, 4, "\x7f" "ELF");
  img[4] = 2;      // ELFCLASS64
  img[5] = 1;      // little-endian
  img[6] = 1;      // EV_CURRENT
  img[7] = 0x33;   // ELFOSABI_CUDA
  img[8] = static_cast<char>(abi);
  put(img, 16, 2, 2);    // ET_EXEC
  put(img, 18, 190, 2);  // EM_CUDA
  put(img, 20, 1, 4);
  put(img, 40, shoff, 8);
  put(img, 48, abi >= 8 ? static_cast<uint64_t>(sm) << 8 : static_cast<uint64_t>(sm), 4);
  put(img, 52, 64, 2);
  put(img, 58, 64, 2);
  put(img, 60, 2, 2);
  put(img, 62, 1, 2);
  img.replace(64, strtab.size(), strtab);
  const size_t sh1 = shoff + 64;
  put(img, sh1 + 4, 3, 4);  // SHT_STRTAB
  put(img, sh1 + 24, 64, 8);
  put(img, sh1 + 32, strtab.size(), 8);
  return img;
}

}  // namespace fake
