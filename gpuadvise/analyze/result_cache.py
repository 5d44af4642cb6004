"""The analysis-result cache: an unchanged ``analyze`` re-run renders its stored report again
(in any format).

An entry is the *report* of one ``analyze`` (:class:`~gpuadvise.report_types.AnalysisReport`, as
``to_dict`` writes it: what every format renders), never a rendering or an exit code: every
output format and the exit code (``--fail-on``, from the report's findings) are derived from the
report on each run, as for a fresh analysis, and the command the terminal's summary names is the
current one.
It is stored under ``<cache root>/analysis/`` (the compile cache's root,
:func:`gpuadvise.toolchain.cache_root`, checked there) by the SHA-256 of everything it depends on:

- gpuadvise itself: its version and the size and modification time of every ``.py`` of the
  package and of the bundled and ``--rules-dir`` rules (a changed rule or model is a miss);
- the kernel: the launch spec as built (:meth:`KernelSpec.to_dict`: grid, block, args, buffers,
  fills, seed), the bytes of the source and of the spec file, the SHA-256 of every data-file fill
  (``.npy``/``.bin``: a file rewritten with the same size and time is a miss), and the compiled
  module (the SHA-256 of its PTX and cubin, which covers the included headers and the compile
  options: the compile cache finds it without running nvcc);
- the device model, the rules' configuration (every ``pyproject.toml`` and ``gpuadvise.toml``
  from the source's folder up), the analysis options and ``GPUADVISE_MEMORY_BUDGET``, and
  whether a GPU is here.

Only complete, unmeasured analyses are stored (no ``--time-budget`` cut, no variants measured on a
GPU or written). An entry that is not what :func:`store` writes (not a regular file, larger than
the read limit, not JSON, another format or key, a report that does not read back, or one the
renderers cannot draw) is a miss, never an error. ``--no-cache`` skips the lookup and the store.

A cache is trusted like the code that wrote it: an entry holds the findings a report shows, so a
cache written by an untrusted job (a pull request from a fork) must never be restored into a
trusted one (a job on the main branch), whose report and ``--fail-on`` it would decide.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from gpuadvise.analyze.options import KernelOptions
from gpuadvise.inputfiles import file_sha256, parse_json, read_cache_bytes

if TYPE_CHECKING:
    from gpuadvise.report_types import AnalysisReport

log = logging.getLogger(__name__)

__all__ = ["analysis_key", "load", "store"]

FORMAT = 3  # bumped when an entry's layout changes (2: the analysis' data; 3: its report)


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
    return file_sha256(path) or "unreadable"


def analysis_key(opts: KernelOptions, params: dict[str, Any], render: dict[str, Any]) -> str:
    """The key of an analysis of ``opts`` with the analysis ``params`` (sample_ctas, select, ...)
    rendered as ``render`` says. Builds the spec and finds the compiled module (compiling on a
    miss of the compile cache), so bad input fails here as it would in the analysis."""
    import gpuadvise
    from gpuadvise.analyze.options import build
    from gpuadvise.toolchain import compile_source, find_toolchain

    spec, choice, options = build(opts)
    tc = find_toolchain(opts.nvcc)
    module = compile_source(Path(spec.source), options, tc, kernels=[spec.kernel])
    # not the runner's client: it imports numpy, which a re-run the cache answers never needs
    from gpuadvise.runner.presence import pycuda_missing

    package = Path(gpuadvise.__file__).resolve().parent
    data_files = []
    doc_spec = spec.to_dict()
    for b in [*(doc_spec.get("buffers") or []), *(doc_spec.get("constants") or [])]:
        fill = str(b.get("fill", "")) if isinstance(b, dict) else ""
        if fill.lower().endswith((".npy", ".bin")):  # by content: a stamp can be kept on purpose
            data_files.append((fill, file_sha256(Path(fill)) or "unreadable"))
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


def load(key: str) -> AnalysisReport | None:
    """The report stored under ``key``, checked, or None (absent, damaged, forged, too large)."""
    from gpuadvise.report_types import AnalysisReport
    from gpuadvise.spec.budget import read_limit_bytes

    raw = read_cache_bytes(_path(key), read_limit_bytes(as_json=True))
    if raw is None:
        log.info("analysis-result cache miss: %s", key[:16])
        return None
    try:
        doc = parse_json(raw)
        if not isinstance(doc, dict) or doc.get("format") != FORMAT or doc.get("key") != key:
            log.info("analysis-result cache miss (another format or key): %s", key[:16])
            return None
        got = AnalysisReport.from_dict(doc.get("report"))
    except (ValueError, RecursionError):  # not JSON, nested too deep, or not a report
        log.info("analysis-result cache miss (damaged entry): %s", _path(key))
        return None
    log.info("analysis-result cache hit: %s", _path(key))
    return got


def store(key: str, report: AnalysisReport) -> None:
    """Store ``report`` under ``key`` (a cache that cannot be written is skipped silently)."""
    from gpuadvise.fileio import write_atomic

    path = _path(key)
    try:
        text = json.dumps({"format": FORMAT, "key": key, "report": report.to_dict()})
    except (TypeError, ValueError):  # a value JSON cannot hold: not cached
        return
    try:
        if path.is_dir() and not path.is_symlink():  # a folder in its place: a damaged entry
            import shutil

            shutil.rmtree(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, text)
        log.info("analysis-result cache: stored %s", path)
    except OSError:
        pass
