"""GA202 interleaved-reduction: a shared-memory tree reduction with interleaved addressing."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from gpuadvise.rules import (
    Estimate,
    Evidence,
    Finding,
    KernelSource,
    Rule,
    RuleContext,
    Variant,
    line_of,
    match_brace,
    unified_diff,
)

_DECL = r"(?:(?:unsigned|signed|int|long|short|size_t|uint32_t|int32_t|uint64_t|auto|const)\s+)*"
_LOOP = re.compile(
    r"\bfor\s*\(\s*(?P<decl>" + _DECL + r")(?P<s>[A-Za-z_]\w*)\s*=\s*1[uU]?\s*;"
    r"\s*(?P=s)\s*<\s*(?P<bound>[^;]+?)\s*;\s*(?P<step>[^;)]*?)\s*\)"
)
_TID_ALIAS = re.compile(r"\b([A-Za-z_]\w*)\s*=\s*threadIdx\.x\s*;")


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


_ASSIGN = re.compile(r"(?P<decl>" + _DECL + r")\b(?P<idx>[A-Za-z_]\w*)\s*=\s*(?P<expr>[^;=]+);")


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
class _Match:
    form: str  # "modulo" | "strided-index"
    loop: re.Match[str]
    body_open: int  # offsets in the kernel body
    body_close: int
    span: tuple[int, int]  # the pattern, offsets in the kernel body
    tid: str
    idx: str | None = None


def _loop_body(body: str, after: int) -> tuple[int, int]:
    k = after
    while k < len(body) and body[k].isspace():
        k += 1
    if k < len(body) and body[k] == "{":
        return k, match_brace(body, k)
    semi = body.find(";", k)
    brace = body.find("{", k)
    if brace != -1 and (semi == -1 or brace < semi):
        return k, match_brace(body, brace)
    return k, semi if semi != -1 else len(body)


def find_interleaved(ks: KernelSource) -> list[_Match]:
    body = ks.body
    tids = {"threadIdx.x"} | set(_TID_ALIAS.findall(body))
    out: list[_Match] = []
    for loop in _LOOP.finditer(body):
        s = loop.group("s")
        if not _doubling(loop.group("step"), s):
            continue
        start, end = _loop_body(body, loop.end())
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
        for m in _ASSIGN.finditer(inner):
            tid = _is_strided(m.group("expr"), s, tids)
            if tid is not None:
                out.append(
                    _Match(
                        "strided-index",
                        loop,
                        start,
                        end,
                        (start + m.start(), start + m.end()),
                        tid,
                        m.group("idx"),
                    )
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


class _Editor:
    """Edits of a file's lines, found in the comment-free code and applied to the text alike
    (blanking keeps every offset, so a span in the code is the same span in the text)."""

    def __init__(self, ks: KernelSource) -> None:
        self.ks = ks
        self.text = ks.text.split("\n")
        self.code = ks.code.split("\n")
        self.deleted: set[int] = set()

    def sub(self, line: int, pattern: str, repl: Callable[[re.Match[str]], str]) -> int:
        i = line - 1
        code, text = self.code[i], self.text[i]
        matches = list(re.finditer(pattern, code))
        for m in reversed(matches):
            new = repl(m)
            code = code[: m.start()] + new + code[m.end() :]
            text = text[: m.start()] + new + text[m.end() :]
        self.code[i], self.text[i] = code, text
        return len(matches)

    def splice(self, start: int, end: int, new: str) -> bool:
        """Replace file offsets ``start:end`` (on one line, not edited before) by ``new``."""
        line = line_of(self.ks.text, start)
        if line != line_of(self.ks.text, max(end - 1, start)):
            return False
        col = start - (self.ks.text.rfind("\n", 0, start) + 1)
        i = line - 1
        n = end - start
        self.code[i] = self.code[i][:col] + new + self.code[i][col + n :]
        self.text[i] = self.text[i][:col] + new + self.text[i][col + n :]
        return True

    def delete_if_blank(self, line: int) -> None:
        if not self.code[line - 1].strip():
            self.deleted.add(line - 1)

    def lines(self) -> list[str]:
        return [t for i, t in enumerate(self.text) if i not in self.deleted]


def sequential_diff(ks: KernelSource, mt: _Match, path: str) -> str | None:
    """The loop rewritten to sequential addressing (``s`` halving, ``tid < s``), as a diff;
    None when the code is not in the simple shape this rewrite handles."""
    base = ks.body_start
    loop = mt.loop
    s, bound, decl = loop.group("s"), loop.group("bound"), loop.group("decl")
    ed = _Editor(ks)
    first = line_of(ks.text, base + mt.body_open)
    last = line_of(ks.text, base + mt.body_close)
    # edits right to left on a line keep the earlier offsets valid: the pattern first
    if mt.form == "modulo":
        if not ed.splice(base + mt.span[0], base + mt.span[1], f"{mt.tid} < {s}"):
            return None
    else:
        idx = re.escape(mt.idx or "")
        stmt_line = line_of(ks.text, base + mt.span[0])
        if not ed.splice(base + mt.span[0], base + mt.span[1], ""):
            return None
        ed.delete_if_blank(stmt_line)
        bounds_check = rf"\bif\s*\(\s*{idx}\s*<\s*[^()]*(?:\([^()]*\)[^()]*)*\)"
        checks = 0
        for ln in range(first, last + 1):
            checks += ed.sub(ln, bounds_check, lambda m: f"if ({mt.tid} < {s})")
            ed.sub(ln, rf"\b{idx}\b", lambda m: mt.tid)
        if checks != 1:
            return None
    header = f"for ({decl}{s} = {bound} / 2; {s} > 0; {s} >>= 1)"
    if not ed.splice(base + loop.start(), base + loop.end(), header):
        return None
    return unified_diff(ks.text.split("\n"), ed.lines(), path)


class InterleavedReduction(Rule):
    """A shared-memory tree reduction with interleaved addressing (seed 003's reductions 1 and 2).

    What it detects
    ---------------
    In the kernel's source, a loop that doubles its stride (``for (s = 1; s < N; s *= 2)``) and
    picks the active threads or the element by the stride: ``if (tid % (2*s) == 0)`` (divergent
    branching: reduction #1) or ``index = 2*s*tid`` (strided index: reduction #2). ``tid`` is
    ``threadIdx.x`` or a variable assigned from it. Reported at the pattern's line.

    Why it is slow
    --------------
    With ``tid % (2*s)``, every warp stays busy through every step while fewer and fewer of its
    lanes do work: the branch diverges inside each warp. With ``index = 2*s*tid`` the working
    lanes are packed, but lane ``t`` touches word ``2st``: 2-, 4-, 8-way shared-memory bank
    conflicts (GA201 measures them). Sequential addressing (``s`` halving, ``tid < s``) keeps the
    working lanes packed in as few warps as possible and consecutive lanes on consecutive words.
    On a G80 each step gained 2x; on an H100, where the reduction is bound by the global loads,
    the three versions ran at 815, 750 and 813 GB/s (HARDWARE.md section 4): measure.

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
    models = ("source",)
    options = {}

    def detect(self, ctx: RuleContext) -> Iterator[Finding]:
        ks = ctx.kernel_source
        for mt in find_interleaved(ks):
            line = ks.line(mt.span[0])
            s = mt.loop.group("s")
            if mt.form == "modulo":
                what = f"divergent branch `{mt.tid} % (2*{s})` in a loop doubling {s}"
            else:
                what = f"strided index `{mt.idx} = 2*{s}*{mt.tid}` in a loop doubling {s}"
            yield self.finding(
                ctx,
                f"interleaved-addressing reduction: {what}; use sequential addressing "
                f"({s} halving from {mt.loop.group('bound')} / 2, `{mt.tid} < {s}`)",
                line=line,
                evidence=[
                    Evidence("pattern", mt.form),
                    Evidence("loop_line", ks.line(mt.loop.start())),
                ],
                details={"match": mt},
            )

    def _block(self, ctx: RuleContext, bound: str) -> int:
        b = bound.strip()
        if re.fullmatch(r"\d+[uU]?", b):
            return int(b.rstrip("uU"))
        return int(ctx.launch.block.x)

    def estimate(self, ctx: RuleContext, finding: Finding) -> Estimate:
        mt: _Match = finding.details["match"]
        block = self._block(ctx, mt.loop.group("bound"))
        before, after = _warp_iterations(block, mt.form)
        return Estimate(
            None,
            "none",
            f"not estimated: the loop's share of the kernel's time is unknown without measuring. "
            f"The loop itself runs {before} warp-iterations with an active lane for a block of "
            f"{block}, {after} with sequential addressing. On an H100 the whole seed-003 kernel "
            "gained nothing from this change (HARDWARE.md section 4)",
            {"block": block, "warp_iterations_before": before, "warp_iterations_after": after},
        )

    def transform(self, ctx: RuleContext, finding: Finding) -> Variant:
        mt: _Match = finding.details["match"]
        ks = ctx.kernel_source
        diff = sequential_diff(ks, mt, ctx.source_file)
        return Variant(
            "display-only",
            "sequential addressing: halve the stride from the block size, `tid < s` picks the "
            "threads, consecutive threads add consecutive words (power-of-two block size)",
            diff=diff,
        )
