"""A trace view of warps over :data:`~gpuadvise.trace.view.MAX_WARP_LANES` keeps the first
iterations of each instruction's loop, and weighs each kept record by the records it stands
for: the rules' counts and traffic estimates stay those of the whole trace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from gpuadvise.devices import preset
from gpuadvise.model.banks import active_lanes
from gpuadvise.rules.estimates import repeated_requests, view_traffic
from gpuadvise.source.signature import parse_signature
from gpuadvise.spec.kernel_spec import build_kernel_spec, resolve
from gpuadvise.toolchain import CompileOptions, compile_source
from gpuadvise.trace import view as view_mod
from gpuadvise.trace.access import RECORD, Space
from gpuadvise.trace.emulate import emulate
from gpuadvise.trace.view import TraceView, _first_iterations, buffer_infos

ROWS = """
__global__ void rows(float* out, const float* inp, int C) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  const float* row = inp + (long)i * C;
  float s = 0.0f;
  for (int j = 0; j < C; ++j) s += row[j];
  out[i] = s;
}
"""
C = 2048
THREADS = 128  # 2 CTAs of 64 threads: 4 warps, each 2048 loads and one store


def records(groups: list[tuple[int, int, int, int]]) -> np.ndarray:
    """Records of (cta, warp, inst, count) groups, interleaved as a loop runs them."""
    rows = []
    longest = max(n for *_, n in groups)
    for k in range(longest):
        for cta, warp, inst, n in groups:
            if k < n:
                rows.append((cta, warp, inst))
    r = np.zeros(len(rows), RECORD)
    for f, col in zip(("cta", "warp", "inst"), np.array(rows).T, strict=True):
        r[f] = col
    r["mask"] = 0xFFFFFFFF
    return r


@pytest.fixture(scope="module")
def rows_cu(tmp_path_factory: pytest.TempPathFactory, compile_cache: Path) -> Path:
    """ROWS written once for the module's tests (a kernel written to a new folder compiles
    again: the path is in the compile cache's key), compiled in the run's cache."""
    src = tmp_path_factory.mktemp("view-iterations") / "rows.cu"
    src.write_text(ROWS)
    return src


_TRACES: dict[tuple[Path, int, int], tuple[Any, dict[str, Any]]] = {}


def _rows(src: Path, threads: int, c: int) -> tuple[Any, dict[str, Any]]:
    """The trace of ``rows`` (``src``) on ``threads / 64`` CTAs of 64 threads, rows of ``c``
    floats, every CTA traced, and its buffers: emulated once per launch for the module (the
    tests build their views from it and read it, never change it)."""
    if (src, threads, c) not in _TRACES:
        _TRACES[src, threads, c] = _emulate_rows(src, threads, c)
    return _TRACES[src, threads, c]


def _emulate_rows(src: Path, threads: int, c: int) -> tuple[Any, dict[str, Any]]:
    module = compile_source(src, CompileOptions(arch="sm_90"))
    spec = build_kernel_spec(
        src,
        "rows",
        grid=threads // 64,
        block=64,
        args=[f"C={c}"],
        buffers=[f"out=float[{threads}]", f"inp=float[{threads * c}]"],
        discover=False,
    )
    launch = resolve(spec, parse_signature(ROWS, "rows"))
    e = emulate(module, module.kernel("rows"), launch, preset("H100"), sample_ctas="all")
    return e.trace, buffer_infos(e.trace, spec)


def test_under_the_bound_nothing_is_cut() -> None:
    r = records([(0, 0, 0, 10), (0, 0, 1, 1)])
    got, weight = _first_iterations(r, 11 * 32)
    assert weight is None and got is r


def test_each_group_keeps_its_first_records_and_weighs_the_rest() -> None:
    # a warp's loop load (1000 times) and its epilogue store (once); another warp's loop of 500
    r = records([(0, 0, 0, 1000), (0, 0, 1, 1), (0, 1, 0, 500)])
    got, weight = _first_iterations(r, 100 * 32)  # 100 records per warp, 200 in all
    assert weight is not None
    # one k for every group: min(1000, k) + 1 + min(500, k) <= 200 -> k = 99
    load0 = (got["warp"] == 0) & (got["inst"] == 0)
    assert load0.sum() == 99 and (got["warp"] == 1).sum() == 99
    assert weight[load0] == pytest.approx(1000 / 99)
    assert weight[got["inst"] == 1] == pytest.approx([1.0])
    assert weight[got["warp"] == 1] == pytest.approx(500 / 99)
    # the kept records are each group's first, in execution order
    idx = np.flatnonzero((r["warp"] == 0) & (r["inst"] == 0))[:99]
    assert np.array_equal(got[load0], r[idx])
    # the weights add up to the records
    assert weight.sum() == pytest.approx(len(r))


def _sampled(r: np.ndarray, cta: int, warp: int, inst: int, run: int) -> np.ndarray:
    """``r`` with the group's records after its first ``run`` dropped, its last kept record
    standing for them (``extra``), as the emulator's loop sampler leaves a sampled loop."""
    at = np.flatnonzero((r["cta"] == cta) & (r["warp"] == warp) & (r["inst"] == inst))
    out = r.copy()
    out["extra"][at[run - 1]] = len(at) - run
    return np.delete(out, at[run:])


def test_a_sampled_loops_records_are_cut_as_its_full_run_is() -> None:
    """The emulator's sampled loops (a record standing for 1 + extra executions) are cut where
    their full run is: the lanes, the groups' sizes and the ranks count executions, so the same
    first records are kept, with the full run's weights (they counted the records run: the
    view of HeCBench interleave's sampled trace kept 5 warps where its full run's kept 1, and
    weighed its loop as 1,568 iterations of 4,096)."""
    full = records([(0, 0, 0, 1000), (0, 0, 1, 1), (0, 1, 0, 500)])
    part = _sampled(_sampled(full, 0, 0, 0, 150), 0, 1, 0, 150)
    want, want_w = _first_iterations(full, 100 * 32)
    got, got_w = _first_iterations(part, 100 * 32)
    assert got_w is not None and want_w is not None
    assert len(got) == len(want) and np.array_equal(
        got[["cta", "warp", "inst"]], want[["cta", "warp", "inst"]]
    )
    assert got_w == pytest.approx(want_w)
    # a loop sampled to fewer records than the bound is still cut as its full run is, and the
    # kept records (the weighted one among them) stand for the whole
    few = _sampled(_sampled(full, 0, 0, 0, 40), 0, 1, 0, 40)
    kept, w = _first_iterations(few, 100 * 32)
    assert w is not None
    assert (w * (kept["extra"] + 1.0)).sum() == pytest.approx(len(full))
    for warp, n in ((0, 1000), (1, 500)):
        at = (kept["warp"] == warp) & (kept["inst"] == 0)
        assert (w[at] * (kept["extra"][at] + 1.0)).sum() == pytest.approx(n)


def test_a_sampled_loops_weighted_records_are_kept_together() -> None:
    """The sampler's weighted records of one loop (its last iterations: the alignments of a
    stride through a sector, each standing for its share of the skipped ones) are kept together
    once the cut reaches the first: the view's distinct sectors weigh as their first lane's
    record, right only with all of them (HeCBench AIDW's cut kept the first of 8, weighted for
    all 8: 8 times ``dx``'s sectors)."""
    full = records([(0, 0, 0, 1010), (0, 0, 1, 1)])
    at = np.flatnonzero(full["inst"] == 0)
    part = full.copy()
    part["extra"][at[-8:]] = 124  # 10 run in full, 8 standing for 125 each
    part = np.delete(part, at[10:-8])
    got, weight = _first_iterations(part, 100 * 32)  # a cut at 100 executions of 1010
    assert weight is not None
    loop = got["inst"] == 0
    assert loop.sum() == 18 and (got["extra"][loop] == 124).sum() == 8
    assert (weight * (got["extra"] + 1.0))[loop].sum() == pytest.approx(1010)
    # before the weighted records, a cut is as its full run's: the first records, reweighted
    got, weight = _first_iterations(part, 6 * 32)  # 5 of the loop and the store
    assert weight is not None and not got["extra"].any()
    assert weight[got["inst"] == 0] == pytest.approx(1010 / 5)


@pytest.mark.toolkit
def test_a_cut_view_weighs_its_records_to_the_whole(
    rows_cu: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    dev = preset("H100")
    trace, infos = _rows(rows_cu, THREADS, C)
    whole = TraceView(trace, infos)
    assert not whole.iterations_sampled
    monkeypatch.setattr(view_mod, "MAX_WARP_LANES", 256 * 32)  # 256 records per warp
    cut = TraceView(trace, infos)
    assert cut.iterations_sampled
    # 256 records per warp at most (the compiler unrolls the loop: one k for its instructions)
    assert len(cut.records) <= 4 * 256 < len(whole.records) / 4
    assert cut.weighted(np.arange(len(cut.records))) == pytest.approx(len(whole.records))
    assert cut.l1_total() == pytest.approx(whole.l1_total())
    a, b = view_traffic(dev, whole), view_traffic(dev, cut)
    assert b.l1_cycles == pytest.approx(a.l1_cycles)
    assert b.instructions == pytest.approx(a.instructions)
    assert b.l2_store_sectors == pytest.approx(a.l2_store_sectors)
    # a row's first ~250 floats span ~32 of its 256 sectors: a partial sector at the end of the
    # kept iterations is the error
    assert b.l2_load_sectors == pytest.approx(a.l2_load_sectors, rel=0.03)
    assert b.dram_bytes == pytest.approx(a.dram_bytes, rel=0.03)
    assert cut.useful_bytes() == pytest.approx(whole.useful_bytes(), rel=0.03)
    assert repeated_requests(cut)[1] == pytest.approx(repeated_requests(whole)[1])
    # a change to the loads alone: the same on both
    loads_whole = np.flatnonzero(whole.records["kind"] == whole.records["kind"][0])
    loads_cut = np.flatnonzero(cut.records["kind"] == cut.records["kind"][0])
    ca, cb = view_traffic(dev, whole, loads_whole), view_traffic(dev, cut, loads_cut)
    assert cb.l1_cycles == pytest.approx(ca.l1_cycles)
    assert cb.l2_load_sectors == pytest.approx(ca.l2_load_sectors, rel=0.03)


def _small_view(rows_cu: Path) -> TraceView:
    """The view of ``rows`` on 2 CTAs of 64 threads, rows of 64 floats, every CTA traced."""
    return TraceView(*_rows(rows_cu, 128, 64))


@pytest.mark.toolkit
@pytest.mark.parametrize("fraction", [1, 10**9])  # lanes_of: sorted, then marked
def test_buffers_at_are_those_the_lanes_reach(
    rows_cu: Path, monkeypatch: pytest.MonkeyPatch, fraction: int
) -> None:
    """TraceView.buffers_at (from the view's distinct (instruction, buffer) pairs) gives the
    buffers the lanes of the instructions reach, in buffer order, for any set of them."""
    view = _small_view(rows_cu)
    monkeypatch.setattr(view_mod, "_MARK_FRACTION", fraction)
    insts = sorted({int(i) for i in view.lanes.inst})
    assert len(insts) >= 2
    for sel in ([], insts[:1], insts[-1:], insts, insts[:2], [insts[0], 10_000]):
        arr = np.array(sel, np.int64)
        # the lanes of those instructions, in lane order (sorted, or marked when many)
        assert np.array_equal(view.lanes_of(arr), np.flatnonzero(np.isin(view.lanes.inst, arr)))
        which = view.lane_buffer[view.lanes_of(arr)]
        want = [view.buffer_names[int(b)] for b in np.unique(which[which >= 0])]
        assert view.buffers_at(arr) == want
    assert view.buffers_at(np.array(insts, np.int64)) == sorted(
        ["inp", "out"], key=lambda n: view.buffers[n].base
    )


@pytest.mark.toolkit
def test_the_traffic_of_some_records_is_theirs_whatever_was_asked_before(rows_cu: Path) -> None:
    """view_traffic(only=...) keeps the sector sets of the last records asked for: asking for
    other records gives theirs, asking again gives the same as the first time."""
    dev = preset("H100")
    view = _small_view(rows_cu)
    kind = view.records["kind"]
    loads, stores = np.flatnonzero(kind == kind.min()), np.flatnonzero(kind != kind.min())
    a = view_traffic(dev, view, only=loads)
    b = view_traffic(dev, view, only=stores)
    assert a.l2_load_sectors > 0 and b.l2_load_sectors == 0 and b.l2_store_sectors > 0
    assert view_traffic(dev, view, only=loads) == a
    assert view_traffic(dev, view, loads[:4], only=loads).l2_load_sectors <= a.l2_load_sectors


@pytest.mark.toolkit
def test_the_views_records_are_the_traces_without_their_addresses(rows_cu: Path) -> None:
    """TraceView.records holds every field of the trace's records but the lanes' addresses
    (VIEW_RECORD: 32 bytes a record, not 287), with the same values and types; the lanes'
    offsets are those addresses in their buffers."""
    trace, infos = _rows(rows_cu, 128, 64)
    view = TraceView(trace, infos)
    glob = trace.records[trace.records["space"] == int(Space.GLOBAL)]
    assert len(view.records) == len(glob)  # (every CTA, no loop cut)
    assert view.records.dtype == view_mod.VIEW_RECORD
    assert set(view.records.dtype.names or ()) == set(RECORD.names or ()) - {"addr"}
    assert view.records.dtype.itemsize == 32 < RECORD.itemsize
    for name in view_mod.VIEW_RECORD.names or ():
        assert view.records[name].dtype == RECORD.fields[name][0]
        assert np.array_equal(view.records[name], glob[name])
    # the addresses live on as the lanes' offsets in their buffers
    act = active_lanes(glob["mask"])
    bases = np.array([view.buffers[n].base for n in view.buffer_names], np.int64)
    addr = glob["addr"][act].astype(np.int64)
    assert (view.lane_buffer >= 0).all()
    assert np.array_equal(view.lanes.off + bases[view.lane_buffer], addr)
