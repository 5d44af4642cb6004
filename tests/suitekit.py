"""The suite's setup helpers that tests import: the one toolkit check (:func:`toolkit_missing`),
``GPUADVISE_CACHE_DIR`` for a block (:func:`cache_env`) and the folder a run's processes share
(:func:`run_folder`), the bytecode folder of the processes a test starts
(:func:`children_bytecode`), one nvdisasm run per cubin of many kernels
(:func:`whole_cubin_sass`). tests/conftest.py builds its hooks and fixtures on them.

They live here, not in conftest.py, because ``conftest`` is no module name to import: each
folder may have a conftest.py (tests/record has one), pytest imports each of them as
``conftest`` when the folder is no package, and ``from conftest import ...`` then gets whichever
was imported last, which depends on the collection order (and differs between xdist workers)."""

from __future__ import annotations

import contextlib
import functools
import importlib.util
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest


@functools.cache
def toolkit_missing() -> str | None:
    """Why no CUDA toolkit can be used (None: nvcc and its companions are found)."""
    from gpuadvise.errors import GpuAdviseError
    from gpuadvise.toolchain import find_toolchain

    try:
        find_toolchain()
    except GpuAdviseError as exc:
        return f"no CUDA toolkit (pip install .[toolkit]): {exc.one_line()}"
    return None


@contextlib.contextmanager
def cache_env(folder: Path) -> Iterator[Path]:
    """``GPUADVISE_CACHE_DIR`` set to ``folder`` while the block runs (the old value back after)."""
    old = os.environ.get("GPUADVISE_CACHE_DIR")
    os.environ["GPUADVISE_CACHE_DIR"] = str(folder)
    try:
        yield folder
    finally:
        if old is None:
            os.environ.pop("GPUADVISE_CACHE_DIR", None)
        else:
            os.environ["GPUADVISE_CACHE_DIR"] = old


@contextlib.contextmanager
def children_bytecode(folder: Path) -> Iterator[Path | None]:
    """Where ``PYTHONDONTWRITEBYTECODE`` is set (this environment; CI may set it too), every
    Python process a test starts (``python -m gpuadvise``, a job's workers, a nested pytest)
    compiled every module it imports from source: about 0.6 CPU-s a process for gpuadvise's
    imports (1.1 -> 0.5 s). While the block runs, the processes started get ``folder`` as their
    ``PYTHONPYCACHEPREFIX`` and may write there (``PYTHONDONTWRITEBYTECODE`` unset for them):
    the first compiles, the next read. This process's own setting is what it was (Python reads
    both variables at its start), nothing is written into the checkout, the variables are put
    back and ``folder`` is removed after the block. Yields None (and changes nothing) where the
    variable is not set: the processes write their bytecode where the user lets them."""
    if not os.environ.get("PYTHONDONTWRITEBYTECODE"):
        yield None
        return
    old = os.environ.get("PYTHONPYCACHEPREFIX")
    folder.mkdir(parents=True, exist_ok=True)
    os.environ["PYTHONPYCACHEPREFIX"] = str(folder)
    dont_write = os.environ.pop("PYTHONDONTWRITEBYTECODE")
    try:
        yield folder
    finally:
        os.environ["PYTHONDONTWRITEBYTECODE"] = dont_write
        if old is None:
            os.environ.pop("PYTHONPYCACHEPREFIX", None)
        else:
            os.environ["PYTHONPYCACHEPREFIX"] = old
        shutil.rmtree(folder, ignore_errors=True)


def run_folder(factory: pytest.TempPathFactory) -> Path:
    """The temporary folder every process of this run shares: pytest's base temporary folder,
    or under pytest-xdist the one that holds each worker's (``PYTEST_XDIST_WORKER`` is set in the
    workers)."""
    base = factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


@contextlib.contextmanager
def temp_folders_left(folder: Path, prefix: str) -> Iterator[Path]:
    """``tempfile``'s folder set to ``folder`` (made) while the block runs, then an
    AssertionError naming what ``tempfile.mkdtemp``/``mkstemp`` left there under ``prefix``: a
    test that leaves its temporary folders fails rather than fill the machine's /tmp (two empty
    ``gpuadvise-variants-*`` folders a run, until 2026-12-01: stages never closed)."""
    folder.mkdir(parents=True, exist_ok=True)
    old = tempfile.tempdir
    tempfile.tempdir = str(folder)
    try:
        yield folder
    finally:
        tempfile.tempdir = old
    left = sorted(p.name for p in folder.glob(prefix + "*"))
    assert not left, f"left in the temporary folder: {left}"


@contextlib.contextmanager
def whole_cubin_sass() -> Iterator[None]:
    """The SASS of each cubin read whole while the block runs, one nvdisasm run for all of its
    kernels: tests/cuda/emu's basic.cu and more.cu hold more than ``sass.NARROW_ABOVE``
    functions, where a kernel's SASS is read alone (``nvdisasm -fun``, ~0.3-0.5 CPU-s a run: one
    per kernel emulated). That one kernel read alone is the same as from the whole cubin is
    ``tests/toolchain/test_many_functions.py``'s check. The whole cubin's output is kept beside
    it in the run's compile cache, so every module that emulates those kernels under this block
    shares one run per cubin."""
    from gpuadvise.toolchain import sass

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(sass, "NARROW_ABOVE", 1 << 10)
        yield


def load_script(path: Path, name: str, **imports: ModuleType) -> ModuleType:
    """``path`` (a benchmarks/ script, not a package module) loaded as the module ``name``, with
    ``imports`` (module name -> module) standing in for the sibling modules it imports while it
    loads. benchmarks/corpus/ and benchmarks/public/ both have a ``run.py`` and a ``fetch.py``:
    a plain ``import run`` gives a worker whichever folder's was imported first (the public
    suite's tests then called the corpus runner: "module 'run' has no attribute
    'analyze_entry'")."""
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    saved = {k: sys.modules.get(k) for k in (name, *imports)}
    sys.modules.update({name: module, **imports})
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    finally:
        for k, old in saved.items():
            if k == name:
                continue
            if old is None:
                sys.modules.pop(k, None)
            else:
                sys.modules[k] = old
    return module
