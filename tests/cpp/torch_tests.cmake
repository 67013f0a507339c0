# torch_tests.cmake — the C++ program of the README's cc1d_torch example, as a test: it links
# cc1d_torch and libtorch and runs every op on every backend against the float64 reference.
# Included by tests/cpp/CMakeLists.txt when cmake/cc1d_torch.cmake defined the target.
cc1d_add_test(test_cc1d_torch SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cc1d_torch.cpp
              LIBS cc1d_torch cc1d ${CC1D_TORCH_CPU_LIB} ${CC1D_C10_LIB})
target_include_directories(test_cc1d_torch PRIVATE ${TORCH_INCLUDE_DIRS})
set_target_properties(test_cc1d_torch PROPERTIES CXX_STANDARD ${CC1D_TORCH_CXX_STANDARD})
target_compile_definitions(test_cc1d_torch PRIVATE CC1D_TORCH_RECORD="${CC1D_TORCH_RECORD}"
                           _GLIBCXX_USE_CXX11_ABI=${CC1D_TORCH_CXX11_ABI})
# cc1d_torch is used through the dispatcher only: keep it linked (its registrars run at load).
target_link_options(test_cc1d_torch PRIVATE -Wl,--no-as-needed)
set_tests_properties(test_cc1d_torch PROPERTIES LABELS "torch" ENVIRONMENT "CAUSAL_CONV1D_NUM_THREADS=2")
