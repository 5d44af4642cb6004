"""Analyse every kernel of the stranger corpus and score the advice against the expectations.

    python benchmarks/corpus/fetch.py                          # once: sources into src/
    python benchmarks/corpus/run.py --check [--only SUBSTR]    # specs compile and fit (no rules)
    python benchmarks/corpus/run.py [--jobs 2] [--shard K/N] [--only SUBSTR] [--measure]
    python benchmarks/corpus/run.py --jobs 8 --cpus-per-job 2        # 8 two-CPU machines at once
    python benchmarks/corpus/run.py --score src/_results/results.json [--markdown FILE]

Each kernel is one ``python -m gpuadvise analyze --json`` subprocess (``--no-measure`` unless
``--measure``) with the launch spec of its manifest entry, a wall-clock timeout and a resident
memory limit (the child's own peak from ``wait4``; it is killed past ``--max-rss-mb``). It prints,
and writes to ``--out``: recall (main problems found at their line), precision (warnings judged
right), wrong warnings by rule, the unjudged warnings (judge them in judged.toml), and time and
peak memory per kernel. ``--score`` re-scores saved results (after judging) without analysing.
Exit 0 when every kernel was analysed, 1 when some failed, timed out or ran out of memory,
2 on bad usage (a broken manifest, sources not fetched).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import queue
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import corpus  # noqa: E402

ROOT = HERE.parents[1]
SPECS = corpus.SRC / "_specs"
CUBLAS_DIR = HERE.parent / "public" / "src" / "_cublas" / "include"  # public/fetch.py's
c_repos: dict[str, corpus.Repo] = {}
SPEC_KEYS = ("kernel", "grid", "block", "dynamic_smem", "nvcc_flags", "seed", "rtol", "atol")


@dataclass
class Run:
    name: str
    status: str  # ok | failed | timeout | memory | missing
    wall_s: float = 0.0
    peak_rss_mb: float = 0.0
    findings: list[dict[str, Any]] = field(default_factory=list)
    error: str = ""
    timings_s: dict[str, float] = field(default_factory=dict)
    complete: bool | None = None  # the trace covered what the rules needed
    command: str = ""


def _toml_value(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int | float):
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v)
    if isinstance(v, list):
        return "[" + ", ".join(_toml_value(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{json.dumps(k)} = {_toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"cannot write {v!r} to TOML")


def spec_text(k: corpus.Kernel, source: Path) -> str:
    """The launch spec (gpuadvise's TOML format) of one manifest entry."""
    e = k.entry
    lines = [f"# {k.name}: written by benchmarks/corpus/run.py from manifest/{k.slice}.toml",
             f"source = {_toml_value(str(source))}"]  # fmt: skip
    lines += [f"{key} = {_toml_value(e[key])}" for key in SPEC_KEYS if key in e]
    for table in ("args", "buffers", "constants"):
        if e.get(table):
            lines.append(f"\n[{table}]")
            lines += [f"{json.dumps(n)} = {_toml_value(v)}" for n, v in e[table].items()]
    return "\n".join(lines) + "\n"


def command_for(k: corpus.Kernel, opts: argparse.Namespace) -> list[str]:
    base = corpus.SRC / k.repo
    source = base / k.path
    if not source.is_file():
        raise FileNotFoundError(f"{source.relative_to(HERE)} is not fetched")
    SPECS.mkdir(parents=True, exist_ok=True)
    spec = SPECS / (k.name.replace("/", "__") + ".toml")
    spec.write_text(spec_text(k, source))
    # --measure: each process's measurement waits for the others' (one GPU, no overlapping timings)
    runner = ([str(HERE / "locked_analyze.py"), str(opts.out / "measure.lock")] if opts.measure
              else ["-m", "gpuadvise", "analyze"])  # fmt: skip
    # each analysis under cProfile (profile_sum.py adds them up); the other benchmarks that build
    # their own options (accuracy.py, corpus_speed.py, speed_golden.py) have no ``profile``
    profile = getattr(opts, "profile", None)
    if profile is not None:
        profile.mkdir(parents=True, exist_ok=True)
        prof = profile / (k.name.replace("/", "__") + ".prof")
        runner = ["-m", "cProfile", "-o", str(prof), *runner]
    cmd = [sys.executable, *runner, str(source), "--spec", str(spec),
           "--format", "json", "-q", "--gpu", opts.gpu]  # fmt: skip
    if opts.check:
        cmd += ["--no-trace", "--ignore", "GA", "--no-measure"]
    else:
        cmd += ["--measure" if opts.measure else "--no-measure"]
        if opts.fixes:  # the combined fix, verified (on the GPU, else the CPU emulator)
            cmd += ["--diff"]
    for inc in k.entry.get("include", []):
        cmd += ["-I", str(base / inc)]
    cmd += ["-I", str(source.parent)]
    if c_repos[k.repo].cublas:
        cmd += ["-I", str(CUBLAS_DIR)]
    cmd += list(opts.extra)
    return cmd


def _child_env() -> dict[str, str]:
    path = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path)}


def _rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def run_one(
    cmd: list[str], timeout_s: float, max_rss_mb: float
) -> tuple[str, float, float, str, str]:
    """(status, wall s, peak RSS MB, stdout, stderr) of one analyze subprocess."""
    t0 = time.monotonic()
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        p = subprocess.Popen(cmd, stdout=out, stderr=err, cwd=ROOT, start_new_session=True,
                             env=_child_env())  # fmt: skip
        status = ""
        while True:
            pid, code, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            wall = time.monotonic() - t0
            if wall > timeout_s:
                status = "timeout"
            elif _rss_mb(p.pid) > max_rss_mb:
                status = "memory"
            if status:
                os.killpg(p.pid, signal.SIGKILL)
                pid, code, ru = os.wait4(p.pid, 0)
                break
            time.sleep(0.1)
        wall = time.monotonic() - t0
        rc = os.waitstatus_to_exitcode(code)
        out.seek(0)
        err.seek(0)
        stdout, stderr = out.read(), err.read()
    if not status:
        status = "ok" if rc == 0 else "failed"
    return status, wall, ru.ru_maxrss / 1024, stdout, stderr


def analyse(k: corpus.Kernel, opts: argparse.Namespace) -> Run:
    r = Run(k.name, "missing")
    try:
        cmd = command_for(k, opts)
    except FileNotFoundError as e:
        r.error = f"{e}; run benchmarks/corpus/fetch.py"
        return r
    r.command = " ".join(cmd[1:]).replace(str(ROOT) + "/", "")
    r.status, r.wall_s, r.peak_rss_mb, out, err = run_one(cmd, opts.timeout, opts.max_rss_mb)
    if r.status == "ok":
        try:
            doc = json.loads(out)
        except json.JSONDecodeError:
            r.status, r.error = "failed", "the output is not JSON: " + out[:200]
            return r
        r.findings = [asdict(f) for f in corpus.findings_of(doc)]
        r.timings_s = {k: round(v, 2) for k, v in (doc.get("timings_s") or {}).items()
                       if isinstance(v, int | float)}  # fmt: skip
        emu = doc.get("emulation") or {}
        r.complete = not doc.get("skipped") and not emu.get("error")
        if emu.get("error"):
            r.error = "trace: " + str(emu["error"])[:300]
    else:
        tail = [x for x in err.strip().splitlines() if x.strip()]
        r.error = (tail[-1] if tail else f"exit status without a message ({r.status})")[:400]
    return r


def score(c: corpus.Corpus, runs: list[Run]) -> tuple[list[corpus.KernelScore], corpus.Totals]:
    by_name = {k.name: k for k in c.kernels}
    scores = []
    for r in runs:
        k = by_name.get(r.name)
        if k is None:
            continue
        findings = [corpus.Finding(**f) for f in r.findings]
        scores.append(corpus.score_kernel(k, r.status, findings, c.judged))
    return scores, corpus.totals(scores)


def _pct(x: float) -> str:
    return f"{100 * x:.0f}%"


def summary(runs: list[Run], scores: list[corpus.KernelScore], t: corpus.Totals) -> str:
    walls = [r.wall_s for r in runs if r.status == "ok"]
    rss = [r.peak_rss_mb for r in runs if r.status == "ok"]
    lines = [
        f"kernels {t.kernels}, analysed {t.analysed} "
        f"(failed {sum(r.status == 'failed' for r in runs)}, "
        f"timeout {sum(r.status == 'timeout' for r in runs)}, "
        f"memory {sum(r.status == 'memory' for r in runs)}, "
        f"missing {sum(r.status == 'missing' for r in runs)})",
        f"recall {t.main_found}/{t.main_total} = {_pct(t.recall)} (main problems at their line)",
        f"warnings {t.warnings}: right {t.right}, minor {t.minor}, wrong {t.wrong}, "
        f"unjudged {t.unjudged}; precision {_pct(t.precision)}, wrong {_pct(t.wrong_share)}",
        "wrong by rule: " + (", ".join(f"{k} {v}" for k, v in t.wrong_by_rule.items()) or "-"),
        "unjudged by rule: "
        + (", ".join(f"{k} {v}" for k, v in t.unjudged_by_rule.items()) or "-"),
    ]
    if t.mechanical:
        fixed = "" if t.fixed is None else (
            f", applied by --diff with outputs verified {t.fixed} ({_pct(t.fixed / t.mechanical)})"
        )  # fmt: skip
        lines.append(
            f"mechanical fixes (right warnings on a mechanical problem) {t.mechanical}: "
            f"automatic variant {t.automatic} ({_pct(t.automatic / t.mechanical)}){fixed}"
        )
        lines.append("  without an automatic variant: " + " ".join(
            f"{s.name}:{tag}" for s in scores for tag in s.mechanical if tag not in s.automatic
        ))  # fmt: skip
    if walls:
        lines.append(f"wall s: median {statistics.median(walls):.1f}, max {max(walls):.1f}; "
                     f"peak RSS MB: median {statistics.median(rss):.0f}, max {max(rss):.0f}")  # fmt: skip
    measured = [(r.name, f) for r in runs for f in r.findings if f.get("measured") is not None]
    if measured:
        faster = sum(f["measured"] > 1.0 and bool(f.get("verified")) for _, f in measured)
        lines.append(f"measured on the GPU: {len(measured)} findings' variants, {faster} faster "
                     "with outputs verified:")  # fmt: skip
        lines += [
            f"  {n} {f['rule']}:{f['line']} {f['severity']} estimated "
            f"{f['estimate'] if f['estimate'] is not None else '-'} measured {f['measured']:.3f}x"
            + ("" if f.get("verified") else " (outputs not verified)")
            for n, f in measured
        ]
    unj = [f"  {s.name} {tag}" for s in scores for tag in s.unjudged]
    if unj:
        lines.append("unjudged warnings (judge them in benchmarks/corpus/judged.toml):")
        lines += unj
    return "\n".join(lines)


def markdown(runs: list[Run], scores: list[corpus.KernelScore], header: str) -> str:
    by = {s.name: s for s in scores}
    rows = [header, "",
            "| kernel | status | wall s | peak MB | main found | missed | right | minor | wrong | unjudged |",
            "|---|---|---:|---:|---:|---|---|---|---|---|"]  # fmt: skip
    for r in runs:
        s = by.get(r.name)
        if s is None:
            continue
        status = r.status + (f" ({r.error[:120]})" if r.error and r.status != "ok" else "")
        rows.append(
            f"| {r.name} | {status} | {r.wall_s:.1f} | {r.peak_rss_mb:.0f} | "
            f"{s.main_found}/{s.main_total} | {', '.join(s.missed) or '-'} | "
            f"{' '.join(s.right) or '-'} | {' '.join(s.minor) or '-'} | "
            f"{' '.join(s.wrong) or '-'} | {' '.join(s.unjudged) or '-'} |"
        )
    return "\n".join(rows) + "\n"


def _shard(kernels: list[corpus.Kernel], shard: str | None) -> list[corpus.Kernel]:
    if not shard:
        return kernels
    k, n = (int(x) for x in shard.split("/"))
    if not 1 <= k <= n:
        raise ValueError(f"--shard {shard}: K must be 1..N")
    return [x for i, x in enumerate(kernels) if i % n == k - 1]


def cpu_sets(available: list[int], per_job: int, jobs: int) -> list[tuple[int, ...]]:
    """``jobs`` disjoint sets of ``per_job`` CPUs, the lowest numbers first, out of ``available``
    (this process's CPUs): one for each analysis running at a time, so that ``--jobs 8
    --cpus-per-job 2`` on 16 CPUs runs each analysis as on a 2-core machine of its own (issue 31's
    goals are per kernel on a 2-core machine), not on whichever CPUs the scheduler gives it.
    ValueError when there are not enough."""
    if per_job < 1:
        raise ValueError(f"--cpus-per-job {per_job}: give 1 or more")
    cpus = sorted(set(available))
    if per_job * jobs > len(cpus):
        raise ValueError(f"--cpus-per-job {per_job} with --jobs {jobs} needs {per_job * jobs} "
                         f"CPUs; this process has {len(cpus)}: lower --jobs")  # fmt: skip
    return [tuple(cpus[i * per_job : (i + 1) * per_job]) for i in range(jobs)]


def byte_compile() -> str:
    """Byte-compile the gpuadvise package the analyses import (this tree's: ``ROOT`` leads the
    children's path, :func:`_child_env`) and its bundled rules in place (their ``__pycache__``,
    ignored by git), as ``pip install`` does for an installed package: each analysis then loads
    them instead of compiling them from source, which it does every time where
    ``PYTHONDONTWRITEBYTECODE`` is set (the runner's machines: about 0.8 CPU-s an analysis).
    py_compile writes whatever that setting says. The line to print."""
    import compileall

    t0 = time.perf_counter()
    ok = all(
        compileall.compile_dir(str(d), quiet=1, workers=0)
        for d in (ROOT / "gpuadvise", ROOT / "rules")
        if d.is_dir()
    )
    return (f"bytecode: {ROOT / 'gpuadvise'} and its rules compiled in "
            f"{time.perf_counter() - t0:.1f} s"
            + ("" if ok else " (some modules failed: those compile in each analysis)"))  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--check", action="store_true",
                    help="compile each entry and check its spec (no trace, no rules)")  # fmt: skip
    ap.add_argument("--measure", action="store_true", help="measure variants (on a GPU)")
    ap.add_argument("--fixes", action="store_true",
                    help="also verify the combined fix (analyze --diff): the mechanical fixes' "
                         "share applied with outputs verified")  # fmt: skip
    ap.add_argument("--only", action="append", default=[], help="kernels whose name contains this")
    ap.add_argument("--jobs", type=int, default=1, help="analyses at a time (1)")
    ap.add_argument("--cpus-per-job", type=int, default=0, metavar="N",
                    help="pin each analysis to N CPUs of its own (0: not pinned, the default)")  # fmt: skip
    ap.add_argument("--shard", help="K/N: the K-th of N slices of the sorted kernels")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per kernel (300)")
    ap.add_argument("--max-rss-mb", type=float, default=6000.0, help="kill past this RSS (6000)")
    ap.add_argument("--gpu", default="H100", help="the device model (H100)")
    ap.add_argument("--out", type=Path, default=corpus.SRC / "_results", help="results folder")
    ap.add_argument(
        "--score",
        type=Path,
        help="score a saved results.json (or partial.jsonl) instead of analysing",
    )
    ap.add_argument("--markdown", type=Path, help="also write the per-kernel table here")
    ap.add_argument(
        "--profile",
        type=Path,
        help="write each analysis's cProfile here (benchmarks/corpus/profile_sum.py)",
    )
    ap.add_argument(
        "--bytecode",
        choices=("compile", "as-is"),
        default="compile",
        help="compile: gpuadvise's and the rules' modules byte-compiled once before the "
        "analyses, as pip install leaves them (default); as-is: as the environment has them "
        "(with PYTHONDONTWRITEBYTECODE and no .pyc, every analysis compiles ~370 modules)",
    )
    ap.add_argument("extra", nargs="*", help="more analyze options (after --)")
    opts = ap.parse_args(argv)
    try:
        c = corpus.load()
    except (corpus.ManifestError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    c_repos.update(c.repos)
    if opts.score:
        if opts.score.suffix == ".jsonl":  # partial.jsonl of a run that was cut
            runs = [Run(**json.loads(x)) for x in opts.score.read_text().splitlines() if x]
            header = f"{opts.score} (partial: {len(runs)} kernels)"
        else:
            doc = json.loads(opts.score.read_text())
            runs = [Run(**r) for r in doc["runs"]]
            header = doc["header"]
    else:
        chosen = [k for k in c.kernels if not opts.only or any(s in k.name for s in opts.only)]
        try:
            chosen = _shard(chosen, opts.shard)
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        if not chosen:
            print(f"error: no kernel matches {opts.only}", file=sys.stderr)
            return 2
        free: queue.Queue[tuple[int, ...]] = queue.Queue()
        if opts.cpus_per_job:
            try:
                sets = cpu_sets(sorted(os.sched_getaffinity(0)), opts.cpus_per_job, opts.jobs)
            except ValueError as e:
                print(f"error: {e}", file=sys.stderr)
                return 2
            for cpus in sets:
                free.put(cpus)
        runs = []
        if opts.bytecode == "compile":
            print(byte_compile(), flush=True)
        opts.out.mkdir(parents=True, exist_ok=True)
        partial = opts.out / "partial.jsonl"  # one line per kernel as it ends: a cut run keeps them
        partial.write_text("")

        def one(k: corpus.Kernel) -> Run:
            if not opts.cpus_per_job:
                r = analyse(k, opts)
            else:  # Linux: the calling thread's CPUs, which the analysis it starts inherits
                cpus = free.get()
                os.sched_setaffinity(0, cpus)
                try:
                    r = analyse(k, opts)
                finally:
                    free.put(cpus)
            with partial.open("a") as f:
                f.write(json.dumps(asdict(r)) + "\n")
            tags = " ".join(f"{f['rule']}:{f['line']}" for f in r.findings
                            if f["severity"] in ("warning", "error", "rule-error"))  # fmt: skip
            print(f"{r.name:55s} {r.status:7s} {r.wall_s:6.1f} s {r.peak_rss_mb:6.0f} MB  "
                  f"{tags} {r.error[:200]}", flush=True)  # fmt: skip
            return r

        with ThreadPoolExecutor(max_workers=max(1, opts.jobs)) as pool:
            runs = list(pool.map(one, chosen))
        when = dt.datetime.now().strftime("%Y-%m-%d %H:%M")
        load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
        header = (f"{when}, {platform.node()} ({os.cpu_count()} CPUs, load {load:.1f}), "
                  f"{'check' if opts.check else 'measured' if opts.measure else '--no-measure'}"
                  f"{' --fixes' if opts.fixes else ''}, "
                  f"--gpu {opts.gpu}, jobs {opts.jobs}, shard {opts.shard or 'all'}, "
                  f"timeout {opts.timeout:.0f} s, bytecode {opts.bytecode}"
                  + (f", pinned {opts.cpus_per_job} CPUs a job" if opts.cpus_per_job else ""))  # fmt: skip
        name = "check.json" if opts.check else "results.json"
        (opts.out / name).write_text(json.dumps(
            {"header": header, "runs": [asdict(r) for r in runs]}, indent=1))  # fmt: skip
        print(f"wrote {opts.out / name}")
    if opts.check:
        bad = [r for r in runs if r.status != "ok"]
        print(f"{len(runs) - len(bad)}/{len(runs)} specs check out")
        return 1 if bad else 0
    scores, t = score(c, runs)
    print(header)
    print(summary(runs, scores, t))
    if opts.markdown:
        opts.markdown.write_text(markdown(runs, scores, header))
    return 0 if all(r.status == "ok" for r in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
