"""Arithmetic intensity of a loop fed from shared memory: loads per FMA, and what a register tile
makes of them (GA310).

A thread that computes one output of a matrix product loads one value of each operand for each
FMA: two shared loads per FMA, where the FP32 pipe completes four warp FMAs a clock per SM and the
shared data path one wavefront (32 lanes of 4 bytes). A thread that computes a ``T x T`` tile of
outputs loads ``T`` values of each operand per k step and makes ``T * T`` FMAs of them: its loads
per FMA are ``1 / T`` of one output's. :class:`LoopIntensity` holds a launch's counts per CTA;
:func:`fma_lines` finds the kernel-body lines whose PTX holds a multiply-add.

Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from gpuadvise.ptx.parser import Instr, Label

__all__ = ["MATH_PIPES", "TILES", "LoopIntensity", "choose_tile", "fma_lines", "is_multiply_add"]

MATH_PIPES = ("fp32", "fp16", "fp64", "tensor")
"""The pipes of a multiply-add's arithmetic (FFMA, HFMA2, DFMA, HMMA/DMMA)."""

TILES = (2, 4, 8)
"""The register tiles (outputs per thread along each side) the advice chooses from: beyond 8 x 8
the accumulators alone take 64 registers and more, and occupancy falls."""

_FLOATS = ("f32", "f64", "f16", "f16x2", "bf16", "bf16x2")


def is_multiply_add(ins: Instr) -> bool:
    """A float multiply-add (``fma.rn.f32``, ``mad.f32``, ``fma.rn.f16x2`` ...) or a matrix
    multiply-accumulate (``mma``, ``wmma.mma``, ``wgmma``)."""
    parts = ins.opcode.split(".")
    if parts[0] in ("mma", "wgmma") or (parts[0] == "wmma" and "mma" in parts[1:2]):
        return True
    return parts[0] in ("fma", "mad") and any(p in _FLOATS for p in parts[1:])


def fma_lines(
    body: Iterable[Instr | Label],
    files: dict[int, str],
    same_file: Callable[[str | None], bool],
) -> frozenset[int]:
    """The kernel-body lines (the outermost call site of inlined code) of ``body``'s float
    multiply-adds and matrix multiply-accumulates, in the source file ``same_file`` accepts."""
    out: set[int] = set()
    for ins in body:
        if not isinstance(ins, Instr) or not is_multiply_add(ins):
            continue
        loc = ins.call_sites[-1] if ins.call_sites else ins.loc
        if loc is not None and loc.line > 0 and same_file(files.get(loc.file)):
            out.add(loc.line)
    return frozenset(out)


@dataclass(frozen=True)
class LoopIntensity:
    """A launch's multiply-adds and the loads that feed them, per CTA (warp instructions):
    ``fmas`` on the math pipes at the lines that hold a multiply-add; ``shared_loads`` and
    their ``shared_wavefronts`` (the shared data path's cycles); ``shared_stores`` and their
    wavefronts (the tile's staging, which a register tile does not change per FMA here)."""

    fmas: float
    shared_loads: float
    shared_wavefronts: float
    shared_store_wavefronts: float = 0.0

    @property
    def loads_per_fma(self) -> float:
        """Shared warp loads per warp multiply-add."""
        return self.shared_loads / self.fmas if self.fmas > 0 else float("inf")

    def tiled(self, tile: int) -> LoopIntensity:
        """The same multiply-adds from a ``tile x tile`` register tile per thread (``tile``
        times the outputs along each side of what a thread computes now): each value loaded
        serves ``tile`` multiply-adds, so the loads and their wavefronts are ``1 / tile``."""
        t = max(int(tile), 1)
        return LoopIntensity(
            self.fmas, self.shared_loads / t, self.shared_wavefronts / t,
            self.shared_store_wavefronts,
        )  # fmt: skip


def choose_tile(data_path_over_fma: float, ctas: int = 0, sm_count: int = 0) -> int:
    """The smallest register tile of :data:`TILES` whose loads put the shared data path at or
    under the FMA pipe's time (``data_path_over_fma / tile <= 1``), else the largest, among
    those that leave the launch at least a CTA per SM (``ctas / tile**2 >= sm_count``: a tile
    of ``T x T`` outputs per thread with the same threads per CTA makes ``T**2`` times fewer
    CTAs; an 8 x 8 tile of a 1024 x 1024 product is 64 CTAs of 128 x 128, half the SMs of an
    H200 idle, measured 1.34x where 4 x 4 is 2.38x); the smallest tile when none does."""
    ordered = [t for t in sorted(TILES) if not sm_count or ctas / (t * t) >= sm_count]
    if not ordered:
        return min(TILES)
    for t in ordered:
        if data_path_over_fma / t <= 1.0:
            return t
    return ordered[-1]
