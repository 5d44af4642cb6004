"""GA206 one-element-per-thread: a grid of many waves whose threads each handle one or a few
elements, where a grid-stride loop over one wave would do the same work."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import numpy as np

from gpuadvise.rules import (
    COMBINES,
    MODEL,
    PER_ITERATION,
    Estimate,
    Evidence,
    Finding,
    Kind,
    OneElement,
    Rule,
    RuleContext,
    Space,
    Variant,
    advice,
    buffer_uses,
    elements,
    is_grid_stride,
    kernel_launch_times,
    kind_text,
    launch_estimate,
    memory_rates,
    one_element_variant,
    report_line,
    sm_cycles_per_s,
    view_traffic,
    walks,
)

__all__ = ["OneElement", "OneElementPerThread"]

_LOADS_IN_FLIGHT = 4  # as the launch roofline's latency term (rules.estimates.LOADS_IN_FLIGHT)


class OneElementPerThread(Rule):
    """A grid of many waves whose threads each handle one or a few elements of the arrays.

    What it detects
    ---------------
    A launch of many waves (at least ``min_waves`` x the CTAs the GPU holds at once) of 1D
    blocks in which, from the trace of the sampled CTAs, each thread touches a few elements of
    each array it streams, and consecutive CTAs cover consecutive, disjoint ranges of it
    (``i = blockIdx.x * blockDim.x + threadIdx.x`` in any spelling: another name, a template
    block size, a macro, cooperative groups, two elements a block apart), or the CTAs' element
    sets are disjoint and each access instruction covers consecutive ranges CTA after CTA (two
    elements per thread in the two halves of the array, ``k`` and ``k + n/2``), or the CTAs'
    element sets are disjoint and the grid's CTAs, each that many elements, cover the array
    once (rows a whole grid apart, a tile of columns per ``blockIdx.y``); a stencil's or an
    overlapping window's CTAs share elements and stay silent. "A few": at most
    ``max_elements`` elements of any buffer per thread, ``max_elements_reduction`` where the
    CTAs combine their elements before writing (a tree or shared atomics per CTA: each thread's
    elements pay it); only those may have a 2D or 3D grid. A grid-stride loop (a loop and a
    read of ``gridDim``) launched with many waves is reported where its CTAs combine (its loop
    runs once or a few times per thread); an element-wise one is not (its iterations are the
    CTAs'). Reported at the header of the grid-stride loop around the first load of a
    streamed buffer (from the trace), else at the kernel's first read of its block's position
    (``blockIdx``, cooperative groups' ``group_index()``/``block_rank()``, a grid group's
    ``thread_rank()``, a macro or helper function that reads them; past a declaration that
    only names it, ``nid = blockIdx.x``, to the first statement using the name). The finding
    says which kind of kernel it is: element-wise (``out[i] = f(in[i])``: every buffer written
    is streamed, no shared memory, no atomics), a per-block reduction (each CTA writes one
    partial result, ``out[blockIdx.x]``), a reduction into totals (each CTA combines in shared
    memory, then adds into outputs every CTA adds to with atomics: ``atomicAdd(result, s)``, a
    privatised histogram's flush) or a reduction per segment (each CTA's result is also made
    of inputs of its own read at its index, ``damage[b] = 1 - sum / family[b]``: the result is
    the segment's, not a partial the host adds, so a one-wave grid would break it; the advice
    is a warp per segment or several segments to a CTA, described).

    Not reported where the launch's ``__constant__`` lookups by data (a table indexed by the
    elements, ``lut[x & 0xff]``: up to 32 addresses a warp request, which the constant cache
    serves one a cycle) alone take at least ``max_lookups`` times the launch model's whole
    launch (which does not time them): the lookups bound it, and a grid-stride loop leaves them
    as they are (``kernels/constant_lut``; GA301 names the table).

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
    element-wise kernel the saving of the per-CTA launch is not modelled. For a reduction (per
    block, into totals, per segment) and for a grid-stride kernel's launch change no estimate
    is given: the tree, barriers, atomics and CTA launches the change removes are most of the
    gain (H200, 2026-11-25: 1.6-4.7x measured where this bound said 1.23-1.75x), the roofline
    does not see them, and the variant is measured instead.

    Fix safety
    ----------
    Element-wise kernels: automatic-and-verified. The rewrite keeps the kernel's body as it is
    and runs it once per original CTA index in a grid-stride loop (``blockIdx.x`` becomes the
    loop's CTA index, ``gridDim.x`` the original grid's size, derived from the size parameter
    when one gives the grid, else written into the kernel as this launch's constant: such a
    variant is launch-specific (``Variant.launch_specific``, said in its description; ``--fix``
    applies it only with ``--unsafe-fixes``); the body runs in a lambda so that its ``return``
    ends one index's work), ``k`` = 1, 2, 4 or 8 indices per thread and iteration, launched with one wave
    of CTAs: every element is computed exactly as before, and the measurement stage verifies the
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
    A grid-stride kernel (a per-block reduction or one into totals): automatic-and-verified, the
    launch alone (``gridDim.x`` cut to about one wave, ``gridDim.y``/``z`` kept; not where the
    kernel reads ``gridDim.y``/``z``): per-block partials verified as totals, totals made by
    atomics compared as they are (the same sums added in another order: floats within the
    comparison's tolerance). Reductions into totals or per segment without a grid-stride
    loop: display-only.
    """

    id = "GA206"
    name = "one-element-per-thread"
    title = "One element per thread over a grid of many waves"
    severity = "warning"
    models = ("source", "trace", "occupancy", "waves")
    # a grid-stride loop over one wave changes the CTAs, their turnaround and each thread's
    # instructions: measured 0.81-1.77x where this rule's own point said 1.00x (docs/accuracy.md)
    point_from_variant_trace = True
    options = {
        "min_waves": 4.0,
        "max_elements": 2,
        "max_elements_reduction": 4,
        "max_lookups": 1.0,
    }

    def detect(self, ctx: RuleContext) -> Iterator[Finding]:
        g, b = ctx.launch.grid, ctx.launch.block
        if b.y != 1 or b.z != 1:
            return
        w = ctx.waves
        min_waves = float(ctx.option("min_waves"))
        if w.ctas_per_wave <= 0 or w.total_ctas < min_waves * w.ctas_per_wave:
            return
        # a grid-stride loop launched with a grid of many waves runs once or twice per thread
        # (GA204's half grid leaves one): the launch alone is the fix
        stride = is_grid_stride(ctx.kernel_source)
        view = ctx.trace_view
        threads = int(b.x)
        uses = buffer_uses(view)
        recs = ctx.trace.records
        shared = bool(np.any(recs["space"] == int(Space.SHARED)))
        glob = recs[recs["space"] == int(Space.GLOBAL)]
        atomics = bool(np.any(glob["kind"] >= int(Kind.ATOMIC)))
        written = [u for u in uses if u.written]
        per_block = [u for u in written if u.per_block]
        # outputs every CTA adds into with atomics after combining in shared memory (a total,
        # a privatised histogram's flush): the CTA's combine is paid per CTA, not per element
        totals = [u for u in written if shared and u.atomic and not u.disjoint and not u.per_cta]
        most = int(ctx.option("max_elements_reduction" if per_block or totals else "max_elements"))
        streamed = [
            u
            for u in uses
            if u not in totals
            and (u.streamed(threads, most) or u.partitioned(threads, most, w.total_ctas))
        ]
        if not streamed or any(u.per_thread_max > most for u in uses if u not in totals):
            return
        # inputs read one per CTA at its index (`family[nid]`): each CTA's result is its own
        # segment's (combined with its own data), not a partial of one total the host adds
        own_inputs = [u for u in uses if u.per_block and not u.written]
        if written and not shared and not atomics and all(u in streamed for u in written):
            kind = "elementwise"
        elif per_block and own_inputs:
            kind = "segmented"
        elif per_block:
            kind = "per-block"
        elif totals and all(u in totals or u in streamed for u in written):
            kind = "total"
        else:
            kind = "other"
        if (stride and kind not in ("per-block", "total")) or (
            (g.y != 1 or g.z != 1) and kind not in COMBINES
        ):
            # an element-wise grid-stride kernel launched with many waves runs as fast as with
            # one (the loop's iterations are the CTAs'); a reduction pays a tree, barriers and
            # a partial per CTA: that launch is worth changing. Other kinds: 1D grids only
            return
        if self._lookups_bound(ctx):
            return
        k = max(1, min(most, max(-(-(u.per_cta or u.disjoint) // threads) for u in streamed)))
        loads = view.records["kind"] == int(Kind.LOAD)
        warps = max(len(np.unique((view.records["cta"].astype(np.int64) << 16)
                                  | view.records["warp"])), 1)  # fmt: skip
        names = ", ".join(f"`{u.name}`" for u in streamed)
        d = OneElement(
            kind,
            k,
            tuple(u.name for u in streamed),
            tuple(u.name for u in per_block),
            int(w.ctas_per_wave),
            round(view.weighted(np.flatnonzero(loads)) / warps, 4),
            stride,
            tuple(u.name for u in totals),
        )
        what = kind_text(ctx, kind, d, [u.name for u in own_inputs], w.total_ctas)
        yield self.finding(
            ctx,
            f"one element per thread: {w.total_ctas} CTAs of {threads} threads "
            f"({w.waves:.1f} waves of {w.ctas_per_wave}), each thread touching "
            f"{elements(k)} of {names}, CTA after CTA; "
            f"{what}{advice(ctx, d, ctx.device.sm_count or 0)}",
            line=report_line(ctx, d.streamed, stride),
            evidence=[
                Evidence("waves", round(w.waves, 3), min_waves, ">="),
                Evidence("elements_per_thread", k, most, "<=", "elements"),
                Evidence("total_ctas", w.total_ctas, unit="CTAs"),
                Evidence("ctas_per_wave", w.ctas_per_wave, unit="CTAs"),
                Evidence("kind", kind),
            ],
            details=d,
        )

    @staticmethod
    def _lookups_bound(ctx: RuleContext) -> bool:
        """Whether the launch's ``__constant__`` lookups by data alone take longer than the
        launch model's whole launch: each distinct address of a warp's request is a cycle of
        the SM's constant cache, one after another (``walks.constant_gathers``: the lines that
        name several a request), which the model does not time. Such a launch is bound by its
        lookups, which a grid-stride loop leaves as they are (GA301's table in shared memory is
        the fix), not by the bytes it keeps in flight."""
        gathers = walks.constant_gathers(ctx.trace)
        hz = sm_cycles_per_s(ctx.device)
        if not gathers or hz is None:
            return False
        times = kernel_launch_times(ctx.device, ctx.trace_view)
        lookups_s = sum(g.addresses for g in gathers) * ctx.trace.scale / hz
        return times is not None and lookups_s >= float(ctx.option("max_lookups")) * times.time_s

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
                "(for a reduction) the trees and atomics of all but one wave of CTAs, which the "
                "launch roofline does not model; its loop is not unrolled, so the bytes in "
                "flight per warp stay; the measurement decides",
                inputs,
            )
        if d.kind in COMBINES:
            # Measured on an H200 (docs/accuracy.md, 2026-11-25): the grid-stride reduction runs
            # 1.6-4.7x faster where the in-flight roofline below says at most 1.23-1.75x: most
            # of the gain is the tree, its barriers and the CTA launches paid once per wave
            # instead of once per 256-512 elements, which the roofline (memory instructions
            # only) does not see. Claiming that bound would be wrong; the variant is measured.
            how = (
                "a warp per segment (or several segments to a CTA) removes"
                if d.kind == "segmented"
                else "the grid-stride loop removes"
            )
            return Estimate(
                None,
                "none",
                f"not bounded: {how} the per-CTA tree, its barriers, atomics and most CTA "
                "launches, which the launch roofline does not model (its in-flight term alone "
                f"says {gain:.1f}x the bytes in flight per warp); the measurement decides",
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

    def transform(self, ctx: RuleContext, finding: Finding) -> Variant:
        return one_element_variant(ctx, finding.details_as(OneElement))
