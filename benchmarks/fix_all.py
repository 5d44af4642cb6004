"""``analyze --fix`` on every kernel case of a folder (default kernels/): the fixes each case
takes, step by step, and their combined measured speedup (issue 20's GPU record).

Each case's folder is copied to a scratch folder first, so the repository's kernels are never
changed; ``--diff --json`` is run there (the composition is the one --fix would write).

    python benchmarks/fix_all.py [FOLDER] [--out docs/data/fix_all.md] [--no-measure]
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> int:
    from gpuadvise.analyze.cases import discover_cases
    from gpuadvise.analyze.options import KernelOptions

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", nargs="?", default=str(ROOT / "kernels"))
    ap.add_argument("--out", help="markdown table to write (also printed)")
    ap.add_argument("--no-measure", action="store_true", help="no GPU: emulator-verified fixes")
    ap.add_argument("--unsafe-fixes", action="store_true")
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--shard", help="K/N: only that slice of the cases (as analyze --shard)")
    ap.add_argument("--exclude", action="append", default=[], help="skip case ids holding this")
    a = ap.parse_args()
    from gpuadvise.analyze.cases import parse_shard, take_shard

    cases = discover_cases([a.folder], KernelOptions(source=None))
    cases = [c for c in cases if not any(x in c.id for x in a.exclude)]
    cases = take_shard(cases, parse_shard(a.shard), key=lambda c: c.id)
    head = "| case | kernel | steps (+ kept, - rejected) | kept | combined (95% CI) | wall s |"
    print(head + "\n|" + "---|" * 6, flush=True)
    out = Path(a.out) if a.out else None
    if out is not None:
        out.write_text(head + "\n|" + "---|" * 6 + "\n")

    def emit(row: tuple[str, ...]) -> None:
        # each row as soon as it is known: a run cut short keeps what it measured
        line = "| " + " | ".join(row) + " |"
        print(line, flush=True)
        if out is not None:
            with out.open("a") as fh:
                fh.write(line + "\n")

    for c in cases:
        o = c.options
        if c.error or not o.source:
            emit((c.id, "-", "error: " + (c.error or "no source"), "-", "-", "-"))
            continue
        with tempfile.TemporaryDirectory(prefix="gpuadvise-fixall-") as tmp:
            src_dir = Path(o.source).parent
            work = Path(tmp) / src_dir.name
            shutil.copytree(src_dir, work)
            cmd = [sys.executable, "-m", "gpuadvise", "analyze", str(work / Path(o.source).name)]
            if o.kernel:
                cmd += ["--kernel", o.kernel]
            if o.spec:
                cmd += ["--spec", str(work / Path(o.spec).name)]
            cmd += ["--diff", "--json"]
            if a.no_measure:
                cmd.append("--no-measure")
            if a.unsafe_fixes:
                cmd.append("--unsafe-fixes")
            t0 = time.perf_counter()
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.timeout, cwd=tmp)
            except subprocess.TimeoutExpired:
                emit((c.id, "-", f"timeout after {a.timeout:.0f} s", "-", "-", "-"))
                continue
            wall = time.perf_counter() - t0
        if p.returncode != 0:
            err = (p.stderr.strip().splitlines() or ["?"])[-1]
            emit((c.id, "-", f"exit {p.returncode}: {err}", "-", "-", f"{wall:.0f}"))
            continue
        doc = json.loads(p.stdout)
        fix = doc.get("fix") or {}
        steps = fix.get("steps") or []
        applied = [s for s in steps if s["status"] == "applied"]
        tried = ", ".join(
            f"{s['rule']}{'+' if s['status'] == 'applied' else '-'}"
            + ("" if not s.get("measurement") else f" {s['measurement']['speedup']:.2f}x")
            for s in steps
        )
        comb = fix.get("combined")
        combined = "-"
        if comb:
            combined = (
                f"{comb['speedup']:.2f}x [{comb['ci_low']:.2f}, {comb['ci_high']:.2f}] "
                f"({comb['baseline_ms']:.4g} -> {comb['variant_ms']:.4g} ms)"
            )
        emit(
            (
                c.id,
                doc["kernel"]["name"],
                tried or "no fix",
                str(len(applied)),
                combined,
                f"{wall:.0f}",
            )
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
