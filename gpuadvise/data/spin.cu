// Keeps the GPU busy for a few microseconds before a timed launch, so that the start event, the
// kernel and the stop event are all queued before the GPU reaches them: no host launch overhead
// falls between the two events.
extern "C" __global__ void gpuadvise_spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) {
    }
}
