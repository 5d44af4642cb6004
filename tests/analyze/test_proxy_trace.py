"""A layout proxy's own point from its own traces (gpuadvise.analyze.proxy_trace, issue 29)."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpuadvise.analyze.options import AnalyzeSettings, KernelOptions
from gpuadvise.analyze.proxy_trace import PROXY_TRACE_POINT, proxy_point_inputs
from gpuadvise.devices import memory_rates, preset
from gpuadvise.model.execution import KernelWork
from gpuadvise.model.roofline import Traffic, launch_estimate, launch_times
from gpuadvise.rules import Estimate

ROOT = Path(__file__).resolve().parents[2]
H200 = preset("H200")


def _work(int_per_cta: float) -> KernelWork:
    """4,096 CTAs of 8 warps, ``int_per_cta`` integer warp instructions each, no chain."""
    return KernelWork(
        pipes={"int": int_per_cta}, chain={}, critical_instructions=int_per_cta / 8,
        ctas=4096, warps_per_cta=8,
    )  # fmt: skip


def test_the_proxys_own_work_decides_its_new_layout_side() -> None:
    """The cells_fields mechanism by hand: the old layout's proxy is L1-bound, the new one's
    loads take a ninth of its L1 cycles, and what is left is the proxy's own arithmetic (the
    bounds tests, picks and folds). The line's records alone (no work) see only the L1 fall;
    the proxy's own traces see the arithmetic too, which the point must then take."""
    rates = memory_rates(H200)
    assert rates is not None
    work = _work(8 * 1200.0)  # 1,200 integer instructions a warp
    before = Traffic(l1_cycles=18e6, instructions=2.5e6, resident_warps=8448, work=work)
    after = Traffic(l1_cycles=2e6, instructions=2.5e6, resident_warps=8448, work=work)
    alone = launch_estimate(
        Traffic(l1_cycles=18e6, resident_warps=8448), Traffic(l1_cycles=2e6, resident_warps=8448),
        H200, rates,
    )  # fmt: skip
    own = launch_estimate(before, after, H200, rates)
    assert alone is not None and own is not None
    assert alone.point > 5.0  # the L1 cycles' ratio, 9x, less the floor
    a = launch_times(after, H200, rates)
    assert a is not None and a.bound_by == "pipe"  # the proxy's arithmetic, not its loads
    assert 1.0 < own.point < alone.point / 2
    old = Estimate(
        2.0, "upper-bound", "rule",
        {"proxy_point_speedup": round(alone.point, 3), "proxy_bound_speedup": 7.0, "x": 1},
    )  # fmt: skip
    new = proxy_point_inputs(old, own)
    assert (new.speedup, new.kind, new.inputs["x"]) == (2.0, "upper-bound", 1)
    assert new.inputs["proxy_point_speedup"] == new.inputs[PROXY_TRACE_POINT]
    assert new.inputs["proxy_point_speedup"] == pytest.approx(own.point, abs=1e-3)
    assert new.inputs["proxy_bound_speedup"] >= new.inputs["proxy_point_speedup"]
    assert new.inputs["proxy_point_rule"] == round(alone.point, 3)
    assert new.inputs["proxy_bound_rule"] == 7.0
    assert new.inputs["proxy_bound_by_after"] == "pipe"
    assert new.inputs["proxy_before_us"] > new.inputs["proxy_after_us"] > 0
    assert new.method.startswith("rule. The proxy pair on its own emulated traces")
    assert f"point {new.inputs['proxy_point_speedup']:.2f}x" in new.method
    # a proxy pair the model finds slower after: no speedup said
    swapped = launch_estimate(after, before, H200, rates)
    assert swapped is not None
    slower = proxy_point_inputs(old, swapped)
    assert slower.inputs["proxy_point_speedup"] < 1.0
    assert "predicted slower" in slower.method and "point 0." not in slower.method


@pytest.mark.toolkit
@pytest.mark.usefixtures("compile_cache")
def test_analyze_gives_an_aos_proxy_its_point_from_its_own_traces() -> None:
    from gpuadvise.analyze.run import run_analysis

    k = ROOT / "kernels" / "particles"
    res = run_analysis(
        KernelOptions(
            str(k / "particles.cu"), spec=str(k / "case.toml"), gpu="H200", args=("n=262144",)
        ),
        AnalyzeSettings(measure=False, select=("GA301",)),
    )
    (f,) = [f for f in res.rules.findings if f.rule == "GA301"]
    est = f.estimated_speedup
    assert est is not None and f.variant is not None and f.variant.proxy is not None
    i = est.inputs
    assert isinstance(i[PROXY_TRACE_POINT], float) and i["proxy_point_speedup"] > 1.0
    assert isinstance(i["proxy_point_rule"], float)  # the rule's roofline value, kept
    assert i["proxy_bound_speedup"] >= i["proxy_point_speedup"]
    assert i["proxy_before_us"] > i["proxy_after_us"] > 0
    assert "variant_traces_s" in res.analysis.timings_s


@pytest.mark.toolkit
@pytest.mark.usefixtures("compile_cache")
def test_a_proxy_compiled_while_the_rules_run_gives_the_same_point(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """GA301's proxy, both kernels, compiled from the moment the rule is done
    (``VariantsAhead``: HeCBench interleave waited for four nvcc runs in turn after the rules),
    taken by the proxy traces: the same findings as when they compile it themselves."""
    import gpuadvise.analyze.ahead as A
    import gpuadvise.analyze.run as run_mod

    k = ROOT / "kernels" / "particles"
    opts = KernelOptions(
        str(k / "particles.cu"), spec=str(k / "case.toml"), gpu="H200", args=("n=262144",)
    )
    settings = AnalyzeSettings(measure=False, select=("GA301",))
    taken: list[bool] = []
    real_take = A.VariantsAhead.take_proxy

    def take(self: A.VariantsAhead, proxy: object) -> object:
        got = real_take(self, proxy)  # type: ignore[arg-type]
        taken.append(got is not None)
        return got

    monkeypatch.setattr(A.VariantsAhead, "take_proxy", take)
    early = run_mod.run_analysis(opts, settings)
    assert taken == [True]
    monkeypatch.setattr(run_mod, "_variants_ahead", lambda *a: None)
    late = run_mod.run_analysis(opts, settings)
    assert taken == [True]  # nothing compiled early: nothing taken
    (a,) = [f for f in early.rules.findings if f.rule == "GA301"]
    assert a.estimated_speedup is not None and PROXY_TRACE_POINT in a.estimated_speedup.inputs
    assert early.rules.findings == late.rules.findings


@pytest.mark.toolkit
@pytest.mark.usefixtures("compile_cache")
def test_a_proxys_two_sides_traced_at_once_give_the_point_of_one_process(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """GA301's proxy compiled while the rules ran, with two CPUs: its after side traced in a
    forked child while this process traces its before side (llm.c layernorm_backward traced
    its three proxies' six sides one after another), the same findings, bit for bit, as one
    process's."""
    import os

    import gpuadvise.analyze.split as S
    import gpuadvise.analyze.variant_trace as VT
    from gpuadvise.analyze.run import run_analysis

    k = ROOT / "kernels" / "particles"
    opts = KernelOptions(
        str(k / "particles.cu"), spec=str(k / "case.toml"), gpu="H200", args=("n=262144",)
    )
    settings = AnalyzeSettings(measure=False, select=("GA301",))
    pids = tmp_path / "pids"
    real_side, real_ready = VT.traced_side, VT._ready

    def side(*a, **kw):  # type: ignore[no-untyped-def]
        with pids.open("a") as out:
            out.write(f"{os.getpid()}\n")
        return real_side(*a, **kw)

    def ready(compiled):  # type: ignore[no-untyped-def]
        built = compiled.result()  # here: compiled and read before the fork
        if built.sass is not None:
            built.sass.wait()
        assert real_ready(compiled)
        return True

    monkeypatch.setattr(VT, "traced_side", side)
    one = run_analysis(opts, settings)
    assert set(pids.read_text().split()) == {str(os.getpid())}
    pids.unlink()
    monkeypatch.setattr(S, "processes", lambda: 2)
    monkeypatch.setattr(VT, "_ready", ready)
    two = run_analysis(opts, settings)
    assert len(set(pids.read_text().split())) == 2  # one side in a child
    (a,) = [f for f in two.rules.findings if f.rule == "GA301"]
    assert a.estimated_speedup is not None and PROXY_TRACE_POINT in a.estimated_speedup.inputs
    assert two.rules.findings == one.rules.findings


def test_a_proxy_written_again_is_the_same_files(
    tmp_path: Path, private_compile_cache: Path
) -> None:
    """A layout proxy's source and specs are written to a compile-cache folder named by their
    content, so that an analysis run again compiles the same path and bytes (a cache hit; the
    temporary folder's random name was in the key); ``--no-cache`` writes them to the folder."""
    from gpuadvise.analyze.proxy_trace import proxy_sides
    from gpuadvise.rules.findings import Proxy

    proxy = Proxy("__global__ void k_aos() {}\n", "k_aos", "k_soa", "# a", "# b")
    opts = KernelOptions("k.cu", gpu="H100")
    sides = []
    for i in range(2):
        folder = tmp_path / f"tmp{i}"
        folder.mkdir()
        sides.append(proxy_sides(opts, proxy, folder))
        assert not any(folder.iterdir())
    (b0, a0), (b1, a1) = sides
    assert b0 == b1 and a0 == a1 and b0.source == a0.source
    src = Path(b0.source or "")
    assert src.is_relative_to(private_compile_cache) and src.read_text() == proxy.source
    assert (b0.kernel, a0.kernel) == ("k_aos", "k_soa")
    assert Path(b0.spec or "").read_text() == "# a" and Path(a0.spec or "").read_text() == "# b"
    other = proxy_sides(opts, Proxy("// other\n", "k_aos", "k_soa", "# a", "# b"), folder)
    assert other[0].source != b0.source
    alone = proxy_sides(KernelOptions("k.cu", no_cache=True), proxy, tmp_path / "tmp1")
    assert alone[0].source == str(tmp_path / "tmp1" / "proxy.cu")
