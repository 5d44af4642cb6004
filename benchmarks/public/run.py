"""Run `gpuadvise analyze --json` on every kernel of the public suite (manifest.toml) and table
what it found against what a CUDA engineer expects, with wall time and peak RSS per kernel.

    python benchmarks/public/fetch.py                 # once: copy the sources into src/
    python benchmarks/public/run.py --no-measure      # this CPU machine, the projects' own sizes
    python benchmarks/public/run.py                   # on the GPU machine: findings measured
    python benchmarks/public/run.py --small --only reduce --timeout 120

Each kernel is one `python -m gpuadvise analyze` subprocess with the launch spec the manifest
gives (written to src/_specs/), a wall-clock timeout (--timeout) and a resident-memory limit
(--max-rss-mb, polled from /proc; the child is killed past it). Peak RSS is the child's own
(``os.wait4``'s rusage; nvcc's short-lived children are not in it). Results go to
``--out`` (default src/_results/): results.json and results.md (the table README.md quotes).
Exit 0 when every kernel ran (whatever it found), 1 when some timed out, ran out of memory or
failed, 2 on bad usage (sources not fetched, unknown --only).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
from fetch import CUBLAS_DIR, HERE, SRC, Repo, load_manifest, repo_dir  # noqa: E402

ROOT = HERE.parents[1]
SPECS = SRC / "_specs"
SPEC_KEYS = ("kernel", "grid", "block", "dynamic_smem", "nvcc_flags", "seed")


@dataclass
class Result:
    name: str
    kernel: str
    status: str  # ok | timeout | memory | failed | missing
    wall_s: float | None = None
    peak_rss_mb: float | None = None
    expected: list[str] = field(default_factory=list)
    found: list[dict[str, Any]] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)  # expected ids not reported
    unexpected: list[str] = field(default_factory=list)  # reported ids not expected
    error: str = ""
    command: str = ""


def _child_env() -> dict[str, str]:
    """This checkout first on the child's path, then whatever PYTHONPATH already holds (the
    device machine's wheels are installed with ``--target`` and found only through it)."""
    path = [str(ROOT), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path)}


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
        return "{ " + ", ".join(f"{k} = {_toml_value(x)}" for k, x in v.items()) + " }"
    raise TypeError(f"cannot write {v!r} to TOML")


def spec_text(entry: dict[str, Any], source: Path, args: dict[str, Any]) -> str:
    """The launch spec (gpuadvise's TOML format) of one manifest entry."""
    lines = [f"# {entry['name']}: written by benchmarks/public/run.py from manifest.toml",
             f"source = {_toml_value(str(source))}"]  # fmt: skip
    lines += [f"{k} = {_toml_value(entry[k])}" for k in SPEC_KEYS if k in entry]
    lines.append("\n[args]")
    lines += [f"{k} = {_toml_value(v)}" for k, v in args.items()]
    lines.append("\n[buffers]")
    lines += [f"{k} = {_toml_value(v)}" for k, v in entry.get("buffers", {}).items()]
    return "\n".join(lines) + "\n"


def command_for(entry: dict[str, Any], repo: Repo, *, small: bool, measure: bool,
                sample_ctas: str | None) -> tuple[list[str], Path]:  # fmt: skip
    """The analyze command of one entry, and its source file (FileNotFoundError if not fetched)."""
    base = repo_dir(repo.key)
    source = base / entry["path"]
    if not source.is_file():
        raise FileNotFoundError(f"{source} not fetched")
    args = dict(entry.get("args", {}))
    if small:
        args.update(entry.get("small", {}))
    SPECS.mkdir(parents=True, exist_ok=True)
    spec = SPECS / (entry["name"].replace("/", "__") + (".small" if small else "") + ".toml")
    spec.write_text(spec_text(entry, source, args))
    cmd = [sys.executable, "-m", "gpuadvise", "analyze", str(source), "--spec", str(spec),
           "--json", "--measure" if measure else "--no-measure"]  # fmt: skip
    for inc in entry.get("include", []):
        cmd += ["-I", str(base / inc)]
    cmd += ["-I", str(source.parent)]
    if repo.cublas:
        cmd += ["-I", str(CUBLAS_DIR)]
    if sample_ctas:
        cmd += ["--sample-ctas", sample_ctas]
    return cmd, source


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
    """(status, wall s, peak RSS MB, stdout, stderr) of one analyze run."""
    t0 = time.monotonic()
    # the run's own files: two runs at once (the test suite's workers) must not share them
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        p = subprocess.Popen(
            cmd, stdout=out, stderr=err, cwd=ROOT, start_new_session=True, env=_child_env()
        )
        status = ""
        while True:
            pid, code, ru = os.wait4(p.pid, os.WNOHANG)
            if pid:
                break
            wall = time.monotonic() - t0
            if not status and wall > timeout_s:
                status = "timeout"
            elif not status and _rss_mb(p.pid) > max_rss_mb:
                status = "memory"
            if status:
                os.killpg(p.pid, signal.SIGKILL)
                pid, code, ru = os.wait4(p.pid, 0)
                break
            time.sleep(0.2)
        wall = time.monotonic() - t0
        out.seek(0)
        err.seek(0)
        out_text, err_text = out.read(), err.read()
    p.returncode = os.waitstatus_to_exitcode(code)
    rss = ru.ru_maxrss / 1024  # KiB on Linux
    if not status:
        status = "ok" if p.returncode == 0 else "failed"
    return status, wall, rss, out_text, err_text


def summarise(doc: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    for f in doc.get("findings", []):
        est = f.get("estimated_speedup") or {}
        meas = f.get("measured_speedup") or {}
        out.append({
            "rule": f.get("rule"), "line": f.get("line"), "severity": f.get("severity"),
            "estimate": est.get("speedup"), "estimate_kind": est.get("kind"),
            "measured": meas.get("speedup") if isinstance(meas, dict) else meas,
            "error": bool(f.get("error")),
        })  # fmt: skip
    return out


def analyze_entry(entry: dict[str, Any], repo: Repo, opts: argparse.Namespace) -> Result:
    r = Result(entry["name"], entry["kernel"], "missing", expected=list(entry.get("expect", [])))
    try:
        cmd, _ = command_for(entry, repo, small=opts.small, measure=opts.measure,
                             sample_ctas=opts.sample_ctas)  # fmt: skip
    except FileNotFoundError as e:
        r.error = f"{e}; run benchmarks/public/fetch.py"
        return r
    if repo.cublas and not (CUBLAS_DIR / "cublas_v2.h").is_file():
        r.error = "needs cuBLAS headers; run fetch.py with --cublas-wheel or --cublas-include"
        return r
    r.command = " ".join(cmd[1:]).replace(str(ROOT) + "/", "")
    r.status, r.wall_s, r.peak_rss_mb, out, err = run_one(cmd, opts.timeout, opts.max_rss_mb)
    if r.status == "ok":
        doc = json.loads(out)
        r.found = summarise(doc)
        # notes (quiet by default: estimated and measured <= 1.05x) neither meet an expectation
        # nor count as unexpected
        ids = {f["rule"] for f in r.found if not f["error"] and f.get("severity") != "note"}
        r.missing = sorted(set(r.expected) - ids)
        r.unexpected = sorted(ids - set(r.expected))
        errs = [f["rule"] for f in r.found if f["error"]]
        if errs:
            r.error = "rule errors: " + ", ".join(errs)
    else:
        r.error = (err.strip().splitlines() or [""])[-1][:300]
    return r


def markdown(results: list[Result], header: str) -> str:
    rows = [header, "",
            "| kernel | status | wall s | peak RSS MB | found (rule:line estimate/measured) "
            "| expected, missing | not expected |",
            "|---|---|---:|---:|---|---|---|"]  # fmt: skip
    for r in results:
        found = " ".join(
            f"{f['rule']}:{f['line']} "
            + (f"{f['estimate']:.2f}x" if isinstance(f["estimate"], int | float) else "-")
            + (f"/{f['measured']:.2f}x" if isinstance(f["measured"], int | float) else "")
            for f in r.found
        )
        miss = (", ".join(r.missing) or "none") if r.status == "ok" else "not evaluated"
        status = r.status + (f" ({r.error})" if r.error and r.status != "ok" else "")
        rows.append(
            f"| {r.name} | {status} | {r.wall_s or 0:.1f} | {r.peak_rss_mb or 0:.0f} | {found or '-'} "
            f"| {', '.join(r.expected) or '(silent)'}; missing: {miss} | {', '.join(r.unexpected) or '-'} |"
        )  # fmt: skip
    return "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--measure", dest="measure", action="store_true", default=None,
                    help="measure each finding's variant (default: when a GPU is here)")  # fmt: skip
    ap.add_argument("--no-measure", dest="measure", action="store_false")
    ap.add_argument("--small", action="store_true", help="the manifest's small sizes")
    ap.add_argument("--only", action="append", default=[], help="kernels whose name contains this")
    ap.add_argument("--timeout", type=float, default=300.0, help="seconds per kernel (300)")
    ap.add_argument("--max-rss-mb", type=float, default=8192.0, help="kill past this RSS (8192)")
    ap.add_argument("--sample-ctas", help="passed to analyze (default: analyze's own)")
    ap.add_argument("--out", type=Path, default=SRC / "_results", help="folder for results.*")
    opts = ap.parse_args(argv)
    if opts.measure is None:
        opts.measure = _have_gpu()
    repos, kernels = load_manifest()
    chosen = [k for k in kernels if not opts.only or any(s in k["name"] for s in opts.only)]
    if not chosen:
        print(
            f"error: no kernel matches {opts.only}; see the names in manifest.toml", file=sys.stderr
        )
        return 2
    results = []
    for entry in chosen:
        r = analyze_entry(entry, repos[entry["repo"]], opts)
        results.append(r)
        ids = " ".join(f"{f['rule']}:{f['line']}" for f in r.found)
        print(f"{r.name:45s} {r.status:8s} {r.wall_s or 0:7.1f} s {r.peak_rss_mb or 0:7.0f} MB  "
              f"{ids}  missing: {','.join(r.missing) or '-'} {r.error}", flush=True)  # fmt: skip
    when = dt.datetime.now().strftime("%Y-%m-%d %H:%M")
    header = (f"{when}, {platform.node()} ({os.cpu_count()} CPUs), "
              f"{'measured' if opts.measure else '--no-measure'}, "
              f"{'small sizes' if opts.small else 'default sizes'}, timeout {opts.timeout:.0f} s, "
              f"RSS limit {opts.max_rss_mb:.0f} MB")  # fmt: skip
    opts.out.mkdir(parents=True, exist_ok=True)
    (opts.out / "results.json").write_text(json.dumps(
        {"header": header, "results": [asdict(r) for r in results]}, indent=1))  # fmt: skip
    (opts.out / "results.md").write_text(markdown(results, header))
    print(f"wrote {opts.out / 'results.md'}")
    return 0 if all(r.status == "ok" for r in results) else 1


def _have_gpu() -> bool:
    try:
        return subprocess.run(["nvidia-smi", "-L"], capture_output=True).returncode == 0
    except OSError:
        return False


if __name__ == "__main__":
    sys.exit(main())
