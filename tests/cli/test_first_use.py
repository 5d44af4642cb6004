"""What a CUDA developer sees on first use (issue 32, "First use"), replayed: the terminal
report's order and last line, wrapping, compiler errors, ``explain``, the CI switches and
formats, the HTML badges, the devices' units."""

from __future__ import annotations

import contextlib
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from clikit import cli_run, environ

from gpuadvise.report.console import wrap_line

ROOT = Path(__file__).resolve().parents[2]
REDUCE = ROOT / "kernels" / "reduction" / "reduce.cu"


@pytest.fixture(scope="module")
def env(compile_cache: Path) -> dict[str, str]:
    return {**os.environ, "GPUADVISE_CACHE_DIR": str(compile_cache)}


def gpuadvise(
    env: dict[str, str], *args: str, cwd: Path = ROOT, process: bool = False
) -> subprocess.CompletedProcess[str]:
    """``gpuadvise ARGS`` with environment ``env`` in ``cwd``: in this process (``cli_run``),
    or with ``process`` as ``python -m gpuadvise`` (what only a process shows: -v's logging,
    which ``logging.basicConfig`` sets up once per process)."""
    if process:
        return subprocess.run(
            [sys.executable, "-m", "gpuadvise", *args],
            capture_output=True,
            text=True,
            env=env,
            cwd=cwd,
        )
    with environ(env), contextlib.chdir(cwd):
        return cli_run(*args)


@pytest.fixture(scope="module")
def reduce2_text(env: dict[str, str]) -> str:
    r = gpuadvise(env, "analyze", str(REDUCE.relative_to(ROOT)), "-k", "reduce2", "--gpu", "H100")
    assert r.returncode == 0, r.stderr
    return r.stdout


# ---------------------------------------------------------------------------------------------
# The terminal report: findings first, one summary line last


@pytest.mark.toolkit
def test_findings_come_first_ranked_cause_above_symptom(reduce2_text: str) -> None:
    lines = reduce2_text.splitlines()
    # the header first (printed before the trace, issue 31): the launch, then its resources,
    # occupancy and waves, three lines; then the findings
    assert [ln.split()[0] for ln in lines[1:4]] == ["Resources", "Occupancy", "Waves"]
    assert lines[5] == "Findings, ranked (3)"
    heads = [ln for ln in lines if ln[:1].isdigit() and ". GA" in ln]
    # GA202's sequential addressing rewrites GA201's line: the cause is right above it. GA206
    # comes first since its variant is traced (its launch spec is found, s11-hist): ~3.1x on the
    # H100 model, 3.44x measured on an H200 (docs/data/accuracy_h200_2026-11-30_kernels_round7.json)
    assert [h.split()[1] for h in heads] == ["GA206", "GA202", "GA201"]
    assert lines.index(heads[0]) == 6
    # the model tables come after every finding
    assert lines.index("Details") > lines.index(heads[-1])
    assert lines.index("Memory instructions per source line (SASS)") > lines.index("Details")


@pytest.mark.toolkit
def test_the_last_line_sums_up_and_names_the_next_command(reduce2_text: str) -> None:
    last = reduce2_text.rstrip("\n").split("\n\n")[-1].replace("\n", " ")
    last = " ".join(last.split())
    # GA201 is a note on reduce2 since the execution model (issue 29): it bounds the gain of
    # removing the bank conflicts at 1.01x on an H100 (the launch is bound by its dependent
    # chain), and a warning worth <= 1.05x is a note (minor-speedup); this said "3 warnings"
    assert last.startswith(
        "Summary: 2 warnings, 1 note (1 automatic fix); top: GA206 one-element-per-thread"
    )
    assert "at reduce.cu:28" in last
    cmd = "gpuadvise analyze kernels/reduction/reduce.cu -k reduce2 --gpu H100 --diff"
    assert f"Next: `{cmd}`" in last


@pytest.mark.toolkit
def test_source_columns_hide_expect_markers_and_unverified_fixes_say_so(reduce2_text: str) -> None:
    details = reduce2_text[reduce2_text.index("Details") :]
    assert "sdata[index] += sdata[index + s];" in details
    assert "// expect:" not in details
    # a diff is the exact change: its context lines keep the marker
    assert "// expect: GA202" in reduce2_text[: reduce2_text.index("Details")]
    assert "fix (automatic, unverified; int4 k=2):" in reduce2_text
    assert "automatic-and-verified" not in reduce2_text


def test_wrapping_is_at_spaces_with_a_hanging_indent() -> None:
    prose = "   evidence: " + ", ".join(f"metric_{i} = {i}.5 (>= 1)" for i in range(12))
    out = wrap_line(prose, 60)
    assert len(out) > 1 and all(len(x) <= 60 for x in out)
    assert out[0].startswith("   evidence: metric_0")
    assert all(x.startswith(" " * 13) and x[13] != " " for x in out[1:])
    assert " ".join(x.strip() for x in out) == prose.strip()  # no word cut
    head = "1. GA201 bank-conflicts [warning] " + "very/long/path/" * 6 + "k.cu:34"
    assert wrap_line(head, 40)[1].startswith("   ")
    code = "   +        const unsigned ga206_stride = blockDim.x * gridDim.x + some_offset_value;"
    wrapped = wrap_line(code, 50, code=True)
    assert wrapped[0].startswith("   +        const") and all(len(x) <= 50 for x in wrapped)
    assert all(x.startswith(" " * 16) for x in wrapped[1:])
    assert wrap_line("short", 60) == ["short"]


# ---------------------------------------------------------------------------------------------
# Compiler errors: a one-line summary, then nvcc's output as nvcc printed it


@pytest.mark.toolkit
def test_a_compile_error_is_one_line_then_nvccs_output_verbatim(env: dict[str, str]) -> None:
    broken = ROOT / "tests" / "cuda" / "broken.cu"
    r = gpuadvise(env, "analyze", str(broken), "--grid", "1", "--block", "32", "--gpu", "H100")
    assert r.returncode == 2 and "Traceback" not in r.stderr
    first, *rest = r.stderr.splitlines()
    assert first.startswith(f"error: {broken} does not compile for sm_90 (1 error; the first: ")
    assert 'broken.cu:4: identifier "not_declared_anywhere" is undefined' in first
    assert first.endswith("; fix the errors nvcc reports below")
    # nvcc's lines as it wrote them: its file(line) form, the source line, the caret under it
    assert f'{broken}(4): error: identifier "not_declared_anywhere" is undefined' in rest
    assert "    x[i] = not_declared_anywhere * 2.0f;" in rest
    assert any(line.strip() == "^" for line in rest)


# ---------------------------------------------------------------------------------------------
# explain: rendered, and no internal document named in what users read

_INTERNAL = re.compile(r"seed[ -]?0\d\d|HARDWARE\.md|DESIGN\.md|\bseeds?\b(?! =)", re.I)


def test_explain_renders_the_docstring_as_markdown(capsys: pytest.CaptureFixture[str]) -> None:
    from gpuadvise.cli.rules import run_explain

    assert run_explain("GA202") == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert all(ln == ln.rstrip() and len(ln) <= 160 for ln in lines)  # wrapped, not padded
    assert (
        lines[0]
        == "GA202 interleaved-reduction: Interleaved addressing in a shared-memory reduction"
    )
    assert "What it detects" in lines and "Fix safety" in lines
    assert not any(set(ln.strip()) == {"-"} for ln in lines)  # no reStructuredText underlines
    assert "``" not in out and "::" not in out.replace("::name", "")
    # the code block after "Reverse the loop and index by thread::" keeps its indentation
    assert "Reverse the loop and index by thread:" in lines
    assert any(
        ln.startswith(" for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {") for ln in lines
    )
    assert any(ln.startswith("     if (tid < s) sdata[tid] += sdata[tid + s];") for ln in lines)


def test_rst_headings_literals_and_blocks_become_markdown() -> None:
    from gpuadvise.report.rules_text import rst_to_markdown

    doc = (
        "Intro ``x < y``, :func:`gpuadvise.model.banks`.\n\n"
        "Fix\n---\nDo this::\n\n    a();\n      b();\n\nAfter."
    )
    md = rst_to_markdown(doc)
    assert md == (
        "Intro `x < y`, `gpuadvise.model.banks`.\n\n## Fix\nDo this:\n\n```cuda\na();\n  b();\n```\n"
        "\nAfter.\n"
    )


def test_no_internal_document_is_named_in_rules_or_generated_code() -> None:
    from gpuadvise.rules.registry import load_registry
    from gpuadvise.source.patch import tiled_block_index_lines

    for rule in load_registry():
        assert rule.origin is not None
        text = rule.origin.read_text()
        assert not _INTERNAL.search(text), (rule.id, _INTERNAL.search(text))
    for axis in ("x", "y"):
        code = "\n".join(tiled_block_index_lines(16, "tile", axis=axis))
        assert not _INTERNAL.search(code) and "NVIDIA" in code


# ---------------------------------------------------------------------------------------------
# CI: inline suppression, --exit-zero, --statistics


def test_ignore_comments_name_rules_by_id_or_name_outside_strings() -> None:
    from gpuadvise.rules.suppress import ignored_rules

    assert ignored_rules("x += y;  // gpuadvise: ignore[GA201]") == {"GA201"}
    assert ignored_rules("x += y;  /* gpuadvise: ignore[ga201, bank-conflicts] */") == {
        "GA201",
        "BANK-CONFLICTS",
    }
    assert ignored_rules("x += y;  // gpuadvise: ignore") == {"*"}
    assert ignored_rules('puts("// gpuadvise: ignore[GA201]");') is None
    assert ignored_rules("x += y;  // expect: GA201") is None


@pytest.fixture(scope="module")
def suppressed_case(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("suppressed")
    lines = REDUCE.read_text().splitlines()
    assert "sdata[index] += sdata[index + s]" in lines[33]
    assert "unsigned i = blockIdx.x * blockDim.x + threadIdx.x" in lines[27]
    lines[33] += "  // gpuadvise: ignore[GA201]"
    lines[27] = lines[27].replace("// expect: GA206", "/* gpuadvise: ignore */")
    (folder / "reduce.cu").write_text("\n".join(lines) + "\n")
    (folder / "case.toml").write_text((REDUCE.parent / "case.toml").read_text())
    return folder / "reduce.cu"


@pytest.mark.toolkit
def test_a_finding_ignored_on_its_line_is_dropped_and_counted(
    env: dict[str, str], suppressed_case: Path
) -> None:
    r = gpuadvise(env, "analyze", str(suppressed_case), "-k", "reduce2", "--gpu", "H100", "--json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert [(f["rule"], f["line"]) for f in doc["findings"]] == [("GA202", 32)]
    assert any(
        n.startswith("2 findings ignored by `gpuadvise: ignore` comments (")
        and "GA201 at line 34" in n
        for n in doc["notes"]
    ), doc["notes"]


@pytest.mark.toolkit
def test_statistics_and_exit_zero(env: dict[str, str]) -> None:
    args = ("analyze", "kernels/reduction/reduce.cu", "-k", "reduce2", "--gpu", "H100")
    r = gpuadvise(env, *args, "--statistics", "--fail-on", "warning")
    assert r.returncode == 1, r.stderr  # the findings fail the run ...
    assert [ln.split() for ln in r.stdout.splitlines()] == [
        ["1", "GA201", "bank-conflicts"],  # most findings first, then by id
        ["1", "GA202", "interleaved-reduction"],
        ["1", "GA206", "one-element-per-thread", "[*]", "1", "automatic"],
        ["3", "findings", "(1", "with", "an", "automatic", "fix:", "--diff", "shows", "them,",
         "--fix", "applies", "them)."],
    ]  # fmt: skip
    r = gpuadvise(env, *args, "--statistics", "--fail-on", "warning", "--exit-zero")
    assert r.returncode == 0, r.stderr  # ... unless --exit-zero
    assert r.stdout.splitlines()[-1].startswith("3 findings")
    bad = gpuadvise(env, *args, "--statistics", "--json")
    assert bad.returncode == 2 and bad.stderr.startswith("error: --statistics prints a text")


# ---------------------------------------------------------------------------------------------
# CI formats: GitHub annotations, Markdown, the gate's text and its locations


def _finding_run(est: float = 1.58) -> Any:
    from gpuadvise.rules import Estimate, Finding
    from gpuadvise.rules.evaluate import RulesRun

    f = Finding(
        "GA201", "bank-conflicts", "Bank conflicts", "warning", "conflicts", file="k.cu",
        line=34, kernel="reduce2", estimated_speedup=Estimate(est, "upper-bound", "m"),
    )  # fmt: skip
    notes = ("estimates only, nothing measured: PyCUDA is not installed",)
    return RulesRun((f, f, f), ("GA201",), notes)


def _finding_report(est: float = 1.58) -> Any:
    """The report the CI formats read of :func:`_finding_run` (kernel reduce2)."""
    from gpuadvise.report_types import AnalysisReport

    run = _finding_run(est)
    return AnalysisReport(
        {"kernel": {"name": "reduce2"}, "incomplete": run.incomplete_text},
        items=tuple(f.to_report_item() for f in run.findings),
        run_notes=run.notes,
    )


def test_github_annotates_findings_not_the_estimates_only_note() -> None:
    from gpuadvise.report.findings_formats import render_findings

    out = render_findings("github", _finding_report()).splitlines()
    assert out[0] == "gpuadvise: note: estimates only, nothing measured: PyCUDA is not installed"
    assert [ln.split(" ", 1)[0] for ln in out[1:]] == ["::warning"] * 3
    assert not any("estimates only" in ln for ln in out if ln.startswith("::"))


def test_markdown_lists_the_speedups_and_counts_in_plurals() -> None:
    from gpuadvise.report.findings_formats import render_findings

    md = render_findings("markdown", _finding_report())
    assert "⚠️ 3 warnings" in md and "3 warning " not in md
    assert "| rule | kernel | location | speedup | message |" in md
    assert "| GA201 | reduce2 | k.cu:34 | ≤ 1.58x (estimated, upper bound) | conflicts |" in md


def test_gate_text_folds_unchanged_rows_and_items_have_the_kernels_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from gate_fakes import SourceProvider

    from gpuadvise.cli.gate import gate_command

    kernel = (
        "// gate: registers={regs} spill_bytes=0 occupancy=0.5 time_ms=1.0\n\n"
        "__global__ void scale(float* out, const float* in, int n)\n{{\n"
        "    int i = blockIdx.x * blockDim.x + threadIdx.x;\n    if (i < n) out[i] = in[i];\n}}\n"
    )
    (tmp_path / "kernels").mkdir()
    (tmp_path / "kernels" / "scale.cu").write_text(kernel.format(regs=32))
    cases = "".join(
        f'\n[[gate.cases]]\nname = "{name}"\nsource = "kernels/scale.cu"\nkernel = "scale"\n'
        "grid = 64\nblock = 256\nargs = { n = 16384 }\n"
        'metrics = ["registers", "spill_bytes", "occupancy"]\n'
        for name in ("a", "b", "c")
    )
    (tmp_path / "gpuadvise.toml").write_text('[gate]\nbaseline = "base.json"\n' + cases)
    assert gate_command(update_baseline=True, provider=SourceProvider(), cwd=tmp_path) == 0
    capsys.readouterr()
    (tmp_path / "kernels" / "scale.cu").write_text(kernel.format(regs=40))
    assert gate_command(provider=SourceProvider(), cwd=tmp_path) == 1
    out = capsys.readouterr().out.splitlines()
    rows = [ln for ln in out if ln.split()[:1] in (["a"], ["b"], ["c"])]
    assert len(rows) == 3 and all("registers" in r and "regression" in r for r in rows)
    assert (
        "6 unchanged metrics in 3 cases not listed (--format json or markdown lists every row)"
        in out
    )
    assert out[-1].startswith("FAILED: 3 regressions, 6 same")
    # SARIF and GitHub name the kernel's line (its __global__ is line 3), not only the file
    sarif_file = tmp_path / "gate.sarif"
    kernels = tmp_path / "kernels"  # run from below the configuration
    gate_command(provider=SourceProvider(), cwd=kernels, formats=[f"sarif={sarif_file}", "github"])
    assert "::error file=kernels/scale.cu,line=3," in capsys.readouterr().out
    sarif = json.loads(sarif_file.read_text())
    loc = sarif["runs"][0]["results"][0]["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"]["uri"] == "kernels/scale.cu" and loc["region"]["startLine"] == 3


# ---------------------------------------------------------------------------------------------
# One unit for the L2 everywhere


@pytest.mark.toolkit
def test_devices_and_analyze_give_the_l2_in_the_same_unit(env: dict[str, str], reduce2_text: str):
    devices = gpuadvise(env, "devices").stdout.splitlines()
    h100 = next(ln for ln in devices if ln.split()[:1] == ["H100"])
    assert " 50 MiB " in h100
    l2 = next(ln for ln in reduce2_text.splitlines() if ln.strip().startswith("footprint"))
    assert "(0.50 x 50 MiB)" in l2 and " MB" not in l2


# ---------------------------------------------------------------------------------------------
# --format FMT=FILE, several at once, and one cache entry serving every format


@pytest.mark.toolkit
def test_format_file_pairs_and_the_cache_serves_every_format(
    env: dict[str, str], tmp_path: Path
) -> None:
    cache = tmp_path / "cache"
    env = {**env, "GPUADVISE_CACHE_DIR": str(cache)}
    src = tmp_path / "reduce.cu"
    src.write_text(REDUCE.read_text())
    (tmp_path / "case.toml").write_text((REDUCE.parent / "case.toml").read_text())
    args = ("analyze", str(src), "-k", "reduce2", "--arg", "n=65536", "--gpu", "H100")
    page, sarif = tmp_path / "report.html", tmp_path / "out.sarif"
    first = gpuadvise(env, *args, "--format", "text", "--format", f"html={page}",
                      "--format", f"sarif={sarif}")  # fmt: skip
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("reduce2  ") and "Summary: " in first.stdout
    assert page.read_text().startswith("<!DOCTYPE html>") and "GA202" in page.read_text()
    assert json.loads(sarif.read_text())["runs"][0]["results"][0]["ruleId"] == "GA202"
    (entry,) = (cache / "analysis").rglob("*.json")
    # mark the stored data (the cache holds the analysis' data, every format rendered from it
    # on each run): what is served from it shows the mark
    text = entry.read_text()
    assert "with 3.9-way bank" in text
    entry.write_text(text.replace("with 3.9-way bank", "with 3.9-way (cached) bank"))
    for fmt in ("text", "json", "sarif", "markdown", "html", "junit", "github"):
        r = gpuadvise(env, *args, "--format", fmt)
        assert r.returncode == 0 and "3.9-way (cached) bank" in r.stdout, (fmt, r.stderr)
    # the text report rendered from the stored data is the same run after run
    plain = gpuadvise(env, *args).stdout
    assert plain.startswith("reduce2  ") and gpuadvise(env, *args).stdout == plain
    # one format to stdout at most; text is for the terminal
    two = gpuadvise(env, *args, "--format", "json", "--format", "sarif")
    assert two.returncode == 2 and "more than one --format would go to stdout" in two.stderr
    bad = gpuadvise(env, *args, "--format", f"text={tmp_path / 'x.txt'}")
    assert bad.returncode == 2 and "--output needs a machine format" in bad.stderr


# ---------------------------------------------------------------------------------------------
# Progress and -v: what is running, how far it is, what was used


def test_a_step_of_known_size_shows_done_total_and_time_left() -> None:
    from gpuadvise.report.progress import step_text

    assert step_text(264, 1056, 4.0) == "264/1056, 4 s, about 12 s left"
    assert step_text(0, 1056, 0.5) == "0/1056, 0 s"  # no rate yet: no guess
    assert step_text(1056, 1056, 9.0) == "1056/1056, 9 s"
    assert step_text(0, None, 7.2) == "7 s"  # unknown size: the time spent only


def test_a_step_of_unknown_size_draws_no_bar() -> None:
    import time

    from rich.progress import Task

    from gpuadvise.report.progress import _known_bar

    bar = _known_bar()
    unknown = Task(0, "modelling", None, 0, _get_time=time.monotonic)
    known = Task(1, "emulating", 10, 5, _get_time=time.monotonic)
    assert bar.render(unknown).plain == ""  # rich would pulse a full-width bar
    assert type(bar.render(known)).__name__ == "ProgressBar"


@pytest.mark.toolkit
def test_verbose_says_which_nvcc_cache_tracer_and_timings(env: dict[str, str]) -> None:
    """What -v and -vv log, and that a run without them logs nothing; three processes (logging
    is set once per process), each compiling (--no-cache) and running every stage. Two CTAs
    traced: the log lines, not the trace's size, are what is checked (the default sample of
    the 2^22-int launch took about a fifth of each run's CPU)."""
    args = ("analyze", "kernels/reduction/reduce.cu", "-k", "reduce2", "--gpu", "H100",
            "--sample-ctas", "2")  # fmt: skip
    r = gpuadvise(env, "-v", *args, "--no-cache", "--statistics", process=True)
    assert r.returncode == 0, r.stderr
    err = r.stderr
    assert "INFO gpuadvise.toolchain.find: nvcc " in err and "(CUDA " in err
    assert "INFO gpuadvise.toolchain.compile: compiling reduce.cu for sm_90 (--no-cache)" in err
    assert "INFO gpuadvise.analyze.run: tracer: the CPU emulator" in err
    assert re.search(r"timings: compile [\d.]+ s, .*trace [\d.]+ s, .*rules [\d.]+ s", err)
    vv = gpuadvise(env, "-vv", *args, "--no-cache", "--statistics", process=True).stderr
    assert "DEBUG gpuadvise.toolchain.compile: running " in vv and " -cubin " in vv
    assert "DEBUG gpuadvise.analyze.run: rules: GA101 " in vv
    quiet = gpuadvise(env, *args, "--no-cache", "--statistics", process=True).stderr
    assert "INFO" not in quiet and "DEBUG" not in quiet


# ---------------------------------------------------------------------------------------------
# HTML: the fix badge says what was verified, the folder page is one ranked page


@pytest.mark.toolkit
def test_html_badges_say_unverified_and_hide_markers(env: dict[str, str], tmp_path: Path) -> None:
    page = tmp_path / "r.html"
    args = ("analyze", "kernels/reduction/reduce.cu", "-k", "reduce2", "--gpu", "H100")
    assert gpuadvise(env, *args, "--format", f"html={page}").returncode == 0
    html = page.read_text()
    assert '<span class="tag">automatic, unverified</span>' in html  # GA206's, nothing ran
    assert '<span class="tag">advice</span>' in html
    assert "automatic-and-verified" not in html
    source = html[html.index('id="source"') :]
    assert "sdata[index] += sdata[index + s];" in source
    assert "expect: GA201" not in source.split('class="diff"')[0]


def test_folder_page_times_and_case_sections() -> None:
    from gpuadvise.report.html import _case_body, _ms

    assert [_ms(v) for v in (1.2e-05, 0.0123, 0.5, 1.234, 2500.0, None)] == [
        "0.012 µs",
        "12.3 µs",
        "500 µs",
        "1.23 ms",
        "2,500 ms",
        "–",
    ]
    page = (
        '<html><main><h1>k</h1><a href="#findings">F</a><section id="findings">'
        '<a href="https://example.org">x</a><tr id="L0-3"></tr></section></main></html>'
    )
    body = _case_body(page, "c2-")
    assert body == (
        '<h2 class="case-title">k</h2><a href="#c2-findings">F</a><section id="c2-findings">'
        '<a href="https://example.org">x</a><tr id="c2-L0-3"></tr></section>'
    )


def test_the_outer_step_shown_after_the_inner_one_has_no_bar() -> None:
    import io
    import time

    from gpuadvise.report.progress import RichProgress, _Step

    shown = RichProgress(file=io.StringIO())
    try:
        inner = _Step("emulating 1056 CTAs", 1056, time.monotonic(), done=264)
        outer = _Step("tracing and modelling memory", None, time.monotonic())
        shown._show(inner)
        (task,) = shown._progress.tasks
        assert task.total == 1056 and task.completed == 264
        assert task.fields["extra"].startswith("264/1056, ")
        shown._show(outer)  # rich's update() would have kept the total of 1056
        (task,) = shown._progress.tasks
        assert task.description == "tracing and modelling memory" and task.total is None
    finally:
        shown.close()


@pytest.mark.toolkit
def test_counts_are_in_words_not_parenthesised_plurals(reduce2_text: str) -> None:
    assert "(s)" not in reduce2_text and "(es)" not in reduce2_text
    assert ", 1 barrier" in reduce2_text and "  8 blocks, 64 of 64 warps per SM" in reduce2_text
