"""`gpuadvise analyze --no-measure` on public kernels at realistic sizes: wall time and peak RSS.

Goal (issue 17): each kernel finishes in <= 30 s and <= 2 GB on the 2-core CPU machine.

The kernels' code is not in this repository. It is copied at run time from the mirrors the search
tool's ``fetch`` makes (``/work/.mirror/<owner>+<name>/repo``, or ``--mirrors DIR``) into
``benchmarks/public_src/`` (ignored by git): each kernel's ``__global__`` function is cut out of its
file (the files include cuBLAS and OpenMP headers the toolkit wheels lack) and put in a small .cu
with what it needs. The launch specs are written beside it. Kernels whose mirror is absent are
skipped.

Usage: python benchmarks/public_speed.py [--only NAME ...] [--extra ARG ...] [--json FILE]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC_DIR = ROOT / "benchmarks" / "public_src"
GOAL_WALL_S = 30.0
GOAL_RSS_MB = 2048.0


@dataclass(frozen=True)
class Public:
    """One public kernel: where its code is (repo, commit-ish, path, licence), which function to
    cut out, what to put before it, and its launch (a TOML spec body)."""

    name: str
    repo: str  # owner+name under the mirrors folder
    path: str
    licence: str
    function: str  # the __global__ function (template) to cut out
    prelude: str
    spec: str  # TOML lines after source/kernel


LLMC_PRELUDE = "#include <cuda_runtime.h>\n#include <math.h>\n"

KERNELS: tuple[Public, ...] = (
    Public(
        "llmc_layernorm1",
        "karpathy+llm.c",
        "dev/cuda/layernorm_forward.cu",
        "MIT",
        "layernorm_forward_kernel1",
        LLMC_PRELUDE,
        'kernel = "layernorm_forward_kernel1"\ngrid = "ceil_div(N, 256)"\nblock = 256\n'
        "[args]\nN = 8192\nC = 768\n"
        '[buffers]\nout = "float[N*C]"\nmean = "float[N]"\nrstd = "float[N]"\n'
        'inp = "float[N*C]"\nweight = "float[C]"\nbias = "float[C]"\n',
    ),
    Public(
        "llmc_softmax1",
        "karpathy+llm.c",
        "dev/cuda/softmax_forward.cu",
        "MIT",
        "softmax_forward_kernel1",
        LLMC_PRELUDE,
        'kernel = "softmax_forward_kernel1"\ngrid = "ceil_div(N, 256)"\nblock = 256\n'
        "[args]\nN = 2048\nC = 50257\n"
        '[buffers]\nout = "float[N*C]"\ninp = "float[N*C]"\n',
    ),
    Public(
        "llmc_matmul1",
        "karpathy+llm.c",
        "dev/cuda/matmul_forward.cu",
        "MIT",
        "matmul_forward_kernel1",
        LLMC_PRELUDE,
        'kernel = "matmul_forward_kernel1"\ngrid = "ceil_div(BT, 16), ceil_div(OC, 16)"\n'
        'block = "16x16"\n[args]\nBT = 8192\nC = 768\nOC = 3072\n'
        '[buffers]\nout = "float[BT*OC]"\ninp = "float[BT*C]"\nweight = "float[OC*C]"\n'
        'bias = "float[OC]"\n',
    ),
    Public(
        "cudasamples_reduce6",
        "NVIDIA+cuda-samples",
        "Samples/2_Concepts_and_Techniques/reduction/reduction_kernel.cu",
        "BSD-3-Clause",
        "reduce6",
        "",  # the whole file (it includes only CUDA headers)
        'kernel = "reduce6<int, 256, true>"\ngrid = 64\nblock = 256\ndynamic_smem = 1024\n'
        "[args]\nn = 16777216\n"
        '[buffers]\ng_idata = "int[n]"\ng_odata = { type = "int", count = 64, fill = "zeros" }\n',
    ),
    Public(
        "sgemm_naive_1024",
        "siboehm+SGEMM_CUDA",
        "src/kernels/1_naive.cuh",
        "MIT",
        "sgemm_naive",
        "#include <cuda_runtime.h>\n",
        'kernel = "sgemm_naive"\ngrid = "ceil_div(M, 32), ceil_div(N, 32)"\nblock = "32x32"\n'
        "[args]\nM = 1024\nN = 1024\nK = 1024\nalpha = 1.0\nbeta = 0.0\n"
        '[buffers]\nA = "float[M*K]"\nB = "float[K*N]"\nC = "float[M*N]"\n',
    ),
)


def cut_function(text: str, name: str) -> str:
    """The text of the ``__global__`` function ``name`` (with a template header on the line before
    it, if any), by brace matching from its signature."""
    m = re.search(
        r"(template\s*<[^>]*>\s*)?__global__\s+void\s+" + re.escape(name) + r"\s*\(", text
    )
    if m is None:
        raise SystemExit(f"error: no __global__ {name} found; is the mirror at the right commit?")
    i = text.index("{", m.end())
    depth = 0
    for j in range(i, len(text)):
        depth += {"{": 1, "}": -1}.get(text[j], 0)
        if depth == 0:
            return text[m.start() : j + 1] + "\n"
    raise SystemExit(f"error: unbalanced braces after {name}")


def prepare(k: Public, mirrors: Path) -> Path | None:
    """Write ``<name>.cu`` and ``<name>.toml`` under :data:`SRC_DIR`; None when the mirror is absent."""
    repo = mirrors / k.repo / "repo"
    if not repo.exists():
        return None
    text = subprocess.run(
        ["git", "-C", str(repo), "show", f"HEAD:{k.path}"], capture_output=True, text=True
    )
    if text.returncode != 0:
        return None
    commit = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    body = text.stdout if not k.prelude else k.prelude + cut_function(text.stdout, k.function)
    SRC_DIR.mkdir(parents=True, exist_ok=True)
    header = f"// {k.repo.replace('+', '/')}@{commit} {k.path} ({k.licence}); not committed\n"
    cu = SRC_DIR / f"{k.name}.cu"
    cu.write_text(header + body)
    (SRC_DIR / f"{k.name}.toml").write_text(f'source = "{cu.name}"\n{k.spec}')
    return cu


@dataclass
class Result:
    name: str
    wall_s: float
    cpu_s: float  # user + system: what a loaded machine does not inflate
    peak_rss_mb: float
    rc: int
    timings_s: dict
    findings: list[str]
    error: str
    ctas_traced: int = 0
    trace_error: str | None = None  # why the memory models are missing (the emulator's error)

    @property
    def ok(self) -> bool:
        return (
            self.rc == 0
            and self.trace_error is None  # a run without its memory models is no success
            and self.wall_s <= GOAL_WALL_S
            and self.peak_rss_mb <= GOAL_RSS_MB
        )


def _limit_memory(limit_gb: float) -> None:
    """In the child: an address-space limit, so that a run over it fails (MemoryError) rather than
    taking a shared machine's memory."""
    import resource

    if limit_gb > 0:
        n = int(limit_gb * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (n, n))


def run_one(cu: Path, extra: list[str], timeout_s: float, limit_gb: float) -> Result:
    cmd = [
        sys.executable,
        "-m",
        "gpuadvise",
        "analyze",
        str(cu),
        "--spec",
        str(cu.with_suffix(".toml")),
    ]
    cmd += ["--gpu", "H100", "--no-measure", "--json", *extra]
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: _limit_memory(limit_gb),
    )
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
    wall = time.perf_counter() - t0
    # peak RSS of the finished child (the largest of the children waited for so far: run one
    # kernel per process, or read it before the next)
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    rss_mb = usage.ru_maxrss / 1024.0
    cpu_s = usage.ru_utime + usage.ru_stime
    try:
        doc = json.loads(out)
    except json.JSONDecodeError:
        doc = {}
    findings = [
        f"{f['rule']}" for f in doc.get("findings", []) if isinstance(f, dict) and "rule" in f
    ]
    return Result(
        cu.stem,
        wall,
        cpu_s,
        rss_mb,
        proc.returncode,
        doc.get("timings_s", {}),
        findings,
        err.strip()[-300:],
        int((doc.get("emulation") or {}).get("ctas_traced") or 0),
        (doc.get("emulation") or {}).get("error"),
    )


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mirrors", type=Path, default=Path("/work/.mirror"))
    ap.add_argument("--only", action="append", default=[], help="kernel name (repeatable)")
    ap.add_argument("--extra", action="append", default=[], help="extra analyze argument")
    ap.add_argument("--timeout", type=float, default=600.0)
    ap.add_argument("--json", type=Path, help="write the results here")
    ap.add_argument(
        "--limit-gb",
        type=float,
        default=6.0,
        help="address-space limit of each analyze (0: none; default 6: a shared machine)",
    )
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.child:  # one kernel in this process, so that RUSAGE_CHILDREN is its own peak
        r = run_one(Path(a.child), a.extra, a.timeout, a.limit_gb)
        print(json.dumps(asdict(r)))
        return 0
    results = []
    for k in KERNELS:
        if a.only and k.name not in a.only:
            continue
        cu = prepare(k, a.mirrors)
        if cu is None:
            print(f"{k.name}: skipped (no mirror of {k.repo} under {a.mirrors})")
            continue
        extra = [f"--extra={x}" for x in a.extra]
        p = subprocess.run(
            [sys.executable, __file__, "--child", str(cu), "--timeout", str(a.timeout)]
            + ["--limit-gb", str(a.limit_gb), *extra],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        if p.returncode != 0:
            print(f"{k.name}: benchmark child failed: {p.stderr.strip()[-300:]}")
            continue
        r = Result(**json.loads(p.stdout))
        results.append(r)
        t = r.timings_s
        phases = " ".join(f"{n}={v:.1f}" for n, v in t.items() if isinstance(v, float) and v >= 0.1)
        if r.ok:
            status = "ok"
        elif r.rc:
            status = f"FAIL rc={r.rc} {r.error.splitlines()[-1] if r.error else ''}"
        else:
            status = "over goal"
        print(
            f"{k.name:22s} wall {r.wall_s:6.1f} s  cpu {r.cpu_s:6.1f} s  "
            f"peak RSS {r.peak_rss_mb:7.0f} MB  "
            f"{status}  [{phases}] traced {r.ctas_traced} CTAs"
            + (f" (no trace: {r.trace_error})" if r.trace_error else "")
            + f"; findings: {','.join(r.findings) or '-'}",
            flush=True,
        )
    # a shared machine: wall times grow with the load, the CPU times (user + system) less so
    print("load average (1, 5, 15 min): " + ", ".join(f"{x:.1f}" for x in os.getloadavg()))
    if a.json:
        a.json.write_text(json.dumps([asdict(r) for r in results], indent=1))
    return 0 if results and all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
