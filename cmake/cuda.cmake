# The CUDA toolchain (HEARTH_CUDA = AUTO/ON/OFF), enabled at the top level so that every folder
# (backends/cuda, bench, tests) can build .cu files and link CUDA:: targets. Sets
# HEARTH_HAVE_CUDA_TOOLCHAIN.
if(NOT HEARTH_CUDA STREQUAL "OFF")
  include(CheckLanguage)
  check_language(CUDA)
  if(CMAKE_CUDA_COMPILER)
    set(HEARTH_HAVE_CUDA_TOOLCHAIN ON)
    message(STATUS "hearth: CUDA toolchain found (${CMAKE_CUDA_COMPILER})")
  elseif(HEARTH_CUDA STREQUAL "ON")
    message(FATAL_ERROR "HEARTH_CUDA=ON but no CUDA compiler was found")
  endif()
endif()
if(HEARTH_HAVE_CUDA_TOOLCHAIN)
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  # CMake 3.25 does not know that nvcc 12+ compiles C++20, and the C++20 our headers need reaches
  # the .cu files through hearth_engine's compile features: tell it the flag.
  if(NOT CMAKE_CUDA20_STANDARD_COMPILE_OPTION)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    list(APPEND CMAKE_CUDA_COMPILE_FEATURES cuda_std_20)
  endif()
  # Architectures: native when this machine has an NVIDIA GPU (nvidia-smi lists one). Else PTX
  # for compute 7.5, which the driver compiles for any GPU from Turing on at first use (and
  # caches): the kernels use nothing newer, and machine code for five GPU generations took eight
  # times as long to build (nvcc, mul-mat-vec.cu: 1,162 s against 142 s on a loaded 2-core
  # machine). Binaries meant for other machines can name real architectures.
  if(NOT HEARTH_CUDA_ARCHITECTURES)
    execute_process(COMMAND nvidia-smi -L RESULT_VARIABLE smi_rc OUTPUT_VARIABLE smi_out ERROR_QUIET)
    if(smi_rc EQUAL 0 AND smi_out MATCHES "GPU")
      set(default_archs native)
    else()
      set(default_archs "75-virtual")
    endif()
    set(HEARTH_CUDA_ARCHITECTURES "${default_archs}" CACHE STRING "CUDA architectures to build for")
  endif()
  message(STATUS "hearth: CUDA architectures ${HEARTH_CUDA_ARCHITECTURES}")
endif()
