// HEARTH_HD marks functions shared by device code and host code: inlined __host__ __device__
// under nvcc, plain inline under the host compiler, so the host tests (quant_test.cpp,
// attention-math_test.cpp) check the very functions the kernels run.
#pragma once

#ifndef HEARTH_HD
#ifdef __CUDACC__
#define HEARTH_HD __host__ __device__ __forceinline__
#else
#define HEARTH_HD inline
#endif
#endif
