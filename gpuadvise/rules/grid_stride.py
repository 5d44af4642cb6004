"""A kernel's work made a grid-stride loop: what the trace says about each buffer (the elements
each thread touches, the range of each CTA) and the rewrites that run a one-element-per-thread
body, or a per-block reduction's load phase, over every original CTA index. GA206 offers them;
GA204 offers the seed's "first add during the load" (two CTA indices per thread, half the grid)
through :func:`reduction_diff`."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

import numpy as np

from gpuadvise.arrays import distinct, distinct_rows, run_heads
from gpuadvise.rules.context import RuleContext
from gpuadvise.rules.details import FindingDetails
from gpuadvise.rules.findings import Variant
from gpuadvise.source import fixkit, fixkit_grid
from gpuadvise.source.patch import block_index_uses
from gpuadvise.source.text import KernelSource
from gpuadvise.trace.access import Kind
from gpuadvise.trace.view import TraceView

PREFIX = "ga206_"
"""The prefix of the names the rewrite introduces (a source that uses it is not rewritten)."""

_GRIDDIM = re.compile(r"\bgridDim\b")
_HIDDEN = re.compile(r"\b(?:cooperative_groups|this_thread_block|this_grid|asm)\b")
_CG_INDEX = re.compile(
    r"\.\s*(?:group_index|block_index|block_rank)\s*\(|\bthis_grid\s*\(\s*\)\s*\.\s*thread_rank\s*\("
)
_GRID_GROUP = re.compile(r"\b([A-Za-z_]\w*)\s*(?:=\s*|\(\s*)(?:[\w:]+::)?this_grid\s*\(")
_MINMAX = re.compile(r"\b(?:f?max|f?min|__[a-z]*max\w*|__[a-z]*min\w*)\s*\(")


# ---------------------------------------------------------------------------------------------
# What the trace says: per buffer, the elements each thread touches and the range of each CTA


@dataclass(frozen=True)
class BufferUse(FindingDetails):
    """How the sampled CTAs touch one buffer: the most elements one thread touches; the elements
    per CTA when consecutive CTAs cover consecutive disjoint ranges, or disjoint element sets
    that each access instruction lays out CTA after CTA (``per_cta``; 0: neither); whether it
    is written."""

    name: str
    per_thread_max: int
    per_cta: int
    written: bool
    atomic: bool = False  # written, and every write an atomic
    disjoint: int = 0  # the most elements of one CTA, where the CTAs' element sets are disjoint
    count: int = 0  # the buffer's elements

    def streamed(self, threads: int, most: int) -> bool:
        """One to ``most`` elements per thread, CTA after CTA over the array."""
        return 1 <= self.per_thread_max <= most and threads // 2 <= self.per_cta <= most * threads

    def partitioned(self, threads: int, most: int, ctas: int) -> bool:
        """One to ``most`` elements per thread, the CTAs' element sets disjoint, and ``ctas``
        CTAs of that many elements cover the buffer once (however each CTA's elements are laid
        out: rows a grid apart, a tile of columns)."""
        per = self.disjoint
        return (
            1 <= self.per_thread_max <= most
            and threads // 2 <= per <= most * threads
            and self.count <= per * ctas < self.count + 2 * per
        )

    @property
    def per_block(self) -> bool:
        """One element per CTA at the CTA's index (``out[blockIdx.x]``)."""
        return self.per_cta == 1 and self.per_thread_max == 1


def _cta_step(ids: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> int:
    """Elements per CTA when CTA ``ids[j]`` covers ``[lo[j], hi[j]]`` and the ranges follow each
    other by a constant step, each within its step (0: they do not, or too few CTAs)."""
    if len(ids) < 2 or ids[-1] == ids[0]:
        return 0
    span = int(lo[-1] - lo[0])
    gap = int(ids[-1] - ids[0])
    if span <= 0 or span % gap:
        return 0
    step = span // gap
    if not np.array_equal(lo, lo[0] + (ids - ids[0]) * step):
        return 0
    if np.any(hi - lo >= step):
        return 0
    return step


def _disjoint_step(ids: np.ndarray, cta: np.ndarray, elem: np.ndarray, inst: np.ndarray) -> int:
    """Elements per CTA when the CTAs' element sets are disjoint and each access instruction
    covers consecutive ranges CTA after CTA (``_cta_step`` per instruction): two halves of an
    array (``k`` and ``k + n/2``), two ranges a whole grid apart... (0: they do not)."""
    pairs = distinct_rows([elem, cta])
    if len(distinct(pairs[0])) != pairs.shape[1]:
        return 0  # an element touched by two CTAs: a stencil, an overlapping window
    dense = distinct(cta)
    for i in distinct(inst):
        m = inst == i
        cs = distinct(cta[m])
        if len(cs) != len(dense):
            return 0  # an instruction some CTAs skip: not one stream per instruction
        lo = np.array([elem[m & (cta == c)].min() for c in cs], np.int64)
        hi = np.array([elem[m & (cta == c)].max() for c in cs], np.int64)
        if _cta_step(ids, lo, hi) == 0:
            return 0
    _, per = np.unique(pairs[1], return_counts=True)
    return int(per.max())


def _run_lengths(a: np.ndarray) -> np.ndarray:
    """The lengths of the runs of equal neighbours of the 1-D array ``a`` (of a sorted one:
    ``np.unique(a, return_counts=True)[1]``, no sort)."""
    first = np.flatnonzero(run_heads(a))
    return np.diff(np.append(first, len(a)))


def buffer_uses(view: TraceView) -> list[BufferUse]:
    """Each buffer the sampled CTAs touch, as :class:`BufferUse`."""
    lanes, lb = view.lanes, view.lane_buffer
    kinds = view.records["kind"][lanes.rec].astype(np.int64)
    out = []
    for b, name in enumerate(view.buffer_names):
        m = lb == b
        if not m.any():
            continue
        eb = max(int(view.buffers[name].elem_bytes), 1)
        elem = lanes.off[m] // eb
        cta = lanes.cta[m]
        thread = (cta.astype(np.int64) << 20) | lanes.tid[m]
        # the most elements one thread touches: the longest run of one thread in its distinct
        # (thread, element) pairs, which come sorted by thread (no second sort: issue 31)
        per_thread = _run_lengths(distinct_rows([thread, elem])[0])
        del thread
        # each CTA's distinct elements, CTA-major: its range (the first and the last of its
        # run) and how many (the run's length), from one sort (issue 31: a lexsort of the
        # lanes and a sort of the (element, CTA) pairs' CTAs did the same, 0.4 CPU-s on
        # llm.c's softmax_forward_kernel4)
        owners = distinct_rows([cta, elem])
        first = np.flatnonzero(run_heads(owners[0]))
        per = np.diff(np.append(first, owners.shape[1]))
        dense, lo = owners[0][first], owners[1][first]
        hi = owners[1][np.append(first[1:], owners.shape[1]) - 1]
        ids = view.ctas[dense].astype(np.int64)
        step = _cta_step(ids, lo, hi)
        if step == 0 and len(dense) >= 2:
            step = _disjoint_step(ids, np.searchsorted(dense, cta), elem, lanes.inst[m])
        writes = kinds[m] != int(Kind.LOAD)
        disjoint = len(dense) >= 2 and len(distinct(owners[1])) == owners.shape[1]
        out.append(
            BufferUse(
                name,
                int(per_thread.max()),
                step,
                bool(np.any(writes)),
                bool(np.any(writes)) and bool(np.all(kinds[m][writes] >= int(Kind.ATOMIC))),
                int(per.max()) if disjoint else 0,
                int(view.buffers[name].count),
            )
        )
    return out


def _position_reads(code: str, start: int, end: int) -> list[int]:
    """Where ``code`` reads the block's position between offsets ``start`` and ``end``:
    ``blockIdx``, cooperative groups' ``group_index()``/``block_index()``/``block_rank()``, a
    grid group's ``thread_rank()`` (``this_grid().thread_rank()``, ``g.thread_rank()`` of a
    ``g = this_grid()``)."""
    out = [s for s, _e, _m in block_index_uses(code, start, end)]
    out += [m.start() for m in _CG_INDEX.finditer(code, start, end)]
    for g in {m.group(1) for m in _GRID_GROUP.finditer(code)}:
        rank = re.compile(rf"\b{re.escape(g)}\s*\.\s*thread_rank\s*\(")
        out += [m.start() for m in rank.finditer(code, start, end)]
    return sorted(out)


def index_offset(ks: KernelSource) -> int | None:
    """The file offset of the kernel's first read of its block's position (the index
    statement): ``blockIdx``, cooperative groups' spellings, or a macro or helper function of
    the file that reads it (``#define GID (blockIdx.x * blockDim.x + threadIdx.x)``)."""
    code = ks.code
    b0, b1 = ks.body_start, ks.body_end
    offs = _position_reads(code, b0, b1)
    bodies = [k.body for k in ks.kernels() if k.body is not None]
    readers = {
        _reader_name(ks, s)
        for s in _position_reads(code, 0, len(code))
        if not any(b[0] <= s <= b[1] for b in bodies)
    }
    for name in sorted(n for n in readers if n):
        offs += [m.start() for m in re.compile(rf"\b{re.escape(name)}\b").finditer(code, b0, b1)]
    return min(offs) if offs else None


def is_grid_stride(ks: KernelSource) -> bool:
    """Whether the body loops and reads ``gridDim`` (a grid-stride loop, however spelled), or
    uses a function-like macro of the file that does (HeCBench's ``FOR_KERNEL_LOOP(i, n)``)."""
    if ks.loops() and _GRIDDIM.search(ks.body):
        return True
    st = ks.tree
    used = {name for name, _ in ks.identifiers(ks.span)}
    for n in st.walk(types=("preproc_function_def",)):
        name, value = n.child_by_field_name("name"), n.child_by_field_name("value")
        if name is None or value is None or st.code_of(name).strip() not in used:
            continue
        body = st.code_of(value)
        if _GRIDDIM.search(body) and re.search(r"\b(for|while)\b", body):
            return True
    return False


def _reader_name(ks: KernelSource, offset: int) -> str | None:
    """The name of the macro or function whose text holds ``offset`` (None: neither)."""
    node = ks.tree.node_at(offset)
    for a in ([node] if node is not None else []) + list(
        ks.tree.ancestors(node) if node is not None else []
    ):
        if a.type in ("preproc_def", "preproc_function_def"):
            n = a.child_by_field_name("name")
            return None if n is None else ks.tree.text_of(n)
        if a.type == "function_definition":
            d = a.child_by_field_name("declarator")
            while d is not None and d.child_by_field_name("declarator") is not None:
                d = d.child_by_field_name("declarator")
            return None if d is None else ks.tree.text_of(d).rsplit("::", 1)[-1]
    return None


def hidden_block_reads(ks: KernelSource) -> str | None:
    """Why remapping the body's ``blockIdx`` text would miss a read of the block index: a helper
    function or macro the kernel uses reads it, or cooperative groups / inline PTX do (None:
    nothing hides)."""
    code = ks.code
    bodies = [k.body for k in ks.kernels() if k.body is not None]
    for s, _e, _m in block_index_uses(code):
        if any(b[0] <= s <= b[1] for b in bodies):
            continue
        name = _reader_name(ks, s)
        if name is None or re.search(rf"\b{re.escape(name)}\b", ks.body):
            return (
                f"blockIdx is read outside the kernel, in {name or 'a helper'} "
                f"(line {ks.line_at(s)}: a helper or macro)"
            )
    if _HIDDEN.search(ks.body):
        return "the kernel reads its position through cooperative groups or inline PTX"
    other = [u for u in block_index_uses(code, ks.body_start, ks.body_end) if u[2] != "x"]
    if other:
        return f"the kernel reads blockIdx.{other[0][2] or ''} (line {ks.line_at(other[0][0])})"
    if PREFIX in code:
        return f"the source already uses names starting with {PREFIX}"
    return None


def launch_specific(v: Variant, derived: bool) -> Variant:
    """``v`` and its alternatives marked launch-specific when the original grid is not derived
    from a kernel parameter (a constant of this launch is written into the kernel); a
    display-only variant writes nothing."""
    if derived or v.safety == "display-only":
        return v
    alts = tuple(replace(a, launch_specific=a.diff is not None) for a in v.alternatives)
    return replace(v, launch_specific=v.diff is not None, alternatives=alts)


def size_param(ctx: RuleContext, ks: KernelSource, per_cta: int, grid: int) -> str | None:
    """The integer parameter ``p`` with ``ceil(p / per_cta) == grid``: the element count the
    grid was sized from (None: none)."""
    params = {p.name for p in ks.kernel.params} if ks.kernel is not None else set()
    env = ctx.spec.env()
    for name in sorted(params):
        value = env.get(name)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            if -(-value // per_cta) == grid:
                return name
    return None


def grid_bound(ctx: RuleContext, ks: KernelSource, per_cta: int, grid: int) -> tuple[str, bool]:
    """The C expression of the original grid's CTA count for the loop's bound: from an integer
    parameter ``p`` with ``ceil(p / per_cta) == grid`` (``(p + blockDim.x - 1) / blockDim.x``),
    else the launch's grid as a constant. Returns (text, derived from a parameter)."""
    threads = int(ctx.launch.block.x)
    name = size_param(ctx, ks, per_cta, grid)
    if name is not None:
        k = per_cta // threads if per_cta % threads == 0 else 0
        if k == 1:
            return f"({name} + blockDim.x - 1) / blockDim.x", True
        if k > 1:
            return f"({name} + {k} * blockDim.x - 1) / ({k} * blockDim.x)", True
        return f"({name} + {per_cta - 1}u) / {per_cta}u", True
    return f"{grid}u", False


def _indented(text: str, by: str) -> str:
    return "\n".join(by + ln if ln.strip() else "" for ln in text.split("\n"))


def _dedent_block(lines: list[str]) -> list[str]:
    width = min((len(ln) - len(ln.lstrip()) for ln in lines if ln.strip()), default=0)
    return [ln[width:] if ln.strip() else "" for ln in lines]


def _remapped(ks: KernelSource, start: int, end: int, block: str, blocks: str) -> str:
    """The source text of ``[start, end)`` with ``blockIdx.x`` read as ``block`` and
    ``gridDim.x`` as ``blocks`` (the original grid), comments kept (the fix kit, on the
    parser's member expressions)."""
    names = {"blockIdx.x": block, "gridDim.x": blocks}
    return fixkit_grid.remapped_text(ks.tree, ks.text, (start, end), names)


def elementwise_diff(ks: KernelSource, bound: str, k: int, path: str) -> str | None:
    """The kernel's whole body run once per original CTA index in a grid-stride loop, ``k``
    original CTAs per thread and iteration: ``blockIdx.x`` reads the loop's CTA index and
    ``gridDim.x`` the original grid's size; the body runs in a lambda (its ``return`` ends one
    CTA index's work)."""
    b0, b1 = ks.body_start, ks.body_end
    inner = _remapped(ks, b0 + 1, b1, f"{PREFIX}block", f"{PREFIX}blocks")
    lines = inner.split("\n")
    if lines and not lines[0].strip():
        lines = lines[1:]
    if lines and not lines[-1].strip():
        lines = lines[:-1]
    body = _dedent_block(lines)
    decl_line = ks.text.rfind("\n", 0, b0) + 1
    outer = re.match(r"[ \t]*", ks.text[decl_line:])
    ind = (outer.group(0) if outer else "") + "    "
    head = [f"const unsigned {PREFIX}blocks = {bound};  // the CTAs of the original grid"]
    if k == 1:
        head += [
            f"for (unsigned {PREFIX}block = blockIdx.x; {PREFIX}block < {PREFIX}blocks;",
            f"     {PREFIX}block += gridDim.x) {{",
            "    [=]() mutable {",
            _indented("\n".join(body), "        "),
            "    }();",
            "}",
        ]
    else:
        head += [
            f"for (unsigned {PREFIX}first = blockIdx.x * {k}u; {PREFIX}first < {PREFIX}blocks;",
            f"     {PREFIX}first += gridDim.x * {k}u) {{",
            "#pragma unroll",
            f"    for (unsigned {PREFIX}k = 0; {PREFIX}k < {k}u; ++{PREFIX}k) {{",
            f"        const unsigned {PREFIX}block = {PREFIX}first + {PREFIX}k;",
            f"        if ({PREFIX}block >= {PREFIX}blocks) break;",
            "        [=]() mutable {",
            _indented("\n".join(body), "            "),
            "        }();",
            "    }",
            "}",
        ]
    new_body = (
        "{\n"
        + "\n".join(
            ind + ln if ln and not ln.startswith("#") else ln for ln in "\n".join(head).split("\n")
        )
        + "\n"
        + ind[:-4]
        + "}"
    )
    rw = ks.rewrite().replace(b0, b1 + 1, new_body)
    return rw.diff(path)


_NOT_STRAIGHT = re.compile(
    r"\b(?:if|else|for|while|do|switch|return|goto|break|continue|asm)\b|\?|__syncthreads|atomic"
)


def pointee(ks: KernelSource, buffer: str) -> str | None:
    """The element type of a kernel pointer parameter ``buffer`` (None: not one)."""
    param = next((p for p in (ks.kernel.params if ks.kernel else ()) if p.name == buffer), None)
    if param is None or not param.pointer or param.type.count("*") != 1:
        return None
    return " ".join(
        w
        for w in re.sub(r"\*", " ", param.type).split()
        if w not in ("const", "volatile", "__restrict__", "__restrict", "restrict")
    )


def elementwise_vector_diff(
    ks: KernelSource, size: str, buffers: tuple[str, ...], width: int, k: int, path: str
) -> tuple[str | None, str]:
    """An element-wise kernel whose body is ``idx = <linear index>;`` then straight-line
    statements on ``buf[idx]`` under ``if (idx < n)`` (or after ``if (idx >= n) return;``),
    rewritten as a grid-stride loop over vectors of ``width`` elements (``k`` per thread and
    iteration, a block apart): each buffer read as one vector, the statements run once per
    lane on its fields, each buffer written stored as one vector; a scalar grid-stride loop
    runs the statements on the last ``n % width`` elements. (diff, why not)."""
    code = ks.code
    first = index_offset(ks)
    top = ks.top_level()
    j0 = next((j for j, st in enumerate(top) if st.start <= (first or -1) <= st.end), None)
    if j0 is None or top[j0].kind != "declaration":
        return None, "the block index is not read in a declaration of the index"
    decls = ks.declarations(within=(top[j0].start, top[j0].end + 1))
    names = [x.name for d in decls for x in d.declarators]
    if len(names) != 1:
        return None, "the index declaration declares more than the index"
    idx = names[0]
    idx_type = decls[0].type
    rest = top[j0 + 1 :]
    size_ref = rf"(?:\(\s*[\w\s]+\)\s*)?{re.escape(size)}"
    guards = ks.ifs(within=(rest[0].start, rest[0].end + 1)) if rest else []
    g = guards[0] if guards and guards[0].head[0] == rest[0].start else None
    if g is None:
        return None, "the index is not followed by a bounds check on the size"
    cond = code[g.condition[0] : g.condition[1]]
    cons = code[g.consequence[0] : g.consequence[1]].strip()
    if len(rest) == 1 and re.fullmatch(rf"\s*{re.escape(idx)}\s*<\s*{size_ref}\s*", cond):
        if re.search(r"\belse\b", code[g.consequence[1] : rest[0].end + 1]):
            return None, "the bounds check has an else branch"
        body_span = (
            g.consequence[0] + (1 if g.braced else 0),
            g.consequence[1] - (1 if g.braced else 0),
        )
    elif (
        re.fullmatch(rf"\s*{re.escape(idx)}\s*>=\s*{size_ref}\s*", cond)
        and re.fullmatch(r"\{?\s*return\s*;\s*\}?", cons)
        and len(rest) >= 2
    ):
        body_span = (rest[1].start, rest[-1].end + 1)
    else:
        return None, f"the index is not followed by `if ({idx} < {size})` alone"
    body_code = code[body_span[0] : body_span[1]]
    body_text = ks.text[body_span[0] : body_span[1]]
    if _NOT_STRAIGHT.search(body_code):
        return None, "the guarded statements are not straight-line (a branch, loop or return)"
    access = {b: re.compile(rf"\b{re.escape(b)}\s*\[\s*{re.escape(idx)}\s*\]") for b in buffers}
    rest_code = body_code
    for b, rx in access.items():
        if len(re.findall(rf"\b{re.escape(b)}\b", body_code)) != len(rx.findall(body_code)):
            return None, f"`{b}` is accessed at another index than `{idx}`"
        rest_code = rx.sub(" ", rest_code)
    if "[" in rest_code or re.search(rf"\b{re.escape(idx)}\b", rest_code):
        return None, f"the statements use `{idx}` or another array beyond `buf[{idx}]`"
    vtypes = {}
    for b in buffers:
        elem = pointee(ks, b)
        vt = next((t for w, t in VECTORS.get(elem or "", ()) if w == width), None)
        if vt is None:
            return None, f"no {width}-wide vector type for `{b}`"
        vtypes[b] = vt
    after = {
        b: [body_code[m.end() : m.end() + 3] for m in rx.finditer(body_code)]
        for b, rx in access.items()
    }
    written = {
        b
        for b, a in after.items()
        if any(re.match(r"\s*(?:[-+*/%&|^]|<<|>>)?=(?!=)", t) for t in a)
    }
    read = {b for b, a in after.items() if any(not re.match(r"\s*=(?!=)", t) for t in a)}
    const = {
        b
        for b in buffers
        if ks.kernel
        and any(p.name == b and "const" in p.type.split("*")[0] for p in ks.kernel.params)
    }
    if written & const:
        return None, "a const buffer is written"
    lanes = []
    for q in range(width):
        lane = {b: f"{PREFIX}{b}.{_FIELDS[q]}" for b in buffers}
        edits = fixkit_grid.element_edits(ks.tree, body_span, lane, idx)
        t = fixkit_grid.edited_text(ks.text, body_span, edits)
        lanes.append(
            "{" + "\n".join(ln.rstrip() for ln in _dedent_block(t.strip("\n").split("\n"))) + "}"
        )
    vi = f"{PREFIX}q"
    inner = []
    for b in buffers:
        if b in read:
            qual = "const " if b not in written else ""
            inner.append(
                f"{vtypes[b]} {PREFIX}{b} = reinterpret_cast<{qual}{vtypes[b]}*>({b})[{vi}];"
            )
        else:
            inner.append(f"{vtypes[b]} {PREFIX}{b};")
    inner += [ln for lane in lanes for ln in lane.split("\n")]
    inner += [
        f"reinterpret_cast<{vtypes[b]}*>({b})[{vi}] = {PREFIX}{b};" for b in buffers if b in written
    ]
    decl_line = ks.text.rfind("\n", 0, top[j0].start) + 1
    indm = re.match(r"[ \t]*", ks.text[decl_line:])
    pad = indm.group(0) if indm else "    "
    lines = [
        f"// {', '.join(buffers)} as {width}-wide vectors: pointer parameters, 16-byte aligned "
        "(cudaMalloc: 256)",
        f"const unsigned {PREFIX}vecs = (unsigned){size} / {width}u;",
        f"const unsigned {PREFIX}stride = blockDim.x * gridDim.x;",
        f"for (unsigned {PREFIX}j = blockIdx.x * blockDim.x * {k}u + threadIdx.x; "
        f"{PREFIX}j < {PREFIX}vecs;",
        f"     {PREFIX}j += {PREFIX}stride * {k}u) {{",
        "#pragma unroll",
        f"    for (unsigned {PREFIX}k = 0; {PREFIX}k < {k}u; ++{PREFIX}k) {{",
        f"        const unsigned {vi} = {PREFIX}j + {PREFIX}k * blockDim.x;",
        f"        if ({vi} >= {PREFIX}vecs) break;",
        *("        " + ln for ln in inner),
        "    }",
        "}",
        f"// the last {size} % {width} elements, one per thread",
        f"for ({idx_type} {idx} = {PREFIX}vecs * {width}u + blockIdx.x * blockDim.x + threadIdx.x;",
        f"     {idx} < {size}; {idx} += {PREFIX}stride) {{",
        *("    " + ln for ln in _dedent_block(body_text.strip("\n").split("\n"))),
        "}",
    ]
    text = "\n".join(ln if ln.startswith("#") else pad + ln for ln in lines).lstrip(" \t")
    rw = ks.rewrite().replace(top[j0].start, top[-1].end + 1, text)
    return rw.diff(path), ""


def _shared_names(ks: KernelSource) -> dict[str, str]:
    """The body's ``__shared__`` arrays: name -> element type."""
    out = {}
    for d in ks.declarations():
        if d.has("__shared__") and not d.has("extern"):
            for x in d.declarators:
                if x.dims:
                    out[x.name] = d.type
    return out


@dataclass(frozen=True)
class LoadPhase:
    """A per-block reduction's load phase, as the source writes it: the top-level statements
    before the first ``__syncthreads()``, ending with ``arr[idx] = value;`` into a shared array
    of ``elem``; ``outside``: the declarations that do not depend on the block index (kept
    before the loop), ``inside``: the statements that do (run once per original CTA index)."""

    start: int  # offset of the first statement
    store_end: int  # offset past the store
    arr: str
    idx: str
    value: str  # the stored expression, blockIdx remapped
    elem: str
    outside: tuple[str, ...]
    inside: tuple[str, ...]
    inside_raw: tuple[str, ...]  # the inside statements and the store, as written
    pad: str
    comments: tuple[str, ...] = ()  # the comments of the replaced range, carried over


def load_phase(ks: KernelSource, prefix: str = PREFIX) -> LoadPhase | str:
    """The load phase of a per-block shared-memory reduction (why not, as text)."""
    top = ks.top_level()
    code = ks.code
    sync = next(
        (
            j
            for j, s in enumerate(top)
            if re.fullmatch(r"__syncthreads\s*\(\s*\)\s*;", code[s.start : s.end + 1].strip())
        ),
        None,
    )
    if sync is None or sync == 0:
        return "no barrier after the load phase at the top level of the kernel"
    shared = _shared_names(ks)
    store = top[sync - 1]
    st = code[store.start : store.end + 1]
    ss = fixkit_grid.subscript_store(ks.tree, (store.start, store.end + 1))
    idx = code[ss.index[0] : ss.index[1]] if ss is not None else ""
    if ss is None or ss.name not in shared or "[" in idx:
        return "the load phase does not end with a store into a shared array"
    arr = ss.name
    rest = code[top[sync].end + 1 : ks.body_end]
    if _MINMAX.search(rest) or not re.search(r"\+=|\+", rest):
        return "the tree after the load does not add (only + is rewritten)"
    prologue = top[: sync - 1]
    dependent: set[str] = set()
    # the prologue's pieces: whole statements, or the declarators of a declaration that holds
    # both kinds (`unsigned t = threadIdx.x, i = blockIdx.x * B + t;`), each made a declaration
    # of its own by the fix kit: (start, end, the declaration's prefix for a declarator)
    outside: list[tuple[int, int, str]] = []
    inside: list[tuple[int, int, str]] = []
    for s in prologue:
        text = code[s.start : s.end + 1]
        if re.search(r"\breturn\b", text):
            return "the load phase returns early"
        decls = ks.declarations(within=(s.start, s.end + 1))
        if s.kind != "declaration" or len(decls) != 1:
            dependent |= {x.name for d in decls for x in d.declarators}
            inside.append((s.start, s.end + 1, ""))
            continue
        decl = decls[0]
        pieces = []
        for dd in decl.declarators:
            a, b = dd.span
            names = {n for n, _ in ks.identifiers((a, b))}
            reads_block = bool(block_index_uses(code, a, b))
            pieces.append((dd, not (reads_block or names & dependent)))
            if not pieces[-1][1]:
                dependent.add(dd.name)
        if all(free for _, free in pieces):
            outside.append((s.start, s.end + 1, ""))
        elif not any(free for _, free in pieces):
            inside.append((s.start, s.end + 1, ""))
        else:
            shared_prefix = fixkit.declaration_prefix(ks.text, decl)
            for dd, free in pieces:
                (outside if free else inside).append((dd.span[0], dd.span[1], shared_prefix))
    idx_names = {n for n, _ in ks.identifiers((store.start, store.end + 1))}
    if block_index_uses(code, store.start, ss.index[1] + 1) or (
        {n for n in idx_names if re.search(rf"\b{re.escape(n)}\b", idx)} & dependent
    ):
        return "the shared array's index depends on the block index"

    def src(piece: tuple[int, int, str]) -> str:
        a, b, decl = piece
        text = _remapped(ks, a, b, f"{prefix}block", f"{prefix}blocks")
        return decl + text + ";" if decl else text

    def raw(piece: tuple[int, int, str]) -> str:
        a, b, decl = piece
        return decl + ks.text[a:b] + ";" if decl else code[a:b]

    value = _remapped(ks, ss.value[0], ss.value[1], f"{prefix}block", f"{prefix}blocks")
    decl_line = ks.text.rfind("\n", 0, top[0].start) + 1
    ind = re.match(r"[ \t]*", ks.text[decl_line:])
    return LoadPhase(
        top[0].start,
        store.end + 1,
        arr,
        idx.strip(),
        value.strip(),
        shared[arr],
        tuple(src(p) for p in outside),
        tuple(src(p) for p in inside),
        tuple(raw(p) for p in inside) + (st,),
        ind.group(0) if ind else "    ",
        tuple(fixkit.comments_within(ks.tree, (top[0].start, store.end + 1))),
    )


def reduction_diff(
    ks: KernelSource, bound: str, path: str, k: int = 1, prefix: str = PREFIX
) -> tuple[str | None, str]:
    """The load phase of a per-block shared-memory reduction (the statements before the first
    ``__syncthreads()``, ending with ``sdata[tid] = <value>;``) made a grid-stride loop that
    adds the value of every original CTA index the thread covers, ``k`` consecutive indices per
    iteration, then stores the sum. (diff, why not) — the tree after it is kept; its operator
    must be ``+``. ``prefix`` starts the names the rewrite introduces (GA204's differ from
    GA206's, so that GA206 can rewrite GA204's result again)."""
    lp = load_phase(ks, prefix)
    if isinstance(lp, str):
        return None, lp
    acc = f"{prefix}sum"
    lines = [*lp.comments, *lp.outside]
    lines += [
        f"const unsigned {prefix}blocks = {bound};  // the CTAs of the original grid",
        f"{lp.elem} {acc} = 0;",
    ]
    body = [*lp.inside, f"{acc} += {lp.value};"]
    if k == 1:
        lines += [
            f"for (unsigned {prefix}block = blockIdx.x; {prefix}block < {prefix}blocks;",
            f"     {prefix}block += gridDim.x) {{",
        ]
        lines += ["    " + ln for b in body for ln in b.split("\n")]
        lines += ["}"]
    else:
        lines += [
            f"for (unsigned {prefix}first = blockIdx.x * {k}u; {prefix}first < {prefix}blocks;",
            f"     {prefix}first += gridDim.x * {k}u) {{",
            "#pragma unroll",
            f"    for (unsigned {prefix}k = 0; {prefix}k < {k}u; ++{prefix}k) {{",
            f"        const unsigned {prefix}block = {prefix}first + {prefix}k;",
            f"        if ({prefix}block >= {prefix}blocks) break;",
        ]
        lines += ["        " + ln for b in body for ln in b.split("\n")]
        lines += ["    }", "}"]
    lines += [f"{lp.arr}[{lp.idx}] = {acc};"]
    text = "\n".join(ln if ln.startswith("#") else lp.pad + ln for ln in lines).lstrip(" \t")
    rw = ks.rewrite().replace(lp.start, lp.store_end, text)
    return rw.diff(path), ""


# Vector types of 16 (or 8) bytes by the element type: (vector width, type name).
VECTORS: dict[str, tuple[tuple[int, str], ...]] = {
    "int": ((4, "int4"), (2, "int2")),
    "unsigned": ((4, "uint4"), (2, "uint2")),
    "unsigned int": ((4, "uint4"), (2, "uint2")),
    "float": ((4, "float4"), (2, "float2")),
    "double": ((2, "double2"),),
    "long long": ((2, "longlong2"),),
    "long long int": ((2, "longlong2"),),
    "unsigned long long": ((2, "ulonglong2"),),
    "unsigned long long int": ((2, "ulonglong2"),),
}
_FIELDS = ("x", "y", "z", "w")


@dataclass(frozen=True)
class VectorLoad(FindingDetails):
    """A buffer the load phase only sums, read at the thread's linear index: ``buffer`` a
    kernel pointer parameter of ``elem`` (runtime allocations are 256-byte aligned), ``count``
    the size parameter (the elements ``[0, count)``); ``vectors``: (width, type) offered."""

    buffer: str
    elem: str
    count: str
    vectors: tuple[tuple[int, str], ...]


def vector_load(ks: KernelSource, lp: LoadPhase, buffer: str, count: str) -> VectorLoad | str:
    """Whether the load phase ``lp`` only sums elements of ``buffer`` (a kernel pointer
    parameter), so that it can read them as vectors (why not, as text). The index being the
    thread's linear index comes from the trace (the caller); here the source: the statements
    that read ``buffer`` combine its elements with ``+`` only (bounds checks allowed), and read
    no other array."""
    param = next((p for p in (ks.kernel.params if ks.kernel else ()) if p.name == buffer), None)
    if param is None or not param.pointer or param.type.count("*") != 1:
        return f"`{buffer}` is not a pointer parameter of the kernel (its alignment is unknown)"
    elem = " ".join(
        w
        for w in re.sub(r"\*", " ", param.type).split()
        if w not in ("const", "volatile", "__restrict__", "__restrict", "restrict")
    )
    vectors = VECTORS.get(elem)
    if vectors is None:
        return f"no vector type for `{elem}`"
    if " ".join(lp.elem.split()) != elem:
        return f"the shared array holds `{lp.elem}`, not the `{elem}` of `{buffer}`"
    sub = re.compile(rf"\b{re.escape(buffer)}\s*\[[^\[\]]*\]")
    reads = [t for t in lp.inside_raw if sub.search(t)]
    if not reads:
        return f"the load phase does not read `{buffer}` where gpuadvise can see it"
    store = re.compile(rf"^\s*{re.escape(lp.arr)}\s*\[[^\[\]]*\]\s*=(?!=)")
    for t in reads:
        rest = sub.sub(" L ", store.sub(" ", t))
        if "[" in rest or re.search(r"[-*/%^~]|<<|>>", rest.replace("->", "")):
            return f"`{t.strip()}` does more than add elements of `{buffer}`"
        if any(w not in ("if", "else") for w in re.findall(r"\b([A-Za-z_]\w*)\s*\(", rest)):
            return f"`{t.strip()}` calls a function on the elements of `{buffer}`"
    return VectorLoad(buffer, elem, count, vectors)


def vector_reduction_diff(
    ks: KernelSource, lp: LoadPhase, vec: VectorLoad, width: int, vtype: str, k: int, path: str
) -> str | None:
    """The load phase replaced by a grid-stride loop that reads ``vec.buffer`` as ``vtype``
    (``width`` elements per load), ``k`` loads per thread and iteration a block apart, adds
    their elements, then a scalar loop over the last ``count % width`` elements; the sum is
    stored where the kernel stored its value, the tree after it kept."""
    acc, n, buf = f"{PREFIX}sum", vec.count, vec.buffer
    fields = " + ".join(f"{PREFIX}e.{c}" for c in _FIELDS[:width])
    lines = [*lp.comments, *lp.outside]
    lines += [
        f"{lp.elem} {acc} = 0;",
        f"{{  // {buf} as {vtype}: a pointer parameter, 16-byte aligned (cudaMalloc: 256)",
        f"    const unsigned {PREFIX}vecs = {n} / {width}u;",
        f"    const unsigned {PREFIX}stride = blockDim.x * gridDim.x;",
        f"    const {vtype}* {PREFIX}v = reinterpret_cast<const {vtype}*>({buf});",
    ]
    if k == 1:
        lines += [
            f"    for (unsigned {PREFIX}j = blockIdx.x * blockDim.x + threadIdx.x; "
            f"{PREFIX}j < {PREFIX}vecs;",
            f"         {PREFIX}j += {PREFIX}stride) {{",
            f"        const {vtype} {PREFIX}e = {PREFIX}v[{PREFIX}j];",
            f"        {acc} += {fields};",
            "    }",
        ]
    else:
        lines += [
            f"    for (unsigned {PREFIX}j = blockIdx.x * blockDim.x * {k}u + threadIdx.x; "
            f"{PREFIX}j < {PREFIX}vecs;",
            f"         {PREFIX}j += {PREFIX}stride * {k}u) {{",
            "#pragma unroll",
            f"        for (unsigned {PREFIX}k = 0; {PREFIX}k < {k}u; ++{PREFIX}k) {{",
            f"            const unsigned {PREFIX}q = {PREFIX}j + {PREFIX}k * blockDim.x;",
            f"            if ({PREFIX}q < {PREFIX}vecs) {{",
            f"                const {vtype} {PREFIX}e = {PREFIX}v[{PREFIX}q];",
            f"                {acc} += {fields};",
            "            }",
            "        }",
            "    }",
        ]
    lines += [
        f"    // the last {n} % {width} elements, one per thread",
        f"    for (unsigned {PREFIX}j = {PREFIX}vecs * {width}u + blockIdx.x * blockDim.x + "
        f"threadIdx.x; {PREFIX}j < {n};",
        f"         {PREFIX}j += {PREFIX}stride)",
        f"        {acc} += {buf}[{PREFIX}j];",
        "}",
        f"{lp.arr}[{lp.idx}] = {acc};",
    ]
    text = "\n".join(ln if ln.startswith("#") else lp.pad + ln for ln in lines).lstrip(" \t")
    return ks.rewrite().replace(lp.start, lp.store_end, text).diff(path)
