"""GA307's ``staged_tiles`` (records selected before their lanes are expanded, sort-based sets)
gives the same tiles as the plain per-lane definition (``np.unique``/``np.isin`` of every lane,
as the code stood before issue 17's second round) on the traces of the box stencil, the cells
window and a reduction, and on them with random lane masks and 8-byte shared reads."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pytest
from rulekit import KERNELS, analyze

from gpuadvise.rules.staging import StagedTile, staged_tiles
from gpuadvise.trace.access import WARP, AccessTrace, Kind, Space

pytestmark = [pytest.mark.toolkit, pytest.mark.usefixtures("compile_cache")]


def reference(trace: AccessTrace, same_file: Callable[[str | None], bool]) -> list[StagedTile]:
    """The definition: every active lane of the shared records, one ``np.unique`` per count."""
    recs = trace.records
    sh = recs[recs["space"] == int(Space.SHARED)]
    if not len(sh):
        return []
    lines = [trace.line_of(int(i)) for i in range(len(trace.instructions))]
    gl = (recs["space"] == int(Space.GLOBAL)) & (recs["kind"] == int(Kind.LOAD))
    glob_load_lines = {lines[int(i)] for i in np.unique(recs["inst"][gl])}
    bits = (sh["mask"][:, None] >> np.arange(WARP, dtype=np.uint32)) & 1
    rows, lane = np.nonzero(bits.astype(bool))
    width = sh["width"][rows].astype(np.int64)
    word = sh["addr"][rows, lane].astype(np.int64) // 4
    cta = sh["cta"][rows].astype(np.int64)
    tid = sh["warp"][rows].astype(np.int64) * WARP + lane
    kind = sh["kind"][rows]
    inst = sh["inst"][rows].astype(np.int64)
    line_ids = {ln: k for k, ln in enumerate(dict.fromkeys(lines))}
    line_of_lane = np.array([line_ids[ln] for ln in lines] or [0], np.int64)[inst]
    out = []
    store_lines = {lines[int(i)] for i in np.unique(inst[kind == int(Kind.STORE)])}
    for fl in sorted(store_lines & glob_load_lines, key=lambda t: t[1] or 0):
        f, ln = fl
        if ln is None or not same_file(f):
            continue
        at = (line_of_lane == line_ids[fl]) & (kind == int(Kind.STORE))
        if (width[at] != 4).any():
            continue
        uniq, counts = np.unique((cta[at] << 32) | word[at], return_counts=True)
        if (counts != 1).any():
            continue
        other = (kind != int(Kind.LOAD)) & (line_of_lane != line_ids[fl])
        if np.isin((cta[other] << 32) | word[other], uniq).any():
            continue
        rd = (kind == int(Kind.LOAD)) & (line_of_lane != line_ids[fl])
        nw = np.maximum(width[rd] // 4, 1)
        idx = np.repeat(np.flatnonzero(rd), nw)
        k = np.arange(len(idx)) - np.repeat(np.cumsum(nw) - nw, nw)
        rkeys = (cta[idx] << 32) | (word[idx] + k)
        mine = np.isin(rkeys, uniq)
        if not mine.any():
            continue
        read_insts = np.unique(inst[idx][mine])
        out.append(
            StagedTile(
                int(ln),
                tuple(sorted({lines[int(i)][1] or 0 for i in read_insts})),
                tuple(int(i) for i in np.unique(inst[at])),
                tuple(int(i) for i in read_insts),
                len(uniq),
                len(np.unique((tid[idx][mine] << 48) | rkeys[mine])),
                len(np.unique(cta[at])),
                len(np.unique(rows[at])),
                len(np.unique(rows[idx][mine])),
            )
        )
    return out


def variants(trace: AccessTrace, seed: int) -> list[AccessTrace]:
    rng = np.random.default_rng(seed)
    masked = trace.records.copy()
    masked["mask"] &= rng.integers(0, 2**32, len(masked), dtype=np.uint32)
    wide = trace.records.copy()
    sh_load = (wide["space"] == int(Space.SHARED)) & (wide["kind"] == int(Kind.LOAD))
    wide["width"][sh_load] = 8
    return [trace, replace(trace, records=masked), replace(trace, records=wide)]


@pytest.mark.parametrize(
    ("source", "kernel", "found"),
    [
        ("stencil/box.cu", "box3_shared", True),
        ("cells/cells.cu", "cells_soa_tiled", True),
        ("reduction/reduce.cu", "reduce2", False),
    ],
)
def test_same_tiles_as_the_definition(source: str, kernel: str, found: bool) -> None:
    a = analyze(KERNELS / source, kernel, 16)
    assert a.memory is not None and a.memory.trace is not None
    for i, trace in enumerate(variants(a.memory.trace, len(kernel))):
        got = staged_tiles(trace, lambda f: True)
        assert got == reference(trace, lambda f: True)
        if i == 0:
            assert bool(got) == found


def test_binary_search_path_gives_the_same_tiles(monkeypatch: pytest.MonkeyPatch) -> None:
    """Past ``_DENSE_CELLS`` (CTA, word) cells the fill's membership is a binary search, not a
    table: the same tiles."""
    import gpuadvise.rules.staging as staging

    a = analyze(KERNELS / "stencil/box.cu", "box3_shared", 16)
    assert a.memory is not None and a.memory.trace is not None
    tables = [staged_tiles(t, lambda f: True) for t in variants(a.memory.trace, 3)]
    monkeypatch.setattr(staging, "_DENSE_CELLS", 0)
    for trace, want in zip(variants(a.memory.trace, 3), tables, strict=True):
        assert staged_tiles(trace, lambda f: True) == want == reference(trace, lambda f: True)
