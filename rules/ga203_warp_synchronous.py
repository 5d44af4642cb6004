"""GA203 warp-synchronous: an unrolled last-warp reduction through a volatile shared pointer."""

from __future__ import annotations

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
    line_of,
)

_GUARD = re.compile(r"(?P<tid>[A-Za-z_][\w.]*)\s*(?:<\s*(?:32|warpSize)|<=\s*31)")
# what a volatile pointer is set to: `sdata`, `&sdata[0]`, `(volatile int*)sdata`
_POINTEE = re.compile(r"(?:\(\s*volatile[^)]*\)\s*)?&?\s*(?P<arr>[A-Za-z_]\w*)(?:\s*\[\s*0\s*\])?")


@dataclass(frozen=True)
class _Step:
    start: int  # offsets in the region's code
    end: int
    offset: int  # the k of name[tid + k]
    simple: bool  # exactly `name[tid] += name[tid + k];`


@dataclass(frozen=True)
class _Race:
    name: str
    arr: str
    type: str
    tid: str
    steps: tuple[_Step, ...]
    decl: tuple[int, int] | None  # the volatile pointer's declaration (region offsets)
    guard: tuple[int, int] | None  # the `if (tid < 32) {` ... `}` block (region offsets)
    region_start: int  # offset of the region in the file


@dataclass(frozen=True)
class RaceAt(FindingDetails):
    """The racing volatile pointer and where its region starts in the file (``find_races``
    finds the race again in the context's source)."""

    name: str
    region_start: int


@dataclass(frozen=True)
class TailRace(FindingDetails):
    """A warp-synchronous tail the trace shows where the source parser found no volatile steps:
    the distances of its steps and the most threads one of them runs."""

    distances: tuple[int, ...]
    threads: int


def _trace_tails(ctx: RuleContext) -> list[ReductionTree]:
    """The trees whose last steps run with no barrier between them, in a kernel that never
    synchronizes its warps (``bar.warp.sync``: ``__syncwarp``, a tile's ``sync()``)."""
    trees = ctx.reduction_trees
    if ctx.syncs_warps:
        return []
    return [
        t
        for t in trees
        if t.warp_synchronous_tail
        and all(t.segment_threads(p) <= 32 for p in t.warp_synchronous_tail)
        and min(p.distance for p in t.warp_synchronous_tail) < 32
    ]


def _race_of(ks: KernelSource, finding: Finding) -> _Race:
    d = finding.details_as(RaceAt)
    for race in find_races(ks):
        if race.name == d.name and race.region_start == d.region_start:
            return race
    raise ValueError(f"the race through `{d.name}` is no longer in the kernel's source")


def _steps(ks: KernelSource, name: str, tids: set[str]) -> list[tuple[str, _Step]]:
    """The statements ``name[tid] op= ... name[tid + k] ...;`` of the body, in order."""
    base = ks.body_start
    t = "|".join(re.escape(x) for x in sorted(tids, key=len, reverse=True))
    out = []
    for st in ks.statements():
        subs = ks.subscripts(name, within=(st.start, st.end))
        if st.kind != "expression_statement" or not subs or subs[0].span[0] != st.start:
            continue
        lhs = subs[0]
        rest = ks.code[lhs.span[1] : st.end]
        op = re.match(r"\s*(?P<op>[-+*|&^]?=)(?!=)", rest)
        if len(lhs.indices) != 1 or op is None:
            continue
        tid = re.fullmatch(rf"\s*({t})\s*", ks.code[slice(*lhs.indices[0])])
        if tid is None:
            continue
        e = re.escape(tid.group(1))
        ks_ = [
            (r, k)
            for r in subs[1:]
            if len(r.indices) == 1
            and (k := re.fullmatch(rf"\s*{e}\s*\+\s*(\d+)[uU]?\s*", ks.code[slice(*r.indices[0])]))
        ]
        if not ks_:
            continue
        first, k = ks_[0]
        rhs = ks.code[lhs.span[1] + op.end() : st.end].strip()
        simple = op.group("op") == "+=" and rhs == ks.code[first.span[0] : first.span[1]].strip()
        simple = simple and len(subs) == 2
        step = _Step(st.start - base, st.end + 1 - base, int(k.group(1)), simple)
        out.append((tid.group(1), step))
    return out


def find_races(ks: KernelSource) -> list[_Race]:
    code = ks.body
    base = ks.body_start
    tids = {"threadIdx.x"} | ks.aliases("threadIdx.x")
    names: list[tuple[str, str, str, tuple[int, int] | None]] = []
    for d in ks.declarations():  # `volatile int* vs = sdata;`
        if not d.has("volatile") or d.has("__shared__") or len(d.declarators) != 1:
            continue
        dd = d.declarators[0]
        m = _POINTEE.fullmatch(ks.code[slice(*dd.init)].strip()) if dd.init else None
        if dd.pointer and m:
            names.append((dd.name, m.group("arr"), d.type, (d.span[0] - base, d.span[1] - base)))
    # a volatile __shared__ array may be declared in the body or at file scope
    for d in ks.declarations(file=True):
        if d.has("volatile") and d.has("__shared__"):
            names += [(dd.name, dd.name, d.type, None) for dd in d.declarators if dd.dims]
    races = []
    for name, arr, typ, decl in names:
        steps = _steps(ks, name, tids)
        if len(steps) < 2 or not any(st.offset < 32 for _, st in steps):
            continue
        first, last = steps[0][1], steps[-1][1]
        if "__syncwarp" in code[first.start : last.end]:
            continue
        guard = None
        for g in ks.ifs((base, base + first.start)):
            if g.braced and _GUARD.fullmatch(ks.code[slice(*g.condition)].strip()):
                if g.consequence[1] - 1 - base > last.end:
                    guard = (g.head[0] - base, g.consequence[1] - base)
        races.append(
            _Race(
                name,
                arr,
                " ".join(typ.split()),
                steps[0][0],
                tuple(st for _, st in steps),
                decl,
                guard,
                ks.body_start,
            )
        )
    return races


def shuffle_diff(ks: KernelSource, race: _Race, path: str) -> str | None:
    """The unrolled steps replaced by warp shuffles, as a diff (straight-line code only)."""
    steps = race.steps
    offs = [st.offset for st in steps]
    if not all(st.simple for st in steps) or offs[-1] != 1:
        return None
    if any(a != 2 * b for a, b in zip(offs, offs[1:], strict=False)):
        return None
    base = race.region_start
    text = ks.text.split("\n")
    lines = [line_of(ks.text, base + st.start) for st in steps]
    if lines != list(range(lines[0], lines[0] + len(lines))):
        return None
    for ln, st in zip(lines, steps, strict=True):
        code_line = ks.code.split("\n")[ln - 1]
        stmt = ks.code[base + st.start : base + st.end]
        if code_line.strip() != stmt.strip():
            return None
    indent = re.match(r"\s*", text[lines[0] - 1]).group(0)  # type: ignore[union-attr]
    tid, arr, typ = race.tid, race.arr, race.type or "int"
    body = ks.body
    v = next(n for n in ("sum", "acc", "warp_sum", "sum_") if not re.search(rf"\b{n}\b", body))
    first = offs[0]
    if first == 32:
        init = f"{indent}{typ} {v} = {arr}[{tid}] + {arr}[{tid} + 32];"
        start_off = 16
    else:
        init = f"{indent}{typ} {v} = {arr}[{tid}];"
        start_off = first
    new = [
        init,
        f"{indent}for (int offset = {start_off}; offset > 0; offset >>= 1)",
        f"{indent}    {v} += __shfl_down_sync(0xffffffffu, {v}, offset);",
        f"{indent}if ({tid} == 0) {arr}[0] = {v};",
    ]
    rw = ks.rewrite()
    rw.replace_lines(lines[0], lines[-1], new)
    if race.decl is not None:
        dl = line_of(ks.text, base + race.decl[0])
        code_line = ks.code.split("\n")[dl - 1]
        if (
            dl < lines[0]
            and code_line.strip() == ks.code[base + race.decl[0] : base + race.decl[1]]
        ):
            rw.delete_lines(dl)
    return rw.diff(path)


class WarpSynchronous(Rule):
    """Implicit warp-synchronous code: a last-warp reduction through a volatile shared pointer.

    What it detects
    ---------------
    In the kernel's source, a ``volatile`` pointer to shared memory (``volatile int* vs = sdata;``,
    or a ``volatile __shared__`` array) used in two or more unrolled steps
    ``vs[tid] += vs[tid + k]`` with ``k`` below 32 and no ``__syncwarp()`` between them: the "unroll
    the last warp" idiom of step #5 of NVIDIA's seven-step reduction, usually under
    ``if (tid < 32)``. Reported at the first step. Whatever the spelling (a template block size,
    other names, a loop the compiler unrolled), the emulator's trace shows the same thing
    (``gpuadvise.model.reduction``): two or more steps of a shared-memory tree after its last
    barrier, each by at most 32 threads, in a kernel with no ``__syncwarp`` (``bar.warp.sync``);
    reported at the first of them when the source pattern is not found, with advice and no diff.

    Why it is slow
    --------------
    It is a race, not (only) a slowdown. The idiom assumes the 32 threads of a warp execute each
    statement in lockstep, so that lane ``t`` reads ``vs[t + 16]`` before lane ``t + 16`` writes
    it. Since Volta, threads of a warp are scheduled independently (independent thread
    scheduling): nothing orders one lane's read against another lane's write, and the result can
    be wrong. ``volatile`` only stops the compiler from caching the values in registers; it orders
    nothing between lanes. The ``volatile`` accesses also cost a shared-memory round trip per step.

    Example
    -------
    ``kernels/reduction/reduce.cu``, ``reduce5``: ``if (tid < 32) { volatile int* vs = sdata;
    vs[tid] += vs[tid + 32]; vs[tid] += vs[tid + 16]; ... }``. ``reduce6`` does the same with
    ``__shfl_down_sync``.

    Fix
    ---
    Reduce the last 64 values in registers with warp shuffles, which exchange values between the
    lanes named in the mask with the synchronization built in::

        if (tid < 32) {
            int v = sdata[tid] + sdata[tid + 32];
            for (int offset = 16; offset > 0; offset >>= 1)
                v += __shfl_down_sync(0xffffffffu, v, offset);
            if (tid == 0) sdata[0] = v;
        }

    Or keep shared memory and separate every read from the following write with ``__syncwarp()``.
    Compile with ``-arch=sm_70`` or later and check with ``compute-sanitizer --tool racecheck``.

    How the estimate is made
    ------------------------
    No speedup is estimated: this is a correctness fix. Shuffles replace six shared-memory
    round trips by register exchanges and are usually at least as fast (on an H100 the reduction
    with shuffles and vector loads ran at 2640 GB/s against 1583 GB/s for the unrolled last warp,
    measured, where vector loads also changed).

    Fix safety
    ----------
    Display-only: a diff replacing the unrolled steps by ``__shfl_down_sync`` (shown only when the
    steps are the plain straight-line ``vs[tid] += vs[tid + k];`` with ``k`` halving to 1). The
    shuffle version writes only ``sdata[0]``, so code that reads other ``sdata`` entries after the
    steps must be checked by hand.
    """

    id = "GA203"
    name = "warp-synchronous"
    title = "Implicit warp-synchronous code (a race since Volta)"
    severity = "error"
    models = ("source", "trace")
    options = {}

    def detect(self, ctx: RuleContext) -> Iterator[Finding]:
        found = list(self._from_source(ctx))
        yield from found
        if found:
            return
        for tree in _trace_tails(ctx):
            tail = tree.warp_synchronous_tail
            line, helper = ctx.call_site(tail[0])
            threads = max(tree.segment_threads(p) for p in tail)
            offs = ", ".join(str(p.distance) for p in tail)
            lockstep = "lanes of a warp race on Volta and later"
            where = f" (in the helper function at line {helper}, called here)" if helper else ""
            yield self.finding(
                ctx,
                f"implicit warp-synchronous reduction seen in the trace{where}: {len(tail)} "
                f"steps (offsets {offs}) by up to {threads} threads"
                + (f" in each of {tree.segments} warps" if tree.per_warp else "")
                + " with no barrier and no "
                f"__syncwarp() between them: {lockstep}; use __shfl_down_sync (GA205)",
                line=line,
                evidence=[
                    Evidence("unrolled_steps", len(tail), 2, ">="),
                    Evidence("syncwarp_calls", 0, 0, "=="),
                    Evidence("tail_threads", threads, unit="threads"),
                    Evidence("arch", ctx.device.arch),
                    Evidence("source", "trace"),
                    *([Evidence("helper_line", helper)] if helper else []),
                ],
                details=TailRace(tuple(p.distance for p in tail), threads),
            )

    def _from_source(self, ctx: RuleContext) -> Iterator[Finding]:
        try:
            ks = ctx.kernel_source
        except ModelUnavailable:
            return
        for race in find_races(ks):
            line = line_of(ks.text, race.region_start + race.steps[0].start)
            offs = ", ".join(str(s.offset) for s in race.steps)
            guard = "under `if (tid < 32)`" if race.guard else "without a lane guard"
            yield self.finding(
                ctx,
                f"implicit warp-synchronous reduction through volatile `{race.name}` "
                f"({len(race.steps)} unrolled steps, offsets {offs}, {guard}) with no "
                "__syncwarp(): lanes of a warp race on Volta and later; use __shfl_down_sync",
                line=line,
                evidence=[
                    Evidence("unrolled_steps", len(race.steps), 2, ">="),
                    Evidence("syncwarp_calls", 0, 0, "=="),
                    Evidence("arch", ctx.device.arch),
                ],
                details=RaceAt(race.name, race.region_start),
            )

    def estimate(self, ctx: RuleContext, finding: Finding) -> Estimate:
        return Estimate(
            None,
            "none",
            "not estimated: a correctness fix (a data race between lanes since Volta); shuffles "
            "are usually at least as fast as the volatile shared-memory steps",
        )

    def transform(self, ctx: RuleContext, finding: Finding) -> Variant:
        if isinstance(finding.details, TailRace):
            return Variant(
                "display-only",
                "reduce the last warp with __shfl_down_sync (or put __syncwarp() between every "
                "read and write of the steps); no diff: the source parser found no volatile "
                "`vs[tid] += vs[tid + k]` steps to replace",
            )
        ks = ctx.kernel_source
        diff = shuffle_diff(ks, _race_of(ks, finding), ctx.source_file)
        return Variant(
            "display-only",
            "reduce the last warp with __shfl_down_sync (or put __syncwarp() between every read "
            "and write of the volatile steps)",
            diff=diff,
        )
