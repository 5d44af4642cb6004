"""A kernel's entry assembled alone (``CompileOptions.entry``, issue 31: a variant traced for its
point compiled and disassembled every kernel of its file), with the real nvcc."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
from toolchainkit import toolchain_or_none

from gpuadvise.toolchain import CompileOptions, compile_source
from gpuadvise.toolchain import compile as compile_mod
from gpuadvise.toolchain.sass import SassInstruction, disassemble_all

TC = toolchain_or_none()
needs_nvcc = pytest.mark.skipif(TC is None, reason="no CUDA toolchain (nvcc) found")
pytestmark = pytest.mark.toolkit

SOURCE = """\
__global__ void divide(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] / b[i];
}

__global__ void other(float* p, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = p[i] * 2.0f + 1.0f;
}

template <int K>
__global__ void third(float* p) { p[threadIdx.x] += K; }
template __global__ void third<3>(float*);
"""
DIVIDE = "_Z6dividePKfS0_Pfi"


def _source(folder: Path, text: str = SOURCE) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    src = folder / "two.cu"
    src.write_text(text)
    return src


def _nvcc_runs(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """nvcc's runs by the compile from now on, in a list kept current."""
    runs: list[list[str]] = []
    real = compile_mod.run_tool

    def counted(cmd, what, **kw):  # type: ignore[no-untyped-def]
        runs.append(list(cmd))
        return real(cmd, what, **kw)

    monkeypatch.setattr(compile_mod, "run_tool", counted)
    return runs


def _numbered(text: str) -> str:
    """``text`` without the numbers ptxas gives labels and internal functions over the functions
    it assembled (``.L_x_4``, ``$__internal_9_$__cuda_sm3x_div_rn_noftz_f32_slowpath``)."""
    return re.sub(r"\$__internal_\d+_", "$__internal_", re.sub(r"\.L_x_\d+", ".L_x", text))


def _code(sass: Mapping[str, Sequence[SassInstruction]]) -> dict[str, list[tuple[Any, ...]]]:
    """Each function's instructions: offset, opcode, predicate, operands, line, branch target."""
    return {
        _numbered(name): [
            (i.offset, i.opcode, i.predicate, _numbered(i.operands), i.line, i.target) for i in code
        ]
        for name, code in sass.items()
    }


@needs_nvcc
def test_the_entry_alone_is_its_kernel_as_the_whole_files_compile_has_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = _source(tmp_path / "src")
    whole_opts = CompileOptions(cache_dir=tmp_path / "whole")
    whole = compile_source(src, whole_opts)
    runs = _nvcc_runs(monkeypatch)
    alone = compile_source(src, CompileOptions(cache_dir=tmp_path / "alone", entry=DIVIDE))
    assert len(runs) == 1 and f"--entry={DIVIDE}" in runs[0]
    assert [k.mangled for k in alone.kernels] == [DIVIDE]
    assert len(whole.kernels) == 3
    # the same PTX (cicc compiled the whole file), resources and flags (a rule's rebuild)
    assert alone.ptx == whole.ptx and alone.flags == whole.flags
    assert alone.kernels[0] == next(k for k in whole.kernels if k.mangled == DIVIDE)
    # the kernel's SASS, its callee's (the division's slow path) too, is the whole cubin's
    mine = _code(disassemble_all(alone.cubin_path, TC))
    theirs = _code(disassemble_all(whole.cubin_path, TC))
    assert DIVIDE in mine and any("$__internal_" in i[3] for i in mine[DIVIDE])  # (a CALL)
    assert mine == {name: code for name, code in theirs.items() if name in mine}
    assert alone.cubin_path.stat().st_size < whole.cubin_path.stat().st_size
    # kept in the cache under its own key: the next compile of the entry is a hit
    assert compile_source(
        src, CompileOptions(cache_dir=tmp_path / "alone", entry=DIVIDE)
    ).from_cache
    assert len(runs) == 1
    # the whole file's compile is not answered by it
    again = compile_source(src, CompileOptions(cache_dir=tmp_path / "alone"))
    assert not again.from_cache and len(again.kernels) == 3


@needs_nvcc
def test_a_cached_compile_of_the_whole_file_is_taken(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = _source(tmp_path / "src")
    opts = CompileOptions(cache_dir=tmp_path / "c")
    whole = compile_source(src, opts)  # (a rule's candidate of the same text)
    runs = _nvcc_runs(monkeypatch)
    hit = compile_source(src, dataclasses.replace(opts, entry=DIVIDE))
    assert runs == [] and hit.from_cache
    assert hit.cubin_path == whole.cubin_path and len(hit.kernels) == 3


@needs_nvcc
def test_an_entry_the_ptx_lacks_assembles_the_kept_ptx_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # a variant that re-typed the kernel: the original's mangled name is not in its PTX
    text = SOURCE.replace("const float* b", "float* b").replace("{ p[", "{ int unused; p[")
    src = _source(tmp_path / "src", text)
    whole = compile_source(src, CompileOptions(cache_dir=tmp_path / "whole"))
    runs = _nvcc_runs(monkeypatch)
    module = compile_source(src, CompileOptions(cache_dir=tmp_path / "c", entry=DIVIDE))
    # cicc ran once: the second nvcc is ptxas alone, on the PTX the first left
    assert len(runs) == 2 and runs[1][-1].endswith(".ptx") and "--entry" not in " ".join(runs[1])
    assert sorted(k.mangled for k in module.kernels) == sorted(k.mangled for k in whole.kernels)
    assert module.kernels == whole.kernels and module.ptx == whole.ptx
    assert module.cubin_path.read_bytes() == whole.cubin_path.read_bytes()
    assert [str(d) for d in module.dependencies] == [str(d) for d in whole.dependencies]
    # cicc's warning kept, ptxas' failure not
    assert "unused" in whole.log and "unused" in module.log and "fatal" not in module.log


@needs_nvcc
def test_a_compile_error_is_still_one(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from gpuadvise.errors import CompileError

    src = _source(tmp_path / "src", SOURCE + "\n__global__ void broken() { undeclared = 1; }\n")
    runs = _nvcc_runs(monkeypatch)
    with pytest.raises(CompileError, match="undeclared"):
        compile_source(src, CompileOptions(cache_dir=tmp_path / "c", entry=DIVIDE))
    assert len(runs) == 1  # no second nvcc: not an unknown entry


def test_a_name_nvccs_shell_or_comma_split_would_change_is_not_given() -> None:
    flags = compile_mod._entry_flags
    assert flags(CompileOptions(entry=DIVIDE)) == ("-Xptxas", f"--entry={DIVIDE}")
    assert flags(CompileOptions()) == ()
    for name in ("a$b", "a,b", "$(touch x)", "a b", ""):
        assert flags(CompileOptions(entry=name)) == ()


def test_unknown_entry_reads_ptxas_fatal_for_that_name_only() -> None:
    entry = ("-Xptxas", f"--entry={DIVIDE}")
    assert compile_mod._unknown_entry(f"ptxas fatal   : Unknown function {DIVIDE}\n", entry)
    assert not compile_mod._unknown_entry(f"ptxas fatal   : Unknown function {DIVIDE}x\n", entry)
    assert not compile_mod._unknown_entry("two.cu(3): error: identifier undeclared\n", entry)


HEADER = """\
template <typename T>
__global__ void scale(const T* in, T* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] / T(3);
}
"""


@needs_nvcc
def test_a_header_compiled_as_cuda_and_instantiated_by_a_wrapper(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # HeCBench contraction's kernel.h (``--x=cu``): the header alone has no instance (its PTX
    # lacks the entry: assembled whole, without ``--x=cu``, which would read the PTX as CUDA);
    # the wrapper that instantiates it has the entry, assembled alone
    (tmp_path / "src").mkdir()
    header = tmp_path / "src" / "kernel.h"
    header.write_text(HEADER)
    opts = CompileOptions(cache_dir=tmp_path / "whole", extra_flags=("--x=cu",))
    whole = compile_source(header, opts, kernels=["scale<float>"])
    mangled = "_Z5scaleIfEvPKT_PS0_i"
    assert [k.mangled for k in whole.kernels] == [mangled]
    runs = _nvcc_runs(monkeypatch)
    alone_opts = dataclasses.replace(opts, cache_dir=tmp_path / "alone", entry=mangled)
    alone = compile_source(header, alone_opts, kernels=["scale<float>"])
    assert [k.mangled for k in alone.kernels] == [mangled]
    assert alone.kernels == whole.kernels and alone.ptx == whole.ptx
    assert _code(disassemble_all(alone.cubin_path, TC)) == _code(
        disassemble_all(whole.cubin_path, TC)
    )
    ptx_runs = [r for r in runs if r[-1].endswith(".ptx")]
    assert len(ptx_runs) == 1 and "--x=cu" not in ptx_runs[0]  # (the header's own compile)
    assert sum("--entry" in " ".join(r) for r in runs) == 2  # the header's, the wrapper's


@needs_nvcc
def test_where_the_kept_ptx_cannot_be_assembled_the_whole_file_is_compiled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src = _source(tmp_path / "src", SOURCE.replace("const float* b", "float* b"))
    whole = compile_source(src, CompileOptions(cache_dir=tmp_path / "whole"))
    monkeypatch.setattr(compile_mod, "_assemble_whole", lambda *a, **k: None)
    runs = _nvcc_runs(monkeypatch)
    module = compile_source(src, CompileOptions(cache_dir=tmp_path / "c", entry=DIVIDE))
    # the same command without the entry (its -Xptxas alone: -Xptxas -v kept)
    at = runs[0].index(f"--entry={DIVIDE}") - 1
    assert len(runs) == 2 and runs[1] == runs[0][:at] + runs[0][at + 2 :]
    assert module.kernels == whole.kernels
