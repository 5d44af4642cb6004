"""What GA307 (shared staging that the L1 serves) computes with: the shared tile a kernel fills once
from global memory and reads back after one barrier (from the trace: the words each CTA writes and
the threads that read each), and the rewrite that reads the global elements the tile mirrors
instead (from the source: the fill statement becomes a function of the tile's indices).

The rewrite (:func:`plan_direct_reads`) applies to one spelling, the common one: a
``__shared__`` array ``tile`` written by a single statement ``tile[i][j] = value;`` inside the
loops that fill it, whose indices ``i``, ``j`` are plain variables (loop variables, declared in
the loops' bodies, or variables of the kernel declared before and never changed) and whose
``value`` depends on them and on values the fill does not change (the other declarations of the
loops' bodies are kept); one ``__syncthreads()`` after the fill; every other use of ``tile`` a
read ``tile[a][b]`` after it. The fill becomes
``auto tile_at = [&](int i, int j) -> T { ...; return value; };``, each read ``tile_at(a, b)``,
and the declaration, the loops and the barrier go.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from gpuadvise.arrays import distinct as _distinct
from gpuadvise.arrays import member as _member
from gpuadvise.source import tree as T
from gpuadvise.source.edit import Rewrite
from gpuadvise.source.text import KernelSource
from gpuadvise.trace.access import WARP, AccessTrace, Kind, Space

__all__ = ["DirectReads", "StagedTile", "plan_direct_reads", "staged_tiles"]

_DENSE_CELLS = 1 << 25
"""(CTA, word) cells past which the fill's membership table (a byte a cell) gives way to a
binary search (32 MB)."""


@dataclass(frozen=True)
class StagedTile:
    """A shared-memory range filled once per CTA at ``fill_line`` (a line that also loads from
    global memory) and read back at ``read_lines``. Counts over the traced CTAs: ``words``
    written (each once), ``reads`` distinct (thread, word) read pairs, read and written
    ``requests`` and the read records' shared wavefronts (``read_wavefronts``)."""

    fill_line: int
    read_lines: tuple[int, ...]
    fill_insts: tuple[int, ...]
    read_insts: tuple[int, ...]
    words: int
    reads: int
    ctas: int
    fill_requests: int
    read_requests: int

    @property
    def reuse(self) -> float:
        """Threads that read each staged word, on average."""
        return self.reads / self.words if self.words else 0.0


def staged_tiles(trace: AccessTrace, same_file: Callable[[str | None], bool]) -> list[StagedTile]:
    """The shared ranges each traced CTA fills once at a line that loads from global memory, no
    other line writes, and other lines read back (words read that the line did not write are not
    counted).

    Records are selected by line and kind first, and only their active lanes expanded (as rows of
    a (records, 32) matrix), so that a traced first wave of a million shared words takes a few
    sorts, not a hash of every lane."""
    recs = trace.records
    sh = recs[recs["space"] == int(Space.SHARED)]
    if not len(sh):
        return []
    lines = [trace.line_of(int(i)) for i in range(len(trace.instructions))]
    glob_load_lines = {
        lines[int(i)]
        for i in _distinct(recs["inst"][(recs["space"] == int(Space.GLOBAL))
                                        & (recs["kind"] == int(Kind.LOAD))])
    }  # fmt: skip
    lane_on = ((sh["mask"][:, None] >> np.arange(WARP, dtype=np.uint32)) & 1).astype(bool)
    has_lane = lane_on.any(axis=1)
    width = sh["width"].astype(np.int64)
    cta = sh["cta"].astype(np.int64)
    kind = sh["kind"]
    inst = sh["inst"].astype(np.int64)
    line_ids = {ln: k for k, ln in enumerate(dict.fromkeys(lines))}
    inst_line_id = np.array([line_ids[ln] for ln in lines] or [0], np.int64)
    line_of_rec = inst_line_id[inst]
    is_load = kind == int(Kind.LOAD)

    def words(sel: np.ndarray) -> np.ndarray:
        """The words the lanes of the records ``sel`` address, (len(sel), 32)."""
        return sh["addr"][sel].astype(np.int64) // 4

    # (CTA, word) pairs as dense cells (the CTA's rank among the traced ones times a span over
    # every word a lane reads, up to 3 past its address) for membership by a table lookup, not a
    # binary search per lane into the filled words (a tile of a million words: 1 s a line)
    cta_ids = _distinct(cta)
    span = int(sh["addr"].max(initial=0)) // 4 + int(np.max(width, initial=4)) // 4 + 1
    dense = len(cta_ids) * span <= _DENSE_CELLS
    crank = np.searchsorted(cta_ids, cta) * span if dense else None

    def filled_at(
        sel: np.ndarray, wds: np.ndarray, on: np.ndarray, uniq: np.ndarray, table: np.ndarray | None
    ) -> np.ndarray:
        """Whether each active lane (``on``) of records ``sel``, at words ``wds``, reads a word of
        the fill (``uniq``, its keys; ``table``, its cells)."""
        if table is None:
            return _member(((cta[sel, None] << 32) | wds)[on], uniq)
        assert crank is not None
        return table[(crank[sel, None] + wds)[on]]

    out = []
    store_lines = {lines[int(i)] for i in _distinct(inst[(kind == int(Kind.STORE)) & has_lane])}
    for fl in sorted(store_lines & glob_load_lines, key=lambda t: t[1] or 0):
        f, ln = fl
        if ln is None or not same_file(f):
            continue
        on_line = line_of_rec == line_ids[fl]
        at = np.flatnonzero(on_line & (kind == int(Kind.STORE)) & has_lane)
        if (width[at] != 4).any():
            continue
        uniq = np.sort(((cta[at, None] << 32) | words(at))[lane_on[at]])
        if len(uniq) > 1 and (uniq[1:] == uniq[:-1]).any():
            continue  # a word written twice: not filled once
        table = None
        if crank is not None:
            table = np.zeros(len(cta_ids) * span, dtype=bool)
            table[(crank[at, None] + words(at))[lane_on[at]]] = True
        other = np.flatnonzero(~is_load & ~on_line & has_lane)
        if filled_at(other, words(other), lane_on[other], uniq, table).any():
            continue  # written again elsewhere (a reduction's partial sums): not a staged copy
        rd = np.flatnonzero(is_load & ~on_line & has_lane)
        nw = np.maximum(width[rd] // 4, 1)
        rd_words = words(rd)
        tid = (sh["warp"][rd].astype(np.int64) * WARP)[:, None] + np.arange(WARP, dtype=np.int64)
        rec_mine = np.zeros(len(rd), dtype=bool)
        pair_keys = []
        for k in range(int(nw.max(initial=0))):
            r = np.flatnonzero(nw > k)  # the records reading a k-th word per lane
            keys = (cta[rd[r], None] << 32) | (rd_words[r] + k)
            mine = lane_on[rd[r]]
            mine[mine] = filled_at(rd[r], rd_words[r] + k, mine, uniq, table)
            rec_mine[r] |= mine.any(axis=1)
            pair_keys.append((tid[r][mine] << 48) | keys[mine])
        if not rec_mine.any():
            continue
        pairs = len(_distinct(np.concatenate(pair_keys)))
        read_insts = _distinct(inst[rd[rec_mine]])
        fill_insts = _distinct(inst[at])
        read_lines = sorted({lines[int(i)][1] or 0 for i in read_insts})
        out.append(
            StagedTile(
                int(ln),
                tuple(read_lines),
                tuple(int(i) for i in fill_insts),
                tuple(int(i) for i in read_insts),
                int(len(uniq)),
                int(pairs),
                int(len(_distinct(cta[at]))),
                int(len(at)),
                int(np.count_nonzero(rec_mine)),
            )
        )
    return out


# ---------------------------------------------------------------------------------------------
# The rewrite


@dataclass(frozen=True)
class DirectReads:
    """The rewrite of :func:`plan_direct_reads`: its diff, the tile, the helper's name and the
    number of reads it replaced."""

    tile: str
    helper: str
    reads: int
    diff: str
    text: str


def _enclosing_fill(st: T.SourceTree, node: T.Node, body: tuple[int, int]) -> T.Node:
    """The outermost statement of the kernel's body that holds ``node``."""
    top = node
    for a in st.ancestors(node):
        if st.span(a) == body:
            break
        top = a
    return top


def plan_direct_reads(ks: KernelSource, fill_line: int, path: str) -> DirectReads | str:
    """The kernel with the shared tile written at ``fill_line`` replaced by reads of what it
    mirrors, or why that is not done automatically."""
    st = ks.tree
    body = (ks.body_start, ks.body_end + 1)
    a = st.line_start(fill_line)
    b = ks.text.find("\n", a)
    line_span = (a, len(ks.text) if b < 0 else b)
    shared = {
        dc.name: (d, dc)
        for d in T.declarations(st, body)
        if d.has("__shared__")
        for dc in d.declarators
    }
    writes = [
        s
        for s in T.subscripts(st, None, line_span)
        if s.name in shared and _assigned(st, s) is not None
    ]
    if len(writes) != 1:
        return "not one write of a shared array at the fill's line"
    w = writes[0]
    tile = w.name
    decl, dc = shared[tile]
    if len(decl.declarators) != 1 or dc.init is not None or not dc.dims:
        return f"`{tile}` is not declared alone as a shared array"
    if len(w.indices) != len(dc.dims):
        return f"`{tile}` is not indexed with all its dimensions at the fill"
    subs = T.subscripts(st, tile, body)
    uses = [u for u in T.uses(st, tile, body) if not u.declared]
    if len(uses) != len(subs) or any(len(s.indices) != len(dc.dims) for s in subs):
        return f"`{tile}` is used other than as `{tile}[...]` (a pointer, a row)"
    if T.macro_uses(st, tile):
        return f"`{tile}` is used in a macro"
    all_writes = [s for s in subs if _assigned(st, s) is not None or _written(st, s)]
    if len(all_writes) != 1:
        return f"`{tile}` is written by {len(all_writes)} statements (the fill must be one)"
    bars = T.calls(st, body, names=("__syncthreads",))
    syncs = [c for c in T.calls(st, body) if "sync" in c.name]
    if len(bars) != 1 or len(syncs) != 1:
        return "not exactly one barrier (__syncthreads) in the kernel"
    bar = bars[0]
    reads = [s for s in subs if s.span != w.span]
    if any(s.span[0] < bar.span[1] for s in reads):
        return f"`{tile}` is read before the barrier"
    if w.span[0] > bar.span[0]:
        return f"`{tile}` is written after the barrier"
    assign = _assigned(st, w)
    assert assign is not None
    stmt = assign.parent
    if stmt is None or stmt.type != "expression_statement":
        return "the fill is not a statement of its own"
    index_vars = []
    for span in w.indices:
        name = st.code[span[0] : span[1]].strip()
        if not name.isidentifier():
            return f"an index of the fill (`{name}`) is not a plain variable"
        index_vars.append(name)
    if len(set(index_vars)) != len(index_vars):
        return "the fill's indices repeat a variable"
    root = _enclosing_fill(st, stmt, (ks.body_start, ks.body_end + 1))
    root_span = st.span(root)
    if root.type not in ("for_statement", "compound_statement"):
        return "the fill is not inside a loop"
    # what the fill's loops hold: declarations, the fill, loops and blocks
    loop_vars: set[str] = set()
    for n in st.walk(types=("for_statement",), within=root_span):
        init = n.child_by_field_name("initializer")
        if init is not None:
            for d in T.declarations(st, st.span(init)) or []:
                loop_vars.update(x.name for x in d.declarators)
            for name, _ in T.identifiers(st, st.span(init)):
                loop_vars.add(name)
    for s in T.statements(st, root_span):
        if s.node is stmt or (s.start, s.end + 1) == st.span(stmt):
            continue
        if s.kind != "declaration":
            return "the fill's loops do more than fill the tile"
    decls = [d for d in T.declarations(st, root_span) if d.span[0] < st.start(stmt)]
    index_decls = [d for d in decls if any(x.name in index_vars for x in d.declarators)]
    hidden = set(loop_vars) | {x.name for d in index_decls for x in d.declarators}
    hidden -= set(index_vars)
    value_decls = [d for d in decls if d not in index_decls]
    keep_text = []
    for d in value_decls:
        used = {n for n, _ in T.identifiers(st, d.span)} - {x.name for x in d.declarators}
        if used & hidden:
            return "the fill's value depends on its loop's counter, not only on the tile's indices"
        keep_text.append(" ".join(st.code[d.span[0] : d.span[1]].split()))
    right = assign.child_by_field_name("right")
    assert right is not None
    rhs = st.code_of(right).strip()
    if {n for n, _ in T.identifiers(st, st.span(right))} & hidden:
        return "the fill's value depends on its loop's counter, not only on the tile's indices"
    for v in index_vars:
        if v in loop_vars or any(v in {x.name for x in d.declarators} for d in index_decls):
            continue
        # a variable of the kernel (a thread's lane): the lambda's parameter shadows it; it must
        # be declared before the fill and keep its value
        before = [
            x for d in T.declarations(st, (ks.body_start, root_span[0])) for x in d.declarators
        ]
        if not any(x.name == v for x in before) or any(
            asg.kind != "init" for asg in T.assignments(st, v, body)
        ):
            return f"the fill's index `{v}` is neither the fill's loop's nor a constant variable"
    # the values the fill reads must not change between the fill and the reads
    free = set()
    for d in value_decls:
        free |= {n for n, _ in T.identifiers(st, d.span)}
    free |= {n for n, _ in T.identifiers(st, st.span(right))}
    free -= set(index_vars) | {x.name for d in value_decls for x in d.declarators}
    for name in free:
        for asg in T.assignments(st, name, (root_span[1], ks.body_end)):
            if asg.kind != "init":
                return f"`{name}` changes between the fill and the reads"
    helper = f"{tile}_at"
    if T.uses(st, helper) or helper in ks.text:
        return f"`{helper}` is already a name of the file"
    elem = decl.type
    params = ", ".join(f"int {v}" for v in index_vars)
    indent = " " * (root_span[0] - ks.text.rfind("\n", 0, root_span[0]) - 1)
    inner = indent + "    "
    lam = [f"auto {helper} = [&]({params}) -> {elem} {{  // what `{tile}` held (gpuadvise GA307)"]
    lam += [f"{inner}{t}" for t in keep_text]
    lam += [f"{inner}return {' '.join(rhs.split())};", f"{indent}}};"]
    rw = Rewrite(ks.text)
    rw.replace(root_span[0], root_span[1], "\n".join(lam))
    dl = st.line(decl.span[0])
    if ks.text[st.line_start(dl) : decl.span[0]].strip() == "" and _rest_blank(ks.text, decl.span):
        rw.delete_lines(dl)
    else:
        rw.delete(decl.span[0], decl.span[1])
    bar_stmt = T.statement_at(st, bar.span[0], body)
    if bar_stmt is None:
        return "the barrier is not a statement of its own"
    bl = st.line(bar_stmt.start)
    if ks.text[st.line_start(bl) : bar_stmt.start].strip() == "" and _rest_blank(
        ks.text, (bar_stmt.start, bar_stmt.end + 1)
    ):
        rw.delete_lines(bl)
    else:
        rw.delete(bar_stmt.start, bar_stmt.end + 1)
    for read in reads:
        args = ", ".join(st.code[i0:i1].strip() for i0, i1 in read.indices)
        rw.replace(read.span[0], read.span[1], f"{helper}({args})")
    diff = rw.diff(path)
    if diff is None:
        return "no change"
    return DirectReads(tile, helper, len(reads), diff, rw.text())


def _rest_blank(text: str, span: tuple[int, int]) -> bool:
    end = text.find("\n", span[1])
    return text[span[1] : len(text) if end < 0 else end].strip() == ""


def _assigned(st: T.SourceTree, s: T.Subscript) -> T.Node | None:
    """The ``=`` assignment whose left side is the subscript ``s`` (None: it is not one)."""
    n = s.node
    p = n.parent if n is not None else None
    if p is None or p.type != "assignment_expression":
        return None
    left, op = p.child_by_field_name("left"), p.child_by_field_name("operator")
    if left != n or op is None or st.text_of(op) != "=":
        return None
    return p


def _written(st: T.SourceTree, s: T.Subscript) -> bool:
    """Whether the subscript ``s`` is changed in place (``a[i] += v``, ``a[i]++``)."""
    n = s.node
    p = n.parent if n is not None else None
    if p is None:
        return False
    if p.type == "update_expression":
        return True
    return p.type == "assignment_expression" and p.child_by_field_name("left") == n
