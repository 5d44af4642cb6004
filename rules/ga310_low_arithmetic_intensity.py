"""GA310 low-arithmetic-intensity: a loop of multiply-adds fed from shared memory at one or two
loads per FMA (the classic tiled matrix multiply, one output per thread): the shared data path,
not the FMA pipe, sets its time; a register tile of outputs per thread reaches the pipe."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

from gpuadvise.errors import GpuAdviseError
from gpuadvise.rules import (
    MATH_PIPES,
    MODEL,
    Estimate,
    Evidence,
    Finding,
    FindingDetails,
    Kind,
    LoopIntensity,
    Rule,
    RuleContext,
    Traffic,
    Variant,
    ceiling_s,
    choose_tile,
    fma_lines,
    launch_estimate,
    launch_times,
    memory_rates,
    parse_ptx_cached,
    read_once,
    same_source_file,
    view_traffic,
)

_NAMES = {"fp32": "FP32", "fp16": "FP16", "fp64": "FP64", "tensor": "tensor"}


@dataclass(frozen=True)
class LowIntensity(FindingDetails):
    """The multiply-add lines (``lines``, the busiest first), their math ``pipe``, the launch's
    multiply-adds, shared loads and their wavefronts per CTA (``fmas``, ``shared_loads``,
    ``shared_wavefronts``), the shared loads' data-path time against the multiply-adds' pipe
    time (``data_path_us``, ``fma_us``) and the register ``tile`` the advice names."""

    lines: tuple[int, ...]
    pipe: str
    fmas: float
    shared_loads: float
    shared_wavefronts: float
    data_path_us: float
    fma_us: float
    tile: int


def _fma_traffic(t: Traffic, fmas: dict[str, float]) -> Traffic:
    """A launch of ``t``'s CTAs that issues the multiply-adds ``fmas`` (warp instructions per
    CTA by pipe) and nothing else: their pipe time, the FMA roof no rewrite that keeps them
    beats."""
    w = t.work
    assert w is not None
    work = replace(
        w, pipes=dict(fmas), chain={}, chain_unordered=None, critical_instructions=0.0,
        shared_requests=0.0, shared_wavefronts=0.0,
    )  # fmt: skip
    return Traffic(resident_warps=t.resident_warps, work=work)


def _read_once(ctx: RuleContext, t: Traffic) -> Traffic:
    """``t`` with each loaded buffer's DRAM loads at its footprint where it fits in half the L2
    (read once, then served by the L2 to every CTA that reads it again: a matrix product's
    operands), as GA305's estimate takes it."""
    return read_once(ctx.trace_view, ctx.same_file, ctx.device, t)


class LowArithmeticIntensity(Rule):
    """A loop of multiply-adds whose operands come from shared memory one load per FMA or more.

    What it detects
    ---------------
    From the emulator's counts of the traced launch: the lines whose PTX holds a float
    multiply-add (``fma``/``mad`` of f32, f64, f16) or a matrix multiply-accumulate, their
    issued work on the math pipes, and the launch's shared loads and their wavefronts (the bank
    model). Reported when the execution model finds the launch bound by the L1/shared data path,
    the shared loads taking at least ``min_shared_share`` of that path's time and at least
    ``min_lsu_over_fma`` times the multiply-adds' own pipe time, with at least
    ``min_fma_per_load`` multiply-adds per shared load (loads that feed arithmetic, not a
    transpose or a copy through shared memory), the data path at least ``min_over_dram`` times
    the DRAM time (not a streaming kernel), on a grid that reaches ``min_sm_share`` of the SMs.
    Reported at the multiply-add line that carries most of that work.

    Why it is slow
    --------------
    An SM completes four warp FFMAs a clock (128 lanes) but one shared-memory wavefront (32
    lanes of 4 bytes). A thread that computes one output of a matrix product loads
    ``As[ty][k]`` and ``Bs[k][tx]`` for each FMA: two shared loads per FMA, eight times what the
    FP32 pipe needs; the loop runs at the shared-memory rate, an eighth of the FMA rate or less,
    whatever the tile size in shared memory.

    Example
    -------
    ``kernels/intensity/intensity.cu``: ``tiled_macro`` (the classic 16 x 16 tiled multiply,
    a macro tile), ``tiled_template<16>`` (a template tile, ``fmaf``) and ``tiled_helper``
    (the dot step in a device function); ``regtile4`` (4 x 4 outputs per thread), ``axpy``
    (memory-bound) and ``transpose_tile`` (no arithmetic on what it loads) stay silent.

    Fix
    ---
    Register tiling: each thread computes a ``T x T`` tile of outputs (a 64 x 64 CTA tile for
    16 x 16 threads at ``T = 4``): per k step it loads ``T`` values of A and ``T`` of B into
    registers (``float4`` loads where the tile is contiguous) and makes ``T * T`` FMAs of them
    (outer products), so loads per FMA drop from 2 to ``2 / T`` (8 loads for 16 FMAs at 4 x 4).
    The rule names the smallest ``T`` of 2, 4, 8 that brings the shared loads under the FMA
    pipe's time, among those that leave the launch at least one CTA per SM (``T * T`` times
    fewer CTAs of the same threads). Or call cuBLAS / CUTLASS, which do this and more (double
    buffering, tensor cores).

    How the estimate is made
    ------------------------
    A point on the launch model: the shared loads, their wavefronts, their issue slots and their
    links on the critical path divided by ``T`` (each value loaded serves ``T`` multiply-adds),
    the multiply-adds, the staging stores and the global traffic as they are (a larger CTA
    tile, which register tiling usually brings, also cuts the global loads per FMA: not
    counted); both sides with each operand read from DRAM once where it fits in half the L2
    (GA305's assumption: the other CTAs' reads of it are L2 hits). The upper bound is the FMA
    roof: the launch before (with the model's error margin) against the launch floor plus the
    multiply-adds alone at their pipe's rate; no rewrite that keeps the multiply-adds beats
    it. Measured on an H200 (2026-11-29, .gpu/s7-lai, cudaEvents, outputs compared): the 16 x
    16 tiled multiply at 1024^3 (infatoshi-course's ``matrixMultiplyOptimized``) 276.8 us, a 4
    x 4 register tile 116.5 us, 2.38x (point 2.26x, bound 9.63x); at 4096^3 2.52x for 4 x 4 and
    3.36x for 8 x 8. Without the emulator's counts (the GPU
    tracer), no finding.

    Fix safety
    ----------
    Display-only: register tiling is a redesign of the kernel's thread-to-output mapping and of
    its launch (a CTA covers ``T * T`` times the outputs); the sums are made in the same order
    per output, so results are bit-identical where the k loop's order is kept.
    """

    id = "GA310"
    name = "low-arithmetic-intensity"
    title = "Low arithmetic intensity: shared loads, not the FMA pipe, set the loop's time"
    severity = "warning"
    models = ("trace",)
    options = {
        "min_lsu_over_fma": 3.0,
        "min_shared_share": 0.5,
        "min_fma_per_load": 0.25,
        "min_over_dram": 2.0,
        "min_sm_share": 0.5,
    }

    def _measure(self, ctx: RuleContext) -> tuple[LowIntensity, Traffic] | None:
        d = ctx.device
        rates = memory_rates(d)
        emu = ctx.emulation
        simt = emu.simt if emu is not None else None
        if rates is None or simt is None or not simt.line_pipes or not ctx.has_model("trace"):
            return None
        gx, gy, gz = ctx.launch.grid.as_tuple()
        if d.sm_count and gx * gy * gz < float(ctx.option("min_sm_share")) * d.sm_count:
            return None
        t = view_traffic(d, ctx.trace_view)
        w = t.work
        before = launch_times(t, d, rates)
        if w is None or before is None or before.bound_by != "l1" or w.shared_requests <= 0:
            return None
        if before.l1_s < float(ctx.option("min_over_dram")) * before.dram_s:
            return None
        try:
            module = parse_ptx_cached(ctx.ptx)
        except GpuAdviseError:
            return None
        func = module.functions.get(ctx.kernel.mangled)
        if func is None or func.body is None:
            return None
        lines = fma_lines(func.body, module.files, ctx.same_file)
        src = ctx.source_file
        per_line: dict[int, float] = {}
        fmas: dict[str, float] = {}
        n = max(w.ctas_traced, 1)
        for lp in simt.line_pipes:
            if lp.line not in lines or not same_source_file(lp.file, src):
                continue
            for p in MATH_PIPES:
                v = float(lp.pipes.get(p, 0.0)) / n
                if v > 0:
                    fmas[p] = fmas.get(p, 0.0) + v
                    per_line[lp.line] = per_line.get(lp.line, 0.0) + v
        if not fmas:
            return None
        # the shared loads' share of the launch's shared requests and wavefronts (bank model)
        banks = ctx.banks.lines
        ld = [b for b in banks if b.kind == Kind.LOAD]
        req_all, wf_all = sum(b.instructions for b in banks), sum(b.wavefronts for b in banks)
        if not ld or req_all <= 0 or wf_all <= 0:
            return None
        load_req = w.shared_requests * sum(b.instructions for b in ld) / req_all
        load_wf = w.shared_wavefronts * sum(b.wavefronts for b in ld) / wf_all
        total_fma = sum(fmas.values())
        if total_fma < float(ctx.option("min_fma_per_load")) * load_req:
            return None
        roof = _fma_traffic(t, fmas)
        fma_t = launch_times(roof, d, rates)
        path_t = launch_times(replace(roof, shared_wavefronts=load_wf * w.ctas), d, rates)
        if fma_t is None or path_t is None or fma_t.pipe_s <= 0:
            return None
        path_s, fma_s = path_t.l1_s, fma_t.pipe_s
        if path_s < float(ctx.option("min_shared_share")) * before.l1_s:
            return None
        if path_s < float(ctx.option("min_lsu_over_fma")) * fma_s:
            return None
        ranked = tuple(sorted(per_line, key=lambda ln: (-per_line[ln], ln)))
        pipe = max(fmas, key=lambda p: fmas[p])
        tile = choose_tile(path_s / fma_s, w.ctas, d.sm_count or 0)
        det = LowIntensity(
            ranked, pipe, round(total_fma, 3), round(load_req, 3), round(load_wf, 3),
            round(path_s * 1e6, 3), round(fma_s * 1e6, 3), tile,
        )  # fmt: skip
        return det, t

    def detect(self, ctx: RuleContext) -> Iterator[Finding]:
        got = self._measure(ctx)
        if got is None:
            return
        det, t = got
        li = LoopIntensity(det.fmas, det.shared_loads, det.shared_wavefronts)
        after = li.tiled(det.tile)
        ratio = det.data_path_us / det.fma_us
        pipe = _NAMES.get(det.pipe, det.pipe)
        yield self.finding(
            ctx,
            f"low arithmetic intensity: the multiply-adds of line {det.lines[0]} take "
            f"{li.loads_per_fma:.2f} shared loads per {pipe} FMA "
            f"({li.shared_wavefronts / li.fmas:.2f} wavefronts): the shared data path needs "
            f"{det.data_path_us:.0f} us of the launch "
            f"against {det.fma_us:.0f} us for the FMAs at the {pipe} pipe's rate "
            f"({ratio:.1f}x), so the loop runs at the shared-memory rate. Compute a "
            f"{det.tile} x {det.tile} register tile of outputs per thread (each k step: "
            f"{det.tile} values of each operand into registers, {det.tile * det.tile} FMAs of "
            f"them): loads per FMA drop to {after.loads_per_fma:.2f}, "
            f"{ratio / det.tile:.1f}x the FMA pipe's time; or call cuBLAS/CUTLASS",
            line=det.lines[0],
            evidence=[
                Evidence("loads_per_fma", round(li.loads_per_fma, 3)),
                Evidence("wavefronts_per_fma", round(li.shared_wavefronts / li.fmas, 3)),
                Evidence("data_path_us", det.data_path_us, unit="us"),
                Evidence("fma_us", det.fma_us, unit="us"),
                Evidence(
                    "data_path_over_fma",
                    round(ratio, 2),
                    float(ctx.option("min_lsu_over_fma")),
                    ">=",
                ),
                Evidence("register_tile", det.tile),
                Evidence("loads_per_fma_tiled", round(after.loads_per_fma, 3)),
            ],
            details=det,
        )

    def estimate(self, ctx: RuleContext, finding: Finding) -> Estimate:
        det = finding.details_as(LowIntensity)
        d = ctx.device
        rates = memory_rates(d)
        t = _read_once(ctx, view_traffic(d, ctx.trace_view))
        w = t.work
        inputs: dict[str, Any] = {"tile": det.tile, "lines": list(det.lines)}
        if rates is None or w is None:
            return Estimate(None, "none", "not estimated: no instruction counts", inputs)
        gone = 1.0 - 1.0 / det.tile
        chain = dict(w.chain)
        if "shared" in chain:
            chain["shared"] *= 1.0 - gone
        pipes = dict(w.pipes)
        pipes["lsu"] = max(pipes.get("lsu", 0.0) - det.shared_loads * gone, 0.0)
        work = replace(
            w, pipes=pipes, chain=chain, chain_unordered=None,
            shared_requests=w.shared_requests - det.shared_loads * gone,
            shared_wavefronts=w.shared_wavefronts - det.shared_wavefronts * gone,
            critical_instructions=max(
                w.critical_instructions - det.shared_loads * gone / max(w.warps_per_cta, 1), 0.0
            ),
        )  # fmt: skip
        after = replace(
            t,
            work=work,
            shared_wavefronts=max(t.shared_wavefronts - det.shared_wavefronts * gone * w.ctas, 0),
            shared_requests=max(t.shared_requests - det.shared_loads * gone * w.ctas, 0.0),
        )
        est = launch_estimate(t, after, d, rates)
        fmas = {det.pipe: det.fmas}
        roof = launch_times(_fma_traffic(t, fmas), d, rates, peak_dram=True)
        before_peak = launch_times(t, d, rates, peak_dram=True)
        if est is None or roof is None or before_peak is None:
            return Estimate(None, "none", "not estimated: the device model lacks its rates", inputs)
        roof_s = roof.floor_s + max(roof.pipe_s, roof.issue_s)
        bound = max(ceiling_s(before_peak) / roof_s, est.point, 1.0)
        inputs.update(
            model=MODEL,
            floor_us=est.before.floor_s * 1e6,
            point_speedup=round(max(est.point, 1.0), 3),
            bound_by_before=est.before.bound_by,
            bound_by_after=est.after.bound_by,
            fma_roof_us=round(roof_s * 1e6, 3),
        )
        if est.peak is not None:
            inputs["peak_speedup"] = round(max(est.peak, 1.0), 3)
        method = (
            f"execution model of the launch: before {est.before.describe()}, bound by "
            f"{est.before.bound_by}; after a {det.tile} x {det.tile} register tile (the shared "
            f"loads, their wavefronts, issue slots and critical-path links divided by "
            f"{det.tile}; the FMAs, staging stores and global traffic as they are): "
            f"{est.after.describe()}, bound by {est.after.bound_by}. Point {est.point:.2f}x "
            f"(sustained rates). Upper bound {bound:.2f}x, the FMA roof: the launch before at "
            "peak rates with the model's error margin on its work, against the launch floor "
            f"plus its {det.fmas * w.ctas:.3g} warp multiply-adds alone at the "
            f"{_NAMES.get(det.pipe, det.pipe)} pipe's rate ({roof_s * 1e6:.1f} us): no rewrite "
            "that keeps the multiply-adds beats it"
        )
        return Estimate(round(bound, 3), "upper-bound", method, inputs)

    def transform(self, ctx: RuleContext, finding: Finding) -> Variant:
        det = finding.details_as(LowIntensity)
        return Variant(
            "display-only",
            f"compute a {det.tile} x {det.tile} register tile of outputs per thread at line "
            f"{det.lines[0]}: per k step, {det.tile} values of each operand into registers "
            "and their outer product",
        )
