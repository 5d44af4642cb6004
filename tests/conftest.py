"""Shared test setup. The test folders mirror the package's (tests/rules for gpuadvise/rules and
rules/, tests/model for gpuadvise/model, ...); helper modules shared across folders (rulekit,
gate_fakes, clikit, suitekit) live here at the top and are importable from every folder. Tests
import helpers from those modules, never ``from conftest import``: other folders have a
conftest.py of their own (tests/record), and which one the name ``conftest`` means depends on
the collection order.

What every folder may use:

- ``@pytest.mark.toolkit`` (or ``pytestmark = pytest.mark.toolkit``): the test needs nvcc/ptxas;
  it is skipped, with the reason, when no CUDA toolkit is found. The one toolkit check of the
  suite is ``suitekit.toolkit_missing``.
- one compile cache for the whole run: ``GPUADVISE_CACHE_DIR`` points at a folder made for this
  run (under pytest's base temporary folder) from the first test to the last, for every test and
  the subprocesses they start, so that no test reads a compile another run left in the user's
  cache, and each kernel compiles once per run rather than once per module. Under pytest-xdist
  every worker shares it: the cache is content-addressed and written atomically
  (``gpuadvise/toolchain/cache.py``), so processes that compile the same kernel at once each
  store the same entry. The ``compile_cache`` fixture (module scope) is that folder, set again
  for the module in case something before it changed the variable;
  ``pytestmark = pytest.mark.usefixtures("compile_cache")`` names it for a whole module.
- hypothesis profiles (``propkit``): ``ci`` runs every property test's full number of examples
  (the README's command: ``--hypothesis-profile=ci``; any run with ``CI`` set), ``dev`` (the
  default elsewhere) a quarter of it; a test writes ``max_examples=examples(N)``.
- the ``private_compile_cache`` fixture (function scope): a fresh, empty cache of the test's own,
  for a test that damages the cache, counts its entries or needs a first compile to miss.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

import propkit  # noqa: E402  (importable once TESTS is on the path)
from suitekit import cache_env, run_folder, toolkit_missing  # noqa: E402

propkit.load_default_profile()  # before --hypothesis-profile, which overrides it


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    if item.get_closest_marker("toolkit") is not None:
        why = toolkit_missing()
        if why is not None:
            pytest.skip(why)


@pytest.fixture(scope="session", autouse=True)
def _run_compile_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The run's one compile cache, ``GPUADVISE_CACHE_DIR`` for every test."""
    folder = run_folder(tmp_path_factory) / "compile-cache"
    folder.mkdir(exist_ok=True)
    with cache_env(folder):
        yield folder


@pytest.fixture(scope="module")
def compile_cache(_run_compile_cache: Path) -> Iterator[Path]:
    """The run's compile cache, ``GPUADVISE_CACHE_DIR`` while the module's tests run."""
    with cache_env(_run_compile_cache) as folder:
        yield folder


@pytest.fixture()
def private_compile_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A fresh compile cache for one test, ``GPUADVISE_CACHE_DIR`` while it runs."""
    with cache_env(tmp_path_factory.mktemp("private-cache")) as folder:
        yield folder
