# Cross-build for 64-bit Arm Linux with Debian's gcc-aarch64-linux-gnu; the tests run
# under qemu-aarch64 (`make test-arm64`). This is how the NEON kernels and the arm64
# paths are built and run on an x86-64 machine.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
find_program(AF_CROSS_CXX aarch64-linux-gnu-g++)
if(AF_CROSS_CXX)
  set(CMAKE_CXX_COMPILER ${AF_CROSS_CXX})
endif()
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64;-L;/usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH /usr/aarch64-linux-gnu)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
