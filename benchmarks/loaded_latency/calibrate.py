"""The execution model's terms for the kernels of sweep.cu (copy.cu) against their measured
times (results.txt). Run from the repository root:

    python benchmarks/loaded_latency/calibrate.py          # writes calibration.json
    python benchmarks/loaded_latency/calibrate.py --fit    # the current model's error stats, and
                                                           # the best CTA turnaround and p-norm

Each launch is analysed once (its spec in a temporary folder); ``--fit`` then re-times the same
traffic with other values of ``cta_turnaround_ns`` (the device's PipeRates) and of the p-norm of
the latency and throughput sides (:data:`gpuadvise.model.execution.SIDES_NORM`), and prints the
median, 90th percentile and range of the relative error of each candidate, the current model's
first."""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
TERMS = ("l1", "l2", "dram", "issue", "latency", "pipe", "dependency", "cta")
SMEM_PER_SM = 233472


def launch_traffic(w: int, n: int, ctas: int, smem: int, tmp: Path) -> tuple[Any, Any]:
    """The H200 preset and the launch model's traffic of ``copy_<w>_<n>`` on ``ctas`` CTAs."""
    from gpuadvise.analyze.evaluate import rule_context
    from gpuadvise.analyze.options import KernelOptions, build
    from gpuadvise.analyze.pipeline import analyze_kernel
    from gpuadvise.rules.estimates import view_traffic

    elems = (1 << 30) // w
    spec = tmp / f"copy_{w}_{n}_{ctas}_{smem}.toml"
    t = {2: "unsigned short", 4: "unsigned", 8: "uint2", 16: "uint4"}[w]
    spec.write_text(
        f'kernel = "copy_{w}_{n}"\ngrid = {ctas}\nblock = 256\ndynamic_smem = {smem}\n'
        f'[buffers]\nin = {{ type = "{t}", count = {elems} }}\n'
        f'out = {{ type = "{t}", count = {elems} }}\n'
    )
    spec_, choice, copts = build(KernelOptions(source=str(HERE / "copy.cu"), spec=str(spec),
                                               gpu="H200"))  # fmt: skip
    a = analyze_kernel(spec_, choice.device, copts, trace=True)
    ctx = rule_context(a)
    return ctx.device, view_traffic(ctx.device, ctx.trace_view)


def times_of(device: Any, traffic: Any, turnaround_ns: float | None = None,
             norm: float | None = None) -> Any:  # fmt: skip
    """The launch's times at sustained rates, the turnaround and norm replaced when given."""
    from gpuadvise.devices import memory_rates, pipe_rates
    from gpuadvise.model.roofline import launch_times

    pipes = pipe_rates(device)
    if turnaround_ns is not None:
        pipes = replace(pipes, cta_turnaround_ns=turnaround_ns)
    times = launch_times(traffic, device, memory_rates(device), pipes=pipes)
    assert times is not None
    return times if norm is None else replace(times, norm=norm)


def row_terms(times: Any) -> dict[str, Any]:
    out: dict[str, Any] = {k: times.term(k) * 1e3 for k in TERMS}
    out["floor"] = times.floor_s * 1e3
    out["model_ms"] = times.time_s * 1e3
    out["bound_by"] = times.bound_by
    return out


def error_stats(pred_ms: list[float], meas_ms: list[float]) -> dict[str, float]:
    """Median and 90th percentile of the absolute relative error, and its signed range."""
    err = [p / m - 1.0 for p, m in zip(pred_ms, meas_ms, strict=True)]
    a = sorted(abs(e) for e in err)
    return {"median": statistics.median(a), "p90": a[round(0.9 * (len(a) - 1))],
            "min": min(err), "max": max(err)}  # fmt: skip


def fmt(s: dict[str, float]) -> str:
    return (f"median {s['median']:.1%}, p90 {s['p90']:.1%}, "
            f"range {s['min']:+.1%}..{s['max']:+.1%}")  # fmt: skip


def launches() -> list[tuple[int, int, int, int, float, int]]:
    """(W, N, R, CTAs, measured ms, dynamic shared bytes) of results.txt's launches."""
    rows = [line.split() for line in (HERE / "results.txt").read_text().splitlines()
            if line[:1].isdigit()]  # fmt: skip
    out = []
    for r in rows:
        w, n, res, ctas = (int(x) for x in r[:4])
        smem = 0 if res >= 8 else min(SMEM_PER_SM // res - 1024 - 16, 232448)
        out.append((w, n, res, ctas, float(r[6]), smem))
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--fit", action="store_true",
                    help="print the error stats of the current model and of a grid of CTA "
                    "turnarounds and p-norms (calibration.json untouched)")  # fmt: skip
    a = ap.parse_args()
    from gpuadvise.devices import pipe_rates
    from gpuadvise.model.execution import SIDES_NORM

    got, rows = [], []
    with tempfile.TemporaryDirectory(prefix="loaded_latency_") as tmp:
        for w, n, res, ctas, ms, smem in launches():
            device, traffic = launch_traffic(w, n, ctas, smem, Path(tmp))
            got.append((device, traffic))
            rows.append({"w": w, "n": n, "resident": res, "ctas": ctas, "measured_ms": ms,
                         **row_terms(times_of(device, traffic))})  # fmt: skip
            if not a.fit:
                print(json.dumps(rows[-1]), flush=True)
    meas = [r["measured_ms"] for r in rows]
    cur = [r["model_ms"] for r in rows]
    turnaround = pipe_rates(got[0][0]).cta_turnaround_ns
    print(f"current model (p = {SIDES_NORM:g}, CTA turnaround {turnaround:g} ns): "
          f"{fmt(error_stats(cur, meas))}")  # fmt: skip
    if not a.fit:
        (HERE / "calibration.json").write_text(json.dumps(rows, indent=1) + "\n")
        return
    base = [times_of(d, t, 0.0, float("inf")).time_s * 1e3 for d, t in got]
    print(f"no turnaround, the sides' maximum: {fmt(error_stats(base, meas))}")
    grid = []
    for p in (1.5, 2.0, 2.25, 2.5, 2.75, 3.0, 3.5, 4.0):
        for ta in range(0, 501, 10):
            pred = [times_of(d, t, float(ta), p).time_s * 1e3 for d, t in got]
            grid.append((error_stats(pred, meas), p, ta))
    for key in ("median", "p90"):
        best = sorted(grid, key=lambda g: (g[0][key], g[0]["p90" if key == "median" else "median"]))
        for s, p, ta in best[:3]:
            print(f"best by {key}: p = {p:g}, turnaround {ta} ns: {fmt(s)}")


if __name__ == "__main__":
    main()
