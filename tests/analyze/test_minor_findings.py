"""Which warnings are minor (gpuadvise.analyze.evaluate.is_minor): an upper bound on the launch
model is judged like for like, by the larger of its point (both sides at sustained rates) and its
peak figure (both at peak rates and full overlap), never by the bound alone, which credits any
change with the model's sustained-to-peak margin (issue 27: a grid of 128 CTAs on 132 SMs of an
issue-bound softmax got "1.22x" for 4 more SMs)."""

from __future__ import annotations

from typing import Any

import pytest

from gpuadvise import rules as R
from gpuadvise.analyze.evaluate import is_minor


def warning(speedup: float | None, kind: str = "upper-bound", **inputs: Any) -> R.Finding:
    est = R.Estimate(speedup, kind, "test", inputs)  # type: ignore[arg-type]
    return R.Finding("GA102", "tail-effect", "t", "warning", "m", estimated_speedup=est)


@pytest.mark.parametrize(
    ("bound", "inputs", "minor"),
    [
        # softmax: 4 more SMs of an issue-bound launch, 1.03x either way; the bound is the margin
        (1.222, {"point_speedup": 1.03, "peak_speedup": 1.031}, True),
        # a small grid whose critical path the fix splits: the peak figure carries the split
        (1.8, {"point_speedup": 1.0, "peak_speedup": 1.6}, False),
        # a prediction above the bar: a warning whatever the peak says
        (1.3, {"point_speedup": 1.2, "peak_speedup": 1.01}, False),
        # no peak figure: memory-bound before and after, the point decides (as before)
        (1.2, {"point_speedup": 1.0, "bound_by_before": "dram", "bound_by_after": "l2"}, True),
        # no peak figure and not memory-bound: the bound decides
        (1.2, {"point_speedup": 1.0, "bound_by_before": "issue", "bound_by_after": "issue"}, False),
        # a bound at the bar
        (1.04, {}, True),
    ],
)
def test_upper_bounds_are_judged_like_for_like(bound, inputs, minor):
    assert is_minor(warning(bound, **inputs), 1.05) is minor


def test_a_point_estimate_is_its_own_judge():
    assert not is_minor(warning(1.2, "point", peak_speedup=1.0), 1.05)
    assert is_minor(warning(1.04, "point", point_speedup=1.5), 1.05)


def test_no_number_is_never_minor():
    assert not is_minor(warning(None, "none"), 1.05)
