"""GA103 block-not-warp-multiple: threads per block not a multiple of the warp size."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from gpuadvise.rules import (
    CTAS_DIVIDED_BY,
    Estimate,
    Evidence,
    Finding,
    FindingDetails,
    KernelSource,
    ModelUnavailable,
    Rule,
    RuleContext,
    Variant,
    fixkit_merge,
    unified_diff,
)


@dataclass(frozen=True)
class BlockShapes(FindingDetails):
    """The warp-multiple block shapes to suggest (``128x1``) and the warps a block occupies;
    ``merge``: the blocks per CTA of a block merge the emulator verified (0: none), ``blocks``
    the C expression of the original grid's CTA count in x it reads (a kernel parameter, or a
    constant of this launch: ``launch_specific``)."""

    shapes: tuple[str, ...]
    warps: int
    merge: int = 0
    blocks: str = ""
    launch_specific: bool = False


def _shapes(total: int, block: tuple[int, int, int], warp: int) -> list[str]:
    """Nearby warp-multiple block sizes (1D) or shapes (2D/3D: 32 x N), larger first."""
    down = (total // warp) * warp
    sizes = [s for s in (down + warp, down) if 0 < s <= 1024]
    if block[1] == 1 and block[2] == 1:
        return [str(s) for s in sizes]
    return [f"{warp}x{s // warp}" for s in sizes]


class BlockNotWarpMultiple(Rule):
    """A block whose thread count is not a multiple of the warp size (32): idle lanes every warp.

    What it detects
    ---------------
    A launch whose threads per block (x * y * z) is not a multiple of 32. Reported at the kernel's
    declaration, with the lanes left idle per block.

    Why it is slow
    --------------
    The SM schedules whole warps of 32 lanes. A block of 100 threads occupies 4 warps, of which the
    last has 4 active lanes: 28 of 128 lanes (22 %) issue nothing, yet take their share of
    scheduling slots, registers and the per-SM warp limit. NVIDIA's DirectCompute guide: "threads
    per thread group: a multiple of the warp size, so all threads in a warp do work". 2D blocks such
    as 10x10 or 12x12 are the usual cause.

    Example
    -------
    ``kernels/blocksize/blocksize.cu``: ``scale2d_10x10`` launched with 10x10 blocks (100 threads,
    4 warps, 28 idle lanes); ``scale2d_32x4`` does the same with 32x4 blocks.

    Fix
    ---
    Choose a block of 64, 128, 256 ... threads; for 2D data, 32x4, 32x8 or 16x16, with the grid
    recomputed to cover the same domain (bounds checks handle the edges). A kernel whose
    indexing and shared tiles are tied to its block of 16 (Rodinia's and HeCBench's nw, lud's
    diagonal): run two (or k) of its blocks side by side in one CTA, "block merging":
    ``sub = threadIdx.x / 16``, ``tx = threadIdx.x % 16``, ``bx = blockIdx.x * 2 + sub``, a copy
    of each shared array per block (``__shared__ float t[2][16]``), the grid halved.

    How the estimate is made
    ------------------------
    An upper bound: ``warps * 32 / threads``, the lanes the SM schedules over the lanes that do
    work, the gain if the kernel were bound by issue slots and the idle lanes' share were put to
    use. Memory-bound kernels gain less (their idle lanes cost no DRAM traffic). A block merge also
    launches 1/k of the CTAs, whose launches the block scheduler makes one after another (the launch
    model's CTA ramp, measured on an H200): its work shrinks by at most the larger of k and the lane
    ratio (no term of the launch model falls by more; the memory terms stay). Run through the launch
    model's floor (no change removes it): kernels/merge16's 4,224 CTAs of 16 threads, 5.95 us on the
    model and 5.98 us on an H200, give a bound of 1.36x for merges measured at 1.26-1.28x
    (mirror_tile's lane ratio alone, 1.33x on the work, would say 1.13x). The point comes from the
    variant's own trace (``point_from_variant_trace``, issue 29): analyze builds the variant, traces
    it on the emulator as it traced the kernel and runs both traces through the launch model; a
    variant the model finds slower is not recommended unless a GPU measures it faster. On an H200
    (2026-11-30): merge16's three merges 1.29x on the model for 1.25-1.30x measured, blocksize's
    10x10 -> 32x4 1.27x for 1.22x, Rodinia needle_cuda_shared_1's merge 0.99x for 0.94x (so not
    recommended: the kernel waits on its serial anti-diagonal steps).

    Fix safety
    ----------
    Display-only: the block shape is part of how the kernel indexes its data (and of its shared
    memory sizes); the grid must change with it. A nearby shape (with a grid covering at least
    the same threads) is offered only when the CPU emulator runs the changed launch and finds
    the outputs the launch as it is computes, without more global sectors per thread
    (``compare_launch``: the whole launches when cheap, else the first CTAs of the change
    against the CTAs holding the same threads). A kernel hard-wired to its block (a 16-wide
    tile, an index that assumes 16 threads) gets, instead, block merging when the fix kit can
    write it (``gpuadvise/source/fixkit_merge.py``): k of the blocks (the fewest that fill whole
    warps) side by side in one CTA, the body reading ``threadIdx.x % B``, ``blockIdx.x * k +
    threadIdx.x / B`` and ``B`` for the builtins, each ``__shared__`` variable given a leading
    ``[k]`` and its name bound to the block's copy by reference (macros that name it follow),
    and the work between barriers of the last CTA's spare blocks turned off by a flag, never an
    early return before a barrier. The original grid's CTA count is the one kernel parameter
    the body reads whose value is the grid's (else a constant of this launch: launch-specific).
    Refused, with the reason in the message: a builtin index read in a helper or a macro,
    ``gridDim.x``, a warp-level intrinsic (shuffle, vote, match, the lane id), a dynamic shared
    array, a barrier whose condition may differ between the merged blocks or inside a
    ``switch``, memory read by a declaration between barriers. The merged kernel and launch are
    run on the CPU emulator against the launch as it is (``compare_launch`` with the candidate
    source; an odd grid's spare half included when the whole launches run): automatic-and-
    verified only when the outputs are equal. Whether it pays depends on how full the SMs are:
    with fewer CTAs than SMs (Rodinia nw's 128, lud's one) merging only halves the CTAs, so the
    variant waits for a GPU measurement (``needs_measurement``) and the estimate stays the
    rule's upper bound. Measured on an H200 (docs/data/ga103_merge_h200_2026-11-30.txt, outputs
    equal): HeCBench nw kernel1 on 1,024 CTAs 1.15x (1.27x back to back), on 1,023
    CTAs (a spare half) 1.12x, on 132 CTAs 0.99x; Rodinia nw on 128 CTAs 1.00x; lud_diagonal on
    one CTA 0.99x; kernels/merge16 (2026-11-30 03:30, accuracy.py) reverse_global 1.28x,
    mirror_tile 1.27x, reverse_tile 1.26x. The launch model on the variant's own trace said
    1.01x, 0.99x and 1.02x on the three corpus kernels: too close to 1 to be the estimate (its
    points would make the three warnings notes). The offered shapes and merges are then measured
    on a GPU.
    """

    id = "GA103"
    name = "block-not-warp-multiple"
    title = "Threads per block not a multiple of the warp size"
    severity = "warning"
    point_from_variant_trace = True
    models = ("occupancy",)
    options = {}

    def detect(self, ctx: RuleContext) -> Iterator[Finding]:
        block = ctx.launch.block
        threads = block.count
        warp = ctx.device.warp_size
        if threads % warp == 0:
            return
        if not ctx.reads_thread_index:
            return  # no thread tells itself apart: more threads would be copies (serial work)
        warps = -(-threads // warp)
        idle = warps * warp - threads
        # a shape is advice only when the kernel computes the same with it, on the emulator
        # (not for a kernel whose indexing or shared tiles are tied to its block)
        shapes = []
        why = ""
        for shape in _shapes(threads, block.as_tuple(), warp):
            launch = _launch_of(ctx, shape)
            if launch is None:
                continue
            check = ctx.services.compare_launch(launch[1], launch[0])
            if check.same:
                shapes.append(shape)
            elif not why:
                why = check.why
        merge: Merge | None = None
        refused = ""
        if not shapes:
            tried = _merge(ctx)
            merge, refused = (tried, "") if isinstance(tried, Merge) else (None, tried)
        if shapes:
            advice = f"use a multiple of {warp} (e.g. {' or '.join(shapes)})"
        elif merge is not None:
            k = merge.k
            advice = (
                f"no block shape of {warp}-multiple threads computes the same as it is (the "
                f"indexing or shared tiles are tied to the block of {block}); run {k} of the "
                f"blocks side by side in one CTA of {k * threads} threads (block merging: "
                f"threadIdx.x % {int(block.x)} and blockIdx.x * {k} + threadIdx.x / "
                f"{int(block.x)} for the indices, a copy of each shared array per block, the "
                f"grid cut to {merge.grid[0]} CTAs in x): the CPU emulator finds the same "
                f"outputs ({merge.how})"
            )
        else:
            advice = (
                f"no block of a multiple of {warp} threads computes the same without changing "
                f"the kernel (its indexing or shared tiles are tied to the block of {block}"
                + (f": {why}" if why else "")
                + "): change the kernel's mapping of threads to data first"
                + (f" (block merging not offered: {refused})" if refused else "")
            )
        yield self.finding(
            ctx,
            f"block {block} has {threads} threads: {warps} warps with {idle} idle lanes "
            f"({idle / (warps * warp):.0%} of the lanes scheduled); {advice}",
            line=ctx.kernel_line,
            evidence=[
                Evidence("threads_per_block_mod_warp", threads % warp, 0, "!="),
                Evidence("threads_per_block", threads, unit="threads"),
                Evidence("idle_lanes_per_block", idle, unit="lanes"),
            ],
            details=BlockShapes(
                tuple(shapes),
                warps,
                merge.k if merge is not None else 0,
                merge.blocks if merge is not None else "",
                merge.launch_specific if merge is not None else False,
            ),
        )

    def estimate(self, ctx: RuleContext, finding: Finding) -> Estimate:
        threads = ctx.launch.block.count
        d = finding.details_as(BlockShapes)
        lanes = d.warps * ctx.device.warp_size
        inputs: dict[str, object] = {"threads_per_block": threads, "lanes_per_block": lanes}
        method = (
            f"lanes scheduled / lanes working = {lanes} / {threads}, for an issue-bound kernel; "
            "a memory-bound kernel gains less"
        )
        ratio = lanes / threads
        # the merge, or a larger block on a grid covering the same threads, launches fewer CTAs:
        # their launches (the model's CTA ramp and CTA terms) fall with them, the issue by the
        # lane ratio, nothing by more (kernels/blocksize 10x10 -> 32x4: 1.28x fewer, 1.22x measured)
        shapes = [g for s in d.shapes if (got := _launch_of(ctx, s)) for g in [got[1]]]
        ctas = math.prod(ctx.launch.grid.as_tuple())
        fewer = float(d.merge) if d.merge else max((ctas / math.prod(g) for g in shapes), default=1)
        if fewer > 1.0:
            inputs[CTAS_DIVIDED_BY] = d.merge or round(fewer, 3)
            method += (
                f"; the {'merge' if d.merge else 'shape'} also launches 1/{fewer:.3g} of the CTAs "
                f"(the launch model's CTA launches fall by {fewer:.3g}x), so the work shrinks by "
                f"at most {max(fewer, ratio):.2f}x"
            )
            ratio = max(fewer, ratio)
        return Estimate(round(ratio, 3), "upper-bound", method, inputs)

    def transform(self, ctx: RuleContext, finding: Finding) -> Variant:
        d = finding.details_as(BlockShapes)
        if d.merge:
            return _merge_variant(ctx, d)
        shapes = d.shapes
        text = " or ".join(shapes) if shapes else f"a multiple of {ctx.device.warp_size}"
        description = (
            f"launch blocks of {text} threads, with the grid recomputed to cover the same work"
        )
        cands = []
        for shape in shapes:
            launch = _launch_of(ctx, shape)
            if launch is None:
                continue
            block, new_grid = launch
            cands.append(
                Variant(
                    "display-only",
                    f"launch {shape} blocks on a {new_grid[0]}x{new_grid[1]}x{new_grid[2]} grid "
                    "(the grid covers the same threads as before)",
                    launch={"block": list(block), "grid": list(new_grid)},
                    label=shape,
                )
            )
        if not cands:
            return Variant("display-only", description)
        return Variant(
            "display-only",
            description,
            launch=cands[0].launch,
            label=cands[0].label,
            alternatives=tuple(cands[1:]),
        )


def _launch_of(
    ctx: RuleContext, shape: str
) -> tuple[tuple[int, int, int], tuple[int, int, int]] | None:
    """(block, grid) of a shape ``"64"``/``"32x2"``, the grid covering at least the thread index
    range the launch's did; None for a 1-D block in place of a 2-D one."""
    old = ctx.launch.block.as_tuple()
    grid = ctx.launch.grid.as_tuple()
    dims = [int(v) for v in shape.split("x")] + [1, 1]
    block = (dims[0], dims[1], old[2] if len(shape.split("x")) < 3 else dims[2])
    if block[1] == 1 and old[1] > 1:
        return None  # a 2D launch keeps a 2D block
    new_grid = (
        -(-grid[0] * old[0] // block[0]),
        -(-grid[1] * old[1] // block[1]),
        -(-grid[2] * old[2] // block[2]),
    )
    return block, new_grid


# PTX that ties a thread to its warp or to the launch's grid: merged blocks would change it
_WARP_LEVEL = (
    ("shfl.sync", "a warp shuffle"),
    ("vote.", "a warp vote"),
    ("match.", "a warp match"),
    ("redux.", "a warp reduction"),
    ("activemask", "the active mask"),
    ("bar.warp.sync", "__syncwarp"),
    ("%laneid", "the lane id"),
    ("%warpid", "the warp id"),
    ("%nctaid.x", "gridDim.x"),
    (".extern .shared", "a dynamic shared array"),
)


@dataclass(frozen=True)
class Merge:
    """A verified block merge: ``k`` blocks per CTA, the new block and grid, the original grid's
    CTA count as the kernel reads it (``blocks``), the rewritten file and how it was checked."""

    k: int
    block: tuple[int, int, int]
    grid: tuple[int, int, int]
    blocks: str
    launch_specific: bool
    text: str
    how: str


def _grid_param(ctx: RuleContext, ks: KernelSource, blocks: int) -> str | None:
    """The one integer parameter the body reads whose value is the grid's CTA count in x."""
    if ks.kernel is None:
        return None
    used = {name for name, _ in ks.identifiers(ks.span)}
    env = ctx.spec.env()
    names = [
        p.name
        for p in ks.kernel.params
        if p.name in used and not p.pointer and env.get(p.name) == blocks
    ]
    return names[0] if len(names) == 1 else None


def _merged_text(ctx: RuleContext, k: int, blocks: str) -> fixkit_merge.Merged | str:
    ks = ctx.kernel_source
    if ks.kernel is None:
        return "the kernel's definition was not parsed"
    return fixkit_merge.merge_blocks(ks.tree, ks.kernel, k, int(ctx.launch.block.x), blocks)


def _merge(ctx: RuleContext) -> Merge | str:
    """Block merging (:mod:`gpuadvise.source.fixkit_merge`) with the fewest blocks per CTA
    that fill whole warps, checked on the emulator against the launch as it is; a string
    says why not."""
    warp = ctx.device.warp_size
    block, grid = ctx.launch.block.as_tuple(), ctx.launch.grid.as_tuple()
    threads = block[0] * block[1] * block[2]
    k = warp // math.gcd(threads, warp)
    if k * threads > 1024:
        return f"{k} blocks of {threads} threads exceed 1024 threads"
    ptx = ctx.kernel_ptx
    for op, what in _WARP_LEVEL:
        if op in ptx:
            return f"the kernel uses {what}"
    try:
        ks = ctx.kernel_source
    except ModelUnavailable as exc:
        return str(exc)
    param = _grid_param(ctx, ks, int(grid[0]))
    blocks = param if param is not None else f"{grid[0]}u"
    merged = _merged_text(ctx, k, blocks)
    if isinstance(merged, str):
        return merged
    new_block = (block[0] * k, block[1], block[2])
    new_grid = (-(-grid[0] // k), grid[1], grid[2])
    check = ctx.services.compare_launch(new_grid, new_block, merged.text)
    if not check.same:
        return f"the merged kernel does not compute the same: {check.why}"
    return Merge(k, new_block, new_grid, blocks, param is None, merged.text, check.how)


def _merge_variant(ctx: RuleContext, d: BlockShapes) -> Variant:
    block, grid = ctx.launch.block.as_tuple(), ctx.launch.grid.as_tuple()
    k = d.merge
    merged = _merged_text(ctx, k, d.blocks)
    if isinstance(merged, str):
        return Variant("display-only", f"block merging ({merged})")
    new_block = [block[0] * k, block[1], block[2]]
    new_grid = [-(-grid[0] // k), grid[1], grid[2]]
    note = (
        f". Launch-specific: no kernel parameter the body reads gives the grid's {grid[0]} "
        f"CTAs, so the count is written into the kernel ({d.blocks}): right for this launch only"
        if d.launch_specific
        else f"; the original grid's CTA count is read from `{d.blocks}`"
    )
    return Variant(
        "automatic-and-verified",
        f"run {k} blocks of {block[0]} threads side by side in one CTA: launch "
        f"{'x'.join(map(str, new_block))} blocks on a {'x'.join(map(str, new_grid))} grid; "
        f"each merged block keeps its own indices and its own copy of the shared arrays, and "
        f"the last CTA's spare blocks do no work but reach every barrier{note}",
        diff=unified_diff(
            ctx.kernel_source.text.split("\n"), merged.text.split("\n"), ctx.source_file
        ),
        launch={"block": new_block, "grid": new_grid},
        label=f"merge {k}",
        launch_specific=d.launch_specific,
        needs_measurement=True,
    )
