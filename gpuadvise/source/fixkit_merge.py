"""The fix kit's block merging (GA103, issue 28): ``k`` of a kernel's blocks run in one CTA.

A kernel written for a block of, say, 16 threads (its indexing and shared tiles tied to the
block) keeps half of every warp idle. The mechanical fix a CUDA engineer makes is to run ``k``
of the original blocks side by side in one CTA of ``k`` times the threads, the grid cut by
``k`` along x (rounded up):

- ``threadIdx.x / B`` says which of the merged blocks a thread belongs to (``sub``),
  ``threadIdx.x % B`` is its ``threadIdx.x`` in that block, ``blockIdx.x * k + sub`` the block
  it runs, and ``blockDim.x`` the original's ``B``: the body reads those instead;
- every ``__shared__`` variable gets a leading ``[k]`` dimension, and its name is bound to the
  block's own slice (``auto &tile = ga103_tile[ga103_sub];``), so that every use of it,
  macros included, reads the block's copy;
- the spare blocks of the last CTA (the grid's CTA count not a multiple of ``k``) still reach
  every ``__syncthreads()``: the body's work between barriers runs under ``if (ga103_live)``,
  never after an early return (a kernel without barriers returns early).

:func:`merge_blocks` returns the rewritten file text, or a sentence saying what the rewrite
cannot follow: a builtin index read in a helper or a macro, ``gridDim.x``, the whole
``threadIdx``, a dynamic (``extern``) shared array, a barrier inside a ``switch``, the
condition of a loop or ``if`` holding a barrier that is not the same for every block, or
memory read where the work is split around barriers. The caller checks the result on the
emulator against the original launch (outputs equal). Pure text work on a parsed tree.
"""

from __future__ import annotations

from dataclasses import dataclass

from gpuadvise.source import tree as T
from gpuadvise.source.edit import EditConflict, Rewrite
from gpuadvise.source.fixkit import declaration_prefix

__all__ = ["MERGE_PREFIX", "Merged", "merge_blocks"]

MERGE_PREFIX = "ga103_"
"""The prefix of the names the rewrite introduces (a source that spells it is not rewritten)."""

_BUILTINS = ("threadIdx", "blockIdx", "blockDim", "gridDim")
_BARRIERS = ("__syncthreads", "__syncthreads_count", "__syncthreads_and", "__syncthreads_or")
_FUNCTION = ("function_definition", "preproc_def", "preproc_function_def")


@dataclass(frozen=True)
class Merged:
    """The file with the kernel's blocks merged: its text, the shared variables given a leading
    ``[k]`` and whether the work is guarded around barriers (``False``: an early return)."""

    text: str
    shared: tuple[str, ...]
    guarded: bool


def _name(st: T.SourceTree, node: T.Node) -> str | None:
    """The name a function definition or a macro defines."""
    if node.type != "function_definition":
        n = node.child_by_field_name("name")
        return None if n is None else st.text_of(n)
    d = node.child_by_field_name("declarator")
    while d is not None and d.child_by_field_name("declarator") is not None:
        d = d.child_by_field_name("declarator")
    return None if d is None else st.text_of(d).rsplit("::", 1)[-1]


def _hidden_reads(st: T.SourceTree, body: T.Span) -> str | None:
    """A helper function or macro the body uses that reads a builtin index (the rewrite of the
    body would miss it)."""
    used = {name for name, _ in T.identifiers(st, body)}
    for node in st.walk(types=_FUNCTION):
        a, b = st.span(node)
        if a <= body[0] < b:
            continue  # the kernel itself
        name = _name(st, node)
        if name is None or name not in used:
            continue
        inner = node.child_by_field_name("body" if node.type == "function_definition" else "value")
        if inner is None:
            continue
        code = st.code_of(inner)
        for builtin in _BUILTINS:
            if builtin in code:
                return (
                    f"{name} (line {st.line(a)}) reads {builtin}: the rewrite of the body misses it"
                )
    return None


def _barrier_calls(st: T.SourceTree, span: T.Span) -> list[T.Call]:
    return T.calls(st, span, _BARRIERS)


def _reads_memory(st: T.SourceTree, span: T.Span, helpers: set[str]) -> bool:
    """Whether the expression at ``span`` may read memory or change a variable: a subscript, a
    dereference, ``->``, an assignment or a call of one of the file's functions."""
    for n in st.walk(within=span):
        if not span[0] <= st.start(n) < span[1]:
            continue
        if n.type in ("subscript_expression", "assignment_expression"):
            return True
        if n.type == "pointer_expression":
            op = n.child_by_field_name("operator")
            if op is not None and op.type == "*":
                return True
        if n.type == "field_expression" and "->" in st.code_of(n):
            return True
        if n.type == "call_expression":
            f = n.child_by_field_name("function")
            if f is not None and st.code_of(f).strip() in helpers:
                return True
    return False


class _Uniform:
    """Which names hold the same value in every block: the kernel's parameters, names the body
    does not declare (macros, constants) and the body's variables whose every assignment is
    made of those (a loop counter); never a builtin index."""

    def __init__(self, st: T.SourceTree, body: T.Span, params: set[str], helpers: set[str]):
        self.st, self.body, self.helpers = st, body, helpers
        assigns = T.assignments(st, None, body)
        declared = {d.name for decl in T.declarations(st, body) for d in decl.declarators}
        declared |= {a.target for a in assigns if a.kind == "init"}
        self.locals = declared | {a.target for a in assigns if a.target in params}
        uniform = set(self.locals)
        changed = True
        while changed:
            changed = False
            for a in assigns:
                if a.target not in uniform or a.value is None:
                    continue
                if not self._expr(a.value, uniform):
                    uniform.discard(a.target)
                    changed = True
        self.uniform = uniform

    def _expr(self, span: T.Span, uniform: set[str]) -> bool:
        code = self.st.code_of(span)
        if any(b in code for b in _BUILTINS) or _reads_memory(self.st, span, self.helpers):
            return False
        return all(
            name not in self.locals or name in uniform for name, _ in T.identifiers(self.st, span)
        )

    def expr(self, span: T.Span) -> bool:
        return self._expr(span, self.uniform)


class _Guard:
    """The edits that put the work of a block's statement list under ``if (live)``, keeping
    every barrier reached by every thread."""

    def __init__(self, st: T.SourceTree, rw: Rewrite, uni: _Uniform, live: str) -> None:
        self.st, self.rw, self.uni, self.live = st, rw, uni, live
        self.runs: list[T.Span] = []  # the guarded ranges
        # per statement holding a barrier: its span, the locals its header reads, those its
        # initializer assigns (a loop's counter, set again at every entry)
        self.heads: list[tuple[T.Span, set[str], set[str]]] = []

    def unchanged_heads(self) -> str | None:
        """Why a header holding a barrier could differ between the merged blocks: a local it
        reads is assigned in guarded work (the spare block skips that), other than a loop's
        counter assigned before or after the loop (its initializer sets it again)."""
        for (a, b), reads, reset in self.heads:
            for name in reads:
                for asg in T.assignments(self.st, name, self.uni.body):
                    s = asg.span[0]
                    if not any(r0 <= s < r1 for r0, r1 in self.runs):
                        continue
                    if name in reset and not a <= s < b:
                        continue
                    return (
                        f"line {self.st.line(a)}: `{name}`, read by the header of a statement "
                        f"holding a barrier, is assigned in the work the spare block skips "
                        f"(line {self.st.line(s)})"
                    )
        return None

    def block(self, node: T.Node) -> str | None:
        kids = [c for c in node.named_children if c.type != "comment"]
        barrier_at = [i for i, c in enumerate(kids) if _barrier_calls(self.st, self.st.span(c))]
        last = barrier_at[-1] if barrier_at else -1
        run: list[T.Node] = []
        for i, c in enumerate(kids):
            span = self.st.span(c)
            if i in barrier_at:
                self._flush(run)
                run = []
                why = self.statement(c)
                if why is not None:
                    return why
            elif i > last or c.type != "declaration":
                if c.type == "preproc_call" and i + 1 in barrier_at:
                    self._flush(run)  # ``#pragma unroll`` stays before its loop
                    run = []
                else:
                    run.append(c)
            else:  # a declaration before a barrier: its name stays in scope, outside the guard
                self._flush(run)
                run = []
                if "__shared__" not in self.st.code_of(c) and _reads_memory(
                    self.st, span, self.uni.helpers
                ):
                    return (
                        f"line {self.st.line(span[0])}: a declaration that reads memory between "
                        "barriers (the spare block would read out of its range)"
                    )
        self._flush(run)
        return None

    def statement(self, c: T.Node) -> str | None:
        """A statement that holds a barrier."""
        st, line = self.st, self.st.line(self.st.start(c))
        if c.type == "expression_statement":
            calls = _barrier_calls(st, st.span(c))
            kids = [x for x in c.named_children if x.type != "comment"]
            if len(calls) == 1 and calls[0].name == "__syncthreads" and not calls[0].args:
                if len(kids) == 1 and st.span(kids[0]) == calls[0].span:
                    return None
            return f"line {line}: a barrier inside an expression, or one that counts threads"
        if c.type == "compound_statement":
            return self.block(c)
        if c.type in ("for_statement", "while_statement", "do_statement", "if_statement"):
            reads: set[str] = set()
            reset: set[str] = set()
            for field in ("initializer", "condition", "update"):
                part = c.child_by_field_name(field)
                if part is None:
                    continue
                span = st.span(part)
                reads |= {n for n, _ in T.identifiers(st, span) if n in self.uni.locals}
                if field == "initializer":
                    reset |= {x.target for x in T.assignments(st, None, span)}
            self.heads.append((st.span(c), reads, reset))
            for field in ("initializer", "condition", "update"):
                part = c.child_by_field_name(field)
                if part is None:
                    continue
                if field != "update" and not self._uniform(part):
                    return (
                        f"line {line}: the condition of a statement holding a barrier may differ "
                        "between the merged blocks"
                    )
            parts = [c.child_by_field_name("body"), c.child_by_field_name("consequence")]
            alt = c.child_by_field_name("alternative")
            if alt is not None:
                parts.append(next((x for x in alt.named_children if x.type != "comment"), alt))
            for part in parts:
                if part is None:
                    continue
                if part.type == "compound_statement":
                    why = self.block(part)
                elif _barrier_calls(st, st.span(part)):
                    why = self.statement(part)
                    if why is None and part.type != "expression_statement":
                        why = f"line {line}: a braceless body holding a barrier"
                else:
                    why = f"line {line}: a braceless body beside a barrier"
                if why is not None:
                    return why
            return None
        return f"line {line}: a barrier inside a {c.type.replace('_', ' ')}"

    def _uniform(self, part: T.Node) -> bool:
        if part.type == "declaration":
            values = [d.child_by_field_name("value") for d in part.named_children]
            return all(v is None or self.uni.expr(self.st.span(v)) for v in values)
        if part.type == "assignment_expression":
            right = part.child_by_field_name("right")
            return right is None or self.uni.expr(self.st.span(right))
        if part.type == "condition_clause":
            inner = part.child_by_field_name("value")
            return inner is None or self.uni.expr(self.st.span(inner))
        return self.uni.expr(self.st.span(part))

    def _flush(self, run: list[T.Node]) -> None:
        if not run:
            return
        st = self.st
        a, b = st.start(run[0]), st.end(run[-1])
        ls = st.text.rfind("\n", 0, a) + 1
        indent = st.text[ls:a] if not st.text[ls:a].strip() else ""
        self.runs.append((a, b))
        self.rw.insert(a, f"if ({self.live}) {{\n{indent}")
        self.rw.insert(b, f"\n{indent}}}")


def merge_blocks(
    st: T.SourceTree,
    kernel: T.Kernel,
    k: int,
    threads_x: int,
    blocks: str,
) -> Merged | str:
    """The file with ``kernel``'s blocks of ``threads_x`` threads in x merged ``k`` to a CTA
    along x, the blocks of the original grid being ``blocks`` (a C expression of the kernel's
    parameters or a constant): the module's docstring. A string says why not."""
    try:
        return _merge_blocks(st, kernel, k, threads_x, blocks)
    except EditConflict as exc:  # a builtin inside a shared array's size, say
        return f"the rewrite's edits overlap ({exc})"


def _merge_blocks(
    st: T.SourceTree,
    kernel: T.Kernel,
    k: int,
    threads_x: int,
    blocks: str,
) -> Merged | str:
    if kernel.body is None:
        return "the kernel has no body here"
    p = MERGE_PREFIX
    if p in st.text:
        return f"the source already uses names starting with {p}"
    body = (kernel.body[0], kernel.body[1] + 1)
    hidden = _hidden_reads(st, body)
    if hidden is not None:
        return hidden
    for name in _BUILTINS:
        whole = T.uses(st, name, body)
        if name == "gridDim" and T.uses(st, "gridDim.x", body):
            return "the kernel reads gridDim.x, which the merged grid changes"
        if len(whole) > sum(len(T.uses(st, f"{name}.{m}", body)) for m in "xyz"):
            return f"the kernel reads the whole {name}, not its members"
    used = {name for name, _ in T.identifiers(st, body)}
    for decl in T.declarations(st):
        if decl.file_scope and decl.has("__shared__"):
            for d in decl.declarators:
                if d.name in used:
                    return (
                        f"`{d.name}` is a shared variable declared outside the kernel (line "
                        f"{st.line(decl.span[0])}): the merged blocks would share it"
                    )
    helpers = {n for node in st.walk(types=_FUNCTION) if (n := _name(st, node)) is not None}
    rw = Rewrite(st.text)
    names = {
        "threadIdx.x": f"{p}tx",
        "blockIdx.x": f"{p}bx",
        "blockDim.x": f"{p}threads",
    }
    for old, new in names.items():
        for u in T.uses(st, old, body):
            rw.replace(u.span[0], u.span[1], new)
    shared: list[str] = []
    for decl in T.declarations(st, body):
        if not decl.has("__shared__"):
            continue
        if decl.has("extern"):
            return "a dynamic (extern) shared array: its size is the launch's, not the kernel's"
        line_start = st.text.rfind("\n", 0, decl.span[0]) + 1
        indent = st.text[line_start : decl.span[0]]
        indent = indent if not indent.strip() else " "
        prefix = declaration_prefix(st.text, decl)
        out = []
        for d in decl.declarators:
            if d.pointer or d.init is not None:
                return f"line {st.line(d.span[0])}: a shared pointer or initialised variable"
            dims = st.text[d.name_span[1] : d.span[1]]
            out.append(f"{prefix}{p}{d.name}[{k}]{dims};")
            out.append(f"auto &{d.name} = {p}{d.name}[{p}sub];  // this block's copy")
            shared.append(d.name)
        rw.replace(decl.span[0], decl.span[1], f"\n{indent}".join(out))
    params = {q.name for q in kernel.params}
    uni = _Uniform(st, body, params, helpers)
    block = st.node_at(kernel.body[0], ("compound_statement",))
    if block is None:
        return "the kernel's body was not parsed"
    guarded = bool(_barrier_calls(st, body))
    live = f"{p}live"
    after_brace = kernel.body[0] + 1
    nl = st.text.find("\n", after_brace)
    first = next((c for c in block.named_children if c.type != "comment"), None)
    ind = "  "
    if first is not None:
        ls = st.text.rfind("\n", 0, st.start(first)) + 1
        if not st.text[ls : st.start(first)].strip():
            ind = st.text[ls : st.start(first)]
    head = [
        f"// block merging: {k} blocks of {threads_x} threads run side by side in one CTA",
        f"constexpr unsigned {p}threads = {threads_x}u;  // blockDim.x of one merged block",
        f"const unsigned {p}sub = threadIdx.x / {p}threads;  // which of the {k} blocks",
        f"const unsigned {p}tx = threadIdx.x % {p}threads;  // threadIdx.x in that block",
        f"const unsigned {p}bx = blockIdx.x * {k}u + {p}sub;  // blockIdx.x of that block",
        f"const bool {live} = {p}bx < (unsigned)({blocks});  // the last CTA's spare blocks do no work",
    ]
    if not guarded:
        head.append(f"if (!{live}) return;")
    at = nl + 1 if 0 <= nl < (st.start(first) if first is not None else kernel.body[1]) else None
    text = "".join(f"{ind}{h}\n" for h in head)
    if at is None:
        rw.insert(after_brace, "\n" + text)
    else:
        rw.insert(at, text)
    if guarded:
        guard = _Guard(st, rw, uni, live)
        why = guard.block(block) or guard.unchanged_heads()
        if why is not None:
            return why
    return Merged(rw.text(), tuple(shared), guarded)
