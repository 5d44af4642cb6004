"""The per-record sectors of a trace, made once (issue 31): gpuadvise.model.coalescing's
global_sectors, which the coalescing model, the trace view, the estimates and GA303's totals read."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from gpuadvise.model import coalescing
from gpuadvise.model.coalescing import (
    analyze_coalescing,
    cached_global_sectors,
    global_sectors,
    record_sectors,
    touched_lines,
)
from gpuadvise.rules.scalar_runs import global_totals
from gpuadvise.trace.access import Space
from gpuadvise.trace.view import TraceView
from tests.model.test_coalescing import BASE, make_trace


def _mixed_trace(n: int = 40):  # type: ignore[no-untyped-def]
    """Global loads of several strides and widths, some lanes off, with shared and local
    records in between."""
    acc = []
    for i in range(n):
        stride, width = (4, 8, 16, 128)[i % 4], (4, 8, 16, 4)[i % 4]
        acc.append(
            {
                "addr": lambda lane, i=i, s=stride: BASE + 4096 * i + s * lane + (i % 3) * 4,
                "width": width,
                "mask": 0xFFFFFFFF if i % 5 else 0x0F0F00F1,
                "inst": i % 3,
                "warp": i % 2,
            }
        )
        if i % 7 == 0:
            acc.append({"addr": lambda lane: 4 * lane, "space": Space.SHARED, "inst": 3})
    return make_trace(acc)


def test_global_sectors_are_record_sectors_of_the_global_records() -> None:
    trace = _mixed_trace()
    r = trace.records
    glob = r["space"] == int(Space.GLOBAL)
    got = global_sectors(r)
    want = record_sectors(r[glob])
    for name in ("sectors", "bytes", "lines"):
        g = getattr(got, name)
        assert g.dtype == np.int32
        assert g[glob].tolist() == getattr(want, name).tolist()
        assert not g[~glob].any()
    assert got.ideal[glob].tolist() == want.ideal.tolist()


def test_made_once_per_records_array(monkeypatch: pytest.MonkeyPatch) -> None:
    """The coalescing model, the trace view and GA303's totals over one trace measure each
    record once (they measured them three times)."""
    trace = _mixed_trace()
    calls: list[int] = []
    real = coalescing.record_sectors

    def counting(records: np.ndarray) -> coalescing.RecordSectors:
        calls.append(len(records))
        return real(records)

    monkeypatch.setattr(coalescing, "record_sectors", counting)
    assert cached_global_sectors(trace.records) is None
    res = analyze_coalescing(trace)
    first = sum(calls)
    assert first == int((trace.records["space"] == int(Space.GLOBAL)).sum())
    assert cached_global_sectors(trace.records) is global_sectors(trace.records)
    view = TraceView(trace, {})
    totals, per_record = global_totals(trace.records)
    assert sum(calls) == first  # nothing measured again
    assert analyze_coalescing(trace) == res
    glob = trace.records["space"] == int(Space.GLOBAL)
    assert view.rec_sectors.tolist() == real(trace.records[glob]).sectors.tolist()
    assert per_record[glob].tolist() == real(trace.records[glob]).sectors.tolist()
    assert (per_record[~glob] == -1).all()
    assert totals["distinct_sectors_all"] > 0


def test_a_new_records_array_is_measured_anew() -> None:
    trace = _mixed_trace(8)
    first = global_sectors(trace.records)
    other = trace.records.copy()
    other["addr"] += np.uint64(4)  # off alignment: more sectors
    assert global_sectors(other) is not first
    assert int(global_sectors(other).sectors.sum()) > int(first.sectors.sum())
    key = id(other)
    del other
    gc.collect()
    assert key not in coalescing._GLOBAL_SECTORS._values  # dropped with its array


def test_distinct_sectors_of_one_sector_records() -> None:
    """GA303's distinct sectors of the whole trace take a record within one sector (a broadcast,
    a lone lane) from its first active lane: the same count as every lane's sectors."""
    trace = _mixed_trace(12)
    more = [
        {"addr": lambda lane: BASE + 8, "mask": 0xFFFFFFFF},  # broadcast
        {"addr": lambda lane: BASE + 4096 * 40 + 4 * lane, "mask": 0x00F00000},  # 4 lanes, 1 sector
        {"addr": lambda lane: BASE + 4096 * 41 + 16, "width": 16, "mask": 0x80000000},  # lone lane
        {"addr": lambda lane: BASE + 4096 * 42, "mask": 0},  # no active lane
    ]
    acc = [
        {
            "addr": r["addr"].tolist(),
            "mask": int(r["mask"]),
            "width": int(r["width"]),
            "inst": int(r["inst"]),
            "space": Space(int(r["space"])),
        }
        for r in trace.records
    ]
    t = make_trace(acc + more)
    r = t.records
    totals, per_record = global_totals(r)
    assert (per_record[-4:] == [1, 1, 1, 0]).all()
    glob = r[r["space"] == int(Space.GLOBAL)]
    want = len(np.unique(touched_lines(glob, 32)[1]))
    assert totals["distinct_sectors_all"] == want


def test_a_records_sectors_do_not_depend_on_its_chunk(monkeypatch: pytest.MonkeyPatch) -> None:
    """global_sectors filters and measures a chunk of records at a time (a launch check sums
    them rather than copying every global record first: analyze.services): each record's
    sectors, bytes and lines are the same whichever records share its chunk (chunks of 3 mix
    aligned and unaligned widths, masked and full warps, shared records) as measured in one."""
    trace = _mixed_trace(60)
    r = trace.records
    glob = r["space"] == int(Space.GLOBAL)
    whole = record_sectors(r[glob])  # one chunk (60 records < CHUNK_RECORDS)
    monkeypatch.setattr(coalescing, "CHUNK_RECORDS", 3)  # global_sectors: 24-record slices
    got = coalescing._global_sectors(r)
    for name in ("sectors", "bytes", "lines"):
        assert getattr(got, name)[glob].tolist() == getattr(whole, name).tolist()
        assert not getattr(got, name)[~glob].any()
    assert int(np.sum(got.sectors)) == int(np.sum(whole.sectors)) > 0
