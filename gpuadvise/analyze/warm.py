"""The stages after the compile imported while nvcc runs (issue 31: the median corpus kernel on a
2-core machine).

``analyze`` compiles the kernel first and prints its header before it imports the rules, the
trace and the models (tests/cli/test_first_lines.py). Those imports (about 180 modules and the
bundled rules' registry: 0.29 CPU-s on the 2-core machine, 2026-11-30) used to start only once
nvcc had returned, while nvcc (about a CPU-second per kernel) left this process idle:
:func:`imports_during` runs them in a thread for the length of the compile, and waits for it
after. Nothing else is done in the thread and the analysis does not start before it ends, so
that no module is imported by two threads at once (the main thread's compile imports nothing
new: :func:`gpuadvise.analyze.head.compile_head`'s modules are imported before the thread
starts). The results are the same: only where the imports' time falls moves. A failed import is
left for the main thread to raise where it needs the module.

The terminal's header (the kernel's launch, resources, occupancy and waves: the report's first
lines) is printed as soon as the kernel is compiled, within the ``with`` block: with
``header=True`` the thread imports the header's modules first and then sets the event the block
is given (:func:`imports_during`), and the main thread waits for that event alone, not for the
rest of the imports (on a compile cache hit, about 0.3 CPU-s of them, that the header used to
wait for). Printing the header imports nothing more (tests/cli/test_first_lines.py), so that the
main thread still imports nothing while the thread does.

In a run the analysis-result cache may answer (the plain command), the kernel is first compiled
for the cache's key (:func:`gpuadvise.analyze.result_cache.analysis_key`), and the analysis'
own compile is then a cache hit: there the imports run inside that nvcc run
(:func:`gpuadvise.toolchain.compile.while_nvcc_runs`), and not at all when nvcc does not run
(an unchanged re-run prints the stored report without them).
"""

from __future__ import annotations

import contextlib
import importlib
import threading
from collections.abc import Iterator

from gpuadvise.errors import Interrupted

# what the compile imports lazily, and what the SASS's thread reads nvdisasm's output with
# (gpuadvise.analyze.ahead.SassAhead, started right after the compile): imported before the
# thread starts (then only the thread imports), or by the thread first beside nvcc alone
_COMPILE = (
    "gpuadvise.runner.checks",
    "gpuadvise.toolchain.liveness",
    "gpuadvise.toolchain.lines",
    "gpuadvise.source.kernel_names",  # a template's instance named as written (tree-sitter)
)
# the terminal report's header (gpuadvise.cli.analyze's header printer: the report's header
# built from the head, rendered as text): imported first with ``header=True``
_HEADER = (
    "gpuadvise.analyze.report",
    "gpuadvise.report.console",
    "gpuadvise.report.rules_text",
)
# what analyze imports after the compile: the rules' run and their helpers (the registry loads
# the rule files), the models, and, for a traced kernel, the emulator
_AFTER_COMPILE = (
    "gpuadvise.runner.client",  # whether the findings are measured here (numpy)
    "gpuadvise.report_types",  # the report (the registry of formats is read before the compile)
    "gpuadvise.analyze.run",  # the analysis after the result cache's key (cli.analyze)
    "gpuadvise.report.progress",
    "gpuadvise.rules.run",  # the rules' configuration (analyze.run._rules_config)
    "gpuadvise.analyze.evaluate",
    "gpuadvise.analyze.pipeline",
    "gpuadvise.analyze.variant_trace",
    "gpuadvise.analyze.proxy_trace",  # the variants' and proxies' points (analyze.run)
    "gpuadvise.analyze.split",
    "gpuadvise.rules.evaluate",
    "gpuadvise.rules.registry",
    "gpuadvise.model.registers",
    # the report at the end, whatever its format (the text's modules are _HEADER's)
    "gpuadvise.analyze.report",
    "gpuadvise.report.rules_text",
    "gpuadvise.report.json_report",
)
# (the modules the analysing thread imported after the key's nvcc on the way to the trace and
# after it, 2026-12-02: 25-40 ms of its CPU at load 10 on the critical path, now beside nvcc;
# tests/cli/test_first_lines.py checks that none is left)
_TRACE = (
    "gpuadvise.trace.gpu",  # which tracer (analyze.run._run)
    "gpuadvise.ptx.constants",  # the spec's __constant__ fills
    "gpuadvise.runner.data",  # the buffers' fills ...
    "numpy.random",  # ... their generator (numpy 2 imports it on first use)
    "numpy.ma",  # numpy 2's np.unique without return_index imports it (the trace's view)
    "gpuadvise.analyze.l2_behind",
    "gpuadvise.analyze.models",
    "gpuadvise.trace.tracer",
    "gpuadvise.trace.emulate",
    "gpuadvise.ptx.emulator",
    "gpuadvise.trace.view",
    "gpuadvise.trace.sass_counts",
    "gpuadvise.trace.sass_schedule",
    "gpuadvise.model.reconcile",
    "gpuadvise.model.banks",
    "gpuadvise.model.coalescing",
    "gpuadvise.model.l2_orders",
)


def _import_all(
    first: tuple[str, ...],
    ready: threading.Event,
    names: tuple[str, ...],
    registry: bool,
    gpu_asked: bool = False,
) -> None:
    try:
        _import(first)
    finally:
        ready.set()
    if gpu_asked:  # the key asks once nvcc is done: NVML (0.04 CPU-s and ldconfig) asked now
        with contextlib.suppress(Exception):
            from gpuadvise.runner.presence import pycuda_missing

            pycuda_missing()  # (its answer kept for the process: devices.live_device)
    _import(names)
    if registry:
        with contextlib.suppress(Exception):
            from gpuadvise.rules.registry import load_registry

            load_registry()  # the bundled rules (cached: analyze's own call finds them)


def _import(names: tuple[str, ...]) -> None:
    for name in names:
        with contextlib.suppress(Exception):  # the main thread raises it where it matters
            importlib.import_module(name)


@contextlib.contextmanager
def imports_during(
    trace: bool, registry: bool = True, header: bool = False, nvcc_alone: bool = False
) -> Iterator[threading.Event]:
    """The modules analyze needs after the compile imported in a thread while the ``with``
    block runs (the compile); the block's end waits for them, unless the run is interrupted
    (Ctrl-C, SIGTERM: :class:`Interrupted` goes on at once). ``trace``: the emulator's and the
    trace models' too. ``registry``: the bundled rules loaded too (False: the caller loaded the
    rules already, or loads them from other folders). ``header``: the terminal header's modules
    imported first; the block is given an event set once they are (at once without
    ``header``): the header may be printed from then on, before the block ends. ``nvcc_alone``:
    the block is one nvcc run (:func:`gpuadvise.toolchain.compile.while_nvcc_runs`), in which
    the main thread imports nothing: the thread imports the compile's modules too (first), not
    the main thread before nvcc starts, and asks whether a GPU is here
    (:func:`gpuadvise.runner.presence.pycuda_missing`, which the result cache's key asks once
    nvcc is done: its NVML answer is kept for the process)."""
    names = _AFTER_COMPILE + (_TRACE if trace else ())
    if not nvcc_alone:
        for name in _COMPILE:
            importlib.import_module(name)
    ready = threading.Event()
    first = (_COMPILE if nvcc_alone else ()) + (_HEADER if header else ())
    # a daemon: an interrupted analysis does not wait for its imports
    t = threading.Thread(
        target=_import_all,
        args=(first, ready, names, registry),
        kwargs={"gpu_asked": True} if nvcc_alone else {},
        daemon=True,
    )
    t.start()
    try:
        yield ready
    except (Interrupted, KeyboardInterrupt):
        # the run stops: the imports (most of a CPU-second) are not waited for (an analysis
        # stopped by SIGTERM while nvcc ran exited after them: seconds on a loaded machine)
        raise
    except BaseException:
        t.join()
        raise
    t.join()
