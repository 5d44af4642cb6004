"""What GA207 (contended atomics) and GA201 (bank conflicts) share: the source lines whose
shared-memory atomics update few addresses per warp-level request (from the trace), which GA207
reports and GA201 leaves alone (their wavefronts are updates of one word, not words of one bank);
and the chain of a compare-and-swap loop, which is how ptxas makes the atomics sm_90 has no
shared-memory instruction for (a float add: ``ATOMS.CAST.SPIN`` in a loop); and the warp
aggregation both rules (and GA208) offer as their automatic fix.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass, replace

import numpy as np

from gpuadvise.model.banks import atomic_contention, record_wavefronts
from gpuadvise.model.execution import KernelWork
from gpuadvise.rules.context import RuleContext
from gpuadvise.rules.details import FindingDetails
from gpuadvise.rules.findings import Finding, Variant
from gpuadvise.source import fixkit_atomics
from gpuadvise.toolchain.sass import SassMemLine
from gpuadvise.trace.access import AccessTrace, Kind, Space

__all__ = [
    "ATOMICS",
    "CAS_ROUND_TRIP",
    "Contention",
    "cas_lines",
    "contended_lines",
    "serial_updates",
    "warp_aggregable",
    "warp_aggregation_variant",
    "with_aggregation",
    "with_serial_updates",
]

CAS_ROUND_TRIP = {"shared": 2.0, "fp32": 1.0, "int": 1.0}
"""The links of one update through a compare-and-swap loop, by latency class: the shared load of
the old value, the operation, the CAS (a shared access whose result decides), the test that
ends the loop. One lane's update of an address must see the one before it, so the updates of
one address follow each other at this round trip, whichever warp of the CTA makes them."""

AGGREGATION_COMMON = {"int": 4.0, "xu": 2.0, "branch": 2.0}
"""The warp instructions the fix kit's warp aggregation (``gpuadvise_warp_atomicAdd`` and
friends, as ptxas compiles it for sm_90) runs once per warp-level request besides its match:
``VOTE.ANY`` (the active mask), ``S2R SR_LANEID``, ``BREV``/``FLO`` (the leader), the test of a
full match and its branch."""

MATCH_PER_ADDRESS = 2.6
"""``MATCH.ANY.U64``'s cost on the SM, in shuffle-pipe warp instructions, per distinct address
among the lanes: measured on an H200 (2026-11-30, .gpu/s11-bounds/atomics.cu, 64 warps an SM):
21.0 cycles a warp for 8 addresses (a shuffle: 0.92)."""

AGGREGATION_CHAIN_COMMON = {"shuffle": 4.0, "int": 4.0, "xu": 2.0}
"""The links of the common part on a warp's chain: the match (37 cycles measured alone, a
shuffle's class), the leader and the test, and the reconvergence around the branch."""

AGGREGATION_BUTTERFLY = {"shuffle": 5.0, "int": 5.0}
"""The whole warp on one address: five ``SHFL.BFLY`` and the operation after each, dependent;
pipes and chain alike. With :data:`AGGREGATION_CHAIN_COMMON`: 24 x 9 + 4 x 9 + 12 x 2 = 276
cycles at the H200's latencies, measured 276 for one warp an SM (``atomicMax`` of 32 lanes on
one word); 7.6 cycles a request on the SM's shuffle pipe, measured 7.8 at 64 warps an SM."""

AGGREGATION_PER_LANE = {"shuffle": 2.0, "int": 6.0, "branch": 2.0}
"""Several addresses in a request: each lane's value is one iteration of its address's loop,
``__shfl_sync(peers, ...)`` under a partial mask: ptxas checks the mask first (``MATCH.ANY``,
``REDUX.OR``, ``VOTEU.ANY``, ``LOP3``, ``BRA.DIV``), shuffles (``SHFL.IDX``), adds and steps;
the groups of one warp, under different masks, run one after another (the ``BRA.DIV`` path),
so a request's iterations are its active lanes', in turn: ten warp instructions each."""

AGGREGATION_CHAIN_PER_LANE = {"shuffle": 1.0, "int": 3.0}
"""One lane's iteration on the chain: the shuffle and the steps around it. Measured on an
H200 (8 addresses of about 4 lanes, 32 lanes): 1286 cycles a request for one warp an SM, where
the common part and 32 iterations give 136 + 32 x 36 = 1288; 86.3 cycles a request at 64 warps
an SM, where the issue of 32 x 10 + 9 instructions gives 82 and the shuffle pipe 85."""

ATOMICS = (int(Kind.ATOMIC), int(Kind.REDUCTION))
"""The access kinds of atomics and reductions (``red``), as ints."""


@dataclass(frozen=True)
class Contention(FindingDetails):
    """A line's shared-memory atomics over the traced CTAs: the warp-level requests, their active
    lanes and distinct addresses, the wavefronts they take and the wavefronts one atomic per
    distinct address would take (the warp reduction's), and the instructions."""

    requests: int
    lanes: int
    addresses: int
    wavefronts: int
    after_wavefronts: int
    insts: tuple[int, ...]
    compare_and_swap: bool = False


def cas_lines(sass: tuple[SassMemLine, ...]) -> set[tuple[str | None, int | None]]:
    """The source lines (innermost, as the trace has them) whose shared-memory atomics ptxas
    made a compare-and-swap loop (``ATOMS.CAS``, ``ATOMS.CAST.SPIN``)."""
    return {(m.file, m.line) for m in sass if any(op.startswith("ATOMS.CAS") for op in m.opcodes)}


def serial_updates(c: Contention, ctas: int) -> tuple[float, float]:
    """Per CTA, the updates of one address that follow each other: every lane's (the lanes
    over the distinct addresses of a request), and with one atomic per warp-level request and
    address (a warp reduction first: one per request)."""
    if ctas <= 0 or c.requests <= 0 or c.addresses <= 0:
        return 0.0, 0.0
    per_request = c.addresses / c.requests
    return c.lanes / ctas / per_request, c.requests / ctas


def with_serial_updates(work: KernelWork, updates: float) -> KernelWork:
    """``work`` whose CTAs wait for ``updates`` compare-and-swap round trips of one address in
    turn (:data:`CAS_ROUND_TRIP` each; the one the chain already has for the atomic counts)."""
    extra = max(updates - 1.0, 0.0)
    chain = dict(work.chain)
    for k, n in CAS_ROUND_TRIP.items():
        chain[k] = chain.get(k, 0.0) + extra * n
    return replace(work, chain=chain, chain_unordered=None)


def with_aggregation(work: KernelWork, c: Contention, ctas: int) -> KernelWork:
    """``work`` with the fix kit's warp aggregation run at each of the line's warp-level requests
    (``c``, over ``ctas`` traced CTAs), on the pipes (warp instructions a CTA) and on the
    critical warp's chain (its share of the CTA's requests: a warp's requests are its own, one
    after another): :data:`AGGREGATION_COMMON` and the match (:data:`MATCH_PER_ADDRESS` for
    each of the request's addresses) each, then the butterfly (:data:`AGGREGATION_BUTTERFLY`)
    where a request's 32 lanes name one address, else every active lane's iteration
    (:data:`AGGREGATION_PER_LANE`, :data:`AGGREGATION_CHAIN_PER_LANE`). The atomics themselves
    stay (the bank model's wavefronts, one per address after)."""
    if ctas <= 0 or c.requests <= 0:
        return work
    per_cta = c.requests / ctas
    per_warp = per_cta / max(work.warps_per_cta, 1)
    lanes = c.lanes / c.requests
    addresses = c.addresses / c.requests
    butterfly = c.addresses == c.requests and c.lanes == 32 * c.requests
    pipe_body = (
        AGGREGATION_BUTTERFLY
        if butterfly
        else {k: v * lanes for k, v in AGGREGATION_PER_LANE.items()}
    )
    chain_body = (
        AGGREGATION_BUTTERFLY
        if butterfly
        else {k: v * lanes for k, v in AGGREGATION_CHAIN_PER_LANE.items()}
    )
    match = {"shuffle": MATCH_PER_ADDRESS * addresses}
    pipes = dict(work.pipes)
    for part in (AGGREGATION_COMMON, match, pipe_body):
        for k, v in part.items():
            pipes[k] = pipes.get(k, 0.0) + v * per_cta
    # the instructions one warp issues: the match is one
    added = sum(AGGREGATION_COMMON.values()) + 1.0 + sum(pipe_body.values())
    chain = dict(work.chain)
    for part in (AGGREGATION_CHAIN_COMMON, chain_body):
        for k, v in part.items():
            chain[k] = chain.get(k, 0.0) + v * per_warp
    return replace(
        work,
        pipes=pipes,
        chain=chain,
        chain_unordered=None,
        critical_instructions=work.critical_instructions + added * per_warp,
    )


_Lines = dict[tuple[str | None, int | None], Contention]
_LINES: dict[int, tuple[weakref.ref[AccessTrace], _Lines]] = {}


def contended_lines(trace: AccessTrace, min_lanes: float) -> _Lines:
    """The source lines whose shared-memory atomics are contended: on average at least
    ``min_lanes`` active lanes of a warp-level request per distinct address. Shared with GA201,
    which leaves these lines to this rule (their wavefronts are updates of one word, not words
    of one bank). The lines' counts are computed once per trace (both rules ask)."""
    got = _LINES.get(id(trace))
    if got is None or got[0]() is not trace:
        got = (weakref.ref(trace), _atomic_lines(trace))
        _LINES[id(trace)] = got
        weakref.finalize(trace, _LINES.pop, id(trace), None)
    return {k: c for k, c in got[1].items() if c.addresses and c.lanes / c.addresses >= min_lanes}


def _atomic_lines(trace: AccessTrace) -> _Lines:
    """Every source line's shared-memory atomics, each line as one :class:`Contention`."""
    recs = trace.records
    sel = (recs["space"] == int(Space.SHARED)) & np.isin(recs["kind"], ATOMICS)
    idx = np.flatnonzero(sel)
    if not len(idx):
        return {}
    atom = recs[idx]
    lanes, addrs = atomic_contention(atom)
    wf, _ = record_wavefronts(atom)
    after = np.where(addrs > 0, -(-addrs // 32), 0)
    out: dict[tuple[str | None, int | None], Contention] = {}
    insts = atom["inst"].astype(np.int64)
    for inst in np.unique(insts):
        key = trace.line_of(int(inst))
        m = insts == inst
        c = out.get(key)
        add = Contention(
            int(m.sum()),
            int(lanes[m].sum()),
            int(addrs[m].sum()),
            int(wf[m].sum()),
            int(after[m].sum()),
            (int(inst),),
        )
        out[key] = (
            add
            if c is None
            else Contention(
                c.requests + add.requests,
                c.lanes + add.lanes,
                c.addresses + add.addresses,
                c.wavefronts + add.wavefronts,
                c.after_wavefronts + add.after_wavefronts,
                c.insts + add.insts,
            )
        )
    return out


def warp_aggregable(ctx: RuleContext, finding: Finding) -> str | None:
    """Why the fix kit cannot make the atomics of the finding's line warp-aggregated (None:
    it can)."""
    if finding.line is None or not ctx.same_file(finding.file):
        return "the atomic is in another file"
    got = fixkit_atomics.atomic_sites(ctx.kernel_source.tree, finding.line)
    return got if isinstance(got, str) else None


def warp_aggregation_variant(
    ctx: RuleContext, finding: Finding, advice: str, needs_measurement: bool = False
) -> Variant:
    """The atomics the finding's line runs made warp-aggregated through the fix kit
    (:func:`gpuadvise.source.fixkit_atomics.warp_aggregate`): automatic, its outputs verified
    against the kernel's; display-only with ``advice`` and the reason where the kit cannot.
    ``needs_measurement``: ``--fix`` applies it only where a GPU measured it faster (shared
    memory's own atomics: the match and the shuffles can cost more than they save)."""
    why = warp_aggregable(ctx, finding)
    if why is not None or finding.line is None:
        return Variant("display-only", f"{advice} (not rewritten: {why})")
    ks = ctx.kernel_source
    rw = ks.rewrite()
    got = fixkit_atomics.warp_aggregate(ks.tree, rw, finding.line)
    diff = None if isinstance(got, str) else rw.diff(ctx.source_file)
    if isinstance(got, str) or diff is None:
        why = got if isinstance(got, str) else "no change"
        return Variant("display-only", f"{advice} (not rewritten: {why})")
    returns = any(n.endswith("_old") for n in got)
    return Variant(
        "automatic-and-verified",
        "warp-aggregated atomics ("
        + ", ".join(f"`{n}`" for n in got)
        + ", defined before the kernel): the active lanes that update one address "
        "(__activemask, __match_any_sync) combine their values by shuffles and the lowest of "
        "them does one atomic"
        + (
            "; each lane gets back the value a serial order of the lanes (lowest first) "
            "would have given it"
            if returns
            else ""
        )
        + ". A float sum's rounding changes with the order of its additions; the outputs are "
        "checked against the kernel's within the spec's tolerance"
        + (
            ". Whether it pays on shared memory is the GPU's to say (measured on an H200: "
            "2.47x and 3.90x on a float sum, 0.53x and 0.79x on bins and a maximum): --fix "
            "applies it only where a GPU measured it faster"
            if needs_measurement
            else ""
        ),
        diff=diff,
        needs_measurement=needs_measurement,
    )
