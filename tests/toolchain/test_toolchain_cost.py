"""What the toolchain saves per kernel keeps the results it gave: the included files read from
the kept preprocessed file instead of ``nvcc -MD``'s extra pass, nvdisasm's SASS without its
dataflow pass (``-ndf``) except where the code branches indirectly, and the SASS read from the
life ranges' output (one nvdisasm run for both, lines from the cubin's line table)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from gpuadvise.errors import ToolchainError
from gpuadvise.toolchain import CompileOptions, compile_source, find_toolchain, sass
from gpuadvise.toolchain.includes import parse_depfile, preprocessed_files
from gpuadvise.toolchain.sass import disassemble_all, parse_nvdisasm

pytestmark = pytest.mark.usefixtures("compile_cache")

CUDA_DIR = Path(__file__).resolve().parents[1] / "cuda"
MULTI = (CUDA_DIR / "multi.cu").resolve()
INDIRECT = (CUDA_DIR / "indirect_branch.cu").resolve()
OPTIONS = CompileOptions(arch="sm_90", include_dirs=[str(CUDA_DIR / "include")])


def _toolchain():  # type: ignore[no-untyped-def]
    try:
        tc = find_toolchain()
    except ToolchainError:
        return None
    return tc if tc.nvdisasm is not None else None


TC = _toolchain()
needs_tools = pytest.mark.skipif(TC is None, reason="no nvcc + nvdisasm found")


def test_preprocessed_files_reads_line_markers() -> None:
    text = (
        b'# 0 "/src/k.cu"\n'
        b'# 0 "<built-in>"\n'
        b'# 0 "<command-line>"\n'
        b'# 1 "/usr/include/stdc-predef.h" 1 3 4\n'
        b"int x;\n"
        b'# 1 "/src/k.cu"\n'
        b'# 1 "/src/sub/../a b.cuh" 1\n'
        b"# define not_a_marker 1\n"
        b'#line 7 "/src/we\\"ird\\\\name.cuh"\n'
        b'# 3 "/src/oct\\101l.h" 2\n'
        b'# 2 "/usr/include/stdc-predef.h" 2 3 4\n'
        b'  # 4 "/not/at/line/start.h"\n'
    )
    assert preprocessed_files(text) == [
        "/src/k.cu",
        "/usr/include/stdc-predef.h",
        "/src/a b.cuh",
        '/src/we"ird\\name.cuh',
        "/src/octAl.h",
    ]
    assert preprocessed_files(b"") == []
    # the first line has no newline before it; names written two ways are one file, in the
    # order first entered; an unclosed quote is no marker
    text = b'# 1 "/a/k.cu"\n# 2 "/a/./h\\101.h"\n# 3 "/a/b/../hA.h" 2\n# 4 "/a/open\n# 5 "/a/k.cu"'
    assert preprocessed_files(text) == ["/a/k.cu", "/a/hA.h"]


@needs_tools
def test_dependencies_are_what_the_device_pass_read(tmp_path: Path) -> None:
    """The module's files are those of nvcc's own dependency list (``-M``) that its device pass
    read: the source and its headers first, none missing but headers only host code includes."""
    module = compile_source(MULTI, OPTIONS)
    deps = [str(d) for d in module.dependencies]
    assert deps[0] == str(MULTI) and str(CUDA_DIR / "include" / "ga_helpers.cuh") in deps
    assert TC is not None
    proc = subprocess.run(
        [str(TC.nvcc), *module.flags, "-M", str(MULTI)],
        capture_output=True,
        text=True,
        env={**os.environ, "TMPDIR": str(tmp_path)},
        check=True,
    )
    listed = parse_depfile(proc.stdout)
    assert set(deps) <= set(listed)
    assert [d for d in listed if d in set(deps)] == deps  # nvcc's order
    assert not [d for d in listed if d not in set(deps) and d.startswith(str(CUDA_DIR))]


@needs_tools
@pytest.mark.parametrize("source", [MULTI, INDIRECT], ids=["direct", "indirect"])
def test_sass_is_what_a_plain_disassembly_gives(source: Path) -> None:
    """``-ndf`` skips nvdisasm's dataflow pass, which only annotates indirect branches (their
    inferred targets): the SASS read is that of ``nvdisasm -c -gi``, BRX included."""
    assert TC is not None and TC.nvdisasm is not None
    module = compile_source(source, OPTIONS)
    plain = subprocess.run(
        [str(TC.nvdisasm), "-c", "-gi", str(module.cubin_path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for sidecar in module.cubin_path.parent.glob("module.cubin.nvdisasm.*.txt"):
        sidecar.unlink()  # disassembled now, not read from an earlier test's file
    sass._disassemble_cached.cache_clear()
    got = disassemble_all(module.cubin_path, TC)
    assert got == parse_nvdisasm(plain)
    brx = [i for f in got.values() for i in f if i.base_opcode == "BRX"]
    assert bool(brx) == (source == INDIRECT)
    assert all("BRANCH_TARGETS" in i.operands for i in brx)


NESTED = (
    "#include <cooperative_groups.h>\n"
    "#include <cooperative_groups/reduce.h>\n"
    "namespace cg = cooperative_groups;\n"
    "__device__ __forceinline__ float sq(float v) { return v * v; }\n"
    "__device__ __forceinline__ float twice(float v) { return sq(v) + sq(v + 1.0f); }\n"
    "__global__ void nested(const float* in, float* out, int n) {\n"
    "  auto warp = cg::tiled_partition<32>(cg::this_thread_block());\n"
    "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "  float v = i < n ? twice(in[i]) : 0.0f;\n"
    "  v = cg::reduce(warp, v, cg::plus<float>());\n"
    "  if (warp.thread_rank() == 0) atomicAdd(out, v);\n"
    "}\n"
)


@needs_tools
@pytest.mark.parametrize("source", [MULTI, INDIRECT, None], ids=["direct", "indirect", "nested"])
def test_sass_read_from_the_life_ranges_is_a_plain_disassembly(
    source: Path | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Once the life ranges are read (``nvdisasm -plr``, which prints every instruction but
    ignores ``-g``), the SASS comes from that output with its lines and call sites from the
    cubin's line table, without a second nvdisasm run: the same as ``nvdisasm -c -gi`` gives,
    inlining chains (headers, nested inline functions, CUDA's own headers) and the trailing
    NOP padding included."""
    from gpuadvise.toolchain import liveness

    assert TC is not None and TC.nvdisasm is not None
    if source is None:
        source = tmp_path / "nested.cu"
        source.write_text(NESTED)
    module = compile_source(source, OPTIONS)
    plain = subprocess.run(
        [str(TC.nvdisasm), "-c", "-gi", str(module.cubin_path)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for sidecar in module.cubin_path.parent.glob("module.cubin.nvdisasm*.txt"):
        sidecar.unlink()
    sass._disassemble_cached.cache_clear()
    liveness._cached.cache_clear()
    sass._texts.clear()
    runs = _counted_runs(monkeypatch)
    kernel = module.kernels[0]
    liveness.life_ranges(module.cubin_path, kernel.mangled, TC)
    got = disassemble_all(module.cubin_path, TC)
    assert [c[1] for c in runs] == ["--print-life-ranges"]  # one nvdisasm run for both
    want = parse_nvdisasm(plain)
    assert got == want
    ins = [i for f in got.values() for i in f]
    assert ins[-1].opcode == "NOP" and all(i.file for i in ins if i.opcode != "NOP")
    if source.name == "nested.cu":
        assert max(len(i.inlined_at) for i in ins) >= 2
    # from the kept output too (a new process): still no second run
    sass._disassemble_cached.cache_clear()
    sass._texts.clear()
    assert disassemble_all(module.cubin_path, TC) == want and len(runs) == 1


def test_line_table_locations_follow_nvdisasm() -> None:
    """nvdisasm prints a new location only when the innermost file or line changes: a row with
    the same innermost line under another call site keeps the call sites in effect; before the
    first row an instruction has no line."""
    from gpuadvise.toolchain.lines import locate, trailing_nops

    rows = [
        (0x10, "k.cu", 5, ()),
        (0x20, "k.cu", 9, ()),
        (0x20, "h.cuh", 2, (("k.cu", 9),)),
        (0x30, "h.cuh", 2, (("k.cu", 12),)),  # same innermost line: not printed
        (0x40, "k.cu", 12, ()),
    ]
    assert locate(rows, [0x0, 0x10, 0x20, 0x30, 0x40, 0x50]) == [
        (None, None, ()),
        ("k.cu", 5, ()),
        ("h.cuh", 2, (("k.cu", 9),)),
        ("h.cuh", 2, (("k.cu", 9),)),
        ("k.cu", 12, ()),
        ("k.cu", 12, ()),
    ]
    nop = bytes.fromhex("18790000000000000000000000c00f00")
    exit_ = bytes.fromhex("4d790000000000000000800300ea0f00")
    assert trailing_nops(exit_ + nop + nop, 0) == 2
    assert trailing_nops(exit_, 0) == 0
    assert trailing_nops(exit_ + exit_ + nop, 0) is None  # not padding: disassemble it


@needs_tools
def test_work_beside_nvcc_runs_while_nvcc_does_and_never_on_a_hit(
    private_compile_cache: Path,
) -> None:
    """``while_nvcc_runs``: the work is entered as nvcc starts and left once it has returned,
    once per nvcc run, with the nvcc process alive meanwhile; a cache hit runs no nvcc, so no
    work (an unchanged re-run of analyze stays short); outside the block nothing is wrapped."""
    import contextlib
    import threading
    from collections.abc import Iterator

    from gpuadvise.toolchain.compile import while_nvcc_runs

    seen: list[str] = []

    @contextlib.contextmanager
    def work() -> Iterator[None]:
        seen.append("enter")
        main = threading.main_thread()
        assert threading.current_thread() is main  # entered by the compiling thread itself
        yield
        seen.append("exit")

    with while_nvcc_runs(work):
        first = compile_source(MULTI, OPTIONS)
        assert seen == ["enter", "exit"] and not first.from_cache
        again = compile_source(MULTI, OPTIONS)
        assert again.from_cache and seen == ["enter", "exit"]
    # compile time is nvcc's own: the work's time is not in it
    assert 0 < first.compile_time_s
    fresh = CompileOptions(arch="sm_90", include_dirs=[str(CUDA_DIR / "include")], use_cache=False)
    compile_source(MULTI, fresh)  # nvcc runs, outside the block: nothing wrapped
    assert seen == ["enter", "exit"]


@needs_tools
def test_made_is_told_each_cubin_nvcc_made_then_the_stored_module_never_on_a_hit(
    private_compile_cache: Path,
) -> None:
    """``while_nvcc_runs``' ``made``: told of each cubin nvcc made as soon as nvcc has returned,
    in the compiling thread, before the work beside nvcc is left and before the cache stores the
    cubin (in the compile's build folder); what it returns is told the module as stored (its
    cubin in the cache, the same bytes); a cache hit (no nvcc) tells nothing, nor does a compile
    outside the block."""
    import contextlib
    import threading
    from collections.abc import Iterator

    from gpuadvise.toolchain.compile import while_nvcc_runs

    seen: list[str] = []
    made: list[tuple[Path, bytes]] = []
    stored: list[tuple[Path, bool]] = []

    @contextlib.contextmanager
    def work() -> Iterator[None]:
        seen.append("enter")
        yield
        seen.append("exit")

    def hook(cubin, tc):  # type: ignore[no-untyped-def]
        assert threading.current_thread() is threading.main_thread()
        assert seen == ["enter"]  # the work beside nvcc not left yet
        assert TC is not None and tc.nvdisasm == TC.nvdisasm
        made.append((cubin, cubin.read_bytes()))
        return lambda module: stored.append((module.cubin_path, module.cubin_path.is_file()))

    with while_nvcc_runs(work, made=hook):
        first = compile_source(MULTI, OPTIONS)
        assert len(made) == 1 and made[0][0] != first.cubin_path and seen == ["enter", "exit"]
        assert not made[0][0].exists()  # the compile's build folder, removed once stored
        assert made[0][1] == first.cubin_path.read_bytes()
        assert stored == [(first.cubin_path, True)]
        assert private_compile_cache.resolve() in first.cubin_path.resolve().parents  # stored
        compile_source(MULTI, OPTIONS)  # a hit
    assert len(made) == 1 and len(stored) == 1
    fresh = CompileOptions(arch="sm_90", include_dirs=[str(CUDA_DIR / "include")], use_cache=False)
    compile_source(MULTI, fresh)  # nvcc runs, outside the block: nobody told
    assert len(made) == 1


def _forget(module) -> None:  # type: ignore[no-untyped-def]
    """No disassembly of ``module`` kept: sidecars, this process' caches."""
    from gpuadvise.toolchain import liveness

    for sidecar in module.cubin_path.parent.glob("module.cubin.nvdisasm*.txt"):
        sidecar.unlink()
    sass._disassemble_cached.cache_clear()
    liveness._cached.cache_clear()
    sass._texts.clear()
    sass._early_sass.clear()


def _compiled_with(made, source: Path = MULTI):  # type: ignore[no-untyped-def]
    """``source`` compiled by nvcc (a fresh cache) under ``while_nvcc_runs``' ``made``."""
    import contextlib

    from gpuadvise.toolchain.compile import while_nvcc_runs

    with while_nvcc_runs(contextlib.nullcontext, made=made):
        module = compile_source(source, OPTIONS)
    assert not module.from_cache
    return module


def _counted_runs(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The disassembler's runs from now on (``sass._run``'s commands), in a list kept current."""
    runs: list[list[str]] = []
    real_run = sass._run

    def counted(cmd):  # type: ignore[no-untyped-def]
        runs.append(list(cmd))
        return real_run(cmd)

    monkeypatch.setattr(sass, "_run", counted)
    return runs


@needs_tools
def test_life_ranges_started_as_nvcc_returns_are_waited_for_not_run_again(
    private_compile_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``analyze``'s key compile (:func:`gpuadvise.toolchain.sass.life_ranges_made`): ``-plr``
    starts on the cubin nvcc has just made, before it is stored; the analysis' own read of the
    life ranges and the SASS of the stored cubin, asked while that run is still going, waits for
    it instead of starting a second one, and reads what a read of its own gives."""
    import threading

    from gpuadvise.toolchain import liveness

    assert TC is not None and TC.nvdisasm is not None
    runs: list[list[str]] = []
    asked = threading.Event()
    real_run = sass._run

    def slow(cmd):  # type: ignore[no-untyped-def]
        runs.append(list(cmd))
        asked.wait(10)  # still running when the analysis asks for it
        return real_run(cmd)

    monkeypatch.setattr(sass, "_run", slow)
    module = _compiled_with(sass.life_ranges_made)
    kernel = module.kernels[0]
    assert len(runs) == 1 and runs[0][1] == "--print-life-ranges"
    assert Path(runs[0][-1]) != module.cubin_path  # started on nvcc's own output
    assert sass._pending  # the stored cubin's, still running
    timer = threading.Timer(0.3, asked.set)
    timer.start()
    got_ranges = liveness.life_ranges(module.cubin_path, kernel.mangled, TC)
    got_sass = disassemble_all(module.cubin_path, TC)
    timer.join()
    assert len(runs) == 1  # one nvdisasm run in all
    assert not sass._pending
    assert not Path(runs[0][-1]).parent.exists()  # its link to the cubin removed
    _forget(module)
    asked.set()
    assert liveness.life_ranges(module.cubin_path, kernel.mangled, TC) == got_ranges
    assert disassemble_all(module.cubin_path, TC) == got_sass  # read afresh: the same
    assert len(runs) == 2
    _forget(module)


@needs_tools
def test_life_ranges_started_as_nvcc_returns_that_fail_are_read_again(
    private_compile_cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run started as nvcc returned that fails leaves the read to the analysis, which runs
    nvdisasm itself (and would report its error there)."""
    from gpuadvise.toolchain import liveness

    assert TC is not None and TC.nvdisasm is not None
    real_run = sass._run
    runs: list[str] = []

    def failing_first(cmd):  # type: ignore[no-untyped-def]
        runs.append(cmd[1])
        if len(runs) == 1:
            return subprocess.CompletedProcess(cmd, 1, "", "nvdisasm fatal : no")
        return real_run(cmd)

    monkeypatch.setattr(sass, "_run", failing_first)
    module = _compiled_with(sass.life_ranges_made)
    liveness.life_ranges(module.cubin_path, module.kernels[0].mangled, TC)
    assert runs == ["--print-life-ranges", "--print-life-ranges"] and not sass._pending
    _forget(module)


@needs_tools
@pytest.mark.parametrize("source", [MULTI, INDIRECT], ids=["direct", "indirect"])
def test_variant_sass_started_as_nvcc_returns_is_taken_not_run_again(
    private_compile_cache: Path, monkeypatch: pytest.MonkeyPatch, source: Path
) -> None:
    """A variant compiled ahead (:func:`gpuadvise.toolchain.sass.disassembly_made`): its
    ``nvdisasm -c -gi -ndf`` starts on the cubin nvcc has just made; the SASS read of the stored
    cubin takes that run's output (one run, the same SASS as a read of its own). Code with an
    indirect branch needs the dataflow pass ``-ndf`` skips: it is read again without ``-ndf``,
    as before (the same SASS)."""
    assert TC is not None and TC.nvdisasm is not None
    runs = _counted_runs(monkeypatch)
    module = _compiled_with(sass.disassembly_made, source)
    assert [r[1:4] for r in runs] == [["-c", "-gi", "-ndf"]]
    got = disassemble_all(module.cubin_path, TC)
    expected_runs = 1 if source == MULTI else 2  # -ndf's output unused with an indirect branch
    assert len(runs) == expected_runs and not sass._early_sass
    _forget(module)
    runs.clear()
    assert disassemble_all(module.cubin_path, TC) == got  # read afresh: the same
    assert len(runs) == expected_runs
    _forget(module)
