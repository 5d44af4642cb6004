"""Behaviour check for speed work (issue 31): the analysis must not change while it gets faster.

Runs ``gpuadvise analyze --json --no-measure --tracer emu`` (H100 model, a fresh cache) on

- every launch in kernels/ (as ``benchmarks/analyze_golden.py`` does: 64 CTAs sampled), and
- stranger-corpus kernels at their own launch (``benchmarks/corpus``: the manifest's spec, the
  default sample), by default the ``CORPUS`` list below,

and keeps what a user sees (findings with rule, line, severity, message, estimate and evidence;
resources, occupancy, waves, the bank, coalescing and L2 tables, the emulation's counts), without
timings. ``--compare`` prints every difference and exits 1 when there is one.

    python benchmarks/speed_golden.py --write before.json [--no-kernels] [--corpus NAME ...]
    python benchmarks/speed_golden.py --compare before.json [--only SUBSTR ...]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE / "corpus"))
import analyze_golden as golden  # noqa: E402

ROOT = HERE.parent

CORPUS = (  # a spread of the corpus's times (2026-11-29 run) and of its rules
    "coffeebeforearch/convolution_1d_tiled/convolution_1d",
    "cuda-samples/convolutionSeparable/convolutionRowsKernel",
    "cuda-samples/histogram/histogram256Kernel",
    "cuda-samples/scalarProd/scalarProdGPU",
    "cuda-samples/fastWalshTransform/fwtBatch1Kernel",
    "cuda-samples/sortingNetworks/bitonicSortShared",
    "hecbench/adam/adam",
    "hecbench/all-pairs-distance/k2",
    "hecbench/asmooth/smoothingFilter",
    "hecbench/expdist/distance",
    "hecbench/gemv/gemv_quantized_int8",
    "hecbench/softmax/softMax2",
    "hecbench/layernorm/layernorm_forward_kernel2",
    "hecbench/attention/attention_kernel1",
    "hecbench/addBiasResidualLayerNorm/generalAddBiasResidualPostLayerNorm",
    "infatoshi-course/tiled_matmul/matrixMultiplyOptimized",
    "polybench-acc/correlation/corr_kernel",
    "polybench-acc/gemm/gemm_kernel",
    "llm.c/softmax_forward/softmax_forward_kernel4",
    "hecbench/thomas/cuThomasBatch",
)


def corpus_command(name: str) -> list[str]:
    """The corpus runner's analyze command for kernel ``name`` (its spec written to a temporary
    folder, not to the shared ``src/_specs``), with the emulator as tracer."""
    import corpus
    import run

    c = corpus.load()
    run.c_repos.update(c.repos)
    run.SPECS = Path(tempfile.gettempdir()) / f"gpuadvise-speed-golden-specs-{os.getpid()}"
    opts = argparse.Namespace(
        measure=False,
        check=False,
        fixes=False,
        gpu="H100",
        out=run.SPECS,
        extra=[],
        profile=None,
    )
    for k in c.kernels:
        if k.name == name:
            cmd = run.command_for(k, opts)
            return [sys.executable, *cmd[1:], "--tracer", "emu"]
    raise SystemExit(f"no corpus kernel {name!r}")


def run_corpus(name: str, cache: str) -> dict[str, Any]:
    env = dict(os.environ, GPUADVISE_CACHE_DIR=cache)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH", "")]))
    t0 = time.monotonic()
    p = subprocess.run(corpus_command(name), capture_output=True, text=True, env=env, cwd=ROOT,
                       timeout=1800)  # fmt: skip
    wall = time.monotonic() - t0
    if p.returncode != 0:
        return {"exit": p.returncode, "stderr": p.stderr.strip().splitlines()[-1:]}
    d = json.loads(p.stdout)
    keep = ("kernel", "resources", "occupancy", "waves", "findings", "shared_memory",
            "global_memory", "l2", "rules_run", "emulation")  # fmt: skip
    print(f"    {wall:.1f} s", file=sys.stderr, flush=True)
    return {"exit": 0, **{k: golden._strip(d.get(k)) for k in keep}}


def _no_cache_dir(value: Any) -> Any:
    """``value`` with the run's temporary cache folder named ``<cache>`` (a candidate's file under
    it appears in GA403's details)."""
    if isinstance(value, dict):
        return {k: _no_cache_dir(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_no_cache_dir(v) for v in value]
    if isinstance(value, str):
        return re.sub(r"/\S*?gpuadvise-golden-[^/\s]+", "<cache>", value)
    return value


def collect(kernels: bool, corpus_names: list[str], only: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}

    def chosen(key: str) -> bool:
        return not only or any(s in key for s in only)

    with tempfile.TemporaryDirectory(prefix="gpuadvise-golden-") as cache:
        if kernels:
            for spec, kernel in golden._runs():
                key = str(spec.relative_to(ROOT)) + (f" --kernel {kernel}" if kernel else "")
                if chosen(key):
                    print(f"  {key}", file=sys.stderr, flush=True)
                    out[key] = golden.run_one(spec, kernel, cache)
        for name in corpus_names:
            key = "corpus:" + name
            if chosen(key):
                print(f"  {key}", file=sys.stderr, flush=True)
                out[key] = run_corpus(name, cache)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--write", metavar="FILE")
    g.add_argument("--compare", metavar="FILE")
    ap.add_argument("--no-kernels", action="store_true", help="skip the launches of kernels/")
    ap.add_argument("--corpus", action="append", help="corpus kernels (default: CORPUS)")
    ap.add_argument("--no-corpus", action="store_true", help="skip the corpus kernels")
    ap.add_argument("--only", action="append", default=[], help="keys containing this")
    args = ap.parse_args()
    names = [] if args.no_corpus else list(args.corpus or CORPUS)
    now = collect(not args.no_kernels, names, args.only)
    if args.write:
        Path(args.write).write_text(json.dumps(now, indent=1, sort_keys=True) + "\n")
        print(f"wrote {len(now)} analyses to {args.write}")
        return 0
    before = _no_cache_dir(json.loads(Path(args.compare).read_text()))
    now = _no_cache_dir(now)
    diffs: list[str] = []
    missing = [k for k in now if k not in before]
    for key in now:
        if key in before:
            golden._diff(before[key], now[key], key, diffs)
    for d in diffs[:300]:
        print(d)
    if missing:
        print(f"not in {args.compare}: {', '.join(missing)}")
    print(f"{len(now)} analyses, {len(diffs)} differences")
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
