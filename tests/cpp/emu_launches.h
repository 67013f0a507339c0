// emu_launches.h — how many times the emulator has run one host kernel, by its name expression:
// the tests that check which variant the planner chose count its launches before and after.
#pragma once
#include <doctest/doctest.h>

#include <cstdint>
#include <string>

#include "fallback/emulator/kernel_registry.h"

namespace cc1d_test {

inline uint64_t emu_launches(const std::string& name) {
  const cc1d::emu::HostKernel* k = cc1d::emu::find_host_kernel(name);
  REQUIRE_MESSAGE(k != nullptr, name);
  return cc1d::emu::host_kernel_launches(*k);
}

}  // namespace cc1d_test
