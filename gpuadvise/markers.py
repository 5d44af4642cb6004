"""The ``// expect: GA201`` markers of the bundled kernels: the test suite's annotation of the
line a rule must flag (read by the golden test through the rule engine, hidden by the reports)."""

from __future__ import annotations

import re

__all__ = ["EXPECT_RE"]

EXPECT_RE = re.compile(r"//\s*expect:\s*((?:GA\d{3})(?:\s*,\s*GA\d{3})*)")
