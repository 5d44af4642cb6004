"""GA206 one-element-per-thread: a grid of many waves whose threads each handle one or two
elements, where a grid-stride loop over one wave would do the same work."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from gpuadvise.rules import (
    GRID_STRIDE_PREFIX,
    MODEL,
    VECTORS,
    Estimate,
    Evidence,
    Finding,
    FindingDetails,
    Kind,
    Rule,
    RuleContext,
    Space,
    Variant,
    VectorLoad,
    buffer_uses,
    elementwise_diff,
    elementwise_vector_diff,
    grid_bound,
    hidden_block_reads,
    index_offset,
    is_grid_stride,
    launch_estimate,
    launch_specific,
    load_phase,
    memory_rates,
    pointee,
    reduction_diff,
    size_param,
    vector_load,
    vector_reduction_diff,
    view_traffic,
)

PER_ITERATION = (4, 1, 2, 8)
"""Elements per thread and loop iteration offered (the first is the variant shown; the
measurement stage keeps the fastest verified one)."""

VECTOR_PER_ITERATION = ((2, 1, 4), (2,))
"""Vector loads per thread and iteration offered for a per-block reduction, for the widest
vector type of the element (16 bytes) and the next (8 bytes); the first is the variant shown."""

_LOADS_IN_FLIGHT = 4  # as the launch roofline's latency term (rules.estimates.LOADS_IN_FLIGHT)


# ---------------------------------------------------------------------------------------------
# What detect hands to estimate/transform


@dataclass(frozen=True)
class OneElement(FindingDetails):
    """``kind``: ``elementwise`` (every written buffer streamed, no shared memory, no atomics),
    ``per-block`` (CTAs write per-block results: a reduction's partial sums) or ``other``;
    ``elements_per_thread``: 1 or 2; the buffers; ``wave_ctas``: the grid of the variant."""

    kind: str
    elements_per_thread: int
    streamed: tuple[str, ...]
    per_block: tuple[str, ...]
    wave_ctas: int
    loads_per_warp: float
    grid_stride: bool = False  # the kernel loops already: one wave is a launch change alone


class OneElementPerThread(Rule):
    """A grid of many waves whose threads each handle one or two elements of the arrays.

    What it detects
    ---------------
    A 1D launch of many waves (at least ``min_waves`` x the CTAs the GPU holds at once) in which,
    from the trace of the sampled CTAs, each thread touches one or two elements of each array it
    streams, and consecutive CTAs cover consecutive, disjoint ranges of it
    (``i = blockIdx.x * blockDim.x + threadIdx.x`` in any spelling: another name, a template
    block size, a macro, cooperative groups, two elements a block apart), or the CTAs' element
    sets are disjoint and each access instruction covers consecutive ranges CTA after CTA (two
    elements per thread in the two halves of the array, ``k`` and ``k + n/2``; a stencil's or
    an overlapping window's CTAs share elements and stay silent); no thread touches more than
    ``max_elements`` elements of any buffer, and the kernel has no grid-stride loop (a loop
    and a read of ``gridDim``). Reported at the kernel's first read of its block's position:
    ``blockIdx``, cooperative groups' ``group_index()``/``block_rank()`` or a grid group's
    ``thread_rank()``, or a macro or helper function that reads them. The finding says
    which kind of kernel it is: element-wise (``out[i] = f(in[i])``: every buffer written is
    streamed, no shared memory, no atomics), a per-block reduction (each CTA writes one
    partial result, ``out[blockIdx.x]``) or a reduction per segment (each CTA's result is also
    made of inputs of its own read at its index, ``damage[b] = 1 - sum / family[b]``: the
    result is the segment's, not a partial the host adds, so a one-wave grid would break it;
    the advice is a warp per segment or several segments to a CTA, described).

    Why it is slow
    --------------
    Each thread slot of the SM carries one or two elements per CTA lifetime: the loads of a
    memory-bound kernel are its only work, and with one load per thread the bytes in flight per
    SM (2048 threads x 4 bytes) are below what DRAM latency x bandwidth asks for, so the kernel
    runs latency-bound (Little's law). Every CTA pays its launch, its index arithmetic and its
    bounds check for a few elements; a reduction also pays a whole shared-memory tree and its
    barriers per 256 or 512 elements and leaves one partial sum per CTA for the next pass
    (step #7 of NVIDIA's seven-step reduction, several elements per thread: 1.42x over #6).

    Example
    -------
    ``kernels/reduction/reduce.cu``: ``reduce1`` to ``reduce6`` (one or two elements per
    thread, 16384 CTAs, 15.5 waves on an H100; ``reduce7`` loops); ``kernels/particles``
    (element-wise); ``tests/cuda/elementwise/saxpy.cu``: saxpy-like kernels in several
    spellings and the grid-stride, small-grid and stencil kernels that stay silent.

    Fix
    ---
    A grid-stride loop launched with one wave of CTAs (SMs x resident CTAs per SM at the
    kernel's occupancy), several elements per thread and iteration::

        for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
             i += blockDim.x * gridDim.x)
            y[i] = a * x[i] + y[i];

    For a reduction, accumulate in the loop and run the tree once per CTA:
    ``int v = 0; for (...) v += in[i]; sdata[tid] = v;``. Vector loads (``int4``/``float4``)
    then move 16 bytes per lane where the array is 16-byte aligned (a pointer from
    ``cudaMalloc``), with a scalar loop over the last ``n % 4`` elements; the kernel then writes
    one partial per CTA of the new grid, and the host adds ``gridDim.x`` of them.

    How the estimate is made
    ------------------------
    The launch roofline (L1, L2, DRAM, issue, latency) of the traced launch against the same
    traffic with each warp keeping the loads of ``k`` elements in flight (``k`` = 4, the
    variant shown; at most 4 loads a warp, as the roofline's latency term), at the same
    occupancy (one wave of CTAs): the latency term falls until DRAM bounds the launch. An upper
    bound (DRAM after the change at its peak); the point value is in the inputs. For an
    element-wise kernel the saving of the per-CTA launch is not modelled. For a per-block
    reduction no estimate is given: the tree, barriers and CTA launches the loop removes are
    most of the gain (H200, 2026-11-25: 1.6-4.7x measured where this bound said 1.23-1.75x),
    the roofline does not see them, and the variant is measured instead.

    Fix safety
    ----------
    Element-wise kernels: automatic-and-verified. The rewrite keeps the kernel's body as it is
    and runs it once per original CTA index in a grid-stride loop (``blockIdx.x`` becomes the
    loop's CTA index, ``gridDim.x`` the original grid's size, derived from the size parameter
    when one gives the grid, else written into the kernel as this launch's constant: such a
    variant is launch-specific (``Variant.launch_specific``, said in its description; ``--fix``
    applies it only with ``--unsafe-fixes``); the body runs in a lambda so that its ``return``
    ends one index's work), ``k`` = 1, 2, 4 or 8 indices per thread and iteration, launched with one wave of
    CTAs: every element is computed exactly as before, and the measurement stage verifies the
    outputs and keeps the fastest verified ``k``. Not rewritten when a helper, a macro,
    cooperative groups or inline PTX read the block index. Where each thread handles one
    element, a size parameter gives the grid, every buffer is a kernel pointer parameter of one
    element type accessed only as ``buf[i]`` (``i`` the index the kernel declares from its
    block position), and the statements under ``if (i < n)`` (or after ``if (i >= n)
    return;``) are straight-line (no branch, loop or ``?:``: every write unconditional), vector
    variants come first (``float4``/``int4``, ``double2`` by element size; 2 and 1 vectors per
    thread and iteration): each buffer read loaded as one vector (a buffer only written is not
    loaded), the statements run once per lane on its fields, each buffer written stored as one
    vector, and a scalar grid-stride loop does the last ``n % width`` elements; they assume
    16-byte aligned pointers (runtime allocations are 256-byte aligned; the finding says so).
    Per-block reductions
    (the tree's combine a sum): automatic-and-verified with a changed output contract. The load
    phase (the statements before the first barrier, ending with the store into the shared
    array) becomes a grid-stride loop that adds the value of every original CTA index the
    thread covers (``k`` = 4, 1, 2, 8 per iteration), the tree after it kept, launched with one
    wave of CTAs; where the load phase only adds elements of one input buffer that is a kernel
    pointer parameter, and a size parameter gives the grid, variants that read it as
    ``int4``/``float4`` (``int2``/``float2``, ``double2`` by element size; ``k`` = 2, 1, 4
    vectors per thread and iteration) with a scalar loop over the last ``n % width`` elements
    come first; they assume the pointer is 16-byte aligned (runtime allocations are 256-byte
    aligned; the finding says so). The new grid writes one partial per CTA, so the output is
    verified as a total (``Variant.totals``: the sum of the first ``gridDim.x`` partials of
    each launch, integers exactly, floats within a tolerance scaled by the count;
    :func:`gpuadvise.runner.verify.compare_totals`), on the GPU or, by ``--fix`` without one,
    on the CPU emulator over both whole launches; the host, or the next pass, must add the
    new grid's ``gridDim.x`` partials. A tree with another combine (max, min) is refused.
    """

    id = "GA206"
    name = "one-element-per-thread"
    title = "One element per thread over a grid of many waves"
    severity = "warning"
    models = ("source", "trace", "occupancy", "waves")
    options = {"min_waves": 4.0, "max_elements": 2}

    def detect(self, ctx: RuleContext) -> Iterator[Finding]:
        g, b = ctx.launch.grid, ctx.launch.block
        if g.y != 1 or g.z != 1 or b.y != 1 or b.z != 1:
            return
        w = ctx.waves
        min_waves = float(ctx.option("min_waves"))
        if w.ctas_per_wave <= 0 or w.total_ctas < min_waves * w.ctas_per_wave:
            return
        ks = ctx.kernel_source
        # a grid-stride loop launched with a grid of many waves runs once or twice per thread
        # (GA204's half grid leaves one): the launch alone is the fix
        stride = is_grid_stride(ks)
        view = ctx.trace_view
        threads = int(b.x)
        most = int(ctx.option("max_elements"))
        uses = buffer_uses(view)
        streamed = [u for u in uses if u.streamed(threads, most)]
        if not streamed or any(u.per_thread_max > most for u in uses):
            return
        per_block = [u for u in uses if u.per_block and u.written]
        trace = ctx.trace
        recs = trace.records
        shared = bool(np.any(recs["space"] == int(Space.SHARED)))
        glob = recs[recs["space"] == int(Space.GLOBAL)]
        atomics = bool(np.any(glob["kind"] >= int(Kind.ATOMIC)))
        written = [u for u in uses if u.written]
        # inputs read one per CTA at its index (`family[nid]`): each CTA's result is its own
        # segment's (combined with its own data), not a partial of one total the host adds
        own_inputs = [u for u in uses if u.per_block and not u.written]
        if written and not shared and not atomics and all(u in streamed for u in written):
            kind = "elementwise"
        elif per_block and own_inputs:
            kind = "segmented"
        elif per_block:
            kind = "per-block"
        else:
            kind = "other"
        k = max(1, min(most, max(-(-u.per_cta // threads) for u in streamed)))
        loads = view.records["kind"] == int(Kind.LOAD)
        warps = max(len(np.unique((view.records["cta"].astype(np.int64) << 16)
                                  | view.records["warp"])), 1)  # fmt: skip
        if stride and kind != "per-block":
            # an element-wise grid-stride kernel launched with many waves runs as fast as with
            # one (the loop's iterations are the CTAs'); a reduction pays a tree, barriers and
            # a partial per CTA: that launch is worth changing
            return
        sms = ctx.device.sm_count or 0
        per_sm = w.ctas_per_wave // sms if sms else 0
        names = ", ".join(f"`{u.name}`" for u in streamed)
        off = index_offset(ks)
        line = ks.line_at(off) if off is not None else ctx.kernel_line
        what = {
            "elementwise": "an element-wise kernel",
            "per-block": "a per-block reduction (each CTA writes one partial result to "
            + ", ".join(f"`{u.name}`" for u in per_block)
            + f": a grid of one wave leaves {w.ctas_per_wave} partials instead of "
            f"{w.total_ctas}, whose sum is the same)",
            "segmented": "a reduction per segment (each CTA combines its elements into "
            + ", ".join(f"`{u.name}`" for u in per_block)
            + " at its own index, with inputs of its own: "
            + ", ".join(f"`{u.name}`" for u in own_inputs)
            + "), so the CTA count is the segment count: give each segment a warp (its lanes "
            "loop over the segment's elements and combine with __shfl_down_sync) or several "
            "segments to a CTA",
            "other": "a kernel whose outputs depend on the grid (shared memory or atomics)",
        }[kind]
        advice = (
            ""
            if kind == "segmented"
            else f". The kernel loops over the array already (a grid-stride loop): launch it "
            f"with one wave ({w.ctas_per_wave} CTAs"
            + (f": {sms} SMs x {per_sm}" if sms else "")
            + ") and each thread takes several elements"
            if stride
            else f". Loop over the array with a grid of one wave ({w.ctas_per_wave} CTAs"
            + (f": {sms} SMs x {per_sm}" if sms else "")
            + ") and several elements per thread"
        )
        yield self.finding(
            ctx,
            f"one element per thread: {w.total_ctas} CTAs of {threads} threads "
            f"({w.waves:.1f} waves of {w.ctas_per_wave}), each thread touching "
            f"{'one element' if k == 1 else 'two elements'} of {names}, CTA after CTA; "
            f"{what}{advice}",
            line=line,
            evidence=[
                Evidence("waves", round(w.waves, 3), min_waves, ">="),
                Evidence("elements_per_thread", k, most, "<=", "elements"),
                Evidence("total_ctas", w.total_ctas, unit="CTAs"),
                Evidence("ctas_per_wave", w.ctas_per_wave, unit="CTAs"),
                Evidence("kind", kind),
            ],
            details=OneElement(
                kind,
                k,
                tuple(u.name for u in streamed),
                tuple(u.name for u in per_block),
                int(w.ctas_per_wave),
                round(view.weighted(np.flatnonzero(loads)) / warps, 4),
                stride,
            ),
        )

    def estimate(self, ctx: RuleContext, finding: Finding) -> Estimate:
        d = finding.details_as(OneElement)
        rates = memory_rates(ctx.device)
        k = PER_ITERATION[0]
        loads = max(d.loads_per_warp, 1e-9)
        gain = min(_LOADS_IN_FLIGHT, loads * k) / min(_LOADS_IN_FLIGHT, loads)
        inputs: dict[str, Any] = {
            "elements_per_iteration": k,
            "loads_per_warp": d.loads_per_warp,
            "in_flight_factor": round(gain, 3),
        }
        if rates is None:
            return Estimate(
                None,
                "none",
                f"no memory rates for {ctx.device.name}: the launch roofline cannot be computed",
                inputs,
            )
        if d.grid_stride:
            return Estimate(
                None,
                "none",
                "not bounded: one wave of a grid-stride kernel saves the launches, prologues and "
                "(for a reduction) the trees of all but one wave of CTAs, which the launch "
                "roofline does not model; its loop is not unrolled, so the bytes in flight per "
                "warp stay; the measurement decides",
                inputs,
            )
        if d.kind == "segmented":
            return Estimate(
                None,
                "none",
                "not bounded: a warp per segment (or several segments to a CTA) removes the "
                "per-CTA tree, its barriers and most CTA launches, which the launch roofline does "
                f"not model (its in-flight term alone says {gain:.1f}x the bytes in flight per "
                "warp)",
                inputs,
            )
        if d.kind == "per-block":
            # Measured on an H200 (docs/accuracy.md, 2026-11-25): the grid-stride reduction runs
            # 1.6-4.7x faster where the in-flight roofline below says at most 1.23-1.75x: most
            # of the gain is the tree, its barriers and the CTA launches paid once per wave
            # instead of once per 256-512 elements, which the roofline (memory instructions
            # only) does not see. Claiming that bound would be wrong; the variant is measured.
            return Estimate(
                None,
                "none",
                "not bounded: the grid-stride loop removes the per-CTA tree, barriers and CTA "
                "launches of all but one wave, which the launch roofline does not model (its "
                f"in-flight term alone says {gain:.1f}x the bytes in flight per warp); the "
                "measurement decides",
                inputs,
            )
        view = ctx.trace_view
        before = view_traffic(ctx.device, view)
        after = replace(before, bytes_in_flight_per_warp=before.bytes_in_flight_per_warp * gain)
        est = launch_estimate(before, after, ctx.device, rates)
        if est is None:
            return Estimate(None, "none", "no SM count or clock for the launch roofline", inputs)
        inputs.update(
            model=MODEL,
            point_speedup=round(est.point, 3),
            **({"peak_speedup": round(est.peak, 3)} if est.peak is not None else {}),
            bound_by_before=est.before.bound_by,
            bound_by_after=est.after.bound_by,
        )
        return Estimate(
            round(est.bound, 3),
            "upper-bound",
            est.method(
                f"{k} elements per thread and iteration ({gain:.1f}x the bytes each warp keeps "
                "in flight, same occupancy; per-CTA launch and tree costs not modelled)",
                rates,
            ),
            inputs,
        )

    def _reduction_variant(self, ctx: RuleContext, d: OneElement, bound: str, note: str) -> Variant:
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
            cands = [
                replace(c, description=f"{c.description} (no vector loads: {vec})") for c in cands
            ]
        return replace(cands[0], alternatives=tuple(cands[1:]))

    def _elementwise_vectors(
        self, ctx: RuleContext, d: OneElement, grid: int, note: str
    ) -> list[Variant]:
        """Vector-load variants of an element-wise kernel (one element per thread, every
        buffer a kernel pointer parameter read and written at the thread's linear index),
        widths by element size, ``k`` = 2 and 1 vectors per thread and iteration."""
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
                diff, _why = elementwise_vector_diff(
                    ks, size, d.streamed, width, k, ctx.source_file
                )
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

    def transform(self, ctx: RuleContext, finding: Finding) -> Variant:
        d = finding.details_as(OneElement)
        threads = int(ctx.launch.block.x)
        grid = int(ctx.launch.grid.x)
        ks = ctx.kernel_source
        hidden = hidden_block_reads(ks)
        per_cta = d.elements_per_thread * threads
        bound, derived = grid_bound(ctx, ks, per_cta, grid)
        note = (
            ""
            if derived
            else f". Launch-specific: no kernel parameter gives the original grid, so its {grid} "
            f"CTAs are written into the kernel (const unsigned {GRID_STRIDE_PREFIX}blocks = {grid}u): the "
            "fixed kernel is right for this launch only; compute the count from the array's "
            "size in your code"
        )
        wave = d.wave_ctas
        if d.grid_stride:
            parts = ", ".join(f"`{n}`" for n in d.per_block)
            return Variant(
                "automatic-and-verified",
                f"the same kernel launched with {wave} CTAs (one wave) instead of {grid}: its "
                f"grid-stride loop gives each thread several elements; {parts} then holds "
                f"{wave} partial sums instead of {grid} (verified as totals: the host or the "
                "next pass adds them)",
                launch={"grid": [min(wave, grid), 1, 1]},
                label="one wave",
                totals={n: "+" for n in d.per_block},
            )
        if d.kind == "elementwise":
            if hidden is not None:
                return Variant(
                    "display-only",
                    f"a grid-stride loop launched with {wave} CTAs, several elements per thread "
                    f"(not rewritten automatically: {hidden})",
                )
            cands = self._elementwise_vectors(ctx, d, grid, note)
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
        if d.kind == "per-block" and hidden is None:
            return launch_specific(self._reduction_variant(ctx, d, bound, note), derived)
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
