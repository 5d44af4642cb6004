"""GA206's family (one element per thread): the details its detect hands on, the line a finding
is reported at, the words of its message, and its variants (a grid-stride loop over the
original CTA indices with scalar or vector loads, a per-block reduction's load phase made a
grid-stride accumulation, or the launch alone for a kernel that loops already). The trace's
reading of each buffer and the rewrites themselves are :mod:`gpuadvise.rules.grid_stride`'s."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from gpuadvise.arrays import distinct
from gpuadvise.rules.context import RuleContext
from gpuadvise.rules.details import FindingDetails
from gpuadvise.rules.findings import Variant
from gpuadvise.rules.grid_stride import (
    PREFIX,
    VECTORS,
    VectorLoad,
    elementwise_diff,
    elementwise_vector_diff,
    grid_bound,
    hidden_block_reads,
    index_offset,
    launch_specific,
    load_phase,
    pointee,
    reduction_diff,
    size_param,
    vector_load,
    vector_reduction_diff,
)
from gpuadvise.source.text import KernelSource
from gpuadvise.trace.access import Kind

PER_ITERATION = (4, 1, 2, 8)
"""Elements per thread and loop iteration offered (the first is the variant shown; the
measurement stage keeps the fastest verified one)."""

VECTOR_PER_ITERATION = ((2, 1, 4), (2,))
"""Vector loads per thread and iteration offered for a per-block reduction, for the widest
vector type of the element (16 bytes) and the next (8 bytes); the first is the variant shown."""

COMBINES = ("per-block", "total", "segmented")
"""The kinds whose CTAs combine their elements (a tree, shared atomics) before one result."""

_WORDS = {1: "one element", 2: "two elements", 3: "three elements", 4: "four elements"}
_ALIAS = re.compile(r"\s*(?:\(\s*[A-Za-z_][\w\s]*\)\s*)?\(?\s*blockIdx\s*\.\s*x\s*\)?\s*")
_GRIDDIM_YZ = re.compile(r"\bgridDim\s*\.\s*[yz]\b")


@dataclass(frozen=True)
class OneElement(FindingDetails):
    """``kind``: ``elementwise`` (every written buffer streamed, no shared memory, no atomics),
    ``per-block`` (CTAs write per-block results: a reduction's partial sums), ``segmented``
    (per-block results made with inputs of the CTA's own), ``total`` (CTAs combine in shared
    memory and add into the same outputs with atomics: ``totals``) or ``other``;
    ``elements_per_thread``: 1 to 4; the buffers; ``wave_ctas``: the grid of the variant."""

    kind: str
    elements_per_thread: int
    streamed: tuple[str, ...]
    per_block: tuple[str, ...]
    wave_ctas: int
    loads_per_warp: float
    grid_stride: bool = False  # the kernel loops already: one wave is a launch change alone
    totals: tuple[str, ...] = ()


def elements(k: int) -> str:
    return _WORDS.get(k, f"{k} elements")


def report_line(ctx: RuleContext, streamed: Sequence[str], stride: bool) -> int | None:
    """Where the finding is reported: for a kernel that loops (a grid-stride loop), the header
    of the outermost loop around its first load of a streamed buffer (from the trace: where
    each thread takes its elements); otherwise the kernel's first read of its block's position
    (the index statement), past a declaration that only names it (``nid = blockIdx.x``) to the
    first statement that uses that name."""
    ks = ctx.kernel_source
    if stride:
        line = _loop_line(ctx, ks, streamed)
        if line is not None:
            return line
    off = index_offset(ks)
    return ctx.kernel_line if off is None else ks.line_at(_past_alias(ks, off))


def _loop_line(ctx: RuleContext, ks: KernelSource, streamed: Sequence[str]) -> int | None:
    view = ctx.trace_view
    ids = [b for b, n in enumerate(view.buffer_names) if n in streamed]
    lanes = view.lanes
    loads = np.isin(view.lane_buffer, ids) & (view.records["kind"][lanes.rec] == int(Kind.LOAD))
    lo, hi = ks.line_at(ks.body_start), ks.line_at(ks.body_end)
    lines = [
        ln
        for i in distinct(lanes.inst[loads])
        for f, ln in [view.inst_line[int(i)]]
        if ln is not None and lo <= ln <= hi and ctx.same_file(f)
    ]
    if not lines:
        return None
    first = min(lines)
    around = [
        ks.line_at(lp.span[0])
        for lp in ks.loops()
        if ks.line_at(lp.span[0]) <= first <= ks.line_at(max(lp.span[1] - 1, lp.span[0]))
    ]
    return min(around) if around else None


def _past_alias(ks: KernelSource, off: int) -> int:
    code = ks.code
    for d in ks.declarations(within=(ks.body_start, ks.body_end)):
        for x in d.declarators:
            if x.init is None or not x.init[0] <= off < x.init[1]:
                continue
            if not _ALIAS.fullmatch(code[x.init[0] : x.init[1]]):
                return off
            use = re.compile(rf"\b{re.escape(x.name)}\b").search(code, d.span[1], ks.body_end)
            return use.start() if use else off
    return off


def kind_text(
    ctx: RuleContext, kind: str, d: OneElement, own_inputs: Sequence[str], total_ctas: int
) -> str:
    """What the message says the kernel is."""
    gx, gy, gz = one_wave_grid(ctx, d.wave_ctas)
    after = gx * gy * gz
    names = ", ".join(f"`{n}`" for n in d.per_block)
    sums = ", ".join(f"`{n}`" for n in d.totals)
    return {
        "elementwise": "an element-wise kernel",
        "per-block": f"a per-block reduction (each CTA writes one partial result to {names}: "
        f"a grid of one wave leaves {after} partials instead of {total_ctas}, whose sum "
        "is the same)",
        "segmented": f"a reduction per segment (each CTA combines its elements into {names} at "
        "its own index, with inputs of its own: "
        + ", ".join(f"`{n}`" for n in own_inputs)
        + "), so the CTA count is the segment count: give each segment a warp (its lanes "
        "loop over the segment's elements and combine with __shfl_down_sync) or several "
        "segments to a CTA",
        "total": "a reduction into totals (each CTA combines its elements in shared memory, "
        f"then adds the result to {sums} with atomics: a grid of one wave makes "
        f"{after} CTA updates of them instead of {total_ctas}, whose sum is the same)",
        "other": "a kernel whose outputs depend on the grid (shared memory or atomics)",
    }[kind]


def one_wave_grid(ctx: RuleContext, wave: int) -> tuple[int, int, int]:
    """The launch's grid with ``gridDim.x`` cut so that the whole grid is about one wave (at
    least one CTA in x: ``gridDim.y`` and ``z`` stay)."""
    g = ctx.launch.grid
    rest = max(int(g.y) * int(g.z), 1)
    return max(1, min(int(g.x), wave // rest)), int(g.y), int(g.z)


def advice(ctx: RuleContext, d: OneElement, sms: int) -> str:
    """The message's advice: the launch alone for a kernel that loops, else a loop."""
    wave = d.wave_ctas
    per = f": {sms} SMs x {wave // sms}" if sms else ""
    if d.kind == "segmented":
        return ""
    if d.grid_stride:
        gx, gy, gz = one_wave_grid(ctx, wave)
        grid = f"{gx} x {gy}" + (f" x {gz}" if gz > 1 else "") + " CTAs, "
        return (
            ". The kernel loops over the array already (a grid-stride loop): launch it with one "
            + (
                f"wave ({grid}one wave is {wave}{per})"
                if gy * gz > 1
                else f"wave ({wave} CTAs{per})"
            )
            + " and each thread takes several elements"
        )
    return f". Loop over the array with a grid of one wave ({wave} CTAs{per}) and several elements per thread"


def one_element_variant(ctx: RuleContext, d: OneElement) -> Variant:
    """The variant of a GA206 finding (see the rule's "Fix safety")."""
    threads = int(ctx.launch.block.x)
    grid = int(ctx.launch.grid.x)
    ks = ctx.kernel_source
    hidden = hidden_block_reads(ks)
    bound, derived = grid_bound(ctx, ks, d.elements_per_thread * threads, grid)
    note = (
        ""
        if derived
        else f". Launch-specific: no kernel parameter gives the original grid, so its {grid} "
        f"CTAs are written into the kernel (const unsigned {PREFIX}blocks = {grid}u): the "
        "fixed kernel is right for this launch only; compute the count from the array's "
        "size in your code"
    )
    wave = d.wave_ctas
    if d.grid_stride:
        return _launch_variant(ctx, d)
    if d.kind == "elementwise":
        if hidden is not None:
            return Variant(
                "display-only",
                f"a grid-stride loop launched with {wave} CTAs, several elements per thread "
                f"(not rewritten automatically: {hidden})",
            )
        cands = _elementwise_vectors(ctx, d, grid, note)
        for k in PER_ITERATION:
            diff = elementwise_diff(ks, bound, k, ctx.source_file)
            if diff is None:
                continue
            g = max(1, min(wave, -(-grid // k)))
            cands.append(
                Variant(
                    "automatic-and-verified",
                    f"a grid-stride loop over the original {grid} CTA indices, {k} per thread "
                    f"and iteration, launched with {g} CTAs (one wave); the body is "
                    f"unchanged{note}",
                    diff=diff,
                    launch={"grid": [g, 1, 1]},
                    label=f"k={k}",
                )
            )
        if not cands:
            return Variant("display-only", f"a grid-stride loop launched with {wave} CTAs")
        return launch_specific(replace(cands[0], alternatives=tuple(cands[1:])), derived)
    if d.kind == "per-block" and hidden is None and int(ctx.launch.grid.y) == 1:
        return launch_specific(_reduction_variant(ctx, d, bound, note), derived)
    if d.kind == "segmented":
        return Variant(
            "display-only",
            "a warp per segment (lane l reads elements l, l + 32, ... of it and the lanes "
            "combine with __shfl_down_sync), or several segments to a CTA: the CTA count "
            "stays the segment count, so the kernel's indexing must be rewritten for it",
        )
    return Variant(
        "display-only",
        f"a grid-stride loop launched with {wave} CTAs, several elements per thread; the "
        "kernel's outputs depend on the grid, so it must be rewritten for it"
        + (f" ({hidden})" if hidden else ""),
    )


def _launch_variant(ctx: RuleContext, d: OneElement) -> Variant:
    """A kernel that loops over its array already: the same kernel launched with one wave."""
    g = ctx.launch.grid
    gx, gy, gz = one_wave_grid(ctx, d.wave_ctas)
    shown = f"{gx}" if gy * gz == 1 else f"{gx} x {gy}" + (f" x {gz}" if gz > 1 else "")
    was = f"{int(g.x)}" if gy * gz == 1 else f"{int(g.x)} x {gy}" + (f" x {gz}" if gz > 1 else "")
    if gy * gz > 1 and _GRIDDIM_YZ.search(ctx.kernel_source.body):
        return Variant(
            "display-only",
            f"the same kernel launched with about one wave of CTAs ({d.wave_ctas}) instead of "
            f"{int(g.x) * gy * gz}: its loop reads gridDim.y or gridDim.z, so which dimension "
            "to cut is yours to choose",
        )
    if d.kind == "total":
        what = (
            f"{', '.join(f'`{n}`' for n in d.totals)} then receives {gx * gy * gz} CTA updates "
            "instead of the grid's (the same sums, added in another order)"
        )
        totals: dict[str, str] = {}
    else:
        parts = ", ".join(f"`{n}`" for n in d.per_block)
        what = (
            f"{parts} then holds {gx} partial sums instead of {int(g.x)} (verified as totals: "
            "the host or the next pass adds them)"
        )
        totals = {n: "+" for n in d.per_block}
    return Variant(
        "automatic-and-verified",
        f"the same kernel launched with {shown} CTAs (one wave) instead of {was}: its "
        f"grid-stride loop gives each thread several elements; {what}",
        launch={"grid": [min(gx, int(g.x)), gy, gz]},
        label="one wave",
        totals=totals,
    )


def _reduction_variant(ctx: RuleContext, d: OneElement, bound: str, note: str) -> Variant:
    """A per-block reduction: the load phase made a grid-stride accumulation over one wave
    of CTAs (vector loads where alignment is provable, and scalar loads, ``k`` swept), the
    tree kept once per CTA; the partials are verified as their total."""
    ks = ctx.kernel_source
    threads, grid, wave = int(ctx.launch.block.x), int(ctx.launch.grid.x), d.wave_ctas
    per_cta = d.elements_per_thread * threads
    parts = ", ".join(f"`{n}`" for n in d.per_block)
    contract = (
        f"{parts} then holds one partial sum per CTA of the new grid (gridDim.x of them, not "
        f"{grid}): the outputs are verified as the sum of the partials each grid writes, and "
        "the host (or the next pass) must add the gridDim.x partials"
    )
    text = (
        f"accumulate every element the thread covers in a grid-stride loop, then run the "
        f"tree once; launch one wave of CTAs ({wave}); {contract}{note}"
    )
    lp = load_phase(ks)
    if isinstance(lp, str):
        return Variant("display-only", f"{text} (not rewritten: {lp})")
    totals = {n: "+" for n in d.per_block}
    cands: list[Variant] = []
    size = size_param(ctx, ks, per_cta, grid)
    loaded = [n for n in d.streamed if n not in d.per_block]
    vec: VectorLoad | str = (
        "no size parameter gives the grid"
        if size is None
        else "not one streamed input buffer"
        if len(loaded) != 1
        else vector_load(ks, lp, loaded[0], size)
    )
    if isinstance(vec, VectorLoad):
        for (width, vtype), ks_ in zip(vec.vectors, VECTOR_PER_ITERATION, strict=False):
            for k in ks_:
                diff = vector_reduction_diff(ks, lp, vec, width, vtype, k, ctx.source_file)
                if diff is None:
                    continue
                g = max(1, min(wave, -(-grid * per_cta // (width * k * threads))))
                cands.append(
                    Variant(
                        "automatic-and-verified",
                        f"a grid-stride loop reading `{vec.buffer}` as {vtype} ({k} per "
                        f"thread and iteration; the last {size} % {width} elements one by "
                        f"one), launched with {g} CTAs (one wave), the tree once per CTA. "
                        f"Assumes `{vec.buffer}` is 16-byte aligned (a kernel pointer "
                        "parameter: cudaMalloc'd memory is 256-byte aligned; an offset "
                        f"pointer would not be); {contract}",
                        diff=diff,
                        launch={"grid": [g, 1, 1]},
                        label=f"{vtype} k={k}",
                        totals=totals,
                    )
                )
    for k in PER_ITERATION:
        diff, why = reduction_diff(ks, bound, ctx.source_file, k)
        if diff is None:
            return Variant("display-only", f"{text} (not rewritten: {why})")
        g = max(1, min(wave, -(-grid // k)))
        cands.append(
            Variant(
                "automatic-and-verified",
                f"a grid-stride loop adding the values of the original {grid} CTA indices, "
                f"{k} per thread and iteration, launched with {g} CTAs (one wave), the tree "
                f"once per CTA; {contract}{note}",
                diff=diff,
                launch={"grid": [g, 1, 1]},
                label=f"k={k}",
                totals=totals,
            )
        )
    if not isinstance(vec, VectorLoad):
        cands = [replace(c, description=f"{c.description} (no vector loads: {vec})") for c in cands]
    return replace(cands[0], alternatives=tuple(cands[1:]))


def _elementwise_vectors(ctx: RuleContext, d: OneElement, grid: int, note: str) -> list[Variant]:
    """Vector-load variants of an element-wise kernel (one element per thread, every buffer a
    kernel pointer parameter read and written at the thread's linear index), widths by element
    size, ``k`` = 2 and 1 vectors per thread and iteration."""
    ks = ctx.kernel_source
    threads = int(ctx.launch.block.x)
    size = size_param(ctx, ks, threads, grid) if d.elements_per_thread == 1 else None
    if size is None:
        return []
    elems = {pointee(ks, b) for b in d.streamed}
    if len(elems) != 1 or None in elems:
        return []
    out = []
    for width, vtype in VECTORS.get(next(iter(elems)) or "", ())[:1]:
        for k in (2, 1):
            diff, _why = elementwise_vector_diff(ks, size, d.streamed, width, k, ctx.source_file)
            if diff is None:
                return []
            g = max(1, min(d.wave_ctas, -(-grid // (width * k))))
            out.append(
                Variant(
                    "automatic-and-verified",
                    f"a grid-stride loop over {vtype} vectors of "
                    f"{', '.join(f'`{b}`' for b in d.streamed)} ({k} per thread and "
                    f"iteration; the last {size} % {width} elements one by one), launched "
                    f"with {g} CTAs (one wave); each element computed by the kernel's own "
                    "statements. Assumes the buffers are 16-byte aligned (kernel pointer "
                    "parameters: cudaMalloc'd memory is 256-byte aligned; an offset pointer "
                    f"would not be){note}",
                    diff=diff,
                    launch={"grid": [g, 1, 1]},
                    label=f"{vtype} k={k}",
                )
            )
    return out
