"""numpy's default and stable integer sorts on runs of sorted values, on this host (issue 31).

Why ``gpuadvise.arrays.merge_sort_pays`` exists. 2026-12-02: an AMD EPYC with numpy 2.4 (the
2-core machine) sorted 6 M int64 in runs of 9,000 in 405 ms by the default sort and 197 ms by the
stable one; the H200's host, an Intel Xeon with numpy 2.5 (x86-simd-sort), in 68 and 304 ms.

    python benchmarks/sort_choice.py
"""

import platform
import time
from collections.abc import Callable

import numpy as np


def best_of(sort: Callable[[np.ndarray], None], a: np.ndarray, k: int = 5) -> float:
    """The least process CPU of ``k`` sorts of copies of ``a``."""
    best = 1e9
    for _ in range(k):
        b = a.copy()
        t0 = time.process_time()
        sort(b)
        best = min(best, time.process_time() - t0)
    return best


def main() -> None:
    from gpuadvise.arrays import merge_sort_pays

    print("numpy", np.__version__, "python", platform.python_version(), platform.processor())
    print("merge_sort_pays:", merge_sort_pays())
    rng = np.random.default_rng(0)
    for n in (1_000_000, 6_000_000):
        for run in (1, 16, 64, 1024, 9000):
            a = rng.integers(0, 1 << 40, n).astype(np.int64)
            a = np.sort(a[: n // run * run].reshape(-1, run), axis=1).reshape(-1)
            d = best_of(lambda b: b.sort(), a)
            s = best_of(lambda b: b.sort(kind="stable"), a)
            print(
                f"n={n} run={run}: default {d * 1e3:.1f} ms, stable {s * 1e3:.1f} ms ({s / d:.2f}x)"
            )


if __name__ == "__main__":
    main()
