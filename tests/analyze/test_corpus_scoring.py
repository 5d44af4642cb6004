"""The stranger corpus' scoring (benchmarks/corpus/corpus.py): what counts as found, right, wrong,
unjudged; and that the manifests in the repository load (vocabulary, names, repos)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

CORPUS = Path(__file__).resolve().parents[2] / "benchmarks" / "corpus"
sys.path.insert(0, str(CORPUS))
import corpus  # noqa: E402

HEAD = """
[repos.r]
repo = "o/n"
commit = "abc"
licence = "MIT"
files = ["k.cu"]
"""


def _write(tmp_path: Path, body: str, name: str = "s.toml") -> Path:
    p = tmp_path / name
    p.write_text(HEAD + body)
    return p


KERNEL = """
[[kernels]]
name = "r/k"
repo = "r"
path = "src/k.cu"
kernel = "k"
grid = 1
block = 32
silent = ["bank-conflicts"]
[[kernels.expect]]
problem = "uncoalesced-strided"
lines = [40, 41]
main = true
why = "A[i*N+j]"
[[kernels.expect]]
problem = "too-little-parallelism"
lines = []
main = false
why = "one CTA"
"""


def _kernel(tmp_path: Path) -> corpus.Kernel:
    return corpus.load([_write(tmp_path, KERNEL)], judged=None).kernels[0]


def test_a_warning_covers_its_problem_at_its_line_within_two(tmp_path: Path) -> None:
    k = _kernel(tmp_path)
    f = corpus.Finding("GA301", 43, "/x/src/k.cu", "warning")
    s = corpus.score_kernel(k, "ok", [f], {})
    assert (s.main_found, s.main_total, s.right) == (1, 1, ["GA301:43"])
    far = corpus.Finding("GA301", 44, "/x/src/k.cu", "warning")
    s = corpus.score_kernel(k, "ok", [far], {})
    assert s.main_found == 0 and s.missed == ["uncoalesced-strided@40,41"]
    assert s.unjudged == ["GA301:44"]


def test_other_file_rule_or_a_note_does_not_cover(tmp_path: Path) -> None:
    k = _kernel(tmp_path)
    other_file = corpus.Finding("GA301", 40, "/x/src/helpers.h", "warning")
    other_rule = corpus.Finding("GA303", 40, "/x/src/k.cu", "warning")
    note = corpus.Finding("GA301", 40, "/x/src/k.cu", "note")
    s = corpus.score_kernel(k, "ok", [other_file, other_rule, note], {})
    assert s.main_found == 0
    assert s.unjudged == ["GA301:40", "GA303:40"]  # the note is not a warning


def test_launch_wide_expectation_matches_any_line(tmp_path: Path) -> None:
    k = _kernel(tmp_path)
    s = corpus.score_kernel(k, "ok", [corpus.Finding("GA102", 3, "k.cu", "warning")], {})
    assert s.right == ["GA102:3"] and s.main_found == 0


def test_silent_problem_is_wrong_and_judgement_wins(tmp_path: Path) -> None:
    k = _kernel(tmp_path)
    conflict = corpus.Finding("GA201", 12, "k.cu", "warning")
    s = corpus.score_kernel(k, "ok", [conflict], {})
    assert s.wrong == ["GA201:12"]
    judged = {("r/k", "GA201", 12): ("minor", "a 2-way conflict on a rare path")}
    s = corpus.score_kernel(k, "ok", [conflict], judged)
    assert s.wrong == [] and s.minor == ["GA201:12"]


def test_failed_kernel_misses_its_main_problems(tmp_path: Path) -> None:
    s = corpus.score_kernel(_kernel(tmp_path), "timeout", [], {})
    assert s.main_found == 0 and s.missed == ["uncoalesced-strided@40,41"]


def test_totals(tmp_path: Path) -> None:
    k = _kernel(tmp_path)
    fs = [corpus.Finding("GA301", 40, "k.cu", "warning"), corpus.Finding("GA201", 9, "k.cu", "warning"),
          corpus.Finding("GA104", 9, "k.cu", "warning")]  # fmt: skip
    t = corpus.totals([corpus.score_kernel(k, "ok", fs, {})])
    assert (t.right, t.wrong, t.unjudged, t.warnings) == (1, 1, 1, 3)
    assert t.recall == 1.0 and t.precision == 0.5 and t.wrong_share == pytest.approx(1 / 3)
    assert t.wrong_by_rule == {"GA201": 1} and t.unjudged_by_rule == {"GA104": 1}


MECHANICAL_KERNEL = KERNEL.replace(
    'problem = "too-little-parallelism"', 'problem = "fp64-promotion"'
)


def test_mechanical_fixes_counted_on_right_warnings_of_mechanical_problems(tmp_path: Path) -> None:
    """Issue 28's share: warnings meeting an expectation whose problem is mechanical, those with
    an automatic variant, and those --diff applied with outputs verified (None without --diff)."""
    k = corpus.load([_write(tmp_path, MECHANICAL_KERNEL)], judged=None).kernels[0]
    fs = [
        corpus.Finding("GA301", 40, "k.cu", "warning", variant_safety="automatic-and-verified"),
        corpus.Finding("GA404", 7, "k.cu", "warning", variant_safety="automatic-and-verified"),
    ]
    s = corpus.score_kernel(k, "ok", fs, {})  # GA301's uncoalesced-strided is not mechanical
    assert (s.mechanical, s.automatic, s.fixed) == (["GA404:7"], ["GA404:7"], None)
    fs[1] = corpus.Finding("GA404", 7, "k.cu", "warning", variant_safety="display-only",
                           fix_status="not applied")  # fmt: skip
    t = corpus.totals([corpus.score_kernel(k, "ok", fs, {})])
    assert (t.mechanical, t.automatic, t.fixed) == (1, 0, 0)
    fs[1] = corpus.Finding("GA404", 7, "k.cu", "warning", variant_safety="automatic-and-verified",
                           fix_status="applied")  # fmt: skip
    t = corpus.totals([corpus.score_kernel(k, "ok", fs, {})])
    assert (t.mechanical, t.automatic, t.fixed) == (1, 1, 1)
    assert corpus.MECHANICAL <= corpus.VOCABULARY


def test_findings_of_reads_the_variant_and_the_fix_step() -> None:
    doc = {
        "findings": [
            {"rule": "GA404", "line": 7, "file": "k.cu", "severity": "warning",
             "variant": {"safety": "automatic-and-verified"}},
            {"rule": "GA201", "line": 9, "file": "k.cu", "severity": "warning", "variant": None},
        ],
        "fix": {"steps": [{"rule": "GA404", "line": 7, "status": "applied"}]},
    }  # fmt: skip
    a, b = corpus.findings_of(doc)
    assert (a.variant_safety, a.fix_status) == ("automatic-and-verified", "applied")
    assert (b.variant_safety, b.fix_status) == (None, "not offered")
    doc.pop("fix")
    assert corpus.findings_of(doc)[0].fix_status is None


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (KERNEL.replace("uncoalesced-strided", "slow"), "not in the vocabulary"),
        (KERNEL.replace('silent = ["bank-conflicts"]', 'silent = ["GA201"]'), "silent names"),
        (KERNEL + KERNEL, "used twice"),
        (KERNEL + "clean = true\n", "clean inside a"),
        (KERNEL.replace('repo = "r"', 'repo = "q"'), "not in any [repos]"),
    ],
)
def test_broken_manifests_are_refused(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(corpus.ManifestError, match=message.replace("[", r"\[")):
        corpus.load([_write(tmp_path, body)], judged=None)


def test_a_repo_in_two_slices_needs_one_commit_and_merges_files(tmp_path: Path) -> None:
    a = _write(tmp_path, "", "a.toml")
    b = tmp_path / "b.toml"
    b.write_text(HEAD.replace('"k.cu"', '"h.cuh"'))
    assert corpus.load([a, b], judged=None).repos["r"].files == ("k.cu", "h.cuh")
    b.write_text(HEAD.replace('"abc"', '"abd"'))
    with pytest.raises(corpus.ManifestError, match="use one commit"):
        corpus.load([a, b], judged=None)


def test_every_rule_maps_to_known_problems() -> None:
    rules = sorted(p.name[:5].upper() for p in (CORPUS.parents[1] / "rules").glob("ga*.py"))
    assert sorted(corpus.PROBLEMS_OF_RULE) == rules
    for problems in corpus.PROBLEMS_OF_RULE.values():
        assert set(problems) <= corpus.VOCABULARY


def test_the_committed_corpus_loads() -> None:
    c = corpus.load()
    for k in c.kernels:
        assert k.repo in c.repos
