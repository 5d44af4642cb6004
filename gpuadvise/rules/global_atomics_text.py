"""GA208's words for the L2's serial term that decides (:class:`SerialAtomics`), in its message
and its estimate's method: the term the point uses, with its count and rate."""

from __future__ import annotations

from gpuadvise.model.atomic_serial import REGION_BYTES, SerialAtomics, update_ns
from gpuadvise.model.atomic_units import FULL_SECTOR_NS, LINE_NS, UNIT_BYTES, WORD_SECTOR_NS
from gpuadvise.rules.global_atomics import HotAddress

__all__ = ["estimate_text", "finding_text", "tiles_advice"]


def _unit_words(h: HotAddress) -> str:
    sectors, lines, words = h.unit_bins
    return (
        f"{words} words in {sectors} sectors of {lines} lines; a request {LINE_NS:.2f} ns a "
        f"line and {FULL_SECTOR_NS:.2f} ns a sector it updates whole, {WORD_SECTOR_NS:.2f} in "
        "part"
    )


def finding_text(c: SerialAtomics, h: HotAddress, scale: float) -> str:
    """What takes the L2 longest, for GA208's message (``scale``: the trace's)."""
    where = f"`{h.buffer}`" if h.buffer else "one address"
    if c.by_unit:
        pairs = h.unit_sectors * (scale if h.unit_wide else 1.0)
        return (
            f"{pairs:.0f} (warp-level request, 32-byte sector) pairs on one {UNIT_BYTES}-byte "
            f"unit of {where} over the launch (two {REGION_BYTES}-byte regions, whose requests "
            f"the L2 takes one after another: {_unit_words(h)})"
        )
    if c.by_steps:
        return (
            f"{h.launch_region_requests(scale):.0f} warp-level requests on one "
            f"{REGION_BYTES}-byte region of {where} over the launch, each applying its "
            f"lanes on one word one after another ({c.steps:.0f} updates in turn, "
            f"{c.lanes:.1f} lanes of a request on the hottest address, from "
            f"{h.launch_region_ctas(scale):.0f} CTAs) at about "
            f"{c.update_s * 1e9:.2f} ns each"
        )
    if c.by_line:
        return (
            f"{c.line_requests:.0f} requests on the 128-byte lines of one "
            f"{REGION_BYTES}-byte region of {where} over the launch (a warp-level request "
            f"once per line it reaches; {h.region_addresses} addresses, from "
            f"{h.launch_region_ctas(scale):.0f} CTAs), which the L2 takes one after "
            f"another at about {h.request_ns():.2f} ns each"
        )
    return (
        f"{c.updates:.0f} updates of one address of {where} over the launch "
        f"({c.lanes:.1f} lanes of a warp-level request, from "
        f"{h.launch_ctas(scale):.0f} CTAs), which the L2 applies one after another "
        f"at about {update_ns(h.opcode):.2f} ns each"
    )


def estimate_text(c: SerialAtomics, h: HotAddress) -> str:
    """The serial term of GA208's estimate, in words."""
    if c.by_unit:
        return (
            f"the L2's requests on one {UNIT_BYTES}-byte unit ({_unit_words(h)}): "
            f"{c.unit_s * 1e6:.1f} us"
        )
    if c.by_steps:
        return (
            f"the L2's {c.steps:.0f} updates in turn on one {REGION_BYTES}-byte region "
            f"(each request's lanes on one word one after another) at "
            f"{c.update_s * 1e9:.2f} ns each"
        )
    if c.by_line:
        return (
            f"the L2's {c.line_requests:.0f} requests on the lines of one "
            f"{REGION_BYTES}-byte region at {h.request_ns():.2f} ns each"
        )
    return (
        f"the L2's {c.updates:.0f} serial updates of one address at "
        f"{update_ns(h.opcode):.2f} ns each"
    )


def tiles_advice(wave: int) -> str:
    """GA208's advice where each CTA makes one atomic on the address already and the kernel has
    no loop a smaller grid could use (a block reduction, then ``atomicAdd(error, s)``; a stream
    compaction's ``l_n = atomicAdd(nres, l_n)``): fewer CTAs, each doing the work of several
    and its atomic once (``wave``: the CTAs of one wave)."""
    return (
        "the kernel makes one atomic per CTA already: give each CTA the work of several of its "
        "CTAs (a loop over their tiles, or a grid-stride loop over the data, launched with about "
        f"{wave} CTAs, one wave), each thread's partial kept in a register across them and the "
        "CTA's reduction and its atomic made once, after the loop; where the atomic's returned "
        "value places the CTA's output (an offset into a compacted array), count the CTA's "
        "whole share first and take one offset for all of it (not automatic: splitting the "
        "kernel's body at its reduction is the author's rewrite; the estimate is for one atomic "
        "per CTA of one wave)"
    )
