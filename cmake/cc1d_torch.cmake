# cc1d_torch.cmake — the optional libtorch op library (cc1d_torch/, fallback/aten/), built when
# find_package(Torch) succeeds: through Torch_DIR / CMAKE_PREFIX_PATH, or through the cmake
# prefix of the torch wheel of CC1D_TORCH_PYTHON. Never part of the Python wheel, which stays
# py3-none and loads it only when its build record matches the running torch (_torch_lib.py).
#
# Defines the target cc1d_torch (libcc1d_torch.so) and writes its build record
# libcc1d_torch.json beside it: the torch version, CUDA version and C++11 ABI it was built
# against, the ABI it uses (stable or classic) and its ops.

set(CC1D_TORCH_PYTHON "" CACHE FILEPATH
    "A Python whose pip-installed torch provides libtorch for cc1d_torch (its torch.utils.cmake_prefix_path)")
option(CC1D_TORCH_STABLE_ABI "Use torch's stable ABI (STABLE_TORCH_LIBRARY, torch >= 2.10) when the torch found has it" ON)

if(CC1D_TORCH_PYTHON)
  execute_process(COMMAND ${CC1D_TORCH_PYTHON} -c "import torch.utils; print(torch.utils.cmake_prefix_path)"
                  OUTPUT_VARIABLE _prefix OUTPUT_STRIP_TRAILING_WHITESPACE RESULT_VARIABLE _rc ERROR_QUIET)
  if(_rc EQUAL 0)
    list(APPEND CMAKE_PREFIX_PATH ${_prefix})
  else()
    message(STATUS "cc1d_torch: ${CC1D_TORCH_PYTHON} cannot import torch")
  endif()
endif()
# Torch's config speaks loudly (CUDA architectures, kineto) about things cc1d_torch never uses:
# it needs no CUDA toolkit API, only libtorch. Its warnings are not ours to print.
set(_level "${CMAKE_MESSAGE_LOG_LEVEL}")
set(CMAKE_MESSAGE_LOG_LEVEL ERROR)
find_package(Torch QUIET)
set(CMAKE_MESSAGE_LOG_LEVEL "${_level}")
if(NOT Torch_FOUND)
  message(STATUS "cc1d_torch: not built (find_package(Torch) found no libtorch; set CC1D_TORCH_PYTHON to a "
                 "Python with torch, or Torch_DIR)")
  return()
endif()

# ---- the facts of the torch found ------------------------------------------------------------
set(_torch_version "${Torch_VERSION}")
set(_torch_cuda "null")
if(EXISTS ${TORCH_INSTALL_PREFIX}/version.py)  # a pip wheel: its full version and its CUDA
  file(STRINGS ${TORCH_INSTALL_PREFIX}/version.py _v REGEX "^__version__ = ")
  string(REGEX REPLACE ".*'([^']+)'.*" "\\1" _torch_version "${_v}")
  file(STRINGS ${TORCH_INSTALL_PREFIX}/version.py _c REGEX "^cuda.*= '")
  if(_c)
    string(REGEX REPLACE ".*'([^']+)'.*" "\"\\1\"" _torch_cuda "${_c}")
  endif()
endif()
set(CC1D_TORCH_CXX11_ABI 1)
if("${TORCH_CXX_FLAGS}" MATCHES "_GLIBCXX_USE_CXX11_ABI=0")
  set(CC1D_TORCH_CXX11_ABI 0)
endif()
string(REGEX MATCH "^[0-9]+\\.[0-9]+" _torch_mm "${Torch_VERSION}")
if(CC1D_TORCH_STABLE_ABI AND _torch_mm VERSION_GREATER_EQUAL 2.10
   AND EXISTS ${TORCH_INSTALL_PREFIX}/include/torch/csrc/stable/library.h)
  set(_abi stable)
  set(_torch_min 2.10)  # TORCH_TARGET_VERSION below: runs on every torch from 2.10 on
else()
  set(_abi classic)
  set(_torch_min ${_torch_mm})
endif()
# The C++ standard torch's own (classic) headers need: C++20 from torch 2.10 on.
if(_torch_mm VERSION_GREATER_EQUAL 2.10)
  set(CC1D_TORCH_CXX_STANDARD 20)
else()
  set(CC1D_TORCH_CXX_STANDARD 17)
endif()

file(STRINGS ${PROJECT_SOURCE_DIR}/cc1d_torch/ops.def _op_lines REGEX "^CC1D_TORCH_OP\\(")
set(_ops "")
foreach(_line IN LISTS _op_lines)
  string(REGEX REPLACE "^CC1D_TORCH_OP\\(([A-Za-z0-9_]+),.*" "\"\\1\"" _op "${_line}")
  list(APPEND _ops "${_op}")
endforeach()
string(JOIN ", " _ops ${_ops})
set(CC1D_TORCH_INFO "{\"library\": \"libcc1d_torch.so\", \"cc1d_version\": \"${PROJECT_VERSION}\", \"abi\": \"${_abi}\", \"torch_version\": \"${_torch_version}\", \"torch_min\": \"${_torch_min}\", \"torch_cuda\": ${_torch_cuda}, \"cxx11_abi\": ${CC1D_TORCH_CXX11_ABI}, \"ops\": [${_ops}]}")
set(CC1D_TORCH_RECORD ${PROJECT_BINARY_DIR}/libcc1d_torch.json)
file(WRITE ${CC1D_TORCH_RECORD} "${CC1D_TORCH_INFO}\n")
string(REPLACE "\"" "\\\"" CC1D_TORCH_INFO_C "${CC1D_TORCH_INFO}")
file(CONFIGURE OUTPUT ${PROJECT_BINARY_DIR}/cc1d_torch_info.h
     CONTENT "#define CC1D_TORCH_BUILD_INFO \"@CC1D_TORCH_INFO_C@\"\n" @ONLY)

# ---- the library -----------------------------------------------------------------------------
# Only libtorch_cpu and libc10 are linked: every torch build has them, so the library loads with
# a CPU-only torch too (torch's CUDA stream is looked up at run time: cc1d_torch/run.cpp).
find_library(CC1D_TORCH_CPU_LIB torch_cpu PATHS ${TORCH_INSTALL_PREFIX}/lib NO_DEFAULT_PATH REQUIRED)
find_library(CC1D_C10_LIB c10 PATHS ${TORCH_INSTALL_PREFIX}/lib NO_DEFAULT_PATH REQUIRED)
# Every kernel (cc1d_torch/<op>.cpp) and ATen reference (fallback/aten/<op>_aten.cpp): adding an op
# adds files, not lines here.
file(GLOB CC1D_TORCH_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/cc1d_torch/*.cpp
     ${PROJECT_SOURCE_DIR}/fallback/aten/*.cpp)
add_library(cc1d_torch SHARED ${CC1D_TORCH_SOURCES} ${PROJECT_SOURCE_DIR}/runtime/src/core/json.cpp)
target_include_directories(cc1d_torch PRIVATE ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/runtime/src
                           ${PROJECT_BINARY_DIR} ${TORCH_INCLUDE_DIRS})
target_link_libraries(cc1d_torch PRIVATE cc1d ${CC1D_TORCH_CPU_LIB} ${CC1D_C10_LIB} ${CMAKE_DL_LIBS})
target_compile_options(cc1d_torch PRIVATE -Wall -Wextra)
if(_abi STREQUAL stable)
  target_compile_definitions(cc1d_torch PRIVATE CC1D_TORCH_STABLE=1 "TORCH_TARGET_VERSION=(((0ULL+2)<<56)|((0ULL+10)<<48))")
else()
  target_compile_definitions(cc1d_torch PRIVATE CC1D_TORCH_STABLE=0 _GLIBCXX_USE_CXX11_ABI=${CC1D_TORCH_CXX11_ABI})
  set_target_properties(cc1d_torch PROPERTIES CXX_STANDARD ${CC1D_TORCH_CXX_STANDARD})
endif()
target_link_options(cc1d_torch PRIVATE -Wl,--no-undefined -Wl,--as-needed
                    -Wl,--version-script=${PROJECT_SOURCE_DIR}/cmake/libcc1d_torch.map)
set_target_properties(cc1d_torch PROPERTIES CXX_VISIBILITY_PRESET hidden VISIBILITY_INLINES_HIDDEN ON
                      LINK_DEPENDS ${PROJECT_SOURCE_DIR}/cmake/libcc1d_torch.map INSTALL_RPATH "$ORIGIN")
if(_abi STREQUAL stable)
  message(STATUS "cc1d_torch: against torch ${_torch_version}, stable ABI (runs on torch >= ${_torch_min})")
else()
  message(STATUS "cc1d_torch: against torch ${_torch_version}, classic ABI (runs on torch ${_torch_min} only)")
endif()
if(NOT SKBUILD)
  install(TARGETS cc1d_torch LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
  install(FILES ${CC1D_TORCH_RECORD} DESTINATION ${CMAKE_INSTALL_LIBDIR})
endif()
