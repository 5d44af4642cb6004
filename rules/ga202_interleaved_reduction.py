"""GA202 interleaved-reduction: a shared-memory tree reduction with interleaved addressing."""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass

from gpuadvise.rules import (
    Estimate,
    Evidence,
    Expr,
    Finding,
    FindingDetails,
    KernelSource,
    ModelUnavailable,
    ReductionTree,
    Rule,
    RuleContext,
    Variant,
)
from gpuadvise.source.fixkit_trees import (
    StrideLoop,
    bounds_checks,
    doubling_bound,
    halve_loop,
    interleaved_guard,
    literal_value,
    remove_declarator,
    remove_statement,
    rename_uses,
    stride_loop,
    strided_product,
)


@dataclass(frozen=True)
class _Loop:
    """``for ([type] s = 1; s < bound; <s doubles>)``: offsets in the kernel body."""

    s: str
    bound: str
    start: int  # the ``for``
    bound_value: int | None = None  # the bound when it is a literal


@dataclass(frozen=True)
class _Match:
    form: str  # "modulo" | "strided-index"
    loop: _Loop
    body_close: int  # offsets in the kernel body
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


def _doubling_loops(ks: KernelSource) -> list[tuple[_Loop, StrideLoop, Expr]]:
    """The body's loops ``for (s = 1; s < N; <s doubles>)``, their reading and ``N``."""
    out = []
    for lp in ks.loops():
        sl = stride_loop(ks.tree, lp)
        bound = doubling_bound(ks.tree, sl) if sl is not None else None
        if sl is not None and bound is not None:
            text = ks.code[bound.span[0] : bound.span[1]]
            loop = _Loop(sl.s, text, lp.span[0] - ks.body_start, literal_value(bound))
            out.append((loop, sl, bound))
    return out


def _assignments(
    ks: KernelSource, within: tuple[int, int]
) -> list[tuple[str, Expr, tuple[int, int]]]:
    """``[type] idx = expr`` declarators (one of several too) and ``idx = expr;`` statements
    within ``within``: (idx, expr, the declarator's or the statement's span)."""
    out = []
    for d in ks.declarations(within=within):
        for dd in d.declarators:
            e = ks.expr(dd.init) if dd.init is not None and not dd.dims else None
            if e is not None:
                out.append((dd.name, e, d.span if len(d.declarators) == 1 else dd.span))
    for st in ks.statements(within):
        e = ks.expr((st.start, st.end)) if st.kind == "expression_statement" else None
        if e is not None and e.kind == "assignment" and e.op == "=" and e.args[0].kind == "name":
            out.append((e.args[0].text, e.args[1], (st.start, st.end + 1)))
    return sorted(out, key=lambda x: x[2])


def find_interleaved(ks: KernelSource) -> list[_Match]:
    base = ks.body_start
    tids = {"threadIdx.x"} | ks.aliases("threadIdx.x")
    out: list[_Match] = []
    for loop, sl, _ in _doubling_loops(ks):
        s = loop.s
        b0, b1 = sl.loop.body
        end = b1 - 1 - base
        for n in ks.tree.walk(types=("binary_expression",), within=(b0, b1)):
            e = ks.expr(ks.tree.span(n))
            tid = interleaved_guard(e, s, tids) if e is not None else None
            if e is not None and tid is not None:
                span = (e.span[0] - base, e.span[1] - base)
                out.append(_Match("modulo", loop, end, span, tid))
        for idx, expr, (a, b) in _assignments(ks, (b0, b1)):
            tid = strided_product(expr, s, tids)
            if tid is not None:
                span = (a - base, b - base)
                out.append(_Match("strided-index", loop, end, span, tid, idx))
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


def sequential_diff(ks: KernelSource, mt: _Match, path: str) -> str | None:
    """The loop rewritten to sequential addressing (``s`` halving, ``tid < s``), as a diff;
    None when the strided form's index has not exactly one bounds check in the loop."""
    base = ks.body_start
    sl, bound = next(((sl, b) for lp, sl, b in _doubling_loops(ks) if lp == mt.loop), (None, None))
    if sl is None or bound is None:
        return None
    s, tid = mt.loop.s, mt.tid
    rw = ks.rewrite()
    p0, p1 = base + mt.span[0], base + mt.span[1]
    if mt.form == "modulo":
        rw.replace(p0, p1, f"{tid} < {s}")
    else:
        idx = mt.idx or ""
        decl = next((d for d in ks.declarations() if d.span[0] <= p0 < d.span[1]), None)
        dd = next((x for x in decl.declarators if x.name == idx), None) if decl else None
        if decl is not None and dd is not None:
            remove_declarator(rw, decl, dd)
        else:
            remove_statement(rw, (p0, p1))
        # the bounds check `if (idx < N)` becomes `if (tid < s)`, every other use of idx tid
        checks = bounds_checks(ks.tree, idx, sl.loop.body)
        if len(checks) != 1:
            return None
        rw.replace(*checks[0], f"{tid} < {s}")
        rename_uses(ks.tree, rw, idx, tid, sl.loop.body, skip=[(p0, p1), checks[0]])
    halve_loop(ks.tree, rw, sl, bound)
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
    line when the source pattern above is not there, with advice and no diff. A tree folding
    towards its highest word (``s[t] += s[t - s]`` by the threads with ``(t+1) % (2s) == 0``,
    Rodinia SRAD's statistics) is one too, unless an exchange of words follows its last step:
    then it is the up-sweep of a Blelloch scan (GA209's).

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
    plus GA201's bank-conflict estimate for the strided form. The variant's own trace (issue 29) was
    tried and left out: on an H200 (2026-11-30) reduce1 measured 1.94x for 1.51x on the model,
    reduce2 1.26x for 1.01x and lum_interleaved 1.16x for 1.02x, the trees' bank conflicts and
    divergent steps on each CTA's critical path being mostly outside the launch model, so a real win
    would become a note.

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
            sites = [ln for p in tree.phases for f, ln in (*p.lines, *p.call_sites)]
            if any(ln is not None and a <= ln <= b for ln in sites for a, b in covered):
                continue  # the source pattern above (its combine maybe in a helper)
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
        if tree.mirrored:
            what += (
                "; it folds towards its highest word (`s[t] += s[t - d]`, Rodinia's "
                "`(tx+1) % i == 0`), so after the change the result is in word 0"
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

    def _block(self, ctx: RuleContext, bound: int | None) -> int:
        return bound if bound is not None else int(ctx.launch.block.x)

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
        block = self._block(ctx, mt.loop.bound_value)
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
