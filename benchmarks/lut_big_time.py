"""kernels/occupancy lut_big at four block sizes, the same threads (GA101's block-size step), on the GPU.

Usage (GPU machine, repository root): python3 benchmarks/lut_big_time.py
Output: docs/data/lut_big_h200_2026-11-30.txt (H200). CuPy, cudaEvent medians of 200 launches.
"""

import cupy as cp
import numpy as np

src = open("kernels/occupancy/occupancy.cu").read()
mod = cp.RawModule(code=src, options=("-arch=sm_90",))
k = mod.get_function("lut_big")
n = 1081344
inp = cp.arange(n, dtype=cp.uint32)
table = cp.random.rand(12288, dtype=cp.float32)
out = cp.zeros(n, cp.float32)


def t(block):
    grid = (n + block * 4 - 1) // (block * 4)
    args = (inp, table, out, np.uint32(n))
    for _ in range(20):
        k((grid,), (block,), args)
    s, e = cp.cuda.Event(), cp.cuda.Event()
    ts = []
    for _ in range(200):
        s.record()
        k((grid,), (block,), args)
        e.record()
        e.synchronize()
        ts.append(cp.cuda.get_elapsed_time(s, e))
    return grid, float(np.median(ts)) * 1e3


for b in (128, 256, 512, 1024):
    g, us = t(b)
    print(f"lut_big block {b} grid {g}: {us:.2f} us")
