"""The L2's serial atomics per 1 KB unit, counted in the 32-byte sectors each warp-level request
updates there. Pure: arrays in, numbers out; no I/O.

Two neighbouring 512-byte regions (a 1 KB-aligned span) are served by one serial unit of the L2,
and a request there costs about :data:`SECTOR_NS` per sector it updates. Measured on an H200,
CUDA 13 (docs/data/global_atomics_regions_h200_2026-11-29.txt and the s9-est probe,
gpu_logs/s9probes/s9-est/probe.txt, quoted in docs/accuracy.md's ninth session):

- eight bins one line each, 512 bytes apart (eight regions): 2.94 ms, the same as 256 bytes
  apart (2.94 ms); 1 KB apart: 1.54 ms (the pairs served apart: 1.9x);
- every CTA of 39,063 flushing 128 consecutive int bins (one region, 4 full-line requests a
  CTA): 0.190 ms; 768 bins (six regions, three 1 KB units): 0.373 ms, twice one region's time,
  where six regions served apart would take one region's;
- requests on one region: a full line (4 sectors) 1.194 ns, two sectors 0.613, 16 sectors
  (4 lines) 5.97, one sector 0.37-0.45: about 0.30 ns a sector at the cheapest.

The unit's time is its (request, sector) pairs times :data:`SECTOR_NS`, the cheapest rate
measured (a lower estimate of the serial time: 24 regions' flush measured 0.474 ms where twelve
units of two regions say 0.373)."""

from __future__ import annotations

import numpy as np

UNIT_BYTES = 1024
"""The span whose atomic requests one L2 unit serves one after another (two 512-byte regions)."""

SECTOR_NS = 0.30
"""Nanoseconds per (warp-level request, 32-byte sector) within one :data:`UNIT_BYTES` unit: an
H200's full-line request on one region, 1.194 ns for 4 sectors."""

__all__ = ["SECTOR_NS", "UNIT_BYTES", "hot_unit_sectors", "unit_serial_s"]


def hot_unit_sectors(
    req: np.ndarray, addr: np.ndarray, weights: np.ndarray
) -> tuple[float, np.ndarray]:
    """The (request, 32-byte sector) pairs of the most loaded :data:`UNIT_BYTES` unit, each
    pair weighted by its request's weight, and the requests reaching that unit.

    ``req``: the request index of each active lane, ``addr``: its byte address, ``weights``:
    each request's weight (indexed by request). The hottest of many units that a sample reaches
    a few times each is the sample's luck: its count less two of its standard deviations, at
    least the units' mean (as the 512-byte region's count)."""
    if not len(req):
        return 0.0, np.zeros(0, dtype=np.int64)
    a = addr.astype(np.uint64)
    pairs = np.unique(np.stack([req.astype(np.uint64), a >> np.uint64(5)], axis=1), axis=0)
    units = pairs[:, 1] >> np.uint64(UNIT_BYTES.bit_length() - 1 - 5)
    uniq, inverse = np.unique(units, return_inverse=True)
    w = weights[pairs[:, 0].astype(np.int64)]
    counts = np.bincount(inverse, weights=w, minlength=len(uniq))
    hot = int(np.argmax(counts))
    top = float(counts[hot])
    count = max(top - 2.0 * np.sqrt(top), float(counts.mean()))
    on = np.unique(pairs[inverse == hot, 0].astype(np.int64))
    return count, on


def unit_serial_s(sector_requests: float, sector_ns: float = SECTOR_NS) -> float:
    """Seconds one unit takes for its (request, sector) pairs, one after another."""
    return sector_requests * sector_ns * 1e-9
