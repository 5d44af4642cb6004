"""nvdisasm's life-range table read per instruction (gpuadvise.toolchain.liveness): the
hand-written function of tests/livekit.py, and the toolkit's own output on a compiled kernel."""

from __future__ import annotations

import re
from pathlib import Path

import livekit
import pytest

from gpuadvise.errors import KernelNotFoundError, ToolchainError
from gpuadvise.toolchain.liveness import CLASSES, life_ranges, parse_life_ranges


def test_the_table_is_read_row_by_row():
    table = parse_life_ranges(livekit.table_text())["k"]
    assert table.columns == ((0, 1, 2, 3, 4, 5, 6, 7), (0,), (), ())
    assert [r.offset for r in table.rows] == [16 * i for i in range(16)]
    assert [r.counts[0] for r in table.rows] == livekit.GPR
    assert [r.counts[1] for r in table.rows] == livekit.PRED
    assert [r.marks[0] for r in table.rows] == [g for _t, g, _p in livekit.ROWS]
    assert [r.marks[1] for r in table.rows] == [p for _t, _g, p in livekit.ROWS]
    assert table.rows[11].text == "@P0 BRA `(.L_x_0)"
    # labels name the instruction that follows them
    assert table.labels == {"k": 0, ".L_x_0": 0x80, ".L_x_1": 0xF0}
    assert table.register_name(0, 4) == "R4" and table.register_name(1, 0) == "P0"
    assert table.rows[7].live(0) == [1, 2, 3, 4, 5, 6, 7]


def test_a_table_of_unknown_classes_is_refused():
    text = livekit.table_text().replace("| PRED|", "| WHAT|")
    with pytest.raises(ToolchainError, match="cannot read nvdisasm's life-range table"):
        parse_life_ranges(text)


def test_several_functions_keep_their_own_rows():
    text = livekit.table_text("a") + livekit.table_text("b", gpr=[9] * 16)
    tables = parse_life_ranges(text)
    assert sorted(tables) == ["a", "b"]
    assert [r.counts[0] for r in tables["a"].rows] == livekit.GPR
    assert {r.counts[0] for r in tables["b"].rows} == {9}


@pytest.mark.toolkit
@pytest.mark.usefixtures("compile_cache")
def test_the_toolkits_table_counts_its_own_marks(tmp_path: Path) -> None:
    from gpuadvise.toolchain import (
        CompileOptions,
        compile_source,
        find_toolchain,
        select_compiled_kernel,
    )

    tc = find_toolchain()
    if tc.nvdisasm is None:
        pytest.skip("no nvdisasm")
    src = tmp_path / "pair.cu"
    src.write_text(
        'extern "C" __global__ void pair(const double* a, double* b, int n) {\n'
        "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "    if (i < n) b[i] = a[i] * 2.0 + a[i + 1];\n"
        "}\n"
    )
    module = compile_source(src, CompileOptions(), tc)
    kernel = select_compiled_kernel(module, "pair")
    table = life_ranges(module.cubin_path, kernel.mangled, tc)
    assert table.rows and set(CLASSES) == {"GPR", "PRED", "UGPR", "UPRED"}
    for row in table.rows:
        for cls in range(4):
            assert row.counts[cls] == len(row.live(cls)), row
    # a 64-bit value is two registers: the doubles' loads write two columns each
    load = next(r for r in table.rows if r.text.startswith("LDG.E.64"))
    dest = int(re.match(r"LDG\.E\.64\S* R(\d+)", load.text).group(1))
    cols = table.columns[0]
    assert load.marks[0][cols.index(dest)] in "^x" and load.marks[0][cols.index(dest + 1)] in "^x"
    # the output is kept beside the cubin and read back the same
    from gpuadvise.toolchain import liveness, sass

    liveness._cached.cache_clear()
    sass._texts.clear()
    assert life_ranges(module.cubin_path, kernel.mangled, tc) == table
    with pytest.raises(KernelNotFoundError):
        life_ranges(module.cubin_path, "nope", tc)


def test_without_nvdisasm_the_reason_is_one_line(tmp_path: Path) -> None:
    from gpuadvise.toolchain.find import Toolchain

    cubin = tmp_path / "k.cubin"
    cubin.write_bytes(b"\x7fELF")
    tc = Toolchain(Path("nvcc"), Path("ptxas"), None, Path("cuobjdump"), "13.0", None, tmp_path)
    with pytest.raises(ToolchainError, match="nvdisasm was not found"):
        life_ranges(cubin, "k", tc)
