# Cross build for arm64 Linux on a Debian amd64 machine (the aarch64 preset): Debian's cross
# compilers (crossbuild-essential-arm64), the arm64 libraries installed through multiarch under
# /usr/lib/aarch64-linux-gnu, and qemu's user-mode emulator to run what was built (ctest runs
# every test binary through it). deploy/install-deps-aarch64.sh installs all of it.
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)
set(CMAKE_C_COMPILER aarch64-linux-gnu-gcc)
set(CMAKE_CXX_COMPILER aarch64-linux-gnu-g++)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

# The arm64 packages that cannot sit beside their amd64 versions (sentencepiece, yaml-cpp) are
# unpacked here by install-deps-aarch64.sh.
set(HEARTH_AARCH64_ROOT "$ENV{HEARTH_AARCH64_ROOT}")
if(NOT HEARTH_AARCH64_ROOT)
  set(HEARTH_AARCH64_ROOT /opt/hearth-aarch64)
endif()

# Libraries and packages: arm64 ones only (multiarch's lib/aarch64-linux-gnu under / or the
# unpacked root); headers from either (the architecture-independent ones are the host's);
# programs are the host's.
set(CMAKE_FIND_ROOT_PATH ${HEARTH_AARCH64_ROOT} /)
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE BOTH)

# pkg-config reads the arm64 .pc files, never the host's.
set(ENV{PKG_CONFIG_LIBDIR}
    "${HEARTH_AARCH64_ROOT}/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")

# qemu-aarch64 finds the arm64 loader and libc through multiarch (/lib/ld-linux-aarch64.so.1).
set(CMAKE_CROSSCOMPILING_EMULATOR qemu-aarch64)
