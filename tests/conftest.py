"""Shared test setup. The test folders mirror the package's (tests/rules for gpuadvise/rules and
rules/, tests/model for gpuadvise/model, ...); helper modules shared across folders (rulekit,
gate_fakes, clikit) live here at the top and are importable from every folder.

What every folder may use:

- ``@pytest.mark.toolkit`` (or ``pytestmark = pytest.mark.toolkit``): the test needs nvcc/ptxas;
  it is skipped, with the reason, when no CUDA toolkit is found. The one toolkit check of the
  suite is :func:`toolkit_missing`.
- the ``compile_cache`` fixture (module scope): ``GPUADVISE_CACHE_DIR`` points at a fresh folder
  for the module's tests (and the subprocesses they start), so no test reads a compile another
  run left in the user's cache. ``pytestmark = pytest.mark.usefixtures("compile_cache")`` turns
  it on for a whole module.
"""

from __future__ import annotations

import functools
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))


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


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("toolkit") is not None:
        why = toolkit_missing()
        if why is not None:
            pytest.skip(why)


@pytest.fixture(scope="module")
def compile_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh compile cache for one test module: ``GPUADVISE_CACHE_DIR`` set while it runs."""
    folder = tmp_path_factory.mktemp("compile-cache")
    old = os.environ.get("GPUADVISE_CACHE_DIR")
    os.environ["GPUADVISE_CACHE_DIR"] = str(folder)
    try:
        yield folder
    finally:
        if old is None:
            os.environ.pop("GPUADVISE_CACHE_DIR", None)
        else:
            os.environ["GPUADVISE_CACHE_DIR"] = old
