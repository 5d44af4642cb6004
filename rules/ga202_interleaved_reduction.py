"""GA202 interleaved-reduction: a shared-memory tree reduction with interleaved addressing."""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass

from gpuadvise.rules import (
    Estimate,
    Evidence,
    Finding,
    FindingDetails,
    KernelSource,
    ModelUnavailable,
    ReductionTree,
    Rule,
    RuleContext,
    Variant,
)


def _doubling(step: str, s: str) -> bool:
    e = re.escape(s)
    forms = (
        rf"{e}\s*\*=\s*2[uU]?",
        rf"{e}\s*<<=\s*1[uU]?",
        rf"{e}\s*=\s*{e}\s*\*\s*2[uU]?",
        rf"{e}\s*=\s*2[uU]?\s*\*\s*{e}",
        rf"{e}\s*=\s*{e}\s*<<\s*1[uU]?",
        rf"{e}\s*\+=\s*{e}",
    )
    return any(re.fullmatch(f, step.strip()) for f in forms)


def _two_s(s: str) -> str:
    e = re.escape(s)
    return rf"(?:2[uU]?\s*\*\s*{e}|{e}\s*\*\s*2[uU]?|{e}\s*<<\s*1[uU]?)"


def _tid_group(tids: set[str]) -> str:
    return "(?P<tid>" + "|".join(re.escape(t) for t in sorted(tids, key=len, reverse=True)) + ")"


def _modulo_patterns(s: str, tids: set[str]) -> list[re.Pattern[str]]:
    t, two = _tid_group(tids), _two_s(s)
    e = re.escape(s)
    return [
        re.compile(rf"\(\s*{t}\s*%\s*\(\s*{two}\s*\)\s*\)\s*==\s*0[uU]?"),
        re.compile(rf"(?<![\w.]){t}\s*%\s*\(\s*{two}\s*\)\s*==\s*0[uU]?"),
        re.compile(rf"\(\s*{t}\s*&\s*\(\s*{two}\s*-\s*1\s*\)\s*\)\s*==\s*0[uU]?"),
        re.compile(rf"\(\s*{t}\s*&\s*\(\s*\(\s*{two}\s*\)\s*-\s*1\s*\)\s*\)\s*==\s*0[uU]?"),
        re.compile(rf"(?<![\w.]){t}\s*%\s*\(\s*{e}\s*\+\s*{e}\s*\)\s*==\s*0[uU]?"),
    ]


def _is_strided(expr: str, s: str, tids: set[str]) -> str | None:
    """The thread index if ``expr`` is a product of 2, ``s`` and a thread index."""
    flat = expr.replace("(", " ").replace(")", " ")
    factors = [f.strip() for f in flat.split("*")]
    if len(factors) != 3 or any(not f for f in factors):
        return None
    norm = [f.rstrip("uU") if f[:1].isdigit() else f for f in factors]
    if "2" not in norm or s not in norm:
        return None
    rest = list(norm)
    rest.remove("2")
    rest.remove(s)
    return rest[0] if rest[0] in tids else None


@dataclass(frozen=True)
class _Loop:
    """``for (decl s = 1; s < bound; step)``: offsets in the kernel body."""

    s: str
    bound: str
    decl: str  # the type words before ``s`` (``unsigned ``), or ""
    start: int  # the ``for``
    header_end: int  # just after its ``)``


@dataclass(frozen=True)
class _Match:
    form: str  # "modulo" | "strided-index"
    loop: _Loop
    body_open: int  # offsets in the kernel body
    body_close: int
    span: tuple[int, int]  # the pattern, offsets in the kernel body
    tid: str
    idx: str | None = None


@dataclass(frozen=True)
class Interleaved(FindingDetails):
    """The pattern found: its form and its offsets in the kernel body (``find_interleaved``
    finds it again in the context's source)."""

    form: str
    span: tuple[int, int]


@dataclass(frozen=True)
class InterleavedTree(FindingDetails):
    """A tree the trace shows interleaved where the source parser found no loop to rewrite:
    its form, the warps with an active thread summed over its phases (and the fewest that could
    hold them), and why there is no diff."""

    form: str  # "divergent" (active threads scattered over warps) | "strided-index"
    warp_iterations: int
    min_warp_iterations: int
    why_no_diff: str


def user_line(ctx: RuleContext, lines: tuple[tuple[str | None, int | None], ...]) -> int | None:
    """The first of ``lines`` in the kernel's source file."""
    return next((ln for f, ln in lines if ln is not None and ctx.same_file(f)), None)


def _match_of(ks: KernelSource, finding: Finding) -> _Match:
    d = finding.details_as(Interleaved)
    for mt in find_interleaved(ks):
        if mt.span == d.span and mt.form == d.form:
            return mt
    raise ValueError(f"the {d.form} pattern at {d.span} is no longer in the kernel's source")


def _doubling_loops(ks: KernelSource) -> list[tuple[_Loop, tuple[int, int]]]:
    """The body's loops ``for (s = 1; s < N; <s doubles>)`` and their bodies (file offsets)."""
    base = ks.body_start
    out = []
    for lp in ks.loops():
        if lp.kind != "for" or lp.init is None or lp.condition is None or lp.header is None:
            continue
        init = ks.code[lp.init[0] : lp.init[1]]
        m = re.fullmatch(
            r"(?P<decl>(?:[A-Za-z_]\w*\s+)*?)(?P<s>[A-Za-z_]\w*)\s*=\s*1[uU]?\s*", init
        )
        if m is None:
            continue
        s = m.group("s")
        cond = ks.code[lp.condition[0] : lp.condition[1]]
        c = re.fullmatch(rf"{re.escape(s)}\s*<\s*(?P<bound>[^;]+?)\s*", cond)
        step = ks.code[lp.update[0] : lp.update[1]] if lp.update else ""
        if c is None or not _doubling(step, s):
            continue
        loop = _Loop(s, c.group("bound"), m.group("decl"), lp.span[0] - base, lp.header[1] - base)
        out.append((loop, lp.body))
    return out


def _assignments(
    ks: KernelSource, within: tuple[int, int]
) -> list[tuple[str, str, tuple[int, int]]]:
    """``[type] idx = expr;`` statements within ``within``: (idx, expr, the statement's span)."""
    out = []
    for d in ks.declarations():
        if within[0] <= d.span[0] < within[1] and len(d.declarators) == 1:
            dd = d.declarators[0]
            if dd.init is not None and not dd.dims:
                out.append((dd.name, ks.code[dd.init[0] : dd.init[1]], d.span))
    for st in ks.statements(within):
        m = re.fullmatch(
            r"(?P<idx>[A-Za-z_]\w*)\s*=(?!=)\s*(?P<expr>[^;=]+);", ks.code[st.start : st.end + 1]
        )
        if st.kind == "expression_statement" and m:
            out.append((m.group("idx"), m.group("expr"), (st.start, st.end + 1)))
    return sorted(out, key=lambda x: x[2])


def find_interleaved(ks: KernelSource) -> list[_Match]:
    body = ks.body
    base = ks.body_start
    tids = {"threadIdx.x"} | ks.aliases("threadIdx.x")
    out: list[_Match] = []
    for loop, (b0, b1) in _doubling_loops(ks):
        s = loop.s
        start, end = b0 - base, b1 - 1 - base
        inner = body[start : end + 1]
        for pat in _modulo_patterns(s, tids):
            for m in pat.finditer(inner):
                out.append(
                    _Match(
                        "modulo",
                        loop,
                        start,
                        end,
                        (start + m.start(), start + m.end()),
                        m.group("tid"),
                    )
                )
        for idx, expr, (a, b) in _assignments(ks, (b0, b1)):
            tid = _is_strided(expr, s, tids)
            if tid is not None:
                out.append(
                    _Match("strided-index", loop, start, end, (a - base, b - base), tid, idx)
                )
    uniq: dict[tuple[int, int], _Match] = {}
    for mt in sorted(out, key=lambda x: x.span):
        if not any(a <= mt.span[0] < b for a, b in uniq):
            uniq[mt.span] = mt
    return list(uniq.values())


def _warp_iterations(block: int, form: str) -> tuple[int, int]:
    """Warps with an active lane, summed over the loop's iterations: (this form, sequential)."""
    before = 0
    s = 1
    while s < block:
        if form == "modulo":
            active = range(0, block, 2 * s)
        else:
            active = range(0, math.ceil(block / (2 * s)))
        before += len({t // 32 for t in active})
        s *= 2
    after = 0
    s = block // 2
    while s > 0:
        after += math.ceil(s / 32)
        s //= 2
    return before, after


def _one_line(ks: KernelSource, start: int, end: int) -> bool:
    return ks.line_at(start) == ks.line_at(max(end - 1, start))


def sequential_diff(ks: KernelSource, mt: _Match, path: str) -> str | None:
    """The loop rewritten to sequential addressing (``s`` halving, ``tid < s``), as a diff;
    None when the code is not in the simple shape this rewrite handles."""
    base = ks.body_start
    loop = mt.loop
    s, bound, decl = loop.s, loop.bound, loop.decl
    rw = ks.rewrite()
    p0, p1 = base + mt.span[0], base + mt.span[1]
    if not _one_line(ks, p0, p1):
        return None
    if mt.form == "modulo":
        rw.replace(p0, p1, f"{mt.tid} < {s}")
    else:
        line = ks.line_at(p0)
        l0, l1 = rw.line_span(line)
        rest = ks.code[l0:p0] + ks.code[p1:l1]
        rw.replace(*((l0, l1) if not rest.strip() else (p0, p1)), "")
        # the loop's lines, the statement's excepted: the bounds check, then every use of idx
        lo = rw.line_span(ks.line_at(base + mt.body_open))[0]
        hi = rw.line_span(ks.line_at(base + mt.body_close))[1]
        idx = re.escape(mt.idx or "")
        checks = [
            i.head
            for i in ks.ifs((lo, hi))
            if re.match(rf"{idx}\s*<", ks.code[i.condition[0] : i.condition[1]])
            and _one_line(ks, *i.head)
        ]
        if len(checks) != 1:
            return None
        c0, c1 = checks[0]
        rw.replace(c0, c1, f"if ({mt.tid} < {s})")
        for use in ks.uses(mt.idx or ""):
            a, b = use.span
            if lo <= a < hi and not (p0 <= a < p1) and not (c0 <= a < c1):
                rw.replace(a, b, mt.tid)
    h0, h1 = base + loop.start, base + loop.header_end
    if not _one_line(ks, h0, h1):
        return None
    rw.replace(h0, h1, f"for ({decl}{s} = {bound} / 2; {s} > 0; {s} >>= 1)")
    return rw.diff(path)


class InterleavedReduction(Rule):
    """A shared-memory tree reduction with interleaved addressing (steps #1 and #2 of
    NVIDIA's seven-step reduction).

    What it detects
    ---------------
    In the kernel's source, a loop that doubles its stride (``for (s = 1; s < N; s *= 2)``) and
    picks the active threads or the element by the stride: ``if (tid % (2*s) == 0)`` (divergent
    branching: reduction #1) or ``index = 2*s*tid`` (strided index: reduction #2). ``tid`` is
    ``threadIdx.x`` or a variable assigned from it. Reported at the pattern's line. Whatever the
    spelling (template block sizes, macros, helper accessors, unrolled loops, a 2D block's
    ``ty % power_two``), the emulator's trace shows the tree too (``gpuadvise.model.reduction``):
    a tree whose combined words lie ``2s`` apart while ``s`` doubles is reported at the combine's
    line when the source pattern above is not there, with advice and no diff.

    Why it is slow
    --------------
    With ``tid % (2*s)``, every warp stays busy through every step while fewer and fewer of its
    lanes do work: the branch diverges inside each warp. With ``index = 2*s*tid`` the working
    lanes are packed, but lane ``t`` touches word ``2st``: 2-, 4-, 8-way shared-memory bank
    conflicts (GA201 measures them). Sequential addressing (``s`` halving, ``tid < s``) keeps the
    working lanes packed in as few warps as possible and consecutive lanes on consecutive words.
    On a G80 each step gained 2x; on an H100, where the reduction is bound by the global loads,
    the three versions ran at 815, 750 and 813 GB/s (measured): measure.

    Example
    -------
    ``kernels/reduction/reduce.cu``: ``reduce1`` (``if (tid % (2 * s) == 0)``) and ``reduce2``
    (``unsigned index = 2 * s * tid;``); ``reduce3`` is the sequential version.

    Fix
    ---
    Reverse the loop and index by thread::

        for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
            if (tid < s) sdata[tid] += sdata[tid + s];
            __syncthreads();
        }

    This assumes a power-of-two block size, as the interleaved loop does for a complete result.
    Better still, reduce the last 32 values with warp shuffles (see GA203).

    How the estimate is made
    ------------------------
    No speedup is estimated: the loop is usually a small part of the kernel's time, and how small
    cannot be told without measuring. The estimate's inputs give the loop's own cost, as warps with
    an active lane summed over its iterations, before and after (e.g. 47 and 12 for 256 threads),
    plus GA201's bank-conflict estimate for the strided form.

    Fix safety
    ----------
    Display-only: a diff to sequential addressing. It reorders the additions, which changes
    floating-point results in the last bits, and needs a power-of-two block size.
    """

    id = "GA202"
    name = "interleaved-reduction"
    title = "Interleaved addressing in a shared-memory reduction"
    severity = "warning"
    models = ("source", "trace")
    options = {}

    def detect(self, ctx: RuleContext) -> Iterator[Finding]:
        try:
            ks: KernelSource | None = ctx.kernel_source
        except ModelUnavailable as exc:
            try:
                ctx.trace  # noqa: B018 (the trace alone still finds the trees)
            except ModelUnavailable:
                raise exc from None  # neither the source nor a trace: not evaluated, say why
            ks = None
        matches = find_interleaved(ks) if ks is not None else []
        covered: list[tuple[int, int]] = []
        for mt in matches:
            assert ks is not None
            line = ks.line(mt.span[0])
            covered.append((ks.line(mt.loop.start), ks.line(mt.body_close)))
            s = mt.loop.s
            if mt.form == "modulo":
                what = f"divergent branch `{mt.tid} % (2*{s})` in a loop doubling {s}"
            else:
                what = f"strided index `{mt.idx} = 2*{s}*{mt.tid}` in a loop doubling {s}"
            yield self.finding(
                ctx,
                f"interleaved-addressing reduction: {what}; use sequential addressing "
                f"({s} halving from {mt.loop.bound} / 2, `{mt.tid} < {s}`)",
                line=line,
                evidence=[
                    Evidence("pattern", mt.form),
                    Evidence("loop_line", ks.line(mt.loop.start)),
                ],
                details=Interleaved(mt.form, mt.span),
            )
        seen: set[int | None] = set()
        for tree in ctx.reduction_trees:
            if tree.pattern != "interleaved":
                continue
            at = user_line(ctx, tree.lines)
            if at is not None and any(a <= at <= b for a, b in covered):
                continue  # the source pattern above: reported with its rewrite
            if at in seen:
                continue  # one finding a line (a tree run again in a loop, or per warp)
            seen.add(at)
            yield self._from_trace(ctx, tree, at)

    def _from_trace(self, ctx: RuleContext, tree: ReductionTree, line: int | None) -> Finding:
        wide = [p for p in tree.phases if p.pattern == "interleaved"]
        divergent = any(p.scattered for p in wide)
        form = "divergent" if divergent else "strided-index"
        ds = [p.distance for p in tree.phases]
        steps = ", ".join(f"{p.active_threads} threads in {p.warps} warps" for p in tree.phases[:4])
        if divergent:
            what = (
                "the active threads are scattered over the warps (a divergent branch such as "
                f"`tid % (2*s) == 0`): {steps}, ...; the warps stay busy while fewer lanes work"
            )
        else:
            what = (
                "the active threads are packed but thread t combines word 2*s*t (a strided "
                f"index): shared-memory bank conflicts grow with s ({steps}, ...)"
            )
        before = tree.warp_iterations()
        after = sum(p.min_warps for p in tree.phases)
        why = (
            "the source parser found no `for (s = 1; s < N; s *= 2)` loop picking the threads "
            "by `tid % (2*s)` or `2*s*tid` at this line"
        )
        file = next((f for f, ln in tree.lines if ln == line and f), None)
        return self.finding(
            ctx,
            f"interleaved-addressing reduction seen in the trace: {len(tree.phases)} steps "
            f"combining words {ds[0]}, {ds[1]}, ... apart (doubling); {what}. Use sequential "
            "addressing: halve s from the block size, `tid < s`, `s[tid] += s[tid + s]`",
            line=line,
            file=file if file is not None and not ctx.same_file(file) else None,
            evidence=[
                Evidence("pattern", form),
                Evidence("source", "trace"),
                Evidence("steps", len(tree.phases)),
                Evidence("warp_iterations", before, after, ">", "warps"),
            ],
            details=InterleavedTree(form, before, after, why),
        )

    def _block(self, ctx: RuleContext, bound: str) -> int:
        b = bound.strip()
        if re.fullmatch(r"\d+[uU]?", b):
            return int(b.rstrip("uU"))
        return int(ctx.launch.block.x)

    def estimate(self, ctx: RuleContext, finding: Finding) -> Estimate:
        if isinstance(finding.details, InterleavedTree):
            d = finding.details
            return Estimate(
                None,
                "none",
                "not estimated: the loop's share of the kernel's time is unknown without "
                f"measuring. In the trace the tree runs {d.warp_iterations} warp-iterations with "
                f"an active lane, {d.min_warp_iterations} with its active threads packed",
                {
                    "warp_iterations_before": d.warp_iterations,
                    "warp_iterations_after": d.min_warp_iterations,
                },
            )
        mt = _match_of(ctx.kernel_source, finding)
        block = self._block(ctx, mt.loop.bound)
        before, after = _warp_iterations(block, mt.form)
        return Estimate(
            None,
            "none",
            f"not estimated: the loop's share of the kernel's time is unknown without measuring. "
            f"The loop itself runs {before} warp-iterations with an active lane for a block of "
            f"{block}, {after} with sequential addressing. On an H100 the whole reduction "
            "gained nothing from this change (measured)",
            {"block": block, "warp_iterations_before": before, "warp_iterations_after": after},
        )

    def transform(self, ctx: RuleContext, finding: Finding) -> Variant:
        if isinstance(finding.details, InterleavedTree):
            return Variant(
                "display-only",
                "sequential addressing: halve the stride from the block size, `tid < s` picks "
                "the threads, consecutive threads add consecutive words (no diff: "
                f"{finding.details.why_no_diff})",
            )
        ks = ctx.kernel_source
        mt = _match_of(ks, finding)
        diff = sequential_diff(ks, mt, ctx.source_file)
        return Variant(
            "display-only",
            "sequential addressing: halve the stride from the block size, `tid < s` picks the "
            "threads, consecutive threads add consecutive words (power-of-two block size)",
            diff=diff,
        )
