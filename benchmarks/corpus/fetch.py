"""Copy the corpus' kernels (manifest/*.toml) into benchmarks/corpus/src/ (git-ignored).

The sources are never committed: they are copied from local mirrors at the commit each manifest
names (``<mirror>/<owner>+<name>/repo``, a git directory the search tool's ``fetch`` makes), with
each repository's licence file beside them. The mirror logic is benchmarks/public/fetch.py's.

    python benchmarks/corpus/fetch.py [--mirror DIR] [--only KEY] [--cublas-wheel WHEEL]

Repositories with ``cublas = true`` include cublas_v2.h, which the toolkit wheels lack: the
headers are taken as benchmarks/public/fetch.py takes them (an installed nvidia-cublas, or
``--cublas-wheel``) into benchmarks/public/src/_cublas/include.

Exit 0 when every repository was copied, 2 with one ``error:`` line per missing one.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "public"))
import corpus  # noqa: E402
from fetch import (  # noqa: E402  (benchmarks/public)
    DEFAULT_MIRROR,
    Mirror,
    _match,
    find_mirror,
    get_cublas,
)


def copy_repo(r: corpus.Repo, base: Path) -> str:
    """Copy one repository's files into src/<key>/; returns a line for the log."""
    root = find_mirror(base, r.repo)
    if root is None:
        raise FileNotFoundError(f"no mirror of {r.repo} under {base}")
    m = Mirror(root, r.commit)
    if m.note:  # the corpus' line numbers are those of the manifest's commit: nothing else will do
        raise FileNotFoundError(f"{r.repo}: {m.note.split(':')[0]}")
    names = m.list()
    dest = corpus.SRC / r.key
    n = 0
    for pattern in (*r.files, r.licence_file):
        hits = [p for p in names if _match(pattern, p)]
        if not hits:
            raise FileNotFoundError(f"{r.repo}: {pattern} not at {r.commit[:12]}")
        for p in hits:
            out = dest / p
            out.parent.mkdir(parents=True, exist_ok=True)
            data = m.read(p)
            if not out.is_file() or out.read_bytes() != data:
                out.write_bytes(data)
            n += 1
    return f"{r.repo}@{r.commit[:12]}: {n} files -> src/{r.key}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mirror", default=os.environ.get("GPUADVISE_PUBLIC_MIRROR", DEFAULT_MIRROR),
                    help="folder of mirrors <owner>+<name>/repo (default %(default)s)")  # fmt: skip
    ap.add_argument("--only", action="append", default=[], help="only this repository key")
    ap.add_argument("--cublas-wheel", help="an nvidia-cublas wheel to take cublas_v2.h from")
    args = ap.parse_args(argv)
    try:
        c = corpus.load()
    except (corpus.ManifestError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    errors = []
    for r in c.repos.values():
        if args.only and r.key not in args.only:
            continue
        try:
            print(copy_repo(r, Path(args.mirror)))
        except (FileNotFoundError, subprocess.CalledProcessError) as e:
            errors.append(f"error: {e}; fetch github:{r.repo} into {args.mirror} (or --mirror DIR)")
    if any(r.cublas for r in c.repos.values()):
        # headers only (llm.c includes cublas_v2.h; no kernel calls it): benchmarks/public's
        try:
            print(get_cublas(None, args.cublas_wheel))
        except (FileNotFoundError, OSError) as e:
            print(f"warning: {e}; the kernels of cuBLAS-including repositories will not compile")
    for e in errors:
        print(e, file=sys.stderr)
    return 2 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
