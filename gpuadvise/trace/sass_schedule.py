"""A loop iteration's time as ptxas scheduled it, from the SASS's control bits (issue 29, GA309).

The dependent chains of :mod:`gpuadvise.ptx.chains` are the PTX's dataflow: an instruction waits
for the registers it reads and nothing else. A warp issues its SASS in order, and ptxas writes
with every instruction how many cycles the warp waits before it issues the next one (the stall
count: a fixed-latency result such as an ``ISETP``'s predicate is waited for this way, whether or
not the instruction that reads it is predicated off) and which scoreboards of variable-latency
results (a load, a ``MUFU``) it waits for first. For a warp that issues alone or nearly (a few
warps a scheduler), the stall counts along its path plus its waits for loads are its time. The
PTX does not show what ptxas adds there (HeCBench ga's GA309 hoist, docs/data/s12_fuse_ga309.md:
the variant's SASS loop issues 104 instructions an iteration where the PTX has 74, its 16 guards
computed again for want of predicate registers, each waited for 13 cycles, the 5 slots past the
trip count issued predicated off; 700 cycles an iteration against the kernel's 427, measured 684
and 490 on an H200, where the PTX chains gave 604 and 387).

What is taken: each innermost SASS loop (a backward ``BRA``'s range holding no other backward
branch) whose only branches inside are the back edge and exits (so one iteration is the range
run straight through, as the warp issues it), matched to a PTX loop by their global loads, line
by line (:func:`loop_schedules`): the loads of the PTX loop's own blocks (those no loop nested
in it holds) are on the same source lines as the SASS loop's, and the SASS loop has ``u`` times
as many on every line, ``u`` a whole number from 1 to :data:`MAX_UNROLL` (the PTX iterations one
SASS iteration holds: ptxas unrolled the loop again). Of the SASS loops that match one PTX loop,
the one with the largest ``u`` (the unrolled body, not its remainder) gives the PTX loop's cost
of an iteration: the SASS iteration's schedule over ``u``, put on the loop's header, its other
own blocks costing nothing (:func:`gpuadvise.ptx.chains.block_costs`). ptxas's versions of one
loop (kmeans find_membership's variant: the cluster loop without and with the loop for features
past 40) are told apart by their loads.

The schedule of an iteration (:func:`iteration_links`): one warp, in order, two passes (the
second counted, so that a wait on the first pass's loads counts as in a loop), each instruction
issued after its wait mask's scoreboards are ready, then ``max(stall, 1)`` cycles to the next.
Variable-latency results are ready at :data:`gpuadvise.ptx.chains.REFERENCE_CYCLES` of their
class (``LDG``: ``global``; ``LDS``: ``shared``; ``SHFL``: ``shuffle``; ``MUFU``: ``mufu``;
conversions: ``xu``; FP64 arithmetic: ``fp64``), others a few cycles. The time is returned as
links by latency class, so that the execution model weighs them with the device's latencies
(global loads by where they are served): each wait that stops the warp is one link of its
producer's class, unless that result was issued before the warp came back from its last wait
of the same class (its latency lay under that wait: only the cycles between the two issues are
left, fixed), and the rest (the stall counts less the cycles issued under a wait) is fixed, as
one-cycle links of the ``store`` class (one cycle on every device).

Which way it errs: a wait is counted in full at the device's latency less the cycles issued
since its load, which is short when a load's latency is shorter than those cycles (a load
issued an iteration ahead and served by the L1); the SASS loop's remainder iterations are
charged at the unrolled body's rate; loops with branches inside, and PTX loops no SASS loop
matches, keep the PTX's chains.

Pure: it reads the SASS, its control words and the PTX program it is given (no I/O).
"""

from __future__ import annotations

import struct
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gpuadvise.ptx.cfg import Program
from gpuadvise.ptx.chains import REFERENCE_CYCLES
from gpuadvise.ptx.loops import Loop
from gpuadvise.ptx.pipes import LATENCY_CLASSES
from gpuadvise.toolchain.sass import SassInstruction

__all__ = [
    "MAX_UNROLL",
    "Control",
    "control",
    "control_words",
    "iteration_links",
    "loop_schedules",
]

MAX_UNROLL = 16
"""The most PTX iterations taken in one SASS iteration (ptxas's unrolled bodies seen: 2-16)."""

FIXED = "store"
"""The latency class whose links are one cycle on every device: a schedule's fixed cycles."""


@dataclass(frozen=True)
class Control:
    """One instruction's control bits (sm_70 to sm_90): ``stall`` cycles before the next issues,
    the scoreboard its result releases (``write``; 7 none) and its operands' (``read``), the
    scoreboards it waits for first (``wait``, a 6-bit mask). The top 23 bits of the second
    64-bit word of the 128-bit instruction (Jia et al., "Dissecting the NVIDIA Volta GPU
    Architecture via Microbenchmarking", 2018)."""

    stall: int
    write: int
    read: int
    wait: int
    branch: int = 0

    def target(self, offset: int) -> int:
        """Where a ``BRA`` at ``offset`` goes (its relative target, from the instruction's
        first word: checked against nvdisasm's labels on every branch of the sm_90 cubins
        of docs/data/s12_fuse_ga309.md's kernels, 397 of 397)."""
        return offset + 16 + self.branch


def control(hi: int, lo: int = 0) -> Control:
    """The control bits of an instruction whose second 64-bit word is ``hi`` (and whose first
    is ``lo``: a branch's relative target, bits 16-23 and 32-63 of it)."""
    c = hi >> 41
    high = (lo >> 32) & 0xFFFFFFFF
    high -= (high & 0x80000000) << 1
    rel = (high << 8) + (((lo >> 16) & 0xFF) << 2)
    return Control(c & 0xF, (c >> 5) & 7, (c >> 8) & 7, (c >> 11) & 0x3F, rel)


def control_words(cubin: bytes, function: str) -> dict[int, Control]:
    """Offset -> control bits of every instruction of ``function`` (mangled) in ``cubin`` (its
    ``.text.<function>`` section, 16 bytes an instruction); empty when the cubin is no 64-bit
    ELF file or has no such section."""
    if len(cubin) < 64 or cubin[:4] != b"\x7fELF" or cubin[4] != 2:
        return {}
    try:
        (shoff,) = struct.unpack_from("<Q", cubin, 0x28)
        shentsize, shnum, shstrndx = struct.unpack_from("<HHH", cubin, 0x3A)
        heads = [struct.unpack_from("<IIQQQQ", cubin, shoff + i * shentsize) for i in range(shnum)]
    except struct.error:
        return {}
    if shstrndx >= len(heads):
        return {}
    names = heads[shstrndx][4]
    want = f".text.{function}".encode()
    for name, _type, _flags, _addr, offset, size in heads:
        end = cubin.find(b"\0", names + name)
        if cubin[names + name : end] != want:
            continue
        text = cubin[offset : offset + size]
        return {
            at: control(*struct.unpack_from("<QQ", text, at)[::-1])
            for at in range(0, len(text) - 15, 16)
        }
    return {}


_CLASS_OF = (
    (("LDG", "LD", "ATOMG", "ATOM", "LDL", "TLD", "TEX", "LDGSTS"), "global"),
    (("LDS", "LDSM", "ATOMS"), "shared"),
    (("SHFL",), "shuffle"),
    (("MUFU",), "mufu"),
    (("I2F", "F2I", "F2F", "I2I", "FRND", "POPC", "FLO", "BREV"), "xu"),
    (("DADD", "DMUL", "DFMA", "DSETP", "DMNMX"), "fp64"),
)
_OTHER_CYCLES = {"S2R": 20.0, "LDC": 14.0, "S2UR": 20.0, "CS2R": 4.0}


def _result(ins: SassInstruction) -> tuple[str | None, float]:
    """The latency class of a variable-latency result and its cycles at the reference
    latencies; (None, cycles) for a result waited for as a fixed time."""
    op = ins.base_opcode
    for ops, cls in _CLASS_OF:
        if op in ops:
            return cls, REFERENCE_CYCLES[cls]
    return None, _OTHER_CYCLES.get(op, 8.0)


def iteration_links(
    body: Sequence[SassInstruction], ctl: Mapping[int, Control]
) -> dict[str, float]:
    """One pass of a warp through ``body`` in order (the second of two), as links by latency
    class (see the module doc); empty when an instruction has no control bits."""
    if any(ins.offset not in ctl for ins in body):
        return {}
    t = 0.0
    ready: list[tuple[float, str | None, float]] = [(0.0, None, 0.0)] * 6
    links: dict[str, float] = {}
    resumed: dict[str, float] = {}  # when the warp last came back from a wait, by class
    for second in (False, True):
        start, links = t, {}
        for ins in body:
            c = ctl[ins.offset]
            for b in range(6):
                at, cls, issued = ready[b]
                if not (c.wait >> b & 1 and at > t):
                    continue
                if cls is not None and issued >= resumed.get(cls, 0.0):
                    links[cls] = links.get(cls, 0.0) + 1  # its own latency, not under the last
                    resumed[cls] = at
                t = at
            if c.write != 7:
                cls, cyc = _result(ins)
                ready[c.write] = (t + cyc, cls, t)
            if c.read != 7:
                ready[c.read] = (t + 4.0, None, t)
            t += max(c.stall, 1)
        if second:
            waited = sum(n * REFERENCE_CYCLES[cls] for cls, n in links.items())
            links[FIXED] = links.get(FIXED, 0.0) + max(t - start - waited, 0.0)
    return links


@dataclass(frozen=True)
class SassLoop:
    """An innermost SASS loop run straight through: its offsets ``lo``..``hi`` (the back edge),
    its global loads by source line, and one iteration's links (:func:`iteration_links`)."""

    lo: int
    hi: int
    loads: Mapping[int, int]
    links: Mapping[str, float]
    guarded: bool = False  # it holds a predicated global load (@P LDG)


_GLOBAL_LOADS = frozenset({"LDG", "LD"})


def _sass_loops(sass: Sequence[SassInstruction], ctl: Mapping[int, Control]) -> list[SassLoop]:
    branches = [
        (ins.offset, ctl[ins.offset].target(ins.offset))
        for ins in sass
        if ins.base_opcode == "BRA" and ins.offset in ctl
    ]
    backs = [(t, at) for at, t in branches if t <= at]
    out = []
    for lo, hi in backs:
        if any(lo <= a and b <= hi and (a, b) != (lo, hi) for a, b in backs):
            continue  # an outer loop
        if any(lo <= at < hi and lo <= t <= hi for at, t in branches):
            continue  # a branch inside: one pass is not what a warp issues
        body = [ins for ins in sass if lo <= ins.offset <= hi]
        loads = Counter(
            ins.line for ins in body if ins.base_opcode in _GLOBAL_LOADS and ins.line is not None
        )
        links = iteration_links(body, ctl)
        guarded = any(ins.predicate and ins.base_opcode in _GLOBAL_LOADS for ins in body)
        if loads and links:
            out.append(SassLoop(lo, hi, dict(loads), links, guarded))
    return out


def _own_blocks(lp: Loop, loops: Sequence[Loop]) -> frozenset[int]:
    """A loop's blocks that no loop nested in it holds."""
    inner = [o.blocks for o in loops if o.header != lp.header and o.blocks < lp.blocks]
    return lp.blocks.difference(*inner)


_NOT_GLOBAL = ("shared", "local", "const", "param", "tex", "surf")


def _ptx_loads(program: Program, blocks: frozenset[int]) -> Counter[int]:
    out: Counter[int] = Counter()
    for b in blocks:
        for i in program.blocks[b].body:
            ins = program.instrs[i]
            if ins.base not in ("ld", "ldu") or any(m in ins.mods for m in _NOT_GLOBAL):
                continue
            if ins.loc is not None and ins.loc.line > 0:
                out[ins.loc.line] += 1
    return out


def loop_schedules(
    program: Program,
    loops: Sequence[Loop],
    sass: Sequence[SassInstruction],
    ctl: Mapping[int, Control],
) -> dict[int, tuple[frozenset[int], dict[str, float]]]:
    """PTX loop header -> (the loop's own blocks, one PTX iteration's links by latency class as
    the SASS schedules it), for the PTX loops a SASS loop matches (see the module doc)."""
    sass_loops = _sass_loops(sass, ctl)
    if not sass_loops:
        return {}
    out: dict[int, tuple[frozenset[int], dict[str, float]]] = {}
    for lp in loops:
        own = _own_blocks(lp, loops)
        ptx = _ptx_loads(program, own)
        if not ptx:
            continue
        best: tuple[int, SassLoop] | None = None
        for sl in sass_loops:
            if set(sl.loads) != set(ptx):
                continue
            ratios = {sl.loads[line] / n for line, n in ptx.items()}
            if len(ratios) != 1:
                continue
            (ratio,) = ratios
            if ratio != int(ratio) or not 1 <= ratio <= MAX_UNROLL:
                continue
            if best is None or ratio > best[0]:
                best = (int(ratio), sl)
        if best is None:
            continue
        u, sl = best
        if u < 2 and not sl.guarded:
            continue  # the SASS loop is the PTX's, iteration for iteration: its chain stands
        links = {c: n / u for c, n in sl.links.items() if c in LATENCY_CLASSES}
        out[lp.header] = (own, links)
    return out
