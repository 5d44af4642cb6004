"""A source file's bytes, the text the analysis reads from them, and back.

The analysis reads a source as UTF-8 with every line ending made ``\\n`` and every byte that is
not UTF-8 (a Latin-1 comment, say) made U+FFFD: the text the rules' diffs are made on.
:meth:`SourceBytes.encode` turns a changed text back into the file's bytes so that only what
changed changes: a line the change did not touch keeps its bytes and its own ending (CRLF, CR or
LF, mixed as they were); a changed line keeps the ending of the line it replaces, a new line takes
the ending of its neighbours, and the bytes that were not UTF-8 in a changed line are put back
where the change kept them. ``--fix`` writes with it (:mod:`gpuadvise.analyze.fix`).
"""

from __future__ import annotations

import difflib
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

__all__ = ["SourceBytes", "decode_source", "read_source"]

_EOL = re.compile(rb"\r\n|\r|\n")
_BAD = "\ufffd"


def _split(raw: bytes) -> list[tuple[bytes, bytes]]:
    """``raw`` as (line without its ending, its ending) pairs; the last has the ending ``b""``
    (the text after the last line break, often empty)."""
    lines: list[tuple[bytes, bytes]] = []
    pos = 0
    for m in _EOL.finditer(raw):
        lines.append((raw[pos : m.start()], m.group()))
        pos = m.end()
    lines.append((raw[pos:], b""))
    return lines


def _decode(line: bytes) -> tuple[str, list[bytes]]:
    """``line`` decoded as ``bytes.decode("utf-8", "replace")`` does, and the bytes each U+FFFD it
    made stands for (a U+FFFD that was in the file stands for its own bytes)."""
    parts: list[str] = []
    runs: list[bytes] = []
    pos = 0
    while True:
        try:
            text = line[pos:].decode("utf-8")
        except UnicodeDecodeError as err:
            good = line[pos : pos + err.start].decode("utf-8")
            for _ in range(good.count(_BAD)):
                runs.append(_BAD.encode())
            parts += [good, _BAD]
            runs.append(line[pos + err.start : pos + err.end])
            pos += err.end
            continue
        runs += [_BAD.encode()] * text.count(_BAD)
        parts.append(text)
        return "".join(parts), runs


def decode_source(raw: bytes) -> str:
    """The text the analysis reads from ``raw`` (as ``read_text(encoding="utf-8",
    errors="replace")`` does: UTF-8, U+FFFD for other bytes, every line ending ``\\n``)."""
    return "\n".join(_decode(content)[0] for content, _ in _split(raw))


@dataclass(frozen=True)
class SourceBytes:
    """A source file's bytes (``raw``) and the text the analysis reads from them (``text``)."""

    raw: bytes
    text: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "text", decode_source(self.raw))

    def encode(self, new_text: str) -> bytes:
        """The bytes of ``new_text`` (a changed :attr:`text`) as this file would hold them: see the
        module docstring."""
        if new_text == self.text:
            return self.raw
        old = _split(self.raw)
        old_text = [_decode(content)[0] for content, _ in old]
        new = new_text.split("\n")
        endings = Counter(eol for _, eol in old if eol)
        usual = endings.most_common(1)[0][0] if endings else b"\n"
        out: list[tuple[bytes, bytes]] = []
        matcher = difflib.SequenceMatcher(None, old_text, new, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                out += old[i1:i2]
                continue
            for k, line in enumerate(new[j1:j2]):
                if i2 > i1:  # replaced: pairwise, extra lines as the last one replaced
                    partner = old[min(i1 + k, i2 - 1)]
                    content = _encode_like(line, partner[0] if k < i2 - i1 else None)
                    out.append((content, partner[1] or _neighbour(old, i1, usual)))
                else:  # inserted
                    out.append((line.encode("utf-8"), _neighbour(old, i1, usual)))
        last = len(out) - 1
        return b"".join(
            content + (b"" if i == last else (eol or usual)) for i, (content, eol) in enumerate(out)
        )


def _neighbour(old: list[tuple[bytes, bytes]], i: int, usual: bytes) -> bytes:
    """The ending for a line put before old line ``i``: its previous line's, else its own."""
    for j in (i - 1, i):
        if 0 <= j < len(old) and old[j][1]:
            return old[j][1]
    return usual


def _encode_like(line: str, partner: bytes | None) -> bytes:
    """``line`` as UTF-8, its U+FFFD put back as the bytes they stood for in ``partner`` (the old
    line it replaces) when it has as many."""
    if partner is None or _BAD not in line:
        return line.encode("utf-8")
    runs = _decode(partner)[1]
    pieces = line.split(_BAD)
    if len(runs) != len(pieces) - 1:
        return line.encode("utf-8")
    out = [pieces[0].encode("utf-8")]
    for run, piece in zip(runs, pieces[1:], strict=True):
        out += [run, piece.encode("utf-8")]
    return b"".join(out)


def read_source(path: str | os.PathLike[str]) -> SourceBytes:
    """The file at ``path`` (a link followed) as :class:`SourceBytes`."""
    return SourceBytes(Path(path).read_bytes())
