"""The execution model's terms for the kernels of sweep.cu (copy.cu) against their measured
times (results.txt): how well each way of combining the latency-side and bandwidth-side terms
predicts them. Run from the repository root: python benchmarks/loaded_latency/calibrate.py"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent


def model_terms(w: int, n: int, ctas: int, smem: int) -> dict[str, float]:
    from gpuadvise.rules.estimates import kernel_launch_times

    elems = (1 << 30) // w
    spec = HERE / "_spec.toml"
    t = {2: "unsigned short", 4: "unsigned", 8: "uint2", 16: "uint4"}[w]
    spec.write_text(
        f'kernel = "copy_{w}_{n}"\ngrid = {ctas}\nblock = 256\ndynamic_smem = {smem}\n'
        f'[buffers]\nin = {{ type = "{t}", count = {elems} }}\n'
        f'out = {{ type = "{t}", count = {elems} }}\n'
    )
    from gpuadvise.analyze.evaluate import rule_context
    from gpuadvise.analyze.options import KernelOptions, build
    from gpuadvise.analyze.pipeline import analyze_kernel

    spec_, choice, copts = build(KernelOptions(source=str(HERE / "copy.cu"), spec=str(spec),
                                               gpu="H200"))  # fmt: skip
    a = analyze_kernel(spec_, choice.device, copts, trace=True)
    ctx = rule_context(a)
    times = kernel_launch_times(ctx.device, ctx.trace_view)
    assert times is not None
    out = {k: times.term(k) * 1e3 for k in ("l1", "l2", "dram", "issue", "latency", "pipe",
                                           "dependency", "cta")}  # fmt: skip
    out["floor"] = times.floor_s * 1e3
    out["model_ms"] = times.time_s * 1e3
    out["bound_by"] = times.bound_by  # type: ignore[assignment]
    return out


def main() -> None:
    rows = [line.split() for line in (HERE / "results.txt").read_text().splitlines()
            if line[:1].isdigit()]  # fmt: skip
    smem_per_sm = 233472
    out = []
    for r in rows:
        w, n, res, ctas = (int(x) for x in r[:4])
        ms = float(r[6])
        smem = 0 if res >= 8 else min(smem_per_sm // res - 1024 - 16, 232448)
        terms = model_terms(w, n, ctas, smem)
        out.append({"w": w, "n": n, "resident": res, "ctas": ctas, "measured_ms": ms, **terms})
        print(json.dumps(out[-1]), flush=True)
    (HERE / "calibration.json").write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
