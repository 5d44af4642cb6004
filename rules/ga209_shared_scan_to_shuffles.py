"""GA209 shared-scan-to-shuffles: a prefix sum scanned in shared memory, steps below a warp
included, where ``__shfl_up_sync`` does them in registers."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from gpuadvise.rules import (
    WARP,
    Estimate,
    Evidence,
    Finding,
    FindingDetails,
    ModelUnavailable,
    Rule,
    RuleContext,
    ScanChange,
    Variant,
    blelloch_diff,
    counted,
    scans_of,
    shuffled_estimate,
    warp_scan_diff,
)


@dataclass(frozen=True)
class ScanSteps(FindingDetails):
    """A scan of the traced CTA: its kind, distances, barriers (fill to last step), the steps
    below a warp, the warps it spans, side-by-side scans, down-sweep steps, runs per CTA,
    shared lane accesses per run, and whether it runs with no barrier (warp-synchronous)."""

    kind: str
    distances: tuple[int, ...]
    barriers: int
    warp_steps: int
    warps: int
    segments: int
    down_steps: int
    runs: int
    shared_accesses: int
    warp_synchronous: bool

    def change(self) -> ScanChange:
        return ScanChange(
            len(self.distances) + self.down_steps,
            self.barriers,
            self.warp_steps,
            self.warps,
            self.segments > 1,
            self.shared_accesses,
            self.runs,
        )


def _a_tree(ctx: RuleContext, lines: tuple[tuple[str | None, int | None], ...]) -> bool:
    """The reduction model reads the scan's steps (their ``lines``) as a tree folding downwards
    (no exchange after its last step, the result left in the highest word)."""
    return any(t.mirrored and set(t.lines) & set(lines) for t in ctx.reduction_trees)


class SharedScanToShuffles(Rule):
    """A prefix sum (scan) done step by step in shared memory, its steps below a warp included.

    What it detects
    ---------------
    From the emulator's trace (``gpuadvise.model.scan``), whatever the spelling: a scan in
    shared memory, each step storing ``s[i] + s[i - d]`` into ``s[i]`` with ``d`` doubling from
    1 (Hillis-Steele / Kogge-Stone, in place or double-buffered; Blelloch's work-efficient
    up-sweep, ``temp[bi] += temp[ai]``, with its down-sweep), at least three steps, steps below
    distance 32 included. Reported at the store of its first step (in a helper function, there).
    A warp's scan whose steps pass no barrier and no ``__syncwarp`` (``volatile`` memory and
    implicit warp synchrony) is reported as the race it is since Volta; one whose kernel
    synchronises its warps (``__syncwarp``) is correct and has no barrier to save: silent.
    Silent on a kernel that already shuffles when every step of its shared scan has at most 32
    threads (the cross-warp step of a shuffle scan). An up-sweep that no down-sweep follows,
    whose words the reduction model reads as a tree folding to its highest word, is a
    reduction, not a scan: GA202's.

    Why it is slow
    --------------
    Each step is a shared load, an add and a shared store by every thread, and a block-wide
    scan needs a barrier between steps (two over one array: one before the read, one before the
    write). The steps below distance 32 never leave a warp: ``__shfl_up_sync`` exchanges the
    values in registers with the synchronisation built in, so a block's scan becomes five
    shuffles per warp, one step across the warps' totals through shared memory and two
    barriers, where an 8-step Hillis-Steele scan of 256 values has 16 and a Blelloch scan of
    1024 values 20 (half of them with at most one warp working).

    Example
    -------
    ``kernels/scan/scans.cu``: ``hillis_volatile`` (cuda-samples' scan1Inclusive, padded, two
    barriers a step), ``hillis_tmpl<256>`` (double-buffered), ``blelloch`` (the up- and
    down-sweep), ``warp_scan_racy`` (hecbench radixsort's scanwarp); ``shuffle_scan`` is the fix.
    ``kernels/scan/warp_helpers.cu``: racy warp scans in ``__device__`` helpers (radixsort's
    spelling, called through another helper; a template helper), rewritten there.

    Fix
    ---
    Scan each warp's values with shuffles, then the warps' totals::

        unsigned lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
        for (int d = 1; d < 32; d <<= 1) {
            T y = __shfl_up_sync(0xffffffffu, v, d);
            if (lane >= d) v += y;
        }
        if (lane == 31) totals[warp] = v;
        __syncthreads();
        if (warp == 0) {  // scan the warps' totals the same way
            T t = lane < nwarps ? totals[lane] : 0;
            for (int d = 1; d < 32; d <<= 1) {
                T y = __shfl_up_sync(0xffffffffu, t, d);
                if (lane >= d) t += y;
            }
            totals[lane] = t;
        }
        __syncthreads();
        if (warp > 0) v += totals[warp - 1];

    How the estimate is made
    ------------------------
    On the launch model: the traced launch against the same launch whose CTAs run each scan
    (as many times as the traced CTA does) with shuffles: the scan's barriers and a shared load
    a step off the critical warp's chain (two barriers, two shared loads and the totals' shuffles
    added back for a block's scan), its shared requests off the pipes and the shared data path,
    the shuffles added to them. An upper bound (the model's after side at peak rates) for a
    Hillis-Steele scan (cuda-samples scanExclusiveShared: bound 1.13x, 1.084x measured on an
    H200). A scan whose steps the bank model finds conflicting (HeCBench scan) takes the
    launch's wavefronts with their conflicts before and its saved requests at the steps' ways.
    A work-efficient (Blelloch) scan: not estimated, the model's figures kept in the method and
    the inputs (``model_bound``, ``point_speedup``). The barrier steps' throughput (3.75 SM
    cycles a warp a step, measured on an H200: docs/execution-model.md) brought HeCBench
    scan_bcao's point to 1.94x (measured 2.23x, bound 2.56x), but scan's bound is 2.79x for
    3.61x measured: on the H200 one warp's conflicted access between two barriers added its
    wavefronts to the SM's time even with four CTAs resident (the probe's onec against one),
    which the model, taking the larger of the data path and the barrier steps, does not add.
    A warp's racy scan is a correctness fix: not estimated (the launch model on the variant's
    own trace put HeCBench radixsort's at 0.92x, its shuffles and selects on the integer pipe
    against the shared loads saved; a fix of a race is offered whatever its speed).

    Fix safety
    ----------
    A warp's racy scan (HeCBench radixsort's ``scanwarp``): automatic and verified, a diff
    where the steps lie, in the kernel or in a ``__device__`` helper that only this kernel calls
    (directly or through other such helpers; a helper another kernel calls stays display-only:
    the diff is verified on this launch alone). The lane's word is read into a register before
    the steps, each step ``a[i] += a[i - d];`` becomes ``y = __shfl_up_sync(0xffffffffu, v, d);
    if (lane >= d) v += y;`` in place (its ``if (k <= maxlevel)`` guard kept), and the register
    is stored back into the word after them, so the array holds what the lock-step scan left
    and every later read (an exclusive result ``s[i] - v``, the warps' totals) is unchanged.
    Offered when the trace shows what the shuffles assume: every step run by whole warps (the
    full mask) of a one-dimensional block, each lane owning one word and adding the word of
    lane ``l - d``, the first ``d`` lanes adding a word below the window that a statement
    ``a[...] = 0;`` stored (so ``lane >= d`` skips a zero), every step of the source traced; the
    steps one run of statements ``a[i] += a[i - d];`` (each alone or alone in an ``if``) of
    one block, of a type ``__shfl_up_sync`` takes. The lanes add the same values in the same
    order: integer sums are bit-identical, float sums too but for a ``-0.0`` that the lock-step
    scan's added zero made ``+0.0``. The measurement stage checks the outputs against the
    kernel's before timing it.
    Blelloch's scan of a whole block (HeCBench scan and scan_bcao; kernels/scan/
    blelloch_halves.cu): automatic and verified, a diff that replaces the up-sweep loop, the
    last element's clear and the down-sweep loop by a scan in warp shuffles of the two elements
    each thread stored before it (read back from its own words), the warps' totals scanned by
    the first warp (up to 64, counted from ``blockDim.x``), the exclusive results stored back
    into the same words, so the array holds what the Blelloch scan left there; the user's
    comments of the loops kept above. Offered when the trace shows each thread storing elements
    ``2t, 2t + 1`` or ``t, t + n/2`` of the ``n`` words the first step adds, by two statements
    on two lines, the whole down-sweep following, a one-dimensional block of whole warps; the
    loops siblings in one block; the elements integers (the sums regrouped are the same; a
    float scan stays advice: its rounding would change). A Hillis-Steele block scan: advice,
    no diff.
    """

    id = "GA209"
    name = "shared-scan-to-shuffles"
    title = "Prefix sum scanned in shared memory where warp shuffles would do"
    severity = "warning"
    models = ("trace", "banks")
    options = {}

    def detect(self, ctx: RuleContext) -> Iterator[Finding]:
        shuffles = "shfl.sync" in ctx.kernel_ptx
        seen: set[int | None] = set()
        for s in scans_of(ctx.trace):
            small = s.warp_steps
            if len(small) < 2:
                continue
            if shuffles and all(p.active_threads <= WARP for p in s.steps):
                continue  # a shuffle scan's step across the warps' totals
            if s.kind == "work-efficient" and not s.down_steps and _a_tree(ctx, s.lines):
                continue  # an up-sweep and no down-sweep: a reduction tree (GA202's)
            if s.warp_synchronous and ctx.syncs_warps:
                continue  # a warp's scan synchronised by __syncwarp: correct, no barrier to save
            racy = s.warp_synchronous and s.threads > 1
            line = next((ln for f, ln in s.steps[0].lines if ln and ctx.same_file(f)), None)
            site = next((ln for f, ln in s.steps[0].call_sites if ln and ctx.same_file(f)), None)
            if line in seen:
                continue
            seen.add(line)
            warps = max(p.warps for p in s.steps)
            dists = ", ".join(str(p.distance) for p in s.steps)
            where = f" (called at line {site})" if site and site != line else ""
            n_small = len(small)
            if racy:
                who = (
                    f"each of {s.segments} warps scans its values"
                    if s.segments > 1
                    else f"{s.steps[0].active_threads} threads scan their values"
                )
                text = (
                    f"{who} in shared memory{where} (distances {dists}) with neither a barrier "
                    "nor __syncwarp between the steps: implicit warp synchrony, a race since "
                    "Volta's independent thread scheduling. __shfl_up_sync(0xffffffff, v, d) "
                    "does the steps in registers, synchronised"
                )
            elif s.kind == "work-efficient":
                few = sum(1 for p in s.steps if p.active_threads <= WARP)
                text = (
                    f"a work-efficient (Blelloch) scan in shared memory{where}: "
                    f"{len(s.steps)} up-sweep steps (distances {dists})"
                    + (f" and {s.down_steps} down-sweep steps" if s.down_steps else "")
                    + f", {counted(s.barriers, 'barrier')} a scan, {few} up-sweep steps by at "
                    f"most one warp while the others of the {warps} wait: scan each warp's "
                    "values with __shfl_up_sync, then the warps' totals (2 barriers)"
                )
            else:
                text = (
                    f"a Hillis-Steele scan in shared memory{where}: {len(s.steps)} steps "
                    f"(distances {dists}), {counted(s.barriers, 'barrier')} a scan; its "
                    f"{n_small} steps below distance 32 never leave a warp: do them with "
                    "__shfl_up_sync (no barrier, no shared traffic)"
                    + (
                        f", then one step across the {warps} warps' totals (2 barriers)"
                        if warps > 1 and s.segments == 1
                        else ""
                    )
                )
            if s.runs > 1:
                text += f"; the CTA runs it {s.runs} times"
            yield self.finding(
                ctx,
                text,
                line=line,
                evidence=[
                    Evidence("scan_steps", len(s.steps), 3, ">="),
                    Evidence("steps_below_a_warp", n_small, 2, ">="),
                    Evidence("barriers_per_scan", s.barriers, unit="barriers"),
                    Evidence("scans_per_cta", s.runs),
                    Evidence("source", "trace"),
                    *([Evidence("call_site_line", site)] if site and site != line else []),
                ],
                details=ScanSteps(
                    s.kind,
                    tuple(p.distance for p in s.steps),
                    s.barriers,
                    n_small,
                    warps,
                    s.segments,
                    s.down_steps,
                    s.runs,
                    s.shared_accesses,
                    racy,
                ),
            )

    def estimate(self, ctx: RuleContext, finding: Finding) -> Estimate:
        d = finding.details_as(ScanSteps)
        shuffles, loads, barriers = d.change().after()
        inputs: dict[str, Any] = {
            "scans_per_cta": d.runs,
            "barriers_per_scan": d.barriers,
            "barriers_after": barriers,
            "shared_steps": len(d.distances) + d.down_steps,
            "shuffles_after": shuffles,
        }
        if d.warp_synchronous:
            return Estimate(
                None,
                "none",
                "not estimated: a correctness fix (the steps race without __syncwarp); the "
                f"shuffles replace {len(d.distances)} shared steps a scan",
                inputs,
            )
        try:
            est = shuffled_estimate(
                ctx.device,
                ctx.trace_view,
                d.change(),
                f"each CTA's {d.runs} scan(s) with shuffles: {d.barriers} barriers made "
                f"{barriers}, {len(d.distances) + d.down_steps} shared steps made {shuffles} "
                f"shuffles and {loads} shared loads a scan",
                inputs,
                _conflicts(ctx, finding.line),
            )
        except ModelUnavailable as exc:
            return Estimate(None, "none", f"not estimated: {exc.message}", inputs)
        return _blind_spot(est) if d.kind == "work-efficient" else est

    def transform(self, ctx: RuleContext, finding: Finding) -> Variant:
        d = finding.details_as(ScanSteps)
        if d.warp_synchronous:
            return _racy_variant(ctx, finding)
        what = (
            "scan each warp's values in registers with __shfl_up_sync(0xffffffff, v, d) for d "
            "= 1, 2, 4, 8, 16 (adding when lane >= d)"
        )
        if d.warps > 1 and d.segments == 1:
            what += (
                "; lane 31 stores its warp's total, a barrier, the first warp scans the totals "
                "the same way, a barrier, each warp adds the totals before it"
            )
        why = "a Hillis-Steele scan's rewrite is not automated"
        if d.kind == "work-efficient" and finding.line is not None:
            scan = next(
                (s for s in scans_of(ctx.trace)
                 if s.kind == d.kind and (None, finding.line) in _here(ctx, s.steps[0].lines)),
                None,
            )  # fmt: skip
            diff, why = blelloch_diff(ctx, scan, finding.line) if scan else (None, "not found")
            if diff is not None:
                return Variant(
                    "automatic-and-verified",
                    f"{what}: the up- and down-sweep replaced by that scan of the two elements "
                    "each thread stored, the exclusive results stored back into their words "
                    "(the array as the Blelloch scan leaves it); integer sums, so the same "
                    "values; the measurement stage checks the outputs and times it",
                    diff=diff,
                )
        return Variant("display-only", f"{what} (no diff: {why})")


def _racy_variant(ctx: RuleContext, finding: Finding) -> Variant:
    """The racy warp scan reported at ``finding``'s line made a scan of one register with
    ``__shfl_up_sync`` where it lies (every scan of the trace on its lines: a helper called
    twice scans twice), or advice saying why not."""
    racy = [s for s in scans_of(ctx.trace) if s.warp_synchronous]
    mine = next((s for s in racy if (None, finding.line) in _here(ctx, s.steps[0].lines)), None)
    lines = {x for s in racy if set(s.lines) & set(mine.lines) for x in s.lines} if mine else set()
    how = (
        "scan each lane's value in a register with __shfl_up_sync(0xffffffffu, v, d) for each "
        "step's distance d (adding where lane >= d: the zeros below the window)"
    )
    diff, why = warp_scan_diff(ctx, lines) if lines else (None, "the scan was not found again")
    if diff is None:
        return Variant("display-only", f"{how} (no diff: {why})")
    return Variant(
        "automatic-and-verified",
        f"{how}, the lane's word stored back after the steps: the lanes add the values the "
        "lock-step scan adds, in its order, so the sums are the same and the array holds what "
        "it held after the scan; the measurement stage checks the outputs and times it",
        diff=diff,
    )


def _conflicts(ctx: RuleContext, line: int | None) -> tuple[float, float] | None:
    """The launch's shared wavefronts with their bank conflicts (the bank model's) and the ways
    of the scan's steps at ``line`` (wavefronts over conflict-free ones on its steps' lines; the
    down-sweep pairs the same words), or None without them."""
    scan = next(
        (s for s in scans_of(ctx.trace) if (None, line) in _here(ctx, s.steps[0].lines)), None
    )
    try:
        banks = ctx.banks
    except ModelUnavailable:
        return None
    mine = {ln for ln in _here(ctx, scan.lines)} if scan else set()
    steps = [b for b in banks.lines if ctx.same_file(b.file) and (None, b.line) in mine]
    ideal = sum(b.ideal for b in steps)
    if not ideal:
        return None
    return float(banks.launch.all.wavefronts), sum(b.wavefronts for b in steps) / ideal


def _here(ctx: RuleContext, lines: tuple[tuple[str | None, int | None], ...]) -> set[Any]:
    """The (None, line) of ``lines`` that lie in the kernel's file."""
    return {(None, ln) for f, ln in lines if ln and ctx.same_file(f)}


def _blind_spot(est: Estimate) -> Estimate:
    """A work-efficient scan's estimate made none: the launch model's bound is not one it can
    keep there (its figures kept: the method, ``model_bound`` and ``point_speedup``)."""
    if est.kind == "none":
        return est
    inputs = {**est.inputs, "model_bound": est.speedup}
    return Estimate(
        None,
        "none",
        "not estimated: the launch model misses part of a work-efficient scan's cost, so its "
        f"bound ({est.speedup:.2f}x) is not one it can keep. It has the barrier steps' "
        "throughput, not the bank conflicts of the steps one warp does alone, which an H200 "
        "adds to it: HeCBench scan's shuffles measured above the bound (explain GA209). The "
        f"model's figures, for what they are: {est.method}",
        inputs,
    )
