"""The kernel cases under a folder (``gpuadvise analyze PATH...``) and CI shards of a case list.

A case is one kernel launch to analyze: a source, a kernel, a launch spec and the command-line
options that go with them. Under a folder (searched recursively, in sorted order):

- every launch spec: a ``.toml`` with a top-level ``source``, ``kernel``, ``grid`` or ``block``
  key (``case.toml``, ``<kernel>.toml``); its source is its ``source`` key, else the ``.cu``
  named like the spec, else the folder's only ``.cu``. A ``case.toml`` without ``kernel`` whose
  source has several kernels is one case per kernel;
- the cases of a gate configuration (``gpuadvise.toml``/``pyproject.toml`` with a gate table):
  the caller passes them in (the gate layer reads those files);
- a ``.cu``/``.cuh`` given by name is one case, with the command line's options.

Folders named ``.git``, ``build``, ``node_modules`` or starting with a dot are skipped. Links to
folders are followed, each real folder walked once; a link to a folder that holds the walk (a link
back up the tree, a link to ``/``) is a loop and is not followed. A folder that cannot be read is
an error; a ``.toml`` that cannot be read is a case with that error.

A case's id is its spec's (or source's) path relative to the current folder, with ``::kernel``
when one spec launches several kernels.

``--shard K/N`` keeps the K-th of N contiguous slices of the cases sorted by id (jest's and
pytest-split's convention): every case lies in exactly one shard, whatever K, and the split only
depends on the list of ids.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from gpuadvise.analyze.options import KernelOptions
from gpuadvise.errors import ConfigError, UsageError
from gpuadvise.fileio import is_dir, lookup_problem
from gpuadvise.inputfiles import load_toml_file

_SPEC_KEYS = ("source", "kernel", "grid", "block")
_CONFIG_NAMES = ("pyproject.toml", "gpuadvise.toml")
_SKIP_DIRS = {"build", "node_modules", "__pycache__", "dist"}
SOURCE_SUFFIXES = (".cu", ".cuh")


@dataclass(frozen=True)
class Case:
    """One kernel launch of a folder. ``id``: a stable name (the spec's path relative to the
    folder given, with the kernel when a spec holds several); ``options``: how to analyze it;
    ``error``: why it cannot be (a spec that does not name a source that exists);
    ``recorded_ms``: the GPU time the program spent in this kernel and launch shape, from a
    spec ``gpuadvise record`` wrote (its ``[recorded] gpu_time_ms``): the folder's ranking
    then weighs each fix by the time it saves in the program."""

    id: str
    options: KernelOptions
    error: str | None = None
    recorded_ms: float | None = None


T = TypeVar("T")


def parse_shard(text: str | None) -> tuple[int, int] | None:
    """``--shard K/N`` (1 <= K <= N) as (K, N); None when not given."""
    if text is None:
        return None
    parts = text.strip().split("/")
    try:
        k, n = (int(p) for p in parts)
    except ValueError:
        k = n = 0
    if len(parts) != 2 or n < 1 or not 1 <= k <= n:
        raise UsageError(f"--shard {text!r} is not K/N", "give e.g. --shard 1/4 (1 <= K <= N)")
    return k, n


def take_shard(
    items: Sequence[T], shard: tuple[int, int] | None, key: Callable[[T], str]
) -> list[T]:
    """The items of shard ``(K, N)``: the K-th of N contiguous slices of ``items`` sorted by
    ``key`` (sizes differ by at most one)."""
    ordered = sorted(items, key=key)
    if shard is None:
        return ordered
    k, n = shard
    size, extra = divmod(len(ordered), n)
    start = (k - 1) * size + min(k - 1, extra)
    return ordered[start : start + size + (1 if k <= extra else 0)]


def _is_spec(path: Path) -> bool:
    """Whether ``path`` is a launch spec; OSError when it cannot be read (a dangling link reads
    as no spec)."""
    if path.name in _CONFIG_NAMES:
        return False
    try:
        data = load_toml_file(path, "spec file")
    except ConfigError:
        return False
    return any(k in data for k in _SPEC_KEYS)


def _folder_key(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_dev, st.st_ino


def _walk(root: Path) -> Iterable[Path]:
    """The files under ``root``, in sorted order. Links to folders are followed, and each real
    folder is walked once: a second way into a folder adds nothing, and a link to a folder that
    holds the walk (a link back up the tree, a link to ``/``) is a loop and is not followed. A
    folder that cannot be read is a :class:`UsageError` (its cases would be missed silently)."""
    holders = {_folder_key(root)}
    for above in root.resolve().parents:
        with contextlib.suppress(OSError):
            holders.add(_folder_key(above))
    seen: set[tuple[int, int]] = set()

    def walk(folder: Path) -> Iterable[Path]:
        try:
            key = _folder_key(folder)
            entries = sorted(folder.iterdir())
        except OSError as err:
            raise UsageError(
                f"cannot read the folder {folder} ({err.strerror or err})",
                "make it readable, or analyze the folders beside it",
            ) from None
        if key in seen or (folder != root and key in holders):
            return
        seen.add(key)
        for p in entries:
            if is_dir(p):
                if p.name.startswith(".") or p.name in _SKIP_DIRS:
                    continue
                yield from walk(p)
            else:
                yield p

    return walk(root)


def case_id(path: Path) -> str:
    """A case's name: its path relative to the current folder when under it, else absolute."""
    cwd = Path.cwd().resolve()
    p = path.resolve()
    return p.relative_to(cwd).as_posix() if p.is_relative_to(cwd) else p.as_posix()


def _spec_cases(spec: Path, base: KernelOptions) -> list[Case]:
    from gpuadvise.source.signature import list_kernels

    rel = case_id(spec)
    data = load_toml_file(spec, "spec file")
    source: Path | None = None
    if isinstance(data.get("source"), str):
        source = (spec.parent / data["source"]).resolve()
    else:
        same = spec.with_suffix(".cu")
        cus = sorted(spec.parent.glob("*.cu"))
        source = same if same.is_file() else (cus[0] if len(cus) == 1 else None)
    opts = dataclasses.replace(base, spec=str(spec), kernel=None, source=None)
    if source is None or not source.is_file():
        what = (
            f"its source {data['source']!r} does not exist"
            if "source" in data
            else ("it names no source and its folder has no single .cu")
        )
        return [Case(rel, opts, f"launch spec {rel}: {what}")]
    opts = dataclasses.replace(opts, source=str(source))
    kernel = data.get("kernel")
    recorded = data.get("recorded")
    ms = recorded.get("gpu_time_ms") if isinstance(recorded, dict) else None
    recorded_ms = float(ms) if isinstance(ms, int | float) and ms > 0 else None
    if isinstance(kernel, str) or spec.name != "case.toml":
        kernel = kernel if isinstance(kernel, str) else None
        return [Case(rel, dataclasses.replace(opts, kernel=kernel), recorded_ms=recorded_ms)]
    try:
        names = list_kernels(source.read_text(errors="replace"))
    except Exception:  # a source the signature parser cannot read: one case, analyze says why
        names = ()
    if len(names) <= 1:
        return [Case(rel, opts)]
    # the case's launch for every kernel of the source that has no spec of its own
    own = {p.stem for p in spec.parent.glob("*.toml")}
    return [Case(f"{rel}::{k}", dataclasses.replace(opts, kernel=k)) for k in names if k not in own]


def discover_cases(
    paths: Sequence[str],
    base: KernelOptions,
    gate_cases: Callable[[Path], list[Case]] | None = None,
) -> list[Case]:
    """The cases of ``paths`` (files and folders), without duplicates, sorted by id.
    ``base``: the command line's options (compile flags, --gpu ...), applied to every case;
    ``gate_cases``: reads the gate configuration of a folder (None: not searched)."""
    cases: list[Case] = []
    for text in paths:
        p = Path(text)
        problem = lookup_problem(p)
        if problem is not None:
            raise UsageError(f"{text} {problem}", "check the path")
        if not p.exists():
            raise UsageError(f"{text}: no such file or folder", "check the path")
        if p.is_file():
            try:
                spec = p.suffix == ".toml" and _is_spec(p)
            except OSError as err:
                raise UsageError(
                    f"{text} cannot be read ({err.strerror or err})", "check its permissions"
                ) from None
            if spec:
                cases += _spec_cases(p.resolve(), base)
            else:
                cases.append(Case(case_id(p), dataclasses.replace(base, source=str(p))))
            continue
        root = p.resolve()
        for f in _walk(root):
            try:
                if f.suffix == ".toml" and _is_spec(f):
                    cases += _spec_cases(f, base)
                elif f.name in _CONFIG_NAMES and gate_cases is not None:
                    cases += gate_cases(f)
            except OSError as err:  # a spec that cannot be read: a row that says so
                rel = case_id(f)
                why = lookup_problem(f) or f"cannot be read ({err.strerror or err})"
                cases.append(Case(rel, dataclasses.replace(base, spec=str(f)), f"{rel} {why}"))
    seen: dict[tuple[str | None, str | None, str | None, tuple[str, ...]], Case] = {}
    for c in cases:
        o = c.options
        key = (
            str(Path(o.source).resolve()) if o.source else c.id,
            o.kernel,
            str(Path(o.spec).resolve()) if o.spec else None,
            o.args,
        )
        seen.setdefault(key, c)
    out = sorted(seen.values(), key=lambda c: c.id)
    ids = [c.id for c in out]
    for i, c in enumerate(out):  # the same id twice (two kernels of one gate case file...)
        if ids.count(c.id) > 1:
            out[i] = dataclasses.replace(c, id=f"{c.id}#{ids[: i + 1].count(c.id)}")
    return out


def jobs_default() -> int:
    import os

    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def time_to_win_ms(kernel_ms: float | None, speedup: float | None) -> float | None:
    """What the best fix saves per launch: the kernel's time x (1 - 1/speedup)."""
    if kernel_ms is None or speedup is None or not math.isfinite(speedup) or speedup <= 1.0:
        return None if kernel_ms is None or speedup is None else 0.0
    return kernel_ms * (1.0 - 1.0 / speedup)
