"""Tests of gpuadvise.model.coalescing: sectors, ideal sectors, lines, per-line and launch totals."""

from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from propkit import examples

from gpuadvise.model.coalescing import (
    CoalescingResult,
    SectorCounts,
    analyze_coalescing,
    record_sectors,
    touched_lines,
)
from gpuadvise.trace.access import WARP, AccessTrace, InstrInfo, Kind, Space, empty_records

FULL = 0xFFFFFFFF
LANES = range(WARP)
BASE = 0x7F3A_0000_0000  # a device-like virtual address, 256-byte aligned like cudaMalloc's


def make_trace(
    accesses: Sequence[dict],
    instructions: Sequence[InstrInfo] | None = None,
    ctas: Sequence[int] = (0,),
    total_ctas: int | None = None,
) -> AccessTrace:
    """An AccessTrace from dicts: addr (per-lane list or function of the lane) and optionally
    inst, width, mask, kind, space (global by default), cta, warp."""
    recs = empty_records(len(accesses))
    for i, a in enumerate(accesses):
        addr = a["addr"]
        if callable(addr):
            addr = [addr(lane) for lane in LANES]
        mask = a.get("mask", FULL)
        recs[i]["addr"] = [int(x) if (mask >> lane) & 1 else 0 for lane, x in enumerate(addr)]
        recs[i]["mask"] = mask
        recs[i]["inst"] = a.get("inst", 0)
        recs[i]["width"] = a.get("width", 4)
        recs[i]["kind"] = int(a.get("kind", Kind.LOAD))
        recs[i]["space"] = int(a.get("space", Space.GLOBAL))
        recs[i]["cta"] = a.get("cta", 0)
        recs[i]["warp"] = a.get("warp", 0)
    if instructions is None:
        n = int(recs["inst"].max()) + 1 if len(recs) else 0
        instructions = tuple(
            InstrInfo(i, "k.cu", 10 + i, "ld.global.f32", Space.GLOBAL, Kind.LOAD, 4)
            for i in range(n)
        )
    return AccessTrace(
        records=recs,
        instructions=tuple(instructions),
        ctas=tuple(ctas),
        total_ctas=len(ctas) if total_ctas is None else total_ctas,
        grid=(max(total_ctas or len(ctas), 1), 1, 1),
        block=(32, 1, 1),
        source="emulator",
    )


def one(addr, width: int = 4, mask: int = FULL) -> tuple[int, int, int, int]:
    """(sectors, ideal, bytes, 128-byte lines) of one warp-level access."""
    trace = make_trace([{"addr": addr, "width": width, "mask": mask}])
    rs = record_sectors(trace.records)
    return int(rs.sectors[0]), int(rs.ideal[0]), int(rs.bytes[0]), int(rs.lines[0])


def reference(width: int, mask: int, addrs: Sequence[int]) -> tuple[int, int, int, int]:
    live = [a for lane, a in enumerate(addrs) if (mask >> lane) & 1]
    nbytes = len({a + j for a in live for j in range(width)})
    sectors = len({(a + j) // 32 for a in live for j in range(width)})
    lines = len({(a + j) // 128 for a in live for j in range(width)})
    return sectors, math.ceil(nbytes / 32), nbytes, lines


# --------------------------------------------------------------------------------------------
# HARDWARE.md §3 and hand-derived answers


@pytest.mark.parametrize(
    "width, stride, expected",
    [
        # 4-byte accesses
        (4, 1, (4, 4, 128, 1)),
        (4, 2, (8, 4, 128, 2)),
        (4, 8, (32, 4, 128, 8)),
        (4, 32, (32, 4, 128, 32)),
        # 8-byte accesses
        (8, 1, (8, 8, 256, 2)),
        (8, 2, (16, 8, 256, 4)),
        (8, 32, (32, 8, 256, 32)),
        # 16-byte accesses
        (16, 1, (16, 16, 512, 4)),
        (16, 2, (32, 16, 512, 8)),
        (16, 32, (32, 16, 512, 32)),
    ],
)
def test_strides(width: int, stride: int, expected: tuple[int, int, int, int]) -> None:
    assert one(lambda n: BASE + width * stride * n, width) == expected


def test_hardware_md_32bit_examples() -> None:
    assert one(lambda n: BASE + 4 * n)[0] == 4
    assert one(lambda n: BASE + 8 * n)[0] == 8
    assert one(lambda n: BASE + 16 * n)[0] == 16
    assert one(lambda n: BASE + 32 * n)[0] == 32
    assert one(lambda n: BASE + 64 * n)[0] == 32
    assert one(lambda n: BASE)[:2] == (1, 1)  # all lanes one address
    assert one(lambda n: BASE + 4 + 4 * n) == (5, 4, 128, 2)  # stride 1, 4 bytes off


def test_broadcast_and_partial_warps() -> None:
    assert one(lambda n: BASE + 8, 8) == (1, 1, 8, 1)
    assert one(lambda n: BASE + 4 * n, mask=0xFFFF) == (2, 2, 64, 1)
    assert one(lambda n: BASE + 128 * n, mask=0x3) == (2, 1, 8, 2)
    assert one(lambda n: BASE, mask=0) == (0, 0, 0, 0)


def test_array_of_structures_field() -> None:
    # struct { float x, y, z, w; } a[]; reading a[i].y: 4 bytes every 16
    assert one(lambda n: BASE + 16 * n + 4) == (16, 4, 128, 4)


def test_misaligned_lanes_straddle_sectors() -> None:
    # not legal PTX (8-byte accesses 4 bytes off), counted anyway: bytes 4 .. 259
    assert one(lambda n: BASE + 4 + 8 * n, 8) == (9, 8, 256, 3)
    # overlapping ranges count their bytes once
    assert one(lambda n: BASE + 4 * n, 8) == (5, 5, 132, 2)


def test_addresses_spanning_more_than_4gb_in_one_chunk() -> None:
    far = [{"addr": lambda n: BASE + 4 * n}, {"addr": lambda n: 68 + 4 * n}]
    rs = record_sectors(make_trace(far).records)
    assert rs.sectors.tolist() == [4, 5] and rs.ideal.tolist() == [4, 4]
    with pytest.raises(ValueError, match="4 GB"):
        record_sectors(make_trace([{"addr": lambda n: n * 2**30}]).records)


def test_chunk_of_two_buffers_counts_each_record_as_alone() -> None:
    # buffers 2^36 apart in one chunk (a base per record), partial and empty masks, inactive
    # lanes anywhere: each record counts what it counts on its own (one base for the chunk)
    rng = random.Random(7)
    accesses = []
    for i in range(300):
        base = BASE + (i % 3) * 2**36 + 4 * rng.randrange(1 << 20)
        stride, width = rng.choice([(4, 4), (8, 4), (16, 8), (128, 4), (0, 16), (6, 4)])
        mask = rng.choice([FULL, rng.randrange(1 << 32), 0x1, 0x80000000, 0])
        addr = [base + stride * n if mask >> n & 1 else rng.randrange(1 << 63) for n in LANES]
        accesses.append({"addr": addr, "width": width, "mask": mask})
    both = record_sectors(make_trace(accesses).records)
    for i, a in enumerate(accesses):
        alone = record_sectors(make_trace([a]).records)
        got = (both.sectors[i], both.bytes[i], both.lines[i])
        assert got == (alone.sectors[0], alone.bytes[0], alone.lines[0]), i
    full = [{"addr": lambda n: BASE + 4 * n}, {"addr": lambda n: BASE + 2**36 + 8 * n}]
    assert record_sectors(make_trace(full).records).sectors.tolist() == [4, 8]
    # the active lanes decide: one lane 4 GB away raises, an inactive one does not
    wide = {"addr": lambda n: BASE + (2**33 if n == 5 else 4 * n), "mask": FULL}
    with pytest.raises(ValueError, match="4 GB"):
        record_sectors(make_trace([full[1], wide]).records)
    quiet = record_sectors(make_trace([full[1], {**wide, "mask": FULL ^ (1 << 5)}]).records)
    assert quiet.sectors.tolist() == [8, 4]


@st.composite
def global_access(draw: st.DrawFn) -> tuple[int, int, list[int]]:
    width = draw(st.sampled_from([1, 2, 4, 8, 16]))
    mask = draw(st.one_of(st.just(FULL), st.integers(0, FULL)))
    aligned = draw(st.booleans())
    pool = draw(st.lists(st.integers(0, 2**14), min_size=1, max_size=32))
    picks = draw(st.lists(st.integers(0, len(pool) - 1), min_size=32, max_size=32))
    addrs = [BASE + (pool[p] * width if aligned else pool[p]) for p in picks]
    return width, mask, addrs


@settings(max_examples=examples(300), deadline=None)
@given(global_access())
def test_matches_the_plain_reference(access: tuple[int, int, list[int]]) -> None:
    width, mask, addrs = access
    assert one(addrs, width, mask) == reference(width, mask, addrs)


@settings(max_examples=examples(300), deadline=None)
@given(global_access())
def test_sectors_at_least_ideal(access: tuple[int, int, list[int]]) -> None:
    width, mask, addrs = access
    sectors, ideal, nbytes, lines = one(addrs, width, mask)
    if mask:
        assert sectors >= ideal >= 1 and sectors >= lines >= 1 and nbytes >= width
    else:
        assert (sectors, ideal, nbytes, lines) == (0, 0, 0, 0)


def test_many_chunks_mixed_widths_and_masks() -> None:
    rng = random.Random(3)
    acc, expected = [], []
    for _ in range(9000):
        width = rng.choice([1, 2, 4, 8, 16])
        mask = rng.choice([FULL, rng.getrandbits(32)])
        stride = rng.choice([0, 1, 2, 3, 32])
        off = rng.choice([0, 0, 0, 4, 1]) if width > 1 else 0
        addrs = [BASE + rng.randrange(64) * 256 + off + width * stride * n for n in LANES]
        acc.append({"addr": addrs, "width": width, "mask": mask})
        expected.append(reference(width, mask, addrs))
    rs = record_sectors(make_trace(acc).records)
    got = list(
        zip(
            rs.sectors.tolist(),
            rs.ideal.tolist(),
            rs.bytes.tolist(),
            rs.lines.tolist(),
            strict=True,
        )
    )
    assert got == expected


def test_touched_lines() -> None:
    trace = make_trace(
        [
            {"addr": lambda n: BASE + 4 * n},  # one line
            {"addr": lambda n: BASE + 256 + 8 * n, "mask": 0xF0000001},  # lines 2 and 3
            {"addr": lambda n: BASE + 124, "width": 8, "mask": 1},  # straddles lines 0 and 1
        ]
    )
    rec, line = touched_lines(trace.records)
    b = BASE // 128
    assert rec.tolist() == [0, 1, 1, 2, 2]
    assert (line - b).tolist() == [0, 2, 3, 0, 1]
    rec32, _ = touched_lines(trace.records, line_bytes=32)
    assert np.bincount(rec32).tolist() == record_sectors(trace.records).sectors.tolist()
    with pytest.raises(ValueError):
        touched_lines(trace.records, line_bytes=100)


# --------------------------------------------------------------------------------------------
# Per line and per launch


def _trace(ctas: Sequence[int], total: int) -> AccessTrace:
    insts = (
        InstrInfo(0, "k.cu", 12, "ld.global.f32", Space.GLOBAL, Kind.LOAD, 4),
        InstrInfo(1, "k.cu", 12, "st.global.f32", Space.GLOBAL, Kind.STORE, 4),
        InstrInfo(2, "k.cu", 14, "ld.global.v4.f32", Space.GLOBAL, Kind.LOAD, 16),
        InstrInfo(3, "k.cu", 14, "ld.shared.f32", Space.SHARED, Kind.LOAD, 4),
        InstrInfo(4, "k.cu", 3, "red.global.add.f32", Space.GLOBAL, Kind.REDUCTION, 4),
    )
    acc = []
    for cta in ctas:
        for warp in range(2):
            base = BASE + 4096 * (2 * cta + warp)
            acc += [
                {"inst": 0, "addr": lambda n, b=base: b + 4 * 2 * n, "cta": cta, "warp": warp},
                {"inst": 1, "addr": lambda n, b=base: b + 4 * n, "kind": Kind.STORE, "cta": cta},
                {"inst": 2, "addr": lambda n, b=base: b + 16 * n, "width": 16, "cta": cta},
                {"inst": 3, "addr": lambda n: 4 * n, "space": Space.SHARED, "cta": cta},
                {"inst": 4, "addr": lambda n: BASE, "kind": Kind.REDUCTION, "cta": cta},
            ]
    return make_trace(acc, insts, ctas=ctas, total_ctas=total)


def test_per_line_loads_and_stores_apart() -> None:
    res = analyze_coalescing(_trace([0], 1))
    keys = [(ln.line, ln.kind) for ln in res.lines]
    assert keys == [(3, Kind.REDUCTION), (12, Kind.LOAD), (12, Kind.STORE), (14, Kind.LOAD)]
    red, ld12, st12, ld14 = res.lines
    assert (ld12.requests, ld12.sectors, ld12.ideal, ld12.bytes, ld12.lines) == (2, 16, 8, 256, 4)
    assert ld12.excess_pct == pytest.approx(50.0) and ld12.sectors_per_request == 8.0
    assert ld12.worst_sectors == 8 and ld12.insts == (0,)
    assert (st12.requests, st12.sectors, st12.ideal) == (2, 8, 8) and st12.excess_pct == 0.0
    assert (ld14.requests, ld14.sectors, ld14.ideal, ld14.lines) == (2, 32, 32, 8)
    assert (red.requests, red.sectors, red.ideal) == (2, 2, 2)
    assert res.traced.load == SectorCounts(4, 48, 40, 1280, 12)
    assert res.traced.store == SectorCounts(2, 8, 8, 256, 2)
    assert res.traced.atomic == SectorCounts(2, 2, 2, 8, 2)
    assert not res.extrapolated and res.launch == res.traced


def test_totals_scaled_when_extrapolated() -> None:
    res = analyze_coalescing(_trace([1, 3], 10))
    assert res.extrapolated and res.scale == 5.0
    assert res.traced.load == SectorCounts(8, 96, 80, 2560, 24)
    assert res.launch.load == SectorCounts(40, 480, 400, 12800, 120)
    assert res.launch.all.excess_pct == pytest.approx(res.traced.all.excess_pct)


def test_result_round_trips_through_json() -> None:
    res = analyze_coalescing(_trace([1, 3], 10))
    assert CoalescingResult.from_dict(json.loads(json.dumps(res.to_dict()))) == res


def test_empty_and_shared_only_traces() -> None:
    assert analyze_coalescing(make_trace([])).lines == ()
    shared_only = make_trace([{"addr": lambda n: 4 * n, "space": Space.SHARED}])
    res = analyze_coalescing(shared_only)
    assert res.lines == () and res.traced.all.requests == 0


def test_per_instruction_worst_of_narrow_values() -> None:
    # the worst value per instruction of int32 (the records' sectors) and float32 measures into
    # an int64 and a float64 result, over several chunks: each instruction's largest, by hand
    from gpuadvise.model.lines import per_instruction

    rng = np.random.default_rng(5)
    n = 300
    trace = make_trace(
        [{"addr": lambda lane: BASE + 4 * lane, "inst": int(i)} for i in rng.integers(0, 7, n)]
    )
    vals = rng.integers(0, 1000, n)
    for vt, wt in ((np.int32, np.int64), (np.float32, np.float64), (np.int64, np.int64)):

        def measure(rows: np.ndarray, vt: type = vt) -> tuple[dict, np.ndarray]:
            return {}, vals[rows].astype(vt)

        per = per_instruction(trace, None, Space.GLOBAL, (), measure, wt, 64, by_row=True)
        want = [
            max(int(v) for v, k in zip(vals, trace.records["inst"], strict=True) if k == i)
            for i in range(7)
        ]
        assert per.worst.dtype == wt
        assert per.worst.tolist() == want
