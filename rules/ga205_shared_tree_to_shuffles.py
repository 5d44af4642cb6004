"""GA205 shared-tree-to-shuffles: the last steps of a shared-memory tree, done with shuffles."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

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
    counted,
    shuffled_estimate,
    tree_tail_change,
)
from gpuadvise.source.fixkit import fresh_name
from gpuadvise.source.fixkit_trees import (
    SumStep,
    block_stride_step,
    ends_with_barrier,
    first_warp_guard,
    halves_to_zero,
    helper_at,
    in_branch,
    indent_of,
    nested_tree_why,
    pointee,
    pointee_type,
    read_beyond_root,
    replace_statements,
    stride_loop,
    sum_step,
    tree_loop,
    warp_tail_lines,
    whole_warp_lines,
)


@dataclass(frozen=True)
class ShuffleTail(FindingDetails):
    """The tree's steps done in shared memory by at most a warp: their distances, how many run
    after a barrier each, and the line of the first."""

    distances: tuple[int, ...]
    barriers: int
    line: int | None


def _tail(tree: ReductionTree) -> tuple[int, ...]:
    return tuple(p.distance for p in tree.phases if p.distance <= 32)


@dataclass(frozen=True)
class _Plan:
    diff: str | None
    why: str
    form: str  # "loop" | "tail" | ""


def _shared_type(ks: KernelSource, arr: str) -> str | None:
    """The element type of ``arr``: a ``__shared__`` array, or a pointer declared in the body
    (``T* sdata = SharedMemory<T>();``)."""
    for d in [*ks.declarations(), *ks.declarations(file=True)]:
        for dd in d.declarators:
            if dd.name == arr and (d.has("__shared__") or dd.pointer):
                return " ".join(d.type.split())
    return None


def _combine(ks: KernelSource, line: int) -> tuple[int, SumStep] | None:
    """The sum into ``arr[i]`` that a statement at ``line`` stores, and its offset."""
    for st in ks.statements():
        if ks.line_at(st.start) == line and (step := sum_step(ks.tree, st)) is not None:
            return st.start, step
    return None


def plan(ctx: RuleContext, tree: ReductionTree) -> _Plan:
    """The source rewritten so that the steps from distance 32 on are warp shuffles, or why
    not."""
    try:
        ks = ctx.kernel_source
    except ModelUnavailable as exc:
        return _Plan(None, f"the kernel's source is not available ({exc.message})", "")
    lines = [ln for p in tree.phases for f, ln in p.lines if ln and ctx.same_file(f)]
    whole = tree.phases[0].distance < 32  # the whole tree within one warp: all of it shuffled
    at32 = tree.phases[0] if whole else next((p for p in tree.phases if p.distance == 32), None)
    line32 = next((ln for f, ln in (at32.lines if at32 else ()) if ln and ctx.same_file(f)), None)
    if not lines or line32 is None:
        return _Plan(None, "the tree's combines are not in the kernel's source file", "")
    kernel, helper = ks, None
    if not ks.span[0] <= ks.tree.line_start(line32) < ks.span[1]:  # in a helper function
        h = helper_at(ks, line32)
        if isinstance(h, str):
            return _Plan(None, h, "")
        ks, helper = h.source, h
    found = _combine(ks, line32)
    if found is None:
        return _Plan(None, f"line {line32} holds no `a[i] += a[i + s];` sum gpuadvise can read", "")
    at, step = found
    arr, chain, fold, index = step.array, step.chain, step.fold, step.index.stripped()
    tid = index.text
    tids = {"threadIdx.x"} | ks.aliases("threadIdx.x")
    if index.kind not in ("name", "member") or (helper and tid not in tids):
        return _Plan(None, f"the combined index `{tid}` is not a plain thread index", "")
    typ = _shared_type(ks, arr) or next(
        (pointee_type(p) for p in (helper.params if helper else ()) if p.name == arr), None
    )
    typ = " ".join(w for w in typ.split() if w != "volatile") if typ else None
    if not typ:
        return _Plan(None, f"the element type of `{arr}` is not declared in the kernel", "")
    var = fresh_name(ks.tree, "warp_sum", (0, len(ks.text)))
    top = {s.start for s in ks.top_level()}
    around = [lp for lp in ks.loops() if lp.kind == "for" and lp.body[0] <= at < lp.body[1]]
    loop = tree_loop(ks.tree, around)
    if loop is not None and loop.span[0] not in top:
        # a tree per vector inside a loop (scalarProd) is rewritten in place; in a branch (a
        # warp's tail loop under `if (tid < 32)`) or within one warp, the forms below apply
        if whole or in_branch(ks.tree, loop.span[0], ks.span):
            loop = None
        elif why := nested_tree_why(ks.tree, loop, arr):
            return _Plan(None, why, "")
    loop = loop or next((lp for lp in around if lp.span[0] in top), None)
    inner = [lp for lp in around if loop is not None and lp.span[0] > loop.span[0]]
    if inner and loop is not None and loop.condition is not None:
        tid, why = block_stride_step(ks.tree, loop, inner, at, tid, tids)
        if why:
            return _Plan(None, why, "")
    rw = ks.rewrite()
    if loop is not None and loop.condition is not None:
        cond = ks.expr(loop.condition)
        s = halves_to_zero(cond) if cond is not None else None
        if s is None:
            text = ks.code[loop.condition[0] : loop.condition[1]].strip()
            return _Plan(None, f"the loop's condition `{text}` is not `s > 0`", "")
        after = loop.span[1]
        if whole:
            sl = stride_loop(ks.tree, loop)
            if sl is None or sl.s != s:
                text = ks.code[loop.init[0] : loop.init[1]].strip() if loop.init else ""
                return _Plan(None, f"the loop's start `{text}` is not `{s} = <first>`", "")
            first = ks.code[sl.start[0] : sl.start[1]]
            replace_statements(
                rw, loop.span, whole_warp_lines(tid, arr, typ, var, first, chain, fold)
            )
            form = "warp"
        else:
            rw.replace(*loop.condition, f"{s} > 32")
            pad = indent_of(ks.text, loop.span[0])
            # a loop whose barrier comes before its combine leaves the last step unsynced
            sync = [] if ends_with_barrier(loop, ks.tree) else ["__syncthreads();"]
            block = [*sync, *warp_tail_lines(tid, arr, typ, var, chain, fold), "__syncthreads();"]
            rw.insert(after, "".join(f"\n{pad}{ln}" for ln in block))
            form = "loop"
    elif whole:
        return _Plan(None, "the tree within one warp is not a top-level `for` loop", "")
    else:
        guard = next(
            (
                g
                for g in ks.ifs()
                if g.braced
                and g.consequence[0] <= at < g.consequence[1]
                and (c := ks.expr(g.condition)) is not None
                and first_warp_guard(c, {tid}) == tid
                and g.head[0] in top
            ),
            None,
        )
        if guard is None:
            return _Plan(
                None,
                "the steps are neither a top-level `for` loop halving the stride nor a "
                f"top-level `if ({tid} < 32) {{ ... }}` block",
                "",
            )
        for d in ks.declarations(within=guard.consequence):  # `volatile int* vs = sdata;`
            dd = next((x for x in d.declarators if x.name == arr and x.init), None)
            if dd is not None and dd.init is not None:
                e = ks.expr(dd.init)
                real = pointee(e) if e is not None else None
                typ2 = _shared_type(ks, real) if real else None
                if real is None or typ2 is None:
                    return _Plan(None, f"`{arr}` points to an array gpuadvise cannot find", "")
                arr, typ = real, typ2
        replace_statements(
            rw,
            (guard.head[0], guard.consequence[1]),
            warp_tail_lines(tid, arr, typ, var, chain, fold),
        )
        after = guard.consequence[1]
        form = "tail"
    why = read_beyond_root(ks, arr, after, tids | {tid})
    for karr, end in helper.passed(kernel, arr) if helper and not why else ():
        ktids = {"threadIdx.x"} | kernel.aliases("threadIdx.x")
        why = karr if end < 0 else read_beyond_root(kernel, karr, end, ktids)
        if why:
            break
    if why:
        return _Plan(None, why, "")
    return _Plan(rw.diff(ctx.source_file), "", form)


class SharedTreeToShuffles(Rule):
    """The last steps of a shared-memory tree reduction, done in shared memory.

    What it detects
    ---------------
    From the emulator's trace (``gpuadvise.model.reduction``), whatever the spelling: a
    sequential shared-memory tree (``s[t] += s[t + d]`` with ``d`` halving, the active threads
    the first ones) that goes on in shared memory down to distance 1, so that its last steps
    (distances 32, 16, ..., 1) run in shared memory, with a barrier each or in a warp-synchronous
    tail. Reported at the combine of the step at distance 32 (of the first step when the whole
    tree lies within one warp: blocks of at most 32 threads). Trees side by side, each warp
    reducing its own 32 words (``if (lane < off) s[tid] += s[tid + off]``), are reported at
    their first step too, with advice and no diff; with neither a barrier nor ``__syncwarp``
    between their steps they are GA203's race instead. An interleaved tree is GA202's first; a
    sort's compare-and-swap, which stores both words it compares, is no tree at all.

    Why it is slow
    --------------
    The last five or six steps of the tree involve at most one warp, yet each costs a shared
    store and load (and a ``__syncthreads()`` of the whole block when the loop keeps its barrier)
    while the other warps of the block wait. ``__shfl_down_sync`` exchanges the values between
    the lanes of the warp in registers, with the synchronization built in: six steps become a
    few register exchanges and the block's last barriers go away. Since Volta it is also the
    correct way to write the "unrolled last warp" (GA203).

    Example
    -------
    ``kernels/reduction/reduce.cu``: ``reduce3`` and ``reduce4`` (loop to ``s > 0`` with a
    barrier each step) and ``reduce5`` (the volatile tail); ``reduce6`` does it with shuffles.
    ``kernels/tree_tails/trees.cu``: the barrier first in each step; a tree per vector.

    Fix
    ---
    Stop the shared-memory loop at 32 and finish in registers::

        for (unsigned s = blockDim.x / 2; s > 32; s >>= 1) { ... __syncthreads(); }
        if (tid < 32) {
            int v = sdata[tid] + sdata[tid + 32];
            for (int offset = 16; offset > 0; offset >>= 1)
                v += __shfl_down_sync(0xffffffffu, v, offset);
            if (tid == 0) sdata[0] = v;
        }
        __syncthreads();

    How the estimate is made
    ------------------------
    On the launch model (:func:`gpuadvise.rules.scans.shuffled_estimate`, as GA209's scans): per
    tree, its tail's barriers and a shared load a step off the critical chain, its requests off
    the LSU, five shuffles on. Measured on an H200 (2026-11-29): 1.00-1.21x on four corpus kernels.

    Fix safety
    ----------
    Automatic and verified: a diff that stops the loop at ``s > 32`` (or replaces the
    ``if (tid < 32) { ... }`` tail) and adds the shuffle block; the pairs it adds are the tree's
    own (lane ``t`` adds lane ``t + offset``), so sums come out bit-identical, floats included.
    The measurement stage checks the outputs against the kernel's before timing it. Offered
    when the combine is a plain sum ``a[t] += a[t + s]`` (``a[t] = v = v + a[t + s]``; ``a[t] =
    __hadd2(a[t], a[t + s])``, whose shuffles fold with ``__hadd2``) on a plain thread index,
    the loop or tail block sits at the top level of the kernel, the block has at least 64
    threads (the shuffle block adds ``a[t + 32]``), and only ``a[0]`` is read after the tree
    (``a[t]`` under ``if (t == 0)`` counts); otherwise the finding says why and gives the fix
    to apply by hand. A loop whose barrier comes before its combine (BabelStream's
    dot) gets a barrier before the shuffles too: the step at distance 64 is not yet synced when
    the loop ends. A tree per vector inside an outer loop (cuda-samples' scalarProd) is rewritten
    in place when no branch holds it and the loops around it only store into the array (or read
    ``a[0]``) before it; its step may be a block-stride loop ``for (v = t; v < s; v +=
    blockDim.x)``, which runs once for each thread ``t < s`` in the steps the shuffles take. A
    tree within one warp (a block of at most 32 threads, first distance 16 or less) is replaced
    whole: the loop becomes one shuffle loop from the loop's own first distance, over the
    lanes the block has (the mask), then a barrier. A tree in a ``__device__`` helper function of
    the kernel's file (HeCBench f16sp's ``reduceInShared_intrinsics``; kernels/tree_tails/
    helpers.cu), reported at the kernel's call, is rewritten in the helper, the rest of the
    file untouched, under the same conditions, when this kernel alone calls it (the helper's
    name used by calls in the kernel's body only) and only ``a[0]`` of the array each call
    passes is read after it. A helper that another function of the file calls too stays
    display-only: the diff is verified on this kernel's launch, and another caller's block
    (another size, fewer than 64 threads) may not suit it. Callers are sought in the kernel's
    file only: a header's helper that another file's kernel calls is that file's to check.
    """

    id = "GA205"
    name = "shared-tree-to-shuffles"
    title = "Last steps of a shared-memory reduction not done with warp shuffles"
    severity = "warning"
    models = ("source", "trace")
    options = {}

    def detect(self, ctx: RuleContext) -> Iterator[Finding]:
        seen = set()  # a tree per vector in an outer loop (scalarProd) repeats: reported once
        for tree in ctx.reduction_trees:
            if tree.pattern != "sequential" or tree.direction != "halving":
                continue
            if tree.last_distance != 1 or tree.phases[0].distance < 2:
                continue
            within_warp = tree.phases[0].distance < 32
            if within_warp and not tree.per_warp and (tree.threads > 32 or tree.threads < 4):
                continue  # one tree within a warp: only when the block is one warp at most
            small = [p for p in tree.phases if p.distance <= 32]
            if any(tree.segment_threads(p) > 32 and not p.barrier_before for p in small):
                continue  # GA203's race: not this rule's pattern
            if tree.per_warp and tree.warp_synchronous_tail and not ctx.syncs_warps:
                continue  # a warp's tree with neither barrier nor __syncwarp: GA203's race
            line, helper = ctx.call_site(small[0])
            key = (line, helper, tree.per_warp, tuple(p.distance for p in small))
            if key in seen:
                continue
            seen.add(key)
            barriers = sum(1 for p in small if p.barrier_before)
            where = f" (in the helper function at line {helper}, called here)" if helper else ""
            dists = ", ".join(str(p.distance) for p in small)
            if tree.per_warp:
                text = (
                    f"each of {tree.segments} warps reduces its own {2 * tree.phases[0].distance}"
                    f" values in shared memory{where} (distances {dists}, {counted(barriers, 'barrier')}):"
                    " keep each warp's values in registers and reduce them with "
                    "__shfl_down_sync (or __reduce_add_sync for integers)"
                )
            elif within_warp:
                text = (
                    f"the whole tree{where} (distances {dists}) runs in shared memory within "
                    f"one warp ({tree.threads} threads) with {counted(barriers, 'barrier')}: do it in "
                    "registers with __shfl_down_sync"
                )
            else:
                text = (
                    f"the tree's last {len(small)} steps{where} (distances {dists}) run in "
                    f"shared memory with {counted(barriers, 'barrier')}, by at most "
                    f"{max(p.active_threads for p in small)} threads: finish the last 64 "
                    "values in registers with __shfl_down_sync (loop to s > 32, then one "
                    "warp shuffles)"
                )
            yield self.finding(
                ctx,
                text,
                line=line,
                evidence=[
                    Evidence("shared_steps_at_most_a_warp", len(small), 2, ">="),
                    Evidence("barriers_in_those_steps", barriers, unit="barriers"),
                    Evidence("threads_per_block", tree.threads, unit="threads"),
                    Evidence("source", "trace"),
                    *([Evidence("helper_line", helper)] if helper else []),
                ],
                details=ShuffleTail(tuple(p.distance for p in small), barriers, line),
            )

    def estimate(self, ctx: RuleContext, finding: Finding) -> Estimate:
        d = finding.details_as(ShuffleTail)
        runs = sum(_tail(t) == d.distances for t in ctx.reduction_trees)
        inputs: dict[str, Any] = {"shared_steps": len(d.distances),
                                  "barriers_removed": d.barriers, "trees_per_cta": runs}  # fmt: skip
        what = (f"the last {len(d.distances)} steps of each CTA's {max(runs, 1)} tree(s) in one "
                f"warp's shuffles ({counted(d.barriers, 'barrier')} fewer a tree)")  # fmt: skip
        try:
            change = tree_tail_change(d.distances, d.barriers, runs)
            return shuffled_estimate(ctx.device, ctx.trace_view, change, what, inputs)
        except ModelUnavailable as exc:
            return Estimate(None, "none", f"not estimated: {exc.message}", inputs)

    def transform(self, ctx: RuleContext, finding: Finding) -> Variant:
        d = finding.details_as(ShuffleTail)
        tree = next((t for t in ctx.reduction_trees if _tail(t) == d.distances), None)
        how = (
            "stop the shared-memory loop at s > 32 and reduce the last 64 values with "
            "__shfl_down_sync in one warp"
        )
        if tree is None:
            return Variant("display-only", f"{how} (no diff: the tree was not found again)")
        if tree.per_warp:
            return Variant(
                "display-only",
                "load each warp's values into registers and reduce them with "
                "__shfl_down_sync(0xffffffff, v, offset) for offset = 16, 8, 4, 2, 1 (lane 0 "
                "holds the warp's result); no diff: the rewrite of trees side by side is not "
                "automated",
            )
        if tree.phases[0].distance < 32:
            how = "replace the whole tree (one warp) by __shfl_down_sync"
        elif tree.threads < 64:
            return Variant("display-only", f"{how} (no diff: the tree needs 64 threads)")
        p = plan(ctx, tree)
        if p.diff is None:
            return Variant("display-only", f"{how} (no diff: {p.why})")
        return Variant(
            "automatic-and-verified",
            f"{how}: the pairs are the tree's own, so the sums are bit-identical; the "
            "measurement stage checks the outputs and times it",
            diff=p.diff,
        )
