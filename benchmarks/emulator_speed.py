"""Speed of the CPU emulator (gpuadvise.trace.emulate): lane-instructions per second, batches of 64K lanes.

Target (the emulator issue): at least 1e8 lane-instructions per second on a 2-core machine. A
lane-instruction is one PTX instruction executed by one active thread; the rates count the whole
``emulate`` call (buffers made, PTX parsed, every CTA run, trace built). Each kernel runs traced
twice ("cold": the first run in the process; "traced": the second) and untraced
(``trace=False``). The trace holds one 279-byte record per warp-level memory access, written once;
memory-heavy kernels spend most of their time writing it, and more on VMs where touching fresh
memory is slow (about 3 ns per byte on the Firecracker sandbox the project is developed in).

Usage: python benchmarks/emulator_speed.py [--kernels vec_add,loop_fma] [--lanes 65536]
Needs nvcc (compiles the kernels below through gpuadvise.toolchain); no GPU.
"""

from __future__ import annotations

import argparse
import gc
import sys
import tempfile
from pathlib import Path

SOURCE = r"""
#define TILE 16
__global__ void vec_add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
__global__ void loop_fma(const float* in, float* out, int iters) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  float x = in[i], y = 1.0f, z = 0.5f;
  for (int k = 0; k < iters; k++) {
    y = fmaf(x, y, z);
    z = z * 0.999f + (float)(k & 7);
    x = x + 1e-3f * y;
  }
  out[i] = x + y + z;
}
__global__ void matmul(const float* A, const float* B, float* C, int n) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE];
  int tx = threadIdx.x, ty = threadIdx.y;
  int row = blockIdx.y * TILE + ty, col = blockIdx.x * TILE + tx;
  float acc = 0.f;
  for (int t = 0; t < n; t += TILE) {
    As[ty][tx] = A[row * n + t + tx];
    Bs[ty][tx] = B[(t + ty) * n + col];
    __syncthreads();
    for (int k = 0; k < TILE; k++) acc += As[ty][k] * Bs[k][tx];
    __syncthreads();
  }
  C[row * n + col] = acc;
}
__global__ void reduce(const int* in, int* out) {
  __shared__ int s[256];
  int t = threadIdx.x;
  s[t] = in[blockIdx.x * 256 + t];
  __syncthreads();
  for (int st = 128; st > 0; st >>= 1) {
    if (t < st) s[t] += s[t + st];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = s[0];
}
__global__ void stencil(const float* in, float* out, int w, int h) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < 1 || y < 1 || x >= w - 1 || y >= h - 1) return;
  float c = in[y * w + x];
  float s = in[y * w + x - 1] + in[y * w + x + 1] + in[(y - 1) * w + x] + in[(y + 1) * w + x];
  out[y * w + x] = c + 0.25f * (s - 4.0f * c);
}
__global__ void collatz(const int* in, int* out) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned v = (unsigned)in[i] + 1u + (unsigned)i % 97u, steps = 0;
  while (v != 1u && steps < 200u) {
    v = (v & 1u) ? 3u * v + 1u : v >> 1;
    steps++;
  }
  out[i] = (int)steps;
}
"""

N_VEC = 1 << 21
CASES = {
    "vec_add": dict(
        grid=N_VEC // 256,
        block=256,
        args=[f"n={N_VEC}"],
        buffers=[f"a=float[{N_VEC}]", f"b=float[{N_VEC}]", f"c=float[{N_VEC}]"],
    ),
    "loop_fma": dict(
        grid=1024, block=256, args=["iters=256"], buffers=["in=float[262144]", "out=float[262144]"]
    ),
    "matmul": dict(
        grid="16x16",
        block="16x16",
        args=["n=256"],
        buffers=["A=float[65536]", "B=float[65536]", "C=float[65536]"],
    ),
    "reduce": dict(grid=1024, block=256, buffers=["in=int[262144]", "out=int[1024]"]),
    "stencil": dict(
        grid="32x64",
        block="32x8",
        args=["w=1024", "h=512"],
        buffers=["in=float[524288]", "out=float[524288]"],
    ),
    "collatz": dict(grid=256, block=256, buffers=["in=int[65536]", "out=int[65536]"]),
}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernels", default=",".join(CASES))
    ap.add_argument("--lanes", type=int, default=65536, help="lanes per batch")
    ap.add_argument("--target", type=float, default=1e8)
    opts = ap.parse_args()

    from gpuadvise.devices import preset
    from gpuadvise.source.signature import parse_signature
    from gpuadvise.spec.kernel_spec import build_kernel_spec, resolve
    from gpuadvise.toolchain import CompileOptions, compile_source
    from gpuadvise.trace.emulate import emulate

    with tempfile.TemporaryDirectory(prefix="gpuadvise-emu-bench-") as tmp:
        src = Path(tmp) / "bench.cu"
        src.write_text(SOURCE)
        module = compile_source(src, CompileOptions(arch="sm_90", use_cache=False))
        device = preset("H100")
        print(
            f"{'kernel':9} {'lane-instr':>12} {'records':>10} {'traced s':>9} {'/s':>8} "
            f"{'cold s':>7} {'/s':>8} {'untraced s':>10} {'/s':>8}"
        )
        rates = []
        for name in opts.kernels.split(","):
            case = CASES[name]
            spec = build_kernel_spec(
                src,
                name,
                grid=case["grid"],
                block=case["block"],
                args=case.get("args", []),
                buffers=case["buffers"],
                discover=False,
            )
            launch = resolve(spec, parse_signature(SOURCE, name))

            def once(trace: bool, name: str = name, launch: object = launch) -> object:
                return emulate(
                    module,
                    module.kernel(name),
                    launch,  # type: ignore[arg-type]
                    device,
                    sample_ctas="all",
                    batch_lanes=opts.lanes,
                    trace=trace,
                )

            # Each run's result is released before the next, as in `analyze` (one emulation per
            # process): with the previous run's trace still alive (330 MB for matmul) the next
            # traced run of a trace-heavy kernel was measured 2x slower (0.7e8/s), an artifact of
            # holding two traces, not of the emulator.
            def timed(trace: bool) -> tuple[float, int, int]:
                r = once(trace)
                out = (r.time_s, r.lane_instructions, len(r.trace.records))  # type: ignore[attr-defined]
                del r
                gc.collect()
                return out

            cold_s, li, nrec = timed(True)
            warm_s, _, _ = timed(True)
            timed(False)
            bare_s, _, _ = timed(False)
            rate = li / warm_s
            rates.append(rate)
            print(
                f"{name:9} {li:12,d} {nrec:10,d} {warm_s:9.2f} {rate:8.3g} "
                f"{cold_s:7.2f} {li / cold_s:8.3g} {bare_s:10.2f} {li / bare_s:8.3g}"
            )
        worst = min(rates)
        verdict = "meets" if worst >= opts.target else "misses"
        print(
            f"slowest traced rate {worst:.3g} lane-instructions/s: {verdict} the {opts.target:.0e} target"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
