"""The L2's serial atomics per 1 KB unit: each warp-level request costs the unit it reaches a
little per 128-byte line and more per 32-byte sector it updates there, a sector whose eight
words the request all updates costing less than one it updates in part. Pure: arrays in,
numbers out; no I/O.

Two neighbouring 512-byte regions (a 1 KB-aligned span) are served by one serial unit of the
L2, one request after another. Measured on an H200, CUDA 13
(docs/data/global_atomics_regions_h200_2026-11-29.txt and the s9-est probe,
gpu_logs/s9probes/s9-est/probe.txt, quoted in docs/accuracy.md's ninth session):

- eight bins one line each, 512 bytes apart (eight regions): 2.94 ms, the same as 256 bytes
  apart (2.94 ms); 1 KB apart: 1.54 ms (the pairs served apart: 1.9x);
- every CTA of 39,063 flushing 128 consecutive int bins (one region, 4 full-line requests a
  CTA): 0.190 ms; 768 bins (six regions, three 1 KB units) 0.373 ms, twice one region's time,
  where six regions served apart would take one region's;
- a request on one region (270,336 of them, s9-est's eight patterns): one line of 4 full
  sectors 1.194 ns, of 2 full sectors 0.613, of one 0.368; one full sector on each of 4 lines
  1.406; one word on each of 4 lines 1.739; one line's 4 sectors one word each 1.514, one
  word 0.452; 4 lines of 4 sectors two words each 5.97;
- on one 1 KB unit (the s11-hist probe, gpu_logs/s11probes/s11-hist/probe.txt, 2026-11-30;
  270,336 requests a shape): one line's 4 sectors, all 8 words of each 1.196 ns a request,
  1, 2, 3, 4 or 6 words of each 1.394-1.397; one sector, 8 words 0.360, 1-4 words 0.399-0.403;
  one word on each of 2, 4, 8 lines 0.781, 1.541, 3.057; all 32 sectors one word each 11.00;
  16 sectors of 8 lines, one or two words each, 5.83; every CTA of 65,536 flushing a unit's
  256 bins, 1-4 words of each sector 0.73 ms, all 8 0.62 ms.

Per (request, line) :data:`LINE_NS`, per (request, sector) :data:`FULL_SECTOR_NS` where the
request updates its 8 words and :data:`WORD_SECTOR_NS` where it updates fewer (1 to 7: the probe
measured 1-6 alike) reproduce the probe's twenty shapes within 5% and the flushes within 1%
(s9-est's one-region shapes, whose requests rotated over 4 lines, measured up to 13% higher).
The unit's time is the sum of its requests' (line, sector) costs. Random int bins one element a
lane (2^24 into 256, 384, 512, 768, 1,024 bins: 4.31, 3.22, 2.58, 1.84, 1.43 ms on the probe)
are then within 11% (the flat 0.30 ns a sector of s10-bincount said 23-26% less)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gpuadvise.arrays import distinct, distinct_inverse, distinct_rows

UNIT_BYTES = 1024
"""The span whose atomic requests one L2 unit serves one after another (two 512-byte regions)."""

LINE_NS = 0.07
"""Nanoseconds per (warp-level request, 128-byte line) within one :data:`UNIT_BYTES` unit."""

FULL_SECTOR_NS = 0.28
"""Nanoseconds per (warp-level request, 32-byte sector) whose 8 words the request all updates
(an H200's full-line request on one region: 1.194 ns = 0.07 + 4 x 0.28)."""

WORD_SECTOR_NS = 0.33
"""Nanoseconds per (warp-level request, 32-byte sector) of which the request updates fewer than
its 8 words (one line's four such sectors: 1.394-1.397 ns = 0.07 + 4 x 0.33, for 1 to 6 words)."""

SECTOR_WORDS = 8

__all__ = [
    "FULL_SECTOR_NS",
    "LINE_NS",
    "UNIT_BYTES",
    "WORD_SECTOR_NS",
    "UnitLoad",
    "flush_ns",
    "hot_unit",
    "lane_pairs",
    "runs",
    "sector_ns",
    "unit_serial_s",
]


def sector_ns(words: np.ndarray) -> np.ndarray:
    """Each (request, sector)'s cost for ``words`` of its 8 words updated: :data:`FULL_SECTOR_NS`
    for all 8, :data:`WORD_SECTOR_NS` for fewer."""
    return np.where(np.asarray(words) >= SECTOR_WORDS, FULL_SECTOR_NS, WORD_SECTOR_NS)


def flush_ns(sectors: float, lines: float, full: float) -> float:
    """One CTA's flush of a unit's bins (a request per line, as the flush loop's warps reach
    them): ``lines`` requests over ``sectors`` sectors, the share ``full`` of them with all 8
    words non-zero."""
    per_sector = WORD_SECTOR_NS + (FULL_SECTOR_NS - WORD_SECTOR_NS) * full
    return float(lines * LINE_NS + sectors * per_sector)


@dataclass(frozen=True)
class UnitLoad:
    """The most loaded :data:`UNIT_BYTES` unit of a sample's atomic requests: ``ns`` its
    requests' serial time (weighted, less the sample's noise), ``pairs`` its (request, sector)
    pairs and ``lanes`` its lanes alike, the distinct ``sectors``, ``lines`` and ``words`` of
    the unit they update, and the requests reaching it (``on``, request indices)."""

    ns: float
    pairs: float
    sectors: int
    lines: int
    words: int
    on: np.ndarray
    lanes: float = 0.0

    @property
    def words_per_sector(self) -> float:
        return self.words / self.sectors if self.sectors else 0.0


_NONE = UnitLoad(0.0, 0.0, 0, 0, 0, np.zeros(0, dtype=np.int64), 0.0)


def runs(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (a, b) pairs (rows, in lexicographic order) and each one's count, for pairs
    already in that order (``np.unique(np.stack([a, b], axis=1), axis=0, return_counts=True)``
    without its sort): each run of equal pairs once."""
    n = len(a)
    keep = np.ones(n, dtype=bool)
    if n > 1:
        np.not_equal(a[1:], a[:-1], out=keep[1:])
        keep[1:] |= b[1:] != b[:-1]
    first = np.flatnonzero(keep)
    return np.stack([a[first], b[first]], axis=1), np.diff(np.append(first, n))


def lane_pairs(req: np.ndarray, addr: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct (request, byte address) pairs of the lanes, a (2, n) uint64 array in
    lexicographic order, and each one's lanes (one sort): every coarser pair (request, word,
    sector, line or region) is a run of them (:func:`hot_unit`, GA208's hottest region)."""
    r, a = np.asarray(req).astype(np.uint64), np.asarray(addr).astype(np.uint64)
    return distinct_rows([r, a], return_counts=True)


def hot_unit(
    req: np.ndarray, addr: np.ndarray, weights: np.ndarray, pairs: np.ndarray | None = None
) -> UnitLoad:
    """The :class:`UnitLoad` of the unit whose requests cost the L2 longest.

    ``req``: the request index of each active lane, ``addr``: its byte address, ``weights``:
    each request's weight (indexed by request). Each (request, line) costs :data:`LINE_NS`,
    each (request, sector) :func:`sector_ns` of the words the request updates there. The
    hottest of many units that a sample reaches a few times each is the sample's luck: its
    pairs less two of their standard deviations, at least the units' mean, its time scaled
    alike (as the 512-byte region's count). ``pairs``: :func:`lane_pairs` of ``req`` and
    ``addr`` (the pairs) when the caller has them."""
    if not len(req):
        return _NONE
    if pairs is None:
        pairs = lane_pairs(req, addr)[0]
    # the (request, word), (request, sector) and (request, line) pairs: runs of the sorted
    # (request, address) pairs, and of each other
    words, _ = runs(pairs[0], pairs[1] >> np.uint64(2))
    sec_rows, per_sector = runs(words[:, 0], words[:, 1] >> np.uint64(3))
    line_rows, _ = runs(sec_rows[:, 0], sec_rows[:, 1] >> np.uint64(2))
    unit_shift = np.uint64(UNIT_BYTES.bit_length() - 1 - 5)  # sectors to units
    s_units = sec_rows[:, 1] >> unit_shift
    l_units = line_rows[:, 1] >> (unit_shift - np.uint64(2))
    uniq, s_inv = distinct_inverse(s_units)
    l_inv = np.searchsorted(uniq, l_units)
    s_w = weights[sec_rows[:, 0].astype(np.int64)]
    l_w = weights[line_rows[:, 0].astype(np.int64)]
    cost = np.bincount(s_inv, weights=s_w * sector_ns(per_sector), minlength=len(uniq))
    cost += np.bincount(l_inv, weights=l_w * LINE_NS, minlength=len(uniq))
    pairs = np.bincount(s_inv, weights=s_w, minlength=len(uniq))
    hot = int(np.argmax(cost))
    top = float(pairs[hot])
    count = max(top - 2.0 * np.sqrt(top), float(pairs.mean()))
    keep = count / top if top else 1.0
    in_hot = s_inv == hot
    hot_words = words[(words[:, 1] >> np.uint64(8)) == uniq[hot]]
    in_unit = (addr.astype(np.uint64) >> np.uint64(UNIT_BYTES.bit_length() - 1)) == uniq[hot]
    lanes = float(weights[req[in_unit].astype(np.int64)].sum()) * keep
    return UnitLoad(
        ns=float(cost[hot]) * keep,
        pairs=count,
        sectors=len(distinct(sec_rows[in_hot, 1])),
        lines=len(distinct(line_rows[l_inv == hot, 1])),
        words=len(distinct(hot_words[:, 1])),
        on=distinct(sec_rows[in_hot, 0].astype(np.int64)),
        lanes=lanes,
    )


def unit_serial_s(ns: float) -> float:
    """Seconds one unit takes for requests whose costs sum to ``ns`` nanoseconds."""
    return ns * 1e-9
