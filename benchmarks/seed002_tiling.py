"""Seed 002's thread-group tiling on the GPU: row-major against tiled N = 4, 8, 16, 32, with the
seed's numbers beside the measured ones, then ``gpuadvise analyze --measure`` on the bundled case.

1. Timing. The gather of ``kernels/tile_gather/gather.cu`` (``gather_rowmajor``: every pixel
   averages a 9 x 9 sparse neighbourhood, clamped to the frame) on three launches:

   - 1440p, 128-pixel footprint (r = 64, step = 16; ``gather_1440p.toml``): the seed's resolution;
   - 8K, 512-pixel footprint (r = 256, step = 64): HARDWARE.md section 4's case;
   - 8K, 2048-pixel footprint (r = 1024, step = 256; ``case.toml``): GA304's finding.

   Each tiled kernel is GA304's own automatic transform (``tiling_diff``: blockIdx remapped with
   seed 002's corrected snippet) applied to a copy of the source. The five kernels of a launch are
   built with gpuadvise's bench machinery (``gpuadvise.analyze.prepare.prepare``) and timed together in
   one isolated worker (``time_prepared``: interleaved, L2 flushed before every sample, outputs of
   each kernel returned); each tiled kernel's output is checked bit for bit against row-major's,
   and its speedup is the ratio of medians with a 95% bootstrap interval.

2. ``gpuadvise analyze kernels/tile_gather/gather.cu -k gather_rowmajor --measure --format json
   --select GA304 --sample-ctas 8``: GA304's finding on the 8K case (its evidence, its estimate)
   and the measurement stage's trials of every N (verified, with intervals): the measured best N.

Seed numbers: seed 002 (GDC 2019, RTX 2080, 4 MB L2, SetStablePowerState): horizontal tiling with
N = 16 on a full-screen denoising pass of Battlefield V at 1440p: 47% faster (1.47x), L2 read hit
rate 63% -> 86%, VRAM throughput x0.54, SM throughput x1.52. HARDWARE.md section 4 (H100): N = 16
2.5% slower at 1440p; at 8K with a 512-pixel footprint N = 16 6% and N = 32 16% faster.
docs/validation.md (H100, the same address pattern, benchmarks/l2_gather): 1440p r = 64 N = 16
0.93x; 8K r = 256 N = 32 0.78x; 8K r = 1024 N = 32 1.19x.

Run on the GPU machine from the repository root (about 1.5-2.5 minutes):

    PYTHONUNBUFFERED=1 python3 benchmarks/seed002_tiling.py

Prints the tables; writes ``seed002_tiling.json`` to ``$OUT`` when it is set (else ``--out``).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

CASE = ROOT / "kernels" / "tile_gather"
GATHER = CASE / "gather.cu"
KERNEL = "gather_rowmajor"
TILES = (4, 8, 16, 32)


@dataclass(frozen=True)
class Launch:
    label: str
    w: int
    h: int
    r: int
    step: int
    # (N, speedup) quoted from the seed / HARDWARE.md section 4 / docs/validation.md
    seed: dict[int, str]
    hardware_md: dict[int, str]
    validation: dict[int, str]

    @property
    def args(self) -> tuple[str, ...]:
        return (f"w={self.w}", f"h={self.h}", f"r={self.r}", f"step={self.step}")


LAUNCHES = (
    Launch(
        "1440p, 128-px footprint (r=64, step=16)",
        2560, 1440, 64, 16,
        seed={16: "1.47x (RTX 2080; L2 hit 63%->86%)"},
        hardware_md={16: "0.975x"},
        validation={4: "0.94x", 8: "0.92x", 16: "0.92x", 32: "0.94x"},
    ),
    Launch(
        "8K, 512-px footprint (r=256, step=64)",
        7680, 4320, 256, 64,
        seed={},
        hardware_md={16: "1.06x", 32: "1.16x"},
        validation={4: "0.99x", 8: "0.99x", 16: "0.98x", 32: "0.78x"},
    ),
    Launch(
        "8K, 2048-px footprint (r=1024, step=256; case.toml)",
        7680, 4320, 1024, 256,
        seed={},
        hardware_md={},
        validation={4: "1.08x", 8: "0.88x", 16: "1.11x", 32: "1.19x"},
    ),
)  # fmt: skip


def ga304_module() -> Any:
    from gpuadvise.rules.registry import load_registry

    rule = load_registry().get("GA304")
    return sys.modules[type(rule).__module__]


def tiled_sources(folder: Path) -> dict[int, Path]:
    """GA304's automatic transform of gather_rowmajor for each N, as files in ``folder``."""
    from gpuadvise.source.patch import apply_unified_diff
    from gpuadvise.source.text import find_kernel_source

    mod = ga304_module()
    ks = find_kernel_source(GATHER, KERNEL)
    assert ks is not None
    out = {}
    for n in TILES:
        diff = mod.tiling_diff(ks, n, str(GATHER))
        d = folder / f"n{n}"
        d.mkdir()
        path = d / GATHER.name
        path.write_text(apply_unified_diff(GATHER.read_text(), diff))
        out[n] = path
    return out


def time_launch(launch: Launch, sources: dict[int, Path], max_time_s: float) -> dict[str, Any]:
    """Row-major and every N of one launch, timed together in one worker (cold L2)."""
    from gpuadvise.analyze.options import KernelOptions
    from gpuadvise.analyze.prepare import live_options, prepare, time_prepared
    from gpuadvise.runner.job import TimingConfig
    from gpuadvise.runner.stats import speedup_ci

    spec = str(CASE / "case.toml")
    base_opts = live_options(
        KernelOptions(source=str(GATHER), kernel=KERNEL, spec=spec, args=launch.args)
    )
    t0 = time.perf_counter()
    prepared = [prepare(base_opts, "row-major")]
    for n, path in sources.items():
        opts = KernelOptions(
            source=str(path), kernel=KERNEL, spec=spec, args=launch.args, include=(str(CASE),)
        )
        prepared.append(prepare(live_options(opts), f"N={n}"))
    t_build = time.perf_counter() - t0
    timing = TimingConfig(min_samples=15, min_time_s=0.3, max_time_s=max_time_s)
    run = time_prepared(prepared, timing, hot=False, timeout_s=60.0)
    res = run.result
    if not res.ok:
        raise SystemExit(f"{launch.label}: the GPU run failed: {res.cuda_error or res.error}")
    base = res.outcomes[0]
    rows = []
    for p, o in zip(prepared, res.outcomes, strict=True):
        same = all(
            np.array_equal(base.outputs[k].view(np.uint8), o.outputs[k].view(np.uint8))
            for k in base.outputs
        )
        ci = speedup_ci(base.samples_ms, o.samples_ms)
        rows.append(
            {
                "order": p.launch.label,
                "median_ms": statistics.median(o.samples_ms),
                "samples": len(o.samples_ms),
                "speedup": ci.speedup,
                "ci_low": ci.low,
                "ci_high": ci.high,
                "outputs_equal": same,
            }
        )
    return {
        "launch": launch.label,
        "args": launch.args,
        "grid": list(prepared[0].launch.grid),
        "device": res.device.get("name"),
        "build_s": t_build,
        "rows": rows,
    }


def print_timing(t: dict[str, Any], launch: Launch) -> None:
    print(f"\n== {t['launch']}  grid {t['grid'][0]}x{t['grid'][1]}  on {t['device']}")
    head = (
        f"{'order':10s} {'median ms':>9s} {'measured':>22s} {'equal':>5s}  "
        f"{'seed 002':<34s} {'HARDWARE.md':<11s} {'validation.md':<13s}"
    )
    print(head)
    print("-" * len(head))
    for r in t["rows"]:
        n = None if r["order"] == "row-major" else int(r["order"].split("=")[1])
        meas = f"{r['speedup']:.3f}x [{r['ci_low']:.3f}, {r['ci_high']:.3f}]"
        if n is None:
            meas = "1 (baseline)"
        seed = launch.seed.get(n, "-") if n else "-"
        hw = launch.hardware_md.get(n, "-") if n else "-"
        val = launch.validation.get(n, "-") if n else "-"
        print(
            f"{r['order']:10s} {r['median_ms']:9.3f} {meas:>22s} {str(r['outputs_equal']):>5s}  "
            f"{seed:<34s} {hw:<11s} {val:<13s}"
        )
    best = max(t["rows"], key=lambda r: r["speedup"])
    print(f"fastest: {best['order']} ({best['speedup']:.3f}x); build {t['build_s']:.1f} s")


def analyze_measure(timeout_s: float) -> dict[str, Any]:
    cmd = [
        sys.executable, "-m", "gpuadvise", "analyze", str(GATHER), "-k", KERNEL,
        "--measure", "--format", "json", "--select", "GA304", "--sample-ctas", "8",
    ]  # fmt: skip
    print("\n$ " + " ".join(cmd[2:]), flush=True)
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=timeout_s)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        print(p.stderr[-3000:])
        raise SystemExit(f"analyze exited {p.returncode}")
    doc = json.loads(p.stdout)
    findings = [f for f in doc.get("findings", []) if f.get("rule") == "GA304"]
    print(f"analyze --measure: {wall:.1f} s wall; notes: {doc.get('notes') or []}")
    if not findings:
        print("no GA304 finding (unexpected on the 8K case)")
        return {"wall_s": wall, "finding": None, "doc_notes": doc.get("notes")}
    f = findings[0]
    print(f"{f['file']}:{f['line']}: {f['message']}")
    for e in f["evidence"]:
        thr = "" if e["threshold"] is None else f" ({e['op']} {e['threshold']})"
        print(f"   {e['metric']} = {e['value']}{thr}")
    est = f.get("estimated_speedup") or {}
    print(f"   estimate: {est.get('speedup')} ({est.get('kind')}): {est.get('method')}")
    m = f.get("measured_speedup")
    if m:
        print(
            f"   measured (best verified): {m['speedup']:.3f}x [{m['ci_low']:.3f}, "
            f"{m['ci_high']:.3f}] {m['label']} on {m['device']}; verified {f.get('verified')}"
        )
    print(
        f"   {'trial':6s} {'speedup':>8s} {'95% CI':>18s} {'base ms':>8s} {'var ms':>8s}  verified"
    )
    for t in f.get("trials", []):
        tm = t.get("measured_speedup")
        if tm is None:
            print(
                f"   {t['label']:6s} {'-':>8s} {'':>18s} {'':>8s} {'':>8s}  "
                f"{t['verified']} {t['note']}"
            )
            continue
        print(
            f"   {t['label']:6s} {tm['speedup']:8.3f} [{tm['ci_low']:.3f}, {tm['ci_high']:.3f}] "
            f"{tm['baseline_ms']:8.3f} {tm['variant_ms']:8.3f}  {t['verified']}"
        )
    return {"wall_s": wall, "finding": f}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, default=None, help="folder for seed002_tiling.json")
    ap.add_argument("--max-time", type=float, default=3.0, help="timing seconds per launch set")
    ap.add_argument("--no-analyze", action="store_true", help="skip the analyze --measure run")
    a = ap.parse_args()
    from gpuadvise.runner.client import require_gpu

    require_gpu()
    t_start = time.perf_counter()
    out: dict[str, Any] = {"timing": [], "analyze": None}
    with tempfile.TemporaryDirectory(prefix="seed002-") as tmp:
        folder = Path(tmp)
        shutil.copy(CASE / "case.toml", folder / "case.toml")
        sources = tiled_sources(folder)
        for launch in LAUNCHES:
            t = time_launch(launch, sources, a.max_time)
            print_timing(t, launch)
            out["timing"].append(t)
    if not a.no_analyze:
        out["analyze"] = analyze_measure(timeout_s=150.0)
    total = time.perf_counter() - t_start
    out["total_s"] = total
    print(f"\ntotal {total:.0f} s")
    dest = Path(os.environ["OUT"]) if os.environ.get("OUT") else a.out
    if dest is not None:
        dest.mkdir(parents=True, exist_ok=True)
        (dest / "seed002_tiling.json").write_text(json.dumps(out, indent=1, default=str))
        print(f"wrote {dest / 'seed002_tiling.json'}")
    bad = [r for t in out["timing"] for r in t["rows"] if not r["outputs_equal"]]
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
