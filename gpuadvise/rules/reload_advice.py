"""GA309's words and its register fix: why a thread's reload stayed (from the trace and the
load's opcode), the finding's message, which second passes registers cannot hold, and the
automatic variant that loads a loop's values once into registers (:mod:`gpuadvise.source.
fixkit_hoist`) where no store of the thread's forces the reload.

The rule's per-line facts (its ``ReloadLine`` details) are read through :class:`ReloadFacts`."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from gpuadvise.arrays import distinct
from gpuadvise.rules.findings import Variant
from gpuadvise.source import fixkit
from gpuadvise.source.edit import Rewrite
from gpuadvise.source.fixkit_fuse import plan_fuse
from gpuadvise.source.fixkit_hoist import HoistPlan, plan_hoist
from gpuadvise.source.text import KernelSource
from gpuadvise.trace.view import SECTOR, Lanes
from gpuadvise.words import counted, lines_text

__all__ = [
    "MAX_HELD",
    "NEAR",
    "ReloadFacts",
    "coalesced_lanes",
    "fuse_variant",
    "hoist_variant",
    "is_pass",
    "reload_message",
    "reload_variant",
    "reload_why",
    "wide_pass",
]

NEAR = 16
"""A thread's global accesses between a load and its reload up to which a register would hold
the value (beyond: a pass over a row, held in registers only when its length is known)."""

MAX_HELD = 64
"""Values a thread can keep in registers across a pass (of the 255 a thread may have): a
second pass over more of them per thread is not reported."""


class ReloadFacts(Protocol):
    """A line's reloads of one buffer (GA309's ``ReloadLine``)."""

    @property
    def line(self) -> int: ...
    @property
    def buffer(self) -> str: ...
    @property
    def lanes(self) -> int: ...
    @property
    def addresses(self) -> int: ...
    @property
    def threads(self) -> int: ...
    @property
    def after_store(self) -> int: ...
    @property
    def stored_between(self) -> int: ...
    @property
    def same_inst(self) -> int: ...
    @property
    def previous_line(self) -> int: ...
    @property
    def store_line(self) -> int: ...
    @property
    def store_buffer(self) -> str: ...
    @property
    def read_only(self) -> bool: ...
    @property
    def gap(self) -> float: ...


def _store_forced(x: ReloadFacts) -> bool:
    return x.gap <= NEAR and x.stored_between * 2 >= x.lanes and not x.read_only


def is_pass(x: ReloadFacts) -> bool:
    """The reload re-reads what an earlier pass over the row read (not a value just stored
    with an aliasing store in between, nor the same load in each iteration of a loop)."""
    return not _store_forced(x) and not x.same_inst * 2 >= x.lanes


def wide_pass(x: ReloadFacts) -> bool:
    """A pass over more values a thread than its registers hold (:data:`MAX_HELD`)."""
    return is_pass(x) and x.addresses > MAX_HELD * max(x.threads, 1)


def coalesced_lanes(lanes: Lanes, lane: np.ndarray) -> bool:
    """The requests of ``lanes[lane]`` read distinct addresses (at least half as many as
    their lanes: no broadcast of one row to every thread) and use at least half of the bytes
    of the sectors they touch (adjacent lanes: no row per lane)."""
    if not len(lane):
        return False
    rec = lanes.rec[lane].astype(np.int64)
    off = lanes.off[lane].astype(np.int64)
    span = int(off.max()) + 1
    addresses = len(distinct(rec * span + off))
    sectors = len(distinct(rec * (span // SECTOR + 1) + off // SECTOR))
    used = float(lanes.width[lane].sum())
    return addresses * 2 >= len(lane) and used * 2 >= sectors * SECTOR


def _per_thread(x: ReloadFacts) -> str:
    return counted(max(round(x.addresses / max(x.threads, 1)), 1), "value")


def reload_why(x: ReloadFacts) -> str:
    """Why the compiler left the reload, from the trace and the load's opcode."""
    if _store_forced(x):
        what = f"`{x.store_buffer}`" + (f" (line {x.store_line})" if x.store_line else "")
        return (
            f"the thread stores to {what} in between and the load is not read-only "
            "(`ld.global`, not `ld.global.nc`): without `__restrict__` the compiler must assume "
            "that store may change the value"
        )
    if x.same_inst * 2 >= x.lanes:
        return (
            "the same load instruction runs again in each iteration of an enclosing loop: the "
            f"compiler keeps the thread's {_per_thread(x)} in no register across it"
        )
    if wide_pass(x):
        return (
            f"line {x.previous_line} read it already, a pass before ({_per_thread(x)} a thread, "
            f"more than its registers hold): fuse the passes (one pass doing what both do: an "
            "online max and sum for a softmax) or keep the row in shared memory where it fits"
        )
    return (
        f"line {x.previous_line} read it already, a pass before ({_per_thread(x)} a thread, "
        f"{x.gap:.0f} global accesses apart: registers hold them only when their count is "
        "known at compile time)"
    )


def reload_message(lines: Sequence[ReloadFacts], share: float) -> str:
    top = lines[0]
    per = top.lanes / max(top.addresses, 1) + 1
    had = "stored" if top.after_store * 2 >= top.lanes else "loaded"
    others = sorted({x.line for x in lines[1:] if x.line != top.line})
    also = f" (also at {lines_text(others)}" if others else ""
    bufs = sorted({x.buffer for x in lines[1:]} - {top.buffer})
    if bufs:
        also += (", " if also else " (") + "of " + ", ".join(f"`{b}`" for b in bufs)
    also += ")" if also else ""
    why = reload_why(top)
    tail = (
        "Load the value once into a register and reuse it (hoist the load out of the loop, "
        "keep what the thread stored); `const __restrict__` on the read-only pointers lets the "
        "compiler do it where the buffers never overlap (the trace shows no overlap in this "
        "launch: an assumption about the others)"
    )
    return (
        f"`{top.buffer}` reloaded by the thread that {had} the value already: {per:.1f} loads "
        f"per address and thread ({top.addresses} in the sampled CTAs){also}, no other thread "
        f"storing to it in between; reloads are {share:.0%} of the kernel's global load "
        f"requests. {why[0].upper()}{why[1:]}" + ("" if wide_pass(top) else f". {tail}")
    )


def reload_variant(
    ks: KernelSource | None,
    lines: Sequence[ReloadFacts],
    path: str,
    sampled: bool = False,
    forwarded: frozenset[int] = frozenset(),
) -> Variant:
    """GA309's variant for its top line: display-only for a pass over more values than
    registers hold (fuse the passes); ``__restrict__`` on the kernel's pointers where a store of
    the thread's in between forces the reload (the compiler must assume the pointers alias);
    else (no such store, or the pointers are ``__restrict__`` already) the values loaded once
    into registers (:func:`hoist_variant`). ``ks``: None where the source is not at hand;
    ``sampled``: the emulator sampled the launch's long loops (see :func:`hoist_variant`);
    ``forwarded``: the lines whose reloads the trace shows reading back, iteration by
    iteration, what the thread's stores of the loop before wrote (:func:`fuse_variant`, tried
    where registers cannot hold the pass and where the hoist is refused)."""
    top = lines[0]
    if wide_pass(top) or top.line in forwarded:
        # the pass that reads back what the loop before stored: fused with it (any line of
        # the finding where registers cannot hold the top line's pass)
        only = forwarded if wide_pass(top) else frozenset({top.line})
        fused = fuse_variant(ks, lines, path, only, sampled)
        if fused is not None:
            return fused
    if wide_pass(top):
        return Variant(
            "display-only",
            f"read the row once: fuse the passes over `{top.buffer}` (what line "
            f"{top.previous_line}'s pass computes and what line {top.line}'s does, in one pass: "
            f"an online max and sum for a softmax), as {_per_thread(top)} a thread are more than "
            "its registers hold",
        )
    advice = (
        f"load `{top.buffer}[...]` once into a register (before the loop, or keep the value "
        "the thread stored) and reuse it; declare read-only pointers `const __restrict__` "
        "when the buffers never overlap (an assumption about every launch: the trace shows "
        "this one only)"
    )
    if ks is None:
        return Variant("display-only", advice)
    rw = ks.rewrite()
    if (
        top.stored_between * 2 < top.lanes
        or ks.kernel is None
        or fixkit.insert_restrict(ks.tree, rw, ks.kernel) == 0
    ):
        return hoist_variant(ks, lines, advice, path, sampled, forwarded)
    return Variant(
        "automatic-and-verified",
        f"`__restrict__` on the kernel's pointer parameters, so that the compiler may keep "
        f"`{top.buffer}[...]` in a register across the store to `{top.store_buffer}`: the "
        "outputs are checked against the kernel's for this launch, where no two of its "
        "buffers overlap; `__restrict__` promises that for every launch (check the callers "
        f"before keeping it). Otherwise: {advice}",
        diff=rw.diff(path),
    )


def hoist_variant(
    ks: KernelSource,
    lines: Sequence[ReloadFacts],
    advice: str,
    path: str,
    sampled: bool = False,
    forwarded: frozenset[int] = frozenset(),
) -> Variant:
    """The top line's loop values loaded once into registers (and every other line's whose
    loops the rewrite leaves apart), automatic and verified; display-only with the reason
    where the fix kit refuses the top line, and display-only with its diff where the emulator
    sampled the launch's long loops (``sampled``: the check of a rewrite runs every iteration
    of the traced CTAs, far longer there: HeCBench's contraction took 14 minutes, rejected)."""
    if ks.kernel is None or not lines:
        return Variant("display-only", advice)
    taken: set[str] = set()
    plans: list[HoistPlan] = []
    for i, x in enumerate(lines):
        span = (ks.tree.line_start(x.line), ks.tree.line_start(x.line + 1))
        p = plan_hoist(ks.tree, span, x.buffer, ks.kernel, x.addresses / max(x.threads, 1), taken)
        if isinstance(p, str):
            if i == 0:
                fused = fuse_variant(ks, lines, path, forwarded, sampled)
                return fused or Variant("display-only", f"{advice} (not rewritten: {p})")
            continue
        if not any(p.overlaps(q) for q in plans):
            plans.append(p)
    rw = Rewrite(ks.text)
    for p in plans:
        p.apply(rw)
    top, loads = plans[0], [ld for p in plans for ld in p.loads]
    where = (
        "before the loop around it"
        if top.shape == "nested"
        else f"before the first of its {top.loops} passes"
    )
    arrays = ", ".join(f"`{a}[{p.cap}]`" for p in plans for a in p.arrays)
    need = math.ceil(lines[0].addresses / max(lines[0].threads, 1))
    check = (
        "The outputs are checked against the kernel's for this launch; the rewrite assumes no "
        "other pointer of the kernel stores to the hoisted buffers, which the check covers for "
        "this launch only"
        if not sampled
        else "Not verified here: the emulator sampled this launch's long loops, and checking "
        "the rewrite would run every iteration of them (check it on a GPU); it assumes no other "
        "pointer of the kernel stores to the hoisted buffers"
    )
    return Variant(
        "display-only" if sampled else "automatic-and-verified",
        f"{', '.join(f'`{ld}`' for ld in loads)} loaded once into registers ({arrays}) "
        f"{where}; each run of the loop becomes {top.cap} unrolled, guarded iterations that "
        f"read the registers (compile-time indices: the array stays in registers), then the "
        f"original loop for the iterations past {top.cap} (this launch: about {need} a thread). "
        + check
        + ". Whether it pays depends on the registers the arrays take (measured on an H200: "
        "1.12x on kmeans' membership, 0.72x and 0.78x on HeCBench ga and softMax2, 1.00x on "
        "HeCBench contraction): --fix "
        "applies it only where a GPU measured it faster",
        diff=rw.diff(path),
        needs_measurement=True,
    )


def fuse_variant(
    ks: KernelSource | None,
    lines: Sequence[ReloadFacts],
    path: str,
    forwarded: frozenset[int],
    sampled: bool = False,
) -> Variant | None:
    """The first line of ``forwarded`` (reloads the trace shows reading back, iteration by
    iteration, what the loop before stored) whose loop the fix kit fuses with that loop
    (:func:`gpuadvise.source.fixkit_fuse.plan_fuse`), automatic and verified; None where there
    is none. A pass over the buffer goes; the finding's other reloads stay. ``sampled``: the
    emulator sampled the launch's long loops, so the check is left to a GPU measurement (an
    emulator check would run every iteration of them)."""
    if ks is None or ks.kernel is None:
        return None
    line = ks.tree.line_start
    for x in lines:
        if x.line not in forwarded or not x.previous_line:
            continue
        span = (line(x.line), line(x.line + 1))
        stored = (line(x.previous_line), line(x.previous_line + 1))
        p = plan_fuse(ks.tree, stored, span, x.buffer, set(), ks.kernel)
        if isinstance(p, str):
            continue
        rw = Rewrite(ks.text)
        p.apply(rw)
        rest = sorted({y.line for y in lines} - {x.line})
        moved = f" (`{'`, `'.join(p.moved)}` moved before it)" if p.moved else ""
        wide = any(wide_pass(y) for y in lines if y.line != x.line)
        left = f"; the other reloads ({lines_text(rest)}) stay" if rest else ""
        if wide:
            left += ": fusing those passes is an online max and sum, not an edit"
        return Variant(
            "automatic-and-verified",
            f"the loop of line {x.line} fused into the loop before it (line "
            f"{x.previous_line}'s, the same header)"
            f"{moved}: `{p.reload}` read as `{p.store}` right after its store, a value the "
            f"compiler keeps in a register, so the pass that read `{x.buffer}` back is gone"
            f"{left}. The outputs are checked against the kernel's for this launch; the trace "
            "shows each iteration reading back what the same iteration of the thread stored, "
            "with no other thread storing there, in this launch only (measured on an H200: "
            "1.20x on llm.c's softmax_forward_kernel4, outputs bit-identical)"
            + (" (on a GPU: the emulator sampled this launch's long loops)" if sampled else ""),
            diff=rw.diff(path),
            needs_measurement=sampled,
        )
    return None
