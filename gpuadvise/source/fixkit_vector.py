"""The fix kit's vector loads (issue 28): each thread takes ``k`` consecutive elements with one
16-byte (or narrower) access per buffer, on the parser's nodes.

Two shapes of element-wise work are rewritten, both with the kernel's own statements kept:

- a thread per element (:func:`per_thread_vectors`): ``T i = <block position>; if (i >= n)
  return; ...`` (or ``if (i < n [&& ...]) ...`` as the last statement): the thread's index
  becomes ``k * v + q`` for ``q < k``, every buffer accessed only as ``buf[X]`` (``X`` the index
  plus terms that do not change with it) is read as one chunk before the ``k`` runs of the
  statements and written back after them, where the whole chunk is in bounds and every chunk's
  address is aligned to its size (checked when the kernel runs: otherwise the ``k`` runs read
  and write the elements one by one, as before). The grid shrinks ``k`` times (the caller's
  launch change); a larger grid stays right (its extra threads fail the bounds check).
- a strided loop (:func:`loop_vectors`): ``for (T i = s; i < n; i += S) body`` with the threads'
  starts ``s`` a partition of ``[0, S)`` (a grid- or block-stride loop): a loop over chunks
  ``v = s, s + S, ...`` below ``n / k`` runs the body ``k`` times on one chunk of each buffer,
  then the original loop, started at ``k * (n / k)``, does the rest (all of it when a buffer's
  chunks are not aligned).

Each run of the statements sees ``buf[X]`` as an element of a small local array (registers
after the unrolled loop), so the statements are kept as written. Refused, with the reason,
when a buffer is also reached another way (a helper or a macro given the pointer, ``&buf[X]``,
another index), the statements read the thread's or the block's position other than through
the index (a block-stride loop may read the block's), synchronize, or leave the loop (``break``,
``return``, ``goto``), or a variable declared outside them carries a value from one element to
the next; in a block-stride loop, an order-free reduction (a count, an integer sum, a minimum:
:mod:`gpuadvise.source.fixkit_reduce`) is kept, each thread's partial then over other elements.

Pure text work on parsed trees: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from gpuadvise.source import tree as T
from gpuadvise.source.constants import defines
from gpuadvise.source.fixkit_reduce import Reduction, reductions
from gpuadvise.source.text import KernelSource

__all__ = ["CHUNK_TYPES", "VectorFix", "loop_vectors", "per_thread_vectors"]

PREFIX = "ga303_"
CHUNK_TYPES = {2: "unsigned short", 4: "unsigned int", 8: "uint2", 16: "uint4"}
"""The type one chunk of ``k`` elements is moved as, by its bytes."""

_POSITION = re.compile(r"\b(?:threadIdx|blockIdx|laneid|warpid)\b|__shfl|__ballot|_sync\s*\(")
_BARRIER = re.compile(r"__syncthreads|__syncwarp|\bgrid\.sync\b|__shared__|\bsync\s*\(")


@dataclass(frozen=True)
class VectorFix:
    """A rewrite (``diff``) or why not (``why_not``); the buffers read and written as chunks,
    ``k`` elements per chunk, the shape (``per-thread``: the grid shrinks ``k`` times; ``loop``)."""

    diff: str | None
    why_not: str = ""
    buffers: tuple[str, ...] = ()
    k: int = 0
    shape: str = ""
    written: tuple[str, ...] = ()
    grid_stride: bool = False  # a loop whose step counts the grid's threads
    reductions: tuple[Reduction, ...] = ()  # values the loop's threads carry as reductions


@dataclass(frozen=True)
class _Buffer:
    name: str
    elem: str  # the element type, as the parameter spells it, without const
    index: str  # the index text X, as written
    spans: tuple[T.Span, ...]  # the subscripts ``buf[X]``
    read: bool
    preload: bool  # read before the runs (read, or written on some runs only)
    written: bool
    bytes: int  # the chunk's


def _norm(s: str) -> str:
    return "".join(s.split())


def _unit_step(e: T.Expr, var: str) -> bool:
    """``e`` is ``var`` plus or minus terms without ``var`` (``index + i``, ``i``, ``(size_t)m *
    cols + i``): consecutive ``var`` give consecutive elements."""
    e = e.stripped()
    if e.kind == "name":
        return e.text == var
    if e.kind == "cast" and e.args:
        return _unit_step(e.args[-1], var)
    if e.kind != "binary" or e.op not in ("+", "-"):
        return False
    parts = e.chain(("+", "-"))
    hits = [(op, p) for op, p in parts if re.search(rf"\b{re.escape(var)}\b", p.text)]
    return len(hits) == 1 and hits[0][0] != "-" and _unit_step(hits[0][1], var)


def _ancestor_types(st: T.SourceTree, node: T.Node, stop: T.Span) -> list[str]:
    out = []
    n = node.parent
    while n is not None and stop[0] <= st.start(n) and st.end(n) <= stop[1]:
        out.append(n.type)
        n = n.parent
    return out


def _buffers(
    ks: KernelSource,
    span: T.Span,
    var: str,
    k: int,
    sizes: Mapping[str, int],
    guard: str = "",
    within: T.Span | None = None,
) -> tuple[list[_Buffer], list[str]]:
    """The pointer parameters of ``sizes`` that ``span`` reaches only as ``buf[X]``, ``X`` one
    index with a unit step in ``var`` whose other terms ``span`` does not change; and why each
    other one is left as it is. ``within``: where a store counts as conditional (``span``)."""
    st = ks.tree
    local = _declared(st, span)
    params = {p.name: p for p in (ks.kernel.params if ks.kernel else ())}
    out: list[_Buffer] = []
    why: list[str] = []
    for name, w in sizes.items():
        p = params.get(name)
        uses = T.uses(st, name, span)
        if not uses:
            continue
        if p is None or not p.pointer or p.type.count("*") != 1:
            why.append(f"`{name}` is not a pointer parameter")
            continue
        if k * w not in CHUNK_TYPES:
            why.append(f"{k} elements of `{name}` are not one access ({k * w} bytes)")
            continue
        subs = T.subscripts(st, name, span)
        if len(subs) != len(uses) or any(len(s.indices) != 1 for s in subs):
            why.append(f"`{name}` is reached other than as `{name}[...]` (a helper, a macro)")
            continue
        idx = {_norm(st.code[a:b]) for s in subs for a, b in s.indices}
        if len(idx) != 1:
            why.append(f"`{name}` is read at {len(idx)} indices")
            continue
        a, b = subs[0].indices[0]
        e = T.parse_expression(st.code[a:b])
        if e is None or not _unit_step(e, var):
            why.append(f"`{name}[{st.text[a:b].strip()}]` does not step by one with `{var}`")
            continue
        moving = [
            nm
            for nm, _ in T.identifiers(st, (a, b))
            if nm != var and (nm in local or T.assignments(st, nm, span))
        ]
        if moving:
            why.append(f"`{name}[...]`'s index changes with `{moving[0]}` too")
            continue
        if any(u.address_taken for u in uses):
            why.append(f"the address of `{name}[...]` is taken")
            continue
        read = written = cond = False
        for s in subs:
            n = s.node
            par = n.parent if n is not None else None
            target = (
                par is not None
                and par.type in ("assignment_expression", "update_expression")
                and (par.child_by_field_name("left") == n or par.type == "update_expression")
            )
            if target:
                written = True
                op = par.child_by_field_name("operator") if par is not None else None
                if par is None or par.type == "update_expression" or op is None or op.type != "=":
                    read = True
                kinds = _ancestor_types(st, n, within or span) if n is not None else []
                if any(t in kinds for t in _CONDITIONAL):
                    cond = True
            else:
                read = True
        if written and "const" in p.type.split("*")[0].split():
            why.append(f"`{name}` is const and written")
            continue
        elem = " ".join(
            x
            for x in p.type.replace("*", " ").split()
            if x not in ("const", "volatile", "__restrict__", "__restrict", "restrict")
        )
        # a buffer only written is read first when some runs may not write it
        early = bool(re.search(r"\breturn\b", re.sub(guard, "", ks.code[span[0] : span[1]])))
        preload = read or cond or early if guard else read or cond
        text = st.text[a:b].strip()
        out.append(
            _Buffer(name, elem, text, tuple(s.span for s in subs), read, preload, written, k * w)
        )
    return out, why


_CONDITIONAL = (
    "if_statement",
    "conditional_expression",
    "for_statement",
    "while_statement",
    "do_statement",
    "switch_statement",
    "binary_expression",  # a && b: the right side conditional (and harmless elsewhere)
    "lambda_expression",
)


def _replaced(ks: KernelSource, span: T.Span, bufs: list[_Buffer], q: str) -> str:
    """The text of ``span`` with each ``buf[X]`` the lane's element ``ga303_buf[q]``."""
    edits = sorted(
        ((s, e, f"{PREFIX}{b.name}[{q}]") for b in bufs for s, e in b.spans), reverse=True
    )
    out = ks.text[span[0] : span[1]]
    for s, e, new in edits:
        out = out[: s - span[0]] + new + out[e - span[0] :]
    return out


def _carried(
    ks: KernelSource, span: T.Span, var: str, reduced: frozenset[str] = frozenset()
) -> str | None:
    """A variable declared outside ``span`` that ``span`` changes before it sets it (a value
    carried from one element to the next), or ``var`` changed (None: none). ``reduced``: the
    variables found order-free reductions (:mod:`gpuadvise.source.fixkit_reduce`), let be."""
    st = ks.tree
    local = _declared(st, span)
    firsts: dict[str, T.Assignment] = {}
    for a in T.assignments(st, None, span):
        if a.target and a.target not in local and a.target not in reduced:
            firsts.setdefault(a.target, a)
    params = {p.name for p in (ks.kernel.params if ks.kernel else ())}
    for s in T.subscripts(st, None, span):
        par = s.node.parent if s.node is not None else None
        if s.name in local or s.name in params or par is None:
            continue
        if par.type == "update_expression" or (
            par.type == "assignment_expression" and par.child_by_field_name("left") == s.node
        ):
            return f"`{s.name}` (declared outside) is written: values carried across elements"
    # a member or a pointee of a variable declared outside (``acc.x += v``, ``*q = v``)
    for n in st.walk(types=("assignment_expression", "update_expression"), within=span):
        t = n.child_by_field_name("left" if n.type == "assignment_expression" else "argument")
        if t is None or t.type == "identifier" or not span[0] <= st.start(n) < span[1]:
            continue  # a plain variable: above and below
        while t is not None and t.type in (
            "field_expression",
            "pointer_expression",
            "subscript_expression",
            "parenthesized_expression",
        ):
            t = t.child_by_field_name("argument") or (
                t.named_children[0] if t.named_children else None
            )
        root = st.text_of(t) if t is not None and t.type == "identifier" else None
        if root and root not in local and root not in params and root not in firsts:
            return f"`{root}` (declared outside) is written: values carried across elements"
    for name, a in firsts.items():
        if name == var:
            return f"the statements change `{var}`"
        first_use = min((u.span[0] for u in T.uses(st, name, span)), default=a.span[0])
        stmt = T.statement_at(st, a.span[0])
        top = stmt is not None and stmt.node is not None and stmt.node.parent is not None
        reads_itself = a.value is not None and bool(T.uses(st, name, a.value))
        if a.kind != "assign" or first_use < a.span[0] or reads_itself or not top:
            return f"`{name}` (declared outside) carries a value from one element to the next"
        kinds = _ancestor_types(st, stmt.node, span) if stmt and stmt.node else []  # type: ignore[arg-type]
        if any(t in kinds for t in _CONDITIONAL):
            return f"`{name}` (declared outside) is set on some elements only"
    return None


def _lines(pad: str, body: list[str]) -> str:
    return "\n".join(ln if ln.startswith("#") or not ln else pad + ln for ln in body)


def _indent(text: str, by: str) -> list[str]:
    lines = text.strip().split("\n")
    width = min((len(ln) - len(ln.lstrip()) for ln in lines[1:] if ln.strip()), default=0)
    out = [lines[0].strip()] + [ln[width:] for ln in lines[1:]]
    return [by + ln if ln.strip() else "" for ln in out]


def _chunk_code(bufs: list[_Buffer], ivar: str, itype: str, first: str, load: bool) -> list[str]:
    """``{ T i = first; chunk copies }``: each buffer's chunk read into (``load``) or written
    from its lane array."""
    lines = []
    for b in bufs:
        ct = CHUNK_TYPES[b.bytes]
        arr = f"{PREFIX}{b.name}"
        if load and b.preload:
            lines.append(
                f"    *reinterpret_cast<{ct}*>({arr}) = "
                f"*reinterpret_cast<const {ct}*>(&{b.name}[{b.index}]);"
            )
        if not load and b.written:
            lines.append(
                f"    *reinterpret_cast<{ct}*>(&{b.name}[{b.index}]) = "
                f"*reinterpret_cast<const {ct}*>({arr});"
            )
    if not lines:
        return []
    return ["{", f"    {itype} {ivar} = {first};", *lines, "}"]


def _aligned(bufs: list[_Buffer]) -> str:
    return " &&\n        ".join(
        f"reinterpret_cast<size_t>(&{b.name}[{b.index}]) % {b.bytes}u == 0" for b in bufs
    )


def _pad_of(ks: KernelSource, offset: int) -> str:
    line0 = ks.text.rfind("\n", 0, offset) + 1
    m = re.match(r"[ \t]*", ks.text[line0:offset])
    return m.group(0) if m else ""


def _check_body(ks: KernelSource, span: T.Span, loop: bool, block: bool = False) -> str | None:
    """Why the statements of ``span`` cannot run on other elements (None: they can).
    ``block``: a block-stride loop, whose CTA takes the same elements after the rewrite (the
    block's position may be read)."""
    code = ks.code[span[0] : span[1]]
    if _BARRIER.search(code):
        return "the statements synchronize or use shared memory"
    if _POSITION.search(re.sub(r"\bblockIdx\b", "", code) if block else code):
        return "the statements read the thread's or the block's position other than by the index"
    st = ks.tree
    if any(st.walk(types=("goto_statement",), within=span)):
        return "the statements use goto"
    if loop:
        if any(st.walk(types=("return_statement",), within=span)):
            return "the loop's body returns"
        inner = ("for_statement", "while_statement", "do_statement", "switch_statement")
        for n in st.walk(types=("break_statement", "continue_statement"), within=span):
            if not any(t in inner for t in _ancestor_types(st, n, span)):
                return "the loop's body leaves the iteration (break, continue)"
    return None


def _tainted(ks: KernelSource, names: set[str], before: int) -> set[str]:
    """The variables declared in the body before ``before`` whose value comes from the thread's
    or the block's position (through each other too), less ``names``."""
    out: set[str] = set()
    for d in ks.declarations(within=(ks.body_start, before)):
        for x in d.declarators:
            if x.init is None or x.name in names:
                continue
            init = ks.code[x.init[0] : x.init[1]]
            if _POSITION.search(init) or any(re.search(rf"\b{t}\b", init) for t in out):
                out.add(x.name)
    return out


def per_thread_vectors(
    ks: KernelSource, path: str, sizes: Mapping[str, int], k: int, must: str | None = None
) -> VectorFix:
    """A thread per element made ``k`` consecutive elements per thread (see the module);
    ``must``: a buffer that must be among those read as chunks (the finding's)."""
    st = ks.tree
    if PREFIX in ks.code:
        return VectorFix(None, f"the source already uses names starting with {PREFIX}")
    top = ks.top_level()
    for j, s in enumerate(top):
        if s.kind != "declaration":
            continue
        decls = ks.declarations(within=(s.start, s.end + 1))
        if len(decls) != 1 or len(decls[0].declarators) != 1:
            continue
        x = decls[0].declarators[0]
        if x.init is None or not _is_global_x(st, x.init):
            continue
        return _per_thread(ks, path, sizes, k, top, j, decls[0], x, must)
    return VectorFix(None, "no declaration `i = blockIdx.x * blockDim.x + threadIdx.x` in the body")


def _is_global_x(st: T.SourceTree, span: T.Span) -> bool:
    """``blockIdx.x * blockDim.x + threadIdx.x`` in any order, casts allowed."""
    e = T.expr_at(st, span)
    if e is None:
        return False
    e = e.stripped(casts=_INT_TYPES)
    if e.kind != "binary" or e.op != "+":
        return False
    terms = sorted(_norm(a.stripped(casts=_INT_TYPES).text) for a in e.args)
    if terms[1] != "threadIdx.x":
        return False
    m = T.parse_expression(terms[0])
    if m is None or m.kind != "binary" or m.op != "*":
        return False
    return sorted(_norm(a.stripped(casts=_INT_TYPES).text) for a in m.args) == [
        "blockDim.x",
        "blockIdx.x",
    ]


_INT_TYPES = ("int", "unsigned", "unsigned int", "size_t", "long", "long long", "int64_t")


def _bound(
    ks: KernelSource, cond: T.Span, var: str, upper: bool, chained: bool = True
) -> str | None:
    """``n`` of ``var < n`` (``upper``; the first operand of an ``&&`` chain may be it) or of
    ``var >= n`` (not ``upper``), either way round."""
    e = T.expr_at(ks.tree, cond)
    while e is not None and e.kind == "paren":
        e = e.args[0]
    if e is not None and upper and chained and e.kind == "binary" and e.op == "&&":
        e = e.chain(("&&",))[0][1]
    if e is None or e.kind != "binary":
        return None
    a, b = (x.stripped() for x in e.args)
    want = ("<", ">") if upper else (">=", "<=")
    if e.op == want[0] and a.text == var:
        return ks.text[b.span[0] : b.span[1]] if not re.search(rf"\b{var}\b", b.text) else None
    if e.op == want[1] and b.text == var:
        return ks.text[a.span[0] : a.span[1]] if not re.search(rf"\b{var}\b", a.text) else None
    return None


def _per_thread(ks, path, sizes, k, top, j, decl, x, must) -> VectorFix:  # type: ignore[no-untyped-def]
    st = ks.tree
    var = x.name
    rest = top[j + 1 :]
    if not rest:
        return VectorFix(None, f"nothing follows the index `{var}`")
    span = (rest[0].start, rest[-1].end + 1)
    guards = ks.ifs(within=(rest[0].start, rest[0].end + 1))
    g = guards[0] if guards and guards[0].head[0] == rest[0].start else None
    n = None
    guard = ""
    within = span
    if g is not None:
        cons = ks.code[g.consequence[0] : g.consequence[1]]
        if re.fullmatch(r"\{?\s*return\s*;\s*\}?", cons.strip()):
            n = _bound(ks, g.condition, var, upper=False)
            guard = re.escape(ks.code[rest[0].start : g.consequence[1]])
        elif len(rest) == 1:
            n = _bound(ks, g.condition, var, upper=True)
            plain_bound = _bound(ks, g.condition, var, upper=True, chained=False)
            if plain_bound is not None:
                within = g.consequence
    if n is None:
        return VectorFix(None, f"`{var}` is not followed by a bounds check `if ({var} < n)`")
    why = _check_body(ks, span, loop=False) or _carried(ks, span, var)
    if why is None:
        others = _tainted(ks, {var}, rest[0].start)
        used = {nm for nm, _ in T.identifiers(st, span)} & others
        if used:
            why = f"the statements use `{sorted(used)[0]}`, of the thread's position"
    if why is not None:
        return VectorFix(None, why)
    bufs, skipped = _buffers(ks, span, var, k, sizes, guard=guard or "$^", within=within)
    if not bufs or (must is not None and must not in {b.name for b in bufs}):
        return VectorFix(None, "; ".join(skipped) or f"`{must}` is not read at the index")
    itype = decl.type
    q = f"{PREFIX}q"
    v = f"{PREFIX}v"
    ok = f"{PREFIX}ok"
    pad = _pad_of(ks, top[j].start)
    index_text = ks.text[x.init[0] : x.init[1]]
    lanes = _replaced(ks, span, bufs, q)
    plain = ks.text[span[0] : span[1]]
    body = [
        f"// {k} consecutive elements per thread: "
        + ", ".join(f"`{b.name}`" for b in bufs)
        + " as one access each (when in bounds and aligned)",
        f"const {itype} {v} = {index_text};",
        f"bool {ok};",
        "{",
        f"    {itype} {var} = {v} * {k};",
        f"    {ok} = {var} + {k - 1} < {n} && {_aligned(bufs)};",
        "}",
        *(f"alignas({b.bytes}) {b.elem} {PREFIX}{b.name}[{k}];" for b in bufs),
        f"if ({ok}) {{",
        *("    " + ln for ln in _chunk_code(bufs, var, itype, f"{v} * {k}", load=True)),
        "}",
        "#pragma unroll",
        f"for (int {q} = 0; {q} < {k}; ++{q}) {{",
        f"    {itype} {var} = {v} * {k} + {q};",
        f"    if ({ok}) [&]() {{",
        *_indent(lanes, "        "),
        "    }();",
        "    else [&]() {",
        *_indent(plain, "        "),
        "    }();",
        "}",
        f"if ({ok}) {{",
        *("    " + ln for ln in _chunk_code(bufs, var, itype, f"{v} * {k}", load=False)),
        "}",
    ]
    text = _lines(pad, body).lstrip(" \t")
    rw = ks.rewrite().replace(top[j].start, rest[-1].end + 1, text)
    diff = rw.diff(path)
    written = tuple(b.name for b in bufs if b.written)
    return VectorFix(diff, "", tuple(b.name for b in bufs), k, "per-thread", written)


def loop_vectors(
    ks: KernelSource,
    path: str,
    sizes: Mapping[str, int],
    k: int,
    at: int,
    must: str | None = None,
) -> VectorFix:
    """The strided ``for`` loop holding offset ``at`` made a loop over chunks of ``k`` elements
    and the original loop over the rest (see the module); ``must``: a buffer that must be
    among those read as chunks (the finding's)."""
    st = ks.tree
    if PREFIX in ks.code:
        return VectorFix(None, f"the source already uses names starting with {PREFIX}")
    node = next(iter(T.enclosing(st, at, ("for_statement",))), None)
    if node is None:
        return VectorFix(None, "the load is in no for loop")
    lp = T.loops(st, st.span(node))[0]
    if lp.init is None or lp.condition is None or lp.update is None:
        return VectorFix(None, "the loop lacks an initializer, a condition or a step")
    init = lp.node.child_by_field_name("initializer") if lp.node is not None else None
    decl = T._declaration(st, init) if init is not None and init.type == "declaration" else None
    if decl is None or len(decl.declarators) != 1 or decl.declarators[0].init is None:
        return VectorFix(None, "the loop does not declare one index")
    x = decl.declarators[0]
    var, itype = x.name, decl.type
    assert x.init is not None
    start = ks.text[x.init[0] : x.init[1]]
    n = _bound(ks, lp.condition, var, upper=True)
    upd = T.expr_at(st, lp.update)
    step = None
    if upd is not None and upd.kind == "assignment" and upd.args[0].text == var:
        r = upd.args[1].stripped()
        if upd.op == "+=":
            step = ks.text[r.span[0] : r.span[1]]
        elif upd.op == "=" and r.kind == "binary" and r.op == "+" and r.args[0].text == var:
            step = ks.text[r.args[1].span[0] : r.args[1].span[1]]
    if n is None or step is None:
        return VectorFix(None, f"the loop is not `for ({var} = s; {var} < n; {var} += S)`")
    if "threadIdx" not in _expand(ks, start, lp.span[0]):
        return VectorFix(None, "the loop's start is not the thread's position")
    if not re.search(r"\b(?:blockDim|gridDim)\b", _expand(ks, step, lp.span[0])):
        return VectorFix(None, "the loop's step is not a count of threads")
    body = lp.body
    grid = bool(re.search(r"\bgridDim\b", _expand(ks, step, lp.span[0])))
    # a block-stride loop's partials are combined by its block: values it reduces may be kept
    found, no = reductions(ks, body, _declared(st, body), lp.span[0])
    why = _check_body(ks, body, loop=True, block=not grid)
    if why is None and found and grid:
        why = (
            f"the grid-stride loop reduces {found[min(found)].words()}: each CTA's partials "
            "would change"
        )
    why = why or _carried(ks, body, var, frozenset(found))
    if why is not None and no is not None and why.startswith(no.split(" ", 1)[0]):
        why = no  # the reduction's own reason is the sharper one
    for nm in {nm for nm, _ in T.identifiers(st, (lp.condition[0], lp.condition[1]))}:
        if nm != var and T.assignments(st, nm, body):
            why = why or f"the bound `{nm}` changes in the loop"
    if why is None:
        others = _tainted(ks, {var}, lp.span[0])
        used = {nm for nm, _ in T.identifiers(st, body)} & others
        if used and any("threadIdx" in _expand(ks, u, lp.span[0]) for u in used):
            why = f"the loop's body uses `{sorted(used)[0]}`, of the thread's position"
    if why is not None:
        return VectorFix(None, why)
    bufs, skipped = _buffers(ks, body, var, k, sizes)
    if not bufs or (must is not None and must not in {b.name for b in bufs}):
        return VectorFix(None, "; ".join(skipped) or f"`{must}` is not read at the loop's index")
    q, v, ok, nv = (f"{PREFIX}{s}" for s in ("q", "v", "ok", "nv"))
    pad = _pad_of(ks, lp.span[0])
    inner = ks.text[body[0] : body[1]]
    if lp.braced:
        inner = inner.strip()[1:-1]
    lanes = _replaced(ks, body, bufs, q)
    if lp.braced:
        lanes = lanes.strip()[1:-1]
    # the element's index (a macro may read it unseen: kept where no text reads it)
    unused = "" if re.search(rf"\b{re.escape(var)}\b", lanes) else "[[maybe_unused]] "
    lines = [
        f"// {k} consecutive elements per iteration: "
        + ", ".join(f"`{b.name}`" for b in bufs)
        + " as one access each (when aligned), then the rest one by one",
        f"const auto {nv} = ({n}) / {k};",
        f"bool {ok};",
        "{",
        f"    {itype} {var} = 0;",
        f"    {ok} = {_aligned(bufs)};",
        "}",
        f"for ({itype} {v} = {start}; {ok} && {v} < {nv}; {v} += {step}) {{",
        *(f"    alignas({b.bytes}) {b.elem} {PREFIX}{b.name}[{k}];" for b in bufs),
        *("    " + ln for ln in _chunk_code(bufs, var, itype, f"{v} * {k}", load=True)),
        "#pragma unroll",
        f"    for (int {q} = 0; {q} < {k}; ++{q}) {{",
        f"        {unused}{itype} {var} = {v} * {k} + {q};",
        "        {",
        *_indent(lanes, "            "),
        "        }",
        "    }",
        *("    " + ln for ln in _chunk_code(bufs, var, itype, f"{v} * {k}", load=False)),
        "}",
    ]
    _ = inner
    text = _lines(pad, lines).lstrip(" \t") + "\n" + pad
    rw = ks.rewrite()
    rw.insert(lp.span[0], text)
    rw.replace(
        x.init[0],
        x.init[1],
        f"({ok} ? static_cast<{itype}>({nv} * {k}) : static_cast<{itype}>(0)) + {start}",
    )
    written = tuple(b.name for b in bufs if b.written)
    kept = tuple(found[r] for r in sorted(found))
    return VectorFix(rw.diff(path), "", tuple(b.name for b in bufs), k, "loop", written, grid, kept)


def _expand(ks: KernelSource, text: str, before: int) -> str:
    """``text`` with the body's variables declared before ``before`` replaced by their
    initializers, and the file's object-like macros defined before it by their bodies, twice
    over (enough for ``tid = blockIdx.x * blockDim.x + threadIdx.x``, ``#define STRIDE
    blockDim.x``)."""
    inits = {name: body for at, name, body in defines(ks.tree) if at < before}
    inits.update(
        (x.name, ks.code[x.init[0] : x.init[1]])
        for d in ks.declarations(within=(ks.body_start, before))
        for x in d.declarators
        if x.init is not None
    )
    for _ in range(2):
        text = re.sub(
            r"\b[A-Za-z_]\w*\b",
            lambda m: f"({inits[m.group(0)]})" if m.group(0) in inits else m.group(0),
            text,
        )
    return text


def _init_of(name: str, inits: Mapping[str, str]) -> str:
    return f"({inits[name]})" if name in inits else name


def _declared(st: T.SourceTree, span: T.Span) -> set[str]:
    """The names declared within ``span``, for-loop initializers included."""
    out = {x.name for d in T.declarations(st, span) for x in d.declarators}
    for n in st.walk(types=("for_statement",), within=span):
        if not span[0] <= st.start(n) < span[1]:
            continue  # a loop around ``span``
        init = n.child_by_field_name("initializer")
        d = T._declaration(st, init) if init is not None and init.type == "declaration" else None
        out |= {x.name for x in d.declarators} if d is not None else set()
    return out
