"""The compile cache: compiled modules stored by the hash of everything that went into them.

Where: ``$GPUADVISE_CACHE_DIR``, else ``$XDG_CACHE_HOME/gpuadvise``, else ``~/.cache/gpuadvise``.

An entry's key is the SHA-256 of the toolchain version, the arch, the nvcc flags (and
``$NVCC_PREPEND_FLAGS``/``$NVCC_APPEND_FLAGS``/``$NVCC_CCBIN``) and the path and bytes of the
source and of every file it includes (the paths matter: line info embeds them). Finding the key
must not cost an nvcc run, so a small manifest keyed by (source path, source bytes, flags,
version) remembers the included files and their hashes from the last compile; a lookup re-hashes
them and, if all match, loads the entry. Any change runs nvcc again.

A file is not read again while its stamp (size, modification and change times, inode, device)
is the one recorded with its hash, in the manifest or earlier in the process: a CUDA runtime
include is about 260-1300 headers, 6-19 MB, 25-60 ms of hashing a lookup, and an analysis looks up
two to four times. Like git's racily clean index entries, a stamp is recorded only for a file
last changed :data:`SETTLED_NS` before it was stat-ed (before it was read for its hash): a write
after the stat changes the change time, which no one can set back, so a stamp that still
matches is the same bytes.

Like ccache's direct mode, a header newly created earlier on the include path is not noticed while
the old one is unchanged. Files are written to a temp name and ``os.replace``-d; ``meta.json`` is
written last and marks a complete entry.

A damaged entry is a miss, never an error: a manifest or ``meta.json`` that is not what this
module writes (wrong JSON shape or types, a non-number where a count belongs), or a cubin or PTX
whose SHA-256 differs from the one recorded, makes :func:`lookup` return None; the caller
compiles again and :func:`store` overwrites the entry.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import re
import shutil
import stat
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from gpuadvise.errors import ToolchainError
from gpuadvise.fileio import write_atomic
from gpuadvise.inputfiles import parse_json, read_cache_bytes
from gpuadvise.spec.budget import read_limit_bytes
from gpuadvise.toolchain.cache_dir import checked_cache_root, default_cache_root
from gpuadvise.toolchain.module import CompiledModule
from gpuadvise.toolchain.options import CompileOptions

__all__ = ["CACHE_FORMAT", "cache_root", "content_folder", "lookup", "manifest_path", "store"]

CACHE_FORMAT = 2
"""Bumped whenever the cache layout or ``meta.json`` changes; part of every key.
2: ``meta.json`` records the SHA-256 of the cubin and of the PTX."""

_KEY_RE = re.compile(r"^[0-9a-f]{64}$")

SETTLED_NS = 2_000_000_000
"""How long before its stat a file must have last changed for its stamp to stand for its bytes:
more than a file system's timestamp tick (2 s on FAT) and the clock's coarse step."""

Stamp = tuple[int, int, int, int, int]  # size, mtime_ns, ctime_ns, inode, device
_hashed: dict[str, tuple[Stamp, str]] = {}  # path -> (stamp, SHA-256): this process's hashes


def cache_root(options: CompileOptions | None = None) -> Path:
    """The cache directory: ``options.cache_dir``, ``$GPUADVISE_CACHE_DIR``, XDG, ``~/.cache``;
    refused (a one-line UsageError) unless it is a folder of the user's own that is gpuadvise's
    (:func:`~gpuadvise.toolchain.cache_dir.checked_cache_root`)."""
    if options is not None and options.cache_dir is not None:
        return checked_cache_root(options.cache_dir)
    return checked_cache_root(default_cache_root())


def cache_write_error(root: Path, exc: OSError) -> ToolchainError:
    return ToolchainError(
        f"cannot write the compile cache at {root}: {exc}",
        "set GPUADVISE_CACHE_DIR to a writable directory, or use --no-cache",
    )


def sha256_hex(data: str | bytes) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()


def _file_sha(path: Path, limit: int | None = None) -> str | None:
    """The SHA-256 of ``path`` (None: not a readable file within ``limit`` bytes, default
    :func:`~gpuadvise.spec.budget.read_limit_bytes`; a caller hashing many files reads the
    limit once: it reads /proc and the cgroup's files)."""
    data = read_cache_bytes(path, read_limit_bytes() if limit is None else limit)
    return None if data is None else sha256_hex(data)


def _dep_sha(
    path: str, limit: int, recorded: tuple[Stamp, str] | None = None
) -> tuple[str | None, Stamp | None]:
    """The SHA-256 of the included file ``path`` (None: not a readable regular file within
    ``limit`` bytes) and its stamp if settled (see the module docstring), else None. Not read
    when the stamp is ``recorded``'s (a manifest's) or that of an earlier hash in this process."""
    before = time.time_ns()
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None, None
    stamp: Stamp | None = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)
    if not (
        stat.S_ISREG(st.st_mode)
        and st.st_size <= limit
        and before - max(st.st_mtime_ns, st.st_ctime_ns) >= SETTLED_NS
    ):
        stamp = None
    if stamp is not None:
        for known in (recorded, _hashed.get(path)):
            if known is not None and known[0] == stamp:
                _hashed[path] = known
                return known[1], stamp
    digest = _file_sha(Path(path), limit)
    if digest is None:
        return None, None
    if stamp is not None:
        _hashed[path] = (stamp, digest)
    return digest, stamp


def content_folder(root: Path, kind: str, files: Mapping[str, str]) -> Path:
    """A folder of the cache ``root`` named by ``files`` (name -> text) and holding them
    (``root/kind/<hash>/``): sources generated again with the same texts (a layout proxy and
    its specs: :mod:`gpuadvise.analyze.proxy_trace`; a variant's patched copy is a rule's
    candidate, :func:`gpuadvise.analyze.services.candidate_path`) are the same paths, so that
    their compile's key (the path and bytes of the source) finds the last compile's entry. A
    file is written (atomically) only when it is not there with these bytes: an unchanged file
    keeps its stamp (see the module docstring). Raises OSError when the cache cannot be
    written."""
    blobs = {name: text.encode("utf-8") for name, text in files.items()}
    named = sorted((name, sha256_hex(blob)) for name, blob in blobs.items())
    key = sha256_hex(json.dumps([CACHE_FORMAT, named]))
    folder = root / kind / key[:32]
    for name, blob in blobs.items():
        if name in ("", ".", "..") or Path(name).name != name:
            raise OSError(f"{name!r} is not a file name")
        path = folder / name
        if read_cache_bytes(path, len(blob)) == blob:
            continue
        _clear_obstacle(path)
        write_atomic(path, blob)
    return folder


def _read(path: Path, *, as_json: bool = False) -> bytes:
    """A file of the cache (regular, within the read limit), else OSError: a miss."""
    data = read_cache_bytes(path, read_limit_bytes(as_json=as_json))
    if data is None:
        raise OSError(f"{path} is not a readable cache file")
    return data


def nvcc_env() -> list[str]:
    """The environment variables that change what nvcc does; part of every cache key."""
    names = ("NVCC_PREPEND_FLAGS", "NVCC_APPEND_FLAGS", "NVCC_CCBIN")
    return [os.environ.get(v, "") for v in names]


def manifest_path(
    root: Path, version: str, arch: str, flags: Sequence[str], src: Path, src_bytes: bytes
) -> Path:
    """Where the manifest of compiling ``src`` (with these bytes) this way lives."""
    key = sha256_hex(
        json.dumps(
            [CACHE_FORMAT, version, arch, list(flags), nvcc_env(), str(src), sha256_hex(src_bytes)]
        )
    )
    return root / "manifests" / key[:2] / f"{key}.json"


def _checked_manifest(data: Any) -> tuple[list[tuple[str, str]], str, list[Stamp | None]]:
    """The manifest's dependencies (path, SHA-256), entry key and the dependencies' stamps (None
    where none was recorded; all None when the stamps are missing or not what :func:`store`
    writes: the files are then hashed, as by a gpuadvise that wrote no stamps)."""
    if not isinstance(data, dict) or not isinstance(data.get("deps"), list):
        raise ValueError("not a manifest")
    deps = []
    for item in data["deps"]:
        if not (
            isinstance(item, list) and len(item) == 2 and all(isinstance(s, str) for s in item)
        ):
            raise ValueError("a dependency is not a [path, sha256] pair")
        deps.append((item[0], item[1]))
    entry = data.get("entry")
    if not isinstance(entry, str) or not _KEY_RE.match(entry):
        raise ValueError("the entry key is not a SHA-256")
    return deps, entry, _checked_stamps(data.get("stamps"), len(deps))


def _checked_stamps(data: Any, count: int) -> list[Stamp | None]:
    none: list[Stamp | None] = [None] * count
    if not isinstance(data, list) or len(data) != count:
        return none
    out: list[Stamp | None] = []
    for item in data:
        if item is None:
            out.append(None)
        elif (
            isinstance(item, list)
            and len(item) == 5
            and all(isinstance(x, int) and not isinstance(x, bool) for x in item)
        ):
            out.append((item[0], item[1], item[2], item[3], item[4]))
        else:
            return none
    return out


def lookup(root: Path, manifest: Path) -> CompiledModule | None:
    """The cached module the manifest points to, if every input and stored file is intact."""
    try:
        deps, key, stamps = _checked_manifest(parse_json(_read(manifest, as_json=True)))
        limit = read_limit_bytes()
        now: list[Stamp | None] = []
        for (path, digest), recorded in zip(deps, stamps, strict=True):
            got, stamp = _dep_sha(path, limit, None if recorded is None else (recorded, digest))
            if got != digest:
                return None
            now.append(stamp)
        entry = root / "entries" / key[:2] / key
        meta = parse_json(_read(entry / "meta.json", as_json=True))
        if not isinstance(meta, dict) or meta.get("format") != CACHE_FORMAT:
            return None
        module = CompiledModule.from_dict(meta["module"])
        cubin = entry / "module.cubin"
        ptx_bytes = _read(entry / "module.ptx")
        if sha256_hex(_read(cubin)) != meta.get("cubin_sha256"):
            return None
        if sha256_hex(ptx_bytes) != meta.get("ptx_sha256"):
            return None
        ptx = ptx_bytes.decode("utf-8")
    except (OSError, ValueError, KeyError, RecursionError):  # bad UTF-8 and JSON: ValueError
        return None
    if now != stamps:  # files settled since (or written by a gpuadvise without stamps)
        with contextlib.suppress(OSError):  # a read-only cache: hashed again next time
            _write_manifest(manifest, deps, key, now)
    return dataclasses.replace(module, cubin_path=cubin, ptx=ptx, from_cache=True)


def _write_manifest(
    manifest: Path, deps: Sequence[tuple[str, str | None]], entry: str, stamps: list[Stamp | None]
) -> None:
    doc = {"deps": deps, "entry": entry, "stamps": [None if s is None else list(s) for s in stamps]}
    write_atomic(manifest, json.dumps(doc))


def _clear_obstacle(path: Path, *, folder: bool = False) -> None:
    """Remove what stands where the cache writes ``path`` (a file, or with ``folder`` a folder)
    and is not of that kind: a folder, a FIFO or a dangling link in place of an entry's file is
    a damaged entry, rewritten like any other (a symbolic link is removed, never followed)."""
    if not (path.exists() or path.is_symlink()):
        return
    if path.is_symlink():
        path.unlink()
    elif folder:
        if not path.is_dir():
            path.unlink()
    elif path.is_dir():
        shutil.rmtree(path)
    elif not path.is_file():
        path.unlink()


def store(root: Path, manifest: Path, module: CompiledModule, staging: Path) -> CompiledModule:
    """Put ``module`` (its cubin in ``staging``) in the cache; the module as stored.

    An entry already there (a damaged one, or one a concurrent run wrote) is overwritten.
    """
    limit = read_limit_bytes()
    hashed = [_dep_sha(str(p), limit) for p in module.dependencies]
    deps = [(str(p), digest) for p, (digest, _) in zip(module.dependencies, hashed, strict=True)]
    entry_key = sha256_hex(
        json.dumps(
            [CACHE_FORMAT, module.toolchain_version, module.arch, module.flags, nvcc_env(), deps]
        )
    )
    entry = root / "entries" / entry_key[:2] / entry_key
    try:
        _clear_obstacle(entry, folder=True)
        entry.mkdir(parents=True, exist_ok=True)
        cubin = entry / "module.cubin"
        for target in (cubin, entry / "module.ptx", entry / "meta.json", manifest):
            _clear_obstacle(target)
        cubin_bytes = (staging / "module.cubin").read_bytes()
        write_atomic(cubin, cubin_bytes)
        write_atomic(entry / "module.ptx", module.ptx)
        stored = dataclasses.replace(module, cubin_path=cubin)
        meta = stored.to_dict()
        meta["ptx"] = ""  # kept in module.ptx
        doc = {
            "format": CACHE_FORMAT,
            "cubin_sha256": sha256_hex(cubin_bytes),
            "ptx_sha256": sha256_hex(module.ptx),
            "module": meta,
        }
        write_atomic(entry / "meta.json", json.dumps(doc, indent=1))
        if all(d is not None for _, d in deps):
            _write_manifest(manifest, deps, entry_key, [st for _, st in hashed])
    except OSError as exc:
        raise cache_write_error(root, exc) from None
    return stored
