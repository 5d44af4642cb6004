"""GA303 (scalar global accesses) and GA402 (unpacked fp16 math) on a GPU (issue 9).

1. ``gpuadvise analyze --measure --format json --select GA303,GA402`` on the luminance kernels
   with GA303 findings (lum_prefetch2, lum_prefetch4, lum_prefetch4_quad) and the fp16 moments
   kernels with GA402 findings (moments_split, moments_uint2, moments_half3): every finding's
   estimate beside its measured, output-verified speedup (GA303's diffs are built and timed,
   the automatic one and the display-only ones alike; GA402's fixes are display-only advice with
   no diff, so they carry an estimate only).
2. The hand-written kernels timed together with ``gpuadvise bench``'s machinery
   (``bench_cmd.prepare``/``time_prepared``: cold L2 before every sample, the launches
   interleaved in a random order each round, outputs checked equal): lum_prefetch2/4/4_quad
   against lum_prefetch4_vec (the real 16-byte kernel), moments_split/uint2/half3 against
   moments_half4 (the real packed kernel). Speedups are median(bad) / median(good) with a 95%
   bootstrap interval.

Prints both tables; with ``--json FILE`` (or ``$OUT`` set: ``$OUT/codegen_rules.json``) writes
them. Usage on the GPU machine, from the repository root::

    python3 benchmarks/codegen_rules.py [--json FILE] [--max-time 4]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
LUM = ROOT / "kernels" / "luminance"
FP16 = ROOT / "kernels" / "fp16_neighbourhood"

ANALYZE = [
    (LUM / "luminance.cu", "lum_prefetch2"),
    (LUM / "luminance.cu", "lum_prefetch4"),
    (LUM / "luminance.cu", "lum_prefetch4_quad"),
    (FP16 / "moments.cu", "moments_split"),
    (FP16 / "moments.cu", "moments_uint2"),
    (FP16 / "moments.cu", "moments_half3"),
]
# (source, kernels: the good one first, outputs compared by name)
GROUPS = [
    (
        LUM / "luminance.cu",
        ["lum_prefetch4_vec", "lum_prefetch2", "lum_prefetch4", "lum_prefetch4_quad"],
        ["out"],
    ),
    (
        FP16 / "moments.cu",
        ["moments_half4", "moments_split", "moments_uint2", "moments_half3"],
        ["mean", "variance"],
    ),
]


def analyze(cu: Path, kernel: str, sample_ctas: str, measure: bool = True) -> dict[str, Any]:
    cmd = [
        sys.executable, "-m", "gpuadvise", "analyze", str(cu), "--kernel", kernel,
        "--select", "GA303,GA402", "--measure" if measure else "--no-measure",
        "--format", "json", "--tracer", "emu", "--sample-ctas", sample_ctas,
    ]  # fmt: skip
    if not measure:
        cmd += ["--gpu", "H100"]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ}, check=False)
    wall = time.perf_counter() - t0
    if p.returncode not in (0, 1):
        return {"error": (p.stderr.strip().splitlines() or ["failed"])[-1], "wall_s": wall}
    doc = json.loads(p.stdout)
    doc["wall_s"] = wall
    return doc


def _est(f: dict[str, Any]) -> str:
    e = f.get("estimated_speedup")
    if not e or e.get("speedup") is None:
        return "-"
    return f"{'<= ' if e['kind'] == 'upper-bound' else '~'}{e['speedup']:.2f}x"


def _meas(f: dict[str, Any]) -> str:
    m = f.get("measured_speedup")
    if m:
        return f"{m['speedup']:.3f}x ({m['ci_low']:.3f}..{m['ci_high']:.3f})"
    trials = f.get("trials") or []
    if trials:
        return "not measured: " + "; ".join(str(t.get("note")) for t in trials)
    v = f.get("variant") or {}
    return "not measured: " + ("no diff (advice only)" if not v.get("diff") else "no GPU")


def part1(sample_ctas: str, measure: bool = True) -> list[dict[str, Any]]:
    rows = []
    print(
        "1. Findings: estimate vs measured (analyze --measure; variants verified against the kernel)"
    )
    print(
        f"{'kernel':20} {'rule':6} {'line':>4}  {'safety':24} {'estimate':>10}  measured (95% CI)"
    )
    for cu, kernel in ANALYZE:
        doc = analyze(cu, kernel, sample_ctas, measure)
        if "error" in doc:
            print(f"{kernel:20} error: {doc['error']}")
            rows.append({"kernel": kernel, "error": doc["error"]})
            continue
        device = (doc.get("device") or {}).get("full_name")
        for f in doc.get("findings", []):
            if f["rule"] not in ("GA303", "GA402"):
                continue
            v = f.get("variant") or {}
            row = {
                "kernel": kernel,
                "rule": f["rule"],
                "line": f["line"],
                "safety": v.get("safety"),
                "estimate": f.get("estimated_speedup"),
                "measured": f.get("measured_speedup"),
                "verified": f.get("verified"),
                "trials": f.get("trials"),
                "evidence": {e["metric"]: e["value"] for e in f.get("evidence", [])},
                "device": device,
                "wall_s": round(doc["wall_s"], 1),
            }
            rows.append(row)
            print(
                f"{kernel:20} {f['rule']:6} {f['line']:>4}  {str(v.get('safety')):24} "
                f"{_est(f):>10}  {_meas(f)}"
            )
        print(f"{'':20} ({doc['wall_s']:.1f} s, {device})")
    return rows


def part2(max_time_s: float) -> list[dict[str, Any]]:
    import statistics

    from gpuadvise.analyze.options import KernelOptions
    from gpuadvise.analyze.prepare import prepare, time_prepared
    from gpuadvise.runner.job import TimingConfig
    from gpuadvise.runner.stats import speedup_ci
    from gpuadvise.runner.verify import compare

    rows = []
    print()
    print("2. Hand-written kernels: the good one against each bad one (cold L2, interleaved)")
    print(f"{'kernel':20} {'median us':>10}  {'good is faster by (95% CI)':28} outputs")
    for cu, kernels, outputs in GROUPS:
        prepared = []
        for i, k in enumerate(kernels):
            spec = cu.parent / f"{k}.toml"
            opts = KernelOptions(
                source=str(cu), kernel=k, spec=str(spec) if spec.exists() else None
            )
            prepared.append(prepare(opts, f"K{i}"))
        timing = TimingConfig(min_samples=20, min_time_s=1.0, max_time_s=max_time_s)
        res = time_prepared(prepared, timing, hot=False, timeout_s=60.0).result
        if not res.ok:
            print(f"{kernels[0]}...: failed: {res.cuda_error or res.error}")
            rows.append({"kernels": kernels, "error": str(res.cuda_error or res.error)})
            continue
        good = res.outcomes[0]
        for k, o in zip(kernels, res.outcomes, strict=True):
            comps = [compare(n, good.outputs[n], o.outputs[n], 0.0, 0.0) for n in outputs]
            same = all(c.ok for c in comps)
            med = statistics.median(o.samples_ms) * 1e3
            row: dict[str, Any] = {
                "kernel": k,
                "good": kernels[0],
                "median_us": med,
                "samples": len(o.samples_ms),
                "outputs_identical": same,
                "device": res.device.get("name"),
            }
            if o is good:
                print(f"{k:20} {med:10.2f}  {'(the good kernel)':28} -")
            else:
                ci = speedup_ci(o.samples_ms, good.samples_ms)
                row.update({"speedup": ci.speedup, "ci_low": ci.low, "ci_high": ci.high})
                print(
                    f"{k:20} {med:10.2f}  {ci.speedup:.3f}x ({ci.low:.3f}..{ci.high:.3f})"
                    f"{'':7} {'bit-identical' if same else 'DIFFER: ' + comps[0].message}"
                )
            rows.append(row)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", type=Path, help="write the results here")
    ap.add_argument("--sample-ctas", default="64", help="CTAs the emulator traces (default 64)")
    ap.add_argument("--max-time", type=float, default=4.0, help="seconds per timing group")
    ap.add_argument(
        "--dry-run", action="store_true", help="no GPU: part 1 with estimates only (H100 model)"
    )
    a = ap.parse_args()
    t0 = time.perf_counter()
    out: dict[str, Any] = {"findings": part1(a.sample_ctas, not a.dry_run)}
    out["kernels"] = [] if a.dry_run else part2(a.max_time)
    out["wall_s"] = time.perf_counter() - t0
    print(f"\ntotal {out['wall_s']:.0f} s")
    dest = a.json
    if dest is None and os.environ.get("OUT"):
        dest = Path(os.environ["OUT"]) / "codegen_rules.json"
    if dest is not None:
        dest.write_text(json.dumps(out, indent=1, default=str) + "\n")
        print(f"wrote {dest}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
