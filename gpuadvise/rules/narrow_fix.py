"""GA303's rewrite of narrow coalesced loads (issue 28): each thread ``k`` consecutive elements,
each buffer reached at the loads' index read and written as one access of ``k`` elements
(:mod:`gpuadvise.source.fixkit_vector`), as a :class:`Variant` of the finding."""

from __future__ import annotations

from gpuadvise.rules.context import ModelUnavailable, RuleContext
from gpuadvise.rules.findings import Finding, Variant
from gpuadvise.source import tree as T
from gpuadvise.source.fixkit_vector import loop_vectors, per_thread_vectors


def narrow_hint(buffer: str | None, k: int) -> str:
    """The change in words, for a display-only variant: ``k`` elements per thread of ``buffer``."""
    return (
        f"let each thread take {k} consecutive elements with one 16-byte access "
        f"(a reinterpret_cast of &{buffer or 'a'}[{k} * i] to uint4/float4/int4, "
        "the elements taken apart in registers): the loop's stride or the grid's "
        f"elements per thread {k}x, a scalar tail for a count not a multiple of "
        f"{k}, and the row starts 16-byte aligned"
    )


def narrow_variant(
    ctx: RuleContext, buffer: str | None, k: int, f: Finding, hint: str | None = None
) -> Variant:
    """The loop holding the finding's load (at ``f.line``, of ``buffer``) run over chunks of
    ``k`` elements, else a thread per element made ``k`` per thread with a grid ``k`` times
    smaller; display-only (``hint``, default :func:`narrow_hint`, and the reasons) where neither
    applies. A grid-stride loop's variant shrinks the grid too (its threads would find no chunk
    past ``n / k``), with the launch kept as the alternative."""
    hint = hint if hint is not None else narrow_hint(buffer, k)
    try:
        ks = ctx.kernel_source
    except ModelUnavailable:
        return Variant("display-only", hint)
    if not ctx.same_file(f.file) or buffer is None or f.line is None:
        return Variant("display-only", f"{hint} (not rewritten: the load is not in the file)")
    view = ctx.trace_view
    sizes = {b: int(view.buffers[b].elem_bytes) for b in view.buffer_names}
    lo = ks.tree.line_start(f.line)
    subs = T.subscripts(ks.tree, buffer, (lo, ks.tree.line_start(f.line + 1)))
    at = subs[0].span[0] if subs else lo
    path = str(ctx.source_file)
    fix = loop_vectors(ks, path, sizes, k, at, must=buffer)
    g = ctx.launch.grid
    smaller = {"grid": [-(-int(g.x) // k), int(g.y), int(g.z)]}
    if fix.diff is None:
        why = fix.why_not
        fix = per_thread_vectors(ks, path, sizes, k, must=buffer)
        if fix.diff is None:
            return Variant("display-only", f"{hint} (not rewritten: {why}; {fix.why_not})")
    if any(not r.exact for r in fix.reductions) and ctx.spec.rtol <= 0 and ctx.spec.atol <= 0:
        return Variant(
            "display-only",
            f"{hint} (not rewritten: a floating-point sum in another order rounds otherwise, "
            "and the launch's outputs must match exactly: rtol and atol 0)",
        )
    names = ", ".join(f"`{b}`" for b in fix.buffers)
    back = ", ".join(f"`{b}`" for b in fix.written)
    what = (
        f"{k} consecutive elements per thread: {names} read as one access of {k} elements "
        f"each{f' ({back} written back likewise)' if back else ''}, the kernel's statements "
        "run once per element on them"
    )
    safe = (
        "Where a chunk is out of bounds or not aligned to its size (checked as the kernel runs) "
        "the elements are taken one by one as before. Assumes the buffers do not overlap"
    )
    if fix.reductions:
        rs = fix.reductions
        what += (
            f"; {' and '.join(r.words() for r in rs)} reduced over other elements per thread: "
            "each thread's partial changes, their combination over the block by the same "
            "operation does not"
            + (
                ""
                if all(r.exact for r in rs)
                else " but for rounding (a floating-point sum in another order: equal only "
                "within the launch's tolerance)"
            )
            + " (the outputs are compared before the variant is taken)"
        )
    if fix.shape == "loop" and not fix.grid_stride:
        return Variant(
            "automatic-and-verified",
            f"{what}; the loop over chunks, then the original loop over the rest. {safe}",
            diff=fix.diff,
            label=f"k={k}",
        )
    where = (
        "the loop over chunks, then the original loop over the rest"
        if fix.shape == "loop"
        else "a thread per chunk"
    )
    shrunk = Variant(
        "automatic-and-verified",
        f"{what}; {where}, launched with a grid {k}x smaller ({smaller['grid'][0]} CTAs: a "
        f"larger one stays right, its extra threads find no element). {safe}",
        diff=fix.diff,
        launch=smaller,
        label=f"k={k}",
    )
    if fix.shape != "loop":
        return shrunk
    same = Variant(
        "automatic-and-verified",
        f"{what}; {where}, the launch kept. {safe}",
        diff=fix.diff,
        label=f"k={k}, same grid",
    )
    return Variant(
        shrunk.safety,
        shrunk.description,
        diff=shrunk.diff,
        launch=shrunk.launch,
        label=shrunk.label,
        alternatives=(same,),
    )
