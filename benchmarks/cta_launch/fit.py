"""The fits of benchmarks/cta_launch/probe.sh's sweep: a single launch's time against the CTAs on
the busiest SM (``floor + c x CTAs``), per kernel and block size, first wave and later waves.

    python benchmarks/cta_launch/fit.py docs/data/cta_launch_h200_2026-11-30.txt
"""

from __future__ import annotations

import sys

import numpy as np

KEEP = ("floor", "fit", "case", "chase", "device", "rc")


def lsq(x: list[list[float]], y: list[float]) -> np.ndarray:
    c, *_ = np.linalg.lstsq(np.array(x), np.array(y), rcond=None)
    return c


def main(path: str) -> None:
    lines = open(path).read().splitlines()
    rows = []
    for line in lines:
        if line.startswith(KEEP):
            print(line)
        if line.startswith("sweep "):
            _, k, b, r, g, bz, w, s, _b2b = line.split()
            rows.append((k, int(b), int(r), int(g), int(bz), float(w), float(s)))
    for kind in ("empty", "write"):
        pts = [r for r in rows if r[0] == kind and r[3] >= 132]
        y = np.array([r[6] for r in pts])
        c = lsq([[1.0, r[4]] for r in pts], list(y))
        err = abs(y - np.array([c[0] + c[1] * r[4] for r in pts])) / y
        print(f"{kind}: single us = {c[0]:.3f} + {c[1] * 1e3:.2f} ns x CTAs on the busiest SM; "
              f"error median {np.median(err):.1%}, max {np.max(err):.1%}")  # fmt: skip
        for b in sorted({r[1] for r in pts}):
            q = [r for r in pts if r[1] == b]
            one = ", ".join(f"{r[4]}:{r[6]:.2f}" for r in q if r[5] <= 1.0001)
            many = [r for r in q if r[5] >= 2]
            cm = lsq([[1.0, r[4]] for r in many], [r[6] for r in many])
            wave = cm[1] * 1e3 * q[0][2]
            print(f"  {kind} block {b:4d}, {q[0][2]:2d} an SM: one wave (CTAs:us) {one} | later "
                  f"waves {cm[1] * 1e3:.1f} ns a CTA an SM ({wave:.0f} ns a wave)")  # fmt: skip


if __name__ == "__main__":
    main(sys.argv[1])
