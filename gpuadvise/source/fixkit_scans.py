"""The fix kit's operation on a warp's scan through shared memory (GA209, issue 28), on the
parser's nodes: the unrolled warp-synchronous scan of HeCBench radixsort's ``scanwarp`` (each
lane owns one word of a window, a zero half below it, and adds the word ``d`` below its own,
``d = 1, 2, 4, 8, 16``, with neither barrier nor ``__syncwarp``: a race since Volta) made a
scan of one register with ``__shfl_up_sync``.

- :func:`warp_scan_steps`: the run of step statements ``a[i] += a[i - d];`` (each on its own or
  the only statement of an ``if`` with no ``else``), consecutive statements of one body, read
  whatever the spelling of ``i`` and of the guards (a macro, a template constant, one line);
- :func:`stores_zero`: whether the statement at a line stores the literal ``0`` into an array
  element (the zero half the scan's first lanes read below their window);
- :func:`shuffle_warp_scan`: the rewrite: the lane's word read into a register before the run,
  each step made ``y = __shfl_up_sync(0xffffffffu, v, d); if (lane >= d) v += y;`` in place
  (its guard kept), the register stored back into the lane's word after the run, so that the
  array holds afterwards what the lock-step scan left in it. The user's comments, guards and
  formatting outside the step statements stay as written.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpuadvise.source import tree as T
from gpuadvise.source.fixkit import comments_within, fresh_name
from gpuadvise.source.fixkit_trees import indent_of, literal_value

if TYPE_CHECKING:
    from gpuadvise.source.edit import Rewrite
    from gpuadvise.source.text import KernelSource

__all__ = [
    "ScanStepStmt",
    "WarpScanSteps",
    "shuffle_warp_scan",
    "shuffles",
    "stores_zero",
    "warp_scan_steps",
]

Span = tuple[int, int]

# the element types __shfl_up_sync takes (cuda_fp16.h's and cuda_bf16.h's too)
_SHUFFLED = frozenset(
    {"int", "unsigned", "unsigned int", "long", "unsigned long", "long long",
     "unsigned long long", "float", "double", "__half", "half", "__half2", "half2",
     "__nv_bfloat16", "__nv_bfloat162", "int32_t", "uint32_t", "int64_t", "uint64_t"}
)  # fmt: skip


def shuffles(ks: KernelSource, typ: str) -> bool:
    """Whether ``__shfl_up_sync`` takes values of type ``typ``: a scalar it is declared for, or
    a template's type parameter of the file (its instance compiles or the variant does not)."""
    if typ in _SHUFFLED:
        return True
    for n in ks.tree.walk(types=("type_parameter_declaration",)):
        if any(ks.tree.text_of(c) == typ for c in n.named_children):
            return True
    return False


@dataclass(frozen=True)
class ScanStepStmt:
    """One step ``a[i] += a[i - distance];``: its span (to its ``;`` inclusive), its distance and
    whether it is the only statement of a braced ``if``'s block (else it is braced anew)."""

    span: Span
    distance: int
    in_braces: bool


@dataclass(frozen=True)
class WarpScanSteps:
    """The run of step statements: the array, the text of the lane's index, the steps in order,
    and the span of the run's outer statements (the steps or their ``if``\\ s)."""

    array: str
    index: str
    steps: tuple[ScanStepStmt, ...]
    outer: Span


def _step(ks: KernelSource, s: T.Statement) -> tuple[str, str, int] | None:
    """``a[i] += a[i - d];`` as (a, i, d), or None."""
    if s.kind != "expression_statement":
        return None
    e = ks.expr((s.start, s.end))
    if e is None or e.kind != "assignment" or e.op != "+=":
        return None
    lhs, rhs = e.args[0].stripped(), e.args[1].stripped()
    if lhs.kind != "subscript" or rhs.kind != "subscript" or len(lhs.args) != 2:
        return None
    arr, idx = lhs.args[0], lhs.args[1].stripped()
    if arr.kind != "name" or rhs.args[0].stripped().text != arr.text or len(rhs.args) != 2:
        return None
    back = rhs.args[1].stripped()
    if back.kind != "binary" or back.op != "-" or back.args[0].stripped().text != idx.text:
        return None
    d = literal_value(back.args[1])
    if d is None or d <= 0 or d & (d - 1) or any(c in idx.text for c in ("=", "++", "--", "(")):
        return None
    return arr.text, idx.text, d


def _outer(ks: KernelSource, s: T.Statement) -> tuple[T.Node, bool] | None:
    """The statement of the body's block that holds step ``s``: ``s`` itself, or the ``if`` (no
    ``else``) whose consequence is ``s`` alone, braced or not; and whether braced."""
    n = s.node
    if n is None or n.parent is None:
        return None
    p = n.parent
    braced = p.type == "compound_statement" and len(p.named_children) == 1
    holder = p.parent if braced else p
    if holder is not None and holder.type == "if_statement":
        cons = holder.child_by_field_name("consequence")
        if (
            cons is not None
            and cons in (n, p)
            and holder.child_by_field_name("alternative") is None
        ):
            return holder, braced
        return None
    return (n, False) if p.type == "compound_statement" else None


def warp_scan_steps(ks: KernelSource, lines: set[int]) -> WarpScanSteps | str:
    """The step statements of ``ks``'s body on ``lines`` as one run of consecutive statements
    of the body's block; else why not, as a sentence."""
    found: list[tuple[T.Statement, tuple[str, str, int], tuple[T.Node, bool]]] = []
    for s in ks.statements():
        if ks.line_at(s.start) not in lines or s.kind != "expression_statement":
            continue
        step, holder = _step(ks, s), _outer(ks, s)
        if step is None or holder is None:
            text = " ".join(ks.code[s.start : s.end + 1].split())
            return f"`{text}` is no `a[i] += a[i - d];` step on its own or alone in an `if`"
        found.append((s, step, holder))
    if not found:
        return f"no `a[i] += a[i - d];` step on line {min(lines)}"
    if len({(a, i) for _, (a, i, _), _ in found}) > 1:
        return "the steps do not all add into the same element `a[i]`"
    top = [s for s in ks.top_level() if s.kind != "comment"]
    starts = [s.start for s in top]
    at = [ks.tree.span(o)[0] for _, _, (o, _) in found]
    if any(a not in starts for a in at):
        return "the steps are not statements of the function's own block"
    k = [starts.index(a) for a in at]
    if k != list(range(k[0], k[0] + len(k))):
        return "other statements lie between the steps"
    arr, idx, _ = found[0][1]
    steps = tuple(ScanStepStmt((s.start, s.end + 1), d, b) for s, (_, _, d), (_, b) in found)
    return WarpScanSteps(arr, idx, steps, (at[0], ks.tree.span(found[-1][2][0])[1]))


def stores_zero(ks: KernelSource, line: int, fills: list[int], stores: list[int]) -> bool:
    """Whether the store instructions ``fills`` (ids among ``stores``: every store instruction
    of ``line``, in the module's order) are statements ``a[...] = 0;`` of ``line`` (any integer
    spelling of zero). The line's element stores ``a[...] = v;``, in source order, are matched
    with its instructions in order, each inlined copy of the line making them again: a line of
    ``n`` such statements must have a multiple of ``n`` instructions."""
    found = []
    for s in T.statements(ks.tree, (0, len(ks.text))):
        if ks.line_at(s.start) != line or s.kind != "expression_statement":
            continue
        e = ks.expr((s.start, s.end))
        if e is not None and e.kind == "assignment" and e.args[0].stripped().kind == "subscript":
            found.append(e.op == "=" and literal_value(e.args[1]) == 0)
    if not found or not stores or len(stores) % len(found):
        return False
    return all(f in stores and found[stores.index(f) % len(found)] for f in fills)


def shuffle_warp_scan(
    ks: KernelSource, rw: Rewrite, run: WarpScanSteps, typ: str, lane: str
) -> None:
    """``run`` made a register scan with ``__shfl_up_sync`` (see the module's text): ``typ`` the
    element type, ``lane`` the expression of the lane in its warp (``threadIdx.x & 31``)."""
    whole = (0, len(ks.text))
    v, ln, y = (fresh_name(ks.tree, n, whole) for n in ("scan_v", "scan_lane", "scan_y"))
    pad = indent_of(ks.text, run.outer[0])
    rw.insert(
        run.outer[0],
        f"{typ} {v} = {run.array}[{run.index}];  // the warp's scan in a register\n"
        f"{pad}const unsigned {ln} = {lane};\n{pad}",
    )
    for s in run.steps:
        d = s.distance
        body = f"{typ} {y} = __shfl_up_sync(0xffffffffu, {v}, {d}); if ({ln} >= {d}) {v} += {y};"
        rw.replace(*s.span, body if s.in_braces else f"{{ {body} }}")
    end = run.outer[1]
    eol = ks.text.find("\n", end) % (len(ks.text) + 1)
    rest = ks.text[end:eol].strip()
    if not rest or (rest.startswith("//") and "\\" not in rest):
        end = eol  # after the run's line comment: the comment stays with the steps
    rw.insert(end, f"\n{pad}{run.array}[{run.index}] = {v};")


# ---------------------------------------------------------------------------------------------
# A block's work-efficient (Blelloch) scan made warp shuffles


@dataclass(frozen=True)
class BlockScanRegion:
    """A Blelloch scan's statements in one block: its up-sweep loop, what lies between (the
    last element cleared), its down-sweep loop (``span``: from the first to the last)."""

    span: Span


def blelloch_region(ks: KernelSource, up_line: int, array: str) -> BlockScanRegion | str:
    """The up-sweep loop holding ``up_line``, the statements after it and the next ``for`` loop
    (the down-sweep), siblings in one block; else why not."""
    around = [lp for lp in ks.loops() if lp.kind == "for" and ks.line_at(lp.body[0]) <= up_line
              and up_line <= ks.line_at(lp.body[1] - 1)]  # fmt: skip
    if not around:
        return f"line {up_line} is in no `for` loop"
    up = max(around, key=lambda lp: lp.span[0])
    parent = up.node.parent if up.node is not None else None
    if parent is None or parent.type != "compound_statement":
        return "the up-sweep loop is not a statement of a block"
    sib = [s for s in ks.top_level(ks.tree.span(parent)) if s.kind != "comment"]
    k = next((i for i, s in enumerate(sib) if s.start == up.span[0]), None)
    if k is None:
        return "the up-sweep loop is not a statement of a block"
    for j in range(k + 1, min(k + 4, len(sib))):
        s = sib[j]
        if s.kind == "for_statement":
            if not ks.uses(array, within=(s.start, s.end + 1)):
                return "the loop after the up-sweep does not touch the scanned array"
            span = (up.span[0], s.end + 1)
            why = _effects_beyond(ks, span, array)
            return why if why else BlockScanRegion(span)
        if not _clears(ks, (s.start, s.end + 1), array):
            return (
                "a statement other than the last element's clear `a[...] = 0;` follows the up-sweep"
            )
    return "no down-sweep `for` loop follows the up-sweep in its block"


def _clears(ks: KernelSource, span: Span, array: str) -> bool:
    """Whether ``span`` (a statement) only stores zeros into ``array``'s elements (``if (t ==
    0) a[n - 1] = 0;``): its only store ``array[...] = 0``, its only calls none."""
    stores = [n for n in ks.tree.walk(types=("assignment_expression", "update_expression"),
                                      within=span)]  # fmt: skip
    if not stores or any(c.name not in _macros(ks) for c in ks.calls(within=span)):
        return False
    for n in stores:
        e = ks.expr(ks.tree.span(n))
        if e is None or e.kind != "assignment" or e.op != "=" or literal_value(e.args[1]) != 0:
            return False
        lhs = e.args[0].stripped()
        if lhs.kind != "subscript" or lhs.args[0].stripped().text != array:
            return False
    return True


def _macros(ks: KernelSource) -> set[str]:
    """The file's function-like macros (``OFFSET(n)``, ``AI(o, t)``: they parse as calls)."""
    return {
        ks.tree.text_of(name)
        for m in ks.tree.walk(types=("preproc_function_def",))
        if (name := m.child_by_field_name("name")) is not None
    }


def _effects_beyond(ks: KernelSource, span: Span, array: str) -> str | None:
    """Why the sweeps in ``span`` do more than scan ``array`` (None: they do not): a call other
    than ``__syncthreads()``, a store into anything but ``array``'s elements and variables,
    or a variable they change that the function reads after them."""
    for c in ks.calls(within=span):
        if c.name != "__syncthreads" and c.name not in _macros(ks):
            return f"the sweeps call `{c.name}`"
    for n in ks.tree.walk(types=("assignment_expression", "update_expression"), within=span):
        e = ks.expr(ks.tree.span(n))
        target = e.args[0].stripped() if e is not None and e.args else None
        if target is None or target.kind == "name":
            continue
        if target.kind != "subscript" or target.args[0].stripped().text != array:
            return f"the sweeps store into `{target.text}`"
    inside = {a.target for a in ks.assignments(None, within=span) if a.kind == "init"}
    for a in ks.assignments(None, within=span):
        if a.target not in inside and ks.uses(a.target, within=(span[1], ks.span[1])):
            return f"`{a.target}`, which the sweeps change, is read after them"
    return None


def element_store(ks: KernelSource, line: int, array: str) -> tuple[str, Span] | None:
    """The index ``X`` (its text and span) of the one statement ``array[X] = ...;`` at
    ``line`` (None: none or several)."""
    found = []
    for s in T.statements(ks.tree, (0, len(ks.text))):
        if ks.line_at(s.start) != line or s.kind != "expression_statement":
            continue
        e = ks.expr((s.start, s.end))
        if e is None or e.kind != "assignment" or e.op != "=":
            continue
        lhs = e.args[0].stripped()
        if lhs.kind == "subscript" and lhs.args[0].stripped().text == array and len(lhs.args) == 2:
            sp = lhs.args[1].span
            found.append((ks.code[sp[0] : sp[1]].strip(), sp))
    return found[0] if len(found) == 1 else None


def shuffle_block_scan(
    ks: KernelSource,
    rw: Rewrite,
    region: BlockScanRegion,
    array: str,
    index: tuple[str, str],
    typ: str,
    pairs: bool,
) -> None:
    """The Blelloch scan of ``region`` replaced by an exclusive scan in warp shuffles of the two
    elements each thread filled (``array[index[0]]``, ``array[index[1]]``, read back from its own
    words): ``pairs``: they are elements ``2t, 2t + 1`` (each lane scans their sum), else
    ``t, t + n/2`` (each lane scans both halves; the first half's warps' totals, then the
    second's). The warps' totals (at most 64: blocks of up to 1024 threads, counted from
    ``blockDim.x`` so that every instance of a template scans its own block) are scanned by the
    first warp, two a lane. The results are stored back into the same two words, the array
    left as the Blelloch scan leaves it; a barrier ends the block (its totals are read before
    the next scan writes them). The user's comments of the region are kept above it."""
    whole = (0, len(ks.text))
    n = {k: fresh_name(ks.tree, f"scan_{k}", whole)
         for k in ("totals", "lane", "warp", "warps", "x", "y", "xs", "ys", "d", "u", "w",
                   "t", "t2", "n")}  # fmt: skip
    a, b = (f"{array}[{i}]" for i in index)
    pad = indent_of(ks.text, region.span[0])
    i2 = pad + "    "
    i3 = i2 + "    "
    zero = f"({typ})0"
    tl, tt, t2, w_, nn = n["totals"], n["t"], n["t2"], n["warps"], n["n"]
    lane, warp, d, u, xs, ys = n["lane"], n["warp"], n["d"], n["u"], n["xs"], n["ys"]
    shfl = f"__shfl_up_sync(0xffffffffu, {{}}, {d})"
    lines = [
        "{  // the scan in warp shuffles: each warp's lanes, then the warps' totals (GA209)",
        f"{i2}__shared__ {typ} {tl}[64];",
        f"{i2}const unsigned {lane} = threadIdx.x & 31, {warp} = threadIdx.x >> 5, "
        f"{w_} = blockDim.x >> 5;",
        f"{i2}const unsigned {nn} = {w_ if pairs else '2 * ' + w_};  // totals",
        f"{i2}const {typ} {n['x']} = {a}, {n['y']} = {b};",
        f"{i2}{typ} {xs} = {n['x']} + {n['y']};"
        if pairs
        else f"{i2}{typ} {xs} = {n['x']}, {ys} = {n['y']};",
        f"{i2}for (int {d} = 1; {d} < 32; {d} <<= 1) {{",
        f"{i3}const {typ} {u} = {shfl.format(xs)};",
    ]
    if pairs:
        lines.append(f"{i3}if ({lane} >= {d}) {xs} += {u};")
    else:
        lines.append(f"{i3}const {typ} {n['w']} = {shfl.format(ys)};")
        lines.append(f"{i3}if ({lane} >= {d}) {{ {xs} += {u}; {ys} += {n['w']}; }}")
    lines.append(f"{i2}}}")
    if pairs:
        lines.append(f"{i2}if ({lane} == 31) {tl}[{warp}] = {xs};")
    else:
        lines.append(
            f"{i2}if ({lane} == 31) {{ {tl}[{warp}] = {xs}; {tl}[{w_} + {warp}] = {ys}; }}"
        )
    lines += [
        f"{i2}__syncthreads();",
        f"{i2}if ({warp} == 0) {{  // the totals, two a lane: {lane} and 32 + {lane}",
        f"{i3}{typ} {tt} = {lane} < {nn} ? {tl}[{lane}] : {zero};",
        f"{i3}{typ} {t2} = 32 + {lane} < {nn} ? {tl}[32 + {lane}] : {zero};",
        f"{i3}for (int {d} = 1; {d} < 32; {d} <<= 1) {{",
        f"{i3}    const {typ} {u} = {shfl.format(tt)}, {n['w']} = {shfl.format(t2)};",
        f"{i3}    if ({lane} >= {d}) {{ {tt} += {u}; {t2} += {n['w']}; }}",
        f"{i3}}}",
        f"{i3}{t2} += __shfl_sync(0xffffffffu, {tt}, 31);",
        f"{i3}if ({lane} < {nn}) {tl}[{lane}] = {tt};",
        f"{i3}if (32 + {lane} < {nn}) {tl}[32 + {lane}] = {t2};",
        f"{i2}}}",
        f"{i2}__syncthreads();",
    ]
    before = f"({warp} > 0 ? {tl}[{warp} - 1] : {zero})"
    if pairs:
        lines.append(f"{i2}const {typ} {ys} = {xs} - {n['x']} - {n['y']} + {before};")
        lines.append(f"{i2}{a} = {ys};")
        lines.append(f"{i2}{b} = {ys} + {n['x']};")
    else:
        lines.append(f"{i2}{a} = {xs} - {n['x']} + {before};")
        lines.append(f"{i2}{b} = {ys} - {n['y']} + {tl}[{w_} - 1 + {warp}];")
    lines += [f"{i2}__syncthreads();", f"{pad}}}"]
    kept = [f"{c}\n{pad}" for c in comments_within(ks.tree, region.span)]  # the user's, above
    rw.replace(*region.span, "".join(kept) + "\n".join(lines))
