"""Estimate vs measured speedup for every finding on the kernels suite (issue: rules engine).

Runs `gpuadvise analyze --measure --format json` on each annotated kernel of kernels/ on the GPU,
collects every finding with its estimate and its measured, output-verified speedup, and writes the
table for docs/accuracy.md. Also times `analyze --measure` against `ncu --set full` on one kernel.
Per finding also its bound, point (the launch roofline's, in the estimate's inputs), measured,
whether the bound held (within 5%) and the point's error, with the count of bounds that held and
the median point error (issue 16).
Usage (GPU machine): python3 benchmarks/accuracy.py [--json OUT] [--md OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def cases() -> list[tuple[str, str]]:
    out = []
    for cu in sorted((ROOT / "kernels").glob("*/*.cu")):
        text = cu.read_text()
        # a kernel is a case when an `expect:` annotation lies inside its body
        decl = r"__global__\s+void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?(\w+)"
        kernels = [(m.start(), m.group(1)) for m in re.finditer(decl, text)]
        for i, (start, name) in enumerate(kernels):
            end = kernels[i + 1][0] if i + 1 < len(kernels) else len(text)
            if "expect: GA" in text[start:end]:
                out.append((str(cu), name))
    return out


TEMPLATES = {"reduce6": "reduce6<256>", "reduce7": "reduce7<256>"}


def analyze(cu: str, kernel: str) -> dict:
    k = TEMPLATES.get(kernel, kernel)
    p = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpuadvise",
            "analyze",
            cu,
            "-k",
            k,
            "--measure",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        env={**os.environ},
    )
    if p.returncode != 0:
        return {"error": p.stderr.strip()}
    return json.loads(p.stdout)


def _fmt_meas(m: dict) -> str:
    if not m:
        return "-"
    what = "proxy " if m.get("kind") == "proxy" else ""
    label = f" {m['label']}" if m.get("label") else ""
    return f"{what}{m['speedup']:.3f}x ({m['ci_low']:.3f}..{m['ci_high']:.3f}){label}"


def _why_not(f: dict) -> str:
    trials = f.get("trials") or []
    if trials:
        return "; ".join(f"{t.get('label') or 'variant'}: {t.get('note')}" for t in trials)
    if f.get("variant") is None:
        return "no variant"
    return "no automatic variant (advice only)"


def held_lines(rows: list[dict]) -> list[str]:
    """Issue 16's summary: per finding the bound, the point (``inputs.point_speedup``, else
    the point estimate), the measurement, whether the bound held (within 5%) and the point's
    error; then the count of bounds that held and the median point error, against GPA's 6%."""
    out = ["| kernel | rule | line | bound | point | measured | held? | point error |",
           "|---|---|---:|---:|---:|---:|---|---:|"]  # fmt: skip
    held, errs = [], []
    for r in rows:
        if not r["measured"] or r["estimate"] is None:
            continue
        bound = r["estimate"] if r["estimate_kind"] == "upper-bound" else None
        point = r.get("point") or (r["estimate"] if r["estimate_kind"] == "point" else None)
        ok = None if bound is None else r["measured"] <= bound * 1.05
        err = None if point is None else abs(point - r["measured"]) / r["measured"]
        if ok is not None:
            held.append(ok)
        if err is not None:
            errs.append(err)
        out.append(
            f"| {r['kernel']} | {r['rule']} | {r['line']} | "
            + ("-" if bound is None else f"{bound:.2f}x")
            + " | "
            + ("-" if point is None else f"{point:.2f}x")
            + f" | {r['measured']:.2f}x | "
            + ("-" if ok is None else "yes" if ok else "**no**")
            + " | "
            + ("-" if err is None else f"{100 * err:.0f}%")
            + " |"
        )
    errs.sort()
    med = errs[len(errs) // 2] if errs else None
    out.append("")
    out.append(f"bounds that held (measured <= 1.05 x bound): {sum(held)} of {len(held)}")
    if med is not None:
        out.append(
            f"median point error: {100 * med:.0f}% over {len(errs)} findings (GPA, the closest "
            f"published tool, reports a 6% mean error on its own benchmark table: "
            + ("we are within it" if med <= 0.06 else f"we are {100 * med / 6:.0f}x its error")
            + ")"
        )
    return out


def mae_lines(rows: list[dict]) -> list[str]:
    """The estimates' errors against the measurements: point estimates by mean absolute error,
    upper bounds by whether they held and by how much they overshot."""
    out = []
    point = [(r["estimate"], r["measured"]) for r in rows
             if r["estimate"] and r["measured"] and r["estimate_kind"] == "point"]  # fmt: skip
    upper = [(r["estimate"], r["measured"]) for r in rows
             if r["estimate"] and r["measured"] and r["estimate_kind"] == "upper-bound"]  # fmt: skip
    both = point + upper
    if both:
        mae = sum(abs(e - m) for e, m in both) / len(both)
        out.append(f"mean absolute error of the estimates: {mae:.3f} over {len(both)} findings")
    if point:
        mae = sum(abs(e - m) for e, m in point) / len(point)
        out.append(f"  point estimates: MAE {mae:.3f} over {len(point)}")
    if upper:
        held = sum(m <= e * 1.02 for e, m in upper)
        mae = sum(abs(e - m) for e, m in upper) / len(upper)
        out.append(f"  upper bounds: held in {held}/{len(upper)}, MAE {mae:.3f}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", type=Path)
    ap.add_argument("--md", type=Path, help="write the markdown table here")
    ap.add_argument("--only", help="only kernels whose name contains this")
    ap.add_argument("--shard", help="K/N: that slice of the kernels (sorted), for several runs")
    ap.add_argument("--no-ncu", action="store_true", help="skip the analyze-vs-ncu timing")
    a = ap.parse_args()
    rows = []
    todo = cases()
    if a.shard:
        sys.path.insert(0, str(ROOT))
        from gpuadvise.analyze.cases import parse_shard, take_shard

        todo = take_shard(todo, parse_shard(a.shard), key=lambda c: f"{c[0]}:{c[1]}")
    for cu, kernel in todo:
        if a.only and a.only not in kernel:
            continue
        t0 = time.perf_counter()
        doc = analyze(cu, kernel)
        wall = time.perf_counter() - t0
        if "error" in doc:
            print(f"{kernel}: {doc['error']}", flush=True)
            continue
        for f in doc["findings"]:
            est = (f.get("estimated_speedup") or {}).get("speedup")
            kind = (f.get("estimated_speedup") or {}).get("kind")
            meas = f.get("measured_speedup") or {}
            row = {
                "kernel": kernel,
                "file": os.path.relpath(cu, ROOT),
                "rule": f["rule"],
                "line": f["line"],
                "severity": f["severity"],
                "estimate": est,
                "estimate_kind": kind,
                "point": ((f.get("estimated_speedup") or {}).get("inputs") or {}).get(
                    "point_speedup"
                ),
                "measured": meas.get("speedup"),
                "measured_kind": meas.get("kind"),
                "label": meas.get("label"),
                "ci": [meas.get("ci_low"), meas.get("ci_high")],
                "verified": f.get("verified"),
                "trials": f.get("trials") or [],
                "why_not": None if meas else _why_not(f),
                "analyze_wall_s": wall,
                "device": meas.get("device"),
                "measured_text": _fmt_meas(meas),
            }
            rows.append(row)
            print(
                f"{kernel:18s} {f['rule']} line {f['line']}: estimate {est} ({kind}), "
                f"measured {row['measured_text']} verified {f.get('verified')}"
                + (f" [{row['why_not']}]" if row["why_not"] else "")
                + f"  [{wall:.1f} s]",
                flush=True,
            )
            for t in row["trials"]:
                m = t.get("measured_speedup") or {}
                print(
                    f"{'':18s}   trial {t.get('label')}: {m.get('speedup')} "
                    f"verified {t.get('verified')} {t.get('note') or ''}",
                    flush=True,
                )
    for line in mae_lines(rows) + held_lines(rows):
        print(line)
    if a.md:
        md = ["| kernel | rule | line | estimate | measured (95% CI) | verified | analyze wall |",
              "|---|---|---:|---|---|---|---:|"]  # fmt: skip
        for r in rows:
            est = "-" if r["estimate"] is None else f"{r['estimate']:.2f}x ({r['estimate_kind']})"
            meas = r["measured_text"] if r["measured"] else f"not measured: {r['why_not']}"
            md.append(
                f"| {r['kernel']} | {r['rule']} | {r['line']} | {est} | {meas} | "
                f"{r['verified']} | {r['analyze_wall_s']:.1f} s |"
            )
        a.md.write_text("\n".join(md + [""] + mae_lines(rows) + ["", *held_lines(rows)]) + "\n")
    # analyze with the measurement of every variant vs ncu --set full, on the same kernel
    speed = []
    for rel, kernel in (
        ()
        if a.no_ncu
        else (
            ("transpose/transpose.cu", "transpose_naive"),
            ("transpose/transpose.cu", "transpose_tiled"),
            ("reduction/reduce.cu", "reduce2"),
            ("tile_gather/gather.cu", "gather_rowmajor"),
        )
    ):
        cu = str(ROOT / "kernels" / rel)
        t0 = time.perf_counter()
        doc = analyze(cu, kernel)
        t_an = time.perf_counter() - t0
        n_var = sum(len(f.get("trials") or []) for f in doc.get("findings", []))
        t0 = time.perf_counter()
        p = subprocess.run(
            ["ncu", "--set", "full", "--clock-control", "none", "-k", f"regex:^{kernel}", "-c", "1",
             sys.executable, str(ROOT / "benchmarks/trace_validation/run_once.py"),
             json.dumps({"source": cu, "kernel": kernel}), "/tmp/ncu_out.npz"],
            capture_output=True,
            text=True,
        )  # fmt: skip
        t_ncu = time.perf_counter() - t0
        ok = p.returncode == 0
        speed.append({"kernel": kernel, "analyze_s": t_an, "variants": n_var, "ncu_full_s": t_ncu})
        print(
            f"analyze --measure {kernel} ({n_var} variants measured): {t_an:.1f} s wall; "
            f"ncu --set full (one launch): {t_ncu:.1f} s" + ("" if ok else " (ncu failed)"),
            flush=True,
        )
    if a.json:
        a.json.write_text(json.dumps({"rows": rows, "speed": speed}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
