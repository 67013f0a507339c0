# cmake/emulator.cmake — the kernel emulator (fallback/emulator/) and every op's host-compiled
# kernels. Included by the top CMakeLists.txt when CC1D_BUILD_EMULATOR is ON; the `emulate`
# backend (runtime/src/backends/emulate/) then runs them.
#
# kernels_src/ is compiled by the host compiler through fallback/emulator/cuda_prelude.h, one
# translation unit (or a few, split by dtype) per op, so that two cores build them in parallel.
set(CC1D_EMU_DIR ${PROJECT_SOURCE_DIR}/fallback/emulator)
file(GLOB CC1D_EMU_KERNEL_TUS CONFIGURE_DEPENDS ${CC1D_EMU_DIR}/kernels_*.cpp)

target_sources(cc1d_objects PRIVATE
  ${CC1D_EMU_DIR}/fiber.cpp
  ${CC1D_EMU_DIR}/block_runner.cpp
  ${CC1D_EMU_DIR}/launch.cpp
  ${CC1D_EMU_DIR}/kernel_registry.cpp
  ${CC1D_EMU_KERNEL_TUS})
target_compile_definitions(cc1d_objects PRIVATE CC1D_WITH_EMULATOR)

# The kernels are written for a GPU compiler: unused parameters/variables of some variants
# (width 1 has no window to shift) are expected, and the host compiler ignores `#pragma unroll`.
# Debug (the sanitizer job) keeps them at -O0: -O1 made each backward unit 3.5x slower to build
# (63 s against 18 under ASan) and the emulated test grids no faster (their time is the fibers,
# the sanitizer runtime and the float64 reference: 66 s against 63 for test_emulator_fwd + bwd).
set_source_files_properties(${CC1D_EMU_KERNEL_TUS} PROPERTIES
  COMPILE_OPTIONS "-Wno-unused-parameter;-Wno-unused-variable;-Wno-unused-but-set-variable;-Wno-unknown-pragmas;$<$<NOT:$<CONFIG:Debug>>:-Os>")
