"""The L2 model computed in a forked child beside the analysis (:mod:`gpuadvise.analyze.l2_behind`):
the child's value is the one computed in line (the model, its notes, where they go), a child that
dies, raises or cannot be made leaves it to this process, and the rules that read it wait for it
last, in this process, while the others run (in the rules' forked child too). The traced cases
need nvcc (the toolkit wheels), no GPU."""

from __future__ import annotations

import dataclasses
import os
import signal
from typing import Any

import pytest
from rulekit import KERNELS, needs_toolkit

import gpuadvise.analyze.l2_behind as behind_mod
import gpuadvise.rules.evaluate as rule_evaluate
from gpuadvise.analyze.l2_behind import L2Behind

GATHER = KERNELS / "tile_gather" / "gather.cu"


def test_the_value_is_computed_in_another_process() -> None:
    b = L2Behind(lambda: ("made in", os.getpid())).start()
    assert b.result() == ("made in", b.result()[1])
    assert b.result()[1] != os.getpid() and not b.computed_here
    assert b.child_cpu_s >= 0.0 and b.waited_s >= 0.0


def test_what_raises_in_the_child_raises_here() -> None:
    def compute() -> Any:
        raise ValueError(f"in {os.getpid()}")

    b = L2Behind(compute).start()
    with pytest.raises(ValueError, match=f"in {os.getpid()}$"):
        b.result()
    assert b.computed_here


def test_a_child_that_dies_leaves_the_model_here() -> None:
    parent = os.getpid()

    def compute() -> Any:
        if os.getpid() != parent:
            os.kill(os.getpid(), signal.SIGKILL)
        return "here"

    b = L2Behind(compute).start()
    assert b.result() == "here" and b.computed_here
    assert b.result() == "here"  # kept: computed once


def test_a_fork_that_fails_computes_here(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_fork() -> int:
        raise OSError("no fork")

    monkeypatch.setattr(os, "fork", no_fork)
    b = L2Behind(lambda: os.getpid()).start()
    assert b.result() == os.getpid() and b.computed_here


def test_a_stuck_child_is_killed_and_the_model_computed_here(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    parent = os.getpid()

    def compute() -> Any:
        if os.getpid() != parent:
            signal.pause()  # never sends anything
        return "here"

    monkeypatch.setattr(behind_mod, "CHILD_WAIT_S", 0.5)
    b = L2Behind(compute).start()
    assert b.result() == "here" and b.computed_here


def test_closed_unasked_the_child_ends() -> None:
    parent = os.getpid()

    def compute() -> Any:
        if os.getpid() != parent:
            signal.pause()
        return None

    b = L2Behind(compute).start()
    share = b._share
    assert share is not None and share.pid is not None
    pid = share.pid
    b.close()
    with pytest.raises(ChildProcessError):  # killed and reaped
        os.waitpid(pid, os.WNOHANG)


def test_asked_in_a_forked_process_it_is_computed_there() -> None:
    """A forked rules child has no reader thread of the L2 child's pipe: it computes."""
    b = L2Behind(lambda: os.getpid()).start()
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the forked process
        os.close(r)
        ok = b.result() == os.getpid()
        os.write(w, b"1" if ok else b"0")
        os._exit(0)
    os.close(w)
    got = os.read(r, 1)
    os.close(r)
    os.waitpid(pid, 0)
    assert got == b"1"
    assert b.result() not in (os.getpid(), pid)  # here: the L2 child's


QUICK = ("w=1024", "h=512", "r=64", "step=64")  # 3x3 samples a pixel: a quick trace
WIDE = ("w=4096", "h=2048", "r=64", "step=64")  # the same, 64 MB of buffers (more than the L2)


def _gather(l2_behind: bool, args: tuple[str, ...] = QUICK) -> Any:
    from gpuadvise.analyze.options import KernelOptions, build
    from gpuadvise.analyze.pipeline import analyze_kernel

    spec, choice, options = build(KernelOptions(source=str(GATHER), gpu="H100", args=args))
    return analyze_kernel(
        spec,
        choice.device,
        options,
        sample_ctas=2,
        registers=False,
        l2_probe_ctas=4,
        l2_behind=l2_behind,
    )


@needs_toolkit
def test_the_model_behind_is_the_model_in_line() -> None:
    inline = _gather(False).memory
    pending = _gather(True).memory
    assert inline.l2 is not None and inline.l2_behind is None
    assert pending.l2 is None and pending.l2_behind is not None
    done = pending.with_l2()
    assert done.l2_behind is None and not pending.l2_behind.computed_here
    assert done.l2.to_json() == inline.l2.to_json()
    assert repr(done.l2) == repr(inline.l2)
    assert done.l2_unavailable == inline.l2_unavailable

    def timeless(notes: tuple[str, ...]) -> list[str]:  # the probe's note says its seconds
        return [n.split(" in ")[0] if "middle of the grid" in n else n for n in notes]

    assert timeless(done.notes) == timeless(inline.notes)
    assert any("middle of the grid" in n for n in done.notes[-3:])  # last, as in line


@needs_toolkit
def test_the_rules_that_read_it_wait_last_in_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """GA304 reads the model still being computed: it runs after every other rule, here, never
    in the rules' forked child; the run is the one of the model computed in line."""
    from gpuadvise.analyze.evaluate import rule_context
    from gpuadvise.rules.config import Config
    from gpuadvise.rules.context import RuleContext

    analysis = _gather(False)
    cfg = Config(trace_ctas=2)
    context = rule_context(analysis, cfg, lazy_models=False)
    models = context.models
    asked: list[tuple[int, int]] = []  # (pid, rules run here when asked)
    ran_here: list[str] = []
    real_run_rule = rule_evaluate._run_rule

    def run_rule(rule: Any, *a: Any, **k: Any) -> Any:
        out = real_run_rule(rule, *a, **k)
        ran_here.append(rule.id)
        return out

    def l2_later() -> tuple[Any, str | None]:
        asked.append((os.getpid(), len(ran_here)))
        return models.l2, None

    later = RuleContext(
        analysis.facts(),
        dataclasses.replace(models, l2=None, later={"l2": l2_later}),
        context.services,
    )
    monkeypatch.setattr(rule_evaluate, "FORK_AFTER_CPU_S", 0.0)
    monkeypatch.setattr(rule_evaluate, "_run_rule", run_rule)
    one = rule_evaluate.evaluate_rules(context, cfg, processes=1)
    ran_here.clear()
    two = rule_evaluate.evaluate_rules(later, cfg, processes=2)
    assert [f.to_dict() for f in two.findings] == [f.to_dict() for f in one.findings]
    assert two.notes == one.notes and two.skipped == one.skipped
    assert asked and {pid for pid, _ in asked} == {os.getpid()}
    assert "GA304" in two.rules_run and "GA304" not in two.child.get("rules", ())
    here = [r for r in ran_here if r not in two.child.get("rules", ())]
    assert here[-1] == "GA304"  # last of this process's rules


@needs_toolkit
@pytest.mark.parametrize("processes", [1, 2])
def test_the_variants_they_name_ahead_are_told_before_the_model_is_read(
    monkeypatch: pytest.MonkeyPatch, processes: int
) -> None:
    """GA304 names its tiled candidates (``Rule.variants_ahead``) before it reads the model
    still being computed: ``on_variants_ahead`` hears of them in this process before the model
    is asked for (``analyze --measure`` compiles them for the GPU meanwhile), once, and in one
    process before any rule's findings are told; the findings are those of the run without the
    hook."""
    from gpuadvise.analyze.evaluate import rule_context
    from gpuadvise.rules.config import Config
    from gpuadvise.rules.context import RuleContext

    analysis = _gather(False, WIDE)  # (buffers that fit the L2: nothing named ahead)
    cfg = Config(trace_ctas=2)
    context = rule_context(analysis, cfg, lazy_models=False)
    models = context.models
    events: list[tuple[str, int, Any]] = []

    def l2_later() -> tuple[Any, str | None]:
        events.append(("l2 read", os.getpid(), None))
        return models.l2, None

    later = RuleContext(
        analysis.facts(),
        dataclasses.replace(models, l2=None, later={"l2": l2_later}),
        context.services,
    )
    monkeypatch.setattr(rule_evaluate, "FORK_AFTER_CPU_S", 0.0)
    plain = rule_evaluate.evaluate_rules(later, cfg, processes=processes)
    events.clear()
    run = rule_evaluate.evaluate_rules(
        later,
        cfg,
        processes=processes,
        on_findings=lambda fs: events.append(("told", os.getpid(), [f.rule for f in fs])),
        on_variants_ahead=lambda vs: events.append(("ahead", os.getpid(), [v.label for v in vs])),
    )
    assert [f.to_dict() for f in run.findings] == [f.to_dict() for f in plain.findings]
    ahead = [e for e in events if e[0] == "ahead"]
    assert ahead == [("ahead", os.getpid(), ["N=4", "N=8", "N=16", "N=32"])]
    first_read = next(i for i, e in enumerate(events) if e[0] == "l2 read")
    assert events.index(ahead[0]) < first_read
    if processes == 1:  # (with a child, its first findings may be told meanwhile)
        assert all(e[0] != "told" for e in events[: events.index(ahead[0])])


def _cli_report(monkeypatch: pytest.MonkeyPatch, processes: int) -> dict[str, Any]:
    import json

    from clikit import cli_run

    import gpuadvise.rules.split as split

    monkeypatch.setattr(split, "rule_processes", lambda: processes)
    r = cli_run(
        "analyze", str(GATHER), "-k", "gather_rowmajor", "--gpu", "H100", "--json",
        "--no-measure", "--no-cache", "--sample-ctas", "2", "--l2-probe-ctas", "4",
        "--arg", "w=1024", "--arg", "h=512", "--arg", "r=64", "--arg", "step=64",
    )  # fmt: skip
    assert r.returncode == 0, r.stderr
    return dict(json.loads(r.stdout))


@needs_toolkit
def test_analyze_with_the_model_behind_reports_what_it_reported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``analyze`` where a second process may run (the L2 model in a forked child) and where
    not (in line): the same findings, the same L2 section, the same notes in the same places."""
    one = _cli_report(monkeypatch, 1)
    two = _cli_report(monkeypatch, 2)
    assert "l2_child_cpu_s" in two["timings_s"] and "l2_child_cpu_s" not in one["timings_s"]
    assert two["l2"] is not None and two["l2"] == one["l2"]
    assert two["findings"] == one["findings"]

    def timeless(doc: dict[str, Any]) -> str:
        import json
        import re

        rest = {k: v for k, v in doc.items() if k not in ("timings_s", "timing")}
        text = re.sub(r"in \d+\.\d s", "in # s", json.dumps(rest, sort_keys=True))
        return re.sub(r'"time_s": [0-9.e+-]+', '"time_s": #', text)  # the emulator's seconds

    assert timeless(two) == timeless(one)


def test_the_child_computes_with_one_malloc_arena(monkeypatch: pytest.MonkeyPatch) -> None:
    """The child limits glibc to one malloc arena before it computes (the memory the model
    keeps is then shared by the replays' threads); this process's setting is left alone."""
    calls: list[int] = []
    monkeypatch.setattr(behind_mod, "_one_malloc_arena", lambda: calls.append(os.getpid()))
    b = L2Behind(lambda: list(calls)).start()
    got = b.result()
    assert len(got) == 1 and got[0] != os.getpid() and not b.computed_here
    assert calls == []


def test_one_malloc_arena_without_mallopt_does_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_libc(name: Any) -> Any:
        raise OSError("no libc here")

    monkeypatch.setattr(behind_mod.ctypes, "CDLL", no_libc)
    behind_mod._one_malloc_arena()  # no exception


def test_the_l2_model_keeps_the_memory_its_arrays_free(monkeypatch: pytest.MonkeyPatch) -> None:
    """``models.l2_for`` runs the model under the emulator's ``malloc_tuned`` (freed memory
    kept for the next arrays, not a fresh mmap faulted in per array), and leaves it after."""
    import types

    import gpuadvise.analyze.models as models
    import gpuadvise.ptx.emulator as emulator
    from gpuadvise.devices import preset

    depth_inside: list[int] = []

    def model(trace: Any, device: Any, blocks_per_sm: int) -> tuple[Any, tuple[str, ...]]:
        depth_inside.append(emulator._malloc_depth)
        return "the model", ()

    monkeypatch.setattr(models, "_l2_orders", model)
    trace = types.SimpleNamespace(grid=(4, 2, 1), total_ctas=8)
    before = emulator._malloc_depth
    assert models.l2_for(trace, preset("H100"), 2) == ("the model", ())  # type: ignore[arg-type]
    assert depth_inside == [before + 1] and emulator._malloc_depth == before
