"""Issue 21, output people and CI can trust: user text (gate case names, kernel names, paths,
messages, source excerpts) in every output format, replayed from the review.

GitHub's runner executes a workflow command from any output line that starts, once stripped of
whitespace, with ``::``, or that holds ``##[command]``; a terminal obeys ESC sequences; rich read
``[...]`` as markup and ``:x:`` as an emoji code.
"""

from __future__ import annotations

import io
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from gate_fakes import SourceProvider
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from propkit import examples

from gpuadvise.cli.gate import gate_command
from gpuadvise.cli.main import main
from gpuadvise.items import ReportItem
from gpuadvise.report.console import SafeConsole
from gpuadvise.report.github import github_annotations
from gpuadvise.report.junit import junit_xml
from gpuadvise.report.markdown import items_markdown, md_table
from gpuadvise.report.safe_text import guard, one_line
from gpuadvise.report.sarif import sarif_dumps, sarif_log

KERNEL = """\
// gate: registers={regs} spill_bytes=0 occupancy=0.5 time_ms=1.0
__global__ void scale(float* out, const float* in, int n)
{{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * in[i];
}}
"""
# The review's case name, and the other things it found: rich markup, an emoji code, the legacy
# command form, a raw ESC sequence, a bidirectional override.
NASTY = (
    "x\n::error::inj\n::stop-commands::t r3[/] r3[red]x[/red] root:x:0 ##[error]lost "
    "\x1b[2J\x1b]0;title\x07 \u202eevil\r::warning::cr"
)
ESC_OR_C0 = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _command_lines(text: str) -> list[str]:
    """The lines of ``text`` (split as the runner splits them: LF, CR, CRLF) that would be
    workflow commands."""
    return [
        line
        for line in re.split(r"\r\n|\r|\n", text)
        if line.strip().startswith("::") or "##[" in line
    ]


def _assert_safe(text: str, *, own_commands: bool = False) -> None:
    found = _command_lines(text)
    if own_commands:  # --format github: only its own annotations, the user text escaped
        found = [ln for ln in found if not re.match(r"::(error|warning|notice)[ :]", ln)]
        assert all("##[" not in ln for ln in _command_lines(text)), text
    assert found == [], found
    assert not ESC_OR_C0.search(text.replace("\n", "").replace("\t", "")), repr(text)


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "k").mkdir()
    (tmp_path / "k" / "scale.cu").write_text(KERNEL.format(regs=32))
    name = json.dumps(NASTY)  # a TOML basic string: the same escapes
    (tmp_path / "gpuadvise.toml").write_text(
        '[gate]\nmetrics = ["registers", "spill_bytes", "occupancy"]\n\n'
        f'[[gate.cases]]\nname = {name}\nsource = "k/scale.cu"\nkernel = "scale"\n'
        "grid = 64\nblock = 256\nargs = { n = 16384 }\n"
    )
    monkeypatch.chdir(tmp_path)
    assert gate_command(update_baseline=True, provider=SourceProvider(), cwd=tmp_path) == 0
    (tmp_path / "k" / "scale.cu").write_text(KERNEL.format(regs=40))  # a regression
    return tmp_path


FILES = {"json": "o.json", "sarif": "o.sarif", "junit": "o.xml", "github": "o.gh",
         "markdown": "o.md", "html": "o.html"}  # fmt: skip


def test_gate_case_names_cannot_inject_workflow_commands(capsys, repo: Path) -> None:
    """The case name printed ``  ::error::inj`` as a line of the text table (the runner strips
    the leading spaces and runs it); ``r3[/]`` crashed rich (MarkupError)."""
    capsys.readouterr()
    formats = ["text", *(f"{f}={p}" for f, p in FILES.items())]
    assert gate_command(formats=formats, provider=SourceProvider(), cwd=repo) == 1
    out, err = capsys.readouterr()
    assert "REGRESSION" in out.upper() or "FAILED" in out
    _assert_safe(out)
    _assert_safe(err)
    for fmt, path in FILES.items():
        _assert_safe((repo / path).read_text(), own_commands=fmt == "github")
    # the name is shown, on one line, every character of it accounted for
    assert "x\\n::error::inj\\n::stop-commands::t r3[/] r3[red]x[/red] root:x:0 ##\\[error]" in out
    assert "r3[/] r3[red]x[/red] root:x:0" in out and "❌" not in out
    # machine formats keep the user's text exactly: a parser reads it back
    doc = json.loads((repo / "o.json").read_text())
    assert NASTY in json.dumps(doc, ensure_ascii=False) or any(
        c.get("case") == NASTY for c in doc.get("comparisons", [])
    )
    sarif = json.loads((repo / "o.sarif").read_text())
    results = sarif["runs"][0]["results"]
    assert results and all(r["properties"]["group"] == NASTY for r in results)
    # JUnit: names on one line, every control character shown
    suites = ET.fromstring((repo / "o.xml").read_text().encode()).findall("testsuite")
    assert [s.get("name") for s in suites] == [one_line(NASTY)]


@pytest.mark.parametrize("fmt", ["text", "github", "markdown", "json", "sarif", "junit", "html"])
def test_each_format_on_stdout_is_safe(capsys, repo: Path, fmt: str) -> None:
    capsys.readouterr()
    gate_command(formats=[fmt], provider=SourceProvider(), cwd=repo)
    out, err = capsys.readouterr()
    assert out.strip()
    _assert_safe(out, own_commands=fmt == "github")
    _assert_safe(err)


def test_rich_markup_and_emoji_are_text() -> None:
    buf = io.StringIO()
    con = SafeConsole(file=buf, width=200, markup=True, emoji=True)  # the caller cannot turn it on
    con.print("r3[/] r3[red]x[/red] root:x:0 :smile: ##[error]kept [bold]b[/bold]")
    assert buf.getvalue() == (
        "r3[/] r3[red]x[/red] root:x:0 :smile: ##\\[error]kept [bold]b[/bold]\n"
    )


def test_the_console_escapes_control_characters_and_guards_lines() -> None:
    buf = io.StringIO()
    con = SafeConsole(file=buf, width=200, force_terminal=True, color_system="standard")
    from rich.table import Table
    from rich.text import Text

    t = Table()
    t.add_column("case")
    t.add_row(Text("a\n::add-mask::x", style="red"))
    t.add_row("\x1b]0;title\x07 \x1b[2J\u202e")
    con.print(t)
    con.print(Text("::error::at the start", style="bold"))
    out = buf.getvalue()
    lines = re.split(r"\r\n|\r|\n", out)
    plain = [re.sub(r"\x1b\[[0-9;]*m", "", ln) for ln in lines]  # rich's own colour codes
    assert not any(p.strip().startswith("::") for p in plain), out
    assert "\\x1b]0;title" in out and "\\x1b[2J" in out and "\\u202e" in out
    assert not ESC_OR_C0.search(re.sub(r"\x1b\[[0-9;]*m", "", out).replace("\n", ""))


def test_an_escape_in_a_path_never_reaches_stderr_raw(capsys) -> None:
    capsys.readouterr()
    try:
        main(["analyze", "k\x1b[2J\x1b]0;pwned\x07\n::error::x.cu", "--no-trace"])
    except SystemExit as exc:
        assert exc.code == 2
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ")
    assert "\\x1b[2J" in err and "\\x1b]0;pwned\\x07" in err
    _assert_safe(err)


def test_log_messages_are_guarded(capsys) -> None:
    import logging

    from gpuadvise.report.safe_text import LogFormatter

    h = logging.StreamHandler(io.StringIO())
    h.setFormatter(LogFormatter("%(message)s"))
    r = logging.LogRecord(
        "x", logging.WARNING, "f", 1, "nvcc said:\n::error::x \x1b[2J", None, None
    )
    text = h.format(r)
    _assert_safe(text)


# --- property: arbitrary user text in names and paths ------------------------------------------

# Text rich in what matters: line breaks of every kind, command prefixes, ESC and other controls,
# rich markup and emoji codes, plus anything else.
PIECES = st.sampled_from(
    ["::", "##[", "error", "add-mask", "]", "[", "[/]", "[red]", ":x:", ":", "#", "\n", "\r",
     "\r\n", "\x85", "\u2028", "\x1b", "\x1b[31m", "\x07", "\x00", "\t", " ", "%", ",", "\u202e",
     "<", "&", "|", "x"]
)  # fmt: skip
USER_TEXT = st.one_of(
    st.lists(PIECES, min_size=1, max_size=12).map("".join),
    st.text(max_size=20),
)
SETTINGS = settings(
    max_examples=examples(200),
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)


def _items(name: str, path: str, message: str) -> list[ReportItem]:
    return [
        ReportItem("GATE-registers", "error", message, file=path, line=3, title=name, group=name,
                   name=name),
        ReportItem("GA201", "note", message, group=name),
        ReportItem("GATE-occupancy", "none", "ok " + message, group=name, name=name),
    ]  # fmt: skip


@SETTINGS
@given(USER_TEXT, USER_TEXT, USER_TEXT)
def test_no_user_text_makes_a_command_or_a_control_character(
    name: str, path: str, message: str
) -> None:
    items = _items(name, path, message)
    docs = {
        "github": github_annotations(items, notes=[message]),
        "markdown": items_markdown(items, title=name, notes=[message]),
        "table": md_table(["case", "why"], [[name, message], [path, name]]),
        "junit": junit_xml(items, name=name, notes=[message]),
        "sarif": sarif_dumps(sarif_log(items, notifications=[message])),
    }
    for fmt, doc in docs.items():
        _assert_safe(doc, own_commands=fmt == "github")
    # the machine formats read back the user's text, exactly or (XML) with controls shown
    sarif = json.loads(docs["sarif"])
    assert sarif["runs"][0]["results"][0]["message"]["text"] == message
    root = ET.fromstring(docs["junit"].encode())
    assert root.get("name") == one_line(name).replace("\ufffe", "?").replace("\uffff", "?")


@SETTINGS
@given(USER_TEXT, st.sampled_from(["text", "markdown", "xml", "html", "json", "github", "ansi"]))
def test_guard_is_idempotent_and_complete(text: str, fmt: str) -> None:
    once = guard(text, fmt)  # type: ignore[arg-type]
    assert guard(once, fmt) == once  # type: ignore[arg-type]
    if fmt in ("text", "markdown", "xml", "html"):
        assert [ln for ln in _command_lines(once) if ln] == []


def test_a_json_document_keeps_its_whitespace_and_escapes_every_other_control() -> None:
    doc = '{\n\t"a": "x\x1by\x85z\u2028\u202e",\r\n "b": "##[error]"\n}'
    out = guard(doc, "json")
    assert out == '{\n\t"a": "x\\u001by\\u0085z\\u2028\\u202e",\r\n "b": "##\\u005berror]"\n}'
    assert json.loads(out) == {"a": "x\x1by\x85z\u2028\u202e", "b": "##[error]"}


@SETTINGS
@given(USER_TEXT)
def test_the_console_never_crashes_nor_passes_user_text_through(text: str) -> None:
    from rich.table import Table

    buf = io.StringIO()
    con = SafeConsole(file=buf, width=120)
    t = Table()
    t.add_column(text)
    t.add_row(text, text)
    con.print(text)
    con.print(t)
    con.print(one_line(text) + " done")
    _assert_safe(buf.getvalue())
