"""GA203 warp-synchronous: an unrolled last-warp reduction through a volatile shared pointer."""

from __future__ import annotations

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
    line_of,
)
from gpuadvise.source.fixkit import comments_within
from gpuadvise.source.fixkit_trees import (
    first_warp_guard,
    is_thread,
    literal_value,
    pointee,
    remove_declarator,
    replace_statements,
    shuffle_lines,
)

_OPS = ("=", "+=", "-=", "*=", "|=", "&=", "^=")


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


def _offset(e: Expr, tid: str) -> int | None:
    """The ``k`` of an index ``tid + k`` (None: another index)."""
    e = e.stripped()
    if e.kind != "binary" or e.op != "+" or "".join(e.args[0].stripped().text.split()) != tid:
        return None
    return literal_value(e.args[1])


def _steps(ks: KernelSource, name: str, tids: set[str]) -> list[tuple[str, _Step]]:
    """The statements ``name[tid] op= ... name[tid + k] ...;`` of the body, in order."""
    base = ks.body_start
    out = []
    for st in ks.statements():
        subs = ks.subscripts(name, within=(st.start, st.end))
        e = ks.expr((st.start, st.end)) if st.kind == "expression_statement" else None
        if e is None or e.kind != "assignment" or not subs or subs[0].span[0] != st.start:
            continue
        lhs = e.args[0]
        if lhs.kind != "subscript" or len(lhs.args) != 2 or e.op not in _OPS:
            continue
        tid = is_thread(lhs.args[1], tids)
        if tid is None or len(subs[0].indices) != 1:
            continue
        offs = [
            (r, k)
            for r in subs[1:]
            if len(r.indices) == 1
            and (ix := ks.expr(r.indices[0])) is not None
            and (k := _offset(ix, tid)) is not None
        ]
        if not offs:
            continue
        first, k = offs[0]
        rhs = e.args[1].stripped()
        simple = e.op == "+=" and rhs.span == first.span and len(subs) == 2
        out.append((tid, _Step(st.start - base, st.end + 1 - base, k, simple)))
    return out


def find_races(ks: KernelSource) -> list[_Race]:
    code = ks.body
    base = ks.body_start
    tids = {"threadIdx.x"} | ks.aliases("threadIdx.x")
    names: list[tuple[str, str, str, tuple[int, int] | None]] = []
    for d in ks.declarations():  # `volatile int* vs = sdata;`
        if not d.has("volatile") or d.has("__shared__"):
            continue
        for dd in d.declarators:
            e = ks.expr(dd.init) if dd.init else None
            arr = pointee(e) if e is not None else None
            if dd.pointer and arr:
                names.append((dd.name, arr, d.type, (d.span[0] - base, d.span[1] - base)))
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
            c = ks.expr(g.condition)
            if g.braced and c is not None and first_warp_guard(c) is not None:
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
    """The unrolled steps replaced by warp shuffles, as a diff (straight-line code only: no
    other statement among the steps)."""
    steps = race.steps
    offs = [st.offset for st in steps]
    if not all(st.simple for st in steps) or offs[-1] != 1:
        return None
    if any(a != 2 * b for a, b in zip(offs, offs[1:], strict=False)):
        return None
    base = race.region_start
    span = (base + steps[0].start, base + steps[-1].end)
    if len(ks.statements(span)) != len(steps):
        return None
    tid, arr, typ = race.tid, race.arr, race.type or "int"
    taken = {n for n, _ in ks.identifiers(ks.span)}
    v = next(n for n in ("sum", "acc", "warp_sum", "sum_", "sum__") if n not in taken)
    first = offs[0]
    lines = [
        *comments_within(ks.tree, span),
        *shuffle_lines(tid, arr, typ, v, 16 if first == 32 else first, add_32=first == 32),
    ]
    rw = ks.rewrite()
    replace_statements(rw, span, lines)
    if race.decl is not None:  # the volatile pointer, when nothing else uses it
        d0 = base + race.decl[0]
        decl = next((d for d in ks.declarations() if d.span[0] == d0), None)
        dd = next((x for x in decl.declarators if x.name == race.name), None) if decl else None
        rest = [u for u in ks.uses(race.name) if not span[0] <= u.span[0] < span[1]]
        if decl is not None and dd is not None and all(u.declared for u in rest):
            remove_declarator(rw, decl, dd)
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
    This is a correctness fix first. Shuffles replace six shared-memory round trips by register
    exchanges and are usually at least as fast (on an H100 the reduction with shuffles and vector
    loads ran at 2640 GB/s against 1583 GB/s for the unrolled last warp, measured, where vector
    loads also changed). The point comes from the variant's own trace (``point_from_variant_trace``,
    issue 29): analyze builds the variant, traces it on the emulator as it traced the kernel and
    runs both traces through the launch model; a variant the model finds slower is not recommended
    unless a GPU measures it faster. On an H200 (2026-11-30) the shuffle tails of kernels/reduction
    reduce5 and luminance's lum_unrolled measured 1.00x and 1.01x, the model 0.96x and 0.95x: the
    finding stays an error (the race), with no speedup promised.

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
    point_from_variant_trace = True
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
