// The compare-exchange of a bitonic sort's pair, by reference (CUDA samples' Comparator).
#pragma once
__device__ inline void Comparator(unsigned& a, unsigned& b, unsigned up) {
    if ((a > b) == up) {
        unsigned t = a;
        a = b;
        b = t;
    }
}
