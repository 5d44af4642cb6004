"""GA404 fp64-promotion: float code computed in double precision (double literals and functions)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Any

from gpuadvise.errors import GpuAdviseError
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
    counted,
    fixkit,
    fp64_to_fp32_estimate,
    lines_text,
    max_active_blocks,
    same_source_file,
)

# SASS that runs on the FP64 pipe (or its slow MUFU paths), and the float <-> double conversions
_FP64 = ("DADD", "DMUL", "DFMA", "DSETP", "DMNMX", "DMUL", "DSET")
_MUFU64 = ("MUFU.RCP64H", "MUFU.RSQ64H")
_PROMOTE = "F2F.F64.F32"
_INT_PROMOTE = "I2F.F64"  # an integer made double (I2FP.F32, an ALU instruction, once float)
_DEMOTE = "F2F.F32.F64"
# double functions of <cmath> with a float twin (``sqrt`` -> ``sqrtf``)
_MATH = (
    "sqrt", "exp", "exp2", "log", "log2", "log10", "pow", "sin", "cos", "tan", "fabs", "floor",
    "ceil", "fmin", "fmax", "fma", "tanh", "atan", "atan2", "asin", "acos", "sinh", "cosh",
    "rsqrt", "cbrt", "erf", "expm1", "log1p", "hypot", "fmod", "round", "trunc",
)  # fmt: skip


@dataclass(frozen=True)
class Promotion(FindingDetails):
    """The lines (the kernel body's) whose SASS converts floats to double and computes in FP64,
    with the counts of those instructions."""

    lines: tuple[int, ...]
    promotions: int
    fp64: int
    demotions: int
    int_promotions: int = 0


def _counts(instrs: Sequence[Any], file: str) -> dict[int, list[int]]:
    """Per kernel-body line: [float promotions, FP64 instructions, demotions, integer
    promotions]."""
    out: dict[int, list[int]] = {}
    for i in instrs:
        if i.never_executes:
            continue
        f, ln = i.call_site
        if ln is None or not same_source_file(f, file):
            continue
        c = out.setdefault(ln, [0, 0, 0, 0])
        if i.opcode.startswith(_PROMOTE):
            c[0] += 1
        elif i.opcode.startswith(_INT_PROMOTE):
            c[3] += 1
        elif i.opcode.startswith(_DEMOTE):
            c[2] += 1
        elif i.base_opcode in _FP64 or i.opcode.startswith(_MUFU64):
            c[1] += 1
    return {ln: c for ln, c in out.items() if any(c)}


def _executed_fp64(ctx: RuleContext, lines: Sequence[int]) -> float | None:
    """The FP64 pipe's warp instructions that the traced launch executed at ``lines`` (and the
    two after each); None without the emulator's counts. ``sinf``'s range reduction for huge
    arguments has double code (I2F.F64, DMUL) that a launch of ordinary arguments never runs."""
    try:
        profile = ctx.simt
    except ModelUnavailable:
        return None
    return sum(
        p.pipes.get("fp64", 0.0)
        for p in profile.line_pipes
        if same_source_file(p.file, ctx.source_file) and any(0 <= p.line - x <= 2 for x in lines)
    )


def _main_line(ctx: RuleContext, lines: Sequence[int]) -> int:
    """The line of ``lines`` where the traced launch executed the most FP64 and conversion work
    (the line itself: Rodinia hotspot's ``2.0*`` in its loop, not the ``step/Cap`` once before
    it); the first line without the emulator's counts or any executed work."""
    try:
        profile = ctx.simt
    except ModelUnavailable:
        return lines[0]
    work = {ln: 0.0 for ln in lines}
    for p in profile.line_pipes:
        if p.line in work and same_source_file(p.file, ctx.source_file):
            work[p.line] += p.pipes.get("fp64", 0.0) + p.pipes.get("xu", 0.0)
    best = max(lines, key=lambda ln: (work[ln], -ln))
    return best if work[best] > 0 else lines[0]


def _float_text(ctx: RuleContext, lines: Sequence[int], whole: bool) -> tuple[str, int] | None:
    """The kernel's file with the double literals and double functions of ``lines`` made float
    (``whole``: of the whole kernel body, and its ``double`` declarations and casts made
    ``float`` too), and the number of edits; None without the parsed source."""
    try:
        ks = ctx.kernel_source
    except (ModelUnavailable, GpuAdviseError):
        return None
    rw = ks.rewrite()
    changed = _float_edits(ks, rw, lines, whole)  # the edits first, then the text
    return rw.text(), changed


def _float_edits(ks: KernelSource, rw: Any, lines: Sequence[int], whole: bool) -> int:
    """Put in ``rw`` the edits of :func:`_float_text`; the number of edits."""
    spans = (
        [ks.span]
        if whole
        else [(ks.tree.line_start(ln), ks.tree.line_start(ln + 1)) for ln in lines]
    )
    changed = 0
    for span in spans:
        changed += fixkit.float_literal_edits(ks.tree, rw, span)
        changed += fixkit.float_function_edits(ks.tree, rw, span, _MATH)
        if whole:
            changed += fixkit.float_type_edits(ks.tree, rw, span)
    return changed


def _float_resident(ctx: RuleContext, d: Promotion) -> int | None:
    """CTAs per SM of the kernel built in float (the literals and calls of the promoted lines
    made float; when the kernel names ``double`` itself, its whole body), when more than now;
    None when no more fit, or the float version does not build here."""
    got = _float_text(ctx, d.lines, whole=_doubles(ctx)[1] > 0)
    if got is None or not got[1]:
        return None
    try:
        info = ctx.services.compile_candidate(got[0])
        k = replace(ctx.occupancy_input, regs_per_thread=info.resources.registers)
        after = max_active_blocks(ctx.device, k).active_blocks_per_sm
    except (GpuAdviseError, ValueError):
        return None
    return after if after > ctx.occupancy.active_blocks_per_sm else None


def _doubles(ctx: RuleContext) -> tuple[int, int]:
    """How many times the kernel's declaration (its parameters, its template parameters' types)
    and its body name the type ``double`` (parsed types, not words in comments or names)."""
    try:
        ks = ctx.kernel_source
    except (ModelUnavailable, GpuAdviseError):
        return 0, 0

    def count(span: tuple[int, int]) -> int:
        return sum(
            1
            for n in ks.tree.walk(types=("primitive_type",), within=span)
            if span[0] <= ks.tree.start(n) < span[1] and ks.tree.code_of(n) == "double"
        )

    return count((ks.tree.line_start(ks.decl_line), ks.body_start)), count(ks.span)


class Fp64Promotion(Rule):
    """Float code computed in double precision: a double literal or a double function in an
    expression of floats.

    What it detects
    ---------------
    From the SASS, at the kernel's source lines: float values converted to double
    (``F2F.F64.F32``) and computed on the FP64 pipe (``DADD``, ``DMUL``, ``DFMA``, ``DSETP``,
    ``MUFU.RCP64H``...). C++ promotes ``2.0 * x`` with ``float x`` to double, ``1.0 / (1.0 + d)``
    divides in double, and ``sqrt(x)`` of a float calls the double ``sqrt``: the source is float
    code, the machine code is not. An integer made double (``I2F.F64``: ``0.92 * Tn[i]`` of a
    byte) counts as a promotion when the kernel's double results come back to float
    (``F2F.F32.F64``). Kernels that work in double on purpose (double buffers, no conversion
    from float, nothing brought back to float) are not reported, nor double code the traced
    launch never executes (``sinf``'s range reduction for huge arguments: I2F.F64, DMUL).
    One finding per kernel, at the promoting line where the traced launch executed the most FP64
    and conversion work (a loop's line before a setup line run once).

    Why it is slow
    --------------
    The FP64 pipe has half the FP32 pipe's throughput on an H100 and a 64th of it on consumer
    GPUs (RTX 40xx); a double division or square root is a long instruction sequence around
    ``MUFU.RCP64H``; and every promotion adds two conversions. In a compute-bound loop this can
    dominate; in a memory-bound kernel it costs issue slots and registers (a double is two).

    Example
    -------
    ``kernels/fp64/promote.cu``: ``scale2`` (``2.0 * x[i]``), ``sigmoid`` (``1.0 / (1.0 +
    expf(-v))``) and ``norm`` (``sqrt`` of a float sum).

    Fix
    ---
    Write float literals (``2.0f``) and the float functions (``sqrtf``, ``expf``...) where the
    operands are float, or compile with ``-use_fast_math`` semantics in mind. Where double
    precision is wanted, say so with a cast and keep it out of the inner loop.

    How the estimate is made
    ------------------------
    An upper bound on the launch model (issue and pipes from the emulator's instruction counts,
    the critical path, the memory terms, the launch floor): the kernel's FP64 pipe instructions
    issued on the FP32 pipe instead (an H100 runs FP64 at half the FP32 rate, a consumer GPU at
    1/64), its critical path's FP64 links made FP32 ones, and the F2F conversions of these lines
    gone (as many per FP64 instruction as the SASS of these lines has, ``I2F.F64`` included: in
    float it is ``I2FP.F32``, an ALU instruction on sm_90), on the pipes and on the critical
    path. A double division is ptxas's MUFU.RCP64H and Newton sequence, and for each warp with a
    lane whose operands fail its range check (a zero numerator: HeCBench zeropoint's
    ``min_val / scale`` with ``min_val = fminf(x, 0)``) a call of its slow path, about 68
    instructions, counted by the emulator on the traced values; in float each becomes the float
    division's slow path, about 34 (FCHK sends a zero numerator there too: measured on an H200).
    A double takes two registers: the float version (the fix; the whole body made float
    when the kernel names ``double``) is built, and when it fits more CTAs per SM the launch
    model runs it with them (fewer rounds of CTAs; Rodinia hotspot: 34 -> 28 registers, 6 -> 8
    CTAs per SM). It takes all of the kernel's FP64 work as these lines'; without a trace, no
    estimate. Where the float build fits more CTAs per SM (fewer rounds), the bound is the
    launch as it is at sustained rates (with the model's 15%) against the float build at peak
    (unless that is bound by memory): both at peak, each side is its largest throughput term,
    which may be one the change leaves (hotspot: the integer pipe, 1.08x, where an H200
    measured 1.18x; now 1.24x, its point 1.08x).

    Fix safety
    ----------
    Automatic and verified: on the flagged lines, double literals get an ``f`` suffix and double
    math functions their float twin; where the kernel's body names ``double`` itself (locals,
    ``static_cast<double>``: HeCBench zeropoint), the whole body is made float, those types
    included (a parsed type: ``long double`` and comments stay). The kernel's outputs are
    compared with the original's within the spec's tolerance (float results differ from double
    ones in the last bits; integer outputs, exactly). Offered only when no parameter of the
    kernel is double: its inputs and outputs are float or integer, so the double work is
    between them, and the outputs' comparison says whether float keeps them.
    """

    id = "GA404"
    name = "fp64-promotion"
    title = "Float code computed in double precision (double literals or functions)"
    severity = "warning"
    models = ("sass", "trace")
    options = {}

    def detect(self, ctx: RuleContext) -> Iterator[Finding]:
        try:
            instrs = ctx.sass_instructions
        except ModelUnavailable:
            return
        counts = _counts(instrs, ctx.source_file)
        # a line that promotes floats and computes in FP64 (the conversion and the arithmetic
        # may fall on neighbouring lines of one statement: count the FP64 work of the lines
        # that promote, and of the next two); an integer made double counts as a promotion when
        # the kernel's double results end as floats (``0.92 * Tn[i]`` of a byte, stored float)
        dem = sum(c[2] for c in counts.values())
        lines = sorted(ln for ln, c in counts.items() if c[0] > 0 or (dem and c[3] > 0))
        if not lines:
            return
        fp64 = sum(c[1] for ln, c in counts.items() if any(0 <= ln - p <= 2 for p in lines))
        if fp64 == 0 or _executed_fp64(ctx, lines) == 0.0:
            return  # no FP64 work, or only on a path the launch never takes (sinf's slow path)
        prom = sum(counts[ln][0] for ln in lines)
        iprom = sum(counts[ln][3] for ln in lines) if dem else 0
        where = ", ".join(map(str, lines))
        conv = [counted(prom, "float-to-double conversion") + " (F2F.F64.F32)"] if prom else []
        if iprom:
            conv.append(counted(iprom, "integer-to-double conversion") + " (I2F.F64)")
        yield self.finding(
            ctx,
            f"float values computed in double precision at line{'s' if len(lines) > 1 else ''} "
            f"{where}: {', '.join(conv)}, "
            f"{counted(fp64, 'FP64 instruction')} (DFMA/DMUL/DADD/MUFU.RCP64H...) and "
            f"{counted(dem, 'conversion')} back in "
            "the SASS: a double literal (`2.0`) or a double function (`sqrt`) in float code. "
            "Write `2.0f` and `sqrtf` where the operands are float",
            line=_main_line(ctx, lines),
            evidence=[
                Evidence("float_to_double_conversions", prom),
                Evidence("int_to_double_conversions", iprom),
                Evidence("fp64_instructions", fp64, 1, ">="),
                Evidence("double_to_float_conversions", dem),
                Evidence("lines", len(lines)),
            ],
            details=Promotion(tuple(lines), prom, fp64, dem, iprom),
        )

    def estimate(self, ctx: RuleContext, finding: Finding) -> Estimate:
        d = finding.details_as(Promotion)
        conversions = d.promotions + d.int_promotions + d.demotions
        inputs: dict[str, Any] = {"fp64_instructions": d.fp64, "conversions": conversions}
        est = None
        if ctx.has_model("trace"):
            resident = _float_resident(ctx, d)
            occ = ""
            if resident:
                inputs["ctas_per_sm_after"] = resident
                occ = (
                    f"; built in float, the kernel fits {resident} CTAs per SM where it fits "
                    f"{ctx.occupancy.active_blocks_per_sm} (a double takes two registers)"
                )
            est = fp64_to_fp32_estimate(
                ctx.device,
                ctx.trace_view,
                conversions / max(d.fp64, 1),
                f"the FP64 work in FP32 ({counted(d.fp64, 'FP64 instruction')} and "
                f"{counted(conversions, 'conversion')} at these lines in the SASS){occ}",
                inputs,
                ctas_per_sm=resident or 0,
            )
        if est is not None:
            return est
        return Estimate(
            None,
            "none",
            "not estimated: without the emulator's instruction counts the FP64 pipe's share of "
            f"the kernel's time is not known; the SASS has {counted(d.fp64, 'FP64 instruction')} "
            f"and {counted(conversions, 'conversion')} from these lines",
            inputs,
        )

    def transform(self, ctx: RuleContext, finding: Finding) -> Variant:
        d = finding.details_as(Promotion)
        how = "write float literals (`2.0f`) and float functions (`sqrtf`) where operands are float"
        ks = ctx.kernel_source
        head, body = _doubles(ctx)
        if head:
            return Variant(
                "display-only",
                how + " (no automatic rewrite: the kernel names `double` itself, a parameter of "
                "its, so some double work is meant)",
            )
        rw = ks.rewrite()
        changed = _float_edits(ks, rw, d.lines, whole=body > 0)
        if not changed:
            return Variant(
                "display-only",
                how + " (no automatic rewrite: no double literal or function call at these "
                "lines; the promotion comes from a variable or a macro)",
            )
        where = (
            f"in the kernel's body (its {counted(body, '`double` type')} of locals and casts "
            "too: no parameter is double, the inputs and outputs are not)"
            if body
            else f"at {lines_text(d.lines)}"
        )
        return Variant(
            "automatic-and-verified",
            f"{how}: {counted(changed, 'literal, call or type', 'literals, calls and types')} "
            f"{where} made float; the outputs are checked against the original's within the "
            "spec's tolerance",
            diff=rw.diff(ctx.source_file),
        )
