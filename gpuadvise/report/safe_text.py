"""User text in what gpuadvise prints and writes: the one place every renderer makes it safe.

User text is whatever a user, or a pull request, controls: gate case names, kernel names, paths,
messages that quote them, source excerpts, compiler output, rule files' documentation. Two things
obey characters in it:

- a terminal (and a CI log viewer) obeys control characters: ESC sequences move the cursor,
  rewrite or hide lines, set the window title; a bidirectional override reorders what is shown;
- GitHub Actions' runner executes workflow commands from any line of a step's stdout or stderr: a
  line that starts, once stripped of whitespace, with ``::`` (``::error::``, ``::add-mask::``,
  ``::stop-commands::``), or that holds ``##[command]`` anywhere (the legacy form). It splits
  lines at LF and at CR.

So every renderer passes its document through :func:`guard` with its format, once, at the end: a
line can no longer start with ``::`` (a backslash, or in XML and HTML a character reference, goes
before it), ``##[`` is broken everywhere (``##\\[``, ``##&#91;``, ``##\\u005b``), and control
characters that only user text can bring are escaped in the format's own way (``\\x1b`` shown as
text; ``\\u001b`` in JSON). Places that lay out one value on one line (a table cell, a name, an
error message) first pass it through :func:`one_line`, which shows line breaks and every other
control character as escapes (``\\n``, ``\\x1b``, ``\\u202e``). JSON, SARIF and JUnit keep the
values themselves: a parser reads back exactly the user's text.

The terminal (rich) gets the same through :class:`gpuadvise.report.console.SafeConsole`, which
escapes control characters in every piece of text before rich adds its own colour codes, and
guards the lines it writes.
"""

from __future__ import annotations

import logging
import re
from typing import Literal

__all__ = ["Format", "LogFormatter", "controls", "guard", "one_line"]

Format = Literal["text", "ansi", "markdown", "json", "xml", "html", "github"]

# C0 and C1 controls, DEL, the line and paragraph separators, and the bidirectional controls
# (U+061C, U+200E/F, U+202A-U+202E, U+2066-U+2069): nothing a report writes itself.
_NOT_C0 = "\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069"
_CONTROL_CHARS = "\x00-\x1f" + _NOT_C0
_CONTROL = re.compile(f"[{_CONTROL_CHARS}]")
# _CONTROL but TAB, LF and CR: what a JSON document may not hold raw (an indented one has a line
# feed on every line: each a call of the replacement function, were they matched)
_JSON_CONTROL = re.compile(f"[\x00-\x08\x0b\x0c\x0e-\x1f{_NOT_C0}]")
_SHORT = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
# What a line may start with before ``::`` and still be a workflow command: whitespace (the
# runner trims it; Python's idea of whitespace is the wider one), and colour codes to be safe.
_LINE_START = re.compile(r"(\A|\r\n|\r|\n)((?:\x1b\[[0-9;]*m|[^\S\r\n])*):(?=:)")


def _escape(c: str) -> str:
    if c in _SHORT:
        return _SHORT[c]
    n = ord(c)
    return f"\\x{n:02x}" if n < 0x100 else f"\\u{n:04x}"


def _json_escape(c: str) -> str:
    return c if c in "\t\n\r" else f"\\u{ord(c):04x}"


def _markup_escape(c: str, fmt: str) -> str:
    """XML: C0 controls are not even allowed as character references (shown as escapes), the
    others are written as references; HTML: all shown as escapes (a reference to a C1 control
    means a Windows-1252 character there). A CR is a reference in both (a parser reads it back;
    a CI log does not break the line there)."""
    if c in "\t\n":
        return c
    if c == "\r":
        return "&#13;"
    if fmt == "xml" and ord(c) >= 0x7F:
        return f"&#x{ord(c):x};"
    return _escape(c)


def controls(text: str, keep: str = "") -> str:
    """``text`` with every control character but those in ``keep`` shown as an escape (``\\x1b``,
    ``\\n``, ``\\u202e``). CRLF becomes LF first when ``keep`` holds LF."""
    if "\n" in keep:
        text = text.replace("\r\n", "\n")
    return _CONTROL.sub(lambda m: m.group() if m.group() in keep else _escape(m.group()), text)


def one_line(text: object) -> str:
    """User text for a place that holds one line (a name, a path, a table cell, an error
    message): line breaks, tabs and every other control character shown as escapes."""
    return controls(str(text))


def guard(document: str, fmt: Format) -> str:
    """``document``, rendered in ``fmt``, made safe to print or to write (see the module
    docstring). ``text``: plain text; ``ansi``: text with colour codes (rich has escaped the
    control characters of the text itself); ``github``: workflow commands, whose own ``::`` stay.
    Idempotent."""
    if fmt == "json":
        # raw TAB, LF and CR are JSON's own whitespace (json.dumps escapes them in strings); the
        # others can only be inside a string, where \uXXXX reads back the same character
        return _JSON_CONTROL.sub(lambda m: _json_escape(m.group()), document).replace(
            "##[", "##\\u005b"
        )
    if fmt in ("xml", "html"):
        document = _CONTROL.sub(lambda m: _markup_escape(m.group(), fmt), document)
        document = document.replace("##[", "##&#91;")
        return _LINE_START.sub(lambda m: m.group(1) + m.group(2) + "&#58;", document)
    if fmt != "ansi":
        document = controls(document, keep="\t\n")
    document = document.replace("##[", "##\\[")
    if fmt == "github":
        return document
    return _LINE_START.sub(lambda m: m.group(1) + m.group(2) + "\\:", document)


class LogFormatter(logging.Formatter):
    """Log records on stderr (``-v``) as safe text: a message may quote a path or compiler
    output."""

    def format(self, record: logging.LogRecord) -> str:
        return guard(super().format(record), "text")
