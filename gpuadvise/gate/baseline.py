"""Baseline files: the recorded numbers of every case, read, checked, merged and written.

A baseline file is only ever replaced by a baseline: :func:`check_baseline_target` refuses a path
that holds anything else (a kernel, a configuration, a broken file), a symbolic link (never written
through), or a path inside ``.git``, before anything is measured. The file replaced keeps its mode.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from gpuadvise import __version__
from gpuadvise.errors import ConfigError, UsageError
from gpuadvise.fileio import folder_write_problem, target_problem, write_atomic
from gpuadvise.gate.provider import Environment
from gpuadvise.inputfiles import parse_json, read_input_bytes
from gpuadvise.runner.stats import TimingStats

__all__ = [
    "BASELINE_KIND",
    "BASELINE_SCHEMA_VERSION",
    "Baseline",
    "BaselineError",
    "CaseBaseline",
    "baseline_from_json",
    "check_baseline_target",
    "dump_baseline",
    "load_baseline",
    "merge_baseline",
    "write_baseline",
]

BASELINE_SCHEMA_VERSION = 1
BASELINE_KIND = "gpuadvise-gate-baseline"
BASELINE_LIMIT_BYTES = 64 << 20
"""The largest baseline read (64 MiB: a thousand cases of a thousand timing samples take 20)."""


class BaselineError(ConfigError):
    """A baseline file that is missing, corrupt, or of another schema version."""


@dataclass(frozen=True)
class CaseBaseline:
    """One case's recorded numbers: static values (None: unavailable) and timing samples."""

    metrics: Mapping[str, float | None] = field(default_factory=dict)
    timing: TimingStats | None = None
    kernel: str | None = None
    source: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "kernel": self.kernel,
            "source": self.source,
            "metrics": dict(self.metrics),
            "timing": None if self.timing is None else self.timing.to_dict(),
        }


@dataclass(frozen=True)
class Baseline:
    """A baseline file: per-case numbers and what they were produced with.

    ``environment`` is that of the static metrics (toolchain, static device model),
    ``timing_environment`` that of the stored timings (the GPU, its driver); either is None when
    no such numbers were recorded.
    """

    cases: Mapping[str, CaseBaseline]
    environment: Environment | None = None
    timing_environment: Environment | None = None
    created: str = ""
    source_rev: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": BASELINE_SCHEMA_VERSION,
            "kind": BASELINE_KIND,
            "created": self.created,
            "source_rev": self.source_rev,
            "environment": None if self.environment is None else self.environment.to_dict(),
            "timing_environment": (
                None if self.timing_environment is None else self.timing_environment.to_dict()
            ),
            "cases": {name: c.to_dict() for name, c in self.cases.items()},
        }


_REGEN = "re-create it with `gpuadvise gate --update-baseline`, or restore it from git"
# A file that is not (recognisably) a baseline is never replaced: the user removes it first.
_REPLACE = (
    "restore it from git, or delete it and record a new one with `gpuadvise gate --update-baseline`"
)
_NOT_BASELINE = (
    "check the path: a baseline is the JSON file `gpuadvise gate --update-baseline` writes"
)


def baseline_from_json(text: str, where: str = "baseline") -> Baseline:
    """Parse and check a baseline document; any problem is a one-line :class:`BaselineError`."""
    try:
        doc = parse_json(text)
    except ValueError as err:
        raise BaselineError(f"baseline {where} is corrupt (not JSON: {err})", _REPLACE) from None
    if not isinstance(doc, dict) or doc.get("kind") != BASELINE_KIND:
        raise BaselineError(f"{where} is not a gpuadvise gate baseline", _NOT_BASELINE)
    version = doc.get("schema_version")
    if version != BASELINE_SCHEMA_VERSION:
        raise BaselineError(
            f"baseline {where} has schema_version {version!r}; gpuadvise {__version__} reads "
            f"schema_version {BASELINE_SCHEMA_VERSION}",
            "re-create it with `gpuadvise gate --update-baseline` (or use the gpuadvise "
            "version that wrote it)",
        )
    at = "cases"
    try:
        cases: dict[str, CaseBaseline] = {}
        raw_cases = doc["cases"]
        if not isinstance(raw_cases, dict):
            raise TypeError("cases must be an object")
        for name, c in raw_cases.items():
            at = f"cases.{name}"
            if not isinstance(c, dict):
                raise TypeError("must be an object")
            values: dict[str, float | None] = {}
            raw_metrics = c.get("metrics", {})
            if not isinstance(raw_metrics, dict):
                raise TypeError("metrics must be an object")
            for metric, v in raw_metrics.items():
                at = f"cases.{name}.metrics.{metric}"
                if v is not None and (
                    isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v)
                ):
                    raise TypeError(f"{v!r} is not a number")
                values[metric] = None if v is None else float(v)
            at = f"cases.{name}.timing"
            t = c.get("timing")
            timing = None if t is None else TimingStats.from_dict(t)
            if timing is not None and len(timing.samples_ms) != timing.n:
                raise ValueError("n does not match the samples")
            cases[name] = CaseBaseline(values, timing, c.get("kernel"), c.get("source"))
        at = "environment"
        env = doc.get("environment")
        environment = None if env is None else Environment.from_dict(env)
        at = "timing_environment"
        tenv = doc.get("timing_environment")
        timing_environment = None if tenv is None else Environment.from_dict(tenv)
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        detail = f"missing {err}" if isinstance(err, KeyError) else str(err)
        raise BaselineError(f"baseline {where} is corrupt at {at} ({detail})", _REGEN) from None
    return Baseline(
        cases=cases,
        environment=environment,
        timing_environment=timing_environment,
        created=str(doc.get("created", "")),
        source_rev=doc.get("source_rev"),
    )


def load_baseline(path: Path) -> Baseline:
    """Read a baseline file (:class:`BaselineError` when missing, unreadable or corrupt)."""
    if not Path(path).exists() and not Path(path).is_symlink():
        raise BaselineError(
            f"no baseline at {path}",
            "record one with `gpuadvise gate --update-baseline` (on the main branch), or "
            "compare with the base revision: --baseline-ref REV",
        )
    try:
        data = read_input_bytes(path, "baseline", limit_bytes=BASELINE_LIMIT_BYTES)
    except ConfigError as exc:
        raise BaselineError(exc.message, exc.hint) from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise BaselineError(f"baseline {path} is corrupt (not UTF-8 text)", _REPLACE) from None
    return baseline_from_json(text, str(path))


def dump_baseline(baseline: Baseline) -> str:
    return json.dumps(baseline.to_dict(), indent=2, allow_nan=False) + "\n"


def check_baseline_target(path: Path) -> None:
    """Refuse (:class:`~gpuadvise.errors.UsageError`) to record a baseline at ``path`` unless the
    file is missing or already holds a gpuadvise gate baseline (of any schema version), and its
    folder can be written, and it is no symbolic link (nor inside ``.git``: see
    :func:`gpuadvise.fileio.target_problem`). Called before anything is measured."""
    refused = target_problem(path)
    if refused is not None:
        what, fix = refused
        raise UsageError(
            f"the baseline {path} {what}", fix.replace("gpuadvise", "--update-baseline")
        )
    if path.is_dir():
        raise UsageError(
            f"the baseline path {path} is a folder",
            "name a file, e.g. --baseline .gpuadvise/gate-baseline.json",
        )
    if path.exists():
        if not path.is_file():
            raise UsageError(f"the baseline path {path} is not a regular file", _NOT_BASELINE)
        kind = None
        try:
            doc = parse_json(read_input_bytes(path, "baseline", limit_bytes=BASELINE_LIMIT_BYTES))
            kind = doc.get("kind") if isinstance(doc, dict) else None
        except (ConfigError, ValueError):
            pass
        if kind != BASELINE_KIND:
            raise UsageError(
                f"{path} is not a gpuadvise gate baseline, and --update-baseline replaces only "
                "a baseline",
                "check the --baseline path (or `baseline` in the gate config); if it is a "
                "broken baseline, delete it first",
            )
    problem = folder_write_problem(path.parent)
    if problem is not None:
        raise UsageError(
            f"cannot write the baseline {path}: {problem}",
            "choose a --baseline path on a writable file system",
        )


def write_baseline(path: Path, baseline: Baseline) -> None:
    """Write ``baseline`` to ``path`` atomically and durably (nothing is left behind when that
    fails: a one-line :class:`~gpuadvise.errors.UsageError`)."""
    try:
        write_atomic(path, dump_baseline(baseline), durable=True)
    except OSError as err:
        raise UsageError(
            f"cannot write the baseline {path} ({err.strerror or err})",
            "choose a --baseline path on a writable file system",
        ) from None


def merge_baseline(
    previous: Baseline | None, new: Baseline, *, static: bool, timed: bool
) -> Baseline:
    """``new`` with the parts it did not measure taken from ``previous``.

    A CPU job that records only static metrics keeps the timings a GPU job recorded, and the
    other way round. Cases not in ``new`` (no longer configured) are dropped.
    """
    if previous is None or (static and timed):
        return new
    cases = {}
    for name, c in new.cases.items():
        old = previous.cases.get(name)
        metrics = c.metrics if static else (old.metrics if old else {})
        timing = c.timing if timed else (old.timing if old else None)
        cases[name] = replace(c, metrics=dict(metrics), timing=timing)
    return replace(
        new,
        cases=cases,
        environment=new.environment if static else previous.environment,
        timing_environment=new.timing_environment if timed else previous.timing_environment,
    )
