"""benchmarks/accuracy.py's comparison (the bound and point a measurement is held against) and
benchmarks/accuracy_offline.py's join of stored measurements with fresh estimates."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from accuracy import compared, held_lines, measurable_names  # noqa: E402
from accuracy_offline import join  # noqa: E402


def _row(**kw: Any) -> dict[str, Any]:
    base = {"suite": "kernels", "kernel": "k", "rule": "GA301", "line": 7, "estimate": 4.0,
            "estimate_kind": "upper-bound", "point": 3.0, "proxy_point": None,
            "proxy_bound": None, "measured": None, "measured_kind": None}  # fmt: skip
    return {**base, **kw}


def test_a_proxy_measurement_is_held_against_the_proxy_estimate() -> None:
    r = _row(proxy_point=1.5, proxy_bound=2.0, measured=1.8, measured_kind="proxy")
    assert compared(r) == (2.0, 1.5)
    # a variant measurement: the finding's own bound and point
    assert compared({**r, "measured_kind": "variant"}) == (4.0, 3.0)
    # a point estimate has no bound
    assert compared(_row(estimate=1.3, estimate_kind="point", point=None)) == (None, 1.3)


def test_held_lines_count_and_errors() -> None:
    rows = [
        _row(measured=2.0, measured_kind="variant"),  # 2.0 <= 4.0: held; point error 50%
        _row(line=8, estimate=1.0, point=1.0, measured=1.06, measured_kind="variant"),  # > 1.05
    ]
    text = "\n".join(held_lines(rows))
    assert "bounds that held (measured <= 1.05 x bound): 1 of 2" in text
    assert "| k | GA301 | 8 | 1.00x | 1.00x | -, - | 1.06x | **no** | 6% |" in text
    # bound / measured: 4.0 / 2.0 = 2.0 and 1.0 / 1.06 = 0.94: median 1.47
    assert "bound / measured: median 1.47, largest 2.00" in text
    assert "median 28%, mean 28%, 90th percentile 50%" in text  # (50% + 5.7%) / 2
    # issue 29's targets, each said to be met or not
    assert "bounds 1 of 2 held (100%: not met)" in text
    assert "median 28% (<= 10%: not met); 90th percentile 50% (<= 35%: not met)" in text
    assert "points off by more than 3x: 0" in text


def test_targets_name_the_terms_and_the_wild_points() -> None:
    rows = [
        _row(measured=2.0, measured_kind="variant", bound_by=["dependency", "launch"]),
        _row(line=9, estimate=8.0, point=7.0, measured=2.0, measured_kind="variant"),  # 3.5x
        _row(line=10, estimate=4.0, point=0.5, measured=1.6, measured_kind="variant"),  # 0.31x
    ]
    text = "\n".join(held_lines(rows))
    assert "| k | GA301 | 7 | 4.00x | 3.00x | dependency, launch | 2.00x | yes | 50% |" in text
    assert "bounds 3 of 3 held (100%: met)" in text
    assert "points off by more than 3x: 2 (k GA301 line 9 (3.50x); k GA301 line 10 (0.31x))" in text
    # nearest-rank 90th percentile of 50%, 250%, 69%: the largest
    assert "90th percentile 250%" in text


def test_join_pairs_repeated_keys_in_order() -> None:
    stored = [_row(measured=3.9, measured_kind="proxy"), _row(measured=3.8, measured_kind="proxy"),
              _row(line=9, measured=1.1)]  # fmt: skip
    fresh = [_row(point=5.0), _row(point=6.0)]
    got = join(stored, fresh)
    assert [(g["point"], g["measured"]) for g in got[:2]] == [(5.0, 3.9), (6.0, 3.8)]
    # line 9 is no finding now: kept, without an estimate
    assert got[2]["missing"] and got[2]["estimate"] is None and got[2]["measured"] == 1.1


def test_measurable_names_from_either_run(tmp_path: Path) -> None:
    import json

    rows = {"rows": [_row(kernel="a", measurable=True), _row(kernel="b", measurable=False)]}
    runs = {"runs": [
        {"name": "hecbench/x/k", "findings": [{"variant": {"diff": "--- a"}}]},
        {"name": "hecbench/y/k", "findings": [{"variant": {"safety": "display-only"}}]},
        {"name": "hecbench/z/k", "findings": [{"variant": None}, {"variant": {"proxy": {}}}]},
    ]}  # fmt: skip
    p, q = tmp_path / "rows.json", tmp_path / "results.json"
    p.write_text(json.dumps(rows))
    q.write_text(json.dumps(runs))
    assert measurable_names(p) == {"a"}
    # an empty proxy table is no proxy; a diff is
    assert measurable_names(q) == {"hecbench/x/k"}
