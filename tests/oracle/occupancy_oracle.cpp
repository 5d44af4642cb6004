// The oracle for gpuadvise.model.occupancy: NVIDIA's own cuda_occupancy.h, compiled with g++.
// Reads one configuration per line on stdin, writes one result line per configuration:
//   in:  major minor threadsPerSM blocksPerSM(unused) regsPerSM regsPerBlock smemPerSM smemOptin
//        reserved  blockSize numRegs staticSmem dynSmem optin maxDyn barriers virtual gc carveout
//        numBlocksForDyn
//   out: status activeBlocks limitingFactors limRegs limSmem limWarps limBlocks limBars limVirtual
//        allocRegs allocSmem gcOut dynStatus dynBytes
#include <cstdio>
#include <cuda_occupancy.h>

int main() {
    int major, minor, tpsm, bpsm, regsm, regblk, optin, barriers, virt, gc, carve, blockSize, numRegs,
        numBlocks;
    long long smemsm, smemoptin, reserved, staticSmem, dynSmem, maxDyn;
    while (scanf("%d %d %d %d %d %d %lld %lld %lld %d %d %lld %lld %d %lld %d %d %d %d %d", &major,
                 &minor, &tpsm, &bpsm, &regsm, &regblk, &smemsm, &smemoptin, &reserved, &blockSize,
                 &numRegs, &staticSmem, &dynSmem, &optin, &maxDyn, &barriers, &virt, &gc, &carve,
                 &numBlocks) == 20) {
        cudaOccDeviceProp p;
        p.computeMajor = major;
        p.computeMinor = minor;
        p.maxThreadsPerBlock = 1024;
        p.maxThreadsPerMultiprocessor = tpsm;
        p.regsPerBlock = regblk;
        p.regsPerMultiprocessor = regsm;
        p.warpSize = 32;
        p.sharedMemPerBlock = 48 * 1024;
        p.sharedMemPerMultiprocessor = (size_t)smemsm;
        p.numSms = 1;
        p.sharedMemPerBlockOptin = (size_t)smemoptin;
        p.reservedSharedMemPerBlock = (size_t)reserved;
        cudaOccFuncAttributes a;
        a.maxThreadsPerBlock = 1024;
        a.numRegs = numRegs;
        a.sharedSizeBytes = (size_t)staticSmem;
        a.partitionedGCConfig = (cudaOccPartitionedGCConfig)gc;
        a.shmemLimitConfig = optin ? FUNC_SHMEM_LIMIT_OPTIN : FUNC_SHMEM_LIMIT_DEFAULT;
        a.maxDynamicSharedSizeBytes = (size_t)maxDyn;
        a.numBlockBarriers = barriers;
        a.virtualResourceCount = virt;
        cudaOccDeviceState s;
        s.carveoutConfig = carve;
        cudaOccResult r = {};
        cudaOccError st = cudaOccMaxActiveBlocksPerMultiprocessor(&r, &p, &a, &s, blockSize,
                                                                  (size_t)dynSmem);
        size_t dyn = 0;
        cudaOccError dst = cudaOccAvailableDynamicSMemPerBlock(&dyn, &p, &a, &s, numBlocks, blockSize);
        printf("%d %d %u %d %d %d %d %d %d %d %zu %d %d %zu\n", (int)st, r.activeBlocksPerMultiprocessor,
               r.limitingFactors, r.blockLimitRegs, r.blockLimitSharedMem, r.blockLimitWarps,
               r.blockLimitBlocks, r.blockLimitBarriers, r.blockLimitVirtual,
               r.allocatedRegistersPerBlock, r.allocatedSharedMemPerBlock, (int)r.partitionedGCConfig,
               (int)dst, dst == CUDA_OCC_SUCCESS ? dyn : (size_t)0);
    }
    return 0;
}
