"""What the per-rule test modules share: the analysis ``gpuadvise analyze`` builds for a kernel
case, one rule run on it, and a finding's evidence as a dict. Import it from a test module
(``from rulekit import ...``).

The toolkit check and the compile cache are conftest.py's (``pytest.mark.toolkit``, the
``compile_cache`` fixture: the run's one cache, not a module's own any more); ``needs_toolkit``
and ``isolated_cache`` are the same, under the names the older rule tests import.
"""

from __future__ import annotations

import dataclasses
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import gpuadvise.rules.registry as rule_registry
from gpuadvise import rules as R
from gpuadvise.analyze.evaluate import run_rules
from gpuadvise.analyze.pipeline import KernelAnalysis
from gpuadvise.rules.config import DEFAULT_TRACE_CTAS, Config
from gpuadvise.rules.context import KernelFacts

_K = rule_registry.builtin_kernels_dir()
assert _K is not None
KERNELS: Path = _K

needs_toolkit = pytest.mark.toolkit


def isolated_cache(name: str) -> Any:
    """A module-scoped autouse fixture: conftest's ``compile_cache`` for every test of the module
    that assigns it (``_cache = isolated_cache("...")``). ``name`` is kept for old callers."""

    @pytest.fixture(scope="module", autouse=True)
    def _cache(compile_cache: Path) -> Iterator[Path]:
        yield compile_cache

    return _cache


def analyze(
    source: Path,
    kernel: str,
    sample_ctas: int | str | None = None,
    args: tuple[str, ...] = (),
    *,
    trace: bool = True,
    registers: bool = False,
    **options: Any,
) -> Any:
    """The KernelAnalysis of ``gpuadvise analyze SOURCE -k KERNEL --gpu H100 ...``: ``options``
    are further KernelOptions fields (``spec``, ``grid``, ``block``, ...). ``trace``: the
    pipeline traces the first ``sample_ctas`` CTAs on the emulator (None: its default, the first
    wave); without it the trace-based models are computed lazily by the rules that need them.
    ``registers``: the live registers read by the pipeline, as ``gpuadvise analyze`` reads
    them (one nvdisasm run gives the SASS and them: for a test whose rules read them, GA101 or
    GA403, all the rules), else when first read (:class:`LazyRegisters`: a second run then)."""
    from gpuadvise.analyze.options import KernelOptions, build
    from gpuadvise.analyze.pipeline import analyze_kernel

    spec, choice, compile_options = build(
        KernelOptions(source=str(source), kernel=kernel, gpu="H100", args=args, **options)
    )
    if registers:
        return analyze_kernel(
            spec, choice.device, compile_options, trace=trace, sample_ctas=sample_ctas
        )
    return analyze_lazily(
        spec, choice.device, compile_options, trace=trace, sample_ctas=sample_ctas
    )


def compiled_once(source: Path, kernel: str) -> None:
    """``source``'s compile for ``kernel`` and its life ranges (``nvdisasm -plr``, which the SASS
    and the live registers are read from) in the run's compile cache, before the kernel case's
    analysis: the same calls as ``gpuadvise analyze``'s (:func:`analyze`:
    ``analyze.options.build``, then ``analyze.head``'s compile and ``analyze.ahead.life_table``);
    a hit costs a lookup. Under pytest-xdist two workers that analyse two kernels of one file
    at the same moment (the kernel cases: :func:`test_rules_golden.case_run`) make them once:
    the second waits for the first's compile and nvdisasm run and reads them from the cache
    (the compile cache's own locks: :mod:`gpuadvise.toolchain.cache_lock`)."""
    from gpuadvise.analyze.ahead import life_table
    from gpuadvise.analyze.options import KernelOptions, build
    from gpuadvise.toolchain import compile_source, find_toolchain, select_compiled_kernel

    spec, _, options = build(KernelOptions(source=str(source), kernel=kernel, gpu="H100"))
    tc = find_toolchain()
    module = compile_source(Path(spec.source), options, tc, kernels=[spec.kernel])
    life_table(module, select_compiled_kernel(module, spec.kernel), tc)


def analyze_lazily(*args: Any, **kwargs: Any) -> Any:
    """``pipeline.analyze_kernel(*args, **kwargs)`` with its live registers read when something
    first reads them (:class:`LazyRegisters`): for the tests' own analyses of a kernel."""
    from gpuadvise.analyze.pipeline import analyze_kernel

    a = analyze_kernel(*args, registers=False, **kwargs)
    return LazyRegisters(**{f.name: getattr(a, f.name) for f in dataclasses.fields(a)})


_REPLACE = dataclasses.replace.__code__


class LazyRegisters(KernelAnalysis):
    """A :class:`KernelAnalysis` whose live registers (``registers``: nvdisasm's life ranges joined
    to the SASS, :func:`gpuadvise.analyze.pipeline.live_registers`) are read when something first
    reads them (GA101 and GA403 through their context, the report), not beside the SASS: the
    same value the pipeline gives, without the ``nvdisasm --print-life-ranges`` run (about
    0.3 s of CPU per kernel) in the many tests whose rule never reads them. The pipeline runs
    with ``registers=False`` and this reads them as it would have (same cubin, kernel, SASS)."""

    def facts(self) -> Any:
        """The rules' facts, their ``registers`` read from this analysis when a rule reads them."""
        kept = self.__dict__
        if "_registers" in kept:
            return super().facts()
        kept["_building_facts"] = True  # the base facts() asks for the registers: not yet
        try:
            base = super().facts()
        finally:
            del kept["_building_facts"]
        facts = _LazyFacts(**{f.name: getattr(base, f.name) for f in dataclasses.fields(base)})
        facts.__dict__["_analysis"] = self
        return facts

    def _read_registers(self) -> Any:
        kept = self.__dict__
        if "_building_facts" in kept or (
            "_registers" not in kept and sys._getframe(1).f_code is _REPLACE
        ):  # dataclasses.replace copies the fields: the copy reads them itself when asked
            return None
        if "_registers" not in kept:
            from gpuadvise.analyze.pipeline import live_registers

            pressure, why = live_registers(
                self.module, self.kernel, self.sass_instructions, self.toolchain
            )
            assert why is None, why  # the pipeline would have noted it (a test's kernel: never)
            kept["_registers"] = pressure
        return kept["_registers"]

    def _keep_registers(self, value: Any) -> None:
        if value is not None:  # the dataclass's __init__ (None: not read yet) or a replace()
            self.__dict__["_registers"] = value

    registers = property(_read_registers, _keep_registers)  # type: ignore[assignment]


class _LazyFacts(KernelFacts):
    """:class:`KernelFacts` whose ``registers`` are its :class:`LazyRegisters` analysis's, read
    when a rule first asks (``RuleContext.live_registers``)."""

    def _read_registers(self) -> Any:
        return self.__dict__["_analysis"].registers

    def _keep_registers(self, value: Any) -> None:
        pass  # the dataclass's __init__: None, the analysis holds them

    registers = property(_read_registers, _keep_registers)  # type: ignore[assignment]


def compiled(
    source: Path, kernel: str, args: tuple[str, ...] = (), **options: Any
) -> SimpleNamespace:
    """What a test that runs a kernel on the emulator takes from an analysis (``spec``,
    ``device``, ``module``, ``kernel``), built as :func:`analyze` builds them (the same spec,
    compile and kernel) without the rest of the pipeline: no SASS, no live registers (two
    nvdisasm runs), no occupancy. For a kernel that is only run, its outputs compared."""
    from gpuadvise.analyze.options import KernelOptions, build
    from gpuadvise.toolchain import as_written, compile_source, select_compiled_kernel

    spec, choice, compile_options = build(
        KernelOptions(source=str(source), kernel=kernel, gpu="H100", args=args, **options)
    )
    module = compile_source(Path(spec.source), compile_options, kernels=[spec.kernel])
    info = as_written(module, spec.kernel, select_compiled_kernel(module, spec.kernel))
    return SimpleNamespace(spec=spec, device=choice.device, module=module, kernel=info)


def untraced_run(source: Path, kernel: str, args: tuple[str, ...] = (), **options: Any) -> Any:
    """The Emulation of every CTA of ``kernel``'s launch (``args`` and ``options`` as
    :func:`compiled` takes them) run for its outputs alone: no trace, SASS or memory models, and
    every loop iteration run (a sampled loop's outputs are not the kernel's)."""
    from gpuadvise.source.signature import parse_signature
    from gpuadvise.spec.kernel_spec import resolve
    from gpuadvise.trace.emulate import emulate

    a = compiled(source, kernel, args, **options)
    launch = resolve(a.spec, parse_signature(source.read_text(), kernel))
    return emulate(
        a.module, a.kernel, launch, a.device, sample_ctas="all", trace=False, sample_loops=False
    )


def whole_run_outputs(source: Path, kernel: str, spec: str, grid: str) -> dict[str, Any]:
    """The kernel's outputs over the CTAs of ``grid``, every CTA and loop iteration run on the
    emulator (no trace), for tests that compare a patched kernel's outputs with the original's."""
    run = untraced_run(source, kernel, spec=spec, grid=grid)
    assert run.complete and not run.sampled_loops, run.sampled_loops
    return dict(run.outputs)


def patched_folder(tmp: Path, source: Path, text: str) -> Path:
    """``text`` written as ``source``'s name in a new folder ``tmp/patched`` beside copies of
    the TOML specs of ``source``'s folder (a patched kernel analysed with its case's specs)."""
    d = tmp / "patched"
    d.mkdir()
    for toml in source.parent.glob("*.toml"):
        (d / toml.name).write_text(toml.read_text())
    (d / source.name).write_text(text)
    return d / source.name


def run_rule(
    a: Any, rule: str, trace_ctas: int | str | None = DEFAULT_TRACE_CTAS, **options: Any
) -> list[R.Finding]:
    """The findings of one rule (with ``options``) on analysis ``a``, by line; no error rows."""
    cfg = Config(trace_ctas=trace_ctas, select=(rule,), rule_options={rule: options})
    found = run_rules(a, cfg)
    assert not [f for f in found if f.is_error], [f.error for f in found]
    return sorted(found, key=lambda f: f.line or 0)


def ev(f: R.Finding) -> dict[str, Any]:
    """A finding's evidence, metric -> value."""
    return {e.metric: e.value for e in f.evidence}


def kernel_case(
    folder: Path,
    code: str,
    kernel: str,
    *,
    grid: int = 4,
    block: int = 256,
    n: int = 1024,
) -> Path:
    """``folder/k.cu`` holding ``code`` and a case.toml beside it launching ``kernel`` with the
    reduction signature ``(const int* in, int* out, unsigned n)``: ``in`` int[n] (random),
    ``out`` int[grid] (zeros). Returns the .cu path."""
    src = folder / "k.cu"
    src.write_text(textwrap.dedent(code))
    (folder / "case.toml").write_text(
        f'source = "k.cu"\nkernel = "{kernel}"\n' + reduction_launch(grid=grid, block=block, n=n)
    )
    return src


def reduction_launch(*, grid: int = 4, block: int = 256, n: int = 1024) -> str:
    """The launch :func:`kernel_case` gives its kernel, as spec TOML without ``source`` and
    ``kernel`` (a kernel of a bundle takes it: ``bundlekit.write_bundle``)."""
    return (
        f"grid = {grid}\nblock = {block}\nseed = 1\n\n"
        f'[args]\nn = {n}\n\n[buffers]\nin = "int[n]"\n'
        f'out = {{ type = "int", count = {grid}, fill = "zeros" }}\n'
    )


def source_line(source: Path, text: str) -> int:
    """The 1-based line of ``source`` that holds ``text`` (exactly one must)."""
    (n,) = [i for i, t in enumerate(source.read_text().splitlines(), 1) if text in t]
    return n


def reduction_block_sums(a: Any, blocks: int, per_block: int) -> tuple[Any, Any]:
    """(``out`` of the first ``blocks`` CTAs of analysis ``a`` on the emulator, the int32 sums of
    their ``per_block`` inputs each): a reduction kernel's outputs and what they must be."""
    import numpy as np

    from gpuadvise.source.signature import parse_signature
    from gpuadvise.spec.kernel_spec import resolve
    from gpuadvise.trace.emulate import emulate

    launch = resolve(a.spec, parse_signature(Path(a.spec.source).read_text(), a.spec.kernel))
    e = emulate(a.module, a.kernel, launch, a.device, sample_ctas=blocks)
    data = e.inputs["in"].astype(np.int64)
    want = np.array([data[b * per_block : (b + 1) * per_block].sum() for b in range(blocks)])
    return e.outputs["out"][:blocks].astype(np.int64), (want + 2**31) % 2**32 - 2**31
