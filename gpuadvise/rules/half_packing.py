"""GA402's family: scalar fp16 arithmetic in the SASS and the source, and the packing proposed.

- :func:`fp16_counts`: one-lane and packed fp16 instructions and half-word PRMTs at some lines
  (:class:`SassCounts`; the operands are read by gpuadvise.toolchain.sass: one_lane_fp16,
  halfword_prmt);
- :func:`half_loops`, :func:`half_variables`, :func:`scalar_ops`: the body's loops, its scalar
  fp16/bf16 variables and the scalar fp16 operations of the source (:class:`ScalarOp`);
- :func:`half_updates`, :func:`spare_lanes`, :func:`packing_proposal`: the loop's
  accumulations (:class:`Update`), the packed accumulators with a lane never read, and a
  packing of the scalar accumulations into pairs (:func:`component_shape`: the same operation
  on other vector components).

Kept beside the rule (issue 28: no rule file over 400 lines).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuadvise.source.text import KernelSource, split_top
from gpuadvise.toolchain.sass import halfword_prmt, one_lane_fp16, same_source_file

__all__ = [
    "Loop",
    "SassCounts",
    "ScalarOp",
    "Update",
    "component_shape",
    "fp16_counts",
    "half_loops",
    "half_updates",
    "half_variables",
    "packing_proposal",
    "scalar_ops",
    "spare_lanes",
]

# scalar fp16/bf16 intrinsics of cuda_fp16.h / cuda_bf16.h (the half2 forms end in 2)
_SCALAR_INTRINSICS = (
    "__hadd", "__hsub", "__hmul", "__hfma", "__hdiv", "__hneg", "__habs", "__hmax", "__hmin",
    "__hadd_sat", "__hsub_sat", "__hmul_sat", "__hfma_sat", "__hfma_relu", "__hmax_nan",
    "__hmin_nan", "__hadd_rn", "__hsub_rn", "__hmul_rn", "hsqrt", "hrsqrt", "hrcp", "hexp",
    "hexp2", "hlog", "hlog2", "hsin", "hcos",
)  # fmt: skip
_HALF_TYPES = ("__half", "half", "__nv_bfloat16", "nv_bfloat16")
_FP16_OPCODES = ("HADD2", "HMUL2", "HFMA2", "HMNMX2")


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


def fp16_counts(instrs: Sequence[Any], file: str, lines: Sequence[int]) -> SassCounts:
    c = SassCounts()
    want = set(lines)
    for i in instrs:
        if i.never_executes:
            continue
        f, ln = i.call_site
        if ln in want and same_source_file(f, file):
            c.add(i)
    return c


def _norm(expr: str) -> str:
    return re.sub(r"\s+", " ", expr).strip()


@dataclass(frozen=True)
class Loop:
    """A loop of the kernel body: offsets of its keyword and its body's end, and lines."""

    start: int
    end: int
    first_line: int
    last_line: int


def half_loops(ks: KernelSource) -> list[Loop]:
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


def half_updates(ks: KernelSource, within: tuple[int, int]) -> list[Update]:
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


def component_shape(expr: str) -> str:
    """An expression with its vector components blanked: ``t.x * t.x`` and ``t.y * t.y`` are
    the same operation on two components."""
    return re.sub(r"\.(?:x|y|z|w|r|g|b|a)\b", ".#", _norm(expr))


def packing_proposal(ks: KernelSource, loop: Loop) -> tuple[str, dict[str, Any]]:
    """A packing for the loop's scalar accumulations (pairs with one multiplier, a spare lane
    of a packed accumulator) and what it is made of."""
    ups = half_updates(ks, (loop.start, loop.end + 1))
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
            by_shape.setdefault(component_shape(u.multiplicand), []).append(u)
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
