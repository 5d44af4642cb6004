"""What the CUDA tools alone cost the test suite, and the wall-clock floor that sets (issue 30
section 3: the README's test command in <= 6 minutes on the 2-core machine).

Runs a pytest command with ``nvcc`` and ``nvdisasm`` wrapped (scripts first on ``PATH``, so
every run is seen: the test processes', the ``python -m gpuadvise`` processes the tests start,
the forked children's), each run logged with its CPU (``/usr/bin/time``), its test
(``PYTEST_CURRENT_TEST``) and a key of what it made: nvcc's flags (temporary folders left out)
and its source's bytes, nvdisasm's options and its cubin's bytes. Then prints, per tool, the
runs and CPU, how many were of a content the run had already compiled or disassembled, the
modules by the tools' CPU, and the floor: the tools' CPU of the distinct contents alone over
the CPUs, against the goal. The wrapped runs are what the suite costs with the tools' own start
included: nvcc's ``cicc`` parsing ``cuda_runtime.h`` and nvdisasm's set-up for the architecture
are paid again by every run, whatever the kernel's size (docs/testing.md).

    .venv/bin/python benchmarks/suite_tools.py [--log F] [--goal-min 6] [-- PYTEST ARGS]
    .venv/bin/python benchmarks/suite_tools.py --summary F      # a saved log again

Without PYTEST ARGS it runs the README's command (``-q -n auto --dist loadgroup
--hypothesis-profile=ci``, ``CI=1``). Needs ``/usr/bin/time`` (GNU time) and the tools the
suite itself finds.
"""

from __future__ import annotations

import argparse
import collections
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
README_ARGS = ["-q", "-n", "auto", "--dist", "loadgroup", "--hypothesis-profile=ci"]

# The wrapper: the run's key (flags without paths in the temporary folder, then the input's
# bytes), timed.
# The input is the last argument that names a file (nvcc's source, nvdisasm's cubin).
WRAPPER = r"""#!/bin/bash
input=""
for a in "$@"; do [ -f "$a" ] && input="$a"; done
flags=$(for a in "$@"; do case "$a" in @@ TMP/*|"$input") ;; *) printf '%s ' "$a";; esac; done)
key=$( { printf '%s' "$flags"; [ -n "$input" ] && cat "$input"; } | sha1sum | cut -c1-16)
test="${PYTEST_CURRENT_TEST:--}"
exec /usr/bin/time -a -o "$SUITE_TOOLS_LOG" \
    -f "@@ TOOL	%U	%S	${test//%/%%}	$key" "@@ REAL" "$@"
"""


def _wrap(folder: Path) -> None:
    """``nvcc`` and ``nvdisasm`` wrappers in ``folder`` around the ones ``PATH`` finds now."""
    for tool in ("nvcc", "nvdisasm"):
        real = shutil.which(tool) or _wheel_tool(tool)
        if real is None:
            raise SystemExit(f"error: {tool} not found; install the toolkit extra")
        script = WRAPPER.replace("@@ TOOL", tool).replace("@@ REAL", real)
        script = script.replace("@@ TMP", tempfile.gettempdir())
        path = folder / tool
        path.write_text(script)
        path.chmod(0o755)


def _wheel_tool(tool: str) -> str | None:
    """The toolkit wheels' copy of ``tool`` (nvdisasm comes from them where CUDA has none)."""
    sys.path.insert(0, str(ROOT))
    from gpuadvise.toolchain.find import find_toolchain

    found = getattr(find_toolchain(), tool, None)
    return None if found is None else str(found)


def read_log(path: Path) -> list[tuple[str, float, str, str]]:
    """(tool, CPU seconds, test id, key) of each logged run; lines GNU time adds (a tool's
    non-zero exit) are skipped."""
    rows = []
    for line in path.read_text(errors="replace").splitlines():
        f = line.split("\t")
        if len(f) != 5 or f[0] not in ("nvcc", "nvdisasm"):
            continue
        rows.append((f[0], float(f[1]) + float(f[2]), f[3], f[4]))
    return rows


def summary(rows: list[tuple[str, float, str, str]], cpus: int, goal_min: float) -> str:
    out = []
    seen: set[tuple[str, str]] = set()
    tot: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0, 0, 0.0])
    by_mod: dict[str, list[float]] = collections.defaultdict(lambda: [0, 0.0])
    for tool, cpu, test, key in rows:
        t = tot[tool]
        t[0] += 1
        t[1] += cpu
        if (tool, key) in seen:
            t[2] += 1
            t[3] += cpu
        seen.add((tool, key))
        m = by_mod[test.split("::")[0]]
        m[0] += 1
        m[1] += cpu
    distinct = 0.0
    for tool, (n, cpu, again, again_cpu) in sorted(tot.items()):
        out.append(
            f"{tool:9s} {int(n):5d} runs {cpu:7.1f} CPU-s ({cpu / max(n, 1):.2f} a run); "
            f"{int(again)} of a content already made, {again_cpu:.1f} CPU-s"
        )
        distinct += cpu - again_cpu
    floor_min = distinct / cpus / 60
    out.append(
        f"the tools' CPU on distinct contents alone: {distinct:.0f} CPU-s = {floor_min:.1f} "
        f"minutes on {cpus} CPUs, before any Python (goal {goal_min:g} minutes: "
        + ("over it" if floor_min > goal_min else f"{goal_min - floor_min:.1f} left for the rest")
        + ")"
    )
    out.append("modules by the tools' CPU (runs, CPU-s):")
    for name, (n, cpu) in sorted(by_mod.items(), key=lambda kv: -kv[1][1])[:25]:
        out.append(f"  {name:60s} {int(n):4d} {cpu:7.1f}")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--log", type=Path, help="the tools' log (default: a temporary file)")
    ap.add_argument("--summary", type=Path, help="summarise this saved log; run nothing")
    ap.add_argument("--goal-min", type=float, default=6.0, help="the goal, minutes (6)")
    ap.add_argument("--cpus", type=int, default=os.cpu_count() or 1, help="CPUs (this machine's)")
    ap.add_argument("pytest_args", nargs="*", help="pytest's arguments (after --)")
    opts = ap.parse_args(argv)
    if opts.summary is not None:
        print(summary(read_log(opts.summary), opts.cpus, opts.goal_min))
        return 0
    if not Path("/usr/bin/time").is_file():
        print("error: /usr/bin/time (GNU time) is needed; apt-get install time", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="suite-tools-") as tmp:
        folder = Path(tmp)
        _wrap(folder)
        log = (opts.log or folder / "tools.log").resolve()
        log.unlink(missing_ok=True)
        env = {**os.environ, "PATH": f"{folder}{os.pathsep}{os.environ.get('PATH', '')}",
               "SUITE_TOOLS_LOG": str(log), "CI": "1"}  # fmt: skip
        cmd = [sys.executable, "-m", "pytest", *(opts.pytest_args or README_ARGS)]
        rc = subprocess.run(cmd, cwd=ROOT, env=env).returncode
        print(summary(read_log(log), opts.cpus, opts.goal_min))
    return rc


if __name__ == "__main__":
    sys.exit(main())
