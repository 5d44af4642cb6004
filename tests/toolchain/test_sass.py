"""Tests of gpuadvise.toolchain.sass: disassembly with source lines and the memory summary."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from toolchainkit import toolchain_or_none

from gpuadvise.errors import KernelNotFoundError, ToolchainError
from gpuadvise.toolchain import (
    CompiledModule,
    CompileOptions,
    compile_source,
    select_compiled_kernel,
)
from gpuadvise.toolchain.sass import (
    NON_MEMORY_OPCODES,
    MemoryOp,
    SassInstruction,
    SassMemLine,
    classify,
    disassemble,
    disassemble_all,
    memory_summary,
    parse_cuobjdump,
    parse_nvdisasm,
    source_text,
)

CUDA_DIR = Path(__file__).resolve().parents[1] / "cuda"
MULTI = (CUDA_DIR / "multi.cu").resolve()
HEADER = (CUDA_DIR / "include" / "ga_helpers.cuh").resolve()


TC = toolchain_or_none(with_nvdisasm=True)
needs_tools = pytest.mark.skipif(TC is None, reason="no nvcc + nvdisasm found")


def mark_line(path: Path, mark: str) -> int:
    """The 1-based line of ``// MARK:<mark>`` in a fixture."""
    for n, text in enumerate(path.read_text().splitlines(), start=1):
        if f"MARK:{mark}" in text:
            return n
    raise AssertionError(f"no MARK:{mark} in {path}")


@pytest.fixture(scope="module")
def module(tmp_path_factory: pytest.TempPathFactory) -> CompiledModule:
    opts = CompileOptions(
        include_dirs=[CUDA_DIR / "include"], cache_dir=tmp_path_factory.mktemp("cache")
    )
    return compile_source(MULTI, opts, kernels=["fill<float>"])


def _sass(module: CompiledModule, name: str) -> tuple[SassInstruction, ...]:
    return disassemble(module.cubin_path, select_compiled_kernel(module, name).mangled, TC)


def _at(summary: tuple[SassMemLine, ...], line: int) -> set[tuple[str, str, int]]:
    return {(m.space, m.kind, m.width_bits) for m in summary if m.line == line}


# --------------------------------------------------------------------------------------------
# With the real tools


@needs_tools
def test_float4_global_load_at_its_line(module: CompiledModule) -> None:
    sass = _sass(module, "vec_add")
    load_line = mark_line(MULTI, "float4-load")
    loads = [i for i in sass if i.opcode == "LDG.E.128"]
    assert loads and {(i.file, i.line) for i in loads} >= {(str(MULTI), load_line)}
    summary = memory_summary(sass)
    assert ("global", "load", 128) in _at(summary, load_line)
    assert ("global", "store", 128) in _at(summary, mark_line(MULTI, "float4-store"))
    line = next(m for m in summary if m.line == load_line and m.space == "global")
    assert line.file == str(MULTI) and "LDG.E.128" in line.opcodes and line.count >= 1
    assert all(i.file == str(MULTI) for i in sass if i.file)


@needs_tools
def test_shared_loads_and_stores_with_widths(module: CompiledModule) -> None:
    summary = memory_summary(_sass(module, "smem_widths"))
    for mark, kind, width in (
        ("sts32", "store", 32),
        ("sts64", "store", 64),
        ("sts128", "store", 128),
        ("lds32", "load", 32),
        ("lds64", "load", 64),
        ("lds128", "load", 128),
    ):
        assert ("shared", kind, width) in _at(summary, mark_line(MULTI, mark)), mark
    opcodes = {op for m in summary if m.space == "shared" for op in m.opcodes}
    assert {"LDS", "LDS.64", "LDS.128", "STS", "STS.64", "STS.128"} <= opcodes


@needs_tools
def test_inlined_header_access_maps_to_header_and_call_site(module: CompiledModule) -> None:
    sass = _sass(module, "ga::scale")
    call = mark_line(MULTI, "scale-call")
    loads = [i for i in sass if i.base_opcode == "LDG"]
    assert loads
    assert {(i.file, i.line) for i in loads} == {(str(HEADER), mark_line(HEADER, "header-load"))}
    assert all(i.call_site == (str(MULTI), call) for i in loads)
    assert ("global", "load", 32) in _at(memory_summary(sass, call_site=True), call)


@needs_tools
def test_instantiated_template_lines_map_to_user_file(module: CompiledModule) -> None:
    sass = _sass(module, "fill<float>")
    stores = [i for i in sass if i.base_opcode == "STG"]
    assert [(i.file, i.line) for i in stores] == [(str(MULTI), mark_line(MULTI, "fill-store"))]
    assert module.wrapper_path is not None
    assert all(i.file != str(module.wrapper_path) for i in sass)


@needs_tools
def test_atomics_barrier_and_predicates(module: CompiledModule) -> None:
    counting = _sass(module, "count_positive")
    kinds = {(m.space, m.kind) for m in memory_summary(counting)}
    assert kinds & {("global", "atomic"), ("global", "reduction"), ("generic", "reduction")}
    reduce = _sass(module, "ga::reduce<64, false>")
    assert any(i.base_opcode == "BAR" for i in reduce)
    assert any(i.predicate is not None for i in reduce + counting)
    assert all(i.base_opcode not in {"BAR"} or not classify(i.opcode) for i in reduce)


@needs_tools
def test_disassemble_all_and_unknown_function(module: CompiledModule) -> None:
    functions = disassemble_all(module.cubin_path, TC)
    assert set(functions) == {k.mangled for k in module.kernels}
    with pytest.raises(KernelNotFoundError):
        disassemble(module.cubin_path, "_Z3nopv", TC)
    with pytest.raises(ToolchainError):
        disassemble_all(module.cubin_path.with_name("gone.cubin"), TC)


@needs_tools
def test_cuobjdump_fallback_has_no_lines(module: CompiledModule) -> None:
    assert TC is not None
    if TC.cuobjdump is None:
        pytest.skip("no cuobjdump")
    tc = dataclasses.replace(TC, nvdisasm=None)
    sass = disassemble(module.cubin_path, select_compiled_kernel(module, "vec_add").mangled, tc)
    with_lines = _sass(module, "vec_add")
    assert [i.opcode for i in sass] == [i.opcode for i in with_lines]
    assert all(i.file is None and i.line is None for i in sass)


@needs_tools
def test_no_disassembler_is_reported(module: CompiledModule) -> None:
    assert TC is not None
    tc = dataclasses.replace(TC, nvdisasm=None, cuobjdump=None)
    with pytest.raises(ToolchainError, match="nvdisasm"):
        disassemble_all(module.cubin_path, tc)


# --------------------------------------------------------------------------------------------
# Parsing and classification (no tools needed)

NVDISASM_TEXT = """\
\t.target\tsm_90
//--------------------- .text._Z1kPKfPf --------------------------
\t.section\t.text._Z1kPKfPf,"ax",@progbits
_Z1kPKfPf:
\t//## File "/src/k.cu", line 7
        /*0000*/                   LDC R1, c[0x0][0x28] ;
\t//## File "/src/inc/../h.cuh", line 2 inlined at "/src/k.cu", line 5
\t//## File "/src/k.cu", line 5 inlined at "/src/k.cu", line 8
\t//## File "/src/k.cu", line 8
        /*0060*/                   LDG.E.128 R4, desc[UR4][R2.64] ;
        /*0070*/              @!P0 STS.64 [R3+0x10], R4 ;
        /*0080*/              @!PT LDS RZ, [RZ] ;
\t//## File "/src/k.cu", line 9
        /*0090*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*00a0*/                   EXIT ;
.L_x_0:
        /*00b0*/                   BRA `(.L_x_0);
//--------------------- .text._Z2k2v --------------------------
        /*0000*/                   ATOMS.POPC.INC.32 RZ, [R25+UR7] ;
"""


def test_parse_nvdisasm_lines_and_inlining() -> None:
    functions = parse_nvdisasm(NVDISASM_TEXT)
    assert list(functions) == ["_Z1kPKfPf", "_Z2k2v"]
    ins = functions["_Z1kPKfPf"]
    assert [i.offset for i in ins] == [0x0, 0x60, 0x70, 0x80, 0x90, 0xA0, 0xB0]
    ldg = ins[1]
    assert (ldg.opcode, ldg.base_opcode, ldg.predicate) == ("LDG.E.128", "LDG", None)
    assert ldg.operands == "R4, desc[UR4][R2.64]"
    assert (ldg.file, ldg.line) == ("/src/h.cuh", 2)
    assert ldg.inlined_at == (("/src/k.cu", 5), ("/src/k.cu", 8))
    assert ldg.call_site == ("/src/k.cu", 8)
    assert ins[2].predicate == "@!P0" and ins[2].opcode == "STS.64"
    assert ins[3].never_executes
    assert (ins[4].file, ins[4].line, ins[4].inlined_at) == ("/src/k.cu", 9, ())
    assert ins[0].call_site == ("/src/k.cu", 7)
    assert functions["_Z2k2v"][0].file is None

    summary = memory_summary(ins)
    assert [(m.file, m.line, m.space, m.kind, m.width_bits, m.count) for m in summary] == [
        ("/src/h.cuh", 2, "global", "load", 128, 1),
        ("/src/h.cuh", 2, "shared", "store", 64, 1),
        ("/src/k.cu", 7, "constant", "load", 32, 1),
    ]
    by_call = memory_summary(ins, call_site=True)
    assert {(m.line, m.space) for m in by_call} == {(7, "constant"), (8, "global"), (8, "shared")}
    assert SassMemLine.from_dict(json.loads(json.dumps(summary[0].to_dict()))) == summary[0]
    assert SassInstruction.from_dict(json.loads(json.dumps(ldg.to_dict()))) == ldg


def test_parse_cuobjdump() -> None:
    text = """
\tcode for sm_90
\t\tFunction : _Z1kPf
\t.headerflags\t@"EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;            /* 0x00000a00ff017b82 */
                                                                     /* 0x000fe20000000800 */
        /*0010*/              @P1 STG.E.U8 desc[UR6][R2.64], R0 ;      /* 0x0000000602007981 */
"""
    ins = parse_cuobjdump(text)["_Z1kPf"]
    assert [(i.offset, i.opcode, i.predicate) for i in ins] == [
        (0, "LDC", None),
        (0x10, "STG.E.U8", "@P1"),
    ]
    assert ins[1].operands == "desc[UR6][R2.64], R0"


@pytest.mark.parametrize(
    ("opcode", "expected"),
    [
        ("LDG.E.128", (("global", "load", 128),)),
        ("LDG.E.128.CONSTANT", (("global", "load", 128),)),
        ("LDG.E.LTC128B.64", (("global", "load", 64),)),
        ("LDG.E.U8", (("global", "load", 8),)),
        ("STG.E.S16", (("global", "store", 16),)),
        ("LD.E.64", (("generic", "load", 64),)),
        ("ST.E", (("generic", "store", 32),)),
        ("LDS", (("shared", "load", 32),)),
        ("LDS.U.128", (("shared", "load", 128),)),
        ("STS.64", (("shared", "store", 64),)),
        ("LDL.LU", (("local", "load", 32),)),
        ("STL.128", (("local", "store", 128),)),
        ("LDC.64", (("constant", "load", 64),)),
        ("ULDC.64", (("constant", "load", 64),)),
        ("ATOM.E.ADD.F32.FTZ.RN.STRONG.GPU", (("generic", "atomic", 32),)),
        ("ATOMG.E.CAS.64.STRONG.GPU", (("global", "atomic", 64),)),
        ("ATOMS.POPC.INC.32", (("shared", "atomic", 32),)),
        ("RED.E.ADD.STRONG.GPU", (("generic", "reduction", 32),)),
        ("REDG.E.ADD.F64.RN.STRONG.GPU", (("global", "reduction", 64),)),
        ("LDSM.16.M88.4", (("shared", "load", 128),)),
        ("LDSM.16.MT88.2", (("shared", "load", 64),)),
        ("LDGSTS.E.BYPASS.LTC128B.128", (("global", "load", 128), ("shared", "store", 128))),
        ("BAR.SYNC.DEFER_BLOCKING", ()),
        ("SHFL.BFLY", ()),
        ("REDUX.SUM", ()),
        ("FFMA", ()),
    ],
)
def test_classify(opcode: str, expected: tuple[tuple[str, str, int], ...]) -> None:
    assert classify(opcode) == tuple(MemoryOp(*e) for e in expected)  # type: ignore[arg-type]


def test_non_memory_opcodes_are_never_memory() -> None:
    assert {"BAR", "SHFL", "REDUX", "VOTE", "MEMBAR"} <= NON_MEMORY_OPCODES
    assert all(classify(op) == () for op in NON_MEMORY_OPCODES)


_OPCODES = st.sampled_from(["LDG.E.128", "STS.64", "FFMA", "IMAD.WIDE.U32", "BAR.SYNC", "LDS"])
_PREDS = st.sampled_from([None, "@P0", "@!P3", "@!PT", "@UP1", "@!UP0", "@PT"])
_OPERANDS = st.sampled_from(["", "R1, R2, R3", "desc[UR4][R2.64+0x10], R5", "[R3+UR7], RZ"])


@given(
    st.lists(st.tuples(_OPCODES, _PREDS, _OPERANDS, st.integers(1, 5000)), min_size=1, max_size=20)
)
def test_parse_nvdisasm_round_trip(rows: list[tuple[str, str | None, str, int]]) -> None:
    lines = ["//--------------------- .text.f --------------------------"]
    for n, (op, pred, operands, line) in enumerate(rows):
        lines.append(f'\t//## File "/x/f.cu", line {line}')
        guard = f"{pred} " if pred else ""
        lines.append(f"        /*{16 * n:04x}*/ {guard:>20}{op} {operands} ;")
    parsed = parse_nvdisasm("\n".join(lines))["f"]
    assert [(i.opcode, i.predicate, i.operands, i.line) for i in parsed] == [
        (op, pred, operands, line) for op, pred, operands, line in rows
    ]
    assert all(i.offset == 16 * n for n, i in enumerate(parsed))


def test_source_text(tmp_path: Path) -> None:
    f = tmp_path / "k.cu"
    f.write_text("first\nsecond\n")
    assert source_text(f, 2) == "second"
    assert source_text(str(f), 3) is None
    assert source_text(f, 0) is None
    assert source_text(tmp_path / "missing.cu", 1) is None
    assert source_text(None, 1) is None
    text = source_text(MULTI, mark_line(MULTI, "float4-load"))
    assert text is not None and text.strip().startswith("float4 x")
