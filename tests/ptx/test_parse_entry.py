"""gpuadvise.ptx.parser.parse_ptx_entry: a module parsed for one kernel (its entry's and callees'
bodies, the others' skipped), as the emulator reads a variant's module
(gpuadvise.trace.emulate.entry_only_parse)."""

from __future__ import annotations

import re

import pytest

from gpuadvise.ptx.cfg import build_program
from gpuadvise.ptx.errors import PtxParseError
from gpuadvise.ptx.parser import parse_ptx, parse_ptx_entry

HEAD = """
.version 8.0
.target sm_90
.address_size 64
.global .align 4 .u32 counter;
"""

# a kernel the emulator cannot parse (vector registers), before one it can, which calls a device
# function defined after it; a second device function no kernel calls
OTHER = """
.visible .entry other(.param .u64 p)
{
  .reg .v2 .b32 %v;
  { .reg .pred %q<3>;
  .shared .align 4 .b8 other_s[64];
  }
  ret;
}
"""
KERNEL = """
.func (.param .b32 r) twice(.param .b32 a);
.visible .entry k(.param .u64 out)
{
  .reg .b32 %r<4>;
  .reg .b64 %rd<3>;
  .shared .align 4 .b8 k_s[128];
  ld.param.u64 %rd1, [out];
  mov.u32 %r1, %tid.x;
  { .reg .pred %p1;
  setp.ne.u32 %p1, %r1, 0;
  selp.u32 %r2, 1, 0, %p1;
  }
  { // callseq 0, 0
  .param .b32 param0;
  st.param.b32 [param0+0], %r2;
  .param .b32 retval0;
  call.uni (retval0), twice, (param0);
  ld.param.b32 %r3, [retval0+0];
  }
  st.global.u32 [%rd1], %r3;
  ret;
}
.func (.param .b32 r) twice(.param .b32 a)
{
  .reg .b32 %t<3>;
  ld.param.u32 %t1, [a];
  add.s32 %t2, %t1, %t1;
  st.param.b32 [r+0], %t2;
  ret;
}
.func unused()
{
  .reg .v4 .b32 %w;
  ret;
}
"""


def _program(module, entry: str) -> list[str]:
    # a nested scope's register is renamed name~N by a counter over the module: the skipped
    # bodies' declarations are not counted
    p = build_program(module, entry)
    return [re.sub(r"~\d+", "~", repr(i)) for i in p.instrs]


def _parsable(text: str) -> str:
    """``text`` with its vector registers scalar (the same lines)."""
    return text.replace(".v2 .b32", ".b32").replace(".v4 .b32", ".b32")


def test_only_the_entry_and_its_callees_are_parsed() -> None:
    text = HEAD + OTHER + KERNEL
    with pytest.raises(PtxParseError):
        parse_ptx(text)  # the other kernel's and the unused function's bodies
    m = parse_ptx_entry(text, "k")
    assert m.functions["k"].body is not None and m.functions["twice"].body is not None
    assert m.functions["other"].body is None and m.functions["unused"].body is None
    assert m.entries() == ["k"]
    assert list(m.variables) == ["counter"]
    # the kernel's program (the callee inlined) is the whole module's
    assert _program(m, "k") == _program(parse_ptx(_parsable(text)), "k")
    assert any(i.opcode == "add.s32" for i in build_program(m, "k").instrs)


def test_a_kernel_not_in_the_module_reads_as_the_whole_module() -> None:
    text = _parsable(HEAD + KERNEL)
    assert parse_ptx_entry(text, "k").functions["unused"].body is None
    whole = parse_ptx_entry(text, "missing")
    assert whole.functions["unused"].body is not None  # every body: the whole parse
    with pytest.raises(PtxParseError):
        parse_ptx_entry(HEAD + OTHER, "missing")


def test_the_emulator_parses_the_entry_alone_inside_entry_only_parse() -> None:
    from gpuadvise.trace.emulate import _parse, entry_only_parse

    text = HEAD + OTHER + KERNEL
    with entry_only_parse():
        m = _parse(text, "k")
    assert m.functions["other"].body is None
    with pytest.raises(PtxParseError):
        _parse(text, "k")  # outside: the whole module (the rules read it again)
