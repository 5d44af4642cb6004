"""GA403 register-pressure-peak: the values live across the register peak, and what shortening
their live ranges frees."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from gpuadvise.errors import GpuAdviseError
from gpuadvise.rules import (
    MOVE_LOAD,
    Estimate,
    Evidence,
    Finding,
    FindingDetails,
    PressurePlan,
    Rule,
    RuleContext,
    Shortening,
    Variant,
    counted,
    launch_times,
    lines_text,
    max_active_blocks,
    memory_rates,
    move_declarations,
    occupancy_ratio,
    pressure_plan,
    unified_diff,
    view_traffic,
)


@dataclass(frozen=True)
class HeldValue(FindingDetails):
    """A value live across the peak and how to keep it out: ``how`` (move the load, load it
    again, recompute it ...), ``freed`` registers, ``mechanical`` (an automatic rewrite)."""

    registers: tuple[str, ...]
    kind: str
    how: str
    def_line: int | None
    next_use_line: int | None
    last_use_line: int | None
    distance: int
    mechanical: bool
    why_not: str = ""


@dataclass(frozen=True)
class PressurePeak(FindingDetails):
    """The peak (``peak`` live at ``peak_line``, ``allocated`` by ptxas), the values held
    across it, what shortening them reaches (``registers_after``, ``warps_after``), and the
    automatic variant when there is one: its ``diff``, its registers and warps as built, how
    it was checked (``verified``), and its live registers along its SASS (``live_gpr``, drawn
    over the kernel's in the HTML report)."""

    peak: int
    peak_line: int | None
    allocated: int
    reserved: int
    freed: int
    registers_after: int
    warps_before: int
    warps_after: int
    held: tuple[HeldValue, ...]
    tile_registers: int = 0
    spill_bytes: int = 0
    diff: str | None = None
    moved_lines: tuple[int, ...] = ()
    variant_registers: int | None = None
    variant_peak: int | None = None
    variant_warps: int | None = None
    variant_spill_bytes: int | None = None
    verified: str = ""
    why_not_automatic: str = ""
    live_gpr: dict[str, Any] | None = None


def _held(s: Shortening, use_line: int | None) -> HeldValue:
    v = s.value
    return HeldValue(
        v.registers, v.kind, s.how, v.def_line, use_line, v.last_use_line, v.distance,
        s.mechanical, s.why_not,
    )  # fmt: skip


def _names(regs: list[str]) -> str:
    return ", ".join(regs) if len(regs) <= 4 else f"{', '.join(regs[:3])} ... {regs[-1]}"


def held_text(held: tuple[HeldValue, ...], limit: int) -> str:
    """The values held across the peak, grouped by what they are, where they come from and
    how to keep them out (8 floats of one declaration are one group), most registers first."""
    groups: dict[tuple[Any, ...], list[HeldValue]] = {}
    for h in held:
        groups.setdefault((h.how, h.kind, h.def_line, h.next_use_line), []).append(h)
    ordered = sorted(groups.values(), key=lambda g: -sum(len(h.registers) for h in g))
    parts = []
    for g in ordered[:limit]:
        h = g[0]
        n = sum(len(x.registers) for x in g)
        regs = _names([r for x in g for r in x.registers])
        kind = h.kind + ("s" if len(g) > 1 else "")
        used = f", next read at line {h.next_use_line}" if h.next_use_line else ""
        parts.append(
            f"{n} register{'s' if n != 1 else ''} ({regs}) of {kind} from line {h.def_line}"
            f"{used}, up to {max(x.distance for x in g)} instructions: {h.how}"
        )
    more = len(ordered) - limit
    return "; ".join(parts) + (f"; {counted(more, 'more group')}" if more > 0 else "")


class RegisterPressurePeak(Rule):
    """Registers limit occupancy (or spill), and values held across the register peak could live
    elsewhere.

    What it detects
    ---------------
    A launch whose occupancy is limited by registers below ``max_occupancy`` (or a kernel that
    spills), where the values live across the register peak (the instruction where the most
    general registers are live, from nvdisasm's life ranges: see ``gpuadvise analyze``'s "Live
    registers") include some that need not be live there: a loaded value not read between its
    load and the peak, an address or a constant kept across it, a value computed long before its
    first use. It counts what keeping them out of the peak frees, on the whole curve of live
    registers (each value taken off the span it would no longer be live over), and reports when
    that reaches a higher occupancy step (or lowers the spills). Accumulators are listed (a
    smaller tile frees half of them) but never make a finding on their own: register blocking
    is usually the point. Reported at the definition of the longest value it would move, else
    at the peak's line.

    Why it is slow
    --------------
    ptxas allocates registers for the most values live at once. A value loaded before a loop and
    read only after it holds its registers through the whole loop, where the loop's own values
    need them most: the peak rises, fewer warps fit an SM, and latency is hidden worse. ptxas
    schedules loads early to hide their latency, but it does not move a load past a loop.

    Example
    -------
    ``const float4 s = scale[col], b = bias[col];`` before a loop accumulating a 8x6 tile, read
    only by the epilogue after it: 8 registers held across the loop; 80 registers per thread,
    6 blocks of 128 threads per H100 SM. Loaded after the loop: 72, 7 blocks
    (``kernels/regpressure``, ``tile_early``).

    Fix
    ---
    Move each load next to its first use (automatic when no instruction in between writes
    memory: the load then reads the same bytes); load a value again, recompute an address or a
    constant next to its use; pack two 16-bit values in one register (half2); or use a smaller
    accumulator tile. The finding lists the values with the registers each frees.

    How the estimate is made
    ------------------------
    An upper bound, as GA101's: the occupancy after the change (from the variant's own register
    count when it was built, else the allocation less the registers freed) and Little's law on the
    launch roofline: ``speedup <= min(new, sat) / min(old, sat)``, or new / old when the launch is
    latency-bound. A kernel with enough independent work per thread gains less. The point comes from
    the variant's own trace (``point_from_variant_trace``, issue 29): the variant built with its own
    registers and occupancy, traced and run through the launch model; the bound is the larger of the
    two. kernels/regpressure's three spellings: 1.06x on the H200 model, 1.055-1.059x measured on an
    H200 (2026-11-30).

    Fix safety
    ----------
    Moving loads is automatic-and-verified: the declaration statements move down to just before
    the statement that first uses them, in the same block, only when no instruction between the
    load and its use writes memory (the SASS), the names declared are not used and what the
    initializer reads is not assigned in between (the source); the variant is built, its
    registers read, and its outputs compared with the kernel's on the CPU emulator before it is
    proposed (on a GPU they are compared again and timed). The other changes are display-only.
    """

    id = "GA403"
    name = "register-pressure-peak"
    title = "Values held across the register peak limit occupancy"
    severity = "warning"
    point_from_variant_trace = True
    models = ("occupancy", "registers")
    options = {"max_occupancy": 0.5, "saturation_occupancy": 0.5, "values": 4, "check_ctas": 2}

    def detect(self, ctx: RuleContext) -> Iterator[Finding]:
        occ = ctx.occupancy
        ctx.live_registers  # noqa: B018 (ModelUnavailable: skipped with a note)
        res = ctx.kernel.resources
        spills = int(res.spill_store_bytes + res.spill_load_bytes)
        threshold = float(ctx.option("max_occupancy"))
        limited = "registers" in occ.limiters and occ.occupancy < threshold
        if occ.active_blocks_per_sm == 0 or not (limited or spills):
            return
        plan = pressure_plan(ctx)
        if plan is None or plan.freed <= 0:
            return
        if plan.warps_after <= occ.active_warps_per_sm and not spills:
            return  # shortening the ranges does not reach another occupancy step
        rp = plan.pressure
        details = self._details(ctx, plan, spills)
        held = held_text(details.held, int(ctx.option("values")))
        step = (
            f"{plan.freed} fewer at the peak leave {plan.registers_after} registers per thread: "
            f"{plan.warps_after} warps per SM ({plan.warps_after / occ.max_warps_per_sm:.0%})"
            if plan.warps_after > occ.active_warps_per_sm
            else f"{plan.freed} fewer at the peak leave {plan.registers_after} registers per "
            f"thread: up to {plan.freed} fewer to spill"
        )
        if details.variant_registers is not None:
            step += (
                f"; built with the loads of {lines_text(details.moved_lines)} "
                f"moved to their first use: {details.variant_registers} registers, "
                f"{details.variant_warps} warps per SM"
            )
        tile = (
            f"; a smaller accumulator tile would free up to {details.tile_registers} more"
            if details.tile_registers
            else ""
        )
        why = (
            f"registers limit occupancy to {occ.occupancy:.0%} ({occ.active_warps_per_sm} of "
            f"{occ.max_warps_per_sm} warps per SM)"
            if limited
            else f"the kernel spills {spills} bytes per thread"
        )
        message = (
            f"{why}: {rp.peak} registers are live at the peak (line {rp.peak_line}; ptxas "
            f"allocates {rp.allocated}: the peak, the {rp.reserved} it reserves and {rp.slack} "
            f"free at the peak), held by {held}; {step}{tile}"
        )
        # at the first load the variant moves, else at the longest value's definition
        moved = [s.value.def_line for s in plan.local if s.how == MOVE_LOAD and s.value.def_line]
        line = min(moved) if moved else plan.local[0].value.def_line or rp.peak_line
        evidence = [
            Evidence("occupancy", round(occ.occupancy, 4), threshold, "<"),
            Evidence("live_registers_peak", rp.peak, unit="registers"),
            Evidence("registers_allocated", rp.allocated, unit="registers"),
            Evidence("registers_freed", plan.freed, unit="registers"),
            Evidence("warps_after", plan.warps_after, unit="warps"),
        ]
        yield self.finding(ctx, message, line=line, evidence=evidence, details=details)

    def _details(self, ctx: RuleContext, plan: PressurePlan, spills: int) -> PressurePeak:
        rp = plan.pressure
        details = PressurePeak(
            peak=rp.peak,
            peak_line=rp.peak_line,
            allocated=rp.allocated,
            reserved=rp.reserved,
            freed=plan.freed,
            registers_after=plan.registers_after,
            warps_before=ctx.occupancy.active_warps_per_sm,
            warps_after=plan.warps_after,
            held=tuple(
                _held(s, rp.site(s.stop)[1] if s.stop < len(rp.offsets) else None)
                for s in plan.local
            ),
            tile_registers=sum(s.width for s in plan.tile),
            spill_bytes=spills,
        )
        moves = [s for s in plan.mechanical if s.how == MOVE_LOAD]
        refused = sorted({s.why_not for s in plan.local if s.how == MOVE_LOAD and s.why_not})
        if not moves:
            return replace(details, why_not_automatic="; ".join(refused) or "no load to move")
        try:
            ks = ctx.kernel_source
        except GpuAdviseError as exc:
            return replace(details, why_not_automatic=exc.one_line())
        # the declarations the source can move, one definition line at a time
        kept, reasons = [], list(refused)
        for s in moves:
            use = rp.site(s.stop)[1] if s.stop < len(rp.offsets) else None
            if not ctx.same_file(s.value.def_file):
                reasons.append(f"line {s.value.def_line} is not in the kernel's file")
                continue
            one = move_declarations(ks, [s], [(s.value.def_line, use)])
            if isinstance(one, str):
                reasons.append(one)
            else:
                kept.append((s, use))
        if not kept:
            return replace(details, why_not_automatic="; ".join(dict.fromkeys(reasons)))
        moved = move_declarations(
            ks, [s for s, _u in kept], [(s.value.def_line, u) for s, u in kept]
        )
        if isinstance(moved, str):
            return replace(details, why_not_automatic=moved)
        text, lines = moved
        diff = unified_diff(ks.text.split("\n"), text.split("\n"), ctx.source_file)
        try:
            info, vrp = ctx.services.candidate_registers(text)
        except GpuAdviseError as exc:
            return replace(
                details, why_not_automatic=f"the variant was not built: {exc.one_line()}"
            )
        k = replace(ctx.occupancy_input, regs_per_thread=info.resources.registers)
        try:
            warps = max_active_blocks(ctx.device, k).active_warps_per_sm
        except GpuAdviseError:
            warps = 0
        vspill = int(info.resources.spill_store_bytes + info.resources.spill_load_bytes)
        details = replace(
            details,
            diff=diff,
            moved_lines=tuple(lines),
            variant_registers=info.resources.registers,
            variant_peak=vrp.peak,
            variant_warps=warps,
            variant_spill_bytes=vspill,
            live_gpr={
                key: vrp.to_dict()[key]
                for key in (
                    "gpr",
                    "sites",
                    "sites_table",
                    "peak",
                    "peak_index",
                    "allocated",
                    "peak_file",
                    "peak_line",
                )  # fmt: skip
            },
        )
        gains = warps > ctx.occupancy.active_warps_per_sm or (spills and vspill < spills)
        if not gains:
            return replace(
                details,
                why_not_automatic=f"built with the loads moved, ptxas still allocates "
                f"{info.resources.registers} registers ({warps} warps per SM)",
            )
        check = ctx.services.check_candidate(text, int(ctx.option("check_ctas")))
        if not check.same:
            return replace(
                details, why_not_automatic=f"the variant computes otherwise: {check.why}"
            )
        return replace(details, verified=check.how)

    def estimate(self, ctx: RuleContext, finding: Finding) -> Estimate:
        d = finding.details_as(PressurePeak)
        occ = ctx.occupancy
        warps = d.variant_warps if d.verified and d.variant_warps else d.warps_after
        if warps <= d.warps_before:
            return Estimate(
                None,
                "none",
                "not estimated: the registers freed lower the spills, not the occupancy "
                "(see GA401 for what spilling costs)",
            )
        old, new = occ.occupancy, warps / occ.max_warps_per_sm
        sat = float(ctx.option("saturation_occupancy"))
        latency_bound = False
        rates = memory_rates(ctx.device)
        if ctx.has_model("trace") and rates is not None:
            times = launch_times(view_traffic(ctx.device, ctx.trace_view), ctx.device, rates)
            latency_bound = times is not None and times.bound_by == "latency"
        ratio = occupancy_ratio(old, new, sat, latency_bound)
        source = (
            f"the variant as built ({d.variant_registers} registers)"
            if d.verified and d.variant_registers is not None
            else f"{d.allocated} - {d.freed} = {d.registers_after} registers"
        )
        how = (
            f"Little's law: a latency-bound launch's bandwidth grows at most with its resident "
            f"warps, {new:.2f} / {old:.2f} = {ratio:.2f}x"
            if latency_bound
            else f"resident warps up to {sat:.0%} occupancy: min({new:.2f}, {sat:.2f}) / "
            f"min({old:.2f}, {sat:.2f}) = {ratio:.2f}x"
        )
        return Estimate(
            round(max(ratio, 1.0), 3),
            "upper-bound",
            f"occupancy {old:.0%} -> {new:.0%} ({d.warps_before} -> {warps} warps per SM) at "
            f"{source}; {how}. Left out: instruction-level parallelism (independent loads per "
            "thread hide latency without more warps) and the latency a moved load no longer "
            "hides behind the loop",
            {
                "occupancy_before": old,
                "occupancy_after": new,
                "saturation_occupancy": sat,
                "latency_bound": latency_bound,
            },  # fmt: skip
        )

    def transform(self, ctx: RuleContext, finding: Finding) -> Variant:
        d = finding.details_as(PressurePeak)
        listing = held_text(d.held, 8)
        if d.diff and d.verified:
            return Variant(
                "automatic-and-verified",
                f"move the loads of {lines_text(d.moved_lines)} next to their "
                f"first use: built here, {d.variant_registers} registers per thread (now "
                f"{d.allocated}), {d.variant_warps} warps per SM (now {d.warps_before}); "
                f"{d.verified}",
                diff=d.diff,
            )
        return Variant(
            "display-only",
            f"keep the values out of the peak at line {d.peak_line}: {listing}"
            + (f". Not automatic: {d.why_not_automatic}" if d.why_not_automatic else ""),
            diff=d.diff,
        )
