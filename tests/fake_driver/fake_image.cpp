// fake_image.cpp — what the fake libcuda checks in a kernel image, the way a real driver would:
// a cubin must be a CUDA ELF for an SM the device can run (same major, minor <= the device's),
// PTX must target an SM at or below the device's and have an ISA version the driver knows,
// and cuModuleGetFunction only finds entries the image defines.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>

#include "fake_state.h"
#include "nvrtc/cubin_elf.h"

namespace fake {

namespace {

uint64_t rd(const unsigned char* p, int n) {  // little-endian
  uint64_t v = 0;
  for (int i = 0; i < n; ++i) v |= static_cast<uint64_t>(p[i]) << (8 * i);
  return v;
}

// The extent of an ELF image from its headers: the furthest of the section and program
// header tables and every section with file contents. 0 if the headers are not plausible.
size_t elf_size(const unsigned char* b) {
  const bool is64 = b[4] == 2;
  if (b[5] != 1) return 0;  // cubins are little-endian
  const uint64_t phoff = is64 ? rd(b + 32, 8) : rd(b + 28, 4);
  const uint64_t shoff = is64 ? rd(b + 40, 8) : rd(b + 32, 4);
  const uint64_t phentsize = rd(b + (is64 ? 54 : 42), 2), phnum = rd(b + (is64 ? 56 : 44), 2);
  const uint64_t shentsize = rd(b + (is64 ? 58 : 46), 2), shnum = rd(b + (is64 ? 60 : 48), 2);
  const uint64_t limit = 1ull << 30;
  if (phoff > limit || shoff > limit) return 0;
  uint64_t size = is64 ? 64 : 52;
  if (phnum > 0) size = std::max<uint64_t>(size, phoff + phnum * phentsize);
  if (shnum > 0) size = std::max<uint64_t>(size, shoff + shnum * shentsize);
  for (uint64_t i = 0; i < shnum; ++i) {
    const unsigned char* sh = b + shoff + i * shentsize;
    const uint64_t type = rd(sh + 4, 4);
    const uint64_t off = is64 ? rd(sh + 24, 8) : rd(sh + 16, 4);
    const uint64_t sz = is64 ? rd(sh + 32, 8) : rd(sh + 20, 4);
    if (type == 8 /* SHT_NOBITS */) continue;
    if (off > limit || sz > limit) return 0;
    size = std::max(size, off + sz);
  }
  return static_cast<size_t>(size);
}

// "sm_90" / "sm_90a" -> 90, after `key` in PTX text; -1 if absent.
int ptx_number_after(const std::string& text, const char* key, int* minor) {
  const size_t at = text.find(key);
  if (at == std::string::npos) return -1;
  const char* p = text.c_str() + at + std::strlen(key);
  while (*p == ' ' || *p == '\t') ++p;
  if (std::strncmp(p, "sm_", 3) == 0) p += 3;
  char* end = nullptr;
  const long major = std::strtol(p, &end, 10);
  if (end == p) return -1;
  if (minor != nullptr) *minor = (*end == '.') ? static_cast<int>(std::strtol(end + 1, nullptr, 10)) : 0;
  return static_cast<int>(major);
}

}  // namespace

CUresult read_image(const void* data, Image* out, std::string* why) {
  if (data == nullptr) {
    *why = "cuModuleLoadData: image is NULL";
    return FAKE_CUDA_ERROR_INVALID_VALUE;
  }
  const auto* b = static_cast<const unsigned char*>(data);
  if (std::memcmp(b, "\x7f" "ELF", 4) == 0) {
    const size_t size = elf_size(b);
    if (size == 0) {
      *why = "cuModuleLoadData: ELF headers are not those of a CUDA cubin";
      return FAKE_CUDA_ERROR_INVALID_IMAGE;
    }
    out->bytes.assign(reinterpret_cast<const char*>(b), size);
    out->ptx = false;
    out->sm = cc1d::cubin_sm(out->bytes.data(), out->bytes.size());
    if (out->sm < 0) {
      *why = "cuModuleLoadData: an ELF image that is not a CUDA cubin (e_machine is not EM_CUDA)";
      return FAKE_CUDA_ERROR_INVALID_IMAGE;
    }
    return FAKE_CUDA_SUCCESS;
  }
  const size_t len = strnlen(static_cast<const char*>(data), 64u << 20);
  if (!cc1d::looks_like_ptx(data, len)) {
    *why = "cuModuleLoadData: neither a cubin nor PTX text";
    return FAKE_CUDA_ERROR_INVALID_IMAGE;
  }
  out->bytes.assign(static_cast<const char*>(data), len);
  out->ptx = true;
  int isa_minor = 0;
  out->ptx_isa_major = ptx_number_after(out->bytes, ".version", &isa_minor);
  out->sm = ptx_number_after(out->bytes, ".target", nullptr);
  if (out->sm < 0 || out->ptx_isa_major < 0) {
    *why = "cuModuleLoadData: PTX without .version or .target";
    return FAKE_CUDA_ERROR_INVALID_IMAGE;
  }
  return FAKE_CUDA_SUCCESS;
}

CUresult check_image_runs(const Image& image, int device_sm, int version, std::string* why) {
  if (!image.ptx) {
    if (image.sm / 10 != device_sm / 10 || image.sm % 10 > device_sm % 10) {
      *why = "cuModuleLoadData: cubin for sm_" + std::to_string(image.sm) + " cannot run on this sm_" +
             std::to_string(device_sm) + " device";
      return FAKE_CUDA_ERROR_NO_BINARY_FOR_GPU;
    }
    return FAKE_CUDA_SUCCESS;
  }
  // PTX ISA 7.x came with CUDA 11, 8.x with CUDA 12, 9.x with CUDA 13.
  const int needs_major = image.ptx_isa_major + 4;
  if (version / 1000 < needs_major) {
    *why = "cuModuleLoadData: PTX ISA " + std::to_string(image.ptx_isa_major) + ".x needs a CUDA " +
           std::to_string(needs_major) + " driver, this one is " + std::to_string(version);
    return FAKE_CUDA_ERROR_UNSUPPORTED_PTX_VERSION;
  }
  if (image.sm > device_sm) {
    *why = "cuModuleLoadData: PTX for sm_" + std::to_string(image.sm) + " cannot be JIT-compiled for sm_" +
           std::to_string(device_sm);
    return FAKE_CUDA_ERROR_NO_BINARY_FOR_GPU;
  }
  return FAKE_CUDA_SUCCESS;
}

bool image_has_entry(const Image& image, const char* name) {
  if (name == nullptr || *name == '\0') return false;
  const std::string& s = image.bytes;
  if (image.ptx) {
    const std::string key = std::string(".entry ") + name;
    for (size_t at = s.find(key); at != std::string::npos; at = s.find(key, at + 1)) {
      const char next = at + key.size() < s.size() ? s[at + key.size()] : '\0';
      if (next == '(' || next == ' ' || next == '\n' || next == '\t' || next == '\r') return true;
    }
    return false;
  }
  // A symbol name in the ELF string table: NUL before and after.
  const std::string key = std::string(1, '\0') + name + std::string(1, '\0');
  return s.find(key) != std::string::npos;
}

}  // namespace fake
