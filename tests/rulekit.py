"""What the per-rule test modules share: whether a CUDA toolkit is here, an isolated compile
cache, the analysis ``gpuadvise analyze`` builds for a kernel case, one rule run on it, and a
finding's evidence as a dict. Import it from a test module (``from rulekit import ...``)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from gpuadvise import rules as R
from gpuadvise.analyze.evaluate import run_rules
from gpuadvise.rules.config import Config
from gpuadvise.toolchain.nvcc import find_toolchain

try:
    find_toolchain()
    HAVE_NVCC = True
except Exception:
    HAVE_NVCC = False

needs_toolkit = pytest.mark.skipif(not HAVE_NVCC, reason="no CUDA toolkit (pip install .[toolkit])")

_K = R.builtin_kernels_dir()
assert _K is not None
KERNELS: Path = _K


def isolated_cache(name: str) -> Any:
    """A module-scoped autouse fixture pointing GPUADVISE_CACHE_DIR at a fresh folder."""

    @pytest.fixture(scope="module", autouse=True)
    def _cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
        old = os.environ.get("GPUADVISE_CACHE_DIR")
        os.environ["GPUADVISE_CACHE_DIR"] = str(tmp_path_factory.mktemp(name))
        yield
        if old is None:
            os.environ.pop("GPUADVISE_CACHE_DIR", None)
        else:
            os.environ["GPUADVISE_CACHE_DIR"] = old

    return _cache


def analyze(source: Path, kernel: str, sample_ctas: int, args: tuple[str, ...] = ()) -> Any:
    """The StaticAnalysis of ``gpuadvise analyze SOURCE -k KERNEL --gpu H100`` tracing the first
    ``sample_ctas`` CTAs."""
    from gpuadvise.analyze.options import KernelOptions, build
    from gpuadvise.analyze.pipeline import analyze_kernel

    spec, choice, options = build(
        KernelOptions(source=str(source), kernel=kernel, gpu="H100", args=args)
    )
    return analyze_kernel(spec, choice.device, options, trace=True, sample_ctas=sample_ctas)


def run_rule(a: Any, rule: str, trace_ctas: int, **options: Any) -> list[R.Finding]:
    """The findings of one rule (with ``options``) on analysis ``a``, by line; no error rows."""
    cfg = Config(trace_ctas=trace_ctas, select=(rule,), rule_options={rule: options})
    found = run_rules(a, cfg)
    assert not [f for f in found if f.is_error], [f.error for f in found]
    return sorted(found, key=lambda f: f.line or 0)


def ev(f: R.Finding) -> dict[str, Any]:
    """A finding's evidence, metric -> value."""
    return {e.metric: e.value for e in f.evidence}
