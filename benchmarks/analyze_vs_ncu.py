"""analyze --measure against `ncu --set full --clock-control none -c 1` on the same launch
(issue 31): the four kernels/ launches of every earlier comparison and five corpus kernels, each
analysed with every finding's variant measured, by two trees of gpuadvise ("after", "before"),
and profiled once by ncu. Run from the repository root on the GPU machine:

    AFTER_PKG=/path/to/new/checkout BEFORE_PKG=$PWD python3 benchmarks/analyze_vs_ncu.py

AFTER_PKG (default: this checkout) and BEFORE_PKG (default: none, no "before" column) are folders
holding a gpuadvise/ package (and its rules/); each column gets a fresh compile cache. Prints one
line per run (its phases' seconds, every trial's speedup, samples and stop reason) and the table;
writes $OUT/s13-ncu/ncu_vs.json. PROBE_DEADLINE_S (140): skip what is left past it, in the order
of the plan below. ONLY=a,b: those kernels alone. PROBE_DRY=1: --no-measure and no ncu (a CPU
check of the script). NO_NCU=1: the two trees only (ncu's times from an earlier run). PAIRS=a,b:
the kernels run by both trees back to back, in alternating order, first (default: reduce2,
gather_rowmajor, transpose_naive, atomic_red). Each analysis runs with -v: its log lines on the
measurement's parts ("measure: ...") and its phases ("timings: ...") are printed under it.
OUT_NAME: the folder under $OUT for ncu_vs.json (s13-ncu). The session 13 probe (.gpu/s13-ncu/)
ran this with the branch copied to .gpu/s13-ncu/pkg/ as "after" and main as "before".
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path.cwd()
sys.path.insert(0, str(Path(__file__).resolve().parent))
import accuracy  # noqa: E402  (main's harness: the cases and run_once's options)

DEADLINE = time.monotonic() + float(os.environ.get("PROBE_DEADLINE_S", "140"))
CORPUS = [
    "hecbench/f16max/hmax_half",
    "olcf-training/reductions/atomic_red",
    "hecbench/babelstream/triad_kernel",
    "cuda-samples/BlackScholes/BlackScholesGPU",
    "coffeebeforearch/histogram_global_atomic/histogram",
]
ORDER = ["reduce2", "gather_rowmajor", "transpose_naive", *CORPUS, "transpose_tiled"]  # see plan
if os.environ.get("ONLY"):
    ORDER = [n for n in ORDER if any(p in n for p in os.environ["ONLY"].split(","))]
DRY = os.environ.get("PROBE_DRY") == "1"  # CPU check of the script: --no-measure, no ncu
NO_NCU = os.environ.get("NO_NCU") == "1"
PAIRS = os.environ.get("PAIRS", "reduce2,gather_rowmajor,transpose_naive,atomic_red").split(",")
site = os.environ.get("PYTHONPATH", "")
COLUMNS = {"after": os.pathsep.join([os.environ.get("AFTER_PKG", str(ROOT)), site])}
if os.environ.get("BEFORE_PKG"):
    COLUMNS["before"] = os.pathsep.join([os.environ["BEFORE_PKG"], site])
out_dir = Path(os.environ.get("OUT", "/tmp")) / os.environ.get("OUT_NAME", "s13-ncu")
out_dir.mkdir(parents=True, exist_ok=True)
for path in COLUMNS.values():
    pkg = Path(path.split(os.pathsep)[0])
    subprocess.run([sys.executable, "-m", "compileall", "-q", str(pkg / "gpuadvise"),
                    str(pkg / "rules")], check=False)  # fmt: skip

cases = {c.name: (c, opts, k) for c, opts, k in accuracy._ncu_cases(CORPUS)}
rows = []


def analyze(col: str, case) -> dict:
    # PYTHONSAFEPATH: `python -m gpuadvise` would put the working folder (this checkout, with
    # its own gpuadvise/) first on sys.path, before PYTHONPATH: both columns ran this checkout's
    # code until the fifteenth session
    env = {**os.environ, "PYTHONPATH": COLUMNS[col], "PYTHONSAFEPATH": "1",
           "GPUADVISE_CACHE_DIR": f"/tmp/s13ncu_cache_{col}"}  # fmt: skip
    cmd = list(case.cmd)
    cmd.insert(cmd.index("gpuadvise") + 1, "-v")  # the log: the measurement's parts, the phases
    cmd += ["--no-measure"] if DRY else ["--measure"]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    wall = time.perf_counter() - t0
    try:
        doc = json.loads(p.stdout)
    except json.JSONDecodeError:
        doc = {"error": p.stderr.strip()[-400:]}
    trials = [
        {"rule": f["rule"], "line": f.get("line"), "label": t.get("label"),
         "verified": t.get("verified"), "note": t.get("note"),
         "m": {k: (t.get("measured_speedup") or {}).get(k)
               for k in ("speedup", "ci_low", "ci_high", "samples", "stop_reason", "baseline_ms")}}
        for f in doc.get("findings", []) for t in (f.get("trials") or [])
    ]  # fmt: skip
    logged = [line.strip() for line in p.stderr.splitlines()
              if "measure:" in line or "timings:" in line]  # fmt: skip
    return {"wall_s": wall, "rc": p.returncode, "trials": trials, "error": doc.get("error"),
            "timings_s": {k: round(v, 3) for k, v in (doc.get("timings_s") or {}).items()},
            "log": logged}  # fmt: skip


def ncu(opts: dict, kernel: str) -> tuple[float, bool, str]:
    if DRY or NO_NCU:
        return 0.0, True, ""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), site])}
    t0 = time.perf_counter()
    p = subprocess.run(
        ["ncu", "--set", "full", "--clock-control", "none", "-k", f"regex:^{kernel}", "-c", "1",
         sys.executable, str(ROOT / "benchmarks/trace_validation/run_once.py"),
         json.dumps(opts), "/tmp/s13ncu_out.npz"],
        capture_output=True, text=True, env=env, cwd=ROOT, timeout=120,
    )  # fmt: skip
    return time.perf_counter() - t0, p.returncode == 0, p.stderr.strip()[-200:]


def phases(t: dict) -> str:
    keys = ("compile_s", "sass_s", "registers_s", "trace_s", "rules_s", "variant_traces_s",
            "measure_s")  # fmt: skip
    return " ".join(f"{k[:-2]}={t[k]:.1f}" for k in keys if k in t)


todo = []
for name in ORDER:
    hit = [v for n, v in cases.items() if n == name or n.endswith("/" + name)]
    if not hit:
        print(f"{name}: no such case", flush=True)
        continue
    todo.append((hit[0], {"kernel": hit[0][0].name}))
    rows.append(todo[-1][1])
# the plan, in the order of what matters most under the deadline: the three kernels/ launches
# and atomic_red with both columns, then the branch and ncu on the rest, then main on the rest
by_name = {row["kernel"]: ((case, opts, kernel), row) for (case, opts, kernel), row in todo}
names = [row["kernel"] for _, row in todo]
first = [n for p in PAIRS for n in names if n.rsplit("/", 1)[-1] == p]  # in PAIRS' order
rest = [n for n in names if n not in first]
# the two trees in alternating order (the session-13 run put "after" first every time, and the
# first of a pair ran slower on the CPU phases too: the columns' order is not to decide)
plan = [
    (n, s)
    for i, n in enumerate(first)
    for s in (("after", "ncu", "before") if i % 2 == 0 else ("before", "ncu", "after"))
]
plan += [(n, s) for n in rest for s in ("after", "ncu")] + [(n, "before") for n in rest]
for name, step in plan:
    if (step not in COLUMNS and step != "ncu") or (step == "ncu" and NO_NCU):
        continue
    (case, opts, kernel), row = by_name[name]
    if time.monotonic() > DEADLINE:
        print(f"{case.name}: {step} skipped (probe deadline)", flush=True)
        continue
    try:
        if step == "ncu":
            row["ncu_s"], row["ncu_ok"], why = ncu(opts, kernel)
            print(f"{case.name}: ncu --set full {row['ncu_s']:.1f} s"
                  + ("" if row["ncu_ok"] else f" FAILED {why}"), flush=True)  # fmt: skip
        else:
            r = analyze(step, case)
            row[step] = r
            ok = sum(1 for t in r["trials"] if t["m"].get("speedup") is not None)
            print(f"{case.name}: analyze --measure [{step}] {r['wall_s']:.1f} s rc={r['rc']} "
                  f"trials={len(r['trials'])} measured={ok} {phases(r['timings_s'])}"
                  + (f" ERROR {r['error']}" if r["error"] else ""), flush=True)  # fmt: skip
            for t in r["trials"]:
                print(f"    {t['rule']}:{t['line']} {t['label']} verified={t['verified']} "
                      f"{t['m']} {t['note'] or ''}", flush=True)  # fmt: skip
            for line in r["log"]:
                print(f"    | {line}", flush=True)
    except subprocess.TimeoutExpired:
        print(f"{case.name}: {step} timed out", flush=True)
    (out_dir / "ncu_vs.json").write_text(json.dumps(rows, indent=1))


def _wall(x: dict | None) -> str:
    return "-" if x is None else f"{x['wall_s']:.1f} s"


def _ratio(x: dict | None, n: float | None) -> str:
    return "-" if x is None or not n else f"{x['wall_s'] / n:.2f}"


print("\n| kernel | variants measured | analyze --measure (before) | (after) | ncu --set full | "
      "ratio before | ratio after |")  # fmt: skip
for r in rows:
    a, b, n = r.get("after"), r.get("before"), r.get("ncu_s")
    nv = sum(1 for t in (a or b or {}).get("trials", []) if t["m"].get("speedup") is not None)
    print(f"| {r['kernel']} | {nv} | {_wall(b)} | {_wall(a)} | "
          f"{'-' if n is None else f'{n:.1f} s'} | {_ratio(b, n)} | {_ratio(a, n)} |")  # fmt: skip
