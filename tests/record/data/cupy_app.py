"""The GPU test's CuPy program (tests/record/test_record_gpu.py): a RawKernel read from
gather.cu, launched on a view (y[16:]); it prints a checksum of its results."""

import sys
from pathlib import Path

import cupy as cp

code = (Path(__file__).parent / "gather.cu").read_text()
kernel = cp.RawKernel(code, "gather32", options=("-lineinfo",))
n = 1 << 16
x = cp.arange(n, dtype=cp.float32) * 0.5 - 7.0
y = cp.zeros(n + 16, dtype=cp.float32)
for _ in range(int(sys.argv[1]) if len(sys.argv) > 1 else 2):
    kernel(((n + 255) // 256,), (256,), (x, y[16:], cp.int32(n)))
cp.cuda.Device().synchronize()
w = cp.arange(n, dtype=cp.float64) % 13 + 1
print(f"checksum {float((y[16:].astype(cp.float64) * w).sum()):.6f}")
