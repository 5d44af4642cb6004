"""The compile cache reads an included file again only when its stamp (size, times, inode) is not
the one recorded with its hash, and records stamps only of files that settled before the stat (git's
racily clean entries): a write after the hash, even one that keeps the size and sets the
modification time back, is seen."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pytest

from gpuadvise.errors import ToolchainError
from gpuadvise.toolchain import CompileOptions, cache, compile_source, find_toolchain

CUDA_DIR = Path(__file__).resolve().parents[1] / "cuda"
LIMIT = 1 << 20


def _has_nvcc() -> bool:
    try:
        find_toolchain()
    except ToolchainError:
        return False
    return True


needs_nvcc = pytest.mark.skipif(not _has_nvcc(), reason="no CUDA toolchain (nvcc) found")


@pytest.fixture()
def reads(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    """The files the cache hashes (read whole), in order; this process's hashes forgotten."""
    seen: list[Path] = []
    real = cache._file_sha

    def counted(path: Path, limit: int | None = None) -> str | None:
        seen.append(Path(path))
        return real(path, limit)

    monkeypatch.setattr(cache, "_file_sha", counted)
    monkeypatch.setattr(cache, "_hashed", {})
    return seen


@pytest.fixture()
def later(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cache's clock 10 s ahead: every file written so far has settled."""
    real = time.time_ns
    monkeypatch.setattr(cache.time, "time_ns", lambda: real() + 10 * cache.SETTLED_NS // 2)


def _rewrite_keeping_size_and_mtime(path: Path, text: str) -> None:
    before = path.stat()
    assert len(text.encode()) == before.st_size
    time.sleep(0.05)  # past the file system's clock tick: the change time moves
    path.write_text(text)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert path.stat().st_mtime_ns == before.st_mtime_ns


@pytest.mark.usefixtures("later")
def test_a_settled_file_is_read_once_and_again_after_any_write(
    tmp_path: Path, reads: list[Path]
) -> None:
    f = tmp_path / "h.cuh"
    f.write_text("int a = 1;\n")
    first, stamp = cache._dep_sha(str(f), LIMIT)
    assert stamp is not None and cache._dep_sha(str(f), LIMIT) == (first, stamp)
    assert reads == [f]
    _rewrite_keeping_size_and_mtime(f, "int a = 2;\n")
    second, new_stamp = cache._dep_sha(str(f), LIMIT)
    assert second != first and new_stamp != stamp and reads == [f, f]
    # a stamp recorded with a hash (a manifest's) stands for the bytes: not read; an old one not
    assert cache._dep_sha(str(f), LIMIT, (stamp, "0" * 64))[0] == second
    assert cache._dep_sha(str(f), LIMIT, (new_stamp, "0" * 64)) == ("0" * 64, new_stamp)
    assert len(reads) == 2


def test_a_file_changed_just_now_is_read_every_time(tmp_path: Path, reads: list[Path]) -> None:
    f = tmp_path / "h.cuh"
    f.write_text("int a = 1;\n")
    digest, stamp = cache._dep_sha(str(f), LIMIT)
    assert stamp is None and digest is not None
    # not even a matching recorded stamp is trusted while the file may still change in its tick
    st = f.stat()
    now = (st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, st.st_dev)
    assert cache._dep_sha(str(f), LIMIT, (now, "0" * 64)) == (digest, None)
    assert reads == [f, f]
    assert cache._dep_sha(str(tmp_path / "gone.cuh"), LIMIT) == (None, None)
    assert cache._dep_sha(str(tmp_path), LIMIT) == (None, None)  # a folder


@needs_nvcc
@pytest.mark.usefixtures("later")
def test_a_lookup_trusts_the_manifest_stamps_until_a_header_changes(
    tmp_path: Path, reads: list[Path]
) -> None:
    src_dir = tmp_path / "src"
    (src_dir / "include").mkdir(parents=True)
    src = src_dir / "multi.cu"
    shutil.copy(CUDA_DIR / "multi.cu", src)
    header = src_dir / "include" / "ga_helpers.cuh"
    shutil.copy(CUDA_DIR / "include" / "ga_helpers.cuh", header)
    opts = CompileOptions(include_dirs=[src_dir / "include"], cache_dir=tmp_path / "c")
    first = compile_source(src, opts)
    assert not first.from_cache
    (manifest,) = (tmp_path / "c").glob("manifests/*/*.json")
    doc = json.loads(manifest.read_text())
    assert len(doc["stamps"]) == len(doc["deps"]) and all(doc["stamps"])

    cache._hashed.clear()  # as in a new process: the manifest's stamps alone
    reads.clear()
    assert compile_source(src, opts).from_cache and reads == []

    text = header.read_text()
    _rewrite_keeping_size_and_mtime(header, text.replace("2.0f", "3.0f"))
    third = compile_source(src, opts)
    assert not third.from_cache and third.ptx != first.ptx and header in reads

    # stamps that are not what store writes are ignored: the files are hashed, the entry found
    doc = json.loads(manifest.read_text())
    manifest.write_text(json.dumps({**doc, "stamps": "forged"}))
    cache._hashed.clear()
    reads.clear()
    assert compile_source(src, opts).from_cache and len(reads) == len(doc["deps"])
    assert all(json.loads(manifest.read_text())["stamps"])  # and written again
