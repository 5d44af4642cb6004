"""GA201's automatic padding: which ``__shared__`` arrays a conflicting line accesses, the pad
that removes its conflicts in the bank model, and the source change.

- a 2-D tile ``T a[R][C]`` gets ``p`` more elements per row (``a[R][C + p]``), its smallest pad
  whose accesses at the line are conflict free;
- a 1-D array ``T a[N]`` gets its index padded (GPU Gems 3's ``CONFLICT_FREE_OFFSET``): every
  access ``a[e]`` becomes ``a[a_padded(e)]`` with ``a_padded(e) = e + (e >> s) * p``, and the
  array ``N + (N >> s) * p`` elements; ``s`` and ``p`` are the ones under which the array's
  accesses over the trace take the fewest wavefronts (every access of the array is rewritten, so
  every traced access of it moves).

Both are searched by moving the traced addresses to the padded layout
(:mod:`gpuadvise.rules.bank_layout`) and re-running the bank model; the source change goes
through the fix kit (:mod:`gpuadvise.source.fixkit_index`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from gpuadvise.model.banks import active_lanes
from gpuadvise.rules.bank_layout import (
    CHUNK,
    Layout,
    Padded,
    SharedVar,
    chunked_cost,
    cost,
    in_var,
    remap,
    shared_layout,
    source_name,
    widest_access,
)
from gpuadvise.source import fixkit_index as FI
from gpuadvise.source.fixkit import fresh_name
from gpuadvise.source.text import KernelSource
from gpuadvise.spec.cuda_types import lookup
from gpuadvise.trace.access import Space, distinct_records
from gpuadvise.words import counted

if TYPE_CHECKING:
    from gpuadvise.rules.context import RuleContext

__all__ = [
    "ArrayDecl",
    "PadPlan",
    "find_array_decl",
    "padding_diff",
    "plan_padding",
    "unsafe_use",
]

MAX_PAD_ELEMENTS = 64  # pads tried per 2-D array, in elements of the array's type
MAX_STATIC_SMEM = 48 * 1024  # a padded kernel must stay within the default static limit
INDEX_GROUP_BYTES = (64, 1024)  # 1-D index padding: a spare after every 64 .. 1024 bytes
INDEX_PADS = (1, 2, 4)  # ... of this many elements
CONFIRMED = 3  # 1-D candidates confirmed over all the array's accesses (the sample's best)


@dataclass(frozen=True)
class ArrayDecl:
    """A ``__shared__ T name[R][C]`` or ``T name[N]`` declarator: where its last dimension's
    text lies (file offsets), the dimensions' values (``rows`` 1 for a 1-D array, ``cols`` its
    length), and the scope whose code may use it."""

    name: str
    rows: int
    cols: int
    inner: tuple[int, int]  # file offsets of the text of C (of N)
    file_scope: bool
    name_at: int = -1  # file offset of the declarator's name
    ndim: int = 2
    type: str = ""  # the element type as written (``uint``, ``T``)
    dynamic: bool = False  # ``extern __shared__ T name[]``: the launch sets its bytes


def find_array_decl(ks: KernelSource, name: str) -> tuple[ArrayDecl | None, str]:
    """The declaration of the 1-D or 2-D ``__shared__`` array ``name`` the kernel sees (its
    body's, else the file's), or None and why not."""
    cands = []
    for d in ks.declarations(file=True):
        if not d.has("__shared__") or d.has("extern"):
            continue
        inside = ks.body_start < d.span[0] < ks.body_end
        if not (inside or d.file_scope):
            continue
        for dd in d.declarators:
            if dd.name == name:
                cands.append((not inside, (d, dd)))
    if not cands:
        return None, f"no `__shared__ T {name}[R][C]` or `{name}[N]` declaration found"
    file_scope, (decl, dd) = sorted(cands, key=lambda c: c[0])[0]  # the body's shadows the file's
    if len(dd.dims) not in (1, 2):
        return None, f"{name} has {len(dd.dims)} dimensions: only 1-D and 2-D arrays are padded"
    if dd.init is not None:
        return None, f"{name} has an initializer or attributes after its dimensions"
    dims = [ks.value(ks.code[a:b]) for a, b in dd.dims]
    if len(dims) == 1 and dims[0] is None:
        dims = [0]  # a 1-D array's length may come from the PTX (a header's constant)
    if any(x is None for x in dims):
        return None, f"the dimensions of {name} are not integer constants gpuadvise can evaluate"
    rows, cols = (1, dims[0]) if len(dims) == 1 else (dims[0], dims[1])
    assert rows is not None and cols is not None
    if rows <= 0 or cols < 0 or (cols == 0 and len(dims) == 2):
        return None, f"{name} has a non-positive dimension"
    found = ArrayDecl(name, rows, cols, dd.dims[-1], file_scope, dd.name_span[0], len(dims))
    return dataclasses.replace(found, type=decl.type), ""


def _length_from_ptx(ks: KernelSource, decl: ArrayDecl, v: SharedVar) -> ArrayDecl | str:
    """A 1-D array whose length the source does not give (a constant of a header) with its
    length from the PTX variable's bytes and the element type's size."""
    if decl.cols:
        return decl
    t = lookup(ks.bindings.get(decl.type, decl.type))
    if t is None or t.size_bytes <= 0 or v.size % t.size_bytes:
        return f"the length of {decl.name} is not an integer constant gpuadvise can evaluate"
    return dataclasses.replace(decl, cols=v.size // t.size_bytes)


def _scope(ks: KernelSource, decl: ArrayDecl) -> tuple[int, int]:
    return (0, len(ks.text)) if decl.file_scope else ks.span


@dataclass(frozen=True)
class IndexScope:
    """Where a 1-D array's index padding edits: the indices of its accesses (in code and, when
    a macro names it, in the macros' bodies), the extents of the declarations to grow and
    their declarator names (each declaration of the name in the file when a macro names it:
    the macro's expansions reach them all, so all are padded alike)."""

    indices: tuple[tuple[int, int], ...]
    extents: tuple[tuple[int, int], ...]
    names_at: tuple[int, ...]


def index_scope(ks: KernelSource, decl: ArrayDecl) -> IndexScope | str:
    """The accesses of 1-D ``decl`` that its index padding rewrites, or why not all can be."""
    st = ks.tree
    if not ks.macro_uses(decl.name):
        got = FI.index_accesses(st, decl.name, _scope(ks, decl), [decl.name_at])
        if isinstance(got, str):
            return got
        return IndexScope(tuple(got), (decl.inner,), (decl.name_at,))
    same = [(d, dd) for d in ks.declarations(file=True) for dd in d.declarators
            if dd.name == decl.name]  # fmt: skip
    for d, dd in same:
        if not d.has("__shared__") or d.has("extern") or len(dd.dims) != 1 or dd.init:
            return (
                f"a macro names {decl.name}, whose declaration at line "
                f"{ks.line_at(dd.name_span[0])} is not a 1D __shared__ array padded alike"
            )
    names = [dd.name_span[0] for _, dd in same]
    got = FI.index_accesses(st, decl.name, (0, len(ks.text)), names, macros=True)
    if isinstance(got, str):
        return got
    return IndexScope(tuple(got), tuple(dd.dims[0] for _, dd in same), tuple(names))


def unsafe_use(ks: KernelSource, decl: ArrayDecl) -> str | None:
    """Why padding ``decl`` could change what the program does (None: every use indexes it as
    ``a[i][j]``, or ``a[e]`` for a 1-D array: no pointer to it or into it, no access with fewer
    subscripts, no ``sizeof``). Searched: the kernel's body (or the whole file for a file-scope
    array) and every macro (a 1-D array's macros would need rewriting too: refused)."""
    if decl.ndim == 1:
        got = index_scope(ks, decl)
        return got if isinstance(got, str) else None
    found = ks.uses(decl.name, file=decl.file_scope)
    macros = ks.macro_uses(decl.name)
    uses = sorted(found + macros, key=lambda u: u.span) if decl.file_scope else found + macros
    for use in uses:
        if use.span[0] == decl.name_at:
            continue  # the declaration itself
        line = ks.line_at(use.span[0])
        if use.subscripts != 2:
            n = use.subscripts
            how = "without a subscript" if not n else f"with {counted(n, 'subscript')}"
            return f"line {line} uses {decl.name} {how}"
        if use.address_taken:
            return f"line {line} takes the address of an element of {decl.name}"
    return None


@dataclass(frozen=True)
class PadPlan:
    """Pads that remove (a 1-D array's: reduce) a line's conflicts in the bank model, and the
    numbers that show it."""

    pads: tuple[tuple[ArrayDecl, Padded], ...]
    line_before: tuple[int, int]  # (wavefronts, ideal) of the line's accesses, traced CTAs
    line_after: tuple[int, int]
    kernel_before: tuple[int, int]  # all shared accesses of the traced CTAs
    kernel_after: tuple[int, int]
    extra_bytes: int  # shared memory added per CTA
    dynamic_bytes: int | None = None  # the launch's dynamic shared memory, when it grows


def _extra(decl: ArrayDecl, p: Padded) -> int:
    return p.size - p.var.size


def _search_rows(
    decl: ArrayDecl, v: SharedVar, elem: int, need: int, room: int, line: tuple, layout: Layout
) -> Padded | str:
    """A 2-D array's smallest row pad whose accesses at the line are conflict free."""
    sample, sample_times, mine, mine_times = line
    best = chunked_cost(mine, layout, (), mine_times)
    chosen = best_pad = None
    best_wf, best_ideal = best
    for pad in range(1, MAX_PAD_ELEMENTS + 1):
        if (decl.cols + pad) * elem % need:
            continue
        if decl.rows * pad * elem > room:
            break
        p = Padded(v, decl.cols, elem, pad)
        # try a sample of the line's accesses first (each access costs what it costs on its
        # own), then confirm on all of them
        wf, ideal = cost(remap(sample, layout, [p]), sample_times)
        if wf == ideal:
            wf, ideal = chunked_cost(mine, layout, [p], mine_times)
        if wf == ideal:
            chosen = p
            break
        if best_pad is None or wf * best_ideal < best_wf * ideal:
            best_pad, best_wf, best_ideal = p, wf, ideal
    if chosen is not None:
        return chosen
    if best_pad is not None:  # the closest any pad came, over all the line's accesses
        best = min(best, chunked_cost(mine, layout, [best_pad], mine_times))
    hint = (
        f"; with {elem}-byte elements the lanes share words across rows: store them in 4-, 8- "
        "or 16-byte elements (half4 rather than half3)"
        if elem & (elem - 1)
        else ""
    )
    return (
        f"no pad of {decl.name}'s rows (up to {MAX_PAD_ELEMENTS} elements) removes the "
        f"conflicts: the best leaves {best[0]} wavefronts where {best[1]} would do{hint}"
    )


def _search_index(
    decl: ArrayDecl, v: SharedVar, elem: int, room: int, shared: np.ndarray, times: np.ndarray,
    layout: Layout,
) -> Padded | str:  # fmt: skip
    """A 1-D array's index padding (a spare ``pad`` after every ``cols = 2**s`` elements) under
    which all its traced accesses take the fewest wavefronts (ties: the least memory)."""
    hit = in_var(shared, v).any(axis=1)
    mine, mine_times = shared[hit], times[hit]
    before = chunked_cost(mine, layout, (), mine_times)
    sample, sample_times = mine[:CHUNK], mine_times[:CHUNK]
    tried = []
    for s in range(1, 16):
        group = (1 << s) * elem
        if group < INDEX_GROUP_BYTES[0]:
            continue
        if group > INDEX_GROUP_BYTES[1] or 1 << s >= decl.cols:
            break
        cands = [Padded(v, 1 << s, elem, pad) for pad in INDEX_PADS]
        if decl.cols % (1 << s) == 0:  # whole groups: the swizzle stays within the array
            cands.append(Padded(v, 1 << s, elem, 0, swizzle=True))
        for p in cands:
            if _extra(decl, p) <= room:
                tried.append(
                    (
                        cost(remap(sample, layout, [p]), sample_times)[0],
                        p.swizzle,
                        _extra(decl, p),
                        p,
                    )
                )
    tried.sort(key=lambda t: (t[0], t[1], t[2]))  # ties: a padding (the known fix) first
    best = None
    for _, swz, extra, p in tried[:CONFIRMED]:
        wf, ideal = chunked_cost(mine, layout, [p], mine_times)
        if best is None or (wf, swz, extra) < best[:3]:
            best = (wf, swz, extra, p)
        if wf == ideal:
            break  # conflict free, and the least memory of those the sample found so
    if best is None or best[0] >= before[0]:
        return f"no index padding of {decl.name} lowers its accesses' wavefronts"
    return best[3]


DYNAMIC = "<dynamic>"  # the pseudo-variable of the dynamic area in a padding's layout


def dynamic_array(ks: KernelSource, layout: Layout, nbytes: int) -> tuple[ArrayDecl, Layout] | str:
    """The kernel's one ``extern __shared__ T a[]`` (declared in its body) as a 1-D array of the
    launch's ``nbytes``, and ``layout`` with the dynamic area as a variable, or why not: a
    second extern array (they alias), one at file scope (other kernels share it)."""
    what = "the line accesses dynamic shared memory"
    found = [(d, dd) for d in ks.declarations(file=True)
             if d.has("__shared__") and d.has("extern") for dd in d.declarators
             if d.file_scope or ks.body_start < d.span[0] < ks.body_end]  # fmt: skip
    if len(found) != 1:
        return f"{what} through {len(found)} extern __shared__ arrays"
    d, dd = found[0]
    if d.file_scope or len(dd.dims) != 1:
        return f"{what} through `{dd.name}`, not a 1D extern array of the kernel's body"
    t = lookup(ks.bindings.get(d.type, d.type))
    if t is None or t.size_bytes <= 0 or nbytes <= 0 or nbytes % t.size_bytes:
        return f"{what}: the launch's {nbytes} B are not a whole number of `{d.type}`"
    decl = ArrayDecl(dd.name, 1, nbytes // t.size_bytes, dd.dims[0], False, dd.name_span[0], 1,
                     d.type, dynamic=True)  # fmt: skip
    v = SharedVar(DYNAMIC, layout.dynamic_offset, nbytes, layout.dynamic_align)
    end = layout.dynamic_offset + nbytes
    return decl, Layout((*layout.vars, v), end, layout.dynamic_align)


def plan_padding(ctx: RuleContext, insts: Sequence[int]) -> PadPlan | str:
    """The padding of the ``__shared__`` arrays accessed by trace instructions ``insts`` that
    removes their bank conflicts (a 2-D array's smallest row pad that does; a 1-D array's index
    padding that leaves its accesses the fewest wavefronts, kept when it at least halves the
    line's excess), or why there is none."""
    records = ctx.trace.records  # reconciled with the SASS by the pipeline
    shared_all = records[records["space"] == int(Space.SHARED)]
    line_insts = np.asarray(insts, dtype=shared_all["inst"].dtype)
    on_line_all = shared_all[np.isin(shared_all["inst"], line_insts)]
    if len(on_line_all) == 0:
        return "no traced access at this line"
    # the costs are sums over records: each distinct record once, times its count (the CTAs of
    # a wave repeat each other's shared accesses)
    shared, times = distinct_records(shared_all)
    at_line = np.isin(shared["inst"], line_insts)
    on_line, line_times = shared[at_line], times[at_line]
    layout = shared_layout(ctx)
    ks = ctx.kernel_source
    lanes = active_lanes(on_line["mask"])
    claimed = np.zeros(lanes.shape, dtype=bool)
    touched: list[SharedVar] = []
    for v in layout.vars:
        inside = in_var(on_line, v)
        if inside.any():
            touched.append(v)
            claimed |= inside
    dynamic = None
    if (lanes & ~claimed).any():
        got = dynamic_array(ks, layout, int(ctx.launch.dynamic_smem_bytes))
        if isinstance(got, str):
            return got
        dynamic, layout = got
        touched.append(layout.vars[-1])
    static_bytes = sum(v.size for v in layout.vars)
    plan: list[tuple[ArrayDecl, Padded]] = []
    for v in touched:
        name = dynamic.name if dynamic and v.ptx_name == DYNAMIC else source_name(v.ptx_name)
        decl, why = find_array_decl(ks, name) if name else (None, "an unnamed array")
        if dynamic is not None and v.ptx_name == DYNAMIC:
            decl = dynamic
        if decl is None:
            return why
        decl_or_why = _length_from_ptx(ks, decl, v)
        if isinstance(decl_or_why, str):
            return decl_or_why
        decl = decl_or_why
        if decl.ndim == 1 and any(set(t.lines) & {ctx.trace.line_of(i) for i in insts}
                                  for t in ctx.reduction_trees):  # fmt: skip
            return (
                f"{name} is a 1D array combined in a reduction tree: sequential addressing "
                "removes the conflicts and the idle threads together (see GA202)"
            )
        n = decl.rows * decl.cols
        if v.size % n:
            return f"{name}'s {n} elements do not match its {v.size} bytes in the PTX"
        elem = v.size // n
        unsafe = unsafe_use(ks, decl)
        if unsafe is not None:
            return f"padding {name} is not provably safe: {unsafe}"
        in_v = in_var(on_line, v).any(1)
        mine, mine_times = on_line[in_v], line_times[in_v]
        before = chunked_cost(mine, layout, (), mine_times)
        if before[0] == before[1]:
            continue  # this array's accesses on the line are conflict free already
        room = MAX_STATIC_SMEM - static_bytes
        if decl.ndim == 1:
            found = _search_index(decl, v, elem, room, shared, times, layout)
        else:
            # the sample: the line's first accesses of the array, in trace order
            sample, sample_times = distinct_records(
                on_line_all[in_var(on_line_all, v).any(1)][:CHUNK]
            )
            need = max(v.align, widest_access(shared, v), elem & -elem)
            line = (sample, sample_times, mine, mine_times)
            found = _search_rows(decl, v, elem, need, room, line, layout)
        if isinstance(found, str):
            return found
        plan.append((decl, found))
        static_bytes += _extra(decl, found)
    if not plan:
        return "the accessed arrays are conflict free one by one (the line mixes them)"
    pads = [p for _, p in plan]
    line_before = chunked_cost(on_line, layout, (), line_times)
    line_after = chunked_cost(on_line, layout, pads, line_times)
    excess_before, excess_after = (w - i for w, i in (line_before, line_after))
    if any(d.ndim == 1 for d, _ in plan):
        if 2 * excess_after > excess_before:
            return (
                f"the best index padding leaves {line_after[0]} wavefronts at the line where "
                f"{line_after[1]} would do (from {line_before[0]}): less than half the excess "
                "removed"
            )
    elif excess_after:
        return "padding each array alone removes its conflicts, but not all of them together"
    kernel_before = chunked_cost(shared, layout, (), times)
    kernel_after = chunked_cost(shared, layout, pads, times)
    if kernel_after[0] >= kernel_before[0]:
        return "padding adds as many conflicts at other lines as it removes here"
    grown = [p.size for d, p in plan if d.dynamic]
    return PadPlan(
        tuple(plan),
        line_before,
        line_after,
        kernel_before,
        kernel_after,
        sum(_extra(d, p) for d, p in plan),
        grown[0] if grown else None,
    )


def padding_diff(ks: KernelSource, plan: PadPlan, path: str) -> str | None:
    """The padded declarations (a 2-D array's inner dimension, a 1-D array's length) and, for a
    1-D array, every access's index padded through a helper function, as a unified diff (None:
    an access could not be rewritten)."""
    rw = ks.rewrite()
    st = ks.tree
    for decl, p in plan.pads:
        a, b = decl.inner
        if decl.ndim == 2:
            rw.replace(a, b, f"{FI.operand(ks.text[a:b])} + {p.pad}")
            continue
        shift = p.cols.bit_length() - 1
        scope = index_scope(ks, decl)
        if isinstance(scope, str):
            return None
        kind = "swizzled" if p.swizzle else "padded"
        helper = fresh_name(st, f"{decl.name}_{kind}", (0, len(ks.text)))
        for a, b in scope.extents if not (decl.dynamic or p.swizzle) else ():
            rw.replace(a, b, FI.padded_extent(ks.text[a:b], shift, p.pad))  # the launch sizes a[]
        at = FI.helper_offset(st, [*scope.names_at, ks.body_start])
        text = (
            FI.swizzle_helper(helper, shift, decl.name)
            if p.swizzle
            else FI.index_helper(helper, shift, p.pad, decl.name)
        )
        rw.insert(at, text)
        FI.wrap_indices(rw, scope.indices, helper)
    return rw.diff(path)
