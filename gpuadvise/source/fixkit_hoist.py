"""Hoisting a thread's repeated global loads into registers (issue 28's fix kit, item 2).

A thread that loads ``buf[f(v)]`` in a counted loop ``for (v = a; v < n; v += s)`` and runs that
loop again (nested in another loop that leaves the index alone: k-means' features once per
cluster; or a second and third pass with the same header over the same row: softmax's max, sum
and normalise) can load the values once: :func:`plan_hoist` loads the loop's first ``cap``
values into a register array before the first run, and each run becomes a fully unrolled loop
of ``cap`` guarded iterations reading the array, then the original loop for the iterations past
``cap`` (a longer row than this launch's, reloaded as before)::

    float feature_r[40];
    #pragma unroll
    for (int k = 0; k < 40; ++k) {
        int l = k;
        if (l < nfeatures) feature_r[k] = feature[l * npoints + point_id];
    }
    for (int i = 0; i < nclusters; i++) {
        ...
        #pragma unroll
        for (int k = 0; k < 40; ++k) {
            int l = k;
            if (l < nfeatures) ans += (feature_r[k] - ...);
        }
        for (int l = 40; l < nfeatures; l++) ans += (feature[l * npoints + point_id] - ...);

The array is indexed by compile-time constants only once unrolled, so it lives in registers
(an array indexed at run time would live in local memory: no better than the reload). Only
pure text work on the parsed tree: no I/O. Refused, with the reason, where the rewrite could
change what the kernel computes or cannot keep the values in registers: the loop is not
``for (v = a; v < n; v += s)`` (or ``<=``, ``++v``, ``v = v + s``), its body breaks out of it,
holds a loop or changes ``v`` or the bound; the index calls a function or uses a variable that
changes between the runs; the kernel stores to the buffer (or passes it on); a guard between
the new load and the old one tests a variable of the index (it may protect the address); more
values than ``MAX_VALUES`` a thread. Other pointers that may alias the buffer are an
assumption, which the check of the variant's outputs covers for the launch analysed only.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tree_sitter import Node

from gpuadvise.source import tree as T
from gpuadvise.source.edit import Rewrite
from gpuadvise.source.fixkit import written

__all__ = ["MAX_VALUES", "HoistPlan", "plan_hoist"]

MAX_VALUES = 64
"""Register values a thread may hold for the hoisted loads (of the 255 it may have)."""

_GUARDS = ("if_statement", "conditional_expression", "switch_statement", "case_statement")
_ASSIGNS = re.compile(r"\+\+|--|(?<![=!<>])=(?!=)")
_QUALIFIERS = re.compile(r"\b(?:const|volatile|__restrict__|__restrict|restrict)\b|\*|&")

Span = tuple[int, int]


@dataclass(frozen=True)
class _Header:
    var: str
    declared: bool  # in the header (else assigned there, declared before)
    vtype: str
    start: str
    step: str
    cond: str
    update: str


@dataclass(frozen=True)
class HoistPlan:
    """The edits of one hoist, not applied yet (several plans of one kernel may be combined
    where their edits do not overlap)."""

    shape: str  # "nested" (the loop runs again inside an outer loop) or "passes"
    loads: tuple[str, ...]  # the cached elements as written, ``buf[index]``
    arrays: tuple[str, ...]  # the register arrays' names
    loops: int  # loops rewritten
    cap: int  # iterations held in registers
    edits: tuple[tuple[int, int, str], ...]

    @property
    def span(self) -> Span:
        return min(a for a, _, _ in self.edits), max(b for _, b, _ in self.edits)

    def overlaps(self, other: HoistPlan) -> bool:
        (a, b), (c, d) = self.span, other.span
        return a <= d and c <= b

    def apply(self, rw: Rewrite) -> None:
        for a, b, text in self.edits:
            rw.replace(a, b, text)


def _norm(text: str) -> str:
    return "".join(text.split())


def _names(st: T.SourceTree, span: Span | None) -> set[str]:
    return {n for n, _ in T.identifiers(st, span)} if span is not None else set()


def _node_names(st: T.SourceTree, node: Node | None) -> set[str]:
    return _names(st, st.span(node)) if node is not None else set()


def _operand(text: str) -> str:
    t = text.strip()
    return t if re.fullmatch(r"[A-Za-z_][\w.]*(?:\(\))?|\d+[uUlL]*", t) else f"({t})"


def _iteration(h: _Header, k: str) -> str:
    """The loop variable's value in iteration ``k`` (a name or a number)."""
    term = k if h.step == "1" else f"{k} * {_operand(h.step)}"
    if k.isdigit() and h.step.isdigit():
        term = str(int(k) * int(h.step))
    return term if h.start == "0" else f"{_operand(h.start)} + {term}"


def _declared_type(st: T.SourceTree, kernel: T.Kernel, name: str, scope: Span) -> str | None:
    for p in kernel.params:
        if p.name == name:
            return None if p.pointer else _QUALIFIERS.sub("", p.type).strip() or None
    for d in T.declarations(st, scope):
        for x in d.declarators:
            if x.name == name and not x.pointer and not x.dims:
                return d.type or None
    return None


def _element_type(
    st: T.SourceTree, kernel: T.Kernel, name: str, scope: Span, depth: int = 0
) -> str | None:
    """The element type of the global pointer ``name`` (a pointer parameter, or a local pointer
    set from one: ``auto row = in + r * n``), None where unknown or not a plain pointer."""
    for p in kernel.params:
        if p.name == name:
            if not p.pointer or "[" in p.type:
                return None
            t = " ".join(_QUALIFIERS.sub(" ", p.type).split())
            return t or None
    for d in T.declarations(st, scope):
        for x in d.declarators:
            if x.name != name:
                continue
            if d.specifiers or x.dims:
                return None
            if d.type == "auto" and x.init is not None and depth < 3:
                m = re.match(r"\s*([A-Za-z_]\w*)\s*(?:[+-]|$)", st.code[x.init[0] : x.init[1]])
                return _element_type(st, kernel, m.group(1), scope, depth + 1) if m else None
            return d.type if x.pointer and d.type not in ("", "auto", "void") else None
    return None


def _aliases(st: T.SourceTree, name: str, scope: Span, depth: int = 0) -> list[str]:
    """The local pointers set from ``name`` plus an offset (``auto row = in + r * n``)."""
    out: list[str] = []
    for d in T.declarations(st, scope):
        for x in d.declarators:
            if x.init is None or not (x.pointer or d.type == "auto") or x.name == name:
                continue
            m = re.match(r"\s*([A-Za-z_]\w*)\s*(?:[+-]|$)", st.code[x.init[0] : x.init[1]])
            if m and m.group(1) == name:
                out.append(x.name)
                if depth < 3:
                    out += _aliases(st, x.name, scope, depth + 1)
    return out


def _stored(st: T.SourceTree, name: str, scope: Span, depth: int = 0) -> bool:
    """The kernel may store through ``name``: an element assigned or its address taken, the
    pointer passed to a function or stored through, or copied to a pointer that is."""
    if any(written(s) for s in T.subscripts(st, name, scope)):
        return True
    for n in st.walk(types=("identifier",), within=scope):
        if st.text_of(n) != name or not scope[0] <= st.start(n) < scope[1]:
            continue
        p = n.parent
        if p is not None and p.type == "subscript_expression":
            q = p.parent  # an element: only `&name[i]` hands its address on
            if (
                q is not None
                and q.type == "pointer_expression"
                and st.code_of(q).lstrip()[:1] == "&"
            ):
                return True
            continue
        for a in st.ancestors(n):
            if a.type in ("expression_statement", "compound_statement", "condition_clause"):
                break
            if a.type == "argument_list":
                return True
            if a.type in ("assignment_expression", "update_expression", "init_declarator"):
                left = a.child_by_field_name("left") or a.child_by_field_name("argument")
                if left is not None and left.type != "identifier":
                    return True  # `*name = ...`
                target = left if left is not None else a.child_by_field_name("declarator")
                alias = st.text_of(target).strip() if target is not None else ""
                if alias and alias != name and (depth >= 3 or _stored(st, alias, scope, depth + 1)):
                    return True
                break
    return False


def _header(st: T.SourceTree, lp: T.Loop, kernel: T.Kernel, scope: Span) -> _Header | str:
    n = lp.node
    if n is None or n.type != "for_statement":
        return "the loop is not a `for` loop"
    init, cond, upd = (n.child_by_field_name(f) for f in ("initializer", "condition", "update"))
    if init is None or cond is None or upd is None:
        return "the loop's header lacks a part"
    txt = st.code_of
    if init.type == "declaration":
        ds = [c for c in init.named_children if c.type == "init_declarator"]
        dn = ds[0].child_by_field_name("declarator") if len(ds) == 1 else None
        val = ds[0].child_by_field_name("value") if len(ds) == 1 else None
        if dn is None or val is None or dn.type != "identifier" or len(init.named_children) > 2:
            return "the loop's header declares more than its variable"
        var, start, declared = txt(dn), txt(val), True
        vtype = " ".join(st.code[st.start(init) : st.start(ds[0])].split())
    elif init.type == "assignment_expression" and txt(init).count("=") == 1:
        left, right = init.child_by_field_name("left"), init.child_by_field_name("right")
        if left is None or right is None or left.type != "identifier":
            return "the loop's start is not `v = ...`"
        var, start, declared = txt(left), txt(right), False
        vtype = _declared_type(st, kernel, var, scope) or ""
        if not vtype:
            return f"the type of `{var}` is not found"
    else:
        return "the loop's start is not `v = ...`"
    op = cond.child_by_field_name("operator")
    left, right = cond.child_by_field_name("left"), cond.child_by_field_name("right")
    o = op.type if op is not None else ""
    if cond.type != "binary_expression" or left is None or right is None:
        return "the loop's condition is not `v < bound`"
    if not (
        (o in ("<", "<=") and txt(left).strip() == var)
        or (o in (">", ">=") and txt(right).strip() == var)
    ):
        return "the loop's condition is not `v < bound`"
    step = ""
    if upd.type == "update_expression" and txt(upd).replace("+", "").strip() == var:
        step = "1" if txt(upd).count("+") == 2 else ""
    elif upd.type == "assignment_expression":
        left, right = upd.child_by_field_name("left"), upd.child_by_field_name("right")
        uop = upd.child_by_field_name("operator")
        if left is not None and right is not None and txt(left).strip() == var:
            if uop is not None and uop.type == "+=":
                step = txt(right)
            elif uop is not None and uop.type == "=" and right.type == "binary_expression":
                a, b = right.child_by_field_name("left"), right.child_by_field_name("right")
                bop = right.child_by_field_name("operator")
                if a is not None and b is not None and bop is not None and bop.type == "+":
                    step = (
                        txt(b) if txt(a).strip() == var else txt(a) if txt(b).strip() == var else ""
                    )
    step = step.strip()
    if not step or step.startswith("-") or var in re.findall(r"[A-Za-z_]\w*", step):
        return "the loop's step is not `v++` or `v += s`"
    return _Header(var, declared, vtype, start.strip(), step, txt(cond).strip(), txt(upd).strip())


def _body_why(st: T.SourceTree, lp: T.Loop, h: _Header, invariant: set[str]) -> str | None:
    n = lp.node
    assert n is not None
    if any(st.walk(types=("goto_statement",), within=lp.body)):
        return "the loop's body has a goto"
    for b in st.walk(types=("break_statement",), within=lp.body):
        owner = next(
            (a for a in st.ancestors(b) if a.type in T.LOOP_TYPES or a.type == "switch_statement"),
            None,
        )
        if owner == n:
            return "the loop's body breaks out of it"
    if T.loops(st, lp.body):
        return "the loop's body holds a loop (unrolling would copy it)"
    for name in sorted(invariant | {h.var}):
        if T.assignments(st, name, lp.body):
            return f"`{name}` changes in the loop's body"
    return None


def _changed(st: T.SourceTree, names: Iterable[str], span: Span) -> set[str]:
    """The names assigned or declared within ``span``."""
    want = set(names)
    got = {a.target for a in T.assignments(st, None, span) if a.target in want}
    for d in T.declarations(st, span):
        got |= {x.name for x in d.declarators if x.name in want}
    return got


def _loop_at(st: T.SourceTree, node: Node) -> T.Loop:
    return T.loops(st, st.span(node))[0]


def _outer(st: T.SourceTree, lp: T.Loop, buffer: str, inv: set[str], scope: Span) -> Node | None:
    """The outermost loop around ``lp`` whose runs leave the index (``inv``: its names, the
    bounds') and the buffer's pointer alone, inside any guard that tests them."""
    best = None
    assert lp.node is not None
    for a in st.ancestors(lp.node):
        if not scope[0] <= st.start(a) < scope[1]:
            break
        if a.type in _GUARDS:
            c = a.child_by_field_name("condition") or a.child_by_field_name("value")
            if _node_names(st, c) & inv:
                break
        if a.type in T.LOOP_TYPES:
            if _changed(st, inv | {buffer}, st.span(a)):
                break
            best = a
    return best


def _passes(st: T.SourceTree, lp: T.Loop, key: tuple[str, str]) -> list[T.Loop]:
    """The loops beside ``lp`` in its block with its header, each reading ``key``'s element."""
    n = lp.node
    if n is None or n.parent is None or n.parent.type != "compound_statement" or not lp.header:
        return []
    head = _norm(st.code_of(lp.header))
    out = []
    for c in n.parent.named_children:
        if c.type != "for_statement":
            continue
        other = _loop_at(st, c)
        if other.header is None or _norm(st.code_of(other.header)) != head:
            continue
        if any(_key(st, s) == key and not written(s) for s in T.subscripts(st, None, other.body)):
            out.append(other)
    return out if len(out) > 1 else []


def _key(st: T.SourceTree, s: T.Subscript) -> tuple[str, str]:
    return s.name, _norm(st.code[s.indices[0][0] : s.indices[0][1]]) if s.indices else ""


def _indent(text: str, offset: int) -> str:
    line0 = text.rfind("\n", 0, offset) + 1
    m = re.match(r"[ \t]*", text[line0:offset])
    return m.group(0) if m else ""


def _fresh(st: T.SourceTree, base: str, scope: Span, taken: set[str]) -> str:
    used = _names(st, scope) | taken
    name, k = base, 2
    while name in used:
        name, k = f"{base}{k}", k + 1
    taken.add(name)
    return name


def _dead_after(
    st: T.SourceTree, var: str, region: Span, loops: Sequence[T.Loop], scope: Span
) -> str | None:
    """Why the value an outer-declared loop variable has after the loops may matter (None: it
    does not: no other use in the region, the next use after it assigns it)."""
    inside = [lp.span for lp in loops]
    for u in T.uses(st, var, region):
        if not any(a <= u.span[0] < b for a, b in inside):
            return f"`{var}` is used between the loops"
    around = next((a for a in T.enclosing(st, region[0], T.LOOP_TYPES)), None)
    if around is not None and scope[0] <= st.start(around):
        for u in T.uses(st, var, st.span(around)):
            if not region[0] <= u.span[0] < region[1]:
                return f"`{var}` is used again in the loop around"
    after = [u for u in T.uses(st, var, (region[1], scope[1]))]
    if not after:
        return None
    first = after[0]
    if any(
        a.kind == "assign" and a.span[0] == first.span[0]
        for a in T.assignments(st, var, (first.span[0], scope[1]))
    ):
        return None
    return f"`{var}` is read after the loop"


def plan_hoist(
    st: T.SourceTree,
    line: Span,
    buffer: str,
    kernel: T.Kernel,
    values: float,
    taken: set[str] | None = None,
) -> HoistPlan | str:
    """Hold the elements of ``buffer`` that the loop around its read on ``line`` (offsets of
    the line) loads in registers across the loop's runs, ``values`` of them a thread (this
    launch's count, from the trace: rounded up to a multiple of 8). Returns the plan, or why
    not (a sentence). ``taken``: names other plans of the same rewrite use (updated)."""
    taken = set() if taken is None else taken
    if kernel.body is None:
        return "the kernel has no body"
    scope = (kernel.body[0], kernel.body[1] + 1)
    ptrs = [buffer, *_aliases(st, buffer, scope)]  # the trace's buffer, and `row = in + ...`
    subs = sorted(
        (s for n in ptrs for s in T.subscripts(st, n, line) if not written(s)),
        key=lambda s: s.span,
    )
    if not subs or len(subs[0].indices) != 1:
        return f"no read of `{buffer}[index]` on the line"
    sub = subs[0]
    idx = sub.indices[0]
    if any(T.calls(st, idx)) or _ASSIGNS.search(st.code_of(idx)):
        return "the index calls a function or assigns"
    for n in ptrs:
        if _stored(st, n, scope):
            return f"the kernel stores to `{n}` (or passes it on)"
    buffer = sub.name
    etype = _element_type(st, kernel, buffer, scope)
    if etype is None:
        return f"`{buffer}` is not a pointer whose element type is known"
    loop_node = next(iter(T.enclosing(st, sub.span[0], T.LOOP_TYPES)), None)
    if loop_node is None:
        return "the read is in no loop"
    lp = _loop_at(st, loop_node)
    h = _header(st, lp, kernel, scope)
    if isinstance(h, str):
        return h
    if h.var not in _names(st, idx):
        return f"the index does not follow the loop's variable `{h.var}`"
    bound_names = set(re.findall(r"[A-Za-z_]\w*", h.start + " " + h.step + " " + h.cond))
    inv = (_names(st, idx) | bound_names) - {h.var}
    why = _body_why(st, lp, h, inv)
    if why is not None:
        return why
    outer = _outer(st, lp, buffer, inv, scope)
    anchor: Node | None
    if outer is not None:
        shape, loops, anchor = "nested", [lp], outer
        region = st.span(outer)
    else:
        loops = _passes(st, lp, _key(st, sub))
        if not loops:
            return "the loop runs once: no enclosing loop or later pass repeats it"
        for other in loops:
            why = _body_why(st, other, h, inv)
            if why is not None:
                return why
        shape, anchor = "passes", loops[0].node
        region = (loops[0].span[0], loops[-1].span[1])
        if _changed(st, inv | {buffer}, region):
            return "the index or the bound changes between the passes"
    assert anchor is not None
    if anchor.parent is None or anchor.parent.type != "compound_statement":
        return "the loop is the body of a braceless statement"
    for x in [*loops, _loop_at(st, anchor)]:
        if st.text[st.text.rfind("\n", 0, x.span[0]) + 1 : x.span[0]].strip():
            return "the loop does not begin its line"
    if not h.declared:
        why = _dead_after(st, h.var, region, loops, scope)
        if why is not None:
            return why
    cap = max(8, math.ceil(max(values, 1.0) / 8) * 8)
    if cap > MAX_VALUES:
        return f"{math.ceil(values)} values a thread: more than registers hold ({MAX_VALUES})"
    changed = _changed(st, _names(st, region), region) - {h.var}
    # every read-only global element of the loops indexed by the loop's variable alone
    found: dict[tuple[str, str], list[T.Subscript]] = {}
    for x in loops:
        for s in T.subscripts(st, None, x.body):
            if len(s.indices) != 1 or written(s):
                continue
            names = _names(st, s.indices[0])
            if h.var not in names or names & changed or any(T.calls(st, s.indices[0])):
                continue
            found.setdefault(_key(st, s), []).append(s)
    target = _key(st, sub)
    keys = [target] + [k for k in found if k != target]
    chosen: list[tuple[tuple[str, str], str]] = []
    for k in keys:
        if len(chosen) * cap + cap > MAX_VALUES:
            break
        occurs = {
            x.span for x in loops if any(x.span[0] <= s.span[0] < x.span[1] for s in found[k])
        }
        if shape == "passes" and len(occurs) < 2:
            continue
        t = etype if k == target else _element_type(st, kernel, k[0], scope)
        if t is None or (k != target and (_stored(st, k[0], scope) or k[0] in changed)):
            continue
        chosen.append((k, t))
    u = _unit(st.text, lp)
    pad = _indent(st.text, st.start(anchor))
    kv = _fresh(st, "k", scope, taken)
    arrays = [_fresh(st, f"{k[0]}_r", scope, taken) for k, _ in chosen]
    first = found[target][0] if found.get(target) else sub
    index_of = {
        k: st.text[found[k][0].indices[0][0] : found[k][0].indices[0][1]].strip() for k, _ in chosen
    }
    index_of[target] = st.text[first.indices[0][0] : first.indices[0][1]].strip()
    loads = [
        f"{a}[{kv}] = {k[0]}[{index_of[k]}];" for (k, _), a in zip(chosen, arrays, strict=True)
    ]
    decls = [f"{t} {a}[{cap}];" for (_, t), a in zip(chosen, arrays, strict=True)]
    guarded = loads[0] if len(loads) == 1 else "{ " + " ".join(loads) + " }"
    decls[0] += f"  // the loop's first {cap} values, loaded once"
    pre = [
        *decls,
        "#pragma unroll",
        f"for (int {kv} = 0; {kv} < {cap}; ++{kv}) {{",
        f"{u}{h.vtype} {h.var} = {_iteration(h, kv)};",
        f"{u}if ({h.cond}) {guarded}",
        "}",
    ]
    edits = [
        (
            st.start(anchor),
            st.start(anchor),
            "\n".join(p if i == 0 else pad + p for i, p in enumerate(pre)) + "\n" + pad,
        )
    ]
    names_of = {k: a for (k, _), a in zip(chosen, arrays, strict=True)}
    for x in loops:
        xpad = _indent(st.text, x.span[0])
        body = x.body
        reps = sorted(
            [
                (s.span, f"{names_of[_key(st, s)]}[{kv}]")
                for s in T.subscripts(st, None, body)
                if _key(st, s) in names_of and not written(s)
            ]
            + [(st.span(c), "\0") for c in st.walk(types=("comment",), within=body)]
        )
        new_body = _unrolled_body(st.text, body, reps, u)
        rest = _iteration(h, str(cap))
        head = f"{h.vtype} {h.var}" if h.declared else h.var
        assert x.header is not None
        tail = st.text[x.header[1] : x.span[1]]  # the body as written
        text = "\n".join(
            [
                "#pragma unroll",
                f"{xpad}for (int {kv} = 0; {kv} < {cap}; ++{kv}) {{",
                f"{xpad}{u}{h.vtype} {h.var} = {_iteration(h, kv)};",
                f"{xpad}{u}if ({h.cond}) {new_body}",
                f"{xpad}}}",
                f"{xpad}for ({head} = {rest}; {h.cond}; {h.update})" + tail,
            ]
        )
        edits.append((x.span[0], x.span[1], text))
    return HoistPlan(
        shape,
        tuple(f"{k[0]}[{index_of[k]}]" for k, _ in chosen),
        tuple(arrays),
        len(loops),
        cap,
        tuple(edits),
    )


def _unrolled_body(text: str, body: Span, reps: Sequence[tuple[Span, str]], unit: str) -> str:
    """The body's text with the cached elements read from the registers, without its comments
    (they stay in the original loop), one level deeper."""
    out = text[body[0] : body[1]]
    for (a, b), new in reversed(reps):
        if body[0] <= a and b <= body[1]:
            out = out[: a - body[0]] + new + out[b - body[0] :]
    kept = [ln for ln in out.split("\n") if ln.replace("\0", "").strip() or "\0" not in ln]
    lines = [ln.replace("\0", "").rstrip() for ln in kept]
    return "\n".join(unit + ln if ln and i else ln for i, ln in enumerate(lines))


def _unit(text: str, lp: T.Loop) -> str:
    """One level of the file's indentation (from the loop's body, else four spaces)."""
    outer = _indent(text, lp.span[0])
    nl = text.find("\n", lp.body[0], lp.body[1])
    if nl >= 0:
        inner = re.match(r"[ \t]*", text[nl + 1 :])
        got = inner.group(0) if inner else ""
        if got.startswith(outer) and len(got) > len(outer):
            return got[len(outer) :]
    return "\t" if outer.startswith("\t") else "    "
