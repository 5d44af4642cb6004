"""GA402 unpacked-half-math: scalar fp16 arithmetic where packed half2 would do two per instruction."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from gpuadvise.rules import (
    Estimate,
    Evidence,
    Finding,
    FindingDetails,
    KernelSource,
    ModelUnavailable,
    Rule,
    RuleContext,
    Variant,
    dram_bytes_per_s,
    halfword_prmt,
    launch_change_estimate,
    one_lane_fp16,
    roofline,
    same_source_file,
    sm_cycles_per_s,
    split_top,
    view_traffic,
    work_ratio,
)

ISSUE_PER_SM_CLOCK = 4
"""Warp instructions an SM issues per clock (4 schedulers, Volta to Hopper)."""

# scalar fp16/bf16 intrinsics of cuda_fp16.h / cuda_bf16.h (the half2 forms end in 2)
_SCALAR_INTRINSICS = (
    "__hadd", "__hsub", "__hmul", "__hfma", "__hdiv", "__hneg", "__habs", "__hmax", "__hmin",
    "__hadd_sat", "__hsub_sat", "__hmul_sat", "__hfma_sat", "__hfma_relu", "__hmax_nan",
    "__hmin_nan", "__hadd_rn", "__hsub_rn", "__hmul_rn", "hsqrt", "hrsqrt", "hrcp", "hexp",
    "hexp2", "hlog", "hlog2", "hsin", "hcos",
)  # fmt: skip
_HALF_TYPES = ("__half", "half", "__nv_bfloat16", "nv_bfloat16")
_FP16_OPCODES = ("HADD2", "HMUL2", "HFMA2", "HMNMX2")


# ---------------------------------------------------------------------------------------------
# SASS: which fp16 instructions use one lane, which PRMTs move half-words (read by
# gpuadvise.toolchain.sass: one_lane_fp16, halfword_prmt)


@dataclass
class SassCounts:
    """fp16 arithmetic and half-word permutes among some SASS instructions."""

    one_lane: int = 0
    packed: int = 0
    prmt: int = 0
    instructions: int = 0
    opcodes: dict[str, int] = field(default_factory=dict)

    @property
    def fp16(self) -> int:
        return self.one_lane + self.packed

    def add(self, instr: Any) -> None:
        self.instructions += 1
        base = instr.base_opcode
        if base in _FP16_OPCODES and ".F32" not in instr.opcode:
            lane = one_lane_fp16(instr.operands)
            key = instr.opcode + (" (one lane)" if lane else "")
            self.opcodes[key] = self.opcodes.get(key, 0) + 1
            if lane:
                self.one_lane += 1
            else:
                self.packed += 1
        elif base == "PRMT" and halfword_prmt(instr.operands):
            self.prmt += 1
            self.opcodes["PRMT (half-words)"] = self.opcodes.get("PRMT (half-words)", 0) + 1

    def text(self) -> str:
        if not self.fp16 and not self.prmt:
            return "no fp16 instructions"
        parts = [f"{n} {k}" for k, n in sorted(self.opcodes.items(), key=lambda kv: -kv[1])]
        return ", ".join(parts)


def _count(instrs: Sequence[Any], file: str, lines: Sequence[int]) -> SassCounts:
    c = SassCounts()
    want = set(lines)
    for i in instrs:
        if i.never_executes:
            continue
        f, ln = i.call_site
        if ln in want and same_source_file(f, file):
            c.add(i)
    return c


# ---------------------------------------------------------------------------------------------
# Source: scalar fp16 statements, the loops they are in, packed accumulators with a spare lane


def _norm(expr: str) -> str:
    return re.sub(r"\s+", " ", expr).strip()


@dataclass(frozen=True)
class Loop:
    """A loop of the kernel body: offsets of its keyword and its body's end, and lines."""

    start: int
    end: int
    first_line: int
    last_line: int


def loops(ks: KernelSource) -> list[Loop]:
    """The body's ``for``, ``while`` and ``do`` loops (a do loop ends with its body)."""
    out = []
    for lp in ks.loops():
        end = lp.body[1] - 1
        out.append(Loop(lp.span[0], end, ks.line_at(lp.span[0]), ks.line_at(end)))
    return out


def _statement_start(ks: KernelSource, at: int) -> int:
    """Where the statement holding offset ``at`` starts: the simple statement's first character,
    after the braceless control headers it is the body of; the control statement's own start
    when ``at`` is in its header."""
    st = ks.statement_at(at)
    if st is not None:
        return st.start
    return ks.statement_start(at)


def half_variables(ks: KernelSource) -> set[str]:
    """Scalar fp16/bf16 variables declared in the kernel (body and parameters)."""
    names: set[str] = set()
    for p in ks.kernel.params if ks.kernel is not None else ():
        words = [w for w in p.type.split() if w != "const"]
        if words and words[-1] in _HALF_TYPES and not p.pointer and p.name:
            names.add(p.name)
    for d in ks.declarations():
        words = [w for w in d.type.split() if w != "const"]
        if len(words) == 1 and words[0] in _HALF_TYPES:
            names |= {dd.name for dd in d.declarators if not dd.pointer}
    return names


@dataclass(frozen=True)
class ScalarOp:
    """A scalar fp16 operation in the source: the intrinsic (or operator) and where."""

    op: str
    offset: int
    line: int
    statement: int  # offset of the statement's first character


@dataclass(frozen=True)
class Update:
    """An accumulation ``acc = op(.., multiplier, acc)`` found in a statement."""

    acc: str
    op: str
    multiplicand: str
    multiplier: str
    packed: bool


def scalar_ops(ks: KernelSource) -> list[ScalarOp]:
    out: list[ScalarOp] = []
    for c in ks.calls(_SCALAR_INTRINSICS):
        at = c.span[0]
        out.append(ScalarOp(c.name, at, ks.line_at(at), _statement_start(ks, at)))
    for name in half_variables(ks):
        for use in ks.uses(name):
            st = _statement_start(ks, use.span[0])
            for at, sign in ks.arithmetic_operators(use.span):  # + - * / with it an operand
                out.append(ScalarOp(f"operator{sign}", at, ks.line_at(at), st))
    uniq = {o.offset: o for o in out}
    return sorted(uniq.values(), key=lambda o: o.offset)


def updates(ks: KernelSource, within: tuple[int, int]) -> list[Update]:
    """``acc = __hfma(a, b, acc)``, ``acc = __hadd(acc, b)`` (as ``1 * b + acc``), ``acc += a *
    b`` and their half2 forms, in the statements within ``within`` (comma-separated expressions
    included)."""
    out = []
    for a in ks.assignments(None, within):
        if a.target is None or a.value is None:
            continue
        acc = a.target
        rhs = _norm(ks.code[slice(*a.value)])
        if a.kind == "compound" and a.operator == "+=":  # acc += a * b, acc += b
            text = ks.code[slice(*a.value)]
            terms = split_top(text, "*", "([")  # a * b: exactly one top-level *
            x, y = [text[p:q] for p, q in terms] if len(terms) == 2 else ["1", rhs]
            out.append(Update(acc, "operator+=", _norm(x), _norm(y), False))
            continue
        if a.kind != "assign":
            continue
        c = ks.call_of(a.value)
        if c is None:
            continue
        f, args = c.name, [_norm(ks.code[slice(*x)]) for x in c.args]
        if f in ("__hfma", "__hfma2") and len(args) == 3 and args[2] == acc:
            out.append(Update(acc, f, args[0], args[1], f.endswith("2")))
        elif f in ("__hadd", "__hadd2") and len(args) == 2 and acc in args:
            other = args[1] if args[0] == acc else args[0]
            out.append(Update(acc, f, "1", other, f.endswith("2")))
    return out


def spare_lanes(ks: KernelSource, loop: Loop, packed: Sequence[str]) -> dict[str, str]:
    """Packed accumulators of ``loop`` of which only one lane is read after it:
    {name: the lane read (``low`` or ``high``)}."""
    out = {}
    for name in packed:
        uses = ks.uses(name, within=(loop.end + 1, ks.body_end))
        if not uses:
            continue
        lanes = set()
        for u in uses:
            f = ks.called_with(u.span)  # the function it is the first argument of
            m = re.fullmatch(r"__(low|high)2half", f or "")
            lanes.add(m.group(1) if m else "both")
        if lanes in ({"low"}, {"high"}):
            out[name] = lanes.pop()
    return out


def _definition(ks: KernelSource, ident: str) -> str | None:
    """The expression ``ident`` is first initialized with or assigned, in the body."""
    a = next((x for x in ks.assignments(ident) if x.kind in ("init", "assign")), None)
    return _norm(ks.code[slice(*a.value)]) if a is not None and a.value else None


def _is_const(expr: str) -> bool:
    return bool(re.fullmatch(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?[fF]?", expr.strip()))


def _shape(expr: str) -> str:
    """An expression with its vector components blanked: ``t.x * t.x`` and ``t.y * t.y`` are
    the same operation on two components."""
    return re.sub(r"\.(?:x|y|z|w|r|g|b|a)\b", ".#", _norm(expr))


def proposal(ks: KernelSource, loop: Loop) -> tuple[str, dict[str, Any]]:
    """A packing for the loop's scalar accumulations (pairs with one multiplier, a spare lane
    of a packed accumulator) and what it is made of."""
    ups = updates(ks, (loop.start, loop.end + 1))
    scalar = [u for u in ups if not u.packed]
    packed = [u for u in ups if u.packed]
    spare = spare_lanes(ks, loop, [u.acc for u in packed])
    pairs: list[tuple[Update, Update]] = []
    into_spare: list[tuple[Update, str, str]] = []
    left: list[Update] = []
    by_mult: dict[str, list[Update]] = {}
    for u in scalar:
        by_mult.setdefault(u.multiplier, []).append(u)
    for mult, us in by_mult.items():
        rest = list(us)
        # an accumulation by `mult` fits the spare lane of a packed one by mult broadcast
        for p in packed:
            lane = spare.get(p.acc)
            if lane is None or not rest or any(p.acc == s for _u, s, _l in into_spare):
                continue
            d = _definition(ks, p.multiplier) or p.multiplier
            if _norm(d) in (f"__half2half2({mult})", f"__halves2half2({mult}, {mult})"):
                pick = next((u for u in rest if _is_const(u.multiplicand)), rest[-1])
                rest.remove(pick)
                into_spare.append((pick, p.acc, "high" if lane == "low" else "low"))
        # the same operation on other components first (m_r with m_g), then a constant
        # multiplicand (the weight sum: 1 x w) with what is left (m_b: (b, 1) x w)
        by_shape: dict[str, list[Update]] = {}
        for u in rest:
            by_shape.setdefault(_shape(u.multiplicand), []).append(u)
        left_here: list[Update] = []
        for group in by_shape.values():
            while len(group) >= 2:
                pairs.append((group.pop(0), group.pop(0)))
            left_here += group
        consts = [u for u in left_here if _is_const(u.multiplicand)]
        others = [u for u in left_here if not _is_const(u.multiplicand)]
        while consts and others:
            pairs.append((others.pop(0), consts.pop(0)))
        rest = sorted(others + consts, key=lambda u: us.index(u))
        while len(rest) >= 2:
            pairs.append((rest.pop(0), rest.pop(0)))
        left += rest
    parts = []
    if pairs:
        parts.append(
            "pair "
            + ", ".join(
                f"{a.acc} with {b.acc} (({a.multiplicand}, {b.multiplicand}) x {a.multiplier})"
                for a, b in pairs
            )
            + " in half2 accumulators: one __hfma2 per pair instead of two "
            "scalar operations, every lane rounding as the scalar one does"
        )
    for u, acc, lane in into_spare:
        one = "1" if u.multiplicand == "1" else u.multiplicand
        parts.append(
            f"accumulate {u.acc} in the unused {lane} lane of {acc} (only one lane of {acc} is "
            f"read after the loop): store {one} in that lane of the packed operand, "
            f"so its __hfma2 adds {one} x multiplier there, and read {u.acc} as "
            f"__{lane}2half({acc})"
        )
    if left:
        parts.append(
            f"{', '.join(u.acc for u in left)}: no partner, one lane left idle (or accumulate "
            "alternate iterations in the two lanes of a half2 and add them after the loop, "
            "which changes the rounding order)"
        )
    if not parts:
        parts.append("keep the data as half2 pairs and use the __h*2 intrinsics")
    parts.append(
        "keep the pairs packed in memory (half2; half4 or uint2 for 3 or 4 components) so "
        "that no PRMT has to repack halves"
    )
    info = {
        "pairs": [[a.acc, b.acc] for a, b in pairs],
        "into_spare_lane": [[u.acc, acc, lane] for u, acc, lane in into_spare],
        "unpaired": [u.acc for u in left],
        "spare_lanes": spare,
    }
    return "; ".join(parts), info


@dataclass(frozen=True)
class HalfLoop(FindingDetails):
    """The lines whose SASS the estimate counts (the loop, or the statement's lines), that
    region's one-lane fp16 instructions, half-word PRMTs and instructions, the kernel's
    instructions, and the packing proposed (its text, and its pairs in ``plan_info``)."""

    region: tuple[int, ...]
    one_lane: int
    prmt: int
    region_instructions: int
    instructions: int
    plan: str
    plan_info: dict[str, Any]


# ---------------------------------------------------------------------------------------------
# The rule


class UnpackedHalfMath(Rule):
    """Scalar fp16 arithmetic where packed half2 instructions would do two operations at once.

    What it detects
    ---------------
    Statements in a loop of the kernel that do scalar fp16 (or bf16) arithmetic: ``__hadd``,
    ``__hmul``, ``__hfma`` and the other scalar intrinsics of ``cuda_fp16.h``, or ``+ - * /`` on
    variables declared ``__half``; typically a half3 split into three scalar accumulators, or a
    weight sum kept apart from a half2 pair whose second lane does nothing. The SASS
    must show the waste at the line: fp16 instructions that compute one lane (``HADD2 R2,
    R2.H0_H0, ...``: every source a broadcast half), or ``PRMT`` instructions moving 16-bit
    halves (the compiler repacking scalars into pairs); when ptxas moved the line's arithmetic
    elsewhere (nvcc 13 attributes what it packs to the load's line), the enclosing loop's SASS
    must show it. Reported at the statement's line.

    Why it is slow
    --------------
    An fp16 unit works on a pair: ``HFMA2`` does two multiply-adds in one instruction, a scalar
    ``__hfma`` one, in the same issue slot. Three scalar components take three instructions where
    a (r, g) and a (b, 1) pair take two, and the 1 in the fourth lane accumulates the weight sum
    for free. When the compiler packs scalars itself (nvcc's SLP vectorizer does), it pays PRMT
    instructions to build the pairs. On AMD GPUs (a shader study of fp16 packing) the packing also
    decides register allocation; on NVIDIA it is mostly issue slots, so it matters when the loop
    is instruction-bound.

    Example
    -------
    ``kernels/fp16_neighbourhood/moments.cu``: ``moments_half3`` (scalar ``__hfma``/``__hmul`` on
    each component and a scalar weight sum: lines 163-166), ``moments_split`` and
    ``moments_uint2`` (the weight sum ``__hadd(wsum, wt)`` beside a (b, 0) pair whose high lane
    is never read); ``moments_half4`` packs (r, g) and (b, 1) and has no scalar fp16 math.

    Fix
    ---
    Pack the data and the accumulators in half2: pair the components that are multiplied by the
    same value (``__hfma2(rg, w2, m_rg)``), put the weight in a spare lane (store (b, 1) and
    read the sum as ``__high2half(m_b1)``), and keep the pairs packed in memory (half4 or uint2
    texels) so that nothing repacks them. The finding names the pairs it found.

    How the estimate is made
    ------------------------
    An upper bound for packing the loop, shared by the loop's findings (they are one fix, not
    additive): pairing the one-lane fp16 instructions saves half of them, packed data saves the
    half-word PRMTs; the instructions a thread executes are the SASS of the kernel with the
    loop's part weighted by its trip count (executions per warp of the loop's memory accesses in
    the trace; 1 when unrolled). On the launch roofline (gpuadvise.model.roofline) those
    instructions are the issue term (4 warp instructions per SM per clock), beside the L1, L2,
    DRAM and latency terms of the traced accesses, which packing leaves alone; the launch takes
    at least its largest term before and after (both with DRAM at peak bandwidth for the bound,
    at sustained rates for the point value in the inputs). Dependencies and the FMA pipe's own
    rate are not modelled. Without the device's rates or a trace, ``max(T_issue, T_DRAM) /
    max(T_issue - saved, T_DRAM)``.

    Fix safety
    ----------
    Display-only, never automatic. Lane-wise, a packed ``__hfma2`` rounds exactly as two scalar
    ``__hfma`` do, so a packing that keeps every operation and its order gives bit-identical
    results (the moments kernels do); but the gain needs the data packed end to end (the
    layout in memory, the accumulators, a 1 in a spare lane, the unpacking after the loop),
    a rewrite gpuadvise cannot prove equivalent in general; a local repacking of the scalars is
    what nvcc already does (PRMT + HFMA2) and gains nothing.
    """

    id = "GA402"
    name = "unpacked-half-math"
    title = "Scalar fp16 arithmetic where packed half2 would do"
    severity = "warning"
    models = ("sass", "source", "trace")
    options = {"loops_only": True}

    def detect(self, ctx: RuleContext) -> Iterator[Finding]:
        ks = ctx.kernel_source
        ops = scalar_ops(ks)
        if not ops:
            return
        lps = loops(ks)
        instrs = ctx.sass_instructions
        regs = int(ctx.kernel.resources.registers)  # _sass checked there is a compiled kernel
        by_stmt: dict[int, list[ScalarOp]] = {}
        for o in ops:
            by_stmt.setdefault(o.statement, []).append(o)
        for st, group in sorted(by_stmt.items()):
            line = ks.line_at(st)
            inside = [lp for lp in lps if lp.start < st <= lp.end]
            if not inside and ctx.option("loops_only"):
                continue
            outer = min(inside, key=lambda lp: lp.start) if inside else None
            stmt_lines = sorted({o.line for o in group} | {line})
            at_line = _count(instrs, ctx.source_file, stmt_lines)
            region = list(range(outer.first_line, outer.last_line + 1)) if outer else stmt_lines
            in_loop = _count(instrs, ctx.source_file, region)
            op_lines = {ln for o in ops for ln in (o.line, ks.line_at(o.statement))}
            moved = [
                ln
                for ln in region
                if ln not in op_lines and _count(instrs, ctx.source_file, [ln]).fp16
            ]
            if at_line.fp16:
                wasteful = at_line.one_lane + at_line.prmt > 0
            else:  # ptxas moved this line's arithmetic: judge the loop
                wasteful = in_loop.one_lane + in_loop.prmt > 0
            if not wasteful:
                continue
            names = sorted({o.op for o in group})
            where = (
                f"the SASS at this line has {at_line.text()}"
                if at_line.fp16
                else "the SASS has no fp16 instruction at this line (ptxas merged its "
                "arithmetic with its neighbours'"
                + (f", at line {', '.join(map(str, moved))})" if moved else ")")
            )
            loop_txt = (
                f"; the loop (lines {outer.first_line}-{outer.last_line}) has "
                f"{in_loop.one_lane} one-lane and {in_loop.packed} packed fp16 instructions "
                f"and {in_loop.prmt} half-word PRMTs"
                if outer
                else ""
            )
            plan, info = proposal(ks, outer) if outer else ("", {})
            yield self.finding(
                ctx,
                f"scalar fp16 arithmetic ({', '.join(names)}) where half2 would do two per "
                f"instruction: {where}{loop_txt}; {regs} registers/thread",
                line=line,
                evidence=[
                    Evidence("scalar_fp16_ops", len(group), 1, ">=", "operations"),
                    Evidence("sass_one_lane_fp16", at_line.one_lane, unit="instructions"),
                    Evidence("sass_packed_fp16", at_line.packed, unit="instructions"),
                    Evidence("sass_halfword_prmt", at_line.prmt, unit="instructions"),
                    Evidence("loop_one_lane_fp16", in_loop.one_lane, unit="instructions"),
                    Evidence("loop_packed_fp16", in_loop.packed, unit="instructions"),
                    Evidence("loop_halfword_prmt", in_loop.prmt, unit="instructions"),
                    Evidence("registers", regs, unit="registers/thread"),
                ],
                details=HalfLoop(
                    tuple(int(n) for n in region),
                    int(in_loop.one_lane),
                    int(in_loop.prmt),
                    int(in_loop.instructions),
                    len([i for i in instrs if not i.never_executes]),
                    plan,
                    info,
                ),
            )

    def estimate(self, ctx: RuleContext, finding: Finding) -> Estimate:
        in_loop = finding.details_as(HalfLoop)
        n_kernel = in_loop.instructions
        saved_static = in_loop.one_lane // 2 + in_loop.prmt
        trips, how = _trips(ctx, in_loop.region)
        n_loop = in_loop.region_instructions
        n_dyn = (n_kernel - n_loop) + n_loop * trips
        saved = saved_static * trips
        d = ctx.device
        launch = ctx.launch
        warps = launch.grid.count * -(-launch.block.count // 32)
        inputs: dict[str, Any] = {
            "one_lane_fp16": in_loop.one_lane,
            "halfword_prmt": in_loop.prmt,
            "instructions_per_thread": n_dyn,
            "instructions_saved_per_thread": saved,
            "loop_trips": trips,
        }
        shared = "for packing the whole loop (shared by its findings, not additive)"
        rate = sm_cycles_per_s(d, ISSUE_PER_SM_CLOCK)
        if rate is None:
            sp = work_ratio(n_dyn, saved, floor=1)
            return Estimate(
                round(max(sp, 1.0), 3),
                "upper-bound",
                f"issue-bound kernel, {shared}: {n_dyn} -> {n_dyn - saved} instructions per "
                f"thread ({how}); no clock for {d.name}",
                inputs,
            )
        try:
            base = view_traffic(d, ctx.trace_view)
        except ModelUnavailable:
            base = None
        if base is not None:
            # the launch roofline: every instruction a warp issues (not only the memory ones)
            # in the issue term; L1, L2, DRAM and latency are the launch's and do not change
            est = launch_change_estimate(
                d,
                replace(base, instructions=float(warps * n_dyn)),
                replace(base, instructions=float(warps * (n_dyn - saved))),
                f"{shared}, {in_loop.one_lane} one-lane fp16 instructions paired and "
                f"{in_loop.prmt} PRMTs gone: {n_dyn:.0f} -> {n_dyn - saved:.0f} instructions "
                f"per thread ({how})",
                inputs,
            )
            if est is not None:
                inputs.update(
                    issue_time_us=inputs["before_issue_us"],
                    saved_us=inputs["before_issue_us"] - inputs["after_issue_us"],
                    dram_time_us=inputs["before_dram_us"],
                )
                return est
        bandwidth = dram_bytes_per_s(d)
        dram_bytes = 0.0
        if bandwidth is not None:
            try:
                dram_bytes = _dram_bytes(ctx)
            except ModelUnavailable:
                dram_bytes = 0.0
        r = roofline(warps * n_dyn, warps * saved, rate, dram_bytes, bandwidth)
        t_issue, t_saved, t_dram = r.pipe_s, r.saved_s, r.dram_s
        inputs.update(
            {"issue_time_us": t_issue * 1e6, "saved_us": t_saved * 1e6,
             "dram_time_us": t_dram * 1e6}
        )  # fmt: skip
        return Estimate(
            round(max(r.speedup, 1.0), 3),
            "upper-bound",
            f"{shared}: pairing {in_loop.one_lane} one-lane fp16 instructions saves "
            f"{in_loop.one_lane // 2}, packed data saves {in_loop.prmt} PRMTs: {n_dyn:.0f} -> "
            f"{n_dyn - saved:.0f} instructions per thread ({how}); issue time {t_issue * 1e6:.1f} us "
            f"at {ISSUE_PER_SM_CLOCK} warp instructions per SM clock, DRAM "
            f"{t_dram * 1e6:.1f} us; max before / max after. Dependencies and latency are "
            "ignored",
            inputs,
        )

    def transform(self, ctx: RuleContext, finding: Finding) -> Variant:
        plan = finding.details_as(HalfLoop).plan or "keep the data as half2 pairs and use __h*2"
        return Variant(
            "display-only",
            f"{plan}. Display-only: the gain needs the layout changed end to end, which "
            "gpuadvise cannot prove equivalent (lane-wise each __hfma2 rounds as __hfma does, so "
            "a packing that keeps every operation and its order is bit-identical: see "
            "moments_half4 in kernels/fp16_neighbourhood)",
        )


def _trips(ctx: RuleContext, region: Sequence[int]) -> tuple[float, str]:
    """How many times a warp runs the loop's code: executions per warp of its memory
    instructions in the trace (1 when the loop is unrolled), and how that was found."""
    try:
        trace = ctx.trace
    except ModelUnavailable:
        return 1.0, "no trace: the loop's SASS counted once"
    lines = set(region)
    insts = [i.inst for i in trace.instructions if i.line in lines and ctx.same_file(i.file)]
    if not insts:
        return 1.0, "no memory access in the loop: its SASS counted once"
    r = trace.records
    sel = np.isin(r["inst"], np.array(insts))
    if not sel.any():
        return 1.0, "the loop's memory accesses did not run: its SASS counted once"
    warps = len(np.unique((r["cta"][sel].astype(np.int64) << 20) + r["warp"][sel]))
    executed = len(np.unique(r["inst"][sel]))
    trips = float(sel.sum()) / max(warps * executed, 1)
    return round(trips, 3), (
        "the loop is unrolled: its SASS runs once"
        if abs(trips - 1.0) < 1e-9
        else f"the loop's SASS runs {trips:.1f} times per warp (trace)"
    )


def _dram_bytes(ctx: RuleContext) -> float:
    from gpuadvise.rules import touched_lines

    trace = ctx.trace
    g = trace.records[trace.records["space"] == 0]
    if not len(g):
        return 0.0
    _rec, sec = touched_lines(g, 32)
    return float(len(np.unique(sec)) * 32 * trace.scale)
