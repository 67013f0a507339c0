# cc1d_pyargs.cmake — libcc1d_pyargs (python/pyargs/pyargs.c), the Python package's argument
# packer in C, built beside libcc1d (and installed into the wheel's causal_conv1d/lib) when
# Python's headers are found. It uses CPython's limited API (3.9) and links no libpython: the
# package loads it with ctypes.PyDLL, and packs in Python where it is absent.
#
# The Python: CC1D_TORCH_PYTHON when set (make's venv), else what FindPython finds (under
# scikit-build-core, the Python building the wheel).

if(CC1D_TORCH_PYTHON AND NOT Python_EXECUTABLE)
  set(Python_EXECUTABLE ${CC1D_TORCH_PYTHON})
endif()
find_package(Python 3.9 QUIET COMPONENTS Interpreter Development.Module)
if(NOT Python_Development.Module_FOUND)
  message(STATUS "cc1d_pyargs: not built (no Python 3.9+ headers found); the Python package packs "
                 "arguments in Python")
  return()
endif()

add_library(cc1d_pyargs MODULE ${PROJECT_SOURCE_DIR}/python/pyargs/pyargs.c)
target_include_directories(cc1d_pyargs PRIVATE ${Python_INCLUDE_DIRS} ${PROJECT_SOURCE_DIR}/runtime/include)
set_target_properties(cc1d_pyargs PROPERTIES PREFIX "lib" C_VISIBILITY_PRESET hidden C_STANDARD 11)
target_compile_options(cc1d_pyargs PRIVATE -Wall -Wextra)
target_link_options(cc1d_pyargs PRIVATE -static-libgcc)
if(SKBUILD)
  install(TARGETS cc1d_pyargs LIBRARY DESTINATION causal_conv1d/lib)
endif()
