"""Validate the occupancy model against the CUDA driver's own calculator, on a real GPU.

Compiles a few real kernels (different registers, static shared memory, block barriers) with nvcc,
loads them with cuda-python's driver bindings, and for every carveout in {-1, 0, 10, 25, 50, 75, 100},
block sizes 1..1024 (a sample) and dynamic shared memory sizes up to the opt-in limit, compares
``cuOccupancyMaxActiveBlocksPerMultiprocessor`` with gpuadvise's model of the live device. Also checks
the preset's limits against the device attributes the driver reports.

Usage (GPU machine): python benchmarks/occupancy_vs_driver.py [--json OUT]
Exit code 0 when every configuration agrees.
"""

from __future__ import annotations

import argparse
import json
import random
import subprocess
import sys
import tempfile
from pathlib import Path

KERNELS = r"""
extern "C" __global__ void light(float* out, const float* in, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * in[i];
}
extern "C" __global__ void tile_smem(float* out, const float* in, int n) {
    __shared__ float tile[8192];  // 32 KB static
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    tile[threadIdx.x] = i < n ? in[i] : 0.0f;
    __syncthreads();
    if (i < n) out[i] = tile[(threadIdx.x + 1) % blockDim.x];
}
extern "C" __global__ void dyn_smem(float* out, const float* in, int n) {
    extern __shared__ float buf[];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    buf[threadIdx.x] = i < n ? in[i] : 0.0f;
    __syncthreads();
    if (i < n) out[i] = buf[blockDim.x - 1 - threadIdx.x];
}
extern "C" __global__ void heavy_regs(float* out, const float* in, int n) {
    float acc[48];
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    #pragma unroll
    for (int k = 0; k < 48; ++k) acc[k] = in[(i + k * 97) % n];
    float s = 0.f;
    #pragma unroll
    for (int r = 0; r < 4; ++r)
      #pragma unroll
      for (int k = 0; k < 48; ++k) s += acc[k] * acc[(k * 7 + r) % 48];
    if (i < n) out[i] = s;
}
"""
CARVEOUTS = [-1, 0, 10, 25, 50, 75, 100]


def check(err: object) -> None:
    from cuda.bindings import driver as cu

    code = err[0] if isinstance(err, tuple) else err
    if code != cu.CUresult.CUDA_SUCCESS:
        raise RuntimeError(f"CUDA error {code}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", type=Path)
    ap.add_argument("--samples", type=int, default=400)
    args = ap.parse_args()

    from cuda.bindings import driver as cu

    from gpuadvise import devices
    from gpuadvise.model import occupancy as occ

    check(cu.cuInit(0))
    err, dev = cu.cuDeviceGet(0)
    check(err)
    err, ctx = cu.cuDevicePrimaryCtxRetain(dev)
    check(err)
    check(cu.cuCtxSetCurrent(ctx))

    def attr(a: object) -> int:
        err, v = cu.cuDeviceGetAttribute(a, dev)
        check(err)
        return int(v)

    A = cu.CUdevice_attribute
    major = attr(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
    minor = attr(A.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
    err, name = cu.cuDeviceGetName(256, dev)
    check(err)
    name = name.split(b"\0")[0].decode()
    live = {
        "threads_per_sm": attr(A.CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR),
        "blocks_per_sm": attr(A.CU_DEVICE_ATTRIBUTE_MAX_BLOCKS_PER_MULTIPROCESSOR),
        "regs_per_sm": attr(A.CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_MULTIPROCESSOR),
        "regs_per_block": attr(A.CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK),
        "smem_per_sm": attr(A.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR),
        "smem_per_block_optin": attr(A.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN),
        "reserved_smem_per_block": attr(A.CU_DEVICE_ATTRIBUTE_RESERVED_SHARED_MEMORY_PER_BLOCK),
        "smem_per_block": attr(A.CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK),
        "sm_count": attr(A.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT),
        "l2_bytes": attr(A.CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE),
    }
    model = devices.from_live(name, f"{major}.{minor}")
    preset_diffs = {k: (getattr(model, k), v) for k, v in live.items() if getattr(model, k) != v}
    print(f"device: {name} (cc {major}.{minor}), modelled as {model.name}")
    print("preset vs driver attributes:", "all equal" if not preset_diffs else preset_diffs)

    arch = f"sm_{major}{minor}"
    tmp = Path(tempfile.mkdtemp())
    src = tmp / "k.cu"
    src.write_text(KERNELS)
    cubin = tmp / "k.cubin"
    subprocess.run(
        ["nvcc", "-cubin", f"-arch={arch}", "-O3", "-o", str(cubin), str(src)], check=True
    )
    err, mod = cu.cuModuleLoadData(cubin.read_bytes())
    check(err)

    rng = random.Random(7)
    rows = []
    mismatches = []
    total = 0
    F = cu.CUfunction_attribute
    for kname in ("light", "tile_smem", "dyn_smem", "heavy_regs"):
        err, fn = cu.cuModuleGetFunction(mod, kname.encode())
        check(err)
        err, regs = cu.cuFuncGetAttribute(F.CU_FUNC_ATTRIBUTE_NUM_REGS, fn)
        check(err)
        err, static = cu.cuFuncGetAttribute(F.CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, fn)
        check(err)
        max_dyn = live["smem_per_block_optin"] - static
        check(cu.cuFuncSetAttribute(fn, F.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, max_dyn))
        n_case = n_bad = 0
        for carveout in CARVEOUTS:
            check(
                cu.cuFuncSetAttribute(
                    fn, F.CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT, carveout
                )
            )
            for _ in range(args.samples):
                block = rng.choice([rng.randint(1, 1024), 32 * rng.randint(1, 32)])
                dyn = rng.choice(
                    [0, 0, rng.randrange(0, 49152), rng.randrange(0, max_dyn + 1), max_dyn]
                )
                err, got = cu.cuOccupancyMaxActiveBlocksPerMultiprocessor(fn, block, dyn)
                check(err)
                k = occ.KernelResources(
                    threads_per_block=block,
                    regs_per_thread=int(regs),
                    static_smem_bytes=int(static),
                    dynamic_smem_bytes=dyn,
                    optin=True,
                    max_dynamic_smem_bytes=max_dyn,
                )
                want = occ.max_active_blocks(model, k, carveout).active_blocks_per_sm
                n_case += 1
                if want != got:
                    n_bad += 1
                    mismatches.append((kname, carveout, block, dyn, got, want))
        total += n_case
        rows.append(
            {
                "kernel": kname,
                "registers": int(regs),
                "static_smem_bytes": int(static),
                "configs": n_case,
                "mismatches": n_bad,
            }
        )
        print(
            f"{kname:11s} regs={regs:3d} static_smem={static:6d} configs={n_case} "
            f"mismatches={n_bad}"
        )
    print(f"total: {total} configurations, {len(mismatches)} mismatches")
    for m in mismatches[:10]:
        print("  mismatch (kernel, carveout, block, dyn, driver, model):", m)
    if args.json:
        args.json.write_text(
            json.dumps(
                {
                    "device": name,
                    "cc": f"{major}.{minor}",
                    "live": live,
                    "preset_diffs": {k: list(v) for k, v in preset_diffs.items()},
                    "kernels": rows,
                    "mismatches": mismatches[:50],
                },
                indent=1,
            )
        )
    return 0 if not mismatches else 1


if __name__ == "__main__":
    sys.exit(main())
