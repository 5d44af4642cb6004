// The kernels of rows.cuh, compiled from a .cu that includes the header.
#include "rows.cuh"
