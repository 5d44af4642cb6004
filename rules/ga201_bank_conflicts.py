"""GA201 bank-conflicts: shared-memory accesses that take several wavefronts (bank model)."""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gpuadvise.rules import (
    ATOMICS,
    Estimate,
    Evidence,
    Finding,
    FindingDetails,
    KernelSource,
    ModelUnavailable,
    Rule,
    RuleContext,
    Variant,
    contended_lines,
    counted,
    dram_bytes_per_s,
    roofline,
    shared_wavefront_estimate,
    sm_cycles_per_s,
    work_ratio,
)

if TYPE_CHECKING:
    import numpy as np


@dataclass(frozen=True)
class ConflictLine(FindingDetails):
    """A conflicting line: its wavefronts beyond the ideal over the traced CTAs, and its
    shared-memory instructions (trace instruction indices) that the padding plan replays."""

    excess_wavefronts: int
    insts: tuple[int, ...]


CONTENDED_LANES = 4.0
"""Lanes per address (GA207's ``min_lanes``) from which a line's shared atomics are contended."""
MAX_PAD_ELEMENTS = 64  # pads tried per array, in elements of the array's type
MAX_STATIC_SMEM = 48 * 1024  # a padded kernel must stay within the default static limit

# ---------------------------------------------------------------------------------------------
# Source: the 2D __shared__ arrays a line reads or writes, and whether padding them is safe


@dataclass(frozen=True)
class ArrayDecl:
    """A ``__shared__ T name[R][C]`` declarator: where its inner dimension's text lies (file
    offsets), the dimensions' values, and the scope whose code may use it."""

    name: str
    rows: int
    cols: int
    inner: tuple[int, int]  # file offsets of the text of C
    file_scope: bool
    name_at: int = -1  # file offset of the declarator's name


def find_array_decl(ks: KernelSource, name: str) -> tuple[ArrayDecl | None, str]:
    """The declaration of the 2D ``__shared__`` array ``name`` the kernel sees (its body's, else
    the file's), or None and why not."""
    cands = []
    for d in ks.declarations(file=True):
        if not d.has("__shared__") or d.has("extern"):
            continue
        inside = ks.body_start < d.span[0] < ks.body_end
        if not (inside or d.file_scope):
            continue
        for dd in d.declarators:
            if dd.name == name:
                cands.append((not inside, dd))
    if not cands:
        return None, f"no `__shared__ T {name}[R][C]` declaration found"
    file_scope, dd = sorted(cands, key=lambda c: c[0])[0]  # the body's shadows the file's
    if len(dd.dims) == 1:
        return None, (
            f"{name} is a 1D array: no padding of it changes the stride between the words the "
            "lanes touch; make consecutive lanes touch consecutive words instead"
        )
    if len(dd.dims) != 2:
        return None, f"{name} has {len(dd.dims)} dimensions: only 2D arrays are padded"
    if dd.init is not None:
        return None, f"{name} has an initializer or attributes after its dimensions"
    rows, cols = (ks.value(ks.code[a:b]) for a, b in dd.dims)
    if rows is None or cols is None:
        return None, f"the dimensions of {name} are not integer constants gpuadvise can evaluate"
    if rows <= 0 or cols <= 0:
        return None, f"{name} has a non-positive dimension"
    return ArrayDecl(name, rows, cols, dd.dims[1], file_scope, dd.name_span[0]), ""


def _data_addressed(ctx: RuleContext, inst: int) -> bool:
    """The trace instruction's address comes from loaded data (ptx/dataflow.py)."""
    try:
        return bool(ctx.trace.instructions[inst].data_address)
    except (ModelUnavailable, IndexError):
        return False


def _arrays_of(ctx: RuleContext, insts: Sequence[int]) -> tuple[str, ...]:
    """The shared variables (source names) the traced accesses of ``insts`` reach, sorted;
    ``("dynamic",)`` for dynamic shared memory, ``("?",)`` when the layout is not known."""
    import numpy as np

    from gpuadvise.errors import GpuAdviseError
    from gpuadvise.rules import Space, active_lanes

    try:
        records = ctx.trace.records
        layout = shared_layout(ctx)
    except GpuAdviseError:  # ModelUnavailable too
        return ("?",)
    # the line's first 4,096 shared records, copied alone (not every shared record)
    at = (records["space"] == int(Space.SHARED)) & np.isin(
        records["inst"], np.asarray(insts, dtype=records["inst"].dtype)
    )
    mine = records[np.flatnonzero(at)[:4096]]
    if not len(mine):
        return ("?",)
    addr = mine["addr"][active_lanes(mine["mask"])]
    names = set()
    for v in layout.vars:
        if ((addr >= np.uint64(v.offset)) & (addr < np.uint64(v.offset + v.size))).any():
            names.add(source_name(v.ptx_name) or v.ptx_name)
    if (addr >= np.uint64(layout.dynamic_offset)).any() and not any(
        v.offset >= layout.dynamic_offset for v in layout.vars
    ):
        names.add("dynamic")
    return tuple(sorted(names)) or ("?",)


def _in_reduction_tree(ctx: RuleContext, insts: Sequence[int]) -> bool:
    """Some of ``insts`` are the combines of a shared-memory tree reduction (the trace's)."""
    lines = {ctx.trace.line_of(i) for i in insts}
    return any(set(t.lines) & lines for t in ctx.reduction_trees)


def unsafe_use(ks: KernelSource, decl: ArrayDecl) -> str | None:
    """Why padding ``decl`` could change what the program does (None: every use indexes it as
    ``a[i][j]``: no pointer to it or into it, no flat or one-subscript access, no ``sizeof``).
    Searched: the kernel's body (or the whole file for a file-scope array) and every macro."""
    found = ks.uses(decl.name, file=decl.file_scope)
    macros = ks.macro_uses(decl.name)
    uses = sorted(found + macros, key=lambda u: u.span) if decl.file_scope else found + macros
    for use in uses:
        if use.span[0] == decl.name_at:
            continue  # the declaration itself
        line = ks.line_at(use.span[0])
        if use.subscripts != 2:
            n = use.subscripts
            how = "without a subscript" if not n else f"with {counted(n, 'subscript')}"
            return f"line {line} uses {decl.name} {how}"
        if use.address_taken:
            return f"line {line} takes the address of an element of {decl.name}"
    return None


# ---------------------------------------------------------------------------------------------
# The shared-memory layout the trace's addresses are in, and the padded layout


@dataclass(frozen=True)
class SharedVar:
    """A static ``.shared`` variable of the PTX, where the tracer placed it."""

    ptx_name: str
    offset: int
    size: int
    align: int


@dataclass(frozen=True)
class Layout:
    """The static shared variables in address order, where the dynamic area starts and the
    alignment it keeps."""

    vars: tuple[SharedVar, ...]
    dynamic_offset: int
    dynamic_align: int


def shared_layout(ctx: RuleContext) -> Layout:
    """The kernel's shared variables as the tracer lays them out (the rules' shared-layout
    service: the emulator's placement; the GPU tracer agrees on the kernels suite)."""
    placed = ctx.services.shared_layout()
    out = []
    dyn_align = 16
    for v in placed.variables:
        if v.extern:
            dyn_align = max(dyn_align, v.align)
            continue
        out.append(SharedVar(v.name, v.offset, v.size_bytes, max(v.align, 1)))
    return Layout(tuple(sorted(out, key=lambda v: v.offset)), placed.dynamic_offset, dyn_align)


def ptx_var_for(name: str, layout: Sequence[SharedVar]) -> SharedVar | None:
    """The PTX variable of source array ``name``: ``name`` itself at file scope, or the
    function-local static ``_ZZ<kernel>E<len><name>`` (``_<n>`` suffixes for duplicates)."""
    local = re.compile(rf"E{len(name)}{re.escape(name)}(?:_\d+)?$")
    hits = [v for v in layout if v.ptx_name == name or local.search(v.ptx_name)]
    return hits[0] if len(hits) == 1 else None


def _align_up(x: int, a: int) -> int:
    return (x + a - 1) // a * a if a > 1 else x


@dataclass(frozen=True)
class Padded:
    """One array to pad: its PTX variable, row shape (columns and element bytes), the pad."""

    var: SharedVar
    cols: int
    elem: int
    pad: int


def remap(records: np.ndarray, layout: Layout, pads: Sequence[Padded]) -> np.ndarray:
    """``records`` with their shared addresses moved to the layout in which each array of
    ``pads`` has ``pad`` more elements per row (the variables after it shift as the emulator
    would lay them out, each at its alignment; so does the dynamic area). Records of other
    spaces are left alone."""
    import numpy as np

    from gpuadvise.rules import Space, active_lanes

    by_name = {p.var.ptx_name: p for p in pads}
    new_off: list[int] = []
    off = layout.vars[0].offset if layout.vars else layout.dynamic_offset
    for v in layout.vars:
        off = _align_up(off, v.align)
        new_off.append(off)
        p = by_name.get(v.ptx_name)
        off += v.size if p is None else v.size // p.cols * (p.cols + p.pad)
    new_dyn = _align_up(off, layout.dynamic_align) if layout.vars else layout.dynamic_offset
    out = records.copy()
    shared = np.flatnonzero(out["space"] == int(Space.SHARED))
    if len(shared) == 0:
        return out
    addr = out["addr"][shared]
    lanes = active_lanes(out["mask"][shared])
    new = addr.copy()
    for v, start in zip(layout.vars, new_off, strict=True):
        inside = lanes & (addr >= np.uint64(v.offset)) & (addr < np.uint64(v.offset + v.size))
        rel = addr[inside] - np.uint64(v.offset)
        p = by_name.get(v.ptx_name)
        if p is not None:
            row_bytes = np.uint64(p.cols * p.elem)
            rel = rel // row_bytes * np.uint64((p.cols + p.pad) * p.elem) + rel % row_bytes
        new[inside] = rel + np.uint64(start)
    beyond = lanes & (addr >= np.uint64(layout.dynamic_offset))
    new[beyond] = addr[beyond] - np.uint64(layout.dynamic_offset) + np.uint64(new_dyn)
    out["addr"][shared] = new
    return out


def cost(records: np.ndarray, times: np.ndarray | None = None) -> tuple[int, int]:
    """(wavefronts, ideal) of shared ``records`` under the bank model, each record counted
    ``times`` times (None: once)."""
    import numpy as np

    from gpuadvise.rules import record_wavefronts

    if len(records) == 0:
        return 0, 0
    wf, need = record_wavefronts(records)
    if times is None:
        return int(wf.sum()), int(need.sum())
    return int(wf.astype(np.int64) @ times), int(need.astype(np.int64) @ times)


CHUNK = 1 << 15  # records at a time over the whole trace (a first wave holds millions)


def _widest_access(shared: np.ndarray, v: SharedVar) -> int:
    """The widest access (bytes per lane) of any record with a lane inside ``v``."""
    import numpy as np

    from gpuadvise.rules import active_lanes

    widest = 1
    for k in range(0, len(shared), CHUNK):
        part = shared[k : k + CHUNK]
        a = part["addr"]
        inside = active_lanes(part["mask"]) & (a >= np.uint64(v.offset))
        inside &= a < np.uint64(v.offset + v.size)
        hit = inside.any(axis=1)
        if hit.any():
            widest = max(widest, int(part["width"][hit].max()))
    return widest


def _chunked_cost(
    shared: np.ndarray, layout: Layout, pads: Sequence[Padded], times: np.ndarray
) -> tuple[int, int]:
    """:func:`cost` of every record under ``pads``, each ``times`` times, a chunk at a time."""
    wf = ideal = 0
    for k in range(0, len(shared), CHUNK):
        part = shared[k : k + CHUNK]
        w, i = cost(remap(part, layout, pads) if pads else part, times[k : k + CHUNK])
        wf, ideal = wf + w, ideal + i
    return wf, ideal


def source_name(ptx_name: str) -> str | None:
    """The source name of a PTX shared variable: a function-local static
    ``_ZZ<len><kernel>E<len><name>[_<n>]``, or a plain (``extern "C"``-style) file-scope name."""
    if not ptx_name.startswith("_Z"):
        return ptx_name
    if not ptx_name.startswith("_ZZ"):
        return None
    for m in re.finditer(r"E(\d+)", ptx_name):
        n = int(m.group(1))
        rest = ptx_name[m.end() :]
        if len(rest) >= n and re.fullmatch(r"(?:_\d+)?", rest[n:]):
            return rest[:n]
    return None


@dataclass(frozen=True)
class PadPlan:
    """Pads that remove a line's conflicts in the bank model, and the numbers that show it."""

    pads: tuple[tuple[ArrayDecl, Padded], ...]
    line_before: tuple[int, int]  # (wavefronts, ideal) of the line's accesses, traced CTAs
    line_after: tuple[int, int]
    kernel_before: tuple[int, int]  # all shared accesses of the traced CTAs
    kernel_after: tuple[int, int]
    extra_bytes: int  # shared memory added per CTA


def plan_padding(ctx: RuleContext, insts: Sequence[int]) -> PadPlan | str:
    """The padding of the 2D ``__shared__`` arrays accessed by trace instructions ``insts`` that
    removes their bank conflicts (each array's smallest pad that does, searched by re-mapping
    the traced addresses to the padded layout and re-running the bank model), or why there is
    none."""
    import numpy as np

    from gpuadvise.rules import Space, active_lanes, distinct_records

    records = ctx.trace.records  # reconciled with the SASS by the pipeline
    shared_all = records[records["space"] == int(Space.SHARED)]
    line_insts = np.asarray(insts, dtype=shared_all["inst"].dtype)
    on_line_all = shared_all[np.isin(shared_all["inst"], line_insts)]
    if len(on_line_all) == 0:
        return "no traced access at this line"
    # the costs are sums over records: each distinct record once, times its count (the CTAs of
    # a wave repeat each other's shared accesses)
    shared, times = distinct_records(shared_all)
    at_line = np.isin(shared["inst"], line_insts)
    on_line, line_times = shared[at_line], times[at_line]
    layout = shared_layout(ctx)
    ks = ctx.kernel_source
    lanes = active_lanes(on_line["mask"])
    addr = on_line["addr"]
    claimed = np.zeros(lanes.shape, dtype=bool)
    touched: list[SharedVar] = []
    for v in layout.vars:
        inside = lanes & (addr >= np.uint64(v.offset)) & (addr < np.uint64(v.offset + v.size))
        if inside.any():
            touched.append(v)
            claimed |= inside
    if (lanes & ~claimed).any():
        return "the line accesses dynamic shared memory, whose layout gpuadvise cannot change"
    static_bytes = sum(v.size for v in layout.vars)
    plan: list[tuple[ArrayDecl, Padded]] = []
    for v in touched:
        name = source_name(v.ptx_name)
        decl, why = find_array_decl(ks, name) if name else (None, "an unnamed array")
        if decl is None:
            if name and _in_reduction_tree(ctx, insts):
                why += " (sequential addressing in the reduction tree, see GA202)"
            return why
        if decl.rows * decl.cols == 0 or v.size % (decl.rows * decl.cols):
            return f"{name}[{decl.rows}][{decl.cols}] does not match its {v.size} bytes in the PTX"
        elem = v.size // (decl.rows * decl.cols)
        unsafe = unsafe_use(ks, decl)
        if unsafe is not None:
            return f"padding {name} is not provably safe: {unsafe}"
        in_v = (lanes & (addr >= np.uint64(v.offset)) & (addr < np.uint64(v.offset + v.size))).any(
            1
        )
        mine, mine_times = on_line[in_v], line_times[in_v]
        # the sample: the line's first accesses of the array, in trace order
        a_all = on_line_all["addr"]
        in_all = active_lanes(on_line_all["mask"]) & (a_all >= np.uint64(v.offset))
        in_all &= a_all < np.uint64(v.offset + v.size)
        sample, sample_times = distinct_records(on_line_all[in_all.any(1)][:CHUNK])
        best = _chunked_cost(mine, layout, (), mine_times)
        if best[0] == best[1]:
            continue  # this array's accesses on the line are conflict free already
        need = max(v.align, _widest_access(shared, v), elem & -elem)
        chosen = best_pad = None
        best_wf, best_ideal = best
        for pad in range(1, MAX_PAD_ELEMENTS + 1):
            if (decl.cols + pad) * elem % need:
                continue
            extra = decl.rows * pad * elem
            if static_bytes + extra > MAX_STATIC_SMEM:
                break
            p = Padded(v, decl.cols, elem, pad)
            # try a sample of the line's accesses first (each access costs what it costs on
            # its own), then confirm on all of them
            wf, ideal = cost(remap(sample, layout, [p]), sample_times)
            if wf == ideal:
                wf, ideal = _chunked_cost(mine, layout, [p], mine_times)
            if wf == ideal:
                chosen = p
                break
            if best_pad is None or wf * best_ideal < best_wf * ideal:
                best_pad, best_wf, best_ideal = p, wf, ideal
        if chosen is None:
            if best_pad is not None:  # the closest any pad came, over all the line's accesses
                best = min(best, _chunked_cost(mine, layout, [best_pad], mine_times))
            hint = (
                f"; with {elem}-byte elements the lanes share words across rows: store them in "
                "4-, 8- or 16-byte elements (half4 rather than half3)"
                if elem & (elem - 1)
                else ""
            )
            return (
                f"no pad of {name}'s rows (up to {MAX_PAD_ELEMENTS} elements) removes the "
                f"conflicts: the best leaves {best[0]} wavefronts where {best[1]} would do{hint}"
            )
        plan.append((decl, chosen))
        static_bytes += decl.rows * chosen.pad * elem
    if not plan:
        return "the accessed arrays are conflict free one by one (the line mixes them)"
    pads = [p for _, p in plan]
    line_after = _chunked_cost(on_line, layout, pads, line_times)
    if line_after[0] != line_after[1]:
        return "padding each array alone removes its conflicts, but not all of them together"
    kernel_before = _chunked_cost(shared, layout, (), times)
    kernel_after = _chunked_cost(shared, layout, pads, times)
    if kernel_after[0] >= kernel_before[0]:
        return "padding adds as many conflicts at other lines as it removes here"
    return PadPlan(
        tuple(plan),
        _chunked_cost(on_line, layout, (), line_times),
        line_after,
        kernel_before,
        kernel_after,
        sum(d.rows * p.pad * p.elem for d, p in plan),
    )


def padding_diff(ks: KernelSource, plan: PadPlan, path: str) -> str | None:
    """The declarations with their inner dimensions padded, as a unified diff."""
    rw = ks.rewrite()
    for decl, p in plan.pads:
        a, b = decl.inner
        inner = ks.text[a:b].strip()
        simple = re.fullmatch(r"[\w\s+*/%()-]*", inner) and "?" not in inner
        rw.replace(a, b, f"{inner} + {p.pad}" if simple else f"({inner}) + {p.pad}")
    return rw.diff(path)


class BankConflicts(Rule):
    """Shared-memory bank conflicts at a source line, from the bank model over a traced run.

    What it detects
    ---------------
    Source lines whose shared-memory loads and stores take on average at least ``min_ways`` times
    the wavefronts of a conflict-free access of the same data (wavefronts / ideal, the bank model
    of ``gpuadvise/model/banks.py``, measured against Nsight Compute on an H100), and whose excess
    wavefronts are at least ``min_excess_share`` of all shared-memory wavefronts of the traced
    CTAs. The accesses come from the CPU emulator's trace of the first ``trace-ctas`` CTAs,
    reconciled with the SASS (ptxas merges scalar accesses into vector ones). Reported at the line
    of the access.

    Why it is slow
    --------------
    Shared memory has 32 banks of 4 bytes; a warp's access is served in one wavefront when no two
    of its lanes touch different words of one bank. Each extra distinct word in the busiest bank
    costs another pass of the shared-memory pipeline: a stride of 2 words is a 2-way conflict, a
    stride of 32 words a 32-way one. The warp waits for all passes.

    Example
    -------
    Step #2 of NVIDIA's seven-step reduction (``kernels/reduction/reduce.cu``, ``reduce2``):
    ``index = 2 * s * tid; sdata[index] += sdata[index + s];`` makes lane ``t`` touch word
    ``2st``: 2-, 4-, 8- ...-way conflicts as ``s`` grows (3.9 wavefronts per access on average).

    Fix
    ---
    Make consecutive lanes touch consecutive words: sequential addressing in reductions
    (``sdata[tid] += sdata[tid + s]`` with ``s`` halving, see GA202), or pad a 2D tile's rows
    (``__shared__ float tile[32][33]``) so that the rows a warp reads together start in
    different banks, or swizzle the index (``col ^ row``). The pad that works depends on the
    access: one word per row fixes a column read of a 32x32 tile, but a warp reading a 4x8 patch
    of a 16-word-wide tile needs rows 24 words apart (a pad of 8), and 64-bit elements count
    twice (a half-warp is served per pass, as Nsight Compute counts it on an H100).

    How the estimate is made
    ------------------------
    An upper bound on the launch roofline (gpuadvise.model.roofline; the traced counts times the
    trace's scale): the L1/shared data path serves one wavefront per SM per cycle, shared with
    the global accesses' L1 requests, so its term is ``(L1 cycles + wavefronts) / (SMs x
    clock)``; the L2, DRAM, issue and latency terms are the launch's and do not change. Removing
    this line's excess wavefronts shortens the data-path term; the launch takes at least its
    largest term before and after (both with DRAM at peak bandwidth for the bound, at sustained
    rates for the point value in the inputs). Overlap between the terms and the instructions
    other than memory accesses are left out, so the real gain is smaller (the seven-step reduction's
    step 2 -> 3 gained 2x on a G80, 8 % on an H100). Without the device's rates, the older
    ``max(T_shared, T_dram) / max(T_shared - T_excess, T_dram)``; without clock or bandwidth
    the DRAM term is dropped.

    Fix safety
    ----------
    Automatic-and-verified when every array the line accesses is a 2D ``__shared__ T a[R][C]``
    (in the kernel's body or at file scope, constant dimensions, no initializer) that the code
    only ever indexes as ``a[i][j]``: no pointer to it or into it (``&a[i][j]``), no access with
    one subscript (a row decays to a pointer) or none (``sizeof``, passing it on), in the kernel
    or in a macro. Then adding ``p`` elements to each row changes no value the program
    computes, only where the elements lie (an index past the inner bound, undefined behaviour in
    C++, would now read a pad: the measurement stage compares the variant's outputs with the
    kernel's before it reports a speedup). ``p`` is each array's smallest pad whose accesses at
    the line are conflict free in the bank model, found by moving the traced addresses to the
    padded layout (rows kept as aligned as the widest access, so ptxas's vector accesses stay
    possible) and kept only when the kernel's shared wavefronts fall overall. Otherwise (a 1D
    array, such as a reduction's ``sdata``: padding does not change a stride of ``2s`` words, the
    addressing must change, see GA202; dynamic shared memory; an unsafe use) the variant only
    says why, and the fix is the user's.
    """

    id = "GA201"
    name = "bank-conflicts"
    title = "Shared-memory bank conflicts"
    severity = "warning"
    models = ("banks", "coalescing")
    options = {"min_ways": 1.5, "min_excess_share": 0.05}

    def detect(self, ctx: RuleContext) -> Iterator[Finding]:
        banks = ctx.banks
        total = banks.traced.all.wavefronts
        if total <= 0:
            return
        per_line: dict[tuple[str | None, int | None], list] = {}
        for ln in banks.lines:
            per_line.setdefault((ln.file, ln.line), []).append(ln)
        min_ways = float(ctx.option("min_ways"))
        min_share = float(ctx.option("min_excess_share"))
        traced = round(ctx.launch.grid.count / banks.scale) if banks.scale else 0
        # one finding per root cause: the conflicting lines of one shared array (one padding
        # or one change of index fixes them together), at the line with the most excess
        causes: dict[tuple[str, ...], list[tuple[tuple[str | None, int | None], list]]] = {}
        # atomics whose lanes update one address in turn: GA207's (contended atomics), not
        # words of one bank; only the line's atomics leave, its loads and stores stay here
        contended = contended_lines(ctx.trace, CONTENDED_LANES)
        for key, group in per_line.items():
            if key in contended:
                group = [g for g in group if int(g.kind) not in ATOMICS]
                if not group:
                    continue
            wavefronts = sum(g.wavefronts for g in group)
            ideal = sum(g.ideal for g in group)
            if ideal <= 0 or wavefronts / ideal < min_ways:
                continue
            insts = tuple(int(i) for g in group for i in g.insts)
            if insts and all(_data_addressed(ctx, i) for i in insts):
                continue  # a scatter by data (a radix sort's ranks): random conflicts, no pad helps
            causes.setdefault(_arrays_of(ctx, insts), []).append((key, group))
        for arrays, lines in causes.items():
            groups = [g for _, gs in lines for g in gs]
            wavefronts = sum(g.wavefronts for g in groups)
            ideal = sum(g.ideal for g in groups)
            ways = wavefronts / ideal
            share = (wavefronts - ideal) / total
            if share < min_share:
                continue
            (file, line), _ = max(
                lines, key=lambda kv: (sum(g.wavefronts - g.ideal for g in kv[1]), -(kv[0][1] or 0))
            )
            others = sorted({ln for (f, ln), _ in lines if ln is not None and ln != line})
            worst = max(g.worst_ways for g in groups)
            kinds = "/".join(dict.fromkeys(g.kind.name.lower() for g in groups))
            what = f" of `{arrays[0]}`" if len(arrays) == 1 and arrays[0] != "?" else ""
            also = (
                f" (with line{'s' if len(others) > 1 else ''} {', '.join(map(str, others))}, "
                "the same array's conflicts)"
                if others
                else ""
            )
            yield self.finding(
                ctx,
                f"shared-memory {kinds}{what} with {ways:.1f}-way bank conflicts on average "
                f"(worst {worst:.0f}-way){also}: {wavefronts} wavefronts where {ideal} would do, "
                f"{share:.0%} of all shared-memory wavefronts (over {traced} traced CTAs)",
                line=line,
                file=str(ctx.source_file) if ctx.same_file(file) else file,
                evidence=[
                    Evidence("bank_conflict_ways", round(ways, 3), min_ways, ">="),
                    Evidence("excess_wavefront_share", round(share, 4), min_share, ">="),
                    Evidence("worst_ways", round(worst, 3)),
                    Evidence("wavefronts", wavefronts, unit="wavefronts"),
                    Evidence("ideal_wavefronts", ideal, unit="wavefronts"),
                    *([Evidence("lines", len(others) + 1)] if others else []),
                ],
                details=ConflictLine(
                    int(wavefronts - ideal), tuple(int(i) for g in groups for i in g.insts)
                ),
            )

    def estimate(self, ctx: RuleContext, finding: Finding) -> Estimate:
        banks = ctx.banks
        scale = banks.scale
        w_launch = banks.launch.all.wavefronts
        excess = finding.details_as(ConflictLine).excess_wavefronts * scale
        d = ctx.device
        shared_only = Estimate(
            round(work_ratio(w_launch, excess), 3),
            "upper-bound",
            "shared-memory-bound kernel: time proportional to wavefronts; "
            f"{w_launch:.0f} / ({w_launch:.0f} - {excess:.0f}) (no clock/bandwidth for "
            f"{d.name}, DRAM time ignored)",
            {"wavefronts": w_launch, "excess_wavefronts": excess},
        )
        rate, bandwidth = sm_cycles_per_s(d), dram_bytes_per_s(d)
        if rate is None or bandwidth is None:
            return shared_only
        est = shared_wavefront_estimate(
            d,
            ctx.trace_view,
            w_launch,
            excess,
            f"this line's {excess:.0f} excess wavefronts removed",
            {"wavefronts": w_launch, "excess_wavefronts": excess, "scale": scale},
        )
        if est is not None:
            return est
        try:
            dram_bytes = ctx.coalescing.launch.all.bytes
        except ModelUnavailable:
            return shared_only
        r = roofline(w_launch, excess, rate, dram_bytes, bandwidth)
        t_shared, t_excess, t_dram = r.pipe_s, r.saved_s, r.dram_s
        return Estimate(
            round(max(r.speedup, 1.0), 3),
            "upper-bound",
            f"roofline over the launch: shared pipeline {t_shared * 1e6:.2f} us (1 wavefront per "
            f"SM per cycle at {d.sm_clock_mhz} MHz), of which {t_excess * 1e6:.2f} us are this "
            f"line's conflicts; DRAM {t_dram * 1e6:.2f} us ({dram_bytes / 1e6:.1f} MB at "
            f"{d.mem_bandwidth_gbps:.0f} GB/s); max before / max after. Latency and instruction "
            "overhead are ignored",
            {
                "shared_time_us": t_shared * 1e6,
                "excess_time_us": t_excess * 1e6,
                "dram_time_us": t_dram * 1e6,
                "scale": scale,
            },
        )

    def transform(self, ctx: RuleContext, finding: Finding) -> Variant:
        try:
            plan = plan_padding(ctx, finding.details_as(ConflictLine).insts)
        except ModelUnavailable as exc:
            plan = f"the traced accesses are not available ({exc.message})"
        if isinstance(plan, str):
            return Variant(
                "display-only",
                f"no automatic padding: {plan}",
            )
        diff = padding_diff(ctx.kernel_source, plan, ctx.source_file)
        what = ", ".join(
            f"{d.name}[{d.rows}][{d.cols}] -> [{d.rows}][{d.cols + p.pad}]" for d, p in plan.pads
        )
        (lw, _), (aw, ai) = plan.line_before, plan.line_after
        (kw, _), (kaw, _) = plan.kernel_before, plan.kernel_after
        return Variant(
            "automatic-and-verified",
            f"pad the rows: {what} (+{plan.extra_bytes} B of shared memory per CTA). In the bank "
            f"model over the traced CTAs this line takes {aw} wavefronts instead of {lw} "
            f"({ai} ideal), and the kernel's shared accesses {kaw} instead of {kw}",
            diff=diff,
        )
