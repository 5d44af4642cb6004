"""One process at a time makes a cache entry (gpuadvise.toolchain.cache_lock): two processes
that miss the same compile, or the same life ranges, at the same moment run nvcc (nvdisasm) once;
the lock is a ``flock`` (a dead holder frees it), bounded, and taken only where the cache is."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gpuadvise.toolchain import (
    CompileOptions,
    Toolchain,
    cache_lock,
    compile_source,
    find_toolchain,
)
from gpuadvise.toolchain import compile as compilemod

ROOT = Path(__file__).resolve().parents[2]
KERNEL = "__global__ void k(float *x) { x[threadIdx.x] = 2.0f * x[threadIdx.x]; }\n"


@pytest.fixture
def tc() -> Toolchain:
    """The toolchain (a test that uses it is marked ``toolkit``: skipped without one)."""
    return find_toolchain()


def _gated(tmp_path: Path, name: str, real: Path) -> tuple[Path, Path, Path]:
    """A wrapper of the tool ``real`` that logs each run and starts it only once the file
    ``go`` exists (so the test knows a run is under way while it starts a second process)."""
    log, go = tmp_path / f"{name}.log", tmp_path / f"{name}.go"
    script = tmp_path / "bin" / name
    script.parent.mkdir(exist_ok=True)
    script.write_text(
        "#!/bin/sh\n"
        f'echo "$*" >> "{log}"\n'
        f'while [ ! -e "{go}" ]; do sleep 0.02; done\n'
        f'exec "{real}" "$@"\n'
    )
    script.chmod(0o755)
    return script, log, go


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _wait_for(what: object, timeout: float = 120.0) -> None:
    end = time.monotonic() + timeout
    while not what():  # type: ignore[operator]
        assert time.monotonic() < end, "timed out"
        time.sleep(0.02)


def _start(code: str, *args: object) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", code, *map(str, args)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _done(proc: subprocess.Popen[str]) -> str:
    out, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err
    return out.strip()


# argv: the gated nvcc, the source, the cache, and a file where each lookup is logged ("" none)
_COMPILE = """
import dataclasses, sys
from pathlib import Path
from gpuadvise.toolchain import CompileOptions, compile_source, find_toolchain
from gpuadvise.toolchain import compile as C
nvcc, src, cache, looked = sys.argv[1:5]
if looked:
    real = C.lookup
    def lookup(root, manifest):
        got = real(root, manifest)
        with open(looked, "a") as f:
            f.write("miss\\n" if got is None else "hit\\n")
        return got
    C.lookup = lookup
tc = dataclasses.replace(find_toolchain(), nvcc=Path(nvcc))
m = compile_source(src, CompileOptions(cache_dir=Path(cache)), tc)
print(m.cubin_path, m.from_cache)
"""


@pytest.mark.toolkit
def test_two_processes_compiling_one_content_run_nvcc_once(tmp_path: Path, tc: Toolchain) -> None:
    nvcc, log, go = _gated(tmp_path, "nvcc", tc.nvcc)
    src, cache, looked = tmp_path / "k.cu", tmp_path / "cache", tmp_path / "looked.log"
    src.write_text(KERNEL)
    first = _start(_COMPILE, nvcc, src, cache, "")
    _wait_for(lambda: _lines(log))  # the first's nvcc runs (held at the gate): it has missed
    second = _start(_COMPILE, nvcc, src, cache, looked)
    _wait_for(lambda: _lines(looked))  # the second has missed too
    assert _lines(looked) == ["miss"]
    go.touch()
    made, read = _done(first), _done(second)
    assert len(_lines(log)) == 1  # nvcc ran once
    assert _lines(looked) == ["miss", "hit"]  # looked up again once the lock was held
    assert made.endswith("False") and read.endswith("True")
    assert made.split()[0] == read.split()[0]  # the first's entry
    assert list(cache.glob("manifests/*/*.lock"))  # the lock file, beside the manifest


# argv: the gated nvdisasm, the cubin, and a file where each sidecar read is logged ("" none)
_LIFE_RANGES = """
import sys
from pathlib import Path
from gpuadvise.toolchain import sass
tool, cubin, looked = sys.argv[1:4]
if looked:
    real = sass.read_sidecar
    def read_sidecar(path):
        got = real(path)
        with open(looked, "a") as f:
            f.write("miss\\n" if got is None else "hit\\n")
        return got
    sass.read_sidecar = read_sidecar
st = Path(cubin).stat()
print(len(sass.life_range_text(cubin, st.st_mtime_ns, st.st_size, tool, None)))
"""


@pytest.mark.toolkit
def test_two_processes_reading_one_cubin_s_life_ranges_run_nvdisasm_once(
    tmp_path: Path, tc: Toolchain
) -> None:
    if tc.nvdisasm is None:
        pytest.skip("no nvdisasm")
    tool, log, go = _gated(tmp_path, "nvdisasm", tc.nvdisasm)
    src, looked = tmp_path / "k.cu", tmp_path / "looked.log"
    src.write_text(KERNEL)
    module = compile_source(src, CompileOptions(cache_dir=tmp_path / "cache"), tc)
    cubin = str(module.cubin_path.resolve())
    first = _start(_LIFE_RANGES, tool, cubin, "")
    _wait_for(lambda: _lines(log))
    second = _start(_LIFE_RANGES, tool, cubin, looked)
    _wait_for(lambda: _lines(looked))
    assert _lines(looked) == ["miss"]
    go.touch()
    assert _done(first) == _done(second) != "0"  # the same text
    assert len(_lines(log)) == 1  # nvdisasm ran once
    assert _lines(looked) == ["miss", "hit"]


_HOLD = """
import sys, time
from pathlib import Path
from gpuadvise.toolchain import cache_lock
fd = cache_lock.acquire(Path(sys.argv[1]), 0)
print("held" if fd is not None else "not held", flush=True)
time.sleep(600)
"""


def test_a_lock_is_bounded_and_freed_by_its_holder_s_death(tmp_path: Path) -> None:
    path = tmp_path / "locks" / "a.lock"
    holder = _start(_HOLD, path)
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        start = time.monotonic()
        assert cache_lock.acquire(path, 0.3) is None  # held elsewhere: not within the bound
        assert 0.3 <= time.monotonic() - start < 5
        holder.send_signal(signal.SIGKILL)  # dies holding it
        holder.wait(timeout=30)
        fd = cache_lock.acquire(path, 5)
        assert fd is not None  # freed with its holder
        assert cache_lock.acquire(path, 0) is None  # and exclusive, in one process too
        cache_lock.release(fd)
        with cache_lock.held(path, 0) as locked:
            assert locked
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait(timeout=30)
        for stream in (holder.stdout, holder.stderr):
            if stream is not None:
                stream.close()


def test_no_lock_where_its_file_cannot_be_a_lock(tmp_path: Path) -> None:
    target = tmp_path / "elsewhere"
    target.write_text("not a lock")
    (tmp_path / "link.lock").symlink_to(target)
    assert cache_lock.acquire(tmp_path / "link.lock", 0) is None  # never followed
    assert target.read_text() == "not a lock"
    os.mkfifo(tmp_path / "fifo.lock")
    assert cache_lock.acquire(tmp_path / "fifo.lock", 0) is None  # not a regular file
    (tmp_path / "dir.lock").mkdir()
    assert cache_lock.acquire(tmp_path / "dir.lock", 0) is None
    if os.geteuid() != 0:  # root writes anywhere
        shut = tmp_path / "read-only"
        shut.mkdir(mode=0o500)
        try:
            assert cache_lock.acquire(shut / "manifests" / "a.lock", 0) is None
            assert not (shut / "manifests").exists()
        finally:
            shut.chmod(0o700)


@pytest.mark.toolkit
def test_the_compile_waits_a_bounded_time_and_locks_nothing_without_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tc: Toolchain
) -> None:
    src, cache = tmp_path / "k.cu", tmp_path / "cache"
    src.write_text(KERNEL)
    options = CompileOptions(cache_dir=cache)
    compile_source(src, options, tc)
    (manifest,) = cache.glob("manifests/*/*.json")
    shutil.rmtree(cache / "entries")  # the next lookup misses
    monkeypatch.setattr(compilemod, "LOCK_WAIT_S", 0.3)
    taken: list[Path] = []
    acquire = cache_lock.acquire

    def spy(path: Path, wait_s: float) -> int | None:
        taken.append(path)
        return acquire(path, wait_s)

    monkeypatch.setattr(cache_lock, "acquire", spy)
    held = acquire(manifest.with_suffix(".lock"), 0)  # a hung compile elsewhere
    assert held is not None
    try:
        start = time.monotonic()
        again = compile_source(src, options, tc)
        assert time.monotonic() - start >= 0.3
        assert not again.from_cache and again.cubin_path.is_file()  # compiled, unlocked
    finally:
        cache_lock.release(held)
    assert taken == [manifest.with_suffix(".lock")]
    taken.clear()
    assert compile_source(src, options, tc).from_cache
    assert taken == []  # a hit takes no lock
    compile_source(src, CompileOptions(use_cache=False), tc)
    assert taken == []  # --no-cache: no lock
