"""Hostile and unusual file names never reach a shell (issue 18).

nvcc runs its steps through ``sh -c`` with paths in double quotes: a source named
``x;$(touch pwned).cu`` used to run ``touch``. These tests compile such files (and names with
spaces, quotes, backslashes, unicode, a leading ``-``) and check that nothing ran, that the
kernels are found and that line info points at the user's file.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pytest
from clikit import cli_run
from toolchainkit import toolchain_or_none

from gpuadvise.errors import UsageError
from gpuadvise.fileio import decode_tool_path
from gpuadvise.ptx.parser import parse_ptx
from gpuadvise.toolchain import (
    CompileOptions,
    compile_source,
    select_compiled_kernel,
    struct_layouts,
)
from gpuadvise.toolchain.sass import disassemble

ROOT = Path(__file__).resolve().parents[2]


TC = toolchain_or_none()
pytestmark = [
    pytest.mark.toolkit,
    pytest.mark.skipif(TC is None, reason="no CUDA toolchain (nvcc) found"),
]

KERNEL = """\
struct Cell { float a; double b; };
template <int B>
__global__ void scale(float* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = p[i] * B;  // line 5
}
template __global__ void scale<2>(float*, int);
"""

NAMES = [
    "x;$(touch pwned).cu",
    "-rf `touch pwned` .cu",
    "--version.cu",
    "with space.cu",
    "it's.cu",
    "dollar $HOME.cu",
    "ünïcödé_カーネル.cu",
]


def _pwned(*dirs: Path) -> list[Path]:
    """Files the injected commands (``touch pwned``, ``touch pwned-dir``) would have made."""
    return [p for d in dirs for p in d.rglob("*") if p.name in ("pwned", "pwned-dir")]


@pytest.mark.parametrize("use_cache", [False, True], ids=["no-cache", "cache"])
@pytest.mark.parametrize("name", NAMES)
def test_hostile_names_compile_and_run_nothing(
    name: str, use_cache: bool, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    folder = tmp_path / "d $(touch pwned-dir)"
    folder.mkdir()
    src = folder / name
    src.write_text(KERNEL, encoding="utf-8")
    monkeypatch.chdir(folder)
    opts = CompileOptions(cache_dir=tmp_path / "cache", use_cache=use_cache)
    module = compile_source(src, opts, TC, kernels=["scale<3>"])  # the wrapper includes it too
    assert _pwned(tmp_path, Path.cwd()) == []
    assert module.source == src.resolve()
    assert src.resolve() in module.dependencies
    assert all(".gpuadvise_source" not in str(d) for d in module.dependencies)
    k = select_compiled_kernel(module, "scale<3>")
    assert k.resources.registers > 0
    files = {i.file for i in disassemble(module.cubin_path, k.mangled, TC) if i.file}
    assert files == {str(src.resolve())}  # line info names the user's file, unicode included
    assert any(str(src.resolve()) == p for p in parse_ptx(module.ptx).files.values())
    assert select_compiled_kernel(module, "scale<2>").name == "scale<2>"
    assert struct_layouts(src, ["Cell"], opts, TC) == {"Cell": (16, 8)}
    assert _pwned(tmp_path, Path.cwd()) == []
    if use_cache:
        again = compile_source(src, opts, TC)
        assert again.from_cache and set(again.kernels) <= set(module.kernels)


def test_compile_error_names_the_users_file(tmp_path: Path) -> None:
    src = tmp_path / "bad $(touch pwned).cu"
    src.write_text("__global__ void k(float* p) { p[0] = nope; }\n")
    with pytest.raises(Exception) as exc:
        compile_source(src, CompileOptions(use_cache=False), TC)
    shown = f"{exc.value}\n{exc.value.details}"  # the one line, then nvcc's output verbatim
    assert f"{src}(1): error" in shown  # nvcc's own spelling, verbatim
    assert "gpuadvise_source" not in shown
    assert _pwned(tmp_path) == []


@pytest.mark.parametrize(
    ("name", "what"), [('say "hi".cu', "double quote"), ("back\\slash.cu", "backslash")]
)
def test_unusable_characters_are_refused_in_one_line(name: str, what: str, tmp_path: Path) -> None:
    src = tmp_path / name
    src.write_text(KERNEL)
    with pytest.raises(UsageError) as exc:
        compile_source(src, CompileOptions(use_cache=False), TC)
    assert what in exc.value.one_line() and "rename" in exc.value.one_line()


def test_include_folder_with_shell_characters_is_refused(tmp_path: Path) -> None:
    inc = tmp_path / "inc $(touch pwned)"
    inc.mkdir()
    src = tmp_path / "k.cu"
    src.write_text(KERNEL)
    with pytest.raises(UsageError) as exc:
        compile_source(src, CompileOptions(include_dirs=[inc], use_cache=False), TC)
    assert "include folder" in exc.value.message
    assert _pwned(tmp_path) == []


def test_cli_analyze_of_a_hostile_name(tmp_path: Path) -> None:
    src = tmp_path / "x;$(touch pwned).cu"
    src.write_text(KERNEL)
    with contextlib.chdir(tmp_path):  # in this process, the run's compile cache
        p = cli_run(
            "analyze", "--json", "--kernel", "scale<2>", "--grid", "4", "--block", "256",
            "--arg", "n=1000", "--", src.name,
        )  # fmt: skip
    assert p.returncode == 0, p.stderr[-2000:]
    assert _pwned(tmp_path) == []
    assert src.name in p.stdout


def test_decode_tool_path() -> None:
    """PTX writes non-ASCII bytes as octal escapes; nvdisasm turns the later backslashes into
    slashes. Both forms decode, and a real folder named like an escape is kept."""
    assert decode_tool_path(r"/d/\303\274.cu") == "/d/ü.cu"
    assert decode_tool_path(r"/d/\303/274.cu") == "/d/ü.cu"
    assert decode_tool_path(r"/d/\303/274/274.cu") == "/d/ü/274.cu"
    assert decode_tool_path(r"/d/\343/202/253.cu") == "/d/カ.cu"
    assert decode_tool_path("/plain/with space.cu") == "/plain/with space.cu"
