"""The DWARF LEB128 decoders of the cubin line-table reader (gpuadvise/toolchain/lines.py) against
an encoder written from the DWARF 5 standard (section 7.6), on any integer."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from propkit import examples

from gpuadvise.toolchain.lines import _sleb, _uleb


def _encode(value: int, signed: bool) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        done = (value == 0 and not byte & 0x40) or (value == -1 and byte & 0x40)
        if not signed:
            done = value == 0
        if done:
            out.append(byte)
            return bytes(out)
        out.append(byte | 0x80)


@settings(max_examples=examples(300))
@given(st.integers(-(2**70), 2**70), st.binary(max_size=3), st.binary(max_size=3))
def test_signed_leb128_decodes_what_the_standard_encodes(
    value: int, head: bytes, tail: bytes
) -> None:
    data = head + _encode(value, signed=True) + tail
    assert _sleb(data, len(head)) == (value, len(data) - len(tail))


@settings(max_examples=examples(300))
@given(st.integers(0, 2**70), st.binary(max_size=3), st.binary(max_size=3))
def test_unsigned_leb128_decodes_what_the_standard_encodes(
    value: int, head: bytes, tail: bytes
) -> None:
    data = head + _encode(value, signed=False) + tail
    assert _uleb(data, len(head)) == (value, len(data) - len(tail))
