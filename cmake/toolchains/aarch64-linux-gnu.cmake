# aarch64-linux-gnu.cmake — cross-builds libcc1d and its C++ tests for 64-bit Arm Linux (Grace
# hosts: GH200, GB200) with Debian's g++-aarch64-linux-gnu; ctest runs each test under qemu-user.
# scripts/aarch64_test.sh (`make aarch64-test`) installs both and uses this file.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CC1D_AARCH64_SYSROOT /usr/aarch64-linux-gnu CACHE PATH "the aarch64 libc and libstdc++ qemu-user loads")
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64 -L ${CC1D_AARCH64_SYSROOT})
# fmt, spdlog and doctest are used header-only, so the build machine's packages serve: their CMake
# files sit under the build machine's multiarch directory, where a cross find_package does not look.
execute_process(COMMAND gcc -print-multiarch OUTPUT_VARIABLE CC1D_BUILD_MULTIARCH OUTPUT_STRIP_TRAILING_WHITESPACE)
list(APPEND CMAKE_PREFIX_PATH /usr/lib/${CC1D_BUILD_MULTIARCH}/cmake /usr/lib/cmake)
