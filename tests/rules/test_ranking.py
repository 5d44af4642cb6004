"""The ranking's tie-breaks: a finding with an automatic fix above advice of equal value, and a
cause above the symptom it explains (read from the fixes' diffs, issue 32)."""

from __future__ import annotations

import gpuadvise.rules as rule_api
import gpuadvise.rules.findings as rule_findings
import gpuadvise.rules.ranking as rule_ranking
from gpuadvise.source.patch import changed_lines

# a fix of lines 31-34 (GA202's sequential addressing) in reduce.cu
_TREE_DIFF = """\
--- a/k.cu
+++ b/k.cu
@@ -30,6 +30,5 @@
     __syncthreads();
-    for (unsigned s = 1; s < blockDim.x; s *= 2) {
-        unsigned index = 2 * s * tid;
-        if (index < blockDim.x) {
-            sdata[index] += sdata[index + s];
+    for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
+        if (tid < s) {
+            sdata[tid] += sdata[tid + s];
         }
"""


def _f(
    rule: str,
    line: int = 1,
    est: float | None = None,
    safety: str | None = None,
    diff: str | None = None,
    file: str = "k.cu",
) -> rule_api.Finding:
    e = None if est is None else rule_api.Estimate(est, "upper-bound", "m")
    v = None if safety is None else rule_api.Variant(safety, "fix", diff=diff)  # type: ignore[arg-type]
    return rule_api.Finding(
        rule, "a-b", "t", "warning", "m", file=file, line=line, estimated_speedup=e, variant=v
    )


def test_changed_lines_are_the_old_lines_a_diff_removes_or_replaces() -> None:
    assert changed_lines(_TREE_DIFF) == {31, 32, 33, 34}
    insert_only = "@@ -5,2 +5,3 @@\n a\n+b\n c\n"
    assert changed_lines(insert_only) == set()
    assert changed_lines("@@ -7 +7 @@\n-x\n+y\n") == {7}


def test_an_automatic_fix_outranks_advice_of_equal_value() -> None:
    fs = [
        _f("GA1", est=1.5),
        _f("GA2", est=1.5, safety="display-only"),
        _f("GA3", est=1.5, safety="automatic-and-verified"),
        _f("GA5", est=2.0),  # a higher value still comes first
    ]
    proxied = rule_api.Finding(
        "GA4", "a-b", "t", "warning", "m", file="k.cu", line=1,
        estimated_speedup=rule_api.Estimate(1.5, "upper-bound", "m"),
        variant=rule_api.Variant(
            "proxy", "fix", proxy=rule_findings.Proxy("src", "a", "b", "sa", "sb")
        ),
    )  # fmt: skip
    ranked = [f.rule for f in rule_ranking.rank_findings([*fs, proxied])]
    assert ranked == ["GA5", "GA3", "GA4", "GA2", "GA1"]
    # no number at all: the automatic fix still comes first
    none = [_f("GA1"), _f("GA2", safety="display-only"), _f("GA3", safety="automatic-and-verified")]
    assert [f.rule for f in rule_ranking.rank_findings(none)] == ["GA3", "GA2", "GA1"]


def test_the_cause_goes_right_above_the_symptom_its_fix_rewrites() -> None:
    symptom = _f("GA201", line=34, est=1.58, safety="display-only")  # no diff: advice
    cause = _f("GA202", line=32, safety="display-only", diff=_TREE_DIFF)
    other = _f("GA206", line=28, safety="automatic-and-verified", diff="@@ -28 +28 @@\n-x\n+y\n")
    ranked = [f.rule for f in rule_ranking.rank_findings([symptom, other, cause])]
    assert ranked == ["GA202", "GA201", "GA206"]
    assert rule_ranking.explains(cause, symptom) and not rule_ranking.explains(symptom, cause)


def test_no_cause_across_files_lines_not_rewritten_or_fixes_of_each_other() -> None:
    cause = _f("GA202", line=32, safety="display-only", diff=_TREE_DIFF)
    elsewhere = _f("GA201", line=34, est=1.5, file="other.cu")
    below = _f("GA201", line=40, est=1.5)  # a line the fix keeps
    assert not rule_ranking.explains(cause, elsewhere)
    assert not rule_ranking.explains(cause, below)
    assert [f.rule for f in rule_ranking.rank_findings([below, cause])] == ["GA201", "GA202"]
    # the symptom's fix rewrites the cause's line too: they explain each other, order by value
    mutual = _f("GA303", line=34, est=1.2, safety="automatic-and-verified", diff=_TREE_DIFF)
    assert not rule_ranking.explains(cause, mutual)
    assert [f.rule for f in rule_ranking.rank_findings([cause, mutual])] == ["GA303", "GA202"]
