"""SIMT efficiency: the CPU emulator's prediction against Nsight Compute, per kernel (GA104).

For each case (kernels/reduction reduce1..3, the causal mask and the other kernels of
tests/cuda/divergence/divergence.cu, a uniform kernel) it prints the emulator's SIMT efficiency
(active lanes per executed PTX warp instruction, every CTA emulated:
:mod:`gpuadvise.trace.simt`) next to Nsight Compute's

- ``smsp__thread_inst_executed.sum / (smsp__inst_executed.sum * 32)``: active threads per SASS
  warp instruction (a predicated-off thread still counts as active), and
- ``smsp__thread_inst_executed_pred_on.sum / (smsp__inst_executed.sum * 32)``: threads whose
  predicate was on; where ptxas turned a short branch into predicated instructions (reduce1's
  ``if (tid % (2*s) == 0)`` body) the lanes the PTX branch idles show up here, not above.

Usage, on the GPU machine (python3, nvcc and ncu on the PATH), from the repository root:
    python3 benchmarks/simt_validation.py OUT.md [--arch sm_90] [--only NAME] [--no-gpu]
``--no-gpu``: predictions only (the Nsight columns empty), on any machine with nvcc.
Writes a markdown table to OUT.md (and prints it); ncu is run with ``--clock-control none``.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import io
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
REDUCE = ROOT / "kernels" / "reduction" / "reduce.cu"
DIV = ROOT / "tests" / "cuda" / "divergence" / "divergence.cu"
N_REDUCE = 1 << 20
T_CAUSAL, D_CAUSAL = 512, 64
N_FMA = 1 << 18


@dataclass(frozen=True)
class Case:
    name: str  # the kernel as ncu names it (without parameters)
    source: Path
    grid: str
    block: str
    args: tuple[str, ...]
    buffers: tuple[str, ...]
    launch: str  # the CUDA launch statement in the driver (buffers b0, b1, ... in order)


def _cases() -> list[Case]:
    nr, blocks = N_REDUCE, N_REDUCE // 256
    red = (f"in=int[{nr}]", f"out=int[{blocks}]")
    tq = T_CAUSAL * D_CAUSAL
    fma = (f"in=float[{N_FMA}]", f"out=float[{N_FMA}]")
    g = N_FMA // 256
    out = [
        Case(k, REDUCE, str(blocks), "256", (f"n={nr}",), red,
             f"{k}<<<{blocks}, 256>>>((const int*)b0, (int*)b1, {nr}u);")
        for k in ("reduce1", "reduce2", "reduce3")
    ]  # fmt: skip
    out += [
        Case("tree_interleaved<256>", DIV, str(blocks), "256", (), red,
             f"tree_interleaved<256><<<{blocks}, 256>>>((const int*)b0, (int*)b1);"),
        Case("tree_sequential<256>", DIV, str(blocks), "256", (), red,
             f"tree_sequential<256><<<{blocks}, 256>>>((const int*)b0, (int*)b1);"),
        Case("causal_scores", DIV, f"{T_CAUSAL // 32}x{T_CAUSAL // 32}", "32x32",
             (f"T={T_CAUSAL}", f"D={D_CAUSAL}"),
             (f"q=float[{tq}]", f"k=float[{tq}]", f"s=float[{T_CAUSAL * T_CAUSAL}]"),
             f"causal_scores<<<dim3({T_CAUSAL // 32}, {T_CAUSAL // 32}), dim3(32, 32)>>>"
             f"((const float*)b0, (const float*)b1, (float*)b2, {T_CAUSAL}, {D_CAUSAL});"),
        Case("few_threads", DIV, str(g), "256", ("k=8", "iters=200"), fma,
             f"few_threads<<<{g}, 256>>>((const float*)b0, (float*)b1, 8, 200);"),
        Case("early_exit", DIV, str(g), "256", ("iters=200",), fma,
             f"early_exit<<<{g}, 256>>>((const float*)b0, (float*)b1, 200);"),
        Case("uniform_fma", DIV, str(g), "256", ("iters=200",), fma,
             f"uniform_fma<<<{g}, 256>>>((const float*)b0, (float*)b1, 200);"),
    ]  # fmt: skip
    return out


def predict(case: Case, arch: str) -> tuple[float, str]:
    """The emulator's SIMT efficiency over every CTA, and the worst splitting branch's line."""
    from gpuadvise.devices import preset
    from gpuadvise.source.signature import parse_signature
    from gpuadvise.spec.kernel_spec import build_kernel_spec, resolve
    from gpuadvise.toolchain import CompileOptions, compile_source
    from gpuadvise.trace.emulate import emulate

    module = compile_source(case.source, CompileOptions(arch=arch))
    spec = build_kernel_spec(
        case.source, case.name, grid=case.grid, block=case.block, args=list(case.args),
        buffers=list(case.buffers), discover=False,
    )  # fmt: skip
    launch = resolve(spec, parse_signature(case.source.read_text(), case.name.split("<")[0]))
    e = emulate(module, module.kernel(case.name), launch, preset("H100"), sample_ctas="all",
                trace=False)  # fmt: skip
    assert e.simt is not None
    lost: dict[int, int] = {}
    for br in e.simt.branches:  # an unrolled loop has one branch per step on the same line
        lost[br.line] = lost.get(br.line, 0) + br.lost_slots
    if not lost:
        return e.simt.efficiency, "-"
    line = max(lost, key=lambda k: lost[k])
    where = f"line {line} ({lost[line] / max(e.simt.issue_slots, 1):.0%} of slots lost)"
    return e.simt.efficiency, where


DRIVER = r"""
#include <cstdio>
#include <cstdlib>
#include "{source}"
int main() {{
{allocs}
{launch}
  cudaError_t err = cudaDeviceSynchronize();
  if (err != cudaSuccess) {{ printf("error: %s\n", cudaGetErrorString(err)); return 1; }}
  return 0;
}}
"""

METRICS = ("smsp__thread_inst_executed.sum", "smsp__thread_inst_executed_pred_on.sum",
           "smsp__inst_executed.sum")  # fmt: skip


def _count(spec: str) -> tuple[str, int]:
    """``name=type[count]`` -> (type, count)."""
    _, rhs = spec.split("=", 1)
    t, n = rhs.rstrip("]").split("[")
    return t, int(n)


def measure(case: Case, arch: str, tmp: Path) -> dict[str, float]:
    """Nsight Compute's counters of one launch of the case (its own small program)."""
    allocs = []
    for i, b in enumerate(case.buffers):
        t, n = _count(b)
        allocs.append(
            f"  void* b{i}; cudaMalloc(&b{i}, {n} * sizeof({t}));\n"
            f"  {{ {t}* h = ({t}*)malloc({n} * sizeof({t})); for (long j = 0; j < {n}; ++j) "
            f"h[j] = ({t})(rand() % 16); cudaMemcpy(b{i}, h, {n} * sizeof({t}), "
            f"cudaMemcpyHostToDevice); free(h); }}"
        )
    src = tmp / f"{case.name.split('<')[0]}_driver.cu"
    src.write_text(
        DRIVER.format(source=case.source, allocs="\n".join(allocs), launch="  " + case.launch)
    )
    exe = tmp / src.stem
    subprocess.run(
        ["nvcc", "-O3", "-lineinfo", f"-arch={arch}", "-o", str(exe), str(src)],
        check=True, capture_output=True, text=True,
    )  # fmt: skip
    out = subprocess.run(
        ["ncu", "--clock-control", "none", "--csv", "--metrics", ",".join(METRICS), str(exe)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    vals: dict[str, float] = {}
    rows = [ln for ln in out.stdout.splitlines() if ln.startswith('"')]
    for row in csv.reader(io.StringIO("\n".join(rows))):
        if len(row) < 15 or not row[0].isdigit():
            continue
        vals[row[12]] = float(row[14].replace(",", ""))
    if set(METRICS) - set(vals):
        raise RuntimeError(f"ncu gave no counters for {case.name}: {out.stderr[-400:]}")
    return vals


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", help="the markdown table's path")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--only", default="", help="cases whose name holds this text")
    ap.add_argument("--no-gpu", action="store_true", help="predictions only")
    opts = ap.parse_args()
    gpu = not opts.no_gpu
    if gpu and (shutil.which("ncu") is None or shutil.which("nvcc") is None):
        print("error: ncu and nvcc must be on the PATH; run with --no-gpu for predictions only",
              file=sys.stderr)  # fmt: skip
        return 2
    device = "-"
    if gpu:
        q = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"],
                           capture_output=True, text=True)  # fmt: skip
        device = q.stdout.strip() or "?"
    lines = [
        f"SIMT efficiency, emulator vs Nsight Compute ({datetime.date.today()}, device {device}, "
        f"`python3 benchmarks/simt_validation.py {' '.join(sys.argv[1:])}`)",
        "",
        "| kernel | launch | emulator (PTX) | ncu thread/inst | ncu pred-on/inst | "
        "worst branch (emulator) |",
        "|---|---|---|---|---|---|",
    ]
    with tempfile.TemporaryDirectory(prefix="gpuadvise-simt-") as tmp:
        for case in _cases():
            if opts.only and opts.only not in case.name:
                continue
            eff, where = predict(case, opts.arch)
            a = b = "-"
            if gpu:
                try:
                    v = measure(case, opts.arch, Path(tmp))
                    slots = v["smsp__inst_executed.sum"] * 32
                    a = f"{v['smsp__thread_inst_executed.sum'] / slots:.3f}"
                    b = f"{v['smsp__thread_inst_executed_pred_on.sum'] / slots:.3f}"
                except (subprocess.SubprocessError, RuntimeError, OSError) as exc:
                    a = f"failed: {str(exc)[:80]}"
            row = (f"| {case.name} | {case.grid} x {case.block} | {eff:.3f} | {a} | {b} | "
                   f"{where} |")  # fmt: skip
            lines.append(row)
            print(row, flush=True)
    Path(opts.out).write_text("\n".join(lines) + "\n")
    print(f"wrote {opts.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
