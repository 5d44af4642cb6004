"""Where the test suite's CPU goes: a pytest plugin that records, per test, the CPU of the test
process and of its children, the children's CPU per tool (nvcc, nvdisasm, ``python -m ...``),
the compile cache's hits and misses, and every real nvcc compile with its source's content hash
and its flags' hash; and a summary of the records (issue 30 section 3).

On the shared 2-core machine the wall clock is mostly waiting: compare CPU, never wall. Run one
process (no ``-n``), the plugin from this folder::

    CI=1 PYTHONPATH=benchmarks SUITE_CPU_OUT=/tmp/cpu.jsonl .venv/bin/python -m pytest -q \\
        -p suite_cpu tests/analyze/test_fix.py
    .venv/bin/python benchmarks/suite_cpu.py /tmp/cpu.jsonl

The summary: the totals, the children's CPU by tool, the compiles of a content (and flags)
already compiled in the run under another path (a kernel written to a new folder compiles
again: the compile cache's key holds the path, which the line table names), the modules and
the tests by CPU. Each test's record also holds its system time (``self_sys``, ``child_sys``),
the test process's minor page faults (``faults``) and the pytest-xdist worker (``worker``), so
that a whole run under ``-n`` can write one file (each record is one appended line). A test's
record includes its fixtures' setup and teardown (a module-scoped fixture counts in the
module's first test).
"""

from __future__ import annotations

import collections
import functools
import hashlib
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

_OUT = os.environ.get("SUITE_CPU_OUT", "suite_cpu.jsonl")
_cur: dict[str, Any] = {}


def _child_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _tool(proc: subprocess.Popen[Any]) -> str:
    args = proc.args
    argv = [str(a) for a in args] if isinstance(args, (list, tuple)) else str(args).split()
    name = os.path.basename(argv[0]) if argv else "?"
    if name.startswith("python"):
        name = "python " + " ".join(argv[1:3])
    return name


def _timed(method: Any) -> Any:
    """``Popen.communicate``/``wait`` charging the children's CPU they reap to the tool."""

    def timed(self: subprocess.Popen[Any], *a: Any, **k: Any) -> Any:
        if getattr(self, "_suite_cpu", False) or self.returncode is not None:
            return method(self, *a, **k)  # communicate calls wait; run() waits after it
        self._suite_cpu = True  # type: ignore[attr-defined]
        c0 = _child_cpu()
        try:
            return method(self, *a, **k)
        finally:
            self._suite_cpu = False  # type: ignore[attr-defined]
            if _cur:
                d = _cur.setdefault("tools", {}).setdefault(_tool(self), [0, 0.0])
                d[0] += 1
                d[1] += _child_cpu() - c0

    return timed


def _install() -> None:
    subprocess.Popen.communicate = _timed(subprocess.Popen.communicate)  # type: ignore[method-assign]
    subprocess.Popen.wait = _timed(subprocess.Popen.wait)  # type: ignore[method-assign]
    from gpuadvise.toolchain import compile as comp

    run_nvcc, lookup = comp._run_nvcc, comp.lookup

    def counted_nvcc(src: Path, flags: Any, *a: Any, **k: Any) -> Any:
        c0 = _child_cpu()
        try:
            return run_nvcc(src, flags, *a, **k)
        finally:
            if _cur:
                try:
                    data = Path(src).read_bytes()
                except OSError:
                    data = b""
                _cur.setdefault("nvcc", []).append(
                    [
                        str(src),
                        hashlib.sha256(data).hexdigest()[:16],
                        hashlib.sha256(json.dumps(list(flags)).encode()).hexdigest()[:8],
                        round(_child_cpu() - c0, 3),
                    ]
                )

    def counted_lookup(root: Path, manifest: Path) -> Any:
        hit = lookup(root, manifest)
        if _cur:
            key = "hits" if hit is not None else "misses"
            _cur[key] = _cur.get(key, 0) + 1
        return hit

    comp._run_nvcc = counted_nvcc
    comp.lookup = counted_lookup
    _count_disassemblies()
    _count_analyses()


def _count_disassemblies() -> None:
    """Each disassembler run of the test process (``sass._run``): its mode (``plr`` for the life
    ranges, ``sass`` for the SASS alone), the cubin and its CPU, so that a cubin read in both
    modes (the SASS first, the life ranges in a second run, where one ``-plr`` run gives both)
    shows. Runs in the processes a test starts are not seen."""
    from gpuadvise.toolchain import sass

    real = sass._run

    def counted(cmd: Any) -> Any:
        c0 = _child_cpu()
        try:
            return real(cmd)
        finally:
            if _cur:
                argv = [str(a) for a in cmd]
                mode = "plr" if "--print-life-ranges" in argv else "sass"
                fun = argv[argv.index("-fun") + 1] if "-fun" in argv else ""
                _cur.setdefault("disasm", []).append(
                    [mode, argv[-1] + (f"#fun{fun}" if fun else ""), round(_child_cpu() - c0, 3)]
                )

    sass._run = counted


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def _count_analyses() -> None:
    """Each ``analyze_kernel`` call (the pipeline: compile, SASS, trace, models) with the CPU it
    took and two keys: its arguments (the source by path) and the same with the source by
    content, so that an analysis made again in the run (by path: a module fixture or a cache
    would serve it; by content: a text written to another folder) shows."""
    from gpuadvise.analyze import pipeline

    real = pipeline.analyze_kernel

    @functools.wraps(real)  # its signature: tests read its parameters (inspect.signature)
    def counted(spec: Any, device: Any, options: Any, *a: Any, **k: Any) -> Any:
        c0 = _cpu()
        try:
            return real(spec, device, options, *a, **k)
        finally:
            if _cur:
                try:
                    data = Path(spec.source).read_bytes()
                except OSError:
                    data = b""
                rest = repr((spec.kernel, spec.launch, spec.args, spec.buffers, spec.nvcc_flags,
                             spec.seed, spec.constants, spec.max_instructions, device.name,
                             getattr(options, "arch", None), getattr(options, "extra_flags", None),
                             a, sorted(k.items(), key=lambda kv: kv[0])))  # fmt: skip
                by_path = hashlib.sha256((str(spec.source) + rest).encode()).hexdigest()[:16]
                by_text = hashlib.sha256(data + rest.encode()).hexdigest()[:16]
                _cur.setdefault("analyses", []).append(
                    [str(spec.source), spec.kernel, by_path, by_text, round(_cpu() - c0, 3)]
                )

    for mod in list(sys.modules.values()):  # the modules that imported it already
        if getattr(mod, "analyze_kernel", None) is real:
            mod.analyze_kernel = counted  # type: ignore[attr-defined]


def pytest_configure(config: Any) -> None:
    _install()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: Any, nextitem: Any) -> Any:
    _cur.clear()
    _cur["id"] = item.nodeid
    _cur["worker"] = os.environ.get("PYTEST_XDIST_WORKER", "")
    t0, w0 = os.times(), time.perf_counter()
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    yield
    t1 = os.times()
    _cur["self_sys"] = round(t1.system - t0.system, 3)
    _cur["child_sys"] = round(t1.children_system - t0.children_system, 3)
    _cur["faults"] = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0
    _cur["self"] = round(t1.user - t0.user + t1.system - t0.system, 3)
    _cur["child"] = round(
        t1.children_user - t0.children_user + t1.children_system - t0.children_system, 3
    )
    _cur["wall"] = round(time.perf_counter() - w0, 3)
    with open(_OUT, "a") as f:
        f.write(json.dumps(_cur) + "\n")
    _cur.clear()


def summary(rows: list[dict[str, Any]], top: int = 20) -> str:
    out = []
    own = sum(r["self"] for r in rows)
    child = sum(r["child"] for r in rows)
    out.append(f"{len(rows)} tests: {own:.0f} s CPU in the test process, {child:.0f} s in children")
    own_sys = sum(r.get("self_sys", 0.0) for r in rows)
    child_sys = sum(r.get("child_sys", 0.0) for r in rows)
    faults = sum(r.get("faults", 0) for r in rows)
    out.append(
        f"  of which system time: {own_sys:.0f} s in the test process ({faults} minor page "
        f"faults), {child_sys:.0f} s in children"
    )
    tools: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
    for r in rows:
        for t, (n, c) in r.get("tools", {}).items():
            tools[t][0] += n
            tools[t][1] += c
    for t, (n, c) in sorted(tools.items(), key=lambda kv: -kv[1][1])[:top]:
        out.append(f"  {t[:60]:60s} {int(n):5d} runs {c:7.1f} s")
    by: dict[tuple[str, str], list[tuple[str, float, str]]] = collections.defaultdict(list)
    for r in rows:
        for path, digest, flags, cpu in r.get("nvcc", []):
            by[(digest, flags)].append((path, cpu, r["id"]))
    runs = sum(len(v) for v in by.values())
    again = [(k, v) for k, v in by.items() if len(v) > 1]
    again_cpu = sum(c for _, v in again for _, c, _ in v[1:])
    out.append(
        f"nvcc compiles: {runs} of {len(by)} contents (with their flags); "
        f"{sum(len(v) - 1 for _, v in again)} again, {again_cpu:.0f} s"
    )
    for _, v in sorted(again, key=lambda kv: -sum(c for _, c, _ in kv[1][1:]))[:top]:
        names = sorted({p.rsplit("/", 1)[-1] for p, _, _ in v})[:3]
        mods = collections.Counter(i.split("::")[0] for _, _, i in v).most_common(3)
        out.append(f"  {len(v):3d}x {sum(c for _, c, _ in v):6.1f} s {names} {dict(mods)}")
    out.extend(_both_modes(rows, top))
    out.extend(_analyses_again(rows, top))
    mod: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0, 0.0, 0])
    for r in rows:
        m = mod[r["id"].split("::")[0]]
        m[0] += 1
        m[1] += r["self"]
        m[2] += r["child"]
        m[3] += len(r.get("nvcc", []))
    out.append("modules by CPU (tests, process s, children s, nvcc runs):")
    for name, (n, s, c, k) in sorted(mod.items(), key=lambda kv: -(kv[1][1] + kv[1][2]))[:top]:
        out.append(f"  {name:58s} {int(n):4d} {s:7.1f} {c:7.1f} {int(k):4d}")
    out.append("tests by CPU:")
    for r in sorted(rows, key=lambda r: -(r["self"] + r["child"]))[:top]:
        out.append(f"  {r['self'] + r['child']:6.1f} s {r['id'][:110]}")
    return "\n".join(out)


def _both_modes(rows: list[dict[str, Any]], top: int) -> list[str]:
    """The cubins the test processes disassembled in both modes (the SASS alone, then the life
    ranges: two nvdisasm runs where a first ``-plr`` run would have served both), with the CPU
    of their SASS-alone runs and the modules that ran each mode."""
    runs: dict[str, list[tuple[str, float, str]]] = collections.defaultdict(list)
    for r in rows:
        for mode, cubin, cpu in r.get("disasm", []):
            runs[cubin].append((mode, cpu, r["id"].split("::")[0]))
    both = {c: v for c, v in runs.items() if {m for m, _, _ in v} == {"plr", "sass"}}
    n = sum(len(v) for v in runs.values())
    cpu = sum(c for v in both.values() for m, c, _ in v if m == "sass")
    out = [
        f"disassembler runs in the test processes: {n} on {len(runs)} cubins; "
        f"{len(both)} cubins read in both modes (their SASS-alone runs {cpu:.0f} s)"
    ]
    mods = collections.Counter(m for v in both.values() for _, _, m in v)
    for m, k in mods.most_common(top):
        out.append(f"  {k:3d} runs {m}")
    return out


def _analyses_again(rows: list[dict[str, Any]], top: int) -> list[str]:
    """The analyses made more than once in the run with the same arguments (by path), and the
    CPU of the repeats; then the same by content (a text analysed again under another path)."""
    out = []
    for label, col in (("by path", 2), ("by content", 3)):
        by: dict[str, list[tuple[str, str, float, str]]] = collections.defaultdict(list)
        for r in rows:
            for an in r.get("analyses", []):
                by[an[col]].append((an[0], an[1], an[4], r["id"]))
        again = [v for v in by.values() if len(v) > 1]
        cpu = sum(c for v in again for _, _, c, _ in v[1:])
        n = sum(len(v) for v in by.values())
        out.append(f"analyses ({label}): {n} of {len(by)} keys; {n - len(by)} again, {cpu:.0f} s")
        for v in sorted(again, key=lambda v: -sum(c for _, _, c, _ in v[1:]))[:top]:
            mods = collections.Counter(i.split("::")[0].rsplit("/", 1)[-1] for *_, i in v)
            name = f"{v[0][0].rsplit('/', 1)[-1]}:{v[0][1]}"
            again_cpu = sum(c for _, _, c, _ in v[1:])
            out.append(f"  {len(v):3d}x {again_cpu:6.1f} s {name[:50]} {dict(mods.most_common(3))}")
    return out


def main(argv: list[str] | None = None) -> int:
    files = argv if argv is not None else sys.argv[1:]
    if not files:
        print(__doc__)
        return 2
    rows = [json.loads(line) for f in files for line in Path(f).read_text().splitlines() if line]
    print(summary(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
