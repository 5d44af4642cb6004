"""GA201 bank-conflicts: shared-memory accesses that take several wavefronts (bank model)."""

from __future__ import annotations

from collections.abc import Iterator

from gpuadvise.rules import Estimate, Evidence, Finding, ModelUnavailable, Rule, RuleContext


class BankConflicts(Rule):
    """Shared-memory bank conflicts at a source line, from the bank model over a traced run.

    What it detects
    ---------------
    Source lines whose shared-memory loads and stores take on average at least ``min_ways`` times
    the wavefronts of a conflict-free access of the same data (wavefronts / ideal, the bank model
    of ``gpuadvise/model/banks.py``, measured against Nsight Compute on an H100), and whose excess
    wavefronts are at least ``min_excess_share`` of all shared-memory wavefronts of the traced
    CTAs. The accesses come from the CPU emulator's trace of the first ``trace-ctas`` CTAs,
    reconciled with the SASS (ptxas merges scalar accesses into vector ones). Reported at the line
    of the access.

    Why it is slow
    --------------
    Shared memory has 32 banks of 4 bytes; a warp's access is served in one wavefront when no two
    of its lanes touch different words of one bank. Each extra distinct word in the busiest bank
    costs another pass of the shared-memory pipeline: a stride of 2 words is a 2-way conflict, a
    stride of 32 words a 32-way one. The warp waits for all passes.

    Example
    -------
    Seed 003's reduction #2 (``kernels/reduction/reduce.cu``, ``reduce2``):
    ``index = 2 * s * tid; sdata[index] += sdata[index + s];`` makes lane ``t`` touch word
    ``2st``: 2-, 4-, 8- ...-way conflicts as ``s`` grows (3.9 wavefronts per access on average).

    Fix
    ---
    Make consecutive lanes touch consecutive words: sequential addressing in reductions
    (``sdata[tid] += sdata[tid + s]`` with ``s`` halving, see GA202), or pad a 2D tile by one
    word per row (``__shared__ float tile[32][33]``) so that a column access spreads over all
    banks, or swizzle the index (``col ^ row``).

    How the estimate is made
    ------------------------
    An upper bound from a roofline-like argument over the launch (the traced counts times the
    trace's scale): the shared-memory pipeline serves one wavefront per SM per cycle, so its time
    is ``wavefronts / (SMs x clock)``; DRAM time is the distinct bytes the global accesses move
    over the peak bandwidth (coalescing model). The kernel takes at least the larger of the two;
    removing this line's excess wavefronts gives
    ``max(T_shared, T_dram) / max(T_shared - T_excess, T_dram)``. Latency, instruction overhead and
    L2 reuse are ignored, so the real gain is smaller (seed 003's step 2 -> 3 gained 2x on a G80,
    8 % on an H100). Without clock or bandwidth figures for the device the DRAM term is dropped.

    Fix safety
    ----------
    Display-only: the fix changes how the kernel indexes shared memory. An automatic padding of
    a 2D ``__shared__`` array (when every use is provably an index into it) is future work;
    ``transform`` returns None until then.
    """

    id = "GA201"
    name = "bank-conflicts"
    title = "Shared-memory bank conflicts"
    severity = "warning"
    models = ("banks", "coalescing")
    options = {"min_ways": 1.5, "min_excess_share": 0.05}

    def detect(self, ctx: RuleContext) -> Iterator[Finding]:
        banks = ctx.banks
        total = banks.traced.all.wavefronts
        if total <= 0:
            return
        per_line: dict[tuple[str | None, int | None], list] = {}
        for ln in banks.lines:
            per_line.setdefault((ln.file, ln.line), []).append(ln)
        min_ways = float(ctx.option("min_ways"))
        min_share = float(ctx.option("min_excess_share"))
        traced = round(ctx.launch.grid.count / banks.scale) if banks.scale else 0
        for (file, line), group in per_line.items():
            wavefronts = sum(g.wavefronts for g in group)
            ideal = sum(g.ideal for g in group)
            if ideal <= 0:
                continue
            ways = wavefronts / ideal
            share = (wavefronts - ideal) / total
            if ways < min_ways or share < min_share:
                continue
            worst = max(g.worst_ways for g in group)
            kinds = "/".join(g.kind.name.lower() for g in group)
            yield self.finding(
                ctx,
                f"shared-memory {kinds} with {ways:.1f}-way bank conflicts on average "
                f"(worst {worst:.0f}-way): {wavefronts} wavefronts where {ideal} would do, "
                f"{share:.0%} of all shared-memory wavefronts (over {traced} traced CTAs)",
                line=line,
                file=str(ctx.source_file) if ctx.same_file(file) else file,
                evidence=[
                    Evidence("bank_conflict_ways", round(ways, 3), min_ways, ">="),
                    Evidence("excess_wavefront_share", round(share, 4), min_share, ">="),
                    Evidence("worst_ways", round(worst, 3)),
                    Evidence("wavefronts", wavefronts, unit="wavefronts"),
                    Evidence("ideal_wavefronts", ideal, unit="wavefronts"),
                ],
                details={"excess": wavefronts - ideal},
            )

    def estimate(self, ctx: RuleContext, finding: Finding) -> Estimate:
        banks = ctx.banks
        scale = banks.scale
        w_launch = banks.launch.all.wavefronts
        excess = finding.details["excess"] * scale
        d = ctx.device
        shared_only = Estimate(
            round(w_launch / max(w_launch - excess, 1e-9), 3),
            "upper-bound",
            "shared-memory-bound kernel: time proportional to wavefronts; "
            f"{w_launch:.0f} / ({w_launch:.0f} - {excess:.0f}) (no clock/bandwidth for "
            f"{d.name}, DRAM time ignored)",
            {"wavefronts": w_launch, "excess_wavefronts": excess},
        )
        if not (d.sm_count and d.sm_clock_mhz and d.mem_bandwidth_gbps):
            return shared_only
        try:
            dram_bytes = ctx.coalescing.launch.all.bytes
        except ModelUnavailable:
            return shared_only
        t_shared = w_launch / (d.sm_count * d.sm_clock_mhz * 1e6)
        t_excess = excess / (d.sm_count * d.sm_clock_mhz * 1e6)
        t_dram = dram_bytes / (d.mem_bandwidth_gbps * 1e9)
        before = max(t_shared, t_dram)
        after = max(t_shared - t_excess, t_dram, 1e-15)
        return Estimate(
            round(max(before / after, 1.0), 3),
            "upper-bound",
            f"roofline over the launch: shared pipeline {t_shared * 1e6:.2f} us (1 wavefront per "
            f"SM per cycle at {d.sm_clock_mhz} MHz), of which {t_excess * 1e6:.2f} us are this "
            f"line's conflicts; DRAM {t_dram * 1e6:.2f} us ({dram_bytes / 1e6:.1f} MB at "
            f"{d.mem_bandwidth_gbps:.0f} GB/s); max before / max after. Latency and instruction "
            "overhead are ignored",
            {
                "shared_time_us": t_shared * 1e6,
                "excess_time_us": t_excess * 1e6,
                "dram_time_us": t_dram * 1e6,
                "scale": scale,
            },
        )

    def transform(self, ctx: RuleContext, finding: Finding) -> None:
        return None  # display-only for now: see "Fix safety"
