"""gpuadvise.ptx.dataflow: which memory instructions take their address from loaded data, on
hand-written PTX whose answer is read off the code."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gpuadvise.ptx.cfg import build_program
from gpuadvise.ptx.dataflow import data_addressed
from gpuadvise.ptx.parser import parse_ptx

HEAD = """
.version 8.0
.target sm_90
.address_size 64
"""

GATHER = (
    HEAD
    + """
.visible .entry g(.param .u64 col, .param .u64 x, .param .u64 y, .param .u64 lut)
{
  .reg .b32 %r<9>;
  .reg .b64 %rd<16>;
  .reg .f32 %f<3>;
  ld.param.u64 %rd1, [col];
  ld.param.u64 %rd2, [x];
  ld.param.u64 %rd3, [y];
  cvta.to.global.u64 %rd4, %rd1;
  cvta.to.global.u64 %rd5, %rd2;
  cvta.to.global.u64 %rd6, %rd3;
  mov.u32 %r1, %tid.x;
  mov.u32 %r2, %ctaid.x;
  mov.u32 %r3, %ntid.x;
  mad.lo.s32 %r4, %r2, %r3, %r1;
  mul.wide.s32 %rd7, %r4, 4;
  add.s64 %rd8, %rd4, %rd7;
  ld.global.u32 %r5, [%rd8];
  mul.wide.s32 %rd9, %r5, 4;
  add.s64 %rd10, %rd5, %rd9;
  ld.global.f32 %f1, [%rd10];
  add.s64 %rd11, %rd6, %rd7;
  st.global.f32 [%rd11], %f1;
  ld.const.u32 %r6, [lut];
  mul.wide.s32 %rd12, %r6, 4;
  add.s64 %rd13, %rd5, %rd12;
  ld.global.f32 %f2, [%rd13];
  atom.global.add.u32 %r7, [%rd8], 1;
  mul.wide.s32 %rd14, %r7, 4;
  add.s64 %rd15, %rd6, %rd14;
  st.global.f32 [%rd15], %f2;
  ret;
}
"""
)


def _memory(text: str, entry: str) -> dict[str, bool]:
    p = build_program(parse_ptx(text), entry)
    data = data_addressed(p.instrs)
    out = {}
    for i, ins in enumerate(p.instrs):
        if ins.base in ("ld", "st", "atom") and "param" not in ins.mods:
            key = f"{ins.opcode} {ins.operands[0] if ins.base == 'st' else ins.operands[1]}"
            out[key] = i in data
    return out


def test_gathers_and_scatters_by_data_and_nothing_else() -> None:
    got = _memory(GATHER, "g")
    # col[i], y[i], the atomic on col[i]: addresses from the thread index: not data
    assert got["ld.global.u32 Addr(base=Reg(name='%rd8'), offset=0)"] is False
    assert got["st.global.f32 Addr(base=Reg(name='%rd11'), offset=0)"] is False
    assert got["atom.global.add.u32 Addr(base=Reg(name='%rd8'), offset=0)"] is False
    # x[col[i]]: a gather by data
    assert got["ld.global.f32 Addr(base=Reg(name='%rd10'), offset=0)"] is True
    # x[lut]: a constant table is not data
    assert got["ld.global.f32 Addr(base=Reg(name='%rd13'), offset=0)"] is False
    # y[old] with old an atomic's result: a scatter by data
    assert got["st.global.f32 Addr(base=Reg(name='%rd15'), offset=0)"] is True


LOOP = (
    HEAD
    + """
.visible .entry w(.param .u64 ptr, .param .u64 val)
{
  .reg .pred %p<2>;
  .reg .b32 %r<6>;
  .reg .b64 %rd<8>;
  .reg .f32 %f<2>;
  ld.param.u64 %rd1, [ptr];
  ld.param.u64 %rd2, [val];
  mov.u32 %r1, %tid.x;
  mul.wide.u32 %rd3, %r1, 4;
  add.s64 %rd4, %rd1, %rd3;
  ld.global.u32 %r2, [%rd4];
  ld.global.u32 %r3, [%rd4+4];
$L_loop:
  mul.wide.s32 %rd5, %r2, 4;
  add.s64 %rd6, %rd2, %rd5;
  ld.global.f32 %f1, [%rd6];
  add.s32 %r2, %r2, 1;
  setp.lt.s32 %p1, %r2, %r3;
  @%p1 bra $L_loop;
  ret;
}
"""
)


def test_a_loop_counter_started_from_a_loaded_bound_is_data() -> None:
    """``for (j = ptr[i]; j < ptr[i + 1]; j++) val[j]``: the walk's start comes from the data (the
    analysis is about where addresses come from; the trace tells a contiguous walk apart)."""
    got = _memory(LOOP, "w")
    assert got["ld.global.u32 Addr(base=Reg(name='%rd4'), offset=0)"] is False
    assert got["ld.global.f32 Addr(base=Reg(name='%rd6'), offset=0)"] is True


def _sweeps(instrs: list) -> frozenset[str]:
    """data_registers' definition: every definition swept until none changes."""
    from gpuadvise.ptx.dataflow import _NO_DEST, _is_data_source, _regs

    defs = []
    for ins in instrs:
        if ins.operands and ins.base not in _NO_DEST and (dest := tuple(_regs(ins.operands[0]))):
            srcs = tuple(r for op in ins.operands[1:] for r in _regs(op))
            defs.append((dest, srcs, _is_data_source(ins)))
    data: set[str] = set()
    changed = True
    while changed:
        changed = False
        for dest, srcs, seed in defs:
            if (seed or any(s in data for s in srcs)) and not set(dest) <= data:
                data.update(dest)
                changed = True
    return frozenset(data)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 11), st.integers(0, 11), st.integers(0, 11),
                          st.sampled_from(["add", "ld", "ldp", "shfl"])), max_size=40))  # fmt: skip
def test_data_registers_is_the_least_closed_set_in_any_order(
    rows: list[tuple[int, int, int, str]],
) -> None:
    """Definitions in any text order (a value used above the load that makes it data, as a loop
    carries it): the worklist's set is the sweeps'."""
    from gpuadvise.ptx.dataflow import data_registers

    lines = []
    for d, a, b, kind in rows:
        if kind == "add":
            lines.append(f"add.s32 %r{d}, %r{a}, %r{b};")
        elif kind == "ld":
            lines.append(f"ld.global.u32 %r{d}, [%rd{a}];")
        elif kind == "ldp":
            lines.append(f"ld.param.u32 %r{d}, [p];")
        else:  # two destinations
            lines.append(f"shfl.sync.down.b32 %r{d}|%p{b}, %r{a}, 1, 31, -1;")
    text = (
        HEAD
        + ".visible .entry k(.param .u32 p)\n{\n.reg .pred %p<12>;\n.reg .b32 %r<12>;\n"
        + ".reg .b64 %rd<12>;\n"
        + "\n".join(lines)
        + "\nret;\n}\n"
    )
    instrs = build_program(parse_ptx(text), "k").instrs
    assert data_registers(instrs) == _sweeps(list(instrs))
