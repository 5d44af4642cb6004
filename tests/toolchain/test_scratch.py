"""No ``gpuadvise-*`` temporary folder outlives a run (issue 18).

``--no-cache`` runs, runs ending in an error and runs stopped by Ctrl-C each used to leave one
behind. Every test points the temporary folder at an empty one of its own and looks at it
afterwards: after a success, a compile error, a failed template instance, and an interrupt
(``KeyboardInterrupt`` raised where nvcc runs, in-process; and uncaught, in a child process).
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from toolchainkit import toolchain_or_none

from gpuadvise.errors import CompileError, KernelNotFoundError
from gpuadvise.toolchain import CompileOptions, compile_source, scratch
from gpuadvise.toolchain import compile as compile_mod

ROOT = Path(__file__).resolve().parents[2]
CUDA_DIR = ROOT / "tests" / "cuda"


TC = toolchain_or_none()
pytestmark = [
    pytest.mark.toolkit,
    pytest.mark.skipif(TC is None, reason="no CUDA toolchain (nvcc) found"),
]

TEMPLATE = """\
template <int B>
__global__ void fill(float* p) {
  static_assert(B % 32 == 0, "B must be a multiple of 32");
  p[threadIdx.x] = B;
}
template __global__ void fill<64>(float*);
"""


@pytest.fixture
def tmp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty temporary folder that this process's ``tempfile`` uses."""
    folder = tmp_path / "tmp"
    folder.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(folder))
    monkeypatch.setenv("TMPDIR", str(folder))
    return folder


def _at_exit(tmp_dir: Path) -> None:
    """What the exit handler does, for the folders this test made (other tests' folders, kept
    until the session ends, are left alone)."""
    for path in [p for p in scratch._owned if tmp_dir in p.parents]:
        scratch.release(path)


def _left(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def _interrupt_nvcc(monkeypatch: pytest.MonkeyPatch, after: int = 0) -> None:
    """Raise KeyboardInterrupt in place of nvcc's run number ``after`` (0-based), as Ctrl-C
    during that run would; the runs before it go through."""
    real = compile_mod.run_tool
    calls = {"n": 0}

    def run(cmd, what, **kw):  # type: ignore[no-untyped-def]
        calls["n"] += 1
        if calls["n"] > after:
            raise KeyboardInterrupt
        return real(cmd, what, **kw)

    monkeypatch.setattr(compile_mod, "run_tool", run)


def test_no_cache_folder_is_removed_at_release_and_exit(tmp_dir: Path) -> None:
    module = compile_source(CUDA_DIR / "spill.cu", CompileOptions(use_cache=False), TC)
    assert module.cubin_path.is_file() and tmp_dir in module.cubin_path.parents
    assert len(_left(tmp_dir)) == 1  # the cubin the caller still reads
    _at_exit(tmp_dir)
    assert _left(tmp_dir) == []


@pytest.mark.parametrize("use_cache", [False, True], ids=["no-cache", "cache"])
def test_compile_error_leaves_nothing(use_cache: bool, tmp_dir: Path, tmp_path: Path) -> None:
    opts = CompileOptions(use_cache=use_cache, cache_dir=tmp_path / "cache")
    with pytest.raises(CompileError):
        compile_source(CUDA_DIR / "broken.cu", opts, TC)
    assert _left(tmp_dir) == []
    assert not list((tmp_path / "cache").glob("tmp/*"))


@pytest.mark.parametrize("use_cache", [False, True], ids=["no-cache", "cache"])
def test_failed_template_instance_leaves_nothing(
    use_cache: bool, tmp_dir: Path, tmp_path: Path
) -> None:
    src = tmp_path / "fill.cu"
    src.write_text(TEMPLATE)
    opts = CompileOptions(use_cache=use_cache, cache_dir=tmp_path / "cache")
    with pytest.raises(KernelNotFoundError):
        compile_source(src, opts, TC, kernels=["fill<7>"])
    if not use_cache:  # the module of the file itself lives until exit
        _at_exit(tmp_dir)
    assert _left(tmp_dir) == []


@pytest.mark.parametrize("after", [0, 1], ids=["compile", "instantiate"])
@pytest.mark.parametrize("use_cache", [False, True], ids=["no-cache", "cache"])
def test_interrupt_leaves_nothing(
    use_cache: bool,
    after: int,
    tmp_dir: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    src = tmp_path / "fill.cu"
    src.write_text(TEMPLATE)
    opts = CompileOptions(use_cache=use_cache, cache_dir=tmp_path / "cache")
    _interrupt_nvcc(monkeypatch, after)
    with pytest.raises(KeyboardInterrupt):
        compile_source(src, opts, TC, kernels=["fill<96>"])
    if not use_cache:
        _at_exit(tmp_dir)
    assert _left(tmp_dir) == []
    assert not list((tmp_path / "cache").glob("tmp/*"))


def _child(code: str, tmp_dir: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "TMPDIR": str(tmp_dir),
        "GPUADVISE_CACHE_DIR": str(tmp_path / "cache"),
    }
    return subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=600
    )


def test_exit_after_uncaught_interrupt_removes_the_folders(tmp_dir: Path, tmp_path: Path) -> None:
    src = tmp_path / "fill.cu"
    src.write_text(TEMPLATE)
    code = (
        "from gpuadvise.toolchain import CompileOptions, compile_source\n"
        f"m = compile_source({str(src)!r}, CompileOptions(use_cache=False), kernels=['fill<96>'])\n"
        "assert m.cubin_path.is_file() and m.wrapper_path.is_file()\n"
        "raise KeyboardInterrupt\n"
    )
    p = _child(code, tmp_dir, tmp_path)
    assert "KeyboardInterrupt" in p.stderr and "AssertionError" not in p.stderr
    assert _left(tmp_dir) == []


def _analyze(args: list[str], tmp_dir: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    code = "from gpuadvise.cli import main; main()"
    env = {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "TMPDIR": str(tmp_dir),
        "GPUADVISE_CACHE_DIR": str(tmp_path / "cache"),
    }
    return subprocess.run(
        [sys.executable, "-c", code, "analyze", "--no-cache", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )


@pytest.mark.parametrize(
    ("args", "rc"),
    [
        (["spill.cu", "--kernel", "spill", "--grid", "1", "--block", "32"], 0),
        (["broken.cu", "--grid", "1", "--block", "32"], 2),
        (["spill.cu", "--kernel", "no_such_kernel", "--grid", "1", "--block", "32"], 2),
    ],
    ids=["success", "compile-error", "error-after-compiling"],
)
def test_cli_no_cache_leaves_nothing(
    args: list[str], rc: int, tmp_dir: Path, tmp_path: Path
) -> None:
    for name in ("spill.cu", "broken.cu"):
        (tmp_path / name).write_text((CUDA_DIR / name).read_text())
    p = _analyze(args, tmp_dir, tmp_path)
    assert p.returncode == rc, p.stderr[-2000:]
    if rc == 2:
        assert p.stderr.startswith("error: ") and "Traceback" not in p.stderr
    assert [n for n in _left(tmp_dir) if n.startswith("gpuadvise-")] == []
