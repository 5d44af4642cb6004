"""What GA306 (transpose-through-shared) computes with: the transposition that a load and a store
make (from the per-thread element streams of the trace), the kernel parameters that name the
matrix's sizes in the source, and the tiled kernel body it proposes.

A transposition pairs, thread by thread, the k-th element a load line reads with the k-th element
a store line writes: with the coalesced side's matrix ``rows x cols`` (row-major) and the strided
side's ``cols x rows``, element ``(r, c)`` of one is element ``(c, r)`` of the other. The tiled
body stages a ``tile x (tile + 1)`` block of it in shared memory: read along the rows of one
matrix, written along the rows of the other, each coalesced; the padded row makes the column read
of the tile conflict free.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from gpuadvise.source import tree as T
from gpuadvise.source.text import KernelSource

__all__ = [
    "Transposition",
    "TransposeTile",
    "copy_statement",
    "find_transposition",
    "index_parameters",
    "transpose_body",
    "transpose_tiles",
]

MIN_SHARE = 0.99


@dataclass(frozen=True)
class Transposition:
    """``strided[(e % cols) * rows + e // cols] = coalesced[e]`` element for element (``e`` in
    the coalesced side's ``rows x cols`` matrix), over ``pairs`` (thread, k-th access) pairs, of
    which ``share`` follow it."""

    rows: int
    cols: int
    pairs: int
    share: float


def _per_thread_order(cta: np.ndarray, tid: np.ndarray, rec: np.ndarray) -> np.ndarray:
    return np.lexsort((rec, tid, cta))


def find_transposition(
    coalesced: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    strided: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    strided_step: int,
    count: int,
    pitches: list[int],
) -> Transposition | str:
    """The :class:`Transposition` between two accesses, or why there is none.

    Each side is ``(cta, tid, rec, element)`` per active lane (``rec``: the record's execution
    order); the k-th access of a thread on one side pairs with its k-th on the other.
    ``strided_step``: the strided side's step in elements between consecutive lanes (the
    coalesced matrix's row count); ``count``: the coalesced buffer's elements; ``pitches``:
    further candidate row lengths (the launch's integer arguments). The pairs must span two
    rows and two columns at least (a strided scatter of one row is no transposition)."""
    ca, cb = coalesced, strided
    if len(ca[0]) == 0 or len(ca[0]) != len(cb[0]):
        return "the load and the store are not made by the same threads as often"
    oa = _per_thread_order(ca[0], ca[1], ca[2])
    ob = _per_thread_order(cb[0], cb[1], cb[2])
    if not (np.array_equal(ca[0][oa], cb[0][ob]) and np.array_equal(ca[1][oa], cb[1][ob])):
        return "the load and the store are not made by the same threads as often"
    ec, es = ca[3][oa].astype(np.int64), cb[3][ob].astype(np.int64)
    rows = int(strided_step)
    if rows <= 1:
        return "no strided side"
    cands = sorted({count // rows, *pitches} - {0})
    best: Transposition | None = None
    for cols in cands:
        if cols <= 1:
            continue
        r, c = ec // cols, ec % cols
        ok = (r < rows) & (es == c * rows + r)
        if len(np.unique(r[ok])) < 2 or len(np.unique(c[ok])) < 2:
            continue  # one row or one column: a strided copy, not a matrix turned over
        share = float(ok.mean())
        if best is None or share > best.share:
            best = Transposition(rows, int(cols), len(ec), share)
    if best is None or best.share < MIN_SHARE:
        got = f" (at best {best.share:.0%} of the pairs)" if best is not None else ""
        return "the elements are not a transposition of one matrix" + got
    return best


# ---------------------------------------------------------------------------------------------
# The source


def _body_span(ks: KernelSource) -> tuple[int, int]:
    return ks.body_start, ks.body_end + 1


def _line_span(ks: KernelSource, line: int) -> tuple[int, int]:
    a = ks.tree.line_start(line)
    b = ks.text.find("\n", a)
    return a, len(ks.text) if b < 0 else b


def _definitions(ks: KernelSource) -> dict[str, list[tuple[int, int]]]:
    """Every value the kernel's body gives each local variable (initializers and assignments)."""
    st = ks.tree
    body = _body_span(ks)
    out: dict[str, list[tuple[int, int]]] = {}
    for a in T.assignments(st, None, body):
        if a.target and a.value is not None:
            out.setdefault(a.target, []).append(a.value)
    for d in T.declarations(st, body):
        for dc in d.declarators:
            if dc.init is not None:
                out.setdefault(dc.name, []).append(dc.init)
    return out


def index_parameters(
    ks: KernelSource, line: int, buffer: str, int_params: Mapping[str, int]
) -> set[str]:
    """The integer parameters the index of ``buffer``'s subscript at ``line`` depends on,
    following the local variables it uses back to their definitions."""
    st = ks.tree
    subs = T.subscripts(st, buffer, _line_span(ks, line))
    if not subs:
        return set()
    defs = _definitions(ks)
    seen: set[str] = set()
    todo = [name for s in subs for span in s.indices for name, _ in T.identifiers(st, span)]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        for span in defs.get(name, ()):
            todo.extend(n for n, _ in T.identifiers(st, span))
    return {n for n in seen if n in int_params}


def copy_statement(ks: KernelSource, line: int, dst: str, src: str) -> str | None:
    """None when the statement at ``line`` copies an element of ``src`` into ``dst``
    (``dst[...] = src[...];``, parentheses or a cast to the element's type allowed), else why
    it is not one."""
    st = ks.tree
    a, b = _line_span(ks, line)
    outs = T.subscripts(st, dst, (a, b))
    if len(outs) != 1:
        return f"not one store to `{dst}` at line {line}"
    stmt = T.statement_at(st, outs[0].span[0], _body_span(ks))
    if stmt is None or stmt.node is None:
        return f"the store to `{dst}` is no statement of its own"
    node = stmt.node
    expr = node.named_children[0] if node.type == "expression_statement" else None
    if expr is None or expr.type != "assignment_expression":
        return f"the store to `{dst}` is not an assignment"
    op = expr.child_by_field_name("operator")
    left, right = expr.child_by_field_name("left"), expr.child_by_field_name("right")
    if op is None or st.text_of(op) != "=" or left is None or right is None:
        return f"the store to `{dst}` is not a plain assignment"
    if st.span(left) != outs[0].span:
        return f"the store to `{dst}` is not a plain assignment"
    v = right
    while v.type in ("parenthesized_expression", "cast_expression"):
        v = v.named_children[-1]
    ins = T.subscripts(st, src, st.span(v))
    if len(ins) != 1 or ins[0].span != st.span(v):
        return f"the value stored to `{dst}` is not an element of `{src}` as it is"
    return None


# ---------------------------------------------------------------------------------------------
# The tiled body


@dataclass(frozen=True)
class TransposeTile:
    """One way to launch the tiled body: ``tile x tile`` elements per CTA of ``block`` threads
    (``block[0] == tile``, each thread ``tile / block[1]`` elements each way) over ``grid``."""

    tile: int
    block: tuple[int, int, int]
    grid: tuple[int, int, int]

    @property
    def label(self) -> str:
        return f"{self.tile}x{self.tile} tile, {self.block[0]}x{self.block[1]} threads"


def _ceil_div(a: int, b: int) -> int:
    return -(-a // b)


def transpose_tiles(
    rows: int, cols: int, block: tuple[int, int, int], max_threads: int = 1024
) -> list[TransposeTile]:
    """The launches worth measuring: a 32x32 tile with the user's block where it is 32 wide and
    its height divides 32 (else 32x8 threads), and a tile of the user's block's width where the
    block is square (16x16 threads, a 16x16 tile); the first is the default."""
    out = []
    bx, by, bz = block
    if bx == 32 and bz == 1 and by >= 1 and 32 % by == 0:
        first = (32, by, 1)
    else:
        first = (32, 8, 1)
    out.append(TransposeTile(32, first, (_ceil_div(cols, 32), _ceil_div(rows, 32), 1)))
    if bx == by and bz == 1 and bx in (8, 16) and bx * by <= max_threads:
        out.append(TransposeTile(bx, (bx, by, 1), (_ceil_div(cols, bx), _ceil_div(rows, bx), 1)))
    return out


def transpose_body(
    *,
    src: str,
    dst: str,
    elem_type: str,
    rows: str,
    cols: str,
    load_coalesced: bool,
    tile: TransposeTile,
    indent: str = "    ",
) -> str:
    """The kernel body (``{`` to ``}``) that transposes through a shared tile.

    The coalesced side's matrix is ``rows x cols`` (``rows``, ``cols``: C expressions); with
    ``load_coalesced`` that is ``src`` (``dst`` is ``cols x rows``), else ``dst``. CTA
    ``(blockIdx.x, blockIdx.y)`` handles the tile of columns ``blockIdx.x * T ..`` and rows
    ``blockIdx.y * T ..`` of the coalesced matrix; bounds checks keep sizes that are not
    multiples of the tile."""
    t, step = tile.tile, tile.block[1]
    i = indent
    if load_coalesced:
        read = f"{src}[(size_t)ga_r * {cols} + ga_c]"
        first = (
            f"{i}{i}const int ga_r = ga_r0 + ga_j, ga_c = ga_c0 + threadIdx.x;  // (row, column) "
            f"of `{src}`"
        )
        write = f"{dst}[(size_t)ga_c * {rows} + ga_r]"
        second = f"{i}{i}const int ga_r = ga_r0 + threadIdx.x, ga_c = ga_c0 + ga_j;"
    else:
        read = f"{src}[(size_t)ga_c * {rows} + ga_r]"
        first = (
            f"{i}{i}const int ga_c = ga_c0 + ga_j, ga_r = ga_r0 + threadIdx.x;  // (column, row) "
            f"of `{src}`"
        )
        write = f"{dst}[(size_t)ga_r * {cols} + ga_c]"
        second = f"{i}{i}const int ga_c = ga_c0 + threadIdx.x, ga_r = ga_r0 + ga_j;"
    lines = [
        "{",
        f"{i}// gpuadvise GA306: the transpose staged through a shared tile, coalesced both ways "
        f"(a {t}x{t} tile",
        f"{i}// per CTA of {tile.block[0]}x{tile.block[1]} threads; the padded row keeps the "
        "column reads conflict free)",
        f"{i}__shared__ {elem_type} ga_tile[{t}][{t} + 1];",
        f"{i}const int ga_c0 = blockIdx.x * {t}, ga_r0 = blockIdx.y * {t};",
        f"{i}for (int ga_j = threadIdx.y; ga_j < {t}; ga_j += {step}) {{",
        first,
        f"{i}{i}if (ga_r < {rows} && ga_c < {cols}) ga_tile[ga_j][threadIdx.x] = {read};",
        f"{i}}}",
        f"{i}__syncthreads();",
        f"{i}for (int ga_j = threadIdx.y; ga_j < {t}; ga_j += {step}) {{",
        second,
        f"{i}{i}if (ga_r < {rows} && ga_c < {cols}) {write} = ga_tile[threadIdx.x][ga_j];",
        f"{i}}}",
        "}",
    ]
    return "\n".join(lines)
