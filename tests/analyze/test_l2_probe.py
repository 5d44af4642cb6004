"""The L2 model's probe of the middle of a 2D grid is bounded: ``--l2-probe-ctas N`` sets how many
CTAs it traces besides the sample (0: none), and without it ``--sample-ctas N`` bounds it (at most
N, at most 64); a bad count is a one-line usage error. The traced probe on ``kernels/tile_gather``
(8 sampled CTAs on the frame's top edge) needs nvcc (the toolkit wheels), no GPU."""

from __future__ import annotations

import pytest
from clikit import cli_run
from rulekit import KERNELS, needs_toolkit

from gpuadvise.analyze.models import INTERIOR_CTAS, l2_probe_size
from gpuadvise.analyze.options import parse_l2_probe_ctas
from gpuadvise.errors import UsageError

GATHER = KERNELS / "tile_gather" / "gather.cu"


def test_probe_size():
    assert l2_probe_size(None, None) == INTERIOR_CTAS  # first wave: as before
    assert l2_probe_size("all", None) == INTERIOR_CTAS  # (a complete trace needs none)
    assert l2_probe_size(1, None) == 1  # --sample-ctas bounds it
    assert l2_probe_size(8, None) == 8
    assert l2_probe_size(1000, None) == INTERIOR_CTAS
    assert l2_probe_size(1, 16) == 16  # said explicitly: as said
    assert l2_probe_size(None, 0) == 0


def test_parse_probe_count():
    assert parse_l2_probe_ctas(None) is None
    assert parse_l2_probe_ctas("0") == 0 and parse_l2_probe_ctas("12") == 12
    for bad in ("-1", "x", "1.5"):
        with pytest.raises(UsageError, match="--l2-probe-ctas"):
            parse_l2_probe_ctas(bad)


def test_bad_probe_count_is_a_usage_error():
    r = cli_run("analyze", str(GATHER), "--l2-probe-ctas", "many")
    assert r.returncode == 2
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --l2-probe-ctas 'many'"), r.stderr


def _gather(probe: int | None) -> tuple[str, ...]:
    from rulekit import analyze_lazily

    from gpuadvise.analyze.options import KernelOptions, build

    args = ("w=1024", "h=512", "r=64", "step=64")  # 3x3 samples a pixel: a quick trace
    spec, choice, options = build(KernelOptions(source=str(GATHER), gpu="H100", args=args))
    a = analyze_lazily(
        spec, choice.device, options, sample_ctas=2, models=("l2",), l2_probe_ctas=probe
    )
    assert a.memory is not None and a.memory.error is None
    return a.memory.notes


@needs_toolkit
def test_probe_traces_as_many_ctas_as_asked():
    notes = _gather(4)  # two rows of two
    (probe,) = [n for n in notes if "middle of the grid" in n]
    assert probe.startswith("the L2 model also traced 4 CTAs") and "--l2-probe-ctas" in probe
    (probe,) = [n for n in _gather(1) if "middle of the grid" in n]
    assert probe.startswith("the L2 model also traced 1 CTA in")
    assert not [n for n in _gather(0) if "middle of the grid" in n]


def test_probe_within_the_default_samples_trace_budget():
    """The default sample's probe takes at most L2_PROBE_TRACE_BYTES of trace, counted at the
    sampled CTAs' bytes per CTA (a naive SGEMM's CTAs: ~18 MB each), with a note saying so."""

    from gpuadvise.analyze.models import L2_PROBE_TRACE_BYTES, _probe_within_budget
    from gpuadvise.trace.access import RECORD

    def emu(ctas: int, records_per_cta: int) -> tuple[int, int]:
        return ctas, ctas * records_per_cta * RECORD.itemsize

    small = emu(4, 100)  # a few KB per CTA: the whole probe fits
    assert _probe_within_budget(*small, INTERIOR_CTAS) == (INTERIOR_CTAS, ())
    per_cta = L2_PROBE_TRACE_BYTES // 10 // RECORD.itemsize + 1  # just over a tenth each
    probe, notes = _probe_within_budget(*emu(2, per_cta), INTERIOR_CTAS)
    assert probe == 9
    assert len(notes) == 1 and "at most 9 of 64 CTAs" in notes[0] and "--sample-ctas" in notes[0]
    assert _probe_within_budget(*emu(2, per_cta), 0) == (0, ())
    assert _probe_within_budget(*emu(0, 0), 5) == (5, ())


@needs_toolkit
def test_rules_probe_gets_the_budgets_cut(monkeypatch):
    """The probe size handed to the rules (GA304 traces a probe of its own) is the one the
    default sample's budget cut, not the unbounded default: a naive SGEMM's GA304 probe traced
    64 CTAs of 18 MB each when the L2 model's own probe was cut to 8."""
    from rulekit import analyze_lazily

    from gpuadvise.analyze import models
    from gpuadvise.analyze.options import KernelOptions, build
    from gpuadvise.trace.access import RECORD

    args = ("w=1024", "h=512", "r=64", "step=64")
    spec, choice, options = build(KernelOptions(source=str(GATHER), gpu="H100", args=args))
    monkeypatch.setattr(models, "L2_PROBE_TRACE_BYTES", 3 * 16 * RECORD.itemsize)
    a = analyze_lazily(spec, choice.device, options, models=("l2",))
    assert a.memory is not None and a.memory.error is None and not a.memory.complete
    assert 0 <= a.memory.l2_probe_ctas < INTERIOR_CTAS
    (cut,) = [n for n in a.memory.notes if "probe of the middle of the grid traced at most" in n]
    assert f"at most {a.memory.l2_probe_ctas} of {INTERIOR_CTAS} CTAs" in cut


def test_the_probe_is_bounded_by_its_cpu_share_and_noted_where_the_grid_has_a_middle():
    """The probe's CTAs within its share of the emulator's CPU (emu_cost.L2_PROBE_EMU_NS) at the
    default sample's first CTA's cost, with a note; no bound without that cost (a sample asked
    for); a grid of one CTA row has no middle to probe (HeCBench binomialOptions' note said
    "traced at most 35 of 64 CTAs" where no probe ran)."""
    from types import SimpleNamespace

    from gpuadvise.analyze.models import _has_interior, _probe_within_cpu
    from gpuadvise.trace import emu_cost

    share = emu_cost.L2_PROBE_EMU_NS
    # a CTA of 1,000 steps and 10,000 instructions: 0.25 CPU-s alone
    unit = emu_cost.CtaCost(ops=10_000, lanes=256, records=0, steps=1_000, per_batch=1)
    assert unit.batch_ns(1) * 2 <= share < unit.batch_ns(1) * 3
    probe, notes = _probe_within_cpu(unit, INTERIOR_CTAS)
    assert probe == 2 and len(notes) == 1 and f"at most 2 of {INTERIOR_CTAS} CTAs" in notes[0]
    assert "10,000 instructions in 1,000 steps" in notes[0]
    assert _probe_within_cpu(None, INTERIOR_CTAS) == (INTERIOR_CTAS, ())
    assert _probe_within_cpu(unit, 0) == (0, ())
    cheap = emu_cost.CtaCost(ops=10, lanes=32, records=1, steps=2, per_batch=64)
    assert _probe_within_cpu(cheap, INTERIOR_CTAS) == (INTERIOR_CTAS, ())

    def emu(grid: tuple[int, int, int]) -> SimpleNamespace:
        return SimpleNamespace(trace=SimpleNamespace(grid=grid))

    assert not _has_interior(emu((1024, 1, 1)))
    assert _has_interior(emu((64, 32, 1))) and _has_interior(emu((64, 1, 2)))


@needs_toolkit
def test_probe_emulated_without_the_models_gives_the_same_l2_model(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The interior probe's CTAs are emulated with ``models=False`` (the L2 model reads their
    global records alone): the same L2 model as with the models, probe included."""
    from typing import Any

    from rulekit import analyze_lazily

    from gpuadvise.analyze.options import KernelOptions, build
    from gpuadvise.trace.tracer import EmulatorTracer

    args = ("w=1024", "h=512", "r=64", "step=64")
    spec, choice, options = build(KernelOptions(source=str(GATHER), gpu="H100", args=args))
    real = EmulatorTracer.run
    asked: list[bool] = []

    def run(
        self: EmulatorTracer, *a: Any, models: bool = True, force: bool | None = None, **k: Any
    ) -> Any:
        asked.append(models)
        return real(self, *a, models=models if force is None else force, **k)

    def l2(force: bool | None) -> Any:
        asked.clear()
        monkeypatch.setattr(
            EmulatorTracer, "run", lambda self, *a, **k: run(self, *a, force=force, **k)
        )
        a = analyze_lazily(
            spec, choice.device, options, sample_ctas=2, models=("l2",), l2_probe_ctas=4
        )
        assert a.memory is not None and a.memory.l2 is not None
        assert [n for n in a.memory.notes if "middle of the grid" in n]
        return a.memory.l2

    got = l2(None)
    assert asked == [True, False]  # the sample with the models, the probe without
    assert l2(True) == got  # the probe emulated with the models: the same model
