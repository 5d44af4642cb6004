"""GA208's privatised histogram: where a launch's contended global atomics are integer adds
into one buffer of bins that fits shared memory, the fix kit's rewrite
(:func:`gpuadvise.source.fixkit_privatise.privatise`) gives each CTA a copy of the bins in
dynamic shared memory, flushed once per non-zero bin and CTA, and the launch adds the bins'
bytes of dynamic shared memory (and runs one wave of CTAs where the kernel's loop is
grid-stride). HeCBench's bincount GLOBAL, privatised by hand, ran 38-40x faster on an H200.

What the trace must show: every global access of the buffer (the sampled CTAs' records whose
lanes reach its bytes) is one of the finding's atomics, an integer add (32- or 64-bit), and
the fix kit finds them with their results unused; the buffer's bytes (its whole allocation:
any index the kernel may write within it has its bin) fit 48 KB of dynamic shared memory with
the launch's CTAs per SM kept."""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from gpuadvise.model.banks import active_lanes
from gpuadvise.model.occupancy import OccupancyInputError, max_active_blocks
from gpuadvise.rules.context import ModelUnavailable, RuleContext
from gpuadvise.rules.findings import Variant
from gpuadvise.rules.global_atomics import HotAddress
from gpuadvise.rules.grid_stride import is_grid_stride
from gpuadvise.source import fixkit_atomics, fixkit_privatise
from gpuadvise.trace.access import Space

__all__ = ["MAX_BINS_BYTES", "PrivatePlan", "privatise_plan", "privatise_variant"]

MAX_BINS_BYTES = 48 * 1024
"""The most dynamic shared memory a launch gets without the kernel's opt-in attribute."""

_INT_ADDS = {"u32": 4, "s32": 4, "u64": 8}
"""Integer adds by the PTX type, to the bytes of a bin (a 64-bit add is `.u64`: CUDA's
``atomicAdd`` takes ``unsigned long long``)."""


@dataclass(frozen=True)
class PrivatePlan:
    """The rewrite's diff, the bins' buffer and count (its expression: a parameter, or None
    for the dynamic shared memory's), their bytes and the variant's launch change."""

    diff: str
    buffer: str
    count_param: str | None
    bins: int
    bytes: int
    launch: dict[str, object]


def _int_add_size(opcode: str) -> int | None:
    mods = opcode.split(".")[1:]
    if "add" not in mods:
        return None
    return next((_INT_ADDS[m] for m in reversed(mods) if m in _INT_ADDS), None)


def _only_the_atomics(ctx: RuleContext, h: HotAddress, base: int, size: int) -> bool:
    """Every traced global access whose lanes reach ``[base, base + size)`` is one of the
    finding's atomics."""
    recs = ctx.trace.records
    glob = recs[recs["space"] == int(Space.GLOBAL)]
    if not len(glob):
        return False
    act = active_lanes(glob["mask"])
    addr = glob["addr"].astype(np.uint64)
    inside = act & (addr >= np.uint64(base)) & (addr < np.uint64(base + size))
    reach = inside.any(axis=1)
    return bool(np.isin(glob["inst"][reach].astype(np.int64), list(h.insts)).all())


def _reductions_only(ctx: RuleContext, line: int) -> bool:
    """ptxas made every global atomic at the line (its call site) a reduction (``RED``): no
    result is used, where the fix kit cannot find the call (an object's operator)."""
    try:
        sass = ctx.sass_instructions
    except ModelUnavailable:
        return False
    ops = [
        i.base_opcode
        for i in sass
        if i.base_opcode in ("RED", "REDG", "ATOM", "ATOMG")
        and i.call_site[1] == line
        and ctx.same_file(i.call_site[0])
    ]
    return bool(ops) and all(op.startswith("RED") for op in ops)


def _count_param(ctx: RuleContext, buffer: str, bins: int) -> str | None:
    """The non-pointer kernel parameter that gives the bin count: the one the launch spec
    sizes the buffer by (``count = "nbins"``), whose value here is the bins' count (a
    parameter that only happens to equal it is not taken)."""
    kernel = ctx.kernel_source.kernel
    spec = ctx.spec.buffer(buffer)
    if kernel is None or spec is None:
        return None
    name = spec.count_expr.strip()
    for p in kernel.params:
        if p.name == name and not p.pointer and ctx.spec.env().get(name) == bins:
            return name
    return None


def privatise_plan(
    ctx: RuleContext, line: int | None, file: str | None, h: HotAddress
) -> PrivatePlan | str:
    """The privatised histogram for a GA208 finding at ``line`` (see the module docstring),
    or why not (a sentence)."""
    if line is None or not ctx.same_file(file):
        return "the atomic is in another file"
    size = _int_add_size(h.opcode)
    if size is None:
        return "the atomic is not an integer add (a float sum's order would change)"
    if h.buffer is None or h.buffer not in ctx.trace.buffers:
        return "the atomic's addresses are not in one buffer of the launch"
    base, nbytes = (int(v) for v in ctx.trace.buffers[h.buffer])
    if not _only_the_atomics(ctx, h, base, nbytes):
        return f"the kernel reads or writes `{h.buffer}` otherwise than by the atomic"
    ks = ctx.kernel_source
    sites = fixkit_atomics.atomic_sites(ks.tree, line)
    if isinstance(sites, str) and not _reductions_only(ctx, line):
        return sites
    if not isinstance(sites, str) and any(s.result_used for s in sites):
        return "the atomic's result is used (a copy per CTA would return other values)"
    own = int(ctx.launch.dynamic_smem_bytes)
    bins = nbytes // size
    if own + nbytes > MAX_BINS_BYTES:
        return (
            f"`{h.buffer}` ({nbytes} bytes: its whole allocation, which the kernel's index may "
            f"reach) does not fit {MAX_BINS_BYTES // 1024} KB of dynamic shared memory"
        )
    try:
        now = ctx.occupancy.active_blocks_per_sm
        res = replace(ctx.occupancy_input, dynamic_smem_bytes=own + nbytes)
        after = max_active_blocks(ctx.device, res).active_blocks_per_sm
    except (ModelUnavailable, OccupancyInputError):
        return "no occupancy model for this launch"
    if after < now:
        return f"{nbytes} bytes of bins per CTA would cut the CTAs per SM from {now} to {after}"
    count = _count_param(ctx, h.buffer, bins)
    if count is None and own:
        return "the launch has dynamic shared memory and no kernel parameter gives the bin count"
    kernel = ks.kernel
    if kernel is None:
        return "the kernel's definition is not in the file"
    rw = ks.rewrite()
    why = fixkit_privatise.privatise(ks.tree, rw, kernel, h.buffer, count)
    if why is not None:
        return why
    diff = rw.diff(ctx.source_file)
    if diff is None:
        return "no change"
    launch: dict[str, object] = {"dynamic_smem_bytes": own + nbytes}
    g = ctx.launch.grid
    waves = ctx.waves_or_none
    wave = waves.ctas_per_wave if waves is not None else 0
    if g.y == 1 and g.z == 1 and wave and g.x > wave and is_grid_stride(ks):
        launch["grid"] = [wave, 1, 1]
    return PrivatePlan(diff, h.buffer, count, bins, nbytes, launch)


def privatise_variant(ctx: RuleContext, plan: PrivatePlan) -> Variant:
    """GA208's automatic variant for ``plan``: the diff and the launch change, described."""
    count = (
        f"`{plan.count_param}` ({plan.bins} in this launch)"
        if plan.count_param
        else f"the launch's dynamic shared memory over the bin's size ({plan.bins})"
    )
    grid = plan.launch.get("grid")
    where = (
        f"; it runs one wave of {grid[0]} CTAs (the kernel's grid-stride loop gives each "
        f"thread more elements) instead of {ctx.launch.grid.x}"
        if isinstance(grid, list)
        else "; the grid is kept"
    )
    return Variant(
        "automatic-and-verified",
        f"a copy of `{plan.buffer}`'s {plan.bins} bins per CTA in dynamic shared memory: the "
        "kernel's body, as written, runs in a lambda whose capture gives "
        f"`{plan.buffer}` the CTA's copy, zeroed before it; after a barrier each non-zero bin "
        f"is added to `{plan.buffer}` with one global atomic (the bin count: {count}). The "
        f"launch adds {plan.bytes} bytes of dynamic shared memory (so must every launch of "
        f"the kernel on the host){where}. Integer sums are exact: the outputs are checked "
        f"against the kernel's. An index past the {plan.bins} bins (which the kernel as "
        "written adds to past the buffer's end) lands outside the copy instead: the outputs' "
        "check refuses the variant then",
        diff=plan.diff,
        launch=dict(plan.launch),
        label="private bins",
    )
