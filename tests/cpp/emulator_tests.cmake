# tests/cpp/emulator_tests.cmake — the emulator's and the fake driver's tests. Included by
# tests/cpp/CMakeLists.txt (which defines cc1d_add_test). Every test here carries the labels
# "emulator" and "asan", so the AddressSanitizer job (ctest -L asan) runs them too.
set(CC1D_EMU_TEST_DIR ${cc1d_SOURCE_DIR}/tests/cpp)

if(NOT CC1D_BUILD_EMULATOR)
  message(STATUS "emulator tests: off (CC1D_BUILD_EMULATOR=OFF)")
  return()
endif()

function(cc1d_emulator_labels)
  set_tests_properties(${ARGN} PROPERTIES LABELS "emulator;asan")
endfunction()

# Emulator semantics with small host-compiled kernels, and the broken-barrier kernel.
cc1d_add_test(test_emulator_core
  SOURCES ${CC1D_EMU_TEST_DIR}/test_emulator_core.cpp ${CC1D_EMU_TEST_DIR}/test_emulator_broken.cpp
          ${CC1D_EMU_TEST_DIR}/test_emulator_kernels.cpp ${CC1D_EMU_TEST_DIR}/broken_kernel.cpp
  LIBS cc1d_static
  ENVIRONMENT "CAUSAL_CONV1D_NUM_THREADS=4")
cc1d_emulator_labels(test_emulator_core)

# Every forward variant under the emulator, through the C ABI, in checking mode (cc1d_static
# for the per-kernel launch counters).
cc1d_add_test(test_emulator_fwd
  SOURCES ${CC1D_EMU_TEST_DIR}/test_emulator_fwd.cpp
  LIBS cc1d_static
  ENVIRONMENT "CAUSAL_CONV1D_EMULATE_CHECK=1")
cc1d_emulator_labels(test_emulator_fwd)

# The update op's kernel under the emulator, in checking mode (the same executable as test_update).
add_test(NAME test_update_emulate COMMAND test_update "--test-case=*emulate*")
set_tests_properties(test_update_emulate PROPERTIES ENVIRONMENT "CAUSAL_CONV1D_EMULATE_CHECK=1"
                     PASS_REGULAR_EXPRESSION "test cases: +2 \\| +2 passed \\| +0 failed")
cc1d_emulator_labels(test_update_emulate)

# The varlen-states kernel under the emulator, in checking mode (the same executable as test_varlen).
add_test(NAME test_varlen_emulate COMMAND test_varlen "--test-case=*emulate*")
set_tests_properties(test_varlen_emulate PROPERTIES ENVIRONMENT "CAUSAL_CONV1D_EMULATE_CHECK=1"
                     PASS_REGULAR_EXPRESSION "test cases: +3 \\| +3 passed \\| +0 failed")
cc1d_emulator_labels(test_varlen_emulate)

# Every backward variant under the emulator, in checking mode, and the deterministic mode's bits.
cc1d_add_test(test_emulator_bwd
  SOURCES ${CC1D_EMU_TEST_DIR}/test_emulator_bwd.cpp
  LIBS cc1d_static
  ENVIRONMENT "CAUSAL_CONV1D_EMULATE_CHECK=1")
cc1d_emulator_labels(test_emulator_bwd)

# The backend's kernel table, lowered-name lookup, availability and report.
cc1d_add_test(test_emulator_backend
  SOURCES ${CC1D_EMU_TEST_DIR}/test_emulator_backend.cpp
  LIBS cc1d_static
  ENVIRONMENT "CAUSAL_CONV1D_EMULATE_CHECK=1")
cc1d_emulator_labels(test_emulator_backend)

# ---- the fake libcuda and the end-to-end tests of the real GPU path on it ------------------------
include(${cc1d_SOURCE_DIR}/tests/fake_driver/fake_driver.cmake)

# The fake driver's own behaviour, with synthetic images (no NVRTC needed).
cc1d_add_test(test_fake_driver
  SOURCES ${CC1D_EMU_TEST_DIR}/test_fake_driver.cpp
  LIBS cc1d_static)
target_compile_definitions(test_fake_driver PRIVATE CC1D_FAKE_DRIVER_PATH="${CC1D_FAKE_DRIVER_PATH}")
add_dependencies(test_fake_driver cc1d_fake_cuda)
set_tests_properties(test_fake_driver PROPERTIES ENVIRONMENT "CAUSAL_CONV1D_EMULATE_CHECK=1")
cc1d_emulator_labels(test_fake_driver)

# End-to-end: the real nvrtc backend of the shared libcc1d (C ABI only) on the fake driver.
# Exits 77 — reported by ctest as skipped, never as passed — when this machine has no NVRTC.
add_executable(test_fake_driver_e2e ${CC1D_EMU_TEST_DIR}/test_fake_driver_e2e.cpp
               ${CC1D_EMU_TEST_DIR}/test_fake_driver_e2e_child.cpp ${CC1D_EMU_TEST_DIR}/e2e_spawn.cpp
               ${CC1D_EMU_TEST_DIR}/test_cache_fleet.cpp)
target_link_libraries(test_fake_driver_e2e PRIVATE doctest::doctest cc1d ${CMAKE_DL_LIBS})
target_include_directories(test_fake_driver_e2e PRIVATE ${CC1D_EMU_TEST_DIR} ${cc1d_SOURCE_DIR}
                           ${cc1d_SOURCE_DIR}/runtime/include)
target_compile_definitions(test_fake_driver_e2e PRIVATE CC1D_FAKE_DRIVER_PATH="${CC1D_FAKE_DRIVER_PATH}")
add_dependencies(test_fake_driver_e2e cc1d_fake_cuda)
add_test(NAME test_fake_driver_e2e COMMAND test_fake_driver_e2e "--test-case-exclude=fleet:*")
set_tests_properties(test_fake_driver_e2e PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
cc1d_emulator_labels(test_fake_driver_e2e)
# The kernel cache as a fleet uses it (test_cache_fleet.cpp): 32 processes on a cold cache
# compile once; precompile's output serves a node as its only tier.
add_test(NAME test_cache_fleet COMMAND test_fake_driver_e2e "--test-case=fleet:*")
# (NVRTC compiles there: the shipped PTX tier is off.)
set_tests_properties(test_cache_fleet PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600 LABELS emulator
                     ENVIRONMENT CAUSAL_CONV1D_PTX_TIER=0
                     PASS_REGULAR_EXPRESSION "test cases: +2 \\| +2 passed \\| +0 failed")

# The fake driver with real NVRTC cubins and PTX (every lowered name of every forward variant).
# Exits 77 — skipped, never passed — without an NVRTC.
add_executable(test_fake_driver_nvrtc ${CC1D_EMU_TEST_DIR}/test_fake_driver_nvrtc.cpp)
target_link_libraries(test_fake_driver_nvrtc PRIVATE doctest::doctest cc1d_static)
target_include_directories(test_fake_driver_nvrtc PRIVATE ${CC1D_EMU_TEST_DIR} ${cc1d_SOURCE_DIR})
target_compile_definitions(test_fake_driver_nvrtc PRIVATE CC1D_FAKE_DRIVER_PATH="${CC1D_FAKE_DRIVER_PATH}")
add_dependencies(test_fake_driver_nvrtc cc1d_fake_cuda)
add_test(NAME test_fake_driver_nvrtc COMMAND test_fake_driver_nvrtc)
set_tests_properties(test_fake_driver_nvrtc PROPERTIES SKIP_RETURN_CODE 77)
cc1d_emulator_labels(test_fake_driver_nvrtc)

# Only meaningful under AddressSanitizer: an overrun of shared or global memory by an emulated
# thread must be reported (children are expected to die; the parent checks the report).
if(CC1D_SANITIZE)
  # The deliberate overruns must reach AddressSanitizer's redzones, not UBSan's array-bounds check
  # (which would stop them first).
  set_source_files_properties(${CC1D_EMU_TEST_DIR}/test_emulator_kernels.cpp PROPERTIES
                              COMPILE_OPTIONS "-fno-sanitize=bounds")
  add_executable(test_emulator_asan ${CC1D_EMU_TEST_DIR}/test_emulator_asan.cpp
                 ${CC1D_EMU_TEST_DIR}/test_emulator_kernels.cpp)
  target_link_libraries(test_emulator_asan PRIVATE doctest::doctest cc1d_static)
  target_include_directories(test_emulator_asan PRIVATE ${CC1D_EMU_TEST_DIR} ${cc1d_SOURCE_DIR})
  add_test(NAME test_emulator_asan COMMAND test_emulator_asan)
  cc1d_emulator_labels(test_emulator_asan)
endif()
