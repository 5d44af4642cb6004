"""GA303 scalar-global-access: consecutive per-thread scalar global accesses one vector would do."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpuadvise.rules import (
    SCALAR_NOTE_BELOW,
    Estimate,
    Evidence,
    Finding,
    FindingDetails,
    KernelSource,
    ModelUnavailable,
    PieceGroup,
    Rule,
    RuleContext,
    Variant,
    counted,
    global_totals,
    narrow_context,
    narrow_estimate,
    narrow_loads,
    narrow_variant,
    narrow_why,
    one_per_wait_stream,
    piece_buffer,
    piece_numbers,
    piece_site,
    sass_at,
    scalar_pieces,
    scalar_run_estimate,
    select_narrow,
    vector_rewrite,
    warp_uniform,
)


@dataclass(frozen=True)
class ScalarRun(FindingDetails):
    """One finding's group in numbers: the buffer (None: unknown), the kind (0 load, 1 store),
    the source lines, the element and vector widths in bytes, the pieces (runs of consecutive
    accesses), the instructions one thread saves, the file of the first access, and the
    requests/sectors/clocks of ``piece_numbers`` with the totals over the traced CTAs."""

    buffer: str | None
    kind: int
    lines: tuple[int, ...]
    width: int
    vector: int
    pieces: int
    saved_per_thread: int
    file: str | None
    numbers: dict[str, int | float]


@dataclass(frozen=True)
class NarrowRun(FindingDetails):
    """The second finding: the narrow load instructions widened together (trace ids), the
    widest element's bytes, the elements per thread of the fix, the main load's buffer."""

    insts: tuple[int, ...]
    width: int
    k: int
    buffer: str | None


class ScalarGlobalAccess(Rule):
    """Consecutive scalar global accesses of one thread that one 8- or 16-byte access would do.

    What it detects
    ---------------
    From the traced run: global loads (or stores) of 4- or 8-byte elements that the same thread
    makes at consecutive addresses, from one source line or lines at most ``max_line_gap`` apart
    (``in[i]``, ``in[i + 1]``, ... ``in[i + 3]``), executed by the same warps with the same
    lanes, where the first address is 8- or 16-byte aligned on every active lane of every traced
    execution (a note where the warp reads one address: scalar_runs.warp_uniform). The SASS
    must show that ptxas did not merge them: the line has as many SASS accesses of the
    element's width (``LDG.E``) as the PTX, not an ``LDG.E.64``/``LDG.E.128``. At the first.

    Second, narrow coalesced loads that keep too few bytes in flight: global loads of elements
    of at most ``max_narrow_bytes`` (2: 64 bytes a warp request; 4 and 8 bytes by the option)
    whose warps read consecutive elements across the lanes (lane ``l`` at ``base + l * width``,
    in nine of ten requests, half a warp active or more) that make at least half the global-load
    links of a warp's critical path, in a launch bound (at sustained rates) by its warps' chains
    of dependent loads (one load per loop iteration, used before the next is issued) or by
    Little's law, or by its issue or pipes with at least half its instructions index, address
    and loop work per element, or by its CTA launches where the fix shrinks the grid (ising), whose
    model says that a thread taking ``k = 16 / width`` consecutive elements with one 16-byte
    access would be at least ``min_narrow_speedup`` faster (CTA launches: the point); at the
    busiest load.
    Elements of 4 or 8 bytes (``max_stream_bytes``), none narrower, only as a stream walked one
    element per wait (narrow_loads.one_per_wait_stream: a loop of one unbatched load each).

    Why it is slow
    --------------
    Every memory instruction costs an issue slot, an LSU request and an L1 tag lookup whatever
    it carries: four 4-byte loads of neighbouring pixels take four requests and, when the
    threads of a warp are 16 bytes apart, touch every sector four times, where one 16-byte load
    takes one request and touches each sector once. When the kernel streams from DRAM, the
    sectors are fetched once either way (L1 keeps them between the scalar loads), so the gain
    is in instructions and L1 work, not in DRAM traffic: a DRAM-bound kernel gains little.
    A warp's load of one narrow element per lane moves 32 to 128 bytes; when each thread uses it
    before issuing its next load, a warp has that much in flight per memory round trip, and an
    SM's 64 warps keep 2-8 KB in flight where streaming at HBM bandwidth needs about 16 KB
    (Little's law): the launch waits on latency, not bandwidth.

    Example
    -------
    ``kernels/luminance/luminance.cu``: ``lum_prefetch2`` reads two neighbouring ``uchar4`` pixels
    with ``in[i]`` and ``in[i + 1]``, ``lum_prefetch4`` four; ``lum_prefetch4_vec`` is the
    16-byte version. ``lum_prefetch4_quad`` indexes by 4-pixel quads (``i = 4 * q``), so the
    alignment is provable and the rewrite automatic. ``kernels/scalar/narrow.cu``: one byte
    per thread (``threshold_bytes``) and a row walk of one float per iteration (``rank_rows``);
    ``threshold_uint4`` and ``rank_rows_float4`` are the 16-byte versions.

    Fix
    ---
    Load the elements as one vector and take them apart in registers::

        const uint4 in_v = *reinterpret_cast<const uint4*>(&in[i]);  // i % 4 == 0
        const uchar4* in_e = reinterpret_cast<const uchar4*>(&in_v);
        v = luma(in_e[0]) + luma(in_e[1]) + luma(in_e[2]) + luma(in_e[3]);

    (``float4``/``int4``/``uint2``... with ``.x .. .w`` for float and int elements). The vector
    access must be aligned to its size: the index a multiple of 2 or 4, the pointer the start
    of an allocation (``cudaMalloc`` returns 256-byte aligned memory). Stores likewise:
    ``*reinterpret_cast<float4*>(&out[i]) = make_float4(a, b, c, d);``.

    How the estimate is made
    ------------------------
    An upper bound on the launch roofline (gpuadvise.model.roofline; the traced CTAs times the
    trace's scale): the L1 data path of all global accesses, each warp-level request taking
    ``max(1, sectors / 4)`` clocks of an SM (128 bytes per clock), the L2 sectors, the DRAM
    bytes, the issue of the memory instructions and the latency term. With the finding's
    accesses vectorized (one request per vector, its own sectors) the L1 cycles and the
    instructions drop and the sectors stay; the launch takes at least its largest term before
    and after (both with DRAM at peak bandwidth for the bound, at sustained rates for the point
    value in the inputs). When DRAM, L2 or latency bounds both sides, that is 1.0x and the
    finding says so (and is a note, not a warning): vectorizing moves the same sectors. The
    inputs give the requests and instructions saved; ALU instructions and overlap between the
    terms are left out. Without the device's rates, ``max(T_L1, T_DRAM) / max(T_L1 - saved,
    T_DRAM)``.

    The narrow loads' finding: the same launch model, after the change (``widened_traffic`` of
    gpuadvise.rules.narrow_loads): the widened requests ``k`` times fewer with ``k`` times the
    sectors each (L1, issue), the bytes a warp keeps in flight ``k`` times as many per widened
    request; a thread's loop over the lanes' dimension ``min(k, iterations)`` times shorter (the
    critical path's global-load links of those loads that many fewer), the rest of ``k`` as a
    smaller grid (fewer CTAs, each doing that much more element-wise work with its chain as
    it is); L2 and DRAM unchanged. The loop's index, address and test (the PTX instructions of
    the loop body that access no memory and compute no loaded value) run once per chunk of
    ``k``; the chain's links of loads ptxas already issues together (the SASS's loads per wait
    over the PTX's) count once per batch; a grid-wide hot atomic address's updates in turn
    (GA208's model) bound both launches from below. The bound: the before launch as the point
    sees it, with the model's margin, over the after launch at peak.

    Fix safety
    ----------
    A source diff when the accesses are ``a[E]``, ``a[E + 1]`` ... in one statement (loads) or
    in consecutive statements (stores) and the element type has a vector type. Automatic (built,
    verified and measured) when the alignment is provable: ``E`` is a multiple of the vector's
    element count by construction (``i = 4 * q``, a shift, a sum of such terms, through
    variables assigned once) and ``a`` is a kernel parameter the kernel never changes, taken to
    be what ``cudaMalloc`` returned (256-byte aligned: an interior pointer passed by the host
    would break it, as it would any vector access). Otherwise display-only: the diff holds for
    the traced launch (every access was aligned) but not provably for every launch
    (``i = gy * w + gx`` is aligned only when ``w`` is a multiple of 4). Loads guarded by
    ``c ? a[i] : 0`` become an ``if``/``else`` that keeps the guard. The narrow loads' finding:
    automatic (gpuadvise.source.fixkit_vector) in a strided loop ``for (i = s; i < n; i += S)``
    (its threads' starts a partition of ``[0, S)``) or a thread per element
    (``i = blockIdx.x * blockDim.x + threadIdx.x`` under ``i < n``): each buffer reached only as
    ``buf[X]`` (``X`` stepping by one with ``i``) read, and written back, as one chunk of ``k``
    elements, the statements run once per element on the chunk's copy; the grid ``k`` times
    smaller for a thread per element (a grid-stride loop: the same launch its alternative). A
    block-stride loop may carry order-free reductions (``++n``, ``s += e`` of integers,
    ``m = max(m, e)``; float sums within the tolerance: gpuadvise.source.fixkit_reduce;
    kernels/vectorize/reduce_rows.cu): the threads' partials change, not their combination by
    the block (the outputs compared). Chunks out of bounds or not aligned (checked as the kernel
    runs) take the scalar path; the buffers are assumed not to overlap. Otherwise (a pointer
    given to a helper or macro, a column walk, a value carried across elements) display-only.
    """

    id = "GA303"
    name = "scalar-global-access"
    title = "Scalar global accesses where one vector access would do"
    severity = "warning"
    models = ("trace", "sass", "source")
    options = {"max_line_gap": 2, "min_narrow_speedup": 1.05, "max_narrow_bytes": 2,
               "max_stream_bytes": 8}  # fmt: skip

    def detect(self, ctx: RuleContext) -> Iterator[Finding]:
        yield from self._runs(ctx)
        yield from self._narrow(ctx)

    def _runs(self, ctx: RuleContext) -> Iterator[Finding]:
        trace = ctx.trace
        pieces = scalar_pieces(trace, int(ctx.option("max_line_gap")))
        if not pieces:
            return
        sass_lines = ctx.sass_lines_innermost
        # every global access's totals and sectors: made for the first finding
        totals: dict[str, Any] = {}
        per_record = np.zeros(0, np.int64)
        groups: dict[tuple[str | None, int, int, str | None], list[Any]] = {}
        for p in pieces:
            first = p.lines[0] if p.lines else 0
            key = (p.execs[0].file, first, p.execs[0].kind, piece_buffer(trace, p))
            groups.setdefault(key, []).append(p)
        ordered = sorted(groups.items(), key=lambda kv: (kv[0][0] or "", kv[0][1], kv[0][2]))
        for (file, line, kind, buf), ps in ordered:
            lines = sorted({ln for p in ps for ln in p.lines})
            sat = sass_at(sass_lines, trace, file, lines, kind, ps[0].width)
            if sat.merged:
                continue
            g = PieceGroup(tuple(ps), buf, sat)
            if not totals:
                totals, per_record = global_totals(trace.records)
            nums = {**piece_numbers(trace, g, per_record), **totals}
            w = ps[0].width
            vec = max(p.vector for p in ps)
            n = sum(len(p.execs) for p in ps)
            what = "loads" if kind == 0 else "stores"
            name = buf or "a buffer"
            per_thread = sum(len(p.execs) - 1 for p in ps)
            est = scalar_run_estimate(ctx, ps[0].width, per_thread, nums)
            # a note unless configured: a fix worth nothing here (DRAM-bound), or a broadcast's
            quiet = (est.like_for_like or 9.0) < SCALAR_NOTE_BELOW or all(map(warp_uniform, ps))
            # code inlined from a header (__ldg, a helper's) is reported at the user's call site
            at_file, at_line = (
                (str(ctx.source_file), line)
                if ctx.same_file(file)
                else piece_site(trace, ps[0], file, line)
            )
            yield self.finding(
                ctx,
                f"{n} scalar {w}-byte {what} of {name} per thread at consecutive addresses "
                f"(aligned to {vec} bytes in every traced execution) make "
                f"{nums['requests_before']} warp-level requests in the {len(trace.ctas)} traced "
                f"CTAs where {nums['requests_after']} {vec}-byte ones would do; the SASS has "
                f"{sat.text(w)}",
                line=at_line,
                file=at_file,
                severity=ctx.severity or ("note" if quiet else None),
                evidence=[
                    Evidence("consecutive_accesses", n, 2, ">=", "accesses/thread"),
                    Evidence("element_bytes", w, unit="B"),
                    Evidence("vector_bytes", vec, unit="B"),
                    Evidence("aligned_executions", nums["executions"], unit="warp executions"),
                    Evidence("sass_scalar_accesses", sat.scalar, sat.ptx_scalar, ">="),
                    Evidence("sass_opcodes", ", ".join(sat.opcodes) or "none"),
                    Evidence("requests", nums["requests_before"], unit="requests"),
                    Evidence("requests_vectorized", nums["requests_after"], unit="requests"),
                    Evidence("l1_sectors", nums["sectors_before"], unit="sectors"),
                    Evidence("l1_sectors_vectorized", nums["sectors_after"], unit="sectors"),
                ],
                details=ScalarRun(
                    buf,
                    int(kind),
                    tuple(int(x) for x in lines),
                    int(w),
                    int(vec),
                    len(ps),
                    int(per_thread),
                    ps[0].execs[0].file,
                    {
                        k: int(v) if isinstance(v, (int, np.integer)) else float(v)
                        for k, v in nums.items()
                    },
                ),
            )

    def _narrow(self, ctx: RuleContext) -> Iterator[Finding]:
        view = ctx.trace_view
        widest = int(ctx.option("max_narrow_bytes"))
        loads, streamed = select_narrow(
            narrow_loads(view, ctx.trace), widest, int(ctx.option("max_stream_bytes"))
        )
        if not loads:
            return
        loads = [n for n in loads if n.requests >= 0.1 * loads[0].requests]
        got = narrow_estimate(ctx.device, view, loads, *narrow_context(ctx, loads))
        if got is None:
            return
        est, wd = got
        i = est.inputs
        point, least = float(i.get("point_speedup", 1.0)), float(ctx.option("min_narrow_speedup"))
        like = max(point, float(i.get("peak_speedup", 1.0)))
        # the warps must wait (chains of dependent loads, Little's law) on these loads mostly
        waiting = i.get("bound_by_before") in ("dependency", "latency") and wd.share >= 0.5
        # or on their issue or pipes, mostly the index and address work done per element
        w_ = view.work
        index = wd.overhead_instructions_saved / max(w_.instructions * w_.ctas, 1.0) if w_ else 0.0
        busy = i.get("bound_by_before") in ("issue", "pipe") and index >= 0.5
        # or on its CTA launches (many CTAs of little work), which k a thread divide with the grid:
        # by the point, at the launch rate measured (H200: ising 2.09x, flip 1.55x, flip_pow2
        # 0.985x for points 2.11, 1.36, 1.03; flip_pow2's peak, 1.28, would report it)
        cta = i.get("bound_by_before") == "cta" and wd.grid > 1 and point >= least
        if not (waiting or busy or cta) or like < least:
            return
        if streamed and not one_per_wait_stream(i, waiting):
            return
        # the busiest load with a line of the source (line 0: code the compiler made from no
        # line, a header's inlined intrinsic)
        main = next((n for n in loads if n.line), loads[0])
        w = max(n.width for n in loads)
        flight, bound = float(i["waited_bytes_per_warp"]), str(i.get("bound_by_before"))
        names = ", ".join(sorted({f"`{n.buffer}`" for n in loads}))
        why = narrow_why(wd, flight if waiting else None, index if busy else None)
        yield self.finding(
            ctx,
            f"{counted(len(loads), 'coalesced load')} of {names} read {main.width}-byte elements "
            f"({32 * main.width} bytes a warp request, {main.per_thread:.1f} per thread); the "
            f"launch is bound by {bound} {why}",
            line=main.line or ctx.kernel_line,
            file=main.file if main.line else None,
            evidence=[
                Evidence("element_bytes", w, unit="B"),
                Evidence("elements_per_thread_after", wd.k),
                Evidence("bound_by_before", bound),
                Evidence("waited_bytes_per_warp", round(flight, 1), unit="B"),
                Evidence("critical_path_global_links_kept", round(wd.chain_kept, 3)),
            ],
            details=NarrowRun(tuple(n.inst for n in loads), w, wd.k, main.buffer),
        )

    def estimate(self, ctx: RuleContext, finding: Finding) -> Estimate:
        if isinstance(finding.details, NarrowRun):
            insts = set(finding.details.insts)
            loads = [n for n in narrow_loads(ctx.trace_view, ctx.trace) if n.inst in insts]
            got = narrow_estimate(ctx.device, ctx.trace_view, loads, *narrow_context(ctx, loads))
            if got is None:
                return Estimate(None, "none", "the narrow loads are not in this trace")
            return got[0]
        d = finding.details_as(ScalarRun)
        return scalar_run_estimate(ctx, d.width, d.saved_per_thread, d.numbers)

    def transform(self, ctx: RuleContext, finding: Finding) -> Variant:
        if isinstance(finding.details, NarrowRun):
            nr = finding.details
            return narrow_variant(ctx, nr.buffer, nr.k, finding)
        d = finding.details_as(ScalarRun)
        kind, w, vec, name = d.kind, d.width, d.vector, d.buffer
        n = vec // w
        types = "uint2/float2/int2" if vec == 8 else "uint4/float4/int4/double2"
        hint = (
            f"make the {n} accesses one {vec}-byte vector access ({types} through a "
            "reinterpret_cast of the element's address) and take the elements apart in "
            f"registers; the index must be a multiple of {n} and the pointer the start of an "
            "allocation"
        )
        if d.pieces != 1 or name is None or not ctx.same_file(d.file):
            return Variant("display-only", hint)
        try:
            ks = ctx.kernel_source
        except ModelUnavailable:
            return Variant("display-only", hint)
        params = _params(ks, ctx)
        p = params.get(name)
        if p is None or not p.is_pointer or p.pointee is None:
            return Variant("display-only", f"{hint} ({name} is not a pointer parameter)")
        elem = re.sub(r"\s+", " ", p.pointee).strip()
        rw = vector_rewrite(
            ks, ctx.source_file, name, elem, p.is_const, w, vec, list(d.lines),
            store=kind != 0,
        )  # fmt: skip
        if rw.diff is None:
            return Variant("display-only", f"{hint}; no diff: {rw.why_not}")
        what = f"one {vec}-byte {rw.vector_type} access at &{name}[{rw.index}]"
        if rw.automatic:
            return Variant(
                "automatic-and-verified",
                f"{what} ({rw.index} is a multiple of {n} by construction and {name} a kernel "
                "parameter, taken as cudaMalloc'ed: 256-byte aligned)",
                diff=rw.diff,
            )
        return Variant(
            "display-only",
            f"{what}; display-only: {rw.why_display}. It holds for this launch; make sure of "
            "the alignment before taking it",
            diff=rw.diff,
        )


def _params(ks: KernelSource, ctx: RuleContext) -> dict[str, Any]:
    from gpuadvise.errors import GpuAdviseError
    from gpuadvise.rules import parse_signature

    try:
        return {p.name: p for p in parse_signature(ks.text, ctx.spec.kernel)}
    except GpuAdviseError:
        return {}
