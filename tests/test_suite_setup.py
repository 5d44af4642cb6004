"""The test suite's own setup (tests/conftest.py, tests/suitekit.py, tests/propkit.py): one
compile cache for the whole run, shared by every module and every pytest-xdist worker; a private
cache on request; the hypothesis profiles and the examples each runs."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import propkit
import pytest
from hypothesis import settings
from suitekit import cache_env, children_bytecode, load_script, run_folder, whole_cubin_sass

from gpuadvise.toolchain import cache_root

TESTS = Path(__file__).resolve().parent


def test_every_test_runs_with_the_runs_compile_cache(
    compile_cache: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    assert compile_cache == run_folder(tmp_path_factory) / "compile-cache"
    assert compile_cache.is_dir() and os.environ["GPUADVISE_CACHE_DIR"] == str(compile_cache)
    assert cache_root() == compile_cache  # what gpuadvise compiles into, and the CLI's runs


def test_a_private_cache_is_empty_and_the_tests_own(
    private_compile_cache: Path, compile_cache: Path
) -> None:
    assert private_compile_cache != compile_cache and list(private_compile_cache.iterdir()) == []
    assert cache_root() == private_compile_cache


@pytest.mark.parametrize("before", [None, "/somewhere/else"], ids=["unset", "set"])
def test_cache_env_puts_the_variable_back(
    before: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if before is None:
        monkeypatch.delenv("GPUADVISE_CACHE_DIR", raising=False)
    else:
        monkeypatch.setenv("GPUADVISE_CACHE_DIR", before)
    with pytest.raises(RuntimeError), cache_env(tmp_path):
        assert os.environ["GPUADVISE_CACHE_DIR"] == str(tmp_path)
        raise RuntimeError  # a test that fails puts it back too
    assert os.environ.get("GPUADVISE_CACHE_DIR") == before


def test_whole_cubin_sass_reads_the_emulators_cubins_whole_and_puts_the_setting_back() -> None:
    from gpuadvise.toolchain import sass

    before = sass.NARROW_ABOVE
    with pytest.raises(RuntimeError), whole_cubin_sass():
        # more than the 23 functions of tests/cuda/emu/more.cu's (and micro.cu's) cubin: each
        # is read whole, one nvdisasm run, not one ``-fun`` run per kernel
        assert sass.NARROW_ABOVE > 23
        raise RuntimeError  # a test that fails puts it back too
    assert sass.NARROW_ABOVE == before


CHILD = (
    "import sys, gpuadvise.spec; "
    "print(sys.pycache_prefix, sys.flags.dont_write_bytecode, gpuadvise.spec.__cached__)"
)


def _state(folder: Path) -> list[tuple[str, int]]:
    return (
        sorted((p.name, p.stat().st_mtime_ns) for p in folder.glob("*")) if folder.is_dir() else []
    )


def test_the_processes_a_test_starts_share_a_bytecode_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Under ``PYTHONDONTWRITEBYTECODE`` the children write their bytecode to the run's folder
    (nothing in the checkout), this process keeps its own setting, and the folder and the
    variables are back as they were after the block."""
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.setenv("PYTHONPYCACHEPREFIX", "/the/users/own")
    folder, before = tmp_path / "bytecode", (sys.pycache_prefix, sys.flags.dont_write_bytecode)
    root = TESTS.parent
    env_path = os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])
    monkeypatch.setenv("PYTHONPATH", env_path)
    tree = root / "gpuadvise" / "spec" / "__pycache__"
    in_tree = _state(tree)
    with children_bytecode(folder) as got:
        assert got == folder
        out = subprocess.run(
            [sys.executable, "-c", CHILD], capture_output=True, text=True, check=True
        ).stdout.split()
        assert (sys.pycache_prefix, sys.flags.dont_write_bytecode) == before
        assert out[:2] == [str(folder), "0"]
        written = Path(out[2])
        assert written.is_file() and written.is_relative_to(folder)  # compiled once, kept
        assert _state(tree) == in_tree  # nothing written into the checkout
    assert not folder.exists()
    assert os.environ["PYTHONDONTWRITEBYTECODE"] == "1"
    assert os.environ["PYTHONPYCACHEPREFIX"] == "/the/users/own"


def test_without_dont_write_bytecode_the_children_keep_their_setting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("PYTHONDONTWRITEBYTECODE", raising=False)
    monkeypatch.delenv("PYTHONPYCACHEPREFIX", raising=False)
    with children_bytecode(tmp_path / "bytecode") as got:
        assert got is None and "PYTHONPYCACHEPREFIX" not in os.environ
    assert not (tmp_path / "bytecode").exists()


def test_this_runs_children_get_the_bytecode_folder(tmp_path_factory: pytest.TempPathFactory):
    """The conftest's session fixture: set for the whole run where the variable was set."""
    folder = tmp_path_factory.getbasetemp() / "children-bytecode"
    if not sys.flags.dont_write_bytecode:  # started without it: the children keep theirs
        assert os.environ.get("PYTHONPYCACHEPREFIX") != str(folder) and not folder.exists()
        return
    assert os.environ["PYTHONPYCACHEPREFIX"] == str(folder) and folder.is_dir()
    assert "PYTHONDONTWRITEBYTECODE" not in os.environ


RECORDER = """
import os

import pytest


@pytest.mark.parametrize("i", range(8))
def test_record(i, compile_cache):
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(os.path.join(os.environ["RECORD_TO"], worker), "a") as f:
        f.write(os.environ["GPUADVISE_CACHE_DIR"] + "\\n")
"""


def test_pytest_xdist_workers_share_one_compile_cache(tmp_path: Path) -> None:
    """This conftest.py in a run of two workers: each test of each worker sees the one folder,
    under the run's base temporary folder (pytest-xdist is in the ``dev`` extra)."""
    suite = tmp_path / "suite"
    suite.mkdir()
    for helper in ("conftest.py", "suitekit.py", "propkit.py"):
        shutil.copy(TESTS / helper, suite / helper)
    (suite / "test_record.py").write_text(RECORDER)
    records, base = tmp_path / "records", tmp_path / "base"
    records.mkdir()
    env = {**os.environ, "RECORD_TO": str(records)}
    env.pop("GPUADVISE_CACHE_DIR", None)
    p = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "2", "-p", "no:cacheprovider",
         "--basetemp", str(base), "--rootdir", str(suite), str(suite)],
        cwd=suite, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    seen = {w.name: set(w.read_text().split()) for w in records.iterdir()}
    assert set(seen) == {"gw0", "gw1"}, seen
    assert set.union(*seen.values()) == {str(base / "compile-cache")}


@pytest.fixture(scope="module")
def module_state() -> str:
    """A module-scoped fixture of this module, asked for by name (an analysis, elsewhere)."""
    return "set up once"


@pytest.fixture(scope="module", autouse=True)
def _module_autouse() -> str:
    """A module-scoped autouse fixture of this module (a module's compile cache, elsewhere)."""
    return "every test"


def test_a_module_fixtures_tests_run_on_one_worker(
    module_state: str, request: pytest.FixtureRequest
) -> None:
    """conftest.py groups the tests that ask for a module-scoped fixture of their own module
    (one xdist group per module), so that the fixture is set up on one worker, not on both."""
    module = request.node.getparent(pytest.Module)
    groups = [m.args for m in request.node.iter_markers("xdist_group")]
    assert groups == [(f"module {module.nodeid}",)], groups
    assert module_state == "set up once"


def test_other_tests_keep_their_scheduling(
    compile_cache: Path, request: pytest.FixtureRequest
) -> None:
    """A module fixture of conftest.py (``compile_cache``) or an autouse one groups nothing."""
    assert "_module_autouse" in request.fixturenames
    assert request.node.get_closest_marker("xdist_group") is None


GROUPED = """
import os

import pytest


def record(what):
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(os.path.join(os.environ["RECORD_TO"], worker), "a") as f:
        f.write(what + "\\n")


@pytest.fixture(scope="module")
def analysis():
    record("setup")
    return 1


@pytest.mark.parametrize("i", range(6))
def test_uses_the_module_fixture(i, analysis):
    record("fixture")


@pytest.mark.parametrize("i", range(6))
@pytest.mark.xdist_group("case")
def test_in_a_group(i):
    record("group")


@pytest.mark.parametrize("i", range(12))
def test_free(i):
    record("free")
"""


def test_loadgroup_keeps_groups_and_module_fixtures_on_one_worker(tmp_path: Path) -> None:
    """The README's ``--dist loadgroup`` on two workers with this conftest.py: an
    ``xdist_group``'s tests run on one worker, and so do the tests of a module-scoped fixture of
    their module, which is set up once (pytest 9.2 ignored pytest-xdist's way of naming the
    group, and both were spread over the workers)."""
    suite = tmp_path / "suite"
    suite.mkdir()
    for helper in ("conftest.py", "suitekit.py", "propkit.py"):
        shutil.copy(TESTS / helper, suite / helper)
    (suite / "test_grouped.py").write_text(GROUPED)
    records, base = tmp_path / "records", tmp_path / "base"
    records.mkdir()
    env = {**os.environ, "RECORD_TO": str(records)}
    env.pop("GPUADVISE_CACHE_DIR", None)
    p = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-n", "2", "--dist", "loadgroup",
         "-p", "no:cacheprovider", "--basetemp", str(base), "--rootdir", str(suite), str(suite)],
        cwd=suite, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    seen = {w.name: w.read_text().split() for w in records.iterdir()}
    assert sum(lines.count("free") for lines in seen.values()) == 12
    for kind, count in (("fixture", 6), ("group", 6), ("setup", 1)):
        where = {w: lines.count(kind) for w, lines in seen.items() if kind in lines}
        assert list(where.values()) == [count], (kind, seen)


def test_no_test_imports_from_conftest() -> None:
    """``conftest`` names no one module: tests/record has a conftest.py of its own, and which
    one ``from conftest import ...`` gets depends on the order the folders were collected in (a
    run of tests/record first broke the import). Shared helpers live in tests/suitekit.py."""
    import re

    pattern = re.compile(r"^\s*(from\s+conftest\s+import|import\s+conftest\b)", re.MULTILINE)
    offenders = [
        str(path.relative_to(TESTS))
        for path in sorted(TESTS.rglob("*.py"))
        if pattern.search(path.read_text(encoding="utf-8"))
    ]
    assert offenders == []


@pytest.mark.parametrize(
    ("profile", "asked", "runs"),
    [
        ("ci", 300, 300),
        ("ci", 12, 12),
        ("dev", 300, 75),
        ("dev", 60, 15),
        ("dev", 25, 10),  # at least 10
        ("dev", 6, 6),  # or what was asked, when fewer
    ],
)
def test_the_profiles_examples(profile: str, asked: int, runs: int) -> None:
    current = settings.get_current_profile_name()
    try:
        settings.load_profile(profile)
        assert propkit.examples(asked) == runs
        assert settings().max_examples == (100 if profile == "ci" else 25)  # no count given
    finally:
        settings.load_profile(current)


@pytest.mark.parametrize(
    ("ci", "profile"), [(None, "dev"), ("", "dev"), ("false", "dev"), ("true", "ci"), ("1", "ci")]
)
def test_the_default_profile_follows_ci(
    ci: str | None, profile: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    current = settings.get_current_profile_name()
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    try:
        assert propkit.load_default_profile() == profile
        assert settings.get_current_profile_name() == profile
    finally:
        settings.load_profile(current)


def test_the_readme_command_is_the_one_ci_runs_at_full_strength() -> None:
    """The README's test command is the last line of .ci/run: every CPU (pytest-xdist, which the
    ``dev`` extra installs), the kernel cases' groups kept together, the full hypothesis count."""
    import tomllib

    root = TESTS.parent
    readme = (root / "README.md").read_text()
    block = readme.split("**Run the tests**", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    command = block.strip()
    assert (root / ".ci" / "run").read_text().strip().splitlines()[-1] == command
    pytest_args = command.split(".venv/bin/python -m pytest", 1)[1].split()
    assert pytest_args == ["-q", "-n", "auto", "--dist", "loadgroup", "--hypothesis-profile=ci"]
    dev = tomllib.loads((root / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(d.startswith("pytest-xdist") for d in dev["dev"])


def test_the_test_process_asks_no_huge_pages_for_arrays() -> None:
    """conftest turns numpy's ``madvise`` of transparent huge pages off in the test process (a
    large array written sparsely paid a 2 MB page zeroed, after a compaction, per first touch:
    most of GA304's 8K set-up's system time); the processes a test starts keep numpy's own
    setting, the product's (their peak memory is what memory tests read)."""
    pytest.importorskip("numpy._core.multiarray")
    from numpy._core.multiarray import _set_madvise_hugepage

    assert _set_madvise_hugepage(False) is False  # it was off already
    child = "from numpy._core.multiarray import _set_madvise_hugepage as f; print(f(False))"
    env = {k: v for k, v in os.environ.items() if k != "NUMPY_MADVISE_HUGEPAGE"}
    out = subprocess.run(
        [sys.executable, "-c", child], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    # numpy's default: on from Linux 4.6 (every machine this suite runs on)
    assert out == ["True"]


def test_load_script_keeps_the_two_benchmark_runners_apart() -> None:
    """benchmarks/corpus/run.py and benchmarks/public/run.py loaded in one process, in both
    orders, each under its own name: neither is the other, public's run.py sees public's
    fetch.py, and no plain ``run`` or ``fetch`` module is left behind."""
    bench = TESTS.parent / "benchmarks"
    before = {k: sys.modules.get(k) for k in ("run", "fetch")}
    for first in ("corpus", "public"):
        loaded = {}
        for which in (first, "public" if first == "corpus" else "corpus"):
            if which == "public":
                fetch = load_script(bench / "public" / "fetch.py", f"t_public_fetch_{first}")
                loaded[which] = load_script(
                    bench / "public" / "run.py", f"t_public_run_{first}", fetch=fetch
                )
                assert loaded[which].load_manifest is fetch.load_manifest
            else:
                loaded[which] = load_script(bench / "corpus" / "run.py", f"t_corpus_run_{first}")
        assert hasattr(loaded["public"], "analyze_entry")
        assert not hasattr(loaded["corpus"], "analyze_entry")
        assert hasattr(loaded["corpus"], "cpu_sets")
        assert {k: sys.modules.get(k) for k in ("run", "fetch")} == before
    with pytest.raises(FileNotFoundError):
        load_script(bench / "no_such_script.py", "t_missing")
    assert "t_missing" not in sys.modules


def test_suite_cpu_names_the_cubins_disassembled_in_both_modes() -> None:
    """benchmarks/suite_cpu.py's summary counts the cubins whose SASS was read alone and whose
    life ranges were read in a second nvdisasm run (one ``-plr`` run gives both), and names the
    modules that did it."""
    bench = Path(__file__).resolve().parents[1] / "benchmarks"
    cpu = load_script(bench / "suite_cpu.py", "t_suite_cpu")
    rows = [
        {"id": "tests/a.py::t1", "self": 1.0, "child": 1.0,
         "disasm": [["sass", "/c/x.cubin", 1.5], ["plr", "/c/y.cubin", 0.7]]},
        {"id": "tests/b.py::t2", "self": 1.0, "child": 1.0,
         "disasm": [["plr", "/c/x.cubin", 0.7], ["sass", "/c/z.cubin#fun3", 0.4]]},
    ]  # fmt: skip
    text = cpu.summary(rows)
    assert "disassembler runs in the test processes: 4 on 3 cubins; 1 cubins read in both " in text
    assert "(their SASS-alone runs 2 s)" in text  # 1.5 s: x.cubin's alone, not z's
    assert "    1 runs tests/a.py" in text and "    1 runs tests/b.py" in text


def test_suite_tools_counts_repeats_and_the_floor_of_distinct_runs() -> None:
    """benchmarks/suite_tools.py's summary: per tool the runs, their CPU and those of a content
    already made; the floor is the distinct runs' CPU over the CPUs, against the goal."""
    bench = Path(__file__).resolve().parents[1] / "benchmarks"
    tools = load_script(bench / "suite_tools.py", "t_suite_tools")
    rows = [
        ("nvcc", 300.0, "tests/a.py::t1 (call)", "k1"),
        ("nvcc", 200.0, "tests/a.py::t2 (call)", "k1"),  # a repeat
        ("nvdisasm", 420.0, "tests/b.py::t3 (call)", "k1"),  # another tool: not a repeat
    ]
    text = tools.summary(rows, cpus=2, goal_min=6)
    assert (
        "nvcc          2 runs   500.0 CPU-s (250.00 a run); 1 of a content already made, " in text
    )
    assert "200.0 CPU-s" in text
    assert "nvdisasm      1 runs   420.0 CPU-s (420.00 a run); 0 of a content" in text
    # (300 + 420) CPU-s over 2 CPUs: 6.0 minutes, not over a 6-minute goal; over a 5-minute one
    assert "distinct contents alone: 720 CPU-s = 6.0 minutes on 2 CPUs" in text
    assert "0.0 left for the rest" in text
    assert "over it" in tools.summary(rows, cpus=2, goal_min=5)
    assert "  tests/a.py" in text and "  tests/b.py" in text


@pytest.mark.skipif(not Path("/usr/bin/time").is_file(), reason="needs GNU time")
def test_suite_tools_wrapper_keys_a_run_by_its_flags_and_input_not_its_temporary_paths(
    tmp_path: Path,
) -> None:
    """The wrapper logs each run (CPU, test id, key) and runs the real tool with the same
    arguments: two runs of one content with other temporary folders share a key; another
    content or another flag does not; a ``%`` in the test id is kept."""
    bench = Path(__file__).resolve().parents[1] / "benchmarks"
    tools = load_script(bench / "suite_tools.py", "t_suite_tools_wrap")
    real = tmp_path / "real"
    real.write_text('#!/bin/sh\necho "$@" >> "$REAL_OUT"\n')
    real.chmod(0o755)
    wrapper = tmp_path / "nvcc"
    tmp = tempfile.gettempdir()
    wrapper.write_text(
        tools.WRAPPER.replace("@@ TOOL", "nvcc")
        .replace("@@ REAL", str(real))
        .replace("@@ TMP", tmp)
    )
    wrapper.chmod(0o755)
    log, out = tmp_path / "tools.log", tmp_path / "real.out"
    a, b = tmp_path / "a.cu", tmp_path / "b.cu"
    a.write_text("__global__ void k() {}\n")
    b.write_text("__global__ void k() { }\n")
    env = {**os.environ, "SUITE_TOOLS_LOG": str(log), "REAL_OUT": str(out),
           "PYTEST_CURRENT_TEST": "tests/x.py::t[50%] (call)"}  # fmt: skip
    for flag, keep, src in (
        ("-O3", "one", a),
        ("-O3", "two", a),
        ("-O3", "one", b),
        ("-O2", "one", a),
    ):
        subprocess.run(
            [str(wrapper), flag, "-keep-dir", f"{tmp}/{keep}", str(src)], env=env, check=True
        )
    rows = tools.read_log(log)
    assert [r[0] for r in rows] == ["nvcc"] * 4
    assert {r[2] for r in rows} == {"tests/x.py::t[50%] (call)"}
    keys = [r[3] for r in rows]
    assert keys[0] == keys[1] and len(set(keys)) == 3, keys
    assert out.read_text().splitlines()[0] == f"-O3 -keep-dir {tmp}/one {a}"


def test_a_bundle_reads_as_its_kernels_alone_and_each_finds_its_own_launch(tmp_path: Path):
    """bundlekit: each kernel's text follows the previous one's with the previous one's macros
    undefined (``#define T 256`` would rewrite the next kernel's ``template <typename T>``), and
    the spec discovery finds each kernel's own launch beside the one source (``<base>.toml``,
    a template instance's by its base name); two kernels of one base name are refused."""
    from bundlekit import bundle_text, write_bundle

    from gpuadvise.spec.kernel_spec import find_spec_for, load_spec

    codes = {
        "mean": "\n    #define T 256\n    __global__ void mean(float* x) { x[0] = T; }\n",
        "tpl<4>": "template <typename T, int N> __global__ void tpl(T* x) { x[0] = N; }\n"
        "template __global__ void tpl<float, 4>(float*);\n",
    }
    text = bundle_text(codes)
    assert text.splitlines()[:3] == [
        "#define T 256",
        "__global__ void mean(float* x) { x[0] = T; }",
        "#undef T",
    ]
    assert text.index("#undef T") < text.index("template <typename T")
    specs = {"mean": 'grid = "4"\nblock = "256"\n', "tpl<4>": 'grid = "1"\nblock = "32"\n'}
    src = write_bundle(tmp_path / "b", codes, specs)
    assert src.read_text() == text
    for kernel, block in (("mean", 256), ("tpl<4>", 32)):
        spec = find_spec_for(src, kernel)
        assert spec is not None and spec.name == kernel.split("<")[0] + ".toml"
        loaded = load_spec(spec)
        assert loaded["kernel"] == kernel and str(loaded["block"]) == str(block), loaded
    with pytest.raises(AssertionError, match="two kernels of one name"):
        write_bundle(tmp_path / "c", codes, {"tpl<4>": "", "tpl<8>": ""})
