"""The analysis-result cache: an unchanged ``analyze`` re-run prints its stored output.

An entry is the rendered output of one ``analyze`` (text, JSON, HTML ...) and its exit code,
stored under ``<cache root>/analysis/`` (the compile cache's root,
:func:`gpuadvise.toolchain.cache_root`) by the SHA-256 of everything it depends on:

- gpuadvise itself: its version and the size and modification time of every ``.py`` of the
  package and of the bundled and ``--rules-dir`` rules (a changed rule or model is a miss);
- the kernel: the launch spec as built (:meth:`KernelSpec.to_dict`: grid, block, args, buffers,
  fills, seed), the bytes of the source and of the spec file, the stat of data-file fills, and the
  compiled module (the SHA-256 of its PTX and cubin, which covers the included headers and the
  compile options: the compile cache finds it without running nvcc);
- the device model, the rules' configuration (every ``pyproject.toml`` and ``gpuadvise.toml``
  from the source's folder up), the analysis options, the output format (and for
  text, the terminal's width and colours), ``GPUADVISE_MEMORY_BUDGET``, and whether a GPU is here.

Only complete, unmeasured analyses are stored (no ``--time-budget`` cut, no variants measured on a
GPU or written). A damaged entry is a miss. ``--no-cache`` skips the lookup and the store.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from gpuadvise.analyze.options import KernelOptions

__all__ = ["CachedOutput", "analysis_key", "load", "store"]

FORMAT = 1  # bumped when an entry's layout changes


@dataclass(frozen=True)
class CachedOutput:
    """An analysis' rendered output and exit code."""

    text: str
    exit_code: int


def _tree_stamp(root: Path) -> list[tuple[str, int, int]]:
    out = []
    if root.is_dir():
        for p in sorted(root.rglob("*.py")):
            try:
                st = p.stat()
            except OSError:
                continue
            out.append((str(p), st.st_size, st.st_mtime_ns))
    return out


def _config_files(source: Path) -> list[tuple[str, str]]:
    """The digests of every pyproject.toml and gpuadvise.toml from the source's folder up (the
    rules' configuration is read from one of them; importing the rules to find which costs more
    than hashing them all)."""
    out = []
    folder = source.resolve().parent
    for d in (folder, *folder.parents):
        for name in ("gpuadvise.toml", "pyproject.toml"):
            if (d / name).is_file():
                out.append((str(d / name), _file_digest(d / name)))
    return out


def _file_digest(path: Path) -> str:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return "unreadable"


def analysis_key(opts: KernelOptions, params: dict[str, Any], render: dict[str, Any]) -> str:
    """The key of an analysis of ``opts`` with the analysis ``params`` (sample_ctas, select, ...)
    rendered as ``render`` says. Builds the spec and finds the compiled module (compiling on a
    miss of the compile cache), so bad input fails here as it would in the analysis."""
    import gpuadvise
    from gpuadvise.analyze.options import build
    from gpuadvise.runner.client import pycuda_missing
    from gpuadvise.toolchain import compile_source, find_toolchain

    spec, choice, options = build(opts)
    tc = find_toolchain(opts.nvcc)
    module = compile_source(Path(spec.source), options, tc, kernels=[spec.kernel])
    package = Path(gpuadvise.__file__).resolve().parent
    data_files = []
    doc_spec = spec.to_dict()
    for b in [*(doc_spec.get("buffers") or []), *(doc_spec.get("constants") or [])]:
        fill = str(b.get("fill", "")) if isinstance(b, dict) else ""
        if fill.lower().endswith((".npy", ".bin")):
            try:
                st = Path(fill).stat()
                data_files.append((fill, st.st_size, st.st_mtime_ns))
            except OSError:
                data_files.append((fill, -1, -1))
    doc = {
        "format": FORMAT,
        "version": gpuadvise.__version__,
        "package": _tree_stamp(package),
        "rules": _tree_stamp(package.parent / "rules")
        + [s for d in params.get("rules_dirs", ()) for s in _tree_stamp(Path(d))],
        "config_files": _config_files(Path(spec.source)),
        "spec": spec.to_dict(),
        "source": _file_digest(Path(spec.source)),
        "spec_file": None if spec.spec_path is None else _file_digest(Path(spec.spec_path)),
        "data_files": data_files,
        "ptx": hashlib.sha256(module.ptx.encode()).hexdigest(),
        "cubin": _file_digest(Path(module.cubin_path)),
        "flags": list(module.flags),
        "device": repr(choice.device),
        "device_note": choice.note,
        "params": params,
        "render": render,
        "memory_budget": os.environ.get("GPUADVISE_MEMORY_BUDGET", ""),
        "gpu": pycuda_missing(),
    }
    text = json.dumps(doc, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def _path(key: str) -> Path:
    from gpuadvise.toolchain import cache_root

    return cache_root() / "analysis" / key[:2] / f"{key}.json"


def load(key: str) -> CachedOutput | None:
    """The stored output of ``key``, or None (absent or damaged)."""
    try:
        doc = json.loads(_path(key).read_text(encoding="utf-8"))
        if doc.get("format") != FORMAT or not isinstance(doc.get("text"), str):
            return None
        return CachedOutput(doc["text"], int(doc["exit_code"]))
    except (OSError, ValueError, TypeError, KeyError, AttributeError):
        return None


def store(key: str, out: CachedOutput) -> None:
    """Store ``out`` under ``key`` (a cache that cannot be written is skipped silently)."""
    from gpuadvise.fileio import write_atomic

    path = _path(key)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps({"format": FORMAT, **asdict(out)}))
    except OSError:
        pass
