"""GA206 one-element-per-thread (nvcc, no GPU): the element-wise kernels of
tests/cuda/elementwise/saxpy.cu in several spellings (their ``// expect: GA206`` markers, and the
grid-stride, stencil and small-grid launches that stay silent), the per-buffer trace facts behind
it, the reductions of kernels/reduction, and the variants: every element-wise candidate (k = 1, 2,
4, 8 per thread and iteration) applies, compiles and, run on the CPU emulator over the whole
launch with a grid of a few CTAs, writes the same outputs as the kernel; the reduction's
display-only diff gives per-block partials whose sum is the array's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rulekit import KERNELS, analyze, ev, run_rule

import gpuadvise.rules as rule_api
from gpuadvise.source.patch import apply_unified_diff
from gpuadvise.source.signature import list_kernels

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]

ELEM = Path(__file__).resolve().parents[1] / "cuda" / "elementwise"
SAXPY = ELEM / "saxpy.cu"
REDUCE = KERNELS / "reduction" / "reduce.cu"
TRACE = 8


def ga206(source: Path, kernel: str, **opts: Any) -> list[rule_api.Finding]:
    return run_rule(analyze(source, kernel, TRACE, **opts), "GA206", trace_ctas=TRACE)


def expected(source: Path, kernel: str) -> set[int]:
    ks = rule_api.find_kernel_source(source, kernel)
    assert ks is not None
    first, last = ks.decl_line, ks.body_lines[1]
    return {
        line
        for line, ids in rule_api.expectations(source).items()
        if first <= line <= last and "GA206" in ids
    }


@pytest.mark.parametrize("kernel", list_kernels(SAXPY.read_text()))
def test_markers(kernel: str) -> None:
    found = ga206(SAXPY, kernel)
    assert {f.line for f in found} == expected(SAXPY, kernel), [f.message for f in found]
    for f in found:
        e = ev(f)
        assert e["kind"] == "elementwise" and e["waves"] >= 4.0
        assert e["elements_per_thread"] == (2 if kernel == "two_per_thread" else 1)


def test_silent_on_a_small_grid() -> None:
    # 1024 CTAs: less than one wave of 256-thread CTAs on an H100 (1056)
    assert ga206(SAXPY, "saxpy", args=("n=262144",)) == []
    # and fires once the grid passes min_waves
    assert len(ga206(SAXPY, "saxpy", args=("n=1081344",))) == 1  # 4224 CTAs: 4 waves


def test_buffer_uses_from_the_trace() -> None:
    from gpuadvise.rules.engine import load_registry

    mod = type(load_registry().get("GA206")).__module__
    import sys

    buffer_uses = sys.modules[mod].buffer_uses
    a = analyze(REDUCE, "reduce4", TRACE)
    view = a.memory.view if hasattr(a.memory, "view") else None
    if view is None:
        from gpuadvise.trace.view import buffer_infos, trace_view

        view = trace_view(a.memory.trace, a.spec)
        assert buffer_infos(a.memory.trace, a.spec)
    uses = {u.name: u for u in buffer_uses(view)}
    # reduce4: two loads of `in` per thread, CTAs 512 elements apart; one partial per CTA
    assert uses["in"].per_thread_max == 2 and uses["in"].per_cta == 512
    assert not uses["in"].written
    assert uses["out"].per_block and uses["out"].written


def test_reductions_are_advice_with_a_diff(tmp_path: Path) -> None:
    from gpuadvise.trace.emulate import emulate

    (f,) = ga206(REDUCE, "reduce3")
    assert ev(f)["kind"] == "per-block"
    assert "1056 partials instead of 16384" in f.message
    v = f.variant
    assert v is not None and v.safety == "display-only" and v.launch == {"grid": [1056, 1, 1]}
    assert v.diff and "+        ga206_sum += i < n ? in[i] : 0;" in v.diff
    est = f.estimated_speedup
    assert est is not None and est.kind == "upper-bound" and est.speedup > 1.05
    assert est.inputs["bound_by_before"] == "latency"
    # the rewritten kernel on 8 CTAs over 64 CTAs' worth of data: the partials add up
    new = tmp_path / "reduce.cu"
    new.write_text(apply_unified_diff(REDUCE.read_text(), v.diff))
    (tmp_path / "case.toml").write_text((REDUCE.parent / "case.toml").read_text())
    a = analyze(new, "reduce3", None, trace=False, grid="8", args=("n=16384",))
    from gpuadvise.source.signature import parse_signature
    from gpuadvise.spec.kernel_spec import resolve

    launch = resolve(a.spec, parse_signature(new.read_text(), "reduce3"))
    e = emulate(a.module, a.kernel, launch, a.device, sample_ctas="all", trace=False)
    total = int(e.inputs["in"].astype(np.int64).sum())
    got = int(e.outputs["out"][:8].astype(np.int64).sum())
    assert (got - total) % 2**32 == 0
    assert np.count_nonzero(e.outputs["out"][:8]) == 8


def test_grid_stride_reduction_is_silent() -> None:
    assert ga206(REDUCE, "reduce7") == []
    assert ga206(REDUCE, "reduce_shfl", args=("n4=1048576",)) == []


def _emulate_all(source: Path, kernel: str, grid: int, n: int) -> Any:
    from gpuadvise.source.signature import parse_signature
    from gpuadvise.spec.kernel_spec import resolve
    from gpuadvise.trace.emulate import emulate

    a = analyze(source, kernel, None, trace=False, grid=str(grid), args=(f"n={n}",))
    launch = resolve(a.spec, parse_signature(source.read_text(), kernel))
    return emulate(a.module, a.kernel, launch, a.device, sample_ctas="all", trace=False)


@pytest.mark.parametrize(
    "kernel, per_cta",
    [("saxpy", 256), ("scale_return", 256), ("add_tpl<256>", 256), ("two_per_thread", 512)],
)
def test_variants_emulate_to_the_same_outputs(kernel: str, per_cta: int, tmp_path: Path) -> None:
    (f,) = ga206(SAXPY, kernel)
    v = f.variant
    assert v is not None and v.safety == "automatic-and-verified"
    cands = v.candidates()
    assert [c.label for c in cands] == ["k=4", "k=1", "k=2", "k=8"]
    assert all(c.launch and c.launch["grid"][0] <= 1056 for c in cands)
    n = 5000  # not a multiple of the block: the last CTA index is partial
    grid = -(-n // per_cta)
    want = _emulate_all(SAXPY, kernel, grid, n).outputs["y"]
    for c in cands:
        assert c.diff is not None and "ga206_block" in c.diff
        d = tmp_path / (c.label or "v").replace("=", "")
        d.mkdir()
        for t in ELEM.glob("*.toml"):
            (d / t.name).write_text(t.read_text())
        new = d / "saxpy.cu"
        new.write_text(apply_unified_diff(SAXPY.read_text(), c.diff))
        got = _emulate_all(new, kernel, 3, n).outputs["y"]  # 3 CTAs loop over all indices
        assert got.tobytes() == want.tobytes(), c.label


def test_macro_index_is_found_but_not_rewritten() -> None:
    (f,) = ga206(SAXPY, "axpy_macro")
    v = f.variant
    assert v is not None and v.safety == "display-only" and v.diff is None
    assert "helper or macro" in v.description


def _rule_module() -> Any:
    import sys

    from gpuadvise.rules.engine import load_registry

    return sys.modules[type(load_registry().get("GA206")).__module__]


def test_disjoint_element_sets_laid_out_per_instruction() -> None:
    """Per access instruction, CTA after CTA: the two halves of an array (``k`` and
    ``k + n/2``) are 512 elements per CTA of 256 threads; a 3-point stencil's CTAs share
    elements and a CTA whose ranges do not advance with its index gives nothing."""
    step = _rule_module()._disjoint_step
    ctas, tid = np.repeat(np.arange(4), 256), np.tile(np.arange(256), 4)
    k = 256 * ctas + tid
    ids = np.arange(4)

    def run(*elems: np.ndarray) -> int:
        n = len(elems)
        return step(ids, np.tile(ctas, n), np.concatenate(elems), np.repeat(np.arange(n), len(k)))

    assert run(k, k + (1 << 20)) == 512
    assert run(k, k + 4 * 256) == 512  # a whole grid of 4 CTAs apart
    assert run(k - 1, k, k + 1) == 0  # neighbours overlap
    assert run(k, tid + (1 << 20)) == 0  # every CTA the same second range
    assert run(k, (1 << 20) - k) == 0  # the second range walks down


def test_index_reads_in_cooperative_groups_and_macros() -> None:
    reads = _rule_module()._position_reads
    code = (
        "auto tb = cg::this_thread_block(); auto g = cg::this_grid();\n"
        "int a = tb.group_index().x * 256 + tb.thread_rank();\n"
        "int b = g.thread_rank(); int c = tb.thread_rank();\n"
    )
    lines = sorted({code.count("\n", 0, at) + 1 for at in reads(code, 0, len(code))})
    assert lines == [2, 3]  # group_index() and the grid's thread_rank(), not the block's
    assert [code[at : at + 3] for at in reads(code, 0, len(code))] == [".gr", "g.t"]
