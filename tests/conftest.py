"""Shared test setup. The test folders mirror the package's (tests/rules for gpuadvise/rules and
rules/, tests/model for gpuadvise/model, ...); helper modules shared across folders (rulekit,
gate_fakes) live here at the top and are importable from every folder."""

from __future__ import annotations

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
if str(TESTS) not in sys.path:
    sys.path.insert(0, str(TESTS))
