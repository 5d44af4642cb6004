"""The trace starts while the kernel's SASS is still being read (issue 31: the median corpus
kernel's wall on a 2-core machine waited ~0.6 s for nvdisasm before its first warp ran).

The emulator needs the SASS for its block costs alone (:func:`gpuadvise.ptx.chains.block_costs`:
the loops' schedules and the blocks' instruction counts), summed per warp as the warps run them.
While the SASS is in flight (:func:`gpuadvise.trace.sass_arrival.sass_in_flight`) the sums are
recorded (:class:`gpuadvise.ptx.chains.ChainLog`) and replayed in their order once it comes, so
that everything the trace gives is bit for bit what it gave with the SASS read first.
"""

from __future__ import annotations

import functools
import pickle
from typing import Any

import numpy as np
import pytest
from loopkit import compiled as _compiled

from gpuadvise.ptx.chains import ChainLog, WarpChains, critical_paths

# the eager emulation of a case is kept per process (_eager): the cases on one worker
pytestmark = pytest.mark.xdist_group(__name__)


def _calls(rng: np.random.Generator, warps: int, count: int) -> list[tuple[Any, ...]]:
    """Random calls of every kind, as the emulator's run loop makes them."""
    out: list[tuple[Any, ...]] = []
    for _ in range(count):
        kind = int(rng.integers(0, 5))
        p = int(rng.integers(0, 6))
        ws = np.flatnonzero(rng.random(warps) < 0.5)
        if kind == 0:
            out.append(("all", p))
        elif kind == 1:
            out.append(("some", ws, p))
        elif kind == 2:
            whole = bool(rng.integers(0, 2))
            w = rng.integers(1, 7, warps if whole else len(ws))
            out.append(("weighted", None if whole else ws, w, p))
        elif kind == 3:
            out.append(("lockstep", p))
        else:
            out.append(("unlock",))
    return out


def _run(sums: WarpChains | ChainLog, calls: list[tuple[Any, ...]]) -> np.ndarray:
    for name, *args in calls:
        if name == "weighted" and args[0] is None:
            live = args[1].copy()  # the sampler's array changes after the call: the log copies
            sums.weighted(None, live, args[2])
            live[:] = 99
        else:
            getattr(sums, name)(*args)
    return sums.total()


@pytest.mark.parametrize("max_bytes", [1 << 30, 4_000])
def test_a_chain_log_replays_the_sums_bit_for_bit(max_bytes: int) -> None:
    """Rows that no float sum keeps exact (thirds: a SASS schedule's links over an unrolling
    of 3), added in another order, would differ in their last bits; the log adds them in the
    emulator's order. Past its byte limit it asks for the rows and adds as calls come."""
    rng = np.random.default_rng(7)
    rows = rng.integers(1, 50, (6, 25)) / 3.0 + rng.random((6, 25))
    calls = _calls(rng, 24, 400)
    eager = _run(WarpChains(rows, 24), calls)
    asked: list[int] = []

    def later() -> np.ndarray:
        asked.append(1)
        return rows

    log = ChainLog(later, 24, max_bytes=max_bytes)
    got = _run(log, calls)
    assert got.tobytes() == eager.tobytes()
    assert asked == [1]
    a, b = critical_paths(got, 6, 4), critical_paths(eager, 6, 4)
    assert a[0].tobytes() == b[0].tobytes() and a[1].tobytes() == b[1].tobytes()


def test_a_chain_log_asks_for_the_rows_only_when_read() -> None:
    def never() -> np.ndarray:
        raise AssertionError("the rows were asked for before the sums were read")

    log = ChainLog(never, 4)
    log.all(1)
    log.some(np.array([0, 2]), 2)
    log.lockstep(0)
    log.unlock()


class _Slow:
    """A read of the SASS that takes ``polls`` looks to finish (or until waited for)."""

    def __init__(self, events: list[str], polls: int) -> None:
        self.events, self.polls = events, polls

    def done(self) -> bool:
        self.polls -= 1
        return self.polls < 0

    def wait(self) -> None:
        self.events.append("wait")
        self.polls = 0


def _same(a: Any, b: Any) -> bool:
    return pickle.dumps(a) == pickle.dumps(b)


_KW: dict[str, Any] = {"sample_ctas": "all", "max_instructions": 80_000, "batch_lanes": 32}


@functools.cache
def _eager(case: tuple[str, ...]) -> tuple[Any, ...]:
    """(module, kernel, launch, device, the emulation with the SASS read first) of a case: the
    cases that differ in when the SASS comes share it (one emulation of corr_kernel, ~2 CPU-s)."""
    from gpuadvise.trace import emulate as E

    buffers = (
        ("symmat=float[m*m]:zeros", "data=float[m*n]:random")
        if case[0] == "corr_kernel"
        else ("a=float[n*64]:random", "out=float[128]:zeros")
    )
    module, k, launch, device = _compiled(*case, buffers=buffers)
    return module, k, launch, device, E.emulate(module, k, launch, device, **_KW)


class _FirstRun(Exception):
    """The emulation stopped at its first batch: what came before it is all a test reads."""


@pytest.mark.toolkit
@pytest.mark.usefixtures("compile_cache")
@pytest.mark.parametrize(
    ("case", "polls"),
    [
        # sampled loops (weighted sums), a divergent last warp, many batches; the SASS comes
        # after the run, or in its middle (the batches before it replayed, the rest added)
        (("corr_kernel", "4", "32", "m=128", "n=256"), 10**9),
        (("corr_kernel", "4", "32", "m=128", "n=256"), 3),
        # every warp in step (the lockstep's sums)
        (("rowsum", "2", "64", "n=4096"), 10**9),
    ],
)
def test_the_trace_runs_before_the_sass_comes_and_gives_the_same(
    case: tuple[str, ...], polls: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    from gpuadvise.ptx.emulator import Batch
    from gpuadvise.trace import emulate as E
    from gpuadvise.trace.sass_arrival import sass_in_flight

    module, k, launch, device, first = _eager(case)
    assert first.simt is not None and first.simt.line_pipes

    events: list[str] = []
    real_run, real_sass = Batch.run, E._sass
    stop_at_first_run = False

    def run(self: Batch) -> tuple[int, int]:
        events.append("run")
        if stop_at_first_run:
            raise _FirstRun
        return real_run(self)

    def sass(*args: Any) -> Any:
        events.append("sass")
        return real_sass(*args)

    monkeypatch.setattr(Batch, "run", run)
    monkeypatch.setattr(E, "_sass", sass)
    with sass_in_flight(module.cubin_path, k.mangled, _Slow(events, polls)):
        later = E.emulate(module, k, launch, device, **_KW)
    assert events[0] == "run" and events.count("sass") == 1
    if polls > 100:  # waited for at the end, after every CTA ran
        assert events[-2:] == ["wait", "sass"] and events.count("run") > 1
    else:  # came while the batches ran: read then, not waited for
        assert "wait" in events and events.index("sass") < len(events) - 1
    assert _same(later.simt, first.simt)
    assert _same(later.trace.work, first.trace.work)
    assert later.trace.records.tobytes() == first.trace.records.tobytes()
    assert later.notes == first.notes and later.sampled_loops == first.sampled_loops

    # a flight for another kernel, or one already done: the SASS is read first, as before (the
    # run stopped at its first batch: the order of the two is all this reads)
    events.clear()
    stop_at_first_run = True
    with (
        sass_in_flight(module.cubin_path, k.mangled + "_other", _Slow(events, 10**9)),
        pytest.raises(_FirstRun),
    ):
        E.emulate(module, k, launch, device, **_KW)
    assert events == ["sass", "run"]
