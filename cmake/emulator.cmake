# cmake/emulator.cmake — the kernel emulator and the `emulate` backend (fallback/emulator/).
# Included by the top CMakeLists.txt when CC1D_BUILD_EMULATOR is ON.
#
# kernels_src/ is compiled by the host compiler through fallback/emulator/cuda_prelude.h. The
# 144 forward instantiations are split by x dtype into three translation units so that two
# cores build them in parallel.
set(CC1D_EMU_DIR ${PROJECT_SOURCE_DIR}/fallback/emulator)
set(CC1D_EMU_KERNEL_TUS
    ${CC1D_EMU_DIR}/fwd_kernels_f32.cpp
    ${CC1D_EMU_DIR}/fwd_kernels_f16.cpp
    ${CC1D_EMU_DIR}/fwd_kernels_bf16.cpp)

target_sources(cc1d_objects PRIVATE
  ${CC1D_EMU_DIR}/fiber.cpp
  ${CC1D_EMU_DIR}/block_runner.cpp
  ${CC1D_EMU_DIR}/launch.cpp
  ${CC1D_EMU_DIR}/kernel_registry.cpp
  ${CC1D_EMU_DIR}/emulate_backend.cpp
  ${CC1D_EMU_KERNEL_TUS})
target_compile_definitions(cc1d_objects PRIVATE CC1D_WITH_EMULATOR)

# The kernels are written for a GPU compiler: unused parameters/variables of some variants
# (width 1 has no window to shift) are expected. Optimise them even in Debug builds, or the
# emulated test grid gets slow (one fiber per GPU thread, -O0 code, ASan).
set_source_files_properties(${CC1D_EMU_KERNEL_TUS} PROPERTIES
  COMPILE_OPTIONS "-Wno-unused-parameter;-Wno-unused-variable;-Wno-unused-but-set-variable;$<IF:$<CONFIG:Debug>,-O1,-Os>")
