"""The property-based tests' profiles (hypothesis) and the number of examples a test runs. No
tests in here.

A test writes the number of examples it needs, wrapped: ``@settings(max_examples=examples(300))``.

- ``ci``: every test runs the number it wrote (a test that writes none runs hypothesis's 100).
  The README's test command and ``.ci/run`` choose it (``--hypothesis-profile=ci``), and so does
  any run with the ``CI`` environment variable set (GitHub Actions, GitLab CI and most others set
  it).
- ``dev``: the default of any other run (``pytest tests/spec``, ``-k ...`` while working): a
  quarter of that number, at least 10 (or the number written, when it is below 10).

``--hypothesis-profile=NAME`` chooses one for a run; the profile's ``max_examples`` against
hypothesis's default of 100 is the share of the written number a test runs.
"""

from __future__ import annotations

import os

from hypothesis import settings

__all__ = ["FULL", "examples", "load_default_profile"]

FULL = 100
"""The ``ci`` profile's ``max_examples`` (hypothesis's default): the full count."""

settings.register_profile("ci", max_examples=FULL)
settings.register_profile("dev", max_examples=FULL // 4)


def load_default_profile() -> str:
    """Load the profile of a run that names none: ``ci`` with ``CI`` set, else ``dev``."""
    name = "ci" if os.environ.get("CI", "").strip().lower() not in ("", "0", "false") else "dev"
    settings.load_profile(name)
    return name


def examples(full: int) -> int:
    """The examples a test that needs ``full`` of them runs under the loaded profile."""
    share = settings.default.max_examples
    if share >= FULL:
        return full
    return max(min(full, 10), full * share // FULL)
