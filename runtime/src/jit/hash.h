// hash.h — SHA-256, used for kernel-source digests, cache keys and cache-entry checksums.
//
// A real cryptographic digest (not std::hash) so cache keys are stable across processes,
// compilers and library versions, and a stale or foreign entry cannot collide by accident.
#pragma once
#include <array>
#include <cstddef>
#include <cstdint>
#include <string>

namespace cc1d {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t size);
  void update(const std::string& s) { update(s.data(), s.size()); }
  // Length-prefixed field, so ("ab","c") and ("a","bc") hash differently.
  void update_field(const std::string& s);
  std::array<uint8_t, 32> digest();  // finalizes; the object must not be updated afterwards
  std::string hex_digest();

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
};

std::string sha256_hex(const void* data, size_t size);
inline std::string sha256_hex(const std::string& s) { return sha256_hex(s.data(), s.size()); }
std::string to_hex(const uint8_t* data, size_t size);

}  // namespace cc1d
