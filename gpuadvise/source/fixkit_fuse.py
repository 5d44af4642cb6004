"""Fusing a loop that reads back what the loop before it stored (issue 28's fix kit, GA309).

A thread that stores ``out[f(i)]`` in a counted loop and, in the next loop with the same header,
reads the same element back (``x = out + row; for (...) sum += x[i];``: a softmax's exponentials
summed in a second pass) moves that element through memory twice. :func:`plan_fuse` appends the
second loop's body to the first's, the read written as the store's own target, so that the
compiler forwards the value it has just stored (a load right after a store of the same address,
nothing in between)::

    float sumval = 0.0f;                       // moved before the loop: the second body uses it
    for (int i = tid; i < C; i += blockDim.x) {
        out[idx * C + i] = expf(x[i] - offset);
        sumval += out[idx * C + i];            // was `sumval += x[i];` in the next loop
    }
    x = out + idx * C;                         // stays after: the first body reads `x`

The statements between the loops (declarations and plain assignments only) are kept after the
fused loop, or moved before it where the second body needs them. Only pure text work on the
parsed tree: no I/O. That iteration k of the second loop reads what iteration k of the first
stored, one address each, is the trace's to show (the caller checks it); the kit refuses,
with the reason, what fusing could change: other headers, a break, continue, return or goto,
a call other than a math function (a barrier), other memory reads or any store in the second
loop or between the loops, a name the first loop changes read by the second (or the other way
round), a statement between the loops that both need or that changes the header's names.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from tree_sitter import Node

from gpuadvise.source import tree as T
from gpuadvise.source.edit import Rewrite
from gpuadvise.source.fixkit import written

__all__ = ["PURE_CALLS", "FusePlan", "plan_fuse"]

PURE_CALLS = frozenset(
    "expf exp __expf exp2f exp2 logf log __logf log2f log2 sqrtf sqrt rsqrtf rsqrt fabsf fabs "
    "abs fmaxf fmax fminf fmin max min powf pow __powf __fdividef sinf cosf __sinf __cosf tanhf "
    "tanh floorf ceilf floor ceil truncf roundf rintf fmaf fma __fmul_rn __fadd_rn".split()
)
"""Functions whose call has no effect but its value (no memory, no barrier)."""

Span = tuple[int, int]
_STATEMENTS = ("declaration", "expression_statement")


@dataclass(frozen=True)
class FusePlan:
    """The edits of one fusion, not applied yet."""

    store: str  # the store's target as written, ``out[idx * C + i]``
    reload: str  # the read it replaces, as written
    moved: tuple[str, ...]  # statements moved before the fused loop
    first_line: int
    second_line: int
    edits: tuple[tuple[int, int, str], ...]

    def apply(self, rw: Rewrite) -> None:
        for a, b, text in self.edits:
            rw.replace(a, b, text)


def _names(st: T.SourceTree, span: Span) -> set[str]:
    return {n for n, _ in T.identifiers(st, span)}


def _written(st: T.SourceTree, span: Span) -> set[str]:
    got = {a.target for a in T.assignments(st, None, span)}
    for d in T.declarations(st, span):
        got |= {x.name for x in d.declarators}
    return got


def _declared(st: T.SourceTree, span: Span) -> set[str]:
    return {x.name for d in T.declarations(st, span) for x in d.declarators}


def _line_bounds(text: str, span: Span, comment: bool = False) -> Span | None:
    """The whole lines ``span`` fills (its newline included), None where it shares a line
    (with code; with a ``//`` comment after it too unless ``comment``)."""
    a = text.rfind("\n", 0, span[0]) + 1
    nl = text.find("\n", span[1])
    b = len(text) if nl < 0 else nl + 1
    after = text[span[1] : b].strip()
    if text[a : span[0]].strip() or (after and not (comment and after.startswith("//"))):
        return None
    return a, b


def _why_not_plain(st: T.SourceTree, span: Span, what: str) -> str | None:
    for t in ("goto_statement", "return_statement", "break_statement", "continue_statement"):
        if any(st.walk(types=(t,), within=span)):
            return f"{what} has a {t.split('_')[0]}"
    for c in T.calls(st, span):
        if not _pure(st, c.name):
            return f"{what} calls `{c.name}` (not a math function: it may store or wait)"
    return None


_ASSIGNS = re.compile(r"\+\+|--|(?<![=!<>])=(?!=)")


def _pure(st: T.SourceTree, name: str) -> bool:
    """A math function (:data:`PURE_CALLS`), or a function-like macro of the file whose body
    assigns nothing and calls only those (``#define ROW(r, i) ((r) * n + (i))``)."""
    if name in PURE_CALLS:
        return True
    for n in st.walk(types=("preproc_function_def",)):
        nm, v = n.child_by_field_name("name"), n.child_by_field_name("value")
        if nm is None or st.text_of(nm) != name:
            continue
        body = st.code_of(v) if v is not None else ""
        called = re.findall(r"([A-Za-z_]\w*)\s*\(", body)
        return not _ASSIGNS.search(body) and all(c in PURE_CALLS for c in called)
    return False


def _derefs(st: T.SourceTree, span: Span) -> bool:
    for n in st.walk(types=("pointer_expression", "field_expression"), within=span):
        if n.type == "field_expression" and "->" not in st.code_of(n):
            continue
        if n.type == "pointer_expression" and st.code_of(n).lstrip()[:1] != "*":
            continue
        return True
    return False


def _loop_of(st: T.SourceTree, offset: int) -> T.Loop | None:
    n = next(iter(T.enclosing(st, offset, T.LOOP_TYPES)), None)
    return None if n is None else T.loops(st, st.span(n))[0]


def _subs_on(st: T.SourceTree, line: Span, want_written: bool) -> list[T.Subscript]:
    return [s for s in T.subscripts(st, None, line) if written(s) == want_written]


def _pick(subs: list[T.Subscript], names: set[str]) -> list[T.Subscript]:
    named = [s for s in subs if s.name in names]
    return named if named else (subs if len(subs) == 1 else [])


def plan_fuse(
    st: T.SourceTree,
    store_line: Span,
    reload_line: Span,
    buffer: str,
    aliases: set[str],
    kernel: T.Kernel | None = None,
) -> FusePlan | str:
    """Fuse the loop around the store to ``buffer`` on ``store_line`` (offsets of the line)
    with the next loop, whose read on ``reload_line`` gets the stored value back (the trace's
    finding: the same thread, the same address, iteration by iteration). ``aliases``: other
    names of the buffer's pointer (``x = out + row``); ``kernel``: the kernel, whose
    ``const __restrict__`` pointer parameters the second loop may also read (nothing else
    changes what they point to). Returns the plan, or why not."""
    scope = (kernel.body[0], kernel.body[1] + 1) if kernel is not None and kernel.body else None
    names = {buffer, *aliases, *_pointer_aliases(st, buffer, scope)}
    stores = _pick(_subs_on(st, store_line, True), names)
    if len(stores) != 1:
        return f"no single store to `{buffer}[...]` on line {st.line(store_line[0])}"
    store = stores[0]
    idx = (store.indices[0][0], store.indices[-1][1]) if store.indices else store.span
    if any(not _pure(st, c.name) for c in T.calls(st, idx)) or T.assignments(st, None, idx):
        return "the store's index calls a function or assigns"
    reads = _pick(_subs_on(st, reload_line, False), names)
    texts = {"".join(st.code_of(s.span).split()) for s in reads}
    if not reads or len(texts) != 1:
        return f"no single read of `{buffer}[...]` on line {st.line(reload_line[0])}"
    first, second = _loop_of(st, store.span[0]), _loop_of(st, reads[0].span[0])
    if first is None or second is None or first.span == second.span:
        return "the store and the read are not in two loops"
    if first.kind != "for" or second.kind != "for" or first.header is None:
        return "the loops are not `for` loops"
    if second.header is None or "".join(st.code_of(first.header).split()) != "".join(
        st.code_of(second.header).split()
    ):
        return "the loops' headers differ"
    n1, n2 = first.node, second.node
    if n1 is None or n2 is None or n1.parent is None or n1.parent != n2.parent:
        return "the loops are not in one block"
    if n1.parent.type != "compound_statement":
        return "the loops are not in a braced block"
    sib = [c for c in n1.parent.named_children if c.type != "comment"]
    i1, i2 = sib.index(n1), sib.index(n2)
    if i2 <= i1:
        return "the read's loop does not follow the store's"
    between: list[Node] = sib[i1 + 1 : i2]
    for s in between:
        if s.type not in _STATEMENTS:
            return f"a `{s.type.replace('_', ' ')}` stands between the loops"
    b1, b2 = first.body, second.body
    for span, what in ((b1, "the first loop"), (b2, "the second loop")):
        why = _why_not_plain(st, span, what)
        if why is not None:
            return why
    reload_spans = {s.span for s in reads}
    stored1 = {s.name for s in T.subscripts(st, None, b1) if written(s)}
    others = [
        s
        for s in T.subscripts(st, None, b2)
        if s.span not in reload_spans
        and (written(s) or s.name in stored1 | names or s.name not in _read_only(kernel))
    ]
    if others or _derefs(st, b2):
        return "the second loop reads or writes memory besides the value read back"
    head = _names(st, first.header)
    w1, w2 = _written(st, b1), _written(st, b2)
    if (w1 | w2) & head:
        return f"`{sorted((w1 | w2) & head)[0]}` of the header changes in a loop's body"
    # the second body as it will be: the read back written as the store's target
    target = st.code_of(store.span)
    tnames = _names(st, store.span)
    r2 = set(tnames)
    for a, b in _gaps(b2, sorted(reload_spans)):
        r2 |= _names(st, (a, b))
    r1 = _names(st, b1) | head
    body1 = n1.child_by_field_name("body")
    stmt = body1 if not first.braced else next(
        (a for a in _up(st, store.node) if body1 is not None and a.parent == body1), None
    )  # fmt: skip
    if stmt is None or stmt.type != "expression_statement":
        return "the store is not a plain statement of the first loop's body (a guard around it)"
    after_store = (st.end(stmt), b1[1])
    if _written(st, after_store) & tnames or w2 & tnames:
        return "the store's address changes before the read would take it"
    if (w1 | _declared(st, b1)) & (r2 - tnames):
        return "the second loop reads a name the first changes"
    if w2 & r1 or _declared(st, b2) & _declared(st, b1):
        return "the first loop reads a name the second changes"
    moved: list[Node] = []
    kept: list[Node] = []
    for s in between:
        sp = st.span(s)
        if any(T.subscripts(st, None, sp)) or _derefs(st, sp):
            return "a statement between the loops reads or writes memory"
        why = _why_not_plain(st, sp, "a statement between the loops")
        if why is not None:
            return why
        ws, rs = _written(st, sp), _names(st, sp)
        if ws & head:
            return f"`{sorted(ws & head)[0]}` of the header changes between the loops"
        later_writes = set().union(*(_written(st, st.span(k)) for k in kept)) if kept else set()
        later_reads = set().union(*(_names(st, st.span(k)) for k in kept)) if kept else set()
        if ws & r2:  # the second body needs it: before the fused loop
            if ws & (r1 | w1) or rs & w1:
                return f"both loops need `{sorted(ws & (r1 | w1) or rs & w1)[0]}` as it is there"
            if rs & later_writes or ws & (later_reads | later_writes):
                return "the statements between the loops depend on each other"
            moved.append(s)
        else:
            if rs & w2 or ws & w2:
                return "a statement between the loops reads what the second loop changes"
            kept.append(s)
    text = st.text
    lines2 = _line_bounds(text, second.span, comment=True)
    close_line = _line_bounds(text, (b1[1] - 1, b1[1])) if first.braced else None
    if lines2 is None or _line_bounds(text, first.span, comment=True) is None:
        return "a loop does not stand on lines of its own"
    if first.braced and close_line is None:
        return "the first loop's `}` does not stand on a line of its own"
    edits: list[tuple[int, int, str]] = []
    pad = text[text.rfind("\n", 0, first.span[0]) + 1 : first.span[0]]
    move_text = ""
    for s in moved:
        lb = _line_bounds(text, st.span(s))
        if lb is None:
            return "a statement between the loops shares its line"
        move_text += pad + st.code_of(s).strip() + "\n"
        edits.append((lb[0], lb[1], ""))
    line1 = text.rfind("\n", 0, first.span[0]) + 1
    if move_text:
        edits.append((line1, line1, move_text))
    raw = text[b2[0] : b2[1]]
    for a, b in sorted(reload_spans, reverse=True):
        raw = raw[: a - b2[0]] + target + raw[b - b2[0] :]
    body = _inner(raw, second.braced, pad)
    tail = text[second.span[1] : lines2[1]].strip()  # a comment after a one-line loop
    if tail:
        body = body[:-1] + "  " + tail + "\n"
    if close_line is not None:
        edits.append((close_line[0], close_line[0], body))
    else:  # a one-line first loop: its body braced, the second's after it
        one = text[b1[0] : b1[1]].strip()
        edits.append((b1[0], b1[1], "{\n" + pad + "    " + one + "\n" + body + pad + "}"))
    edits.append((lines2[0], lines2[1], ""))
    return FusePlan(
        target.strip(),
        st.code_of(reads[0].span).strip(),
        tuple(" ".join(st.code_of(s).split()) for s in moved),
        st.line(first.span[0]),
        st.line(second.span[0]),
        tuple(edits),
    )


def _pointer_aliases(st: T.SourceTree, buffer: str, scope: Span | None) -> set[str]:
    """The names set to ``buffer`` plus an offset (``x = out + idx * C``) within ``scope``."""
    start = re.compile(rf"\s*{re.escape(buffer)}\s*(?:[+-]|$)")
    got = {
        a.target
        for a in T.assignments(st, None, scope)
        if a.value is not None and a.kind in ("init", "assign") and start.match(st.code_of(a.value))
    }
    for d in T.declarations(st, scope):
        got |= {x.name for x in d.declarators if x.init and start.match(st.code_of(x.init))}
    return got


def _read_only(kernel: T.Kernel | None) -> set[str]:
    """The kernel's ``const ... __restrict__`` pointer parameters."""
    if kernel is None:
        return set()
    return {
        p.name
        for p in kernel.params
        if p.pointer and re.search(r"\bconst\b", p.type) and re.search(r"__restrict", p.type)
    }


def _up(st: T.SourceTree, node: Node | None) -> list[Node]:
    return [] if node is None else [node, *st.ancestors(node)]


def _gaps(span: Span, holes: list[Span]) -> list[Span]:
    out, at = [], span[0]
    for a, b in holes:
        out.append((at, a))
        at = b
    out.append((at, span[1]))
    return out


def _inner(raw: str, braced: bool, pad: str) -> str:
    """The second loop's body (``raw``, its text) as lines to put before the first loop's
    ``}`` (ending in a newline): a braced body's inside as written, a single statement one
    level deeper."""
    if not braced:
        return pad + "    " + raw.strip() + "\n"
    inner = raw[1:-1]
    nl = inner.find("\n")
    if nl >= 0 and not inner[:nl].strip():
        inner = inner[nl + 1 :]
    inner = re.sub(r"\n[ \t]*\Z", "\n", inner)
    return inner if inner.endswith("\n") else inner + "\n"
