"""``analyze`` prints the terminal report's header (kernel, launch, resources, occupancy, waves)
as soon as it is known, before the trace, and the rest at the end (issue 31: the first lines
within a second): stdout is still exactly the one-shot rendering of the finished report, the
machine formats are printed whole, and a cache hit prints the same bytes."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from clikit import cli_run, environ

import gpuadvise.analyze.evaluate as evaluate
import gpuadvise.cli.analyze as cli_analyze
from gpuadvise.report.console import analysis_text, header_text
from gpuadvise.report.renderers import render, render_header
from gpuadvise.report_types import AnalysisReport

pytestmark = pytest.mark.toolkit

ROOT = Path(__file__).resolve().parents[2]
REDUCE = ROOT / "kernels" / "reduction" / "reduce.cu"
ARGS = ("analyze", "kernels/reduction/reduce.cu", "-k", "reduce2", "--arg", "n=65536",
        "--gpu", "H100", "--no-measure")  # fmt: skip


def _run(env: dict[str, str], *args: str) -> Any:
    with environ(env), contextlib.chdir(ROOT):
        return cli_run(*args)


@pytest.fixture
def recorded(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What the CLI writes to stdout, chunk by chunk, with the events around it: the rules'
    run (``rules``) and the report the CLI built (``report``)."""
    seen: dict[str, Any] = {"events": [], "chunks": [], "report": None}
    emit, build, rules = cli_analyze._emit, cli_analyze._report, evaluate.run_rules_report

    def _emit(text: str, fmt: str, output: str | None) -> None:
        if output is None:
            seen["chunks"].append(text)
            seen["events"].append("stdout")
        emit(text, fmt, output)

    def _report(*a: Any, **k: Any) -> AnalysisReport:
        seen["report"] = build(*a, **k)
        return seen["report"]

    def run_rules(*a: Any, **k: Any) -> Any:
        seen["events"].append("rules")
        return rules(*a, **k)

    monkeypatch.setattr(cli_analyze, "_emit", _emit)
    monkeypatch.setattr(cli_analyze, "_report", _report)
    monkeypatch.setattr(evaluate, "run_rules_report", run_rules)
    return seen


def test_the_header_is_printed_before_the_rules_and_stdout_is_the_one_shot_rendering(
    compile_cache: Path, recorded: dict[str, Any]
) -> None:
    env = {**os.environ, "GPUADVISE_CACHE_DIR": str(compile_cache)}
    args = (*ARGS, "--seed", "31")  # a launch of its own: the analysis-result cache misses
    r = _run(env, *args)
    assert r.returncode == 0, r.stderr
    report = recorded["report"]
    head, rest = recorded["chunks"]
    assert recorded["events"] == ["stdout", "rules", "stdout"]
    assert head == header_text(report.header) == render_header("text", report.header)
    assert head.startswith("reduce2  kernels/reduction/reduce.cu  grid ")
    # stdout: byte for byte what rendering the finished report at once prints
    assert head + rest == r.stdout == render("text", report) == analysis_text(report)
    # the analysis-result cache answers the same command: the same bytes, printed at once
    recorded["chunks"].clear()
    hit = _run(env, *args)
    assert hit.stdout == r.stdout and len(recorded["chunks"]) == 1


def test_machine_formats_and_statistics_are_printed_whole_at_the_end(
    compile_cache: Path, recorded: dict[str, Any]
) -> None:
    env = {**os.environ, "GPUADVISE_CACHE_DIR": str(compile_cache)}
    r = _run(env, *ARGS, "--no-cache", "--format", "json")
    assert r.returncode == 0, r.stderr
    assert recorded["events"] == ["rules", "stdout"]
    assert json.loads(r.stdout)["kernel"]["name"] == "reduce2"
    recorded["events"].clear()
    stats = _run(env, *ARGS, "--no-cache", "--statistics")
    assert stats.returncode == 0 and recorded["events"] == ["rules", "stdout"]
    assert "reduce2" not in stats.stdout.splitlines()[0]


def test_a_header_only_for_formats_that_begin_with_one() -> None:
    assert render_header("json", None) is None  # type: ignore[arg-type]
    assert render_header("sarif", None) is None  # type: ignore[arg-type]


def _fresh_interpreter(code: str) -> str:
    """What ``code`` prints in a fresh interpreter (this one has imported everything), stripped;
    the run must succeed."""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def test_the_header_needs_neither_the_rules_nor_the_trace() -> None:
    """What ``analyze`` imports before it prints the header (the CLI, the analysis-result cache,
    the run, the head, the report's header) loads no rule, no pipeline and no emulator: they come
    after the header (a fresh interpreter: this one has imported them all)."""
    code = (
        "import sys\n"
        "import gpuadvise.cli.analyze, gpuadvise.analyze.result_cache, gpuadvise.analyze.run\n"
        "import gpuadvise.analyze.head, gpuadvise.analyze.report, gpuadvise.report.console\n"
        "heavy = ('gpuadvise.rules', 'gpuadvise.analyze.pipeline', 'gpuadvise.trace.emulate')\n"
        "print([m for m in heavy if m in sys.modules])\n"
    )
    assert _fresh_interpreter(code) == "[]"


def test_the_later_stages_are_imported_while_the_key_compiles_and_not_on_a_rerun(
    private_compile_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The analysis-result cache's key compiles the kernel: the stages after the compile are
    imported while that nvcc runs (entered before it starts, left after it returns), not after
    it in series; an unchanged re-run (compile and result cache hits) runs neither nvcc nor
    those imports."""
    import gpuadvise.analyze.warm as warm
    import gpuadvise.toolchain.compile as compile_mod

    events: list[str] = []
    imports, tool = warm.imports_during, compile_mod.run_tool

    @contextlib.contextmanager
    def recorded_imports(*a: Any, **k: Any) -> Any:
        events.append("imports")
        with imports(*a, **k) as header_ready:
            yield header_ready
        events.append("imported")

    def recorded_tool(cmd: Any, name: str, *a: Any, **k: Any) -> Any:
        events.append(f"{name} starts")
        try:
            return tool(cmd, name, *a, **k)
        finally:
            events.append(f"{name} ends")

    monkeypatch.setattr(warm, "imports_during", recorded_imports)
    monkeypatch.setattr(compile_mod, "run_tool", recorded_tool)
    env = {**os.environ, "GPUADVISE_CACHE_DIR": str(private_compile_cache)}
    args = (*ARGS, "--no-trace", "--seed", "37")
    r = _run(env, *args)
    assert r.returncode == 0, r.stderr
    # the key's compile (nvcc beside the imports), then the analysis' own compile: a cache hit
    assert events[:4] == ["imports", "nvcc starts", "nvcc ends", "imported"]
    assert events.count("nvcc starts") == 1
    events.clear()
    again = _run(env, *args)
    assert again.returncode == 0 and again.stdout == r.stdout
    assert events == []  # nothing compiled, nothing imported ahead: the stored report


def test_the_key_s_nvcc_starts_before_numpy_the_runner_and_the_report_types(
    private_compile_cache: Path,
) -> None:
    """The key's nvcc is started as early as the command can (issue 31: the wall before the
    first nvcc): numpy (the runner's import, for whether a GPU is here), the runner, the report
    types, tree-sitter (the source's names) and the compile's later modules are imported while
    it runs, not before it starts, and the measurement's module not at all, nor importlib's
    zip reader (5 ms: the device tables are read from the package's folder) (a fresh
    interpreter; the modules present as the imports beside nvcc are entered)."""
    code = (
        "import contextlib, sys\n"
        "import gpuadvise.analyze.warm as warm\n"
        "seen = []\n"
        "during = warm.imports_during\n"
        "@contextlib.contextmanager\n"
        "def spy(*a, **k):\n"
        "    seen.append(set(sys.modules))\n"
        "    with during(*a, **k) as header_ready:\n"
        "        yield header_ready\n"
        "warm.imports_during = spy\n"
        "from gpuadvise.cli.main import main\n"
        "with contextlib.suppress(SystemExit):\n"
        "    main(sys.argv[1:])\n"
        "heavy = ('numpy', 'gpuadvise.runner.client', 'gpuadvise.report_types',\n"
        "         'gpuadvise.rules', 'gpuadvise.analyze.pipeline', 'tree_sitter',\n"
        "         'gpuadvise.analyze.measure', 'statistics', 'gpuadvise.runner.checks',\n"
        "         'importlib.readers', 'zipfile')\n"
        "print([m for m in heavy if m in seen[0]], file=sys.stderr)\n"
    )
    env = {**os.environ, "GPUADVISE_CACHE_DIR": str(private_compile_cache)}
    args = (*ARGS, "--no-trace", "--seed", "41", "--format", "json")
    r = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT, env=env
    )
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["kernel"]["name"] == "reduce2"
    assert r.stderr.strip().splitlines()[-1] == "[]"


@pytest.mark.parametrize("stop", ["interrupted", "error", "none"])
def test_an_interrupted_compile_does_not_wait_for_the_imports(
    stop: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SIGTERM while the key's nvcc ran: the analysis exited only once the thread had imported
    the later stages (0.9 CPU-s after the signal, 4.5-5.2 s of wall at load 17:
    test_sigterm_on_one_analysis' 3 s failed on a loaded machine). Interrupted, the block ends
    while they are still imported; otherwise (the compile's own error too) it waits for them,
    so that no module is imported by two threads at once."""
    import threading

    import gpuadvise.analyze.warm as warm
    from gpuadvise.errors import Interrupted

    started, release = threading.Event(), threading.Event()
    importer: list[threading.Thread] = []

    def slow_imports(first: Any, ready: Any, names: Any, registry: bool) -> None:
        importer.append(threading.current_thread())
        started.set()
        release.wait(10)

    monkeypatch.setattr(warm, "_import_all", slow_imports)
    raised = {"interrupted": Interrupted(15), "error": ValueError("nvcc failed"), "none": None}
    try:
        with contextlib.suppress(Interrupted, ValueError), warm.imports_during(trace=False):
            assert started.wait(10)
            if stop != "interrupted":
                threading.Timer(0.2, release.set).start()
            if raised[stop] is not None:
                raise raised[stop]
        assert importer[0].is_alive() == (stop == "interrupted")
    finally:
        release.set()
        importer[0].join(10)


def test_the_header_waits_for_its_own_modules_not_for_every_import(
    compile_cache: Path, recorded: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The header is printed as soon as the kernel is compiled and the header's modules are in
    (gpuadvise.analyze.warm), while the thread still imports the later stages: on a compile cache
    hit those imports (0.3 CPU-s) used to come before the first line."""
    import threading

    import gpuadvise.analyze.warm as warm

    printed = threading.Event()
    emit = cli_analyze._emit

    def _emit(text: str, fmt: str, output: str | None) -> None:
        emit(text, fmt, output)
        printed.set()

    def later_stages(names: tuple[str, ...]) -> None:
        if names and names[0] not in warm._HEADER:  # the later stages: after the first line
            printed.wait(60)
            recorded["events"].append("imported" if printed.is_set() else "header not printed")
        real_import(names)

    real_import = warm._import
    monkeypatch.setattr(cli_analyze, "_emit", _emit)
    monkeypatch.setattr(warm, "_import", later_stages)
    env = {**os.environ, "GPUADVISE_CACHE_DIR": str(compile_cache)}
    r = _run(env, *ARGS, "--no-cache", "--no-trace")
    assert r.returncode == 0, r.stderr
    assert recorded["events"][:2] == ["stdout", "imported"]


def test_printing_the_header_imports_nothing_but_the_header_s_modules(
    private_compile_cache: Path,
) -> None:
    """What the header printer imports is imported by the thread first (``warm._HEADER``), so
    that the main thread prints it while that thread imports the rest without the two importing
    at once (a fresh interpreter; the thread imports the header's modules alone here; the main
    thread's imports while it prints the header are recorded)."""
    code = (
        "import sys, threading\n"
        "import gpuadvise.analyze.warm as warm\n"
        "import gpuadvise.cli.analyze as cli_analyze\n"
        "real = warm._import_all\n"
        "warm._import_all = lambda first, ready, names, registry: real(first, ready, (), False)\n"
        "printer = cli_analyze._HeaderPrinter.__call__\n"
        "new, printing = [], []\n"
        "class Spy:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if printing and threading.current_thread() is threading.main_thread():\n"
        "            new.append(name)\n"
        "        return None\n"
        "sys.meta_path.insert(0, Spy())\n"
        "def call(self, head):\n"
        "    printing.append(1)\n"
        "    try:\n"
        "        printer(self, head)\n"
        "    finally:\n"
        "        printing.clear()\n"
        "cli_analyze._HeaderPrinter.__call__ = call\n"
        "from gpuadvise.cli.main import main\n"
        "try:\n"
        "    main(sys.argv[1:])\n"
        "finally:\n"
        "    print(new, file=sys.stderr)\n"
    )
    env = {**os.environ, "GPUADVISE_CACHE_DIR": str(private_compile_cache)}
    args = (*ARGS, "--no-trace", "--no-cache")
    r = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT, env=env
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("reduce2  kernels/reduction/reduce.cu  grid ")
    assert r.stderr.strip().splitlines()[-1] == "[]"


def test_a_rerun_the_result_cache_answers_imports_no_numpy(private_compile_cache: Path) -> None:
    """The key asks whether a GPU is here without the runner's client (which imports numpy):
    an unchanged re-run prints the stored report without numpy, the trace or the rules (a fresh
    interpreter for the re-run)."""
    env = {**os.environ, "GPUADVISE_CACHE_DIR": str(private_compile_cache)}
    args = (*ARGS, "--no-trace", "--seed", "43")
    first = _run(env, *args)
    assert first.returncode == 0, first.stderr
    code = (
        "import contextlib, sys\n"
        "from gpuadvise.cli.main import main\n"
        "with contextlib.suppress(SystemExit):\n"
        "    main(sys.argv[1:])\n"
        "heavy = ('numpy', 'gpuadvise.runner.client', 'gpuadvise.rules', 'gpuadvise.trace')\n"
        "print([m for m in heavy if m in sys.modules], file=sys.stderr)\n"
    )
    r = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT, env=env
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout == first.stdout  # the stored report
    assert r.stderr.strip().splitlines()[-1] == "[]"


def test_the_head_imports_no_numpy() -> None:
    """The header's path (the compile, the occupancy, the waves: gpuadvise.analyze.head) imports
    no numpy on the main thread: numpy (0.1-0.15 CPU-s on the 2-core machine) is the import
    thread's, beside the compile, not before the first lines (a fresh interpreter)."""
    code = (
        "import sys\n"
        "import gpuadvise.analyze.head\n"
        "from gpuadvise.model.waves import waves_of\n"
        "waves_of(1000, 8, 132)\n"
        "print('numpy' in sys.modules)\n"
    )
    assert _fresh_interpreter(code) == "False"


def test_the_key_s_gpu_question_is_asked_beside_nvcc(monkeypatch: pytest.MonkeyPatch) -> None:
    """Beside the key's nvcc (``nvcc_alone``) the imports thread also asks whether a GPU is here
    (NVML, kept for the process), which the key asks once nvcc is done; beside another compile
    it does not."""
    import gpuadvise.analyze.warm as warm
    import gpuadvise.runner.presence as presence

    asked: list[str] = []
    monkeypatch.setattr(presence, "pycuda_missing", lambda: asked.append("gpu"))
    monkeypatch.setattr(warm, "_AFTER_COMPILE", ())
    monkeypatch.setattr(warm, "_HEADER", ())
    with warm.imports_during(trace=False, registry=False):
        pass
    assert asked == []
    with warm.imports_during(trace=False, registry=False, nvcc_alone=True):
        pass
    assert asked == ["gpu"]


def test_after_the_key_s_nvcc_the_analysis_imports_nothing_more(
    private_compile_cache: Path,
) -> None:
    """What the analysis imports after the key's compile (the tracer's choice, the buffers'
    fills and numpy's generator, numpy.ma for np.unique, the L2 child, the rules' configuration,
    the report's modules ...) was imported beside nvcc (gpuadvise.analyze.warm): the analysing
    thread, on the critical path from nvcc's return through the trace to the report, imports no
    module of gpuadvise or numpy (a fresh interpreter; a traced kernel, the rules run; the JSON
    format: the text's report modules are the header's, imported first)."""
    code = (
        "import contextlib, sys\n"
        "import gpuadvise.analyze.warm as warm\n"
        "seen = []\n"
        "during = warm.imports_during\n"
        "@contextlib.contextmanager\n"
        "def spy(*a, **k):\n"
        "    with during(*a, **k) as header_ready:\n"
        "        yield header_ready\n"
        "    if not seen:\n"
        "        seen.append(set(sys.modules))\n"
        "warm.imports_during = spy\n"
        "from gpuadvise.cli.main import main\n"
        "with contextlib.suppress(SystemExit):\n"
        "    main(sys.argv[1:])\n"
        "late = sorted(m for m in set(sys.modules) - seen[0]\n"
        "              if m.split('.')[0] in ('gpuadvise', 'numpy', 'rules'))\n"
        "print(late, file=sys.stderr)\n"
    )
    env = {
        **os.environ,
        "GPUADVISE_CACHE_DIR": str(private_compile_cache),
        "GPUADVISE_RULE_PROCESSES": "1",  # the rules here: what they import is seen
    }
    args = (*ARGS, "--tracer", "emu", "--seed", "43", "--format", "json")
    r = subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, cwd=ROOT, env=env
    )
    assert r.returncode == 0, r.stderr
    assert "reduce2" in r.stdout
    assert r.stderr.strip().splitlines()[-1] == "[]"
