"""GPU: what launch overhead costs, and what a CUDA graph buys back (GA501).

The launches case (``kernels/launches``): ``step`` advances 16896 particles by one time step.
Timed in the isolated worker, all verified and interleaved in one job:

- ``S<N>``: N stream launches of ``step`` per sample, ``G<N>``: one replay of a CUDA graph
  captured from the same N launches (``runner.job.as_graph``), for N = 1, 10, 100, 1000;
- ``F``: ``step_fused``, the 1000 steps in one launch (the fused fix), checked bit-identical
  with ``S1000``;
- a second job with 4M particles (67 MB per launch, ~22 us) at N = 100: where graphs stop paying.

Prints the medians, the graph's speedup with its 95% interval, the launch overhead per launch it
removes, GA501's estimate for the case beside the measured speedup, and seed 004's numbers
(192 ms -> 139 ms with a launch graph, RTX 2060). Writes JSON to ``--json`` or
``$OUT/launch_overhead.json``. About a minute on an H100::

    PYTHONPATH=$PWD python benchmarks/launch_overhead.py
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "kernels" / "launches" / "launches.cu"
REPEATS = (1, 10, 100, 1000)
SEED_004 = {"device": "RTX 2060", "stream_ms": 192.0, "graph_ms": 139.0, "iterations": 5000}


def prepared(kernel: str, label: str, args: tuple[str, ...] = ()) -> Any:
    from gpuadvise.analyze.options import KernelOptions
    from gpuadvise.analyze.prepare import live_options, prepare

    return prepare(live_options(KernelOptions(source=str(SOURCE), kernel=kernel, args=args)), label)


def with_launch(p: Any, label: str, repeat: int, graph: bool) -> Any:
    from gpuadvise.runner import job as J

    launch = dataclasses.replace(p.launch, label=label, repeat=repeat)
    return dataclasses.replace(p, launch=J.as_graph(launch, label) if graph else launch)


def run(items: list[Any], max_time_s: float) -> tuple[Any, dict[str, Any]]:
    from gpuadvise.analyze.prepare import time_prepared
    from gpuadvise.runner import job as J

    timing = J.TimingConfig(min_samples=15, min_time_s=1.0, max_time_s=max_time_s)
    wr = time_prepared(items, timing, hot=True, timeout_s=120)
    if not wr.result.ok:
        raise SystemExit(f"the GPU run failed: {wr.result.error}\n{wr.log}")
    return wr.result, {o.label: o for o in wr.result.outcomes}


def same(a: Any, b: Any, names: tuple[str, ...] = ("pos", "vel")) -> bool:
    import numpy as np

    return all(np.array_equal(a.outputs[n], b.outputs[n]) for n in names)


def row(name: str, s: Any, g: Any, n: int) -> dict[str, Any]:
    from gpuadvise.runner.stats import speedup_ci

    ci = speedup_ci(s.samples_ms, g.samples_ms)
    sm, gm = statistics.median(s.samples_ms), statistics.median(g.samples_ms)
    return {
        "case": name,
        "launches": n,
        "stream_ms": sm,
        "graph_ms": gm,
        "speedup": ci.speedup,
        "ci_low": ci.low,
        "ci_high": ci.high,
        "saved_us_per_launch": (sm - gm) * 1e3 / n,
        "stream_us_per_launch": sm * 1e3 / n,
        "outputs_equal": same(s, g),
        "samples": min(len(s.samples_ms), len(g.samples_ms)),
    }


def ga501_estimate() -> dict[str, Any] | None:
    """GA501's finding on the case, analysed for the live GPU."""
    from gpuadvise.analyze.evaluate import run_rules
    from gpuadvise.analyze.options import KernelOptions, build
    from gpuadvise.analyze.pipeline import analyze_kernel
    from gpuadvise.analyze.prepare import live_options
    from gpuadvise.rules.config import Config

    spec, choice, options = build(live_options(KernelOptions(source=str(SOURCE), kernel="step")))
    a = analyze_kernel(spec, choice.device, options, trace=False)
    found = run_rules(a, Config(select=("GA501",)), lazy_models=False)
    if not found or found[0].estimated_speedup is None:
        return None
    est = found[0].estimated_speedup
    return {"device_model": choice.device.name, "speedup": est.speedup, "method": est.method}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--json", type=Path, help="write the results here")
    ap.add_argument("--max-time", type=float, default=15.0, help="timing budget per job, s")
    opts = ap.parse_args()
    from gpuadvise.runner.client import require_gpu

    require_gpu()
    t0 = time.perf_counter()
    base = prepared("step", "S")
    items = []
    for n in REPEATS:
        items += [with_launch(base, f"S{n}", n, False), with_launch(base, f"G{n}", n, True)]
    items.append(prepared("step_fused", "F"))
    result, out = run(items, opts.max_time)
    rows = [row("16896 particles", out[f"S{n}"], out[f"G{n}"], n) for n in REPEATS]
    fused_ms = statistics.median(out["F"].samples_ms)
    fused_equal = same(out["S1000"], out["F"])

    big = prepared("step", "L", ("n=4194304",))
    _, out2 = run([with_launch(big, "LS", 100, False), with_launch(big, "LG", 100, True)], 10.0)
    rows.append(row("4194304 particles", out2["LS"], out2["LG"], 100))
    est = ga501_estimate()
    doc = {
        "device": result.device,
        "clocks": result.clocks,
        "rows": rows,
        "fused_1000_ms": fused_ms,
        "fused_equals_stream": fused_equal,
        "ga501_estimate": est,
        "seed_004": {**SEED_004, "speedup": SEED_004["stream_ms"] / SEED_004["graph_ms"]},
        "wall_s": time.perf_counter() - t0,
    }

    print(f"device: {result.device.get('name')} (driver {result.device.get('driver')})")
    print(
        f"{'case':18} {'N':>5} {'stream ms':>10} {'graph ms':>9} {'speedup':>8} "
        f"{'95% CI':>15} {'us/launch':>9} {'saved us':>9} {'same':>5}"
    )
    for r in rows:
        print(
            f"{r['case']:18} {r['launches']:>5} {r['stream_ms']:>10.4f} {r['graph_ms']:>9.4f} "
            f"{r['speedup']:>7.2f}x {r['ci_low']:>7.2f}..{r['ci_high']:<6.2f} "
            f"{r['stream_us_per_launch']:>9.2f} {r['saved_us_per_launch']:>9.2f} "
            f"{str(r['outputs_equal']):>5}"
        )
    s1000 = rows[REPEATS.index(1000)]
    print(
        f"fused (1000 steps in one launch): {fused_ms:.4f} ms, "
        f"{s1000['stream_ms'] / fused_ms:.1f}x the stream launches, "
        f"{s1000['graph_ms'] / fused_ms:.1f}x the graph; outputs bit-identical: {fused_equal}"
    )
    if est is not None:
        print(
            f"GA501 estimate for N=1000 ({est['device_model']} model): {est['speedup']:.2f}x; "
            f"measured {s1000['speedup']:.2f}x"
        )
    seed = doc["seed_004"]
    print(
        f"seed 004 ({seed['device']}, {seed['iterations']} iterations of the whole simulation): "
        f"{seed['stream_ms']:.0f} ms -> {seed['graph_ms']:.0f} ms with a launch graph = "
        f"{seed['speedup']:.2f}x"
    )
    print(f"wall time {doc['wall_s']:.0f} s")
    target = opts.json
    if target is None and os.environ.get("OUT"):
        target = Path(os.environ["OUT"]) / "launch_overhead.json"
    if target is not None:
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(doc, indent=1, default=str) + "\n")
        print(f"written {target}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
