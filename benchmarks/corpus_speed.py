"""Wall time, CPU time and peak RSS of ``gpuadvise analyze --no-measure`` on corpus kernels.

Issue 31's goal: every corpus and public kernel at its default launch in <= 10 s wall and <= 1 GB
peak on the 2-core CPU machine, median <= 3 s. Each kernel is one fresh process (``--no-cache``,
the CPU emulator as tracer, the H100 model) with the command of ``benchmarks/corpus/run.py``;
the machine's load average is written beside every run, as the machine is shared and the wall
time follows the load (the CPU time much less).

    python benchmarks/corpus_speed.py [--only NAME ...] [--before OLD_CHECKOUT] [--json FILE]

``--before``: also run the analyzer of another checkout on the same sources, right before this
one's run of each kernel (the two columns then see the same load).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "corpus"))
ROOT = HERE.parent

DEFAULT = (  # slow ones of the 2026-11-29 corpus run and typical ones
    "cuda-samples/convolutionSeparable/convolutionRowsKernel",
    "cuda-samples/histogram/histogram256Kernel",
    "polybench-acc/correlation/corr_kernel",
    "hecbench/gemv/gemv_quantized_int8",
    "hecbench/expdist/distance",
    "llm.c/softmax_forward/softmax_forward_kernel4",
    "hecbench/thomas/cuThomasBatch",
)


def command(name: str, root: Path) -> list[str]:
    import corpus
    import run

    c = corpus.load()
    run.c_repos.update(c.repos)
    run.SPECS = Path(tempfile.gettempdir()) / f"gpuadvise-corpus-speed-{os.getpid()}"
    opts = argparse.Namespace(
        measure=False, check=False, gpu="H100", out=run.SPECS, extra=[], fixes=False
    )
    for k in c.kernels:
        if k.name == name:
            return [sys.executable, *run.command_for(k, opts)[1:], "--tracer", "emu", "--no-cache"]
    raise SystemExit(f"no corpus kernel {name!r}")


def measure(cmd: list[str], root: Path) -> dict[str, float | str]:
    env = dict(os.environ, PYTHONPATH=str(root))
    load = os.getloadavg()[0]
    t0 = time.monotonic()
    with tempfile.TemporaryFile() as out:
        p = subprocess.Popen(cmd, cwd=root, env=env, stdout=out, stderr=subprocess.DEVNULL)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.monotonic() - t0
        out.seek(0)
        text = out.read()
    row: dict[str, float | str] = {
        "wall_s": round(wall, 1),
        "cpu_s": round(ru.ru_utime + ru.ru_stime, 1),
        "rss_mb": round(ru.ru_maxrss / 1024),
        "load": round((load + os.getloadavg()[0]) / 2, 1),
        "status": "ok" if os.waitstatus_to_exitcode(status) == 0 else "failed",
    }
    try:
        t = json.loads(text).get("timings_s") or {}
        row["trace_s"] = round(float(t.get("trace_s", 0.0)), 1)
        row["rules_s"] = round(float(t.get("rules_s", 0.0)), 1)
    except (ValueError, AttributeError):
        pass
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", action="append", help="corpus kernels (default: DEFAULT)")
    ap.add_argument("--before", type=Path, help="another checkout, run before this one")
    ap.add_argument("--json", type=Path, help="write the rows here")
    args = ap.parse_args()
    roots = {"after": ROOT} if args.before is None else {"before": args.before, "after": ROOT}
    rows: dict[str, dict[str, dict[str, float | str]]] = {}
    print("| kernel | run | wall | CPU | peak RSS | trace / rules | load | status |")
    print("|---|---|---:|---:|---:|---:|---:|---|")
    for name in args.only or DEFAULT:
        for tag, root in roots.items():
            r = measure(command(name, root), root.resolve())
            rows.setdefault(name, {})[tag] = r
            print(f"| {name} | {tag} | {r['wall_s']} s | {r['cpu_s']} s | {r['rss_mb']} MB | "
                  f"{r.get('trace_s', '-')} / {r.get('rules_s', '-')} s | {r['load']} | "
                  f"{r['status']} |", flush=True)  # fmt: skip
    for tag in roots:
        walls = [float(r[tag]["wall_s"]) for r in rows.values()]
        cpus = [float(r[tag]["cpu_s"]) for r in rows.values()]
        print(f"{tag}: wall median {statistics.median(walls):.1f} s, max {max(walls):.1f} s; "
              f"CPU median {statistics.median(cpus):.1f} s, max {max(cpus):.1f} s")  # fmt: skip
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
