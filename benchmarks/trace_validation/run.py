"""Issue 5 acceptance on a GPU: the CPU emulator and the bank/coalescing models against the GPU.

For each case (micro-kernels in micro.cu, the seed 003 reductions):
  1. gpuadvise's CPU path (compile, emulate every CTA, reconcile with SASS, bank and coalescing
     models) gives per-launch shared wavefronts (loads, stores) and global requests and sectors, and
     the output buffers;
  2. the same launch runs once on the GPU under Nsight Compute (ncu-counters, --clock-control none)
     through gpuadvise's runner (same buffers, same seed), saving its outputs;
  3. the table compares modelled and measured counters (target: within 3%) and the outputs (exact
     for integers, close for floats).
Usage (GPU machine): python3 benchmarks/trace_validation/run.py [--json OUT] [--only NAME]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
MICRO = str(HERE / "micro.cu")
REDUCE = str(ROOT / "kernels/reduction/reduce.cu")
G = 64  # blocks of the shared-memory micro-kernels


def smem(kernel: str, t: str) -> dict:
    return dict(
        source=MICRO,
        kernel=kernel,
        grid=str(G),
        block="256",
        buffers=(f"in={t}[256]", f"out={t}[{G * 256}]"),
    )


def red(kernel: str, per_block: int) -> dict:
    return dict(
        source=REDUCE,
        kernel=kernel,
        grid=f"ceil_div(n,{per_block})",
        block="256",
        args=("n=1048576",),
        buffers=("in=int[n]", f"out=int[ceil_div(n,{per_block})]:zeros"),
    )


CASES: dict[str, dict] = {
    "smem f32 stride 1": smem("smem_stride<float, 1>", "float"),
    "smem f32 stride 2": smem("smem_stride<float, 2>", "float"),
    "smem f32 stride 32": smem("smem_stride<float, 32>", "float"),
    "smem f32 stride 33": smem("smem_stride<float, 33>", "float"),
    "smem f64 stride 1": smem("smem_stride<double, 1>", "double"),
    "smem f64 stride 2": smem("smem_stride<double, 2>", "double"),
    "smem f64 stride 17": smem("smem_stride<double, 17>", "double"),
    "smem f128 stride 1": smem("smem_stride<float4, 1>", "float4"),
    "smem f128 stride 2": smem("smem_stride<float4, 2>", "float4"),
    "smem f128 stride 9": smem("smem_stride<float4, 9>", "float4"),
    "smem broadcast": dict(
        source=MICRO,
        kernel="smem_broadcast",
        grid=str(G),
        block="256",
        buffers=("in=float[256]", f"out=float[{G * 256}]"),
    ),
    "transpose": dict(
        source=MICRO,
        kernel="transpose<0>",
        grid="32x32",
        block="32x8",
        args=("w=1024", "h=1024"),
        buffers=("in=float[w*h]", "out=float[w*h]"),
    ),
    "transpose padded": dict(
        source=MICRO,
        kernel="transpose<1>",
        grid="32x32",
        block="32x8",
        args=("w=1024", "h=1024"),
        buffers=("in=float[w*h]", "out=float[w*h]"),
    ),
    **{
        f"global stride {s}": dict(
            source=MICRO,
            kernel=f"global_stride<{s}>",
            grid="4096",
            block="256",
            args=("n=1048576",),
            buffers=(f"in=float[n*{s}]", "out=float[n]"),
        )
        for s in (1, 2, 8, 32)
    },
    "AoS field": dict(
        source=MICRO,
        kernel="aos_field",
        grid="4096",
        block="256",
        args=("n=1048576",),
        buffers=("p=Particle[n]", "out=float[n]"),
    ),
    "global misaligned": dict(
        source=MICRO,
        kernel="global_offset",
        grid="4096",
        block="256",
        args=("n=1048576",),
        buffers=("in=float[n+1]", "out=float[n]"),
    ),
    "reduce1": red("reduce1", 256),
    "reduce2": red("reduce2", 256),
    "reduce3": red("reduce3", 256),
    "reduce4": red("reduce4", 512),
    "reduce5": red("reduce5", 512),
    "reduce6": red("reduce6<256>", 512),
    "reduce7": dict(red("reduce7<256>", 512), grid="264"),
}

METRICS = {
    "smem_ld": "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
    "smem_st": "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum",
    "gld_req": "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",
    "gld_sec": "l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
    "gst_req": "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum",
    "gst_sec": "l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
}


def model(case: dict) -> tuple[dict, dict[str, np.ndarray], str | None]:
    from gpuadvise.analyze.options import KernelOptions, build
    from gpuadvise.analyze.pipeline import analyze_kernel
    from gpuadvise.analyze.prepare import live_options

    spec, choice, options = build(live_options(KernelOptions(**case)))
    a = analyze_kernel(spec, choice.device, options, sample_ctas="all")
    m = a.memory
    if m is None or m.error:
        return {}, {}, None if m is None else m.error
    b, c = m.banks.launch, m.coalescing.launch
    return (
        {
            "smem_ld": b.load.wavefronts,
            "smem_st": b.store.wavefronts,
            "gld_req": c.load.requests,
            "gld_sec": c.load.sectors,
            "gst_req": c.store.requests,
            "gst_sec": c.store.sectors,
        },
        m.outputs,
        None,
    )


def measure(case: dict, tmp: Path) -> tuple[dict, dict[str, np.ndarray]]:
    out = tmp / "out.npz"
    name = case["kernel"].split("<")[0]
    cmd = [
        str(HERE / "ncu-counters"),
        "-k",
        f"^{name}",
        "-c",
        "1",
        "--",
        sys.executable,
        str(HERE / "run_once.py"),
        json.dumps(case),
        str(out),
    ]
    p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ})
    got: dict[str, float] = {}
    for line in p.stdout.splitlines():
        parts = line.split()
        if len(parts) >= 4:
            for key, metric in METRICS.items():
                if parts[2] == metric:
                    got[key] = float(parts[3])
    outputs = dict(np.load(out)) if out.exists() else {}
    if not got:
        print(p.stdout[-2000:], p.stderr[-2000:], file=sys.stderr)
    return got, outputs


def outputs_agree(a: dict[str, np.ndarray], b: dict[str, np.ndarray]) -> str:
    from gpuadvise.runner.verify import compare

    if not a or not b:
        return "n/a"
    msgs = []
    for k in b:
        if k not in a:
            continue
        c = compare(k, b[k], a[k], rtol=1e-5, atol=1e-6)
        msgs.append("exact" if c.ok and c.max_abs_err == 0 else "close" if c.ok else "DIFFER")
    return ",".join(msgs) or "n/a"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", type=Path)
    ap.add_argument("--only")
    a = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as t:
        for name, case in CASES.items():
            if a.only and a.only not in name:
                continue
            pred, emu_out, err = model(case)
            meas, gpu_out = measure(case, Path(t))
            row = {
                "case": name,
                "model": pred,
                "ncu": meas,
                "error": err,
                "outputs": outputs_agree(emu_out, gpu_out),
            }
            rows.append(row)
            cells = []
            for key in METRICS:
                m, g = pred.get(key), meas.get(key)
                if m is None or g is None or (m == 0 and g == 0):
                    continue
                d = (m - g) / g * 100 if g else float("inf")
                cells.append(f"{key} {m:,.0f}/{g:,.0f} ({d:+.1f}%)")
            print(
                f"{name:20s} outputs {row['outputs']:6s} "
                + "; ".join(cells)
                + (f" ERROR {err}" if err else ""),
                flush=True,
            )
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1, default=float))
    return 0


if __name__ == "__main__":
    sys.exit(main())
