# gpu_tests.cmake — tests of the NVRTC backend (included by tests/cpp/CMakeLists.txt).
# None needs a GPU: NVRTC compiles for any SM here, the fake libcuda (tests/fake_driver/) stands
# in for the driver and runs the launches through the emulator, and fake libnvrtc files
# exercise discovery.

set(CC1D_GPU_TEST_DIR ${CMAKE_CURRENT_SOURCE_DIR})
set(CC1D_FAKE_TREE ${CMAKE_CURRENT_BINARY_DIR}/fake_nvrtc_tree)

# ---- fake libnvrtc files: one tree, several candidates ------------------------------------
# cc1d_fake_nvrtc(<target> <dir under the tree> <file name> <major> <minor> <archs> [defs...])
function(cc1d_fake_nvrtc target subdir file major minor archs)
  add_library(${target} SHARED ${CC1D_GPU_TEST_DIR}/fake_nvrtc/fake_nvrtc.c)
  string(REGEX REPLACE "^libnvrtc" "" suffix ${file})
  set_target_properties(${target} PROPERTIES OUTPUT_NAME nvrtc PREFIX lib SUFFIX ${suffix}
                        LIBRARY_OUTPUT_DIRECTORY ${CC1D_FAKE_TREE}/${subdir}
                        C_VISIBILITY_PRESET hidden NO_SONAME ON)
  target_link_options(${target} PRIVATE -Wl,-soname,${file})
  target_compile_definitions(${target} PRIVATE FAKE_MAJOR=${major} FAKE_MINOR=${minor}
                             "FAKE_ARCHS=${archs}" ${ARGN})
  set(CC1D_FAKE_TARGETS ${CC1D_FAKE_TARGETS} ${target} PARENT_SCOPE)
endfunction()

set(CC1D_FAKE_TARGETS "")
cc1d_fake_nvrtc(fake_nvrtc_explicit  explicit             libnvrtc.so.12   12 1 "50,60,70,75,80,86,90")
cc1d_fake_nvrtc(fake_nvrtc_cu13      site/nvidia/cu13/lib libnvrtc.so.13   13 0 "75,80,86,87,88,89,90,100,103,110,120,121")
cc1d_fake_nvrtc(fake_nvrtc_cu12      site/nvidia/cuda_nvrtc/lib libnvrtc.so.12 12 4 "50,60,70,75,80,86,89,90")
cc1d_fake_nvrtc(fake_nvrtc_toolkit   toolkit/lib64        libnvrtc.so.12   12 8 "50,60,70,75,80,86,89,90,100,120")
cc1d_fake_nvrtc(fake_nvrtc_toolkit13 toolkit/lib64        libnvrtc.so.13   13 2 "75,80,86,89,90,100,120,121")
cc1d_fake_nvrtc(fake_nvrtc_old       old/lib64            libnvrtc.so.11.1 11 1 "35,50,60,70,75,80,86" FAKE_NO_ARCH_API)
cc1d_fake_nvrtc(fake_nvrtc_partial   partial/lib64        libnvrtc.so.12   12 2 "75,80,86,90" FAKE_NO_COMPILE)
cc1d_fake_nvrtc(fake_nvrtc_loaded    loaded               libnvrtc.so.11.2 11 2 "35,50,60,70,75,80,86")
# A file that is not a library, a dev symlink to a candidate (de-duplicated), and a builtins
# library (never a candidate).
file(MAKE_DIRECTORY ${CC1D_FAKE_TREE}/broken/lib64)
file(WRITE ${CC1D_FAKE_TREE}/broken/lib64/libnvrtc.so.12 "this is not an ELF file\n")
file(MAKE_DIRECTORY ${CC1D_FAKE_TREE}/toolkit/lib64)
file(CREATE_LINK libnvrtc.so.12 ${CC1D_FAKE_TREE}/toolkit/lib64/libnvrtc.so SYMBOLIC)
file(WRITE ${CC1D_FAKE_TREE}/toolkit/lib64/libnvrtc-builtins.so.12.8 "not a library either\n")

# ---- the fake libcuda (stands in for libcuda.so.1; built on the emulator) -----------------
if(CC1D_BUILD_EMULATOR)
  include(${PROJECT_SOURCE_DIR}/tests/fake_driver/fake_driver.cmake)
endif()

# ---- unit tests (internal symbols, no library needed) -------------------------------------
cc1d_add_test(test_nvrtc_units SOURCES ${CC1D_GPU_TEST_DIR}/test_nvrtc_units.cpp LIBS cc1d_static)
cc1d_add_test(test_nvrtc_choice SOURCES ${CC1D_GPU_TEST_DIR}/test_nvrtc_choice.cpp LIBS cc1d_static)
cc1d_add_test(test_nvrtc_cache SOURCES ${CC1D_GPU_TEST_DIR}/test_nvrtc_cache.cpp LIBS cc1d_static)
cc1d_add_test(test_nvrtc_discovery SOURCES ${CC1D_GPU_TEST_DIR}/test_nvrtc_discovery.cpp LIBS cc1d_static)
set_tests_properties(test_nvrtc_units test_nvrtc_choice test_nvrtc_cache test_nvrtc_discovery PROPERTIES LABELS "nvrtc;asan")
target_compile_definitions(test_nvrtc_discovery PRIVATE CC1D_FAKE_TREE="${CC1D_FAKE_TREE}")
add_dependencies(test_nvrtc_discovery ${CC1D_FAKE_TARGETS})

# ---- real NVRTC: a representative set for every supported SM (fast), every variant for sm_90
# (slow). Own main(): exits 77 (skipped) when no NVRTC exists at all.
add_executable(test_nvrtc_compile ${CC1D_GPU_TEST_DIR}/test_nvrtc_compile.cpp)
target_link_libraries(test_nvrtc_compile PRIVATE doctest::doctest cc1d_static)
target_include_directories(test_nvrtc_compile PRIVATE ${PROJECT_SOURCE_DIR})
add_test(NAME test_nvrtc_compile COMMAND test_nvrtc_compile "--test-case-exclude=every kernel of every op*")
add_test(NAME test_nvrtc_compile_all COMMAND test_nvrtc_compile "--test-case=every kernel of every op*")
set_tests_properties(test_nvrtc_compile test_nvrtc_compile_all PROPERTIES TIMEOUT 900 SKIP_RETURN_CODE 77
                     ENVIRONMENT "CAUSAL_CONV1D_LOG_LEVEL=warn")
set_tests_properties(test_nvrtc_compile PROPERTIES LABELS "nvrtc")
set_tests_properties(test_nvrtc_compile_all PROPERTIES LABELS "nvrtc;slow"
                     PASS_REGULAR_EXPRESSION "test cases: +1 \\| +1 passed \\| +0 failed")

# ---- the backend through the public C ABI, one process per environment --------------------
add_executable(test_nvrtc_backend ${CC1D_GPU_TEST_DIR}/test_nvrtc_backend.cpp)
target_link_libraries(test_nvrtc_backend PRIVATE doctest::doctest cc1d::cc1d ${CMAKE_DL_LIBS} Threads::Threads)
target_include_directories(test_nvrtc_backend PRIVATE ${CMAKE_CURRENT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}
                           ${PROJECT_SOURCE_DIR}/runtime/include)
if(TARGET cc1d_fake_cuda)
  add_dependencies(test_nvrtc_backend cc1d_fake_cuda)
endif()

set(CC1D_BROKEN_KERNELS ${CMAKE_CURRENT_BINARY_DIR}/broken_kernels)
file(GLOB _kernels ${PROJECT_SOURCE_DIR}/kernels_src/*)
file(COPY ${_kernels} DESTINATION ${CC1D_BROKEN_KERNELS})
file(APPEND ${CC1D_BROKEN_KERNELS}/fwd.cuh "\nthis line is a deliberate syntax error (test_nvrtc_backend)\n")

# cc1d_backend_test(<scenario> <test case name> [COMPILES] [ENV ...] [PROPS ...])
# COMPILES: the scenario needs an NVRTC (skipped, exit 77, when the library finds none).
function(cc1d_backend_test scenario test_case)
  cmake_parse_arguments(T "COMPILES" "" "ENV;PROPS" ${ARGN})
  if(T_COMPILES)
    list(APPEND T_ENV CC1D_TEST_NEEDS_NVRTC=1)
  endif()
  set(cache ${CMAKE_CURRENT_BINARY_DIR}/nvrtc_cache/${scenario})
  add_test(NAME nvrtc_backend.${scenario} COMMAND test_nvrtc_backend "--test-case=${test_case}")
  set_tests_properties(nvrtc_backend.${scenario} PROPERTIES
    ENVIRONMENT "CAUSAL_CONV1D_CACHE_DIR=${cache};CC1D_TEST_FAKE_DRIVER=${CC1D_FAKE_DRIVER_PATH};${T_ENV}"
    # Exactly one test case must run: a filter that matches nothing would pass silently.
    PASS_REGULAR_EXPRESSION "test cases: +1 \\| +1 passed \\| +0 failed"
    SKIP_RETURN_CODE 77 LABELS "nvrtc;asan"
    ${T_PROPS})
endfunction()

set(_fake CAUSAL_CONV1D_CUDA_DRIVER=${CC1D_FAKE_DRIVER_PATH})
cc1d_backend_test(missing_driver "missing driver" ENV CAUSAL_CONV1D_CUDA_DRIVER=/nonexistent/libcuda.so.1)
if(EXISTS /usr/local/cuda/lib64/stubs/libcuda.so)
  cc1d_backend_test(stub_driver "stub driver" ENV CAUSAL_CONV1D_CUDA_DRIVER=/usr/local/cuda/lib64/stubs/libcuda.so)
else()
  message(STATUS "nvrtc_backend.stub_driver not registered: /usr/local/cuda/lib64/stubs/libcuda.so is absent")
endif()
if(NOT TARGET cc1d_fake_cuda)
  message(STATUS "nvrtc_backend scenarios on the fake libcuda not registered: it needs CC1D_BUILD_EMULATOR=ON")
  return()
endif()
cc1d_backend_test(no_device "no device" ENV ${_fake} CC1D_FAKE_INIT_RESULT=100)
cc1d_backend_test(launch "launch" COMPILES ENV ${_fake} CC1D_FAKE_DEVICES=90)
cc1d_backend_test(update_launch "update launch" COMPILES ENV ${_fake} CC1D_FAKE_DEVICES=90)
cc1d_backend_test(two_devices "two devices" COMPILES ENV ${_fake} "CC1D_FAKE_DEVICES=90,80")
cc1d_backend_test(concurrent "concurrent first calls" COMPILES ENV ${_fake} "CC1D_FAKE_DEVICES=90,90")
cc1d_backend_test(compile_error "compile error" COMPILES ENV ${_fake} CAUSAL_CONV1D_KERNEL_DIR=${CC1D_BROKEN_KERNELS})
cc1d_backend_test(future_sm_ptx "future SM gets PTX" COMPILES ENV ${_fake} CC1D_FAKE_DEVICES=130)
cc1d_backend_test(old_sm "SM below every NVRTC" COMPILES ENV ${_fake} CC1D_FAKE_DEVICES=30)
cc1d_backend_test(old_driver "driver older than NVRTC" ENV ${_fake} CC1D_FAKE_DRIVER_VERSION=11040)
cc1d_backend_test(launch_error "launch error" COMPILES ENV ${_fake} CC1D_FAKE_LAUNCH_RESULT=719)
cc1d_backend_test(cache_cold "disk cache cold" COMPILES ENV ${_fake} PROPS FIXTURES_SETUP nvrtc_disk_cache)
cc1d_backend_test(cache_warm "disk cache warm" COMPILES ENV ${_fake} PROPS FIXTURES_REQUIRED nvrtc_disk_cache)
set_tests_properties(nvrtc_backend.cache_warm PROPERTIES ENVIRONMENT
  "CAUSAL_CONV1D_CACHE_DIR=${CMAKE_CURRENT_BINARY_DIR}/nvrtc_cache/cache_cold;CC1D_TEST_FAKE_DRIVER=${CC1D_FAKE_DRIVER_PATH};${_fake};CC1D_TEST_NEEDS_NVRTC=1")
