// Helpers in the spellings public reductions use: cuda-samples' SharedMemory<T> (the block's
// dynamic shared memory through a typed helper) and a block-size macro.
#pragma once
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

#define BLOCK_SIZE 256

template <class T>
struct SharedMemory {
    __device__ inline operator T*() {
        extern __shared__ int __smem[];
        return (T*)__smem;
    }
};
