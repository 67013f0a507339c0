// gpu_limits.h — the CUDA launch limits every kernel-running piece checks against: the planners
// (which cap their grids and stride inside the kernel), the emulator and the fake driver.
#pragma once

namespace cc1d {

constexpr unsigned kMaxGridX = 0x7fffffffu;      // 2^31 - 1
constexpr unsigned kMaxGridYZ = 65535;
constexpr unsigned kMaxBlockThreads = 1024;      // per block, and per block dimension x and y
constexpr unsigned kMaxBlockZ = 64;
constexpr unsigned kMaxDefaultShared = 48 * 1024;  // dynamic shared memory without an opt-in
constexpr unsigned kMaxOptInShared = 227 * 1024;   // the most any GPU offers with the opt-in

}  // namespace cc1d
