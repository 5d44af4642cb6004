"""GA204 idle-reduction-threads: a tree reduction whose threads each load one element."""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from gpuadvise.rules import (
    Estimate,
    Evidence,
    Finding,
    KernelSource,
    ModelUnavailable,
    Rule,
    RuleContext,
    Variant,
    match_brace,
    unified_diff,
)

_TID_ALIAS = re.compile(r"\b([A-Za-z_]\w*)\s*=\s*threadIdx\.x\s*;")
_THREADIDX = re.compile(r"\bthreadIdx\s*\.\s*x\b")
_BLOCKDIM = re.compile(r"\bblockDim\s*\.\s*x\b")
_SUBSCRIPTED = re.compile(r"(?<![\w.])([A-Za-z_]\w*)\s*\[")
_IDENT = re.compile(r"(?<![\w.])[A-Za-z_]\w*\b")
_KEYWORDS = frozenset(
    "if for while do return switch case else goto break continue sizeof new delete".split()
)
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)[ \t]+(.+?)[ \t]*$", re.M)
_INT_SUFFIX = re.compile(r"\b(0[xX][0-9a-fA-F]+|\d+)[uUlL]+\b")


# ---------------------------------------------------------------------------------------------
# Small C helpers


def _depth(code: str, pos: int) -> int:
    """Brace depth at ``pos`` of a kernel body (1 at the body's top level)."""
    return code.count("{", 0, pos) - code.count("}", 0, pos)


def _split_top(text: str, sep: str) -> list[tuple[int, int]]:
    """Spans of ``text`` split at ``sep`` outside (), [] and {}."""
    out, depth, start = [], 0, 0
    for k, c in enumerate(text):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif c == sep and depth == 0:
            out.append((start, k))
            start = k + 1
    out.append((start, len(text)))
    return out


def _simple(expr: str) -> bool:
    """Whether ``expr`` needs no parentheses as an operand of ``+`` (a name, number, call or
    subscript, possibly with member access)."""
    e = expr.strip()
    return bool(re.fullmatch(r"[\w.]+(?:\s*(?:\([^()]*\)|\[[^\[\]]*\]))*", e))


def _paren(expr: str) -> str:
    return expr.strip() if _simple(expr) else f"({expr.strip()})"


def _constants(code: str) -> dict[str, int]:
    """Object-like ``#define NAME <integer expression>`` of a file (comments blanked)."""
    from gpuadvise.errors import GpuAdviseError
    from gpuadvise.rules import evaluate_expression as evaluate

    env: dict[str, int] = {}
    pending = [(m.group(1), _INT_SUFFIX.sub(r"\1", m.group(2))) for m in _DEFINE.finditer(code)]
    while pending:
        left = []
        for name, body in pending:
            try:
                env[name] = evaluate(body, env)
            except (GpuAdviseError, ZeroDivisionError, RecursionError):
                left.append((name, body))
        if len(left) == len(pending):
            break
        pending = left
    return env


def _value(expr: str, env: Mapping[str, int], block: int) -> int | None:
    """The integer value of ``expr`` with ``blockDim.x`` = ``block`` (None: not a constant)."""
    from gpuadvise.errors import GpuAdviseError
    from gpuadvise.rules import evaluate_expression as evaluate

    text = _INT_SUFFIX.sub(r"\1", _BLOCKDIM.sub("blockDim_x", expr))
    try:
        return evaluate(text, {**env, "blockDim_x": block})
    except (GpuAdviseError, ZeroDivisionError, RecursionError):
        return None


# ---------------------------------------------------------------------------------------------
# Detection: the one-element load and the tree after it


@dataclass(frozen=True)
class _Decl:
    """A declarator ``name = expr`` of a declaration statement (offsets in the body)."""

    name: str
    expr: tuple[int, int]
    stmt: tuple[int, int]  # the whole statement, without its ';'
    prefix: str  # the type words of the statement (``const unsigned``)


@dataclass(frozen=True)
class _Tree:
    form: str  # "loop" (a halving loop) or "unrolled" (if (tid < K) a[tid] += a[tid + K]; ...)
    start: int  # offsets in the body
    first: str  # the first step's text: the loop's initial stride or the first K
    first_span: tuple[int, int]  # the loop's init expression; the unrolled first step
    steps: int | None  # the number of steps (None: unknown)


@dataclass(frozen=True)
class _Match:
    arr: str
    tid: str
    store: tuple[int, int]  # the store statement, ';' included (body offsets)
    load: tuple[int, int]  # the expression with the global load (the store's or a variable's)
    via: str | None  # the variable the loaded value passes through
    pointer: str
    tree: _Tree
    decls: tuple[_Decl, ...]  # the declarations before the store (top level of the body)
    prologue_ok: bool  # only declarations before the store


def _shared_1d(ks: KernelSource) -> set[str]:
    names = set()
    for m in re.finditer(r"\b__shared__\b[^;{}]*;", ks.code):
        for name, dims in re.findall(r"([A-Za-z_]\w*)\s*((?:\[[^\[\]]*\]\s*)+)", m.group(0)):
            if dims.count("[") == 1:
                names.add(name)
    return names


def _declarations(body: str, end: int) -> tuple[list[_Decl], bool]:
    """The declarations at the body's top level before offset ``end``; False when something
    else (a statement, a nested block) comes before it too."""
    decls: list[_Decl] = []
    ok = True
    head = body[1:end]
    for a, b in _split_top(head, ";"):
        a, b = a + 1, b + 1  # offsets in the body
        stmt = body[a:b]
        if not stmt.strip():
            continue
        if "{" in stmt or "}" in stmt:
            ok = False
            continue
        if re.search(r"\b__shared__\b", stmt):
            continue
        parts = _split_top(stmt, ",")
        fa, fb = parts[0]
        m = re.fullmatch(
            r"\s*(?P<prefix>(?:[A-Za-z_][\w:]*[\s*&]+)+?)(?P<name>[A-Za-z_]\w*)\s*=(?!=)\s*(?P<e>.*\S)\s*",
            stmt[fa:fb],
            re.S,
        )
        if m is None or m.group("prefix").split()[0] in _KEYWORDS:
            ok = False
            continue
        prefix = " ".join(m.group("prefix").split())
        decls.append(
            _Decl(m.group("name"), (a + fa + m.start("e"), a + fa + m.end("e")), (a, b), prefix)
        )
        for pa, pb in parts[1:]:
            d = re.fullmatch(
                r"\s*(?P<name>[A-Za-z_]\w*)\s*=(?!=)\s*(?P<e>.*\S)\s*", stmt[pa:pb], re.S
            )
            if d is None:
                ok = False
                continue
            decls.append(
                _Decl(d.group("name"), (a + pa + d.start("e"), a + pa + d.end("e")), (a, b), prefix)
            )
    return decls, ok


def _pointers(ctx: RuleContext, ks: KernelSource, decls: list[_Decl]) -> set[str]:
    """The kernel's pointer parameters and the pointers declared from them."""
    from gpuadvise.errors import GpuAdviseError
    from gpuadvise.rules import parse_signature

    try:
        params = parse_signature(ks.text, ctx.spec.kernel)
    except GpuAdviseError:
        params = ()
    out = {p.name for p in params if p.is_pointer}
    out |= {d.name for d in decls if "*" in d.prefix}
    return out


def _halving(step: str, s: str) -> bool:
    e = re.escape(s)
    forms = (rf"{e}\s*>>=\s*1[uU]?", rf"{e}\s*/=\s*2[uU]?", rf"{e}\s*=\s*{e}\s*>>\s*1[uU]?",
             rf"{e}\s*=\s*{e}\s*/\s*2[uU]?")  # fmt: skip
    return any(re.fullmatch(f, step.strip()) for f in forms)


def _add_step(arr: str, tid: str, k: str) -> str:
    """``arr[tid] += arr[tid + k]`` or ``arr[tid] = arr[tid] + arr[tid + k]``."""
    a, t, kk = re.escape(arr), re.escape(tid), re.escape(k)
    lhs = rf"\b{a}\s*\[\s*{t}\s*\]"
    rhs = rf"\b{a}\s*\[\s*{t}\s*\+\s*{kk}\s*\]"
    return rf"{lhs}\s*(?:\+=\s*{rhs}|=\s*{lhs}\s*\+\s*{rhs})\s*;"


def _find_tree(body: str, after: int, arr: str, tid: str) -> _Tree | None:
    """The first sequential tree over ``arr`` after offset ``after``: a loop halving ``s`` whose
    threads ``tid < s`` add ``arr[tid + s]``, or unrolled ``if (tid < K) arr[tid] += arr[tid+K];``
    steps; a barrier must separate it from the store."""
    found: list[_Tree] = []
    loop = re.compile(
        r"\bfor\s*\(\s*(?:[A-Za-z_]\w*\s+)*(?P<s>[A-Za-z_]\w*)\s*=\s*(?P<init>[^;]+?)\s*;"
        r"\s*(?P=s)\s*(?:>|>=|!=)\s*[^;]+;\s*(?P<step>[^)]*)\)"
    )
    for m in loop.finditer(body, after):
        s = m.group("s")
        if not _halving(m.group("step"), s):
            continue
        k = m.end()
        while k < len(body) and body[k].isspace():
            k += 1
        end = match_brace(body, k) if k < len(body) and body[k] == "{" else body.find(";", k)
        inner = body[k : end + 1]
        guard = rf"\b{re.escape(tid)}\s*<\s*{re.escape(s)}\b"
        if re.search(_add_step(arr, tid, s), inner) and re.search(guard, inner):
            found.append(_Tree("loop", m.start(), m.group("init"), m.span("init"), None))
            break
    t = re.escape(tid)
    unrolled = re.compile(
        rf"\bif\s*\(\s*{t}\s*<\s*(?P<k>\w+)\s*\)\s*(?P<open>\{{)?\s*"
        rf"(?P<add>\b{re.escape(arr)}\s*\[\s*{t}\s*\][^;]*;)\s*(?(open)\}})"
    )
    steps = [
        m
        for m in unrolled.finditer(body, after)
        if re.fullmatch(_add_step(arr, tid, m.group("k")), m.group("add"))
    ]
    if steps:
        first = steps[0]
        span = (first.start(), first.end())
        sync = re.match(r"\s*__syncthreads\s*\(\s*\)\s*;", body[first.end() :])
        if sync:
            span = (first.start(), first.end() + sync.end())
        found.append(_Tree("unrolled", first.start(), first.group("k"), span, len(steps)))
    if not found:
        return None
    tree = min(found, key=lambda x: x.start)
    if not re.search(r"\b__syncthreads\s*\(", body[after : tree.start]):
        return None
    return tree


def find_idle_loads(ctx: RuleContext) -> list[_Match]:
    ks = ctx.kernel_source
    body = ks.body
    tids = {"threadIdx.x"} | set(_TID_ALIAS.findall(body))
    t = "(?P<tid>" + "|".join(re.escape(x) for x in sorted(tids, key=len, reverse=True)) + ")"
    out = []
    for arr in sorted(_shared_1d(ks)):
        store = re.compile(
            rf"(?<![\w.]){re.escape(arr)}\s*\[\s*{t}\s*\]\s*=(?!=)\s*(?P<rhs>[^;]*);"
        )
        for m in store.finditer(body):
            if _depth(body, m.start()) != 1:
                continue  # in a loop or a branch: not the simple one-element load
            decls, prologue_ok = _declarations(body, m.start())
            pointers = _pointers(ctx, ks, decls)
            load, via = m.span("rhs"), None
            rhs = m.group("rhs").strip()
            if re.fullmatch(r"[A-Za-z_]\w*", rhs):
                d = next((x for x in reversed(decls) if x.name == rhs), None)
                if d is None:
                    continue
                between = body[d.stmt[1] : m.start()]
                if re.search(rf"(?<![\w.]){re.escape(rhs)}\s*(?:[-+*/%&|^]|<<|>>)?=(?!=)|"
                             rf"\+\+\s*{re.escape(rhs)}\b|\b{re.escape(rhs)}\s*\+\+", between):  # fmt: skip
                    continue  # the value is changed between its load and the store
                load, via = d.expr, rhs
            text = body[load[0] : load[1]]
            subs = _SUBSCRIPTED.findall(text)
            if any(s == arr for s in subs):
                continue
            loads = [s for s in subs if s in pointers]
            if len(loads) != 1:
                continue
            tree = _find_tree(body, m.end(), arr, m.group("tid"))
            if tree is None:
                continue
            out.append(
                _Match(
                    arr,
                    m.group("tid"),
                    m.span(),
                    load,
                    via,
                    loads[0],
                    tree,
                    tuple(decls),
                    prologue_ok,
                )  # fmt: skip
            )
    return out


# ---------------------------------------------------------------------------------------------
# The transform: half the threads, each adding two elements during the load


def _sub_idents(text: str, names: Mapping[str, str]) -> str:
    if not names:
        return text
    pat = re.compile(r"(?<![\w.])(" + "|".join(re.escape(n) for n in names) + r")\b")
    return pat.sub(lambda m: names[m.group(1)], text)


def _fresh(name: str, body: str) -> str:
    new = f"{name}_hi"
    while re.search(rf"\b{re.escape(new)}\b", body):
        new += "_"
    return new


def first_add_diff(ks: KernelSource, mt: _Match, block: int, path: str) -> tuple[str | None, str]:
    """The kernel rewritten for blocks of ``block // 2`` threads that each add two elements
    during the load (the element thread ``t`` loaded and the one thread ``t + block/2`` did),
    with the tree's first step gone, as a diff; or None and why not.

    Every value the kernel computes stays the same: ``blockDim.x`` in the declarations before
    the store becomes ``2 * blockDim.x`` (the block the kernel was written for), the second
    element is what the original expression gives with ``threadIdx.x + blockDim.x`` for
    ``threadIdx.x``, and ``a + b`` is exactly the tree's first addition.
    """
    body = ks.body
    if not mt.prologue_ok:
        return None, "the kernel does more than declare variables before the store"
    rest = body[mt.store[1] :]
    tree = mt.tree
    first_abs = (tree.first_span[0] - mt.store[1], tree.first_span[1] - mt.store[1])
    outside = rest[: first_abs[0]] + rest[first_abs[1] :] if tree.form == "loop" else rest
    if _BLOCKDIM.search(outside):
        return None, "blockDim.x is used after the store (its meaning changes with the block)"
    # the variables the kernel derives from the thread index before the store
    thread_vars: dict[str, _Decl] = {}
    for d in mt.decls:
        e = body[d.expr[0] : d.expr[1]]
        if _THREADIDX.search(e) or any(
            re.search(rf"(?<![\w.]){re.escape(n)}\b", e) for n in thread_vars
        ):
            thread_vars[d.name] = d
    aliases = {
        n
        for n, d in thread_vars.items()
        if _THREADIDX.fullmatch(body[d.expr[0] : d.expr[1]].strip())
    }
    for n in set(thread_vars) - aliases:
        if re.search(rf"(?<![\w.]){re.escape(n)}\b", rest):
            return None, f"{n} (derived from the thread index) is used after the store"
    # after the store, the thread index only picks the tree's threads or elements
    env = _constants(ks.code)
    for a in (*aliases, "threadIdx.x"):
        for m in re.finditer(rf"(?<![\w.]){re.escape(a)}\b", rest):
            after = rest[m.end() :]
            before = rest[: m.start()].rstrip()
            if before.endswith("[") or re.match(r"\s*(?:==|!=)\s*0[uU]?\b", after):
                continue
            cmp = re.match(r"\s*<\s*([\w.]+)", after)
            if cmp:
                k = _value(cmp.group(1), env, block // 2)
                if (
                    k is None
                    or k <= block // 2
                    or (tree.form == "unrolled" and cmp.group(1) == tree.first)
                ):
                    continue
            return (
                None,
                "the thread index is used after the store in a way gpuadvise cannot follow",
            )
    # the second element: each thread variable again, for thread t + blockDim.x
    used = {n for n in _IDENT.findall(body[mt.load[0] : mt.load[1]])}
    need: dict[str, _Decl] = {}

    def visit(name: str) -> None:
        d = thread_vars.get(name)
        if d is None or name in need:
            return
        for n in _IDENT.findall(body[d.expr[0] : d.expr[1]]):
            visit(n)
        need[name] = d

    for n in sorted(used):
        visit(n)
    if not need and not _THREADIDX.search(body[mt.load[0] : mt.load[1]]):
        return None, "the loaded element does not depend on the thread index"
    hi = {n: _fresh(n, body) for n in need}

    def double(text: str) -> str:  # the block the kernel was written for
        return _BLOCKDIM.sub("(2 * blockDim.x)", text)

    def second(text: str) -> str:  # the same expression for thread t + blockDim.x
        return _sub_idents(_THREADIDX.sub("(threadIdx.x + blockDim.x)", double(text)), hi)

    base = ks.body_start
    edits: list[tuple[int, int, str]] = []  # file offsets
    for d in mt.decls:
        e = body[d.expr[0] : d.expr[1]]
        if _BLOCKDIM.search(e):
            edits.append((base + d.expr[0], base + d.expr[1], double(e)))
    # the declarations of the second element, just before the store (or the load's variable)
    anchor = mt.store[0]
    if mt.via is not None:
        anchor = next(d.stmt[0] for d in mt.decls if d.name == mt.via)
        while body[anchor].isspace():
            anchor += 1
    line_start = ks.text.rfind("\n", 0, base + anchor) + 1
    indent = re.match(r"[ \t]*", ks.text[line_start:]).group(0)  # type: ignore[union-attr]
    new_lines = []
    order = [d for d in mt.decls if d.name in need]
    for d in order:
        e = second(body[d.expr[0] : d.expr[1]])
        if e.startswith("(") and _THREADIDX.fullmatch(body[d.expr[0] : d.expr[1]].strip()):
            e = e[1:-1]
        new_lines.append(f"{indent}{d.prefix} {hi[d.name]} = {e};")
    load = body[mt.load[0] : mt.load[1]]
    summed = f"{_paren(double(load))} + {_paren(second(load))}"
    edits.append((base + mt.load[0], base + mt.load[1], summed))
    if new_lines:
        edits.append((line_start, line_start, "\n".join(new_lines) + "\n"))
    # the tree's first step is done: start at the next one
    fa, fb = base + tree.first_span[0], base + tree.first_span[1]
    if tree.form == "loop":
        init = ks.text[fa:fb]
        if not _BLOCKDIM.search(init):  # a constant or a variable: halve it
            half = re.fullmatch(r"(.*\S)\s*/\s*2([uU]?)", init.strip(), re.S)
            new_init = f"{half.group(1)} / 4{half.group(2)}" if half else f"{_paren(init)} / 2"
            edits.append((fa, fb, new_init))
    else:
        ls = ks.text.rfind("\n", 0, fa) + 1
        le = ks.text.find("\n", fb)
        le = len(ks.text) if le < 0 else le
        if ks.code[ls:fa].strip() or ks.code[fb:le].strip():
            edits.append((fa, fb, ""))
        else:
            edits.append((ls, le + 1, ""))
    text = ks.text
    for lo, up, new in sorted(edits, key=lambda x: (x[0], x[1]), reverse=True):
        text = text[:lo] + new + text[up:]
    return unified_diff(ks.text.split("\n"), text.split("\n"), path), ""


# ---------------------------------------------------------------------------------------------


def _tree_warp_iterations(threads: int) -> int:
    """Warps with an active lane summed over the steps of a sequential tree over ``threads``."""
    total, s = 0, threads // 2
    while s > 0:
        total += math.ceil(s / 32)
        s //= 2
    return total


class IdleReductionThreads(Rule):
    """A shared-memory tree reduction whose threads each load one element (seed 003's #3).

    What it detects
    ---------------
    In the kernel's source, a store of one global element per thread into a 1D ``__shared__``
    array, ``sdata[tid] = ... in[i] ...`` (exactly one subscript of a global pointer, at the
    top level of the kernel: no loop around it; possibly through a variable
    ``int v = in[i]; sdata[tid] = v;``), followed after a barrier by a sequential tree over the
    array: a loop halving ``s`` in which ``tid < s`` adds ``sdata[tid + s]``, or unrolled steps
    ``if (tid < 128) sdata[tid] += sdata[tid + 128];``, whose first step adds the upper half of
    the block to the lower half. The trace (when the emulator can run the kernel) must agree:
    at most one load of that buffer per thread in the traced CTAs. Reported at the store.
    An interleaved tree (``tid % (2*s)``, ``index = 2*s*tid``) is GA202's; after its fix, this
    rule applies.

    Why it is slow
    --------------
    Half of the threads go idle at the tree's first step, having done nothing but one load; a
    reduction has almost no arithmetic, so its speed is how many bytes are in flight. Each
    thread slot of the SM carries one element per CTA lifetime (the load, then a barrier and
    log2(block) tree steps during which it loads nothing): the kernel is bound by latency, far
    below the DRAM bandwidth (seed 003: 9.7 of 86 GB/s on a G80; an H100 runs seed 003's #3 at
    813 of 3350 GB/s, HARDWARE.md section 4). Adding two elements during the load doubles the
    bytes each thread slot carries and drops one tree step; a grid-stride loop over many
    elements per thread, with a grid just large enough to fill the GPU, also amortizes the tree
    and the barriers over all of them, and leaves far fewer partial sums for the next pass.

    Example
    -------
    ``kernels/reduction/reduce.cu``, ``reduce3`` (``sdata[tid] = i < n ? in[i] : 0;`` and a
    halving loop); ``reduce4`` adds during the load and ``reduce7`` loops over many elements.
    ``kernels/luminance/luminance.cu``: ``lum_sequential`` and ``lum_unrolled`` (one pixel per
    thread); ``lum_prefetch2`` adds two during the load.

    Fix
    ---
    First add during load (seed 003's #4), half the threads per block::

        unsigned i = blockIdx.x * (blockDim.x * 2) + threadIdx.x;
        sdata[tid] = (i < n ? in[i] : 0) + (i + blockDim.x < n ? in[i + blockDim.x] : 0);

    and start the tree one step later. Better (seed 003's #7): several elements per thread in
    a grid-stride loop, launched with just enough CTAs to fill the device (SMs x CTAs per SM at
    the kernel's occupancy; the message gives the number)::

        int v = 0;
        for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += blockDim.x * gridDim.x)
            v += in[i];
        sdata[tid] = v;

    How the estimate is made
    ------------------------
    An upper bound, ``2 x resident threads after / before``: with two elements per thread each
    thread slot carries twice the bytes per CTA lifetime, and the bandwidth of a latency-bound
    load stream is proportional to the bytes in flight (Little's law), so the kernel at most
    doubles its speed at the same occupancy (the occupancy of the half-size block is
    recomputed). The DRAM bandwidth caps it, and the kernel's time is unknown before it is
    measured, so the cap is not applied. Seed 003 measured 1.78x for this step on a G80;
    HARDWARE.md records 1.94x on an H100 (2^26 ints). The inputs give the tree's
    warp-iterations per element before and after. The grid-stride version gains more and is
    not estimated (seed 003: 1.42x over #6, 3.6x over #4 with the unrolling steps between; an
    H100: 1.33x over #6 and 1.34x over #4).

    Fix safety
    ----------
    Display-only: the fix changes the launch (half the threads per block), which lies in the
    user's host code. The variant is the kernel rewritten for blocks of half the size on the
    same grid (``blockDim.x`` in the index arithmetic before the store becomes
    ``2 * blockDim.x``; the second element is the one thread ``t + blockDim.x`` loaded; the
    tree's first step is removed), so every block writes the same result: the measurement stage
    runs it with the halved block, checks the outputs equal the kernel's (bit-identical: the
    first addition is the tree's own) and times it. Not offered when the kernel does more than
    declare variables before the store, uses ``blockDim.x`` after it, or uses the thread index
    after it in a way that needs the upper half of the block. The grid-stride version changes
    the grid and the number of partial sums, so it is described, not applied.
    """

    id = "GA204"
    name = "idle-reduction-threads"
    title = "Threads idle from the first step of a shared-memory reduction"
    severity = "warning"
    models = ("source", "trace", "occupancy", "waves")
    options = {}

    def detect(self, ctx: RuleContext) -> Iterator[Finding]:
        ks = ctx.kernel_source
        block = ctx.launch.block
        threads = int(block.x)
        if block.y != 1 or block.z != 1 or threads < 64 or threads & (threads - 1):
            return  # a 1D power-of-two block: the shape a halving tree is written for
        env = _constants(ks.code)
        for mt in find_idle_loads(ctx):
            first = _value(mt.tree.first, env, threads)
            if first is None:
                d = next((x for x in mt.decls if x.name == mt.tree.first.strip()), None)
                if d is not None:
                    first = _value(ks.body[d.expr[0] : d.expr[1]], env, threads)
            if first is None or 2 * first != threads:
                continue
            per_thread = self._loads_per_thread(ctx, mt.pointer, threads)
            if per_thread is not None and per_thread > 1.0 + 1e-9:
                continue  # the trace shows more loads than the source suggests
            line = ks.line(mt.store[0])
            w = self._waves(ctx)
            grid_stride = (
                f", or several per thread in a grid-stride loop over {w.ctas_per_wave} CTAs "
                f"({ctx.device.sm_count} SMs x {w.ctas_per_wave // ctx.device.sm_count} CTAs "
                f"per SM; {ctx.launch.grid.count / w.ctas_per_wave:.0f} elements per thread "
                "here, seed 003's #7)"
                if w is not None and ctx.device.sm_count
                else ""
            )
            evidence = [
                Evidence(
                    "elements_per_thread",
                    1 if per_thread is None else round(per_thread, 4),
                    1,
                    "<=",
                ),
                Evidence("first_step_threads", first, threads // 2, "==", "threads"),
                Evidence("threads_per_block", threads, unit="threads"),
                Evidence("tree_warp_iterations", _tree_warp_iterations(threads), unit="warps"),
                Evidence("source", "source and trace" if per_thread is not None else "source"),
            ]
            yield self.finding(
                ctx,
                f"each thread loads one element (`{mt.pointer}[...]`) into `{mt.arr}`, and the "
                f"tree's first step adds with {first} of {threads} threads: half the block is "
                f"idle from the first step on. Add two elements during the load with "
                f"{threads // 2} threads per block (seed 003's #4){grid_stride}",
                line=line,
                evidence=evidence,
                details={"match": mt, "first": first},
            )

    @staticmethod
    def _waves(ctx: RuleContext) -> Any:
        try:
            return ctx.waves
        except ModelUnavailable:
            return None

    @staticmethod
    def _loads_per_thread(ctx: RuleContext, pointer: str, threads: int) -> float | None:
        """Lanes of global loads from ``pointer``'s buffer per traced thread (None: no trace)."""
        import numpy as np

        from gpuadvise.rules import Kind, Space, active_lanes

        try:
            trace = ctx.trace
        except ModelUnavailable:
            return None
        if not trace.ctas:
            return None
        r = trace.records
        r = r[(r["space"] == int(Space.GLOBAL)) & (r["kind"] == int(Kind.LOAD))]
        lanes = active_lanes(r["mask"])
        if pointer in trace.buffers:
            start, size = trace.buffers[pointer]
            lanes &= (r["addr"] >= np.uint64(start)) & (r["addr"] < np.uint64(start + size))
        return float(lanes.sum()) / (len(trace.ctas) * threads)

    def estimate(self, ctx: RuleContext, finding: Finding) -> Estimate:
        from gpuadvise.rules import OccupancyInputError, max_active_blocks

        threads = int(ctx.launch.block.x)
        before = ctx.occupancy.active_warps_per_sm
        try:
            k = dataclasses.replace(ctx.occupancy_input, threads_per_block=threads // 2)
            after = max_active_blocks(ctx.device, k).active_warps_per_sm
        except (OccupancyInputError, TypeError):
            after = before
        ratio = min(1.0, after / before) if before else 1.0
        per_elem_before = _tree_warp_iterations(threads) / threads
        per_elem_after = _tree_warp_iterations(threads // 2) / threads
        return Estimate(
            round(2.0 * ratio, 3),
            "upper-bound",
            f"two elements per thread slot instead of one at {after} resident warps per SM "
            f"instead of {before}: a latency-bound load stream moves bytes in proportion to the "
            "bytes in flight (Little's law), so at most 2 x "
            f"{after}/{before}; DRAM bandwidth caps it (not applied: the kernel's time is "
            "unknown before measuring). Seed 003: 1.78x on a G80; HARDWARE.md: 1.94x on an "
            "H100",
            {
                "threads_per_block": threads,
                "resident_warps_before": before,
                "resident_warps_after": after,
                "tree_warp_iterations_per_element_before": round(per_elem_before, 5),
                "tree_warp_iterations_per_element_after": round(per_elem_after, 5),
            },
        )

    def transform(self, ctx: RuleContext, finding: Finding) -> Variant:
        mt: _Match = finding.details["match"]
        threads = int(ctx.launch.block.x)
        diff, why = first_add_diff(ctx.kernel_source, mt, threads, ctx.source_file)
        grid = ctx.launch.grid.as_tuple()
        if diff is None:
            return Variant(
                "display-only",
                f"add two elements during the load with {threads // 2} threads per block and "
                f"start the tree one step later (not rewritten automatically: {why})",
            )
        return Variant(
            "display-only",
            f"first add during the load: blocks of {threads // 2} threads on the same "
            f"{grid[0]}x{grid[1]}x{grid[2]} grid, each thread adding the element it loaded and "
            "the one thread t + blockDim.x loaded; the tree starts one step later and every "
            "block writes the same result (launch with the halved block)",
            diff=diff,
            launch={"block": [threads // 2, 1, 1]},
        )
