"""Wall time of `gpuadvise occupancy ...` (target: under 0.4 s on the 2-core CI machine).

Usage: python benchmarks/cli_startup.py [-n 20]. Prints median and max of n runs.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

CMD = [
    sys.executable,
    "-m",
    "gpuadvise",
    "occupancy",
    "--threads",
    "256",
    "--smem",
    "32k",
    "--regs",
    "64",
    "--gpu",
    "H100",
]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=20)
    ap.add_argument("--target-s", type=float, default=0.4)
    n = ap.parse_args().n
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        subprocess.run(CMD, check=True, capture_output=True)
        times.append(time.perf_counter() - t0)
    med = statistics.median(times)
    print(f"gpuadvise occupancy: median {med:.3f} s, max {max(times):.3f} s over {n} runs")
    return 0 if med < 0.4 else 1


if __name__ == "__main__":
    sys.exit(main())
