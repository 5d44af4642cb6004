"""Shared-memory scans and tree tails made warp shuffles (GA209, GA205): the scans of a
context's trace (:mod:`gpuadvise.model.scan`, found once per trace), the execution model's work
of a launch whose scan or tree tail is done with warp shuffles, and its estimate; a racy warp
scan's lanes checked on the trace and its shuffle rewrite planned (:func:`warp_scan_diff`)."""

from __future__ import annotations

import math
from bisect import bisect_left
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from gpuadvise.memo import IdentityMemo
from gpuadvise.model.execution import KernelWork
from gpuadvise.model.reduction import shared_lane_events, thread_stores
from gpuadvise.model.scan import ScanStep, SharedScan, shared_scans
from gpuadvise.rules.context import ModelUnavailable, RuleContext
from gpuadvise.rules.estimates import launch_change_estimate, view_traffic
from gpuadvise.rules.findings import Estimate
from gpuadvise.source import fixkit_scans as K
from gpuadvise.source.fixkit_trees import pointee_type
from gpuadvise.source.functions import helper_at
from gpuadvise.source.text import KernelSource
from gpuadvise.source.tree import KernelParam
from gpuadvise.trace.access import WARP, AccessTrace, Kind
from gpuadvise.trace.view import TraceView

__all__ = [
    "ScanChange",
    "ScanStep",
    "SharedScan",
    "scans_of",
    "shuffled_estimate",
    "tree_tail_change",
    "blelloch_diff",
    "blelloch_fill",
    "warp_scan_diff",
    "warp_scan_lanes",
    "with_scan_shuffled",
]

_SCANS: IdentityMemo[AccessTrace, tuple[SharedScan, ...]] = IdentityMemo()


def scans_of(trace: AccessTrace) -> tuple[SharedScan, ...]:
    """:func:`gpuadvise.model.scan.shared_scans` of ``trace``'s first CTA, once per trace."""
    return _SCANS(trace, shared_scans)


@dataclass(frozen=True)
class ScanChange:
    """A scan of the traced CTA made shuffles, per run: ``steps`` shared steps (the up-sweep's
    and the down-sweep's) and ``barriers`` barriers before; ``warp_steps`` below distance 32;
    ``warps`` it spans; ``per_warp``: each warp scans its own values (no step across warps);
    ``shared_accesses``: its lane accesses; ``runs`` per CTA."""

    steps: int
    barriers: int
    warp_steps: int
    warps: int
    per_warp: bool
    shared_accesses: int
    runs: int

    def after(self) -> tuple[int, int, int]:
        """On a warp's dependent chain after the change, per run: shuffles, shared loads,
        barriers. One warp's scan (or one per warp side by side): its steps' shuffles; a
        block's: each warp's shuffles, its total stored, a barrier, the first warp's scan of
        the totals (loaded, ``log2(warps)`` shuffles, stored), a barrier, its offset loaded."""
        if self.warps <= 1 or self.per_warp:
            return self.warp_steps, 0, 0
        return self.warp_steps + math.ceil(math.log2(self.warps)), 2, 2


def with_scan_shuffled(work: KernelWork, c: ScanChange) -> tuple[KernelWork, float]:
    """``work`` with the scan made shuffles (``runs`` times a CTA) and the shared warp requests
    saved per CTA: the barriers and a shared load a step off the critical chain (the
    :meth:`ScanChange.after` ones added back), the shared requests and barriers off the pipes,
    the shuffles on them; three instructions a step off the critical warp's count."""
    shuffles, loads, barriers = c.after()
    r = c.runs
    gone = max(c.barriers - barriers, 0)
    chain = dict(work.chain)
    chain["barrier"] = max(chain.get("barrier", 0.0) - r * gone, 0.0)
    chain["shared"] = max(chain.get("shared", 0.0) - r * max(c.steps - loads, 0), 0.0)
    chain["shuffle"] = chain.get("shuffle", 0.0) + r * shuffles
    warps = max(c.warps, 1)
    requests = float(max(math.ceil(c.shared_accesses / WARP) - warps * (loads + 1), 0) * r)
    pipes = dict(work.pipes)
    pipes["lsu"] = max(pipes.get("lsu", 0.0) - requests, 0.0)
    pipes["barrier"] = max(pipes.get("barrier", 0.0) - r * work.warps_per_cta * gone, 0.0)
    pipes["shuffle"] = pipes.get("shuffle", 0.0) + r * warps * shuffles
    after = replace(
        work,
        chain=chain,
        chain_unordered=None,
        pipes=pipes,
        shared_requests=max(work.shared_requests - requests, 0.0),
        critical_instructions=max(work.critical_instructions - r * 3 * c.steps, 1.0),
    )
    return after, requests


def tree_tail_change(distances: tuple[int, ...], barriers: int, runs: int) -> ScanChange:
    """A reduction tree's last steps (``distances``, each at most 32 words apart, ``barriers``
    of them after a barrier) made one warp's shuffles, ``runs`` times a CTA: each step's
    active threads load two words and store one; after the change the warp adds its two
    halves once (one shared load) and shuffles ``log2(32)`` times."""
    accesses = sum(3 * d for d in distances)
    return ScanChange(
        steps=len(distances),
        barriers=barriers,
        warp_steps=int(math.log2(WARP)),
        warps=1,
        per_warp=False,
        shared_accesses=accesses,
        runs=max(runs, 1),
    )


def shuffled_estimate(
    device: Any,
    view: TraceView,
    change: ScanChange,
    what: str,
    inputs: dict[str, Any],
    conflicts: tuple[float, float] | None = None,
) -> Estimate:
    """The launch with ``change`` made (:func:`with_scan_shuffled`) on the launch model: its
    shared requests and wavefronts (at the launch's ways per request) saved in every CTA.
    ``conflicts``: the launch's shared wavefronts with their bank conflicts (the bank model's)
    and the ways of the scan's own accesses: the launch before with its conflicts, the saved
    requests taking the scan's ways with them. Raises
    :class:`~gpuadvise.rules.context.ModelUnavailable` without the launch's traffic."""
    base = view_traffic(device, view)
    if base.work is None:
        return Estimate(None, "none", "not estimated: no execution model of the launch", inputs)
    work, requests = with_scan_shuffled(base.work, change)
    ways = base.shared_wavefronts / base.shared_requests if base.shared_requests else 1.0
    if conflicts is not None and conflicts[0] > base.shared_wavefronts:
        base, ways = replace(base, shared_wavefronts=conflicts[0]), max(conflicts[1], 1.0)
        inputs["scan_ways"] = round(ways, 3)
    saved = requests * work.ctas
    after = replace(
        base,
        work=work,
        shared_requests=max(base.shared_requests - saved, 0.0),
        shared_wavefronts=max(base.shared_wavefronts - saved * ways, 0.0),
    )
    inputs["shared_requests_saved_per_cta"] = requests
    est = launch_change_estimate(device, base, after, what, inputs)
    if est is None:
        return Estimate(None, "none", "not estimated: no launch model on this device", inputs)
    return est


Line = tuple[str | None, int | None]
_MAX_STEP_STORES = 200_000  # lane stores of the steps checked one by one


@dataclass(frozen=True)
class WarpLanes:
    """A warp-synchronous scan's lanes as the trace shows them: every lane ``l`` of a whole
    warp adds the word of lane ``l - d`` (``distances``), the first ``d`` lanes a word below the
    warp's window, which the stores of ``fills`` (their instructions) wrote last."""

    distances: frozenset[int]
    fills: dict[Line, set[int]]


def warp_scan_lanes(trace: AccessTrace, lines: set[Line]) -> WarpLanes | str:
    """The lanes of the scan steps whose stores lie on ``lines``, in the first traced CTA, or
    why they are no warp's lock-step scan the shuffles reproduce: each step's instructions run
    by whole warps (the shuffles' full mask), each lane owns one word, adds the word of lane
    ``l - d`` of its warp, and its first ``d`` lanes read words no lane of the scan owns."""
    events = shared_lane_events(trace)
    if events is None:
        return "the trace holds no CTA's shared accesses to check the lanes on"
    _, _, sel, _, lane = events
    line_of = {i.inst: trace.line_of(i.inst) for i in trace.instructions}
    inst = sel["inst"].astype(np.int64)
    at = np.isin(inst, [i for i, ln in line_of.items() if ln in lines])
    if not (sel["mask"][at] == 0xFFFFFFFF).all():
        return "the steps run with part of a warp (a full-mask shuffle needs every lane)"
    thread = sel["warp"].astype(np.int64) * WARP + lane
    addr = sel["addr"].astype(np.int64)
    kind, width = sel["kind"].astype(np.int64), sel["width"].astype(np.int64)
    ev = thread_stores(thread, kind, addr, width, sel["epoch"].astype(np.int64))
    if ev is None:
        return "the steps store nothing"
    order, t, a, w, _, st, ld, seg = ev
    steps = [k for k in range(len(st)) if at[order[st[k]]]]
    if not steps or len(steps) > _MAX_STEP_STORES:
        return "the steps' stores are not in the trace" if not steps else "too many lanes"
    owner: dict[int, int] = {}
    for k in steps:
        if owner.setdefault(int(a[st[k]]), int(t[st[k]])) != t[st[k]]:
            return "two threads store the same word of the scan"
    loads: dict[int, list[int]] = defaultdict(list)
    for j, k in zip(ld.tolist(), seg.tolist(), strict=True):
        loads[k].append(j)
    dists: set[int] = set()
    low: list[tuple[int, int]] = []  # (byte read below the window, its event)
    for k in steps:
        word, th, wd = int(a[st[k]]), int(t[st[k]]), int(w[st[k]])
        other = [j for j in loads[k] if a[j] != word]
        if len({int(a[j]) for j in other}) != 1 or any(w[j] != wd for j in other):
            return "a step's lane reads other words than its own and one below it"
        b = int(a[other[0]])
        d = (word - b) // wd
        if d <= 0 or (word - b) % wd or d >= WARP:
            return "a step's lane reads no word below its own within a warp's reach"
        dists.add(d)
        if th % WARP >= d:
            if owner.get(b) != th - d:
                return f"lane {th % WARP} does not read lane {th % WARP - d}'s word"
        elif b in owner:
            return f"lane {th % WARP} reads a word of the scan, not one below the window"
        else:
            low.append((b, int(order[other[0]])))
    stores: dict[int, list[tuple[int, int]]] = defaultdict(list)  # byte: (event, inst)
    for e in np.flatnonzero(kind != int(Kind.LOAD)).tolist():
        stores[int(addr[e])].append((e, int(inst[e])))
    fills: dict[Line, set[int]] = defaultdict(set)
    for b, e in low:
        before = stores.get(b, [])
        k = bisect_left(before, (e, -1))
        if k == 0:
            return "the first lanes read words below the window that no store filled"
        i = before[k - 1][1]
        fills[line_of.get(i, (None, None))].add(i)
    return WarpLanes(frozenset(dists), dict(fills))


def warp_scan_diff(ctx: RuleContext, scan_lines: set[Line]) -> tuple[str | None, str]:
    """The diff that makes the racy warp scan on ``scan_lines`` a scan of one register with
    ``__shfl_up_sync`` (:mod:`gpuadvise.source.fixkit_scans`), in the kernel or in a
    ``__device__`` helper only this kernel calls (through other such helpers); (None, why not)
    otherwise."""
    try:
        ks = ctx.kernel_source
    except ModelUnavailable as exc:
        return None, f"the kernel's source is not available ({exc.message})"
    lines = {ln for f, ln in scan_lines if ln and ctx.same_file(f)}
    if not lines or len(lines) != len(scan_lines):
        return None, "the scan's steps are not all in the kernel's source file"
    block = ctx.launch.block.as_tuple()
    if block[1] * block[2] != 1:
        return None, "the block is not one-dimensional (the lane is no `threadIdx.x & 31`)"
    lanes = warp_scan_lanes(ctx.trace, scan_lines)
    if isinstance(lanes, str):
        return None, lanes
    fn: KernelSource = ks
    params: tuple[KernelParam, ...] = ()
    if not ks.span[0] <= ks.tree.line_start(min(lines)) < ks.span[1]:
        h = helper_at(ks, min(lines), through_helpers=True)
        if isinstance(h, str):
            return None, h
        fn, params = h.source, h.params
    run = K.warp_scan_steps(fn, lines)
    if isinstance(run, str):
        return None, run
    untraced = sorted({s.distance for s in run.steps} - lanes.distances)
    if untraced:
        return None, f"the steps at distance {untraced[0]} did not run in the traced CTA"
    for (f, ln), insts in lanes.fills.items():
        if not (ln and ctx.same_file(f)) or not K.stores_zero(
            ks, ln, sorted(insts), _line_stores(ctx, ln)
        ):
            return None, (
                f"the words below the window that the first lanes add are not stored as zero "
                f"(line {ln}): the shuffles add nothing there"
            )
    decls = [*fn.declarations(), *(d for d in ks.declarations(file=True) if d.file_scope)]
    typ = next(
        (pointee_type(p) for p in params if p.name == run.array),
        next((d.type for d in decls for dd in d.declarators if dd.name == run.array), None),
    )
    typ = " ".join(w for w in (typ or "").split() if w not in ("volatile", "const"))
    if not typ:
        return None, f"the element type of `{run.array}` is not declared"
    if not K.shuffles(ks, typ):
        return None, f"__shfl_up_sync takes no `{typ}` values"
    rw = ks.rewrite()
    K.shuffle_warp_scan(fn, rw, run, typ, "threadIdx.x & 31")
    return rw.diff(ctx.source_file), ""


def _line_stores(ctx: RuleContext, line: int) -> list[int]:
    """The shared store instructions of the kernel's trace on ``line`` of its file, in order."""
    return sorted(
        i.inst
        for i in ctx.trace.instructions
        if i.line == line and ctx.same_file(i.file) and i.kind == Kind.STORE
    )


@dataclass(frozen=True)
class BlellochFill:
    """How a Blelloch scan's ``n`` leaves were filled: each thread ``t`` stored two, elements
    ``2t, 2t + 1`` (``pairs``) or ``t, t + n/2``, the lower one by the store on ``lines[0]``,
    the other on ``lines[1]``."""

    pairs: bool
    lines: tuple[Line, Line]


def blelloch_fill(trace: AccessTrace, scan: SharedScan) -> BlellochFill | str:
    """The leaves of ``scan`` (the words its first step adds), ranked by address, and which
    thread stored each last before the step; else why the scan is no two-elements-a-thread
    Blelloch scan of the whole block a shuffle scan reproduces."""
    events = shared_lane_events(trace)
    if events is None:
        return "the trace holds no CTA's shared accesses"
    _, _, sel, _, lane = events
    line_of = {i.inst: trace.line_of(i.inst) for i in trace.instructions}
    inst = sel["inst"].astype(np.int64)
    thread = sel["warp"].astype(np.int64) * WARP + lane
    addr = sel["addr"].astype(np.int64)
    kind, epoch = sel["kind"].astype(np.int64), sel["epoch"].astype(np.int64)
    ev = thread_stores(thread, kind, addr, sel["width"].astype(np.int64), epoch)
    if ev is None:
        return "the scan stores nothing"
    order, _, a, _, e, st, ld, seg = ev
    first = scan.steps[0]
    at = np.isin(inst, [i for i, ln in line_of.items() if ln in set(first.lines)])
    mine = np.flatnonzero(at[order[st]] & (e[st] == first.epoch))
    leaves = set(a[st[mine]].tolist()) | set(a[ld[np.isin(seg, mine)]].tolist())
    n = 2 * scan.threads
    if len(leaves) != n or first.active_threads * 2 != n:
        return f"the first step adds {len(leaves)} words, not two for each of the block's threads"
    rank = {w: r for r, w in enumerate(sorted(leaves))}
    last: dict[int, tuple[int, int, int]] = {}  # word: (event, thread, inst) of its fill
    stores = np.flatnonzero((kind != int(Kind.LOAD)) & (epoch < first.load_epoch))
    for ev_i in stores.tolist():
        w = int(addr[ev_i])
        if w in rank:
            last[w] = (ev_i, int(thread[ev_i]), int(inst[ev_i]))
    if len(last) != n:
        return "some of the scan's words were not stored before it"
    owned: dict[int, list[tuple[int, int]]] = defaultdict(list)  # thread: (rank, inst)
    for w, (_, t, i) in last.items():
        owned[t].append((rank[w], i))
    pairs = all(sorted(r for r, _ in v) == [2 * t, 2 * t + 1] for t, v in owned.items())
    halves = all(sorted(r for r, _ in v) == [t, t + n // 2] for t, v in owned.items())
    if len(owned) != scan.threads or not (pairs or halves):
        return "the threads do not each store elements 2t, 2t + 1 or t, t + n/2 of the scan"
    lo = {line_of.get(min(v)[1]) for v in owned.values()}
    hi = {line_of.get(max(v)[1]) for v in owned.values()}
    if len(lo) != 1 or len(hi) != 1 or lo == hi:
        return "each thread's two elements are not stored by two statements on two lines"
    return BlellochFill(pairs, (lo.pop() or (None, None), hi.pop() or (None, None)))


_EXACT = frozenset(
    {"int", "unsigned", "unsigned int", "long", "unsigned long", "long long",
     "unsigned long long", "int32_t", "uint32_t", "int64_t", "uint64_t"}
)  # fmt: skip


def blelloch_diff(ctx: RuleContext, scan: SharedScan, line: int) -> tuple[str | None, str]:
    """The diff that replaces the Blelloch scan reported at ``line`` (its up-sweep's store) by
    a scan in warp shuffles (:func:`gpuadvise.source.fixkit_scans.shuffle_block_scan`); (None,
    why not) otherwise."""
    try:
        ks = ctx.kernel_source
    except ModelUnavailable as exc:
        return None, f"the kernel's source is not available ({exc.message})"
    if scan.down_steps != len(scan.steps) or scan.runs < 1:
        return None, "the up-sweep is not followed by its whole down-sweep"
    block = ctx.launch.block.as_tuple()
    warps = scan.threads // WARP
    if block[1] * block[2] != 1 or scan.threads % WARP or warps > WARP:
        return None, "the block is not one-dimensional, whole warps, at most 1024 threads"
    if not ks.span[0] <= ks.tree.line_start(line) < ks.span[1]:
        return None, "the scan is not in the kernel's own body"
    fill = blelloch_fill(ctx.trace, scan)
    if isinstance(fill, str):
        return None, fill
    region = K.blelloch_region(ks, line, _array_at(ks, line) or "")
    if isinstance(region, str):
        return None, region
    arr = _array_at(ks, line)
    index = []
    for f, ln in fill.lines:
        x = K.element_store(ks, ln, arr or "") if ln and ctx.same_file(f) and arr else None
        if x is None:
            return None, f"line {ln} holds no single `{arr}[i] = ...;` fill gpuadvise can read"
        for name, _ in ks.identifiers(x[1]):
            if ks.assignments(name, within=region.span):
                return None, f"`{name}` of the fill's index `{x[0]}` changes within the scan"
        index.append(x[0])
    decl = next((d for d in ks.declarations() for dd in d.declarators if dd.name == arr), None)
    typ = " ".join(decl.type.split()) if decl is not None else ""
    bound = ks.bindings.get(typ, typ)
    if bound not in _EXACT:
        return None, (
            f"the elements are `{bound or '?'}`, not integers: a float scan's additions "
            "regrouped would change its rounding"
        )
    rw = ks.rewrite()
    K.shuffle_block_scan(ks, rw, region, arr or "", (index[0], index[1]), typ, fill.pairs)
    return rw.diff(ctx.source_file), ""


def _array_at(ks: KernelSource, line: int) -> str | None:
    """The array the statement ``a[i] += a[j];`` at ``line`` adds into."""
    for s in ks.statements():
        if ks.line_at(s.start) != line or s.kind != "expression_statement":
            continue
        e = ks.expr((s.start, s.end))
        if e is not None and e.kind == "assignment" and e.args[0].stripped().kind == "subscript":
            return e.args[0].stripped().args[0].stripped().text
    return None
