#!/usr/bin/env python3
"""Time kernels/tile_gather's gather_tiled (8K, r=256, step=64, n=32) and gather_1440p (r=64,
step=16) on the GPU: cudaEvent medians of 50 launches, against the model's ALU-bound times.
Run from the repository root on a machine with CuPy: `python3 benchmarks/tile_gather_time.py`."""

import cupy as cp
import numpy as np

src = open("kernels/tile_gather/gather.cu").read()
mod = cp.RawModule(code=src, options=("-std=c++17",))
print(cp.cuda.runtime.getDeviceProperties(0)["name"].decode())


def time(name, w, h, r, step, n=None):
    k = mod.get_function(name)
    a = cp.random.random(w * h, dtype=cp.float32)
    o = cp.zeros(w * h, dtype=cp.float32)
    grid = ((w + 15) // 16, (h + 15) // 16)
    args = [a, o, np.int32(w), np.int32(h), np.int32(r), np.int32(step)]
    if n is not None:
        args.append(np.uint32(n))
    for _ in range(5):
        k(grid, (16, 16), tuple(args))
    ts = []
    for _ in range(50):
        s, e = cp.cuda.Event(), cp.cuda.Event()
        s.record()
        k(grid, (16, 16), tuple(args))
        e.record()
        e.synchronize()
        ts.append(cp.cuda.get_elapsed_time(s, e))
    print(
        f"{name} {w}x{h} r={r} step={step} n={n}: median {np.median(ts):.4f} ms min {min(ts):.4f} ms"
    )


time("gather_tiled", 7680, 4320, 256, 64, 32)
time("gather_rowmajor", 7680, 4320, 256, 64)
time("gather_rowmajor", 7680, 4320, 1024, 256)
time("gather_1440p", 2560, 1440, 64, 16)
