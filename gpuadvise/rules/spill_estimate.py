"""GA401's estimate of register spills on the launch model (issue 29), and the relaxations of the
register cap it weighs (the variant the rule offers first).

The spills are ptxas's: the PTX the emulator runs has none, so the traced launch's memory terms
leave them out, while its issue term has their ``LDL``/``STL`` (the SASS's counts,
:mod:`gpuadvise.trace.sass_counts`). :func:`spill_estimate` adds their traffic
(:func:`gpuadvise.model.execution.spill_traffic`: the L1's wavefronts, and the L2's and DRAM's
share where the frames outgrow the L1) to the launch's before side, and takes the variant's
after side: the same work without the spill instructions and their traffic (or with the part of
them the variant still spills), at the variant's CTAs per SM. Point and bound are
:func:`~gpuadvise.rules.estimates.launch_change_estimate`'s, the term that bounds each side in
the estimate's inputs.

Kept beside the rule (issue 28: no rule file over 400 lines).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from gpuadvise.model.execution import local_traffic
from gpuadvise.model.l1 import L1_UNUSED_BYTES, UNIFIED_EXTRA_BYTES
from gpuadvise.model.occupancy import max_active_blocks
from gpuadvise.rules.context import ModelUnavailable, RuleContext
from gpuadvise.rules.estimates import launch_change_estimate, view_traffic
from gpuadvise.rules.findings import Estimate
from gpuadvise.rules.register_caps import Candidate, Compiled, compile_candidate

__all__ = ["spill_estimate", "spill_relaxations"]


def spill_relaxations(
    ctx: RuleContext, candidates: Sequence[Candidate], base_spill: int, budget: int
) -> list[Compiled]:
    """The relaxations of the register cap that spill less than the kernel (each built as the
    analysis built the kernel, at most ``budget`` tried, least relaxed first, up to the first
    without spills), one per register allocation: the fewest spills first, then the highest
    occupancy (the variant the rule offers first)."""
    kept: list[Compiled] = []
    for cand in candidates[: max(budget, 0)]:
        built = compile_candidate(ctx, cand)
        if built is None or built.spill_bytes >= base_spill:
            continue  # never offer a variant that spills as much or more
        if any(k.registers == built.registers for k in kept):
            continue  # the same allocation as a candidate already kept: the same code
        kept.append(built)
        if built.spill_bytes == 0:
            break  # further relaxation only lowers occupancy
    kept.sort(key=lambda k: (k.spill_bytes, -(k.occupancy or 0.0)))
    return kept


def _l1_bytes(ctx: RuleContext, ctas_per_sm: int) -> float:
    """What the SM's unified L1/shared array leaves to cached lines: the array less what cached
    lines never get (measured, :data:`~gpuadvise.model.l1.L1_UNUSED_BYTES`) and the resident
    CTAs' shared memory."""
    occ = ctx.occupancy
    device = ctx.device
    shared = ctas_per_sm * int(getattr(occ, "allocated_smem_per_block", 0) or 0)
    return float(device.smem_per_sm + UNIFIED_EXTRA_BYTES - L1_UNUSED_BYTES - shared)


def spill_estimate(
    ctx: RuleContext,
    frame_bytes: int,
    spill_bytes: int,
    variant: Compiled | None,
    kind: str = "spill",
) -> Estimate | None:
    """The local accesses' cost on the launch model (see the module doc): before, the traced
    launch with every local access of the SASS; after, for ``kind`` ``spill`` without the
    spills, or with ``variant``'s (``variant.spill_bytes`` of the kernel's ``spill_bytes``, in
    proportion, in its own frame, at its CTAs per SM from its registers; none without a
    variant: what shortening the live ranges would give), for ``local-array`` without any
    local access (the array in registers): not issued, not in the L1, and off the dependency
    chains (``KernelWork.chain_in_registers``, the PTX's ``ld.local``/``st.local`` register
    moves), where the before side's chains wait for each ``ld.local`` as for the launch's
    global loads (measured on an H200: an ``LDL`` that hits the L1 still returns behind the
    warps' global misses, docs/accuracy.md s14-local). None
    where the model cannot weigh them: no trace, no SASS counts mapped onto it
    (``KernelWork.local_*`` 0), for a local array no chains without its accesses (a loop whose
    iteration is the SASS's schedule), no device rates."""
    if not ctx.has_model("trace"):
        return None
    try:
        view = ctx.trace_view
    except ModelUnavailable:
        return None
    device = ctx.device
    base = view_traffic(device, view)
    work = base.work
    if work is None or work.local_wavefronts <= 0:
        return None
    if kind == "spill" and work.spill_wavefronts <= 0:
        return None
    if kind != "spill" and work.chain_in_registers is None:
        return None  # the chains without the local accesses are not known
    ctas_now = int(work.ctas_per_sm) or int(ctx.occupancy.active_blocks_per_sm)
    l1_now = _l1_bytes(ctx, ctas_now)
    now = local_traffic(
        work, device, frame_bytes, l1_now, work.local_wavefronts, work.local_store_wavefronts
    )
    before = replace(
        base,
        l1_cycles=base.l1_cycles + now.l1_cycles,
        l2_load_sectors=base.l2_load_sectors + now.l2_sectors,
        dram_bytes=base.dram_bytes + now.dram_bytes,
    )
    kept = 0.0
    ctas_after = ctas_now
    frame_after = 0
    label = "the array kept in registers"
    gone = (work.local_requests, work.local_wavefronts, work.local_store_wavefronts)
    if kind == "spill":
        label = "no spills"
        frame_after = frame_bytes
        if variant is not None:
            kept = variant.spill_bytes / spill_bytes if spill_bytes > 0 else 0.0
            label = f"the variant {variant.candidate.label}"
            frame_after = variant.local_bytes
            try:
                k = replace(ctx.occupancy_input, regs_per_thread=variant.registers)
                ctas_after = int(max_active_blocks(device, k).active_blocks_per_sm) or ctas_now
            except Exception:  # the candidate's occupancy: as the kernel's when it cannot be had
                ctas_after = ctas_now
        part = 1.0 - kept
        gone = (
            work.spill_requests * part,
            work.spill_wavefronts * part,
            work.spill_store_wavefronts * part,
        )
    moved: dict[str, Any] = {}
    if kind != "spill":  # the array in registers: its accesses off the chains, and not issued
        regs = dict(work.chain_in_registers or {})
        moved = {
            "chain": regs,
            "chain_unordered": regs,
            "local_links": 0.0,
            "chain_in_registers": None,
            "critical_instructions": max(
                work.critical_instructions - gone[0] / max(work.warps_per_cta, 1), 0.0
            ),
        }
    after_work = replace(
        work,
        **moved,
        pipes={**work.pipes, "lsu": max(work.pipes.get("lsu", 0.0) - gone[0], 0.0)},
        local_requests=max(work.local_requests - gone[0], 0.0),
        local_wavefronts=max(work.local_wavefronts - gone[1], 0.0),
        local_store_wavefronts=max(work.local_store_wavefronts - gone[2], 0.0),
        spill_requests=work.spill_requests * kept,
        spill_wavefronts=work.spill_wavefronts * kept,
        spill_store_wavefronts=work.spill_store_wavefronts * kept,
        ctas_per_sm=ctas_after if work.ctas_per_sm else 0,
    )
    left = local_traffic(
        after_work,
        device,
        frame_after,
        _l1_bytes(ctx, ctas_after),
        after_work.local_wavefronts,
        after_work.local_store_wavefronts,
    )
    after = replace(
        base,
        work=after_work,
        l1_cycles=base.l1_cycles + left.l1_cycles,
        l2_load_sectors=base.l2_load_sectors + left.l2_sectors,
        dram_bytes=base.dram_bytes + left.dram_bytes,
    )
    busiest = -(-int(view.total_ctas) // max(int(device.sm_count or 1), 1))
    run_now, run_after = min(ctas_now, busiest), min(ctas_after, busiest)
    if run_after != run_now and run_now > 0:  # fewer CTAs an SM than the launch runs now
        after = replace(after, resident_warps=base.resident_warps * run_after / run_now)
    ctas = max(int(work.ctas), 1)
    inputs: dict[str, Any] = {
        "local_warp_instructions": round(work.local_requests * ctas),
        "local_wavefronts": round(work.local_wavefronts * ctas),
        "spill_warp_instructions": round(work.spill_requests * ctas),
        "removed_warp_instructions": round(gone[0] * ctas),
        "frame_bytes": frame_bytes,
        "frames_per_sm_bytes": round(now.footprint_bytes),
        "l1_bytes": round(l1_now),
        "l1_miss": round(now.miss, 3),
        "ctas_per_sm_before": ctas_now,
        "ctas_per_sm_after": ctas_after,
        "spills_kept": round(kept, 3),
    }
    if kind != "spill":
        inputs["local_links_per_warp"] = round(work.local_links, 2)
        inputs["chain_global_links_per_warp"] = round(work.chain.get("global", 0.0), 2)
    where = (
        "in the L1"
        if now.miss <= 0
        else f"{now.miss:.0%} of them past the L1 ({now.footprint_bytes / 1024:.0f} KB of "
        "frames an SM)"
    )
    whose = "spills'" if kind == "spill" else "local array's"
    what = (
        f"the {whose} {gone[0] * ctas:,.0f} LDL/STL warp instructions "
        f"({gone[1] * ctas:,.0f} L1 wavefronts of the launch's {work.local_wavefronts * ctas:,.0f}"
        f" local ones: a warp's 32-bit local access is one 128-byte line, {where}; the SASS's, "
        f"weighted by the trace's block counts) removed, as {label} would"
        + (f" (at {run_after} CTAs an SM instead of {run_now})" if run_after != run_now else "")
        + (
            "; their latency is taken as hidden (not on the chains)"
            if kind == "spill"
            else f"; the PTX's ld.local on the critical warp's chain ({work.local_links:,.0f} of "
            f"its {work.chain.get('global', 0.0):,.0f} memory waits) wait as its global loads "
            "before (an L1 hit returns behind the warps' misses) and are register moves after"
        )
    )
    return launch_change_estimate(device, before, after, what, inputs)
