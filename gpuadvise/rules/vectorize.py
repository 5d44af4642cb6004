"""GA303's rewrite: ``n`` consecutive scalar accesses ``a[E]``, ``a[E + 1]`` ... of one thread as one
vector access (``float4``, ``uint2`` ...), as a source diff, or why not; and whether the vector's
alignment is provable from the source (:func:`multiple_of`).

Loads in one statement become one ``reinterpret_cast`` vector load whose components replace the
accesses (a guarded ``c ? a[i] : 0`` becomes an ``if``/``else``); stores in consecutive statements
one vector store. Pure text work over :class:`~gpuadvise.source.text.KernelSource`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gpuadvise.source.text import KernelSource, line_of
from gpuadvise.source.tree import parse_expression

__all__ = ["VectorRewrite", "multiple_of", "vector_rewrite"]

# element type -> (size in bytes, the vector type of 2 and of 4 of them with .x .y .z .w members)
_NATIVE: dict[str, tuple[int, dict[int, str]]] = {
    "float": (4, {2: "float2", 4: "float4"}),
    "int": (4, {2: "int2", 4: "int4"}),
    "signed": (4, {2: "int2", 4: "int4"}),
    "signed int": (4, {2: "int2", 4: "int4"}),
    "int32_t": (4, {2: "int2", 4: "int4"}),
    "unsigned": (4, {2: "uint2", 4: "uint4"}),
    "unsigned int": (4, {2: "uint2", 4: "uint4"}),
    "uint32_t": (4, {2: "uint2", 4: "uint4"}),
    "double": (8, {2: "double2"}),
    "long long": (8, {2: "longlong2"}),
    "long long int": (8, {2: "longlong2"}),
    "int64_t": (8, {2: "longlong2"}),
    "unsigned long long": (8, {2: "ulonglong2"}),
    "unsigned long long int": (8, {2: "ulonglong2"}),
    "uint64_t": (8, {2: "ulonglong2"}),
}
# other element types of a known size: loaded as raw words and reinterpreted
_RAW_SIZES: dict[str, int] = {
    "uchar4": 4, "char4": 4, "short2": 4, "ushort2": 4, "half2": 4, "__half2": 4,
    "__nv_bfloat162": 4, "nv_bfloat162": 4,
    "float2": 8, "int2": 8, "uint2": 8, "short4": 8, "ushort4": 8, "long": 8, "unsigned long": 8,
    "size_t": 8,
}  # fmt: skip
_RAW_VECTOR = {8: "uint2", 16: "uint4"}
_COMPONENTS = ("x", "y", "z", "w")
_CAST_TYPES = (
    "unsigned", "int", "unsigned int", "long", "unsigned long", "long long",
    "unsigned long long", "size_t", "int64_t", "uint64_t", "int32_t", "uint32_t",
)  # fmt: skip


# ---------------------------------------------------------------------------------------------
# The source side: the accesses, their index, and the rewrite


_BUILTINS = frozenset({"threadIdx", "blockIdx", "blockDim", "gridDim"})


@dataclass(frozen=True)
class _Access:
    start: int  # offsets in the file's text of ``name[...]`` (end exclusive)
    end: int
    index: str  # the subscript, whitespace normalized
    base: str  # the index without a trailing ``+ c``
    offset: int  # c
    store: bool
    compound: bool
    base_span: tuple[int, int] = (0, 0)  # where the base is in the text


def _norm(expr: str) -> str:
    return re.sub(r"\s+", " ", expr).strip()


def _split_offset(ks: KernelSource, index: tuple[int, int]) -> tuple[str, int, tuple[int, int]]:
    """``i + 3`` -> (``i``, 3); ``i`` -> (``i``, 0): a trailing ``+ <decimal literal>`` only."""
    e = ks.expr(index)
    if e is not None and e.kind == "binary" and e.op == "+":
        left, right = e.args
        if right.kind == "literal" and re.fullmatch(r"\d+[uU]?", right.text):
            return left.text, int(right.text.rstrip("uU")), left.span
    return _norm(ks.code[index[0] : index[1]]), 0, index


def _accesses(ks: KernelSource, name: str, lines: Sequence[int]) -> list[_Access]:
    """Every ``name[...]`` on ``lines`` of the kernel body (its first subscript)."""
    out = []
    for sub in ks.subscripts(name):
        if ks.line_at(sub.span[0]) not in lines:
            continue
        first = sub.indices[0]
        end = first[1] + 1  # after its ``]``
        e = ks.expr(sub.span)
        parent = ks.expr_parent(sub.span)
        store = compound = False
        if parent is not None and parent.kind == "assignment" and parent.args[0].span == sub.span:
            store, compound = parent.op == "=", parent.op != "="
        elif parent is not None and parent.kind == "update":
            compound = True
        if e is None:
            continue
        base, off, base_span = _split_offset(ks, first)
        index = _norm(ks.code[first[0] : first[1]])
        out.append(_Access(sub.span[0], end, index, base, off, store, compound, base_span))
    return out


def _identifiers(ks: KernelSource, span: tuple[int, int]) -> set[str]:
    return {n for n, _ in ks.identifiers(span)} - _BUILTINS


def _modified(ks: KernelSource, ident: str, within: tuple[int, int] | None = None) -> bool:
    """Whether ``ident`` is assigned (its declaration's initializer included) in the body."""
    return bool(ks.assignments(ident, within))


def _definition(ks: KernelSource, ident: str) -> tuple[int, int] | None:
    """Where the expression ``ident`` is initialized with is, when that is its only
    assignment in the body."""
    a = ks.assignments(ident)
    if len(a) != 1 or a[0].kind not in ("init", "assign") or a[0].value is None:
        return None
    return a[0].value


def multiple_of(ks: KernelSource, expr: Any, n: int, depth: int = 0) -> bool:
    """Whether the integer expression ``expr`` (an :class:`Expr`, a span of the file or a text)
    is a multiple of ``n`` (a power of two) by construction: sums of terms each a multiple; a
    term is a product with a multiple factor, a shift left by enough bits, a literal multiple,
    or a variable whose only assignment (its initialization in the body) is such an
    expression. Unsigned wrap-around keeps multiples of a power of two."""
    if depth > 8 or n <= 1:
        return n <= 1
    if isinstance(expr, str):
        expr = parse_expression(expr)
    elif isinstance(expr, tuple):
        expr = ks.expr(expr)
    if expr is None:
        return False
    e = expr.stripped(_CAST_TYPES)
    terms = e.chain("+-")
    if len(terms) > 1:
        return all(multiple_of(ks, t, n, depth + 1) for _op, t in terms)
    if e.kind == "binary" and e.op == "<<":
        x, sh = e.args
        s = sh.stripped()
        if s.kind == "literal" and re.fullmatch(r"\d+[uU]?", s.text):
            return (1 << int(s.text.rstrip("uU"))) % n == 0 or multiple_of(ks, x, n, depth + 1)
        return False
    factors = e.chain("*/%")
    if len(factors) > 1:
        if any(op in ("/", "%") for op, _ in factors):
            return False  # (a * b) / c, a % c: not provably a multiple
        return any(multiple_of(ks, f, n, depth + 1) for _op, f in factors)
    if e.kind == "literal":
        v = ks.value(e.text)
        return v is not None and v % n == 0
    if e.kind == "name":
        d = _definition(ks, e.text)
        return d is not None and multiple_of(ks, d, n, depth + 1)
    return False


@dataclass(frozen=True)
class VectorRewrite:
    diff: str | None
    why_not: str  # why there is no diff ("" when there is one)
    vector_type: str = ""
    index: str = ""
    automatic: bool = False
    why_display: str = ""


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _fresh(body: str, want: str) -> str:
    name, k = want, 2
    while re.search(rf"\b{re.escape(name)}\b", body):
        name, k = f"{want}{k}", k + 1
    return name


def _vector_for(elem: str, size: int, n: int) -> tuple[str, bool] | None:
    """(vector type, native: has .x .y .z .w members of the element type) for n elements."""
    native = _NATIVE.get(elem)
    if native is not None and native[0] == size and n in native[1]:
        return native[1][n], True
    if _RAW_SIZES.get(elem, native[0] if native else 0) == size and size * n in _RAW_VECTOR:
        return _RAW_VECTOR[size * n], False
    return None


def vector_rewrite(
    ks: KernelSource, path: str, name: str, elem: str, is_const: bool, width: int, vector: int,
    lines: Sequence[int], store: bool,
) -> VectorRewrite:  # fmt: skip
    """A diff making the ``vector // width`` consecutive accesses ``name[E + c]`` on ``lines``
    one vector access, or why not; and whether the alignment is provable (automatic)."""
    n = vector // width
    vt = _vector_for(elem, width, n)
    if vt is None:
        return VectorRewrite(None, f"no vector type of {n} {elem} is known to gpuadvise")
    vtype, native = vt
    every = _accesses(ks, name, lines)
    acc = [a for a in every if a.store == store]
    if any(a.compound for a in every):
        return VectorRewrite(None, f"{name} is read and written by one expression")
    by_base: dict[str, list[_Access]] = {}
    for a in acc:
        by_base.setdefault(a.base, []).append(a)
    group = None
    for base, items in by_base.items():
        offs = sorted(a.offset for a in items)
        lo = offs[0]
        if offs == list(range(lo, lo + n)) and lo % n == 0:
            group = (base, sorted(items, key=lambda a: a.offset))
    if group is None or len(acc) != n:
        found = ", ".join(f"{name}[{a.index}]" for a in acc) or "none"
        return VectorRewrite(
            None,
            f"the source does not show {n} accesses {name}[E + 0..{n - 1}] here (found: {found})",
        )
    base, items = group
    lo = items[0].offset
    index = base if lo == 0 else f"{base} + {lo}"
    base_span = items[0].base_span
    for ident in _identifiers(ks, base_span):
        if ident == name:
            return VectorRewrite(None, "the index reads the array itself")
    if _modified(ks, name):
        return VectorRewrite(None, f"the pointer {name} is changed in the kernel")
    if store:
        rw = _rewrite_stores(ks, path, name, elem, vtype, native, items, index)
    else:
        rw = _rewrite_loads(ks, path, name, elem, is_const, vtype, native, items, index, vector)
    if rw.diff is None:
        return rw
    if multiple_of(ks, base_span, n) and lo % n == 0:
        auto, why = True, ""
    else:
        ident_defs = [
            f"{i} = {_norm(ks.code[d[0] : d[1]])}"
            for i in sorted(_identifiers(ks, base_span))
            if (d := _definition(ks, i))
        ]
        shown = f"`{base}`" + (f" ({'; '.join(ident_defs)})" if ident_defs else "")
        why = (
            f"the index {shown} is not a multiple of {n} by construction, so {vector}-byte "
            "alignment cannot be proven from the source (every traced access was aligned)"
        )
        auto = False
    return VectorRewrite(rw.diff, "", vtype, index, auto, why)


def _component(vname: str, ename: str, native: bool, j: int) -> str:
    return f"{vname}.{_COMPONENTS[j]}" if native else f"{ename}[{j}]"


def _rewrite_loads(
    ks: KernelSource, path: str, name: str, elem: str, is_const: bool, vtype: str, native: bool,
    items: list[_Access], index: str, vector: int,
) -> VectorRewrite:  # fmt: skip
    first = min(items, key=lambda a: a.start)
    st = ks.statement_at(first.start)
    if st is None or any(not (st.start <= a.start < st.end) for a in items):
        return VectorRewrite(
            None, "the accesses are not in one statement (or are in an if/for/while header)"
        )
    code, text = ks.code, ks.text
    stmt_code = code[st.start : st.end]
    if st.labelled:
        return VectorRewrite(None, "the statement carries a label")
    for ident in sorted(_identifiers(ks, items[0].base_span)):
        if _modified(ks, ident, (st.start, st.end)):
            return VectorRewrite(None, f"the statement changes {ident}, which the index reads")
    line0 = line_of(text, st.start)
    line1 = line_of(text, st.end)
    line_start = text.rfind("\n", 0, st.start) + 1
    if code[line_start : st.start].strip():
        return VectorRewrite(None, "the statement shares its first line with other code")
    if code[st.end + 1 : text.find("\n", st.end) if "\n" in text[st.end :] else len(text)].strip():
        return VectorRewrite(None, "the statement shares its last line with other code")
    body = code[ks.body_start : ks.body_end + 1]
    vname = _fresh(body, f"{name}_v")
    ename = _fresh(body, f"{name}_e")
    cq = "const " if is_const else ""
    n = len(items)
    comment = f"  // {name}[{index}] .. {name}[{index} + {n - 1}] in one {vector}-byte access"
    decl = [f"const {vtype} {vname} = *reinterpret_cast<{cq}{vtype}*>(&{name}[{index}]);{comment}"]
    if not native:
        decl.append(f"const {elem}* {ename} = reinterpret_cast<const {elem}*>(&{vname});")

    def replaced(seg_start: int, seg_end: int) -> str:
        """The text of ``seg_start:seg_end`` with the accesses replaced (right to left)."""
        out = text[seg_start:seg_end]
        for a in sorted(items, key=lambda a: a.start, reverse=True):
            if seg_start <= a.start < seg_end:
                j = a.offset - items[0].offset
                r0, r1 = a.start - seg_start, a.end - seg_start
                out = out[:r0] + _component(vname, ename, native, j) + out[r1:]
        return out

    old_lines = text.split("\n")
    ed = ks.rewrite()
    ind = _indent(old_lines[line0 - 1])
    last_line_end = text.find("\n", st.end)
    last_line_end = len(text) if last_line_end < 0 else last_line_end
    tern = _ternary(ks, st)
    has_cond = any(tok in stmt_code for tok in ("?", "&&", "||"))
    if tern is None and has_cond:
        return VectorRewrite(
            None, "the accesses are evaluated conditionally (?:, && or ||) within the statement"
        )
    if tern is not None:
        lhs, cond, (off_yes, end_yes), no = tern
        yes = code[off_yes:end_yes]
        if any(not (off_yes <= a.start < off_yes + len(yes)) for a in items):
            return VectorRewrite(None, "the accesses are not all in the taken branch of ?:")
        if any(t in cond + no for t in ("?", "&&", "||")) or any(
            t in yes for t in ("?", "&&", "||")
        ):
            return VectorRewrite(None, "the statement's condition is too complex to rewrite")
        if st.header_end is not None or re.match(r"[A-Za-z_][\w\s:<>,*&]*\s+\w+$", lhs.strip()):
            return VectorRewrite(None, "a declaration or braceless body holds the ?: statement")
        tail = text[st.end + 1 : last_line_end]
        yes_text = replaced(off_yes, off_yes + len(yes))
        inner = ind + "    "
        new = [f"{ind}if ({_norm(cond)}) {{"]
        new += [inner + d for d in decl]
        new += [f"{inner}{_norm(lhs)} = {_norm(yes_text)};{tail}", f"{ind}}} else {{"]
        new += [f"{inner}{_norm(lhs)} = {_norm(no)};", f"{ind}}}"]
        ed.replace_lines(line0, line1, new)
        return VectorRewrite(ed.diff(path), "")
    new_stmt = replaced(line_start, last_line_end).split("\n")
    if st.header_end is None:
        ed.replace_lines(line0, line1, [ind + d for d in decl] + new_stmt)
        return VectorRewrite(ed.diff(path), "")
    # the body of a braceless if/for/while/else: give it braces
    hline = line_of(text, st.header_end - 1)
    if hline != line0 - 1 or code[st.header_end : text.find("\n", st.header_end)].strip():
        return VectorRewrite(None, "the statement is a braceless body on its header's line")
    hl = old_lines[hline - 1]
    hcode = code[text.rfind("\n", 0, st.header_end - 1) + 1 : text.find("\n", st.header_end)]
    if len(hcode.rstrip()) != len(hl.rstrip()):
        return VectorRewrite(None, "the control header has a comment after it")
    hind = _indent(hl)
    ed.replace_lines(hline, hline, [hl.rstrip() + " {"])
    ed.replace_lines(line0, line1, [ind + d for d in decl] + new_stmt + [hind + "}"])
    return VectorRewrite(ed.diff(path), "")


def _ternary(ks: KernelSource, st: Any) -> tuple[str, str, tuple[int, int], str] | None:
    """``LHS = COND ? A : B;`` (an assignment or a one-declarator declaration): the left side's
    and the condition's code, the taken branch's span, the other branch's code; None when the
    statement is not one."""
    if st.kind == "expression_statement":
        e = ks.expr((st.start, st.end))
        if e is None or e.kind != "assignment" or e.op != "=":
            return None
        lhs_end, value = e.args[0].span[1], e.args[1]
    elif st.kind == "declaration":
        inits = [d for d in ks.declarations(within=(st.start, st.end + 1))]
        dd = inits[0].declarators if len(inits) == 1 else ()
        if len(dd) != 1 or dd[0].init is None:
            return None
        init = ks.expr(dd[0].init)
        lhs_end = dd[0].name_span[1]
        if init is None:
            return None
        value = init
    else:
        return None
    if value.kind != "conditional" or len(value.args) != 3:
        return None
    cond, yes, no = value.args
    return ks.code[st.start : lhs_end], cond.text, yes.span, no.text


def _rewrite_stores(
    ks: KernelSource, path: str, name: str, elem: str, vtype: str, native: bool,
    items: list[_Access], index: str,
) -> VectorRewrite:  # fmt: skip
    code, text = ks.code, ks.text
    stmts = []
    for a in sorted(items, key=lambda a: a.start):
        st = ks.statement_at(a.start)
        if st is None or st.start != a.start or st.header_end is not None:
            return VectorRewrite(None, "each store must be a plain statement `a[i + c] = value;`")
        stmts.append((a, st))
    # consecutive statements, nothing between them
    for (_a, s0), (_b, s1) in zip(stmts, stmts[1:], strict=False):
        if code[s0.end + 1 : s1.start].strip():
            return VectorRewrite(None, "the stores are not consecutive statements")
    values = []
    for a, st in stmts:
        m = re.match(r"\s*=", code[a.end : st.end])
        assert m is not None
        rhs = text[a.end + m.end() : st.end]
        if ks.uses(name, within=(a.end + m.end(), st.end)):
            return VectorRewrite(None, f"a stored value reads {name}")
        values.append((a.offset, _norm(rhs)))
    values.sort()
    first, last = stmts[0][1], stmts[-1][1]
    line0, line1 = line_of(text, first.start), line_of(text, last.end)
    old_lines = text.split("\n")
    line_start = text.rfind("\n", 0, first.start) + 1
    end_line = text.find("\n", last.end)
    end_line = len(text) if end_line < 0 else end_line
    if code[line_start : first.start].strip() or code[last.end + 1 : end_line].strip():
        return VectorRewrite(None, "the stores share their lines with other code")
    tail = text[last.end + 1 : end_line]
    ind = _indent(old_lines[line0 - 1])
    body = code[ks.body_start : ks.body_end + 1]
    ptr = f"*reinterpret_cast<{vtype}*>(&{name}[{index}])"
    if native:
        new = [f"{ind}{ptr} = make_{vtype}({', '.join(v for _o, v in values)});{tail}"]
    else:
        vname, ename = _fresh(body, f"{name}_v"), _fresh(body, f"{name}_e")
        new = [f"{ind}{{", f"{ind}    {vtype} {vname};"]
        new.append(f"{ind}    {elem}* {ename} = reinterpret_cast<{elem}*>(&{vname});")
        new += [f"{ind}    {ename}[{j}] = {v};" for j, (_o, v) in enumerate(values)]
        new += [f"{ind}    {ptr} = {vname};{tail}", f"{ind}}}"]
    ed = ks.rewrite()
    ed.replace_lines(line0, line1, new)
    return VectorRewrite(ed.diff(path), "")
