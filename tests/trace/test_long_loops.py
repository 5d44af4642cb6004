"""Issue 27 (3): long loops in the CPU emulator.

PolyBench's corr_kernel (nested loops with compile-time bounds, one thread per column) stopped
the emulator at its 2,000,000-instruction cap, blamed on "a loop bound read from poisoned or
random data". Long loops are now sampled (their first iterations run, the rest skipped to the
last, which is weighted for them: gpuadvise.ptx.sampling): the per-line counts stay those of the
full run, the outputs are not claimed, and a loop that cannot be sampled stops the emulation with
its true reason. ``--max-instructions N`` (``max_instructions`` in a spec) sets the budget.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from clikit import cli, one_error
from loopkit import LOOPS
from loopkit import compiled as _compiled

from gpuadvise.errors import ConfigError, UsageError
from gpuadvise.ptx.errors import InstructionBudgetError
from gpuadvise.ptx.loops import continues, first_exit
from gpuadvise.spec.kernel_spec import build_kernel_spec, load_spec

pytestmark = pytest.mark.usefixtures("compile_cache")


CORR = ("corr_kernel", "4", "32", "m=128", "n=256")
CORR_BUFFERS = ("symmat=float[m*m]:zeros", "data=float[m*n]:random")


# CORR's runs that several tests make alike, each made once on one worker (CORR_GROUP) and
# dropped after its last reader: CTA 0 in full (``sample_ctas=1``, about 1.7 CPU-s on the 2-core
# machine: three tests) and the first wave's 4 CTAs in full (the default sample under a default
# bound raised out of its way, ``DEFAULT_SAMPLE_EMU_NS = 10**12``, about 4 CPU-s: two tests)
_CORR_READERS = {"cta0": 3, "wave": 2}
_CORR_RUNS: dict[str, list[Any]] = {}
CORR_GROUP = pytest.mark.xdist_group("test_long_loops corr_kernel runs in full")


def _corr_run(which: str) -> Any:
    """CORR's run ``which`` ("cta0" or "wave", as above), emulated the first time a test asks.
    "wave" reads ``DEFAULT_SAMPLE_EMU_NS`` as it is: every caller has set it to ``10**12``."""
    import gpuadvise.trace.emulate as em

    if which not in _CORR_RUNS:
        module, k, launch, device = _compiled(*CORR, buffers=CORR_BUFFERS)
        if which == "cta0":
            emu = em.emulate(module, k, launch, device, sample_ctas=1)
        else:
            assert which == "wave" and em.DEFAULT_SAMPLE_EMU_NS == 10**12
            emu = em.emulate(module, k, launch, device)
        _CORR_RUNS[which] = [emu, 0]
    run = _CORR_RUNS[which]
    run[1] += 1
    if run[1] == _CORR_READERS[which]:
        del _CORR_RUNS[which]
    return run[0]


def _lines(emu: Any) -> dict[tuple[int | None, str], tuple[int, int]]:
    from gpuadvise.model.coalescing import analyze_coalescing

    c = analyze_coalescing(emu.trace)
    return {(ln.line, ln.kind.name): (ln.requests, ln.sectors) for ln in c.lines}


@pytest.mark.toolkit
def test_a_correlation_is_sampled_and_counted_as_in_full() -> None:
    from gpuadvise.trace.emulate import emulate

    module, k, launch, device = _compiled(*CORR, buffers=CORR_BUFFERS)
    full = emulate(module, k, launch, device, sample_ctas="all", max_instructions=10**9)
    assert full.sampled_loops == () and not full.trace.sampled_iterations
    # a budget of 80,000 instructions a warp: loops whose rest passes 10,000 are sampled
    part = emulate(module, k, launch, device, sample_ctas="all", max_instructions=80_000)
    assert len(part.sampled_loops) == 2 and part.trace.sampled_iterations
    assert "loops.cu:13" in " ".join(part.sampled_loops)  # the outer loop over j2
    assert "compile-time constant" in part.sampled_loops[0]
    assert any("outputs are not the kernel's" in n for n in part.notes)
    assert len(part.trace.records) < len(full.trace.records) / 2  # far fewer accesses run
    # the accesses move by a fixed step: the weighted counts are the full run's, exactly
    # (every lane is in the loop for every skipped iteration, and the 8 weighted ones take the 8
    # alignments of a 4-byte stride through a sector)
    assert _lines(part) == _lines(full)
    assert part.lane_instructions == full.lane_instructions
    # the view the layout rules read weighs the records the same way
    from gpuadvise.trace.view import TraceView, buffer_infos

    def loads(e: Any) -> float:
        v = TraceView(e.trace, buffer_infos(e.trace, _compiled.spec))  # type: ignore[attr-defined]
        return v.weighted(np.flatnonzero(v.records["kind"] == 0))

    assert loads(part) == pytest.approx(loads(full), rel=0.01)


@pytest.mark.toolkit
@CORR_GROUP
def test_the_default_budget_samples_only_what_it_must() -> None:
    from gpuadvise.trace.emulate import emulate

    module, k, launch, device = _compiled(*CORR, buffers=CORR_BUFFERS)
    # 128 x 256: a warp runs some 160,000 instructions, under the default's eighth
    emu = _corr_run("cta0")  # emulate(module, k, launch, device, sample_ctas=1)
    assert emu.sampled_loops == ()
    # outputs are compared only from runs that sample nothing
    with pytest.raises(InstructionBudgetError, match="every iteration runs"):
        emulate(module, k, launch, device, sample_ctas=1, max_instructions=80_000,
                sample_loops=False, trace=False)  # fmt: skip


@pytest.mark.toolkit
def test_a_loop_with_a_barrier_stops_with_its_reason() -> None:
    from gpuadvise.trace.emulate import emulate

    module, k, launch, device = _compiled("synced", "1", "256", "n=256")
    with pytest.raises(InstructionBudgetError) as err:
        emulate(module, k, launch, device, sample_ctas=1, max_instructions=20_000)
    msg = err.value.one_line()
    assert "more than 20000 instructions" in msg
    assert "in the loop at loops.cu:27" in msg and "not sampled: it holds a barrier" in msg
    # its iterations are counted ahead: the stop comes after some 20 of them (16 in a row moving
    # by fixed steps once a warp ran a 64th of the budget), not at the budget, and says what was
    # left
    assert "would execute more than 20000" in msg
    assert "bound of 100000, moving by fixed steps" in msg
    assert "more iterations to run, each of at least" in msg
    # the bound is a constant: no word of poisoned data, nor of fills
    assert "poison" not in msg and "--buffer" not in msg
    assert "--max-instructions N" in msg


@pytest.mark.toolkit
def test_a_bound_read_from_a_poisoned_buffer_is_named() -> None:
    from gpuadvise.trace.emulate import emulate

    # the bound holds -1, what an output with no fill starts with (every byte 0xFF), and the
    # walk's steps are not fixed: the loop cannot be counted ahead
    module, k, launch, device = _compiled(
        "bounded", "1", "32", "n=64", buffers=("bound=int[1]:random(-1,-1)", "out=float[n]")
    )
    with pytest.raises(InstructionBudgetError) as err:
        emulate(module, k, launch, device, sample_ctas=1, max_instructions=20_000)
    msg = err.value.one_line()
    assert "in the loop at loops.cu:40" in msg and "does not move by a fixed step" in msg
    assert "a value it tests is read from memory and holds the poison" in msg


@pytest.mark.toolkit
def test_a_wait_that_never_ends_says_so() -> None:
    from gpuadvise.trace.emulate import emulate

    module, k, launch, device = _compiled("waits", "1", "32", "n=1", buffers=("flag=int[1]:zeros",))
    with pytest.raises(InstructionBudgetError) as err:
        emulate(module, k, launch, device, sample_ctas=1, max_instructions=5_000)
    assert "which never ends" in err.value.one_line()


def test_first_exit_solves_the_tests() -> None:
    # for (i = 0; i != 2048; i += 8) at i = 8: 255 more tests, the last leaves
    assert first_exit([8 - 2048], [8], "ne", True).tolist() == [255]
    # for (j = j1 + 1; j < 2046; ...) with j - 2046 = -5: leaves 5 tests later
    assert first_exit([-5, -1, 3], [1, 1, 1], "lt", True).tolist() == [5, 1, 1]
    assert first_exit([-5], [0], "lt", True).tolist() == [-1]  # never: the counter is stuck
    assert first_exit([-5], [2], "eq", False).tolist() == [-1]  # 'leave when 0': never hit
    assert first_exit([-6], [2], "eq", False).tolist() == [3]
    assert continues([-1, 0], "lt", True).tolist() == [True, False]


def test_max_instructions_in_a_spec_and_on_the_command_line(tmp_path: Path, capsys) -> None:
    spec = tmp_path / "k.toml"
    spec.write_text('kernel = "waits"\ngrid = 1\nblock = 32\nmax_instructions = 5000000\n')
    assert load_spec(spec)["max_instructions"] == 5_000_000
    built = build_kernel_spec(LOOPS, spec=spec, args=["n=1"])
    assert built.max_instructions == 5_000_000
    assert (
        build_kernel_spec(LOOPS, spec=spec, args=["n=1"], max_instructions=7).max_instructions == 7
    )
    spec.write_text('kernel = "waits"\ngrid = 1\nblock = 32\nmax_instructions = 0\n')
    with pytest.raises(ConfigError, match="max_instructions is 0"):
        load_spec(spec)
    with pytest.raises(UsageError, match="not a positive number"):
        build_kernel_spec(LOOPS, "waits", grid=1, block=32, args=["n=1"], max_instructions=-3)
    code, _, err = cli(capsys, "analyze", str(LOOPS), "-k", "waits", "--grid", "1", "--block",
                       "32", "--arg", "n=1", "--max-instructions", "0")  # fmt: skip
    assert code == 2 and "--max-instructions" in one_error(err)


@pytest.mark.toolkit
def test_lanes_leaving_first_do_not_end_the_instance() -> None:
    """At a loop's latch the lanes that leave run their side first (the fall-through), deeper
    in the warp's stack than the loop: that is not the warp leaving the loop, whose weight and
    count must stay (the correlation's outer loop lost them at every lane's exit, and its inner
    loops then ran in full: 342 MB of trace per CTA instead of 78)."""
    from gpuadvise.ptx.emulator import KernelImage
    from gpuadvise.ptx.parser import parse_ptx
    from gpuadvise.ptx.sampling import LoopSampler

    module, k, _launch, _device = _compiled(*CORR, buffers=CORR_BUFFERS)
    image = KernelImage.build(parse_ptx(module.ptx), k.mangled, module.arch, 0)
    loops = image.program_loops()
    outer = max(loops, key=lambda lp: len(lp.blocks))
    regs = {name: np.zeros(64, np.uint32) for name in image.program.regs}
    s = LoopSampler(image.program, loops, regs, 2, 1000, lambda lp: "x", {})
    w = s.watches[outer.latch]
    ws = np.array([0, 1])
    w.cnt[ws] = 5
    w.depth[ws] = 0
    w.busy = True
    s.wmul[ws] = 3
    w.ff_k[ws] = 3
    outside = next(b.index for b in image.program.blocks if b.index not in outer.blocks)
    s.entering(outside, ws, np.array([1, 0]))  # warp 0: a side; warp 1: the whole warp
    assert w.cnt.tolist() == [5, 0] and s.wmul.tolist() == [3, 1]


def test_a_trace_saved_before_the_weights_loads(tmp_path: Path) -> None:
    """Traces saved before records carried ``extra`` load with every record weighing 1."""
    from gpuadvise.trace.access import RECORD, AccessTrace, record_weights

    old = np.dtype([(n, RECORD.fields[n][0]) for n in RECORD.names if n != "extra"])
    recs = np.zeros(3, old)
    recs["inst"] = [0, 0, 1]
    recs["mask"] = 0xFFFFFFFF
    t = AccessTrace(np.zeros(0, RECORD), (), (0,), 1, (1, 1, 1), (32, 1, 1), "emulator")
    t.save(tmp_path / "t.npz")
    with np.load(tmp_path / "t.npz") as z:
        meta = z["meta"]
    np.savez_compressed(tmp_path / "t.npz", records=recs, meta=meta)
    back = AccessTrace.load(tmp_path / "t.npz")
    assert back.records.dtype == RECORD and back.records["inst"].tolist() == [0, 0, 1]
    assert record_weights(back.records) is None and not back.sampled_iterations


@pytest.mark.toolkit
def test_nested_weights_stay_within_a_record() -> None:
    """A record's weight is a 32-bit count: a skip inside skips is cut so that the product of
    the weights never passes it (2**29 already: 6 periods of 8 skipped, not the 14 of 124
    iterations left)."""
    from gpuadvise.ptx.emulator import KernelImage
    from gpuadvise.ptx.parser import parse_ptx
    from gpuadvise.ptx.sampling import LoopSampler

    module, k, _launch, _device = _compiled(*CORR, buffers=CORR_BUFFERS)
    image = KernelImage.build(parse_ptx(module.ptx), k.mangled, module.arch, 0)
    loops = image.program_loops()
    outer = max(loops, key=lambda lp: len(lp.blocks))
    regs = {name: np.zeros(64, np.uint32) for name in image.program.regs}
    s = LoopSampler(image.program, loops, regs, 2, 1000, lambda lp: "x", {})
    w = s.watches[outer.latch]
    ws, c = np.array([0]), np.array([8])
    # the outer test j2 < 126 (at the latch: j2 before the increment) saw 0, 1, 2 in lane 0..31
    for t, v in ((6, 0), (7, 1), (8, 2)):
        w.ring[0, t % 3, :32] = v
        w.ring[1, t % 3, :32] = int(outer.b.value)
    s.wmul[0] = 1 << 29
    s._skip(w, ws, c, None)
    assert s.wmul[0] == (1 << 29) * 7 and int(s.extra[0]) == (1 << 29) * 7 - 1


@pytest.mark.toolkit
def test_a_loop_run_in_lockstep_is_sampled_and_counted() -> None:
    """Every warp at one block with all its lanes runs in the emulator's lockstep path: the
    sampling and the weights work there too (counts of the full run, exactly)."""
    from gpuadvise.trace.emulate import emulate

    module, k, launch, device = _compiled(
        "rowsum", "1", "64", "n=262144", buffers=("a=float[n]", "out=float[64]")
    )
    full = emulate(module, k, launch, device, sample_ctas="all", max_instructions=10**9)
    part = emulate(module, k, launch, device, sample_ctas="all", max_instructions=8_000)
    assert full.sampled_loops == () and len(part.sampled_loops) == 1
    assert len(part.trace.records) < len(full.trace.records) / 10
    assert _lines(part) == _lines(full)
    assert part.lane_instructions == full.lane_instructions
    assert part.simt is not None and full.simt is not None


@pytest.mark.toolkit
@CORR_GROUP
def test_a_first_cta_over_the_sample_cost_has_its_loops_sampled(monkeypatch) -> None:
    """Issue 31: the default sample's first CTA is always traced, however much it costs (HeCBench
    perplexity's one CTA took 14 CPU-s). Once its emulation has cost the sample's bound, its
    long loops are sampled whatever the warps' instructions, and the sample ends with it; the
    counts stay the full run's where the loop's accesses move by a fixed step. Under the bound
    nothing changes."""
    import gpuadvise.trace.emulate as em

    module, k, launch, device = _compiled(*CORR, buffers=CORR_BUFFERS)
    # a sample the user asked for is not capped: CTA 0 in full (a warp runs some 160,000
    # instructions, under the instruction budget's share)
    full = _corr_run("cta0")  # em.emulate(module, k, launch, device, sample_ctas=1)
    assert full.sampled_loops == ()
    # the default sample: CTA 0 alone costs more than the bound (its counts say 2.7 CPU-s,
    # past 2.5 near its end); at a fifth of it, most iterations are skipped
    monkeypatch.setattr(em, "DEFAULT_SAMPLE_EMU_NS", 500_000_000)
    part = em.emulate(module, k, launch, device)
    assert part.sampled_loops and part.ctas_run == (0,)
    assert any("the first alone passed the" in n for n in part.notes)
    assert len(part.trace.records) < len(full.trace.records) / 2
    assert _lines(part) == _lines(full)
    assert part.lane_instructions == full.lane_instructions
    # under the bound nothing changes: the first wave's 4 CTAs, every iteration
    monkeypatch.setattr(em, "DEFAULT_SAMPLE_EMU_NS", 10**12)
    wave = _corr_run("wave")  # em.emulate(module, k, launch, device)
    assert wave.sampled_loops == () and wave.ctas_run == (0, 1, 2, 3)
    assert not any("passed the" in n for n in wave.notes)


def test_the_cost_cap_reads_counts() -> None:
    from gpuadvise.trace.emu_cost import DEFAULT_SAMPLE_EMU_NS, NS_PER_OP
    from gpuadvise.trace.emulate import _over_sample_cost

    ops = DEFAULT_SAMPLE_EMU_NS // NS_PER_OP
    assert not _over_sample_cost(ops, 0, 0)
    assert _over_sample_cost(ops + 1, 0, 0)
    # a bound of its own (a variant's share, sample_emu_cost)
    assert not _over_sample_cost(ops // 10, 0, 0, bound=ops // 10 * NS_PER_OP)
    assert _over_sample_cost(ops // 10 + 1, 0, 0, bound=ops // 10 * NS_PER_OP)


@pytest.mark.toolkit
@CORR_GROUP
def test_a_first_cta_over_a_lowered_emulator_cost_has_its_loops_sampled(monkeypatch) -> None:
    """Issue 31: a variant's trace is bounded by its share of the kernel's emulator cost
    (sample_emu_cost), and its first CTA always runs. A first CTA that alone passes that share,
    where the share is under the default sample's own bound, has its long loops sampled from
    there, as the default sample's first CTA has past the default's bound (HeCBench glu's
    variant: 0.91 s of a 0.25 s share); the counts stay the full run's. A share over the
    default's bound does not raise the cap, and one the first CTA stays under changes nothing."""
    import gpuadvise.trace.emulate as em

    module, k, launch, device = _compiled(*CORR, buffers=CORR_BUFFERS)
    # CTA 0 costs about 2.7 s of the emulator's work: under a default bound raised out of its
    # way, the first wave's 4 CTAs run every iteration
    monkeypatch.setattr(em, "DEFAULT_SAMPLE_EMU_NS", 10**12)
    full = _corr_run("wave")  # em.emulate(module, k, launch, device)
    assert full.sampled_loops == () and full.ctas_run == (0, 1, 2, 3)
    with em.sample_emu_cost(500_000_000):
        part = em.emulate(module, k, launch, device)
    assert part.sampled_loops and part.ctas_run == (0,)
    assert any("the emulator cost it was given" in n and "0.5 CPU-s" in n for n in part.notes)
    cta0 = _corr_run("cta0")  # em.emulate(..., sample_ctas=1): CTA 0, every iteration
    assert len(part.trace.records) < len(cta0.trace.records) / 2
    assert _lines(part) == _lines(cta0)
    assert part.lane_instructions == cta0.lane_instructions
    # a share over the first CTA's cost: nothing is sampled (the share cuts CTAs, not loops)
    with em.sample_emu_cost(10**11):
        same = em.emulate(module, k, launch, device)
    assert same.sampled_loops == () and same.ctas_run == full.ctas_run
    # a share over the default's bound does not raise it: the default's cap holds
    monkeypatch.setattr(em, "DEFAULT_SAMPLE_EMU_NS", 500_000_000)
    with em.sample_emu_cost(10**12):
        capped = em.emulate(module, k, launch, device)
    assert capped.sampled_loops and capped.ctas_run == (0,)
    assert len(capped.trace.records) == len(part.trace.records)


@pytest.mark.toolkit
def test_a_loop_whose_sums_steer_the_kernel_is_not_sampled_past_the_cost(monkeypatch) -> None:
    """The cap samples only loops whose results steer nothing (gpuadvise.ptx.steering):
    bisect's inner sums decide its bisection and its break, as HeCBench perplexity's
    sigmas_kernel's do. Over the (lowered) bound its trace is the one under the bound, every
    iteration run; without the guard its lanes would take other paths."""
    import gpuadvise.trace.emulate as em
    from gpuadvise.ptx.emulator import KernelImage

    module, k, launch, device = _compiled(
        "bisect", "1", "32", "n=0", buffers=("d=float[8192]:random(0,1)", "out=float[32]")
    )
    whole = em.emulate(module, k, launch, device)
    assert whole.sampled_loops == ()
    monkeypatch.setattr(em, "DEFAULT_SAMPLE_EMU_NS", 20_000_000)
    guarded = em.emulate(module, k, launch, device)
    assert guarded.sampled_loops == () and guarded.ctas_run == whole.ctas_run
    assert not any("passed the" in n for n in guarded.notes)
    assert _lines(guarded) == _lines(whole)
    assert guarded.lane_instructions == whole.lane_instructions
    # the hazard the guard keeps out: sampled, the sums are wrong and the paths move
    monkeypatch.setattr(KernelImage, "steering_latches", lambda self: frozenset())
    unguarded = em.emulate(module, k, launch, device)
    assert unguarded.sampled_loops
    assert unguarded.lane_instructions != whole.lane_instructions


@pytest.mark.toolkit
def test_a_sampled_loops_splits_weigh_as_its_executions() -> None:
    """A branch that splits every warp in every iteration of a sampled loop: the weighted
    iteration's splits stand for the iterations it stands for, as its warp executions do, so the
    split counts and the SIMT efficiency are the full run's (they were the iterations run: a
    sampled loop looked far less divergent than it is)."""
    from gpuadvise.trace.emulate import emulate

    module, k, launch, device = _compiled(
        "oddsum", "1", "64", "n=262144", buffers=("a=float[n]", "out=float[65]:zeros")
    )
    full = emulate(module, k, launch, device, sample_ctas="all", max_instructions=10**9)
    part = emulate(module, k, launch, device, sample_ctas="all", max_instructions=20_000)
    assert full.sampled_loops == () and len(part.sampled_loops) == 1
    assert part.simt is not None and full.simt is not None

    def branches(p: Any) -> list[tuple[int, int, int, int]]:
        return [(b.line, b.warp_executions, b.splits, b.front_splits) for b in p.branches]

    got, want = branches(part.simt), branches(full.simt)
    assert sum(b[2] for b in want) == 2 * 4096  # two warps split in every iteration
    assert got == want
    assert part.simt.warp_instructions == full.simt.warp_instructions
    assert part.simt.thread_instructions == full.simt.thread_instructions


@pytest.mark.toolkit
def test_a_sampled_loops_scalar_runs_count_as_its_executions() -> None:
    """GA303's requests, sectors and L1 clocks of a sampled loop's scalar runs are the full
    run's: each record weighs the executions it stands for (they were the iterations run:
    HeCBench interleave's 131,072 requests read 50,176)."""
    from gpuadvise.rules.scalar_runs import (
        PieceGroup,
        SassAt,
        global_totals,
        piece_numbers,
        scalar_pieces,
    )
    from gpuadvise.trace.emulate import emulate

    module, k, launch, device = _compiled(
        "pairs", "1", "64", "n=0", buffers=("a=float[524288]", "out=float[64]")
    )
    full = emulate(module, k, launch, device, sample_ctas="all", max_instructions=10**9)
    part = emulate(module, k, launch, device, sample_ctas="all", max_instructions=20_000)
    assert full.sampled_loops == () and len(part.sampled_loops) == 1
    assert len(part.trace.records) < len(full.trace.records) / 10

    def numbers(e: Any) -> dict[str, Any]:
        pieces = tuple(scalar_pieces(e.trace, 2))  # one a copy of the body nvcc unrolled
        assert pieces and all(p.vector == 8 for p in pieces)
        totals, per_record = global_totals(e.trace.records)
        group = PieceGroup(pieces, "a", SassAt(0, 0, (), 2))
        return {**piece_numbers(e.trace, group, per_record), **totals}

    got, want = numbers(part), numbers(full)
    assert want["requests_before"] == 2 * 2 * 4096  # two loads, two warps, every iteration
    assert want["requests_after"] == 2 * 4096
    for key in ("requests_before", "requests_after", "requests_saved", "sectors_before",
                "sectors_after", "l1_clocks_saved", "executions", "l1_clocks_all"):  # fmt: skip
        assert got[key] == want[key], key


@pytest.mark.toolkit
def test_a_sampled_loops_view_keeps_what_its_full_runs_keeps(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The trace view's bounds (its lanes, a warp's lanes) count a sampled loop's records as
    the executions they stand for: the view of a sampled trace keeps the warps and the first
    iterations its full run's view keeps, weighted to the same counts (it kept every warp of
    the smaller trace, and weighed the loop as the iterations run)."""
    from gpuadvise.trace import view as view_mod
    from gpuadvise.trace.access import Space
    from gpuadvise.trace.emulate import emulate
    from gpuadvise.trace.view import TraceView, buffer_infos

    module, k, launch, device = _compiled(
        "pairs", "1", "64", "n=0", buffers=("a=float[524288]", "out=float[64]")
    )
    full = emulate(module, k, launch, device, sample_ctas="all", max_instructions=10**9)
    part = emulate(module, k, launch, device, sample_ctas="all", max_instructions=20_000)
    assert len(part.sampled_loops) == 1
    monkeypatch.setattr(view_mod, "MAX_WARP_LANES", 1 << 14)  # 512 records a warp
    # the full run's 2 warps hold 524,320 lanes: one is kept
    spec = _compiled.spec  # type: ignore[attr-defined]

    def view(e: Any) -> TraceView:
        return TraceView(e.trace, buffer_infos(e.trace, spec), max_lanes=1 << 18)

    a, b = view(full), view(part)
    # (the warps' sectors their own: one warp stands for the other)
    r = full.trace.records
    assert view_mod._warps_per_sector(r[r["space"] == int(Space.GLOBAL)]) == 1.0
    assert a.scale == 2.0 and b.scale == a.scale
    # (the sampled loop ran fewer iterations than the full view keeps: all of them are kept,
    # and its weighted records with them, together)
    assert len(b.records) <= len(a.records) + int((b.records["extra"] > 0).sum())
    every_a, every_b = np.arange(len(a.records)), np.arange(len(b.records))
    assert b.weighted(every_b) == pytest.approx(a.weighted(every_a))
    assert b.weighted(every_b, b.rec_sectors) == pytest.approx(a.weighted(every_a, a.rec_sectors))


@pytest.mark.toolkit
def test_a_cut_views_last_pass_is_no_varying_index(monkeypatch: pytest.MonkeyPatch) -> None:
    """GA309's reloads of a row a thread loads again in each pass are not "varying repeats"
    (a clamped index meeting itself only sometimes) where the view cut a warp's executions to
    its first ones: the cut ends inside a pass (a sampled loop's weighted pass, or a run's
    pass), its later addresses loaded once fewer than the others. HeCBench contraction's
    sampled view (its cut 14 of a weighted pass's 16 loads in) lost its line 44 to that
    filter, 240 loads of one address against 239 of another."""
    from gpuadvise.rules.repeats import same_thread_reloads, varying_repeats
    from gpuadvise.trace import view as view_mod
    from gpuadvise.trace.emulate import emulate
    from gpuadvise.trace.view import TraceView, buffer_infos

    module, k, launch, device = _compiled(
        "rereads", "1", "64", "n=16", buffers=("a=float[1024]", "out=float[64]")
    )
    full = emulate(module, k, launch, device, sample_ctas="all", max_instructions=10**9)
    part = emulate(module, k, launch, device, sample_ctas="all", max_instructions=20_000)
    assert full.sampled_loops == () and len(part.sampled_loops) == 1
    monkeypatch.setattr(view_mod, "MAX_WARP_LANES", 1 << 14)  # 512 executions a warp
    spec = _compiled.spec  # type: ignore[attr-defined]
    for e in (full, part):
        view = TraceView(e.trace, buffer_infos(e.trace, spec))
        rl = same_thread_reloads(view)
        assert len(rl)
        assert not varying_repeats(view, rl).any()
        if e is part:
            # the sampled run's cut reaches its weighted passes, kept together: no pass is cut
            assert not view.rec_cut.any()
            continue
        assert view.rec_cut.any()  # cut inside a pass: some addresses once fewer
        # without the cut's slack every reload would read as a varying index (as it did)
        view.rec_cut[:] = False
        assert varying_repeats(view, rl).all()


@pytest.mark.toolkit
def test_a_cut_views_warps_keep_a_broadcast_loops_reuse(monkeypatch: pytest.MonkeyPatch) -> None:
    """A CTA over the view's lane bound keeps every warp, each cut to fewer first iterations:
    its warps share the L1's lines, and a loop's broadcast loads (one address for every thread,
    HeCBench AIDW's ``dx[j]``) are the first warp's misses and the others' hits. The view kept
    one warp of 8 and scaled it 8x (AIDW: 35 GB of DRAM for a 1.2 MB loop, its compute-bound
    GA405 turned into a GA106); the full run's launch traffic and the sampled run's are the
    uncut view's (the sampled cut also counted its first weighted record as its 7 siblings':
    8x the sectors of a stride of 4 bytes)."""
    from gpuadvise.devices import preset
    from gpuadvise.rules.estimates import view_traffic
    from gpuadvise.trace import view as view_mod
    from gpuadvise.trace.access import Space
    from gpuadvise.trace.emulate import emulate
    from gpuadvise.trace.view import TraceView, buffer_infos

    module, k, launch, device = _compiled(
        "broadcast", "1", "256", "n=0", buffers=("x=float[4096]", "out=float[256]")
    )
    full = emulate(module, k, launch, device, sample_ctas="all", max_instructions=10**9)
    part = emulate(module, k, launch, device, sample_ctas="all", max_instructions=20_000)
    assert full.sampled_loops == () and len(part.sampled_loops) == 1
    spec = _compiled.spec  # type: ignore[attr-defined]
    dev = preset("H100")

    def traffic(v: TraceView) -> tuple[float, ...]:
        t = view_traffic(dev, v)
        return (t.l2_load_sectors, t.dram_bytes, t.l2_missing_load_requests,
                t.l1_pending_load_requests, t.load_requests, t.l1_cycles)  # fmt: skip

    # every warp reads every sector the CTA reads (a pick of some warps would count each 8x)
    for e in (full, part):
        r = e.trace.records
        # (but for each warp's own store of its sums)
        f = view_mod._warps_per_sector(r[r["space"] == int(Space.GLOBAL)])
        assert f == pytest.approx(8.0, rel=1e-3)
    whole = TraceView(full.trace, buffer_infos(full.trace, spec))
    assert whole.scale == 1.0 and not whole.iterations_sampled
    want = traffic(whole)
    assert want[0] == 4096 * 4 // 32  # x's 512 sectors, once for the CTA
    # 8 warps of 131,072 lanes over a bound of 262,144: each warp cut to its first iterations
    monkeypatch.setattr(view_mod, "MAX_WARP_LANES", 1 << 14)
    for e in (full, part):
        cut = TraceView(e.trace, buffer_infos(e.trace, spec), max_lanes=1 << 18)
        warps = np.unique(cut.records["warp"])
        assert len(warps) == 8 and cut.scale == 1.0
        assert len(cut.lanes) <= 1 << 18
        assert traffic(cut) == pytest.approx(want, rel=0.02)
        # (the full run's warps keep 64 of their 4,096 loads; the sampled run's cut reaches
        # its weighted records, and keeps them all: every execution is counted, none cut)
        assert cut.rec_cut.any() == (e is full)
    # under the bound, the sampled run's view cut to a warp's first iterations (past those the
    # sampler ran in full) keeps its weighted records together
    cut = TraceView(part.trace, buffer_infos(part.trace, spec))
    assert traffic(cut) == pytest.approx(want, rel=0.02)


@pytest.mark.toolkit
def test_a_nest_moving_by_whole_lines_runs_one_iteration_after_a_skip(monkeypatch) -> None:
    """Issue 31 (HeCBench contraction): a loop whose accesses all move by whole 128-byte lines
    an iteration takes one alignment, so one iteration after its skip stands for the skipped
    ones (not PERIOD = 8 of them): the nest's outer loop runs 9 of its 64 iterations, not 16
    (each a whole instance of the inner loop), and the counts are still the full run's, exactly."""
    import gpuadvise.ptx.sampling as sampling
    from gpuadvise.trace.emulate import emulate

    module, k, launch, device = _compiled(
        "nest", "1", "64", "n=0", buffers=("t=float[4194304]", "out=float[64]")
    )
    full = emulate(module, k, launch, device, sample_ctas="all", max_instructions=10**9)
    part = emulate(module, k, launch, device, sample_ctas="all", max_instructions=200_000)
    assert full.sampled_loops == () and len(part.sampled_loops) >= 1
    assert _lines(part) == _lines(full)
    assert part.lane_instructions == full.lane_instructions
    # the same run with PERIOD iterations after every skip (as before): the same counts, from
    # several times the records
    monkeypatch.setattr(
        sampling, "_periods", lambda w, lanes, cc, on: np.full(on.shape[0], sampling.PERIOD)
    )
    eight = emulate(module, k, launch, device, sample_ctas="all", max_instructions=200_000)
    assert _lines(eight) == _lines(full)
    assert eight.lane_instructions == full.lane_instructions
    # the outer loop (over a, two warps): 8 iterations, the skip, 1 (9 of 64), against 8, the
    # skip, 8 (16 of 64): 63 instances of the inner loop over b run fewer, each in full or
    # sampled as before (an innermost loop keeps PERIOD)
    outer = [t for t in part.sampled_loops if "loops.cu:184" in t]
    assert outer and "18 iterations run for 128" in outer[0]
    outer = [t for t in eight.sampled_loops if "loops.cu:184" in t]
    assert outer and "32 iterations run for 128" in outer[0]
    assert len(part.trace.records) < 0.8 * len(eight.trace.records)


def test_the_period_after_a_skip_follows_the_address_steps() -> None:
    """:func:`gpuadvise.ptx.sampling._periods`: the iterations an address's step takes to come
    back to its alignment in a 128-byte line, at most PERIOD; PERIOD where the lanes' steps
    differ or do not hold, or where an access's address is not read from a watched register."""
    from gpuadvise.ptx.sampling import PERIOD, _periods, _Watch

    def period(steps: list[int], second: list[int] | None = None, on: int = 32) -> int:
        w = _Watch(loop=None, regs=("%rd1",))  # type: ignore[arg-type]
        w.addrs = ("%rd1",)
        d0 = np.array(steps * (32 // len(steps)), np.int64)
        d1 = d0 if second is None else np.array(second * (32 // len(second)), np.int64)
        base = np.arange(32, dtype=np.int64) * 4 + (1 << 40)
        w.snaps = {"%rd1": np.stack([base, base + d0, base + d0 + d1]).astype(np.uint64)}
        lanes, cc = np.arange(32), np.full(32, 2)
        mask = (np.arange(32) < on).reshape(1, 32)
        got = _periods(w, lanes, cc, mask)
        assert got.shape == (1,)
        return int(got[0])

    assert period([4]) == PERIOD  # 4-byte elements: 32 alignments in a line, PERIOD as before
    assert period([16]) == PERIOD
    assert period([32]) == 4 and period([64]) == 2 and period([96]) == 4
    assert period([256]) == 1 and period([0]) == 1 and period([-128]) == 1
    assert period([-32]) == 4
    assert period([256, 260]) == PERIOD  # lanes whose steps differ
    assert period([256], [512]) == PERIOD  # a step that does not hold
    assert period([256] * 16 + [4] * 16, on=16) == 1  # the lanes out of the loop do not count
    w = _Watch(loop=None, regs=())  # type: ignore[arg-type]
    w.addrs = None  # a texture, a surface, a call or an address the loop writes unwatched
    assert _periods(w, np.arange(32), np.full(32, 2), np.ones((1, 32), bool))[0] == PERIOD


@pytest.mark.toolkit
def test_a_loop_whose_branches_follow_its_data_keeps_the_full_period() -> None:
    """A loop whose branch or predicated instruction tests a value the loop changes (a byte it
    loads: HeCBench chi2, contraction's ``adj_value > 0``) may send the skipped iterations
    another way than the one run: it keeps PERIOD (:func:`gpuadvise.ptx.sampling._address_regs`
    is None), and so does an innermost loop (rowsum). A nest's outer loops with only tests of
    values they do not change (nvcc's remainder tests before an unrolled inner loop) read their
    address registers."""
    from gpuadvise.ptx.emulator import KernelImage
    from gpuadvise.ptx.parser import parse_ptx
    from gpuadvise.ptx.sampling import LoopSampler

    def addrs(kernel: str) -> list[tuple[str, ...] | None]:
        module, k, _launch, _device = _compiled(kernel, "1", "64", "n=64")
        image = KernelImage.build(parse_ptx(module.ptx), k.mangled, module.arch, 0)
        loops = image.program_loops()
        regs = {
            name: np.zeros(64, np.uint64 if name.startswith("%rd") else np.uint32)
            for name in image.program.regs
        }
        s = LoopSampler(image.program, loops, regs, 2, 1000, lambda lp: "x", {})
        return [w.addrs for w in s.watches.values()]

    assert addrs("classify") == [None, None]  # the nest's outer loop holds the byte tests
    assert addrs("rowsum") == [None]  # an innermost loop keeps PERIOD
    got = addrs("nest")  # its outer loop reads its address registers, the inner one does not
    assert len(got) == 2 and sorted(a is None for a in got) == [False, True]
