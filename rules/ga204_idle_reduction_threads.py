"""GA204 idle-reduction-threads: a tree reduction whose threads each load one element."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

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
    buffer_uses,
    grid_bound,
    launch_specific,
    reduction_diff,
)

_THREADIDX = re.compile(r"\bthreadIdx\s*\.\s*x\b")
_BLOCKDIM = re.compile(r"\bblockDim\s*\.\s*x\b")

# the public source of the reduction steps the messages name (NVIDIA, GTC 2010)
_SEVEN_STEP = "NVIDIA's seven-step reduction"


_PREFIX = "ga204_"  # the names the half-grid rewrite introduces


def _simple(expr: str) -> bool:
    """Whether ``expr`` needs no parentheses as an operand of ``+`` (a name, number, call or
    subscript, possibly with member access)."""
    e = expr.strip()
    return bool(re.fullmatch(r"[\w.]+(?:\s*(?:\([^()]*\)|\[[^\[\]]*\]))*", e))


def _paren(expr: str) -> str:
    return expr.strip() if _simple(expr) else f"({expr.strip()})"


# ---------------------------------------------------------------------------------------------
# Detection: the one-element load and the tree after it


@dataclass(frozen=True)
class _Decl:
    """A declarator ``name = expr`` of a declaration statement (offsets in the body)."""

    name: str
    expr: tuple[int, int]
    stmt: tuple[int, int]  # the whole statement, without its ';'
    prefix: str  # the type words of the statement (``const unsigned``)


@dataclass(frozen=True)
class _Tree:
    form: str  # "loop" (a halving loop) or "unrolled" (if (tid < K) a[tid] += a[tid + K]; ...)
    start: int  # offsets in the body
    first: str  # the first step's text: the loop's initial stride or the first K
    first_span: tuple[int, int]  # the loop's init expression; the unrolled first step
    steps: int | None  # the number of steps (None: unknown)


@dataclass(frozen=True)
class _Match:
    arr: str
    tid: str
    store: tuple[int, int]  # the store statement, ';' included (body offsets)
    load: tuple[int, int]  # the expression with the global load (the store's or a variable's)
    via: str | None  # the variable the loaded value passes through
    pointer: str
    tree: _Tree
    decls: tuple[_Decl, ...]  # the declarations before the store (top level of the body)
    prologue_ok: bool  # only declarations before the store


@dataclass(frozen=True)
class IdleLoad(FindingDetails):
    """The store into the shared array (body offsets, ``;`` included) and the threads of the
    tree's first step (``find_idle_loads`` finds the store again in the context's source)."""

    arr: str
    store: tuple[int, int]
    first_step_threads: int


@dataclass(frozen=True)
class IdleTree(FindingDetails):
    """A tree the trace shows starting with half its fill threads idle, where the source parser
    found no store and tree to rewrite: the threads of its first phase and of the fill, the
    elements each fill thread loaded, and why there is no diff."""

    first_step_threads: int
    fill_threads: int
    elements_per_thread: float
    why_no_diff: str


def _loop_before(ctx: RuleContext, line: int) -> bool:
    """Whether the kernel's source has a loop that starts before ``line`` (the fill)."""
    try:
        ks = ctx.kernel_source
    except ModelUnavailable:
        return False
    return any(ks.line_at(lp.span[0]) < line for lp in ks.loops())


def _match_of(ctx: RuleContext, finding: Finding) -> _Match:
    d = finding.details_as(IdleLoad)
    for mt in find_idle_loads(ctx):
        if mt.arr == d.arr and mt.store == d.store:
            return mt
    raise ValueError(f"the store into `{d.arr}` is no longer in the kernel's source")


def _shared_1d(ks: KernelSource) -> set[str]:
    return {
        dd.name
        for d in ks.declarations(file=True)
        if d.has("__shared__")
        for dd in d.declarators
        if len(dd.dims) == 1
    }


def _declarations(ks: KernelSource, end: int) -> tuple[list[_Decl], bool]:
    """The declarations ``T name = expr, ...;`` at the body's top level before body offset
    ``end``; False when something else (a statement, a nested block, a declaration without an
    initializer) comes before it too."""
    base = ks.body_start
    decls: list[_Decl] = []
    ok = True
    for st in ks.top_level():
        if st.start >= base + end:
            break
        if st.kind != "declaration":
            ok = False
            continue
        d = next((x for x in ks.declarations() if x.span[0] == st.start), None)
        if d is not None and d.has("__shared__"):
            continue
        if d is None or any(
            dd.init is None or dd.dims or ks.code[dd.init[0]] == "{" for dd in d.declarators
        ):
            ok = False
            continue
        stmt = (d.span[0] - base, d.span[1] - 1 - base)  # without its ';'
        for k, dd in enumerate(d.declarators):
            if k and dd.span[0] != dd.name_span[0]:
                ok = False  # `int a = 1, *p = q;`: the later declarator has its own type
                continue
            decls.append(
                _Decl(dd.name, (dd.init[0] - base, dd.init[1] - base), stmt, d.prefix)  # type: ignore[index]
            )
    return decls, ok


def _pointers(ctx: RuleContext, ks: KernelSource, decls: list[_Decl]) -> set[str]:
    """The kernel's pointer parameters and the pointers declared from them."""
    from gpuadvise.errors import GpuAdviseError
    from gpuadvise.rules import parse_signature

    try:
        params = parse_signature(ks.text, ctx.spec.kernel)
    except GpuAdviseError:
        params = ()
    out = {p.name for p in params if p.is_pointer}
    out |= {d.name for d in decls if "*" in d.prefix}
    return out


def _halving(step: str, s: str) -> bool:
    e = re.escape(s)
    forms = (rf"{e}\s*>>=\s*1[uU]?", rf"{e}\s*/=\s*2[uU]?", rf"{e}\s*=\s*{e}\s*>>\s*1[uU]?",
             rf"{e}\s*=\s*{e}\s*/\s*2[uU]?")  # fmt: skip
    return any(re.fullmatch(f, step.strip()) for f in forms)


def _add_step(arr: str, tid: str, k: str) -> str:
    """``arr[tid] += arr[tid + k]`` or ``arr[tid] = arr[tid] + arr[tid + k]``."""
    a, t, kk = re.escape(arr), re.escape(tid), re.escape(k)
    lhs = rf"\b{a}\s*\[\s*{t}\s*\]"
    rhs = rf"\b{a}\s*\[\s*{t}\s*\+\s*{kk}\s*\]"
    return rf"{lhs}\s*(?:\+=\s*{rhs}|=\s*{lhs}\s*\+\s*{rhs})\s*;"


def _find_tree(ks: KernelSource, after: int, arr: str, tid: str) -> _Tree | None:
    """The first sequential tree over ``arr`` after body offset ``after``: a loop halving ``s``
    whose threads ``tid < s`` add ``arr[tid + s]``, or unrolled ``if (tid < K) arr[tid] +=
    arr[tid+K];`` steps; a barrier must separate it from the store."""
    body = ks.body
    base = ks.body_start
    found: list[_Tree] = []
    for lp in ks.loops():
        if lp.kind != "for" or lp.span[0] < base + after or lp.init is None:
            continue
        init = ks.code[lp.init[0] : lp.init[1]]
        m = re.fullmatch(r"(?:[A-Za-z_]\w*\s+)*(?P<s>[A-Za-z_]\w*)\s*=\s*(?P<init>[^;]+?)\s*", init)
        cond = ks.code[lp.condition[0] : lp.condition[1]] if lp.condition else ""
        if m is None or not re.match(rf"{re.escape(m.group('s'))}\s*(?:>|>=|!=)\s*\S", cond):
            continue
        s = m.group("s")
        if not _halving(ks.code[lp.update[0] : lp.update[1]] if lp.update else "", s):
            continue
        inner = ks.code[lp.body[0] : lp.body[1]]
        guard = rf"\b{re.escape(tid)}\s*<\s*{re.escape(s)}\b"
        if re.search(_add_step(arr, tid, s), inner) and re.search(guard, inner):
            at = lp.init[0] + m.start("init") - base
            span = (at, lp.init[0] + m.end("init") - base)
            found.append(_Tree("loop", lp.span[0] - base, m.group("init"), span, None))
            break
    steps = []
    for i in ks.ifs((base + after, base + len(body))):
        k = re.fullmatch(rf"\s*{re.escape(tid)}\s*<\s*(?P<k>\w+)\s*", ks.code[slice(*i.condition)])
        inside = ks.top_level(i.consequence) if i.braced else ks.statements(i.consequence)[:1]
        if k is None or len(inside) != 1 or inside[0].kind != "expression_statement":
            continue
        if inside[0].start != i.consequence[0] and not i.braced:
            continue
        add = ks.code[inside[0].start : inside[0].end + 1]
        if re.fullmatch(_add_step(arr, tid, k.group("k")), add):
            steps.append((i, k.group("k")))
    if steps:
        first, bound = steps[0]
        span = (first.head[0] - base, first.consequence[1] - base)
        sync = re.match(r"\s*__syncthreads\s*\(\s*\)\s*;", body[span[1] :])
        if sync:
            span = (span[0], span[1] + sync.end())
        found.append(_Tree("unrolled", span[0], bound, span, len(steps)))
    if not found:
        return None
    tree = min(found, key=lambda x: x.start)
    if not ks.calls(["__syncthreads"], (base + after, base + tree.start)):
        return None
    return tree


def _stores(
    ks: KernelSource, arr: str, tids: set[str]
) -> list[tuple[str, tuple[int, int], tuple[int, int]]]:
    """``arr[tid] = rhs;`` statements at the body's top level: (tid, statement, rhs), body
    offsets."""
    base = ks.body_start
    out = []
    for st in ks.top_level():
        subs = ks.subscripts(arr, within=(st.start, st.end))
        if st.kind != "expression_statement" or not subs or subs[0].span[0] != st.start:
            continue
        lhs = subs[0]
        tid = ks.code[slice(*lhs.indices[0])].strip() if len(lhs.indices) == 1 else ""
        eq = re.match(r"\s*=(?!=)\s*", ks.code[lhs.span[1] : st.end])
        if tid not in tids or eq is None:
            continue
        rhs = (lhs.span[1] + eq.end() - base, st.end - base)
        out.append((tid, (st.start - base, st.end + 1 - base), rhs))
    return out


def find_idle_loads(ctx: RuleContext) -> list[_Match]:
    ks = ctx.kernel_source
    body = ks.body
    base = ks.body_start
    tids = {"threadIdx.x"} | ks.aliases("threadIdx.x")
    out = []
    for arr in sorted(_shared_1d(ks)):
        for tid, store, load in _stores(ks, arr, tids):
            decls, prologue_ok = _declarations(ks, store[0])
            pointers = _pointers(ctx, ks, decls)
            via = None
            rhs = body[load[0] : load[1]].strip()
            if re.fullmatch(r"[A-Za-z_]\w*", rhs):
                d = next((x for x in reversed(decls) if x.name == rhs), None)
                if d is None:
                    continue
                if ks.assignments(rhs, (base + d.stmt[1], base + store[0])):
                    continue  # the value is changed between its load and the store
                load, via = d.expr, rhs
            names = [s.name for s in ks.subscripts(within=(base + load[0], base + load[1]))]
            if any(n == arr for n in names):
                continue
            loads = [n for n in names if n in pointers]
            if len(loads) != 1:
                continue
            tree = _find_tree(ks, store[1], arr, tid)
            if tree is None:
                continue
            out.append(
                _Match(
                    arr,
                    tid,
                    store,
                    load,
                    via,
                    loads[0],
                    tree,
                    tuple(decls),
                    prologue_ok,
                )  # fmt: skip
            )
    return out


# ---------------------------------------------------------------------------------------------
# The transform: half the threads, each adding two elements during the load


def _fresh(name: str, body: str) -> str:
    new = f"{name}_hi"
    while re.search(rf"\b{re.escape(new)}\b", body):
        new += "_"
    return new


def first_add_diff(ks: KernelSource, mt: _Match, block: int, path: str) -> tuple[str | None, str]:
    """The kernel rewritten for blocks of ``block // 2`` threads that each add two elements
    during the load (the element thread ``t`` loaded and the one thread ``t + block/2`` did),
    with the tree's first step gone, as a diff; or None and why not.

    Every value the kernel computes stays the same: ``blockDim.x`` in the declarations before
    the store becomes ``2 * blockDim.x`` (the block the kernel was written for), the second
    element is what the original expression gives with ``threadIdx.x + blockDim.x`` for
    ``threadIdx.x``, and ``a + b`` is exactly the tree's first addition.
    """
    body = ks.body
    base = ks.body_start
    if not mt.prologue_ok:
        return None, "the kernel does more than declare variables before the store"
    after = base + mt.store[1]  # file offset: what comes after the store
    tree = mt.tree
    first = (base + tree.first_span[0], base + tree.first_span[1])
    for u in ks.uses("blockDim.x"):
        if u.span[0] >= after and not (tree.form == "loop" and first[0] <= u.span[0] < first[1]):
            return None, "blockDim.x is used after the store (its meaning changes with the block)"

    def span(x: tuple[int, int]) -> tuple[int, int]:
        return base + x[0], base + x[1]

    # the variables the kernel derives from the thread index before the store
    thread_vars: dict[str, _Decl] = {}
    for d in mt.decls:
        e = span(d.expr)
        if ks.uses("threadIdx.x", within=e) or any(n in thread_vars for n, _ in ks.identifiers(e)):
            thread_vars[d.name] = d
    aliases = {
        n
        for n, d in thread_vars.items()
        if _THREADIDX.fullmatch(body[d.expr[0] : d.expr[1]].strip())
    }
    for n in set(thread_vars) - aliases:
        if any(u.span[0] >= after for u in ks.uses(n)):
            return None, f"{n} (derived from the thread index) is used after the store"
    # after the store, the thread index only picks the tree's threads or elements
    for a in (*aliases, "threadIdx.x"):
        for u in ks.uses(a):
            if u.span[0] < after:
                continue
            before = ks.code[after : u.span[0]].rstrip()
            rest = ks.code[u.span[1] : base + len(body)]
            if before.endswith("[") or re.match(r"\s*(?:==|!=)\s*0[uU]?\b", rest):
                continue
            cmp = re.match(r"\s*<\s*([\w.]+)", rest)
            if cmp:
                k = ks.value(cmp.group(1), **{"blockDim.x": block // 2})
                if (
                    k is None
                    or k <= block // 2
                    or (tree.form == "unrolled" and cmp.group(1) == tree.first)
                ):
                    continue
            return (
                None,
                "the thread index is used after the store in a way gpuadvise cannot follow",
            )
    # the second element: each thread variable again, for thread t + blockDim.x
    load = span(mt.load)
    used = {n for n, _ in ks.identifiers(load)}
    need: dict[str, _Decl] = {}

    def visit(name: str) -> None:
        d = thread_vars.get(name)
        if d is None or name in need:
            return
        for n, _ in ks.identifiers(span(d.expr)):
            visit(n)
        need[name] = d

    for n in sorted(used):
        visit(n)
    if not need and not ks.uses("threadIdx.x", within=load):
        return None, "the loaded element does not depend on the thread index"
    hi = {n: _fresh(n, body) for n in need}

    def double(at: tuple[int, int]) -> str:  # the block the kernel was written for
        return ks.substitute(at, {"blockDim.x": "(2 * blockDim.x)"})

    def second(at: tuple[int, int]) -> str:  # the same expression for thread t + blockDim.x
        return ks.substitute(
            at,
            {"blockDim.x": "(2 * blockDim.x)", "threadIdx.x": "(threadIdx.x + blockDim.x)", **hi},
        )

    rw = ks.rewrite()
    for d in mt.decls:
        if ks.uses("blockDim.x", within=span(d.expr)):
            rw.replace(*span(d.expr), double(span(d.expr)))
    # the declarations of the second element, just before the store (or the load's variable)
    anchor = mt.store[0]
    if mt.via is not None:
        anchor = next(d.stmt[0] for d in mt.decls if d.name == mt.via)
        while body[anchor].isspace():
            anchor += 1
    line_start = ks.text.rfind("\n", 0, base + anchor) + 1
    indent = re.match(r"[ \t]*", ks.text[line_start:]).group(0)  # type: ignore[union-attr]
    new_lines = []
    order = [d for d in mt.decls if d.name in need]
    for d in order:
        text = second(span(d.expr))
        if text.startswith("(") and _THREADIDX.fullmatch(body[d.expr[0] : d.expr[1]].strip()):
            text = text[1:-1]
        new_lines.append(f"{indent}{d.prefix} {hi[d.name]} = {text};")
    summed = f"{_paren(double(load))} + {_paren(second(load))}"
    rw.replace(*load, summed)
    if new_lines:
        rw.insert(line_start, "\n".join(new_lines) + "\n")
    # the tree's first step is done: start at the next one
    fa, fb = first
    if tree.form == "loop":
        init = ks.text[fa:fb]
        if not ks.uses("blockDim.x", within=first):  # a constant or a variable: halve it
            half = re.fullmatch(r"(.*\S)\s*/\s*2([uU]?)", init.strip(), re.S)
            new_init = f"{half.group(1)} / 4{half.group(2)}" if half else f"{_paren(init)} / 2"
            rw.replace(fa, fb, new_init)
    else:
        ls = ks.text.rfind("\n", 0, fa) + 1
        le = ks.text.find("\n", fb)
        le = len(ks.text) if le < 0 else le
        if ks.code[ls:fa].strip() or ks.code[fb:le].strip():
            rw.delete(fa, fb)
        else:
            rw.delete(ls, le + 1)
    return rw.diff(path), ""


# ---------------------------------------------------------------------------------------------


def _tree_warp_iterations(threads: int) -> int:
    """Warps with an active lane summed over the steps of a sequential tree over ``threads``."""
    total, s = 0, threads // 2
    while s > 0:
        total += math.ceil(s / 32)
        s //= 2
    return total


class IdleReductionThreads(Rule):
    """A shared-memory tree reduction whose threads each load one element (step #3 of
    NVIDIA's seven-step reduction).

    What it detects
    ---------------
    In the kernel's source, a store of one global element per thread into a 1D ``__shared__``
    array, ``sdata[tid] = ... in[i] ...`` (exactly one subscript of a global pointer, at the
    top level of the kernel: no loop around it; possibly through a variable
    ``int v = in[i]; sdata[tid] = v;``), followed after a barrier by a sequential tree over the
    array: a loop halving ``s`` in which ``tid < s`` adds ``sdata[tid + s]``, or unrolled steps
    ``if (tid < 128) sdata[tid] += sdata[tid + 128];``, whose first step adds the upper half of
    the block to the lower half. The trace (when the emulator can run the kernel) must agree:
    at most one load of that buffer per thread in the traced CTAs. Reported at the store.
    Where the source parser finds no such store and tree (a template block size, a helper
    accessor such as cuda-samples' ``SharedMemory<T>()``, other names, one-line or unrolled
    loops), the shared-memory tree is recognised from the emulator's trace
    (``gpuadvise.model.reduction``): its first step combines with at most half the threads that
    filled it, each of which loaded fewer than 1.5 elements from global memory; reported at the
    fill's store, with advice and no diff. An interleaved tree (``tid % (2*s)``,
    ``index = 2*s*tid``) is GA202's; after its fix, this rule applies.

    Why it is slow
    --------------
    Half of the threads go idle at the tree's first step, having done nothing but one load; a
    reduction has almost no arithmetic, so its speed is how many bytes are in flight. Each
    thread slot of the SM carries one element per CTA lifetime (the load, then a barrier and
    log2(block) tree steps during which it loads nothing): the kernel is bound by latency, far
    below the DRAM bandwidth (9.7 of 86 GB/s on a G80 for step #3 of NVIDIA's seven-step reduction;
    an H100 runs it at 813 of 3350 GB/s, measured). Adding two elements during the load doubles the
    bytes each thread slot carries and drops one tree step; a grid-stride loop over many
    elements per thread, with a grid just large enough to fill the GPU, also amortizes the tree
    and the barriers over all of them, and leaves far fewer partial sums for the next pass.

    Example
    -------
    ``kernels/reduction/reduce.cu``, ``reduce3`` (``sdata[tid] = i < n ? in[i] : 0;`` and a
    halving loop); ``reduce4`` adds during the load and ``reduce7`` loops over many elements.
    ``kernels/luminance/luminance.cu``: ``lum_sequential`` and ``lum_unrolled`` (one pixel per
    thread); ``lum_prefetch2`` adds two during the load.

    Fix
    ---
    First add during load (step #4 of the seven-step reduction): the same blocks on half the
    grid, each thread adding two elements before the tree::

        unsigned i = blockIdx.x * (blockDim.x * 2) + threadIdx.x;
        sdata[tid] = (i < n ? in[i] : 0) + (i + blockDim.x < n ? in[i + blockDim.x] : 0);

    Better (step #7): several elements per thread in a grid-stride loop, launched with just
    enough CTAs to fill the device (SMs x CTAs per SM at the kernel's occupancy; the message
    gives the number; GA206 offers it)::

        int v = 0;
        for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
            v += in[i];
        sdata[tid] = v;

    How the estimate is made
    ------------------------
    An upper bound, ``2 x resident threads after / before``: with two elements per thread each
    thread slot carries twice the bytes per CTA lifetime, and the bandwidth of a latency-bound
    load stream is proportional to the bytes in flight (Little's law), so the kernel at most
    doubles its speed at the same occupancy (the occupancy of the half-size block is
    recomputed). The DRAM bandwidth caps it, and the kernel's time is unknown before it is
    measured, so the cap is not applied. NVIDIA measured 1.78x for this step on a G80; it
    ran 1.94x faster on an H100 (2^26 ints, measured). The inputs give the tree's
    warp-iterations per element before and after. The grid-stride version gains more and is
    not estimated (on a G80: 1.42x over #6, 3.6x over #4 with the unrolling steps between; an
    H100: 1.33x over #6 and 1.34x over #4).

    Fix safety
    ----------
    The seed's variant (1-D launches whose CTAs each write their own partial, from the trace) is
    automatic and verified as totals: the load phase runs for the two original CTA indices
    ``2b`` and ``2b + 1`` (``gpuadvise.rules.grid_stride.reduction_diff`` with two indices per
    thread, launched on half the grid), so the per-block outputs hold half as many partials;
    the measurement stage checks they add up to the kernel's and times it. The host code that
    launches the kernel and adds the partials must follow (the diff says the new grid). The
    alternative halves the block on the same grid (``blockDim.x`` in the index arithmetic
    before the store becomes ``2 * blockDim.x``; the second element is the one thread ``t +
    blockDim.x`` loaded; the tree's first step is removed), so every block writes the same
    result bit for bit; it is display-only (measured 1.00x on an H200: the bytes in flight per
    SM do not change) and not offered when the kernel does more than declare variables before
    the store, uses ``blockDim.x`` after it, or uses the thread index after it in a way that
    needs the upper half of the block.
    """

    id = "GA204"
    name = "idle-reduction-threads"
    title = "Threads idle from the first step of a shared-memory reduction"
    severity = "warning"
    models = ("source", "trace", "occupancy", "waves")
    options = {}

    def detect(self, ctx: RuleContext) -> Iterator[Finding]:
        found = list(self._from_source(ctx))
        yield from found
        if found:
            return
        for tree in ctx.reduction_trees:
            first = tree.phases[0]
            per = tree.fill_elements_per_thread
            if (
                tree.pattern == "interleaved"  # GA202's first; this rule applies after its fix
                or tree.per_warp  # a warp's own tree: shuffles (GA205), not a halved block
                or not first.barrier_before  # no barrier between the fill and the tree
                or tree.fill_threads < 64
                or tree.threads & (tree.threads - 1)  # the shape a halving tree is written for
                or per is None
                # nothing loaded from global memory before the fill (words zeroed, then summed
                # in a loop: all-pairs-distance's `dist[idx] = 0; ... dist[idx] += count`):
                # there is no load to add a second element to
                or per <= 0
                or per >= 1.5
                or 2 * first.active_threads > tree.fill_threads
            ):
                continue
            line = next((ln for f, ln in tree.fill_lines if ln and ctx.same_file(f)), None)
            line = line or next((ln for f, ln in tree.lines if ln and ctx.same_file(f)), None)
            if line is not None and _loop_before(ctx, line):
                continue  # an accumulation loop before the fill: more elements on other launches
            why = (
                "the source parser found no `sdata[tid] = <one global element>` store followed "
                "by a `tid < s` tree it can rewrite"
            )
            yield self.finding(
                ctx,
                f"each thread loads {per:.2g} element{'' if per == 1 else 's'} into the shared "
                f"tree, and its first "
                f"step combines with {first.active_threads} of {tree.fill_threads} threads "
                f"(words {first.distance} apart): {tree.idle_first_phase} threads only loaded. "
                f"Add two elements during the load with half the threads per block (step #4 of "
                f"{_SEVEN_STEP}), or several per thread in a grid-stride loop (its #7)",
                line=line,
                evidence=[
                    Evidence("elements_per_thread", round(per, 4), 1.5, "<"),
                    Evidence(
                        "first_step_threads",
                        first.active_threads,
                        tree.fill_threads // 2,
                        "<=",
                        "threads",
                    ),
                    Evidence("threads_per_block", tree.threads, unit="threads"),
                    Evidence("tree_warp_iterations", tree.warp_iterations(), unit="warps"),
                    Evidence("source", "trace"),
                ],
                details=IdleTree(first.active_threads, tree.fill_threads, round(per, 4), why),
            )

    def _from_source(self, ctx: RuleContext) -> Iterator[Finding]:
        try:
            ks = ctx.kernel_source
        except ModelUnavailable:
            return
        block = ctx.launch.block
        threads = int(block.x)
        if block.y != 1 or block.z != 1 or threads < 64 or threads & (threads - 1):
            return  # a 1D power-of-two block: the shape a halving tree is written for
        for mt in find_idle_loads(ctx):
            first = ks.value(mt.tree.first, **{"blockDim.x": threads})
            if first is None:
                d = next((x for x in mt.decls if x.name == mt.tree.first.strip()), None)
                if d is not None:
                    first = ks.value(ks.body[d.expr[0] : d.expr[1]], **{"blockDim.x": threads})
            if first is None or 2 * first != threads:
                continue
            per_thread = self._loads_per_thread(ctx, mt.pointer, threads)
            if per_thread is not None and per_thread > 1.0 + 1e-9:
                continue  # the trace shows more loads than the source suggests
            line = ks.line(mt.store[0])
            w = self._waves(ctx)
            grid_stride = (
                f", or several per thread in a grid-stride loop over {w.ctas_per_wave} CTAs "
                f"({ctx.device.sm_count} SMs x {w.ctas_per_wave // ctx.device.sm_count} CTAs "
                f"per SM; {ctx.launch.grid.count / w.ctas_per_wave:.0f} elements per thread "
                f"here, step #7 of {_SEVEN_STEP})"
                if w is not None and ctx.device.sm_count
                else ""
            )
            evidence = [
                Evidence(
                    "elements_per_thread",
                    1 if per_thread is None else round(per_thread, 4),
                    1,
                    "<=",
                ),
                Evidence("first_step_threads", first, threads // 2, "==", "threads"),
                Evidence("threads_per_block", threads, unit="threads"),
                Evidence("tree_warp_iterations", _tree_warp_iterations(threads), unit="warps"),
                Evidence("source", "source and trace" if per_thread is not None else "source"),
            ]
            yield self.finding(
                ctx,
                f"each thread loads one element (`{mt.pointer}[...]`) into `{mt.arr}`, and the "
                f"tree's first step adds with {first} of {threads} threads: half the block is "
                f"idle from the first step on. Add two elements during the load with "
                f"{threads // 2} threads per block (step #4 of {_SEVEN_STEP}){grid_stride}",
                line=line,
                evidence=evidence,
                details=IdleLoad(mt.arr, mt.store, int(first)),
            )

    @staticmethod
    def _waves(ctx: RuleContext) -> Any:
        try:
            return ctx.waves
        except ModelUnavailable:
            return None

    @staticmethod
    def _loads_per_thread(ctx: RuleContext, pointer: str, threads: int) -> float | None:
        """Lanes of global loads from ``pointer``'s buffer per traced thread (None: no trace)."""
        import numpy as np

        from gpuadvise.rules import Kind, Space, active_lanes

        try:
            trace = ctx.trace
        except ModelUnavailable:
            return None
        if not trace.ctas:
            return None
        r = trace.records
        r = r[(r["space"] == int(Space.GLOBAL)) & (r["kind"] == int(Kind.LOAD))]
        lanes = active_lanes(r["mask"])
        if pointer in trace.buffers:
            start, size = trace.buffers[pointer]
            lanes &= (r["addr"] >= np.uint64(start)) & (r["addr"] < np.uint64(start + size))
        return float(lanes.sum()) / (len(trace.ctas) * threads)

    def estimate(self, ctx: RuleContext, finding: Finding) -> Estimate:
        from gpuadvise.rules import OccupancyInputError, max_active_blocks

        threads = int(ctx.launch.block.x)
        if isinstance(finding.details, IdleTree):
            threads = int(ctx.launch.block.count)
        before = ctx.occupancy.active_warps_per_sm
        try:
            k = dataclasses.replace(ctx.occupancy_input, threads_per_block=threads // 2)
            after = max_active_blocks(ctx.device, k).active_warps_per_sm
        except (OccupancyInputError, TypeError):
            after = before
        ratio = min(1.0, after / before) if before else 1.0
        per_elem_before = _tree_warp_iterations(threads) / threads
        per_elem_after = _tree_warp_iterations(threads // 2) / threads
        return Estimate(
            round(2.0 * ratio, 3),
            "upper-bound",
            f"two elements per thread slot instead of one at {after} resident warps per SM "
            f"instead of {before}: a latency-bound load stream moves bytes in proportion to the "
            "bytes in flight (Little's law), so at most 2 x "
            f"{after}/{before}; DRAM bandwidth caps it (not applied: the kernel's time is "
            "unknown before measuring). Measured: 1.78x on a G80 (NVIDIA), 1.94x on an "
            "H100",
            {
                "threads_per_block": threads,
                "resident_warps_before": before,
                "resident_warps_after": after,
                "tree_warp_iterations_per_element_before": round(per_elem_before, 5),
                "tree_warp_iterations_per_element_after": round(per_elem_after, 5),
            },
        )

    def transform(self, ctx: RuleContext, finding: Finding) -> Variant:
        if isinstance(finding.details, IdleTree):
            half = finding.details.fill_threads // 2
            return Variant(
                "display-only",
                f"add two elements during the load with {half} threads per block and start "
                f"the tree one step later (no diff: {finding.details.why_no_diff})",
            )
        mt = _match_of(ctx, finding)
        threads = int(ctx.launch.block.x)
        diff, why = first_add_diff(ctx.kernel_source, mt, threads, ctx.source_file)
        grid = ctx.launch.grid.as_tuple()
        if diff is None:
            half_block = Variant(
                "display-only",
                f"add two elements during the load with {threads // 2} threads per block and "
                f"start the tree one step later (not rewritten automatically: {why})",
            )
        else:
            half_block = Variant(
                "display-only",
                f"first add during the load: blocks of {threads // 2} threads on the same "
                f"{grid[0]}x{grid[1]}x{grid[2]} grid, each thread adding the element it loaded "
                "and the one thread t + blockDim.x loaded; the tree starts one step later and "
                "every block writes the same result (launch with the halved block; measured "
                "1.00x on an H200: the loads in flight per SM do not change)",
                diff=diff,
                launch={"block": [threads // 2, 1, 1]},
                label="half block",
            )
        seed = self._half_grid(ctx)
        if isinstance(seed, str):
            return replace(
                half_block,
                description=f"{half_block.description}; the seed's half grid is not offered: "
                f"{seed}",
            )
        return replace(seed, alternatives=(half_block,))

    @staticmethod
    def _half_grid(ctx: RuleContext) -> Variant | str:
        """The seed's step #4: the same blocks on half the grid, each thread adding the
        elements two CTAs of the original grid loaded (CTA indices 2b and 2b + 1), the tree
        unchanged; the per-block outputs then hold half as many partials, verified as totals.
        Why not, as text."""
        g, b = ctx.launch.grid, ctx.launch.block
        if g.y != 1 or g.z != 1 or b.y != 1 or b.z != 1:
            return "a 2-D or 3-D launch"
        if g.x < 2:
            return "a grid of one CTA"
        ks = ctx.kernel_source
        per_block = [u.name for u in buffer_uses(ctx.trace_view) if u.per_block and u.written]
        if not per_block:
            return "no output written once per CTA (the trace)"
        threads, grid = int(b.x), int(g.x)
        bound, derived = grid_bound(ctx, ks, threads, grid)
        if _PREFIX in ks.code:
            return f"the source already uses names starting with {_PREFIX}"
        diff, why = reduction_diff(ks, bound, ctx.source_file, 2, prefix=_PREFIX)
        if diff is None:
            return why
        half = -(-grid // 2)
        outputs = ", ".join(f"`{n}`" for n in per_block)
        v = Variant(
            "automatic-and-verified",
            f"first add during the load (the seed's step #4): the same {threads}-thread blocks "
            f"on {half} CTAs instead of {grid}, each thread adding the elements of two original "
            f"CTA indices before the tree; {outputs} then holds {half} partial sums instead of "
            f"{grid}, verified as totals, and the host (or the next pass) adds them. Measured "
            "1.94x on an H100 for the seed's reduce4",
            diff=diff,
            launch={"grid": [half, 1, 1]},
            label="half grid",
            totals={n: "+" for n in per_block},
        )
        return launch_specific(v, derived)
