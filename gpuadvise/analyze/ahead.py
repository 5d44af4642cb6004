"""Variants compiled ahead of their traces (issue 31: the median corpus kernel's wall on a 2-core
machine).

A variant's point from its own trace (:mod:`gpuadvise.analyze.variant_trace`) compiles the
variant (nvcc: about a CPU-second, in a child process) and then traces it on the emulator (this
process). One after the other, this process waited for every nvcc, and nvcc waited for the
kernel's own launch model (``before``) and for the previous variant's trace. :class:`Ahead`
compiles the variants one after another in a thread while this one works: the first variant's
nvcc runs while the kernel's side of the launch model is computed, the second's while the first
is traced. The thread only compiles (nvcc, ptxas' resources, the occupancy: no emulation, no
import the analysis has not made already), and shows no progress (the display's steps nest in
one thread). Each variant is compiled exactly as before: the results are the same.
"""

from __future__ import annotations

import contextvars
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from gpuadvise.analyze.head import CompiledHead
    from gpuadvise.analyze.options import KernelOptions
    from gpuadvise.spec.kernel_spec import KernelSpec
    from gpuadvise.toolchain import CompileOptions


@dataclass(frozen=True)
class Built:
    """A variant's spec and compile options (:func:`gpuadvise.analyze.options.build`) and its
    kernel compiled for the device (:func:`gpuadvise.analyze.head.compile_head`)."""

    spec: KernelSpec
    options: CompileOptions
    head: CompiledHead


def _build(vopts: KernelOptions, device: Any) -> Built:
    from gpuadvise.analyze.head import compile_head
    from gpuadvise.analyze.options import build
    from gpuadvise.spec.progress import reporting

    with reporting(None):
        spec, _, options = build(vopts)
        return Built(spec, options, compile_head(spec, device, options, vopts.nvcc))


class Ahead:
    """One thread compiling the variants handed to :meth:`submit`, in order; ``with Ahead() as
    a:`` waits for it at the end (a compile not wanted any more is cancelled if not started)."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gpuadvise-variant")
        self._futures: list[Future[Built]] = []

    def submit(self, vopts: KernelOptions, device: Any) -> Future[Built]:
        """``vopts``' kernel built and compiled for ``device`` in the thread (the caller's
        context: its time budget)."""
        run = contextvars.copy_context().run
        f = self._pool.submit(run, _build, vopts, device)
        self._futures.append(f)
        return f

    def __enter__(self) -> Ahead:
        return self

    def __exit__(self, *exc: object) -> None:
        for f in self._futures:
            f.cancel()
        self._pool.shutdown(wait=True)
