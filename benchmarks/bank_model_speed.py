"""Speed of the shared-memory bank model (target: 1e8 lane-accesses per second on the 2-core machine).

Usage: python benchmarks/bank_model_speed.py [--records 1000000] [--repeat 3]

Builds synthetic shared-memory traces (32 lanes per record) and times ``record_wavefronts`` and
``analyze_banks`` on them, and ``record_sectors`` of the coalescing model on the same addresses
as global accesses. Prints the best of ``--repeat`` runs per case in lane-accesses per second
(one lane-access = one active-or-not lane of one warp-level record).

Measured 2026-11-22 on the 2-core machine (numpy 2.4, 1e6 records = 3.2e7 lane-accesses), best of
3, range over two runs each (timings there vary by 20-50 % from run to run), in M lane-accesses/s,
before -> after the sort-free counting of banks.py (target 100):
  record_wavefronts, 32-bit loads, full warps (strides 1/2/32/33)   101-149 -> 221-266
  record_wavefronts, 32-bit loads, random masks                      88-116 -> 153-223
  record_wavefronts, 32-bit atomics                                 146-200 -> 279-292
  record_wavefronts, 64-bit loads / stores               77-110 / 83-110 -> 208-227 / 199-235
  record_wavefronts, 128-bit loads / stores             74-104 / 83-120 -> 151-223 / 193-221
  record_wavefronts, mixed widths and kinds, interleaved              70-73 -> 173-187
  record_wavefronts, 32-bit / 64-bit loads, swizzled lanes  108-148 / 106-107 -> 187-190 / 162
  record_wavefronts, 32-bit loads, random masks, inactive lanes 0   109-120 -> 147-154
  analyze_banks, 32-bit loads (per-line aggregation included)       123-125 -> 204-216
  record_sectors (coalescing), 32-bit loads (not changed)           123-176
Warps whose lanes are in address order (strides, broadcasts, pairings) need no sort; the others
(swizzled lanes, partial warps with inactive lanes at 0) sort their lanes first.
"""

from __future__ import annotations

import argparse
import functools
import time
from collections.abc import Callable

import numpy as np

from gpuadvise.model.banks import active_lanes, analyze_banks, record_wavefronts
from gpuadvise.model.coalescing import record_sectors
from gpuadvise.trace.access import AccessTrace, InstrInfo, Kind, Space, empty_records

TARGET = 1e8


def records(
    n: int,
    width: int | np.ndarray,
    kind: int | np.ndarray,
    masks: str,
    swizzle: bool = False,
    zero_inactive: bool = False,
) -> np.ndarray:
    """Strided accesses (strides 1, 2, 32, 33 times 16 bytes). ``swizzle``: lane n takes the
    address of lane n ^ s (s random per record: the lanes out of address order). ``zero_inactive``:
    inactive lanes hold 0, as traces have them."""
    rng = np.random.default_rng(0)
    rec = empty_records(n)
    lanes = np.arange(32, dtype=np.uint64)
    stride = rng.choice([1, 2, 32, 33], n).astype(np.uint64)
    base = rng.integers(0, 1024, n).astype(np.uint64) * 16
    if swizzle:
        lanes = lanes ^ rng.integers(0, 32, (n, 1)).astype(np.uint64)
    rec["addr"] = base[:, None] + lanes * stride[:, None] * 16
    rec["width"] = width
    rec["kind"] = kind
    rec["space"] = int(Space.SHARED)
    rec["inst"] = rng.integers(0, 8, n)
    if masks == "full":
        rec["mask"] = 0xFFFFFFFF
    else:
        rec["mask"] = rng.integers(0, 2**32, n, dtype=np.uint32)
    if not np.isscalar(width):
        rec["addr"] = (rec["addr"] // 16) * 16
    if zero_inactive:
        rec["addr"][~active_lanes(rec["mask"])] = 0
    return rec


def best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    n, repeat = args.records, args.repeat
    rng = np.random.default_rng(1)
    cases: list[tuple[str, np.ndarray]] = [
        ("32-bit loads, full warps", records(n, 4, int(Kind.LOAD), "full")),
        ("32-bit loads, random masks", records(n, 4, int(Kind.LOAD), "random")),
        ("32-bit atomics", records(n, 4, int(Kind.ATOMIC), "full")),
        ("64-bit loads", records(n, 8, int(Kind.LOAD), "full")),
        ("64-bit stores", records(n, 8, int(Kind.STORE), "full")),
        ("128-bit loads", records(n, 16, int(Kind.LOAD), "full")),
        ("128-bit stores", records(n, 16, int(Kind.STORE), "full")),
        (
            "mixed widths and kinds",
            records(
                n,
                rng.choice([4, 8, 16], n, p=[0.6, 0.25, 0.15]).astype(np.uint8),
                rng.choice([0, 1], n).astype(np.uint8),
                "full",
            ),
        ),
        # general patterns: lanes out of address order (sorted per warp), and partial warps whose
        # inactive lanes hold 0 as in traces
        ("32-bit loads, swizzled lanes", records(n, 4, int(Kind.LOAD), "full", swizzle=True)),
        (
            "32-bit loads, masked, zeroed",
            records(n, 4, int(Kind.LOAD), "random", zero_inactive=True),
        ),
        ("64-bit loads, swizzled lanes", records(n, 8, int(Kind.LOAD), "full", swizzle=True)),
    ]
    lanes = 32 * n
    print(f"{n} records ({lanes:.2e} lane-accesses), best of {repeat}; target {TARGET:.0e}/s")
    for name, rec in cases:
        dt = best(functools.partial(record_wavefronts, rec), repeat)
        print(f"  record_wavefronts  {name:28s} {dt:6.3f} s  {lanes / dt / 1e6:6.1f} M/s")
    rec = cases[0][1]
    trace = AccessTrace(
        records=rec,
        instructions=tuple(
            InstrInfo(i, "k.cu", 10 + i, "ld.shared.f32", Space.SHARED, Kind.LOAD, 4)
            for i in range(8)
        ),
        ctas=(0,),
        total_ctas=1,
        grid=(1, 1, 1),
        block=(1024, 1, 1),
        source="emulator",
    )
    dt = best(lambda: analyze_banks(trace), repeat)
    print(
        f"  analyze_banks      {'32-bit loads, full warps':28s} {dt:6.3f} s  {lanes / dt / 1e6:6.1f} M/s"
    )
    glob = rec.copy()
    glob["addr"] += np.uint64(0x7F00_0000_0000)
    glob["space"] = int(Space.GLOBAL)
    dt = best(lambda: record_sectors(glob), repeat)
    print(
        f"  record_sectors     {'32-bit loads, full warps':28s} {dt:6.3f} s  {lanes / dt / 1e6:6.1f} M/s"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
