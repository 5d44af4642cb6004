"""GA101's family: what a step up in occupancy takes, built and checked before it is proposed.

- :func:`launch_bounds`: the kernel's ``__launch_bounds__`` as its PTX states them;
- :func:`block_launch`: the launch with another block size covering the same threads;
- :func:`live_floor`: the live-register floor a register cap must stay above;
- :func:`rewrite_warps`: the warps per SM GA403's shortening of the live values reaches;
- :func:`spills_at`: the spill bytes of the kernel built with its registers capped (the flag, or
  the bounds rewritten in the source by :func:`with_bounds`);
- :func:`register_variant`: the variant of a register step (a flag, or advice).

Kept beside the rule (issue 28: no rule file over 400 lines).
"""

from __future__ import annotations

from typing import Any

from gpuadvise.errors import GpuAdviseError
from gpuadvise.ptx.errors import PtxParseError
from gpuadvise.ptx.parser import parse_ptx_cached
from gpuadvise.rules.context import RuleContext
from gpuadvise.rules.findings import Variant
from gpuadvise.rules.pressure import pressure_plan

__all__ = [
    "LIMITER_LABELS",
    "block_launch",
    "launch_bounds",
    "live_floor",
    "register_variant",
    "rewrite_warps",
    "spill_text",
    "spills_at",
    "with_bounds",
]

LIMITER_LABELS = {
    "warps": "the block size (warps per SM)",
    "registers": "registers",
    "shared_memory": "shared memory",
    "blocks": "the blocks-per-SM limit (small blocks)",
    "barriers": "barriers",
    "virtual_resources": "virtual resources",
}
"""How the message names each occupancy limiter."""


def launch_bounds(ptx: str, mangled: str) -> tuple[int | None, int | None]:
    """(max threads per block, min blocks per SM) of the kernel's ``__launch_bounds__``, from the
    PTX performance directives of its ``.entry`` (``.maxntid 256, 1, 1``, ``.minnctapersm 2``)
    as the PTX parser reads them; None where absent (or the PTX does not parse)."""
    try:
        func = parse_ptx_cached(ptx).functions.get(mangled)
    except PtxParseError:
        return None, None
    return (None, None) if func is None else func.launch_bounds()


def block_launch(
    ctx: RuleContext, threads: int, axis: str = "x"
) -> tuple[tuple[int, int, int], tuple[int, int, int]] | None:
    """(grid, block) with ``threads`` per block covering the launch's threads: along ``axis``
    ``x``, the block's y and z kept, x resized, the grid's x resized to cover as many threads;
    along ``y`` (a 2-D block whose x a tile fixes: 32x16 made 32x8), x and z kept, y and the
    grid's y resized. None when ``threads`` is not a multiple of the kept dimensions, or a
    block of one row has no y to resize."""
    bx, by, bz = ctx.launch.block.as_tuple()
    gx, gy, gz = ctx.launch.grid.as_tuple()
    if axis == "y":
        if by <= 1 or threads % (bx * bz):
            return None
        ny = threads // (bx * bz)
        return (gx, -(-gy * by // ny), gz), (bx, ny, bz)
    if threads % (by * bz):
        return None
    nx = threads // (by * bz)
    return (-(-gx * bx // nx), gy, gz), (nx, by, bz)


def live_floor(ctx: RuleContext) -> tuple[int, str] | None:
    """The live-register floor (the peak + ptxas's reserved) and where the peak is; None
    without the live registers."""
    try:
        rp = ctx.live_registers
    except GpuAdviseError:
        return None
    live = rp.peak - rp.reserved_at_peak
    return rp.floor, f"{live} live at line {rp.peak_line} + {rp.reserved} ptxas reserves"


def rewrite_warps(ctx: RuleContext) -> int | None:
    """Warps per SM that GA403's shortening of the values at the register peak reaches, when
    it frees any (None: nothing to shorten)."""
    plan = pressure_plan(ctx)
    if plan is None or plan.freed <= 0:
        return None
    return plan.warps_after


def spills_at(ctx: RuleContext, cap: int, max_threads: int | None, blocks: int) -> int | None:
    """Spill bytes (stores + loads) of the kernel built with its registers capped at ``cap``
    (``-maxrregcount``; for a kernel with ``__launch_bounds__``, which ignores the flag, the
    bounds rewritten in the source to ask for ``blocks`` per SM); None when it cannot be built
    here."""
    try:
        if max_threads is None:
            info = ctx.services.compile_candidate(nvcc_flags=(f"-maxrregcount={cap}",))
        else:
            text = with_bounds(ctx, max_threads, blocks)
            if text is None:
                return None
            info = ctx.services.compile_candidate(text)
    except GpuAdviseError:
        return None
    return int(info.resources.spill_store_bytes + info.resources.spill_load_bytes)


def with_bounds(ctx: RuleContext, max_threads: int, blocks: int) -> str | None:
    """The kernel's file with its ``__launch_bounds__`` asking for ``blocks`` blocks per SM;
    None when the attribute is not found on the kernel's declaration."""
    try:
        ks = ctx.kernel_source
    except GpuAdviseError:
        return None
    start = ks.code.rfind("__launch_bounds__", 0, ks.body_start)
    close = ks.code.find(")", start) if start >= 0 else -1
    if close < 0 or any(c in ks.code[close : ks.body_start] for c in ";}"):
        return None  # not this kernel's
    return ks.text[:start] + f"__launch_bounds__({max_threads}, {blocks})" + ks.text[close + 1 :]


def register_variant(ctx: RuleContext, step: Any) -> Variant:
    """The variant of a register step (GA101's ``NextStep``): display-only advice when the cap
    is under the live-register floor, when GA403's rewrite reaches as many warps, when the cap
    spills, or when the kernel has ``__launch_bounds__`` (which ``-maxrregcount`` does not
    override); otherwise the flag, automatic-and-verified."""
    if step.below_floor:
        return Variant(
            "display-only",
            f"a cap of {step.value} registers per thread is under the live-register floor "
            f"of {step.floor}: not proposed; lower the live values instead"
            + (
                f" (GA403: its rewrite reaches {step.rewrite_warps} warps per SM)"
                if step.rewrite_warps
                else " (fewer values kept per thread across the loop, smaller types)"
            ),
        )
    if step.rewrite_warps is not None:
        return Variant(
            "display-only",
            f"prefer GA403's rewrite: it reaches {step.rewrite_warps} warps per SM without "
            f"capping registers; a cap of {step.value} (-maxrregcount={step.value} or "
            "__launch_bounds__) makes ptxas schedule for fewer registers, which may cost "
            "more than the warps gain",
        )
    threads = ctx.occupancy_input.threads_per_block
    warps = ctx.occupancy.warps_per_block
    min_blocks = max(step.active_warps_per_sm // max(warps, 1), 1)
    res = ctx.kernel.resources if step.spill_bytes_after is not None else None
    now = 0 if res is None else res.spill_store_bytes + res.spill_load_bytes
    if step.spill_bytes_after is not None and step.spill_bytes_after > now:
        return Variant(
            "display-only",
            f"capping the kernel at {step.value} registers per thread (for "
            f"{step.occupancy:.0%} occupancy) spills: built here it moves "
            f"{step.spill_bytes_after} bytes of spill stores and loads per thread "
            f"(now {now}), so neither -maxrregcount={step.value} nor __launch_bounds__ is "
            "proposed; lower the live values instead (fewer values kept per thread "
            "across the loop, smaller types), or accept this occupancy",
        )
    if step.max_threads is not None:
        # nvcc ignores -maxrregcount for a kernel with __launch_bounds__: the bounds
        # are the lever
        bounds = f"__launch_bounds__({step.max_threads}" + (
            f", {step.min_blocks})" if step.min_blocks is not None else ")"
        )
        return Variant(
            "display-only",
            f"change the kernel's {bounds} to __launch_bounds__({step.max_threads}, "
            f"{min_blocks}): ptxas then keeps it within {step.value} registers per "
            f"thread ({min_blocks} blocks of {threads} threads per SM; -maxrregcount is "
            "ignored for a kernel with __launch_bounds__)" + spill_text(step.spill_bytes_after),
        )
    return Variant(
        "automatic-and-verified",
        f"compile with -maxrregcount={step.value} (in the source: "
        f"__launch_bounds__({threads}, {min_blocks}) on the kernel); check for spills",
        nvcc_flags=(f"-maxrregcount={step.value}",),
    )


def spill_text(spill_bytes: int | None) -> str:
    """What the variant says about the spills of the kernel built under the bound."""
    if spill_bytes is None:
        return "; check for spills"
    if spill_bytes == 0:
        return "; built here with that bound: no spills"
    return f"; built here with that bound: {spill_bytes} bytes of spill stores and loads"
