"""The default sample's trace budget: a first wave whose trace would outgrow
:data:`~gpuadvise.trace.emulate.DEFAULT_SAMPLE_TRACE_BYTES` is cut to the CTAs that fit, with a
note; an explicit ``--sample-ctas`` is not cut."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpuadvise.devices import preset
from gpuadvise.source.signature import parse_signature
from gpuadvise.spec.kernel_spec import build_kernel_spec, resolve
from gpuadvise.toolchain import CompiledModule, CompileOptions, compile_source
from gpuadvise.trace import emulate as emulate_mod
from gpuadvise.trace.access import RECORD
from gpuadvise.trace.emulate import Emulation, emulate

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("sass_read_whole")]

BASIC = Path(__file__).resolve().parents[1] / "cuda" / "emu" / "basic.cu"
N = 1 << 20  # vec_add: 1024 CTAs of 1024 threads, 264 in the H100's first wave
RECORDS_PER_CTA = 3 * 32  # two loads and a store per warp, 32 warps


@pytest.fixture(scope="module")
def module(compile_cache: Path) -> CompiledModule:
    return compile_source(BASIC, CompileOptions(arch="sm_90", cache_dir=compile_cache))


def run(module: CompiledModule, sample: int | str | None) -> Emulation:
    spec = build_kernel_spec(
        BASIC,
        "vec_add",
        grid=N // 1024,
        block=1024,
        args=[f"n={N}"],
        buffers=[f"a=float[{N}]", f"b=float[{N}]", f"c=float[{N}]"],
        discover=False,
    )
    launch = resolve(spec, parse_signature(BASIC.read_text(), "vec_add"))
    return emulate(module, module.kernel("vec_add"), launch, preset("H100"), sample_ctas=sample)


def by_cta(e: Emulation) -> dict[int, np.ndarray]:
    """Each CTA's records as rows (inst, warp, mask, 32 addresses), sorted."""
    out = {}
    r = e.trace.records
    for c in np.unique(r["cta"]):
        part = r[r["cta"] == c]
        fields = [part[f].astype(np.uint64)[:, None] for f in ("inst", "warp", "mask")]
        rows = np.concatenate([*fields, part["addr"]], axis=1)
        out[int(c)] = rows[np.lexsort(rows.T[::-1])]
    return out


def test_a_first_wave_under_the_budget_is_traced_whole(module: CompiledModule) -> None:
    e = run(module, None)
    assert len(e.ctas_run) == 264 and len(e.trace.records) == 264 * RECORDS_PER_CTA
    assert not any("budget" in n for n in e.notes)


def test_the_first_wave_is_cut_to_the_ctas_that_fit(
    module: CompiledModule, monkeypatch: pytest.MonkeyPatch
) -> None:
    fit = 100
    monkeypatch.setattr(
        emulate_mod, "DEFAULT_SAMPLE_TRACE_BYTES", fit * RECORDS_PER_CTA * RECORD.itemsize + 50
    )
    e = run(module, None)
    assert e.ctas_run == tuple(range(fit)) and e.trace.ctas == tuple(range(fit))
    assert e.trace.scale == pytest.approx(1024 / fit) and not e.complete
    assert len(e.trace.records) == fit * RECORDS_PER_CTA
    note = next(n for n in e.notes if "budget" in n)
    assert f"traced {fit} of the first wave's 264 CTAs" in note and "--sample-ctas" in note
    # the same records as the first `fit` CTAs traced on request (batched differently)
    asked = run(module, fit)
    mine, theirs = by_cta(e), by_cta(asked)
    assert mine.keys() == theirs.keys() == set(range(fit))
    for c in mine:
        np.testing.assert_array_equal(mine[c], theirs[c])
    done = fit * 1024
    np.testing.assert_array_equal(
        e.outputs["c"][:done], e.inputs["a"][:done] + e.inputs["b"][:done]
    )


def test_a_lowered_budget_cuts_further_a_wave_the_default_cuts(
    module: CompiledModule, monkeypatch: pytest.MonkeyPatch
) -> None:
    """sample_trace_bytes (a variant's trace kept to the kernel's cost) cuts a first wave that
    the default budget cuts to every k-th of the CTAs the default keeps, the same records as
    those CTAs asked for; a wave the default traces whole stays whole; it never raises the
    budget, and an explicit sample is not cut."""
    fit = 40
    with emulate_mod.sample_trace_bytes(fit * RECORDS_PER_CTA * RECORD.itemsize + 50):
        assert len(run(module, None).ctas_run) == 264  # the default budget holds it whole
        monkeypatch.setattr(
            emulate_mod, "DEFAULT_SAMPLE_TRACE_BYTES", 100 * RECORDS_PER_CTA * RECORD.itemsize
        )
        e = run(module, None)
        asked = run(module, 300)
        with emulate_mod.sample_trace_bytes(1 << 40):  # never above the enclosing budget
            again = run(module, None)
    kept = tuple(range(0, 100, 3))  # every 3rd of the default's 100: 34 CTAs, about 40
    assert e.ctas_run == kept and again.ctas_run == e.ctas_run
    assert e.trace.scale == pytest.approx(1024 / len(kept))
    assert any(f"traced {len(kept)} of the first wave's 264 CTAs" in n for n in e.notes)
    mine, theirs = by_cta(e), by_cta(run(module, list(kept)))
    assert mine.keys() == theirs.keys()
    for c in mine:
        np.testing.assert_array_equal(mine[c], theirs[c])
    assert len(asked.ctas_run) == 300
    with emulate_mod.sample_trace_bytes(1 << 40):  # above the default: the default holds
        assert len(run(module, None).ctas_run) == 100


def test_a_lowered_cost_cuts_further_a_wave_the_default_cuts(
    module: CompiledModule, monkeypatch: pytest.MonkeyPatch
) -> None:
    """sample_trace_cost (a variant's trace kept to about the kernel's cost, in warp accesses
    plus warp steps) cuts a first wave that the default cuts anyway to every k-th of the CTAs
    the default keeps, as sample_trace_bytes does, with a note; a wave the default traces whole
    stays whole, the bound never rises, and an explicit sample is not cut."""
    one = run(module, 1)
    first = emulate_mod.trace_cost(len(one.trace.records), one.warp_steps)
    assert first > RECORDS_PER_CTA  # the steps count too
    with emulate_mod.sample_trace_cost(40 * first):
        assert len(run(module, None).ctas_run) == 264  # the default traces it whole
        monkeypatch.setattr(
            emulate_mod, "DEFAULT_SAMPLE_TRACE_BYTES", 100 * RECORDS_PER_CTA * RECORD.itemsize
        )
        e = run(module, None)
        asked = run(module, 300)
        with emulate_mod.sample_trace_cost(1 << 40):  # never above the enclosing bound
            again = run(module, None)
    kept = tuple(range(0, 100, 3))  # every 3rd of the default's 100: 34 CTAs, about 40
    assert e.ctas_run == kept and again.ctas_run == e.ctas_run
    assert any(
        f"traced {len(kept)} of the first wave's 264 CTAs" in n and "warp steps" in n
        for n in e.notes
    )
    mine, theirs = by_cta(e), by_cta(run(module, list(kept)))
    assert mine.keys() == theirs.keys()
    for c in mine:
        np.testing.assert_array_equal(mine[c], theirs[c])
    assert len(asked.ctas_run) == 300
    with emulate_mod.sample_trace_cost(1 << 40):  # above the default: the default holds
        assert len(run(module, None).ctas_run) == 100


def test_the_default_sample_is_bounded_by_its_cost(
    module: CompiledModule, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first wave whose cost (warp accesses plus warp steps, counted on its first CTA, which
    runs alone) is over DEFAULT_SAMPLE_COST keeps the CTAs that the cost affords, in runs of
    SAMPLE_RUN_CTAS consecutive CTAs, one at the start of each equal stretch of the wave: the same
    records as those CTAs asked for, extrapolated over the grid, with a note; ``wave`` traces
    the whole first wave; a wave under the cost is traced whole."""
    one = run(module, 1)
    per_cta = len(one.trace.records) + one.warp_steps
    assert len(one.trace.records) == RECORDS_PER_CTA and one.warp_steps > 0
    monkeypatch.setattr(emulate_mod, "DEFAULT_SAMPLE_COST", 40 * per_cta + per_cta // 2)
    e = run(module, None)
    starts = (0, 26, 52, 79, 105, 132, 158, 184, 211, 237)  # i * 264 // 10
    kept = tuple(c for s in starts for c in range(s, s + 4))  # 10 runs of 4
    assert e.ctas_run == kept and e.trace.ctas == kept and not e.complete
    assert e.trace.scale == pytest.approx(1024 / 40)
    assert len(e.trace.records) == 40 * RECORDS_PER_CTA
    note = next(n for n in e.notes if "cost" in n)
    assert "traced 40 of the first wave's 264 CTAs" in note and "--sample-ctas wave" in note
    mine, theirs = by_cta(e), by_cta(run(module, list(kept)))
    assert mine.keys() == theirs.keys() == set(kept)
    for c in mine:
        np.testing.assert_array_equal(mine[c], theirs[c])
    # below MIN_SAMPLE_CTAS the cost may stretch MIN_SAMPLE_STRETCH times: 4 x 5 CTAs' cost
    # affords 20 (5 runs of 4), 4 x 10 CTAs' 40, of which 32 are kept
    assert (emulate_mod.MIN_SAMPLE_CTAS, emulate_mod.MIN_SAMPLE_STRETCH) == (32, 4)
    monkeypatch.setattr(emulate_mod, "DEFAULT_SAMPLE_COST", 5 * per_cta + per_cta // 8)
    assert run(module, None).ctas_run == tuple(
        c for s in (0, 52, 105, 158, 211) for c in range(s, s + 4)
    )
    monkeypatch.setattr(emulate_mod, "DEFAULT_SAMPLE_COST", 10 * per_cta + per_cta // 8)
    assert run(module, None).ctas_run == tuple(
        c for i in range(8) for c in range(i * 264 // 8, i * 264 // 8 + 4)
    )
    whole = run(module, "wave")
    assert whole.ctas_run == tuple(range(264)) and not any("cost" in n for n in whole.notes)
    monkeypatch.setattr(emulate_mod, "DEFAULT_SAMPLE_COST", 264 * per_cta)
    assert run(module, None).ctas_run == tuple(range(264))


def test_spread_runs_keeps_neighbours_over_the_whole_wave() -> None:
    """Runs of consecutive CTAs (neighbours for the L2 synthesis), one at the start of each equal
    stretch of the wave (its mix), never more than afforded, never fewer than one."""
    from gpuadvise.trace.emulate import SAMPLE_RUN_CTAS, spread_runs

    wave = np.arange(100, dtype=np.int64)
    assert spread_runs(wave, 100).tolist() == wave.tolist()
    assert spread_runs(wave, 500).tolist() == wave.tolist()
    assert spread_runs(wave, 0).tolist() == [0] and spread_runs(wave, 3).tolist() == [0, 1, 2]
    for afford in (4, 9, 17, 40, 99):
        got = spread_runs(wave, afford)
        assert 0 < len(got) <= afford and got[0] == 0 and np.all(np.diff(got) > 0)
        runs = np.split(got, np.flatnonzero(np.diff(got) > 1) + 1)  # runs that touch merge
        assert all(len(r) >= SAMPLE_RUN_CTAS for r in runs)
        if afford < 50:  # runs apart
            assert len(runs) == afford // SAMPLE_RUN_CTAS == len(got) // SAMPLE_RUN_CTAS
        starts = [int(r[0]) for r in runs]
        if afford < 50:  # one run a stretch of the wave
            assert starts == [i * 100 // len(runs) for i in range(len(runs))]
    assert spread_runs(wave[10:], 8).tolist() == [10, 11, 12, 13, 55, 56, 57, 58]


def test_an_explicit_sample_is_not_cut(
    module: CompiledModule, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(emulate_mod, "DEFAULT_SAMPLE_TRACE_BYTES", 10 * RECORD.itemsize)
    e = run(module, 300)
    assert len(e.ctas_run) == 300 and len(e.trace.records) == 300 * RECORDS_PER_CTA
    assert not any("budget" in n for n in e.notes)


SKIP_FIRST = """
__global__ void skip_first(const float* a, float* c, int n) {
  if (blockIdx.x == 0) return;
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i];
}
"""


def test_a_batch_that_overflows_is_dropped_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # CTA 0 makes no record, so it predicts nothing: the batches of 64 CTAs (64 x 1024 lanes)
    # run until one outgrows the budget, and that one is dropped
    src = tmp_path / "skip_first.cu"
    src.write_text(SKIP_FIRST)
    mod = compile_source(src, CompileOptions(arch="sm_90", cache_dir=tmp_path / "cache"))
    per_cta = 2 * 32  # a load and a store per warp
    monkeypatch.setattr(emulate_mod, "DEFAULT_SAMPLE_TRACE_BYTES", 150 * per_cta * RECORD.itemsize)
    spec = build_kernel_spec(
        src, "skip_first", grid=N // 1024, block=1024, args=[f"n={N}"],
        buffers=[f"a=float[{N}]", f"c=float[{N}]"], discover=False,
    )  # fmt: skip
    launch = resolve(spec, parse_signature(SKIP_FIRST, "skip_first"))
    e = emulate(mod, mod.kernel("skip_first"), launch, preset("H100"), sample_ctas=None)
    # batches: CTA 0 alone, 1-64, 65-128, then 129-192 would pass 150 CTAs' worth of records
    assert e.ctas_run == tuple(range(129)) and e.trace.ctas == tuple(range(129))
    assert len(e.trace.records) == 128 * per_cta
    assert set(np.unique(e.trace.records["cta"])) == set(range(1, 129))
    assert any("traced 129 of the first wave's 264 CTAs" in n for n in e.notes)


def test_a_view_of_one_cta_over_its_bound_keeps_some_warps(module: CompiledModule) -> None:
    from gpuadvise.trace.view import TraceView

    e = run(module, 1)  # one CTA: 32 warps, 3 x 1024 lanes
    whole = TraceView(e.trace, {})
    assert len(whole.lanes) == 3 * 1024 and whole.scale == 1024
    view = TraceView(e.trace, {}, max_lanes=1000)  # 10 of the 32 warps fit
    warps = np.unique(view.records["warp"])
    assert len(warps) == 10 and warps[0] == 0 and warps[-1] == 31
    assert len(view.lanes) == 3 * 10 * 32
    assert view.scale == pytest.approx(1024 * 32 / 10)


def test_a_first_cta_over_the_budget_is_kept_alone(
    module: CompiledModule, monkeypatch: pytest.MonkeyPatch
) -> None:
    """llm.c's softmax: one CTA's trace (1.2 million warp accesses) is over the default sample's
    budget, but within the memory share: that CTA alone is traced, with the note, not nothing."""
    monkeypatch.setattr(emulate_mod, "DEFAULT_SAMPLE_TRACE_BYTES", RECORDS_PER_CTA * 100)
    e = run(module, None)
    assert e.ctas_run == (0,) and e.trace.ctas == (0,)
    assert len(e.trace.records) == RECORDS_PER_CTA
    note = next(n for n in e.notes if "budget" in n)
    assert "traced 1 of the first wave's 264 CTAs" in note


def test_warp_accesses_count_what_a_trace_holds(module: CompiledModule) -> None:
    """Emulation.warp_accesses (what --tracer auto reads from an untraced CTA) is the number of
    records the trace of the same CTAs holds."""
    traced = run(module, 5)
    assert traced.warp_accesses == len(traced.trace.records) == 5 * RECORDS_PER_CTA


def test_run_seconds_exclude_the_set_up(module: CompiledModule) -> None:
    """Emulation.run_s (what --tracer auto scales) counts the batches' runs only."""
    e = run(module, 3)
    assert 0.0 < e.run_s <= e.time_s


GROW = """
__global__ void grow(const float* a, float* c) {
  float s = 0.0f;
  for (int k = 0; k < 4 + (int)blockIdx.x / 8; ++k) s += a[k * 32 + threadIdx.x];
  c[blockIdx.x * 32 + threadIdx.x] = s;
}
"""


def test_ctas_that_grow_keep_most_of_the_budget(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Later CTAs make more accesses than the first (a causal attention's rows): after the first
    CTA the batches are a quarter of what it predicts fits, so the batch that overflows, dropped
    whole, leaves the CTAs before it (a single batch of the rest left 1 CTA)."""
    src = tmp_path / "grow.cu"
    src.write_text(GROW)
    mod = compile_source(src, CompileOptions(arch="sm_90", cache_dir=tmp_path / "cache"))
    # CTA b: 4 + b // 8 loads and one store, one warp; the budget fits 40 of CTA 0's 5 records
    monkeypatch.setattr(emulate_mod, "DEFAULT_SAMPLE_TRACE_BYTES", 200 * RECORD.itemsize)
    spec = build_kernel_spec(
        src, "grow", grid=64, block=32, args=[], buffers=["a=float[4096]", "c=float[2048]"],
        discover=False,
    )  # fmt: skip
    launch = resolve(spec, parse_signature(GROW, "grow"))
    e = emulate(mod, mod.kernel("grow"), launch, preset("H100"), sample_ctas=None)
    per_cta = [5 + b // 8 for b in range(64)]
    kept = len(e.ctas_run)
    assert kept > 10 and sum(per_cta[:kept]) <= 200 < sum(per_cta[: kept + 10])
    assert len(e.trace.records) == sum(per_cta[:kept])
    cut = [n for n in e.notes if "default sample's budget" in n]
    assert len(cut) == 1 and f"traced {kept} of the first wave's 64 CTAs" in cut[0]


def test_a_batch_of_ctas_costs_its_accesses_and_its_steps_once() -> None:
    """batched_cost: the first CTA alone, then batches of a quarter of the CTAs; each CTA's
    accesses, each batch's steps (its warps step together), not each CTA's."""
    # 32 CTAs: the first alone, then 31 in batches of 8: 5 batches' steps
    assert emulate_mod.batched_cost(32, 5700, 1695, 64) == 32 * 5700 + 5 * 1695 == 190_875
    # batches of at most per_batch CTAs: the first, then 31 in batches of 2
    assert emulate_mod.batched_cost(32, 10, 100, 2) == 320 + 17 * 100
    assert emulate_mod.batched_cost(1, 10, 100, 64) == 110


def test_the_default_sample_is_bounded_by_the_emulators_cpu(
    module: CompiledModule, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A first wave whose emulation (gpuadvise.trace.emu_cost, counted on its first CTA, which
    runs alone) would cost more than DEFAULT_SAMPLE_EMU_NS keeps the CTAs it affords, spread
    over the wave as the access cost keeps them, in batches as large as a quarter of the
    sample's bytes allows: the same records as those CTAs asked for, with a note that says
    what a CTA costs; under the bound nothing changes."""
    from gpuadvise.trace import emu_cost

    one = run(module, 1)
    assert one.cta_cost is None  # a sample asked for: no default sample's first CTA
    whole = run(module, None)
    unit = whole.cta_cost
    assert unit is not None and unit.records == RECORDS_PER_CTA and unit.lanes == 1024
    assert unit.ops > 0 and unit.steps == one.warp_steps and unit.per_batch == 64
    for name in ("NS_PER_LANE_OP", "NS_PER_RECORD", "NS_PER_STEP"):
        monkeypatch.setattr(emu_cost, name, 0)
    monkeypatch.setattr(emu_cost, "NS_PER_OP", 1)  # a batch costs its instructions alone
    # the whole wave (the first CTA, then 4 batches of 64 and one of 7): 6 CTAs' cost
    monkeypatch.setattr(emulate_mod, "DEFAULT_SAMPLE_EMU_NS", 6 * unit.ops)
    assert run(module, None).ctas_run == whole.ctas_run == tuple(range(264))
    # 2.5: the first CTA, then one batch of 64 (the most a batch holds): 16 runs of 4
    monkeypatch.setattr(emulate_mod, "DEFAULT_SAMPLE_EMU_NS", 5 * unit.ops // 2)
    e = run(module, None)
    kept = tuple(int(c) for c in emulate_mod.spread_runs(np.arange(264), 65))
    assert len(kept) == 64 and e.ctas_run == kept and not e.complete
    note = next(n for n in e.notes if "emulator's work" in n)
    assert "traced 64 of the first wave's 264 CTAs" in note and f"{unit.ops:,} instructions" in note
    mine, theirs = by_cta(e), by_cta(run(module, list(kept)))
    assert mine.keys() == theirs.keys() == set(kept)
    for c in mine:
        np.testing.assert_array_equal(mine[c], theirs[c])
    # below MIN_SAMPLE_CTAS the bound stretches MIN_SAMPLE_STRETCH times, as the access cost's
    # does: a bound of one batch keeps 32 CTAs (the first, then one batch of 31) ...
    monkeypatch.setattr(emulate_mod, "DEFAULT_SAMPLE_EMU_NS", unit.ops)
    spread = tuple(int(c) for c in emulate_mod.spread_runs(np.arange(264), 32))
    assert run(module, None).ctas_run == spread
    # ... and one that the stretched bound does not let a second batch in, the first CTA alone
    monkeypatch.setattr(emulate_mod, "DEFAULT_SAMPLE_EMU_NS", unit.ops // 4)
    assert run(module, None).ctas_run == (0,)
    assert len(run(module, "wave").ctas_run) == 264  # the whole wave, asked for: not cut


def test_the_emulation_counts_its_emulator_cost(module: CompiledModule) -> None:
    """Emulation.emu_cost: the kept batches' work costed (emu_cost.emulator_cost), a count: the
    default sample's first CTA alone costs what its CtaCost says, the default sample what its
    batches add up to, the same on a second run."""
    one = run(module, 1)
    e = run(module, None)
    unit = e.cta_cost
    assert unit is not None
    assert one.emu_cost == unit.batch_ns(1)  # one CTA: its steps, instructions and records
    assert e.emu_cost > unit.batch_ns(1) and e.emu_cost == run(module, None).emu_cost


def test_a_lowered_emulator_cost_cuts_further_a_wave_the_default_cuts(
    module: CompiledModule, monkeypatch: pytest.MonkeyPatch
) -> None:
    """sample_emu_cost (a variant's emulation kept to about the kernel's emulator cost) cuts a
    first wave that the default cuts anyway to every k-th of the CTAs the default keeps, as
    sample_trace_cost does, until their batches' cost (emu_cost.sample_ns of the first CTA's
    counts) fits, with a note; a wave the default traces whole stays whole, the bound never
    rises, the first CTA always runs, and an explicit sample is not cut."""
    from gpuadvise.trace.emu_cost import sample_ns

    unit = run(module, None).cta_cost
    assert unit is not None
    kept = tuple(range(0, 100, 3))  # every 3rd of the default's 100: 34 CTAs
    limit = sample_ns(unit, len(kept), max(1, min(unit.per_batch, -(-len(kept) // 4))))
    with emulate_mod.sample_emu_cost(limit):
        assert len(run(module, None).ctas_run) == 264  # the default traces it whole
        monkeypatch.setattr(
            emulate_mod, "DEFAULT_SAMPLE_TRACE_BYTES", 100 * RECORDS_PER_CTA * RECORD.itemsize
        )
        e = run(module, None)
        asked = run(module, 300)
        with emulate_mod.sample_emu_cost(1 << 62):  # never above the enclosing bound
            again = run(module, None)
        with emulate_mod.sample_emu_cost(1):  # under the first CTA: it runs all the same
            least = run(module, None)
    assert e.ctas_run == kept and again.ctas_run == e.ctas_run
    assert least.ctas_run == (0,)
    assert e.emu_cost <= limit
    assert any(
        f"traced {len(kept)} of the first wave's 264 CTAs" in n and "emulator" in n for n in e.notes
    )
    mine, theirs = by_cta(e), by_cta(run(module, list(kept)))  # type: ignore[arg-type]
    assert mine.keys() == theirs.keys()
    for c in mine:
        np.testing.assert_array_equal(mine[c], theirs[c])
    assert len(asked.ctas_run) == 300
    with emulate_mod.sample_emu_cost(1 << 62):  # above the default: the default holds
        assert len(run(module, None).ctas_run) == 100
