"""gpuadvise.trace.sites: the lines a traced instruction is reported at, and the kernel body's
call of the same-file helper function it is inlined from (``call_line``)."""

from __future__ import annotations

from pathlib import Path

from gpuadvise.ptx.parser import Instr, parse_ptx
from gpuadvise.trace.access import AccessTrace, InstrInfo, Kind, Space, empty_records
from gpuadvise.trace.sites import instr_info

# a helper at lines 1-3 of k.cu inlined into the kernel at line 10 (its store at line 2), the
# kernel's own store at line 11, atomicAdd (file 2) inlined into the helper at line 3
PTX = """
.version 8.0
.target sm_90
.address_size 64
.visible .entry k(.param .u64 p)
{
    .reg .b32 %r<4>;
    .loc 1 10 5
    .loc 1 2 7, function_name $L__info_string1, inlined_at 1 10 5
    st.shared.u32 [%r1], %r2;
    .loc 1 3 7, function_name $L__info_string1, inlined_at 1 10 5
    .loc 2 112 3, function_name $L__info_string0, inlined_at 1 3 7
    atom.shared.add.u32 %r3, [%r1], 1;
    .loc 1 11 5
    st.shared.u32 [%r1], %r2;
    .loc 1 12 5
    .loc 2 112 3, function_name $L__info_string0, inlined_at 1 12 5
    atom.shared.add.u32 %r3, [%r1], 1;
    ret;
}
.file 1 "k.cu"
.file 2 "/usr/local/cuda/include/device_atomic_functions.hpp"
"""


def _infos() -> list[InstrInfo]:
    m = parse_ptx(PTX)
    body = [x for x in m.functions["k"].body or [] if isinstance(x, Instr)]
    return [
        instr_info(n, ins, m.files, Space.SHARED, Kind.STORE, 4)
        for n, ins in enumerate(body)
        if ins.opcode != "ret"
    ]


def test_a_same_file_helper_keeps_its_line_and_names_the_kernels_call() -> None:
    helper, atom, own, direct = _infos()
    assert (helper.file, helper.line, helper.site_line) == ("k.cu", 2, None)
    assert (helper.call_file, helper.call_line) == ("k.cu", 10)
    # toolkit code inside the helper: reported at the helper's line, called from line 10
    assert (atom.site_file, atom.site_line, atom.call_line) == ("k.cu", 3, 10)
    # the kernel's own code, and toolkit code called from the kernel's body: no call line
    assert (own.line, own.call_line) == (11, None)
    assert (direct.site_line, direct.call_line) == (12, None)


def test_call_site_of_and_save_load_keep_the_call_line(tmp_path: Path) -> None:
    infos = tuple(_infos())
    trace = AccessTrace(empty_records(0), infos, (0,), 1, (1, 1, 1), (32, 1, 1), "emulator")
    assert [trace.line_of(i.inst) for i in infos] == [("k.cu", n) for n in (2, 3, 11, 12)]
    assert [trace.call_site_of(i.inst) for i in infos] == [("k.cu", n) for n in (10, 10, 11, 12)]
    trace.save(tmp_path / "t.npz")
    assert AccessTrace.load(tmp_path / "t.npz").instructions == infos
