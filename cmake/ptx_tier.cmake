# cmake/ptx_tier.cmake — the shipped PTX tier (runtime/src/nvrtc/ptx_tier.h): the objects of
# cc1d_ptx_pack_objects define cc1d::shipped_ptx_pack(), either the pack that cc1d_ptx_pack
# (runtime/tools/ptx_pack.cpp) compiles with NVRTC at build time, or an empty one. The pack is
# remade only when what it is made of changes (the kernel sources, the tool, the options),
# not every time the runtime is rebuilt.
set(CC1D_PTX_TOOLS ${PROJECT_SOURCE_DIR}/runtime/tools)
if(CC1D_PTX_TIER AND NOT CMAKE_CROSSCOMPILING)
  add_executable(cc1d_ptx_pack ${CC1D_PTX_TOOLS}/ptx_pack.cpp ${CC1D_PTX_TOOLS}/ptx_pack_none.cpp)
  target_link_libraries(cc1d_ptx_pack PRIVATE cc1d_objects)
  target_include_directories(cc1d_ptx_pack PRIVATE ${PROJECT_SOURCE_DIR}/runtime/src ${PROJECT_SOURCE_DIR}
                             ${CC1D_SPDLOG_INCLUDE})
  target_compile_definitions(cc1d_ptx_pack PRIVATE SPDLOG_HEADER_ONLY SPDLOG_FMT_EXTERNAL)
  string(REPLACE ";" "," archs "${CC1D_PTX_TIER_ARCHS}")
  set(nvrtc_arg "")
  foreach(n IN LISTS CC1D_PTX_TIER_NVRTC)
    list(APPEND nvrtc_arg --nvrtc ${n})
  endforeach()
  set(pack ${PROJECT_BINARY_DIR}/ptx_pack)
  add_custom_command(
    OUTPUT ${pack}.cpp ${pack}.bin
    COMMAND cc1d_ptx_pack --out ${pack} --archs ${archs} ${nvrtc_arg}
    DEPENDS ${CC1D_KERNEL_SOURCES} ${CC1D_PTX_TOOLS}/ptx_pack.cpp
            ${PROJECT_SOURCE_DIR}/runtime/src/nvrtc/nvrtc_compile.cpp
            ${PROJECT_SOURCE_DIR}/runtime/src/nvrtc/ptx_tier.cpp ${PROJECT_SOURCE_DIR}/runtime/src/jit/lz_codec.cpp
    COMMENT "Compiling the shipped PTX tier (compute_${archs}) with NVRTC" VERBATIM)
  set_source_files_properties(${pack}.cpp PROPERTIES OBJECT_DEPENDS ${pack}.bin)
  add_library(cc1d_ptx_pack_objects OBJECT ${pack}.cpp)
else()
  add_library(cc1d_ptx_pack_objects OBJECT ${CC1D_PTX_TOOLS}/ptx_pack_none.cpp)
endif()
set_target_properties(cc1d_ptx_pack_objects PROPERTIES POSITION_INDEPENDENT_CODE ON
                      CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON)
target_include_directories(cc1d_ptx_pack_objects PRIVATE ${PROJECT_SOURCE_DIR}/runtime/src)
