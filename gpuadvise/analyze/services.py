"""The rules' services (:class:`gpuadvise.rules.context.RuleServices`) for one analysed launch: what a rule
may ask of the toolchain and the emulator, done the way the analysis did it."""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuadvise.analyze.models import resolve_launch
from gpuadvise.arrays import distinct
from gpuadvise.errors import GpuAdviseError
from gpuadvise.fileio import write_atomic
from gpuadvise.model.launch_change import LaunchCheck
from gpuadvise.rules.context import ModelUnavailable, SharedLayout, SharedVariable
from gpuadvise.toolchain import CompileOptions, KernelInfo, Toolchain

if TYPE_CHECKING:
    from gpuadvise.analyze.pipeline import KernelAnalysis
    from gpuadvise.model.registers import RegisterPressure
    from gpuadvise.spec.kernel_spec import ResolvedLaunch
    from gpuadvise.trace.access import AccessTrace
    from gpuadvise.trace.changes import BufferChanges
    from gpuadvise.trace.emulate import Emulation

__all__ = ["AnalysisServices", "candidate_path", "write_candidate"]

log = logging.getLogger(__name__)

# a launch change is checked on the whole launches when both together cost at most this many
# lane-instructions on the emulator (from the analysis' own trace), else on a few CTAs
WHOLE_LAUNCH_LANE_INSTRUCTIONS = 60_000_000
MAX_COVERING_CTAS = 64
WHOLE_LAUNCH_THREADS = 1 << 20  # without a trace to tell the cost: both launches' threads


def candidate_path(root: Path, text: str, name: str) -> Path:
    """Where a rewritten source ``text`` of the file ``name`` lives in the compile cache at
    ``root``: ``candidates/<its SHA-256>/name``, named by its content, so that every build of
    the same text (a candidate, a step of ``--fix``, a second run) has one path, and the compile
    cache (whose key holds the path: the line table names it) finds it built."""
    digest = hashlib.sha256(text.encode()).hexdigest()[:20]
    return root / "candidates" / digest / name


def write_candidate(path: Path, text: str) -> None:
    """``text`` (UTF-8) at ``path`` unless it is there already; replaced whole
    (:func:`~gpuadvise.fileio.write_atomic`), never rewritten in place: another analysis
    compiling the same candidate at that moment reads the whole text, never a truncated one."""
    data = text.encode("utf-8")
    if not path.is_file() or path.read_bytes() != data:
        write_atomic(path, data)


class AnalysisServices:
    """:class:`~gpuadvise.rules.context.RuleServices` of one :class:`KernelAnalysis`: candidates are
    compiled with the nvcc flags the kernel was compiled with (plus the source's folder on the
    include path when the source is rewritten), by the analysis' toolchain."""

    def __init__(self, analysis: KernelAnalysis) -> None:
        self._analysis = analysis
        self._launch: ResolvedLaunch | None = None
        self._launch_checks: dict[
            tuple[tuple[int, ...], tuple[int, ...], str | None], LaunchCheck
        ] = {}
        self.needed_source = False  # a candidate of a kernel without source was asked for
        # compare_launch's runs of the launch as it is, per CTA set: (CTAs run, per output the
        # positions it changed and their values, global sectors)
        self._base_runs: dict[
            Any, tuple[tuple[int, ...], dict[str, Any], dict[str, Any], float]
        ] = {}

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
        by their content, so that a second analysis reuses the build) and its options. The file
        is replaced whole (:func:`~gpuadvise.fileio.write_atomic`), never rewritten in place:
        another analysis compiling the same candidate at that moment (a second ``gpuadvise``,
        a parallel test run) reads the whole text, never a truncated one."""
        from gpuadvise.toolchain import cache_root
        from gpuadvise.toolchain.binary import is_binary

        source = Path(self._analysis.spec.source)
        if (source_text is not None or nvcc_flags) and is_binary(source):
            from gpuadvise.analyze.binary_input import NEEDS_SOURCE, NeedsSource

            self.needed_source = True
            raise NeedsSource(f"{source.name} holds no source to rewrite: {NEEDS_SOURCE}")
        options = self._options()
        if source_text is not None:
            path = candidate_path(cache_root(options), source_text, source.name)
            try:
                write_candidate(path, source_text)
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

    def candidate_registers(
        self, source_text: str | None = None, nvcc_flags: Sequence[str] = ()
    ) -> tuple[KernelInfo, RegisterPressure]:
        """The candidate's resources and its live registers (ModelUnavailable when nvdisasm
        cannot give them)."""
        from gpuadvise.analyze.pipeline import life_table, live_registers
        from gpuadvise.toolchain import sass

        module, kernel, _options = self._build(source_text, nvcc_flags)
        tc = self._toolchain()
        table = life_table(module, kernel, tc)  # first: the SASS is read from its output
        instrs = tuple(sass.disassemble(module.cubin_path, kernel.mangled, tc))
        pressure, why = live_registers(module, kernel, instrs, tc, table)
        if pressure is None:
            raise ModelUnavailable(why or "the candidate's live registers were not read")
        return kernel, pressure

    def check_candidate(self, source_text: str, sample_ctas: int = 4) -> LaunchCheck:
        """Whether the candidate computes what the analysed source computes: both run on the
        emulator for the launch's first ``sample_ctas`` CTAs, every output compared within the
        spec's tolerances (as the GPU measurement compares them)."""
        from gpuadvise.runner.verify import compare

        ctas = "CTA" if sample_ctas == 1 else "CTAs"
        how = f"the first {sample_ctas} {ctas} on the CPU emulator"
        try:
            base = self.emulate_candidate(None, sample_ctas, trace=False, models=False)
            cand = self.emulate_candidate(source_text, sample_ctas, trace=False, models=False)
        except GpuAdviseError as exc:
            return LaunchCheck(False, f"not checked: {exc.one_line()}", how)
        if not base.ctas_run or not cand.ctas_run:
            return LaunchCheck(False, "not checked: the emulator ran no CTA", how)
        spec = self._analysis.spec
        for name, expected in base.outputs.items():
            got = cand.outputs.get(name)
            if got is None:
                return LaunchCheck(False, f"the candidate has no output {name}", how)
            c = compare(name, expected, got, spec.rtol, spec.atol)
            if not c.ok:
                return LaunchCheck(False, c.message, how)
        return LaunchCheck(True, "", f"outputs equal over {how}")

    def trace_candidate(
        self, source_text: str | None, sample_ctas: int | Sequence[int]
    ) -> AccessTrace:
        return self.emulate_candidate(source_text, sample_ctas).trace

    def emulate_candidate(
        self,
        source_text: str | None,
        sample_ctas: int | Sequence[int],
        trace: bool = True,
        sample_loops: bool = True,
        models: bool = True,
    ) -> Emulation:
        """The candidate (None: the analysed source) emulated on the analysed launch, for
        ``sample_ctas`` (a count, or the linear ids of the CTAs to run). ``sample_loops``
        False: every loop iteration runs (the outputs are compared); ``models`` False: its
        outputs and global traffic alone are read (:func:`gpuadvise.trace.emulate.emulate`)."""
        from gpuadvise.trace.emulate import emulate

        module, kernel, options = self._build(source_text, ())
        # user structs (seed 004's Cell) are sized by the compiler, as the pipeline does
        launch = resolve_launch(self._analysis.spec, kernel, options, self._toolchain())
        return emulate(
            module,
            kernel,
            launch,
            self._analysis.device,
            sample_ctas=sample_ctas,
            trace=trace,
            sample_loops=sample_loops,
            models=models,
        )

    def compare_launch(
        self,
        grid: tuple[int, int, int],
        block: tuple[int, int, int],
        source_text: str | None = None,
        then: Sequence[tuple[tuple[int, int, int], tuple[int, int, int]]] = (),
    ) -> LaunchCheck:
        """Run the analysed launch and the same kernel (or the candidate ``source_text``, the
        kernel's file rewritten) with ``grid`` and ``block`` on the emulator and compare what
        they compute (:mod:`gpuadvise.model.launch_change`): the whole launches when their
        emulation is cheap, else the first CTAs of the new launch against the original CTAs
        that hold the same threads. The change is also refused when it moves more global
        sectors per thread. Cached per shape and source. ``then``: the (grid, block) shapes
        the caller may check next: the launch as it is runs once for the CTAs they need too,
        each CTA's part of that run kept for them where the CTAs do not share what they
        write (the verdicts are the same)."""
        digest = None if source_text is None else hashlib.sha256(source_text.encode()).hexdigest()
        key = (tuple(grid), tuple(block), digest)
        if key not in self._launch_checks:
            try:
                self._launch_checks[key] = self._compare_launch(key[0], key[1], source_text, then)
            except GpuAdviseError as exc:
                self._launch_checks[key] = LaunchCheck(False, f"not checked: {exc.one_line()}")
        return self._launch_checks[key]

    def _launch_ctas(
        self, g1: tuple[int, int, int], b1: tuple[int, int, int]
    ) -> tuple[bool, list[int] | str, list[int] | str, str] | LaunchCheck:
        """How the launch as it is and the one of ``g1`` x ``b1`` threads are compared:
        (whole, the change's CTAs, the launch's CTAs, how), or the verdict when they cannot be.
        """
        from gpuadvise.model.launch_change import covering_ctas, threads_in

        a = self._analysis
        old = self.resolved_launch()
        g0, b0 = old.launch.grid.as_tuple(), old.launch.block.as_tuple()
        total0 = old.launch.grid.count
        total1 = g1[0] * g1[1] * g1[2]
        threads1 = b1[0] * b1[1] * b1[2]
        threads = total0 * old.launch.block.count + total1 * threads1
        mem = a.memory
        if mem is not None and mem.ctas_run:  # lane-instructions per thread, from the trace
            per_thread = mem.lane_instructions / mem.ctas_run / max(old.launch.block.count, 1)
            whole = per_thread * threads <= WHOLE_LAUNCH_LANE_INSTRUCTIONS
        else:
            whole = threads <= WHOLE_LAUNCH_THREADS
        if not whole and total1 * threads1 < total0 * old.launch.block.count:
            # fewer threads: whether they do all the work the launch does (a grid-stride loop)
            # shows only over the whole launches
            return LaunchCheck(
                False,
                "not checked: the change launches fewer threads, and the whole launches are too "
                "large to run on the emulator to see that they do all the work",
            )
        if whole:
            return True, "all", "all", "the whole launches"
        # the first CTAs of the change and its last one whose threads all have a
        # counterpart in the launch as it is (threads beyond its extent have none)
        extent = tuple(min(g0[i] * b0[i], g1[i] * b1[i]) for i in range(3))

        def full(c: int) -> bool:
            return threads_in([c], g1, b1, extent) == threads1  # type: ignore[arg-type]

        head = [c for c in range(min(4, total1)) if full(c)]
        last = next((c for c in range(total1 - 1, max(total1 - 65, -1), -1) if full(c)), None)
        picks = sorted({*head, *([] if last is None else [last])})
        ctas0 = covering_ctas(picks, (g1, b1), (g0, b0))
        if not picks or not ctas0:
            return LaunchCheck(False, "no CTA of the change covers threads of the original")
        if len(ctas0) > MAX_COVERING_CTAS:
            return LaunchCheck(
                False,
                f"not checked: {len(ctas0)} CTAs of the original launch hold the threads of "
                f"{len(picks)} CTAs of the change (at most {MAX_COVERING_CTAS} are run)",
            )
        how = f"{len(picks)} CTAs of the change against the {len(ctas0)} holding their threads"
        return False, picks, ctas0, how

    def _compare_launch(
        self,
        grid: tuple[int, ...],
        block: tuple[int, ...],
        source_text: str | None = None,
        then: Sequence[tuple[tuple[int, int, int], tuple[int, int, int]]] = (),
    ) -> LaunchCheck:
        import numpy as np

        from gpuadvise.model.coalescing import global_sectors
        from gpuadvise.model.launch_change import compare_outputs, threads_in
        from gpuadvise.spec.units import Dim3
        from gpuadvise.trace.emulate import emulate

        a = self._analysis
        old = self.resolved_launch()
        g0, b0 = old.launch.grid.as_tuple(), old.launch.block.as_tuple()
        g1 = (int(grid[0]), int(grid[1]), int(grid[2]))
        b1 = (int(block[0]), int(block[1]), int(block[2]))
        if (g1, b1) == (g0, b0) and source_text is None:
            return LaunchCheck(True, "", "the same launch")
        module1, kernel1 = a.module, a.kernel
        base = old
        if source_text is not None:
            module1, kernel1, options1 = self._build(source_text, ())
            base = resolve_launch(a.spec, kernel1, options1, self._toolchain())
        new = replace(base, launch=replace(base.launch, grid=Dim3(*g1), block=Dim3(*b1)))
        plan = self._launch_ctas(g1, b1)
        if isinstance(plan, LaunchCheck):
            return plan
        whole, ctas1, ctas0, how = plan
        module, kernel = a.module, a.kernel
        # every loop iteration runs: the outputs are compared; of the trace, the global
        # records alone are read (no models: no SASS, no block costs)
        outs = [b.name for b in old.outputs]

        def sectors(e: Emulation, threads: int) -> float:
            """Global sectors moved: the whole launch's, or per thread of a CTA sample (the
            global records' sectors read a chunk at a time, not from a copy of them all: a
            whole launch's records are hundreds of MB)."""
            n = float(np.sum(global_sectors(e.trace.records).sectors))
            return n if whole else n / max(threads, 1)

        # one launch's emulation at a time, and of the first only the elements it changed
        # (a problem of two 1 GiB buffers, HeCBench nw, stays within the corpus's memory cap);
        # both start from the same contents (the spec's fills and seed)
        key0 = ctas0 if isinstance(ctas0, str) else tuple(ctas0)
        if key0 not in self._base_runs and not isinstance(ctas0, str) and then:
            # the CTAs the next shapes' checks need run with these, split by CTA (one
            # emulation's steps cost nearly what a CTA's alone does)
            later = []
            for g, b in then:
                shape = self._launch_ctas(
                    (int(g[0]), int(g[1]), int(g[2])), (int(b[0]), int(b[1]), int(b[2]))
                )
                if not isinstance(shape, LaunchCheck) and not isinstance(shape[2], str):
                    if tuple(shape[2]) not in self._base_runs:
                        later.append(tuple(shape[2]))
            if later:
                self._base_runs_together(tuple(ctas0), later, outs)
        if key0 not in self._base_runs:  # the launch as it is, once per CTA set
            e0 = emulate(
                module, kernel, old, a.device, sample_ctas=ctas0, sample_loops=False, models=False
            )
            ran = tuple(e0.ctas_run)
            ch0 = {n: _changes(e0, n) for n in outs}
            pos = {n: c.positions for n, c in ch0.items()}
            val = {n: c.after for n, c in ch0.items()}
            self._base_runs[key0] = (ran, pos, val, sectors(e0, old.launch.block.count * len(ran)))
            del e0, ch0
        ran0, pos0, val0, s0 = self._base_runs[key0]
        e1 = emulate(
            module1, kernel1, new, a.device, sample_ctas=ctas1, sample_loops=False, models=False
        )
        if not (ran0 and e1.ctas_run):
            return LaunchCheck(False, "not checked: the emulator ran no CTA", how)
        if whole:
            t0 = len(ran0) * old.launch.block.count
            t1 = len(e1.ctas_run) * new.launch.block.count
        else:
            extent = tuple(min(g0[i] * b0[i], g1[i] * b1[i]) for i in range(3))
            t0 = threads_in(list(ran0), g0, b0, extent)  # type: ignore[arg-type]
            t1 = threads_in(e1.ctas_run, g1, b1, extent)  # type: ignore[arg-type]
        init, before, after, where = {}, {}, {}, {}
        for n in outs:
            # only the elements either run changed: the rest hold their start data in both
            c1 = _changes(e1, n)
            p = distinct(np.concatenate([pos0[n], c1.positions]))  # one sort, no hash table
            init[n] = _start_values(e1, n, p)
            before[n] = init[n].copy()
            before[n][np.searchsorted(p, pos0[n])] = val0[n]
            after[n] = init[n].copy()
            after[n][np.searchsorted(p, c1.positions)] = c1.after
            where[n] = p
        same, why = compare_outputs(
            outs, init, before, after, old_threads=t0, new_threads=t1, whole=whole, index=where
        )
        if not same:
            return LaunchCheck(False, why, how)
        s1 = sectors(e1, new.launch.block.count * len(e1.ctas_run))
        if s0 > 0 and s1 > 1.1 * s0:
            return LaunchCheck(
                False,
                f"the change computes the same but moves {s1 / s0:.1f}x the global sectors"
                + ("" if whole else " per thread")
                + " (the threads' new arrangement coalesces worse)",
                how,
            )
        return LaunchCheck(True, "", how)

    def _base_runs_together(
        self, key0: tuple[int, ...], later: list[tuple[int, ...]], outs: list[str]
    ) -> None:
        """:meth:`_compare_launch`'s runs of the launch as it is for the CTA sets ``key0`` and
        ``later``, made by one emulation of all their CTAs: each set's part of it (the output
        elements its CTAs wrote, their records' sectors) where no CTA read or wrote a byte
        another wrote (:func:`~gpuadvise.model.launch_change.cta_writes`: each CTA computed what
        it computes alone; the emulator steps a CTA's warps in the same order whatever runs
        beside them). Otherwise that run is kept only for a set of the same CTAs; where it
        fails (too large, an access out of bounds) each set is left to its own run."""
        import numpy as np

        from gpuadvise.model.coalescing import record_sectors
        from gpuadvise.model.launch_change import cta_writes
        from gpuadvise.trace.access import Space
        from gpuadvise.trace.emulate import emulate

        a = self._analysis
        old = self.resolved_launch()
        sets = [key0, *(s for s in later if s != key0)]
        union = tuple(sorted({c for s in sets for c in s}))
        try:
            e = emulate(
                a.module,
                a.kernel,
                old,
                a.device,
                sample_ctas=list(union),
                sample_loops=False,
                models=False,
            )
        except GpuAdviseError:
            return
        ran = tuple(e.ctas_run)
        per_cta = old.launch.block.count
        changes = {n: _changes(e, n) for n in outs}
        bases = {n: int(e.trace.buffers[n][0]) for n in outs}
        sampled = bool(e.sampled_loops)
        r = e.trace.records
        del e  # (its memory; the records alone are read on)
        glob = r["space"] == int(Space.GLOBAL)
        if not glob.all():
            r = r[glob]
        sec = record_sectors(r).sectors if len(r) else np.zeros(0, np.int32)
        writes = cta_writes(r) if ran == union and not sampled else None
        owners: dict[str, Any] = {}
        if writes is not None:
            for n, c in changes.items():
                size = c.after.dtype.itemsize
                start = np.int64(bases[n]) + c.positions.astype(np.int64) * size
                owners[n] = writes.owners(start, size)
                if (owners[n] < 0).any():  # a change no record of a CTA explains
                    writes = None
                    break
        split = writes is not None
        del writes
        if not split:
            if union in sets:  # the run of that set as it is
                n_all = float(np.sum(sec)) if len(r) else 0.0
                self._base_runs[union] = (
                    ran,
                    {n: c.positions for n, c in changes.items()},
                    {n: c.after for n, c in changes.items()},
                    n_all / max(per_cta * len(ran), 1),
                )
            return
        for s in sets:
            ran_s = tuple(c for c in ran if c in s)
            pos, val = {}, {}
            for n, c in changes.items():
                mine = np.isin(owners[n], s)
                pos[n], val[n] = c.positions[mine], c.after[mine]
            n_s = float(np.sum(sec[np.isin(r["cta"], s)])) if len(r) else 0.0
            self._base_runs[s] = (ran_s, pos, val, n_s / max(per_cta * len(ran_s), 1))

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
        from gpuadvise.ptx.parser import parse_ptx_cached

        a = self._analysis
        module = parse_ptx_cached(a.module.ptx)  # the emulator's parse, not a second one
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


def _changes(e: Emulation, name: str) -> BufferChanges:
    """The elements of output ``name`` that emulation ``e`` changed, and their final values
    (:mod:`gpuadvise.trace.changes`: a lazy buffer's pages no access reached are not read)."""
    if e.changes is not None:
        return e.changes.changes(name)
    from gpuadvise.model.launch_change import changed_positions
    from gpuadvise.trace.changes import BufferChanges

    out = e.outputs[name]
    pos = changed_positions(out, e.inputs[name])
    return BufferChanges(pos, out[pos])


def _start_values(e: Emulation, name: str, positions: Any) -> Any:
    """Output ``name``'s start data at the elements ``positions`` (ascending) of emulation ``e``."""
    if e.changes is not None:
        return e.changes.start_values(name, positions)
    return e.inputs[name][positions]
