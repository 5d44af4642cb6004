"""The rules' services (:class:`gpuadvise.rules.RuleServices`) for one analysed launch: what a rule
may ask of the toolchain and the emulator, done the way the analysis did it."""

from __future__ import annotations

import functools
import hashlib
import logging
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuadvise.analyze.models import resolve_launch
from gpuadvise.rules.context import ModelUnavailable, SharedLayout, SharedVariable
from gpuadvise.toolchain import CompileOptions, KernelInfo, Toolchain

if TYPE_CHECKING:
    from gpuadvise.analyze.pipeline import KernelAnalysis
    from gpuadvise.spec.kernel_spec import ResolvedLaunch
    from gpuadvise.trace.access import AccessTrace
    from gpuadvise.trace.emulate import Emulation

__all__ = ["AnalysisServices"]

log = logging.getLogger(__name__)


@functools.lru_cache(maxsize=8)
def _parse_ptx(digest: str, text: str) -> Any:
    from gpuadvise.ptx.parser import parse_ptx

    return parse_ptx(text)


class AnalysisServices:
    """:class:`~gpuadvise.rules.RuleServices` of one :class:`KernelAnalysis`: candidates are
    compiled with the nvcc flags the kernel was compiled with (plus the source's folder on the
    include path when the source is rewritten), by the analysis' toolchain."""

    def __init__(self, analysis: KernelAnalysis) -> None:
        self._analysis = analysis
        self._launch: ResolvedLaunch | None = None

    def _toolchain(self) -> Toolchain:
        from gpuadvise.toolchain import find_toolchain

        a = self._analysis
        return a.toolchain if a.toolchain is not None else find_toolchain(None)

    def _options(self) -> CompileOptions:
        """The options that reproduce the module's nvcc flags."""
        module = self._analysis.module
        return CompileOptions.from_nvcc_flags(module.arch, module.flags)

    def _candidate(
        self, source_text: str | None, nvcc_flags: Sequence[str]
    ) -> tuple[Path, CompileOptions]:
        """Where the candidate's source is (rewritten sources go to the compile cache, named
        by their content, so that a second analysis reuses the build) and its options."""
        from gpuadvise.toolchain import cache_root

        options = self._options()
        source = Path(self._analysis.spec.source)
        if source_text is not None:
            digest = hashlib.sha256(source_text.encode()).hexdigest()[:20]
            folder = cache_root(options) / "candidates" / digest
            path = folder / source.name
            try:
                folder.mkdir(parents=True, exist_ok=True)
                if not path.is_file() or path.read_text() != source_text:
                    path.write_text(source_text)
            except OSError as exc:
                raise ModelUnavailable(
                    f"cannot write the candidate's source {path}: {exc}"
                ) from None
            options = replace(
                options, include_dirs=(*options.include_dirs, str(source.resolve().parent))
            )
            source = path
        if nvcc_flags:
            options = replace(options, extra_flags=(*options.extra_flags, *nvcc_flags))
        return source, options

    def _build(self, source_text: str | None, nvcc_flags: Sequence[str]) -> Any:
        from gpuadvise.toolchain import compile_source, select_compiled_kernel

        source, options = self._candidate(source_text, nvcc_flags)
        name = self._analysis.spec.kernel
        module = compile_source(source, options, self._toolchain(), kernels=[name])
        return module, select_compiled_kernel(module, name), options

    def compile_candidate(
        self, source_text: str | None = None, nvcc_flags: Sequence[str] = ()
    ) -> KernelInfo:
        _module, kernel, _options = self._build(source_text, nvcc_flags)
        return kernel  # type: ignore[no-any-return]

    def trace_candidate(self, source_text: str, sample_ctas: int) -> AccessTrace:
        return self.emulate_candidate(source_text, sample_ctas).trace

    def emulate_candidate(
        self, source_text: str | None, sample_ctas: int | Sequence[int], trace: bool = True
    ) -> Emulation:
        """The candidate (None: the analysed source) emulated on the analysed launch, for
        ``sample_ctas`` (a count, or the linear ids of the CTAs to run)."""
        from gpuadvise.trace.emulate import emulate

        module, kernel, options = self._build(source_text, ())
        # user structs (seed 004's Cell) are sized by the compiler, as the pipeline does
        launch = resolve_launch(self._analysis.spec, kernel, options, self._toolchain())
        return emulate(
            module, kernel, launch, self._analysis.device, sample_ctas=sample_ctas, trace=trace
        )

    def resolved_launch(self) -> ResolvedLaunch:
        if self._launch is None:
            a = self._analysis
            options = a.options if a.options is not None else self._options()
            self._launch = resolve_launch(a.spec, a.kernel, options, self._toolchain())
        return self._launch

    def shared_layout(self) -> SharedLayout:
        """The shared variables as the emulator lays them out (``ptx.emulator.KernelImage``;
        the GPU tracer agrees on the kernels suite)."""
        from gpuadvise.ptx.emulator import KernelImage

        a = self._analysis
        ptx = a.module.ptx
        module = _parse_ptx(hashlib.sha256(ptx.encode()).hexdigest(), ptx)
        image = KernelImage.build(module, a.kernel.mangled, a.module.arch, 0)
        decls = {v.name: v for v in module.variables.values()}
        decls.update({v.name: v for v in image.program.vars})
        out = []
        for name, off in image.shared_offsets.items():
            v = decls.get(name)
            if v is None:
                continue
            out.append(SharedVariable(name, int(off), int(v.size_bytes), int(v.align), v.extern))
        return SharedLayout(tuple(out), int(image.dynamic_offset))
