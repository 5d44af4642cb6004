"""Layout proxies against the real kernels, on the cells case (seed 004; issue 9). GPU only.

(a) ``gpuadvise analyze kernels/cells/cells.cu -k K --measure --format json`` for each of the four
    cells kernels (their launch specs beside the source: 1024x1024 cells, 16x16 blocks): every
    GA301 / GA302 / GA305 finding with its estimate and its proxy-measured, output-verified
    speedup (the proxy kernels gpuadvise synthesized from the line's trace).
(b) The real kernels timed through gpuadvise's bench machinery (``bench_cmd.prepare`` /
    ``time_prepared``, L2 flushed before each sample, as ``analyze --measure`` times). They take
    differently laid-out buffers, so each is timed on its own, in alternating rounds (the median
    of the rounds' medians, the spread over rounds beside it); ``cells_soa`` and
    ``cells_soa_tiled`` take the same buffers and are also timed A/B, outputs verified. The real
    step behind each rule:
        GA302 packing          cells_fields -> cells_packed
        GA301 AoS -> SoA       cells_packed -> cells_soa   (cells_fields -> cells_soa: packed too)
        GA305 shared tile      cells_soa    -> cells_soa_tiled
(c) One table, estimate vs proxy vs real, on stdout, and as JSON and markdown files
    (``--json``/``--md``; by default ``$OUT/layout_proxies.{json,md}`` when ``$OUT`` is set).

Usage (GPU machine, repository root, PYTHONPATH=.):
    python3 benchmarks/layout_proxies.py [--sample-ctas 264] [--rounds 3]
``--sample-ctas``: CTAs the CPU emulator traces for each analysis (264 = 2 per SM of an H100; the
estimates match the default first-wave trace's within 1% on these kernels and the analysis is
3-5x faster). About 2-3 minutes in all.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

CELLS = ROOT / "kernels" / "cells" / "cells.cu"
KERNELS = ("cells_fields", "cells_packed", "cells_soa", "cells_soa_tiled")
RULES = ("GA301", "GA302", "GA305")
# (rule, kernel the finding is on) -> the real step that applies the rule's fix
STEPS = {
    ("GA302", "cells_fields"): ("cells_fields", "cells_packed", "packing"),
    ("GA301", "cells_fields"): ("cells_fields", "cells_soa", "SoA and packing"),
    ("GA301", "cells_packed"): ("cells_packed", "cells_soa", "SoA"),
    ("GA305", "cells_soa"): ("cells_soa", "cells_soa_tiled", "shared tile"),
    ("GA305", "cells_packed"): None,  # the suite has no tiled AoS kernel
    ("GA305", "cells_fields"): None,
}


def analyze(kernel: str, sample_ctas: str, measure: bool = True) -> tuple[dict[str, Any], float]:
    cmd = [sys.executable, "-m", "gpuadvise", "analyze", str(CELLS), "-k", kernel,
           "--measure" if measure else "--no-measure", "--format", "json",
           "--select", ",".join(RULES), "--sample-ctas", sample_ctas]  # fmt: skip
    t0 = time.perf_counter()
    path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT,
                       env={**os.environ, "PYTHONPATH": path})  # fmt: skip
    wall = time.perf_counter() - t0
    try:
        doc = json.loads(p.stdout)
    except ValueError:
        doc = {}
    if p.returncode not in (0, 1) or "findings" not in doc:
        return {"error": (p.stderr.strip() or p.stdout.strip())[-2000:]}, wall
    return doc, wall


def timing() -> Any:
    from gpuadvise.runner.job import TimingConfig

    return TimingConfig(min_samples=10, min_time_s=0.5, max_time_s=3.0)


def prepare(kernel: str) -> Any:
    from gpuadvise.analyze.options import KernelOptions
    from gpuadvise.analyze.prepare import live_options
    from gpuadvise.analyze.prepare import prepare as bench_prepare

    spec = CELLS.parent / ("case.toml" if kernel == "cells_fields" else f"{kernel}.toml")
    opts = live_options(KernelOptions(source=str(CELLS), kernel=kernel, spec=str(spec)))
    return bench_prepare(opts, kernel)


def time_alone(prepared: dict[str, Any], rounds: int) -> tuple[dict[str, list[float]], str]:
    """Per kernel, the median of each round's samples; rounds alternate the kernels' order."""
    from gpuadvise.analyze.prepare import time_prepared

    medians: dict[str, list[float]] = {k: [] for k in prepared}
    device = "?"
    names = list(prepared)
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        for k in order:
            run = time_prepared([prepared[k]], timing(), hot=False, timeout_s=60.0).result
            if not run.ok:
                raise SystemExit(f"{k} failed on the GPU: {run.cuda_error or run.error}")
            device = str(run.device.get("name"))
            medians[k].append(statistics.median(run.outcomes[0].samples_ms))
    return medians, device


def time_ab(a: Any, b: Any) -> dict[str, Any]:
    """``a`` against ``b`` (the same buffers), outputs compared, as ``analyze --measure`` does."""
    from gpuadvise.analyze.prepare import time_prepared
    from gpuadvise.runner.stats import speedup_ci
    from gpuadvise.runner.verify import compare

    run = time_prepared([a, b], timing(), hot=False, timeout_s=60.0).result
    if not run.ok:
        return {"error": run.cuda_error or run.error}
    oa, ob = run.outcomes
    names = [x.name for x in a.buffers if x.is_output and x.name in ob.outputs]
    ok = all(compare(n, oa.outputs[n], ob.outputs[n], a.rtol, a.atol).ok for n in names)
    ci = speedup_ci(oa.samples_ms, ob.samples_ms)
    return {
        "speedup": ci.speedup,
        "ci": [ci.low, ci.high],
        "a_ms": statistics.median(oa.samples_ms),
        "b_ms": statistics.median(ob.samples_ms),
        "verified": ok,
    }


def _meas(m: dict[str, Any] | None, times: bool = False) -> str:
    if not m:
        return "-"
    text = f"{m['speedup']:.3f}x ({m.get('ci_low') or 0:.3f}..{m.get('ci_high') or 0:.3f})"
    if times:
        text += f" [proxy {m['baseline_ms']:.4f} -> {m['variant_ms']:.4f} ms]"
    return text


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sample-ctas", default="264", help="CTAs traced per analysis (or 'all')")
    ap.add_argument("--rounds", type=int, default=3, help="rounds of the real kernels' timing")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--md", type=Path)
    ap.add_argument("--dry-run", action="store_true", help="no GPU: analyze only, no timing")
    a = ap.parse_args()
    out_dir = os.environ.get("OUT")
    if out_dir:
        a.json = a.json or Path(out_dir) / "layout_proxies.json"
        a.md = a.md or Path(out_dir) / "layout_proxies.md"
    t_start = time.perf_counter()

    # (a) the findings, estimated and proxy-measured
    rows = []
    for kernel in KERNELS:
        doc, wall = analyze(kernel, a.sample_ctas, measure=not a.dry_run)
        if "error" in doc:
            print(f"{kernel}: analyze failed: {doc['error']}", flush=True)
            continue
        found = [f for f in doc["findings"] if f["rule"] in RULES]
        print(f"{kernel}: {len(found)} finding(s), analyze {wall:.1f} s", flush=True)
        for f in found:
            est = f.get("estimated_speedup") or {}
            meas = f.get("measured_speedup")
            trials = f.get("trials") or []
            why = "; ".join(f"{t.get('label')}: {t.get('note')}" for t in trials if t.get("note"))
            row = {
                "kernel": kernel,
                "rule": f["rule"],
                "line": f["line"],
                "severity": f["severity"],
                "estimate": est.get("speedup"),
                "estimate_kind": est.get("kind"),
                "proxy": meas,
                "verified": f.get("verified"),
                "variant": (f.get("variant") or {}).get("label"),
                "note": why or None,
            }
            rows.append(row)
            print(
                f"  {f['rule']} line {f['line']:>3} [{f['severity']}]: estimate "
                f"{est.get('speedup')} ({est.get('kind')}), proxy-measured {_meas(meas, True)}"
                f"{' kind=' + meas['kind'] if meas else ''} verified={f.get('verified')}"
                + (f" [{why}]" if why else ""),
                flush=True,
            )
    t_analyze = time.perf_counter() - t_start

    # (b) the real kernels
    prepared = {k: prepare(k) for k in KERNELS}
    if a.dry_run:
        for k, p in prepared.items():
            print(f"  {k}: prepared, buffers {[(b.name, b.nbytes) for b in p.buffers]}")
        print(f"dry run: no timing; analyze {t_analyze:.0f} s")
        return 0
    medians, device = time_alone(prepared, a.rounds)
    ms = {k: statistics.median(v) for k, v in medians.items()}
    print(f"\nreal kernels on {device} ({a.rounds} rounds, L2 flushed before each sample):")
    for k in KERNELS:
        spread = f"{min(medians[k]):.4f}..{max(medians[k]):.4f}"
        print(f"  {k:16s} {ms[k]:.4f} ms (rounds {spread})", flush=True)
    ab = time_ab(prepared["cells_soa"], prepared["cells_soa_tiled"])
    print(f"  cells_soa -> cells_soa_tiled A/B: {ab}", flush=True)

    # (c) side by side
    table = []
    for r in rows:
        step = STEPS.get((r["rule"], r["kernel"]))
        real = None
        if step is not None:
            before, after, what = step
            real = {"before": before, "after": after, "what": what,
                    "speedup": ms[before] / ms[after],
                    "range": [min(medians[before]) / max(medians[after]),
                              max(medians[before]) / min(medians[after])]}  # fmt: skip
            if (before, after) == ("cells_soa", "cells_soa_tiled") and "speedup" in ab:
                real["ab"] = ab
        table.append({**r, "real": real})
    lines = [
        f"Device: {device}. Command: `python3 benchmarks/layout_proxies.py --sample-ctas "
        f"{a.sample_ctas} --rounds {a.rounds}`.",
        "",
        "| kernel | rule | line | estimate | proxy-measured (95% CI) | real step | real |",
        "|---|---|---|---|---|---|---|",
    ]
    print("\nestimate vs proxy vs real:")
    for t in table:
        est = (
            f"{'<= ' if t['estimate_kind'] == 'upper-bound' else '~'}{t['estimate']:.2f}x"
            if (t["estimate"] is not None)
            else "-"
        )
        px = _meas(t["proxy"]) + ("" if t["severity"] != "note" else " (demoted: note)")
        real = t["real"]
        if real is None:
            step, rv = "no real kernel in the suite", "-"
        else:
            step = f"{real['before']} -> {real['after']} ({real['what']})"
            rv = f"{real['speedup']:.3f}x ({real['range'][0]:.3f}..{real['range'][1]:.3f})"
            if "ab" in real:
                ab_ = real["ab"]
                rv += f"; A/B {ab_['speedup']:.3f}x ({ab_['ci'][0]:.3f}..{ab_['ci'][1]:.3f})"
        lines.append(f"| {t['kernel']} | {t['rule']} | {t['line']} | {est} | {px} | {step} | "
                     f"{rv} |")  # fmt: skip
        print(f"  {t['kernel']:14s} {t['rule']} {t['line']:>3}: est {est:>8s}  proxy {px:28s}  "
              f"real {rv}  [{step}]")  # fmt: skip
    lines += ["", "Real kernel times (median of the rounds' medians, ms): "
              + ", ".join(f"{k} {ms[k]:.4f}" for k in KERNELS)]  # fmt: skip
    total = time.perf_counter() - t_start
    print(f"\nanalyze --measure {t_analyze:.0f} s, total {total:.0f} s", flush=True)
    doc = {
        "device": device,
        "sample_ctas": a.sample_ctas,
        "rounds": a.rounds,
        "findings": table,
        "real_ms": ms,
        "real_round_medians_ms": medians,
        "soa_vs_tiled_ab": ab,
        "wall_s": total,
    }
    if a.json:
        a.json.parent.mkdir(parents=True, exist_ok=True)
        a.json.write_text(json.dumps(doc, indent=2) + "\n")
    if a.md:
        a.md.parent.mkdir(parents=True, exist_ok=True)
        a.md.write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
