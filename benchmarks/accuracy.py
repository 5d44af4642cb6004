"""Estimate vs measured speedup for every finding on the kernels suite (issue: rules engine).

Runs `gpuadvise analyze --measure --format json` on each annotated kernel of kernels/ on the GPU,
collects every finding with its estimate and its measured, output-verified speedup, and writes the
table for docs/accuracy.md. Also times `analyze --measure` against `ncu --set full` on one kernel.
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
        kernels = [(m.start(), m.group(1)) for m in re.finditer(r"__global__\s+void\s+(\w+)", text)]
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


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", type=Path)
    a = ap.parse_args()
    rows = []
    for cu, kernel in cases():
        t0 = time.perf_counter()
        doc = analyze(cu, kernel)
        wall = time.perf_counter() - t0
        if "error" in doc:
            print(f"{kernel}: {doc['error']}")
            continue
        for f in doc["findings"]:
            est = (f.get("estimated_speedup") or {}).get("speedup")
            kind = (f.get("estimated_speedup") or {}).get("kind")
            meas = f.get("measured_speedup") or {}
            rows.append(
                {
                    "kernel": kernel,
                    "file": os.path.relpath(cu, ROOT),
                    "rule": f["rule"],
                    "line": f["line"],
                    "estimate": est,
                    "estimate_kind": kind,
                    "measured": meas.get("speedup"),
                    "ci": [meas.get("ci_low"), meas.get("ci_high")],
                    "verified": f.get("verified"),
                    "analyze_wall_s": wall,
                    "device": meas.get("device"),
                }
            )
            print(
                f"{kernel:14s} {f['rule']} line {f['line']}: estimate {est} ({kind}), "
                f"measured {meas.get('speedup')} CI {meas.get('ci_low')}..{meas.get('ci_high')} "
                f"verified {f.get('verified')}  [{wall:.1f} s]",
                flush=True,
            )
    pairs = [(r["estimate"], r["measured"]) for r in rows if r["estimate"] and r["measured"]]
    if pairs:
        mae = sum(abs(e - m) for e, m in pairs) / len(pairs)
        print(f"mean absolute error of the estimates: {mae:.3f} over {len(pairs)} findings")
    # analyze with measurement vs ncu --set full, one kernel
    cu = str(ROOT / "kernels/reduction/reduce.cu")
    t0 = time.perf_counter()
    analyze(cu, "reduce2")
    t_an = time.perf_counter() - t0
    t0 = time.perf_counter()
    subprocess.run(
        [
            "ncu",
            "--set",
            "full",
            "--clock-control",
            "none",
            "-k",
            "regex:^reduce2",
            "-c",
            "1",
            sys.executable,
            str(ROOT / "benchmarks/trace_validation/run_once.py"),
            json.dumps({"source": cu, "kernel": "reduce2"}),
            "/tmp/ncu_out.npz",
        ],
        capture_output=True,
        text=True,
    )
    t_ncu = time.perf_counter() - t0
    print(
        f"analyze --measure reduce2: {t_an:.1f} s wall; ncu --set full (one launch): {t_ncu:.1f} s"
    )
    if a.json:
        a.json.write_text(
            json.dumps({"rows": rows, "analyze_s": t_an, "ncu_full_s": t_ncu}, indent=1)
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
