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
cc1d_fake_nvrtc(fake_nvrtc_nobuiltins nobuiltins/lib64    libnvrtc.so.13   13 0 "75,80,86,90" FAKE_NO_BUILTINS)
cc1d_fake_nvrtc(fake_nvrtc_loaded    loaded               libnvrtc.so.11.2 11 2 "35,50,60,70,75,80,86")
cc1d_fake_nvrtc(fake_nvrtc_sonamed   sonamed              libnvrtc.so.42   12 6 "75,80,86,90")
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
cc1d_add_test(test_nvrtc_memo SOURCES ${CC1D_GPU_TEST_DIR}/test_nvrtc_memo.cpp LIBS cc1d_static)
cc1d_add_test(test_cache_faults SOURCES ${CC1D_GPU_TEST_DIR}/test_cache_faults.cpp LIBS cc1d_static)
cc1d_add_test(test_cache_tiers SOURCES ${CC1D_GPU_TEST_DIR}/test_cache_tiers.cpp LIBS cc1d_static)
cc1d_add_test(test_lz_codec SOURCES ${CC1D_GPU_TEST_DIR}/test_lz_codec.cpp LIBS cc1d_static)
cc1d_add_test(test_ptx_tier SOURCES ${CC1D_GPU_TEST_DIR}/test_ptx_tier.cpp LIBS cc1d_static)
if(TARGET cc1d_ptx_pack)
  target_compile_definitions(test_ptx_tier PRIVATE CC1D_TEST_PTX_TIER_BUILT)
endif()
if(CC1D_NVRTC12 AND EXISTS "${CC1D_NVRTC12}")  # the tier may hold its PTX (CC1D_PTX_TIER_NVRTC)
  set_tests_properties(test_ptx_tier PROPERTIES ENVIRONMENT "CC1D_TEST_NVRTC12=${CC1D_NVRTC12}")
endif()
set_tests_properties(test_nvrtc_units test_nvrtc_choice test_nvrtc_cache test_nvrtc_discovery test_nvrtc_memo test_cache_faults
                     test_cache_tiers test_lz_codec test_ptx_tier PROPERTIES LABELS "nvrtc;asan")
foreach(t test_nvrtc_discovery test_nvrtc_memo)
  target_compile_definitions(${t} PRIVATE CC1D_FAKE_TREE="${CC1D_FAKE_TREE}")
  add_dependencies(${t} ${CC1D_FAKE_TARGETS})
endforeach()
# The loader finds the tree's libnvrtc.so.42 by soname through LD_LIBRARY_PATH (not a RUNPATH:
# under ASan, dlopen's caller is the sanitizer's interceptor, whose RUNPATH is not the test's).
set_tests_properties(test_nvrtc_memo PROPERTIES ENVIRONMENT LD_LIBRARY_PATH=${CC1D_FAKE_TREE}/sonamed)

# Ownership (chown) and full/read-only file systems (a tmpfs in a private mount namespace):
# root only. Own main(): exits 77 (skipped) without root, or without the right to mount.
add_executable(test_cache_root ${CC1D_GPU_TEST_DIR}/test_cache_root.cpp)
target_link_libraries(test_cache_root PRIVATE doctest::doctest cc1d_static)
target_include_directories(test_cache_root PRIVATE ${CC1D_GPU_TEST_DIR} ${PROJECT_SOURCE_DIR})
add_test(NAME test_cache_root.owner COMMAND test_cache_root)
add_test(NAME test_cache_root.mount COMMAND test_cache_root --mount)
set_tests_properties(test_cache_root.owner test_cache_root.mount PROPERTIES SKIP_RETURN_CODE 77 LABELS "nvrtc;asan"
                     PASS_REGULAR_EXPRESSION "test cases: +2 \\| +2 passed \\| +0 failed")

# ---- real NVRTC: a representative set for every supported SM (fast), every variant for sm_90
# (slow). Own main(): exits 77 (skipped) when no NVRTC exists at all.
add_executable(test_nvrtc_compile ${CC1D_GPU_TEST_DIR}/test_nvrtc_compile.cpp)
target_link_libraries(test_nvrtc_compile PRIVATE doctest::doctest cc1d_static)
target_include_directories(test_nvrtc_compile PRIVATE ${PROJECT_SOURCE_DIR})
add_test(NAME test_nvrtc_compile COMMAND test_nvrtc_compile "--test-case-exclude=every kernel of every op*,NVRTC's builtins*")
add_test(NAME test_nvrtc_compile.builtins COMMAND test_nvrtc_compile "--test-case=NVRTC's builtins*")
add_test(NAME test_nvrtc_compile_all COMMAND test_nvrtc_compile "--test-case=every kernel of every op*")
set_tests_properties(test_nvrtc_compile test_nvrtc_compile_all PROPERTIES TIMEOUT 900 SKIP_RETURN_CODE 77
                     ENVIRONMENT "CAUSAL_CONV1D_LOG_LEVEL=warn")
set_tests_properties(test_nvrtc_compile PROPERTIES LABELS "nvrtc")
set_tests_properties(test_nvrtc_compile.builtins PROPERTIES LABELS "nvrtc" SKIP_RETURN_CODE 77
                     PASS_REGULAR_EXPRESSION "test cases: +1 \\| +1 passed \\| +0 failed")
set_tests_properties(test_nvrtc_compile_all PROPERTIES LABELS "nvrtc;slow"
                     PASS_REGULAR_EXPRESSION "test cases: +1 \\| +1 passed \\| +0 failed")

# ---- the backend through the public C ABI, one process per environment --------------------
add_executable(test_nvrtc_backend ${CC1D_GPU_TEST_DIR}/test_nvrtc_backend.cpp ${CC1D_GPU_TEST_DIR}/test_nvrtc_backend_ops.cpp
               ${CC1D_GPU_TEST_DIR}/test_nvrtc_backend_tier.cpp)
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
# The shipped PTX tier is off unless ENV turns it on (CAUSAL_CONV1D_PTX_TIER=1): these scenarios
# are about NVRTC; the tier's own are below.
function(cc1d_backend_test scenario test_case)
  cmake_parse_arguments(T "COMPILES" "" "ENV;PROPS" ${ARGN})
  if(T_COMPILES)
    list(APPEND T_ENV CC1D_TEST_NEEDS_NVRTC=1)
  endif()
  set(cache ${CMAKE_CURRENT_BINARY_DIR}/nvrtc_cache/${scenario})
  add_test(NAME nvrtc_backend.${scenario} COMMAND test_nvrtc_backend "--test-case=${test_case}")
  set_tests_properties(nvrtc_backend.${scenario} PROPERTIES
    ENVIRONMENT "CAUSAL_CONV1D_CACHE_DIR=${cache};CC1D_TEST_FAKE_DRIVER=${CC1D_FAKE_DRIVER_PATH};CAUSAL_CONV1D_PTX_TIER=0;${T_ENV}"
    # Exactly one test case must run: a filter that matches nothing would pass silently.
    PASS_REGULAR_EXPRESSION "test cases: +1 \\| +1 passed \\| +0 failed"
    SKIP_RETURN_CODE 77 LABELS "nvrtc;asan"
    ${T_PROPS})
endfunction()

set(_fake CAUSAL_CONV1D_CUDA_DRIVER=${CC1D_FAKE_DRIVER_PATH})
cc1d_backend_test(missing_driver "missing driver" ENV CAUSAL_CONV1D_CUDA_DRIVER=/nonexistent/libcuda.so.1)
if(EXISTS /usr/local/cuda/lib64/stubs/libcuda.so AND NOT CMAKE_CROSSCOMPILING)  # the build machine's stub
  cc1d_backend_test(stub_driver "stub driver" ENV CAUSAL_CONV1D_CUDA_DRIVER=/usr/local/cuda/lib64/stubs/libcuda.so)
else()
  message(STATUS "nvrtc_backend.stub_driver not registered: no /usr/local/cuda/lib64/stubs/libcuda.so for the target")
endif()
if(NOT TARGET cc1d_fake_cuda)
  message(STATUS "nvrtc_backend scenarios on the fake libcuda not registered: it needs CC1D_BUILD_EMULATOR=ON")
  return()
endif()
cc1d_backend_test(no_device "no device" ENV ${_fake} CC1D_FAKE_INIT_RESULT=100)
cc1d_backend_test(launch "launch" COMPILES ENV ${_fake} CC1D_FAKE_DEVICES=90)
cc1d_backend_test(update_launch "update launch" COMPILES ENV ${_fake} CC1D_FAKE_DEVICES=90)
cc1d_backend_test(bwd_launch "bwd launch" COMPILES ENV ${_fake} CC1D_FAKE_DEVICES=90)
cc1d_backend_test(varlen_launch "varlen launch" COMPILES ENV ${_fake} CC1D_FAKE_DEVICES=90)
cc1d_backend_test(grid_waves "grid waves" COMPILES ENV ${_fake} CC1D_FAKE_DEVICES=90 CC1D_FAKE_SM_COUNT=2 CC1D_FAKE_BLOCKS_PER_SM=3)
cc1d_backend_test(grid_waves_no_occupancy "grid waves without occupancy" COMPILES ENV ${_fake} CC1D_FAKE_DEVICES=90 CC1D_FAKE_BLOCKS_PER_SM=-1)
cc1d_backend_test(two_devices "two devices" COMPILES ENV ${_fake} "CC1D_FAKE_DEVICES=90,80")
cc1d_backend_test(concurrent "concurrent first calls" COMPILES ENV ${_fake} "CC1D_FAKE_DEVICES=90,90")
cc1d_backend_test(compile_error "compile error" COMPILES ENV ${_fake} CAUSAL_CONV1D_KERNEL_DIR=${CC1D_BROKEN_KERNELS})
cc1d_backend_test(future_sm_ptx "future SM gets PTX" COMPILES ENV ${_fake} CC1D_FAKE_DEVICES=130)
cc1d_backend_test(old_sm "SM below every NVRTC" COMPILES ENV ${_fake} CC1D_FAKE_DEVICES=30)
cc1d_backend_test(old_driver "driver older than NVRTC" ENV ${_fake} CC1D_FAKE_DRIVER_VERSION=11040)
cc1d_backend_test(launch_error "launch error" COMPILES ENV ${_fake} CC1D_FAKE_LAUNCH_RESULT=719)
cc1d_backend_test(cache_cold "disk cache cold" COMPILES ENV ${_fake} CC1D_TEST_FRESH_CACHE=1
                  PROPS FIXTURES_SETUP nvrtc_disk_cache)
cc1d_backend_test(cache_warm "disk cache warm" COMPILES ENV ${_fake} PROPS FIXTURES_REQUIRED nvrtc_disk_cache)
set_tests_properties(nvrtc_backend.cache_warm PROPERTIES ENVIRONMENT
  "CAUSAL_CONV1D_CACHE_DIR=${CMAKE_CURRENT_BINARY_DIR}/nvrtc_cache/cache_cold;CC1D_TEST_FAKE_DRIVER=${CC1D_FAKE_DRIVER_PATH};${_fake};CC1D_TEST_NEEDS_NVRTC=1;CAUSAL_CONV1D_PTX_TIER=0")
# The same cache, with kernel sources whose bwd.cuh alone differs (copied when the test runs, so
# the other files match the embedded ones): the forward's entry must still serve.
set(_edited ${CMAKE_CURRENT_BINARY_DIR}/kernels_bwd_edited)
add_test(NAME nvrtc_backend.kernels_bwd_edited COMMAND sh -c
  "rm -rf '${_edited}' && cp -r '${PROJECT_SOURCE_DIR}/kernels_src' '${_edited}' && echo '// an edit of the backward alone' >> '${_edited}/bwd.cuh'")
set_tests_properties(nvrtc_backend.kernels_bwd_edited PROPERTIES FIXTURES_SETUP kernels_bwd_edited LABELS "nvrtc;asan")
cc1d_backend_test(cache_other_op "disk cache after another op's edit" COMPILES)
set_tests_properties(nvrtc_backend.cache_other_op PROPERTIES FIXTURES_REQUIRED "nvrtc_disk_cache;kernels_bwd_edited"
  ENVIRONMENT
  "CAUSAL_CONV1D_CACHE_DIR=${CMAKE_CURRENT_BINARY_DIR}/nvrtc_cache/cache_cold;CAUSAL_CONV1D_KERNEL_DIR=${_edited};CC1D_TEST_FAKE_DRIVER=${CC1D_FAKE_DRIVER_PATH};${_fake};CC1D_TEST_NEEDS_NVRTC=1;CAUSAL_CONV1D_PTX_TIER=0")

# ---- the shipped PTX tier (test_nvrtc_backend_tier.cpp), when this build embeds one ----------
if(TARGET cc1d_ptx_pack)
  set(_tier ${_fake} CAUSAL_CONV1D_PTX_TIER=1)
  cc1d_backend_test(ptx_tier "shipped PTX tier serves a first call" COMPILES ENV ${_tier} "CC1D_FAKE_DEVICES=90,86"
                    CC1D_TEST_FRESH_CACHE=1 PROPS FIXTURES_SETUP ptx_tier_cache)
  cc1d_backend_test(ptx_tier_warm "shipped PTX tier from the disk cache" ENV ${_tier}
                    PROPS FIXTURES_REQUIRED ptx_tier_cache)
  set_tests_properties(nvrtc_backend.ptx_tier_warm PROPERTIES ENVIRONMENT
    "CAUSAL_CONV1D_CACHE_DIR=${CMAKE_CURRENT_BINARY_DIR}/nvrtc_cache/ptx_tier;CC1D_TEST_FAKE_DRIVER=${CC1D_FAKE_DRIVER_PATH};${_tier}")
  # Over ptx_tier's directory, after ptx_tier_warm: its kernels cleared, the NVRTC facts kept.
  cc1d_backend_test(ptx_tier_no_nvrtc "shipped PTX tier without loading NVRTC" ENV ${_tier}
                    PROPS FIXTURES_REQUIRED ptx_tier_cache DEPENDS nvrtc_backend.ptx_tier_warm)
  set_tests_properties(nvrtc_backend.ptx_tier_no_nvrtc PROPERTIES ENVIRONMENT
    "CAUSAL_CONV1D_CACHE_DIR=${CMAKE_CURRENT_BINARY_DIR}/nvrtc_cache/ptx_tier;CC1D_TEST_FAKE_DRIVER=${CC1D_FAKE_DRIVER_PATH};${_tier}")
  cc1d_backend_test(ptx_tier_sm100 "shipped PTX tier refused" COMPILES ENV ${_tier} CC1D_FAKE_DEVICES=100
                    "CC1D_TEST_TIER_REFUSAL=none of which gives sm_100 the SASS of its own cubin")
  cc1d_backend_test(ptx_tier_off "shipped PTX tier refused" COMPILES ENV ${_fake} CAUSAL_CONV1D_PTX_TIER=off
                    "CC1D_TEST_TIER_REFUSAL=turned off by CAUSAL_CONV1D_PTX_TIER")
  cc1d_backend_test(concurrent_tier "concurrent first calls" COMPILES ENV ${_tier} "CC1D_FAKE_DEVICES=90,90"
                    "CC1D_TEST_MADE_BY=shipped PTX")
  cc1d_backend_test(bwd_launch_tier "bwd launch from the shipped PTX tier" COMPILES ENV ${_tier} CC1D_FAKE_DEVICES=90)
  cc1d_backend_test(ptx_tier_link_fault "shipped PTX tier the driver refuses" COMPILES ENV ${_tier} CC1D_FAKE_FAULT=link)
  # No NVRTC at all: the tier alone serves the device, or nothing does once the driver refuses it.
  cc1d_backend_test(ptx_tier_only "shipped PTX tier without any NVRTC" ENV ${_tier} CAUSAL_CONV1D_NVRTC=none
                    CC1D_FAKE_DEVICES=90)
  cc1d_backend_test(ptx_tier_only_link_fault "shipped PTX tier refused without any NVRTC" ENV ${_tier}
                    CAUSAL_CONV1D_NVRTC=none CC1D_FAKE_FAULT=link)
  cc1d_backend_test(ptx_tier_only_sm100 "no NVRTC and no tier" ENV ${_tier} CAUSAL_CONV1D_NVRTC=none
                    CC1D_FAKE_DEVICES=100)
  # Sources whose fwd.cuh differs from the embedded one: the forward's digest misses the tier.
  set(_fwd_edited ${CMAKE_CURRENT_BINARY_DIR}/kernels_fwd_edited)
  add_test(NAME nvrtc_backend.kernels_fwd_edited COMMAND sh -c
    "rm -rf '${_fwd_edited}' && cp -r '${PROJECT_SOURCE_DIR}/kernels_src' '${_fwd_edited}' && echo '// an edit' >> '${_fwd_edited}/fwd.cuh'")
  set_tests_properties(nvrtc_backend.kernels_fwd_edited PROPERTIES FIXTURES_SETUP kernels_fwd_edited LABELS "nvrtc;asan")
  cc1d_backend_test(ptx_tier_kernel_dir "shipped PTX tier refused" COMPILES ENV ${_tier}
                    CAUSAL_CONV1D_KERNEL_DIR=${_fwd_edited} CC1D_TEST_TIER_REFUSAL=serves
                    PROPS FIXTURES_REQUIRED kernels_fwd_edited)
  if(CC1D_NVRTC12 AND EXISTS "${CC1D_NVRTC12}" AND CC1D_PTX_TIER_NVRTC MATCHES "${CC1D_NVRTC12}")
    # A CUDA 12.9 driver: NVRTC 12.9's PTX serves it (the fake would refuse NVRTC 13's PTX ISA).
    cc1d_backend_test(ptx_tier_cuda12 "shipped PTX tier serves a first call" COMPILES ENV ${_tier}
                      "CC1D_FAKE_DEVICES=90,86" CAUSAL_CONV1D_NVRTC=${CC1D_NVRTC12} CC1D_FAKE_DRIVER_VERSION=12090)
  endif()
  if(CC1D_NVRTC12 AND EXISTS "${CC1D_NVRTC12}")
    cc1d_backend_test(ptx_tier_old_driver "shipped PTX tier refused" COMPILES ENV ${_tier}
                      CAUSAL_CONV1D_NVRTC=${CC1D_NVRTC12} CC1D_FAKE_DRIVER_VERSION=12080
                      "CC1D_TEST_TIER_REFUSAL=newer than this CUDA 12.8 driver can JIT")
  endif()
  # A cache that NVRTC filled (cache_cold) serves before the tier.
  cc1d_backend_test(cache_warm_tier "disk cache warm" COMPILES ENV ${_tier} PROPS FIXTURES_REQUIRED nvrtc_disk_cache)
  set_tests_properties(nvrtc_backend.cache_warm_tier PROPERTIES ENVIRONMENT
    "CAUSAL_CONV1D_CACHE_DIR=${CMAKE_CURRENT_BINARY_DIR}/nvrtc_cache/cache_cold;CC1D_TEST_FAKE_DRIVER=${CC1D_FAKE_DRIVER_PATH};${_tier};CC1D_TEST_NEEDS_NVRTC=1")
endif()

# ---- cc1d_self_test (what `causal-conv1d doctor` runs per device), one process per scenario ---
cc1d_add_test(test_self_test SOURCES ${CC1D_GPU_TEST_DIR}/test_self_test.cpp LIBS cc1d::cc1d
              ARGS "--test-case=cpu,emulate,bad arguments")
add_dependencies(test_self_test cc1d_fake_cuda)
set_tests_properties(test_self_test PROPERTIES LABELS "nvrtc;asan"
                     PASS_REGULAR_EXPRESSION "test cases: +3 \\| +3 passed \\| +0 failed")
# cc1d_self_test_scenario(<name> <test case> [ENV ...]): on the fake libcuda, a private cache.
function(cc1d_self_test_scenario name test_case)
  add_test(NAME self_test.${name} COMMAND test_self_test "--test-case=${test_case}")
  set_tests_properties(self_test.${name} PROPERTIES LABELS "nvrtc;asan" SKIP_RETURN_CODE 77
    ENVIRONMENT "CAUSAL_CONV1D_CACHE_DIR=${CMAKE_CURRENT_BINARY_DIR}/self_test_cache/${name};${ARGN}"
    PASS_REGULAR_EXPRESSION "test cases: +1 \\| +1 passed \\| +0 failed")
endfunction()
cc1d_self_test_scenario(fake_gpu "fake gpu" ${_fake})
cc1d_self_test_scenario(unwritten "unwritten output fails" ${_fake} CC1D_FAKE_EXECUTE=0)
cc1d_self_test_scenario(no_driver "no gpu backend" CAUSAL_CONV1D_CUDA_DRIVER=/nonexistent/libcuda.so.1)

# ---- the same with the NVRTC of a pip wheel, set by `make` (scripts/setup.sh installs them beside
# the venv): CC1D_NVRTC12, the newest CUDA 12's (nvidia-cuda-nvrtc-cu12), and CC1D_NVRTC11, 11.8's
# (nvidia-cuda-nvrtc-cu11), the NVRTC of torch's cu118 wheels and the oldest front end a supported
# torch brings. A driver of that CUDA makes every newer NVRTC ineligible, so the choice rules must
# pick it: compile (the test cases `cases`, one pattern each), choice, and the fake driver end to
# end, whose cubins it compiles.
set(CC1D_NVRTC12 "" CACHE FILEPATH
    "A libnvrtc.so.12 (the nvidia-cuda-nvrtc-cu12 wheel's) the NVRTC tests also run with")
set(CC1D_NVRTC11 "" CACHE FILEPATH
    "A libnvrtc.so.11.2 (the nvidia-cuda-nvrtc-cu11 11.8 wheel's) the NVRTC tests also run with")
function(cc1d_nvrtc_wheel_tests major lib driver cases)
  if(NOT lib OR NOT EXISTS "${lib}")
    message(STATUS "NVRTC ${major} tests not registered: set CC1D_NVRTC${major} to its libnvrtc (scripts/setup.sh "
                   "installs it)")
    return()
  endif()
  set(env CAUSAL_CONV1D_NVRTC=${lib} CC1D_TEST_NVRTC_MAJOR=${major})
  set(compile_env "${env};CC1D_TEST_DRIVER_VERSION=${driver};CC1D_REQUIRE_NVRTC=1;CAUSAL_CONV1D_LOG_LEVEL=warn")
  string(REPLACE "," ";" patterns "${cases}")
  list(LENGTH patterns n)
  add_test(NAME test_nvrtc_compile.nvrtc${major} COMMAND test_nvrtc_compile "--test-case=${cases}")
  set_tests_properties(test_nvrtc_compile.nvrtc${major} PROPERTIES LABELS "nvrtc;nvrtc${major}"
    ENVIRONMENT "${compile_env}"
    PASS_REGULAR_EXPRESSION "test cases: +${n} \\| +${n} passed \\| +0 failed")
  cc1d_self_test_scenario(fake_gpu_nvrtc${major} "fake gpu" ${_fake} ${env} CC1D_FAKE_DRIVER_VERSION=${driver})
  set_tests_properties(self_test.fake_gpu_nvrtc${major} PROPERTIES LABELS "nvrtc;nvrtc${major}")
  if("ALL" IN_LIST ARGN)  # every variant of every op too, as test_nvrtc_compile_all (label slow)
    add_test(NAME test_nvrtc_compile_all.nvrtc${major}
             COMMAND test_nvrtc_compile "--test-case=every kernel of every op*")
    set_tests_properties(test_nvrtc_compile_all.nvrtc${major} PROPERTIES LABELS "nvrtc;nvrtc${major};slow" TIMEOUT 900
      ENVIRONMENT "${compile_env}"
      PASS_REGULAR_EXPRESSION "test cases: +1 \\| +1 passed \\| +0 failed")
  endif()
endfunction()
# NVRTC 12: the backward (its lowest SM, sm_80, its newest), PTX and the compile error; its every-SM
# set takes minutes: run it by hand with the same environment and no --test-case. NVRTC 11.8's
# every-SM set takes 20-40 s on two cores, its backward about 10, and (label slow) every variant
# for sm_90 3.5 minutes.
cc1d_nvrtc_wheel_tests(12 "${CC1D_NVRTC12}" 12080 "the backward's layouts*,PTX mode*,a syntax error*")
cc1d_nvrtc_wheel_tests(11 "${CC1D_NVRTC11}" 11080
                       "a representative set*,the backward's layouts*,PTX mode*,a syntax error*" ALL)

# ---- a precompiled tier on a node without NVRTC (its keys from the tier's targets-v1) ----------
set(_pre ${CMAKE_CURRENT_BINARY_DIR}/nvrtc_cache/precompiled_tier)
cc1d_backend_test(precompile_tier "precompile a tier for sm_90" COMPILES ENV CC1D_TEST_TIER_OUT=${_pre}
                  PROPS FIXTURES_SETUP precompiled_tier)
set(_node ${_fake} CAUSAL_CONV1D_NVRTC=none CAUSAL_CONV1D_CACHE_PATH=${_pre} "CC1D_FAKE_DEVICES=90,80")
cc1d_backend_test(precompiled_no_nvrtc "precompiled tier without any NVRTC" ENV ${_node}
                  PROPS FIXTURES_REQUIRED precompiled_tier)
if(TARGET cc1d_ptx_pack)  # the shipped PTX tier too: it serves what the precompiled one lacks
  cc1d_backend_test(precompiled_and_shipped "precompiled tier without any NVRTC" ENV ${_node}
                    CAUSAL_CONV1D_PTX_TIER=1 CC1D_TEST_SHIPPED=1 PROPS FIXTURES_REQUIRED precompiled_tier)
endif()
# ---- a tier precompiled with NVRTC 12.9 on nodes that choose another NVRTC -------------------
if(CC1D_NVRTC12 AND EXISTS "${CC1D_NVRTC12}")
  set(_pre12 ${CMAKE_CURRENT_BINARY_DIR}/nvrtc_cache/precompiled_tier12)
  cc1d_backend_test(precompile_tier12 "precompile a tier for sm_90" COMPILES ENV CC1D_TEST_TIER_OUT=${_pre12}
                    CAUSAL_CONV1D_NVRTC=${CC1D_NVRTC12} CC1D_TEST_TIER_DRIVER=12090
                    "CC1D_TEST_TIER_COMPILER=NVRTC 12.9" PROPS FIXTURES_SETUP precompiled_tier12)
  set(_node12 ${_fake} CAUSAL_CONV1D_CACHE_PATH=${_pre12} CC1D_FAKE_DEVICES=90)
  # NVRTC 13.0 on a CUDA 13.0 driver: 12.9's cubins load (a cubin needs its NVRTC's major).
  cc1d_backend_test(precompiled_other_nvrtc "precompiled tier from another NVRTC" COMPILES ENV ${_node12}
                    CC1D_TEST_STAND_IN=1 PROPS FIXTURES_REQUIRED precompiled_tier12)
  if(TARGET cc1d_ptx_pack)
    cc1d_backend_test(precompiled_other_nvrtc_shipped "precompiled tier from another NVRTC" COMPILES ENV
                      ${_node12} CC1D_TEST_STAND_IN=1 CAUSAL_CONV1D_PTX_TIER=1 CC1D_TEST_SHIPPED=1
                      PROPS FIXTURES_REQUIRED precompiled_tier12)
  endif()
  # NVRTC 11.8 on a CUDA 11.8 driver, which cannot load them: it compiles.
  if(CC1D_NVRTC11 AND EXISTS "${CC1D_NVRTC11}")
    cc1d_backend_test(precompiled_other_nvrtc_old_driver "precompiled tier from another NVRTC" COMPILES ENV
                      ${_node12} CC1D_TEST_STAND_IN=0 CAUSAL_CONV1D_NVRTC=${CC1D_NVRTC11}
                      CC1D_FAKE_DRIVER_VERSION=11080 PROPS FIXTURES_REQUIRED precompiled_tier12)
  endif()
endif()
