"""The fix kit's warp aggregation of atomics (issue 28 item 6), on the parser's nodes.

:func:`warp_aggregate` rewrites the atomics a source line runs (``atomicAdd``, ``atomicMin``,
``atomicMax``, ``atomicOr``, ``atomicAnd``, ``atomicXor`` and their ``_block``/``_system``
forms) into calls of a helper it defines before the function that holds them: the active
lanes that update one address (``__activemask()``, ``__match_any_sync`` on the address)
combine their values by shuffles, in lane order (a butterfly of ``__shfl_xor_sync`` when the
whole warp updates one address), and the lowest of them does one atomic with the combined
value. Where the atomic's result is used, the helper returns each lane what a serial order of
the lanes (lowest first) would have returned it: the leader's old value combined with the
values of the lanes before it. The atomic is found where the line calls it, in the body of a
function-like macro the line uses, or in a helper function the line calls (its atomic is then
aggregated for every caller: the helper stays an atomic of the same operation).

Only the callee's name changes at each call (``atomicAdd(`` becomes
``gpuadvise_warp_atomicAdd(``), so the arguments, macros and formatting stay as written. A
float sum's rounding changes with the order of its additions; integer results are exact.

Pure text work on parsed trees: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from tree_sitter import Node

from gpuadvise.source import tree as T
from gpuadvise.source.edit import Rewrite

__all__ = [
    "AGGREGATED_ATOMICS",
    "HELPER_PREFIX",
    "AtomicSite",
    "atomic_sites",
    "helper_text",
    "warp_aggregate",
]

HELPER_PREFIX = "gpuadvise_warp_"
"""The helpers' names: the prefix and the atomic's name (``_old`` after it where the result is
used)."""

_COMBINE = {
    "atomicAdd": "{a} + {b}",
    "atomicMin": "({b} < {a} ? {b} : {a})",
    "atomicMax": "({a} < {b} ? {b} : {a})",
    "atomicOr": "{a} | {b}",
    "atomicAnd": "{a} & {b}",
    "atomicXor": "{a} ^ {b}",
}
AGGREGATED_ATOMICS = frozenset(
    f"{name}{scope}" for name in _COMBINE for scope in ("", "_block", "_system")
)
"""The atomics the helper aggregates: an associative, commutative operation of the values."""

_MACRO_PREFIX = "void __ga_macro() {\n"


@dataclass(frozen=True)
class AtomicSite:
    """An atomic call to rewrite: the callee's name and span, whether its result is used, and
    the offset of the top-level declaration the helper goes before."""

    name: str
    name_span: T.Span
    result_used: bool
    before: int


def _op(name: str) -> str:
    for scope in ("_block", "_system"):
        if name.endswith(scope):
            return name[: -len(scope)]
    return name


def helper_text(atomic: str, result_used: bool) -> str:
    """The definition of the helper that aggregates ``atomic`` over the lanes of a warp that
    update one address (``result_used``: the one returning each lane its old value)."""
    comb = _COMBINE[_op(atomic)]

    def c(a: str, b: str) -> str:
        return comb.format(a=a, b=b)

    name = f"{HELPER_PREFIX}{atomic}{'_old' if result_used else ''}"
    ret = "T" if result_used else "void"
    head = [
        f"// gpuadvise (GA207/GA208): a warp-aggregated {atomic}. The active lanes that update",
        "// one address combine their values; the lowest of them does the atomic.",
        "template <typename T, typename V>",
        f"__device__ __forceinline__ {ret} {name}(T *address, V value)",
        "{",
        f"    {'const ' if result_used else ''}T v = static_cast<T>(value);",
        "    const unsigned active = __activemask();",
        "    const unsigned peers =",
        "        __match_any_sync(active, reinterpret_cast<unsigned long long>(address));",
        "    const unsigned leader = __ffs(peers) - 1;",
        "    unsigned lane;",
        '    asm("mov.u32 %0, %%laneid;" : "=r"(lane));',
    ]
    if not result_used:
        body = [
            "    if (peers == 0xffffffffu) {",
            "        for (int offset = 16; offset > 0; offset >>= 1) {",
            "            const T x = __shfl_xor_sync(0xffffffffu, v, offset);",
            f"            v = {c('v', 'x')};",
            "        }",
            "    } else {",
            "        T total = __shfl_sync(peers, v, leader);",
            "        for (unsigned rest = peers & (peers - 1); rest != 0; rest &= rest - 1) {",
            "            const T x = __shfl_sync(peers, v, __ffs(rest) - 1);",
            f"            total = {c('total', 'x')};",
            "        }",
            "        v = total;",
            "    }",
            f"    if (lane == leader) {atomic}(address, v);",
            "}",
        ]
    else:
        body = [
            "    // the group's total, and what the lanes before this one add to it",
            "    T total = __shfl_sync(peers, v, leader), below = total;",
            "    for (unsigned rest = peers & (peers - 1); rest != 0; rest &= rest - 1) {",
            "        const unsigned src = __ffs(rest) - 1;",
            "        const T x = __shfl_sync(peers, v, src);",
            "        if (src == lane) below = total;",
            f"        total = {c('total', 'x')};",
            "    }",
            "    T old = T();",
            f"    if (lane == leader) old = {atomic}(address, total);",
            "    old = __shfl_sync(peers, old, leader);",
            f"    return lane == leader ? old : {c('old', 'below')};",
            "}",
        ]
    return "\n".join(head + body) + "\n\n"


def _top_level(st: T.SourceTree, offset: int) -> int | None:
    """The start of the namespace-scope declaration holding ``offset`` (before an ``extern
    "C"`` block around it: a template cannot have C linkage)."""
    n = st.node_at(offset)
    best: Node | None = None
    while n is not None:
        p = n.parent
        if p is not None and p.type in ("translation_unit", "declaration_list"):
            best = n
        if n.type == "linkage_specification":
            best = n
        n = p
    if best is None:
        return None
    # above the comment lines that lead into it
    while (c := best.prev_sibling) is not None and c.type == "comment":
        if st.text[st.end(c) : st.start(best)].count("\n") > 1:
            break
        best = c
    return st.start(best)


def _used(st: T.SourceTree, node: Node | None) -> bool:
    """The value of the call ``node`` is used (it is not an expression statement of its own,
    nor the operand of a ``(void)`` cast or of a comma's left side)."""
    if node is None:
        return True
    p = node.parent
    while p is not None and p.type == "parenthesized_expression":
        node, p = p, p.parent
    if p is None:
        return True
    if p.type == "expression_statement":
        return False
    if p.type == "comma_expression":
        return p.child_by_field_name("left") == node
    t = p.child_by_field_name("type") if p.type == "cast_expression" else None
    return t is None or st.code_of(t).strip() != "void"


def _direct(st: T.SourceTree, within: T.Span) -> list[tuple[T.Call, bool]]:
    """The aggregatable atomic calls starting within ``within``, each with whether its result
    is used."""
    return [(c, _used(st, c.node)) for c in T.calls(st, within, AGGREGATED_ATOMICS)]


def _name_span(st: T.SourceTree, c: T.Call) -> T.Span | None:
    f = c.node.child_by_field_name("function") if c.node is not None else None
    if f is None or f.type != "identifier":
        return None
    return st.span(f)


def _macro_sites(st: T.SourceTree, names: Iterable[str]) -> list[AtomicSite] | str:
    """The atomic calls in the bodies of the function-like macros ``names`` that call one,
    the helper before the first use of each macro."""
    out: list[AtomicSite] = []
    wanted = set(names)
    for n in st.walk(types=("preproc_function_def",)):
        nm = n.child_by_field_name("name")
        v = n.child_by_field_name("value")
        if nm is None or v is None or st.code_of(nm).strip() not in wanted:
            continue
        a, b = st.span(v)
        body = st.code[a:b].replace("\\\n", "  ")
        sub = T.SourceTree(_MACRO_PREFIX + body + "\n;}")
        shift = a - len(_MACRO_PREFIX)
        macro = st.code_of(nm).strip()
        uses = T.calls(st, None, [macro])
        first = min((u.span[0] for u in uses), default=None)
        before = _top_level(st, first) if first is not None else None
        if before is None:
            continue
        # the macro's value used anywhere makes its atomic's result used
        used_outside = any(_used(st, u.node) for u in uses)
        for c, used in _direct(sub, (0, len(sub.text))):
            span = _name_span(sub, c)
            if span is None:
                return f"the macro `{macro}` calls `{c.name}` in a way the kit does not rewrite"
            out.append(
                AtomicSite(
                    c.name, (span[0] + shift, span[1] + shift), used and used_outside, before
                )
            )
    return out


def _function_sites(st: T.SourceTree, names: Iterable[str]) -> list[AtomicSite]:
    """The atomic calls in the bodies of the functions ``names`` defined in the file."""
    wanted = set(names)
    out: list[AtomicSite] = []
    for fn in st.walk(types=("function_definition",)):
        d = fn.child_by_field_name("declarator")
        body = fn.child_by_field_name("body")
        if d is None or body is None:
            continue
        ident = next((x for x in _identifiers_of(d)), None)
        if ident is None or st.code_of(ident).strip() not in wanted:
            continue
        before = _top_level(st, st.start(fn))
        if before is None:
            continue
        for c, used in _direct(st, st.span(body)):
            span = _name_span(st, c)
            if span is not None:
                out.append(AtomicSite(c.name, span, used, before))
    return out


def _identifiers_of(d: Node) -> Iterable[Node]:
    """The function declarator's name node (through pointer/reference declarators)."""
    n: Node | None = d
    while n is not None and n.type != "function_declarator":
        n = n.child_by_field_name("declarator")
    if n is None:
        return []
    name = n.child_by_field_name("declarator")
    return [name] if name is not None else []


def atomic_sites(st: T.SourceTree, line: int) -> list[AtomicSite] | str:
    """The aggregatable atomics that source line ``line`` runs: called on it, or in the body of
    a function-like macro or a function of the file that it calls; or why none (a sentence)."""
    span = (st.line_start(line), st.line_start(line + 1))
    sites: list[AtomicSite] = []
    for c, used in _direct(st, span):
        ns = _name_span(st, c)
        before = _top_level(st, c.span[0])
        if ns is not None and before is not None:
            sites.append(AtomicSite(c.name, ns, used, before))
    if sites:
        return sites
    called = {c.name for c in T.calls(st, span)} - AGGREGATED_ATOMICS
    if not called:
        return "the line calls no atomicAdd/Min/Max/Or/And/Xor"
    macros = _macro_sites(st, called)
    if isinstance(macros, str):
        return macros
    sites = macros + _function_sites(st, called)
    if not sites:
        return (
            "no atomicAdd/Min/Max/Or/And/Xor on the line, nor in a macro or function of this "
            "file that it calls"
        )
    return sites


def warp_aggregate(st: T.SourceTree, rw: Rewrite, line: int) -> list[str] | str:
    """Make the atomics that line ``line`` runs warp-aggregated (see the module docstring):
    each call renamed to its helper, the helpers defined before the first function that needs
    them (unless the file defines them already). Returns the helpers' names, or why not (a
    sentence; no edit made then)."""
    sites = atomic_sites(st, line)
    if isinstance(sites, str):
        return sites
    helpers: dict[str, tuple[str, bool, int]] = {}
    for s in sites:
        name = f"{HELPER_PREFIX}{s.name}{'_old' if s.result_used else ''}"
        prev = helpers.get(name)
        helpers[name] = (s.name, s.result_used, min(s.before, prev[2]) if prev else s.before)
    for s in sites:
        rw.replace(*s.name_span, f"{HELPER_PREFIX}{s.name}{'_old' if s.result_used else ''}")
    defined = {c for c, _ in T.identifiers(st, (0, len(st.text)))}
    for name, (atomic, used, before) in sorted(helpers.items(), key=lambda kv: kv[1][2]):
        if name not in defined:
            rw.insert(before, helper_text(atomic, used))
    return sorted(helpers)
