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
- the processes the tests start (``python -m gpuadvise``, a job's workers, a nested pytest)
  share one bytecode folder for the run where ``PYTHONDONTWRITEBYTECODE`` is set
  (``PYTHONPYCACHEPREFIX`` for them alone, removed at the end): each imports gpuadvise compiled
  once, not from source (``suitekit.children_bytecode``).
- the ``private_compile_cache`` fixture (function scope): a fresh, empty cache of the test's own,
  for a test that damages the cache, counts its entries or needs a first compile to miss.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

# The rules and the variant traces in one process in every analysis the tests run (and in their
# `python -m gpuadvise` children): the suite's xdist workers fill the CPUs already, where a forked
# share only adds CPU (docs/data/s20-fork.md). The split itself is tested with processes=2 or
# the switch monkeypatched (tests/rules/test_rule_processes.py, tests/analyze/test_split.py).
os.environ["GPUADVISE_RULE_PROCESSES"] = "1"

TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))

import propkit  # noqa: E402  (importable once TESTS is on the path)
from suitekit import (  # noqa: E402
    cache_env,
    children_bytecode,
    run_folder,
    toolkit_missing,
    whole_cubin_sass,
)

propkit.load_default_profile()  # before --hypothesis-profile, which overrides it


def _glibc() -> Any:
    """glibc, for ``mallopt`` and ``malloc_trim``; None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        libc = ctypes.CDLL(None)
        libc.mallopt, libc.malloc_trim  # noqa: B018  (both must be there)
    except (OSError, AttributeError):
        return None
    return libc


_LIBC = _glibc()


def keep_freed_memory() -> bool:
    """glibc's malloc told to keep the memory the test process frees for its next allocations
    while a test runs (``mallopt``: no ``mmap`` per large block, no trim of the heap's top)
    rather than hand it back to the system and take fresh zeroed pages again: the rules and the
    emulator make and drop numpy arrays of tens of MB many times over a kernel, and each fresh
    page was a page fault (system time). After each test the free memory goes back to the
    system (``malloc_trim``, :func:`pytest_runtest_teardown`), so that the memory available to
    the next test and to the processes it starts (whose memory budget reads ``MemAvailable``)
    is what it was. Only the test processes: the processes they start (``python -m
    gpuadvise``, whose peak RSS tests read) keep glibc's defaults. False without glibc."""
    if _LIBC is None:
        return False
    m_trim_threshold, m_top_pad, m_mmap_max = -1, -2, -4
    return bool(
        _LIBC.mallopt(m_mmap_max, 0)
        and _LIBC.mallopt(m_trim_threshold, 2**31 - 1)
        and _LIBC.mallopt(m_top_pad, 256 << 20)
    )


keep_freed_memory()


def no_huge_pages_for_arrays() -> bool | None:
    """numpy stops asking the kernel for transparent huge pages on its large arrays (it
    ``madvise``s every array of 4 MB or more by default; ``NUMPY_MADVISE_HUGEPAGE``) in the test
    process. Where THP and its defragmentation are ``madvise`` (this machine), a first touch of
    such an array is a 2 MB page zeroed, after a compaction of the machine's memory when it is
    fragmented: the L2 model's and the rules' large arrays, written sparsely, paid for pages
    they barely used (GA304's 8K gather set-up 10.5-18 s of system time -> 2.8 s, the same user
    time). Only the test processes: the processes they start (whose peak RSS tests read) keep
    numpy's default. Returns numpy's previous setting; None where numpy has no such switch."""
    try:
        from numpy._core.multiarray import _set_madvise_hugepage
    except ImportError:  # numpy without the switch: nothing to change
        return None
    return bool(_set_madvise_hugepage(False))


no_huge_pages_for_arrays()


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """The memory the test freed back to the system (:func:`keep_freed_memory`)."""
    if _LIBC is not None:
        _LIBC.malloc_trim(0)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist's own hook reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Under ``--dist loadgroup`` the tests that ask for a module-scoped fixture of their own
    module run on one worker (an ``xdist_group`` named after the module): otherwise both
    workers set the fixture up (an analysis, a trace, a compile of a kernel written to a new
    folder), each for its share of the tests. Autouse fixtures (the module's compile cache)
    and tests already in a group keep their scheduling."""
    for item in items:
        if item.get_closest_marker("xdist_group") is not None:
            continue
        module = item.getparent(pytest.Module)
        info = getattr(item, "_fixtureinfo", None)
        if module is None or info is None:
            continue
        for name in info.names_closure:
            defs = info.name2fixturedefs.get(name) or ()
            if any(own_module_fixture(d, module.nodeid) for d in defs):
                item.add_marker(pytest.mark.xdist_group(f"module {module.nodeid}"))
                break
    if getattr(config.option, "loadgroup", False):  # a worker of --dist loadgroup
        for item in items:
            group_node_id(item)


def group_node_id(item: pytest.Item) -> None:
    """``item``'s id with its ``xdist_group`` names after an ``@``, the scope pytest-xdist's
    controller schedules as one unit. pytest-xdist 3.8 writes it to ``item._nodeid``, which
    pytest 9.2 no longer reads (the id is ``item._id``): without this, every test was
    scheduled alone, and a kernel case's rules ran on both workers (the golden test on one,
    the details test on the other)."""
    from _pytest.nodeid import coerce_node_id

    names = sorted(
        {str(m.args[0] if m.args else m.kwargs.get("name", "default"))
         for m in item.iter_markers("xdist_group")}
    )  # fmt: skip
    suffix = "@" + "_".join(names)
    if names and not item.nodeid.endswith(suffix):
        item._id = coerce_node_id(item.nodeid + suffix)


def own_module_fixture(fixturedef: Any, module_id: str) -> bool:
    """A module-scoped fixture defined in the module ``module_id`` and asked for by name."""
    return (
        fixturedef.scope == "module"
        and fixturedef.baseid == module_id
        and not getattr(fixturedef, "_autouse", False)
    )


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


@pytest.fixture(scope="session", autouse=True)
def _children_bytecode(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path | None]:
    """The Python processes the tests start share one bytecode folder for the run (this
    process's, under pytest-xdist each worker's), where ``PYTHONDONTWRITEBYTECODE`` is set:
    ``suitekit.children_bytecode``."""
    with children_bytecode(tmp_path_factory.getbasetemp() / "children-bytecode") as folder:
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


@pytest.fixture(scope="module")
def sass_read_whole() -> Iterator[None]:
    """The SASS of each emulated module's whole cubin, one nvdisasm run for all of its kernels
    and shared by every module that asks (``suitekit.whole_cubin_sass``), not an ``nvdisasm
    -fun`` run per kernel emulated. test_instrument.py, test_tracer.py and test_trace_budget.py
    emulate tests/cuda/emu's kernels with it (``pytest.mark.usefixtures``)."""
    with whole_cubin_sass():
        yield
