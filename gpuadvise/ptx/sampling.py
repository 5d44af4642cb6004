"""Long loops in the emulator: the first iterations run, the rest skipped, the runs weighted.

A correlation kernel (PolyBench's ``corr_kernel``: one thread per column, loops over 2048 x 2048
with compile-time bounds) executes some 40 million PTX instructions per warp; the emulator, at a
few numpy operations per instruction, gave up after 2 million (36 s, 2.8 GB) and blamed "a loop
bound read from poisoned or random data". Every iteration of such a loop makes the same accesses
a fixed stride further on: its first iterations show the access pattern, and counts need only
how many iterations there are. :class:`LoopSampler` does that, per warp:

1. **Look.** Each loop the emulator may sample (:attr:`gpuadvise.ptx.loops.Loop.sampleable`: one
   latch, no other exit, no barrier, an integer exit test ``setp.CMP a, b``) has the operands
   of its exit test recorded at every latch (the setp's op is wrapped); one lane per warp (its
   first active one) is kept three iterations deep. From the third iteration on, where both
   operands moved by a constant step, the iterations left are solved for
   (:func:`gpuadvise.ptx.loops.first_exit`): the instance is *hot* when the warp's
   instructions so far plus those iterations at the last one's cost pass ``sample_above``
   (:mod:`gpuadvise.trace.emulate` sets it to ``max_instructions / 8``). From the
   :data:`DECIDE_AT`-th iteration a hot instance is sampled, and so is a loop inside a hot
   instance of another whose own rest costs more than ``sample_above / INNER_SHARE`` (the
   correlation's inner loop over the rows, run in every iteration of the outer one).
2. **Record.** For three iterations, every lane's operands and every integer register the
   loop writes are kept at the iteration's end.
3. **Skip.** Each lane's iterations left are solved for; the lane with the fewest left bounds
   the skip: ``m * p`` iterations, ``m + 1`` periods of ``p`` fitting before it leaves (``p``
   below). Each integer
   register that moved by a constant step in a lane (a counter, an index, an address) moves on
   by that step times the iterations skipped; the others (a sum, a loaded value) keep their
   values: the outputs are not the kernel's (:attr:`LoopSampler.sampled`; they are then never
   compared), while the addresses the loop and the code after it compute from its counters are
   right.
4. **Weigh.** The ``p`` iterations run after the skip stand for the skipped ones and
   themselves: each weighs ``m + 1`` (the warp's multiplier, :attr:`LoopSampler.wmul`, is
   multiplied for them, and nested loops multiply), its records carry ``extra = multiplier - 1``
   (:data:`gpuadvise.ptx.access.RECORD`) and its instruction counts (SIMT counts, lane
   instructions) count ``multiplier`` times. Every lane is in the loop for all of those
   iterations, so warp and lane counts are those of the full run where the loop's accesses move
   by a fixed step. ``p`` consecutive iterations take every alignment the loop's accesses take
   through a 128-byte line, at most :data:`PERIOD` (every alignment a 4-byte stride takes through
   a 32-byte sector): where every address register the loop (or a loop inside it) writes moved by
   the same step of ``s`` bytes in every lane over the recorded iterations, ``p`` is ``128 /
   gcd(s, 128)`` capped at ``PERIOD`` (:func:`_periods`): 1 for the outer loops of a nest whose
   accesses move by whole lines or not at all (HeCBench contraction's loops over ``a`` and
   ``b``, each iteration a whole instance of the inner loop), where 8 iterations ran 8 alike.
   An innermost loop, a texture or surface access, a call, a branch or predicate on a value
   the loop changes (:func:`_address_regs`), a lane whose step differs or does not hold, keep
   ``PERIOD``. The lanes with more iterations left run them as they come.

**Over the sample's cost.** A CTA whose loops are long for the emulator but not for one warp
(HeCBench perplexity's ``sigmas_kernel``: its lanes' bisection ends after different epochs, and
the last few lanes of a warp run 100 epochs of two 200-iteration loops a step at a time) cannot
be cut by the CTAs the default sample keeps: it is the first one, always run. Its batch sets
:attr:`LoopSampler.forced` once its emulation has cost the default sample's bound
(:attr:`gpuadvise.ptx.emulator.Batch.cost_cap`, :meth:`LoopSampler.force`): from then on every
instance of a loop whose results steer nothing is hot (its rest need not take the warp past
``sample_above``), so each instance with ``2 * PERIOD + 2`` iterations left is sampled as above,
from its :data:`DECIDE_AT`-th iteration. A loop whose skipped iterations would leave a value
wrong that reaches a branch, a guard or an address (:mod:`gpuadvise.ptx.steering`: sigmas'
sums decide its bisection and its epoch loop's ``break``; sampled, its lanes ran 47.5 M lane
instructions against the full run's 29.4 M) runs in full as before, and an instance forced hot
does not make the loops inside it long. The sample ends with that CTA only where a loop was
sampled so (:attr:`LoopSampler.forced_skips`).

A skip that cannot be made (a lane's test did not move by a fixed step) is not tried again for
:data:`QUIET` iterations. Loops that cannot be sampled run in full, as before; a warp that still
passes ``max_instructions`` stops the emulation with the reason (:func:`budget_reason`).

**Doomed.** A loop that is not sampled in this run but whose only exit is an integer test
(:attr:`gpuadvise.ptx.loops.Loop.countable`: one that holds a barrier, say HeCBench's
``sosfilt``, a million iterations of a CTA-wide recurrence) is looked at the same way: once a
warp's first active lane has had operands moving by fixed steps for :data:`DOOM_AFTER`
iterations in a row and still continues, the iterations it has left, each at least the
instructions of the blocks every iteration runs (:attr:`~gpuadvise.ptx.loops.Loop.floor`), take
the warp past ``max_instructions``: the emulation stops there with the same error it would have
reached (``sosfilt``: after 86 s of CPU) and says how many iterations were left. The look
starts once a warp of the batch has run a :data:`ARM_SHARE`-th of the budget.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from gpuadvise.ptx.loops import (
    Loop,
    continues,
    first_exit,
    first_exit_one,
    innermost,
    wrap64,
)
from gpuadvise.ptx.parser import Addr, Imm, Reg
from gpuadvise.ptx.values import count_true

if TYPE_CHECKING:
    from gpuadvise.ptx.cfg import Program

__all__ = ["DECIDE_AT", "DOOM_AFTER", "INNER_SHARE", "LoopSampler", "SampledLoop", "budget_reason"]

# any/all of the small per-warp arrays at every latch: a count is cheaper than numpy's reductions
_nz = count_true
_add = np.add.reduce  # (ndarray.sum's own reduction, without its Python wrapper)

DECIDE_AT = 6
"""A loop instance is sampled from its 6th iteration on (the 8th when the registers' steps are
read): its first iterations run in full, as on the GPU."""

PERIOD = 8
"""After a skip, at most this many iterations run, each weighted for its share of those
skipped: the accesses of a loop whose index moves by one 4-byte element an iteration take 8
alignments through a 32-byte sector, and one iteration alone would stand for one of them (fewer
run where the accesses move by multiples of 32 bytes: :func:`_periods`)."""

QUIET = 16
"""Iterations a warp's loop instance is not looked at again after a skip could not be made (a
lane's test did not move by a fixed step) or a prediction failed."""

INNER_SHARE = 64
"""Inside a loop instance that is long for the warp (from its 3rd iteration on, where its
remaining iterations are known to take the warp past ``sample_above``), a loop whose own
remaining iterations cost more than ``sample_above / 64`` instructions is sampled too."""

DOOM_AFTER = 16
"""Iterations in a row whose exit-test operands moved by the same steps before a loop that is not
sampled is judged to take a warp past the budget (the stop then comes at once, not at the
budget)."""

ARM_SHARE = 64
"""A loop this run does not sample is looked at for the early stop only once a warp of the batch
has run a 64th of the budget: the look costs numpy calls at every latch and a copy of the test's
operands at every execution, which loops that end far under the budget (most) need not pay; a
doomed loop stops that much later."""

_MAX_WEIGHT = (1 << 32) - 1  # RECORD.extra is a uint32: a record stands for at most this many

_NO_DEST = frozenset({"st", "red", "bar", "barrier", "bra", "brx", "ret", "exit", "membar",
                      "fence", "prefetch", "prefetchu", "sust", "cp", "trap", "pmevent",
                      "call", "griddepcontrol", "setp"})  # fmt: skip


@dataclass
class SampledLoop:
    """What was skipped of one loop, over the batches: where, how many warp iterations ran and
    how many they stood for."""

    where: str
    bound: str
    warps: int = 0
    ran: int = 0  # iterations run by the sampled warps' instances
    stood_for: int = 0  # iterations those instances had


@dataclass
class _Watch:
    """Per-warp state of one sampleable loop."""

    loop: Loop
    regs: tuple[str, ...]  # integer registers the loop writes
    seen: dict[str, np.ndarray] = field(default_factory=dict)  # the test's operands, per lane
    cnt: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    # the test's operands of one lane per warp (its first active one), three iterations deep:
    # the cheap look every latch takes, (2, 3, warps)
    head: np.ndarray = field(default_factory=lambda: np.zeros((0, 0, 0), np.int64))
    # per lane, for the warps being sampled: the operands and the registers at iteration ends,
    # three iterations deep, (2, 3, lanes) and name -> (3, lanes)
    ring: np.ndarray = field(default_factory=lambda: np.zeros((0, 0, 0), np.int64))
    snaps: dict[str, np.ndarray] = field(default_factory=dict)
    since: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # flagged at (0)
    depth: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # stack at latch 1
    quiet: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))  # no flag before
    ff_k: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    ff_at: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    prev: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    busy: bool = False  # some warp has a count
    # per warp: the instance is long (its remaining iterations take the warp past the budget):
    # the loops inside it are sampled sooner (INNER_SHARE)
    hot: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    outer: tuple[_Watch, ...] = ()  # the watched loops that hold this one
    # once forced (LoopSampler.force): whether this loop is sampled past the cost bound (its
    # results steer nothing, gpuadvise.ptx.steering), and per warp whether its instance is long
    # by its own instructions (the hot a loop inside it reads: a forced instance does not make
    # the loops inside it long)
    free: bool = False
    long: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    armed: bool = True  # its test's operands are copied at every execution
    # the registers the loop writes that its (and its inner loops') memory accesses take their
    # addresses from; None (its skips keep PERIOD): an innermost loop, an access whose address
    # cannot be read so, a test of a value the loop changes (:func:`_address_regs`)
    addrs: tuple[str, ...] | None = ()
    # per warp: the iterations run after its skip (PERIOD, or fewer: :func:`_periods`)
    ff_p: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))


@dataclass
class _Doom:
    """Per-warp state of a countable loop this run does not sample: its exit test's operands
    (one lane per warp, three iterations deep) and how many latches in a row they moved by the
    same steps."""

    loop: Loop
    seen: dict[str, np.ndarray] = field(default_factory=dict)
    cnt: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    head: np.ndarray = field(default_factory=lambda: np.zeros((0, 0, 0), np.int64))
    streak: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    busy: bool = False
    # looked at (and the test's operands copied) only once a warp has run a share of the
    # budget (ARM_SHARE): loops that end far under it cost nothing
    armed: bool = False


@dataclass(frozen=True)
class Doomed:
    """The warp whose loop would take it past the budget: at iteration ``iteration`` of the
    instance, its test compared ``counter`` with ``bound``; ``left`` iterations to go, each at
    least ``floor`` instructions, after ``count`` instructions."""

    loop: Loop
    iteration: int
    counter: int
    bound: int
    left: int
    floor: int
    count: int


class LoopSampler:
    """The long-loop sampling of one batch (see the module docstring). The batch calls
    :meth:`hook` for each op it builds, :meth:`entering` before and :meth:`after_block` after
    each block a group of warps runs (before its terminator), and reads :attr:`wmul` /
    :attr:`extra` for the weights (:meth:`weigh` for its counts)."""

    def __init__(
        self,
        program: Program,
        loops: Sequence[Loop],
        regs: dict[str, np.ndarray],
        nwarps: int,
        sample_above: int,
        where: Any,
        report: dict[int, SampledLoop],
        budget: int = 0,
        stop: Callable[[int], None] | None = None,
    ) -> None:
        self.program = program
        self.regs = regs
        self.nwarps = nwarps
        self.sample_above = sample_above
        self.where = where
        self.report = report
        self.wmul = np.ones(nwarps, np.int64)
        self.extra = np.zeros(nwarps, np.uint32)  # wmul - 1, as the records carry it
        self.weighted = False
        self.changes = 0  # bumps when wmul changes (the record templates depend on it)
        self.sampled = False
        # set by the batch once its emulation has cost what its sample may (the default
        # sample's first CTA, :attr:`gpuadvise.ptx.emulator.Batch.cost_cap`, :meth:`force`):
        # from then on every instance of a loop whose results steer nothing is long, whatever
        # the warp's instructions (see the module docstring)
        self.forced = False
        self.forced_skips = 0  # skips of such loops' instances since
        n = nwarps * 32
        self.watches: dict[int, _Watch] = {}  # latch block -> its loop's watch
        self.by_setp: dict[int, _Watch | _Doom] = {}
        # loops this run does not sample but can count ahead: latch block -> its state
        self.dooms: dict[int, _Doom] = {}
        self.budget = budget
        self.stop = stop
        self.doomed: Doomed | None = None
        if budget > 0 and stop is not None:
            for lp in loops:
                if (
                    lp.countable
                    and lp.setp is not None
                    and (not lp.sampleable or sample_above <= 0)
                ):
                    d = _Doom(lp)
                    d.cnt = np.zeros(nwarps, np.int64)
                    d.head = np.zeros((2, 3, nwarps), np.int64)
                    d.streak = np.zeros(nwarps, np.int64)
                    self.dooms[lp.latch] = d
                    self.by_setp[lp.setp] = d
        if sample_above <= 0:
            return
        for lp in loops:
            if not lp.sampleable or lp.setp is None:
                continue
            w = _Watch(lp, _int_regs_written(program, lp, regs))
            w.addrs = _address_regs(program, lp, loops, w.regs)
            w.cnt = np.zeros(nwarps, np.int64)
            w.head = np.zeros((2, 3, nwarps), np.int64)
            w.ring = np.zeros((2, 3, n), np.int64)
            for name in ("since", "quiet", "ff_k", "ff_at", "ff_p", "prev", "depth"):
                setattr(w, name, np.zeros(nwarps, np.int64))
            w.hot = np.zeros(nwarps, bool)
            w.long = np.zeros(nwarps, bool)
            self.watches[lp.latch] = w
            self.by_setp[lp.setp] = w
        for w in self.watches.values():
            w.outer = tuple(
                o for o in self.watches.values() if o is not w and w.loop.blocks < o.loop.blocks
            )

    def force(self, steering: frozenset[int]) -> None:
        """From now on, every instance of a watched loop whose latch is not in ``steering``
        (:func:`gpuadvise.ptx.steering.steering_loops`) is long (see the module docstring)."""
        self.forced = True
        for latch, w in self.watches.items():
            w.free = latch not in steering
            np.copyto(w.long, w.hot)

    # -- building ---------------------------------------------------------------------------------

    def hook(self, index: int, op: Any) -> Any:
        """``op`` of instruction ``index``, recording its operands first when it is a watched
        loop's exit test."""
        w = self.by_setp.get(index)
        if w is None:
            return op
        names = [x.name for x in (w.loop.a, w.loop.b) if isinstance(x, Reg)]
        regs = self.regs
        seen = w.seen

        def watched(mask: Any) -> None:
            if not w.armed:
                op(mask)
                return
            for name in names:
                src = regs[name]
                buf = seen.get(name)
                if buf is None or buf.shape != src.shape or buf.dtype != src.dtype:
                    seen[name] = src.copy()
                else:
                    np.copyto(buf, src)
            op(mask)

        return watched

    # -- running ----------------------------------------------------------------------------------

    def entering(self, p: int, ws: np.ndarray, depth: np.ndarray | None = None) -> None:
        """Warps ``ws`` (``depth``: their reconvergence stacks' depth; None: 0) are about to
        run block ``p``: the loop instances it is outside of are over for them (their weight is
        taken back before the block's records are written), unless they run it deeper in their
        stack than at the loop's latch: the lanes that left the loop run their side first while
        the others are still in it."""
        for w in self.watches.values():
            if w.busy and p not in w.loop.blocks:
                self._left(w, ws if depth is None else ws[depth <= w.depth[ws]])
        for d in self.dooms.values():
            # a warp outside the loop starts a new instance when it comes back (one whose
            # lanes that left run first starts over too: the stop only comes later)
            if d.busy and p not in d.loop.blocks:
                d.cnt[ws] = 0
                d.streak[ws] = 0
                d.busy = bool(_nz(d.cnt))

    def after_block(
        self,
        p: int,
        ws: np.ndarray,
        masks: np.ndarray | None,
        count: np.ndarray,
        depth: np.ndarray | None = None,
    ) -> None:
        """Block ``p`` ran for warps ``ws`` (``masks``: their active lanes, None: all), before
        its terminator; ``count``: each of those warps' instructions so far. At a watched
        loop's latch: look, flag, skip (see the module docstring)."""
        w = self.watches.get(p)
        if w is not None:
            self._at_latch(w, ws, masks, count, depth)
        d = self.dooms.get(p)
        if d is not None:
            self._doom_latch(d, ws, masks, count)

    def weigh(self, ws: np.ndarray, masks: np.ndarray | None) -> tuple[int, int]:
        """(warp executions, active lanes) that warps ``ws`` running one block stand for."""
        wm = self.wmul[ws]
        if masks is None:
            total = int(_add(wm))
            return total, 32 * total
        return int(_add(wm)), int(_add(np.bitwise_count(masks).astype(np.int64) * wm))

    def _left(self, w: _Watch, ws: np.ndarray) -> None:
        """Warps ``ws`` ran a block outside ``w``'s loop: their instance is over."""
        done = ws[w.cnt[ws] > 0]
        if not done.size:
            return
        k = w.ff_k[done]
        if _nz(k):
            fx = done[k > 0]
            self.wmul[fx] //= w.ff_k[fx]
            self._weights_changed()
        for arr in (w.cnt, w.since, w.quiet, w.ff_k):
            arr[done] = 0
        w.hot[done] = False
        w.long[done] = False
        w.busy = bool(_nz(w.cnt))

    def _weights_changed(self) -> None:
        self.extra = (self.wmul - 1).astype(np.uint32)
        self.weighted = bool((self.wmul != 1).any())
        self.changes += 1

    def _doom_latch(
        self, d: _Doom, ws: np.ndarray, masks: np.ndarray | None, count: np.ndarray
    ) -> None:
        """At a countable loop's latch that this run does not sample: stop now if the warps'
        first active lanes have iterations left that take them past the budget."""
        if not d.armed:
            # no warp near a share of the budget yet; armed, the look starts at the next latch
            # (the test's operands are copied from then on)
            d.armed = int(count.max()) * ARM_SHARE >= self.budget
            return
        d.busy = True
        d.cnt[ws] += 1
        c = d.cnt[ws]
        first = ws * 32
        if masks is not None:
            low = masks & (~masks + np.uint32(1))  # the lowest set bit
            first = first + np.bitwise_count(low - np.uint32(1)).astype(np.int64)
        a, b = self._operands(d, first)
        h = d.head
        h[0, c % 3, ws] = a
        h[1, c % 3, ws] = b
        a1, a0 = h[0, (c - 1) % 3, ws], h[0, (c - 2) % 3, ws]
        b1, b0 = h[1, (c - 1) % 3, ws], h[1, (c - 2) % 3, ws]
        da, db = a - a1, b - b1
        affine = (c >= 3) & (a1 - a0 == da) & (b1 - b0 == db)
        d.streak[ws] = np.where(affine, d.streak[ws] + 1, 0)
        ready = d.streak[ws] >= DOOM_AFTER
        if not _nz(ready):
            return
        lp = d.loop
        stays = np.asarray(continues(a - b, lp.cmp, lp.continues_when), bool)
        k = np.asarray(first_exit(a - b, da - db, lp.cmp, lp.continues_when))
        floor = max(lp.floor, 1)
        over = ready & stays & (k >= 1) & (count + k * floor > self.budget)
        if not over.any() or self.stop is None:
            return
        i = int(np.flatnonzero(over)[0])
        self.doomed = Doomed(lp, int(c[i]), int(a[i]), int(b[i]), int(k[i]), floor, int(count[i]))
        self.stop(lp.latch)

    def _operands(self, w: _Watch | _Doom, lanes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The exit test's operands as it saw them, per lane of ``lanes`` (int64, by its type)."""
        out = []
        for x in (w.loop.a, w.loop.b):
            if isinstance(x, Imm):
                out.append(np.full(lanes.size, int(x.value), np.int64))
            else:
                assert isinstance(x, Reg)
                out.append(_as_int(w.seen[x.name][lanes], w.loop.type))
        return out[0], out[1]

    def _at_latch(
        self,
        w: _Watch,
        ws: np.ndarray,
        masks: np.ndarray | None,
        count: np.ndarray,
        depth: np.ndarray | None,
    ) -> None:
        if ws.size <= 3:  # a few warps, each neither after a skip nor being sampled: one by one
            wl = ws.tolist()
            ffk_a, since_a = w.ff_k, w.since  # (read by scalar indices: a list index costs more)
            for wi in wl:
                if ffk_a[wi] or since_a[wi]:
                    break
            else:
                for i, wi in enumerate(wl):
                    self._latch_one(w, ws, i, wi, masks, count, depth)
                return
        w.busy = True
        c = w.cnt[ws] + 1  # ws: distinct warps
        w.cnt[ws] = c
        if depth is not None:
            first_time = c == 1
            w.depth[ws[first_time]] = depth[first_time]
        ipi = count - w.prev[ws]
        w.prev[ws] = count
        # the PERIOD iterations after a skip end here: they stood for the skipped ones and
        # themselves; the lanes with more iterations left run them as they come (weighing 1)
        ffk = w.ff_k[ws]
        if _nz(ffk):
            done = (ffk > 0) & (c >= w.ff_at[ws] + w.ff_p[ws])
            if _nz(done):
                fx = ws[done]
                self.wmul[fx] //= w.ff_k[fx]
                w.ff_k[fx] = 0
                w.quiet[fx] = w.cnt[fx] + QUIET
                self._weights_changed()
                ffk = w.ff_k[ws]
        # the cheap look: one lane per warp (its first active one), every latch
        first = ws * 32
        if masks is not None:
            low = masks & (~masks + np.uint32(1))  # the lowest set bit
            first = first + np.bitwise_count(low - np.uint32(1)).astype(np.int64)
        a, b = self._operands(w, first)
        slot = c % 3
        w.head[0, slot, ws] = a
        w.head[1, slot, ws] = b
        # the warps being sampled: their lanes' operands and registers, then the skip
        since = w.since[ws]
        flagged = since > 0
        if _nz(flagged):
            fw, fc = ws[flagged], c[flagged]
            self._record(w, fw, fc)
            ready = fc >= w.since[fw] + 2
            if _nz(ready):
                fm = None if masks is None else masks[flagged][ready]
                self._skip(w, fw[ready], fc[ready], fm)
            since, ffk = w.since[ws], w.ff_k[ws]
        look = (c >= 3) & (since == 0) & (ffk == 0)
        if _nz(look) == look.size:
            self._look(w, ws, c, count, ipi)
        elif _nz(look):
            self._look(w, ws[look], c[look], count[look], ipi[look])

    def _latch_one(
        self,
        w: _Watch,
        ws: np.ndarray,
        i: int,
        wi: int,
        masks: np.ndarray | None,
        count: np.ndarray,
        depth: np.ndarray | None,
    ) -> None:
        """:meth:`_at_latch` and :meth:`_look` for one warp ``wi`` (``ws[i]``; ``masks``,
        ``count`` and ``depth`` are the latch's, ``i`` its entry there) that is
        neither after a skip nor being sampled (the usual latch of a divergent kernel, a warp or
        two at a time: HeCBench contraction 128,000 of them), in Python integers: each step as
        the vector form computes it, wrapped to int64 where numpy's arithmetic wraps. The
        warps' looks are independent (each reads and writes its own entries), so a few warps
        looked at one after the other come to what the vector form makes of them together."""
        w.busy = True
        c = int(w.cnt[wi]) + 1
        w.cnt[wi] = c
        if depth is not None and c == 1:
            w.depth[wi] = depth[i]
        now = int(count[i])
        ipi = wrap64(now - int(w.prev[wi]))
        w.prev[wi] = now
        first = wi * 32
        if masks is not None:  # its first active lane
            m = int(masks[i])
            low = m & ((~m + 1) & 0xFFFFFFFF)
            first += ((low - 1) & 0xFFFFFFFF).bit_count()
        lp = w.loop
        a = self._operand_one(w, lp.a, first)
        b = self._operand_one(w, lp.b, first)
        h = w.head
        h[0, c % 3, wi] = a
        h[1, c % 3, wi] = b
        if c < 3:
            return
        s1, s0 = (c - 1) % 3, (c - 2) % 3
        a1, a0 = int(h[0, s1, wi]), int(h[0, s0, wi])
        b1, b0 = int(h[1, s1, wi]), int(h[1, s0, wi])
        da, db = wrap64(a - a1), wrap64(b - b1)
        affine = wrap64(a1 - a0) == da and wrap64(b1 - b0) == db
        k = first_exit_one(wrap64(a - b), wrap64(da - db), lp.cmp, lp.continues_when)
        known = affine and k >= 1
        rest = wrap64((k if known else 0) * max(ipi, 1))
        long = known and wrap64(now + rest) > self.sample_above
        forced = self.forced
        if forced:
            w.long[wi] = long = long or bool(w.long[wi])
        hot = (known and (long or (forced and w.free))) or bool(w.hot[wi])
        w.hot[wi] = hot
        worth = hot
        if w.outer:
            inside = any(bool((o.long if forced else o.hot)[wi]) for o in w.outer)
            worth = hot or (known and inside and rest > self.sample_above // INNER_SHARE)
        if worth and k >= 2 * PERIOD + 2 and c >= DECIDE_AT and c >= int(w.quiet[wi]):
            w.since[wi] = c
            self._record(w, ws[i : i + 1], np.array([c], np.int64))

    def _operand_one(self, w: _Watch, x: Any, lane: int) -> int:
        """:meth:`_operands` of one lane, as a Python integer."""
        if isinstance(x, Imm):
            return int(np.int64(int(x.value)))
        assert isinstance(x, Reg)
        return _as_int_one(w.seen[x.name], lane, w.loop.type)

    def _look(
        self, w: _Watch, ws: np.ndarray, c: np.ndarray, count: np.ndarray, ipi: np.ndarray
    ) -> None:
        """From one lane per warp: is the instance long (hot), and is it worth sampling."""
        h = w.head
        c0 = int(c[0])
        if _nz(c != c0) == 0:  # warps in step (the usual case): one gather
            hw = h[:, :, ws]
            s2, s1, s0 = c0 % 3, (c0 - 1) % 3, (c0 - 2) % 3
            a2, a1, a0 = hw[0, s2], hw[0, s1], hw[0, s0]
            b2, b1, b0 = hw[1, s2], hw[1, s1], hw[1, s0]
        else:
            a2, a1, a0 = (h[0, (c - t) % 3, ws] for t in (0, 1, 2))
            b2, b1, b0 = (h[1, (c - t) % 3, ws] for t in (0, 1, 2))
        da, db = a2 - a1, b2 - b1
        affine = (a1 - a0 == da) & (b1 - b0 == db)
        k = np.asarray(first_exit(a2 - b2, da - db, w.loop.cmp, w.loop.continues_when))
        known = affine & (k >= 1)
        rest = np.where(known, k, 0) * np.maximum(ipi, 1)
        # once long, an instance stays so for the loops inside it: its tail (the lanes with
        # more iterations left than the skip took) has a short rest, not a short past
        long = known & (count + rest > self.sample_above)
        forced = self.forced
        if forced:
            long |= w.long[ws]
            w.long[ws] = long
            hot = (known if w.free else long) | w.hot[ws]
        else:
            hot = long | w.hot[ws]
        w.hot[ws] = hot
        # inside an instance of a loop that is long for this warp, a loop is sampled once its
        # own rest costs a share of the budget: the correlation's inner loop over 2048 rows,
        # run in full in every iteration of the outer one, made each CTA's trace 120 MB
        worth = hot
        if w.outer:
            inside = np.zeros(ws.size, bool)
            for o in w.outer:
                inside |= (o.long if forced else o.hot)[ws]
            worth = hot | (known & inside & (rest > self.sample_above // INNER_SHARE))
        if not _nz(worth):
            return
        go = worth & (k >= 2 * PERIOD + 2) & (c >= DECIDE_AT) & (c >= w.quiet[ws])
        if _nz(go):
            w.since[ws[go]] = c[go]
            self._record(w, ws[go], c[go])

    def _record(self, w: _Watch, ws: np.ndarray, c: np.ndarray) -> None:
        """The operands and the registers of every lane of warps ``ws`` at iteration ``c``."""
        lanes = (ws[:, None] * 32 + np.arange(32)).reshape(-1)
        slot = np.repeat(c % 3, 32)
        a, b = self._operands(w, lanes)
        w.ring[0, slot, lanes] = a
        w.ring[1, slot, lanes] = b
        for name in w.regs:
            src = self.regs[name]
            buf = w.snaps.get(name)
            if buf is None or buf.shape[1] != src.shape[0] or buf.dtype != src.dtype:
                buf = np.zeros((3, src.shape[0]), src.dtype)
                w.snaps[name] = buf
            buf[slot, lanes] = src[lanes]

    def _remaining(
        self, w: _Watch, ws: np.ndarray, c: np.ndarray, masks: np.ndarray | None
    ) -> tuple[np.ndarray, np.ndarray]:
        """(j per lane, the lanes still in the loop) for warps ``ws`` at iteration ``c``: ``j``
        the iterations until each lane leaves (-1: never, or the operands do not move by a
        constant step)."""
        lanes = (ws[:, None] * 32 + np.arange(32)).reshape(-1)
        cc = np.repeat(c, 32)
        r = w.ring
        a2, a1, a0 = (r[0, (cc - t) % 3, lanes] for t in (0, 1, 2))
        b2, b1, b0 = (r[1, (cc - t) % 3, lanes] for t in (0, 1, 2))
        da, db = a2 - a1, b2 - b1
        affine = (a1 - a0 == da) & (b1 - b0 == db)
        j = np.asarray(first_exit(a2 - b2, da - db, w.loop.cmp, w.loop.continues_when))
        j = np.where(affine, j, -1)
        if masks is None:
            on = np.ones(lanes.size, bool)
        else:
            on = (masks.astype(np.uint64)[:, None] >> np.arange(32, dtype=np.uint64)) & 1
            on = on.astype(bool).reshape(-1)
        # lanes that leave at this test are done with the loop: neither skipped nor counted
        on &= np.asarray(continues(a2 - b2, w.loop.cmp, w.loop.continues_when), bool)
        return j.reshape(-1, 32), on.reshape(-1, 32)

    def _skip(self, w: _Watch, ws: np.ndarray, c: np.ndarray, masks: np.ndarray | None) -> None:
        """Move warps ``ws`` to the start of their last iteration (see the module docstring)."""
        j, on = self._remaining(w, ws, c, masks)
        ok = np.all(np.where(on, j >= 1, True), axis=1) & on.any(axis=1)
        w.since[ws] = 0
        # every lane skips as many iterations as fit before the one with the fewest left
        # leaves, in whole periods: m * p skipped, then p run, each standing for m + 1 (all
        # lanes are in the loop for all of them, and the p consecutive iterations run every
        # alignment the loop's accesses take through a 128-byte line: PERIOD for a stride of
        # 4-byte elements, fewer in a loop holding another where every address moves by a
        # multiple of 32 bytes, :func:`_periods`); the lanes with more left run them as they come
        lanes = (ws[:, None] * 32 + np.arange(32)).reshape(-1)
        cc = np.repeat(c, 32)
        p = _periods(w, lanes, cc, on)
        fewest = np.where(on, j, np.iinfo(np.int64).max).min(axis=1)
        m = fewest // p - 1
        # a record's weight is a 32-bit count: nested skips may not multiply past it
        m = np.minimum(m, (_MAX_WEIGHT // self.wmul[ws]) - 1)
        ok &= m >= 1
        w.quiet[ws[~ok]] = c[~ok] + QUIET
        if not ok.any():
            return
        ws, on, c, m, p = ws[ok], on[ok], c[ok], m[ok], p[ok]
        k = m + 1  # the weight of each of the p iterations run after the skip
        lanes = (ws[:, None] * 32 + np.arange(32)).reshape(-1)
        skip = np.where(on, (m * p)[:, None], 0).reshape(-1)
        cc = np.repeat(c, 32)
        move = skip > 0
        for name in w.regs:
            snaps = w.snaps.get(name)
            if snaps is None:
                continue
            dt = snaps.dtype
            s2, s1, s0 = (snaps[(cc - t) % 3, lanes] for t in (0, 1, 2))
            d = s2 - s1
            affine = (s1 - s0 == d) & move
            if affine.any():
                reg = self.regs[name]
                sel = lanes[affine]
                reg[sel] = s2[affine] + skip[affine].astype(dt) * d[affine]
        self.wmul[ws] *= k
        w.ff_k[ws] = k
        w.ff_at[ws] = c
        w.ff_p[ws] = p
        self._weights_changed()
        self.sampled = True
        if self.forced and w.free:
            self.forced_skips += 1
        rep = self.report.get(w.loop.header)
        if rep is None:
            rep = SampledLoop(self.where(w.loop), w.loop.bound_text())
            self.report[w.loop.header] = rep
        rep.warps += int(ws.size)
        rep.ran += int((c + p).sum())
        rep.stood_for += int((c + k * p).sum())


def _periods(w: _Watch, lanes: np.ndarray, cc: np.ndarray, on: np.ndarray) -> np.ndarray:
    """Per warp (``lanes``: its 32 lanes, ``cc``: their iteration, ``on``: (warps, 32) the
    lanes in the loop), the iterations to run after a skip: the alignments the loop's
    accesses take through a 128-byte line, at most :data:`PERIOD`. An address register the
    loop does not write stays put (1); one that moves in every lane by the same step of ``s``
    bytes comes back to its alignment after ``128 / gcd(s, 128)`` iterations (a 4-byte stride:
    32, capped at PERIOD as before; a row of 64 floats: 1). Lanes whose steps differ or do not
    hold, or an access whose address is not a watched register, keep PERIOD."""
    nw = on.shape[0]
    p = np.ones(nw, np.int64)
    if w.addrs is None:
        return np.full(nw, PERIOD, np.int64)
    for name in w.addrs:
        snaps = w.snaps.get(name)
        if snaps is None:
            return np.full(nw, PERIOD, np.int64)
        s2, s1, s0 = (snaps[(cc - t) % 3, lanes].astype(np.int64) for t in (0, 1, 2))
        d = (s2 - s1).reshape(nw, 32)
        held = ((s1 - s0).reshape(nw, 32) == d) | ~on
        lead = d[np.arange(nw), np.argmax(on, axis=1)]  # the first lane in the loop's step
        same = held.all(axis=1) & np.all((d == lead[:, None]) | ~on, axis=1)
        low = (lead.astype(np.uint64) & np.uint64(127)).astype(np.int64)
        low = low & -low  # gcd(step, 128), 0 where the step is a multiple of 128
        per = np.where(low == 0, 1, 128 // np.maximum(low, 1))
        p = np.maximum(p, np.where(same, np.minimum(per, PERIOD), PERIOD))
    return p


def _int_regs_written(program: Program, loop: Loop, regs: dict[str, np.ndarray]) -> tuple[str, ...]:
    """The integer (and address) registers the loop's instructions write."""
    from gpuadvise.ptx.dataflow import _regs

    out: dict[str, None] = {}
    for b in loop.blocks:
        blk = program.blocks[b]
        for i in range(blk.start, blk.end):
            ins = program.instrs[i]
            if not ins.operands or ins.base in _NO_DEST:
                continue
            for name in _regs(ins.operands[0]):
                arr = regs.get(name)
                if arr is not None and arr.dtype.kind in "ui":
                    out[name] = None
    return tuple(out)


_OPAQUE = frozenset({"tex", "tld4", "txq", "suld", "sust", "sured", "suq", "call"})


def _address_regs(
    program: Program, loop: Loop, loops: Sequence[Loop], watched: tuple[str, ...]
) -> tuple[str, ...] | None:
    """The registers among ``watched`` (those the loop writes) that the memory accesses in the
    loop's blocks (its inner loops' too) take their addresses from; None where the iterations
    run after a skip stay PERIOD: an innermost loop (one that holds no other), an access whose
    address is not read so (a texture or surface access, a call, an address register the loop
    writes that is not watched), or a branch or a predicated instruction whose predicate the
    loop computes from a value it changes (data the loop loads or its counter may send an
    iteration another way than the ones run: HeCBench chi2's tests of each byte read,
    contraction's ``adj_value > 0``), other than the exit tests at its and its inner loops'
    latches."""
    from gpuadvise.ptx.dataflow import _regs

    latches = {lp.latch for lp in loops if lp.blocks <= loop.blocks}
    if len(latches) < 2:
        # an innermost loop keeps PERIOD: what a skip saves there is a few iterations of a
        # short body, where a loop holding others saves whole instances of theirs
        return None
    written: set[str] = set()
    guards: set[str] = set()
    reads: dict[str, set[str]] = {}  # a register the loop writes: the registers it is made from
    bases: dict[str, None] = {}
    for b in loop.blocks:
        blk = program.blocks[b]
        term = blk.term
        if term[0] == "cbra" and b not in latches:
            guards.add(term[1])
        for i in range(blk.start, blk.end):
            ins = program.instrs[i]
            if ins.base in _OPAQUE:
                return None
            if ins.operands and (ins.base == "setp" or ins.base not in _NO_DEST):
                srcs = [r for op in ins.operands[1:] for r in _regs(op)]
                for name in _regs(ins.operands[0]):
                    written.add(name)
                    reads.setdefault(name, set()).update(srcs)
            if ins.guard is not None and not (ins.base == "bra" and b in latches):
                guards.add(ins.guard)
            for op in ins.operands:
                if isinstance(op, Addr) and isinstance(op.base, Reg):
                    bases[op.base.name] = None
    # a predicate the loop computes again from values it does not change (nvcc's tests of the
    # trip count's remainder by the unrolling, before an inner loop) sends every iteration one way
    if any(written & reads[g] for g in guards & written):
        return None
    keep = set(watched)
    out = []
    for name in bases:
        if name in keep:
            out.append(name)
        elif name in written:
            return None
    return tuple(out)


def _as_int(values: np.ndarray, ptype: str) -> np.ndarray:
    """Register values as the integer ``ptype`` of a comparison reads them, in int64."""
    bits = int(ptype[1:]) if ptype[1:].isdigit() else 32
    raw = (
        values.astype(np.uint64)
        if values.dtype.kind in "ub"
        else values.view(
            {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[values.dtype.itemsize]
        ).astype(np.uint64)
    )
    if bits < 64:
        raw = raw & np.uint64((1 << bits) - 1)
        signed = ptype[0] == "s"
        out = raw.astype(np.int64)
        if signed:
            out = np.where(out >= (1 << (bits - 1)), out - (1 << bits), out)
        return out
    return raw.view(np.int64)


def _as_int_one(values: np.ndarray, lane: int, ptype: str) -> int:
    """:func:`_as_int` of ``values[lane]``, as a Python integer."""
    bits = int(ptype[1:]) if ptype[1:].isdigit() else 32
    if values.dtype.kind in "ub":
        raw = int(values[lane])
    else:
        ud = {1: np.uint8, 2: np.uint16, 4: np.uint32, 8: np.uint64}[values.dtype.itemsize]
        raw = int(values[lane : lane + 1].view(ud)[0])
    if bits < 64:
        raw &= (1 << bits) - 1
        if ptype[0] == "s" and raw >= 1 << (bits - 1):
            raw -= 1 << bits
        return raw
    return wrap64(raw)


def budget_reason(
    program: Program,
    loops: Sequence[Loop],
    block: int,
    where: Any,
    sampler: LoopSampler | None,
) -> tuple[str, bool]:
    """Why a warp ran past the instruction budget at ``block``, in words, and whether data the
    kernel reads decides it: the innermost loop there (its line), what its exit test compares,
    whether a value it tests is read from memory (and holds the poison of an output with no
    fill), and why the loop was not sampled (or what its counter did)."""
    lp = innermost(loops, block)
    if lp is None:
        return "in straight-line code, no loop: the kernel is very long", False
    if lp.endless:
        return (
            f"in the loop at {where(lp)}, which no branch, exit or return leaves: it never ends",
            False,
        )
    parts = [f"in the loop at {where(lp)}"]
    if lp.setp is not None:
        parts.append(f"whose exit test compares with {lp.bound_text()}")
    w = sampler.watches.get(lp.latch) if sampler is not None else None
    doomed = sampler.doomed if sampler is not None else None
    poisoned = False
    if doomed is not None and doomed.loop == lp:
        if lp.why_not:
            parts.append(f"not sampled: {lp.why_not}")
        elif sampler is not None and sampler.sample_above <= 0:
            parts.append("not sampled: this run's outputs are compared, so every iteration runs")
        parts.append(
            f"its counter at {doomed.counter} against a bound of {doomed.bound}, moving by fixed "
            f"steps: {doomed.left} more iterations to run, each of at least {doomed.floor} "
            "instructions"
        )
    elif w is not None and w.cnt.max() >= 3:
        parts.append(_progress(w))
        poisoned = _poisoned(w)
    elif lp.why_not:
        parts.append(f"not sampled: {lp.why_not}")
    elif sampler is None or sampler.sample_above <= 0:
        parts.append("not sampled: this run's outputs are compared, so every iteration runs")
    if lp.data_bound:
        parts.append(
            "a value it tests is read from memory"
            + (
                " and holds the poison of an output with no fill (every byte 0xFF)"
                if poisoned
                else " (random or poisoned data there can make a loop endless)"
            )
        )
    return ", ".join(parts), lp.data_bound


def _poisoned(w: _Watch) -> bool:
    """Whether the busiest warp's exit test read an all-ones value (the poison of an output
    with no fill: -1 signed, the largest value unsigned)."""
    wi = int(np.argmax(w.cnt))
    c = int(w.cnt[wi])
    bits = int(w.loop.type[1:]) if w.loop.type[1:].isdigit() else 32
    ones = {-1, (1 << bits) - 1}
    return any(int(w.head[k, c % 3, wi]) in ones for k in (0, 1))


def _progress(w: _Watch) -> str:
    """What the watched test's operands did over the last iterations of the busiest warp."""
    wi = int(np.argmax(w.cnt))
    c = int(w.cnt[wi])
    a = [int(w.head[0, (c - t) % 3, wi]) for t in (2, 1, 0)]
    b = [int(w.head[1, (c - t) % 3, wi]) for t in (2, 1, 0)]
    if a[2] == a[1] and b[2] == b[1]:
        return (
            f"which never ends: its counter ({a[2]}) and bound ({b[2]}) do not change from one "
            "iteration to the next"
        )
    if a[2] - a[1] != a[1] - a[0] or b[2] - b[1] != b[1] - b[0]:
        return (
            f"whose counter or bound does not move by a fixed step (last values {a} against "
            f"{b}): its iterations cannot be counted ahead"
        )
    return f"after {c} iterations (counter {a[2]}, bound {b[2]}), not near its end"
