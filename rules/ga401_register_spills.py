"""GA401 register-spills: local-memory traffic from register spills or from a local array."""

from __future__ import annotations

import weakref
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from gpuadvise.rules import (
    Candidate,
    Compiled,
    Estimate,
    Evidence,
    Finding,
    FindingDetails,
    KernelSource,
    ModelUnavailable,
    RegisterCap,
    Rule,
    RuleContext,
    Variant,
    candidate_caps,
    counted,
    find_register_cap,
    global_bytes,
    lines_text,
    local_arrays,
    local_lines,
    sass_line_bytes,
    spill_estimate,
    spill_relaxations,
    unified_diff,
)


@dataclass(frozen=True)
class LocalTraffic(FindingDetails):
    """``spill`` (ptxas spills; ``cap``: what caps the registers, None: nothing) or
    ``local-array`` (a stack frame without spills), and the local and global bytes per thread
    the estimate weighs."""

    kind: str
    local_bytes: int
    global_bytes: int
    cap: RegisterCap | None = None


def _new_args(cap: RegisterCap, label: str, value: Any) -> list[str] | None:
    """The attribute's arguments for one candidate (None: the candidate does not apply)."""
    args = list(cap.args)
    if not args:
        return None
    if cap.kind == "maxnreg":
        return [str(value)]
    if cap.kind != "launch_bounds":
        return None
    if label.startswith("minBlocks=") and len(args) > 1:
        return [args[0], str(value), *args[2:]]
    if label == "no minBlocks":
        return [args[0]]
    if label.startswith("maxThreads="):
        return [label.split("=", 1)[1], *args[1:]]
    return None


def _patched(text: str, cap: RegisterCap, args: list[str]) -> str:
    """``text`` with the argument list of ``cap``'s attribute replaced by ``args``."""
    start, end = cap.arg_spans[0][0], cap.arg_spans[-1][1]
    return text[:start] + ", ".join(args) + text[end:]


def build_candidates(ctx: RuleContext, cap: RegisterCap, registers: int) -> list[Candidate]:
    try:
        ks: KernelSource | None = ctx.kernel_source
    except ModelUnavailable:
        ks = None
    threads = int(ctx.launch.block.count)
    regs_per_sm = int(ctx.device.regs_per_sm)
    current = cap.registers if cap.registers is not None else registers
    out: list[Candidate] = []
    for label, c, value in candidate_caps(cap, threads, regs_per_sm, current):
        if cap.kind == "maxrregcount":
            out.append(
                Candidate(
                    label,
                    c,
                    nvcc_flags=(f"-maxrregcount={value}",),
                    description=f"compile with -maxrregcount={value} (was {cap.registers})",
                )
            )
            continue
        if ks is None:
            continue
        args = _new_args(cap, label, value)
        if args is None or not cap.arg_spans:
            continue
        patched = _patched(ks.text, cap, args)
        diff = unified_diff(ks.text.split("\n"), patched.split("\n"), ctx.source_file)
        if diff is None:
            continue
        attr = "__maxnreg__" if cap.kind == "maxnreg" else "__launch_bounds__"
        new_attr = f"{attr}({', '.join(args)})"
        out.append(
            Candidate(
                label,
                c,
                diff=diff,
                patched=patched,
                description=f"relax {cap.text} to {new_attr} (at most {c} registers)",
            )
        )
    return out


# ---------------------------------------------------------------------------------------------


class RegisterSpills(Rule):
    """Local-memory traffic: register spills, or an array the compiler had to put in local memory.

    What it detects
    ---------------
    Two kinds of local-memory use, from ptxas's report (``-Xptxas -v``) and the SASS:

    - register spills: ptxas reports spill stores or loads (at least ``min_spill_bytes``). The
      kernel is reported at its declaration, where its register cap is set; the message names
      the cap (``__launch_bounds__``, ``__maxnreg__`` or ``-maxrregcount``) and the source lines
      whose SASS holds the most ``LDL``/``STL`` instructions;
    - a local array: a stack frame (``local_bytes``) with no spills, read by ``LDL`` in the SASS:
      an array indexed with values the compiler cannot resolve at compile time (or whose address
      is taken). It is reported at the array's declaration when the rule finds an array of the
      kernel's body on the lines that access local memory, else at the first such line.

    Why it is slow
    --------------
    "Local" memory is per-thread memory in DRAM, cached in L1 and L2. A spilled register costs a
    store and later a load through the memory pipeline instead of a register read: when the spills
    sit in the hot loop, every iteration pays them, they compete with the kernel's own global
    traffic for L1, and when L1 cannot hold them (many warps per SM) they go to L2 or DRAM (a
    cellular simulation's port: "heavy on registers: forced spilling and/or low occupancy"). An
    aggressive register cap (``__launch_bounds__(256, 8)``: 32 registers) buys occupancy with
    spills, often a bad trade. An array indexed by data (``bins[v]++``) cannot be held in
    registers (registers cannot be indexed): every access is a local load or store.

    Example
    -------
    ``kernels/spills/spills.cu``: ``moments_capped`` keeps 32 running sums, 48 registers, under
    ``__launch_bounds__(256, 8)``, which allows 32: ptxas spills 264 B and reloads 240 B per
    thread in the row loop; ``moments`` is the same code without the bound (48 registers, 62.5 %
    occupancy, no spills). ``hist_local`` indexes a 16-bin array by the data; ``hist_unrolled``
    keeps the bins in registers with constant indices (``bins[b] += (v == b)``).

    Fix
    ---
    Spills: relax the cap one occupancy step at a time (``__launch_bounds__(256, 5)``, a larger
    ``__maxnreg__`` or ``-maxrregcount``) and measure; or shorten the live ranges (fewer values
    kept across the loop, recompute cheap ones). A kernel that spills with no cap needs more than
    255 registers: split its work. Local arrays: make every index a compile-time constant (fully
    unrolled loops with constant bounds, selects such as ``v == b`` instead of ``a[v]``), or move
    the array to shared memory (a slice per thread, or one per block with shared atomics).

    How the estimate is made
    ------------------------
    Spills, on the launch model (``gpuadvise/rules/spill_estimate.py``): the SASS's ``LDL``/``STL``
    beyond the PTX's local accesses, per PTX block, times the trace's block counts, are the
    spills' warp instructions (in the issue term already) and L1 wavefronts (a warp's 32-bit
    local access one 128-byte line), which the before side adds to the L1 term, and to the L2
    and DRAM where the frames of an SM's resident threads outgrow the L1; the after side is the
    variant's: the same work without them (or with the share it still spills) at its CTAs per
    SM. Local arrays, alike: before, the PTX's ``ld.local`` on the chains wait as its global loads
    (an L1 hit returns behind the misses); after, no local access (issue, L1, chains).
    Point and bound as other launch changes, with the term that bounds each side. Without a
    trace, the SASS mapped onto it or (local arrays) the chains without their accesses: an
    upper bound ``(G + L) / G`` from the SASS's bytes per thread (local ``L``, global ``G``, each
    instruction once), as if a local byte cost a global one. None without global accesses.

    Fix safety
    ----------
    Spills: automatic-and-verified. Each relaxation of the cap is compiled by the rule with the
    analysis' own options, and only those that spill fewer bytes than the kernel are offered (the
    first as the variant, the others as alternatives with their labels: never a variant that
    spills more). A change of ``__launch_bounds__`` or ``__maxnreg__`` is a one-line source diff,
    a ``-maxrregcount`` change a flag; neither changes what the kernel computes, and the
    measurement stage verifies the outputs before it reports a speedup. Local arrays:
    display-only advice, no variant (the fix changes how the kernel indexes its data).
    """

    id = "GA401"
    name = "register-spills"
    title = "Register spills and local-memory arrays"
    severity = "warning"
    models = ("sass", "source", "trace")
    options = {"min_spill_bytes": 1, "max_candidates": 3}

    def detect(self, ctx: RuleContext) -> Iterator[Finding]:
        res = getattr(ctx.kernel, "resources", None)
        if res is None:
            raise ModelUnavailable("ptxas's resource report of this kernel is not available")
        spill = int(res.spill_store_bytes) + int(res.spill_load_bytes)
        loc = local_lines(ctx.sass_lines)
        loc_bytes = sum(sass_line_bytes(ln) for ln in loc)
        g = global_bytes(ctx.sass_lines)
        per_line: dict[int, int] = {}
        for ln in loc:
            if ln.line is not None and ctx.same_file(ln.file):
                per_line[ln.line] = per_line.get(ln.line, 0) + int(ln.count)
        hot = sorted(per_line, key=lambda n: (-per_line[n], n))
        threshold = int(ctx.option("min_spill_bytes"))
        try:
            ks: KernelSource | None = ctx.kernel_source
        except ModelUnavailable:
            ks = None
        if spill >= threshold and spill > 0:
            cap = find_register_cap(ks, ctx.compile_flags, int(ctx.device.regs_per_sm))
            where_parts = [f"{n} ({per_line[n]})" for n in hot[:4]]
            capped = (
                f" under {cap.describe()} (at most {cap.registers} registers)"
                if cap is not None and cap.registers is not None
                else (f" under {cap.describe()}" if cap is not None else " with no register cap")
            )
            message = (
                f"register spills: {res.registers} registers per thread{capped}; ptxas spills "
                f"{res.spill_store_bytes} B and reloads {res.spill_load_bytes} B per thread "
                f"({res.local_bytes} B stack frame)"
                + (f"; most LDL/STL at {lines_text(where_parts)}" if where_parts else "")
            )
            if cap is None:
                message += (
                    "; with no cap the kernel needs more than 255 registers: shorten live ranges "
                    "or split the work"
                )
            evidence = [
                Evidence("spill_bytes", spill, threshold, ">=", "B/thread"),
                Evidence("spill_store_bytes", int(res.spill_store_bytes), unit="B/thread"),
                Evidence("spill_load_bytes", int(res.spill_load_bytes), unit="B/thread"),
                Evidence("registers", int(res.registers), unit="regs/thread"),
                Evidence("local_bytes", int(res.local_bytes), unit="B/thread"),
                Evidence("global_bytes", g, unit="B/thread"),
            ]
            if cap is not None:
                evidence.append(Evidence("register_cap", cap.describe()))
            if hot:
                evidence.append(Evidence("local_access_lines", ",".join(map(str, hot))))
            yield self.finding(
                ctx,
                message,
                line=ctx.kernel_line,
                evidence=evidence,
                details=LocalTraffic("spill", int(spill), int(g), cap),
            )
            return
        loads = sum(int(ln.count) for ln in loc if ln.kind == "load")
        if res.local_bytes <= 0 or loads == 0:
            return  # no stack frame, or one only written for a callee (printf's arguments)
        local_sass = [
            i
            for i in ctx.sass_instructions
            if i.base_opcode in ("LDL", "STL") and not i.never_executes
        ]
        if local_sass and all(ctx.in_toolkit_header(i.file) for i in local_sass):
            return  # the CUDA math library's own frame: nothing of the user's to move
        if ctx.has_model("trace"):
            from gpuadvise.rules import Space

            r = ctx.trace.records
            if not (r["space"] == int(Space.LOCAL)).any():
                # the traced CTAs never touched the frame: a path they did not take, such as
                # the math library's reduction of huge sin/cos arguments (|x| >= 2^31 in double)
                return
        arrays = local_arrays(ks) if ks is not None else []
        used: dict[str, list[int]] = {}
        if ks is not None:
            for arr in arrays:
                indexed = {ks.line_at(s.span[0]) for s in ks.subscripts(arr.name, file=True)}
                hits = [n for n in sorted(per_line) if n in indexed]
                if hits:
                    used[arr.name] = hits
        chosen = max(
            (a for a in arrays if a.name in used),
            key=lambda a: (len(used[a.name]), -a.line),
            default=None,
        )
        access_lines = sorted(per_line)
        if chosen is not None:
            line: int | None = chosen.line
            size = f"{chosen.size_bytes} B, " if chosen.size_bytes is not None else ""
            what = (
                f"local array `{chosen.name}` ({size}{res.local_bytes} B stack frame) is indexed "
                f"with values the compiler cannot resolve, so it lives in local memory: lines "
                f"{', '.join(map(str, used[chosen.name]))} read or write it through "
                f"{counted(sum(per_line[n] for n in used[chosen.name]), 'LDL/STL instruction')}"
            )
        else:
            first_load = [
                ln.line for ln in loc if ln.kind == "load" and ln.line and ctx.same_file(ln.file)
            ]
            line = min(first_load) if first_load else ctx.kernel_line
            what = (
                f"{res.local_bytes} B stack frame in local memory with no spills (a local array "
                f"indexed at run time, or a variable whose address is taken): LDL/STL at "
                f"{lines_text(access_lines) if access_lines else 'unknown lines'}"
            )
        yield self.finding(
            ctx,
            what + "; make every index a compile-time constant (fully unrolled loops, selects "
            "like `v == b`) so that it stays in registers, or move it to shared memory",
            line=line,
            evidence=[
                Evidence("local_bytes", int(res.local_bytes), 0, ">", "B/thread"),
                Evidence("spill_bytes", spill, unit="B/thread"),
                Evidence("local_access_bytes", loc_bytes, unit="B/thread"),
                Evidence("global_bytes", g, unit="B/thread"),
                Evidence("local_access_lines", ",".join(map(str, access_lines))),
            ]
            + ([Evidence("array", chosen.name)] if chosen is not None else []),
            details=LocalTraffic("local-array", int(loc_bytes), int(g)),
        )

    def estimate(self, ctx: RuleContext, finding: Finding) -> Estimate:
        d = finding.details_as(LocalTraffic)
        local = d.local_bytes
        g = d.global_bytes
        frame = int(ctx.kernel.resources.local_bytes)
        kept = self._relaxations(ctx, d) if d.kind == "spill" else []  # (a local array: none)
        est = spill_estimate(ctx, frame, local, kept[0] if kept else None, d.kind)
        if est is not None:
            return est
        what = "spill stores + loads (ptxas)" if d.kind == "spill" else ("LDL/STL widths (SASS)")
        inputs: dict[str, Any] = {"local_bytes_per_thread": local, "global_bytes_per_thread": g}
        if d.kind == "spill":
            # the launch model counts the PTX the emulator runs, where ptxas's spills are not
            inputs["outside_model"] = (
                "the spills are ptxas's (in the SASS, not in the PTX the emulator counts), so the "
                "launch model's time leaves out the very traffic this estimate weighs"
            )
        if g <= 0:
            return Estimate(
                None,
                "none",
                "not estimated: the kernel has no global memory instructions to weigh the local "
                "traffic against",
                inputs,
            )
        return Estimate(
            round((g + local) / g, 3),
            "upper-bound",
            f"(G + L) / G = ({g} + {local}) / {g}: L = {local} B/thread of {what}, G = {g} "
            "B/thread of global accesses (SASS widths), each instruction counted once; as if the "
            "kernel were memory-bound and a local byte cost as much as a global one. Spills that "
            "stay in L1 cost less; loops are not weighed",
            inputs,
        )

    def transform(self, ctx: RuleContext, finding: Finding) -> Variant | None:
        d = finding.details_as(LocalTraffic)
        if d.kind != "spill":
            return None
        cap = d.cap
        if cap is None:
            return None
        res = ctx.kernel.resources
        base_spill = int(res.spill_store_bytes) + int(res.spill_load_bytes)
        kept = self._relaxations(ctx, d)
        if not kept:
            return None
        # the variant shown first: the fewest spills, then the highest occupancy
        variants = [self._variant(ctx, k, res.registers, base_spill) for k in kept]
        return replace(variants[0], alternatives=tuple(variants[1:]))

    def _relaxations(self, ctx: RuleContext, d: LocalTraffic) -> list[Compiled]:
        """The relaxations of ``d.cap`` that spill less, the variant first (built once: the
        compile cache keeps them between the estimate and the transform)."""
        if d.cap is None:
            return []
        memo = getattr(self, "_memo", None)
        if memo is not None and memo[0]() is ctx and memo[1] == d.cap:
            return list(memo[2])
        res = ctx.kernel.resources
        base_spill = int(res.spill_store_bytes) + int(res.spill_load_bytes)
        cands = build_candidates(ctx, d.cap, int(res.registers))
        kept = spill_relaxations(ctx, cands, base_spill, int(ctx.option("max_candidates")))
        self._memo = (weakref.ref(ctx), d.cap, tuple(kept))  # (not keeping the trace alive)
        return kept

    @staticmethod
    def _variant(ctx: RuleContext, k: Compiled, registers: int, spill: int) -> Variant:
        c = k.candidate
        occ_now = ctx.occupancy.occupancy
        occ = f", occupancy {occ_now:.0%} -> {k.occupancy:.0%}" if k.occupancy is not None else ""
        spills = "no spills" if k.spill_bytes == 0 else f"{k.spill_bytes} B of spills"
        return Variant(
            "automatic-and-verified",
            f"{c.description}; compiled: {registers} -> {k.registers} registers, {spill} B of "
            f"spills -> {spills}{occ}",
            diff=c.diff,
            nvcc_flags=c.nvcc_flags,
            label=c.label,
        )
