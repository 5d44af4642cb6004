"""Add up the corpus runner's profiles (``run.py --profile DIR``): where the corpus's analyses
spend their time, over every kernel at once.

    python benchmarks/corpus/profile_sum.py DIR [--top 60] [--sort tottime|cumulative]

Prints the summed ``pstats`` table and, first, the main thread's time per source file (own time,
the ``tottime`` column summed by file: which module to look at). Before Python 3.12 cProfile sees
the thread that started it alone (work in threads shows as its waits, ``acquire`` of a lock); from
3.12 on (``sys.monitoring``) it sees every thread, so a thread's work is counted as its own
functions and again in the cumulative time of whatever waits for it (s18-variants).
"""

from __future__ import annotations

import argparse
import pstats
import sys
from collections import defaultdict
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path, help="the folder of .prof files")
    ap.add_argument("--top", type=int, default=60, help="rows of each table (60)")
    ap.add_argument("--sort", default="tottime", choices=("tottime", "cumulative"))
    opts = ap.parse_args(argv)
    files = sorted(opts.folder.glob("*.prof"))
    if not files:
        print(
            f"no .prof files in {opts.folder}: run benchmarks/corpus/run.py --profile DIR first",
            file=sys.stderr,
        )
        return 2
    stats = pstats.Stats(str(files[0]))
    for f in files[1:]:
        stats.add(str(f))
    by_file: dict[str, float] = defaultdict(float)
    for (path, _line, _name), (_cc, _nc, tt, _ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        by_file[path] += tt
    total = sum(by_file.values())
    print(f"{len(files)} profiles, {total:.1f} s of own time")
    for path, tt in sorted(by_file.items(), key=lambda kv: -kv[1])[: opts.top]:
        print(f"{tt:9.1f} s {100 * tt / total:5.1f}%  {path}")
    print()
    stats.sort_stats(opts.sort).print_stats(opts.top)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
