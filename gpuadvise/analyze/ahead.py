"""Child work started ahead of where its result is read (issue 31: the median corpus kernel's wall
on a 2-core machine): variants compiled ahead of their traces (:class:`Ahead`), and the kernel's
SASS read while the rest of the analysis goes on (:class:`SassAhead`).

A variant's point from its own trace (:mod:`gpuadvise.analyze.variant_trace`) compiles the
variant (nvcc: about a CPU-second, in a child process) and then traces it on the emulator (this
process). One after the other, this process waited for every nvcc, and nvcc waited for the
kernel's own launch model (``before``) and for the previous variant's trace. :class:`Ahead`
compiles the variants one after another in a thread while this one works: the first variant's
nvcc runs while the kernel's side of the launch model is computed, the second's while the first
is traced. The thread only compiles (nvcc, ptxas' resources, the occupancy: no emulation, no
import the analysis has not made already), and shows no progress (the display's steps nest in
one thread). Once compiled, the variant is handed over (its trace may start: it needs the PTX)
and the thread reads its SASS next (an nvdisasm run, before the next variant's nvcc): the
variant's trace runs meanwhile and reads the SASS, for its block costs, once it has come, as the
kernel's own trace does (:class:`SassAhead` handed to the pipeline, :mod:`gpuadvise.trace.
sass_arrival`: bit for bit the eager sums). Each variant is compiled and disassembled exactly as
before: the results are the same.

The kernel's own SASS and life ranges (one ``nvdisasm -plr`` run, 0.3-0.8 s of wall that this
process only waited for) are read the same way in a thread started right after the compile
(:class:`SassAhead`), while this process waits for its imports, prints the header, reads the
rules' configuration and runs the emulator's trace, which needs the SASS only for its block
costs, added up once it comes (:mod:`gpuadvise.trace.sass_arrival`); the pipeline joins it where
it first reads the SASS itself (:func:`gpuadvise.analyze.pipeline.analyze_kernel`: after the
trace, or before it when the kernel is not traced on the emulator).
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator, Sequence
    from pathlib import Path

    from gpuadvise.analyze.head import CompiledHead
    from gpuadvise.analyze.options import KernelOptions
    from gpuadvise.rules.findings import Finding, Proxy, Variant
    from gpuadvise.spec.kernel_spec import KernelSpec
    from gpuadvise.toolchain import CompiledModule, CompileOptions, KernelInfo, Toolchain
    from gpuadvise.toolchain.liveness import LifeRanges
    from gpuadvise.toolchain.sass import SassInstruction


@dataclass(frozen=True)
class Built:
    """A variant's spec and compile options (:func:`gpuadvise.analyze.options.build`), its
    kernel compiled for the device (:func:`gpuadvise.analyze.head.compile_head`) and its SASS
    being read (without the live registers: a variant's are not read) by the thread that
    compiled it (``sass``, for the pipeline's ``sass_ahead``; None: read by the trace)."""

    spec: KernelSpec
    options: CompileOptions
    head: CompiledHead
    sass: SassAhead | None = None


_NVCC_STARTED: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar(
    "gpuadvise_nvcc_started", default=None
)
"""Set (by :func:`_build_into`) to the event :func:`_build` sets as its compile's nvcc starts."""


def _build(vopts: KernelOptions, device: Any, entry: str | None = None) -> Built:
    """``vopts``' kernel built and compiled (``entry``: its mangled name, assembled alone:
    :attr:`~gpuadvise.toolchain.CompileOptions.entry`), its SASS to be read."""
    from gpuadvise.analyze.head import compile_head
    from gpuadvise.analyze.options import build
    from gpuadvise.spec.progress import reporting
    from gpuadvise.toolchain.compile import while_nvcc_runs
    from gpuadvise.toolchain.sass import disassembly_made

    started = _NVCC_STARTED.get()

    @contextlib.contextmanager
    def nvcc_runs() -> Iterator[None]:  # (``started`` set as nvcc starts)
        if started is not None:
            started.set()
        yield

    with reporting(None):
        spec, _, options = build(vopts)
        if entry is not None:
            options = replace(options, entry=entry)
        # its SASS's nvdisasm run started as soon as nvcc has made the cubin (read below)
        with while_nvcc_runs(nvcc_runs, made=disassembly_made):
            head = compile_head(spec, device, options, vopts.nvcc)
    # the variant's SASS (the emulator's block costs), read by this thread once the variant is
    # handed over (:meth:`Ahead.submit`); a failure is left for the trace, which reads it again
    sass = SassAhead(head.module, head.head.kernel, head.toolchain, registers=False, thread=False)
    return Built(spec, options, head, sass)


def _build_into(
    out: Future[Built],
    vopts: KernelOptions,
    device: Any,
    job: _Job | None = None,
    entry: str | None = None,
) -> None:
    """``vopts`` built into ``out`` (unless it was cancelled first), then its SASS read: the
    caller may trace the variant while this thread reads it, before the next compile.
    ``job``: told as nvcc starts, and when this is over (:class:`_Job`)."""
    try:
        if not out.set_running_or_notify_cancel():
            return
        if job is not None:
            _NVCC_STARTED.set(job.started)  # (this thread's context: a copy, per job)
        try:
            built = _build(vopts, device, entry)
        except BaseException as exc:
            out.set_exception(exc)
            return
        out.set_result(built)
        if job is not None:
            job.started.set()  # (a compile cache hit: no nvcc ran)
        if built.sass is not None:
            built.sass.read()
    finally:
        if job is not None:
            job.over()


class _Job:
    """One compile of an :class:`Ahead` thread: ``started`` is set as its nvcc starts (or
    once it is over, whatever happened); :meth:`over` tells the thread's count of jobs."""

    def __init__(self, ahead: Ahead) -> None:
        self.started = threading.Event()
        self._ahead = ahead

    def over(self) -> None:
        self.started.set()
        with self._ahead._lock:
            self._ahead._pending -= 1


UNTIL_NVCC_S = 0.5
"""How long :meth:`Ahead.submit` with ``until_nvcc`` waits at most for the compile's nvcc to
start (the variant's spec and the compile cache's lookup take about 0.015 CPU-s)."""


class Ahead:
    """One thread compiling the variants handed to :meth:`submit`, in order, each one's SASS
    read once it is handed over and before the next is compiled; ``with Ahead() as a:`` waits
    for it at the end (a compile not wanted any more is cancelled if not started)."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gpuadvise-variant")
        self._futures: list[Future[Built]] = []
        self._lock = threading.Lock()
        self._pending = 0  # jobs submitted and not over (the one running included)

    def submit(
        self,
        vopts: KernelOptions,
        device: Any,
        until_nvcc: bool = False,
        entry: str | None = None,
    ) -> Future[Built]:
        """``vopts``' kernel built and compiled for ``device`` in the thread (the caller's
        context: its time budget); the future is done once it is compiled, its SASS
        (:attr:`Built.sass`) read by the thread after that. ``until_nvcc``: when the thread
        has nothing else to do, the caller waits until the compile's nvcc has started (or it
        is over; at most :data:`UNTIL_NVCC_S`): the thread's Python work before nvcc (the
        variant's spec, the compile cache's lookup) then has the interpreter to itself, where
        a caller running the rules meanwhile would take it back each time the thread waits
        on a file (issue 31: adamw_kernel1's told variant reached nvcc 0.03 s after it was
        told with the analysing thread idle, 0.16 s with it running the rules at load 10).
        ``entry``: the kernel's mangled name, its only entry assembled (:func:`_build`)."""
        run = contextvars.copy_context().run
        f: Future[Built] = Future()
        job = _Job(self)
        with self._lock:
            self._pending += 1
            alone = self._pending == 1
        self._pool.submit(run, _build_into, f, vopts, device, job, entry)
        self._futures.append(f)
        if until_nvcc and alone:
            job.started.wait(UNTIL_NVCC_S)
        return f

    def __enter__(self) -> Ahead:
        return self

    def __exit__(self, *exc: object) -> None:
        for f in self._futures:
            f.cancel()
        self._pool.shutdown(wait=True)


def life_table(module: CompiledModule, kernel: KernelInfo, tc: Toolchain) -> LifeRanges | str:
    """The kernel's life-range table (nvdisasm ``-plr``), or why it cannot be read (no
    nvdisasm, a table it cannot read). Read before :func:`sass.disassemble`, it spares that a
    run of nvdisasm (the SASS is read from the same output)."""
    from gpuadvise.errors import GpuAdviseError
    from gpuadvise.toolchain.liveness import life_ranges

    try:
        return life_ranges(module.cubin_path, kernel.mangled, tc)
    except GpuAdviseError as exc:
        return f"live registers not read: {exc.one_line()}"


def read_sass(
    module: CompiledModule, kernel: KernelInfo, tc: Toolchain, registers: bool = True
) -> tuple[LifeRanges | str | None, tuple[SassInstruction, ...]]:
    """The kernel's life-range table (``registers``; else None) and its SASS: the life ranges
    first, as nvdisasm ``-plr`` prints every instruction too, so the SASS is read from its
    output (lines from the cubin's line table) and one nvdisasm run gives both."""
    from gpuadvise.toolchain import sass

    table = life_table(module, kernel, tc) if registers else None
    return table, tuple(sass.disassemble(module.cubin_path, kernel.mangled, tc))


class SassAhead:
    """:func:`read_sass` of a compiled kernel in a thread started now (nvdisasm, a child process:
    this process goes on meanwhile); :meth:`result` waits for it. The thread imports nothing
    that :mod:`gpuadvise.analyze.warm` imports (its modules are imported before the compile).
    ``thread`` False: no thread is started, the one that made it calls :meth:`read` (it must:
    a waiter waits until then; :class:`Ahead`'s thread, after a variant's compile)."""

    def __init__(
        self,
        module: CompiledModule,
        kernel: KernelInfo,
        tc: Toolchain,
        registers: bool = True,
        thread: bool = True,
    ) -> None:
        self.key = (module.cubin_path, kernel.mangled, registers)
        self._args = (module, kernel, tc, registers)
        self._out: tuple[LifeRanges | str | None, tuple[SassInstruction, ...]] | None = None
        self._done = threading.Event()
        self.waited_s = 0.0  # this process's time waiting for the thread (wait, result)
        if thread:
            run = contextvars.copy_context().run  # the caller's time budget
            # a daemon: an interrupted analysis does not wait for nvdisasm
            threading.Thread(target=run, args=(self.read,), daemon=True).start()

    def read(self) -> None:
        """Reads the table and SASS (in the thread started, or the caller's); any error is left
        for the pipeline, which reads them again and raises it there."""
        try:
            with contextlib.suppress(BaseException):
                self._out = read_sass(*self._args)
        finally:
            self._done.set()

    def done(self) -> bool:
        """Whether the read has ended (without waiting)."""
        return self._done.is_set()

    def wait(self) -> None:
        """Waits for the read; the time this took is added to :attr:`waited_s`."""
        t0 = time.perf_counter()
        self._done.wait()
        self.waited_s += time.perf_counter() - t0

    def result(
        self, module: CompiledModule, kernel: KernelInfo, registers: bool
    ) -> tuple[LifeRanges | str | None, tuple[SassInstruction, ...]] | None:
        """The thread's table and SASS once it is done; None when it failed or read another
        kernel's (the caller reads them itself)."""
        self.wait()
        if self.key != (module.cubin_path, kernel.mangled, registers):
            return None
        return self._out


def variant_key(v: Variant) -> tuple[Any, ...]:
    """What a variant traced for its point is built from (its diff and launch; one with compile
    flags, defines or a proxy is not built so): two findings whose first candidates have the same
    key have the same variant, compiled and traced once."""
    launch = sorted((k, repr(x)) for k, x in (v.launch or {}).items())
    return (v.diff, tuple(launch), v.nvcc_flags, v.defines, v.proxy is None)


class VariantsAhead:
    """The variants whose points come from their own traces (``rules``: the rules with
    ``point_from_variant_trace``), compiled from the moment their rule is done (:meth:`told`,
    ``evaluate_rules``' ``on_findings``) in an :class:`Ahead` thread while the other rules run:
    :func:`gpuadvise.analyze.variant_trace.with_trace_points` takes them (:meth:`take`) and
    compiles any other as before. Each is built as that function builds it (the finding's first
    candidate, ``options_for``: :func:`~gpuadvise.analyze.variant_trace._variant_options` of
    the variant and a folder), so the results are the same; findings whose first candidates are
    the same variant (:func:`variant_key`: HeCBench f16sp's GA206 and GA208 both offer the one-wave
    grid-stride loop) share one compile, as they share one trace. ``entry``: the kernel's
    mangled name: a variant's ptxas assembles that entry alone, not every kernel of the file
    (:attr:`~gpuadvise.toolchain.CompileOptions.entry`: the trace reads that kernel's PTX,
    resources and SASS only; a variant that renamed it is assembled whole).

    The layout proxies given their points from their own traces (``proxy_rules``: the rules with
    ``proxy_point_from_trace``) are compiled the same way, both kernels of each, in a second
    thread (a proxy's two compiles queued ahead of a later rule's variant would delay that
    variant's trace): :func:`gpuadvise.analyze.proxy_trace.with_proxy_points` takes them
    (:meth:`take_proxy`), each side built as it builds it (``proxy_options_for``:
    :func:`~gpuadvise.analyze.proxy_trace.proxy_sides` of the proxy and a folder). HeCBench
    interleave's two GA301 proxies waited for four nvcc runs in turn after the rules.

    ``with`` closes it: the compiles waited for, the folders removed."""

    def __init__(
        self,
        options_for: Callable[[Variant, Path], KernelOptions | None],
        device: Any,
        rules: Sequence[str],
        proxy_options_for: Callable[[Proxy, Path], Sequence[KernelOptions]] | None = None,
        proxy_rules: Sequence[str] = (),
        entry: str | None = None,
    ):
        self.options_for, self.device = options_for, device
        self.entry = entry
        self.rules = frozenset(rules)
        self.proxy_options_for = proxy_options_for
        self.proxy_rules = frozenset(proxy_rules) if proxy_options_for is not None else frozenset()
        self._stack = contextlib.ExitStack()
        self._ahead = self._stack.enter_context(Ahead())
        self._proxy_ahead: Ahead | None = None
        self._builds: dict[tuple[Any, ...], tuple[KernelOptions, Future[Built]]] = {}
        self._proxies: dict[Proxy, list[tuple[KernelOptions, Future[Built]]]] = {}

    def told(self, findings: Sequence[Finding]) -> None:
        """The variants of ``findings`` (one rule's) compiled in the thread, each variant once,
        and their proxies in the other; never raises (a variant or proxy not submitted here is
        built by ``with_trace_points`` or ``with_proxy_points`` itself)."""
        import tempfile
        from pathlib import Path

        for f in findings:
            if f.rule in self.proxy_rules:
                self._told_proxy(f)
            if f.rule not in self.rules or f.variant is None or f.is_error:
                continue
            try:
                v = f.variant.candidates()[0]
                key = variant_key(v)
                if key in self._builds:  # an earlier finding's: compiled once
                    continue
                folder = tempfile.TemporaryDirectory(prefix="gpuadvise-variant-")
                tmp = self._stack.enter_context(folder)
                vopts = self.options_for(v, Path(tmp))
            except Exception:  # with_trace_points builds it, and says what failed
                continue
            if vopts is not None:
                # (the rules, run on meanwhile, wait until its nvcc has started)
                compiled = self._ahead.submit(vopts, self.device, True, self.entry)
                self._builds[key] = (vopts, compiled)

    def take(self, v: Variant) -> tuple[KernelOptions, Future[Built]] | None:
        """The options and compile of the variant ``v`` (a finding's first candidate), if
        :meth:`told` submitted it."""
        return self._builds.get(variant_key(v))

    def _told_proxy(self, f: Finding) -> None:
        """``f``'s proxy, both kernels, compiled in the proxies' thread (once a proxy), when
        ``with_proxy_points`` will trace it (a proxy variant, an estimate, no error)."""
        import tempfile
        from pathlib import Path

        if f.variant is None or f.variant.proxy is None or f.estimated_speedup is None:
            return
        if f.is_error or f.variant.proxy in self._proxies or self.proxy_options_for is None:
            return
        proxy = f.variant.proxy
        try:
            folder = tempfile.TemporaryDirectory(prefix="gpuadvise-proxy-")
            sides = self.proxy_options_for(proxy, Path(self._stack.enter_context(folder)))
        except Exception:  # with_proxy_points writes and builds it, and says what failed
            return
        if self._proxy_ahead is None:
            self._proxy_ahead = self._stack.enter_context(Ahead())
        ahead = self._proxy_ahead
        self._proxies[proxy] = [(side, ahead.submit(side, self.device)) for side in sides]

    def take_proxy(self, proxy: Proxy) -> list[tuple[KernelOptions, Future[Built]]] | None:
        """The options and compiles of ``proxy``'s two kernels (before, after), if :meth:`told`
        submitted them."""
        return self._proxies.get(proxy)

    def __enter__(self) -> VariantsAhead:
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()
