"""GPU tracer acceptance, on a GPU machine: the instrumented kernel's trace against the emulator's.

1. Every case of benchmarks/trace_validation/run.py (CASES) and every launch of kernels/ (each
   ``*.toml`` there, and every other kernel of a kernels/ source with the case.toml beside it):
   the CPU emulator and the GPU tracer trace the same CTAs (the first wave, or ``--sample-ctas``).
   The table compares the instruction lists, the records as multisets of (inst, cta, warp, mask,
   32 addresses), the bank and coalescing model totals computed from each trace (after the SASS
   reconciliation, as ``analyze`` does), and says whether the instrumented run's outputs match the
   uninstrumented run's, the instrumentation's slowdown and the records lost.
2. Whole launches traced on the GPU, every CTA: reduce3 on 2^26 ints (kernels/reduction) and an
   8K gather (7680x4320, 5x5 taps at stride 2: benchmarks/gputrace_kernels.cu): slowdown, trace
   size, wall time, records lost, outputs; their first ``--check-ctas`` CTAs are compared with
   the emulator's trace of those CTAs.

Usage (GPU machine): python benchmarks/gputrace_validation.py [--json OUT] [--only TEXT]
    [--sample-ctas N|all] [--check-ctas 64] [--skip-large] [--large-only] [--large-models]
    [--emulate-gpu]   (a dry run on a machine without a GPU: the CPU emulator runs the PTX)
Exit status 0 when every compared case is identical with matching outputs, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE / "trace_validation"))

GATHER = str(HERE / "gputrace_kernels.cu")
REDUCE = str(ROOT / "kernels/reduction/reduce.cu")

LARGE: dict[str, dict[str, Any]] = {
    "reduce3 2^26 (all CTAs)": dict(
        source=REDUCE,
        kernel="reduce3",
        grid="ceil_div(n,256)",
        block="256",
        args=("n=67108864",),
        buffers=("in=int[n]", "out=int[ceil_div(n,256)]:zeros"),
    ),
    "gather 5x5/2 8K (all CTAs)": dict(
        source=GATHER,
        kernel="gather5x5",
        grid="ceil_div(w,16),ceil_div(h,16)",
        block="16x16",
        args=("w=7680", "h=4320"),
        buffers=("in=float[w*h]", "out=float[w*h]"),
    ),
}


def suite_cases() -> dict[str, dict[str, Any]]:
    """run.py's CASES, then kernels/: every .toml, and every other kernel of each source."""
    from run import CASES  # benchmarks/trace_validation/run.py

    from gpuadvise.spec.kernel_spec import load_spec
    from gpuadvise.toolchain import CompileOptions, compile_source

    cases: dict[str, dict[str, Any]] = dict(CASES)
    for folder in sorted((ROOT / "kernels").iterdir()):
        if not folder.is_dir():
            continue
        named: set[str] = set()
        for toml in sorted(folder.glob("*.toml")):
            spec = load_spec(toml)
            kernel = str(spec.get("kernel", ""))
            named.add(kernel.split("<")[0])
            cases[f"kernels/{folder.name}/{toml.name}"] = dict(source=None, spec=str(toml))
        if not (folder / "case.toml").is_file():
            continue
        for cu in sorted(folder.glob("*.cu")):
            try:
                module = compile_source(cu, CompileOptions())
            except Exception:
                continue
            for k in module.kernels:
                base = k.name.split("<")[0].split("::")[-1]
                if base in named:
                    continue
                cases[f"kernels/{folder.name}:{base}"] = dict(
                    source=str(cu), kernel=k.name, spec=str(folder / "case.toml")
                )
    return cases


def prepare(case: dict[str, Any]) -> tuple[Any, Any, Any, Any, Any, Any]:
    from gpuadvise.analyze.options import KernelOptions, build
    from gpuadvise.analyze.pipeline import resolve_launch
    from gpuadvise.analyze.prepare import live_options
    from gpuadvise.toolchain import compile_source, find_toolchain, select_compiled_kernel

    spec, choice, options = build(live_options(KernelOptions(**case)))
    tc = find_toolchain()
    module = compile_source(Path(spec.source), options, tc, kernels=[spec.kernel])
    kernel = select_compiled_kernel(module, spec.kernel)
    launch = resolve_launch(spec, kernel, options, tc)
    return spec, choice.device, module, kernel, launch, tc


def model_totals(trace: Any, module: Any, kernel: Any, tc: Any) -> dict[str, float]:
    from gpuadvise.model.banks import analyze_banks
    from gpuadvise.model.coalescing import analyze_coalescing
    from gpuadvise.model.reconcile import reconcile
    from gpuadvise.toolchain import sass

    instrs = sass.disassemble(module.cubin_path, kernel.mangled, tc)
    rec = reconcile(trace, sass.memory_summary(instrs))
    b = analyze_banks(trace, rec.records).traced
    c = analyze_coalescing(trace, rec.records).traced
    return {
        "smem_ld": b.load.wavefronts,
        "smem_st": b.store.wavefronts,
        "gld_req": c.load.requests,
        "gld_sec": c.load.sectors,
        "gst_req": c.store.requests,
        "gst_sec": c.store.sectors,
    }


def first_ctas(trace: Any, count: int) -> Any:
    keep = trace.records["cta"] < count
    return replace(trace, records=trace.records[keep], ctas=tuple(range(count)))


EMULATE_DEVICE = False  # --emulate-gpu: the "GPU" runs are the CPU emulator's (a dry run)


class Skipped(Exception):
    """The case cannot be set up (its launch does not fit the kernel) or the emulator cannot run
    it: nothing to compare, not a failure of the GPU tracer."""


def compare_case(name: str, case: dict[str, Any], sample: int | str | None) -> dict[str, Any]:
    from gpuadvise.errors import GpuAdviseError
    from gpuadvise.trace.emulate import emulate
    from gpuadvise.trace.gpu import compare_traces, trace_on_gpu

    try:
        spec, device, module, kernel, launch, tc = prepare(case)
    except GpuAdviseError as exc:
        raise Skipped(f"cannot set the case up: {exc.one_line()}") from None
    t0 = time.perf_counter()
    try:
        emu = emulate(module, kernel, launch, device, sample_ctas=sample)
    except GpuAdviseError as exc:
        raise Skipped(f"the emulator cannot run it: {exc.one_line()}") from None
    t_emu = time.perf_counter() - t0
    gpu = trace_on_gpu(
        module, kernel, launch, device, sample_ctas=sample, emulate_device=EMULATE_DEVICE
    )
    diff = compare_traces(emu.trace, gpu.trace)
    m_emu = model_totals(emu.trace, module, kernel, tc)
    m_gpu = model_totals(gpu.trace, module, kernel, tc)
    return {
        "case": name,
        "kernel": kernel.name,
        "ctas": len(emu.trace.ctas),
        "total_ctas": emu.trace.total_ctas,
        "records_emu": diff.records_a,
        "records_gpu": diff.records_b,
        "matched": diff.matched,
        "same_instructions": diff.same_instructions,
        "identical": diff.identical,
        "first_difference": diff.first_difference,
        "models_emu": m_emu,
        "models_gpu": m_gpu,
        "models_equal": m_emu == m_gpu,
        "outputs_match": gpu.outputs_match,
        "slowdown": gpu.slowdown,
        "time_ms": gpu.time_ms,
        "instrumented_time_ms": gpu.instrumented_time_ms,
        "records_lost": gpu.records_lost,
        "trace_bytes": gpu.trace_bytes,
        "emulator_s": t_emu,
        "gpu_trace_s": gpu.wall_s,
        "notes": list(gpu.notes),
    }


def large_case(
    name: str, case: dict[str, Any], check_ctas: int, with_models: bool
) -> dict[str, Any]:
    from gpuadvise.trace.emulate import emulate
    from gpuadvise.trace.gpu import compare_traces, trace_on_gpu

    spec, device, module, kernel, launch, tc = prepare(case)
    gpu = trace_on_gpu(
        module,
        kernel,
        launch,
        device,
        sample_ctas="all",
        timeout_s=1800,
        emulate_device=EMULATE_DEVICE,
    )
    row: dict[str, Any] = {
        "case": name,
        "kernel": kernel.name,
        "ctas": len(gpu.trace.ctas),
        "records_gpu": len(gpu.trace.records),
        "trace_bytes": gpu.trace_bytes,
        "records_lost": gpu.records_lost,
        "outputs_match": gpu.outputs_match,
        "slowdown": gpu.slowdown,
        "time_ms": gpu.time_ms,
        "instrumented_time_ms": gpu.instrumented_time_ms,
        "gpu_trace_s": gpu.wall_s,
        "attempts": gpu.attempts,
        "notes": list(gpu.notes),
    }
    if check_ctas > 0:
        n = min(check_ctas, gpu.trace.total_ctas)
        emu = emulate(module, kernel, launch, device, sample_ctas=n)
        diff = compare_traces(emu.trace, first_ctas(gpu.trace, n))
        row.update(
            check_ctas=n,
            records_emu=diff.records_a,
            matched=diff.matched,
            same_instructions=diff.same_instructions,
            identical=diff.identical,
            first_difference=diff.first_difference,
        )
    if with_models:
        t0 = time.perf_counter()
        row["models_gpu"] = model_totals(gpu.trace, module, kernel, tc)
        row["models_s"] = time.perf_counter() - t0
    return row


def _fmt_models(a: dict[str, float], b: dict[str, float]) -> str:
    cells = []
    for key in ("smem_ld", "smem_st", "gld_req", "gld_sec", "gst_req", "gst_sec"):
        x, y = a.get(key, 0), b.get(key, 0)
        if x or y:
            mark = "" if x == y else " !"
            cells.append(f"{key} {x:,.0f}/{y:,.0f}{mark}")
    return "; ".join(cells)


def main() -> int:
    from gpuadvise.analyze.options import parse_sample_ctas

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--json", type=Path)
    ap.add_argument("--only", help="run the cases whose name contains this text")
    ap.add_argument("--sample-ctas", default=None, help="CTAs to compare: N or all (first wave)")
    ap.add_argument("--check-ctas", type=int, default=64)
    ap.add_argument("--skip-large", action="store_true")
    ap.add_argument("--large-only", action="store_true")
    ap.add_argument("--large-models", action="store_true", help="run the models on large traces")
    ap.add_argument(
        "--emulate-gpu",
        action="store_true",
        help="dry run without a GPU: run the instrumented PTX in the CPU emulator (slow)",
    )
    a = ap.parse_args()
    global EMULATE_DEVICE
    EMULATE_DEVICE = a.emulate_gpu
    sample = parse_sample_ctas(a.sample_ctas)
    rows: list[dict[str, Any]] = []
    ok = True
    if not a.large_only:
        print(
            f"{'case':34s} {'CTAs':>6s} {'records emu/gpu':>17s} {'match':>6s} {'out':>4s} "
            f"{'slow':>6s} {'lost':>5s}  models emu/gpu"
        )
        for name, case in suite_cases().items():
            if a.only and a.only not in name:
                continue
            try:
                row = compare_case(name, case, sample)
            except Skipped as exc:
                rows.append({"case": name, "skipped": str(exc)})
                print(f"{name:34s} skipped: {exc}", flush=True)
                continue
            except Exception as exc:  # report and go on
                row = {"case": name, "error": f"{type(exc).__name__}: {exc}"}
                if not hasattr(exc, "one_line"):
                    row["traceback"] = traceback.format_exc()
                print(f"{name:34s} ERROR {row['error']}", flush=True)
                rows.append(row)
                ok = False
                continue
            rows.append(row)
            good = row["identical"] and row["outputs_match"] and row["models_equal"]
            ok &= bool(good)
            match = (
                "yes" if row["identical"] else f"{row['matched'] / max(row['records_emu'], 1):.0%}"
            )
            print(
                f"{name:34s} {row['ctas']:6d} {row['records_emu']:>8,d}/{row['records_gpu']:<8,d} "
                f"{match:>6s} {'ok' if row['outputs_match'] else 'DIFF':>4s} "
                f"{row['slowdown']:6.1f} {row['records_lost']:5d}  "
                + _fmt_models(row["models_emu"], row["models_gpu"]),
                flush=True,
            )
            if not row["identical"] and row["first_difference"]:
                print(f"{'':34s} first difference: {row['first_difference']}", flush=True)
            if not good:
                for note in row["notes"]:
                    print(f"{'':34s} note: {note}", flush=True)
    if not a.skip_large:
        print(
            f"\n{'whole launch':34s} {'CTAs':>7s} {'records':>12s} {'trace':>9s} {'lost':>5s} "
            f"{'out':>4s} {'base ms':>8s} {'traced ms':>9s} {'slow':>6s} {'wall s':>7s}  first CTAs"
        )
        for name, case in LARGE.items():
            if a.only and a.only not in name:
                continue
            try:
                row = large_case(name, case, a.check_ctas, a.large_models)
            except Exception as exc:
                row = {"case": name, "error": f"{type(exc).__name__}: {exc}"}
                if not hasattr(exc, "one_line"):
                    row["traceback"] = traceback.format_exc()
                print(f"{name:34s} ERROR {row['error']}", flush=True)
                rows.append(row)
                ok = False
                continue
            rows.append(row)
            check = ""
            if "identical" in row:
                check = (
                    f"{row['check_ctas']} CTAs identical"
                    if row["identical"]
                    else f"{row['check_ctas']} CTAs DIFFER: {row['first_difference']}"
                )
                ok &= bool(row["identical"])
            ok &= bool(row["outputs_match"]) and row["records_lost"] == 0
            print(
                f"{name:34s} {row['ctas']:7d} {row['records_gpu']:12,d} "
                f"{row['trace_bytes'] / 2**30:8.2f}G {row['records_lost']:5d} "
                f"{'ok' if row['outputs_match'] else 'DIFF':>4s} {row['time_ms']:8.3f} "
                f"{row['instrumented_time_ms']:9.3f} {row['slowdown']:6.1f} "
                f"{row['gpu_trace_s']:7.1f}  {check}",
                flush=True,
            )
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1, default=float))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
