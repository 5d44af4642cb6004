// A functor in an included header: its __ldg sits on a line of this file and of the toolkit's
// sm_32_intrinsics.hpp; gpuadvise reports the accesses at the kernel's call site.
#pragma once

struct Pick {
    __device__ __forceinline__ float operator()(const float* __restrict__ p, long i) const {
        return __ldg(p + i);
    }
};
