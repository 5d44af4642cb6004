"""GA204 idle-reduction-threads: a tree reduction whose threads each load one element."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from gpuadvise.rules import (
    Estimate,
    Evidence,
    Finding,
    FindingDetails,
    IdleMatch,
    ModelUnavailable,
    Rule,
    RuleContext,
    Variant,
    find_idle_loads,
    first_add_diff,
    half_grid_variant,
)

# the public source of the reduction steps the messages name (NVIDIA, GTC 2010)
_SEVEN_STEP = "NVIDIA's seven-step reduction"


_PREFIX = "ga204_"  # the names the half-grid rewrite introduces


@dataclass(frozen=True)
class IdleLoad(FindingDetails):
    """The store into the shared array (body offsets, ``;`` included) and the threads of the
    tree's first step (``find_idle_loads`` finds the store again in the context's source)."""

    arr: str
    store: tuple[int, int]
    first_step_threads: int


@dataclass(frozen=True)
class IdleTree(FindingDetails):
    """A tree the trace shows starting with half its fill threads idle, where the source parser
    found no store and tree to rewrite: the threads of its first phase and of the fill, the
    elements each fill thread loaded, and why there is no diff."""

    first_step_threads: int
    fill_threads: int
    elements_per_thread: float
    why_no_diff: str


def _loop_before(ctx: RuleContext, line: int) -> bool:
    """Whether the kernel's source has a loop that starts before ``line`` (the fill)."""
    try:
        ks = ctx.kernel_source
    except ModelUnavailable:
        return False
    return any(ks.line_at(lp.span[0]) < line for lp in ks.loops())


def _match_of(ctx: RuleContext, finding: Finding) -> IdleMatch:
    d = finding.details_as(IdleLoad)
    for mt in find_idle_loads(ctx):
        if mt.arr == d.arr and mt.store == d.store:
            return mt
    raise ValueError(f"the store into `{d.arr}` is no longer in the kernel's source")


# ---------------------------------------------------------------------------------------------


def _tree_warp_iterations(threads: int) -> int:
    """Warps with an active lane summed over the steps of a sequential tree over ``threads``."""
    total, s = 0, threads // 2
    while s > 0:
        total += math.ceil(s / 32)
        s //= 2
    return total


class IdleReductionThreads(Rule):
    """A shared-memory tree reduction whose threads each load one element (step #3 of
    NVIDIA's seven-step reduction).

    What it detects
    ---------------
    In the kernel's source, a store of one global element per thread into a 1D ``__shared__``
    array, ``sdata[tid] = ... in[i] ...`` (exactly one subscript of a global pointer, at the
    top level of the kernel: no loop around it; possibly through a variable
    ``int v = in[i]; sdata[tid] = v;``), followed after a barrier by a sequential tree over the
    array: a loop halving ``s`` in which ``tid < s`` adds ``sdata[tid + s]``, or unrolled steps
    ``if (tid < 128) sdata[tid] += sdata[tid + 128];``, whose first step adds the upper half of
    the block to the lower half. The trace (when the emulator can run the kernel) must agree:
    at most one load of that buffer per thread in the traced CTAs. Reported at the store.
    Where the source parser finds no such store and tree (a template block size, a helper
    accessor such as cuda-samples' ``SharedMemory<T>()``, other names, one-line or unrolled
    loops), the shared-memory tree is recognised from the emulator's trace
    (``gpuadvise.model.reduction``): its first step combines with at most half the threads that
    filled it, each of which loaded fewer than 1.5 elements from global memory; reported at the
    fill's store, with advice and no diff. An interleaved tree (``tid % (2*s)``,
    ``index = 2*s*tid``) is GA202's; after its fix, this rule applies.

    Why it is slow
    --------------
    Half of the threads go idle at the tree's first step, having done nothing but one load; a
    reduction has almost no arithmetic, so its speed is how many bytes are in flight. Each
    thread slot of the SM carries one element per CTA lifetime (the load, then a barrier and
    log2(block) tree steps during which it loads nothing): the kernel is bound by latency, far
    below the DRAM bandwidth (9.7 of 86 GB/s on a G80 for step #3 of NVIDIA's seven-step reduction;
    an H100 runs it at 813 of 3350 GB/s, measured). Adding two elements during the load doubles the
    bytes each thread slot carries and drops one tree step; a grid-stride loop over many
    elements per thread, with a grid just large enough to fill the GPU, also amortizes the tree
    and the barriers over all of them, and leaves far fewer partial sums for the next pass.

    Example
    -------
    ``kernels/reduction/reduce.cu``, ``reduce3`` (``sdata[tid] = i < n ? in[i] : 0;`` and a
    halving loop); ``reduce4`` adds during the load and ``reduce7`` loops over many elements.
    ``kernels/luminance/luminance.cu``: ``lum_sequential`` and ``lum_unrolled`` (one pixel per
    thread); ``lum_prefetch2`` adds two during the load.

    Fix
    ---
    First add during load (step #4 of the seven-step reduction): the same blocks on half the
    grid, each thread adding two elements before the tree::

        unsigned i = blockIdx.x * (blockDim.x * 2) + threadIdx.x;
        sdata[tid] = (i < n ? in[i] : 0) + (i + blockDim.x < n ? in[i + blockDim.x] : 0);

    Better (step #7): several elements per thread in a grid-stride loop, launched with just
    enough CTAs to fill the device (SMs x CTAs per SM at the kernel's occupancy; the message
    gives the number; GA206 offers it)::

        int v = 0;
        for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
            v += in[i];
        sdata[tid] = v;

    How the estimate is made
    ------------------------
    An upper bound, ``2 x resident threads after / before``: with two elements per thread each
    thread slot carries twice the bytes per CTA lifetime, and the bandwidth of a latency-bound load
    stream is proportional to the bytes in flight (Little's law), so the kernel at most doubles its
    speed at the same occupancy (the occupancy of the half-size block is recomputed). The DRAM
    bandwidth caps it, and the kernel's time is unknown before it is measured, so the cap is not
    applied. NVIDIA measured 1.78x for this step on a G80; it ran 1.94x faster on an H100 (2^26
    ints, measured). The inputs give the tree's warp-iterations per element before and after. The
    grid-stride version gains more and is not estimated (on a G80: 1.42x over #6, 3.6x over #4 with
    the unrolling steps between; an H100: 1.33x over #6 and 1.34x over #4). The point comes from the
    variant's own trace (``point_from_variant_trace``, issue 29): analyze builds the variant, traces
    it on the emulator as it traced the kernel and runs both traces through the launch model; a
    variant the model finds slower is not recommended unless a GPU measures it faster. The bound
    stays the larger of the two.

    Fix safety
    ----------
    NVIDIA's step #4 (1-D launches whose CTAs each write their own partial, from the trace) is
    automatic and verified as totals: the load phase runs for the two original CTA indices
    ``2b`` and ``2b + 1`` (``gpuadvise.rules.grid_stride.reduction_diff`` with two indices per
    thread, launched on half the grid), so the per-block outputs hold half as many partials;
    the measurement stage checks they add up to the kernel's and times it. The host code that
    launches the kernel and adds the partials must follow (the diff says the new grid). The
    alternative halves the block on the same grid (``blockDim.x`` in the index arithmetic
    before the store becomes ``2 * blockDim.x``; the second element is the one thread ``t +
    blockDim.x`` loaded; the tree's first step is removed), so every block writes the same
    result bit for bit; it is display-only (measured 1.00x on an H200: the bytes in flight per
    SM do not change) and not offered when the kernel does more than declare variables before
    the store, uses ``blockDim.x`` after it, or uses the thread index after it in a way that
    needs the upper half of the block.
    """

    id = "GA204"
    name = "idle-reduction-threads"
    title = "Threads idle from the first step of a shared-memory reduction"
    severity = "warning"
    point_from_variant_trace = True
    models = ("source", "trace", "occupancy", "waves")
    options = {}

    def detect(self, ctx: RuleContext) -> Iterator[Finding]:
        found = list(self._from_source(ctx))
        yield from found
        if found:
            return
        for tree in ctx.reduction_trees:
            first = tree.phases[0]
            per = tree.fill_elements_per_thread
            if (
                tree.pattern == "interleaved"  # GA202's first; this rule applies after its fix
                or tree.per_warp  # a warp's own tree: shuffles (GA205), not a halved block
                or not first.barrier_before  # no barrier between the fill and the tree
                or tree.fill_threads < 64
                or tree.threads & (tree.threads - 1)  # the shape a halving tree is written for
                or per is None
                # nothing loaded from global memory before the fill (words zeroed, then summed
                # in a loop: all-pairs-distance's `dist[idx] = 0; ... dist[idx] += count`):
                # there is no load to add a second element to
                or per <= 0
                or per >= 1.5
                or 2 * first.active_threads > tree.fill_threads
            ):
                continue
            line = next((ln for f, ln in tree.fill_lines if ln and ctx.same_file(f)), None)
            line = line or next((ln for f, ln in tree.lines if ln and ctx.same_file(f)), None)
            if line is not None and _loop_before(ctx, line):
                continue  # an accumulation loop before the fill: more elements on other launches
            why = (
                "the source parser found no `sdata[tid] = <one global element>` store followed "
                "by a `tid < s` tree it can rewrite"
            )
            yield self.finding(
                ctx,
                f"each thread loads {per:.2g} element{'' if per == 1 else 's'} into the shared "
                f"tree, and its first "
                f"step combines with {first.active_threads} of {tree.fill_threads} threads "
                f"(words {first.distance} apart): {tree.idle_first_phase} threads only loaded. "
                f"Add two elements during the load with half the threads per block (step #4 of "
                f"{_SEVEN_STEP}), or several per thread in a grid-stride loop (its #7)",
                line=line,
                evidence=[
                    Evidence("elements_per_thread", round(per, 4), 1.5, "<"),
                    Evidence(
                        "first_step_threads",
                        first.active_threads,
                        tree.fill_threads // 2,
                        "<=",
                        "threads",
                    ),
                    Evidence("threads_per_block", tree.threads, unit="threads"),
                    Evidence("tree_warp_iterations", tree.warp_iterations(), unit="warps"),
                    Evidence("source", "trace"),
                ],
                details=IdleTree(first.active_threads, tree.fill_threads, round(per, 4), why),
            )

    def _from_source(self, ctx: RuleContext) -> Iterator[Finding]:
        try:
            ks = ctx.kernel_source
        except ModelUnavailable:
            return
        block = ctx.launch.block
        threads = int(block.x)
        if block.y != 1 or block.z != 1 or threads < 64 or threads & (threads - 1):
            return  # a 1D power-of-two block: the shape a halving tree is written for
        for mt in find_idle_loads(ctx):
            first = ks.value(mt.tree.first, **{"blockDim.x": threads})
            if first is None:
                d = next((x for x in mt.decls if x.name == mt.tree.first.strip()), None)
                if d is not None:
                    first = ks.value(ks.body[d.expr[0] : d.expr[1]], **{"blockDim.x": threads})
            if first is None or 2 * first != threads:
                continue
            per_thread = self._loads_per_thread(ctx, mt.pointer, threads)
            if per_thread is not None and per_thread > 1.0 + 1e-9:
                continue  # the trace shows more loads than the source suggests
            line = ks.line(mt.store[0])
            w = self._waves(ctx)
            grid_stride = (
                f", or several per thread in a grid-stride loop over {w.ctas_per_wave} CTAs "
                f"({ctx.device.sm_count} SMs x {w.ctas_per_wave // ctx.device.sm_count} CTAs "
                f"per SM; {ctx.launch.grid.count / w.ctas_per_wave:.0f} elements per thread "
                f"here, step #7 of {_SEVEN_STEP})"
                if w is not None and ctx.device.sm_count
                else ""
            )
            evidence = [
                Evidence(
                    "elements_per_thread",
                    1 if per_thread is None else round(per_thread, 4),
                    1,
                    "<=",
                ),
                Evidence("first_step_threads", first, threads // 2, "==", "threads"),
                Evidence("threads_per_block", threads, unit="threads"),
                Evidence("tree_warp_iterations", _tree_warp_iterations(threads), unit="warps"),
                Evidence("source", "source and trace" if per_thread is not None else "source"),
            ]
            yield self.finding(
                ctx,
                f"each thread loads one element (`{mt.pointer}[...]`) into `{mt.arr}`, and the "
                f"tree's first step adds with {first} of {threads} threads: half the block is "
                f"idle from the first step on. Add two elements during the load with "
                f"{threads // 2} threads per block (step #4 of {_SEVEN_STEP}){grid_stride}",
                line=line,
                evidence=evidence,
                details=IdleLoad(mt.arr, mt.store, int(first)),
            )

    @staticmethod
    def _waves(ctx: RuleContext) -> Any:
        try:
            return ctx.waves
        except ModelUnavailable:
            return None

    @staticmethod
    def _loads_per_thread(ctx: RuleContext, pointer: str, threads: int) -> float | None:
        """Lanes of global loads from ``pointer``'s buffer per traced thread (None: no trace)."""
        import numpy as np

        from gpuadvise.rules import Kind, Space, active_lanes

        try:
            trace = ctx.trace
        except ModelUnavailable:
            return None
        if not trace.ctas:
            return None
        r = trace.records
        r = r[(r["space"] == int(Space.GLOBAL)) & (r["kind"] == int(Kind.LOAD))]
        lanes = active_lanes(r["mask"])
        if pointer in trace.buffers:
            start, size = trace.buffers[pointer]
            lanes &= (r["addr"] >= np.uint64(start)) & (r["addr"] < np.uint64(start + size))
        return float(lanes.sum()) / (len(trace.ctas) * threads)

    def estimate(self, ctx: RuleContext, finding: Finding) -> Estimate:
        from gpuadvise.rules import CTAS_DIVIDED_BY, OccupancyInputError, max_active_blocks

        threads = int(ctx.launch.block.x)
        if isinstance(finding.details, IdleTree):
            threads = int(ctx.launch.block.count)
        before = ctx.occupancy.active_warps_per_sm
        try:
            k = dataclasses.replace(ctx.occupancy_input, threads_per_block=threads // 2)
            after = max_active_blocks(ctx.device, k).active_warps_per_sm
        except (OccupancyInputError, TypeError):
            after = before
        ratio = min(1.0, after / before) if before else 1.0
        per_elem_before = _tree_warp_iterations(threads) / threads
        per_elem_after = _tree_warp_iterations(threads // 2) / threads
        return Estimate(
            round(2.0 * ratio, 3),
            "upper-bound",
            f"two elements per thread slot instead of one at {after} resident warps per SM "
            f"instead of {before}: a latency-bound load stream moves bytes in proportion to the "
            "bytes in flight (Little's law), so at most 2 x "
            f"{after}/{before}; DRAM bandwidth caps it (not applied: the kernel's time is "
            "unknown before measuring). Measured: 1.78x on a G80 (NVIDIA), 1.94x on an "
            "H100",
            {
                # the variant launches half the grid (step #4): half the CTA launches too
                CTAS_DIVIDED_BY: 2,
                "threads_per_block": threads,
                "resident_warps_before": before,
                "resident_warps_after": after,
                "tree_warp_iterations_per_element_before": round(per_elem_before, 5),
                "tree_warp_iterations_per_element_after": round(per_elem_after, 5),
            },
        )

    def transform(self, ctx: RuleContext, finding: Finding) -> Variant:
        if isinstance(finding.details, IdleTree):
            half = finding.details.fill_threads // 2
            return Variant(
                "display-only",
                f"add two elements during the load with {half} threads per block and start "
                f"the tree one step later (no diff: {finding.details.why_no_diff})",
            )
        mt = _match_of(ctx, finding)
        threads = int(ctx.launch.block.x)
        diff, why = first_add_diff(ctx.kernel_source, mt, threads, ctx.source_file)
        grid = ctx.launch.grid.as_tuple()
        if diff is None:
            half_block = Variant(
                "display-only",
                f"add two elements during the load with {threads // 2} threads per block and "
                f"start the tree one step later (not rewritten automatically: {why})",
            )
        else:
            half_block = Variant(
                "display-only",
                f"first add during the load: blocks of {threads // 2} threads on the same "
                f"{grid[0]}x{grid[1]}x{grid[2]} grid, each thread adding the element it loaded "
                "and the one thread t + blockDim.x loaded; the tree starts one step later and "
                "every block writes the same result (launch with the halved block; measured "
                "1.00x on an H200: the loads in flight per SM do not change)",
                diff=diff,
                launch={"block": [threads // 2, 1, 1]},
                label="half block",
            )
        step4 = half_grid_variant(ctx, _PREFIX)
        if isinstance(step4, str):
            return replace(
                half_block,
                description=f"{half_block.description}; step #4's half grid is not offered: "
                f"{step4}",
            )
        return replace(step4, alternatives=(half_block,))
