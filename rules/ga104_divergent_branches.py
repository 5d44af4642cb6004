"""GA104 divergent-branches: low SIMT efficiency from a branch that splits warps."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from gpuadvise.rules import (
    WARP,
    Estimate,
    Evidence,
    Finding,
    FindingDetails,
    ModelUnavailable,
    Rule,
    RuleContext,
    issue_change_estimate,
    roofline,
    sm_cycles_per_s,
    work_ratio,
)

# Each SM sub-partition (4 per SM) issues one warp instruction per cycle.
_ISSUE_PER_SM_PER_CLOCK = 4


@dataclass(frozen=True)
class Divergence(FindingDetails):
    """The splitting branch's line, the issue slots lost to it and the kernel's, over the sampled
    CTAs (lane slots: one lane of one executed warp instruction)."""

    branch_line: int
    lost_slots: int
    issue_slots: int
    warp_instructions: int
    efficiency: float
    splits: int
    warp_executions: int
    # the branch decides on loaded data and is no loop's test: no remap packs its sides
    data_filter: bool = False


class DivergentBranches(Rule):
    """A branch that splits warps so that many lanes idle while the others execute.

    What it detects
    ---------------
    The kernel's SIMT efficiency (active lanes per executed warp instruction, from the CPU
    emulator's warp masks: Nsight Compute's ``smsp__thread_inst_executed.sum /
    (smsp__inst_executed.sum * 32)``) is low, and a conditional branch that depends on the thread
    index or the data splits warps and leaves a large share of the issue slots idle: the
    interleaved tree reduction (``tid % (2*s) == 0``), a causal mask where lanes past the
    diagonal wait, an early ``return`` of part of each warp.
    Reported at the branch's line, with the SIMT efficiency of the lines it controls. The bounds
    check of the grid's last block (a branch that splits warps only in CTAs at the grid's far
    edge, once per warp) is not reported, nor a branch whose sides are already packed: every
    split leaves each side a contiguous run of lanes and at most one warp of a CTA splits per
    execution (``if (threadIdx.x < k)``, a binomial tree's ``if (i > tid * k)`` as its
    triangle shrinks), where no remapping fills the warps better: the first ``k`` threads
    doing serial work is too little parallelism, not divergence. A branch that decides on
    loaded data and is no loop's test (a threshold filter, a compare-and-swap, a math function's
    data-dependent path inlined at the call's line: the PTX predicate computed from loads, its
    region not reaching back to it) is a note without an estimate: no remap of threads to
    elements makes whole warps agree on random data, predication issues the same warp
    instructions, and only a compaction of the elements by outcome could pack the lanes. A
    data-dependent loop test (lanes leave a loop at different iterations) stays a warning: a
    warp per item makes the trip count warp-uniform.

    Why it is slow
    --------------
    A warp issues one instruction for all its 32 lanes; lanes on the side not taken are masked
    off but their issue slot is spent. When half the lanes of every warp idle through a loop, the
    SM issues twice the warp instructions the work needs; an issue- or latency-bound kernel runs
    up to that much slower.

    Example
    -------
    ``tests/cuda/divergence/divergence.cu``: ``tree_interleaved`` (``t % (2 * k) == 0``),
    ``causal_scores`` (``col <= row`` on 32x32 tiles), ``few_threads`` (``threadIdx.x < k``),
    ``early_exit``; ``kernels/reduction/reduce.cu`` ``reduce1``.

    Fix
    ---
    Map the work so that whole warps take the same side: sequential addressing in a tree
    reduction (``if (tid < s)`` with ``s`` halving, GA202's variant), compact the active items
    to the first threads (``index = 2 * s * tid``), give the idle lanes other work (causal
    attention: skip whole masked tiles, or pack two triangles into one rectangle), or make a
    warp, not a thread, own each item whose work varies.

    How the estimate is made
    ------------------------
    An upper bound on the launch model (memory terms, issue and pipes from the emulator's
    instruction counts, the critical path, the launch floor): every pipe's warp instructions
    fall by the idle lane slots the branch controls divided by 32 (the same thread instructions
    packed into full warps), the dependent chains and the memory traffic unchanged. Without the
    instruction counts (the GPU tracer), the issue pipe of the memory roofline against the DRAM
    floor; without the device's clock, the ratio of warp instructions.

    Fix safety
    ----------
    Display-only: the remapping changes which thread does what; GA202 and GA205 offer verified
    variants for the reduction trees.
    """

    id = "GA104"
    name = "divergent-branches"
    title = "Divergent branches: lanes of a warp idle"
    severity = "warning"
    models = ("trace",)
    options = {"max_efficiency": 0.9, "min_lost_fraction": 0.05}

    def detect(self, ctx: RuleContext) -> Iterator[Finding]:
        simt = ctx.simt
        if simt.warp_instructions == 0 or simt.efficiency > float(ctx.option("max_efficiency")):
            return
        # branches grouped by source line (an unrolled loop has one per iteration)
        groups: dict[tuple[str, int], list[Any]] = {}
        for br in simt.branches:
            groups.setdefault((br.file, br.line), []).append(br)
        issue = simt.issue_slots
        warps_per_cta = -(-ctx.launch.block.count // WARP)
        threshold = float(ctx.option("min_lost_fraction"))
        for (file, line), brs in sorted(groups.items(), key=lambda kv: -_lost(kv[1])):
            lost = _lost(brs)
            if len(brs) == 1 and brs[0].edge_only:
                continue  # the bounds check of the grid's last CTAs
            if lost / issue < threshold:
                continue
            splits = sum(b.splits for b in brs)
            execs = sum(b.warp_executions for b in brs)
            if _packed_front(brs, splits, execs, warps_per_cta):
                continue
            worst = sorted(
                (ln for ln in simt.lines if ln.efficiency < 0.999 and ln.warp_instructions),
                key=lambda ln: -ln.lost_slots,
            )[:4]
            per_line = ", ".join(f"line {ln.line}: {ln.efficiency:.0%}" for ln in worst)
            at = line if ctx.same_file(file) and line > 0 else ctx.kernel_line
            where = "" if at == line else f" (branch at {file}:{line})"
            data_filter = all(b.data and not b.loops for b in brs)
            advice = (
                _filter_advice(all(b.one_sided for b in brs))
                if data_filter
                else "map the work so that whole warps take the same side"
            )
            yield self.finding(
                ctx,
                f"SIMT efficiency {simt.efficiency:.0%}: the branch on line {line}{where} splits "
                f"{splits} of {execs} warp executions and idles {lost / issue:.0%} of the issue "
                f"slots ({per_line}); {advice}",
                line=at,
                severity="note" if data_filter else None,
                evidence=[
                    Evidence(
                        "simt_efficiency",
                        round(simt.efficiency, 4),
                        float(ctx.option("max_efficiency")),
                        "<=",
                    ),
                    Evidence(
                        "issue_slots_lost_fraction",
                        round(lost / issue, 4),
                        threshold,
                        ">=",
                        unit="fraction of lane issue slots",
                    ),
                    Evidence("branch_line", line),
                    Evidence("warp_splits", splits, unit="warp executions"),
                    Evidence("branch_warp_executions", execs, unit="warp executions"),
                    *(
                        Evidence(f"simt_efficiency_line_{ln.line}", round(ln.efficiency, 4))
                        for ln in worst
                    ),
                ],  # fmt: skip
                details=Divergence(
                    branch_line=line,
                    lost_slots=lost,
                    issue_slots=issue,
                    warp_instructions=simt.warp_instructions,
                    efficiency=round(simt.efficiency, 4),
                    splits=splits,
                    warp_executions=execs,
                    data_filter=data_filter,
                ),
            )

    def estimate(self, ctx: RuleContext, finding: Finding) -> Estimate:
        d = finding.details_as(Divergence)
        saved = d.lost_slots / WARP
        inputs: dict[str, Any] = {
            "warp_instructions_sampled": d.warp_instructions,
            "saved_warp_instructions_sampled": round(saved, 1),
            "simt_efficiency": d.efficiency,
        }
        if d.data_filter:
            return Estimate(
                None,
                "none",
                "no estimate: the branch decides on loaded data and is no loop's test, so no "
                "remap of threads to elements makes whole warps take one side; predication "
                "issues the same warp instructions, and a compaction of the elements by outcome "
                "costs work the model does not estimate",
                inputs,
            )
        hz = sm_cycles_per_s(ctx.device, _ISSUE_PER_SM_PER_CLOCK)
        try:
            view = ctx.trace_view
        except ModelUnavailable:
            view = None
        if hz is None or view is None:
            ratio = work_ratio(d.warp_instructions, saved)
            return Estimate(
                round(ratio, 3),
                "upper-bound",
                "warp instructions before / after the idle lanes' slots are packed into full "
                "warps, for an issue-bound kernel; latency and memory ignored",
                inputs,
            )
        kept = 1.0 - saved / d.warp_instructions if d.warp_instructions else 1.0
        est = issue_change_estimate(
            ctx.device,
            view,
            kept,
            f"the idle lanes' slots packed into full warps ({1 - kept:.1%} of the warp "
            "instructions issued fewer; the dependent chains and the memory traffic the same)",
            inputs,
        )
        if est is not None:
            return est
        scale = float(ctx.trace.scale)
        nbytes = view.useful_bytes()
        bw = ctx.device.mem_bandwidth_gbps * 1e9 if ctx.device.mem_bandwidth_gbps else None
        r = roofline(d.warp_instructions * scale, saved * scale, hz, nbytes, bw)
        inputs.update(issue_time_us=r.pipe_s * 1e6, saved_time_us=r.saved_s * 1e6,
                      dram_time_us=r.dram_s * 1e6, dram_bytes=nbytes)  # fmt: skip
        return Estimate(
            round(r.speedup, 3),
            "upper-bound",
            f"roofline over the launch: the issue pipe {r.pipe_s * 1e6:.2f} us (PTX warp "
            f"instructions at 4 per SM per cycle), of which packing the idle lanes into full "
            f"warps saves {r.saved_s * 1e6:.2f} us; DRAM floor {r.dram_s * 1e6:.2f} us; max "
            "before / max after. Latency is ignored, so the real gain is smaller",
            inputs,
        )


def _filter_advice(one_sided: bool) -> str:
    """Why a data-dependent branch that is no loop's test is only a note: what its warps issue
    and why nothing remaps it."""
    sides = (
        "an if without an else on loaded data: every warp where some lane takes it issues its body"
        if one_sided
        else "an if/else on loaded data: a split warp issues both sides"
    )
    return (
        f"{sides}, and predication or a select would issue the same warp instructions; no "
        "mapping of threads to elements makes whole warps agree on data, so only a compaction "
        "(sorting or binning the elements by outcome) could pack the lanes, at a cost the model "
        "does not estimate"
    )


def _packed_front(brs: list[Any], splits: int, execs: int, warps_per_cta: int) -> bool:
    """Whether the threads that take the branch are already packed: every split is at a
    front (each side a contiguous run of the warp's lanes: ``tid < k``, a triangle's
    ``i > tid * k`` as the loop shrinks it) and at most one warp of the CTA splits per
    execution on average, so the threads on each side are a contiguous range of the CTA and
    fill whole warps but the one at the boundary. No remapping packs them tighter: the idle
    lanes are the work's own shape (a binomial tree's shrinking triangle), not divergence.
    With one warp per CTA the CTA says nothing about the other warps: reported."""
    fronts = sum(getattr(b, "front_splits", 0) for b in brs)
    return warps_per_cta > 1 and fronts == splits and splits * warps_per_cta <= execs


def _lost(brs: list[Any]) -> int:
    return int(sum(b.lost_slots for b in brs))
