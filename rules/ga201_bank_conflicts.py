"""GA201 bank-conflicts: shared-memory accesses that take several wavefronts (bank model)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

from gpuadvise.rules import (  # Layout .. unsafe_use re-exported: the tests read them off the rule module
    ATOMICS,
    ArrayDecl,
    Estimate,
    Evidence,
    Finding,
    FindingDetails,
    Layout,
    ModelUnavailable,
    Padded,
    PadPlan,
    Rule,
    RuleContext,
    SharedVar,
    Variant,
    contended_lines,
    cost,
    dram_bytes_per_s,
    find_array_decl,
    padding_diff,
    plan_padding,
    remap,
    roofline,
    shared_layout,
    shared_wavefront_estimate,
    sm_cycles_per_s,
    source_name,
    unsafe_use,
    work_ratio,
)

__all__ = [
    "ArrayDecl",
    "BankConflicts",
    "ConflictLine",
    "Layout",
    "PadPlan",
    "Padded",
    "SharedVar",
    "cost",
    "find_array_decl",
    "padding_diff",
    "plan_padding",
    "remap",
    "shared_layout",
    "source_name",
    "unsafe_use",
]


@dataclass(frozen=True)
class ConflictLine(FindingDetails):
    """A conflicting line: its wavefronts beyond the ideal over the traced CTAs, and its
    shared-memory instructions (trace instruction indices) that the padding plan replays."""

    excess_wavefronts: int
    insts: tuple[int, ...]


CONTENDED_LANES = 4.0
"""Lanes per address (GA207's ``min_lanes``) from which a line's shared atomics are contended."""


def _data_addressed(ctx: RuleContext, inst: int) -> bool:
    """The trace instruction's address comes from loaded data (ptx/dataflow.py)."""
    try:
        return bool(ctx.trace.instructions[inst].data_address)
    except (ModelUnavailable, IndexError):
        return False


def _arrays_of(ctx: RuleContext, insts: Sequence[int]) -> tuple[str, ...]:
    """The shared variables (source names) the traced accesses of ``insts`` reach, sorted;
    ``("dynamic",)`` for dynamic shared memory, ``("?",)`` when the layout is not known."""
    import numpy as np

    from gpuadvise.errors import GpuAdviseError
    from gpuadvise.rules import Space, active_lanes

    try:
        records = ctx.trace.records
        layout = shared_layout(ctx)
    except GpuAdviseError:  # ModelUnavailable too
        return ("?",)
    # the line's first 4,096 shared records, copied alone (not every shared record)
    at = (records["space"] == int(Space.SHARED)) & np.isin(
        records["inst"], np.asarray(insts, dtype=records["inst"].dtype)
    )
    mine = records[np.flatnonzero(at)[:4096]]
    if not len(mine):
        return ("?",)
    addr = mine["addr"][active_lanes(mine["mask"])]
    names = set()
    for v in layout.vars:
        if ((addr >= np.uint64(v.offset)) & (addr < np.uint64(v.offset + v.size))).any():
            names.add(source_name(v.ptx_name) or v.ptx_name)
    if (addr >= np.uint64(layout.dynamic_offset)).any() and not any(
        v.offset >= layout.dynamic_offset for v in layout.vars
    ):
        names.add("dynamic")
    return tuple(sorted(names)) or ("?",)


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
    Step #2 of NVIDIA's seven-step reduction (``kernels/reduction/reduce.cu``, ``reduce2``):
    ``index = 2 * s * tid; sdata[index] += sdata[index + s];`` makes lane ``t`` touch word
    ``2st``: 2-, 4-, 8- ...-way conflicts as ``s`` grows (3.9 wavefronts per access on average).

    Fix
    ---
    Make consecutive lanes touch consecutive words: sequential addressing in reductions
    (``sdata[tid] += sdata[tid + s]`` with ``s`` halving, see GA202), or pad a 2D tile's rows
    (``__shared__ float tile[32][33]``) so that the rows a warp reads together start in
    different banks, or swizzle the index (``col ^ row``). The pad that works depends on the
    access: one word per row fixes a column read of a 32x32 tile, but a warp reading a 4x8 patch
    of a 16-word-wide tile needs rows 24 words apart (a pad of 8), and 64-bit elements count
    twice (a half-warp is served per pass, as Nsight Compute counts it on an H100). A 1D array
    accessed with a stride (a scan's tree, ``s[4 * t]``) gets its index padded, as GPU Gems 3's
    scan does with ``CONFLICT_FREE_OFFSET``: element ``e`` stored at ``e + (e >> 5)``, a spare
    word after every 32, so that lanes 32 words apart use neighbouring banks.

    How the estimate is made
    ------------------------
    An upper bound on the launch roofline (gpuadvise.model.roofline; the traced counts times the
    trace's scale): the L1/shared data path serves one wavefront per SM per cycle, shared with
    the global accesses' L1 requests, so its term is ``(L1 cycles + wavefronts) / (SMs x
    clock)``; the L2, DRAM, issue and latency terms are the launch's and do not change. Removing
    this line's excess wavefronts shortens the data-path term; the launch takes at least its
    largest term before and after (both with DRAM at peak bandwidth for the bound, at sustained
    rates for the point value in the inputs). Overlap between the terms and the instructions
    other than memory accesses are left out, so the real gain is smaller (the seven-step reduction's
    step 2 -> 3 gained 2x on a G80, 8 % on an H100). Without the device's rates, the older
    ``max(T_shared, T_dram) / max(T_shared - T_excess, T_dram)``; without clock or bandwidth
    the DRAM term is dropped.

    Fix safety
    ----------
    Automatic-and-verified when every array the line accesses is a 2D ``__shared__ T a[R][C]``
    (in the kernel's body or at file scope, constant dimensions, no initializer) that the code
    only ever indexes as ``a[i][j]``: no pointer to it or into it (``&a[i][j]``), no access with
    one subscript (a row decays to a pointer) or none (``sizeof``, passing it on), in the kernel
    or in a macro. Then adding ``p`` elements to each row changes no value the program
    computes, only where the elements lie (an index past the inner bound, undefined behaviour in
    C++, would now read a pad: the measurement stage compares the variant's outputs with the
    kernel's before it reports a speedup). ``p`` is each array's smallest pad whose accesses at
    the line are conflict free in the bank model, found by moving the traced addresses to the
    padded layout (rows kept as aligned as the widest access, so ptxas's vector accesses stay
    possible) and kept only when the kernel's shared wavefronts fall overall.

    A 1D ``__shared__ T a[N]`` (same conditions: every use an access ``a[e]``, no second
    declaration of the name in its scope) gets its index padded: a ``__device__`` helper
    ``a_padded(e) = e + (e >> s) * p`` before the kernel, every access ``a[e]`` made
    ``a[a_padded(e)]`` (``e`` still evaluated once) and the array ``N + (N >> s) * p`` elements.
    The map is one-to-one and keeps the elements in order, so again only where they lie changes.
    An accessor macro naming the array (``#define SCORE(i, j) a[j + i * 17]``) is rewritten too
    when every declaration of the name in the file is a 1D ``__shared__`` array: all of them are
    padded alike, as the macro's expansions reach them all. ``N`` may be a header's constant
    (the PTX variable's bytes over the element type's size give it). ``s`` and ``p`` (a spare
    after every 64 to 1024 bytes, of 1, 2 or 4 elements) are the ones under which all the
    array's traced accesses take the fewest wavefronts (ties: the least memory), kept when they
    at least halve the line's excess and lower the kernel's. A swizzle of the index competes
    with them and is taken only where it takes fewer wavefronts than every padding: element
    ``e`` of every odd group of ``2**s`` elements stored at ``e ^ (2**s - 1)`` (the group read
    backwards; one-to-one within each group, so ``N`` a multiple of ``2**s`` and no spare):
    lanes reading every other element, or runs of ``k`` elements every ``2k`` (a bitonic
    sort's compare-exchange at strides 1 to 16, CUDA samples' ``bitonicSortShared``), find the
    odd group's half in the banks the even group leaves free, for every stride at once, where
    no padding serves more than one stride. Otherwise (a 1D array combined in a
    reduction tree, such as a reduction's ``sdata``: sequential addressing fixes its conflicts
    and idle threads together, see GA202; dynamic shared memory, whose size the launch sets; an
    unsafe use) the variant only says why, and the fix is the user's.
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
        # one finding per root cause: the conflicting lines of one shared array (one padding
        # or one change of index fixes them together), at the line with the most excess
        causes: dict[tuple[str, ...], list[tuple[tuple[str | None, int | None], list]]] = {}
        # atomics whose lanes update one address in turn: GA207's (contended atomics), not
        # words of one bank; only the line's atomics leave, its loads and stores stay here
        contended = contended_lines(ctx.trace, CONTENDED_LANES)
        for key, group in per_line.items():
            if key in contended:
                group = [g for g in group if int(g.kind) not in ATOMICS]
                if not group:
                    continue
            wavefronts = sum(g.wavefronts for g in group)
            ideal = sum(g.ideal for g in group)
            if ideal <= 0 or wavefronts / ideal < min_ways:
                continue
            insts = tuple(int(i) for g in group for i in g.insts)
            if insts and all(_data_addressed(ctx, i) for i in insts):
                continue  # a scatter by data (a radix sort's ranks): random conflicts, no pad helps
            causes.setdefault(_arrays_of(ctx, insts), []).append((key, group))
        for arrays, lines in causes.items():
            groups = [g for _, gs in lines for g in gs]
            wavefronts = sum(g.wavefronts for g in groups)
            ideal = sum(g.ideal for g in groups)
            ways = wavefronts / ideal
            share = (wavefronts - ideal) / total
            if share < min_share:
                continue
            (file, line), _ = max(
                lines, key=lambda kv: (sum(g.wavefronts - g.ideal for g in kv[1]), -(kv[0][1] or 0))
            )
            others = sorted({ln for (f, ln), _ in lines if ln is not None and ln != line})
            worst = max(g.worst_ways for g in groups)
            kinds = "/".join(dict.fromkeys(g.kind.name.lower() for g in groups))
            what = f" of `{arrays[0]}`" if len(arrays) == 1 and arrays[0] != "?" else ""
            also = (
                f" (with line{'s' if len(others) > 1 else ''} {', '.join(map(str, others))}, "
                "the same array's conflicts)"
                if others
                else ""
            )
            yield self.finding(
                ctx,
                f"shared-memory {kinds}{what} with {ways:.1f}-way bank conflicts on average "
                f"(worst {worst:.0f}-way){also}: {wavefronts} wavefronts where {ideal} would do, "
                f"{share:.0%} of all shared-memory wavefronts (over {traced} traced CTAs)",
                line=line,
                file=str(ctx.source_file) if ctx.same_file(file) else file,
                evidence=[
                    Evidence("bank_conflict_ways", round(ways, 3), min_ways, ">="),
                    Evidence("excess_wavefront_share", round(share, 4), min_share, ">="),
                    Evidence("worst_ways", round(worst, 3)),
                    Evidence("wavefronts", wavefronts, unit="wavefronts"),
                    Evidence("ideal_wavefronts", ideal, unit="wavefronts"),
                    *([Evidence("lines", len(others) + 1)] if others else []),
                ],
                details=ConflictLine(
                    int(wavefronts - ideal), tuple(int(i) for g in groups for i in g.insts)
                ),
            )

    def estimate(self, ctx: RuleContext, finding: Finding) -> Estimate:
        banks = ctx.banks
        scale = banks.scale
        w_launch = banks.launch.all.wavefronts
        excess = finding.details_as(ConflictLine).excess_wavefronts * scale
        d = ctx.device
        shared_only = Estimate(
            round(work_ratio(w_launch, excess), 3),
            "upper-bound",
            "shared-memory-bound kernel: time proportional to wavefronts; "
            f"{w_launch:.0f} / ({w_launch:.0f} - {excess:.0f}) (no clock/bandwidth for "
            f"{d.name}, DRAM time ignored)",
            {"wavefronts": w_launch, "excess_wavefronts": excess},
        )
        rate, bandwidth = sm_cycles_per_s(d), dram_bytes_per_s(d)
        if rate is None or bandwidth is None:
            return shared_only
        est = shared_wavefront_estimate(
            d,
            ctx.trace_view,
            w_launch,
            excess,
            f"this line's {excess:.0f} excess wavefronts removed",
            {"wavefronts": w_launch, "excess_wavefronts": excess, "scale": scale},
        )
        if est is not None:
            return est
        try:
            dram_bytes = ctx.coalescing.launch.all.bytes
        except ModelUnavailable:
            return shared_only
        r = roofline(w_launch, excess, rate, dram_bytes, bandwidth)
        t_shared, t_excess, t_dram = r.pipe_s, r.saved_s, r.dram_s
        return Estimate(
            round(max(r.speedup, 1.0), 3),
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

    def transform(self, ctx: RuleContext, finding: Finding) -> Variant:
        try:
            plan = plan_padding(ctx, finding.details_as(ConflictLine).insts)
        except ModelUnavailable as exc:
            plan = f"the traced accesses are not available ({exc.message})"
        if isinstance(plan, str):
            return Variant(
                "display-only",
                f"no automatic padding: {plan}",
            )
        diff = padding_diff(ctx.kernel_source, plan, ctx.source_file)
        if diff is None:
            return Variant("display-only", "no automatic padding: an access could not be rewritten")
        what = ", ".join(_padding_text(d, p) for d, p in plan.pads)
        (lw, _), (aw, ai) = plan.line_before, plan.line_after
        (kw, _), (kaw, _) = plan.kernel_before, plan.kernel_after
        launch = None
        if plan.dynamic_bytes is not None:
            launch = {"dynamic_smem_bytes": plan.dynamic_bytes}
            what += (
                f"; the launch's dynamic shared memory grows from "
                f"{ctx.launch.dynamic_smem_bytes} to {plan.dynamic_bytes} B (the host's launch "
                "must pass it)"
            )
        return Variant(
            "automatic-and-verified",
            f"{what} (+{plan.extra_bytes} B of shared memory per CTA). In the bank "
            f"model over the traced CTAs this line takes {aw} wavefronts instead of {lw} "
            f"({ai} ideal), and the kernel's shared accesses {kaw} instead of {kw}",
            diff=diff,
            launch=launch,
        )


def _padding_text(d: ArrayDecl, p: Padded) -> str:
    if d.ndim == 2:
        return f"pad the rows: {d.name}[{d.rows}][{d.cols}] -> [{d.rows}][{d.cols + p.pad}]"
    if p.swizzle:
        return (
            f"swizzle the index of {d.name}[{d.cols}] (every odd group of {p.cols} elements "
            f"backwards: element e at e ^ (((e >> {p.cols.bit_length() - 1}) & 1) * "
            f"{p.cols - 1}), every access rewritten; no spare element)"
        )
    spare = f"{p.pad} spare element{'s' if p.pad > 1 else ''}"
    return (
        f"pad the index of {d.name}[{d.cols}] ({spare} after every {p.cols}: element e at "
        f"e + (e >> {p.cols.bit_length() - 1}){f' * {p.pad}' if p.pad > 1 else ''}, every "
        f"access rewritten) -> [{p.size // p.elem}]"
    )
