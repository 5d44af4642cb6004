"""Behaviour check for refactors: ``gpuadvise analyze --json`` on every launch spec in kernels/.

Runs the CLI (no GPU, H100 model, CPU emulator tracing 64 CTAs, a fresh cache) on each
``case.toml`` and ``<kernel>.toml`` under ``kernels/``, and on every other kernel of a case's
source under its ``case.toml``, and keeps what a user sees: the findings (rule, line, severity,
message, estimate, evidence, variant safety), resources, occupancy, waves, and the per-line bank and
coalescing tables. Timings and absolute paths are dropped.

    python benchmarks/analyze_golden.py --write before.json     # on the old code
    python benchmarks/analyze_golden.py --compare before.json   # on the new code: exit 1 on a diff

Written for the architecture refactor (issue 14): behaviour must not change.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "kernels"
DROP = {"timings_s", "time_s", "toolchain", "compile_cached"}
NEW_KEYS = {"recommend_only_if_faster", "details", "skipped"}
"""Keys the output gained on purpose after a before file was written (issue 14: a finding's
control flag and its rule's typed details, which the JSON used to lose): missing before, they are
not a difference; a changed value of one still is."""


def _strip(value: Any) -> Any:
    """The JSON without timings, with paths made relative to the repository."""
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if k not in DROP}
    if isinstance(value, list):
        return [_strip(v) for v in value]
    if isinstance(value, str):  # paths relative, and no wall times in notes ("in 0.4 s")
        return re.sub(r"\bin \d+(?:\.\d+)? s\b", "in <t> s", value.replace(str(ROOT) + "/", ""))
    if isinstance(value, float):
        return round(value, 9)
    return value


def _runs() -> list[tuple[Path, str | None]]:
    """Every launch spec as written, and every other kernel of a case's .cu files under the
    folder's case.toml (``--kernel K``), so that each kernel in kernels/ is analyzed once."""
    runs: list[tuple[Path, str | None]] = [(s, None) for s in sorted(KERNELS.rglob("*.toml"))]
    try:
        from gpuadvise.source.signature import list_kernels
    except ImportError:  # the layout before issue 14
        from gpuadvise.signature import list_kernels  # type: ignore[no-redef]
    for case in sorted(KERNELS.rglob("case.toml")):
        have = set()
        for s in case.parent.glob("*.toml"):
            m = re.search(r'^kernel\s*=\s*"([^"]+)"', s.read_text(), re.M)
            if m:
                have.add(m.group(1))
        src = re.search(r'^source\s*=\s*"([^"]+)"', case.read_text(), re.M)
        if not src:
            continue
        for k in dict.fromkeys(list_kernels((case.parent / src.group(1)).read_text())):
            if k not in have and "<" not in k:
                runs.append((case, k))
    return runs


def run_one(spec: Path, kernel: str | None, cache: str) -> dict[str, Any]:
    env = dict(os.environ, GPUADVISE_CACHE_DIR=cache)
    cmd = [sys.executable, "-m", "gpuadvise", "analyze", "--spec", str(spec), "--gpu", "H100",
           "--json", "--no-measure", "--tracer", "emu", "--sample-ctas", "64"]  # fmt: skip
    if kernel:
        cmd += ["--kernel", kernel]
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
    if p.returncode != 0:
        return {"exit": p.returncode, "stderr": p.stderr.strip().splitlines()[-1:]}
    d = json.loads(p.stdout)
    keep = ("kernel", "resources", "occupancy", "waves", "findings", "shared_memory",
            "global_memory", "l2", "rules_run", "emulation")  # fmt: skip
    return {"exit": 0, **{k: _strip(d.get(k)) for k in keep}}


def collect() -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="gpuadvise-golden-") as cache:
        for spec, kernel in _runs():
            key = str(spec.relative_to(ROOT)) + (f" --kernel {kernel}" if kernel else "")
            print(f"  {key}", file=sys.stderr, flush=True)
            out[key] = run_one(spec, kernel, cache)
    return out


def _diff(a: Any, b: Any, path: str, out: list[str]) -> None:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a and k in NEW_KEYS:
                continue
            if k not in a or k not in b:
                out.append(f"{path}.{k}: {'missing before' if k not in a else 'missing after'}")
            else:
                _diff(a[k], b[k], f"{path}.{k}", out)
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"{path}: {len(a)} items before, {len(b)} after")
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            _diff(x, y, f"{path}[{i}]", out)
    elif a != b:
        out.append(f"{path}: {a!r} -> {b!r}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--write", metavar="FILE")
    g.add_argument("--compare", metavar="FILE")
    args = ap.parse_args()
    now = collect()
    if args.write:
        Path(args.write).write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
        print(f"wrote {len(now)} analyses to {args.write}")
        return 0
    before = json.loads(Path(args.compare).read_text())
    diffs: list[str] = []
    _diff(before, now, "", diffs)
    for d in diffs[:200]:
        print(d)
    print(f"{len(now)} analyses, {len(diffs)} differences")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
