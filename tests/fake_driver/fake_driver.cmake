# tests/fake_driver/fake_driver.cmake — the test-only stand-in for libcuda.so.1 that runs launches
# through the kernel emulator. Built into <build>/fake_driver/libcuda.so.1; never installed.
# Tests select it with CAUSAL_CONV1D_CUDA_DRIVER=${CC1D_FAKE_DRIVER_PATH}. Needs the emulator
# (CC1D_BUILD_EMULATOR). Included by the NVRTC tests, the emulator tests and the benchmarks:
# every includer gets the two variables, the target is defined once.
set(CC1D_FAKE_DRIVER_DIR ${cc1d_SOURCE_DIR}/tests/fake_driver)
set(CC1D_FAKE_DRIVER_PATH ${CMAKE_BINARY_DIR}/fake_driver/libcuda.so.1)
include_guard(GLOBAL)
add_library(cc1d_fake_cuda SHARED
  ${CC1D_FAKE_DRIVER_DIR}/fake_state.cpp
  ${CC1D_FAKE_DRIVER_DIR}/fake_image.cpp
  ${CC1D_FAKE_DRIVER_DIR}/fake_driver.cpp
  ${CC1D_FAKE_DRIVER_DIR}/fake_counting.cpp
  ${CC1D_FAKE_DRIVER_DIR}/fake_link.cpp
  ${CC1D_FAKE_DRIVER_DIR}/fake_capture.cpp)
# The emulator, the host kernels and cubin_elf come from the same objects as libcc1d: the fake
# holds its own private copy (only cu* and cc1d_fake_* are exported).
target_link_libraries(cc1d_fake_cuda PRIVATE cc1d_static)
target_include_directories(cc1d_fake_cuda PRIVATE ${CC1D_FAKE_DRIVER_DIR})
# The file is libcuda.so.1 but the SONAME is not: NVRTC itself dlopen()s "libcuda.so.1", and the
# loader would hand it this already-loaded fake (matched by SONAME), which lacks the private
# entry points NVRTC's embedded runtime calls. With another SONAME, NVRTC sees no driver, as on
# any GPU-less machine, while libcc1d loads the fake by path (CAUSAL_CONV1D_CUDA_DRIVER).
target_link_options(cc1d_fake_cuda PRIVATE -Wl,--version-script=${CC1D_FAKE_DRIVER_DIR}/exports.map
                    -Wl,--no-undefined -Wl,-soname,libcc1d_fake_cuda.so.1)
set_target_properties(cc1d_fake_cuda PROPERTIES
  OUTPUT_NAME cuda PREFIX lib SUFFIX .so.1 NO_SONAME ON
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/fake_driver
  CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON
  LINK_DEPENDS ${CC1D_FAKE_DRIVER_DIR}/exports.map)
