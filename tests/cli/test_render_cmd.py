"""``gpuadvise render FILE --format FMT``: a saved analysis rendered again, as ``analyze``
rendered it (issue 30: the report as one object), and its one-line errors (exit 2)."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from subprocess import CompletedProcess

import pytest
from clikit import cli, cli_run, one_error

from gpuadvise.report_types import REPORT_VERSION, AnalysisReport

KERNEL = """\
__global__ void scale(float* out, const float* in, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = 2.0f * in[i];
}
"""
LAUNCH = ("--grid", "4", "--block", "256", "--arg", "n=1000", "--gpu", "H100")
FORMATS = ("json", "html", "sarif", "junit", "github", "markdown")


@pytest.fixture(scope="module")
def analysed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, CompletedProcess[str]]:
    """One analysis of scale.cu, made once for the module (an analysis per test was a compile,
    a disassembly and the rules six times over): the terminal report on stdout and every
    format by the same run (same timings), ``a.<fmt>`` and the whole report ``a.report``, in a
    folder of the module's. (The folder, the run: its stdout the terminal report.)"""
    folder = tmp_path_factory.mktemp("saved")
    (folder / "scale.cu").write_text(KERNEL)
    targets = [f"--format={fmt}=a.{fmt}" for fmt in (*FORMATS, "report")]
    with contextlib.chdir(folder):
        r = cli_run(
            "analyze", "scale.cu", "--no-trace", "--no-cache", *LAUNCH, "--format", "text",
            *targets,
        )  # fmt: skip
    return folder, r


@pytest.fixture
def saved(analysed: tuple[Path, CompletedProcess[str]], monkeypatch: pytest.MonkeyPatch) -> Path:
    """The module's analysis (:func:`analysed`): its folder, the current folder."""
    folder, run = analysed
    assert run.returncode == 0, run.stderr
    monkeypatch.chdir(folder)
    return folder


def test_a_saved_json_renders_the_page_analyze_wrote(capsys, saved: Path) -> None:  # type: ignore[no-untyped-def]
    code, out, err = cli(capsys, "render", "a.json", "--format", "html", "-o", "b.html")
    assert (code, out, err) == (0, "", "")
    assert (saved / "b.html").read_text() == (saved / "a.html").read_text()
    code, out, _ = cli(capsys, "render", "a.json", "--format", "json")
    assert code == 0 and out == (saved / "a.json").read_text()


def test_a_saved_report_renders_every_format_as_analyze_wrote_it(capsys, saved: Path) -> None:  # type: ignore[no-untyped-def]
    for fmt in FORMATS:
        code, _, err = cli(capsys, "render", "a.report", f"--format={fmt}=b.{fmt}")
        assert code == 0, err
        assert (saved / f"b.{fmt}").read_text() == (saved / f"a.{fmt}").read_text(), fmt


def test_the_report_round_trips_through_json(saved: Path) -> None:
    data = json.loads((saved / "a.report").read_text())
    report = AnalysisReport.from_dict(data)
    assert report.kernel == "scale" and report.kernel_lines == (1, 5)
    assert report.sources[str(saved / "scale.cu")] == tuple(KERNEL.splitlines())
    assert len(report.sweeps) == 3 and report.rules
    assert AnalysisReport.from_dict(json.loads(json.dumps(report.to_dict()))) == report


@pytest.mark.parametrize(
    ("content", "words"),
    [
        (None, "does not exist"),
        ("not json {", "is not JSON"),
        ('{"a": 1}', "is not a gpuadvise analysis report"),
        ("[1, 2]", "is not a gpuadvise analysis report"),
        ('{"schema_version": 99, "kernel": {"name": "k"}}', "schema version 99 is newer"),
        (
            json.dumps({"kind": "gpuadvise-analysis-report", "report_version": REPORT_VERSION + 1}),
            f"report version {REPORT_VERSION + 1} is newer",
        ),
    ],
)
def test_what_is_not_a_report_is_one_line(
    capsys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: str | None, words: str
) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    if content is not None:
        Path("r.json").write_text(content)
    code, out, err = cli(capsys, "render", "r.json", "--format", "html")
    assert code == 2 and out == ""
    assert words in one_error(err)


def test_an_unknown_format_lists_the_known_ones(capsys, saved: Path) -> None:  # type: ignore[no-untyped-def]
    from gpuadvise.report.renderers import RENDERERS

    code, out, err = cli(capsys, "render", "a.json", "--format", "pdf")
    line = one_error(err)
    assert code == 2 and out == "" and "unknown --format 'pdf'" in line
    assert ", ".join(RENDERERS) in line
    code, _, err = cli(capsys, "render", "a.json")
    assert code == 2 and "render needs a --format" in one_error(err)


def test_render_never_writes_over_the_report_it_reads(capsys, saved: Path) -> None:  # type: ignore[no-untyped-def]
    before = (saved / "a.json").read_text()
    code, _, err = cli(capsys, "render", "a.json", "--format", "html", "-o", "a.json")
    assert code == 2 and (saved / "a.json").read_text() == before
    one_error(err)


def test_the_terminal_text_renders_again_from_a_saved_report(
    capsys, saved: Path, analysed: tuple[Path, CompletedProcess[str]]
) -> None:  # type: ignore[no-untyped-def]
    """``text`` is a renderer like the others: a saved report prints the terminal report
    ``analyze`` printed, byte for byte (the summary names the command that made it)."""
    run = analysed[1]
    assert run.returncode == 0, run.stderr
    shown = run.stdout
    assert shown.startswith("scale  scale.cu  grid 4 x block 256") and "Summary: " in shown
    code, out, err = cli(capsys, "render", "a.report", "--format", "text")
    assert (code, err) == (0, "") and out == shown
    # a plain analyze --json document: the same report, its notes all with the findings'
    code, out, err = cli(capsys, "render", "a.json", "--format", "text")
    assert code == 0, err
    assert out.splitlines()[0] == shown.splitlines()[0] and "Details" in out


def test_a_format_the_report_kind_lacks_is_one_line(capsys, saved: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The analysis and gate registries list the same formats today; a format only one of them
    has is refused for the other kind of report with the formats it does have, not a KeyError."""
    from gpuadvise.report import renderers

    monkeypatch.setitem(renderers.GATE_RENDERERS, "pdf", "gpuadvise.report.gate_formats:gate_json")
    code, out, err = cli(capsys, "render", "a.json", "--format", "pdf")
    line = one_error(err)
    assert code == 2 and out == "" and "an analysis report has no pdf format" in line
    assert "use one of " + ", ".join(renderers.RENDERERS) in line
