"""`gpuadvise analyze`'s time to its first line on stdout (issue 31: the first lines, resources,
occupancy and waves, within 1 s), against its whole wall time.

Each case is one ``python -m gpuadvise analyze ... --no-measure`` (the terminal's text format,
stdout a pipe) in a fresh interpreter; the time of the first byte and of the last one on stdout
are taken from the parent (``time.perf_counter`` around the child's start and its reads), and
the CPU time of the child and the tools it ran (what a shared machine's load disturbs least). Three
states of the caches, each run in turn for every case:

- ``cold``: an empty ``GPUADVISE_CACHE_DIR`` (nvcc, ptxas and nvdisasm run);
- ``warm``: the compile cache holds the module, the analysis-result cache misses (a new
  ``--seed`` for every run, as benchmarks/analyze_speed.py does);
- ``hit``: the same command again: the analysis-result cache answers (not for an incomplete
  analysis, which is not stored: the transpose, whose L2 rule is skipped, runs again).

Cases: kernels/transpose (``transpose_naive``, the case's 8192^2 launch) and five corpus kernels
at their manifest's launch (benchmarks/corpus/src fetched). ``-n``: runs of each state (the
medians are printed; the 2-core machine is shared). ``--root``: the gpuadvise tree to run;
``--compare DIR``: another tree (a checkout of an older commit, for "before"), run in turn with
it. Python's bytecode is written beforehand (compileall), so that the module compilation is not
timed.

Usage: python benchmarks/first_line.py [-n 3] [--case NAME ...] [--root DIR] [--compare DIR]
       [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE / "corpus"))

CORPUS = (
    "cuda-samples/vectorAdd/vectorAdd",
    "cuda-samples/BlackScholes/BlackScholesGPU",
    "cuda-samples/scalarProd/scalarProdGPU",
    "coffeebeforearch/convolution_1d_tiled/convolution_1d",
    "hecbench/adam/adam",
)


def corpus_args(name: str, folder: Path) -> list[str]:
    """The analyze arguments of corpus kernel ``name`` (its launch spec written in ``folder``)."""
    import corpus  # benchmarks/corpus/corpus.py
    from run import spec_text  # benchmarks/corpus/run.py

    c = corpus.load()
    (k,) = [k for k in c.kernels if k.name == name]
    base = corpus.SRC / k.repo
    source = base / k.path
    spec = folder / (name.replace("/", "__") + ".toml")
    spec.write_text(spec_text(k, source))
    args = [str(source), "--spec", str(spec)]
    for inc in k.entry.get("include", []):
        args += ["-I", str(base / inc)]
    return [*args, "-I", str(source.parent)]


def case_args(name: str, folder: Path) -> list[str]:
    if name == "transpose":
        return [str(ROOT / "kernels/transpose/transpose.cu"), "--spec",
                str(ROOT / "kernels/transpose/case.toml")]  # fmt: skip
    return corpus_args(name, folder)


def timed(args: list[str], env: dict[str, str], root: Path) -> tuple[float, float, float, bytes]:
    """(seconds to the first byte on stdout, seconds to the end, CPU seconds of the child and
    the tools it ran, stdout) of one analyze (the CPU time is what the load disturbs least)."""
    cmd = [sys.executable, "-m", "gpuadvise", "analyze", *args, "--no-measure", "--gpu", "H100"]
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=root
    )  # fmt: skip
    assert p.stdout is not None
    first = p.stdout.read(1)
    t_first = time.perf_counter() - t0
    rest = p.stdout.read()
    code = p.wait()
    t_end = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime
    if code not in (0, 1):
        raise SystemExit(f"analyze failed ({code}): {' '.join(cmd)}")
    return t_first, t_end, cpu, first + rest


def measure(case: str, n: int, roots: list[Path], work: Path) -> list[dict]:
    """``n`` rounds of cold, warm and hit runs of ``case`` under every tree of ``roots`` in
    turn (the trees alternate, so that a change in the machine's load falls on both)."""
    args = case_args(case, work)
    times: dict[Path, dict[str, list[tuple[float, float, float]]]] = {
        r: {"cold": [], "warm": [], "hit": []} for r in roots
    }
    same: dict[Path, bool | None] = {r: True for r in roots}
    for i in range(n):
        for j, root in enumerate(roots):
            env = {**os.environ, "PYTHONPATH": str(root),
                   "PYTHONPYCACHEPREFIX": str(work / f"pyc-{j}"),
                   "GPUADVISE_CACHE_DIR": str(work / f"cache-{j}-{case.replace('/', '_')}-{i}")}  # fmt: skip
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            f, e, c, out = timed([*args, "--seed", str(100 + i)], env, root)
            times[root]["cold"].append((f, e, c))
            f, e, c, out = timed([*args, "--seed", str(200 + i)], env, root)
            times[root]["warm"].append((f, e, c))
            stored = any(Path(env["GPUADVISE_CACHE_DIR"], "analysis").rglob("*.json"))
            f, e, c, hit = timed([*args, "--seed", str(200 + i)], env, root)
            times[root]["hit"].append((f, e, c))
            # an incomplete analysis (a rule skipped) is not stored: each run analyzes again
            if not stored:
                same[root] = None
            elif same[root] is not None:
                same[root] = same[root] and hit == out
    rows = []
    for root in roots:
        row: dict = {"case": case, "root": str(root), "hit_same_bytes": same[root]}
        for state, ts in times[root].items():
            row[state] = {
                "first_s": statistics.median(t[0] for t in ts),
                "end_s": statistics.median(t[1] for t in ts),
                "cpu_s": statistics.median(t[2] for t in ts),
                "runs": ts,
            }
        rows.append(row)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=3)
    ap.add_argument("--case", action="append", help="transpose or a corpus kernel's name")
    ap.add_argument("--root", type=Path, default=ROOT)
    ap.add_argument("--compare", type=Path, help="another tree, run in turn with --root's")
    ap.add_argument("--json", type=Path, help="write every run's times here")
    a = ap.parse_args()
    roots = [a.root.resolve()] + ([a.compare.resolve()] if a.compare else [])
    cases = a.case or ["transpose", *CORPUS]
    print("load average before: " + ", ".join(f"{v:.1f}" for v in os.getloadavg()))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        for j, root in enumerate(roots):  # Python's bytecode written before anything is timed
            env = {
                **os.environ,
                "PYTHONPATH": str(root),
                "PYTHONPYCACHEPREFIX": str(work / f"pyc-{j}"),
            }  # noqa: E501
            env.pop("PYTHONDONTWRITEBYTECODE", None)
            subprocess.run([sys.executable, "-m", "compileall", "-q", str(root / "gpuadvise"),
                            str(root / "rules")], env=env, cwd=root, capture_output=True)  # fmt: skip
        for case in cases:
            for row in measure(case, a.n, roots, work):
                rows.append(row)
                tree = f" [{row['root']}]" if len(roots) > 1 else ""
                print(
                    f"{case}{tree}: "
                    + "; ".join(
                        f"{s} first {row[s]['first_s']:.2f} s, end {row[s]['end_s']:.2f} s "
                        f"(CPU {row[s]['cpu_s']:.2f} s)"
                        for s in ("cold", "warm", "hit")
                    )
                    + {
                        True: "",
                        False: "  (a cache hit printed other bytes!)",
                        None: "  (no hit: an incomplete analysis is not stored)",
                    }[row["hit_same_bytes"]],
                    flush=True,
                )
    print("load average after: " + ", ".join(f"{v:.1f}" for v in os.getloadavg()))
    if a.json is not None:
        a.json.write_text(json.dumps(rows, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
