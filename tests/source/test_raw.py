"""gpuadvise.source.raw: a changed text back into the file's bytes, only the changed lines changed
(issue 21: --fix made every CRLF and CR an LF, and crashed on a Latin-1 comment)."""

from __future__ import annotations

import io
import re

from hypothesis import given, settings
from hypothesis import strategies as st
from propkit import examples

from gpuadvise.source.raw import SourceBytes, decode_source


def _as_python_reads(raw: bytes) -> str:
    """What ``Path.read_text(encoding="utf-8", errors="replace")`` gives."""
    return io.TextIOWrapper(io.BytesIO(raw), encoding="utf-8", errors="replace").read()


LINES = st.lists(
    st.tuples(
        st.one_of(
            st.binary(max_size=12).filter(lambda b: b"\r" not in b and b"\n" not in b),
            st.sampled_from(
                [b"int x;", "caf\u00e9 // \u00fc".encode(), b"// caf\xe9", b"\xff\xfe"]
            ),
        ),
        st.sampled_from([b"\n", b"\r\n", b"\r"]),
    ),
    max_size=8,
)


def _join(lines: list[tuple[bytes, bytes]], tail: bytes = b"") -> bytes:
    return b"".join(c + e for c, e in lines) + tail


@settings(max_examples=examples(300), deadline=None, derandomize=True)
@given(st.binary(max_size=64))
def test_the_text_is_what_the_analysis_reads(raw: bytes) -> None:
    assert decode_source(raw) == _as_python_reads(raw)
    assert SourceBytes(raw).encode(SourceBytes(raw).text) == raw


@settings(max_examples=examples(300), deadline=None, derandomize=True)
@given(LINES, st.integers(min_value=0, max_value=7), st.text(max_size=10).filter(
    lambda t: not any(c in t for c in "\r\n\ufffd")))  # fmt: skip
def test_only_the_changed_line_changes(lines: list[tuple[bytes, bytes]], at: int, new: str) -> None:
    raw = _join(lines, b"tail")
    src = SourceBytes(raw)
    text = src.text.split("\n")
    at = min(at, len(text) - 1)
    text[at] = new
    out = SourceBytes(raw).encode("\n".join(text))
    # the lines as the file holds them (b"\r" then b"\n" is one CRLF)
    cuts = re.split(rb"(\r\n|\r|\n)", raw)
    pieces = list(zip(cuts[::2], [*cuts[1::2], b""], strict=True))
    expect = b"".join((new.encode() if i == at else c) + e for i, (c, e) in enumerate(pieces))
    if text[at] == decode_source(pieces[at][0]):
        expect = raw  # no change at all
    assert out == expect


def test_line_endings_are_kept_line_by_line() -> None:
    raw = b"a\r\nb\r\nc\rd\ne"
    src = SourceBytes(raw)
    assert src.text == "a\nb\nc\nd\ne"
    assert src.encode("a\nB\nc\nd\ne") == b"a\r\nB\r\nc\rd\ne"
    # a line inserted takes its neighbours' ending; a line replaced by two, the replaced one's
    assert src.encode("a\nnew\nb\nc\nd\ne") == b"a\r\nnew\r\nb\r\nc\rd\ne"
    assert src.encode("a\nb\nc1\nc2\nd\ne") == b"a\r\nb\r\nc1\rc2\rd\ne"
    # the last line had no ending: a line after it gets one, the new last line none
    assert src.encode("a\nb\nc\nd\ne\nf") == b"a\r\nb\r\nc\rd\ne\r\nf"
    assert SourceBytes(b"x\r\ny\r\n").encode("x\ny\nz\n") == b"x\r\ny\r\nz\r\n"
    assert SourceBytes(b"x\ry\r").encode("x\nq\n") == b"x\rq\r"


def test_bytes_that_are_not_utf8_are_kept() -> None:
    raw = b"// caf\xe9 \xe0 la cr\xe8me\r\nint x = 1;\r\n// \xfc\r\n"
    src = SourceBytes(raw)
    assert src.text == "// caf\ufffd \ufffd la cr\ufffdme\nint x = 1;\n// \ufffd\n"
    assert src.encode(src.text.replace("x = 1", "x = 2")) == raw.replace(b"x = 1", b"x = 2")
    # a changed line with the same bytes that were not UTF-8: they are put back
    changed = src.text.replace("la cr", "LA CR")
    assert src.encode(changed) == raw.replace(b"la cr", b"LA CR")
